//! The tools, one file per family. Each family file owns its argument and result types and its
//! handlers; the table in `server::registry` lists them. Family files never import each other:
//! what two families share lives here (result shapes), in `server::args` (argument types) or
//! below in `gdal/`.

pub mod aggregate;
pub mod analysis;
pub mod convert;
pub mod dem;
pub mod justify;
pub mod query;
pub mod raster;
pub mod vector;

use super::gated::Step;
use crate::gdal::facts::WrittenRaster;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// Result of the tools that write a raster.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RasterOutput {
    #[serde(flatten)]
    pub written: WrittenRaster,
    /// The equivalent command lines, in order; running them gives the same output.
    pub commands: Vec<Vec<String>>,
    /// GDAL warnings emitted while working.
    pub warnings: Vec<String>,
    /// Step-specific details (overview levels, statistics...).
    pub report: Value,
    /// The host's own computation in words, for lineage, when the commands do not replay
    /// the step (not part of the result).
    #[serde(skip)]
    pub computation: Option<String>,
}

impl Step for RasterOutput {
    fn commands(&self) -> Vec<Vec<String>> {
        self.commands.clone()
    }

    fn computation(&self) -> Option<String> {
        self.computation.clone()
    }
}
