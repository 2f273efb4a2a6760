//! The end-to-end harness: start the built `gdal-mcp` binary as a child process and talk to it
//! over stdio with the real rmcp client, in either protocol era.
//!
//! The binary is found next to the test executable (`target/<profile>/gdal-mcp`), or at
//! `$GDAL_MCP_BIN`; build it first (`cargo build --bins`). Real test data comes from Debian
//! packages through `tests/fixtures/fetch-data.sh` (see [`testdata`]).

use anyhow::{anyhow, bail, Context, Result};
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long any single MCP request may take in tests.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The two protocol eras a client can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize` handshake.
    Legacy,
    /// 2026-07-28: `server/discover`, per-request metadata.
    Modern,
}

/// The workspace root (the repository).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The built server binary.
pub fn binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("GDAL_MCP_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<test-exe> -> target/<profile>/gdal-mcp
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow!("unexpected test executable location {}", exe.display()))?;
    let candidate = profile_dir.join("gdal-mcp");
    if !candidate.is_file() {
        bail!(
            "{} is missing: build the server first (`cargo build --bins` with the same profile \
             as the tests), or set GDAL_MCP_BIN",
            candidate.display()
        );
    }
    Ok(candidate)
}

/// The built plugin components (`target/plugins/wasm32-wasip2/release/<name>.wasm`).
pub fn plugin_component(name: &str) -> PathBuf {
    repo_root()
        .join("target/plugins/wasm32-wasip2/release")
        .join(format!("{name}.wasm"))
}

/// A 20 x 20 Float32 `dem.tif` in `folder`, in EPSG:4326, whose internal geotransform puts it
/// at 10.00° E 45.2° N, and a world file `dem.tfw` that puts it 0.05° east: a georeferencing
/// conflict that every call opening it settles with `georef_source` (attack round 15, R15-C6,
/// R15-C13).
pub fn dem_with_a_world_file_0_05_degrees_east(folder: &Path) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").expect("GTiff");
    let mut dataset = driver
        .create_with_band_type::<f32, _>(folder.join("dem.tif"), 20, 20, 1)
        .expect("dem.tif");
    dataset
        .set_geo_transform(&[10.0, 0.01, 0.0, 45.2, 0.0, -0.01])
        .expect("geotransform");
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(4326).expect("EPSG:4326"))
        .expect("CRS");
    let mut band = dataset.rasterband(1).expect("band 1");
    let mut buffer =
        gdal::raster::Buffer::new((20, 20), (0..400).map(|v| v as f32).collect::<Vec<_>>());
    band.write((0, 0), (20, 20), &mut buffer).expect("cells");
    std::fs::write(
        folder.join("dem.tfw"),
        "0.01\n0.0\n0.0\n-0.01\n10.055\n45.195\n",
    )
    .expect("dem.tfw");
}

/// The folder of real test data, fetched on first use.
pub fn testdata() -> Result<PathBuf> {
    let dir = std::env::var_os("GDAL_MCP_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/testdata"));
    if !dir.join(".stamp-v1").is_file() {
        let script = repo_root().join("tests/fixtures/fetch-data.sh");
        let status = std::process::Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        if !status.success() {
            bail!("{} failed ({status})", script.display());
        }
    }
    Ok(dir)
}

/// The compiled-component cache shared by the test servers.
pub fn shared_cache() -> PathBuf {
    repo_root().join("target/test-component-cache")
}

/// Start the server on `workspace` with piped stdin and stdout, for tests that speak raw
/// JSON-RPC lines (malformed requests, cancellation, closing the connection). stderr is piped
/// when `capture_stderr`, else discarded.
pub fn spawn_raw(workspace: &Path, capture_stderr: bool) -> Result<std::process::Child> {
    spawn_raw_with(workspace, capture_stderr, &[])
}

/// [`spawn_raw`] with further `serve` arguments (`--plugins DIR`, say).
pub fn spawn_raw_with(
    workspace: &Path,
    capture_stderr: bool,
    extra: &[&std::ffi::OsStr],
) -> Result<std::process::Child> {
    Ok(std::process::Command::new(binary()?)
        .arg("serve")
        .arg("--workspace")
        .arg(workspace)
        .arg("--cache-dir")
        .arg(shared_cache())
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if capture_stderr {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()?)
}

/// A running server with its own workspace and store.
pub struct Server {
    pub workspace: tempfile::TempDir,
    pub client: RunningService<RoleClient, ()>,
    pub era: Era,
}

/// Options for starting a server.
#[derive(Default, Clone)]
pub struct Options {
    pub plugin_dirs: Vec<PathBuf>,
    /// Files from the test data folder to copy into the workspace.
    pub data: Vec<&'static str>,
    pub extra_args: Vec<String>,
    /// Environment variables for the server process (test-only knobs, budgets).
    pub env: Vec<(String, String)>,
}

impl Options {
    /// The default options with the operator's policy file `policy` (`--policy`).
    pub fn with_policy(policy: &Path) -> Self {
        Self {
            extra_args: vec!["--policy".into(), policy.display().to_string()],
            ..Self::default()
        }
    }
}

impl Server {
    /// Start a server on a fresh workspace.
    pub async fn start(era: Era, options: Options) -> Result<Self> {
        let workspace = tempfile::tempdir()?;
        if !options.data.is_empty() {
            let data = testdata()?;
            for name in &options.data {
                std::fs::copy(data.join(name), workspace.path().join(name))
                    .with_context(|| format!("copying test data {name}"))?;
            }
        }
        let client = Self::connect(era, workspace.path(), &options).await?;
        Ok(Self {
            workspace,
            client,
            era,
        })
    }

    /// Connect a new client (and server process) to an existing workspace.
    pub async fn connect(
        era: Era,
        workspace: &Path,
        options: &Options,
    ) -> Result<RunningService<RoleClient, ()>> {
        let binary = binary()?;
        let ws = workspace.to_path_buf();
        let plugin_dirs = options.plugin_dirs.clone();
        let extra = options.extra_args.clone();
        let env = options.env.clone();
        let command = tokio::process::Command::new(binary).configure(move |cmd| {
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            cmd.arg("serve").arg("--workspace").arg(&ws);
            cmd.arg("--cache-dir").arg(shared_cache());
            for dir in &plugin_dirs {
                cmd.arg("--plugins").arg(dir);
            }
            cmd.args(&extra);
        });
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()?;
        let lifecycle = match era {
            Era::Legacy => ClientLifecycleMode::Initialize,
            Era::Modern => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        };
        let client = tokio::time::timeout(
            REQUEST_TIMEOUT,
            ().serve_with_lifecycle(transport, lifecycle),
        )
        .await
        .map_err(|_| anyhow!("the server did not answer the {era:?} handshake"))??;
        Ok(client)
    }

    /// A path inside the workspace.
    pub fn path(&self, name: &str) -> PathBuf {
        self.workspace.path().join(name)
    }

    /// The store's justifications folder.
    pub fn justifications(&self) -> PathBuf {
        self.workspace.path().join(".preflight/justifications")
    }

    /// Call a tool; JSON-RPC errors are errors, `isError` results are returned.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<CallToolResult> {
        call(&self.client, name, arguments).await
    }
}

/// Run `program` with `args`, asserting it succeeded (a fixture built with GDAL's CLI).
pub fn run_program(program: &str, args: &[&str]) {
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Call a tool on any client.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult> {
    let Value::Object(arguments) = arguments else {
        bail!("tool arguments must be an object");
    };
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
    let response = tokio::time::timeout(REQUEST_TIMEOUT, client.peer().call_tool_once(params))
        .await
        .map_err(|_| anyhow!("{name} did not answer within {REQUEST_TIMEOUT:?}"))??;
    match response {
        CallToolResponse::Complete(result) => {
            // Every host must be able to read error results: the TypeScript SDK 1.x validates
            // `structuredContent` against the output schema even when `isError` is set.
            if result.is_error == Some(true) && result.structured_content.is_some() {
                bail!("{name}: an error result carries structuredContent: {result:?}");
            }
            Ok(result)
        }
        other => bail!("unexpected response to {name}: {other:?}"),
    }
}

/// The machine-readable content of a result: `structuredContent` for a success, the JSON of
/// the second text block (`{"error": ...}` or `{"refusal": ...}`) for an error.
pub fn structured(result: &CallToolResult) -> Value {
    if let Some(value) = &result.structured_content {
        return value.clone();
    }
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .nth(1)
        .and_then(|t| serde_json::from_str(&t.text).ok())
        .unwrap_or(Value::Null)
}

/// Whether the result is an error result.
pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// The concatenated text content of a result (for an error: the message, then the JSON).
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A justification that answers `method` for a domain. Its rationale and tradeoffs say what
/// the built-in domains ask of their `required` findings when they are not answered by id
/// (since issue 18: what must survive, the tolerances accepted, the heights' unit, what a
/// stream threshold was calibrated against), and its alternatives name the options considered
/// by their ids.
pub fn justification(method: &str) -> Value {
    serde_json::json!({
        "intent": "overlay the DEM with geographic basemap layers for a regional map",
        "alternatives": [
            {"method": "keep the source CRS", "why_not": "the other layers are geographic"},
            {"method": "EPSG:3857 (Web Mercator)", "why_not": "the basemap tiles reproject on their own"},
            {"method": "nearest", "why_not": "nearest makes steps in a smooth surface"},
            {"method": "cubic", "why_not": "cubic overshoots next to sharp edges"},
            {"method": "fill", "why_not": "filling floods real pits into flat lakes"},
            {"method": "breach", "why_not": "breaching would notch the culvert crossings this map keeps"},
            {"method": "d8", "why_not": "single-neighbour routing makes parallel paths"},
            {"method": "dinf", "why_not": "dispersion spreads channels over hillslopes"},
            {"method": "median", "why_not": "the median hides the extremes the preview shows"},
            {"method": "max", "why_not": "the maximum overstates every zone"},
            {"method": "std", "why_not": "the spread is not what the preview maps"},
            {"method": "coverage", "why_not": "exact cell fractions change the preview's figures by little"}
        ],
        "choice": {
            "method": method,
            "rationale": "matches the analysis layers and the data's continuous nature; \
                positions, areas and distances must survive for the regional map; heights are \
                in metres as the provider's metadata documents; channel heads mapped in the \
                field start at about 1 km² of contributing area; each feature counts equally, \
                the features being comparable units",
            "tradeoffs": "sub-pixel smoothing and degree-based pixel sizes; for a preview, scale \
                errors up to 500 % are accepted, up to 1000 m of positional error, 180° of \
                aspect error, 1000000000 m² counted twice, and pour points within 30 m"
        },
        "confidence": "medium",
        "assumptions": ["the file's CRS metadata is correct"],
        "conditions_for_revisit": ["a metric analysis of slopes or areas"]
    })
}

/// The answer a careful agent gives to evidence item `id` of a preview: the content each
/// built-in domain's `validate` asks of that finding (docs/domains.md, "What a justification
/// must contain").
pub fn careful_answer(id: &str) -> String {
    let text = match id {
        "crs_change" => {
            "positions, areas and distances must survive for the regional map; we accept up to \
             1000 m of positional error there"
        }
        "source_crs_assigned"
        | "source_crs_overridden"
        | "source_crs_unidentified"
        | "crs_missing" => {
            "the CRS is documented in the provider's metadata and was verified by overlay on \
             the basemap"
        }
        "ballpark_operation" | "unknown_accuracy" | "outside_area_of_use" => {
            "we accept up to 1000 m of positional error: the output is a regional preview at \
             1 km cells"
        }
        "geographic_dem_scaled" => {
            "we accept up to 1000 % of east-west gradient error in this preview"
        }
        "geographic_dem_aspect" => "we accept up to 180° of aspect error in this preview",
        "unit_mismatch" | "dem_crs_missing" => {
            "the heights are in metres, as the provider's metadata documents"
        }
        "continuous_input" => {
            "the surface is smooth, so the method keeps it continuous for the preview"
        }
        "categorical_input" => {
            "interpolated class codes (blended values that are no class) are acceptable because \
             the output is a continuous preview that is never used as classes"
        }
        "stream_threshold" => {
            "channel heads mapped in the field start at about 1 km² of contributing area"
        }
        "pour_points" => "the outlets were placed within 30 m of the mapped channel",
        "flat_fraction" => {
            "we accept that up to 100 % of cells route by flat handling in this preview"
        }
        "upstream_interpolation" => {
            "we accept up to 10 m of vertical error from the upstream resampling"
        }
        "categorical_mean" | "upstream_interpolated_classes" => {
            "the codes are ordered fractions, checked against the legend"
        }
        "all_touched_sum" => "the zones are disjoint, so no boundary cell is counted twice",
        "planar_distortion" => "we accept up to 500 % of scale error for this preview",
        "target_distortion" => {
            "we accept up to 1000 % of scale error in the target CRS: the preview is viewed, \
             never measured"
        }
        "overlapping_features" => "we accept up to 1000000000 m² counted twice in this preview",
        _ => "a regional preview whose figures are never used as measurements",
    };
    format!("{text} ({id})")
}

/// Alternatives a careful agent names by their ids for a decision of `domain`.
fn considered_instead(domain: &str) -> Vec<Value> {
    let named: &[(&str, &str)] = match domain {
        "crs_datum" => &[(
            "EPSG:3857 (Web Mercator)",
            "the basemap tiles reproject on their own",
        )],
        "resampling" => &[
            ("nearest", "nearest makes steps in a smooth surface"),
            ("cubic", "cubic overshoots next to sharp edges"),
        ],
        "hydrology" => &[
            ("fill", "filling floods real pits into flat lakes"),
            (
                "breach",
                "breaching would notch the culvert crossings this map keeps",
            ),
            ("d8", "single-neighbour routing makes parallel paths"),
            ("dinf", "dispersion spreads channels over hillslopes"),
        ],
        "aggregation" => &[
            ("median", "the median hides the extremes the preview shows"),
            ("max", "the maximum overstates every zone"),
            ("std", "the spread is not what the preview maps"),
            (
                "coverage",
                "exact cell fractions change the preview's figures by little",
            ),
        ],
        _ => &[],
    };
    named
        .iter()
        .map(|(method, why_not)| serde_json::json!({"method": method, "why_not": why_not}))
        .collect()
}

/// What a gated call did: the refusal it met first (if any) and the final result.
pub struct Justified {
    /// The structured content of the first refusal, or `Value::Null` when none was needed.
    pub refusal: Value,
    pub result: CallToolResult,
}

impl Justified {
    /// `(domain, severity)` of every entry of the first refusal.
    pub fn refused_by(&self) -> Vec<(String, String)> {
        self.refusal["refusal"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| {
                        (
                            e["domain"].as_str().unwrap_or_default().to_string(),
                            e["severity"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Call a gated tool; when refused, answer every domain with a justification whose
/// `choice.method` names the refused decision (its key fields), and retry once.
pub async fn call_justified(server: &Server, name: &str, arguments: Value) -> Result<Justified> {
    call_justified_with(server, name, arguments, &|_, _| {}).await
}

/// [`call_justified`] with each domain's answer passed through `adjust(domain, answer)` before
/// the retry (a tolerance or an alternative a particular fixture needs, for instance).
pub async fn call_justified_with(
    server: &Server,
    name: &str,
    arguments: Value,
    adjust: &(dyn Fn(&str, &mut Value) + Sync),
) -> Result<Justified> {
    let first = server.call(name, arguments.clone()).await?;
    let content = structured(&first);
    let Some(entries) = content["refusal"].as_array() else {
        return Ok(Justified {
            refusal: Value::Null,
            result: first,
        });
    };
    let mut answers = serde_json::Map::new();
    for entry in entries {
        let decision = entry["decision"]
            .as_object()
            .map(|fields| {
                fields
                    .values()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let domain = entry["domain"].as_str().unwrap_or_default().to_string();
        let mut answer = justification(&decision);
        // Since issue 18 every finding's answer is checked for content, whatever the severity:
        // answer each item by id with what its domain asks for (a tolerance no smaller than any
        // measured error, where the CRS comes from, why blended codes are acceptable, ...), and
        // list the alternatives considered by their ids, rejecting each offered one with why.
        let mut evidence = serde_json::Map::new();
        let mut alternatives = vec![serde_json::json!(
            {"method": "keep the source CRS", "why_not": "the other layers are geographic"}
        )];
        for item in entry["evidence"].as_array().into_iter().flatten() {
            let Some(id) = item["id"].as_str() else {
                continue;
            };
            evidence.insert(id.to_string(), Value::String(careful_answer(id)));
            if let Some(offered) = item["alternative"].as_object() {
                let names: Vec<String> = offered
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => s.clone(),
                        Value::Object(o) => o
                            .values()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" "),
                        _ => k.clone(),
                    })
                    .collect();
                alternatives.push(serde_json::json!({
                    "method": names.join(" "),
                    "why_not": format!("the preview keeps the call's own setting to compare \
                                        with the earlier runs ({id})")
                }));
            }
        }
        alternatives.extend(considered_instead(&domain));
        answer["alternatives"] = Value::Array(alternatives);
        answer["evidence"] = Value::Object(evidence);
        adjust(&domain, &mut answer);
        answers.insert(domain, answer);
    }
    let mut retry = arguments;
    retry["justification"] = Value::Object(answers);
    let result = server.call(name, retry).await?;
    Ok(Justified {
        refusal: content,
        result,
    })
}
