//! Reprojection and regridding with GDALWarp, in process: the same code path as the
//! `gdalwarp` command line, so outputs are pixel-identical to `gdalwarp` run with the
//! arguments in [`WarpRequest::gdalwarp_args`].

use crate::gdal::programs::{self, number, Program, ProgramOutcome};
use crate::gdal::GdalError;
use std::path::PathBuf;

/// One warp, fully specified.
#[derive(Debug, Clone)]
pub struct WarpRequest {
    pub input: PathBuf,
    pub output: PathBuf,
    /// Target CRS; `None` keeps the source CRS (a pure regridding).
    pub dst_crs: Option<String>,
    pub src_crs: Option<String>,
    /// A gdalwarp `-r` method name.
    pub resampling: String,
    pub resolution: Option<(f64, f64)>,
    pub size: Option<(u32, u32)>,
    /// (xmin, ymin, xmax, ymax) and the CRS they are in (default: the target CRS).
    pub bounds: Option<([f64; 4], Option<String>)>,
    pub dst_nodata: Option<f64>,
    /// `-srcnodata nan`: NaN cells are no values, in a floating-point input that declares no
    /// nodata ([`nan_marks_nodata`]).
    pub src_nodata_nan: bool,
    /// Output data type (`-ot`); `None` keeps the input's.
    pub output_type: Option<String>,
    pub format: String,
    pub creation_options: Vec<(String, String)>,
    /// A PROJ pipeline passed as `-ct`: the coordinate operation the host chose because it is
    /// more accurate than the one GDAL would pick (see `transform`).
    pub coordinate_operation: Option<String>,
    /// `Some(true)` passes `-vshift` (values shifted between the two CRSs' height systems),
    /// `Some(false)` passes `-novshift` (values kept); `None` leaves it to gdalwarp, which
    /// shifts a single band when the CRSs disagree on heights (`transform::vertical_shift`).
    pub vertical_shift: Option<bool>,
    /// `-tap`: the output's extent in multiples of `resolution`, grown to cover the whole
    /// source. Without it gdalwarp rounds the number of cells to the nearest, so a resolution
    /// that does not divide the footprint cut its edge off (a `sum` over 81,000 of 100,000;
    /// attack round 15, R15-B20).
    pub target_aligned: bool,
    /// The unit band 1's heights are in after a `-vshift` (gdalwarp converts the values to
    /// the target's height unit and keeps the source band's unit: a band in `ft` held metres
    /// still called `ft`; attack round 16, R16-B9).
    pub heights_unit: Option<String>,
}

impl WarpRequest {
    /// The `gdalwarp` arguments (without the source and destination paths), full resolution
    /// (`-ovr NONE`) included.
    pub fn gdalwarp_args(&self) -> Vec<String> {
        let mut args = vec!["-of".to_string(), self.format.clone()];
        if let Some(src) = &self.src_crs {
            args.extend(["-s_srs".to_string(), src.clone()]);
        }
        if let Some(dst) = &self.dst_crs {
            args.extend(["-t_srs".to_string(), dst.clone()]);
        }
        if let Some(pipeline) = &self.coordinate_operation {
            args.extend(["-ct".to_string(), pipeline.clone()]);
        }
        match self.vertical_shift {
            Some(true) => args.push("-vshift".to_string()),
            Some(false) => args.push("-novshift".to_string()),
            None => {}
        }
        args.extend(["-r".to_string(), self.resampling.clone()]);
        if let Some((x, y)) = self.resolution {
            args.extend(["-tr".to_string(), number(x), number(y)]);
            if self.target_aligned {
                args.push("-tap".to_string());
            }
        }
        if let Some((w, h)) = self.size {
            args.extend(["-ts".to_string(), w.to_string(), h.to_string()]);
        }
        if let Some((b, crs)) = &self.bounds {
            args.push("-te".to_string());
            args.extend(b.iter().map(|v| number(*v)));
            if let Some(crs) = crs {
                args.extend(["-te_srs".to_string(), crs.clone()]);
            }
        }
        if let Some(t) = &self.output_type {
            args.extend(["-ot".to_string(), t.clone()]);
        }
        if self.src_nodata_nan {
            args.extend(["-srcnodata".to_string(), "nan".to_string()]);
        }
        if let Some(nodata) = self.dst_nodata {
            let text = if nodata.is_nan() {
                "nan".to_string()
            } else {
                number(nodata)
            };
            args.extend(["-dstnodata".to_string(), text]);
        }
        // Full resolution, always: by default gdalwarp reads the overview closest to the
        // target resolution when it reduces, and an overview was computed by some other method
        // (often nearest or average), or is stale, or was planted beside the file: a `sum`
        // over an averaged overview came out short by the cell ratio.
        args.extend(["-ovr".to_string(), "NONE".to_string()]);
        args.extend(["-wm".to_string(), warp_memory_megabytes().to_string()]);
        let decided = crate::gdal::policy::overview_options(&self.format, Some(&self.resampling));
        for (key, value) in self.creation_options.iter().chain(&decided) {
            args.extend(["-co".to_string(), format!("{key}={value}")]);
        }
        args
    }

    /// The full `gdalwarp` command line, paths included.
    pub fn command_line(&self) -> Vec<String> {
        Program::Warp.command_line(&self.gdalwarp_args(), &self.input, &self.output)
    }

    /// Run the warp into a staging folder and move the result into place.
    pub fn run(&self) -> Result<ProgramOutcome, GdalError> {
        let source = crate::gdal::facts::open(&self.input)?;
        let written_type = self.output_type.clone().or_else(|| {
            source
                .rasterband(1)
                .ok()
                .map(|b| crate::gdal::facts::band_type_name(&b))
        });
        // Onto a grid too narrow for the method, on a widened grid (R22-B16).
        let mut outcome = match self.widening_needed(&source)? {
            Some(widening) => {
                let (mut outcome, _) = self.run_widened(&source, &widening)?;
                outcome.warnings.push(widening.note(&self.resampling));
                outcome
            }
            None => self.run_from(&source, &self.gdalwarp_args())?,
        };
        // A method that computes new values, written into an integer type, is rounded by
        // gdalwarp to the nearest whole number: said, as `raster_aggregate` says it (attack
        // round 22, R22-B1: 21.25 written 21, silently).
        // A `sum` keeps whole numbers only over whole blocks of whole cells: where output cells
        // cut input cells it adds parts of them (10 m counts onto 2.5 m cells wrote v / 16,
        // rounded: a total of 2,912 for 3,006; attack round 23, R23-B10).
        let keeps_values = match self.resampling.as_str() {
            "near" | "nearest" | "mode" | "min" | "max" | "med" | "q1" | "q3" => true,
            "sum" => self.sums_whole_blocks(&source),
            _ => false,
        };
        if let Some(t) = written_type.filter(|t| integer_range(t).is_some() && !keeps_values) {
            outcome.warnings.push(format!(
                "each cell's {} value is written as {t}, rounded by gdalwarp to the nearest \
                 whole number (up to 0.5 off); to keep the fractions, convert the input to \
                 Float32 first (raster_convert with output_type Float32)",
                self.resampling
            ));
        }
        Ok(outcome)
    }

    /// `gdalwarp` with `args` from `source` (the input, or a copy of it) into the output.
    fn run_from(
        &self,
        source: &gdal::Dataset,
        args: &[String],
    ) -> Result<ProgramOutcome, GdalError> {
        let _blocks = crate::gdal::policy::blocks::reserve_program_input(
            "the warp's input",
            &self.input,
            source,
        )?;
        let _working = reserve_warp_memory()?;
        programs::run(
            &Program::Warp,
            source,
            args,
            &self.output,
            self.relabel_heights(),
        )
        .map_err(|e| match e {
            GdalError::Failed { message, .. } => GdalError::Failed {
                operation: format!("warping {}", self.input.display()),
                message,
            },
            other => other,
        })
    }

    /// Run the warp as a block aggregation onto a grid whose cells are exact blocks of input
    /// cells; `padded` is the input's size rounded up to whole blocks when the last ones pass
    /// its edge. Returns the outcome and the equivalent command lines.
    ///
    /// * gdalwarp reads the full-resolution cells (`-ovr NONE`, in every warp's arguments): by
    ///   default it reads the overview closest to the target resolution, so a raster with
    ///   overviews built by `nearest` was "averaged" into the overview's samples.
    /// * With `padded`, gdalwarp reads a copy of the input padded to whole blocks, the padding
    ///   masked out (`gdal_translate -of VRT -srcwin`, then `gdalwarp` from it). gdalwarp 3.6's
    ///   reducing methods weigh the last row or column of a block that passes the raster's edge
    ///   as if it repeated up to the block's far side: `average` of a partial block gave 23.4
    ///   where its cells average 23, and `rms` drifts the same way (attack round 9, R9-8). Over
    ///   the padded copy every block lies inside the source, and the padding is invalid by the
    ///   rule gdalwarp already applies to the raster's own cells: the bands' nodata (the VRT
    ///   fills uncovered cells with it), the source's own mask or alpha band (copied, padded
    ///   with 0), or else a mask copied from a band without nodata (255 over the raster, 0
    ///   beyond). Each partial block is then computed over exactly its own valid cells, by the
    ///   same rules as a whole block, and the whole blocks are unchanged.
    pub fn run_blocks(
        &self,
        padded: Option<(usize, usize)>,
    ) -> Result<(ProgramOutcome, Vec<Vec<String>>), GdalError> {
        if let (Some((cols, rows)), Some((width, height))) = (self.size, padded) {
            if cols < SMALL_GRID || rows < SMALL_GRID {
                return self.run_small_blocks((cols, rows), (width, height));
            }
        }
        let args = self.gdalwarp_args();
        let source = crate::gdal::facts::open(&self.input)?;
        let Some((width, height)) = padded else {
            let outcome = self.run_from(&source, &args)?;
            let command = Program::Warp.command_line(&args, &self.input, &self.output);
            return Ok((outcome, vec![command]));
        };
        let pad = padding_args(&source, [0, 0, width as i64, height as i64]);
        let scratch = scratch_path("warp-padded", "vrt");
        // gdal_translate warns that the window passes the raster: that is the point.
        let outcome = programs::run_in_memory(&Program::Translate, &source, &pad, &scratch)
            .and_then(|_| crate::gdal::facts::open(&scratch))
            .and_then(|copy| self.run_from(&copy, &args));
        unlink_scratch(&scratch);
        let outcome = outcome?;
        let recipe = {
            let mut name = self.output.file_name().unwrap_or_default().to_os_string();
            name.push(".padded.vrt");
            self.output.with_file_name(name)
        };
        let commands = vec![
            Program::Translate.command_line(&pad, &self.input, &recipe),
            Program::Warp.command_line(&args, &recipe, &self.output),
        ];
        Ok((outcome, commands))
    }
}

/// The output type of a warp that sums cells (`sum` in `raster_aggregate`, `raster_resample`,
/// `raster_reproject`), chosen by the data: gdalwarp writes a sum in the input's type unless
/// told otherwise, and an integer type saturates silently (a Byte band of 100..255 summed 2 x 2
/// wrote 255 everywhere: attack round 10, R10-6). The sums an output cell can take lie between
/// `weight` times the bands' smallest and largest values (read exactly, nodata left out) and 0;
/// `weight` is the most source cells one output cell adds (gdalwarp weighs cells cut by the
/// output cell's edge by the part covered). When the input's type holds that range the output
/// keeps it; otherwise the narrowest type that holds the input's type and the range.
#[derive(Debug, Clone, PartialEq)]
pub struct SumType {
    /// The input's band types.
    pub from: Vec<String>,
    /// The type written.
    pub to: String,
    /// The smallest and largest sum an output cell can take.
    pub range: (f64, f64),
    /// The most source cells an output cell adds.
    pub weight: f64,
    /// The input's nodata and the output's, when the input's lies within the sums: gdalwarp
    /// 3.6 writes a valid cell equal to the nodata one less (a sum of 255 over a nodata of 255
    /// was written 254: attack round 14, R14-B5), so the output's nodata moves out of the
    /// sums' range, to the written type's maximum (or minimum; NaN for Float64).
    pub nodata: Option<(f64, f64)>,
}

impl SumType {
    /// The sentence the tools report.
    pub fn note(&self) -> String {
        let moved = self.nodata.map_or(String::new(), |(old, new)| {
            format!(
                "; the output's nodata is {} instead of the input's {}, which lies within the \
                 sums (a sum equal to it would be taken for nodata, and gdalwarp writes it one \
                 less)",
                if new.is_nan() {
                    "NaN".to_string()
                } else {
                    number(new)
                },
                number(old)
            )
        });
        format!(
            "output type {} (the input's {} cannot hold every sum): an output cell adds up to \
             {} input cells, so its sum can reach {}..{} (the input's values read exactly, \
             nodata left out); written as {} so that no sum saturates{moved}",
            self.to,
            self.from.join(", "),
            number(self.weight),
            number(self.range.0),
            number(self.range.1),
            self.to
        )
    }
}

/// The range of values `data_type` holds, for the integer types a sum can saturate (and a
/// mean is rounded to).
pub fn integer_range(data_type: &str) -> Option<(f64, f64)> {
    Some(match data_type {
        "Byte" => (0.0, 255.0),
        "UInt16" => (0.0, 65535.0),
        "Int16" => (-32768.0, 32767.0),
        "UInt32" => (0.0, 4_294_967_295.0),
        "Int32" => (-2_147_483_648.0, 2_147_483_647.0),
        _ => return None,
    })
}

/// The working memory each gdalwarp may use (`-wm`), in MiB: `GDAL_MCP_WARP_MEMORY_BYTES`
/// (default 16 MiB, at least 1 MiB). GDAL 3.6 otherwise takes 64 MB a call, which nothing
/// reserved: eight warps of a 149 KB GeoTIFF took the server from 91 to 539 MB under a
/// 256 MiB budget (attack round 19, R19-A5).
pub fn warp_memory_megabytes() -> u64 {
    (crate::budget::setting("GDAL_MCP_WARP_MEMORY_BYTES", 16 << 20) >> 20).max(1)
}

/// Reserve one gdalwarp's working memory ([`warp_memory_megabytes`]) from the budget all calls
/// share, for as long as the warp runs.
pub fn reserve_warp_memory() -> Result<crate::budget::Reservation<'static>, GdalError> {
    Ok(crate::budget::reserve(
        "gdalwarp's working memory (GDAL_MCP_WARP_MEMORY_BYTES)",
        warp_memory_megabytes() << 20,
    )?)
}

/// Why a cell of `data_type` cannot hold `value` as its nodata, in words; `None` when it can.
/// GDAL clamps such a value onto the type (a Byte nodata of 300 becomes 255, a UInt16 one of
/// -5 becomes 0) and then marks the data's own 255s or 0s as nodata, saying only that it
/// clamped (attack round 19, R19-B7: 10 of 400 valid cells vanished after a rescale to Byte).
pub fn nodata_the_type_cannot_hold(value: f64, data_type: &str) -> Option<String> {
    if let Some((low, high)) = integer_range(data_type) {
        if value.is_nan() || value < low || value > high || value.fract() != 0.0 {
            let clamped = if value.is_nan() {
                "0".to_string()
            } else {
                number(value.clamp(low, high).round())
            };
            return Some(format!(
                "{data_type} holds whole numbers from {} to {} only, so GDAL would write nodata \
                 {} as {clamped} and read every cell holding {clamped} as nodata",
                number(low),
                number(high),
                number(value)
            ));
        }
        return None;
    }
    if data_type != "Float32" || !value.is_finite() {
        return None;
    }
    if value.abs() > f64::from(f32::MAX) {
        return Some(format!(
            "Float32 holds magnitudes up to {:e} only, so GDAL would write nodata {} as an \
             infinity",
            f32::MAX,
            number(value)
        ));
    }
    // A magnitude Float32 rounds to zero: nodata 1e-50 was stored as 0, and every cell of 0
    // read as nodata (attack round 20, R20-B12).
    (value != 0.0 && value as f32 == 0.0).then(|| {
        format!(
            "Float32 holds magnitudes down to about {:e} only, so GDAL would write nodata {value:e} \
             as 0 and read every cell holding 0 as nodata",
            f32::from_bits(1)
        )
    })
}

/// Refuse a `nodata` argument that a band of the output cannot hold: the output's type is
/// `output_type`, or each chosen band's own (`bands`, or every band).
pub fn check_nodata_fits(
    dataset: &gdal::Dataset,
    bands: Option<&[usize]>,
    output_type: Option<&str>,
    value: f64,
) -> Result<(), GdalError> {
    let chosen: Vec<usize> = match bands {
        Some(list) => list.to_vec(),
        None => (1..=dataset.raster_count()).collect(),
    };
    for index in chosen {
        let data_type = match output_type {
            Some(t) => t.to_string(),
            None => match dataset.rasterband(index) {
                Ok(band) => crate::gdal::facts::band_type_name(&band),
                Err(_) => continue,
            },
        };
        if let Some(why) = nodata_the_type_cannot_hold(value, &data_type) {
            return Err(GdalError::Arguments(format!(
                "nodata: {why} (band {index}); pass a nodata within the type, or write a wider \
                 type first (raster_convert with output_type Int32 or Float32)"
            )));
        }
    }
    Ok(())
}

/// The band types of a raster, and the smallest and largest sum an output cell can take.
type SumRange = (Vec<String>, (f64, f64));

/// The band types of `dataset` (at `path`) and the smallest and largest sum an output cell
/// adding up to `weight` of its cells can take (0 included), from the bands' values read
/// exactly; `None` when a band is not of an integer type a sum can saturate (floating-point
/// bands hold every sum; 64-bit and complex bands are left to GDAL).
fn sum_range(
    path: &std::path::Path,
    dataset: &gdal::Dataset,
    weight: f64,
) -> Result<Option<SumRange>, GdalError> {
    let count = dataset.raster_count();
    let mut from: Vec<String> = Vec::new();
    for index in 1..=count {
        let band = dataset.rasterband(index).map_err(|e| GdalError::Failed {
            operation: format!("reading band {index} of {}", path.display()),
            message: e.to_string(),
        })?;
        let name = crate::gdal::facts::band_type_name(&band);
        if integer_range(&name).is_none() {
            return Ok(None);
        }
        from.push(name);
    }
    let bands: Vec<usize> = (1..=count).collect();
    let _memory = crate::gdal::policy::blocks::reserve(
        &format!("reading the range of {} for a sum", path.display()),
        path,
        dataset,
        &bands,
        crate::gdal::policy::blocks::Reach::Full,
    )?;
    let _quiet = crate::gdal::ErrorCapture::start();
    let (mut low, mut high) = (0.0_f64, 0.0_f64);
    for (index, name) in bands.iter().zip(&from) {
        // A band that cannot be read exactly (or holds nothing but nodata) counts with its
        // type's whole range: the safe side.
        let range = dataset
            .rasterband(*index)
            .ok()
            .and_then(|band| band.compute_raster_min_max(false).ok())
            .map(|r| (r.min, r.max))
            .filter(|(min, max)| min.is_finite() && max.is_finite() && min <= max)
            .or_else(|| integer_range(name));
        if let Some((min, max)) = range {
            low = low.min(min * weight);
            high = high.max(max * weight);
        }
    }
    Ok(Some((from, (low, high))))
}

/// Whether the values of `data_type` include `low..=high` (Float64 and other non-integer
/// types: yes).
fn fits(data_type: &str, (low, high): (f64, f64)) -> bool {
    integer_range(data_type).is_none_or(|(lo, hi)| lo <= low && high <= hi)
}

impl WarpRequest {
    /// Right by default: a `sum` is written in a type that holds it (R10-6), the narrowest
    /// its driver stores ([`sum_output_type`]); `weight` (the most input cells one output
    /// cell adds, for this request) is asked only for a sum. Sets `output_type` and returns
    /// the widening, if any.
    pub fn widen_sum(
        &mut self,
        dataset: &gdal::Dataset,
        weight: impl FnOnce(&Self) -> f64,
    ) -> Result<Option<SumType>, GdalError> {
        let widened = if self.resampling == "sum" {
            let weight = weight(self);
            sum_output_type(
                &self.input,
                dataset,
                weight,
                (&self.format, &self.creation_options),
            )?
        } else {
            None
        };
        self.output_type = widened.as_ref().map(|w| w.to.clone());
        // The call's own nodata stands; otherwise the nodata moves out of the sums (R14-B5).
        let widened = widened.map(|mut w| {
            if self.dst_nodata.is_some() {
                w.nodata = None;
            }
            w
        });
        if let Some((_, new)) = widened.as_ref().and_then(|w| w.nodata) {
            self.dst_nodata = Some(new);
        }
        Ok(widened)
    }
}

/// [`SumType`] for `dataset` (at `path`) when one output cell adds up to `weight` input cells,
/// written by `driver` with creation `options`; `None` when the input's type holds every sum
/// (Float64 bands, and Float32 ones whose sums stay within 2^24: [`float32_sums`]), or when a
/// band is of a type no wider output holds exactly (64-bit integers, complex). The type is the narrowest that holds the sums and the input's
/// values and that the driver stores ([`crate::gdal::facts::capacity`]); when the driver
/// stores none of them (a Byte sum widened to UInt16 written as JPEG failed inside GDAL, after
/// the work), the call is refused before any work, naming the type the sums need and the
/// formats that store it.
pub fn sum_output_type(
    path: &std::path::Path,
    dataset: &gdal::Dataset,
    weight: f64,
    (driver, options): (&str, &[(String, String)]),
) -> Result<Option<SumType>, GdalError> {
    if let Some(widened) = float32_sums(path, dataset, weight, (driver, options))? {
        return Ok(Some(widened));
    }
    let Some((from, range)) = sum_range(path, dataset, weight)? else {
        return Ok(None);
    };
    if from.iter().all(|t| fits(t, range)) {
        return Ok(None);
    }
    // The output type must also hold every input value (nodata included).
    let holds_inputs = |t: &str| {
        from.iter()
            .all(|f| integer_range(f).is_none_or(|input| fits(t, input)))
    };
    let candidates: Vec<&str> = ["UInt16", "Int16", "UInt32", "Int32", "Float64"]
        .into_iter()
        .filter(|t| fits(t, range) && holds_inputs(t))
        .collect();
    let stored = |t: &str| crate::gdal::facts::capacity::stores(driver, options, &[t], t);
    let Some(to) = candidates.iter().copied().find(|t| stored(t)) else {
        let needed = candidates.first().copied().unwrap_or("Float64");
        let driver = crate::gdal::facts::encoding::canonical_driver(driver);
        let compression = options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("COMPRESS"))
            .map(|(_, v)| format!(" with COMPRESS={v}"))
            .unwrap_or_default();
        return Err(GdalError::Arguments(format!(
            "format: {driver}{compression} cannot store these sums: an output cell adds up to \
             {} cells of {} (values read exactly, nodata left out), so a sum can reach {}..{}, \
             which needs {needed} (the input's {} cannot hold it), and {driver}{compression} \
             does not store {needed} values; write the sums with a format that does ({}), or \
             use another statistic",
            number(weight),
            path.display(),
            number(range.0),
            number(range.1),
            from.join(", "),
            crate::gdal::facts::capacity::drivers_storing(needed).join(", ")
        )));
    };
    // A nodata within the sums' range moves to an end of the written type outside it.
    let inside = (1..=dataset.raster_count())
        .filter_map(|index| dataset.rasterband(index).ok()?.no_data_value())
        .find(|v| range.0 <= *v && *v <= range.1);
    let nodata = inside.map(|old| {
        let new = integer_range(to)
            .and_then(|(lo, hi)| [hi, lo].into_iter().find(|v| *v < range.0 || *v > range.1))
            .unwrap_or(f64::NAN);
        (old, new)
    });
    Ok(Some(SumType {
        from,
        to: to.to_string(),
        range,
        weight,
        nodata,
    }))
}

/// Largest whole number below which Float32 holds every whole number (2^24).
const FLOAT32_WHOLE: f64 = 16_777_216.0;

/// The widening of a sum of Float32 bands to Float64 when a sum can pass 2^24, where Float32
/// stops holding whole numbers: a sum of 16777216 + 1 + 1 + 1 was written 16777220 (attack
/// round 17, R17-B10). `None` for other types, or sums within 2^24 (a sum of fractions keeps
/// Float32's relative precision, 6e-8).
fn float32_sums(
    path: &std::path::Path,
    dataset: &gdal::Dataset,
    weight: f64,
    (driver, options): (&str, &[(String, String)]),
) -> Result<Option<SumType>, GdalError> {
    let count = dataset.raster_count();
    let mut from = Vec::new();
    let (mut low, mut high) = (0.0_f64, 0.0_f64);
    let _quiet = crate::gdal::ErrorCapture::start();
    for index in 1..=count {
        let Ok(band) = dataset.rasterband(index) else {
            return Ok(None);
        };
        let name = crate::gdal::facts::band_type_name(&band);
        if name != "Float32" {
            return Ok(None);
        }
        if let Ok(r) = band.compute_raster_min_max(false) {
            if r.min.is_finite() && r.max.is_finite() {
                low = low.min(r.min * weight);
                high = high.max(r.max * weight);
            }
        }
        from.push(name);
    }
    if from.is_empty() || low.abs().max(high.abs()) <= FLOAT32_WHOLE {
        return Ok(None);
    }
    if !crate::gdal::facts::capacity::stores(driver, options, &["Float64"], "Float64") {
        let driver = crate::gdal::facts::encoding::canonical_driver(driver);
        return Err(GdalError::Arguments(format!(
            "format: an output cell adds up to {} cells of {}, so a sum can reach {}..{}, past \
             2^24, where Float32 stops holding whole numbers; {driver} does not store Float64: \
             write the sums with a format that does ({}), or use another statistic",
            number(weight),
            path.display(),
            number(low),
            number(high),
            crate::gdal::facts::capacity::drivers_storing("Float64").join(", ")
        )));
    }
    Ok(Some(SumType {
        from,
        to: "Float64".to_string(),
        range: (low, high),
        weight,
        nodata: None,
    }))
}

/// Refuse a sum into `data_type`, the caller's `output_type` (named `argument`), when a sum
/// of `dataset`'s values over `weight` cells can pass its range: gdalwarp would clip it
/// silently. The message names the range and a type that holds it.
pub fn refuse_saturating_sum(
    argument: &str,
    data_type: &str,
    path: &std::path::Path,
    dataset: &gdal::Dataset,
    weight: f64,
) -> Result<(), GdalError> {
    let Some((_, range)) = sum_range(path, dataset, weight)? else {
        return Ok(());
    };
    if fits(data_type, range) {
        return Ok(());
    }
    let wider = ["UInt16", "Int16", "UInt32", "Int32", "Float64"]
        .into_iter()
        .find(|t| fits(t, range))
        .unwrap_or("Float64");
    Err(GdalError::Arguments(format!(
        "{argument}: {data_type} cannot hold the sums: an output cell adds up to {} cells of \
         {} (values read exactly, nodata left out), so a sum can reach {}..{} and gdalwarp \
         would clip it to {data_type}'s range without an error; use {argument} {wider}, or \
         leave {argument} out (the host then writes the narrowest type that holds every sum)",
        number(weight),
        path.display(),
        number(range.0),
        number(range.1)
    )))
}

/// Outputs narrower than this many columns (or, for a block aggregation, rows) are computed
/// on a grid widened to it, for the methods [`narrow_grid_goes_wrong`] names (GDAL 3.6, GDAL
/// issue 10892 and its kin).
///
/// Measured on this GDAL (a raster of 2 rows and `c` columns holding 1..n, warped with `-ts
/// k 2` and compared with the area-weighted means computed apart): onto 1 column every `c`
/// from 10 up wrote 0; onto 2 or 3 columns every `c` from 20 up put a column's figure in the
/// wrong cell (20 x 20 onto 2 x 2 wrote 105.5, 95.5 for 95.5, 105.5); onto 4 columns 25 of
/// about 140 widths went wrong by `c / 6` (44 columns by 11, whole blocks, by 7.33). Onto 5 and
/// 6 columns none of about 400 widths up to 20,000 did. The rows never mattered, nor did
/// `-et 0`, `SAMPLE_GRID`, `SOURCE_EXTRA`, `XSCALE` or the warp memory. A grid widened over
/// the source alone still went wrong (the columns beyond it read nothing): the source is padded
/// (masked) to cover the widened grid.
pub const SMALL_GRID: u32 = 6;

/// Whether gdalwarp 3.6's `method` goes wrong onto a grid narrower than [`SMALL_GRID`]
/// columns: the methods that take every source cell an output cell covers
/// (`GWKAverageOrMode`). `sum` (its own kernel) and the interpolating methods measured right.
pub fn narrow_grid_goes_wrong(method: &str) -> bool {
    matches!(
        method,
        "average" | "rms" | "mode" | "max" | "min" | "med" | "q1" | "q3"
    )
}

/// An output grid narrower than [`SMALL_GRID`] columns, widened: the warp computes
/// [`Self::columns`] columns over [`Self::bounds`] (the requested grid's first columns, more
/// columns of the same width to their right) from a copy of the source padded to
/// [`Self::window`], and the requested `cols` x `rows` are cropped from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Widening {
    /// The requested grid.
    pub cols: u32,
    pub rows: u32,
    /// Columns of the widened grid.
    pub columns: u32,
    /// Rows of the widened grid (a block aggregation widens rows too).
    pub widened_rows: u32,
    /// The widened grid's extent, in the target CRS: xmin, ymin, xmax, ymax.
    pub bounds: [f64; 4],
    /// The source's padded copy: `gdal_translate -srcwin` x, y, width, height.
    pub window: [i64; 4],
}

impl Widening {
    /// The sentence results carry.
    pub fn note(&self, method: &str) -> String {
        format!(
            "the target grid is {} column(s) wide, and gdalwarp 3.6 computes {method} wrong onto \
             grids narrower than {SMALL_GRID} columns (GDAL issue 10892: an average of 10 x 10 \
             cells onto 1 gave 0): it was computed on a grid widened to {} x {} cells (the \
             input padded and masked) and the cells asked for were kept",
            self.cols, self.columns, self.widened_rows
        )
    }
}

/// The most cells a padded copy may have, as a multiple of the source's own cells (plus one
/// million): a widened grid that maps onto a far larger region of the source (a
/// reprojection's edge) is refused rather than padded.
const WIDENING_MAX_GROWTH: i64 = 64;

/// The widening of the output grid `geotransform`, `cols` x `rows` (north up, in `target_wkt`)
/// of a warp of `source` (in `source_wkt`; either may be empty, for a raster with no CRS):
/// `None` when the grid has [`SMALL_GRID`] columns or more. The source window covers the
/// widened grid as gdalwarp's transformer maps it back (its border and a lattice inside, two
/// cells of margin), and the source itself.
pub fn widening(
    source: &gdal::Dataset,
    (source_wkt, target_wkt): (&str, &str),
    geotransform: [f64; 6],
    (cols, rows): (u32, u32),
    method: &str,
) -> Result<Option<Widening>, GdalError> {
    if cols >= SMALL_GRID || !narrow_grid_goes_wrong(method) {
        return Ok(None);
    }
    let columns = SMALL_GRID;
    let (x0, dx, y0, dy) = (
        geotransform[0],
        geotransform[1],
        geotransform[3],
        geotransform[5],
    );
    let bounds = [
        x0,
        y0 + dy * f64::from(rows),
        x0 + dx * f64::from(columns),
        y0,
    ];
    let refused = || {
        GdalError::Arguments(format!(
            "the output grid is {cols} column(s) wide, and gdalwarp 3.6 computes {method} wrong \
             onto grids narrower than {SMALL_GRID} columns (GDAL issue 10892: an average of 10 \
             x 10 cells onto 1 gave 0); the grid could not be widened over this input here. \
             Ask for at least {SMALL_GRID} columns (a finer resolution), then reduce that \
             output with raster_aggregate"
        ))
    };
    let transformer = ImageTransformer::new(source, source_wkt, target_wkt).ok_or_else(refused)?;
    const STEPS: u32 = 16;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..=STEPS {
        for j in 0..=STEPS {
            let fx = f64::from(i) / f64::from(STEPS);
            let fy = f64::from(j) / f64::from(STEPS);
            xs.push(bounds[0] + (bounds[2] - bounds[0]) * fx);
            ys.push(bounds[3] - (bounds[3] - bounds[1]) * fy);
        }
    }
    let done = transformer.to_source(&mut xs, &mut ys);
    if done.iter().any(|ok| !ok) || xs.iter().chain(&ys).any(|v| !v.is_finite()) {
        return Err(refused());
    }
    let (width, height) = source.raster_size();
    let (width, height) = (width as f64, height as f64);
    let low = |v: &[f64]| v.iter().copied().fold(0.0, f64::min).floor() - 2.0;
    let high = |v: &[f64], size: f64| v.iter().copied().fold(size, f64::max).ceil() + 2.0;
    let (left, top) = (low(&xs), low(&ys));
    let (right, bottom) = (high(&xs, width), high(&ys, height));
    let window = [
        left as i64,
        top as i64,
        (right - left) as i64,
        (bottom - top) as i64,
    ];
    let cells = window[2].saturating_mul(window[3]);
    let own = (width * height) as i64;
    if cells
        > own
            .saturating_mul(WIDENING_MAX_GROWTH)
            .saturating_add(1 << 20)
    {
        return Err(refused());
    }
    Ok(Some(Widening {
        cols,
        rows,
        columns,
        widened_rows: rows,
        bounds,
        window,
    }))
}

/// gdalwarp `args` (which name no grid: the widened one's `-ts` and `-te` are added) from a
/// copy of `source` padded to `widening.window`, into the in-memory GeoTIFF `widened`.
/// Returns GDAL's warnings and the `gdal_translate` arguments of the padded copy.
///
/// A nodata the band's type cannot hold marks no cell (GDAL's own reading, and every other
/// tool's), but the padded copy's clamp made it one: a Byte band declaring -1 lost its 0s
/// from every block (attack round 17, R17-B6). The warp then ignores it, the padding masked.
pub fn warp_widened(
    input: &std::path::Path,
    source: &gdal::Dataset,
    args: &[String],
    widening: &Widening,
    widened: &std::path::Path,
) -> Result<WidenedWarp, GdalError> {
    let mut warp_args = args.to_vec();
    warp_args.extend([
        "-ts".to_string(),
        widening.columns.to_string(),
        widening.widened_rows.to_string(),
        "-te".to_string(),
    ]);
    warp_args.extend(widening.bounds.iter().map(|v| number(*v)));
    if nodata_outside_the_type(source) {
        let held = (1..=source.raster_count()).any(|index| {
            source
                .rasterband(index)
                .is_ok_and(|band| crate::gdal::facts::nodata::band_nodata(&band).is_some())
        });
        if held {
            return Err(GdalError::Arguments(format!(
                "input: {} has bands whose declared nodata their type cannot hold beside \
                 bands whose nodata it can; one warp cannot read both as declared. Warp the \
                 bands one by one (raster_convert with `bands` first)",
                input.display()
            )));
        }
        warp_args.extend(["-srcnodata".to_string(), "None".to_string()]);
        // Nor may the output declare the clamped value: gdalwarp then wrote every block
        // minimum of 0 as 1 to keep it off a nodata of 0 (attack round 19, R19-B2).
        if !args.iter().any(|a| a == "-dstnodata") {
            warp_args.extend(["-dstnodata".to_string(), "None".to_string()]);
        }
    }
    let pad = padding_args(source, widening.window);
    let padded_vrt = scratch_path("warp-padded", "vrt");
    let warnings = programs::run_in_memory(&Program::Translate, source, &pad, &padded_vrt)
        .and_then(|_| crate::gdal::facts::open(&padded_vrt))
        .and_then(|copy| {
            let _blocks = crate::gdal::policy::blocks::reserve(
                "the warp's input",
                input,
                &copy,
                &[],
                crate::gdal::policy::blocks::Reach::Any,
            )?;
            let _working = reserve_warp_memory()?;
            programs::run_in_memory(&Program::Warp, &copy, &warp_args, widened)
        });
    unlink_scratch(&padded_vrt);
    Ok(WidenedWarp {
        warnings: warnings?,
        pad,
        warp_args,
    })
}

/// What [`warp_widened`] did: GDAL's warnings, and the arguments of the padded copy
/// (`gdal_translate`) and of the warp (`gdalwarp`), for the command lines a result records.
pub struct WidenedWarp {
    pub warnings: Vec<String>,
    pub pad: Vec<String>,
    pub warp_args: Vec<String>,
}

/// A name for an in-memory scratch file of this process.
fn scratch_path(what: &str, extension: &str) -> PathBuf {
    static SCRATCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    PathBuf::from(format!(
        "{}{what}-{}-{}.{extension}",
        crate::gdal::policy::SCRATCH_PREFIX,
        std::process::id(),
        SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// Unlink an in-memory scratch file.
fn unlink_scratch(path: &std::path::Path) {
    if let Ok(path) = crate::gdal::cstring(&path.to_string_lossy()) {
        // SAFETY: unlinks an in-memory file this call created; the path is NUL-terminated.
        unsafe { gdal_sys::VSIUnlink(path.as_ptr()) };
    }
}

impl WarpRequest {
    /// [`WarpRequest::run_blocks`] onto an output of `cols` x `rows` cells, fewer than
    /// [`SMALL_GRID`] in a direction ([`SMALL_GRID`] says what goes wrong there). The input is
    /// padded (masked) to whole blocks of a grid at least [`SMALL_GRID`] cells across, gdalwarp
    /// computes that grid in memory, and `gdal_translate -srcwin` keeps the cells asked for.
    fn run_small_blocks(
        &self,
        (cols, rows): (u32, u32),
        (width, height): (usize, usize),
    ) -> Result<(ProgramOutcome, Vec<Vec<String>>), GdalError> {
        let (wide_cols, wide_rows) = (cols.max(SMALL_GRID), rows.max(SMALL_GRID));
        let (fx, fy) = (width / cols as usize, height / rows as usize);
        let (pad_w, pad_h) = (wide_cols as usize * fx, wide_rows as usize * fy);
        let Some(([xmin, ymin, xmax, ymax], None)) = self.bounds.clone() else {
            return Err(GdalError::Arguments(
                "a block aggregation needs its bounds in the input's CRS".to_string(),
            ));
        };
        let (dx, dy) = (
            (xmax - xmin) / f64::from(cols),
            (ymax - ymin) / f64::from(rows),
        );
        let widening = Widening {
            cols,
            rows,
            columns: wide_cols,
            widened_rows: wide_rows,
            bounds: [
                xmin,
                ymax - dy * f64::from(wide_rows),
                xmin + dx * f64::from(wide_cols),
                ymax,
            ],
            window: [0, 0, pad_w as i64, pad_h as i64],
        };
        let source = crate::gdal::facts::open(&self.input)?;
        self.run_widened(&source, &widening)
    }

    /// The warp onto `widening`'s grid ([`warp_widened`]), the cells asked for cropped into the
    /// output. Returns the outcome and the equivalent command lines.
    fn run_widened(
        &self,
        source: &gdal::Dataset,
        widening: &Widening,
    ) -> Result<(ProgramOutcome, Vec<Vec<String>>), GdalError> {
        let grid_free = WarpRequest {
            size: None,
            resolution: None,
            target_aligned: false,
            bounds: None,
            format: "GTiff".to_string(),
            creation_options: Vec::new(),
            ..self.clone()
        };
        let args = grid_free.gdalwarp_args();
        let mut crop = vec![
            "-of".to_string(),
            self.format.clone(),
            "-srcwin".to_string(),
            "0".to_string(),
            "0".to_string(),
            widening.cols.to_string(),
            widening.rows.to_string(),
        ];
        let decided = crate::gdal::policy::overview_options(&self.format, Some(&self.resampling));
        for (key, value) in self.creation_options.iter().chain(&decided) {
            crop.extend(["-co".to_string(), format!("{key}={value}")]);
        }
        let widened = scratch_path("warp-widened", "tif");
        let outcome = warp_widened(&self.input, source, &args, widening, &widened).and_then(
            |WidenedWarp {
                 mut warnings,
                 pad,
                 warp_args,
             }| {
                let grid = crate::gdal::facts::open(&widened)?;
                let outcome = programs::run(
                    &Program::Translate,
                    &grid,
                    &crop,
                    &self.output,
                    self.relabel_heights(),
                )?;
                warnings.extend(outcome.warnings);
                Ok((
                    ProgramOutcome {
                        files: outcome.files,
                        warnings,
                        written: outcome.written,
                    },
                    pad,
                    warp_args,
                ))
            },
        );
        unlink_scratch(&widened);
        let (outcome, pad, warp_args) = outcome.map_err(|e| match e {
            GdalError::Failed { message, .. } => GdalError::Failed {
                operation: format!("warping {}", self.input.display()),
                message,
            },
            other => other,
        })?;
        let named = |suffix: &str| {
            let mut name = self.output.file_name().unwrap_or_default().to_os_string();
            name.push(suffix);
            self.output.with_file_name(name)
        };
        let (recipe, grid) = (named(".padded.vrt"), named(".widened.tif"));
        let commands = vec![
            Program::Translate.command_line(&pad, &self.input, &recipe),
            Program::Warp.command_line(&warp_args, &recipe, &grid),
            Program::Translate.command_line(&crop, &grid, &self.output),
        ];
        Ok((outcome, commands))
    }

    /// The output grid gdalwarp would write for this request (north-up geotransform,
    /// columns, rows), from a warped VRT it writes in memory without computing a cell. `None`
    /// when that fails (the warp itself then says why).
    fn output_grid(&self, source: &gdal::Dataset) -> Option<([f64; 6], u32, u32)> {
        let dry = WarpRequest {
            format: "VRT".to_string(),
            creation_options: Vec::new(),
            ..self.clone()
        };
        let scratch = scratch_path("warp-grid", "vrt");
        let written =
            programs::run_in_memory(&Program::Warp, source, &dry.gdalwarp_args(), &scratch);
        let bytes = written
            .ok()
            .and_then(|_| gdal::vsi::get_vsi_mem_file_bytes_owned(&scratch).ok());
        unlink_scratch(&scratch);
        let bytes = bytes?;
        let document = crate::gdal::policy::xml::Document::parse(&scratch, &bytes).ok()?;
        let root = document.root_element("VRTDataset")?;
        let cols = root.value_text("rasterXSize")?.trim().parse::<u32>().ok()?;
        let rows = root.value_text("rasterYSize")?.trim().parse::<u32>().ok()?;
        let numbers: Vec<f64> = root
            .value_text("GeoTransform")?
            .split(',')
            .map(|v| v.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .ok()?;
        let geotransform: [f64; 6] = numbers.try_into().ok()?;
        Some((geotransform, cols, rows))
    }

    /// Whether every output cell of this warp covers whole input cells only: no reprojection,
    /// and the output grid's cells are whole multiples of the input's, on its cell edges.
    fn sums_whole_blocks(&self, source: &gdal::Dataset) -> bool {
        if self.dst_crs.is_some() || self.src_crs.is_some() {
            return false;
        }
        let (Ok(input), Some((output, _, _))) = (source.geo_transform(), self.output_grid(source))
        else {
            return false;
        };
        let whole = |v: f64| v >= 1.0 - 1e-9 && (v - v.round()).abs() <= 1e-9 * v.abs().max(1.0);
        let on_edges =
            |offset: f64, cell: f64| whole(offset / cell + 1.0) || (offset / cell).abs() <= 1e-9;
        input[2] == 0.0
            && input[4] == 0.0
            && output[2] == 0.0
            && output[4] == 0.0
            && whole(output[1] / input[1])
            && whole(output[5] / input[5])
            && on_edges(output[0] - input[0], input[1])
            && on_edges(output[3] - input[3], input[5])
    }

    /// The widening this warp needs ([`widening`]), or `None`.
    fn widening_needed(&self, source: &gdal::Dataset) -> Result<Option<Widening>, GdalError> {
        if !narrow_grid_goes_wrong(&self.resampling)
            || self.size.is_some_and(|(cols, _)| cols >= SMALL_GRID)
        {
            return Ok(None);
        }
        let Some((geotransform, cols, rows)) = self.output_grid(source) else {
            return Ok(None);
        };
        if cols >= SMALL_GRID || geotransform[2] != 0.0 || geotransform[4] != 0.0 {
            return Ok(None);
        }
        let wkt = |definition: Option<&String>, argument: &str| -> Result<String, GdalError> {
            match definition {
                Some(text) => crate::gdal::facts::parse_crs(argument, text)?
                    .to_wkt()
                    .map_err(|e| GdalError::Arguments(format!("{argument}: {e}"))),
                None => Ok(source
                    .spatial_ref()
                    .ok()
                    .and_then(|srs| srs.to_wkt().ok())
                    .unwrap_or_default()),
            }
        };
        let source_wkt = wkt(self.src_crs.as_ref(), "src_crs")?;
        let target_wkt = match &self.dst_crs {
            Some(_) => wkt(self.dst_crs.as_ref(), "dst_crs")?,
            None => source_wkt.clone(),
        };
        widening(
            source,
            (&source_wkt, &target_wkt),
            geotransform,
            (cols, rows),
            &self.resampling,
        )
    }

    /// What labels band 1's heights with their unit after a `-vshift`, run on the written
    /// output before it is moved into place.
    fn relabel_heights(&self) -> impl Fn(&std::path::Path) -> Result<(), GdalError> {
        let heights_unit = self.heights_unit.clone();
        move |written: &std::path::Path| -> Result<(), GdalError> {
            let Some(unit) = &heights_unit else {
                return Ok(());
            };
            let dataset = gdal::Dataset::open_ex(
                written,
                gdal::DatasetOptions {
                    open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE
                        | gdal::GdalOpenFlags::GDAL_OF_RASTER,
                    ..Default::default()
                },
            )
            .map_err(|e| GdalError::Failed {
                operation: "declaring the heights' unit of the output".to_string(),
                message: e.to_string(),
            })?;
            let band = dataset.rasterband(1).map_err(|e| GdalError::Failed {
                operation: "declaring the heights' unit of the output".to_string(),
                message: e.to_string(),
            })?;
            if crate::gdal::set_band_unit(&band, unit) {
                Ok(())
            } else {
                Err(GdalError::Failed {
                    operation: "declaring the heights' unit of the output".to_string(),
                    message: format!("the format does not keep a band unit ({unit})"),
                })
            }
        }
    }
}

/// Whether gdalwarp should read NaN cells as nodata: every band is floating-point and none
/// declares a nodata. The host's readers leave NaN out; gdalwarp without `-srcnodata nan`
/// let one NaN turn a whole block's average or sum into NaN (attack round 17, R17-B12: the
/// blocks 1.5, NaN, 3.5, 5.5 and 2.5, 3.5, NaN, NaN aggregated to two nodata cells for 3.5
/// and 3.0).
///
/// Only when a band holds a NaN cell (read strip by strip, stopping at the first): an output
/// of a raster without any is not given a nodata it does not need.
pub fn nan_marks_nodata(dataset: &gdal::Dataset) -> bool {
    let count = dataset.raster_count();
    let floats = count > 0
        && (1..=count).all(|index| {
            dataset.rasterband(index).is_ok_and(|band| {
                band.no_data_value().is_none()
                    && matches!(
                        crate::gdal::facts::band_type_name(&band).as_str(),
                        "Float32" | "Float64"
                    )
            })
        });
    floats
        && (1..=count).any(|index| {
            let Ok(band) = dataset.rasterband(index) else {
                return false;
            };
            let (width, height) = band.size();
            let mut row = 0;
            while row < height {
                let rows = 256.min(height - row);
                let Ok(buffer) =
                    band.read_as::<f32>((0, row as isize), (width, rows), (width, rows), None)
                else {
                    return false;
                };
                if buffer.data().iter().any(|v| v.is_nan()) {
                    return true;
                }
                row += rows;
            }
            false
        })
}

/// Whether the bands of `dataset` (an alpha band aside) declare different nodata values, or
/// some one and some none: one output file declares one for every band, and gdalwarp took
/// band 2's 7 for band 1 too, whose 7s were values (attack round 17, R17-B14).
pub fn bands_disagree_on_nodata(dataset: &gdal::Dataset) -> bool {
    let mut seen: Vec<Option<f64>> = Vec::new();
    for index in 1..=dataset.raster_count() {
        let Ok(band) = dataset.rasterband(index) else {
            continue;
        };
        if band.color_interpretation() == gdal::raster::ColorInterpretation::AlphaBand {
            continue;
        }
        let nodata = band.no_data_value();
        if !seen.iter().any(|s| match (s, nodata) {
            (Some(a), Some(b)) => a == &b || (a.is_nan() && b.is_nan()),
            (None, None) => true,
            _ => false,
        }) {
            seen.push(nodata);
        }
    }
    seen.len() > 1
}

/// Whether a band of `source` declares a nodata its type cannot hold (out of an integer
/// type's range or between its whole numbers): such a value marks no cell.
fn nodata_outside_the_type(source: &gdal::Dataset) -> bool {
    (1..=source.raster_count()).any(|index| {
        source.rasterband(index).is_ok_and(|band| {
            band.no_data_value().is_some()
                && crate::gdal::facts::nodata::band_nodata(&band).is_none()
        })
    })
}

/// The `gdal_translate` arguments of a VRT copy of `source` padded to the `-srcwin` `window`
/// (x, y, width, height: it may start left of or above the raster), the padding masked out
/// ([`padding_mask_band`]).
fn padding_args(source: &gdal::Dataset, window: [i64; 4]) -> Vec<String> {
    let mut pad = vec!["-of".to_string(), "VRT".to_string(), "-srcwin".to_string()];
    pad.extend(window.iter().map(|v| v.to_string()));
    if let Some(band) = padding_mask_band(source) {
        pad.extend(["-mask".to_string(), format!("mask,{band}")]);
    }
    pad
}

/// The band whose mask a padded copy of `source` takes as its own ([`WarpRequest::run_blocks`]):
/// none when the source already has a mask shared by its bands (an internal mask or an alpha
/// band, which the copy pads with 0) or when every band has a nodata value (which the copy
/// pads with); otherwise the first band without one, whose mask is 255 everywhere on the
/// raster.
fn padding_mask_band(source: &gdal::Dataset) -> Option<usize> {
    let flags = |index: usize| source.rasterband(index).ok()?.mask_flags().ok();
    if flags(1).is_none_or(|f| f.is_per_dataset()) {
        return None;
    }
    (1..=source.raster_count()).find(|&index| flags(index).is_some_and(|f| f.is_all_valid()))
}

/// GDAL's transformer between the cells of a raster (in `source_wkt`) and georeferenced
/// coordinates in `target_wkt`: the one gdalwarp builds (`GDALCreateGenImgProjTransformer`),
/// destroyed when dropped.
struct ImageTransformer<'a> {
    handle: *mut std::ffi::c_void,
    dataset: &'a gdal::Dataset,
}

impl<'a> ImageTransformer<'a> {
    fn new(dataset: &'a gdal::Dataset, source_wkt: &str, target_wkt: &str) -> Option<Self> {
        let source = crate::gdal::cstring(source_wkt).ok()?;
        let target = crate::gdal::cstring(target_wkt).ok()?;
        // SAFETY: the dataset handle and both strings outlive the call; GDAL copies the WKT.
        let handle = unsafe {
            gdal_sys::GDALCreateGenImgProjTransformer(
                dataset.c_dataset(),
                source.as_ptr(),
                std::ptr::null_mut(),
                target.as_ptr(),
                0,
                0.0,
                0,
            )
        };
        (!handle.is_null()).then_some(Self { handle, dataset })
    }

    /// Georeferenced target coordinates to the source's cell (pixel, line) coordinates, in
    /// place; `false` where a point does not transform.
    fn to_source(&self, x: &mut [f64], y: &mut [f64]) -> Vec<bool> {
        let count = x.len().min(y.len());
        let mut z = vec![0f64; count];
        let mut success = vec![0 as std::ffi::c_int; count];
        let Ok(n) = std::ffi::c_int::try_from(count) else {
            return vec![false; count];
        };
        // SAFETY: the transformer is live; every buffer holds `count` values.
        unsafe {
            gdal_sys::GDALGenImgProjTransform(
                self.handle,
                1,
                n,
                x.as_mut_ptr(),
                y.as_mut_ptr(),
                z.as_mut_ptr(),
                success.as_mut_ptr(),
            );
        }
        success.into_iter().map(|s| s != 0).collect()
    }
}

impl Drop for ImageTransformer<'_> {
    fn drop(&mut self) {
        // SAFETY: created by GDALCreateGenImgProjTransformer and destroyed once.
        unsafe { gdal_sys::GDALDestroyGenImgProjTransformer(self.handle) };
    }
}

/// What fills the cells of a warp's output that no source cell reaches.
#[derive(Debug, Clone, PartialEq)]
pub enum OutsideFill {
    /// Every band declares a nodata: gdalwarp fills each band with its own.
    Declared,
    /// The raster's last band is an alpha band: gdalwarp carries it into the output, where the
    /// cells outside are transparent (alpha 0).
    Alpha,
    /// The value passed as `-dstnodata` (declared on every band of the output).
    Value {
        value: f64,
        /// The bands (1-based) that declare no nodata of their own.
        undeclared: Vec<usize>,
        /// Whether some other band declares one (the value then replaces it when they
        /// differ).
        mixed: bool,
    },
}

impl OutsideFill {
    /// The `-dstnodata` to pass, if any.
    pub fn value(&self) -> Option<f64> {
        match self {
            OutsideFill::Value { value, .. } => Some(*value),
            _ => None,
        }
    }

    /// The sentence the tools report, `None` when nothing was decided.
    pub fn note(&self) -> Option<String> {
        let shown = |value: f64| {
            if value.is_nan() {
                "NaN".to_string()
            } else {
                number(value)
            }
        };
        match self {
            OutsideFill::Declared => None,
            OutsideFill::Alpha => Some(
                "the input's last band is an alpha band: the output carries it, and the cells \
                 no source cell reaches (outside the source's footprint on the new grid) are \
                 transparent (alpha 0; their colour bands hold 0)"
                    .to_string(),
            ),
            OutsideFill::Value {
                value,
                mixed: false,
                ..
            } => Some(format!(
                "the input declares no nodata: the output's cells no source cell reaches \
                 (outside the source's footprint on the new grid) are nodata {}, declared, a \
                 value no input cell holds, where gdalwarp would write 0; pass \"nodata\" to \
                 choose another",
                shown(*value)
            )),
            OutsideFill::Value {
                value,
                undeclared,
                mixed: true,
            } => Some(format!(
                "band(s) {} of the input declare no nodata while others do: the output's cells no source \
                 cell reaches (outside the source's footprint on the new grid), and the \
                 input's nodata cells, are nodata {} on every band, declared, a value no \
                 input cell holds, where gdalwarp would write 0 (or its internal -123456.789); \
                 pass \"nodata\" to choose another",
                undeclared
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                shown(*value)
            )),
        }
    }
}

/// The smallest and largest value of `band`'s cells that its mask and nodata leave valid,
/// read strip by strip; `None` when no cell is valid.
fn masked_range(band: &gdal::raster::RasterBand) -> gdal::errors::Result<Option<(f64, f64)>> {
    let (width, height) = band.size();
    let nodata = band.no_data_value();
    let mut range: Option<(f64, f64)> = None;
    let strip = 256;
    let mut row = 0;
    while row < height {
        let rows = strip.min(height - row);
        let window = (width, rows);
        let offset = (0, row as isize);
        let values = band.read_as::<f64>(offset, window, window, None)?;
        let mask = crate::gdal::facts::mask::read_mask(band, offset, window, window)?;
        for (i, v) in values.data().iter().enumerate() {
            let valid = mask
                .as_ref()
                .is_none_or(|m| m.get(i).is_some_and(|m| *m != 0))
                && !v.is_nan()
                && nodata.is_none_or(|n| *v != n);
            if valid {
                range = Some(range.map_or((*v, *v), |(lo, hi)| (lo.min(*v), hi.max(*v))));
            }
        }
        row += rows;
    }
    Ok(range)
}

/// The range of values an output of `type_name` holds, for choosing a fill: `None` for a
/// floating-point type (NaN is free). 64-bit integers: ±2^53, the widest integers a double
/// holds exactly.
fn fill_range(type_name: &str) -> Result<Option<(f64, f64)>, ()> {
    Ok(Some(match type_name {
        "Float32" | "Float64" | "CFloat32" | "CFloat64" => return Ok(None),
        "Byte" => (0.0, 255.0),
        "Int8" => (-128.0, 127.0),
        "UInt16" => (0.0, 65_535.0),
        "Int16" | "CInt16" => (-32_768.0, 32_767.0),
        "UInt32" => (0.0, 4_294_967_295.0),
        "Int32" | "CInt32" => (-2_147_483_648.0, 2_147_483_647.0),
        // GDAL 3.6's gdalwarp declares -2^63 on an Int64 GTiff as "-9" (and 2^64 - 2048 on
        // UInt64 as "1"): the ends of the integers a double holds exactly, ±2^53, are declared
        // right.
        "Int64" => (-9_007_199_254_740_992.0, 9_007_199_254_740_992.0),
        "UInt64" => (0.0, 9_007_199_254_740_992.0),
        _ => return Err(()),
    }))
}

/// The fill of a warp's output when the output grid reaches outside the source (a
/// reprojection's wedges, bounds past the raster, a rotated raster regridded north-up): gdalwarp
/// writes 0 into every cell no source cell reaches and declares nothing, so the fill reads as
/// data, a height of 0 m, a class 0 (attack round 13, R13-B3). When no band declares a nodata,
/// or only some do (gdalwarp 3.6 then declares its internal -123456.789 on every band of a
/// GTiff and writes the wedges clamped to the type, 255 and 0 in Byte: attack round 14,
/// R14-B2), one value the data cannot hold is passed for every band: a nodata some bands
/// already declare when no other band's values reach it, else NaN for a floating-point or
/// complex output, for an integer output the type's extreme (its minimum when signed, else its
/// maximum) or its other end, that no band holds (read exactly, nodata left out; 64-bit
/// integers too, with ±2^53: R14-B1). A last band that is an alpha band is left out: gdalwarp carries it
/// and the cells outside are transparent ([`OutsideFill::Alpha`], R14-B3). An error, naming
/// `nodata`, when the bands fill the type's whole range.
pub fn fill_nodata(
    path: &std::path::Path,
    dataset: &gdal::Dataset,
    output_type: Option<&str>,
) -> Result<OutsideFill, GdalError> {
    let count = dataset.raster_count();
    let _quiet = crate::gdal::ErrorCapture::start();
    let alpha = count > 1
        && dataset.rasterband(count).is_ok_and(|band| {
            band.color_interpretation() == gdal::raster::ColorInterpretation::AlphaBand
        });
    let bands: Vec<usize> = (1..if alpha { count } else { count + 1 }).collect();
    let declared: Vec<Option<f64>> = bands
        .iter()
        .map(|&index| {
            dataset
                .rasterband(index)
                .ok()
                // A nodata the band's type cannot hold marks no cell: such a band declares
                // none for the fill (attack round 19, R19-B2: a Byte band declaring -1 had its
                // outside cells written 0, the clamped -1, read as data).
                .and_then(|band| crate::gdal::facts::nodata::band_nodata(&band))
        })
        .collect();
    let undeclared: Vec<usize> = bands
        .iter()
        .zip(&declared)
        .filter(|(_, d)| d.is_none())
        .map(|(b, _)| *b)
        .collect();
    if undeclared.is_empty() {
        return Ok(OutsideFill::Declared);
    }
    if alpha && undeclared.len() == bands.len() {
        return Ok(OutsideFill::Alpha);
    }
    let mixed = undeclared.len() < bands.len();
    let type_name = match output_type {
        Some(name) => name.to_string(),
        None => dataset
            .rasterband(1)
            .map(|band| crate::gdal::facts::band_type_name(&band))
            .unwrap_or_default(),
    };
    let Ok(range) = fill_range(&type_name) else {
        return Err(GdalError::Arguments(format!(
            "nodata: the input declares no nodata and its type {type_name} has no value this \
             server can reserve for the cells of the output no source cell reaches; pass \
             \"nodata\" with the value they should get"
        )));
    };
    let mut candidates: Vec<f64> = Vec::new();
    for value in declared.iter().flatten() {
        if !candidates
            .iter()
            .any(|c| c == value || (c.is_nan() && value.is_nan()))
        {
            candidates.push(*value);
        }
    }
    match range {
        None => candidates.push(f64::NAN),
        Some((low, high)) if low < 0.0 => candidates.extend([low, high]),
        Some((low, high)) => candidates.extend([high, low]),
    }
    // A NaN first (a float band declaring NaN, or a float output): no value is NaN.
    if candidates.first().is_some_and(|c| c.is_nan()) {
        return Ok(OutsideFill::Value {
            value: f64::NAN,
            undeclared,
            mixed,
        });
    }
    let _memory = crate::gdal::policy::blocks::reserve(
        "the input's range, for the nodata of the output's cells outside it",
        path,
        dataset,
        &bands,
        crate::gdal::policy::blocks::Reach::Full,
    )?;
    let mut ranges = Vec::with_capacity(bands.len());
    for &index in &bands {
        let band = dataset.rasterband(index).map_err(|e| GdalError::Failed {
            operation: format!("reading band {index} of {}", path.display()),
            message: e.to_string(),
        })?;
        // A band under a mask: only its valid cells hold values (gdalwarp reads the masked
        // ones as invalid; R14-B3).
        if crate::gdal::facts::mask::mask_source(&band).is_some() {
            if let Some(range) = masked_range(&band).map_err(|e| GdalError::Failed {
                operation: format!("reading band {index} of {} under its mask", path.display()),
                message: e.to_string(),
            })? {
                ranges.push(range);
            }
            continue;
        }
        match band.compute_raster_min_max(false) {
            Ok(r) => ranges.push((r.min, r.max)),
            // A band of nothing but nodata holds no value.
            Err(_) if band.no_data_value().is_some() => {}
            Err(e) => {
                return Err(GdalError::Failed {
                    operation: format!("reading the range of band {index} of {}", path.display()),
                    message: e.to_string(),
                })
            }
        }
    }
    let fits = |c: f64| range.is_none_or(|(low, high)| (low..=high).contains(&c));
    match candidates
        .into_iter()
        .filter(|c| c.is_nan() || fits(*c))
        .find(|c| c.is_nan() || ranges.iter().all(|(min, max)| c < min || c > max))
    {
        Some(value) => Ok(OutsideFill::Value {
            value,
            undeclared,
            mixed,
        }),
        None => {
            let (low, high) = range.unwrap_or((f64::NAN, f64::NAN));
            Err(GdalError::Arguments(format!(
                "nodata: the input declares no nodata{} and its values fill {type_name}'s whole \
                 range ({} to {}), so the cells of the output no source cell reaches (outside \
                 the source's footprint on the new grid) would be written as 0, a value of the \
                 data; pass \"nodata\" with the value they should get (it must differ from \
                 every value of the data), or warp a copy in a wider type",
                if mixed { " on some bands" } else { "" },
                number(low),
                number(high)
            )))
        }
    }
}

/// The output grid gdalwarp would choose by default for `dataset` (in `source_wkt`) warped to
/// `target_wkt`: its geotransform and size. `None` when GDAL cannot suggest one.
pub fn suggested_output(
    dataset: &gdal::Dataset,
    source_wkt: &str,
    target_wkt: &str,
) -> Option<([f64; 6], u64, u64)> {
    let _capture = crate::gdal::ErrorCapture::start();
    let transformer = ImageTransformer::new(dataset, source_wkt, target_wkt)?;
    let mut geotransform = [0f64; 6];
    let (mut pixels, mut lines) = (0, 0);
    let mut extent = [0f64; 4];
    // SAFETY: the dataset handle and the transformer outlive the call; the output buffers
    // have the sizes GDAL writes.
    let err = unsafe {
        gdal_sys::GDALSuggestedWarpOutput2(
            transformer.dataset.c_dataset(),
            Some(gdal_sys::GDALGenImgProjTransform),
            transformer.handle,
            geotransform.as_mut_ptr(),
            &mut pixels,
            &mut lines,
            extent.as_mut_ptr(),
            0,
        )
    };
    if err != gdal_sys::CPLErr::CE_None || pixels <= 0 || lines <= 0 {
        return None;
    }
    Some((geotransform, pixels as u64, lines as u64))
}

/// Rows and columns of the output grid sampled by [`most_source_cells`] in each direction
/// (the first and last included): every one below this many.
const WEIGHT_LATTICE: u64 = 101;

/// The margin [`most_source_cells`] adds to the largest count it measured, for the cells
/// between its samples and gdalwarp's approximate transformer (`-et 0.125`): measured within
/// 0.05 % of gdalwarp's own sums in the cases its test checks.
const WEIGHT_MARGIN: f64 = 1.05;

/// The most source cells one cell of the output grid (`geotransform`, `cols` x `rows`, in
/// `target_wkt`) covers when `dataset` (in `source_wkt`) is warped onto it, as gdalwarp's
/// `sum` counts them: the output cell's top-left and bottom-right corners are mapped back to
/// the source through the transformer gdalwarp builds, and the rectangle between them counts
/// its source cells by area (cells cut by its edge by the part covered). The scale of a
/// reprojection changes across the raster (EPSG:4326 over 0..80° N to EPSG:3857 at the
/// default grid: 1.0 source cell per output cell at the equator, 3.01 at the top), so the count
/// is taken at every cell of a lattice over the whole grid (every cell of a grid up to
/// [`WEIGHT_LATTICE`] across, the corners and the edges included) and the largest is kept,
/// times [`WEIGHT_MARGIN`]. Cells clipped by the source's edge count whole (an upper bound).
/// `None` when the transformer cannot be built or no sampled cell maps back.
pub fn most_source_cells(
    dataset: &gdal::Dataset,
    source_wkt: &str,
    target_wkt: &str,
    geotransform: [f64; 6],
    cols: u64,
    rows: u64,
) -> Option<f64> {
    let _capture = crate::gdal::ErrorCapture::start();
    let transformer = ImageTransformer::new(dataset, source_wkt, target_wkt)?;
    let samples = |n: u64| -> Vec<f64> {
        let n = n.max(1);
        let k = n.min(WEIGHT_LATTICE);
        if k <= 1 {
            return vec![0.0];
        }
        let mut at: Vec<f64> = (0..k)
            .map(|i| ((n - 1) as f64 * i as f64 / (k - 1) as f64).round())
            .collect();
        at.dedup();
        at
    };
    let (columns, lines) = (samples(cols), samples(rows));
    let gt = geotransform;
    let georef = |col: f64, row: f64| {
        (
            gt[0] + col * gt[1] + row * gt[2],
            gt[3] + col * gt[4] + row * gt[5],
        )
    };
    let mut largest: Option<f64> = None;
    for &row in &lines {
        // Each sampled cell's top-left corner, then its bottom-right one.
        let (mut x, mut y): (Vec<f64>, Vec<f64>) = columns
            .iter()
            .flat_map(|&col| [georef(col, row), georef(col + 1.0, row + 1.0)])
            .unzip();
        let transformed = transformer.to_source(&mut x, &mut y);
        for (i, corners) in transformed.chunks(2).enumerate() {
            if corners.iter().all(|&ok| ok) {
                let (a, b) = (2 * i, 2 * i + 1);
                let cells = (x[a] - x[b]).abs() * (y[a] - y[b]).abs();
                if cells.is_finite() {
                    largest = Some(largest.map_or(cells, |l| l.max(cells)));
                }
            }
        }
    }
    largest.map(|cells| cells * WEIGHT_MARGIN)
}

/// The nodata a file written by `driver` in `data_type` with the nodata `value` declares when
/// read back: a 2 x 2 in-memory raster copied by the driver into an in-memory file and
/// reopened (`Some(None)`: it declares none). `None` when the probe cannot be made (a driver
/// that cannot write an in-memory file): then nothing is known. GDAL 3.6's GS7BG writes its
/// own fixed nodata (1.70141e38) and XYZ none, whatever the source declares (attack round
/// 14, R14-B8).
pub fn nodata_read_back(driver: &str, data_type: &str, value: f64) -> Option<Option<f64>> {
    use gdal::Metadata;
    let _quiet = crate::gdal::ErrorCapture::start();
    let target = gdal::DriverManager::get_driver_by_name(driver).ok()?;
    let memory = gdal::DriverManager::get_driver_by_name("MEM").ok()?;
    let type_name = crate::gdal::cstring(data_type).ok()?;
    // SAFETY: a NUL-terminated type name; GDAL returns GDT_Unknown for an unknown one.
    let gdal_type = unsafe { gdal_sys::GDALGetDataTypeByName(type_name.as_ptr()) };
    if gdal_type == gdal_sys::GDALDataType::GDT_Unknown {
        return None;
    }
    let empty = crate::gdal::cstring("").ok()?;
    // SAFETY: a live driver handle, a NUL-terminated name; the handle is owned below.
    let handle = unsafe {
        gdal_sys::GDALCreate(
            memory.c_driver(),
            empty.as_ptr(),
            2,
            2,
            1,
            gdal_type,
            std::ptr::null_mut(),
        )
    };
    if handle.is_null() {
        return None;
    }
    // SAFETY: a dataset handle GDALCreate just returned, owned by the wrapper from here.
    let mut source = unsafe { gdal::Dataset::from_c_dataset(handle) };
    source
        .set_geo_transform(&[0.0, 1.0, 0.0, 2.0, 0.0, -1.0])
        .ok()?;
    source
        .rasterband(1)
        .ok()?
        .set_no_data_value(Some(value))
        .ok()?;
    let extension = target
        .metadata_item("DMD_EXTENSION", "")
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "dat".to_string());
    let path = scratch_path("nodata-probe", &extension);
    let declared = source
        .create_copy(&target, &path, &gdal::raster::RasterCreationOptions::new())
        .ok()
        .and_then(|copy| {
            drop(copy);
            let reopened = gdal::Dataset::open(&path).ok()?;
            let band = reopened.rasterband(1).ok()?;
            Some(band.no_data_value())
        });
    // The driver may have written sidecars: remove every file of the probe.
    if let Ok(name) = crate::gdal::cstring(&path.to_string_lossy()) {
        // SAFETY: deletes the in-memory files of this probe; the path is NUL-terminated.
        unsafe { gdal_sys::GDALDeleteDataset(target.c_driver(), name.as_ptr()) };
    }
    unlink_scratch(&path);
    declared
}
