//! `gdal_translate` (plus `gdaladdo` for GTiff overviews) in process, beside [`crate::gdal::raster::warp`]:
//! the same code path as the command line, so outputs equal what the reported command lines
//! produce.

use crate::gdal::programs::{self, Program};
use crate::gdal::{raster::overviews, GdalError};
use std::path::PathBuf;

/// One conversion, fully specified.
#[derive(Debug, Clone)]
pub struct TranslateRequest {
    pub input: PathBuf,
    pub output: PathBuf,
    /// The `gdal_translate` arguments (without the paths).
    pub args: Vec<String>,
    /// GTiff overviews to build on the staged copy: (gdaladdo method, levels or automatic).
    pub overviews: Option<(String, Option<Vec<u32>>)>,
}

/// What a conversion produced.
#[derive(Debug, Clone)]
pub struct TranslateOutcome {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<String>,
    /// The output, described from the staged copy.
    pub written: crate::gdal::facts::DatasetFacts,
    /// The equivalent command lines, in order.
    pub commands: Vec<Vec<String>>,
    /// The overview levels built, if any.
    pub overview_levels: Option<Vec<u32>>,
}

impl TranslateRequest {
    /// Convert into a staging folder, build the overviews there, and move it all into place.
    pub fn run(&self) -> Result<TranslateOutcome, GdalError> {
        let (source, _blocks) = programs::open_input("raster_convert: the input", &self.input)?;
        let mut built = None;
        let outcome = programs::run(
            &Program::Translate,
            &source,
            &self.args,
            &self.output,
            |staged| {
                if let Some((method, levels)) = &self.overviews {
                    let levels = levels.clone().unwrap_or_else(|| {
                        let (w, h) = source.raster_size();
                        overviews::auto_levels(w, h)
                    });
                    overviews::build_into(staged, method, &levels)?;
                    built = Some(levels);
                }
                Ok(())
            },
        )?;
        let mut commands =
            vec![Program::Translate.command_line(&self.args, &self.input, &self.output)];
        if let (Some((method, _)), Some(levels)) = (&self.overviews, &built) {
            let mut addo = vec![
                "gdaladdo".to_string(),
                "-r".to_string(),
                method.clone(),
                self.output.display().to_string(),
            ];
            addo.extend(levels.iter().map(u32::to_string));
            commands.push(addo);
        }
        Ok(TranslateOutcome {
            files: outcome.files,
            warnings: outcome.warnings,
            written: outcome.written,
            commands,
            overview_levels: built,
        })
    }
}
