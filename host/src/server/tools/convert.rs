//! The conversion family: `raster_convert`, gdal_translate (plus gdaladdo for GTiff
//! overviews) with typed arguments mapped onto the options the chosen driver declares.
//!
//! Every typed argument is checked against the driver before any work: an option the driver
//! lacks, a combination that cannot work (a predictor without DEFLATE/LZW/ZSTD/LZMA,
//! `max_z_error` without LERC, a COG that is not tiled or with explicit overview levels) and a
//! creation option that contradicts a typed argument are refused with the fix.

use super::RasterOutput;
use crate::domains::CallFacts;
use crate::gdal::facts;
use crate::gdal::facts::encoding::{RasterWrite, WriteDriver, WrittenTypes};
use crate::gdal::programs::number;
use crate::gdal::raster::overviews;
use crate::gdal::raster::translate::TranslateRequest;
use crate::server::args::{
    driver_options, parse, raster_format, DataType, Justifications, OverviewResampling,
};
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated::{self, Gathered};
use crate::server::tool::{handler, Effect, Family, Schemas, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Overviews to build in the output.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverviewSpec {
    /// How overview cells are computed from full-resolution cells. No default.
    pub resampling: OverviewResampling,
    /// Reduction factors, e.g. [2, 4, 8]; default: halve down to 256 pixels. Not for COG.
    pub levels: Option<Vec<u32>>,
}

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
    pub justification: Option<Justifications>,
}

/// The translate plan for a conversion: arguments and overview step.
struct ConvertPlan {
    format: String,
    args: Vec<String>,
    /// GTiff overviews to build after the copy: (method, levels or auto).
    overviews: Option<(String, Option<Vec<u32>>)>,
    /// What `scale` did to the bands' declared scale and offset, in words.
    rescaled: Option<String>,
    /// The cells a new `nodata` turns from values into nodata, in words ([`relabelled_nodata`]).
    nodata_notes: Vec<String>,
}

fn plan_convert(args: &ConvertArgs, input_bands: u32) -> Result<ConvertPlan, ToolError> {
    let format = raster_format(args.format.as_deref(), &args.output)?;
    let driver = gdal::DriverManager::get_driver_by_name(&format).map_err(|_| {
        if let Some(refused) = crate::gdal::policy::drivers::refusal("format", &format, true) {
            return ToolError::Arguments(refused.to_string());
        }
        ToolError::Arguments(format!(
            "format: \"{format}\" is not a GDAL driver; writable raster drivers include {}",
            facts::writable_raster_drivers().join(", ")
        ))
    })?;
    let format = driver.short_name();
    let declared = facts::driver_option_names(&driver);
    let has = |name: &str| declared.iter().any(|d| d == name);
    let mut options: Vec<(String, String)> = Vec::new();
    let mut typed = |key: &str, value: String, argument: &str| -> Result<(), ToolError> {
        if !has(key) {
            return Err(ToolError::Arguments(format!(
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
            return Err(ToolError::Arguments(
                "predictor: 1 (none), 2 (horizontal) or 3 (floating point)".to_string(),
            ));
        }
        if matches!(
            args.compression,
            None | Some(Compression::None | Compression::Jpeg | Compression::Webp)
        ) || args.compression.is_some_and(Compression::is_lerc)
        {
            return Err(ToolError::Arguments(
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
            return Err(ToolError::Arguments("quality: 1 to 100".to_string()));
        }
        let key = if has("QUALITY") {
            "QUALITY"
        } else if args.compression == Some(Compression::Jpeg) {
            "JPEG_QUALITY"
        } else if args.compression == Some(Compression::Webp) {
            "WEBP_LEVEL"
        } else {
            return Err(ToolError::Arguments(format!(
                "quality: applies to JPEG or WEBP compression, or to the JPEG and WEBP \
                 drivers; the {format} output here has neither"
            )));
        };
        if matches!(format.as_str(), "GTiff") && !lossy_codec {
            return Err(ToolError::Arguments(
                "quality: applies only with `compression` JPEG or WEBP".to_string(),
            ));
        }
        typed(key, q.to_string(), "quality")?;
    }
    if let Some(z) = args.max_z_error {
        if !(z.is_finite() && z >= 0.0) {
            return Err(ToolError::Arguments(
                "max_z_error: a non-negative number in data units".to_string(),
            ));
        }
        if !args.compression.is_some_and(Compression::is_lerc) {
            return Err(ToolError::Arguments(
                "max_z_error: applies only with `compression` LERC, LERC_DEFLATE or LERC_ZSTD"
                    .to_string(),
            ));
        }
        typed("MAX_Z_ERROR", number(z), "max_z_error")?;
    }
    match (args.tiled, is_cog) {
        (Some(false), true) => {
            return Err(ToolError::Arguments(
                "tiled: a COG is always tiled; drop `tiled: false` or use format GTiff".to_string(),
            ))
        }
        (Some(true), false) => typed("TILED", "YES".to_string(), "tiled")?,
        (Some(false), false) => typed("TILED", "NO".to_string(), "tiled")?,
        _ => {}
    }
    if let Some(b) = args.block_size {
        if b < 16 || b % 16 != 0 || b > 4096 {
            return Err(ToolError::Arguments(
                "block_size: a multiple of 16 between 16 and 4096".to_string(),
            ));
        }
        if has("BLOCKSIZE") {
            typed("BLOCKSIZE", b.to_string(), "block_size")?;
        } else {
            if format == "GTiff" && args.tiled != Some(true) {
                return Err(ToolError::Arguments(
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
                    return Err(ToolError::Arguments(
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
                return Err(ToolError::Arguments(format!(
                    "overviews: built for GTiff and COG outputs, not {other}"
                )))
            }
        }
    } else if is_cog {
        options.push(("OVERVIEWS".to_string(), "NONE".to_string()));
    }
    let extra = driver_options("creation_options", &args.creation_options)?;
    for (key, value) in extra {
        match options.iter().find(|(k, _)| *k == key) {
            Some((_, typed_value)) if !typed_value.eq_ignore_ascii_case(&value) => {
                return Err(ToolError::Arguments(format!(
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
            return Err(ToolError::Arguments(
                "bands: list at least one band, or leave it out for all".to_string(),
            ));
        }
        for b in bands {
            if *b == 0 || *b > input_bands {
                return Err(ToolError::Arguments(format!(
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
        if [a, b, c, d].iter().any(|v| !v.is_finite()) || a == b || c == d {
            return Err(ToolError::Arguments(
                "scale: four finite numbers [src_min, src_max, dst_min, dst_max] with src_min \
                 != src_max and dst_min != dst_max"
                    .to_string(),
            ));
        }
        argv.push("-scale".to_string());
        argv.extend([a, b, c, d].iter().map(|v| number(*v)));
    }
    if let Some(nodata) = args.nodata {
        if nodata.is_infinite() {
            return Err(ToolError::Arguments(
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
        rescaled: None,
        nodata_notes: Vec::new(),
    })
}

/// What a `nodata` does to the input's cells: gdal_translate `-a_nodata` relabels, it never
/// rewrites a cell. Cells that hold the new value as data become nodata, and are counted into
/// the warnings (attack round 16, R16-B19: 24 of 64 cells of a coastal DEM at sea level
/// vanished from every later statistic under "lossless" with no word). Cells of a band's old
/// nodata, when it was another value, would become data: a DEM declaring -9999 relabelled to
/// 0 read its two voids as -9999 m, a mean of -1,663 m (found with R16-B19). That is refused
/// before the gate, with `raster_calc`, which writes nodata cells as its `nodata`, as the fix.
fn relabelled_nodata(
    input: &std::path::Path,
    bands: Option<&[u32]>,
    value: f64,
) -> Result<Vec<String>, ToolError> {
    let dataset = facts::open(input)?;
    let chosen: Vec<usize> = match bands {
        Some(list) => list.iter().map(|b| *b as usize).collect(),
        None => (1..=dataset.raster_count()).collect(),
    };
    let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
    let mut notes = Vec::new();
    for index in chosen {
        let Ok(band) = dataset.rasterband(index) else {
            continue;
        };
        let declared = band.no_data_value();
        if let Some(old) = declared.filter(|old| !old.is_nan() && !same(*old, value)) {
            let voids = crate::gdal::raster::stats::nodata_cells(&band).unwrap_or(0);
            if voids > 0 {
                return Err(ToolError::Arguments(format!(
                    "nodata: band {index} declares {} as nodata and {voids} cells hold it; \
                     raster_convert only relabels the nodata, so with nodata {} those cells \
                     would be read as values {}. To change the nodata value, use raster_calc \
                     (inputs {{\"a\": this raster}}, expression \"a\", nodata {}), which \
                     writes nodata cells as the new value; or leave nodata out to keep {}",
                    number(old),
                    number(value),
                    number(old),
                    number(value),
                    number(old)
                )));
            }
        }
        if declared.is_some_and(|old| same(old, value)) {
            continue;
        }
        let held = crate::gdal::raster::stats::cells_holding(&band, value).unwrap_or(0);
        if held > 0 {
            let (width, height) = band.size();
            notes.push(format!(
                "nodata: {held} of {} cells of band {index} held {} as a value; the output \
                 reads them as nodata, and every later statistic leaves them out (choose a \
                 value the data does not hold to keep them)",
                width as u64 * height as u64,
                number(value)
            ));
        }
    }
    Ok(notes)
}

/// What `scale` does to the stored values the bands hold (read exactly): refused when its
/// source range misses every stored value of a packed band but holds its physical values
/// (attack round 20, R20-B6: [100, 110] on heights stored in decimetres clamped all 99 cells
/// to 110.0 m under "the physical values are kept"), or when the rescaled values reach the
/// `nodata` given (R20-B5: [50, 60, 0, 254] with nodata 255 to Byte made 39 of 99 valid cells
/// nodata, gdal_translate extrapolating past 60 and clamping at 255). Values the output type
/// clamps are said.
fn check_rescale(
    args: &ConvertArgs,
    input: &std::path::Path,
    facts: &crate::gdal::facts::DatasetFacts,
) -> Result<Vec<String>, ToolError> {
    let Some([src_min, src_max, dst_min, dst_max]) = args.scale else {
        return Ok(Vec::new());
    };
    if src_max == src_min {
        return Ok(Vec::new());
    }
    let dataset = facts::open(input)?;
    let chosen: Vec<usize> = match &args.bands {
        Some(list) => list.iter().map(|b| *b as usize).collect(),
        None => (1..=dataset.raster_count()).collect(),
    };
    let output_type = args
        .output_type
        .map(|t| t.gdal_name().to_string())
        .or_else(|| {
            facts
                .raster
                .as_ref()
                .and_then(|r| r.data_types.first().cloned())
        });
    let range = output_type
        .as_deref()
        .and_then(crate::gdal::raster::warp::integer_range);
    let map = |v: f64| dst_min + (v - src_min) * (dst_max - dst_min) / (src_max - src_min);
    let mut notes = Vec::new();
    for index in chosen {
        let Ok(band) = dataset.rasterband(index) else {
            continue;
        };
        let (w, h) = band.size();
        if (w as u64).saturating_mul(h as u64) > crate::gdal::policy::max_cells() {
            continue;
        }
        let _quiet = crate::gdal::ErrorCapture::start();
        let Ok(stored) = band.compute_raster_min_max(false) else {
            continue;
        };
        let (low, high) = (stored.min, stored.max);
        let (scale, offset) = (band.scale().unwrap_or(1.0), band.offset().unwrap_or(0.0));
        let packed = (scale, offset) != (1.0, 0.0);
        let (p_low, p_high) = {
            let (a, b) = (low * scale + offset, high * scale + offset);
            (a.min(b), a.max(b))
        };
        let (s_low, s_high) = (src_min.min(src_max), src_min.max(src_max));
        let misses = high < s_low || low > s_high;
        if packed && misses && p_high >= s_low && p_low <= s_high {
            let raw = |v: f64| (v - offset) / scale;
            return Err(ToolError::Arguments(format!(
                "scale: its source range [{}, {}] is read in band {index}'s stored values, \
                 which run {}..{} (physical {}..{}: the band declares raw x {} + {}); it misses \
                 every stored value and would clamp every cell. For that physical range pass \
                 [{}, {}, {}, {}]",
                number(src_min),
                number(src_max),
                number(low),
                number(high),
                number(p_low),
                number(p_high),
                number(scale),
                number(offset),
                number(raw(src_min)),
                number(raw(src_max)),
                number(dst_min),
                number(dst_max)
            )));
        }
        let (a, b) = {
            let (a, b) = (map(low), map(high));
            (a.min(b), a.max(b))
        };
        let (held_a, held_b) = match range {
            Some((type_low, type_high)) => (
                a.round().clamp(type_low, type_high),
                b.round().clamp(type_low, type_high),
            ),
            None => (a, b),
        };
        if let Some(nodata) = args.nodata {
            if nodata >= held_a && nodata <= held_b {
                return Err(ToolError::Arguments(format!(
                    "nodata: band {index}'s stored values {}..{} rescale to {}..{} (as {} holds \
                     them), which reaches the nodata {}: valid cells would read as nodata. \
                     Pass a source range that covers the data ([{}, {}, ...]), or a nodata \
                     outside {}..{}",
                    number(low),
                    number(high),
                    number(held_a),
                    number(held_b),
                    output_type.as_deref().unwrap_or("the output type"),
                    number(nodata),
                    number(low),
                    number(high),
                    number(held_a),
                    number(held_b)
                )));
            }
        }
        if let Some((type_low, type_high)) = range {
            if a < type_low || b > type_high {
                notes.push(format!(
                    "scale: band {index}'s stored values {}..{} rescale to {}..{}, beyond {}'s \
                     {}..{}: the values past it are clamped to its ends",
                    number(low),
                    number(high),
                    number(a),
                    number(b),
                    output_type.as_deref().unwrap_or_default(),
                    number(type_low),
                    number(type_high)
                ));
            }
        }
    }
    Ok(notes)
}

/// What `scale` means for the bands' own declarations. `gdal_translate -scale` maps raw values
/// and copies the input's scale, offset and nodata unchanged, so a band declaring physical =
/// raw x 0.01 - 10 read -9.99..-7.45 after a rescale to 0..255, and valid cells rescaled onto
/// the kept nodata vanished (attack round 11, R11-10). Right by default: the output declares
/// the scale and offset that keep the physical values (`-a_scale`, `-a_offset`, in the
/// commands); a nodata the rescaled values can land on is refused, naming the fix.
fn rescaled_declarations(
    args: &ConvertArgs,
    input: &crate::gdal::facts::DatasetFacts,
) -> Result<(Vec<String>, Option<String>), ToolError> {
    let Some([src_min, src_max, dst_min, dst_max]) = args.scale else {
        return Ok((Vec::new(), None));
    };
    let all = input
        .raster
        .as_ref()
        .map(|r| r.bands.as_slice())
        .unwrap_or_default();
    let chosen: Vec<_> = match &args.bands {
        Some(list) => list
            .iter()
            .filter_map(|b| all.get((*b as usize).saturating_sub(1)))
            .collect(),
        None => all.iter().collect(),
    };
    if args.nodata.is_none() {
        let (low, high) = (dst_min.min(dst_max), dst_min.max(dst_max));
        // The nodata as the output type holds it: GDAL clamps one the type cannot hold to the
        // type's range (attack round 14, R14-B17: -9999 became 0 in Byte, the rescaled
        // minimum, and 45 valid cells became nodata).
        let output_type = args
            .output_type
            .map(|t| t.gdal_name().to_string())
            .or_else(|| {
                input
                    .raster
                    .as_ref()
                    .and_then(|r| r.data_types.first().cloned())
            });
        let held = |n: f64| match output_type
            .as_deref()
            .and_then(crate::gdal::raster::warp::integer_range)
        {
            Some((type_low, type_high)) => n.round().clamp(type_low, type_high),
            None => n,
        };
        if let Some(nodata) = chosen
            .iter()
            .filter_map(|b| b.nodata)
            .map(held)
            .find(|n| *n >= low && *n <= high)
        {
            return Err(ToolError::Arguments(format!(
                "scale: the input's nodata is kept in the output as {nodata} (as the output \
                 type holds it), and it lies within the rescaled range {dst_min}..{dst_max}, \
                 so valid cells rescaled onto it would read as nodata; pass `nodata` outside \
                 that range, or rescale into a range without it (e.g. [{src_min}, {src_max}, \
                 {}, {dst_max}] with nodata {nodata}; values below src_min still fall below \
                 dst_min, and the output type's clamp can put them on the nodata: choose \
                 src_min at or below the data's minimum)",
                if nodata == dst_min {
                    number(dst_min + (dst_max - dst_min).signum())
                } else {
                    number(dst_min)
                }
            )));
        }
    }
    let declared: Vec<(f64, f64)> = chosen
        .iter()
        .map(|b| (b.scale.unwrap_or(1.0), b.offset.unwrap_or(0.0)))
        .collect();
    let Some(&(scale, offset)) = declared.first() else {
        return Ok((Vec::new(), None));
    };
    if declared.iter().all(|d| *d == (1.0, 0.0)) {
        return Ok((Vec::new(), None));
    }
    if declared.iter().any(|d| *d != (scale, offset)) {
        return Err(ToolError::Arguments(
            "scale: the bands declare different scales or offsets, and one rescale cannot keep \
             them all; convert the bands one at a time (`bands`)"
                .to_string(),
        ));
    }
    // raw = src_min + (new - dst_min) x k, with k = (src_max - src_min) / (dst_max - dst_min).
    let k = (src_max - src_min) / (dst_max - dst_min);
    let new_scale = scale * k;
    let new_offset = offset + scale * (src_min - dst_min * k);
    Ok((
        vec![
            "-a_scale".to_string(),
            number(new_scale),
            "-a_offset".to_string(),
            number(new_offset),
        ],
        Some(format!(
            "the input declares physical = raw x {scale} + {offset}; the rescaled output \
             declares raw x {} + {}, so its physical values are the input's (to the precision of \
             the output type)",
            number(new_scale),
            number(new_offset)
        )),
    ))
}

/// `raster_convert`, as the tool table lists it.
pub const RASTER_CONVERT: ToolSpec = ToolSpec {
    name: "raster_convert",
    family: Family::Convert,
    title: "Convert a raster",
    verb: "Converted",
    description: "Convert a raster with gdal_translate (GTiff, COG, PNG, JPEG, WEBP, \
        GPKG...): compression, tiling, bands, type, scaling, nodata, overviews. Gated \
        by format_selection and resampling.",
    effect: Effect::Writes,
    opens_rasters: true,
    raster_output: Some(RasterWrite {
        driver: WriteDriver::FormatArgument,
        written: WrittenTypes::SelectedBands,
    }),
    schemas: Schemas::gated::<ConvertArgs, super::RasterOutput>(),
    handler: handler!(convert),
};

/// `raster_convert`.
pub async fn convert(call: Call) -> Result<Value, ToolError> {
    let args: ConvertArgs = parse(call.tool, &call.arguments)?;
    let (input, output) = call.input_and_output(&args.input, &args.output, args.overwrite)?;
    let justifications = args.justification.clone();
    gated::run(
        &call,
        justifications,
        move || {
            let input_facts = facts::gather_raster("input", &input)?;
            crate::gdal::facts::check_raster_cells("input", &input_facts)?;
            if let Some(spec) = &args.overviews {
                crate::server::args::refuse_scaled_statistic(
                    "overviews.resampling",
                    spec.resampling.gdal_name(),
                    &input_facts,
                )?;
                crate::gdal::facts::mask::check_one_validity_mark(
                    &facts::open(&input)?,
                    "input",
                    "gdaladdo (the overviews)",
                )?;
            }
            let bands = input_facts
                .raster
                .as_ref()
                .map(|r| r.band_count)
                .unwrap_or(0);
            // A NaN nodata has no integer to go to: gdal_translate declares 0 and writes the
            // NaN cells as -32768 or 0 (attack round 14, R14-B11: 960 of 1,000 nodata cells
            // became -32768 values beside a declared 0).
            if let Some(t) = args.output_type {
                let nan_nodata = input_facts
                    .raster
                    .as_ref()
                    .is_some_and(|r| r.nodata.iter().any(|n| n.is_some_and(f64::is_nan)));
                if nan_nodata && crate::gdal::raster::warp::integer_range(t.gdal_name()).is_some() {
                    return Err(ToolError::Arguments(format!(
                        "output_type: the input declares NaN as nodata, which {} cannot hold, \
                         and gdal_translate would write its nodata cells as values; write \
                         Float32, or use raster_calc (inputs {{\"a\": this raster}}, expression \"a\", \
                         data_type {}), which \
                         writes nodata cells as the output's nodata",
                        t.gdal_name(),
                        t.gdal_name()
                    )));
                }
            }
            if let Some(value) = args.nodata {
                let dataset = facts::open(&input)?;
                let chosen: Option<Vec<usize>> = args
                    .bands
                    .as_ref()
                    .map(|list| list.iter().map(|b| *b as usize).collect());
                crate::gdal::raster::warp::check_nodata_fits(
                    &dataset,
                    chosen.as_deref(),
                    args.output_type.map(|t| t.gdal_name()),
                    value,
                )?;
            }
            let mut plan = plan_convert(&args, bands)?;
            if let (Some(value), None) = (args.nodata, args.scale) {
                plan.nodata_notes = relabelled_nodata(&input, args.bands.as_deref(), value)?;
            }
            crate::gdal::facts::mask::refuse_mask_lost("input", &input, &plan.format)?;
            plan.nodata_notes
                .extend(check_rescale(&args, &input, &input_facts)?);
            let (declared, note) = rescaled_declarations(&args, &input_facts)?;
            plan.args.extend(declared);
            plan.rescaled = note;
            Ok(Gathered::new(
                CallFacts {
                    datasets: vec![input_facts],
                    ..CallFacts::default()
                },
                (plan, input, output),
            ))
        },
        |(plan, input, output), _work| {
            let request = TranslateRequest {
                input,
                output,
                args: plan.args,
                overviews: plan.overviews,
            };
            let outcome = request.run()?;
            let mut report = json!({ "format": plan.format });
            if let Some(note) = &plan.rescaled {
                report["rescaled"] = json!(note);
            }
            if let Some(levels) = &outcome.overview_levels {
                report["overview_levels"] = json!(levels);
            }
            Ok(RasterOutput {
                written: facts::WrittenRaster::new(
                    &request.output,
                    &outcome.files,
                    outcome.written,
                ),
                commands: outcome.commands,
                warnings: plan.nodata_notes.into_iter().chain(outcome.warnings).collect(),
                report,
                computation: None,
            })
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(arguments: Value) -> Result<Vec<String>, String> {
        crate::gdal::init();
        let mut full = json!({"input": "in.tif", "output": "out.tif"});
        if let (Some(o), Value::Object(extra)) = (full.as_object_mut(), arguments) {
            o.extend(extra);
        }
        let args: ConvertArgs = parse("raster_convert", &full).map_err(|e| e.to_string())?;
        plan_convert(&args, 3)
            .map(|p| p.args)
            .map_err(|e| e.to_string())
    }

    /// Table-driven: typed arguments map onto the options the chosen driver declares, and
    /// impossible combinations are refused before any work, naming the argument.
    #[test]
    fn convert_argument_planning() {
        let ok: &[(Value, &[&str])] = &[
            (json!({}), &["-of", "GTiff"]),
            (
                json!({"compression": "DEFLATE", "predictor": 2, "tiled": true, "block_size": 256}),
                &[
                    "-of",
                    "GTiff",
                    "-co",
                    "COMPRESS=DEFLATE",
                    "-co",
                    "PREDICTOR=2",
                    "-co",
                    "TILED=YES",
                    "-co",
                    "BLOCKXSIZE=256",
                    "-co",
                    "BLOCKYSIZE=256",
                ],
            ),
            (
                json!({"format": "COG", "compression": "ZSTD", "predictor": 3}),
                &[
                    "-of",
                    "COG",
                    "-co",
                    "COMPRESS=ZSTD",
                    "-co",
                    "PREDICTOR=FLOATING_POINT",
                    "-co",
                    "OVERVIEWS=NONE",
                ],
            ),
            (
                json!({"bands": [3, 1], "output_type": "Byte", "scale": [0, 1000, 0, 255]}),
                &[
                    "-of", "GTiff", "-b", "3", "-b", "1", "-ot", "Byte", "-scale", "0", "1000",
                    "0", "255",
                ],
            ),
        ];
        for (arguments, want) in ok {
            let want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
            assert_eq!(plan(arguments.clone()), Ok(want), "{arguments}");
        }
        let refused: &[(Value, &str)] = &[
            (json!({"predictor": 2}), "predictor"),
            (json!({"compression": "JPEG", "predictor": 2}), "predictor"),
            (json!({"max_z_error": 0.5}), "max_z_error"),
            (json!({"format": "COG", "tiled": false}), "tiled"),
            (
                json!({"format": "COG", "overviews": {"resampling": "average", "levels": [2]}}),
                "overviews.levels",
            ),
            (json!({"block_size": 100}), "block_size"),
            (json!({"bands": [4]}), "bands"),
            (json!({"bands": []}), "bands"),
            (json!({"scale": [1, 1, 0, 255]}), "scale"),
            (json!({"format": "NoSuchDriver"}), "format"),
            (
                json!({"compression": "DEFLATE", "creation_options": {"COMPRESS": "LZW"}}),
                "creation_options",
            ),
            (
                json!({"format": "PNG", "compression": "DEFLATE"}),
                "compression",
            ),
        ];
        for (arguments, start) in refused {
            let error = plan(arguments.clone()).err().unwrap_or_default();
            assert!(error.starts_with(start), "{arguments}: {error}");
        }
    }
}
