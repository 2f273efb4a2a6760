//! The justification an agent writes for one methodological decision.
//!
//! The Rust type is the source of truth: its schemars-generated JSON Schema is the one the
//! server publishes (in refusals, tool input schemas and `schema://justification`), and
//! [`validate`] enforces the same rules, reporting every problem at once as `{path, message}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domains::{EvidenceItem, FieldError};
use std::collections::BTreeMap;

/// A justification may take at most this many bytes of compact JSON.
pub const MAX_BYTES: usize = 4096;

/// The visible text of `s`: without whitespace and Unicode format characters (zero-width
/// spaces and joiners, bidi marks, the BOM, soft hyphens), which would make an empty answer
/// look non-empty.
pub fn visible(s: &str) -> String {
    s.chars()
        .filter(|c| {
            !c.is_whitespace()
                && !matches!(
                    *c,
                    '\u{00AD}'
                        | '\u{061C}'
                        | '\u{180E}'
                        | '\u{200B}'..='\u{200F}'
                        | '\u{202A}'..='\u{202E}'
                        | '\u{2060}'..='\u{2064}'
                        | '\u{2066}'..='\u{206F}'
                        | '\u{FEFF}'
                        | '\u{FFF9}'..='\u{FFFB}'
                )
                && !c.is_control()
        })
        .collect()
}

/// Non-empty text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Text(pub String);

inline_json_schema!(Text, { "type": "string", "minLength": 1 });

/// How sure the agent is of its choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// A method considered and rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Alternative {
    /// The method, CRS or approach considered.
    pub method: Text,
    /// Why it was not chosen for this analysis.
    pub why_not: Text,
}

/// The method chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// The method, CRS or approach this call actually uses.
    pub method: Text,
    /// Why it fits the analysis.
    pub rationale: Text,
    /// What it costs: the errors or distortions accepted.
    pub tradeoffs: Text,
}

/// A methodological justification for one decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Justification")]
pub struct Justification {
    /// What the analysis needs this call to achieve.
    pub intent: Text,
    /// At least one alternative considered, with why not.
    #[schemars(length(min = 1))]
    pub alternatives: Vec<Alternative>,
    /// The choice, its rationale and its tradeoffs.
    pub choice: Choice,
    /// Confidence in the choice.
    pub confidence: Confidence,
    /// What is assumed without evidence. Required (non-empty) for critical decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumptions: Vec<Text>,
    /// What would make this decision worth revisiting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions_for_revisit: Vec<Text>,
    /// How the analysis accounts for each evidence item of the refusal, by id. Required for
    /// every item of a critical decision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub evidence: BTreeMap<String, Text>,
}

/// The published JSON Schema (draft 2020-12) of [`Justification`], generated once.
pub fn schema() -> Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(generate_schema).clone()
}

fn generate_schema() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Justification>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "description".to_string(),
            Value::String(format!(
                "A methodological justification. All strings non-empty; at most {MAX_BYTES} bytes \
                 of JSON; critical decisions need non-empty `assumptions` and an `evidence` \
                 answer for every evidence id of the refusal."
            )),
        );
    }
    value
}

const FIELDS: &[&str] = &[
    "intent",
    "alternatives",
    "choice",
    "confidence",
    "assumptions",
    "conditions_for_revisit",
    "evidence",
];

fn err(errors: &mut Vec<FieldError>, path: &str, message: impl Into<String>) {
    errors.push(FieldError {
        path: path.to_string(),
        message: message.into(),
    });
}

fn text(errors: &mut Vec<FieldError>, value: Option<&Value>, path: &str) {
    match value {
        None => err(errors, path, "missing; a non-empty string is required"),
        Some(Value::String(s)) if visible(s).is_empty() => err(
            errors,
            path,
            "must not be empty (whitespace and invisible format characters do not count)",
        ),
        Some(Value::String(_)) => {}
        Some(_) => err(errors, path, "must be a string"),
    }
}

fn object_fields(errors: &mut Vec<FieldError>, value: &Value, path: &str, allowed: &[&str]) {
    if let Some(object) = value.as_object() {
        for key in object.keys() {
            if !allowed.contains(&key.as_str()) {
                err(
                    errors,
                    &format!("{path}/{key}"),
                    format!("unknown field; allowed: {}", allowed.join(", ")),
                );
            }
        }
    }
}

fn text_list(errors: &mut Vec<FieldError>, value: Option<&Value>, path: &str, required: bool) {
    match value {
        None if required => err(
            errors,
            path,
            "missing; critical decisions must list their assumptions",
        ),
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            if required && items.is_empty() {
                err(
                    errors,
                    path,
                    "must list at least one assumption for a critical decision",
                );
            }
            for (index, item) in items.iter().enumerate() {
                text(errors, Some(item), &format!("{path}/{index}"));
            }
        }
        Some(_) => err(errors, path, "must be an array of strings"),
    }
}

/// The `evidence` answers: an object from evidence id to text. Every id must be one of the
/// decision's; a critical decision must answer each of them.
fn evidence_answers(
    errors: &mut Vec<FieldError>,
    value: Option<&Value>,
    evidence: &[EvidenceItem],
    critical: bool,
) {
    let ids: Vec<&str> = evidence.iter().map(|e| e.id.as_str()).collect();
    let answers = match value {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => {
            err(
                errors,
                "/evidence",
                "must be an object from evidence id to how the analysis accounts for it",
            );
            return;
        }
    };
    if let Some(map) = answers {
        for (id, answer) in map {
            if !ids.contains(&id.as_str()) {
                err(
                    errors,
                    &format!("/evidence/{id}"),
                    format!(
                        "not an evidence id of this decision; its ids are: {}",
                        ids.join(", ")
                    ),
                );
                continue;
            }
            text(errors, Some(answer), &format!("/evidence/{id}"));
        }
    }
    if !critical {
        return;
    }
    for item in evidence {
        if answers.is_none_or(|m| !m.contains_key(&item.id)) {
            err(
                errors,
                &format!("/evidence/{}", item.id),
                format!(
                    "missing: this critical decision rests on evidence \"{}\" ({}); say how \
                     the analysis accounts for it{}",
                    item.id,
                    item.fact,
                    item.alternative
                        .as_ref()
                        .map(|a| format!(", or retry with the safe alternative {a}"))
                        .unwrap_or_default()
                ),
            );
        }
    }
}

/// Check `value` against the schema and the host's rules; `critical` also requires
/// `assumptions` and an answer for every item of `evidence`. Returns the typed justification
/// or every problem found.
pub fn validate(
    value: &Value,
    critical: bool,
    evidence: &[EvidenceItem],
) -> Result<Justification, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(object) = value.as_object() else {
        err(&mut errors, "", "a justification must be a JSON object");
        return Err(errors);
    };
    object_fields(&mut errors, value, "", FIELDS);
    text(&mut errors, object.get("intent"), "/intent");
    match object.get("alternatives") {
        None => err(
            &mut errors,
            "/alternatives",
            "missing; list at least one alternative",
        ),
        Some(Value::Array(items)) if items.is_empty() => err(
            &mut errors,
            "/alternatives",
            "list at least one alternative with why_not",
        ),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let path = format!("/alternatives/{index}");
                if !item.is_object() {
                    err(&mut errors, &path, "must be an object {method, why_not}");
                    continue;
                }
                object_fields(&mut errors, item, &path, &["method", "why_not"]);
                text(&mut errors, item.get("method"), &format!("{path}/method"));
                text(&mut errors, item.get("why_not"), &format!("{path}/why_not"));
            }
        }
        Some(_) => err(&mut errors, "/alternatives", "must be an array"),
    }
    match object.get("choice") {
        None => err(
            &mut errors,
            "/choice",
            "missing; give {method, rationale, tradeoffs}",
        ),
        Some(choice) if choice.is_object() => {
            object_fields(
                &mut errors,
                choice,
                "/choice",
                &["method", "rationale", "tradeoffs"],
            );
            for field in ["method", "rationale", "tradeoffs"] {
                text(&mut errors, choice.get(field), &format!("/choice/{field}"));
            }
        }
        Some(_) => err(
            &mut errors,
            "/choice",
            "must be an object {method, rationale, tradeoffs}",
        ),
    }
    match object.get("confidence").and_then(Value::as_str) {
        Some("low" | "medium" | "high") => {}
        _ => err(
            &mut errors,
            "/confidence",
            "must be one of low, medium, high",
        ),
    }
    text_list(
        &mut errors,
        object.get("assumptions"),
        "/assumptions",
        critical,
    );
    text_list(
        &mut errors,
        object.get("conditions_for_revisit"),
        "/conditions_for_revisit",
        false,
    );
    evidence_answers(&mut errors, object.get("evidence"), evidence, critical);
    let size = value.to_string().len();
    if size > MAX_BYTES {
        err(
            &mut errors,
            "",
            format!("is {size} bytes of JSON; the limit is {MAX_BYTES}: be concise"),
        );
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    serde_json::from_value(value.clone()).map_err(|e| {
        vec![FieldError {
            path: String::new(),
            message: e.to_string(),
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({
            "intent": "area statistics in metres",
            "alternatives": [{"method": "EPSG:3857", "why_not": "distorts areas"}],
            "choice": {"method": "EPSG:32633", "rationale": "local UTM zone", "tradeoffs": "<0.1% scale error"},
            "confidence": "high"
        })
    }

    /// Regression: a justification made of zero-width characters passed the non-empty check.
    #[test]
    fn invisible_text_is_empty() {
        let mut zero_width = good();
        zero_width["intent"] = json!("\u{200B}\u{200C}\u{200D}\u{FEFF}\u{2060}");
        zero_width["choice"]["rationale"] = json!(" \u{00AD}\u{202E} ");
        let errors = validate(&zero_width, false, &[]).err().unwrap_or_default();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/intent", "/choice/rationale"], "{errors:?}");
        assert_eq!(visible("a\u{200B}b"), "ab");
    }

    #[test]
    fn a_complete_justification_passes() {
        assert!(validate(&good(), false, &[]).is_ok());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let bad = json!({
            "intent": " ",
            "alternatives": [],
            "choice": {"method": "x", "rationale": ""},
            "confidence": "certain",
            "extra": 1
        });
        let errors = validate(&bad, false, &[]).err().unwrap_or_default();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        for expected in [
            "/extra",
            "/intent",
            "/alternatives",
            "/choice/rationale",
            "/choice/tradeoffs",
            "/confidence",
        ] {
            assert!(
                paths.contains(&expected),
                "{expected} missing from {paths:?}"
            );
        }
    }

    #[test]
    fn critical_decisions_need_assumptions() {
        let errors = validate(&good(), true, &[]).err().unwrap_or_default();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "/assumptions");
        let mut with = good();
        with["assumptions"] = json!(["the header CRS is right"]);
        assert!(validate(&with, true, &[]).is_ok());
    }

    fn ballpark() -> Vec<EvidenceItem> {
        vec![EvidenceItem {
            id: "ballpark_operation".into(),
            fact: "ballpark operation, error unknown".into(),
            why: "positions may be off by 100 m".into(),
            alternative: None,
            relaxable: false,
        }]
    }

    /// The hurried agent: a well-formed critical justification that never engages with the
    /// evidence is refused, naming the item.
    #[test]
    fn critical_decisions_answer_every_evidence_item() {
        let mut hurried = good();
        hurried["assumptions"] = json!(["chosen on purpose"]);
        let errors = validate(&hurried, true, &ballpark())
            .err()
            .unwrap_or_default();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/evidence/ballpark_operation");
        assert!(errors[0]
            .message
            .contains("ballpark operation, error unknown"));
        let mut blank = hurried.clone();
        blank["evidence"] = json!({"ballpark_operation": " \u{200B} "});
        assert!(validate(&blank, true, &ballpark()).is_err());
        let mut stray = hurried.clone();
        stray["evidence"] = json!({"ballpark_operation": "we accept 100 m", "other": "x"});
        let errors = validate(&stray, true, &ballpark())
            .err()
            .unwrap_or_default();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/evidence/other");
        let mut answered = hurried;
        answered["evidence"] = json!({"ballpark_operation": "we accept 100 m: 1 km cells"});
        assert!(validate(&answered, true, &ballpark()).is_ok());
        // Not critical: answers are optional.
        assert!(validate(&good(), false, &ballpark()).is_ok());
    }

    #[test]
    fn oversized_justifications_are_refused() {
        let mut big = good();
        big["intent"] = Value::String("x".repeat(MAX_BYTES));
        let errors = validate(&big, false, &[]).err().unwrap_or_default();
        assert!(errors.iter().any(|e| e.message.contains("limit")));
    }

    #[test]
    fn the_schema_requires_the_core_fields() {
        let schema = schema();
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        for field in ["intent", "alternatives", "choice", "confidence"] {
            assert!(required.contains(&json!(field)), "{field}");
        }
        assert_eq!(schema["properties"]["alternatives"]["minItems"], json!(1));
    }
}
