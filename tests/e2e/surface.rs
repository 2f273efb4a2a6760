//! The public surface: tools, prompts and resources, in both protocol eras.

use gdal_mcp_tests::{is_error, structured, Era, Options, Server};
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::json;

async fn lists_everything(era: Era) -> anyhow::Result<()> {
    let server = Server::start(era, Options::default()).await?;
    let info = server
        .client
        .peer_info()
        .and_then(|i| i.server_info.clone());
    assert_eq!(
        info.as_ref().map(|i| i.name.as_str()),
        Some("gdal-mcp"),
        "{era:?}"
    );

    let tools = server.client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "raster_info",
            "raster_reproject",
            "persist_justification",
            "provenance_report",
            "raster_stats",
            "raster_sample",
            "raster_convert",
            "raster_resample",
            "raster_overviews",
            "raster_terrain",
            "raster_calc",
            "vector_info",
            "vector_query",
            "vector_reproject",
            "vector_convert",
            "vector_clip",
            "points_from_table",
            "vector_measure",
            "vector_buffer",
            "vector_overlay",
            "vector_join",
            "zonal_stats",
            "raster_composite",
            "raster_aggregate",
            "dem_condition",
            "dem_flow_direction",
            "dem_flow_accumulation",
            "dem_streams",
            "dem_watershed"
        ]
    );
    for tool in &tools {
        assert!(
            tool.description.as_ref().is_some_and(|d| d.len() > 40),
            "{}",
            tool.name
        );
        assert!(tool.output_schema.is_some(), "{} output schema", tool.name);
        assert!(tool.annotations.is_some(), "{} annotations", tool.name);
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
    }

    let prompts = server.client.list_all_prompts().await?;
    let prompt_names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        prompt_names,
        [
            "justify_crs_datum",
            "justify_resampling",
            "justify_hydrology",
            "justify_format_selection",
            "justify_aggregation",
            "justify_measurement"
        ]
    );

    let rendered = server
        .client
        .get_prompt(
            GetPromptRequestParams::new("justify_resampling").with_arguments(
                serde_json::from_value(
                    json!({"tool": "raster_reproject", "method": "cubic", "data": "continuous"}),
                )?,
            ),
        )
        .await?;
    let text = serde_json::to_string(&rendered.messages)?;
    assert!(text.contains("`cubic`"), "{text}");
    // Regression: optional arguments that were not given rendered as blank fields
    // ("**Flagged because:** " followed by nothing); such lines are left out now.
    assert!(!text.contains("Flagged because"), "{text}");

    // Attack round 9: a 70 KB `tool` argument was answered -32603 "plugin crs_datum ...
    // render-prompt broke the contract", blaming the domain for the caller's argument. It is
    // the caller's error, named, and the domain keeps rendering.
    let long = "r".repeat(70_000);
    let refused = server
        .client
        .get_prompt(
            GetPromptRequestParams::new("justify_crs_datum")
                .with_arguments(serde_json::from_value(json!({"tool": long}))?),
        )
        .await
        .expect_err("a 70 KB prompt argument is refused");
    let message = refused.to_string();
    assert!(
        message.contains("argument \"tool\" is 70000 bytes") && !message.contains("plugin"),
        "{message}"
    );
    let again = server
        .client
        .get_prompt(
            GetPromptRequestParams::new("justify_crs_datum")
                .with_arguments(serde_json::from_value(json!({
                "tool": "vector_clip", "src_crs": "EPSG:4267", "dst_crs": "EPSG:4326"}))?),
        )
        .await?;
    assert!(serde_json::to_string(&again.messages)?.contains("vector_clip"));

    let resources = server.client.list_all_resources().await?;
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    for expected in [
        "methodology://crs_datum",
        "methodology://resampling",
        "schema://justification",
    ] {
        assert!(uris.contains(&expected), "{expected} not in {uris:?}");
    }
    let schema = server
        .client
        .read_resource(ReadResourceRequestParams::new("schema://justification"))
        .await?;
    let body = serde_json::to_string(&schema.contents)?;
    assert!(
        body.contains("alternatives") && body.contains("minItems"),
        "{body}"
    );
    let methodology = server
        .client
        .read_resource(ReadResourceRequestParams::new("methodology://crs_datum"))
        .await?;
    assert!(serde_json::to_string(&methodology.contents)?.contains("ballpark"));
    Ok(())
}

#[tokio::test]
async fn lists_tools_prompts_and_resources_legacy() -> anyhow::Result<()> {
    lists_everything(Era::Legacy).await
}

#[tokio::test]
async fn lists_tools_prompts_and_resources_modern() -> anyhow::Result<()> {
    lists_everything(Era::Modern).await
}

#[tokio::test]
async fn raster_info_reports_facts_and_gdalinfo() -> anyhow::Result<()> {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif", "lc.tif"],
            ..Default::default()
        },
    )
    .await?;
    let result = server
        .call("raster_info", json!({"input": "dem.tif"}))
        .await?;
    assert!(!is_error(&result), "{result:?}");
    let out = structured(&result);
    assert_eq!(out["facts"]["crs"]["id"], json!("EPSG:31985"));
    assert_eq!(out["facts"]["raster"]["width"], json!(111));
    assert_eq!(out["facts"]["raster"]["looks_categorical"], json!(false));
    assert_eq!(out["gdalinfo"]["size"], json!([111, 111]));

    let lc = structured(
        &server
            .call("raster_info", json!({"input": "lc.tif", "stats": true}))
            .await?,
    );
    assert_eq!(lc["facts"]["raster"]["evidence"]["palette"], json!(true));
    assert_eq!(lc["facts"]["raster"]["looks_categorical"], json!(true));
    assert!(
        lc["gdalinfo"]["bands"][0]["mean"].is_number(),
        "stats requested"
    );
    Ok(())
}

#[tokio::test]
async fn bad_arguments_get_clear_errors_before_the_gate() -> anyhow::Result<()> {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await?;
    let cases = [
        (
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326"}),
            "resampling",
        ),
        (
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "colour": 1}),
            "colour",
        ),
        (
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:999999", "resampling": "bilinear"}),
            "dst_crs",
        ),
        (
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "format": "NoSuchDriver"}),
            "not a GDAL driver",
        ),
        (
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "resolution": [1, 1], "size": [10, 10]}),
            "mutually exclusive",
        ),
        (
            json!({"input": "dem.tif", "output": "dem.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "overwrite": true}),
            "an input of this call",
        ),
        (
            json!({"input": "missing.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}),
            "does not exist",
        ),
    ];
    for (arguments, expected) in cases {
        let result = server.call("raster_reproject", arguments.clone()).await?;
        assert!(is_error(&result), "{arguments}");
        let message = structured(&result)["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains(expected), "{arguments}: {message}");
        assert!(
            structured(&result).get("refusal").is_none(),
            "validated before the gate"
        );
    }
    // Nothing was written and nothing was stored.
    assert!(!server.path("o.tif").exists());
    assert!(!server.justifications().exists());

    let unknown = server
        .client
        .peer()
        .call_tool_once(rmcp::model::CallToolRequestParams::new("no_such_tool"))
        .await;
    assert!(unknown.is_err(), "unknown tools are protocol errors");
    // The server still serves.
    assert!(!is_error(
        &server
            .call("raster_info", json!({"input": "dem.tif"}))
            .await?
    ));
    Ok(())
}

/// Start the server, optionally send one line, close stdin, and return (exit code, stdout,
/// stderr). The server must end by itself within 20 s.
fn run_and_close(send: Option<&str>) -> anyhow::Result<(Option<i32>, String, String)> {
    use std::io::{Read, Write};
    let workspace = tempfile::tempdir()?;
    let mut child = gdal_mcp_tests::spawn_raw(workspace.path(), true)?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    if let Some(line) = send {
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    drop(stdin);
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            child.kill()?;
            anyhow::bail!("the server did not exit after its client closed stdin");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_string(&mut out)?;
    }
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut err)?;
    }
    Ok((status.code(), out, err))
}

/// Regression: a client that sends nothing, or only `server/discover`, and closes made the
/// server exit 1 with a handshake error. It now ends with exit 0 and one clear line.
#[test]
fn a_closed_or_silent_client_ends_the_server_cleanly() -> anyhow::Result<()> {
    let (code, out, err) = run_and_close(None)?;
    assert_eq!(code, Some(0), "stderr: {err}");
    assert!(out.is_empty(), "nothing but JSON-RPC on stdout: {out:?}");
    assert!(err.contains("closed the connection"), "{err}");

    let discover = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let (code, out, err) = run_and_close(Some(discover))?;
    assert_eq!(code, Some(0), "stderr: {err}");
    assert!(out.contains("\"id\":1"), "discover was answered: {out}");
    for line in out.lines() {
        let parsed: serde_json::Value = serde_json::from_str(line)?;
        assert_eq!(parsed["jsonrpc"], "2.0", "{line}");
    }
    Ok(())
}

/// `--toolsets` trims what is listed and callable (issue 19): an operator whose agents only
/// do terrain work lists 14 tools instead of 29, and a call to a tool outside the sets is a
/// clear error naming the flag.
#[tokio::test]
async fn toolsets_trim_the_list_and_what_can_be_called() {
    let options = Options {
        extra_args: vec!["--toolsets".to_string(), "raster,dem".to_string()],
        ..Options::default()
    };
    let server = Server::start(Era::Modern, options).await.unwrap();
    let tools = server.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "raster_info",
            "raster_reproject",
            "persist_justification",
            "provenance_report",
            "raster_stats",
            "raster_resample",
            "raster_overviews",
            "raster_terrain",
            "raster_calc",
            "dem_condition",
            "dem_flow_direction",
            "dem_flow_accumulation",
            "dem_streams",
            "dem_watershed"
        ]
    );
    let refused = server
        .call("vector_info", json!({"input": "x.gpkg"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("not enabled") && refused.contains("--toolsets raster,dem"),
        "{refused}"
    );
    // An unknown set stops the server at start, naming the choices.
    let output = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
        .args(["serve", "--toolsets", "rasters"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("rasters") && stderr.contains("raster, convert, vector"),
        "{stderr}"
    );
}

/// Attack round 15, R15-C10: `vector_measure` was announced `readOnlyHint: true` while every
/// call appends to the ledger and a justified one stores a capsule, so hosts that run
/// read-only tools without asking let an agent write the store unasked. No tool gated by a
/// domain is announced read-only; the ungated readers still are.
#[tokio::test]
async fn r15_c10_no_gated_tool_is_announced_read_only() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let tools = server.client.list_all_tools().await.unwrap();
    for tool in &tools {
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let gated = tool
            .description
            .as_deref()
            .is_some_and(|d| d.contains("Gated by"));
        assert!(
            !(gated && read_only),
            "{} is gated and announced read-only",
            tool.name
        );
    }
    let info = tools.iter().find(|t| t.name == "raster_info").unwrap();
    assert_eq!(
        info.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
}
