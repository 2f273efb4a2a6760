//! Per-pixel compositing of several rasters with GDAL I/O around the numeric core in
//! [`crate::aggregation::composite`].
//!
//! The first input defines the grid. Inputs on the same grid are read as they are; inputs on
//! another grid are first warped onto it in memory (`/vsimem/`, gdalwarp with the method the
//! caller chose). The output GeoTIFF is written in row strips into a staging folder and moved
//! into place when complete, so memory stays at a few strips per input whatever the raster size.

use crate::aggregation::{self, Statistic};
use crate::gdal::output::Staging;
use crate::gdal::programs::{self, number, Program};
use crate::gdal::{ErrorCapture, GdalError};
use gdal::raster::{Buffer, RasterCreationOptions};
use gdal::{Dataset, DriverManager};
use std::path::{Path, PathBuf};

/// Rows per strip.
const STRIP_ROWS: usize = 256;

/// The grid of a raster, for alignment checks.
#[derive(Debug, Clone)]
pub struct GridInfo {
    pub width: usize,
    pub height: usize,
    pub geotransform: [f64; 6],
    pub wkt: Option<String>,
}

/// How the input grids of a composite relate (the domains' `grid-relation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridRelation {
    /// Every input is on the first input's grid: nothing is resampled.
    Aligned,
    /// At least one input is on another grid and is warped onto the first input's.
    Differ,
}

impl GridRelation {
    /// The relation in the tool's report: `aligned` or `differ`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aligned => "aligned",
            Self::Differ => "differ",
        }
    }
}

/// Whether `b` lies on exactly the grid of `a` (same size, same geotransform up to 1e-9 of a
/// cell, same CRS).
pub fn same_grid(a: &Dataset, b: &Dataset) -> bool {
    let (Ok(ga), Ok(gb)) = (a.geo_transform(), b.geo_transform()) else {
        return false;
    };
    let close = crate::gdal::facts::georef::same_grid(&ga, &gb, a.raster_size());
    let crs = match (a.spatial_ref(), b.spatial_ref()) {
        (Ok(x), Ok(y)) => x == y,
        (Err(_), Err(_)) => true,
        _ => false,
    };
    a.raster_size() == b.raster_size() && close && crs
}

/// One compositing job.
#[derive(Debug, Clone)]
pub struct CompositeRequest {
    pub inputs: Vec<PathBuf>,
    pub band: usize,
    pub statistic: Statistic,
    /// gdalwarp method for inputs on another grid (required when there are any).
    pub resampling: Option<String>,
    pub out_nodata: Option<f64>,
    pub output: PathBuf,
    pub creation_options: Vec<(String, String)>,
}

/// What the composite produced.
#[derive(Debug, Clone)]
pub struct CompositeOutcome {
    pub files: Vec<PathBuf>,
    /// The output, described from the staged copy.
    pub written: crate::gdal::facts::DatasetFacts,
    /// The gdalwarp command that put each unlike input on the grid (input index, command).
    pub warps: Vec<(usize, Vec<String>)>,
    /// Cells where no input had a valid value.
    pub empty_cells: u64,
    pub width: usize,
    pub height: usize,
    pub warnings: Vec<String>,
}

impl CompositeRequest {
    /// Run the composite.
    pub fn run(&self) -> Result<CompositeOutcome, GdalError> {
        let capture = ErrorCapture::start();
        let reference = crate::gdal::facts::open(&self.inputs[0])?;
        let (width, height) = reference.raster_size();
        crate::gdal::policy::check_cells("inputs[0]", width as u64, height as u64, 1)?;
        let geotransform = reference.geo_transform().map_err(|_| {
            GdalError::Arguments("inputs[0]: the raster has no geotransform".to_string())
        })?;
        let wkt = reference.spatial_ref().ok().and_then(|s| s.to_wkt().ok());
        let mut datasets = Vec::with_capacity(self.inputs.len());
        let mut warps = Vec::new();
        let mut scratch = Vec::new();
        // Inputs warped by a method that makes new values (bilinear, average, ...): what the
        // composite reads of them are no input values, so their own cells are checked for
        // Float32 instead (R17-B8's Float64 warp made every interpolated value "changed").
        let mut interpolated: Vec<bool> = Vec::with_capacity(self.inputs.len());
        let mut narrowed = 0u64;
        let mut first_narrowed: Option<f64> = None;
        let mut widening_notes: Vec<String> = Vec::new();
        // Every input is read (or warped) through its whole blocks, strip after strip, all
        // inputs in turn (issue 21 attack round 4, B3).
        let mut blocks = Vec::with_capacity(self.inputs.len());
        for (index, path) in self.inputs.iter().enumerate() {
            let dataset = crate::gdal::facts::open(path)?;
            blocks.push(crate::gdal::policy::blocks::reserve(
                &format!("raster_composite: inputs[{index}]"),
                path,
                &dataset,
                &[self.band],
                crate::gdal::policy::blocks::Reach::Any,
            )?);
            if index == 0 || same_grid(&reference, &dataset) {
                datasets.push(dataset);
                interpolated.push(false);
                continue;
            }
            let Some(method) = &self.resampling else {
                return Err(GdalError::Arguments(format!(
                    "inputs[{index}]: {} is not on the grid of inputs[0]; pass `resampling` to \
                     warp it onto that grid",
                    path.display()
                )));
            };
            let memory = PathBuf::from(format!(
                "/vsimem/gdal-mcp-composite-{}-{index}.tif",
                std::process::id()
            ));
            let (x0, y0) = (geotransform[0], geotransform[3]);
            let x1 = x0 + geotransform[1] * width as f64;
            let y1 = y0 + geotransform[5] * height as f64;
            let mut args = vec!["-of".to_string(), "GTiff".to_string()];
            if let Some(wkt) = &wkt {
                args.extend(["-t_srs".to_string(), wkt.clone()]);
            }
            args.extend(["-r".to_string(), method.clone()]);
            args.extend([
                "-wm".to_string(),
                crate::gdal::raster::warp::warp_memory_megabytes().to_string(),
            ]);
            let extent = [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)];
            let mut grid = vec!["-ts".to_string(), width.to_string(), height.to_string()];
            grid.push("-te".to_string());
            grid.extend(extent.iter().map(|v| number(*v)));
            // The cells of the grid this input does not reach are not its values: gdalwarp
            // would write 0 there and declare nothing when the band declares no nodata, and
            // the composite counted them (a mean of 5 where the other input holds 10: attack
            // round 14, R14-B1). They are NaN, left out like every NaN cell.
            // A nodata the band's type cannot hold declares none (attack round 19, R19-B5: a
            // Byte input declaring -1 had its unreached cells filled with 0, the clamped -1,
            // and composited as values).
            let declares = dataset
                .rasterband(self.band)
                .is_ok_and(|b| crate::gdal::facts::nodata::band_nodata(&b).is_some());
            // Float64, so that the exactness check below sees the input's own values: Float32
            // here wrote 123456789.123 as 123456792 past that check (attack round 17, R17-B8).
            // Float64 whatever the input's type: an Int16 input averaged onto a coarser grid
            // was written Int16 before the statistic, 101 for 100.5 (attack round 23, R23-B22).
            args.extend(["-ot".to_string(), "Float64".to_string()]);
            if !declares {
                args.extend(["-dstnodata".to_string(), "nan".to_string()]);
            }
            // gdalwarp 3.6 has no band selection: pick the band through a VRT first.
            let band_vrt = PathBuf::from(format!(
                "/vsimem/gdal-mcp-composite-{}-{index}-band.vrt",
                std::process::id()
            ));
            let select = vec![
                "-of".to_string(),
                "VRT".to_string(),
                "-b".to_string(),
                self.band.to_string(),
            ];
            programs::run_in_memory(&Program::Translate, &dataset, &select, &band_vrt)?;
            let selected = crate::gdal::facts::open(&band_vrt)?;
            // Onto a grid too narrow for the method, on a widened grid (R22-B16: a one-cell
            // inputs[0] read every warped input as nodata).
            let narrow = crate::gdal::raster::warp::widening(
                &selected,
                (
                    &selected
                        .spatial_ref()
                        .ok()
                        .and_then(|s| s.to_wkt().ok())
                        .unwrap_or_default(),
                    wkt.as_deref().unwrap_or_default(),
                ),
                [
                    extent[0],
                    (extent[2] - extent[0]) / width as f64,
                    0.0,
                    extent[3],
                    0.0,
                    -(extent[3] - extent[1]) / height as f64,
                ],
                (width as u32, height as u32),
                method,
            )?;
            warps.push((
                index,
                Program::Translate.command_line(&select, path, &band_vrt),
            ));
            let warped = match narrow {
                None => {
                    let mut full = args.clone();
                    full.extend(grid);
                    let _working = crate::gdal::raster::warp::reserve_warp_memory()?;
                    let warped = warp_to_memory(&selected, &full, &memory)?;
                    warps.push((index, Program::Warp.command_line(&full, &band_vrt, &memory)));
                    warped
                }
                Some(widening) => {
                    let widened = PathBuf::from(format!(
                        "/vsimem/gdal-mcp-composite-{}-{index}-widened.tif",
                        std::process::id()
                    ));
                    let crop = vec![
                        "-of".to_string(),
                        "GTiff".to_string(),
                        "-srcwin".to_string(),
                        "0".to_string(),
                        "0".to_string(),
                        width.to_string(),
                        height.to_string(),
                    ];
                    let crate::gdal::raster::warp::WidenedWarp { pad, warp_args, .. } =
                        crate::gdal::raster::warp::warp_widened(
                            path, &selected, &args, &widening, &widened,
                        )?;
                    let cropped = crate::gdal::facts::open(&widened).and_then(|grid| {
                        programs::run_in_memory(&Program::Translate, &grid, &crop, &memory)
                    });
                    scratch.push(widened.clone());
                    cropped?;
                    let padded = band_vrt.with_extension("padded.vrt");
                    warps.push((
                        index,
                        Program::Translate.command_line(&pad, &band_vrt, &padded),
                    ));
                    warps.push((
                        index,
                        Program::Warp.command_line(&warp_args, &padded, &widened),
                    ));
                    warps.push((
                        index,
                        Program::Translate.command_line(&crop, &widened, &memory),
                    ));
                    widening_notes.push(format!("inputs[{index}]: {}", widening.note(method)));
                    crate::gdal::facts::open(&memory)?
                }
            };
            drop(selected);
            scratch.push(band_vrt);
            scratch.push(memory);
            let keeps_values = matches!(
                method.as_str(),
                "near" | "nearest" | "mode" | "min" | "max" | "med" | "q1" | "q3"
            );
            if !keeps_values {
                let (count, example) = float32_changes(&dataset, self.band)?;
                narrowed += count;
                if first_narrowed.is_none() {
                    first_narrowed = example;
                }
            }
            interpolated.push(!keeps_values);
            datasets.push(warped);
        }
        let bands: Vec<usize> = datasets
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if warps.iter().any(|(w, _)| *w == i) {
                    1
                } else {
                    self.band
                }
            })
            .collect();
        let mut nodata = Vec::with_capacity(datasets.len());
        let mut exact_nodata: Vec<Option<f64>> = Vec::with_capacity(datasets.len());
        for (dataset, band) in datasets.iter().zip(&bands) {
            let b = dataset.rasterband(*band).map_err(|_| {
                GdalError::Arguments(format!("band: band {band} does not exist in every input"))
            })?;
            // Strips are read as f32: the nodata as such a read holds it (R9-4).
            nodata.push(crate::gdal::facts::nodata::band_nodata_read_as_f32(&b));
            exact_nodata.push(crate::gdal::facts::nodata::band_nodata(&b));
        }

        // Physical values where an input band declares a scale or offset (read from the inputs
        // themselves: a warped copy need not carry them): a composite of two scenes with
        // different scales would otherwise mix unlike numbers.
        let mut physical = Vec::with_capacity(self.inputs.len());
        // The bands' declared units: a composite of heights in feet keeps `ft`, which the next
        // tool's unit rule reads (attack round 15, R15-B9: `raster_terrain` on a composite of
        // a `ft` DEM took the feet for metres); inputs in different units are unlike numbers.
        for path in &self.inputs {
            let dataset = crate::gdal::facts::open(path)?;
            let b = dataset.rasterband(self.band).map_err(|_| {
                GdalError::Arguments(format!(
                    "band: band {} does not exist in every input",
                    self.band
                ))
            })?;
            physical.push((b.scale().unwrap_or(1.0), b.offset().unwrap_or(0.0)));
        }
        let unit = declared_unit(&self.inputs, self.band)?;
        // The nodata the compositor compares each input's strip with: none where the strip
        // holds physical values (its nodata cells are NaN by then, and a physical value equal
        // to the raw nodata is a value).
        let strip_nodata: Vec<Option<f64>> = nodata
            .iter()
            .zip(&physical)
            .map(|(nd, (scale, offset))| {
                if *scale == 1.0 && *offset == 0.0 {
                    *nd
                } else {
                    None
                }
            })
            .collect();

        let staging = Staging::new(&self.output)?;
        let failed = capture.failing(format!("writing {}", self.output.display()));
        let count = self.statistic == Statistic::Count;
        let out_nodata = self.out_nodata.unwrap_or(f64::NAN);
        let mut empty_cells = 0u64;
        {
            let driver =
                DriverManager::get_driver_by_name("GTiff").map_err(|_| failed("no GTiff"))?;
            let mut options = RasterCreationOptions::new();
            for (key, value) in &self.creation_options {
                options
                    .add_name_value(key, value)
                    .map_err(|e| GdalError::Arguments(e.to_string()))?;
            }
            let mut out = if count {
                driver.create_with_band_type_with_options::<u16, _>(
                    staging.path(),
                    width,
                    height,
                    1,
                    &options,
                )
            } else {
                driver.create_with_band_type_with_options::<f32, _>(
                    staging.path(),
                    width,
                    height,
                    1,
                    &options,
                )
            }
            .map_err(|_| failed("cannot create the output"))?;
            out.set_geo_transform(&geotransform)
                .map_err(|_| failed("cannot set the geotransform"))?;
            if let Some(wkt) = &wkt {
                out.set_projection(wkt)
                    .map_err(|_| failed("cannot set the CRS"))?;
            }
            let mut out_band = out.rasterband(1).map_err(|_| failed("no band"))?;
            if !count {
                out_band
                    .set_no_data_value(Some(out_nodata))
                    .map_err(|_| failed("cannot set nodata"))?;
                if unit
                    .as_deref()
                    .is_some_and(|unit| !crate::gdal::set_band_unit(&out_band, unit))
                {
                    return Err(failed("cannot set the band's unit"));
                }
            }
            let mut strips: Vec<Vec<f32>> = vec![Vec::new(); datasets.len()];
            // Input values Float32 (the output's type) does not hold exactly (attack round 16,
            // R16-B4: a Float64 max wrote 16777216 for 16777217 and inf for 1e300, unsaid).
            let mut compositor = aggregation::Compositor::default();
            let mut row = 0;
            while row < height {
                if !crate::gdal::keep_going(row as f64 / height.max(1) as f64) {
                    return Err(crate::gdal::cancelled("composite"));
                }
                let rows = STRIP_ROWS.min(height - row);
                for (((((dataset, band), strip), exact), new_values), (scale, offset)) in datasets
                    .iter()
                    .zip(&bands)
                    .zip(&mut strips)
                    .zip(&exact_nodata)
                    .zip(&interpolated)
                    .zip(&physical)
                {
                    let b = dataset
                        .rasterband(*band)
                        .map_err(|_| failed("cannot read an input band"))?;
                    // As GDAL reads the band: PIXELTYPE=SIGNEDBYTE is -128..127 (R8-12).
                    // Read as f64 to see what Float32 would change (R16-B4).
                    let mut wide = read_strip(&b, *band, (row, rows), width)?;
                    if *scale == 1.0 && *offset == 0.0 {
                        for &v in wide.iter().filter(|_| !*new_values) {
                            if float32_changes_value(v, *exact) {
                                narrowed += 1;
                                first_narrowed.get_or_insert(v);
                            }
                        }
                    } else {
                        // Physical values, computed and checked in f64: packed timestamps
                        // (UInt16 plus an offset of 1.7e9) were cast to Float32 unchecked, 1,000
                        // distinct seconds written as 9 (attack round 19, R19-B1). Their last
                        // fractional digits are Float32's precision; a whole part it moves is
                        // a changed value.
                        for v in wide.iter_mut() {
                            *v = if v.is_nan() || exact.is_some_and(|n| *v == n) {
                                f64::NAN
                            } else {
                                *v * scale + offset
                            };
                            if !*new_values && crate::gdal::raster::float32_changes_whole_part(*v) {
                                narrowed += 1;
                                first_narrowed.get_or_insert(*v);
                            }
                        }
                    }
                    *strip = wide.iter().map(|&v| v as f32).collect();
                }
                let slices: Vec<&[f32]> = strips.iter().map(Vec::as_slice).collect();
                let mut result = vec![0f32; width * rows];
                compositor
                    .composite(
                        &slices,
                        &strip_nodata,
                        self.statistic,
                        out_nodata as f32,
                        &mut result,
                    )
                    .map_err(|e| GdalError::Algorithm(format!("composite: {e}")))?;
                // A sum or mean Float32 cannot hold: 10,000,000 + 10,000,001 was written
                // 20,000,000 (R19-B1).
                for value in compositor
                    .wide_results(self.statistic)
                    .into_iter()
                    .flatten()
                {
                    if crate::gdal::raster::float32_changes_whole_part(value) {
                        narrowed += 1;
                        first_narrowed.get_or_insert(value);
                    }
                }
                if count {
                    empty_cells += result.iter().filter(|v| **v == 0.0).count() as u64;
                    let data: Vec<u16> = result.iter().map(|v| *v as u16).collect();
                    let mut buffer = Buffer::new((width, rows), data);
                    out_band
                        .write((0, row as isize), (width, rows), &mut buffer)
                        .map_err(|_| failed("cannot write a strip"))?;
                } else {
                    let nodata32 = out_nodata as f32;
                    empty_cells += result
                        .iter()
                        .filter(|v| v.is_nan() || **v == nodata32)
                        .count() as u64;
                    let mut buffer = Buffer::new((width, rows), result);
                    out_band
                        .write((0, row as isize), (width, rows), &mut buffer)
                        .map_err(|_| failed("cannot write a strip"))?;
                }
                row += rows;
            }
            out.flush_cache().map_err(|_| failed("cannot flush"))?;
            // A count writes how many inputs hold a value, not a value (R21-B12).
            if let Some(example) = first_narrowed.filter(|_| !count) {
                return Err(GdalError::Arguments(format!(
                    "inputs: {narrowed} cell(s) hold values whose whole part or magnitude \
                     Float32 (the composite's output type) changes, e.g. {example} becomes {}; \
                     nothing was written. Compose them with raster_calc and data_type Float64 (e.g. \
                     expression \"max(a, b)\")",
                    f64::from(example as f32)
                )));
            }
        }
        drop(datasets);
        for memory in &scratch {
            if let Ok(path) = crate::gdal::cstring(&memory.to_string_lossy()) {
                // SAFETY: unlinks an in-memory file this job created; the path is NUL-terminated.
                unsafe { gdal_sys::VSIUnlink(path.as_ptr()) };
            }
        }
        let mut warnings = capture.warnings();
        warnings.extend(widening_notes);
        let written = crate::gdal::facts::gather("output", staging.path())?;
        let files = staging.commit()?;
        Ok(CompositeOutcome {
            files,
            written,
            warps,
            empty_cells,
            width,
            height,
            warnings,
        })
    }
}

/// The unit the composite of band `band` of `inputs` declares: the inputs' shared unit when
/// every input declares one, else none; inputs in unlike units are refused. Checked before
/// the gate as well as in the run (attack round 20, R20-B3: K and degC were refused only
/// after a justification had been asked for). A composite of heights in feet keeps `ft`,
/// which the next tool's unit rule reads (attack round 15, R15-B9); one unit in two spellings
/// (`m` and `metre`) is one unit (R17-B16).
pub fn declared_unit(inputs: &[PathBuf], band: usize) -> Result<Option<String>, GdalError> {
    let mut units: Vec<(String, &std::path::Path)> = Vec::new();
    for path in inputs {
        let dataset = crate::gdal::facts::open(path)?;
        let b = dataset.rasterband(band).map_err(|_| {
            GdalError::Arguments(format!("band: band {band} does not exist in every input"))
        })?;
        units.push((b.unit().trim().to_string(), path.as_path()));
    }
    let declared: Vec<&(String, &std::path::Path)> =
        units.iter().filter(|(u, _)| !u.is_empty()).collect();
    if let Some((first, first_path)) = declared.first() {
        if let Some((other, other_path)) = declared
            .iter()
            .find(|(u, _)| !crate::gdal::facts::same_unit(u, first))
        {
            return Err(GdalError::Arguments(format!(
                "inputs: {} declares its values in {first:?} and {} in {other:?}: a composite \
                 of unlike units is a wrong number; convert one into the other's unit first \
                 with raster_calc, passing `unit` (e.g. \"a - 273.15\" with unit \"degC\" for \
                 kelvin to degrees Celsius, \"a * 0.3048\" with unit \"m\" for feet to metres)",
                first_path.display(),
                other_path.display()
            )));
        }
    }
    Ok((declared.len() == units.len())
        .then(|| declared.first().map(|(u, _)| u.clone()))
        .flatten())
}

/// The cells of band `band` of `dataset` whose value Float32 does not hold exactly (its
/// nodata aside), and the first of them, read in strips.
fn float32_changes(dataset: &Dataset, band: usize) -> Result<(u64, Option<f64>), GdalError> {
    let b = dataset.rasterband(band).map_err(|_| {
        GdalError::Arguments(format!("band: band {band} does not exist in every input"))
    })?;
    let exact = crate::gdal::facts::nodata::band_nodata(&b);
    let (width, height) = b.size();
    let (mut count, mut first) = (0u64, None);
    let mut row = 0;
    while row < height {
        let rows = STRIP_ROWS.min(height - row);
        for v in read_strip(&b, band, (row, rows), width)? {
            if float32_changes_value(v, exact) {
                count += 1;
                first.get_or_insert(v);
            }
        }
        row += rows;
    }
    Ok((count, first))
}

/// Whether Float32 writes `v` as another value (the band's exact nodata aside): its whole
/// part or its magnitude ([`crate::gdal::raster::float32_changes_whole_part`]). A decimal's
/// last digits are Float32's precision: 10.1 has no exact binary form in either type, and
/// counting it refused every Float64 raster of measurements (attack round 21, R21-B12).
fn float32_changes_value(v: f64, exact_nodata: Option<f64>) -> bool {
    v.is_finite() && exact_nodata != Some(v) && crate::gdal::raster::float32_changes_whole_part(v)
}

/// `rows` rows of `b` (band number `band`) from row `row`, as f64, as GDAL reads them.
fn read_strip(
    b: &gdal::raster::RasterBand,
    band: usize,
    (row, rows): (usize, usize),
    width: usize,
) -> Result<Vec<f64>, GdalError> {
    let buffer =
        crate::gdal::facts::read_cells::<f64>(b, (0, row as isize), (width, rows), (width, rows))
            .map_err(|e| {
            crate::gdal::facts::cell_read_error(
                e,
                || format!("band {band} of an input"),
                |_| GdalError::Failed {
                    operation: "reading an input for the composite".to_string(),
                    message: "cannot read an input strip".to_string(),
                },
            )
        })?;
    Ok(buffer.into_shape_and_vec().1)
}

fn warp_to_memory(source: &Dataset, args: &[String], memory: &Path) -> Result<Dataset, GdalError> {
    programs::run_in_memory(&Program::Warp, source, args, memory)?;
    crate::gdal::facts::open(memory)
}
