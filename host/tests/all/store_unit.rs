//! In-process tests of the capsule store: a put/get round trip, and capsules that were edited
//! or filed under another key are treated as missing.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::reflection::justification;
use gdal_mcp::reflection::key::{decision_key, sha256_hex};
use gdal_mcp::reflection::store::{Capsule, CapsulePrompt, CapsuleStore, FORMAT};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DOMAIN: &str = "crs_datum";

/// A valid capsule for `dst_crs`, keyed as the gate would key it.
fn capsule(dst_crs: &str) -> Capsule {
    let key_fields = json!({"operation": "reproject", "src_crs": "EPSG:31985",
                            "src_crs_assigned": false, "dst_crs": dst_crs,
                            "transformation": Value::Null});
    let prompt_text = format!("## CRS and datum decision\n\nWhy {dst_crs}?");
    let prompt_sha256 = sha256_hex(&prompt_text);
    let key = decision_key(DOMAIN, &key_fields, &prompt_sha256, &[]);
    let justification = justification::validate(
        &json!({
            "intent": "web map overlay",
            "alternatives": [{"method": "keep EPSG:31985", "why_not": "client needs degrees"}],
            "choice": {"method": dst_crs, "rationale": "the consumer needs it",
                       "tradeoffs": "pixel sizes in degrees"},
            "confidence": "medium",
            "assumptions": ["sub-metre datum differences do not matter here"]
        }),
        false,
        &[],
    )
    .expect("a valid justification");
    let mut capsule = Capsule {
        format: FORMAT.to_string(),
        key,
        domain: DOMAIN.to_string(),
        domain_version: "0.1.0".to_string(),
        tool: "raster_reproject".to_string(),
        severity: "required".to_string(),
        key_fields,
        prompt: CapsulePrompt {
            name: "justify_crs_datum".to_string(),
            arguments: BTreeMap::from([("dst_crs".to_string(), dst_crs.to_string())]),
            sha256: prompt_sha256,
        },
        evidence: Vec::new(),
        justification,
        upstream_capsules: Vec::new(),
        policy: None,
        created_at: "2026-01-01T00:00:00.000Z".to_string(),
        server_version: "0.1.0".to_string(),
        integrity: String::new(),
    };
    capsule.integrity = capsule.compute_integrity();
    capsule
}

fn file_of(root: &Path, capsule: &Capsule) -> PathBuf {
    root.join("justifications")
        .join(&capsule.domain)
        .join(format!(
            "{}.json",
            capsule.key.trim_start_matches("sha256:")
        ))
}

#[test]
fn put_then_get_round_trips() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = CapsuleStore::new(dir.path().to_path_buf());
    let original = capsule("EPSG:4326");
    assert!(store.get(DOMAIN, &original.key).is_none(), "empty store");

    let path = store.put(&original).expect("put");
    assert_eq!(path, file_of(dir.path(), &original));
    assert!(path.is_file());
    let back = store.get(DOMAIN, &original.key).expect("get");
    assert_eq!(back, original);
    assert_eq!(
        back.uri(),
        format!(
            "justification://{DOMAIN}/{}",
            original.key.trim_start_matches("sha256:")
        )
    );
    // Another domain or another key finds nothing.
    assert!(store.get("resampling", &original.key).is_none());
    assert!(store.get(DOMAIN, &capsule("EPSG:3857").key).is_none());
    // No temporary files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".capsule-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(store.list(&[DOMAIN]), vec![original]);
}

/// Replace the first occurrence of `from` with `to` in the capsule's file (same length, so
/// it is a byte edit, and the JSON still parses).
fn edit(path: &Path, from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let text = std::fs::read_to_string(path).expect("read capsule");
    assert!(text.contains(from), "{from} not in capsule");
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text);
    serde_json::from_str::<Value>(&edited).expect("the edit keeps the JSON valid");
    std::fs::write(path, edited).expect("write capsule");
}

#[test]
fn a_tampered_capsule_is_treated_as_missing() {
    // Edits to every kind of recorded field: the justification (integrity hash), the key
    // fields (re-hash to the key) and a field outside both (integrity hash).
    for (from, to) in [
        ("\"medium\"", "\"high\"\u{20}\u{20}"),
        ("EPSG:31985", "EPSG:31984"),
        ("raster_reproject", "raster_reprojecT"),
        ("2026-01-01", "2026-01-02"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = CapsuleStore::new(dir.path().to_path_buf());
        let original = capsule("EPSG:4326");
        let path = store.put(&original).expect("put");
        assert!(
            store.get(DOMAIN, &original.key).is_some(),
            "valid before the edit"
        );

        // The store memoises verified capsules by file version: an edit that puts the
        // modification time back (same size, same mtime) must still count as an edit.
        let modified = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime");
        edit(&path, from, to);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(modified))
            .expect("restore mtime");
        assert!(
            store.get(DOMAIN, &original.key).is_none(),
            "editing {from} -> {to} must invalidate the capsule"
        );
        assert!(
            store.list(&[DOMAIN]).is_empty(),
            "list skips it too ({from})"
        );
    }

    // Not JSON at all any more.
    let dir = tempfile::tempdir().expect("temp dir");
    let store = CapsuleStore::new(dir.path().to_path_buf());
    let original = capsule("EPSG:4326");
    let path = store.put(&original).expect("put");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] = b'[';
    std::fs::write(&path, bytes).unwrap();
    assert!(store.get(DOMAIN, &original.key).is_none());
}

#[test]
fn a_capsule_filed_under_another_key_is_treated_as_missing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = CapsuleStore::new(dir.path().to_path_buf());
    let original = capsule("EPSG:4326");
    let other = capsule("EPSG:3857");
    assert_ne!(original.key, other.key);

    let path = store.put(&original).expect("put");
    let renamed = file_of(dir.path(), &other);
    std::fs::rename(&path, &renamed).expect("rename");

    assert!(
        store.get(DOMAIN, &other.key).is_none(),
        "filed under a key it does not record"
    );
    assert!(
        store.get(DOMAIN, &original.key).is_none(),
        "no longer at its own key"
    );
    assert!(store.list(&[DOMAIN]).is_empty());

    // Moved into another domain's folder under its own file name: also missing there.
    let moved = dir
        .path()
        .join("justifications/resampling")
        .join(path.file_name().unwrap());
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&renamed, &moved).unwrap();
    assert!(store.get("resampling", &original.key).is_none());

    // Put back where it belongs, it counts again (the failures above were the filing).
    std::fs::rename(&moved, &path).unwrap();
    assert_eq!(store.get(DOMAIN, &original.key), Some(original));
}

/// Attack round 17, R17-C5: a capsule another justification replaces for its decision is
/// kept under `replaced/`, found again by its integrity; a `replaced/` folder planted as a link
/// out of the store is never written through.
#[test]
fn r17_c5_a_replaced_capsule_is_kept_and_a_linked_folder_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = CapsuleStore::new(dir.path().to_path_buf());
    let original = capsule("EPSG:4326");
    store.put(&original).expect("put");
    store.keep_replaced(&original).expect("kept");
    let kept = store
        .replaced(DOMAIN, &original.key, &original.integrity)
        .expect("found by its integrity");
    assert_eq!(kept.integrity, original.integrity);
    assert!(store
        .replaced(DOMAIN, &original.key, "sha256:0000000000000000")
        .is_none());

    let planted = tempfile::tempdir().expect("temp dir");
    let outside = tempfile::tempdir().expect("outside");
    let store = CapsuleStore::new(planted.path().to_path_buf());
    store.put(&original).expect("put");
    let replaced = planted
        .path()
        .join("justifications")
        .join(DOMAIN)
        .join("replaced");
    std::os::unix::fs::symlink(outside.path(), &replaced).expect("link");
    assert!(store.keep_replaced(&original).is_err());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}
