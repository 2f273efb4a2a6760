//! `gdaldem` (slope, aspect, hillshade, TRI, TPI, roughness) in process, beside
//! [`crate::gdal::raster::warp`]: the same code path as the command line.
//!
//! gdaldem takes rows as running north to south. A south-up DEM (positive north-south pixel
//! size) is flipped into a north-up in-memory copy first, so aspect and hillshade face the
//! right way (slope, TRI, TPI and roughness do not depend on the row direction, and come out
//! the same); the output is then north-up, georeferenced as the ground is. A DEM whose invalid
//! cells a GDAL mask marks is copied too, those cells as nodata, since gdaldem reads only a
//! band's nodata value.

use crate::gdal::programs::{self, Program};
use crate::gdal::GdalError;
use gdal::raster::Buffer;
use gdal::{Dataset, DriverManager};
use std::path::PathBuf;

/// One `gdaldem` run, fully specified.
#[derive(Debug, Clone)]
pub struct DemRequest {
    pub input: PathBuf,
    pub output: PathBuf,
    /// The processing mode as gdaldem names it (`slope`, `TRI`...).
    pub processing: String,
    /// The `gdaldem` arguments (without the mode and the paths).
    pub args: Vec<String>,
}

/// What a `gdaldem` run produced.
#[derive(Debug, Clone)]
pub struct DemOutcome {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<String>,
    /// The output, described from the staged copy.
    pub written: crate::gdal::facts::DatasetFacts,
    /// The equivalent command line.
    pub command: Vec<String>,
}

impl DemRequest {
    /// Run into a staging folder and move the output into place.
    pub fn run(&self) -> Result<DemOutcome, GdalError> {
        let program = Program::Dem(self.processing.clone());
        // The flip reads the input through its whole blocks too.
        let (opened, _blocks) = programs::open_input("raster_terrain: the input", &self.input)?;
        // gdaldem reads a complex band's real parts, as every reader of cells would (R14-B15).
        let band_index = self
            .args
            .iter()
            .position(|a| a == "-b")
            .and_then(|i| self.args.get(i + 1))
            .and_then(|b| b.parse::<usize>().ok())
            .unwrap_or(1);
        if let Some(refusal) = opened
            .rasterband(band_index)
            .ok()
            .and_then(|band| crate::gdal::facts::complex_band_refusal(&band))
        {
            return Err(GdalError::Arguments(format!(
                "input: band {band_index} of {}: {refusal}",
                self.input.display()
            )));
        }
        // gdaldem reads a band's nodata value, not its GDAL mask: a DEM whose invalid cells a
        // mask marks is copied with those cells as nodata first (attack round 14, R14-B4: 80
        // cells over 45° on a 5.7° plane, the masked cells 0.0).
        let masked = crate::gdal::facts::mask::any_band_masked(&opened);
        let flipped = match opened.geo_transform() {
            Ok(gt)
                if gt[5] > 0.0
                    && !crate::gdal::facts::georef::is_rotated(&gt, opened.raster_size()) =>
            {
                Some(float_copy(&opened, gt, true)?)
            }
            Ok(gt) if masked => Some(float_copy(&opened, gt, false)?),
            _ => None,
        };
        let source = flipped.as_ref().unwrap_or(&opened);
        // A COG builds overviews with CUBIC by default: none here (raster_overviews is gated).
        let mut args = self.args.clone();
        let format = args
            .iter()
            .position(|a| a == "-of")
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_default();
        for (key, value) in crate::gdal::policy::overview_options(&format, None) {
            args.extend(["-co".to_string(), format!("{key}={value}")]);
        }
        let outcome = programs::run(&program, source, &args, &self.output, |_| Ok(()))?;
        Ok(DemOutcome {
            files: outcome.files,
            warnings: outcome.warnings,
            written: outcome.written,
            command: program.command_line(&args, &self.input, &self.output),
        })
    }
}

/// An in-memory Float32 copy of a raster, its masked cells written as nodata (the band's own,
/// or NaN), and with `flip` a south-up raster made north-up: rows reversed, the origin moved
/// to the northern edge, the pixel height negated; CRS, nodata, scale, offset and unit kept.
fn float_copy(source: &Dataset, gt: [f64; 6], flip: bool) -> Result<Dataset, GdalError> {
    let failed = |e: gdal::errors::GdalError| GdalError::Failed {
        operation: "flipping a south-up DEM north-up".to_string(),
        message: e.to_string(),
    };
    let (width, height) = source.raster_size();
    let count = source.raster_count();
    let driver = DriverManager::get_driver_by_name("MEM").map_err(failed)?;
    let mut copy = driver
        .create_with_band_type::<f32, _>("", width, height, count)
        .map_err(failed)?;
    let placed = if flip {
        [
            gt[0],
            gt[1],
            0.0,
            gt[3] + gt[5] * height as f64,
            0.0,
            -gt[5],
        ]
    } else {
        gt
    };
    copy.set_geo_transform(&placed).map_err(failed)?;
    if let Ok(srs) = source.spatial_ref() {
        copy.set_spatial_ref(&srs).map_err(failed)?;
    }
    for index in 1..=count {
        let band = source.rasterband(index).map_err(failed)?;
        // Float32, as gdaldem computes; the cells were checked against the cell budget.
        // As GDAL reads the band: PIXELTYPE=SIGNEDBYTE is -128..127 (R8-12).
        let mut data =
            crate::gdal::facts::read_cells::<f32>(&band, (0, 0), (width, height), (width, height))
                .map_err(|e| {
                    crate::gdal::facts::cell_read_error(e, || format!("band {index}"), failed)
                })?
                .into_shape_and_vec()
                .1;
        // Rows in reverse order, in place: the last (northernmost) row first.
        for top in 0..if flip { height / 2 } else { 0 } {
            let bottom = height - 1 - top;
            let (upper, lower) = data.split_at_mut(bottom * width);
            upper[top * width..(top + 1) * width].swap_with_slice(&mut lower[..width]);
        }
        // Masked cells were read as NaN (R13-B6): the band's own nodata where it has one.
        let masked = crate::gdal::facts::mask::mask_source(&band).is_some();
        if let (true, Some(nodata)) = (masked, band.no_data_value()) {
            for value in data.iter_mut().filter(|v| v.is_nan()) {
                *value = nodata as f32;
            }
        }
        let mut target = copy.rasterband(index).map_err(failed)?;
        target
            .write(
                (0, 0),
                (width, height),
                &mut Buffer::new((width, height), data),
            )
            .map_err(failed)?;
        // A band whose GDAL mask was read as NaN (R13-B6) gives the copy NaN as its nodata.
        let masked = masked.then_some(f64::NAN);
        if let Some(nodata) = band.no_data_value().or(masked) {
            target.set_no_data_value(Some(nodata)).map_err(failed)?;
        }
        if let Some(scale) = band.scale() {
            target.set_scale(scale).map_err(failed)?;
        }
        if let Some(offset) = band.offset() {
            target.set_offset(offset).map_err(failed)?;
        }
        let unit = band.unit();
        if !unit.is_empty() {
            if let Ok(unit) = std::ffi::CString::new(unit) {
                // SAFETY: a live band handle and a NUL-terminated string GDAL copies.
                unsafe { gdal_sys::GDALSetRasterUnitType(target.c_rasterband(), unit.as_ptr()) };
            }
        }
    }
    Ok(copy)
}
