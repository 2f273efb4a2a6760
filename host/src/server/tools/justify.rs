//! The record family: `persist_justification`, which stores a justification for a key a
//! refusal handed out, after the same validation an inline justification gets; and
//! `provenance_report`, which writes up how a file was made from its lineage.

use crate::reflection::justification::Justification;
use crate::reflection::provenance::{self, Format};
use crate::server::args::parse;
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated;
use crate::server::tool::{handler, Effect, Family, Schemas, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Arguments of `persist_justification`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersistArgs {
    /// The domain id from the refusal (e.g. "crs_datum").
    pub domain: String,
    /// The key from the refusal ("sha256:...").
    pub key: String,
    /// The justification, as the refusal's schema describes it.
    #[schemars(with = "Justification")]
    pub justification: Value,
}

/// `persist_justification`, as the tool table lists it.
pub const PERSIST_JUSTIFICATION: ToolSpec = ToolSpec {
    name: "persist_justification",
    family: Family::Justify,
    title: "Persist justification",
    verb: "Recorded a justification for",
    description: "Store a justification for a decision a gated tool refused, with the \
        `domain` and `key` from that refusal; then retry the call unchanged.",
    effect: Effect::Stores,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::plain::<PersistArgs, crate::reflection::gate::Stored>(),
    handler: handler!(persist),
};

/// `persist_justification`.
pub async fn persist(call: Call) -> Result<Value, ToolError> {
    let args: PersistArgs = parse(call.tool, &call.arguments)?;
    let gate = call.app.gate.clone();
    let stored = call
        .app
        .plugins(move || Ok(gate.persist(&args.domain, &args.key, &args.justification)?))
        .await?;
    gated::to_value(call.tool, &stored)
}

/// Arguments of `provenance_report`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceArgs {
    /// A file a gated tool wrote (renamed or copied is fine).
    pub input: String,
    /// Default markdown.
    #[serde(default)]
    pub format: Option<Format>,
}

/// `provenance_report`, as the tool table lists it.
pub const PROVENANCE_REPORT: ToolSpec = ToolSpec {
    name: "provenance_report",
    family: Family::Justify,
    title: "Provenance report",
    verb: "Reported the provenance of",
    description: "How a file was made, from lineage records: steps, parameters, \
        decisions, versions, edits outside the server. Markdown methods or W3C PROV-JSON.",
    effect: Effect::ReadOnly,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::plain::<ProvenanceArgs, crate::reflection::provenance::Report>(),
    handler: handler!(provenance_report),
};

/// `provenance_report`: on the hashing slots (never the read tools'), its hashing bounded
/// (`reflection::lineage`) and stopped when the client cancels the call.
pub async fn provenance_report(call: Call) -> Result<Value, ToolError> {
    let args: ProvenanceArgs = parse(call.tool, &call.arguments)?;
    let path = call.input_path("input", &args.input)?;
    let lineage = call.app.lineage.clone();
    let capsules = call.app.gate.store().clone();
    let format = args.format.unwrap_or(Format::Markdown);
    let work = call.work();
    let report = call
        .app
        .hashing(move || {
            let stop = || work.is_cancelled();
            match provenance::report_until(&lineage, &capsules, &path, format, &stop) {
                Ok(report) => Ok(report),
                Err(_) if work.is_cancelled() => Err(ToolError::Cancelled),
                Err(e) => Err(ToolError::Arguments(format!("input: {e}"))),
            }
        })
        .await?;
    gated::to_value(call.tool, &report)
}
