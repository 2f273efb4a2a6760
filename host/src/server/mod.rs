//! The MCP surface (rmcp over stdio), for clients of both the 2025-11-25 (initialize handshake)
//! and 2026-07-28 (`server/discover`) revisions: the rmcp handler and the rendering of results.
//!
//! Tools come from one table ([`registry`]); gated tools pass the one gated step ([`gated`]);
//! prompts and resources come from [`catalog`]. This room parses calls and renders results; it
//! delegates decisions to the gate and work to the GDAL runners, and never reaches back into
//! them.
//!
//! Every host must be able to read every result. A success carries `structuredContent` (valid
//! against the tool's `outputSchema`) and the same JSON as text. An error or a refusal carries
//! **no** `structuredContent` (the TypeScript SDK 1.x validates even error results against the
//! output schema and throws when they do not match): its first text block is the message for a
//! human, its second the machine-readable JSON (`{"error": ...}` or `{"refusal": ...}`).

pub mod app;
pub mod args;
pub mod call;
pub mod catalog;
pub mod error;
pub mod gated;
pub mod registry;
pub mod schema;
pub mod sign_off;
pub mod tool;
pub mod tools;

pub use app::{App, StartError};
pub use error::ToolError;

use crate::domains::FieldError;
use crate::reflection::gate::{Receipt, RefusalEntry};
use call::Call;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig as McpServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The rmcp server handler, one per connection.
#[derive(Clone)]
pub struct GdalMcp {
    app: Arc<App>,
    /// Whether this connection's `initialize` handshake has been answered. A second
    /// `initialize` is refused rather than renegotiated: rmcp's default handler stores the
    /// new request's version as the peer's, so the session would then speak an era other than
    /// the one its answer named (attack round 15, R15-C4).
    initialized: Arc<AtomicBool>,
}

impl GdalMcp {
    pub fn new(app: Arc<App>) -> Self {
        Self {
            app,
            initialized: Arc::new(AtomicBool::new(false)),
        }
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        "(justification)"
    } else {
        path
    }
}

/// The largest result the server sends (a 65536-band VRT made `raster_info` answer 28 MiB).
pub const MAX_RESULT_BYTES: usize = 8 << 20;

/// A successful result: structured content plus the same JSON as text.
pub fn success_result(value: Value) -> CallToolResult {
    let text = value.to_string();
    if text.len() > MAX_RESULT_BYTES {
        return error_result(ToolError::Arguments(format!(
            "the result is {} bytes, more than the {MAX_RESULT_BYTES} a response may carry; ask \
             for less (fewer bands, a layer, a CSV output for zonal statistics)",
            text.len()
        )));
    }
    let mut result = CallToolResult::structured(value);
    result.content = vec![ContentBlock::text(text)];
    result
}

/// Caller text longer than this many characters is echoed in an error capped to
/// [`ECHO_KEPT`] characters, an ellipsis and its length (issue 21, O2: a 1 MB argument came
/// back whole in the error, twice).
pub const ECHO_MAX: usize = 256;
/// Characters of an over-long caller text kept in an error.
pub const ECHO_KEPT: usize = 120;
/// An error message longer than this is cut, whatever made it long.
pub const MAX_ERROR_CHARS: usize = 16 << 10;

/// The most memory a tool call's parsed arguments may hold ([`argument_bytes`]): paths, CRS
/// texts, an expression, 1,000 points (about 100 KB) and a justification take far less. A
/// larger call is refused before it waits for a slot, so calls queued behind busy slots cannot
/// hold their parsed arguments without bound (attack round 10, R10-14: six pending 15.6 MB
/// calls held 1.0 GB), and all calls in progress share [`app::MAX_ARGUMENTS_HELD`].
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// The memory `arguments` hold once parsed ([`crate::budget::json_bytes`]).
pub fn argument_bytes(arguments: &Value) -> usize {
    crate::budget::json_bytes(arguments)
}

/// Every string value and object key of `arguments` longer than [`ECHO_MAX`] characters: the
/// caller's texts an error may echo.
pub fn long_texts(arguments: &Value) -> Vec<String> {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) if s.chars().count() > ECHO_MAX => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => {
                for (key, v) in map {
                    if key.chars().count() > ECHO_MAX {
                        out.push(key.clone());
                    }
                    walk(v, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(arguments, &mut out);
    // The longest first, so that a text containing another is capped whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// `form` (an echo of a caller's text of `length` characters) shortened to its first
/// [`ECHO_KEPT`] characters, an ellipsis and the text's length.
fn capped(form: &str, length: usize) -> String {
    let kept: String = form.chars().take(ECHO_KEPT).collect();
    format!("{kept}… ({length} characters)")
}

/// A caller's text as a protocol-level error may echo it: whole up to [`ECHO_MAX`]
/// characters, else capped as [`cap_echoes`] caps it (attack round 15, R15-C8: a 4 MiB tool
/// name, resource URI or prompt name came back whole in its "not found" error).
pub fn echo(text: &str) -> String {
    let length = text.chars().count();
    if length > ECHO_MAX {
        capped(text, length)
    } else {
        text.to_string()
    }
}

/// `message` with every echo of the caller's long `texts` capped (as written, and as Rust's
/// and JSON's quoting escape it), then, when `cut`, cut at [`MAX_ERROR_CHARS`] characters.
pub fn cap_echoes(message: &str, texts: &[String], cut: bool) -> String {
    let mut out = message.to_string();
    for text in texts {
        let escaped = format!("{text:?}");
        let escaped = &escaped[1..escaped.len() - 1];
        let json = Value::String(text.clone()).to_string();
        let json = &json[1..json.len() - 1];
        let length = text.chars().count();
        for form in [text.as_str(), escaped, json] {
            if out.contains(form) {
                out = out.replace(form, &capped(form, length));
            }
        }
    }
    let count = out.chars().count();
    if cut && count > MAX_ERROR_CHARS {
        let kept: String = out.chars().take(MAX_ERROR_CHARS).collect();
        out = format!("{kept}… (error message cut: {count} characters)");
    }
    out
}

/// An error result: the human message, then the JSON; no structured content.
pub fn error_result(error: ToolError) -> CallToolResult {
    error_result_echoing(error, &[])
}

/// [`error_result`] for a call whose arguments hold the long `texts` ([`long_texts`]): every
/// echo of them is capped, in the human message and in the JSON.
pub fn error_result_echoing(error: ToolError, texts: &[String]) -> CallToolResult {
    // A refusal carries the domains' prompts (up to 64 KiB each, plugin-capped): never cut,
    // only its echoes capped.
    let cut = !matches!(error, ToolError::Refused { .. });
    let (error, after_gate) = match error {
        ToolError::AfterGate { error, receipts } => (*error, Some(receipts)),
        other => (other, None),
    };
    let (mut text, mut detail) = match error {
        ToolError::Refused { entries, receipts } => refusal_text(entries, receipts),
        other => {
            let mut text = other.to_string();
            let mut detail = json!({ "kind": other.kind(), "message": other.to_string() });
            if let ToolError::Gdal(crate::gdal::GdalError::Conflict {
                parameter,
                candidates,
                ..
            }) = &other
            {
                detail["parameter"] = json!(parameter);
                detail["candidates"] = candidates.clone();
            }
            if let ToolError::InvalidJustification(errors) = &other {
                detail["errors"] = field_errors(errors);
                for e in errors {
                    let _ = write!(text, "\n- {}: {}", display_path(&e.path), e.message);
                }
            }
            (text, json!({ "error": detail }))
        }
    };
    // A gated call that failed after the gate: what the gate decided, as on success.
    if let Some(receipts) = after_gate {
        let _ = write!(
            text,
            "\nThe gate had decided before the failure: {}.",
            receipts
                .iter()
                .map(|r| format!(
                    "{} {}{}",
                    r.domain,
                    serde_json::to_value(r.decision)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    if r.stored_now {
                        format!(
                            " (its justification was stored as {} and answers later calls of \
                             this decision)",
                            r.capsule.as_deref().unwrap_or("a capsule")
                        )
                    } else {
                        String::new()
                    }
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        detail["reflection"] = serde_json::to_value(&receipts).unwrap_or(Value::Null);
    }
    let text = cap_echoes(&text, texts, cut);
    cap_strings(&mut detail, texts, cut);
    CallToolResult::error(vec![
        ContentBlock::text(text),
        ContentBlock::text(detail.to_string()),
    ])
}

/// Every string in `value` with the caller's long `texts` capped ([`cap_echoes`]).
fn cap_strings(value: &mut Value, texts: &[String], cut: bool) {
    match value {
        Value::String(s) => *s = cap_echoes(s, texts, cut),
        Value::Array(items) => items.iter_mut().for_each(|v| cap_strings(v, texts, cut)),
        Value::Object(map) => map.values_mut().for_each(|v| cap_strings(v, texts, cut)),
        _ => {}
    }
}

fn field_errors(errors: &[FieldError]) -> Value {
    Value::Array(
        errors
            .iter()
            .map(|e| json!({ "path": e.path, "message": e.message }))
            .collect(),
    )
}

fn refusal_text(entries: Vec<RefusalEntry>, receipts: Vec<Receipt>) -> (String, Value) {
    let by_policy = entries.iter().any(|e| {
        e.policy
            .as_ref()
            .is_some_and(|p| p.outcome > crate::reflection::policy::Outcome::Justify)
    });
    let mut text = if by_policy {
        format!(
            "Refused: {} methodology decision(s) stop this call; the operator's policy decides \
             at least one of them.\n",
            entries.len()
        )
    } else {
        format!(
            "Refused: {} methodology decision(s) need a justification before this call can \
             run.\n",
            entries.len()
        )
    };
    for entry in &entries {
        let _ = write!(
            text,
            "\n## {} ({:?}): {}\nkey: {}\n",
            entry.domain, entry.severity, entry.reason, entry.key
        );
        text.push_str("Evidence:\n");
        for item in &entry.evidence {
            let _ = writeln!(
                text,
                "- `{}`: {} Why it matters: {}",
                item.id, item.fact, item.why
            );
            if let Some(alternative) = &item.alternative {
                let _ = writeln!(text, "  Safe alternative: retry with {alternative}");
            }
        }
        if let Some(policy) = &entry.policy {
            let _ = writeln!(
                text,
                "Operator's policy ({}): {}. {}",
                policy.digest,
                policy.outcome.name(),
                policy.explanation
            );
        }
        if !entry.errors.is_empty() {
            text.push_str("The justification supplied for this domain was rejected:\n");
            for e in &entry.errors {
                let _ = writeln!(text, "- {}: {}", display_path(&e.path), e.message);
            }
        }
        let _ = write!(text, "\n{}\n\n{}\n", entry.prompt, entry.how_to_supply);
        if entry.requires_assumptions {
            text.push_str(
                "This decision is critical: list your `assumptions`, and answer every evidence \
                 item by id in an `evidence` object (id -> how the analysis accounts for it).\n",
            );
        }
    }
    text.push_str(
        "\nThe next content block holds the refusal as JSON: each domain's questions, the \
         justification JSON Schema and the key.",
    );
    let detail = json!({ "refusal": entries, "reflection": receipts });
    (text, detail)
}

const INSTRUCTIONS: &str = "gdal-mcp runs GDAL on files inside its workspaces. Risky \
operations (reprojection, resampling, format changes, aggregation, hydrology) are gated by \
methodology domains: the first call for a new decision is refused (isError) with each domain's \
questions, a JSON Schema and a key. Answer with a justification (intent, alternatives with \
why_not, choice {method, rationale, tradeoffs}, confidence, and assumptions for critical \
decisions, plus an `evidence` object answering each evidence id), either inline as `justification: {<domain>: {...}}` on a retry or through \
persist_justification; the same decision then runs at once. Every gated result carries \
`reflection` receipts. Outputs are written atomically and never replace an input; an existing \
output is replaced only with `overwrite: true`.";

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

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            let speaking = context
                .peer
                .peer_info()
                .map(|info| info.protocol_version.to_string())
                .unwrap_or_else(|| "the one first negotiated".to_string());
            return Err(McpError::invalid_request(
                format!(
                    "this connection is already initialized and speaks protocol {speaking}; a \
                     second `initialize` cannot renegotiate it. Open a new connection to use \
                     another protocol version"
                ),
                None,
            ));
        }
        // The peer speaks the version negotiated, never the one asked for unanswered (after a
        // `server/discover`, rmcp leaves the recording to this handler).
        let answer = self.negotiate_initialize(&request)?;
        let mut peer = request;
        peer.protocol_version = answer.protocol_version.clone();
        context.peer.set_peer_info(peer);
        Ok(answer)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(registry::definitions_for(
            &self.app.config.toolsets,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(spec) = registry::find(&request.name) else {
            let known: Vec<&str> = registry::table().iter().map(|t| t.name).collect();
            return Err(McpError::invalid_params(
                format!(
                    "tool not found: \"{}\"; available: {}",
                    echo(&request.name),
                    known.join(", ")
                ),
                None,
            ));
        };
        if !spec.family.enabled_by(&self.app.config.toolsets) {
            return Err(McpError::invalid_params(
                format!(
                    "tool \"{}\" is not enabled on this server: the operator started it with \
                     --toolsets {}; use the listed tools, or ask for the server to be started \
                     with its toolset",
                    spec.name,
                    self.app
                        .config
                        .toolsets
                        .iter()
                        .filter_map(clap::ValueEnum::to_possible_value)
                        .map(|v| v.get_name().to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                None,
            ));
        }
        // What the call holds besides its arguments while it waits and runs: the request's
        // `_meta`, and a retry's request state and input responses (attack round 13, R13-9:
        // 16 waiting calls with 4.5 MB of `_meta` each held 1.1 GB, uncounted).
        let beside = crate::budget::json_entries_bytes(context.meta.0 .0.iter())
            + request
                .meta
                .as_ref()
                .map_or(0, |m| crate::budget::json_entries_bytes(m.0 .0.iter()))
            + request.request_state.as_ref().map_or(0, String::len)
            + request
                .input_responses
                .as_ref()
                .map_or(0, |r| crate::budget::json_entries_bytes(r.iter()));
        let resume = sign_off::Resume {
            state: request.request_state,
            responses: request.input_responses,
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let echoes = long_texts(&arguments);
        let size = argument_bytes(&arguments).saturating_add(beside);
        if size > MAX_ARGUMENT_BYTES {
            let error = ToolError::Arguments(format!(
                "the call takes {size} bytes of memory once parsed ({beside} of them in its \
                 `_meta`, request state and input responses); a call may take at most \
                 {MAX_ARGUMENT_BYTES}. Pass data in files inside a workspace (a table for \
                 points_from_table, a vector file for many points) rather than inline"
            ));
            return Ok(error_result_echoing(error, &echoes).into());
        }
        let Some(_held) = self.app.hold_arguments(size) else {
            let error = ToolError::Busy(format!(
                "the server is busy: the calls in progress hold {} bytes of arguments, and this \
                 one's {size} would pass the {} they may hold together; retry when some have \
                 answered",
                self.app.arguments_held(),
                app::MAX_ARGUMENTS_HELD
            ));
            return Ok(error_result_echoing(error, &echoes).into());
        };
        let _slot = match spec.effect {
            tool::Effect::ReadOnly => None,
            _ => self.app.call_slot().await,
        };
        let call = Call::new(
            self.app.clone(),
            spec.name,
            spec.verb,
            arguments,
            spec.opens_rasters,
            Some(context),
        )
        .resuming(resume);
        let result = match (spec.handler)(call).await {
            Ok(value) => success_result(value),
            Err(ToolError::InputRequired(asked)) => return Ok((*asked).into()),
            Err(error) => error_result_echoing(error, &echoes),
        };
        Ok(result.into())
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

#[cfg(test)]
mod echo_tests {
    use super::*;

    /// R12-7: arguments are counted at their memory once parsed: a one-key object holds a
    /// B-tree node, an array's slots count twice; 1,000 points stay far under the cap.
    #[test]
    fn r12_7_arguments_are_counted_at_their_memory() {
        assert!(argument_bytes(&serde_json::json!({"a": 0})) > 600);
        assert!(argument_bytes(&serde_json::json!([[], [], []])) >= 3 * 64);
        let points: Vec<Value> = (0..1000).map(|i| serde_json::json!([i, i])).collect();
        let size = argument_bytes(&serde_json::json!({"coordinates": points}));
        assert!(size < MAX_ARGUMENT_BYTES / 4, "{size}");
    }

    /// Regression (issue 21, O2): an argument's echo is capped with its length, as written and
    /// as quoting escapes it; short texts are left alone; a message made long otherwise is cut.
    #[test]
    fn long_caller_text_is_capped_wherever_an_error_echoes_it() {
        let long = format!("a\"b{}", "x".repeat(1000));
        let arguments = json!({"input": long, "short": "fine", "list": [{"k": "y".repeat(300)}]});
        let texts = long_texts(&arguments);
        assert_eq!(texts.len(), 2);
        let message = format!("input: {long:?} and again {long}; short: fine");
        let capped = cap_echoes(&message, &texts, true);
        assert!(!capped.contains(&"x".repeat(ECHO_KEPT)), "{capped}");
        assert_eq!(capped.matches("(1003 characters)").count(), 2, "{capped}");
        assert!(capped.contains("short: fine"));
        let huge = "z ".repeat(MAX_ERROR_CHARS);
        let cut = cap_echoes(&huge, &[], true);
        assert!(cut.ends_with(&format!("(error message cut: {} characters)", huge.len())));
        assert_eq!(
            cap_echoes(&huge, &[], false),
            huge,
            "a refusal is never cut"
        );
    }
}
