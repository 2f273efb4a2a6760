//! Measuring vector data: areas, lengths and perimeters on the ellipsoid or in a named CRS, and
//! the facts about a measuring call that the `measurement` domain decides on.
//!
//! This room owns reading a layer's geometries for measurement (per geometry kind: a polygon
//! has an area and a perimeter, a line a length, a point a count), checking and repairing their
//! validity, finding overlaps, and sampling a planar CRS's scale error over the data's extent.
//! Geodesic figures come from GeographicLib (`geographiclib-rs`) on the layer's own ellipsoid;
//! planar figures from GEOS in the CRS the caller names.

use super::facts::CrsFacts;
use schemars::JsonSchema;
use serde::Serialize;

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
