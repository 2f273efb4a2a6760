//! The justification family: `persist_justification`, which stores a justification for a key
//! a refusal handed out, after the same validation an inline justification gets.

use crate::reflection::justification::Justification;
use crate::server::args::parse;
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated;
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
