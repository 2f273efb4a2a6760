//! gdal-mcp: an MCP server that gives AI agents GDAL and makes them justify the operations that
//! quietly ruin analyses.
//!
//! Data flows one way through these rooms:
//!
//! 1. [`server`] parses an MCP call and validates its arguments;
//! 2. [`workspace`] confines every path the call names;
//! 3. [`gdal::facts`] gathers facts about the datasets;
//! 4. [`reflection::gate`] asks every risk domain ([`domains`]) to classify the call and looks
//!    the decisions up in the capsule store ([`reflection::store`]);
//! 5. a GDAL runner ([`gdal::warp`], [`gdal::info`]) does the work, and a receipt goes back.

/// Implement `schemars::JsonSchema` for `$type` with a schema written by hand (`$schema`, in
/// `json_schema!` syntax) and inlined wherever the type is used: for types whose derived
/// schema would not be portable or would say less than their checks.
macro_rules! inline_json_schema {
    ($type:ident, $schema:tt) => {
        impl schemars::JsonSchema for $type {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($type).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!($schema)
            }
        }
    };
}

pub mod aggregation;
pub mod budget;
pub mod config;
pub mod domains;
pub mod gdal;
pub mod hydrology;
pub mod memo;
pub mod reflection;
pub mod server;
pub mod terminal;
pub mod transport;
pub mod workspace;

/// The server's version, as recorded in capsules and `serverInfo`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
