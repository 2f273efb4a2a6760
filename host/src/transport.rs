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
//! * a line that is not JSON is answered `-32700` (id `null`);
//! * a line over [`MAX_LINE_BYTES`] is discarded up to its end and answered `-32600`;
//! * a JSON value that is not a valid request, response or notification object (a batch,
//!   a scalar, a missing or wrong `jsonrpc`, a non-string `method`, an id rmcp cannot read as
//!   a string or an `i64`, an id of `null`) is answered `-32600`, with the id where rmcp could
//!   read it and `null` where it could not;
//! * `params` that are not an object, a `tools/call` without a string `name` or with
//!   non-object `arguments`, and any params rmcp's typed reader refuses for a method it knows
//!   (which it would otherwise answer as "method not found", or not at all) are answered
//!   `-32602`;
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
    let reading = tokio::spawn(read_requests(input, to_rmcp, errors));
    let writing = tokio::spawn(write_replies(from_rmcp, error_lines, output));
    (rmcp_reader, rmcp_writer, Pumps { reading, writing })
}

async fn read_requests<R>(
    input: R,
    mut to_rmcp: DuplexStream,
    errors: mpsc::UnboundedSender<String>,
) where
    R: AsyncRead + Unpin,
{
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::with_capacity(1 << 12);
    loop {
        line.clear();
        match read_bounded_line(&mut input, &mut line).await {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong) => {
                let _ = errors.send(error_line(
                    &Value::Null,
                    -32600,
                    &format!("request line longer than {MAX_LINE_BYTES} bytes; it was discarded"),
                ));
            }
            Ok(Line::Complete) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                match check(text) {
                    Ok(()) => {
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

enum Line {
    Complete,
    TooLong,
    Eof,
}

/// Read one line into `line`, or discard it up to its end if it exceeds the bound.
async fn read_bounded_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(if too_long {
                Line::TooLong
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
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
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
fn reply_id(id: Option<&Value>) -> Value {
    match id {
        Some(v @ (Value::String(_) | Value::Number(_)))
            if serde_json::from_value::<RequestId>(v.clone()).is_ok() =>
        {
            v.clone()
        }
        _ => Value::Null,
    }
}

/// The error reply for a message that must not reach rmcp, if any.
///
/// A message reaches rmcp only if rmcp's own reader (`ClientJsonRpcMessage`, the type its
/// stdio transport parses each line into) accepts it: for anything it refuses, rmcp 3.9
/// writes an error without an `id`, which no client can match to its request. So the filter
/// parses each line with that same type and answers a refusal itself, with the request's id
/// where rmcp could read one and `null` where it could not.
pub fn check(text: &str) -> Result<(), String> {
    // rmcp ignores a leading byte order mark (RFC 8259 §8.1); so does the filter.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return Err(error_line(
                &Value::Null,
                -32700,
                &format!("parse error: {e}"),
            ))
        }
    };
    let Value::Object(message) = &value else {
        return Err(error_line(
            &Value::Null,
            -32600,
            "invalid request: a message must be one JSON object (batches are not supported)",
        ));
    };
    let id = message.get("id");
    let reply_id = reply_id(id);
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
            "\"id\" must be a string or an integer from -2^63 to 2^63-1 (not null, not a \
             fraction)",
        );
    }
    let Some(method) = message.get("method") else {
        // A response (to a server request): it needs an id and a result or an error.
        if id.is_some() && (message.contains_key("result") ^ message.contains_key("error")) {
            return match serde_json::from_str::<ClientJsonRpcMessage>(text) {
                Ok(_) => Ok(()),
                Err(e) => invalid(&format!("not a JSON-RPC response: {e}")),
            };
        }
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
            _ => Ok(()),
        },
        Ok(_) => Ok(()),
        Err(e) if TYPED_METHODS.contains(&method) => invalid_params(&format!("{method}: {e}")),
        Err(e) => invalid(&e.to_string()),
    }
}

fn error_line(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

async fn write_replies<W>(
    from_rmcp: DuplexStream,
    mut error_lines: mpsc::UnboundedReceiver<String>,
    mut output: W,
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
                Ok(Some(line)) => line,
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
        check(text).err().map(|line| {
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
    #[test]
    fn malformed_messages_get_the_right_error_and_id() {
        let cases: &[(&str, Option<(i64, Value)>)] = &[
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":NaN}", Some((-32700, Value::Null))),
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"meth", Some((-32700, Value::Null))),
            ("[1,2]", Some((-32600, Value::Null))),
            ("42", Some((-32600, Value::Null))),
            ("{\"id\":7,\"method\":\"ping\"}", Some((-32600, json!(7)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}", Some((-32600, Value::Null))),
            ("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":5}", Some((-32600, json!("a")))),
            ("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":\"x\"}", Some((-32602, json!(3)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":123}}", Some((-32602, json!(4)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":[1]}}", Some((-32602, json!(5)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"result\":{}}", Some((-32600, json!(1)))),
            ("{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", Some((-32600, Value::Null))),
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
            Ok(Line::TooLong)
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
}
