//! The ledger over real stdio: two servers sharing one store, 200 concurrent gated calls, one
//! intact chain; `gdal-mcp ledger verify` exits 0 on it and names the first bad line after an
//! edit, a deletion, an insertion or a reordering; a line written by hand fails its MAC, and a
//! ledger that is a FIFO, a link to `/dev/zero` or a link elsewhere is refused at once.

use gdal_mcp_tests::{binary, call, is_error, justification, text, Era, Options, Server};
use serde_json::json;
use std::process::Command;

fn verify(store: &std::path::Path) -> (bool, String) {
    let out = Command::new(binary().unwrap())
        .args(["ledger", "verify", "--store"])
        .arg(store)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn two_servers_on_one_store_keep_one_intact_chain() {
    let first = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let grid = first.path("grid.asc");
    std::fs::write(
        &grid,
        "ncols 4\nnrows 4\nxllcorner 0\nyllcorner 0\ncellsize 10\n\
         1 2 3 4\n5 6 7 8\n9 10 11 12\n13 14 15 16\n",
    )
    .unwrap();
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-a_srs", "EPSG:32633"])
        .arg(&grid)
        .arg(first.path("grid.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    let args = |i: usize| {
        json!({"input": "grid.tif", "output": format!("out{i}.tif"), "resampling": "nearest",
               "resolution": [20, 20]})
    };
    // One justified call stores the capsule: a capsule entry, then a gate entry.
    let mut justified = args(0);
    justified["justification"] = json!({"resampling": justification("nearest")});
    let done = first.call("raster_resample", justified).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));

    // A second server process on the same workspace and store.
    let second = Server::connect(Era::Legacy, first.workspace.path(), &Options::default())
        .await
        .unwrap();
    let calls = (1..=200).map(|i| {
        let client = if i % 2 == 0 { &first.client } else { &second };
        call(client, "raster_resample", args(i))
    });
    let results = futures::future::join_all(calls).await;
    for result in &results {
        let result = result.as_ref().unwrap();
        assert!(!is_error(result), "{}", text(result));
    }

    let store = first.workspace.path().join(".preflight");
    let (ok, report) = verify(&store);
    assert!(ok, "{report}");
    // 1 capsule, 201 gate decisions and 201 lineage records (one per output).
    assert!(report.contains("intact, 403 entries"), "{report}");

    // Tampering, each kind named at its first bad line.
    let path = store.join("ledger.jsonl");
    let original = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let write = |lines: &[&str]| std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let edited = lines[10].replacen("\"proceed\"", "\"blocked\"", 1);
    assert_ne!(edited, lines[10]);
    let mut tampered = lines.clone();
    tampered[10] = &edited;
    write(&tampered);
    let (ok, report) = verify(&store);
    // The edited line itself: its MAC fails (before sealing, the line after it was named).
    assert!(
        !ok && report.contains("line 11") && report.contains("MAC"),
        "edit: {report}"
    );
    let mut tampered = lines.clone();
    tampered.remove(50);
    write(&tampered);
    let (ok, report) = verify(&store);
    assert!(!ok && report.contains("line 51"), "deletion: {report}");
    let mut tampered = lines.clone();
    tampered.insert(80, lines[20]);
    write(&tampered);
    let (ok, report) = verify(&store);
    assert!(!ok && report.contains("line 81"), "insertion: {report}");
    let mut tampered = lines.clone();
    tampered.swap(100, 101);
    write(&tampered);
    let (ok, report) = verify(&store);
    assert!(!ok && report.contains("line 101"), "reordering: {report}");
    std::fs::write(&path, &original).unwrap();
    assert!(verify(&store).0);
}

/// Regression: on a fresh store the first gated call is usually a refusal, made before any
/// capsule created the store's folder; the ledger's append failed ("No such file or
/// directory") and the refusal went unrecorded. The ledger now creates the folder.
#[tokio::test]
async fn a_refusal_on_a_fresh_store_is_the_ledgers_first_entry() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(
        server.path("p.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#,
    )
    .unwrap();
    let refused = server
        .call(
            "vector_reproject",
            json!({"input": "p.geojson", "output": "q.geojson", "src_crs": "EPSG:4267",
                   "dst_crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let store = server.workspace.path().join(".preflight");
    let ledger = std::fs::read_to_string(store.join("ledger.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(ledger.lines().next().unwrap()).unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["kind"], "gate");
    assert!(ledger.contains("\"blocked\""), "{ledger}");
    let (ok, report) = verify(&store);
    assert!(ok, "{report}");
}

/// Regression (issue 21): `ledger verify` hung on a ledger that was a FIFO, grew to 2 GB on one
/// that linked to `/dev/zero`, and followed one that linked to another store (whose chain
/// passed while this store's decisions were missing). Each is refused with a clear message
/// within seconds, and the outside store (the decoy) is neither changed nor reported.
#[tokio::test]
async fn verify_refuses_a_fifo_a_link_to_dev_zero_and_a_link_elsewhere() {
    let outside = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(
        outside.path("p.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#,
    )
    .unwrap();
    let refused = outside
        .call(
            "vector_reproject",
            json!({"input": "p.geojson", "output": "q.geojson", "src_crs": "EPSG:4267",
                   "dst_crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let decoy_store = outside.workspace.path().join(".preflight");
    let decoy = decoy_store.join("ledger.jsonl");
    let before = std::fs::read(&decoy).unwrap();
    let (ok, report) = verify(&decoy_store);
    assert!(ok && report.contains("intact, 1 entries"), "{report}");

    let started = std::time::Instant::now();
    let store = tempfile::tempdir().unwrap();
    let ledger = store.path().join("ledger.jsonl");
    for target in [decoy.clone(), std::path::PathBuf::from("/dev/zero")] {
        std::os::unix::fs::symlink(&target, &ledger).unwrap();
        let (ok, report) = verify(store.path());
        assert!(
            !ok && report.contains("is a link"),
            "{}: {report}",
            target.display()
        );
        assert!(!report.contains("intact"), "{report}");
        std::fs::remove_file(&ledger).unwrap();
    }
    assert!(Command::new("mkfifo")
        .arg(&ledger)
        .status()
        .unwrap()
        .success());
    let (ok, report) = verify(store.path());
    assert!(!ok && report.contains("not a regular file"), "{report}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(
        std::fs::read(&decoy).unwrap(),
        before,
        "the decoy is unchanged"
    );
}
