//! The raster family: `raster_info`, `raster_stats` (read-only, never gated) and the gridding
//! tools `raster_reproject`, `raster_resample`, `raster_overviews` and `raster_terrain`.
//!
//! Each gated tool checks its arguments completely before any work, gathers the facts the
//! domains need, passes the one gated step, and runs the GDAL program that already does the job
//! (`gdalwarp`, `gdaladdo`, `gdaldem`) in process. Results report the equivalent command lines,
//! which reproduce the output exactly.

use super::RasterOutput;
use crate::domains::CallFacts;
use crate::gdal::facts::encoding::{RasterWrite, WriteDriver, WrittenTypes};
use crate::gdal::facts::transform::{self, TransformationFacts};
use crate::gdal::facts::{self, DatasetFacts};
use crate::gdal::programs::{self, number, Program};
use crate::gdal::raster::calc::{CalcInput, CalcRequest};
use crate::gdal::raster::composite::GridRelation;
use crate::gdal::raster::dem::DemRequest;
use crate::gdal::raster::warp::{self, WarpRequest};
use crate::gdal::{policy, raster::info, raster::overviews, raster::stats};
use crate::reflection::lineage::StepSummary;
use crate::server::args::{
    self, band_numbers, check_band, check_grid, check_nodata, driver_options, parse, raster_format,
    Bounds, DataType, Justifications, OverviewResampling, WarpResampling,
};
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated::{self, Computed, Gathered, Step};
use crate::server::tool::{handler, Effect, Family, Schemas, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// raster_info

/// Arguments of `raster_info`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InfoArgs {
    /// Raster inside a workspace (relative paths resolve against the first one).
    pub input: String,
    /// Also compute exact per-band statistics (reads every pixel). Default false.
    #[serde(default)]
    pub stats: bool,
}

/// Result of `raster_info`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct InfoOutput {
    /// The resolved path.
    pub input: String,
    /// The facts the risk domains see for this dataset.
    pub facts: DatasetFacts,
    /// GDAL's own `gdalinfo -json` report.
    pub gdalinfo: Value,
}

/// `raster_info`, as the tool table lists it.
pub const RASTER_INFO: ToolSpec = ToolSpec {
    name: "raster_info",
    family: Family::Raster,
    title: "Raster info",
    verb: "Described",
    description: "Describe a raster: size, bands, types, nodata, CRS, georeferencing \
        (`gdalinfo -json`) plus the facts the methodology domains use. `stats` adds \
        exact per-band statistics.",
    effect: Effect::ReadOnly,
    opens_rasters: true,
    raster_output: None,
    schemas: Schemas::plain::<InfoArgs, InfoOutput>(),
    handler: handler!(info),
};

/// `raster_info`.
pub async fn info(call: Call) -> Result<Value, ToolError> {
    let args: InfoArgs = parse(call.tool, &call.arguments)?;
    let input = call.input_path("input", &args.input)?;
    gated::read_only(&call, move || {
        let dataset = facts::open(&input)?;
        facts::require_raster("input", &input, &dataset)?;
        let facts = facts::from_dataset("input", &input, &dataset)?;
        let gdalinfo = if args.stats {
            drop(dataset);
            info::gdalinfo_json_with_stats(&input)?
        } else {
            info::gdalinfo_json(&dataset, false)?
        };
        Ok(InfoOutput {
            input: input.display().to_string(),
            facts,
            gdalinfo,
        })
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// raster_stats

/// Arguments of `raster_stats`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatsArgs {
    /// Raster inside a workspace.
    pub input: String,
    /// 1-based bands (default: all).
    pub bands: Option<Vec<u32>>,
    /// Percentiles in [0, 100] (default [2, 25, 50, 75, 98]); numpy's linear method.
    pub percentiles: Option<Vec<f64>>,
    /// Histogram bins over [min, max] (default 32; 0 for none).
    pub histogram_bins: Option<u32>,
    /// Read a decimated sample of at most 1,048,576 cells instead of every cell. Default false.
    #[serde(default)]
    pub sample: bool,
    /// Nodata value to use instead of the declared one (e.g. an undeclared -9999).
    pub nodata: Option<f64>,
}

/// Result of `raster_stats`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatsOutput {
    pub input: String,
    /// True when the figures come from a decimated sample.
    pub sampled: bool,
    pub bands: Vec<stats::BandStats>,
}

/// `raster_stats`, as the tool table lists it.
pub const RASTER_STATS: ToolSpec = ToolSpec {
    name: "raster_stats",
    family: Family::Raster,
    title: "Raster statistics",
    verb: "Computed statistics of",
    description: "Per-band statistics in physical values (scale and offset applied): \
        counts, min, max, mean, std, exact percentiles, histogram. `sample` reads at \
        most 2^20 cells.",
    effect: Effect::ReadOnly,
    opens_rasters: true,
    raster_output: None,
    schemas: Schemas::plain::<StatsArgs, StatsOutput>(),
    handler: handler!(statistics),
};

/// `raster_stats`.
pub async fn statistics(call: Call) -> Result<Value, ToolError> {
    let args: StatsArgs = parse(call.tool, &call.arguments)?;
    check_nodata(args.nodata)?;
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
    let input = call.input_path("input", &args.input)?;
    let request = stats::StatsRequest {
        bands: band_numbers(args.bands),
        percentiles,
        nodata: args.nodata,
        histogram_bins: bins,
        sample: args.sample,
    };
    gated::read_only(&call, move || {
        let (bands, sampled) = stats::compute(&input, &request)?;
        Ok(StatsOutput {
            input: input.display().to_string(),
            sampled,
            bands,
        })
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// raster_reproject

/// Arguments of `raster_reproject`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReprojectArgs {
    /// Source raster inside a workspace.
    pub input: String,
    /// Output path inside a workspace; its folder must exist.
    pub output: String,
    /// Target CRS: authority code ("EPSG:32633"), WKT or PROJ string.
    pub dst_crs: String,
    /// Resampling method. No default.
    pub resampling: WarpResampling,
    /// Assign or override the source CRS (only when the file's CRS is missing or wrong).
    pub src_crs: Option<String>,
    /// Output pixel size [x, y] in target CRS units. Excludes `size`.
    pub resolution: Option<[f64; 2]>,
    /// Output size [width, height] in pixels. Excludes `resolution`.
    pub size: Option<[u32; 2]>,
    /// Output extent (`crs` default: `dst_crs`).
    pub bounds: Option<Bounds>,
    /// Nodata value of the output (areas outside the source get it).
    pub nodata: Option<f64>,
    /// When the two CRSs disagree on heights (vertical datum): "convert" shifts the values,
    /// "keep" leaves them. Asked for only then.
    pub heights: Option<Heights>,
    /// GDAL driver of the output. Default "GTiff"; "COG" for cloud-optimised GeoTIFF.
    pub format: Option<String>,
    /// Driver creation options, e.g. {"COMPRESS": "DEFLATE"}.
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    /// Replace an existing output. Default false. Never replaces an input.
    #[serde(default)]
    pub overwrite: bool,
    pub justification: Option<Justifications>,
}

/// What a reprojection does to values when the CRSs disagree on heights.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Heights {
    /// Shift every value from the source's height system to the target's (gdalwarp -vshift).
    Convert,
    /// Leave the values as they are (gdalwarp -novshift).
    Keep,
}

/// Result of `raster_reproject`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReprojectOutput {
    #[serde(flatten)]
    pub written: facts::WrittenRaster,
    /// The equivalent command line; running it gives a pixel-identical output.
    pub gdalwarp_command: Vec<String>,
    /// The coordinate operation PROJ selected, when known.
    pub transformation: Option<TransformationFacts>,
    /// GDAL warnings emitted while warping.
    pub warnings: Vec<String>,
}

impl Step for ReprojectOutput {
    fn commands(&self) -> Vec<Vec<String>> {
        vec![self.gdalwarp_command.clone()]
    }

    fn computation(&self) -> Option<String> {
        None
    }
}

/// Whether the warp shifts values between height systems, settled by the data or by the
/// call's `heights`. gdalwarp (GDAL 3.6) shifts a single band's values when the source and
/// target CRSs disagree on heights, whatever the band holds: a DEM of 100 m in
/// EPSG:32633+5773 warped to EPSG:32633 held 145.92 m, and class 100 of a map in the same CRS
/// became 146, while the facts spoke of a null offset (attack round 5, F9); a DEM of 100 US
/// feet in EPSG:26915+6360 held 30.48 (a unit change, no offset), and one in NAVD88 metres
/// kept 100 over a ballpark vertical while its output called them ellipsoidal heights (attack
/// round 6, R6-C). When the change is not negligible (an offset, a scale, or a ballpark) and
/// the call does not say, the call is refused with both candidates. With `convert`, the
/// second value is the operation gdalwarp runs on the heights (both sides in 3D), to be
/// reported and gated in place of the horizontal one when it is a ballpark.
fn heights_of_warp(
    heights: Option<Heights>,
    dataset: &gdal::Dataset,
    source: &gdal::spatial_ref::SpatialRef,
    target: &gdal::spatial_ref::SpatialRef,
    area: Option<[f64; 4]>,
) -> Result<(Option<bool>, Option<transform::TransformationFacts>), ToolError> {
    let change = || {
        if dataset.raster_count() != 1 {
            return None;
        }
        let extent = facts::raster_extent(dataset)?;
        let centre = ((extent[0] + extent[2]) / 2.0, (extent[1] + extent[3]) / 2.0);
        transform::vertical_shift(source, target, centre, area, true)
    };
    match heights {
        Some(Heights::Keep) => return Ok((Some(false), None)),
        Some(Heights::Convert) => {
            refuse_shift_of_stored_values(dataset)?;
            let ballpark = change().filter(|c| c.ballpark).and_then(|c| c.operation);
            return Ok((Some(true), ballpark));
        }
        None => {}
    }
    let Some(change) = change().filter(|c| c.matters()) else {
        return Ok((None, None));
    };
    let (from, to) = (&change.from, &change.to);
    let what = if (change.scale - 1.0).abs() > 1e-6 {
        format!(
            "would turn every value of this band v into {:.7} x v {:+.2} (a value of 100 \
             becomes {:.3}, at the raster's centre), whatever it holds",
            change.scale,
            change.offset,
            change.apply(100.0)
        )
    } else if change.offset.abs() >= 0.001 {
        format!(
            "would shift every value of this band by {:+.2} (at the raster's centre), \
             whatever it holds",
            change.offset
        )
    } else {
        "would leave every value of this band as it is while the output's CRS calls them \
         heights of the target's system"
            .to_string()
    };
    let ballpark = if change.ballpark {
        " PROJ has no model of the separation between these height systems here (a ballpark \
         vertical transformation, reported as one: install the geoid grid, e.g. with \
         projsync, for a real conversion), so \"convert\" leaves the separation out while the \
         output's CRS says the heights are in the target's system."
    } else {
        ""
    };
    Err(ToolError::Gdal(crate::gdal::GdalError::Conflict {
        message: format!(
            "heights: the input's values are heights in {from} and the target's are {to}: \
             gdalwarp {what}.{ballpark} Pass heights: \"convert\" to change them (right for \
             elevations that must follow the target's height system), or heights: \"keep\" to \
             leave the values as they are (right for anything that is not a height, such as \
             classes; the output's CRS then names no vertical datum). To keep the vertical \
             datum, name it in dst_crs as a compound CRS (e.g. \"EPSG:32633+5773\")."
        ),
        parameter: "heights".to_string(),
        candidates: serde_json::json!([
            {"heights": "keep", "value_change_m": 0.0, "value_100_becomes": 100.0},
            {"heights": "convert", "value_change_m": change.offset, "scale": change.scale,
             "value_100_becomes": change.apply(100.0), "ballpark": change.ballpark},
        ]),
    }))
}

/// gdalwarp's `-vshift` adds the separation between height systems to the stored values,
/// not to the heights a scale and offset make of them: an Int16 DEM of decimetres (scale 0.1)
/// at 100.0 m became 104.7 m where 147.248 is right (attack round 16, R16-B10). Refused,
/// naming the way out, as for the statistics gdalwarp computes on raw values.
fn refuse_shift_of_stored_values(dataset: &gdal::Dataset) -> Result<(), ToolError> {
    let Ok(band) = dataset.rasterband(1) else {
        return Ok(());
    };
    let (scale, offset) = (band.scale().unwrap_or(1.0), band.offset().unwrap_or(0.0));
    if scale == 1.0 && offset == 0.0 {
        return Ok(());
    }
    Err(ToolError::Arguments(format!(
        "heights: band 1 declares scale {scale} and offset {offset} (height = stored x scale + \
         offset); gdalwarp adds the separation between the height systems to the stored values, \
         not to the heights, so every converted height would be wrong. Convert the band to \
         heights first (raster_calc with data_type Float32), then reproject that with heights: \
         \"convert\""
    )))
}

/// The unit to declare on band 1 after gdalwarp converted its heights to the target's height
/// system, when the input's band declares one (gdalwarp keeps the input's: R16-B9); `None`
/// when the band declares none (heights in metres on both sides).
fn converted_heights_unit(
    dataset: &gdal::Dataset,
    target: &gdal::spatial_ref::SpatialRef,
) -> Option<String> {
    let declared = dataset.rasterband(1).ok()?.unit();
    if declared.trim().is_empty() {
        return None;
    }
    Some(match facts::crs_facts(target).vertical_unit {
        Some((unit, metres)) if (metres - 1.0).abs() > 1e-9 => unit,
        _ => "m".to_string(),
    })
}

/// Every method but nearest computes new cells from neighbours (or picks an extreme), so an
/// undeclared -9999 would spread into them: refused until the nodata is declared.
fn refuse_sentinels_for_warp(request: &WarpRequest, input: &DatasetFacts) -> Result<(), ToolError> {
    if request.resampling == "near" {
        return Ok(());
    }
    let computation = format!("{} resampling", request.resampling);
    Ok(facts::refuse_undeclared_sentinels(
        input,
        None,
        &computation,
    )?)
}

/// `raster_reproject`, as the tool table lists it.
pub const RASTER_REPROJECT: ToolSpec = ToolSpec {
    name: "raster_reproject",
    family: Family::Raster,
    title: "Reproject raster",
    verb: "Reprojected",
    description: "Reproject and/or regrid a raster with gdalwarp, through the most \
        accurate PROJ operation available (reported, with the gdalwarp command). Gated \
        by crs_datum and resampling.",
    effect: Effect::Writes,
    opens_rasters: true,
    raster_output: Some(RasterWrite {
        driver: WriteDriver::FormatArgument,
        written: WrittenTypes::InputBands,
    }),
    schemas: Schemas::gated::<ReprojectArgs, ReprojectOutput>(),
    handler: handler!(reproject),
};

/// `raster_reproject`: validate, gather facts, gate, warp.
pub async fn reproject(call: Call) -> Result<Value, ToolError> {
    let args: ReprojectArgs = parse(call.tool, &call.arguments)?;
    check_grid(args.resolution, args.size, false)?;
    check_output_size(args.size)?;
    if let Some(b) = &args.bounds {
        b.check("bounds")?;
    }
    check_nodata(args.nodata)?;
    let options = driver_options("creation_options", &args.creation_options)?;
    let (input, output) = call.input_and_output(&args.input, &args.output, args.overwrite)?;
    let mut request = WarpRequest {
        input,
        output,
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
        src_nodata_nan: false,
        output_type: None,
        format: raster_format(args.format.as_deref(), &args.output)?,
        creation_options: options,
        coordinate_operation: None,
        vertical_shift: None,
        target_aligned: false,
        heights_unit: None,
    };
    let dst_crs = args.dst_crs;
    let heights = args.heights;
    gated::run(
        &call,
        args.justification,
        move || {
            facts::check_raster_format(&request.format, &request.creation_options)?;
            let target = facts::parse_crs("dst_crs", &dst_crs)?;
            let assigned_given = request.src_crs.is_some();
            let assigned = match &request.src_crs {
                Some(definition) => Some(facts::parse_crs("src_crs", definition)?),
                None => None,
            };
            if let Some((_, Some(crs))) = &request.bounds {
                facts::parse_crs("bounds.crs", crs)?;
            }
            let dataset = facts::open(&request.input)?;
            facts::require_raster("input", &request.input, &dataset)?;
            let input_facts = facts::from_dataset("input", &request.input, &dataset)?;
            refuse_sentinels_for_warp(&request, &input_facts)?;
            args::refuse_scaled_statistic("resampling", &request.resampling, &input_facts)?;
            // NaN cells are no values: an interpolating method spread them over their
            // neighbours (attack round 17, R17-B12).
            programs::check_signed_bytes(&Program::Warp, &dataset, &[])?;
            facts::mask::check_one_validity_mark(&dataset, "input", "gdalwarp")?;
            request.src_nodata_nan = warp::nan_marks_nodata(&dataset);
            let Some(source) = assigned.or_else(|| dataset.spatial_ref().ok()) else {
                return Err(ToolError::Arguments(
                    "input: the raster has no CRS, so it cannot be reprojected; if you know its \
                     CRS, pass it as src_crs (the crs_datum domain will ask you to justify that \
                     assumption)"
                        .to_string(),
                ));
            };
            let area = facts::raster_extent(&dataset)
                .and_then(|extent| transform::lonlat_bounds(&source, extent));
            let transformation = transform::facts(&source, &target, area);
            // Right by default: a more accurate operation than GDAL's own pick goes to GDAL
            // explicitly, and the result reports both.
            request.coordinate_operation = transformation
                .as_ref()
                .and_then(|t| t.explicit_pipeline())
                .map(str::to_string);
            let reprojects = assigned_given || !transform::same_crs(&source, &target);
            let (bounds_facts, bounds_move) = move_bounds(
                &mut request,
                &source,
                &target,
                reprojects,
                transformation.as_ref(),
            )?;
            check_warp_output(&request, &dataset, &source, &target)?;
            let widened = request.widen_sum(&dataset, |r| {
                reproject_weight(r, &dataset, &source, &target)
            })?;
            // Right by default: the cells outside the source get a nodata the data cannot
            // hold, not gdalwarp's 0 (R13-B3, R14-B1, R14-B2).
            // Bounds inside the raster's own extent reach no cell outside it (attack round
            // 14, R14-B23: a crop of an RGB image inside its extent was refused as "values fill
            // Byte's whole range ... pass nodata").
            let bounds_outside = match (&request.bounds, facts::raster_extent(&dataset)) {
                (None, _) => false,
                (Some((b, crs)), Some(e))
                    if !reprojects
                        && crs.as_deref().is_none_or(|c| {
                            facts::parse_crs("bounds.crs", c)
                                .is_ok_and(|f| transform::same_crs(&f, &source))
                        }) =>
                {
                    b[0] < e[0] || b[1] < e[1] || b[2] > e[2] || b[3] > e[3]
                }
                _ => true,
            };
            let reaches = reprojects || bounds_outside || rotated(&dataset);
            // A resolution alone for a new CRS: the grid grows to cover the whole footprint
            // in multiples of it (R15-B20: 3.1 % of a count raster was cut off).
            request.target_aligned =
                reprojects && request.resolution.is_some() && request.bounds.is_none();
            let filled = choose_fill(&mut request, &dataset, reaches)?;
            let (shift, vertical) = heights_of_warp(heights, &dataset, &source, &target, area)?;
            request.vertical_shift = shift;
            if shift == Some(true) {
                request.heights_unit = converted_heights_unit(&dataset, &target);
            }
            // Converting heights over a ballpark vertical: that operation is what the gate
            // and the result must see (attack round 6, R6-C).
            let transformation = vertical.or(transformation);
            let source_facts = facts::crs_facts(&source);
            let summary = StepSummary {
                resampling: Some(request.resampling.clone()),
                crs_change: Some(format!(
                    "{} -> {dst_crs}",
                    source_facts.id.unwrap_or(source_facts.name)
                )),
                ..StepSummary::default()
            };
            let on_grid = on_input_grid(&request, &dataset, reprojects);
            let facts = CallFacts {
                datasets: std::iter::once(input_facts).chain(bounds_facts).collect(),
                // The raster's own CRS spelled another way (a PROJ string, ESRI:102100 for
                // EPSG:3857) is no change of CRS: the domains see the raster's own (attack
                // round 14, R14-B13: a required `crs_change`, and for Web Mercator a critical
                // `target_distortion`, on a call that changed no cell).
                target_crs: Some(facts::crs_facts(if reprojects { &target } else { &source })),
                grids: on_grid.then_some(GridRelation::Aligned),
                // A window on the raster's own CRS moves only its bounds: that move is what
                // crs_datum judges (attack round 9, R9-13).
                transformation: bounds_move.or_else(|| transformation.clone()),
                measurement: reprojects
                    .then(|| crate::gdal::vector::measure::reprojection_facts(&target, area))
                    .flatten(),
                ..CallFacts::default()
            };
            Ok(
                Gathered::new(facts, (request, transformation, widened, filled))
                    .summarising(summary),
            )
        },
        |(request, transformation, widened, filled), _work| {
            let outcome = request.run()?;
            let filled = filled.and_then(|fill| fill_note(&fill, &request.output));
            Ok(ReprojectOutput {
                written: facts::WrittenRaster::new(
                    &request.output,
                    &outcome.files,
                    outcome.written,
                ),
                gdalwarp_command: request.command_line(),
                transformation,
                // The result has no report: the widened type is said with the warnings.
                warnings: widened
                    .map(|w| w.note())
                    .into_iter()
                    .chain(filled)
                    .chain(outcome.warnings)
                    .collect(),
            })
        },
    )
    .await
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
    /// Resampling method. No default.
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
    pub justification: Option<Justifications>,
}

/// `raster_resample`, as the tool table lists it.
pub const RASTER_RESAMPLE: ToolSpec = ToolSpec {
    name: "raster_resample",
    family: Family::Raster,
    title: "Resample a raster",
    verb: "Resampled",
    description: "Change a raster's resolution or pixel count without changing its CRS \
        (gdalwarp). Gated by resampling.",
    effect: Effect::Writes,
    opens_rasters: true,
    raster_output: Some(RasterWrite {
        driver: WriteDriver::FormatArgument,
        written: WrittenTypes::InputBands,
    }),
    schemas: Schemas::gated::<ResampleArgs, super::RasterOutput>(),
    handler: handler!(resample),
};

/// `raster_resample`: GDALWarp without a CRS change.
pub async fn resample(call: Call) -> Result<Value, ToolError> {
    let args: ResampleArgs = parse(call.tool, &call.arguments)?;
    check_grid(args.resolution, args.size, true)?;
    check_output_size(args.size)?;
    check_nodata(args.nodata)?;
    let options = driver_options("creation_options", &args.creation_options)?;
    let (input, output) = call.input_and_output(&args.input, &args.output, args.overwrite)?;
    let mut request = WarpRequest {
        input,
        output,
        dst_crs: None,
        src_crs: None,
        resampling: args.resampling.gdal_name().to_string(),
        resolution: args.resolution.map(|[x, y]| (x, y)),
        size: args.size.map(|[w, h]| (w, h)),
        bounds: None,
        dst_nodata: args.nodata,
        src_nodata_nan: false,
        output_type: None,
        format: raster_format(args.format.as_deref(), &args.output)?,
        creation_options: options,
        coordinate_operation: None,
        vertical_shift: None,
        target_aligned: false,
        heights_unit: None,
    };
    gated::run(
        &call,
        args.justification,
        move || {
            facts::check_raster_format(&request.format, &request.creation_options)?;
            let dataset = facts::open(&request.input)?;
            facts::require_raster("input", &request.input, &dataset)?;
            if let (Some((rx, ry)), Some([xmin, ymin, xmax, ymax])) =
                (request.resolution, facts::raster_extent(&dataset))
            {
                // The warp keeps the raster's CRS and extent: its cells are the default.
                if let (Ok(srs), Ok(gt)) = (dataset.spatial_ref(), dataset.geo_transform()) {
                    check_resolution_cells(
                        (rx, ry),
                        [xmin, ymin, xmax, ymax],
                        (gt[1].abs(), gt[5].abs()),
                        &srs,
                        None,
                    )?;
                }
                let cols = ((xmax - xmin) / rx).ceil().max(1.0) as u64;
                let rows = ((ymax - ymin) / ry).ceil().max(1.0) as u64;
                policy::check_cells("resolution", cols, rows, dataset.raster_count() as u64)?;
            }
            let input_facts = facts::from_dataset("input", &request.input, &dataset)?;
            refuse_sentinels_for_warp(&request, &input_facts)?;
            args::refuse_scaled_statistic("resampling", &request.resampling, &input_facts)?;
            // NaN cells are no values, and bands that declare different nodata values get one
            // the data cannot hold (attack round 17, R17-B12, R17-B14).
            programs::check_signed_bytes(&Program::Warp, &dataset, &[])?;
            facts::mask::check_one_validity_mark(&dataset, "input", "gdalwarp")?;
            request.src_nodata_nan = warp::nan_marks_nodata(&dataset);
            if request.dst_nodata.is_none() && warp::bands_disagree_on_nodata(&dataset) {
                request.dst_nodata = warp::fill_nodata(&request.input, &dataset, None)?.value();
            }
            let widened = request.widen_sum(&dataset, |r| resample_weight(r, &dataset))?;
            // A resolution that does not divide the extent: gdalwarp rounds the number of
            // cells to the nearest, so rounding down cut the last strip off (R15-B20: a sum
            // of 100,000 over 1000 m resampled to 300 m kept 81,000). The grid is given the
            // raster's origin and whole cells past its far edges instead.
            if !rotated(&dataset) {
                if let (Some((rx, ry)), Some([xmin, ymin, xmax, ymax])) =
                    (request.resolution, facts::raster_extent(&dataset))
                {
                    let cells = |extent: f64, res: f64| (extent / res - 1e-9).ceil().max(1.0);
                    let (cols, rows) = (cells(xmax - xmin, rx), cells(ymax - ymin, ry));
                    let whole = |n: f64, extent: f64, res: f64| n * res <= extent * (1.0 + 1e-9);
                    if !(whole(cols, xmax - xmin, rx) && whole(rows, ymax - ymin, ry)) {
                        request.bounds =
                            Some(([xmin, ymax - rows * ry, xmin + cols * rx, ymax], None));
                    }
                }
            }
            // A rotated raster is regridded north-up round its footprint: the corners reach
            // outside it (R14-B1). A resolution that does not divide the extent makes gdalwarp
            // round the grid up past the raster's edge, `(int)((extent + res / 2) / res)`
            // cells (R14-B12: an 11 x 11 raster to twice its cell size had its last row and
            // column written 0). A masked raster leaves the cells wholly under its mask
            // without a value (R14-B14: written 0, mean 70 where the data is 100).
            let beyond = match (request.resolution, facts::raster_extent(&dataset)) {
                (Some((rx, ry)), Some([xmin, ymin, xmax, ymax])) => {
                    let past = |extent: f64, res: f64| {
                        let cells = (extent / res - 1e-9).ceil().max(1.0);
                        cells * res > extent * (1.0 + 1e-9)
                    };
                    past(xmax - xmin, rx) || past(ymax - ymin, ry)
                }
                _ => false,
            };
            let masked = crate::gdal::facts::mask::any_band_masked(&dataset);
            let filled = choose_fill(
                &mut request,
                &dataset,
                rotated(&dataset) || beyond || masked,
            )?;
            let summary = StepSummary {
                resampling: Some(request.resampling.clone()),
                ..StepSummary::default()
            };
            let on_grid = on_input_grid(&request, &dataset, false);
            Ok(Gathered::new(
                CallFacts {
                    datasets: vec![input_facts],
                    grids: on_grid.then_some(GridRelation::Aligned),
                    ..CallFacts::default()
                },
                (request, widened, filled),
            )
            .summarising(summary))
        },
        |(request, widened, filled), _work| {
            let outcome = request.run()?;
            Ok(RasterOutput {
                written: facts::WrittenRaster::new(
                    &request.output,
                    &outcome.files,
                    outcome.written,
                ),
                commands: vec![request.command_line()],
                warnings: filled
                    .and_then(|fill| fill_note(&fill, &request.output))
                    .into_iter()
                    .chain(outcome.warnings)
                    .collect(),
                report: widened.map_or(Value::Null, |w| json!({ "output_type": w.note() })),
                computation: None,
            })
        },
    )
    .await
}

/// Whether `dataset`'s geotransform has rotation terms: gdalwarp writes a north-up grid round
/// its footprint, whose corners lie outside the source (attack round 14, R14-B1).
fn rotated(dataset: &gdal::Dataset) -> bool {
    dataset
        .geo_transform()
        .is_ok_and(|gt| crate::gdal::facts::georef::is_rotated(&gt, dataset.raster_size()))
}

/// Refuse a `nodata` the call gives for the cells outside the source when an integer band that
/// declares none holds that value: those cells and the fill would be one (attack round 14,
/// R14-B19: `nodata: 0` on a 0..255 Byte image made 119 valid 0-cells nodata, silently). Counted
/// exactly ([`crate::gdal::raster::stats::cells_holding`]).
fn refuse_nodata_in_the_data(dataset: &gdal::Dataset, value: f64) -> Result<(), ToolError> {
    if !value.is_finite() || value.fract() != 0.0 {
        return Ok(());
    }
    for index in 1..=dataset.raster_count() {
        let Ok(band) = dataset.rasterband(index) else {
            continue;
        };
        let integer = warp::integer_range(&crate::gdal::facts::band_type_name(&band))
            .is_some_and(|(low, high)| (low..=high).contains(&value));
        if crate::gdal::facts::nodata::band_nodata(&band).is_some() || !integer {
            continue;
        }
        let count = crate::gdal::raster::stats::cells_holding(&band, value).unwrap_or(0);
        if count > 0 {
            return Err(ToolError::Arguments(format!(
                "nodata: {} is a value of band {index} ({count} cells hold it), so the cells \
                 outside the source and those cells would read alike; choose a value the data \
                 does not hold (a band whose values fill its type has none: convert it to a \
                 wider type first, raster_convert with output_type Int16, and pass nodata -1)",
                number(value)
            )));
        }
    }
    Ok(())
}

/// The fill of the output's cells outside the source when the grid `reaches` outside it and the
/// call passed no `nodata` ([`warp::fill_nodata`]), set as the request's `-dstnodata`.
fn choose_fill(
    request: &mut WarpRequest,
    dataset: &gdal::Dataset,
    reaches: bool,
) -> Result<Option<warp::OutsideFill>, ToolError> {
    if let Some(value) = request.dst_nodata {
        warp::check_nodata_fits(dataset, None, request.output_type.as_deref(), value)?;
    }
    if let (Some(value), true) = (request.dst_nodata, reaches) {
        refuse_nodata_in_the_data(dataset, value)?;
    }
    if request.dst_nodata.is_some() || !reaches {
        return Ok(None);
    }
    let fill = warp::fill_nodata(&request.input, dataset, request.output_type.as_deref())?;
    request.dst_nodata = fill.value();
    // The format must declare it, or the fill is data (GS7BG writes its own fixed nodata,
    // XYZ none: attack round 14, R14-B8). NaN is no value whatever is declared.
    if let Some(value) = fill.value().filter(|v| !v.is_nan()) {
        let data_type = match &request.output_type {
            Some(t) => t.clone(),
            None => dataset
                .rasterband(1)
                .map(|band| crate::gdal::facts::band_type_name(&band))
                .unwrap_or_default(),
        };
        // GDAL 3.6 copies a 64-bit integer nodata only through its own API: the probe cannot
        // tell, and gdalwarp declares ±2^53 on GTiff.
        let probed = (!matches!(data_type.as_str(), "Int64" | "UInt64"))
            .then(|| warp::nodata_read_back(&request.format, &data_type, value))
            .flatten();
        if let Some(read) = probed {
            if read != Some(value) {
                return Err(ToolError::Arguments(format!(
                    "format: the input declares no nodata, so the output's cells no source cell \
                     reaches (outside the source's footprint on the new grid) need one: {} \
                     written by {} in {data_type} would be data, since {} declares {} (read \
                     back from a file it wrote); write GTiff (or HFA), which declares it",
                    number(value),
                    request.format,
                    request.format,
                    read.map_or("no nodata".to_string(), |v| if v.abs() >= 1e15 {
                        format!("only nodata {v:e}")
                    } else {
                        format!("only nodata {}", number(v))
                    })
                )));
            }
        }
    }
    Ok(Some(fill))
}

/// The sentence of `fill` for the warnings, once the output's nodata is read back: a fill the
/// output does not declare is said as data (R14-B8: "declared" was said of a GS7BG output that
/// declares its own fixed nodata).
fn fill_note(fill: &warp::OutsideFill, output: &std::path::Path) -> Option<String> {
    let Some(value) = fill.value() else {
        return fill.note();
    };
    let declared = facts::open(output)
        .ok()
        .and_then(|d| d.rasterband(1).ok()?.no_data_value());
    match declared {
        Some(v) if v == value || (v.is_nan() && value.is_nan()) => fill.note(),
        // NaN cells are no value whatever the output declares.
        _ if value.is_nan() => fill.note(),
        other => Some(format!(
            "the input declares no nodata: the output's cells no source cell reaches hold {}, \
             but the output declares {}, so they read as data; write GTiff, which declares it",
            number(value),
            other.map_or("no nodata".to_string(), |v| format!("nodata {}", number(v)))
        )),
    }
}

/// Whether a warp's output grid is the input's grid or a window of it, so that no cell value
/// is computed whatever the method: the same CRS, a north-up input, the input's cell size
/// (given as `resolution`, or kept by gdalwarp: square cells and a `bounds` a whole number of
/// cells across), and `bounds` whose corner lies a whole number of cells from the input's
/// origin (attack round 13, R13-B9: a clip of a DEM to an area on its own grid, nearest, was
/// asked to justify resampling continuous data, with 0 cells changed).
fn on_input_grid(request: &WarpRequest, dataset: &gdal::Dataset, reprojects: bool) -> bool {
    if reprojects || request.size.is_some() {
        return false;
    }
    let Ok(gt) = dataset.geo_transform() else {
        return false;
    };
    if crate::gdal::facts::georef::is_rotated(&gt, dataset.raster_size())
        || gt[1] <= 0.0
        || gt[5] == 0.0
    {
        return false;
    }
    let (px, py) = (gt[1], gt[5].abs());
    // A south-up raster (gt[5] > 0) is written north-up: its rows count from its top edge
    // (attack round 14, R14-B6).
    let top = if gt[5] < 0.0 {
        gt[3]
    } else {
        gt[3] + gt[5] * dataset.raster_size().1 as f64
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
    let whole = |length: f64, cell: f64| {
        let n = length / cell;
        (n - n.round()).abs() <= 1e-6
    };
    match request.resolution {
        Some((rx, ry)) if close(rx.abs(), px) && close(ry.abs(), py) => {}
        None if close(px, py) => {}
        _ => return false,
    }
    // Bounds in the raster's own CRS are bounds without one (R14-B6), by the test that
    // decides whether the call reprojects.
    let own_crs = |definition: &str| {
        facts::parse_crs("bounds.crs", definition)
            .ok()
            .zip(dataset.spatial_ref().ok())
            .is_some_and(|(from, own)| transform::same_crs(&from, &own))
    };
    match &request.bounds {
        None => true,
        Some((_, Some(definition))) if !own_crs(definition) => false,
        Some(([xmin, ymin, xmax, ymax], _)) => {
            let kept =
                request.resolution.is_some() || (whole(xmax - xmin, px) && whole(ymax - ymin, py));
            kept && whole(xmin - gt[0], px) && whole(top - ymax, py)
        }
    }
}

/// The most input cells one output cell of a reprojection adds: counted where it is largest
/// on the grid gdalwarp will write ([`warp::most_source_cells`]), since a reprojection changes
/// scale across the raster (EPSG:4326 over 0..80° N to EPSG:3857 at the default grid: 3.01
/// source cells per output cell at 80° N, where the ratio of the grids' cell areas said 1.0,
/// and a Byte sum was clipped at 255: attack round 12, R12-1). The grid: the extent of
/// `bounds` (moved into the target CRS) or of gdalwarp's suggested output, at `resolution`,
/// at the extent over `size`, or at the suggested resolution. Unknown: infinite (the widest
/// type is written).
fn reproject_weight(
    request: &WarpRequest,
    dataset: &gdal::Dataset,
    source: &gdal::spatial_ref::SpatialRef,
    target: &gdal::spatial_ref::SpatialRef,
) -> f64 {
    let Some((source_wkt, target_wkt)) = source.to_wkt().ok().zip(target.to_wkt().ok()) else {
        return f64::INFINITY;
    };
    let Some((gt, cols, rows)) = warp::suggested_output(dataset, &source_wkt, &target_wkt) else {
        return f64::INFINITY;
    };
    let suggested = [
        gt[0],
        gt[3] + gt[5] * rows as f64,
        gt[0] + gt[1] * cols as f64,
        gt[3],
    ];
    let [xmin, ymin, xmax, ymax] = match &request.bounds {
        Some((rect, None)) => *rect,
        Some((rect, Some(definition))) => facts::parse_crs("bounds.crs", definition)
            .ok()
            .and_then(|from| transform::transform_bounds(&from, target, *rect))
            .unwrap_or(*rect),
        None => suggested,
    };
    let (width, height) = ((xmax - xmin).abs(), (ymax - ymin).abs());
    let (rx, ry) = match (request.resolution, request.size) {
        (Some((rx, ry)), _) => (rx.abs(), ry.abs()),
        (None, Some((w, h))) if w > 0 && h > 0 => (width / f64::from(w), height / f64::from(h)),
        _ => (gt[1].abs(), gt[5].abs()),
    };
    if !(rx > 0.0 && ry > 0.0 && width.is_finite() && height.is_finite()) {
        return f64::INFINITY;
    }
    let grid = [xmin.min(xmax), rx, 0.0, ymin.max(ymax), 0.0, -ry];
    let (cols, rows) = (
        (width / rx).ceil().max(1.0) as u64,
        (height / ry).ceil().max(1.0) as u64,
    );
    warp::most_source_cells(dataset, &source_wkt, &target_wkt, grid, cols, rows)
        .unwrap_or(f64::INFINITY)
}

/// The most input cells one output cell of a regridding adds: the ratio of the output cell's
/// area to the input cell's (gdalwarp weighs the cells an output cell's edge cuts by the part
/// covered, so a 45 m cell over 30 m cells adds 2.25 of them).
fn resample_weight(request: &WarpRequest, dataset: &gdal::Dataset) -> f64 {
    let Ok(gt) = dataset.geo_transform() else {
        return f64::INFINITY;
    };
    let (sx, sy) = (gt[1].abs(), gt[5].abs());
    let target = match (
        request.resolution,
        request.size,
        facts::raster_extent(dataset),
    ) {
        (Some((rx, ry)), _, _) => Some((rx.abs(), ry.abs())),
        (None, Some((w, h)), Some([xmin, ymin, xmax, ymax])) if w > 0 && h > 0 => {
            Some(((xmax - xmin) / f64::from(w), (ymax - ymin) / f64::from(h)))
        }
        _ => None,
    };
    match target {
        Some((rx, ry)) if sx > 0.0 && sy > 0.0 => (rx / sx) * (ry / sy),
        _ => f64::INFINITY,
    }
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
    /// external `<input>.ovr` beside the input.
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
    pub justification: Option<Justifications>,
}

/// `raster_overviews`, as the tool table lists it.
pub const RASTER_OVERVIEWS: ToolSpec = ToolSpec {
    name: "raster_overviews",
    family: Family::Raster,
    title: "Build overviews",
    verb: "Built overviews for",
    description: "Build overviews (gdaladdo) as an external `<input>.ovr` (the input is \
        not modified) or into a new GeoTIFF `output`. Gated by resampling.",
    effect: Effect::Writes,
    opens_rasters: true,
    raster_output: Some(RasterWrite {
        driver: WriteDriver::GTiffWithOutput,
        written: WrittenTypes::InputBands,
    }),
    schemas: Schemas::gated::<OverviewsArgs, super::RasterOutput>(),
    handler: handler!(build_overviews),
};

/// `raster_overviews`: gdaladdo into an external `.ovr` or a new GeoTIFF.
pub async fn build_overviews(call: Call) -> Result<Value, ToolError> {
    let args: OverviewsArgs = parse(call.tool, &call.arguments)?;
    if let Some(levels) = &args.levels {
        overviews::check_levels(levels)?;
    }
    let options = driver_options("creation_options", &args.creation_options)?;
    let input = call.input_path("input", &args.input)?;
    let output = match &args.output {
        Some(raw) => Some(call.output_path("output", raw, args.overwrite, &[&input])?),
        None => {
            if !options.is_empty() {
                return Err(ToolError::Arguments(
                    "creation_options: apply only with `output` (a new GeoTIFF); an external \
                     .ovr takes none"
                        .to_string(),
                ));
            }
            let sidecar = ovr_path(&input);
            call.declare_output(&sidecar);
            if sidecar.exists() && !args.overwrite {
                return Err(ToolError::Arguments(format!(
                    "{} already exists; pass \"overwrite\": true to rebuild it",
                    sidecar.display()
                )));
            }
            None
        }
    };
    let method = args.resampling.gdal_name().to_string();
    let checked_method = method.clone();
    let levels = args.levels;
    gated::run(
        &call,
        args.justification,
        move || {
            facts::check_raster_format("GTiff", &options)?;
            let input_facts = facts::gather_raster("input", &input)?;
            facts::check_raster_cells("input", &input_facts)?;
            args::refuse_scaled_statistic("resampling", &checked_method, &input_facts)?;
            // gdaladdo takes no source nodata: NaN cells of a raster that declares none turned
            // every overview cell they touch into NaN under `average` (attack round 17,
            // R17-B12). Refused, naming the declaration that lets GDAL leave them out.
            let reduces = !matches!(checked_method.as_str(), "nearest" | "near" | "mode");
            // GDALBuildOverviews averages the stored bytes of a signed-byte band: found before
            // the gate (attack round 20, R20-B1).
            let source = facts::open(&input)?;
            facts::mask::check_one_validity_mark(&source, "input", "gdaladdo")?;
            let signed = facts::negative_signed_byte_bands(&source);
            drop(source);
            if reduces && !signed.is_empty() {
                return Err(ToolError::Arguments(format!(
                    "input: band(s) {signed:?} declare PIXELTYPE=SIGNEDBYTE and hold negative \
                     values (-128..-1, stored as 128..255), and {checked_method} overviews \
                     would be computed from the stored bytes; copy it first with raster_calc \
                     (expression \"a\", data_type Int16), or build `nearest` overviews"
                )));
            }
            if reduces && warp::nan_marks_nodata(&facts::open(&input)?) {
                return Err(ToolError::Arguments(format!(
                    "input: it holds NaN cells and declares no nodata, so {checked_method} \
                     overviews would turn every overview cell a NaN touches into NaN; declare \
                     NaN as its nodata first (raster_calc with inputs {{\"a\": this raster}}, \
                     expression \"a\" and data_type Float32 writes a copy that declares it), \
                     or build `nearest` overviews"
                )));
            }
            if output.is_none() {
                let source = facts::open(&input)?;
                let internal = source
                    .rasterband(1)
                    .ok()
                    .and_then(|b| b.overview_count().ok())
                    .is_some_and(|n| n > 0)
                    && !ovr_path(&input).exists();
                if internal {
                    return Err(ToolError::Arguments(
                        "input: the raster already has internal overviews, and GDAL cannot add \
                         an external .ovr beside them; pass `output` to rebuild them into a \
                         new GeoTIFF"
                            .to_string(),
                    ));
                }
            }
            Ok(Gathered::new(
                CallFacts {
                    datasets: vec![input_facts],
                    ..CallFacts::default()
                },
                (input, output, options),
            ))
        },
        move |(input, output, options), _work| {
            let source = facts::open(&input)?;
            let (w, h) = source.raster_size();
            let levels = levels.unwrap_or_else(|| overviews::auto_levels(w, h));
            if levels.is_empty() {
                return Err(ToolError::Arguments(format!(
                    "levels: the raster is only {w}x{h} pixels, so gdaladdo's automatic levels \
                     are empty; give `levels` (e.g. [2, 4]) to build overviews anyway"
                )));
            }
            let level_args: Vec<String> = levels.iter().map(u32::to_string).collect();
            let addo = |target: &Path, read_only: bool| {
                let mut line = vec!["gdaladdo".to_string()];
                if read_only {
                    line.push("-ro".to_string());
                }
                line.extend(["-r".to_string(), method.clone()]);
                line.push(target.display().to_string());
                line.extend(level_args.iter().cloned());
                line
            };
            match output {
                Some(output) => {
                    let mut argv = vec!["-of".to_string(), "GTiff".to_string()];
                    for (key, value) in &options {
                        argv.extend(["-co".to_string(), format!("{key}={value}")]);
                    }
                    let outcome =
                        programs::run(&Program::Translate, &source, &argv, &output, |s| {
                            overviews::build_into(s, &method, &levels)
                        })?;
                    Ok(RasterOutput {
                        written: facts::WrittenRaster::new(
                            &output,
                            &outcome.files,
                            outcome.written,
                        ),
                        commands: vec![
                            Program::Translate.command_line(&argv, &input, &output),
                            addo(&output, false),
                        ],
                        warnings: outcome.warnings,
                        report: json!({ "overview_levels": levels, "external": false }),
                        computation: None,
                    })
                }
                None => {
                    drop(source);
                    let files = overviews::build_external(&input, &method, &levels)?;
                    let sidecar = files.last().cloned().unwrap_or_else(|| ovr_path(&input));
                    Ok(RasterOutput {
                        written: facts::describe_written(&sidecar, &files, &input)?,
                        commands: vec![addo(&input, true)],
                        warnings: Vec::new(),
                        report: json!({ "overview_levels": levels, "external": true }),
                        computation: None,
                    })
                }
            }
        },
    )
    .await
}

/// The envelope in the lon/lat `target` of the rectangle `rect` in `from` when its edges, moved
/// as drawn, cross ±180°: longitudes made continuous, so that its east edge passes 180°
/// (gdalwarp writes a window of 170 to 190). `None` when it does not cross. Bounds in a
/// Pacific-centred CRS round ±180° were handed to gdalwarp's `-te_srs`, which made them
/// 170 to -170, and the call failed after the gate with "Attempt to create -339x20 dataset"
/// (attack round 23, R23-B19).
fn across_the_antimeridian(
    from: &gdal::spatial_ref::SpatialRef,
    target: &gdal::spatial_ref::SpatialRef,
    rect: [f64; 4],
    pipeline: Option<&str>,
) -> Option<[f64; 4]> {
    let transform = transform::coord_transform(from, target, pipeline).ok()?;
    let [x0, y0, x1, y1] = rect;
    let corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)];
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for w in corners.windows(2) {
        for k in 0..=64 {
            let t = f64::from(k) / 64.0;
            xs.push(w[0].0 + (w[1].0 - w[0].0) * t);
            ys.push(w[0].1 + (w[1].1 - w[0].1) * t);
        }
    }
    let mut zs = vec![0.0; xs.len()];
    transform.transform_coords(&mut xs, &mut ys, &mut zs).ok()?;
    if xs.iter().chain(&ys).any(|v| !v.is_finite()) {
        return None;
    }
    let mut crossed = false;
    for i in 1..xs.len() {
        let step = xs[i] - xs[i - 1];
        if step.abs() > 180.0 {
            crossed = true;
            xs[i] -= 360.0 * step.signum();
        }
    }
    if !crossed {
        return None;
    }
    let west = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let east = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let south = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let north = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // Keep the window's west edge within -180..180.
    let shift = if west < -180.0 { 360.0 } else { 0.0 };
    Some([west + shift, south, east + shift, north])
}

/// `bounds` given in a CRS of their own (`bounds.crs`), moved into the target CRS and named to
/// the domains (attack round 9, R9-13: bounds in NAD27 over Europe went through a ballpark
/// no-op with no question). The move goes through the most accurate operation, as the data's
/// does: when the host found a better one than GDAL's pick, the rectangle is moved here
/// (densified edges, as gdalwarp's `-te_srs`) and passed in the target CRS. Returns the bounds'
/// dataset facts (role `bounds`, their CRS) and, for a call that keeps the raster's CRS (a
/// window, no reprojection), their move as the transformation the gate judges. A reprojection
/// keeps its own transformation there (the record holds one): bounds on a datum the
/// reprojection does not already judge, whose move is a ballpark, of unknown accuracy or
/// outside its area of use, are refused with the fix.
fn move_bounds(
    request: &mut WarpRequest,
    source: &gdal::spatial_ref::SpatialRef,
    target: &gdal::spatial_ref::SpatialRef,
    reprojects: bool,
    reprojection: Option<&TransformationFacts>,
) -> Result<(Option<DatasetFacts>, Option<TransformationFacts>), ToolError> {
    let Some((rect, Some(definition))) = request.bounds.clone() else {
        return Ok((None, None));
    };
    let from = facts::parse_crs("bounds.crs", &definition)?;
    let dataset = Some(Bounds::dataset(&from));
    if transform::same_crs(&from, target) {
        return Ok((dataset, None));
    }
    let area = transform::lonlat_bounds(&from, rect);
    let Some(moved) = transform::facts(&from, target, area) else {
        return Ok((dataset, None));
    };
    if let Some(pipeline) = moved.explicit_pipeline() {
        let envelope = transform::coord_transform(&from, target, Some(pipeline))
            .ok()
            .and_then(|t| transform::bounds_through(&t, &rect))
            .ok_or_else(|| {
                ToolError::Arguments(format!(
                    "bounds: cannot transform the rectangle from {definition} to dst_crs"
                ))
            })?;
        request.bounds = Some((envelope, None));
    }
    if target.is_geographic() {
        if let Some(envelope) =
            across_the_antimeridian(&from, target, rect, moved.explicit_pipeline())
        {
            request.bounds = Some((envelope, None));
        }
    }
    if !reprojects {
        return Ok((dataset, Some(moved)));
    }
    let datum = |srs: &gdal::spatial_ref::SpatialRef| facts::crs_facts(srs).datum;
    let (bounds_datum, target_datum) = (datum(&from), datum(target));
    let across = bounds_datum.is_none() || bounds_datum != target_datum;
    let doubtful = |t: &TransformationFacts| {
        t.used.ballpark || t.used.accuracy_metres.is_none() || t.used.covers_data == Some(false)
    };
    let judged = bounds_datum.is_some()
        && bounds_datum == datum(source)
        && reprojection.is_some_and(doubtful);
    if across && doubtful(&moved) && !judged {
        let why = if moved.used.ballpark {
            "a ballpark operation (datum shift ignored)"
        } else if moved.used.covers_data == Some(false) {
            "an operation outside its area of use"
        } else {
            "an operation without a published accuracy"
        };
        let label = |srs: &gdal::spatial_ref::SpatialRef| {
            let f = facts::crs_facts(srs);
            f.id.unwrap_or(f.name)
        };
        return Err(ToolError::Arguments(format!(
            "bounds: moving the rectangle from {} to the target {} can only use {} ({why}), \
             which would place the output's edges by an unknown error; the call already \
             reprojects the raster, and that transformation is the one the crs_datum domain \
             judges. Give the bounds in the target CRS ({}) or in a CRS on its datum{}.",
            label(&from),
            label(target),
            moved.used.name,
            label(target),
            target_datum.map(|d| format!(" ({d})")).unwrap_or_default()
        )));
    }
    Ok((dataset, None))
}

/// Refuse a reprojection whose output grid (from `size`, or `resolution` and `bounds`, or
/// gdalwarp's own suggestion) exceeds the server's cell budget, before any work: `bounds` far
/// larger than the data made a 40 GB output from a small DEM.
fn check_warp_output(
    request: &WarpRequest,
    dataset: &gdal::Dataset,
    source: &gdal::spatial_ref::SpatialRef,
    target: &gdal::spatial_ref::SpatialRef,
) -> Result<(), ToolError> {
    let bands = dataset.raster_count() as u64;
    if let Some((w, h)) = request.size {
        policy::check_cells("size", u64::from(w), u64::from(h), bands)?;
        return Ok(());
    }
    let (Ok(source_wkt), Ok(target_wkt)) = (source.to_wkt(), target.to_wkt()) else {
        return Ok(());
    };
    let Some((gt, cols, rows)) =
        crate::gdal::raster::warp::suggested_output(dataset, &source_wkt, &target_wkt)
    else {
        return Ok(());
    };
    let (rx, ry) = request.resolution.unwrap_or((gt[1].abs(), gt[5].abs()));
    let extent = match &request.bounds {
        Some((rect, crs)) => {
            let from = match crs {
                Some(definition) => facts::parse_crs("bounds.crs", definition)?,
                None => target.clone(),
            };
            transform::transform_bounds(&from, target, *rect).unwrap_or(*rect)
        }
        None => {
            let (x0, y0) = (gt[0], gt[3]);
            let (x1, y1) = (x0 + gt[1] * cols as f64, y0 + gt[5] * rows as f64);
            [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]
        }
    };
    if !(rx > 0.0 && ry > 0.0) {
        return Ok(());
    }
    if let Some(resolution) = request.resolution {
        let input_cell = dataset.geo_transform().ok().map(|g| {
            let kept = transform::same_crs(source, target);
            (g[1].abs(), unit_of(source), kept)
        });
        check_resolution_cells(
            resolution,
            extent,
            (gt[1].abs(), gt[5].abs()),
            target,
            input_cell,
        )?;
    }
    let out_cols = ((extent[2] - extent[0]) / rx).abs().ceil().max(1.0);
    let out_rows = ((extent[3] - extent[1]) / ry).abs().ceil().max(1.0);
    let clamp = |v: f64| {
        if v.is_finite() {
            v.min(u64::MAX as f64) as u64
        } else {
            u64::MAX
        }
    };
    policy::check_cells("output", clamp(out_cols), clamp(out_rows), bands)?;
    Ok(())
}

/// The unit a CRS measures coordinates in: its angular unit when geographic (`degree`), its
/// linear unit otherwise (`metre`, `US survey foot`).
fn unit_of(srs: &gdal::spatial_ref::SpatialRef) -> String {
    let name = if srs.is_geographic() {
        srs.angular_units_name()
    } else {
        srs.linear_units_name()
    };
    name.unwrap_or_else(|| "unit".to_string())
}

/// How many output cells gdalwarp (GDAL 3.6, `-tr`) makes along an `extent` at `resolution`:
/// `(int)((extent + resolution / 2) / resolution)`, so 0 below half a cell.
fn warp_cells(extent: f64, resolution: f64) -> f64 {
    ((extent.abs() + resolution / 2.0) / resolution).floor()
}

/// Coarser than gdalwarp's own resolution by this factor, in a geographic target reprojected
/// from a CRS measured in another unit, a `resolution` of a degree or more was given in the
/// source's unit (30 for 30 m): no deliberate grid is 10,000 times coarser than the data,
/// and `size` asks for one anyway.
const ABSURD_COARSENING: f64 = 10_000.0;

/// Refuse a `resolution` that makes a grid of 0 cells in either direction over the output's
/// `extent` (gdalwarp's "Attempt to create 0x0 dataset is illegal", after the gate), or, for a
/// geographic target whose unit is not the input's, one [`ABSURD_COARSENING`] times coarser
/// than gdalwarp's own `default` resolution (a resolution in the input's unit), before the
/// gate: naming the argument, the target's unit, the extent in it and a value that works
/// (attack round 13, R13-B7 a). `input_cell`: the input's cell width, its CRS's unit, and
/// whether the target is that CRS. The extent and default are the grid the warp itself
/// will use (gdalwarp's suggested output, or `bounds` moved into the target).
fn check_resolution_cells(
    (rx, ry): (f64, f64),
    extent: [f64; 4],
    (dx, dy): (f64, f64),
    target: &gdal::spatial_ref::SpatialRef,
    input_cell: Option<(f64, String, bool)>,
) -> Result<(), ToolError> {
    let (width, height) = ((extent[2] - extent[0]).abs(), (extent[3] - extent[1]).abs());
    let (cols, rows) = (warp_cells(width, rx), warp_cells(height, ry));
    let unit = unit_of(target);
    let other_unit = input_cell
        .as_ref()
        .filter(|(_, input_unit, same)| !same && *input_unit != unit);
    let absurd = target.is_geographic()
        && other_unit.is_some()
        && dx > 0.0
        && dy > 0.0
        && (rx >= 1.0 || ry >= 1.0)
        && (rx / dx > ABSURD_COARSENING || ry / dy > ABSURD_COARSENING);
    if cols >= 1.0 && rows >= 1.0 && !absurd {
        return Ok(());
    }
    let label = {
        let f = facts::crs_facts(target);
        f.id.unwrap_or(f.name)
    };
    let shown = |v: f64| number(approx_sig(v, 4));
    let hint = match other_unit {
        Some((cell, input_unit, _)) if *cell > 0.0 && dx > 0.0 => format!(
            "; the input's cells of {} {input_unit} are about {} {unit} here, so {} \
             {input_unit} would be about {} {unit}",
            shown(*cell),
            shown(dx),
            shown(rx),
            shown(rx * dx / cell)
        ),
        _ => String::new(),
    };
    let what = if cols < 1.0 || rows < 1.0 {
        format!("makes a grid of {cols} x {rows} cells")
    } else {
        format!(
            "makes a grid of {cols} x {rows} cells, {} times coarser than the data",
            shown((rx / dx).max(ry / dy))
        )
    };
    Err(ToolError::Arguments(format!(
        "resolution: [{}, {}] is read in the unit of {label}, the {unit}, and {what} over the \
         output's extent of {} x {} {unit}. Give the resolution in {} (gdalwarp's own \
         here: {} x {}; at most {} x {} for one cell){hint}, or pass `size` [width, height] \
         instead",
        number(rx),
        number(ry),
        shown(width),
        shown(height),
        plural(&unit),
        shown(dx),
        shown(dy),
        shown(2.0 * width),
        shown(2.0 * height),
    )))
}

/// A unit's plural: feet for a foot, degrees for a degree.
fn plural(unit: &str) -> String {
    match unit.strip_suffix("foot") {
        Some(stem) => format!("{stem}feet"),
        None => format!("{unit}s"),
    }
}

/// `v` to `digits` significant digits (0.000154512 -> 0.0001545).
fn approx_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// Refuse an output `size` above the server's cell budget before any work.
fn check_output_size(size: Option<[u32; 2]>) -> Result<(), ToolError> {
    if let Some([w, h]) = size {
        policy::check_cells("size", u64::from(w), u64::from(h), 1)?;
    }
    Ok(())
}

fn ovr_path(input: &Path) -> PathBuf {
    let mut name = input.as_os_str().to_os_string();
    name.push(".ovr");
    PathBuf::from(name)
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

    fn is_gradient(self) -> bool {
        matches!(self, Self::Slope | Self::Aspect | Self::Hillshade)
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
    /// Horn (1981), the default: smoother, better for rough terrain.
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
    /// Horizontal over vertical unit (gdaldem -s), e.g. 0.3048006 for US feet over metres.
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
    pub justification: Option<Justifications>,
}

/// The `gdaldem` argument vector for `args`, refusing arguments that do not apply.
fn terrain_argv(
    args: &TerrainArgs,
    options: &[(String, String)],
) -> Result<Vec<String>, ToolError> {
    let op = args.operation;
    let bad = |m: &str| Err(ToolError::Arguments(m.to_string()));
    let format = raster_format(args.format.as_deref(), &args.output)?;
    let mut argv = vec!["-of".to_string(), format];
    if let Some(b) = args.band {
        argv.extend(["-b".to_string(), b.to_string()]);
    }
    // A slope's `z_factor` and `scale` are folded into one `-s` by `terrain_units`: gdaldem
    // slope (GDAL 3.6) ignores `-z`.
    if let Some(z) = args.z_factor {
        if !(z.is_finite() && z > 0.0) {
            return bad("z_factor: a positive number");
        }
        if !matches!(op, TerrainOperation::Slope | TerrainOperation::Hillshade) {
            return bad("z_factor: applies to slope and hillshade");
        }
        if op == TerrainOperation::Hillshade {
            argv.extend(["-z".to_string(), number(z)]);
        }
    }
    if let Some(s) = args.scale {
        if !(s.is_finite() && s > 0.0) {
            return bad("scale: a positive number (e.g. 111120 for degrees over metres)");
        }
        if !op.is_gradient() {
            return bad("scale: applies to slope, aspect and hillshade");
        }
        if op != TerrainOperation::Slope {
            argv.extend(["-s".to_string(), number(s)]);
        }
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
        if !op.is_gradient() {
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

/// Units gdaldem cannot see, made right from the facts (and refusals where the data does not
/// say): gdaldem takes cell sizes from `gt[1]`/`gt[5]` alone (no rotation, no geotransform
/// means 1-unit cells), assumes horizontal and vertical units are the same, and reads raw
/// values (a band's scale and offset ignored). Returns the extra arguments (`-s`, `-z`).
///
/// gdaldem slope (GDAL 3.6) ignores `-z`: only hillshade reads it (measured: a DEM stored as
/// Int16 with scale 0.01 gave 73.30° with `-z 0.01` and 1.91°, the true slope, with `-s 100`;
/// attack round 5, F2). A slope's vertical factor (the call's `z_factor` times the band's
/// scale) is therefore folded into `-s`, the ratio of horizontal to vertical units:
/// atan(dz·z / (dx·s)) = atan(dz / (dx·s/z)).
fn terrain_units(
    input: &DatasetFacts,
    band: u32,
    operation: TerrainOperation,
    user_scale: Option<f64>,
    user_z: Option<f64>,
) -> Result<TerrainUnits, ToolError> {
    let Some(raster) = &input.raster else {
        return Ok(TerrainUnits::default());
    };
    let g = &raster.georeferencing;
    if g.geotransform.is_none() {
        return Err(ToolError::Arguments(
            "input: the DEM has no geotransform, so cell sizes are unknown (gdaldem would use 1 \
             unit); georeference it first (raster_reproject with src_crs and bounds, or a world \
             file)"
                .to_string(),
        ));
    }
    // A south-up DEM is flipped north-up by the run (`gdal::dem`); a rotated one cannot be.
    if g.rotated {
        return Err(ToolError::Arguments(
            "input: the DEM's geotransform is rotated or sheared; gdaldem reads only the pixel \
             sizes and would compute slopes and aspects in the wrong direction. Warp it \
             north-up first with raster_reproject (dst_crs = its own CRS)"
                .to_string(),
        ));
    }
    // gdaldem's aspect (GDAL 3.6 `GDALAspectAlg`) takes the height differences without the
    // cell sizes, right on square cells only: a plane facing 123.7° on 10 x 30 m cells read
    // 153.4° (attack round 22, R22-B4). Its slope and hillshade divide by them. The cells are
    // judged by the largest turn they give an aspect, atan((r - 1) / (2 √r)) for cells r : 1:
    // 30 x 30.003 m cells turn none by more than 0.003°, and were refused (attack round 23,
    // R23-B1); a lon/lat DEM's 6" x 3" cells, square on the ground at 60° N, were refused by
    // their degrees (R23-B8).
    // A lon/lat DEM's cells are judged by the domain's `geographic_dem_aspect` question, on
    // the ground (attack round 13, R13-B7 c): not refused here.
    let mut aspect_note = None;
    if operation == TerrainOperation::Aspect && g.cell_size_metres.is_none() {
        if let Some(gt) = g.geotransform {
            let (dx, dy) = (gt[1].abs(), gt[5].abs());
            if dx > 0.0 && dy > 0.0 && dx != dy {
                let ratio = dx.max(dy) / dx.min(dy);
                let turn = ((ratio - 1.0) / (2.0 * ratio.sqrt())).atan().to_degrees();
                let turn_text = format!("{turn:.3}");
                let (x, y) = (
                    number((dx * 1000.0).round() / 1000.0),
                    number((dy * 1000.0).round() / 1000.0),
                );
                if turn > ASPECT_TURN_TOLERANCE_DEGREES {
                    return Err(ToolError::Arguments(format!(
                        "input: the DEM's cells are {x} x {y}, not square, and gdaldem's aspect \
                         takes the height differences without the cell sizes, so aspects \
                         would be turned by up to {turn_text}°; resample it to square cells \
                         first (raster_resample with resolution [{m}, {m}])",
                        m = dx.min(dy)
                    )));
                }
                if turn > 1e-6 {
                    aspect_note = Some(format!(
                        "the DEM's cells are {x} x {y}, not quite square: gdaldem's aspect, \
                         which ignores the cell sizes, turns an aspect by at most {turn_text}°"
                    ));
                }
            }
        }
    }
    let mut extra = Vec::new();
    let band_facts = raster.bands.get(band.saturating_sub(1) as usize);
    let band_scale = band_facts.and_then(|b| b.scale).filter(|s| *s != 1.0);
    // The vertical factor of a slope, folded into `-s` below.
    let slope_z = match operation {
        TerrainOperation::Slope => user_z.unwrap_or(1.0) * band_scale.unwrap_or(1.0),
        _ => 1.0,
    };
    // A slope has no sign: gdaldem takes the sign of `-s`, and a negative scale wrote -45° for
    // 45° (attack round 22, R22-B5).
    let slope_scale = |horizontal: Option<f64>| -> Vec<String> {
        let s = horizontal.unwrap_or(1.0) / slope_z.abs();
        if operation == TerrainOperation::Slope && s != 1.0 {
            vec!["-s".to_string(), number(s)]
        } else {
            Vec::new()
        }
    };
    if let Some(k) = band_scale {
        match operation {
            TerrainOperation::Slope => {}
            TerrainOperation::Hillshade => {
                let z = user_z.unwrap_or(1.0) * k;
                extra.extend(["-z".to_string(), number(z)]);
            }
            // gdaldem reads raw values: under a negative scale every aspect is turned by 180°
            // (attack round 11, R11-11: 90 for 270); a positive one does not change it.
            TerrainOperation::Aspect if k > 0.0 => {}
            TerrainOperation::Aspect => {
                return Err(ToolError::Arguments(format!(
                    "input: band {band} declares a negative scale ({k}: physical = raw x {k}), so \
                     the surface gdaldem reads from raw values faces the other way and every \
                     aspect would be turned by 180 degrees. Convert it to physical values first \
                     (raster_calc with the expression \"a\" and data_type Float32: raster_calc \
                     applies the declared scale and offset itself)"
                )))
            }
            _ => {
                return Err(ToolError::Arguments(format!(
                    "input: band {band} declares a scale of {k} (physical = raw x {k}); \
                     {} would come out in raw units. Convert it to physical values first \
                     (raster_convert with output_type Float32 and scale)",
                    operation.gdal_name()
                )))
            }
        }
    }
    // Aspect reads directions only: no ratio of units changes it, so none is asked for or
    // applied (attack round 13, R13-B7 c: a geographic DEM's aspect was first told to pass a
    // `scale` the next answer said it does not use; the gate's `geographic_dem_aspect` says
    // what a geographic DEM does to aspects).
    if !operation.is_gradient() || operation == TerrainOperation::Aspect {
        return Ok(TerrainUnits {
            args: extra,
            notes: aspect_note.into_iter().collect(),
        });
    }
    let declared = band_facts
        .and_then(|b| b.unit.as_deref())
        .map(str::trim)
        .filter(|u| !u.is_empty());
    // The band's elevation unit in metres; a unit the tool does not know is refused rather
    // than taken as metres (attack round 11, R11-4: `cm` gave a 45° slope as 89.43°).
    let vertical = match declared {
        None => None,
        Some(unit) => Some(facts::length_unit_metres(unit).ok_or_else(|| {
            ToolError::Arguments(format!(
                "input: band {band} declares its elevation unit as \"{unit}\", which this tool \
                 does not know (it knows m, dm, cm, mm, km, ft and US survey ft); pass scale: \
                 the horizontal unit divided by the vertical one, in metres (for centimetres in \
                 a metre CRS, scale: 0.01 / 0.01 x 100 = 100)"
            ))
        })?),
    };
    let unit = input.crs.as_ref().and_then(|c| c.linear_unit_metres);
    let unit_name = input
        .crs
        .as_ref()
        .and_then(|c| c.linear_unit.clone())
        .unwrap_or_else(|| "unknown".to_string());
    // Both units declared: the ratio the data implies (attack round 13, R13-B1 and R13-B4).
    let implied = match (unit, vertical, declared) {
        (Some(u), Some(v), Some(name)) => Some(DeclaredRatio {
            ratio: u / v,
            horizontal: unit_name.clone(),
            vertical: name.to_string(),
        }),
        _ => None,
    };
    let mut notes = Vec::new();
    if let (Some(z), Some(implied)) = (user_z, &implied) {
        notes.extend(z_factor_as_unit_ratio(z, implied));
    }
    // The CRS's heights in another unit than the band's own (R16-B15): `scale` chooses.
    let crs_heights = input
        .crs
        .as_ref()
        .and_then(|c| c.vertical_unit.clone())
        .filter(|(_, metres)| vertical.is_some_and(|v| (v - metres).abs() > 1e-6 * metres));
    if let Some(s) = user_scale {
        if let (Some(implied), None) = (&implied, &crs_heights) {
            implied.check_scale(s)?;
        }
        extra.extend(slope_scale(user_scale));
        return Ok(TerrainUnits { args: extra, notes });
    }
    // The band's unit against the CRS's heights: two declarations of one quantity that
    // disagree are a data conflict (attack round 16, R16-B15: a band in `m` over NAVD88 height
    // in feet gave 45.00° with no word, where the CRS's reading gives 16.95°).
    if let (Some(v), Some(name), Some((crs_unit, crs_metres))) = (vertical, declared, crs_heights) {
        {
            return Err(ToolError::Gdal(crate::gdal::GdalError::Conflict {
                message: format!(
                    "input: band {band} declares its heights in \"{name}\" ({v} m a unit) and \
                     the DEM's CRS declares them in {crs_unit} ({crs_metres} m a unit); slopes \
                     differ by that ratio. Pass scale (the horizontal unit over the heights' \
                     unit, both in metres) to say which holds, or fix the band's unit or the \
                     CRS first (raster_convert)"
                ),
                parameter: "scale".to_string(),
                candidates: serde_json::json!([
                    {"heights_in": name, "metres_per_unit": v},
                    {"heights_in": crs_unit, "metres_per_unit": crs_metres},
                ]),
            }));
        }
    }
    if let Some((mx, my)) = g.cell_size_metres {
        let per_degree = raster
            .pixel_size
            .map(|(_, dy)| my / dy.abs())
            .unwrap_or(111_120.0);
        // With one scale, east-west distances are read at the north-south one: offered only
        // where that is within 1 % (near the equator). At 60° N the offered scale was one the
        // next call's gate called 99.7 % wrong (attack round 15, R15-B15).
        let east_west = raster
            .pixel_size
            .map(|(dx, _)| dx.abs() * per_degree / mx - 1.0)
            .unwrap_or(f64::INFINITY);
        let offered = if east_west.abs() <= 0.01 {
            format!(
                ", or pass scale: {per_degree:.0} (metres per degree of latitude here{}; \
                 east-west distances {:.2} % off)",
                match (vertical, declared) {
                    (Some(v), Some(unit)) if v != 1.0 =>
                        format!(", divided by {v} for elevations in {unit}"),
                    _ => String::new(),
                },
                east_west * 100.0
            )
        } else {
            format!(
                " (one scale cannot serve here: with the north-south one, east-west \
                 distances would be {:.1} % off)",
                east_west * 100.0
            )
        };
        return Err(ToolError::Arguments(format!(
            "input: the DEM is in a geographic CRS (cells of {mx:.1} m x {my:.1} m here); \
             gdaldem needs one ratio of horizontal to vertical units and the east-west one \
             shrinks with latitude. Reproject it to a projected CRS in metres first \
             (raster_reproject){offered}"
        )));
    }
    let horizontal = match (unit, &implied) {
        (Some(u), None) if (u - 1.0).abs() < 1e-12 => None,
        // Both units known: their ratio, exactly 1 when they are the same unit; said in the
        // result when it is not (R13-B4: the conversion was silent).
        (Some(_), Some(implied)) => {
            let ratio = implied.ratio;
            let applies = (ratio - 1.0).abs() > 1e-6;
            if applies {
                notes.insert(
                    0,
                    format!(
                        "band {band} declares its heights in {} and the CRS measures distances \
                         in {}: heights converted with scale {} (gdaldem -s, the horizontal \
                         unit over the vertical one)",
                        implied.vertical,
                        implied.horizontal,
                        ratio_text(ratio)
                    ),
                );
            }
            applies.then_some(ratio)
        }
        (Some(u), None) => {
            return Err(ToolError::Arguments(format!(
                "input: the DEM's horizontal unit is the {unit_name} ({u} m) and band {band} \
                 does not declare its elevation unit; pass scale: {u} if elevations are in \
                 metres, or scale: 1 if they are in the same {unit_name}"
            )));
        }
        (None, _) => None,
    };
    if operation == TerrainOperation::Slope {
        extra.extend(slope_scale(horizontal));
    } else if let Some(u) = horizontal {
        extra.extend(["-s".to_string(), number(u)]);
    }
    Ok(TerrainUnits { args: extra, notes })
}

/// Scale error of a projected DEM's grid over the ground, as a share of lengths, above which
/// its slopes and hillshades are refused; from [`GRID_NOTE_SCALE_ERROR`] to here, said.
const GRID_MAX_SCALE_ERROR: f64 = 0.05;
/// Scale error said in the result.
const GRID_NOTE_SCALE_ERROR: f64 = 0.005;
/// Angle, in degrees, between grid north and true north above which aspects and hillshades
/// are refused; from [`GRID_NOTE_CONVERGENCE`] to here, said.
const GRID_MAX_CONVERGENCE: f64 = 5.0;
/// Convergence said in the result.
const GRID_NOTE_CONVERGENCE: f64 = 0.5;

/// gdaldem reads a projected DEM's cells as ground distances and its rows as north: a
/// Web Mercator DEM at 60° N has cells twice as long as the ground's, so slopes came out
/// 5.71° for 11.28° (attack round 15, R15-B5), and in polar stereographic (EPSG:3413) grid
/// north is 45° from true north at 0° E, so a slope facing 135° true was answered 90
/// (R15-B18). Over the DEM's extent, the grid's largest scale error (for slopes and
/// hillshades) and its convergence at the centre (for aspects and hillshades) are measured:
/// above [`GRID_MAX_SCALE_ERROR`] or [`GRID_MAX_CONVERGENCE`] the call is refused with the
/// figure and the way out (a CRS local to the data), from the note thresholds they are said
/// in the result; a UTM DEM in its zone is neither.
fn grid_on_the_ground(
    input: &std::path::Path,
    operation: TerrainOperation,
) -> Result<Vec<String>, ToolError> {
    let (scale_matters, north_matters) = match operation {
        TerrainOperation::Slope => (true, false),
        TerrainOperation::Aspect => (false, true),
        TerrainOperation::Hillshade => (true, true),
        _ => (false, false),
    };
    if !(scale_matters || north_matters) {
        return Ok(Vec::new());
    }
    let dataset = crate::gdal::facts::open(input)?;
    let Ok(srs) = dataset.spatial_ref() else {
        return Ok(Vec::new());
    };
    if !srs.is_projected() {
        return Ok(Vec::new());
    }
    let Some(lonlat) = crate::gdal::facts::raster_extent(&dataset)
        .and_then(|extent| crate::gdal::facts::transform::lonlat_bounds(&srs, extent))
    else {
        return Ok(Vec::new());
    };
    let name = srs.name().unwrap_or_else(|| "its CRS".to_string());
    let way_out = "reproject it to a CRS local to the data first (raster_reproject to its UTM \
                   zone, or a transverse Mercator centred on it), where cells are ground \
                   distances and rows run north";
    let mut notes = Vec::new();
    if scale_matters {
        if let Some(error) = crate::gdal::vector::geometry::scale_error(&srs, lonlat) {
            let percent = error.length * 100.0;
            if error.length > GRID_MAX_SCALE_ERROR {
                return Err(ToolError::Arguments(format!(
                    "input: in {name} the DEM's cells are up to {percent:.1} % longer or \
                     shorter than the ground they cover (worst at {:.2}° E, {:.2}° N), and \
                     gdaldem takes them as ground distances: slopes would be off by as much \
                     in their tangent; {way_out}",
                    error.worst_at.0, error.worst_at.1
                )));
            }
            if error.length > GRID_NOTE_SCALE_ERROR {
                notes.push(format!(
                    "in {name} the DEM's cells differ from the ground's lengths by up to \
                     {percent:.2} %: slopes are off by as much in their tangent"
                ));
            }
        }
    }
    if north_matters {
        if let Some(convergence) = convergence_degrees(&srs, lonlat) {
            if convergence.abs() > GRID_MAX_CONVERGENCE {
                return Err(ToolError::Arguments(format!(
                    "input: in {name} grid north is {:.1}° from true north at the DEM's centre, \
                     and gdaldem measures aspects (and lights hillshades) from grid north: a \
                     slope facing due east would be answered {:.1}°; {way_out}",
                    convergence,
                    (90.0 - convergence).rem_euclid(360.0)
                )));
            }
            if convergence.abs() > GRID_NOTE_CONVERGENCE {
                notes.push(format!(
                    "in {name} grid north is {convergence:.2}° from true north at the DEM's \
                     centre: aspects are measured from grid north"
                ));
            }
        }
    }
    Ok(notes)
}

/// The angle, in degrees clockwise, from true north to grid north at the centre of a lon/lat
/// extent in the projected `srs`.
fn convergence_degrees(
    srs: &gdal::spatial_ref::SpatialRef,
    [west, south, east, north]: [f64; 4],
) -> Option<f64> {
    let geographic = crate::gdal::vector::geometry::geographic_of(srs).ok()?;
    let to_plane = crate::gdal::vector::geometry::transformer(&geographic, srs).ok()?;
    let (lon, lat) = ((west + east) / 2.0, (south + north) / 2.0);
    let step = 1e-4;
    let (mut xs, mut ys, mut zs) = ([lon, lon], [lat, lat + step], [0.0, 0.0]);
    let _quiet = crate::gdal::ErrorCapture::start();
    to_plane.transform_coords(&mut xs, &mut ys, &mut zs).ok()?;
    let (dx, dy) = (xs[1] - xs[0], ys[1] - ys[0]);
    let angle = dx.atan2(dy).to_degrees();
    angle.is_finite().then_some(-angle)
}

/// What [`terrain_units`] adds to gdaldem's arguments, and what it says about it in the
/// result (a conversion of the heights' unit, a `z_factor` that looks like one).
#[derive(Debug, Default)]
struct TerrainUnits {
    args: Vec<String>,
    notes: Vec<String>,
}

/// The largest turn non-square cells may give an aspect before `raster_terrain aspect` is
/// refused, in degrees: below it the turn is said in a note.
const ASPECT_TURN_TOLERANCE_DEGREES: f64 = 0.1;

/// Two unit ratios closer than this (relative) are one: the international and the US survey
/// foot (2 ppm apart) agree, and so do 3.28 and 3.2808 for feet over metres.
const UNIT_RATIO_TOLERANCE: f64 = 1e-3;

/// The ratio of the DEM's horizontal unit to the heights' unit its band declares.
#[derive(Debug)]
struct DeclaredRatio {
    /// Horizontal over vertical, in metres each.
    ratio: f64,
    /// The CRS's linear unit, as PROJ names it.
    horizontal: String,
    /// The band's unit text.
    vertical: String,
}

impl DeclaredRatio {
    /// An explicit `scale` that contradicts the declared units is a data conflict (attack
    /// round 13, R13-B4: `scale: 1` on heights declared in feet in a metre CRS gave 5.7106°
    /// where 1.7458° is right, silently): the argument and the data disagree, and the caller
    /// chooses.
    fn check_scale(&self, scale: f64) -> Result<(), ToolError> {
        if (scale / self.ratio - 1.0).abs() <= UNIT_RATIO_TOLERANCE {
            return Ok(());
        }
        let ratio = ratio_text(self.ratio);
        Err(ToolError::Gdal(crate::gdal::GdalError::Conflict {
            message: format!(
                "scale: {} contradicts the DEM's units: the CRS measures distances in {} and \
                 the band declares its heights in {}, a ratio of {ratio} (horizontal over \
                 vertical), so slopes would be off by a factor of about {}. Drop `scale` to \
                 let the host apply {ratio}, or, if the band's unit is wrong, fix it first \
                 (raster_convert with the right unit) and pass the scale that matches",
                number(scale),
                self.horizontal,
                self.vertical,
                number((self.ratio / scale * 1e4).round() / 1e4),
            ),
            parameter: "scale".to_string(),
            candidates: json!([
                {"source": "argument", "scale": scale},
                {"source": "declared_units", "scale": self.ratio,
                 "horizontal_unit": self.horizontal, "vertical_unit": self.vertical},
            ]),
        }))
    }
}

/// A warning when `z_factor` equals the ratio of two length units (0.3048, 3.2808, 1200/3937,
/// ...) on a DEM whose declared units the host already reconciles: the heights would be
/// converted twice (attack round 13, R13-B4: `z_factor: 0.3048` on heights declared in feet
/// in a metre CRS gave 0.5323° where 1.7458° is right). A `z_factor` is legitimate vertical
/// exaggeration otherwise, so this warns and does not refuse.
fn z_factor_as_unit_ratio(z: f64, implied: &DeclaredRatio) -> Option<String> {
    const LENGTHS: [(&str, f64); 3] = [
        ("metre", 1.0),
        ("foot", 0.3048),
        ("US survey foot", 1200.0 / 3937.0),
    ];
    let near = |a: f64, b: f64| (a / b - 1.0).abs() <= UNIT_RATIO_TOLERANCE;
    let (from, to) = LENGTHS
        .iter()
        .flat_map(|a| LENGTHS.iter().map(move |b| (a, b)))
        .find(|((_, a), (_, b))| !near(*a, *b) && near(z, a / b))?;
    Some(format!(
        "z_factor {} is the ratio of a {} to a {} ({}): the heights' unit is already taken \
         from the data (band unit {}, CRS unit {}, ratio {}), so if z_factor was meant to \
         convert units the heights were converted twice; drop it unless it is a vertical \
         exaggeration",
        number(z),
        from.0,
        to.0,
        ratio_text(from.1 / to.1),
        implied.vertical,
        implied.horizontal,
        ratio_text(implied.ratio)
    ))
}

/// A unit ratio for a message, to 6 decimals (3.28084, 1.000002); the arguments get it whole.
fn ratio_text(ratio: f64) -> String {
    number((ratio * 1e6).round() / 1e6)
}

/// `raster_terrain`, as the tool table lists it.
pub const RASTER_TERRAIN: ToolSpec = ToolSpec {
    name: "raster_terrain",
    family: Family::Raster,
    title: "Terrain derivatives",
    verb: "Derived terrain from",
    description: "Slope, aspect, hillshade, TRI, TPI or roughness of a DEM (gdaldem), \
        with unit ratios and band scale taken from the data (or asked for).",
    effect: Effect::Writes,
    opens_rasters: true,
    raster_output: Some(RasterWrite {
        driver: WriteDriver::FormatArgument,
        written: WrittenTypes::OneBand(terrain_writes),
    }),
    schemas: Schemas::gated::<TerrainArgs, super::RasterOutput>(),
    handler: handler!(terrain),
};

/// What `raster_terrain` writes: gdaldem's one Byte band for a hillshade, Float32 otherwise.
fn terrain_writes(arguments: &Value) -> String {
    let hillshade = arguments
        .get("operation")
        .and_then(Value::as_str)
        .is_some_and(|o| o.eq_ignore_ascii_case("hillshade"));
    if hillshade { "Byte" } else { "Float32" }.to_string()
}

/// `raster_terrain`: GDALDEMProcessing.
pub async fn terrain(call: Call) -> Result<Value, ToolError> {
    let args: TerrainArgs = parse(call.tool, &call.arguments)?;
    check_band(args.band)?;
    let options = driver_options("creation_options", &args.creation_options)?;
    let argv = terrain_argv(&args, &options)?;
    let (input, output) = call.input_and_output(&args.input, &args.output, args.overwrite)?;
    let format = raster_format(args.format.as_deref(), &args.output)?;
    let band = args.band;
    let processing = args.operation.gdal_name().to_string();
    let operation = args.operation;
    let (user_scale, user_z) = (args.scale, args.z_factor);
    gated::run(
        &call,
        args.justification,
        move || {
            facts::check_raster_format(&format, &options)?;
            let input_facts = facts::gather_raster("input", &input)?;
            facts::refuse_undeclared_sentinels(&input_facts, Some(band.unwrap_or(1)), "gdaldem")?;
            let single_band = facts::DatasetFacts {
                raster: input_facts.raster.clone().map(|mut r| {
                    r.band_count = 1;
                    r
                }),
                ..input_facts.clone()
            };
            facts::check_raster_cells("input", &single_band)?;
            let count = input_facts
                .raster
                .as_ref()
                .map(|r| r.band_count)
                .unwrap_or(0);
            if band.is_some_and(|b| b > count) {
                return Err(ToolError::Arguments(format!(
                    "band: the DEM has {count} band(s)"
                )));
            }
            let mut argv = argv;
            let mut units = terrain_units(
                &input_facts,
                band.unwrap_or(1),
                operation,
                user_scale,
                user_z,
            )?;
            units.notes.extend(grid_on_the_ground(&input, operation)?);
            argv.extend(units.args);
            let request = DemRequest {
                input,
                output,
                processing,
                args: argv,
            };
            Ok(Gathered::new(
                CallFacts {
                    datasets: vec![input_facts],
                    ..CallFacts::default()
                },
                (request, units.notes),
            ))
        },
        |(request, notes), _work| {
            let outcome = request.run()?;
            Ok(RasterOutput {
                written: facts::WrittenRaster::new(
                    &request.output,
                    &outcome.files,
                    outcome.written,
                ),
                commands: vec![outcome.command],
                // The host's notes on the units first, then GDAL's warnings.
                warnings: notes.into_iter().chain(outcome.warnings).collect(),
                report: Value::Null,
                computation: None,
            })
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R13-B7 a: the resolution check counts cells as gdalwarp does, and calls a degree
    /// resolution 10,000 times gdalwarp's own absurd only when the input's unit differs.
    #[test]
    fn resolution_cells_follow_gdalwarp() {
        use gdal::spatial_ref::SpatialRef;
        assert_eq!(warp_cells(1000.0, 2000.0), 1.0);
        assert_eq!(warp_cells(1000.0, 2001.0), 0.0);
        assert_eq!(warp_cells(1000.0, 300.0), 3.0);
        let wgs84 = SpatialRef::from_epsg(4326).unwrap();
        let metres = || Some((30.0, "metre".to_string(), false));
        // 20° across at 30 (metres meant): 1 cell each way, but 100,000 times gdalwarp's
        // own 0.0003°: refused, naming 30 metre in degrees.
        let extent = [0.0, 0.0, 20.0, 20.0];
        let err = check_resolution_cells((30.0, 30.0), extent, (0.0003, 0.0003), &wgs84, metres())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("times coarser") && err.contains("30 metre would be about 0.0003 degree"),
            "{err}"
        );
        // A coarse grid from degrees data (same unit), or 0.5° cells: allowed.
        let same = Some((0.0003, "degree".to_string(), true));
        assert!(
            check_resolution_cells((30.0, 30.0), extent, (0.0003, 0.0003), &wgs84, same).is_ok()
        );
        assert!(
            check_resolution_cells((0.5, 0.5), extent, (0.0003, 0.0003), &wgs84, metres()).is_ok()
        );
        assert_eq!(approx_sig(0.000_154_512, 4), 0.000_154_5);
        assert_eq!(plural("US survey foot"), "US survey feet");
    }

    fn terrain(arguments: Value) -> Result<Vec<String>, String> {
        let args: TerrainArgs = parse("raster_terrain", &arguments).map_err(|e| e.to_string())?;
        terrain_argv(&args, &[]).map_err(|e| e.to_string())
    }

    /// Table-driven: each row is the arguments, then the argv or the start of the error.
    #[test]
    fn terrain_argument_planning() {
        let base = |extra: Value| {
            let mut v = json!({"input": "dem.tif", "output": "o.tif"});
            if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            v
        };
        let ok: &[(Value, &[&str])] = &[
            (json!({"operation": "slope"}), &["-of", "GTiff"]),
            // The slope's z_factor is folded into -s by terrain_units (gdaldem slope ignores -z).
            (
                json!({"operation": "slope", "slope_units": "percent", "z_factor": 2.0}),
                &["-of", "GTiff", "-p"],
            ),
            (
                json!({"operation": "hillshade", "z_factor": 2.0}),
                &["-of", "GTiff", "-z", "2"],
            ),
            (
                json!({"operation": "hillshade", "multidirectional": true, "format": "COG"}),
                &["-of", "COG", "-multidirectional"],
            ),
            (
                json!({"operation": "aspect", "algorithm": "zevenbergen_thorne", "scale": 111120.0}),
                &["-of", "GTiff", "-s", "111120", "-alg", "ZevenbergenThorne"],
            ),
        ];
        for (extra, want) in ok {
            let got = terrain(base(extra.clone()));
            let want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
            assert_eq!(got, Ok(want), "{extra}");
        }
        let refused: &[(Value, &str)] = &[
            (json!({"operation": "tri", "z_factor": 2.0}), "z_factor"),
            (json!({"operation": "tpi", "scale": 2.0}), "scale"),
            (
                json!({"operation": "aspect", "slope_units": "percent"}),
                "slope_units",
            ),
            (json!({"operation": "slope", "azimuth": 10.0}), "azimuth"),
            (
                json!({"operation": "hillshade", "multidirectional": true, "azimuth": 10.0}),
                "multidirectional",
            ),
            (
                json!({"operation": "hillshade", "altitude": 95.0}),
                "altitude",
            ),
            (
                json!({"operation": "slope", "bogus": 1}),
                "invalid arguments",
            ),
        ];
        for (extra, start) in refused {
            let error = terrain(base(extra.clone())).err().unwrap_or_default();
            assert!(error.starts_with(start), "{extra}: {error}");
        }
    }
}

/// Arguments of `raster_calc`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CalcArgs {
    /// Variable name -> raster, e.g. {"nir": "b8.tif", "red": "b4.tif"}; all on one grid.
    pub inputs: BTreeMap<String, String>,
    /// Band per variable (default 1).
    #[serde(default)]
    pub bands: BTreeMap<String, u32>,
    /// e.g. "(nir - red) / (nir + red)"; also comparisons, && ||, `a if c else b`, min(a, b),
    /// sqrt, ln, log10, exp (true is 1).
    pub expression: String,
    /// GeoTIFF output path.
    pub output: String,
    /// Integer types round to nearest (halves away from zero); values that do not fit fail.
    pub data_type: DataType,
    /// Output nodata (default NaN for floats, the type's extreme for integers).
    pub nodata: Option<f64>,
    /// Output band unit, e.g. "m" (default: the inputs' own when the expression keeps it).
    pub unit: Option<String>,
    #[serde(default)]
    pub creation_options: BTreeMap<String, String>,
    #[serde(default)]
    pub overwrite: bool,
    pub justification: Option<Justifications>,
}

/// `raster_calc`, as the tool table lists it.
pub const RASTER_CALC: ToolSpec = ToolSpec {
    name: "raster_calc",
    family: Family::Raster,
    title: "Band math",
    verb: "Computed band math on",
    description: "Band math over rasters on one grid, block by block: scale/offset \
        applied, nodata propagated, explicit output type (values that do not fit are \
        an error).",
    effect: Effect::Writes,
    opens_rasters: true,
    raster_output: Some(RasterWrite {
        driver: WriteDriver::GTiff {
            default_compression: Some("ZSTD"),
        },
        written: WrittenTypes::OneBand(calc_writes),
    }),
    schemas: Schemas::gated::<CalcArgs, crate::gdal::raster::calc::CalcOutput>(),
    handler: handler!(calc),
};

/// What `raster_calc` writes: one band of `data_type`, Float32 by default.
fn calc_writes(arguments: &Value) -> String {
    arguments
        .get("data_type")
        .and_then(Value::as_str)
        .unwrap_or("Float32")
        .to_string()
}

/// `raster_calc`.
pub async fn calc(call: Call) -> Result<Value, ToolError> {
    let args: CalcArgs = parse(call.tool, &call.arguments)?;
    if args.inputs.is_empty() {
        return Err(ToolError::Arguments(
            "inputs: name at least one raster, e.g. {\"a\": \"dem.tif\"}".to_string(),
        ));
    }
    if let Some(name) = args.bands.keys().find(|k| !args.inputs.contains_key(*k)) {
        return Err(ToolError::Arguments(format!(
            "bands: `{name}` is not one of `inputs`"
        )));
    }
    let options = driver_options("creation_options", &args.creation_options)?;
    let mut inputs = Vec::with_capacity(args.inputs.len());
    for (name, raw) in &args.inputs {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(ToolError::Arguments(format!(
                "inputs: `{name}` is not a usable variable name; use letters, digits and _ \
                 (not starting with a digit)"
            )));
        }
        let band = args.bands.get(name).copied().unwrap_or(1);
        check_band(Some(band))?;
        inputs.push(CalcInput {
            name: name.clone(),
            path: call.input_path(&format!("inputs.{name}"), raw)?,
            band: band as usize,
        });
    }
    let names: Vec<String> = inputs.iter().map(|i| i.name.clone()).collect();
    crate::gdal::raster::calc::check_expression(&args.expression, &names)?;
    let input_paths: Vec<PathBuf> = inputs.iter().map(|i| i.path.clone()).collect();
    let borrowed: Vec<&Path> = input_paths.iter().map(PathBuf::as_path).collect();
    let output = call.output_path("output", &args.output, args.overwrite, &borrowed)?;
    let request = CalcRequest {
        inputs,
        expression: args.expression.clone(),
        output,
        data_type: args.data_type.gdal_name().to_string(),
        nodata: args.nodata,
        creation_options: options,
        budget: crate::gdal::raster::calc::BlockBudget::from_env(),
        unit: args.unit.clone(),
    };
    gated::run(
        &call,
        args.justification,
        move || {
            let mut datasets = Vec::with_capacity(request.inputs.len());
            for input in &request.inputs {
                let role = format!("inputs.{}", input.name);
                let facts = facts::gather_raster(&role, &input.path)?;
                // The output is one band as large as the input: a tiny file declaring a huge
                // raster must not fill the disk.
                if let Some(r) = &facts.raster {
                    policy::check_cells(&role, u64::from(r.width), u64::from(r.height), 1)?;
                }
                facts::refuse_undeclared_sentinels(&facts, Some(input.band as u32), "band math")?;
                datasets.push(facts);
            }
            // The creation options as GDAL will read them: `MAX_Z_ERROR=5abc` or `NBITS=4abc`
            // were taken as lossless by the encoding fact while GDAL applied 5 and 4
            // (regression, issue 21 attack round 3), so they are validated as
            // `raster_convert` validates its own.
            facts::check_raster_format("GTiff", &request.creation_options)?;
            // Blocks GDAL would read whole, above the budget: refused before the gate.
            crate::gdal::raster::calc::check_budget(&request)?;
            let facts = CallFacts {
                datasets,
                ..CallFacts::default()
            };
            Ok(Gathered::new(facts, request))
        },
        |request: CalcRequest, _work| {
            let output = crate::gdal::raster::calc::run(&request)?;
            let computation = calc_computation(&request, &output);
            Ok(Computed::new(output, computation))
        },
    )
    .await
}

/// `raster_calc`'s step in words: the expression, where each name's values came from, and the
/// rules for nodata and the output type.
fn calc_computation(
    request: &CalcRequest,
    output: &crate::gdal::raster::calc::CalcOutput,
) -> String {
    let names: Vec<String> = request
        .inputs
        .iter()
        .map(|i| format!("{} = band {} of {}", i.name, i.band, i.path.display()))
        .collect();
    let options: Vec<String> = request
        .creation_options
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "band math `{}` per cell in f64 over {} (declared scale and offset applied first); a \
         cell is nodata where any input is nodata or NaN or the expression is undefined; \
         written as {} GeoTIFF{} with nodata {}",
        request.expression,
        names.join(", "),
        output.data_type,
        if options.is_empty() {
            " (ZSTD)".to_string()
        } else {
            format!(" ({})", options.join(", "))
        },
        if output.nodata_is_nan {
            "NaN".to_string()
        } else {
            output.nodata.map_or("none".to_string(), |v| v.to_string())
        }
    )
}
