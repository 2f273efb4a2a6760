//! Reprojection and regridding with GDALWarp, in process: the same code path as the
//! `gdalwarp` command line, so outputs are pixel-identical to `gdalwarp` run with the
//! arguments in [`WarpRequest::gdalwarp_args`].

use crate::gdal::programs::{self, number, Program};
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

/// What the warp produced.
#[derive(Debug, Clone)]
pub struct WarpOutcome {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<String>,
    /// The output, described from the staged copy.
    pub written: crate::gdal::facts::DatasetFacts,
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
    pub fn run(&self) -> Result<WarpOutcome, GdalError> {
        let source = crate::gdal::facts::open(&self.input)?;
        // gdalwarp reads the input through its whole blocks, or its overviews' (issue 21
        // attack round 4, B3).
        let _blocks = crate::gdal::policy::blocks::reserve(
            "the warp's input",
            &self.input,
            &source,
            &[],
            crate::gdal::policy::blocks::Reach::Any,
        )?;
        let outcome = programs::run(
            &Program::Warp,
            &source,
            &self.gdalwarp_args(),
            &self.output,
            |_| Ok(()),
        )
        .map_err(|e| match e {
            GdalError::Failed { message, .. } => GdalError::Failed {
                operation: format!("warping {}", self.input.display()),
                message,
            },
            other => other,
        })?;
        Ok(WarpOutcome {
            files: outcome.files,
            warnings: outcome.warnings,
            written: outcome.written,
        })
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
