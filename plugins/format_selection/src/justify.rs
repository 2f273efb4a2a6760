//! What a careful justification of a format decision contains, finding by finding (issue 18,
//! rule 3): an answer that only restates or acknowledges the findings is refused.
//!
//! * **Each finding gets its own answer.** The same text given for two findings (the hurried
//!   agent's one-line acknowledgement pasted under every id) is refused.
//! * **An answer says something the finding did not.** An answer made only of the finding's
//!   own words (its fact and why) and words of acknowledgement ("accepted", "understood",
//!   "fine") is refused.
//! * **A loss is bounded by a number.** For a finding that changes values (a lossy encoding, a
//!   second one, narrowing or rescaling, lossy codecs next to nodata or on class codes, curves
//!   linearised, a driver's own reprojection) the answer or `choice.tradeoffs` states the error
//!   the analysis accepts as a number; for LERC the number is no smaller than `max_z_error`.
//! * **A CRS finding names the CRS** readers must assume (an authority code such as 4326 or
//!   `CRS84`, or `WGS 84`).
//! * **The offered safe alternative is rejected explicitly.** Where an answered finding (every
//!   finding of a critical decision) offers one (the lossless codec, a wider `output_type`,
//!   `GEOMETRY=AS_WKT`...), the justification names it (in `alternatives[].method` or in the
//!   answer) with its reason.

use gdal_mcp_domain_sdk::{
    alternative, chosen_tradeoffs, evidence_answer, field_error, normalise, shorten, tokens,
    EvidenceItem, FieldError, Value,
};

/// Findings that change values: the accepted error must be stated as a number.
const LOSSES: &[&str] = &[
    "lossy_encoding",
    "second_lossy_encoding",
    "scaled_output_type",
    "narrowing_output_type",
    "rescaled_values",
    "lossy_near_nodata",
    "lossy_categorical",
    "curves_linearised",
    "driver_reprojects",
    "unsupported_data_type",
    "codec_data_type",
];

/// Findings about a CRS: the answer names the CRS readers must assume.
const CRS_FINDINGS: &[&str] = &["crs_missing", "crs_not_kept", "non_standard_crs"];

/// Words that acknowledge without saying anything.
const ACKNOWLEDGEMENTS: &[&str] = &[
    "acknowledge",
    "acknowledged",
    "been",
    "was",
    "were",
    "has",
    "had",
    "acknowledging",
    "accept",
    "accepted",
    "acceptable",
    "accepting",
    "understood",
    "understand",
    "noted",
    "aware",
    "ok",
    "okay",
    "fine",
    "agree",
    "agreed",
    "confirm",
    "confirmed",
    "yes",
    "finding",
    "findings",
    "this",
    "that",
    "the",
    "a",
    "an",
    "is",
    "are",
    "be",
    "for",
    "of",
    "to",
    "and",
    "in",
    "it",
    "we",
    "i",
    "our",
    "my",
    "here",
    "purpose",
    "purposes",
    "analysis",
    "use",
    "case",
    "risk",
    "risks",
    "issue",
    "issues",
    "reviewed",
    "review",
    "considered",
    "consider",
    "known",
    "expected",
    "intended",
    "deliberate",
    "ok",
    "fine",
    "good",
    "sufficient",
    "enough",
    "adequate",
    "appropriate",
    "reasonable",
    "with",
    "as",
    "on",
    "by",
    "not",
    "no",
    "so",
    "do",
    "does",
    "have",
    "has",
    "will",
    "can",
    "all",
    "any",
    "these",
    "those",
    "them",
    "they",
    "which",
    "what",
    "our",
    "us",
    "task",
    "workflow",
    "project",
    "needs",
    "need",
    "requirements",
    "impact",
    "impacts",
    "minor",
    "negligible",
    "matter",
    "matters",
    "important",
    "relevant",
    "concern",
    "concerns",
];

/// The numbers written in `text` (`0.5`, `2,5`, `75`).
fn numbers(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || ((c == '.' || c == ',') && !current.is_empty()) {
            current.push(if c == ',' { '.' } else { c });
        } else if !current.is_empty() {
            if let Ok(v) = current.trim_end_matches('.').parse::<f64>() {
                out.push(v);
            }
            current.clear();
        }
    }
    out
}

/// The words of `text` that are neither in `known` nor acknowledgements.
fn new_words(text: &str, known: &[String]) -> Vec<String> {
    tokens(text)
        .into_iter()
        .filter(|t| t.len() > 2 && !t.chars().all(|c| c.is_ascii_digit()))
        .filter(|t| !ACKNOWLEDGEMENTS.contains(&t.as_str()))
        .filter(|t| !known.contains(t))
        .collect()
}

/// The distinguishing values of an offered alternative: its string leaves of three or more
/// characters (`DEFLATE`, `Float32`, `AS_WKT`, `GTiff`), else its argument names.
fn alternative_names(alternative: &Value) -> Vec<String> {
    fn leaves(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) if s.len() >= 3 && !s.chars().all(|c| c.is_ascii_digit()) => {
                out.push(s.clone())
            }
            Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    leaves(alternative, &mut out);
    if out.is_empty() {
        if let Some(map) = alternative.as_object() {
            out.extend(map.keys().cloned());
        }
    }
    out
}

/// Whether `text` mentions `name` (compared as letters and digits only, so `AS_WKT` matches
/// `as wkt` and `LOSSLESS=TRUE` matches `lossless = true`).
fn mentions(text: &str, name: &str) -> bool {
    let name = normalise(name);
    !name.is_empty() && normalise(text).contains(&name)
}

/// The content checks of a justification against the decision's evidence.
pub(crate) fn check(
    key_fields: &Value,
    evidence: &[EvidenceItem],
    justification: &Value,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let tradeoffs = chosen_tradeoffs(justification).unwrap_or_default();
    let rationale = justification
        .get("choice")
        .and_then(|c| c.get("rationale"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let alternatives: Vec<String> = justification
        .get("alternatives")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .map(|a| {
                    format!(
                        "{} {}",
                        a.get("method").and_then(Value::as_str).unwrap_or_default(),
                        a.get("why_not").and_then(Value::as_str).unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();

    // One answer pasted under every finding.
    let answered: Vec<(&str, &str)> = evidence
        .iter()
        .filter_map(|item| evidence_answer(justification, &item.id).map(|a| (item.id.as_str(), a)))
        .collect();
    for (i, (id, answer)) in answered.iter().enumerate() {
        if let Some((other, _)) = answered[..i]
            .iter()
            .find(|(_, a)| normalise(a) == normalise(answer))
        {
            errors.push(field_error(
                &format!("/evidence/{id}"),
                format!(
                    "the same answer is given for `{other}` and `{id}`; each finding needs its \
                     own answer about what it does to this data"
                ),
            ));
        }
    }

    for item in evidence {
        let id = item.id.as_str();
        let path = format!("/evidence/{id}");
        let answer = evidence_answer(justification, id).unwrap_or_default();
        // Where the finding is argued: its own answer, else the choice's words.
        let argued = if answer.trim().is_empty() {
            format!("{rationale} {tradeoffs}")
        } else {
            answer.to_string()
        };
        let known: Vec<String> = tokens(&format!("{} {}", item.fact, item.why));
        if new_words(&argued, &known).len() < 2 {
            errors.push(field_error(
                &path,
                format!(
                    "\"{}\" only restates or acknowledges the finding; say what it means for \
                     this data and this use (how large an error is acceptable and why, which \
                     readers or later steps are affected)",
                    shorten(argued.trim(), 120)
                ),
            ));
            continue;
        }
        if LOSSES.contains(&id) {
            let stated: Vec<f64> = numbers(&format!("{answer} {tradeoffs}"));
            let bound = key_fields
                .get("max_z_error")
                .and_then(Value::as_f64)
                .filter(|e| *e > 0.0 && id == "lossy_encoding");
            match bound {
                Some(e) if !stated.iter().any(|v| *v >= e) => errors.push(field_error(
                    &path,
                    format!(
                        "LERC moves values by up to max_z_error {e}; state the error the \
                         analysis accepts, in data units, as a number no smaller than {e} (in \
                         evidence.{id} or choice.tradeoffs)"
                    ),
                )),
                None if stated.is_empty() => errors.push(field_error(
                    &path,
                    format!(
                        "state the error the analysis accepts as a number (e.g. \"errors up to \
                         2 grey levels are below the sensor noise\", \"quality 90\", \"0.1 m \
                         along arcs\") in evidence.{id} or choice.tradeoffs"
                    ),
                )),
                _ => {}
            }
        }
        if CRS_FINDINGS.contains(&id) {
            let names_crs = !numbers(&argued).is_empty()
                || ["wgs84", "crs84"]
                    .iter()
                    .any(|c| normalise(&argued).contains(c));
            if !names_crs {
                errors.push(field_error(
                    &path,
                    "name the CRS the readers of the file must assume (an authority code such \
                     as EPSG:4326, CRS84 or WGS 84)",
                ));
            }
        }
        // A critical decision answers every finding; an answered finding that offers a safe
        // alternative must say it was rejected.
        if let Some(offered) = alternative(item).filter(|_| !answer.trim().is_empty()) {
            let names = alternative_names(&offered);
            let considered = std::iter::once(answer.to_string())
                .chain(alternatives.iter().cloned())
                .any(|text| names.iter().any(|n| mentions(&text, n)));
            if !names.is_empty() && !considered {
                errors.push(field_error(
                    &path,
                    format!(
                        "the finding offers {}; name it in `alternatives` (or in this answer) \
                         and say why it was rejected",
                        shorten(&offered.to_string(), 200)
                    ),
                ));
            }
        }
    }
    errors
}
