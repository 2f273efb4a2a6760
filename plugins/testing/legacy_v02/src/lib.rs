//! A risk domain built against the frozen `gdal-mcp:risk@0.2.0` contract
//! (`wit/v0.2/risk.wit`). It exists to prove that components built against 0.2 keep loading:
//! the host adapts them to 0.3 (their triggers carry no evidence, so the host makes one item,
//! `finding`, from the reason; they see the 0.2 subset of the facts).
//!
//! It does not use the SDK, which follows the current contract, and it must not change with
//! it: a 0.2 pack in the wild will not be rebuilt.
//!
//! Behaviour, kept small and deterministic for the tests:
//!
//! * `describe`: id `legacy_pack`, version `0.2.0`, prompt `legacy_pack_prompt` with one
//!   required argument, `tool`;
//! * `classify`: a `required` trigger for `vector_convert` only, key fields
//!   `{"tool":"vector_convert"}`; no opinion on anything else;
//! * `render-prompt`: `Why convert with {tool}?` and a fixed line;
//! * `validate`: one field error at `/intent` unless the justification's `intent` contains
//!   the word `legacy`.

// The generated export glue is `unsafe` by nature; everything written here is not.
#![deny(unsafe_code)]

/// Bindings generated from the frozen 0.2 contract.
#[allow(missing_docs, clippy::all, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "risk-domain",
        path: "../../../wit/v0.2",
    });
}

use bindings::gdal_mcp::risk::types::{
    DomainInfo, FieldError, PromptArgument, PromptValue, Severity, ToolCall, Trigger,
};

/// The only tool this pack governs.
const TOOL: &str = "vector_convert";

struct LegacyPack;

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

impl bindings::Guest for LegacyPack {
    fn describe() -> DomainInfo {
        DomainInfo {
            id: "legacy_pack".to_string(),
            version: "0.2.0".to_string(),
            title: "Legacy 0.2 fixture".to_string(),
            summary: "A methodology pack built against gdal-mcp:risk@0.2.0; used only by the \
                      tests of the host's 0.2 adapter."
                .to_string(),
            prompt_name: "legacy_pack_prompt".to_string(),
            prompt_arguments: vec![PromptArgument {
                name: "tool".to_string(),
                description: "The tool being called".to_string(),
                required: true,
            }],
            methodology: "# Legacy 0.2 fixture\n\nEvery `vector_convert` call needs a \
                          justification whose intent mentions the word \"legacy\". Built \
                          against `gdal-mcp:risk@0.2.0`, to prove that such components keep \
                          loading.\n"
                .to_string(),
        }
    }

    fn classify(call: ToolCall) -> Option<Trigger> {
        (call.tool == TOOL).then(|| Trigger {
            severity: Severity::Required,
            reason: "legacy pack (built against gdal-mcp:risk@0.2.0): vector_convert needs a \
                     justification"
                .to_string(),
            key_fields: format!("{{\"tool\":\"{TOOL}\"}}"),
            prompt_arguments: vec![PromptValue {
                name: "tool".to_string(),
                value: TOOL.to_string(),
            }],
        })
    }

    fn render_prompt(arguments: Vec<PromptValue>) -> String {
        let tool = prompt_value(&arguments, "tool");
        format!(
            "## Legacy decision: {tool}\n\nWhy convert with {tool}? Say it in `intent`, and \
             mention the word \"legacy\".\n"
        )
    }

    fn validate(_key_fields: String, justification: String) -> Vec<FieldError> {
        if intent_says_legacy(&justification) {
            Vec::new()
        } else {
            vec![FieldError {
                path: "/intent".to_string(),
                message: "the legacy pack wants the word 'legacy' in intent".to_string(),
            }]
        }
    }
}

/// The component's exports: the 0.2 `risk-domain` world.
#[allow(unsafe_code)]
mod exports {
    use super::LegacyPack;
    crate::bindings::export!(LegacyPack with_types_in crate::bindings);
}

#[cfg(test)]
mod tests {
    use super::bindings::Guest;
    use super::*;

    fn call(tool: &str) -> ToolCall {
        ToolCall {
            tool: tool.to_string(),
            arguments: "{}".to_string(),
            datasets: Vec::new(),
            target_crs: None,
            transformation: None,
        }
    }

    #[test]
    fn describes_itself_as_the_legacy_pack() {
        let info = LegacyPack::describe();
        assert_eq!(
            (info.id.as_str(), info.version.as_str(), info.title.as_str()),
            ("legacy_pack", "0.2.0", "Legacy 0.2 fixture")
        );
        assert_eq!(info.prompt_name, "legacy_pack_prompt");
        assert_eq!(info.prompt_arguments.len(), 1);
        assert!(info.prompt_arguments[0].required);
    }

    #[test]
    fn asks_for_vector_convert_only() {
        let got = LegacyPack::classify(call("vector_convert"));
        let t = got
            .as_ref()
            .map(|t| (t.severity, t.key_fields.as_str(), t.reason.as_str()));
        assert_eq!(
            t,
            Some((
                Severity::Required,
                r#"{"tool":"vector_convert"}"#,
                "legacy pack (built against gdal-mcp:risk@0.2.0): vector_convert needs a \
                 justification"
            ))
        );
        assert!(LegacyPack::classify(call("raster_convert")).is_none());
        let arguments = got.map(|t| t.prompt_arguments).unwrap_or_default();
        let text = LegacyPack::render_prompt(arguments.clone());
        assert!(text.contains("Why convert with vector_convert?"), "{text}");
        assert_eq!(text, LegacyPack::render_prompt(arguments));
    }

    #[test]
    fn wants_legacy_in_the_intent() {
        let errors = LegacyPack::validate(
            "{}".to_string(),
            r#"{"intent":"share the data","choice":{"method":"legacy"}}"#.to_string(),
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "/intent");
        assert_eq!(
            errors[0].message,
            "the legacy pack wants the word 'legacy' in intent"
        );
        assert!(LegacyPack::validate(
            "{}".to_string(),
            r#"{"intent":"feed the Legacy system \"v1\""}"#.to_string()
        )
        .is_empty());
        assert_eq!(
            LegacyPack::validate("{}".to_string(), "{}".to_string()).len(),
            1
        );
    }
}
