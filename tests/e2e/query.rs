//! `raster_sample` and `vector_query` over stdio, on data built here whose answers are known by
//! construction: each raster cell holds 100 x row + column, so the value names the cell.

use gdal::vector::LayerAccess;
use gdal_mcp_tests::{is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::path::Path;

use gdal_mcp_tests::run_program as run;

/// A `width` x `height` Int16 GeoTIFF whose cell (row, column) holds 100 x row + column, with
/// scale 2, offset 1 and nodata -9999 in its last cell; georeferenced by `-a_ullr`, and with
/// `extra` gdal_translate arguments.
fn write_grid(path: &Path, width: usize, height: usize, crs: &str, ullr: [f64; 4], extra: &[&str]) {
    let asc = path.with_extension("asc");
    let mut body = format!(
        "ncols {width}\nnrows {height}\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n"
    );
    for r in 0..height {
        let row: Vec<String> = (0..width)
            .map(|c| {
                if r == height - 1 && c == width - 1 {
                    "-9999".to_string()
                } else {
                    (100 * r + c).to_string()
                }
            })
            .collect();
        body.push_str(&row.join(" "));
        body.push('\n');
    }
    std::fs::write(&asc, body).unwrap();
    let ullr: Vec<String> = ullr.iter().map(|v| v.to_string()).collect();
    let mut args = vec![
        "-q",
        "-ot",
        "Int16",
        "-a_srs",
        crs,
        "-a_scale",
        "2",
        "-a_offset",
        "1",
    ];
    args.push("-a_ullr");
    args.extend(ullr.iter().map(String::as_str));
    args.extend_from_slice(extra);
    let (a, p) = (asc.display().to_string(), path.display().to_string());
    args.push(&a);
    args.push(&p);
    run("gdal_translate", &args);
    std::fs::remove_file(&asc).unwrap();
}

fn point(result: &Value, index: usize) -> &Value {
    &result["points"][index]
}

/// The cell a sampled point fell in, as (row, column).
fn cell(p: &Value) -> (i64, i64) {
    (
        p["row"].as_i64().unwrap_or(-1),
        p["column"].as_i64().unwrap_or(-1),
    )
}

fn close(a: &Value, b: f64, tolerance: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() <= tolerance)
}

fn pair_close(a: &Value, b: [f64; 2], tolerance: f64) -> bool {
    close(&a[0], b[0], tolerance) && close(&a[1], b[1], tolerance)
}

async fn ok(server: &Server, tool: &str, arguments: Value) -> Value {
    let result = server.call(tool, arguments).await.unwrap();
    assert!(!is_error(&result), "{tool}: {}", text(&result));
    structured(&result)
}

async fn refused(server: &Server, tool: &str, arguments: Value) -> (String, String) {
    let result = server.call(tool, arguments).await.unwrap();
    assert!(is_error(&result), "{tool} should fail: {}", text(&result));
    let detail = structured(&result);
    (
        detail["error"]["kind"].as_str().unwrap_or("").to_string(),
        detail["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

#[tokio::test]
async fn raster_sample_names_cells_values_and_edges_in_a_projected_grid() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // 4 x 3 cells of 10 m from (1000, 2000), north-up, PixelIsArea.
    write_grid(
        &server.path("area.tif"),
        4,
        3,
        "EPSG:32633",
        [1000.0, 2000.0, 1040.0, 1970.0],
        &[],
    );
    let out = ok(
        &server,
        "raster_sample",
        json!({"input": "area.tif", "coordinates": [
            [1015.0, 1985.0],  // inside row 1, column 1
            [1020.0, 1995.0],  // on the edge between columns 1 and 2
            [999.0, 1995.0],   // west of the raster
            [1040.0, 1995.0],  // on the raster's east edge
            [1035.0, 1975.0],  // the nodata cell
            [1005.0, 1970.0]   // on the south edge
        ]}),
    )
    .await;
    assert_eq!(out["registration"], "area", "{out}");
    assert_eq!(out["bands"][0]["scale"], json!(2.0));
    let inside = point(&out, 0);
    assert_eq!(cell(inside), (1, 1), "{inside}");
    assert_eq!(inside["values"][0]["raw"], json!(101.0));
    assert_eq!(
        inside["values"][0]["value"],
        json!(203.0),
        "scale and offset apply"
    );
    assert!(pair_close(&inside["cell_centre"], [1015.0, 1985.0], 1e-9));
    assert!(pair_close(&inside["cell_corner"], [1010.0, 1990.0], 1e-9));
    // A point on a vertical cell edge belongs to the cell on its right (half-open cells, as
    // gdallocationinfo): column 2, raw 2.
    let edge = point(&out, 1);
    assert_eq!(cell(edge), (0, 2), "{edge}");
    assert_eq!(edge["values"][0]["raw"], json!(2.0));
    for i in [2, 3, 5] {
        let p = point(&out, i);
        assert_eq!(p["inside"], false, "not clamped: {p}");
        assert!(
            p["row"].is_null() && p["values"].as_array().unwrap().is_empty(),
            "{p}"
        );
    }
    assert_eq!(out["outside"], 3);
    let nodata = point(&out, 4);
    assert_eq!(cell(nodata), (2, 3));
    assert_eq!(nodata["values"][0]["nodata"], true, "{nodata}");
    assert!(nodata["values"][0]["value"].is_null(), "{nodata}");
}

#[tokio::test]
async fn raster_sample_respects_pixel_is_point_registration() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // The same numbers as tie point: for PixelIsArea (1000, 2000) is the corner of cell (0, 0);
    // for PixelIsPoint it is that cell's centre, so the cell spans 995..1005 x 1995..2005.
    // GTIFF_POINT_GEO_IGNORE makes gdal_translate write the tie point unshifted.
    write_grid(
        &server.path("area.tif"),
        4,
        3,
        "EPSG:32633",
        [1000.0, 2000.0, 1040.0, 1970.0],
        &[],
    );
    write_grid(
        &server.path("point.tif"),
        4,
        3,
        "EPSG:32633",
        [1000.0, 2000.0, 1040.0, 1970.0],
        &[
            "-mo",
            "AREA_OR_POINT=Point",
            "--config",
            "GTIFF_POINT_GEO_IGNORE",
            "YES",
        ],
    );
    let coordinates = json!([[996.0, 2004.0], [1000.0, 2000.0], [1006.0, 1999.0]]);
    let point_out = ok(
        &server,
        "raster_sample",
        json!({"input": "point.tif", "coordinates": coordinates}),
    )
    .await;
    assert_eq!(point_out["registration"], "point", "{point_out}");
    assert_eq!(
        point_out["geotransform"],
        json!([995.0, 10.0, 0.0, 2005.0, 0.0, -10.0]),
        "GDAL reads a PixelIsPoint tie point as a cell centre"
    );
    assert_eq!(cell(point(&point_out, 0)), (0, 0));
    assert_eq!(cell(point(&point_out, 1)), (0, 0));
    assert!(pair_close(
        &point(&point_out, 1)["cell_centre"],
        [1000.0, 2000.0],
        1e-9
    ));
    assert_eq!(cell(point(&point_out, 2)), (0, 1));
    // The PixelIsArea twin: the first point is outside, the third in column 0.
    let area_out = ok(
        &server,
        "raster_sample",
        json!({"input": "area.tif", "coordinates": coordinates}),
    )
    .await;
    assert_eq!(point(&area_out, 0)["inside"], false, "{area_out}");
    assert_eq!(cell(point(&area_out, 1)), (0, 0));
    assert_eq!(cell(point(&area_out, 2)), (0, 0));
}

#[tokio::test]
async fn raster_sample_south_up_geographic_and_other_crs() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // South-up: row 0 is the southernmost (y 1970..1980).
    write_grid(
        &server.path("south.tif"),
        4,
        3,
        "EPSG:32633",
        [1000.0, 1970.0, 1040.0, 2000.0],
        &[],
    );
    let south = ok(
        &server,
        "raster_sample",
        json!({"input": "south.tif", "coordinates": [[1015.0, 1975.0], [1015.0, 1995.0]]}),
    )
    .await;
    assert_eq!(cell(point(&south, 0)), (0, 1), "{south}");
    assert_eq!(point(&south, 0)["values"][0]["raw"], json!(1.0));
    assert!(pair_close(
        &point(&south, 0)["cell_corner"],
        [1010.0, 1970.0],
        1e-9
    ));
    assert!(pair_close(
        &point(&south, 0)["cell_centre"],
        [1015.0, 1975.0],
        1e-9
    ));
    assert_eq!(cell(point(&south, 1)), (2, 1));

    // Geographic, 0.1° cells from (10 E, 50 N): x is longitude. 10.3 is a cell edge whose
    // pixel coordinate is 2.9999999999999964 in floating point: it belongs to column 3.
    write_grid(
        &server.path("geo.tif"),
        5,
        5,
        "EPSG:4326",
        [10.0, 50.0, 10.5, 49.5],
        &[],
    );
    let geo = ok(
        &server,
        "raster_sample",
        json!({"input": "geo.tif", "coordinates": [[10.3, 49.85], [49.85, 10.3]]}),
    )
    .await;
    assert_eq!(cell(point(&geo, 0)), (1, 3), "{geo}");
    assert_eq!(point(&geo, 0)["values"][0]["raw"], json!(103.0));
    assert_eq!(
        point(&geo, 1)["inside"],
        false,
        "lat/lon order is not read as x/y"
    );

    // Points in another CRS: the lon/lat of a UTM cell centre lands in that cell.
    write_grid(
        &server.path("utm.tif"),
        4,
        3,
        "EPSG:32633",
        [500000.0, 5000000.0, 500040.0, 4999970.0],
        &[],
    );
    let mut utm = gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap();
    let mut wgs84 = gdal::spatial_ref::SpatialRef::from_epsg(4326).unwrap();
    for srs in [&mut utm, &mut wgs84] {
        srs.set_axis_mapping_strategy(gdal::spatial_ref::AxisMappingStrategy::TraditionalGisOrder);
    }
    let to_lonlat = gdal::spatial_ref::CoordTransform::new(&utm, &wgs84).unwrap();
    let (mut xs, mut ys, mut zs) = ([500025.0], [4999975.0], [0.0]);
    to_lonlat
        .transform_coords(&mut xs, &mut ys, &mut zs)
        .unwrap();
    let other = ok(
        &server,
        "raster_sample",
        json!({"input": "utm.tif", "crs": "EPSG:4326", "coordinates": [[xs[0], ys[0]]]}),
    )
    .await;
    let p = point(&other, 0);
    assert_eq!(cell(p), (2, 2), "{other}");
    assert!(pair_close(&p["at"], [500025.0, 4999975.0], 1e-3), "{p}");
    assert!(pair_close(&p["given"], [xs[0], ys[0]], 1e-12));
    assert_eq!(other["points_crs"]["id"], "EPSG:4326");
    assert!(
        other["transformation"]["used"]["name"].is_string(),
        "{other}"
    );

    // Its twin in NAD27, for which PROJ has no operation over Europe but a ballpark: said.
    let ballpark = ok(
        &server,
        "raster_sample",
        json!({"input": "utm.tif", "crs": "EPSG:4267", "coordinates": [[xs[0], ys[0]]]}),
    )
    .await;
    assert_eq!(
        ballpark["transformation"]["used"]["ballpark"], true,
        "{ballpark}"
    );
    assert!(
        ballpark["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("ballpark")),
        "{ballpark}"
    );

    // A point layer (GeoJSON, WGS 84) gives the same cell.
    std::fs::write(
        server.path("pts.geojson"),
        json!({"type": "FeatureCollection", "features": [
            {"type": "Feature", "properties": {"id": "A"},
             "geometry": {"type": "Point", "coordinates": [xs[0], ys[0]]}}]})
        .to_string(),
    )
    .unwrap();
    let layer = ok(
        &server,
        "raster_sample",
        json!({"input": "utm.tif", "points": "pts.geojson"}),
    )
    .await;
    assert_eq!(cell(point(&layer, 0)), (2, 2), "{layer}");
}

#[tokio::test]
async fn raster_sample_refuses_what_it_cannot_answer_and_stays_confined() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_grid(
        &server.path("g.tif"),
        2,
        2,
        "EPSG:32633",
        [0.0, 20.0, 20.0, 0.0],
        &[],
    );
    let (kind, message) = refused(
        &server,
        "raster_sample",
        json!({"input": "/etc/hostname", "coordinates": [[0.0, 0.0]]}),
    )
    .await;
    assert_eq!(kind, "path", "{message}");
    let (kind, _) = refused(
        &server,
        "raster_sample",
        json!({"input": "g.tif", "points": "../outside.geojson"}),
    )
    .await;
    assert_eq!(kind, "path");
    let (kind, message) = refused(
        &server,
        "raster_sample",
        json!({"input": "g.tif", "coordinates": [[5.0, 5.0]], "crs": "/etc/passwd"}),
    )
    .await;
    assert_eq!(kind, "invalid_arguments", "{message}");
    let many: Vec<[f64; 2]> = vec![[5.0, 5.0]; 1001];
    let (kind, message) = refused(
        &server,
        "raster_sample",
        json!({"input": "g.tif", "coordinates": many}),
    )
    .await;
    assert!(
        kind == "invalid_arguments" && message.contains("1000"),
        "{message}"
    );
    let (_, message) = refused(
        &server,
        "raster_sample",
        json!({"input": "g.tif", "coordinates": [[5.0, 5.0]], "bands": [2]}),
    )
    .await;
    assert!(message.contains("band 2"), "{message}");
}

/// A GeoPackage with `parcels` (EPSG:32633 squares) and `stations` (WGS 84 points), and a
/// shapefile copy of the parcels.
fn write_layers(server: &Server) {
    let squares = [
        ("P-1", "North", 1.5, 1, 0.0),
        ("P-2", "North", 4.0, 2, 100.0),
        ("P-7", "South", 2.5, 3, 200.0),
        ("P-8", "South", 9.0, 4, 300.0),
        ("Q-1", "East", -1.0, 5, 400.0),
    ];
    let features: Vec<Value> = squares
        .iter()
        .map(|(code, district, value, n, x)| {
            let ring = json!([
                [x, 0.0],
                [x + 100.0, 0.0],
                [x + 100.0, 100.0],
                [x, 100.0],
                [x, 0.0]
            ]);
            json!({"type": "Feature",
                   "properties": {"code": code, "district": district, "value": value, "n": n},
                   "geometry": {"type": "Polygon", "coordinates": [ring]}})
        })
        .collect();
    let parcels = server.path("parcels.geojson");
    std::fs::write(
        &parcels,
        json!({"type": "FeatureCollection",
               "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}},
               "features": features})
        .to_string(),
    )
    .unwrap();
    let stations = server.path("stations.geojson");
    std::fs::write(
        &stations,
        json!({"type": "FeatureCollection", "features": [
            {"type": "Feature", "properties": {"code": "ST-1", "name": "Harbour"},
             "geometry": {"type": "Point", "coordinates": [15.25, 45.5]}},
            {"type": "Feature", "properties": {"code": "ST-2", "name": null},
             "geometry": {"type": "Point", "coordinates": [16.0, 46.0]}},
            {"type": "Feature", "properties": {"code": "BOW", "name": "bowtie"},
             "geometry": {"type": "Polygon", "coordinates":
                [[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]]}},
            {"type": "Feature", "properties": {"code": "CELL", "name": "degree"},
             "geometry": {"type": "Polygon", "coordinates":
                [[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]]}}]})
        .to_string(),
    )
    .unwrap();
    let gpkg = server.path("land.gpkg").display().to_string();
    let (p, s) = (
        parcels.display().to_string(),
        stations.display().to_string(),
    );
    run("ogr2ogr", &["-f", "GPKG", &gpkg, &p, "-nln", "parcels"]);
    run(
        "ogr2ogr",
        &["-update", "-nlt", "GEOMETRY", &gpkg, &s, "-nln", "stations"],
    );
    let shp = server.path("parcels.shp").display().to_string();
    run("ogr2ogr", &["-f", "ESRI Shapefile", &shp, &p]);
}

fn codes(out: &Value) -> Vec<String> {
    out["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["attributes"]["code"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn vector_query_answers_attribute_questions_on_geopackage_and_shapefile() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_layers(&server);
    // "Which district holds parcel P-7?"
    let p7 = ok(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "parcels", "where": "code = 'P-7'",
               "fields": ["district"], "measures": ["area", "centroid"]}),
    )
    .await;
    assert_eq!(p7["matched"], 1, "{p7}");
    let feature = &p7["features"][0];
    assert_eq!(feature["attributes"], json!({"district": "South"}));
    assert!(close(&feature["area"], 10_000.0, 1e-6), "{feature}");
    assert!(
        pair_close(&feature["centroid"], [250.0, 50.0], 1e-9),
        "{feature}"
    );
    assert_eq!(p7["measures"]["method"], "planar");
    assert_eq!(p7["measures"]["area_unit"], "m²");

    // "What is the latitude of station ST-1?" Centroids are [lon, lat].
    let st1 = ok(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "stations", "where": "code = 'ST-1'",
               "measures": ["centroid"]}),
    )
    .await;
    assert!(
        pair_close(&st1["features"][0]["centroid"], [15.25, 45.5], 1e-12),
        "{st1}"
    );
    assert_eq!(st1["features"][0]["attributes"]["name"], "Harbour");
    // A 1° x 1° cell at the equator has a geodesic area of 12,308.78 km² on WGS 84.
    let degree = ok(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "stations", "where": "code = 'CELL'",
               "measures": ["area"]}),
    )
    .await;
    assert!(
        close(&degree["features"][0]["area"], 12_308_778_361.0, 5.0e4),
        "{degree}"
    );
    assert_eq!(degree["measures"]["method"], "geodesic");
    // A self-crossing polygon has no meaningful area: none is given, and the note says why.
    let bow = ok(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "stations", "where": "code = 'BOW'",
               "measures": ["area"]}),
    )
    .await;
    let bow = &bow["features"][0];
    assert!(bow.get("area").is_none(), "{bow}");
    assert!(
        bow["note"].as_str().is_some_and(|n| n.contains("invalid")),
        "{bow}"
    );
    let nulls = ok(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "stations", "where": "name IS NULL"}),
    )
    .await;
    assert_eq!(codes(&nulls), vec!["ST-2"]);

    // Order, limit and truncation, the same on both formats.
    for (input, layer) in [
        ("land.gpkg", json!("parcels")),
        ("parcels.shp", Value::Null),
    ] {
        let top = ok(
            &server,
            "vector_query",
            json!({"input": input, "layer": layer, "where": "code LIKE 'P-%' AND value >= 2",
                   "order_by": "value DESC", "limit": 2}),
        )
        .await;
        assert_eq!(codes(&top), vec!["P-8", "P-2"], "{input}: {top}");
        assert_eq!(top["matched"], 3, "{input}");
        assert_eq!(top["truncated"], true);
        assert_eq!(top["truncated_by"], "limit");
        let districts = ok(
            &server,
            "vector_query",
            json!({"input": input, "layer": layer,
                   "where": "district IN ('North', 'East') AND NOT n = 2",
                   "order_by": "n"}),
        )
        .await;
        assert_eq!(
            codes(&districts),
            vec!["P-1", "Q-1"],
            "{input}: {districts}"
        );
        assert_eq!(districts["truncated"], false);
    }
}

fn digest(paths: &[std::path::PathBuf]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[tokio::test]
async fn vector_query_refuses_injection_and_leaves_the_files_byte_identical() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_layers(&server);
    let files: Vec<std::path::PathBuf> = ["land.gpkg", "parcels.shp", "parcels.dbf", "parcels.shx"]
        .iter()
        .map(|f| server.path(f))
        .collect();
    let before = digest(&files);
    let attempts = [
        ("1=1; DROP TABLE parcels", "`;` is not allowed"),
        ("code IN (SELECT name FROM sqlite_master)", "subqueries"),
        ("load_extension('/tmp/evil.so') = 1", "function calls"),
        ("code = 'x' UNION SELECT 1", "UNION is not part"),
        ("code = 7", "different types"),
        ("owner = 'x'", "no field named \"owner\""),
    ];
    for input in ["land.gpkg", "parcels.shp"] {
        let layer = if input == "land.gpkg" {
            json!("parcels")
        } else {
            Value::Null
        };
        for (filter, why) in attempts {
            let (kind, message) = refused(
                &server,
                "vector_query",
                json!({"input": input, "layer": layer, "where": filter}),
            )
            .await;
            assert_eq!(kind, "invalid_arguments", "{filter}: {message}");
            assert!(message.contains(why), "{filter}: {message}");
        }
    }
    let long = "a".repeat(2001);
    let (_, message) = refused(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "parcels", "where": long}),
    )
    .await;
    assert!(message.contains("at most 2000"), "{message}");
    let (kind, _) = refused(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "parcels", "limit": 100000}),
    )
    .await;
    assert_eq!(kind, "invalid_arguments");
    let (kind, _) = refused(&server, "vector_query", json!({"input": "../land.gpkg"})).await;
    assert_eq!(kind, "path");
    assert_eq!(digest(&files), before, "the datasets are byte-identical");
    // The layers are still whole.
    let all = ok(
        &server,
        "vector_query",
        json!({"input": "land.gpkg", "layer": "parcels", "fields": ["code"]}),
    )
    .await;
    assert_eq!(all["matched"], 5);
}

/// Regression (attack round 10, R10-10): `vector_query`'s lon/lat centroid was computed in one
/// azimuthal equidistant frame centred on the feature's envelope, so a 2° square split at ±180°
/// the RFC 7946 way (envelope -180..180) came out at (180, 14.96), 1,552 km from its centre.
/// Each part's centroid is now found in its own frame and the parts' mean direction taken:
/// the split square is centred on (180, 1) within 0.005° of latitude, like its unsplit twin
/// (written 179..181, one frame as before); two squares 200° apart get their mean direction on
/// the 180° side with a note that it lies outside both.
#[tokio::test]
async fn r10_10_centroids_of_features_split_at_the_antimeridian() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let square = |x: f64, y: f64, w: f64| {
        json!([[[x, y], [x + w, y], [x + w, y + 2.0], [x, y + 2.0], [x, y]]])
    };
    let features = json!({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"code": "split"},
         "geometry": {"type": "MultiPolygon",
                      "coordinates": [square(179.0, 0.0, 1.0), square(-180.0, 0.0, 1.0)]}},
        {"type": "Feature", "properties": {"code": "whole"},
         "geometry": {"type": "Polygon", "coordinates": square(179.0, 0.0, 2.0)}},
        {"type": "Feature", "properties": {"code": "apart"},
         "geometry": {"type": "MultiPolygon",
                      "coordinates": [square(-100.0, 0.0, 1.0), square(100.0, 0.0, 1.0)]}}]});
    let path = server.path("pacific.geojson");
    std::fs::write(&path, features.to_string()).unwrap();
    let out = ok(
        &server,
        "vector_query",
        json!({"input": path.display().to_string(), "fields": ["code"],
               "measures": ["centroid"]}),
    )
    .await;
    let features = out["features"].as_array().unwrap();
    for feature in &features[..2] {
        let c = &feature["centroid"];
        let lon = c[0].as_f64().unwrap();
        assert!((lon.abs() - 180.0).abs() < 1e-9, "{feature}");
        assert!(close(&c[1], 1.0, 5e-3), "{feature}");
        assert!(feature.get("note").is_none(), "{feature}");
    }
    let apart = &features[2];
    assert!(close(&apart["centroid"][0], -179.5, 1e-9), "{apart}");
    assert!(
        apart["note"]
            .as_str()
            .is_some_and(|n| n.contains("outside all of them")),
        "{apart}"
    );
}

/// Attack round 14, R14-B21: points given as `[latitude, longitude]` with `crs: EPSG:4326`
/// (whose own axis order is latitude first) fell outside and were reported as outside, with
/// no hint that the swapped pairs lie inside. Now each such point's note names the swapped
/// pair, and a warning counts them; the twins stay silent: pairs given the right way round,
/// and a point outside whose swap is outside too.
#[tokio::test]
async fn r14_b21_swapped_latitude_longitude_pairs_get_a_hint_and_right_ones_do_not() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // 0.1° cells from 10 E to 10.4 E, 45.3 N down to 45 N; projected twin in UTM 32N.
    write_grid(
        &server.path("geo.tif"),
        4,
        3,
        "EPSG:4326",
        [10.0, 45.3, 10.4, 45.0],
        &[],
    );
    write_grid(
        &server.path("utm.tif"),
        4,
        3,
        "EPSG:32632",
        [580_000.0, 5_020_000.0, 600_000.0, 4_990_000.0],
        &[],
    );
    let swapped_hint = |out: &Value| {
        out["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("swapped"))
    };
    for input in ["geo.tif", "utm.tif"] {
        let swapped = ok(
            &server,
            "raster_sample",
            json!({"input": input, "coordinates": [[45.15, 10.15]], "crs": "EPSG:4326"}),
        )
        .await;
        assert_eq!(swapped["outside"], json!(1), "{input}: {swapped}");
        assert!(swapped_hint(&swapped), "{input}: {swapped}");
        assert!(
            point(&swapped, 0)["note"]
                .as_str()
                .unwrap()
                .contains("[10.15, 45.15]"),
            "{input}: {swapped}"
        );
        // The twins: the right order samples; a point outside both ways gets no hint.
        let right = ok(
            &server,
            "raster_sample",
            json!({"input": input, "coordinates": [[10.15, 45.15], [12.0, 45.15]],
                   "crs": "EPSG:4326"}),
        )
        .await;
        assert_eq!(right["outside"], json!(1), "{input}: {right}");
        assert_eq!(point(&right, 0)["inside"], json!(true), "{input}: {right}");
        assert!(!swapped_hint(&right), "{input}: {right}");
        assert!(
            !point(&right, 1)["note"]
                .as_str()
                .unwrap()
                .contains("swapped"),
            "{input}: {right}"
        );
    }
}

/// Attack round 15, R15-B3: `vector_query` measured a projected layer in its own plane
/// whatever its distortion: a 1° cell at 60-61° N, 10-11° E in Web Mercator was answered
/// 25,167,701,628 "m²" (x4.11) with no note. A plane that distorts the data by more than 1 %
/// is now measured on the ellipsoid (6,123,140,859 m², pyproj's `Geod` on the densified ring)
/// and the result says why; the same cell in UTM 32N stays planar (6,119,299,653 m²).
#[tokio::test]
async fn r15_b3_query_areas_in_a_distorting_plane_are_measured_on_the_ellipsoid() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let cell = json!({"type": "FeatureCollection", "features": [{"type": "Feature",
        "properties": {"name": "cell"}, "geometry": {"type": "Polygon", "coordinates":
        [[[10.0, 60.0], [11.0, 60.0], [11.0, 61.0], [10.0, 61.0], [10.0, 60.0]]]}}]});
    std::fs::write(server.path("cell.geojson"), cell.to_string()).unwrap();
    for (crs, name) in [("EPSG:3857", "merc.gpkg"), ("EPSG:32632", "utm.gpkg")] {
        let to = server.path(name);
        let from = server.path("cell.geojson");
        run(
            "ogr2ogr",
            &[
                "-t_srs",
                crs,
                "-segmentize",
                "0.01",
                to.to_str().unwrap(),
                from.to_str().unwrap(),
            ],
        );
    }
    let area = |out: &Value| out["features"][0]["area"].as_f64().unwrap();
    let merc = ok(
        &server,
        "vector_query",
        json!({"input": "merc.gpkg", "measures": ["area"]}),
    )
    .await;
    assert_eq!(merc["measures"]["method"], "geodesic", "{merc}");
    assert!(
        merc["measures"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("distorts")),
        "{merc}"
    );
    assert!((area(&merc) / 6_123_140_859.0 - 1.0).abs() < 2e-3, "{merc}");
    let utm = ok(
        &server,
        "vector_query",
        json!({"input": "utm.gpkg", "measures": ["area"]}),
    )
    .await;
    assert_eq!(utm["measures"]["method"], "planar", "{utm}");
    assert!((area(&utm) / 6_119_299_653.0 - 1.0).abs() < 2e-3, "{utm}");
}

/// Attack round 15, R15-C9: Integer64 values beyond ±2^53 went out as JSON numbers, which
/// JavaScript hosts (the TypeScript SDK's `JSON.parse`) read as the nearest double:
/// 9007199254740993 as ...992, another plausible id, and a `where` built from it matched
/// nothing. They now go out as their digits in a string, which a `where` takes back; a small
/// Integer64 stays a number.
#[tokio::test]
async fn r15_c9_integers_beyond_two_to_the_53_reach_hosts_exactly() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(
        server.path("ids.geojson"),
        r#"{"type":"FeatureCollection","features":[
          {"type":"Feature","properties":{"id64":9007199254740993},"geometry":{"type":"Point","coordinates":[10,45]}},
          {"type":"Feature","properties":{"id64":42},"geometry":{"type":"Point","coordinates":[11,45]}}]}"#,
    )
    .unwrap();
    let (to, from) = (server.path("ids.gpkg"), server.path("ids.geojson"));
    run(
        "ogr2ogr",
        &["-f", "GPKG", to.to_str().unwrap(), from.to_str().unwrap()],
    );
    let all = ok(&server, "vector_query", json!({"input": "ids.gpkg"})).await;
    let values: Vec<&Value> = all["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["attributes"]["id64"])
        .collect();
    assert_eq!(values, [&json!("9007199254740993"), &json!(42)], "{all}");
    let back = ok(
        &server,
        "vector_query",
        json!({"input": "ids.gpkg", "where": "id64 = 9007199254740993"}),
    )
    .await;
    assert_eq!(back["matched"], json!(1), "{back}");
}

/// `<stem>.gpkg` from the CSV text `csv`, its column types detected by ogr2ogr
/// (`AUTODETECT_TYPE`), as a user would make it.
fn table_geopackage(server: &Server, stem: &str, csv: &str) {
    let from = server.path(&format!("{stem}.csv"));
    std::fs::write(&from, csv).unwrap();
    let to = server.path(&format!("{stem}.gpkg"));
    run(
        "ogr2ogr",
        &[
            "-f",
            "GPKG",
            "-oo",
            "AUTODETECT_TYPE=YES",
            to.to_str().unwrap(),
            from.to_str().unwrap(),
        ],
    );
}

/// Attack round 15, R15-B2: DateTime values were compared as the text
/// `%Y-%m-%dT%H:%M:%S%.f%:z`, in which a zone-less value got `+00:00` and milliseconds were
/// dropped: `t = '2020-01-01T12:00:00'` matched nothing, `t = '...Z'` nothing, and times in
/// other zones were ordered by their wall clocks. Values now keep their zone (or none), a
/// zone-less literal against zoned values is read both as UTC and in each value's zone (and
/// the call refused when the readings disagree), zoned values order as instants.
#[tokio::test]
async fn r15_b2_date_times_compare_as_instants_or_wall_clocks_never_as_invented_zones() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    table_geopackage(
        &server,
        "t",
        "id,t\n1,2020-01-01T23:00:00-05:00\n2,2020-01-02T03:00:00Z\n3,2020-01-02T01:00:00+02:00\n5,2020-01-01T12:00:00\n6,2020-06-01T12:00:00.900Z\n",
    );
    let ids = |out: &Value| -> Vec<i64> {
        out["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["attributes"]["id"].as_i64().unwrap())
            .collect()
    };
    for (filter, want) in [
        ("t = '2020-01-01T12:00:00'", vec![5]),
        ("t = '2020-01-02T03:00:00Z'", vec![2]),
        ("t = '2020-01-02T05:00:00+02:00'", vec![2]),
        ("t > '2020-01-02T00:00:00Z'", vec![1, 2, 6]),
    ] {
        let out = ok(
            &server,
            "vector_query",
            json!({"input": "t.gpkg", "where": filter}),
        )
        .await;
        assert_eq!(ids(&out), want, "{filter}: {out}");
    }
    let all = ok(
        &server,
        "vector_query",
        json!({"input": "t.gpkg", "where": "id = 5 OR id = 6"}),
    )
    .await;
    let times: Vec<&Value> = all["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["attributes"]["t"])
        .collect();
    assert_eq!(
        times,
        [
            &json!("2020-01-01T12:00:00.000"),
            &json!("2020-06-01T12:00:00.900Z")
        ],
        "{all}"
    );
    // A zone-less literal within a day of a zoned value: the two readings disagree.
    let (_, message) = refused(
        &server,
        "vector_query",
        json!({"input": "t.gpkg", "where": "t < '2020-01-02T02:00:00'"}),
    )
    .await;
    assert!(message.contains("time zone"), "{message}");
}

/// Attack round 22, R22-B3: a wall-clock time against a `Z` literal was read as UTC only (its
/// two readings, UTC and the literal's zone, were one), so `t < '2024-01-01T06:00:00Z'`
/// answered a layer whose zoned value carries +05:00 as if its zone-less 06:00 were UTC, while
/// the same instant written `+05:00` was refused. The zone-less values are now read in every
/// zone the data and the query carry: a comparison that a reading in +05:00 turns is refused,
/// naming the zone; one far from every reading is answered.
#[tokio::test]
async fn r22_b3_wall_clock_times_against_a_utc_literal_are_read_in_the_datas_zones() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    table_geopackage(
        &server,
        "w",
        "id,t\n1,2024-01-01T03:00:00\n2,2024-01-01T10:00:00+05:00\n3,2024-01-01T06:00:00\n",
    );
    for literal in [
        "2024-01-01T06:00:00Z",
        "2024-01-01T06:00:00+00:00",
        "2024-01-01T11:00:00+05:00",
    ] {
        let (_, message) = refused(
            &server,
            "vector_query",
            json!({"input": "w.gpkg", "where": format!("t < '{literal}'")}),
        )
        .await;
        assert!(message.contains("+05:00"), "{literal}: {message}");
    }
    // Far from every reading: all three are before, whatever zone the wall clocks are in.
    let out = ok(
        &server,
        "vector_query",
        json!({"input": "w.gpkg", "where": "t < '2024-01-01T20:00:00Z'"}),
    )
    .await;
    assert_eq!(out["matched"], json!(3), "{out}");
    // A zone-less literal compares wall clocks with wall clocks: 03:00 only (06:00 is not
    // before 06:00, and the zoned value against it is read both ways: 05:00Z or 10:00).
    let (_, message) = refused(
        &server,
        "vector_query",
        json!({"input": "w.gpkg", "where": "t < '2024-01-01T06:00:00'"}),
    )
    .await;
    assert!(message.contains("time zone"), "{message}");
}

/// A GeoPackage `<stem>.gpkg` of one point per entry of `properties` (at (i, i)), written by
/// ogr2ogr from GeoJSON as a user would make it.
fn points_geopackage(server: &Server, stem: &str, properties: Vec<Value>) -> std::path::PathBuf {
    let features: Vec<Value> = properties
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            json!({"type": "Feature", "properties": p,
                   "geometry": {"type": "Point", "coordinates": [i + 1, i + 1]}})
        })
        .collect();
    let geojson = server.path(&format!("{stem}.geojson"));
    std::fs::write(
        &geojson,
        json!({"type": "FeatureCollection", "features": features}).to_string(),
    )
    .unwrap();
    let gpkg = server.path(&format!("{stem}.gpkg"));
    run(
        "ogr2ogr",
        &[
            "-f",
            "GPKG",
            gpkg.to_str().unwrap(),
            geojson.to_str().unwrap(),
        ],
    );
    gpkg
}

/// The `v_sum` column of a joined output, in feature order.
fn joined_sums(path: &Path) -> Vec<Option<f64>> {
    let joined = gdal::Dataset::open(path).unwrap();
    let mut layer = joined.layer(0).unwrap();
    layer
        .features()
        .map(|f| f.field_as_double(f.field_index("v_sum").unwrap()).unwrap())
        .collect()
}

/// Attack round 15, R15-B1: a GeoPackage made from GeoJSON with an integer `id` keeps it as
/// its primary key column `id`, which OGR lists as no field: `vector_info` did not name it,
/// `vector_query where "id = 2"` was refused "no field named", and `vector_join key "id"`
/// "must be a field of both layers". `vector_info` now names the id column, a query filters,
/// orders and shows it, and a join on it matches; the GeoPackage's usual `fid` column is not
/// shown twice.
#[tokio::test]
async fn r15_b1_a_geopackage_id_column_is_a_key_like_any_field() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    points_geopackage(
        &server,
        "tid",
        (1..=3)
            .map(|i| json!({"id": i, "name": format!("n{i}")}))
            .collect(),
    );
    let geojson = server.path("tid.geojson");
    let plain = server.path("plain.gpkg");
    run(
        "ogr2ogr",
        &[
            "-f",
            "GPKG",
            "-lco",
            "FID=fid",
            plain.to_str().unwrap(),
            geojson.to_str().unwrap(),
            "-sql",
            "SELECT name FROM tid",
        ],
    );
    std::fs::write(server.path("values.csv"), "id,v\n1,10\n2,20\n2,5\n").unwrap();

    let info = server
        .call("vector_info", json!({"input": "tid.gpkg"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let layer = &structured(&info)["layers"][0];
    assert_eq!(layer["fid_column"], "id", "{layer}");

    let query = server
        .call(
            "vector_query",
            json!({"input": "tid.gpkg", "where": "id >= 2", "order_by": "id DESC"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&query), "{}", text(&query));
    let out = structured(&query);
    let ids: Vec<Value> = out["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["attributes"]["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(3), json!(2)], "{out}");

    let join = gdal_mcp_tests::call_justified(
        &server,
        "vector_join",
        json!({"input": "tid.gpkg", "join": "values.csv", "key": "id", "fields": ["v"],
               "stats": ["sum"], "output": "joined.gpkg"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&join.result), "{}", text(&join.result));
    let mut sums = joined_sums(&server.path("joined.gpkg"));
    sums.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(sums, vec![None, Some(10.0), Some(25.0)]);

    // The twin whose id column is the usual `fid`: named, queryable, not shown as an attribute.
    let query = server
        .call(
            "vector_query",
            json!({"input": "plain.gpkg", "where": "fid = 2"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&query), "{}", text(&query));
    let out = structured(&query);
    assert_eq!(out["matched"], 1, "{out}");
    assert!(
        out["features"][0]["attributes"].get("fid").is_none(),
        "{out}"
    );
}

/// Attack round 15, R15-B2's join half: `vector_join` compared date-time keys as the crate's
/// debug text, so a table holding the GeoPackage's own values (`2020-01-01T12:00:00`,
/// `2020-01-02T03:00:00Z`) matched none. Keys are now date-times: zoned ones as instants
/// (`2020-01-02T01:00:00+02:00` joins `2020-01-01T23:00:00Z`), zone-less ones as wall clocks,
/// and a zone-less key against zoned ones joins only where reading it as UTC and in the
/// other's zone agree; where they do not, the join is a data conflict naming both readings.
#[tokio::test]
async fn r15_b2_join_keys_of_date_times_compare_as_instants_or_wall_clocks() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let times = [
        "2020-01-01T12:00:00",
        "2020-01-02T03:00:00Z",
        "2020-01-02T01:00:00+02:00",
    ];
    points_geopackage(
        &server,
        "times",
        times.iter().map(|t| json!({"t": t})).collect(),
    );
    std::fs::write(
        server.path("events.csv"),
        "t,v\n2020-01-01T12:00:00,1\n2020-01-02T03:00:00Z,2\n2020-01-01T23:00:00Z,3\n",
    )
    .unwrap();
    let join = gdal_mcp_tests::call_justified(
        &server,
        "vector_join",
        json!({"input": "times.gpkg", "join": "events.csv", "key": "t", "fields": ["v"],
               "stats": ["sum"], "output": "joined.gpkg"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&join.result), "{}", text(&join.result));
    let sums = joined_sums(&server.path("joined.gpkg"));
    assert_eq!(sums, vec![Some(1.0), Some(2.0), Some(3.0)]);

    // 14:00+02:00 is 12:00 UTC but 14:00 on its own clock: the zone-less 12:00 matches it
    // read as UTC and not read in its zone.
    std::fs::write(
        server.path("zoned.csv"),
        "t,v\n2020-01-01T14:00:00+02:00,7\n",
    )
    .unwrap();
    let conflict = gdal_mcp_tests::call_justified(
        &server,
        "vector_join",
        json!({"input": "times.gpkg", "join": "zoned.csv", "key": "t", "fields": ["v"],
               "stats": ["sum"], "output": "conflict.gpkg"}),
    )
    .await
    .unwrap();
    assert!(is_error(&conflict.result), "{}", text(&conflict.result));
    assert_eq!(
        structured(&conflict.result)["error"]["kind"],
        "data_conflict",
        "{}",
        text(&conflict.result)
    );
    assert!(
        text(&conflict.result).contains("read as UTC"),
        "{}",
        text(&conflict.result)
    );
    assert!(!server.path("conflict.gpkg").exists());
}

/// Attack round 16, R16-B16: a Date field set against a date-time literal was compared as
/// text, so `d >= '2021-06-30T00:00:00'` dropped the feature dated 2021-06-30, `<` kept it,
/// and `=` matched nothing. A date against a date-time now reads as its midnight, as SQL does;
/// a date literal against the Date field is unchanged (the twin).
#[tokio::test]
async fn r16_b16_a_date_against_a_date_time_is_its_midnight() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let csv = server.path("days.csv");
    std::fs::write(&csv, "name,d\na,2020-01-01\nb,2021-06-30\nc,2021-07-02\n").unwrap();
    let gpkg = server.path("days.gpkg");
    run(
        "ogr2ogr",
        &[
            "-f",
            "GPKG",
            gpkg.to_str().unwrap(),
            csv.to_str().unwrap(),
            "-oo",
            "AUTODETECT_TYPE=YES",
            "-nln",
            "days",
        ],
    );
    for (filter, want) in [
        ("d >= '2021-06-30T00:00:00'", vec!["b", "c"]),
        ("d >= '2021-06-30 00:00:00'", vec!["b", "c"]),
        ("d < '2021-06-30T00:00:00'", vec!["a"]),
        ("d = '2021-06-30T00:00:00'", vec!["b"]),
        ("d > '2021-06-30T12:00:00'", vec!["c"]),
        ("d >= '2021-06-30'", vec!["b", "c"]),
    ] {
        let result = server
            .call(
                "vector_query",
                json!({"input": "days.gpkg", "where": filter}),
            )
            .await
            .unwrap();
        assert!(!is_error(&result), "{filter}: {}", text(&result));
        let names: Vec<String> = structured(&result)["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["attributes"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, want, "{filter}");
    }
}
