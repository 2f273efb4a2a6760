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

/// A file outside the workspace that a planted store link points at: it must stay unchanged.
struct Decoy {
    dir: tempfile::TempDir,
}

impl Decoy {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.txt"), "SECRET-OUTSIDE-DATA\n").unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        Self { dir }
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("secret.txt")
    }

    fn folder(&self) -> std::path::PathBuf {
        self.dir.path().join("store")
    }

    fn assert_untouched(&self, case: &str) {
        assert_eq!(
            std::fs::read_to_string(self.file()).unwrap(),
            "SECRET-OUTSIDE-DATA\n",
            "{case}: the decoy file changed"
        );
        assert!(
            std::fs::read_dir(self.folder()).unwrap().next().is_none(),
            "{case}: something was written into the decoy folder"
        );
    }
}

fn mkfifo(path: &std::path::Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// Regression (attack round 4, B6): a `ledger.jsonl` planted in the store as a folder, a FIFO
/// or a link silently stopped the ledger while gated calls went on writing (the ledger is the
/// decision record). Every store file a call appends to (the ledger, `lineage/records.jsonl`,
/// `lineage/paths.jsonl`), and the store's folders, planted as a folder, a FIFO, a link to an
/// outside file or folder, a link to `/dev/zero`, a huge file or a ledger whose last line no
/// entry can chain to, now refuse the call (kind `store`, naming the file, what is wrong and
/// how to fix it) before anything is decided or written: no output, no staging left behind,
/// the decoy unchanged, the server still serving. The twin: the same calls on a clean store
/// succeed and enter the ledger.
#[tokio::test]
async fn b6_a_planted_store_file_refuses_gated_calls_and_nothing_is_written() {
    type Plant = fn(&std::path::Path, &Decoy);
    let plants: Vec<(&str, &str, Plant)> = vec![
        ("ledger.jsonl is a folder", "ledger.jsonl", |store, _| {
            std::fs::create_dir_all(store.join("ledger.jsonl")).unwrap()
        }),
        ("ledger.jsonl is a FIFO", "ledger.jsonl", |store, _| {
            mkfifo(&store.join("ledger.jsonl"))
        }),
        (
            "ledger.jsonl links outside",
            "ledger.jsonl",
            |store, decoy| {
                std::os::unix::fs::symlink(decoy.file(), store.join("ledger.jsonl")).unwrap()
            },
        ),
        (
            "ledger.jsonl links to /dev/zero",
            "ledger.jsonl",
            |store, _| std::os::unix::fs::symlink("/dev/zero", store.join("ledger.jsonl")).unwrap(),
        ),
        (
            "ledger.jsonl is a huge file of zeros",
            "ledger.jsonl",
            |store, _| {
                let file = std::fs::File::create(store.join("ledger.jsonl")).unwrap();
                file.set_len(8 << 30).unwrap();
            },
        ),
        ("ledger.jsonl ends in junk", "ledger.jsonl", |store, _| {
            std::fs::write(
                store.join("ledger.jsonl"),
                format!("{{\"seq\":1,\"prev\":\"x\"}}\n{}\n", "z".repeat(70_000)),
            )
            .unwrap()
        }),
        ("lineage is a file", "lineage", |store, _| {
            std::fs::write(store.join("lineage"), "x").unwrap()
        }),
        ("lineage links outside", "lineage", |store, decoy| {
            std::os::unix::fs::symlink(decoy.folder(), store.join("lineage")).unwrap()
        }),
        ("records.jsonl is a folder", "records.jsonl", |store, _| {
            std::fs::create_dir_all(store.join("lineage/records.jsonl")).unwrap()
        }),
        ("records.jsonl is a FIFO", "records.jsonl", |store, _| {
            std::fs::create_dir_all(store.join("lineage")).unwrap();
            mkfifo(&store.join("lineage/records.jsonl"));
        }),
        (
            "records.jsonl links outside",
            "records.jsonl",
            |store, decoy| {
                std::fs::create_dir_all(store.join("lineage")).unwrap();
                std::os::unix::fs::symlink(decoy.file(), store.join("lineage/records.jsonl"))
                    .unwrap();
            },
        ),
        (
            "paths.jsonl links to /dev/zero",
            "paths.jsonl",
            |store, _| {
                std::fs::create_dir_all(store.join("lineage")).unwrap();
                std::os::unix::fs::symlink("/dev/zero", store.join("lineage/paths.jsonl")).unwrap();
            },
        ),
    ];
    let grid = |server: &Server| {
        std::fs::copy(
            gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
            server.path("dem.tif"),
        )
        .unwrap();
    };
    // The twin: a clean store records both calls.
    let clean = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    grid(&clean);
    let done = clean
        .call(
            "raster_convert",
            json!({"input": "dem.tif", "output": "out.tif"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let mut justified = json!({"input": "dem.tif", "output": "r.tif", "resampling": "nearest",
                               "resolution": [200, 200]});
    justified["justification"] = json!({"resampling": justification("nearest")});
    let done = clean
        .call("raster_resample", justified.clone())
        .await
        .unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let store = clean.workspace.path().join(".preflight");
    let (ok, report) = verify(&store);
    assert!(ok, "{report}");
    let ledger = std::fs::read_to_string(store.join("ledger.jsonl")).unwrap();
    assert!(
        ledger.contains("\"kind\":\"gate\"") && ledger.contains("\"kind\":\"lineage\""),
        "{ledger}"
    );

    for (case, named, plant) in plants {
        let decoy = Decoy::new();
        let server = Server::start(Era::Modern, Options::default())
            .await
            .unwrap();
        grid(&server);
        let store = server.workspace.path().join(".preflight");
        std::fs::create_dir_all(&store).unwrap();
        plant(&store, &decoy);
        let started = std::time::Instant::now();
        for (tool, arguments, output) in [
            (
                "raster_convert",
                json!({"input": "dem.tif", "output": "out.tif"}),
                "out.tif",
            ),
            ("raster_resample", justified.clone(), "r.tif"),
        ] {
            let result = server.call(tool, arguments).await.unwrap();
            assert!(
                is_error(&result),
                "{case}: {tool} succeeded: {}",
                text(&result)
            );
            let error = gdal_mcp_tests::structured(&result)["error"].clone();
            assert_eq!(error["kind"], "store", "{case}: {tool}: {error}");
            let message = error["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(named)
                    && message.contains("nothing was written")
                    && message.contains("aside"),
                "{case}: {tool}: {message}"
            );
            assert!(
                !server.path(output).exists(),
                "{case}: {tool} left its output"
            );
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{case}: too slow"
        );
        // Nothing but the input (and the store) in the workspace: no staging left behind.
        let mut left: Vec<String> = std::fs::read_dir(server.workspace.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        left.sort();
        assert_eq!(left, [".preflight", "dem.tif"], "{case}");
        decoy.assert_untouched(case);
        let info = server
            .call("raster_info", json!({"input": "dem.tif"}))
            .await
            .unwrap();
        assert!(!is_error(&info), "{case}: {}", text(&info));
    }
}

/// The capsule folders of the store planted as a FIFO, a file or a link outside: a call that
/// must store its justification is refused (kind `store`) with nothing written and the decoy
/// unchanged; a call that stores no capsule is not concerned. The twin is the clean store of
/// `b6_a_planted_store_file_refuses_gated_calls_and_nothing_is_written`.
#[tokio::test]
async fn b6_planted_capsule_folders_refuse_the_justified_call_and_nothing_is_written() {
    type Plant = fn(&std::path::Path, &Decoy);
    let plants: Vec<(&str, Plant)> = vec![
        ("justifications is a FIFO", |store, _| {
            mkfifo(&store.join("justifications"))
        }),
        ("justifications is a file", |store, _| {
            std::fs::write(store.join("justifications"), "x").unwrap()
        }),
        ("justifications links outside", |store, decoy| {
            std::os::unix::fs::symlink(decoy.folder(), store.join("justifications")).unwrap()
        }),
        ("justifications/resampling links outside", |store, decoy| {
            std::fs::create_dir_all(store.join("justifications")).unwrap();
            std::os::unix::fs::symlink(decoy.folder(), store.join("justifications/resampling"))
                .unwrap();
        }),
    ];
    for (case, plant) in plants {
        let decoy = Decoy::new();
        let server = Server::start(Era::Modern, Options::default())
            .await
            .unwrap();
        std::fs::copy(
            gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
            server.path("dem.tif"),
        )
        .unwrap();
        let store = server.workspace.path().join(".preflight");
        std::fs::create_dir_all(&store).unwrap();
        plant(&store, &decoy);
        let mut justified = json!({"input": "dem.tif", "output": "r.tif", "resampling": "nearest",
                                   "resolution": [200, 200]});
        justified["justification"] = json!({"resampling": justification("nearest")});
        let result = server.call("raster_resample", justified).await.unwrap();
        assert!(is_error(&result), "{case}: {}", text(&result));
        let error = gdal_mcp_tests::structured(&result)["error"].clone();
        assert_eq!(error["kind"], "store", "{case}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains("link or not a folder"),
            "{case}: {error}"
        );
        assert!(!server.path("r.tif").exists(), "{case}: output left");
        decoy.assert_untouched(case);
        let plain = server
            .call(
                "raster_convert",
                json!({"input": "dem.tif", "output": "out.tif"}),
            )
            .await
            .unwrap();
        assert!(!is_error(&plain), "{case}: {}", text(&plain));
        decoy.assert_untouched(case);
    }
}
