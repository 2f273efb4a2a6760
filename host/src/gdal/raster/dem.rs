//! `gdaldem` (slope, aspect, hillshade, TRI, TPI, roughness) in process, beside
//! [`crate::gdal::raster::warp`]: the same code path as the command line.
//!
//! gdaldem takes rows as running north to south. A south-up DEM (positive north-south pixel
//! size) is flipped into a north-up in-memory copy first, so aspect and hillshade face the
//! right way (slope, TRI, TPI and roughness do not depend on the row direction, and come out
//! the same); the output is then north-up, georeferenced as the ground is.

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
        let flipped = match opened.geo_transform() {
            Ok(gt) if gt[5] > 0.0 && gt[2] == 0.0 && gt[4] == 0.0 => Some(north_up(&opened, gt)?),
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

/// A north-up in-memory Float32 copy of a south-up raster: rows reversed, the origin moved to
/// the northern edge, the pixel height negated; CRS, nodata, scale, offset and unit kept.
fn north_up(source: &Dataset, gt: [f64; 6]) -> Result<Dataset, GdalError> {
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
    copy.set_geo_transform(&[
        gt[0],
        gt[1],
        0.0,
        gt[3] + gt[5] * height as f64,
        0.0,
        -gt[5],
    ])
    .map_err(failed)?;
    if let Ok(srs) = source.spatial_ref() {
        copy.set_spatial_ref(&srs).map_err(failed)?;
    }
    for index in 1..=count {
        let band = source.rasterband(index).map_err(failed)?;
        // Float32, as gdaldem computes; the cells were checked against the cell budget.
        // As GDAL reads the band: PIXELTYPE=SIGNEDBYTE is -128..127 (R8-12).
        let mut data =
            crate::gdal::facts::read_cells::<f32>(&band, (0, 0), (width, height), (width, height))
                .map_err(failed)?
                .into_shape_and_vec()
                .1;
        // Rows in reverse order, in place: the last (northernmost) row first.
        for top in 0..height / 2 {
            let bottom = height - 1 - top;
            let (upper, lower) = data.split_at_mut(bottom * width);
            upper[top * width..(top + 1) * width].swap_with_slice(&mut lower[..width]);
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
        let masked = crate::gdal::facts::mask::mask_source(&band).map(|_| f64::NAN);
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
