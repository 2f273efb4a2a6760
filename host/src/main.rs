//! The `gdal-mcp` binary: command-line parsing, logging and the stdio transport. The only place
//! `anyhow` is used; everything below reports typed errors.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use gdal_mcp::config::{default_cache_dir, ServerConfig, StalePolicy, Toolset};
use gdal_mcp::domains::Origin;
use gdal_mcp::server::{App, GdalMcp};
use rmcp::service::ServerInitializeError;
use rmcp::ServiceExt;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "gdal-mcp",
    version,
    about = "An MCP server (stdio) that gives AI agents GDAL, gated by WebAssembly methodology domains"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    options: Options,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default).
    Serve(Options),
    /// List the loaded risk domains and exit.
    Domains(Options),
    /// The store's tamper-evident ledger of decisions and capsules.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// How FILE was made, from the store's lineage records: a methods section (Markdown) or
    /// W3C PROV-JSON, on stdout. Exit 0 with a report, 1 when no lineage matches FILE.
    Provenance(ProvenanceOptions),
    /// The operator's policy file (TOML; see docs/operators.md).
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Sign a call off for the policy's `human` outcome: shows the call a refusal named (tool,
    /// arguments, input files, findings, the agent's justification), asks yes or no and a note
    /// on the terminal, and records the answer bound to that exact call. Run by a person.
    Approve {
        /// The sign-off id the refusal named.
        id: String,
        #[command(flatten)]
        options: Options,
    },
    /// The server's own first open of a file in a child process (see
    /// `gdal::policy::probe`); not for people.
    #[command(name = "probe-open", hide = true)]
    ProbeOpen { path: PathBuf },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Check FILE as `serve --policy FILE` would (with the same workspaces, store and
    /// plugins): exit 0 printing its digest and rules, 1 with the line and the reason.
    Check {
        file: PathBuf,
        #[command(flatten)]
        options: Options,
    },
    /// Which rule decides a call, and why, without running it: the call's facts are gathered
    /// as the server would, the domains classify it and the policy (`--policy`) rules on each
    /// finding. Nothing is decided, stored or written.
    Explain {
        /// The call as JSON: {"tool": "raster_reproject", "arguments": {...}}.
        #[arg(long, value_name = "JSON")]
        call: String,
        #[command(flatten)]
        options: Options,
    },
}

#[derive(Args, Clone)]
struct ProvenanceOptions {
    /// The file to report on.
    file: PathBuf,
    /// `markdown` (default) or `prov-json`.
    #[arg(long, value_enum, default_value = "markdown")]
    format: ReportFormat,
    #[command(flatten)]
    options: Options,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReportFormat {
    Markdown,
    ProvJson,
}

#[derive(Subcommand)]
enum LedgerCommand {
    /// Check the whole hash chain of `<store>/ledger.jsonl`: exit 0 when intact, 1 naming the
    /// first bad line (edited, deleted, inserted or reordered).
    Verify(Options),
}

#[derive(Args, Clone, Default)]
struct Options {
    /// A directory tool calls may read and write (repeatable; default: the current directory).
    #[arg(long = "workspace", value_name = "DIR")]
    workspaces: Vec<PathBuf>,
    /// Justification store (default: .preflight/ in the first workspace).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// A folder of extra risk-domain components (*.wasm), loaded after the built-in ones
    /// (repeatable).
    #[arg(long = "plugins", value_name = "DIR")]
    plugins: Vec<PathBuf>,
    /// Where compiled components are cached (default: $XDG_CACHE_HOME/gdal-mcp/components).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile components in memory at every start instead of caching them.
    #[arg(long)]
    no_cache: bool,
    /// A capsule for the same decision but an older prompt text or domain version: `warn`
    /// proceeds with a `warn` receipt naming it (default), `refuse` asks again.
    #[arg(long, value_enum, value_name = "POLICY")]
    stale: Option<StalePolicy>,
    /// The key that seals lineage records and ledger entries (default:
    /// $XDG_DATA_HOME/gdal-mcp/key, else ~/.local/share/gdal-mcp/key; created 0600). It must
    /// lie outside every workspace.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Only these tool families are listed and callable (comma-separated; default: all).
    /// persist_justification and provenance_report are always on.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SETS")]
    toolsets: Vec<Toolset>,
    /// The operator's policy (TOML, docs/operators.md): rules that make the domains'
    /// decisions stricter (warn, justify, human sign-off, refuse). Read at start; it must lie
    /// outside every workspace and the store, and anything it cannot use stops the server.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
}

impl Options {
    fn merge(self, global: Options) -> Options {
        Options {
            workspaces: if self.workspaces.is_empty() {
                global.workspaces
            } else {
                self.workspaces
            },
            store: self.store.or(global.store),
            plugins: if self.plugins.is_empty() {
                global.plugins
            } else {
                self.plugins
            },
            cache_dir: self.cache_dir.or(global.cache_dir),
            no_cache: self.no_cache || global.no_cache,
            stale: self.stale.or(global.stale),
            key_file: self.key_file.or(global.key_file),
            toolsets: if self.toolsets.is_empty() {
                global.toolsets
            } else {
                self.toolsets
            },
            policy: self.policy.or(global.policy),
        }
    }

    fn config(self) -> anyhow::Result<ServerConfig> {
        let workspaces = if self.workspaces.is_empty() {
            vec![std::env::current_dir().context("cannot read the current directory")?]
        } else {
            self.workspaces
        };
        Ok(ServerConfig {
            workspaces,
            store: self.store,
            plugin_dirs: self.plugins,
            cache_dir: if self.no_cache {
                None
            } else {
                self.cache_dir.or_else(default_cache_dir)
            },
            stale: self.stale.unwrap_or_default(),
            key_file: self.key_file,
            toolsets: self.toolsets,
            policy: self.policy,
        })
    }
}

/// The stack of every runtime thread, the blocking pool's GDAL workers included. GDAL, PROJ and
/// the libraries below them recurse over nested input structures (an imagery reader over a
/// `METADATA.DIM`, libnetcdf over HDF5 groups), and a stack overflow aborts the whole process:
/// tokio's 2 MiB default overflowed on 9,990 nested elements (attack round 14, R14-9) and on
/// HDF5 groups nested 20,000 deep (R14-10). Pages are committed only as they are touched.
const WORKER_STACK_BYTES: usize = 64 << 20;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GDAL_MCP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match cli.command {
        None => serve(cli.options),
        Some(Command::Serve(options)) => serve(options.merge(cli.options)),
        Some(Command::Domains(options)) => domains(options.merge(cli.options)),
        Some(Command::Provenance(report)) => {
            let options = report.options.clone().merge(cli.options);
            provenance(report, options)
        }
        Some(Command::Ledger(LedgerCommand::Verify(options))) => {
            verify_ledger(options.merge(cli.options))
        }
        Some(Command::Policy(PolicyCommand::Check { file, options })) => {
            let mut options = options.merge(cli.options);
            options.policy = Some(file);
            check_policy(options)
        }
        Some(Command::Policy(PolicyCommand::Explain { call, options })) => {
            explain_policy(&call, options.merge(cli.options))
        }
        Some(Command::Approve { id, options }) => approve(&id, options.merge(cli.options)),
        Some(Command::ProbeOpen { path }) => {
            std::process::exit(gdal_mcp::gdal::policy::probe::child(&path))
        }
    }
}

fn provenance(report: ProvenanceOptions, options: Options) -> anyhow::Result<()> {
    use gdal_mcp::reflection::{lineage::LineageStore, provenance, store::CapsuleStore};
    let config = options.config()?;
    let store = store_of(&config);
    let seal = std::sync::Arc::new(open_seal(&config)?);
    let format = match report.format {
        ReportFormat::Markdown => provenance::Format::Markdown,
        ReportFormat::ProvJson => provenance::Format::ProvJson,
    };
    let file = report
        .file
        .canonicalize()
        .with_context(|| format!("cannot read {}", report.file.display()))?;
    let lineage = LineageStore::with_seal(&store, seal);
    let written = provenance::report(&lineage, &CapsuleStore::new(store.clone()), &file, format)?;
    // The report quotes file names and parameters from the lineage (agent-controlled):
    // escaped for the terminal (issue 21 attack round 7, R7-1).
    let shown = match serde_json::from_str::<serde_json::Value>(&written.report) {
        Ok(json) if matches!(format, provenance::Format::ProvJson) => {
            gdal_mcp::terminal::escape_json(&json)?
        }
        _ => gdal_mcp::terminal::escape_document(&written.report),
    };
    println!("{shown}");
    if written.steps == 0 {
        eprintln!(
            "gdal-mcp provenance: no lineage in {} matches {} (SHA-256 {})",
            store.display(),
            file.display(),
            written.sha256
        );
        std::process::exit(1);
    }
    Ok(())
}

/// The store as the server resolves it: an operator's `--store` as given (links resolved once),
/// the default `.preflight/` of the first workspace only if it is a real folder.
fn store_of(config: &ServerConfig) -> PathBuf {
    match &config.store {
        Some(store) => store.canonicalize().unwrap_or_else(|_| store.clone()),
        None => config.store_root(),
    }
}

/// The sealing key as the server would open it (for the commands that read the store).
fn open_seal(config: &ServerConfig) -> anyhow::Result<gdal_mcp::reflection::seal::Seal> {
    use gdal_mcp::reflection::seal;
    let path = config
        .key_file
        .clone()
        .or_else(seal::default_path)
        .context("no place for the sealing key: set XDG_DATA_HOME or HOME, or give --key-file")?;
    if !path.exists() {
        anyhow::bail!(
            "no sealing key at {}: nothing in this store can be verified (the key is created by \
             the first `gdal-mcp serve`; give --key-file if it is elsewhere)",
            path.display()
        );
    }
    seal::Seal::open(&path, &config.workspaces).map_err(anyhow::Error::from)
}

fn verify_ledger(options: Options) -> anyhow::Result<()> {
    use gdal_mcp::reflection::{journal, ledger, seal::Kind};
    let config = options.config()?;
    let store = store_of(&config);
    let path = store.join(ledger::FILE_NAME);
    let seal = Arc::new(open_seal(&config)?);
    let mut whole = true;
    match ledger::verify(&store, &seal) {
        Ok(intact) => {
            println!(
                "ledger {}: intact, {} entries, head {}",
                path.display(),
                intact.entries,
                intact.head
            );
        }
        Err(broken) => {
            whole = false;
            eprintln!(
                "ledger {}: broken at line {}: {}",
                path.display(),
                broken.line,
                broken.message
            );
            if broken.unsealed_count > 0 {
                eprintln!(
                    "ledger {}: {} line(s) whose MAC fails, first: {}",
                    path.display(),
                    broken.unsealed_count,
                    broken
                        .unsealed
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    // The approvals journal: chained like the ledger (attack round 8, R8-8); a broken chain
    // makes every sign-off fail closed until an operator moves the file aside.
    {
        use gdal_mcp::reflection::approval;
        let shown = store.join(approval::FILE_NAME);
        match approval::verify(&store, seal.clone()) {
            Ok(chain) if chain.lines == 0 => {}
            Ok(chain) => println!(
                "approvals {}: intact, {} lines{}",
                shown.display(),
                chain.lines,
                if chain.unchained > 0 {
                    format!(
                        " ({} written before the chain, fixed by the first chained line)",
                        chain.unchained
                    )
                } else {
                    String::new()
                }
            ),
            Err(e) => {
                whole = false;
                eprintln!("{e}");
            }
        }
    }
    // The lineage journals: a line that does not verify is ignored by the server; say so.
    for (parts, kind) in [
        (&["lineage", "records.jsonl"], Kind::LineageRecord),
        (&["lineage", "paths.jsonl"], Kind::WrittenPath),
    ] {
        let shown = store.join(parts[0]).join(parts[1]);
        match journal::scan(&store, parts, &seal, kind) {
            Ok(scan) if scan.unsealed == 0 => {
                println!(
                    "lineage {}: {} lines, all sealed",
                    shown.display(),
                    scan.lines
                )
            }
            Ok(scan) => {
                whole = false;
                eprintln!(
                    "lineage {}: {} of {} line(s) whose MAC fails (ignored by the server), \
                     first: {}",
                    shown.display(),
                    scan.unsealed,
                    scan.lines,
                    scan.first_unsealed
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                whole = false;
                eprintln!("lineage {}: cannot read: {e}", shown.display());
            }
        }
    }
    if !whole {
        std::process::exit(1)
    }
    Ok(())
}

fn approve(id: &str, options: Options) -> anyhow::Result<()> {
    use gdal_mcp::reflection::approval::{Approvals, Line};
    use std::io::{BufRead, Write};
    let config = options.config()?;
    let store = store_of(&config);
    let seal = Arc::new(open_seal(&config)?);
    let approvals = Approvals::new(&store, seal.clone());
    let Some(Line::Request {
        form, expires_ms, ..
    }) = approvals.pending(id)?
    else {
        anyhow::bail!(
            "no sign-off request {id} in the store {} (give the --store the refusal named)",
            store.display()
        );
    };
    // SAFETY: isatty has no preconditions.
    if unsafe { libc::isatty(0) } != 1 {
        anyhow::bail!(
            "gdal-mcp approve asks a person: run it in a terminal (its standard input is not one)"
        );
    }
    let minutes = (expires_ms - gdal_mcp::reflection::approval::now_ms()) / 60_000;
    let mut out = std::io::stdout();
    // Every string below but the headings came from the agent's call or from the data
    // (file names, CRS and layer names quoted in the findings): printed through one escaper,
    // so none of them can drive the terminal (regression, issue 21 attack round 7, R7-1).
    use gdal_mcp::terminal::{escape, escape_json};
    let field =
        |value: &serde_json::Value, default: &str| escape(value.as_str().unwrap_or(default));
    writeln!(
        out,
        "Sign-off {} (request expires in about {minutes} min)\n",
        escape(id)
    )?;
    writeln!(
        out,
        "[Text from the agent's call or from the data is marked \u{00bb} and shown as written, \
         with control and invisible characters made visible as \\u{{...}}: a \\u{{1b}} or \
         \\u{{202e}} in it is a warning sign.]\n"
    )?;
    writeln!(out, "Tool: {}", field(&form["tool"], "?"))?;
    writeln!(
        out,
        "Arguments (from the agent):\n{}",
        escape_json(&form["arguments"])?
    )?;
    writeln!(out, "Input files (names as found on disk):")?;
    for input in form["inputs"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "- \u{00bb} {} (sha256 {})",
            field(&input["path"], "?"),
            field(&input["sha256"], "unknown")
        )?;
    }
    writeln!(
        out,
        "\nFinding of {} ({}), worded by the server; names in it are the data's own:\n\u{00bb} {}",
        field(&form["domain"], "?"),
        field(&form["severity"], "?"),
        field(&form["reason"], "")
    )?;
    for item in form["evidence"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "- {}: \u{00bb} {} Why it matters: {}",
            field(&item["id"], "?"),
            field(&item["fact"], ""),
            field(&item["why"], "")
        )?;
    }
    match &form["justification"] {
        serde_json::Value::Null => writeln!(out, "\nThe agent gave no justification.")?,
        j => writeln!(
            out,
            "\nThe agent's justification (from the agent):\n{}",
            escape_json(j)?
        )?,
    }
    writeln!(
        out,
        "\nWhy a person is asked (the operator's policy): {}",
        field(&form["policy"], "")
    )?;
    if form["covers_decision"].as_bool() == Some(true) {
        // R7-9: the operator's rule makes one yes cover the decision, not only this call.
        writeln!(
            out,
            "\nThe operator's rule makes this sign-off cover the decision: a yes also lets \
             later calls of this tool with the same decision, inputs and arguments run (any \
             output name), under this policy and these domains."
        )?;
        write!(out, "\nApprove this decision? Type yes or no: ")?;
    } else {
        write!(out, "\nApprove this call? Type yes or no: ")?;
    }
    out.flush()?;
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let answer = lines.next().transpose()?.unwrap_or_default();
    let approved = match answer.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" => true,
        "no" | "n" => false,
        other => anyhow::bail!("\"{other}\" is neither yes nor no: nothing recorded"),
    };
    write!(out, "A note for the record (optional, one line): ")?;
    out.flush()?;
    let note = lines.next().transpose()?.unwrap_or_default();
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| {
            // SAFETY: getuid has no preconditions.
            format!("uid {}", unsafe { libc::getuid() })
        });
    let by = format!("gdal-mcp approve in a terminal, user {user}");
    let line = approvals.answer(id, approved, note.trim(), &by)?;
    if let Line::Answer { binding, .. } = &line {
        let ledger = gdal_mcp::reflection::ledger::Ledger::with_seal(&store, seal);
        let entry = serde_json::json!({
            "id": id,
            "approved": approved,
            "note": note.trim(),
            "by": by,
            "tool": binding.tool,
            "domain": binding.domain,
            "key": binding.decision_key,
            "arguments": binding.arguments,
            "policy": binding.policy,
        });
        if let Err(e) = ledger.append(if approved { "approval" } else { "denial" }, &entry) {
            eprintln!("gdal-mcp approve: not recorded in the ledger: {e}");
        }
    }
    writeln!(
        out,
        "\n{} sign-off {id}. {}",
        if approved {
            "Recorded: approved"
        } else {
            "Recorded: declined"
        },
        if approved {
            "Retry the exact call within the request's 10 minutes."
        } else {
            "The call stays refused."
        }
    )?;
    Ok(())
}

fn check_policy(options: Options) -> anyhow::Result<()> {
    let app = start(options)?;
    let Some(policy) = app.gate.policy() else {
        anyhow::bail!("no policy file given");
    };
    println!(
        "policy {}: {} rule(s), digest {}",
        policy.path.display(),
        policy.rules.len(),
        policy.digest
    );
    println!("{}", serde_json::to_string_pretty(&policy.summary())?);
    Ok(())
}

fn explain_policy(call: &str, options: Options) -> anyhow::Result<()> {
    use gdal_mcp::server::{call::Call, registry, ToolError};
    let parsed: serde_json::Value = serde_json::from_str(call)
        .context("--call is not JSON: {\"tool\": ..., \"arguments\": {...}}")?;
    let tool = parsed
        .get("tool")
        .and_then(serde_json::Value::as_str)
        .context("--call names no \"tool\"")?;
    let arguments = parsed
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let Some(spec) = registry::find(tool) else {
        anyhow::bail!("unknown tool \"{tool}\"");
    };
    if !spec.gated() {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "tool": tool,
                "decisions": [],
                "explanation": "the gate does not see this tool: no domain or policy decides it",
            }))?
        );
        return Ok(());
    }
    let app = Arc::new(start(options)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut call = Call::new(
        app,
        spec.name,
        spec.verb,
        arguments,
        spec.opens_rasters,
        None,
    );
    call.explain_only = true;
    match runtime.block_on((spec.handler)(call)) {
        Err(ToolError::Explained(explained)) => {
            // Finding texts quote CRS and layer names from the data (R7-1).
            println!("{}", gdal_mcp::terminal::escape_json(&explained)?);
            Ok(())
        }
        Ok(_) => anyhow::bail!("{tool}: ran without reaching the gate (a bug)"),
        Err(e) => anyhow::bail!("{tool}: the call cannot be explained: {e}"),
    }
}

fn start(options: Options) -> anyhow::Result<App> {
    let config = options.config()?;
    App::start(config).context("gdal-mcp cannot start")
}

fn domains(options: Options) -> anyhow::Result<()> {
    let app = start(options)?;
    for domain in app.gate.registry().all() {
        let origin = match &domain.origin {
            Origin::Builtin => "built-in".to_string(),
            Origin::File(path) => path.display().to_string(),
        };
        println!(
            "{:<20} {:<8} {:<24} {}",
            domain.info.id, domain.info.version, domain.info.prompt_name, origin
        );
    }
    Ok(())
}

fn serve(options: Options) -> anyhow::Result<()> {
    let app = start(options)?;
    let ids: Vec<String> = app
        .gate
        .registry()
        .all()
        .iter()
        .map(|d| format!("{} {}", d.info.id, d.info.version))
        .collect();
    eprintln!(
        "gdal-mcp {} | domains: {} | workspaces: {} | store: {}",
        gdal_mcp::VERSION,
        ids.join(", "),
        app.workspaces
            .roots()
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        app.gate.store().root().display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .build()
        .context("cannot start the async runtime")?;
    let protocol_out = private_stdout()?;
    let protocol_in = private_stdin()?;
    let served = runtime.block_on(async move {
        let server = GdalMcp::new(Arc::new(app));
        let (reader, writer, pumps) = gdal_mcp::transport::start(
            tokio::fs::File::from_std(protocol_in),
            tokio::fs::File::from_std(protocol_out),
        );
        let service = match server.serve((reader, writer)).await {
            Ok(service) => service,
            Err(ServerInitializeError::ConnectionClosed(_)) => {
                pumps.finish().await;
                eprintln!("gdal-mcp: the client closed the connection before the MCP handshake");
                return Ok(());
            }
            Err(e) => return Err(e).context("MCP handshake over stdio failed"),
        };
        service.waiting().await.context("MCP service failed")?;
        pumps.finish().await;
        eprintln!("gdal-mcp: the client closed the connection; exiting");
        Ok(())
    });
    // Dropping the runtime waits for every blocking thread; a worker set aside after the open
    // deadline may never return, and one still inside its deadline (or in long work) may take
    // minutes: the process must still exit when the client has gone (regression, issue 21,
    // O1: a worker blocked before its deadline kept the process alive after stdin closed).
    // Work still running is abandoned: nothing of it is committed (a staged output dies with
    // the process and is swept at the next start).
    if gdal_mcp::gdal::policy::deadline::any_abandoned() {
        runtime.shutdown_background();
    } else {
        runtime.shutdown_timeout(EXIT_GRACE);
    }
    served
}

/// How long a server whose client closed the connection waits for work still running before
/// it exits anyway.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Keep stdout for JSON-RPC alone: the protocol writes to a private duplicate of fd 1, and fd 1
/// itself is pointed at stderr, so nothing else in the process (GDAL, PROJ, a driver that
/// writes to `/vsistdout/`, a stray print) can write into the protocol stream.
fn private_stdout() -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsFd;
    let duplicate = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate stdout")?;
    // SAFETY: dup2 on the process's own standard descriptors; fd 2 stays open, and fd 1 is
    // atomically replaced by a copy of it.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot point stdout at stderr");
    }
    Ok(std::fs::File::from(duplicate))
}

/// Keep stdin for JSON-RPC alone, likewise: the protocol reads a private duplicate of fd 0, and
/// fd 0 is pointed at `/dev/null`, so nothing else in the process (a CRS naming `/dev/stdin`
/// as a grid file, a VRT source) can consume the client's requests.
fn private_stdin() -> anyhow::Result<std::fs::File> {
    use std::os::fd::{AsFd, AsRawFd};
    let duplicate = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate stdin")?;
    let null = std::fs::File::open("/dev/null").context("cannot open /dev/null")?;
    // SAFETY: dup2 of an open descriptor onto the process's own fd 0.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot point stdin at /dev/null");
    }
    Ok(std::fs::File::from(duplicate))
}
