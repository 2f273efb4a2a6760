//! The MCP surface (rmcp over stdio): tools, prompts and resources, for clients of both the
//! 2025-11-25 (initialize handshake) and 2026-07-28 (`server/discover`) revisions.
//!
//! This room parses calls and renders results; it delegates decisions to the gate and work to
//! the GDAL runners, and never reaches back into them.

pub mod aggregate;
pub mod catalog;
pub mod dem;
pub mod raster;
pub mod tools;
pub mod vector;

use crate::config::ServerConfig;
use crate::domains::sandbox::{Limits, PluginError};
use crate::domains::{CallFacts, LoadError, Registry};
use crate::gdal::GdalError;
use crate::reflection::gate::{Gate, GateError, PersistError, Receipt, RefusalEntry, Verdict};
use crate::reflection::store::CapsuleStore;
use crate::workspace::{PathError, Workspaces};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig as McpServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tools::{InlineJustifications, Outcome};

/// A gate decision that takes longer than this is abandoned and the call refused: fuel bounds
/// CPU, this bounds wall time (a plugin blocked in a WASI wait burns no fuel).
const GATE_DEADLINE: Duration = Duration::from_secs(20);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error(transparent)]
    Workspace(#[from] PathError),
    #[error(transparent)]
    Domains(#[from] LoadError),
}

/// Why a tool call failed (rendered as an `isError` result, never a protocol error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    #[error("{0}")]
    Arguments(String),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Gdal(#[from] GdalError),
    #[error("the call was refused because a methodology domain failed: {0}")]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Gate(GateError),
    #[error(transparent)]
    Persist(#[from] PersistError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<GateError> for ToolError {
    fn from(error: GateError) -> Self {
        match error {
            GateError::Plugin(e) => ToolError::Plugin(e),
            other => ToolError::Gate(other),
        }
    }
}

impl ToolError {
    fn kind(&self) -> &'static str {
        match self {
            ToolError::Arguments(_) => "invalid_arguments",
            ToolError::Path(_) => "path",
            ToolError::Gdal(GdalError::Invalid(_)) => "invalid_arguments",
            ToolError::Gdal(_) => "gdal",
            ToolError::Plugin(_) => "plugin_failure",
            ToolError::Gate(_) => "gate",
            ToolError::Persist(PersistError::Invalid(_)) => "invalid_justification",
            ToolError::Persist(_) => "persist",
            ToolError::Internal(_) => "internal",
        }
    }

    fn into_result(self) -> CallToolResult {
        let mut detail = json!({ "kind": self.kind(), "message": self.to_string() });
        let mut text = self.to_string();
        if let ToolError::Persist(PersistError::Invalid(errors)) = &self {
            detail["errors"] = serde_json::to_value(errors).unwrap_or(Value::Null);
            for e in errors {
                text.push_str(&format!("\n- {}: {}", display_path(&e.path), e.message));
            }
        }
        let mut result = CallToolResult::structured_error(json!({ "error": detail }));
        result.content = vec![ContentBlock::text(text)];
        result
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        "(justification)"
    } else {
        path
    }
}

/// Everything a running server shares between calls.
pub struct App {
    pub config: ServerConfig,
    pub workspaces: Workspaces,
    pub gate: Arc<Gate>,
}

impl App {
    /// Resolve workspaces, load the domains, open the store.
    pub fn start(config: ServerConfig) -> Result<Self, StartError> {
        let workspaces = Workspaces::new(&config.workspaces)?;
        let registry = Registry::load(
            &config.plugin_dirs,
            config.cache_dir.clone(),
            Limits::default(),
        )?;
        let store_root = match (&config.store, workspaces.primary()) {
            (None, Some(primary)) => primary.join(".preflight"),
            _ => config.store_root(),
        };
        let store = CapsuleStore::new(store_root);
        Ok(Self {
            gate: Arc::new(Gate::new(Arc::new(registry), store)),
            workspaces,
            config,
        })
    }

    /// Run the gate on a blocking worker, under the wall-clock deadline.
    pub async fn decide(
        &self,
        facts: CallFacts,
        inline: InlineJustifications,
    ) -> Result<Verdict, ToolError> {
        let gate = self.gate.clone();
        let job = tokio::task::spawn_blocking(move || gate.decide(&facts, &inline));
        match tokio::time::timeout(GATE_DEADLINE, job).await {
            Ok(Ok(verdict)) => Ok(verdict?),
            Ok(Err(e)) => Err(ToolError::Internal(format!("gate worker failed: {e}"))),
            Err(_) => Err(ToolError::Internal(format!(
                "a methodology domain did not answer within {} s; the call was refused",
                GATE_DEADLINE.as_secs()
            ))),
        }
    }
}

/// The rmcp server handler.
#[derive(Clone)]
pub struct GdalMcp {
    app: Arc<App>,
}

impl GdalMcp {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

fn refusal_result(entries: Vec<RefusalEntry>, receipts: Vec<Receipt>) -> CallToolResult {
    let mut text = format!(
        "Refused: {} methodology decision(s) need a justification before this call can run.\n",
        entries.len()
    );
    for entry in &entries {
        text.push_str(&format!(
            "\n## {} ({:?}): {}\nkey: {}\n",
            entry.domain, entry.severity, entry.reason, entry.key
        ));
        if !entry.errors.is_empty() {
            text.push_str("The justification supplied for this domain was rejected:\n");
            for e in &entry.errors {
                text.push_str(&format!("- {}: {}\n", display_path(&e.path), e.message));
            }
        }
        text.push_str(&format!("\n{}\n\n{}\n", entry.prompt, entry.how_to_supply));
        if entry.requires_assumptions {
            text.push_str("This decision is critical: list your `assumptions`.\n");
        }
    }
    text.push_str(
        "\nThe structured content holds each domain's questions, the justification JSON Schema \
         and the key.",
    );
    let mut result = CallToolResult::structured_error(json!({
        "refusal": entries,
        "reflection": receipts,
    }));
    result.content = vec![ContentBlock::text(text)];
    result
}

fn gated_result(outcome: Outcome) -> CallToolResult {
    match outcome {
        Outcome::Done(value) => success_result(value),
        Outcome::Refused { entries, receipts } => refusal_result(entries, receipts),
    }
}

fn success_result(value: Value) -> CallToolResult {
    let mut result = CallToolResult::structured(value.clone());
    result.content = vec![ContentBlock::text(value.to_string())];
    result
}

const INSTRUCTIONS: &str = "gdal-mcp runs GDAL on files inside its workspaces. Risky \
operations (reprojection, resampling, ...) are gated by methodology domains: the first call for \
a new decision is refused with each domain's questions, a JSON Schema and a key. Answer with a \
justification (intent, alternatives with why_not, choice {method, rationale, tradeoffs}, \
confidence, and assumptions for critical decisions), either inline as `justification: \
{<domain>: {...}}` on a retry or through persist_justification; the same decision then runs at \
once. Every gated result carries `reflection` receipts.";

impl ServerHandler for GdalMcp {
    fn get_info(&self) -> McpServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .build();
        McpServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("gdal-mcp", crate::VERSION)
                    .with_title("gdal-mcp: GDAL with methodological reflection"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::definitions()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let app = &self.app;
        let result = match request.name.as_ref() {
            "raster_info" => tools::raster_info(app, &arguments)
                .await
                .map(success_result),
            "raster_reproject" => tools::raster_reproject(app, &arguments)
                .await
                .map(gated_result),
            "persist_justification" => tools::persist_justification(app, &arguments)
                .await
                .map(success_result),
            "raster_stats" => raster::raster_stats(app, &arguments)
                .await
                .map(success_result),
            "raster_convert" => raster::raster_convert(app, &arguments)
                .await
                .map(gated_result),
            "raster_resample" => raster::raster_resample(app, &arguments)
                .await
                .map(gated_result),
            "raster_overviews" => raster::raster_overviews(app, &arguments)
                .await
                .map(gated_result),
            "raster_terrain" => raster::raster_terrain(app, &arguments)
                .await
                .map(gated_result),
            "zonal_stats" => aggregate::zonal_stats(app, &arguments)
                .await
                .map(gated_result),
            "raster_composite" => aggregate::raster_composite(app, &arguments)
                .await
                .map(gated_result),
            "raster_aggregate" => aggregate::raster_aggregate(app, &arguments)
                .await
                .map(gated_result),
            "vector_info" => vector::vector_info(app, &arguments)
                .await
                .map(success_result),
            "vector_reproject" => vector::vector_reproject(app, &arguments)
                .await
                .map(gated_result),
            "vector_convert" => vector::vector_convert(app, &arguments)
                .await
                .map(gated_result),
            "vector_clip" => vector::vector_clip(app, &arguments).await.map(gated_result),
            "dem_condition" => dem::condition(app, &context, &arguments)
                .await
                .map(gated_result),
            "dem_flow_direction" => dem::flow_direction(app, &context, &arguments)
                .await
                .map(gated_result),
            "dem_flow_accumulation" => dem::flow_accumulation(app, &context, &arguments)
                .await
                .map(gated_result),
            "dem_streams" => dem::streams(app, &context, &arguments)
                .await
                .map(gated_result),
            "dem_watershed" => dem::watershed(app, &context, &arguments)
                .await
                .map(gated_result),
            other => {
                let known: Vec<String> = tools::definitions()
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect();
                return Err(McpError::invalid_params(
                    format!(
                        "tool not found: \"{other}\"; available: {}",
                        known.join(", ")
                    ),
                    None,
                ));
            }
        };
        Ok(result.unwrap_or_else(ToolError::into_result).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(catalog::prompts(
            &self.app,
        )))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        catalog::get_prompt(&self.app, request)
            .await
            .map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        catalog::resources(&self.app).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            catalog::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        catalog::read(&self.app, &request.uri).await.map(Into::into)
    }
}
