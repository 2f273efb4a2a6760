//! Zonal statistics, compositing and block aggregation over stdio: hand-checked small cases,
//! the aggregation refusal, and real Olinda data (census tracts over the Landsat scene).
//! The cross-checks against exactextract and rasterstats live in
//! `tests/python/zonal_references.py`.

use gdal_mcp_tests::{call_justified, is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::path::Path;

/// Write rows of values as a GeoTIFF on a 10 m grid whose top-left corner is (0, 40) in
/// EPSG:32633, with nodata -9999.
fn write_grid(path: &Path, rows: &[Vec<f32>]) {
    let asc = path.with_extension("asc");
    let mut body = format!(
        "ncols {}\nnrows {}\nxllcorner 0\nyllcorner {}\ncellsize 10\nNODATA_value -9999\n",
        rows[0].len(),
        rows.len(),
        40 - 10 * rows.len() as i64
    );
    for row in rows {
        let line: Vec<String> = row.iter().map(|v| format!("{v}")).collect();
        body.push_str(&line.join(" "));
        body.push('\n');
    }
    std::fs::write(&asc, body).unwrap();
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-a_srs", "EPSG:32633"])
        .arg(&asc)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn write_zone(path: &Path, ring: &[[f64; 2]]) {
    let coords: Vec<String> = ring.iter().map(|[x, y]| format!("[{x}, {y}]")).collect();
    std::fs::write(
        path,
        format!(
            r#"{{"type": "FeatureCollection",
                "crs": {{"type": "name", "properties": {{"name": "urn:ogc:def:crs:EPSG::32633"}}}},
                "features": [{{"type": "Feature", "properties": {{"name": "square"}},
                  "geometry": {{"type": "Polygon", "coordinates": [[{}]]}}}}]}}"#,
            coords.join(", ")
        ),
    )
    .unwrap();
}

fn read(path: &Path) -> Vec<f64> {
    let dataset = gdal::Dataset::open(path).unwrap();
    let band = dataset.rasterband(1).unwrap();
    let (w, h) = band.size();
    band.read_as::<f64>((0, 0), (w, h), (w, h), None)
        .unwrap()
        .data()
        .to_vec()
}

/// Equal to within f32 rounding: coverage fractions are single precision, as exactextract's.
fn close(a: &Value, b: f64) -> bool {
    a.as_f64()
        .is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

#[tokio::test]
async fn zonal_stats_hand_checked_semantics_and_nodata_policies() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // 4x4 cells valued 1..16 row by row; the zone [14, 36] x [4, 26] covers columns 1-3 and
    // rows 1-3: 0.6, 1, 0.6 of each (coverage), nine whole cells by centre or by touch.
    let values: Vec<Vec<f32>> = (0..4)
        .map(|r| (0..4).map(|c| (r * 4 + c + 1) as f32).collect())
        .collect();
    write_grid(&server.path("grid.tif"), &values);
    write_zone(
        &server.path("zone.geojson"),
        &[
            [14.0, 4.0],
            [36.0, 4.0],
            [36.0, 26.0],
            [14.0, 26.0],
            [14.0, 4.0],
        ],
    );
    let stats = json!(["count", "sum", "mean", "min", "max", "median", "majority", "variety"]);
    let run = |semantics: &str, raster: &str, policy: &str| {
        json!({"input": raster, "zones": "zone.geojson", "stats": stats, "id_field": "name",
               "semantics": semantics, "nodata_policy": policy})
    };
    let centre = call_justified(
        &server,
        "zonal_stats",
        run("cell_centre", "grid.tif", "ignore"),
    )
    .await
    .unwrap();
    assert!(!is_error(&centre.result), "{}", text(&centre.result));
    assert_eq!(
        centre.refused_by(),
        vec![("aggregation".to_string(), "required".to_string())],
        "zonal statistics are an aggregation decision"
    );
    let zone = &structured(&centre.result)["features"][0];
    assert_eq!(zone["id"], json!("square"));
    // Cells 6, 7, 8, 10, 11, 12, 14, 15, 16.
    assert!(close(&zone["count"], 9.0), "{zone}");
    assert!(close(&zone["sum"], 99.0), "{zone}");
    assert!(close(&zone["mean"], 11.0), "{zone}");
    assert!(
        close(&zone["min"], 6.0) && close(&zone["max"], 16.0),
        "{zone}"
    );
    assert!(close(&zone["median"], 11.0), "{zone}");
    assert!(
        close(&zone["majority"], 6.0),
        "ties go to the smallest value: {zone}"
    );
    assert!(close(&zone["variety"], 9.0), "{zone}");

    let touched = call_justified(
        &server,
        "zonal_stats",
        run("all_touched", "grid.tif", "ignore"),
    )
    .await
    .unwrap();
    let zone = &structured(&touched.result)["features"][0];
    assert!(close(&zone["count"], 9.0), "{zone}");

    let coverage = call_justified(
        &server,
        "zonal_stats",
        run("coverage", "grid.tif", "ignore"),
    )
    .await
    .unwrap();
    let zone = &structured(&coverage.result)["features"][0];
    // Σ w = (0.6 + 1 + 0.6)² = 4.84; the weights are symmetric about cell 11, so the weighted
    // mean is 11 and the sum 53.24.
    assert!(close(&zone["count"], 4.84), "{zone}");
    assert!(close(&zone["mean"], 11.0), "{zone}");
    assert!(close(&zone["sum"], 53.24), "{zone}");

    // Cell 11 becomes nodata.
    let mut holed = values.clone();
    holed[2][2] = -9999.0;
    write_grid(&server.path("holed.tif"), &holed);
    let ignore = call_justified(
        &server,
        "zonal_stats",
        run("cell_centre", "holed.tif", "ignore"),
    )
    .await
    .unwrap();
    let zone = &structured(&ignore.result)["features"][0];
    assert!(
        close(&zone["count"], 8.0) && close(&zone["sum"], 88.0),
        "{zone}"
    );
    let propagate = call_justified(
        &server,
        "zonal_stats",
        run("cell_centre", "holed.tif", "propagate"),
    )
    .await
    .unwrap();
    assert!(!is_error(&propagate.result), "{}", text(&propagate.result));
    let zone = &structured(&propagate.result)["features"][0];
    assert!(zone["mean"].is_null() && zone["sum"].is_null(), "{zone}");
}

#[tokio::test]
async fn zonal_stats_on_olinda_tracts_with_csv_and_zones_in_another_crs() {
    let server = Server::start(
        Era::Legacy,
        Options {
            data: vec![
                "L7_ETMs.tif",
                "olinda_tracts.gpkg",
                "olinda1.shp",
                "olinda1.shx",
                "olinda1.dbf",
                "olinda1.prj",
            ],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let args = json!({"input": "L7_ETMs.tif", "zones": "olinda_tracts.gpkg", "band": 4,
                      "stats": ["count", "mean", "majority"], "semantics": "coverage",
                      "id_field": "CD_GEOCODI", "output": "tracts.csv"});
    let result = call_justified(&server, "zonal_stats", args).await.unwrap();
    assert!(!is_error(&result.result), "{}", text(&result.result));
    let out = structured(&result.result);
    let features = out["features"].as_array().unwrap();
    assert_eq!(features.len(), 470);
    let with_cells = features
        .iter()
        .filter(|f| f["count"].as_f64() > Some(0.0))
        .count();
    assert!(
        with_cells > 400,
        "most tracts overlap the scene: {with_cells}"
    );
    let csv = std::fs::read_to_string(server.path("tracts.csv")).unwrap();
    assert_eq!(csv.lines().count(), 471, "a header and one line per tract");
    assert!(csv.starts_with("fid,id,count,mean,majority"));

    // The census tracts as published: geographic, unknown datum, no EPSG id. The zones are
    // reprojected to the raster's CRS, and crs_datum asks about it (critical: no authority id).
    let moved = call_justified(
        &server,
        "zonal_stats",
        json!({"input": "L7_ETMs.tif", "zones": "olinda1.shp", "band": 4,
               "stats": ["count", "mean", "majority"], "semantics": "coverage"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&moved.result), "{}", text(&moved.result));
    let refused = moved.refused_by();
    assert!(
        refused.iter().any(|(d, _)| d == "crs_datum"),
        "zones in another CRS are a CRS decision: {refused:?}"
    );
    let moved = structured(&moved.result);
    assert_eq!(moved["reprojected"], json!(true));
    assert!(moved["transformation"].is_object());
    // Same tracts, same answer to well under a cell: compare means where both have cells.
    let mut compared = 0;
    for (a, b) in features.iter().zip(moved["features"].as_array().unwrap()) {
        if let (Some(x), Some(y)) = (a["mean"].as_f64(), b["mean"].as_f64()) {
            if a["count"].as_f64() > Some(20.0) {
                assert!((x - y).abs() / x.abs().max(1.0) < 0.02, "{a} vs {b}");
                compared += 1;
            }
        }
    }
    assert!(compared > 300, "{compared}");
}

#[tokio::test]
async fn raster_composite_hand_checked_and_nodata_aware() {
    let server = Server::start(Era::Legacy, Options::default())
        .await
        .unwrap();
    let nd = -9999.0f32;
    write_grid(
        &server.path("a.tif"),
        &[vec![1.0, 2.0, nd], vec![4.0, nd, 6.0]],
    );
    write_grid(
        &server.path("b.tif"),
        &[vec![3.0, nd, nd], vec![1.0, 5.0, 6.0]],
    );
    write_grid(
        &server.path("c.tif"),
        &[vec![2.0, 8.0, nd], vec![nd, 1.0, 9.0]],
    );
    let n = f64::NAN;
    let expected: [(&str, [f64; 6]); 6] = [
        ("max", [3.0, 8.0, n, 4.0, 5.0, 9.0]),
        ("min", [1.0, 2.0, n, 1.0, 1.0, 6.0]),
        ("mean", [2.0, 5.0, n, 2.5, 3.0, 7.0]),
        ("median", [2.0, 5.0, n, 2.5, 3.0, 6.0]),
        ("sum", [6.0, 10.0, n, 5.0, 6.0, 21.0]),
        ("count", [3.0, 2.0, 0.0, 2.0, 2.0, 3.0]),
    ];
    for (statistic, want) in expected {
        let output = format!("{statistic}.tif");
        let result = call_justified(
            &server,
            "raster_composite",
            json!({"inputs": ["a.tif", "b.tif", "c.tif"], "output": output, "statistic": statistic}),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&result.result),
            "{statistic}: {}",
            text(&result.result)
        );
        assert!(
            result.refused_by().iter().all(|(d, _)| d == "aggregation"),
            "aligned grids are no resampling decision: {:?}",
            result.refused_by()
        );
        let got = read(&server.path(&output));
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g.is_nan() && w.is_nan()) || (g - w).abs() < 1e-6,
                "{statistic} cell {i}: {g} vs {w}"
            );
        }
        let report = &structured(&result.result)["report"];
        assert_eq!(report["empty_cells"], json!(1), "{statistic}");
    }
}

#[tokio::test]
async fn raster_composite_of_unlike_grids_needs_a_resampling_method() {
    let server = Server::start(
        Era::Modern,
        Options {
            data: vec!["dem.tif", "L7_ETMs.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let args =
        json!({"inputs": ["dem.tif", "L7_ETMs.tif"], "output": "mix.tif", "statistic": "mean"});
    let missing = server.call("raster_composite", args.clone()).await.unwrap();
    assert!(is_error(&missing), "{}", text(&missing));
    assert!(
        text(&missing).contains("different grids"),
        "{}",
        text(&missing)
    );
    assert!(!server.path("mix.tif").exists());
    let mut with_method = args;
    with_method["resampling"] = json!("average");
    let result = call_justified(&server, "raster_composite", with_method)
        .await
        .unwrap();
    assert!(!is_error(&result.result), "{}", text(&result.result));
    let domains: Vec<String> = result.refused_by().into_iter().map(|(d, _)| d).collect();
    assert!(domains.contains(&"resampling".to_string()), "{domains:?}");
    assert!(domains.contains(&"aggregation".to_string()), "{domains:?}");
    let out = structured(&result.result);
    assert_eq!(out["report"]["grids"], json!("differ"));
    assert_eq!(
        (out["width"].as_u64(), out["height"].as_u64()),
        (Some(111), Some(111))
    );
}
