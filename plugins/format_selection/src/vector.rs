//! Vector outputs: how many layers, which geometry types and which CRS a driver holds, and
//! what CSV does with geometries.

use super::{option, truthy, Assessment, Finding};
use gdal_mcp_domain_sdk::{crs_label, json, Call, CrsFacts, Severity};

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

/// The driver the host picks from the output extension.
fn from_extension(output: &str) -> Option<&'static str> {
    let extension = output.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "gpkg" => "GPKG",
        "geojson" | "json" => "GeoJSON",
        "geojsonl" | "geojsons" => "GeoJSONSeq",
        "fgb" => "FlatGeobuf",
        "shp" => "ESRI Shapefile",
        "csv" => "CSV",
        "kml" => "KML",
        "gml" => "GML",
        "sqlite" => "SQLite",
        "gpx" => "GPX",
        _ => return None,
    })
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
fn base_geometry(name: &str) -> &str {
    let name = name.strip_prefix("3D ").unwrap_or(name);
    name.strip_prefix("Measured ").unwrap_or(name)
}

fn is_wgs84(crs: &CrsFacts) -> bool {
    crs.id.as_deref().is_some_and(|id| {
        id.eq_ignore_ascii_case("EPSG:4326") || id.eq_ignore_ascii_case("OGC:CRS84")
    })
}

/// Judge a vector-writing call.
pub(crate) fn assess(call: &Call) -> Option<Assessment> {
    let tool = call.tool();
    let output = call.arg_str("output").unwrap_or("");
    let format = match call.arg_str("format") {
        Some(f) => canonical(f),
        None => from_extension(output)?.to_string(),
    };
    let input = call.dataset("input")?;
    let layers = &input.vector.as_ref()?.layers;
    let written: Vec<&str> = match call.arg_str("layer") {
        Some(name) => layers
            .iter()
            .filter(|l| l.name == name)
            .map(|l| l.geometry_type.as_str())
            .collect(),
        None => layers.iter().map(|l| l.geometry_type.as_str()).collect(),
    };
    let mut geometry_types: Vec<String> = written.iter().map(|g| (*g).to_string()).collect();
    geometry_types.sort();
    geometry_types.dedup();
    let bases: Vec<&str> = written.iter().map(|g| base_geometry(g)).collect();
    let mut findings = Vec::new();
    let mut notes = Vec::new();

    if single_layer(&format, output) && written.len() > 1 {
        findings.push(Finding::new(
            Severity::Critical,
            format!(
                "{format} holds one layer per file, and the call writes {} layers: pass `layer`, \
                 or write a GeoPackage",
                written.len()
            ),
        ));
    }
    if format == "ESRI Shapefile" {
        if bases.iter().any(|b| MIXED.contains(b)) {
            findings.push(Finding::new(
                Severity::Critical,
                "a Shapefile holds one simple geometry type per layer: a layer of mixed types or \
                 geometry collections cannot be written whole",
            ));
        }
        notes.push(
            "Shapefile limits the facts cannot show: field names are cut to 10 characters, \
             strings to 254, date-times lose their time, and a file stops at 2 GB"
                .to_string(),
        );
    }
    if NO_CURVES.contains(&format.as_str()) && bases.iter().any(|b| CURVES.contains(b)) {
        findings.push(Finding::new(
            Severity::Required,
            format!("{format} has no curved geometries: arcs are replaced by straight segments"),
        ));
    }
    let csv_geometry = (format == "CSV")
        .then(|| option(call, "layer_options", "GEOMETRY").map(|g| g.to_ascii_uppercase()))
        .flatten();
    if format == "CSV" && bases.iter().any(|b| *b != "None") {
        match csv_geometry.as_deref() {
            None => findings.push(Finding::new(
                Severity::Required,
                "CSV drops the geometry unless the layer option GEOMETRY=AS_WKT (or AS_XY for \
                 points) keeps it",
            )),
            Some(g @ ("AS_XY" | "AS_YX" | "AS_XYZ"))
                if bases.iter().any(|b| !matches!(*b, "Point" | "None")) =>
            {
                findings.push(Finding::new(
                    Severity::Required,
                    format!(
                        "GEOMETRY={g} writes point coordinates only: lines and polygons lose \
                         their geometry"
                    ),
                ))
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
                format!(
                    "{format} stores WGS 84 longitude/latitude and the data has no CRS: its \
                     coordinates are written as if they were longitudes and latitudes"
                ),
            )),
            None => findings.push(Finding::new(
                Severity::Required,
                "GeoJSON readers assume WGS 84 longitude/latitude, and the data has no CRS",
            )),
            Some(crs) if always && reprojecting => findings.push(Finding::new(
                Severity::Critical,
                format!(
                    "{format} always stores WGS 84 longitude/latitude: the output will not be in \
                     the requested {}",
                    crs_label(crs)
                ),
            )),
            Some(crs) if always => findings.push(Finding::new(
                Severity::Required,
                format!(
                    "{format} stores WGS 84 longitude/latitude: the driver reprojects from {} \
                     with a datum transformation no one reviewed",
                    crs_label(crs)
                ),
            )),
            Some(crs) => findings.push(Finding::new(
                Severity::Required,
                format!(
                    "GeoJSON (RFC 7946) is WGS 84 longitude/latitude: GDAL writes {} \
                     coordinates with a non-standard `crs` member that most web clients ignore",
                    crs_label(crs)
                ),
            )),
        }
    }
    if KNOWN.contains(&format.as_str()) {
        notes.insert(0, format!("{format} holds these layers without loss"));
    } else {
        notes.insert(
            0,
            format!(
                "this domain has no capability table for the {format} driver: check that it                  holds {} layer(s) of {} and the CRS",
                written.len(),
                geometry_types.join(", ")
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
