//! A hostile plugin (loops, traps, memory bomb, stdout writes) costs one refused call each,
//! never the server.

use gdal_mcp_tests::{is_error, plugin_component, structured, text, Era, Options, Server};
use serde_json::json;

#[tokio::test]
async fn hostile_plugin_fails_each_call_closed_and_the_server_keeps_serving() -> anyhow::Result<()>
{
    let plugins = tempfile::tempdir()?;
    let hostile = plugin_component("hostile");
    assert!(
        hostile.is_file(),
        "{} is built by host/build.rs",
        hostile.display()
    );
    std::fs::copy(&hostile, plugins.path().join("hostile.wasm"))?;
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            plugin_dirs: vec![plugins.path().to_path_buf()],
            ..Default::default()
        },
    )
    .await?;

    let cases = [
        ("loop.tif", "ran out of fuel"),
        ("trap.tif", "trapped"),
        ("oom.tif", "memory limit"),
    ];
    for (output, expected) in cases {
        let started = std::time::Instant::now();
        let result = server
            .call(
                "raster_reproject",
                json!({"input": "dem.tif", "output": output, "dst_crs": "EPSG:4326", "resampling": "bilinear"}),
            )
            .await?;
        assert!(is_error(&result), "{output}");
        let error = &structured(&result)["error"];
        assert_eq!(error["kind"], json!("plugin_failure"), "{output}: {error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("plugin \"hostile\" 0.1.0"),
            "{output}: {message}"
        );
        assert!(message.contains(expected), "{output}: {message}");
        assert!(
            !server.path(output).exists(),
            "fail closed: nothing written"
        );
        assert!(
            started.elapsed().as_secs() < 30,
            "{output} took {:?}",
            started.elapsed()
        );

        // The next call is served normally.
        let info = server
            .call("raster_info", json!({"input": "dem.tif"}))
            .await?;
        assert!(!is_error(&info), "after {output}: {}", text(&info));
    }
    assert!(
        text(&server.call("raster_reproject", json!({"input": "dem.tif", "output": "trap.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"})).await?)
            .contains("hostile domain panics on purpose"),
        "the panic message comes from the captured stderr"
    );

    // Writing to stdout reaches nobody: the JSON-RPC stream stays intact and the domain's
    // trigger shows up as an ordinary refusal entry.
    let result = server
        .call(
            "raster_reproject",
            json!({"input": "dem.tif", "output": "stdout.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}),
        )
        .await?;
    assert!(is_error(&result));
    let domains: Vec<String> = structured(&result)["refusal"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["domain"].as_str().map(String::from))
        .collect();
    assert_eq!(domains, ["crs_datum", "resampling", "hostile"]);
    let tools = server.client.list_all_tools().await?;
    assert_eq!(tools.len(), 29);
    Ok(())
}

#[tokio::test]
async fn a_file_that_is_not_a_component_stops_startup_with_a_clear_error() -> anyhow::Result<()> {
    let plugins = tempfile::tempdir()?;
    std::fs::write(plugins.path().join("broken.wasm"), b"not wasm at all")?;
    let binary = gdal_mcp_tests::binary()?;
    let output = std::process::Command::new(binary)
        .arg("domains")
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--no-cache")
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("broken.wasm") && stderr.contains("not a valid WebAssembly component"),
        "{stderr}"
    );
    Ok(())
}

/// Attack round 10, R10-12: a `--plugins` folder inside the workspace was accepted, a tool
/// (`raster_convert` to ENVI) wrote `plugins/zz.wasm` there, and the next start loaded it (or,
/// with junk bytes, could not start at all). Such a folder stops the start, naming both; the
/// same pack in a folder of its own starts (the twin).
#[tokio::test]
async fn r10_12_a_plugin_folder_inside_a_workspace_stops_the_start() -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    let inside = workspace.path().join("plugins");
    std::fs::create_dir(&inside)?;
    let outside = tempfile::tempdir()?;
    for dir in [&inside, &outside.path().to_path_buf()] {
        std::fs::copy(plugin_component("legacy_v06"), dir.join("legacy_v06.wasm"))?;
    }
    let start = |plugins: &std::path::Path| -> anyhow::Result<std::process::Output> {
        Ok(std::process::Command::new(gdal_mcp_tests::binary()?)
            .arg("serve")
            .arg("--workspace")
            .arg(workspace.path())
            .arg("--cache-dir")
            .arg(gdal_mcp_tests::shared_cache())
            .arg("--plugins")
            .arg(plugins)
            .stdin(std::process::Stdio::null())
            .output()?)
    };
    let refused = start(&inside)?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "started: {stderr}");
    assert!(
        stderr.contains("lies inside the workspace") && stderr.contains("plugins"),
        "{stderr}"
    );
    // The twin: the same component outside the workspace loads, and the server runs until
    // its stdin closes.
    let started = start(outside.path())?;
    let stderr = String::from_utf8_lossy(&started.stderr);
    assert!(started.status.success(), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn domains_command_lists_builtin_and_dropped_in_domains() -> anyhow::Result<()> {
    let plugins = tempfile::tempdir()?;
    std::fs::copy(
        plugin_component("hostile"),
        plugins.path().join("hostile.wasm"),
    )?;
    let output = std::process::Command::new(gdal_mcp_tests::binary()?)
        .arg("domains")
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--cache-dir")
        .arg(gdal_mcp_tests::shared_cache())
        .output()?;
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let ids: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        ids,
        [
            "crs_datum",
            "resampling",
            "hydrology",
            "format_selection",
            "aggregation",
            "measurement",
            "hostile"
        ]
    );
    Ok(())
}
