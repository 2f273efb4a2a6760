//! The chain over real stdio: `raster_reproject` (bilinear) → `dem_condition` →
//! `dem_flow_accumulation` → `dem_streams`, with lineage checked at every step: the records'
//! digests, the upstream facts the hydrology domain cites, chained decisions, the methods
//! section, PROV-JSON, renaming (kept) and editing (flagged). Then stale capsules under
//! `--stale warn|refuse`, and the upstream rules of the aggregation and format domains.

use gdal_mcp_tests::{
    call_justified, is_error, justification, plugin_component, repo_root, structured, text, Era,
    Options, Server,
};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A 80 x 80 geographic DEM (EPSG:4326, 0.0005°, at 15°E 45°N): a V-shaped valley falling
/// south, with three pits.
fn write_geographic_dem(path: &Path) {
    let mut asc =
        String::from("ncols 80\nnrows 80\nxllcorner 15.0\nyllcorner 45.0\ncellsize 0.0005\n");
    for row in 0..80 {
        let line: Vec<String> = (0..80)
            .map(|col| {
                let mut z = 100.0 + 2.0 * (col as f64 - 40.0).abs() + 0.5 * (80 - row) as f64;
                if [(20, 30), (50, 41), (65, 55)].contains(&(row, col)) {
                    z -= 6.0;
                }
                format!("{z:.2}")
            })
            .collect();
        asc.push_str(&line.join(" "));
        asc.push('\n');
    }
    let grid = path.with_extension("asc");
    std::fs::write(&grid, asc).unwrap();
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-a_srs", "EPSG:4326"])
        .arg(&grid)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The entry of `domain` in a refusal.
fn entry_of(refusal: &Value, domain: &str) -> Value {
    refusal["refusal"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["domain"] == domain))
        .cloned()
        .unwrap_or_else(|| panic!("{domain} did not gate: {refusal}"))
}

fn evidence<'a>(entry: &'a Value, id: &str) -> &'a Value {
    entry["evidence"]
        .as_array()
        .and_then(|items| items.iter().find(|e| e["id"] == id))
        .unwrap_or_else(|| panic!("no evidence {id}: {entry}"))
}

async fn provenance(server: &Server, input: &str, format: &str) -> Value {
    let result = server
        .call(
            "provenance_report",
            json!({"input": input, "format": format}),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    structured(&result)
}

#[tokio::test]
async fn a_chain_of_four_steps_knows_how_each_output_was_made() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_geographic_dem(&server.path("dem.tif"));

    // 1. Bilinear reprojection to UTM 33N.
    let step = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "dem.tif", "output": "dem_utm.tif", "dst_crs": "EPSG:32633",
               "resampling": "bilinear"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let reprojected = structured(&step.result);
    let utm_sha = sha256(&server.path("dem_utm.tif"));
    assert_eq!(
        reprojected["lineage"],
        json!([format!("lineage://{utm_sha}")])
    );

    // 2. Conditioning: the hydrology trigger cites the upstream bilinear reprojection.
    let first = server
        .call(
            "dem_condition",
            json!({"input": "dem_utm.tif", "output": "dem_filled.tif",
                                      "method": "fill"}),
        )
        .await
        .unwrap();
    let entry = entry_of(&structured(&first), "hydrology");
    let fact = evidence(&entry, "upstream_interpolation")["fact"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        fact.contains("raster_reproject") && fact.contains("bilinear"),
        "{fact}"
    );
    let step = call_justified(
        &server,
        "dem_condition",
        json!({"input": "dem_utm.tif", "output": "dem_filled.tif", "method": "fill"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let condition_capsules: Vec<String> = structured(&step.result)["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["capsule"].as_str().map(str::to_string))
        .collect();
    assert!(!condition_capsules.is_empty());

    // 3. Accumulation: two steps up now, and the upstream decisions are shown.
    let accumulate = json!({"input": "dem_filled.tif", "output": "acc.tif", "algorithm": "d8"});
    let first = server
        .call("dem_flow_accumulation", accumulate.clone())
        .await
        .unwrap();
    let refusal = structured(&first);
    let entry = entry_of(&refusal, "hydrology");
    let fact = evidence(&entry, "upstream_interpolation")["fact"]
        .as_str()
        .unwrap();
    assert!(
        fact.contains("raster_reproject") && fact.contains("2 steps up"),
        "{fact}"
    );
    let upstream: Vec<&str> = entry["upstream_decisions"]
        .as_array()
        .unwrap_or_else(|| panic!("no upstream decisions: {entry}"))
        .iter()
        .filter_map(|d| d["capsule"].as_str())
        .collect();
    for capsule in &condition_capsules {
        assert!(
            upstream.contains(&capsule.as_str()),
            "{capsule} not in {upstream:?}"
        );
    }
    let step = call_justified(&server, "dem_flow_accumulation", accumulate)
        .await
        .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    // The capsule stored for this call records the decisions it was taken on top of.
    let stored = structured(&step.result)["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "hydrology" && r["stored_now"] == true)
        .and_then(|r| r["capsule"].as_str())
        .map(str::to_string)
        .expect("a hydrology capsule stored by the accumulation call");
    let hex = stored.rsplit('/').next().unwrap();
    let capsule: Value = serde_json::from_str(
        &std::fs::read_to_string(
            server
                .justifications()
                .join(format!("hydrology/{hex}.json")),
        )
        .unwrap(),
    )
    .unwrap();
    for upstream in &condition_capsules {
        assert!(
            capsule["upstream_capsules"]
                .as_array()
                .unwrap()
                .contains(&json!(upstream)),
            "{capsule}"
        );
    }

    // 4. Streams from the conditioned DEM and the accumulation.
    let step = call_justified(
        &server,
        "dem_streams",
        json!({"input": "dem_filled.tif", "accumulation": "acc.tif", "output": "streams.tif",
               "threshold": 20}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let streams_sha = sha256(&server.path("streams.tif"));
    assert_eq!(
        structured(&step.result)["lineage"],
        json!([format!("lineage://{streams_sha}")])
    );

    // An accumulation in area units would make the threshold (cells) mean something else.
    let step = call_justified(
        &server,
        "dem_flow_accumulation",
        json!({"input": "dem_filled.tif", "output": "acc_area.tif", "algorithm": "d8",
               "units": "area"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let refused = call_justified(
        &server,
        "dem_streams",
        json!({"input": "dem_filled.tif", "accumulation": "acc_area.tif",
               "output": "streams_area.tif", "threshold": 20}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused.result));
    assert!(
        text(&refused.result).contains("not a D8 accumulation in cells"),
        "{}",
        text(&refused.result)
    );
    assert!(!server.path("streams_area.tif").exists());

    // The lineage resource: the record of the last step, with the inputs' true digests.
    let read = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "lineage://{streams_sha}"
        )))
        .await
        .unwrap();
    let body = serde_json::to_value(&read.contents).unwrap();
    let record: Value = serde_json::from_str(body[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(record["tool"], "dem_streams");
    let digests: Vec<&str> = record["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["sha256"].as_str())
        .collect();
    let filled_sha = sha256(&server.path("dem_filled.tif"));
    let acc_sha = sha256(&server.path("acc.tif"));
    assert!(digests.contains(&filled_sha.as_str()), "{record}");
    assert!(digests.contains(&acc_sha.as_str()), "{record}");
    assert_eq!(record["versions"]["gdal"], "3.6.2");
    assert!(record["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["digest"].as_str().is_some_and(|d| d.len() == 64)));
    assert!(body[1]["text"].as_str().unwrap().contains("# Methods"));

    // The methods section names each step, in order, and each decision.
    let report = provenance(&server, "streams.tif", "markdown").await;
    assert_eq!(report["steps"], 4, "{report}");
    let md = report["report"].as_str().unwrap();
    let positions: Vec<usize> = [
        "`raster_reproject`",
        "`dem_condition`",
        "`dem_flow_accumulation`",
        "`dem_streams`",
    ]
    .iter()
    .map(|tool| {
        md.find(tool)
            .unwrap_or_else(|| panic!("{tool} missing:\n{md}"))
    })
    .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{md}");
    assert!(md.contains("resampling with bilinear"), "{md}");
    assert!(md.contains("from EPSG:4326 to EPSG:32633"), "{md}");
    assert!(md.contains("Decision (hydrology"), "{md}");
    assert!(md.contains("GDAL 3.6.2"), "{md}");
    assert!(!md.contains("Flagged"), "{md}");

    // PROV-JSON: four activities, every file as an entity by digest. `./scripts/test.sh`
    // validates the saved document against the W3C schema (tests/python/prov_check.py).
    let prov = provenance(&server, "streams.tif", "prov_json").await;
    let document: Value = serde_json::from_str(prov["report"].as_str().unwrap()).unwrap();
    assert_eq!(
        document["activity"].as_object().unwrap().len(),
        4,
        "{document}"
    );
    for sha in [&utm_sha, &filled_sha, &acc_sha, &streams_sha] {
        assert!(
            document["entity"]
                .get(format!("file:sha256-{sha}"))
                .is_some(),
            "{sha} missing: {document}"
        );
    }
    let saved = repo_root().join("target/provenance");
    std::fs::create_dir_all(&saved).unwrap();
    std::fs::write(
        saved.join("chain.prov.json"),
        prov["report"].as_str().unwrap(),
    )
    .unwrap();

    // Renaming an intermediate keeps its lineage (records are keyed by content)...
    std::fs::rename(server.path("dem_filled.tif"), server.path("renamed.tif")).unwrap();
    let renamed = provenance(&server, "renamed.tif", "markdown").await;
    assert_eq!(renamed["steps"], 2, "{renamed}");
    assert_eq!(renamed["modified_since"], false);

    // ...and editing one breaks the link, flagged wherever it is used. (The edit keeps every
    // value, recompressed: `dem_streams` refuses an accumulation whose values are not this
    // DEM's own since attack round 14, R14-B20.)
    let status = Command::new("gdal_translate")
        .args(["-q", "-co", "COMPRESS=DEFLATE"])
        .arg(server.path("acc.tif"))
        .arg(server.path("acc_edited.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::rename(server.path("acc_edited.tif"), server.path("acc.tif")).unwrap();
    let edited = provenance(&server, "acc.tif", "markdown").await;
    assert_eq!(edited["steps"], 0, "{edited}");
    assert_eq!(edited["modified_since"], true, "{edited}");
    assert!(edited["report"]
        .as_str()
        .unwrap()
        .contains("modified outside"));
    let step = call_justified(
        &server,
        "dem_streams",
        json!({"input": "renamed.tif", "accumulation": "acc.tif", "output": "streams2.tif",
               "threshold": 20}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let flagged = provenance(&server, "streams2.tif", "markdown").await;
    assert_eq!(flagged["broken_links"], 1, "{flagged}");
    let md = flagged["report"].as_str().unwrap();
    assert!(md.contains("**Flagged:** input `acc.tif`"), "{md}");

    // The CLI writes the same report from the store.
    let out = Command::new(gdal_mcp_tests::binary().unwrap())
        .arg("provenance")
        .arg(server.path("streams.tif"))
        .args(["--format", "markdown", "--store"])
        .arg(server.workspace.path().join(".preflight"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("`dem_flow_accumulation`"), "{stdout}");
    let out = Command::new(gdal_mcp_tests::binary().unwrap())
        .arg("provenance")
        .arg(server.path("dem.tif"))
        .args(["--store"])
        .arg(server.workspace.path().join(".preflight"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "no lineage for a file the server did not make"
    );
}

/// The legacy 0.2 fixture with its prompt text edited in place, as a rebuilt component would
/// be: same id and version, other questions.
fn legacy_with_prompt(dir: &Path, edited: bool) {
    let mut bytes = std::fs::read(plugin_component("legacy_v02")).unwrap();
    if edited {
        let (from, to) = (b"Say it in `intent`", b"Put it in `intent`");
        let at = bytes
            .windows(from.len())
            .position(|w| w == from)
            .expect("the fixture's prompt text");
        bytes[at..at + to.len()].copy_from_slice(to);
    }
    std::fs::write(dir.join("legacy_v02.wasm"), bytes).unwrap();
}

/// A capsule for the same decision under an older prompt text is stale: `warn` (the default)
/// proceeds with a warn receipt naming it and what changed; `--stale refuse` asks again.
#[tokio::test]
async fn a_capsule_for_an_older_prompt_warns_by_default_and_is_refused_on_request() {
    let plugins = tempfile::tempdir().unwrap();
    legacy_with_prompt(plugins.path(), false);
    let options = Options {
        plugin_dirs: vec![plugins.path().to_path_buf()],
        ..Default::default()
    };
    let server = Server::start(Era::Legacy, options.clone()).await.unwrap();
    std::fs::write(
        server.path("p.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"a":1},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#,
    )
    .unwrap();
    let args = |output: &str| json!({"input": "p.geojson", "output": output});
    let mut answers = serde_json::Map::new();
    let refused = server.call("vector_convert", args("a.gpkg")).await.unwrap();
    for e in structured(&refused)["refusal"].as_array().unwrap() {
        let mut answer = justification("vector_convert");
        answer["intent"] = json!("convert for the legacy archive");
        answers.insert(e["domain"].as_str().unwrap().to_string(), answer);
    }
    let mut retry = args("a.gpkg");
    retry["justification"] = Value::Object(answers);
    let done = server.call("vector_convert", retry).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let Server {
        workspace, client, ..
    } = server;
    client.cancel().await.unwrap();

    // The rebuilt component asks other questions.
    legacy_with_prompt(plugins.path(), true);
    let client = Server::connect(Era::Legacy, workspace.path(), &options)
        .await
        .unwrap();
    let result = gdal_mcp_tests::call(&client, "vector_convert", args("b.gpkg"))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    let receipt = structured(&result)["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "legacy_pack")
        .cloned()
        .unwrap();
    assert_eq!(receipt["decision"], "warn", "{receipt}");
    let stale = receipt["stale"].as_str().unwrap();
    assert!(stale.contains("prompt text changed"), "{stale}");
    assert!(stale.contains("justification://legacy_pack/"), "{stale}");
    client.cancel().await.unwrap();

    let mut refusing = options.clone();
    refusing.extra_args = vec!["--stale".to_string(), "refuse".to_string()];
    let client = Server::connect(Era::Legacy, workspace.path(), &refusing)
        .await
        .unwrap();
    let result = gdal_mcp_tests::call(&client, "vector_convert", args("c.gpkg"))
        .await
        .unwrap();
    assert!(is_error(&result), "{}", text(&result));
    assert!(structured(&result)["refusal"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["domain"] == "legacy_pack"));
    assert!(!workspace.path().join("c.gpkg").exists());
}

/// A 20 x 20 class raster (Byte, EPSG:32633, 10 m): class 1 in the west half, 3 in the east.
fn write_classes(path: &Path) {
    let mut asc =
        String::from("ncols 20\nnrows 20\nxllcorner 500000\nyllcorner 4000000\ncellsize 10\n");
    for _ in 0..20 {
        let row: Vec<&str> = (0..20).map(|c| if c < 10 { "1" } else { "3" }).collect();
        asc.push_str(&row.join(" "));
        asc.push('\n');
    }
    let grid = path.with_extension("asc");
    std::fs::write(&grid, asc).unwrap();
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Byte", "-a_srs", "EPSG:32633"])
        .arg(&grid)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Upstream facts reach the other domains: a majority over classes that a bilinear resampling
/// interpolated upstream is critical (aggregation), and a second lossy encoding of an output
/// already encoded lossily is named (format_selection).
#[tokio::test]
async fn domains_see_interpolated_classes_and_a_second_lossy_encoding_upstream() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_classes(&server.path("classes.tif"));
    std::fs::write(
        server.path("zone.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"name":"all"},"geometry":{"type":"Polygon",
            "coordinates":[[[500020,4000020],[500180,4000020],[500180,4000180],[500020,4000180],[500020,4000020]]]}}]}"#,
    )
    .unwrap();
    let step = call_justified(
        &server,
        "raster_resample",
        json!({"input": "classes.tif", "output": "smooth.tif", "resampling": "bilinear",
               "resolution": [7, 7]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let refused = server
        .call(
            "zonal_stats",
            json!({"input": "smooth.tif", "zones": "zone.geojson", "stats": ["majority"],
                   "semantics": "cell_centre", "id_field": "name"}),
        )
        .await
        .unwrap();
    let entry = entry_of(&structured(&refused), "aggregation");
    assert_eq!(entry["severity"], "critical", "{entry}");
    let fact = evidence(&entry, "upstream_interpolated_classes")["fact"]
        .as_str()
        .unwrap();
    assert!(
        fact.contains("raster_resample") && fact.contains("bilinear"),
        "{fact}"
    );

    // The same zonal majority on the original classes is not about upstream at all.
    let direct = server
        .call(
            "zonal_stats",
            json!({"input": "classes.tif", "zones": "zone.geojson", "stats": ["majority"],
                   "semantics": "cell_centre", "id_field": "name"}),
        )
        .await
        .unwrap();
    if let Some(entries) = structured(&direct)["refusal"].as_array() {
        assert!(
            !serde_json::to_string(entries)
                .unwrap()
                .contains("upstream_interpolated_classes"),
            "{entries:?}"
        );
    }

    // JPEG on JPEG.
    let step = call_justified(
        &server,
        "raster_convert",
        json!({"input": "classes.tif", "output": "once.tif", "compression": "JPEG",
               "quality": 75}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let refused = server
        .call(
            "raster_convert",
            json!({"input": "once.tif", "output": "twice.tif", "compression": "JPEG",
                   "quality": 90}),
        )
        .await
        .unwrap();
    let entry = entry_of(&structured(&refused), "format_selection");
    let item = evidence(&entry, "second_lossy_encoding");
    assert!(
        item["fact"].as_str().unwrap().contains("JPEG quality 75"),
        "{item}"
    );
    assert!(item["alternative"].is_object(), "{item}");
}

/// The aggregation domain's verdict on a zonal majority of `input`.
async fn majority_verdict(server: &Server, input: &str) -> Value {
    let result = server
        .call(
            "zonal_stats",
            json!({"input": input, "zones": "zone.geojson", "stats": ["majority"],
                   "semantics": "cell_centre", "id_field": "name"}),
        )
        .await
        .unwrap();
    assert!(
        is_error(&result),
        "the call must be gated: {}",
        text(&result)
    );
    entry_of(&structured(&result), "aggregation")
}

/// Regression (issue 21): two edits laundered the critical `upstream_interpolated_classes`
/// finding. (1) A line appended by hand to `lineage/records.jsonl` (the genuine record with
/// `bilinear` turned into `nearest`) became the record of the output's digest; (2) rewriting
/// the interpolated file outside the server broke its lineage, and a file modified since had no
/// upstream at all. Records now carry a MAC under the user's key (the forged line is ignored,
/// the genuine one stays), and a file modified outside is described by what the server last
/// wrote there. `ledger verify` names the forged line.
#[tokio::test]
async fn a_forged_record_or_an_outside_rewrite_never_launders_an_interpolation() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_classes(&server.path("classes.tif"));
    std::fs::write(
        server.path("zone.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"name":"all"},"geometry":{"type":"Polygon",
            "coordinates":[[[500020,4000020],[500180,4000020],[500180,4000180],[500020,4000180],[500020,4000020]]]}}]}"#,
    )
    .unwrap();
    let step = call_justified(
        &server,
        "raster_resample",
        json!({"input": "classes.tif", "output": "smooth.tif", "resampling": "bilinear",
               "resolution": [7, 7]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let entry = majority_verdict(&server, "smooth.tif").await;
    assert_eq!(entry["severity"], "critical", "{entry}");
    evidence(&entry, "upstream_interpolated_classes");

    // (1) The forged line: the genuine record, bilinear -> nearest, with and without a MAC.
    let records = server.path(".preflight/lineage/records.jsonl");
    let genuine = std::fs::read_to_string(&records).unwrap();
    let last = genuine.lines().last().unwrap().to_string();
    assert!(
        last.contains("\"bilinear\"") && last.contains("\"mac\""),
        "{last}"
    );
    let forged = last.replace("\"bilinear\"", "\"nearest\"");
    let unsealed = match forged.rfind(",\"mac\"") {
        Some(at) => format!("{}}}", &forged[..at]),
        None => forged.clone(),
    };
    let mut appended = genuine.clone();
    appended.push_str(&forged);
    appended.push('\n');
    appended.push_str(&unsealed);
    appended.push('\n');
    std::fs::write(&records, appended).unwrap();
    let entry = majority_verdict(&server, "smooth.tif").await;
    assert_eq!(entry["severity"], "critical", "forged record: {entry}");
    let fact = evidence(&entry, "upstream_interpolated_classes")["fact"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fact.contains("bilinear"), "{fact}");
    // A second server (a fresh index) is not fooled either.
    let second = Server::connect(Era::Modern, server.workspace.path(), &Options::default())
        .await
        .unwrap();
    let again = gdal_mcp_tests::call(
        &second,
        "zonal_stats",
        json!({"input": "smooth.tif", "zones": "zone.geojson", "stats": ["majority"],
               "semantics": "cell_centre", "id_field": "name"}),
    )
    .await
    .unwrap();
    let entry = entry_of(&structured(&again), "aggregation");
    assert_eq!(entry["severity"], "critical", "a fresh index: {entry}");
    let _ = second.cancel().await;
    // `ledger verify` names the forged lines.
    let out = Command::new(gdal_mcp_tests::binary().unwrap())
        .args(["ledger", "verify", "--workspace"])
        .arg(server.workspace.path())
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{report}");
    assert!(
        report.contains("records.jsonl") && report.contains("2 of"),
        "{report}"
    );
    std::fs::write(&records, &genuine).unwrap();

    // (2) Rewritten outside the server (same cells, another encoding): still critical.
    let rewritten = server.path("rewritten.tif");
    let status = Command::new("gdal_translate")
        .args(["-q", "-co", "COMPRESS=DEFLATE"])
        .arg(server.path("smooth.tif"))
        .arg(&rewritten)
        .status()
        .unwrap();
    assert!(status.success());
    let before = sha256(&server.path("smooth.tif"));
    std::fs::rename(&rewritten, server.path("smooth.tif")).unwrap();
    assert_ne!(sha256(&server.path("smooth.tif")), before);
    let entry = majority_verdict(&server, "smooth.tif").await;
    assert_eq!(entry["severity"], "critical", "outside rewrite: {entry}");
    let fact = evidence(&entry, "upstream_interpolated_classes")["fact"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        fact.contains("bilinear") && fact.contains("modified outside the server"),
        "{fact}"
    );
}

/// Regression (issue 21): a store folder that was a link to an outside store made
/// `provenance_report` and `lineage://` show the outside records. A linked `lineage/` (below a
/// real `.preflight/`) is now ignored for reading (with a warning) and refused for writing;
/// the outside store, the decoy, is unchanged.
#[tokio::test]
async fn a_linked_lineage_folder_is_neither_read_nor_written() {
    let outside = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_classes(&outside.path("classes.tif"));
    let step = call_justified(
        &outside,
        "raster_resample",
        json!({"input": "classes.tif", "output": "smooth.tif", "resampling": "bilinear",
               "resolution": [7, 7]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let decoy = outside.path(".preflight/lineage");
    let snapshot = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().to_string(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    };
    let before = snapshot(&decoy);
    let report = provenance(&outside, "smooth.tif", "markdown").await;
    assert!(report["steps"].as_u64().unwrap() >= 1, "{report}");

    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::copy(outside.path("smooth.tif"), server.path("smooth.tif")).unwrap();
    write_classes(&server.path("classes.tif"));
    std::fs::create_dir_all(server.path(".preflight")).unwrap();
    std::os::unix::fs::symlink(&decoy, server.path(".preflight/lineage")).unwrap();
    let report = provenance(&server, "smooth.tif", "markdown").await;
    assert_eq!(
        report["steps"], 0,
        "the outside records were read: {report}"
    );
    let digest = report["sha256"].as_str().unwrap().to_string();
    let resource = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "lineage://{digest}"
        )))
        .await;
    if let Ok(resource) = resource {
        let shown = serde_json::to_string(&resource).unwrap();
        assert!(!shown.contains("raster_resample"), "{shown}");
    }
    // A gated write: its lineage is not written through the link.
    let step = call_justified(
        &server,
        "raster_resample",
        json!({"input": "classes.tif", "output": "other.tif", "resampling": "nearest",
               "resolution": [5, 5]}),
    )
    .await
    .unwrap();
    drop(step);
    assert_eq!(snapshot(&decoy), before, "the decoy store is unchanged");
}

/// The methods section of a chain names every step by its verb and says how to redo it: its
/// command line where GDAL has one, the host's computation in words where it does not
/// (issue 19: `raster_reproject`'s record carried no command, since its result names it
/// `gdalwarp_command`, and `points_from_table`, `vector_buffer`, `vector_overlay`,
/// `vector_join` and `raster_calc` all came out as "Processed").
#[tokio::test]
async fn a_methods_section_names_every_step_with_its_verb_and_how_to_redo_it() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // Wells in UTM 33N, a square field around two of them.
    std::fs::write(
        server.path("wells.csv"),
        "id,east,north,depth\nw1,500000,5000000,12\nw2,500300,5000000,30\nw3,502000,5002000,8\n",
    )
    .unwrap();
    std::fs::write(
        server.path("field.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"name":"north field"},
            "geometry":{"type":"Polygon","coordinates":[[[499800,4999800],[500600,4999800],[500600,5000400],[499800,5000400],[499800,4999800]]]}}]}"#,
    )
    .unwrap();
    let steps = [
        (
            "points_from_table",
            json!({"input": "wells.csv", "output": "wells.gpkg", "x": "east", "y": "north",
                   "crs": "EPSG:32633"}),
        ),
        (
            "vector_buffer",
            json!({"input": "wells.gpkg", "output": "zones.gpkg", "distance": 100, "unit": "m"}),
        ),
        (
            "vector_overlay",
            json!({"input": "zones.gpkg", "overlay": "field.geojson", "output": "inside.gpkg",
                   "operation": "intersection"}),
        ),
        (
            "vector_join",
            json!({"input": "inside.gpkg", "join": "wells.gpkg", "output": "joined.gpkg",
                   "predicate": "intersects", "fields": ["depth"], "stats": ["max"]}),
        ),
    ];
    for (tool, arguments) in steps {
        let step = call_justified(&server, tool, arguments).await.unwrap();
        assert!(!is_error(&step.result), "{tool}: {}", text(&step.result));
    }
    let report = provenance(&server, "joined.gpkg", "markdown").await;
    assert_eq!(report["steps"], 4, "{report}");
    let md = report["report"].as_str().unwrap();
    for (verb, tool, how) in [
        (
            "**Built features from the table**",
            "`points_from_table`",
            "Computation: one point per row",
        ),
        ("**Buffered**", "`vector_buffer`", "buffered by 100 m"),
        ("**Overlaid**", "`vector_overlay`", "GEOS intersection"),
        ("**Joined attributes onto**", "`vector_join`", "intersects"),
    ] {
        let line = md
            .lines()
            .position(|l| l.contains(verb) && l.contains(tool))
            .unwrap_or_else(|| panic!("no step {verb} with {tool}:\n{md}"));
        let rest: Vec<&str> = md
            .lines()
            .skip(line + 1)
            .take_while(|l| l.starts_with("   "))
            .collect();
        assert!(
            rest.iter().any(|l| l.contains(how)),
            "{tool}: no `{how}` under its step:\n{md}"
        );
    }
    assert!(!md.contains("**Processed**"), "{md}");

    // raster_reproject -> raster_calc: the warp's command and the band math's computation.
    write_geographic_dem(&server.path("dem.tif"));
    for (tool, arguments) in [
        (
            "raster_reproject",
            json!({"input": "dem.tif", "output": "dem_utm.tif", "dst_crs": "EPSG:32633",
                   "resampling": "bilinear"}),
        ),
        (
            "raster_calc",
            json!({"inputs": {"a": "dem_utm.tif"}, "expression": "a * 3.28084",
                   "output": "dem_ft.tif", "data_type": "Float32"}),
        ),
    ] {
        let step = call_justified(&server, tool, arguments).await.unwrap();
        assert!(!is_error(&step.result), "{tool}: {}", text(&step.result));
    }
    let report = provenance(&server, "dem_ft.tif", "markdown").await;
    assert_eq!(report["steps"], 2, "{report}");
    let md = report["report"].as_str().unwrap();
    assert!(md.contains("**Reprojected**"), "{md}");
    assert!(md.contains("   - Command: `gdalwarp"), "{md}");
    assert!(md.contains("**Computed band math on**"), "{md}");
    assert!(md.contains("Computation: band math `a * 3.28084`"), "{md}");
    // The PROV-JSON activity carries the same computation.
    let prov = provenance(&server, "dem_ft.tif", "prov_json").await;
    let document: Value = serde_json::from_str(prov["report"].as_str().unwrap()).unwrap();
    let computations: Vec<&Value> = document["activity"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|a| a.get("gdalmcp:computation"))
        .collect();
    assert_eq!(computations.len(), 1, "{document}");
}

/// The zone over the whole of `write_classes`' raster, for `majority_verdict`.
fn write_zone(server: &Server) {
    std::fs::write(
        server.path("zone.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"name":"all"},"geometry":{"type":"Polygon",
            "coordinates":[[[500020,4000020],[500180,4000020],[500180,4000180],[500020,4000180],[500020,4000020]]]}}]}"#,
    )
    .unwrap();
}

/// Whether any refusal entry of `result` names evidence `id`.
fn names_evidence(result: &rmcp::model::CallToolResult, id: &str) -> bool {
    structured(result)["refusal"]
        .as_array()
        .is_some_and(|entries| {
            entries.iter().any(|e| {
                e["evidence"]
                    .as_array()
                    .is_some_and(|items| items.iter().any(|i| i["id"] == id))
            })
        })
}

/// Regression (attack round 7, R7-12): a lossless GTiff → GTiff `raster_convert` writes the
/// very bytes it read, so its record became the newest record of the interpolated content and
/// the walk stopped at it: `zonal_stats majority` of the resampled classes lost the critical
/// `upstream_interpolated_classes`, and `provenance_report` showed one convert. Every record of
/// a content is walked now. Twin: the same convert of the original classes adds no finding.
#[tokio::test]
async fn r7_12_a_byte_identical_convert_never_launders_an_interpolation() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_classes(&server.path("classes.tif"));
    write_zone(&server);
    let step = call_justified(
        &server,
        "raster_resample",
        json!({"input": "classes.tif", "output": "smooth.tif", "resampling": "bilinear",
               "resolution": [7, 7]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    for (input, output) in [("smooth.tif", "copy.tif")] {
        let copy = call_justified(
            &server,
            "raster_convert",
            json!({"input": input, "output": output}),
        )
        .await
        .unwrap();
        assert!(!is_error(&copy.result), "{}", text(&copy.result));
        assert_eq!(sha256(&server.path(input)), sha256(&server.path(output)));
    }
    for input in ["smooth.tif", "copy.tif"] {
        let entry = majority_verdict(&server, input).await;
        assert_eq!(entry["severity"], "critical", "{input}: {entry}");
        let fact = evidence(&entry, "upstream_interpolated_classes")["fact"]
            .as_str()
            .unwrap();
        assert!(
            fact.contains("raster_resample") && fact.contains("bilinear"),
            "{fact}"
        );
    }
    let report = provenance(&server, "smooth.tif", "markdown").await;
    let methods = report["report"].as_str().unwrap();
    assert_eq!(report["steps"], 2, "{methods}");
    assert!(methods.contains("bilinear"), "{methods}");
    // Twin: the byte-identical copy of the original classes has no interpolation upstream.
    let copy = call_justified(
        &server,
        "raster_convert",
        json!({"input": "classes.tif", "output": "classes_copy.tif"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&copy.result), "{}", text(&copy.result));
    let direct = server
        .call(
            "zonal_stats",
            json!({"input": "classes_copy.tif", "zones": "zone.geojson", "stats": ["majority"],
                   "semantics": "cell_centre", "id_field": "name"}),
        )
        .await
        .unwrap();
    assert!(
        !names_evidence(&direct, "upstream_interpolated_classes"),
        "{}",
        text(&direct)
    );
}

/// Regression (attack round 7, R7-13): `raster_calc "a"` to Float32 of a class map dropped
/// what made it categorical (its Byte type), and the next bilinear resampling saw only a
/// continuous input. A raster derived from a categorical input that still holds a few
/// whole-number classes stays categorical. Twins: the same two calls over a continuous DEM,
/// and over a Float32 raster of few whole numbers made outside (no categorical input
/// upstream), are not called categorical.
#[tokio::test]
async fn r7_13_a_float_copy_of_a_class_map_is_still_categorical() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_classes(&server.path("classes.tif"));
    // A Float32 raster of whole metres, 10 in the west half, 30 in the east: as few values
    // as the classes, but made outside the server.
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-scale", "0", "10", "0", "100"])
        .arg(server.path("classes.tif"))
        .arg(server.path("metres.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    write_geographic_dem(&server.path("dem.tif"));
    for (input, output) in [
        ("classes.tif", "classes_f.tif"),
        ("metres.tif", "metres_f.tif"),
        ("dem.tif", "dem_f.tif"),
    ] {
        let calc = call_justified(
            &server,
            "raster_calc",
            json!({"inputs": {"a": input}, "expression": "a", "output": output,
                   "data_type": "Float32"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&calc.result), "{}", text(&calc.result));
    }
    let resample = |input: &str, output: &str| {
        json!({"input": input, "output": output, "resampling": "bilinear",
               "resolution": [7, 7]})
    };
    let refused = server
        .call("raster_resample", resample("classes_f.tif", "r1.tif"))
        .await
        .unwrap();
    assert!(is_error(&refused));
    let entry = entry_of(&structured(&refused), "resampling");
    assert_eq!(entry["severity"], "critical", "{entry}");
    evidence(&entry, "categorical_input");
    for input in ["metres_f.tif", "metres.tif"] {
        let twin = server
            .call("raster_resample", resample(input, "r2.tif"))
            .await
            .unwrap();
        assert!(
            !names_evidence(&twin, "categorical_input"),
            "{input}: {}",
            text(&twin)
        );
    }
    let dem = server
        .call(
            "raster_resample",
            json!({"input": "dem_f.tif", "output": "r3.tif", "resampling": "bilinear",
                   "resolution": [0.001, 0.001]}),
        )
        .await
        .unwrap();
    assert!(!names_evidence(&dem, "categorical_input"), "{}", text(&dem));
}

/// A 64 x 64 Float32 DEM on a 30 m grid in EPSG:32633 (a plane rising to the south-east),
/// and a zone inside it.
fn write_projected_dem_and_zone(server: &Server) {
    let mut asc =
        String::from("ncols 64\nnrows 64\nxllcorner 500000\nyllcorner 4998080\ncellsize 30\n");
    for row in 0..64 {
        let line: Vec<String> = (0..64)
            .map(|col| format!("{:.2}", (row + col) as f64 * 1.37))
            .collect();
        asc.push_str(&line.join(" "));
        asc.push('\n');
    }
    let grid = server.path("dem.asc");
    std::fs::write(&grid, asc).unwrap();
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-a_srs", "EPSG:32633"])
        .arg(&grid)
        .arg(server.path("dem.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(
        server.path("zones.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"z":1},"geometry":{"type":"Polygon",
            "coordinates":[[[500100,4998700],[501000,4998700],[501000,4999900],[500100,4999900],[500100,4998700]]]}}]}"#,
    )
    .unwrap();
}

/// Regression, attack round 8, R8-9: the upstream walk reads 64 steps, so after a bilinear
/// resampling 64 ungated `raster_calc "a"` steps (each a new content: another unused
/// `nodata`) took the operator's rule `domain aggregation, facts {upstream_interpolation =
/// true}, refuse` off `zonal_stats`. Each record carries its inputs' marks now. The walk's
/// limit is lowered to 4 (test-only `GDAL_MCP_LINEAGE_MAX_STEPS`) so that 6 steps cross it.
/// Clean twin: the same 6 steps from the DEM itself are not refused by the rule.
#[tokio::test]
async fn r8_9_an_interpolation_past_the_walks_limit_is_still_refused_by_the_rule() {
    let rule = "no aggregation of interpolated data";
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = policy_dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[rule]]\nid = \"{rule}\"\ndomain = \"aggregation\"\nfacts = {{ \
             upstream_interpolation = true }}\noutcome = \"refuse\"\n"
        ),
    )
    .unwrap();
    let server = Server::start(
        Era::Modern,
        Options {
            extra_args: vec!["--policy".into(), policy.display().to_string()],
            env: vec![("GDAL_MCP_LINEAGE_MAX_STEPS".into(), "4".into())],
            ..Options::default()
        },
    )
    .await
    .unwrap();
    write_projected_dem_and_zone(&server);
    let step = call_justified(
        &server,
        "raster_resample",
        json!({"input": "dem.tif", "output": "s0.tif", "resolution": [20, 20],
               "resampling": "bilinear"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&step.result), "{}", text(&step.result));
    let zonal = |input: &str| {
        server.call(
            "zonal_stats",
            json!({"input": input, "zones": "zones.geojson", "semantics": "cell_centre",
                   "stats": ["mean"]}),
        )
    };
    let refused_by_rule =
        |result: &rmcp::model::CallToolResult| is_error(result) && text(result).contains(rule);
    assert!(refused_by_rule(&zonal("s0.tif").await.unwrap()));
    for (from, prefix) in [("s0.tif", "s"), ("dem.tif", "t")] {
        let mut previous = from.to_string();
        for i in 1..=6 {
            let output = format!("{prefix}{i}.tif");
            let step = call_justified(
                &server,
                "raster_calc",
                json!({"inputs": {"a": previous}, "expression": "a", "output": output,
                       "data_type": "Float32", "nodata": -9000 - i}),
            )
            .await
            .unwrap();
            assert!(!is_error(&step.result), "{}", text(&step.result));
            previous = output;
        }
        let result = zonal(&previous).await.unwrap();
        if prefix == "s" {
            assert!(refused_by_rule(&result), "{previous}: {}", text(&result));
        } else {
            assert!(
                !text(&result).contains(rule),
                "{previous}: {}",
                text(&result)
            );
        }
    }
}

/// Regression (attack round 8, R8-5): R7-13 kept a Float32 copy of a class map categorical
/// only while it held few *whole* numbers, so `raster_calc "a + 0.5"` (or `"a * 0.1"`) of a
/// class map laundered it: the next bilinear resampling saw a continuous input and the
/// operator's rule `domain resampling, facts {categorical_input = true}, refuse` did not fire.
/// With a categorical input upstream, few distinct values (whole or not) stay categorical.
/// Twin: a Float32 raster of the same few non-whole values made outside the server (no
/// categorical input upstream), and a calc over it, stay continuous.
#[tokio::test]
async fn r8_5_a_shifted_copy_of_a_class_map_is_still_categorical() {
    let (_dir, server) = server_under(
        "[[rule]]\nid = \"no interpolation of classes\"\n\
         facts = { categorical_input = true }\ndomain = \"resampling\"\noutcome = \"refuse\"\n",
    )
    .await;
    write_classes(&server.path("classes.tif"));
    // Classes 1 and 3 as 1.5 and 4.5, written outside the server.
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-scale", "0", "10", "0", "15"])
        .arg(server.path("classes.tif"))
        .arg(server.path("halves.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    for (input, expression, output) in [
        ("classes.tif", "a + 0.5", "classes_half.tif"),
        ("classes.tif", "a * 0.1", "classes_tenth.tif"),
        ("halves.tif", "a + 0.5", "halves_plus.tif"),
    ] {
        let calc = call_justified(
            &server,
            "raster_calc",
            json!({"inputs": {"a": input}, "expression": expression, "output": output,
                   "data_type": "Float32"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&calc.result), "{}", text(&calc.result));
    }
    let resample = |input: &str, output: &str| {
        json!({"input": input, "output": output, "resampling": "bilinear",
               "resolution": [7, 7]})
    };
    for input in ["classes_half.tif", "classes_tenth.tif"] {
        let refused = server
            .call("raster_resample", resample(input, "r1.tif"))
            .await
            .unwrap();
        assert!(is_error(&refused), "{input}");
        let entry = entry_of(&structured(&refused), "resampling");
        evidence(&entry, "categorical_input");
        assert_eq!(entry["policy"]["outcome"], "refuse", "{input}: {entry}");
        assert_eq!(
            entry["policy"]["rule"], "no interpolation of classes",
            "{input}: {entry}"
        );
        assert!(!server.path("r1.tif").exists());
    }
    for input in ["halves.tif", "halves_plus.tif"] {
        let twin = call_justified(&server, "raster_resample", resample(input, "r2.tif"))
            .await
            .unwrap();
        assert!(!is_error(&twin.result), "{input}: {}", text(&twin.result));
        assert!(
            !names_evidence(&twin.result, "categorical_input"),
            "{input}: {}",
            text(&twin.result)
        );
        std::fs::remove_file(server.path("r2.tif")).unwrap();
    }
}

/// Regression (attack round 8, R8-2, second half): a nearest resampling computes no new
/// values, but lineage records carry GDAL's name `near`, which the list of value-keeping
/// methods did not hold: `raster_resample nearest` to 60 m made the operator's rule
/// `domain aggregation, facts {upstream_interpolation = true}, refuse` refuse `zonal_stats`
/// of its output. Twin: after a bilinear resampling the rule still refuses.
#[tokio::test]
async fn r8_2_a_nearest_resampling_is_not_upstream_interpolation() {
    let (_dir, server) = server_under(
        "[[rule]]\nid = \"no aggregation of interpolated data\"\ndomain = \"aggregation\"\n\
         facts = { upstream_interpolation = true }\noutcome = \"refuse\"\n",
    )
    .await;
    // A 64 x 64 ramp on a 30 m grid in EPSG:32633, and a zone inside it.
    ramp_dem(&server, |x, y| format!("{:.2}", (x + y) * 1.37));
    std::fs::write(
        server.path("zones.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"z":1},"geometry":{"type":"Polygon",
            "coordinates":[[[500100,4999100],[501000,4999100],[501000,4999900],[500100,4999900],[500100,4999100]]]}}]}"#,
    )
    .unwrap();
    let zonal = |input: &str| {
        json!({"input": input, "zones": "zones.geojson", "semantics": "cell_centre",
               "stats": ["mean"]})
    };
    for (method, output) in [("nearest", "n60.tif"), ("bilinear", "b60.tif")] {
        let resampled = call_justified(
            &server,
            "raster_resample",
            json!({"input": "dem.tif", "output": output, "resolution": [60, 60],
                   "resampling": method}),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&resampled.result),
            "{method}: {}",
            text(&resampled.result)
        );
    }
    // After nearest: the aggregation domain asks its own question, the rule does not refuse.
    let asked = server.call("zonal_stats", zonal("n60.tif")).await.unwrap();
    let entry = entry_of(&structured(&asked), "aggregation");
    assert!(entry["policy"]["outcome"] != "refuse", "{entry}");
    let done = call_justified(&server, "zonal_stats", zonal("n60.tif"))
        .await
        .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    // After bilinear: refused by the rule, answered or not.
    let refused = server.call("zonal_stats", zonal("b60.tif")).await.unwrap();
    let entry = entry_of(&structured(&refused), "aggregation");
    assert_eq!(entry["policy"]["outcome"], "refuse", "{entry}");
    assert_eq!(
        entry["policy"]["rule"], "no aggregation of interpolated data",
        "{entry}"
    );
    let still = call_justified(&server, "zonal_stats", zonal("b60.tif"))
        .await
        .unwrap();
    assert!(is_error(&still.result));
}

/// A server under the operator's policy `text` (its file in a folder of its own).
async fn server_under(text: &str) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, text).unwrap();
    let server = Server::start(Era::Modern, Options::with_policy(&policy))
        .await
        .unwrap();
    (dir, server)
}

/// `dem.tif`: a 64 x 64 Float32 surface on a 30 m grid in EPSG:32633, each cell's value
/// `value(column, row)` as written in the ASCII grid it is translated from.
fn ramp_dem(server: &Server, value: impl Fn(f64, f64) -> String) {
    let mut asc =
        String::from("ncols 64\nnrows 64\nxllcorner 500000\nyllcorner 4998080\ncellsize 30\n");
    for row in 0..64 {
        let line: Vec<String> = (0..64).map(|col| value(col as f64, row as f64)).collect();
        asc.push_str(&line.join(" "));
        asc.push('\n');
    }
    std::fs::write(server.path("dem.asc"), asc).unwrap();
    let status = Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-a_srs", "EPSG:32633"])
        .arg(server.path("dem.asc"))
        .arg(server.path("dem.tif"))
        .status()
        .unwrap();
    assert!(status.success());
}

/// A server under the rule `facts {upstream_interpolation = true} -> refuse` (any domain),
/// with `dem.tif`, a smooth surface with a ripple.
async fn interpolation_refused() -> (tempfile::TempDir, Server) {
    let (dir, server) = server_under(
        "[[rule]]\nid = \"no interpolated upstream\"\n\
         facts = { upstream_interpolation = true }\noutcome = \"refuse\"\n",
    )
    .await;
    ramp_dem(&server, |x, y| {
        format!("{:.3}", 100.0 + 0.5 * x + 0.3 * y + 5.0 * (x / 5.0).sin())
    });
    (dir, server)
}

/// `gdalbuildvrt VRT SOURCE` (a mosaic of one tile, the usual way to wrap files).
fn build_vrt(server: &Server, vrt: &str, source: &str) {
    let status = Command::new("gdalbuildvrt")
        .arg("-q")
        .arg(server.path(vrt))
        .arg(server.path(source))
        .status()
        .unwrap();
    assert!(status.success());
}

/// `dem_flow_direction` of `input`, unjustified: whether the operator's rule refused it, and
/// the evidence ids every domain asked about.
async fn flow_direction_asks(server: &Server, input: &str) -> (bool, Vec<String>) {
    let output = format!("fd_{}.tif", input.replace('.', "_"));
    let result = server
        .call(
            "dem_flow_direction",
            json!({"input": input, "output": output, "algorithm": "d8"}),
        )
        .await
        .unwrap();
    let content = structured(&result);
    let by_rule = text(&result).contains("no interpolated upstream");
    let mut asked: Vec<String> = content["refusal"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .flat_map(|e| e["evidence"].as_array().cloned().unwrap_or_default())
                .filter_map(|item| item["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    asked.sort();
    (by_rule, asked)
}

/// Regression, issue 21 attack round 10, R10-2: lineage was looked up by the input's own
/// digest, and a file without a record was taken as original data, so a VRT around a bilinear
/// `raster_resample` output (gdalbuildvrt of `interp.tif` alone) ran `dem_flow_direction`
/// with neither the operator's `upstream_interpolation` rule nor hydrology's finding. An
/// input's upstream is now the union of its own and its VRT sources': the VRT is refused by
/// the rule and asked about the interpolation as `interp.tif` is, and a step that reads the
/// VRT records its source, so the mark is carried on (a `raster_calc "a"` of the VRT is
/// refused too).
#[tokio::test]
async fn r10_2_a_vrt_around_an_interpolated_output_keeps_its_upstream() {
    let (_dir, server) = interpolation_refused().await;
    let resampled = call_justified(
        &server,
        "raster_resample",
        json!({"input": "dem.tif", "output": "interp.tif", "resolution": [20, 20],
               "resampling": "bilinear"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&resampled.result), "{}", text(&resampled.result));
    build_vrt(&server, "ext.vrt", "interp.tif");
    let (direct_rule, direct) = flow_direction_asks(&server, "interp.tif").await;
    assert!(
        direct_rule,
        "the rule refuses interp.tif itself: {direct:?}"
    );
    assert!(direct.contains(&"upstream_interpolation".to_string()));
    let (vrt_rule, through) = flow_direction_asks(&server, "ext.vrt").await;
    assert!(vrt_rule, "the rule refuses the VRT: {through:?}");
    assert_eq!(through, direct, "the VRT is asked what its source is asked");
    assert!(!server.path("fd_ext_vrt.tif").exists());
    // Carried on: a copy of the VRT's cells made by the server is refused as well.
    let copied = call_justified(
        &server,
        "raster_calc",
        json!({"inputs": {"a": "ext.vrt"}, "expression": "a", "output": "copy.tif",
               "data_type": "Float32"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&copied.result), "{}", text(&copied.result));
    let (copy_rule, _) = flow_direction_asks(&server, "copy.tif").await;
    assert!(copy_rule, "the copy of the VRT carries the interpolation");
}

/// The clean twin of R10-2: a VRT over original data (no record anywhere) asks exactly what
/// the data itself is asked, and the rule stays silent on both.
#[tokio::test]
async fn r10_2_clean_twin_a_vrt_over_original_data_asks_nothing_new() {
    let (_dir, server) = interpolation_refused().await;
    build_vrt(&server, "orig.vrt", "dem.tif");
    let (direct_rule, direct) = flow_direction_asks(&server, "dem.tif").await;
    let (vrt_rule, through) = flow_direction_asks(&server, "orig.vrt").await;
    assert!(!direct_rule && !vrt_rule, "{direct:?} {through:?}");
    assert_eq!(through, direct);
    assert!(!through.contains(&"upstream_interpolation".to_string()));
}
