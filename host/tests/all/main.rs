//! The host's integration tests, as one binary with a module per subject (as wasmtime's
//! `tests/all`): one link instead of five, and one place to filter, e.g.
//! `cargo test -p gdal-mcp --test all domain_tables::` or
//! `UPDATE_SNAPSHOTS=1 cargo test -p gdal-mcp --test all public_surface`.
//!
//! The end-to-end suite over real MCP clients lives in the `gdal-mcp-tests` crate
//! (`tests/e2e`); these modules drive the library in process.

mod domain_tables;
mod gate_unit;
mod public_surface;
mod sandbox_unit;
mod store_unit;
