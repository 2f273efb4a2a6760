//! The everyday raster tools: `raster_stats`, `raster_convert`, `raster_resample`,
//! `raster_overviews` and `raster_terrain`.
//!
//! Each one validates its arguments completely (driver, options, option combinations) before
//! any work starts, gathers the facts the domains need, passes the gate, and then runs the GDAL
//! program that already does the job (`gdal_translate`, `gdalwarp`, `gdaladdo`, `gdaldem`) in
//! process. Results report the equivalent command lines, which reproduce the output exactly.

use super::tools::{
    annotations, creation_options, gate_arguments, output_path, parse, pass_gate, path_strings,
    schema_of, to_json, InlineJustifications, Outcome, WarpResampling,
};
use super::{App, ToolError};
use crate::domains::CallFacts;
use crate::gdal::facts::{self, CrsFacts};
use crate::gdal::programs::{self, number, Program};
use crate::gdal::warp::WarpRequest;
use crate::gdal::{self as gdal_runner, overviews, stats, GdalError};
use crate::reflection::gate::Receipt;
use crate::reflection::justification::Justification;
use gdal::Metadata;
use rmcp::model::Tool;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Shared types

/// GDAL data types an output can take.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum DataType {
    Byte,
    UInt16,
    Int16,
    UInt32,
    Int32,
    Float32,
    Float64,
}

impl DataType {
    pub fn gdal_name(self) -> &'static str {
        match self {
            DataType::Byte => "Byte",
            DataType::UInt16 => "UInt16",
            DataType::Int16 => "Int16",
            DataType::UInt32 => "UInt32",
            DataType::Int32 => "Int32",
            DataType::Float32 => "Float32",
            DataType::Float64 => "Float64",
        }
    }
}

/// Methods GDAL offers for overviews (`gdaladdo -r`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OverviewResampling {
    Nearest,
    Average,
    Rms,
    Bilinear,
    Gauss,
    Cubic,
    Cubicspline,
    Lanczos,
    Mode,
}

impl OverviewResampling {
    fn gdal_name(self) -> &'static str {
        match self {
            Self::Nearest => "nearest",
            Self::Average => "average",
            Self::Rms => "rms",
            Self::Bilinear => "bilinear",
            Self::Gauss => "gauss",
            Self::Cubic => "cubic",
            Self::Cubicspline => "cubicspline",
            Self::Lanczos => "lanczos",
            Self::Mode => "mode",
        }
    }
}

/// Overviews to build in the output.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverviewSpec {
    /// How overview cells are computed from full-resolution cells. No default.
    pub resampling: OverviewResampling,
    /// Reduction factors, e.g. [2, 4, 8]; default: halve until the overview fits in 256
    /// pixels (as gdaladdo does). Not accepted for COG, which picks its own levels.
    pub levels: Option<Vec<u32>>,
}

/// Result of the raster tools that write a raster.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RasterOutput {
    /// The main output file.
    pub output: String,
    /// Every file written (sidecars first, main file last).
    pub files: Vec<String>,
    pub driver: String,
    pub crs: Option<CrsFacts>,
    pub width: u32,
    pub height: u32,
    pub band_count: u32,
    pub data_types: Vec<String>,
    pub pixel_size: (f64, f64),
    /// The equivalent command lines, in order; running them gives the same output.
    pub commands: Vec<Vec<String>>,
    /// GDAL warnings emitted while working.
    pub warnings: Vec<String>,
    /// Step-specific details (overview levels, statistics...).
    pub report: Value,
    /// One receipt per risk domain that had something to say.
    pub reflection: Vec<Receipt>,
}

/// Describe the written output for a result.
pub fn describe_output(
    output: &Path,
    files: &[PathBuf],
    commands: Vec<Vec<String>>,
    warnings: Vec<String>,
    report: Value,
    reflection: Vec<Receipt>,
) -> Result<RasterOutput, GdalError> {
    let written = facts::gather("output", output)?;
    let raster = written.raster.clone();
    Ok(RasterOutput {
        output: output.display().to_string(),
        files: path_strings(files),
        driver: written.driver,
        crs: written.crs,
        width: raster.as_ref().map(|r| r.width).unwrap_or(0),
        height: raster.as_ref().map(|r| r.height).unwrap_or(0),
        band_count: raster.as_ref().map(|r| r.band_count).unwrap_or(0),
        data_types: raster
            .as_ref()
            .map(|r| r.data_types.clone())
            .unwrap_or_default(),
        pixel_size: raster.as_ref().map(|r| r.pixel_size).unwrap_or((0.0, 0.0)),
        commands,
        warnings,
        report,
        reflection,
    })
}

/// Open a raster input and gather its facts, refusing vector-only datasets.
fn raster_facts(role: &str, path: &Path) -> Result<facts::DatasetFacts, GdalError> {
    let dataset_facts = facts::gather(role, path)?;
    if dataset_facts.raster.is_none() {
        return Err(GdalError::Invalid(format!(
            "{role}: {} has no raster bands (is it a vector dataset?)",
            path.display()
        )));
    }
    Ok(dataset_facts)
}

fn call_facts(tool: &str, arguments: &Value, datasets: Vec<facts::DatasetFacts>) -> CallFacts {
    CallFacts {
        tool: tool.to_string(),
        arguments: gate_arguments(arguments),
        datasets,
        target_crs: None,
        transformation: None,
    }
}

// ---------------------------------------------------------------------------------------------
// raster_stats

/// Arguments of `raster_stats`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatsArgs {
    /// Raster inside a workspace.
    pub path: String,
    /// 1-based bands (default: all).
    pub bands: Option<Vec<u32>>,
    /// Percentiles in [0, 100] (default [2, 25, 50, 75, 98]); linear interpolation between
    /// closest ranks, as numpy's default.
    pub percentiles: Option<Vec<f64>>,
    /// Histogram bins over [min, max] (default 32; 0 for none).
    pub histogram_bins: Option<u32>,
    /// Read a decimated sample of at most 1,048,576 cells instead of every cell. Default false
    /// (exact).
    #[serde(default)]
    pub sample: bool,
}

/// Result of `raster_stats`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatsOutput {
    pub path: String,
    /// True when the figures come from a decimated sample.
    pub sampled: bool,
    pub bands: Vec<stats::BandStats>,
}

/// `raster_stats`.
pub async fn raster_stats(app: &App, arguments: &Value) -> Result<Value, ToolError> {
    let args: StatsArgs = parse("raster_stats", arguments)?;
    let percentiles = args
        .percentiles
        .unwrap_or_else(|| vec![2.0, 25.0, 50.0, 75.0, 98.0]);
    if let Some(p) = percentiles
        .iter()
        .find(|p| !(p.is_finite() && (0.0..=100.0).contains(*p)))
    {
        return Err(ToolError::Arguments(format!(
            "percentiles: {p} is outside [0, 100]"
        )));
    }
    let bins = args.histogram_bins.unwrap_or(32) as usize;
    if bins > 100_000 {
        return Err(ToolError::Arguments(
            "histogram_bins: at most 100000 bins".to_string(),
        ));
    }
    let path = app.workspaces.input("path", &args.path)?;
    let request = stats::StatsRequest {
        bands: args
            .bands
            .unwrap_or_default()
            .into_iter()
            .map(|b| b as usize)
            .collect(),
        percentiles,
        histogram_bins: bins,
        sample: args.sample,
    };
    let output = gdal_runner::run_blocking(move || {
        let (bands, sampled) = stats::compute(&path, &request)?;
        Ok(StatsOutput {
            path: path.display().to_string(),
            sampled,
            bands,
        })
    })
    .await?;
    Ok(to_json(&output))
}

// ---------------------------------------------------------------------------------------------
// raster_convert

/// Compression codecs (GTiff and COG spell them this way).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Compression {
    None,
    Deflate,
    Lzw,
    Zstd,
    Lzma,
    Packbits,
    Jpeg,
    Webp,
    Lerc,
    LercDeflate,
    LercZstd,
}

impl Compression {
    fn gdal_name(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::Deflate => "DEFLATE",
            Self::Lzw => "LZW",
            Self::Zstd => "ZSTD",
            Self::Lzma => "LZMA",
            Self::Packbits => "PACKBITS",
            Self::Jpeg => "JPEG",
            Self::Webp => "WEBP",
            Self::Lerc => "LERC",
            Self::LercDeflate => "LERC_DEFLATE",
            Self::LercZstd => "LERC_ZSTD",
        }
    }

    fn is_lerc(self) -> bool {
        matches!(self, Self::Lerc | Self::LercDeflate | Self::LercZstd)
    }
}

/// Arguments of `raster_convert`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvertArgs {
    /// Source raster inside a workspace.
    pub input: String,
    /// Output path inside a workspace; its folder must exist.
    pub output: String,
    /// GDAL driver short name: "GTiff" (default), "COG", "PNG", "JPEG", "WEBP", "GPKG", ...
    pub format: Option<String>,
    /// Compression codec (GTiff, COG). JPEG, WEBP and LERC with max_z_error > 0 are lossy.
    pub compression: Option<Compression>,
    /// Predictor: 1 none, 2 horizontal differencing (integers), 3 floating point.
    #[schemars(range(min = 1, max = 3))]
    pub predictor: Option<u8>,
    /// JPEG/WEBP quality 1-100.
    #[schemars(range(min = 1, max = 100))]
    pub quality: Option<u8>,
    /// LERC: maximum error per cell, in data units (0 = lossless).
    pub max_z_error: Option<f64>,
    /// Tiled layout (GTiff; COG is always tiled).
    pub tiled: Option<bool>,
    /// Tile (block) size in pixels, a multiple of 16.
    pub block_size: Option<u32>,
    /// 1-based bands to keep, in output order (default: all).
    pub bands: Option<Vec<u32>>,
    /// Output data type (default: the input's).
    pub output_type: Option<DataType>,
    /// Linear rescaling [src_min, src_max, dst_min, dst_max] (gdal_translate -scale).
    pub scale: Option<[f64; 4]>,
    /// Nodata value to record in the output (gdal_translate -a_nodata).
    pub nodata: Option<f64>,
    /// Overviews to build (GTiff and COG). A COG without them has none.
    pub overviews: Option<OverviewSpec>,
    /// Further driver creation options, e.g. {"BIGTIFF": "YES"}. Must not contradict the typed
    /// arguments above.
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    #[serde(default)]
    pub overwrite: bool,
    /// Justifications by domain id, for the decisions a previous refusal listed.
    #[schemars(with = "Option<BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// The creation options a driver declares.
fn driver_option_names(driver: &gdal::Driver) -> Vec<String> {
    let list = driver
        .metadata_item("DMD_CREATIONOPTIONLIST", "")
        .unwrap_or_default();
    let mut names = Vec::new();
    let mut rest = list.as_str();
    while let Some(start) = rest.find("name='") {
        let after = &rest[start + 6..];
        match after.find('\'') {
            Some(end) => {
                names.push(after[..end].to_ascii_uppercase());
                rest = &after[end..];
            }
            None => break,
        }
    }
    names
}

/// The translate plan for a conversion: arguments and overview step.
struct ConvertPlan {
    format: String,
    args: Vec<String>,
    /// GTiff overviews to build after the copy: (method, levels or auto).
    overviews: Option<(String, Option<Vec<u32>>)>,
}

fn plan_convert(args: &ConvertArgs, input_bands: u32) -> Result<ConvertPlan, GdalError> {
    let format = args.format.clone().unwrap_or_else(|| "GTiff".to_string());
    let driver = gdal::DriverManager::get_driver_by_name(&format).map_err(|_| {
        GdalError::Invalid(format!(
            "format: \"{format}\" is not a GDAL driver; writable raster drivers include {}",
            facts::writable_raster_drivers().join(", ")
        ))
    })?;
    let format = driver.short_name();
    let declared = driver_option_names(&driver);
    let has = |name: &str| declared.iter().any(|d| d == name);
    let mut options: Vec<(String, String)> = Vec::new();
    let mut typed = |key: &str, value: String, argument: &str| -> Result<(), GdalError> {
        if !has(key) {
            return Err(GdalError::Invalid(format!(
                "{argument}: the {format} driver has no {key} option; {argument} applies to \
                 drivers that have it (GTiff, COG)"
            )));
        }
        options.push((key.to_string(), value));
        Ok(())
    };
    let is_cog = format == "COG";
    let lossy_codec = matches!(
        args.compression,
        Some(Compression::Jpeg | Compression::Webp)
    );
    if let Some(c) = args.compression {
        typed("COMPRESS", c.gdal_name().to_string(), "compression")?;
    }
    if let Some(p) = args.predictor {
        if !(1..=3).contains(&p) {
            return Err(GdalError::Invalid(
                "predictor: 1 (none), 2 (horizontal) or 3 (floating point)".to_string(),
            ));
        }
        if matches!(
            args.compression,
            None | Some(Compression::None | Compression::Jpeg | Compression::Webp)
        ) || args.compression.is_some_and(Compression::is_lerc)
        {
            return Err(GdalError::Invalid(
                "predictor: it only helps DEFLATE, LZW, ZSTD or LZMA compression; set \
                 `compression` to one of them or drop the predictor"
                    .to_string(),
            ));
        }
        let value = if is_cog {
            ["NO", "STANDARD", "FLOATING_POINT"][(p - 1) as usize].to_string()
        } else {
            p.to_string()
        };
        typed("PREDICTOR", value, "predictor")?;
    }
    if let Some(q) = args.quality {
        if !(1..=100).contains(&q) {
            return Err(GdalError::Invalid("quality: 1 to 100".to_string()));
        }
        let key = if has("QUALITY") {
            "QUALITY"
        } else if args.compression == Some(Compression::Jpeg) {
            "JPEG_QUALITY"
        } else if args.compression == Some(Compression::Webp) {
            "WEBP_LEVEL"
        } else {
            return Err(GdalError::Invalid(format!(
                "quality: applies to JPEG or WEBP compression, or to the JPEG and WEBP \
                 drivers; the {format} output here has neither"
            )));
        };
        if matches!(format.as_str(), "GTiff") && !lossy_codec {
            return Err(GdalError::Invalid(
                "quality: applies only with `compression` JPEG or WEBP".to_string(),
            ));
        }
        typed(key, q.to_string(), "quality")?;
    }
    if let Some(z) = args.max_z_error {
        if !(z.is_finite() && z >= 0.0) {
            return Err(GdalError::Invalid(
                "max_z_error: a non-negative number in data units".to_string(),
            ));
        }
        if !args.compression.is_some_and(Compression::is_lerc) {
            return Err(GdalError::Invalid(
                "max_z_error: applies only with `compression` LERC, LERC_DEFLATE or LERC_ZSTD"
                    .to_string(),
            ));
        }
        typed("MAX_Z_ERROR", number(z), "max_z_error")?;
    }
    match (args.tiled, is_cog) {
        (Some(false), true) => {
            return Err(GdalError::Invalid(
                "tiled: a COG is always tiled; drop `tiled: false` or use format GTiff".to_string(),
            ))
        }
        (Some(true), false) => typed("TILED", "YES".to_string(), "tiled")?,
        (Some(false), false) => typed("TILED", "NO".to_string(), "tiled")?,
        _ => {}
    }
    if let Some(b) = args.block_size {
        if b < 16 || b % 16 != 0 || b > 4096 {
            return Err(GdalError::Invalid(
                "block_size: a multiple of 16 between 16 and 4096".to_string(),
            ));
        }
        if has("BLOCKSIZE") {
            typed("BLOCKSIZE", b.to_string(), "block_size")?;
        } else {
            if format == "GTiff" && args.tiled != Some(true) {
                return Err(GdalError::Invalid(
                    "block_size: GeoTIFF tiles need `tiled: true`".to_string(),
                ));
            }
            typed("BLOCKXSIZE", b.to_string(), "block_size")?;
            typed("BLOCKYSIZE", b.to_string(), "block_size")?;
        }
    }
    let mut overviews = None;
    if let Some(spec) = &args.overviews {
        if let Some(levels) = &spec.levels {
            overviews::check_levels(levels)?;
        }
        match format.as_str() {
            "COG" => {
                if spec.levels.is_some() {
                    return Err(GdalError::Invalid(
                        "overviews.levels: a COG picks its overview levels itself (halving \
                         down to one tile); drop `levels`, or write GTiff"
                            .to_string(),
                    ));
                }
                typed("OVERVIEWS", "IGNORE_EXISTING".to_string(), "overviews")?;
                typed(
                    "RESAMPLING",
                    spec.resampling.gdal_name().to_ascii_uppercase(),
                    "overviews",
                )?;
            }
            "GTiff" => {
                overviews = Some((spec.resampling.gdal_name().to_string(), spec.levels.clone()))
            }
            other => {
                return Err(GdalError::Invalid(format!(
                    "overviews: built for GTiff and COG outputs, not {other}"
                )))
            }
        }
    } else if is_cog {
        options.push(("OVERVIEWS".to_string(), "NONE".to_string()));
    }
    let extra = creation_options_checked(&args.creation_options)?;
    for (key, value) in extra {
        match options.iter().find(|(k, _)| *k == key) {
            Some((_, typed_value)) if !typed_value.eq_ignore_ascii_case(&value) => {
                return Err(GdalError::Invalid(format!(
                    "creation_options: {key}={value} contradicts the typed arguments, which set \
                     {key}={typed_value}; give it once"
                )))
            }
            Some(_) => {}
            None => options.push((key, value)),
        }
    }
    facts::check_raster_format(&format, &options)?;

    let mut argv = vec!["-of".to_string(), format.clone()];
    if let Some(bands) = &args.bands {
        if bands.is_empty() {
            return Err(GdalError::Invalid(
                "bands: list at least one band, or leave it out for all".to_string(),
            ));
        }
        for b in bands {
            if *b == 0 || *b > input_bands {
                return Err(GdalError::Invalid(format!(
                    "bands: band {b} does not exist; the input has bands 1 to {input_bands}"
                )));
            }
            argv.extend(["-b".to_string(), b.to_string()]);
        }
    }
    if let Some(t) = args.output_type {
        argv.extend(["-ot".to_string(), t.gdal_name().to_string()]);
    }
    if let Some([a, b, c, d]) = args.scale {
        if [a, b, c, d].iter().any(|v| !v.is_finite()) || a == b {
            return Err(GdalError::Invalid(
                "scale: four finite numbers [src_min, src_max, dst_min, dst_max] with src_min \
                 != src_max"
                    .to_string(),
            ));
        }
        argv.push("-scale".to_string());
        argv.extend([a, b, c, d].iter().map(|v| number(*v)));
    }
    if let Some(nodata) = args.nodata {
        if nodata.is_infinite() {
            return Err(GdalError::Invalid(
                "nodata: a finite number or NaN".to_string(),
            ));
        }
        argv.extend(["-a_nodata".to_string(), number(nodata)]);
    }
    for (key, value) in &options {
        argv.extend(["-co".to_string(), format!("{key}={value}")]);
    }
    Ok(ConvertPlan {
        format,
        args: argv,
        overviews,
    })
}

fn creation_options_checked(
    options: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, GdalError> {
    creation_options(options).map_err(|e| GdalError::Invalid(e.to_string()))
}

/// `raster_convert`.
pub async fn raster_convert(app: &App, arguments: &Value) -> Result<Outcome, ToolError> {
    let args: ConvertArgs = parse("raster_convert", arguments)?;
    let input = app.workspaces.input("input", &args.input)?;
    let output = output_path(app, &args.output, args.overwrite, &[&input])?;
    let gate_args = arguments.clone();
    let inline = args.justification.clone();
    let (plan, facts, args) = gdal_runner::run_blocking(move || {
        let input_facts = raster_facts("input", &input)?;
        let bands = input_facts
            .raster
            .as_ref()
            .map(|r| r.band_count)
            .unwrap_or(0);
        let plan = plan_convert(&args, bands)?;
        let facts = call_facts("raster_convert", &gate_args, vec![input_facts]);
        Ok((plan, facts, (args, input)))
    })
    .await?;
    let receipts = match pass_gate(app, facts, inline).await? {
        Ok(receipts) => receipts,
        Err(refusal) => return Ok(refusal),
    };
    let (_, input) = args;
    let result = gdal_runner::run_blocking(move || {
        let source = facts::open(&input)?;
        let mut report = serde_json::json!({ "format": plan.format });
        let mut commands = vec![Program::Translate.command_line(&plan.args, &input, &output)];
        let mut built_levels = Vec::new();
        let outcome = programs::run(
            &Program::Translate,
            &source,
            &plan.args,
            &output,
            |staged| {
                if let Some((method, levels)) = &plan.overviews {
                    let levels = match levels {
                        Some(levels) => levels.clone(),
                        None => {
                            let (w, h) = source.raster_size();
                            overviews::auto_levels(w, h)
                        }
                    };
                    overviews::build_into(staged, method, &levels)?;
                    built_levels = levels;
                }
                Ok(())
            },
        )?;
        if let Some((method, _)) = &plan.overviews {
            let mut addo = vec![
                "gdaladdo".to_string(),
                "-r".to_string(),
                method.clone(),
                output.display().to_string(),
            ];
            addo.extend(built_levels.iter().map(u32::to_string));
            commands.push(addo);
            report["overview_levels"] = serde_json::json!(built_levels);
        }
        describe_output(
            &output,
            &outcome.files,
            commands,
            outcome.warnings,
            report,
            receipts,
        )
    })
    .await?;
    Ok(Outcome::Done(to_json(&result)))
}

// ---------------------------------------------------------------------------------------------
// raster_resample

/// Arguments of `raster_resample`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResampleArgs {
    /// Source raster inside a workspace.
    pub input: String,
    /// Output path inside a workspace.
    pub output: String,
    /// Resampling method. No default: the choice is part of the methodology.
    pub resampling: WarpResampling,
    /// Output pixel size [x, y] in the raster's CRS units. Excludes `size`.
    pub resolution: Option<[f64; 2]>,
    /// Output size [width, height] in pixels. Excludes `resolution`.
    pub size: Option<[u32; 2]>,
    /// Nodata value of the output.
    pub nodata: Option<f64>,
    /// GDAL driver of the output (default "GTiff").
    pub format: Option<String>,
    /// Driver creation options.
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// Check a resolution/size pair as `gdalwarp -tr` / `-ts` takes them.
pub fn check_grid(resolution: Option<[f64; 2]>, size: Option<[u32; 2]>) -> Result<(), ToolError> {
    match (resolution, size) {
        (Some(_), Some(_)) => Err(ToolError::Arguments(
            "resolution and size are mutually exclusive: give the pixel size or the pixel count"
                .to_string(),
        )),
        (None, None) => Err(ToolError::Arguments(
            "give `resolution` ([x, y] pixel size) or `size` ([width, height])".to_string(),
        )),
        (Some([x, y]), None) if !(x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0) => Err(
            ToolError::Arguments("resolution: both values must be positive numbers".to_string()),
        ),
        (None, Some([w, h])) if w == 0 || h == 0 => Err(ToolError::Arguments(
            "size: width and height must be at least 1".to_string(),
        )),
        _ => Ok(()),
    }
}

/// `raster_resample`: GDALWarp without a CRS change.
pub async fn raster_resample(app: &App, arguments: &Value) -> Result<Outcome, ToolError> {
    let args: ResampleArgs = parse("raster_resample", arguments)?;
    check_grid(args.resolution, args.size)?;
    if args.nodata.is_some_and(f64::is_infinite) {
        return Err(ToolError::Arguments(
            "nodata: a finite number or NaN".to_string(),
        ));
    }
    let options = creation_options(&args.creation_options)?;
    let input = app.workspaces.input("input", &args.input)?;
    let output = output_path(app, &args.output, args.overwrite, &[&input])?;
    let request = WarpRequest {
        input: input.clone(),
        output: output.clone(),
        dst_crs: None,
        src_crs: None,
        resampling: args.resampling.gdal_name().to_string(),
        resolution: args.resolution.map(|[x, y]| (x, y)),
        size: args.size.map(|[w, h]| (w, h)),
        bounds: None,
        dst_nodata: args.nodata,
        output_type: None,
        format: args.format.clone().unwrap_or_else(|| "GTiff".to_string()),
        creation_options: options,
    };
    run_warp_tool(
        app,
        "raster_resample",
        arguments,
        request,
        args.justification,
    )
    .await
}

/// Facts, gate and run for a warp-based tool that keeps the CRS.
pub async fn run_warp_tool(
    app: &App,
    tool: &'static str,
    arguments: &Value,
    request: WarpRequest,
    inline: Option<InlineJustifications>,
) -> Result<Outcome, ToolError> {
    let gate_args = arguments.clone();
    let (request, facts) = gdal_runner::run_blocking(move || {
        facts::check_raster_format(&request.format, &request.creation_options)?;
        let input_facts = raster_facts("input", &request.input)?;
        Ok((request, call_facts(tool, &gate_args, vec![input_facts])))
    })
    .await?;
    let receipts = match pass_gate(app, facts, inline).await? {
        Ok(receipts) => receipts,
        Err(refusal) => return Ok(refusal),
    };
    let result = gdal_runner::run_blocking(move || {
        let outcome = request.run()?;
        let command = request.command_line();
        describe_output(
            &request.output,
            &outcome.files,
            vec![command],
            outcome.warnings,
            Value::Null,
            receipts,
        )
    })
    .await?;
    Ok(Outcome::Done(to_json(&result)))
}

// ---------------------------------------------------------------------------------------------
// raster_overviews

/// Arguments of `raster_overviews`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverviewsArgs {
    /// Raster inside a workspace. It is never modified.
    pub input: String,
    /// Write a new GeoTIFF with internal overviews here. Without it, the overviews go to an
    /// external `<input>.ovr` beside the input (GDAL picks it up automatically).
    pub output: Option<String>,
    /// How overview cells are computed. No default.
    pub resampling: OverviewResampling,
    /// Reduction factors, e.g. [2, 4, 8] (default: halve until 256 pixels, as gdaladdo).
    pub levels: Option<Vec<u32>>,
    /// Creation options of the new GeoTIFF (only with `output`).
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    /// Replace an existing output or `.ovr`.
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

/// `raster_overviews`.
pub async fn raster_overviews(app: &App, arguments: &Value) -> Result<Outcome, ToolError> {
    let args: OverviewsArgs = parse("raster_overviews", arguments)?;
    if let Some(levels) = &args.levels {
        overviews::check_levels(levels)?;
    }
    let options = creation_options(&args.creation_options)?;
    let input = app.workspaces.input("input", &args.input)?;
    let output = match &args.output {
        Some(raw) => Some(output_path(app, raw, args.overwrite, &[&input])?),
        None => {
            if !options.is_empty() {
                return Err(ToolError::Arguments(
                    "creation_options: apply only with `output` (a new GeoTIFF); an external \
                     .ovr takes none"
                        .to_string(),
                ));
            }
            let mut name = input.as_os_str().to_os_string();
            name.push(".ovr");
            let sidecar = PathBuf::from(name);
            if sidecar.exists() && !args.overwrite {
                return Err(ToolError::Arguments(format!(
                    "{} already exists; pass \"overwrite\": true to rebuild it",
                    sidecar.display()
                )));
            }
            None
        }
    };
    let gate_args = arguments.clone();
    let job_input = input.clone();
    let job_options = options.clone();
    let external = output.is_none();
    let facts = gdal_runner::run_blocking(move || {
        facts::check_raster_format("GTiff", &job_options)?;
        let input_facts = raster_facts("input", &job_input)?;
        if external {
            let mut sidecar = job_input.as_os_str().to_os_string();
            sidecar.push(".ovr");
            let source = facts::open(&job_input)?;
            let internal = source
                .rasterband(1)
                .ok()
                .and_then(|b| b.overview_count().ok())
                .is_some_and(|n| n > 0)
                && !Path::new(&sidecar).exists();
            if internal {
                return Err(GdalError::Invalid(
                    "input: the raster already has internal overviews, and GDAL cannot add an \
                     external .ovr beside them; pass `output` to rebuild them into a new \
                     GeoTIFF"
                        .to_string(),
                ));
            }
        }
        Ok(call_facts(
            "raster_overviews",
            &gate_args,
            vec![input_facts],
        ))
    })
    .await?;
    let receipts = match pass_gate(app, facts, args.justification).await? {
        Ok(receipts) => receipts,
        Err(refusal) => return Ok(refusal),
    };
    let method = args.resampling.gdal_name().to_string();
    let levels = args.levels;
    let result = gdal_runner::run_blocking(move || {
        let source = facts::open(&input)?;
        let (w, h) = source.raster_size();
        let levels = levels.unwrap_or_else(|| overviews::auto_levels(w, h));
        if levels.is_empty() {
            return Err(GdalError::Invalid(format!(
                "levels: the raster is only {w}x{h} pixels, so gdaladdo's automatic levels are \
                 empty; give `levels` (e.g. [2, 4]) to build overviews anyway"
            )));
        }
        let level_args: Vec<String> = levels.iter().map(u32::to_string).collect();
        match output {
            Some(output) => {
                let mut argv = vec!["-of".to_string(), "GTiff".to_string()];
                for (key, value) in &options {
                    argv.extend(["-co".to_string(), format!("{key}={value}")]);
                }
                let outcome = programs::run(&Program::Translate, &source, &argv, &output, |s| {
                    overviews::build_into(s, &method, &levels)
                })?;
                let mut addo = vec![
                    "gdaladdo".to_string(),
                    "-r".to_string(),
                    method.clone(),
                    output.display().to_string(),
                ];
                addo.extend(level_args);
                describe_output(
                    &output,
                    &outcome.files,
                    vec![
                        Program::Translate.command_line(&argv, &input, &output),
                        addo,
                    ],
                    outcome.warnings,
                    serde_json::json!({ "overview_levels": levels, "external": false }),
                    receipts,
                )
            }
            None => {
                drop(source);
                let files = overviews::build_external(&input, &method, &levels)?;
                let mut addo = vec![
                    "gdaladdo".to_string(),
                    "-ro".to_string(),
                    "-r".to_string(),
                    method.clone(),
                    input.display().to_string(),
                ];
                addo.extend(level_args);
                describe_output(
                    &input,
                    &files,
                    vec![addo],
                    Vec::new(),
                    serde_json::json!({ "overview_levels": levels, "external": true }),
                    receipts,
                )
                .map(|mut described| {
                    described.output = files
                        .last()
                        .map(|f| f.display().to_string())
                        .unwrap_or_default();
                    described
                })
            }
        }
    })
    .await?;
    Ok(Outcome::Done(to_json(&result)))
}

// ---------------------------------------------------------------------------------------------
// raster_terrain

/// Terrain derivatives (gdaldem).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TerrainOperation {
    Slope,
    Aspect,
    Hillshade,
    Tri,
    Tpi,
    Roughness,
}

impl TerrainOperation {
    fn gdal_name(self) -> &'static str {
        match self {
            Self::Slope => "slope",
            Self::Aspect => "aspect",
            Self::Hillshade => "hillshade",
            Self::Tri => "TRI",
            Self::Tpi => "TPI",
            Self::Roughness => "roughness",
        }
    }
}

/// Slope units.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SlopeUnits {
    Degrees,
    Percent,
}

/// Gradient algorithm.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GradientAlgorithm {
    /// Horn (1981): smoother, better for rough terrain (default).
    Horn,
    /// Zevenbergen & Thorne (1987): better for smooth terrain.
    ZevenbergenThorne,
}

/// Arguments of `raster_terrain`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerrainArgs {
    /// DEM inside a workspace.
    pub input: String,
    /// Output path inside a workspace.
    pub output: String,
    pub operation: TerrainOperation,
    /// Band of the DEM (default 1).
    pub band: Option<u32>,
    /// Vertical exaggeration (slope, hillshade).
    pub z_factor: Option<f64>,
    /// Ratio of horizontal to vertical units, e.g. 111120 for a DEM in degrees with heights in
    /// metres (slope, hillshade, aspect). Needed for geographic DEMs.
    pub scale: Option<f64>,
    /// Slope in degrees (default) or percent.
    pub slope_units: Option<SlopeUnits>,
    /// Gradient algorithm for slope, aspect and hillshade (default horn).
    pub algorithm: Option<GradientAlgorithm>,
    /// Compute edge cells by extrapolation instead of leaving them nodata.
    #[serde(default)]
    pub compute_edges: bool,
    /// Hillshade: light azimuth in degrees (default 315).
    pub azimuth: Option<f64>,
    /// Hillshade: light altitude in degrees (default 45).
    pub altitude: Option<f64>,
    /// Hillshade: multidirectional shading.
    #[serde(default)]
    pub multidirectional: bool,
    /// Hillshade: combined slope and oblique shading.
    #[serde(default)]
    pub combined: bool,
    /// GDAL driver of the output (default "GTiff").
    pub format: Option<String>,
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    #[serde(default)]
    pub overwrite: bool,
    #[schemars(with = "Option<BTreeMap<String, Justification>>")]
    pub justification: Option<InlineJustifications>,
}

fn terrain_args(
    args: &TerrainArgs,
    options: &[(String, String)],
) -> Result<Vec<String>, ToolError> {
    let op = args.operation;
    let bad = |m: &str| Err(ToolError::Arguments(m.to_string()));
    let format = args.format.clone().unwrap_or_else(|| "GTiff".to_string());
    let mut argv = vec!["-of".to_string(), format];
    if let Some(b) = args.band {
        if b == 0 {
            return bad("band: bands are numbered from 1");
        }
        argv.extend(["-b".to_string(), b.to_string()]);
    }
    let gradient = matches!(
        op,
        TerrainOperation::Slope | TerrainOperation::Aspect | TerrainOperation::Hillshade
    );
    if let Some(z) = args.z_factor {
        if !(z.is_finite() && z > 0.0) {
            return bad("z_factor: a positive number");
        }
        if !matches!(op, TerrainOperation::Slope | TerrainOperation::Hillshade) {
            return bad("z_factor: applies to slope and hillshade");
        }
        argv.extend(["-z".to_string(), number(z)]);
    }
    if let Some(s) = args.scale {
        if !(s.is_finite() && s > 0.0) {
            return bad("scale: a positive number (e.g. 111120 for degrees over metres)");
        }
        if !gradient {
            return bad("scale: applies to slope, aspect and hillshade");
        }
        argv.extend(["-s".to_string(), number(s)]);
    }
    if let Some(units) = args.slope_units {
        if op != TerrainOperation::Slope {
            return bad("slope_units: applies to slope");
        }
        if units == SlopeUnits::Percent {
            argv.push("-p".to_string());
        }
    }
    if let Some(alg) = args.algorithm {
        if !gradient {
            return bad("algorithm: applies to slope, aspect and hillshade");
        }
        argv.extend([
            "-alg".to_string(),
            match alg {
                GradientAlgorithm::Horn => "Horn",
                GradientAlgorithm::ZevenbergenThorne => "ZevenbergenThorne",
            }
            .to_string(),
        ]);
    }
    if args.compute_edges {
        argv.push("-compute_edges".to_string());
    }
    let hillshade_only =
        args.azimuth.is_some() || args.altitude.is_some() || args.multidirectional || args.combined;
    if hillshade_only && op != TerrainOperation::Hillshade {
        return bad("azimuth, altitude, multidirectional and combined apply to hillshade");
    }
    if args.multidirectional && (args.combined || args.azimuth.is_some()) {
        return bad("multidirectional: cannot be combined with `combined` or `azimuth`");
    }
    if let Some(az) = args.azimuth {
        if !(az.is_finite() && (0.0..=360.0).contains(&az)) {
            return bad("azimuth: degrees in [0, 360]");
        }
        argv.extend(["-az".to_string(), number(az)]);
    }
    if let Some(alt) = args.altitude {
        if !(alt.is_finite() && (0.0..=90.0).contains(&alt)) {
            return bad("altitude: degrees in [0, 90]");
        }
        argv.extend(["-alt".to_string(), number(alt)]);
    }
    if args.multidirectional {
        argv.push("-multidirectional".to_string());
    }
    if args.combined {
        argv.push("-combined".to_string());
    }
    for (key, value) in options {
        argv.extend(["-co".to_string(), format!("{key}={value}")]);
    }
    Ok(argv)
}

/// `raster_terrain`: GDALDEMProcessing.
pub async fn raster_terrain(app: &App, arguments: &Value) -> Result<Outcome, ToolError> {
    let args: TerrainArgs = parse("raster_terrain", arguments)?;
    let options = creation_options(&args.creation_options)?;
    let argv = terrain_args(&args, &options)?;
    let input = app.workspaces.input("input", &args.input)?;
    let output = output_path(app, &args.output, args.overwrite, &[&input])?;
    let gate_args = arguments.clone();
    let format = args.format.clone().unwrap_or_else(|| "GTiff".to_string());
    let band = args.band;
    let job_input = input.clone();
    let facts = gdal_runner::run_blocking(move || {
        facts::check_raster_format(&format, &options)?;
        let input_facts = raster_facts("input", &job_input)?;
        let count = input_facts
            .raster
            .as_ref()
            .map(|r| r.band_count)
            .unwrap_or(0);
        if let Some(b) = band {
            if b > count {
                return Err(GdalError::Invalid(format!(
                    "band: the DEM has {count} band(s)"
                )));
            }
        }
        Ok(call_facts("raster_terrain", &gate_args, vec![input_facts]))
    })
    .await?;
    let receipts = match pass_gate(app, facts, args.justification).await? {
        Ok(receipts) => receipts,
        Err(refusal) => return Ok(refusal),
    };
    let program = Program::Dem(args.operation.gdal_name().to_string());
    let result = gdal_runner::run_blocking(move || {
        let source = facts::open(&input)?;
        let outcome = programs::run(&program, &source, &argv, &output, |_| Ok(()))?;
        describe_output(
            &output,
            &outcome.files,
            vec![program.command_line(&argv, &input, &output)],
            outcome.warnings,
            Value::Null,
            receipts,
        )
    })
    .await?;
    Ok(Outcome::Done(to_json(&result)))
}

// ---------------------------------------------------------------------------------------------
// Definitions

/// The raster tools' definitions.
pub fn definitions() -> Vec<Tool> {
    let gate_note = " The first call for a new decision is refused with each concerned domain's \
                     questions, a JSON Schema and a key; answer in `justification` (by domain \
                     id) on a retry or through persist_justification. The output is written \
                     atomically; an existing file is replaced only with `overwrite`, never an \
                     input.";
    let gated = |name: &'static str, title: &str, description: &str, schema| {
        Tool::new(name, format!("{description}{gate_note}"), schema)
            .with_title(title)
            .with_raw_output_schema(schema_of::<RasterOutput>())
            .with_annotations(annotations(false, true, true))
    };
    vec![
        Tool::new(
            "raster_stats",
            "Per-band statistics of a raster: valid and nodata counts, min, max, mean, \
             population standard deviation, exact percentiles (numpy's linear method) and a \
             histogram. Exact by default (reads every cell); `sample` reads a decimated sample \
             of at most 2^20 cells. Nodata and NaN cells are excluded. Read-only, never gated.",
            schema_of::<StatsArgs>(),
        )
        .with_title("Raster statistics")
        .with_raw_output_schema(schema_of::<StatsOutput>())
        .with_annotations(annotations(true, false, true)),
        gated(
            "raster_convert",
            "Convert a raster",
            "Convert a raster to another format or layout with gdal_translate: GTiff, COG, PNG, \
             JPEG, WEBP, GPKG...; compression (DEFLATE, LZW, ZSTD, LZMA, PACKBITS, JPEG, WEBP, \
             LERC), predictor, quality, tiling and block size, band subset, data type and \
             scaling, nodata, and overviews with an explicit resampling method. Options are \
             checked against the driver before any work. Gated by format_selection (lossy or \
             data-losing conversions) and resampling (overviews).",
            schema_of::<ConvertArgs>(),
        ),
        gated(
            "raster_resample",
            "Resample a raster",
            "Change a raster's resolution or pixel count without changing its CRS, with \
             gdalwarp (nearest, bilinear, cubic, cubicspline, lanczos, average, rms, mode, max, \
             min, med, q1, q3, sum). Gated by the resampling domain.",
            schema_of::<ResampleArgs>(),
        ),
        gated(
            "raster_overviews",
            "Build overviews",
            "Build overviews (gdaladdo) with an explicit resampling method: as an external \
             `<input>.ovr` beside the input (the input file is not modified), or into a new \
             GeoTIFF given as `output`. Gated by the resampling domain.",
            schema_of::<OverviewsArgs>(),
        ),
        gated(
            "raster_terrain",
            "Terrain derivatives",
            "Slope, aspect, hillshade, TRI, TPI or roughness of a DEM with gdaldem (same \
             output as the command line). Geographic DEMs need `scale` (horizontal to vertical \
             units); the crs_datum domain gates that case.",
            schema_of::<TerrainArgs>(),
        ),
    ]
}
