//! Reprojection and regridding with GDALWarp, in process: the same code path as the
//! `gdalwarp` command line, so outputs are pixel-identical to `gdalwarp` run with the
//! arguments in [`WarpRequest::gdalwarp_args`].

use super::output::Staging;
use super::{CArgv, ErrorCapture, GdalError};
use std::path::PathBuf;

/// One warp, fully specified.
#[derive(Debug, Clone)]
pub struct WarpRequest {
    pub input: PathBuf,
    pub output: PathBuf,
    pub dst_crs: String,
    pub src_crs: Option<String>,
    /// A gdalwarp `-r` method name.
    pub resampling: String,
    pub resolution: Option<(f64, f64)>,
    pub size: Option<(u32, u32)>,
    /// (xmin, ymin, xmax, ymax) and the CRS they are in (default: the target CRS).
    pub bounds: Option<([f64; 4], Option<String>)>,
    pub dst_nodata: Option<f64>,
    pub format: String,
    pub creation_options: Vec<(String, String)>,
}

/// What the warp produced.
#[derive(Debug, Clone)]
pub struct WarpOutcome {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

fn number(value: f64) -> String {
    // Rust's shortest round-trip representation: GDAL parses it back to the same double.
    format!("{value}")
}

impl WarpRequest {
    /// The `gdalwarp` arguments (without the source and destination paths).
    pub fn gdalwarp_args(&self) -> Vec<String> {
        let mut args = vec!["-of".to_string(), self.format.clone()];
        if let Some(src) = &self.src_crs {
            args.extend(["-s_srs".to_string(), src.clone()]);
        }
        args.extend(["-t_srs".to_string(), self.dst_crs.clone()]);
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
        if let Some(nodata) = self.dst_nodata {
            args.extend(["-dstnodata".to_string(), number(nodata)]);
        }
        for (key, value) in &self.creation_options {
            args.extend(["-co".to_string(), format!("{key}={value}")]);
        }
        args
    }

    /// Run the warp into a staging folder and move the result into place.
    pub fn run(&self) -> Result<WarpOutcome, GdalError> {
        let capture = ErrorCapture::start();
        let source = super::facts::open(&self.input)?;
        let staging = Staging::new(&self.output)?;
        let destination = super::cstring(&staging.path().to_string_lossy())?;
        let mut argv = CArgv::new(&self.gdalwarp_args())?;
        // SAFETY: argv is NULL-terminated and outlives the call.
        let options =
            unsafe { gdal_sys::GDALWarpAppOptionsNew(argv.as_mut_ptr(), std::ptr::null_mut()) };
        if options.is_null() {
            return Err(GdalError::Invalid(format!(
                "gdalwarp rejects the options: {}",
                capture.failure_text("invalid options")
            )));
        }
        let mut usage_error = 0;
        let mut sources = [source.c_dataset()];
        // SAFETY: the source handle lives as long as `source`; GDALWarp returns a new dataset
        // handle (or NULL) that we close at once to flush it.
        let written = unsafe {
            let out = gdal_sys::GDALWarp(
                destination.as_ptr(),
                std::ptr::null_mut(),
                1,
                sources.as_mut_ptr(),
                options,
                &mut usage_error,
            );
            gdal_sys::GDALWarpAppOptionsFree(options);
            if out.is_null() {
                false
            } else {
                gdal_sys::GDALClose(out);
                true
            }
        };
        drop(source);
        let failure = capture.messages().iter().any(|m| m.class != "warning");
        if !written || failure {
            return Err(GdalError::Failed {
                operation: format!("warping {}", self.input.display()),
                message: capture.failure_text(if usage_error != 0 {
                    "invalid gdalwarp usage"
                } else {
                    "GDALWarp returned no dataset"
                }),
            });
        }
        let warnings = capture.warnings();
        let files = staging.commit()?;
        Ok(WarpOutcome { files, warnings })
    }
}
