//! The aggregation tools: `zonal_stats`, `raster_composite` and `raster_aggregate`, gated by
//! the `aggregation` domain (and by `crs_datum` / `resampling` where zones or grids differ).
//!
//! GDAL 3.6 has no zonal statistics and no per-pixel compositing across files, so those two
//! run the host's own numeric core ([`crate::aggregation`]) over windows and row strips read
//! with GDAL. Block aggregation is `gdalwarp` onto an exactly aligned coarser grid, which GDAL
//! already does well (its statistics skip nodata).

use super::raster::{describe_output, RasterOutput};
use super::tools::{
    creation_options, gate_arguments, output_path, parse, pass_gate, schema_of, to_json,
    InlineJustifications, Outcome,
};
use super::{App, ToolError};
use crate::domains::CallFacts;
use crate::gdal::facts;
use crate::gdal::warp::WarpRequest;
use crate::gdal::{self as gdal_runner, GdalError};
use crate::reflection::justification::Justification;
use rmcp::model::{Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------------
// raster_aggregate

/// Statistics for block aggregation (gdalwarp's reducing methods).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BlockStatistic {
    /// Mean of the valid cells of the block.
    Average,
    Sum,
    Min,
    Max,
    /// Most frequent value (for classes).
    Mode,
    /// Median.
    Med,
    /// First quartile.
    Q1,
    /// Third quartile.
    Q3,
    /// Root mean square.
    Rms,
}

impl BlockStatistic {
    fn gdal_name(self) -> &'static str {
        match self {
            Self::Average => "average",
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
            Self::Mode => "mode",
            Self::Med => "med",
            Self::Q1 => "q1",
            Self::Q3 => "q3",
            Self::Rms => "rms",
        }
    }
}

/// An aggregation factor: one for both axes, or [x, y].
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Factor {
    Both(u32),
    PerAxis([u32; 2]),
}

impl Factor {
    fn pair(self) -> (u32, u32) {
        match self {
            Factor::Both(f) => (f, f),
            Factor::PerAxis([x, y]) => (x, y),
        }
    }
}

/// Arguments of `raster_aggregate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AggregateArgs {
    /// Source raster inside a workspace (north-up).
    pub input: String,
    /// Output path inside a workspace.
    pub output: String,
    /// Block size in input cells: 4 makes each output cell from a 4x4 block; [4, 2] for 4
    /// columns by 2 rows.
    pub factor: Factor,
    /// How a block's valid cells become one value. No default.
    pub statistic: BlockStatistic,
    /// GDAL driver of the output (default "GTiff").
    pub format: Option<String>,
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// `raster_aggregate`: gdalwarp onto the grid whose cells are exactly `factor` input cells.
pub async fn raster_aggregate(app: &App, arguments: &Value) -> Result<Outcome, ToolError> {
    let args: AggregateArgs = parse("raster_aggregate", arguments)?;
    let (fx, fy) = args.factor.pair();
    if fx == 0 || fy == 0 || (fx == 1 && fy == 1) || fx > 100_000 || fy > 100_000 {
        return Err(ToolError::Arguments(
            "factor: a block of at least 2 cells (e.g. 2, 4 or [4, 2]); 1 would copy the raster"
                .to_string(),
        ));
    }
    let options = creation_options(&args.creation_options)?;
    let input = app.workspaces.input("input", &args.input)?;
    let output = output_path(app, &args.output, args.overwrite, &[&input])?;
    let format = args.format.clone().unwrap_or_else(|| "GTiff".to_string());
    let statistic = args.statistic;
    let gate_args = gate_arguments(arguments);
    let (request, facts, partial) = gdal_runner::run_blocking(move || {
        facts::check_raster_format(&format, &options)?;
        let dataset = facts::open(&input)?;
        let input_facts = facts::from_dataset("input", &input, &dataset);
        if input_facts.raster.is_none() {
            return Err(GdalError::Invalid(format!(
                "input: {} has no raster bands",
                input.display()
            )));
        }
        let gt = dataset
            .geo_transform()
            .map_err(|_| GdalError::Invalid("input: the raster has no geotransform".to_string()))?;
        if gt[2] != 0.0 || gt[4] != 0.0 {
            return Err(GdalError::Invalid(
                "input: the grid is rotated; warp it north-up first".to_string(),
            ));
        }
        let (w, h) = dataset.raster_size();
        let cols = w.div_ceil(fx as usize);
        let rows = h.div_ceil(fy as usize);
        let (x0, y0) = (gt[0], gt[3]);
        let (dx, dy) = (gt[1] * fx as f64, gt[5] * fy as f64);
        let (x1, y1) = (x0 + dx * cols as f64, y0 + dy * rows as f64);
        let request = WarpRequest {
            input: input.clone(),
            output,
            dst_crs: None,
            src_crs: None,
            resampling: statistic.gdal_name().to_string(),
            resolution: None,
            size: Some((cols as u32, rows as u32)),
            bounds: Some(([x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)], None)),
            dst_nodata: None,
            format,
            creation_options: options,
        };
        let facts = CallFacts {
            tool: "raster_aggregate".to_string(),
            arguments: gate_args,
            datasets: vec![input_facts],
            target_crs: None,
            transformation: None,
        };
        let partial = w % fx as usize != 0 || h % fy as usize != 0;
        Ok((request, facts, partial))
    })
    .await?;
    let receipts = match pass_gate(app, facts, args.justification).await? {
        Ok(receipts) => receipts,
        Err(refusal) => return Ok(refusal),
    };
    let result = gdal_runner::run_blocking(move || {
        let outcome = request.run()?;
        let mut command = vec!["gdalwarp".to_string()];
        command.extend(request.gdalwarp_args());
        command.push(request.input.display().to_string());
        command.push(request.output.display().to_string());
        let report = serde_json::json!({
            "factor": [fx, fy],
            "statistic": statistic.gdal_name(),
            "partial_edge_blocks": partial,
        });
        describe_output(
            &request.output,
            &outcome.files,
            vec![command],
            outcome.warnings,
            report,
            receipts,
        )
    })
    .await?;
    Ok(Outcome::Done(to_json(&result)))
}

fn gated_annotations() -> ToolAnnotations {
    let mut a = ToolAnnotations::default();
    a.read_only_hint = Some(false);
    a.destructive_hint = Some(true);
    a.idempotent_hint = Some(true);
    a.open_world_hint = Some(false);
    a
}

/// The aggregation tools' definitions.
pub fn definitions() -> Vec<Tool> {
    vec![Tool::new(
        "raster_aggregate",
        "Aggregate a raster to a coarser grid whose cells are exact blocks of `factor` input \
         cells (gdalwarp -ts/-te on the aligned grid): average, sum, min, max, mode, median, \
         quartiles or rms of each block's valid cells (nodata cells are skipped; edge blocks \
         that extend past the raster use the cells that exist). Gated by the aggregation \
         domain. Written atomically; an existing output is replaced only with `overwrite`.",
        schema_of::<AggregateArgs>(),
    )
    .with_title("Block aggregation")
    .with_raw_output_schema(schema_of::<RasterOutput>())
    .with_annotations(gated_annotations())]
}
