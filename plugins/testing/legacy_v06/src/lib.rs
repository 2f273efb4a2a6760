//! A risk domain built against the frozen `gdal-mcp:risk@0.6.0` contract
//! (`wit/v0.6/risk.wit`). It exists to prove that components built against 0.6 keep loading:
//! the host adapts them to 0.7 (they see every fact, the call's `output` included; their
//! triggers come back with confidence unknown and no evidence relaxable, which 0.6 cannot
//! say; `validate` is as in 0.7 without the relaxable mark).
//!
//! It does not use the SDK, which follows the current contract, and it must not change with
//! it: a 0.6 pack in the wild will not be rebuilt.
//!
//! Behaviour, kept small and deterministic for the tests, parallel to `legacy_v05`:
//!
//! * `describe`: id `legacy_v06`, version `0.6.0`, prompt `legacy_v06_prompt` with one required
//!   argument, `tool`;
//! * `classify`: a `required` trigger for `vector_convert` only, key fields
//!   `{"tool":"vector_convert"}`, whose reason names how many datasets the call's facts hold
//!   and the first one's driver (so a test sees the facts cross the adapter), with one evidence
//!   item, `v06_finding`, whose fact also names how many upstream steps the first dataset's
//!   lineage holds and the output driver the host resolved (the fact 0.6 added); no opinion on
//!   anything else;
//! * `render-prompt`: `Why convert with {tool}?` and a fixed line;
//! * `validate`: one field error at `/intent` unless the justification's `intent` contains
//!   the word `legacy`.

// The generated export glue is `unsafe` by nature; everything written here is not.
#![deny(unsafe_code)]

/// Bindings generated from the frozen 0.6 contract.
#[allow(missing_docs, clippy::all, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "risk-domain",
        path: "../../../wit/v0.6",
    });
}

use bindings::gdal_mcp::risk::types::{
    DatasetFacts, DomainInfo, EvidenceItem, FieldError, PromptArgument, PromptValue, Severity,
    ToolCall, Trigger,
};

/// The only tool this pack governs.
const TOOL: &str = "vector_convert";

/// The id of the one evidence item.
const FINDING: &str = "v06_finding";

struct LegacyV06;

/// The value of prompt argument `name`, or the empty string.
fn prompt_value<'a>(arguments: &'a [PromptValue], name: &str) -> &'a str {
    arguments
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.value.as_str())
        .unwrap_or("")
}

/// Whether the justification (a JSON object) has an `intent` string containing `legacy`, in
/// any case.
fn intent_says_legacy(justification: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(justification)
        .ok()
        .and_then(|j| j.get("intent")?.as_str().map(str::to_ascii_lowercase))
        .is_some_and(|intent| intent.contains("legacy"))
}

/// What the first dataset's lineage says: `0 upstream step(s)`, or `2 upstream step(s), the
/// nearest raster_reproject`, and `modified since the server wrote it` when it was.
fn lineage_text(dataset: Option<&DatasetFacts>) -> String {
    let Some(dataset) = dataset else {
        return "no lineage".to_string();
    };
    let upstream = &dataset.upstream;
    let mut text = format!("{} upstream step(s)", upstream.steps.len());
    if let Some(nearest) = upstream.steps.iter().min_by_key(|s| s.depth) {
        text.push_str(&format!(", the nearest {}", nearest.tool));
    }
    if upstream.modified_since {
        text.push_str(", modified since the server wrote it");
    }
    text
}

impl bindings::Guest for LegacyV06 {
    fn describe() -> DomainInfo {
        DomainInfo {
            id: "legacy_v06".to_string(),
            version: "0.6.0".to_string(),
            title: "Legacy 0.6 fixture".to_string(),
            summary: "A methodology pack built against gdal-mcp:risk@0.6.0; used only by the \
                      tests of the host's 0.6 adapter."
                .to_string(),
            prompt_name: "legacy_v06_prompt".to_string(),
            prompt_arguments: vec![PromptArgument {
                name: "tool".to_string(),
                description: "The tool being called".to_string(),
                required: true,
            }],
            methodology: "# Legacy 0.6 fixture\n\nEvery `vector_convert` call needs a \
                          justification whose intent mentions the word \"legacy\". Built \
                          against `gdal-mcp:risk@0.6.0`, to prove that such components keep \
                          loading and see the facts, the output facts included.\n"
                .to_string(),
        }
    }

    fn classify(call: ToolCall) -> Option<Trigger> {
        if call.tool != TOOL {
            return None;
        }
        let count = call.datasets.len();
        let first = call.datasets.first();
        let driver = first.map_or("none", |d| d.driver.as_str());
        let role = first.map_or("none", |d| d.role.as_str());
        let lineage = lineage_text(first);
        let output = call.output.as_ref().map_or("none", |o| o.driver.as_str());
        Some(Trigger {
            severity: Severity::Required,
            reason: format!(
                "legacy 0.6 pack (built against gdal-mcp:risk@0.6.0): vector_convert of \
                 {count} dataset(s), the first read by the {driver} driver, needs a \
                 justification"
            ),
            key_fields: format!("{{\"tool\":\"{TOOL}\"}}"),
            prompt_arguments: vec![PromptValue {
                name: "tool".to_string(),
                value: TOOL.to_string(),
            }],
            evidence: vec![EvidenceItem {
                id: FINDING.to_string(),
                fact: format!(
                    "{count} dataset(s) in the call's facts; the first, `{role}`, is read by \
                     the {driver} driver; its lineage: {lineage}; the output driver: {output}"
                ),
                why: "a pack built against 0.6 sees every fact through the host's adapter, \
                      `output` included"
                    .to_string(),
                alternative: None,
            }],
        })
    }

    fn render_prompt(arguments: Vec<PromptValue>) -> String {
        let tool = prompt_value(&arguments, "tool");
        format!(
            "## Legacy 0.6 decision: {tool}\n\nWhy convert with {tool}? Say it in `intent`, and \
             mention the word \"legacy\".\n"
        )
    }

    fn validate(
        _key_fields: String,
        _evidence: Vec<EvidenceItem>,
        justification: String,
    ) -> Vec<FieldError> {
        if intent_says_legacy(&justification) {
            Vec::new()
        } else {
            vec![FieldError {
                path: "/intent".to_string(),
                message: "the legacy 0.6 pack wants the word 'legacy' in intent".to_string(),
            }]
        }
    }
}

/// The component's exports: the 0.6 `risk-domain` world.
#[allow(unsafe_code)]
mod exports {
    use super::LegacyV06;
    crate::bindings::export!(LegacyV06 with_types_in crate::bindings);
}

#[cfg(test)]
mod tests {
    use super::bindings::gdal_mcp::risk::types::{Lineage, UpstreamStep};
    use super::bindings::Guest;
    use super::*;

    fn dataset(role: &str, driver: &str) -> DatasetFacts {
        DatasetFacts {
            role: role.to_string(),
            driver: driver.to_string(),
            crs: None,
            raster: None,
            vector: None,
            upstream: Lineage {
                sha256: None,
                modified_since: false,
                steps: Vec::new(),
            },
        }
    }

    fn step(depth: u32, tool: &str) -> UpstreamStep {
        UpstreamStep {
            depth,
            tool: tool.to_string(),
            arguments: "{}".to_string(),
            resampling: None,
            crs_change: None,
            conditioning: None,
            aggregation: None,
            lossy_encoding: None,
            input_modified: false,
            capsules: Vec::new(),
        }
    }

    fn call(tool: &str, datasets: Vec<DatasetFacts>) -> ToolCall {
        ToolCall {
            tool: tool.to_string(),
            arguments: "{}".to_string(),
            datasets,
            target_crs: None,
            transformation: None,
            measurement: None,
            output: None,
            grids: None,
        }
    }

    #[test]
    fn describes_itself_as_the_legacy_v06_pack() {
        let info = LegacyV06::describe();
        assert_eq!(
            (info.id.as_str(), info.version.as_str(), info.title.as_str()),
            ("legacy_v06", "0.6.0", "Legacy 0.6 fixture")
        );
        assert_eq!(info.prompt_name, "legacy_v06_prompt");
        assert_eq!(info.prompt_arguments.len(), 1);
        assert!(info.prompt_arguments[0].required);
    }

    #[test]
    fn asks_for_vector_convert_only_naming_the_facts() {
        let got = LegacyV06::classify(call("vector_convert", vec![dataset("input", "GPKG")]));
        let t = got
            .as_ref()
            .map(|t| (t.severity, t.key_fields.as_str(), t.reason.as_str()));
        assert_eq!(
            t,
            Some((
                Severity::Required,
                r#"{"tool":"vector_convert"}"#,
                "legacy 0.6 pack (built against gdal-mcp:risk@0.6.0): vector_convert of 1 \
                 dataset(s), the first read by the GPKG driver, needs a justification"
            ))
        );
        let evidence = got.as_ref().map(|t| t.evidence.clone()).unwrap_or_default();
        assert_eq!(evidence.len(), 1);
        assert_eq!(evidence[0].id, "v06_finding");
        assert_eq!(
            evidence[0].fact,
            "1 dataset(s) in the call's facts; the first, `input`, is read by the GPKG driver; \
             its lineage: 0 upstream step(s); the output driver: none"
        );
        assert!(evidence[0].alternative.is_none());
        assert!(LegacyV06::classify(call("raster_convert", Vec::new())).is_none());
        let none = LegacyV06::classify(call("vector_convert", Vec::new()));
        assert!(none.is_some_and(|t| t
            .reason
            .contains("0 dataset(s), the first read by the none")));
        let arguments = got.map(|t| t.prompt_arguments).unwrap_or_default();
        let text = LegacyV06::render_prompt(arguments.clone());
        assert!(text.contains("Why convert with vector_convert?"), "{text}");
        assert_eq!(text, LegacyV06::render_prompt(arguments));
    }

    #[test]
    fn names_the_upstream_lineage_it_sees() {
        let mut made = dataset("input", "GPKG");
        made.upstream.sha256 = Some("ab".repeat(32));
        made.upstream.steps = vec![step(2, "vector_clip"), step(1, "vector_reproject")];
        let got = LegacyV06::classify(call("vector_convert", vec![made.clone()]));
        let fact = got
            .and_then(|t| t.evidence.first().map(|e| e.fact.clone()))
            .unwrap_or_default();
        assert!(
            fact.ends_with(
                "its lineage: 2 upstream step(s), the nearest vector_reproject; the output \
                 driver: none"
            ),
            "{fact}"
        );
        made.upstream.steps.clear();
        made.upstream.modified_since = true;
        let got = LegacyV06::classify(call("vector_convert", vec![made]));
        let fact = got
            .and_then(|t| t.evidence.first().map(|e| e.fact.clone()))
            .unwrap_or_default();
        assert!(
            fact.ends_with(
                "0 upstream step(s), modified since the server wrote it; the output driver: none"
            ),
            "{fact}"
        );
    }

    #[test]
    fn wants_legacy_in_the_intent() {
        let errors = LegacyV06::validate(
            "{}".to_string(),
            Vec::new(),
            r#"{"intent":"share the data","choice":{"method":"legacy"}}"#.to_string(),
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "/intent");
        assert_eq!(
            errors[0].message,
            "the legacy 0.6 pack wants the word 'legacy' in intent"
        );
        assert!(LegacyV06::validate(
            "{}".to_string(),
            Vec::new(),
            r#"{"intent":"feed the Legacy system \"v1\""}"#.to_string()
        )
        .is_empty());
        assert_eq!(
            LegacyV06::validate("{}".to_string(), Vec::new(), "{}".to_string()).len(),
            1
        );
    }
}
