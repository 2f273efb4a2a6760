//! In-process tests of the reflection gate with the built-in domains and a temporary capsule
//! store: a datum-crossing reprojection is refused, an inline justification is validated and
//! stored, the stored capsule then justifies the same call, an invalid justification lists
//! its field errors and stores nothing, and `persist` accepts only keys the gate issued.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::{CallFacts, Registry, Severity};
use gdal_mcp::gdal::facts::{CrsFacts, CrsKind, DatasetFacts, RasterFacts};
use gdal_mcp::reflection::gate::{Decision, Gate, PersistError, Verdict};
use gdal_mcp::reflection::store::CapsuleStore;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn gate(store: &Path) -> Gate {
    let registry = Registry::load(&[], None, Limits::default()).expect("built-in domains load");
    Gate::new(Arc::new(registry), CapsuleStore::new(store.to_path_buf()))
}

/// raster_reproject from SIRGAS 2000 / UTM zone 25S (EPSG:31985) to WGS 84 (EPSG:4326):
/// projected to geographic across datums.
fn sirgas_to_wgs84() -> CallFacts {
    let source = CrsFacts {
        id: Some("EPSG:31985".to_string()),
        name: "SIRGAS 2000 / UTM zone 25S".to_string(),
        kind: CrsKind::Projected,
        linear_unit: Some("metre".to_string()),
        datum: Some("Sistema_de_Referencia_Geocentrico_para_las_AmericaS_2000".to_string()),
        vertical: None,
        linear_unit_metres: Some(1.0),
        axis_order: Some("east,north".to_string()),
        vertical_unit: None,
    };
    let target = CrsFacts {
        id: Some("EPSG:4326".to_string()),
        name: "WGS 84".to_string(),
        kind: CrsKind::Geographic,
        linear_unit: None,
        datum: Some("WGS_1984".to_string()),
        vertical: None,
        linear_unit_metres: None,
        axis_order: Some("north,east".to_string()),
        vertical_unit: None,
    };
    CallFacts {
        tool: "raster_reproject".to_string(),
        arguments: json!({"input": "in.tif", "output": "out.tif", "dst_crs": "EPSG:4326",
                          "resampling": "bilinear"}),
        datasets: vec![DatasetFacts {
            role: "input".to_string(),
            path: "/w/in.tif".to_string(),
            driver: "GTiff".to_string(),
            crs: Some(source),
            raster: Some(RasterFacts {
                width: 100,
                height: 100,
                band_count: 1,
                data_types: vec!["Float32".to_string()],
                nodata: vec![None],
                pixel_size: Some((30.0, -30.0)),
                ..RasterFacts::default()
            }),
            vector: None,
        }],
        target_crs: Some(target),
        transformation: None,
        upstream: Vec::new(),
        measurement: None,
        output: None,
        grids: None,
    }
}

/// A careful justification: the method, and (since issue 18) what each domain's findings ask
/// for: for `crs_datum` which measurements must survive and the CRS considered instead by its
/// code, for `resampling` the method considered instead and an answer to `continuous_input`.
fn justification(method: &str) -> Value {
    let resampling = method.to_ascii_lowercase().contains("bilinear");
    let evidence = if resampling {
        json!({"continuous_input": "the survey raster is a smooth elevation surface; bilinear \
                                    keeps it continuous without overshoot at 30 m cells"})
    } else {
        json!({"crs_change": "only positions must survive for the web map overlay; areas are \
                              taken in the source grid beforehand"})
    };
    json!({
        "intent": "Bring the SIRGAS 2000 survey raster into WGS 84 for a web map overlay.",
        "alternatives": [{"method": "keep EPSG:31985",
                          "why_not": "the web map client only accepts geographic WGS 84"},
                         {"method": "EPSG:3857 (Web Mercator)",
                          "why_not": "the client reprojects on its own and reads lon/lat only"},
                         {"method": "cubic",
                          "why_not": "cubic overshoots at the survey's break lines"}],
        "choice": {"method": method,
                   "rationale": "the consumer needs geographic WGS 84 coordinates",
                   "tradeoffs": "pixel sizes become degrees; sub-metre datum difference ignored"},
        "confidence": "medium",
        "assumptions": ["SIRGAS 2000 and WGS 84 agree to well under a pixel here"],
        "evidence": evidence
    })
}

/// The method each domain's `validate` expects for this call (it checks that the choice
/// names what the call actually does).
fn method_for(domain: &str) -> &'static str {
    match domain {
        "crs_datum" => "EPSG:4326",
        "resampling" => "Bilinear interpolation",
        other => panic!("no test justification for domain {other}"),
    }
}

fn capsule_files(store: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let root = store.join("justifications");
    let Ok(domains) = std::fs::read_dir(&root) else {
        return found;
    };
    for domain in domains.flatten() {
        for file in std::fs::read_dir(domain.path())
            .expect("read domain dir")
            .flatten()
        {
            found.push(file.path());
        }
    }
    found.sort();
    found
}

#[test]
fn datum_crossing_is_refused_then_justified_then_cached() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = gate(dir.path());
    let call = sirgas_to_wgs84();

    // 1. No justification: refused, with a crs_datum entry.
    let (entries, receipts) = match gate.decide(&call, &BTreeMap::new()).expect("decide") {
        Verdict::Refuse {
            entries, receipts, ..
        } => (entries, receipts),
        Verdict::Proceed(r) => panic!("expected a refusal, got proceed: {r:?}"),
    };
    let crs = entries
        .iter()
        .find(|e| e.domain == "crs_datum")
        .unwrap_or_else(|| panic!("no crs_datum entry in {entries:#?}"));
    assert!(crs.severity >= Severity::Required);
    assert!(
        crs.key.starts_with("sha256:") && crs.key.len() == 7 + 64,
        "{}",
        crs.key
    );
    assert!(
        crs.errors.is_empty(),
        "nothing was supplied: {:?}",
        crs.errors
    );
    assert!(crs.reason.contains("across datums"), "{}", crs.reason);
    assert_eq!(crs.decision["dst_crs"], "EPSG:4326");
    assert!(crs.prompt_arguments.contains_key("datum_change"));
    assert!(!crs.prompt.is_empty());
    assert!(crs.how_to_supply.contains(&crs.key));
    assert!(receipts
        .iter()
        .any(|r| r.domain == "crs_datum" && r.decision == Decision::Blocked));
    assert!(
        capsule_files(dir.path()).is_empty(),
        "a refusal stores nothing"
    );

    // 2. Inline justifications for every refused domain: proceeds and writes capsules.
    let inline: BTreeMap<String, Value> = entries
        .iter()
        .map(|e| (e.domain.clone(), justification(method_for(&e.domain))))
        .collect();
    let receipts = match gate.decide(&call, &inline).expect("decide") {
        Verdict::Proceed(receipts) => receipts,
        Verdict::Refuse { entries, .. } => panic!("expected proceed, got {entries:#?}"),
    };
    let first = receipts
        .iter()
        .find(|r| r.domain == "crs_datum")
        .expect("crs_datum receipt");
    assert_eq!(first.decision, Decision::Proceed);
    assert!(
        first.stored_now,
        "the inline justification was stored by this call"
    );
    assert_eq!(first.key, crs.key, "same call, same key");
    let hex = crs.key.trim_start_matches("sha256:");
    assert_eq!(
        first.capsule.as_deref(),
        Some(format!("justification://crs_datum/{hex}").as_str())
    );
    let capsule_path = dir
        .path()
        .join("justifications/crs_datum")
        .join(format!("{hex}.json"));
    assert!(capsule_path.is_file(), "{} written", capsule_path.display());
    let capsule = gate
        .store()
        .get("crs_datum", &crs.key)
        .expect("the stored capsule verifies");
    assert_eq!(capsule.tool, "raster_reproject");
    assert_eq!(capsule.justification.choice.method.0, "EPSG:4326");
    assert_eq!(capsule_files(dir.path()).len(), entries.len());

    // 3. The same call without a justification: proceeds from the stored capsule.
    let receipts = match gate.decide(&call, &BTreeMap::new()).expect("decide") {
        Verdict::Proceed(receipts) => receipts,
        Verdict::Refuse { entries, .. } => panic!("expected a cache hit, got {entries:#?}"),
    };
    let again = receipts
        .iter()
        .find(|r| r.domain == "crs_datum")
        .expect("crs_datum receipt");
    assert_eq!(again.decision, Decision::Proceed);
    assert!(!again.stored_now, "served from the store, not stored now");
    assert_eq!(again.capsule, first.capsule);

    // 4. A fresh gate over the same store (a restarted server) also hits the capsule.
    let restarted = self::gate(dir.path());
    assert!(matches!(
        restarted.decide(&call, &BTreeMap::new()).expect("decide"),
        Verdict::Proceed(_)
    ));
}

#[test]
fn an_invalid_justification_lists_field_errors_and_stores_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = gate(dir.path());
    let call = sirgas_to_wgs84();

    // Schema errors: no alternatives, empty intent, unknown confidence, an unknown field.
    let bad = json!({
        "intent": "",
        "alternatives": [],
        "choice": {"method": "EPSG:4326", "rationale": "r", "tradeoffs": "t"},
        "confidence": "certain",
        "extra": 1
    });
    let inline = BTreeMap::from([("crs_datum".to_string(), bad)]);
    let entries = match gate.decide(&call, &inline).expect("decide") {
        Verdict::Refuse { entries, .. } => entries,
        Verdict::Proceed(r) => panic!("an invalid justification proceeded: {r:?}"),
    };
    let crs = entries
        .iter()
        .find(|e| e.domain == "crs_datum")
        .expect("crs_datum entry");
    let paths: Vec<&str> = crs.errors.iter().map(|e| e.path.as_str()).collect();
    assert!(
        crs.errors.len() >= 3,
        "all problems at once: {:?}",
        crs.errors
    );
    for expected in ["/intent", "/alternatives", "/confidence"] {
        assert!(
            paths.iter().any(|p| p.starts_with(expected)),
            "no error at {expected}: {:?}",
            crs.errors
        );
    }
    assert!(crs.errors.iter().all(|e| !e.message.is_empty()));

    // Schema-valid but the domain's own check fails: the choice names another CRS.
    let wrong = BTreeMap::from([("crs_datum".to_string(), justification("EPSG:3857"))]);
    let entries = match gate.decide(&call, &wrong).expect("decide") {
        Verdict::Refuse { entries, .. } => entries,
        Verdict::Proceed(r) => panic!("a wrong-CRS justification proceeded: {r:?}"),
    };
    let crs = entries
        .iter()
        .find(|e| e.domain == "crs_datum")
        .expect("crs_datum entry");
    assert_eq!(crs.errors.len(), 1, "{:?}", crs.errors);
    assert_eq!(crs.errors[0].path, "/choice/method");

    assert!(
        capsule_files(dir.path()).is_empty(),
        "invalid justifications store nothing: {:?}",
        capsule_files(dir.path())
    );
    assert!(gate.store().get("crs_datum", &crs.key).is_none());
}

#[test]
fn persist_accepts_only_keys_it_issued() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = gate(dir.path());
    let call = sirgas_to_wgs84();
    let good = justification("EPSG:4326");

    // Before any refusal, even a well-formed key is unknown.
    let made_up = format!("sha256:{}", "ab".repeat(32));
    match gate.persist("crs_datum", &made_up, &good) {
        Err(PersistError::UnknownKey { domain, key }) => {
            assert_eq!(domain, "crs_datum");
            assert_eq!(key, made_up);
        }
        other => panic!("expected UnknownKey, got {other:?}"),
    }
    // A malformed key is refused the same way, an unknown domain by name.
    assert!(matches!(
        gate.persist("crs_datum", "../../etc/passwd", &good),
        Err(PersistError::UnknownKey { .. })
    ));
    assert!(matches!(
        gate.persist("no_such_domain", &made_up, &good),
        Err(PersistError::UnknownDomain { .. })
    ));
    assert!(capsule_files(dir.path()).is_empty());

    // Issue a key by refusing the call.
    let entries = match gate.decide(&call, &BTreeMap::new()).expect("decide") {
        Verdict::Refuse { entries, .. } => entries,
        Verdict::Proceed(r) => panic!("expected a refusal: {r:?}"),
    };
    let key = entries
        .iter()
        .find(|e| e.domain == "crs_datum")
        .expect("crs_datum entry")
        .key
        .clone();

    // The issued key under another domain is still refused.
    let other_domain = entries
        .iter()
        .map(|e| e.domain.as_str())
        .find(|d| *d != "crs_datum")
        .unwrap_or("resampling");
    assert!(matches!(
        gate.persist(other_domain, &key, &good),
        Err(PersistError::UnknownKey { .. })
    ));
    // An invalid justification for the issued key is refused with its errors.
    match gate.persist("crs_datum", &key, &justification("EPSG:3857")) {
        Err(PersistError::Invalid(errors)) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].path, "/choice/method");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert!(capsule_files(dir.path()).is_empty());

    // The issued key with a valid justification is stored.
    let stored = gate.persist("crs_datum", &key, &good).expect("persisted");
    assert_eq!(stored.key, key);
    assert!(stored.path.is_file());
    assert!(gate.store().get("crs_datum", &key).is_some());
}
