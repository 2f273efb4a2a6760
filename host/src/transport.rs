//! The stdio transport in front of rmcp: every request gets an answer, and only whole JSON-RPC
//! lines reach stdout.
//!
//! rmcp 3.9 drops a line that is not JSON (a `NaN` literal, a truncated line) or is longer than
//! 16 MiB without replying, and answers a message its reader refuses (an id of `1.5`, of
//! 2^64-1 or `null`, `params` that are a list) with an error that has no `id`, which no client
//! can match to its request. So the server reads stdin itself, line by line, with a length
//! bound, and parses each line first with the very type rmcp parses it into
//! (`ClientJsonRpcMessage`):
//!
//! * a line that is not JSON (not UTF-8, a `NaN`, a number beyond f64 such as `1e400`, a lone
//!   surrogate `\ud800`, nesting deeper than serde's limit of 128, trailing bytes, a
//!   truncation) is answered `-32700`, with its id when a scan of its top-level members finds
//!   one readable id (`null` otherwise); nothing is decoded lossily;
//! * a line whose top-level members repeat (two `"id"`s) is answered `-32600`, with the id
//!   only if every copy is the same readable id;
//! * empty and whitespace-only lines are skipped; JSON whitespace (CRLF line ends included)
//!   and a leading byte order mark are trimmed;
//! * a line over [`MAX_LINE_BYTES`] is discarded up to its end and answered `-32600`;
//! * a JSON value that is not a valid request, response or notification object (a batch,
//!   a scalar, a missing or wrong `jsonrpc`, a non-string `method`, an id rmcp cannot read as
//!   a string or an `i64`, an id of `null`) is answered `-32600`, with the id where rmcp could
//!   read it and `null` where it could not;
//! * `params` that are not an object, a `tools/call` without a string `name` or with
//!   non-object `arguments`, and any params rmcp's typed reader refuses for a method it knows
//!   (which it would otherwise answer as "method not found", or not at all) are answered
//!   `-32602`;
//! * before the session's lifecycle is chosen (an `initialize`, or a 2026-07-28 request with
//!   its protocol fields in `_meta`), a request that is neither and has no protocol version in
//!   its `_meta` is answered `-32600` "initialize first" (rmcp told it to add 2026-07-28
//!   `_meta` fields, attack round 20, R20-C7), and a notification or a response is dropped
//!   with a warning on stderr: rmcp ended the session on one, and the server exited;
//! * everything else, exactly what rmcp reads, goes to rmcp unchanged.
//!
//! rmcp's replies and these errors are written to stdout by one writer task, a whole line at a
//! time, so they never interleave.

use rmcp::model::{
    CallToolRequestMethod, CancelTaskMethod, ClientJsonRpcMessage, ClientRequest,
    CompleteRequestMethod, ConstString, DiscoverRequestMethod, GetPromptRequestMethod,
    GetSkillRequestMethod, GetTaskMethod, InitializeResultMethod, JsonRpcMessage,
    ListPromptsRequestMethod, ListResourceTemplatesRequestMethod, ListResourcesRequestMethod,
    ListSkillsRequestMethod, ListToolsRequestMethod, PingRequestMethod,
    ReadResourceDirectoryRequestMethod, ReadResourceRequestMethod, RequestId,
    SetLevelRequestMethod, SubscribeRequestMethod, SubscriptionsListenRequestMethod,
    UnsubscribeRequestMethod, UpdateTaskMethod,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line accepted (rmcp's own limit).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The most memory a request's `params._meta` may take once parsed: it carries a progress
/// token and the protocol's own fields (client information, capabilities), a few KiB, never
/// data. A tools/call's `_meta` is kept with the request while the call waits for a slot; 16
/// waiting calls with 4.5 MB lines of `_meta` held 1.1 GB (attack round 13, R13-9).
pub const MAX_META_BYTES: usize = 256 << 10;

/// Lines longer than this hand the memory their parse freed back to the system at once
/// (`malloc_trim`): a parsed line of millions of small values leaves the allocator's arenas
/// holding hundreds of MB it would otherwise keep.
const TRIM_AFTER_BYTES: usize = 1 << 20;

/// How much of a line over [`MAX_LINE_BYTES`] is kept to read its id from.
const TOO_LONG_HEAD_BYTES: usize = 64 << 10;

/// The tasks that pump between the real stdio and rmcp's in-memory ends.
pub struct Pumps {
    reading: JoinHandle<()>,
    writing: JoinHandle<()>,
}

impl Pumps {
    /// Wait until everything rmcp wrote has reached the real output.
    pub async fn finish(self) {
        self.reading.abort();
        let _ = self.writing.await;
    }
}

/// Start the pumps between the real `input`/`output` and rmcp; returns what rmcp reads, what
/// it writes, and the pumps.
pub fn start<R, W>(input: R, output: W) -> (DuplexStream, DuplexStream, Pumps)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_reader, to_rmcp) = tokio::io::duplex(1 << 20);
    let (rmcp_writer, from_rmcp) = tokio::io::duplex(1 << 20);
    let (errors, error_lines) = mpsc::unbounded_channel::<String>();
    let in_flight = InFlight::default();
    let reading = tokio::spawn(read_requests(input, to_rmcp, errors, in_flight.clone()));
    let writing = tokio::spawn(write_replies(from_rmcp, error_lines, output, in_flight));
    (rmcp_reader, rmcp_writer, Pumps { reading, writing })
}

/// The ids of the client's requests that reached rmcp and have not been answered (nor
/// cancelled), as JSON text: a request reusing one of them is answered `-32600` here. Two
/// calls in flight under one id both ran and wrote, and one answer came back (attack round
/// 19, R19-C4).
#[derive(Clone, Default)]
struct InFlight(std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl InFlight {
    fn with<T>(&self, f: impl FnOnce(&mut std::collections::HashSet<String>) -> T) -> T {
        let mut ids = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut ids)
    }
}

/// What a line is to [`InFlight`]: a request and its id, a response and its id, a
/// cancellation and the id it cancels, or something else.
enum Exchange {
    Request(String),
    Response(String),
    Cancelled(String),
    Other,
}

/// A line's [`Exchange`], read from its top-level members.
fn exchange(line: &[u8]) -> Exchange {
    let members = top_level_members(line);
    let member = |name: &str| {
        members
            .iter()
            .find(|(key, _)| serde_json::from_slice::<String>(key).is_ok_and(|k| k == name))
            .map(|(_, value)| *value)
    };
    // One text per id whatever its spelling: `1e3` is the 1000 rmcp answers with.
    let text = |value: &[u8]| {
        serde_json::from_slice::<Value>(value)
            .ok()
            .map(|v| match v.as_f64() {
                Some(n) if v.is_number() && n.fract() == 0.0 && n.abs() < 9.0e15 => {
                    format!("{}", n as i64)
                }
                _ => v.to_string(),
            })
    };
    match (member("method"), member("id").and_then(text)) {
        (Some(_), Some(id)) => Exchange::Request(id),
        (None, Some(id)) => Exchange::Response(id),
        (Some(method), None)
            if serde_json::from_slice::<String>(method)
                .is_ok_and(|m| m == "notifications/cancelled") =>
        {
            member("params")
                .and_then(|p| serde_json::from_slice::<Value>(p).ok())
                .and_then(|p| p.get("requestId").map(Value::to_string))
                .map_or(Exchange::Other, Exchange::Cancelled)
        }
        _ => Exchange::Other,
    }
}

async fn read_requests<R>(
    input: R,
    mut to_rmcp: DuplexStream,
    errors: mpsc::UnboundedSender<String>,
    in_flight: InFlight,
) where
    R: AsyncRead + Unpin,
{
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::with_capacity(1 << 12);
    let mut lifecycle_chosen = false;
    loop {
        line.clear();
        match read_bounded_line(&mut input, &mut line).await {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong(tail)) => {
                let head = scanned_id(&line);
                let id = if head.is_null() {
                    last_member_id(&tail)
                } else {
                    head
                };
                let _ = errors.send(error_line(
                    &id,
                    -32600,
                    &format!("request line longer than {MAX_LINE_BYTES} bytes; it was discarded"),
                ));
            }
            Ok(Line::Complete) => {
                let line = trim_json_whitespace(&line);
                if line.is_empty() {
                    continue;
                }
                let long = line.len() > TRIM_AFTER_BYTES;
                let checked = check_line(line);
                if long {
                    release_freed_memory();
                }
                match checked {
                    Ok(text) if text.is_empty() => continue,
                    Ok(text) => {
                        let text: &str = &text;
                        if !lifecycle_chosen {
                            match before_lifecycle(text) {
                                BeforeLifecycle::Chooses => lifecycle_chosen = true,
                                BeforeLifecycle::Forward => {}
                                BeforeLifecycle::Drop(why) => {
                                    tracing::warn!("{why}");
                                    continue;
                                }
                                BeforeLifecycle::Answer(reply) => {
                                    let _ = errors.send(reply);
                                    continue;
                                }
                            }
                        }
                        match exchange(text.as_bytes()) {
                            Exchange::Request(id) => {
                                if !in_flight.with(|ids| ids.insert(id.clone())) {
                                    let id: Value =
                                        serde_json::from_str(&id).unwrap_or(Value::Null);
                                    let _ = errors.send(error_line(
                                        &id,
                                        -32600,
                                        "a request with this id is still in flight; a request \
                                         id may not be reused before its answer",
                                    ));
                                    continue;
                                }
                            }
                            Exchange::Cancelled(id) => {
                                in_flight.with(|ids| ids.remove(&id));
                            }
                            Exchange::Response(_) | Exchange::Other => {}
                        }
                        if to_rmcp.write_all(text.as_bytes()).await.is_err()
                            || to_rmcp.write_all(b"\n").await.is_err()
                        {
                            break;
                        }
                    }
                    Err(reply) => {
                        let _ = errors.send(reply);
                    }
                }
            }
            Err(_) => break,
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// What to do with a checked line that arrives before the session's lifecycle is chosen.
enum BeforeLifecycle {
    /// An `initialize`, or a 2026-07-28 request with its protocol fields: rmcp starts the
    /// session on it.
    Chooses,
    /// A `ping`, a discovery, or a request naming a protocol version: rmcp answers it and
    /// waits on.
    Forward,
    /// A notification or a response: nothing answers it, and rmcp would end the session.
    Drop(String),
    /// A request with no protocol version: answered here, "initialize first".
    Answer(String),
}

/// [`BeforeLifecycle`] of a line [`check_line`] passed.
fn before_lifecycle(text: &str) -> BeforeLifecycle {
    const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return BeforeLifecycle::Forward;
    };
    let method = message.get("method").and_then(Value::as_str);
    let Some(method) = method else {
        return BeforeLifecycle::Drop(
            "dropped a response sent before initialize: the server asked nothing yet".into(),
        );
    };
    let Some(id) = message.get("id") else {
        return BeforeLifecycle::Drop(format!(
            "dropped the notification {method:?} sent before initialize; a client sends \
             `initialize` first"
        ));
    };
    if method == InitializeResultMethod::VALUE {
        return BeforeLifecycle::Chooses;
    }
    if method == PingRequestMethod::VALUE {
        return BeforeLifecycle::Forward;
    }
    let meta = message.get("params").and_then(|p| p.get("_meta"));
    let version = meta.and_then(|m| m.get(PROTOCOL_VERSION));
    match version.and_then(Value::as_str) {
        Some(version)
            if version == rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
                && method != DiscoverRequestMethod::VALUE
                && meta
                    .is_some_and(|m| m.get(CLIENT_CAPABILITIES).is_some_and(Value::is_object)) =>
        {
            BeforeLifecycle::Chooses
        }
        _ if version.is_some() => BeforeLifecycle::Forward,
        _ => BeforeLifecycle::Answer(error_line(
            &reply_id(Some(id)),
            -32600,
            &format!(
                "invalid request: {method} before initialize. A 2025-11-25 client sends \
                 `initialize` first, and `notifications/initialized` after its answer; a \
                 2026-07-28 client puts {PROTOCOL_VERSION} and {CLIENT_CAPABILITIES} in each \
                 request's params._meta"
            ),
        )),
    }
}

/// Give the memory the allocator holds free back to the system (glibc's `malloc_trim`, every
/// arena); nothing elsewhere.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free memory of the allocator's arenas to the system;
    // it takes no pointer and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

enum Line {
    Complete,
    /// Over the bound: `line` holds its head, and this its last [`TOO_LONG_TAIL_BYTES`].
    TooLong(Vec<u8>),
    Eof,
}

/// The end of a line over the bound kept to read its id from when the id is its root object's
/// last member, as the TypeScript SDK writes every request (`{...request, jsonrpc, id}`):
/// keeping the head alone answered its 17 MiB call `id: null` (attack round 17, R17-C10).
const TOO_LONG_TAIL_BYTES: usize = 4 << 10;

/// Read one line into `line`, or discard it up to its end if it exceeds the bound.
async fn read_bounded_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(if too_long {
                Line::TooLong(tail)
            } else if line.is_empty() {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let (chunk, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => (&buffer[..end], Some(end + 1)),
            None => (buffer, None),
        };
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE_BYTES {
                // The line's head is kept to read its id from (attack round 16, R16-C7: a
                // request over the bound was answered `id: null`, and the TypeScript SDK's
                // call waited for its answer until it timed out).
                too_long = true;
                let room = TOO_LONG_HEAD_BYTES.saturating_sub(line.len());
                tail.extend_from_slice(&line[line.len().saturating_sub(TOO_LONG_TAIL_BYTES)..]);
                line.extend_from_slice(&chunk[..room.min(chunk.len())]);
                line.truncate(TOO_LONG_HEAD_BYTES);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        if too_long {
            tail.extend_from_slice(&chunk[chunk.len().saturating_sub(TOO_LONG_TAIL_BYTES)..]);
            let excess = tail.len().saturating_sub(TOO_LONG_TAIL_BYTES);
            tail.drain(..excess);
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong(tail)
            } else {
                Line::Complete
            });
        }
    }
}

/// The requests rmcp 3.9 knows (the typed variants of `ClientRequest`). One of these that rmcp
/// reads only as a custom request had `params` its typed variant refused: rmcp would answer
/// "method not found", so the filter answers `-32602` instead.
const TYPED_METHODS: &[&str] = &[
    PingRequestMethod::VALUE,
    InitializeResultMethod::VALUE,
    DiscoverRequestMethod::VALUE,
    CompleteRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    GetPromptRequestMethod::VALUE,
    ListPromptsRequestMethod::VALUE,
    ListResourcesRequestMethod::VALUE,
    ListResourceTemplatesRequestMethod::VALUE,
    ReadResourceRequestMethod::VALUE,
    SubscriptionsListenRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    GetTaskMethod::VALUE,
    UpdateTaskMethod::VALUE,
    CancelTaskMethod::VALUE,
    ListSkillsRequestMethod::VALUE,
    GetSkillRequestMethod::VALUE,
    ReadResourceDirectoryRequestMethod::VALUE,
];

/// The id to answer with: the request's own id when rmcp can read it (a string, or a number
/// rmcp reads as an `i64`: an integer in range, or an integral float below 2^53), else
/// `null` (`1.5`, `18446744073709551615`, `-1e300`, `null`, `true`, an object).
///
/// A string id longer than [`MAX_ID_BYTES`] is not echoed (`null`: a 5 MB id on an
/// unparseable line came back whole, attack round 6), and an integral float id is echoed as
/// the integer rmcp reads (`-0` as `0`, not `-0.0`).
fn reply_id(id: Option<&Value>) -> Value {
    match id {
        Some(Value::String(s)) if s.len() > MAX_ID_BYTES => Value::Null,
        Some(v @ (Value::String(_) | Value::Number(_)))
            if serde_json::from_value::<RequestId>(v.clone()).is_ok() =>
        {
            match v {
                Value::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => n
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map_or_else(|| v.clone(), |f| json!(f as i64)),
                _ => v.clone(),
            }
        }
        _ => Value::Null,
    }
}

/// The longest string id answered with (JSON-RPC ids are short handles; a longer one is
/// answered with a `null` id, and refused when the line is otherwise readable).
pub const MAX_ID_BYTES: usize = 1024;

/// The text of a line (trimmed of JSON whitespace) to hand to rmcp, or the error reply for a
/// message that must not reach it.
///
/// A message reaches rmcp only if rmcp's own reader (`ClientJsonRpcMessage`, the type its
/// stdio transport parses each line into) accepts it: for anything it refuses, rmcp 3.9
/// writes an error without an `id`, which no client can match to its request. So the filter
/// parses each line with that same type and answers a refusal itself, with the request's id
/// where it can be read and `null` where it cannot. A line serde cannot parse at all (not
/// UTF-8, a number beyond f64, a lone surrogate, nesting past serde's limit, a truncation)
/// still has its id read by a scan of its top-level members.
pub fn check_line(line: &[u8]) -> Result<std::borrow::Cow<'_, str>, String> {
    // rmcp ignores a leading byte order mark (RFC 8259 §8.1); so does the filter, and rmcp gets
    // the line without it.
    let line = trim_json_whitespace(line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line));
    if line.is_empty() {
        return Ok(std::borrow::Cow::Borrowed(""));
    }
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return Err(error_line(
                &scanned_id(line),
                -32700,
                &format!(
                    "parse error: the line is not UTF-8 (from byte {}); JSON-RPC messages are \
                     UTF-8 JSON (RFC 8259 §8.1)",
                    e.valid_up_to()
                ),
            ))
        }
    };
    match check(text)? {
        Checked::Forward => Ok(std::borrow::Cow::Borrowed(text)),
        Checked::Replace(with) => Ok(std::borrow::Cow::Owned(with)),
        Checked::Drop(why) => {
            tracing::warn!("{why}");
            Ok(std::borrow::Cow::Borrowed(""))
        }
    }
}

/// What [`check`] makes of a readable line.
enum Checked {
    /// Handed to rmcp as it is.
    Forward,
    /// Handed to rmcp as this line instead.
    Replace(String),
    /// Neither handed on nor answered (a response that is no answer to anything readable).
    Drop(String),
}

/// [`check_line`] for a line already known to be UTF-8 (without a byte order mark).
fn check(text: &str) -> Result<Checked, String> {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            let why = e.to_string();
            let hint = if why.contains("recursion limit") {
                " (values nested more than 128 levels deep are refused)"
            } else if why.contains("number out of range") {
                " (numbers must lie within ±1.7976931348623157e308)"
            } else if why.contains("hex escape") || why.contains("surrogate") {
                " (a \\u escape of a surrogate, D800-DFFF, must be half of a valid pair)"
            } else {
                ""
            };
            return Err(error_line(
                &scanned_id(text.as_bytes()),
                -32700,
                &format!("parse error: {e}{hint}"),
            ));
        }
    };
    let Value::Object(message) = &value else {
        // A batch: JSON-RPC answers it with an array holding a response per request in it, so
        // each request gets an error with its own id (attack round 15, R15-C7: a client on
        // 2025-03-26, whose base protocol lets clients batch, waited for ids 11 and 12 until
        // its timeout); notifications in it get nothing, as ever.
        const BATCH: &str = "invalid request: batches are not supported; send each JSON-RPC \
                             message as one object on its own line";
        if let Value::Array(members) = &value {
            let replies: Vec<Value> = members
                .iter()
                .filter_map(|member| member.get("id"))
                .map(|id| {
                    json!({"jsonrpc": "2.0", "id": reply_id(Some(id)),
                           "error": {"code": -32600, "message": BATCH}})
                })
                .collect();
            if !replies.is_empty() {
                return Err(Value::Array(replies).to_string());
            }
        }
        return Err(error_line(
            &Value::Null,
            -32600,
            "invalid request: a message must be one JSON object (batches are not supported)",
        ));
    };
    if let Some(key) = duplicate_member(text.as_bytes()) {
        return Err(error_line(
            &scanned_id(text.as_bytes()),
            -32600,
            &format!(
                "invalid request: the member {key:?} appears more than once; each member of a \
                 message is written once"
            ),
        ));
    }
    let id = message.get("id");
    let reply_id = reply_id(id);
    // A response (`result` or `error`, no `method`) is never answered, however malformed: an
    // answer to it is a response to a response, sent under the id of the server's own request,
    // which a client reads as the answer to its own request of that number. A malformed reply
    // to a server request (the sign-off form's) is handed to rmcp as an error response with
    // its id, which fails that request at once; it left the tool call waiting for the form's
    // 10 minutes (attack round 23, R23-C3).
    if message.get("method").is_none()
        && (message.contains_key("result") || message.contains_key("error"))
    {
        let well_formed = message.get("jsonrpc") == Some(&json!("2.0"))
            && !reply_id.is_null()
            && (message.contains_key("result") ^ message.contains_key("error"))
            && serde_json::from_str::<ClientJsonRpcMessage>(text).is_ok();
        if well_formed {
            return Ok(Checked::Forward);
        }
        if reply_id.is_null() {
            return Ok(Checked::Drop(format!(
                "a response without a readable id was dropped (JSON-RPC answers no response): \
                 {}",
                text.chars().take(200).collect::<String>()
            )));
        }
        return Ok(Checked::Replace(error_line(
            &reply_id,
            -32603,
            "the client's reply to this request is not a JSON-RPC response (it needs \
             \"jsonrpc\": \"2.0\", its id, and a \"result\" or an \"error\" object, not both)",
        )));
    }
    let invalid = |why: &str| {
        Err(error_line(
            &reply_id,
            -32600,
            &format!("invalid request: {why}"),
        ))
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    if id.is_some() && reply_id.is_null() {
        return invalid(
            "\"id\" must be a string of at most 1024 bytes or an integer from -2^63 to 2^63-1 \
             (not null, not a fraction)",
        );
    }
    let Some(method) = message.get("method") else {
        return invalid("no \"method\"");
    };
    let Some(method) = method.as_str() else {
        return invalid("\"method\" must be a string");
    };
    if message.contains_key("result") || message.contains_key("error") {
        return invalid("a request has no \"result\" or \"error\"");
    }
    let params = message.get("params");
    let invalid_params = |why: &str| {
        Err(error_line(
            &reply_id,
            -32602,
            &format!("invalid params: {why}"),
        ))
    };
    if !matches!(params, None | Some(Value::Object(_) | Value::Null)) {
        return invalid_params("\"params\" must be an object");
    }
    if let Some(meta) = params.and_then(|p| p.get("_meta")) {
        let bytes = crate::budget::json_bytes(meta);
        if bytes > MAX_META_BYTES {
            return invalid_params(&format!(
                "\"_meta\" takes {bytes} bytes of memory once parsed, more than the \
                 {MAX_META_BYTES} it may take: it carries a progress token and protocol fields; \
                 pass data in a tool's arguments or in files"
            ));
        }
    }
    if method == CallToolRequestMethod::VALUE {
        let name_ok = params
            .and_then(|p| p.get("name"))
            .is_some_and(Value::is_string);
        let arguments_ok = matches!(
            params.and_then(|p| p.get("arguments")),
            None | Some(Value::Object(_)) | Some(Value::Null)
        );
        if !name_ok || !arguments_ok {
            return invalid_params(
                "tools/call needs a string \"name\" and an object \"arguments\"",
            );
        }
    }
    // What rmcp itself reads.
    match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(JsonRpcMessage::Request(request)) => match &request.request {
            ClientRequest::CustomRequest(custom)
                if TYPED_METHODS.contains(&custom.method.as_str()) =>
            {
                invalid_params(&format!(
                    "these params do not fit {method}; see the MCP specification of {method}"
                ))
            }
            _ => Ok(Checked::Forward),
        },
        Ok(_) => Ok(Checked::Forward),
        Err(e) if TYPED_METHODS.contains(&method) => invalid_params(&format!("{method}: {e}")),
        Err(e) => invalid(&e.to_string()),
    }
}

/// JSON's whitespace (RFC 8259 §2: space, tab, line feed, carriage return) trimmed from both
/// ends of a line; a CRLF line end loses its carriage return here.
fn trim_json_whitespace(line: &[u8]) -> &[u8] {
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let start = line.iter().position(|b| !space(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !space(b))
        .map_or(start, |last| last + 1);
    &line[start..end]
}

/// The top-level members of a line holding a JSON object, found without parsing their values
/// (so without recursion, and whatever numbers, encodings or depth the values hold): each
/// complete member's key (with its quotes) and value, as written. The scan stops at the first
/// thing that is not a well-formed member (a truncated value, a mismatched bracket) and returns
/// the members before it, so the id of a line that is not JSON can still be read.
fn top_level_members(line: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut members = Vec::new();
    let mut at = skip_space(line, 0);
    if line.get(at) != Some(&b'{') {
        return members;
    }
    at += 1;
    loop {
        at = skip_space(line, at);
        if line.get(at) != Some(&b'"') {
            return members;
        }
        let Some(key_end) = string_end(line, at) else {
            return members;
        };
        let key = &line[at..key_end];
        at = skip_space(line, key_end);
        if line.get(at) != Some(&b':') {
            return members;
        }
        at = skip_space(line, at + 1);
        let start = at;
        // The closing brackets the value still owes, innermost last (a Vec, not recursion).
        let mut owed: Vec<u8> = Vec::new();
        let end = loop {
            let Some(&byte) = line.get(at) else {
                return members;
            };
            match byte {
                b'"' => {
                    let Some(after) = string_end(line, at) else {
                        return members;
                    };
                    at = after;
                    continue;
                }
                b'{' => owed.push(b'}'),
                b'[' => owed.push(b']'),
                b'}' if owed.is_empty() => break at,
                b',' if owed.is_empty() => break at,
                // A closer pops what it closes (in the guard); one that does not match ends
                // the scan.
                b'}' | b']' if owed.pop() != Some(byte) => return members,
                _ => {}
            }
            at += 1;
        };
        members.push((key, trim_json_whitespace(&line[start..end])));
        if line[end] == b'}' {
            return members;
        }
        at = end + 1;
    }
}

fn skip_space(line: &[u8], mut at: usize) -> usize {
    while matches!(line.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The index just past the string that opens at `start` (a `"`), if it closes.
fn string_end(line: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while let Some(&byte) = line.get(at) {
        match byte {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// The id to answer a line with, read by [`top_level_members`] (for a line serde cannot parse,
/// or whose members repeat): the id when the line has one readable id, or the same readable id
/// written more than once; `null` when it has none, when the id is unreadable (not UTF-8, a
/// lone surrogate, out of range, not a string or integer) and when the ids written differ.
fn scanned_id(line: &[u8]) -> Value {
    let ids: Vec<Value> = top_level_members(line)
        .into_iter()
        .filter(|(key, _)| serde_json::from_slice::<String>(key).is_ok_and(|key| key == "id"))
        .map(|(_, value)| {
            serde_json::from_slice::<Value>(value).map_or(Value::Null, |id| reply_id(Some(&id)))
        })
        .collect();
    match ids.split_first() {
        Some((first, rest)) if rest.iter().all(|id| id == first) => first.clone(),
        _ => Value::Null,
    }
}

/// The id of a line's root object when it is the object's last member, read from the line's
/// end (`..., "id": 7}`): in valid JSON the member before the final `}` belongs to the root.
/// `null` when the last member is not a scalar `id`.
fn last_member_id(tail: &[u8]) -> Value {
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let trim_end = |t: &[u8]| -> usize { t.iter().rposition(|b| !space(b)).map_or(0, |i| i + 1) };
    let mut end = trim_end(tail);
    if end == 0 || tail[end - 1] != b'}' {
        return Value::Null;
    }
    end = trim_end(&tail[..end - 1]);
    if end == 0 {
        return Value::Null;
    }
    let value_start = if tail[end - 1] == b'"' {
        // Back to the opening quote: one not escaped by an odd run of backslashes.
        let mut at = end - 1;
        loop {
            let Some(quote) = tail[..at].iter().rposition(|b| *b == b'"') else {
                return Value::Null;
            };
            let slashes = tail[..quote]
                .iter()
                .rev()
                .take_while(|b| **b == b'\\')
                .count();
            if slashes % 2 == 0 {
                break quote;
            }
            at = quote;
        }
    } else {
        tail[..end]
            .iter()
            .rposition(|b| space(b) || matches!(b, b':' | b',' | b'{' | b'[' | b'}' | b']'))
            .map_or(0, |i| i + 1)
    };
    let value = &tail[value_start..end];
    let before = trim_end(&tail[..value_start]);
    if before == 0 || tail[before - 1] != b':' {
        return Value::Null;
    }
    let key_end = trim_end(&tail[..before - 1]);
    if !tail[..key_end].ends_with(b"\"id\"") {
        return Value::Null;
    }
    let key_start = key_end - 4;
    let preceding = trim_end(&tail[..key_start]);
    if preceding == 0 || !matches!(tail[preceding - 1], b',' | b'{') {
        return Value::Null;
    }
    serde_json::from_slice::<Value>(value).map_or(Value::Null, |id| reply_id(Some(&id)))
}

/// The first top-level member name written more than once (serde keeps the last silently, rmcp
/// refuses the message).
fn duplicate_member(line: &[u8]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    top_level_members(line)
        .into_iter()
        .filter_map(|(key, _)| serde_json::from_slice::<String>(key).ok())
        .find(|key| !seen.insert(key.clone()))
}

fn error_line(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

async fn write_replies<W>(
    from_rmcp: DuplexStream,
    mut error_lines: mpsc::UnboundedReceiver<String>,
    mut output: W,
    in_flight: InFlight,
) where
    W: AsyncWrite + Unpin,
{
    let mut replies = BufReader::new(from_rmcp).lines();
    let mut errors_open = true;
    loop {
        // The filter's errors first: an error is queued before the next line reaches rmcp, so
        // replies leave in the order their requests arrived.
        let line = tokio::select! {
            biased;
            error = error_lines.recv(), if errors_open => match error {
                Some(line) => line,
                None => {
                    errors_open = false;
                    continue;
                }
            },
            reply = replies.next_line() => match reply {
                Ok(Some(line)) => {
                    if let Exchange::Response(id) = exchange(line.as_bytes()) {
                        in_flight.with(|ids| ids.remove(&id));
                    }
                    line
                }
                _ => break,
            },
        };
        if output.write_all(line.as_bytes()).await.is_err()
            || output.write_all(b"\n").await.is_err()
            || output.flush().await.is_err()
        {
            break;
        }
    }
    while let Ok(line) = error_lines.try_recv() {
        let _ = output.write_all(line.as_bytes()).await;
        let _ = output.write_all(b"\n").await;
    }
    let _ = output.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> Option<(i64, Value)> {
        check_line(text.as_bytes()).err().map(|line| {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            (v["error"]["code"].as_i64().unwrap_or(0), v["id"].clone())
        })
    }

    fn rmcp_reads(text: &str) -> bool {
        serde_json::from_str::<ClientJsonRpcMessage>(text).is_ok()
    }

    fn request(id: &str, method: &str, params: Option<&str>) -> String {
        match params {
            Some(p) => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{p}}}"#),
            None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#),
        }
    }

    /// Regression (issue 21): requests with the ids `1.5`, 2^64-1, below -2^63 or `null`, or
    /// with list-shaped `params` on `tools/list` and `ping`, got no answer an MCP client could
    /// match (rmcp refused them and wrote an error without an id). The table: every id shape
    /// and every params shape, with what rmcp's own reader says of each.
    #[test]
    fn every_shape_rmcp_refuses_is_answered_with_the_id_rmcp_could_read() {
        // (id as written, rmcp reads it)
        let ids: &[(&str, bool)] = &[
            ("1", true),
            ("0", true),
            ("-1", true),
            ("\"a\"", true),
            ("\"\"", true),
            ("1.0", true),
            ("1e2", true),
            ("9223372036854775807", true),
            ("-9223372036854775808", true),
            ("9007199254740991.0", true),
            ("1.5", false),
            ("9223372036854775808", false),
            ("18446744073709551615", false),
            ("-9223372036854775809", false),
            ("9007199254740992.0", false),
            ("1e300", false),
            ("null", false),
            ("true", false),
            ("[1]", false),
            ("{\"a\":1}", false),
        ];
        for (id, readable) in ids {
            for (method, params) in [("ping", None), ("tools/list", Some("{}"))] {
                let text = request(id, method, params);
                assert_eq!(
                    rmcp_reads(&text),
                    *readable,
                    "the table is wrong about {text}"
                );
                match code(&text) {
                    None => assert!(readable, "{text} must be answered"),
                    Some((c, reply)) => {
                        assert!(!readable, "{text} is rmcp's to answer, got {c}");
                        assert_eq!((c, reply), (-32600, Value::Null), "{text}");
                    }
                }
            }
        }
        // (method, params as written, rmcp reads it as that method)
        let params: &[(&str, &str, bool)] = &[
            ("ping", "{}", true),
            ("ping", "{\"_meta\":{}}", true),
            ("ping", "[]", false),
            ("ping", "[1]", false),
            ("ping", "{\"_meta\":5}", false),
            ("ping", "\"x\"", false),
            ("ping", "null", true),
            ("tools/list", "{}", true),
            ("tools/list", "{\"cursor\":\"c\"}", true),
            ("tools/list", "[]", false),
            ("tools/list", "{\"cursor\":5}", true),
            ("tools/call", "{\"name\":\"x\"}", true),
            ("tools/call", "{\"name\":\"x\",\"arguments\":{}}", true),
            ("tools/call", "{\"name\":\"x\",\"arguments\":[1]}", false),
            ("tools/call", "{\"name\":123}", false),
            ("tools/call", "[\"x\"]", false),
            ("resources/read", "{\"uri\":5}", false),
            ("prompts/get", "{}", false),
            ("initialize", "[]", false),
        ];
        for (method, p, typed) in params {
            let text = request("7", method, Some(p));
            let typed_by_rmcp = match serde_json::from_str::<ClientJsonRpcMessage>(&text) {
                Ok(JsonRpcMessage::Request(r)) => {
                    !matches!(r.request, ClientRequest::CustomRequest(_))
                }
                _ => false,
            };
            assert_eq!(typed_by_rmcp, *typed, "the table is wrong about {text}");
            match code(&text) {
                None => assert!(typed, "{text} must be answered"),
                Some((c, reply)) => {
                    assert!(!typed, "{text} is rmcp's to answer, got {c}");
                    assert_eq!((c, reply), (-32602, json!(7)), "{text}");
                }
            }
        }
        // A method rmcp does not know is rmcp's to answer (-32601), unless its params are
        // not an object, which rmcp cannot read at all.
        assert_eq!(code(&request("8", "x/y", Some("{}"))), None);
        assert_eq!(
            code(&request("8", "x/y", Some("[]"))),
            Some((-32602, json!(8)))
        );
    }

    /// Regression: rmcp 3.9 answered none of these, or `-32601` for bad `tools/call` params.
    /// Attack round 13, R13-9: a request's `_meta` past [`MAX_META_BYTES`] once parsed is
    /// answered `-32602` with its id and never reaches rmcp; a progress token passes.
    #[test]
    fn r13_9_a_large_meta_is_answered_not_held() {
        let empties = vec!["[]"; 100_000].join(",");
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{{\"name\":\"x\",\"arguments\":{{}},\"_meta\":{{\"x\":[{empties}]}}}}}}"
        );
        assert_eq!(code(&big), Some((-32602, json!(11))));
        let small = "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{},\"_meta\":{\"progressToken\":\"p\"}}}";
        assert_eq!(code(small), None);
    }

    /// Attack round 23, R23-C3: a malformed response (to the server's sign-off form) was
    /// answered with an error under the server's own request id, a response to a response the
    /// client read as the answer to its own request of that number, and the form's request
    /// stayed open for its 10 minutes. A response is never answered: a malformed one with a
    /// readable id reaches rmcp as an error response to that id (which fails the form at
    /// once); one without a readable id (a spec-valid error with `id: null` included) is
    /// dropped.
    #[test]
    fn r23_c3_responses_are_never_answered() {
        for malformed in [
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{},\"error\":{\"code\":1,\"message\":\"x\"}}",
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":\"no\"}",
            "{\"id\":0,\"result\":{\"action\":\"accept\"}}",
        ] {
            let line = check_line(malformed.as_bytes()).expect("never answered");
            let reply: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(reply["id"], json!(0), "{malformed}");
            assert_eq!(reply["error"]["code"], json!(-32603), "{malformed}");
            assert!(rmcp_reads(&line), "{malformed}");
        }
        for unreadable in [
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}",
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":{}}",
        ] {
            assert_eq!(
                check_line(unreadable.as_bytes()).as_deref(),
                Ok(""),
                "{unreadable}"
            );
        }
        let fine = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"action\":\"decline\"}}";
        assert_eq!(check_line(fine.as_bytes()).as_deref(), Ok(fine));
    }

    #[test]
    fn malformed_messages_get_the_right_error_and_id() {
        let cases: &[(&str, Option<(i64, Value)>)] = &[
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":NaN}", Some((-32700, json!(1)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"meth", Some((-32700, json!(1)))),
            ("{\"jsonrpc\":\"2.0\",\"meth", Some((-32700, Value::Null))),
            ("[1,2]", Some((-32600, Value::Null))),
            ("42", Some((-32600, Value::Null))),
            ("{\"id\":7,\"method\":\"ping\"}", Some((-32600, json!(7)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}", Some((-32600, Value::Null))),
            ("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":5}", Some((-32600, json!("a")))),
            ("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":\"x\"}", Some((-32602, json!(3)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":123}}", Some((-32602, json!(4)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":[1]}}", Some((-32602, json!(5)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"result\":{}}", Some((-32600, json!(1)))),
            ("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\",\"params\":[]}", Some((-32602, Value::Null))),
            ("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}", None),
            ("\u{feff}{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}", None),
            ("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", None),
            ("{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}", None),
            ("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{}}}", None),
        ];
        for (text, want) in cases {
            assert_eq!(&code(text), want, "{text}");
            // Nothing rmcp cannot read goes through.
            if want.is_none() {
                assert!(rmcp_reads(text.trim_start_matches('\u{feff}')), "{text}");
            }
        }
    }

    /// Attack round 15, R15-C7: a batch's requests each get an error with their own id, in
    /// one array (JSON-RPC's answer to a batch); its notifications get none; a batch of
    /// notifications alone, and an array of non-messages, get the one `null`-id error.
    #[test]
    fn r15_c7_each_request_of_a_batch_gets_an_error_with_its_id() {
        let batch = r#"[{"jsonrpc":"2.0","id":11,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#;
        let reply: Value =
            serde_json::from_str(&check_line(batch.as_bytes()).unwrap_err()).unwrap();
        let replies = reply.as_array().expect("an array for a batch");
        let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
        assert_eq!(ids, [&json!(11), &json!("b")]);
        for r in replies {
            assert_eq!(r["error"]["code"], json!(-32600), "{r}");
            assert!(
                r["error"]["message"].as_str().unwrap().contains("own line"),
                "{r}"
            );
        }
        for lone in [
            r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
            "[1,2]",
            "[]",
        ] {
            assert_eq!(code(lone), Some((-32600, Value::Null)), "{lone}");
        }
    }

    fn code_bytes(line: &[u8]) -> Option<(i64, Value)> {
        check_line(line).err().map(|line| {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            (v["error"]["code"].as_i64().unwrap_or(0), v["id"].clone())
        })
    }

    fn deep(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    /// Regression (attack round 4, B5): a request whose params held a number beyond f64
    /// (`1e400`) was answered `-32700` with a `null` id though its id was readable, and an id
    /// of invalid UTF-8 came back mangled (decoded lossily to U+FFFD, then answered). Every
    /// line serde cannot parse is now answered once, with its id where one readable id is
    /// written, `null` where none is; nothing is decoded lossily.
    #[test]
    fn b5_unparseable_lines_are_answered_with_their_readable_id() {
        let big = "9".repeat(400);
        type Case = (Vec<u8>, Option<(i64, Value)>);
        let cases: Vec<Case> = vec![
            // Numbers beyond f64 in params: the id is readable.
            (br#"{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"raster_sample","arguments":{"input":"dem.tif","coordinates":[[1e400,0]]}}}"#.to_vec(), Some((-32700, json!("call-1")))),
            (br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"v":-1e400}}}"#.to_vec(), Some((-32700, json!(2)))),
            (format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"_meta":{{"progressToken":{big}}}}}}}"#).into_bytes(), Some((-32700, json!(3)))),
            (format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{"n":-{big}}},"id":"after"}}"#).into_bytes(), Some((-32700, json!("after")))),
            // A large integer f64 can hold is read (as a float): rmcp's to answer.
            (br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":{"n":123456789012345678901234567890}}}"#.to_vec(), None),
            // Ids beyond f64 or beyond i64 are unreadable.
            (br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#.to_vec(), Some((-32700, Value::Null))),
            (br#"{"jsonrpc":"2.0","id":-1e400,"method":"ping"}"#.to_vec(), Some((-32700, Value::Null))),
            (format!(r#"{{"jsonrpc":"2.0","id":{big},"method":"ping"}}"#).into_bytes(), Some((-32700, Value::Null))),
            (br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#.to_vec(), Some((-32600, Value::Null))),
            // Lone surrogates: in the id it is unreadable, elsewhere the id is read.
            (br#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#.to_vec(), Some((-32700, Value::Null))),
            (br#"{"jsonrpc":"2.0","id":"\udc00x","method":"ping"}"#.to_vec(), Some((-32700, Value::Null))),
            (br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"input":"a\ud800.tif"}}}"#.to_vec(), Some((-32700, json!(5)))),
            // Invalid UTF-8: in the id it is unreadable (never mangled), elsewhere the id is read.
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}".to_vec(), Some((-32700, Value::Null))),
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"\xc0\xaf\",\"method\":\"ping\"}".to_vec(), Some((-32700, Value::Null))),
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\xff\"}".to_vec(), Some((-32700, json!("a")))),
            (b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"raster_info\",\"arguments\":{\"input\":\"dem\xff.tif\"}}}".to_vec(), Some((-32700, json!(6)))),
            // Byte order mark, CRLF, empty and whitespace-only lines.
            (b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":\"bom\",\"method\":\"ping\"}".to_vec(), None),
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"cr\",\"method\":\"ping\"}\r".to_vec(), None),
            (b"\xef\xbb\xbf".to_vec(), None),
            (b"".to_vec(), None),
            (b" \t \r".to_vec(), None),
            // Nesting beyond serde's limit (no stack overflow): the id before or after is read.
            (format!(r#"{{"jsonrpc":"2.0","id":"deep","method":"ping","params":{{"a":{}}}}}"#, deep(10_000)).into_bytes(), Some((-32700, json!("deep")))),
            (format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{"a":{}}},"id":"deep-after"}}"#, deep(10_000)).into_bytes(), Some((-32700, json!("deep-after")))),
            (format!(r#"{{"jsonrpc":"2.0","method":"ping","id":{}}}"#, deep(10_000)).into_bytes(), Some((-32700, Value::Null))),
            (format!(r#"{{"jsonrpc":"2.0","id":"objs","method":"ping","params":{}{}}}"#, "{\"a\":".repeat(10_000), "}".repeat(10_000)).into_bytes(), Some((-32700, json!("objs")))),
            // Duplicate members: the id only when every copy is the same readable id.
            (br#"{"jsonrpc":"2.0","id":"dup","method":"ping","id":"dup2"}"#.to_vec(), Some((-32600, Value::Null))),
            (br#"{"jsonrpc":"2.0","id":"dup","method":"ping","id":"dup"}"#.to_vec(), Some((-32600, json!("dup")))),
            (br#"{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/list"}"#.to_vec(), Some((-32600, json!(7)))),
            (br#"{"jsonrpc":"2.0","id":8,"method":"ping","params":{},"params":{}}"#.to_vec(), Some((-32600, json!(8)))),
            // Trailing bytes, truncations, escapes and brackets inside strings.
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"nul\",\"method\":\"ping\"}\x00".to_vec(), Some((-32700, json!("nul")))),
            (br#"{"jsonrpc":"2.0","id":"a\"b","method":"pi"#.to_vec(), Some((-32700, json!("a\"b")))),
            (br#"{"jsonrpc":"2.0","id":12"#.to_vec(), Some((-32700, Value::Null))),
            (br#"{"\u0069d":9,"jsonrpc":"2.0","method":"ping"}"#.to_vec(), None),
            (br#"{"\u0069d":9,"jsonrpc":"2.0","method":"ping","params":NaN}"#.to_vec(), Some((-32700, json!(9)))),
            (br#"{"params":{"a":"},]{[,\""},"id":10,"x":NaN}"#.to_vec(), Some((-32700, json!(10)))),
            (br#"{"params":[1},"id":11,"x":NaN}"#.to_vec(), Some((-32700, Value::Null))),
        ];
        for (line, want) in &cases {
            let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
            assert_eq!(&code_bytes(line), want, "{shown}");
            if want.is_none() {
                // What passes is what rmcp reads (or nothing at all), without BOM or CR.
                let text = check_line(line).unwrap_or_default();
                assert!(text.is_empty() || rmcp_reads(&text), "{shown}");
                assert!(
                    !text.starts_with('\u{feff}') && !text.ends_with('\r'),
                    "{shown}"
                );
            }
        }
    }

    /// The twin: the scan agrees with serde on every well-formed line (the id serde reads).
    /// Regression (attack round 6, transport observation): an unparseable line's 5 MB id came
    /// back whole, and `-0` as `-0.0`. A long id is answered with `null` (and a readable line
    /// with one is refused); a short one and an integral id are echoed as rmcp reads them.
    #[test]
    fn r6_long_ids_are_not_echoed_and_minus_zero_is_zero() {
        let long = "x".repeat(MAX_ID_BYTES + 1);
        let unterminated = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{long}\",\"method\":\"ping");
        let reply: Value =
            serde_json::from_str(&check_line(unterminated.as_bytes()).unwrap_err()).unwrap();
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(reply["error"]["code"], -32700);
        let readable = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{long}\",\"method\":\"ping\"}}");
        let reply: Value =
            serde_json::from_str(&check_line(readable.as_bytes()).unwrap_err()).unwrap();
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(reply["error"]["code"], -32600);
        // Twins: an id of exactly MAX_ID_BYTES is echoed; -0 is 0.
        let short = "y".repeat(MAX_ID_BYTES);
        let unterminated = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{short}\",\"method\":\"ping");
        let reply: Value =
            serde_json::from_str(&check_line(unterminated.as_bytes()).unwrap_err()).unwrap();
        assert_eq!(reply["id"], json!(short));
        let reply = check_line(b"{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"ping").unwrap_err();
        assert!(reply.contains("\"id\":0"), "{reply}");
        assert!(check_line(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{short}\",\"method\":\"ping\"}}").as_bytes()
        )
        .is_ok());
    }

    #[test]
    fn b5_the_scan_reads_the_id_serde_reads() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#" { "id" : "x,}]" , "method":"a" } "#,
            r#"{"method":"a","params":{"id":5,"l":[{"id":6}]},"id":-3}"#,
            r#"{"method":"a","params":{"s":"\\\"}"},"id":"q"}"#,
        ] {
            let serde: Value = serde_json::from_str(line).unwrap();
            assert_eq!(scanned_id(line.as_bytes()), serde["id"], "{line}");
        }
        assert_eq!(scanned_id(br#"{"method":"a"}"#), Value::Null);
        assert_eq!(scanned_id(b"[1]"), Value::Null);
    }

    #[tokio::test]
    async fn lines_are_bounded_and_answered() {
        let long = format!(
            "{}\n{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}\n",
            "x".repeat(MAX_LINE_BYTES + 10)
        );
        let mut input = BufReader::new(long.as_bytes());
        let mut line = Vec::new();
        assert!(matches!(
            read_bounded_line(&mut input, &mut line).await,
            Ok(Line::TooLong(_))
        ));
        line.clear();
        assert!(matches!(
            read_bounded_line(&mut input, &mut line).await,
            Ok(Line::Complete)
        ));
        assert!(line.starts_with(b"{\"jsonrpc\""));
        line.clear();
        assert!(matches!(
            read_bounded_line(&mut input, &mut line).await,
            Ok(Line::Eof)
        ));
    }

    /// Attack round 16, R16-C7: a request over the bound was answered `id: null` though its
    /// id stood in its first bytes; its head is kept, and the id read from it. An id after
    /// the head (the arguments first) is not guessed.
    #[tokio::test]
    async fn a_line_too_long_keeps_the_id_of_its_head() {
        let huge = "x".repeat(MAX_LINE_BYTES + 10);
        for (text, id) in [
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":"big-7","method":"tools/call","params":{{"name":"a","arguments":{{"s":"{huge}"}}}}}}"#
                ),
                json!("big-7"),
            ),
            (
                format!(r#"{{"jsonrpc":"2.0","params":{{"s":"{huge}"}},"id":8,"method":"ping"}}"#),
                Value::Null,
            ),
            // Attack round 17, R17-C10: the TypeScript SDK writes the id last.
            (
                format!(
                    r#"{{"method":"tools/call","params":{{"s":"{huge}"}},"jsonrpc":"2.0","id":9}}"#
                ),
                json!(9),
            ),
            (
                format!(
                    r#"{{"method":"tools/call","params":{{"s":"{huge}"}},"jsonrpc":"2.0","id" : "a\"b" }}"#
                ),
                json!("a\"b"),
            ),
            // An `id` last in a nested object is not the request's.
            (
                format!(r#"{{"method":"ping","params":{{"s":"{huge}","id":10}}}}"#),
                Value::Null,
            ),
        ] {
            let input_text = format!("{text}\n");
            let mut input = BufReader::new(input_text.as_bytes());
            let mut line = Vec::new();
            let Ok(Line::TooLong(tail)) = read_bounded_line(&mut input, &mut line).await else {
                panic!("too long");
            };
            assert!(line.len() <= TOO_LONG_HEAD_BYTES);
            assert!(tail.len() <= TOO_LONG_TAIL_BYTES);
            let head = scanned_id(&line);
            let found = if head.is_null() {
                last_member_id(&tail)
            } else {
                head
            };
            assert_eq!(found, id, "{}", &text[text.len() - 60..]);
        }
    }
}
