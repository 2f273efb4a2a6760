//! The vector tools over stdio on the real NAD27 counties, checked against `ogr2ogr` run with
//! the command each tool reported, feature by feature.

use crate::oracle;
use gdal_mcp_tests::{call_justified, is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};

fn nc() -> Options {
    Options {
        data: vec!["nc.gpkg", "nc.shp", "nc.shx", "nc.dbf", "nc.prj"],
        ..Default::default()
    }
}

/// Replay the reported ogr2ogr command into `ref_<output>` and compare every feature.
fn assert_matches_ogr2ogr(server: &Server, result: &Value, output: &str) -> usize {
    let actual = server.path(output);
    let reference = server.path(&format!("ref_{output}"));
    oracle::replay(&result["commands"], &actual, &reference).expect("ogr2ogr replay");
    let a = oracle::features(&actual).unwrap();
    let b = oracle::features(&reference).unwrap();
    assert_eq!(a.len(), b.len(), "feature count");
    for (i, (fa, fb)) in a.iter().zip(&b).enumerate() {
        assert_eq!(fa.1, fb.1, "feature {i} attributes");
        assert_eq!(fa.2, fb.2, "feature {i} geometry");
    }
    a.len()
}

#[tokio::test]
async fn vector_info_reports_layers_fields_and_crs() {
    let server = Server::start(Era::Modern, nc()).await.unwrap();
    let result = server
        .call("vector_info", json!({"input": "nc.gpkg"}))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    let out = structured(&result);
    assert_eq!(out["driver"], json!("GPKG"));
    let layer = &out["layers"][0];
    assert_eq!(layer["feature_count"], json!(100));
    assert_eq!(layer["geometry_type"], json!("Multi Polygon"));
    assert_eq!(layer["crs"]["id"], json!("EPSG:4267"));
    let fields: Vec<&str> = layer["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"NAME") && fields.contains(&"BIR74"),
        "{fields:?}"
    );
    let extent = layer["extent"].as_array().unwrap();
    assert!((extent[0].as_f64().unwrap() - -84.3239).abs() < 1e-3);
    let missing = server
        .call("vector_info", json!({"input": "nc.gpkg", "layer": "nope"}))
        .await
        .unwrap();
    assert!(is_error(&missing) && text(&missing).contains("no layer named"));
}

#[tokio::test]
async fn vector_reproject_equals_ogr2ogr_and_reports_the_datum_transformation() {
    let server = Server::start(Era::Legacy, nc()).await.unwrap();
    let result = call_justified(
        &server,
        "vector_reproject",
        json!({"input": "nc.gpkg", "output": "nc_utm.gpkg", "dst_crs": "EPSG:32617"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&result.result), "{}", text(&result.result));
    assert!(
        result.refused_by().iter().any(|(d, _)| d == "crs_datum"),
        "a reprojection is a CRS decision: {:?}",
        result.refused_by()
    );
    let out = structured(&result.result);
    assert_eq!(
        out["written"]["layers"][0]["crs"]["id"],
        json!("EPSG:32617")
    );
    assert!(
        out["transformation"]["used"]["name"]
            .as_str()
            .unwrap()
            .contains("NAD27 to WGS 84"),
        "{}",
        out["transformation"]
    );
    assert_eq!(assert_matches_ogr2ogr(&server, &out, "nc_utm.gpkg"), 100);
}

#[tokio::test]
async fn vector_convert_shapefile_to_flatgeobuf_promotes_mixed_polygons() {
    let server = Server::start(Era::Modern, nc()).await.unwrap();
    let result = call_justified(
        &server,
        "vector_convert",
        json!({"input": "nc.shp", "output": "nc.fgb"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&result.result), "{}", text(&result.result));
    let out = structured(&result.result);
    let command: Vec<&str> = out["commands"][0]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(command.contains(&"PROMOTE_TO_MULTI"), "{command:?}");
    assert_eq!(assert_matches_ogr2ogr(&server, &out, "nc.fgb"), 100);
    let csv = call_justified(
        &server,
        "vector_convert",
        json!({"input": "nc.gpkg", "output": "nc.csv", "layer_options": {"GEOMETRY": "AS_WKT"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&csv.result), "{}", text(&csv.result));
    let unknown = server
        .call(
            "vector_convert",
            json!({"input": "nc.gpkg", "output": "nc.xyz"}),
        )
        .await
        .unwrap();
    assert!(is_error(&unknown) && text(&unknown).contains("extension"));
}

#[tokio::test]
async fn vector_clip_by_bounds_and_by_a_mask_in_another_crs() {
    let server = Server::start(Era::Legacy, nc()).await.unwrap();
    let bounds = call_justified(
        &server,
        "vector_clip",
        json!({"input": "nc.gpkg", "output": "clip.gpkg",
               "bounds": {"xmin": -80.0, "ymin": 35.0, "xmax": -78.0, "ymax": 36.0}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&bounds.result), "{}", text(&bounds.result));
    let out = structured(&bounds.result);
    let kept = assert_matches_ogr2ogr(&server, &out, "clip.gpkg");
    assert_eq!(kept, 23);

    // A mask in UTM: ogr2ogr 3.6 does not reproject -clipsrc datasources, so the command line
    // keeps nothing; the host reprojects the mask itself and keeps what a mask reprojected
    // beforehand keeps.
    std::fs::write(
        server.path("mask_utm.geojson"),
        r#"{"type": "FeatureCollection",
            "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32617"}},
            "features": [{"type": "Feature", "properties": {}, "geometry": {"type": "Polygon",
              "coordinates": [[[640000, 3900000], [720000, 3900000], [720000, 3960000],
                               [640000, 3960000], [640000, 3900000]]]}}]}"#,
    )
    .unwrap();
    let ogr2ogr = |args: &[&str]| {
        let status = std::process::Command::new("ogr2ogr")
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "ogr2ogr {args:?}");
    };
    let path = |name: &str| server.path(name).display().to_string();
    ogr2ogr(&[
        "-f",
        "GPKG",
        "-nlt",
        "PROMOTE_TO_MULTI",
        "-clipsrc",
        &path("mask_utm.geojson"),
        &path("cli_utm.gpkg"),
        &path("nc.gpkg"),
    ]);
    assert_eq!(
        oracle::features(&server.path("cli_utm.gpkg"))
            .unwrap()
            .len(),
        0,
        "ogr2ogr 3.6 keeps nothing with a mask in another CRS"
    );
    ogr2ogr(&[
        "-f",
        "GeoJSON",
        "-t_srs",
        "EPSG:4267",
        &path("mask_nad27.geojson"),
        &path("mask_utm.geojson"),
    ]);
    ogr2ogr(&[
        "-f",
        "GPKG",
        "-nlt",
        "PROMOTE_TO_MULTI",
        "-clipsrc",
        &path("mask_nad27.geojson"),
        &path("cli_nad27.gpkg"),
        &path("nc.gpkg"),
    ]);
    let expected = oracle::features(&server.path("cli_nad27.gpkg")).unwrap();
    assert!(expected.len() > 5, "the mask covers several counties");

    let masked = call_justified(
        &server,
        "vector_clip",
        json!({"input": "nc.gpkg", "output": "masked.gpkg", "mask": "mask_utm.geojson"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&masked.result), "{}", text(&masked.result));
    // The tool fixes the target (the layer's CRS), and the move runs through an operation
    // with a published accuracy inside its area of use: nothing to choose, not asked (attack
    // round 21, R21-B10; the transformation is still reported below).
    assert!(
        !masked.refused_by().iter().any(|(d, _)| d == "crs_datum"),
        "an accurate move of a mask onto the layer's CRS chooses nothing: {:?}",
        masked.refused_by()
    );
    let out = structured(&masked.result);
    assert!(out["transformation"].is_object());
    let got = oracle::features(&server.path("masked.gpkg")).unwrap();
    assert_eq!(
        got.len(),
        expected.len(),
        "same counties as a pre-reprojected mask"
    );
    for (a, b) in got.iter().zip(&expected) {
        assert_eq!(a.1, b.1, "attributes");
    }

    let both = server
        .call(
            "vector_clip",
            json!({"input": "nc.gpkg", "output": "x.gpkg", "mask": "mask_utm.geojson",
                   "bounds": {"xmin": 0, "ymin": 0, "xmax": 1, "ymax": 1}}),
        )
        .await
        .unwrap();
    assert!(is_error(&both) && text(&both).contains("mutually exclusive"));
    let outside = server
        .call(
            "vector_clip",
            json!({"input": "nc.gpkg", "output": "x.gpkg", "mask": "../../etc/passwd"}),
        )
        .await
        .unwrap();
    assert!(is_error(&outside), "the mask path is confined");
}

/// The Z of the first point of `path`, as ogrinfo reads it.
fn first_z(path: &std::path::Path) -> f64 {
    let out = std::process::Command::new("ogrinfo")
        .args(["-q", "-al"])
        .arg(path)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    let at = listing
        .find("POINT Z (")
        .unwrap_or_else(|| panic!("{listing}"));
    let rest = &listing[at + "POINT Z (".len()..];
    let inside = &rest[..rest.find(')').unwrap()];
    inside.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// A GeoPackage of one point at 15°E 45°N, `z` (if any) in `crs`.
fn point_layer(server: &Server, name: &str, crs: &str, z: Option<f64>) {
    let geometry = match z {
        Some(z) => format!("[15.0, 45.0, {z}]"),
        None => "[15.0, 45.0]".to_string(),
    };
    let json_path = server.path(&format!("{name}.geojson"));
    std::fs::write(
        &json_path,
        format!(
            r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{"id":1}},
               "geometry":{{"type":"Point","coordinates":{geometry}}}}}]}}"#
        ),
    )
    .unwrap();
    let status = std::process::Command::new("ogr2ogr")
        .args(["-q", "-a_srs", crs])
        .arg(server.path(&format!("{name}.gpkg")))
        .arg(&json_path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Regression (attack round 7, R7-5): `vector_reproject` of a point in EPSG:4326+5773 (EGM96
/// height, Z 100 m) to EPSG:4979 wrote Z 145.537 (ogr2ogr applied the geoid) with no question,
/// while `raster_reproject` asks `heights`. Now the same question, with the figure; `keep`
/// leaves Z at 100, `convert` shifts it. Twins: 2D points, and the same vertical datum on both
/// sides, are not asked.
#[tokio::test]
async fn r7_5_vector_heights_between_vertical_datums_are_asked() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    point_layer(&server, "p3", "EPSG:4326+5773", Some(100.0));
    point_layer(&server, "p2", "EPSG:4326", None);
    let call = |input: &str, output: &str, dst: &str, heights: Option<&str>| {
        let mut c = json!({"input": input, "output": output, "dst_crs": dst});
        if let Some(h) = heights {
            c["heights"] = json!(h);
        }
        c
    };
    let asked = call_justified(
        &server,
        "vector_reproject",
        call("p3.gpkg", "a.gpkg", "EPSG:4979", None),
    )
    .await
    .unwrap();
    assert!(is_error(&asked.result), "{}", text(&asked.result));
    let message = text(&asked.result);
    assert!(
        message.contains("heights") && message.contains("+45.5"),
        "{message}"
    );
    assert!(!server.path("a.gpkg").exists());

    let keep = call_justified(
        &server,
        "vector_reproject",
        call("p3.gpkg", "keep.gpkg", "EPSG:4979", Some("keep")),
    )
    .await
    .unwrap();
    assert!(!is_error(&keep.result), "{}", text(&keep.result));
    assert!((first_z(&server.path("keep.gpkg")) - 100.0).abs() < 1e-6);

    let convert = call_justified(
        &server,
        "vector_reproject",
        call("p3.gpkg", "convert.gpkg", "EPSG:4979", Some("convert")),
    )
    .await
    .unwrap();
    assert!(!is_error(&convert.result), "{}", text(&convert.result));
    let z = first_z(&server.path("convert.gpkg"));
    assert!((z - 145.537).abs() < 0.01, "{z}");

    // Twins: 2D points, the same vertical datum on both sides, and a 2D target, to which
    // ogr2ogr leaves Z as it is (attack round 8, R8-6: this one was asked about a +45.54 m
    // shift that never happens).
    for (input, output, dst) in [
        ("p2.gpkg", "flat.gpkg", "EPSG:4979"),
        ("p3.gpkg", "utm.gpkg", "EPSG:32633+5773"),
        ("p3.gpkg", "utm2d.gpkg", "EPSG:32633"),
    ] {
        let done = call_justified(&server, "vector_reproject", call(input, output, dst, None))
            .await
            .unwrap();
        assert!(
            !is_error(&done.result),
            "{input} -> {dst}: {}",
            text(&done.result)
        );
    }
    assert!((first_z(&server.path("utm.gpkg")) - 100.0).abs() < 1e-6);
    assert!((first_z(&server.path("utm2d.gpkg")) - 100.0).abs() < 1e-6);
}

/// Regression (attack round 9, R9-3): `vector_reproject` of a Z point in EPSG:4326 to a 3D
/// geographic CRS in US feet spelled as a PROJ string (`+vunits=us-ft`) asked nothing and
/// ogr2ogr wrote Z 328.083 from 100: the target names no vertical datum, and R8-6's rule only
/// looked between two three-axis CRSs. The change is now measured through the transformation
/// ogr2ogr builds: asked with the figure; `keep` writes 100, `convert` 328.083. Twin: EPSG:4979
/// (metres) is not asked and keeps 100.
#[tokio::test]
async fn r9_3_vector_heights_to_a_target_in_feet_are_asked() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    point_layer(&server, "pz", "EPSG:4326", Some(100.0));
    let feet = "+proj=longlat +datum=WGS84 +vunits=us-ft +no_defs +type=crs";
    let run = |output: &str, dst: &str, heights: Option<&str>| {
        let mut c = json!({"input": "pz.gpkg", "output": output, "dst_crs": dst});
        if let Some(h) = heights {
            c["heights"] = json!(h);
        }
        call_justified(&server, "vector_reproject", c)
    };
    let asked = run("ft.gpkg", feet, None).await.unwrap();
    assert!(is_error(&asked.result), "{}", text(&asked.result));
    assert!(
        text(&asked.result).contains("328.08"),
        "{}",
        text(&asked.result)
    );
    assert!(!server.path("ft.gpkg").exists());
    let keep = run("ft_keep.gpkg", feet, Some("keep")).await.unwrap();
    assert!(!is_error(&keep.result), "{}", text(&keep.result));
    assert!((first_z(&server.path("ft_keep.gpkg")) - 100.0).abs() < 1e-6);
    let convert = run("ft_conv.gpkg", feet, Some("convert")).await.unwrap();
    assert!(!is_error(&convert.result), "{}", text(&convert.result));
    let z = first_z(&server.path("ft_conv.gpkg"));
    assert!((z - 328.083).abs() < 0.01, "{z}");
    let metres = run("m.gpkg", "EPSG:4979", None).await.unwrap();
    assert!(!is_error(&metres.result), "{}", text(&metres.result));
    assert!((first_z(&server.path("m.gpkg")) - 100.0).abs() < 1e-6);
}

/// Regression (attack round 9, R9-9): `vector_clip` with `bounds` in another CRS clipped by
/// the envelope of the rectangle's corners in the layer's CRS: a lon/lat box is not a
/// rectangle in UTM, and points outside the box asked for were kept. The clip now follows the
/// rectangle's own (densified) shape: a grid of UTM 33N points over the envelope keeps exactly
/// those whose lon/lat lies inside the box (PROJ's inverse decides, point by point), fewer
/// than the envelope holds. Twin: bounds in the layer's own CRS clip by the rectangle.
#[tokio::test]
async fn r9_9_bounds_in_another_crs_clip_by_the_rectangle_not_its_envelope() {
    use gdal::spatial_ref::{AxisMappingStrategy, CoordTransform, SpatialRef};
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let mut utm = SpatialRef::from_epsg(32633).unwrap();
    utm.set_axis_mapping_strategy(AxisMappingStrategy::TraditionalGisOrder);
    let mut wgs84 = SpatialRef::from_epsg(4326).unwrap();
    wgs84.set_axis_mapping_strategy(AxisMappingStrategy::TraditionalGisOrder);
    let to_lonlat = CoordTransform::new(&utm, &wgs84).unwrap();
    let (x0, y0, x1, y1) = (340_000.0, 4_927_000.0, 660_000.0, 5_041_000.0);
    let n = 60;
    let mut points = Vec::new();
    let mut inside = 0;
    for i in 0..n {
        for j in 0..n {
            let x = x0 + (x1 - x0) * (i as f64 + 0.5) / n as f64;
            let y = y0 + (y1 - y0) * (j as f64 + 0.5) / n as f64;
            let (mut lon, mut lat, mut z) = ([x], [y], [0.0]);
            to_lonlat
                .transform_coords(&mut lon, &mut lat, &mut z)
                .unwrap();
            if (13.0..=17.0).contains(&lon[0]) && (44.5..=45.5).contains(&lat[0]) {
                inside += 1;
            }
            points.push(format!(
                r#"{{"type":"Feature","properties":{{}},"geometry":{{"type":"Point","coordinates":[{x},{y}]}}}}"#
            ));
        }
    }
    assert!(
        inside < n * n - 20,
        "the envelope must hold points outside the box"
    );
    let input = server.path("grid_utm.geojson");
    std::fs::write(
        &input,
        format!(
            r#"{{"type":"FeatureCollection","crs":{{"type":"name","properties":{{"name":"urn:ogc:def:crs:EPSG::32633"}}}},"features":[{}]}}"#,
            points.join(",")
        ),
    )
    .unwrap();
    let clip = |bounds: Value, output: &'static str| {
        let server = &server;
        async move {
            call_justified(
                server,
                "vector_clip",
                json!({"input": "grid_utm.geojson", "output": output, "bounds": bounds}),
            )
            .await
            .unwrap()
            .result
        }
    };
    let lonlat = clip(
        json!({"xmin": 13.0, "ymin": 44.5, "xmax": 17.0, "ymax": 45.5, "crs": "EPSG:4326"}),
        "box.gpkg",
    )
    .await;
    assert!(!is_error(&lonlat), "{}", text(&lonlat));
    assert_eq!(
        structured(&lonlat)["written"]["layers"][0]["feature_count"],
        json!(inside),
        "{}",
        text(&lonlat)
    );
    let own = clip(
        json!({"xmin": 400_000.0, "ymin": 4_950_000.0, "xmax": 500_000.0, "ymax": 5_000_000.0}),
        "own.gpkg",
    )
    .await;
    assert!(!is_error(&own), "{}", text(&own));
    let expected = (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .filter(|(i, j)| {
            let x = x0 + (x1 - x0) * (*i as f64 + 0.5) / n as f64;
            let y = y0 + (y1 - y0) * (*j as f64 + 0.5) / n as f64;
            (400_000.0..=500_000.0).contains(&x) && (4_950_000.0..=5_000_000.0).contains(&y)
        })
        .count();
    assert_eq!(
        structured(&own)["written"]["layers"][0]["feature_count"],
        json!(expected)
    );
}

/// The entries of `domain` in a result's `list` (`refusal` or `reflection`):
/// `(severity, detail(entry), evidence ids)`.
fn domain_entries(
    result: &Value,
    list: &str,
    domain: &str,
    detail: fn(&Value) -> &Value,
) -> Vec<(String, String, Vec<String>)> {
    result[list]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["domain"] == json!(domain))
        .map(|e| {
            (
                e["severity"].as_str().unwrap_or_default().to_string(),
                detail(e).as_str().unwrap_or_default().to_string(),
                e["evidence"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i.as_str().or_else(|| i["id"].as_str()))
                    .map(str::to_string)
                    .collect(),
            )
        })
        .collect()
}

/// The crs_datum entries of a call's refusal: `(severity, operation, evidence ids)`.
fn crs_datum_entries(result: &Value) -> Vec<(String, String, Vec<String>)> {
    domain_entries(result, "refusal", "crs_datum", |e| {
        &e["decision"]["operation"]
    })
}

/// Regression (attack round 9, R9-13): `bounds` given in a CRS on another datum than the
/// data's were moved with no crs_datum question, a ballpark operation included (NAD27 over
/// Europe: a no-op that leaves the datum shift out), while the same rectangle given as a mask
/// was asked. The bounds' CRS is now one more CRS of the call: `vector_clip` and
/// `raster_reproject` onto the raster's own CRS ask the mask's question (critical,
/// `ballpark_operation`) and run once it is answered. Twins, silent: bounds on the data's datum
/// (EPSG:4326 over UTM 33N), in the data's own CRS, and across a datum through an operation with
/// a published accuracy (ED50, whose operation the result reports). A reprojection whose
/// bounds sit on a third datum with a ballpark move is refused with the fix (the call judges one
/// transformation); on the raster's datum it runs.
#[tokio::test]
async fn r9_13_bounds_on_another_datum_are_asked_like_a_mask() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // UTM 33N points over the Adriatic, 13-17° E, 44.5-45.5° N and around.
    let mut points = Vec::new();
    for i in 0..12 {
        for j in 0..12 {
            let x = 330_000.0 + 30_000.0 * i as f64;
            let y = 4_920_000.0 + 11_000.0 * j as f64;
            points.push(format!(
                r#"{{"type":"Feature","properties":{{}},"geometry":{{"type":"Point","coordinates":[{x},{y}]}}}}"#
            ));
        }
    }
    std::fs::write(
        server.path("pts.geojson"),
        format!(
            r#"{{"type":"FeatureCollection","crs":{{"type":"name","properties":{{"name":"urn:ogc:def:crs:EPSG::32633"}}}},"features":[{}]}}"#,
            points.join(",")
        ),
    )
    .unwrap();
    std::fs::write(
        server.path("mask4267.geojson"),
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::4267"}},"features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[13,44.5],[17,44.5],[17,45.5],[13,45.5],[13,44.5]]]}}]}"#,
    )
    .unwrap();
    let rectangle =
        |crs: &str| json!({"xmin": 13.0, "ymin": 44.5, "xmax": 17.0, "ymax": 45.5, "crs": crs});

    // The question: NAD27 bounds are asked as the NAD27 mask is.
    let bounds =
        json!({"input": "pts.geojson", "output": "b.gpkg", "bounds": rectangle("EPSG:4267")});
    let asked = server.call("vector_clip", bounds.clone()).await.unwrap();
    assert!(is_error(&asked), "{}", text(&asked));
    let entries = crs_datum_entries(&structured(&asked));
    assert_eq!(entries.len(), 1, "{}", text(&asked));
    let (severity, operation, ids) = &entries[0];
    assert_eq!(severity, "critical");
    assert_eq!(operation, "bounds_to_input");
    assert!(
        ids.contains(&"crs_change".to_string()) && ids.contains(&"ballpark_operation".to_string()),
        "{ids:?}"
    );
    assert!(!server.path("b.gpkg").exists());
    let masked = server
        .call(
            "vector_clip",
            json!({"input": "pts.geojson", "output": "m.gpkg", "mask": "mask4267.geojson"}),
        )
        .await
        .unwrap();
    let mask_entries = crs_datum_entries(&structured(&masked));
    assert!(
        mask_entries
            .iter()
            .any(|(s, _, ids)| s == "critical" && ids.contains(&"ballpark_operation".to_string())),
        "{}",
        text(&masked)
    );
    let answered = call_justified(&server, "vector_clip", bounds)
        .await
        .unwrap();
    assert!(!is_error(&answered.result), "{}", text(&answered.result));
    assert!(server.path("b.gpkg").exists());

    // The silent twins.
    for (crs, output) in [
        (Some("EPSG:4326"), "w.gpkg"),
        (Some("EPSG:4230"), "ed50.gpkg"),
        (None, "own.gpkg"),
    ] {
        let bounds = match crs {
            Some(crs) => rectangle(crs),
            None => {
                json!({"xmin": 400_000.0, "ymin": 4_950_000.0, "xmax": 500_000.0, "ymax": 5_000_000.0})
            }
        };
        let result = server
            .call(
                "vector_clip",
                json!({"input": "pts.geojson", "output": output, "bounds": bounds}),
            )
            .await
            .unwrap();
        assert!(!is_error(&result), "{crs:?}: {}", text(&result));
        let out = structured(&result);
        assert!(out["refusal"].is_null(), "{crs:?}: {}", text(&result));
        let kept = out["written"]["layers"][0]["feature_count"]
            .as_u64()
            .unwrap();
        assert!(kept > 0, "{crs:?}");
        if crs == Some("EPSG:4230") {
            let used = out["transformation"]["used"]["name"]
                .as_str()
                .unwrap_or_default();
            assert!(used.contains("ED50 to WGS 84"), "{}", out["transformation"]);
            assert!(out["transformation"]["used"]["accuracy_metres"].is_number());
        }
    }

    // raster_reproject onto the raster's own CRS with NAD27 bounds: the same question.
    {
        let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
        let mut dataset = driver
            .create_with_band_type::<f32, _>(server.path("g.tif"), 100, 100, 1)
            .unwrap();
        dataset
            .set_geo_transform(&[480_000.0, 100.0, 0.0, 4_990_000.0, 0.0, -100.0])
            .unwrap();
        dataset
            .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
            .unwrap();
        let mut band = dataset.rasterband(1).unwrap();
        let values: Vec<f32> = (0..100 * 100).map(|i| 100.0 + (i % 100) as f32).collect();
        band.write(
            (0, 0),
            (100, 100),
            &mut gdal::raster::Buffer::new((100, 100), values),
        )
        .unwrap();
    }
    let window = |crs: &str, dst: &str, output: &str| {
        json!({"input": "g.tif", "output": output, "dst_crs": dst, "resampling": "nearest",
               "bounds": {"xmin": 15.0, "ymin": 44.9, "xmax": 15.1, "ymax": 45.0, "crs": crs}})
    };
    let asked = server
        .call(
            "raster_reproject",
            window("EPSG:4267", "EPSG:32633", "r1.tif"),
        )
        .await
        .unwrap();
    assert!(is_error(&asked), "{}", text(&asked));
    let entries = crs_datum_entries(&structured(&asked));
    assert_eq!(entries.len(), 1, "{}", text(&asked));
    assert_eq!(entries[0].0, "critical");
    assert_eq!(entries[0].1, "bounds_to_input");
    assert!(entries[0].2.contains(&"ballpark_operation".to_string()));
    for crs in ["EPSG:4326", "EPSG:4230"] {
        let twin = server
            .call("raster_reproject", window(crs, "EPSG:32633", "r2.tif"))
            .await
            .unwrap();
        assert!(
            crs_datum_entries(&structured(&twin)).is_empty(),
            "{crs}: {}",
            text(&twin)
        );
    }
    // A reprojection to ETRS89 / LAEA: NAD27 bounds are a third datum, moved by a ballpark.
    let third = server
        .call(
            "raster_reproject",
            window("EPSG:4267", "EPSG:3035", "r3.tif"),
        )
        .await
        .unwrap();
    assert!(is_error(&third), "{}", text(&third));
    assert!(
        text(&third).contains("Give the bounds in the target CRS"),
        "{}",
        text(&third)
    );
    let on_source_datum = call_justified(
        &server,
        "raster_reproject",
        window("EPSG:4326", "EPSG:3035", "r4.tif"),
    )
    .await
    .unwrap();
    assert!(
        !is_error(&on_source_datum.result),
        "{}",
        text(&on_source_datum.result)
    );
}

/// One polygon layer `name`.gpkg made with ogr2ogr from GeoJSON `properties`.
fn parcel_layer(server: &Server, name: &str, properties: &str) {
    let json_path = server.path(&format!("{name}.geojson"));
    std::fs::write(
        &json_path,
        format!(
            r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{properties},
               "geometry":{{"type":"Polygon","coordinates":[[[500000,6000000],[500100,6000000],
               [500100,6000100],[500000,6000100],[500000,6000000]]]}}}}]}}"#
        ),
    )
    .unwrap();
    let status = std::process::Command::new("ogr2ogr")
        .args(["-q", "-a_srs", "EPSG:32633", "-nln", "parcels"])
        .arg(server.path(&format!("{name}.gpkg")))
        .arg(&json_path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The `format_selection` receipts of a result, as `(severity, reason, evidence ids)`.
fn format_receipts(result: &Value) -> Vec<(String, String, Vec<String>)> {
    domain_entries(result, "reflection", "format_selection", |r| &r["reason"])
}

/// Regression (attack round 13, R13-B8): `vector_convert` to ESRI Shapefile of a layer whose
/// fields cannot survive was an advisory `lossless_write` ("holds these layers without loss")
/// while GDAL 3.6.2 wrote `population_2021` as `populati_1`, cut a 300-character string to
/// 254 and dropped a DateTime's time. The host now measures the fields against the driver's
/// limits before the write and format_selection asks `schema_lost`, naming each field and
/// offering GeoPackage; the answered write says no "without loss". Twins: a layer whose fields
/// fit (short names, a Date, short strings) to Shapefile, and the lossy layer to FlatGeobuf,
/// are advisory `lossless_write`.
#[tokio::test]
async fn r13_b8_shapefile_schema_loss_is_asked_not_called_lossless() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let note = "x".repeat(300);
    parcel_layer(
        &server,
        "lossy",
        &format!(
            r#"{{"population_2020":1000,"population_2021":2000,"note":"{note}",
                 "surveyed":"2024-03-01T12:34:56"}}"#
        ),
    );
    parcel_layer(
        &server,
        "clean",
        r#"{"pop_2020":1000,"pop_2021":2000,"note":"short","surveyed":"2024-03-01"}"#,
    );

    let refused = server
        .call(
            "vector_convert",
            json!({"input": "lossy.gpkg", "output": "o.shp"}),
        )
        .await
        .unwrap();
    let content = structured(&refused);
    let entry = content["refusal"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["domain"] == "format_selection"))
        .cloned()
        .unwrap_or_else(|| panic!("format_selection did not gate: {content}"));
    assert_eq!(entry["severity"], "required", "{entry}");
    let item = entry["evidence"]
        .as_array()
        .and_then(|items| items.iter().find(|e| e["id"] == "schema_lost"))
        .cloned()
        .unwrap_or_else(|| panic!("no schema_lost: {entry}"));
    let fact = item["fact"].as_str().unwrap_or("");
    for needle in [
        "`population_2020` as `population`",
        "`population_2021` as `populati_1`",
        "`surveyed`",
        "2024/03/01 12:34:56",
        "`note`",
        "the longest 300",
    ] {
        assert!(fact.contains(needle), "{needle} not in {fact}");
    }
    assert_eq!(
        item["alternative"],
        json!({"format": "GPKG", "output": "o.gpkg"}),
        "{item}"
    );
    assert!(
        !text(&refused).contains("without loss"),
        "{}",
        text(&refused)
    );

    // Answered: the write runs, and nothing in the result calls it lossless.
    let answered = call_justified(
        &server,
        "vector_convert",
        json!({"input": "lossy.gpkg", "output": "o.shp"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&answered.result), "{}", text(&answered.result));
    let out = structured(&answered.result);
    assert!(!text(&answered.result).contains("without loss"), "{out}");
    let receipts = format_receipts(&out);
    assert!(
        receipts
            .iter()
            .all(|(_, _, ids)| !ids.iter().any(|i| i == "lossless_write")),
        "{receipts:?}"
    );
    let fields = out["written"].to_string();
    assert!(fields.contains("populati_1"), "{fields}");

    // Twins.
    let clean = server
        .call(
            "vector_convert",
            json!({"input": "clean.gpkg", "output": "c.shp"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&clean), "{}", text(&clean));
    let receipts = format_receipts(&structured(&clean));
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0].0, "advisory");
    assert_eq!(receipts[0].2, ["lossless_write", "shapefile_limits"]);
    let fgb = server
        .call(
            "vector_convert",
            json!({"input": "lossy.gpkg", "output": "o.fgb"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&fgb), "{}", text(&fgb));
    let receipts = format_receipts(&structured(&fgb));
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0].2, ["lossless_write"]);
}

/// Round 14 (R13-B8's fact, other drivers): DXF writes none of a layer's attribute fields
/// (GDAL 3.6.2: its layers have a fixed schema), and was an advisory `unknown_driver`; now
/// `schema_lost` names them. Twin: a layer without attribute fields to DXF loses nothing and
/// stays advisory.
#[tokio::test]
async fn dxf_drops_every_field_and_says_so() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    parcel_layer(&server, "fields", r#"{"pop_2020":1000,"note":"short"}"#);
    parcel_layer(&server, "bare", "{}");
    let refused = server
        .call(
            "vector_convert",
            json!({"input": "fields.gpkg", "output": "o.dxf", "format": "DXF"}),
        )
        .await
        .unwrap();
    let content = structured(&refused);
    let entry = content["refusal"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["domain"] == "format_selection"))
        .cloned()
        .unwrap_or_else(|| panic!("format_selection did not gate: {content}"));
    let fact = entry["evidence"]
        .as_array()
        .and_then(|items| items.iter().find(|e| e["id"] == "schema_lost"))
        .map(|e| e["fact"].to_string())
        .unwrap_or_else(|| panic!("no schema_lost: {entry}"));
    assert!(
        fact.contains("`pop_2020`") && fact.contains("`note`"),
        "{fact}"
    );
    let bare = server
        .call(
            "vector_convert",
            json!({"input": "bare.gpkg", "output": "b.dxf", "format": "DXF"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&bare), "{}", text(&bare));
    let receipts = format_receipts(&structured(&bare));
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0].0, "advisory", "{receipts:?}");
    assert!(
        !receipts[0].2.iter().any(|i| i == "schema_lost"),
        "{receipts:?}"
    );
}

/// Attack round 16, R16-B8: a table of numbers named `.csv` (`lon,lat,depth`) was claimed by
/// GDAL's XYZ raster driver, which failed on it ("Ungridded dataset"), so `vector_info` and
/// `vector_convert` refused a plain table, and a conversion to CSV with `GEOMETRY=AS_XY`
/// failed on its own output. Such a file now opens as the table it is.
#[tokio::test]
async fn r16_b8_a_table_of_numbers_opens_as_a_table() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(
        server.path("wells.csv"),
        "lon,lat,depth\n10.5,45.2,120\n10.7,45.1,80\n10.6,45.4,95\n",
    )
    .unwrap();
    let info = server
        .call("vector_info", json!({"input": "wells.csv"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    assert_eq!(structured(&info)["layers"][0]["feature_count"], 3);
    std::fs::write(
        server.path("points.geojson"),
        json!({"type": "FeatureCollection", "features": [
            {"type": "Feature", "properties": {"depth": 1.5, "temp": 10.0},
             "geometry": {"type": "Point", "coordinates": [10.0, 45.0]}},
            {"type": "Feature", "properties": {"depth": 2.5, "temp": 11.0},
             "geometry": {"type": "Point", "coordinates": [10.1, 45.3]}}]})
        .to_string(),
    )
    .unwrap();
    let converted = call_justified(
        &server,
        "vector_convert",
        json!({"input": "points.geojson", "output": "points.csv",
               "layer_options": {"GEOMETRY": "AS_XY"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&converted.result), "{}", text(&converted.result));
    assert!(server.path("points.csv").exists());
}

/// Attack round 23, R23-B18: `bounds` in a Pacific-centred CRS (EPSG:3832, central meridian
/// 150° E) round 170° E to 170° W, over a lon/lat layer, were moved as one ring jumping from
/// 179.7° to -180°, which GEOS read as nearly the rest of the world: the clip kept the point at
/// (0, 10) and dropped (175, 10) and (-175, 10), which cs2cs puts inside the rectangle. The
/// moved rectangle is split at ±180° as a mask is.
#[tokio::test]
async fn r23_b18_bounds_from_a_pacific_crs_are_split_at_the_antimeridian() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let point = |name: &str, lon: f64| {
        json!({"type": "Feature", "properties": {"n": name},
               "geometry": {"type": "Point", "coordinates": [lon, 10.0]}})
    };
    let layer = json!({"type": "FeatureCollection",
        "features": [point("E175", 175.0), point("W175", -175.0), point("zero", 0.0)]});
    std::fs::write(server.path("p.geojson"), layer.to_string()).unwrap();
    let done = call_justified(
        &server,
        "vector_clip",
        json!({"input": "p.geojson", "output": "c.geojson",
               "bounds": {"xmin": 2226389.816, "xmax": 4452779.632, "ymin": 0.0,
                          "ymax": 2258423.649, "crs": "EPSG:3832"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(server.path("c.geojson")).unwrap()).unwrap();
    let mut kept: Vec<&str> = written["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["properties"]["n"].as_str().unwrap())
        .collect();
    kept.sort();
    assert_eq!(kept, ["E175", "W175"]);
}
