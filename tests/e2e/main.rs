//! One integration-test binary (as wasmtime does): every test drives the built `gdal-mcp`
//! binary over real stdio with the rmcp client, real GDAL and real wasm components.

mod adversarial;
mod aggregation;
mod budgets;
mod confinement;
mod dos;
mod encoding;
mod fill_nodata;
mod hydrology;
mod ledger;
mod lineage;
mod measurement;
mod oracle;
mod policy;
mod protocol;
mod query;
mod quirks;
mod raster_tools;
mod reflection;
mod sandbox;
mod sign_off;
mod silent_errors;
mod surface;
mod vector_tools;
