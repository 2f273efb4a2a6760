//! Classification tables of the domain, run natively.

use super::*;
use gdal_mcp_domain_sdk::testing::{
    call, nad27, raster, raster_dataset, utm33, vector_dataset, wgs84,
};
use gdal_mcp_domain_sdk::testing::{evidence_ids as ids, evidence_item as item, offered};
use gdal_mcp_domain_sdk::testing::{
    output, resampled_step, upstream_step, with_output, with_upstream,
};
use gdal_mcp_domain_sdk::{json, EncodingLoss, OutputFacts, RasterFacts, Severity, UpstreamStep};

/// Check the evidence contract, and that every fact says what is written.
fn checked(got: Option<Trigger>) -> Option<Trigger> {
    let got = gdal_mcp_domain_sdk::testing::checked(got);
    for item in got.iter().flat_map(|t| &t.evidence) {
        assert!(item.fact.contains("; written: "), "{}", item.fact);
    }
    got
}

fn classify(tool: &str, arguments: Value, input: RasterFacts) -> Option<Trigger> {
    let dataset = raster_dataset("input", Some(utm33()), input);
    checked(FormatSelection::classify(&Call::new(call(
        tool,
        arguments,
        vec![dataset],
    ))))
}

fn severity(trigger: &Option<Trigger>) -> Option<Severity> {
    trigger.as_ref().map(|t| t.severity)
}

fn key(trigger: &Option<Trigger>) -> Value {
    trigger
        .as_ref()
        .and_then(|t| serde_json::from_str(&t.key_fields).ok())
        .unwrap_or(Value::Null)
}

fn reason(trigger: &Option<Trigger>) -> String {
    trigger
        .as_ref()
        .map(|t| t.reason.clone())
        .unwrap_or_default()
}

fn with_nodata(mut r: RasterFacts, values: &[Option<f64>]) -> RasterFacts {
    r.nodata = values.to_vec();
    r
}

#[test]
fn raster_convert_table() {
    let f32_1 = || raster("Float32", 1, false);
    let byte_3 = || raster("Byte", 3, false);
    let convert = |args: Value| {
        json!({"input": "in.tif", "output": "out.x"})
            .as_object()
            .cloned()
            .map(|mut o| {
                if let Some(extra) = args.as_object() {
                    o.extend(extra.clone());
                }
                Value::Object(o)
            })
            .unwrap_or(Value::Null)
    };
    type Row = (&'static str, Value, RasterFacts, Option<Severity>);
    let table: Vec<Row> = vec![
        (
            "float32 to JPEG",
            convert(json!({"format": "JPEG"})),
            f32_1(),
            Some(Severity::Critical),
        ),
        (
            "float32 to PNG",
            convert(json!({"format": "PNG"})),
            f32_1(),
            Some(Severity::Critical),
        ),
        (
            "float32 to WEBP",
            convert(json!({"format": "WEBP"})),
            f32_1(),
            Some(Severity::Critical),
        ),
        (
            "RGB to JPEG",
            convert(json!({"format": "JPEG", "quality": 90})),
            byte_3(),
            Some(Severity::Required),
        ),
        (
            "RGB to PNG",
            convert(json!({"format": "PNG"})),
            byte_3(),
            Some(Severity::Advisory),
        ),
        (
            "RGB to lossless WEBP",
            convert(json!({"format": "WEBP", "creation_options": {"LOSSLESS": "YES"}})),
            byte_3(),
            Some(Severity::Advisory),
        ),
        (
            "RGB to lossy WEBP",
            convert(json!({"format": "WEBP"})),
            byte_3(),
            Some(Severity::Required),
        ),
        (
            "COG WEBP quality 100 is lossless",
            convert(
                json!({"format": "COG", "compression": "WEBP", "quality": 100, "overviews": {"resampling": "average"}}),
            ),
            byte_3(),
            Some(Severity::Advisory),
        ),
        (
            "two bands to JPEG",
            convert(json!({"format": "JPEG", "bands": [1, 2]})),
            byte_3(),
            Some(Severity::Critical),
        ),
        (
            "one band to WEBP",
            convert(json!({"format": "WEBP", "bands": [1]})),
            byte_3(),
            Some(Severity::Critical),
        ),
        (
            "float to DEFLATE GeoTIFF",
            convert(json!({"compression": "DEFLATE", "predictor": 3})),
            f32_1(),
            Some(Severity::Advisory),
        ),
        (
            "COG without overviews",
            convert(json!({"format": "COG"})),
            f32_1(),
            Some(Severity::Advisory),
        ),
        (
            "LERC with an error bound",
            convert(json!({"compression": "LERC_ZSTD", "max_z_error": 0.01})),
            f32_1(),
            Some(Severity::Required),
        ),
        (
            "LERC 0.5 on integers is exact",
            convert(json!({"compression": "LERC", "max_z_error": 0.5})),
            raster("Int16", 1, false),
            Some(Severity::Advisory),
        ),
        (
            "LERC 0 is lossless",
            convert(json!({"compression": "LERC"})),
            f32_1(),
            Some(Severity::Advisory),
        ),
        (
            "JPEG in GeoTIFF via creation options",
            convert(json!({"creation_options": {"compress": "jpeg"}})),
            byte_3(),
            Some(Severity::Required),
        ),
        (
            "JPEG in GeoTIFF next to nodata",
            convert(json!({"compression": "JPEG"})),
            with_nodata(byte_3(), &[Some(0.0); 3]),
            Some(Severity::Critical),
        ),
        (
            "JPEG in GeoTIFF on Float32",
            convert(json!({"compression": "JPEG"})),
            f32_1(),
            Some(Severity::Critical),
        ),
        (
            "narrowing without scale",
            convert(json!({"output_type": "Byte"})),
            f32_1(),
            Some(Severity::Critical),
        ),
        (
            "narrowing with scale",
            convert(json!({"output_type": "Byte", "scale": [0, 1000, 0, 255]})),
            f32_1(),
            Some(Severity::Required),
        ),
        (
            "widening",
            convert(json!({"output_type": "Float64"})),
            raster("Int16", 1, false),
            Some(Severity::Advisory),
        ),
        (
            "Int32 to Float32 narrows",
            convert(json!({"output_type": "Float32"})),
            raster("Int32", 1, false),
            Some(Severity::Critical),
        ),
        (
            "classes to JPEG",
            convert(json!({"format": "JPEG"})),
            raster("Byte", 1, true),
            Some(Severity::Critical),
        ),
        (
            "classes to PNG",
            convert(json!({"format": "PNG"})),
            raster("Byte", 1, true),
            Some(Severity::Advisory),
        ),
        (
            "JPEG drops nodata",
            convert(json!({"format": "JPEG"})),
            with_nodata(raster("Byte", 1, false), &[Some(0.0)]),
            Some(Severity::Critical),
        ),
        (
            "GeoTIFF keeps one nodata",
            convert(json!({})),
            with_nodata(raster("Int16", 2, false), &[Some(0.0), Some(-1.0)]),
            Some(Severity::Critical),
        ),
        (
            "an assigned nodata is one value",
            convert(json!({"nodata": -9999})),
            with_nodata(raster("Int16", 2, false), &[Some(0.0), Some(-1.0)]),
            Some(Severity::Advisory),
        ),
        (
            "PNG with alpha loses nodata",
            convert(json!({"format": "PNG"})),
            with_nodata(raster("Byte", 4, false), &[Some(0.0); 4]),
            Some(Severity::Critical),
        ),
        (
            "PNG grey keeps nodata",
            convert(json!({"format": "PNG"})),
            with_nodata(raster("UInt16", 1, false), &[Some(0.0)]),
            Some(Severity::Advisory),
        ),
        (
            "GeoPackage tiles default to JPEG",
            convert(json!({"format": "GPKG"})),
            byte_3(),
            Some(Severity::Required),
        ),
        (
            "GeoPackage PNG tiles",
            convert(json!({"format": "GPKG", "creation_options": {"TILE_FORMAT": "PNG"}})),
            byte_3(),
            Some(Severity::Advisory),
        ),
        (
            "GeoPackage cannot hold Float64",
            convert(json!({"format": "GPKG"})),
            raster("Float64", 1, false),
            Some(Severity::Critical),
        ),
        (
            "unknown driver",
            convert(json!({"format": "BMP"})),
            f32_1(),
            Some(Severity::Advisory),
        ),
        // Attack round 10, R10-7: every allowed output driver has a row (GDAL 3.6, measured
        // by the host's format_selection_capacity_is_gdal_3_6_measured).
        (
            "HFA holds Float32",
            convert(json!({"format": "HFA"})),
            f32_1(),
            Some(Severity::Advisory),
        ),
        (
            "RST converts Float64 to Float32",
            convert(json!({"format": "RST"})),
            raster("Float64", 1, false),
            Some(Severity::Critical),
        ),
        (
            "RST converts Int32 to Float32",
            convert(json!({"format": "RST"})),
            raster("Int32", 1, false),
            Some(Severity::Critical),
        ),
        (
            "RST holds Float32",
            convert(json!({"format": "RST"})),
            f32_1(),
            Some(Severity::Advisory),
        ),
        (
            "RST keeps UInt16 exactly as Float32",
            convert(json!({"format": "RST"})),
            raster("UInt16", 1, false),
            Some(Severity::Advisory),
        ),
        (
            "GS7BG widens Int32 to Float64",
            convert(json!({"format": "GS7BG"})),
            raster("Int32", 1, false),
            Some(Severity::Advisory),
        ),
        (
            "XYZ writes UInt32 as Float32",
            convert(json!({"format": "XYZ"})),
            raster("UInt32", 1, false),
            Some(Severity::Critical),
        ),
        (
            "SAGA holds one band",
            convert(json!({"format": "SAGA"})),
            raster("Int16", 2, false),
            Some(Severity::Critical),
        ),
        (
            "DISCARD_LSB",
            convert(json!({"compression": "DEFLATE", "creation_options": {"DISCARD_LSB": "4"}})),
            raster("UInt16", 1, false),
            Some(Severity::Required),
        ),
    ];
    for (name, arguments, input, expected) in table {
        let got = classify("raster_convert", arguments, input);
        assert_eq!(severity(&got), expected, "{name}: {}", reason(&got));
        let key = key(&got);
        assert!(
            key.get("input").is_none() && key.get("output").is_none(),
            "{name}: {key}"
        );
    }
}

#[test]
fn raster_keys_name_the_decision() {
    let got = classify(
        "raster_convert",
        json!({"input": "a.tif", "output": "b.jpg", "format": "jpeg"}),
        raster("Byte", 3, false),
    );
    assert_eq!(
        key(&got),
        json!({"operation": "raster_encode", "format": "JPEG", "compression": "JPEG",
               "lossy_by": "JPEG", "quality": 75, "max_z_error": null, "data_types": "Byte",
               "output_type": null, "scaled": false, "bands": 3, "data": "continuous",
               "nodata": "none"})
    );
    let f = classify(
        "raster_convert",
        json!({"format": "JPEG"}),
        raster("Float32", 1, false),
    );
    assert!(reason(&f).contains("Byte data only"), "{}", reason(&f));
    let cog = classify(
        "raster_convert",
        json!({"format": "COG"}),
        raster("Float32", 1, false),
    );
    assert!(reason(&cog).contains("no overviews"), "{}", reason(&cog));
    assert!(reason(&cog).contains("predictor 3"), "{}", reason(&cog));
}

#[test]
fn other_raster_writers_are_gated_only_on_loss() {
    let f32_1 = || raster("Float32", 1, false);
    assert!(classify("raster_reproject", json!({"dst_crs": "EPSG:4326"}), f32_1()).is_none());
    assert!(classify("raster_resample", json!({"format": "COG"}), f32_1()).is_none());
    assert_eq!(
        severity(&classify(
            "raster_reproject",
            json!({"creation_options": {"COMPRESS": "JPEG"}}),
            f32_1()
        )),
        Some(Severity::Critical)
    );
    assert_eq!(
        severity(&classify(
            "raster_resample",
            json!({"creation_options": {"COMPRESS": "LERC", "MAX_Z_ERROR": "0.1"}}),
            f32_1()
        )),
        Some(Severity::Required)
    );
    // Terrain writes Float32 (hillshade Byte) whatever the DEM's type.
    let dem = || raster("Int16", 1, false);
    assert_eq!(
        severity(&classify(
            "raster_terrain",
            json!({"operation": "slope", "format": "PNG"}),
            dem()
        )),
        Some(Severity::Critical)
    );
    assert_eq!(
        severity(&classify(
            "raster_terrain",
            json!({"operation": "hillshade", "format": "JPEG"}),
            dem()
        )),
        Some(Severity::Critical),
        "gdaldem hillshade has a nodata value, which JPEG drops"
    );
    assert!(classify(
        "raster_terrain",
        json!({"operation": "hillshade", "format": "PNG"}),
        dem()
    )
    .is_none());
    assert!(classify(
        "raster_overviews",
        json!({"resampling": "average"}),
        f32_1()
    )
    .is_none());
    assert_eq!(
        severity(&classify(
            "raster_overviews",
            json!({"resampling": "average", "output": "o.tif", "creation_options": {"COMPRESS": "JPEG"}}),
            raster("Byte", 1, true)
        )),
        Some(Severity::Critical)
    );
    // A composite of one band writes that band only.
    let composite = FormatSelection::classify(&Call::new(call(
        "raster_composite",
        json!({"statistic": "max", "band": 2, "format": "PNG"}),
        vec![raster_dataset("input", Some(utm33()), {
            let mut r = raster("Byte", 2, false);
            r.data_types = vec!["Float32".to_string(), "Byte".to_string()];
            r
        })],
    )));
    assert!(composite.is_none(), "{}", reason(&composite));
    assert!(classify("raster_info", json!({}), f32_1()).is_none());
}

fn vector(
    tool: &str,
    arguments: Value,
    layers: &[(&str, &str)],
    crs: Option<CrsFacts>,
) -> Option<Trigger> {
    let input = vector_dataset("input", "GPKG", crs, layers);
    let mut raw = call(tool, arguments.clone(), vec![input]);
    // Without `format`, the driver the host resolves from the output's extension (the host's
    // `gdal::vector::driver_for`), as it sends it.
    if arguments.get("format").is_none() {
        let output_name = arguments["output"]
            .as_str()
            .unwrap_or("")
            .to_ascii_lowercase();
        let driver = [
            (".gpkg", "GPKG"),
            (".geojson", "GeoJSON"),
            (".json", "GeoJSON"),
            (".geojsonl", "GeoJSONSeq"),
            (".fgb", "FlatGeobuf"),
            (".shp", "ESRI Shapefile"),
            (".csv", "CSV"),
            (".kml", "KML"),
            (".gml", "GML"),
            (".sqlite", "SQLite"),
        ]
        .iter()
        .find(|(ext, _)| output_name.ends_with(ext))
        .map(|(_, d)| *d);
        if let Some(driver) = driver {
            raw = with_output(raw, output(driver, &[]));
        }
    }
    if tool == "vector_reproject" {
        raw.target_crs = Some(if arguments["dst_crs"] == json!("EPSG:4326") {
            wgs84()
        } else {
            utm33()
        });
    }
    checked(FormatSelection::classify(&Call::new(raw)))
}

use gdal_mcp_domain_sdk::CrsFacts;

#[test]
fn vector_table() {
    let two = &[("roads", "Line String"), ("parcels", "Multi Polygon")][..];
    let one = &[("parcels", "Multi Polygon")][..];
    let utm = || Some(utm33());
    type Row = (
        &'static str,
        &'static str,
        Value,
        &'static [(&'static str, &'static str)],
        Option<CrsFacts>,
        Option<Severity>,
    );
    let table: Vec<Row> = vec![
        (
            "to GeoPackage",
            "vector_convert",
            json!({"output": "o.gpkg"}),
            two,
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "two layers to GeoJSON",
            "vector_convert",
            json!({"output": "o.geojson"}),
            two,
            Some(wgs84()),
            Some(Severity::Critical),
        ),
        (
            "one chosen layer to GeoJSON",
            "vector_convert",
            json!({"output": "o.geojson", "layer": "parcels"}),
            two,
            Some(wgs84()),
            Some(Severity::Advisory),
        ),
        (
            "GeoJSON in UTM",
            "vector_convert",
            json!({"output": "o.geojson"}),
            one,
            utm(),
            Some(Severity::Required),
        ),
        // From WGS 84 / UTM the driver's move is a conversion on one datum (R23-B14); from
        // NAD27 it is a datum transformation no one reviewed.
        (
            "GeoJSON RFC 7946 converts",
            "vector_convert",
            json!({"output": "o.geojson", "layer_options": {"RFC7946": "YES"}}),
            one,
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "GeoJSON RFC 7946 reprojects",
            "vector_convert",
            json!({"output": "o.geojson", "layer_options": {"RFC7946": "YES"}}),
            one,
            Some(nad27()),
            Some(Severity::Required),
        ),
        (
            "KML from UTM converts",
            "vector_convert",
            json!({"output": "o.kml"}),
            one,
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "KML from NAD27 reprojects",
            "vector_convert",
            json!({"output": "o.kml"}),
            one,
            Some(nad27()),
            Some(Severity::Required),
        ),
        (
            "two layers to a .shp",
            "vector_convert",
            json!({"output": "o.shp"}),
            two,
            utm(),
            Some(Severity::Critical),
        ),
        (
            "two layers to a Shapefile folder",
            "vector_convert",
            json!({"output": "shapes", "format": "ESRI Shapefile"}),
            two,
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "mixed geometries to Shapefile",
            "vector_convert",
            json!({"output": "o.shp"}),
            &[("all", "Unknown (any)")],
            utm(),
            Some(Severity::Critical),
        ),
        (
            "3D polygons to Shapefile",
            "vector_convert",
            json!({"output": "o.shp"}),
            &[("b", "3D Multi Polygon")],
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "curves to GeoJSON",
            "vector_convert",
            json!({"output": "o.geojson"}),
            &[("c", "Curve Polygon")],
            Some(wgs84()),
            Some(Severity::Required),
        ),
        (
            "CSV drops geometry",
            "vector_convert",
            json!({"output": "o.csv"}),
            one,
            utm(),
            Some(Severity::Required),
        ),
        (
            "CSV as WKT",
            "vector_convert",
            json!({"output": "o.csv", "layer_options": {"GEOMETRY": "AS_WKT"}}),
            one,
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "CSV AS_XY for polygons",
            "vector_convert",
            json!({"output": "o.csv", "layer_options": {"GEOMETRY": "AS_XY"}}),
            one,
            utm(),
            Some(Severity::Required),
        ),
        (
            "CSV of a table",
            "vector_convert",
            json!({"output": "o.csv"}),
            &[("t", "None")],
            None,
            Some(Severity::Advisory),
        ),
        (
            "KML from UTM",
            "vector_convert",
            json!({"output": "o.kml"}),
            two,
            utm(),
            Some(Severity::Advisory),
        ),
        (
            "KML without CRS",
            "vector_convert",
            json!({"output": "o.kml"}),
            one,
            None,
            Some(Severity::Critical),
        ),
        (
            "KML in WGS 84",
            "vector_convert",
            json!({"output": "o.kml"}),
            two,
            Some(wgs84()),
            Some(Severity::Advisory),
        ),
        (
            "reproject to UTM as KML",
            "vector_reproject",
            json!({"output": "o.kml", "dst_crs": "EPSG:32633"}),
            one,
            Some(wgs84()),
            Some(Severity::Critical),
        ),
        (
            "reproject to WGS 84 as KML",
            "vector_reproject",
            json!({"output": "o.kml", "dst_crs": "EPSG:4326"}),
            one,
            utm(),
            None,
        ),
        (
            "clip to GeoPackage",
            "vector_clip",
            json!({"output": "o.gpkg", "mask": "m.gpkg"}),
            two,
            utm(),
            None,
        ),
        (
            "clip two layers to GeoJSON",
            "vector_clip",
            json!({"output": "o.geojson", "mask": "m.gpkg"}),
            two,
            Some(wgs84()),
            Some(Severity::Critical),
        ),
        (
            "unknown extension",
            "vector_convert",
            json!({"output": "o.xyz"}),
            one,
            utm(),
            None,
        ),
    ];
    for (name, tool, arguments, layers, crs, expected) in table {
        let got = vector(tool, arguments, layers, crs);
        assert_eq!(severity(&got), expected, "{name}: {}", reason(&got));
    }
    let got = vector(
        "vector_convert",
        json!({"output": "/w/o.geojson", "input": "/w/i.gpkg"}),
        one,
        utm(),
    );
    assert_eq!(
        key(&got),
        json!({"operation": "vector_encode", "format": "GeoJSON", "layers": 1,
               "geometry_types": ["Multi Polygon"], "crs": "EPSG:32633", "crs_requested": false,
               "rfc7946": false, "csv_geometry": null})
    );
}

#[test]
fn validate_wants_format_codec_and_type() {
    let just = |m: &str| json!({"choice": {"method": m}});
    let gtiff_jpeg = json!({"format": "GTiff", "lossy_by": "JPEG", "output_type": null});
    assert!(FormatSelection::validate(
        &gtiff_jpeg,
        &[],
        &just("JPEG-compressed GeoTIFF, quality 75")
    )
    .is_empty());
    assert_eq!(
        FormatSelection::validate(&gtiff_jpeg, &[], &just("GeoTIFF")).len(),
        1
    );
    assert_eq!(
        FormatSelection::validate(&gtiff_jpeg, &[], &just("JPEG")).len(),
        1
    );
    let jpeg = json!({"format": "JPEG", "lossy_by": "JPEG"});
    assert!(FormatSelection::validate(&jpeg, &[], &just("JPG at quality 90")).is_empty());
    let narrowed = json!({"format": "GTiff", "lossy_by": null, "output_type": "Byte"});
    assert!(
        FormatSelection::validate(&narrowed, &[], &just("GTiff as Byte, scaled 0-1000")).is_empty()
    );
    assert_eq!(
        FormatSelection::validate(&narrowed, &[], &just("GTiff")).len(),
        1
    );
    let lerc = json!({"format": "COG", "lossy_by": "LERC_ZSTD"});
    assert!(FormatSelection::validate(&lerc, &[], &just("COG with LERC, 1 cm error")).is_empty());
    let shp = json!({"format": "ESRI Shapefile"});
    assert!(
        FormatSelection::validate(&shp, &[], &just("shapefile for the legacy tool")).is_empty()
    );
    assert_eq!(
        FormatSelection::validate(&shp, &[], &just("GeoPackage")).len(),
        1
    );
    assert_eq!(FormatSelection::validate(&shp, &[], &json!({})).len(), 1);
}

#[test]
fn the_prompt_names_what_to_write() {
    let got = classify(
        "raster_convert",
        json!({"compression": "JPEG"}),
        raster("Byte", 3, false),
    );
    let arguments = got.map(|t| t.prompt_arguments).unwrap_or_default();
    let text = FormatSelection::render_prompt(&arguments);
    assert!(
        text.contains("`GTiff with JPEG`") && !text.contains("{{"),
        "{text}"
    );
}

/// The key fields' values, as a client that answers "what was decided" would write them.
fn decision_text(key: &Value) -> String {
    key.as_object()
        .map(|fields| {
            fields
                .values()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

#[test]
fn a_choice_that_restates_the_decision_is_accepted() {
    let cases = [
        classify(
            "raster_convert",
            json!({"compression": "JPEG"}),
            raster("Byte", 3, false),
        ),
        classify(
            "raster_convert",
            json!({"output_type": "Byte", "scale": [0, 1, 0, 255]}),
            raster("Float32", 1, false),
        ),
        classify(
            "raster_convert",
            json!({"format": "GPKG"}),
            raster("Byte", 3, false),
        ),
        vector(
            "vector_convert",
            json!({"output": "o.shp"}),
            &[("a", "Unknown (any)")],
            Some(utm33()),
        ),
    ];
    for got in cases {
        let key = key(&got);
        let method = decision_text(&key);
        let errors = FormatSelection::validate(&key, &[], &json!({"choice": {"method": method}}));
        assert!(
            errors.is_empty(),
            "{method}: {:?}",
            errors.first().map(|e| &e.message)
        );
    }
}

#[test]
fn raster_findings_are_evidence_with_lossless_alternatives() {
    // JPEG inside a GeoTIFF of class codes: the categorical item names the numbers, and the
    // alternative is DEFLATE with the integer predictor, in typed arguments.
    let got = classify(
        "raster_convert",
        json!({"input": "i.tif", "output": "o.tif", "compression": "JPEG", "quality": 80}),
        raster("Byte", 1, true),
    );
    assert_eq!(severity(&got), Some(Severity::Critical));
    assert_eq!(ids(&got), vec!["lossy_categorical", "lossy_encoding"]);
    let categorical = item(&got, "lossy_categorical");
    assert!(
        categorical.fact.starts_with(
            "band 1 is Byte with a colour table; a 256 × 256 sample of it holds at most 32 \
             distinct integer values; lossy JPEG compression; written: Byte in 1 band(s)"
        ),
        "{}",
        categorical.fact
    );
    let deflate = json!({"compression": "DEFLATE", "predictor": 2, "quality": null});
    assert_eq!(offered(&got, "lossy_categorical"), Some(deflate.clone()));
    assert!(item(&got, "lossy_encoding").fact.contains("quality 80"));
    // LERC on floats: the error bound is in the fact, the alternative floating-point DEFLATE.
    let lerc = classify(
        "raster_convert",
        json!({"output": "o.tif", "compression": "LERC_ZSTD", "max_z_error": 0.01}),
        raster("Float32", 1, false),
    );
    assert_eq!(severity(&lerc), Some(Severity::Required));
    assert!(item(&lerc, "lossy_encoding")
        .fact
        .contains("max_z_error 0.01"));
    assert_eq!(
        offered(&lerc, "lossy_encoding"),
        Some(json!({"compression": "DEFLATE", "predictor": 3, "max_z_error": null}))
    );
    // Other tools take creation options only.
    let warped = classify(
        "raster_reproject",
        json!({"output": "o.tif", "creation_options": {"COMPRESS": "JPEG", "TILED": "YES"}}),
        with_nodata(raster("Byte", 3, false), &[Some(0.0), Some(0.0), Some(0.0)]),
    );
    assert_eq!(severity(&warped), Some(Severity::Critical));
    assert!(item(&warped, "lossy_near_nodata")
        .fact
        .contains("nodata 0, 0, 0"));
    assert_eq!(
        offered(&warped, "lossy_near_nodata"),
        Some(
            json!({"creation_options": {"TILED": "YES", "COMPRESS": "DEFLATE", "PREDICTOR": "2"}})
        )
    );
    // A narrowing output type: the type that holds the data.
    let narrowed = classify(
        "raster_convert",
        json!({"output": "o.tif", "output_type": "Byte"}),
        raster("Float32", 1, false),
    );
    assert_eq!(
        offered(&narrowed, "narrowing_output_type"),
        Some(json!({"output_type": "Float32"}))
    );
    // A format that cannot hold the type: no alternative in the same format.
    let png = classify(
        "raster_convert",
        json!({"output": "o.png", "format": "PNG"}),
        raster("Float32", 1, false),
    );
    assert_eq!(ids(&png), vec!["unsupported_data_type"]);
    assert_eq!(offered(&png, "unsupported_data_type"), None);
    // Per-band nodata: the values are in the fact.
    let per_band = classify(
        "raster_convert",
        json!({"output": "o.tif"}),
        with_nodata(raster("Int16", 2, false), &[Some(-9999.0), None]),
    );
    assert!(item(&per_band, "per_band_nodata")
        .fact
        .contains("nodata -9999, none"));
}

#[test]
fn advisories_carry_their_notes_as_evidence() {
    let cog = classify(
        "raster_convert",
        json!({"output": "o.tif", "format": "COG", "compression": "DEFLATE"}),
        raster("Float32", 1, false),
    );
    assert_eq!(severity(&cog), Some(Severity::Advisory));
    assert_eq!(
        ids(&cog),
        vec!["lossless_write", "cog_without_overviews", "predictor"]
    );
    assert_eq!(
        offered(&cog, "cog_without_overviews"),
        Some(json!({"overviews": {"resampling": "average"}}))
    );
    assert_eq!(offered(&cog, "predictor"), Some(json!({"predictor": 3})));
    let classes = classify(
        "raster_convert",
        json!({"output": "o.tif", "format": "COG"}),
        raster("Byte", 1, true),
    );
    assert_eq!(
        offered(&classes, "cog_without_overviews"),
        Some(json!({"overviews": {"resampling": "mode"}}))
    );
}

#[test]
fn vector_findings_are_evidence_with_the_layers() {
    let shp = vector(
        "vector_convert",
        json!({"output": "o.shp"}),
        &[("a", "Point"), ("b", "Line String")],
        Some(utm33()),
    );
    assert_eq!(severity(&shp), Some(Severity::Critical));
    let fact = item(&shp, "too_many_layers").fact;
    assert!(
        fact.contains("a (Point, 10 features, types met in 10 checked: Point); b (Line String"),
        "{fact}"
    );
    let csv = vector(
        "vector_convert",
        json!({"output": "o.csv", "layer_options": {"SEPARATOR": "SEMICOLON"}}),
        &[("a", "Polygon")],
        Some(utm33()),
    );
    assert_eq!(
        offered(&csv, "csv_geometry_dropped"),
        Some(json!({"layer_options": {"SEPARATOR": "SEMICOLON", "GEOMETRY": "AS_WKT"}}))
    );
    let gpkg = vector(
        "vector_convert",
        json!({"output": "o.gpkg"}),
        &[("a", "Polygon")],
        Some(utm33()),
    );
    assert_eq!(severity(&gpkg), Some(Severity::Advisory));
    assert_eq!(ids(&gpkg), vec!["lossless_write"]);
}

/// A step that wrote `encoding`, `depth` steps up.
fn lossy_step(depth: u32, tool: &str, encoding: &str) -> UpstreamStep {
    UpstreamStep {
        lossy_encoding: Some(encoding.to_string()),
        ..upstream_step(depth, tool)
    }
}

/// Classify `tool` on `input` made through `steps`.
fn classify_made(
    tool: &str,
    arguments: Value,
    input: RasterFacts,
    steps: Vec<UpstreamStep>,
) -> Option<Trigger> {
    let dataset = with_upstream(raster_dataset("input", Some(utm33()), input), steps);
    checked(FormatSelection::classify(&Call::new(call(
        tool,
        arguments,
        vec![dataset],
    ))))
}

#[test]
fn a_second_lossy_encoding_is_evidence_with_a_lossless_alternative() {
    let jpeg_upstream = || {
        vec![
            upstream_step(1, "raster_resample"),
            lossy_step(2, "raster_convert", "JPEG quality 75"),
        ]
    };
    // JPEG inside a GeoTIFF of a JPEG: typed DEFLATE instead.
    let got = classify_made(
        "raster_convert",
        json!({"output": "o.tif", "compression": "JPEG", "quality": 90}),
        raster("Byte", 3, false),
        jpeg_upstream(),
    );
    assert_eq!(severity(&got), Some(Severity::Required));
    assert_eq!(ids(&got), vec!["lossy_encoding", "second_lossy_encoding"]);
    let second = item(&got, "second_lossy_encoding");
    assert!(
        second.fact.starts_with(
            "raster_convert 2 steps up wrote JPEG quality 75; this call writes JPEG quality 90 \
             on top of it; written: Byte in 3 band(s)"
        ),
        "{}",
        second.fact
    );
    assert!(second.why.contains("errors add up"), "{}", second.why);
    assert_eq!(
        offered(&got, "second_lossy_encoding"),
        Some(json!({"compression": "DEFLATE", "predictor": 2, "quality": null}))
    );
    assert_eq!(key(&got)["upstream"], json!("lossy"));
    assert!(reason(&got).contains("already went through JPEG quality 75 upstream"));

    // The JPEG driver has no lossless mode: the alternative is a GeoTIFF.
    let got = classify_made(
        "raster_convert",
        json!({"output": "o.jpg", "format": "JPEG"}),
        raster("Byte", 3, false),
        jpeg_upstream(),
    );
    assert_eq!(offered(&got, "lossy_encoding"), None);
    assert_eq!(
        offered(&got, "second_lossy_encoding"),
        Some(json!({"format": "GTiff", "compression": "DEFLATE", "predictor": 2}))
    );

    // LERC with an error bound after LERC, in a tool that takes creation options.
    let got = classify_made(
        "raster_reproject",
        json!({"output": "o.tif", "resampling": "bilinear",
               "creation_options": {"COMPRESS": "LERC", "MAX_Z_ERROR": "0.5", "TILED": "YES"}}),
        raster("Float32", 1, false),
        vec![lossy_step(1, "raster_convert", "LERC max_z_error 0.5")],
    );
    assert_eq!(severity(&got), Some(Severity::Required));
    assert!(item(&got, "second_lossy_encoding").fact.starts_with(
        "raster_convert 1 step up wrote LERC max_z_error 0.5; this call writes LERC max_z_error \
         0.5 on top of it"
    ));
    assert_eq!(
        offered(&got, "second_lossy_encoding"),
        Some(
            json!({"creation_options": {"TILED": "YES", "COMPRESS": "DEFLATE", "PREDICTOR": "3"}})
        )
    );
    // Critical findings keep their severity.
    let got = classify_made(
        "raster_convert",
        json!({"output": "o.tif", "compression": "WEBP"}),
        raster("Byte", 1, true),
        jpeg_upstream(),
    );
    assert_eq!(severity(&got), Some(Severity::Critical));
    assert!(ids(&got).contains(&"second_lossy_encoding".to_string()));
}

#[test]
fn no_second_lossy_encoding_without_both() {
    let jpeg = || json!({"output": "o.tif", "compression": "JPEG"});
    let mut modified = with_upstream(
        raster_dataset("input", Some(utm33()), raster("Byte", 3, false)),
        Vec::new(),
    );
    modified.upstream.modified_since = true;
    let cases: Vec<(&str, Option<Trigger>)> = vec![
        (
            "made outside the server",
            classify("raster_convert", jpeg(), raster("Byte", 3, false)),
        ),
        (
            "lossless upstream",
            classify_made(
                "raster_convert",
                jpeg(),
                raster("Byte", 3, false),
                vec![resampled_step(1, "raster_resample", "nearest", None)],
            ),
        ),
        (
            "modified since (the host reports it)",
            checked(FormatSelection::classify(&Call::new(call(
                "raster_convert",
                jpeg(),
                vec![modified],
            )))),
        ),
    ];
    for (name, got) in cases {
        assert_eq!(severity(&got), Some(Severity::Required), "{name}");
        assert_eq!(ids(&got), vec!["lossy_encoding"], "{name}");
        assert_eq!(key(&got).get("upstream"), None, "{name}");
    }
    // A lossless write of a JPEG-encoded input loses nothing more.
    let got = classify_made(
        "raster_convert",
        json!({"output": "o.tif", "compression": "DEFLATE"}),
        raster("Byte", 3, false),
        vec![lossy_step(1, "raster_convert", "JPEG quality 75")],
    );
    assert_eq!(severity(&got), Some(Severity::Advisory));
    assert!(!ids(&got).contains(&"second_lossy_encoding".to_string()));
}

// ---------------------------------------------------------------------------------------------
// Issue 21: lossiness is a fact measured, not assumed; every writer, raster_calc included.

fn calc(arguments: Value) -> Option<Trigger> {
    let dataset = raster_dataset("inputs.a", Some(utm33()), raster("Float32", 1, false));
    checked(FormatSelection::classify(&Call::new(call(
        "raster_calc",
        arguments,
        vec![dataset],
    ))))
}

/// Regression (issue 21): JPEG 2000 with its defaults got only an advisory, WebP at quality
/// 100 passed as lossless, and raster_calc wrote LERC or JPEG with no gate.
#[test]
fn jpeg2000_webp_at_100_and_band_math_are_judged_on_their_loss() {
    let rgb = || raster("Byte", 3, false);
    let jp2 = classify("raster_convert", json!({"format": "JP2OpenJPEG"}), rgb());
    assert_eq!(severity(&jp2), Some(Severity::Required), "{}", reason(&jp2));
    assert_eq!(key(&jp2)["lossy_by"], json!("JPEG2000"));
    assert_eq!(
        offered(&jp2, "lossy_encoding"),
        Some(json!({"creation_options": {"REVERSIBLE": "YES", "QUALITY": "100"}}))
    );
    let lossless_jp2 = classify(
        "raster_convert",
        json!({"format": "JP2OpenJPEG", "creation_options": {"REVERSIBLE": "YES", "QUALITY": "100"}}),
        rgb(),
    );
    assert_eq!(severity(&lossless_jp2), Some(Severity::Advisory));
    let webp = classify(
        "raster_convert",
        json!({"compression": "WEBP", "quality": 100}),
        rgb(),
    );
    assert_eq!(severity(&webp), Some(Severity::Required));
    let cog = classify(
        "raster_convert",
        json!({"format": "COG", "compression": "WEBP", "quality": 100}),
        rgb(),
    );
    assert_eq!(severity(&cog), Some(Severity::Advisory));

    // Band math: silent when lossless, gated when the options lose values.
    assert!(calc(json!({"data_type": "Float32"})).is_none());
    let lerc = calc(json!({"data_type": "Float32",
                            "creation_options": {"COMPRESS": "LERC", "MAX_Z_ERROR": "0.5"}}));
    assert_eq!(severity(&lerc), Some(Severity::Required));
    assert_eq!(
        offered(&lerc, "lossy_encoding"),
        Some(json!({"creation_options": {"COMPRESS": "DEFLATE", "PREDICTOR": "3"}}))
    );
    let jpeg = calc(json!({"data_type": "Float32", "creation_options": {"COMPRESS": "JPEG"}}));
    assert_eq!(severity(&jpeg), Some(Severity::Critical));
    assert!(ids(&jpeg).contains(&"codec_data_type".to_string()));
    assert!(ids(&jpeg).contains(&"lossy_near_nodata".to_string()));
}

/// The host's output fact decides: what it measured lossy is lossy, with its words, and the
/// driver is the one it resolved (WIT 0.6; before, `_encoding` in the arguments).
#[test]
fn the_host_output_fact_decides() {
    let with_fact = |tool: &str, arguments: Value, input: RasterFacts, fact: OutputFacts| {
        let dataset = raster_dataset("input", Some(utm33()), input);
        checked(FormatSelection::classify(&Call::new(with_output(
            call(tool, arguments, vec![dataset]),
            fact,
        ))))
    };
    let nbits = OutputFacts {
        compression: Some("DEFLATE".to_string()),
        lossy: true,
        losses: vec![EncodingLoss {
            codec: "NBITS".to_string(),
            text: "NBITS=12 stores fewer bits".to_string(),
        }],
        ..output("GTiff", &[("NBITS", "12")])
    };
    let got = with_fact(
        "raster_resample",
        json!({}),
        raster("UInt16", 1, false),
        nbits,
    );
    assert_eq!(severity(&got), Some(Severity::Required));
    assert!(
        reason(&got).contains("NBITS=12 stores fewer bits"),
        "{}",
        reason(&got)
    );
    let clean = OutputFacts {
        compression: Some("JPEG2000".to_string()),
        quality: Some(100.0),
        ..output("JP2OpenJPEG", &[("REVERSIBLE", "YES"), ("QUALITY", "100")])
    };
    let got = with_fact(
        "raster_convert",
        json!({"format": "jp2openjpeg"}),
        raster("Byte", 1, false),
        clean,
    );
    assert_eq!(severity(&got), Some(Severity::Advisory), "{}", reason(&got));
    assert!(reason(&got).contains("JP2OpenJPEG"), "{}", reason(&got));

    // A vector output by the driver the host resolved, whatever the extension says: GPX,
    // which the plugin's old extension table knew and the host's did not.
    let input = vector_dataset("input", "GPKG", None, &[("roads", "Line String")]);
    let written = FormatSelection::classify(&Call::new(with_output(
        call(
            "vector_convert",
            json!({"input": "in.gpkg", "output": "out.gpx"}),
            vec![input.clone()],
        ),
        output("GPKG", &[]),
    )));
    assert!(
        reason(&written).starts_with("GPKG holds these layers"),
        "{}",
        reason(&written)
    );
    let unresolved = FormatSelection::classify(&Call::new(call(
        "vector_convert",
        json!({"input": "in.gpkg", "output": "out.gpx"}),
        vec![input],
    )));
    assert!(unresolved.is_none(), "{}", reason(&unresolved));
}

fn justify(method: &str, answers: Value, alternatives: Value, tradeoffs: &str) -> Value {
    json!({"intent": "an archive of the DEM", "alternatives": alternatives,
           "choice": {"method": method, "rationale": "r", "tradeoffs": tradeoffs},
           "confidence": "medium", "evidence": answers})
}

fn errors_of(trigger: &Option<Trigger>, justification: &Value) -> Vec<FieldError> {
    let t = trigger.as_ref().expect("gated");
    FormatSelection::validate(&key(trigger), &t.evidence, justification)
}

/// Issue 18 rule 3 for format_selection: a justification that only acknowledges is refused;
/// one that bounds the loss with a number and rejects the offered alternative passes.
#[test]
fn validate_checks_content_not_acknowledgement() {
    let lerc = classify(
        "raster_convert",
        json!({"compression": "LERC", "max_z_error": 0.5}),
        raster("Float32", 1, false),
    );
    let boilerplate = "Acknowledged: the finding is understood and accepted for this analysis.";
    let hurried = justify(
        "GeoTIFF with LERC",
        json!({"lossy_encoding": boilerplate}),
        json!([{"method": "other", "why_not": boilerplate}]),
        boilerplate,
    );
    let errors = errors_of(&lerc, &hurried);
    assert!(
        errors.iter().any(|e| e.path == "/evidence/lossy_encoding"),
        "{errors:?}"
    );
    // Restating the fact is no answer either.
    let fact = item(&lerc, "lossy_encoding").fact;
    let restated = justify(
        "GeoTIFF with LERC",
        json!({"lossy_encoding": fact}),
        json!([{"method": "DEFLATE", "why_not": "bigger"}]),
        "t",
    );
    assert!(!errors_of(&lerc, &restated).is_empty());
    // Too small a tolerance for the bound.
    let small = justify(
        "GeoTIFF with LERC",
        json!({"lossy_encoding": "heights within 0.1 m are enough for the flood screening"}),
        json!([{"method": "DEFLATE predictor 3", "why_not": "three times larger"}]),
        "t",
    );
    let errors = errors_of(&lerc, &small);
    assert!(
        errors
            .iter()
            .any(|e| e.message.contains("no smaller than 0.5")),
        "{errors:?}"
    );
    // The careful answer.
    let careful = justify(
        "GeoTIFF with LERC, max_z_error 0.5",
        json!({"lossy_encoding": "the DEM's vertical accuracy is 2 m, so errors up to 0.5 m \
                                   stay below its noise for the flood screening"}),
        json!([{"method": "DEFLATE with predictor 3",
                "why_not": "three times larger for the web archive, and the 0.5 m error is below the noise"}]),
        "0.5 m at most per cell",
    );
    let errors = errors_of(&lerc, &careful);
    assert!(errors.is_empty(), "{errors:?}");

    // One answer pasted under every finding of a critical decision is refused.
    let classes = classify(
        "raster_convert",
        json!({"compression": "JPEG"}),
        raster("Byte", 1, true),
    );
    let pasted = justify(
        "GeoTIFF with JPEG",
        json!({"lossy_categorical": "quality 90 is fine for a quick preview map",
               "lossy_encoding": "quality 90 is fine for a quick preview map"}),
        json!([{"method": "DEFLATE", "why_not": "the preview must be small"}]),
        "t",
    );
    let errors = errors_of(&classes, &pasted);
    assert!(
        errors.iter().any(|e| e.message.contains("the same answer")),
        "{errors:?}"
    );
}

/// `vector_convert` of one polygon layer to `output` with the host's output fact for `driver`
/// carrying `losses` (codec, text).
fn vector_with_losses(
    tool: &str,
    output: &str,
    driver: &str,
    losses: &[(&str, &str)],
) -> Option<Trigger> {
    let input = vector_dataset("input", "GPKG", Some(utm33()), &[("parcels", "Polygon")]);
    let raw = call(
        tool,
        json!({"input": "in.gpkg", "output": output}),
        vec![input],
    );
    let mut fact = output_fact(driver);
    fact.losses = losses
        .iter()
        .map(|(codec, text)| EncodingLoss {
            codec: (*codec).to_string(),
            text: (*text).to_string(),
        })
        .collect();
    fact.lossy = !fact.losses.is_empty();
    checked(FormatSelection::classify(&Call::new(with_output(
        raw, fact,
    ))))
}

fn output_fact(driver: &str) -> OutputFacts {
    output(driver, &[])
}

/// R13-B8 (attack round 13): a Shapefile write whose fields the host measured as not fitting
/// (names cut and renumbered, a DateTime's time, a 300-character string) is a required
/// `schema_lost` naming each field, offering GeoPackage, and never `lossless_write`; the
/// clean twin (every field fits) stays an advisory `lossless_write` with the Shapefile note,
/// and a loss of the encoding (none for vectors) is not taken for a schema loss.
#[test]
fn r13_b8_schema_lost_names_the_fields_and_the_clean_twin_stays_advisory() {
    let names = "field names longer than 10 characters are cut, and names that collide once \
                 cut are renumbered: `population_2020` as `population`, `population_2021` as \
                 `populati_1`";
    let lossy = vector_with_losses(
        "vector_convert",
        "work/o.shp",
        "ESRI Shapefile",
        &[
            ("field_name", names),
            (
                "date_time",
                "the DateTime field `surveyed` is written as Date",
            ),
            (
                "string_length",
                "the string field `note` holds 1 value longer than 254",
            ),
        ],
    );
    assert_eq!(severity(&lossy), Some(Severity::Required));
    assert_eq!(ids(&lossy), vec!["schema_lost"]);
    let text = reason(&lossy);
    for needle in [
        "`populati_1`",
        "`surveyed`",
        "`note`",
        "GeoPackage or FlatGeobuf",
    ] {
        assert!(text.contains(needle), "{text}");
    }
    assert!(!text.contains("without loss"), "{text}");
    assert_eq!(
        offered(&lossy, "schema_lost"),
        Some(json!({"format": "GPKG", "output": "work/o.gpkg"}))
    );
    assert!(key(&lossy)["schema_lost"].is_array());
    // vector_reproject and vector_clip are gated only when something is lost: here it is.
    for tool in ["vector_reproject", "vector_clip"] {
        let got = vector_with_losses(tool, "o.shp", "ESRI Shapefile", &[("field_name", names)]);
        assert_eq!(ids(&got), vec!["schema_lost"], "{tool}");
    }
    // MapInfo: the host measures its limits too, though the domain has no table for it.
    let tab = vector_with_losses(
        "vector_convert",
        "o.tab",
        "MapInfo File",
        &[("string_length", "the string field `note` ...")],
    );
    assert_eq!(ids(&tab), vec!["schema_lost"]);

    // Clean twins: the same layer whose fields fit, to Shapefile and to FlatGeobuf.
    let clean = vector_with_losses("vector_convert", "o.shp", "ESRI Shapefile", &[]);
    assert_eq!(severity(&clean), Some(Severity::Advisory));
    assert_eq!(ids(&clean), vec!["lossless_write", "shapefile_limits"]);
    assert!(reason(&clean).contains("they fit"), "{}", reason(&clean));
    let fgb = vector_with_losses("vector_convert", "o.fgb", "FlatGeobuf", &[]);
    assert_eq!(ids(&fgb), vec!["lossless_write"]);
    assert!(vector_with_losses("vector_reproject", "o.shp", "ESRI Shapefile", &[]).is_none());
}

/// Round 14, item 2 (measured with GDAL 3.6.2): GeoPackage Byte tiles of 2, 3 and 4 bands keep
/// one nodata value for the whole file, read back on every band, as GeoTIFF does; `nodata_lost`
/// for them was a false alarm. PNG tiles with a uniform nodata are lossless; the default
/// `PNG_JPEG` of 3 bands blurs the cells next to nodata (`lossy_near_nodata`); bands with
/// different nodata values share the last one (`per_band_nodata`); JPEG still loses it.
#[test]
fn gpkg_multi_band_keeps_one_nodata_value() {
    let png = json!({"format": "GPKG", "creation_options": {"TILE_FORMAT": "PNG"}});
    let uniform = || with_nodata(raster("Byte", 3, false), &[Some(0.0); 3]);
    let tiles = classify("raster_convert", png.clone(), uniform());
    assert_eq!(
        severity(&tiles),
        Some(Severity::Advisory),
        "{}",
        reason(&tiles)
    );
    assert_eq!(ids(&tiles), vec!["lossless_write"]);
    let two = classify(
        "raster_convert",
        png.clone(),
        with_nodata(raster("Byte", 2, false), &[Some(7.0); 2]),
    );
    assert_eq!(severity(&two), Some(Severity::Advisory), "{}", reason(&two));
    let jpeg_tiles = classify("raster_convert", json!({"format": "GPKG"}), uniform());
    let found = ids(&jpeg_tiles);
    assert!(found.iter().any(|i| i == "lossy_near_nodata"), "{found:?}");
    assert!(!found.iter().any(|i| i == "nodata_lost"), "{found:?}");
    let per_band = classify(
        "raster_convert",
        png,
        with_nodata(raster("Byte", 3, false), &[Some(0.0), Some(1.0), Some(2.0)]),
    );
    assert_eq!(ids(&per_band), vec!["per_band_nodata"]);
    let jpeg = classify("raster_convert", json!({"format": "JPEG"}), uniform());
    assert!(ids(&jpeg).iter().any(|i| i == "nodata_lost"));
}
