//! What a tool is: one declaration ([`ToolSpec`]) that holds its name, title, description,
//! verb, effect, argument and result schemas and handler. Each declaration lives in its family
//! file under `server::tools`, beside its handler; `server::registry` lists them in order.

use super::call::Call;
use super::error::ToolError;
use super::gated::Gated;
use super::schema;
use crate::config::Toolset;
use crate::gdal::facts::encoding::RasterWrite;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The future a handler returns.
pub type Reply = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// A tool's handler.
pub type Handler = fn(Call) -> Reply;

/// Which family file a tool lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Raster,
    Convert,
    Vector,
    Aggregate,
    Analysis,
    Dem,
    Justify,
    Query,
}

impl Family {
    /// The toolset an operator enables this family with; `None` for the reflection tools,
    /// which are always on.
    pub fn toolset(self) -> Option<Toolset> {
        match self {
            Family::Raster => Some(Toolset::Raster),
            Family::Convert => Some(Toolset::Convert),
            Family::Vector => Some(Toolset::Vector),
            Family::Query => Some(Toolset::Query),
            Family::Analysis => Some(Toolset::Analysis),
            Family::Aggregate => Some(Toolset::Aggregate),
            Family::Dem => Some(Toolset::Dem),
            Family::Justify => None,
        }
    }

    /// Whether `toolsets` (empty: all) enables this family.
    pub fn enabled_by(self, toolsets: &[Toolset]) -> bool {
        toolsets.is_empty() || self.toolset().is_none_or(|t| toolsets.contains(&t))
    }
}

/// What a tool does to the filesystem, as MCP annotations say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    ReadOnly,
    /// Writes new files; replaces one only with `overwrite`.
    Writes,
    /// Stores a justification capsule.
    Stores,
}

/// One entry of the table.
pub struct ToolSpec {
    pub name: &'static str,
    pub family: Family,
    pub title: &'static str,
    pub description: &'static str,
    /// What the tool did, as the verb phrase a methods section opens a step with
    /// ("Reprojected", "Summarised by zone").
    pub verb: &'static str,
    pub effect: Effect,
    /// Whether the tool opens rasters (it then takes `georef_source`).
    pub opens_rasters: bool,
    /// How the tool writes a raster of the caller's encoding, for a gated tool that does: the
    /// gated step gives the domains the output fact (driver, options, whether the encoding
    /// loses values) from it. `None` for the others (vector writers set their output fact in
    /// their gather, where the driver is resolved).
    pub raster_output: Option<RasterWrite>,
    /// Its argument and result schemas, and whether the gate sees it.
    pub schemas: Schemas,
    pub handler: Handler,
}

/// A tool's argument and result schemas, built by `server::schema` from its types. Whether the
/// gate sees a tool follows from its result type: a gated tool's result is `Gated<T>` (the
/// tool's fields plus receipts and lineage) and it takes `justification`.
#[derive(Clone, Copy)]
pub struct Schemas {
    pub input: fn() -> Arc<JsonObject>,
    pub output: fn() -> Arc<JsonObject>,
    gated: bool,
}

impl Schemas {
    /// A tool the gate sees, whose result is `Gated<O>`.
    pub const fn gated<A: JsonSchema, O: JsonSchema>() -> Self {
        Self {
            input: schema::input::<A>,
            output: schema::output::<Gated<O>>,
            gated: true,
        }
    }

    /// A tool the gate does not see, whose result is `O`.
    pub const fn plain<A: JsonSchema, O: JsonSchema>() -> Self {
        Self {
            input: schema::input::<A>,
            output: schema::output::<O>,
            gated: false,
        }
    }
}

impl ToolSpec {
    /// Whether the reflection gate sees the call (it then takes `justification`).
    pub fn gated(&self) -> bool {
        self.schemas.gated
    }

    /// The MCP tool definition.
    pub fn definition(&self) -> Tool {
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = Some(self.effect == Effect::ReadOnly);
        annotations.destructive_hint = Some(self.effect == Effect::Writes);
        annotations.idempotent_hint = Some(true);
        annotations.open_world_hint = Some(false);
        let input = if self.opens_rasters {
            schema::with_georef_source((self.schemas.input)())
        } else {
            (self.schemas.input)()
        };
        Tool::new(self.name, self.description, input)
            .with_title(self.title)
            .with_raw_output_schema((self.schemas.output)())
            .with_annotations(annotations)
    }
}

/// A tool's handler from its `async fn(Call) -> Result<Value, ToolError>`.
macro_rules! handler {
    ($path:path) => {{
        fn handle(call: $crate::server::call::Call) -> $crate::server::tool::Reply {
            Box::pin($path(call))
        }
        handle as $crate::server::tool::Handler
    }};
}
pub(crate) use handler;
