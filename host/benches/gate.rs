//! The gate's decision on a cache hit for two domains (crs_datum and resampling), in process:
//! classify in both components, render (memoised) and hash their prompts, derive the keys, and
//! verify both capsules on disk; then the same with the operator's guide policy loaded
//! (`docs/operators.md`, issue 20), alternating, and the policy's own evaluation (facts and
//! ruling) alone. Run with `cargo bench -p gdal-mcp --bench gate`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::{CallFacts, Registry};
use gdal_mcp::domains::{EvidenceItem, Severity, Trigger};
use gdal_mcp::gdal::facts;
use gdal_mcp::reflection::gate::{Gate, Verdict};
use gdal_mcp::reflection::policy::{Facts, Outcome, Policy, Vocabulary};
use gdal_mcp::reflection::store::CapsuleStore;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    gdal_mcp::gdal::init();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dem = root.join("target/testdata/dem.tif");
    assert!(
        dem.is_file(),
        "run tests/fixtures/fetch-data.sh target/testdata first"
    );
    let store_dir = tempfile::tempdir().expect("tempdir");
    let registry = Registry::load(&[], None, Limits::default()).expect("domains");
    let gate = Gate::new(
        Arc::new(registry),
        CapsuleStore::new(store_dir.path().to_path_buf()),
    );

    let input = facts::gather("input", &dem).expect("facts");
    let target = facts::parse_crs("dst_crs", "EPSG:4326").expect("crs");
    let call = CallFacts {
        tool: "raster_reproject".to_string(),
        arguments: json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}),
        datasets: vec![input],
        target_crs: Some(facts::crs_facts(&target)),
        transformation: None,
        upstream: Vec::new(),
        measurement: None,
        output: None,
        grids: None,
    };
    // What the built-in domains ask of a required finding since issue 18 (the e2e suite's
    // `justification`): what must survive, the tolerance accepted, a CRS considered by code.
    let justification = |method: &str| {
        json!({"intent": "overlay the DEM with geographic basemap layers for a regional map",
               "alternatives": [
                   {"method": "EPSG:3857 (Web Mercator)", "why_not": "the basemap tiles reproject on their own"},
                   {"method": "nearest", "why_not": "nearest makes steps in a smooth surface"},
                   {"method": "cubic", "why_not": "cubic overshoots next to sharp edges"}],
               "choice": {"method": method,
                          "rationale": "matches the analysis layers and the data's continuous nature; positions, areas and distances must survive for the regional map",
                          "tradeoffs": "sub-pixel smoothing; up to 1000 m of positional error and scale errors up to 500 % are accepted"},
               "confidence": "medium"})
    };
    let inline = BTreeMap::from([
        ("crs_datum".to_string(), justification("EPSG:4326")),
        ("resampling".to_string(), justification("bilinear")),
    ]);
    match gate.decide(&call, &inline).expect("decide") {
        Verdict::Proceed(receipts) => assert_eq!(receipts.len(), 2),
        Verdict::Refuse { entries, .. } => panic!(
            "the inline justifications should be accepted: {:?}",
            entries.iter().map(|e| &e.errors).collect::<Vec<_>>()
        ),
    }

    let none = BTreeMap::new();
    let guide = std::fs::read_to_string(root.join("docs/operators.md")).expect("guide");
    let start = guide.find("```toml\n").expect("toml block") + 8;
    let text = &guide[start..start + guide[start..].find("```").expect("end")];
    let vocabulary = Vocabulary::new(
        ["raster_reproject", "vector_measure"],
        gate.registry()
            .all()
            .iter()
            .map(|d| (d.info.id.as_str(), true)),
    );
    let policy = Arc::new(Policy::parse(text, "operators.md", &vocabulary).expect("policy"));
    let with_policy = Gate::new(
        gate.registry().clone(),
        CapsuleStore::new(store_dir.path().to_path_buf()),
    )
    .with_policy(Some(policy.clone()));
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    for round in 0..4 {
        let (name, gate) = if round % 2 == 0 {
            ("no policy", &gate)
        } else {
            ("guide policy", &with_policy)
        };
        let mut samples = Vec::new();
        for index in 0..2100 {
            let started = Instant::now();
            let verdict = gate.decide(&call, &none).expect("decide");
            let elapsed = started.elapsed();
            assert!(
                matches!(verdict, Verdict::Proceed(ref r) if r.iter().all(|r| r.capsule.is_some()))
            );
            if index >= 100 {
                samples.push(elapsed);
            }
        }
        samples.sort();
        let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
        println!(
            "gate decision, cache hit, 2 domains, {name} (2000 runs after 100 warm-up): p50 {} | p90 {} | p99 {}",
            ms(at(0.5)),
            ms(at(0.9)),
            ms(at(0.99))
        );
    }
    // The policy's own work per gated call: the facts once, a ruling per finding (two here).
    let trigger = Trigger {
        severity: Severity::Critical,
        reason: "r".to_string(),
        key_fields: json!({}),
        prompt_arguments: Vec::new(),
        evidence: vec![EvidenceItem {
            id: "crs_change".to_string(),
            fact: "f".to_string(),
            why: "w".to_string(),
            alternative: None,
            relaxable: false,
        }],
        confidence: Some(1.0),
    };
    let mut samples = Vec::new();
    for _ in 0..20000 {
        let started = Instant::now();
        let facts = Facts::of(&call);
        let a = policy.rule_on("raster_reproject", "crs_datum", &trigger, &facts);
        let b = policy.rule_on("raster_reproject", "resampling", &trigger, &facts);
        samples.push(started.elapsed());
        assert_eq!(a.outcome, Outcome::Human);
        assert_eq!(b.outcome, Outcome::Justify);
    }
    samples.sort();
    println!(
        "policy evaluation (facts + 2 rulings, guide policy, 20000 runs): p50 {:.4} ms | p99 {:.4} ms",
        samples[10000].as_secs_f64() * 1e3,
        samples[19800].as_secs_f64() * 1e3
    );
}
