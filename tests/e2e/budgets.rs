//! Issue 21, item 3: what the table reader lets GDAL expand is bounded before GDAL opens the
//! file, through MCP.

use gdal_mcp_tests::{is_error, structured, text, Era, Options, Server};
use serde_json::json;
use std::path::Path;

/// A zip with one deflated entry, written through GDAL's own zip writer.
fn zip_with(path: &Path, name: &str, bytes: &[u8]) {
    let target = std::ffi::CString::new(format!("/vsizip/{}/{name}", path.display())).unwrap();
    let mode = std::ffi::CString::new("wb").unwrap();
    unsafe {
        let fp = gdal_sys::VSIFOpenL(target.as_ptr(), mode.as_ptr());
        assert!(!fp.is_null());
        assert_eq!(
            gdal_sys::VSIFWriteL(bytes.as_ptr().cast(), 1, bytes.len(), fp),
            bytes.len()
        );
        gdal_sys::VSIFCloseL(fp);
    }
}

/// Regression (issue 21): a 3.4 MB XLSX that inflates to 3.4 GB made points_from_table take
/// 3.4 GB. A spreadsheet whose sheet inflates 1000 times is refused before the gate, naming
/// the budget; nothing is written, and the server keeps answering. An ordinary spreadsheet
/// (the clean twin) still becomes points.
#[tokio::test]
async fn a_spreadsheet_zip_bomb_is_refused_before_gdal_expands_it() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let mut sheet = String::from("<worksheet><sheetData>");
    while sheet.len() < (8 << 20) {
        sheet.push_str("<row><c t=\"n\"><v>0</v></c></row>");
    }
    sheet.push_str("</sheetData></worksheet>");
    zip_with(
        &server.path("bomb.xlsx"),
        "xl/worksheets/sheet1.xml",
        sheet.as_bytes(),
    );
    let size = std::fs::metadata(server.path("bomb.xlsx")).unwrap().len();
    assert!(size < 100_000, "{size}");
    let refused = server
        .call(
            "points_from_table",
            json!({"input": "bomb.xlsx", "output": "bomb.gpkg", "x": "lon", "y": "lat",
                   "crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused));
    let message = text(&refused);
    assert!(
        message.contains("zip bomb") && message.contains("GDAL_MCP_TABLE_MAX_RATIO"),
        "{message}"
    );
    assert!(!server.path("bomb.gpkg").exists());
    // Every tool that opens it is bounded the same way (regression, issue 21 attack round 3:
    // `vector_info` and `vector_query` inflated a spreadsheet without the table budget).
    for (tool, arguments) in [
        ("vector_info", json!({"input": "bomb.xlsx"})),
        ("vector_query", json!({"input": "bomb.xlsx", "limit": 1})),
    ] {
        let refused = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        assert!(
            text(&refused).contains("zip bomb"),
            "{tool}: {}",
            text(&refused)
        );
    }

    // The clean twin: a spreadsheet written by GDAL from a CSV.
    std::fs::write(
        server.path("ok.csv"),
        "id,lon,lat\n007,10.5,59.9\n008,5.25,60.4\n",
    )
    .unwrap();
    let status = std::process::Command::new("ogr2ogr")
        .args(["-f", "XLSX"])
        .arg(server.path("ok.xlsx"))
        .arg(server.path("ok.csv"))
        .status()
        .unwrap();
    assert!(status.success());
    let result = server
        .call(
            "points_from_table",
            json!({"input": "ok.xlsx", "output": "ok.gpkg", "x": "lon", "y": "lat",
                   "crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(structured(&result)["features"], json!(2));
}

/// A CSV with one line longer than the line budget is refused before GDAL reads it.
#[tokio::test]
async fn a_csv_line_over_the_budget_is_refused() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(
        server.path("long.csv"),
        format!("id,lon,lat\n1,10.5,{}\n", "5".repeat(2 << 20)),
    )
    .unwrap();
    let refused = server
        .call(
            "points_from_table",
            json!({"input": "long.csv", "output": "long.gpkg", "x": "lon", "y": "lat",
                   "crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("GDAL_MCP_TABLE_MAX_LINE_BYTES"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("long.gpkg").exists());
}
