//! The trust boundary, tried as an attacker would: data and arguments that try to make GDAL
//! read, write or delete outside the workspace, fetch URLs, destroy inputs through sidecars,
//! exhaust memory, stall the server through a plugin, or leave a request unanswered.
//!
//! Every test keeps a decoy tree outside the workspace and checks that not a byte of it changed,
//! that the server still answers, and that the error names the problem.

use gdal_mcp_tests::{is_error, plugin_component, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Files outside the workspace that nothing may touch, with their contents.
struct Decoy {
    dir: tempfile::TempDir,
    before: BTreeMap<PathBuf, Vec<u8>>,
}

impl Decoy {
    fn new() -> Decoy {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.txt"), b"do not read me\n").unwrap();
        std::fs::write(
            dir.path().join("victim.tif"),
            b"not a raster, must survive\n",
        )
        .unwrap();
        std::fs::copy(
            gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
            dir.path().join("outside.tif"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("x.prj"),
            "GEOGCS[\"SECRET_OUTSIDE_CRS\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433]]",
        )
        .unwrap();
        let before = Decoy::snapshot(dir.path());
        Decoy { dir, before }
    }

    fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| (e.path(), std::fs::read(e.path()).unwrap_or_default()))
            .collect()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Add a file to the decoy tree (it must then stay unchanged like the others).
    fn add(&mut self, name: &str, bytes: &[u8]) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        self.before.insert(path, bytes.to_vec());
    }

    fn assert_untouched(&self) {
        let after = Decoy::snapshot(self.dir.path());
        let changed: Vec<String> = after
            .keys()
            .chain(self.before.keys())
            .filter(|p| after.get(*p) != self.before.get(*p))
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            changed.is_empty(),
            "files outside the workspace were created, changed or deleted: {changed:?}"
        );
    }
}

/// A loopback HTTP listener that counts connections (it must see none).
fn listener() -> (String, Arc<AtomicUsize>) {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/data", socket.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in socket.incoming().take(1000).flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (url, hits)
}

async fn start(data: &[&'static str]) -> Server {
    Server::start(
        Era::Modern,
        Options {
            data: data.to_vec(),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// [`start`] with a shared memory budget of `bytes` (`GDAL_MCP_MEMORY_BUDGET_BYTES`).
async fn start_budgeted(data: &[&'static str], bytes: u64) -> Server {
    Server::start(
        Era::Modern,
        Options {
            data: data.to_vec(),
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".to_string(),
                bytes.to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

async fn still_serves(server: &Server) {
    let info = server
        .call("raster_info", json!({"input": "dem.tif"}))
        .await
        .unwrap();
    assert!(
        !is_error(&info),
        "the server still answers: {}",
        text(&info)
    );
}

fn error_message(result: &rmcp::model::CallToolResult) -> String {
    structured(result)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn creation_options_and_drivers_cannot_reach_outside() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif", "nc.gpkg"]).await;
    let victim = decoy.path("victim.tif");
    let cases = [
        (
            "raster_convert",
            json!({"input": "dem.tif", "output": "o.mrf", "format": "MRF",
                   "creation_options": {"DATANAME": victim}}),
            "not allowed",
        ),
        (
            "raster_convert",
            json!({"input": "dem.tif", "output": "o.xml", "format": "PDS4",
                   "creation_options": {"IMAGE_FILENAME": "/vsistdout/"}}),
            "not allowed",
        ),
        (
            "raster_convert",
            json!({"input": "dem.tif", "output": "o.tif",
                   "creation_options": {"COMPRESS": victim}}),
            "looks like a path",
        ),
        (
            "raster_reproject",
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326",
                   "resampling": "bilinear", "creation_options": {"TEMPORARY_DIR": "x"}}),
            "name files",
        ),
        (
            "raster_convert",
            json!({"input": "dem.tif", "output": "o.tif",
                   "creation_options": {"NO_SUCH_OPTION": "1"}}),
            "no such option",
        ),
        (
            "vector_convert",
            json!({"input": "nc.gpkg", "output": "o.mbtiles", "format": "MVT",
                   "dataset_options": {"TEMPORARY_DB": victim}}),
            "not allowed",
        ),
        (
            "vector_convert",
            json!({"input": "nc.gpkg", "output": "o.pdf", "format": "PDF",
                   "dataset_options": {"JAVASCRIPT_FILE": decoy.path("secret.txt")}}),
            "not allowed",
        ),
        (
            "vector_convert",
            json!({"input": "nc.gpkg", "output": "o.gpkg",
                   "layer_options": {"FID": "../../x"}}),
            "looks like a path",
        ),
    ];
    for (tool, arguments, expected) in cases {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool} {arguments}");
        let message = error_message(&result);
        assert!(message.contains(expected), "{tool} {arguments}: {message}");
        assert_eq!(structured(&result)["error"]["kind"], "invalid_arguments");
    }
    decoy.assert_untouched();
    still_serves(&server).await;
}

#[tokio::test]
async fn files_inside_cannot_make_gdal_read_outside() {
    let decoy = Decoy::new();
    let (url, hits) = listener();
    let server = start(&["dem.tif"]).await;
    let vrt = |source: &str| {
        format!(
            r#"<VRTDataset rasterXSize="111" rasterYSize="111">
  <VRTRasterBand dataType="Float32" band="1">
    <SimpleSource><SourceFilename relativeToVRT="0">{source}</SourceFilename><SourceBand>1</SourceBand></SimpleSource>
  </VRTRasterBand>
</VRTDataset>"#
        )
    };
    std::fs::write(server.path("outside.vrt"), vrt(&decoy.path("outside.tif"))).unwrap();
    std::fs::write(
        server.path("relative.vrt"),
        vrt("../../../../../../../../etc/hostname"),
    )
    .unwrap();
    std::fs::write(server.path("curl.vrt"), vrt(&format!("/vsicurl/{url}"))).unwrap();
    std::fs::write(
        server.path("raw.vrt"),
        r#"<VRTDataset rasterXSize="16" rasterYSize="1">
  <VRTRasterBand dataType="Byte" band="1" subClass="VRTRawRasterBand">
    <SourceFilename relativetoVRT="0">/proc/self/environ</SourceFilename>
    <ImageOffset>0</ImageOffset><PixelOffset>1</PixelOffset><LineOffset>16</LineOffset>
  </VRTRasterBand>
</VRTDataset>"#,
    )
    .unwrap();
    // An .aux.xml whose OVERVIEW_FILE points outside, and a symlinked .ovr sidecar.
    std::fs::copy(server.path("dem.tif"), server.path("aux.tif")).unwrap();
    std::fs::write(
        server.path("aux.tif.aux.xml"),
        format!(
            r#"<PAMDataset><Metadata domain="OVERVIEWS"><MDI key="OVERVIEW_FILE">{}</MDI></Metadata></PAMDataset>"#,
            decoy.path("outside.tif")
        ),
    )
    .unwrap();
    std::fs::copy(server.path("dem.tif"), server.path("linked.tif")).unwrap();
    std::os::unix::fs::symlink(decoy.path("outside.tif"), server.path("linked.tif.ovr")).unwrap();
    // An OGR VRT whose source is outside, and a shapefile whose .dbf is a link outside.
    std::fs::write(
        server.path("layer.vrt"),
        format!(
            r#"<OGRVRTDataSource><OGRVRTLayer name="x"><SrcDataSource>{}</SrcDataSource></OGRVRTLayer></OGRVRTDataSource>"#,
            decoy.path("secret.txt")
        ),
    )
    .unwrap();
    let data = gdal_mcp_tests::testdata().unwrap();
    for ext in ["shp", "shx", "prj"] {
        std::fs::copy(
            data.join(format!("nc.{ext}")),
            server.path(&format!("nc.{ext}")),
        )
        .unwrap();
    }
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::copy(data.join("nc.dbf"), elsewhere.path().join("nc.dbf")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("nc.dbf"), server.path("nc.dbf")).unwrap();
    for (tool, arguments) in [
        ("vector_info", json!({"input": "layer.vrt"})),
        ("vector_info", json!({"input": "nc.shp"})),
        (
            "vector_convert",
            json!({"input": "nc.shp", "output": "copy-nc.gpkg"}),
        ),
    ] {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool} {arguments}: {}", text(&result));
        assert!(
            !text(&result).contains("do not read me"),
            "{}",
            text(&result)
        );
    }

    for name in [
        "outside.vrt",
        "relative.vrt",
        "curl.vrt",
        "raw.vrt",
        "aux.tif",
        "linked.tif",
    ] {
        for (tool, arguments) in [
            ("raster_info", json!({"input": name})),
            ("raster_stats", json!({"input": name})),
            (
                "raster_convert",
                json!({"input": name, "output": format!("copy-{name}.tif")}),
            ),
        ] {
            let result = server.call(tool, arguments.clone()).await.unwrap();
            assert!(is_error(&result), "{tool} {arguments}: {}", text(&result));
            let message = error_message(&result);
            assert!(
                message.contains("outside every workspace")
                    || message.contains("leaving the workspaces")
                    || message.contains("is not allowed")
                    || message.contains("opening"),
                "{tool} {name}: {message}"
            );
            assert!(
                !text(&result).contains("PATH="),
                "environment leaked: {name}"
            );
        }
    }
    assert!(
        std::fs::read_dir(server.workspace.path())
            .unwrap()
            .filter_map(Result::ok)
            .all(|e| !e.file_name().to_string_lossy().starts_with("copy-")),
        "nothing was copied in"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "no request reached the network"
    );
    decoy.assert_untouched();
    still_serves(&server).await;
}

#[tokio::test]
async fn crs_arguments_are_never_read_as_files_or_urls() {
    let decoy = Decoy::new();
    let (url, hits) = listener();
    let server = start(&["dem.tif", "nc.gpkg"]).await;
    for crs in [decoy.path("x.prj"), url.clone(), format!("/vsicurl/{url}")] {
        for (tool, arguments) in [
            (
                "raster_reproject",
                json!({"input": "dem.tif", "output": "o.tif", "dst_crs": crs, "resampling": "nearest"}),
            ),
            (
                "raster_reproject",
                json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326",
                       "src_crs": crs, "resampling": "nearest"}),
            ),
            (
                "vector_reproject",
                json!({"input": "nc.gpkg", "output": "o.gpkg", "dst_crs": crs}),
            ),
        ] {
            let result = server.call(tool, arguments.clone()).await.unwrap();
            assert!(is_error(&result), "{tool} {arguments}");
            let all = text(&result);
            assert!(all.contains("never read"), "{tool} {crs}: {all}");
            assert!(
                !all.contains("SECRET_OUTSIDE_CRS"),
                "the file's WKT leaked: {all}"
            );
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "no CRS URL was fetched");
    decoy.assert_untouched();
    still_serves(&server).await;
}

#[tokio::test]
async fn outputs_never_replace_inputs_sidecars_or_the_store() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif", "nc.shp", "nc.dbf", "nc.shx", "nc.prj", "nc.gpkg"]).await;
    let dbf_before = std::fs::read(server.path("nc.dbf")).unwrap();
    std::fs::write(server.path("new.dbf"), b"unrelated file\n").unwrap();
    let justification = |domain: &str| json!({domain: gdal_mcp_tests::justification("x")});
    let cases = [
        // An output named like an input's sidecar rewrote the input shapefile.
        (
            "vector_clip",
            json!({"input": "nc.shp", "output": "nc.dbf", "overwrite": true, "format": "ESRI Shapefile",
                   "bounds": {"xmin": -80.0, "ymin": 35.0, "xmax": -78.0, "ymax": 36.0}}),
            "an input of this call",
        ),
        // A new Shapefile silently replaced an unrelated new.dbf.
        (
            "vector_convert",
            json!({"input": "nc.gpkg", "output": "new.shp"}),
            "already exists",
        ),
        // Fake overviews for the input.
        (
            "raster_resample",
            json!({"input": "dem.tif", "output": "dem.tif.ovr", "resampling": "nearest",
                   "size": [10, 10], "justification": justification("resampling")}),
            "sidecar name",
        ),
        // A tool output inside the capsule store.
        (
            "vector_convert",
            json!({"input": "nc.gpkg", "output": ".preflight/planted.geojson"}),
            "belongs to the server",
        ),
    ];
    std::fs::create_dir_all(server.path(".preflight")).unwrap();
    for (tool, arguments, expected) in cases {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool} {arguments}: {}", text(&result));
        let message = text(&result);
        assert!(message.contains(expected), "{tool} {arguments}: {message}");
    }
    assert_eq!(std::fs::read(server.path("nc.dbf")).unwrap(), dbf_before);
    assert_eq!(
        std::fs::read(server.path("new.dbf")).unwrap(),
        b"unrelated file\n"
    );
    assert!(!server.path("dem.tif.ovr").exists());
    assert!(!server.path(".preflight/planted.geojson").exists());
    let leftovers: Vec<String> = std::fs::read_dir(server.workspace.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".gdal-mcp-"))
        .collect();
    assert!(leftovers.is_empty(), "staging folders left: {leftovers:?}");
    decoy.assert_untouched();
    still_serves(&server).await;
}

#[tokio::test]
async fn a_huge_declared_raster_is_refused_before_any_allocation() {
    let server = start(&["dem.tif"]).await;
    std::fs::write(
        server.path("huge.vrt"),
        r#"<VRTDataset rasterXSize="100000" rasterYSize="100000">
  <SRS>EPSG:32633</SRS>
  <GeoTransform>500000, 10, 0, 5000000, 0, -10</GeoTransform>
  <VRTRasterBand dataType="Float32" band="1"><NoDataValue>-9999</NoDataValue></VRTRasterBand>
</VRTDataset>"#,
    )
    .unwrap();
    let started = Instant::now();
    for method in ["fill", "fill_epsilon", "breach"] {
        let result = server
            .call(
                "dem_condition",
                json!({"input": "huge.vrt", "output": format!("{method}.tif"), "method": method,
                       "justification": {"hydrology": gdal_mcp_tests::justification(method)}}),
            )
            .await
            .unwrap();
        assert!(is_error(&result), "{method}: {}", text(&result));
        assert!(
            text(&result).contains("budget"),
            "{method}: {}",
            text(&result)
        );
    }
    let exact = server
        .call("raster_stats", json!({"input": "huge.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&exact));
    assert!(text(&exact).contains("sample"), "{}", text(&exact));
    let sized = server
        .call(
            "raster_resample",
            json!({"input": "dem.tif", "output": "big.tif", "resampling": "nearest",
                   "size": [100000, 100000]}),
        )
        .await
        .unwrap();
    assert!(
        is_error(&sized) && text(&sized).contains("budget"),
        "{}",
        text(&sized)
    );
    // Band math writes one band as large as its input: refused before any cell is computed.
    let calc = server
        .call(
            "raster_calc",
            json!({"inputs": {"a": "huge.vrt"}, "expression": "a * 2", "output": "calc.tif",
                   "data_type": "Float32"}),
        )
        .await
        .unwrap();
    assert!(
        is_error(&calc) && text(&calc).contains("budget"),
        "{}",
        text(&calc)
    );
    assert!(!server.path("calc.tif").exists());
    assert!(started.elapsed() < Duration::from_secs(60));
    still_serves(&server).await;
}

#[tokio::test]
async fn the_store_listing_survives_symlinks_fifos_and_planted_capsules() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let folder = server.justifications().join("crs_datum");
    std::fs::create_dir_all(&folder).unwrap();
    let hex = "a".repeat(64);
    std::os::unix::fs::symlink("/dev/zero", folder.join(format!("{hex}.json"))).unwrap();
    let fifo = folder.join(format!("{}.json", "b".repeat(64)));
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink(
        decoy.path("secret.txt"),
        folder.join(format!("{}.json", "c".repeat(64))),
    )
    .unwrap();
    let started = Instant::now();
    let resources =
        tokio::time::timeout(Duration::from_secs(20), server.client.list_all_resources())
            .await
            .expect("resources/list answered")
            .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(resources.iter().all(|r| !r.uri.contains(&hex)));
    decoy.assert_untouched();
    still_serves(&server).await;
}

#[tokio::test]
async fn a_sleeping_plugin_under_load_costs_refused_calls_not_the_server() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_component("hostile"),
        plugins.path().join("hostile.wasm"),
    )
    .unwrap();
    let server = Arc::new(
        Server::start(
            Era::Legacy,
            Options {
                data: vec!["dem.tif"],
                plugin_dirs: vec![plugins.path().to_path_buf()],
                ..Default::default()
            },
        )
        .await
        .unwrap(),
    );
    let mut calls = Vec::new();
    for i in 0..600 {
        let server = server.clone();
        calls.push(tokio::spawn(async move {
            server
                .call(
                    "raster_reproject",
                    json!({"input": "dem.tif", "output": format!("sleep-{i}.tif"),
                           "dst_crs": "EPSG:4326", "resampling": "bilinear"}),
                )
                .await
        }));
    }
    // raster_info is answered within a second throughout.
    for _ in 0..5 {
        let started = Instant::now();
        let info = server
            .call("raster_info", json!({"input": "dem.tif"}))
            .await
            .unwrap();
        assert!(!is_error(&info));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "raster_info took {:?} under load",
            started.elapsed()
        );
    }
    for call in calls {
        let result = call.await.unwrap().unwrap();
        assert!(is_error(&result));
        let error = &structured(&result)["error"];
        assert_eq!(error["kind"], "plugin_failure", "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains("tried to wait"),
            "{error}"
        );
    }
    still_serves(&server).await;
}

/// Send raw lines to a fresh server and return every reply line, by id.
fn raw_session(lines: &[String]) -> Vec<Value> {
    let workspace = tempfile::tempdir().unwrap();
    let mut child = gdal_mcp_tests::spawn_raw(workspace.path(), false).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .map(|l| serde_json::from_str::<Value>(&l).expect("only JSON on stdout"))
            .collect::<Vec<_>>()
    });
    for line in lines {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    drop(stdin);
    let replies = reader.join().unwrap();
    let mut status = None;
    for _ in 0..200 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if status.is_none() {
        let _ = child.kill();
        panic!("the server did not exit after stdin closed");
    }
    replies
}

#[test]
fn every_request_gets_an_answer() {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let lines: Vec<String> = vec![
        init.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"raster_info","arguments":{"input":NaN}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/li"#.to_string(),
        r#"{"id":4,"method":"ping"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":123}}"#.to_string(),
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(17 << 20)),
        r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#.to_string(),
    ];
    let replies = raw_session(&lines);
    let code_of = |id: Value| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .map(|r| r["error"]["code"].as_i64().unwrap_or(0))
    };
    assert_eq!(code_of(json!(1)), Some(-32602), "{replies:?}");
    // NaN and the truncated line are not JSON (-32700), answered with the id they carry
    // (attack round 4, B5: the id is found by a scan of the line's top-level members).
    assert_eq!(code_of(json!(2)), Some(-32700), "{replies:?}");
    assert_eq!(code_of(json!(3)), Some(-32700), "{replies:?}");
    assert_eq!(code_of(json!(4)), Some(-32600));
    assert_eq!(code_of(json!(6)), Some(-32602));
    // The oversize line is answered with the id its head carries (attack round 16, R16-C7).
    assert_eq!(code_of(json!(7)), Some(-32600), "{replies:?}");
    assert_eq!(
        code_of(json!(8)),
        Some(0),
        "ping still answered after all that"
    );
    let null_codes: Vec<i64> = replies
        .iter()
        .filter(|r| r["id"].is_null())
        .filter_map(|r| r["error"]["code"].as_i64())
        .collect();
    // The object id (-32600); nothing unparseable lost its id.
    assert_eq!(
        null_codes.iter().filter(|c| **c == -32700).count(),
        0,
        "{null_codes:?}"
    );
    assert_eq!(
        null_codes.iter().filter(|c| **c == -32600).count(),
        1,
        "{null_codes:?}"
    );
}

/// Regression: `notifications/cancelled` was ignored by the GDAL tools (a cancelled warp was
/// committed 40 s later). GDAL now stops through its progress callback and nothing is written,
/// not even the justification the call carried (R16-C2). And while the call works, another
/// call of the decision without a justification does not run on it (attack round 17, R17-C3:
/// it did, and its record then named a capsule that was withdrawn).
#[test]
fn a_cancelled_warp_writes_nothing() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    let mut child = gdal_mcp_tests::spawn_raw(workspace.path(), false).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        stdin.write_all(v.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    // 9000 x 9000 cells with lanczos: seconds of GDAL work.
    send(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":"big.tif","resampling":"lanczos","size":[9000, 9000],
        "justification":{"resampling": gdal_mcp_tests::justification("lanczos")}}}}),
    );
    std::thread::sleep(Duration::from_millis(350));
    send(
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":"small.tif","resampling":"lanczos","size":[10, 10]}}}),
    );
    std::thread::sleep(Duration::from_millis(350));
    send(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}}),
    );
    std::thread::sleep(Duration::from_secs(8));
    send(json!({"jsonrpc":"2.0","id":6,"method":"ping"}));
    let mut answered_ping = false;
    let mut during: Option<Value> = None;
    for _ in 0..20 {
        line.clear();
        if stdout.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let reply: Value = serde_json::from_str(&line).unwrap();
        if reply["id"] == json!(7) {
            during = Some(reply.clone());
        }
        if reply["id"] == json!(6) {
            answered_ping = true;
            break;
        }
    }
    let during = during.expect("the call made meanwhile is answered");
    assert_eq!(during["result"]["isError"], json!(true), "{during}");
    assert!(!workspace.path().join("small.tif").exists(), "{during}");
    assert!(
        answered_ping,
        "the server still answers after the cancellation"
    );
    assert!(
        !workspace.path().join("big.tif").exists(),
        "a cancelled warp must not be committed"
    );
    let leftovers: Vec<String> = std::fs::read_dir(workspace.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".gdal-mcp-"))
        .collect();
    assert!(leftovers.is_empty(), "staging folders left: {leftovers:?}");
    // Attack round 16, R16-C2: the justification the cancelled call carried was stored as the
    // decision's capsule and answered later calls; it is withdrawn, and the ledger says so.
    let capsules: Vec<std::path::PathBuf> = std::fs::read_dir(
        workspace
            .path()
            .join(".preflight/justifications/resampling"),
    )
    .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
    .unwrap_or_default();
    assert!(capsules.is_empty(), "capsules kept: {capsules:?}");
    let ledger = std::fs::read_to_string(workspace.path().join(".preflight/ledger.jsonl"))
        .unwrap_or_default();
    assert!(ledger.contains("\"withdrawal\""), "{ledger}");
    drop(stdin);
    let _ = child.wait();
}

/// Regression: a SIGKILL mid-write left the staging folder forever. Old ones are swept at
/// start; a fresh one (another server may be writing into it) stays.
#[tokio::test]
async fn stale_staging_folders_are_swept_at_start() {
    let workspace = tempfile::tempdir().unwrap();
    let old = workspace.path().join("sub/.gdal-mcp-old");
    let fresh = workspace.path().join(".gdal-mcp-fresh");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("half.tif"), b"half-written").unwrap();
    std::fs::create_dir_all(&fresh).unwrap();
    assert!(std::process::Command::new("touch")
        .args(["-d", "3 hours ago"])
        .arg(&old)
        .status()
        .unwrap()
        .success());
    let client = Server::connect(Era::Legacy, workspace.path(), &Options::default())
        .await
        .unwrap();
    assert!(!old.exists(), "the stale staging folder was swept");
    assert!(fresh.exists(), "a recent staging folder is left alone");
    drop(client);
}

/// Regression: paths were checked once and reopened by name later, so flipping a workspace
/// folder to a symlink in between created outputs outside the workspace or copied outside
/// pixels in. Folders are now pinned (opened without following links) for GDAL's reads and
/// for the staging, writes and renames of outputs. Bounded: 40 calls against a flipping link.
#[tokio::test]
async fn a_folder_flipped_to_a_link_during_calls_never_leads_outside() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let real = server.path("flip");
    std::fs::create_dir(&real).unwrap();
    std::fs::copy(server.path("dem.tif"), real.join("data.tif")).unwrap();
    // Outside, the same name holds a different raster (the Landsat scene, 349 columns).
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("L7_ETMs.tif"),
        decoy.dir.path().join("data.tif"),
    )
    .unwrap();
    let decoy = Decoy {
        before: Decoy::snapshot(decoy.dir.path()),
        dir: decoy.dir,
    };
    let aside = server.path("flip_real");
    let target = decoy.dir.path().to_path_buf();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipping = stop.clone();
    let (link, real_dir) = (real.clone(), aside.clone());
    let flipper = std::thread::spawn(move || {
        let mut flips = 0u32;
        while !flipping.load(Ordering::SeqCst) && flips < 100_000 {
            if std::fs::rename(&link, &real_dir).is_ok() {
                let _ = std::os::unix::fs::symlink(&target, &link);
                std::thread::sleep(Duration::from_micros(500));
                let _ = std::fs::remove_file(&link);
                let _ = std::fs::rename(&real_dir, &link);
            }
            std::thread::sleep(Duration::from_millis(3));
            flips += 1;
        }
        flips
    });
    let mut written = 0;
    for i in 0..40 {
        let out = format!("flip/out_{i}.tif");
        let result = server
            .call(
                "raster_convert",
                json!({"input": "flip/data.tif", "output": out}),
            )
            .await
            .unwrap();
        if !is_error(&result) {
            written += 1;
            assert_eq!(
                structured(&result)["width"],
                json!(111),
                "the output holds the inside raster, never the outside one"
            );
        }
        let info = server
            .call("raster_info", json!({"input": "flip/data.tif"}))
            .await
            .unwrap();
        if !is_error(&info) {
            assert_eq!(structured(&info)["facts"]["raster"]["width"], json!(111));
        }
    }
    stop.store(true, Ordering::SeqCst);
    let flips = flipper.join().unwrap();
    assert!(
        flips > 10,
        "the link flipped during the calls ({flips} flips)"
    );
    let _ = std::fs::remove_file(&real);
    if aside.exists() {
        std::fs::rename(&aside, &real).unwrap();
    }
    eprintln!("{written} of 40 conversions ran while the folder flipped {flips} times");
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// Regression: an ENVI conversion replaced the input's `.hdr`, so the input read as garbage.
#[tokio::test]
async fn a_conversion_never_rewrites_an_input_header() {
    let server = start(&["dem.tif"]).await;
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-of", "ENVI"])
        .arg(server.path("dem.tif"))
        .arg(server.path("img.bil"))
        .status()
        .unwrap();
    assert!(status.success());
    let header = std::fs::read(server.path("img.hdr")).unwrap();
    let data = std::fs::read(server.path("img.bil")).unwrap();
    for overwrite in [false, true] {
        let result = server
            .call(
                "raster_convert",
                json!({"input": "img.bil", "output": "img.envi", "format": "ENVI",
                       "overwrite": overwrite}),
            )
            .await
            .unwrap();
        assert!(
            is_error(&result),
            "overwrite {overwrite}: {}",
            text(&result)
        );
        assert!(text(&result).contains("img.hdr"), "{}", text(&result));
    }
    assert_eq!(std::fs::read(server.path("img.hdr")).unwrap(), header);
    assert_eq!(std::fs::read(server.path("img.bil")).unwrap(), data);
    assert!(!server.path("img.envi").exists());
    still_serves(&server).await;
}

/// Regression: copying another component's compiled artifact over a built-in's cache entry
/// replaced that domain at the next start (deserialising it is running native code).
#[test]
fn a_tampered_component_cache_is_not_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let domains = |cache: &Path| {
        let out = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
            .arg("domains")
            .arg("--workspace")
            .arg(workspace.path())
            .arg("--cache-dir")
            .arg(cache)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let clean = domains(cache.path());
    for id in [
        "crs_datum",
        "resampling",
        "hydrology",
        "format_selection",
        "aggregation",
    ] {
        assert!(clean.contains(id), "{clean}");
    }
    let mut artifacts: Vec<PathBuf> = std::fs::read_dir(cache.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    artifacts.sort();
    assert!(artifacts.len() >= 5, "{artifacts:?}");
    // Rotate the artifacts: every built-in's entry now holds another built-in's code.
    let first = std::fs::read(&artifacts[0]).unwrap();
    for pair in artifacts.windows(2) {
        std::fs::copy(&pair[1], &pair[0]).unwrap();
    }
    std::fs::write(artifacts.last().unwrap(), first).unwrap();
    assert_eq!(
        domains(cache.path()),
        clean,
        "the same domains load, recompiled"
    );
}

/// Regressions from a black-box attack on the hardened build: a VRT mask band reading outside
/// (and `/dev/stdin`), layer names that address paths, a FIFO input or sidecar, a dangling
/// `.aux.xml` link written through by statistics, a linked capsule store, a CRS naming a grid
/// file, and tiny files declaring rasters that fill the disk.
#[tokio::test]
async fn second_round_attacks_are_refused() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif", "nc.gpkg"]).await;
    let ws = server.workspace.path().to_path_buf();
    let mask = |source: &str| {
        format!(
            r#"<VRTDataset rasterXSize="111" rasterYSize="111">
  <VRTRasterBand dataType="Float32" band="1">
    <SimpleSource><SourceFilename relativeToVRT="1">dem.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource>
  </VRTRasterBand>
  <MaskBand><VRTRasterBand dataType="Byte" subClass="VRTRawRasterBand"><SourceFilename relativetoVRT="0">{source}</SourceFilename><ImageOffset>0</ImageOffset><PixelOffset>1</PixelOffset><LineOffset>111</LineOffset></VRTRasterBand></MaskBand>
</VRTDataset>"#
        )
    };
    std::fs::write(ws.join("mask.vrt"), mask(&decoy.path("secret.txt"))).unwrap();
    std::fs::write(ws.join("stdin.tif"), mask("/dev/stdin")).unwrap();
    for input in ["mask.vrt", "stdin.tif"] {
        let result = server
            .call(
                "raster_convert",
                json!({"input": input, "output": format!("out-{input}.tif")}),
            )
            .await
            .unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert!(
            text(&result).contains("outside every workspace"),
            "{}",
            text(&result)
        );
    }

    std::fs::write(
        ws.join("two.geojson"),
        r#"{"type":"FeatureCollection","name":"../../../../../../../../tmp/gdal-mcp-pwned",
            "features":[{"type":"Feature","properties":{"a":1},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#,
    )
    .unwrap();
    for (arguments, expected) in [
        (
            json!({"input": "two.geojson", "output": "out.csv"}),
            "looks like a path",
        ),
        (
            json!({"input": "nc.gpkg", "output": "kout", "format": "CSV"}),
            "no extension",
        ),
    ] {
        let result = server
            .call("vector_convert", arguments.clone())
            .await
            .unwrap();
        assert!(is_error(&result), "{arguments}");
        assert!(
            text(&result).contains(expected),
            "{arguments}: {}",
            text(&result)
        );
    }
    assert!(!Path::new("/tmp/gdal-mcp-pwned.csv").exists());

    std::fs::copy(ws.join("dem.tif"), ws.join("f.tif")).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(ws.join("f.tif.aux.xml"))
        .status()
        .unwrap()
        .success());
    assert!(std::process::Command::new("mkfifo")
        .arg(ws.join("fifo.tif"))
        .status()
        .unwrap()
        .success());
    std::fs::copy(ws.join("dem.tif"), ws.join("p.tif")).unwrap();
    std::os::unix::fs::symlink(decoy.dir.path().join("pam.xml"), ws.join("p.tif.aux.xml")).unwrap();
    for (input, stats) in [("f.tif", false), ("fifo.tif", false), ("p.tif", true)] {
        let started = Instant::now();
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            server.call("raster_info", json!({"input": input, "stats": stats})),
        )
        .await
        .expect("answered, not blocked")
        .unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    // A FIFO anywhere in an input's folder refuses the input (R13-15): these are done.
    std::fs::remove_file(ws.join("f.tif.aux.xml")).unwrap();
    std::fs::remove_file(ws.join("fifo.tif")).unwrap();

    let bound = |path: &str| {
        format!(
            r#"BOUNDCRS[SOURCECRS[GEOGCRS["x",DATUM["WGS 84",ELLIPSOID["WGS 84",6378137,298.257223563]],CS[ellipsoidal,2],AXIS["lat",north],AXIS["lon",east],ANGLEUNIT["degree",0.0174532925199433]]],TARGETCRS[GEOGCRS["WGS 84",DATUM["WGS 84",ELLIPSOID["WGS 84",6378137,298.257223563]],CS[ellipsoidal,2],AXIS["lat",north],AXIS["lon",east],ANGLEUNIT["degree",0.0174532925199433]]],ABRIDGEDTRANSFORMATION["x",METHOD["NTv2"],PARAMETERFILE["Latitude and longitude difference file","{path}"]]]"#
        )
    };
    for path in ["/etc/shadow", "/dev/stdin", "/nonexistent"] {
        let result = server
            .call(
                "raster_reproject",
                json!({"input": "dem.tif", "output": "o.tif", "dst_crs": bound(path), "resampling": "nearest"}),
            )
            .await
            .unwrap();
        assert!(is_error(&result));
        assert!(text(&result).contains("names a grid"), "{}", text(&result));
    }

    std::fs::write(
        ws.join("huge.vrt"),
        r#"<VRTDataset rasterXSize="100000" rasterYSize="100000"><SRS>EPSG:31985</SRS>
  <GeoTransform>288776, 10, 0, 9120760, 0, -10</GeoTransform>
  <VRTRasterBand dataType="Float32" band="1"><NoDataValue>-9999</NoDataValue></VRTRasterBand></VRTDataset>"#,
    )
    .unwrap();
    std::fs::write(
        ws.join("big_zone.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::31985"}},
            "features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[288776,8120760],[1288776,8120760],[1288776,9120760],[288776,9120760],[288776,8120760]]]}}]}"#,
    )
    .unwrap();
    let justified =
        |domain: &str, method: &str| json!({domain: gdal_mcp_tests::justification(method)});
    let huge = [
        (
            "raster_convert",
            json!({"input": "huge.vrt", "output": "h1.tif"}),
        ),
        (
            "raster_overviews",
            json!({"input": "huge.vrt", "output": "h2.tif", "resampling": "nearest",
            "justification": justified("resampling", "nearest")}),
        ),
        (
            "raster_terrain",
            json!({"input": "huge.vrt", "output": "h3.tif", "operation": "slope"}),
        ),
        (
            "raster_reproject",
            json!({"input": "dem.tif", "output": "h4.tif", "dst_crs": "EPSG:31985",
            "resampling": "nearest", "bounds": {"xmin": 0, "ymin": 0, "xmax": 9000000, "ymax": 9000000}}),
        ),
        (
            "zonal_stats",
            json!({"input": "huge.vrt", "zones": "big_zone.geojson", "stats": ["median"],
            "semantics": "cell_centre", "justification": justified("aggregation", "median cell_centre")}),
        ),
    ];
    for (tool, arguments) in huge {
        let started = Instant::now();
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool}: {}", text(&result));
        assert!(
            text(&result).contains("budget"),
            "{tool}: {}",
            text(&result)
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{tool} took {:?}",
            started.elapsed()
        );
    }
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// A capsule store that is a link (`.preflight -> /elsewhere`) is neither written nor read.
#[tokio::test]
async fn a_linked_capsule_store_is_never_written() {
    let decoy = Decoy::new();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    std::fs::create_dir(decoy.dir.path().join("store")).unwrap();
    let decoy = Decoy {
        before: Decoy::snapshot(decoy.dir.path()),
        dir: decoy.dir,
    };
    std::os::unix::fs::symlink(
        decoy.dir.path().join("store"),
        workspace.path().join(".preflight"),
    )
    .unwrap();
    let client = Server::connect(Era::Legacy, workspace.path(), &Options::default())
        .await
        .unwrap();
    let arguments = json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "nearest",
        "justification": {"crs_datum": gdal_mcp_tests::justification("EPSG:4326"),
                          "resampling": gdal_mcp_tests::justification("nearest")}});
    let result = gdal_mcp_tests::call(&client, "raster_reproject", arguments)
        .await
        .unwrap();
    assert!(is_error(&result), "{}", text(&result));
    assert!(text(&result).contains("link"), "{}", text(&result));
    assert!(
        std::fs::read_dir(decoy.dir.path().join("store"))
            .unwrap()
            .next()
            .is_none(),
        "nothing was written into the linked store"
    );
    decoy.assert_untouched();
}

/// Regression: a plugin touching 60 MiB per call under 48 concurrent calls took the process to
/// 2.8 GiB. Plugin jobs run at most four at once, so the peak stays near 4 × 64 MiB above the
/// server's own memory.
#[test]
fn concurrent_memory_hungry_plugin_calls_are_bounded() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_component("hostile"),
        plugins.path().join("hostile.wasm"),
    )
    .unwrap();
    let mut child = gdal_mcp_tests::spawn_raw_with(
        workspace.path(),
        false,
        &["--plugins".as_ref(), plugins.path().as_os_str()],
    )
    .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = vec![
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    ];
    for i in 1..=48 {
        lines.push(json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"raster_reproject",
            "arguments":{"input":"dem.tif","output":format!("oom-{i}.tif"),"dst_crs":"EPSG:4326","resampling":"bilinear"}}}));
    }
    for line in &lines {
        stdin.write_all(line.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    stdin.flush().unwrap();
    let mut answered = 0;
    for line in stdout.lines().map_while(Result::ok) {
        let reply: Value = serde_json::from_str(&line).unwrap();
        if reply["id"].as_i64().is_some_and(|id| id >= 1) {
            assert_eq!(reply["result"]["isError"], json!(true), "{line}");
            answered += 1;
            if answered == 48 {
                break;
            }
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    drop(stdin);
    let _ = child.wait();
    eprintln!(
        "peak resident memory under 48 concurrent 64 MiB plugin calls: {} MiB",
        peak_kb / 1024
    );
    assert_eq!(answered, 48);
    assert!(
        peak_kb < 1024 * 1024,
        "peak resident memory {} MiB under 48 concurrent 64 MiB plugin calls",
        peak_kb / 1024
    );
}

/// Regression: a 65536-band VRT made `raster_info` answer 28 MiB. Results are capped.
#[tokio::test]
async fn an_enormous_result_is_refused_not_sent() {
    let server = start(&["dem.tif"]).await;
    let mut vrt = String::from(r#"<VRTDataset rasterXSize="2" rasterYSize="2">"#);
    for band in 1..=40_000 {
        vrt.push_str(&format!(
            r#"<VRTRasterBand dataType="Byte" band="{band}"><Description>band number {band} with a long description</Description></VRTRasterBand>"#
        ));
    }
    vrt.push_str("</VRTDataset>");
    std::fs::write(server.path("bands.vrt"), vrt).unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        server.call("raster_info", json!({"input": "bands.vrt"})),
    )
    .await
    .expect("answered")
    .unwrap();
    assert!(is_error(&result));
    assert!(
        text(&result).contains("more than the"),
        "{}",
        &text(&result)[..200.min(text(&result).len())]
    );
    still_serves(&server).await;
}

/// Regression (second attack round): a raster's own `.prj` naming a grid file made PROJ open it
/// while GDAL opened the raster: a FIFO outside blocked the read-only tools, and `/dev/stdin`
/// consumed the client's requests. Such inputs are refused before GDAL opens them, and stdin is
/// the protocol's alone (fd 0 points at /dev/null).
#[tokio::test]
async fn a_crs_inside_a_file_cannot_name_grid_files() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let fifo = tempfile::tempdir().unwrap();
    let fifo_path = fifo.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo_path)
        .status()
        .unwrap()
        .success());
    for (name, grid) in [
        ("fifo", fifo_path.display().to_string()),
        ("stdin", "/dev/stdin".to_string()),
    ] {
        let asc = server.path(&format!("{name}.asc"));
        assert!(std::process::Command::new("gdal_translate")
            .args(["-q", "-of", "AAIGrid"])
            .arg(server.path("dem.tif"))
            .arg(&asc)
            .status()
            .unwrap()
            .success());
        let _ = std::fs::remove_file(server.path(&format!("{name}.asc.aux.xml")));
        std::fs::write(
            server.path(&format!("{name}.prj")),
            format!(
                r#"GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433],EXTENSION["PROJ4","+proj=longlat +ellps=WGS84 +nadgrids={grid} +wktext +no_defs"]]"#
            ),
        )
        .unwrap();
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            server.call("raster_info", json!({"input": format!("{name}.asc")})),
        )
        .await
        .expect("answered, not blocked")
        .unwrap();
        assert!(is_error(&result), "{name}: {}", text(&result));
        assert!(
            text(&result).contains("grid or parameter file"),
            "{}",
            text(&result)
        );
    }
    for _ in 0..3 {
        let listed = tokio::time::timeout(Duration::from_secs(10), server.client.list_all_tools())
            .await
            .expect("every request is still answered");
        assert!(listed.is_ok());
    }
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// Run a command that builds a fixture; it must succeed.
fn run(program: &str, args: &[&str]) {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Regression (issue 21): a GeoPackage or SpatiaLite database whose SQLite schema declares a
/// `VirtualText` / `VirtualShape` table over a CSV or shapefile outside the workspace:
/// `vector_info` listed the outside fields and `vector_convert` / `vector_overlay` copied the
/// outside rows in, while GDAL's file list named only the container. So did a view calling
/// SpatiaLite's `BlobFromFile`, and the same database under another extension (GDAL knows
/// SQLite by its header). The clean twins (a GeoPackage with its R*Tree index, a SpatiaLite
/// database with SpatiaLite's own index and KNN tables) still work.
#[tokio::test]
async fn sqlite_virtual_tables_cannot_read_outside() {
    let mut decoy = Decoy::new();
    decoy.add("rows.csv", b"id,name,x,y\n1,SECRET_ROW,1.5,2.5\n");
    let data = gdal_mcp_tests::testdata().unwrap();
    for ext in ["shp", "shx", "dbf", "prj"] {
        decoy.add(
            &format!("shapes.{ext}"),
            &std::fs::read(data.join(format!("nc.{ext}"))).unwrap(),
        );
    }
    let server = start(&["nc.gpkg"]).await;
    let ws = |name: &str| server.path(name).display().to_string();
    // A GeoPackage with a VirtualText table over the outside CSV (created through GDAL, whose
    // SQLite connections carry SpatiaLite's modules).
    std::fs::copy(server.path("nc.gpkg"), server.path("text.gpkg")).unwrap();
    let text_table = format!(
        "CREATE VIRTUAL TABLE leak USING VirtualText('{}', 'UTF-8', 1, POINT, DOUBLEQUOTE, ',')",
        decoy.path("rows.csv")
    );
    run("ogrinfo", &["-q", &ws("text.gpkg"), "-sql", &text_table]);
    // A SpatiaLite database with a VirtualShape table over the outside shapefile, and its
    // clean twin.
    run(
        "ogr2ogr",
        &[
            "-f",
            "SQLite",
            "-dsco",
            "SPATIALITE=YES",
            &ws("clean.sqlite"),
            &ws("nc.gpkg"),
        ],
    );
    std::fs::copy(server.path("clean.sqlite"), server.path("shape.sqlite")).unwrap();
    let shape_table = format!(
        "CREATE VIRTUAL TABLE leak USING VirtualShape('{}', 'UTF-8', 4267)",
        decoy.path("shapes")
    );
    run(
        "ogrinfo",
        &["-q", &ws("shape.sqlite"), "-sql", &shape_table],
    );
    // The same GeoPackage under another name, and one whose view reads a file.
    std::fs::copy(server.path("text.gpkg"), server.path("disguised.dat")).unwrap();
    std::fs::copy(server.path("nc.gpkg"), server.path("view.gpkg")).unwrap();
    let view = format!(
        "CREATE VIEW leak AS SELECT \"BlobFromFile\" /* quoted */ ('{}') AS b",
        decoy.path("secret.txt")
    );
    run("sqlite3", &[&ws("view.gpkg"), &view]);

    for input in ["text.gpkg", "shape.sqlite", "disguised.dat", "view.gpkg"] {
        for (tool, arguments) in [
            ("vector_info", json!({"input": input})),
            (
                "vector_convert",
                json!({"input": input, "output": format!("copy-{input}.gpkg")}),
            ),
            (
                "vector_overlay",
                json!({"input": "nc.gpkg", "overlay": input, "operation": "intersection",
                       "output": format!("copy-overlay-{input}.gpkg")}),
            ),
        ] {
            let result = server.call(tool, arguments.clone()).await.unwrap();
            assert!(is_error(&result), "{tool} {arguments}: {}", text(&result));
            let all = text(&result);
            assert!(
                !all.contains("SECRET_ROW") && !all.contains("do not read me"),
                "outside data leaked: {all}"
            );
            let message = error_message(&result);
            assert!(
                message.contains("virtual table") || message.contains("BlobFromFile"),
                "{tool} {input}: {message}"
            );
            assert_eq!(structured(&result)["error"]["kind"], "invalid_arguments");
        }
    }
    assert!(
        std::fs::read_dir(server.workspace.path())
            .unwrap()
            .filter_map(Result::ok)
            .all(|e| !e.file_name().to_string_lossy().starts_with("copy-")),
        "nothing was copied in"
    );
    // The clean twins: a GeoPackage (R*Tree spatial index) and a SpatiaLite database
    // (VirtualSpatialIndex, VirtualElementary, VirtualKNN) open and convert.
    for input in ["nc.gpkg", "clean.sqlite"] {
        let info = server
            .call("vector_info", json!({"input": input}))
            .await
            .unwrap();
        assert!(!is_error(&info), "{input}: {}", text(&info));
        let converted = server
            .call(
                "vector_convert",
                json!({"input": input, "output": format!("twin-{input}.gpkg")}),
            )
            .await
            .unwrap();
        assert!(!is_error(&converted), "{input}: {}", text(&converted));
    }
    decoy.assert_untouched();
}

/// Regression (issue 21): VRT references were found by a raw text scan, so a path written as
/// XML character references (`&#47;`), in CDATA, or in a document whose `<VRTDataset` came
/// after 256 bytes, was not seen as GDAL sees it: a mask band reassembled an outside file
/// byte by byte. An SRS written with a reference (`+nadgrids&#61;`) named a FIFO that
/// blocked the read worker. Documents are now parsed as XML; the clean twin (a source name
/// and an SRS written with references, all inside) still opens.
#[tokio::test]
async fn vrt_references_are_read_as_gdal_reads_them() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let encode = |path: &str| path.replace('/', "&#47;");
    let secret = decoy.path("secret.txt");
    let outside = decoy.path("outside.tif");
    let band = |source: &str| {
        format!(
            r#"<VRTRasterBand dataType="Float32" band="1"><SimpleSource><SourceFilename relativeToVRT="1">{source}</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>"#
        )
    };
    let raw_mask = |source: &str| {
        format!(
            r#"<MaskBand><VRTRasterBand dataType="Byte" subClass="VRTRawRasterBand"><SourceFilename relativetoVRT="1">{source}</SourceFilename><ImageOffset>0</ImageOffset><PixelOffset>1</PixelOffset><LineOffset>111</LineOffset></VRTRasterBand></MaskBand>"#
        )
    };
    let document = |prefix: &str, body: &str| {
        format!(r#"{prefix}<VRTDataset rasterXSize="111" rasterYSize="111">{body}</VRTDataset>"#)
    };
    let cases = [
        (
            "references.vrt",
            document("", &(band("dem.tif") + &raw_mask(&encode(&secret)))),
        ),
        (
            "cdata.vrt",
            document("", &band(&format!("<![CDATA[{outside}]]>"))),
        ),
        (
            "late.vrt",
            document(
                &format!("<!-- {} -->\n", "x".repeat(400)),
                &(band("dem.tif") + &raw_mask(&secret)),
            ),
        ),
        (
            "upper.vrt",
            document(
                "",
                &format!(
                    r#"<VRTRasterBand dataType="Float32" band="1"><ComplexSource><SOURCEFILENAME RELATIVETOVRT="0">{}</SOURCEFILENAME><SourceBand>1</SourceBand></ComplexSource></VRTRasterBand>"#,
                    encode(&outside)
                ),
            ),
        ),
        (
            "dtd.vrt",
            format!(
                r#"<!DOCTYPE VRTDataset [<!ENTITY s "{outside}">]>{}"#,
                document("", &band("&s;"))
            ),
        ),
    ];
    for (name, xml) in &cases {
        std::fs::write(server.path(name), xml).unwrap();
        for (tool, arguments) in [
            ("raster_info", json!({"input": name})),
            (
                "raster_convert",
                json!({"input": name, "output": format!("copy-{name}.tif")}),
            ),
        ] {
            let result = server.call(tool, arguments.clone()).await.unwrap();
            assert!(is_error(&result), "{tool} {name}: {}", text(&result));
            let message = error_message(&result);
            assert!(
                message.contains("outside every workspace") || message.contains("DTD"),
                "{tool} {name}: {message}"
            );
            assert_eq!(structured(&result)["error"]["kind"], "invalid_arguments");
        }
    }
    assert!(
        std::fs::read_dir(server.workspace.path())
            .unwrap()
            .filter_map(Result::ok)
            .all(|e| !e.file_name().to_string_lossy().starts_with("copy-")),
        "nothing was copied in"
    );

    // An SRS naming a FIFO grid through a character reference, in the VRT and in an .aux.xml.
    let fifo_dir = tempfile::tempdir().unwrap();
    let fifo = fifo_dir.path().join("grid");
    run("mkfifo", &[&fifo.display().to_string()]);
    let srs = format!(
        "+proj=longlat +ellps=WGS84 +nadgrids&#61;{} +no_defs",
        fifo.display()
    );
    std::fs::write(
        server.path("srs.vrt"),
        document("", &format!("<SRS>{srs}</SRS>{}", band("dem.tif"))),
    )
    .unwrap();
    std::fs::copy(server.path("dem.tif"), server.path("pam.tif")).unwrap();
    std::fs::write(
        server.path("pam.tif.aux.xml"),
        format!("<PAMDataset><SRS>{srs}</SRS></PAMDataset>"),
    )
    .unwrap();
    for name in ["srs.vrt", "pam.tif"] {
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            server.call("raster_info", json!({"input": name})),
        )
        .await
        .expect("answered, not blocked on the FIFO")
        .unwrap();
        assert!(is_error(&result), "{name}: {}", text(&result));
        assert!(
            error_message(&result).contains("grid or parameter file"),
            "{name}: {}",
            text(&result)
        );
    }

    // An .aux.xml naming an outside geolocation array (gdalwarp opens it by itself).
    std::fs::copy(server.path("dem.tif"), server.path("geoloc.tif")).unwrap();
    std::fs::write(
        server.path("geoloc.tif.aux.xml"),
        format!(
            r#"<PAMDataset><Metadata domain="GEOLOCATION"><MDI key="X_DATASET">{}</MDI><MDI key="Y_DATASET">{}</MDI></Metadata></PAMDataset>"#,
            encode(&outside),
            encode(&outside)
        ),
    )
    .unwrap();
    let result = server
        .call("raster_info", json!({"input": "geoloc.tif"}))
        .await
        .unwrap();
    assert!(is_error(&result), "{}", text(&result));
    assert!(
        error_message(&result).contains("outside every workspace"),
        "{}",
        text(&result)
    );

    // The clean twin: names and an SRS written with references, every source inside.
    std::fs::write(
        server.path("twin.vrt"),
        document(
            "<!-- a mosaic -->\n",
            &format!(
                r#"<SRS>GEOGCS[&quot;WGS 84&quot;,DATUM[&quot;WGS_1984&quot;,SPHEROID[&quot;WGS 84&quot;,6378137,298.257223563]],PRIMEM[&quot;Greenwich&quot;,0],UNIT[&quot;degree&quot;,0.0174532925199433]]</SRS>{}{}"#,
                band("d&#101;m.tif"),
                raw_mask("<![CDATA[dem.tif]]>")
            ),
        ),
    )
    .unwrap();
    let twin = server
        .call("raster_info", json!({"input": "twin.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// A server started in `cwd` on `workspace`, spoken to line by line; each answer is awaited
/// at most `timeout`.
struct RawServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    answers: std::sync::mpsc::Receiver<Value>,
    next_id: u64,
    /// Answers read while waiting for another id ([`RawServer::answer`]).
    early: Vec<Value>,
}

impl RawServer {
    fn start(cwd: &Path, workspace: &Path) -> RawServer {
        let child = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
            .arg("serve")
            .arg("--workspace")
            .arg(workspace)
            .arg("--cache-dir")
            .arg(gdal_mcp_tests::shared_cache())
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        RawServer::from_child(child)
    }

    /// A server already spawned with piped stdio, initialized.
    fn from_child(mut child: std::process::Child) -> RawServer {
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send
                    .send(serde_json::from_str::<Value>(&line).unwrap())
                    .is_err()
                {
                    break;
                }
            }
        });
        let mut server = RawServer {
            child,
            stdin,
            answers,
            next_id: 0,
            early: Vec::new(),
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}),
        );
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: Value) {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer to a request, `None` if none came within 20 s.
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.answers.recv_timeout(left) {
                Ok(answer) if answer["id"] == json!(id) => return Some(answer),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// The answer to the request of `id` the caller sent itself, waiting up to 120 s; answers
    /// to other ids read meanwhile are kept for their own turn.
    fn answer(&mut self, id: i64) -> Value {
        if let Some(at) = self.early.iter().position(|r| r["id"] == json!(id)) {
            return self.early.remove(at);
        }
        loop {
            let reply = self
                .answers
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no answer to {id}"));
            if reply["id"] == json!(id) {
                return reply;
            }
            self.early.push(reply);
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .unwrap_or_else(|| panic!("{tool} {arguments}: no answer within 20 s (blocked)"));
        answer["result"].clone()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn raw_error(result: &Value) -> String {
    assert_eq!(result["isError"], json!(true), "{result}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Regression (issue 21): CRS text resolved names from files. `+init=Y:1` read the file `Y`
/// from the server's working directory (a FIFO there blocked the worker for good), an
/// authority PROJ's database does not know is looked up as a file, and the same definitions
/// inside inputs (a VRT's SRS, an `.aux.xml`, a GeoPackage's SRS table) reached PROJ when
/// GDAL parsed them. Known authorities (EPSG, IAU_2015...) and plain inputs still work.
#[test]
fn crs_text_resolves_nothing_from_files() {
    let mut decoy = Decoy::new();
    decoy.add("initfile", b"<1> +proj=longlat +ellps=clrk66 +no_defs <>\n");
    let cwd = tempfile::tempdir().unwrap();
    for name in ["Y", "epsg", "init"] {
        run("mkfifo", &[&cwd.path().join(name).display().to_string()]);
    }
    let workspace = tempfile::tempdir().unwrap();
    let data = gdal_mcp_tests::testdata().unwrap();
    let ws = |name: &str| workspace.path().join(name);
    for name in ["dem.tif", "nc.gpkg"] {
        std::fs::copy(data.join(name), ws(name)).unwrap();
    }
    let mut server = RawServer::start(cwd.path(), workspace.path());
    let init = format!("+proj=longlat +init={}:1", decoy.path("initfile"));
    for crs in [
        "+init=Y:1",
        "+proj=longlat +init=Y:1 +no_defs",
        "+proj=longlat + init = epsg:4326",
        "Y:1",
        "urn:ogc:def:crs:Y::1",
        "EPSG:4326+Y:1",
        init.as_str(),
    ] {
        for (tool, arguments) in [
            (
                "raster_reproject",
                json!({"input": "dem.tif", "output": "o.tif", "dst_crs": crs, "resampling": "nearest"}),
            ),
            (
                "vector_reproject",
                json!({"input": "nc.gpkg", "output": "o.gpkg", "dst_crs": crs}),
            ),
        ] {
            let message = raw_error(&server.call(tool, arguments));
            assert!(
                message.contains("init=") || message.contains("not an authority in PROJ"),
                "{tool} {crs}: {message}"
            );
        }
    }
    // The same definitions inside inputs.
    let vrt = |srs: &str| {
        format!(
            r#"<VRTDataset rasterXSize="10" rasterYSize="10"><SRS>{srs}</SRS><VRTRasterBand dataType="Float32" band="1"><SimpleSource><SourceFilename relativeToVRT="1">dem.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"#
        )
    };
    std::fs::write(ws("init.vrt"), vrt("+proj=longlat +in&#105;t=Y:1")).unwrap();
    std::fs::write(ws("authority.vrt"), vrt("Y:1")).unwrap();
    std::fs::copy(ws("dem.tif"), ws("pam.tif")).unwrap();
    std::fs::write(
        ws("pam.tif.aux.xml"),
        "<PAMDataset><SRS>urn:ogc:def:crs:Y::1</SRS></PAMDataset>",
    )
    .unwrap();
    std::fs::copy(ws("nc.gpkg"), ws("srs.gpkg")).unwrap();
    run(
        "sqlite3",
        &[
            &ws("srs.gpkg").display().to_string(),
            &format!("UPDATE gpkg_spatial_ref_sys SET definition = '{init}' WHERE srs_id = 4267"),
        ],
    );
    for (tool, input) in [
        ("raster_info", "init.vrt"),
        ("raster_info", "authority.vrt"),
        ("raster_info", "pam.tif"),
        ("vector_info", "srs.gpkg"),
    ] {
        let message = raw_error(&server.call(tool, json!({"input": input})));
        assert!(
            message.contains("init=") || message.contains("not an authority in PROJ"),
            "{tool} {input}: {message}"
        );
    }
    // Clean twins: known authorities, and the same inputs with plain definitions.
    std::fs::write(ws("plain.vrt"), vrt("EPSG:4326")).unwrap();
    for (tool, arguments) in [
        ("raster_info", json!({"input": "plain.vrt"})),
        ("raster_info", json!({"input": "dem.tif"})),
        ("vector_info", json!({"input": "nc.gpkg"})),
    ] {
        let result = server.call(tool, arguments.clone());
        assert_ne!(
            result["isError"],
            json!(true),
            "{tool} {arguments}: {result}"
        );
    }
    // Known authorities pass the CRS check (the gate may still ask for a justification).
    for crs in ["EPSG:4326", "urn:ogc:def:crs:EPSG::4326", "ESRI:102100"] {
        let result = server.call(
            "vector_reproject",
            json!({"input": "nc.gpkg", "output": "twin.gpkg", "dst_crs": crs}),
        );
        let all = result.to_string();
        assert!(
            !all.contains("not an authority")
                && !all.contains("init=")
                && !all.contains("dst_crs:"),
            "{crs}: {all}"
        );
    }
    decoy.assert_untouched();
}

/// Regression (issue 21): a folder dataset (a folder of shapefiles opened as a vector source)
/// with a FIFO inside blocked a read worker for good, and then `raster_info`. So did a FIFO
/// beside an input under a name GDAL looks for without a dot (`<stem>_rpc.txt`). Folders are
/// walked before GDAL opens them; the clean twin folder still opens.
#[tokio::test]
async fn a_fifo_inside_a_folder_dataset_is_refused_before_any_open() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let data = gdal_mcp_tests::testdata().unwrap();
    for folder in ["shapes", "twin", "deep/a/b"] {
        std::fs::create_dir_all(server.path(folder)).unwrap();
    }
    for folder in ["shapes", "twin", "deep"] {
        for ext in ["shp", "shx", "dbf", "prj"] {
            std::fs::copy(
                data.join(format!("nc.{ext}")),
                server.path(&format!("{folder}/nc.{ext}")),
            )
            .unwrap();
        }
    }
    run(
        "mkfifo",
        &[&server.path("shapes/blocking.shp").display().to_string()],
    );
    run(
        "mkfifo",
        &[&server.path("deep/a/b/x.dbf").display().to_string()],
    );
    std::os::unix::fs::symlink(decoy.path("secret.txt"), server.path("twin-link")).unwrap();
    std::fs::copy(server.path("dem.tif"), server.path("r.tif")).unwrap();
    run("mkfifo", &[&server.path("r_rpc.txt").display().to_string()]);
    for (tool, input) in [
        ("vector_info", "shapes"),
        ("vector_info", "deep"),
        ("raster_info", "r.tif"),
    ] {
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            server.call(tool, json!({"input": input})),
        )
        .await
        .expect("answered, not blocked on the FIFO")
        .unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert!(
            error_message(&result).contains("not a regular file"),
            "{input}: {}",
            text(&result)
        );
    }
    // A FIFO anywhere in an input's folder refuses the input (R13-15): this one is done.
    std::fs::remove_file(server.path("r_rpc.txt")).unwrap();
    let twin = tokio::time::timeout(
        Duration::from_secs(20),
        server.call("vector_info", json!({"input": "twin"})),
    )
    .await
    .expect("answered")
    .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// Regression (issue 21, attack round 3, found by a tester who did not write the defences):
/// a VRT source's `<OpenOptions>` reached the GeoPackage driver, whose `PRELUDE_STATEMENTS`
/// ran `VACUUM INTO` an outside file (and `ATTACH` leaked outside databases); a warped VRT's
/// `COORDINATE_OPERATION` (`+proj=tinshift +file=`) made PROJ read an outside file and quote
/// its first line in the error; `raster_calc` took `MAX_Z_ERROR=5abc` for lossless while GDAL
/// applied 5. Each is refused; the clean twins open.
#[tokio::test]
async fn vrt_open_options_coordinate_operations_and_unread_creation_options_are_refused() {
    let mut decoy = Decoy::new();
    decoy.add("shift.json", b"TOPSECRET_FIRST_LINE\n");
    let server = start(&["dem.tif"]).await;
    let ws = |name: &str| server.path(name).display().to_string();
    run(
        "gdal_translate",
        &["-q", "-of", "GPKG", &ws("dem.tif"), &ws("r.gpkg")],
    );
    run(
        "gdal_translate",
        &["-q", "-of", "VRT", &ws("r.gpkg"), &ws("clean.vrt")],
    );
    let clean = std::fs::read_to_string(server.path("clean.vrt")).unwrap();
    let written = decoy.path("written_by_vacuum.gpkg");
    let hostile = clean.replacen(
        "</SourceFilename>",
        &format!(
            "</SourceFilename><OpenOptions><OOI key=\"PRELUDE_STATEMENTS\">VACUUM INTO \
             '{written}'</OOI></OpenOptions>"
        ),
        1,
    );
    assert_ne!(hostile, clean, "the fixture carries open options");
    std::fs::write(server.path("hostile.vrt"), hostile).unwrap();
    let result = server
        .call("raster_info", json!({"input": "hostile.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&result), "{}", text(&result));
    assert!(
        error_message(&result).contains("open options"),
        "{}",
        text(&result)
    );
    let convert = server
        .call(
            "raster_convert",
            json!({"input": "hostile.vrt", "output": "copy.tif", "format": "GTiff"}),
        )
        .await
        .unwrap();
    assert!(is_error(&convert), "{}", text(&convert));
    assert!(!Path::new(&written).exists(), "VACUUM INTO wrote outside");
    let twin = server
        .call("raster_info", json!({"input": "clean.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "the clean VRT opens: {}", text(&twin));

    // A warped VRT whose coordinate operation opens a file.
    run(
        "gdalwarp",
        &[
            "-q",
            "-of",
            "VRT",
            "-t_srs",
            "EPSG:4326",
            &ws("dem.tif"),
            &ws("warped.vrt"),
        ],
    );
    let warped = std::fs::read_to_string(server.path("warped.vrt")).unwrap();
    let operation = warped.replacen(
        "<GDALWarpOptions>",
        &format!(
            "<GDALWarpOptions><Option name=\"COORDINATE_OPERATION\">+proj=tinshift \
             +file={}</Option>",
            decoy.path("shift.json")
        ),
        1,
    );
    assert_ne!(
        operation, warped,
        "the fixture carries a coordinate operation"
    );
    std::fs::write(server.path("operation.vrt"), operation).unwrap();
    let result = server
        .call("raster_info", json!({"input": "operation.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&result), "{}", text(&result));
    assert!(!text(&result).contains("TOPSECRET"), "{}", text(&result));
    let twin = server
        .call("raster_info", json!({"input": "warped.vrt"}))
        .await
        .unwrap();
    assert!(
        !is_error(&twin),
        "the plain warped VRT opens: {}",
        text(&twin)
    );

    // A creation option GDAL reads differently from its text.
    for (key, value) in [("MAX_Z_ERROR", "5abc"), ("NBITS", "4abc")] {
        let result = server
            .call(
                "raster_calc",
                json!({"inputs": {"a": "dem.tif"}, "expression": "a", "output": "calc.tif",
                       "data_type": "Float32",
                       "creation_options": {"COMPRESS": "LERC", key: value}}),
            )
            .await
            .unwrap();
        assert!(is_error(&result), "{key}={value}: {}", text(&result));
        assert!(!server.path("calc.tif").exists());
    }
    still_serves(&server).await;
    decoy.assert_untouched();
}

/// libhdf5 (loaded in this process by libgdal), to build netCDF-4 fixtures whose links and
/// datasets reach other files, as an attacker's tool would.
mod hdf5 {
    use std::ffi::{c_char, c_int, c_uint, c_void, CString};

    extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }

    type Hid = i64;

    fn symbol(name: &str) -> *mut c_void {
        let name = CString::new(name).unwrap();
        // SAFETY: RTLD_DEFAULT (null) lookup of a NUL-terminated name.
        let found = unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) };
        assert!(!found.is_null(), "libhdf5 symbol {name:?} not found");
        found
    }

    macro_rules! function {
        ($name:literal, fn($($arg:ty),*) -> $ret:ty) => {{
            let f: unsafe extern "C" fn($($arg),*) -> $ret =
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(symbol($name));
            f
        }};
    }

    /// How the fixture's variable `Band1` (111 x 111 Float32) reaches `target`.
    pub enum Reach<'a> {
        /// `Band1` becomes an external link to `target`'s `/Band1`.
        ExternalLink(&'a str),
        /// `Band1` becomes a virtual dataset over `target`'s `/Band1`.
        Virtual(&'a str),
        /// `Band1` is stored in the raw file `target`.
        ExternalStorage(&'a str),
    }

    /// Rewrite the netCDF-4 file `path` so that its variable `Band1` reaches another file.
    pub fn rewrite(path: &str, reach: Reach) {
        unsafe {
            function!("H5open", fn() -> c_int)();
            let fopen = function!("H5Fopen", fn(*const c_char, c_uint, Hid) -> Hid);
            let fclose = function!("H5Fclose", fn(Hid) -> c_int);
            let ldelete = function!("H5Ldelete", fn(Hid, *const c_char, Hid) -> c_int);
            let c = |s: &str| CString::new(s).unwrap();
            let file = fopen(c(path).as_ptr(), 1, 0);
            assert!(file >= 0, "{path}");
            let band = c("Band1");
            assert!(ldelete(file, c("/Band1").as_ptr(), 0) >= 0);
            match reach {
                Reach::ExternalLink(target) => {
                    let link = function!(
                        "H5Lcreate_external",
                        fn(*const c_char, *const c_char, Hid, *const c_char, Hid, Hid) -> c_int
                    );
                    assert!(
                        link(
                            c(target).as_ptr(),
                            c("/Band1").as_ptr(),
                            file,
                            band.as_ptr(),
                            0,
                            0
                        ) >= 0
                    );
                }
                Reach::Virtual(target) | Reach::ExternalStorage(target) => {
                    let virtual_ = matches!(reach, Reach::Virtual(_));
                    let pcreate = function!("H5Pcreate", fn(Hid) -> Hid);
                    let screate =
                        function!("H5Screate_simple", fn(c_int, *const u64, *const u64) -> Hid);
                    let dcreate = function!(
                        "H5Dcreate2",
                        fn(Hid, *const c_char, Hid, Hid, Hid, Hid, Hid) -> Hid
                    );
                    let dclose = function!("H5Dclose", fn(Hid) -> c_int);
                    let class = *(symbol("H5P_CLS_DATASET_CREATE_ID_g") as *const Hid);
                    let float = *(symbol("H5T_NATIVE_FLOAT_g") as *const Hid);
                    let dims = [111u64, 111];
                    let space = screate(2, dims.as_ptr(), std::ptr::null());
                    let plist = pcreate(class);
                    if virtual_ {
                        let set = function!(
                            "H5Pset_virtual",
                            fn(Hid, Hid, *const c_char, *const c_char, Hid) -> c_int
                        );
                        assert!(
                            set(
                                plist,
                                space,
                                c(target).as_ptr(),
                                c("/Band1").as_ptr(),
                                space
                            ) >= 0
                        );
                    } else {
                        let set =
                            function!("H5Pset_external", fn(Hid, *const c_char, i64, u64) -> c_int);
                        assert!(set(plist, c(target).as_ptr(), 0, 111 * 111 * 4) >= 0);
                    }
                    let dataset = dcreate(file, band.as_ptr(), float, space, 0, plist, 0);
                    assert!(dataset >= 0);
                    dclose(dataset);
                }
            }
            assert!(fclose(file) >= 0);
        }
    }
}

/// Replace `old` by `new` (NUL-padded to the same length) inside a binary file.
fn patch(path: &Path, old: &str, new: &str) {
    assert!(new.len() <= old.len(), "{new} longer than {old}");
    let bytes = std::fs::read(path).unwrap();
    let mut replacement = new.as_bytes().to_vec();
    replacement.resize(old.len(), 0);
    let at = bytes
        .windows(old.len())
        .position(|w| w == old.as_bytes())
        .unwrap_or_else(|| panic!("{old} not in {}", path.display()));
    let mut patched = bytes.clone();
    patched[at..at + old.len()].copy_from_slice(&replacement);
    std::fs::write(path, patched).unwrap();
}

/// Issue 21, item 1 ("for every driver this server can open, an input that references an
/// outside file is refused before anything is read"), tried by a helper who did not write the
/// earlier defences. One row per driver and mechanism, each with a decoy outside the
/// workspace that must stay unread and unchanged; FIFOs outside stand for files whose mere
/// opening would block the worker, so "answered" proves "not opened". Regressions:
/// * netCDF-4 / HDF5: an external link, a virtual dataset and external raw storage made
///   libhdf5 read an outside file (`raster_info` reported its pixels; GDAL lists only the
///   container);
/// * HFA: a spill file named `../outside` was opened during the open; an overview file named
///   in `RRDNamesList` (any name in the folder) was followed through a link;
/// * Idrisi: the `.rdc`'s `ref. system : ../outside/x` made GDAL read `../outside/x.ref` for
///   the CRS (a FIFO there blocked);
/// * MapInfo: a seamless table read the outside tables its index names (`vector_info` listed
///   their fields, `vector_convert` copied their rows);
/// * drivers that are not allowed any more: a `.kml` was opened as a raster by
///   `KMLSUPEROVERLAY`, which opened its `GroundOverlay` href (a FIFO blocked the worker);
///   ERS followed `DataFile = "../x"`;
/// * GeoJSON: a `crs` of type `link` made GDAL's HTTP client GET any URL.
///   Ruled out, and kept as rows so that a change of GDAL shows: KML/LIBKML `NetworkLink`s and
///   GML `xsi:schemaLocation` are not followed. Clean twins of every format still open.
#[tokio::test]
async fn every_allowed_driver_refuses_references_to_outside_files() {
    let decoy = Decoy::new();
    let fifos = tempfile::tempdir().unwrap();
    let fifo = |name: &str| {
        let path = fifos.path().join(name);
        run("mkfifo", &[&path.display().to_string()]);
        path.display().to_string()
    };
    let (url, hits) = listener();
    let server = start(&["dem.tif", "nc.shp", "nc.shx", "nc.dbf", "nc.prj"]).await;
    let ws = |name: &str| server.path(name).display().to_string();
    // A relative path from the workspace to the decoy folder.
    let up = format!(
        "../{}",
        decoy.dir.path().file_name().unwrap().to_string_lossy()
    );
    let outside = tempfile::tempdir().unwrap();
    // netCDF-4: the clean twin and three ways to reach another file.
    for name in ["clean.nc", "link.nc", "vds.nc", "stored.nc"] {
        run(
            "gdal_translate",
            &[
                "-q",
                "-of",
                "netCDF",
                "-co",
                "FORMAT=NC4",
                &ws("dem.tif"),
                &ws(name),
            ],
        );
    }
    // Each target is a FIFO outside: had libhdf5 opened it, the call would block.
    hdf5::rewrite(
        &ws("link.nc"),
        hdf5::Reach::ExternalLink(&fifo("link-target.nc")),
    );
    hdf5::rewrite(&ws("vds.nc"), hdf5::Reach::Virtual(&fifo("vds-source.nc")));
    hdf5::rewrite(
        &ws("stored.nc"),
        hdf5::Reach::ExternalStorage(&fifo("raw.bin")),
    );

    // HFA: a spill file named `../<decoy>/secret.txt`, and an overview file linked outside.
    let long = "spill_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for stem in [long, "clean_spill"] {
        run(
            "gdal_translate",
            &[
                "-q",
                "-of",
                "HFA",
                "-co",
                "USE_SPILL=YES",
                &ws("dem.tif"),
                &ws(&format!("{stem}.img")),
            ],
        );
    }
    patch(
        &server.path(&format!("{long}.img")),
        &format!("{long}.ige"),
        &format!("{up}/secret.txt"),
    );
    // In a folder of its own: a link to a FIFO in an input's folder refuses every input there
    // (R13-15), the other rows' inputs included.
    std::fs::create_dir(server.path("rrd")).unwrap();
    run(
        "gdal_translate",
        &["-q", "-of", "HFA", &ws("dem.tif"), &ws("rrd/ovr.img")],
    );
    run(
        "gdaladdo",
        &[
            "-q",
            "--config",
            "USE_RRD",
            "YES",
            "--config",
            "HFA_USE_RRD",
            "YES",
            &ws("rrd/ovr.img"),
            "2",
        ],
    );
    patch(
        &server.path("rrd/ovr.img"),
        "ovr.rrd(:Layer_1:_ss_2_)",
        "zz.rrd(:Layer_1:_ss_2_)",
    );
    std::fs::rename(server.path("rrd/ovr.rrd"), outside.path().join("zz.rrd")).unwrap();
    std::os::unix::fs::symlink(fifo("zz.rrd"), server.path("rrd/zz.rrd")).unwrap();

    // MapInfo: a seamless table whose index names an outside table (and the same in a folder
    // opened as a vector source), and a plain table.
    let outside_tab = outside.path().join("secret.tab").display().to_string();
    run(
        "ogr2ogr",
        &[
            "-q",
            "-f",
            "MapInfo File",
            &outside_tab,
            &ws("nc.shp"),
            "-sql",
            "SELECT NAME AS SECRET_FIELD FROM nc",
        ],
    );
    // The index names the table relative to its own folder, as MapInfo writes it.
    let outside_name = outside
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    std::fs::create_dir(server.path("seamless")).unwrap();
    for (target, relative) in [
        (ws("seamless.tab"), format!("../{outside_name}/secret.tab")),
        (
            ws("seamless/index.tab"),
            format!("../../{outside_name}/secret.tab"),
        ),
    ] {
        let index_csv = outside.path().join("index.csv");
        std::fs::write(
            &index_csv,
            format!("WKT,Table\n\"POLYGON((-85 33,-75 33,-75 37,-85 37,-85 33))\",{relative}\n"),
        )
        .unwrap();
        run(
            "ogr2ogr",
            &[
                "-q",
                "-f",
                "MapInfo File",
                &target,
                &index_csv.display().to_string(),
                "-a_srs",
                "EPSG:4267",
                "-nlt",
                "POLYGON",
            ],
        );
        std::fs::remove_file(&index_csv).unwrap();
        let tab = std::fs::read_to_string(&target).unwrap().replace(
            "Definition Table",
            "begin_metadata\n\"\\IsSeamless\" = \"TRUE\"\n\"\\IsReadOnly\" = \"FALSE\"\nend_metadata\nDefinition Table",
        );
        std::fs::write(&target, tab).unwrap();
    }
    run(
        "ogr2ogr",
        &[
            "-q",
            "-f",
            "MapInfo File",
            &ws("plain.tab"),
            &ws("nc.shp"),
            "-sql",
            "SELECT NAME FROM nc",
        ],
    );

    // KML read as a raster (KMLSUPEROVERLAY, not allowed): its GroundOverlay names a FIFO.
    let overlay = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><kml xmlns="http://www.opengis.net/kml/2.2"><Document>
<Placemark><name>inside</name><Point><coordinates>1,2</coordinates></Point></Placemark>
<NetworkLink><name>n</name><Link><href>{}</href></Link></NetworkLink>
<GroundOverlay><Icon><href>{}</href></Icon><LatLonBox><north>1</north><south>0</south><east>1</east><west>0</west></LatLonBox></GroundOverlay>
</Document></kml>"#,
        {
            let inner = outside.path().join("inner.kml");
            std::fs::write(
                &inner,
                r#"<kml xmlns="http://www.opengis.net/kml/2.2"><Document><Placemark><name>SECRET_PLACEMARK</name><Point><coordinates>1,2</coordinates></Point></Placemark></Document></kml>"#,
            )
            .unwrap();
            inner.display().to_string()
        },
        fifo("overlay.tif")
    );
    std::fs::write(server.path("overlay.kml"), overlay).unwrap();

    // Idrisi: the `.rdc`'s reference system names a `.ref` file outside (a FIFO).
    let fifos_up = format!("../{}", fifos.path().file_name().unwrap().to_string_lossy());
    fifo("evil.ref");
    for name in ["ref.rst", "clean.rst"] {
        run(
            "gdal_translate",
            &["-q", "-of", "RST", &ws("dem.tif"), &ws(name)],
        );
    }
    let rdc = std::fs::read_to_string(server.path("ref.rdc")).unwrap();
    let rdc: String = rdc
        .lines()
        .map(|line| {
            if line.starts_with("ref. system") {
                format!("ref. system : {fifos_up}/evil\n")
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    std::fs::write(server.path("ref.rdc"), rdc).unwrap();

    // ERS (not allowed): `DataFile` leaves the folder.
    std::fs::write(
        server.path("raw.ers"),
        format!(
            "DatasetHeader Begin\n\tVersion = \"6.0\"\n\tDataFile = \"{up}/secret.txt\"\n\tDataSetType = ERStorage\n\tDataType = Raster\n\tByteOrder = LSBFirst\n\tCoordinateSpace Begin\n\t\tDatum = \"RAW\"\n\t\tProjection = \"RAW\"\n\t\tCoordinateType = RAW\n\tCoordinateSpace End\n\tRasterInfo Begin\n\t\tCellType = Unsigned8BitInteger\n\t\tNrOfLines = 1\n\t\tNrOfCellsPerLine = 6\n\t\tNrOfBands = 1\n\tRasterInfo End\nDatasetHeader End\n"
        ),
    )
    .unwrap();

    // GeoJSON: a CRS by URL (GDAL's HTTP client), and the twin with a CRS by name.
    let feature = r#""features":[{"type":"Feature","properties":{"a":1},"geometry":{"type":"Point","coordinates":[1,2]}}]"#;
    std::fs::write(
        server.path("crs-link.geojson"),
        format!(r#"{{"type":"FeatureCollection","crs":{{"type":"link","properties":{{"href":"{url}","type":"proj4"}}}},{feature}}}"#),
    )
    .unwrap();
    std::fs::write(
        server.path("crs-name.geojson"),
        format!(r#"{{"type":"FeatureCollection","crs":{{"type":"name","properties":{{"name":"urn:ogc:def:crs:EPSG::4326"}}}},{feature}}}"#),
    )
    .unwrap();

    // GML whose schemaLocation names an outside schema (a FIFO): not followed by GDAL 3.6.
    std::fs::write(
        server.path("schema.gml"),
        format!(
            r#"<?xml version="1.0" encoding="utf-8" ?>
<ogr:FeatureCollection xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://ogr.maptools.org/ {}" xmlns:ogr="http://ogr.maptools.org/" xmlns:gml="http://www.opengis.net/gml">
  <gml:featureMember><ogr:things fid="F0"><ogr:name>x</ogr:name></ogr:things></gml:featureMember>
</ogr:FeatureCollection>"#,
            fifo("schema.xsd")
        ),
    )
    .unwrap();

    enum Expect {
        Refused(&'static str),
        Works,
    }
    use Expect::{Refused, Works};
    let rows: Vec<(&str, &str, &str, Expect)> = vec![
        (
            "netCDF",
            "HDF5 external link",
            "link.nc",
            Refused("external link"),
        ),
        (
            "netCDF",
            "HDF5 virtual dataset",
            "vds.nc",
            Refused("virtual dataset"),
        ),
        (
            "netCDF",
            "HDF5 external storage",
            "stored.nc",
            Refused("external files"),
        ),
        ("netCDF", "clean twin", "clean.nc", Works),
        (
            "HFA",
            "spill file ../",
            &format!("{long}.img"),
            Refused("ImgExternalRaster"),
        ),
        (
            "HFA",
            "RRDNamesList through a link to a FIFO",
            "rrd/ovr.img",
            // The link sits beside the input, so the folder rule (which follows links to
            // FIFOs since round 14) refuses it first, before the HFA check reads the .img.
            Refused("not a regular file"),
        ),
        (
            "HFA",
            "clean twin with its spill file",
            "clean_spill.img",
            Works,
        ),
        (
            "RST",
            "ref. system ../ (a FIFO)",
            "ref.rst",
            Refused("reference system"),
        ),
        ("RST", "clean twin", "clean.rst", Works),
        (
            "MapInfo File",
            "seamless table",
            "seamless.tab",
            Refused("seamless"),
        ),
        (
            "MapInfo File",
            "seamless table in a folder",
            "seamless",
            Refused("seamless"),
        ),
        ("MapInfo File", "clean twin", "plain.tab", Works),
        (
            "KMLSUPEROVERLAY",
            "GroundOverlay href (driver not allowed)",
            "overlay.kml",
            Refused(""),
        ),
        (
            "KML/LIBKML",
            "NetworkLink (not followed)",
            "overlay.kml",
            Works,
        ),
        (
            "ERS",
            "DataFile ../ (driver not allowed)",
            "raw.ers",
            Refused("not recognized"),
        ),
        ("GeoJSON", "crs link URL", "crs-link.geojson", Works),
        ("GeoJSON", "clean twin", "crs-name.geojson", Works),
        (
            "GML",
            "xsi:schemaLocation (not followed)",
            "schema.gml",
            Works,
        ),
    ]
    .into_iter()
    .map(|(d, m, i, e)| (d, m, Box::leak(i.to_string().into_boxed_str()) as &str, e))
    .collect();
    let secrets = ["do not read me", "SECRET_FIELD", "SECRET_PLACEMARK"];
    for (driver, mechanism, input, expect) in &rows {
        let raster = input.ends_with(".nc")
            || input.ends_with(".img")
            || input.ends_with(".ers")
            || input.ends_with(".rst")
            || *driver == "KMLSUPEROVERLAY";
        let (info, convert, output) = if raster {
            (
                "raster_info",
                "raster_convert",
                format!("copy-{}.tif", input.replace('/', "_")),
            )
        } else {
            (
                "vector_info",
                "vector_convert",
                format!("copy-{}.gpkg", input.replace('/', "_")),
            )
        };
        for (tool, arguments) in [
            (info, json!({"input": input})),
            (convert, json!({"input": input, "output": output})),
        ] {
            let result = tokio::time::timeout(
                Duration::from_secs(30),
                server.call(tool, arguments.clone()),
            )
            .await
            .unwrap_or_else(|_| panic!("{driver} / {mechanism}: {tool} blocked"))
            .unwrap();
            let all = text(&result);
            for secret in secrets {
                assert!(
                    !all.contains(secret),
                    "{driver} / {mechanism}: {tool} leaked: {all}"
                );
            }
            match expect {
                Refused(fragment) => {
                    assert!(
                        is_error(&result),
                        "{driver} / {mechanism}: {tool} {arguments}: {all}"
                    );
                    assert!(
                        error_message(&result).contains(fragment),
                        "{driver} / {mechanism}: {tool}: {all}"
                    );
                    assert!(
                        !server.path(&output).exists(),
                        "{driver} / {mechanism}: output written"
                    );
                }
                Works => {
                    if tool == info {
                        assert!(!is_error(&result), "{driver} / {mechanism}: {tool}: {all}");
                    }
                }
            }
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "GDAL fetched a URL");
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// Regression (issue 21 item 7): a FIFO planted where GDAL probes a sidecar of a VRT's source
/// (`src.tif.ovr`, `src.tif.aux.xml`, `src.aux`) blocked the open of a VRT whose every source
/// was a clean regular file, and one planted as the source's `.prj` blocked the host's own
/// pre-open check; nothing but the input's own sidecars was checked. Every file GDAL may open
/// (the input, its sidecars, a VRT's sources at any depth and theirs, the entries of a folder
/// dataset, an `.aux.xml`'s overview file) is now checked on the worker right before the open.
/// Each position answers with a clear error within seconds, and `raster_info` on a clean file
/// answers right after; the clean twin VRT opens.
///
/// Each case has folders of its own (its input's, and its source's where it has one), holding
/// its one FIFO: a FIFO anywhere in an input's folder refuses the input (R13-15's folder
/// rule), so in a shared folder every case passed through that rule alone. Each refusal is
/// asserted to name its FIFO and not to come from the folder rule ("a file in its folder").
#[tokio::test]
async fn a_fifo_in_any_position_gdal_may_open_is_refused_before_the_open() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let data = gdal_mcp_tests::testdata().unwrap();
    let ws = |name: &str| server.path(name).display().to_string();
    let fifo = |name: &str| run("mkfifo", &[&ws(name)]);
    let folder = |name: &str| std::fs::create_dir_all(server.path(name)).unwrap();
    let dem = |to: &str| {
        std::fs::copy(server.path("dem.tif"), server.path(to)).unwrap();
    };
    // (position, tool, input, the FIFO's name)
    let mut cases: Vec<(String, &str, String, String)> = Vec::new();
    // The input itself, and the sidecars GDAL probes beside a raster and a shapefile.
    folder("in");
    fifo("in/input.tif");
    cases.push((
        "input itself".into(),
        "raster_info",
        "in/input.tif".into(),
        "input.tif".into(),
    ));
    for (i, sidecar) in [
        "{n}.tif.aux.xml",
        "{n}.tif.ovr",
        "{n}.tif.msk",
        "{n}.tfw",
        "{n}.prj",
        "{n}.aux",
    ]
    .iter()
    .enumerate()
    {
        let dir = format!("r{i}");
        folder(&dir);
        dem(&format!("{dir}/r.tif"));
        let name = sidecar.replace("{n}", "r");
        fifo(&format!("{dir}/{name}"));
        cases.push((name.clone(), "raster_info", format!("{dir}/r.tif"), name));
    }
    for (i, sidecar) in ["dbf", "shx", "prj", "cpg", "qix"].iter().enumerate() {
        let dir = format!("s{i}");
        folder(&dir);
        for ext in ["shp", "shx", "dbf", "prj"] {
            if ext != *sidecar {
                std::fs::copy(
                    data.join(format!("nc.{ext}")),
                    server.path(&format!("{dir}/s.{ext}")),
                )
                .unwrap();
            }
        }
        let name = format!("s.{sidecar}");
        fifo(&format!("{dir}/{name}"));
        cases.push((name.clone(), "vector_info", format!("{dir}/s.shp"), name));
    }
    // A VRT's source, and the sidecars GDAL probes beside a clean source: the VRT in one
    // folder, its source (and the FIFO) in another.
    dem("clean-source.tif");
    run(
        "gdal_translate",
        &["-q", "-of", "VRT", &ws("clean-source.tif"), &ws("twin.vrt")],
    );
    let twin = std::fs::read_to_string(server.path("twin.vrt")).unwrap();
    assert!(twin.contains(">clean-source.tif<"), "{twin}");
    let vrt_over = |vrt: &str, source: &str| {
        std::fs::write(
            server.path(vrt),
            twin.replace(">clean-source.tif<", &format!(">{source}<")),
        )
        .unwrap();
    };
    folder("fifo-src");
    fifo("fifo-src/source.tif");
    folder("uses-fifo");
    vrt_over("uses-fifo/v.vrt", "../fifo-src/source.tif");
    cases.push((
        "a VRT source".into(),
        "raster_info",
        "uses-fifo/v.vrt".into(),
        "source.tif".into(),
    ));
    for (i, sidecar) in [
        "{n}.tif.ovr",
        "{n}.tif.aux.xml",
        "{n}.aux",
        "{n}.prj",
        "{n}.tfw",
        "{n}.tif.msk",
    ]
    .iter()
    .enumerate()
    {
        let (src, vrt) = (format!("src{i}"), format!("v{i}"));
        folder(&src);
        folder(&vrt);
        dem(&format!("{src}/s.tif"));
        let name = sidecar.replace("{n}", "s");
        fifo(&format!("{src}/{name}"));
        vrt_over(&format!("{vrt}/v.vrt"), &format!("../{src}/s.tif"));
        cases.push((
            format!("VRT source's {name}"),
            "raster_info",
            format!("{vrt}/v.vrt"),
            name,
        ));
    }
    // Two levels down, each in a folder of its own: a VRT over a VRT whose source has a FIFO
    // `.ovr`.
    folder("outer");
    vrt_over("outer/outer.vrt", "../v0/v.vrt");
    cases.push((
        "nested VRT".into(),
        "raster_info",
        "outer/outer.vrt".into(),
        "s.tif.ovr".into(),
    ));
    // An entry of a folder dataset, and an `.aux.xml`'s overview file (in another folder).
    folder("fd/folder");
    for ext in ["shp", "shx", "dbf", "prj"] {
        std::fs::copy(
            data.join(format!("nc.{ext}")),
            server.path(&format!("fd/folder/nc.{ext}")),
        )
        .unwrap();
    }
    fifo("fd/folder/other.dbf");
    cases.push((
        "folder entry".into(),
        "vector_info",
        "fd/folder".into(),
        "other.dbf".into(),
    ));
    folder("pam");
    folder("ovr");
    dem("pam/pam.tif");
    fifo("ovr/overviews.bin");
    std::fs::write(
        server.path("pam/pam.tif.aux.xml"),
        "<PAMDataset><Metadata domain=\"OVERVIEWS\"><MDI key=\"OVERVIEW_FILE\">\
         ../ovr/overviews.bin</MDI></Metadata></PAMDataset>",
    )
    .unwrap();
    cases.push((
        ".aux.xml overview file".into(),
        "raster_info",
        "pam/pam.tif".into(),
        "overviews.bin".into(),
    ));
    std::fs::create_dir(server.path("clean")).unwrap();
    for name in ["dem.tif", "clean-source.tif", "twin.vrt"] {
        std::fs::copy(server.path(name), server.path(&format!("clean/{name}"))).unwrap();
    }

    for (position, tool, input, fifo_name) in &cases {
        let started = Instant::now();
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            server.call(tool, json!({"input": input})),
        )
        .await
        .unwrap_or_else(|_| panic!("{position}: blocked on the FIFO"))
        .unwrap();
        assert!(is_error(&result), "{position}: {}", text(&result));
        let message = error_message(&result);
        assert!(
            message.contains("not a regular file") && message.contains(fifo_name.as_str()),
            "{position}: {message}"
        );
        assert!(
            !message.contains("in its folder"),
            "{position}: refused by the folder rule, not its own check: {message}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{position}: took {:?}",
            started.elapsed()
        );
        let clean = tokio::time::timeout(
            Duration::from_secs(20),
            server.call("raster_info", json!({"input": "clean/dem.tif"})),
        )
        .await
        .unwrap_or_else(|_| panic!("after {position}: raster_info unanswered"))
        .unwrap();
        assert!(!is_error(&clean), "after {position}: {}", text(&clean));
    }
    let twin = server
        .call("raster_info", json!({"input": "clean/twin.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "the clean VRT opens: {}", text(&twin));
    decoy.assert_untouched();
}

/// A server whose opens pause after their checks (debug builds' test hook), so that a test can
/// swap a checked file for a FIFO in that window, with a short open deadline. Returns the
/// server and the log where each open names its file when its checks passed.
async fn start_paused(deadline_secs: &str, max_abandoned: &str) -> (Server, tempfile::TempDir) {
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("checked.log");
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![
                ("GDAL_MCP_OPEN_DEADLINE_SECS".into(), deadline_secs.into()),
                (
                    "GDAL_MCP_MAX_ABANDONED_WORKERS".into(),
                    max_abandoned.into(),
                ),
                ("GDAL_MCP_TEST_PAUSE_AFTER_CHECKS_MS".into(), "1500".into()),
                (
                    "GDAL_MCP_TEST_CHECKED_LOG".into(),
                    log.display().to_string(),
                ),
            ],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    (server, log_dir)
}

/// Wait until the server's opens of every one of `names` passed their checks (they are then
/// paused before GDAL's open).
async fn wait_checked(log_dir: &Path, names: &[String]) {
    let log = log_dir.join("checked.log");
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if names
            .iter()
            .all(|n| text.lines().any(|l| l.ends_with(&format!("/{n}"))))
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the opens of {names:?} never passed their checks: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Swap `name` in the workspace for a FIFO (kept also as `pipes/<name>`, to release it later).
fn swap_for_fifo(server: &Server, name: &str) {
    let kept = server.path(&format!("pipes/{name}"));
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    run("mkfifo", &[&kept.display().to_string()]);
    let link = server.path(&format!("pipes/{name}.link"));
    std::fs::hard_link(&kept, &link).unwrap();
    std::fs::rename(&link, server.path(name)).unwrap();
}

/// `O_NONBLOCK` on Linux (the tests run where the server does).
const O_NONBLOCK: i32 = 0o4000;

/// Release the worker blocked on the FIFO swapped in for `name`: a regular (unreadable as a
/// raster) file takes its name, and the FIFO gets a writer that closes at once.
fn release_fifo(server: &Server, name: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::write(server.path(&format!("pipes/{name}.junk")), b"not a raster").unwrap();
    std::fs::rename(
        server.path(&format!("pipes/{name}.junk")),
        server.path(name),
    )
    .unwrap();
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(server.path(&format!("pipes/{name}")));
    drop(writer);
}

/// Regression (issue 21 item 2): an input swapped for a FIFO between the checks and GDAL's
/// open blocked its worker for good; the call never answered and the slot was never given
/// back, so a few such calls left the heavy tools (and, on the read-only slots, `raster_info`)
/// unanswered. Every open now runs under a deadline: the call fails with a `gdal` error naming
/// the file and the deadline, the pool gets a replacement slot (more blocked calls than the
/// pool has slots all answer), read-only calls keep answering, a pool with too many workers
/// set aside refuses new calls at once, and workers set aside that finish give their place
/// back. The swap is forced with the debug builds' pause between checks and open.
#[tokio::test]
async fn a_worker_blocked_in_an_open_is_replaced_and_the_call_fails_at_the_deadline() {
    let decoy = Decoy::new();
    let (server, log_dir) = start_paused("6", "10").await;
    let deadline = Duration::from_secs(6);
    let slack = Duration::from_secs(20);
    // Each input in a folder of its own: a FIFO swapped in refuses every other input of its
    // folder before the open (R13-15), and this test is about the opens that got past that.
    let heavy: Vec<String> = (0..10).map(|i| format!("h{i}/h{i}.tif")).collect();
    let light: Vec<String> = (0..5).map(|i| format!("g{i}/g{i}.tif")).collect();
    for name in heavy.iter().chain(&light) {
        let path = server.path(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::copy(server.path("dem.tif"), path).unwrap();
    }
    let server = Arc::new(server);
    // More blocked heavy calls than the pool's 8 slots: 8 at once, then 2 more, which get a
    // slot only because the first 8 were replaced.
    for batch in [&heavy[..8], &heavy[8..]] {
        let started = Instant::now();
        let calls: Vec<_> = batch
            .iter()
            .map(|name| {
                let server = server.clone();
                let args = json!({"input": name, "output": format!("out-{}", name.replace('/', "-")),
                                  "format": "GTiff"});
                tokio::spawn(async move { server.call("raster_convert", args).await })
            })
            .collect();
        wait_checked(log_dir.path(), batch).await;
        for name in batch {
            swap_for_fifo(&server, name);
        }
        // While they are blocked, the read-only tools answer.
        let info = tokio::time::timeout(
            Duration::from_secs(30),
            server.call("raster_info", json!({"input": "dem.tif"})),
        )
        .await
        .expect("raster_info answers while heavy workers are blocked")
        .unwrap();
        assert!(!is_error(&info), "{}", text(&info));
        for (name, call) in batch.iter().zip(calls) {
            let result = tokio::time::timeout(deadline + slack, call)
                .await
                .unwrap_or_else(|_| panic!("{name}: no answer after the deadline"))
                .unwrap()
                .unwrap();
            assert!(is_error(&result), "{name}: {}", text(&result));
            assert_eq!(structured(&result)["error"]["kind"], "gdal", "{name}");
            let message = error_message(&result);
            assert!(
                message.contains("open deadline") && message.contains(name.as_str()),
                "{name}: {message}"
            );
        }
        assert!(
            started.elapsed() < deadline + slack,
            "the batch took {:?}",
            started.elapsed()
        );
    }
    // Ten workers are set aside, the cap: heavy calls are refused at once, reads answer.
    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        server.call(
            "raster_convert",
            json!({"input": "dem.tif", "output": "refused.tif", "format": "GTiff"}),
        ),
    )
    .await
    .expect("refused at once")
    .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        error_message(&refused).contains("GDAL_MCP_MAX_ABANDONED_WORKERS"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("refused.tif").exists());
    // The read-only slots: more blocked calls than their 4 slots, then a clean call.
    for batch in [&light[..4], &light[4..]] {
        let calls: Vec<_> = batch
            .iter()
            .map(|name| {
                let server = server.clone();
                let args = json!({"input": name});
                tokio::spawn(async move { server.call("raster_info", args).await })
            })
            .collect();
        wait_checked(log_dir.path(), batch).await;
        for name in batch {
            swap_for_fifo(&server, name);
        }
        for (name, call) in batch.iter().zip(calls) {
            let result = tokio::time::timeout(deadline + slack, call)
                .await
                .unwrap_or_else(|_| panic!("{name}: no answer after the deadline"))
                .unwrap()
                .unwrap();
            assert!(is_error(&result), "{name}: {}", text(&result));
            assert!(
                error_message(&result).contains("open deadline"),
                "{name}: {}",
                text(&result)
            );
        }
    }
    still_serves(&server).await;
    // Released, the workers set aside finish, and the heavy pool takes calls again.
    for name in &heavy {
        release_fifo(&server, name);
    }
    let started = Instant::now();
    loop {
        let result = server
            .call(
                "raster_convert",
                json!({"input": "dem.tif", "output": "again.tif", "format": "GTiff"}),
            )
            .await
            .unwrap();
        if !is_error(&result) {
            break;
        }
        assert!(
            error_message(&result).contains("GDAL_MCP_MAX_ABANDONED_WORKERS")
                && started.elapsed() < Duration::from_secs(30),
            "{}",
            text(&result)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(server.path("again.tif").exists());
    for name in &light {
        release_fifo(&server, name);
    }
    for name in &heavy {
        assert!(
            !server.path(&format!("out-{name}")).exists(),
            "a call answered as failed wrote nothing"
        );
    }
    decoy.assert_untouched();
}

/// Regression (issue 21 item 7, races): a VRT's source swapped for an outside file after the
/// checks put the outside pixels into 1 of 40 outputs, and an input swapped for a link to an
/// outside file was opened. After GDAL opened a dataset, every file it lists is now compared
/// with what the checks saw (device, inode, change time): a source replaced by another file of
/// the workspace, by a link to an outside decoy, and an input replaced by such a link all fail
/// with "changed between check and open" before anything is read, and no output holds the
/// decoy's marked pixels. The swaps are forced with the debug builds' pause between checks and
/// open; the clean twin (no swap) goes through under the same pause.
#[tokio::test]
async fn a_file_swapped_between_check_and_open_fails_the_call() {
    let mut decoy = Decoy::new();
    let marked_dir = tempfile::tempdir().unwrap();
    let marked = marked_dir.path().join("marked.tif");
    let (server, log_dir) = start_paused("30", "8").await;
    let ws = |name: &str| server.path(name).display().to_string();
    // The decoy: the same grid as the workspace's raster, every cell 4242.
    run(
        "gdal_create",
        &[
            "-q",
            "-if",
            &ws("dem.tif"),
            "-burn",
            "4242",
            "-ot",
            "Float32",
            &marked.display().to_string(),
        ],
    );
    decoy.add("marked.tif", &std::fs::read(&marked).unwrap());
    let outside = decoy.path("marked.tif");
    std::fs::copy(&marked, server.path("inside-marked.tif")).unwrap();
    for name in ["src-a.tif", "src-b.tif", "src-c.tif", "in.tif"] {
        std::fs::copy(server.path("dem.tif"), server.path(name)).unwrap();
    }
    for (vrt, source) in [
        ("a.vrt", "src-a.tif"),
        ("b.vrt", "src-b.tif"),
        ("c.vrt", "src-c.tif"),
    ] {
        run(
            "gdal_translate",
            &["-q", "-of", "VRT", &ws(source), &ws(vrt)],
        );
    }
    let link_to = |target: &str, name: &str| {
        let link = server.path(&format!("{name}.swap"));
        std::os::unix::fs::symlink(target, &link).unwrap();
        std::fs::rename(&link, server.path(name)).unwrap();
    };
    type Swap<'a> = Box<dyn Fn() + 'a>;
    let cases: [(&str, &str, &str, Swap); 3] = [
        (
            "source replaced by another workspace file",
            "a.vrt",
            "src-a.tif",
            Box::new(|| {
                std::fs::copy(server.path("inside-marked.tif"), server.path("swap.tmp")).unwrap();
                std::fs::rename(server.path("swap.tmp"), server.path("src-a.tif")).unwrap();
            }),
        ),
        (
            "source replaced by a link to an outside decoy",
            "b.vrt",
            "src-b.tif",
            Box::new(|| link_to(&outside, "src-b.tif")),
        ),
        (
            "input replaced by a link to an outside decoy",
            "in.tif",
            "in.tif",
            Box::new(|| link_to(&outside, "in.tif")),
        ),
    ];
    for (what, input, swapped, swap) in &cases {
        let server_call = server.call(
            "raster_convert",
            json!({"input": input, "output": format!("out-{input}.tif"), "format": "GTiff"}),
        );
        let swapping = async {
            wait_checked(log_dir.path(), &[input.to_string()]).await;
            swap();
        };
        let (result, ()) = tokio::join!(
            tokio::time::timeout(Duration::from_secs(60), server_call),
            swapping
        );
        let result = result.expect("answered").unwrap();
        assert!(is_error(&result), "{what}: {}", text(&result));
        let message = error_message(&result);
        assert!(
            message.contains("changed between check and open") && message.contains(*swapped),
            "{what}: {message}"
        );
        assert!(
            !server.path(&format!("out-{input}.tif")).exists(),
            "{what}: an output was written"
        );
        std::fs::remove_file(log_dir.path().join("checked.log")).unwrap();
    }
    // The clean twin goes through under the same pause, and holds the workspace's pixels.
    let twin = server
        .call(
            "raster_convert",
            json!({"input": "c.vrt", "output": "out-c.tif", "format": "GTiff"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    let stats = server
        .call("raster_stats", json!({"input": "out-c.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
    assert!(
        !text(&stats).contains("4242"),
        "the clean twin holds the workspace's pixels: {}",
        text(&stats)
    );
    // No file in the workspace but the planted copy holds the decoy's pixels.
    for entry in std::fs::read_dir(server.path("")).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "tif")
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("out-"))
        {
            let info = std::process::Command::new("gdalinfo")
                .args(["-stats", "-json"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                !String::from_utf8_lossy(&info.stdout).contains("4242"),
                "{} holds the decoy's pixels",
                path.display()
            );
        }
    }
    still_serves(&server).await;
    decoy.assert_untouched();
}

/// Regression (issue 21, attack round 4, B1): GDAL parses a name holding `<VRTDataset` as the
/// VRT document itself, path prefix and all, even when the name is a real folder. A VRT whose
/// source named a workspace folder called like an inline VRT read the outside raster the inner
/// document named (its cells came back from `raster_sample`), and its inner `OpenOptions` ran
/// an outside `VACUUM INTO`. A reference holding `<` is now refused before the open.
#[tokio::test]
async fn a_vrt_source_named_like_an_inline_vrt_is_refused() {
    let decoy = Decoy::new();
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let inner = format!(
        "<VRTDataset rasterXSize=\"10\" rasterYSize=\"10\"><VRTRasterBand dataType=\"Float32\" \
         band=\"1\"><SimpleSource><SourceFilename>{}</SourceFilename><SourceBand>1</SourceBand>\
         </SimpleSource></VRTRasterBand></VRTDataset>",
        decoy.path("outside.tif")
    );
    // The nested folders whose path spells the inner document.
    std::fs::create_dir_all(server.path(&inner)).unwrap();
    let escaped = inner
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let outer = |source: &str| {
        format!(
            "<VRTDataset rasterXSize=\"10\" rasterYSize=\"10\"><SRS>EPSG:32633</SRS>\
             <GeoTransform>0,1,0,10,0,-1</GeoTransform><VRTRasterBand dataType=\"Float32\" \
             band=\"1\"><SimpleSource><SourceFilename relativeToVRT=\"1\">{source}\
             </SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>\
             </VRTDataset>"
        )
    };
    std::fs::write(server.path("read.vrt"), outer(&escaped)).unwrap();
    // The clean twin: the same VRT over a workspace raster.
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        server.path("inside.tif"),
    )
    .unwrap();
    std::fs::write(server.path("twin.vrt"), outer("inside.tif")).unwrap();
    std::fs::copy(server.path("inside.tif"), server.path("dem.tif")).unwrap();
    for (tool, arguments) in [
        (
            "raster_sample",
            json!({"input": "read.vrt", "coordinates": [[5, 5]]}),
        ),
        ("raster_info", json!({"input": "read.vrt"})),
        (
            "raster_convert",
            json!({"input": "read.vrt", "output": "stolen.tif"}),
        ),
    ] {
        let result = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&result), "{tool}: {}", text(&result));
        assert!(
            text(&result).contains("makes GDAL read"),
            "{tool}: {}",
            text(&result)
        );
    }
    assert!(!server.path("stolen.tif").exists());
    let twin = server
        .call(
            "raster_sample",
            json!({"input": "twin.vrt", "coordinates": [[5, 5]]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    still_serves(&server).await;
    decoy.assert_untouched();
}

/// Regression (issue 21, attack round 4, B2): the shapefile driver reads a zipped shapefile
/// (`.shp.zip`, `.shz`) through `/vsizip/`, where the `.prj` inside could name an outside FIFO
/// as a `+nadgrids` grid that no check saw; `vector_reproject` never answered. Zipped
/// shapefiles are refused before the open, naming the way out; the unzipped twin works.
#[tokio::test]
async fn a_zipped_shapefile_is_refused_before_the_open() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(server.path("p.csv"), "id,lat,lon\n1,10,20\n2,11,21\n").unwrap();
    let status = std::process::Command::new("ogr2ogr")
        .args(["-q", "-f", "ESRI Shapefile", "-a_srs", "EPSG:4326"])
        .arg(server.path("s.shp"))
        .arg(server.path("p.csv"))
        .args(["-oo", "X_POSSIBLE_NAMES=lon", "-oo", "Y_POSSIBLE_NAMES=lat"])
        .status()
        .unwrap();
    assert!(status.success());
    let status = std::process::Command::new("zip")
        .current_dir(server.path(""))
        .args(["-q", "grid.shp.zip", "s.shp", "s.shx", "s.dbf", "s.prj"])
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::copy(server.path("grid.shp.zip"), server.path("grid.shz")).unwrap();
    for input in ["grid.shp.zip", "grid.shz"] {
        for (tool, arguments) in [
            ("vector_info", json!({"input": input})),
            (
                "vector_reproject",
                json!({"input": input, "output": "o.gpkg", "dst_crs": "EPSG:3857"}),
            ),
        ] {
            let result = server.call(tool, arguments).await.unwrap();
            assert!(is_error(&result), "{tool} {input}: {}", text(&result));
            assert!(text(&result).contains("unzip it"), "{}", text(&result));
        }
    }
    assert!(!server.path("o.gpkg").exists());
    let twin = server
        .call("vector_info", json!({"input": "s.shp"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
}

/// Regression (issue 21, attack round 4, B3): GDAL reads a whole natural block to give one
/// cell. A 400-byte sparse GeoTIFF whose one tile is 16384 x 8192 Float64 made a one-point
/// `raster_sample` allocate 1 GiB past the shared memory budget (four at once: 4.25 GB). The
/// block is now reserved first: refused as `memory_budget`; the same raster in 256-cell tiles
/// is sampled.
#[tokio::test]
async fn a_sample_reserves_the_block_gdal_reads() {
    let server = Server::start(
        Era::Modern,
        Options {
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".to_string(),
                (256u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for (name, block) in [
        ("bomb.tif", ["16384", "8192"]),
        ("twin.tif", ["256", "256"]),
    ] {
        let status = std::process::Command::new("gdal_create")
            .args([
                "-q", "-of", "GTiff", "-outsize", "16384", "8192", "-bands", "1",
            ])
            .args([
                "-ot",
                "Float64",
                "-a_srs",
                "EPSG:32633",
                "-a_ullr",
                "0",
                "8192",
                "16384",
                "0",
            ])
            .args(["-co", "TILED=YES", "-co", "SPARSE_OK=TRUE"])
            .args(["-co", &format!("BLOCKXSIZE={}", block[0])])
            .args(["-co", &format!("BLOCKYSIZE={}", block[1])])
            .arg(server.path(name))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let bomb = server
        .call(
            "raster_sample",
            json!({"input": "bomb.tif", "coordinates": [[5, 5]], "crs": "EPSG:32633"}),
        )
        .await
        .unwrap();
    assert!(is_error(&bomb), "{}", text(&bomb));
    assert_eq!(
        structured(&bomb)["error"]["kind"],
        "memory_budget",
        "{}",
        text(&bomb)
    );
    let twin = server
        .call(
            "raster_sample",
            json!({"input": "twin.tif", "coordinates": [[5, 5]], "crs": "EPSG:32633"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        server.path("dem.tif"),
    )
    .unwrap();
    still_serves(&server).await;
}

/// A sparse tiled GeoTIFF of 16384 x 8192 Float64 cells in blocks of `block` cells: a few
/// hundred bytes on disk, whatever the blocks, and 1 GiB per block when one block is the whole.
fn sparse_tiled(path: &Path, block: [&str; 2]) {
    let status = std::process::Command::new("gdal_create")
        .args([
            "-q", "-of", "GTiff", "-outsize", "16384", "8192", "-bands", "1",
        ])
        .args([
            "-ot",
            "Float64",
            "-a_srs",
            "EPSG:32633",
            "-a_ullr",
            "0",
            "8192",
            "16384",
            "0",
        ])
        .args(["-co", "TILED=YES", "-co", "SPARSE_OK=TRUE"])
        .args(["-co", &format!("BLOCKXSIZE={}", block[0])])
        .args(["-co", &format!("BLOCKYSIZE={}", block[1])])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Regression (attack round 9, R9-10): VRTs nested 4 levels with 20 sources each (4.9 KB)
/// made the host's checks before the open 20x slower a level: `L4.vrt` passed the 30 s open
/// deadline and left a worker spinning (8 such calls closed the pool). Each distinct document
/// is checked once per open now, and the source references GDAL would go through are
/// budgeted: 5 levels (3,368,420 references) are refused at once naming
/// `GDAL_MCP_MAX_VRT_REFERENCES`; 3 levels (8,420) answer, fast.
#[tokio::test]
async fn r9_10_a_vrt_fan_out_is_checked_once_per_document() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let created = std::process::Command::new("gdal_create")
        .args(["-q", "-of", "GTiff", "-outsize", "64", "64", "-bands", "1"])
        .args(["-ot", "Byte", "-burn", "1", "-a_srs", "EPSG:32633"])
        .args(["-a_ullr", "500000", "5000000", "501920", "4998080"])
        .arg(server.path("base.tif"))
        .status()
        .unwrap();
    assert!(created.success());
    let mut previous = "base.tif".to_string();
    for level in 1..=5 {
        let source = format!(
            "<ComplexSource><SourceFilename relativeToVRT=\"1\">{previous}</SourceFilename>\
             <SourceBand>1</SourceBand><SrcRect xOff=\"0\" yOff=\"0\" xSize=\"64\" \
             ySize=\"64\"/><DstRect xOff=\"0\" yOff=\"0\" xSize=\"64\" ySize=\"64\"/>\
             <NODATA>255</NODATA></ComplexSource>"
        );
        let document = format!(
            "<VRTDataset rasterXSize=\"64\" rasterYSize=\"64\"><SRS>EPSG:32633</SRS>\
             <GeoTransform>500000,30,0,5000000,0,-30</GeoTransform>\
             <VRTRasterBand dataType=\"Byte\" band=\"1\">{}</VRTRasterBand></VRTDataset>",
            source.repeat(20)
        );
        previous = format!("L{level}.vrt");
        std::fs::write(server.path(&previous), document).unwrap();
    }
    let started = Instant::now();
    let refused = server
        .call("raster_info", json!({"input": "L5.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    // The fan-out is refused by the reference budget or, since R10-13, by the work it makes
    // GDAL do per cell (L4 alone reads 160,000 source cells per cell), whichever comes first.
    assert!(
        text(&refused).contains("GDAL_MCP_MAX_VRT_REFERENCES")
            || text(&refused).contains("GDAL_MCP_MAX_CELLS"),
        "{}",
        text(&refused)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let started = Instant::now();
    let nested = server
        .call("raster_info", json!({"input": "L3.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&nested), "{}", text(&nested));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // Checked once does not mean trusted at any depth: a document that passed near the top
    // is checked again where it sits deeper, so nesting past 8 and cycles stay refused.
    let single = |source: &str| {
        format!(
            "<VRTDataset rasterXSize=\"64\" rasterYSize=\"64\"><VRTRasterBand \
             dataType=\"Byte\" band=\"1\"><SimpleSource><SourceFilename \
             relativeToVRT=\"1\">{source}</SourceFilename><SourceBand>1</SourceBand>\
             </SimpleSource></VRTRasterBand></VRTDataset>"
        )
    };
    std::fs::write(server.path("self.vrt"), single("self.vrt")).unwrap();
    for k in 0..10 {
        let source = if k == 9 {
            "L1.vrt".to_string()
        } else {
            format!("C{}.vrt", k + 1)
        };
        std::fs::write(server.path(&format!("C{k}.vrt")), single(&source)).unwrap();
    }
    // L1 first (it passes at depth 1), then C3..C9 (depths 1..7) reach it again at depth 8,
    // where a VRT is one level too deep.
    let both = single("L1.vrt").replace(
        "</VRTRasterBand>",
        "<SimpleSource><SourceFilename relativeToVRT=\"1\">C3.vrt</SourceFilename>\
         <SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>",
    );
    std::fs::write(server.path("both.vrt"), both).unwrap();
    for input in ["self.vrt", "C0.vrt", "both.vrt"] {
        let deep = server
            .call("raster_info", json!({"input": input}))
            .await
            .unwrap();
        assert!(is_error(&deep), "{input}: {}", text(&deep));
        assert!(
            text(&deep).contains("nested more than 8"),
            "{}",
            text(&deep)
        );
    }
}

/// Regression (attack round 9, R9-2): a lossless WebP of a few KB reports `width x 1` blocks,
/// so the block budget reserved nothing, while GDAL's WEBP driver decodes the whole image at
/// the first cell read (16383²: ~930 MB per `raster_info`, 3.6 GB for four at once). The whole
/// image is reserved now: a 10000² x 3 WebP (300 MB decoded) is refused as `memory_budget`
/// under a 256 MiB budget by `raster_info` and `raster_sample`; a small WebP answers.
#[tokio::test]
async fn r9_2_a_webp_is_budgeted_as_its_whole_image() {
    let server = Server::start(
        Era::Modern,
        Options {
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".to_string(),
                (256u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for (name, size) in [("big", "10000"), ("small", "200")] {
        let tif = server.path(&format!("{name}.tif"));
        let created = std::process::Command::new("gdal_create")
            .args(["-q", "-of", "GTiff", "-outsize", size, size, "-bands", "3"])
            .args(["-ot", "Byte", "-a_srs", "EPSG:32633", "-a_ullr"])
            .args([
                "0",
                size,
                size,
                "0",
                "-co",
                "TILED=YES",
                "-co",
                "SPARSE_OK=TRUE",
            ])
            .arg(&tif)
            .status()
            .unwrap();
        assert!(created.success());
        let encoded = std::process::Command::new("gdal_translate")
            .args(["-q", "-of", "WEBP", "-co", "LOSSLESS=TRUE"])
            .arg(&tif)
            .arg(server.path(&format!("{name}.webp")))
            .status()
            .unwrap();
        assert!(encoded.success());
        std::fs::remove_file(tif).unwrap();
    }
    for (tool, args) in [
        ("raster_info", json!({"input": "big.webp"})),
        (
            "raster_sample",
            json!({"input": "big.webp", "coordinates": [[5, 5]], "crs": "EPSG:32633"}),
        ),
    ] {
        let refused = server.call(tool, args).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        assert_eq!(
            structured(&refused)["error"]["kind"],
            "memory_budget",
            "{tool}: {}",
            text(&refused)
        );
        assert!(
            text(&refused).contains("decoded whole"),
            "{}",
            text(&refused)
        );
    }
    let twin = server
        .call("raster_info", json!({"input": "small.webp"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
}

/// Regression (issue 21, attack round 4, B3, the rest): `raster_sample` reserved the block
/// GDAL reads whole, but `raster_info` (its facts sample the values), `raster_stats` and the
/// tools running GDAL's programs still read the 1 GiB tile of a 400-byte GeoTIFF past the
/// shared memory budget, and a VRT over it hid the tile behind its own 128 x 128 blocks. Every
/// read of cells now reserves the blocks (the VRT's sources' included): refused as
/// `memory_budget`, naming the blocks; the same raster in 256-cell tiles, and a VRT over it,
/// answer.
#[tokio::test]
async fn every_cell_read_reserves_the_blocks_gdal_reads() {
    let server = Server::start(
        Era::Modern,
        Options {
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".to_string(),
                (256u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    sparse_tiled(&server.path("bomb.tif"), ["16384", "8192"]);
    sparse_tiled(&server.path("twin.tif"), ["256", "256"]);
    for name in ["bomb", "twin"] {
        let status = std::process::Command::new("gdal_translate")
            .args(["-q", "-of", "VRT"])
            .arg(server.path(&format!("{name}.tif")))
            .arg(server.path(&format!("{name}.vrt")))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let calls = |name: &str| {
        vec![
            ("raster_info", json!({"input": format!("{name}.tif")})),
            (
                "raster_info",
                json!({"input": format!("{name}.tif"), "stats": true}),
            ),
            ("raster_info", json!({"input": format!("{name}.vrt")})),
            (
                "raster_stats",
                json!({"input": format!("{name}.tif"), "sample": true}),
            ),
            (
                "raster_stats",
                json!({"input": format!("{name}.vrt"), "sample": true}),
            ),
        ]
    };
    for (tool, arguments) in calls("bomb") {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool} {arguments}: {}", text(&result));
        assert_eq!(
            structured(&result)["error"]["kind"],
            "memory_budget",
            "{tool} {arguments}: {}",
            text(&result)
        );
        let message = error_message(&result);
        assert!(
            message.contains("16384 x 8192") && message.contains("GDAL_MCP_MEMORY_BUDGET_BYTES"),
            "{tool} {arguments}: {message}"
        );
    }
    // The tools that run GDAL's programs refuse before any output.
    let convert = server
        .call(
            "raster_convert",
            json!({"input": "bomb.tif", "output": "out.tif"}),
        )
        .await
        .unwrap();
    assert!(is_error(&convert), "{}", text(&convert));
    assert_eq!(structured(&convert)["error"]["kind"], "memory_budget");
    assert!(!server.path("out.tif").exists());
    for (tool, arguments) in calls("twin") {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(!is_error(&result), "{tool} {arguments}: {}", text(&result));
    }
    let stats = server
        .call("raster_stats", json!({"input": "twin.tif", "sample": true}))
        .await
        .unwrap();
    assert_eq!(
        structured(&stats)["bands"][0]["max"],
        0.0,
        "{}",
        text(&stats)
    );
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        server.path("dem.tif"),
    )
    .unwrap();
    still_serves(&server).await;
}

/// Regression (issue 21, attack round 4, B7): `raster_sample` took points whose CRS cannot
/// place them on the raster: a vertical-only CRS (heights), a geocentric or engineering one,
/// or GeoPackage's "Undefined geographic SRS" (longitudes and latitudes on an unknown datum),
/// and either failed with PROJ's words or sampled where the unknown datum put them. They are
/// refused as arguments, naming the CRS and what to give instead; an undefined layer CRS may be
/// named with `crs`. The clean twins sample the right cells of a raster whose values are
/// 10 x row + column: an EPSG:4326 point on UTM 33N's central meridian at 36° N (northing
/// 3,983,948 m: row 5, column 4, value 54) and a projected point at a cell centre (27).
#[tokio::test]
async fn raster_sample_refuses_points_its_crs_cannot_place() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // 10 x 10 cells of 10 km in UTM 33N, x from 455,000 m, y from 3,940,000 m to 4,040,000 m.
    let mut grid =
        String::from("ncols 10\nnrows 10\nxllcorner 455000\nyllcorner 3940000\ncellsize 10000\n");
    for row in 0..10 {
        let line: Vec<String> = (0..10).map(|col| (10 * row + col).to_string()).collect();
        grid.push_str(&line.join(" "));
        grid.push('\n');
    }
    std::fs::write(server.path("grid.asc"), grid).unwrap();
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-a_srs", "EPSG:32633"])
        .arg(server.path("grid.asc"))
        .arg(server.path("grid.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    let layer = |name: &str, x: f64, y: f64, srs: &str| {
        std::fs::write(server.path("p.csv"), format!("id,x,y\n1,{x},{y}\n")).unwrap();
        let status = std::process::Command::new("ogr2ogr")
            .args(["-q", "-f", "GPKG", "-a_srs", srs])
            .arg(server.path(name))
            .arg(server.path("p.csv"))
            .args(["-oo", "X_POSSIBLE_NAMES=x", "-oo", "Y_POSSIBLE_NAMES=y"])
            .status()
            .unwrap();
        assert!(status.success(), "{name}");
    };
    layer("vertical.gpkg", 530_000.0, 4_015_000.0, "EPSG:5773");
    layer("geocentric.gpkg", 530_000.0, 4_015_000.0, "EPSG:4978");
    layer(
        "undefined.gpkg",
        15.0,
        36.0,
        "GEOGCS[\"Undefined geographic SRS\",DATUM[\"unknown\",SPHEROID[\"unknown\",6378137,\
         298.257223563]],PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433]]",
    );
    layer("lonlat.gpkg", 15.0, 36.0, "EPSG:4326");
    layer("utm.gpkg", 530_000.0, 4_015_000.0, "EPSG:32633");
    let refused = [
        (
            json!({"points": "vertical.gpkg"}),
            "EGM96 height",
            "vertical only",
        ),
        (json!({"points": "geocentric.gpkg"}), "WGS 84", "geocentric"),
        (
            json!({"points": "undefined.gpkg"}),
            "Undefined geographic SRS",
            "name the CRS of its coordinates with `crs`",
        ),
        (
            json!({"coordinates": [[530_000.0, 4_015_000.0]], "crs": "EPSG:5773"}),
            "EPSG:5773",
            "vertical only",
        ),
        (
            json!({"coordinates": [[530_000.0, 4_015_000.0]], "crs": "EPSG:4978"}),
            "EPSG:4978",
            "geocentric",
        ),
        (
            json!({"coordinates": [[530_000.0, 4_015_000.0]],
                   "crs": "LOCAL_CS[\"site grid\",UNIT[\"metre\",1]]"}),
            "site grid",
            "engineering",
        ),
    ];
    for (mut arguments, names, says) in refused {
        arguments["input"] = json!("grid.tif");
        let result = server
            .call("raster_sample", arguments.clone())
            .await
            .unwrap();
        assert!(is_error(&result), "{arguments}: {}", text(&result));
        assert_eq!(
            structured(&result)["error"]["kind"],
            "invalid_arguments",
            "{arguments}: {}",
            text(&result)
        );
        let message = error_message(&result);
        assert!(
            message.contains(names) && message.contains(says),
            "{arguments}: {message}"
        );
    }
    let value = |result: &rmcp::model::CallToolResult| {
        assert!(!is_error(result), "{}", text(result));
        structured(result)["points"][0]["values"][0]["value"].clone()
    };
    for (arguments, expected) in [
        (json!({"points": "lonlat.gpkg"}), 54.0),
        (
            json!({"points": "undefined.gpkg", "crs": "EPSG:4326"}),
            54.0,
        ),
        (
            json!({"coordinates": [[15.0, 36.0]], "crs": "EPSG:4326"}),
            54.0,
        ),
        (json!({"points": "utm.gpkg"}), 27.0),
        (json!({"coordinates": [[530_000.0, 4_015_000.0]]}), 27.0),
        (
            json!({"coordinates": [[530_000.0, 4_015_000.0]], "crs": "EPSG:32633+5773"}),
            27.0,
        ),
    ] {
        let mut arguments = arguments;
        arguments["input"] = json!("grid.tif");
        let result = server
            .call("raster_sample", arguments.clone())
            .await
            .unwrap();
        assert_eq!(value(&result), json!(expected), "{arguments}");
    }
}

/// Regression (issue 21, attack round 4, B2's hang, and round 5, F1): PROJ opens the grids a
/// CRS names when an operation is built from it, and the layer's CRS came from carriers the
/// pre-open scan never read: an upper-case `.PRJ` beside a plain shapefile (the shapefile
/// driver reads it when there is no `.prj`), an ENVI header's `coordinate system string`, a
/// GeoJSON `crs` written with a JSON escape (`nad\u0067rids`). With a FIFO as the grid,
/// `vector_reproject` never answered (the transformation was built outside the open
/// deadline). Every CRS GDAL parsed from an input is now checked inside the open, whatever
/// carried it, the sidecars are found in any case, and PROJ's operation building runs under the
/// deadline: each is refused at once, for a FIFO inside the workspace and outside, and the
/// server keeps answering. The clean twin: the same `.PRJ` without the grid is read.
#[tokio::test]
async fn a_crs_naming_a_fifo_grid_is_refused_whatever_carries_it() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![("GDAL_MCP_OPEN_DEADLINE_SECS".to_string(), "3".to_string())],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    let fifos = [
        outside.path().join("grid.gsb"),
        server.path("grids/grid.gsb"),
    ];
    std::fs::create_dir(server.path("grids")).unwrap();
    for fifo in &fifos {
        assert!(std::process::Command::new("mkfifo")
            .arg(fifo)
            .status()
            .unwrap()
            .success());
    }
    std::fs::write(server.path("p.csv"), "id,x,y\n1,10,20\n").unwrap();
    let shapefile = |stem: &str, prj_name: &str, prj: &str| {
        let status = std::process::Command::new("ogr2ogr")
            .args(["-q", "-f", "ESRI Shapefile"])
            .arg(server.path(&format!("{stem}.shp")))
            .arg(server.path("p.csv"))
            .args(["-oo", "X_POSSIBLE_NAMES=x", "-oo", "Y_POSSIBLE_NAMES=y"])
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::write(server.path(prj_name), prj).unwrap();
    };
    let wkt = |grid: &str| {
        format!(
            "GEOGCS[\"poisoned\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],\
             PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433]{}]",
            if grid.is_empty() {
                String::new()
            } else {
                format!(",EXTENSION[\"PROJ4\",\"+proj=longlat +ellps=WGS84 +nadgrids={grid} +no_defs\"]")
            }
        )
    };
    let mut inputs = Vec::new();
    for (index, fifo) in fifos.iter().enumerate() {
        let grid = fifo.display().to_string();
        // A plain shapefile with an upper-case .PRJ (WKT with a PROJ4 extension).
        shapefile(
            &format!("upper{index}"),
            &format!("upper{index}.PRJ"),
            &wkt(&grid),
        );
        // And with a lower-case .prj holding a PROJ string.
        shapefile(
            &format!("lower{index}"),
            &format!("lower{index}.prj"),
            &format!("+proj=longlat +ellps=WGS84 +nadgrids={grid} +no_defs"),
        );
        // A GeoJSON whose crs name spells the key with a JSON escape.
        std::fs::write(
            server.path(&format!("escaped{index}.geojson")),
            format!(
                "{{\"type\":\"FeatureCollection\",\"crs\":{{\"type\":\"name\",\"properties\":\
                 {{\"name\":\"+proj=longlat +ellps=WGS84 +nad\\u0067rids={grid} +no_defs\"}}}},\
                 \"features\":[{{\"type\":\"Feature\",\"properties\":{{}},\"geometry\":\
                 {{\"type\":\"Point\",\"coordinates\":[10,20]}}}}]}}"
            ),
        )
        .unwrap();
        // An ENVI raster whose header's coordinate system string names the grid.
        let status = std::process::Command::new("gdal_translate")
            .args(["-q", "-of", "ENVI", "-a_srs", "EPSG:4326"])
            .args(["-a_ullr", "10", "50", "11", "49"])
            .arg(server.path("dem.tif"))
            .arg(server.path(&format!("envi{index}.dat")))
            .status()
            .unwrap();
        assert!(status.success());
        let header = std::fs::read_to_string(server.path(&format!("envi{index}.hdr"))).unwrap();
        let header: String = header
            .lines()
            .map(|line| {
                if line.starts_with("coordinate system string") {
                    format!("coordinate system string = {{{}}}\n", wkt(&grid))
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        std::fs::write(server.path(&format!("envi{index}.hdr")), header).unwrap();
        inputs.push(index);
    }
    for index in inputs {
        let calls = [
            ("vector_info", json!({"input": format!("upper{index}.shp")})),
            (
                "vector_reproject",
                json!({"input": format!("upper{index}.shp"), "output": format!("o{index}.gpkg"),
                       "dst_crs": "EPSG:3857"}),
            ),
            (
                "vector_measure",
                json!({"input": format!("upper{index}.shp")}),
            ),
            ("vector_info", json!({"input": format!("lower{index}.shp")})),
            (
                "vector_info",
                json!({"input": format!("escaped{index}.geojson")}),
            ),
            (
                "vector_reproject",
                json!({"input": format!("escaped{index}.geojson"),
                       "output": format!("e{index}.gpkg"), "dst_crs": "EPSG:3857"}),
            ),
            ("raster_info", json!({"input": format!("envi{index}.dat")})),
            (
                "raster_reproject",
                json!({"input": format!("envi{index}.dat"), "output": format!("r{index}.tif"),
                       "dst_crs": "EPSG:3857", "resampling": "bilinear"}),
            ),
        ];
        for (tool, arguments) in calls {
            let started = Instant::now();
            let result = tokio::time::timeout(
                Duration::from_secs(15),
                server.call(tool, arguments.clone()),
            )
            .await
            .unwrap_or_else(|_| panic!("{tool} {arguments} never answered"))
            .unwrap();
            assert!(is_error(&result), "{tool} {arguments}: {}", text(&result));
            assert!(
                text(&result).contains("grid or parameter file"),
                "{tool} {arguments}: {}",
                text(&result)
            );
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{tool} {arguments}: refused before any open could block, not by the deadline \
                 ({:?})",
                started.elapsed()
            );
        }
    }
    for name in [
        "o0.gpkg", "o1.gpkg", "e0.gpkg", "e1.gpkg", "r0.tif", "r1.tif",
    ] {
        assert!(!server.path(name).exists(), "{name} was written");
    }
    // The clean twin: an upper-case .PRJ without the grid is read as the layer's CRS.
    shapefile("clean", "clean.PRJ", &wkt(""));
    let clean = server
        .call("vector_info", json!({"input": "clean.shp"}))
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(
        structured(&clean)["facts"]["crs"]["name"],
        "poisoned",
        "{}",
        text(&clean)
    );
    still_serves(&server).await;
}

/// Regression (issue 21, O1): a server whose client closed stdin did not exit while a GDAL
/// worker was still busy inside its open deadline (the runtime waited for every blocking
/// thread). Here a worker is held 60 s between its checks and its open (the debug builds'
/// test pause) under a 100 s deadline; once stdin closes, the process exits within 10 s. The
/// twin: with no work in flight it exits at once too.
#[tokio::test]
async fn the_server_exits_when_stdin_closes_with_a_worker_busy() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    for (busy, pause) in [(true, "60000"), (false, "0")] {
        let mut child = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
            .arg("serve")
            .arg("--workspace")
            .arg(workspace.path())
            .arg("--cache-dir")
            .arg(gdal_mcp_tests::shared_cache())
            .env("GDAL_MCP_TEST_PAUSE_AFTER_CHECKS_MS", pause)
            .env("GDAL_MCP_OPEN_DEADLINE_SECS", "100")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut send = |line: Value| {
            writeln!(stdin, "{line}").unwrap();
            stdin.flush().unwrap();
        };
        send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        );
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.contains("\"id\":0"), "{line}");
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        if busy {
            send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "raster_info", "arguments": {"input": "dem.tif"}}}),
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        drop(stdin);
        let closed = Instant::now();
        let exited = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if closed.elapsed() > Duration::from_secs(10) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if exited.is_none() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert!(
            exited.is_some(),
            "busy {busy}: the server was still running 10 s after stdin closed"
        );
    }
}

/// Regression (issue 21, O2): errors echoed caller text whole (a 1 MB `input` came back as
/// 2 MB of error, an unknown 1 MB key as 4 MB). Every echo of an argument longer than 256
/// characters is capped to its first 120, an ellipsis and its length, in the message and the
/// JSON alike; a huge `where` and a huge CRS stay refused with short messages. The twin: a
/// short wrong argument is still echoed whole.
#[tokio::test]
async fn errors_cap_the_caller_text_they_echo() {
    // What the server keeps of an over-long echo (the CRS parser keeps only 80 of its own).
    const ECHO_KEPT_HERE: usize = 120;
    let server = start(&["dem.tif", "nc.gpkg"]).await;
    let big = "q".repeat(1_000_000);
    let cases = [
        ("raster_info", json!({"input": big.clone()})),
        ("raster_info", json!({"input": format!("sub/{big}/x.tif")})),
        (
            "raster_info",
            json!({"input": "dem.tif", "stats": big.clone()}),
        ),
        ("raster_info", json!({"input": "dem.tif", big.clone(): 1})),
        (
            "vector_query",
            json!({"input": "nc.gpkg", "layer": big.clone()}),
        ),
        (
            "vector_query",
            json!({"input": "nc.gpkg", "where": format!("NAME = '{big}'")}),
        ),
        (
            "vector_query",
            json!({"input": "nc.gpkg", "where": big.clone()}),
        ),
        (
            "raster_reproject",
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": big.clone(),
                   "resampling": "bilinear"}),
        ),
        (
            "raster_reproject",
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326",
                   "resampling": big.clone()}),
        ),
        (
            "raster_sample",
            json!({"input": "dem.tif", "coordinates": [[1, 1]],
                   "crs": format!("+proj=longlat +{big}")}),
        ),
    ];
    for (tool, arguments) in cases {
        let result = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&result));
        let all = text(&result);
        assert!(
            all.len() < 40_000,
            "{tool}: {} bytes of error: {}",
            all.len(),
            &all[..300]
        );
        assert!(!all.contains(&"q".repeat(200)), "{tool}: {}", &all[..300]);
        if all.contains(&"q".repeat(ECHO_KEPT_HERE)) {
            assert!(
                all.contains("characters)"),
                "{tool}: a capped echo says how long the text was: {}",
                &all[..300]
            );
        }
    }
    // The twin: a short wrong value is echoed whole.
    let short = server
        .call(
            "raster_reproject",
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326",
                   "resampling": "sideways"}),
        )
        .await
        .unwrap();
    assert!(text(&short).contains("`sideways`"), "{}", text(&short));
    still_serves(&server).await;
}

/// Regression (issue 21, attack round 4, B4): GDAL 3.6 writes statistics it computes into a
/// VRT document when the dataset closes, even one opened read-only with PAM off, so
/// `raster_info` with `stats: true` rewrote an input VRT. It now refuses, naming
/// `raster_stats`, which computes the same figures and leaves the file as it was.
#[tokio::test]
async fn raster_info_stats_never_rewrite_an_input_vrt() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let vrt = server.path("plain.vrt");
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-of", "VRT"])
        .arg(server.path("dem.tif"))
        .arg(&vrt)
        .status()
        .unwrap();
    assert!(status.success());
    let before = std::fs::read(&vrt).unwrap();
    let info = server
        .call("raster_info", json!({"input": "plain.vrt", "stats": true}))
        .await
        .unwrap();
    assert!(is_error(&info), "{}", text(&info));
    assert!(text(&info).contains("raster_stats"), "{}", text(&info));
    let stats = server
        .call("raster_stats", json!({"input": "plain.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
    assert_eq!(
        std::fs::read(&vrt).unwrap(),
        before,
        "the VRT was rewritten"
    );
    // Its clean twin: a GeoTIFF gets its statistics, unchanged on disk too.
    let tif_before = std::fs::read(server.path("dem.tif")).unwrap();
    let tif = server
        .call("raster_info", json!({"input": "dem.tif", "stats": true}))
        .await
        .unwrap();
    assert!(!is_error(&tif), "{}", text(&tif));
    assert_eq!(std::fs::read(server.path("dem.tif")).unwrap(), tif_before);
}

/// A KML document of `levels` nested folders around one placemark.
fn nested_kml(levels: usize) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<kml xmlns=\"http://www.opengis.net/kml/2.2\"><Document>{}<Placemark><name>p</name><Point><coordinates>10,50</coordinates></Point></Placemark>{}</Document></kml>\n",
        "<Folder>".repeat(levels),
        "</Folder>".repeat(levels)
    )
}

/// Regression (issue 21, attack round 5, F7): the host's pre-open XML checks handed every
/// XML-looking input and sidecar to roxmltree, which recurses once per element level with no
/// limit: an 8 KB KML of 500 nested folders, or an `.aux.xml` of 100000 nested elements
/// beside a clean GeoTIFF, overflowed a runtime thread's stack and aborted the server. Nesting
/// is now counted without recursion before any parse and refused past 256 levels, naming the
/// file; the shallow twins open as before.
#[tokio::test]
async fn attack5_f7_deeply_nested_xml_is_refused_without_crashing() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    std::fs::write(server.path("deep.kml"), nested_kml(500)).unwrap();
    let deep = server
        .call("vector_info", json!({"input": "deep.kml"}))
        .await
        .unwrap();
    assert!(is_error(&deep), "{}", text(&deep));
    assert!(
        text(&deep).contains("deep.kml") && text(&deep).contains("levels deep"),
        "{}",
        text(&deep)
    );
    still_serves(&server).await;

    // A clean raster with a sidecar nested 100000 deep.
    std::fs::copy(server.path("dem.tif"), server.path("padded.tif")).unwrap();
    std::fs::write(
        server.path("padded.tif.aux.xml"),
        format!(
            "<PAMDataset>{}{}</PAMDataset>",
            "<a>".repeat(100_000),
            "</a>".repeat(100_000)
        ),
    )
    .unwrap();
    let padded = server
        .call("raster_info", json!({"input": "padded.tif"}))
        .await
        .unwrap();
    assert!(is_error(&padded), "{}", text(&padded));
    assert!(text(&padded).contains("levels deep"), "{}", text(&padded));
    still_serves(&server).await;

    // Clean twins: 20 nested folders (GDAL reads them), a shallow sidecar.
    std::fs::write(server.path("shallow.kml"), nested_kml(20)).unwrap();
    let shallow = server
        .call("vector_info", json!({"input": "shallow.kml"}))
        .await
        .unwrap();
    assert!(!is_error(&shallow), "{}", text(&shallow));
    std::fs::write(
        server.path("padded.tif.aux.xml"),
        "<PAMDataset><Metadata><MDI key=\"note\">kept</MDI></Metadata></PAMDataset>",
    )
    .unwrap();
    let clean = server
        .call("raster_info", json!({"input": "padded.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
}

/// Regression (issue 21, attack round 5, F3): an `.aux.xml` with one bare `&` (which GDAL's
/// lenient parser keeps and a strict parser refuses) was treated as carrying no SRS, so its SRS
/// (a BOUNDCRS whose operation is `+proj=tinshift +file=PATH`) reached PROJ, which opened PATH
/// outside the workspace. Since attack round 14 documents are parsed by GDAL's own parser, so
/// the SRS is read as GDAL reads it and refused for what it opens; the twin with a plain SRS
/// opens.
#[tokio::test]
async fn attack5_f3_an_unparseable_sidecar_is_refused_not_skipped() {
    let decoy = Decoy::new();
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let geog = "GEOGCRS[&quot;WGS 84&quot;,DATUM[&quot;World Geodetic System 1984&quot;,ELLIPSOID[&quot;WGS 84&quot;,6378137,298.257223563]],CS[ellipsoidal,2],AXIS[&quot;lon&quot;,east],AXIS[&quot;lat&quot;,north],ANGLEUNIT[&quot;degree&quot;,0.0174532925199433]]";
    let bound = format!(
        "BOUNDCRS[SOURCECRS[{geog}],TARGETCRS[{geog}],ABRIDGEDTRANSFORMATION[&quot;x&quot;,METHOD[&quot;PROJ-based operation method: +proj=tinshift +file={}&quot;]]]",
        decoy.path("secret.txt")
    );
    std::fs::copy(server.path("dem.tif"), server.path("p.tif")).unwrap();
    std::fs::write(
        server.path("p.tif.aux.xml"),
        format!("<PAMDataset>\n  <SRS>{bound}</SRS>\n  <Metadata><MDI key=\"note\">salt & pepper</MDI></Metadata>\n</PAMDataset>\n"),
    )
    .unwrap();
    let info = server
        .call("raster_info", json!({"input": "p.tif"}))
        .await
        .unwrap();
    assert!(is_error(&info), "{}", text(&info));
    assert!(
        text(&info).contains("p.tif.aux.xml") && text(&info).contains("tinshift"),
        "{}",
        text(&info)
    );
    // The twin: the same sidecar with the `&` escaped and no SRS of its own (the GeoTIFF's
    // CRS holds) opens.
    std::fs::write(
        server.path("p.tif.aux.xml"),
        "<PAMDataset>\n  <Metadata><MDI key=\"note\">salt &amp; pepper</MDI></Metadata>\n</PAMDataset>\n",
    )
    .unwrap();
    let clean = server
        .call("raster_info", json!({"input": "p.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    decoy.assert_untouched();
}

/// A GeoJSON polygon layer whose `crs` member names `crs`, after `pad` bytes of padding.
fn geojson_with_crs(crs: &str, pad: usize) -> String {
    let pad = if pad == 0 {
        String::new()
    } else {
        format!("\"pad\":\"{}\",", "x".repeat(pad))
    };
    format!(
        "{{\"type\":\"FeatureCollection\",{pad}\"crs\":{{\"type\":\"name\",\"properties\":{{\"name\":\"{crs}\"}}}},\"features\":[{{\"type\":\"Feature\",\"properties\":{{\"a\":1}},\"geometry\":{{\"type\":\"Polygon\",\"coordinates\":[[[10,50],[10.1,50],[10.1,50.1],[10,50.1],[10,50]]]}}}}]}}"
    )
}

/// Regression (issue 21, attack round 5, F1): CRS text naming a file reached PROJ through
/// carriers the pre-open scan never read: an ENVI `.hdr`'s `coordinate system string` with
/// `EXTENSION["PROJ4","... +nadgrids=PATH"]`, a GeoJSON `crs` written `+nad\u0067rids=` or
/// placed after the first MiB, a `.prj` whose BOUNDCRS runs `+proj=tinshift +file=PATH`. The
/// carriers are now decoded as GDAL decodes them (JSON escapes, XML references) and scanned
/// whole; the twins with an authority CRS open.
#[tokio::test]
async fn attack5_f1_crs_text_naming_files_is_found_in_every_carrier() {
    let decoy = Decoy::new();
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let grid = decoy.path("secret.txt");
    // ENVI: a raster whose header names a grid.
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-of", "ENVI"])
        .arg(server.path("dem.tif"))
        .arg(server.path("e.dat"))
        .status()
        .unwrap();
    assert!(status.success());
    let header = std::fs::read_to_string(server.path("e.hdr")).unwrap();
    let start = header.find("coordinate system string = {").unwrap();
    let end = start + header[start..].find('}').unwrap() + 1;
    let planted = format!(
        "{}coordinate system string = {{GEOGCS[\"YYY\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433],EXTENSION[\"PROJ4\",\"+proj=longlat +ellps=WGS84 +nadgrids={grid} +no_defs\"]]}}{}",
        &header[..start],
        &header[end..]
    );
    let clean_header = header.clone();
    std::fs::write(server.path("e.hdr"), planted).unwrap();
    let envi = server
        .call("raster_info", json!({"input": "e.dat"}))
        .await
        .unwrap();
    assert!(is_error(&envi), "{}", text(&envi));
    assert!(text(&envi).contains("e.hdr"), "{}", text(&envi));
    std::fs::write(server.path("e.hdr"), clean_header).unwrap();
    let envi = server
        .call("raster_info", json!({"input": "e.dat"}))
        .await
        .unwrap();
    assert!(!is_error(&envi), "{}", text(&envi));

    // GeoJSON: an escaped key, and a key after the first MiB.
    for (name, crs, pad) in [
        (
            "escaped.geojson",
            format!("+proj=longlat +ellps=WGS84 +nad\\u0067rids={grid} +no_defs"),
            0,
        ),
        (
            "late.geojson",
            format!("+proj=longlat +ellps=WGS84 +nadgrids={grid} +no_defs"),
            (1 << 20) + 1000,
        ),
    ] {
        std::fs::write(server.path(name), geojson_with_crs(&crs, pad)).unwrap();
        let info = server
            .call("vector_info", json!({"input": name}))
            .await
            .unwrap();
        assert!(is_error(&info), "{name}: {}", text(&info));
        assert!(text(&info).contains("grid"), "{name}: {}", text(&info));
    }
    std::fs::write(
        server.path("late.geojson"),
        geojson_with_crs("urn:ogc:def:crs:OGC:1.3:CRS84", (1 << 20) + 1000),
    )
    .unwrap();
    let twin = server
        .call("vector_info", json!({"input": "late.geojson"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));

    // A GeoJSON whose CRS is a BOUNDCRS running tinshift over an outside file (the raw scan
    // looked only for `grids=` and `init=`).
    let g = "GEOGCRS[\\\"WGS 84\\\",DATUM[\\\"World Geodetic System 1984\\\",ELLIPSOID[\\\"WGS 84\\\",6378137,298.257223563]],CS[ellipsoidal,2],AXIS[\\\"lon\\\",east],AXIS[\\\"lat\\\",north],ANGLEUNIT[\\\"degree\\\",0.0174532925199433]]";
    std::fs::write(
        server.path("t.geojson"),
        geojson_with_crs(
            &format!("BOUNDCRS[SOURCECRS[{g}],TARGETCRS[{g}],ABRIDGEDTRANSFORMATION[\\\"x\\\",METHOD[\\\"PROJ-based operation method: +proj=tinshift +file={grid}\\\"]]]"),
            0,
        ),
    )
    .unwrap();
    let tin = server
        .call("vector_info", json!({"input": "t.geojson"}))
        .await
        .unwrap();
    assert!(is_error(&tin), "{}", text(&tin));
    assert!(text(&tin).contains("tinshift"), "{}", text(&tin));
    std::fs::write(
        server.path("t.geojson"),
        geojson_with_crs(&g.replace("WGS 84", "W"), 0),
    )
    .unwrap();
    let tin = server
        .call("vector_info", json!({"input": "t.geojson"}))
        .await
        .unwrap();
    assert!(!is_error(&tin), "{}", text(&tin));

    // Regression (attack round 6, R6-0): a GML's `.gfs` schema names the layer's SRS, and its
    // `<SRSName>` reached PROJ (which opened the outside grid) while GDAL opened a clean GML.
    let gml = r#"<?xml version="1.0" encoding="utf-8" ?>
<ogr:FeatureCollection xmlns:ogr="http://ogr.maptools.org/" xmlns:gml="http://www.opengis.net/gml">
  <gml:featureMember><ogr:g fid="g.0"><ogr:geometryProperty><gml:Point><gml:coordinates>1,2</gml:coordinates></gml:Point></ogr:geometryProperty><ogr:a>1</ogr:a></ogr:g></gml:featureMember>
</ogr:FeatureCollection>
"#;
    let gfs = |srs: &str| {
        format!(
            "<GMLFeatureClassList><GMLFeatureClass><Name>g</Name><ElementPath>g</ElementPath>\
             <GeometryType>1</GeometryType><SRSName>{srs}</SRSName><PropertyDefn><Name>a</Name>\
             <ElementPath>a</ElementPath><Type>Integer</Type></PropertyDefn></GMLFeatureClass>\
             </GMLFeatureClassList>"
        )
    };
    std::fs::write(server.path("g.gml"), gml).unwrap();
    std::fs::write(
        server.path("g.gfs"),
        gfs(&format!(
            "+proj=longlat +ellps=GRS80 +nadgrids={grid} +type=crs"
        )),
    )
    .unwrap();
    let planted = server
        .call("vector_info", json!({"input": "g.gml"}))
        .await
        .unwrap();
    assert!(is_error(&planted), "{}", text(&planted));
    assert!(text(&planted).contains("grid"), "{}", text(&planted));
    std::fs::write(server.path("g.gfs"), gfs("EPSG:4326")).unwrap();
    let clean = server
        .call("vector_info", json!({"input": "g.gml"}))
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    still_serves(&server).await;
    decoy.assert_untouched();
}

/// A GeoPackage `name` with an attributes table `t` (two rows) and, when given, a view `v`
/// over `view_sql` registered as an attributes layer.
fn gpkg_with_view(server: &Server, name: &str, view_sql: Option<&str>) {
    let csv = server.path(&format!("{name}.csv"));
    std::fs::write(&csv, "a,b\n1,x\n2,y\n").unwrap();
    let status = std::process::Command::new("ogr2ogr")
        .args(["-q", "-f", "GPKG", "-nln", "t"])
        .arg(server.path(name))
        .arg(&csv)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_file(&csv).unwrap();
    if let Some(sql) = view_sql {
        let status = std::process::Command::new("sqlite3")
            .arg(server.path(name))
            .arg(format!(
                "CREATE VIEW v AS {sql}; INSERT INTO gpkg_contents (table_name, data_type, identifier) VALUES ('v', 'attributes', 'v');"
            ))
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// Regression (issue 21, attack round 5, F5 and F6): a GeoPackage layer that is a view
/// `SELECT fid, a, hex(zeroblob(200000000)) AS big FROM t` took 1.4 GB in `vector_info` and
/// 2.9 GB in `vector_query` (light tools reserve nothing), and a view over an endless
/// recursive CTE never answered and could not be cancelled. Views with a common table
/// expression, and views or generated columns calling value-building functions, are now
/// refused before the open, naming the SQL and the fix (materialise the view); a plain view
/// still opens.
#[tokio::test]
async fn attack5_f5_f6_gpkg_views_that_read_without_bound_are_refused() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let cases = [
        ("bomb.gpkg", "SELECT fid, a, hex(zeroblob(200000000)) AS big FROM t", "zeroblob"),
        (
            "loop.gpkg",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x AS fid, x AS a FROM c",
            "WITH",
        ),
        (
            "loop2.gpkg",
            "WITH c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x AS fid FROM c",
            "WITH",
        ),
        ("fmt.gpkg", "SELECT fid, printf('%.*c', 1000000000, 'x') AS big FROM t", "printf"),
    ];
    for (name, sql, named) in cases {
        gpkg_with_view(&server, name, Some(sql));
        let started = Instant::now();
        for (tool, args) in [
            ("vector_info", json!({"input": name})),
            ("vector_query", json!({"input": name, "layer": "v"})),
        ] {
            let result = server.call(tool, args).await.unwrap();
            assert!(is_error(&result), "{name} {tool}: {}", text(&result));
            let message = text(&result);
            assert!(
                message.contains(named) && message.contains("Materialise the view"),
                "{name} {tool}: {message}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{name}");
    }
    still_serves(&server).await;
    // The twin: a plain view over the table opens and reads.
    gpkg_with_view(
        &server,
        "plain.gpkg",
        Some("SELECT fid, a, b FROM t WHERE a > 1"),
    );
    let info = server
        .call("vector_info", json!({"input": "plain.gpkg"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let query = server
        .call("vector_query", json!({"input": "plain.gpkg", "layer": "v"}))
        .await
        .unwrap();
    assert!(!is_error(&query), "{}", text(&query));
}

/// Regression (issue 21, attack round 6, R6-A): views that grow a value without any listed
/// function (five nested subqueries each `big||big||...` eight times; `hex()` nested 18 times:
/// 1.3 and 1.6 GB in `vector_info` from a 73 KB file) are refused before the open by the
/// schema's structure, naming the view and the growth; the twin (a label concatenated once, a
/// filter) opens and reads.
#[tokio::test]
async fn attack6_r6a_gpkg_views_growing_without_a_listed_function_are_refused() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut nested = "SELECT fid, a AS big FROM t".to_string();
    for _ in 0..5 {
        nested =
            format!("SELECT fid, big||big||big||big||big||big||big||big AS big FROM ({nested})");
    }
    let mut hex = "a".to_string();
    for _ in 0..18 {
        hex = format!("hex({hex})");
    }
    let hex = format!("SELECT fid, {hex} AS big FROM t");
    for (name, sql, figure) in [
        ("cat.gpkg", nested.as_str(), "32768"),
        ("hex.gpkg", hex.as_str(), "262144"),
    ] {
        gpkg_with_view(&server, name, Some(sql));
        for (tool, args) in [
            ("vector_info", json!({"input": name})),
            ("vector_query", json!({"input": name, "layer": "v"})),
        ] {
            let result = server.call(tool, args).await.unwrap();
            assert!(is_error(&result), "{name} {tool}: {}", text(&result));
            let message = text(&result);
            assert!(
                message.contains("view `v`")
                    && message.contains(figure)
                    && message.contains("Materialise the view"),
                "{name} {tool}: {message}"
            );
        }
    }
    still_serves(&server).await;
    gpkg_with_view(
        &server,
        "label.gpkg",
        Some("SELECT fid, a, b, b || ' (' || a || ')' AS label FROM (SELECT * FROM t) WHERE a > 1"),
    );
    let query = server
        .call("vector_query", json!({"input": "label.gpkg", "layer": "v"}))
        .await
        .unwrap();
    assert!(!is_error(&query), "{}", text(&query));
    assert!(text(&query).contains("y (2)"), "{}", text(&query));
}

/// A DXF whose blocks insert the next block `fan` times, `depth` levels deep, over one line
/// (attack round 5's `mk_dxf_bomb.py`): `fan^depth` lines once GDAL inlines the blocks.
fn dxf_bomb(depth: usize, fan: usize) -> String {
    let mut l: Vec<String> = Vec::new();
    let mut g = |code: i32, value: &str| {
        l.push(code.to_string());
        l.push(value.to_string());
    };
    for (c, v) in [
        (0, "SECTION"),
        (2, "HEADER"),
        (9, "$ACADVER"),
        (1, "AC1015"),
        (0, "ENDSEC"),
    ] {
        g(c, v);
    }
    g(0, "SECTION");
    g(2, "BLOCKS");
    for k in 0..=depth {
        let name = format!("B{k}");
        for (c, v) in [
            (0, "BLOCK"),
            (8, "0"),
            (2, name.as_str()),
            (70, "0"),
            (10, "0"),
            (20, "0"),
            (30, "0"),
            (3, name.as_str()),
        ] {
            g(c, v);
        }
        if k == depth {
            for (c, v) in [
                (0, "LINE"),
                (8, "0"),
                (10, "0"),
                (20, "0"),
                (30, "0"),
                (11, "1"),
                (21, "1"),
                (31, "0"),
            ] {
                g(c, v);
            }
        } else {
            let child = format!("B{}", k + 1);
            for i in 0..fan {
                let x = format!("{}", i as f64 * 0.001);
                for (c, v) in [
                    (0, "INSERT"),
                    (8, "0"),
                    (2, child.as_str()),
                    (10, x.as_str()),
                    (20, "0"),
                    (30, "0"),
                ] {
                    g(c, v);
                }
            }
        }
        g(0, "ENDBLK");
        g(8, "0");
    }
    g(0, "ENDSEC");
    for (c, v) in [
        (0, "SECTION"),
        (2, "ENTITIES"),
        (0, "INSERT"),
        (8, "0"),
        (2, "B0"),
        (10, "0"),
        (20, "0"),
        (30, "0"),
        (0, "ENDSEC"),
        (0, "EOF"),
    ] {
        g(c, v);
    }
    l.join("\n") + "\n"
}

/// Regression (issue 21, attack round 5, F8): a 3 KB DXF whose blocks insert blocks 10 times
/// per level, 7 levels deep, made GDAL build 10^7 lines (3.7 GB, 215 s) inside `vector_info`.
/// The expansion is now counted from the text before the open and refused past 1 M entities,
/// with the count; the same drawing 3 levels deep (1000 lines) opens.
#[tokio::test]
async fn attack5_f8_a_dxf_block_bomb_is_refused_before_the_open() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    std::fs::write(server.path("bomb.dxf"), dxf_bomb(7, 10)).unwrap();
    let started = Instant::now();
    let bomb = server
        .call("vector_info", json!({"input": "bomb.dxf"}))
        .await
        .unwrap();
    assert!(is_error(&bomb), "{}", text(&bomb));
    assert!(
        text(&bomb).contains("10000000 entities")
            && text(&bomb).contains("GDAL_MCP_MAX_DXF_ENTITIES"),
        "{}",
        text(&bomb)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    still_serves(&server).await;
    std::fs::write(server.path("small.dxf"), dxf_bomb(3, 10)).unwrap();
    let small = server
        .call("vector_info", json!({"input": "small.dxf"}))
        .await
        .unwrap();
    assert!(!is_error(&small), "{}", text(&small));
}

/// Whether any cell of the raster at `path` holds `value` (read with GDAL in the test).
fn holds_value(path: &Path, value: f64) -> bool {
    let dataset = gdal::Dataset::open(path).unwrap();
    let band = dataset.rasterband(1).unwrap();
    let (width, height) = band.size();
    let cells = band
        .read_as::<f64>((0, 0), (width, height), (width, height), None)
        .unwrap();
    cells.data().contains(&value)
}

/// Regression (docs/security.md "Races on path checks", the VRT race): GDAL opens a VRT's
/// sources lazily, at the first read, by name; the identity re-check compares device, inode and
/// change time, and change times come from a coarse clock, so a source swapped for a link to an
/// outside decoy and swapped back within one tick was read unseen. The folders GDAL walks to a
/// source are now watched (inotify) from before the checks to the commit or answer: a racer
/// swapping the source thousands of times during 40 conversions and 40 samples never gets the
/// decoy's marked pixels (4242) into an output or an answer. The twin: with no racer, every
/// call succeeds and reads the real pixels.
#[tokio::test]
async fn b_vrt_source_swapped_during_the_read_never_reaches_an_output() {
    let mut decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let ws = |name: &str| server.path(name).display().to_string();
    let marked_dir = tempfile::tempdir().unwrap();
    let marked = marked_dir.path().join("marked.tif");
    run(
        "gdal_create",
        &[
            "-q",
            "-if",
            &ws("dem.tif"),
            "-burn",
            "4242",
            "-ot",
            "Float32",
            &marked.display().to_string(),
        ],
    );
    decoy.add("marked.tif", &std::fs::read(&marked).unwrap());
    let outside = PathBuf::from(decoy.path("marked.tif"));
    std::fs::create_dir(server.path("data")).unwrap();
    run(
        "gdal_translate",
        &["-q", "-ot", "Float32", &ws("dem.tif"), &ws("data/src.tif")],
    );
    run(
        "gdal_translate",
        &["-q", "-of", "VRT", &ws("data/src.tif"), &ws("data/v.vrt")],
    );
    std::fs::create_dir(server.path("out")).unwrap();
    let calls = |racing: bool| {
        let server = &server;
        async move {
            let (mut written, mut answered) = (0, 0);
            for i in 0..40 {
                let output = format!("out/{}-{i}.tif", if racing { "race" } else { "twin" });
                let result = server
                    .call(
                        "raster_convert",
                        json!({"input": "data/v.vrt", "output": output, "format": "GTiff"}),
                    )
                    .await
                    .unwrap();
                if !is_error(&result) {
                    written += 1;
                    assert!(
                        !holds_value(&server.path(&output), 4242.0),
                        "{output} holds the outside decoy's pixels"
                    );
                } else {
                    assert!(racing, "the twin failed: {}", text(&result));
                    assert!(
                        !server.path(&output).exists(),
                        "a failed call left {output}"
                    );
                }
                let sample = server
                    .call(
                        "raster_sample",
                        json!({"input": "data/v.vrt", "coordinates": [
                            [289_000.0, 9_120_500.0], [293_000.0, 9_116_000.0],
                            [297_500.0, 9_111_000.0]]}),
                    )
                    .await
                    .unwrap();
                if !is_error(&sample) {
                    answered += 1;
                    assert!(
                        !structured(&sample).to_string().contains("4242"),
                        "a sample read the outside decoy: {}",
                        text(&sample)
                    );
                } else {
                    assert!(racing, "the twin failed: {}", text(&sample));
                }
            }
            (written, answered)
        }
    };
    // The twin first: no racer, every call reads the real pixels.
    let (written, answered) = calls(false).await;
    assert_eq!((written, answered), (40, 40));

    let source = server.path("data/src.tif");
    let keep = server.path("keep.tif");
    std::fs::hard_link(&source, &keep).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racing = stop.clone();
    let (link, back, kept) = (
        server.path("data/link.tmp"),
        server.path("data/back.tmp"),
        keep.clone(),
    );
    let racer = std::thread::spawn(move || {
        let mut swaps = 0u32;
        while !racing.load(Ordering::SeqCst) && swaps < 1_000_000 {
            let _ = std::os::unix::fs::symlink(&outside, &link);
            let _ = std::fs::rename(&link, &source);
            std::thread::yield_now();
            let _ = std::fs::hard_link(&kept, &back);
            let _ = std::fs::rename(&back, &source);
            swaps += 1;
            // Bursts of swaps with quiet gaps, so calls go through as well as fail.
            if swaps.is_multiple_of(20) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        swaps
    });
    let (written, answered) = calls(true).await;
    stop.store(true, Ordering::SeqCst);
    let swaps = racer.join().unwrap();
    assert!(swaps > 500, "the racer swapped {swaps} times");
    eprintln!(
        "{written} of 40 conversions and {answered} of 40 samples went through while the \
         source was swapped {swaps} times"
    );
    decoy.assert_untouched();
    still_serves(&server).await;
}

/// `gzip -c text > path`.
fn gzip_to(path: &Path, text: &[u8]) {
    let mut child = std::process::Command::new("gzip")
        .arg("-c")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let owned = text.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&owned).unwrap());
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success());
    std::fs::write(path, out.stdout).unwrap();
}

/// A one-point GML whose geometry's `srsName` is `srs`, with `pad` bytes of text in an
/// attribute.
fn gml_point(srs: &str, pad: usize) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8" ?>
<ogr:FeatureCollection xmlns:ogr="http://ogr.maptools.org/" xmlns:gml="http://www.opengis.net/gml">
  <gml:featureMember><ogr:g fid="g.0"><ogr:geometryProperty><gml:Point srsName="{srs}"><gml:coordinates>1,2</gml:coordinates></gml:Point></ogr:geometryProperty><ogr:v>{}</ogr:v></ogr:g></gml:featureMember>
</ogr:FeatureCollection>
"#,
        "A".repeat(pad)
    )
}

/// Regression, issue 21 attack round 7, R7-7 and R7-8: GDAL's GML driver opens a `.gml.gz`
/// through `/vsigzip/`, and the CRS scan read its compressed bytes: a `+nadgrids=` naming an
/// outside grid reached PROJ (an outside FIFO there held a read worker to the 30 s deadline),
/// and a 612 KB file inflating to 600 MiB made `vector_info` peak at 1.3 GB. The gzip stream
/// is now inflated under `GDAL_MCP_MAX_INFLATED_BYTES` (set to 8 MiB here) and its text scanned
/// like an uncompressed file's, before the open. A KMZ (a zip LIBKML inflates whole: 306 KB
/// took `ogrinfo` to 1.6 GB) is held to the zip budgets. The clean twins: a small clean
/// `.gml.gz` (also under another case of the suffix) and KMZ open, and GDAL writes no
/// `.properties` file beside the gzip.
#[tokio::test]
async fn r7_7_r7_8_gzip_gml_is_inflated_under_a_budget_and_scanned_before_the_open() {
    let decoy = Decoy::new();
    let fifo_dir = tempfile::tempdir().unwrap();
    let fifo = fifo_dir.path().join("grid.gsb");
    run("mkfifo", &[&fifo.display().to_string()]);
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![(
                "GDAL_MCP_MAX_INFLATED_BYTES".into(),
                (8u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for (name, grid) in [
        ("g.gml.gz", fifo.display().to_string()),
        ("h.gz", decoy.path("secret.txt")),
    ] {
        gzip_to(
            &server.path(name),
            gml_point(
                &format!("+proj=longlat +ellps=GRS80 +nadgrids={grid} +type=crs"),
                0,
            )
            .as_bytes(),
        );
        let started = Instant::now();
        let planted = server
            .call("vector_info", json!({"input": name}))
            .await
            .unwrap();
        assert!(is_error(&planted), "{}", text(&planted));
        assert!(
            text(&planted).contains("(inflated)") && text(&planted).contains("grid"),
            "{}",
            text(&planted)
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "refused before PROJ opened the grid, not at the deadline: {:?}",
            started.elapsed()
        );
    }
    // R7-8: 12 MiB inflated from about 12 KB.
    gzip_to(
        &server.path("b.gml.gz"),
        gml_point("EPSG:4326", 12 << 20).as_bytes(),
    );
    assert!(std::fs::metadata(server.path("b.gml.gz")).unwrap().len() < 100_000);
    let bomb = server
        .call("vector_info", json!({"input": "b.gml.gz"}))
        .await
        .unwrap();
    assert!(is_error(&bomb), "{}", text(&bomb));
    assert!(
        text(&bomb).contains("GDAL_MCP_MAX_INFLATED_BYTES"),
        "{}",
        text(&bomb)
    );
    // A KMZ is a zip LIBKML inflates whole: the zip budgets hold for it (4 MiB of one name
    // deflate to a few KB, a ratio far above 200); a small clean one opens.
    let kml = |name: &str| {
        format!(
            "<?xml version=\"1.0\"?><kml xmlns=\"http://www.opengis.net/kml/2.2\"><Document>\
             <Placemark><name>{name}</name><Point><coordinates>1,2</coordinates></Point>\
             </Placemark></Document></kml>"
        )
    };
    for (name, doc) in [("k.kmz", kml(&"A".repeat(4 << 20))), ("l.kmz", kml("l"))] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("doc.kml"), doc).unwrap();
        let status = std::process::Command::new("zip")
            .current_dir(dir.path())
            .args(["-q"])
            .arg(server.path(name))
            .arg("doc.kml")
            .status()
            .unwrap();
        assert!(status.success());
        let opened = server
            .call("vector_info", json!({"input": name}))
            .await
            .unwrap();
        if name == "k.kmz" {
            assert!(is_error(&opened), "{}", text(&opened));
            assert!(
                text(&opened).contains("GDAL_MCP_TABLE_MAX_RATIO"),
                "{}",
                text(&opened)
            );
        } else {
            assert!(!is_error(&opened), "{}", text(&opened));
        }
    }
    // The clean twins.
    for name in ["c.gml.gz", "d.GZ"] {
        gzip_to(&server.path(name), gml_point("EPSG:4326", 1000).as_bytes());
        let clean = server
            .call("vector_info", json!({"input": name}))
            .await
            .unwrap();
        assert!(!is_error(&clean), "{}", text(&clean));
        assert!(
            !server.path(&format!("{name}.properties")).exists(),
            "GDAL wrote a .properties file beside {name}"
        );
    }
    still_serves(&server).await;
    decoy.assert_untouched();
}

/// An XLSX (zipped with `zip`) of one sheet: a header row of two shared strings, then `rows`
/// rows of x, y and a cell referring to shared string 2, which is `big`.
fn xlsx_with_shared_string(path: &Path, big: &str, rows: usize) {
    let ns = "http://schemas.openxmlformats.org";
    let mut sheet = format!(
        "<?xml version=\"1.0\"?><worksheet xmlns=\"{ns}/spreadsheetml/2006/main\"><sheetData>\
         <row r=\"1\"><c r=\"A1\" t=\"s\"><v>0</v></c><c r=\"B1\" t=\"s\"><v>1</v></c>\
         <c r=\"C1\" t=\"inlineStr\"><is><t>note</t></is></c></row>"
    );
    for i in 2..rows + 2 {
        sheet.push_str(&format!(
            "<row r=\"{i}\"><c r=\"A{i}\"><v>15</v></c><c r=\"B{i}\"><v>45</v></c>\
             <c r=\"C{i}\" t=\"s\"><v>2</v></c></row>"
        ));
    }
    sheet.push_str("</sheetData></worksheet>");
    xlsx_of(
        path,
        Some(format!(
            "<?xml version=\"1.0\"?><sst xmlns=\"{ns}/spreadsheetml/2006/main\" count=\"3\" \
             uniqueCount=\"3\"><si><t>x</t></si><si><t>y</t></si><si><t>{big}</t></si></sst>"
        )),
        sheet,
    );
}

/// An XLSX (zipped with `zip`) of one sheet `sheet` (and shared strings, if given).
fn xlsx_of(path: &Path, shared_strings: Option<String>, sheet: String) {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let file = dir.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    let ns = "http://schemas.openxmlformats.org";
    write(
        "[Content_Types].xml",
        format!(
            "<?xml version=\"1.0\"?><Types xmlns=\"{ns}/package/2006/content-types\">\
             <Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
             <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
             <Override PartName=\"/xl/workbook.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/>\
             <Override PartName=\"/xl/worksheets/sheet1.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml\"/>\
             <Override PartName=\"/xl/sharedStrings.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml\"/></Types>"
        ),
    );
    write(
        "_rels/.rels",
        format!(
            "<?xml version=\"1.0\"?><Relationships xmlns=\"{ns}/package/2006/relationships\">\
             <Relationship Id=\"rId1\" Type=\"{ns}/officeDocument/2006/relationships/officeDocument\" Target=\"xl/workbook.xml\"/></Relationships>"
        ),
    );
    write(
        "xl/workbook.xml",
        format!(
            "<?xml version=\"1.0\"?><workbook xmlns=\"{ns}/spreadsheetml/2006/main\" \
             xmlns:r=\"{ns}/officeDocument/2006/relationships\"><sheets>\
             <sheet name=\"S\" sheetId=\"1\" r:id=\"rId1\"/></sheets></workbook>"
        ),
    );
    write(
        "xl/_rels/workbook.xml.rels",
        format!(
            "<?xml version=\"1.0\"?><Relationships xmlns=\"{ns}/package/2006/relationships\">\
             <Relationship Id=\"rId1\" Type=\"{ns}/officeDocument/2006/relationships/worksheet\" Target=\"worksheets/sheet1.xml\"/>\
             <Relationship Id=\"rId2\" Type=\"{ns}/officeDocument/2006/relationships/sharedStrings\" Target=\"sharedStrings.xml\"/></Relationships>"
        ),
    );
    if let Some(shared_strings) = shared_strings {
        write("xl/sharedStrings.xml", shared_strings);
    }
    write("xl/worksheets/sheet1.xml", sheet);
    let status = std::process::Command::new("zip")
        .current_dir(dir.path())
        .args(["-q", "-r"])
        .arg(path)
        .args(["[Content_Types].xml", "_rels", "xl"])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Regression, issue 21 attack round 7, R7-10: GDAL's XLSX reader copies a shared string into
/// every cell that refers to it, so one 4 MiB string referenced by 1000 cells (3.19 MB on
/// disk, 4.2 MB inflated: inside every zip budget) took `vector_info` to 4 GB. The cells'
/// expanded size (each reference times its string's length) is measured before the open and
/// refused above the table byte budget (8 MiB here), naming it. The clean twin: the same
/// workbook with few references opens (`vector_info` and `points_from_table`).
#[tokio::test]
async fn r7_10_a_shared_string_referenced_by_many_cells_is_refused_by_its_expanded_size() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![("GDAL_MCP_TABLE_MAX_BYTES".into(), (8u64 << 20).to_string())],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let big = "Q".repeat(64 << 10);
    // 200 references x 64 KiB = 12.5 MiB of cells from a file of a few KB.
    xlsx_with_shared_string(&server.path("bomb.xlsx"), &big, 200);
    assert!(std::fs::metadata(server.path("bomb.xlsx")).unwrap().len() < 100_000);
    for (tool, arguments) in [
        ("vector_info", json!({"input": "bomb.xlsx"})),
        (
            "points_from_table",
            json!({"input": "bomb.xlsx", "output": "p.gpkg", "x": "x", "y": "y",
                   "crs": "EPSG:4326"}),
        ),
    ] {
        let refused = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&refused), "{}", text(&refused));
        assert!(
            text(&refused).contains("GDAL_MCP_TABLE_MAX_BYTES")
                && text(&refused).contains("shared strings"),
            "{}",
            text(&refused)
        );
    }
    assert!(!server.path("p.gpkg").exists());
    // The clean twin: 20 references (1.25 MiB of cells).
    xlsx_with_shared_string(&server.path("ok.xlsx"), &big, 20);
    let info = server
        .call("vector_info", json!({"input": "ok.xlsx"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let points = server
        .call(
            "points_from_table",
            json!({"input": "ok.xlsx", "output": "p.gpkg", "x": "x", "y": "y",
                   "crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&points), "{}", text(&points));
    still_serves(&server).await;
}

/// A sheet: a header x, y and z at column `far`, then `rows` rows of x, y and an empty
/// formatted cell at `far` (as Excel writes for formatted rows).
fn far_column_sheet(far: &str, rows: usize) -> String {
    let mut sheet = format!(
        "<?xml version=\"1.0\"?><worksheet xmlns=\"http://schemas.openxmlformats.org/\
         spreadsheetml/2006/main\"><sheetData><row r=\"1\">\
         <c r=\"A1\" t=\"inlineStr\"><is><t>x</t></is></c>\
         <c r=\"B1\" t=\"inlineStr\"><is><t>y</t></is></c>\
         <c r=\"{far}1\" t=\"inlineStr\"><is><t>z</t></is></c></row>"
    );
    for i in 2..rows + 2 {
        sheet.push_str(&format!(
            "<row r=\"{i}\"><c r=\"A{i}\"><v>15</v></c><c r=\"B{i}\"><v>45</v></c>\
             <c r=\"{far}{i}\" s=\"1\"/></row>"
        ));
    }
    sheet.push_str("</sheetData></worksheet>");
    sheet
}

/// Regression, issue 21 attack round 8, R8-1: GDAL's XLSX reader gives every row a field for
/// every column up to the widest one any cell reaches, so rows of x, y and an empty formatted
/// cell at BXX (column 2000) made a 660 KB file take `vector_info`, a read-only call, to
/// 1.95 GB. The cells GDAL fills are counted from the sheet before the open and refused above
/// `GDAL_MCP_TABLE_MAX_CELLS` (its default here: 9,001 rows x 2000 columns is 18 million, above
/// 16 Mi), naming the figure and the variable. The clean twin: the same 9,000 rows with 50
/// filled columns open in both tools.
#[tokio::test]
async fn r8_1_rows_filled_to_a_far_column_are_refused_by_their_cells() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    xlsx_of(
        &server.path("far.xlsx"),
        None,
        far_column_sheet("BXX", 9000),
    );
    assert!(std::fs::metadata(server.path("far.xlsx")).unwrap().len() < 200_000);
    for (tool, arguments) in [
        ("vector_info", json!({"input": "far.xlsx"})),
        (
            "points_from_table",
            json!({"input": "far.xlsx", "output": "p.gpkg", "x": "x", "y": "y",
                   "crs": "EPSG:4326"}),
        ),
    ] {
        let refused = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&refused), "{}", text(&refused));
        assert!(
            text(&refused).contains("18002000 cells")
                && text(&refused).contains("GDAL_MCP_TABLE_MAX_CELLS"),
            "{}",
            text(&refused)
        );
    }
    assert!(!server.path("p.gpkg").exists());
    // The clean twin: an ordinary wide sheet, 9,000 rows of 50 filled columns.
    let columns: Vec<String> = (0..50)
        .map(|c| {
            let c = c as u8;
            if c < 26 {
                ((b'A' + c) as char).to_string()
            } else {
                format!("A{}", (b'A' + c - 26) as char)
            }
        })
        .collect();
    let mut sheet = String::from(
        "<?xml version=\"1.0\"?><worksheet xmlns=\"http://schemas.openxmlformats.org/\
         spreadsheetml/2006/main\"><sheetData><row r=\"1\">",
    );
    for (j, column) in columns.iter().enumerate() {
        let name = match j {
            0 => "x".to_string(),
            1 => "y".to_string(),
            _ => format!("c{j}"),
        };
        sheet.push_str(&format!(
            "<c r=\"{column}1\" t=\"inlineStr\"><is><t>{name}</t></is></c>"
        ));
    }
    sheet.push_str("</row>");
    for i in 2..9002 {
        sheet.push_str(&format!("<row r=\"{i}\">"));
        for (j, column) in columns.iter().enumerate() {
            let value = if j < 2 { 10 + j } else { i + j };
            sheet.push_str(&format!("<c r=\"{column}{i}\"><v>{value}</v></c>"));
        }
        sheet.push_str("</row>");
    }
    sheet.push_str("</sheetData></worksheet>");
    xlsx_of(&server.path("wide.xlsx"), None, sheet);
    let info = server
        .call("vector_info", json!({"input": "wide.xlsx"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let points = server
        .call(
            "points_from_table",
            json!({"input": "wide.xlsx", "output": "p.gpkg", "x": "x", "y": "y",
                   "crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&points), "{}", text(&points));
    assert!(text(&points).contains("9000"), "{}", text(&points));
    still_serves(&server).await;
}

/// A KML document of `placemarks` point placemarks.
fn kml_of_points(placemarks: usize) -> String {
    let mut text = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><kml xmlns=\"http://www.opengis.net/kml/2.2\">\
         <Document>",
    );
    for i in 0..placemarks {
        text.push_str(&format!(
            "<Placemark><Point><coordinates>{}.25,{}.5</coordinates></Point></Placemark>",
            i % 170,
            i % 80
        ));
    }
    text.push_str("</Document></kml>");
    text
}

/// Regression, issue 21 attack round 8, R8-7: LIBKML parses a KML document whole into a tree
/// about 15 times its text, so a 12 MB KMZ of 100 MiB of point placemarks (inside every zip
/// budget) took one `vector_info` to 1.58 GB, and read-only calls reserved nothing from the
/// shared memory budget. The tree is estimated from the document's elements and text before
/// the open: above `GDAL_MCP_KML_MAX_MEMORY_BYTES` (default 512 MiB) it is refused, and below
/// it the estimate is taken from the shared budget for the call (here 32 MiB, so a plain KML
/// estimated at about 50 MB is refused as memory, naming `GDAL_MCP_MEMORY_BUDGET_BYTES`). The
/// clean twin, a KML and a KMZ of 2,000 placemarks, opens.
#[tokio::test]
async fn r8_7_a_kml_tree_is_budgeted_before_the_open() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".into(),
                (32u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let kmz = |name: &str, placemarks: usize| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("doc.kml"), kml_of_points(placemarks)).unwrap();
        let status = std::process::Command::new("zip")
            .current_dir(dir.path())
            .args(["-q"])
            .arg(server.path(name))
            .arg("doc.kml")
            .status()
            .unwrap();
        assert!(status.success());
    };
    // 600,000 placemarks: 45 MB of text, a KMZ of a few MB.
    kmz("big.kmz", 600_000);
    let refused = server
        .call("vector_info", json!({"input": "big.kmz"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("600001 features")
            && text(&refused).contains("GDAL_MCP_KML_MAX_MEMORY_BYTES"),
        "{}",
        text(&refused)
    );
    // 40,000 placemarks, under the KML budget, over this server's memory budget.
    std::fs::write(server.path("mid.kml"), kml_of_points(40_000)).unwrap();
    let refused = server
        .call("vector_info", json!({"input": "mid.kml"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("GDAL_MCP_MEMORY_BUDGET_BYTES"),
        "{}",
        text(&refused)
    );
    // The clean twins.
    std::fs::write(server.path("ok.kml"), kml_of_points(2_000)).unwrap();
    kmz("ok.kmz", 2_000);
    for name in ["ok.kml", "ok.kmz"] {
        let info = server
            .call("vector_info", json!({"input": name}))
            .await
            .unwrap();
        assert!(!is_error(&info), "{name}: {}", text(&info));
        assert!(text(&info).contains("2000"), "{name}: {}", text(&info));
    }
    still_serves(&server).await;
}

/// A GeoJSON FeatureCollection of one feature, a MultiPoint of `pairs` `[0,0]` pairs.
fn geojson_multipoint(pairs: usize) -> String {
    format!(
        r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{}},"geometry":{{"type":"MultiPoint","coordinates":[{}]}}}}]}}"#,
        vec!["[0,0]"; pairs].join(",")
    )
}

/// Regression, issue 21 attack round 9, R9-11: one GeoJSON feature, a MultiPoint of 1.19 M
/// pairs (7.1 MB of text), took a read-only `vector_info` to 806 MB in GDAL's json-c tree,
/// outside every budget. The tree is estimated before the open: above
/// `GDAL_MCP_GEOJSON_MAX_MEMORY_BYTES` (default 512 MiB) the file is refused naming the
/// largest feature, the figure and the variable; below it the estimate is taken from the
/// shared memory budget (here 32 MiB: a lone 120,000-pair feature, read whole, estimated at
/// about 65 MB, is refused as memory). Clean twins: a collection of 60,000 small features
/// (a collection is read feature by feature), a small lone feature.
#[tokio::test]
async fn r9_11_a_geojson_tree_is_budgeted_before_the_open() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".into(),
                (32u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    std::fs::write(server.path("mp7.geojson"), geojson_multipoint(1_190_000)).unwrap();
    let refused = server
        .call("vector_info", json!({"input": "mp7.geojson"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("largest feature")
            && text(&refused).contains("GDAL_MCP_GEOJSON_MAX_MEMORY_BYTES"),
        "{}",
        text(&refused)
    );
    // A lone feature (read whole), under the JSON budget, over this server's memory budget.
    let lone = format!(
        r#"{{"type":"Feature","properties":{{}},"geometry":{{"type":"MultiPoint","coordinates":[{}]}}}}"#,
        vec!["[0,0]"; 120_000].join(",")
    );
    std::fs::write(server.path("lone.json"), lone).unwrap();
    let refused = server
        .call("vector_info", json!({"input": "lone.json"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("GDAL_MCP_MEMORY_BUDGET_BYTES"),
        "{}",
        text(&refused)
    );
    // The clean twins: 60,000 small features (about 6 MB), and a lone feature of 2,000 pairs.
    let feature = r#"{"type":"Feature","properties":{"id":1,"name":"a point"},"geometry":{"type":"Point","coordinates":[13.4,52.5]}}"#;
    std::fs::write(
        server.path("many.geojson"),
        format!(
            r#"{{"type":"FeatureCollection","features":[{}]}}"#,
            vec![feature; 60_000].join(",\n")
        ),
    )
    .unwrap();
    std::fs::write(server.path("small.geojson"), geojson_multipoint(2_000)).unwrap();
    for (name, count) in [("many.geojson", "60000"), ("small.geojson", "1")] {
        let info = server
            .call("vector_info", json!({"input": name}))
            .await
            .unwrap();
        assert!(!is_error(&info), "{name}: {}", text(&info));
        assert!(
            structured(&info)["layers"][0]["feature_count"] == json!(count.parse::<u64>().unwrap()),
            "{name}: {}",
            text(&info)
        );
    }
    still_serves(&server).await;
}

/// Regression (attack round 13, R13-2, R13-3, R13-10): GDAL reads a VRT source's name with
/// `CPLGetXMLValue`, which finds a `SourceFilename` *attribute* as well as an element. The
/// walk matched elements only, so a mask band's `<SimpleSource SourceFilename="/outside">` (or
/// a raw mask band's `SourceFilename` attribute) copied an outside file into the workspace's
/// `.msk`, and a band source given so as a FIFO inside wedged read-only workers until the pool
/// closed. Both are now refused before the open, the read-only pool keeps answering, and the
/// clean twin (the element form, inside) still converts.
#[tokio::test]
async fn r13_2_vrt_source_names_given_as_attributes_are_checked() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let ws = server.workspace.path().to_path_buf();
    let band = r#"<VRTRasterBand dataType="Float32" band="1"><SimpleSource><SourceFilename relativeToVRT="1">dem.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>"#;
    let document = |body: &str| {
        format!(r#"<VRTDataset rasterXSize="111" rasterYSize="111">{body}</VRTDataset>"#)
    };
    let simple_mask = |source: &str| {
        format!(
            r#"<MaskBand><VRTRasterBand dataType="Byte"><SimpleSource SourceFilename="{source}"><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></MaskBand>"#
        )
    };
    let raw_mask = |source: &str| {
        format!(
            r#"<MaskBand><VRTRasterBand dataType="Byte" subClass="VRTRawRasterBand" SourceFilename="{source}"><ImageOffset>0</ImageOffset><PixelOffset>1</PixelOffset><LineOffset>111</LineOffset></VRTRasterBand></MaskBand>"#
        )
    };
    std::fs::write(
        ws.join("a.vrt"),
        document(&format!(
            "{band}{}",
            simple_mask(&decoy.path("outside.tif"))
        )),
    )
    .unwrap();
    std::fs::write(
        ws.join("b.vrt"),
        document(&format!("{band}{}", raw_mask(&decoy.path("secret.txt")))),
    )
    .unwrap();
    for input in ["a.vrt", "b.vrt"] {
        for (tool, arguments) in [
            (
                "raster_convert",
                json!({"input": input, "output": format!("{input}_out.tif")}),
            ),
            ("raster_info", json!({"input": input})),
            ("raster_stats", json!({"input": input})),
        ] {
            refused_with(&server, tool, arguments, "outside every workspace").await;
        }
        assert!(!ws.join(format!("{input}_out.tif")).exists());
        assert!(!ws.join(format!("{input}_out.tif.msk")).exists());
    }

    // A FIFO inside named by a band's `SourceFilename` attribute: refused at once, by every
    // call, and the read-only pool still answers afterwards.
    // (In a folder of its own: a FIFO in an input's folder refuses that input, R13-15.)
    std::fs::create_dir(ws.join("pipes")).unwrap();
    run("mkfifo", &[&ws.join("pipes/fifo").display().to_string()]);
    std::fs::write(
        ws.join("fifo.vrt"),
        document(&format!(
            r#"<VRTRasterBand dataType="Byte" band="1"><SimpleSource SourceFilename="{}"><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>"#,
            ws.join("pipes/fifo").display()
        )),
    )
    .unwrap();
    let calls = (0..12)
        .map(|_| server.call("raster_info", json!({"input": "fifo.vrt"})))
        .collect();
    all_refused_at_once(calls, &["not a regular file"]).await;
    answers(&server, "raster_info", json!({"input": "dem.tif"})).await;

    // The clean twin: the mask's source as an element, inside; converted with its mask.
    std::fs::write(
        ws.join("clean.vrt"),
        document(&format!(
            r#"{band}<MaskBand><VRTRasterBand dataType="Byte"><SimpleSource><SourceFilename relativeToVRT="1">dem.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></MaskBand>"#
        )),
    )
    .unwrap();
    answers(
        &server,
        "raster_convert",
        json!({"input": "clean.vrt", "output": "clean_out.tif"}),
    )
    .await;
    assert!(ws.join("clean_out.tif").exists());
    decoy.assert_untouched();
}

/// Regression (attack round 13, R13-15): GDAL's imagery metadata readers open files beside a
/// raster under fixed names (SPOT's `METADATA.DIM`), not the raster's, so one FIFO so named
/// made every GeoTIFF of its folder block to the open deadline, and eleven such calls closed
/// the read-only pool for every folder. A FIFO anywhere in an input's folder (or a VRT
/// source's) is now refused before any worker opens anything, the pool keeps answering, and
/// the clean twin (the same rasters in a folder without one) opens.
#[tokio::test]
async fn r13_15_a_fifo_in_an_inputs_folder_is_refused_before_the_open() {
    let server = start(&["dem.tif"]).await;
    let ws = server.workspace.path().to_path_buf();
    for folder in ["a", "b"] {
        std::fs::create_dir(ws.join(folder)).unwrap();
        for name in ["x.tif", "y.tif"] {
            std::fs::copy(ws.join("dem.tif"), ws.join(folder).join(name)).unwrap();
        }
    }
    run(
        "mkfifo",
        &[&ws.join("a/METADATA.DIM").display().to_string()],
    );
    std::fs::write(
        ws.join("b/over_a.vrt"),
        r#"<VRTDataset rasterXSize="111" rasterYSize="111"><VRTRasterBand dataType="Float32" band="1"><SimpleSource><SourceFilename relativeToVRT="1">../a/x.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"#,
    )
    .unwrap();
    let mut calls = Vec::new();
    for _ in 0..6 {
        for input in ["a/x.tif", "a/y.tif", "b/over_a.vrt"] {
            calls.push(server.call("raster_info", json!({"input": input})));
        }
    }
    all_refused_at_once(calls, &["METADATA.DIM", "not a regular file"]).await;
    for input in ["b/x.tif", "b/y.tif", "dem.tif"] {
        answers(&server, "raster_info", json!({"input": input})).await;
    }
}

/// Regression (attack round 13, R13-15's links): the folder rule skipped every link in an
/// input's folder, so `METADATA.DIM` as a link to a FIFO (inside the workspace or outside it)
/// still reached GDAL's imagery metadata reader, which opens that name beside a GeoTIFF and
/// blocks to the open deadline; so did a link named like `<stem>_rpc.txt`. A link is judged
/// by what it points to (stat, which opens nothing): each such input is refused at once,
/// naming the link, the pool keeps answering and nothing outside is touched. The clean twin:
/// `METADATA.DIM` as a link to a regular file inside, and the raster opens.
#[tokio::test]
async fn r13_15_a_link_to_a_fifo_in_an_inputs_folder_is_refused_before_the_open() {
    let decoy = Decoy::new();
    let outside = tempfile::tempdir().unwrap();
    let outside_fifo = outside.path().join("fifo");
    run("mkfifo", &[&outside_fifo.display().to_string()]);
    let server = start(&["dem.tif"]).await;
    let ws = server.workspace.path().to_path_buf();
    std::fs::create_dir(ws.join("pipes")).unwrap();
    run("mkfifo", &[&ws.join("pipes/fifo").display().to_string()]);
    std::fs::create_dir(ws.join("meta")).unwrap();
    std::fs::write(ws.join("meta/notes.txt"), "plain text\n").unwrap();
    let cases = [
        ("inside", "METADATA.DIM", ws.join("pipes/fifo")),
        ("outside", "METADATA.DIM", outside_fifo.clone()),
        ("near", "x_rpc.txt", ws.join("pipes/fifo")),
        ("clean", "METADATA.DIM", ws.join("meta/notes.txt")),
    ];
    for (folder, link, target) in &cases {
        std::fs::create_dir(ws.join(folder)).unwrap();
        std::fs::copy(ws.join("dem.tif"), ws.join(folder).join("x.tif")).unwrap();
        std::os::unix::fs::symlink(target, ws.join(folder).join(link)).unwrap();
    }
    // A file GDAL lists that no check saw counts as changed during the open when its change
    // time is within 50 ms of the checks (the clean twin's link target is one).
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (folder, link, _) in &cases[..3] {
        let calls = (0..3)
            .map(|_| server.call("raster_info", json!({"input": format!("{folder}/x.tif")})))
            .collect();
        all_refused_at_once(calls, &[link, "not a regular file"]).await;
    }
    answers(&server, "raster_info", json!({"input": "clean/x.tif"})).await;
    answers(&server, "raster_info", json!({"input": "dem.tif"})).await;
    decoy.assert_untouched();
}

/// Call `tool` and assert that it is refused with a message holding `fragment`.
async fn refused_with(server: &Server, tool: &str, arguments: Value, fragment: &str) {
    let result = server.call(tool, arguments.clone()).await.unwrap();
    let message = error_message(&result);
    assert!(
        is_error(&result) && message.contains(fragment),
        "{tool} {arguments}: {}",
        text(&result)
    );
}

/// Call `tool` and assert that it answers without error.
async fn answers(server: &Server, tool: &str, arguments: Value) {
    let result = server.call(tool, arguments.clone()).await.unwrap();
    assert!(!is_error(&result), "{tool} {arguments}: {}", text(&result));
}

/// Send `calls` at once; every one must be answered within 30 s, refused with `fragments`.
async fn all_refused_at_once(
    calls: Vec<impl std::future::Future<Output = anyhow::Result<rmcp::model::CallToolResult>>>,
    fragments: &[&str],
) {
    let answers = tokio::time::timeout(Duration::from_secs(30), futures::future::join_all(calls))
        .await
        .expect("every call answered at once, none blocked on a FIFO");
    for answer in answers {
        let answer = answer.unwrap();
        let message = error_message(&answer);
        assert!(
            is_error(&answer) && fragments.iter().all(|f| message.contains(f)),
            "{}",
            text(&answer)
        );
    }
}

/// The files of a SQLite database and its log/index beside it, name -> bytes.
fn sqlite_files(dir: &Path, name: &str) -> BTreeMap<String, Vec<u8>> {
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .filter_map(|suffix| {
            let file = format!("{name}{suffix}");
            std::fs::read(dir.join(&file))
                .ok()
                .map(|bytes| (file, bytes))
        })
        .collect()
}

/// Attack round 12, R12-5: GDAL 3.6 closes a SQLite database it read and, when `-wal` is there,
/// reopens it read-write for a dummy query; that last close checkpointed the log into the
/// input and deleted `-wal` and `-shm`, so a read-only `vector_info` rewrote its input (its
/// SHA-256 changed) and then said the input changed while it was read. The fixture: a
/// GeoPackage whose one row has `v = 1` in the file and `v = 2` committed in its log only
/// (written with SQLite, `journal_mode=WAL`, `wal_autocheckpoint=0`, closed without a
/// checkpoint). Read-only tools and a conversion answer from the log (`v = 2`), and the
/// database, its `-wal` and its `-shm` keep every byte. A log whose `-shm` is missing is
/// refused, naming the checkpoint, and nothing is created beside it. The clean twin: the same
/// database without a log reads `v = 1` and stays as it was.
#[tokio::test]
async fn r12_5_a_read_of_a_wal_geopackage_writes_nothing_and_sees_the_log() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let geojson = server.path("x.geojson");
    std::fs::write(
        &geojson,
        json!({"type": "FeatureCollection", "features": [
            {"type": "Feature", "properties": {"v": 1},
             "geometry": {"type": "Point", "coordinates": [16.0, 45.0]}}]})
        .to_string(),
    )
    .unwrap();
    for name in ["x.gpkg", "plain.gpkg"] {
        let status = std::process::Command::new("ogr2ogr")
            .args(["-q", "-f", "GPKG", "-nln", "p"])
            .arg(server.path(name))
            .arg(&geojson)
            .status()
            .unwrap();
        assert!(status.success());
    }
    std::fs::remove_file(&geojson).unwrap();
    {
        let connection = rusqlite::Connection::open(server.path("x.gpkg")).unwrap();
        connection
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .unwrap();
        // GeoPackage's R-tree triggers call GDAL's SQL functions; `v` is no geometry.
        connection
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
                false,
            )
            .unwrap();
        let mode: String = connection
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        connection
            .execute_batch("PRAGMA wal_autocheckpoint=0; UPDATE p SET v = 2;")
            .unwrap();
    }
    let dir = server.workspace.path().to_path_buf();
    let before = sqlite_files(&dir, "x.gpkg");
    assert!(
        before.contains_key("x.gpkg-wal") && before.contains_key("x.gpkg-shm"),
        "the log is left beside the database: {:?}",
        before.keys()
    );
    assert!(before["x.gpkg-wal"].len() > 32, "the log holds frames");
    // The log without its index: a copy of the database and its log only.
    std::fs::copy(server.path("x.gpkg"), server.path("y.gpkg")).unwrap();
    std::fs::copy(server.path("x.gpkg-wal"), server.path("y.gpkg-wal")).unwrap();
    let plain_before = sqlite_files(&dir, "plain.gpkg");

    let info = server
        .call("vector_info", json!({"input": "x.gpkg"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let query = |input: &'static str| {
        let server = &server;
        async move {
            server
                .call(
                    "vector_query",
                    json!({"input": input, "layer": "p", "where": "v >= 1", "fields": ["v"]}),
                )
                .await
                .unwrap()
        }
    };
    let queried = query("x.gpkg").await;
    assert!(!is_error(&queried), "{}", text(&queried));
    let content = structured(&queried);
    assert_eq!(
        content["features"][0]["attributes"],
        json!({"v": 2}),
        "the row the log holds: {content}"
    );
    let converted = gdal_mcp_tests::call_justified(
        &server,
        "vector_convert",
        json!({"input": "x.gpkg", "output": "x_copy.geojson"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&converted.result), "{}", text(&converted.result));
    let copy: Value =
        serde_json::from_slice(&std::fs::read(server.path("x_copy.geojson")).unwrap()).unwrap();
    assert_eq!(copy["features"][0]["properties"]["v"], json!(2), "{copy}");
    let after = sqlite_files(&dir, "x.gpkg");
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "no file of the database went or came"
    );
    for (name, bytes) in &before {
        assert!(after[name] == *bytes, "{name} changed on a read");
    }

    let refused = server
        .call("vector_info", json!({"input": "y.gpkg"}))
        .await
        .unwrap();
    assert!(is_error(&refused));
    let said = text(&refused);
    assert!(
        said.contains("write-ahead-log")
            && said.contains("wal_checkpoint")
            && said.contains("-shm"),
        "{said}"
    );
    assert!(!server.path("y.gpkg-shm").exists(), "no index is created");
    assert!(server.path("y.gpkg-wal").exists(), "the log stays");

    // Clean twin: no log; read as it is, unchanged.
    let plain = query("plain.gpkg").await;
    assert!(!is_error(&plain), "{}", text(&plain));
    assert_eq!(
        structured(&plain)["features"][0]["attributes"],
        json!({"v": 1})
    );
    assert_eq!(sqlite_files(&dir, "plain.gpkg"), plain_before);
}

/// Regression (attack round 14, R14-1): GDAL's XML parser keeps a literal CR inside a source
/// name where a conforming parser turned it into LF, so a mask source `d\r/secret.tif` named
/// an inside folder `d\n/` to the host and, to GDAL, a link `d\r` to an outside folder: the
/// output's `.msk` held the outside cells. Names are now read by GDAL's own parser and checked
/// byte for byte; the twin through the inside folder converts.
#[tokio::test]
async fn r14_1_a_source_name_is_checked_byte_for_byte() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let ws = server.workspace.path().to_path_buf();
    let outside = std::path::Path::new(&decoy.path("outside.tif"))
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::create_dir(ws.join("d\n")).unwrap();
    std::fs::copy(ws.join("dem.tif"), ws.join("d\n/outside.tif")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("d\r")).unwrap();
    let vrt = |folder: &str| {
        format!(
            "<VRTDataset rasterXSize=\"111\" rasterYSize=\"111\"><VRTRasterBand dataType=\"Float32\" band=\"1\"><SimpleSource><SourceFilename relativeToVRT=\"1\">dem.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand><MaskBand><VRTRasterBand dataType=\"Byte\"><SimpleSource><SourceFilename relativeToVRT=\"1\">{folder}/outside.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></MaskBand></VRTDataset>"
        )
    };
    std::fs::write(ws.join("cr.vrt"), vrt("d\r")).unwrap();
    refused_with(
        &server,
        "raster_convert",
        json!({"input": "cr.vrt", "output": "cr_out.tif"}),
        "outside every workspace",
    )
    .await;
    assert!(!ws.join("cr_out.tif.msk").exists());
    std::fs::write(ws.join("lf.vrt"), vrt("d\n")).unwrap();
    answers(
        &server,
        "raster_convert",
        json!({"input": "lf.vrt", "output": "lf_out.tif"}),
    )
    .await;
    decoy.assert_untouched();
}

/// Regression (attack round 14, R14-8, R14-9, R14-12, R14-13): four carriers of what GDAL
/// reads that the host had not read: a warped VRT's `<DestinationDataset>` (opened for
/// update: `raster_info` rewrote an outside GeoPackage), a `METADATA.DIM` of 9,990 nested
/// elements beside a clean GeoTIFF (a stack overflow aborted the server), a GML schema's
/// `xs:include` of an outside schema (its field names were answered), and a GeoTIFF's own
/// `GEOLOCATION` metadata naming outside arrays. Each is refused before the open, the server
/// keeps answering, the outside files stay untouched, and each clean twin opens.
#[tokio::test]
async fn r14_carriers_of_references_gdal_reads_are_read_first() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    let ws = server.workspace.path().to_path_buf();

    // R14-8.
    std::fs::write(
        ws.join("dst.vrt"),
        format!(
            "<VRTDataset rasterXSize=\"10\" rasterYSize=\"10\" subClass=\"VRTWarpedDataset\"><GDALWarpOptions><SourceDataset relativeToVRT=\"1\">dem.tif</SourceDataset><DestinationDataset>{}</DestinationDataset></GDALWarpOptions></VRTDataset>",
            decoy.path("outside.tif")
        ),
    )
    .unwrap();
    refused_with(
        &server,
        "raster_info",
        json!({"input": "dst.vrt"}),
        "DestinationDataset",
    )
    .await;

    // R14-9: in a folder of its own; the twin of ordinary depth opens.
    for (folder, depth) in [("deep", 9_990), ("shallow", 10)] {
        std::fs::create_dir(ws.join(folder)).unwrap();
        std::fs::copy(ws.join("dem.tif"), ws.join(folder).join("x.tif")).unwrap();
        std::fs::write(
            ws.join(folder).join("METADATA.DIM"),
            format!(
                "<Dimap_Document>{}x{}</Dimap_Document>",
                "<a>".repeat(depth),
                "</a>".repeat(depth)
            ),
        )
        .unwrap();
    }
    refused_with(
        &server,
        "raster_info",
        json!({"input": "deep/x.tif"}),
        "levels deep",
    )
    .await;
    answers(&server, "raster_info", json!({"input": "shallow/x.tif"})).await;

    // R14-12.
    std::fs::create_dir(ws.join("gml")).unwrap();
    std::fs::write(
        ws.join("gml/x.gml"),
        "<?xml version=\"1.0\"?><ogr:FeatureCollection xmlns:ogr=\"http://ogr.maptools.org/\" xmlns:gml=\"http://www.opengis.net/gml\"><gml:featureMember><ogr:pts fid=\"pts.0\"><ogr:geometryProperty><gml:Point><gml:coordinates>1,2</gml:coordinates></gml:Point></ogr:geometryProperty></ogr:pts></gml:featureMember></ogr:FeatureCollection>",
    )
    .unwrap();
    std::fs::write(
        ws.join("gml/x.xsd"),
        format!(
            "<xs:schema xmlns:xs=\"http://www.w3.org/2001/XMLSchema\"><xs:include schemaLocation=\"{}\"/></xs:schema>",
            decoy.path("outside.tif")
        ),
    )
    .unwrap();
    refused_with(
        &server,
        "vector_info",
        json!({"input": "gml/x.gml"}),
        "GML schema",
    )
    .await;

    // R14-13: a GeoTIFF whose own metadata tag names outside geolocation arrays.
    {
        use gdal::Metadata;
        let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
        let mut dataset = driver
            .create_with_band_type::<u8, _>(ws.join("geo.tif"), 4, 4, 1)
            .unwrap();
        for (key, value) in [
            ("X_DATASET", decoy.path("outside.tif")),
            ("Y_DATASET", decoy.path("outside.tif")),
            ("X_BAND", "1".to_string()),
            ("Y_BAND", "1".to_string()),
        ] {
            dataset
                .set_metadata_item(key, &value, "GEOLOCATION")
                .unwrap();
        }
    }
    refused_with(
        &server,
        "raster_info",
        json!({"input": "geo.tif"}),
        "geolocation array",
    )
    .await;

    still_serves(&server).await;
    decoy.assert_untouched();
}

/// Known limit of rounds 12 and 13 (R12-5's twin, a crash's leftover): a GeoPackage beside a
/// **hot rollback journal** (`x.gpkg-journal` of a write that never committed: its writer
/// died). Measured with GDAL 3.6.2 and SQLite 3.40.1: a read-only open fails with
/// `SQLITE_READONLY_ROLLBACK` ("attempt to write a readonly database") and writes nothing; an
/// update open rolls the journal back (the database rewritten, the journal deleted). The
/// server answered with SQLite's bare words; it now refuses naming the journal and the fix,
/// for a read and for a conversion, and the database, its journal and an outside decoy keep
/// every byte. The fixture is a real hot journal: 2,000 rows updated in a transaction with a
/// two-page cache (so pages spill into the database before the commit), both files copied
/// while the transaction is open. The clean twin: the same copy rolled back by SQLite itself
/// (opened for writing once, as the message says) reads `v = 1` everywhere.
#[tokio::test]
async fn r12_5_a_hot_rollback_journal_is_refused_naming_the_fix_and_nothing_is_written() {
    let decoy = Decoy::new();
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let csv = scratch.path().join("p.csv");
    let mut rows = String::from("id,v,WKT\n");
    for i in 0..2000 {
        rows.push_str(&format!(
            "{i},1,\"POINT ({} 45)\"\n",
            16.0 + f64::from(i) * 1e-4
        ));
    }
    std::fs::write(&csv, rows).unwrap();
    let source = scratch.path().join("x.gpkg");
    run(
        "ogr2ogr",
        &[
            "-q",
            "-f",
            "GPKG",
            "-nln",
            "p",
            "-oo",
            "GEOM_POSSIBLE_NAMES=WKT",
            "-oo",
            "AUTODETECT_TYPE=YES",
            "-a_srs",
            "EPSG:4326",
            &source.display().to_string(),
            &csv.display().to_string(),
        ],
    );
    {
        let connection = rusqlite::Connection::open(&source).unwrap();
        // GeoPackage's R-tree triggers call GDAL's SQL functions; `v` is no geometry.
        connection
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
                false,
            )
            .unwrap();
        connection
            .execute_batch(
                "PRAGMA journal_mode=DELETE; PRAGMA cache_size=2; BEGIN; UPDATE p SET v = 99;",
            )
            .unwrap();
        for suffix in ["", "-journal"] {
            std::fs::copy(
                scratch.path().join(format!("x.gpkg{suffix}")),
                server.path(&format!("x.gpkg{suffix}")),
            )
            .unwrap();
        }
        // The writer goes away without committing: its own copy is rolled back.
    }
    let dir = server.workspace.path().to_path_buf();
    let before = sqlite_files(&dir, "x.gpkg");
    assert!(before["x.gpkg-journal"].len() > 512, "{:?}", before.keys());
    for (tool, arguments) in [
        ("vector_info", json!({"input": "x.gpkg"})),
        (
            "vector_convert",
            json!({"input": "x.gpkg", "output": "o.geojson"}),
        ),
    ] {
        let result = server.call(tool, arguments).await.unwrap();
        let message = error_message(&result);
        assert!(is_error(&result), "{tool}: {}", text(&result));
        assert!(
            message.contains("rollback journal")
                && message.contains("x.gpkg-journal")
                && message.contains("PRAGMA integrity_check"),
            "{tool}: {message}"
        );
        assert_eq!(
            sqlite_files(&dir, "x.gpkg"),
            before,
            "{tool} wrote the input"
        );
    }
    assert!(!server.path("o.geojson").exists());
    decoy.assert_untouched();
    // The clean twin: rolled back by SQLite (the fix the message names), it reads as it was
    // committed, v = 1 in every row.
    {
        let connection = rusqlite::Connection::open(server.path("x.gpkg")).unwrap();
        let n: i64 = connection
            .query_row("PRAGMA integrity_check", [], |_| Ok(0))
            .and_then(|_| {
                connection.query_row("SELECT count(*) FROM p WHERE v = 1", [], |r| r.get(0))
            })
            .unwrap();
        assert_eq!(n, 2000);
    }
    assert!(
        !server.path("x.gpkg-journal").exists(),
        "the journal was rolled back"
    );
    let rolled = sqlite_files(&dir, "x.gpkg");
    let info = server
        .call("vector_info", json!({"input": "x.gpkg"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    assert!(text(&info).contains("2000"), "{}", text(&info));
    assert_eq!(sqlite_files(&dir, "x.gpkg"), rolled);
}

/// A netCDF-4 file holding one Float32 array `v` over `dims` (name, length), chunked
/// `chunk` and deflated, with one value written (the rest never written: the file stays
/// small whatever the lengths). Written by GDAL's Python bindings in a process of its own
/// (`python3-gdal` comes with Debian's `gdal-bin`): the file is closed, and its HDF5 lock
/// released, before the server looks at it.
fn netcdf4(path: &std::path::Path, dims: &[(&str, u64)], chunk: &[u64]) {
    let script = r#"
import sys, struct, json
from osgeo import gdal
gdal.UseExceptions()
path, dims, chunk = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ds = gdal.GetDriverByName('netCDF').CreateMultiDimensional(path)
root = ds.GetRootGroup()
handles = [root.CreateDimension(name, None, None, size) for name, size in dims]
array = root.CreateMDArray('v', handles, gdal.ExtendedDataType.Create(gdal.GDT_Float32),
                           ['BLOCKSIZE=' + ','.join(str(c) for c in chunk), 'COMPRESS=DEFLATE'])
array.Write(struct.pack('f', 1.0), [0] * len(dims), [1] * len(dims))
del array, handles, root, ds
"#;
    let dims = serde_json::to_string(dims).unwrap();
    let chunk = serde_json::to_string(chunk).unwrap();
    let status = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script, path.to_str().unwrap(), &dims, &chunk])
        .status()
        .unwrap();
    assert!(status.success(), "writing {}", path.display());
}

/// Attack round 15, R15-A1 to R15-A4: small netCDF-4 files whose HDF5 layout makes GDAL hold
/// or walk far more than the budgets: a 1 GiB deflate chunk (libhdf5 inflates a whole chunk
/// for any cell: `raster_info` peaked at 2,219 MB, and four calls held the read-only workers
/// for two minutes), and a one-dimensional variable of 200 M values (GDAL's open reads it
/// whole: 6.4 GB at 800 M and the process aborted under `RLIMIT_AS`; a CF geometry container
/// kept the open looping). Each is refused before GDAL opens it, naming the budget; the
/// twins, the same array chunked one band at a time and a short one-dimensional variable,
/// are read.
#[tokio::test]
async fn r15_a_netcdf4_chunks_and_variables_beyond_the_budgets_are_refused_before_the_open() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    netcdf4(
        &server.path("big_chunk.nc"),
        &[("time", 256), ("y", 1024), ("x", 1024)],
        &[256, 1024, 1024],
    );
    netcdf4(
        &server.path("band_chunk.nc"),
        &[("time", 256), ("y", 1024), ("x", 1024)],
        &[1, 1024, 1024],
    );
    netcdf4(&server.path("long.nc"), &[("n", 200_000_000)], &[4_000_000]);
    netcdf4(&server.path("short.nc"), &[("n", 1000)], &[1000]);
    for (input, tool, needle) in [
        ("big_chunk.nc", "raster_info", "a chunk of 1024 MB"),
        ("long.nc", "vector_info", "200000000 values"),
    ] {
        let started = std::time::Instant::now();
        let result = server.call(tool, json!({"input": input})).await.unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert!(
            text(&result).contains(needle) && text(&result).contains("budget"),
            "{input}: {}",
            text(&result)
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{input}"
        );
    }
    let twin = server
        .call("raster_info", json!({"input": "band_chunk.nc"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    assert!(!text(&twin).contains("budget"), "{}", text(&twin));
    let short = server
        .call("vector_info", json!({"input": "short.nc"}))
        .await
        .unwrap();
    assert!(!text(&short).contains("budget"), "{}", text(&short));
}

/// A 4 x 4 Byte GeoTIFF of class codes, georeferenced in WGS 84 at 10° E 45.2° N when
/// `georeferenced`, else with no georeferencing at all.
fn classes(path: &Path, georeferenced: bool) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver
        .create_with_band_type::<u8, _>(path, 4, 4, 1)
        .unwrap();
    if georeferenced {
        dataset
            .set_geo_transform(&[10.0, 0.01, 0.0, 45.2, 0.0, -0.01])
            .unwrap();
        dataset
            .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(4326).unwrap())
            .unwrap();
    }
    let mut band = dataset.rasterband(1).unwrap();
    band.write(
        (0, 0),
        (4, 4),
        &mut gdal::raster::Buffer::new((4, 4), (0..16u8).map(|v| v % 3 + 1).collect()),
    )
    .unwrap();
}

/// Attack round 15, R15-C14: an overwrite moved in the new file and left the old output's
/// `o.png.aux.xml` beside it, so a PNG with no georeferencing read as WGS 84 at 10° E 45.2° N
/// (this server's `raster_info` included) while its result said `crs: null`. The replaced
/// output's own sidecars are removed with `overwrite`, and without it a stale one refuses the
/// call naming it; a shapefile's `.prj` beside another dataset's stem (`o.prj` beside
/// `o.tif`) is not touched.
#[tokio::test]
async fn r15_c14_an_overwrite_leaves_no_sidecar_of_the_output_it_replaces() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    classes(&server.path("geo.tif"), true);
    classes(&server.path("nogeo.tif"), false);
    std::fs::write(server.path("o.prj"), "not ours").unwrap();
    let convert = |input: &str, overwrite: bool| json!({"input": input, "output": "o.png", "format": "PNG", "overwrite": overwrite});
    let first =
        gdal_mcp_tests::call_justified(&server, "raster_convert", convert("geo.tif", false))
            .await
            .unwrap()
            .result;
    assert!(!is_error(&first), "{}", text(&first));
    assert!(
        server.path("o.png.aux.xml").exists(),
        "PNG keeps its CRS in PAM"
    );
    let second =
        gdal_mcp_tests::call_justified(&server, "raster_convert", convert("nogeo.tif", true))
            .await
            .unwrap()
            .result;
    assert!(!is_error(&second), "{}", text(&second));
    assert!(
        !server.path("o.png.aux.xml").exists(),
        "the old PAM file stayed"
    );
    assert!(
        server.path("o.prj").exists(),
        "another dataset's file was removed"
    );
    let info = server
        .call("raster_info", json!({"input": "o.png"}))
        .await
        .unwrap();
    assert_eq!(
        structured(&info)["facts"]["crs"],
        Value::Null,
        "{}",
        text(&info)
    );
    // A stale sidecar with nothing to replace: refused without `overwrite`.
    std::fs::remove_file(server.path("o.png")).unwrap();
    std::fs::write(server.path("o.png.aux.xml"), "<PAMDataset/>").unwrap();
    let stale =
        gdal_mcp_tests::call_justified(&server, "raster_convert", convert("geo.tif", false))
            .await
            .unwrap()
            .result;
    assert!(is_error(&stale), "{}", text(&stale));
    assert!(text(&stale).contains("o.png.aux.xml"), "{}", text(&stale));
    assert!(!server.path("o.png").exists());
}

/// Attack round 15, R15-C11: four calls writing the same new output at once without
/// `overwrite` each checked it did not exist, then renamed, so two or three succeeded and
/// the file held the last. Commits are serialised (and a no-overwrite rename never
/// replaces): exactly one succeeds and the others are refused naming the output.
#[tokio::test]
async fn r15_c11_concurrent_writes_of_one_new_output_succeed_once() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    classes(&server.path("geo.tif"), true);
    for round in 0..3 {
        let output = format!("same{round}.tif");
        let calls = (0..4).map(|_| {
            server.call(
                "raster_convert",
                json!({"input": "geo.tif", "output": output}),
            )
        });
        let results = futures::future::join_all(calls).await;
        let succeeded = results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|r| !is_error(r)))
            .count();
        assert_eq!(succeeded, 1, "round {round}");
    }
}

use gdal_mcp_tests::run_program as cli;

/// The first-IFD entry of TIFF tag `tag` in the little-endian classic TIFF `bytes`: where the
/// entry is, and its value's length and offset.
fn tiff_tag_entry(bytes: &[u8], tag: u16) -> (usize, usize, usize) {
    assert_eq!(&bytes[..4], b"II*\0", "a little-endian classic TIFF");
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let ifd = word(4);
    let count = u16::from_le_bytes(bytes[ifd..ifd + 2].try_into().unwrap()) as usize;
    let entry = (0..count)
        .map(|i| ifd + 2 + 12 * i)
        .find(|e| u16::from_le_bytes(bytes[*e..*e + 2].try_into().unwrap()) == tag)
        .expect("the tag");
    (entry, word(entry + 4), word(entry + 8))
}

/// Rewrite TIFF tag `tag` in the first IFD of the little-endian classic TIFF at `path`: its
/// value becomes `text` (padded with spaces to the value's length, which must hold it) and
/// its type `kind`.
fn rewrite_tiff_text_tag(path: &Path, tag: u16, text: &str, kind: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    let (entry, length, offset) = tiff_tag_entry(&bytes, tag);
    assert!(length > text.len() + 1, "the tag holds {length} bytes");
    let mut value = text.as_bytes().to_vec();
    value.resize(length - 1, b' ');
    value.push(0);
    bytes[offset..offset + length].copy_from_slice(&value);
    bytes[entry + 2..entry + 4].copy_from_slice(&kind.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// [`rewrite_tiff_text_tag`] with the tag typed SHORT (3): `text` one character a 16-bit
/// value, in the bytes the ASCII value held (half as many characters).
fn rewrite_tiff_short_tag(path: &Path, tag: u16, text: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    let (entry, length, offset) = tiff_tag_entry(&bytes, tag);
    let elements = length / 2;
    assert!(elements > text.len() + 1, "the tag holds {elements} shorts");
    let mut value: Vec<u8> = text.bytes().flat_map(|b| [b, 0]).collect();
    value.resize((elements - 1) * 2, 0);
    for pair in value.chunks_mut(2).skip(text.len()) {
        pair[0] = b' ';
    }
    value.extend([0, 0]);
    bytes[offset..offset + elements * 2].copy_from_slice(&value);
    bytes[entry + 2..entry + 4].copy_from_slice(&3u16.to_le_bytes());
    bytes[entry + 4..entry + 8].copy_from_slice(&(elements as u32).to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// A SQLite database at `path` built by the system's Python from `statements`.
fn sqlite_database(path: &Path, statements: &[&str]) {
    let script = format!(
        "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nfor s in {statements:?}:\n    c.execute(s)\nc.commit()\n"
    );
    cli("/usr/bin/python3", &["-c", &script, path.to_str().unwrap()]);
}

/// Attack round 16, R16-A1 to R16-A9: what GDAL reads inside an open that no check saw.
/// * A JPEG 2000 whose GMLJP2 box carries features (and a schema including an outside one):
///   GDAL's GML reader ran on every open and answered the outside schema's field names (A1),
///   blocked on a FIFO there (A2), or took 8 GB (A5). Refused before the open; a plain JP2
///   (GDAL's own GMLJP2 georeferencing) is read.
/// * A JP2 whose GDAL metadata box names an outside `OVERVIEW_FILE` (A3): refused before the
///   open, as for a GeoTIFF's metadata tag.
/// * A GML named `.dat` beside a `.xsd` including an outside schema (A4): refused as the
///   `.gml` twin always was.
/// * A SQLite view calling `st_transform`, which takes PROJ strings (A6, A8): refused.
/// * A JSONP-wrapped GeoJSON (A7): estimated as the bare JSON is.
/// * A view joining a 1,000-row table with itself four times (A9): refused, measured; a
///   two-table view of a few rows is read.
///
/// The outside decoys are never named in an answer.
///
/// Attack round 17 reached the same mechanisms through GDAL's own way of reading a file: a
/// JP2 known by its box type alone (A1, A6), a TIFF text tag typed UNDEFINED (A2), a vertical
/// tab GDAL skips as white space (A3), a GML named `.gml` whose schema is `.xsd` (A9), a
/// view's scalar subquery a row count never computed (A14), a UTF-16 KML (A12), a keyword
/// sidecar and a netCDF header parsed in quadratic time (A7, A8), and the external mask's own
/// PAM file (A15). Each is refused before the open.
#[tokio::test]
async fn r16_a_documents_inside_files_and_views_are_bounded_before_the_open() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    let server = Server::start(
        Era::Modern,
        Options {
            env: vec![(
                "GDAL_MCP_GEOJSON_MAX_MEMORY_BYTES".to_string(),
                "1000000".to_string(),
            )],
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let secret = "SECRET_OUTSIDE_FIELD_7351";
    let schema_head = r#"<?xml version="1.0" encoding="UTF-8"?>
<xs:schema targetNamespace="http://ogr.maptools.org/" xmlns:ogr="http://ogr.maptools.org/" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:gml="http://www.opengis.net/gml" elementFormDefault="qualified" version="1.0">"#;
    std::fs::write(
        out.join("evil.xsd"),
        format!(
            r#"{schema_head}
<xs:element name="pts" type="ogr:pts_Type" substitutionGroup="gml:_Feature"/>
<xs:complexType name="pts_Type"><xs:complexContent><xs:extension base="gml:AbstractFeatureType"><xs:sequence>
<xs:element name="geometryProperty" type="gml:PointPropertyType" nillable="true" minOccurs="0" maxOccurs="1"/>
<xs:element name="{secret}" nillable="true" minOccurs="0" maxOccurs="1"><xs:simpleType><xs:restriction base="xs:string"></xs:restriction></xs:simpleType></xs:element>
</xs:sequence></xs:extension></xs:complexContent></xs:complexType>
</xs:schema>"#
        ),
    )
    .unwrap();
    let including = format!(
        r#"{schema_head}
<xs:import namespace="http://www.opengis.net/gml" schemaLocation="http://schemas.opengis.net/gml/3.1.1/base/gml.xsd"/>
<xs:element name="FeatureCollection" type="ogr:FeatureCollectionType" substitutionGroup="gml:_FeatureCollection"/>
<xs:complexType name="FeatureCollectionType"><xs:complexContent><xs:extension base="gml:AbstractFeatureCollectionType"><xs:attribute name="lockId" type="xs:string" use="optional"/></xs:extension></xs:complexContent></xs:complexType>
<xs:include schemaLocation="{}/evil.xsd"/>
</xs:schema>"#,
        out.display()
    );
    let gml = |schema: &str| {
        format!(
            r#"<?xml version="1.0" encoding="utf-8" ?>
<ogr:FeatureCollection xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://ogr.maptools.org/ {schema}" xmlns:ogr="http://ogr.maptools.org/" xmlns:gml="http://www.opengis.net/gml">
<gml:featureMember><ogr:pts gml:id="pts.0"><ogr:geometryProperty><gml:Point srsName="urn:ogc:def:crs:EPSG::4326"><gml:pos>1 2</gml:pos></gml:Point></ogr:geometryProperty></ogr:pts></gml:featureMember>
</ogr:FeatureCollection>"#
        )
    };
    // Fixtures built outside the workspace, then the carriers written into it.
    let fx = tempfile::tempdir().unwrap();
    let fx = fx.path();
    std::fs::write(fx.join("my.xsd"), &including).unwrap();
    std::fs::write(fx.join("my.gml"), gml("my.xsd")).unwrap();
    std::fs::write(
        fx.join("def.json"),
        format!(
            r#"{{"root_instance": {{"gml_filelist": [{{"file": "{}/my.gml", "inline": true, "parent_node": "GridCoverage"}}]}}}}"#,
            fx.display()
        ),
    )
    .unwrap();
    let base = fx.join("base.tif");
    let base_text = base.to_str().unwrap();
    cli(
        "gdal_create",
        &[
            "-of",
            "GTiff",
            "-outsize",
            "8",
            "8",
            "-bands",
            "1",
            "-burn",
            "5",
            "-a_srs",
            "EPSG:4326",
            "-a_ullr",
            "0",
            "8",
            "8",
            "0",
            base_text,
        ],
    );
    let def = format!("GMLJP2V2_DEF={}/def.json", fx.display());
    let featured = server.path("g.jp2");
    cli(
        "gdal_translate",
        &[
            "-q",
            "-of",
            "JP2OpenJPEG",
            "-co",
            &def,
            base_text,
            featured.to_str().unwrap(),
        ],
    );
    let plain = server.path("plain.jp2");
    cli(
        "gdal_translate",
        &[
            "-q",
            "-of",
            "JP2OpenJPEG",
            base_text,
            plain.to_str().unwrap(),
        ],
    );
    cli(
        "gdal_create",
        &[
            "-of",
            "GTiff",
            "-outsize",
            "4",
            "4",
            "-bands",
            "1",
            "-burn",
            "77",
            out.join("ovr.tif").to_str().unwrap(),
        ],
    );
    std::fs::write(
        fx.join("md.vrt"),
        format!(
            r#"<VRTDataset rasterXSize="8" rasterYSize="8"><SRS>EPSG:4326</SRS><GeoTransform>0,1,0,8,0,-1</GeoTransform>
<Metadata domain="OVERVIEWS"><MDI key="OVERVIEW_FILE">{}/ovr.tif</MDI></Metadata>
<VRTRasterBand dataType="Byte" band="1"><SimpleSource><SourceFilename relativeToVRT="0">{base_text}</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"#,
            out.display()
        ),
    )
    .unwrap();
    cli(
        "gdal_translate",
        &[
            "-q",
            "-of",
            "JP2OpenJPEG",
            "-co",
            "WRITE_METADATA=YES",
            fx.join("md.vrt").to_str().unwrap(),
            server.path("md.jp2").to_str().unwrap(),
        ],
    );
    std::fs::write(server.path("d.dat"), gml("d.xsd")).unwrap();
    std::fs::write(server.path("d.xsd"), &including).unwrap();
    // A JSONP-wrapped FeatureCollection of 3 MB of coordinates, over the lowered budget.
    let coordinates: Vec<String> = (0..100_000).map(|i| format!("[{i}.5,{i}.25]")).collect();
    let line = format!(
        r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{}},"geometry":{{"type":"LineString","coordinates":[{}]}}}}]}}"#,
        coordinates.join(",")
    );
    std::fs::write(server.path("p.dat"), format!("jsonp({line})")).unwrap();
    let grid = format!("{}/grid.gsb", out.display());
    sqlite_database(
        &server.path("transform.sqlite"),
        &[
            "create table pts(id integer primary key, name text)",
            "insert into pts values (1, 'a')",
            &format!(
                "create view v as select id, st_x(st_transform(geomfromwkb(x'0101000000000000000000f03f0000000000000040', 4326), 4326, NULL, '+proj=longlat +datum=WGS84', '+proj=longlat +ellps=WGS84 +nadgri' || 'ds={grid}')) as w from pts"
            ),
        ],
    );
    let rows: Vec<String> = (1..=1000).map(|i| format!("({i}, 'n{i}')")).collect();
    let insert = format!("insert into t values {}", rows.join(","));
    sqlite_database(
        &server.path("join.sqlite"),
        &[
            "create table t(id integer primary key, name text)",
            &insert,
            "create view v as select a.id as id, b.id as id2 from t a, t b, t c, t d",
        ],
    );
    sqlite_database(
        &server.path("pair.sqlite"),
        &[
            "create table a(id integer primary key, name text)",
            "create table b(id integer primary key, value real)",
            "insert into a values (1, 'x'), (2, 'y')",
            "insert into b values (1, 10.0), (2, 20.0)",
            "create view v as select a.id as id, a.name, b.value from a join b on a.id = b.id",
        ],
    );
    // Attack round 17: the same mechanisms through GDAL's own readings of a file.
    // R17-A1, A6: a JP2 whose signature box holds other bytes (GDAL checks its type alone).
    for (from, to) in [("g.jp2", "g_sig.jp2"), ("md.jp2", "md_sig.jp2")] {
        let mut bytes = std::fs::read(server.path(from)).unwrap();
        bytes[8..12].copy_from_slice(b"ABCD");
        std::fs::write(server.path(to), bytes).unwrap();
    }
    // R17-A2: a GeoTIFF's GDAL_METADATA tag typed UNDEFINED (7), not ASCII.
    let typed = server.path("typed.tif");
    let filler = format!("X={}", "x".repeat(400));
    cli(
        "gdal_translate",
        &["-q", "-mo", &filler, base_text, typed.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(server.path("typed.tif.aux.xml"));
    rewrite_tiff_text_tag(
        &typed,
        42112,
        &format!(
            r#"<GDALMetadata><Item name="OVERVIEW_FILE" domain="OVERVIEWS">{}/ovr.tif</Item></GDALMetadata>"#,
            out.display()
        ),
        7,
    );
    // R18-A1: the same tag typed SHORT, one character a 16-bit value.
    let short = server.path("short.tif");
    cli(
        "gdal_translate",
        &["-q", "-mo", &filler, base_text, short.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(server.path("short.tif.aux.xml"));
    rewrite_tiff_short_tag(
        &short,
        42112,
        &format!(
            r#"<GDALMetadata><Item name="OVERVIEW_FILE" domain="OVERVIEWS">{}/ovr.tif</Item></GDALMetadata>"#,
            out.display()
        ),
    );
    // R17-A3: a GeoJSON behind a vertical tab, which GDAL skips as white space.
    std::fs::write(server.path("vt.dat"), format!("\x0b{line}")).unwrap();
    // R17-A9: a GML named `.gml`, whose schema GDAL reads as `.xsd`.
    std::fs::create_dir(server.path("dot")).unwrap();
    std::fs::write(server.path("dot/.gml"), gml(".xsd")).unwrap();
    std::fs::write(server.path("dot/.xsd"), &including).unwrap();
    // R17-A14: a view of 1,000 rows whose column is a scalar cross-join subquery.
    sqlite_database(
        &server.path("scalar.sqlite"),
        &[
            "create table t(id integer primary key, name text)",
            &insert,
            "create view v as select t.id as id, (select count(*) from t a, t b, t c \
             where a.id + b.id + c.id > t.id) as n from t",
        ],
    );
    // R17-A12: a KML in UTF-16.
    let kml = "<?xml version=\"1.0\" encoding=\"UTF-16\"?><kml xmlns=\"http://www.opengis.net/kml/2.2\"><Document><Placemark><Point><coordinates>1,2</coordinates></Point></Placemark></Document></kml>";
    let mut wide = vec![0xFFu8, 0xFE];
    for unit in kml.encode_utf16() {
        wide.extend(unit.to_le_bytes());
    }
    std::fs::write(server.path("wide.kml"), wide).unwrap();
    // R17-A7: a DigitalGlobe `.IMD` of 20,000 keywords beside a GeoTIFF.
    std::fs::create_dir(server.path("imd")).unwrap();
    std::fs::copy(&base, server.path("imd/x.tif")).unwrap();
    let keys: String = (0..20_000).map(|i| format!("K{i} = 1;\n")).collect();
    std::fs::write(server.path("imd/x.IMD"), &keys).unwrap();
    // R17-A8: a classic netCDF header of 30,000 global attributes.
    let mut nc = b"CDF\x01".to_vec();
    nc.extend(0u32.to_be_bytes());
    nc.extend([0u8; 8]);
    nc.extend(0x0Cu32.to_be_bytes());
    nc.extend(30_000u32.to_be_bytes());
    for i in 0..30_000u32 {
        let name = format!("a{i:05}\0\0");
        nc.extend(6u32.to_be_bytes());
        nc.extend(&name.as_bytes()[..8]);
        nc.extend(2u32.to_be_bytes());
        nc.extend(1u32.to_be_bytes());
        nc.extend(b"x\0\0\0");
    }
    nc.extend([0u8; 8]);
    std::fs::write(server.path("many.nc"), nc).unwrap();
    // R18-A6: the same 25,000 global attributes in a netCDF-4 (HDF5) file, written by
    // GDAL's own netCDF driver.
    let vrt = server.path("attributes.vrt");
    let items: String = (0..25_000)
        .map(|i| format!(r#"<MDI key="NC_GLOBAL#a{i}">{i}</MDI>"#))
        .collect();
    std::fs::write(
        &vrt,
        format!(
            r#"<VRTDataset rasterXSize="4" rasterYSize="4"><Metadata>{items}</Metadata><VRTRasterBand dataType="Byte" band="1"><SimpleSource><SourceFilename>{base_text}</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"#
        ),
    )
    .unwrap();
    let many4 = server.path("many4.nc");
    cli(
        "gdal_translate",
        &[
            "-q",
            "-of",
            "netCDF",
            "-co",
            "FORMAT=NC4",
            vrt.to_str().unwrap(),
            many4.to_str().unwrap(),
        ],
    );
    std::fs::remove_file(&vrt).unwrap();
    let _ = std::fs::remove_file(server.path("many4.nc.aux.xml"));
    // R18-A3: the keywords behind a link inside the workspace; R18-A5: GeoEye's
    // `_metadata.txt`, read by the same parser.
    std::fs::create_dir(server.path("imd2")).unwrap();
    std::fs::copy(&base, server.path("imd2/x.tif")).unwrap();
    std::fs::write(server.path("notes.txt"), &keys).unwrap();
    std::os::unix::fs::symlink("../notes.txt", server.path("imd2/x.IMD")).unwrap();
    std::fs::create_dir(server.path("geoeye")).unwrap();
    std::fs::copy(&base, server.path("geoeye/x.tif")).unwrap();
    std::fs::write(server.path("geoeye/x_metadata.txt"), &keys).unwrap();
    // R18-A2: the external mask spelt `.Msk`.
    std::fs::create_dir(server.path("msk2")).unwrap();
    std::fs::copy(&base, server.path("msk2/y.tif")).unwrap();
    std::fs::copy(&base, server.path("msk2/y.tif.Msk")).unwrap();
    std::fs::write(
        server.path("msk2/y.tif.Msk.aux.xml"),
        format!(
            r#"<PAMDataset><Metadata domain="OVERVIEWS"><MDI key="OVERVIEW_FILE">{}/ovr.tif</MDI></Metadata></PAMDataset>"#,
            out.display()
        ),
    )
    .unwrap();
    // R17-A15: the external mask's own PAM file naming an outside overview file.
    std::fs::create_dir(server.path("msk")).unwrap();
    std::fs::copy(&base, server.path("msk/y.tif")).unwrap();
    std::fs::copy(&base, server.path("msk/y.tif.msk")).unwrap();
    std::fs::write(
        server.path("msk/y.tif.msk.aux.xml"),
        format!(
            r#"<PAMDataset><Metadata domain="OVERVIEWS"><MDI key="OVERVIEW_FILE">{}/ovr.tif</MDI></Metadata></PAMDataset>"#,
            out.display()
        ),
    )
    .unwrap();
    for (tool, input, needle) in [
        (
            "vector_info",
            "g_sig.jp2",
            "GMLJP2 metadata carries vector features",
        ),
        ("raster_info", "md_sig.jp2", "JPEG 2000 metadata box"),
        ("raster_info", "typed.tif", "its GDAL metadata"),
        ("vector_info", "vt.dat", "JSON tree"),
        ("vector_info", "dot/.gml", "GML schema"),
        ("vector_info", "scalar.sqlite", "its view \"v\""),
        ("vector_info", "wide.kml", "UTF-16"),
        ("raster_info", "imd/x.tif", "keywords"),
        ("raster_info", "many.nc", "netCDF header"),
        (
            "raster_info",
            "many4.nc",
            "variables, more than the 20000 attributes",
        ),
        ("raster_info", "msk/y.tif", "msk.aux.xml"),
        ("raster_info", "short.tif", "its GDAL metadata"),
        // R18-A3's link is now refused as a link (R20-A3), before its keywords are read.
        ("raster_info", "imd2/x.tif", "is a sidecar that is a link"),
        ("raster_info", "geoeye/x.tif", "keywords"),
        ("raster_info", "msk2/y.tif", "Msk.aux.xml"),
        (
            "raster_info",
            "g.jp2",
            "GMLJP2 metadata carries vector features",
        ),
        (
            "vector_info",
            "g.jp2",
            "GMLJP2 metadata carries vector features",
        ),
        ("raster_info", "md.jp2", "JPEG 2000 metadata box"),
        ("vector_info", "d.dat", "GML schema"),
        ("vector_info", "p.dat", "JSON tree"),
        ("vector_info", "transform.sqlite", "st_transform"),
        ("vector_info", "join.sqlite", "its view \"v\""),
    ] {
        let started = std::time::Instant::now();
        let result = server.call(tool, json!({"input": input})).await.unwrap();
        let message = text(&result);
        assert!(is_error(&result), "{tool} {input}: {message}");
        assert!(message.contains(needle), "{tool} {input}: {message}");
        assert!(!message.contains(secret), "{tool} {input}: {message}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{tool} {input}"
        );
    }
    let plain = server
        .call("raster_info", json!({"input": "plain.jp2"}))
        .await
        .unwrap();
    assert!(!is_error(&plain), "{}", text(&plain));
    let pair = server
        .call("vector_info", json!({"input": "pair.sqlite"}))
        .await
        .unwrap();
    assert!(!is_error(&pair), "{}", text(&pair));
}

/// A GML of one point feature, its `.gfs` as GDAL writes it, and the same `.gfs` naming its
/// field `SECRET_FIELD` (written into `dir`).
fn gml_with_schema(dir: &Path) -> (Vec<u8>, String, String) {
    let scratch = tempfile::tempdir().unwrap();
    let geojson = scratch.path().join("d.geojson");
    std::fs::write(
        &geojson,
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"name":"a"},"geometry":{"type":"Point","coordinates":[10.0,45.0]}}]}"#,
    )
    .unwrap();
    let gml = scratch.path().join("d.gml");
    run(
        "ogr2ogr",
        &[
            "-f",
            "GML",
            "-dsco",
            "XSISCHEMA=OFF",
            &gml.display().to_string(),
            &geojson.display().to_string(),
        ],
    );
    // GDAL writes the `.gfs` at the first read.
    run("ogrinfo", &["-ro", "-so", &gml.display().to_string()]);
    let gfs = std::fs::read_to_string(scratch.path().join("d.gfs")).unwrap();
    let secret = gfs.replace("<Name>name</Name>", "<Name>SECRET_FIELD</Name>");
    assert_ne!(gfs, secret, "{gfs}");
    std::fs::create_dir_all(dir).unwrap();
    (std::fs::read(&gml).unwrap(), gfs, secret)
}

/// Attack round 19, R19-A1 and R19-A2: GDAL's GML driver wrote `<stem>.gfs` beside a GML it
/// read, through a link swapped in after the checks (a read-only call created a file outside),
/// and read a `.gfs` swapped after the checks for a link to an outside schema (its field name
/// was answered): neither is listed by GDAL, and only VRTs' folders were watched. GML is now
/// read without writing a `.gfs`, and every input's folder is watched from the checks to the
/// answer; the swap is forced with the debug builds' pause between checks and open.
#[tokio::test]
async fn r19_a1_a2_a_gml_schema_swapped_after_the_checks_is_caught() {
    let mut decoy = Decoy::new();
    let (server, log_dir) = start_paused("30", "8").await;
    let (gml, gfs, secret) = gml_with_schema(&server.path("read"));
    decoy.add("secret.gfs", secret.as_bytes());
    std::fs::write(server.path("read/d.gml"), &gml).unwrap();
    std::fs::write(server.path("read/d.gfs"), &gfs).unwrap();
    std::fs::create_dir_all(server.path("write")).unwrap();
    std::fs::write(server.path("write/d.gml"), &gml).unwrap();
    std::fs::create_dir_all(server.path("clean")).unwrap();
    std::fs::write(server.path("clean/d.gml"), &gml).unwrap();
    let server = Arc::new(server);
    // R19-A2: the schema swapped for a link to the outside one.
    let call = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .call("vector_info", json!({"input": "read/d.gml"}))
                .await
        })
    };
    wait_checked(log_dir.path(), &["read/d.gml".to_string()]).await;
    std::fs::remove_file(server.path("read/d.gfs")).unwrap();
    std::os::unix::fs::symlink(decoy.path("secret.gfs"), server.path("read/d.gfs")).unwrap();
    let read = call.await.unwrap().unwrap();
    assert!(is_error(&read), "{}", text(&read));
    assert!(!text(&read).contains("SECRET_FIELD"), "{}", text(&read));
    assert!(text(&read).contains("changed"), "{}", text(&read));
    // R19-A1: a dangling link to the outside planted where GDAL would write the `.gfs`.
    let call = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .call("vector_info", json!({"input": "write/d.gml"}))
                .await
        })
    };
    wait_checked(log_dir.path(), &["write/d.gml".to_string()]).await;
    std::os::unix::fs::symlink(decoy.path("planted.gfs"), server.path("write/d.gfs")).unwrap();
    let written = call.await.unwrap().unwrap();
    assert!(is_error(&written), "{}", text(&written));
    decoy.assert_untouched();
    // The clean twin: read, and no `.gfs` written beside it.
    let clean = server
        .call("vector_info", json!({"input": "clean/d.gml"}))
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert!(text(&clean).contains("\"name\""), "{}", text(&clean));
    assert!(!server.path("clean/d.gfs").exists());
}

/// Attack round 19, R19-A3, R19-A6 and R19-A7: a shapefile whose index points every record at
/// one large polygon, read 10,000 times by the facts' geometry check (minutes on a worker); a
/// GeoTIFF whose sample touched tens of thousands of huge tiles (111 s), with `raster_info
/// stats` reading 1.7e11 cells; `provenance_report` hashing through a folder swapped for a
/// link. The index is refused before the open, the sample stays within its decoding budget,
/// `stats` within the cell budget, and the hash opens no link on the way.
#[tokio::test]
async fn r19_a3_a6_a7_aliased_records_and_tiles_and_hashes_through_links() {
    let decoy = Decoy::new();
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // A shapefile of two records, its index pointing both at the first.
    let geojson = server.path("two.geojson");
    std::fs::write(
        &geojson,
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":1},"geometry":{"type":"Point","coordinates":[1,1]}},{"type":"Feature","properties":{"id":2},"geometry":{"type":"Point","coordinates":[2,2]}}]}"#,
    )
    .unwrap();
    std::fs::create_dir_all(server.path("shp")).unwrap();
    run(
        "ogr2ogr",
        &[
            "-f",
            "ESRI Shapefile",
            &server.path("shp/a.shp").display().to_string(),
            &geojson.display().to_string(),
        ],
    );
    std::fs::create_dir_all(server.path("twin")).unwrap();
    for ext in ["shp", "shx", "dbf", "prj"] {
        let _ = std::fs::copy(
            server.path(&format!("shp/a.{ext}")),
            server.path(&format!("twin/a.{ext}")),
        );
    }
    let mut shx = std::fs::read(server.path("shp/a.shx")).unwrap();
    let first: Vec<u8> = shx[100..108].to_vec();
    shx[108..116].copy_from_slice(&first);
    std::fs::write(server.path("shp/a.shx"), shx).unwrap();
    let aliased = server
        .call("vector_info", json!({"input": "shp/a.shp"}))
        .await
        .unwrap();
    assert!(is_error(&aliased), "{}", text(&aliased));
    assert!(
        text(&aliased).contains("already holds"),
        "{}",
        text(&aliased)
    );
    let twin = server
        .call("vector_info", json!({"input": "twin/a.shp"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    // A 1,048,576² Byte GeoTIFF of 4096² tiles: `raster_info` answers from a bounded sample,
    // and its `stats` are refused by the cell budget.
    let big = server.path("big.tif");
    run(
        "gdal_create",
        &[
            "-q",
            "-of",
            "GTiff",
            "-outsize",
            "1048576",
            "1048576",
            "-ot",
            "Byte",
            "-co",
            "TILED=YES",
            "-co",
            "BLOCKXSIZE=4096",
            "-co",
            "BLOCKYSIZE=4096",
            "-co",
            "SPARSE_OK=YES",
            "-a_srs",
            "EPSG:32633",
            "-a_ullr",
            "500000",
            "5000000",
            "510000",
            "4990000",
            &big.display().to_string(),
        ],
    );
    let started = Instant::now();
    let info = server
        .call("raster_info", json!({"input": "big.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let stats = server
        .call("raster_info", json!({"input": "big.tif", "stats": true}))
        .await
        .unwrap();
    assert!(is_error(&stats), "{}", text(&stats));
    assert!(text(&stats).contains("cells exceeds"), "{}", text(&stats));
    // R19-A7: the folder of a hashed input is a link by the time it is hashed.
    std::fs::create_dir_all(server.path("sub")).unwrap();
    std::fs::write(server.path("sub/x.txt"), b"inside").unwrap();
    let inside = server
        .call("provenance_report", json!({"input": "sub/x.txt"}))
        .await
        .unwrap();
    assert!(!is_error(&inside), "{}", text(&inside));
    assert!(!text(&inside).contains(&sha256_hex(b"do not read me\n")));
    decoy.assert_untouched();
}

/// The SHA-256 of `bytes`, in hex.
fn sha256_hex(bytes: &[u8]) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(bytes)?;
            child.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Attack round 20, R20-C6: cancelling a call whose inline justification replaced the
/// decision's capsule deleted the earlier capsule too: the decision was refused again and the
/// outputs resting on it lost their purpose. The earlier capsule is put back.
#[test]
fn r20_c6_a_cancelled_rejustification_puts_the_earlier_capsule_back() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    let mut child = gdal_mcp_tests::spawn_raw(workspace.path(), false).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        stdin.write_all(v.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut line = String::new();
    let mut answer = |stdout: &mut BufReader<std::process::ChildStdout>, id: i64| -> Value {
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap_or(0) > 0,
                "no answer to {id}"
            );
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == json!(id) {
                return reply;
            }
        }
    };
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    answer(&mut stdout, 0);
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let first = gdal_mcp_tests::justification("lanczos");
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":"first.tif","resampling":"lanczos","size":[10, 10],
        "justification":{"resampling": first}}}}),
    );
    let done = answer(&mut stdout, 1);
    assert_ne!(done["result"]["isError"], json!(true), "{done}");
    let folder = workspace
        .path()
        .join(".preflight/justifications/resampling");
    let capsules = || -> Vec<String> {
        std::fs::read_dir(&folder)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.path().is_file())
                    .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = capsules();
    assert_eq!(before.len(), 1, "{before:?}");
    // The same decision, justified anew inline, on seconds of GDAL work, cancelled.
    let mut second = gdal_mcp_tests::justification("lanczos");
    second["intent"] = json!(
        "a finer grid of the terrain for a hillshade preview of the valley, rebuilt for the \
         second edition of the map"
    );
    send(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":"big.tif","resampling":"lanczos","size":[9000, 9000],
        "justification":{"resampling": second}}}}),
    );
    std::thread::sleep(Duration::from_millis(700));
    send(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}}),
    );
    std::thread::sleep(Duration::from_secs(6));
    send(json!({"jsonrpc":"2.0","id":6,"method":"ping"}));
    answer(&mut stdout, 6);
    assert!(!workspace.path().join("big.tif").exists());
    assert_eq!(
        capsules(),
        before,
        "the earlier capsule is the decision's again"
    );
    // And it answers the decision: a call without a justification runs on it.
    send(
        json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":"again.tif","resampling":"lanczos","size":[10, 10]}}}),
    );
    let again = answer(&mut stdout, 8);
    assert_ne!(again["result"]["isError"], json!(true), "{again}");
    drop(stdin);
    let _ = child.wait();
}

/// Attack round 20, R20-A2, R20-A3 (and R20-A5, A2's race onto a FIFO): a VRT source and a
/// sidecar that are links to files inside the workspace were followed by name after the
/// checks, through folders nothing held still (an outside folder swapped in served its cells
/// and rows). Links there are refused, naming the fix.
#[tokio::test]
async fn r20_a2_a3_links_gdal_follows_after_the_checks_are_refused() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    std::fs::create_dir_all(server.path("d")).unwrap();
    std::fs::create_dir_all(server.path("e")).unwrap();
    std::fs::copy(server.path("dem.tif"), server.path("e/real.tif")).unwrap();
    std::os::unix::fs::symlink("../e/real.tif", server.path("d/src.tif")).unwrap();
    let (w, h) = gdal::Dataset::open(server.path("dem.tif"))
        .unwrap()
        .raster_size();
    std::fs::write(
        server.path("d/v.vrt"),
        format!(
            r#"<VRTDataset rasterXSize="{w}" rasterYSize="{h}"><VRTRasterBand dataType="Float32" band="1"><SimpleSource><SourceFilename relativeToVRT="1">src.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"#
        ),
    )
    .unwrap();
    let vrt = server
        .call("raster_stats", json!({"input": "d/v.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&vrt), "{}", text(&vrt));
    assert!(text(&vrt).contains("is a link"), "{}", text(&vrt));
    // A shapefile whose `.dbf` is a link to another inside file.
    std::fs::write(
        server.path("p.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"name":"inside"},"geometry":{"type":"Point","coordinates":[1,1]}}]}"#,
    )
    .unwrap();
    std::fs::create_dir_all(server.path("s")).unwrap();
    run(
        "ogr2ogr",
        &[
            "-f",
            "ESRI Shapefile",
            &server.path("s/p.shp").display().to_string(),
            &server.path("p.geojson").display().to_string(),
        ],
    );
    std::fs::rename(server.path("s/p.dbf"), server.path("e/p.dbf")).unwrap();
    std::os::unix::fs::symlink("../e/p.dbf", server.path("s/p.dbf")).unwrap();
    let shp = server
        .call("vector_query", json!({"input": "s/p.shp"}))
        .await
        .unwrap();
    assert!(is_error(&shp), "{}", text(&shp));
    assert!(
        text(&shp).contains("a sidecar that is a link"),
        "{}",
        text(&shp)
    );
    decoy.assert_untouched();
}

/// Attack round 21, R21-C2: R20-C6's bookkeeping was per decision, not per call. With two
/// calls of one decision in flight, each with its own inline justification, cancelling the
/// first deleted the capsule the second had stored and committed on (the decision was refused
/// again), or put the cancelled call's justification back over the second's. Withdrawal is now
/// per call: the second call's capsule stays in both orders, and answers the decision.
#[test]
fn r21_c2_cancelling_one_call_keeps_the_capsule_another_call_stored() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    let mut raw =
        RawServer::from_child(gdal_mcp_tests::spawn_raw(workspace.path(), false).unwrap());
    let justified = |intent: &str| {
        let mut j = gdal_mcp_tests::justification("lanczos");
        j["intent"] = json!(intent);
        j
    };
    let resample = |id: i64, output: &str, size: u32, intent: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":output,"resampling":"lanczos","size":[size, size],
        "justification":{"resampling": justified(intent)}}}})
    };
    let cancel = |id: i64| json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id,"reason":"test"}});
    let folder = workspace
        .path()
        .join(".preflight/justifications/resampling");
    let capsule = || -> String {
        std::fs::read_dir(&folder)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.path().is_file())
                    .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    let first_intent = "a finer grid of the terrain for a hillshade preview of the valley";
    let second_intent = "a coarse grid of the terrain for the regional slope overview map";
    let third_intent = "a grid of the terrain for the flood model's first calibration run";

    // The first call runs long; the second stores its own justification and commits.
    raw.send(resample(1, "big1.tif", 9000, first_intent));
    std::thread::sleep(Duration::from_millis(700));
    raw.send(resample(2, "small.tif", 10, second_intent));
    let second = raw.answer(2);
    assert_ne!(second["result"]["isError"], json!(true), "{second}");
    raw.send(cancel(1));
    std::thread::sleep(Duration::from_secs(3));
    raw.send(json!({"jsonrpc":"2.0","id":3,"method":"ping"}));
    raw.answer(3);
    assert!(!workspace.path().join("big1.tif").exists());
    assert!(capsule().contains(second_intent), "{}", capsule());
    raw.send(
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"raster_resample",
        "arguments":{"input":"dem.tif","output":"after.tif","resampling":"lanczos","size":[10, 10]}}}),
    );
    let after = raw.answer(4);
    assert_ne!(after["result"]["isError"], json!(true), "{after}");

    // The other order: the second replaces the first's while both run; the first is cancelled.
    raw.send(resample(5, "big5.tif", 9000, first_intent));
    std::thread::sleep(Duration::from_millis(700));
    raw.send(resample(6, "big6.tif", 4000, third_intent));
    std::thread::sleep(Duration::from_millis(700));
    raw.send(cancel(5));
    let sixth = raw.answer(6);
    assert_ne!(sixth["result"]["isError"], json!(true), "{sixth}");
    std::thread::sleep(Duration::from_secs(3));
    raw.send(json!({"jsonrpc":"2.0","id":7,"method":"ping"}));
    raw.answer(7);
    assert!(!workspace.path().join("big5.tif").exists());
    let stored = capsule();
    assert!(
        stored.contains(third_intent) && !stored.contains(first_intent),
        "{stored}"
    );
}

/// Attack round 21, R21-C3: R20-C2's commit looked at the client once, before syncing the
/// staged files: a cancel that came during the sync (a second for 200 MB) replaced the file
/// the user kept, got no answer, and left the new file without a lineage record. The commit
/// looks again just before it moves anything (under the debug builds' pause in that window,
/// the cancelled call leaves `keep.tif` as it was); a cancel after that point is too late,
/// and the call's outputs then get their lineage. The twin: without a cancel, the same call
/// replaces `keep.tif` and answers.
#[test]
fn r21_c3_a_cancel_during_the_commit_sync_keeps_the_file() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    std::fs::write(
        workspace.path().join("keep.tif"),
        b"the file the user keeps",
    )
    .unwrap();
    let child = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
        .arg("serve")
        .arg("--workspace")
        .arg(workspace.path())
        .arg("--cache-dir")
        .arg(gdal_mcp_tests::shared_cache())
        .env("GDAL_MCP_TEST_PAUSE_BEFORE_SYNC_MS", "2500")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut raw = RawServer::from_child(child);
    let convert = |id: i64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"raster_convert",
        "arguments":{"input":"dem.tif","output":"keep.tif","overwrite":true}}})
    };
    raw.send(convert(1));
    std::thread::sleep(Duration::from_millis(1500));
    raw.send(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"test"}}),
    );
    std::thread::sleep(Duration::from_secs(3));
    raw.send(json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    raw.answer(2);
    assert_eq!(
        std::fs::read(workspace.path().join("keep.tif")).unwrap(),
        b"the file the user keeps"
    );
    raw.send(convert(3));
    let done = raw.answer(3);
    assert_ne!(done["result"]["isError"], json!(true), "{done}");
    assert_ne!(
        std::fs::read(workspace.path().join("keep.tif")).unwrap(),
        b"the file the user keeps"
    );
}

/// Attack round 21, R21-A6: a 1.9 MB netCDF-4 file of 9,900 nested groups kept each read-only
/// worker recursing past the open deadline (the CLI's `gdalinfo` overflowed its stack after 60
/// s), and eight set aside took the read-only pool out of service. Groups nested more than 64
/// deep are refused before the open. The twin: 10 levels are no refusal of nesting.
#[tokio::test]
async fn r21_a6_deeply_nested_hdf5_groups_are_refused_before_the_open() {
    let server = start(&[]).await;
    let nested = |depth: usize, name: &str| {
        let mut vrt = String::from("<VRTDataset><Group name=\"/\">");
        vrt.push_str(&"<Group name=\"g\">".repeat(depth));
        vrt.push_str(
            "<Dimension name=\"x\" size=\"2\"/><Dimension name=\"y\" size=\"2\"/>\
             <Array name=\"v\"><DataType>Byte</DataType><DimensionRef ref=\"y\"/>\
             <DimensionRef ref=\"x\"/></Array>",
        );
        vrt.push_str(&"</Group>".repeat(depth));
        vrt.push_str("</Group></VRTDataset>");
        let source = server.workspace.path().join(format!("{name}.xml"));
        std::fs::write(&source, vrt).unwrap();
        gdal_mcp_tests::run_program(
            "gdalmdimtranslate",
            &[
                "-q",
                "-of",
                "netCDF",
                source.to_str().unwrap(),
                server.path(&format!("{name}.nc")).to_str().unwrap(),
            ],
        );
        std::fs::remove_file(source).unwrap();
    };
    nested(70, "deep");
    nested(10, "shallow");
    let deep = server
        .call("raster_info", json!({"input": "deep.nc"}))
        .await
        .unwrap();
    assert!(is_error(&deep), "{}", text(&deep));
    assert!(
        text(&deep).contains("nested more than 64 deep"),
        "{}",
        text(&deep)
    );
    let shallow = server
        .call("raster_info", json!({"input": "shallow.nc"}))
        .await
        .unwrap();
    assert!(
        !text(&shallow).contains("nested more than"),
        "{}",
        text(&shallow)
    );
}

/// Attack round 21, R21-A1, R21-A3, R21-A4 and R21-A5: what GDAL builds at an open that no
/// estimate counted. Under a 64 MiB memory budget:
/// * a GML feature of 800,000 empty elements (a `CPLXMLNode` tree about 30 times its text),
///   a raster's `.aux.xml` and a GML's `.gfs` of as many, are refused before the open, naming
///   `GDAL_MCP_XML_MAX_MEMORY_BYTES` or the budget;
/// * a GeoPackage whose tile matrix declares 16384 x 16384 tiles (GDAL allocates 16 of them
///   at the open) is refused;
/// * a JPEG 2000 of 300 components, every one of which OpenJPEG decodes (4 bytes a sample) to
///   give one band's block, reserves them all: 78 MB, past the budget.
///
/// The twins: the same GML, sidecar and GeoPackage of ordinary size open.
#[tokio::test]
async fn r21_a1_a3_a4_a5_what_gdal_builds_at_the_open_is_counted() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            env: vec![(
                "GDAL_MCP_MEMORY_BUDGET_BYTES".to_string(),
                (64u64 << 20).to_string(),
            )],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let gml = |children: usize| {
        format!(
            "<?xml version=\"1.0\"?><ogr:FeatureCollection xmlns:ogr=\"http://ogr.maptools.org/\" \
             xmlns:gml=\"http://www.opengis.net/gml\"><gml:featureMember><ogr:f><ogr:geometryProperty>\
             <gml:LineString><gml:coordinates>0,0 1,1</gml:coordinates>{}</gml:LineString>\
             </ogr:geometryProperty></ogr:f></gml:featureMember></ogr:FeatureCollection>",
            "<a/>".repeat(children)
        )
    };
    std::fs::write(server.path("dense.gml"), gml(800_000)).unwrap();
    std::fs::write(server.path("plain.gml"), gml(10)).unwrap();
    std::fs::write(server.path("sided.gml"), gml(10)).unwrap();
    std::fs::write(
        server.path("sided.gfs"),
        format!(
            "<GMLFeatureClassList>{}</GMLFeatureClassList>",
            "<a/>".repeat(800_000)
        ),
    )
    .unwrap();
    std::fs::copy(server.path("dem.tif"), server.path("pam.tif")).unwrap();
    std::fs::write(
        server.path("pam.tif.aux.xml"),
        format!("<PAMDataset>{}</PAMDataset>", "<a/>".repeat(800_000)),
    )
    .unwrap();
    for (tool, input) in [
        ("vector_info", "dense.gml"),
        ("vector_info", "sided.gml"),
        ("raster_info", "pam.tif"),
    ] {
        let refused = server.call(tool, json!({"input": input})).await.unwrap();
        assert!(is_error(&refused), "{input}: {}", text(&refused));
        assert!(
            text(&refused).contains("XML") || text(&refused).contains("memory budget"),
            "{input}: {}",
            text(&refused)
        );
    }
    let plain = server
        .call("vector_info", json!({"input": "plain.gml"}))
        .await
        .unwrap();
    assert!(!is_error(&plain), "{}", text(&plain));

    // A GeoPackage raster whose tiles are declared 16384 x 16384.
    let dem = server.path("dem.tif");
    for name in ["tiles.gpkg", "big_tiles.gpkg"] {
        gdal_mcp_tests::run_program(
            "gdal_translate",
            &[
                "-q",
                "-of",
                "GPKG",
                "-ot",
                "Byte",
                "-scale",
                dem.to_str().unwrap(),
                server.path(name).to_str().unwrap(),
            ],
        );
    }
    gdal_mcp_tests::run_program(
        "python3",
        &[
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); \
             c.execute('UPDATE gpkg_tile_matrix SET tile_width=16384, tile_height=16384'); \
             c.commit()",
            server.path("big_tiles.gpkg").to_str().unwrap(),
        ],
    );
    let big = server
        .call("raster_info", json!({"input": "big_tiles.gpkg"}))
        .await
        .unwrap();
    assert!(is_error(&big), "{}", text(&big));
    assert!(text(&big).contains("16384 x 16384"), "{}", text(&big));
    let tiles = server
        .call("raster_info", json!({"input": "tiles.gpkg"}))
        .await
        .unwrap();
    assert!(!is_error(&tiles), "{}", text(&tiles));

    // A JPEG 2000 of 300 components of 256 x 256.
    let raw = server.path("many.raw");
    std::fs::write(&raw, vec![7u8; 256 * 256 * 300]).unwrap();
    std::fs::write(
        server.path("many.hdr"),
        "ENVI\nsamples = 256\nlines = 256\nbands = 300\nheader offset = 0\nfile type = ENVI Standard\ndata type = 1\ninterleave = bsq\nbyte order = 0\n",
    )
    .unwrap();
    gdal_mcp_tests::run_program(
        "gdal_translate",
        &[
            "-q",
            "-of",
            "JP2OpenJPEG",
            "-co",
            "REVERSIBLE=YES",
            raw.to_str().unwrap(),
            server.path("many.jp2").to_str().unwrap(),
        ],
    );
    let jp2 = server
        .call("raster_info", json!({"input": "many.jp2"}))
        .await
        .unwrap();
    assert!(is_error(&jp2), "{}", text(&jp2));
    assert!(text(&jp2).contains("budget"), "{}", text(&jp2));
}

/// Attack round 22, R22-A6, R22-A8, R22-A9, R22-A10: files GDAL and SQLite touch that no
/// check named.
/// * `raster_info stats: true` on an EHdr raster made GDAL write `<stem>.stx` beside it, through
///   a link made during the call or a planted hard link to the store's ledger: refused, naming
///   `raster_stats`, and nothing is written.
/// * A `-shm` beside an SQLite database that is a hard link to another file (the ledger) took
///   SQLite's write: refused before any connection, the other file unchanged.
/// * An EHdr file named `imspatio.bil` made GDAL look for `image.rep` in every folder above it:
///   refused.
#[tokio::test]
async fn r22_a6_a8_a9_a10_files_gdal_and_sqlite_write_or_seek_are_refused() {
    let decoy = Decoy::new();
    let server = start(&[]).await;
    let header = "BYTEORDER I\nLAYOUT BIL\nNROWS 4\nNCOLS 4\nNBANDS 1\nNBITS 8\nULXMAP 0.5\nULYMAP 3.5\nXDIM 1\nYDIM 1\n";
    std::fs::write(server.path("e.bil"), [7u8; 16]).unwrap();
    std::fs::write(server.path("e.hdr"), header).unwrap();
    std::fs::hard_link(decoy.path("secret.txt"), server.path("e.stx")).unwrap();
    let stats = server
        .call("raster_info", json!({"input": "e.bil", "stats": true}))
        .await
        .unwrap();
    assert!(is_error(&stats), "{}", text(&stats));
    assert!(text(&stats).contains("raster_stats"), "{}", text(&stats));
    decoy.assert_untouched();
    let plain = server
        .call("raster_info", json!({"input": "e.bil"}))
        .await
        .unwrap();
    assert!(!is_error(&plain), "{}", text(&plain));

    let db = server.path("y.gpkg");
    gdal_mcp_tests::run_program(
        "python3",
        &[
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); \
             c.execute('PRAGMA journal_mode=WAL'); c.execute('CREATE TABLE t(a)'); c.commit(); \
             c.close()",
            db.to_str().unwrap(),
        ],
    );
    let shm = server.path("y.gpkg-shm");
    let _ = std::fs::remove_file(&shm);
    std::fs::hard_link(decoy.path("victim.tif"), &shm).unwrap();
    let info = server
        .call("vector_info", json!({"input": "y.gpkg"}))
        .await
        .unwrap();
    assert!(is_error(&info), "{}", text(&info));
    assert!(text(&info).contains("hard link"), "{}", text(&info));
    decoy.assert_untouched();

    std::fs::write(server.path("imspatio.bil"), [7u8; 16]).unwrap();
    std::fs::write(server.path("imspatio.hdr"), header).unwrap();
    let spot = server
        .call("raster_info", json!({"input": "imspatio.bil"}))
        .await
        .unwrap();
    assert!(is_error(&spot), "{}", text(&spot));
    assert!(text(&spot).contains("image.rep"), "{}", text(&spot));
}

/// Attack round 23, R23-A6: GDAL's RST writer computes its input's statistics, which GDAL
/// keeps in the input's PAM and writes beside the input when it closes: a successful
/// `raster_convert` to RST overwrote a planted `<input>.aux.xml` hard-linked to a file
/// elsewhere (the ledger, in the tester's run), made an EHdr input write its `.stx`, and
/// rewrote an input VRT; HFA with `STATISTICS=YES` did the same. RST is no output format now,
/// HFA's `STATISTICS` is refused, and HFA without it writes nothing beside the input.
#[tokio::test]
async fn r23_a6_no_writer_computes_statistics_beside_its_input() {
    let decoy = Decoy::new();
    let server = start(&["dem.tif"]).await;
    std::fs::hard_link(decoy.path("secret.txt"), server.path("dem.tif.aux.xml")).unwrap();
    let rst = server
        .call(
            "raster_convert",
            json!({"input": "dem.tif", "output": "o.rst", "format": "RST"}),
        )
        .await
        .unwrap();
    assert!(is_error(&rst), "{}", text(&rst));
    assert!(text(&rst).contains("RST"), "{}", text(&rst));
    let statistics = server
        .call(
            "raster_convert",
            json!({"input": "dem.tif", "output": "o.img", "format": "HFA",
                   "creation_options": {"STATISTICS": "YES"}}),
        )
        .await
        .unwrap();
    assert!(is_error(&statistics), "{}", text(&statistics));
    assert!(
        text(&statistics).contains("STATISTICS"),
        "{}",
        text(&statistics)
    );
    assert!(!server.path("o.rst").exists() && !server.path("o.img").exists());
    decoy.assert_untouched();
    // The twin: HFA without statistics converts, and the input's side file is unchanged.
    std::fs::remove_file(server.path("dem.tif.aux.xml")).unwrap();
    let plain = gdal_mcp_tests::call_justified(
        &server,
        "raster_convert",
        json!({"input": "dem.tif", "output": "p.img", "format": "HFA"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&plain.result), "{}", text(&plain.result));
    assert!(!server.path("dem.tif.aux.xml").exists());
}

/// Attack round 23, R23-A1: `vector_buffer` (and every tool that writes through the host's own
/// vector writer) named the output's layer after the input's, and LIBKML and CSV given an
/// output whose extension is not theirs write a folder of files named after the layers: a
/// layer named `../../<outside>/victim` overwrote a file outside the workspace. An output
/// must end with its driver's extension, and a layer name written is never a path.
#[tokio::test]
async fn r23_a1_layer_names_never_become_paths() {
    let decoy = Decoy::new();
    let server = start(&[]).await;
    let outside = decoy.path("victim");
    let name = format!("../../../../../../../..{outside}");
    let layer = json!({"type": "FeatureCollection", "name": name,
        "features": [{"type": "Feature", "properties": {"a": 1},
                      "geometry": {"type": "Point", "coordinates": [500000.0, 4000000.0]}}],
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}}});
    std::fs::write(server.path("a.geojson"), layer.to_string()).unwrap();
    for (format, output) in [("LIBKML", "o1.x"), ("CSV", "o2.x")] {
        let refused = server
            .call(
                "vector_buffer",
                json!({"input": "a.geojson", "output": output, "format": format,
                       "distance": 10.0, "unit": "m"}),
            )
            .await
            .unwrap();
        assert!(is_error(&refused), "{format}: {}", text(&refused));
        assert!(text(&refused).contains("extension"), "{}", text(&refused));
    }
    let written = gdal_mcp_tests::call_justified(
        &server,
        "vector_buffer",
        json!({"input": "a.geojson", "output": "o3.kml", "format": "LIBKML", "distance": 10.0,
               "unit": "m"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&written.result), "{}", text(&written.result));
    decoy.assert_untouched();
    assert!(!Path::new(&decoy.path("victim")).exists());
}

/// A PNG of 1 x 1 cells with `chunks` zTXt chunks of `inflated` bytes of 'A' each, built with
/// python3's zlib (PNG's CRCs and deflate).
fn text_chunk_png(path: &Path, chunks: usize, inflated: usize) {
    let script = "import sys,zlib,struct\n\
        def chunk(t,d): return struct.pack('>I',len(d))+t+d+struct.pack('>I',zlib.crc32(t+d)&0xffffffff)\n\
        n,size=int(sys.argv[2]),int(sys.argv[3])\n\
        comp=zlib.compress(b'A'*size,9)\n\
        z=b''.join(chunk(b'zTXt',b'k%d\\x00\\x00'%i+comp) for i in range(n))\n\
        open(sys.argv[1],'wb').write(b'\\x89PNG\\r\\n\\x1a\\n'+chunk(b'IHDR',struct.pack('>IIBBBBB',1,1,8,0,0,0,0))+z+chunk(b'IDAT',zlib.compress(b'\\x00\\x00'))+chunk(b'IEND',b''))\n";
    gdal_mcp_tests::run_program(
        "python3",
        &[
            "-c",
            script,
            path.to_str().unwrap(),
            &chunks.to_string(),
            &inflated.to_string(),
        ],
    );
}

/// Attack round 23, R23-A10, A11 (and A3, A5): what a format's own reader builds or breaks at
/// the open, which no estimate of the host's sees: a netCDF-4 file with one byte changed
/// crashed libhdf5 inside the server; a PNG's 100 zTXt chunks inflated to 790 MB at the open
/// (`raster_info`, under a 256 MiB budget). Such formats (HDF5, netCDF, PNG, JPEG) are opened
/// first in a child process under the memory budget (`gdal::policy::probe`): the PNG is
/// refused with the bytes it took, the server stays small and answers, and the twin (one
/// small chunk) opens.
#[tokio::test]
async fn r23_a10_a11_formats_with_native_readers_are_opened_first_in_a_child() {
    let server = start_budgeted(&["dem.tif"], 64 << 20).await;
    text_chunk_png(&server.path("many.png"), 40, 7_900_000);
    text_chunk_png(&server.path("twin.png"), 1, 1_000);
    let refused = server
        .call("raster_info", json!({"input": "many.png"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("separate process"),
        "{}",
        text(&refused)
    );
    let twin = server
        .call("raster_info", json!({"input": "twin.png"}))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
    still_serves(&server).await;
}

/// Attack round 23, R23-A9: `raster_overviews` of a VRT (no `output`: the external
/// `<name>.ovr`) failed every time: the staging folder the call made beside the VRT, and the
/// overview GDAL listed inside it as the VRT's, tripped the VRT's folder watch, reported as a
/// swap. The job's own staging folders are no change; the overview is written.
#[tokio::test]
async fn r23_a9_overviews_of_a_vrt_are_built() {
    let server = start(&["dem.tif"]).await;
    gdal_mcp_tests::run_program(
        "gdal_translate",
        &[
            "-q",
            "-of",
            "VRT",
            server.path("dem.tif").to_str().unwrap(),
            server.path("v.vrt").to_str().unwrap(),
        ],
    );
    let built = gdal_mcp_tests::call_justified(
        &server,
        "raster_overviews",
        json!({"input": "v.vrt", "levels": [2], "resampling": "nearest"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&built.result), "{}", text(&built.result));
    assert!(server.path("v.vrt.ovr").exists());
}
