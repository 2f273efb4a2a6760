//! Issue 21: no input starves the server. Work that grows with a hostile input is counted and
//! refused past a budget with a clear error (`vector_query`'s LIKE; `vector_join`'s nearest
//! ties, scans, pairs tested, matches held, values summarised and key index), and file hashing is bounded in bytes and runs beside the read tools, never in their
//! way (`provenance_report`), through MCP.

use gdal_mcp_tests::{is_error, structured, text, Era, Options, Server};
use rmcp::model::CallToolResult;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

async fn start_with(env: &[(&str, &str)]) -> Server {
    start_with_data(env, &[]).await
}

async fn start_with_data(env: &[(&str, &str)], data: &[&'static str]) -> Server {
    Server::start(
        Era::Modern,
        Options {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            data: data.to_vec(),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// A sparse file of 64 GiB (no block written: it costs no disk).
fn sparse_64_gib(path: &Path) {
    let file = std::fs::File::create(path).unwrap();
    file.set_len(64 << 30).unwrap();
}

/// A GeoJSON point layer in EPSG:4326 of `(properties, [lon, lat])`.
fn points(path: &Path, features: &[(Value, [f64; 2])]) {
    let features: Vec<Value> = features
        .iter()
        .map(|(p, at)| {
            json!({"type": "Feature", "properties": p,
                   "geometry": {"type": "Point", "coordinates": at}})
        })
        .collect();
    let doc = json!({
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::4326"}},
        "features": features,
    });
    std::fs::write(path, doc.to_string()).unwrap();
}

fn read_field(path: &Path, field: &str) -> Vec<Value> {
    use gdal::vector::LayerAccess;
    let dataset = gdal::Dataset::open(path).unwrap();
    let mut layer = dataset.layer(0).unwrap();
    layer
        .features()
        .map(|f| {
            let index = f.field_index(field).unwrap();
            match f.field(index).unwrap() {
                Some(gdal::vector::FieldValue::Integer64Value(v)) => json!(v),
                Some(gdal::vector::FieldValue::IntegerValue(v)) => json!(v),
                Some(gdal::vector::FieldValue::RealValue(v)) => json!(v),
                Some(gdal::vector::FieldValue::StringValue(v)) => json!(v),
                _ => Value::Null,
            }
        })
        .collect()
}

/// Regression (issue 21, attack finding F5): a `where` whose LIKE pattern has a long segment
/// between `%`s, over long text values, kept the backtracking matcher busy for minutes. Here
/// 40 features of 100,000 characters and a 201-character segment make 2·10⁷ comparisons per
/// feature; with the LIKE budget at 10⁷ (`GDAL_MCP_MAX_LIKE_STEPS`) the call fails at the first
/// feature with an error naming the budget, its variable and cheaper patterns. A pattern with
/// too many `%` runs is refused when the filter is parsed. The clean twin, a prefix pattern on
/// the same layer, selects all 40.
#[tokio::test]
async fn a_hostile_like_pattern_fails_fast_with_the_budget_named() {
    let server = start_with(&[("GDAL_MCP_MAX_LIKE_STEPS", "10000000")]).await;
    let long = "a".repeat(100_000);
    let features: Vec<(Value, [f64; 2])> = (0..40)
        .map(|i| (json!({"code": long.clone()}), [i as f64 * 0.01, 0.0]))
        .collect();
    points(&server.path("long.geojson"), &features);

    let hostile = format!("code LIKE '%{}b%'", "a".repeat(200));
    let started = Instant::now();
    let refused = server
        .call(
            "vector_query",
            json!({"input": "long.geojson", "where": hostile, "limit": 1}),
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(is_error(&refused), "{}", text(&refused));
    let content = structured(&refused);
    assert_eq!(
        content["error"]["kind"],
        json!("invalid_arguments"),
        "{content}"
    );
    let message = content["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("10000000 character comparisons")
            && message.contains("by feature 1")
            && message.contains("GDAL_MCP_MAX_LIKE_STEPS")
            && message.contains("'P-%'"),
        "{message}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");

    let runs = format!("code LIKE '{}'", "%a".repeat(17));
    let refused = server
        .call(
            "vector_query",
            json!({"input": "long.geojson", "where": runs}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("17 runs of '%', more than the 16"),
        "{}",
        text(&refused)
    );

    let clean = server
        .call(
            "vector_query",
            json!({"input": "long.geojson", "where": "code LIKE 'aaa%'", "fields": [],
                   "limit": 1}),
        )
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["matched"], json!(40));
}

/// 2,000 wells at latitude 89° N, every 0.18° of longitude, round a town at the pole: each is
/// exactly as far from it (the ellipsoid is symmetric about its axis; PROJ's `geod` gives
/// 111693.865 m from 89° N to the pole), so all 2,000 tie.
fn ring_round_the_pole(server: &Server, towns: usize) -> (std::path::PathBuf, std::path::PathBuf) {
    let wells: Vec<(Value, [f64; 2])> = (0..2000)
        .map(|k| {
            (
                json!({"name": format!("w{k}")}),
                [-180.0 + k as f64 * 0.18, 89.0],
            )
        })
        .collect();
    let town: Vec<(Value, [f64; 2])> = (0..towns)
        .map(|i| (json!({"town": format!("t{i}")}), [0.0, 90.0]))
        .collect();
    let (t, w) = (server.path("towns.geojson"), server.path("wells.geojson"));
    points(&t, &town);
    points(&w, &wells);
    (t, w)
}

/// Regression (issue 21, attack finding F6): thousands of join features at exactly one
/// distance from thousands of targets made `nearest` quadratic (389 s, 1.9 GB). One town
/// with 2,000 tied wells joins all of them, says so, and names the first 10 with the list
/// said to be cut; the result still matches the tool's output schema (the harness checks
/// every result).
#[tokio::test]
async fn two_thousand_exact_ties_are_joined_counted_and_listed_cut() {
    let server = start_with(&[]).await;
    let (towns, wells) = ring_round_the_pole(&server, 1);
    let output = server.path("near.gpkg");
    let result = server
        .call(
            "vector_join",
            json!({"input": towns.display().to_string(), "join": wells.display().to_string(),
                   "predicate": "nearest", "fields": ["name"], "stats": ["first"],
                   "output": output.display().to_string()}),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    let content = structured(&result);
    assert_eq!(content["ties"], json!(1), "{content}");
    assert_eq!(read_field(&output, "join_count"), vec![json!(2000)]);
    assert_eq!(read_field(&output, "name_first"), vec![json!("w0")]);
    let distance = read_field(&output, "join_distance_m")[0].as_f64().unwrap();
    assert!((distance - 111_693.865).abs() < 0.01, "{distance}");
    let notes = content["notes"].to_string();
    assert!(
        notes.contains("target feature 0 has 2000 join features tied")
            && notes.contains("join feature ids: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...")
            && notes.contains("the list is cut at the first 10; 1990 more"),
        "{notes}"
    );
}

/// The same ring round 100 towns at the pole is 200,000 pairs to measure: with the nearest
/// budget at 100,000 (`GDAL_MCP_MAX_NEAREST_PAIRS`) the call is refused at town 51 of 100,
/// before its pairs are measured, naming the budget, its variable and `max_distance`; nothing
/// is written. The narrower call the error suggests (`max_distance` 100 km, short of the ring)
/// measures nothing and answers: no town has a well that near.
#[tokio::test]
async fn nearest_past_its_pair_budget_is_refused_and_max_distance_narrows_it() {
    let server = start_with(&[("GDAL_MCP_MAX_NEAREST_PAIRS", "100000")]).await;
    let (towns, wells) = ring_round_the_pole(&server, 100);
    let call = |output: &str, extra: Value| {
        let mut arguments = json!({"input": towns.display().to_string(),
                                   "join": wells.display().to_string(),
                                   "predicate": "nearest", "fields": ["name"],
                                   "stats": ["first"],
                                   "output": server.path(output).display().to_string()});
        if let (Some(a), Some(e)) = (arguments.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        server.call("vector_join", arguments)
    };
    let refused = call("all.gpkg", json!({})).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let content = structured(&refused);
    assert_eq!(
        content["error"]["kind"],
        json!("invalid_arguments"),
        "{content}"
    );
    let message = content["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("more than 100000 target–join pairs")
            && message.contains("at target feature 51 of 100")
            && message.contains("alone has 2000 join features")
            && message.contains("GDAL_MCP_MAX_NEAREST_PAIRS")
            && message.contains("max_distance"),
        "{message}"
    );
    assert!(!server.path("all.gpkg").exists());

    let narrow = call("narrow.gpkg", json!({"max_distance": 100, "unit": "km"}))
        .await
        .unwrap();
    assert!(!is_error(&narrow), "{}", text(&narrow));
    let content = structured(&narrow);
    assert_eq!(content["matched"], json!(0), "{content}");
    assert_eq!(content["unmatched"], json!(100), "{content}");
}

/// Regression (issue 21): `provenance_report` hashed whole files on the read-only tools'
/// slots, so four calls on a sparse 64 GiB file kept `raster_info` unanswered for over a
/// minute. Above the hashing budget (2 GiB by default) the file gets a partial digest,
/// labelled `partial-sha256:` in the result and named as such in the report, and the four
/// calls run on the hashing slots: `raster_info`, sent beside them, answers promptly.
#[tokio::test]
async fn provenance_of_a_sparse_64_gib_file_is_partial_and_leaves_raster_info_alone() {
    let server = start_with_data(&[], &["dem.tif"]).await;
    sparse_64_gib(&server.path("huge.bin"));
    let started = Instant::now();
    let reports = futures::future::join_all((0..4).map(|_| {
        server.call(
            "provenance_report",
            json!({"input": "huge.bin", "format": "markdown"}),
        )
    }));
    let info = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let asked = Instant::now();
        let info = server
            .call("raster_info", json!({"input": "dem.tif"}))
            .await
            .unwrap();
        (info, asked.elapsed())
    };
    let (reports, (info, info_took)) = futures::join!(reports, info);
    assert!(!is_error(&info), "{}", text(&info));
    assert!(
        info_took < Duration::from_secs(20),
        "raster_info took {info_took:?}"
    );
    for report in reports {
        let report = report.unwrap();
        assert!(!is_error(&report), "{}", text(&report));
        let content = structured(&report);
        let digest = content["sha256"].as_str().unwrap_or_default();
        assert!(
            digest.starts_with("partial-sha256:") && digest.len() == 15 + 64,
            "{content}"
        );
        let markdown = content["report"].as_str().unwrap_or_default();
        assert!(
            markdown.contains("partial digest `partial-sha256:")
                && markdown.contains("not its whole content")
                && !markdown.contains("SHA-256 `"),
            "{markdown}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// A line-level session with a server started with `env`: requests go in, replies come out
/// through a channel (so a test can wait with a timeout).
struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    replies: std::sync::mpsc::Receiver<Value>,
}

impl Raw {
    fn start(workspace: &Path, env: &[(&str, &str)]) -> Self {
        let mut child = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
            .arg("serve")
            .arg("--workspace")
            .arg(workspace)
            .arg("--cache-dir")
            .arg(gdal_mcp_tests::shared_cache())
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    if sender.send(value).is_err() {
                        break;
                    }
                }
            }
        });
        let mut raw = Self {
            child,
            stdin,
            replies,
        };
        raw.send(
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":"t","version":"1"}}}),
        );
        raw.wait_for(0, Duration::from_secs(60)).unwrap();
        raw.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        raw
    }

    fn send(&mut self, message: Value) {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .unwrap();
        self.stdin.flush().unwrap();
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":tool,"arguments":arguments}}));
    }

    /// The reply to `id`, or `None` after `timeout` (other replies are dropped).
    fn wait_for(&mut self, id: u64, timeout: Duration) -> Option<Value> {
        let until = Instant::now() + timeout;
        loop {
            let left = until.checked_duration_since(Instant::now())?;
            match self.replies.recv_timeout(left) {
                Ok(reply) if reply["id"] == json!(id) => return Some(reply),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Hashing is cancellable and has slots of its own (issue 21). With the byte budget raised
/// above 64 GiB, four `provenance_report` calls hash a sparse 64 GiB file whole (tens of
/// seconds each): two hold the hashing slots and two wait for them. `raster_info` still
/// answers at once (before, the four held all four read slots and it waited for a minute).
/// The four are then cancelled, and a fifth `provenance_report`, on a small file, answers
/// promptly: the cancelled hashing stopped between chunks and gave its slots back (it would
/// otherwise hold them until the whole 64 GiB were read).
#[test]
fn cancelled_hashing_gives_its_slots_back_and_never_took_the_read_slots() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    sparse_64_gib(&workspace.path().join("huge.bin"));
    std::fs::write(workspace.path().join("small.bin"), b"small").unwrap();
    let mut raw = Raw::start(
        workspace.path(),
        &[("GDAL_MCP_HASH_MAX_BYTES", "100000000000")],
    );
    for id in 10..14 {
        raw.call(id, "provenance_report", json!({"input": "huge.bin"}));
    }
    std::thread::sleep(Duration::from_millis(500));
    let asked = Instant::now();
    raw.call(20, "raster_info", json!({"input": "dem.tif"}));
    let info = raw.wait_for(20, Duration::from_secs(120)).unwrap();
    assert!(info["result"]["isError"] != json!(true), "{info}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "raster_info took {:?} beside four hashing calls",
        asked.elapsed()
    );
    for id in 10..14 {
        raw.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                        "params":{"requestId":id,"reason":"test"}}));
    }
    let asked = Instant::now();
    raw.call(21, "provenance_report", json!({"input": "small.bin"}));
    let small = raw.wait_for(21, Duration::from_secs(120)).unwrap();
    assert!(small["result"]["isError"] != json!(true), "{small}");
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "the small report waited {:?} for a hashing slot",
        asked.elapsed()
    );
}

/// One `vector_join` call on a server started with `env`'s budgets: `input` joined with `join`
/// into `output`, with `extra` arguments.
async fn join_call(
    server: &Server,
    input: &str,
    join: &str,
    output: &str,
    extra: Value,
) -> CallToolResult {
    let mut arguments = json!({"input": server.path(input).display().to_string(),
                               "join": server.path(join).display().to_string(),
                               "output": server.path(output).display().to_string()});
    if let (Some(a), Some(e)) = (arguments.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    server.call("vector_join", arguments).await.unwrap()
}

/// A refused join: kind `kind`, a message holding every one of `parts`, nothing written.
fn assert_refused(
    server: &Server,
    result: &CallToolResult,
    output: &str,
    kind: &str,
    parts: &[&str],
) {
    assert!(is_error(result), "{}", text(result));
    let content = structured(result);
    assert_eq!(content["error"]["kind"], json!(kind), "{content}");
    let message = content["error"]["message"].as_str().unwrap_or_default();
    for part in parts {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert!(!server.path(output).exists(), "{output} was written");
}

/// A GeoJSON polygon layer in EPSG:4326 of `(properties, [west, south, east, north])`.
fn boxes(path: &Path, features: &[(Value, [f64; 4])]) {
    let features: Vec<Value> = features
        .iter()
        .map(|(p, [w, s, e, n])| {
            json!({"type": "Feature", "properties": p,
                   "geometry": {"type": "Polygon",
                                "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}})
        })
        .collect();
    let doc = json!({
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::4326"}},
        "features": features,
    });
    std::fs::write(path, doc.to_string()).unwrap();
}

/// Regression (issue 21, budgets of the vector tools): a key shared by every feature of both
/// layers matched every target to every join feature (`matches[i] = found.clone()` per
/// target: targets × join features held, without a bound). 300 targets and 300 join features
/// with the one key "a" are 90,000 pairs; with `GDAL_MCP_MAX_JOIN_MATCHES` at 50,000 the call is
/// refused at target 167 of 300 (167 × 300 = 50,100 > 50,000), naming the budget and its
/// variable; nothing is written. The clean twin, on the same server, joins by construction:
/// "2" matches two join features, "3" none, and "001" matches "1" only if leading zeros are
/// ignored (said in a note, not joined).
#[tokio::test]
async fn a_key_shared_by_both_layers_is_refused_past_the_match_budget() {
    let server = start_with(&[("GDAL_MCP_MAX_JOIN_MATCHES", "50000")]).await;
    let same: Vec<(Value, [f64; 2])> = (0..300)
        .map(|i| (json!({"code": "a"}), [i as f64 * 0.001, 0.0]))
        .collect();
    points(&server.path("targets.geojson"), &same);
    points(&server.path("owners.geojson"), &same);
    let refused = join_call(
        &server,
        "targets.geojson",
        "owners.geojson",
        "all.gpkg",
        json!({"key": "code"}),
    )
    .await;
    assert_refused(
        &server,
        &refused,
        "all.gpkg",
        "invalid_arguments",
        &[
            "key \"code\" join would hold more than 50000 matched target–join pairs",
            "GDAL_MCP_MAX_JOIN_MATCHES",
            "at target feature 167 of 300",
            "alone matches 300 join features",
        ],
    );

    points(
        &server.path("parcels.geojson"),
        &[
            (json!({"code": "001"}), [0.0, 0.0]),
            (json!({"code": "2"}), [0.0, 0.0]),
            (json!({"code": "3"}), [0.0, 0.0]),
        ],
    );
    points(
        &server.path("codes.geojson"),
        &[
            (json!({"code": "1"}), [0.0, 0.0]),
            (json!({"code": "2"}), [0.0, 0.0]),
            (json!({"code": "2"}), [0.0, 0.0]),
        ],
    );
    let clean = join_call(
        &server,
        "parcels.geojson",
        "codes.geojson",
        "clean.gpkg",
        json!({"key": "code"}),
    )
    .await;
    assert!(!is_error(&clean), "{}", text(&clean));
    let content = structured(&clean);
    assert_eq!(content["matched"], json!(1), "{content}");
    assert_eq!(content["unmatched"], json!(2), "{content}");
    assert!(
        content["notes"]
            .to_string()
            .contains("1 target keys match a join key only if leading zeros are ignored"),
        "{content}"
    );
    assert_eq!(
        read_field(&server.path("clean.gpkg"), "join_count"),
        vec![json!(0), json!(2), json!(0)]
    );
}

/// Regression (issue 21, budgets of the vector tools): a spatial predicate tested every pair
/// whose envelopes meet with GEOS, without a bound. 50 identical squares over 100 points are
/// 5,000 pairs; with `GDAL_MCP_MAX_JOIN_PAIRS` at 1,000 the call is refused at target 11 of 50,
/// before its pairs are tested. The twin, 5 squares over the same points (500 pairs), joins
/// all 100 points to each.
#[tokio::test]
async fn a_predicate_join_past_its_pair_budget_is_refused() {
    let server = start_with(&[("GDAL_MCP_MAX_JOIN_PAIRS", "1000")]).await;
    let inside: Vec<(Value, [f64; 2])> = (0..100)
        .map(|k| {
            (
                json!({"n": k}),
                [0.05 + (k % 10) as f64 * 0.1, 0.05 + (k / 10) as f64 * 0.1],
            )
        })
        .collect();
    points(&server.path("wells.geojson"), &inside);
    let square = |n: usize| -> Vec<(Value, [f64; 4])> {
        (0..n)
            .map(|i| (json!({"zone": i}), [0.0, 0.0, 1.0, 1.0]))
            .collect()
    };
    boxes(&server.path("many.geojson"), &square(50));
    boxes(&server.path("few.geojson"), &square(5));
    let refused = join_call(
        &server,
        "many.geojson",
        "wells.geojson",
        "many.gpkg",
        json!({"predicate": "intersects"}),
    )
    .await;
    assert_refused(
        &server,
        &refused,
        "many.gpkg",
        "invalid_arguments",
        &[
            "intersects join would test more than 1000 target–join pairs",
            "GDAL_MCP_MAX_JOIN_PAIRS",
            "at target feature 11 of 50",
            "alone has 100 candidates",
            "vector_clip",
        ],
    );
    let clean = join_call(
        &server,
        "few.geojson",
        "wells.geojson",
        "few.gpkg",
        json!({"predicate": "intersects"}),
    )
    .await;
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["matched"], json!(5));
    assert_eq!(
        read_field(&server.path("few.gpkg"), "join_count"),
        vec![json!(100); 5]
    );
}

/// Regression (issue 21, budgets of the vector tools): each target scanned the join features
/// sorted by west edge up to its own east edge, so targets east of everything scanned them
/// all (targets × join features comparisons, unbounded). 20 targets at 100° E over 1,000 join
/// points between 0° and 10° E scan 1,000 each; with `GDAL_MCP_MAX_JOIN_COMPARISONS` at 5,000
/// the call is refused at target 6 of 20. The twin: 4 targets on join points 0, 1, 2 and 3
/// (a scan of 1 to 4 each) each intersect exactly their own point.
#[tokio::test]
async fn a_join_scan_past_its_comparison_budget_is_refused() {
    let server = start_with(&[("GDAL_MCP_MAX_JOIN_COMPARISONS", "5000")]).await;
    let at = |k: usize| [k as f64 * 0.01, 0.0];
    let wells: Vec<(Value, [f64; 2])> = (0..1000).map(|k| (json!({"n": k}), at(k))).collect();
    points(&server.path("wells.geojson"), &wells);
    let east: Vec<(Value, [f64; 2])> = (0..20).map(|i| (json!({"t": i}), [100.0, 0.0])).collect();
    points(&server.path("east.geojson"), &east);
    let refused = join_call(
        &server,
        "east.geojson",
        "wells.geojson",
        "east.gpkg",
        json!({"predicate": "intersects"}),
    )
    .await;
    assert_refused(
        &server,
        &refused,
        "east.gpkg",
        "invalid_arguments",
        &[
            "intersects join would compare more than 5000 envelopes",
            "GDAL_MCP_MAX_JOIN_COMPARISONS",
            "at target feature 6 of 20",
            "whose scan alone compares 1000",
        ],
    );
    let on: Vec<(Value, [f64; 2])> = (0..4).map(|k| (json!({"t": k}), at(k))).collect();
    points(&server.path("on.geojson"), &on);
    let clean = join_call(
        &server,
        "on.geojson",
        "wells.geojson",
        "on.gpkg",
        json!({"predicate": "intersects", "fields": ["n"], "stats": ["first"]}),
    )
    .await;
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(
        read_field(&server.path("on.gpkg"), "join_count"),
        vec![json!(1); 4]
    );
    // An Integer field's first value keeps its type (R21-B13).
    assert_eq!(
        read_field(&server.path("on.gpkg"), "n_first"),
        vec![json!(0), json!(1), json!(2), json!(3)]
    );
}

/// Regression (issue 21, budgets of the vector tools): the summaries read every matched
/// pair's values per field and wrote every target's added columns, without a bound. 10
/// targets matching 10 join features by key, summarised with sum, min and max of `v`, read
/// 100 values and write 10 × 4 columns: 140, refused with `GDAL_MCP_MAX_JOIN_VALUES` at 120.
/// The twin with `sum` alone (100 + 10 × 2 = 120, within) gives 1 + ... + 10 = 55 to each.
#[tokio::test]
async fn join_summaries_past_their_value_budget_are_refused() {
    let server = start_with(&[("GDAL_MCP_MAX_JOIN_VALUES", "120")]).await;
    let targets: Vec<(Value, [f64; 2])> = (0..10)
        .map(|_| (json!({"code": "a"}), [0.0, 0.0]))
        .collect();
    let values: Vec<(Value, [f64; 2])> = (1..=10)
        .map(|v| (json!({"code": "a", "v": v}), [0.0, 0.0]))
        .collect();
    points(&server.path("targets.geojson"), &targets);
    points(&server.path("values.geojson"), &values);
    let refused = join_call(
        &server,
        "targets.geojson",
        "values.geojson",
        "three.gpkg",
        json!({"key": "code", "fields": ["v"], "stats": ["sum", "min", "max"]}),
    )
    .await;
    assert_refused(
        &server,
        &refused,
        "three.gpkg",
        "invalid_arguments",
        &[
            "summarise and write 140 values, more than 120",
            "GDAL_MCP_MAX_JOIN_VALUES",
            "100 matched pairs × 1 fields read, and 10 target features × 4 columns written",
        ],
    );
    let clean = join_call(
        &server,
        "targets.geojson",
        "values.geojson",
        "sum.gpkg",
        json!({"key": "code", "fields": ["v"], "stats": ["sum"]}),
    )
    .await;
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(
        read_field(&server.path("sum.gpkg"), "v_sum"),
        vec![json!(55.0); 10]
    );
}

/// Regression (issue 21, budgets of the vector tools): a key join's index of join keys held
/// the keys' text outside the memory budget all calls share. 400 distinct keys of 25,000
/// characters are 10 MB of index, more than an 8 MiB budget: refused as `memory_budget`,
/// naming the index. The twin, the same layers keyed by short codes, joins each of 3 targets to the
/// one join feature with its code.
#[tokio::test]
async fn a_key_index_of_long_keys_takes_its_memory_from_the_shared_budget() {
    let server = start_with(&[
        ("GDAL_MCP_MEMORY_BUDGET_BYTES", "8388608"),
        ("GDAL_MCP_MEMORY_WAIT_MS", "100"),
    ])
    .await;
    let long = "k".repeat(25_000);
    let keyed: Vec<(Value, [f64; 2])> = (0..400)
        .map(|k| {
            (
                json!({"code": format!("{k}{long}"), "short": format!("c{k}")}),
                [0.0, 0.0],
            )
        })
        .collect();
    points(&server.path("keys.geojson"), &keyed);
    let targets: Vec<(Value, [f64; 2])> = [0, 7, 399]
        .iter()
        .map(|k| (json!({"code": "x", "short": format!("c{k}")}), [0.0, 0.0]))
        .collect();
    points(&server.path("targets.geojson"), &targets);
    let refused = join_call(
        &server,
        "targets.geojson",
        "keys.geojson",
        "long.gpkg",
        json!({"key": "code"}),
    )
    .await;
    assert_refused(
        &server,
        &refused,
        "long.gpkg",
        "memory_budget",
        &[
            "vector_join: the index of join keys",
            "GDAL_MCP_MEMORY_BUDGET_BYTES",
        ],
    );
    let clean = join_call(
        &server,
        "targets.geojson",
        "keys.geojson",
        "short.gpkg",
        json!({"key": "short"}),
    )
    .await;
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["matched"], json!(3));
    assert_eq!(
        read_field(&server.path("short.gpkg"), "join_count"),
        vec![json!(1); 3]
    );
}

/// Regression (issue 21, budgets of the vector tools): the search for overlapping polygons
/// (`vector_measure`, and `vector_join`'s sums before the gate) tested every pair whose
/// envelopes meet with GEOS: 50,000 polygons stacked on one another were 1.25 × 10⁹ tests.
/// 60 identical squares are 1,770 pairs; with `GDAL_MCP_MAX_OVERLAP_PAIRS` at 1,000 the call
/// is refused at polygon 21 of 60 (59 + 58 + ... + 39 = 1,029 > 1,000). The twin, 40 squares
/// (780 pairs), finds all 40 × 39 / 2 = 780 overlapping pairs.
#[tokio::test]
async fn overlap_search_past_its_pair_budget_is_refused() {
    let server = start_with(&[("GDAL_MCP_MAX_OVERLAP_PAIRS", "1000")]).await;
    let stack = |n: usize| -> Vec<(Value, [f64; 4])> {
        (0..n)
            .map(|i| (json!({"i": i}), [10.0, 10.0, 10.01, 10.01]))
            .collect()
    };
    boxes(&server.path("sixty.geojson"), &stack(60));
    boxes(&server.path("forty.geojson"), &stack(40));
    let refused = server
        .call(
            "vector_measure",
            json!({"input": "sixty.geojson", "overlaps": "count_each"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let message = structured(&refused)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for part in [
        "input: looking for overlapping polygons would test more than 1000 pairs",
        "GDAL_MCP_MAX_OVERLAP_PAIRS",
        "at polygon 21 of 60",
        "alone meets 39 others",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let clean = server
        .call(
            "vector_measure",
            json!({"input": "forty.geojson", "overlaps": "count_each"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["overlaps"]["pairs"], json!(780));
}

/// Regression (issue 21, budgets of the vector tools): `vector_overlay` handed GDAL's layer
/// algebra every pair of features whose envelopes meet, without a bound on the GEOS work or
/// on the pieces GDAL holds in memory. 50 identical squares over 50 identical squares are
/// 2,500 pairs; with `GDAL_MCP_MAX_OVERLAY_PAIRS` at 1,000 the call is refused at input
/// feature 21 of 50 (21 × 50 = 1,050), before GDAL runs. The twin, 10 squares over the same 50
/// (500 pairs), intersects into 500 squares.
#[tokio::test]
async fn an_overlay_past_its_pair_budget_is_refused_before_gdal_runs() {
    let server = start_with(&[("GDAL_MCP_MAX_OVERLAY_PAIRS", "1000")]).await;
    let stack = |n: usize| -> Vec<(Value, [f64; 4])> {
        (0..n)
            .map(|i| (json!({"i": i}), [10.0, 10.0, 10.01, 10.01]))
            .collect()
    };
    boxes(&server.path("fifty.geojson"), &stack(50));
    boxes(&server.path("ten.geojson"), &stack(10));
    boxes(&server.path("zones.geojson"), &stack(50));
    let call = |input: &str, output: &str| {
        server.call(
            "vector_overlay",
            json!({"input": input, "overlay": "zones.geojson", "operation": "intersection",
                   "output": output}),
        )
    };
    let refused = call("fifty.geojson", "fifty.gpkg").await.unwrap();
    assert_refused(
        &server,
        &refused,
        "fifty.gpkg",
        "invalid_arguments",
        &[
            "the intersection overlay would intersect more than 1000 pairs",
            "GDAL_MCP_MAX_OVERLAY_PAIRS",
            "at input feature 21 of 50",
            "alone meets 50 overlay features",
        ],
    );
    let clean = call("ten.geojson", "ten.gpkg").await.unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["features"], json!(500));
}

/// Regression, issue 21 attack round 7, R7-11: `vector_overlay`'s result (and GDAL's memory
/// copies of both layers) were outside the memory budget all calls share: five concurrent
/// intersections of 1000 strips by 1000 strips held 1,000,000 result polygons each, 5.1 GB,
/// and none waited. The result is now charged as GDAL builds it. Here 200 horizontal strips by
/// 200 vertical ones make 40,000 squares (about 38 MiB charged) under a 32 MiB budget: refused
/// as `memory_budget` naming the overlay and the variable, nothing written (before, only the
/// 29 MiB read back of the result was charged, and it ran). The clean twin: 20 by 20 strips
/// (400 squares) intersect under the same budget.
#[tokio::test]
async fn r7_11_an_overlays_result_is_charged_to_the_shared_memory_budget() {
    let server = start_with(&[
        ("GDAL_MCP_MEMORY_BUDGET_BYTES", "33554432"),
        ("GDAL_MCP_MEMORY_WAIT_MS", "200"),
    ])
    .await;
    let strips = |n: usize, horizontal: bool| -> Vec<(Value, [f64; 4])> {
        (0..n)
            .map(|i| {
                let (a, b) = (i as f64 * 0.1, i as f64 * 0.1 + 0.05);
                let far = n as f64 * 0.1;
                let bounds = if horizontal {
                    [0.0, a, far, b]
                } else {
                    [a, 0.0, b, far]
                };
                (json!({"i": i}), bounds)
            })
            .collect()
    };
    for (n, tag) in [(200, "big"), (20, "small")] {
        boxes(&server.path(&format!("h_{tag}.geojson")), &strips(n, true));
        boxes(&server.path(&format!("v_{tag}.geojson")), &strips(n, false));
    }
    let call = |tag: &str| {
        server.call(
            "vector_overlay",
            json!({"input": format!("h_{tag}.geojson"), "overlay": format!("v_{tag}.geojson"),
                   "operation": "intersection", "output": format!("{tag}.gpkg")}),
        )
    };
    let refused = call("big").await.unwrap();
    assert_refused(
        &server,
        &refused,
        "big.gpkg",
        "memory_budget",
        &[
            "vector_overlay: the intersection overlay's layers and result",
            "GDAL_MCP_MEMORY_BUDGET_BYTES",
        ],
    );
    let clean = call("small").await.unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["features"], json!(400));
}

/// Regression (issue 21): a gated call's gather hashes its inputs for the lineage, and that
/// hashing ignored `notifications/cancelled`: with the byte budget raised above 64 GiB, eight
/// `raster_convert` calls of a GeoTIFF padded to a sparse 64 GiB held all eight GDAL slots
/// for minutes after they were cancelled. Hashing now stops between chunks: the read tools
/// answer meanwhile, and once the eight are cancelled (no reply is due to a cancelled
/// request) a ninth call on the unpadded twin gets a slot and converts within seconds, and
/// nothing of the cancelled ones is written.
#[test]
fn a_gated_calls_input_hashing_stops_when_cancelled() {
    let workspace = tempfile::tempdir().unwrap();
    let dem = gdal_mcp_tests::testdata().unwrap().join("dem.tif");
    std::fs::copy(&dem, workspace.path().join("dem.tif")).unwrap();
    std::fs::copy(&dem, workspace.path().join("padded.tif")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(workspace.path().join("padded.tif"))
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let mut raw = Raw::start(
        workspace.path(),
        &[
            ("GDAL_MCP_HASH_MAX_BYTES", "100000000000"),
            ("GDAL_MCP_HASH_MAX_SECONDS", "3600"),
        ],
    );
    for id in 10..18 {
        raw.call(
            id,
            "raster_convert",
            json!({"input": "padded.tif", "output": format!("out{id}.tif")}),
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let asked = Instant::now();
    raw.call(20, "raster_info", json!({"input": "dem.tif"}));
    let info = raw.wait_for(20, Duration::from_secs(60)).unwrap();
    assert!(info["result"]["isError"] != json!(true), "{info}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    for id in 10..18 {
        raw.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                        "params":{"requestId":id,"reason":"test"}}));
    }
    let asked = Instant::now();
    raw.call(
        30,
        "raster_convert",
        json!({"input": "dem.tif", "output": "twin.tif"}),
    );
    let twin = raw.wait_for(30, Duration::from_secs(120)).unwrap();
    assert!(twin["result"]["isError"] != json!(true), "{twin}");
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "the twin waited {:?} for a slot held by cancelled hashing",
        asked.elapsed()
    );
    for id in 10..18 {
        assert!(!workspace.path().join(format!("out{id}.tif")).exists());
    }
}

/// Attack round 10, R10-14: arguments were parsed before a call waited for one of its slots,
/// and nothing bounded how many waited: six pending calls of 15.6 MB held 1.0 GB. A call whose
/// arguments pass 1 MiB is refused at once, naming the size and what to do, before it waits;
/// the server answers the next call. The twin: 1,000,000 characters of `input` (an argument
/// the server must echo capped, `errors_cap_the_caller_text_they_echo`) still reach the tool.
#[tokio::test]
async fn r10_14_arguments_over_a_mebibyte_are_refused_before_they_wait() {
    let server = start_with_data(&[], &["dem.tif"]).await;
    let huge = "x".repeat(2 << 20);
    let result = server
        .call(
            "raster_reproject",
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326",
                   "resampling": "bilinear", "justification": {"intent": huge}}),
        )
        .await
        .unwrap();
    assert!(is_error(&result));
    let message = text(&result);
    assert!(
        message.contains("a call may take at most 1048576") && message.len() < 20_000,
        "{}",
        &message[..message.len().min(600)]
    );
    assert!(!server.path("o.tif").exists());
    let twin = server
        .call("raster_info", json!({"input": "q".repeat(1_000_000)}))
        .await
        .unwrap();
    assert!(is_error(&twin));
    assert!(!text(&twin).contains("a call may take"), "{}", text(&twin));
    let info = server
        .call("raster_info", json!({"input": "dem.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
}

/// Attack round 11, R11-1: R10-14's cap counted arguments as text, so a 1.36 MB line of
/// 340,000 empty arrays (13.7 MB once parsed) passed it, and 40 such calls waiting for a slot
/// held 535 MB. Arguments are now counted at their memory once parsed: that line is refused
/// at once, before it waits, naming the cost; 1,000 points (about 100 KB) still reach a tool.
#[tokio::test]
async fn r11_1_arguments_are_counted_at_their_memory_once_parsed() {
    let server = start_with_data(&[], &["dem.tif"]).await;
    let empties = vec![json!([]); 340_000];
    let result = server
        .call(
            "raster_calc",
            json!({"inputs": {"a": "dem.tif"}, "expression": "a", "output": "o.tif",
                   "creation_options": empties}),
        )
        .await
        .unwrap();
    assert!(is_error(&result));
    let message = text(&result);
    assert!(
        message.contains("bytes of memory once parsed")
            && message.contains("a call may take at most 1048576"),
        "{}",
        &message[..message.len().min(600)]
    );
    assert!(!server.path("o.tif").exists());
    let points: Vec<Value> = (0..1000)
        .map(|i| json!([500_000.0 + f64::from(i), 5_000_000.0]))
        .collect();
    let twin = server
        .call(
            "raster_sample",
            json!({"input": "dem.tif", "coordinates": points}),
        )
        .await
        .unwrap();
    assert!(!text(&twin).contains("a call may take"), "{}", text(&twin));
}

/// Attack round 13, R13-9: R11-1's bound counted a call's `arguments` only, and a request's
/// `_meta` (kept with the request while the call waits for a slot) was neither capped nor
/// held: 16 waiting calls with 4.5 MB lines of `_meta` held 1.1 GB. A `_meta` past 256 KiB
/// once parsed is answered at once with a JSON-RPC error naming it; one under it counts with
/// the arguments against the call's 1 MiB; a small `_meta` (a progress token) runs.
#[tokio::test]
async fn r13_9_a_requests_meta_counts_against_the_call_bound() {
    use rmcp::model::{CallToolRequestParams, CallToolResponse, MetaObject, RequestMetaObject};
    let server = start_with_data(&[], &["dem.tif"]).await;
    let meta = |key: &str, value: Value| {
        let mut map = serde_json::Map::new();
        map.insert(key.to_string(), value);
        RequestMetaObject(MetaObject(map))
    };
    // The call with `_meta`: a JSON-RPC error as text, or the tool's result.
    let call = |meta: RequestMetaObject, arguments: Value| {
        let mut params = CallToolRequestParams::new("raster_info")
            .with_arguments(arguments.as_object().unwrap().clone());
        params.meta = Some(meta);
        let peer = server.client.peer().clone();
        async move {
            match peer.call_tool_once(params).await {
                Err(e) => Err(e.to_string()),
                Ok(CallToolResponse::Complete(result)) => Ok(result),
                Ok(other) => panic!("unexpected response: {other:?}"),
            }
        }
    };
    let input = json!({"input": "dem.tif"});
    let refused = call(meta("x", json!(vec![json!([]); 300_000])), input.clone())
        .await
        .unwrap_err();
    assert!(refused.contains("\"_meta\" takes"), "{refused}");
    // Under the transport's cap, but with the arguments past the call's 1 MiB.
    let with_long = json!({"input": "dem.tif", "note": "n".repeat(1_000_000)});
    let result = call(meta("x", json!(vec![json!([]); 3_000])), with_long)
        .await
        .unwrap();
    assert!(is_error(&result));
    let message = text(&result);
    assert!(
        message.contains("bytes of memory once parsed") && message.contains("`_meta`"),
        "{}",
        &message[..message.len().min(600)]
    );
    let twin = call(meta("progressToken", json!("p-1")), input)
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));
}
