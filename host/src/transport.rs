//! The stdio transport in front of rmcp: every request gets an answer, and only whole JSON-RPC
//! lines reach stdout.
//!
//! rmcp 3.9 drops a line that is not JSON (a `NaN` literal, a truncated line) or is longer than
//! 16 MiB without replying, and answers a `tools/call` whose `params` have the wrong types with
//! `-32601`. A client then waits forever, or is told the method does not exist. So the server
//! reads stdin itself, line by line, with a length bound:
//!
//! * a line that is not JSON is answered `-32700` (id `null`);
//! * a line over [`MAX_LINE_BYTES`] is discarded up to its end and answered `-32600`;
//! * a JSON value that is not a valid request, response or notification object (a batch,
//!   a scalar, a missing or wrong `jsonrpc`, a non-string `method`, an object as `id`, `params`
//!   that are not an object or array) is answered `-32600`, with the id where it can be
//!   recovered; a `tools/call` without a string `name` or with non-object `arguments` is
//!   answered `-32602`;
//! * everything else goes to rmcp unchanged.
//!
//! rmcp's replies and these errors are written to stdout by one writer task, a whole line at a
//! time, so they never interleave.

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

/// The error reply for a message that must not reach rmcp, if any.
pub fn check(text: &str) -> Result<(), String> {
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
    let id = message.get("id").cloned();
    let reply_id = match &id {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    };
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
    if matches!(&id, Some(v) if !matches!(v, Value::String(_) | Value::Number(_) | Value::Null)) {
        return invalid("\"id\" must be a string or a number");
    }
    let Some(method) = message.get("method") else {
        // A response (to a server request): it needs an id and a result or an error.
        if id.is_some() && (message.contains_key("result") ^ message.contains_key("error")) {
            return Ok(());
        }
        return invalid("no \"method\"");
    };
    let Some(method) = method.as_str() else {
        return invalid("\"method\" must be a string");
    };
    let params = message.get("params");
    if !matches!(
        params,
        None | Some(Value::Object(_)) | Some(Value::Array(_))
    ) {
        return Err(error_line(
            &reply_id,
            -32602,
            "invalid params: \"params\" must be an object",
        ));
    }
    if method == "tools/call" {
        let name_ok = params
            .and_then(|p| p.get("name"))
            .is_some_and(Value::is_string);
        let arguments_ok = matches!(
            params.and_then(|p| p.get("arguments")),
            None | Some(Value::Object(_)) | Some(Value::Null)
        );
        if !name_ok || !arguments_ok {
            return Err(error_line(
                &reply_id,
                -32602,
                "invalid params: tools/call needs a string \"name\" and an object \"arguments\"",
            ));
        }
    }
    Ok(())
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
        let line = tokio::select! {
            reply = replies.next_line() => match reply {
                Ok(Some(line)) => line,
                _ => break,
            },
            error = error_lines.recv(), if errors_open => match error {
                Some(line) => line,
                None => {
                    errors_open = false;
                    continue;
                }
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
            ("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}", None),
            ("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", None),
            ("{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}", None),
            ("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{}}}", None),
        ];
        for (text, want) in cases {
            assert_eq!(&code(text), want, "{text}");
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
