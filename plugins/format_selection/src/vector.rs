//! Vector outputs: how many layers, which geometry types and which CRS a driver holds, and
//! what CSV does with geometries.

use super::{note, option, truthy, Assessment, Finding};
use gdal_mcp_domain_sdk::{crs_label, json, Call, CrsFacts, CrsKind, LayerFacts, Severity, Value};

/// Tools that write a vector dataset in a format of the caller's choosing.
pub(crate) const TOOLS: &[&str] = &["vector_convert", "vector_reproject", "vector_clip"];

/// Geometry types (OGR names, without `3D`/`Measured`) that mix kinds in one layer.
const MIXED: &[&str] = &["Unknown (any)", "Geometry Collection", "Geometry"];

/// Curved geometry types.
const CURVES: &[&str] = &[
    "Circular String",
    "Compound Curve",
    "Curve Polygon",
    "Multi Curve",
    "Multi Surface",
    "Curve",
    "Surface",
];

/// Formats without curved geometries (arcs are linearised).
const NO_CURVES: &[&str] = &[
    "ESRI Shapefile",
    "GeoJSON",
    "GeoJSONSeq",
    "KML",
    "LIBKML",
    "GPX",
];

/// Drivers whose limits this domain knows.
const KNOWN: &[&str] = &[
    "GPKG",
    "GeoJSON",
    "GeoJSONSeq",
    "FlatGeobuf",
    "ESRI Shapefile",
    "CSV",
    "KML",
    "LIBKML",
    "GML",
    "SQLite",
];

/// Formats that always store WGS 84 longitude/latitude (the driver reprojects).
const ALWAYS_WGS84: &[&str] = &["KML", "LIBKML", "GeoJSONSeq"];

/// The kinds of attribute-field loss the host measures for a vector output (its
/// `output.losses` codecs): renamed fields, date-times cut to dates, strings cut, fields not
/// written, 64-bit integers turned into reals, reals cut to a Shapefile's width (since 0.6.6).
const SCHEMA_LOSSES: &[&str] = &[
    "field_name",
    "date_time",
    "string_length",
    "field_dropped",
    "integer64",
    "real_precision",
    "text_encoding",
];

/// Ready-to-use arguments that write the output with `driver` instead, the output's extension
/// changed to `extension`.
fn elsewhere(call: &Call, driver: &str, extension: &str) -> Value {
    let output = call.arg_str("output").unwrap_or("");
    let stem = match output.rfind('.') {
        Some(dot) if !output[dot..].contains('/') => &output[..dot],
        _ => output,
    };
    json!({"format": driver, "output": format!("{stem}.{extension}")})
}

/// The canonical spelling of a vector driver name.
fn canonical(format: &str) -> String {
    match format.to_ascii_uppercase().as_str() {
        "GPKG" | "GEOPACKAGE" => "GPKG",
        "GEOJSON" => "GeoJSON",
        "GEOJSONSEQ" => "GeoJSONSeq",
        "FLATGEOBUF" | "FGB" => "FlatGeobuf",
        "ESRI SHAPEFILE" | "SHAPEFILE" | "SHP" => "ESRI Shapefile",
        "CSV" => "CSV",
        "KML" => "KML",
        "LIBKML" => "LIBKML",
        "GML" => "GML",
        "SQLITE" => "SQLite",
        "GPX" => "GPX",
        _ => format,
    }
    .to_string()
}

/// Whether the output is one file that holds a single layer.
fn single_layer(format: &str, output: &str) -> bool {
    let ends = |ext: &str| output.to_ascii_lowercase().ends_with(ext);
    match format {
        "GeoJSON" | "GeoJSONSeq" => true,
        "FlatGeobuf" => ends(".fgb"),
        "CSV" => ends(".csv"),
        "ESRI Shapefile" => ends(".shp"),
        _ => false,
    }
}

/// The OGR geometry type without its `3D` and `Measured` prefixes.
/// The Shapefile type a layer's checked features all fit, when they were all checked and are
/// polygons and multipolygons only, or lines and multilines only, in one dimension.
fn one_family(layer: &LayerFacts) -> Option<String> {
    let all_checked = layer
        .feature_count
        .is_some_and(|n| n > 0 && n <= layer.features_checked);
    if !all_checked || layer.geometry_types.is_empty() {
        return None;
    }
    let mut family: Option<String> = None;
    for name in &layer.geometry_types {
        let dimension = name.len() - base_geometry(name).len();
        let kind = match base_geometry(name) {
            "Polygon" | "Multi Polygon" => "polygon",
            "Line String" | "Multi Line String" => "line",
            _ => return None,
        };
        let this = format!("{}{kind}", &name[..dimension]);
        match &family {
            Some(seen) if *seen != this => return None,
            _ => family = Some(this),
        }
    }
    family
}

fn base_geometry(name: &str) -> &str {
    let name = name.strip_prefix("3D ").unwrap_or(name);
    name.strip_prefix("Measured ").unwrap_or(name)
}

/// WGS 84 longitude and latitude, as GeoJSON and KML store them: EPSG:4326 or OGC:CRS84 by
/// id, or a geographic CRS on the WGS 84 datum (its ensemble included) with no vertical part,
/// whatever its id or axis order: a GeoPackage layer in OGC:CRS84 (RFC 7946's own CRS, the
/// default of OGC API Features) was refused for GeoJSON and KML while ogr2ogr wrote it
/// byte-identical to the EPSG:4326 twin (attack round 15, R15-B11).
fn is_wgs84(crs: &CrsFacts) -> bool {
    let by_id = crs.id.as_deref().is_some_and(|id| {
        id.eq_ignore_ascii_case("EPSG:4326") || id.eq_ignore_ascii_case("OGC:CRS84")
    });
    let by_datum = crs.kind == CrsKind::Geographic && crs.vertical.is_none() && on_wgs84_datum(crs);
    by_id || by_datum
}

/// A CRS on the WGS 84 datum (its ensemble included), projected or geographic, with no
/// vertical part: moving it to WGS 84 longitude and latitude changes no datum.
fn on_wgs84_datum(crs: &CrsFacts) -> bool {
    crs.vertical.is_none()
        && crs.datum.as_deref().is_some_and(|d| {
            let d = d.to_ascii_lowercase().replace([' ', '_'], "");
            d == "wgs1984"
                || d == "worldgeodeticsystem1984"
                || d == "worldgeodeticsystem1984ensemble"
        })
}

/// A layer in numbers: `roads (Line String, 120 features; types met in 100 checked: Line
/// String, Point)`.
fn layer_text(layer: &LayerFacts) -> String {
    let mut parts = vec![layer.geometry_type.clone()];
    if let Some(n) = layer.feature_count {
        parts.push(format!("{n} features"));
    }
    if layer.features_checked > 0 && !layer.geometry_types.is_empty() {
        parts.push(format!(
            "types met in {} checked: {}",
            layer.features_checked,
            layer.geometry_types.join(", ")
        ));
    }
    format!("{} ({})", layer.name, parts.join(", "))
}

/// The call's layer options with `key` set to `value`, as ready-to-use arguments; `None` for
/// tools without `layer_options` (only `vector_convert` takes them).
fn with_layer_option(call: &Call, key: &str, value: &str) -> Option<Value> {
    if call.tool() != "vector_convert" {
        return None;
    }
    let mut options: serde_json::Map<String, Value> = call
        .args
        .get("layer_options")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter(|(k, _)| !k.eq_ignore_ascii_case(key))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    options.insert(key.to_string(), json!(value));
    Some(json!({ "layer_options": options }))
}

/// Judge a vector-writing call.
pub(crate) fn assess(call: &Call) -> Option<Assessment> {
    let tool = call.tool();
    let output = call.arg_str("output").unwrap_or("");
    // The driver the host resolved (from `format` or the output's extension) and will use;
    // a domain never guesses it from the extension.
    let format = match (call.output(), call.arg_str("format")) {
        (Some(written), _) => written.driver.clone(),
        (None, Some(f)) => canonical(f),
        (None, None) => return None,
    };
    let input = call.dataset("input")?;
    let layers = &input.vector.as_ref()?.layers;
    let written_layers: Vec<&LayerFacts> = match call.arg_str("layer") {
        Some(name) => layers.iter().filter(|l| l.name == name).collect(),
        None => layers.iter().collect(),
    };
    let written: Vec<&str> = written_layers
        .iter()
        .map(|l| l.geometry_type.as_str())
        .collect();
    let layers_text = written_layers
        .iter()
        .map(|l| layer_text(l))
        .collect::<Vec<_>>()
        .join("; ");
    let mut geometry_types: Vec<String> = written.iter().map(|g| (*g).to_string()).collect();
    geometry_types.sort();
    geometry_types.dedup();
    let bases: Vec<&str> = written.iter().map(|g| base_geometry(g)).collect();
    let mut findings = Vec::new();
    let mut notes = Vec::new();

    if single_layer(&format, output) && written.len() > 1 {
        findings.push(
            Finding::new(
                Severity::Critical,
                "too_many_layers",
                format!(
                    "{format} holds one layer per file, and the call writes {} layers: pass \
                     `layer`, or write a GeoPackage",
                    written.len()
                ),
            )
            .with_fact(format!(
                "{format} holds one layer per file; the call writes {}: {layers_text}",
                written.len()
            )),
        );
    }
    if format == "ESRI Shapefile" {
        // A layer declared of any type whose every feature, all checked, is a polygon or a
        // multipolygon (or a line and a multiline), in one dimension, is written whole: a
        // Shapefile's polygon and arc types are multi-part (attack round 15, R15-B10: the
        // usual boundary layer, islands making some features multi-part, was refused as
        // critical). Points and multipoints are two Shapefile types, so they stay a finding.
        let mixed = written_layers
            .iter()
            .any(|l| MIXED.contains(&base_geometry(&l.geometry_type)) && one_family(l).is_none());
        if mixed {
            findings.push(
                Finding::new(
                    Severity::Critical,
                    "mixed_geometries",
                    "a Shapefile holds one simple geometry type per layer: a layer of mixed types \
                     or geometry collections cannot be written whole",
                )
                .with_fact(format!(
                    "a Shapefile holds one simple geometry type per layer; the call writes \
                     {layers_text}"
                )),
            );
        }
        let unread: Vec<String> = written_layers
            .iter()
            .filter(|l| l.feature_count.is_some_and(|n| n > l.features_checked))
            .map(|l| {
                format!(
                    "{} ({} of {} features)",
                    l.name,
                    l.features_checked,
                    l.feature_count.unwrap_or(0)
                )
            })
            .collect();
        let unread = if unread.is_empty() {
            String::new()
        } else {
            format!(
                "; strings and date-times were read only in the features checked of {}",
                unread.join(", ")
            )
        };
        notes.push(note(
            "shapefile_limits",
            format!(
                "the host checked the fields against Shapefile's limits (names of 10 \
                 characters, strings of 254 in the DBF's encoding, dates without time, no binary \
                 fields, numbers of 24 characters with 15 decimals) and they fit{unread}; a \
                 Shapefile stops at 2 GB"
            ),
        ));
    }
    // What the driver cannot hold of the attribute fields, measured by the host from the
    // layers' schema and values before the write (attack round 13, R13-B8).
    let schema: Vec<&str> = call
        .output()
        .map(|o| {
            o.losses
                .iter()
                .filter(|l| SCHEMA_LOSSES.contains(&l.codec.as_str()))
                .map(|l| l.text.as_str())
                .collect()
        })
        .unwrap_or_default();
    if !schema.is_empty() {
        let keeps = if written.len() == 1 {
            "GeoPackage or FlatGeobuf keep"
        } else {
            "GeoPackage keeps"
        };
        findings.push(
            Finding::new(
                Severity::Required,
                "schema_lost",
                format!(
                    "{format} cannot hold these fields as they are: {}; {keeps} every field",
                    schema.join("; ")
                ),
            )
            .with_fact(format!("{format}: {}", schema.join("; ")))
            .or_use(Some(elsewhere(call, "GPKG", "gpkg"))),
        );
    }
    if NO_CURVES.contains(&format.as_str()) && bases.iter().any(|b| CURVES.contains(b)) {
        let curved: Vec<String> = written_layers
            .iter()
            .filter(|l| CURVES.contains(&base_geometry(&l.geometry_type)))
            .map(|l| layer_text(l))
            .collect();
        findings.push(
            Finding::new(
                Severity::Required,
                "curves_linearised",
                format!(
                    "{format} has no curved geometries: arcs are replaced by straight segments"
                ),
            )
            .with_fact(format!(
                "{format} has no curved geometries; curved layer(s): {}",
                curved.join("; ")
            )),
        );
    }
    let csv_geometry = (format == "CSV")
        .then(|| option(call, "layer_options", "GEOMETRY").map(|g| g.to_ascii_uppercase()))
        .flatten();
    if format == "CSV" && bases.iter().any(|b| *b != "None") {
        match csv_geometry.as_deref() {
            None => findings.push(
                Finding::new(
                    Severity::Required,
                    "csv_geometry_dropped",
                    "CSV drops the geometry unless the layer option GEOMETRY=AS_WKT (or AS_XY \
                     for points) keeps it",
                )
                .or_use(with_layer_option(call, "GEOMETRY", "AS_WKT")),
            ),
            Some(g @ ("AS_XY" | "AS_YX" | "AS_XYZ"))
                if bases.iter().any(|b| !matches!(*b, "Point" | "None")) =>
            {
                findings.push(
                    Finding::new(
                        Severity::Required,
                        "csv_points_only",
                        format!(
                            "GEOMETRY={g} writes point coordinates only: lines and polygons \
                             lose their geometry"
                        ),
                    )
                    .or_use(with_layer_option(call, "GEOMETRY", "AS_WKT")),
                )
            }
            _ => {}
        }
    }

    // CRS: some formats are WGS 84 longitude/latitude by definition.
    let reprojecting = tool == "vector_reproject";
    let written_crs = if reprojecting {
        call.raw.target_crs.as_ref()
    } else {
        input.crs.as_ref()
    };
    let rfc7946 = (format == "GeoJSON")
        .then(|| option(call, "layer_options", "RFC7946").is_some_and(|v| truthy(&v)));
    let crs_sensitive = ALWAYS_WGS84.contains(&format.as_str()) || format == "GeoJSON";
    if crs_sensitive {
        let always = ALWAYS_WGS84.contains(&format.as_str()) || rfc7946 == Some(true);
        match written_crs {
            Some(crs) if is_wgs84(crs) => {}
            None if always => findings.push(Finding::new(
                Severity::Critical,
                "crs_missing",
                format!(
                    "{format} stores WGS 84 longitude/latitude and the data has no CRS: its \
                     coordinates are written as if they were longitudes and latitudes"
                ),
            )),
            None => findings.push(Finding::new(
                Severity::Required,
                "crs_missing",
                "GeoJSON readers assume WGS 84 longitude/latitude, and the data has no CRS",
            )),
            Some(crs) if always && reprojecting => findings.push(Finding::new(
                Severity::Critical,
                "crs_not_kept",
                format!(
                    "{format} always stores WGS 84 longitude/latitude: the output will not be in \
                     the requested {}",
                    crs_label(crs)
                ),
            )),
            // On the WGS 84 datum already (WGS 84 / UTM, Web Mercator), the driver's move to
            // longitude and latitude is a projection conversion, exact: no datum
            // transformation to review (attack round 23, R23-B14: KML from EPSG:32633 was asked
            // as "a datum transformation no one reviewed").
            Some(crs) if always && on_wgs84_datum(crs) => notes.push(note(
                "driver_converts",
                format!(
                    "{format} stores WGS 84 longitude/latitude: the driver converts from {} on \
                     its own datum (a projection conversion, exact)",
                    crs_label(crs)
                ),
            )),
            Some(crs) if always => findings.push(Finding::new(
                Severity::Required,
                "driver_reprojects",
                format!(
                    "{format} stores WGS 84 longitude/latitude: the driver reprojects from {} \
                     with a datum transformation no one reviewed",
                    crs_label(crs)
                ),
            )),
            Some(crs) => findings.push(Finding::new(
                Severity::Required,
                "non_standard_crs",
                format!(
                    "GeoJSON (RFC 7946) is WGS 84 longitude/latitude: GDAL writes {} \
                     coordinates with a non-standard `crs` member that most web clients ignore",
                    crs_label(crs)
                ),
            )),
        }
    }
    if KNOWN.contains(&format.as_str()) {
        notes.insert(
            0,
            note(
                "lossless_write",
                format!("{format} holds these layers without loss"),
            )
            .with_fact(format!("{format} holds {layers_text}")),
        );
    } else {
        notes.insert(
            0,
            note(
                "unknown_driver",
                format!(
                    "this domain has no capability table for the {format} driver: check that it \
                     holds {} layer(s) of {} and the CRS",
                    written.len(),
                    geometry_types.join(", ")
                ),
            ),
        );
    }

    let crs_text = written_crs
        .map(crs_label)
        .unwrap_or_else(|| "none".to_string());
    let data = format!(
        "{} layer(s): {}; CRS {crs_text}",
        written.len(),
        geometry_types.join(", ")
    );
    let mut encoding = format.clone();
    if let Some(g) = &csv_geometry {
        encoding.push_str(&format!(", GEOMETRY={g}"));
    }
    if rfc7946 == Some(true) {
        encoding.push_str(", RFC7946=YES");
    }
    let key_fields = json!({
        "operation": "vector_encode",
        "format": format,
        "layers": written.len(),
        "geometry_types": geometry_types,
        "crs": crs_sensitive.then(|| crs_text.clone()),
        "crs_requested": crs_sensitive.then_some(reprojecting),
        "rfc7946": rfc7946,
        "csv_geometry": csv_geometry,
    });
    // Only when something is lost, so that every other decision keeps its key.
    let mut key_fields = key_fields;
    if let (false, Some(fields)) = (schema.is_empty(), key_fields.as_object_mut()) {
        fields.insert("schema_lost".to_string(), json!(schema));
    }
    Some(Assessment {
        findings,
        notes,
        advise_when_clean: tool == "vector_convert",
        key_fields,
        format: format.clone(),
        encoding,
        data,
        expected: format,
    })
}
