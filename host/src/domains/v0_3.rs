//! The adapter that keeps components built against `gdal-mcp:risk@0.3.x` loading.
//!
//! 0.4 only added fields (`dataset-facts.upstream`), so every 0.3 record is its 0.4 namesake
//! less those fields. Records cross through their serde form: a 0.4 record read as a 0.3 one
//! drops what 0.3 does not know, and a 0.3 record read as a 0.4 one is complete. A 0.3
//! component therefore sees every fact but the upstream steps, and answers in full.

use super::sandbox::{wit, wit_v0_3 as old};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// One record as its namesake in the other contract version.
fn convert<A: Serialize, B: DeserializeOwned>(record: &A) -> wasmtime::Result<B> {
    serde_json::to_value(record)
        .and_then(serde_json::from_value)
        .map_err(|e| wasmtime::Error::msg(format!("adapting a record to or from 0.3: {e}")))
}

/// The 0.3 view of a call: everything but the upstream steps.
pub fn to_call(call: &wit::ToolCall) -> wasmtime::Result<old::ToolCall> {
    convert(call)
}

pub fn from_trigger(trigger: &old::Trigger) -> wasmtime::Result<wit::Trigger> {
    convert(trigger)
}

pub fn from_info(info: &old::DomainInfo) -> wasmtime::Result<wit::DomainInfo> {
    convert(info)
}

pub fn prompt_values(values: &[wit::PromptValue]) -> wasmtime::Result<Vec<old::PromptValue>> {
    convert(&values)
}

pub fn evidence(items: &[wit::EvidenceItem]) -> wasmtime::Result<Vec<old::EvidenceItem>> {
    convert(&items)
}

pub fn from_field_errors(errors: &[old::FieldError]) -> wasmtime::Result<Vec<wit::FieldError>> {
    convert(&errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one field 0.4 added is dropped, and nothing else is lost.
    #[test]
    fn a_call_reaches_0_3_without_its_upstream_steps() {
        let call = wit::ToolCall {
            tool: "vector_convert".to_string(),
            arguments: "{\"input\":\"a.gpkg\"}".to_string(),
            datasets: vec![wit::DatasetFacts {
                role: "input".to_string(),
                driver: "GPKG".to_string(),
                crs: None,
                raster: None,
                vector: Some(wit::VectorFacts {
                    layers: Vec::new(),
                    selected_layer: Some("roads".to_string()),
                }),
                upstream: wit::Lineage {
                    sha256: Some("ab".repeat(32)),
                    modified_since: true,
                    steps: Vec::new(),
                },
            }],
            target_crs: None,
            transformation: None,
        };
        let old = to_call(&call).unwrap();
        assert_eq!(old.tool, "vector_convert");
        assert_eq!(old.datasets[0].driver, "GPKG");
        assert_eq!(
            old.datasets[0]
                .vector
                .as_ref()
                .and_then(|v| v.selected_layer.as_deref()),
            Some("roads")
        );
        let back = serde_json::to_value(&old.datasets[0]).unwrap();
        assert!(back.get("upstream").is_none(), "{back}");
    }
}
