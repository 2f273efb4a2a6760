//! The analysis family: `vector_measure`, `vector_buffer`, `vector_overlay` and `vector_join`,
//! the questions analysts ask of vector data (how big, how long, what is within, what is left).
//!
//! Each tool checks its arguments here, and the `gdal/` runners (`gdal::measure`,
//! `gdal::analysis`) do the work and gather the facts the `measurement` domain decides on
//! (`CallFacts::measurement`). Measuring writes nothing, so `vector_measure` computes its
//! figures before the gate and returns them after it.

use crate::domains::CallFacts;
use crate::gdal::facts;
use crate::gdal::measure::{self, AreaUnit, LengthUnit, MeasureOutput, MeasureRequest, Method};
use crate::server::args::{parse, Justifications};
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated::{self, Gathered};
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
    /// geodesic (default; on the CRS's ellipsoid) or planar (in `crs`).
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
    /// Also give the area of the union, so overlaps count once.
    #[serde(default)]
    pub dissolve: bool,
    /// 3D line lengths where Z exists.
    #[serde(default)]
    pub z: bool,
    /// List features one by one (at most 1000; default true).
    pub features: Option<bool>,
    pub justification: Option<Justifications>,
}

/// `vector_measure`.
pub async fn measure(call: Call) -> Result<Value, ToolError> {
    let args: MeasureArgs = parse(call.tool, &call.arguments)?;
    let input = call.input_path("input", &args.input)?;
    let method = args.method.unwrap_or_default();
    if args.crs.is_some() && method == Method::Geodesic {
        return Err(ToolError::Arguments(
            "crs: applies to method \"planar\" only; geodesic figures are taken on the layer \
             CRS's own ellipsoid"
                .to_string(),
        ));
    }
    let request = MeasureRequest {
        input: input.clone(),
        layer: args.layer.clone(),
        method,
        crs: args.crs.clone(),
        area_unit: args.area_unit.unwrap_or_default(),
        length_unit: args.length_unit.unwrap_or_default(),
        group_by: args.group_by.clone(),
        make_valid: args.make_valid,
        dissolve: args.dissolve,
        three_d: args.z,
        list_features: args.features.unwrap_or(true),
    };
    let justifications = args.justification.clone();
    gated::run(
        &call,
        justifications,
        move || {
            let dataset = crate::gdal::vector::open("input", &input)?;
            let mut dataset_facts = facts::from_dataset("input", &input, &dataset);
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
        |output: MeasureOutput, _work| Ok(output),
    )
    .await
}
