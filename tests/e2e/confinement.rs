//! Every input and output path must resolve inside a workspace.

use gdal_mcp_tests::{is_error, structured, Era, Options, Server};
use serde_json::json;

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() -> anyhow::Result<()> {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await?;
    let outside = tempfile::tempdir()?;
    std::fs::copy(server.path("dem.tif"), outside.path().join("secret.tif"))?;
    let escape = format!(
        "../{}/secret.tif",
        outside
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    );
    std::os::unix::fs::symlink(outside.path().join("secret.tif"), server.path("link.tif"))?;
    std::os::unix::fs::symlink(outside.path(), server.path("outdir"))?;

    let inputs = [
        escape.as_str(),
        "link.tif",
        "/etc/passwd",
        "/vsicurl/http://example.com/a.tif",
    ];
    for input in inputs {
        let result = server.call("raster_info", json!({"input": input})).await?;
        assert!(is_error(&result), "{input}");
        let error = &structured(&result)["error"];
        assert_eq!(error["kind"], json!("path"), "{input}: {error}");
    }
    for output in ["outdir/out.tif", "../out.tif"] {
        let result = server
            .call("raster_reproject", json!({"input": "dem.tif", "output": output, "dst_crs": "EPSG:4326", "resampling": "bilinear"}))
            .await?;
        assert!(is_error(&result), "{output}");
        assert_eq!(
            structured(&result)["error"]["kind"],
            json!("path"),
            "{output}"
        );
    }
    assert!(!outside.path().join("out.tif").exists());
    // Inside the workspace, relative paths work.
    assert!(!is_error(
        &server
            .call("raster_info", json!({"input": "dem.tif"}))
            .await?
    ));
    Ok(())
}

#[tokio::test]
async fn existing_outputs_are_kept_unless_overwrite() -> anyhow::Result<()> {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await?;
    std::fs::write(server.path("taken.tif"), b"precious")?;
    let result = server
        .call("raster_reproject", json!({"input": "dem.tif", "output": "taken.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}))
        .await?;
    assert!(is_error(&result));
    assert!(structured(&result)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("overwrite"));
    assert_eq!(std::fs::read(server.path("taken.tif"))?, b"precious");
    // No staging folder is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(server.workspace.path())?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".gdal-mcp-"))
        .collect();
    assert!(leftovers.is_empty());
    Ok(())
}
