//! Issue 21, item 3: what the table reader lets GDAL expand is bounded before GDAL opens the
//! file, through MCP; and heavy calls share one memory budget.

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

/// A GeoJSON layer in EPSG:4326 of one polygon per ring.
fn polygons(path: &Path, rings: &[Vec<[f64; 2]>]) {
    let features: Vec<serde_json::Value> = rings
        .iter()
        .enumerate()
        .map(|(id, ring)| {
            json!({"type": "Feature", "properties": {"id": id},
                   "geometry": {"type": "Polygon", "coordinates": [ring]}})
        })
        .collect();
    let doc = json!({"type": "FeatureCollection", "features": features});
    std::fs::write(path, doc.to_string()).unwrap();
}

/// A closed ring of `vertices` vertices (the first repeated last) around (lon, lat).
fn circle(lon: f64, lat: f64, radius: f64, vertices: usize) -> Vec<[f64; 2]> {
    let mut ring: Vec<[f64; 2]> = (0..vertices - 1)
        .map(|i| {
            let t = i as f64 / (vertices - 1) as f64 * std::f64::consts::TAU;
            [lon + radius * t.cos(), lat + radius * t.sin()]
        })
        .collect();
    ring.push(ring[0]);
    ring
}

/// Regression (issue 21): eight concurrent `vector_measure` calls took 4 GB between them, each
/// within its own per-call budgets. Heavy steps now reserve their estimate from one budget
/// all calls share (`GDAL_MCP_MEMORY_BUDGET_BYTES`, here 4 MiB). Sent together: the measure of
/// a 1° cell proceeds (GeographicLib's area), the measure of a polygon of 120,000 vertices
/// (about 5.5 MiB held) is refused with the estimate, the budget and the variable, nothing
/// else breaks, and a light call still answers. The clean twin: under the default budget the
/// same polygon is measured.
#[tokio::test]
async fn heavy_calls_share_one_memory_budget() {
    let budget = 4u64 << 20;
    let server = Server::start(
        Era::Modern,
        Options {
            env: vec![
                (
                    "GDAL_MCP_MEMORY_BUDGET_BYTES".to_string(),
                    budget.to_string(),
                ),
                ("GDAL_MCP_MEMORY_WAIT_MS".to_string(), "200".to_string()),
            ],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let cell = vec![[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]];
    polygons(&server.path("cell.geojson"), &[cell]);
    polygons(
        &server.path("big.geojson"),
        &[circle(10.0, 45.0, 0.5, 120_000)],
    );
    let (small, big) = tokio::join!(
        server.call("vector_measure", json!({"input": "cell.geojson"})),
        server.call("vector_measure", json!({"input": "big.geojson"})),
    );
    let (small, big) = (small.unwrap(), big.unwrap());
    assert!(!is_error(&small), "{}", text(&small));
    let area = structured(&small)["features"][0]["area"].as_f64().unwrap();
    assert!(
        (area - 12_308_778_361.469_452).abs() < 1.0,
        "GeographicLib's area of the 1° cell: {area}"
    );
    assert!(is_error(&big), "{}", text(&big));
    let message = text(&big);
    for part in [
        "needs an estimated",
        "memory budget of 4.0 MiB (4194304 bytes)",
        "GDAL_MCP_MEMORY_BUDGET_BYTES",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert_eq!(
        structured(&big)["error"]["kind"],
        "memory_budget",
        "{message}"
    );
    // A light call still answers, and the budget was given back: the small one again.
    let info = server
        .call("vector_info", json!({"input": "cell.geojson"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let again = server
        .call("vector_measure", json!({"input": "cell.geojson"}))
        .await
        .unwrap();
    assert!(!is_error(&again), "{}", text(&again));

    // The clean twin: the default budget holds the big polygon.
    let roomy = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::copy(server.path("big.geojson"), roomy.path("big.geojson")).unwrap();
    let measured = roomy
        .call("vector_measure", json!({"input": "big.geojson"}))
        .await
        .unwrap();
    assert!(!is_error(&measured), "{}", text(&measured));
    assert!(
        structured(&measured)["features"][0]["area"]
            .as_f64()
            .unwrap()
            > 1e9
    );
}

/// Write a `size`² Byte GeoTIFF of ones in EPSG:32633 (sparse and unwritten when `sparse`).
fn r10_13_tiff(path: &Path, size: u64, sparse: bool) {
    let size = size.to_string();
    let mut command = std::process::Command::new("gdal_create");
    command
        .args([
            "-q", "-of", "GTiff", "-outsize", &size, &size, "-bands", "1",
        ])
        .args(["-ot", "Byte", "-a_srs", "EPSG:32633"])
        .args(["-a_ullr", "500000", "5000000", "501000", "4999000"])
        .args(["-co", "TILED=YES"]);
    if sparse {
        command.args(["-co", "SPARSE_OK=TRUE"]);
    } else {
        command.args(["-burn", "1"]);
    }
    assert!(command.arg(path).status().unwrap().success());
}

/// A VRT of `size`² cells reading `src.tif` through a `k` x `k` `KernelFilteredSource`.
fn r10_13_kernel_vrt(size: u64, k: usize) -> String {
    let coefs = vec!["1"; k * k].join(" ");
    format!(
        "<VRTDataset rasterXSize=\"{size}\" rasterYSize=\"{size}\"><SRS>EPSG:32633</SRS>\
         <GeoTransform>500000,2.5,0,5000000,0,-2.5</GeoTransform>\
         <VRTRasterBand dataType=\"Float32\" band=\"1\"><KernelFilteredSource>\
         <SourceFilename relativeToVRT=\"1\">src.tif</SourceFilename><SourceBand>1</SourceBand>\
         <Kernel normalized=\"1\"><Size>{k}</Size><Coefs>{coefs}</Coefs></Kernel>\
         </KernelFilteredSource></VRTRasterBand></VRTDataset>"
    )
}

/// Regression, issue 21 attack round 10, R10-13: a VRT reading its source through a 201 x 201
/// kernel (40,401 multiply-adds per cell) is refused before the open, naming the figure and
/// GDAL_MCP_MAX_CELLS; the clean twin, a 3 x 3 kernel over the same source, is read.
#[tokio::test]
async fn r10_13_a_large_kernel_vrt_is_refused_before_the_open() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    r10_13_tiff(&server.path("src.tif"), 400, false);
    std::fs::write(server.path("k201.vrt"), r10_13_kernel_vrt(400, 201)).unwrap();
    std::fs::write(server.path("k3.vrt"), r10_13_kernel_vrt(400, 3)).unwrap();
    let started = std::time::Instant::now();
    let refused = server
        .call("raster_stats", json!({"input": "k201.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let message = text(&refused);
    assert!(
        message.contains("GDAL_MCP_MAX_CELLS") && message.contains("40402 per cell"),
        "{message}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let info = server
        .call("raster_info", json!({"input": "k201.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&info), "{}", text(&info));
    let stats = server
        .call("raster_stats", json!({"input": "k3.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
}

/// Regression, issue 21 attack round 10, R10-13: a 10 x 10 VRT averaging a whole sparse
/// 20000² GeoTIFF (every source cell read for every whole read) is refused by `raster_info`
/// before the open; the clean twins, the same window read nearest and an ordinary mosaic of
/// two tiles, are read.
#[tokio::test]
async fn r10_13_an_averaging_vrt_over_a_large_source_is_refused() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    r10_13_tiff(&server.path("big.tif"), 20000, true);
    let vrt = |resampling: &str| {
        format!(
            "<VRTDataset rasterXSize=\"10\" rasterYSize=\"10\"><SRS>EPSG:32633</SRS>\
             <GeoTransform>500000,100,0,5000000,0,-100</GeoTransform>\
             <VRTRasterBand dataType=\"Byte\" band=\"1\"><ComplexSource{resampling}>\
             <SourceFilename relativeToVRT=\"1\">big.tif</SourceFilename><SourceBand>1</SourceBand>\
             <SrcRect xOff=\"0\" yOff=\"0\" xSize=\"20000\" ySize=\"20000\"/>\
             <DstRect xOff=\"0\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/></ComplexSource>\
             </VRTRasterBand></VRTDataset>"
        )
    };
    std::fs::write(server.path("avg.vrt"), vrt(" resampling=\"average\"")).unwrap();
    std::fs::write(server.path("near.vrt"), vrt("")).unwrap();
    let refused = server
        .call("raster_info", json!({"input": "avg.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let message = text(&refused);
    assert!(
        message.contains("400000000 source cells") && message.contains("GDAL_MCP_MAX_CELLS"),
        "{message}"
    );
    let near = server
        .call("raster_info", json!({"input": "near.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&near), "{}", text(&near));
    r10_13_tiff(&server.path("a.tif"), 100, false);
    let b = std::process::Command::new("gdal_translate")
        .args(["-q", "-a_ullr", "501000", "5000000", "502000", "4999000"])
        .arg(server.path("a.tif"))
        .arg(server.path("b.tif"))
        .status()
        .unwrap();
    assert!(b.success());
    let built = std::process::Command::new("gdalbuildvrt")
        .arg("-q")
        .arg(server.path("mosaic.vrt"))
        .arg(server.path("a.tif"))
        .arg(server.path("b.tif"))
        .status()
        .unwrap();
    assert!(built.success());
    let mosaic = server
        .call("raster_stats", json!({"input": "mosaic.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&mosaic), "{}", text(&mosaic));
}

/// Regression, issue 21 attack round 11, R11-8: R10-13's VRTs written with numbers GDAL reads
/// leniently (`rasterXSize="10 px"`, `xSize="20000e"`, `<Size>201 x</Size>`: C's `atoi` and
/// `strtod` stop at the first character that is not part of a number) are refused as the
/// plainly written ones are; the estimate had taken them as unknown and let them run.
#[tokio::test]
async fn r11_8_sizes_written_loosely_are_read_as_gdal_reads_them() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    r10_13_tiff(&server.path("big.tif"), 20000, true);
    r10_13_tiff(&server.path("src.tif"), 400, false);
    let averaged = |size: &str, x_size: &str| {
        format!(
            "<VRTDataset rasterXSize=\"{size}\" rasterYSize=\"10\"><SRS>EPSG:32633</SRS>\
             <GeoTransform>500000,100,0,5000000,0,-100</GeoTransform>\
             <VRTRasterBand dataType=\"Byte\" band=\"1\"><ComplexSource resampling=\"average\">\
             <SourceFilename relativeToVRT=\"1\">big.tif</SourceFilename><SourceBand>1</SourceBand>\
             <SrcRect xOff=\"0\" yOff=\"0\" xSize=\"{x_size}\" ySize=\"20000\"/>\
             <DstRect xOff=\"0\" yOff=\"0\" xSize=\"10\" ySize=\"10\"/></ComplexSource>\
             </VRTRasterBand></VRTDataset>"
        )
    };
    std::fs::write(server.path("px.vrt"), averaged("10 px", "20000")).unwrap();
    std::fs::write(server.path("e.vrt"), averaged("10", "20000e")).unwrap();
    std::fs::write(
        server.path("k.vrt"),
        r10_13_kernel_vrt(400, 201).replace("<Size>201</Size>", "<Size>201 x</Size>"),
    )
    .unwrap();
    for (input, figure) in [
        ("px.vrt", "400000000 source cells"),
        ("e.vrt", "400000000 source cells"),
        ("k.vrt", "40402 per cell"),
    ] {
        let refused = server
            .call("raster_stats", json!({"input": input}))
            .await
            .unwrap();
        assert!(is_error(&refused), "{input}: {}", text(&refused));
        let message = text(&refused);
        assert!(
            message.contains(figure) && message.contains("GDAL_MCP_MAX_CELLS"),
            "{input}: {message}"
        );
    }
}

/// Regression, issue 21 attack round 11, R11-3: a 10 x 10 warped VRT averaging a sparse
/// 20000² GeoTIFF (GDAL's warper allocates the source window behind each block: 1.66 GB at
/// 40000²) is refused before the open, counted at its source's cells; the clean twin, a warped
/// VRT over a 400² source, is read.
#[tokio::test]
async fn r11_3_a_warped_vrt_over_a_large_source_is_refused() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    r10_13_tiff(&server.path("big.tif"), 20000, true);
    r10_13_tiff(&server.path("small.tif"), 400, false);
    for (source, vrt) in [("big.tif", "warped.vrt"), ("small.tif", "clean.vrt")] {
        let built = std::process::Command::new("gdalwarp")
            .args(["-q", "-of", "VRT", "-ts", "10", "10", "-r", "average"])
            .arg(server.path(source))
            .arg(server.path(vrt))
            .status()
            .unwrap();
        assert!(built.success());
    }
    let refused = server
        .call("raster_stats", json!({"input": "warped.vrt"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let message = text(&refused);
    assert!(
        message.contains("GDAL_MCP_MAX_CELLS") && message.contains("warped.vrt"),
        "{message}"
    );
    let clean = server
        .call("raster_stats", json!({"input": "clean.vrt"}))
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    assert_eq!(structured(&clean)["bands"][0]["max"].as_f64(), Some(1.0));
}

/// Attack round 12, R12-2 (the other side of R11-3): a warped VRT clipping a 1000² window out
/// of a sparse 20000² GeoTIFF (`gdalwarp -of VRT -te ...`, the common way to cut a window) was
/// refused, counted at its source's 400 M cells, while GDAL reads only the window. The window
/// a warped VRT reads is now counted through its own transformer (its extent mapped back to
/// the source, padded by the kernel's reach): the clip is read, in the source's CRS and
/// reprojected to EPSG:4326. R11-3's 10 x 10 average of the whole source stays refused
/// (`r11_3_a_warped_vrt_over_a_large_source_is_refused`).
#[tokio::test]
async fn r12_2_a_warped_vrt_clipping_a_window_is_counted_at_its_window() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    r10_13_tiff(&server.path("big.tif"), 20000, true);
    let window = ["500250", "4999250", "500300", "4999300"];
    for (vrt, extra) in [
        ("clip.vrt", vec!["-tr", "0.05", "0.05"]),
        (
            "clip4326.vrt",
            vec![
                "-t_srs",
                "EPSG:4326",
                "-te_srs",
                "EPSG:32633",
                "-ts",
                "1000",
                "1000",
            ],
        ),
    ] {
        let built = std::process::Command::new("gdalwarp")
            .args(["-q", "-of", "VRT", "-te"])
            .args(window)
            .args(extra)
            .arg(server.path("big.tif"))
            .arg(server.path(vrt))
            .status()
            .unwrap();
        assert!(built.success());
        let answered = server
            .call("raster_stats", json!({"input": vrt}))
            .await
            .unwrap();
        assert!(!is_error(&answered), "{vrt}: {}", text(&answered));
        assert_eq!(
            structured(&answered)["bands"][0]["cells"].as_f64(),
            Some(1_000_000.0),
            "{vrt}"
        );
    }
}
