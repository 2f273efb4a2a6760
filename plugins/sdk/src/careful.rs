//! What a careful answer to a finding must contain, checked the same way in every domain.
//!
//! A justification is for a genuine judgment call. The hurried agent answers every finding
//! with one acknowledging sentence ("I have reviewed the findings and accept the risk for this
//! analysis."); that must never pass. [`check_answers`] applies two kinds of checks:
//!
//! * **generic**, to every answer given in the justification's `evidence` object (and to the
//!   `why_not` of an alternative a need reads): an answer must not be the same text as the
//!   answer to another finding, and must say something beyond acknowledging or restating the
//!   finding ([`says_more_than`]: at least [`MIN_CONTENT_WORDS`] words that are neither
//!   acknowledgement vocabulary nor words of the finding's own fact and why);
//! * **per finding**, the [`Need`]s a domain declares in a [`Finding`]: a tolerance as a number
//!   with a unit no smaller than the measured error ([`Need::Tolerance`]), words that show the
//!   finding was faced ([`Need::Mentions`]), the alternative considered named by its id
//!   ([`Need::AlternativeNamed`], [`Need::AlternativeCrs`]), and for a critical finding the
//!   explicit rejection of the offered safe alternative, with why ([`Need::RejectsOffered`]).
//!
//! [`crate::Domain::validate`]'s default body runs the generic checks, so a third-party domain
//! that declares nothing still refuses boilerplate answers. Every error names the field path and
//! says what to write there.

use crate::{alternative, field_error, find_evidence, shorten, tokens, EvidenceItem, FieldError};
use serde_json::Value;

/// An answer must hold at least this many words beyond acknowledgement and the finding's own.
pub const MIN_CONTENT_WORDS: usize = 2;

/// At most this many characters of a justification are quoted in an error.
const QUOTE: usize = 160;

/// Words that carry no content in an answer: grammar, and the vocabulary of acknowledging a
/// finding without saying anything about it.
const EMPTY_WORDS: &[&str] = &[
    // grammar
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "so",
    "of",
    "to",
    "for",
    "in",
    "on",
    "at",
    "by",
    "with",
    "from",
    "as",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "i",
    "we",
    "our",
    "us",
    "my",
    "me",
    "you",
    "your",
    "they",
    "their",
    "have",
    "has",
    "had",
    "do",
    "does",
    "did",
    "will",
    "would",
    "can",
    "could",
    "should",
    "may",
    "might",
    "must",
    "shall",
    "all",
    "any",
    "each",
    "every",
    "some",
    "such",
    "which",
    "what",
    "who",
    "whom",
    "whose",
    "if",
    "then",
    "than",
    "also",
    "very",
    "just",
    "only",
    "into",
    "onto",
    "about",
    "per",
    "s",
    "ve",
    "ll",
    "re",
    "d",
    "because",
    "since",
    "not",
    "no",
    "yes",
    "now",
    "later",
    "further",
    "overall",
    "general",
    "generally",
    "study",
    "project",
    "projects",
    "context",
    "scope",
    "workflow",
    "application",
    "usage",
    "scenario",
    "circumstances",
    "deliverable",
    "team",
    "user",
    "users",
    "client",
    "stakeholder",
    "stakeholders",
    "negligible",
    "minimal",
    "minor",
    "limited",
    "low",
    "small",
    "insignificant",
    "tolerable",
    "manageable",
    "reasonable",
    "fine",
    "within",
    "limits",
    // acknowledging
    "reviewed",
    "review",
    "reviewing",
    "accept",
    "accepted",
    "accepting",
    "acceptable",
    "accepts",
    "risk",
    "risks",
    "risky",
    "aware",
    "acknowledge",
    "acknowledged",
    "acknowledging",
    "understand",
    "understood",
    "understanding",
    "noted",
    "note",
    "noting",
    "fine",
    "ok",
    "okay",
    "finding",
    "findings",
    "evidence",
    "analysis",
    "analyses",
    "considered",
    "consider",
    "considering",
    "proceed",
    "proceeding",
    "proceeds",
    "appropriate",
    "suitable",
    "sufficient",
    "adequate",
    "necessary",
    "issue",
    "issues",
    "concern",
    "concerns",
    "warning",
    "warnings",
    "purpose",
    "purposes",
    "intended",
    "use",
    "used",
    "using",
    "task",
    "work",
    "result",
    "results",
    "output",
    "data",
    "call",
    "tool",
    "item",
    "items",
    "decision",
    "justification",
    "justified",
    "justify",
    "reason",
    "reasons",
    "noted",
    "flagged",
    "flag",
    "refusal",
    "correct",
    "right",
    "good",
    "well",
    "expected",
    "intent",
    "intended",
    "goal",
    "needs",
    "need",
    "needed",
    "required",
    "requirement",
    "tradeoff",
    "tradeoffs",
    "impact",
    "impacts",
    "effect",
    "effects",
    "limitation",
    "limitations",
    "known",
    "case",
    "current",
    "currently",
    "given",
    "situation",
    "here",
    "above",
    "below",
    "mentioned",
    "listed",
    "stated",
    "described",
    "fact",
    "facts",
    "matter",
    "matters",
    "thing",
    "things",
    "everything",
    "nothing",
    "anything",
    "fully",
    "carefully",
    "careful",
    "thoroughly",
    "properly",
    "make",
    "sure",
    "confirm",
    "confirmed",
    "agree",
    "agreed",
    "go",
    "ahead",
    "continue",
    "continuing",
    "problem",
    "problems",
    "consequence",
    "consequences",
    "implication",
    "implications",
    "ensure",
    "ensured",
    "deliberate",
    "enough",
    "important",
    "relevant",
    "requirements",
    "them",
    // acknowledging in other words (attack round 15, R15-C2: "Seen, read, lgtm." and
    // "Roger, noticed, yep." passed as two content words each)
    "seen",
    "see",
    "saw",
    "roger",
    "lgtm",
    "ack",
    "acked",
    "acknowledgement",
    "acknowledgment",
    "noticed",
    "notice",
    "yep",
    "yeah",
    "yup",
    "sure",
    "cool",
    "alright",
    "great",
    "nice",
    "perfect",
    "thanks",
    "thank",
    "please",
    "checked",
    "check",
    "looked",
    "look",
    "looks",
    "approve",
    "approved",
    "approving",
    "ready",
    "done",
    "happy",
    "comfortable",
    "satisfied",
    "allowed",
    "allow",
    "permitted",
    "permit",
    "intentional",
    "intentionally",
    "deliberately",
    "knowingly",
    "ignore",
    "ignored",
    "ignoring",
    "waive",
    "waived",
    "override",
    "overridden",
    "dismiss",
    "dismissed",
];

/// The unit a tolerance is stated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A distance, read in metres (`m`, `cm`, `mm`, `km`, `metre(s)`, `meter(s)`, `ft`, ...).
    Metres,
    /// A share (`%`, `percent`, `per cent`, `pct`).
    Percent,
    /// An angle (`°`, `deg`, `degree(s)`).
    Degrees,
    /// An area, read in square metres (`m²`, `m2`, `sq m`, `square metres`, `ha`, `km²`).
    SquareMetres,
    /// A count of grid cells (`cell(s)`, `pixel(s)`).
    Cells,
}

impl Unit {
    /// How to write it, for an error message.
    pub fn example(self, value: f64) -> String {
        let v = crate::approx(value, 4);
        match self {
            Unit::Metres => format!("{v} m"),
            Unit::Percent => format!("{v} %"),
            Unit::Degrees => format!("{v}°"),
            Unit::SquareMetres => format!("{v} m²"),
            Unit::Cells => format!("{v} cells"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Metres => "metres",
            Unit::Percent => "per cent",
            Unit::Degrees => "degrees",
            Unit::SquareMetres => "square metres",
            Unit::Cells => "cells",
        }
    }
}

/// One thing a careful answer to a finding must contain.
#[derive(Debug, Clone)]
pub enum Need {
    /// The tolerance the analysis accepts: a number in one of `units` (converted to the first
    /// one's measure, e.g. `1.5 km` is 1500 m), no smaller than `at_least` (the measured error)
    /// when it is known. Read from `evidence.<id>` or `choice.tradeoffs`. `of_what` names the
    /// quantity in the error message (`positional error`, `area error`).
    Tolerance {
        units: Vec<Unit>,
        at_least: Option<f64>,
        of_what: String,
    },
    /// The loss the analysis accepts as a number in the data's own units (grey levels, metres
    /// of height, a quality setting: no unit is required), in `evidence.<id>` (or the choice's
    /// words) or `choice.tradeoffs`; some number no smaller than `at_least` when it is known
    /// (e.g. LERC's `max_z_error`). `of_what` names the quantity in the error message.
    Number {
        at_least: Option<f64>,
        of_what: String,
    },
    /// The answer names a CRS: an authority id (`EPSG:4326`, `epsg 4326`), a bare code
    /// (`4326`), `CRS84` or `WGS 84`. For findings about a CRS a file lacks or a reader must
    /// assume.
    NamesCrs,
    /// `evidence.<id>` contains one of `words` (case-insensitive; a word matches at the start
    /// of a token, a phrase anywhere). `what` says in the error what the words are for.
    Mentions {
        words: &'static [&'static str],
        what: String,
    },
    /// Some `alternatives[i].method` names one of `candidates` (by [`crate::names`]), with a
    /// `why_not` that says more than an acknowledgement: the alternative considered, named by
    /// its id (a method, an algorithm, a statistic).
    AlternativeNamed {
        candidates: Vec<String>,
        what: String,
    },
    /// Some `alternatives[i].method` names a CRS by its authority id (`EPSG:3035`, `epsg
    /// 3035`, `ESRI:102013`) other than those in `except`, with a `why_not` that says more than
    /// an acknowledgement.
    AlternativeCrs { except: Vec<String> },
    /// The finding offered a safe alternative (its `alternative`): some `alternatives[i]`
    /// names it (a value of its arguments, else an argument name) and its `why_not` says why
    /// this analysis cannot use it. For critical findings. Nothing is needed when the finding
    /// offers none.
    RejectsOffered,
}

/// A finding a domain checks, by evidence id: its answer (at `evidence.<id>`, else the choice's
/// rationale and tradeoffs) must say more than the finding, and each of `needs` must hold. Findings whose id is not
/// among the trigger's evidence are skipped.
#[derive(Debug, Clone)]
pub struct Finding {
    pub id: String,
    pub needs: Vec<Need>,
}

impl Finding {
    /// A finding whose answer is required, with `needs`.
    pub fn new(id: &str, needs: Vec<Need>) -> Self {
        Self {
            id: id.to_string(),
            needs,
        }
    }
}

/// A [`Need::Tolerance`] in one unit.
pub fn tolerance(unit: Unit, at_least: Option<f64>, of_what: &str) -> Need {
    Need::Tolerance {
        units: vec![unit],
        at_least,
        of_what: of_what.to_string(),
    }
}

/// A [`Need::Mentions`].
pub fn mentions(words: &'static [&'static str], what: &str) -> Need {
    Need::Mentions {
        words,
        what: what.to_string(),
    }
}

/// A [`Need::AlternativeNamed`] among `candidates`, leaving out those the call uses
/// (`chosen`, compared by [`crate::normalise`]).
pub fn alternative_named(candidates: &[&str], chosen: &[&str], what: &str) -> Need {
    let chosen: Vec<String> = chosen.iter().map(|c| crate::normalise(c)).collect();
    Need::AlternativeNamed {
        candidates: candidates
            .iter()
            .filter(|c| !chosen.contains(&crate::normalise(c)))
            .map(|c| (*c).to_string())
            .collect(),
        what: what.to_string(),
    }
}

/// Check a justification's answers: the generic checks on every answer given (no answer
/// repeated for another finding, none that only acknowledges or restates its finding), then
/// each finding's needs. Returns every problem, each at its field path.
pub fn check_answers(
    evidence: &[EvidenceItem],
    justification: &Value,
    findings: &[Finding],
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let answers = given_answers(evidence, justification);
    let restated: Vec<&str> = evidence
        .iter()
        .flat_map(|item| [item.fact.as_str(), item.why.as_str()])
        .collect();
    // The same text for several findings: the hurried agent's one sentence for every id.
    for (index, (id, answer)) in answers.iter().enumerate() {
        let twins: Vec<&str> = answers
            .iter()
            .enumerate()
            .filter(|(other, (_, text))| *other != index && same_text(text, answer))
            .map(|(_, (other_id, _))| *other_id)
            .collect();
        if !twins.is_empty() {
            errors.push(field_error(
                &format!("/evidence/{id}"),
                format!(
                    "the same answer is given for {}; answer each finding for itself: what it \
                     changes in this analysis, with its numbers, and why that is acceptable",
                    twins
                        .iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            continue;
        }
        if let Some(item) = find_evidence(evidence, id) {
            // Restating is measured against every finding of the refusal, not only this
            // one: the facts of a sibling finding copied under this id say nothing new either
            // (attack round 15, R15-C1).
            if !says_more_than(answer, &restated) {
                errors.push(field_error(
                    &format!("/evidence/{id}"),
                    format!(
                        "\"{}\" only acknowledges or restates the finding ({}); say how this \
                         analysis accounts for it: {}",
                        shorten(answer, QUOTE),
                        shorten(&item.fact, QUOTE),
                        what_to_write(findings, id)
                    ),
                ));
            }
        }
    }
    for finding in findings {
        let Some(item) = find_evidence(evidence, &finding.id) else {
            continue;
        };
        let path = format!("/evidence/{}", finding.id);
        // The answer at evidence.<id>; without one, what the choice says (its rationale and
        // tradeoffs), checked the same way.
        let fallback = choice_text(justification);
        let answer = crate::evidence_answer(justification, &finding.id).or(fallback.as_deref());
        match (
            crate::evidence_answer(justification, &finding.id),
            &fallback,
        ) {
            (Some(_), _) => {}
            (None, Some(text)) if says_more_than(text, &restated) => {}
            (None, _) => errors.push(field_error(
                &path,
                format!(
                    "missing: answer this finding ({}) in evidence.{}: {}",
                    shorten(&item.fact, QUOTE),
                    finding.id,
                    what_to_write(findings, &finding.id)
                ),
            )),
        }
        for need in &finding.needs {
            if let Some(message) = unmet(need, item, &restated, answer, justification) {
                let at = match need {
                    Need::AlternativeNamed { .. }
                    | Need::AlternativeCrs { .. }
                    | Need::RejectsOffered => "/alternatives".to_string(),
                    _ => path.clone(),
                };
                errors.push(field_error(&at, message));
            }
        }
    }
    errors
}

/// The choice's rationale and tradeoffs, joined: what a justification says of every finding it
/// does not answer by id.
fn choice_text(justification: &Value) -> Option<String> {
    let choice = justification.get("choice")?;
    let parts: Vec<&str> = ["rationale", "tradeoffs"]
        .iter()
        .filter_map(|f| choice.get(*f).and_then(Value::as_str))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The answers given in `justification.evidence` for ids of `evidence`, in evidence order.
fn given_answers<'a>(
    evidence: &'a [EvidenceItem],
    justification: &'a Value,
) -> Vec<(&'a str, &'a str)> {
    evidence
        .iter()
        .filter_map(|item| {
            crate::evidence_answer(justification, &item.id).map(|a| (item.id.as_str(), a))
        })
        .collect()
}

/// Whether two answers are the same text, ignoring case, spacing and punctuation.
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (crate::normalise(a), crate::normalise(b));
    !a.is_empty() && a == b
}

/// Whether `answer` says something beyond acknowledging and restating: at least
/// [`MIN_CONTENT_WORDS`] content words ([`content_words`]).
pub fn says_more_than(answer: &str, restated: &[&str]) -> bool {
    content_words(answer, restated).len() >= MIN_CONTENT_WORDS
}

/// The distinct content words of `answer`: words that are neither grammar nor acknowledgement
/// vocabulary nor words of `restated` (the finding's fact and why). Numbers count too; numbers
/// that also stand in `restated` count once together (stating the measured figure as the
/// accepted one is a statement of its own, but repeating every figure of the fact is not more).
pub fn content_words(answer: &str, restated: &[&str]) -> Vec<String> {
    let known: Vec<String> = restated.iter().flat_map(|t| tokens(t)).collect();
    let mut out: Vec<String> = Vec::new();
    let mut repeated_number = false;
    for token in tokens(answer) {
        let numeric = token.chars().all(|c| c.is_ascii_digit());
        if !numeric && token.len() < 2 {
            // A unit letter (`m`) or a stray initial says nothing on its own.
            continue;
        }
        if numeric && known.contains(&token) {
            repeated_number = true;
            continue;
        }
        if EMPTY_WORDS.contains(&token.as_str()) || known.contains(&token) || out.contains(&token) {
            continue;
        }
        out.push(token);
    }
    if repeated_number && !out.iter().any(|t| t.chars().all(|c| c.is_ascii_digit())) {
        out.push("#".to_string());
    }
    out
}

/// What a careful answer to finding `id` contains, for an error message.
fn what_to_write(findings: &[Finding], id: &str) -> String {
    let needs: Vec<String> = findings
        .iter()
        .filter(|f| f.id == id)
        .flat_map(|f| f.needs.iter().map(describe))
        .collect();
    if needs.is_empty() {
        "what it changes in this analysis, with its numbers, and why that is acceptable".to_string()
    } else {
        needs.join("; ")
    }
}

fn describe(need: &Need) -> String {
    match need {
        Need::Tolerance {
            units,
            at_least,
            of_what,
        } => {
            let unit = units.first().copied().unwrap_or(Unit::Metres);
            match at_least {
                Some(min) => format!(
                    "the {of_what} the analysis accepts, as a number in {} of at least {} \
                     (e.g. \"we accept up to {} because ...\")",
                    unit.name(),
                    unit.example(*min),
                    unit.example(*min)
                ),
                None => format!(
                    "the {of_what} the analysis accepts, as a number in {} (e.g. \"we accept \
                     up to {} because ...\")",
                    unit.name(),
                    unit.example(10.0)
                ),
            }
        }
        Need::Number { at_least, of_what } => match at_least {
            Some(min) => format!(
                "the {of_what} the analysis accepts, as a number no smaller than {}",
                crate::approx(*min, 6)
            ),
            None => format!("the {of_what} the analysis accepts, as a number"),
        },
        Need::NamesCrs => {
            "the CRS the readers of the file must assume (an authority code such as EPSG:4326, \
             CRS84 or WGS 84)"
                .to_string()
        }
        Need::Mentions { what, .. } => what.clone(),
        Need::AlternativeNamed { candidates, what } => format!(
            "{what}: an entry of alternatives whose method names one of {}",
            candidates.join(", ")
        ),
        Need::AlternativeCrs { .. } => {
            "the CRS considered instead, by its authority id (e.g. \"EPSG:3035\"), in \
             alternatives"
                .to_string()
        }
        Need::RejectsOffered => {
            "the offered safe alternative, listed in alternatives with why this analysis \
             cannot use it"
                .to_string()
        }
    }
}

/// The message for `need` when the justification does not meet it.
fn unmet(
    need: &Need,
    item: &EvidenceItem,
    restated: &[&str],
    answer: Option<&str>,
    justification: &Value,
) -> Option<String> {
    match need {
        Need::Tolerance {
            units,
            at_least,
            of_what,
        } => {
            let unit = units.first().copied().unwrap_or(Unit::Metres);
            let stated: Vec<f64> = [answer, crate::chosen_tradeoffs(justification)]
                .into_iter()
                .flatten()
                .flat_map(|text| quantities(text, units))
                .collect();
            let largest = stated.iter().copied().fold(f64::NAN, f64::max);
            let minimum = at_least.filter(|m| m.is_finite());
            // A limit the justification sets below the measured error rules the call out by
            // its own words, whatever larger figure it also quotes (attack round 16, R16-C10:
            // "we tolerate at most 5 %; EPSG:3857 is off by 101.4 %" passed on the 101.4). A
            // figure of the findings quoted back is not a limit the analysis sets.
            // The answer by id speaks for its finding; the tradeoffs only when it has none.
            let quoted: Vec<f64> = restated.iter().flat_map(|t| numbers(t)).collect();
            // Both the answer and the tradeoffs: a limit set in either rules (attack round 17,
            // R17-C6: "at most 5 %" in the tradeoffs passed beside an answer that quoted a
            // larger figure).
            let lowest_limit = [answer, crate::chosen_tradeoffs(justification)]
                .into_iter()
                .flatten()
                .flat_map(|text| stated_limits(text, units))
                .filter(|v| {
                    !quoted
                        .iter()
                        .any(|q| (q - v).abs() <= 1e-9 * q.abs().max(1.0))
                })
                .fold(f64::NAN, f64::min);
            if let Some(min) = minimum.filter(|m| lowest_limit * (1.0 + 1e-9) + 1e-12 < *m) {
                return Some(format!(
                    "the justification sets a limit of {} for the {of_what}, and the finding \
                     puts it at {} ({}): by its own words this call exceeds what the analysis \
                     tolerates. Avoid the error{}, or, if the analysis tolerates more, say so \
                     and why",
                    unit.example(lowest_limit),
                    unit.example(min),
                    shorten(&item.fact, QUOTE),
                    offered_text(item)
                ));
            }
            if stated.is_empty() {
                Some(format!(
                    "state the {of_what} this analysis accepts as a number in {}{}, e.g. \"we \
                     accept up to {} because ...\", in evidence.{} (or choice.tradeoffs)",
                    unit.name(),
                    minimum
                        .map(|m| format!(
                            " of at least {} (the finding puts it at {})",
                            unit.example(m),
                            unit.example(m)
                        ))
                        .unwrap_or_default(),
                    unit.example(minimum.unwrap_or(10.0)),
                    item.id
                ))
            } else {
                minimum
                    .filter(|m| largest * (1.0 + 1e-9) + 1e-12 < *m)
                    .map(|min| {
                        format!(
                            "the justification accepts at most {}, but the finding puts it at {} \
                             ({}); accept at least {} and say why that is fit for the purpose, \
                             or avoid the error{}",
                            unit.example(largest),
                            unit.example(min),
                            shorten(&item.fact, QUOTE),
                            unit.example(min),
                            offered_text(item)
                        )
                    })
            }
        }
        Need::Number { at_least, of_what } => {
            let stated: Vec<f64> = [answer, crate::chosen_tradeoffs(justification)]
                .into_iter()
                .flatten()
                .flat_map(numbers)
                .collect();
            match at_least.filter(|m| m.is_finite()) {
                Some(min) if !stated.iter().any(|v| *v >= min) => Some(format!(
                    "finding `{}` moves values by up to {min}; state the {of_what} the analysis \
                     accepts, in data units, as a number no smaller than {min} (in \
                     evidence.{} or choice.tradeoffs){}",
                    item.id,
                    item.id,
                    offered_text(item)
                )),
                None if stated.is_empty() => Some(format!(
                    "state the {of_what} the analysis accepts as a number (e.g. \"errors up to 2 \
                     grey levels are below the sensor noise\", \"quality 90\", \"0.1 m along \
                     arcs\") in evidence.{} or choice.tradeoffs",
                    item.id
                )),
                _ => None,
            }
        }
        Need::NamesCrs => {
            let text = answer.unwrap_or("");
            let normalised = crate::normalise(text);
            let named = !crs_ids(text).is_empty()
                || ["wgs84", "crs84"].iter().any(|c| normalised.contains(c))
                || numbers(text)
                    .iter()
                    .any(|n| n.fract() == 0.0 && (1000.0..1_000_000.0).contains(n));
            (!named).then(|| {
                format!(
                    "finding `{}`: name the CRS the readers of the file must assume (an \
                     authority code such as EPSG:4326, CRS84 or WGS 84) in evidence.{}",
                    item.id, item.id
                )
            })
        }
        Need::Mentions { words, what } => {
            let text = answer.unwrap_or("").to_lowercase();
            let found = words.iter().any(|w| contains_word(&text, w));
            (!found).then(|| {
                format!(
                    "say in evidence.{}: {what}{}",
                    item.id,
                    answer
                        .map(|a| format!(" (the answer \"{}\" does not)", shorten(a, QUOTE)))
                        .unwrap_or_default()
                )
            })
        }
        Need::AlternativeNamed { candidates, what } => {
            if candidates.is_empty() {
                return None;
            }
            let found = considered(justification, restated, |method| {
                candidates.iter().any(|c| crate::names(method, c))
            });
            match found {
                Considered::Yes => None,
                Considered::Unexplained(method) => Some(format!(
                    "the alternative \"{}\" is given no reason beyond an acknowledgement; say \
                     in its why_not what it would change in this analysis (finding `{}`)",
                    shorten(&method, QUOTE),
                    item.id
                )),
                Considered::No => Some(format!(
                    "finding `{}`: {what}; list one of {} in alternatives (method) with why_not \
                     saying why it fits this analysis less",
                    item.id,
                    candidates.join(", ")
                )),
            }
        }
        Need::AlternativeCrs { except } => {
            let found = considered(justification, restated, |method| {
                crs_ids(method)
                    .iter()
                    .any(|id| !except.iter().any(|e| crate::normalise(e) == *id))
            });
            match found {
                Considered::Yes => None,
                Considered::Unexplained(method) => Some(format!(
                    "the alternative CRS \"{}\" is given no reason beyond an acknowledgement; \
                     say in its why_not which property (areas, distances, shapes) it would \
                     keep worse for this analysis",
                    shorten(&method, QUOTE)
                )),
                Considered::No => Some(format!(
                    "finding `{}`: name the CRS considered instead of {} by its authority id \
                     (e.g. \"EPSG:3035\") in alternatives (method), with why_not saying why it \
                     fits this analysis less",
                    item.id,
                    except.first().map(String::as_str).unwrap_or("the target")
                )),
            }
        }
        Need::RejectsOffered => {
            let offered = alternative(item)?;
            let names_of = offered_names(&offered);
            let found = considered(justification, restated, |method| {
                names_of.iter().any(|n| crate::names(method, n))
            });
            match found {
                Considered::Yes => None,
                Considered::Unexplained(method) => Some(format!(
                    "the rejected safe alternative \"{}\" is given no reason beyond an \
                     acknowledgement; say in its why_not why this analysis cannot use {offered}",
                    shorten(&method, QUOTE)
                )),
                Considered::No => Some(format!(
                    "finding `{}` offered the safe alternative {offered}; state that it was \
                     rejected and why: an entry of alternatives whose method names {} and whose \
                     why_not says why this analysis cannot use it. Or call again with {offered}",
                    item.id,
                    names_of
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
            }
        }
    }
}

/// `, or call again with {...}` when the finding offers an alternative.
fn offered_text(item: &EvidenceItem) -> String {
    alternative(item)
        .map(|a| format!(", e.g. by calling again with {a}"))
        .unwrap_or_default()
}

enum Considered {
    Yes,
    /// An alternative matched, but its why_not says nothing.
    Unexplained(String),
    No,
}

/// Whether some entry of `alternatives` has a method that `matches`, and a why_not that says
/// more than an acknowledgement.
fn considered(
    justification: &Value,
    restated: &[&str],
    matches: impl Fn(&str) -> bool,
) -> Considered {
    let entries = justification
        .get("alternatives")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut unexplained = None;
    for entry in entries {
        let method = entry.get("method").and_then(Value::as_str).unwrap_or("");
        if !matches(method) {
            continue;
        }
        let why_not = entry.get("why_not").and_then(Value::as_str).unwrap_or("");
        // Every finding's words are restating, a sibling's too (R15-C1).
        let known: Vec<&str> = restated.iter().copied().chain([method]).collect();
        if says_more_than(why_not, &known) {
            return Considered::Yes;
        }
        unexplained.get_or_insert_with(|| method.to_string());
    }
    match unexplained {
        Some(method) => Considered::Unexplained(method),
        None => Considered::No,
    }
}

/// The names an alternative's arguments go by: its string and number values (`mode`,
/// `geodesic`, `Int32`, `111120`), else its argument names (`make_valid`, `scale`).
fn offered_names(offered: &Value) -> Vec<String> {
    fn leaves(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
            Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    leaves(offered, &mut out);
    if let Some(map) = offered.as_object() {
        out.extend(map.keys().cloned());
    }
    out.dedup();
    out
}

/// The authority ids a text names, normalised (`epsg3035`): `EPSG:3035`, `EPSG 3035`,
/// `ESRI:102013`, `IGNF:LAMB93`.
pub fn crs_ids(text: &str) -> Vec<String> {
    const AUTHORITIES: &[&str] = &["epsg", "esri", "ignf", "iau", "ogc", "nkg"];
    let tokens = tokens(text);
    let mut out = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        if let Some(auth) = AUTHORITIES.iter().find(|a| token.starts_with(*a)) {
            let rest = &token[auth.len()..];
            if !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()) {
                out.push(format!("{auth}{rest}"));
            } else if rest.is_empty() {
                if let Some(code) = tokens.get(index + 1) {
                    out.push(format!("{auth}{code}"));
                }
            }
        }
    }
    out
}

/// Every number written in `text`, with or without a unit (`0.5`, `2,5`, `75`, `1,000`).
pub fn numbers(text: &str) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        if let Ok(value) = read_number(&chars, &mut i).parse::<f64>() {
            found.push(value);
        }
    }
    found
}

/// The number that starts at `chars[*i]` (a digit), as text `f64` parses, `*i` moved past it:
/// digits, and a decimal point or comma between digits; a comma before exactly three digits
/// groups thousands (`2,000`), any other comma is a decimal one (`12,5`). The one scanner of
/// [`numbers`] and [`quantities`].
fn read_number(chars: &[char], i: &mut usize) -> String {
    let mut number = String::new();
    while *i < chars.len() {
        let c = chars[*i];
        if c.is_ascii_digit() {
            number.push(c);
            *i += 1;
        } else if (c == '.' || c == ',') && chars.get(*i + 1).is_some_and(char::is_ascii_digit) {
            let run = chars[*i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            if !(c == ',' && run == 3) {
                number.push('.');
            }
            *i += 1;
        } else {
            break;
        }
    }
    number
}

/// The first number in `unit` written after `marker` in `fact` (an evidence fact the domain
/// wrote itself): `measured_after("overlap by 2501 m² in all", "overlap by ", Unit::SquareMetres)`
/// is 2501.
pub fn measured_after(fact: &str, marker: &str, unit: Unit) -> Option<f64> {
    let at = fact.find(marker)? + marker.len();
    quantities(&fact[at..], &[unit]).first().copied()
}

/// Whether lower-case `text` contains `word`: a phrase (with a space) anywhere, a single word
/// at the start of a token (`interpolat` matches `interpolated`).
fn contains_word(text: &str, word: &str) -> bool {
    let word = word.to_lowercase();
    if word.contains(' ') {
        return text.contains(&word);
    }
    tokens(text).iter().any(|t| t.starts_with(&word))
}

/// The numbers in `text` written in one of `units`, each converted to its unit's measure
/// (`1.5 km` → 1500 metres, `2 ha` → 20000 square metres); units of different kinds (cells
/// next to square metres) are not converted into each other.
pub fn quantities(text: &str, units: &[Unit]) -> Vec<f64> {
    quantities_at(text, units)
        .into_iter()
        .map(|(v, _)| v)
        .collect()
}

/// Words before a quantity that make it a limit the analysis sets ("at most 5 %", "we
/// tolerate 2 m", "within 10 %", "up to 150 %").
const LIMIT_WORDS: &[&str] = &[
    "at most",
    "no more than",
    "not more than",
    "tolerate",
    "tolerates",
    "tolerated",
    "tolerance",
    "maximum",
    "max",
    "up to",
    "within",
    "limit",
    "budget",
    "at the most",
    "≤",
    "<=",
];

/// Words before a figure that make it a limit when its sentence says the analysis needs it
/// ([`NEED_WORDS`]: "parcel areas must stay below 5 %", "area error < 5 % is required",
/// attack round 18, R18-C3); without a need they may describe an alternative ("EPSG:3035
/// keeps it below 0.1 %").
const UNDER_WORDS: &[&str] = &[
    "below",
    "under",
    "less than",
    "lower than",
    "smaller than",
    "fewer than",
    "beneath",
    "<",
];

/// Words that make a sentence a need of the analysis ([`UNDER_WORDS`]).
const NEED_WORDS: &[&str] = &[
    "must",
    "need",
    "needs",
    "needed",
    "require",
    "requires",
    "required",
    "requirement",
    "has to",
    "have to",
    "only accept",
    "only tolerate",
    "mandatory",
    "specification",
];

/// Words right after a figure that make it a limit ("5 % at the most", "2 m or less").
const LIMIT_AFTER_WORDS: &[&str] = &[
    "at most",
    "at the most",
    "or less",
    "or lower",
    "or below",
    "or under",
    "or fewer",
    "maximum",
    "max",
    "tops",
    "is the limit",
    "is our limit",
    "is the most",
];

/// Words before a figure that make it a bound the rest of its sentence rejects ("an error
/// above 5 % is unacceptable"): with one of [`REJECTING_WORDS`] after it, the figure is a
/// limit.
const BOUND_WORDS: &[&str] = &[
    "above",
    "over",
    "beyond",
    "more than",
    "exceeding",
    "exceeds",
    "greater than",
    ">",
];

/// Words that reject what a bound names ([`BOUND_WORDS`]).
const REJECTING_WORDS: &[&str] = &[
    "unacceptable",
    "not acceptable",
    "rules it out",
    "rule it out",
    "cannot be used",
    "can't be used",
    "too much",
    "too large",
    "not tolerable",
    "intolerable",
    "not allowed",
    "not permitted",
    "forbidden",
    "prohibited",
    "unusable",
    "not usable",
    "useless",
    "would fail",
    "fails",
    "rejected",
    "rejects",
    "cannot accept",
    "can't accept",
    "do not accept",
    "don't accept",
    "does not meet",
    "doesn't meet",
    "must not",
    "may not",
];

/// The quantities of `text` stated as a limit: preceded, within a few words, by one of
/// [`LIMIT_WORDS`], or by one of [`BOUND_WORDS`] in a sentence that goes on to reject it
/// ([`REJECTING_WORDS`]: "area error above 5 % is unacceptable", attack round 17, R17-C6).
pub fn stated_limits(text: &str, units: &[Unit]) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let is_break = |c: &char| matches!(c, ';' | '.' | '!' | '?');
    quantities_at(text, units)
        .into_iter()
        .filter(|(_, start)| {
            // The words since the previous number or the sentence's start, at most 40
            // characters: "at most 5 % error; EPSG:3857 is off by 101.4 %" sets 5, not 101.4.
            let window = &chars[start.saturating_sub(40)..*start];
            let from = window
                .iter()
                .rposition(|c| c.is_ascii_digit() || matches!(c, ';' | '.' | ':' | '!' | '?'))
                .map_or(0, |i| i + 1);
            let before: String = window[from..].iter().collect::<String>().to_lowercase();
            if LIMIT_WORDS.iter().any(|w| before.contains(w)) {
                return true;
            }
            // The rest of the figure's sentence (a decimal point is no end of sentence).
            let mut end = *start;
            while end < chars.len() {
                let c = &chars[end];
                let decimal = *c == '.'
                    && chars.get(end + 1).is_some_and(char::is_ascii_digit)
                    && end > 0
                    && chars[end - 1].is_ascii_digit();
                if is_break(c) && !decimal {
                    break;
                }
                end += 1;
            }
            let after: String = chars[*start..end].iter().collect::<String>().to_lowercase();
            // The figure's own words right after it ("5 % at the most"): past its number
            // and unit, at most 24 characters.
            let tail: String = after
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ',')
                .trim_start()
                .chars()
                .skip_while(|c| !c.is_whitespace())
                .take(24)
                .collect::<String>();
            if LIMIT_AFTER_WORDS
                .iter()
                .any(|w| tail.trim_start().starts_with(w))
            {
                return true;
            }
            // The whole sentence, for a need ("... must stay below 5 %").
            let opened = (0..*start)
                .rev()
                .find(|&i| {
                    let decimal = chars[i] == '.'
                        && i > 0
                        && chars[i - 1].is_ascii_digit()
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit);
                    is_break(&chars[i]) && !decimal
                })
                .map_or(0, |i| i + 1);
            let sentence: String = chars[opened..end].iter().collect::<String>().to_lowercase();
            let needed = NEED_WORDS.iter().any(|w| holds_phrase(&sentence, w));
            if needed && UNDER_WORDS.iter().any(|w| holds_phrase(&before, w)) {
                return true;
            }
            BOUND_WORDS.iter().any(|w| before.contains(w))
                && REJECTING_WORDS.iter().any(|w| after.contains(w))
        })
        .map(|(v, _)| v)
        .collect()
}

/// Whether `text` holds `phrase` as whole words (`under` is not in `understood`; `<` is a
/// word of its own).
fn holds_phrase(text: &str, phrase: &str) -> bool {
    let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    text.match_indices(phrase).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + phrase.len()..].chars().next();
        let symbol = !phrase.starts_with(char::is_alphanumeric);
        symbol || (edge(before) && edge(after))
    })
}

/// [`quantities`] with the character index each number starts at.
fn quantities_at(text: &str, units: &[Unit]) -> Vec<(f64, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let number = read_number(&chars, &mut i);
        if start > 0 && chars[start - 1].is_ascii_alphabetic() {
            // Part of a word (`EPSG4326`, `D8`), not a quantity.
            continue;
        }
        let Ok(value) = number.parse::<f64>() else {
            continue;
        };
        let rest: String = chars[i..]
            .iter()
            .take(24)
            .collect::<String>()
            .to_lowercase();
        let rest = rest.trim_start();
        for unit in units {
            if let Some(factor) = unit_factor(*unit, rest) {
                found.push((value * factor, start));
                break;
            }
        }
    }
    found
}

/// The factor to the unit's measure when `rest` (the text after a number) starts with a
/// spelling of `unit`.
fn unit_factor(unit: Unit, rest: &str) -> Option<f64> {
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphabetic() || *c == '²' || *c == '°' || *c == '%')
        .collect();
    let after_word = &rest[word.len()..];
    let squared = after_word.starts_with('2') || after_word.starts_with('²');
    match unit {
        Unit::Percent => (rest.starts_with('%')
            || word == "percent"
            || word == "pct"
            || rest.starts_with("per cent"))
        .then_some(1.0),
        Unit::Degrees => (rest.starts_with('°')
            || matches!(word.as_str(), "deg" | "degree" | "degrees"))
        .then_some(1.0),
        Unit::Metres => {
            if squared || word.ends_with('²') {
                return None;
            }
            match word.as_str() {
                "m" | "metre" | "metres" | "meter" | "meters" => Some(1.0),
                "cm" | "centimetre" | "centimetres" | "centimeter" | "centimeters" => Some(0.01),
                "mm" | "millimetre" | "millimetres" | "millimeter" | "millimeters" => Some(0.001),
                "km" | "kilometre" | "kilometres" | "kilometer" | "kilometers" => Some(1000.0),
                "ft" | "foot" | "feet" => Some(0.3048),
                _ => None,
            }
        }
        Unit::SquareMetres => {
            if rest.starts_with("square metre")
                || rest.starts_with("square meter")
                || rest.starts_with("sq m")
            {
                return Some(1.0);
            }
            if rest.starts_with("square kilomet") || rest.starts_with("sq km") {
                return Some(1e6);
            }
            match word.as_str() {
                "m²" => Some(1.0),
                "km²" => Some(1e6),
                "m" if squared => Some(1.0),
                "km" if squared => Some(1e6),
                "ha" | "hectare" | "hectares" => Some(1e4),
                _ => None,
            }
        }
        Unit::Cells => {
            matches!(word.as_str(), "cell" | "cells" | "pixel" | "pixels").then_some(1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence;
    use serde_json::json;

    const BOILERPLATE: &str = "I have reviewed the findings and accept the risk for this analysis.";

    fn item(id: &str, alternative: Option<Value>) -> EvidenceItem {
        evidence(
            id,
            "ballpark operation X: datum shift ignored, error unknown, typically up to ~100 m",
            "every coordinate may be off by the ignored datum shift",
            alternative,
        )
    }

    fn with(evidence: Value, alternatives: Value, tradeoffs: &str) -> Value {
        json!({"intent": "i", "alternatives": alternatives,
               "choice": {"method": "m", "rationale": "r", "tradeoffs": tradeoffs},
               "confidence": "low", "evidence": evidence})
    }

    #[test]
    fn quantities_read_numbers_with_units() {
        assert_eq!(quantities("we accept 100 m", &[Unit::Metres]), [100.0]);
        assert_eq!(
            quantities("~150m, or 1.5 km", &[Unit::Metres]),
            [150.0, 1500.0]
        );
        assert_eq!(quantities("2,000 metres", &[Unit::Metres]), [2000.0]);
        assert_eq!(
            quantities("12,5 percent and 3 %", &[Unit::Percent]),
            [12.5, 3.0]
        );
        assert_eq!(
            quantities("2 ha or 300 m²", &[Unit::SquareMetres]),
            [20000.0, 300.0]
        );
        assert!(quantities("300 m²", &[Unit::Metres]).is_empty());
        assert_eq!(quantities("20°, 5 degrees", &[Unit::Degrees]), [20.0, 5.0]);
        assert!(quantities("EPSG4326 m", &[Unit::Metres]).is_empty());
        assert_eq!(
            quantities("500 cells", &[Unit::Cells, Unit::SquareMetres]),
            [500.0]
        );
    }

    /// R16-C10: limits are the figures a justification sets ("at most", "within", "up to"),
    /// not every figure it quotes.
    #[test]
    fn stated_limits_are_the_figures_set_as_limits() {
        let text = "Our statistics tolerate at most 5 % error; EPSG:3857 is off by 101.4 %";
        assert_eq!(quantities(text, &[Unit::Percent]), [5.0, 101.4]);
        assert_eq!(stated_limits(text, &[Unit::Percent]), [5.0]);
        assert_eq!(
            stated_limits("we accept up to 150 % for areas", &[Unit::Percent]),
            [150.0]
        );
        assert!(stated_limits("areas are off by 101.4 %", &[Unit::Percent]).is_empty());
        // R17-C6: a bound the sentence rejects is a limit; a figure merely above is not.
        assert_eq!(
            stated_limits(
                "Area error above 5 % is unacceptable for our hectare totals; Mercator's 100 to \
                 200 % inflation rules it out.",
                &[Unit::Percent]
            ),
            [5.0]
        );
        assert!(
            stated_limits("errors above 5 % appear near the poles", &[Unit::Percent]).is_empty()
        );
    }

    /// Attack round 18, R18-C3: a limit written "below", "under", "less than", "<", as a
    /// budget, "at the most" after the figure, or a bound that is "not allowed"; the twins
    /// describe an alternative or the data, and set no limit.
    #[test]
    fn r18_c3_limits_in_other_words_are_limits() {
        for text in [
            "Parcel areas must stay below 5 %; Mercator inflates them by 150 % here.",
            "Parcel areas must be under 5 % off for the tax roll.",
            "The tax roll needs area error less than 5 % per parcel.",
            "Area error < 5 % is required by the assessor.",
            "Our error budget for parcel areas is 5 %.",
            "Parcel areas may be off by 5 % at the most.",
            "Area error above 5 % is not allowed for the roll.",
            "We need errors of 0.5 % or less in the 1.5 m band; that is 5 % at most.",
        ] {
            let limits = stated_limits(text, &[Unit::Percent]);
            assert!(
                limits.contains(&5.0) || limits.contains(&0.5),
                "{text}: {limits:?}"
            );
        }
        for text in [
            "EPSG:3035 keeps area error below 0.1 % across the country.",
            "Under 150 % of the parcels are affected.",
            "The error is less than 0.1 % near the equator, we understood 4 %.",
            "Mercator inflates parcel areas by 150 % here.",
        ] {
            assert!(
                stated_limits(text, &[Unit::Percent]).is_empty(),
                "{text}: {:?}",
                stated_limits(text, &[Unit::Percent])
            );
        }
    }

    #[test]
    fn crs_ids_are_read_in_every_spelling() {
        assert_eq!(crs_ids("EPSG:3035 (LAEA Europe)"), ["epsg3035"]);
        assert_eq!(
            crs_ids("epsg 32634 or ESRI:102013"),
            ["epsg32634", "esri102013"]
        );
        assert!(crs_ids("UTM zone 34").is_empty());
    }

    /// The hurried agent's answer: one acknowledging sentence for every evidence id.
    #[test]
    fn boilerplate_is_refused_by_the_generic_checks() {
        let items = [item("a", None), item("b", None)];
        let just = with(json!({"a": BOILERPLATE, "b": BOILERPLATE}), json!([]), "t");
        let errors = check_answers(&items, &just, &[]);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].message.contains("same answer"), "{errors:?}");
        // Alone, it only acknowledges.
        let just = with(json!({"a": BOILERPLATE}), json!([]), "t");
        let errors = check_answers(&items, &just, &[]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].message.contains("only acknowledges"),
            "{errors:?}"
        );
        // Restating the fact is no answer either.
        let just = with(
            json!({"a": "datum shift ignored, error unknown, up to ~100 m"}),
            json!([]),
            "t",
        );
        assert_eq!(check_answers(&items, &just, &[]).len(), 1);
        // A real answer passes.
        let just = with(
            json!({"a": "we accept 150 m: the output feeds a 1 km grid of national statistics"}),
            json!([]),
            "t",
        );
        assert!(check_answers(&items, &just, &[]).is_empty());
    }

    #[test]
    fn tolerances_must_reach_the_measured_error() {
        let items = [item("a", None)];
        let needs = [Finding::new(
            "a",
            vec![tolerance(Unit::Percent, Some(12.0), "area error")],
        )];
        let answer = |text: &str| with(json!({"a": text}), json!([]), "t");
        let low = check_answers(
            &items,
            &answer("we accept up to 5 % for a regional screening"),
            &needs,
        );
        assert_eq!(low.len(), 1, "{low:?}");
        assert!(
            (low[0].message.contains("at most 5 %") || low[0].message.contains("a limit of 5 %"))
                && low[0].message.contains("12 %"),
            "{low:?}"
        );
        assert!(check_answers(
            &items,
            &answer("we accept up to 15 % for a regional screening"),
            &needs
        )
        .is_empty());
        let none = check_answers(
            &items,
            &answer("regional screening only, compared by rank"),
            &needs,
        );
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].path, "/evidence/a");
        // Missing altogether: one error saying what to write, plus the unmet need.
        let missing = check_answers(&items, &with(json!({}), json!([]), "t"), &needs);
        assert!(missing[0].message.starts_with("missing"), "{missing:?}");
    }

    #[test]
    fn offered_alternatives_must_be_rejected_with_a_reason() {
        let items = [item("a", Some(json!({"resampling": "mode"})))];
        let needs = [Finding::new("a", vec![Need::RejectsOffered])];
        let answer = "class codes 1-3 are ordered intensities, so a blend of 1 and 3 is a 2";
        let without = with(
            json!({"a": answer}),
            json!([{"method": "other", "why_not": "x"}]),
            "t",
        );
        let errors = check_answers(&items, &without, &needs);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/alternatives");
        assert!(
            errors[0].message.contains(r#"{"resampling":"mode"}"#),
            "{errors:?}"
        );
        let bare = with(
            json!({"a": answer}),
            json!([{"method": "mode", "why_not": BOILERPLATE}]),
            "t",
        );
        assert!(check_answers(&items, &bare, &needs)[0]
            .message
            .contains("no reason"));
        let careful = with(
            json!({"a": answer}),
            json!([{"method": "mode resampling", "why_not": "the majority class drops the intermediate intensities the model needs"}]),
            "t",
        );
        assert!(check_answers(&items, &careful, &needs).is_empty());
    }

    /// format_selection's needs, folded into the SDK (issue 18): a loss bounded by a number in
    /// data units (no smaller than LERC's `max_z_error`), and a CRS named.
    #[test]
    fn losses_are_bounded_by_a_number_and_crs_findings_name_a_crs() {
        let items = [item("a", None)];
        let answer = |text: &str| with(json!({"a": text}), json!([]), "t");
        let bounded = [Finding::new(
            "a",
            vec![Need::Number {
                at_least: Some(0.5),
                of_what: "error".into(),
            }],
        )];
        let small = check_answers(
            &items,
            &answer("heights within 0.1 are enough for the flood screening"),
            &bounded,
        );
        assert_eq!(small.len(), 1, "{small:?}");
        assert!(
            small[0].message.contains("no smaller than 0.5"),
            "{small:?}"
        );
        assert!(check_answers(
            &items,
            &answer("heights within 0.5 stay below the DEM's noise for the flood screening"),
            &bounded
        )
        .is_empty());
        let any = [Finding::new(
            "a",
            vec![Need::Number {
                at_least: None,
                of_what: "error".into(),
            }],
        )];
        let none = check_answers(&items, &answer("grey levels blur in the preview map"), &any);
        assert!(none[0].message.contains("as a number"), "{none:?}");
        assert!(
            check_answers(&items, &answer("quality 90 suits the preview map"), &any).is_empty()
        );
        let crs = [Finding::new("a", vec![Need::NamesCrs])];
        for named in [
            "readers assume EPSG:4326 per the delivery note",
            "readers assume 4326, per the delivery note",
            "readers assume WGS 84 longitude and latitude",
            "readers assume OGC CRS84, per the delivery note",
        ] {
            assert!(
                check_answers(&items, &answer(named), &crs).is_empty(),
                "{named}"
            );
        }
        let unnamed = check_answers(&items, &answer("readers assume geographic degrees"), &crs);
        assert!(unnamed[0].message.contains("EPSG:4326"), "{unnamed:?}");
        assert_eq!(numbers("0.5 m, 2,5 and 1,000 cells"), [0.5, 2.5, 1000.0]);
    }

    #[test]
    fn alternatives_are_named_by_their_id() {
        let items = [item("a", None)];
        let needs = [Finding::new(
            "a",
            vec![alternative_named(
                &["nearest", "bilinear", "cubic"],
                &["bilinear"],
                "the method considered",
            )],
        )];
        let answer =
            json!({"a": "smooth heights matter more than keeping each cell's exact value"});
        let named = |method: &str| {
            with(
                answer.clone(),
                json!([{"method": method, "why_not": "cubic overshoots next to cliffs by up to 2 m"}]),
                "t",
            )
        };
        assert!(check_answers(&items, &named("cubic convolution"), &needs).is_empty());
        assert_eq!(check_answers(&items, &named("bilinear"), &needs).len(), 1);
        let crs = [Finding::new(
            "a",
            vec![Need::AlternativeCrs {
                except: vec!["EPSG:32633".into()],
            }],
        )];
        assert!(check_answers(&items, &named("EPSG:3035 (LAEA Europe)"), &crs).is_empty());
        assert_eq!(check_answers(&items, &named("epsg 32633"), &crs).len(), 1);
    }
}
