//! Lineage hashing throughput: SHA-256 of a 512 MiB file (page cache warm) through
//! `LineageStore::file_digest`, which streams the file with 1 MiB reads into sha2 (the CPU's SHA
//! extensions when it has them), against coreutils' `sha256sum` on the same file; then the
//! memoised second digest. Run with `cargo bench -p gdal-mcp --bench lineage`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::reflection::lineage::{self, FileRef, LineageStore, Record, StepSummary, Versions};
use std::io::Write;
use std::time::Instant;

const MIB: usize = 1 << 20;
const SIZE_MIB: usize = 512;

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.bin");
    {
        let mut file = std::fs::File::create(&path).expect("create");
        let mut block = vec![0u8; MIB];
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..SIZE_MIB {
            for byte in block.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *byte = state as u8;
            }
            file.write_all(&block).expect("write");
        }
        file.sync_all().expect("sync");
    }
    let bytes = (SIZE_MIB * MIB) as f64;
    // Warm the page cache, so that both sides hash from memory.
    let _ = std::fs::read(&path).expect("read");

    let mut ours = Vec::new();
    let mut reference = Vec::new();
    for _ in 0..5 {
        let store = LineageStore::new(dir.path());
        let started = Instant::now();
        let digest = store.file_digest(&path).expect("digest");
        ours.push(bytes / started.elapsed().as_secs_f64() / 1e9);

        let started = Instant::now();
        let out = std::process::Command::new("sha256sum")
            .arg(&path)
            .output()
            .expect("sha256sum");
        reference.push(bytes / started.elapsed().as_secs_f64() / 1e9);
        let theirs = String::from_utf8_lossy(&out.stdout);
        assert!(theirs.starts_with(&digest), "{theirs} != {digest}");
    }
    ours.sort_by(f64::total_cmp);
    reference.sort_by(f64::total_cmp);
    println!(
        "SHA-256 of {SIZE_MIB} MiB, page cache warm (5 runs): lineage {:.2} GB/s median \
         (min {:.2}, max {:.2}); sha256sum {:.2} GB/s median",
        ours[2], ours[0], ours[4], reference[2]
    );

    let store = LineageStore::new(dir.path());
    store.file_digest(&path).expect("digest");
    let started = Instant::now();
    for _ in 0..1000 {
        store.file_digest(&path).expect("digest");
    }
    println!(
        "memoised digest of an unchanged file (1000 calls): {:.1} µs each",
        started.elapsed().as_secs_f64() * 1e3
    );

    // Recording one small output (111 KB, as a resampled DEM tile): hash, record, path index,
    // ledger entry. This is the cost lineage adds after the work of a gated call.
    let store_dir = tempfile::tempdir().expect("store");
    let store = LineageStore::new(store_dir.path());
    let outputs = tempfile::tempdir().expect("outputs");
    let mut times = Vec::new();
    for index in 0..300 {
        let output = outputs.path().join(format!("out-{index}.tif"));
        std::fs::write(&output, vec![index as u8; 111_000]).expect("output");
        let record = Record {
            format: lineage::FORMAT.to_string(),
            tool: "raster_resample".to_string(),
            verb: "Resampled".to_string(),
            arguments: serde_json::json!({"input": "dem.tif", "resampling": "nearest"}),
            commands: vec![vec![
                "gdalwarp".to_string(),
                "-r".to_string(),
                "near".to_string(),
            ]],
            computation: None,
            inputs: Vec::new(),
            outputs: vec![FileRef {
                role: "output".to_string(),
                path: output.display().to_string(),
                sha256: None,
                size: None,
                recorded: false,
                modified_outside: false,
                written_sha256: None,
            }],
            summary: StepSummary::default(),
            versions: Versions {
                gdal_mcp: "0".to_string(),
                gdal: "3.6.2".to_string(),
                proj: "9.1.1".to_string(),
            },
            plugins: Vec::new(),
            receipts: Vec::new(),
            capsules: Vec::new(),
            upstream_capsules: Vec::new(),
            carried: Default::default(),
            started_at: String::new(),
            finished_at: String::new(),
        };
        let started = Instant::now();
        store.write(record).expect("recorded");
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "recording one 111 KB output (300 records): p50 {:.3} ms, p90 {:.3} ms",
        times[150], times[270]
    );
}
