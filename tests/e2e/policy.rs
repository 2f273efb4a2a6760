//! The operator's policy file (`--policy`, issue 20) over stdio: the policy of
//! `docs/operators.md` (its first TOML block, served as written) decides three calls in both
//! protocol eras; the same calls without a policy are today's results (the clean twin); a
//! policy the server cannot use stops it with the line and the reason; `gdal-mcp policy check`
//! and `policy explain`.

use gdal::raster::Buffer;
use gdal::spatial_ref::SpatialRef;
use gdal::DriverManager;
use gdal_mcp_tests::{binary, is_error, repo_root, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The first ```toml block of docs/operators.md.
fn guide_policy() -> String {
    let guide = std::fs::read_to_string(repo_root().join("docs/operators.md")).unwrap();
    let start = guide.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + guide[start..].find("```").unwrap();
    guide[start..end].to_string()
}

/// A policy file in a folder of its own, outside every workspace.
fn policy_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A 2x2 Float32 GeoTIFF with a geotransform and, optionally, a CRS as WKT.
fn raster(path: &Path, origin: (f64, f64), cell: f64, wkt: Option<&str>) {
    let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver
        .create_with_band_type::<f32, _>(path, 2, 2, 1)
        .unwrap();
    dataset
        .set_geo_transform(&[origin.0, cell, 0.0, origin.1, 0.0, -cell])
        .unwrap();
    if let Some(wkt) = wkt {
        dataset
            .set_spatial_ref(&SpatialRef::from_wkt(wkt).unwrap())
            .unwrap();
    }
    let mut band = dataset.rasterband(1).unwrap();
    band.write(
        (0, 0),
        (2, 2),
        &mut Buffer::new((2, 2), vec![1.0f32, 2.0, 3.0, 4.0]),
    )
    .unwrap();
}

/// A datum PROJ knows no shift for: its reprojection to WGS 84 is a ballpark operation.
const ISLAND: &str = "GEOGCS[\"Island 1950\",DATUM[\"Island_datum_1950\",SPHEROID[\"International 1924\",6378388,297]],PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433]]";

/// A one-degree square polygon at (x, y) in EPSG:4326, as GeoJSON.
fn square_layer(path: &Path, x: f64, y: f64) {
    let ring = json!([
        [x, y],
        [x + 1.0, y],
        [x + 1.0, y + 1.0],
        [x, y + 1.0],
        [x, y]
    ]);
    let doc = json!({
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::4326"}},
        "features": [{"type": "Feature", "properties": {"name": "cell"},
                      "geometry": {"type": "Polygon", "coordinates": [ring]}}],
    });
    std::fs::write(path, doc.to_string()).unwrap();
}

/// The three fixtures of the guide's policy: a ballpark reprojection, a critical but exact
/// one (a CRS assigned to a file without one), and a polygon at 10-11° N.
fn fixtures(server: &Server) {
    raster(&server.path("island.tif"), (10.0, 50.0), 0.01, Some(ISLAND));
    raster(&server.path("nocrs.tif"), (500000.0, 5000000.0), 30.0, None);
    square_layer(&server.path("cell.geojson"), 0.0, 10.0);
}

fn entry<'a>(refusal: &'a Value, domain: &str) -> &'a Value {
    refusal["refusal"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["domain"] == domain))
        .unwrap_or_else(|| panic!("no {domain} entry in {refusal}"))
}

fn ballpark_call() -> Value {
    json!({"input": "island.tif", "output": "wgs.tif", "dst_crs": "EPSG:4326",
           "resampling": "nearest"})
}

fn assigned_call() -> Value {
    json!({"input": "nocrs.tif", "output": "utm.tif", "src_crs": "EPSG:32633",
           "dst_crs": "EPSG:4326", "resampling": "nearest"})
}

fn mercator_call() -> Value {
    json!({"input": "cell.geojson", "method": "planar", "crs": "EPSG:3857"})
}

async fn guide_policy_decides(era: Era) {
    let (_dir, policy) = policy_file(&guide_policy());
    let server = Server::start(era, Options::with_policy(&policy))
        .await
        .unwrap();
    fixtures(&server);

    // Ballpark operations are refused, whatever the justification.
    let refused = server
        .call("raster_reproject", ballpark_call())
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let content = structured(&refused);
    let crs = entry(&content, "crs_datum");
    assert_eq!(crs["policy"]["outcome"], "refuse", "{crs}");
    assert_eq!(crs["policy"]["rule"], "no ballpark operations");
    let digest = crs["policy"]["digest"].as_str().unwrap().to_string();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    assert!(text(&refused).contains("the operator's policy decides"));
    assert!(crs["how_to_supply"]
        .as_str()
        .unwrap()
        .contains("no justification can pass it"));
    let mut justified = ballpark_call();
    justified["justification"] = json!({"crs_datum": gdal_mcp_tests::justification("EPSG:4326")});
    let again = server.call("raster_reproject", justified).await.unwrap();
    assert!(is_error(&again));
    assert_eq!(
        entry(&structured(&again), "crs_datum")["policy"]["outcome"],
        "refuse"
    );
    assert!(!server.path("wgs.tif").exists(), "nothing written");

    // A critical crs_datum decision that is not a ballpark needs a person.
    let human = server
        .call("raster_reproject", assigned_call())
        .await
        .unwrap();
    assert!(is_error(&human), "{}", text(&human));
    let content = structured(&human);
    let crs = entry(&content, "crs_datum");
    assert_eq!(crs["severity"], "critical", "{crs}");
    assert_eq!(crs["policy"]["outcome"], "human", "{crs}");
    assert_eq!(
        crs["policy"]["rule"],
        "people sign critical datum decisions"
    );
    // Its receipt says the same, blocked.
    let receipt = content["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "crs_datum")
        .unwrap();
    assert_eq!(receipt["decision"], "blocked");
    assert_eq!(receipt["policy"]["digest"], json!(digest));
    assert!(!server.path("utm.tif").exists());

    // Planar areas above 2 % need a justification: the measurement's own outcome, with the
    // rule named.
    let planar = server
        .call("vector_measure", mercator_call())
        .await
        .unwrap();
    assert!(is_error(&planar), "{}", text(&planar));
    let content = structured(&planar);
    let measurement = entry(&content, "measurement");
    assert_eq!(measurement["policy"]["outcome"], "justify", "{measurement}");
    assert_eq!(measurement["policy"]["rule"], "planar areas above 2 %");
    assert!(measurement["policy"]["explanation"]
        .as_str()
        .unwrap()
        .contains("planar_scale_error_pct = "));
    // The refusal asks for a justification as ever (no "the operator's policy decides").
    assert!(text(&planar).contains("need a justification before this call can run"));

    // The ledger names the policy on the lines it decided.
    let ledger =
        std::fs::read_to_string(server.workspace.path().join(".preflight/ledger.jsonl")).unwrap();
    assert_eq!(
        ledger.matches(&digest).count(),
        4,
        "two ballpark refusals, the sign-off and the planar refusal: {ledger}"
    );
}

#[tokio::test]
async fn the_operators_guide_policy_decides_three_calls_legacy() {
    guide_policy_decides(Era::Legacy).await;
}

#[tokio::test]
async fn the_operators_guide_policy_decides_three_calls_modern() {
    guide_policy_decides(Era::Modern).await;
}

/// The clean twin: without `--policy`, the same calls are refused as they always were, and
/// no receipt, refusal or ledger line carries a `policy`.
#[tokio::test]
async fn without_a_policy_nothing_changes() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    fixtures(&server);
    for (tool, args) in [
        ("raster_reproject", ballpark_call()),
        ("raster_reproject", assigned_call()),
        ("vector_measure", mercator_call()),
    ] {
        let result = server.call(tool, args).await.unwrap();
        assert!(is_error(&result), "{}", text(&result));
        assert!(!text(&result).contains("policy"), "{}", text(&result));
        assert!(text(&result).contains("need a justification before this call can run"));
    }
    let ledger =
        std::fs::read_to_string(server.workspace.path().join(".preflight/ledger.jsonl")).unwrap();
    assert!(!ledger.contains("policy"), "{ledger}");
}

/// Regression (attack round 6, R6-2): the guide's "ballpark coordinate operations are
/// refused" stopped `raster_reproject`, while `raster_sample` ran the same kind of ballpark
/// (points in WGS 84 on a raster on a datum PROJ knows no shift for) and answered a value.
/// With the policy it is refused naming the rule; the clean twin (no policy) answers the value
/// with its warning.
#[tokio::test]
async fn r6_2_raster_sample_obeys_a_policy_refusing_ballpark_operations() {
    let sample = json!({"input": "island.tif", "coordinates": [[10.005, 49.995]],
                        "crs": "EPSG:4326"});
    let (_dir, policy) = policy_file(&guide_policy());
    let server = Server::start(Era::Modern, Options::with_policy(&policy))
        .await
        .unwrap();
    fixtures(&server);
    let refused = server.call("raster_sample", sample.clone()).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("no ballpark operations"),
        "{}",
        text(&refused)
    );
    assert!(text(&refused).contains("ballpark"), "{}", text(&refused));
    // The same raster sampled in its own CRS runs no operation: answered.
    let own = server
        .call(
            "raster_sample",
            json!({"input": "island.tif", "coordinates": [[10.005, 49.995]]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&own), "{}", text(&own));

    let twin = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    fixtures(&twin);
    let answered = twin.call("raster_sample", sample).await.unwrap();
    assert!(!is_error(&answered), "{}", text(&answered));
    let content = structured(&answered);
    assert_eq!(content["points"][0]["inside"], json!(true), "{content}");
    assert!(
        content["warnings"].to_string().contains("ballpark"),
        "{content}"
    );
}

/// `serve --policy` with a file the server cannot use: it stops before the handshake, with
/// the line and the reason (never fails open).
#[test]
fn a_policy_it_cannot_use_stops_the_server_with_the_line() {
    let workspace = tempfile::tempdir().unwrap();
    let start = |policy: &Path| {
        std::process::Command::new(binary().unwrap())
            .arg("serve")
            .arg("--workspace")
            .arg(workspace.path())
            .arg("--cache-dir")
            .arg(gdal_mcp_tests::shared_cache())
            .arg("--policy")
            .arg(policy)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    for (text, needle) in [
        (
            "[[rule]]\noutcome = \"human\"\ndomain = \"crs\"\n",
            "line 3: rule 1: unknown domain \"crs\"",
        ),
        (
            "[[rule]]\noutcome = \"refuse\"\nevidence = \"ballpark\"\n",
            "line 3: rule 1: unknown evidence id \"ballpark\"",
        ),
        (
            "[[rule]]\noutcome = \"refuse\"\nfacts = { accuracy = { above = 1 } }\n",
            "line 3: rule 1: unknown fact \"accuracy\"",
        ),
        ("[[rule]\noutcome = \"refuse\"\n", "line 1"),
    ] {
        let (_dir, policy) = policy_file(text);
        let out = start(&policy);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}: started");
        assert!(stderr.contains(needle), "{text}: {stderr}");
        assert!(out.stdout.is_empty(), "nothing on stdout");
    }
    // Inside the workspace, or a link to it from outside.
    let inside = workspace.path().join("policy.toml");
    std::fs::write(&inside, guide_policy()).unwrap();
    let out = start(&inside);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside every workspace"));
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("policy.toml");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let out = start(&link);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside every workspace"));
}

/// `gdal-mcp policy check` and `policy explain`: the guide's policy checks; explain gathers
/// the ballpark call's facts and names the rule that refuses it, writing nothing.
#[test]
fn policy_check_and_explain_name_the_deciding_rule() {
    let (_dir, policy) = policy_file(&guide_policy());
    let workspace = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(binary().unwrap())
            .args(args)
            .arg("--workspace")
            .arg(workspace.path())
            .arg("--cache-dir")
            .arg(gdal_mcp_tests::shared_cache())
            .output()
            .unwrap()
    };
    let out = run(&["policy".as_ref(), "check".as_ref(), policy.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("3 rule(s)"), "{stdout}");
    let (_bad_dir, bad) = policy_file("[[rule]]\noutcome = \"sometimes\"\n");
    let out = run(&["policy".as_ref(), "check".as_ref(), bad.as_os_str()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));

    raster(
        &workspace.path().join("island.tif"),
        (10.0, 50.0),
        0.01,
        Some(ISLAND),
    );
    let call = json!({"tool": "raster_reproject", "arguments": ballpark_call()}).to_string();
    let out = run(&[
        "policy".as_ref(),
        "explain".as_ref(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--call".as_ref(),
        call.as_ref(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(explained["facts"]["ballpark"], true, "{explained}");
    let crs = explained["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "crs_datum")
        .unwrap();
    assert_eq!(crs["outcome"], "refuse", "{crs}");
    assert_eq!(crs["domain_outcome"], "justify");
    assert_eq!(crs["rule"], "no ballpark operations");
    // WIT 0.7: how sure the domain is (PROJ reports the ballpark: certain) and which findings
    // it marks relaxable (the note that the target is geographic only: the ballpark and the
    // datum change are not conventions, so no rule could loosen this decision).
    assert_eq!(crs["confidence"], 1.0, "{crs}");
    assert_eq!(crs["relaxable"], json!(["geographic_target"]), "{crs}");
    assert!(!workspace.path().join("wgs.tif").exists());
    assert!(
        !workspace.path().join(".preflight/ledger.jsonl").exists(),
        "explaining decides nothing"
    );
}

/// The sign-off id a `human` refusal names: `gdal-mcp approve <id> --store <dir>`.
fn sign_off_id(result: &rmcp::model::CallToolResult) -> String {
    let content = structured(result);
    let how = entry(&content, "crs_datum")["how_to_supply"]
        .as_str()
        .unwrap()
        .to_string();
    let after = how
        .split("gdal-mcp approve ")
        .nth(1)
        .unwrap_or_else(|| panic!("no approve route in {how}"));
    after.split_whitespace().next().unwrap().to_string()
}

/// `gdal-mcp approve ID --store DIR` on a pseudo-terminal (util-linux `script`), answering
/// `answer` and `note`.
fn approve_on_a_terminal(id: &str, store: &Path, answer: &str, note: &str) -> (bool, String) {
    use std::io::Write;
    let command = format!(
        "{} approve {id} --store {}",
        binary().unwrap().display(),
        store.display()
    );
    let mut child = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{answer}\n{note}\n").as_bytes())
            .unwrap();
        // Keep the pty open until the program has read both lines.
        std::thread::sleep(std::time::Duration::from_millis(1500));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A client without elicitation meets `human`: refused, nothing written, the CLI route named;
/// `gdal-mcp approve` from a pseudo-terminal records the answer and the retry proceeds, once;
/// a replay is refused, and so is a retry after the input file changed, naming the binding;
/// the ledger names proposal, approval and execution in order, and verifies.
#[tokio::test]
async fn a_human_decision_is_signed_off_in_a_terminal_and_bound_to_the_call() {
    let (_dir, policy) = policy_file(&guide_policy());
    let server = Server::start(Era::Legacy, Options::with_policy(&policy))
        .await
        .unwrap();
    fixtures(&server);
    let store = server.workspace.path().join(".preflight");
    let mut call = assigned_call();
    call["justification"] = json!({"resampling": gdal_mcp_tests::justification("nearest")});
    let refused = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(text(&refused).contains("This host cannot show forms"));
    let id = sign_off_id(&refused);
    assert!(!server.path("utm.tif").exists(), "nothing written");

    // Not a terminal: nothing recorded.
    let piped = std::process::Command::new(binary().unwrap())
        .args(["approve", &id, "--store"])
        .arg(&store)
        .stdin(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert!(!piped.status.success());
    assert!(String::from_utf8_lossy(&piped.stderr).contains("run it in a terminal"));

    let (ok, shown) = approve_on_a_terminal(&id, &store, "yes", "checked the UTM zone");
    assert!(ok, "{shown}");
    assert!(
        shown.contains("source_crs_assigned"),
        "the form shows the finding: {shown}"
    );
    assert!(shown.contains("Recorded: approved"), "{shown}");

    let done = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let receipts = structured(&done)["reflection"].clone();
    let crs = receipts
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "crs_datum")
        .unwrap()
        .clone();
    assert_eq!(crs["decision"], "proceed", "{crs}");
    assert!(crs["policy"]["approval"]
        .as_str()
        .unwrap()
        .contains("checked the UTM zone"));
    assert!(server.path("utm.tif").exists());

    // Single use: the same call again is refused as a replay.
    std::fs::remove_file(server.path("utm.tif")).unwrap();
    let replay = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&replay));
    assert!(text(&replay).contains("replayed"), "{}", text(&replay));

    // Approved again, then the input changes: refused, naming the input.
    let (ok, shown) = approve_on_a_terminal(&id, &store, "y", "");
    assert!(ok, "{shown}");
    raster(&server.path("nocrs.tif"), (500000.0, 5000000.0), 60.0, None);
    let changed = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&changed));
    assert!(
        text(&changed).contains("the input file") && text(&changed).contains("changed"),
        "{}",
        text(&changed)
    );
    assert!(!server.path("utm.tif").exists());

    // The ledger: proposal, approval, execution, in order; intact.
    let ledger = std::fs::read_to_string(store.join("ledger.jsonl")).unwrap();
    let kinds: Vec<String> = ledger
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let first_approval = kinds.iter().position(|k| k == "approval").unwrap();
    let proposal = kinds.iter().position(|k| k == "gate").unwrap();
    assert!(proposal < first_approval, "{kinds:?}");
    assert!(
        kinds[first_approval + 1..].iter().any(|k| k == "gate"),
        "{kinds:?}"
    );
    let verify = std::process::Command::new(binary().unwrap())
        .args(["ledger", "verify", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// A server of a 2025-11-25 client without forms under the rule `crs_datum -> human`, and its
/// store.
async fn people_sign_crs() -> (tempfile::TempDir, Server, PathBuf) {
    let (dir, policy) = policy_file(
        "[[rule]]\nid = \"people sign crs\"\ndomain = \"crs_datum\"\noutcome = \"human\"\n",
    );
    let server = Server::start(Era::Legacy, Options::with_policy(&policy))
        .await
        .unwrap();
    let store = server.workspace.path().join(".preflight");
    (dir, server, store)
}

/// Regression, issue 21 attack round 7, R7-1: the approve screen printed input paths and
/// finding texts raw, so a file name and a data-supplied CRS name holding `ESC[2J` (clear the
/// screen) and U+202E (right-to-left override) rewrote what the person approves. Every such
/// string now reaches the terminal escaped (`\u{1b}`), and the screen says which text came
/// from the agent or the data. The clean twin: an ordinary accented name is shown unchanged.
#[tokio::test]
async fn r7_1_the_approve_screen_shows_escapes_in_names_and_crs_names_visibly() {
    let (_dir, server, store) = people_sign_crs().await;
    let evil_wkt = ISLAND.replace("Island 1950", "T\u{1b}[2J\u{1b}[H FAKE \u{202e}X");
    let evil = "n\u{1b}[2J\u{1b}[H\u{202e}fig.tif";
    raster(&server.path(evil), (10.0, 50.0), 0.01, Some(&evil_wkt));
    raster(
        &server.path("Höhen dem.tif"),
        (10.0, 50.0),
        0.01,
        Some(ISLAND),
    );
    for (input, clean) in [(evil, false), ("Höhen dem.tif", true)] {
        let call = json!({"input": input, "output": "o.tif", "dst_crs": "EPSG:4326",
                          "resampling": "nearest",
                          "justification": {"resampling": gdal_mcp_tests::justification("nearest")}});
        let refused = server.call("raster_reproject", call).await.unwrap();
        assert!(is_error(&refused), "{}", text(&refused));
        let id = sign_off_id(&refused);
        let (ok, shown) = approve_on_a_terminal(&id, &store, "no", "");
        assert!(ok, "{shown}");
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "raw control characters reached the terminal: {shown:?}"
        );
        assert!(
            shown.contains("from the agent's call or from the data"),
            "{shown}"
        );
        if clean {
            assert!(shown.contains("Höhen dem.tif"), "{shown}");
            // Only the header's three examples are escapes.
            assert_eq!(shown.matches("\\u{").count(), 3, "nothing escaped: {shown}");
        } else {
            assert!(
                shown.contains("n\\u{1b}[2J\\u{1b}[H\\u{202e}fig.tif"),
                "the file name is shown escaped: {shown}"
            );
            assert!(
                shown.contains("T\\u{1b}[2J\\u{1b}[H FAKE \\u{202e}X"),
                "the CRS name from the data is shown escaped: {shown}"
            );
        }
    }
}

/// Regression, issue 21 attack round 7, R7-2: a sign-off bound only the input's own digest,
/// so a `nocrs.tif.aux.xml` with a scale and offset written after the approval changed every
/// output value under it. The sidecars GDAL reads with an input are bound now: the retry is
/// refused naming the new file. The clean twin: approved again with the sidecar in place (the
/// screen lists it), the same retry runs.
#[tokio::test]
async fn r7_2_a_sidecar_written_after_the_approval_voids_it() {
    let (_dir, policy) = policy_file(&guide_policy());
    let server = Server::start(Era::Legacy, Options::with_policy(&policy))
        .await
        .unwrap();
    fixtures(&server);
    let store = server.workspace.path().join(".preflight");
    let mut call = assigned_call();
    call["justification"] = json!({"resampling": gdal_mcp_tests::justification("nearest")});
    let refused = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let id = sign_off_id(&refused);
    let (ok, shown) = approve_on_a_terminal(&id, &store, "yes", "approved for these values");
    assert!(ok, "{shown}");
    std::fs::write(
        server.path("nocrs.tif.aux.xml"),
        "<PAMDataset><PAMRasterBand band=\"1\"><Offset>5000</Offset><Scale>10</Scale>\
         </PAMRasterBand></PAMDataset>",
    )
    .unwrap();
    let swapped = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&swapped), "{}", text(&swapped));
    assert!(
        text(&swapped).contains("nocrs.tif.aux.xml")
            && (text(&swapped).contains("appeared") || text(&swapped).contains("changed")),
        "{}",
        text(&swapped)
    );
    assert!(!server.path("utm.tif").exists());
    // The clean twin: approved with the sidecar in place, the retry runs.
    let id = sign_off_id(&swapped);
    let (ok, shown) = approve_on_a_terminal(&id, &store, "yes", "checked the scale too");
    assert!(ok, "{shown}");
    assert!(shown.contains("nocrs.tif.aux.xml"), "{shown}");
    let done = server.call("raster_reproject", call).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    assert!(server.path("utm.tif").exists());
}

/// Regression, issue 21 attack round 10, R10-1: a sign-off bound the named input's bytes and
/// its sidecars only, so the source of a VRT, rewritten after the person approved (the VRT's
/// own bytes unchanged), ran as approved: the output held the new cells. The binding covers
/// every file GDAL reads for the input now (the VRT's sources, recursively, and their
/// sidecars): the person's screen lists the source, and the retry after the rewrite is refused
/// naming it, with nothing written. The clean twin: approved again with the new source in
/// place, the same retry runs on those cells.
#[tokio::test]
async fn r10_1_a_vrt_source_rewritten_after_the_sign_off_voids_it() {
    let (_dir, server, store) = people_sign_crs().await;
    let source = server.path("src.tif");
    let fill = |value: f32| {
        raster(&source, (10.0, 50.0), 0.01, Some(ISLAND));
        let dataset = gdal::Dataset::open_ex(
            &source,
            gdal::DatasetOptions {
                open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE
                    | gdal::GdalOpenFlags::GDAL_OF_RASTER,
                ..Default::default()
            },
        )
        .unwrap();
        let mut band = dataset.rasterband(1).unwrap();
        band.write((0, 0), (2, 2), &mut Buffer::new((2, 2), vec![value; 4]))
            .unwrap();
    };
    fill(1.0);
    let built = std::process::Command::new("gdalbuildvrt")
        .arg("-q")
        .arg(server.path("v.vrt"))
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success());
    let vrt_bytes = std::fs::read(server.path("v.vrt")).unwrap();
    let call = json!({"input": "v.vrt", "output": "o.tif", "dst_crs": "EPSG:4326",
                      "resampling": "nearest",
                      "justification": {"resampling": gdal_mcp_tests::justification("nearest")}});
    let refused = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let id = sign_off_id(&refused);
    let (ok, shown) = approve_on_a_terminal(&id, &store, "yes", "cells of 1 checked");
    assert!(ok, "{shown}");
    assert!(
        shown.contains("src.tif"),
        "the screen lists the VRT's source: {shown}"
    );
    fill(1000.0);
    assert_eq!(std::fs::read(server.path("v.vrt")).unwrap(), vrt_bytes);
    let swapped = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(
        is_error(&swapped),
        "ran on the rewritten source: {}",
        text(&swapped)
    );
    assert!(
        text(&swapped).contains("src.tif") && text(&swapped).contains("changed"),
        "{}",
        text(&swapped)
    );
    assert!(!server.path("o.tif").exists());
    // The clean twin: approved with the new cells in place, the retry runs on them.
    let id = sign_off_id(&swapped);
    let (ok, shown) = approve_on_a_terminal(&id, &store, "yes", "cells of 1000 checked");
    assert!(ok, "{shown}");
    let done = server.call("raster_reproject", call).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    let written = gdal::Dataset::open(server.path("o.tif")).unwrap();
    let cells = written
        .rasterband(1)
        .unwrap()
        .read_band_as::<f32>()
        .unwrap();
    assert!(cells.data().contains(&1000.0), "{:?}", cells.data());
}

/// Regression (attack round 7, R7-9): with `covers_decision = true` the operator was told one
/// approval covers the decision, but the same decision with another `output` name was refused
/// ("the call's arguments changed since the approval"), and the approve screen said "Approve
/// this call?". The covering binding leaves the output out; the screen says the yes covers
/// later calls. Twin: another argument (`resampling`) still needs a new sign-off.
#[tokio::test]
async fn r7_9_a_covering_sign_off_covers_another_output_name() {
    let text_ = "[[rule]]\nid = \"people sign datum decisions once\"\ndomain = \"crs_datum\"\n\
                 severity = \"critical\"\noutcome = \"human\"\ncovers_decision = true\n";
    let (_dir, policy) = policy_file(text_);
    let server = Server::start(Era::Legacy, Options::with_policy(&policy))
        .await
        .unwrap();
    fixtures(&server);
    let store = server.workspace.path().join(".preflight");
    let mut call = assigned_call();
    call["justification"] = json!({"resampling": gdal_mcp_tests::justification("nearest")});
    let refused = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let id = sign_off_id(&refused);
    let (ok, shown) = approve_on_a_terminal(&id, &store, "yes", "UTM 33 checked");
    assert!(ok, "{shown}");
    assert!(shown.contains("Approve this decision?"), "{shown}");
    assert!(shown.contains("later calls"), "{shown}");
    let done = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(!is_error(&done), "{}", text(&done));
    call["output"] = json!("utm2.tif");
    let again = server.call("raster_reproject", call.clone()).await.unwrap();
    assert!(!is_error(&again), "{}", text(&again));
    assert!(server.path("utm2.tif").exists());
    // Twin: another method is another call, not covered.
    call["output"] = json!("utm3.tif");
    call["resampling"] = json!("bilinear");
    call["justification"] = json!({"resampling": gdal_mcp_tests::justification("bilinear")});
    let other = server.call("raster_reproject", call).await.unwrap();
    assert!(is_error(&other), "{}", text(&other));
    assert!(
        text(&other).contains("gdal-mcp approve"),
        "{}",
        text(&other)
    );
    assert!(!server.path("utm3.tif").exists());
}

/// A 16 × 16 one-band GeoTIFF in EPSG:32633 with the values `value(x, y)`.
fn grid<T: gdal::raster::GdalType + Copy>(path: &Path, value: impl Fn(usize, usize) -> T) {
    let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver
        .create_with_band_type::<T, _>(path, 16, 16, 1)
        .unwrap();
    dataset
        .set_geo_transform(&[500_000.0, 10.0, 0.0, 5_000_160.0, 0.0, -10.0])
        .unwrap();
    dataset
        .set_spatial_ref(&SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    let data: Vec<T> = (0..256).map(|i| value(i % 16, i / 16)).collect();
    let mut band = dataset.rasterband(1).unwrap();
    band.write((0, 0), (16, 16), &mut Buffer::new((16, 16), data))
        .unwrap();
}

/// Issue 20, through a real client (WIT 0.7): a confidence floor refuses a bilinear resample
/// of a Byte raster whose few integer values only *look* like classes (resampling is 0.5 sure
/// of it), and is silent on the same call over a raster with a colour table (certain: the
/// domain's own outcome, a justification, stands). A rule looser than the domain relaxes
/// bilinear on Float32 measurements (`continuous_input`, relaxable: the call runs with a
/// `warn` receipt) and stands on the classes (`categorical_input`, not relaxable). The
/// refusals and receipts say which applied.
#[tokio::test]
async fn a_confidence_floor_escalates_guesses_and_relaxation_loosens_only_conventions() {
    let (_dir, policy) = policy_file(
        r#"
[[rule]]
id = "guesses are refused"
confidence_below = 0.8
outcome = "refuse"

[[rule]]
id = "our interpolation convention"
domain = "resampling"
outcome = "warn"
"#,
    );
    let server = Server::start(
        Era::Modern,
        Options {
            extra_args: vec!["--policy".into(), policy.display().to_string()],
            data: vec!["lc.tif"],
            ..Options::default()
        },
    )
    .await
    .unwrap();
    grid::<u8>(&server.path("classes.tif"), |x, y| {
        (1 + (x / 4 + y / 4) % 4) as u8
    });
    grid::<f32>(&server.path("heights.tif"), |x, y| {
        100.0 + 1.5 * x as f32 + 0.25 * y as f32
    });
    let resample = |input: &str, output: &str| json!({"input": input, "output": output, "resampling": "bilinear", "size": [8, 8]});

    // The guess: refused by the floor, whatever justification comes.
    let guessed = server
        .call("raster_resample", resample("classes.tif", "c.tif"))
        .await
        .unwrap();
    assert!(is_error(&guessed), "{}", text(&guessed));
    let content = structured(&guessed);
    let resampling = entry(&content, "resampling");
    assert_eq!(resampling["severity"], "critical", "{resampling}");
    assert_eq!(resampling["policy"]["outcome"], "refuse", "{resampling}");
    assert_eq!(resampling["policy"]["rule"], "guesses are refused");
    let why = resampling["policy"]["explanation"].as_str().unwrap();
    assert!(why.contains("confidence 0.5 (< 0.8)"), "{why}");
    assert!(
        why.contains("the strictest, guesses are refused, decides: refuse"),
        "{why}"
    );
    assert!(!server.path("c.tif").exists());

    // Its twin: declared classes are certain; the floor is silent and the domain's outcome
    // (a justification) stands, the looser rule having no effect on classes.
    let declared = server
        .call("raster_resample", resample("lc.tif", "l.tif"))
        .await
        .unwrap();
    assert!(is_error(&declared), "{}", text(&declared));
    let content = structured(&declared);
    let resampling = entry(&content, "resampling");
    assert_eq!(resampling["severity"], "critical", "{resampling}");
    assert_eq!(resampling["policy"]["outcome"], "justify", "{resampling}");
    assert_eq!(resampling["policy"]["rule"], "our interpolation convention");
    let why = resampling["policy"]["explanation"].as_str().unwrap();
    assert!(!why.contains("guesses are refused"), "{why}");
    assert!(
        why.contains("does not mark categorical_input as relaxable"),
        "{why}"
    );
    assert!(text(&declared).contains("need a justification before this call can run"));

    // Measurements: the relaxable finding is relaxed; the call runs with a warning.
    let relaxed = server
        .call("raster_resample", resample("heights.tif", "h.tif"))
        .await
        .unwrap();
    assert!(!is_error(&relaxed), "{}", text(&relaxed));
    let receipt = structured(&relaxed)["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["domain"] == "resampling")
        .cloned()
        .unwrap();
    assert_eq!(receipt["severity"], "required", "{receipt}");
    assert_eq!(receipt["decision"], "warn", "{receipt}");
    assert_eq!(receipt["policy"]["rule"], "our interpolation convention");
    let why = receipt["policy"]["explanation"].as_str().unwrap();
    assert!(
        why.contains(
            "resampling marks every finding of it relaxable (a local convention): our \
             interpolation convention relaxes the domain's justify to warn"
        ),
        "{why}"
    );
    assert!(server.path("h.tif").exists());
}

/// Issue 20 (WIT 0.7), the adapter's side: a component built against 0.6 cannot say how sure
/// it is or mark anything relaxable. A confidence floor treats its unknown confidence as below
/// the floor (refused, saying so), and a rule looser than its severity has no effect (nothing
/// relaxable): the older pack is never trusted or loosened by default. Its clean twin, the
/// same pack without the floor, is justified as before (`silent_errors`).
#[tokio::test]
async fn a_0_6_pack_is_of_unknown_confidence_and_never_relaxed() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        gdal_mcp_tests::plugin_component("legacy_v06"),
        plugins.path().join("legacy_v06.wasm"),
    )
    .unwrap();
    let convert = json!({"input": "p.geojson", "output": "p.gpkg"});
    let start = |text: &'static str| {
        let plugins = plugins.path().to_path_buf();
        async move {
            let (dir, policy) = policy_file(text);
            let server = Server::start(
                Era::Legacy,
                Options {
                    plugin_dirs: vec![plugins],
                    extra_args: vec!["--policy".into(), policy.display().to_string()],
                    ..Options::default()
                },
            )
            .await
            .unwrap();
            square_layer(&server.path("p.geojson"), 0.0, 10.0);
            (dir, server)
        }
    };
    let (_floor_dir, floor) = start(
        "[[rule]]\nid = \"unsure packs\"\ndomain = \"legacy_v06\"\nconfidence_below = 0.1\n\
         outcome = \"refuse\"\n",
    )
    .await;
    let refused = floor.call("vector_convert", convert.clone()).await.unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let content = structured(&refused);
    let pack = entry(&content, "legacy_v06");
    assert_eq!(pack["policy"]["outcome"], "refuse", "{pack}");
    let why = pack["policy"]["explanation"].as_str().unwrap();
    assert!(
        why.contains("(required, confidence unknown)")
            && why.contains("the domain does not say: below 0.1"),
        "{why}"
    );
    assert!(!floor.path("p.gpkg").exists());

    let (_loose_dir, loose) = start(
        "[[rule]]\nid = \"trust the pack\"\ndomain = \"legacy_v06\"\noutcome = \"proceed\"\n",
    )
    .await;
    let stands = loose.call("vector_convert", convert).await.unwrap();
    assert!(is_error(&stands), "{}", text(&stands));
    let content = structured(&stands);
    let pack = entry(&content, "legacy_v06");
    assert_eq!(pack["policy"]["outcome"], "justify", "{pack}");
    let why = pack["policy"]["explanation"].as_str().unwrap();
    assert!(
        why.contains("does not mark v06_finding as relaxable"),
        "{why}"
    );
}
