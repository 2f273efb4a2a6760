//! The tools: argument and output types (whose JSON Schemas are published), descriptions,
//! annotations, and the implementation of each call.
//!
//! Every tool call follows one path: parse and validate the arguments, confine the paths,
//! gather dataset facts, pass the gate (gated tools only), run GDAL, return a receipt.

use super::ToolError;
use crate::domains::CallFacts;
use crate::gdal::facts::{self, CrsFacts, DatasetFacts};
use crate::gdal::transform::{self, TransformationFacts};
use crate::gdal::warp::WarpRequest;
use crate::gdal::{self as gdal_runner, info, GdalError};
use crate::reflection::gate::{Receipt, Stored, Verdict};
use crate::reflection::justification::Justification;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::App;

/// Justifications supplied inline, by domain id.
pub type InlineJustifications = BTreeMap<String, Value>;

/// A JSON Schema object for `T` (draft 2020-12).
pub fn schema_of<T: JsonSchema>() -> Arc<JsonObject> {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    match serde_json::to_value(schema) {
        Ok(Value::Object(map)) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// Parse arguments, naming the offending path on failure.
pub fn parse<T: DeserializeOwned>(tool: &str, arguments: &Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        ToolError::Arguments(format!(
            "invalid arguments for {tool}{at}: {}; see the tool's input schema",
            e.inner()
        ))
    })
}

/// Tool annotations; every tool works on local files only (`open_world_hint: false`).
pub fn annotations(read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations {
    let mut a = ToolAnnotations::default();
    a.read_only_hint = Some(read_only);
    a.destructive_hint = Some(destructive);
    a.idempotent_hint = Some(idempotent);
    a.open_world_hint = Some(false);
    a
}

// ---------------------------------------------------------------------------------------------
// raster_info

/// Arguments of `raster_info`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RasterInfoArgs {
    /// Path of a raster inside a workspace (relative paths resolve against the first one).
    pub path: String,
    /// Also compute exact per-band statistics (reads every pixel). Default false.
    #[serde(default)]
    pub stats: bool,
}

/// Result of `raster_info`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RasterInfoOutput {
    /// The resolved path.
    pub path: String,
    /// The facts the risk domains see for this dataset.
    pub facts: DatasetFacts,
    /// GDAL's own `gdalinfo -json` report.
    pub gdalinfo: Value,
}

// ---------------------------------------------------------------------------------------------
// raster_reproject

/// GDAL resampling methods (gdalwarp `-r`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WarpResampling {
    Nearest,
    Bilinear,
    Cubic,
    Cubicspline,
    Lanczos,
    Average,
    Rms,
    Mode,
    Max,
    Min,
    Med,
    Q1,
    Q3,
    Sum,
}

impl WarpResampling {
    pub fn gdal_name(self) -> &'static str {
        match self {
            Self::Nearest => "near",
            Self::Bilinear => "bilinear",
            Self::Cubic => "cubic",
            Self::Cubicspline => "cubicspline",
            Self::Lanczos => "lanczos",
            Self::Average => "average",
            Self::Rms => "rms",
            Self::Mode => "mode",
            Self::Max => "max",
            Self::Min => "min",
            Self::Med => "med",
            Self::Q1 => "q1",
            Self::Q3 => "q3",
            Self::Sum => "sum",
        }
    }
}

/// An extent, in `crs` (default: the target CRS).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    pub xmin: f64,
    pub ymin: f64,
    pub xmax: f64,
    pub ymax: f64,
    /// CRS of the bounds (e.g. "EPSG:4326"); default: `dst_crs`.
    pub crs: Option<String>,
}

/// Arguments of `raster_reproject`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RasterReprojectArgs {
    /// Source raster inside a workspace.
    pub input: String,
    /// Output path inside a workspace; its folder must exist.
    pub output: String,
    /// Target CRS: authority code ("EPSG:32633"), WKT or PROJ string.
    pub dst_crs: String,
    /// Resampling method. No default: the choice is part of the methodology.
    pub resampling: WarpResampling,
    /// Assign or override the source CRS (only when the file's CRS is missing or wrong).
    pub src_crs: Option<String>,
    /// Output pixel size [x, y] in target CRS units. Excludes `size`.
    pub resolution: Option<[f64; 2]>,
    /// Output size [width, height] in pixels (resamples the full extent). Excludes `resolution`.
    pub size: Option<[u32; 2]>,
    /// Output extent.
    pub bounds: Option<Bounds>,
    /// Nodata value of the output (areas outside the source get it).
    pub nodata: Option<f64>,
    /// GDAL driver of the output. Default "GTiff"; "COG" for cloud-optimised GeoTIFF.
    pub format: Option<String>,
    /// Driver creation options, e.g. {"COMPRESS": "DEFLATE", "TILED": "YES"}.
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    /// Replace an existing output. Default false. Never replaces the input.
    #[serde(default)]
    pub overwrite: bool,
    /// Justifications by domain id (e.g. {"crs_datum": {...}, "resampling": {...}}), for the
    /// decisions a previous refusal listed. Valid ones are stored and the call proceeds.
    #[schemars(with = "Option<BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Result of `raster_reproject`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RasterReprojectOutput {
    /// The output file.
    pub output: String,
    /// Every file written (sidecars first, main file last).
    pub files: Vec<String>,
    pub driver: String,
    pub crs: Option<CrsFacts>,
    pub width: u32,
    pub height: u32,
    pub pixel_size: (f64, f64),
    /// The equivalent command line; running it gives a pixel-identical output.
    pub gdalwarp_command: Vec<String>,
    /// The coordinate operation PROJ selected, when known.
    pub transformation: Option<TransformationFacts>,
    /// GDAL warnings emitted while warping.
    pub warnings: Vec<String>,
    /// One receipt per risk domain that had something to say.
    pub reflection: Vec<Receipt>,
}

// ---------------------------------------------------------------------------------------------
// persist_justification

/// Arguments of `persist_justification`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersistArgs {
    /// The domain id from the refusal (e.g. "crs_datum").
    pub domain: String,
    /// The key from the refusal ("sha256:...").
    pub key: String,
    /// The justification.
    #[schemars(with = "Justification")]
    pub justification: Value,
}

/// The published tools, in the order they are listed (built once).
pub fn definitions() -> Vec<Tool> {
    static TOOLS: std::sync::OnceLock<Vec<Tool>> = std::sync::OnceLock::new();
    TOOLS.get_or_init(build_definitions).clone()
}

fn build_definitions() -> Vec<Tool> {
    vec![
        Tool::new(
            "raster_info",
            "Describe a raster: size, bands, data types, nodata, CRS and georeferencing, as \
             GDAL's `gdalinfo -json` report plus the facts the methodology domains use (CRS \
             identification, whether the data looks categorical). Set `stats` for exact \
             per-band statistics. Read-only and never gated.",
            schema_of::<RasterInfoArgs>(),
        )
        .with_title("Raster info")
        .with_raw_output_schema(schema_of::<RasterInfoOutput>())
        .with_annotations(annotations(true, false, true)),
        Tool::new(
            "raster_reproject",
            "Reproject and/or regrid a raster with GDALWarp (pixel-identical to `gdalwarp` with \
             the returned `gdalwarp_command`). Choose `dst_crs` and `resampling` deliberately: \
             this tool is gated by the crs_datum and resampling methodology domains. The first \
             call for a new decision is refused with each domain's questions, a JSON Schema and \
             a key; answer them in `justification` (by domain id) on a retry, or through \
             `persist_justification`. Later calls making the same decisions run at once. The \
             output is written atomically; an existing file is replaced only with `overwrite`.",
            schema_of::<RasterReprojectArgs>(),
        )
        .with_title("Reproject raster")
        .with_raw_output_schema(schema_of::<RasterReprojectOutput>())
        .with_annotations(annotations(false, true, true)),
        Tool::new(
            "persist_justification",
            "Store a methodological justification for a decision a gated tool refused, using the \
             `domain` and `key` from that refusal. The justification is validated against the \
             schema and the domain's own checks; on success it is saved as a capsule under \
             .preflight/justifications/<domain>/ and the refused call can be retried as is.",
            schema_of::<PersistArgs>(),
        )
        .with_title("Persist justification")
        .with_raw_output_schema(schema_of::<Stored>())
        .with_annotations(annotations(false, false, true)),
    ]
    .into_iter()
    .chain(super::raster::definitions())
    .chain(super::vector::definitions())
    .chain(super::aggregate::definitions())
    .chain(super::dem::definitions())
    .collect()
}

// ---------------------------------------------------------------------------------------------
// Implementations

fn json_of<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `raster_info`.
pub async fn raster_info(app: &App, arguments: &Value) -> Result<Value, ToolError> {
    let args: RasterInfoArgs = parse("raster_info", arguments)?;
    let path = app.workspaces.input("path", &args.path)?;
    let output = gdal_runner::run_blocking(move || {
        let dataset = facts::open(&path)?;
        if dataset.raster_count() == 0 {
            return Err(GdalError::Invalid(format!(
                "path: {} has no raster bands (is it a vector dataset?)",
                path.display()
            )));
        }
        let facts = facts::from_dataset("input", &path, &dataset);
        let gdalinfo = info::gdalinfo_json(&dataset, args.stats)?;
        Ok(RasterInfoOutput {
            path: path.display().to_string(),
            facts,
            gdalinfo,
        })
    })
    .await?;
    Ok(json_of(&output))
}

/// What the host learned before the gate for a reprojection.
struct ReprojectPlan {
    request: WarpRequest,
    facts: CallFacts,
}

/// `raster_reproject`: validate, gather facts, gate, warp.
pub async fn raster_reproject(app: &App, arguments: &Value) -> Result<Outcome, ToolError> {
    let args: RasterReprojectArgs = parse("raster_reproject", arguments)?;
    if args.resolution.is_some() && args.size.is_some() {
        return Err(ToolError::Arguments(
            "resolution and size are mutually exclusive: give the pixel size or the pixel \
             count, not both"
                .to_string(),
        ));
    }
    if let Some([x, y]) = args.resolution {
        if !(x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0) {
            return Err(ToolError::Arguments(
                "resolution: both values must be positive numbers".to_string(),
            ));
        }
    }
    if let Some([w, h]) = args.size {
        if w == 0 || h == 0 {
            return Err(ToolError::Arguments(
                "size: width and height must be at least 1".to_string(),
            ));
        }
    }
    if let Some(b) = &args.bounds {
        if !(b.xmin < b.xmax && b.ymin < b.ymax) {
            return Err(ToolError::Arguments(
                "bounds: xmin must be below xmax and ymin below ymax".to_string(),
            ));
        }
    }
    if let Some(nodata) = args.nodata {
        if nodata.is_infinite() {
            return Err(ToolError::Arguments(
                "nodata: must be a finite number or NaN".to_string(),
            ));
        }
    }
    for key in args.creation_options.keys() {
        if key.is_empty() || key.contains('=') {
            return Err(ToolError::Arguments(format!(
                "creation_options: \"{key}\" is not an option name"
            )));
        }
    }
    let input = app.workspaces.input("input", &args.input)?;
    let output = app.workspaces.output("output", &args.output)?;
    if output == input {
        return Err(ToolError::Arguments(
            "output: it is the input file; write to a new path".to_string(),
        ));
    }
    if output.exists() && !args.overwrite {
        return Err(ToolError::Arguments(format!(
            "output: {} already exists; pass \"overwrite\": true to replace it",
            output.display()
        )));
    }

    let mut gate_arguments = arguments.clone();
    if let Some(object) = gate_arguments.as_object_mut() {
        object.remove("justification");
    }
    let request = WarpRequest {
        input: input.clone(),
        output: output.clone(),
        dst_crs: Some(args.dst_crs.clone()),
        src_crs: args.src_crs.clone(),
        resampling: args.resampling.gdal_name().to_string(),
        resolution: args.resolution.map(|[x, y]| (x, y)),
        size: args.size.map(|[w, h]| (w, h)),
        bounds: args
            .bounds
            .as_ref()
            .map(|b| ([b.xmin, b.ymin, b.xmax, b.ymax], b.crs.clone())),
        dst_nodata: args.nodata,
        output_type: None,
        format: args.format.clone().unwrap_or_else(|| "GTiff".to_string()),
        creation_options: args
            .creation_options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let plan = gdal_runner::run_blocking(move || {
        facts::check_raster_format(&request.format, &request.creation_options)?;
        let target = facts::parse_crs("dst_crs", &args.dst_crs)?;
        let assigned = match &request.src_crs {
            Some(definition) => Some(facts::parse_crs("src_crs", definition)?),
            None => None,
        };
        if let Some((_, Some(crs))) = &request.bounds {
            facts::parse_crs("bounds.crs", crs)?;
        }
        let dataset = facts::open(&request.input)?;
        if dataset.raster_count() == 0 {
            return Err(GdalError::Invalid(format!(
                "input: {} has no raster bands",
                request.input.display()
            )));
        }
        let input_facts = facts::from_dataset("input", &request.input, &dataset);
        let source = assigned.or_else(|| dataset.spatial_ref().ok());
        let Some(source) = source else {
            return Err(GdalError::Invalid(
                "input: the raster has no CRS, so it cannot be reprojected; if you know its \
                 CRS, pass it as src_crs (the crs_datum domain will ask you to justify that \
                 assumption)"
                    .to_string(),
            ));
        };
        let area = dataset.geo_transform().ok().and_then(|gt| {
            let (w, h) = dataset.raster_size();
            let (x0, x1) = (gt[0], gt[0] + gt[1] * w as f64 + gt[2] * h as f64);
            let (y0, y1) = (gt[3], gt[3] + gt[4] * w as f64 + gt[5] * h as f64);
            transform::lonlat_bounds(&source, [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)])
        });
        let transformation = transform::facts(&source, &target, area);
        Ok(ReprojectPlan {
            facts: CallFacts {
                tool: "raster_reproject".to_string(),
                arguments: gate_arguments,
                datasets: vec![input_facts],
                target_crs: Some(facts::crs_facts(&target)),
                transformation,
            },
            request,
        })
    })
    .await?;

    let inline = args.justification.unwrap_or_default();
    let receipts = match app.decide(plan.facts.clone(), inline).await? {
        Verdict::Proceed(receipts) => receipts,
        Verdict::Refuse { entries, receipts } => return Ok(Outcome::Refused { entries, receipts }),
    };

    let request = plan.request;
    let transformation = plan.facts.transformation;
    let result = gdal_runner::run_blocking(move || {
        let outcome = request.run()?;
        let written = facts::gather("output", &request.output)?;
        let raster = written.raster.clone();
        let command = request.command_line();
        Ok(RasterReprojectOutput {
            output: request.output.display().to_string(),
            files: outcome
                .files
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            driver: written.driver,
            crs: written.crs,
            width: raster.as_ref().map(|r| r.width).unwrap_or(0),
            height: raster.as_ref().map(|r| r.height).unwrap_or(0),
            pixel_size: raster.as_ref().map(|r| r.pixel_size).unwrap_or((0.0, 0.0)),
            gdalwarp_command: command,
            transformation,
            warnings: outcome.warnings,
            reflection: receipts,
        })
    })
    .await?;
    Ok(Outcome::Done(json_of(&result)))
}

/// What a gated tool produced.
pub enum Outcome {
    Done(Value),
    Refused {
        entries: Vec<crate::reflection::gate::RefusalEntry>,
        receipts: Vec<Receipt>,
    },
}

/// `persist_justification`.
pub async fn persist_justification(app: &App, arguments: &Value) -> Result<Value, ToolError> {
    let args: PersistArgs = parse("persist_justification", arguments)?;
    let gate = app.gate.clone();
    let stored = tokio::task::spawn_blocking(move || {
        gate.persist(&args.domain, &args.key, &args.justification)
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))??;
    Ok(json_of(&stored))
}

// ---------------------------------------------------------------------------------------------
// Shared steps of the tools that write an output

/// Confine `raw` as an output path, refusing to replace an input or, without `overwrite`, any
/// existing file.
pub fn output_path(
    app: &App,
    raw: &str,
    overwrite: bool,
    inputs: &[&std::path::Path],
) -> Result<std::path::PathBuf, ToolError> {
    let output = app.workspaces.output("output", raw)?;
    if inputs.iter().any(|input| *input == output) {
        return Err(ToolError::Arguments(
            "output: it is an input of this call; write to a new path".to_string(),
        ));
    }
    if output.exists() && !overwrite {
        return Err(ToolError::Arguments(format!(
            "output: {} already exists; pass \"overwrite\": true to replace it",
            output.display()
        )));
    }
    Ok(output)
}

/// The arguments as the domains see them: everything but `justification`.
pub fn gate_arguments(arguments: &Value) -> Value {
    let mut copy = arguments.clone();
    if let Some(object) = copy.as_object_mut() {
        object.remove("justification");
    }
    copy
}

/// Creation options as `KEY=VALUE` pairs, refusing keys that cannot be option names.
pub fn creation_options(
    options: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, ToolError> {
    options
        .iter()
        .map(|(key, value)| {
            if key.is_empty() || key.contains('=') || key.contains(char::is_whitespace) {
                Err(ToolError::Arguments(format!(
                    "creation_options: \"{key}\" is not an option name"
                )))
            } else {
                Ok((key.to_ascii_uppercase(), value.clone()))
            }
        })
        .collect()
}

/// Pass the gate: `Ok(receipts)` to proceed, `Err(outcome)` with the refusal.
pub async fn pass_gate(
    app: &App,
    facts: CallFacts,
    inline: Option<InlineJustifications>,
) -> Result<Result<Vec<Receipt>, Outcome>, ToolError> {
    Ok(match app.decide(facts, inline.unwrap_or_default()).await? {
        Verdict::Proceed(receipts) => Ok(receipts),
        Verdict::Refuse { entries, receipts } => Err(Outcome::Refused { entries, receipts }),
    })
}

/// Paths as strings, for results.
pub fn path_strings(paths: &[std::path::PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// Serialise a result (a failure to serialise is a bug, reported as null).
pub fn to_json<T: Serialize>(value: &T) -> Value {
    json_of(value)
}
