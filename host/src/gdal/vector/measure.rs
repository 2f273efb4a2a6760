//! Measuring vector data: areas, lengths and perimeters on the ellipsoid or in a named CRS, and
//! the facts about a measuring call that the `measurement` domain decides on.
//!
//! This room owns reading a layer's geometries for measurement (per geometry kind: a polygon
//! has an area and a perimeter, a line a length, a point a count), checking and repairing their
//! validity, finding overlaps, and sampling a planar CRS's scale error over the data's extent.
//! Geodesic figures come from GeographicLib (`geographiclib-rs`) on the layer's own ellipsoid;
//! planar figures from GEOS in the CRS the caller names.

use crate::gdal::facts::CrsFacts;
use crate::gdal::vector::geometry::{
    crosses_antimeridian, drawn_edges, ellipsoid_of, geographic_of, invalidity_reason,
    is_valid_whole, line_length_readings, of_kinds, overlapping_pairs, parts, repair, scale_error,
    transformer, union_all, without_arcs, Ellipsoid, Figures, Kind, Measurer, Part, ReadBudget,
    RingsByContainment, DRAWN_EDGE_STEP_DEGREES,
};
use crate::gdal::{facts::transform, ErrorCapture, GdalError};
use gdal::spatial_ref::{CoordTransform, SpatialRef};
use gdal::vector::{Geometry, LayerAccess};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What the host found about a measuring call before it runs (WIT `measurement-facts`).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct MeasurementFacts {
    /// `geodesic` or `planar`.
    pub method: String,
    /// The CRS planar figures are taken in.
    pub crs: Option<CrsFacts>,
    /// The ellipsoid geodesic figures are taken on.
    pub ellipsoid: Option<String>,
    /// Largest relative error of a planar area over the data's extent.
    pub area_scale_error: Option<f64>,
    /// Largest relative error of a planar length in any direction over the data's extent.
    pub length_scale_error: Option<f64>,
    /// Where the largest error was found, `(longitude, latitude)` in degrees.
    pub worst_at: Option<(f64, f64)>,
    pub features_checked: u64,
    pub invalid_features: u64,
    pub make_valid: bool,
    /// Pairs of polygons whose interiors overlap; `None` when not checked.
    pub overlapping_pairs: Option<u64>,
    /// Their overlapping area in square metres.
    pub overlap_area_m2: Option<f64>,
    pub dissolve: bool,
    /// `polygon`, `line`, `point`: the kinds present.
    pub geometry_kinds: Vec<String>,
    /// Whether Z is present and the figures ignore it.
    pub z_ignored: bool,
    /// `(given, crs)` units of a distance argument, when they differ.
    pub distance_units: Option<(String, String)>,
    /// `field:statistic` averages asked for without a weight.
    pub unweighted_means: Vec<String>,
}

/// The measurement facts of a reprojection (`raster_reproject`, `vector_reproject`; WIT
/// `tool-call.measurement`): every figure later taken in the projected `target` carries its
/// planar scale error over the data's lon/lat extent `area`, sampled as for planar
/// measurements. The `crs_datum` domain grades the reprojection by it (issue 18: a conversion
/// is exact, so the size of its effect on this data is the target's distortion, not an
/// accuracy or an area of use). `None` for a geographic target or an unknown extent.
pub fn reprojection_facts(target: &SpatialRef, area: Option<[f64; 4]>) -> Option<MeasurementFacts> {
    if target.is_geographic() {
        return None;
    }
    let scale = scale_error(target, area?)?;
    Some(MeasurementFacts {
        method: Method::Planar.name().to_string(),
        crs: Some(crate::gdal::facts::crs_facts(target)),
        area_scale_error: Some(scale.area),
        length_scale_error: Some(scale.length),
        worst_at: Some(scale.worst_at),
        ..MeasurementFacts::default()
    })
}

// How figures are taken: `geodesic` on the ellipsoid of the layer's CRS (GeographicLib), or
// `planar` in a projected CRS with its unit converted. (Plain comments: the arguments that use
// these enums describe them, and doc comments would be repeated in every tool schema.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    #[default]
    Geodesic,
    Planar,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Geodesic => "geodesic",
            Method::Planar => "planar",
        }
    }
}

// How polygons that overlap enter an area total: `count_once` (the union's area) or
// `count_each` (every feature's area, shared ground as often as it is covered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overlaps {
    CountOnce,
    CountEach,
}

impl Overlaps {
    pub fn name(self) -> &'static str {
        match self {
            Overlaps::CountOnce => "count_once",
            Overlaps::CountEach => "count_each",
        }
    }
}

/// Two figures of one question agree when they differ by at most this share of the larger
/// (one part per million): then the data does not make the question ambiguous.
pub const AGREEMENT: f64 = 1e-6;

/// The area totals with shared ground counted once and counted each time agree when they
/// differ by at most this share (one part in ten thousand): a 1 mm sliver between two 1 ha
/// parcels (5 ppm, digitising noise, 800 times below the scale error the same call noted) was
/// refused as two answers (attack round 23, R23-B15). Both figures are still reported.
pub const OVERLAP_AGREEMENT: f64 = 1e-4;

/// Whether two candidate figures agree within [`AGREEMENT`].
pub fn agree(a: f64, b: f64) -> bool {
    (a - b).abs() <= AGREEMENT * a.abs().max(b.abs())
}

// A unit of length (international foot and mile).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LengthUnit {
    #[default]
    #[serde(rename = "m")]
    Metre,
    #[serde(rename = "km")]
    Kilometre,
    #[serde(rename = "ft")]
    Foot,
    #[serde(rename = "mi")]
    Mile,
}

impl LengthUnit {
    /// Metres per unit.
    pub fn metres(self) -> f64 {
        match self {
            LengthUnit::Metre => 1.0,
            LengthUnit::Kilometre => 1000.0,
            LengthUnit::Foot => 0.3048,
            LengthUnit::Mile => 1609.344,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            LengthUnit::Metre => "m",
            LengthUnit::Kilometre => "km",
            LengthUnit::Foot => "ft",
            LengthUnit::Mile => "mi",
        }
    }
}

// A unit of area (international foot and mile).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AreaUnit {
    #[default]
    #[serde(rename = "m2")]
    SquareMetre,
    #[serde(rename = "ha")]
    Hectare,
    #[serde(rename = "km2")]
    SquareKilometre,
    #[serde(rename = "ft2")]
    SquareFoot,
    #[serde(rename = "acre")]
    Acre,
    #[serde(rename = "mi2")]
    SquareMile,
}

impl AreaUnit {
    /// Square metres per unit.
    pub fn square_metres(self) -> f64 {
        match self {
            AreaUnit::SquareMetre => 1.0,
            AreaUnit::Hectare => 1.0e4,
            AreaUnit::SquareKilometre => 1.0e6,
            AreaUnit::SquareFoot => 0.092_903_04,
            AreaUnit::Acre => 4_046.856_422_4,
            AreaUnit::SquareMile => 2_589_988.110_336,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            AreaUnit::SquareMetre => "m2",
            AreaUnit::Hectare => "ha",
            AreaUnit::SquareKilometre => "km2",
            AreaUnit::SquareFoot => "ft2",
            AreaUnit::Acre => "acre",
            AreaUnit::SquareMile => "mi2",
        }
    }
}

/// A `vector_measure` request, checked by the tool.
#[derive(Debug, Clone)]
pub struct MeasureRequest {
    pub input: PathBuf,
    pub layer: Option<String>,
    /// `None`: the layer's own plane where it is faithful to the data, else geodesic.
    pub method: Option<Method>,
    /// Planar only: the CRS to measure in (a definition); default the layer's.
    pub crs: Option<String>,
    pub area_unit: AreaUnit,
    pub length_unit: LengthUnit,
    pub group_by: Option<String>,
    pub make_valid: bool,
    /// How overlapping polygons enter the totals; `None`: only where it changes nothing.
    pub overlaps: Option<Overlaps>,
    /// 3D line lengths; `None`: only where 2D and 3D agree.
    pub three_d: Option<bool>,
    pub list_features: bool,
}

/// At most this many features are listed one by one.
pub const MAX_LISTED_FEATURES: usize = 1000;
/// At most this many invalid features are named.
pub const MAX_NAMED_INVALID: usize = 50;
pub use super::geometry::OWN_PLANE_TOLERANCE;
/// At most this many invalid polygons are quoted with GEOS's reason in a refusal.
pub const MAX_REASONS: usize = 5;
/// Overlaps are looked for among at most this many polygons.
pub const MAX_OVERLAP_POLYGONS: usize = 50_000;

/// A CRS as results name it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CrsName {
    pub id: Option<String>,
    pub name: String,
}

/// The units figures are given in.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Units {
    pub area: &'static str,
    pub length: &'static str,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct PolygonTotals {
    /// Features holding polygons (a multipolygon is one).
    pub count: u64,
    pub area: f64,
    /// Every ring, holes included.
    pub perimeter: f64,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct LineTotals {
    /// Features holding lines.
    pub count: u64,
    /// 3D where the call asked for it (`z`) and the lines carry Z.
    pub length: f64,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct PointTotals {
    /// Features holding points (a multipoint is one).
    pub count: u64,
}

/// Figures per kind; a kind absent from the data is `null`.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Totals {
    pub polygons: Option<PolygonTotals>,
    pub lines: Option<LineTotals>,
    pub points: Option<PointTotals>,
}

/// One group of `group_by`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GroupMeasure {
    /// The field's value as text; `null` for features where it is null.
    pub key: Option<String>,
    #[serde(flatten)]
    pub totals: Totals,
}

/// One feature's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FeatureMeasure {
    pub fid: Option<u64>,
    /// `polygon`, `line`, `point`, or `mixed` for a collection of several kinds.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perimeter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<f64>,
    pub valid: bool,
    /// Measured after `make_valid` repaired it.
    pub repaired: bool,
}

/// Invalid geometries met.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct InvalidReport {
    pub count: u64,
    /// The first few invalid features' ids.
    pub fids: Vec<u64>,
    /// Whether they were repaired (`make_valid`) before measuring.
    pub repaired: bool,
}

/// Polygons whose interiors overlap.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OverlapReport {
    pub pairs: u64,
    /// The overlapping area (pairwise), in the area unit: what a plain sum counts twice.
    pub area: f64,
    /// A few overlapping pairs, as feature ids.
    pub examples: Vec<(Option<u64>, Option<u64>)>,
    /// How the totals count them (`count_once`, `count_each`; `null` when no total changes).
    pub counted: Option<Overlaps>,
    /// The polygons' total area with overlaps counted once (their union) and counted each time.
    pub area_counted_once: Option<f64>,
    pub area_counted_each: Option<f64>,
}

/// The totals by the method not chosen, in the same units.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OtherFigures {
    pub method: Method,
    pub area: Option<f64>,
    pub perimeter: Option<f64>,
    pub length: Option<f64>,
    /// This result's total area over the other's (1.0008 means 0.08 % larger).
    pub area_ratio: Option<f64>,
    pub length_ratio: Option<f64>,
}

/// Result of `vector_measure`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MeasureOutput {
    pub input: String,
    pub layer: String,
    /// By default planar in a projected layer's own CRS when its scale error over the data is
    /// within 1 %, else geodesic.
    pub method: Method,
    /// The same totals by the other method (planar in the layer's CRS, or geodesic), and the
    /// ratios of these figures to them; `null` for a geographic layer measured geodesically.
    pub other: Option<OtherFigures>,
    /// The CRS planar figures were taken in (`null` for geodesic figures).
    pub crs: Option<CrsName>,
    /// The ellipsoid geodesic figures were taken on (`null` for planar figures).
    pub ellipsoid: Option<Ellipsoid>,
    pub units: Units,
    #[serde(flatten)]
    pub totals: Totals,
    pub invalid: InvalidReport,
    /// `null` when not checked (no polygons, or more than 50,000).
    pub overlaps: Option<OverlapReport>,
    /// Features without geometry (or with an empty one): counted in no total.
    pub empty: u64,
    /// With `group_by`, sorted by key.
    pub groups: Vec<GroupMeasure>,
    pub features: Vec<FeatureMeasure>,
    pub features_truncated: bool,
    /// How the figures were made, in words (method, CRS, units, conversions).
    pub notes: Vec<String>,
}

/// The CRS figures are taken in and how to get there.
struct Setup {
    measurer: Measurer,
    to_measuring: CoordTransform,
    planar: Option<SpatialRef>,
    ellipsoid: Option<Ellipsoid>,
    /// Metres per unit of the layer's heights, and the unit's words, when its CRS declares
    /// one other than the metre ([`height_unit`]); `None`: Z is taken in metres.
    heights: Option<(f64, String)>,
    /// Planar figures of a lon/lat layer: its long edges are followed as it draws them
    /// (straight in longitude and latitude, [`drawn_edges`]) before they are projected.
    follow_drawn_edges: bool,
}

/// The unit of a layer's heights when its CRS declares one that is not the metre (a compound
/// CRS's vertical part, such as NAVD88 height in US feet, or a 3D CRS with a foot height axis),
/// measured through PROJ at `at` (layer coordinates) as metres per unit. `vector_measure`
/// with `z: true` took such Z as metres: a line 300 m across rising 400 ftUS measured 500 m,
/// not 323.83 m (attack round 9, R9-7).
fn height_unit(layer_srs: &SpatialRef, at: (f64, f64)) -> Option<(f64, String)> {
    if !transform::three_axes(layer_srs) {
        return None;
    }
    let flat = geographic_of(layer_srs).ok()?;
    let change = transform::vertical_shift(layer_srs, &flat, at, None, true)?;
    let metres = change.scale;
    ((metres - 1.0).abs() > 1e-9 && metres.is_finite() && metres > 0.0)
        .then(|| (metres, format!("{} ({metres} m a unit)", change.from)))
}

fn make_setup(
    method: Method,
    crs: Option<&str>,
    layer_srs: &SpatialRef,
) -> Result<Setup, GdalError> {
    match method {
        Method::Geodesic => {
            let geographic = geographic_of(layer_srs)?;
            let (ellipsoid, geodesic) = ellipsoid_of(layer_srs)?;
            Ok(Setup {
                measurer: Measurer::Geodesic(Box::new(geodesic)),
                to_measuring: transformer(layer_srs, &geographic)?,
                planar: None,
                ellipsoid: Some(ellipsoid),
                heights: None,
                follow_drawn_edges: false,
            })
        }
        Method::Planar => {
            let planar = match crs {
                Some(definition) => crate::gdal::facts::parse_crs("crs", definition)?,
                None => layer_srs.clone(),
            };
            if planar.is_geographic() || planar.is_geocentric() {
                return Err(GdalError::Arguments(format!(
                    "crs: {} is {}; planar figures in it would be square degrees, not an area. \
                     Use method \"geodesic\" (on the ellipsoid), or name a projected `crs` for \
                     planar figures (an equal-area CRS for areas, e.g. EPSG:6933, or the local \
                     UTM zone)",
                    planar.name().unwrap_or_else(|| "this CRS".to_string()),
                    if planar.is_geographic() {
                        "geographic (degrees)"
                    } else {
                        "geocentric"
                    }
                )));
            }
            let metres_per_unit = planar.linear_units();
            if !(metres_per_unit.is_finite() && metres_per_unit > 0.0) {
                return Err(GdalError::Arguments(
                    "crs: its linear unit is unknown, so planar figures would have no unit; \
                     name a projected `crs` with a declared unit"
                        .to_string(),
                ));
            }
            Ok(Setup {
                measurer: Measurer::Planar { metres_per_unit },
                to_measuring: transformer(layer_srs, &planar)?,
                planar: Some(planar),
                ellipsoid: None,
                heights: None,
                follow_drawn_edges: layer_srs.is_geographic(),
            })
        }
    }
}

/// One feature read for measurement.
struct Read {
    fid: Option<u64>,
    key: Option<String>,
    /// The geometry in the layer's CRS (repaired when asked and needed).
    geometry: Geometry,
    kinds: Vec<Kind>,
    valid: bool,
    repaired: bool,
    has_z: bool,
}

/// What the read phase found: the features to measure, and those it could not.
struct Reads {
    reads: Vec<Read>,
    /// Features without geometry (or with an empty one).
    empty: u64,
    invalid: InvalidReport,
    /// Features with a geometry, checked for validity.
    checked: u64,
}

/// The index of the `group_by` field, refused when the layer has no such field.
fn group_index(
    request: &MeasureRequest,
    layer: &gdal::vector::Layer,
    layer_name: &str,
) -> Result<Option<usize>, GdalError> {
    let Some(field) = &request.group_by else {
        return Ok(None);
    };
    layer.defn().field_index(field).map(Some).map_err(|_| {
        let names: Vec<String> = layer.defn().fields().map(|f| f.name()).collect();
        GdalError::Arguments(format!(
            "group_by: layer \"{layer_name}\" has no field \"{field}\"; its fields are {}",
            names.join(", ")
        ))
    })
}

/// Read phase: every feature's geometry, kinds, validity and group key, within the read
/// budget; invalid ones repaired when asked. Refused when invalid polygons would be measured
/// as they are.
fn read_features(
    request: &MeasureRequest,
    layer: &mut gdal::vector::Layer,
    key_index: Option<usize>,
) -> Result<Reads, GdalError> {
    let capture = ErrorCapture::start();
    let mut reads = Vec::new();
    let mut empty = 0u64;
    let mut invalid = InvalidReport {
        repaired: request.make_valid,
        ..InvalidReport::default()
    };
    let mut checked = 0u64;
    let (mut unmeasurable, mut unmeasurable_named) = (0u64, Vec::new());
    let mut budget = ReadBudget::new("input");
    for feature in layer.features() {
        budget.take(crate::gdal::geometry_of(&feature))?;
        let Some(geometry) = crate::gdal::geometry_of(&feature).filter(|g| !g.is_empty()) else {
            empty += 1;
            continue;
        };
        let fid = feature.fid();
        let key = match key_index {
            Some(i) => crate::gdal::vector::field_value(&feature, i)
                .and_then(|_| feature.field_as_string(i).ok().flatten()),
            None => None,
        };
        let mut kinds: Vec<Kind> = parts(geometry).iter().map(|p| p.kind).collect();
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            empty += 1;
            continue;
        }
        let has_z = gdal::vector::geometry_type_has_z(geometry.geometry_type());
        checked += 1;
        let valid = kinds == [Kind::Point] || is_valid_whole(geometry);
        let mut geometry = geometry.clone();
        let mut repaired = false;
        if !valid {
            invalid.count += 1;
            if let Some(fid) = fid {
                if invalid.fids.len() < MAX_NAMED_INVALID {
                    invalid.fids.push(fid);
                }
            }
            if !request.make_valid && kinds.contains(&Kind::Polygon) {
                unmeasurable += 1;
                if unmeasurable_named.len() < MAX_REASONS {
                    let reason = invalidity_reason(&geometry)
                        .unwrap_or_else(|| "GEOS finds it invalid".to_string());
                    unmeasurable_named.push(match fid {
                        Some(fid) => format!("feature {fid}: {reason}"),
                        None => format!("a feature without id: {reason}"),
                    });
                }
            }
            if request.make_valid {
                geometry = repair(&geometry).map_err(|e| GdalError::Failed {
                    operation: format!("repairing feature {fid:?} (make_valid)"),
                    message: capture.failure_text(&e.to_string()),
                })?;
                repaired = true;
            }
        }
        reads.push(Read {
            fid,
            key,
            geometry,
            kinds,
            valid,
            repaired,
            has_z,
        });
    }
    drop(capture);
    if unmeasurable > 0 {
        // An invalid polygon has no area: its rings cross or nest wrongly, so any figure
        // (lobes cancelling, a hole subtracted from nothing) would be a plausible wrong number.
        return Err(GdalError::Arguments(format!(
            "input: {unmeasurable} of the {checked} features hold invalid polygons, \
             whose area and perimeter mean nothing ({}{}). Retry with make_valid: true to \
             measure them as GEOS MakeValid repairs them (a bow-tie becomes two triangles), or \
             fix the data first",
            unmeasurable_named.join("; "),
            if unmeasurable as usize > unmeasurable_named.len() {
                format!(
                    "; and {} more",
                    unmeasurable as usize - unmeasurable_named.len()
                )
            } else {
                String::new()
            }
        )));
    }
    Ok(Reads {
        reads,
        empty,
        invalid,
        checked,
    })
}

/// The method and its setup: the one the call named, else the layer's own plane where its
/// scale error over the data is within [`OWN_PLANE_TOLERANCE`] (what the layer's coordinates,
/// a cadastre or a desktop GIS give), else geodesic; and that own scale error.
fn choose_method(
    named: Option<(Method, Setup)>,
    layer_srs: &SpatialRef,
    extent: Option<[f64; 4]>,
    kinds_present: &[Kind],
) -> Result<(Method, Setup, Option<f64>), GdalError> {
    let own_scale = if layer_srs.is_projected() {
        extent
            .and_then(|e| transform::lonlat_bounds(layer_srs, e))
            .and_then(|ll| scale_error(layer_srs, ll))
    } else {
        None
    };
    let own_error = own_scale.map(|s| {
        if kinds_present.contains(&Kind::Polygon) {
            s.area
        } else {
            s.length
        }
    });
    let (method, setup) = match named {
        Some(named) => named,
        None => {
            let method = match own_error {
                Some(e) if e <= OWN_PLANE_TOLERANCE => Method::Planar,
                _ => Method::Geodesic,
            };
            (method, make_setup(method, None, layer_srs)?)
        }
    };
    Ok((method, setup, own_error))
}

/// What the measuring phase found: the totals, the 3D length of the lines with Z (when 2D
/// and 3D are candidates), the groups' totals and the features listed.
struct Measured {
    total: Figures,
    length_3d: f64,
    groups: BTreeMap<Option<String>, Figures>,
    features: Vec<FeatureMeasure>,
}

/// Measuring phase: figures per feature, per group and in total.
fn measure_features(
    request: &MeasureRequest,
    setup: &Setup,
    reads: &[Read],
    grouped: bool,
    three_d: bool,
    sloping_candidates: bool,
) -> Result<Measured, GdalError> {
    let area_unit = request.area_unit.square_metres();
    let length_unit = request.length_unit.metres();
    let mut total = Figures::default();
    let mut length_3d = 0.0;
    let mut groups: BTreeMap<Option<String>, Figures> = BTreeMap::new();
    let mut features = Vec::new();
    for read in reads {
        let figures = figures_of(setup, &read.geometry, &read.kinds, three_d)?;
        if sloping_candidates && read.has_z && read.kinds.contains(&Kind::Line) {
            length_3d += figures_of(setup, &read.geometry, &[Kind::Line], true)?.length;
        }
        total.add(&figures);
        if grouped {
            groups.entry(read.key.clone()).or_default().add(&figures);
        }
        if request.list_features && features.len() < MAX_LISTED_FEATURES {
            features.push(FeatureMeasure {
                fid: read.fid,
                kind: match read.kinds.as_slice() {
                    [one] => one.name().to_string(),
                    _ => "mixed".to_string(),
                },
                area: read
                    .kinds
                    .contains(&Kind::Polygon)
                    .then_some(figures.area / area_unit),
                perimeter: read
                    .kinds
                    .contains(&Kind::Polygon)
                    .then_some(figures.perimeter / length_unit),
                length: read
                    .kinds
                    .contains(&Kind::Line)
                    .then_some(figures.length / length_unit),
                valid: read.valid,
                repaired: read.repaired,
            });
        }
    }
    Ok(Measured {
        total,
        length_3d,
        groups,
        features,
    })
}

/// Longest step, in degrees, of a polygon edge followed straight in longitude and latitude.
const STRAIGHT_EDGE_STEP_DEGREES: f64 = 1.0;

/// Largest relative difference between a polygon's area with geodesic edges and with edges
/// straight in longitude and latitude below which the two readings agree.
const EDGE_READINGS_TOLERANCE: f64 = 0.01;

/// Edges: a geographic layer's polygon is drawn with edges straight in longitude and latitude,
/// and measured by default with geodesic edges. Where its edges are short the two agree (a
/// 10° box at 60° N differs by 0.3 %); where an edge runs along a parallel for a long way they
/// do not: a world box (-180 -90, 180 90) and 4-vertex latitude bands measured 0 m² as
/// geodesics, a polar cap 36 % short (attack round 14, R14-B10). Each polygon with an edge
/// longer than [`STRAIGHT_EDGE_STEP_DEGREES`] is measured both ways ([`drawn_area`]); when the
/// readings differ
/// by more than [`EDGE_READINGS_TOLERANCE`], the call is refused with both figures and the
/// argument that chooses.
fn check_long_edges(setup: &Setup, reads: &[Read]) -> Result<(), GdalError> {
    for read in reads.iter().filter(|r| r.kinds.contains(&Kind::Line)) {
        check_long_line_edges(setup, read)?;
    }
    for read in reads.iter().filter(|r| r.kinds.contains(&Kind::Polygon)) {
        // No edge is longer than the polygon's extent: a small polygon (nearly every one) is
        // not transformed a second time.
        let extent = read.geometry.envelope();
        if extent.MaxX - extent.MinX <= STRAIGHT_EDGE_STEP_DEGREES
            && extent.MaxY - extent.MinY <= STRAIGHT_EDGE_STEP_DEGREES
        {
            continue;
        }
        let moved =
            read.geometry
                .transform(&setup.to_measuring)
                .map_err(|e| GdalError::Failed {
                    operation: "transforming a geometry to the measuring CRS".to_string(),
                    message: e.to_string(),
                })?;
        let polygons = of_kinds(parts(&moved), &[Kind::Polygon]);
        // Drawn as the layer draws them: a ring that crosses the antimeridian (consecutive
        // longitudes more than 180° apart, R7-4) continues past ±180°; an edge of exactly
        // 360° (-180 to 180 at one latitude, R8-11) spans the globe.
        let drawn: Vec<Part> = polygons
            .iter()
            .map(|p| Part {
                kind: p.kind,
                rings: p.rings.iter().map(|r| across_the_antimeridian(r)).collect(),
            })
            .collect();
        let long = drawn.iter().flat_map(|p| p.rings.iter()).any(|ring| {
            ring.windows(2).any(|w| {
                (w[1][0] - w[0][0]).abs() > STRAIGHT_EDGE_STEP_DEGREES
                    || (w[1][1] - w[0][1]).abs() > STRAIGHT_EDGE_STEP_DEGREES
            })
        });
        if !long {
            continue;
        }
        let Some(ellipsoid) = &setup.ellipsoid else {
            return Ok(());
        };
        let geodesic = setup.measurer.figures(&polygons, false).area;
        let drawn = drawn_area(&drawn, ellipsoid);
        let larger = geodesic.max(drawn);
        if larger > 0.0 && (geodesic - drawn).abs() > EDGE_READINGS_TOLERANCE * larger {
            let feature = read
                .fid
                .map_or_else(|| "without id".to_string(), |f| f.to_string());
            return Err(GdalError::Conflict {
                message: format!(
                    "input: feature {feature} has edges that run far along longitude or \
                     latitude, and its area depends on what an edge is: {geodesic:.6e} m² with \
                     geodesic edges (the shortest path on the ellipsoid), {drawn:.6e} m² with \
                     edges straight in longitude and latitude (as the layer's CRS draws them: \
                     a world box, latitude bands). Choose: method \"geodesic\" for geodesic \
                     edges, or method \"planar\" with crs \"EPSG:6933\" (an equal-area CRS in \
                     which such edges stay straight) for the drawn ones"
                ),
                parameter: "method".to_string(),
                candidates: serde_json::json!([
                    {"method": "geodesic", "feature": read.fid, "area_m2": geodesic},
                    {"method": "planar", "crs": "EPSG:6933", "feature": read.fid, "area_m2": drawn}
                ]),
            });
        }
    }
    Ok(())
}

/// [`check_long_edges`] for the lines of one feature: their length with geodesic edges
/// against their length along edges straight in longitude and latitude, as the layer draws
/// them and as `vector_buffer` and `vector_join` read them (attack round 19, R19-B3: a line
/// 60° along 60° N measured 3,231 km, where it runs 3,348 km as drawn; a line from 170° to
/// -170° measured the 2,218 km hop that `vector_join` refuses as wrapping round the globe).
fn check_long_line_edges(setup: &Setup, read: &Read) -> Result<(), GdalError> {
    let Some((geodesic, drawn)) =
        line_length_readings(&read.geometry, Some(&setup.to_measuring), &setup.measurer)?
    else {
        return Ok(());
    };
    let larger = geodesic.max(drawn);
    if !(larger > 0.0 && (geodesic - drawn).abs() > EDGE_READINGS_TOLERANCE * larger) {
        return Ok(());
    }
    let feature = read
        .fid
        .map_or_else(|| "without id".to_string(), |f| f.to_string());
    let wraps = crosses_antimeridian(&read.geometry);
    Err(GdalError::Conflict {
        message: format!(
            "input: feature {feature} is a line whose length depends on what an edge is: \
             {geodesic:.1} m with geodesic edges (the shortest path on the ellipsoid), \
             {drawn:.1} m along edges straight in longitude and latitude ({}). Choose: method \
             \"geodesic\" for the geodesic edges{}; for the drawn path, add vertices along the \
             line at most 1° apart, and both readings agree",
            if wraps {
                "an edge across ±180° is drawn the long way round the globe, and vector_join \
                 refuses it as wrapping"
            } else {
                "as the layer's CRS draws it, and as vector_buffer and vector_join read it"
            },
            if wraps {
                " (the short hop across ±180°)"
            } else {
                ""
            }
        ),
        parameter: "method".to_string(),
        candidates: serde_json::json!([
            {"method": "geodesic", "feature": read.fid, "length_m": geodesic},
            {"edges": "drawn", "feature": read.fid, "length_m": drawn}
        ]),
    })
}

/// A ring in longitude and latitude with each vertex's longitude moved by a multiple of 360°
/// where the edge to it crosses the antimeridian (more than 180° and less than 360° from the
/// previous vertex's), so that the ring continues past ±180° as the layer draws it.
fn across_the_antimeridian(ring: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let mut out: Vec<[f64; 3]> = Vec::with_capacity(ring.len());
    let mut shift = 0.0;
    for (i, vertex) in ring.iter().enumerate() {
        if i > 0 {
            let step = vertex[0] - ring[i - 1][0];
            if step.abs() > 180.0 && step.abs() < 360.0 {
                shift -= 360.0 * step.signum();
            }
        }
        out.push([vertex[0] + shift, vertex[1], vertex[2]]);
    }
    out
}

/// The area (m²) of polygons in longitude and latitude whose edges are straight in those
/// coordinates, on `ellipsoid`: each edge cut into steps of at most
/// [`STRAIGHT_EDGE_STEP_DEGREES`], and the rings' shoelace taken in longitude (radians) and
/// authalic `q(φ)`, where the ellipsoid's area element is `a²/2 dλ dq` (exact for edges along
/// parallels and meridians, whatever their length; the poles and ±180° need no care).
fn drawn_area(polygons: &[Part], ellipsoid: &Ellipsoid) -> f64 {
    let a = ellipsoid.a;
    let f = if ellipsoid.inverse_flattening > 0.0 {
        1.0 / ellipsoid.inverse_flattening
    } else {
        0.0
    };
    let e2 = f * (2.0 - f);
    let e = e2.sqrt();
    let q = |latitude: f64| {
        let s = latitude.to_radians().sin();
        if e < 1e-12 {
            return 2.0 * s;
        }
        (1.0 - e2)
            * (s / (1.0 - e2 * s * s) - (1.0 / (2.0 * e)) * ((1.0 - e * s) / (1.0 + e * s)).ln())
    };
    let mut total = 0.0;
    for polygon in polygons {
        for (index, ring) in polygon.rings.iter().enumerate() {
            let mut points: Vec<(f64, f64)> = Vec::new();
            for w in ring.windows(2) {
                let (p, n) = (w[0], w[1]);
                let span = (n[0] - p[0]).abs().max((n[1] - p[1]).abs());
                let steps = (span / STRAIGHT_EDGE_STEP_DEGREES)
                    .ceil()
                    .clamp(1.0, 3600.0) as usize;
                for i in 0..steps {
                    let t = i as f64 / steps as f64;
                    let latitude = p[1] + (n[1] - p[1]) * t;
                    points.push(((p[0] + (n[0] - p[0]) * t).to_radians(), q(latitude)));
                }
            }
            let n = points.len();
            let twice: f64 = (0..n)
                .map(|i| {
                    let (x0, y0) = points[i];
                    let (x1, y1) = points[(i + 1) % n];
                    x0 * y1 - x1 * y0
                })
                .sum();
            let area = (twice / 2.0).abs() * a * a / 2.0;
            total += if index == 0 { area } else { -area };
        }
    }
    total
}

/// Z: when the lines carry Z and the call did not choose, their 2D and 3D lengths must agree;
/// refused with both otherwise.
fn check_z(
    request: &MeasureRequest,
    setup: &mut Setup,
    layer_srs: &SpatialRef,
    reads: &[Read],
    measured: &Measured,
) -> Result<(), GdalError> {
    // `total.length` is 2D here; `length_3d` covers the lines with Z, the rest are flat.
    let flat_rest = measured.total.length
        - reads
            .iter()
            .filter(|r| r.has_z && r.kinds.contains(&Kind::Line))
            .map(|r| figures_of(setup, &r.geometry, &[Kind::Line], false).map(|f| f.length))
            .sum::<Result<f64, GdalError>>()?;
    let (two, three) = (measured.total.length, flat_rest + measured.length_3d);
    if agree(two, three) {
        return Ok(());
    }
    // Heights whose unit the layer does not declare have two 3D readings: both are given
    // here, not one that `z: true` would then refuse (attack round 19, R19-B4: 5,017.59 m was
    // offered as the 3D length, Z read in metres, where Z in US feet gives 2,438.40 m).
    if let Err(GdalError::Conflict {
        message,
        candidates,
        ..
    }) = check_undeclared_heights(setup, layer_srs, reads)
    {
        let unit = request.length_unit;
        let mut listed = vec![serde_json::json!(
            {"z": false, "length": two / unit.metres(), "unit": unit.symbol()}
        )];
        listed.extend(
            candidates
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut c| {
                    c["z"] = serde_json::json!(true);
                    c
                }),
        );
        return Err(GdalError::Conflict {
            message: format!(
                "the lines carry Z that changes their length: {} {u} in 2D (the horizontal \
                 projection, a map distance), and in 3D {}. Retry with z: false for the 2D \
                 length",
                two / unit.metres(),
                message.trim_start_matches("z: "),
                u = unit.symbol()
            ),
            parameter: "z".to_string(),
            candidates: serde_json::Value::Array(listed),
        });
    }
    let unit = request.length_unit;
    Err(GdalError::Conflict {
        message: format!(
            "the lines carry Z that changes their length: {} {u} in 2D (the horizontal \
             projection, a map distance) against {} {u} in 3D (along the slope, for a \
             cable, a pipe or a trail), {:.4} % apart. Retry with z: false for the 2D \
             length or z: true for the 3D one",
            two / unit.metres(),
            three / unit.metres(),
            (three / two - 1.0) * 100.0,
            u = unit.symbol()
        ),
        parameter: "z".to_string(),
        candidates: serde_json::json!([
            {"z": false, "length": two / unit.metres(), "unit": unit.symbol()},
            {"z": true, "length": three / unit.metres(), "unit": unit.symbol()},
        ]),
    })
}

/// How overlaps entered the totals: the union's area (when computed), the groups' unions
/// (`count_once` with `group_by`), and how they were counted (`null` when none overlap).
#[derive(Default)]
struct Counted {
    dissolved: Option<f64>,
    dissolved_groups: BTreeMap<Option<String>, f64>,
    counted: Option<Overlaps>,
}

/// Overlaps: the sum and the union are the candidates for an area total; they must agree
/// unless the call chose how overlaps count (refused with both otherwise).
fn count_overlaps(
    request: &MeasureRequest,
    setup: &Setup,
    polygons: &[&Read],
    overlaps: Option<&OverlapReport>,
    sum_area: f64,
    grouped: bool,
) -> Result<Counted, GdalError> {
    let mut out = Counted::default();
    let overlapping = overlaps.is_some_and(|o| o.pairs > 0);
    if !(overlapping || request.overlaps == Some(Overlaps::CountOnce)) {
        return Ok(out);
    }
    let union = union_area(setup, polygons.iter().map(|r| &r.geometry))?;
    out.dissolved = Some(union);
    if request.overlaps.is_none()
        && (sum_area - union).abs() > OVERLAP_AGREEMENT * sum_area.abs().max(union.abs())
    {
        let (a, u) = (
            request.area_unit.square_metres(),
            request.area_unit.symbol(),
        );
        return Err(GdalError::Conflict {
            message: format!(
                "{} pairs of polygons overlap (e.g. features {}), so the area total has two \
                 answers: {} {u} with the shared ground counted once (the union, the ground \
                 covered) or {} {u} with every feature's area counted (shared ground as often \
                 as it is covered, e.g. a sum of claims). Retry with overlaps: \"count_once\" \
                 or overlaps: \"count_each\"",
                overlaps.map_or(0, |o| o.pairs),
                overlaps
                    .map(|o| {
                        o.examples
                            .iter()
                            .take(3)
                            .map(|(x, y)| format!("{} and {}", fid_text(*x), fid_text(*y)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default(),
                union / a,
                sum_area / a,
            ),
            parameter: "overlaps".to_string(),
            candidates: serde_json::json!([
                {"overlaps": "count_once", "area": union / a, "unit": u},
                {"overlaps": "count_each", "area": sum_area / a, "unit": u},
            ]),
        });
    }
    if overlapping {
        out.counted = Some(request.overlaps.unwrap_or(Overlaps::CountEach));
    }
    if request.overlaps == Some(Overlaps::CountOnce) && grouped {
        let mut by_key: BTreeMap<Option<String>, Vec<&Geometry>> = BTreeMap::new();
        for read in polygons {
            by_key
                .entry(read.key.clone())
                .or_default()
                .push(&read.geometry);
        }
        for (key, members) in by_key {
            out.dissolved_groups
                .insert(key, union_area(setup, members.into_iter())?);
        }
    }
    Ok(out)
}

/// The notes on how the figures were made: method, CRS and its scale error, 3D, repairs.
fn measure_notes(
    request: &MeasureRequest,
    setup: &Setup,
    scale: Option<crate::gdal::vector::geometry::ScaleError>,
    three_d_lines: bool,
    invalid: &InvalidReport,
) -> Vec<String> {
    let mut notes = Vec::new();
    match (&setup.planar, &setup.ellipsoid) {
        (Some(planar), _) => {
            let unit = planar
                .linear_units_name()
                .unwrap_or_else(|| "unit".to_string());
            notes.push(format!(
                "planar figures in {} (unit: {unit}, {} m), converted to {} and {}",
                planar.name().unwrap_or_default(),
                planar.linear_units(),
                request.area_unit.symbol(),
                request.length_unit.symbol()
            ));
            if let Some(s) = scale {
                notes.push(format!(
                    "this CRS's scale error over the data: areas up to {:.3} %, lengths up to \
                     {:.3} % (worst at {:.4}°, {:.4}°)",
                    s.area * 100.0,
                    s.length * 100.0,
                    s.worst_at.0,
                    s.worst_at.1
                ));
            }
        }
        (None, Some(ellipsoid)) => notes.push(format!(
            "geodesic figures on the {} ellipsoid (a = {} m, 1/f = {}) with GeographicLib; \
             polygon areas are shells less holes, whatever the rings' winding",
            ellipsoid.name, ellipsoid.a, ellipsoid.inverse_flattening
        )),
        _ => {}
    }
    if three_d_lines {
        notes.push(match &setup.heights {
            Some((_, unit)) => format!(
                "line lengths are 3D: each segment's Z difference is in the CRS's height unit, \
                 {unit}, converted to metres"
            ),
            None => {
                "line lengths are 3D: each segment's Z difference is taken in metres".to_string()
            }
        });
    }
    if invalid.count > 0 {
        notes.push(if request.make_valid {
            format!(
                "{} invalid geometries were repaired (GEOS MakeValid) before measuring; only \
                 the parts of each feature's own kind are measured",
                invalid.count
            )
        } else {
            format!(
                "{} invalid geometries were measured as they are: their areas are not \
                 meaningful (pass make_valid to repair them)",
                invalid.count
            )
        });
    }
    notes
}

/// The same totals by the method not chosen (planar in the layer's CRS, or geodesic), and the
/// ratios of the chosen figures to them; `None` for a geographic layer measured geodesically.
#[allow(clippy::too_many_arguments)]
fn other_figures(
    request: &MeasureRequest,
    method: Method,
    layer_srs: &SpatialRef,
    reads: &[Read],
    polygons: &[&Read],
    three_d: bool,
    heights: Option<(f64, String)>,
    chosen_area: f64,
    chosen_length: f64,
) -> Result<Option<OtherFigures>, GdalError> {
    let other_method = match method {
        Method::Planar => Some(Method::Geodesic),
        Method::Geodesic if layer_srs.is_projected() => Some(Method::Planar),
        Method::Geodesic => None,
    };
    let Some((m, mut other_setup)) =
        other_method.and_then(|m| make_setup(m, None, layer_srs).ok().map(|s| (m, s)))
    else {
        return Ok(None);
    };
    // The heights are in the same unit whichever way the plane is measured (attack round 15,
    // R15-B8: the other method took US feet as metres, a 4.5 % difference that was not there).
    other_setup.heights = heights;
    let once = request.overlaps == Some(Overlaps::CountOnce);
    let (area_unit, length_unit) = (
        request.area_unit.square_metres(),
        request.length_unit.metres(),
    );
    let mut sum = Figures::default();
    for read in reads {
        sum.add(&figures_of(
            &other_setup,
            &read.geometry,
            &read.kinds,
            three_d,
        )?);
    }
    if once && !polygons.is_empty() {
        sum.area = union_area(&other_setup, polygons.iter().map(|r| &r.geometry))?;
    }
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    Ok(Some(OtherFigures {
        method: m,
        area: (sum.polygons > 0).then_some(sum.area / area_unit),
        perimeter: (sum.polygons > 0).then_some(sum.perimeter / length_unit),
        length: (sum.lines > 0).then_some(sum.length / length_unit),
        area_ratio: if sum.polygons > 0 {
            ratio(chosen_area, sum.area)
        } else {
            None
        },
        length_ratio: if sum.lines > 0 {
            ratio(chosen_length, sum.length)
        } else {
            None
        },
    }))
}

/// The note on a method the call left to the host: why it is the default.
fn default_method_note(method: Method, own_error: Option<f64>) -> String {
    match (method, own_error) {
        (Method::Planar, Some(e)) => format!(
            "planar by default: the layer's own CRS distorts the data by at most {:.3} % \
             (within {} %), so its own coordinates are measured, as a GIS reports them; \
             `other` holds the geodesic figures",
            e * 100.0,
            OWN_PLANE_TOLERANCE * 100.0
        ),
        (_, Some(e)) => format!(
            "geodesic by default: the layer's own CRS distorts the data by up to {:.3} % \
             (more than {} %); `other` holds its planar figures",
            e * 100.0,
            OWN_PLANE_TOLERANCE * 100.0
        ),
        _ => "geodesic by default: the layer is geographic".to_string(),
    }
}

/// Measure a layer: the facts the `measurement` domain sees, and the figures.
///
/// Everything is computed in one pass before the gate, since measuring writes nothing: a
/// refused call costs the reading, never a file. The phases: read (with validity), choose the
/// method, measure, check Z and overlaps, report.
pub fn measure(
    request: &MeasureRequest,
    dataset: &gdal::Dataset,
) -> Result<(MeasurementFacts, MeasureOutput), GdalError> {
    let _rings = RingsByContainment::start();
    let mut layer = crate::gdal::vector::layer("layer", dataset, request.layer.as_deref())?;
    let layer_name = layer.name();
    let layer_srs = layer.spatial_ref().ok_or_else(|| {
        GdalError::Arguments(format!(
            "input: layer \"{layer_name}\" has no CRS, so its coordinates have no known unit \
             or ellipsoid; assign the CRS first (vector_reproject with src_crs and the same \
             dst_crs)"
        ))
    })?;
    // A method the call names is checked before any reading.
    let named = match request.method {
        Some(method) => Some((
            method,
            make_setup(method, request.crs.as_deref(), &layer_srs)?,
        )),
        None => None,
    };
    let key_index = group_index(request, &layer, &layer_name)?;
    let grouped = key_index.is_some();
    let extent = crate::gdal::vector::layer_extent(&layer);
    let Reads {
        reads,
        empty,
        invalid,
        checked,
    } = read_features(request, &mut layer, key_index)?;

    let mut kinds_present: Vec<Kind> = reads.iter().flat_map(|r| r.kinds.clone()).collect();
    kinds_present.sort();
    kinds_present.dedup();
    let (method, mut setup, own_error) = choose_method(named, &layer_srs, extent, &kinds_present)?;
    setup.heights =
        extent.and_then(|e| height_unit(&layer_srs, ((e[0] + e[2]) / 2.0, (e[1] + e[3]) / 2.0)));
    let sloping_candidates = request.three_d.is_none()
        && reads
            .iter()
            .any(|r| r.has_z && r.kinds.contains(&Kind::Line));
    let three_d = request.three_d.unwrap_or(false);
    let measured = measure_features(
        request,
        &setup,
        &reads,
        grouped,
        three_d,
        sloping_candidates,
    )?;

    // Overlaps among the polygons (repaired ones included; invalid ones left unrepaired are
    // skipped, since GEOS cannot intersect them).
    let polygons: Vec<&Read> = reads
        .iter()
        .filter(|r| r.kinds.contains(&Kind::Polygon) && (r.valid || r.repaired))
        .collect();
    // Overlaps and unions are found in the layer's own coordinates: in lon/lat, a ring that
    // crosses the antimeridian (consecutive longitudes more than 180° apart) is a band round
    // the globe there, so two or more polygons with one would give a false overlap or a union
    // up to 9.5 times too large (attack round 7, R7-4). Refused, never computed wrong.
    if polygons.len() > 1 && layer_srs.is_geographic() {
        if let Some(crossing) = polygons.iter().find(|r| crosses_antimeridian(&r.geometry)) {
            return Err(GdalError::Arguments(format!(
                "input: feature {} has a ring that crosses the antimeridian (consecutive \
                 longitudes more than 180° apart); overlaps between polygons and their union are \
                 found in lon/lat, where such a ring wraps round the globe, so the totals would \
                 be wrong. Split the polygons at ±180° (or reproject the layer to a projected CRS \
                 that keeps them whole) and measure again; a single polygon alone is measured \
                 right",
                crossing
                    .fid
                    .map_or_else(|| "without id".to_string(), |f| f.to_string())
            )));
        }
    }
    let overlaps = if polygons.is_empty() || polygons.len() > MAX_OVERLAP_POLYGONS {
        None
    } else {
        Some(find_overlaps(&setup, &polygons)?)
    };
    if sloping_candidates {
        check_z(request, &mut setup, &layer_srs, &reads, &measured)?;
    }
    let heights_note = if three_d {
        check_undeclared_heights(&mut setup, &layer_srs, &reads)?
    } else {
        None
    };
    if request.method.is_none() && method == Method::Geodesic && layer_srs.is_geographic() {
        check_long_edges(&setup, &reads)?;
    }
    let sum_area = measured.total.area;
    let Counted {
        dissolved,
        dissolved_groups,
        counted,
    } = count_overlaps(
        request,
        &setup,
        &polygons,
        overlaps.as_ref(),
        sum_area,
        grouped,
    )?;
    let once = request.overlaps == Some(Overlaps::CountOnce);
    let (area_unit, length_unit) = (
        request.area_unit.square_metres(),
        request.length_unit.metres(),
    );
    // Areas are totalled as chosen: the union when overlaps count once, else the sum.
    let totals_of = |f: &Figures, union: Option<f64>| Totals {
        polygons: (f.polygons > 0).then(|| PolygonTotals {
            count: f.polygons,
            area: union.filter(|_| once).unwrap_or(f.area) / area_unit,
            perimeter: f.perimeter / length_unit,
        }),
        lines: (f.lines > 0).then(|| LineTotals {
            count: f.lines,
            length: f.length / length_unit,
        }),
        points: (f.points > 0).then_some(PointTotals { count: f.points }),
    };

    let scale = match (&setup.planar, extent) {
        (Some(planar), Some(extent)) => {
            transform::lonlat_bounds(&layer_srs, extent).and_then(|ll| scale_error(planar, ll))
        }
        _ => None,
    };
    let crs_facts = setup.planar.as_ref().map(crate::gdal::facts::crs_facts);
    let mut notes = measure_notes(
        request,
        &setup,
        scale,
        three_d && reads.iter().any(|r| r.has_z),
        &invalid,
    );
    notes.extend(heights_note);
    if setup.follow_drawn_edges
        && reads.iter().any(|r| {
            let e = r.geometry.envelope();
            e.MaxX - e.MinX > DRAWN_EDGE_STEP_DEGREES || e.MaxY - e.MinY > DRAWN_EDGE_STEP_DEGREES
        })
    {
        notes.push(format!(
            "edges longer than {DRAWN_EDGE_STEP_DEGREES}° were followed as the lon/lat layer \
             draws them (straight in longitude and latitude) before projecting, so any CRS \
             measures the same shape; `other` holds the figures with geodesic edges, which \
             differ where edges run far along parallels"
        ));
    }
    let chosen_area = if once {
        dissolved.unwrap_or(sum_area)
    } else {
        sum_area
    };
    let other = other_figures(
        request,
        method,
        &layer_srs,
        &reads,
        &polygons,
        three_d,
        setup.heights.clone(),
        chosen_area,
        measured.total.length,
    )?;
    if request.method.is_none() {
        notes.push(default_method_note(method, own_error));
    }

    let facts = MeasurementFacts {
        method: method.name().to_string(),
        crs: crs_facts.clone(),
        ellipsoid: setup.ellipsoid.as_ref().map(|e| e.name.clone()),
        area_scale_error: scale.map(|s| s.area),
        length_scale_error: scale.map(|s| s.length),
        worst_at: scale.map(|s| s.worst_at),
        features_checked: checked,
        invalid_features: invalid.count,
        make_valid: request.make_valid,
        overlapping_pairs: overlaps.as_ref().map(|o| o.pairs),
        overlap_area_m2: overlaps.as_ref().map(|o| o.area),
        // Settled by the host: the sum and the union agree, or `overlaps` chose.
        dissolve: true,
        geometry_kinds: kinds_present.iter().map(|k| k.name().to_string()).collect(),
        // Settled by the host: 2D and 3D agree, or `z` chose.
        z_ignored: false,
        distance_units: None,
        unweighted_means: Vec::new(),
    };
    let output = MeasureOutput {
        input: request.input.display().to_string(),
        layer: layer_name,
        method,
        other,
        crs: crs_facts.map(|c| CrsName {
            id: c.id,
            name: c.name,
        }),
        ellipsoid: setup.ellipsoid.clone(),
        units: Units {
            area: request.area_unit.symbol(),
            length: request.length_unit.symbol(),
        },
        totals: totals_of(&measured.total, dissolved),
        invalid,
        overlaps: overlaps.map(|o| OverlapReport {
            area: o.area / area_unit,
            counted,
            area_counted_once: dissolved.filter(|_| o.pairs > 0).map(|a| a / area_unit),
            area_counted_each: (o.pairs > 0).then_some(sum_area / area_unit),
            ..o
        }),
        empty,
        groups: measured
            .groups
            .iter()
            .map(|(key, figures)| GroupMeasure {
                key: key.clone(),
                totals: totals_of(figures, dissolved_groups.get(key).copied()),
            })
            .collect(),
        features_truncated: request.list_features && reads.len() > measured.features.len(),
        features: measured.features,
        notes,
    };
    Ok((facts, output))
}

/// The figures of one geometry (in the layer's CRS), only of the kinds it was read as.
fn figures_of(
    setup: &Setup,
    geometry: &Geometry,
    kinds: &[Kind],
    three_d: bool,
) -> Result<Figures, GdalError> {
    // Arcs as line segments in the layer's own plane, before any move: linearised after the
    // move into lon/lat, a 100 m circle was drawn in degrees and measured 44,400 m² for
    // 31,441 (attack round 18, R18-B3).
    let linear = without_arcs(geometry);
    let geometry = linear.as_ref().unwrap_or(geometry);
    let drawn = drawn_edges("input", geometry, setup.follow_drawn_edges)?;
    let source = drawn.as_ref().unwrap_or(geometry);
    // A lon/lat polygon across ±180° (or written past it) is cut there before it is projected:
    // a box from 170° E to 190° E moved into EPSG:6933 whole wrapped round the globe and
    // measured 17 times its area (attack round 22, R22-B7).
    let split = if setup.follow_drawn_edges && parts(source).iter().all(|p| p.kind == Kind::Polygon)
    {
        crate::gdal::vector::geometry::split_at_antimeridian(source)?
    } else {
        None
    };
    let moved = split
        .as_ref()
        .unwrap_or(source)
        .transform(&setup.to_measuring)
        .map_err(|e| GdalError::Failed {
            operation: "transforming a geometry to the measuring CRS".to_string(),
            message: e.to_string(),
        })?;
    let mut parts = of_kinds(parts(&moved), kinds);
    if let (true, Some((metres, _))) = (three_d, &setup.heights) {
        for vertex in parts.iter_mut().flat_map(|p| p.rings.iter_mut()).flatten() {
            vertex[2] *= metres;
        }
    }
    Ok(setup.measurer.figures(&parts, three_d))
}

/// The share by which the two readings of undeclared heights may differ before a 3D length
/// is refused: below it they are noted.
const HEIGHT_READINGS_TOLERANCE: f64 = 0.005;

/// 3D line lengths in a projected CRS whose unit is not the metre, and which declares no unit
/// for heights, have two readings: Z in metres, or Z in the plane's unit (a US State Plane
/// layer in feet usually has its heights in feet). They are computed both ways; when they
/// differ by more than [`HEIGHT_READINGS_TOLERANCE`] the call is refused with both figures and
/// how to declare the unit, and below it the note gives both (attack round 15, R15-B8: a line
/// 1000 ftUS across rising 100 ftUS measured 320.79 m, Z in metres, where Z in feet gives
/// 306.32 m, with only a note). Metre planes, geographic CRSs and declared heights have one
/// reading.
fn check_undeclared_heights(
    setup: &mut Setup,
    layer_srs: &SpatialRef,
    reads: &[Read],
) -> Result<Option<String>, GdalError> {
    let unit = layer_srs.linear_units();
    if setup.heights.is_some()
        || !layer_srs.is_projected()
        || transform::three_axes(layer_srs)
        || !(unit.is_finite() && unit > 0.0)
        || (unit - 1.0).abs() < 1e-9
    {
        return Ok(None);
    }
    let sloping: Vec<&Read> = reads
        .iter()
        .filter(|r| r.has_z && r.kinds.contains(&Kind::Line))
        .collect();
    if sloping.is_empty() {
        return Ok(None);
    }
    let name = layer_srs
        .linear_units_name()
        .unwrap_or_else(|| "the plane's unit".to_string());
    let length = |setup: &Setup| -> Result<f64, GdalError> {
        let mut total = 0.0;
        for read in &sloping {
            total += figures_of(setup, &read.geometry, &[Kind::Line], true)?.length;
        }
        Ok(total)
    };
    let in_metres = length(setup)?;
    setup.heights = Some((unit, format!("{name} ({unit} m a unit)")));
    let in_unit = length(setup);
    setup.heights = None;
    let in_unit = in_unit?;
    let apart = (in_metres - in_unit).abs() / in_metres.max(in_unit).max(f64::MIN_POSITIVE);
    if apart <= 1e-9 {
        return Ok(None);
    }
    let crs = layer_srs
        .auth_code()
        .ok()
        .zip(layer_srs.auth_name())
        .map_or_else(
            || "the layer's CRS".to_string(),
            |(code, auth)| format!("{auth}:{code}"),
        );
    if apart > HEIGHT_READINGS_TOLERANCE {
        return Err(GdalError::Conflict {
            message: format!(
                "z: the layer's CRS is in {name} and declares no unit for heights, so its \
                 sloping lines have two 3D lengths: {in_metres:.4} m with Z in metres and \
                 {in_unit:.4} m with Z in {name} ({:.2} % apart). Declare the heights' unit \
                 first with vector_reproject, giving src_crs and dst_crs a compound CRS ({crs} \
                 plus a vertical CRS in the heights' unit, e.g. {crs}+6360 for NAVD88 height \
                 in US feet or {crs}+5703 in metres), or measure in 2D (z: false)",
                apart * 100.0
            ),
            parameter: "z".to_string(),
            candidates: serde_json::json!([
                {"heights_in": "metre", "length_m": in_metres},
                {"heights_in": name, "length_m": in_unit},
            ]),
        });
    }
    Ok(Some(format!(
        "the layer's CRS declares no unit for heights: the 3D lengths take Z in metres \
         ({in_metres:.4} m); with Z in {name} they would be {in_unit:.4} m ({:.3} % apart)",
        apart * 100.0
    )))
}

/// The area (m²) of the union of polygons in the layer's CRS.
fn union_area<'a>(
    setup: &Setup,
    geometries: impl Iterator<Item = &'a Geometry>,
) -> Result<f64, GdalError> {
    let owned: Vec<Geometry> = geometries.cloned().collect();
    let Some(union) = union_all(&owned) else {
        return Ok(0.0);
    };
    Ok(figures_of(setup, &union, &[Kind::Polygon], false)?.area)
}

/// Pairs of polygons whose interiors overlap, and their pairwise overlapping area in m².
fn find_overlaps(setup: &Setup, polygons: &[&Read]) -> Result<OverlapReport, GdalError> {
    let listed: Vec<(Option<u64>, &Geometry)> =
        polygons.iter().map(|r| (r.fid, &r.geometry)).collect();
    let limit = crate::gdal::vector::geometry::max_overlap_pairs();
    let (pairs, area, examples) = overlapping_pairs("input", &listed, limit, |common| {
        Ok(figures_of(setup, common, &[Kind::Polygon], false)?.area)
    })?;
    Ok(OverlapReport {
        pairs,
        area,
        examples,
        counted: None,
        area_counted_once: None,
        area_counted_each: None,
    })
}

fn fid_text(fid: Option<u64>) -> String {
    fid.map_or_else(|| "?".to_string(), |f| f.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Candidates agree within one part per million of the larger, and not beyond.
    #[test]
    fn candidates_agree_within_one_part_per_million() {
        let cases = [
            (1.0, 1.0, true),
            (0.0, 0.0, true),
            (1_000_000.0, 1_000_000.9, true),
            (1_000_000.0, 1_000_001.1, false),
            (-5.0, -5.000_004, true),
            (-5.0, -5.000_006, false),
            (0.0, 1e-300, false),
        ];
        for (a, b, want) in cases {
            assert_eq!(agree(a, b), want, "{a} vs {b}");
            assert_eq!(agree(b, a), want, "{b} vs {a}");
        }
    }

    /// Every unit is its exact definition in metres: the international foot is 0.3048 m, the
    /// mile 5280 ft, the acre 43,560 ft², a hectare 100 m squared; each area unit but the
    /// acre is its length unit squared. The published names are the symbols the results use.
    /// Regression (attack round 14, R14-B10): a world box and 4-vertex latitude bands measured
    /// 0 m² with geodesic edges; with edges straight in lon/lat their areas are the
    /// ellipsoid's (510,065,621,724,089 m² for WGS 84's world; the tropics 2.02138e14 m²).
    #[test]
    fn r14_b10_areas_with_edges_straight_in_lon_lat() {
        let wgs84 = Ellipsoid {
            name: "WGS 84".to_string(),
            a: 6_378_137.0,
            inverse_flattening: 298.257_223_563,
        };
        let ring = |w: f64, s: f64, e: f64, n: f64| Part {
            kind: Kind::Polygon,
            rings: vec![vec![
                [w, s, 0.0],
                [e, s, 0.0],
                [e, n, 0.0],
                [w, n, 0.0],
                [w, s, 0.0],
            ]],
        };
        let world = drawn_area(&[ring(-180.0, -90.0, 180.0, 90.0)], &wgs84);
        assert!(
            (world / 510_065_621_724_089.0 - 1.0).abs() < 1e-6,
            "{world}"
        );
        let tropics = drawn_area(&[ring(-180.0, -23.44, 180.0, 23.44)], &wgs84);
        assert!((tropics / 2.02138e14 - 1.0).abs() < 1e-4, "{tropics}");
        // A small box: the drawn and geodesic readings agree (the check stays silent).
        let small = [ring(10.0, 60.0, 10.5, 60.5)];
        let geodesic = Measurer::Geodesic(Box::new(geographiclib_rs::Geodesic::wgs84()))
            .figures(&small, false)
            .area;
        assert!((drawn_area(&small, &wgs84) / geodesic - 1.0).abs() < EDGE_READINGS_TOLERANCE);
        // A ring across the antimeridian (179° E to 179° W) is drawn the short way round.
        let crossing = across_the_antimeridian(&[
            [179.0, 0.0, 0.0],
            [-179.0, 0.0, 0.0],
            [-179.0, 1.0, 0.0],
            [179.0, 1.0, 0.0],
            [179.0, 0.0, 0.0],
        ]);
        assert_eq!(crossing[1][0], 181.0);
        assert_eq!(crossing[3][0], 179.0);
    }

    #[test]
    fn units_convert_by_their_definitions() {
        let foot = 0.3048;
        let lengths = [
            (LengthUnit::Metre, 1.0, "m"),
            (LengthUnit::Kilometre, 1000.0, "km"),
            (LengthUnit::Foot, foot, "ft"),
            (LengthUnit::Mile, 5280.0 * foot, "mi"),
        ];
        for (unit, metres, symbol) in lengths {
            assert!((unit.metres() - metres).abs() <= 1e-15 * metres, "{symbol}");
            assert_eq!(unit.symbol(), symbol);
            assert_eq!(serde_json::to_value(unit).unwrap(), symbol);
        }
        let areas = [
            (AreaUnit::SquareMetre, 1.0, "m2"),
            (AreaUnit::Hectare, 100.0 * 100.0, "ha"),
            (AreaUnit::SquareKilometre, 1000.0 * 1000.0, "km2"),
            (AreaUnit::SquareFoot, foot * foot, "ft2"),
            (AreaUnit::Acre, 43_560.0 * foot * foot, "acre"),
            (
                AreaUnit::SquareMile,
                (5280.0 * foot) * (5280.0 * foot),
                "mi2",
            ),
        ];
        for (unit, square_metres, symbol) in areas {
            assert!(
                (unit.square_metres() - square_metres).abs() <= 1e-15 * square_metres,
                "{symbol}: {} vs {square_metres}",
                unit.square_metres()
            );
            assert_eq!(unit.symbol(), symbol);
            assert_eq!(serde_json::to_value(unit).unwrap(), symbol);
        }
    }

    /// The note on a default method says which one and why: the layer's own plane within
    /// 1 %, geodesic beyond it, geodesic for a geographic layer.
    #[test]
    fn default_method_notes_give_the_reason() {
        let cases = [
            (
                Method::Planar,
                Some(0.004),
                "planar by default",
                "at most 0.400 %",
            ),
            (
                Method::Geodesic,
                Some(0.25),
                "geodesic by default",
                "up to 25.000 %",
            ),
            (
                Method::Geodesic,
                None,
                "geodesic by default",
                "the layer is geographic",
            ),
        ];
        for (method, error, start, reason) in cases {
            let note = default_method_note(method, error);
            assert!(note.starts_with(start) && note.contains(reason), "{note}");
        }
    }

    /// Z: 2D and 3D candidates that agree pass; a sloping line (3-4-5: 3 m across, 5 m along)
    /// is refused with both lengths in the unit asked.
    #[test]
    fn z_is_a_question_only_when_it_changes_a_length() {
        let srs = epsg(32633);
        let mut setup = make_setup(Method::Planar, None, &srs).unwrap();
        let request = |unit| MeasureRequest {
            input: PathBuf::new(),
            layer: None,
            method: Some(Method::Planar),
            crs: None,
            area_unit: AreaUnit::SquareMetre,
            length_unit: unit,
            group_by: None,
            make_valid: false,
            overlaps: None,
            three_d: None,
            list_features: false,
        };
        let read = |wkt: &str| Read {
            fid: Some(0),
            key: None,
            geometry: Geometry::from_wkt(wkt).unwrap(),
            kinds: vec![Kind::Line],
            valid: true,
            repaired: false,
            has_z: true,
        };
        let cases = [
            ("LINESTRING Z (500000 0 7, 500003 0 7)", true, 3.0),
            ("LINESTRING Z (500000 0 0, 500003 0 4)", false, 5.0),
        ];
        for (wkt, agrees, three) in cases {
            let reads = [read(wkt)];
            let measured = measure_features(
                &request(LengthUnit::Metre),
                &setup,
                &reads,
                false,
                false,
                true,
            )
            .unwrap();
            assert!((measured.total.length - 3.0).abs() < 1e-9, "{wkt}");
            assert!((measured.length_3d - three).abs() < 1e-9, "{wkt}");
            let checked = check_z(
                &request(LengthUnit::Foot),
                &mut setup,
                &srs,
                &reads,
                &measured,
            );
            match checked {
                Ok(()) => assert!(agrees, "{wkt}"),
                Err(GdalError::Conflict {
                    parameter,
                    candidates,
                    ..
                }) => {
                    assert!(!agrees, "{wkt}");
                    assert_eq!(parameter, "z");
                    let feet = candidates[1]["length"].as_f64().unwrap();
                    assert!((feet - 5.0 / 0.3048).abs() < 1e-9, "{candidates}");
                }
                Err(other) => panic!("{wkt}: {other}"),
            }
        }
    }

    fn epsg(code: u32) -> SpatialRef {
        SpatialRef::from_epsg(code).expect("EPSG code known")
    }

    /// Issue 18: a reprojection is graded by its target's scale error over the data. Web
    /// Mercator over 60° to 70° N stretches lengths by 1/cos(70°) = 2.92 (+192 %) and areas by
    /// its square (+755 %); UTM 33N at its central meridian shrinks them by its k0 0.9996
    /// (0.04 %, areas 0.08 %); a geographic target has no planar figures.
    #[test]
    fn a_reprojection_carries_its_targets_scale_error_over_the_data() {
        let mercator = reprojection_facts(&epsg(3857), Some([15.0, 60.0, 25.0, 70.0]))
            .expect("facts for a projected target");
        assert_eq!(mercator.method, "planar");
        assert_eq!(
            mercator.crs.as_ref().and_then(|c| c.id.as_deref()),
            Some("EPSG:3857")
        );
        let (area, length) = (
            mercator.area_scale_error.expect("area"),
            mercator.length_scale_error.expect("length"),
        );
        eprintln!("EPSG:3857 over 15-25° E, 60-70° N: areas {area}, lengths {length}");
        let k = 1.0 / 70.0_f64.to_radians().cos();
        assert!((length - (k - 1.0)).abs() < 0.02, "{length}");
        assert!((area - (k * k - 1.0)).abs() < 0.1, "{area}");
        assert_eq!(mercator.worst_at.map(|(_, lat)| lat), Some(70.0));
        let utm = reprojection_facts(&epsg(32633), Some([14.95, 45.0, 15.05, 47.0]))
            .expect("facts for a projected target");
        let (area, length) = (
            utm.area_scale_error.expect("area"),
            utm.length_scale_error.expect("length"),
        );
        eprintln!("EPSG:32633 over 14.95-15.05° E, 45-47° N: areas {area}, lengths {length}");
        assert!((0.0003..0.0006).contains(&length), "{length}");
        assert!((0.0006..0.0011).contains(&area), "{area}");
        assert!(reprojection_facts(&epsg(4326), Some([15.0, 60.0, 25.0, 70.0])).is_none());
        assert!(reprojection_facts(&epsg(3857), None).is_none());
    }
}
