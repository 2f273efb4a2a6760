//! Server configuration, independent of how it was given (CLI flags, tests, benchmarks).

use std::path::PathBuf;

/// Everything a server instance needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Directories tool calls may read from and write to; the first anchors relative paths.
    pub workspaces: Vec<PathBuf>,
    /// Root of the justification store; `None` means `.preflight/` in the first workspace.
    pub store: Option<PathBuf>,
    /// Extra folders whose `*.wasm` components are loaded after the built-in domains.
    pub plugin_dirs: Vec<PathBuf>,
    /// Where compiled components are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// What a stale capsule (same decision, older prompt text or domain version) does.
    pub stale: StalePolicy,
    /// The key that seals lineage records and ledger entries; `None` means
    /// [`crate::reflection::seal::default_path`]. It must lie outside every workspace.
    pub key_file: Option<PathBuf>,
    /// The tool families listed and callable (`--toolsets`); empty means all of them. The
    /// reflection tools (`persist_justification`, `provenance_report`) are always on.
    pub toolsets: Vec<Toolset>,
    /// The operator's policy file (`--policy`, TOML), read at start; it must lie outside
    /// every workspace and the store. `None`: the domains' own outcomes.
    pub policy: Option<PathBuf>,
}

/// A family of tools an operator can enable, so the list that sits in an agent's context
/// holds only what the work needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Toolset {
    /// raster_info, raster_stats, raster_reproject, raster_resample, raster_overviews,
    /// raster_terrain, raster_calc.
    Raster,
    /// raster_convert.
    Convert,
    /// vector_info, vector_reproject, vector_convert, vector_clip, points_from_table.
    Vector,
    /// vector_query and raster_sample: values of features and at places.
    Query,
    /// vector_measure, vector_buffer, vector_overlay, vector_join.
    Analysis,
    /// zonal_stats, raster_composite, raster_aggregate.
    Aggregate,
    /// dem_condition, dem_flow_direction, dem_flow_accumulation, dem_streams, dem_watershed.
    Dem,
}

/// What the gate does with a stale capsule: one for the same domain and the same decision, but
/// answering an older prompt text or written under another domain version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StalePolicy {
    /// Proceed, with a `warn` receipt naming the old capsule and what changed.
    #[default]
    Warn,
    /// Ask again, as if no capsule existed.
    Refuse,
}

impl ServerConfig {
    /// The store root this configuration resolves to.
    pub fn store_root(&self) -> PathBuf {
        match (&self.store, self.workspaces.first()) {
            (Some(store), _) => store.clone(),
            (None, Some(workspace)) => workspace.join(".preflight"),
            (None, None) => PathBuf::from(".preflight"),
        }
    }
}

/// The default compiled-component cache: `$XDG_CACHE_HOME/gdal-mcp/components`, else
/// `$HOME/.cache/gdal-mcp/components`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    Some(base.join("gdal-mcp").join("components"))
}
