//! The JSON-RPC layer over real stdio: raw lines to the binary, each of which must get exactly
//! one reply line, with the id the client can match (issue 21, "every request gets an answer").

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc;
use std::time::Duration;

/// A server on a fresh workspace, spoken to in raw lines.
struct Raw {
    _workspace: tempfile::TempDir,
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start() -> Self {
        let mut raw = Self::spawn();
        raw.send(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
        let reply = raw.next().expect("initialize answered");
        assert_eq!(reply["id"], "init", "{reply}");
        raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        raw
    }

    /// A server that has not been initialized.
    fn spawn() -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let mut child = gdal_mcp_tests::spawn_raw(workspace.path(), false).unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            _workspace: workspace,
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    fn send_bytes(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&self) -> Option<Value> {
        let line = self.lines.recv_timeout(Duration::from_secs(20)).ok()?;
        Some(serde_json::from_str(&line).expect("only JSON-RPC lines on stdout"))
    }

    /// Send `line`, then a ping with id `sentinel`; every other reply line until the ping's
    /// (rmcp answers requests concurrently, so a slower reply to `line` is awaited after the
    /// ping's, and a second one would be seen within half a second).
    fn replies_to(&mut self, line: &str, sentinel: &str) -> Vec<Value> {
        self.replies_to_bytes(line.as_bytes(), sentinel)
    }

    fn replies_to_bytes(&mut self, line: &[u8], sentinel: &str) -> Vec<Value> {
        self.send_bytes(line);
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"{sentinel}","method":"ping"}}"#
        ));
        let mut replies = Vec::new();
        let mut pinged = false;
        while !pinged || replies.is_empty() {
            let Some(reply) = self.next() else {
                break;
            };
            if reply["id"] == sentinel {
                pinged = true;
            } else {
                replies.push(reply);
            }
        }
        while let Ok(extra) = self.lines.recv_timeout(Duration::from_millis(500)) {
            replies.push(serde_json::from_str(&extra).expect("only JSON-RPC lines on stdout"));
        }
        replies
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Regression (issue 21): the ids `1.5`, 2^64-1, below -2^63 and `null`, and list-shaped
/// `params` on `tools/list` and `ping`, got no answer a client could match. The table is what
/// rmcp 3.9 reads (see `transport::tests`): each line gets exactly one reply, with the id rmcp
/// could read, or `null`.
#[test]
fn every_request_line_gets_exactly_one_reply_with_a_matchable_id() {
    let mut raw = Raw::start();
    // (line, the reply's id, the error code or None for a result)
    let cases: Vec<(String, Value, Option<i64>)> = vec![
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"ping"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#.into(), Value::Null, Some(-32600)),
        (r#"{"jsonrpc":"2.0","id":10,"method":"tools/list","params":[]}"#.into(), json!(10), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":11,"method":"ping","params":[]}"#.into(), json!(11), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":12,"method":"ping","params":[1,2]}"#.into(), json!(12), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":13,"method":"prompts/get","params":{}}"#.into(), json!(13), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"raster_info","arguments":[1]}}"#.into(), json!(14), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":15,"method":"ping","params":{"_meta":5}}"#.into(), json!(15), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":5}}"#.into(), json!(16), Some(-32602)),
        (r#"{"jsonrpc":"2.0","id":17,"method":"ping","result":{}}"#.into(), json!(17), Some(-32600)),
        // What rmcp reads, rmcp answers: once, with the id it read.
        (r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}"#.into(), json!(9223372036854775807_i64), None),
        (r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#.into(), json!(i64::MIN), None),
        (r#"{"jsonrpc":"2.0","id":"s","method":"ping","params":null}"#.into(), json!("s"), None),
        (r#"{"jsonrpc":"2.0","id":20,"method":"tools/list","params":{}}"#.into(), json!(20), None),
        (r#"{"jsonrpc":"2.0","id":21,"method":"no/such"}"#.into(), json!(21), Some(-32601)),
    ];
    // A response, even one whose id cannot be read, is never answered: an answer to it is a
    // response to a response (attack round 23, R23-C3).
    for (index, line) in [
        r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
    ]
    .iter()
    .enumerate()
    {
        let replies = raw.replies_to(line, &format!("response-sentinel-{index}"));
        assert!(replies.is_empty(), "{line} answered: {replies:?}");
    }
    for (index, (line, id, code)) in cases.iter().enumerate() {
        let replies = raw.replies_to(line, &format!("sentinel-{index}"));
        assert_eq!(replies.len(), 1, "exactly one reply to {line}: {replies:?}");
        let reply = &replies[0];
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(&reply["id"], id, "{line} -> {reply}");
        assert!(reply.get("id").is_some(), "the reply names an id: {reply}");
        assert_eq!(reply["error"]["code"].as_i64(), *code, "{line} -> {reply}");
    }
    // A notification is never answered, and the server still serves.
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":"last","method":"ping"}"#);
    let reply = raw.next().expect("the server still serves");
    assert_eq!(reply["id"], "last", "{reply}");
}

/// Regression (attack round 4, B5): a `tools/call` whose arguments held `1e400` was answered
/// `-32700` with a `null` id though its id was readable, and an id of invalid UTF-8 came back
/// mangled (decoded lossily, then answered with U+FFFD). Over real stdio, every line serde
/// cannot parse gets exactly one reply, with its id where one readable id is written; lines
/// with nothing in them get none; stdout holds only JSON-RPC; the server keeps answering.
#[test]
fn b5_unparseable_lines_get_one_reply_with_their_readable_id() {
    let mut raw = Raw::start();
    let big = "9".repeat(400);
    let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    // (line, the reply's id, the error code or None for a result)
    let cases: Vec<(Vec<u8>, Value, Option<i64>)> = vec![
        (br#"{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"raster_sample","arguments":{"input":"dem.tif","coordinates":[[1e400,0]]}}}"#.to_vec(), json!("call-1"), Some(-32700)),
        (br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"raster_sample","arguments":{"input":"dem.tif","coordinates":[[-1e400,0]]}}}"#.to_vec(), json!(2), Some(-32700)),
        (format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"_meta":{{"progressToken":{big}}}}}}}"#).into_bytes(), json!(3), Some(-32700)),
        (format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{"n":-{big}}},"id":"after"}}"#).into_bytes(), json!("after"), Some(-32700)),
        (br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#.to_vec(), Value::Null, Some(-32700)),
        (format!(r#"{{"jsonrpc":"2.0","id":{big},"method":"ping"}}"#).into_bytes(), Value::Null, Some(-32700)),
        (br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#.to_vec(), Value::Null, Some(-32600)),
        (br#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#.to_vec(), Value::Null, Some(-32700)),
        (br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raster_info","arguments":{"input":"a\ud800.tif"}}}"#.to_vec(), json!(5), Some(-32700)),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}".to_vec(), Value::Null, Some(-32700)),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"\xc0\xaf\",\"method\":\"ping\"}".to_vec(), Value::Null, Some(-32700)),
        (b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"raster_info\",\"arguments\":{\"input\":\"dem\xff.tif\"}}}".to_vec(), json!(6), Some(-32700)),
        (b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":\"bom\",\"method\":\"ping\"}".to_vec(), json!("bom"), None),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"cr\",\"method\":\"ping\"}\r".to_vec(), json!("cr"), None),
        (format!(r#"{{"jsonrpc":"2.0","id":"deep","method":"ping","params":{{"a":{}}}}}"#, deep(10_000)).into_bytes(), json!("deep"), Some(-32700)),
        (format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{"a":{}}},"id":"deep-after"}}"#, deep(10_000)).into_bytes(), json!("deep-after"), Some(-32700)),
        (format!(r#"{{"jsonrpc":"2.0","id":"objs","method":"tools/call","params":{{"name":"raster_info","arguments":{{"input":"dem.tif","x":{}1{}}}}}}}"#, "{\"a\":".repeat(10_000), "}".repeat(10_000)).into_bytes(), json!("objs"), Some(-32700)),
        (br#"{"jsonrpc":"2.0","id":"dup","method":"ping","id":"dup2"}"#.to_vec(), Value::Null, Some(-32600)),
        (br#"{"jsonrpc":"2.0","id":"same","method":"ping","id":"same"}"#.to_vec(), json!("same"), Some(-32600)),
        (br#"{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/list"}"#.to_vec(), json!(7), Some(-32600)),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"nul\",\"method\":\"ping\"}\x00".to_vec(), json!("nul"), Some(-32700)),
        (br#"{"jsonrpc":"2.0","id":"cut","method":"pi"#.to_vec(), json!("cut"), Some(-32700)),
    ];
    for (index, (line, id, code)) in cases.iter().enumerate() {
        let shown = String::from_utf8_lossy(&line[..line.len().min(160)]).into_owned();
        let replies = raw.replies_to_bytes(line, &format!("sentinel-{index}"));
        assert_eq!(
            replies.len(),
            1,
            "exactly one reply to {shown}: {replies:?}"
        );
        let reply = &replies[0];
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert!(reply.get("id").is_some(), "the reply names an id: {reply}");
        assert_eq!(&reply["id"], id, "{shown} -> {reply}");
        assert_eq!(reply["error"]["code"].as_i64(), *code, "{shown} -> {reply}");
        assert!(
            !reply.to_string().contains('\u{fffd}'),
            "nothing is decoded lossily: {reply}"
        );
    }
    // Lines with nothing in them get no reply: the next reply is the ping's.
    for line in [&b""[..], b"   ", b"\t \r", b"\r", b"\xef\xbb\xbf"] {
        raw.send_bytes(line);
    }
    raw.send(r#"{"jsonrpc":"2.0","id":"after-blank","method":"ping"}"#);
    let reply = raw.next().expect("the server still serves");
    assert_eq!(reply["id"], "after-blank", "{reply}");
    assert!(
        raw.lines.recv_timeout(Duration::from_millis(500)).is_err(),
        "nothing more on stdout"
    );
}

/// Attack round 15, R15-C8: an unknown tool name, resource URI or prompt name of 300,000
/// characters came back whole in its "not found" error. Each echo is now capped (its first
/// 120 characters and its length); a short unknown name is still echoed whole.
#[test]
fn r15_c8_protocol_errors_cap_a_long_name_they_echo() {
    let mut raw = Raw::start();
    let long = "A".repeat(300_000);
    let lines = [
        json!({"jsonrpc": "2.0", "id": "tool", "method": "tools/call",
               "params": {"name": long, "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": "resource", "method": "resources/read",
               "params": {"uri": format!("methodology://{long}")}}),
        json!({"jsonrpc": "2.0", "id": "prompt", "method": "prompts/get",
               "params": {"name": long}}),
    ];
    for line in lines {
        let id = line["id"].clone();
        let replies = raw.replies_to(&line.to_string(), "sentinel");
        let reply = replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id}: no reply"));
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.len() < 4_000 && message.contains("characters)"),
            "{id}: {} characters: {}",
            message.len(),
            &message[..message.len().min(300)]
        );
    }
    let short = json!({"jsonrpc": "2.0", "id": "short", "method": "tools/call",
                       "params": {"name": "no_such_tool", "arguments": {}}});
    let replies = raw.replies_to(&short.to_string(), "sentinel2");
    let message = replies[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"no_such_tool\""), "{message}");
}

/// Attack round 15, R15-C5: every plugin instance reserved wasmtime's default 4 GiB of
/// address space plus guard, so one gated call took the server to 5.23 GB of virtual memory
/// and two at once under `RLIMIT_AS` 6 GB failed closed ("mmap failed to reserve"). Each
/// instance now reserves what a plugin may grow to: two gated calls at once keep the peak
/// address space under 3 GB.
#[test]
fn r15_c5_plugin_instances_reserve_only_what_they_may_use() {
    let mut raw = Raw::start();
    let dem = raw._workspace.path().join("dem.asc");
    std::fs::write(
        &dem,
        "ncols 4\nnrows 4\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2 3 4\n5 6 7 8\n9 10 11 12\n13 14 15 16\n",
    )
    .unwrap();
    for (id, output) in [("a", "a.tif"), ("b", "b.tif")] {
        raw.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "raster_convert",
                               "arguments": {"input": "dem.asc", "output": output}}})
            .to_string(),
        );
    }
    for _ in 0..2 {
        let reply = raw.next().expect("both calls answered");
        assert!(
            !reply["result"]["isError"].as_bool().unwrap_or(true),
            "{reply}"
        );
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", raw.child.id())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmPeak:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(peak_kb < 3_000_000, "VmPeak {peak_kb} kB");
}

/// Attack round 15, R15-C4: after a 2025-11-25 handshake, a second `initialize` asking for
/// 2026-07-28 was answered "2025-11-25" and then flipped the session to 2026-07-28 (`ping`
/// became "method not found", `tools/list` came back in the 2026 shape). A second
/// `initialize` is now an invalid request that changes nothing: `ping` and `tools/list`
/// answer as before, in both directions of the flip.
#[test]
fn r15_c4_a_second_initialize_is_refused_and_changes_nothing() {
    let mut raw = Raw::start();
    for asked in ["2026-07-28", "2025-11-25", "2025-06-18"] {
        let again = json!({"jsonrpc": "2.0", "id": "again", "method": "initialize",
                           "params": {"protocolVersion": asked, "capabilities": {},
                                      "clientInfo": {"name": "t", "version": "1"}}});
        let replies = raw.replies_to(&again.to_string(), "s1");
        let reply = replies
            .iter()
            .find(|r| r["id"] == "again")
            .expect("the second initialize is answered");
        assert_eq!(reply["error"]["code"], -32600, "{asked}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("already initialized") && message.contains("2025-11-25"),
            "{asked}: {message}"
        );
        let ping = json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"});
        let replies = raw.replies_to(&ping.to_string(), "s2");
        let reply = replies.iter().find(|r| r["id"] == "ping").expect("ping");
        assert!(reply.get("result").is_some(), "{asked}: ping: {reply}");
        let list = json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"});
        let replies = raw.replies_to(&list.to_string(), "s3");
        let reply = replies
            .iter()
            .find(|r| r["id"] == "list")
            .expect("tools/list");
        assert!(reply["result"]["tools"].is_array(), "{asked}: {reply}");
        assert!(
            reply["result"].get("resultType").is_none(),
            "{asked}: still the 2025-11-25 shape: {}",
            &reply.to_string()[..300]
        );
    }
}

/// Attack round 19, R19-C4: two requests in flight under one id both ran, and one answer came
/// back. The second is now answered `-32600` with the id, at once, and nothing of it runs; the
/// first is answered; the id is free again once answered (the twin). The first call is held
/// in flight by the debug builds' pause between checks and open.
#[test]
fn r19_c4_an_id_in_flight_is_not_taken_twice() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::testdata().unwrap().join("dem.tif"),
        workspace.path().join("dem.tif"),
    )
    .unwrap();
    let mut child = std::process::Command::new(gdal_mcp_tests::binary().unwrap())
        .arg("serve")
        .arg("--workspace")
        .arg(workspace.path())
        .arg("--cache-dir")
        .arg(gdal_mcp_tests::shared_cache())
        .env("GDAL_MCP_TEST_PAUSE_AFTER_CHECKS_MS", "1500")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let next = || -> Value {
        serde_json::from_str(&lines.recv_timeout(Duration::from_secs(30)).unwrap()).unwrap()
    };
    send(
        r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(next()["id"], "init");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raster_info","arguments":{"input":"dem.tif"}}}"#,
    );
    send(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raster_convert","arguments":{"input":"dem.tif","output":"b.tif"}}}"#,
    );
    let refused = next();
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let answered = next();
    assert_eq!(answered["id"], 7, "{answered}");
    assert!(answered["result"].is_object(), "{answered}");
    send(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    let again = next();
    assert_eq!(again["id"], 7, "{again}");
    assert!(again["result"].is_object(), "{again}");
    assert!(!workspace.path().join("b.tif").exists());
    let _ = child.kill();
    let _ = child.wait();
}

/// Attack round 20, R20-C7: a 2025-11-25 client's `tools/list` sent before `initialize` was
/// told to add the 2026-07-28 `_meta` fields; it is now told to initialize first. Found beside
/// it: a notification (or a response) before `initialize` ended rmcp's handshake, and the
/// server exited ("expect initialized request, but received: Some(Notification(...))"); it is
/// now dropped with a warning. The twins: `ping` before `initialize` is answered, a 2026-07-28
/// request with its `_meta` fields runs without one, and after `initialize` the same
/// `tools/list` is answered.
#[test]
fn r20_c7_requests_and_notifications_before_initialize() {
    let mut raw = Raw::spawn();
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":99,"result":{}}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":"early","method":"tools/list","params":{}}"#);
    let early = raw.next().expect("the early request is answered");
    assert_eq!(early["id"], "early", "{early}");
    assert_eq!(early["error"]["code"], -32600, "{early}");
    let message = early["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("before initialize") && message.contains("sends `initialize` first"),
        "{message}"
    );
    raw.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    let ping = raw.next().expect("ping answered");
    assert!(ping["result"].is_object(), "{ping}");
    raw.send(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    let init = raw
        .next()
        .expect("initialize answered: the server is still up");
    assert_eq!(init["id"], "init", "{init}");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    raw.send(r#"{"jsonrpc":"2.0","id":"late","method":"tools/list","params":{}}"#);
    let late = raw.next().expect("tools/list answered");
    assert!(late["result"]["tools"].is_array(), "{late}");

    let mut modern = Raw::spawn();
    modern.send(r#"{"jsonrpc":"2.0","id":"m","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
    let listed = modern.next().expect("a 2026-07-28 request is answered");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}
