//! In-process sandbox tests against the deliberately hostile component
//! (`plugins/testing/hostile`): a loop runs out of fuel, a panic becomes a trap carrying its
//! message, unbounded allocation hits the memory limit, a loop under a short wall-clock
//! deadline is stopped by epoch interruption, and after every failure the next call on the
//! same domain is served by a fresh instance.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::cache::ComponentCache;
use gdal_mcp::domains::sandbox::{wit, Bindings, Limits, PluginError, Provenance, Sandbox};
use gdal_mcp::domains::{CallFacts, Registry, Severity};
use gdal_mcp::gdal::facts::{CrsFacts, CrsKind, DatasetFacts, RasterFacts};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The hostile component built next to the built-in domains.
fn hostile_wasm() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/plugins/wasm32-wasip2/release/hostile.wasm")
}

/// A registry with the built-ins plus a temp folder holding a copy of hostile.wasm.
fn load(limits: Limits) -> (tempfile::TempDir, Registry) {
    let source = hostile_wasm();
    assert!(
        source.is_file(),
        "{} is missing; build the plugins first",
        source.display()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(&source, dir.path().join("hostile.wasm")).expect("copy hostile.wasm");
    let registry =
        Registry::load(&[dir.path().to_path_buf()], None, limits).expect("registry loads");
    assert!(registry.get("hostile").is_some(), "hostile domain loaded");
    (dir, registry)
}

/// A call whose `output` argument selects the hostile behaviour.
fn call(output: &str) -> CallFacts {
    let crs = CrsFacts {
        id: Some("EPSG:4326".to_string()),
        name: "WGS 84".to_string(),
        kind: CrsKind::Geographic,
        linear_unit: None,
        datum: Some("WGS_1984".to_string()),
        vertical: None,
        linear_unit_metres: None,
        axis_order: Some("north,east".to_string()),
        vertical_unit: None,
    };
    CallFacts {
        tool: "raster_info".to_string(),
        arguments: json!({"input": "in.tif", "output": output}),
        datasets: vec![DatasetFacts {
            role: "input".to_string(),
            path: "/w/in.tif".to_string(),
            driver: "GTiff".to_string(),
            crs: Some(crs),
            raster: Some(RasterFacts::default()),
            vector: None,
        }],
        target_crs: None,
        transformation: None,
        upstream: Vec::new(),
        measurement: None,
        output: None,
        grids: None,
    }
}

/// The domain still answers normally on the next call (a fresh instance).
fn still_works(registry: &Registry) {
    let hostile = registry.get("hostile").expect("hostile");
    let quiet = hostile
        .classify(&call("fine.tif"))
        .expect("a benign call after a failure succeeds");
    assert!(quiet.is_none(), "benign call has no opinion");
    let trigger = hostile
        .classify(&call("stdout.tif"))
        .expect("the stdout call after a failure succeeds")
        .expect("the stdout call asks for a justification");
    assert_eq!(trigger.severity, Severity::Required);
    assert_eq!(trigger.key_fields, json!({"hostile": true}));
}

#[test]
fn a_loop_runs_out_of_fuel_and_the_next_call_works() {
    let (_dir, registry) = load(Limits::default());
    let hostile = registry.get("hostile").expect("hostile");
    let version = hostile.info.version.clone();
    let error = hostile
        .classify(&call("loop.tif"))
        .expect_err("an endless loop must fail");
    match &error {
        PluginError::OutOfFuel {
            plugin,
            version: v,
            call,
            fuel,
        } => {
            assert_eq!(plugin, "hostile");
            assert_eq!(v, &version);
            assert_eq!(*call, "classify");
            assert_eq!(*fuel, Limits::default().fuel);
        }
        other => panic!("expected OutOfFuel, got {other:?}"),
    }
    let text = error.to_string();
    assert!(
        text.starts_with("plugin \"hostile\"") && text.contains("ran out of fuel"),
        "{text}"
    );
    still_works(&registry);
}

/// A guest that sleeps waits inside a host call (`pollable.block`), where neither fuel nor an
/// epoch deadline can stop it; the sandbox refuses the wait itself, at once.
#[test]
fn a_guest_that_waits_is_refused_at_once_and_the_next_call_works() {
    let (_dir, registry) = load(Limits::default());
    let hostile = registry.get("hostile").expect("hostile");
    let started = Instant::now();
    let error = hostile
        .classify(&call("sleep.tif"))
        .expect_err("a wait must fail");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not after the sleep or the deadline: {:?}",
        started.elapsed()
    );
    match &error {
        PluginError::Waited { plugin, call, .. } => {
            assert_eq!(plugin, "hostile");
            assert_eq!(*call, "classify");
        }
        other => panic!("expected Waited, got {other:?}"),
    }
    assert!(error.to_string().contains("tried to wait"), "{error}");
    still_works(&registry);
}

/// Regression: plugin output size was unbounded (a 40 MB prompt became an 80 MiB response).
#[test]
fn an_oversized_answer_breaks_the_contract() {
    let (_dir, registry) = load(Limits::default());
    let hostile = registry.get("hostile").expect("hostile");
    let error = hostile
        .classify(&call("huge.tif"))
        .expect_err("a 3 KiB reason is over the cap");
    assert!(
        matches!(&error, PluginError::Contract { call, .. } if *call == "classify"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("reason is 3072 bytes"),
        "{error}"
    );
    still_works(&registry);
}

#[test]
fn a_panic_is_a_trap_with_its_message_and_the_next_call_works() {
    let (_dir, registry) = load(Limits::default());
    let hostile = registry.get("hostile").expect("hostile");
    let error = hostile
        .classify(&call("trap.tif"))
        .expect_err("a panic must fail");
    match &error {
        PluginError::Trap {
            plugin,
            call,
            stderr,
            ..
        } => {
            assert_eq!(plugin, "hostile");
            assert_eq!(*call, "classify");
            assert!(
                stderr.contains("hostile domain panics on purpose"),
                "stderr should carry the panic message: {stderr:?}"
            );
        }
        other => panic!("expected Trap, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .contains("hostile domain panics on purpose"),
        "{error}"
    );
    still_works(&registry);
}

#[test]
fn unbounded_allocation_is_out_of_memory_and_the_next_call_works() {
    let limits = Limits::default();
    let (_dir, registry) = load(limits);
    let hostile = registry.get("hostile").expect("hostile");
    let error = hostile
        .classify(&call("oom.tif"))
        .expect_err("unbounded allocation must fail");
    match &error {
        PluginError::OutOfMemory {
            plugin,
            call,
            limit_mib,
            ..
        } => {
            assert_eq!(plugin, "hostile");
            assert_eq!(*call, "classify");
            assert_eq!(*limit_mib, limits.memory_bytes >> 20);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    still_works(&registry);
}

/// The short-deadline limits: far more fuel than seconds of looping can burn, so only the
/// wall-clock deadline (epoch interruption) can stop a loop.
fn short_deadline() -> Limits {
    Limits {
        memory_bytes: 64 << 20,
        fuel: u64::MAX / 2,
        deadline: Duration::from_millis(200),
    }
}

fn assert_deadline(error: &PluginError, elapsed: Duration, plugin_name: &str, version: &str) {
    match error {
        PluginError::Deadline {
            plugin,
            version: v,
            call,
            seconds,
        } => {
            assert_eq!(plugin, plugin_name);
            assert_eq!(v, version);
            assert_eq!(*call, "classify");
            assert!((seconds - 0.2).abs() < 1e-9, "seconds = {seconds}");
        }
        other => panic!("expected Deadline, got {other:?}"),
    }
    assert!(
        elapsed >= Duration::from_millis(150),
        "interrupted too early ({elapsed:?}): the deadline should be ~200 ms"
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "the deadline took {elapsed:?} to fire"
    );
    assert!(error.to_string().contains("deadline"), "{error}");
}

/// The sandbox on its own, kept alive for the whole test (so its epoch ticker runs).
#[test]
fn a_loop_under_a_short_deadline_is_interrupted_by_the_epoch_not_fuel() {
    let sandbox = Sandbox::new(short_deadline()).expect("sandbox");
    let bytes = std::fs::read(hostile_wasm()).expect("read hostile.wasm");
    let component = ComponentCache::new(None)
        .load(sandbox.engine(), &bytes)
        .expect("hostile.wasm compiles");
    let prepared = sandbox
        .prepare("hostile.wasm", &component)
        .expect("hostile.wasm implements the world");
    let who = Provenance {
        plugin: "hostile",
        version: "9.9.9",
    };
    let request = |output: &str| wit::ToolCall {
        tool: "raster_info".to_string(),
        arguments: json!({"input": "in.tif", "output": output}).to_string(),
        datasets: Vec::new(),
        target_crs: None,
        transformation: None,
        measurement: None,
        output: None,
        grids: None,
    };
    let looping = request("loop.tif");
    let started = Instant::now();
    let error = prepared
        .call(&who, "classify", |domain, store| match domain {
            Bindings::Current(d) => d.call_classify(store, &looping).map(|t| t.is_some()),
            _ => panic!("the hostile fixture is built against the current contract"),
        })
        .expect_err("an endless loop must fail");
    assert_deadline(&error, started.elapsed(), "hostile", "9.9.9");

    // The next call on the same prepared component gets a fresh instance and a fresh deadline.
    let benign = request("fine.tif");
    let answer = prepared
        .call(&who, "classify", |domain, store| match domain {
            Bindings::Current(d) => d.call_classify(store, &benign).map(|t| t.is_some()),
            _ => panic!("the hostile fixture is built against the current contract"),
        })
        .expect("a benign call after the deadline succeeds");
    assert!(!answer);
}

/// The same through `Registry::load`, as the server uses it. Run in a thread with a watchdog
/// so that a deadline that never fires fails the test instead of hanging it.
///
/// Regression: `Registry::load` built its `Sandbox` as a local and dropped it on return, which
/// stopped the epoch ticker, so loaded domains never saw the epoch advance and their
/// wall-clock deadline never fired (only fuel bounded them). `Prepared` now keeps the ticker.
#[test]
fn registry_domains_keep_their_wall_clock_deadline() {
    let (dir, registry) = load(short_deadline());
    let version = registry
        .get("hostile")
        .expect("hostile")
        .info
        .version
        .clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _dir = dir;
        let hostile = registry.get("hostile").expect("hostile");
        let started = Instant::now();
        let result = hostile.classify(&call("loop.tif"));
        let elapsed = started.elapsed();
        let after = hostile.classify(&call("fine.tif"));
        let _ = tx.send((result, elapsed, after.map(|t| t.is_none())));
    });
    let (result, elapsed, after) = rx.recv_timeout(Duration::from_secs(5)).expect(
        "the 200 ms deadline did not stop the loop within 5 s (the epoch is not advancing)",
    );
    let error = result.expect_err("an endless loop must fail");
    assert_deadline(&error, elapsed, "hostile", &version);
    assert!(after.expect("a benign call after the deadline succeeds"));
}
