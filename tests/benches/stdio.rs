//! Benchmarks over real stdio against the release binary (`cargo bench -p gdal-mcp-tests
//! --bench stdio`): cold start to the initialize response, `raster_info` and `vector_info` round
//! trips, and idle resident memory. JSON-RPC is spoken directly over the child's pipes so that only the
//! server is measured.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Session {
    fn start(binary: &Path, workspace: &Path, cache: &Path) -> Session {
        let mut child = Command::new(binary)
            .args(["serve", "--workspace"])
            .arg(workspace)
            .arg("--cache-dir")
            .arg(cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("GDAL_MCP_BENCH_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("server starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Session {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").expect("write");
        self.stdin.flush().expect("flush");
        let mut buffer = String::new();
        loop {
            buffer.clear();
            self.stdout.read_line(&mut buffer).expect("read");
            let message: Value = serde_json::from_str(&buffer).expect("JSON line");
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let response = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .expect("write");
        response
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let root = gdal_mcp_tests::repo_root();
    let binary = std::env::var_os("GDAL_MCP_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/gdal-mcp"));
    assert!(
        binary.is_file(),
        "build first: cargo build --release -p gdal-mcp"
    );
    let data = gdal_mcp_tests::testdata().expect("test data");
    let workspace = tempfile::tempdir().expect("tempdir");
    for name in ["dem.tif", "nc.gpkg"] {
        std::fs::copy(data.join(name), workspace.path().join(name)).expect("copy");
    }
    let cache = tempfile::tempdir().expect("cache dir");
    println!("binary: {}", binary.display());

    // `GDAL_MCP_BENCH_ONLY=gated` runs only the gated-call section (for alternating runs of two
    // binaries, where the other sections only add time).
    let only_gated = std::env::var("GDAL_MCP_BENCH_ONLY").is_ok_and(|v| v == "gated");
    if only_gated {
        let mut session = Session::start(&binary, workspace.path(), cache.path());
        session.initialize();
        gated_calls(&mut session, workspace.path(), 1000);
        return;
    }

    // Cold start with an empty component cache (Cranelift compiles the built-in domains).
    let started = Instant::now();
    let mut first = Session::start(&binary, workspace.path(), cache.path());
    first.initialize();
    println!(
        "cold start, empty component cache: {}",
        ms(started.elapsed())
    );
    drop(first);

    // Cold start with the cache warm: process spawn to initialize response.
    let mut starts = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let mut session = Session::start(&binary, workspace.path(), cache.path());
        let response = session.initialize();
        starts.push(started.elapsed());
        assert_eq!(response["result"]["serverInfo"]["name"], json!("gdal-mcp"));
    }
    println!(
        "cold start to initialize response (30 runs): p50 {} | min {} | max {}",
        ms(percentile(&mut starts, 0.5)),
        ms(percentile(&mut starts, 0.0)),
        ms(percentile(&mut starts, 1.0))
    );

    // raster_info round trips and idle memory.
    let mut session = Session::start(&binary, workspace.path(), cache.path());
    session.initialize();
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "idle RSS after initialize: {:.1} MB",
        session.rss_kib() as f64 / 1024.0
    );
    let path = workspace.path().join("dem.tif");
    let mut trips = Vec::new();
    for index in 0..520 {
        let started = Instant::now();
        let response = session.request(
            "tools/call",
            json!({"name": "raster_info", "arguments": {"input": path}}),
        );
        let elapsed = started.elapsed();
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
        if index == 0 {
            println!(
                "first raster_info (includes GDAL driver registration): {}",
                ms(elapsed)
            );
        }
        if index >= 20 {
            trips.push(elapsed);
        }
    }
    println!(
        "raster_info round trip (500 calls after 20 warm-up): p50 {} | p90 {} | p99 {}",
        ms(percentile(&mut trips, 0.5)),
        ms(percentile(&mut trips, 0.9)),
        ms(percentile(&mut trips, 0.99))
    );
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "RSS after 520 raster_info calls: {:.1} MB",
        session.rss_kib() as f64 / 1024.0
    );

    // vector_info round trips: the 100 NC counties (GeoPackage, 14 fields).
    let path = workspace.path().join("nc.gpkg");
    let mut trips = Vec::new();
    for index in 0..520 {
        let started = Instant::now();
        let response = session.request(
            "tools/call",
            json!({"name": "vector_info", "arguments": {"input": path}}),
        );
        let elapsed = started.elapsed();
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
        if index >= 20 {
            trips.push(elapsed);
        }
    }
    println!(
        "vector_info round trip (500 calls after 20 warm-up): p50 {} | p90 {} | p99 {}",
        ms(percentile(&mut trips, 0.5)),
        ms(percentile(&mut trips, 0.9)),
        ms(percentile(&mut trips, 0.99))
    );

    gated_calls(&mut session, workspace.path(), 300);
}

/// A gated call on a cache hit: raster_resample of the small DEM, each call writing a new file
/// (gate, capsules read, GDAL work, commit, ledger, lineage). The first call is refused; it is
/// answered once, and every later call finds the capsules.
fn gated_calls(session: &mut Session, workspace: &Path, calls: usize) {
    let input = workspace.join("dem.tif");
    let arguments = |index: usize| {
        json!({"input": input, "output": workspace.join(format!("gated-{index}.tif")),
               "resampling": "nearest", "resolution": [60, 60]})
    };
    let refused = session.request(
        "tools/call",
        json!({"name": "raster_resample", "arguments": arguments(0)}),
    );
    // A refusal is an error result: its JSON is the second text block.
    let refusal: Value = refused["result"]["content"][1]["text"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null);
    let mut answers = serde_json::Map::new();
    for entry in refusal["refusal"].as_array().into_iter().flatten() {
        let domain = entry["domain"].as_str().unwrap_or_default().to_string();
        answers.insert(domain, gdal_mcp_tests::justification("nearest"));
    }
    let mut first = arguments(0);
    first["justification"] = Value::Object(answers);
    let done = session.request(
        "tools/call",
        json!({"name": "raster_resample", "arguments": first}),
    );
    assert_eq!(done["result"]["isError"], json!(false), "{done}");
    let mut trips = Vec::new();
    for index in 1..=calls + 20 {
        let started = Instant::now();
        let response = session.request(
            "tools/call",
            json!({"name": "raster_resample", "arguments": arguments(index)}),
        );
        let elapsed = started.elapsed();
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
        if index > 20 {
            trips.push(elapsed);
        }
    }
    println!(
        "gated raster_resample, capsule cache hit ({calls} calls after 20 warm-up): p50 {} | p90 {} | p99 {}",
        ms(percentile(&mut trips, 0.5)),
        ms(percentile(&mut trips, 0.9)),
        ms(percentile(&mut trips, 0.99))
    );
}
