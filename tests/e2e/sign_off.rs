//! A person's sign-off through the host (issue 20): the 2026-07-28 `InputRequiredResult`
//! round trip driven by hand with the rmcp client (forged, edited, replayed, unanswered,
//! re-argued states and a changed policy, each refused naming what failed; an answered state
//! runs the call once), the 2025-11-25 `elicitation/create` answered by a client that
//! declines, and a client without elicitation refused with the terminal route in both eras.

use gdal_mcp_tests::{binary, is_error, shared_cache, structured, text, Era, REQUEST_TIMEOUT};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation, InputRequiredResult, InputResponses, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

const POLICY: &str =
    "[[rule]]\nid = \"people sign datum changes\"\ndomain = \"crs_datum\"\noutcome = \"human\"\n";
const CLIENT: &str = "sign-off-e2e";

/// A workspace, a store inside it, and a folder outside it for the key and the policy.
struct Setup {
    workspace: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let setup = Self {
            workspace: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        };
        std::fs::write(setup.outside.path().join("policy.toml"), POLICY).unwrap();
        square(&setup.path("cell.geojson"), 0.0);
        setup
    }

    fn path(&self, name: &str) -> PathBuf {
        self.workspace.path().join(name)
    }

    fn store(&self) -> PathBuf {
        self.workspace.path().join(".preflight")
    }

    /// Start a server on this setup and connect a client: `forms` declares form elicitation.
    async fn connect(
        &self,
        era: Era,
        forms: bool,
        policy: &str,
    ) -> RunningService<RoleClient, ClientConfig> {
        let ws = self.workspace.path().to_path_buf();
        let key = self.outside.path().join("user.key");
        let policy = self.outside.path().join(policy);
        let command = tokio::process::Command::new(binary().unwrap()).configure(move |cmd| {
            cmd.arg("serve").arg("--workspace").arg(&ws);
            cmd.arg("--cache-dir").arg(shared_cache());
            cmd.arg("--key-file").arg(&key).arg("--policy").arg(&policy);
        });
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let capabilities: ClientCapabilities = serde_json::from_value(if forms {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        })
        .unwrap();
        let info = ClientConfig::new(capabilities, Implementation::new(CLIENT, "0.1"));
        let lifecycle = match era {
            Era::Legacy => ClientLifecycleMode::Initialize,
            Era::Modern => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        };
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            info.serve_with_lifecycle(transport, lifecycle),
        )
        .await
        .unwrap()
        .unwrap()
    }
}

/// A one-degree square at (x, 10) in EPSG:4326 (its bytes change with x).
fn square(path: &Path, x: f64) {
    let ring = json!([
        [x, 10.0],
        [x + 1.0, 10.0],
        [x + 1.0, 11.0],
        [x, 11.0],
        [x, 10.0]
    ]);
    let collection = json!({"type": "FeatureCollection", "features": [{"type": "Feature",
        "properties": {"id": 1}, "geometry": {"type": "Polygon", "coordinates": [ring]}}]});
    std::fs::write(path, collection.to_string()).unwrap();
}

fn arguments(output: &str) -> Value {
    json!({"input": "cell.geojson", "output": output, "dst_crs": "EPSG:32631", "overwrite": true})
}

/// One `tools/call` round: the arguments, and the state and answers of a retry.
async fn round(
    client: &RunningService<RoleClient, ClientConfig>,
    args: Value,
    state: Option<&str>,
    responses: Option<InputResponses>,
) -> CallToolResponse {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let mut params = CallToolRequestParams::new("vector_reproject").with_arguments(args);
    if let Some(state) = state {
        params = params.with_request_state(state);
    }
    if let Some(responses) = responses {
        params = params.with_input_responses(responses);
    }
    tokio::time::timeout(REQUEST_TIMEOUT, client.peer().call_tool_once(params))
        .await
        .unwrap()
        .unwrap()
}

fn asked(response: CallToolResponse) -> InputRequiredResult {
    match response {
        CallToolResponse::InputRequired(asked) => asked,
        other => panic!("expected an InputRequiredResult, got {other:?}"),
    }
}

fn complete(response: CallToolResponse) -> CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// The answers to every form of `asked`.
fn answers(asked: &InputRequiredResult, decision: &str) -> InputResponses {
    asked
        .input_requests
        .as_ref()
        .unwrap()
        .keys()
        .map(|k| {
            (
                k.clone(),
                json!({"action": "accept", "content": {"decision": decision, "note": "e2e"}}),
            )
        })
        .collect()
}

/// `result` is a refusal that says `needle`, and `output` was not written.
fn refused(result: &CallToolResult, needle: &str, output: &Path) {
    assert!(is_error(result), "not refused: {}", text(result));
    assert!(
        text(result).contains(needle),
        "the refusal does not say {needle:?}: {}",
        text(result)
    );
    assert!(!output.exists(), "{} was written", output.display());
}

/// 2026-07-28: the form and a sealed state; forged, edited, unanswered and re-argued states
/// are refused naming what failed; the answered state runs the call once (its receipt and the
/// ledger name the client and the note); a replay is refused; a decline is refused; nothing
/// else is written.
#[tokio::test]
async fn a_request_state_approves_only_the_call_it_was_sealed_for() {
    let setup = Setup::new();
    let client = setup.connect(Era::Modern, true, "policy.toml").await;
    let out = setup.path("utm.gpkg");

    let first = asked(round(&client, arguments("utm.gpkg"), None, None).await);
    let state = first.request_state.clone().expect("a request state");
    let requests = first.input_requests.clone().expect("a form");
    assert_eq!(requests.len(), 1);
    let form = serde_json::to_value(requests.values().next().unwrap()).unwrap();
    assert_eq!(form["method"], "elicitation/create", "{form}");
    let message = form["params"]["message"].as_str().unwrap();
    for shown in ["vector_reproject", "cell.geojson", "sha256", "crs_change"] {
        assert!(message.contains(shown), "the form lacks {shown}: {message}");
    }
    assert!(!out.exists());

    // Forged: a string this server never sealed.
    let forged = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            Some("forged-state-eyJ2IjoxfQ"),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    refused(&forged, "not one this server sealed", &out);

    // Edited: one character of the tag changed.
    let mut bytes = state.clone().into_bytes();
    let at = bytes.len() - 10;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(bytes).unwrap();
    let result = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            Some(&edited),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    refused(&result, "edited", &out);

    // Another call (another output) with this call's state and answers.
    let other = complete(
        round(
            &client,
            arguments("other.gpkg"),
            Some(&state),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    refused(&other, "arguments changed", &setup.path("other.gpkg"));

    // The state without the form's answer.
    let unanswered = complete(round(&client, arguments("utm.gpkg"), Some(&state), None).await);
    refused(&unanswered, "no answer", &out);

    // Answered: the call runs, once.
    let done = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            Some(&state),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    assert!(!is_error(&done), "{}", text(&done));
    assert!(out.exists());
    let receipts = structured(&done)["reflection"].clone();
    let crs = receipts
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "crs_datum")
        .unwrap()
        .clone();
    let approval = crs["policy"]["approval"].as_str().unwrap_or_default();
    assert!(
        approval.contains(CLIENT) && approval.contains("e2e"),
        "{crs}"
    );
    std::fs::remove_file(&out).unwrap();

    // Replayed unchanged.
    let replay = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            Some(&state),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    refused(&replay, "replayed", &out);

    // A fresh form, declined.
    let second = asked(round(&client, arguments("utm.gpkg"), None, None).await);
    let declined = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            second.request_state.as_deref(),
            Some(answers(&second, "decline")),
        )
        .await,
    );
    refused(&declined, "declined", &out);

    // The ledger: proposal, approval, execution, in order; intact; a denial recorded.
    let ledger = std::fs::read_to_string(setup.store().join("ledger.jsonl")).unwrap();
    let kinds: Vec<String> = ledger
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let approval_at = kinds
        .iter()
        .position(|k| k == "approval")
        .expect("approval");
    assert!(
        kinds[..approval_at].iter().any(|k| k == "gate"),
        "{kinds:?}"
    );
    assert!(
        kinds[approval_at + 1..].iter().any(|k| k == "gate"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "denial"), "{kinds:?}");
    let execution = ledger
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "gate")
        .find(|l| l.to_string().contains("\"approval\""))
        .expect("the execution's gate line names the approval");
    assert!(execution.to_string().contains(CLIENT), "{execution}");
    let verify = std::process::Command::new(binary().unwrap())
        .args(["ledger", "verify", "--store"])
        .arg(setup.store())
        .arg("--key-file")
        .arg(setup.outside.path().join("user.key"))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // The state is never logged: nothing of it in the store's files but the nonce's line.
    let journal = std::fs::read_to_string(setup.store().join("approvals.jsonl")).unwrap();
    assert!(!journal.contains(&state) && !ledger.contains(&state));
}

/// Regression, attack round 8, R8-8: deleting the one `spent` line of `approvals.jsonl` let
/// the used state run its call again in the same server. A line cut from the end (which no
/// chain sees) is still refused as replayed (the server remembers what it spent); a line
/// deleted before others breaks the chain, and every sign-off fails closed naming the file,
/// `ledger verify` reports it, and moving the file aside (the operator's recovery) brings
/// the forms back: the clean twin, a fresh state, runs once.
#[tokio::test]
async fn r8_8_a_deleted_spent_line_replays_nothing() {
    let setup = Setup::new();
    let client = setup.connect(Era::Modern, true, "policy.toml").await;
    let out = setup.path("utm.gpkg");
    let journal = setup.store().join("approvals.jsonl");
    let first = asked(round(&client, arguments("utm.gpkg"), None, None).await);
    let state = first.request_state.clone().expect("a request state");
    let approve = || {
        round(
            &client,
            arguments("utm.gpkg"),
            Some(&state),
            Some(answers(&first, "approve")),
        )
    };
    let done = complete(approve().await);
    assert!(!is_error(&done), "{}", text(&done));
    std::fs::remove_file(&out).unwrap();
    let original = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let spent = lines
        .iter()
        .position(|l| l.contains("\"type\":\"spent\""))
        .expect("a spent line");
    assert!(spent + 1 < lines.len(), "{original}");

    // Cut from the spent line to the end: the chain that is left is intact, and the server
    // still knows the state is spent.
    std::fs::write(&journal, lines[..spent].join("\n") + "\n").unwrap();
    refused(&complete(approve().await), "replayed", &out);

    // Only the spent line deleted: the chain is broken, and sign-offs fail closed.
    let mut without: Vec<&str> = lines.clone();
    without.remove(spent);
    std::fs::write(&journal, without.join("\n") + "\n").unwrap();
    let result = complete(approve().await);
    refused(&result, "approvals.jsonl", &out);
    assert!(
        text(&result).contains("chain is broken"),
        "{}",
        text(&result)
    );
    let verify = std::process::Command::new(binary().unwrap())
        .args(["ledger", "verify", "--store"])
        .arg(setup.store())
        .arg("--key-file")
        .arg(setup.outside.path().join("user.key"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(!verify.status.success(), "{said}");
    assert!(
        said.contains("approvals.jsonl") && said.contains("broken"),
        "{said}"
    );

    // The operator moves the file aside: a fresh form runs the call once.
    std::fs::rename(&journal, setup.store().join("approvals.jsonl.broken")).unwrap();
    let again = asked(round(&client, arguments("utm.gpkg"), None, None).await);
    let done = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            again.request_state.as_deref(),
            Some(answers(&again, "approve")),
        )
        .await,
    );
    assert!(!is_error(&done), "{}", text(&done));
    assert!(out.exists());
    client.cancel().await.unwrap();
}

/// 2026-07-28: a state sealed before the operator changed the policy file (same rule, other
/// bytes, so another digest) is refused after the restart, naming the policy.
#[tokio::test]
async fn a_request_state_is_refused_once_the_policy_changed() {
    let setup = Setup::new();
    let first = {
        let client = setup.connect(Era::Modern, true, "policy.toml").await;
        let first = asked(round(&client, arguments("utm.gpkg"), None, None).await);
        client.cancel().await.unwrap();
        first
    };
    std::fs::write(
        setup.outside.path().join("edited.toml"),
        format!("# tightened wording\n{POLICY}"),
    )
    .unwrap();
    let client = setup.connect(Era::Modern, true, "edited.toml").await;
    let result = complete(
        round(
            &client,
            arguments("utm.gpkg"),
            first.request_state.as_deref(),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    refused(&result, "policy changed", &setup.path("utm.gpkg"));
}

/// 2025-11-25 with form elicitation: rmcp's default client handler declines every form; the
/// call is refused saying so, nothing is written, and the denial is a ledger line.
#[tokio::test]
async fn an_elicitation_declined_by_the_host_refuses_the_call() {
    let setup = Setup::new();
    let client = setup.connect(Era::Legacy, true, "policy.toml").await;
    let result = complete(round(&client, arguments("utm.gpkg"), None, None).await);
    refused(&result, "declined", &setup.path("utm.gpkg"));
    assert!(!text(&result).contains("cannot show forms"));
    let ledger = std::fs::read_to_string(setup.store().join("ledger.jsonl")).unwrap();
    assert!(ledger.contains("\"kind\":\"denial\""), "{ledger}");
}

/// A client that declared no elicitation, in either era: refused, nothing written, the
/// refusal says the host cannot show forms and names `gdal-mcp approve ID`; no request state
/// is handed out.
#[tokio::test]
async fn a_client_without_forms_gets_the_terminal_route_in_both_eras() {
    for era in [Era::Legacy, Era::Modern] {
        let setup = Setup::new();
        let client = setup.connect(era, false, "policy.toml").await;
        let response = round(&client, arguments("utm.gpkg"), None, None).await;
        let result = complete(response);
        refused(
            &result,
            "This host cannot show forms",
            &setup.path("utm.gpkg"),
        );
        assert!(
            text(&result).contains("gdal-mcp approve "),
            "{}",
            text(&result)
        );
        // Attack round 16, R16-C5: a justification persisted under the refusal's own key was
        // told the key "was not issued by this server"; it is told the decision waits for a
        // person.
        let entry = structured(&result)["refusal"]
            .as_array()
            .and_then(|entries| entries.iter().find(|e| e["domain"] == "crs_datum"))
            .cloned()
            .expect("a crs_datum entry");
        let Value::Object(persist) = json!({"domain": "crs_datum", "key": entry["key"],
                                            "justification": {"intent": "x"}})
        else {
            unreachable!()
        };
        let answer = tokio::time::timeout(
            REQUEST_TIMEOUT,
            client.peer().call_tool(
                CallToolRequestParams::new("persist_justification").with_arguments(persist),
            ),
        )
        .await
        .unwrap()
        .unwrap();
        assert!(is_error(&answer), "{}", text(&answer));
        assert!(
            text(&answer).contains("sign-off") && !text(&answer).contains("not issued"),
            "{}",
            text(&answer)
        );
    }
}

/// Regression, issue 21 attack round 10, R10-11: a `human` decision put the agent's
/// justification into the form and `approvals.jsonl` unchecked (1 MB a call: ~64 calls made
/// the journal unreadable and every sign-off fail closed). A justification over 4,096 bytes is
/// refused as on every other path and nothing is recorded; the clean twin, a short one,
/// records its request with the justification shown as written.
#[tokio::test]
async fn r10_11_a_long_justification_does_not_enter_the_sign_off_journal() {
    let setup = Setup::new();
    let client = setup.connect(Era::Legacy, false, "policy.toml").await;
    let with = |intent: String, output: &str| {
        let mut args = arguments(output);
        args["justification"] = json!({"crs_datum": {"intent": intent, "alternatives": [],
            "choice": {"method": "EPSG:32631", "rationale": "r", "tradeoffs": "t"},
            "confidence": "low"}});
        args
    };
    let journal = setup.store().join("approvals.jsonl");
    let long = "reason ".repeat(20_000);
    let result = complete(round(&client, with(long, "a.gpkg"), None, None).await);
    refused(&result, "the limit is 4096", &setup.path("a.gpkg"));
    let size = std::fs::metadata(&journal).map_or(0, |m| m.len());
    assert!(size < 16_384, "the journal grew to {size} bytes");
    let result = complete(round(&client, with("short".into(), "b.gpkg"), None, None).await);
    refused(&result, "gdal-mcp approve ", &setup.path("b.gpkg"));
    let written = std::fs::read_to_string(&journal).unwrap();
    assert!(written.contains("short"), "{written}");
}

/// A 2025-11-25 client speaking raw JSON-RPC lines that declares form elicitation and answers
/// every `elicitation/create` with an approval, after running the call's `during` (a file
/// changed while the person reads the form).
struct FormClient {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

impl FormClient {
    fn start(setup: &Setup) -> Self {
        use std::io::BufRead;
        let key = setup.outside.path().join("user.key");
        let policy = setup.outside.path().join("policy.toml");
        let extra: Vec<&std::ffi::OsStr> = vec![
            "--key-file".as_ref(),
            key.as_os_str(),
            "--policy".as_ref(),
            policy.as_os_str(),
        ];
        let mut child = gdal_mcp_tests::spawn_raw_with(setup.workspace.path(), false, &extra)
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Self {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        client.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": CLIENT, "version": "1"}}}),
        );
        let reply = client.next();
        assert_eq!(reply["id"], 0, "{reply}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(gdal_mcp_tests::REQUEST_TIMEOUT)
            .expect("the server answers");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Call `tool`; every form is approved after `during` ran. The call's result and the
    /// messages of the forms shown.
    fn call(&mut self, tool: &str, arguments: Value, during: &dyn Fn()) -> (Value, Vec<String>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
        let mut forms = Vec::new();
        loop {
            let message = self.next();
            if message["method"] == "elicitation/create" {
                forms.push(
                    message["params"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                during();
                self.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                    "action": "accept", "content": {"decision": "approve", "note": "e2e"}}}));
            } else if message["id"] == id {
                return (message["result"].clone(), forms);
            }
        }
    }
}

/// Attack round 18, R18-C5: a call cancelled while its sign-off form was open left the form
/// open in the host for its TTL (an answer to it approved nothing and was told nothing). The
/// server now cancels its own `elicitation/create`, as it does when the form expires, and
/// writes nothing.
#[test]
fn r18_c5_a_cancelled_call_closes_its_sign_off_form() {
    let setup = Setup::new();
    let mut client = FormClient::start(&setup);
    client.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "vector_reproject", "arguments": arguments("o.gpkg")}}));
    let form = loop {
        let message = client.next();
        if message["method"] == "elicitation/create" {
            break message["id"].clone();
        }
        assert_ne!(
            message["id"], 7,
            "the call ended before its form: {message}"
        );
    };
    client.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 7, "reason": "the user pressed Esc"}}),
    );
    let closed = loop {
        let message = client.next();
        if message["method"] == "notifications/cancelled" {
            break message;
        }
    };
    assert_eq!(closed["params"]["requestId"], form, "{closed}");
    assert!(!setup.path("o.gpkg").exists());
}

impl Drop for FormClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A 4 × 4 IDRISI raster (`.rst`, `.rdc`) in EPSG:32633 with a palette whose entry 1 is
/// `red`: GDAL 3.6.2 writes the palette to `<stem>.smp`, reads it for the colour table and
/// lists it in `GDALGetFileList`.
fn idrisi_with_palette(path: &Path, red: i16) {
    use gdal::raster::{ColorEntry, ColorTable, RgbaEntry};
    let mem = gdal::DriverManager::get_driver_by_name("MEM")
        .unwrap()
        .create_with_band_type::<u8, _>("", 4, 4, 1)
        .unwrap();
    let mut mem = mem;
    mem.set_geo_transform(&[500_000.0, 10.0, 0.0, 5_000_040.0, 0.0, -10.0])
        .unwrap();
    mem.set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    let mut band = mem.rasterband(1).unwrap();
    band.write(
        (0, 0),
        (4, 4),
        &mut gdal::raster::Buffer::new((4, 4), vec![1u8; 16]),
    )
    .unwrap();
    let entry = |r| {
        ColorEntry::Rgba(RgbaEntry {
            r,
            g: 0,
            b: 0,
            a: 255,
        })
    };
    band.set_color_table(&ColorTable::color_ramp(0, &entry(0), 1, &entry(red)).unwrap());
    let rst = gdal::DriverManager::get_driver_by_name("RST").unwrap();
    drop(
        mem.create_copy(&rst, path, &gdal::cpl::CslStringList::new())
            .unwrap(),
    );
}

/// Regression, attack round 13, R13-1 (its second half): a sign-off bound the input, the
/// sidecar names and the files headers name, not what GDAL reads. An IDRISI raster's palette
/// lives in `r.smp`, which GDAL 3.6.2 lists for the dataset and no sidecar name covers: its
/// colour table replaced while the form was open ran as approved. The read set holds what
/// GDAL listed for the input now: the form binds `r.smp` by its digest, and the approved call
/// is refused once it changed, or once it appeared while the form was open (the input is
/// listed again after the answer), with nothing written. The clean twin: nothing changes
/// during the form and the same call runs.
#[test]
fn r13_1_a_companion_gdal_lists_changed_during_the_form_voids_the_approval() {
    let other = tempfile::tempdir().unwrap();
    idrisi_with_palette(&other.path().join("r.rst"), 200);
    let swapped = std::fs::read(other.path().join("r.smp")).unwrap();
    let arguments = json!({"input": "r.rst", "output": "o.tif", "dst_crs": "EPSG:4326",
                           "resampling": "nearest", "overwrite": true,
                           "justification": {"resampling": gdal_mcp_tests::justification("nearest")}});
    for case in ["changed", "appeared", "clean"] {
        // A store of its own each: the first run's approval (of the palette as it was) would
        // still hold for the twin's identical files.
        let setup = Setup::new();
        idrisi_with_palette(&setup.path("r.rst"), 255);
        let smp = setup.path("r.smp");
        assert_ne!(std::fs::read(&smp).unwrap(), swapped);
        if case == "appeared" {
            std::fs::remove_file(&smp).unwrap();
        }
        let mut client = FormClient::start(&setup);
        let (result, forms) = client.call("raster_reproject", arguments.clone(), &|| {
            if case != "clean" {
                std::fs::write(&smp, &swapped).unwrap();
            }
        });
        assert_eq!(forms.len(), 1, "{case}: {result}");
        assert_eq!(
            forms[0].contains("r.smp"),
            case != "appeared",
            "{case}: the form binds the palette GDAL lists: {}",
            forms[0]
        );
        let out = setup.path("o.tif");
        if case == "clean" {
            assert_ne!(result["isError"], true, "{result}");
            assert!(out.exists());
        } else {
            assert_eq!(
                result["isError"], true,
                "{case}: ran on the swapped palette: {result}"
            );
            assert!(
                result
                    .to_string()
                    .contains("does not hold for the call as it is now"),
                "{case}: {result}"
            );
            assert!(!out.exists(), "{case}: written under the approval");
        }
    }
}

/// Attack round 15, R15-C6: `georef_source` was taken out of the arguments before the gate
/// saw them, so the digest a sign-off binds did not cover it: a call approved with
/// `internal` ran when retried with `world_file`, its output 0.05° east. The georeferencing
/// chosen is now part of the arguments the gate sees, binds and records: the retry with the
/// other source is refused naming the changed arguments, with nothing written; the retry
/// with the source that was shown runs.
#[tokio::test]
async fn r15_c6_a_sign_off_binds_the_georeferencing_chosen() {
    let setup = Setup::new();
    // A GeoTIFF whose internal geotransform is at 10.00° E, and a world file at 10.05° E.
    gdal_mcp_tests::dem_with_a_world_file_0_05_degrees_east(setup.workspace.path());
    let client = setup.connect(Era::Modern, true, "policy.toml").await;
    let call = |source: &str, state: Option<String>, responses: Option<InputResponses>| {
        let mut params = CallToolRequestParams::new("raster_reproject").with_arguments(
            json!({"input": "dem.tif", "output": "out.tif", "dst_crs": "EPSG:3857",
                   "resampling": "bilinear", "georef_source": source,
                   "justification": {"resampling": gdal_mcp_tests::justification("bilinear")}})
            .as_object()
            .cloned()
            .unwrap(),
        );
        if let Some(state) = state {
            params = params.with_request_state(state);
        }
        if let Some(responses) = responses {
            params = params.with_input_responses(responses);
        }
        let peer = client.peer().clone();
        async move {
            tokio::time::timeout(REQUEST_TIMEOUT, peer.call_tool_once(params))
                .await
                .unwrap()
                .unwrap()
        }
    };
    let out = setup.path("out.tif");
    let first = asked(call("internal", None, None).await);
    let state = first.request_state.clone().expect("a request state");
    let moved = complete(
        call(
            "world_file",
            Some(state.clone()),
            Some(answers(&first, "approve")),
        )
        .await,
    );
    refused(&moved, "arguments changed", &out);
    let shown = complete(call("internal", Some(state), Some(answers(&first, "approve"))).await);
    assert!(!is_error(&shown), "{}", text(&shown));
    let origin = gdal::Dataset::open(&out).unwrap().geo_transform().unwrap()[0];
    assert!(
        (origin - 1_113_194.9).abs() < 1.0,
        "the output's origin {origin} is not 10.00° E"
    );
    client.cancel().await.unwrap();
}

/// Attack round 16, R16-C9: to a host that declared forms, a refusal that also lacked another
/// domain's justification said "This host cannot show forms" and sent the person to a
/// terminal. It now says the form comes once the other justifications are given.
#[tokio::test]
async fn r16_c9_a_host_with_forms_is_not_sent_to_a_terminal() {
    for era in [Era::Legacy, Era::Modern] {
        let setup = Setup::new();
        let client = setup.connect(era, true, "policy.toml").await;
        // KML is written in WGS 84: format_selection asks too, so no form is shown yet.
        let arguments =
            json!({"input": "cell.geojson", "output": "utm.kml", "dst_crs": "EPSG:32631"});
        let result = complete(round(&client, arguments, None, None).await);
        assert!(is_error(&result), "{}", text(&result));
        let entries = structured(&result)["refusal"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            entries.iter().any(|e| e["domain"] == "format_selection"),
            "{}",
            text(&result)
        );
        let human = entries
            .iter()
            .find(|e| e["domain"] == "crs_datum")
            .expect("the crs_datum entry");
        let how = human["how_to_supply"].as_str().unwrap_or_default();
        assert!(
            !how.contains("cannot show forms") && how.contains("this host's form"),
            "{how}"
        );
    }
}
