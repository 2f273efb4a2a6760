//! Sealing and verifying a sign-off's request state (issue 20, 2026-07-28 `InputRequiredResult`):
//! `Approvals::seal_state` (serialise the bindings, HMAC-SHA256 with rmcp's `RequestStateCodec`)
//! and `Approvals::open_state` (verify and deserialise), for one sign-off bound to two input
//! files; then a state whose tag was edited (rejected). Budget: ≤ 0.1 ms per seal + verify.
//! Run with `cargo bench -p gdal-mcp --bench sign_off --profile dev` (or release).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::reflection::approval::{Approvals, Binding, StateSignOff};
use gdal_mcp::reflection::seal::Seal;
use std::sync::Arc;
use std::time::Instant;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let store = tempfile::tempdir().expect("tempdir");
    let approvals = Approvals::new(store.path(), Arc::new(Seal::from_bytes([7; 32])));
    let binding = Binding {
        tool: "raster_reproject".into(),
        arguments: format!("sha256:{}", "a".repeat(64)),
        inputs: vec![
            ("/data/survey/nocrs.tif".into(), Some("b".repeat(64))),
            ("/data/survey/zones.gpkg".into(), Some("c".repeat(64))),
        ],
        decision_key: format!("sha256:{}", "d".repeat(64)),
        domain: "crs_datum".into(),
        policy: format!("sha256:{}", "e".repeat(64)),
        components: format!("sha256:{}", "f".repeat(64)),
    };
    let sign_offs = vec![StateSignOff {
        id: "3f9a0c1d2e4b5a6c7d8e".into(),
        binding,
        covers_decision: false,
    }];
    let runs = 20_000;
    let mut both = Vec::with_capacity(runs);
    let mut seal_only = Vec::with_capacity(runs);
    let mut size = 0;
    for _ in 0..200 {
        let (sealed, _) = approvals.seal_state(sign_offs.clone()).unwrap();
        approvals.open_state(&sealed).unwrap();
    }
    for _ in 0..runs {
        let started = Instant::now();
        let (sealed, state) = approvals.seal_state(sign_offs.clone()).unwrap();
        let sealed_at = started.elapsed();
        let opened = approvals.open_state(&sealed).unwrap();
        let total = started.elapsed();
        assert_eq!(opened, state);
        size = sealed.len();
        seal_only.push(sealed_at.as_secs_f64() * 1e3);
        both.push(total.as_secs_f64() * 1e3);
    }
    // An edited state is rejected (and costs about as much as a good one).
    let (sealed, _) = approvals.seal_state(sign_offs).unwrap();
    let mut edited = sealed.into_bytes();
    let at = edited.len() - 10;
    edited[at] = if edited[at] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    assert!(approvals
        .open_state(&edited)
        .unwrap_err()
        .contains("edited"));
    both.sort_by(f64::total_cmp);
    seal_only.sort_by(f64::total_cmp);
    println!(
        "request state of {size} bytes, {runs} runs: seal p50 {:.4} ms; seal + verify p50 {:.4} \
         ms, p99 {:.4} ms, max {:.4} ms (budget 0.1 ms)",
        percentile(&seal_only, 0.5),
        percentile(&both, 0.5),
        percentile(&both, 0.99),
        both[both.len() - 1],
    );
    // The budget holds for an optimised build; a debug build (serde_json and hmac
    // unoptimised) only reports.
    if !cfg!(debug_assertions) {
        assert!(
            percentile(&both, 0.5) <= 0.1,
            "sealing and verifying a request state takes more than 0.1 ms"
        );
    }
}
