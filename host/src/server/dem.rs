//! The DEM hydrology tools: `dem_condition`, `dem_flow_direction`, `dem_flow_accumulation`,
//! `dem_streams` and `dem_watershed`, gated by the `hydrology` domain.
//!
//! Every tool after `dem_condition` takes the **conditioned DEM** (not a direction raster) and
//! routes it itself. Re-deriving D8 costs well under a second at 4000², and it removes a class
//! of silent errors: feeding a direction raster in one encoding to a tool that assumes another.
//! Long runs send MCP progress notifications when the client asked for them, and stop when the
//! request is cancelled.

use super::tools::{annotations, parse, schema_of, InlineJustifications, Outcome};
use super::{App, ToolError};
use crate::domains::CallFacts;
use crate::gdal::raster_io::{self, Georef};
use crate::gdal::{self as gdal_runner, facts, GdalError};
use crate::hydrology::{self as hy, CellSize, Grid, HydrologyError, Progress};
use crate::reflection::gate::{Receipt, Verdict};
use crate::reflection::justification::Justification;
use rmcp::model::{ProgressNotificationParam, Tool};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Depression handling.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConditionMethod {
    /// Priority-Flood (Barnes et al. 2014): the minimal depressionless surface; filled areas are flat.
    Fill,
    /// Priority-Flood with an epsilon gradient: every cell drains.
    FillEpsilon,
    /// Least-cost breaching within limits (after Lindsay 2016), then epsilon filling of the rest.
    Breach,
}

/// Flow-routing algorithm.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Steepest descent to one of eight neighbours (O'Callaghan & Mark 1984).
    D8,
    /// Tarboton (1997): flow angle on triangular facets, split between two neighbours.
    Dinf,
}

/// D8 encodings.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE.
    Esri,
    /// 1 E, 2 NE, 3 N, 4 NW, 5 W, 6 SW, 7 S, 8 SE.
    Taudem,
    /// 1 NE, 2 N, 3 NW, 4 W, 5 SW, 6 S, 7 SE, 8 E.
    Grass,
}

/// Accumulation units.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Units {
    /// Number of upstream cells, the cell itself included.
    Cells,
    /// Contributing area in map units² (cells × dx·dy).
    Area,
}

fn yes() -> bool {
    true
}

/// Arguments of `dem_condition`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionArgs {
    /// DEM (band 1) in a projected CRS.
    pub input: String,
    /// Output GeoTIFF (Float32).
    pub output: String,
    /// fill, fill_epsilon or breach. No default: the choice is part of the methodology.
    pub method: ConditionMethod,
    /// Breach: longest path to carve, in cells (default 100).
    pub max_breach_length: Option<u32>,
    /// Breach: deepest cut allowed, in elevation units (default: unlimited).
    pub max_breach_depth: Option<f64>,
    #[serde(default)]
    pub overwrite: bool,
    /// Justifications by domain id, for a previous refusal.
    #[schemars(with = "Option<std::collections::BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Arguments of `dem_flow_direction`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowDirectionArgs {
    /// Conditioned DEM (output of dem_condition) in a projected CRS.
    pub input: String,
    /// Output GeoTIFF: Byte codes for D8 (255 = nodata, 0 = no flow), Float32 radians
    /// counter-clockwise from east for D-infinity (-1 = no flow).
    pub output: String,
    pub algorithm: Algorithm,
    /// D8 code table (default esri).
    pub encoding: Option<Encoding>,
    /// Route flats towards lower and away from higher terrain (Barnes et al. 2014). Default true.
    #[serde(default = "yes")]
    pub resolve_flats: bool,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<std::collections::BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Arguments of `dem_flow_accumulation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowAccumulationArgs {
    /// Conditioned DEM in a projected CRS.
    pub input: String,
    /// Output GeoTIFF (Float32, NaN = nodata).
    pub output: String,
    pub algorithm: Algorithm,
    /// cells (default) or area (map units²).
    pub units: Option<Units>,
    /// Optional weight raster on the same grid (e.g. runoff); nodata weighs 0.
    pub weights: Option<String>,
    #[serde(default = "yes")]
    pub resolve_flats: bool,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<std::collections::BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Arguments of `dem_streams`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamsArgs {
    /// Conditioned DEM in a projected CRS.
    pub input: String,
    /// Output GeoTIFF (Byte): Strahler order on stream cells, 0 elsewhere, 255 nodata.
    pub output: String,
    /// Stream cells have a D8 accumulation (in cells) of at least this.
    pub threshold: f64,
    /// Optional stream lines: a .gpkg or .geojson path (layer `streams`: id, order, downstream, cells).
    pub lines: Option<String>,
    #[serde(default = "yes")]
    pub resolve_flats: bool,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<std::collections::BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Arguments of `dem_watershed`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatershedArgs {
    /// Conditioned DEM in a projected CRS.
    pub input: String,
    /// Output GeoTIFF (UInt32): pour point i+1 labels the cells draining to it, 0 elsewhere.
    pub output: String,
    /// Pour points [[x, y], ...] in the DEM's CRS.
    #[schemars(length(min = 1))]
    pub pour_points: Vec<[f64; 2]>,
    /// Snap each point to the highest D8 accumulation within this distance (map units).
    pub snap_distance: Option<f64>,
    #[serde(default = "yes")]
    pub resolve_flats: bool,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<std::collections::BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Result of every DEM tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DemOutput {
    /// The main output file.
    pub output: String,
    /// Every file written.
    pub files: Vec<String>,
    /// Cell size used for distances and areas, in map units.
    pub cell_size: [f64; 2],
    /// What the step changed or found (cells filled, flats resolved, outlets, ...).
    pub report: Value,
    /// One receipt per risk domain that had something to say.
    pub reflection: Vec<Receipt>,
}

/// The DEM tools' definitions.
pub fn definitions() -> Vec<Tool> {
    let note = " Gated by the hydrology domain (refused once per new decision with its questions; \
                justify inline or with persist_justification). The DEM must be in a projected CRS \
                (reproject geographic DEMs first). Sends progress notifications and stops on \
                cancellation.";
    let tool = |name: &'static str, title: &str, description: &str, schema| {
        Tool::new(name, format!("{description}{note}"), schema)
            .with_title(title)
            .with_raw_output_schema(schema_of::<DemOutput>())
            .with_annotations(annotations(false, true, true))
    };
    vec![
        tool(
            "dem_condition",
            "Condition a DEM",
            "Remove depressions from a DEM: Priority-Flood filling (plain or with an epsilon \
             gradient) or least-cost breaching within a length/depth limit followed by filling. \
             Reports cells changed, maximum change and filled volume.",
            schema_of::<ConditionArgs>(),
        ),
        tool(
            "dem_flow_direction",
            "Flow direction",
            "Flow direction from a conditioned DEM: D8 steepest descent with true cell sizes \
             (ESRI, TauDEM or GRASS codes) or D-infinity angles, with flat resolution.",
            schema_of::<FlowDirectionArgs>(),
        ),
        tool(
            "dem_flow_accumulation",
            "Flow accumulation",
            "Flow accumulation from a conditioned DEM by D8 or D-infinity, in cells or \
             contributing area, optionally weighted. Reports outlets and mass conservation.",
            schema_of::<FlowAccumulationArgs>(),
        ),
        tool(
            "dem_streams",
            "Streams",
            "Stream network from a conditioned DEM: cells whose D8 accumulation reaches the \
             threshold, Strahler order raster, and optionally stream lines (GeoPackage or GeoJSON) \
             split at confluences.",
            schema_of::<StreamsArgs>(),
        ),
        tool(
            "dem_watershed",
            "Watersheds",
            "Watersheds of one or more pour points on a conditioned DEM (D8), with optional \
             snapping to the highest accumulation within a distance.",
            schema_of::<WatershedArgs>(),
        ),
    ]
}

/// A DEM read, checked and described, ready for the gate and the run.
struct Loaded {
    dem: Grid<f32>,
    georef: Georef,
    cell_size: CellSize,
    facts: CallFacts,
}

fn load(tool: &str, input: PathBuf, arguments: Value) -> Result<Loaded, GdalError> {
    let mut input_facts = facts::gather("input", &input)?;
    if let Some(crs) = &input_facts.crs {
        if crs.kind == facts::CrsKind::Geographic {
            return Err(GdalError::Invalid(format!(
                "input: the DEM is in a geographic CRS ({}), so its cell sizes are degrees and \
                 steepest descent would mix metres with degrees; reproject it to a projected CRS \
                 first (raster_reproject, e.g. to the local UTM zone)",
                crs.id.clone().unwrap_or_else(|| crs.name.clone())
            )));
        }
    }
    let (dem, georef) = raster_io::read_band_f32(&input)?;
    let gt = georef.geotransform;
    if gt[2] != 0.0 || gt[4] != 0.0 {
        return Err(GdalError::Invalid(
            "input: the DEM's grid is rotated; warp it to a north-up grid first".to_string(),
        ));
    }
    let cell_size = CellSize::new(gt[1].abs(), gt[5].abs())
        .map_err(|e| GdalError::Invalid(format!("input: {e}")))?;
    if let Some(raster) = input_facts.raster.as_mut() {
        raster.flat_fraction = Some(hy::flat_fraction(&dem));
    }
    Ok(Loaded {
        dem,
        georef,
        cell_size,
        facts: CallFacts {
            tool: tool.to_string(),
            arguments,
            datasets: vec![input_facts],
            target_crs: None,
            transformation: None,
        },
    })
}

/// Relays hydrology progress to MCP progress notifications and cancellation back.
struct Relay {
    cancelled: Arc<AtomicBool>,
    sender: tokio::sync::mpsc::UnboundedSender<f64>,
}

impl Progress for Relay {
    fn report(&self, fraction: f64) -> bool {
        if self.cancelled.load(Ordering::Relaxed) {
            return false;
        }
        let _ = self.sender.send(fraction);
        true
    }
}

fn start_relay(context: &RequestContext<RoleServer>, steps: &'static str) -> Relay {
    let cancelled = Arc::new(AtomicBool::new(false));
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<f64>();
    let token = context.ct.clone();
    let flag = cancelled.clone();
    tokio::spawn(async move {
        token.cancelled().await;
        flag.store(true, Ordering::Relaxed);
    });
    let progress_token = context.meta.get_progress_token();
    let peer = context.peer.clone();
    tokio::spawn(async move {
        let mut last = -1.0f64;
        while let Some(fraction) = receiver.recv().await {
            let Some(token) = progress_token.clone() else {
                continue;
            };
            let percent = (fraction.clamp(0.0, 1.0) * 100.0).floor();
            if percent <= last {
                continue;
            }
            last = percent;
            let param = ProgressNotificationParam::new(token, percent)
                .with_total(100.0)
                .with_message(steps);
            let _ = peer.notify_progress(param).await;
        }
    });
    Relay { cancelled, sender }
}

fn hydrology_error(error: HydrologyError) -> GdalError {
    match error {
        HydrologyError::Cancelled => GdalError::Invalid("cancelled by the client".to_string()),
        other => GdalError::Failed {
            operation: "hydrology".to_string(),
            message: other.to_string(),
        },
    }
}

/// D8 directions (ESRI codes) for the routing tools, which only need the receivers.
fn route_d8(
    dem: &Grid<f32>,
    cell_size: CellSize,
    resolve_flats: bool,
    progress: &dyn Progress,
) -> Result<hy::FlowDirections, GdalError> {
    let options = hy::D8Options {
        encoding: hy::D8Encoding::Esri,
        resolve_flats,
    };
    hy::d8_flow_directions(dem, cell_size, &options, progress)
        .map(|(directions, _)| directions)
        .map_err(hydrology_error)
}

fn d8_encoding(encoding: Option<Encoding>) -> hy::D8Encoding {
    match encoding.unwrap_or(Encoding::Esri) {
        Encoding::Esri => hy::D8Encoding::Esri,
        Encoding::Taudem => hy::D8Encoding::TauDem,
        Encoding::Grass => hy::D8Encoding::Grass,
    }
}

fn strings(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// Common path: confine, load, gate, then run `job` on a blocking worker.
async fn gated_run<F>(
    app: &App,
    context: &RequestContext<RoleServer>,
    tool: &'static str,
    arguments: &Value,
    paths: (&str, &str, bool),
    inline: Option<InlineJustifications>,
    job: F,
) -> Result<Outcome, ToolError>
where
    F: FnOnce(Loaded, PathBuf, &Relay) -> Result<(Vec<PathBuf>, Value), GdalError> + Send + 'static,
{
    let (input, output, overwrite) = paths;
    let input = app.workspaces.input("input", input)?;
    let output = app.workspaces.output("output", output)?;
    if output == input {
        return Err(ToolError::Arguments(
            "output: it is the input file; write to a new path".to_string(),
        ));
    }
    if output.exists() && !overwrite {
        return Err(ToolError::Arguments(format!(
            "output: {} already exists; pass \"overwrite\": true to replace it",
            output.display()
        )));
    }
    let mut gate_arguments = arguments.clone();
    if let Some(object) = gate_arguments.as_object_mut() {
        object.remove("justification");
    }
    let loaded = gdal_runner::run_blocking(move || load(tool, input, gate_arguments)).await?;
    let receipts = match app
        .decide(loaded.facts.clone(), inline.unwrap_or_default())
        .await?
    {
        Verdict::Proceed(receipts) => receipts,
        Verdict::Refuse { entries, receipts } => return Ok(Outcome::Refused { entries, receipts }),
    };
    let relay = start_relay(context, tool);
    let cell_size = [loaded.cell_size.dx, loaded.cell_size.dy];
    let main = output.display().to_string();
    let (files, report) = gdal_runner::run_blocking(move || job(loaded, output, &relay)).await?;
    let result = DemOutput {
        output: main,
        files: strings(&files),
        cell_size,
        report,
        reflection: receipts,
    };
    Ok(Outcome::Done(
        serde_json::to_value(result).unwrap_or(Value::Null),
    ))
}

/// `dem_condition`.
pub async fn condition(
    app: &App,
    context: &RequestContext<RoleServer>,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    let args: ConditionArgs = parse("dem_condition", arguments)?;
    if args.method != ConditionMethod::Breach
        && (args.max_breach_length.is_some() || args.max_breach_depth.is_some())
    {
        return Err(ToolError::Arguments(
            "max_breach_length and max_breach_depth apply only to method \"breach\"".to_string(),
        ));
    }
    if args.max_breach_length == Some(0)
        || args
            .max_breach_depth
            .is_some_and(|d| !(d.is_finite() && d > 0.0))
    {
        return Err(ToolError::Arguments(
            "max_breach_length must be at least 1 and max_breach_depth a positive number"
                .to_string(),
        ));
    }
    let method = args.method;
    let (length, depth) = (args.max_breach_length, args.max_breach_depth);
    gated_run(app, context, "dem_condition", arguments, (&args.input, &args.output, args.overwrite), args.justification, move |loaded, output, relay| {
        let Loaded { mut dem, georef, cell_size, .. } = loaded;
        let report = match method {
            ConditionMethod::Fill | ConditionMethod::FillEpsilon => {
                let mode = if method == ConditionMethod::Fill { hy::FillMode::Plain } else { hy::FillMode::Epsilon };
                let r = hy::fill_depressions(&mut dem, cell_size, mode, relay).map_err(hydrology_error)?;
                json!({"method": method, "cells_raised": r.cells_raised, "max_raise": r.max_raise, "volume": r.volume})
            }
            ConditionMethod::Breach => {
                let options = hy::BreachOptions {
                    max_length: length.map(|l| l as usize).unwrap_or(100),
                    max_depth: depth,
                    fill: Some(hy::FillMode::Epsilon),
                };
                let r = hy::breach_depressions(&mut dem, cell_size, &options, relay).map_err(hydrology_error)?;
                json!({"method": method, "pits_found": r.pits_found, "pits_breached": r.pits_breached,
                       "pits_drained_by_other_paths": r.pits_drained_by_other_paths, "pits_filled": r.pits_filled,
                       "cells_breached": r.cells_breached, "max_cut": r.max_cut,
                       "cells_raised_by_fill": r.fill.cells_raised, "max_raise": r.fill.max_raise})
            }
        };
        let (w, h) = dem.shape();
        let nodata = dem.nodata().map(f64::from);
        let files = raster_io::write_geotiff(&output, w, h, dem.into_data(), nodata, &georef)?;
        Ok((files, report))
    })
    .await
}

fn flat_report(f: &hy::FlatReport) -> Value {
    json!({"flats": f.flats, "resolved_cells": f.resolved_cells, "undrained_flats": f.undrained_flats, "undrained_cells": f.undrained_cells})
}

/// `dem_flow_direction`.
pub async fn flow_direction(
    app: &App,
    context: &RequestContext<RoleServer>,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    let args: FlowDirectionArgs = parse("dem_flow_direction", arguments)?;
    if args.algorithm == Algorithm::Dinf && args.encoding.is_some() {
        return Err(ToolError::Arguments(
            "encoding applies only to algorithm \"d8\"; D-infinity writes radians".to_string(),
        ));
    }
    let (algorithm, encoding, resolve_flats) = (args.algorithm, args.encoding, args.resolve_flats);
    gated_run(app, context, "dem_flow_direction", arguments, (&args.input, &args.output, args.overwrite), args.justification, move |loaded, output, relay| {
        let Loaded { dem, georef, cell_size, .. } = loaded;
        let (w, h) = dem.shape();
        match algorithm {
            Algorithm::D8 => {
                let options = hy::D8Options { encoding: d8_encoding(encoding), resolve_flats };
                let (directions, r) = hy::d8_flow_directions(&dem, cell_size, &options, relay).map_err(hydrology_error)?;
                let report = json!({"algorithm": "d8", "encoding": encoding.unwrap_or(Encoding::Esri), "outlet_cells": r.outlet_cells,
                                    "no_flow_cells": r.no_flow_cells, "flats": flat_report(&r.flats), "nodata_code": hy::D8_NODATA, "no_flow_code": hy::NO_FLOW});
                let files = raster_io::write_geotiff(&output, w, h, directions.into_grid().into_data(), Some(f64::from(hy::D8_NODATA)), &georef)?;
                Ok((files, report))
            }
            Algorithm::Dinf => {
                let (flow, r) = hy::dinf_flow_directions(&dem, cell_size, &hy::DinfOptions { resolve_flats }, relay).map_err(hydrology_error)?;
                let report = json!({"algorithm": "dinf", "units": "radians counter-clockwise from east", "no_flow": hy::DINF_NO_FLOW, "details": format!("{r:?}")});
                let files = raster_io::write_geotiff(&output, w, h, flow.into_angles().into_data(), Some(f64::NAN), &georef)?;
                Ok((files, report))
            }
        }
    })
    .await
}

/// `dem_flow_accumulation`.
pub async fn flow_accumulation(
    app: &App,
    context: &RequestContext<RoleServer>,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    let args: FlowAccumulationArgs = parse("dem_flow_accumulation", arguments)?;
    let weights = match &args.weights {
        Some(path) => Some(app.workspaces.input("weights", path)?),
        None => None,
    };
    let (algorithm, units, resolve_flats) = (
        args.algorithm,
        args.units.unwrap_or(Units::Cells),
        args.resolve_flats,
    );
    gated_run(app, context, "dem_flow_accumulation", arguments, (&args.input, &args.output, args.overwrite), args.justification, move |loaded, output, relay| {
        let Loaded { dem, georef, cell_size, .. } = loaded;
        let (w, h) = dem.shape();
        let weight_grid = match &weights {
            Some(path) => {
                let (grid, _) = raster_io::read_band_f32(path)?;
                if grid.shape() != (w, h) {
                    return Err(GdalError::Invalid(format!("weights: {}x{} cells, but the DEM has {w}x{h}; resample it onto the DEM's grid first", grid.width(), grid.height())));
                }
                Some(grid)
            }
            None => None,
        };
        let options = hy::AccumulationOptions {
            units: if units == Units::Area { hy::AccumulationUnits::Area } else { hy::AccumulationUnits::Cells },
            weights: weight_grid.as_ref(),
        };
        let (accumulation, r) = match algorithm {
            Algorithm::D8 => {
                let directions = route_d8(&dem, cell_size, resolve_flats, &hy::SubProgress::new(relay, 0.0, 0.5))?;
                drop(dem);
                hy::d8_accumulation::<f32>(&directions, cell_size, &options, &hy::SubProgress::new(relay, 0.5, 0.5)).map_err(hydrology_error)?
            }
            Algorithm::Dinf => {
                let (flow, _) = hy::dinf_flow_directions(&dem, cell_size, &hy::DinfOptions { resolve_flats }, &hy::SubProgress::new(relay, 0.0, 0.5)).map_err(hydrology_error)?;
                drop(dem);
                hy::dinf_accumulation::<f32>(&flow, cell_size, &options, &hy::SubProgress::new(relay, 0.5, 0.5)).map_err(hydrology_error)?
            }
        };
        let report = json!({"algorithm": algorithm, "units": units, "weighted": weights.is_some(), "outlets": r.outlets,
                            "outlet_total": r.outlet_total, "total_weight": r.total_weight, "max": r.max});
        let files = raster_io::write_geotiff(&output, w, h, accumulation.into_data(), Some(f64::NAN), &georef)?;
        Ok((files, report))
    })
    .await
}

/// `dem_streams`.
pub async fn streams(
    app: &App,
    context: &RequestContext<RoleServer>,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    let args: StreamsArgs = parse("dem_streams", arguments)?;
    if !(args.threshold.is_finite() && args.threshold >= 1.0) {
        return Err(ToolError::Arguments(
            "threshold: a number of cells, at least 1".to_string(),
        ));
    }
    let lines = match &args.lines {
        Some(path) => {
            let resolved = app.workspaces.output("lines", path)?;
            raster_io::vector_driver_for(&resolved)?;
            if resolved.exists() && !args.overwrite {
                return Err(ToolError::Arguments(format!(
                    "lines: {} already exists; pass \"overwrite\": true",
                    resolved.display()
                )));
            }
            Some(resolved)
        }
        None => None,
    };
    let (threshold, resolve_flats) = (args.threshold, args.resolve_flats);
    gated_run(app, context, "dem_streams", arguments, (&args.input, &args.output, args.overwrite), args.justification, move |loaded, output, relay| {
        let Loaded { dem, georef, cell_size, .. } = loaded;
        let (w, h) = dem.shape();
        let directions = route_d8(&dem, cell_size, resolve_flats, &hy::SubProgress::new(relay, 0.0, 0.4))?;
        drop(dem);
        let (accumulation, _) = hy::d8_accumulation::<f32>(&directions, cell_size, &hy::AccumulationOptions::default(), &hy::SubProgress::new(relay, 0.4, 0.3)).map_err(hydrology_error)?;
        let mask = hy::stream_mask(&accumulation, threshold).map_err(hydrology_error)?;
        drop(accumulation);
        let order = hy::strahler_order(&directions, &mask, &hy::SubProgress::new(relay, 0.7, 0.15)).map_err(hydrology_error)?;
        let stream_cells = mask.data().iter().filter(|&&v| v == 1).count();
        let max_order = order.data().iter().filter(|&&v| v != hy::STREAM_NODATA).copied().max().unwrap_or(0);
        let mut report = json!({"threshold": threshold, "stream_cells": stream_cells, "max_strahler_order": max_order});
        let mut files = Vec::new();
        if let Some(lines_path) = &lines {
            let transform = hy::GeoTransform::new(georef.geotransform).map_err(hydrology_error)?;
            let links = hy::stream_lines(&directions, &mask, &transform, &hy::SubProgress::new(relay, 0.85, 0.15)).map_err(hydrology_error)?;
            report["links"] = json!(links.len());
            files.extend(raster_io::write_stream_lines(lines_path, &links, &georef)?);
        }
        files.extend(raster_io::write_geotiff(&output, w, h, order.into_data(), Some(f64::from(hy::STREAM_NODATA)), &georef)?);
        Ok((files, report))
    })
    .await
}

/// `dem_watershed`.
pub async fn watershed(
    app: &App,
    context: &RequestContext<RoleServer>,
    arguments: &Value,
) -> Result<Outcome, ToolError> {
    let args: WatershedArgs = parse("dem_watershed", arguments)?;
    if args.pour_points.is_empty() {
        return Err(ToolError::Arguments(
            "pour_points: give at least one [x, y]".to_string(),
        ));
    }
    if args
        .snap_distance
        .is_some_and(|d| !(d.is_finite() && d >= 0.0))
    {
        return Err(ToolError::Arguments(
            "snap_distance: a non-negative distance in map units".to_string(),
        ));
    }
    let (points, snap, resolve_flats) = (
        args.pour_points.clone(),
        args.snap_distance,
        args.resolve_flats,
    );
    gated_run(
        app,
        context,
        "dem_watershed",
        arguments,
        (&args.input, &args.output, args.overwrite),
        args.justification,
        move |loaded, output, relay| {
            let Loaded {
                dem,
                georef,
                cell_size,
                ..
            } = loaded;
            let (w, h) = dem.shape();
            let directions = route_d8(
                &dem,
                cell_size,
                resolve_flats,
                &hy::SubProgress::new(relay, 0.0, 0.5),
            )?;
            drop(dem);
            let transform = hy::GeoTransform::new(georef.geotransform).map_err(hydrology_error)?;
            let accumulation = match snap {
                Some(_) => Some(
                    hy::d8_accumulation::<f32>(
                        &directions,
                        cell_size,
                        &hy::AccumulationOptions::default(),
                        &hy::SubProgress::new(relay, 0.5, 0.3),
                    )
                    .map_err(hydrology_error)?
                    .0,
                ),
                None => None,
            };
            let snapping = match (&accumulation, snap) {
                (Some(grid), Some(distance)) => Some(hy::Snap {
                    accumulation: grid,
                    max_distance: distance,
                }),
                _ => None,
            };
            let (labels, outcomes) = hy::watersheds(
                &directions,
                &transform,
                &points,
                snapping.as_ref(),
                &hy::SubProgress::new(relay, 0.8, 0.2),
            )
            .map_err(hydrology_error)?;
            let mut counts = vec![0u64; outcomes.len() + 1];
            for &label in labels.data() {
                if let Some(count) = counts.get_mut(label as usize) {
                    *count += 1;
                }
            }
            let report = json!({"pour_points": outcomes.iter().map(|o| json!({
            "label": o.label, "position": o.position, "snap_distance": o.snap_distance,
            "cells": counts.get(o.label as usize).copied().unwrap_or(0),
        })).collect::<Vec<_>>()});
            let files = raster_io::write_geotiff(&output, w, h, labels.into_data(), None, &georef)?;
            Ok((files, report))
        },
    )
    .await
}
