//! The analysis family: `vector_measure`, `vector_buffer`, `vector_overlay` and `vector_join`,
//! the questions analysts ask of vector data (how big, how long, what is within, what is left).
//!
//! Each tool checks its arguments here, and the `gdal/` runners (`gdal::measure`,
//! `gdal::analysis`) do the work and gather the facts the `measurement` domain decides on
//! (`CallFacts::measurement`). Measuring writes nothing, so `vector_measure` computes its
//! figures before the gate and returns them after it.

use crate::domains::CallFacts;
use crate::gdal::facts;
use crate::gdal::facts::encoding::OutputFacts;
use crate::gdal::vector;
use crate::gdal::vector::analysis::{
    self, BufferRequest, JoinRequest, OverlayOperation, OverlayRequest, Predicate, Stat, Weighting,
};
use crate::gdal::vector::measure::{
    self, AreaUnit, LengthUnit, MeasureOutput, MeasureRequest, Method, Overlaps,
};
use crate::server::args::{name_of, parse, Justifications};
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated::{self, Computed, Gathered};
use crate::server::tool::{handler, Effect, Family, Schemas, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Arguments of `vector_measure`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasureArgs {
    /// Vector dataset inside a workspace.
    pub input: String,
    /// Layer (needed when the dataset has several).
    pub layer: Option<String>,
    /// planar (in `crs`) or geodesic. Default: planar if the layer's projection distorts the data
    /// by at most 1 %, else geodesic.
    pub method: Option<Method>,
    /// Planar only: projected CRS to measure in (default: the layer's).
    pub crs: Option<String>,
    /// Default m2.
    pub area_unit: Option<AreaUnit>,
    /// Default m.
    pub length_unit: Option<LengthUnit>,
    /// Field to total by.
    pub group_by: Option<String>,
    /// Repair invalid geometries (GEOS MakeValid) before measuring.
    #[serde(default)]
    pub make_valid: bool,
    /// Overlapping polygons in area totals: count_once (union) or count_each (sum); needed only
    /// where they differ.
    pub overlaps: Option<Overlaps>,
    /// 3D (true) or 2D (false) line lengths; needed only where Z changes them.
    pub z: Option<bool>,
    /// List features one by one (at most 1000; default true).
    pub features: Option<bool>,
    pub justification: Option<Justifications>,
}

/// `vector_measure`, as the tool table lists it.
pub const VECTOR_MEASURE: ToolSpec = ToolSpec {
    name: "vector_measure",
    family: Family::Analysis,
    title: "Measure vector data",
    verb: "Measured",
    description: "Areas, perimeters, lengths and counts per feature, per group and in \
        total: geodesic on the ellipsoid, or planar in a projected CRS. Reports invalid \
        geometries and overlaps. Gated by measurement.",
    // Not read-only: a gated call appends to the ledger and stores the capsule of a
    // justification it is given (attack round 15, R15-C10: announced `readOnlyHint`).
    effect: Effect::Stores,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::gated::<MeasureArgs, crate::gdal::vector::measure::MeasureOutput>(),
    handler: handler!(measure),
};

/// `vector_measure`.
pub async fn measure(call: Call) -> Result<Value, ToolError> {
    let args: MeasureArgs = parse(call.tool, &call.arguments)?;
    let input = call.input_path("input", &args.input)?;
    let method = match (args.method, &args.crs) {
        (Some(Method::Geodesic), Some(_)) => {
            return Err(ToolError::Arguments(
                "crs: applies to method \"planar\" only; geodesic figures are taken on the \
                 layer CRS's own ellipsoid"
                    .to_string(),
            ))
        }
        (None, Some(_)) => Some(Method::Planar),
        (method, _) => method,
    };
    let request = MeasureRequest {
        input: input.clone(),
        layer: args.layer.clone(),
        method,
        crs: args.crs.clone(),
        area_unit: args.area_unit.unwrap_or_default(),
        length_unit: args.length_unit.unwrap_or_default(),
        group_by: args.group_by.clone(),
        make_valid: args.make_valid,
        overlaps: args.overlaps,
        three_d: args.z,
        list_features: args.features.unwrap_or(true),
    };
    gated::run(
        &call,
        args.justification,
        move || {
            let dataset = vector::open("input", &input)?;
            let mut dataset_facts = facts::from_dataset("input", &input, &dataset)?;
            if let Some(vector) = dataset_facts.vector.as_mut() {
                vector.selected_layer = request.layer.clone();
            }
            let (measurement, output) = measure::measure(&request, &dataset)?;
            let facts = CallFacts {
                datasets: vec![dataset_facts],
                measurement: Some(measurement),
                ..CallFacts::default()
            };
            Ok(Gathered::new(facts, output))
        },
        |output: MeasureOutput, _work| {
            let computation = format!(
                "measured layer {} of {}: {}",
                output.layer,
                output.input,
                output.notes.join(" ")
            );
            Ok(Computed::new(output, computation))
        },
    )
    .await
}

/// Arguments of `vector_buffer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BufferArgs {
    /// Vector dataset inside a workspace.
    pub input: String,
    /// Output path; the format follows its extension unless `format` is given.
    pub output: String,
    /// Buffer distance (negative shrinks polygons).
    pub distance: f64,
    /// Unit of `distance`.
    pub unit: LengthUnit,
    /// geodesic (default; true distances around each feature) or planar (in the layer's CRS).
    pub method: Option<Method>,
    /// Layer (needed when the dataset has several).
    pub layer: Option<String>,
    /// Segments per quarter circle (default 8).
    pub segments: Option<u32>,
    /// Merge all buffers into one feature.
    #[serde(default)]
    pub dissolve: bool,
    /// Repair invalid geometries first.
    #[serde(default)]
    pub make_valid: bool,
    pub format: Option<String>,
    #[serde(default)]
    pub overwrite: bool,
    pub justification: Option<Justifications>,
}

/// `vector_buffer`, as the tool table lists it.
pub const VECTOR_BUFFER: ToolSpec = ToolSpec {
    name: "vector_buffer",
    family: Family::Analysis,
    title: "Buffer vector data",
    verb: "Buffered",
    description: "Buffer features by a distance with explicit units: geodesic (true \
        metres around each feature, any CRS) or planar in a projected CRS. Gated by \
        measurement.",
    effect: Effect::Writes,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::gated::<BufferArgs, crate::gdal::vector::analysis::BufferOutput>(),
    handler: handler!(buffer),
};

/// `vector_buffer`.
pub async fn buffer(call: Call) -> Result<Value, ToolError> {
    let args: BufferArgs = parse(call.tool, &call.arguments)?;
    if !args.distance.is_finite() || args.distance == 0.0 {
        return Err(ToolError::Arguments(
            "distance: give a non-zero finite distance (negative shrinks polygons)".to_string(),
        ));
    }
    let segments = args.segments.unwrap_or(8);
    if !(1..=1000).contains(&segments) {
        return Err(ToolError::Arguments(
            "segments: between 1 and 1000 per quarter circle".to_string(),
        ));
    }
    let (input, output) = call.input_and_output(&args.input, &args.output, args.overwrite)?;
    let request = BufferRequest {
        driver: String::new(),
        input,
        output,
        layer: args.layer.clone(),
        distance: args.distance,
        unit: args.unit.symbol(),
        distance_m: args.distance * args.unit.metres(),
        method: args.method.unwrap_or_default(),
        segments,
        dissolve: args.dissolve,
        make_valid: args.make_valid,
    };
    let format = args.format.clone();
    gated::run(
        &call,
        args.justification,
        move || {
            let mut request = request;
            request.driver = vector::driver_for(format.as_deref(), &request.output)?;
            let dataset = vector::open("input", &request.input)?;
            let mut dataset_facts = facts::from_dataset("input", &request.input, &dataset)?;
            if let Some(v) = dataset_facts.vector.as_mut() {
                v.selected_layer = request.layer.clone();
            }
            let measurement = analysis::buffer_facts(&request, &dataset)?;
            let facts = CallFacts {
                datasets: vec![dataset_facts],
                measurement: Some(measurement),
                output: Some(OutputFacts::vector(&request.driver, &[])),
                ..CallFacts::default()
            };
            Ok(Gathered::new(facts, request))
        },
        |request: BufferRequest, _work| {
            let output = analysis::buffer(&request)?;
            let computation = format!(
                "every feature of layer {} of {} buffered by {} ({} method, {} segments per \
                 quarter circle){}{}; {}",
                output.layer,
                request.input.display(),
                output.distance,
                name_of(&output.method),
                request.segments,
                if request.make_valid {
                    ", invalid geometries repaired with GEOS make_valid first"
                } else {
                    ""
                },
                if request.dissolve {
                    ", the buffers dissolved into one"
                } else {
                    ""
                },
                output.notes.join(" ")
            );
            Ok(Computed::new(output, computation))
        },
    )
    .await
}

/// Arguments of `vector_overlay`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverlayArgs {
    /// Vector dataset inside a workspace.
    pub input: String,
    /// Second dataset; reprojected to the input's CRS if needed.
    pub overlay: String,
    pub operation: OverlayOperation,
    /// Output path; the format follows its extension unless `format` is given.
    pub output: String,
    pub layer: Option<String>,
    pub overlay_layer: Option<String>,
    /// Merge the result by this field.
    pub dissolve_by: Option<String>,
    /// Repair invalid geometries first.
    #[serde(default)]
    pub make_valid: bool,
    pub format: Option<String>,
    #[serde(default)]
    pub overwrite: bool,
    pub justification: Option<Justifications>,
}

/// The gather step of a two-layer tool: both datasets' facts, the tool's measurement facts
/// (`measure`, given both datasets, reads each layer once), and the second layer's
/// reprojection (for crs_datum).
fn two_layer_gather(
    input: &std::path::Path,
    layer: Option<&str>,
    role: &str,
    second: &std::path::Path,
    second_layer: Option<&str>,
    measure: impl FnOnce(
        &gdal::Dataset,
        &gdal::Dataset,
    ) -> Result<analysis::TwoLayers, crate::gdal::GdalError>,
) -> Result<(CallFacts, Option<String>), ToolError> {
    let first_dataset = vector::open("input", input)?;
    let second_dataset = analysis::open_second(role, second)?;
    let mut first_facts = facts::from_dataset("input", input, &first_dataset)?;
    if let Some(v) = first_facts.vector.as_mut() {
        v.selected_layer = layer.map(str::to_string);
    }
    let mut second_facts = facts::from_dataset(role, second, &second_dataset)?;
    if let Some(v) = second_facts.vector.as_mut() {
        v.selected_layer = second_layer.map(str::to_string);
    }
    let found = measure(&first_dataset, &second_dataset)?;
    let transformation = found
        .reprojected
        .as_ref()
        .and_then(|r| r.transformation.clone());
    let pipeline = transformation
        .as_ref()
        .and_then(|t| t.explicit_pipeline())
        .map(str::to_string);
    let target_crs = found
        .reprojected
        .as_ref()
        .and_then(|_| first_facts.crs.clone());
    Ok((
        CallFacts {
            datasets: vec![first_facts, second_facts],
            target_crs,
            transformation,
            measurement: Some(found.measurement),
            ..CallFacts::default()
        },
        pipeline,
    ))
}

/// `vector_overlay`, as the tool table lists it.
pub const VECTOR_OVERLAY: ToolSpec = ToolSpec {
    name: "vector_overlay",
    family: Family::Analysis,
    title: "Overlay two layers",
    verb: "Overlaid",
    description: "Intersection, difference, union, symmetric difference or identity of \
        two layers, attributes from both (overlay_ prefix). Another CRS is reprojected \
        by the host (crs_datum); an empty result says why.",
    effect: Effect::Writes,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::gated::<OverlayArgs, crate::gdal::vector::analysis::OverlayOutput>(),
    handler: handler!(overlay),
};

/// `vector_overlay`.
pub async fn overlay(call: Call) -> Result<Value, ToolError> {
    let args: OverlayArgs = parse(call.tool, &call.arguments)?;
    let input = call.input_path("input", &args.input)?;
    let second = call.input_path("overlay", &args.overlay)?;
    let output = call.output_path("output", &args.output, args.overwrite, &[&input, &second])?;
    let mut request = OverlayRequest {
        input,
        overlay: second,
        output,
        driver: String::new(),
        layer: args.layer.clone(),
        overlay_layer: args.overlay_layer.clone(),
        operation: args.operation,
        dissolve_by: args.dissolve_by.clone(),
        make_valid: args.make_valid,
        pipeline: None,
    };
    let format = args.format.clone();
    gated::run(
        &call,
        args.justification,
        move || {
            request.driver = vector::driver_for(format.as_deref(), &request.output)?;
            let (facts, pipeline) = two_layer_gather(
                &request.input,
                request.layer.as_deref(),
                "overlay",
                &request.overlay,
                request.overlay_layer.as_deref(),
                |first, second| {
                    analysis::two_layer_facts(
                        first,
                        request.layer.as_deref(),
                        "overlay",
                        second,
                        request.overlay_layer.as_deref(),
                        request.make_valid,
                    )
                },
            )?;
            request.pipeline = pipeline;
            let facts = CallFacts {
                output: Some(OutputFacts::vector(&request.driver, &[])),
                ..facts
            };
            Ok(Gathered::new(facts, request))
        },
        |request: OverlayRequest, _work| {
            let output = analysis::overlay(&request)?;
            let computation = format!(
                "GEOS {} of layer {} of {} with {}{}{}{}; {}",
                name_of(&request.operation),
                output.layer,
                request.input.display(),
                request.overlay.display(),
                request
                    .pipeline
                    .as_ref()
                    .map_or(String::new(), |p| format!(" (reprojected through `{p}`)")),
                request
                    .dissolve_by
                    .as_ref()
                    .map_or(String::new(), |f| format!(", dissolved by {f}")),
                if request.make_valid {
                    ", invalid geometries repaired with GEOS make_valid first"
                } else {
                    ""
                },
                output.notes.join(" ")
            );
            Ok(Computed::new(output, computation))
        },
    )
    .await
}

/// Arguments of `vector_join`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinArgs {
    /// Target dataset: its features get the join's columns.
    pub input: String,
    /// Source dataset; reprojected to the input's CRS if needed.
    pub join: String,
    /// Output path; the format follows its extension unless `format` is given.
    pub output: String,
    /// Spatial join: target <predicate> source (GEOS: a point on a shared boundary is within
    /// neither zone).
    pub predicate: Option<Predicate>,
    /// dwithin only.
    pub distance: Option<f64>,
    /// nearest only: farthest match (optional).
    pub max_distance: Option<f64>,
    /// Unit of `distance` or `max_distance`.
    pub unit: Option<LengthUnit>,
    /// Attribute join instead: a field of both, compared as text ("001" is not "1").
    pub key: Option<String>,
    /// Source fields to summarise.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Summaries per field (count: its non-null values; first, min, max: in its type);
    /// join_count is always added.
    #[serde(default)]
    pub stats: Vec<Stat>,
    /// Field weighting weighted_mean (e.g. population for a rate).
    pub weight: Option<String>,
    /// equal: plain mean; needed only where a weight field changes it.
    pub weighting: Option<Weighting>,
    pub layer: Option<String>,
    pub join_layer: Option<String>,
    /// Repair invalid geometries first.
    #[serde(default)]
    pub make_valid: bool,
    pub format: Option<String>,
    #[serde(default)]
    pub overwrite: bool,
    pub justification: Option<Justifications>,
}

/// `vector_join`, as the tool table lists it.
pub const VECTOR_JOIN: ToolSpec = ToolSpec {
    name: "vector_join",
    family: Family::Analysis,
    title: "Join two layers",
    verb: "Joined attributes onto",
    description: "Spatial join (predicate, dwithin a distance, or nearest: geodesic \
        metres, ties all joined; gives Voronoi assignment) or attribute join \
        (key as text) of a source layer onto target features: join_count plus \
        summaries per field. Another CRS is reprojected by the host (crs_datum).",
    effect: Effect::Writes,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::gated::<JoinArgs, crate::gdal::vector::analysis::JoinOutput>(),
    handler: handler!(join),
};

/// `vector_join`.
pub async fn join(call: Call) -> Result<Value, ToolError> {
    let args: JoinArgs = parse(call.tool, &call.arguments)?;
    match (&args.predicate, &args.key) {
        (Some(_), Some(_)) => {
            return Err(ToolError::Arguments(
                "predicate and key are exclusive: a spatial join or an attribute join".to_string(),
            ))
        }
        (None, None) => {
            return Err(ToolError::Arguments(
                "give `predicate` (a spatial join) or `key` (an attribute join on a field of both)"
                    .to_string(),
            ))
        }
        _ => {}
    }
    let distance_m =
        match (args.predicate, args.distance, args.max_distance, args.unit) {
            (Some(Predicate::Dwithin), Some(d), None, Some(unit)) if d.is_finite() && d >= 0.0 => {
                Some(d * unit.metres())
            }
            (Some(Predicate::Dwithin), _, _, _) => {
                return Err(ToolError::Arguments(
                    "dwithin needs `distance` (>= 0) and its `unit` (m, km, ft or mi); \
                 max_distance is nearest's"
                        .to_string(),
                ))
            }
            (Some(Predicate::Nearest), None, Some(d), Some(unit)) if d.is_finite() && d >= 0.0 => {
                Some(d * unit.metres())
            }
            (Some(Predicate::Nearest), None, None, None) => None,
            (Some(Predicate::Nearest), _, _, _) => return Err(ToolError::Arguments(
                "nearest takes an optional `max_distance` (>= 0) with its `unit` (m, km, ft or \
                 mi); `distance` is dwithin's"
                    .to_string(),
            )),
            (_, None, None, None) => None,
            _ => {
                return Err(ToolError::Arguments(
                    "distance applies to predicate \"dwithin\" only, max_distance to \"nearest\", \
                 each with its unit"
                        .to_string(),
                ))
            }
        };
    if args.stats.contains(&Stat::WeightedMean) && args.weight.is_none() {
        return Err(ToolError::Arguments(
            "stats: weighted_mean needs `weight`, the field to weight by (e.g. population for a \
             rate)"
                .to_string(),
        ));
    }
    if args.weight.is_some() && !args.stats.contains(&Stat::WeightedMean) {
        return Err(ToolError::Arguments(
            "weight: applies to the weighted_mean statistic; add \"weighted_mean\" to stats \
             (mean stays the plain mean)"
                .to_string(),
        ));
    }
    if !args.fields.is_empty() && args.stats.is_empty() {
        return Err(ToolError::Arguments(
            "stats: name the summaries of `fields` (count, sum, mean, weighted_mean, first, \
             min, max)"
                .to_string(),
        ));
    }
    let input = call.input_path("input", &args.input)?;
    let source = call.input_path("join", &args.join)?;
    let output = call.output_path("output", &args.output, args.overwrite, &[&input, &source])?;
    let mut request = JoinRequest {
        input,
        join: source,
        output,
        driver: String::new(),
        layer: args.layer.clone(),
        join_layer: args.join_layer.clone(),
        predicate: args.predicate,
        distance_m,
        key: args.key.clone(),
        fields: args.fields.clone(),
        stats: args.stats.clone(),
        weight: args.weight.clone(),
        weighting: args.weighting,
        make_valid: args.make_valid,
        pipeline: None,
    };
    let format = args.format.clone();
    gated::run(
        &call,
        args.justification,
        move || {
            request.driver = vector::driver_for(format.as_deref(), &request.output)?;
            let (facts, pipeline) = two_layer_gather(
                &request.input,
                request.layer.as_deref(),
                "join",
                &request.join,
                request.join_layer.as_deref(),
                |first, second| analysis::join_facts(&request, first, second),
            )?;
            request.pipeline = pipeline;
            let facts = CallFacts {
                output: Some(OutputFacts::vector(&request.driver, &[])),
                ..facts
            };
            Ok(Gathered::new(facts, request))
        },
        |request: JoinRequest, _work| {
            let output = analysis::join(&request)?;
            let how = match (&request.key, &request.predicate) {
                (Some(key), _) => format!("by equal values of {key}"),
                (None, Some(predicate)) => format!(
                    "by the spatial predicate {}{}",
                    name_of(predicate),
                    request
                        .distance_m
                        .map_or(String::new(), |d| format!(" within {d} m (geodesic)"))
                ),
                (None, None) => "by the default spatial predicate".to_string(),
            };
            let computation = format!(
                "features of {} joined onto layer {} of {} {how}; columns {}{}{}; {}",
                request.join.display(),
                output.layer,
                request.input.display(),
                output.columns.join(", "),
                request
                    .weight
                    .as_ref()
                    .map_or(String::new(), |w| format!(", means weighted by {w}")),
                request
                    .pipeline
                    .as_ref()
                    .map_or(String::new(), |p| format!(" (reprojected through `{p}`)")),
                output.notes.join(" ")
            );
            Ok(Computed::new(output, computation))
        },
    )
    .await
}
