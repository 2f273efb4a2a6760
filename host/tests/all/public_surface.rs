//! Snapshots of the public surface, one file per part so that a change shows up where it
//! happened: `snapshots/tools/<name>.json` for each tool (description, input and output
//! schemas, annotations), `prompts.json` (the built-in domains' prompts), `resources.json`
//! (resource templates), `justification_schema.json` and `wit.json` (hashes of the WIT files).
//! Any change fails here until the snapshots are updated on purpose:
//!
//! ```text
//! UPDATE_SNAPSHOTS=1 cargo test -p gdal-mcp --test all public_surface
//! ```
//!
//! and the diff under `host/tests/snapshots/` is reviewed with the change.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::Registry;
use gdal_mcp::server::{catalog, registry};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// Every snapshot file, by path relative to `snapshots/`, with its current content.
fn surface() -> BTreeMap<String, Value> {
    let mut files = BTreeMap::new();
    for tool in registry::definitions() {
        files.insert(
            format!("tools/{}.json", tool.name),
            serde_json::to_value(tool).expect("tool serialises"),
        );
    }
    let registry = Registry::load(&[], None, Limits::default()).expect("built-in domains load");
    let prompts: Vec<Value> = registry
        .all()
        .iter()
        .map(|d| {
            json!({
                "domain": d.info.id,
                "version": d.info.version,
                "name": d.info.prompt_name,
                "title": d.info.title,
                "summary": d.info.summary,
                "arguments": d.info.prompt_arguments,
                "methodology_sha256": hex::encode(Sha256::digest(d.info.methodology.as_bytes())),
            })
        })
        .collect();
    files.insert("prompts.json".to_string(), Value::Array(prompts));
    let templates: Vec<Value> = catalog::templates()
        .into_iter()
        .map(|t| serde_json::to_value(t).expect("template serialises"))
        .collect();
    files.insert("resources.json".to_string(), Value::Array(templates));
    files.insert(
        "justification_schema.json".to_string(),
        gdal_mcp::reflection::justification::schema(),
    );
    // Every WIT file, the current contract and the frozen older ones (`wit/v0.2/`), by path.
    let wit_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let mut wit = serde_json::Map::new();
    let mut pending = vec![wit_dir.clone()];
    let mut entries = Vec::new();
    while let Some(dir) = pending.pop() {
        for path in std::fs::read_dir(&dir)
            .expect("wit/ exists")
            .filter_map(Result::ok)
            .map(|e| e.path())
        {
            if path.is_dir() {
                pending.push(path);
            } else {
                entries.push(path);
            }
        }
    }
    entries.sort();
    for file in entries {
        let text = std::fs::read_to_string(&file).expect("wit file reads");
        let name = file
            .strip_prefix(&wit_dir)
            .expect("under wit/")
            .to_string_lossy()
            .into_owned();
        wit.insert(name, json!(hex::encode(Sha256::digest(text.as_bytes()))));
    }
    files.insert("wit.json".to_string(), Value::Object(wit));
    files
}

fn existing() -> Vec<String> {
    let mut found = Vec::new();
    for dir in [snapshots(), snapshots().join("tools")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                let relative = path
                    .strip_prefix(snapshots())
                    .expect("below snapshots")
                    .to_string_lossy()
                    .to_string();
                found.push(relative);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn public_surface_matches_the_reviewed_snapshots() {
    let current = surface();
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut problems = Vec::new();
    for stale in existing() {
        if !current.contains_key(&stale) {
            if update {
                std::fs::remove_file(snapshots().join(&stale)).expect("remove stale snapshot");
            } else {
                problems.push(format!("{stale}: no longer part of the surface"));
            }
        }
    }
    for (name, value) in &current {
        let path = snapshots().join(name);
        let text = serde_json::to_string_pretty(value).expect("serialise") + "\n";
        if update {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, &text).expect("write snapshot");
            continue;
        }
        let reviewed = std::fs::read_to_string(&path).unwrap_or_default();
        if reviewed != text {
            let first = reviewed
                .lines()
                .zip(text.lines())
                .enumerate()
                .find(|(_, (a, b))| a != b)
                .map(|(i, (a, b))| format!("line {}:\n  - {a}\n  + {b}", i + 1))
                .unwrap_or_else(|| "(length differs)".to_string());
            problems.push(format!("{name} changed, first at {first}"));
        }
    }
    assert!(
        problems.is_empty(),
        "the public surface changed:\n{}\nIf the change is deliberate, run \
         `UPDATE_SNAPSHOTS=1 cargo test -p gdal-mcp --test all public_surface` and commit the \
         reviewed snapshots.",
        problems.join("\n")
    );
}
