//! The gate's decision on a cache hit for two domains (crs_datum and resampling), in process:
//! classify in both components, render (memoised) and hash their prompts, derive the keys, and
//! verify both capsules on disk. Run with `cargo bench -p gdal-mcp --bench gate`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::{CallFacts, Registry};
use gdal_mcp::gdal::facts;
use gdal_mcp::reflection::gate::{Gate, Verdict};
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
    let justification = |method: &str| {
        json!({"intent": "i", "alternatives": [{"method": "m", "why_not": "w"}],
               "choice": {"method": method, "rationale": "r", "tradeoffs": "t"}, "confidence": "high"})
    };
    let inline = BTreeMap::from([
        ("crs_datum".to_string(), justification("EPSG:4326")),
        ("resampling".to_string(), justification("bilinear")),
    ]);
    match gate.decide(&call, &inline).expect("decide") {
        Verdict::Proceed(receipts) => assert_eq!(receipts.len(), 2),
        Verdict::Refuse { .. } => panic!("the inline justifications should be accepted"),
    }

    let none = BTreeMap::new();
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
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    println!(
        "gate decision, cache hit, 2 domains (2000 runs after 100 warm-up): p50 {} | p90 {} | p99 {}",
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(0.99))
    );
}
