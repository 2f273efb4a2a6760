//! The one gated step, shared by every gated tool:
//!
//! 1. the tool confines its paths and checks its arguments (before this step);
//! 2. **gather**: on a GDAL worker, open the inputs, gather the facts the domains see and plan
//!    the work (anything that can be refused is refused here, before the gate);
//! 3. **decide**: ask the gate, on a plugin worker; a refusal becomes [`ToolError::Refused`];
//! 4. **work**: on a GDAL worker, with progress and cancellation;
//! 5. **record**: on the same worker, the outputs are hashed and their lineage record is
//!    written (`reflection::lineage`), through the store files opened at the end of the gather
//!    step (a store that cannot record the call refuses it there, before the gate decides;
//!    the gate's own ledger line is appended before the work, and its failure refuses too);
//! 6. the result goes back with the gate's receipts and the outputs' `lineage://` URIs
//!    ([`Gated`]).
//!
//! The gather step also looks every input up in the lineage records, so the domains see the
//! steps that made it (`CallFacts::upstream`).
//!
//! What the record says of the step is typed, never guessed from names: the gather step names
//! the step's resampling, CRS change, conditioning and aggregation from its plan
//! ([`Gathered::summarising`]), every gated result says how to replay it ([`Step`]: its GDAL
//! commands, or the host's computation in words), and the verb comes from the tool table.

use super::call::{Call, Work};
use super::error::ToolError;
use crate::domains::CallFacts;
use crate::gdal::facts::encoding;
use crate::gdal::facts::georef;
use crate::gdal::output::{self, WriteRules};
use crate::hydrology::Progress;
use crate::reflection::gate::{Receipt, Verdict};
use crate::reflection::lineage::{self, FileRef, LineageStore, Record, StepSummary};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A gated tool's result: the tool's own fields plus the receipts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Gated<T> {
    #[serde(flatten)]
    pub result: T,
    /// One receipt per risk domain that had something to say about this call.
    pub reflection: Vec<Receipt>,
    /// `lineage://<sha256>` of each output: how it was made (also `provenance_report`).
    pub lineage: Vec<String>,
}

/// What the gather step found: the facts the domains see and the plan for the work.
pub struct Gathered<P> {
    /// `tool` and `arguments` are filled in by the step; `arguments` may carry extra
    /// host-computed fields (an object), which are merged into the call's arguments.
    pub facts: CallFacts,
    pub plan: P,
    /// What the planned step does that later steps' domains care about (its lossy encoding
    /// is added by the gated step from the host's encoding fact).
    pub summary: StepSummary,
}

impl<P> Gathered<P> {
    /// A plan whose step resamples nothing, changes no CRS, conditions and aggregates
    /// nothing; [`Gathered::summarising`] says otherwise.
    pub fn new(facts: CallFacts, plan: P) -> Self {
        Self {
            facts,
            plan,
            summary: StepSummary::default(),
        }
    }

    /// The planned step's summary, from the typed plan.
    pub fn summarising(mut self, summary: StepSummary) -> Self {
        self.summary = summary;
        self
    }
}

/// How a gated result's step can be replayed: what its lineage record and a methods section
/// say. Every gated tool's result implements it, so a tool that forgets does not compile.
pub trait Step {
    /// The equivalent GDAL command lines, in order (empty when GDAL has none).
    fn commands(&self) -> Vec<Vec<String>>;
    /// The host's own computation in words, precise enough to redo it, when no GDAL command
    /// replays the step (`None` when the commands do).
    fn computation(&self) -> Option<String>;
}

/// A result whose step the host computed itself, with the computation in words for lineage;
/// it serialises as the result alone.
pub struct Computed<T> {
    pub result: T,
    /// Command lines that did part of the step (warps onto a grid, ...), in order.
    pub commands: Vec<Vec<String>>,
    pub computation: String,
}

impl<T> Computed<T> {
    pub fn new(result: T, computation: String) -> Self {
        Self {
            result,
            commands: Vec::new(),
            computation,
        }
    }
}

impl<T: Serialize> Serialize for Computed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.result.serialize(serializer)
    }
}

impl<T> Step for Computed<T> {
    fn commands(&self) -> Vec<Vec<String>> {
        self.commands.clone()
    }

    fn computation(&self) -> Option<String> {
        Some(self.computation.clone())
    }
}

/// Run a gated call: gather, decide, work, and return the result with receipts.
pub async fn run<P, O, G, W>(
    call: &Call,
    justifications: Option<super::args::Justifications>,
    gather: G,
    work: W,
) -> Result<Value, ToolError>
where
    P: Send + 'static,
    O: Serialize + Step + Send + 'static,
    G: FnOnce() -> Result<Gathered<P>, ToolError> + Send + 'static,
    W: FnOnce(P, &Work) -> Result<O, ToolError> + Send + 'static,
{
    let app = call.app.clone();
    // A justification under a name that is no loaded domain would be read by none: said at
    // once (attack round 16, R16-C3: "Resampling" was dropped and the refusal was the one a
    // call without a justification gets).
    if let Some(given) = &justifications {
        let known = app.gate.domain_ids();
        let unknown: Vec<&String> = given.0.keys().filter(|k| !known.contains(k)).collect();
        if !unknown.is_empty() {
            return Err(ToolError::Arguments(format!(
                "justification: {} name(s) no loaded domain, so nothing would read them; key \
                 each justification by its domain's id, as the refusal does ({})",
                unknown
                    .iter()
                    .take(5)
                    .map(|k| format!("\"{}\"", super::echo(k)))
                    .collect::<Vec<_>>()
                    .join(", "),
                known.join(", ")
            )));
        }
    }
    let georef = call.georef_source()?;
    let started_at = now();
    let lineage_store = app.lineage.clone();
    let inputs = call.paths().inputs;
    // The client's cancellation, seen by the gather's hashing of the inputs (a 64 GiB input
    // hashed whole under a raised budget could not be cancelled: issue 21) and by the work.
    let progress = call.work();
    let watching = progress.clone();
    // Explaining a call (`gdal-mcp policy explain`) decides, stores and writes nothing: not
    // even the store's files are created.
    let explain_only = call.explain_only;
    let signed_byte = encoding::asks_signed_byte(&call.gate_arguments());
    let (
        (
            Gathered {
                mut facts,
                plan,
                mut summary,
            },
            input_files,
        ),
        appenders,
    ) = app
        .gdal(move || {
            let mut gathered = georef::with_choice(georef, gather)?;
            if signed_byte {
                // PIXELTYPE=SIGNEDBYTE changes every value above 127: whether it changes any
                // is the input's largest value, read exactly (R7-3).
                for d in &mut gathered.facts.datasets {
                    if let Some(raster) = d.raster.as_mut() {
                        raster.byte_max =
                            crate::gdal::facts::byte_max(std::path::Path::new(&d.path));
                    }
                }
            }
            let started = std::time::Instant::now();
            let looked = look_upstream(&lineage_store, gathered, &inputs, &|| {
                watching.is_cancelled()
            })?;
            tracing::debug!(
                micros = started.elapsed().as_micros() as u64,
                "lineage: inputs looked up"
            );
            // Every store file the call's record goes to is opened now, before the gate
            // decides or anything is written: a store that cannot record the call refuses it
            // (attack round 4, B6), and the record is appended through these files.
            let appenders = if explain_only {
                None
            } else {
                Some(
                    lineage_store
                        .open_for_append()
                        .map_err(crate::reflection::store::StoreError::from)?,
                )
            };
            Ok((looked, appenders))
        })
        .await?;
    facts.tool = call.tool.to_string();
    facts.arguments = call.gate_arguments();
    // What a raster-writing call writes (driver, options, whether the encoding loses values)
    // is a host fact, seen by the domains and recorded in the lineage; the tool's entry in the
    // table declares how it writes. Vector writers set
    // theirs in their gather, where the driver is resolved.
    if facts.output.is_none() {
        facts.output = super::registry::find(call.tool)
            .and_then(|spec| spec.raster_output)
            .and_then(|write| encoding::output_of_call(&write, &facts.arguments, &facts.datasets));
    }
    if let Some(fact) = facts.output.as_ref().and_then(|o| o.encoding.as_ref()) {
        summary.lossy_encoding = fact.lineage_label();
    }
    summary.categorical_input = categorical_summary(&facts);
    let verb = call.verb;
    let upstream_capsules = facts.upstream_capsules();
    let arguments = facts.arguments.clone();
    let Some(mut appenders) = appenders else {
        let gate = app.gate.clone();
        let explained = app.plugins(move || Ok(gate.explain(&facts)?)).await?;
        return Err(ToolError::Explained(explained));
    };
    if progress.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    // The named inputs; what GDAL reads through them is bound by the gate (R10-1).
    let bound: Vec<(String, Option<String>)> = input_files
        .iter()
        .filter(|f| f.role != SOURCE_ROLE)
        .map(|f| (f.path.clone(), f.sha256.clone()))
        .collect();
    let inline = justifications.unwrap_or_default().0;
    // This request's part in a sign-off: an answer its form carried is its own (R17-C2).
    let holder = crate::reflection::approval::new_holder();
    // However the call ends, the capsules it stored answer other calls from then on (R17-C3).
    let _end = EndOfCall {
        gate: call.app.gate.clone(),
        holder,
    };
    // Nothing a cancelled call stored stays, whichever step the cancel met (a person's form,
    // the second decision after it, the work): disarmed once the outputs are committed
    // (R16-C2, R22-C4).
    let mut withdraw_if_cancelled = WithdrawIfCancelled {
        gate: call.app.gate.clone(),
        holder,
        progress: progress.clone(),
        armed: true,
    };
    let receipts = match decide(call, facts.clone(), inline.clone(), bound, holder).await? {
        Verdict::Proceed(receipts) => receipts,
        Verdict::Refuse {
            entries,
            receipts,
            sign_offs,
        } => {
            // Only a person's answer, through a host that shows forms, lifts a refusal here;
            // then the gate is asked again, with every input hashed again right before the
            // work, so the answer approves this call only as it is now.
            super::sign_off::settle(call, entries, receipts, sign_offs, holder).await?;
            let lineage_store = app.lineage.clone();
            let named: Vec<FileRef> = input_files
                .iter()
                .filter(|f| f.role != SOURCE_ROLE)
                .cloned()
                .collect();
            let watching = progress.clone();
            let fresh = app
                .gdal(move || {
                    // Opened again, so the files GDAL lists for each input are the ones of
                    // now (a companion that appeared while the form was open is bound too:
                    // attack round 13, R13-1); one that no longer opens is refused by the
                    // work's own open.
                    for f in &named {
                        let path = std::path::Path::new(&f.path);
                        if let Err(e) =
                            georef::with_choice(georef, || crate::gdal::facts::open(path).map(drop))
                        {
                            tracing::debug!(path = %f.path, "not listed again: {e}");
                        }
                    }
                    named
                        .iter()
                        .map(|f| {
                            lineage_store
                                .input_until(&f.role, std::path::Path::new(&f.path), &|| {
                                    watching.is_cancelled()
                                })
                                .map(|again| (f.path.clone(), again.sha256))
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|_| ToolError::Cancelled)
                })
                .await?;
            match decide(call, facts, inline, fresh, holder).await? {
                Verdict::Proceed(receipts) => receipts,
                Verdict::Refuse {
                    entries,
                    receipts,
                    sign_offs,
                } => return Err(super::sign_off::after_answer(entries, receipts, &sign_offs)),
            }
        }
    };
    // A call cancelled while the gate decided stores nothing for later calls (R16-C2).
    if progress.is_cancelled() {
        app.gate
            .withdraw(holder, &receipts, "the call was cancelled by the client");
        return Err(ToolError::Cancelled);
    }
    let relay = progress.clone();
    let paths = call.paths();
    let overwrite = call.overwrite();
    let protected = app.protected_roots().to_vec();
    let tool = call.tool;
    let lineage_store = app.lineage.clone();
    let provenance = app.provenance.clone();
    let record_receipts = receipts.clone();
    let (result, lineage) = app
        .gdal(move || {
            let rules = WriteRules::for_call(&paths.inputs, &paths.outputs, overwrite, protected);
            let sink = relay.clone();
            let (out, committed) = georef::with_choice(georef, || {
                crate::gdal::with_progress(
                    move |fraction| sink.report(fraction),
                    || output::with_rules(rules, || work(plan, &relay)),
                )
            });
            // A cancelled GDAL program fails ("User terminated") and commits nothing; a
            // cancelled host algorithm stops likewise. Either way the client cancelled. A
            // cancel that came after an output was committed is too late (R21-C3): the call
            // answers as it ended, and its outputs get their lineage.
            if relay.is_cancelled() && !committed {
                return Err(ToolError::Cancelled);
            }
            let out = out?;
            let commands = georef::replayable(out.commands(), georef);
            let computation = out.computation();
            let mut result = to_value(tool, &out)?;
            // The result's command lines replay the call as the record's do (R15-C13).
            if georef.is_some() {
                if let Some(object) = result.as_object_mut() {
                    for (key, value) in object.iter_mut() {
                        if key == "commands" || key.ends_with("_command") {
                            let single = key.ends_with("_command");
                            let lines: Vec<Vec<String>> = if single {
                                serde_json::from_value(value.clone())
                                    .map(|c| vec![c])
                                    .unwrap_or_default()
                            } else {
                                serde_json::from_value(value.clone()).unwrap_or_default()
                            };
                            let mut lines = georef::replayable(lines, georef);
                            if !lines.is_empty() {
                                *value = if single {
                                    serde_json::json!(lines.remove(0))
                                } else {
                                    serde_json::json!(lines)
                                };
                            }
                        }
                    }
                }
            }
            let record = Record {
                format: lineage::FORMAT.to_string(),
                tool: tool.to_string(),
                verb: verb.to_string(),
                summary,
                arguments,
                commands,
                computation,
                inputs: input_files,
                outputs: paths
                    .outputs
                    .iter()
                    .map(|p| FileRef {
                        role: "output".to_string(),
                        path: p.display().to_string(),
                        sha256: None,
                        size: None,
                        recorded: false,
                        modified_outside: false,
                        written_sha256: None,
                    })
                    .collect(),
                carried: lineage::Carry::default(),
                versions: provenance.0.clone(),
                plugins: provenance.1.clone(),
                // With the integrity of the capsule each decision rested on, which the
                // tool's result leaves out (R17-C5: a capsule replaced later is told apart).
                receipts: record_receipts
                    .iter()
                    .filter_map(|r| {
                        let mut value = serde_json::to_value(r).ok()?;
                        if let (Some(integrity), Some(object)) =
                            (&r.capsule_integrity, value.as_object_mut())
                        {
                            object.insert("capsule_integrity".to_string(), json!(integrity));
                        }
                        Some(value)
                    })
                    .collect(),
                capsules: record_receipts
                    .iter()
                    .filter_map(|r| r.capsule.clone())
                    .collect(),
                upstream_capsules,
                started_at,
                finished_at: now(),
            };
            // The outputs are committed, and the record goes through store files opened (and
            // checked) before the gate decided: what can still fail here is the file system
            // itself (a full disk). That is logged and the result carries no lineage URI;
            // the outputs are whole, and the gate's decision line was appended before the work.
            let started = std::time::Instant::now();
            let uris = lineage_store
                .write_with(record, &mut appenders)
                .unwrap_or_else(|e| {
                    tracing::warn!("{tool}: lineage not recorded: {e}");
                    Vec::new()
                });
            tracing::debug!(
                micros = started.elapsed().as_micros() as u64,
                "lineage: outputs recorded"
            );
            Ok((result, uris))
        })
        .await
        .map_err(|error| match error {
            // Nothing of a cancelled call is answered, and nothing it stored stays.
            ToolError::Cancelled => {
                app.gate
                    .withdraw(holder, &receipts, "the call was cancelled by the client");
                ToolError::Cancelled
            }
            error if !receipts.is_empty() => ToolError::AfterGate {
                error: Box::new(error),
                receipts: receipts.clone(),
            },
            error => error,
        })?;
    withdraw_if_cancelled.armed = false;
    drop(progress);
    to_value(
        call.tool,
        &Gated {
            result,
            reflection: receipts,
            lineage,
        },
    )
}

/// Look every dataset of the gathered facts up in the lineage records, and name every input
/// file as the record will (digest, recorded, modified outside).
fn look_upstream<P>(
    store: &LineageStore,
    mut gathered: Gathered<P>,
    inputs: &[std::path::PathBuf],
    stop: &dyn Fn() -> bool,
) -> Result<(Gathered<P>, Vec<FileRef>), ToolError> {
    let facts = &mut gathered.facts;
    let role_of = |path: &std::path::Path| {
        facts
            .datasets
            .iter()
            .find(|d| std::path::Path::new(&d.path) == path)
            .map_or("input", |d| d.role.as_str())
    };
    // Every input as the record names it, each looked up once.
    let files: Vec<FileRef> = inputs
        .iter()
        .map(|path| store.input_until(role_of(path), path, stop))
        .collect::<Result<_, _>>()
        .map_err(|_| ToolError::Cancelled)?;
    // What GDAL reads through each input (a VRT's sources) has an upstream of its own.
    let through: Vec<Through> = inputs
        .iter()
        .map(|path| sources_upstream(store, path, stop))
        .collect::<Result<_, _>>()?;
    let upstream = facts
        .datasets
        .iter()
        .map(|d| {
            let mut lineage = match files.iter().find(|f| f.path == d.path) {
                Some(file) => store.upstream_of(file),
                // A dataset without a file (`bounds` in a CRS of their own) has no lineage.
                None if d.path.is_empty() => crate::domains::DatasetLineage::default(),
                None => store.upstream(std::path::Path::new(&d.path)),
            };
            let path = std::path::Path::new(&d.path);
            if let Some(t) = inputs.iter().zip(&through).find(|(i, _)| *i == path) {
                lineage.steps.extend(t.1.steps.iter().cloned());
                lineage.steps.sort_by_key(|s| s.depth);
                lineage.modified_since |= t.1.modified;
            }
            lineage
        })
        .collect();
    facts.upstream = upstream;
    classes_from_upstream(facts);
    let mut files = files;
    for t in through {
        for source in t.sources {
            if !files.iter().any(|f| f.path == source.path) {
                files.push(source);
            }
        }
    }
    Ok((gathered, files))
}

/// The upstream of the files GDAL reads through one input besides the input itself.
#[derive(Default)]
struct Through {
    /// Their steps, as the input's own (a VRT is a view of its sources, not a step).
    steps: Vec<crate::domains::UpstreamStep>,
    /// A source was modified outside the server.
    modified: bool,
    /// The sources that have lineage, as a record names its inputs (role `source`), so that
    /// the record of this call carries their marks on.
    sources: Vec<FileRef>,
}

/// The role of a VRT's source among a record's inputs.
const SOURCE_ROLE: &str = "source";

/// An input's upstream is the union of its own and of every file GDAL reads through it (a
/// VRT's sources at any depth, listed by `gdal::policy::read_set`, the confinement checks'
/// parse without their side effects): a VRT around an interpolated output had no record of
/// its own and was taken as original data (issue 21, attack round 10, R10-2). Only sources
/// hashed: a source whose size no record wrote, at a path the server never wrote, has no
/// record and is original data unhashed ([`LineageStore::may_have_record`]); the others are
/// hashed within the hashing budgets (the whole set within `GDAL_MCP_HASH_MAX_SECONDS`), and
/// one that cannot be (or a read set that cannot be listed) is an unknown upstream step,
/// which every domain and rule treats as interpolating and lossy. A client's cancellation
/// stops it.
fn sources_upstream(
    store: &LineageStore,
    input: &std::path::Path,
    stop: &dyn Fn() -> bool,
) -> Result<Through, ToolError> {
    let mut through = Through::default();
    let sources = match crate::gdal::policy::read_set::sources(input) {
        Ok(sources) => sources,
        Err(why) => {
            through.steps.push(lineage::unknown_source_step(
                1,
                &format!("what GDAL reads through it cannot be listed ({why})"),
            ));
            return Ok(through);
        }
    };
    let seconds = lineage::hash_max_seconds();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let past = || stop() || std::time::Instant::now() > deadline;
    for source in sources {
        let Ok(meta) = std::fs::metadata(&source) else {
            continue;
        };
        if !meta.is_file() || !store.may_have_record(&source, meta.len()) {
            continue;
        }
        let file = match store.input_until(SOURCE_ROLE, &source, &past) {
            Ok(file) => file,
            Err(_) if stop() => return Err(ToolError::Cancelled),
            Err(_) => FileRef {
                role: SOURCE_ROLE.to_string(),
                path: source.display().to_string(),
                sha256: None,
                size: Some(meta.len()),
                recorded: false,
                modified_outside: false,
                written_sha256: None,
            },
        };
        if file.sha256.is_none() {
            through.steps.push(lineage::unknown_source_step(
                1,
                &format!(
                    "{} (read through {}) could not be hashed within the server's hashing \
                     budget ({seconds} s, GDAL_MCP_HASH_MAX_SECONDS), so its lineage is unknown",
                    source.display(),
                    input.display()
                ),
            ));
            continue;
        }
        if !(file.recorded || file.modified_outside) {
            continue;
        }
        through.steps.extend(store.upstream_of(&file).steps);
        through.modified |= file.modified_outside;
        through.sources.push(file);
    }
    Ok(through)
}

/// A raster derived from a categorical input that still holds a few distinct values is
/// categorical, whatever its type: `raster_calc "a"` to Float32 drops a class map's palette
/// but not its classes, and the next bilinear resampling must still see them (attack round
/// 7, R7-13). Whole or not: `"a + 0.5"` or `"a * 0.1"` gives 1.5..5.5, the same five classes
/// (round 8, R8-5). A Float32 surface with few distinct values (a DEM rounded to metres,
/// terraces) has no categorical input upstream, so it stays continuous (and a calc mixing
/// classes into a continuous surface holds more than a few values).
fn classes_from_upstream(facts: &mut CallFacts) {
    for (dataset, lineage) in facts.datasets.iter_mut().zip(&facts.upstream) {
        let Some(raster) = dataset.raster.as_mut() else {
            continue;
        };
        if raster.looks_categorical || !raster.evidence.few_values {
            continue;
        }
        if let Some(step) = lineage.steps.iter().find(|s| s.categorical_input.is_some()) {
            tracing::debug!(
                path = %dataset.path,
                "categorical: few distinct values derived from a categorical input by {} \
                 {} step(s) up",
                step.tool,
                step.depth
            );
            raster.looks_categorical = true;
            raster.evidence.integer_classes = true;
        }
    }
}

/// What made a call's categorical inputs categorical, for its lineage record: the first
/// such raster's file name and evidence.
fn categorical_summary(facts: &CallFacts) -> Option<String> {
    facts.datasets.iter().find_map(|d| {
        let raster = d.raster.as_ref().filter(|r| r.looks_categorical)?;
        let e = &raster.evidence;
        let why: Vec<&str> = [
            (e.palette, "a colour table"),
            (e.attribute_table, "an attribute table"),
            (e.integer_classes, "few whole-number values"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, w)| *w)
        .collect();
        let name = std::path::Path::new(&d.path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(&d.path);
        Some(format!("{name}: {}", why.join(", ")))
    })
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Run an ungated, read-only call: the job on a GDAL worker, its result serialised.
pub async fn read_only<O, J>(call: &Call, job: J) -> Result<Value, ToolError>
where
    O: Serialize + Send + 'static,
    J: FnOnce() -> Result<O, ToolError> + Send + 'static,
{
    let georef = call.georef_source()?;
    let output = call
        .app
        .gdal_read(move || georef::with_choice(georef, job))
        .await?;
    to_value(call.tool, &output)
}

/// Withdraws every capsule a call stored when it is dropped armed and the client cancelled the
/// call ([`crate::reflection::gate::Gate::withdraw_call`]); declared after [`EndOfCall`], so
/// it runs first.
struct WithdrawIfCancelled {
    gate: std::sync::Arc<crate::reflection::gate::Gate>,
    holder: u64,
    progress: super::call::Work,
    armed: bool,
}

impl Drop for WithdrawIfCancelled {
    fn drop(&mut self) {
        if self.armed && self.progress.is_cancelled() {
            self.gate
                .withdraw_call(self.holder, "the call was cancelled by the client");
        }
    }
}

/// Ends a call's part in the gate when dropped ([`crate::reflection::gate::Gate::end_call`]).
struct EndOfCall {
    gate: std::sync::Arc<crate::reflection::gate::Gate>,
    holder: u64,
}

impl Drop for EndOfCall {
    fn drop(&mut self) {
        self.gate.end_call(self.holder);
    }
}

/// Ask the gate (on a plugin worker), as the request `holder`.
async fn decide(
    call: &Call,
    facts: CallFacts,
    inline: BTreeMap<String, Value>,
    inputs: Vec<(String, Option<String>)>,
    holder: u64,
) -> Result<Verdict, ToolError> {
    let gate = call.app.gate.clone();
    call.app
        .plugins(move || {
            crate::reflection::approval::as_holder(holder, || {
                Ok(gate.decide_call(&facts, &inline, &inputs)?)
            })
        })
        .await
}

/// Serialise a result; a failure is a bug and says so (never a silent `null`).
pub fn to_value<T: Serialize>(tool: &str, value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value)
        .map_err(|e| ToolError::Internal(format!("{tool}: cannot serialise the result: {e}")))
}
