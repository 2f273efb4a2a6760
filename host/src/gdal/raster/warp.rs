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
}

impl WarpRequest {
    /// The `gdalwarp` arguments (without the source and destination paths).
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
        if let Some(nodata) = self.dst_nodata {
            args.extend(["-dstnodata".to_string(), number(nodata)]);
        }
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
        self.run_from(&source, &self.gdalwarp_args())
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
        programs::run(&Program::Warp, source, args, &self.output, |_| Ok(())).map_err(|e| match e {
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
    /// * gdalwarp reads the full-resolution cells (`-ovr NONE`): by default it reads the
    ///   overview closest to the target resolution, so a raster with overviews built by
    ///   `nearest` was "averaged" into the overview's samples.
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
        static SCRATCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut args = self.gdalwarp_args();
        args.extend(["-ovr".to_string(), "NONE".to_string()]);
        let source = crate::gdal::facts::open(&self.input)?;
        let Some((width, height)) = padded else {
            let outcome = self.run_from(&source, &args)?;
            let command = Program::Warp.command_line(&args, &self.input, &self.output);
            return Ok((outcome, vec![command]));
        };
        let mut pad = vec![
            "-of".to_string(),
            "VRT".to_string(),
            "-srcwin".to_string(),
            "0".to_string(),
            "0".to_string(),
            width.to_string(),
            height.to_string(),
        ];
        if let Some(band) = padding_mask_band(&source) {
            pad.extend(["-mask".to_string(), format!("mask,{band}")]);
        }
        let scratch = PathBuf::from(format!(
            "{}warp-padded-{}-{}.vrt",
            crate::gdal::policy::SCRATCH_PREFIX,
            std::process::id(),
            SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        // gdal_translate warns that the window passes the raster: that is the point.
        let outcome = programs::run_in_memory(&Program::Translate, &source, &pad, &scratch)
            .and_then(|_| crate::gdal::facts::open(&scratch))
            .and_then(|copy| self.run_from(&copy, &args));
        if let Ok(path) = crate::gdal::cstring(&scratch.to_string_lossy()) {
            // SAFETY: unlinks an in-memory file this call created; the path is NUL-terminated.
            unsafe { gdal_sys::VSIUnlink(path.as_ptr()) };
        }
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

/// The output grid gdalwarp would choose by default for `dataset` (in `source_wkt`) warped to
/// `target_wkt`: its geotransform and size. `None` when GDAL cannot suggest one.
pub fn suggested_output(
    dataset: &gdal::Dataset,
    source_wkt: &str,
    target_wkt: &str,
) -> Option<([f64; 6], u64, u64)> {
    let _capture = crate::gdal::ErrorCapture::start();
    let source = crate::gdal::cstring(source_wkt).ok()?;
    let target = crate::gdal::cstring(target_wkt).ok()?;
    // SAFETY: the dataset handle and both strings outlive the calls; the transformer is
    // destroyed before returning; the output buffers have the sizes GDAL writes.
    unsafe {
        let transformer = gdal_sys::GDALCreateGenImgProjTransformer(
            dataset.c_dataset(),
            source.as_ptr(),
            std::ptr::null_mut(),
            target.as_ptr(),
            0,
            0.0,
            0,
        );
        if transformer.is_null() {
            return None;
        }
        let mut geotransform = [0f64; 6];
        let (mut pixels, mut lines) = (0, 0);
        let mut extent = [0f64; 4];
        let err = gdal_sys::GDALSuggestedWarpOutput2(
            dataset.c_dataset(),
            Some(gdal_sys::GDALGenImgProjTransform),
            transformer,
            geotransform.as_mut_ptr(),
            &mut pixels,
            &mut lines,
            extent.as_mut_ptr(),
            0,
        );
        gdal_sys::GDALDestroyGenImgProjTransformer(transformer);
        if err != gdal_sys::CPLErr::CE_None || pixels <= 0 || lines <= 0 {
            return None;
        }
        Some((geotransform, pixels as u64, lines as u64))
    }
}
