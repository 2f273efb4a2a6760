//! The refusal / justify / retry flow, capsules and receipts.

use crate::oracle;
use gdal_mcp_tests::{is_error, justification, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn reproject(output: &str, dst: &str) -> Value {
    json!({"input": "dem.tif", "output": output, "dst_crs": dst, "resampling": "bilinear"})
}

fn domains(refusal: &Value) -> BTreeSet<String> {
    refusal["refusal"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e["domain"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn key_of(refusal: &Value, domain: &str) -> String {
    refusal["refusal"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["domain"] == json!(domain)))
        .and_then(|e| e["key"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn both_justified() -> Value {
    json!({
        "crs_datum": justification("EPSG:4326"),
        "resampling": justification("bilinear"),
    })
}

fn dem_server_options() -> Options {
    Options {
        data: vec!["dem.tif"],
        ..Default::default()
    }
}

fn capsule_count(server: &Server) -> usize {
    walk(&server.justifications())
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        walk(&p)
                    } else {
                        usize::from(p.extension().is_some_and(|x| x == "json"))
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

async fn refuse_then_justify_inline(era: Era) -> anyhow::Result<()> {
    let server = Server::start(era, dem_server_options()).await?;

    // 1. The first call is refused, naming both domains at once.
    let refused = server
        .call("raster_reproject", reproject("out.tif", "EPSG:4326"))
        .await?;
    assert!(is_error(&refused));
    let payload = structured(&refused);
    assert_eq!(
        domains(&payload),
        BTreeSet::from(["crs_datum".into(), "resampling".into()])
    );
    for entry in payload["refusal"].as_array().into_iter().flatten() {
        let key = entry["key"].as_str().unwrap_or_default();
        assert!(key.starts_with("sha256:") && key.len() == 71, "{key}");
        assert!(entry["prompt"].as_str().is_some_and(|p| p.len() > 100));
        assert_eq!(entry["schema"]["type"], json!("object"));
        assert_eq!(entry["severity"], json!("required"));
        assert!(entry["how_to_supply"]
            .as_str()
            .is_some_and(|h| h.contains("persist_justification")));
    }
    let crs_entry = &payload["refusal"][0];
    assert!(
        crs_entry["prompt"]
            .as_str()
            .unwrap_or_default()
            .contains("SIRGAS 2000 to WGS 84"),
        "the prompt names PROJ's transformation: {}",
        crs_entry["prompt"]
    );
    assert!(text(&refused).contains("crs_datum") && text(&refused).contains("resampling"));
    assert!(
        !server.path("out.tif").exists(),
        "a refused call writes nothing"
    );

    // 2. Retrying with both justifications inline stores them and runs, in one request.
    let mut arguments = reproject("out.tif", "EPSG:4326");
    arguments["justification"] = both_justified();
    let done = server.call("raster_reproject", arguments).await?;
    assert!(!is_error(&done), "{}", text(&done));
    let out = structured(&done);
    let receipts = out["reflection"].as_array().cloned().unwrap_or_default();
    assert_eq!(receipts.len(), 2);
    for receipt in &receipts {
        assert_eq!(receipt["decision"], json!("proceed"));
        assert_eq!(receipt["stored_now"], json!(true));
        assert!(receipt["capsule"]
            .as_str()
            .is_some_and(|c| c.starts_with("justification://")));
        assert_eq!(
            receipt["key"],
            json!(key_of(
                &payload,
                receipt["domain"].as_str().unwrap_or_default()
            ))
        );
    }
    assert_eq!(capsule_count(&server), 2);
    assert_eq!(out["crs"]["id"], json!("EPSG:4326"));

    // 3. The output equals gdalwarp run independently with the same options, and the nodata
    // the host declares for the cells outside the source when the DEM declares none (R13-B3).
    let oracle_path = server.path("oracle.tif");
    oracle::gdalwarp(
        &[
            "-of",
            "GTiff",
            "-t_srs",
            "EPSG:4326",
            "-r",
            "bilinear",
            "-dstnodata",
            "nan",
        ],
        &server.path("dem.tif"),
        &oracle_path,
    )?;
    oracle::assert_pixel_identical(&server.path("out.tif"), &oracle_path)?;
    assert_eq!(
        out["width"],
        json!(gdal::Dataset::open(&oracle_path)?.raster_size().0)
    );

    // 4. The identical decision runs again at once; changing only dst_crs asks crs_datum alone.
    let again = server
        .call("raster_reproject", reproject("again.tif", "EPSG:4326"))
        .await?;
    assert!(!is_error(&again), "{}", text(&again));
    for receipt in structured(&again)["reflection"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_eq!(receipt["decision"], json!("proceed"));
        assert_eq!(receipt["stored_now"], json!(false));
    }
    let utm = server
        .call("raster_reproject", reproject("utm.tif", "EPSG:32725"))
        .await?;
    assert!(is_error(&utm));
    assert_eq!(
        domains(&structured(&utm)),
        BTreeSet::from(["crs_datum".into()])
    );
    Ok(())
}

#[tokio::test]
async fn refusal_lists_both_domains_and_inline_retry_succeeds_legacy() -> anyhow::Result<()> {
    refuse_then_justify_inline(Era::Legacy).await
}

#[tokio::test]
async fn refusal_lists_both_domains_and_inline_retry_succeeds_modern() -> anyhow::Result<()> {
    refuse_then_justify_inline(Era::Modern).await
}

#[tokio::test]
async fn persist_justification_path_works_and_only_for_issued_keys() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, dem_server_options()).await?;
    let refused = structured(
        &server
            .call("raster_reproject", reproject("out.tif", "EPSG:4326"))
            .await?,
    );
    let crs_key = key_of(&refused, "crs_datum");
    let resampling_key = key_of(&refused, "resampling");

    // A key this server never issued is refused, as is an issued key for another domain.
    let forged = format!("sha256:{}", "0".repeat(64));
    for (domain, key) in [
        ("crs_datum", forged.as_str()),
        ("resampling", crs_key.as_str()),
        ("../../etc", crs_key.as_str()),
    ] {
        let result = server
            .call(
                "persist_justification",
                json!({"domain": domain, "key": key, "justification": justification("EPSG:4326")}),
            )
            .await?;
        assert!(is_error(&result), "{domain} {key}");
    }
    assert_eq!(capsule_count(&server), 0);

    for (domain, key, method) in [
        ("crs_datum", &crs_key, "EPSG:4326"),
        ("resampling", &resampling_key, "bilinear"),
    ] {
        let stored = server
            .call(
                "persist_justification",
                json!({"domain": domain, "key": key, "justification": justification(method)}),
            )
            .await?;
        assert!(!is_error(&stored), "{}", text(&stored));
        let stored = structured(&stored);
        assert_eq!(stored["key"], json!(key));
        assert!(std::path::Path::new(stored["path"].as_str().unwrap_or_default()).is_file());
    }
    let done = server
        .call("raster_reproject", reproject("out.tif", "EPSG:4326"))
        .await?;
    assert!(!is_error(&done), "{}", text(&done));

    // The capsule is readable as a resource and records what it justifies.
    let uri = structured(&done)["reflection"][0]["capsule"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let capsule = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await?;
    let body = serde_json::to_string(&capsule.contents)?;
    assert!(
        body.contains("key_fields") && body.contains("EPSG:4326") && body.contains("prompt"),
        "{body}"
    );
    Ok(())
}

#[tokio::test]
async fn invalid_justification_gets_field_errors_and_stores_nothing() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, dem_server_options()).await?;
    let mut wrong_method = justification("EPSG:3857");
    wrong_method["alternatives"] = json!([]);
    let mut arguments = reproject("out.tif", "EPSG:4326");
    arguments["justification"] = json!({
        "crs_datum": {"intent": "", "choice": {"method": "EPSG:4326"}, "confidence": "sure"},
        "resampling": justification("cubic"),
    });
    let refused = server.call("raster_reproject", arguments).await?;
    assert!(is_error(&refused));
    let payload = structured(&refused);
    let errors_of = |domain: &str| -> Vec<String> {
        payload["refusal"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["domain"] == json!(domain)))
            .and_then(|e| e["errors"].as_array())
            .map(|errors| {
                errors
                    .iter()
                    .filter_map(|e| e["path"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let crs_errors = errors_of("crs_datum");
    for path in [
        "/intent",
        "/alternatives",
        "/choice/rationale",
        "/choice/tradeoffs",
        "/confidence",
    ] {
        assert!(
            crs_errors.contains(&path.to_string()),
            "{path} in {crs_errors:?}"
        );
    }
    // The domain's own validation: the choice must name the method the call uses.
    assert_eq!(errors_of("resampling"), ["/choice/method"]);
    assert!(text(&refused).contains("/choice/method"));
    assert_eq!(
        capsule_count(&server),
        0,
        "an invalid justification stores nothing"
    );
    assert!(!server.path("out.tif").exists());

    // Through persist_justification the same errors come back as a list.
    let key = key_of(&payload, "crs_datum");
    let persisted = server
        .call(
            "persist_justification",
            json!({"domain": "crs_datum", "key": key, "justification": wrong_method}),
        )
        .await?;
    assert!(is_error(&persisted));
    let errors = &structured(&persisted)["error"]["errors"];
    let paths: Vec<&str> = errors
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert_eq!(paths, ["/alternatives"]);
    assert_eq!(capsule_count(&server), 0);
    Ok(())
}

#[tokio::test]
async fn tampered_capsule_brings_the_refusal_back() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, dem_server_options()).await?;
    let mut arguments = reproject("out.tif", "EPSG:4326");
    arguments["justification"] = both_justified();
    let done = server.call("raster_reproject", arguments).await?;
    assert!(!is_error(&done), "{}", text(&done));
    let crs_dir = server.justifications().join("crs_datum");
    let capsule_path = std::fs::read_dir(&crs_dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .ok_or_else(|| anyhow::anyhow!("no capsule in {}", crs_dir.display()))?;
    let original = std::fs::read_to_string(&capsule_path)?;

    // Editing the justification text breaks the integrity hash.
    let mut edited: Value = serde_json::from_str(&original)?;
    edited["justification"]["intent"] = json!("something the agent never said");
    std::fs::write(&capsule_path, serde_json::to_string(&edited)?)?;
    let refused = server
        .call("raster_reproject", reproject("b.tif", "EPSG:4326"))
        .await?;
    assert!(is_error(&refused));
    assert_eq!(
        domains(&structured(&refused)),
        BTreeSet::from(["crs_datum".into()])
    );

    // Editing what it justifies breaks the key.
    let mut edited: Value = serde_json::from_str(&original)?;
    edited["key_fields"]["dst_crs"] = json!("EPSG:3857");
    std::fs::write(&capsule_path, serde_json::to_string(&edited)?)?;
    assert!(is_error(
        &server
            .call("raster_reproject", reproject("c.tif", "EPSG:4326"))
            .await?
    ));

    // Garbage and an empty file at the right path count as missing, not as a crash.
    for junk in ["", "{not json", "{}"] {
        std::fs::write(&capsule_path, junk)?;
        assert!(
            is_error(
                &server
                    .call("raster_reproject", reproject("d.tif", "EPSG:4326"))
                    .await?
            ),
            "{junk:?}"
        );
    }

    // Restoring the original makes it count again.
    std::fs::write(&capsule_path, original)?;
    let ok = server
        .call("raster_reproject", reproject("e.tif", "EPSG:4326"))
        .await?;
    assert!(!is_error(&ok), "{}", text(&ok));
    Ok(())
}

#[tokio::test]
async fn capsules_persist_across_server_restarts() -> anyhow::Result<()> {
    let server = Server::start(Era::Legacy, dem_server_options()).await?;
    let mut arguments = reproject("out.tif", "EPSG:4326");
    arguments["justification"] = both_justified();
    assert!(!is_error(
        &server.call("raster_reproject", arguments).await?
    ));
    let second =
        Server::connect(Era::Modern, server.workspace.path(), &dem_server_options()).await?;
    let result = gdal_mcp_tests::call(
        &second,
        "raster_reproject",
        reproject("next.tif", "EPSG:4326"),
    )
    .await?;
    assert!(!is_error(&result), "{}", text(&result));
    Ok(())
}

#[tokio::test]
async fn categorical_data_escalates_resampling() -> anyhow::Result<()> {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["lc.tif"],
            ..Default::default()
        },
    )
    .await?;
    // lc.tif has a colour table: bilinear invents classes (critical), nearest keeps them.
    let bilinear = server
        .call("raster_reproject", json!({"input": "lc.tif", "output": "b.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}))
        .await?;
    let entries = structured(&bilinear)["refusal"].clone();
    let resampling = entries
        .as_array()
        .and_then(|e| e.iter().find(|e| e["domain"] == json!("resampling")))
        .cloned()
        .unwrap_or_default();
    assert_eq!(resampling["severity"], json!("critical"));
    assert_eq!(resampling["requires_assumptions"], json!(true));

    let nearest = server
        .call("raster_reproject", json!({"input": "lc.tif", "output": "n.tif", "dst_crs": "EPSG:4326", "resampling": "nearest"}))
        .await?;
    let payload = structured(&nearest);
    assert!(
        !domains(&payload).contains("resampling"),
        "nearest on classes is advisory"
    );
    let receipt = payload["reflection"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["domain"] == json!("resampling")))
        .cloned()
        .unwrap_or_default();
    assert_eq!(receipt["decision"], json!("warn"));
    assert_eq!(receipt["severity"], json!("advisory"));
    Ok(())
}

/// A 10 × 10 Float32 raster in EPSG:4326 covering `[west, south, east, north]`.
fn geographic_raster(path: &std::path::Path, [west, south, east, north]: [f64; 4]) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver
        .create_with_band_type::<f32, _>(path, 10, 10, 1)
        .unwrap();
    dataset
        .set_geo_transform(&[
            west,
            (east - west) / 10.0,
            0.0,
            north,
            0.0,
            (south - north) / 10.0,
        ])
        .unwrap();
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(4326).unwrap())
        .unwrap();
    let mut band = dataset.rasterband(1).unwrap();
    let mut buffer = gdal::raster::Buffer::new((10, 10), (0..100).map(|v| v as f32).collect());
    band.write((0, 0), (10, 10), &mut buffer).unwrap();
}

/// Issue 18: a reprojection is graded by its target's planar scale error over the data, never
/// by an area of use ("accuracy unknown" was said of an exact conversion). The trap: a raster
/// over 15° to 25° E, 60° to 70° N to Web Mercator stretches areas 8.5 times: `crs_datum` is
/// critical with `target_distortion` and the host's figure. Its clean twin: a raster on UTM
/// 33N's central meridian (14.95° to 15.05° E, 45° to 47° N) to EPSG:32633 (0.08 % for areas)
/// stays the required choice of a target CRS, with `crs_change` alone.
#[tokio::test]
async fn a_reprojection_is_graded_by_its_targets_scale_error_over_the_data() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, Options::default()).await?;
    geographic_raster(&server.path("north.tif"), [15.0, 60.0, 25.0, 70.0]);
    geographic_raster(&server.path("meridian.tif"), [14.95, 45.0, 15.05, 47.0]);
    let crs_entry = |payload: &Value| {
        payload["refusal"]
            .as_array()
            .and_then(|entries| entries.iter().find(|e| e["domain"] == "crs_datum"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let ids = |entry: &Value| -> Vec<String> {
        entry["evidence"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["id"].as_str().map(String::from))
            .collect()
    };
    let trap = server
        .call(
            "raster_reproject",
            json!({"input": "north.tif", "output": "m.tif", "dst_crs": "EPSG:3857", "resampling": "bilinear"}),
        )
        .await?;
    let entry = crs_entry(&structured(&trap));
    assert_eq!(entry["severity"], "critical", "{entry}");
    assert_eq!(ids(&entry), ["crs_change", "target_distortion"], "{entry}");
    let fact = entry["evidence"][1]["fact"].as_str().unwrap_or_default();
    // Areas 1/cos²(70°) = 8.55 times the ground's on the sphere; 8.50 on the ellipsoid.
    assert!(fact.contains("scale error of up to 750."), "{fact}");
    assert!(fact.contains("for areas (lengths up to 191."), "{fact}");
    assert!(!entry.to_string().contains("accuracy unknown"), "{entry}");

    let twin = server
        .call(
            "raster_reproject",
            json!({"input": "meridian.tif", "output": "u.tif", "dst_crs": "EPSG:32633", "resampling": "bilinear"}),
        )
        .await?;
    let entry = crs_entry(&structured(&twin));
    assert_eq!(entry["severity"], "required", "{entry}");
    assert_eq!(ids(&entry), ["crs_change"], "{entry}");
    let text = entry.to_string();
    assert!(
        text.contains("conversion") && !text.contains("accuracy unknown"),
        "{text}"
    );
    Ok(())
}

/// Attack round 15, R15-C3: the prompt carries the measured figures, so the same decision on
/// other data has another key, and under `--stale warn` the newest capsule of that decision was
/// honoured if it passed `validate` against *its own* evidence: a justification accepting "up
/// to 5 %" for a 3.9 % scale error let a 303.5 % (critical) call of the same CRS pair run on a
/// `warn` receipt. A stale capsule now answers only a finding no more severe than its own, and
/// only if it passes against this call's evidence: the raster at 60° N is refused with nothing
/// written; its twin at 9° N (a smaller error than the one accepted) runs on the capsule,
/// whose receipt names the figures that differ (the domain and its prompt did not change, so
/// nothing is stale: R20-C8).
#[tokio::test]
async fn r15_c3_a_stale_capsule_answers_only_the_question_it_still_answers() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, Options::default()).await?;
    geographic_raster(&server.path("lat10.tif"), [10.0, 10.0, 10.2, 10.2]);
    geographic_raster(&server.path("lat60.tif"), [10.0, 60.0, 10.2, 60.2]);
    geographic_raster(&server.path("lat9.tif"), [10.0, 8.8, 10.2, 9.0]);
    let call = |input: &str, output: &str, justified: bool| {
        let mut arguments = json!({"input": input, "output": output, "dst_crs": "EPSG:3857",
                                   "resampling": "bilinear"});
        if justified {
            arguments["justification"] = json!({
                "resampling": justification("bilinear"),
                "crs_datum": {
                    "intent": "Hillshade tiles for a web map; no areas or distances are measured on the output.",
                    "alternatives": [{"method": "EPSG:32632", "why_not": "UTM tiles would not line up with the web map's tile grid."}],
                    "choice": {"method": "EPSG:3857", "rationale": "The web map's tiles are in Web Mercator.",
                               "tradeoffs": "We accept area errors up to 5 % in display."},
                    "confidence": "high",
                    "assumptions": ["The map is for display only."],
                    "evidence": {
                        "crs_change": "Only display overlay alignment must survive; no area or distance is read from the tiles.",
                        "target_distortion": "We accept up to 5 % scale error: at this latitude the display stretch is invisible."
                    }
                }
            });
        } else {
            arguments["justification"] = json!({"resampling": justification("bilinear")});
        }
        arguments
    };
    let first = server
        .call("raster_reproject", call("lat10.tif", "a.tif", true))
        .await?;
    assert!(!is_error(&first), "{}", text(&first));
    let crs_receipt = |result: &rmcp::model::CallToolResult| {
        structured(result)["reflection"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["domain"] == "crs_datum").cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(crs_receipt(&first)["stored_now"], json!(true));
    let north = server
        .call("raster_reproject", call("lat60.tif", "b.tif", false))
        .await?;
    assert!(is_error(&north), "{}", text(&north));
    assert_eq!(
        domains(&structured(&north)),
        BTreeSet::from(["crs_datum".to_string()]),
        "{}",
        text(&north)
    );
    assert!(!server.path("b.tif").exists());
    let twin = server
        .call("raster_reproject", call("lat9.tif", "c.tif", false))
        .await?;
    assert!(!is_error(&twin), "{}", text(&twin));
    let receipt = crs_receipt(&twin);
    assert_eq!(receipt["decision"], json!("proceed"), "{receipt}");
    assert!(receipt["stale"].is_null(), "{receipt}");
    assert!(
        receipt["reason"]
            .as_str()
            .is_some_and(|r| r.contains("given for other data") && r.contains(" then, ")),
        "{receipt}"
    );
    assert!(receipt["capsule"]
        .as_str()
        .is_some_and(|c| c.starts_with("justification://crs_datum/")));
    Ok(())
}

/// Attack round 20, R20-C8: the resampling prompt names the data type, so a Float64 or Int16
/// copy of a DEM justified for bilinear as Float32 had another key, and ran through the stale
/// path on a `warn` receipt saying "the domain's prompt text changed"; under `--stale refuse`
/// it was asked again. Nothing had changed but the data: the capsule of the same decision now
/// answers, with `proceed` and a receipt naming the data type then and now, under either
/// stale policy. The twin: a domain whose prompt did change still goes through the stale path
/// (`a_capsule_for_an_older_prompt_warns_by_default_and_is_refused_on_request`).
#[tokio::test]
async fn r20_c8_the_same_decision_on_another_data_type_is_not_stale() -> anyhow::Result<()> {
    let options = Options {
        data: vec!["dem.tif"],
        extra_args: vec!["--stale".to_string(), "refuse".to_string()],
        ..Default::default()
    };
    let server = Server::start(Era::Modern, options).await?;
    let dem = server.path("dem.tif");
    let dem = dem.to_str().unwrap();
    gdal_mcp_tests::run_program(
        "gdal_translate",
        &[
            "-q",
            "-ot",
            "Float64",
            dem,
            server.path("dem64.tif").to_str().unwrap(),
        ],
    );
    let resample = |input: &str, output: &str| json!({"input": input, "output": output, "size": [10, 10], "resampling": "bilinear"});
    let mut first = resample("dem.tif", "a.tif");
    first["justification"] = json!({"resampling": justification("bilinear")});
    let first = server.call("raster_resample", first).await?;
    assert!(!is_error(&first), "{}", text(&first));
    let again = server
        .call("raster_resample", resample("dem64.tif", "b.tif"))
        .await?;
    assert!(!is_error(&again), "{}", text(&again));
    let receipt = structured(&again)["reflection"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["domain"] == "resampling").cloned())
        .unwrap_or(Value::Null);
    assert_eq!(receipt["decision"], json!("proceed"), "{receipt}");
    assert!(receipt["stale"].is_null(), "{receipt}");
    let reason = receipt["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("Float32") && reason.contains("Float64") && !reason.contains("stale"),
        "{reason}"
    );
    assert!(server.path("b.tif").exists());
    Ok(())
}

/// Attack round 16, R16-C3: a justification keyed by a name that is no loaded domain
/// ("Resampling", capital R) was dropped without a word: the refusal was the one a call without
/// a justification gets. It is now an argument error naming the loaded domains, before any
/// work; the same justification under `resampling` runs (the twin).
#[tokio::test]
async fn r16_c3_a_justification_under_no_domain_is_named_not_dropped() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, dem_server_options()).await?;
    let resample = |key: &str| {
        json!({"input": "dem.tif", "output": format!("{key}.tif"), "resolution": [60, 60],
               "resampling": "bilinear",
               "justification": {key: justification("bilinear")}})
    };
    let wrong = server
        .call("raster_resample", resample("Resampling"))
        .await?;
    assert!(is_error(&wrong), "{}", text(&wrong));
    assert_eq!(structured(&wrong)["error"]["kind"], "invalid_arguments");
    let message = text(&wrong);
    assert!(
        message.contains("\"Resampling\"")
            && message.contains("no loaded domain")
            && message.contains("resampling"),
        "{message}"
    );
    assert_eq!(capsule_count(&server), 0);
    let right = server
        .call("raster_resample", resample("resampling"))
        .await?;
    assert!(!is_error(&right), "{}", text(&right));
    Ok(())
}

/// Attack round 16, R16-C6: a gated call that failed after the gate (GDAL refused a creation
/// option) returned no receipt, though its inline justification had been stored and answered
/// the next call of the decision. The error now carries the receipts in its JSON and says in
/// its text that the justification was stored; R16-C8: a justification given for a decision
/// that already has a capsule was dropped, and the output's record gave the earlier purpose.
/// It is read now, replaces the capsule once valid (the receipt says so, and the stored
/// capsule holds the new purpose), and an invalid one is refused with its errors, naming the
/// capsule to rest on.
#[tokio::test]
async fn r16_c6_c8_a_failure_after_the_gate_carries_its_receipts() -> anyhow::Result<()> {
    let server = Server::start(Era::Modern, dem_server_options()).await?;
    let failing = json!({"input": "dem.tif", "output": "o.tif", "resolution": [60, 60],
                         "resampling": "bilinear",
                         "creation_options": {"TILED": "YES", "BLOCKXSIZE": "7", "BLOCKYSIZE": "7"},
                         "justification": {"resampling": justification("bilinear")}});
    let failed = server.call("raster_resample", failing).await?;
    assert!(is_error(&failed), "{}", text(&failed));
    let detail = structured(&failed);
    let receipts = detail["reflection"].as_array().cloned().unwrap_or_default();
    assert!(
        receipts
            .iter()
            .any(|r| r["domain"] == "resampling" && r["stored_now"] == true),
        "{detail}"
    );
    assert!(text(&failed).contains("stored as"), "{}", text(&failed));
    assert!(!server.path("o.tif").exists());
    // The capsule answers the next call without a justification.
    let plain = server
        .call(
            "raster_resample",
            json!({"input": "dem.tif", "output": "o1.tif", "resolution": [60, 60],
                   "resampling": "bilinear"}),
        )
        .await?;
    assert!(!is_error(&plain), "{}", text(&plain));
    assert_eq!(structured(&plain)["reflection"][0]["stored_now"], false);
    // A new purpose given with the next call replaces it.
    let mut quick_look = justification("bilinear");
    quick_look["intent"] = json!("a quick-look display of the valley floor for a field briefing");
    let again = server
        .call(
            "raster_resample",
            json!({"input": "dem.tif", "output": "o2.tif", "resolution": [60, 60],
                   "resampling": "bilinear",
                   "justification": {"resampling": quick_look}}),
        )
        .await?;
    assert!(!is_error(&again), "{}", text(&again));
    let receipt = &structured(&again)["reflection"][0];
    assert_eq!(receipt["stored_now"], true, "{receipt}");
    assert!(
        receipt["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("replaces the one stored"),
        "{receipt}"
    );
    let stored: Vec<String> = std::fs::read_dir(server.justifications().join("resampling"))?
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(stored[0].contains("field briefing"), "{}", stored[0]);
    // Attack round 17, R17-C5: the earlier output's record gives its own justification, kept
    // when the new one replaced it, never the new purpose.
    let earlier = server
        .call("provenance_report", json!({"input": "o1.tif"}))
        .await?;
    assert!(!is_error(&earlier), "{}", text(&earlier));
    let report = text(&earlier);
    assert!(!report.contains("field briefing"), "{report}");
    assert!(report.contains("matches the analysis layers"), "{report}");
    // An invalid one is refused with its errors, naming the capsule to rest on.
    let refused = server
        .call(
            "raster_resample",
            json!({"input": "dem.tif", "output": "o3.tif", "resolution": [60, 60],
                   "resampling": "bilinear",
                   "justification": {"resampling": {"intent": "ok"}}}),
        )
        .await?;
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("already justified by"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("o3.tif").exists());
    Ok(())
}
