//! Vector datasets through OGR: the `vector_info` report, the choice of a driver for an output
//! path, and reading polygon zones (optionally reprojected) for zonal statistics.
//!
//! `ogrinfo -json` does not exist in GDAL 3.6, so the report is built from the OGR API; the
//! conversions themselves go through `ogr2ogr` in [`super::programs`].
//!
//! The room's other modules are the vector runners: [`geometry`] (the geometry and geodesy they
//! share), [`measure`] (`vector_measure`), [`analysis`] (`vector_buffer`, `vector_overlay`,
//! `vector_join`), [`table`] (`points_from_table`), and [`filter`] with [`query`]
//! (`vector_query`).

pub mod analysis;
pub mod filter;
pub mod geometry;
pub mod measure;
pub mod query;
pub mod table;

use super::facts::{self, CrsFacts};
use super::{ErrorCapture, GdalError};
use gdal::spatial_ref::SpatialRef;
use gdal::vector::{field_type_to_name, Geometry, Layer, LayerAccess};
use gdal::{Dataset, Metadata};
use schemars::JsonSchema;
use serde::Serialize;
use std::path::Path;

/// One attribute field.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FieldInfo {
    pub name: String,
    /// OGR field type: Integer, Integer64, Real, String, Date, DateTime...
    #[serde(rename = "type")]
    pub field_type: String,
    pub width: i32,
    pub precision: i32,
}

/// One layer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LayerInfo {
    pub name: String,
    /// OGR geometry type name, e.g. `Multi Polygon`.
    pub geometry_type: String,
    pub geometry_column: Option<String>,
    pub feature_count: Option<u64>,
    /// [xmin, ymin, xmax, ymax] in the layer's CRS, when the driver knows it.
    pub extent: Option<[f64; 4]>,
    pub crs: Option<CrsFacts>,
    /// The column that holds the feature id, when the format names one (a GeoPackage's
    /// primary key, `fid` or a column such as `id`): not among `fields`, yet `vector_query`
    /// filters, selects and orders by it, and `vector_join` joins on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fid_column: Option<String>,
    pub fields: Vec<FieldInfo>,
}

/// The `vector_info` report.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VectorReport {
    pub driver: String,
    pub layers: Vec<LayerInfo>,
}

fn geometry_type_name(layer: &Layer) -> String {
    // SAFETY: the layer handle is valid while `layer` lives; the returned name is static.
    unsafe {
        let ty = gdal_sys::OGR_L_GetGeomType(layer.c_layer());
        std::ffi::CStr::from_ptr(gdal_sys::OGRGeometryTypeToName(ty))
            .to_string_lossy()
            .into_owned()
    }
}

fn layer_info(layer: &Layer) -> LayerInfo {
    let defn = layer.defn();
    let fields = defn
        .fields()
        .map(|f| FieldInfo {
            name: f.name(),
            field_type: field_type_to_name(f.field_type()),
            width: f.width(),
            precision: f.precision(),
        })
        .collect();
    let geometry_column = defn
        .geom_fields()
        .next()
        .map(|g| g.name())
        .filter(|n| !n.is_empty());
    let extent = layer_extent(layer);
    LayerInfo {
        name: layer.name(),
        geometry_type: geometry_type_name(layer),
        geometry_column,
        feature_count: layer.try_feature_count(),
        extent,
        crs: layer.spatial_ref().map(|s| facts::crs_facts(&s)),
        fid_column: fid_column(layer),
        fields,
    }
}

/// The name of the column a layer keeps its feature ids in, when the format names one and
/// no attribute field has that name (a GeoPackage made from GeoJSON with an integer `id`
/// keeps it as its primary key `id`, which OGR lists as no field: attack round 15, R15-B1).
pub fn fid_column(layer: &Layer) -> Option<String> {
    // SAFETY: the layer handle is valid while `layer` lives; OGR returns a string it owns
    // (empty when there is none), copied before the borrow ends.
    let name = unsafe {
        let text = gdal_sys::OGR_L_GetFIDColumn(layer.c_layer());
        if text.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .into_owned()
    };
    let taken = layer.defn().fields().any(|f| f.name() == name);
    (!name.is_empty() && !taken).then_some(name)
}

/// A feature's field value, or `None` when it is null **or unset**: gdal 0.19's
/// `Feature::field` checks only for null, and an unset field (a GeoJSON feature without the
/// property, a piece GDAL's overlay took from the other layer) reads back as "" or 0.
pub fn field_value(
    feature: &gdal::vector::Feature,
    index: usize,
) -> Option<gdal::vector::FieldValue> {
    let Ok(i) = std::ffi::c_int::try_from(index) else {
        return None;
    };
    // SAFETY: the feature handle is valid for the borrow; OGR checks the index.
    let set = unsafe { gdal_sys::OGR_F_IsFieldSetAndNotNull(feature.c_feature(), i) } != 0;
    if set {
        feature.field(index).ok().flatten()
    } else {
        None
    }
}

/// A date-time field's value as OGR holds it: the wall-clock time and its offset from UTC in
/// minutes, `None` when it has no zone (OGR's TZ flag 0, unknown, or 1, local time). The
/// crate's value gives a zone-less time `+00:00`, an instant it is not (R15-B2).
pub fn time_at(
    feature: &gdal::vector::Feature,
    index: usize,
) -> Option<(chrono::NaiveDateTime, Option<i32>)> {
    let i = std::ffi::c_int::try_from(index).ok()?;
    let (mut y, mut mo, mut d, mut h, mut mi, mut sec, mut tz) = (0, 0, 0, 0, 0, 0f32, 0);
    // SAFETY: a live feature handle; OGR checks the index and writes the parts.
    let read = unsafe {
        gdal_sys::OGR_F_GetFieldAsDateTimeEx(
            feature.c_feature(),
            i,
            &mut y,
            &mut mo,
            &mut d,
            &mut h,
            &mut mi,
            &mut sec,
            &mut tz,
        )
    };
    if read == 0 {
        return None;
    }
    let whole = sec.floor();
    let millis = ((sec - whole) * 1000.0).round() as u32;
    let at = chrono::NaiveDate::from_ymd_opt(y, u32::try_from(mo).ok()?, u32::try_from(d).ok()?)?
        .and_hms_milli_opt(
        u32::try_from(h).ok()?,
        u32::try_from(mi).ok()?,
        whole as u32,
        millis.min(999),
    )?;
    let offset = (tz > 1).then(|| (tz - 100) * 15);
    Some((at, offset))
}

/// Open `path` as a vector dataset.
pub fn open(argument: &str, path: &Path) -> Result<Dataset, GdalError> {
    let dataset = facts::open(path)?;
    if dataset.layer_count() == 0 {
        return Err(GdalError::Arguments(format!(
            "{argument}: {} has no vector layers (is it a raster?)",
            path.display()
        )));
    }
    Ok(dataset)
}

/// Refuse a dataset about to be translated whose layer names could address a path (`/`,
/// `\\`, `..`, NUL): layer names are data that some output drivers turn into file names.
pub fn check_layer_names(argument: &str, path: &Path, dataset: &Dataset) -> Result<(), GdalError> {
    for layer in dataset.layers() {
        let name = layer.name();
        if name.contains('/') || name.contains('\\') || name.contains("..") || name.contains('\0') {
            return Err(GdalError::Arguments(format!(
                "{argument}: {} has a layer named \"{name}\", which looks like a path; layer \
                 names become file names in some formats, so rename the layer first",
                path.display()
            )));
        }
    }
    Ok(())
}

/// A layer name that names no path: `/`, `\\`, NUL and `..` become `_` (some drivers write a
/// folder of files named after the layers).
pub fn file_safe_layer_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | '\0') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let cleaned = cleaned.replace("..", "__");
    if cleaned.trim().is_empty() {
        "layer".to_string()
    } else {
        cleaned
    }
}

pub use crate::gdal::facts::layer_extent;

/// The named layer, or the only one. A container with several layers and none named is
/// refused with the layer list: taking the first would be a silent choice.
pub fn layer<'a>(
    argument: &str,
    dataset: &'a Dataset,
    name: Option<&str>,
) -> Result<Layer<'a>, GdalError> {
    match name {
        Some(name) => dataset.layer_by_name(name).map_err(|_| {
            let names: Vec<String> = dataset.layers().map(|l| l.name()).collect();
            GdalError::Arguments(format!(
                "{argument}: no layer named \"{name}\"; the dataset has {}",
                names.join(", ")
            ))
        }),
        None if dataset.layer_count() > 1 => {
            let listed: Vec<serde_json::Value> = dataset
                .layers()
                .map(|l| serde_json::json!({"layer": l.name(), "feature_count": l.try_feature_count()}))
                .collect();
            let names: Vec<String> = dataset
                .layers()
                .map(|l| match l.try_feature_count() {
                    Some(n) => format!("\"{}\" ({n} features)", l.name()),
                    None => format!("\"{}\"", l.name()),
                })
                .collect();
            Err(GdalError::Conflict {
                message: format!(
                    "{argument}: the dataset holds {} layers ({}); name the one to use with \
                     `layer` (taking the first would be a silent choice)",
                    names.len(),
                    names.join(", ")
                ),
                parameter: "layer".to_string(),
                candidates: serde_json::Value::Array(listed),
            })
        }
        None => dataset.layer(0).map_err(|e| GdalError::Failed {
            operation: format!("reading the first layer of {argument}"),
            message: e.to_string(),
        }),
    }
}

/// The report for `path` (every layer, or only `layer`).
pub fn report(path: &Path, only: Option<&str>) -> Result<VectorReport, GdalError> {
    report_of(&open("input", path)?, only)
}

/// The report for an open dataset (every layer, or only `layer`).
pub fn report_of(dataset: &Dataset, only: Option<&str>) -> Result<VectorReport, GdalError> {
    let layers = match only {
        Some(name) => vec![layer_info(&layer("layer", dataset, Some(name))?)],
        None => dataset.layers().map(|l| layer_info(&l)).collect(),
    };
    Ok(VectorReport {
        driver: dataset.driver().short_name(),
        layers,
    })
}

/// Check `dataset_options` (-dsco) and `layer_options` (-lco) against the output driver.
pub fn check_options(
    driver: &str,
    dataset_options: &[(String, String)],
    layer_options: &[(String, String)],
) -> Result<(), GdalError> {
    let handle = gdal::DriverManager::get_driver_by_name(driver)
        .map_err(|_| GdalError::Arguments(format!("format: \"{driver}\" is not a GDAL driver")))?;
    use super::policy::OptionKind;
    for (argument, kind, options) in [
        ("dataset_options", OptionKind::Creation, dataset_options),
        ("layer_options", OptionKind::Layer, layer_options),
    ] {
        super::policy::check_options(argument, &handle, kind, options)?;
    }
    Ok(())
}

/// The OGR driver for an output path, by extension; `format` wins when given. The output must
/// name a file with an extension: without one, drivers such as CSV, LIBKML and MapInfo write a
/// folder of files named after the *layers*, and a layer name is data (`../../x` wrote outside
/// the workspace, or over the input).
pub fn driver_for(format: Option<&str>, path: &Path) -> Result<String, GdalError> {
    if path.extension().is_none_or(|e| e.is_empty()) {
        return Err(GdalError::Arguments(format!(
            "output: \"{}\" has no extension; name a file such as out.gpkg, out.geojson, out.fgb, \
             out.shp, out.csv or out.kml (a name without one makes some drivers write a folder \
             of files named after the layers)",
            path.display()
        )));
    }
    if let Some(format) = format {
        let driver = gdal::DriverManager::get_driver_by_name(format).map_err(|_| {
            if let Some(refused) = super::policy::drivers::refusal("format", format, false) {
                return refused;
            }
            GdalError::Arguments(format!(
                "format: \"{format}\" is not a GDAL driver; common vector drivers are GPKG, \
                 GeoJSON, FlatGeobuf, \"ESRI Shapefile\", CSV, KML, GML, SQLite"
            ))
        })?;
        if !super::driver_writes(&driver, "DCAP_VECTOR") {
            return Err(GdalError::Arguments(format!(
                "format: the {format} driver cannot write vector data"
            )));
        }
        super::policy::check_output_driver("format", &driver.short_name(), false)?;
        // A name whose extension is not the driver's makes CSV, LIBKML and MapInfo write a
        // folder of files named after the layers (attack round 23, R23-A1: `o.x` with format
        // LIBKML).
        let extensions: Vec<String> = driver
            .metadata_item("DMD_EXTENSIONS", "")
            .or_else(|| driver.metadata_item("DMD_EXTENSION", ""))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect();
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        if !extensions.is_empty() && !extensions.contains(&extension) {
            return Err(GdalError::Arguments(format!(
                "output: \"{}\" does not end with the {format} driver's extension ({}); a \
                 name the driver does not recognise makes some drivers write a folder of files \
                 named after the layers. Name the output with one of them",
                path.display(),
                extensions
                    .iter()
                    .map(|e| format!(".{e}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        return Ok(driver.short_name());
    }
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let name = match extension.as_str() {
        "gpkg" => "GPKG",
        "geojson" | "json" => "GeoJSON",
        "geojsonl" | "geojsons" => "GeoJSONSeq",
        "fgb" => "FlatGeobuf",
        "shp" => "ESRI Shapefile",
        "csv" => "CSV",
        "kml" => "KML",
        "gml" => "GML",
        "sqlite" => "SQLite",
        _ => {
            return Err(GdalError::Arguments(format!(
                "output: cannot tell the format from \"{}\"; use an extension such as .gpkg, \
                 .geojson, .fgb, .shp, .csv, .kml, .gml or .sqlite, or pass `format`",
                path.display()
            )))
        }
    };
    Ok(name.to_string())
}

/// A polygon: exterior ring first, then holes; rings as (x, y) vertices.
pub type Polygon = Vec<Vec<[f64; 2]>>;

/// One zone read from a layer.
#[derive(Debug, Clone)]
pub struct Zone {
    pub fid: Option<u64>,
    /// The `id_field` value as JSON, when asked for.
    pub id: serde_json::Value,
    /// The zone's polygons, in the target CRS.
    pub polygons: Vec<Polygon>,
}

fn collect_polygons(geometry: &Geometry, out: &mut Vec<Polygon>) {
    use gdal::vector::geometry_type_flatten;
    use gdal_sys::OGRwkbGeometryType as T;
    // Arcs as line segments: a CURVEPOLYGON zone was no polygon here, and counted 0 cells
    // (attack round 18, R18-B6).
    if let Some(linear) = geometry::without_arcs(geometry) {
        collect_polygons(&linear, out);
        return;
    }
    let ty = geometry_type_flatten(geometry.geometry_type());
    // A TRIANGLE is a polygon of one ring (R18-B6: a triangle zone counted 0 cells).
    if ty == T::wkbPolygon || ty == T::wkbTriangle {
        let mut polygon = Vec::with_capacity(geometry.geometry_count());
        for r in 0..geometry.geometry_count() {
            let ring = geometry.get_geometry(r);
            let mut points = Vec::new();
            ring.get_points(&mut points);
            polygon.push(points.into_iter().map(|(x, y, _)| [x, y]).collect());
        }
        if !polygon.is_empty() {
            out.push(polygon);
        }
    } else if ty == T::wkbMultiPolygon
        || ty == T::wkbGeometryCollection
        || ty == T::wkbTIN
        || ty == T::wkbPolyhedralSurface
    {
        for i in 0..geometry.geometry_count() {
            collect_polygons(&geometry.get_geometry(i), out);
        }
    }
}

/// Whether a feature of `layer` (among the first [`geometry::max_features`]) holds arcs
/// (circular strings, curve polygons): ogr2ogr 3.6 cannot clip by such a mask ("Geometry not
/// of polygon type"), and aborted the server with heap corruption on it (attack round 18,
/// R18-B5), so the host linearises it ([`mask_wkt`]).
pub fn layer_has_curves(layer: &mut Layer) -> bool {
    layer.reset_feature_reading();
    let limit = usize::try_from(geometry::max_features()).unwrap_or(usize::MAX);
    let curved = layer
        .features()
        .take(limit)
        .any(|f| crate::gdal::geometry_of(&f).is_some_and(geometry::has_curves));
    layer.reset_feature_reading();
    curved
}

/// Read every feature of `layer` as a zone, transformed into `target` when given.
pub fn read_zones(
    layer: &mut Layer,
    id_field: Option<&str>,
    target: Option<&SpatialRef>,
    operation: Option<&str>,
) -> Result<Vec<Zone>, GdalError> {
    let capture = ErrorCapture::start();
    let transform = match (target, layer.spatial_ref()) {
        (Some(target), Some(source)) => Some((
            super::facts::transform::coord_transform(&source, target, operation).map_err(|e| {
                GdalError::Failed {
                    operation: "preparing the zones' reprojection".to_string(),
                    message: capture.failure_text(&e.to_string()),
                }
            })?,
            source,
            target,
        )),
        _ => None,
    };
    let id_index = match id_field {
        Some(name) => Some(layer.defn().field_index(name).map_err(|_| {
            let names: Vec<String> = layer.defn().fields().map(|f| f.name()).collect();
            GdalError::Arguments(format!(
                "id_field: the zones have no field \"{name}\"; fields: {}",
                names.join(", ")
            ))
        })?),
        None => None,
    };
    let mut zones = Vec::new();
    for feature in layer.features() {
        let id = match id_index {
            Some(index) => match feature.field(index) {
                Ok(Some(value)) => field_json(value),
                _ => serde_json::Value::Null,
            },
            None => serde_json::Value::Null,
        };
        let mut polygons = Vec::new();
        if let Some(geometry) = crate::gdal::geometry_of(&feature) {
            match &transform {
                Some((t, source, target)) => {
                    let (moved, _) =
                        geometry::moved_as_drawn("zones", geometry, source, t, target)?;
                    collect_polygons(&moved, &mut polygons);
                }
                None => collect_polygons(geometry, &mut polygons),
            }
        }
        zones.push(Zone {
            fid: feature.fid(),
            id,
            polygons,
        });
    }
    Ok(zones)
}

/// The largest integer every JSON reader holds exactly (a double's 53-bit significand).
const EXACT_IN_JSON: i64 = 1 << 53;

/// A 64-bit integer as JSON every host reads exactly: a number within ±2^53, else its digits
/// as a string. JavaScript hosts parse numbers as doubles, so 9007199254740993 reached them as
/// 9007199254740992, another plausible id, and a `where` built from it matched nothing
/// (attack round 15, R15-C9).
pub fn integer_json(value: i64) -> serde_json::Value {
    if (-EXACT_IN_JSON..=EXACT_IN_JSON).contains(&value) {
        value.into()
    } else {
        value.to_string().into()
    }
}

fn field_json(value: gdal::vector::FieldValue) -> serde_json::Value {
    use gdal::vector::FieldValue as F;
    match value {
        F::IntegerValue(v) => v.into(),
        F::Integer64Value(v) => integer_json(v),
        F::RealValue(v) => v.into(),
        F::StringValue(v) => v.into(),
        other => format!("{other:?}").into(),
    }
}

/// The union of a mask layer's polygons, reprojected into `target`, as WKT, and how many of
/// them were split at ±180°.
///
/// `ogr2ogr -clipsrc <datasource>` in GDAL 3.6 does not reproject the mask: a mask in another
/// CRS silently clips everything away (measured: 0 of 100 features kept). The host therefore
/// reprojects the mask itself and passes the geometry as WKT. In a lon/lat `target` a mask
/// polygon that reaches across ±180° is split there first: unsplit, ogr2ogr clips by a band
/// round the globe and keeps a point at 10°E inside a box at 180° (attack round 7, R7-4).
pub fn mask_wkt(
    layer: &mut Layer,
    target: &SpatialRef,
    operation: Option<&str>,
) -> Result<(String, usize), GdalError> {
    let capture = ErrorCapture::start();
    let failed = |what: &str| GdalError::Failed {
        operation: "preparing the clip mask".to_string(),
        message: capture.failure_text(what),
    };
    let source = layer
        .spatial_ref()
        .ok_or_else(|| GdalError::Arguments("mask: the mask layer has no CRS".to_string()))?;
    let transform = super::facts::transform::coord_transform(&source, target, operation)
        .map_err(|_| failed("no transformation"))?;
    let mut collection = Geometry::empty(gdal_sys::OGRwkbGeometryType::wkbMultiPolygon)
        .map_err(|_| failed("cannot create a geometry"))?;
    let mut split = 0;
    for feature in layer.features() {
        let Some(geometry) = crate::gdal::geometry_of(&feature) else {
            continue;
        };
        let (moved, was_split) =
            geometry::moved_as_drawn("mask", geometry, &source, &transform, target)?;
        split += usize::from(was_split);
        let mut parts = Vec::new();
        collect_polygons(&moved, &mut parts);
        for polygon in parts {
            let mut poly = Geometry::empty(gdal_sys::OGRwkbGeometryType::wkbPolygon)
                .map_err(|_| failed("cannot create a polygon"))?;
            for ring in polygon {
                let mut r = Geometry::empty(gdal_sys::OGRwkbGeometryType::wkbLinearRing)
                    .map_err(|_| failed("cannot create a ring"))?;
                for [x, y] in ring {
                    r.add_point_2d((x, y));
                }
                poly.add_geometry(r)
                    .map_err(|_| failed("cannot add a ring"))?;
            }
            collection
                .add_geometry(poly)
                .map_err(|_| failed("cannot add a polygon"))?;
        }
    }
    if collection.geometry_count() == 0 {
        return Err(GdalError::Arguments(
            "mask: the mask layer has no polygons to clip by".to_string(),
        ));
    }
    // SAFETY: the collection handle is valid; UnionCascaded returns a new geometry (or NULL)
    // that we own and destroy after exporting it.
    let wkt = unsafe {
        let union = gdal_sys::OGR_G_UnionCascaded(collection.c_geometry());
        if union.is_null() {
            return Err(failed("cannot union the mask polygons"));
        }
        let mut text: *mut std::ffi::c_char = std::ptr::null_mut();
        let err = gdal_sys::OGR_G_ExportToWkt(union, &mut text);
        gdal_sys::OGR_G_DestroyGeometry(union);
        if err != gdal_sys::OGRErr::OGRERR_NONE || text.is_null() {
            return Err(failed("cannot export the mask as WKT"));
        }
        let wkt = std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .into_owned();
        gdal_sys::VSIFree(text.cast());
        wkt
    };
    Ok((wkt, split))
}

/// Refuse a lon/lat `layer` holding a feature that crosses the antimeridian, for a tool whose
/// program works in the layer's coordinates, where such a feature wraps round the globe
/// (`consequence` says what would go wrong). Features whose extent spans at most 180° of
/// longitude cannot cross and are not looked at further.
pub fn refuse_antimeridian_crossings(
    argument: &str,
    layer: &mut Layer,
    consequence: &str,
) -> Result<(), GdalError> {
    if !layer.spatial_ref().is_some_and(|s| s.is_geographic()) {
        return Ok(());
    }
    for feature in layer.features() {
        let Some(g) = crate::gdal::geometry_of(&feature) else {
            continue;
        };
        let e = g.envelope();
        if e.MaxX - e.MinX > 180.0 && geometry::crosses_antimeridian(g) {
            return Err(geometry::antimeridian_refusal(
                argument,
                feature.fid(),
                consequence,
            ));
        }
    }
    Ok(())
}
