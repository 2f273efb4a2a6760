//! Snapshot of the public surface: tool names, descriptions, input and output schemas and
//! annotations; the prompts of the built-in domains; the resource templates; and the WIT
//! contract. Any change fails here until the snapshot is updated on purpose:
//!
//! ```text
//! UPDATE_SNAPSHOTS=1 cargo test -p gdal-mcp --test public_surface
//! ```
//!
//! and the diff of `host/tests/snapshots/public_surface.json` is reviewed with the change.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::Registry;
use gdal_mcp::server::{catalog, tools};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;

fn surface() -> Value {
    let tools: Vec<Value> = tools::definitions()
        .into_iter()
        .map(|t| serde_json::to_value(t).expect("tool serialises"))
        .collect();
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
    let templates: Vec<Value> = catalog::templates()
        .into_iter()
        .map(|t| serde_json::to_value(t).expect("template serialises"))
        .collect();
    let wit_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let mut wit = serde_json::Map::new();
    let mut files: Vec<_> = std::fs::read_dir(&wit_dir)
        .expect("wit/ exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("wit file reads");
        wit.insert(
            file.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string(),
            json!(hex::encode(Sha256::digest(text.as_bytes()))),
        );
    }
    json!({
        "tools": tools,
        "prompts": prompts,
        "resource_templates": templates,
        "justification_schema": gdal_mcp::reflection::justification::schema(),
        "wit_sha256": wit,
    })
}

#[test]
fn public_surface_matches_the_reviewed_snapshot() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/public_surface.json");
    let current = serde_json::to_string_pretty(&surface()).expect("serialise") + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, &current).expect("write snapshot");
        return;
    }
    let reviewed = std::fs::read_to_string(&path).unwrap_or_default();
    if reviewed != current {
        let changed: Vec<String> = reviewed
            .lines()
            .zip(current.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(10)
            .map(|(i, (a, b))| format!("line {}:\n  - {a}\n  + {b}", i + 1))
            .collect();
        panic!(
            "the public surface changed (tools, schemas, prompts, templates or WIT).\n{}\n\
             If the change is deliberate, run `UPDATE_SNAPSHOTS=1 cargo test -p gdal-mcp --test \
             public_surface` and commit the reviewed snapshot.",
            if changed.is_empty() {
                "(length differs)".to_string()
            } else {
                changed.join("\n")
            }
        );
    }
}
