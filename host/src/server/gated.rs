//! The one gated step, shared by every gated tool:
//!
//! 1. the tool confines its paths and checks its arguments (before this step);
//! 2. **gather**: on a GDAL worker, open the inputs, gather the facts the domains see and plan
//!    the work (anything that can be refused is refused here, before the gate);
//! 3. **decide**: ask the gate, on a plugin worker; a refusal becomes [`ToolError::Refused`];
//! 4. **work**: on a GDAL worker, with progress and cancellation;
//! 5. the result goes back with the gate's receipts ([`Gated`]).

use super::call::{Call, Work};
use super::error::ToolError;
use crate::domains::CallFacts;
use crate::gdal::georef;
use crate::gdal::output::{self, WriteRules};
use crate::hydrology::Progress;
use crate::reflection::gate::{Receipt, Verdict};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// A gated tool's result: the tool's own fields plus the receipts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Gated<T> {
    #[serde(flatten)]
    pub result: T,
    /// One receipt per risk domain that had something to say about this call.
    pub reflection: Vec<Receipt>,
}

/// What the gather step found: the facts the domains see and the plan for the work.
pub struct Gathered<P> {
    /// `tool` and `arguments` are filled in by the step; `arguments` may carry extra
    /// host-computed fields (an object), which are merged into the call's arguments.
    pub facts: CallFacts,
    pub plan: P,
}

impl<P> Gathered<P> {
    pub fn new(facts: CallFacts, plan: P) -> Self {
        Self { facts, plan }
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
    O: Serialize + Send + 'static,
    G: FnOnce() -> Result<Gathered<P>, ToolError> + Send + 'static,
    W: FnOnce(P, &Work) -> Result<O, ToolError> + Send + 'static,
{
    let app = call.app.clone();
    let georef = call.georef_source()?;
    let Gathered { mut facts, plan } = app
        .gdal(move || georef::with_choice(georef, gather))
        .await?;
    facts.tool = call.tool.to_string();
    facts.arguments = merge(call.gate_arguments(), std::mem::take(&mut facts.arguments));
    let receipts = decide(call, facts, justifications.unwrap_or_default().0).await?;
    let progress = call.work();
    let relay = progress.clone();
    let paths = call.paths();
    let overwrite = call.overwrite();
    let protected = app.protected_roots().to_vec();
    let result = app
        .gdal(move || {
            let rules = WriteRules::for_call(&paths.inputs, &paths.outputs, overwrite, protected);
            let sink = relay.clone();
            let out = georef::with_choice(georef, || {
                crate::gdal::with_progress(
                    move |fraction| sink.report(fraction),
                    || output::with_rules(rules, || work(plan, &relay)),
                )
            });
            // A cancelled GDAL program fails ("User terminated") and commits nothing; a
            // cancelled host algorithm stops likewise. Either way the client cancelled.
            if relay.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            out
        })
        .await?;
    drop(progress);
    to_value(
        call.tool,
        &Gated {
            result,
            reflection: receipts,
        },
    )
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

/// Ask the gate; proceed with receipts or fail with the refusal.
async fn decide(
    call: &Call,
    facts: CallFacts,
    inline: BTreeMap<String, Value>,
) -> Result<Vec<Receipt>, ToolError> {
    let gate = call.app.gate.clone();
    let verdict = call
        .app
        .plugins(move || Ok(gate.decide(&facts, &inline)?))
        .await?;
    match verdict {
        Verdict::Proceed(receipts) => Ok(receipts),
        Verdict::Refuse { entries, receipts } => Err(ToolError::Refused { entries, receipts }),
    }
}

fn merge(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
    base
}

/// Serialise a result; a failure is a bug and says so (never a silent `null`).
pub fn to_value<T: Serialize>(tool: &str, value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value)
        .map_err(|e| ToolError::Internal(format!("{tool}: cannot serialise the result: {e}")))
}
