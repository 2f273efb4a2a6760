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

/// A one-row Float64 GeoTIFF of `values` on 10 m cells in EPSG:32633 (read from an ASCII
/// grid as Float64: the AAIGrid driver reads Float32 by default).
fn write_float64_row(path: &Path, values: &[f64]) {
    let asc = path.with_extension("asc");
    let row: Vec<String> = values.iter().map(|v| format!("{v:e}")).collect();
    std::fs::write(
        &asc,
        format!(
            "ncols {}\nnrows 1\nxllcorner 0\nyllcorner 30\ncellsize 10\n{}\n",
            values.len(),
            row.join(" ")
        ),
    )
    .unwrap();
    let status = std::process::Command::new("gdal_translate")
        .args([
            "-q",
            "-oo",
            "DATATYPE=Float64",
            "-ot",
            "Float64",
            "-a_srs",
            "EPSG:32633",
        ])
        .arg(&asc)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
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

/// Regression (attack round 10, R10-9): a zone drawn 178..182°E x 0..2°N (longitudes past 180,
/// the usual way to keep a Pacific polygon whole) over a global -180..180 raster of 1° cells
/// counted only the 4 cells west of 180. Each cell holds its column number + 1, so the sum
/// names the cells: now 8 cells summing 2 x (359 + 360 + 1 + 2) = 1444, with a note, as the
/// zone split at 180 as a MultiPolygon (no note); a zone at 10..14°E counts its 8 cells
/// (2 x (191 + 192 + 193 + 194) = 1540), no note.
#[tokio::test]
async fn r10_9_zones_past_longitude_180_are_counted_whole() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let asc = server.path("globe.asc");
    let mut body = "ncols 360\nnrows 180\nxllcorner -180\nyllcorner -90\ncellsize 1\n".to_string();
    let row: Vec<String> = (1..=360).map(|c| c.to_string()).collect();
    for _ in 0..180 {
        body.push_str(&row.join(" "));
        body.push('\n');
    }
    std::fs::write(&asc, body).unwrap();
    let globe = server.path("globe.tif");
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-ot", "Float32", "-a_srs", "EPSG:4326"])
        .arg(&asc)
        .arg(&globe)
        .status()
        .unwrap();
    assert!(status.success());
    let square =
        |x0: f64, x1: f64| json!([[[x0, 0.0], [x1, 0.0], [x1, 2.0], [x0, 2.0], [x0, 0.0]]]);
    let zones = [
        (
            "wrapped",
            json!({"type": "Polygon", "coordinates": square(178.0, 182.0)}),
            1444.0,
            true,
        ),
        (
            "split",
            json!({"type": "MultiPolygon",
                   "coordinates": [square(178.0, 180.0), square(-180.0, -178.0)]}),
            1444.0,
            false,
        ),
        (
            "ten",
            json!({"type": "Polygon", "coordinates": square(10.0, 14.0)}),
            1540.0,
            false,
        ),
    ];
    for (name, geometry, sum, noted) in zones {
        let path = server.path(&format!("{name}.geojson"));
        std::fs::write(
            &path,
            json!({"type": "FeatureCollection",
                   "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::4326"}},
                   "features": [{"type": "Feature", "properties": {"name": name},
                                 "geometry": geometry}]})
            .to_string(),
        )
        .unwrap();
        for semantics in ["cell_centre", "coverage"] {
            let result = call_justified(
                &server,
                "zonal_stats",
                json!({"input": globe.display().to_string(),
                       "zones": path.display().to_string(), "stats": ["count", "sum"],
                       "semantics": semantics}),
            )
            .await
            .unwrap();
            assert!(!is_error(&result.result), "{}", text(&result.result));
            let out = structured(&result.result);
            let zone = &out["features"][0];
            assert!(close(&zone["count"], 8.0), "{name} {semantics}: {zone}");
            assert!(close(&zone["sum"], sum), "{name} {semantics}: {zone}");
            let notes = out["notes"].to_string();
            assert_eq!(
                notes.contains("reach past the raster's longitudes"),
                noted,
                "{name}: {notes}"
            );
            // The raster holds every part of a wrapped zone: nothing lies outside it.
            assert!(zone.get("outside_share").is_none(), "{name}: {zone}");
            assert!(!notes.contains("partly outside"), "{name}: {notes}");
        }
    }
}

/// Regression (attack round 15, R15-B21): a zone half outside the raster was answered as if
/// the raster held all of it: `sum` over the half inside, and values even under
/// `nodata_policy: "propagate"`, which nulls a zone touching any nodata cell. On the 4x4 grid
/// of 1..16 (x 0..40, y 0..40), the zone [20, 60] x [10, 30] is half outside: under `ignore`
/// its four cells inside (7, 8, 11, 12) sum 38 with `outside_share` 0.5 and a note; under
/// `propagate` its statistics are null. Its clean twins, a zone inside and a zone whose edge
/// is the raster's, get neither.
#[tokio::test]
async fn r15_b21_a_zone_partly_outside_the_raster_says_so_and_propagates() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let values: Vec<Vec<f32>> = (0..4)
        .map(|r| (0..4).map(|c| (r * 4 + c + 1) as f32).collect())
        .collect();
    write_grid(&server.path("grid.tif"), &values);
    let cases = [
        ("half_out", [20.0, 60.0, 10.0, 30.0], 38.0, Some(0.5)),
        ("inside", [10.0, 30.0, 10.0, 30.0], 34.0, None),
        ("on_edge", [20.0, 40.0, 10.0, 30.0], 38.0, None),
    ];
    for (name, [x0, x1, y0, y1], sum, share) in cases {
        let zone = format!("{name}.geojson");
        write_zone(
            &server.path(&zone),
            &[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]],
        );
        for policy in ["ignore", "propagate"] {
            let result = call_justified(
                &server,
                "zonal_stats",
                json!({"input": "grid.tif", "zones": zone, "stats": ["count", "sum"],
                       "semantics": "cell_centre", "nodata_policy": policy}),
            )
            .await
            .unwrap();
            assert!(!is_error(&result.result), "{}", text(&result.result));
            let out = structured(&result.result);
            let row = &out["features"][0];
            let notes = out["notes"].to_string();
            assert!(close(&row["count"], 4.0), "{name} {policy}: {row}");
            match (share, policy) {
                (Some(share), _) => {
                    assert!(close(&row["outside_share"], share), "{name}: {row}");
                    assert!(notes.contains("partly outside the raster"), "{notes}");
                    if policy == "propagate" {
                        assert!(row["sum"].is_null(), "{name} {policy}: {row}");
                    } else {
                        assert!(close(&row["sum"], sum), "{name} {policy}: {row}");
                    }
                }
                (None, _) => {
                    assert!(close(&row["sum"], sum), "{name} {policy}: {row}");
                    assert!(row.get("outside_share").is_none(), "{name}: {row}");
                    assert!(!notes.contains("outside"), "{name}: {notes}");
                }
            }
        }
    }
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

/// Every statistic of `raster_aggregate` over the valid cells of each block of `rows` (nodata
/// -9999), block by block, by its definition: the quantiles (`med`, `q1`, `q3`) are the valid
/// cell at rank ceil(q * n) of the n sorted, as gdalwarp takes them on whole blocks; `mode` is
/// only asked of fixtures whose blocks have one most frequent value.
fn block_statistic(rows: &[Vec<f32>], factor: usize, statistic: &str) -> Vec<f64> {
    let (height, width) = (rows.len(), rows[0].len());
    let mut out = Vec::new();
    for by in (0..height).step_by(factor) {
        for bx in (0..width).step_by(factor) {
            let mut cells: Vec<f64> = (by..(by + factor).min(height))
                .flat_map(|y| (bx..(bx + factor).min(width)).map(move |x| rows[y][x] as f64))
                .filter(|v| *v != -9999.0)
                .collect();
            cells.sort_by(f64::total_cmp);
            let n = cells.len() as f64;
            let rank = |q: f64| cells[((q * n).ceil() as usize).max(1) - 1];
            out.push(match statistic {
                "average" => cells.iter().sum::<f64>() / n,
                "sum" => cells.iter().sum(),
                "min" => cells[0],
                "max" => cells[cells.len() - 1],
                "rms" => (cells.iter().map(|v| v * v).sum::<f64>() / n).sqrt(),
                "med" => rank(0.5),
                "q1" => rank(0.25),
                "q3" => rank(0.75),
                "mode" => {
                    let count = |v: f64| cells.iter().filter(|c| **c == v).count();
                    let best = cells.iter().map(|v| count(*v)).max().unwrap();
                    let modes: Vec<f64> = cells
                        .iter()
                        .copied()
                        .filter(|v| count(*v) == best)
                        .collect();
                    assert!(
                        modes.iter().all(|m| *m == modes[0]),
                        "fixture: one mode a block"
                    );
                    modes[0]
                }
                other => panic!("{other}"),
            });
        }
    }
    out
}

const BLOCK_STATISTICS: [&str; 9] = [
    "average", "sum", "min", "max", "mode", "med", "q1", "q3", "rms",
];

/// Regression (attack round 9, R9-8): a raster whose size is not a multiple of `factor` has
/// partial blocks along its last row and column, and gdalwarp 3.6 weighs their last row or
/// column as if it repeated up to the block's far side (`average` 23.4 for 23). A 7 x 5 raster
/// by 3: every statistic of every block, partial ones included, is the value over exactly its
/// own valid cells (nodata left out), and the commands reported replay it pixel for pixel.
#[tokio::test]
async fn r9_8_partial_edge_blocks_are_taken_over_their_own_cells() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // Blocks of 3 x 3: columns 0-2, 3-5, 6 (partial); rows 0-2, 3-4 (partial). Each block has
    // one most frequent value (1, 6, 9 / 2, 13, 7); two nodata cells fall in partial blocks.
    let rows: Vec<Vec<f32>> = vec![
        vec![1.0, 1.0, 2.0, 5.0, 6.0, 6.0, 9.0],
        vec![3.0, 1.0, 4.0, 6.0, 7.0, 8.0, 9.0],
        vec![2.0, 5.0, 1.0, 6.0, 9.0, 10.0, 4.0],
        vec![2.0, 2.0, 3.0, -9999.0, 11.0, 12.0, 7.0],
        vec![8.0, 2.0, -9999.0, 13.0, 13.0, 14.0, 7.0],
    ];
    write_grid(&server.path("edge.tif"), &rows);
    for statistic in BLOCK_STATISTICS {
        let output = format!("edge_{statistic}.tif");
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": "edge.tif", "output": output, "factor": [3],
                   "statistic": statistic}),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&done.result),
            "{statistic}: {}",
            text(&done.result)
        );
        let out = structured(&done.result);
        assert_eq!(out["report"]["partial_edge_blocks"], json!(true));
        assert!(
            out["report"]["edge_blocks"]
                .as_str()
                .is_some_and(|s| s.contains("padded to 9 x 6")),
            "{}",
            out["report"]
        );
        let got = read(&server.path(&output));
        let expected = block_statistic(&rows, 3, statistic);
        assert_eq!(got.len(), 6, "{statistic}: 3 x 2 blocks");
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert!(
                (g - e).abs() <= 1e-5 * e.abs().max(1.0),
                "{statistic} block {i}: {g} where its own cells give {e} ({got:?})"
            );
        }
        let reference = server.path(&format!("ref_{output}"));
        crate::oracle::replay(&out["commands"], &server.path(&output), &reference)
            .expect("CLI replay");
        crate::oracle::assert_pixel_identical(&server.path(&output), &reference)
            .expect("pixel-identical to the CLI");
    }
    // gdalwarp alone on the raster (what the tool ran before): the partial blocks' average
    // counts their last row again, (2+2+3 + 2 x (8+2)) / 7 = 3.857 for 17 / 5 = 3.4.
    let status = std::process::Command::new("gdalwarp")
        .args([
            "-q", "-r", "average", "-ts", "3", "2", "-te", "0", "-20", "90", "40",
        ])
        .arg(server.path("edge.tif"))
        .arg(server.path("raw_average.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    let raw = read(&server.path("raw_average.tif"));
    assert!((raw[3] - 27.0 / 7.0).abs() < 1e-5, "{raw:?}");
    assert!((read(&server.path("edge_average.tif"))[3] - 3.4).abs() < 1e-5);
}

/// The clean twin of R9-8: a raster whose size is a multiple of `factor` is one gdalwarp run,
/// byte for byte the file gdalwarp writes (and was written before the fix), every statistic.
#[tokio::test]
async fn r9_8_whole_blocks_stay_as_gdalwarp_writes_them() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // 18 x 18 by 3: 6 x 6 blocks (onto fewer than 6 cells across, the blocks are computed on
    // a widened grid: gdal_10892_small_output_grids_are_aggregated_right, R22-B16).
    let rows: Vec<Vec<f32>> = (0..18)
        .map(|r| (0..18).map(|c| ((r * 7 + c * 3) % 5) as f32).collect())
        .collect();
    write_grid(&server.path("whole.tif"), &rows);
    for statistic in BLOCK_STATISTICS {
        let output = format!("whole_{statistic}.tif");
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": "whole.tif", "output": output, "factor": 3,
                   "statistic": statistic}),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&done.result),
            "{statistic}: {}",
            text(&done.result)
        );
        let out = structured(&done.result);
        assert_eq!(out["report"]["partial_edge_blocks"], json!(false));
        assert!(out["report"].get("edge_blocks").is_none());
        let commands = out["commands"].as_array().unwrap();
        assert_eq!(commands.len(), 1, "{commands:?}");
        assert_eq!(commands[0][0], json!("gdalwarp"));
        // The command before the fix: no `-ovr NONE` (the raster has no overviews).
        let reference = server.path(&format!("ref_{output}"));
        let status = std::process::Command::new("gdalwarp")
            .args(["-q", "-of", "GTiff", "-r", statistic, "-ts", "6", "6"])
            .args(["-te", "0", "-140", "180", "40"])
            .arg(server.path("whole.tif"))
            .arg(&reference)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            std::fs::read(server.path(&output)).unwrap(),
            std::fs::read(&reference).unwrap(),
            "{statistic}: not the bytes gdalwarp writes"
        );
        let expected = block_statistic(&rows, 3, statistic);
        if statistic != "mode" {
            let got = read(&server.path(&output));
            for (g, e) in got.iter().zip(&expected) {
                assert!(
                    (g - e).abs() <= 1e-5 * e.abs().max(1.0),
                    "{statistic}: {got:?}"
                );
            }
        }
    }
}

/// Attack round 13 (observation): `average` into an integer type is rounded by gdalwarp to
/// the nearest whole number (blocks [1, 1, 1, 3] average 1.5 and are written 2 as Int16), and
/// nothing said so. The report now names the rounding (`rounding`); Float32 keeps 1.5 and
/// says nothing, and `max` (a cell's value) is not rounded.
#[tokio::test]
async fn r13_aggregate_average_into_an_integer_type_says_it_rounds() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let rows: Vec<Vec<f32>> = (0..8)
        .map(|r| {
            (0..8)
                .map(|c| if r % 2 == 1 && c % 2 == 1 { 3.0 } else { 1.0 })
                .collect()
        })
        .collect();
    write_grid(&server.path("g.tif"), &rows);
    for (statistic, output_type, value, rounded) in [
        ("average", "Int16", 2.0, true),
        ("average", "Float32", 1.5, false),
        ("max", "Int16", 3.0, false),
    ] {
        let output = format!("{statistic}_{output_type}.tif");
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": "g.tif", "output": output, "factor": 2,
                   "statistic": statistic, "output_type": output_type}),
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{}", text(&done.result));
        let report = &structured(&done.result)["report"];
        let said = report["rounding"].as_str().unwrap_or_default();
        assert_eq!(
            !said.is_empty(),
            rounded,
            "{statistic} {output_type}: {report}"
        );
        if rounded {
            assert!(
                said.contains("Int16") && said.contains("nearest whole number"),
                "{said}"
            );
        }
        assert!(
            read(&server.path(&output)).iter().all(|v| *v == value),
            "{statistic} {output_type}"
        );
    }
}

/// Block aggregation reads the raster's own cells, never its overviews: gdalwarp by default
/// reads the overview closest to the target resolution, so a raster with overviews built by
/// `nearest` was "averaged" into the overview's samples. Twin: the same raster without
/// overviews gives the same output.
#[tokio::test]
async fn r9_8_aggregate_reads_full_resolution_not_overviews() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let rows: Vec<Vec<f32>> = (0..16)
        .map(|r| (0..16).map(|c| ((r * 5 + c * 3) % 9) as f32).collect())
        .collect();
    write_grid(&server.path("ovr.tif"), &rows);
    write_grid(&server.path("plain.tif"), &rows);
    let status = std::process::Command::new("gdaladdo")
        .args(["-q", "-r", "nearest"])
        .arg(server.path("ovr.tif"))
        .args(["2", "4"])
        .status()
        .unwrap();
    assert!(status.success());
    let expected = block_statistic(&rows, 4, "average");
    for input in ["ovr.tif", "plain.tif"] {
        let output = format!("avg_{input}");
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": input, "output": output, "factor": 4, "statistic": "average"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{input}: {}", text(&done.result));
        let got = read(&server.path(&output));
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() < 1e-5, "{input}: {got:?} vs {expected:?}");
        }
    }
}

/// Regression (GDAL 3.6, GDAL issue 10892; noticed while fixing R9-8): gdalwarp's reducing
/// methods go wrong onto grids fewer than 4 cells across, whole blocks included: `average` of
/// a 10 x 10 raster onto 1 cell gave 0, 20 x 20 by 10 erred by 0.1 (a block reads its
/// neighbour's columns). Cells hold 1..n row by row, so a block's mean is known by
/// construction: 1 + 20 x (mean row) + (mean column).
#[tokio::test]
async fn gdal_10892_small_output_grids_are_aggregated_right() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    for (n, factor) in [(10usize, 10usize), (20, 10), (30, 10), (40, 10)] {
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|r| (0..n).map(|c| (r * n + c + 1) as f32).collect())
            .collect();
        let input = format!("seq{n}.tif");
        write_grid(&server.path(&input), &rows);
        let output = format!("seq{n}_avg.tif");
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": input, "output": output, "factor": [factor],
                   "statistic": "average", "output_type": "Float64"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{n}: {}", text(&done.result));
        let k = n / factor;
        let dataset = gdal::Dataset::open(server.path(&output)).unwrap();
        assert_eq!(dataset.raster_size(), (k, k), "{n}");
        let values = dataset
            .rasterband(1)
            .unwrap()
            .read_as::<f64>((0, 0), (k, k), (k, k), None)
            .unwrap()
            .data()
            .to_vec();
        let half = (factor as f64 - 1.0) / 2.0;
        for br in 0..k {
            for bc in 0..k {
                let mean_row = (br * factor) as f64 + half;
                let mean_col = (bc * factor) as f64 + half;
                let expected = 1.0 + n as f64 * mean_row + mean_col;
                let got = values[br * k + bc];
                assert!(
                    (got - expected).abs() < 1e-9,
                    "{n} x {n} by {factor}, block ({br}, {bc}): {got}, expected {expected}"
                );
            }
        }
        let small = structured(&done.result)["report"]["small_grid"].is_string();
        assert_eq!(small, k < 6, "{n}");
    }
}

/// The mean of each of `cols` x `rows` output cells over `input` (`c` x `r` cells holding
/// 1..n row by row), each input cell weighed by the part of it the output cell covers.
fn area_weighted_means((c, r): (usize, usize), (cols, rows): (usize, usize)) -> Vec<f64> {
    let mut out = Vec::new();
    for oy in 0..rows {
        let (y0, y1) = (
            oy as f64 * r as f64 / rows as f64,
            (oy + 1) as f64 * r as f64 / rows as f64,
        );
        for ox in 0..cols {
            let (x0, x1) = (
                ox as f64 * c as f64 / cols as f64,
                (ox + 1) as f64 * c as f64 / cols as f64,
            );
            let (mut sum, mut weight) = (0.0, 0.0);
            for i in 0..r {
                let wy = (y1.min(i as f64 + 1.0) - y0.max(i as f64)).max(0.0);
                for j in 0..c {
                    let wx = (x1.min(j as f64 + 1.0) - x0.max(j as f64)).max(0.0);
                    sum += wx * wy * (i * c + j + 1) as f64;
                    weight += wx * wy;
                }
            }
            out.push(sum / weight);
        }
    }
    out
}

/// Attack round 22, R22-B16 (GDAL 3.6, GDAL issue 10892 and its kin): gdalwarp's `average`,
/// `max`, `rms`, `med`, ... onto a grid narrower than 6 columns wrote 0 (1 column), swapped
/// columns (2 and 3: 20 x 20 onto 2 x 2 wrote 105.5, 95.5 for 95.5, 105.5) or shifted one by
/// `c / 6` (4 columns over 44), through `raster_resample`, `raster_reproject`,
/// `raster_composite` and `raster_aggregate` by 11 onto 4 columns, silently. Each is now
/// computed on a widened grid, said, and equal to the area-weighted means computed here.
#[tokio::test]
async fn r22_b16_narrow_grids_are_warped_right() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let (c, r) = (44usize, 4usize);
    let rows: Vec<Vec<f32>> = (0..r)
        .map(|i| (0..c).map(|j| (i * c + j + 1) as f32).collect())
        .collect();
    write_grid(&server.path("strip.tif"), &rows);
    for cols in [1usize, 2, 3, 4, 5, 6] {
        for tool in ["raster_resample", "raster_reproject"] {
            let output = format!("{tool}_{cols}.tif");
            let mut args = json!({"input": "strip.tif", "output": output,
                                  "size": [cols, 2], "resampling": "average"});
            if tool == "raster_reproject" {
                args["dst_crs"] = json!("EPSG:32633");
            }
            let done = call_justified(&server, tool, args).await.unwrap();
            assert!(
                !is_error(&done.result),
                "{tool} {cols}: {}",
                text(&done.result)
            );
            let got = read(&server.path(&output));
            let expected = area_weighted_means((c, r), (cols, 2));
            assert_eq!(got.len(), expected.len(), "{tool} {cols}");
            for (g, e) in got.iter().zip(&expected) {
                assert!(
                    (g - e).abs() < 1e-3,
                    "{tool} onto {cols} columns: {got:?}, expected {expected:?}"
                );
            }
            let said = text(&done.result).contains("widened");
            assert_eq!(said, cols < 6, "{tool} {cols}: {}", text(&done.result));
        }
    }
    // A reprojection onto 2 x 2 cells: values grow left to right (gdalwarp swapped the two
    // columns) and stay within the data.
    let done = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "strip.tif", "output": "geo_2.tif", "dst_crs": "EPSG:4326",
               "size": [2, 2], "resampling": "average", "nodata": -9999}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let got = read(&server.path("geo_2.tif"));
    assert!(got[0] < got[1] && got[2] < got[3], "{got:?}");
    assert!(got.iter().all(|v| (1.0..=176.0).contains(v)), "{got:?}");
    // max onto one column: the largest cell of each half.
    let done = call_justified(
        &server,
        "raster_resample",
        json!({"input": "strip.tif", "output": "max_1.tif", "size": [1, 2], "resampling": "max"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    assert_eq!(read(&server.path("max_1.tif")), vec![88.0, 176.0]);
    // A composite onto a one-cell inputs[0] reads the warped input's mean, not nodata.
    write_grid(&server.path("one.tif"), &[vec![-5.0]]);
    let done = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["one.tif", "strip.tif"], "output": "mix.tif", "statistic": "max",
               "resampling": "average"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    // one.tif's cell covers x 0..10, y 30..40: strip.tif's first cell, 1.
    assert_eq!(read(&server.path("mix.tif")), vec![1.0]);
    // raster_aggregate by 11 onto 4 columns: widened too.
    let done = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "strip.tif", "output": "agg.tif", "factor": [11, 2],
               "statistic": "average", "output_type": "Float64"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    assert_eq!(
        read(&server.path("agg.tif")),
        area_weighted_means((c, r), (4, 2))
    );
}

/// Attack round 16, R16-B3: `zonal_stats` read every band as Float32, so a Float64 band's
/// 123456789.123 came back 123456792, 16777217 as 16777216, 1e-50 as 0 and 1e300 as an
/// "infinite" cell, with no note, while `raster_sample` read them exactly. Cells are now read
/// as Float64: one zone per cell gives each value back exactly.
#[tokio::test]
async fn r16_b3_zonal_statistics_keep_float64_values() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let values = [123456789.123_f64, 16777217.0, 1e-50, 1e300];
    write_float64_row(&server.path("wide.tif"), &values);
    let features: Vec<Value> = (0..4)
        .map(|i| {
            let x0 = 10.0 * i as f64 + 2.0;
            json!({"type": "Feature", "properties": {"cell": i},
                   "geometry": {"type": "Polygon", "coordinates": [[[x0, 32.0], [x0 + 6.0, 32.0],
                                [x0 + 6.0, 38.0], [x0, 38.0], [x0, 32.0]]]}})
        })
        .collect();
    std::fs::write(
        server.path("cells.geojson"),
        json!({"type": "FeatureCollection",
               "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}},
               "features": features})
        .to_string(),
    )
    .unwrap();
    let result = call_justified(
        &server,
        "zonal_stats",
        json!({"input": "wide.tif", "zones": "cells.geojson", "id_field": "cell",
               "stats": ["count", "sum", "max", "median"], "semantics": "all_touched"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&result.result), "{}", text(&result.result));
    let out = structured(&result.result);
    for (i, want) in values.iter().enumerate() {
        let row = &out["features"][i];
        assert_eq!(row["infinite_cells"], 0, "{row}");
        for stat in ["sum", "max", "median"] {
            assert_eq!(row[stat].as_f64(), Some(*want), "cell {i} {stat}: {row}");
        }
    }
}

/// Attack round 16, R16-B4: `raster_composite` writes Float32 and wrote 16777216 for a Float64
/// input's 16777217 and `inf` for 1e300, with no word. Input values Float32 does not hold are
/// now refused, nothing written, naming raster_calc with Float64; Float64 inputs whose values
/// Float32 holds (the twin) are composited.
#[tokio::test]
async fn r16_b4_a_composite_refuses_values_its_float32_output_would_change() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let float64 = |name: &str, values: &[f64]| {
        write_float64_row(&server.path(&format!("{name}.tif")), values)
    };
    float64("wide_a", &[16777217.0, 1.0]);
    float64("wide_b", &[16777217.0, 2.0]);
    float64("held_a", &[16777216.0, 1.5]);
    float64("held_b", &[3.0, 2.5]);
    let refused = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["wide_a.tif", "wide_b.tif"], "output": "wide.tif", "statistic": "max"}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused.result), "{}", text(&refused.result));
    assert!(
        text(&refused.result).contains("16777217") && text(&refused.result).contains("Float64"),
        "{}",
        text(&refused.result)
    );
    assert!(!server.path("wide.tif").exists());
    let held = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["held_a.tif", "held_b.tif"], "output": "held.tif", "statistic": "max"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&held.result), "{}", text(&held.result));
    assert_eq!(read(&server.path("held.tif")), vec![16777216.0, 2.5]);
}

/// Attack round 21, R21-B12: every Float64 input holding an ordinary decimal (10.1) was
/// refused, `count` too, because Float32 does not hold 10.1 exactly (nor does Float64): a
/// decimal's last digits are Float32's precision. Such inputs compose, to Float32's nearest
/// value, and a count writes counts; R16-B4's whole-part changes are still refused (above).
#[tokio::test]
async fn r21_b12_float64_decimals_compose() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_float64_row(&server.path("a.tif"), &[10.1, 20.3]);
    write_float64_row(&server.path("b.tif"), &[10.2, 20.1]);
    for (statistic, expected) in [
        ("max", vec![10.2f32, 20.3]),
        ("mean", vec![10.15f32, 20.2]),
        ("count", vec![2.0f32, 2.0]),
    ] {
        let output = format!("{statistic}.tif");
        let done = call_justified(
            &server,
            "raster_composite",
            json!({"inputs": ["a.tif", "b.tif"], "output": output, "statistic": statistic}),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&done.result),
            "{statistic}: {}",
            text(&done.result)
        );
        let written: Vec<f32> = read(&server.path(&output))
            .into_iter()
            .map(|v| v as f32)
            .collect();
        for (w, e) in written.iter().zip(&expected) {
            assert!(
                (w - e).abs() < 1e-5,
                "{statistic}: {written:?} vs {expected:?}"
            );
        }
    }
}

/// A GeoTIFF of `bands` bands of `width` x `height` cells of type `T` (band `b` holding
/// `values[b - 1]`) on a 10 m grid in EPSG:32633, band `b` declaring `nodata[b - 1]`.
fn write_bands<T: gdal::raster::GdalType + Copy>(
    path: &Path,
    (width, height): (usize, usize),
    values: &[Vec<T>],
    nodata: &[Option<f64>],
) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver
        .create_with_band_type::<T, _>(path, width, height, values.len())
        .unwrap();
    dataset
        .set_geo_transform(&[0.0, 10.0, 0.0, 40.0, 0.0, -10.0])
        .unwrap();
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    for (index, cells) in values.iter().enumerate() {
        let mut band = dataset.rasterband(index + 1).unwrap();
        band.write(
            (0, 0),
            (width, height),
            &mut gdal::raster::Buffer::new((width, height), cells.clone()),
        )
        .unwrap();
        if let Some(value) = nodata[index] {
            band.set_no_data_value(Some(value)).unwrap();
        }
    }
}

/// The valid values of band `b` of `path`, in order (nodata and NaN left out).
fn valid(path: &Path, b: usize) -> Vec<f64> {
    let dataset = gdal::Dataset::open(path).unwrap();
    let band = dataset.rasterband(b).unwrap();
    let nodata = band.no_data_value();
    let (w, h) = band.size();
    band.read_as::<f64>((0, 0), (w, h), (w, h), None)
        .unwrap()
        .data()
        .iter()
        .copied()
        .filter(|v| !v.is_nan() && Some(*v) != nodata)
        .collect()
}

/// Attack round 17, on the gdalwarp-based block tools:
/// * R17-B12: a Float32 raster with NaN cells and no nodata (as numpy writes missing values):
///   one NaN made a whole block's average nodata. NaN is no value: the blocks (1.5, NaN, 3.5,
///   5.5) and (2.5, 3.5, NaN, NaN) average 3.5 and 3.0, and `raster_resample average` agrees.
/// * R17-B6: a Byte band declaring -1, which marks no cell: the padded copy clamped it to 0,
///   and `min` of (0, 44) came out 44. Now 0, as every other tool reads it.
/// * R17-B14: band 2 declaring 7, band 1 none and holding 7s: one nodata of 7 written for
///   both, band 1's 7 read back as nodata. One value no band holds is declared instead.
#[tokio::test]
async fn r17_b6_b12_b14_block_tools_read_nodata_as_the_other_tools_do() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let nan = f32::NAN;
    write_bands::<f32>(
        &server.path("nan.tif"),
        (4, 2),
        &[vec![1.5, nan, 2.5, 3.5, 3.5, 5.5, nan, nan]],
        &[None],
    );
    for (tool, arguments) in [
        (
            "raster_aggregate",
            json!({"input": "nan.tif", "output": "nan_avg.tif", "factor": [2],
                   "statistic": "average"}),
        ),
        (
            "raster_resample",
            json!({"input": "nan.tif", "output": "nan_res.tif", "resolution": [20, 20],
                   "resampling": "average"}),
        ),
    ] {
        let done = call_justified(&server, tool, arguments.clone())
            .await
            .unwrap();
        assert!(!is_error(&done.result), "{tool}: {}", text(&done.result));
        let output = arguments["output"].as_str().unwrap();
        assert_eq!(valid(&server.path(output), 1), vec![3.5, 3.0], "{tool}");
    }
    write_bands::<u8>(
        &server.path("byte.tif"),
        (2, 1),
        &[vec![0, 44]],
        &[Some(-1.0)],
    );
    let done = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "byte.tif", "output": "byte_min.tif", "factor": [2, 1],
               "statistic": "min"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    assert_eq!(read(&server.path("byte_min.tif")), vec![0.0]);
    // Per-band nodata, as a VRT holds it (a GeoTIFF has one nodata for all bands).
    write_bands::<f32>(&server.path("b1.tif"), (2, 1), &[vec![7.0, 7.0]], &[None]);
    write_bands::<f32>(
        &server.path("b2.tif"),
        (2, 1),
        &[vec![5.0, 7.0]],
        &[Some(7.0)],
    );
    let band = |n: usize, file: &str, nodata: &str| {
        format!(
            r#"<VRTRasterBand dataType="Float32" band="{n}">{nodata}<SimpleSource><SourceFilename relativeToVRT="1">{file}</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>"#
        )
    };
    std::fs::write(
        server.path("bands.vrt"),
        format!(
            r#"<VRTDataset rasterXSize="2" rasterYSize="1"><SRS>EPSG:32633</SRS><GeoTransform>0,10,0,40,0,-10</GeoTransform>{}{}</VRTDataset>"#,
            band(1, "b1.tif", ""),
            band(2, "b2.tif", "<NoDataValue>7</NoDataValue>")
        ),
    )
    .unwrap();
    let done = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "bands.vrt", "output": "bands_avg.tif", "factor": [2, 1],
               "statistic": "average"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    assert_eq!(valid(&server.path("bands_avg.tif"), 1), vec![7.0]);
    assert_eq!(valid(&server.path("bands_avg.tif"), 2), vec![5.0]);
}

/// Attack round 17, R17-B8: an input on another grid that declares no nodata was warped to
/// Float32 before R16-B4's exactness check, so 123456789.123 was written 123456792 past it.
/// The warp keeps Float64: the composite is refused as for an input on the same grid.
#[tokio::test]
async fn r17_b8_a_warped_input_is_checked_at_its_own_precision() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_bands::<f64>(
        &server.path("fine.tif"),
        (2, 2),
        &[vec![1.0, 2.0, 3.0, 4.0]],
        &[None],
    );
    write_bands::<f64>(
        &server.path("coarse.tif"),
        (1, 1),
        &[vec![123_456_789.123]],
        &[None],
    );
    {
        let mut dataset = gdal::Dataset::open_ex(
            server.path("coarse.tif"),
            gdal::DatasetOptions {
                open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
                ..Default::default()
            },
        )
        .unwrap();
        dataset
            .set_geo_transform(&[0.0, 20.0, 0.0, 40.0, 0.0, -20.0])
            .unwrap();
    }
    let refused = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["fine.tif", "coarse.tif"], "output": "max.tif", "statistic": "max",
               "resampling": "nearest"}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused.result), "{}", text(&refused.result));
    assert!(
        text(&refused.result).contains("123456789.123"),
        "{}",
        text(&refused.result)
    );
    assert!(!server.path("max.tif").exists());
}

/// Attack round 17, R17-B10: a `sum` of Float32 cells was written in Float32, whose sums past
/// 2^24 lose units: 16777216 + 1 + 1 + 1 was written 16777220. Such sums are written in
/// Float64, exactly; a Float32 sum within 2^24 stays Float32 (the twin).
#[tokio::test]
async fn r17_b10_float32_sums_past_two_to_the_24_are_widened() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_bands::<f32>(
        &server.path("big.tif"),
        (2, 2),
        &[vec![16_777_216.0, 1.0, 1.0, 1.0]],
        &[None],
    );
    write_bands::<f32>(
        &server.path("small.tif"),
        (2, 2),
        &[vec![1.5, 2.5, 3.5, 4.5]],
        &[None],
    );
    for (input, output, sum, widened) in [
        ("big.tif", "big_sum.tif", 16_777_219.0, true),
        ("small.tif", "small_sum.tif", 12.0, false),
    ] {
        let done = call_justified(
            &server,
            "raster_aggregate",
            json!({"input": input, "output": output, "factor": [2], "statistic": "sum"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{input}: {}", text(&done.result));
        assert_eq!(read(&server.path(output)), vec![sum], "{input}");
        let dataset = gdal::Dataset::open(server.path(output)).unwrap();
        let written = dataset.rasterband(1).unwrap().band_type();
        assert_eq!(
            written == gdal::raster::GdalDataType::Float64,
            widened,
            "{input}: {written:?}"
        );
    }
}

/// Attack round 17, R17-B12's other tools: `raster_reproject` with an interpolating method
/// spread an undeclared NaN over its neighbours, and `raster_overviews average` turned every
/// overview cell a NaN touched into NaN. The reprojection reads NaN as no value (valid cells
/// stay valid); the overviews are refused, naming how to declare NaN, and `nearest` ones run.
#[tokio::test]
async fn r17_b12_nan_cells_in_reprojections_and_overviews() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let nan = f32::NAN;
    let mut cells: Vec<f32> = (0..64).map(|i| 100.0 + i as f32).collect();
    cells[9] = nan;
    write_bands::<f32>(&server.path("nan8.tif"), (8, 8), &[cells.clone()], &[None]);
    // The twin declares NaN as its nodata: the same cells must come out valid.
    write_bands::<f32>(
        &server.path("nan8d.tif"),
        (8, 8),
        &[cells],
        &[Some(f64::NAN)],
    );
    let mut counts = Vec::new();
    for input in ["nan8.tif", "nan8d.tif"] {
        let output = format!("r_{input}");
        let done = call_justified(
            &server,
            "raster_reproject",
            json!({"input": input, "output": output, "dst_crs": "EPSG:32634",
                   "resampling": "bilinear"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&done.result), "{input}: {}", text(&done.result));
        counts.push(valid(&server.path(&output), 1).len());
    }
    assert_eq!(
        counts[0], counts[1],
        "valid cells, undeclared NaN against declared"
    );
    let refused = call_justified(
        &server,
        "raster_overviews",
        json!({"input": "nan8.tif", "output": "ovr.tif", "resampling": "average", "levels": [2]}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused.result), "{}", text(&refused.result));
    assert!(
        text(&refused.result).contains("NaN"),
        "{}",
        text(&refused.result)
    );
    let nearest = call_justified(
        &server,
        "raster_overviews",
        json!({"input": "nan8.tif", "output": "ovr_nearest.tif", "resampling": "nearest",
               "levels": [2]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&nearest.result), "{}", text(&nearest.result));
}

/// Attack round 18, R18-B6: a zone stored as a CURVEPOLYGON counted 0 cells, silently. Its
/// arcs are linearised: a circle of radius 100 m over a 10 m grid holds about π·100²/100 =
/// 314 cells by their centres (316 by construction).
#[tokio::test]
async fn r18_b6_a_curved_zone_counts_its_cells() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_bands::<f32>(
        &server.path("grid.tif"),
        (40, 40),
        &[vec![1.0; 1600]],
        &[None],
    );
    std::fs::write(
        server.path("circle.csv"),
        "id,WKT\n1,\"CURVEPOLYGON(CIRCULARSTRING(105 -155,305 -155,105 -155))\"\n",
    )
    .unwrap();
    let path = |n: &str| server.path(n).display().to_string();
    gdal_mcp_tests::run_program(
        "ogr2ogr",
        &[
            "-a_srs",
            "EPSG:32633",
            "-nlt",
            "GEOMETRY",
            &path("circle.gpkg"),
            &path("circle.csv"),
            "-oo",
            "GEOM_POSSIBLE_NAMES=WKT",
            "-oo",
            "KEEP_GEOM_COLUMNS=NO",
        ],
    );
    let done = call_justified(
        &server,
        "zonal_stats",
        json!({"input": "grid.tif", "zones": "circle.gpkg", "stats": ["count"],
               "semantics": "cell_centre"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let count = structured(&done.result)["features"][0]["count"]
        .as_f64()
        .unwrap_or(0.0);
    assert!((300.0..330.0).contains(&count), "{count}");
}
