//! Zero silent errors: one test per failure family of the geospatial trap suite, each with a
//! fixture built here whose right answer is known by construction. Every family either gets the
//! right number by default or a refusal that names the defect; none yields a plausible wrong
//! number with a success.

use gdal::raster::{Buffer, GdalType};
use gdal::spatial_ref::SpatialRef;
use gdal::{DriverManager, Metadata};
use gdal_mcp_tests::{
    call_justified, is_error, justification, plugin_component, run_program, structured, text, Era,
    Options, Server,
};
use serde_json::{json, Value};
use std::path::Path;

/// A one-band GeoTIFF with `data` (row-major), an optional geotransform and EPSG code, and a
/// hook to set band properties (nodata, scale, offset, unit).
fn write_raster<T: GdalType + Copy>(
    path: &Path,
    (w, h): (usize, usize),
    data: Vec<T>,
    gt: Option<[f64; 6]>,
    epsg: Option<u32>,
    band_setup: impl FnOnce(&mut gdal::raster::RasterBand),
) {
    let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver.create_with_band_type::<T, _>(path, w, h, 1).unwrap();
    if let Some(gt) = gt {
        dataset.set_geo_transform(&gt).unwrap();
    }
    if let Some(code) = epsg {
        dataset
            .set_spatial_ref(&SpatialRef::from_epsg(code).unwrap())
            .unwrap();
    }
    let mut band = dataset.rasterband(1).unwrap();
    band.write((0, 0), (w, h), &mut Buffer::new((w, h), data))
        .unwrap();
    band_setup(&mut band);
}

/// Change a written dataset in place (metadata GDAL only takes on an open dataset).
fn update(path: &Path, change: impl FnOnce(&mut gdal::Dataset)) {
    let mut dataset = gdal::Dataset::open_ex(
        path,
        gdal::DatasetOptions {
            open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
            ..Default::default()
        },
    )
    .unwrap();
    change(&mut dataset);
}

fn set_unit(band: &gdal::raster::RasterBand, unit: &str) {
    let unit = std::ffi::CString::new(unit).unwrap();
    // SAFETY: a live band handle and a NUL-terminated string GDAL copies.
    unsafe { gdal_sys::GDALSetRasterUnitType(band.c_rasterband(), unit.as_ptr()) };
}

fn read_all(path: &Path) -> (Vec<f64>, [f64; 6]) {
    let dataset = gdal::Dataset::open(path).unwrap();
    let gt = dataset.geo_transform().unwrap();
    let band = dataset.rasterband(1).unwrap();
    let (w, h) = band.size();
    let data = band
        .read_as::<f64>((0, 0), (w, h), (w, h), None)
        .unwrap()
        .data()
        .to_vec();
    (data, gt)
}

fn error_kind(result: &Value) -> &str {
    result["error"]["kind"].as_str().unwrap_or_default()
}

/// A one-band GeoTIFF `name` in the server's workspace on 30 m cells of EPSG:32633.
fn write_utm<T: GdalType + Copy>(server: &Server, name: &str, size: (usize, usize), data: Vec<T>) {
    let gt = Some([500000.0, 30.0, 0.0, 5000000.0, 0.0, -30.0]);
    write_raster::<T>(&server.path(name), size, data, gt, Some(32633), |_| {});
}

/// The commands a warping tool returns (`commands`, or `raster_reproject`'s
/// `gdalwarp_command`), as JSON text.
fn warp_command(result: &rmcp::model::CallToolResult) -> String {
    let content = structured(result);
    content
        .get("commands")
        .or(content.get("gdalwarp_command"))
        .map(|c| c.to_string())
        .unwrap_or_default()
}

/// `reduce` over every 2 x 2 block of a square grid of `cells` (row by row), block by block.
fn two_by_two(cells: &[f64], reduce: fn(&[f64]) -> f64) -> Vec<f64> {
    let width = (cells.len() as f64).sqrt() as usize;
    let mut out = Vec::new();
    for br in 0..width / 2 {
        for bc in 0..width / 2 {
            let block: Vec<f64> = (2 * br..2 * br + 2)
                .flat_map(|r| (2 * bc..2 * bc + 2).map(move |c| (r, c)))
                .map(|(r, c)| cells[r * width + c])
                .collect();
            out.push(reduce(&block));
        }
    }
    out
}

async fn server() -> Server {
    Server::start(Era::Modern, Options::default())
        .await
        .unwrap()
}

/// Sidecar georeferencing: the file's tags say 10 m, its `.aux.xml` says 20 m (GDAL's default
/// order reads the sidecar first, so every area came out 4x too large). Every raster tool
/// refuses with both candidates until `georef_source` chooses; then the chosen one is used.
#[tokio::test]
async fn a_sidecar_that_contradicts_the_file_is_refused_until_a_source_is_chosen() {
    let server = server().await;
    let tif = server.path("conflict.tif");
    write_raster::<f32>(
        &tif,
        (4, 4),
        (1..=16).map(|v| v as f32).collect(),
        Some([500_000.0, 10.0, 0.0, 4_000_040.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    std::fs::write(
        server.path("conflict.tif.aux.xml"),
        "<PAMDataset><GeoTransform>5.0e+05, 2.0e+01, 0, 4.00004e+06, 0, -2.0e+01</GeoTransform></PAMDataset>",
    )
    .unwrap();
    for (tool, args) in [
        ("raster_info", json!({"input": "conflict.tif"})),
        ("raster_stats", json!({"input": "conflict.tif"})),
        (
            "raster_resample",
            json!({"input": "conflict.tif", "output": "r.tif", "resampling": "nearest", "resolution": [40, 40]}),
        ),
        // Regression (issue 19): raster_calc opens rasters but was listed as not opening
        // them, so this refusal told the agent to pass an argument raster_calc refused.
        (
            "raster_calc",
            json!({"inputs": {"a": "conflict.tif"}, "expression": "a * 2", "output": "c.tif",
                   "data_type": "Float32"}),
        ),
    ] {
        let refused = server.call(tool, args).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        let detail = structured(&refused);
        assert_eq!(error_kind(&detail), "data_conflict", "{tool}: {detail}");
        assert_eq!(detail["error"]["parameter"], "georef_source");
        let sources: Vec<&str> = detail["error"]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["source"].as_str())
            .collect();
        assert_eq!(sources, ["internal", "aux_xml"], "{tool}");
        assert!(text(&refused).contains("10 x -10") && text(&refused).contains("20 x -20"));
    }
    assert!(!server.path("r.tif").exists());
    for (source, size) in [("internal", 10.0), ("aux_xml", 20.0)] {
        let info = server
            .call(
                "raster_info",
                json!({"input": "conflict.tif", "georef_source": source}),
            )
            .await
            .unwrap();
        assert!(!is_error(&info), "{}", text(&info));
        let facts = &structured(&info)["facts"]["raster"];
        assert_eq!(facts["pixel_size"], json!([size, -size]), "{source}");
        assert_eq!(facts["georeferencing"]["geotransform_source"], source);
        assert_eq!(
            facts["georeferencing"]["conflicts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
    // The choice reaches the gated tools' GDAL programs too: 40 m cells from 10 m cells.
    let resampled = call_justified(
        &server,
        "raster_resample",
        json!({"input": "conflict.tif", "output": "r.tif", "resampling": "average",
               "resolution": [40, 40], "georef_source": "internal"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&resampled.result), "{}", text(&resampled.result));
    let (values, gt) = read_all(&server.path("r.tif"));
    assert_eq!(gt[1], 40.0);
    assert_eq!(values, vec![8.5]);
    let calc = call_justified(
        &server,
        "raster_calc",
        json!({"inputs": {"a": "conflict.tif"}, "expression": "a * 2", "output": "c.tif",
               "data_type": "Float32", "georef_source": "aux_xml"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&calc.result), "{}", text(&calc.result));
    let (values, gt) = read_all(&server.path("c.tif"));
    assert_eq!(gt[1], 20.0, "the chosen source's cell size");
    assert_eq!(values[0], 2.0);
    // A value that is not a source is an argument error naming the choices.
    let bad = server
        .call(
            "raster_info",
            json!({"input": "conflict.tif", "georef_source": "sidecar"}),
        )
        .await
        .unwrap();
    assert_eq!(error_kind(&structured(&bad)), "invalid_arguments");
    assert!(text(&bad).contains("aux_xml"));
}

/// No geotransform: described as such (not as 1x1 pixels), and tools that need cell sizes
/// refuse.
#[tokio::test]
async fn a_raster_without_a_geotransform_says_so_and_terrain_refuses() {
    let server = server().await;
    write_raster::<f32>(
        &server.path("bare.tif"),
        (3, 3),
        vec![1.0; 9],
        None,
        None,
        |_| {},
    );
    let info = server
        .call("raster_info", json!({"input": "bare.tif"}))
        .await
        .unwrap();
    let facts = &structured(&info)["facts"]["raster"];
    assert_eq!(facts["pixel_size"], Value::Null);
    assert_eq!(facts["georeferencing"]["geotransform_source"], "none");
    let slope = server
        .call(
            "raster_terrain",
            json!({"input": "bare.tif", "output": "s.tif", "operation": "slope"}),
        )
        .await
        .unwrap();
    assert!(is_error(&slope));
    assert!(text(&slope).contains("no geotransform"), "{}", text(&slope));
    assert!(!server.path("s.tif").exists());
}

/// Pixel-is-point: registration is reported, and the geotransform (and so every coordinate)
/// is corner-based: the tie point written as a cell centre is corner + half a cell.
#[tokio::test]
async fn pixel_is_point_registration_is_reported_with_corner_coordinates() {
    let server = server().await;
    let tif = server.path("point.tif");
    write_raster::<f32>(
        &tif,
        (2, 2),
        vec![1.0, 2.0, 3.0, 4.0],
        Some([1000.0, 10.0, 0.0, 2000.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    update(&tif, |dataset| {
        dataset
            .set_metadata_item("AREA_OR_POINT", "Point", "")
            .unwrap()
    });
    let info = server
        .call("raster_info", json!({"input": "point.tif"}))
        .await
        .unwrap();
    let g = &structured(&info)["facts"]["raster"]["georeferencing"];
    assert_eq!(g["registration"], "point", "{g}");
    // GDAL keeps the corner-based geotransform it was given; the first cell's centre is at
    // (1005, 1995), where a point-registered file puts its tie point.
    assert_eq!(
        g["geotransform"],
        json!([1000.0, 10.0, 0.0, 2000.0, 0.0, -10.0])
    );
}

/// South-up and rotated rasters: reported, and the grid algorithms that assume north-up
/// (hydrology, terrain, zonal statistics) refuse instead of routing water the wrong way.
#[tokio::test]
async fn south_up_and_rotated_rasters_are_reported_and_refused_by_grid_algorithms() {
    let server = server().await;
    let dem: Vec<f32> = (0..25).map(|v| 100.0 + v as f32).collect();
    write_raster::<f32>(
        &server.path("south.tif"),
        (5, 5),
        dem.clone(),
        Some([0.0, 10.0, 0.0, 0.0, 0.0, 10.0]),
        Some(32633),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("rotated.tif"),
        (5, 5),
        dem,
        Some([0.0, 10.0, 2.0, 100.0, 2.0, -10.0]),
        Some(32633),
        |_| {},
    );
    for (file, flag, phrase) in [
        ("south.tif", "south_up", "south-up"),
        ("rotated.tif", "rotated", "rotated"),
    ] {
        let info = server
            .call("raster_info", json!({"input": file}))
            .await
            .unwrap();
        assert_eq!(
            structured(&info)["facts"]["raster"]["georeferencing"][flag],
            true,
            "{file}"
        );
        // gdaldem on a south-up DEM is flipped north-up first (below); a rotated one cannot be.
        let mut tools = vec![(
            "dem_flow_direction",
            json!({"input": file, "output": "fd.tif", "algorithm": "d8"}),
        )];
        if flag == "rotated" {
            tools.push((
                "raster_terrain",
                json!({"input": file, "output": "t.tif", "operation": "aspect"}),
            ));
        }
        for (tool, args) in tools {
            let result = call_justified(&server, tool, args).await.unwrap().result;
            assert!(is_error(&result), "{tool} on {file}: {}", text(&result));
            assert!(text(&result).contains(phrase), "{tool}: {}", text(&result));
        }
    }
    assert!(!server.path("fd.tif").exists() && !server.path("t.tif").exists());
}

/// Issue 18: slope on a south-up DEM was refused although it does not depend on the row
/// direction, and aspect and hillshade, which do, were refused instead of computed. A DEM whose
/// surface tilts unevenly (every aspect differs) is written north-up and south-up (the same
/// ground, rows reversed, positive pixel height); every terrain operation on the south-up file
/// gives gdaldem's grid of the north-up file, cell for cell, georeferenced north-up.
#[tokio::test]
async fn terrain_on_a_south_up_dem_equals_gdaldem_on_its_north_up_twin() {
    let server = server().await;
    let (w, h) = (9usize, 7usize);
    let height = |col: usize, row_from_north: usize| {
        let (x, y) = (col as f32, (h - 1 - row_from_north) as f32);
        100.0 + 3.0 * x + 0.7 * y * y - 0.4 * x * y
    };
    let north: Vec<f32> = (0..h)
        .flat_map(|r| (0..w).map(move |c| height(c, r)))
        .collect();
    let south: Vec<f32> = (0..h)
        .rev()
        .flat_map(|r| (0..w).map(move |c| height(c, r)))
        .collect();
    write_raster::<f32>(
        &server.path("north.tif"),
        (w, h),
        north,
        Some([500_000.0, 10.0, 0.0, 4_000_070.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("south.tif"),
        (w, h),
        south,
        Some([500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, 10.0]),
        Some(32633),
        |_| {},
    );
    for operation in ["slope", "aspect", "hillshade", "tri", "tpi", "roughness"] {
        let mut grids = Vec::new();
        for file in ["north.tif", "south.tif"] {
            let output = format!("{operation}_{file}");
            let result = call_justified(
                &server,
                "raster_terrain",
                json!({"input": file, "output": output, "operation": operation}),
            )
            .await
            .unwrap()
            .result;
            assert!(!is_error(&result), "{operation} {file}: {}", text(&result));
            grids.push(read_all(&server.path(&output)));
        }
        let ((north, north_gt), (south, south_gt)) = (&grids[0], &grids[1]);
        assert_eq!(north_gt, south_gt, "{operation}");
        assert_eq!(north_gt[5], -10.0, "{operation}");
        assert_eq!(north, south, "{operation}");
        // Not a grid of nodata: the inner cells carry values.
        assert!(
            north.iter().filter(|v| **v > -9000.0 && **v != 0.0).count() >= (w - 2) * (h - 2),
            "{operation}: {north:?}"
        );
    }
}

/// Scale and offset: an NDVI-like band stored as Int16 with scale 0.0001 and offset -0.1.
/// Statistics come back in physical values (ignoring the offset would shift the mean by 0.1).
#[tokio::test]
async fn statistics_are_in_physical_values_where_a_band_declares_scale_and_offset() {
    let server = server().await;
    let raw: Vec<i16> = vec![1000, 2000, 3000, 4000];
    write_raster::<i16>(
        &server.path("ndvi.tif"),
        (2, 2),
        raw,
        Some([0.0, 30.0, 0.0, 60.0, 0.0, -30.0]),
        Some(32633),
        |band| {
            band.set_scale(0.0001).unwrap();
            band.set_offset(-0.1).unwrap();
        },
    );
    let stats = server
        .call("raster_stats", json!({"input": "ndvi.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
    let band = &structured(&stats)["bands"][0];
    // physical = raw * 0.0001 - 0.1: 0.0, 0.1, 0.2, 0.3; mean 0.15.
    let close = |v: &Value, want: f64| v.as_f64().is_some_and(|v| (v - want).abs() < 1e-6);
    assert!(close(&band["mean"], 0.15), "{band}");
    assert!(
        close(&band["min"], 0.0) && close(&band["max"], 0.3),
        "{band}"
    );
    assert_eq!(band["scale"], 0.0001);
    assert_eq!(band["offset"], -0.1);
    // Zonal statistics too: one zone over the whole grid.
    std::fs::write(
        server.path("zone.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"id":1},
            "geometry":{"type":"Polygon","coordinates":[[[0,0],[60,0],[60,60],[0,60],[0,0]]]}}]}"#,
    )
    .unwrap();
    let zonal = call_justified(
        &server,
        "zonal_stats",
        json!({"input": "ndvi.tif", "zones": "zone.geojson", "stats": ["mean", "max"],
               "semantics": "cell_centre"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&zonal.result), "{}", text(&zonal.result));
    let zone = &structured(&zonal.result)["features"][0];
    assert!(
        close(&zone["mean"], 0.15) && close(&zone["max"], 0.3),
        "{zone}"
    );
    let info = server
        .call("raster_info", json!({"input": "ndvi.tif"}))
        .await
        .unwrap();
    let facts = &structured(&info)["facts"]["raster"]["bands"][0];
    assert_eq!(facts["scale"], 0.0001);
    assert_eq!(facts["offset"], -0.1);
}

/// An undeclared -9999: reported as evidence by raster_info, and statistics refuse (the mean
/// would include it) until `nodata` names it.
#[tokio::test]
async fn an_undeclared_sentinel_is_reported_and_statistics_refuse_until_nodata_names_it() {
    let server = server().await;
    let mut data = vec![10.0f32; 16];
    data[0] = -9999.0;
    data[5] = -9999.0;
    data[15] = 30.0;
    write_raster::<f32>(
        &server.path("sentinel.tif"),
        (4, 4),
        data,
        Some([0.0, 10.0, 0.0, 40.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    let info = server
        .call("raster_info", json!({"input": "sentinel.tif"}))
        .await
        .unwrap();
    let sentinels = &structured(&info)["facts"]["raster"]["bands"][0]["undeclared_sentinels"];
    assert_eq!(sentinels[0]["value"], -9999.0, "{sentinels}");
    assert_eq!(sentinels[0]["count"], 2);
    let refused = server
        .call("raster_stats", json!({"input": "sentinel.tif"}))
        .await
        .unwrap();
    assert!(is_error(&refused));
    let detail = structured(&refused);
    assert_eq!(error_kind(&detail), "data_conflict");
    assert_eq!(detail["error"]["parameter"], "nodata");
    assert!(
        text(&refused).contains("2 cell(s) of -9999"),
        "{}",
        text(&refused)
    );
    let stats = server
        .call(
            "raster_stats",
            json!({"input": "sentinel.tif", "nodata": -9999}),
        )
        .await
        .unwrap();
    let band = &structured(&stats)["bands"][0];
    // 13 cells of 10 and one of 30: mean 160/14.
    assert_eq!(band["valid_count"], 14);
    assert!((band["mean"].as_f64().unwrap() - 160.0 / 14.0).abs() < 1e-9);

    // The computing tools refuse it too, pointing at declaring it; once declared (with
    // raster_convert), the zone mean is right.
    std::fs::write(
        server.path("all.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},
            "features":[{"type":"Feature","properties":{"id":1},
            "geometry":{"type":"Polygon","coordinates":[[[0,0],[40,0],[40,40],[0,40],[0,0]]]}}]}"#,
    )
    .unwrap();
    let zonal = |input: &str| json!({"input": input, "zones": "all.geojson", "stats": ["mean"], "semantics": "cell_centre"});
    for (tool, args) in [
        ("zonal_stats", zonal("sentinel.tif")),
        (
            "raster_resample",
            json!({"input": "sentinel.tif", "output": "r.tif", "resampling": "bilinear", "resolution": [20, 20]}),
        ),
        (
            "raster_terrain",
            json!({"input": "sentinel.tif", "output": "t.tif", "operation": "slope"}),
        ),
    ] {
        let refused = call_justified(&server, tool, args).await.unwrap().result;
        assert_eq!(
            error_kind(&structured(&refused)),
            "data_conflict",
            "{tool}: {}",
            text(&refused)
        );
        assert!(
            text(&refused).contains("raster_convert"),
            "{tool}: {}",
            text(&refused)
        );
    }
    let declared = call_justified(
        &server,
        "raster_convert",
        json!({"input": "sentinel.tif", "output": "declared.tif", "nodata": -9999}),
    )
    .await
    .unwrap();
    assert!(!is_error(&declared.result), "{}", text(&declared.result));
    let done = call_justified(&server, "zonal_stats", zonal("declared.tif"))
        .await
        .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let mean = structured(&done.result)["features"][0]["mean"]
        .as_f64()
        .unwrap();
    assert!((mean - 160.0 / 14.0).abs() < 1e-6, "{mean}");
}

/// Bilinear on a land-cover map: critical, with evidence and the safe alternative. The hurried
/// agent's generic justification is refused naming the evidence item; a COG written with the
/// safe method has overviews made only of existing classes (the driver's default cubic made
/// 104 values of 14 classes).
#[tokio::test]
async fn bilinear_on_classes_needs_the_evidence_answered_and_cog_overviews_keep_classes() {
    let server = server().await;
    let (w, h) = (1024usize, 1024usize);
    let classes: Vec<u8> = (0..w * h)
        .map(|i| [1u8, 5, 9, 14][((i % w) / 7 + (i / w) / 5) % 4])
        .collect();
    write_raster::<u8>(
        &server.path("landcover.tif"),
        (w, h),
        classes,
        Some([0.0, 10.0, 0.0, 10240.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    let args = json!({"input": "landcover.tif", "output": "lc20.tif", "resampling": "bilinear",
                      "resolution": [20, 20]});
    let refused = server.call("raster_resample", args.clone()).await.unwrap();
    let refusal = structured(&refused);
    let entry = refusal["refusal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["domain"] == "resampling")
        .cloned()
        .unwrap();
    assert_eq!(entry["severity"], "critical");
    let item = entry["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "categorical_input")
        .cloned()
        .unwrap_or_else(|| panic!("no categorical_input evidence: {entry}"));
    assert!(item["alternative"]["resampling"].is_string(), "{item}");
    assert!(text(&refused).contains("Safe alternative"));

    // The hurried agent: well-formed, with assumptions, never engaging with the evidence.
    let mut hurried = args.clone();
    let mut generic = justification("bilinear");
    generic["assumptions"] = json!(["chosen on purpose"]);
    hurried["justification"] = json!({"resampling": generic});
    let refused = server.call("raster_resample", hurried).await.unwrap();
    let entry = structured(&refused)["refusal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["domain"] == "resampling")
        .cloned()
        .unwrap();
    let paths: Vec<&str> = entry["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert!(paths.contains(&"/evidence/categorical_input"), "{entry}");

    // An answer that names the item but does not engage with it is refused by the domain.
    let mut waved = args.clone();
    let mut answer = generic.clone();
    answer["evidence"] = json!({"categorical_input": "chosen on purpose"});
    waved["justification"] = json!({"resampling": answer});
    let refused = server.call("raster_resample", waved).await.unwrap();
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("/evidence/categorical_input"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("lc20.tif").exists());

    // The safe alternative to a COG: the overviews are built with it, not with cubic.
    let safe = call_justified(
        &server,
        "raster_resample",
        json!({"input": "landcover.tif", "output": "lc.tif", "resampling": "mode",
               "resolution": [10, 10], "format": "COG"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&safe.result), "{}", text(&safe.result));
    let dataset = gdal::Dataset::open(server.path("lc.tif")).unwrap();
    let band = dataset.rasterband(1).unwrap();
    assert!(band.overview_count().unwrap() > 0);
    let overview = band.overview(0).unwrap();
    let (ow, oh) = overview.size();
    let values = overview
        .read_as::<u8>((0, 0), (ow, oh), (ow, oh), None)
        .unwrap();
    let distinct: std::collections::BTreeSet<u8> = values.data().iter().copied().collect();
    assert!(
        distinct.iter().all(|v| [1, 5, 9, 14].contains(v)),
        "overview values {distinct:?}"
    );
    // An option that would decide the resampling inside the driver is refused.
    let hidden = server
        .call(
            "raster_resample",
            json!({"input": "landcover.tif", "output": "x.tif", "resampling": "mode",
                   "resolution": [20, 20], "format": "COG",
                   "creation_options": {"RESAMPLING": "BILINEAR"}}),
        )
        .await
        .unwrap();
    assert_eq!(error_kind(&structured(&hidden)), "invalid_arguments");
    assert!(text(&hidden).contains("RESAMPLING"));
}

/// Ballpark default, accurate pivot: from Monte Mario (Rome) to WGS 84, PROJ's default search
/// over Rome finds only a ballpark (about 70 m off); a 4 m operation exists through Monte
/// Mario. The host uses it by default and reports both: the output equals reprojecting in two
/// steps (Rome meridian -> Greenwich, then Monte Mario -> WGS 84 with EPSG:1660).
#[tokio::test]
async fn reprojection_uses_the_accurate_operation_through_a_pivot_crs() {
    let server = server().await;
    // 0.001 degree cells around (0.04 E of the Rome meridian, 41.9 N).
    write_raster::<f32>(
        &server.path("rome.tif"),
        (3, 3),
        (1..=9).map(|v| v as f32).collect(),
        Some([0.04, 0.001, 0.0, 41.903, 0.0, -0.001]),
        Some(4806),
        |_| {},
    );
    let done = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "rome.tif", "output": "wgs84.tif", "dst_crs": "EPSG:4326",
               "resampling": "nearest"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let out = structured(&done.result);
    let t = &out["transformation"];
    assert_eq!(t["default"]["ballpark"], true, "{t}");
    assert_eq!(t["used"]["ballpark"], false, "{t}");
    assert_eq!(t["used"]["accuracy_metres"], 4.0);
    assert_eq!(t["used"]["via"], "Monte Mario");
    let command = out["gdalwarp_command"].as_array().unwrap();
    assert!(command.iter().any(|a| a == "-ct"), "{command:?}");

    // The reference: two steps with the GDAL command line.
    let dir = server.workspace.path();
    let run = |args: &[&str]| {
        let status = std::process::Command::new("gdalwarp")
            .args(["-q", "-overwrite", "-r", "near"])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success());
    };
    run(&["-t_srs", "EPSG:4265", "rome.tif", "step1.tif"]);
    run(&["-t_srs", "EPSG:4326", "step1.tif", "step2.tif"]);
    run(&["-t_srs", "EPSG:4326", "rome.tif", "ballpark.tif"]);
    let (_, ours) = read_all(&server.path("wgs84.tif"));
    let (_, two_steps) = read_all(&server.path("step2.tif"));
    let (_, ballpark) = read_all(&server.path("ballpark.tif"));
    let metres = |a: f64, b: f64| (a - b).abs() * 111_000.0;
    assert!(
        metres(ours[3], two_steps[3]) < 0.5,
        "{ours:?} vs {two_steps:?}"
    );
    assert!(metres(ours[0], two_steps[0]) < 0.5);
    assert!(
        metres(ours[3], ballpark[3]) > 50.0,
        "{ours:?} vs {ballpark:?}"
    );
}

/// A multi-layer GeoPackage without `layer`: refused with the layer list and feature counts,
/// never the first layer silently.
#[tokio::test]
async fn a_multi_layer_container_without_a_layer_is_refused_with_the_layers() {
    let server = server().await;
    let dir = server.workspace.path();
    let square = |x: f64| {
        format!(
            r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{"id":1}},
               "geometry":{{"type":"Polygon","coordinates":[[[{x},0],[{},0],[{},10],[{x},10],[{x},0]]]}}}}]}}"#,
            x + 10.0,
            x + 10.0
        )
    };
    std::fs::write(dir.join("a.geojson"), square(0.0)).unwrap();
    std::fs::write(dir.join("b.geojson"), square(100.0)).unwrap();
    for (file, layer, extra) in [
        ("a.geojson", "roads", vec![]),
        ("b.geojson", "parcels", vec!["-update"]),
    ] {
        let status = std::process::Command::new("ogr2ogr")
            .args(extra)
            .args(["-a_srs", "EPSG:32633", "-nln", layer, "zones.gpkg", file])
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    write_raster::<f32>(
        &server.path("grid.tif"),
        (20, 2),
        vec![1.0; 40],
        Some([0.0, 10.0, 0.0, 20.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    let refused = server
        .call(
            "zonal_stats",
            json!({"input": "grid.tif", "zones": "zones.gpkg", "stats": ["mean"], "semantics": "cell_centre"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let detail = structured(&refused);
    assert_eq!(error_kind(&detail), "data_conflict", "{detail}");
    assert_eq!(detail["error"]["parameter"], "layer");
    let layers: Vec<&str> = detail["error"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["layer"].as_str())
        .collect();
    assert_eq!(layers, ["roads", "parcels"]);
    assert!(
        text(&refused).contains("\"parcels\" (1 features)"),
        "{}",
        text(&refused)
    );
    let reproject = server
        .call(
            "vector_reproject",
            json!({"input": "zones.gpkg", "output": "z.gpkg", "dst_crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert_eq!(error_kind(&structured(&reproject)), "data_conflict");
}

/// GeoJSON has no cheap extent: one is computed (it was `null`, which left the transformation
/// search without an area).
#[tokio::test]
async fn geojson_gets_a_computed_extent() {
    let server = server().await;
    std::fs::write(
        server.path("points.geojson"),
        r#"{"type":"FeatureCollection","features":[
            {"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[12.5,41.9]}},
            {"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[13.25,42.75]}}]}"#,
    )
    .unwrap();
    let info = server
        .call("vector_info", json!({"input": "points.geojson"}))
        .await
        .unwrap();
    assert_eq!(
        structured(&info)["layers"][0]["extent"],
        json!([12.5, 41.9, 13.25, 42.75])
    );
}

/// A projected CRS in US survey feet with elevations in metres: gdaldem would take 10 ft cells
/// for 10 m (slope atan(0.1) = 5.71 degrees instead of 18.16). Without a declared elevation
/// unit the call is refused naming the ratio; with one, the ratio is applied.
#[tokio::test]
async fn terrain_in_us_survey_feet_uses_the_unit_ratio_or_refuses() {
    let server = server().await;
    // 10 ftUS cells; elevation rises 1 m per cell eastwards.
    let plane: Vec<f32> = (0..25).map(|i| (i % 5) as f32).collect();
    let gt = Some([6_000_000.0, 10.0, 0.0, 2_000_000.0, 0.0, -10.0]);
    write_raster::<f32>(
        &server.path("ft.tif"),
        (5, 5),
        plane.clone(),
        gt,
        Some(2227),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("ft_m.tif"),
        (5, 5),
        plane,
        gt,
        Some(2227),
        |band| set_unit(band, "metre"),
    );
    let info = server
        .call("raster_info", json!({"input": "ft.tif"}))
        .await
        .unwrap();
    let crs = &structured(&info)["facts"]["crs"];
    assert!((crs["linear_unit_metres"].as_f64().unwrap() - 0.3048006096).abs() < 1e-9);
    let refused = call_justified(
        &server,
        "raster_terrain",
        json!({"input": "ft.tif", "output": "s.tif", "operation": "slope"}),
    )
    .await
    .unwrap()
    .result;
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("scale: 0.3048006096"),
        "{}",
        text(&refused)
    );
    let slope = call_justified(
        &server,
        "raster_terrain",
        json!({"input": "ft_m.tif", "output": "s.tif", "operation": "slope"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&slope), "{}", text(&slope));
    let (values, _) = read_all(&server.path("s.tif"));
    let want = (1.0f64 / (10.0 * 0.3048006096)).atan().to_degrees();
    assert!((values[12] - want).abs() < 1e-3, "{} vs {want}", values[12]);
}

/// A 20 x 20 DEM on 10-unit cells rising 1 height unit per cell eastwards, with `unit` (if
/// any) declared on its band: its slope is atan(1 / 10) = 5.7106° when the heights are in
/// the CRS's unit.
fn write_ramp(server: &Server, name: &str, epsg: u32, unit: Option<&str>) {
    let ramp: Vec<f32> = (0..400).map(|i| (i % 20) as f32).collect();
    let gt = if epsg == 32633 {
        [500_000.0, 10.0, 0.0, 6_000_000.0, 0.0, -10.0]
    } else {
        [1_000_000.0, 10.0, 0.0, 200_000.0, 0.0, -10.0]
    };
    write_raster::<f32>(
        &server.path(name),
        (20, 20),
        ramp,
        Some(gt),
        Some(epsg),
        |band| {
            if let Some(unit) = unit {
                set_unit(band, unit)
            }
        },
    );
}

/// The slope (degrees) at the centre of a written 20 x 20 output.
fn centre(server: &Server, name: &str) -> f64 {
    read_all(&server.path(name)).0[10 * 20 + 10]
}

fn warnings(result: &Value) -> Vec<String> {
    result["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Run `raster_terrain` with `arguments`, which must succeed without a justification; the
/// result's warnings, joined.
async fn terrain_ran(server: &Server, arguments: Value) -> String {
    let out = server.call("raster_terrain", arguments).await.unwrap();
    assert!(!is_error(&out), "{}", text(&out));
    warnings(&structured(&out)).join(" ")
}

/// Regression (attack round 13, R13-B1): every slope or hillshade of a DEM in a US survey
/// foot State Plane CRS (EPSG:2263) whose band declares its heights in US survey feet was
/// refused as `unit_mismatch` (required), while the right scale, 1, was known. Now a declared
/// unit settles the ratio: the CRS's own unit runs ungated with no `-s` (5.7106°, atan(0.1));
/// another known unit (the international foot in a ftUS CRS, 2 ppm off; feet in a metre
/// CRS, 1.7458°) is converted by the host, which says so in the result's warnings. Clean
/// twin: metre CRS with metre heights, silent.
#[tokio::test]
async fn r13_b1_declared_height_units_settle_the_terrain_ratio() {
    let server = server().await;
    let flat = (0.1f64).atan().to_degrees();
    for unit in ["US survey foot", "ftUS"] {
        write_ramp(&server, "ftus.tif", 2263, Some(unit));
        for operation in ["slope", "hillshade"] {
            let out = server
                .call(
                    "raster_terrain",
                    json!({"input": "ftus.tif", "output": format!("{operation}.tif"),
                           "operation": operation, "overwrite": true}),
                )
                .await
                .unwrap();
            assert!(!is_error(&out), "{unit} {operation}: {}", text(&out));
            let result = structured(&out);
            let command = result["commands"][0].to_string();
            assert!(!command.contains("\"-s\""), "{unit}: {command}");
            assert_eq!(warnings(&result), Vec::<String>::new(), "{unit}");
        }
        let slope = centre(&server, "slope.tif");
        assert!((slope - flat).abs() < 1e-4, "{unit}: {slope} vs {flat}");
    }
    // The international foot in a US survey foot CRS: converted (ratio 1.000002), said.
    write_ramp(&server, "ft_in_ftus.tif", 2263, Some("ft"));
    let said = terrain_ran(
        &server,
        json!({"input": "ft_in_ftus.tif", "output": "s_ft.tif", "operation": "slope"}),
    )
    .await;
    assert!(
        said.contains("heights in ft") && said.contains("scale 1.000002"),
        "{said}"
    );
    assert!((centre(&server, "s_ft.tif") - flat).abs() < 1e-4);
    // Feet in a metre CRS: atan(0.3048 / 10) = 1.7458°, and the conversion is said.
    write_ramp(&server, "ft_in_m.tif", 32633, Some("ft"));
    let said = terrain_ran(
        &server,
        json!({"input": "ft_in_m.tif", "output": "s_m.tif", "operation": "slope"}),
    )
    .await;
    assert!(
        said.contains("heights in ft") && said.contains("scale 3.28084"),
        "{said}"
    );
    let want = (0.3048f64 / 10.0).atan().to_degrees();
    let got = centre(&server, "s_m.tif");
    assert!((got - want).abs() < 1e-4, "{got} vs {want}");
    // Attack round 18, R18-B1: UDUNITS' "0.1 m" is a decimetre, not a metre (its letters
    // alone gave 0.5729° here, ten times too steep a ratio), and "m2" is no height unit.
    write_ramp(&server, "dm.tif", 32633, Some("0.1 m"));
    let said = terrain_ran(
        &server,
        json!({"input": "dm.tif", "output": "s_dm.tif", "operation": "slope"}),
    )
    .await;
    assert!(said.contains("heights in 0.1 m"), "{said}");
    let want = (0.1f64 / 10.0).atan().to_degrees();
    let got = centre(&server, "s_dm.tif");
    assert!((got - want).abs() < 1e-4, "{got} vs {want}");
    write_ramp(&server, "m2.tif", 32633, Some("m2"));
    let area = server
        .call(
            "raster_terrain",
            json!({"input": "m2.tif", "output": "s_m2.tif", "operation": "slope"}),
        )
        .await
        .unwrap();
    assert!(is_error(&area), "{}", text(&area));
    assert!(text(&area).contains("scale"), "{}", text(&area));
    assert!(!server.path("s_m2.tif").exists());
    // Clean twin: metres in a metre CRS, no -s and nothing said.
    write_ramp(&server, "m.tif", 32633, Some("metre"));
    let said = terrain_ran(
        &server,
        json!({"input": "m.tif", "output": "s_mm.tif", "operation": "slope"}),
    )
    .await;
    assert_eq!(said, "");
    assert!((centre(&server, "s_mm.tif") - flat).abs() < 1e-4);
}

/// Regression (attack round 13, R13-B4): on a metre-CRS DEM whose band declares feet, an
/// explicit `scale: 1` ran with no check (5.7106° where atan(0.3048 / 10) = 1.7458° is
/// right), and `z_factor: 0.3048` was folded on top of the host's own conversion (0.5323°),
/// both silently. Now a `scale` that contradicts the declared units is a `data_conflict`
/// before the gate naming both figures and `scale`; one that agrees (3.2808, or 1 for feet in
/// a US survey foot CRS, 2 ppm off) runs; a `z_factor` equal to a unit ratio is warned about
/// as a double conversion, and a plain exaggeration (2) is not.
#[tokio::test]
async fn r13_b4_a_terrain_scale_is_checked_against_the_declared_units() {
    let server = server().await;
    write_ramp(&server, "ft_in_m.tif", 32633, Some("ft"));
    let refused = server
        .call(
            "raster_terrain",
            json!({"input": "ft_in_m.tif", "output": "s1.tif", "operation": "slope", "scale": 1}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let detail = structured(&refused);
    assert_eq!(error_kind(&detail), "data_conflict", "{detail}");
    assert_eq!(detail["error"]["parameter"], "scale");
    let message = text(&refused);
    assert!(
        message.contains("scale: 1 ")
            && message.contains("3.28084")
            && message.contains("Drop `scale`"),
        "{message}"
    );
    let figures: Vec<f64> = detail["error"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["scale"].as_f64().unwrap())
        .collect();
    assert_eq!(figures.len(), 2);
    assert_eq!(figures[0], 1.0);
    assert!((figures[1] - 1.0 / 0.3048).abs() < 1e-9, "{figures:?}");
    assert!(!server.path("s1.tif").exists());
    // The declared ratio, rounded as an agent would: agreement, 1.7458°.
    let want = (0.3048f64 / 10.0).atan().to_degrees();
    terrain_ran(
        &server,
        json!({"input": "ft_in_m.tif", "output": "s2.tif", "operation": "slope", "scale": 3.2808}),
    )
    .await;
    assert!((centre(&server, "s2.tif") - want).abs() < 1e-3);
    // z_factor 0.3048 on top of the host's conversion: runs (an exaggeration is legitimate)
    // with a warning naming the double conversion.
    let said = terrain_ran(&server, json!({"input": "ft_in_m.tif", "output": "s3.tif", "operation": "slope", "z_factor": 0.3048})).await;
    assert!(
        said.contains("z_factor 0.3048") && said.contains("converted twice"),
        "{said}"
    );
    // A plain exaggeration is not warned about (only the conversion is said).
    let said = terrain_ran(&server, json!({"input": "ft_in_m.tif", "output": "s4.tif", "operation": "hillshade", "z_factor": 2})).await;
    assert!(!said.contains("z_factor"), "{said}");
    // Feet in a US survey foot CRS with scale 1: 2 ppm apart, agreement.
    write_ramp(&server, "ft_in_ftus.tif", 2263, Some("ft"));
    terrain_ran(
        &server,
        json!({"input": "ft_in_ftus.tif", "output": "s5.tif", "operation": "slope", "scale": 1}),
    )
    .await;
    let flat = (0.1f64).atan().to_degrees();
    assert!((centre(&server, "s5.tif") - flat).abs() < 1e-4);
}

/// Regression (attack round 13, R13-B7 a): a `resolution` in the wrong unit (30, metres
/// meant, for EPSG:4326 whose unit is the degree) or coarser than the raster (5000 m over a
/// 1 km raster) ended after the gate in GDAL's "Attempt to create 0x0 dataset is illegal".
/// Now it is `invalid_arguments` before the gate, naming the argument, the target's unit, the
/// extent in it and a value that works, from gdalwarp's own grid: GDAL 3.6 makes
/// (int)((extent + res / 2) / res) cells, so over 1000 m a resolution of 2000 gives one cell
/// (and runs) and 2001 none.
#[tokio::test]
async fn r13_b7a_a_resolution_that_makes_no_cells_is_an_argument_error() {
    let server = server().await;
    let ramp: Vec<f32> = (0..10_000).map(|i| (i % 100) as f32).collect();
    let gt = Some([500_000.0, 10.0, 0.0, 6_000_000.0, 0.0, -10.0]);
    write_raster::<f32>(
        &server.path("dem.tif"),
        (100, 100),
        ramp,
        gt,
        Some(32633),
        |_| {},
    );
    let degrees = server
        .call(
            "raster_reproject",
            json!({"input": "dem.tif", "output": "g.tif", "dst_crs": "EPSG:4326",
                   "resampling": "bilinear", "resolution": [30, 30]}),
        )
        .await
        .unwrap();
    assert!(is_error(&degrees));
    assert_eq!(error_kind(&structured(&degrees)), "invalid_arguments");
    let said = text(&degrees);
    for part in [
        "resolution: [30, 30]",
        "EPSG:4326",
        "the degree",
        "0 x 0 cells",
        "30 metre would be about 0.000",
        "`size`",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    let coarse = server
        .call(
            "raster_resample",
            json!({"input": "dem.tif", "output": "r.tif", "resampling": "average",
                   "resolution": [2001, 2001]}),
        )
        .await
        .unwrap();
    assert!(is_error(&coarse));
    assert_eq!(error_kind(&structured(&coarse)), "invalid_arguments");
    let said = text(&coarse);
    for part in [
        "resolution: [2001, 2001]",
        "the metre",
        "1000 x 1000 metre",
        "at most 2000 x 2000",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    // Twins: the largest resolution that keeps a cell runs, as one cell; degrees run.
    let one = call_justified(
        &server,
        "raster_resample",
        json!({"input": "dem.tif", "output": "one.tif", "resampling": "average",
               "resolution": [2000, 2000]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&one.result), "{}", text(&one.result));
    let dataset = gdal::Dataset::open(server.path("one.tif")).unwrap();
    assert_eq!(dataset.raster_size(), (1, 1));
    let fine = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "dem.tif", "output": "g.tif", "dst_crs": "EPSG:4326",
               "resampling": "bilinear", "resolution": [0.0003, 0.0003]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&fine.result), "{}", text(&fine.result));
}

/// Regression (attack round 13, R13-B7 c): aspect on a geographic DEM without `scale` was an
/// `invalid_arguments` error asking for `scale: 111412`, which the next answer
/// (`geographic_dem_aspect`) said aspect does not use. Aspect now goes straight to the gate's
/// question, and runs once answered.
#[tokio::test]
async fn r13_b7c_geographic_aspect_goes_straight_to_its_question() {
    let server = server().await;
    let ramp: Vec<f32> = (0..400).map(|i| (i % 20) as f32).collect();
    let gt = Some([15.0, 0.000_277_777_8, 0.0, 60.0, 0.0, -0.000_277_777_8]);
    write_raster::<f32>(
        &server.path("geo.tif"),
        (20, 20),
        ramp,
        gt,
        Some(4326),
        |band| set_unit(band, "metre"),
    );
    let first = server
        .call(
            "raster_terrain",
            json!({"input": "geo.tif", "output": "a.tif", "operation": "aspect"}),
        )
        .await
        .unwrap();
    assert!(is_error(&first));
    let said = text(&first);
    assert!(said.contains("geographic_dem_aspect"), "{said}");
    assert!(!said.contains("pass scale"), "{said}");
    let answered = call_justified(
        &server,
        "raster_terrain",
        json!({"input": "geo.tif", "output": "a.tif", "operation": "aspect"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&answered.result), "{}", text(&answered.result));
    // The ramp rises eastwards: it faces west (270°) whatever the cell sides.
    let aspect = centre(&server, "a.tif");
    assert!((aspect - 270.0).abs() < 1e-3, "{aspect}");
}

/// Regression (attack round 5, F2): gdaldem slope in GDAL 3.6 ignores `-z`, so a DEM stored as
/// Int16 with scale 0.01 came out at atan(100/30) = 73.30° where the surface rises 1 m per 30 m
/// cell (1.91°), and a slope's `z_factor` was ignored. The vertical factor is now folded into
/// `-s`: the scaled DEM's slope equals its Float32 twin's, and `z_factor: 2` doubles the
/// gradient.
#[tokio::test]
async fn a_slope_applies_the_bands_scale_and_the_z_factor() {
    let server = server().await;
    let gt = Some([500_000.0, 30.0, 0.0, 4_000_000.0, 0.0, -30.0]);
    // Rising 1 m per cell eastwards: raw 100 per cell at scale 0.01, and in metres.
    let raw: Vec<i16> = (0..49).map(|i| 1000 + 100 * (i % 7) as i16).collect();
    let metres: Vec<f32> = (0..49).map(|i| 10.0 + (i % 7) as f32).collect();
    write_raster::<i16>(
        &server.path("scaled.tif"),
        (7, 7),
        raw,
        gt,
        Some(32633),
        |band| {
            band.set_scale(0.01).unwrap();
            set_unit(band, "m");
        },
    );
    write_raster::<f32>(
        &server.path("metres.tif"),
        (7, 7),
        metres,
        gt,
        Some(32633),
        |band| set_unit(band, "m"),
    );
    let slope_of = |input: &'static str, output: &'static str, extra: Value| {
        let server = &server;
        async move {
            let mut args = json!({"input": input, "output": output, "operation": "slope"});
            for (k, v) in extra.as_object().unwrap() {
                args[k] = v.clone();
            }
            let done = call_justified(server, "raster_terrain", args)
                .await
                .unwrap()
                .result;
            assert!(!is_error(&done), "{}", text(&done));
            let (values, _) = read_all(&server.path(output));
            values[24]
        }
    };
    let want = (1.0f64 / 30.0).atan().to_degrees();
    let plain = slope_of("metres.tif", "plain.tif", json!({})).await;
    let scaled = slope_of("scaled.tif", "scaled_slope.tif", json!({})).await;
    assert!((plain - want).abs() < 1e-3, "{plain} vs {want}");
    assert!(
        (scaled - want).abs() < 1e-3,
        "{scaled} vs {want} (73.30 before)"
    );
    let doubled = slope_of("metres.tif", "doubled.tif", json!({"z_factor": 2})).await;
    let want_doubled = (2.0f64 / 30.0).atan().to_degrees();
    assert!(
        (doubled - want_doubled).abs() < 1e-3,
        "{doubled} vs {want_doubled}"
    );
}

/// Regression (attack round 5, F4): one +Inf and one -Inf cell made raster_stats answer
/// `min`, `max`, `mean`, `std` and the histogram's bounds as `null` (contradicting its output
/// schema, which hosts validating structured content reject) and put every cell in bin 0.
/// Infinities are now counted apart and left out of the figures; the twin without them gives
/// the same figures.
#[tokio::test]
async fn infinite_cells_are_counted_apart_and_left_out_of_the_statistics() {
    let server = server().await;
    let gt = Some([500_000.0, 30.0, 0.0, 4_000_000.0, 0.0, -30.0]);
    let clean: Vec<f32> = (0..400).map(|i| (i % 4) as f32).collect();
    let mut odd = clean.clone();
    odd[0] = f32::INFINITY;
    odd[21] = f32::NEG_INFINITY;
    odd[42] = f32::NAN;
    write_raster::<f32>(
        &server.path("inf.tif"),
        (20, 20),
        odd,
        gt,
        Some(32633),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("clean.tif"),
        (20, 20),
        clean,
        gt,
        Some(32633),
        |_| {},
    );
    let stats = |input: &'static str| {
        let server = &server;
        async move {
            let done = server
                .call("raster_stats", json!({"input": input, "histogram_bins": 4}))
                .await
                .unwrap();
            assert!(!is_error(&done), "{}", text(&done));
            structured(&done)["bands"][0].clone()
        }
    };
    let odd = stats("inf.tif").await;
    assert_eq!(odd["infinite_count"], json!(2), "{odd}");
    assert_eq!(odd["nodata_count"], json!(1), "{odd}");
    assert_eq!(odd["valid_count"], json!(397), "{odd}");
    for field in ["min", "max", "mean", "std"] {
        assert!(odd[field].is_number(), "{field}: {odd}");
    }
    assert_eq!(odd["min"], json!(0.0));
    assert_eq!(odd["max"], json!(3.0));
    assert!(odd["histogram"]["min"].is_number() && odd["histogram"]["max"].is_number());
    let counts: u64 = odd["histogram"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counts, 397);
    let twin = stats("clean.tif").await;
    assert_eq!(twin["infinite_count"], json!(0));
    assert_eq!(twin["valid_count"], json!(400));
    assert_eq!(
        (twin["min"].clone(), twin["max"].clone()),
        (json!(0.0), json!(3.0))
    );
}

/// Regression (attack round 5, F9): gdalwarp shifts a single band's values when the source and
/// target CRSs disagree on heights. A DEM of 100 m in EPSG:32633+5773 (UTM 33N + EGM96 height)
/// warped to EPSG:32633 came out at 145.92 m while the facts said "null offset, 0 m", and the
/// compound CRS raised a false "matches no authority code". Now the call is refused with both
/// candidates and the argument that chooses (`heights`), each choice gives its figure, the
/// same vertical datum on both sides asks nothing, and the compound CRS is identified.
#[tokio::test]
async fn a_reprojection_that_would_shift_heights_asks_which_and_names_the_compound_crs() {
    let server = server().await;
    let gt = Some([500_000.0, 30.0, 0.0, 5_000_300.0, 0.0, -30.0]);
    write_raster::<f32>(
        &server.path("dem.tif"),
        (10, 10),
        vec![100.0; 100],
        gt,
        None,
        |_| {},
    );
    update(&server.path("dem.tif"), |dataset| {
        let mut compound = SpatialRef::from_definition("EPSG:32633+5773").unwrap();
        compound
            .set_axis_mapping_strategy(gdal::spatial_ref::AxisMappingStrategy::TraditionalGisOrder);
        dataset.set_spatial_ref(&compound).unwrap();
    });
    let info = server
        .call("raster_info", json!({"input": "dem.tif"}))
        .await
        .unwrap();
    assert_eq!(
        structured(&info)["facts"]["crs"]["id"],
        json!("EPSG:32633+5773"),
        "{}",
        text(&info)
    );
    let args = |output: &str, heights: Option<&str>| {
        let mut a = json!({"input": "dem.tif", "output": output, "dst_crs": "EPSG:32633",
                           "resampling": "bilinear"});
        if let Some(h) = heights {
            a["heights"] = json!(h);
        }
        a
    };
    let refused = call_justified(&server, "raster_reproject", args("asked.tif", None))
        .await
        .unwrap()
        .result;
    assert!(is_error(&refused));
    assert_eq!(
        structured(&refused)["error"]["kind"],
        json!("data_conflict"),
        "{}",
        text(&refused)
    );
    assert!(text(&refused).contains("heights"), "{}", text(&refused));
    assert!(text(&refused).contains("+45.9"), "{}", text(&refused));
    assert!(
        !text(&refused).contains("matches no authority code"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("asked.tif").exists());
    let value = |output: &'static str, heights: Option<&'static str>, dst: &'static str| {
        let server = &server;
        async move {
            let mut a = args(output, heights);
            a["dst_crs"] = json!(dst);
            let done = call_justified(server, "raster_reproject", a)
                .await
                .unwrap()
                .result;
            assert!(!is_error(&done), "{output}: {}", text(&done));
            let (values, _) = read_all(&server.path(output));
            values[44]
        }
    };
    let kept = value("kept.tif", Some("keep"), "EPSG:32633").await;
    assert!((kept - 100.0).abs() < 1e-6, "{kept}");
    let converted = value("converted.tif", Some("convert"), "EPSG:32633").await;
    assert!((converted - 145.92).abs() < 0.05, "{converted}");
    // The twin: the same vertical datum on both sides is asked nothing and keeps the values.
    let same = value("same.tif", None, "EPSG:32633+5773").await;
    assert!((same - 100.0).abs() < 1e-6, "{same}");
}

/// Regression (attack round 6, R6-C): the heights question fired only on a shift measured
/// at height 0. A DEM of 100 US feet in EPSG:26915+6360 warped to EPSG:26915 came out at 30.48
/// unasked (a unit change), and one in NAVD88 metres (EPSG:26915+5703) kept 100 while its output
/// called them ellipsoidal heights (a ballpark vertical: no geoid grid installed). Both are
/// now asked, with the figure; `convert` over the ballpark is gated as one; the twins
/// (the same vertical CRS on both sides, a 2D DEM) are asked nothing.
#[tokio::test]
async fn r6c_a_vertical_unit_change_or_ballpark_asks_for_heights() {
    let server = server().await;
    let gt = Some([500_000.0, 30.0, 0.0, 4_500_000.0, 0.0, -30.0]);
    for (name, crs) in [
        ("feet.tif", Some("EPSG:26915+6360")),
        ("navd.tif", Some("EPSG:26915+5703")),
        ("flat.tif", None),
    ] {
        write_raster::<f32>(
            &server.path(name),
            (10, 10),
            vec![100.0; 100],
            gt,
            Some(26915),
            |_| {},
        );
        if let Some(crs) = crs {
            update(&server.path(name), |dataset| {
                let mut compound = SpatialRef::from_definition(crs).unwrap();
                compound.set_axis_mapping_strategy(
                    gdal::spatial_ref::AxisMappingStrategy::TraditionalGisOrder,
                );
                dataset.set_spatial_ref(&compound).unwrap();
            });
        }
    }
    let run = |input: &'static str,
               output: &'static str,
               dst: &'static str,
               heights: Option<&'static str>| {
        let server = &server;
        async move {
            let mut a = json!({"input": input, "output": output, "dst_crs": dst,
                               "resampling": "bilinear"});
            if let Some(h) = heights {
                a["heights"] = json!(h);
            }
            call_justified(server, "raster_reproject", a)
                .await
                .unwrap()
                .result
        }
    };
    let feet = run("feet.tif", "feet_out.tif", "EPSG:26915", None).await;
    assert!(is_error(&feet));
    assert_eq!(
        structured(&feet)["error"]["kind"],
        json!("data_conflict"),
        "{}",
        text(&feet)
    );
    assert!(
        text(&feet).contains("heights") && text(&feet).contains("30.48"),
        "{}",
        text(&feet)
    );
    assert!(!server.path("feet_out.tif").exists());
    let navd = run("navd.tif", "navd_out.tif", "EPSG:26915", None).await;
    assert!(is_error(&navd));
    assert!(text(&navd).contains("ballpark"), "{}", text(&navd));
    assert!(!server.path("navd_out.tif").exists());
    // Each choice gives its figure; convert over the ballpark reports it.
    let kept = run("feet.tif", "feet_kept.tif", "EPSG:26915", Some("keep")).await;
    assert!(!is_error(&kept), "{}", text(&kept));
    assert!((read_all(&server.path("feet_kept.tif")).0[44] - 100.0).abs() < 1e-6);
    // `convert` over the ballpark vertical is gated as one (crs_datum, critical): a plain
    // justification does not pass it.
    let converted = run("feet.tif", "feet_conv.tif", "EPSG:26915", Some("convert")).await;
    assert!(is_error(&converted), "{}", text(&converted));
    assert!(
        text(&converted).contains("ballpark vertical transformation"),
        "{}",
        text(&converted)
    );
    assert!(!server.path("feet_conv.tif").exists());
    // Twins: the same vertical CRS on both sides; a 2D DEM.
    let same = run("feet.tif", "feet_same.tif", "EPSG:26915+6360", None).await;
    assert!(!is_error(&same), "{}", text(&same));
    assert!((read_all(&server.path("feet_same.tif")).0[44] - 100.0).abs() < 1e-6);
    let flat = run("flat.tif", "flat_out.tif", "EPSG:32615", None).await;
    assert!(!is_error(&flat), "{}", text(&flat));
}

/// Regression (attack round 9, R9-3): a target that is a 3D geographic CRS in US feet,
/// spelled as a PROJ string (`+vunits=us-ft`), names no vertical datum, so no question was
/// asked while gdalwarp multiplied every cell by 3.28 (163.5 m became 536.4). The change is
/// measured through the transformation gdalwarp builds, whatever the spelling; the twin, a
/// 3D target in metres (EPSG:4979), is not asked.
#[tokio::test]
async fn r9_3_a_target_in_feet_spelled_as_a_proj_string_asks_for_heights() {
    let server = server().await;
    write_raster::<f32>(
        &server.path("dem_ll.tif"),
        (10, 10),
        vec![100.0; 100],
        Some([15.0, 0.001, 0.0, 45.0, 0.0, -0.001]),
        Some(4326),
        |_| {},
    );
    let feet = "+proj=longlat +datum=WGS84 +vunits=us-ft +no_defs +type=crs";
    let reproject = |output: &'static str, dst: &'static str| {
        let server = &server;
        async move {
            call_justified(
                server,
                "raster_reproject",
                json!({"input": "dem_ll.tif", "output": output, "dst_crs": dst,
                       "resampling": "bilinear"}),
            )
            .await
            .unwrap()
            .result
        }
    };
    let asked = reproject("dem_ft.tif", feet).await;
    assert!(is_error(&asked), "{}", text(&asked));
    assert_eq!(structured(&asked)["error"]["kind"], json!("data_conflict"));
    assert!(text(&asked).contains("328.08"), "{}", text(&asked));
    assert!(!server.path("dem_ft.tif").exists());
    let metres = reproject("dem_3d.tif", "EPSG:4979").await;
    assert!(!is_error(&metres), "{}", text(&metres));
    assert!((read_all(&server.path("dem_3d.tif")).0[44] - 100.0).abs() < 1e-3);
}

/// Drivers that reproject on write (MBTiles to EPSG:3857, KMLSUPEROVERLAY to EPSG:4326, with
/// their own resampling and RGBA expansion: 14 classes became 79 values) are not output
/// drivers: the CRS change and the resampling would happen behind the gate.
#[tokio::test]
async fn drivers_that_reproject_on_write_are_refused() {
    let server = server().await;
    write_raster::<u8>(
        &server.path("utm.tif"),
        (4, 4),
        vec![1; 16],
        Some([500_000.0, 10.0, 0.0, 4_000_040.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    for (format, output) in [("MBTiles", "t.mbtiles"), ("KMLSUPEROVERLAY", "t.kmz")] {
        let refused = server
            .call(
                "raster_convert",
                json!({"input": "utm.tif", "output": output, "format": format}),
            )
            .await
            .unwrap();
        assert!(is_error(&refused), "{format}");
        assert!(text(&refused).contains(format), "{}", text(&refused));
        assert!(!server.path(output).exists());
    }
}

/// A component built against an older contract still loads and gates through its adapter:
/// it is refused first with `evidence_id` (whose fact contains `fact_part`), its own
/// `validate` rejects an intent without "legacy", and accepts one with it.
async fn an_older_contract_gates(
    component: &str,
    domain: &str,
    evidence_id: &str,
    fact_part: &str,
) {
    let plugins = tempfile::tempdir().unwrap();
    let built = plugin_component(component);
    assert!(built.is_file(), "{} is not built", built.display());
    std::fs::copy(&built, plugins.path().join(format!("{component}.wasm"))).unwrap();
    let server = Server::start(
        Era::Legacy,
        Options {
            plugin_dirs: vec![plugins.path().to_path_buf()],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    std::fs::write(
        server.path("p.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"a":1},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#,
    )
    .unwrap();
    let args = json!({"input": "p.geojson", "output": "p.gpkg"});
    let refused = server.call("vector_convert", args.clone()).await.unwrap();
    let refusal = structured(&refused);
    let entry = refusal["refusal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["domain"] == domain)
        .cloned()
        .unwrap_or_else(|| panic!("{domain} did not gate: {refusal}"));
    assert_eq!(entry["severity"], "required");
    assert_eq!(entry["evidence"][0]["id"], evidence_id);
    let text_of_entry = entry.to_string();
    assert!(text_of_entry.contains(fact_part), "{entry}");
    let mut answers = serde_json::Map::new();
    for e in refusal["refusal"].as_array().unwrap() {
        let domain = e["domain"].as_str().unwrap().to_string();
        answers.insert(domain, justification("vector_convert"));
    }
    let mut retry = args.clone();
    retry["justification"] = Value::Object(answers.clone());
    let rejected = server.call("vector_convert", retry).await.unwrap();
    assert!(text(&rejected).contains("legacy"), "{}", text(&rejected));
    answers[domain]["intent"] = json!("convert for the legacy archive");
    let mut retry = args;
    retry["justification"] = Value::Object(answers);
    let done = server.call("vector_convert", retry).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let receipts = structured(&done)["reflection"].clone();
    assert!(
        receipts
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["domain"] == domain && r["decision"] == "proceed"),
        "{receipts}"
    );
}

/// WIT 0.2: the trigger gets one evidence item made from its reason.
#[tokio::test]
async fn a_domain_built_against_wit_0_2_still_loads_and_gates() {
    an_older_contract_gates(
        "legacy_v02",
        "legacy_pack",
        "finding",
        "gdal-mcp:risk@0.2.0",
    )
    .await;
}

/// WIT 0.3: the component receives the facts (all but the upstream steps; its reason names
/// the first dataset's driver) and answers with its own evidence.
#[tokio::test]
async fn a_domain_built_against_wit_0_3_still_loads_and_gates() {
    an_older_contract_gates("legacy_v03", "legacy_v03", "v03_finding", "GeoJSON").await;
}

/// WIT 0.4: the component receives every fact but the measurement facts (its fact reports the
/// input's lineage, which 0.4 added) and answers with its own evidence.
#[tokio::test]
async fn a_domain_built_against_wit_0_4_still_loads_and_gates() {
    an_older_contract_gates(
        "legacy_v04",
        "legacy_v04",
        "v04_finding",
        "GeoJSON driver; its lineage: 0 upstream step(s)",
    )
    .await;
}

/// WIT 0.5: the component receives every fact but the output and grid facts (0.6 added them;
/// its fact reports the input's driver and lineage) and answers with its own evidence.
#[tokio::test]
async fn a_domain_built_against_wit_0_5_still_loads_and_gates() {
    an_older_contract_gates(
        "legacy_v05",
        "legacy_v05",
        "v05_finding",
        "GeoJSON driver; its lineage: 0 upstream step(s)",
    )
    .await;
}

/// WIT 0.6: the component receives every fact, the output facts included (its fact names the
/// output driver the host resolved; 0.7 added only the trigger's confidence and the evidence's
/// relaxable mark), and answers with its own evidence, decided as before.
#[tokio::test]
async fn a_domain_built_against_wit_0_6_still_loads_and_gates() {
    an_older_contract_gates(
        "legacy_v06",
        "legacy_v06",
        "v06_finding",
        "its lineage: 0 upstream step(s); the output driver: GPKG",
    )
    .await;
}

/// Scale and offset in compositing and block aggregation: two scenes stored with different
/// scales composite in physical values; a block sum of a band with an offset (gdalwarp would
/// keep one offset for n cells) is refused, while a block mean (which commutes) runs.
#[tokio::test]
async fn composites_use_physical_values_and_block_sums_with_an_offset_are_refused() {
    let server = server().await;
    let gt = Some([0.0, 10.0, 0.0, 20.0, 0.0, -10.0]);
    // Physical 1, 2, 3, 4 stored as raw*0.5 and as raw*0.25 + 1.
    write_raster::<i16>(
        &server.path("a.tif"),
        (2, 2),
        vec![2, 4, 6, 8],
        gt,
        Some(32633),
        |b| {
            b.set_scale(0.5).unwrap();
        },
    );
    write_raster::<i16>(
        &server.path("b.tif"),
        (2, 2),
        vec![0, 4, 8, 12],
        gt,
        Some(32633),
        |b| {
            b.set_scale(0.25).unwrap();
            b.set_offset(1.0).unwrap();
        },
    );
    let done = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["a.tif", "b.tif"], "output": "mean.tif", "statistic": "mean"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let (values, _) = read_all(&server.path("mean.tif"));
    assert_eq!(values, vec![1.0, 2.0, 3.0, 4.0]);

    let sum = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "b.tif", "output": "sum.tif", "factor": [2], "statistic": "sum"}),
    )
    .await
    .unwrap();
    assert!(is_error(&sum.result));
    assert!(
        text(&sum.result).contains("offset 1"),
        "{}",
        text(&sum.result)
    );
    assert!(!server.path("sum.tif").exists());
    let mean = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "b.tif", "output": "avg.tif", "factor": [2], "statistic": "average",
               "output_type": "Float32"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&mean.result), "{}", text(&mean.result));
    let dataset = gdal::Dataset::open(server.path("avg.tif")).unwrap();
    let band = dataset.rasterband(1).unwrap();
    let raw = band
        .read_as::<f64>((0, 0), (1, 1), (1, 1), None)
        .unwrap()
        .data()[0];
    let physical = raw * band.scale().unwrap_or(1.0) + band.offset().unwrap_or(0.0);
    assert!((physical - 2.5).abs() < 1e-9, "raw {raw} -> {physical}");
}

/// Ballpark with nothing better: a datum PROJ knows no shift for. The call is critical, with
/// the ballpark as evidence; the hurried agent's well-formed justification that never engages
/// with it is refused naming the item, an answer without an accepted error in metres is refused
/// by crs_datum, and an answer that states it passes.
#[tokio::test]
async fn a_ballpark_decision_must_state_the_error_it_accepts() {
    let server = server().await;
    let custom = "GEOGCS[\"Island 1950\",DATUM[\"Island_datum_1950\",SPHEROID[\"International 1924\",6378388,297]],PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433]]";
    write_raster::<f32>(
        &server.path("island.tif"),
        (2, 2),
        vec![1.0, 2.0, 3.0, 4.0],
        Some([10.0, 0.01, 0.0, 50.0, 0.0, -0.01]),
        None,
        |_| {},
    );
    update(&server.path("island.tif"), |dataset| {
        dataset
            .set_spatial_ref(&SpatialRef::from_wkt(custom).unwrap())
            .unwrap()
    });
    let args = json!({"input": "island.tif", "output": "wgs.tif", "dst_crs": "EPSG:4326",
                      "resampling": "nearest"});
    let refused = server.call("raster_reproject", args.clone()).await.unwrap();
    let refusal = structured(&refused);
    let entry = refusal["refusal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["domain"] == "crs_datum")
        .cloned()
        .unwrap();
    assert_eq!(entry["severity"], "critical", "{entry}");
    let ids: Vec<String> = entry["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str().map(String::from))
        .collect();
    assert!(ids.contains(&"ballpark_operation".to_string()), "{ids:?}");

    let with = |crs_answer: Value| {
        let mut retry = args.clone();
        retry["justification"] = json!({
            "crs_datum": crs_answer,
            "resampling": justification("nearest"),
        });
        retry
    };
    let mut hurried = justification("EPSG:4326");
    hurried["assumptions"] = json!(["chosen on purpose"]);
    let result = server
        .call("raster_reproject", with(hurried.clone()))
        .await
        .unwrap();
    assert!(
        text(&result).contains("/evidence/ballpark_operation"),
        "{}",
        text(&result)
    );

    let answer = |text: &str| -> Value {
        ids.iter()
            .map(|id| (id.clone(), json!(text)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let mut vague = hurried.clone();
    vague["choice"]["tradeoffs"] = json!("some positional error");
    vague["evidence"] = answer("we know the datum is approximate");
    let result = server.call("raster_reproject", with(vague)).await.unwrap();
    assert!(is_error(&result));
    assert!(
        text(&result).contains("/evidence/ballpark_operation"),
        "{}",
        text(&result)
    );
    assert!(!server.path("wgs.tif").exists());

    // Each finding answered for itself (issue 18: one sentence repeated for every id is
    // boilerplate, refused however engaged it sounds).
    let mut engaged = hurried;
    engaged["evidence"] = ids
        .iter()
        .map(|id| {
            let text = if id == "ballpark_operation" {
                "no datum shift is known for Island 1950; we accept up to 150 m of positional \
                 error, far below the 1 km cells of the regional model"
                    .to_string()
            } else {
                gdal_mcp_tests::careful_answer(id)
            };
            (id.clone(), json!(text))
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    let done = server
        .call("raster_reproject", with(engaged))
        .await
        .unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let receipt = structured(&done)["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "crs_datum")
        .cloned()
        .unwrap();
    assert!(receipt["evidence"]
        .as_array()
        .unwrap()
        .contains(&json!("ballpark_operation")));
}

/// Vector facts in `vector_info`: Z, the geometry types met (a mixed layer) and invalid
/// geometries (a self-crossing "bow tie"), and the CRS's axis order.
#[tokio::test]
async fn vector_info_reports_mixed_invalid_and_3d_geometries() {
    let server = server().await;
    std::fs::write(
        server.path("mixed.geojson"),
        r#"{"type":"FeatureCollection","features":[
            {"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[10,10],[10,0],[0,10],[0,0]]]}},
            {"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}},
            {"type":"Feature","properties":{},"geometry":{"type":"LineString","coordinates":[[0,0,5],[1,1,6]]}}]}"#,
    )
    .unwrap();
    let info = server
        .call("vector_info", json!({"input": "mixed.geojson"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let out = structured(&info);
    let layer = &out["facts"]["vector"]["layers"][0];
    assert_eq!(
        layer["geometry_types"],
        json!(["Polygon", "Line String"]),
        "{layer}"
    );
    assert_eq!(layer["invalid_geometries"], 1, "{layer}");
    assert_eq!(layer["features_checked"], 3);
    assert_eq!(layer["has_z"], true);
    assert_eq!(
        out["facts"]["crs"]["axis_order"], "north,east",
        "{}",
        out["facts"]["crs"]
    );
}

/// One feature's geometry: its WKT name, points (a polygon's outer ring), area and length.
type Shape = (String, Vec<(f64, f64, f64)>, f64, f64);

/// Every feature's geometry of the first layer.
fn read_shapes(path: &Path) -> Vec<Shape> {
    use gdal::vector::LayerAccess;
    let dataset = gdal::Dataset::open(path).unwrap();
    let mut layer = dataset.layer(0).unwrap();
    layer
        .features()
        .map(|f| {
            let g = f.geometry().unwrap();
            let mut points = Vec::new();
            if g.geometry_count() > 0 {
                g.get_geometry(0).get_points(&mut points);
            } else {
                g.get_points(&mut points);
            }
            (g.geometry_name(), points, g.area(), g.length())
        })
        .collect()
}

/// Shapes from tables. A parcel table lists its vertices out of order with a sequence column,
/// unclosed and clockwise: with `order_by` the square comes out at exactly 10 000 m², closed
/// and counter-clockwise, and both repairs are said; without it, the row order makes the ring
/// cross itself and GEOS's reason is given with the way out (never a bow-tie's area). A group
/// too small, a duplicate sequence number and swapped lon/lat columns are refused by name.
/// The clean twin (ordered, closed, counter-clockwise) is written with no note.
#[tokio::test]
async fn shapes_from_a_vertex_table_are_ordered_closed_and_checked() {
    let server = server().await;
    let path = |n: &str| server.path(n).display().to_string();
    let call = |name: &'static str, extra: Value| {
        let mut arguments = json!({"input": path(name), "x": "e", "y": "n",
                                   "crs": "EPSG:32633", "geometry": "polygon",
                                   "group_by": "parcel"});
        for (k, v) in extra.as_object().unwrap() {
            arguments[k] = v.clone();
        }
        let server = &server;
        async move { server.call("points_from_table", arguments).await.unwrap() }
    };
    // P-1: a 100 m square listed 3, 1, 4, 2 clockwise and open; P-2: 50 x 20 m, closed, CCW.
    std::fs::write(
        server.path("parcels.csv"),
        "parcel,seq,e,n,owner,note\n\
         P-1,3,500100,6600100,Ann,c\n\
         P-1,1,500000,6600000,Ann,a\n\
         P-1,4,500100,6600000,Ann,d\n\
         P-1,2,500000,6600100,Ann,b\n\
         P-2,1,501000,6600000,Bo,e\n\
         P-2,2,501050,6600000,Bo,f\n\
         P-2,3,501050,6600020,Bo,g\n\
         P-2,4,501000,6600020,Bo,h\n\
         P-2,5,501000,6600000,Bo,i\n",
    )
    .unwrap();
    let result = call(
        "parcels.csv",
        json!({"output": path("parcels.gpkg"), "order_by": "seq"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    let out = structured(&result);
    assert_eq!(out["geometry"], json!("polygon"));
    assert_eq!(out["features"], json!(2));
    let notes = out["notes"].to_string();
    assert!(
        notes.contains("\\\"P-1\\\": the ring was not closed")
            && notes.contains("\\\"P-1\\\": the ring ran clockwise")
            && !notes.contains("P-2")
            && notes.contains("\\\"note\\\" vary within a group"),
        "{notes}"
    );
    let columns: Vec<&str> = out["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, vec!["parcel", "owner"]);
    let shapes = read_shapes(&server.path("parcels.gpkg"));
    assert_eq!(shapes[0].2, 10_000.0);
    assert_eq!(shapes[1].2, 1_000.0);
    let ring = &shapes[0].1;
    assert_eq!(ring.len(), 5);
    assert_eq!(ring[0], ring[4]);
    let signed: f64 = ring
        .windows(2)
        .map(|w| w[0].0 * w[1].1 - w[1].0 * w[0].1)
        .sum();
    assert!(signed > 0.0, "counter-clockwise: {ring:?}");
    assert_eq!(
        read_field_text(&server.path("parcels.gpkg"), "owner"),
        vec!["Ann", "Bo"]
    );

    // The trap: the same table without order_by is a bow-tie, refused with GEOS's reason.
    let result = call("parcels.csv", json!({"output": path("bowtie.gpkg")})).await;
    assert!(is_error(&result));
    let message = text(&result);
    assert!(
        message.contains("group \"P-1\"")
            && message.contains("Self-intersection")
            && message.contains("order_by"),
        "{message}"
    );
    assert!(!server.path("bowtie.gpkg").exists());

    // The clean twin: ordered, closed and counter-clockwise: the same area, no note.
    std::fs::write(
        server.path("clean.csv"),
        "parcel,seq,e,n\n\
         P-1,1,500000,6600000\nP-1,2,500100,6600000\nP-1,3,500100,6600100\n\
         P-1,4,500000,6600100\nP-1,5,500000,6600000\n",
    )
    .unwrap();
    let result = call(
        "clean.csv",
        json!({"output": path("clean.gpkg"), "order_by": "seq"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(structured(&result)["notes"], json!([]));
    assert_eq!(read_shapes(&server.path("clean.gpkg"))[0].2, 10_000.0);

    // A line keeps its direction; DESC reverses the sequence: the square walked clockwise.
    let result = call(
        "clean.csv",
        json!({"output": path("line.gpkg"), "geometry": "line", "order_by": "seq DESC"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    let line = &read_shapes(&server.path("line.gpkg"))[0];
    assert_eq!(line.0, "LINESTRING");
    assert_eq!(line.3, 400.0);
    assert_eq!(line.1[0], (500_000.0, 6_600_000.0, 0.0));
    assert_eq!(line.1[1], (500_000.0, 6_600_100.0, 0.0));

    // Too few vertices, a duplicate sequence number: refused by name.
    std::fs::write(
        server.path("bad.csv"),
        "parcel,seq,e,n\nA,1,0,0\nA,2,10,0\nA,3,10,10\nB,1,0,0\nB,2,5,5\n",
    )
    .unwrap();
    let result = call(
        "bad.csv",
        json!({"output": path("bad.gpkg"), "order_by": "seq"}),
    )
    .await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("group \"B\" has 2 distinct"),
        "{}",
        text(&result)
    );
    std::fs::write(
        server.path("dup.csv"),
        "parcel,seq,e,n\nA,1,0,0\nA,2,10,0\nA,2,10,10\n",
    )
    .unwrap();
    let result = call(
        "dup.csv",
        json!({"output": path("dup.gpkg"), "order_by": "seq"}),
    )
    .await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("rows 2 and 3 (group \"A\")"),
        "{}",
        text(&result)
    );

    // Swapped columns in a geographic CRS: latitude 35.7 as x and longitude 139.7 as y.
    std::fs::write(
        server.path("tokyo.csv"),
        "parcel,lat,lon\nT,35.70,139.70\nT,35.70,139.71\nT,35.71,139.71\n",
    )
    .unwrap();
    let geographic = |x: &str, y: &str, output: &str| {
        json!({"input": path("tokyo.csv"), "output": path(output), "x": x, "y": y,
               "crs": "EPSG:4326", "geometry": "polygon", "group_by": "parcel"})
    };
    let result = server
        .call(
            "points_from_table",
            geographic("lat", "lon", "swapped.gpkg"),
        )
        .await
        .unwrap();
    assert!(is_error(&result));
    assert!(
        text(&result).contains("the columns look swapped"),
        "{}",
        text(&result)
    );
    let result = server
        .call("points_from_table", geographic("lon", "lat", "tokyo.gpkg"))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(
        read_shapes(&server.path("tokyo.gpkg"))[0].1[0],
        (139.70, 35.70, 0.0)
    );
}

/// A field's values as text, in feature order.
fn read_field_text(path: &Path, field: &str) -> Vec<String> {
    use gdal::vector::LayerAccess;
    let dataset = gdal::Dataset::open(path).unwrap();
    let mut layer = dataset.layer(0).unwrap();
    layer
        .features()
        .map(|f| {
            let index = f.field_index(field).unwrap();
            f.field_as_string(index).unwrap().unwrap_or_default()
        })
        .collect()
}

/// Degrees, minutes, seconds. Text in the usual spellings and separate degree, minute, second
/// and hemisphere columns give decimal degrees exact to 1e-9 and say `coordinate_format`; a
/// minute of 61 names its row and text; a latitude's N in the x column says the columns look
/// swapped; a column mixing DMS and plain numbers is refused. The clean twin in decimals says
/// `decimal`.
#[tokio::test]
async fn degrees_minutes_seconds_are_read_part_by_part() {
    let server = server().await;
    let path = |n: &str| server.path(n).display().to_string();
    let points = |x: &str, y: &str, input: &str, output: &str, extra: Value| {
        let mut arguments = json!({"input": path(input), "output": path(output), "x": x,
                                   "y": y, "crs": "EPSG:4326"});
        for (k, v) in extra.as_object().unwrap() {
            arguments[k] = v.clone();
        }
        let server = &server;
        async move { server.call("points_from_table", arguments).await.unwrap() }
    };
    let barcelona = (
        2.0 + 10.0 / 60.0 + 26.5 / 3600.0,
        41.0 + 24.0 / 60.0 + 12.2 / 3600.0,
    );
    let sydney = (
        151.0 + 12.0 / 60.0 + 36.0 / 3600.0,
        -(33.0 + 51.0 / 60.0 + 54.0 / 3600.0),
    );
    let near = |got: (f64, f64, f64), want: (f64, f64)| {
        (got.0 - want.0).abs() < 1e-9 && (got.1 - want.1).abs() < 1e-9
    };
    std::fs::write(
        server.path("dms.csv"),
        "name,lat,lon\n\
         BCN,\"41°24'12.2\"\"N\",\"2°10'26.5\"\"E\"\n\
         SYD,33 51 54 S,151 12 36 E\n",
    )
    .unwrap();
    let result = points("lon", "lat", "dms.csv", "dms.gpkg", json!({})).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(structured(&result)["coordinate_format"], json!("dms"));
    let got = read_shapes(&server.path("dms.gpkg"));
    assert!(near(got[0].1[0], barcelona), "{:?}", got[0].1[0]);
    assert!(near(got[1].1[0], sydney), "{:?}", got[1].1[0]);

    // (A double quote inside a CSV cell is doubled and the cell quoted, as spreadsheets write it.)
    // Separate columns, with colons in the longitude text of the other axis.
    std::fs::write(
        server.path("parts.csv"),
        "name,lat_d,lat_m,lat_s,lat_h,lon\n\
         BCN,41,24,12.2,N,2:10:26.5\n\
         SYD,33,51,54,S,151:12:36\n",
    )
    .unwrap();
    let result = points(
        "lon",
        "lat_d",
        "parts.csv",
        "parts.gpkg",
        json!({"dms": {"y_minutes": "lat_m", "y_seconds": "lat_s", "y_hemisphere": "lat_h"}}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(
        structured(&result)["coordinate_format"],
        json!("x: dms, y: dms_columns")
    );
    let got = read_shapes(&server.path("parts.gpkg"));
    assert!(near(got[0].1[0], barcelona), "{:?}", got[0].1[0]);
    assert!(near(got[1].1[0], sydney), "{:?}", got[1].1[0]);
    let columns = structured(&result)["columns"].to_string();
    assert!(
        !columns.contains("lat_m") && columns.contains("name"),
        "{columns}"
    );

    // Minutes of 61: the row and the text are named, nothing is written.
    std::fs::write(
        server.path("bad_dms.csv"),
        "name,lat,lon\nBCN,\"41°24'12.2\"\"N\",2.17\nXXX,\"41°61'00\"\"N\",2.17\n",
    )
    .unwrap();
    let result = points("lon", "lat", "bad_dms.csv", "bad_dms.gpkg", json!({})).await;
    assert!(is_error(&result));
    let message = text(&result);
    assert!(
        message.contains("row 2")
            && message.contains("41°61'00\"N")
            && message.contains("minutes 61"),
        "{message}"
    );
    assert!(!server.path("bad_dms.gpkg").exists());
    // The same in separate columns.
    std::fs::write(
        server.path("bad_parts.csv"),
        "lat_d,lat_m,lon\n41,24,2.17\n41,61,2.17\n",
    )
    .unwrap();
    let result = points(
        "lon",
        "lat_d",
        "bad_parts.csv",
        "bad_parts.gpkg",
        json!({"dms": {"y_minutes": "lat_m"}}),
    )
    .await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("row 2") && text(&result).contains("minutes 61"),
        "{}",
        text(&result)
    );

    // Hemisphere letters of the other axis: the columns look swapped.
    let result = points("lat", "lon", "dms.csv", "swapped.gpkg", json!({})).await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("the columns look swapped"),
        "{}",
        text(&result)
    );

    // A column mixing DMS text and plain numbers is refused, naming both rows.
    std::fs::write(
        server.path("mixed.csv"),
        "name,lat,lon\nA,\"41°24'12.2\"\"N\",2.17\nB,41.24,2.17\n",
    )
    .unwrap();
    let result = points("lon", "lat", "mixed.csv", "mixed.gpkg", json!({})).await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("row 2") && text(&result).contains("(row 1:"),
        "{}",
        text(&result)
    );

    // The clean twin in decimals.
    std::fs::write(
        server.path("decimal.csv"),
        format!("name,lat,lon\nBCN,{},{}\n", barcelona.1, barcelona.0),
    )
    .unwrap();
    let result = points("lon", "lat", "decimal.csv", "decimal.gpkg", json!({})).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(structured(&result)["coordinate_format"], json!("decimal"));
    assert!(near(
        read_shapes(&server.path("decimal.gpkg"))[0].1[0],
        barcelona
    ));
}

/// Attack round 10, R10-6: `raster_resample` and `raster_reproject` computed on raw values and
/// kept the band's scale and offset, so a `sum` of four raw 100s under scale 0.1 and offset -5
/// answered 35 where 20 is right, an `rms` with an offset was not the physical rms, and a
/// negative scale swapped `min` and `max`; `raster_aggregate` already refused these. Each is
/// refused before gdalwarp runs, naming the band's scale and offset; methods that commute with
/// the scale (average, an interpolation, `max` under a positive scale) are not (the twins).
/// Since R15-B16, `med` under a negative scale is refused too, and the advice names no
/// method the scale also reverses.
#[tokio::test]
async fn r10_6_warps_refuse_statistics_the_band_scale_would_falsify() {
    let server = server().await;
    let scaled = |name: &str, scale: f64, offset: f64| {
        write_raster::<i16>(
            &server.path(name),
            (4, 4),
            vec![100; 16],
            Some([0.0, 30.0, 0.0, 120.0, 0.0, -30.0]),
            Some(32633),
            |band| {
                band.set_scale(scale).unwrap();
                band.set_offset(offset).unwrap();
            },
        );
    };
    scaled("offset.tif", 0.1, -5.0);
    scaled("negative.tif", -0.1, 0.0);
    let resample = |input: &str, method: &str| {
        json!({"input": input, "output": format!("{method}-{input}"), "resolution": [60, 60],
               "resampling": method})
    };
    for (tool, arguments) in [
        ("raster_resample", resample("offset.tif", "sum")),
        ("raster_resample", resample("offset.tif", "rms")),
        ("raster_resample", resample("negative.tif", "max")),
        // Attack round 15, R15-B16: gdalwarp's `med` is the lower middle of the raw values,
        // the physical upper middle under a negative scale.
        ("raster_resample", resample("negative.tif", "med")),
        (
            "raster_aggregate",
            json!({"input": "negative.tif", "output": "agg-med.tif", "factor": 2,
                   "statistic": "med"}),
        ),
        (
            "raster_reproject",
            json!({"input": "offset.tif", "output": "r.tif", "dst_crs": "EPSG:32634",
                   "resampling": "sum"}),
        ),
    ] {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool} {arguments}");
        let message = text(&result);
        assert!(
            message.contains(": band 1 declares scale") && message.contains("raw"),
            "{tool} {arguments}: {message}"
        );
        if arguments.to_string().contains("negative") {
            assert!(
                message.contains("reverses the order") && !message.contains("med or"),
                "{tool} {arguments}: {message}"
            );
        }
    }
    for arguments in [
        resample("offset.tif", "average"),
        resample("negative.tif", "average"),
        resample("offset.tif", "max"),
        resample("offset.tif", "med"),
    ] {
        let result = server
            .call("raster_resample", arguments.clone())
            .await
            .unwrap();
        assert!(
            !text(&result).contains("declares scale"),
            "{arguments}: {}",
            text(&result)
        );
    }
}

/// Attack round 11, R11-2: R10-6's check was not applied to the overview builders, so
/// `raster_overviews` and `raster_convert`'s `overviews` ran `rms` on raw values and kept the
/// band's offset (an overview cell read 109.0 where the physical rms is 144.3). Both are
/// refused before GDAL runs, naming the band's scale and offset; `average` overviews of the
/// same band, and `rms` overviews of a band without an offset, are built (the twins).
#[tokio::test]
async fn r11_2_overviews_refuse_statistics_the_band_scale_would_falsify() {
    let server = server().await;
    for (name, offset) in [("offset.tif", -1000.0), ("plain.tif", 0.0)] {
        write_raster::<u16>(
            &server.path(name),
            (8, 8),
            (0..64).map(|i| 1000 + i as u16).collect(),
            Some([0.0, 30.0, 0.0, 240.0, 0.0, -30.0]),
            Some(32633),
            |band| {
                band.set_scale(1.0).unwrap();
                band.set_offset(offset).unwrap();
            },
        );
    }
    let overviews = |input: &str, method: &str, output: &str| json!({"input": input, "output": output, "resampling": method, "levels": [2]});
    let convert = |input: &str, method: &str, output: &str| {
        json!({"input": input, "output": output, "format": "GTiff",
               "overviews": {"resampling": method, "levels": [2]}})
    };
    for (tool, arguments, argument) in [
        (
            "raster_overviews",
            overviews("offset.tif", "rms", "o1.tif"),
            "resampling",
        ),
        (
            "raster_convert",
            convert("offset.tif", "rms", "c1.tif"),
            "overviews.resampling",
        ),
    ] {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&result), "{tool} {arguments}");
        let message = text(&result);
        assert!(
            message.contains(&format!(
                "{argument}: band 1 declares scale 1 and offset -1000"
            )),
            "{tool}: {message}"
        );
        assert!(!server.path(arguments["output"].as_str().unwrap()).exists());
    }
    for (tool, arguments) in [
        (
            "raster_overviews",
            overviews("offset.tif", "average", "o2.tif"),
        ),
        ("raster_overviews", overviews("plain.tif", "rms", "o3.tif")),
        ("raster_convert", convert("plain.tif", "rms", "c2.tif")),
    ] {
        let result = server.call(tool, arguments.clone()).await.unwrap();
        assert!(
            !text(&result).contains("declares scale"),
            "{tool} {arguments}: {}",
            text(&result)
        );
    }
}

/// Attack round 11, R11-4: `raster_terrain` told feet from "not feet" only, so a band whose
/// unit is `cm` or `mm` was taken as metres (a 45° plane came out at 89.43° and 89.94°), and a
/// metre-CRS DEM in `ft` was refused with two suggested scales that both made slopes 3.28x
/// too steep. The declared unit's ratio is applied (right by default, shown in the command),
/// and a unit the tool does not know is refused naming it. R11-11: under a negative band scale
/// gdaldem's aspect is turned by 180° (90 for 270): refused; the positive twin gives 270.
#[tokio::test]
async fn r11_4_terrain_applies_the_declared_elevation_unit() {
    let server = server().await;
    let gt = Some([500_000.0, 30.0, 0.0, 4_000_000.0, 0.0, -30.0]);
    // Rising 30 m per 30 m cell eastwards: a 45° slope facing west (aspect 270).
    let plane = |per_metre: f64| -> Vec<f32> {
        (0..49)
            .map(|i| ((100.0 + 30.0 * (i % 7) as f64) * per_metre) as f32)
            .collect()
    };
    for (name, unit, per_metre) in [
        ("m.tif", "m", 1.0),
        ("cm.tif", "cm", 100.0),
        ("mm.tif", "millimetre", 1000.0),
        ("ft.tif", "ft", 1.0 / 0.3048),
        ("odd.tif", "furlong", 1.0),
    ] {
        write_raster::<f32>(
            &server.path(name),
            (7, 7),
            plane(per_metre),
            gt,
            Some(32633),
            |band| set_unit(band, unit),
        );
    }
    for input in ["m.tif", "cm.tif", "mm.tif", "ft.tif"] {
        let output = format!("slope-{input}");
        let done = call_justified(
            &server,
            "raster_terrain",
            json!({"input": input, "output": output, "operation": "slope"}),
        )
        .await
        .unwrap()
        .result;
        assert!(!is_error(&done), "{input}: {}", text(&done));
        let (values, _) = read_all(&server.path(&output));
        assert!((values[24] - 45.0).abs() < 1e-3, "{input}: {}", values[24]);
    }
    let odd = call_justified(
        &server,
        "raster_terrain",
        json!({"input": "odd.tif", "output": "slope-odd.tif", "operation": "slope"}),
    )
    .await
    .unwrap()
    .result;
    assert!(is_error(&odd));
    assert!(text(&odd).contains("\"furlong\""), "{}", text(&odd));
    assert!(!server.path("slope-odd.tif").exists());

    for (name, scale) in [("negative.tif", -1.0), ("positive.tif", 1.0)] {
        let raw: Vec<f32> = plane(1.0).iter().map(|v| v * scale as f32).collect();
        write_raster::<f32>(&server.path(name), (7, 7), raw, gt, Some(32633), |band| {
            band.set_scale(scale).unwrap();
            set_unit(band, "m");
        });
    }
    let aspect = |input: &'static str| {
        let server = &server;
        async move {
            call_justified(
                server,
                "raster_terrain",
                json!({"input": input, "output": format!("aspect-{input}"),
                       "operation": "aspect"}),
            )
            .await
            .unwrap()
            .result
        }
    };
    let refused = aspect("negative.tif").await;
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("negative scale"),
        "{}",
        text(&refused)
    );
    let done = aspect("positive.tif").await;
    assert!(!is_error(&done), "{}", text(&done));
    let (values, _) = read_all(&server.path("aspect-positive.tif"));
    assert!((values[24] - 270.0).abs() < 1e-3, "{}", values[24]);
}

/// Attack round 11, R11-10: `raster_convert scale` rescaled raw cells with gdal_translate and
/// kept the input's scale, offset and nodata, so a band declaring raw x 0.01 - 10 read
/// -9.99..-7.45 after a rescale to Byte, and valid cells rescaled onto the kept nodata 0
/// vanished. A nodata inside the rescaled range is refused, naming the fix; with the range
/// moved off it, the output declares the scale and offset that keep the physical values.
/// The twin: a band without scale, offset or nodata is rescaled as before, declaring none.
#[tokio::test]
async fn r11_10_a_rescale_keeps_physical_values_and_refuses_a_nodata_it_would_hit() {
    let server = server().await;
    let gt = Some([500_000.0, 30.0, 0.0, 4_000_000.0, 0.0, -30.0]);
    let raw: Vec<u16> = (0..100).map(|i| 1000 + 20 * i as u16).collect();
    write_raster::<u16>(
        &server.path("packed.tif"),
        (10, 10),
        raw.clone(),
        gt,
        Some(32633),
        |band| {
            band.set_scale(0.01).unwrap();
            band.set_offset(-10.0).unwrap();
            band.set_no_data_value(Some(0.0)).unwrap();
        },
    );
    write_raster::<u16>(
        &server.path("plain.tif"),
        (10, 10),
        raw.clone(),
        gt,
        Some(32633),
        |_| {},
    );
    let convert = |input: &'static str, output: &'static str, range: [f64; 4]| {
        let server = &server;
        async move {
            call_justified(
                server,
                "raster_convert",
                json!({"input": input, "output": output, "output_type": "Byte",
                       "scale": range}),
            )
            .await
            .unwrap()
            .result
        }
    };
    let refused = convert("packed.tif", "hit.tif", [1000.0, 2980.0, 0.0, 255.0]).await;
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("nodata 0") && text(&refused).contains("`nodata`"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("hit.tif").exists());
    let done = convert("packed.tif", "kept.tif", [1000.0, 2980.0, 1.0, 255.0]).await;
    assert!(!is_error(&done), "{}", text(&done));
    let dataset = gdal::Dataset::open(server.path("kept.tif")).unwrap();
    let band = dataset.rasterband(1).unwrap();
    let (scale, offset) = (band.scale().unwrap(), band.offset().unwrap());
    let cells = band.read_band_as::<u8>().unwrap();
    let k = 1980.0 / 254.0;
    for (i, cell) in cells.data().iter().enumerate() {
        let physical = f64::from(raw[i]) * 0.01 - 10.0;
        let written = f64::from(*cell) * scale + offset;
        assert!(
            (written - physical).abs() <= 0.01 * k / 2.0 + 1e-9,
            "cell {i}: {written} for {physical}"
        );
    }
    let plain = convert("plain.tif", "plain8.tif", [1000.0, 2980.0, 0.0, 255.0]).await;
    assert!(!is_error(&plain), "{}", text(&plain));
    let dataset = gdal::Dataset::open(server.path("plain8.tif")).unwrap();
    let band = dataset.rasterband(1).unwrap();
    assert_eq!(band.scale(), None);
    assert_eq!(band.no_data_value(), None);
}

/// Attack round 11, R11-7: over a global raster on 0..360° longitudes (GFS, ERA5, CMIP), a
/// point at -170.5 was "outside the raster" though the raster holds that meridian at 189.5.
/// The point is read at the same meridian in the raster's range, and says so; the twin at
/// 10.5 is read as given, without a note, and a point past the poles stays outside.
#[tokio::test]
async fn r11_7_a_sample_wraps_longitude_into_the_rasters_range() {
    let server = server().await;
    let cells: Vec<f32> = (0..360 * 180).map(|i| (i % 360) as f32 + 0.5).collect();
    write_raster::<f32>(
        &server.path("global360.tif"),
        (360, 180),
        cells,
        Some([0.0, 1.0, 0.0, 90.0, 0.0, -1.0]),
        Some(4326),
        |_| {},
    );
    let result = server
        .call(
            "raster_sample",
            json!({"input": "global360.tif", "coordinates": [[-170.5, 1.0], [10.5, 1.0], [10.5, 95.0]]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    let points = &structured(&result)["points"];
    assert_eq!(points[0]["inside"], json!(true), "{}", points[0]);
    assert_eq!(
        points[0]["values"][0]["value"].as_f64(),
        Some(189.5),
        "{}",
        points[0]
    );
    assert!(
        points[0]["note"]
            .as_str()
            .unwrap()
            .contains("read as 189.5"),
        "{}",
        points[0]
    );
    assert_eq!(
        points[1]["values"][0]["value"].as_f64(),
        Some(10.5),
        "{}",
        points[1]
    );
    assert!(points[1]["note"].is_null(), "{}", points[1]);
    assert_eq!(points[2]["inside"], json!(false), "{}", points[2]);
}

/// Attack round 10, R10-6 (second part): a `sum` warp wrote the input's integer type, so a
/// Byte band of 100..255 summed 2 x 2 by `raster_resample` wrote 255 everywhere (sums 400..1020)
/// with only `continuous_input` asked, and `raster_aggregate` asked `block_sum_saturates` for a
/// 0/1 mask whose sums fit. Now every warp that sums (`raster_resample`, `raster_reproject`,
/// `raster_aggregate`) writes the narrowest type that holds every sum of the input's values,
/// read exactly, and says so; an explicit `output_type` that cannot hold them is refused. The
/// twins: a Float32 sum and a Byte sum whose largest possible sum fits keep their type. Every
/// integer type is covered, its actual values deciding (Int16, UInt16, Int32).
#[tokio::test]
async fn r10_6_sums_are_written_in_a_type_that_holds_them() {
    let server = server().await;
    let gt = Some([500000.0, 30.0, 0.0, 5000000.0, 0.0, -30.0]);
    // Cells 100, 110, ..., 250 row by row: the 2 x 2 blocks sum to 500, 580, 820, 900 (each
    // block's cells are v, v+10, v+40, v+50 for v = 100, 120, 180, 200).
    let bytes: Vec<u8> = (0..16).map(|i| 100 + 10 * i as u8).collect();
    let block_sums = |cells: &[f64]| -> Vec<f64> {
        let at = |r: usize, c: usize| cells[r * 4 + c];
        let mut sums = Vec::new();
        for br in 0..2 {
            for bc in 0..2 {
                sums.push(
                    at(2 * br, 2 * bc)
                        + at(2 * br, 2 * bc + 1)
                        + at(2 * br + 1, 2 * bc)
                        + at(2 * br + 1, 2 * bc + 1),
                );
            }
        }
        sums
    };
    let expected = block_sums(&bytes.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    assert_eq!(expected, vec![500.0, 580.0, 820.0, 900.0]);
    write_raster::<u8>(
        &server.path("b.tif"),
        (4, 4),
        bytes,
        gt,
        Some(32633),
        |_| {},
    );
    let written = |name: &str| -> (String, Vec<f64>) {
        let dataset = gdal::Dataset::open(server.path(name)).unwrap();
        let band = dataset.rasterband(1).unwrap();
        let (w, h) = dataset.raster_size();
        let values = band
            .read_as::<f64>((0, 0), (w, h), (w, h), None)
            .unwrap()
            .data()
            .to_vec();
        (band.band_type().name(), values)
    };
    for (tool, arguments) in [
        (
            "raster_resample",
            json!({"input": "b.tif", "output": "rs.tif", "resolution": [60, 60],
                   "resampling": "sum"}),
        ),
        (
            "raster_reproject",
            json!({"input": "b.tif", "output": "rp.tif", "dst_crs": "EPSG:32633",
                   "resolution": [60, 60], "resampling": "sum"}),
        ),
        (
            "raster_aggregate",
            json!({"input": "b.tif", "output": "ag.tif", "factor": [2], "statistic": "sum"}),
        ),
    ] {
        let done = call_justified(&server, tool, arguments.clone())
            .await
            .unwrap();
        assert!(!is_error(&done.result), "{tool}: {}", text(&done.result));
        let output = arguments["output"].as_str().unwrap();
        let (data_type, values) = written(output);
        assert_eq!(data_type, "UInt16", "{tool}");
        assert_eq!(values, expected, "{tool}: the sums, not 255");
        let said = text(&done.result);
        assert!(
            said.contains("output type UInt16") && said.contains("cannot hold every sum"),
            "{tool}: {said}"
        );
        let command = warp_command(&done.result);
        assert!(command.contains("\"-ot\",\"UInt16\""), "{tool}: {command}");
    }
    // The caller's own narrow type is refused, naming one that holds the sums.
    let result = server
        .call(
            "raster_aggregate",
            json!({"input": "b.tif", "output": "ag_byte.tif", "factor": [2],
                   "statistic": "sum", "output_type": "Byte"}),
        )
        .await
        .unwrap();
    assert!(is_error(&result));
    assert!(
        text(&result).contains("output_type: Byte cannot hold the sums")
            && text(&result).contains("use output_type UInt16"),
        "{}",
        text(&result)
    );
    assert!(!server.path("ag_byte.tif").exists());

    // Clean twins: a 0/1 mask (sums up to 4) stays Byte and asks nothing about saturation; a
    // Float32 sum stays Float32.
    let mask: Vec<u8> = (0..16).map(|i| (i % 3 == 0) as u8).collect();
    let mask_sums = block_sums(&mask.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    write_raster::<u8>(
        &server.path("mask.tif"),
        (4, 4),
        mask,
        gt,
        Some(32633),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("f.tif"),
        (4, 4),
        (0..16).map(|i| 100.0 + 10.0 * i as f32).collect(),
        gt,
        Some(32633),
        |_| {},
    );
    for (input, tool, arguments, kept, sums) in [
        (
            "mask.tif",
            "raster_aggregate",
            json!({"input": "mask.tif", "output": "mask_ag.tif", "factor": [2],
                   "statistic": "sum"}),
            "Byte",
            mask_sums.clone(),
        ),
        (
            "mask.tif",
            "raster_aggregate",
            json!({"input": "mask.tif", "output": "mask_ag_byte.tif", "factor": [2],
                   "statistic": "sum", "output_type": "Byte"}),
            "Byte",
            mask_sums.clone(),
        ),
        (
            "mask.tif",
            "raster_resample",
            json!({"input": "mask.tif", "output": "mask_rs.tif", "resolution": [60, 60],
                   "resampling": "sum"}),
            "Byte",
            mask_sums.clone(),
        ),
        (
            "f.tif",
            "raster_resample",
            json!({"input": "f.tif", "output": "f_rs.tif", "resolution": [60, 60],
                   "resampling": "sum"}),
            "Float32",
            expected.clone(),
        ),
    ] {
        let done = call_justified(&server, tool, arguments.clone())
            .await
            .unwrap();
        assert!(
            !is_error(&done.result),
            "{input} {tool}: {}",
            text(&done.result)
        );
        let ids = done.refusal.to_string();
        assert!(
            !ids.contains("block_sum_saturates"),
            "{input} {tool}: {ids}"
        );
        let (data_type, values) = written(arguments["output"].as_str().unwrap());
        assert_eq!(data_type, kept, "{input} {tool}");
        assert_eq!(values, sums, "{input} {tool}");
        assert!(
            !text(&done.result).contains("cannot hold every sum"),
            "{input} {tool}"
        );
    }

    // Every integer type, its actual values deciding: Int16 cells of 30000 sum to 120000
    // (Int32), UInt16 cells of 60000 to 240000 (UInt32), Int32 cells of 2e9 to 8e9 (Float64);
    // Int16 cells of 100 sum to 400 and stay Int16.
    write_raster::<i16>(
        &server.path("i16.tif"),
        (4, 4),
        vec![30000; 16],
        gt,
        Some(32633),
        |_| {},
    );
    write_raster::<i16>(
        &server.path("i16s.tif"),
        (4, 4),
        vec![100; 16],
        gt,
        Some(32633),
        |_| {},
    );
    write_raster::<u16>(
        &server.path("u16.tif"),
        (4, 4),
        vec![60000; 16],
        gt,
        Some(32633),
        |_| {},
    );
    write_raster::<i32>(
        &server.path("i32.tif"),
        (4, 4),
        vec![2_000_000_000; 16],
        gt,
        Some(32633),
        |_| {},
    );
    for (input, data_type, sum) in [
        ("i16.tif", "Int32", 120000.0),
        ("u16.tif", "UInt32", 240000.0),
        ("i32.tif", "Float64", 8.0e9),
        ("i16s.tif", "Int16", 400.0),
    ] {
        let output = format!("sum_{input}");
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": input, "output": output, "factor": [2], "statistic": "sum"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{input}: {}", text(&done.result));
        let (written_type, values) = written(&output);
        assert_eq!(written_type, data_type, "{input}");
        assert_eq!(values, vec![sum; 4], "{input}");
    }
}

/// Attack round 11, R11-13: GDAL reads an alpha band as the dataset's mask only when it is
/// Byte or UInt16, so widening an alpha-masked raster (`raster_convert output_type: Float32`,
/// `raster_aggregate` into Float64) wrote the alpha in the wide type and every transparent cell
/// read as a valid 0, with nothing asked. Any program whose output carries an alpha band in
/// another type is refused before the commit, naming the band and the fix; UInt16 keeps the
/// mask (the twin).
#[tokio::test]
async fn r11_13_a_widened_alpha_band_is_refused() {
    let server = server().await;
    let path = server.path("rgba.tif");
    {
        let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
        let mut dataset = driver
            .create_with_band_type::<u8, _>(&path, 8, 8, 2)
            .unwrap();
        dataset
            .set_geo_transform(&[500_000.0, 30.0, 0.0, 4_000_000.0, 0.0, -30.0])
            .unwrap();
        dataset
            .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
            .unwrap();
        let values: Vec<u8> = vec![7; 64];
        let alpha: Vec<u8> = (0..64)
            .map(|i| if i % 8 < 3 && i / 8 < 3 { 0 } else { 255 })
            .collect();
        for (b, data) in [(1, values), (2, alpha)] {
            let mut band = dataset.rasterband(b).unwrap();
            let mut buffer = gdal::raster::Buffer::new((8, 8), data);
            band.write((0, 0), (8, 8), &mut buffer).unwrap();
        }
        dataset
            .rasterband(2)
            .unwrap()
            .set_color_interpretation(gdal::raster::ColorInterpretation::AlphaBand)
            .unwrap();
    }
    let convert = |output: &'static str, output_type: &'static str| {
        let server = &server;
        async move {
            call_justified(
                server,
                "raster_convert",
                json!({"input": "rgba.tif", "output": output, "output_type": output_type}),
            )
            .await
            .unwrap()
            .result
        }
    };
    let refused = convert("wide.tif", "Float32").await;
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("alpha band") && text(&refused).contains("Float32"),
        "{}",
        text(&refused)
    );
    assert!(!server.path("wide.tif").exists());
    let kept = convert("u16.tif", "UInt16").await;
    assert!(!is_error(&kept), "{}", text(&kept));
    let dataset = gdal::Dataset::open(server.path("u16.tif")).unwrap();
    let band = dataset.rasterband(1).unwrap();
    let mask = band.open_mask_band().unwrap().read_band_as::<u8>().unwrap();
    assert_eq!(mask.data()[0], 0, "the transparent corner stays masked");
    assert_ne!(mask.data()[63], 0, "an opaque cell stays valid");
}

/// Attack round 12, R12-1: `raster_reproject` sized a `sum`'s output type from the ratio of
/// the cells' areas at gdalwarp's suggested grid, times 1.1. A conformal target far from the
/// equator changes scale across the raster: Byte 200s in EPSG:4326 over 10 x 80 one-degree
/// cells from 0 to 80° N, reprojected to EPSG:3857 at the default grid, were written Byte with
/// 282 cells clipped at 255 where gdalwarp's own Float64 sum reaches 602.3 (3.01 source cells
/// in one output cell at the top). Now the count is taken where it is largest, so the output
/// is in a type that holds 602 and agrees with gdalwarp's Float64 `-r sum` cell by cell within
/// rounding. The clean twin, the same 200s over 0..2° N (nearly constant scale), stays Byte
/// with a maximum of 200.
#[tokio::test]
async fn r12_1_a_reprojected_sum_is_widened_where_the_scale_is_largest() {
    let server = server().await;
    for (name, rows, top) in [("lat80.tif", 80, 80.0), ("eq.tif", 2, 2.0)] {
        write_raster::<u8>(
            &server.path(name),
            (10, rows),
            vec![200; 10 * rows],
            Some([0.0, 1.0, 0.0, top, 0.0, -1.0]),
            Some(4326),
            |_| {},
        );
    }
    // Web Mercator stretches areas 33 times at 80° N: the preview accepts it, and names a
    // UTM zone it considered instead.
    let adjust = |domain: &str, answer: &mut Value| {
        if domain != "crs_datum" {
            return;
        }
        if answer["evidence"].get("target_distortion").is_some() {
            answer["evidence"]["target_distortion"] = json!(
                "we accept up to 5000 % of scale error in the target CRS: the preview is \
                 viewed, never measured (target_distortion)"
            );
            // One limit throughout: the stock tradeoffs' 500 % would set a lower one (R17-C6).
            answer["choice"]["tradeoffs"] =
                json!("sub-pixel smoothing; a preview viewed at 80° N, never measured");
        }
        if let Some(alternatives) = answer["alternatives"].as_array_mut() {
            alternatives.push(json!({"method": "EPSG:32631",
                "why_not": "a UTM zone does not match the web basemap tiles"}));
        }
    };
    let reference = |input: &str, output: &str| -> Vec<f64> {
        let status = std::process::Command::new("gdalwarp")
            .args(["-q", "-t_srs", "EPSG:3857", "-r", "sum", "-ot", "Float64"])
            .arg(server.path(input))
            .arg(server.path(output))
            .status()
            .unwrap();
        assert!(status.success());
        read_all(&server.path(output)).0
    };
    for (input, output, expected_type, expected_max) in [
        ("lat80.tif", "lat80_sum.tif", "UInt16", 602.3),
        ("eq.tif", "eq_sum.tif", "Byte", 200.0),
    ] {
        let done = gdal_mcp_tests::call_justified_with(
            &server,
            "raster_reproject",
            json!({"input": input, "output": output, "dst_crs": "EPSG:3857",
                   "resampling": "sum"}),
            &adjust,
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{input}: {}", text(&done.result));
        let dataset = gdal::Dataset::open(server.path(output)).unwrap();
        let data_type = dataset.rasterband(1).unwrap().band_type().name();
        assert_eq!(data_type, expected_type, "{input}: {}", text(&done.result));
        let (values, _) = read_all(&server.path(output));
        let truth = reference(input, &format!("ref_{output}"));
        assert_eq!(values.len(), truth.len(), "{input}: the same grid");
        let largest = truth.iter().cloned().fold(f64::MIN, f64::max);
        assert!(
            (largest - expected_max).abs() < 0.5,
            "{input}: gdalwarp's own sum reaches {largest}"
        );
        for (i, (v, t)) in values.iter().zip(&truth).enumerate() {
            assert!(
                (v - t).abs() <= 0.5 + 1e-6,
                "{input}: cell {i} is {v}, gdalwarp {t}"
            );
        }
        let said = text(&done.result);
        assert_eq!(
            said.contains("cannot hold every sum"),
            expected_type != "Byte",
            "{input}: {said}"
        );
    }
}

/// Overviews read by resampling warps: `raster_resample` and `raster_reproject` let gdalwarp
/// read the overview closest to the target resolution when reducing (only `raster_aggregate`
/// passed `-ovr NONE`), and an overview was computed by some other method, or is stale, or was
/// planted beside the file: a `sum` over an averaged overview is short by the cell ratio. The
/// fixture: an 8 x 8 Float32 raster of 0..63 whose external `.ovr` at factor 2 holds 999
/// everywhere. Both tools, summing 2 x 2 onto 60 m cells, must give the blocks' sums of the
/// full-resolution cells (and `max` their largest), never 999 (or the average), and say
/// `-ovr NONE` in the command they return.
#[tokio::test]
async fn resampling_warps_read_full_resolution_not_a_planted_overview() {
    let server = server().await;
    let cells: Vec<f32> = (0..64).map(|i| i as f32).collect();
    write_utm::<f32>(&server, "o.tif", (8, 8), cells.clone());
    {
        let mut dataset = gdal::Dataset::open(server.path("o.tif")).unwrap();
        dataset.build_overviews("AVERAGE", &[2], &[]).unwrap();
    }
    {
        let ovr = gdal::Dataset::open_ex(
            server.path("o.tif.ovr"),
            gdal::DatasetOptions {
                open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
                ..Default::default()
            },
        )
        .unwrap();
        let mut band = ovr.rasterband(1).unwrap();
        band.write((0, 0), (4, 4), &mut Buffer::new((4, 4), vec![999f32; 16]))
            .unwrap();
    }
    let planted = gdal::Dataset::open(server.path("o.tif")).unwrap();
    let overview = planted.rasterband(1).unwrap().overview(0).unwrap();
    let read = overview
        .read_as::<f32>((0, 0), (4, 4), (4, 4), None)
        .unwrap();
    assert!(
        read.data().iter().all(|&v| v == 999.0),
        "the overview is planted"
    );
    drop(planted);
    let values: Vec<f64> = cells.iter().map(|&v| f64::from(v)).collect();
    let sums = two_by_two(&values, |v| v.iter().sum());
    let maxima = two_by_two(&values, |v| v.iter().cloned().fold(f64::MIN, f64::max));
    for (tool, method, expected) in [
        ("raster_resample", "sum", &sums),
        ("raster_resample", "max", &maxima),
        ("raster_reproject", "sum", &sums),
        ("raster_reproject", "max", &maxima),
    ] {
        let output = format!("{tool}_{method}.tif");
        let mut arguments = json!({"input": "o.tif", "output": output, "resolution": [60, 60],
                                   "resampling": method});
        if tool == "raster_reproject" {
            arguments["dst_crs"] = json!("EPSG:32633");
        }
        let done = call_justified(&server, tool, arguments).await.unwrap();
        assert!(
            !is_error(&done.result),
            "{tool} {method}: {}",
            text(&done.result)
        );
        let (values, _) = read_all(&server.path(&output));
        assert_eq!(
            &values, expected,
            "{tool} {method}: the full-resolution cells"
        );
        let command = warp_command(&done.result);
        assert!(
            command.contains("\"-ovr\",\"NONE\""),
            "{tool} {method}: {command}"
        );
    }
}

/// A `sum` widened to hold its values ignored the output driver: a Byte sum widened to UInt16
/// and written as JPEG failed inside GDAL, after the work. Now the widened type is one the
/// driver stores, and when it stores none (JPEG holds Byte only) the call is refused before any
/// work, naming the type the sums need and the formats that store it. The clean twin: the same
/// sums as PNG (which stores UInt16) are written UInt16, every block's sum exact.
#[tokio::test]
async fn a_widened_sum_is_refused_where_the_format_cannot_store_it() {
    let server = server().await;
    let cells: Vec<u8> = (0..64).map(|i| 100 + 2 * i as u8).collect();
    write_utm::<u8>(&server, "b.tif", (8, 8), cells.clone());
    let values: Vec<f64> = cells.iter().map(|&v| f64::from(v)).collect();
    let sums = two_by_two(&values, |v| v.iter().sum());
    for (tool, arguments) in [
        (
            "raster_aggregate",
            json!({"input": "b.tif", "output": "a.jpg", "format": "JPEG", "factor": [2],
                   "statistic": "sum"}),
        ),
        (
            "raster_resample",
            json!({"input": "b.tif", "output": "r.jpg", "format": "jpeg",
                   "resolution": [60, 60], "resampling": "sum"}),
        ),
    ] {
        let refused = server.call(tool, arguments.clone()).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        let said = text(&refused);
        assert!(
            said.contains("JPEG cannot store these sums")
                && said.contains("which needs UInt16")
                && said.contains("GTiff")
                && said.contains("PNG"),
            "{tool}: {said}"
        );
        let output = arguments["output"].as_str().unwrap();
        assert!(!server.path(output).exists(), "{tool}: nothing written");
    }
    // Clean twin: PNG stores UInt16.
    let done = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "b.tif", "output": "a.png", "format": "PNG", "factor": [2],
               "statistic": "sum"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let dataset = gdal::Dataset::open(server.path("a.png")).unwrap();
    assert_eq!(dataset.rasterband(1).unwrap().band_type().name(), "UInt16");
    assert_eq!(read_all(&server.path("a.png")).0, sums);
}

/// Attack round 12's notes: a conversion that failed after GDAL wrote its staged output named
/// the staging path: "opening /proc/self/fd/23/.gdal-mcp-ZUxJ7e/Float64_XYZ.xyz failed" for a
/// 2 x 2 Float64 raster holding 1e300 written as XYZ (which cannot read it back). Every error
/// a job returns now names the output path the caller gave (the staging folders of the job are
/// mapped back in one place), and never a descriptor path or a staging folder.
#[tokio::test]
async fn a_conversion_error_names_the_output_not_its_staging_path() {
    let server = server().await;
    write_utm::<f64>(
        &server,
        "f64.tif",
        (2, 2),
        vec![123456789.123, 1e-300, -5.5, 1e300],
    );
    let failed = call_justified(
        &server,
        "raster_convert",
        json!({"input": "f64.tif", "output": "Float64_XYZ.xyz", "format": "XYZ"}),
    )
    .await
    .unwrap()
    .result;
    assert!(
        is_error(&failed),
        "XYZ cannot read 1e300 back: {}",
        text(&failed)
    );
    let said = text(&failed);
    let output = server.path("Float64_XYZ.xyz");
    assert!(
        said.contains(&output.display().to_string()),
        "the caller's output path: {said}"
    );
    assert!(
        !said.contains("/proc/self/fd") && !said.contains(".gdal-mcp-"),
        "no staging path: {said}"
    );
    assert!(!output.exists(), "nothing is written");
}

/// Regression (attack round 13, R13-B3): `raster_reproject` of a raster that declares no
/// nodata wrote 0 into every cell no source cell reaches (the wedges of the rotation to the
/// new grid) and declared nothing, so a DEM of 500..897 m read min 0 and a class map 1..5 had
/// a class 0. Now a float output gets NaN, an integer one a value no input cell holds, both
/// declared and said in the warnings; a class map filling the whole Byte range is refused
/// with `nodata` as the way out. Twin: a regridding in the raster's own CRS (inside the
/// source) declares nothing new.
#[tokio::test]
async fn r13_b3_a_reprojection_without_nodata_fills_the_outside_with_a_declared_nodata() {
    let server = server().await;
    // UTM 33N at 12° E, 55° N, off the zone's meridian: the grid turns, wedges appear.
    let gt = Some([320_000.0, 100.0, 0.0, 6_100_000.0, 0.0, -100.0]);
    write_raster::<f32>(
        &server.path("dem.tif"),
        (40, 40),
        (0..1600).map(|i| 500.0 + (i % 40) as f32).collect(),
        gt,
        Some(32633),
        |_| {},
    );
    // A class map 1..5, and bytes filling the whole Byte range.
    for (name, classes) in [("classes.tif", true), ("full.tif", false)] {
        let cells = (0..1600u32).map(|i| {
            if classes {
                1 + (i % 5) as u8
            } else {
                (i % 256) as u8
            }
        });
        write_raster::<u8>(
            &server.path(name),
            (40, 40),
            cells.collect(),
            gt,
            Some(32633),
            |_| {},
        );
    }
    let warp = |input: &'static str, output: &'static str, dst: &'static str| {
        let server = &server;
        async move {
            call_justified(
                server,
                "raster_reproject",
                json!({"input": input, "output": output, "dst_crs": dst,
                       "resampling": "nearest"}),
            )
            .await
            .unwrap()
            .result
        }
    };
    let nodata_of = |output: &str| {
        gdal::Dataset::open(server.path(output))
            .unwrap()
            .rasterband(1)
            .unwrap()
            .no_data_value()
    };
    let done = warp("dem.tif", "dem4326.tif", "EPSG:4326").await;
    assert!(!is_error(&done), "{}", text(&done));
    let warnings = structured(&done)["warnings"].to_string();
    assert!(warnings.contains("declares no nodata"), "{warnings}");
    assert!(nodata_of("dem4326.tif").is_some_and(f64::is_nan));
    let (values, _) = read_all(&server.path("dem4326.tif"));
    assert!(values.iter().any(|v| v.is_nan()), "the wedges are nodata");
    assert!(values.iter().filter(|v| !v.is_nan()).all(|v| *v >= 500.0));

    let done = warp("classes.tif", "classes4326.tif", "EPSG:4326").await;
    assert!(!is_error(&done), "{}", text(&done));
    assert_eq!(nodata_of("classes4326.tif"), Some(255.0));
    let (values, _) = read_all(&server.path("classes4326.tif"));
    assert!(values
        .iter()
        .all(|v| (1.0..=5.0).contains(v) || *v == 255.0));
    assert!(values.contains(&255.0));

    let refused = warp("full.tif", "full4326.tif", "EPSG:4326").await;
    assert!(is_error(&refused));
    assert_eq!(error_kind(&structured(&refused)), "invalid_arguments");
    assert!(text(&refused).contains("\"nodata\""), "{}", text(&refused));
    assert!(!server.path("full4326.tif").exists());

    // The twin: the raster's own CRS, its own extent: nothing outside, nothing declared.
    let done = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "dem.tif", "output": "same.tif", "dst_crs": "EPSG:32633",
               "resampling": "nearest", "resolution": [200, 200]}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&done), "{}", text(&done));
    assert_eq!(nodata_of("same.tif"), None);
    let warnings = structured(&done)["warnings"].to_string();
    assert!(!warnings.contains("declares no nodata"), "{warnings}");
}

/// Attack round 13, R13-B10 (a critical false alarm): an Int16 DEM of flat terrain has few
/// distinct heights, and "few integers" alone made it a class map: bilinear resampling was
/// refused as critical `categorical_input`. A band that declares a length unit measures; it
/// is asked only the ordinary `continuous_input` (required). The twin without a unit, the
/// same integers, is still taken for classes.
#[tokio::test]
async fn r13_b10_an_integer_dem_in_metres_is_not_a_class_map() {
    let server = server().await;
    let heights: Vec<i16> = (0..100 * 100).map(|i| 2 + ((i % 100) / 4) as i16).collect();
    write_utm::<i16>(&server, "plain.tif", (100, 100), heights.clone());
    write_utm::<i16>(&server, "dem.tif", (100, 100), heights);
    update(&server.path("dem.tif"), |dataset| {
        set_unit(&dataset.rasterband(1).unwrap(), "metre");
    });
    let ask = |input: &str, output: &str| json!({"input": input, "output": output, "resampling": "bilinear", "resolution": [90, 90]});
    let dem = call_justified(&server, "raster_resample", ask("dem.tif", "dem90.tif"))
        .await
        .unwrap();
    assert!(!is_error(&dem.result), "{}", text(&dem.result));
    assert_eq!(
        dem.refused_by(),
        vec![("resampling".to_string(), "required".to_string())],
        "{}",
        dem.refusal
    );
    let plain = call_justified(&server, "raster_resample", ask("plain.tif", "plain90.tif"))
        .await
        .unwrap();
    assert_eq!(
        plain.refused_by(),
        vec![("resampling".to_string(), "critical".to_string())],
        "{}",
        plain.refusal
    );
}

/// NaN-aware equality of two rasters' cells.
fn same_cells(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

/// Attack round 19, R19-B2, R19-B5 and R19-B7: a Byte band declaring nodata -1 (which no cell
/// can hold: GDAL and every reader count all its cells valid) was reprojected with its outside
/// cells written 0 (the clamped -1) and read as data, and composited with its unreached cells
/// as 0s; a `nodata` argument the output type cannot hold was clamped onto the data's own
/// values. Such a declared nodata now declares none, so the outputs equal the twin's without
/// any; such an argument is refused before the gate, with nothing written.
#[tokio::test]
async fn r19_b2_b5_b7_a_nodata_the_type_cannot_hold_marks_no_cell() {
    let server = server().await;
    let values: Vec<u8> = (0..1600).map(|i| (i % 200) as u8).collect();
    let gt = [800_000.0, 30.0, 0.0, 5_000_000.0, 0.0, -30.0];
    for (name, nodata) in [("nd.tif", Some(-1.0)), ("twin.tif", None)] {
        write_raster::<u8>(
            &server.path(name),
            (40, 40),
            values.clone(),
            Some(gt),
            Some(32633),
            |band| {
                band.set_no_data_value(nodata).unwrap();
            },
        );
    }
    let mut outputs = Vec::new();
    for name in ["nd.tif", "twin.tif"] {
        let output = format!("utm34_{name}");
        let moved = call_justified(
            &server,
            "raster_reproject",
            json!({"input": name, "output": output, "dst_crs": "EPSG:32634",
                   "resampling": "nearest"}),
        )
        .await
        .unwrap()
        .result;
        assert!(!is_error(&moved), "{name}: {}", text(&moved));
        let dataset = gdal::Dataset::open(server.path(&output)).unwrap();
        let declared = dataset.rasterband(1).unwrap().no_data_value();
        let (cells, _) = read_all(&server.path(&output));
        let outside = cells.iter().filter(|v| Some(**v) == declared).count();
        outputs.push((cells, outside));
    }
    assert!(
        outputs[1].1 > 0,
        "the twin's grid reaches outside its source"
    );
    assert_eq!(outputs[0].1, outputs[1].1, "fill cells declared as nodata");
    assert!(same_cells(&outputs[0].0, &outputs[1].0));
    // R19-B5: composited with an input half a cell off that covers the middle only.
    let inner: Vec<u8> = (0..400).map(|i| 60 + (i % 150) as u8).collect();
    let inner_gt = [
        800_000.0 + 10.0 * 30.0 + 15.0,
        30.0,
        0.0,
        5_000_000.0 - 10.0 * 30.0 - 15.0,
        0.0,
        -30.0,
    ];
    for (name, nodata) in [("inner_nd.tif", Some(-1.0)), ("inner_twin.tif", None)] {
        write_raster::<u8>(
            &server.path(name),
            (20, 20),
            inner.clone(),
            Some(inner_gt),
            Some(32633),
            |band| {
                band.set_no_data_value(nodata).unwrap();
            },
        );
    }
    let mut composites = Vec::new();
    for (inner, statistic) in [
        ("inner_nd.tif", "min"),
        ("inner_twin.tif", "min"),
        ("inner_nd.tif", "count"),
        ("inner_twin.tif", "count"),
    ] {
        let output = format!("{statistic}_{inner}");
        let composite = call_justified(
            &server,
            "raster_composite",
            json!({"inputs": ["twin.tif", inner], "statistic": statistic,
                   "resampling": "nearest", "output": output}),
        )
        .await
        .unwrap()
        .result;
        assert!(!is_error(&composite), "{inner}: {}", text(&composite));
        composites.push(read_all(&server.path(&output)).0);
    }
    assert!(same_cells(&composites[0], &composites[1]), "min");
    assert!(same_cells(&composites[2], &composites[3]), "count");
    assert_eq!(
        composites[3].iter().filter(|v| **v == 1.0).count(),
        1600 - 400
    );
    // R19-B7: a nodata argument the output type cannot hold.
    write_raster::<u16>(
        &server.path("u16.tif"),
        (4, 4),
        (0..16).collect(),
        Some(gt),
        Some(32633),
        |_| {},
    );
    for (tool, arguments) in [
        (
            "raster_convert",
            json!({"input": "u16.tif", "output": "u16_nd.tif", "nodata": -5}),
        ),
        (
            "raster_reproject",
            json!({"input": "twin.tif", "output": "byte_nd.tif", "dst_crs": "EPSG:32634",
                   "resampling": "nearest", "nodata": -1}),
        ),
    ] {
        let output = arguments["output"].as_str().unwrap().to_string();
        let refused = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        assert!(
            text(&refused).contains("holds whole numbers from 0 to"),
            "{tool}: {}",
            text(&refused)
        );
        assert!(!server.path(&output).exists());
    }
}

/// Attack round 19, R19-B1 and R19-B8: `raster_composite` cast physical values (UInt16 plus
/// an offset of 1.7e9) and sums to Float32 unchecked (1,000 distinct seconds written as 9,
/// 20,000,001 written 20,000,000), and `raster_calc` reported figures of the values before
/// Float32 rounded them. Both composites are refused with nothing written; the calc's figures
/// are the file's. The twin without the offset composites.
#[tokio::test]
async fn r19_b1_b8_float32_is_checked_on_what_is_written() {
    let server = server().await;
    let gt = Some([500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0]);
    for (name, first, offset) in [
        ("t1.tif", 1u16, Some(1.7e9)),
        ("t2.tif", 3, Some(1.7e9)),
        ("plain1.tif", 1, None),
        ("plain2.tif", 3, None),
    ] {
        write_raster::<u16>(
            &server.path(name),
            (8, 8),
            (0..64).map(|i| first + i * 13).collect(),
            gt,
            Some(32633),
            |band| {
                if let Some(offset) = offset {
                    band.set_offset(offset).unwrap();
                    band.set_scale(1.0).unwrap();
                }
            },
        );
    }
    for (name, first) in [("i1.tif", 10_000_000i32), ("i2.tif", 10_000_001)] {
        write_raster::<i32>(
            &server.path(name),
            (8, 8),
            (0..64).map(|i| first + 2 * i).collect(),
            gt,
            Some(32633),
            |_| {},
        );
    }
    for (inputs, statistic, output) in [
        (["t1.tif", "t2.tif"], "max", "tmax.tif"),
        (["i1.tif", "i2.tif"], "sum", "isum.tif"),
    ] {
        let refused = call_justified(
            &server,
            "raster_composite",
            json!({"inputs": inputs, "statistic": statistic, "output": output}),
        )
        .await
        .unwrap()
        .result;
        assert!(is_error(&refused), "{output}: {}", text(&refused));
        assert!(text(&refused).contains("Float32"), "{}", text(&refused));
        assert!(!server.path(output).exists());
    }
    let plain = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["plain1.tif", "plain2.tif"], "statistic": "max", "output": "pmax.tif"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&plain), "{}", text(&plain));
    let calc = call_justified(
        &server,
        "raster_calc",
        json!({"inputs": {"a": "t1.tif"}, "expression": "a", "data_type": "Float32",
               "output": "calc.tif"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&calc), "{}", text(&calc));
    let (cells, _) = read_all(&server.path("calc.tif"));
    let written_max = cells.iter().copied().fold(f64::MIN, f64::max);
    assert_eq!(structured(&calc)["max"].as_f64(), Some(written_max));
}

/// Attack round 19, R19-B6: argument errors no justification changes came after the gate had
/// asked for one and stored it: `zonal_stats` of a south-up raster, of a band it lacks, by an
/// `id_field` the zones lack; `dem_streams` with an `accumulation` and `dem_flow_accumulation`
/// with `weights` on another grid. Each is now refused at once, unjustified, and no capsule is
/// stored.
#[tokio::test]
async fn r19_b6_argument_errors_come_before_the_gate() {
    let server = server().await;
    let ramp: Vec<f32> = (0..400)
        .map(|i| (i % 20) as f32 + (i / 20) as f32)
        .collect();
    let north_up = [500_000.0, 10.0, 0.0, 5_000_200.0, 0.0, -10.0];
    let south_up = [500_000.0, 10.0, 0.0, 5_000_000.0, 0.0, 10.0];
    write_raster::<f32>(
        &server.path("dem.tif"),
        (20, 20),
        ramp.clone(),
        Some(north_up),
        Some(32633),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("south.tif"),
        (20, 20),
        ramp,
        Some(south_up),
        Some(32633),
        |_| {},
    );
    write_raster::<f32>(
        &server.path("small.tif"),
        (10, 10),
        vec![1.0; 100],
        Some(north_up),
        Some(32633),
        |_| {},
    );
    let zone = json!({"type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}},
        "features": [{"type": "Feature", "properties": {"name": "a"},
            "geometry": {"type": "Polygon", "coordinates": [[[500_020.0, 5_000_020.0],
                [500_080.0, 5_000_020.0], [500_080.0, 5_000_080.0], [500_020.0, 5_000_080.0],
                [500_020.0, 5_000_020.0]]]}}]});
    std::fs::write(server.path("zones.geojson"), zone.to_string()).unwrap();
    for (tool, arguments, said) in [
        (
            "zonal_stats",
            json!({"input": "south.tif", "zones": "zones.geojson", "stats": ["mean"], "semantics": "cell_centre"}),
            "not north-up",
        ),
        (
            "zonal_stats",
            json!({"input": "dem.tif", "zones": "zones.geojson", "stats": ["mean"], "semantics": "cell_centre", "band": 3}),
            "band: the raster has 1 band(s)",
        ),
        (
            "zonal_stats",
            json!({"input": "dem.tif", "zones": "zones.geojson", "stats": ["mean"], "semantics": "cell_centre",
                   "id_field": "nope"}),
            "id_field: the zones have no field",
        ),
        (
            "dem_streams",
            json!({"input": "dem.tif", "output": "streams.tif", "threshold": 5,
                   "accumulation": "small.tif"}),
            "accumulation: 10x10 cells",
        ),
        (
            "dem_flow_accumulation",
            json!({"input": "dem.tif", "output": "acc.tif", "weights": "small.tif", "algorithm": "d8"}),
            "weights: 10x10 cells",
        ),
    ] {
        let refused = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        assert_eq!(
            error_kind(&structured(&refused)),
            "invalid_arguments",
            "{tool}: {}",
            text(&refused)
        );
        assert!(text(&refused).contains(said), "{tool}: {}", text(&refused));
    }
    assert!(
        !server.path(".preflight/justifications").exists()
            || std::fs::read_dir(server.path(".preflight/justifications"))
                .unwrap()
                .next()
                .is_none()
    );
}

/// Attack round 19, R19-C1, R19-C2, R19-C5 and R19-C6: a raster declaring a NaN
/// geotransform or scale was answered with `null` where the output schema promises numbers
/// (the TypeScript SDK's `callTool` threw), or refused as "GDALInfo returned invalid JSON";
/// a Web Mercator coordinate of 3.4e38 (in an argument, or in a layer) held a worker for good;
/// an infinite cell was sampled as a bare `null`. The declarations are refused naming what is
/// wrong, the coordinates at once, and the infinite cell is said.
#[tokio::test]
async fn r19_c1_c2_c5_c6_numbers_no_data_has_are_named() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (w, h) = gdal::Dataset::open(server.path("dem.tif"))
        .unwrap()
        .raster_size();
    let vrt = |geotransform: &str, scale: &str| {
        format!(
            r#"<VRTDataset rasterXSize="{w}" rasterYSize="{h}"><SRS>EPSG:4326</SRS><GeoTransform>{geotransform}</GeoTransform><VRTRasterBand dataType="Float32" band="1"><Scale>{scale}</Scale><SimpleSource><SourceFilename relativeToVRT="1">dem.tif</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand></VRTDataset>"#
        )
    };
    std::fs::write(
        server.path("gt_nan.vrt"),
        vrt("nan, 0.01, 0, 45.2, 0, -0.01", "1"),
    )
    .unwrap();
    std::fs::write(
        server.path("scale_nan.vrt"),
        vrt("10, 0.01, 0, 45.2, 0, -0.01", "nan"),
    )
    .unwrap();
    for (input, said) in [
        ("gt_nan.vrt", "places the raster nowhere"),
        ("scale_nan.vrt", "declares scale NaN"),
    ] {
        for (tool, arguments) in [
            ("raster_info", json!({"input": input})),
            ("raster_stats", json!({"input": input})),
            (
                "raster_sample",
                json!({"input": input, "coordinates": [[10.05, 45.15]]}),
            ),
        ] {
            let refused = server.call(tool, arguments).await.unwrap();
            assert!(is_error(&refused), "{tool} {input}: {}", text(&refused));
            assert!(
                text(&refused).contains(said),
                "{tool} {input}: {}",
                text(&refused)
            );
        }
    }
    // R19-C2: a place no CRS has, in an argument and in a layer.
    let started = std::time::Instant::now();
    let far = server
        .call(
            "raster_sample",
            json!({"input": "dem.tif", "coordinates": [[3.4e38, 0.0]], "crs": "EPSG:3857"}),
        )
        .await
        .unwrap();
    assert!(is_error(&far), "{}", text(&far));
    assert!(text(&far).contains("no place"), "{}", text(&far));
    std::fs::write(
        server.path("far.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::3857"}},"features":[{"type":"Feature","properties":{"id":1},"geometry":{"type":"Point","coordinates":[3.4028234663852886e38,0]}}]}"#,
    )
    .unwrap();
    let layer = server
        .call("vector_measure", json!({"input": "far.geojson"}))
        .await
        .unwrap();
    assert!(is_error(&layer), "{}", text(&layer));
    assert!(text(&layer).contains("no place"), "{}", text(&layer));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // R19-C6: an infinite cell.
    let mut cells = vec![1.0f32; 16];
    cells[0] = f32::NEG_INFINITY;
    write_raster::<f32>(
        &server.path("inf.tif"),
        (4, 4),
        cells,
        Some([500_000.0, 10.0, 0.0, 4_000_040.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    let sampled = server
        .call(
            "raster_sample",
            json!({"input": "inf.tif", "coordinates": [[500_005.0, 4_000_035.0]]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&sampled), "{}", text(&sampled));
    assert!(
        structured(&sampled)["points"][0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("-inf")),
        "{}",
        text(&sampled)
    );
}

/// The features of the first layer of a written vector file.
fn feature_count(path: &Path) -> u64 {
    use gdal::vector::LayerAccess;
    let dataset = gdal::Dataset::open(path).unwrap();
    let mut layer = dataset.layer(0).unwrap();
    layer.features().count() as u64
}

/// Attack round 20, R20-B1, B2, B3, B4, B5, B6 and B12 (the rasters): a signed-byte band's
/// refusal, a composite's unlike units and a `nodata` Float32 rounds to 0 came only after
/// a justification, or not at all; a packed composite with a nodata cell was refused as "NaN
/// becomes NaN"; `1e-3` was no number to `raster_calc`; a rescale's source range read in
/// stored values clamped every cell of a packed band, and one that reached the `nodata`
/// turned valid cells into nodata. Each is now refused at once, or computed.
#[tokio::test]
async fn r20_b_rasters_refuse_before_the_gate_and_compute_what_they_can() {
    let server = server().await;
    let gt = Some([500_000.0, 10.0, 0.0, 4_000_100.0, 0.0, -10.0]);
    // R20-B1: bytes 200..209 read signed as -56..-47.
    write_raster::<u8>(
        &server.path("bytes.tif"),
        (10, 10),
        (0..100).map(|i| 200 + (i % 10) as u8).collect(),
        gt,
        Some(32633),
        |_| {},
    );
    run_program(
        "gdal_translate",
        &[
            "-q",
            "-co",
            "PIXELTYPE=SIGNEDBYTE",
            &server.path("bytes.tif").display().to_string(),
            &server.path("signed.tif").display().to_string(),
        ],
    );
    let signed = server
        .call(
            "raster_resample",
            json!({"input": "signed.tif", "output": "s.tif", "resolution": [20, 20],
                   "resampling": "average"}),
        )
        .await
        .unwrap();
    assert_eq!(
        error_kind(&structured(&signed)),
        "invalid_arguments",
        "{}",
        text(&signed)
    );
    assert!(text(&signed).contains("SIGNEDBYTE"), "{}", text(&signed));
    // R20-B2: packed inputs, one nodata cell each.
    for (name, first) in [("p1.tif", 100u16), ("p2.tif", 150)] {
        let mut cells: Vec<u16> = (0..100).map(|i| first + i as u16).collect();
        cells[0] = 0;
        write_raster::<u16>(
            &server.path(name),
            (10, 10),
            cells,
            gt,
            Some(32633),
            |band| {
                band.set_scale(0.1).unwrap();
                band.set_offset(0.0).unwrap();
                band.set_no_data_value(Some(0.0)).unwrap();
            },
        );
    }
    let packed = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["p1.tif", "p2.tif"], "statistic": "max", "output": "pmax.tif"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&packed), "{}", text(&packed));
    let (cells, _) = read_all(&server.path("pmax.tif"));
    assert!((cells[1] - 15.1).abs() < 1e-4, "{}", cells[1]);
    // R20-B3: K and degC, before the gate.
    for (name, unit) in [("k.tif", "K"), ("c.tif", "degC")] {
        write_raster::<f32>(
            &server.path(name),
            (10, 10),
            vec![280.0; 100],
            gt,
            Some(32633),
            |band| set_unit(band, unit),
        );
    }
    let unlike = server
        .call(
            "raster_composite",
            json!({"inputs": ["k.tif", "c.tif"], "statistic": "mean", "output": "kc.tif"}),
        )
        .await
        .unwrap();
    assert_eq!(
        error_kind(&structured(&unlike)),
        "invalid_arguments",
        "{}",
        text(&unlike)
    );
    assert!(text(&unlike).contains("degC"), "{}", text(&unlike));
    // R20-B4: an exponent.
    let calc = call_justified(
        &server,
        "raster_calc",
        json!({"inputs": {"a": "k.tif"}, "expression": "a * 1e-3", "output": "milli.tif",
               "data_type": "Float32"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&calc), "{}", text(&calc));
    assert!((read_all(&server.path("milli.tif")).0[0] - 0.28).abs() < 1e-6);
    // R20-B5, B6: a rescale reaching the nodata; a source range in physical values.
    write_raster::<u16>(
        &server.path("dm.tif"),
        (10, 10),
        (0..100).map(|i| 1001 + i as u16).collect(),
        gt,
        Some(32633),
        |band| {
            band.set_scale(0.1).unwrap();
            band.set_offset(0.0).unwrap();
        },
    );
    for (arguments, said) in [
        (
            json!({"input": "bytes.tif", "output": "r1.tif", "output_type": "Byte",
                   "scale": [200, 205, 0, 254], "nodata": 255}),
            "reaches the nodata 255",
        ),
        (
            json!({"input": "dm.tif", "output": "r2.tif", "output_type": "Byte",
                   "scale": [100, 110, 0, 254]}),
            "[1000, 1100, 0, 254]",
        ),
        // R20-B12.
        (
            json!({"input": "k.tif", "output": "r3.tif", "nodata": 1e-50}),
            "as 0",
        ),
    ] {
        let output = arguments["output"].as_str().unwrap().to_string();
        let refused = server.call("raster_convert", arguments).await.unwrap();
        assert_eq!(
            error_kind(&structured(&refused)),
            "invalid_arguments",
            "{}",
            text(&refused)
        );
        assert!(text(&refused).contains(said), "{}", text(&refused));
        assert!(!server.path(&output).exists());
    }
    let covered = call_justified(
        &server,
        "raster_convert",
        json!({"input": "dm.tif", "output": "r4.tif", "output_type": "Byte",
               "scale": [1000, 1100, 0, 254]}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&covered), "{}", text(&covered));
}

/// Attack round 20, R20-B8 to B11 (the tables and layers): an attribute join onto a table
/// wrote none of its rows; a clip kept a feature without a geometry and every row of a table;
/// `x: "lat"` placed points 4,500 km away; a text field of numbers was steered into a text
/// comparison. Each is now right, or refused naming the fix.
#[tokio::test]
async fn r20_b_tables_and_layers_keep_their_rows_and_read_their_names() {
    let server = server().await;
    std::fs::write(
        server.path("t.csv"),
        "code,name\nA,first\nB,second\nC,third\n",
    )
    .unwrap();
    std::fs::write(server.path("j.csv"), "code,v\nA,1\nA,2\nB,5\n").unwrap();
    let joined = call_justified(
        &server,
        "vector_join",
        json!({"input": "t.csv", "join": "j.csv", "key": "code", "fields": ["v"],
               "stats": ["count", "sum"], "output": "joined.csv"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&joined), "{}", text(&joined));
    assert_eq!(feature_count(&server.path("joined.csv")), 3);
    std::fs::write(
        server.path("pn.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":1},"geometry":{"type":"Point","coordinates":[0.5,0.5]}},{"type":"Feature","properties":{"id":2},"geometry":{"type":"Point","coordinates":[5,5]}},{"type":"Feature","properties":{"id":3},"geometry":null}]}"#,
    )
    .unwrap();
    let clipped = call_justified(
        &server,
        "vector_clip",
        json!({"input": "pn.geojson", "bounds": {"xmin": 0, "ymin": 0, "xmax": 1, "ymax": 1},
               "output": "k1.geojson"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&clipped), "{}", text(&clipped));
    assert_eq!(feature_count(&server.path("k1.geojson")), 1);
    let table = server
        .call(
            "vector_clip",
            json!({"input": "t.csv", "bounds": {"xmin": 0, "ymin": 0, "xmax": 1, "ymax": 1},
                   "output": "k2.csv"}),
        )
        .await
        .unwrap();
    assert!(is_error(&table), "{}", text(&table));
    assert!(text(&table).contains("no geometry"), "{}", text(&table));
    std::fs::write(server.path("pts.csv"), "id,lat,lon\n1,45.1,10.2\n").unwrap();
    let swapped = server
        .call(
            "points_from_table",
            json!({"input": "pts.csv", "output": "pts.geojson", "x": "lat", "y": "lon",
                   "crs": "EPSG:4326"}),
        )
        .await
        .unwrap();
    assert!(is_error(&swapped), "{}", text(&swapped));
    assert!(text(&swapped).contains("swap them"), "{}", text(&swapped));
    let placed = call_justified(
        &server,
        "points_from_table",
        json!({"input": "pts.csv", "output": "pts.geojson", "x": "lon", "y": "lat",
               "crs": "EPSG:4326"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&placed), "{}", text(&placed));
    std::fs::write(
        server.path("pop.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"pop":"100"},"geometry":{"type":"Point","coordinates":[0,0]}},{"type":"Feature","properties":{"pop":"20"},"geometry":{"type":"Point","coordinates":[1,1]}},{"type":"Feature","properties":{"pop":"3"},"geometry":{"type":"Point","coordinates":[2,2]}}]}"#,
    )
    .unwrap();
    let numeric = server
        .call(
            "vector_query",
            json!({"input": "pop.geojson", "where": "pop > 50"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&numeric), "{}", text(&numeric));
    assert_eq!(
        structured(&numeric)["features"].as_array().map(Vec::len),
        Some(1)
    );
    let quoted = server
        .call(
            "vector_query",
            json!({"input": "pop.geojson", "where": "pop > '50'"}),
        )
        .await
        .unwrap();
    assert!(is_error(&quoted), "{}", text(&quoted));
    assert!(text(&quoted).contains("unquoted"), "{}", text(&quoted));
}

/// Attack round 20, R20-C4: `vector_query` answered a point at x = inf with `centroid: [null,
/// 0.0]`, against its output schema (the TypeScript SDK's `callTool` threw). Such a centroid
/// is null, with a note; the other feature's is given.
#[tokio::test]
async fn r20_c4_a_centroid_of_no_number_is_null_and_said() {
    use gdal::vector::LayerAccess;
    let server = server().await;
    {
        let driver = DriverManager::get_driver_by_name("GPKG").unwrap();
        let mut dataset = driver.create_vector_only(server.path("inf.gpkg")).unwrap();
        let srs = SpatialRef::from_epsg(32633).unwrap();
        let layer = dataset
            .create_layer(gdal::vector::LayerOptions {
                name: "p",
                srs: Some(&srs),
                ty: gdal::vector::OGRwkbGeometryType::wkbPoint,
                options: None,
            })
            .unwrap();
        for x in [f64::INFINITY, 5.0] {
            let mut point =
                gdal::vector::Geometry::empty(gdal::vector::OGRwkbGeometryType::wkbPoint).unwrap();
            point.set_point_2d(0, (x, 0.0));
            let mut feature = gdal::vector::Feature::new(layer.defn()).unwrap();
            feature.set_geometry(point).unwrap();
            feature.create(&layer).unwrap();
        }
    }
    let queried = server
        .call(
            "vector_query",
            json!({"input": "inf.gpkg", "measures": ["centroid"]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&queried), "{}", text(&queried));
    let features = structured(&queried)["features"].clone();
    assert_eq!(features[0]["centroid"], Value::Null, "{features}");
    assert!(
        features[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("not finite")),
        "{features}"
    );
    assert_eq!(features[1]["centroid"], json!([5.0, 0.0]), "{features}");
}

/// Attack round 21, R21-C4: a self-intersecting "bow-tie" polygon at 10° E 45° N got the
/// centroid [5.1, -29.8], 8,300 km away (its lobes' signed areas cancel), with a note that
/// spoke only of its area. An invalid polygon's centroid is null, and the note says so; the
/// valid square beside it (the twin) keeps its centroid.
#[tokio::test]
async fn r21_c4_an_invalid_polygon_has_no_centroid() {
    let server = server().await;
    std::fs::write(
        server.path("bowtie.geojson"),
        r#"{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[10,45],[10.1,45.1],[10.1,45],[10,45.1],[10,45]]]}},
{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[10,45],[10.1,45],[10.1,45.1],[10,45.1],[10,45]]]}}]}"#,
    )
    .unwrap();
    let queried = server
        .call(
            "vector_query",
            json!({"input": "bowtie.geojson", "measures": ["area", "centroid"]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&queried), "{}", text(&queried));
    let features = structured(&queried)["features"].clone();
    assert_eq!(features[0]["centroid"], Value::Null, "{features}");
    assert_eq!(features[0]["area"], Value::Null, "{features}");
    assert!(
        features[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("its area and centroid have no meaningful value")),
        "{features}"
    );
    let square = features[1]["centroid"].as_array().unwrap();
    assert!(
        (square[0].as_f64().unwrap() - 10.05).abs() < 1e-3,
        "{features}"
    );
    assert!(
        (square[1].as_f64().unwrap() - 45.05).abs() < 1e-3,
        "{features}"
    );
    assert!(features[1]["area"].as_f64().unwrap() > 8.0e7, "{features}");
}

/// Attack round 21, R21-B9 and R21-B16: a band that declares nodata -9999 and carries a
/// per-dataset mask marking another cell (a 1000 "cloud") invalid. The host's readers honour
/// both; gdalwarp followed the nodata only (a 2 x 2 max wrote 1000 where `raster_stats` said
/// 15) and gdaladdo the mask only (an overview cell averaged -9999 in). The warping tools and
/// the overviews now refuse before the gate, naming `raster_calc`, whose copy makes the masked
/// cells nodata; on that copy the bottom-right block's max is 15, not 1000 (the twin).
#[tokio::test]
async fn r21_b9_b16_nodata_and_a_mask_are_made_one_before_gdal_programs() {
    let server = server().await;
    let path = server.path("r.tif");
    {
        let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
        let mut dataset = driver
            .create_with_band_type::<f32, _>(&path, 4, 4, 1)
            .unwrap();
        dataset
            .set_geo_transform(&[500000.0, 10.0, 0.0, 4000040.0, 0.0, -10.0])
            .unwrap();
        dataset
            .set_spatial_ref(&SpatialRef::from_epsg(32633).unwrap())
            .unwrap();
        let mut values: Vec<f32> = (1..=16).map(|v| v as f32).collect();
        values[0] = -9999.0;
        values[15] = 1000.0;
        let mut band = dataset.rasterband(1).unwrap();
        band.write((0, 0), (4, 4), &mut Buffer::new((4, 4), values))
            .unwrap();
        band.set_no_data_value(Some(-9999.0)).unwrap();
        band.create_mask_band(true).unwrap();
        let mut mask = band.open_mask_band().unwrap();
        let mut valid = vec![255u8; 16];
        valid[15] = 0;
        mask.write((0, 0), (4, 4), &mut Buffer::new((4, 4), valid))
            .unwrap();
    }
    let stats = server
        .call("raster_stats", json!({"input": "r.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
    let band = &structured(&stats)["bands"][0];
    assert_eq!(band["max"], json!(15.0), "{band}");
    for (tool, arguments) in [
        (
            "raster_aggregate",
            json!({"input": "r.tif", "output": "ag.tif", "factor": [2], "statistic": "max"}),
        ),
        (
            "raster_resample",
            json!({"input": "r.tif", "output": "rs.tif", "resolution": [20, 20], "resampling": "max"}),
        ),
        (
            "raster_reproject",
            json!({"input": "r.tif", "output": "rp.tif", "dst_crs": "EPSG:32634", "resampling": "max"}),
        ),
        (
            "raster_overviews",
            json!({"input": "r.tif", "output": "ov.tif", "levels": [2], "resampling": "average"}),
        ),
    ] {
        let refused = server.call(tool, arguments).await.unwrap();
        assert!(is_error(&refused), "{tool}: {}", text(&refused));
        assert_eq!(
            structured(&refused)["error"]["kind"],
            json!("invalid_arguments"),
            "{tool}: {}",
            text(&refused)
        );
        assert!(
            text(&refused).contains("two ways") && text(&refused).contains("raster_calc"),
            "{tool}: {}",
            text(&refused)
        );
    }
    let copied = server
        .call(
            "raster_calc",
            json!({"inputs": {"a": "r.tif"}, "expression": "a", "output": "one.tif",
                   "data_type": "Float32"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&copied), "{}", text(&copied));
    let aggregated = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "one.tif", "output": "ag.tif", "factor": [2], "statistic": "max"}),
    )
    .await
    .unwrap();
    assert!(
        !is_error(&aggregated.result),
        "{}",
        text(&aggregated.result)
    );
    let dataset = gdal::Dataset::open(server.path("ag.tif")).unwrap();
    let band = dataset.rasterband(1).unwrap();
    let cells = band.read_as::<f64>((0, 0), (2, 2), (2, 2), None).unwrap();
    let nodata = band.no_data_value();
    assert_eq!(cells.data(), &[6.0, 8.0, 14.0, 15.0], "{nodata:?}");
}

/// Attack round 21 on `vector_join` and `vector_query`:
/// * R21-B1: an Integer `year` (2019, 2021) was taken for a possible weight, and the plain
///   mean of `price` refused as ambiguous; a year is no denominator (and barely varies), so
///   the mean is 150.
/// * R21-B13: `min`, `max` and `first` of an Integer64 H3 index were written as Real, their
///   last digits lost; they keep the field's type and value.
/// * R21-B14: `count` wrote no column; it writes the field's non-null values (1 of 2).
/// * R21-B4: `order_by` on numbers stored as text sorted by bytes ("45" first of 100, 20, 3,
///   45); they sort as numbers, and zoned and zone-less date-times mixed are refused.
#[tokio::test]
async fn r21_b1_b4_b13_b14_joins_and_orders_keep_values_and_meaning() {
    use gdal::vector::LayerAccess;
    let server = server().await;
    std::fs::write(
        server.path("zones.geojson"),
        r#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"name":"z"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}}]}"#,
    )
    .unwrap();
    std::fs::write(
        server.path("sales.geojson"),
        r#"{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"price":100,"year":2019,"h3":617700169958293503,"v":10},"geometry":{"type":"Point","coordinates":[2,2]}},
{"type":"Feature","properties":{"price":200,"year":2021,"h3":617700169958293000,"v":null},"geometry":{"type":"Point","coordinates":[3,3]}}]}"#,
    )
    .unwrap();
    let joined = call_justified(
        &server,
        "vector_join",
        json!({"input": "zones.geojson", "join": "sales.geojson", "output": "joined.gpkg",
               "predicate": "intersects", "fields": ["price", "h3", "v"],
               "stats": ["count", "mean", "min", "max"]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&joined.result), "{}", text(&joined.result));
    let dataset = gdal::Dataset::open(server.path("joined.gpkg")).unwrap();
    let mut layer = dataset.layer(0).unwrap();
    let feature = layer.features().next().unwrap();
    let index = |name: &str| feature.field_index(name).unwrap();
    assert_eq!(
        feature.field_as_double(index("price_mean")).unwrap(),
        Some(150.0)
    );
    assert_eq!(
        feature.field_as_integer64(index("h3_min")).unwrap(),
        Some(617700169958293000)
    );
    assert_eq!(
        feature.field_as_integer64(index("h3_max")).unwrap(),
        Some(617700169958293503)
    );
    assert_eq!(
        feature.field_as_integer64(index("v_count")).unwrap(),
        Some(1)
    );
    assert_eq!(
        feature.field_as_integer64(index("join_count")).unwrap(),
        Some(2)
    );

    std::fs::write(
        server.path("pops.geojson"),
        r#"{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"name":"A","pop":"100","t":"2024-01-01T03:00:00"},"geometry":null},
{"type":"Feature","properties":{"name":"B","pop":"20","t":"2024-01-01T10:00:00+05:00"},"geometry":null},
{"type":"Feature","properties":{"name":"C","pop":"3","t":"2024-01-01T06:00:00"},"geometry":null},
{"type":"Feature","properties":{"name":"D","pop":"45","t":null},"geometry":null}]}"#,
    )
    .unwrap();
    let top = server
        .call(
            "vector_query",
            json!({"input": "pops.geojson", "order_by": "pop DESC", "limit": 4}),
        )
        .await
        .unwrap();
    assert!(!is_error(&top), "{}", text(&top));
    let names: Vec<Value> = structured(&top)["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["attributes"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("A"), json!("D"), json!("B"), json!("C")]);
    let mixed = server
        .call(
            "vector_query",
            json!({"input": "pops.geojson", "order_by": "t ASC"}),
        )
        .await
        .unwrap();
    assert!(is_error(&mixed), "{}", text(&mixed));
    assert!(text(&mixed).contains("time zone"), "{}", text(&mixed));
}

/// Attack round 21, R21-B5: `raster_composite` and `zonal_stats` on a complex (CFloat32) band
/// asked for a justification first and refused the complex band only on the justified retry;
/// the refusal now comes before the gate. R21-B11: `raster_sample` counted a MultiPoint inside
/// the raster as `outside`; it is not sampled, not counted outside, and a warning says so.
#[tokio::test]
async fn r21_b5_b11_complex_bands_before_the_gate_and_multipoints_not_outside() {
    let server = server().await;
    let plain = server.path("plain.tif");
    write_raster::<f32>(
        &plain,
        (4, 4),
        vec![1.0; 16],
        Some([500000.0, 10.0, 0.0, 4000040.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    gdal_mcp_tests::run_program(
        "gdal_translate",
        &[
            "-q",
            "-ot",
            "CFloat32",
            plain.to_str().unwrap(),
            server.path("complex.tif").to_str().unwrap(),
        ],
    );
    std::fs::copy(server.path("complex.tif"), server.path("complex2.tif")).unwrap();
    let composite = server
        .call(
            "raster_composite",
            json!({"inputs": ["complex.tif", "complex2.tif"], "output": "c.tif",
                   "statistic": "max"}),
        )
        .await
        .unwrap();
    assert!(is_error(&composite), "{}", text(&composite));
    assert_eq!(
        structured(&composite)["error"]["kind"],
        json!("invalid_arguments"),
        "{}",
        text(&composite)
    );
    assert!(text(&composite).contains("complex"), "{}", text(&composite));
    std::fs::write(
        server.path("zone.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},"features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[500000,4000000],[500020,4000000],[500020,4000020],[500000,4000020],[500000,4000000]]]}}]}"#,
    )
    .unwrap();
    let zonal = server
        .call(
            "zonal_stats",
            json!({"input": "complex.tif", "zones": "zone.geojson", "stats": ["mean"]}),
        )
        .await
        .unwrap();
    assert!(is_error(&zonal), "{}", text(&zonal));
    assert_eq!(
        structured(&zonal)["error"]["kind"],
        json!("invalid_arguments"),
        "{}",
        text(&zonal)
    );

    std::fs::write(
        server.path("multi.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},"features":[
{"type":"Feature","properties":{},"geometry":{"type":"MultiPoint","coordinates":[[500005,4000005],[500015,4000015]]}},
{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[500005,4000035]}}]}"#,
    )
    .unwrap();
    let sampled = server
        .call(
            "raster_sample",
            json!({"input": "plain.tif", "points": "multi.geojson"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&sampled), "{}", text(&sampled));
    let out = structured(&sampled);
    assert_eq!(out["outside"], json!(0), "{out}");
    assert!(
        out["warnings"].as_array().is_some_and(|w| w
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("not single points")))),
        "{out}"
    );
    assert_eq!(out["points"][1]["values"][0]["value"], json!(1.0), "{out}");
}

/// Attack round 22 on `raster_terrain`, `raster_resample` and the vector tools:
/// * R22-B4: gdaldem's aspect ignores the cell sizes: on 10 x 30 m cells a plane facing 123.7°
///   read 153.4°. Non-square cells are refused for aspect, naming a resample.
/// * R22-B5: a negative scale made every slope negative (-45°); slopes are positive.
/// * R22-B6: the negative-scale aspect refusal advised `a * -0.1` (the scale twice); it names
///   the expression `a`.
/// * R22-B1: an average written into Int16 by `raster_resample` is rounded; a warning says so.
/// * R22-B9: a GeometryCollection of two squares sharing an edge was refused as overlapping.
/// * R22-B11: numbers stored as text beside "n/a" were ordered by bytes, silently: refused.
#[tokio::test]
async fn r22_b1_b4_b5_b6_b9_b11_terrain_signs_cells_rounding_and_edges() {
    let server = server().await;
    // A plane falling 1 m a column east and 2 m a row south, on 10 x 30 m cells.
    let plane: Vec<f32> = (0..36)
        .map(|i| 100.0 - (i % 6) as f32 - 2.0 * (i / 6) as f32)
        .collect();
    write_raster::<f32>(
        &server.path("oblong.tif"),
        (6, 6),
        plane,
        Some([500000.0, 10.0, 0.0, 4000180.0, 0.0, -30.0]),
        Some(32633),
        |_| {},
    );
    let aspect = server
        .call(
            "raster_terrain",
            json!({"input": "oblong.tif", "output": "a.tif", "operation": "aspect"}),
        )
        .await
        .unwrap();
    assert!(is_error(&aspect), "{}", text(&aspect));
    assert!(text(&aspect).contains("not square"), "{}", text(&aspect));
    // Heights stored raw = (physical - 200) / -0.1: a ramp rising 10 m a 10 m cell eastward.
    let raw: Vec<i16> = (0..36).map(|i| -((i % 6) as i16) * 100).collect();
    write_raster::<i16>(
        &server.path("negative.tif"),
        (6, 6),
        raw,
        Some([500000.0, 10.0, 0.0, 4000060.0, 0.0, -10.0]),
        Some(32633),
        |band| {
            band.set_scale(-0.1).unwrap();
            band.set_offset(200.0).unwrap();
            set_unit(band, "m");
        },
    );
    let slope = call_justified(
        &server,
        "raster_terrain",
        json!({"input": "negative.tif", "output": "s.tif", "operation": "slope"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&slope.result), "{}", text(&slope.result));
    let (cells, _) = read_all(&server.path("s.tif"));
    assert!(
        cells
            .iter()
            .filter(|v| v.is_finite() && **v > -9000.0)
            .all(|v| (*v - 45.0).abs() < 0.5),
        "{cells:?}"
    );
    let refused = server
        .call(
            "raster_terrain",
            json!({"input": "negative.tif", "output": "n.tif", "operation": "aspect"}),
        )
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("expression \\\"a\\\"") && !text(&refused).contains("a * -0.1"),
        "{}",
        text(&refused)
    );
    // An average into Int16.
    let ints: Vec<i16> = (0..64).map(|i| (i * 37 % 101) as i16).collect();
    write_raster::<i16>(
        &server.path("ints.tif"),
        (8, 8),
        ints,
        Some([500000.0, 10.0, 0.0, 4000080.0, 0.0, -10.0]),
        Some(32633),
        |_| {},
    );
    let averaged = call_justified(
        &server,
        "raster_resample",
        json!({"input": "ints.tif", "output": "avg.tif", "resolution": [20, 20],
               "resampling": "average"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&averaged.result), "{}", text(&averaged.result));
    let warnings = structured(&averaged.result)["warnings"].to_string();
    assert!(warnings.contains("rounded by gdalwarp"), "{warnings}");

    // Two parcels sharing an edge in one collection: 200 m², not refused.
    std::fs::write(
        server.path("pair.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},"features":[{"type":"Feature","properties":{},"geometry":{"type":"GeometryCollection","geometries":[
{"type":"Polygon","coordinates":[[[500000,0],[500010,0],[500010,10],[500000,10],[500000,0]]]},
{"type":"Polygon","coordinates":[[[500010,0],[500020,0],[500020,10],[500010,10],[500010,0]]]}]}}]}"#,
    )
    .unwrap();
    let measured = server
        .call(
            "vector_measure",
            json!({"input": "pair.geojson", "method": "planar"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&measured), "{}", text(&measured));
    let area = structured(&measured)["polygons"]["area"].as_f64().unwrap();
    assert!((area - 200.0).abs() < 1e-6, "{area}");

    std::fs::write(
        server.path("pops.geojson"),
        r#"{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"pop":"100"},"geometry":null},
{"type":"Feature","properties":{"pop":"45"},"geometry":null},
{"type":"Feature","properties":{"pop":"n/a"},"geometry":null},
{"type":"Feature","properties":{"pop":""},"geometry":null}]}"#,
    )
    .unwrap();
    let ordered = server
        .call(
            "vector_query",
            json!({"input": "pops.geojson", "order_by": "pop DESC", "limit": 1}),
        )
        .await
        .unwrap();
    assert!(is_error(&ordered), "{}", text(&ordered));
    assert!(text(&ordered).contains("n/a"), "{}", text(&ordered));
}

/// Attack round 22, R22-B15: GDAL 3.6 writes OGC:CRS84 into a GeoPackage as a custom entry
/// named "WGS 84" (lon/lat, datum EPSG:6326), which PROJ finds equivalent to OGC:CRS84 under
/// another name (70 %). The host took only matches of 90 % and up, so zones the server itself
/// wrote in CRS84 "matched no authority code" and `zonal_stats` over a UTM raster was asked as
/// critical `source_crs_unidentified`, on a conversion its own evidence called exact. The
/// layer is now identified and the move is not asked, as for EPSG:4326. Twin: zones in a
/// custom Transverse Mercator that no entry defines are still asked.
#[tokio::test]
async fn r22_b15_crs84_layers_the_server_wrote_are_identified() {
    let server = server().await;
    let gt = Some([500_000.0, 100.0, 0.0, 5_501_000.0, 0.0, -100.0]);
    write_raster::<f32>(
        &server.path("r.tif"),
        (10, 10),
        vec![1.0; 100],
        gt,
        Some(32633),
        |band| band.set_no_data_value(Some(-9999.0)).unwrap(),
    );
    let (x, y) = (500_000.0, 5_500_000.0);
    let zones = json!({"type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}},
        "features": [{"type": "Feature", "properties": {"z": 1},
            "geometry": {"type": "Polygon", "coordinates": [[[x + 200.0, y + 200.0],
                [x + 800.0, y + 200.0], [x + 800.0, y + 800.0], [x + 200.0, y + 800.0],
                [x + 200.0, y + 200.0]]]}}]});
    std::fs::write(server.path("z.geojson"), zones.to_string()).unwrap();
    let crs_datum_asked = |result: &rmcp::model::CallToolResult| {
        structured(result)["refusal"]
            .as_array()
            .is_some_and(|entries| entries.iter().any(|e| e["domain"] == json!("crs_datum")))
    };
    for (dst, output) in [("EPSG:4326", "z4326.gpkg"), ("OGC:CRS84", "z84.gpkg")] {
        let moved = call_justified(
            &server,
            "vector_reproject",
            json!({"input": "z.geojson", "output": output, "dst_crs": dst}),
        )
        .await
        .unwrap();
        assert!(!is_error(&moved.result), "{dst}: {}", text(&moved.result));
        let info = server
            .call("vector_info", json!({"input": output}))
            .await
            .unwrap();
        assert!(
            text(&info).contains(dst),
            "{dst}: the layer is identified: {}",
            text(&info)
        );
        let zonal = call_justified(
            &server,
            "zonal_stats",
            json!({"input": "r.tif", "zones": output, "stats": ["count"],
                       "semantics": "coverage"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&zonal.result), "{dst}: {}", text(&zonal.result));
        assert!(
            !zonal.refused_by().iter().any(|(d, _)| d == "crs_datum"),
            "{dst}: {:?}",
            zonal.refused_by()
        );
    }
    // The twin: a Transverse Mercator on 15.5° E, which no authority defines.
    let status = std::process::Command::new("ogr2ogr")
        .args([
            "-q",
            "-t_srs",
            "+proj=tmerc +lat_0=0 +lon_0=15.5 +k=0.9996 +x_0=500000 +y_0=0 +datum=WGS84 +units=m",
        ])
        .arg(server.path("zcustom.gpkg"))
        .arg(server.path("z.geojson"))
        .status()
        .unwrap();
    assert!(status.success());
    let zonal = server
        .call(
            "zonal_stats",
            json!({"input": "r.tif", "zones": "zcustom.gpkg", "stats": ["count"],
                   "semantics": "coverage"}),
        )
        .await
        .unwrap();
    assert!(crs_datum_asked(&zonal), "{}", text(&zonal));
    assert!(
        text(&zonal).contains("source_crs_unidentified"),
        "{}",
        text(&zonal)
    );
}
