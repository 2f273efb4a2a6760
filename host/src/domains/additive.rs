//! The adapters that keep components built against older contracts that the current one only
//! extended (`gdal-mcp:risk@0.6.x`, `0.5.x`, `0.4.x` and `0.3.x`) loading.
//!
//! 0.7 added `trigger.confidence` and `evidence-item.relaxable` to 0.6, 0.6 added
//! `tool-call.output` and `tool-call.grids` to 0.5, 0.5 added `tool-call.measurement` to 0.4,
//! and 0.4 added `dataset-facts.upstream` to 0.3, so every older record is its current
//! namesake less those fields. Records cross through their serde form: a current record read
//! as an older one drops what the older contract does not know, and an older trigger read as
//! a current one gets what its domain could not say: confidence `none` (unknown, which an
//! operator's confidence floor treats as below it) and no evidence item relaxable (a policy
//! cannot loosen it). A 0.6 component therefore sees every fact, a 0.5 component every fact
//! but the output and grid facts, a 0.4 component not the measurement facts either, a 0.3
//! component not the upstream steps either, and all answer in full but for those two marks.

use super::sandbox::wit;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// One record as its namesake in another contract version.
fn convert<A: Serialize, B: DeserializeOwned>(record: &A, version: &str) -> wasmtime::Result<B> {
    serde_json::to_value(record)
        .and_then(serde_json::from_value)
        .map_err(|e| wasmtime::Error::msg(format!("adapting a record to or from {version}: {e}")))
}

/// An older trigger as a current one: confidence unknown, no evidence relaxable (what a domain
/// built before 0.7 could not say).
fn upgrade_trigger<A: Serialize>(trigger: &A, version: &str) -> wasmtime::Result<wit::Trigger> {
    let mut value = serde_json::to_value(trigger)
        .map_err(|e| wasmtime::Error::msg(format!("adapting a trigger from {version}: {e}")))?;
    if let Value::Object(fields) = &mut value {
        fields.insert("confidence".to_string(), Value::Null);
        if let Some(Value::Array(items)) = fields.get_mut("evidence") {
            for item in items {
                if let Value::Object(item) = item {
                    item.insert("relaxable".to_string(), Value::Bool(false));
                }
            }
        }
    }
    convert(&value, version)
}

/// The adapter functions for one older contract whose records are the current ones less
/// some fields.
macro_rules! additive_adapter {
    ($module:ident, $old:path, $version:literal) => {
        pub mod $module {
            use super::{convert, upgrade_trigger, wit};
            use $old as old;

            /// The older view of a call: everything its contract knows.
            pub fn to_call(call: &wit::ToolCall) -> wasmtime::Result<old::ToolCall> {
                convert(call, $version)
            }

            /// The older trigger as a current one: confidence unknown, nothing relaxable.
            pub fn from_trigger(trigger: &old::Trigger) -> wasmtime::Result<wit::Trigger> {
                upgrade_trigger(trigger, $version)
            }

            pub fn from_info(info: &old::DomainInfo) -> wasmtime::Result<wit::DomainInfo> {
                convert(info, $version)
            }

            pub fn prompt_values(
                values: &[wit::PromptValue],
            ) -> wasmtime::Result<Vec<old::PromptValue>> {
                convert(&values, $version)
            }

            pub fn evidence(
                items: &[wit::EvidenceItem],
            ) -> wasmtime::Result<Vec<old::EvidenceItem>> {
                convert(&items, $version)
            }

            pub fn from_field_errors(
                errors: &[old::FieldError],
            ) -> wasmtime::Result<Vec<wit::FieldError>> {
                convert(&errors, $version)
            }
        }
    };
}

additive_adapter!(v0_6, crate::domains::sandbox::wit_v0_6, "0.6");
additive_adapter!(v0_5, crate::domains::sandbox::wit_v0_5, "0.5");
additive_adapter!(v0_4, crate::domains::sandbox::wit_v0_4, "0.4");
additive_adapter!(v0_3, crate::domains::sandbox::wit_v0_3, "0.3");

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> wit::ToolCall {
        wit::ToolCall {
            tool: "vector_measure".to_string(),
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
            measurement: Some(wit::MeasurementFacts {
                method: "planar".to_string(),
                crs: None,
                ellipsoid: None,
                area_scale_error: Some(0.31),
                length_scale_error: Some(0.15),
                worst_at: Some((10.0, 35.0)),
                features_checked: 3,
                invalid_features: 1,
                make_valid: false,
                overlapping_pairs: Some(1),
                overlap_area_m2: Some(2.0),
                dissolve: false,
                geometry_kinds: vec!["polygon".to_string()],
                z_ignored: false,
                distance_units: None,
                unweighted_means: Vec::new(),
            }),
            output: Some(wit::OutputFacts {
                driver: "GPKG".to_string(),
                options: vec![("SPATIAL_INDEX".to_string(), "NO".to_string())],
                compression: None,
                lossy: false,
                losses: Vec::new(),
                quality: None,
                max_z_error: None,
            }),
            grids: Some(wit::GridRelation::Differ),
        }
    }

    /// 0.6 sees every fact; its trigger comes back with confidence unknown and nothing
    /// relaxable, whatever else it says.
    #[test]
    fn a_0_6_call_is_complete_and_its_trigger_is_unknown_and_strict() {
        let old = v0_6::to_call(&call()).unwrap();
        let back = serde_json::to_value(&old).unwrap();
        assert_eq!(back, serde_json::to_value(call()).unwrap());
        let trigger = crate::domains::sandbox::wit_v0_6::Trigger {
            severity: crate::domains::sandbox::wit_v0_6::Severity::Required,
            reason: "r".to_string(),
            key_fields: "{}".to_string(),
            prompt_arguments: Vec::new(),
            evidence: vec![crate::domains::sandbox::wit_v0_6::EvidenceItem {
                id: "a".to_string(),
                fact: "f".to_string(),
                why: "w".to_string(),
                alternative: Some("{\"x\":1}".to_string()),
            }],
        };
        let current = v0_6::from_trigger(&trigger).unwrap();
        assert_eq!(current.confidence, None);
        assert_eq!(current.evidence.len(), 1);
        assert!(!current.evidence[0].relaxable);
        assert_eq!(
            current.evidence[0].alternative.as_deref(),
            Some("{\"x\":1}")
        );
        // The evidence passed back to its validate drops the mark it does not know.
        let items = v0_6::evidence(&current.evidence).unwrap();
        assert_eq!(items[0].id, "a");
    }

    /// 0.5 loses the output and grid facts, and nothing else.
    #[test]
    fn a_call_reaches_0_5_without_its_output_and_grid_facts() {
        let old = v0_5::to_call(&call()).unwrap();
        assert_eq!(old.tool, "vector_measure");
        assert_eq!(
            old.measurement.as_ref().and_then(|m| m.area_scale_error),
            Some(0.31)
        );
        let back = serde_json::to_value(&old).unwrap();
        assert!(back.get("output").is_none(), "{back}");
        assert!(back.get("grids").is_none(), "{back}");
    }

    /// 0.4 loses the measurement facts, and nothing else.
    #[test]
    fn a_call_reaches_0_4_without_its_measurement_facts() {
        let old = v0_4::to_call(&call()).unwrap();
        assert_eq!(old.tool, "vector_measure");
        assert!(old.datasets[0].upstream.modified_since);
        let back = serde_json::to_value(&old).unwrap();
        assert!(back.get("measurement").is_none(), "{back}");
    }

    /// 0.3 loses the upstream steps as well, and nothing else.
    #[test]
    fn a_call_reaches_0_3_without_its_upstream_steps() {
        let old = v0_3::to_call(&call()).unwrap();
        assert_eq!(old.tool, "vector_measure");
        assert_eq!(old.datasets[0].driver, "GPKG");
        assert_eq!(
            old.datasets[0]
                .vector
                .as_ref()
                .and_then(|v| v.selected_layer.as_deref()),
            Some("roads")
        );
        let back = serde_json::to_value(&old).unwrap();
        assert!(back.get("measurement").is_none(), "{back}");
        assert!(back["datasets"][0].get("upstream").is_none(), "{back}");
    }
}
