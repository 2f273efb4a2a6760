//! Regressions for the GDAL 3.6 behaviours the host works around. Each test names the GDAL
//! version and the behaviour, shows it with GDAL's own command line (so that a GDAL upgrade that
//! fixes it fails here and says the workaround may go), and shows that the tool gets it right.

use crate::oracle;
use gdal_mcp_tests::{call_justified, is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::process::Command;

fn cli(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"))
}

/// GDAL 3.6.2: `ogr2ogr -clipsrc <datasource>` does not reproject the mask into the layer's
/// CRS, so a mask in another CRS silently keeps **no** feature. `vector_clip` reprojects the
/// mask itself and passes it as WKT.
#[tokio::test]
async fn gdal_3_6_ogr2ogr_clipsrc_ignores_the_mask_crs() {
    let server = Server::start(
        Era::Legacy,
        Options {
            data: vec!["nc.gpkg"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    std::fs::write(
        server.path("mask_utm.geojson"),
        r#"{"type": "FeatureCollection",
            "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32617"}},
            "features": [{"type": "Feature", "properties": {}, "geometry": {"type": "Polygon",
              "coordinates": [[[640000, 3900000], [720000, 3900000], [720000, 3960000],
                               [640000, 3960000], [640000, 3900000]]]}}]}"#,
    )
    .unwrap();
    let path = |name: &str| server.path(name).display().to_string();
    let out = cli(
        "ogr2ogr",
        &[
            "-f",
            "GPKG",
            "-nlt",
            "PROMOTE_TO_MULTI",
            "-clipsrc",
            &path("mask_utm.geojson"),
            &path("cli.gpkg"),
            &path("nc.gpkg"),
        ],
    );
    assert!(out.status.success(), "ogr2ogr: {out:?}");
    assert_eq!(
        oracle::features(&server.path("cli.gpkg")).unwrap().len(),
        0,
        "GDAL's ogr2ogr now keeps features with a mask in another CRS: the host's mask \
         reprojection in vector_clip may be removable"
    );
    let clipped = call_justified(
        &server,
        "vector_clip",
        json!({"input": "nc.gpkg", "output": "tool.gpkg", "mask": "mask_utm.geojson"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&clipped.result), "{}", text(&clipped.result));
    let kept = oracle::features(&server.path("tool.gpkg")).unwrap().len();
    assert!(
        kept > 5,
        "vector_clip keeps the counties under the mask: {kept}"
    );
}

/// GDAL 3.6.2: a Shapefile "Polygon" layer mixes polygons and multipolygons, and
/// `ogr2ogr -f FlatGeobuf` without `-nlt PROMOTE_TO_MULTI` rejects the multipolygons.
/// `vector_convert` adds `-nlt PROMOTE_TO_MULTI` and writes all 100 counties.
#[tokio::test]
async fn gdal_3_6_flatgeobuf_rejects_mixed_shapefile_polygons() {
    let data = ["nc.shp", "nc.dbf", "nc.shx", "nc.prj"];
    let server = Server::start(
        Era::Modern,
        Options {
            data: data.to_vec(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let path = |name: &str| server.path(name).display().to_string();
    let out = cli(
        "ogr2ogr",
        &["-f", "FlatGeobuf", &path("cli.fgb"), &path("nc.shp")],
    );
    let written = oracle::features(&server.path("cli.fgb"))
        .map(|f| f.len())
        .unwrap_or(0);
    assert!(
        !out.status.success() || written < 100,
        "GDAL's ogr2ogr now converts mixed polygons to FlatGeobuf ({written} features): the \
         PROMOTE_TO_MULTI workaround may be removable"
    );
    let converted = call_justified(
        &server,
        "vector_convert",
        json!({"input": "nc.shp", "output": "tool.fgb"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&converted.result), "{}", text(&converted.result));
    assert_eq!(
        oracle::features(&server.path("tool.fgb")).unwrap().len(),
        100
    );
}

/// GDAL 3.6.2: `gdalwarp` has no `-b` (band selection came in 3.7), so warping one band of a
/// multi-band input onto another grid needs a band VRT in front. `raster_composite` of band 2
/// of two Landsat scenes on different grids works through one.
#[tokio::test]
async fn gdal_3_6_gdalwarp_has_no_band_selection() {
    let server = Server::start(
        Era::Legacy,
        Options {
            data: vec!["L7_ETMs.tif"],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let path = |name: &str| server.path(name).display().to_string();
    let refused = cli(
        "gdalwarp",
        &["-b", "2", &path("L7_ETMs.tif"), &path("cli.tif")],
    );
    assert!(
        !refused.status.success(),
        "GDAL's gdalwarp now takes -b: the band VRT in gdal::composite may be removable"
    );
    let coarse = cli(
        "gdalwarp",
        &["-tr", "57", "57", &path("L7_ETMs.tif"), &path("coarse.tif")],
    );
    assert!(coarse.status.success(), "{coarse:?}");
    let composite = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["L7_ETMs.tif", "coarse.tif"], "output": "max.tif", "statistic": "max",
               "band": 2, "resampling": "nearest"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&composite.result), "{}", text(&composite.result));
    let out: Value = structured(&composite.result);
    assert_eq!(out["report"]["grids"], json!("differ"));
    assert_eq!(out["report"]["warped_inputs"], json!([1]));
    assert_eq!(out["band_count"], json!(1));
}

/// Regression (attack round 14, R14-B13): the raster's own CRS spelled another way
/// (`ESRI:102100` or `EPSG:900913` for EPSG:3857, a PROJ string for EPSG:32633) was judged a
/// reprojection: a required `crs_change`, and for Web Mercator a critical
/// `target_distortion`, on a call that changed no cell. The domains now see the raster's own
/// CRS; a real change of CRS (the twin, to EPSG:4326) is still asked.
#[tokio::test]
async fn r14_b13_the_own_crs_spelled_another_way_is_no_reprojection() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let merc = server.path("merc.tif");
    let made = cli(
        "gdal_create",
        &[
            "-q",
            "-of",
            "GTiff",
            "-outsize",
            "50",
            "50",
            "-ot",
            "Float32",
            "-burn",
            "7",
            "-a_srs",
            "EPSG:3857",
            "-a_ullr",
            "1000000",
            "6000000",
            "1050000",
            "5950000",
            &merc.display().to_string(),
        ],
    );
    assert!(made.status.success());
    for spelling in ["ESRI:102100", "EPSG:900913"] {
        let result = server
            .call(
                "raster_reproject",
                json!({"input": merc.display().to_string(), "output": format!("out_{}.tif", spelling.replace(':', "_")),
                       "dst_crs": spelling, "resolution": [1000, 1000], "resampling": "nearest"}),
            )
            .await
            .unwrap();
        assert!(!is_error(&result), "{spelling}: {}", text(&result));
    }
    let changed = server
        .call(
            "raster_reproject",
            json!({"input": merc.display().to_string(), "output": "out_4326.tif",
                   "dst_crs": "EPSG:4326", "resampling": "nearest"}),
        )
        .await
        .unwrap();
    assert!(is_error(&changed), "{}", text(&changed));
    assert!(text(&changed).contains("crs_datum"), "{}", text(&changed));
}
