//! `gdaldem` (slope, aspect, hillshade, TRI, TPI, roughness) in process, beside
//! [`super::warp`]: the same code path as the command line.

use super::programs::{self, Program};
use super::GdalError;
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
    pub written: super::facts::DatasetFacts,
    /// The equivalent command line.
    pub command: Vec<String>,
}

impl DemRequest {
    /// Run into a staging folder and move the output into place.
    pub fn run(&self) -> Result<DemOutcome, GdalError> {
        let program = Program::Dem(self.processing.clone());
        let source = super::facts::open(&self.input)?;
        // A COG builds overviews with CUBIC by default: none here (raster_overviews is gated).
        let mut args = self.args.clone();
        let format = args
            .iter()
            .position(|a| a == "-of")
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_default();
        for (key, value) in super::policy::overview_options(&format, None) {
            args.extend(["-co".to_string(), format!("{key}={value}")]);
        }
        let outcome = programs::run(&program, &source, &args, &self.output, |_| Ok(()))?;
        Ok(DemOutcome {
            files: outcome.files,
            warnings: outcome.warnings,
            written: outcome.written,
            command: program.command_line(&args, &self.input, &self.output),
        })
    }
}
