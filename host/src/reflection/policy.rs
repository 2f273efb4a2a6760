//! The operator's policy (`--policy FILE`, TOML): rules, owned by the person who runs the
//! server, that decide what a domain's finding leads to. (Not `gdal::policy`, which is what
//! GDAL may touch.)
//!
//! A rule matches a domain's finding on the tool, the domain, the domain's severity, an
//! evidence id and typed facts with numbers ([`FACTS`]); its `outcome` is one of, from least to
//! most strict, `proceed`, `warn`, `justify` (what the domains ask for today), `human` (a
//! person signs the exact call off) and `refuse`. A domain's finding has an outcome of its own
//! (advisory: `warn`; required and critical: `justify`); the strictest matching rule decides.
//! A rule may make a decision stricter; it makes one less strict only when the domain marked
//! every finding of the trigger relaxable (WIT 0.7 `evidence-item.relaxable`), and otherwise is
//! shown in the explanation and has no effect. A rule with `confidence_below = X` (a floor)
//! matches a finding whose domain is less sure of it than `X`, or does not say
//! (`trigger.confidence`, unknown for components built before 0.7), and escalates it to
//! `human` or `refuse`. A host refusal comes before the gate and never reaches a rule; no
//! argument of a tool call is read by it.
//!
//! The file is read once at start. Anything it cannot use (a TOML error, an unknown key, tool,
//! domain, severity, evidence id, fact or outcome, a condition of the wrong type) stops the
//! server with the line and the reason: the policy never fails open. Its digest
//! (`sha256:` of the file's bytes) is written into every receipt, capsule and ledger line it
//! decided.

use crate::domains::{CallFacts, Severity, Trigger};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A policy file larger than this is refused (a policy is a page of rules).
pub const MAX_BYTES: u64 = 256 << 10;

/// What a decision leads to, from least to most strict.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Runs, with a `proceed` receipt and no justification.
    Proceed,
    /// Runs, with a `warn` receipt and no justification.
    Warn,
    /// Needs a justification (stored as a capsule): the domains' own rule for required and
    /// critical findings.
    Justify,
    /// Needs a person's sign-off of the exact call.
    Human,
    /// Refused; no justification or sign-off can pass it.
    Refuse,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Proceed => "proceed",
            Outcome::Warn => "warn",
            Outcome::Justify => "justify",
            Outcome::Human => "human",
            Outcome::Refuse => "refuse",
        }
    }

    /// A domain's own outcome for a finding of `severity`.
    pub fn of_severity(severity: Severity) -> Self {
        match severity {
            Severity::Advisory => Outcome::Warn,
            Severity::Required | Severity::Critical => Outcome::Justify,
        }
    }
}

/// The kind of a fact's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactKind {
    Number,
    Flag,
}

/// The facts a rule can test, their kind and what they mean (taken from what the host
/// gathered for the domains, never from the agent's words).
pub const FACTS: &[(&str, FactKind, &str)] = &[
    (
        "accuracy_m",
        FactKind::Number,
        "the published accuracy, in metres, of the coordinate operation the call runs (absent \
         when the call changes no CRS or the accuracy is unknown)",
    ),
    (
        "ballpark",
        FactKind::Flag,
        "the coordinate operation the call runs is a ballpark one (no datum shift, error \
         unknown)",
    ),
    (
        "planar_scale_error_pct",
        FactKind::Number,
        "the largest planar scale error over the data, in per cent (of an area or a length, \
         whichever is larger), for measuring calls and reprojections to a projected CRS",
    ),
    (
        "cells",
        FactKind::Number,
        "the cells of the call's input rasters, summed",
    ),
    (
        "categorical_input",
        FactKind::Flag,
        "an input raster looks categorical (a palette, an attribute table or few integer \
         classes)",
    ),
    (
        "upstream_interpolation",
        FactKind::Flag,
        "a step upstream of an input (its lineage) computed new cell values by resampling",
    ),
];

/// The evidence ids each built-in domain declares (`domain_tables` checks this list against
/// the domains' sources, so it cannot drift). A domain loaded from `--plugins` declares none
/// the host can check, so a rule cannot name its evidence.
pub const BUILTIN_EVIDENCE: &[(&str, &[&str])] = &[
    (
        "crs_datum",
        &[
            "crs_change",
            "source_crs_missing",
            "source_crs_assigned",
            "source_crs_overridden",
            "source_crs_unidentified",
            "crs_missing",
            "ballpark_operation",
            "missing_grids",
            "better_operation_used",
            "outside_area_of_use",
            "unknown_accuracy",
            "geographic_target",
            "geographic_dem_unscaled",
            "geographic_dem_scaled",
            "geographic_dem_aspect",
            "unit_mismatch",
            "dem_crs_missing",
            "target_distortion",
        ],
    ),
    (
        "resampling",
        &[
            "continuous_input",
            "categorical_input",
            "class_preserving_method",
        ],
    ),
    (
        "hydrology",
        &[
            "geographic_dem",
            "depression_handling",
            "routing_method",
            "stream_threshold",
            "pour_points",
            "flat_fraction",
            "undeclared_sentinels",
            "upstream_interpolation",
        ],
    ),
    (
        "aggregation",
        &[
            "zonal_method",
            "composite_method",
            "aggregate_method",
            "categorical_mean",
            "all_touched_sum",
            "coverage_without_area",
            "block_sum_saturates",
            "upstream_interpolated_classes",
        ],
    ),
    (
        "measurement",
        &[
            "planar_distortion",
            "invalid_geometries",
            "geometries_repaired",
            "overlapping_features",
            "non_metre_unit",
            "distance_unit_conversion",
            "mixed_geometries",
        ],
    ),
    (
        "format_selection",
        &[
            "lossy_encoding",
            "second_lossy_encoding",
            "scaled_output_type",
            "rescaled_values",
            "narrowing_output_type",
            "unsupported_data_type",
            "codec_data_type",
            "lossy_near_nodata",
            "lossy_categorical",
            "unsupported_band_count",
            "codec_band_count",
            "nodata_lost",
            "per_band_nodata",
            "scale_offset_lost",
            "nodata_with_alpha",
            "too_many_layers",
            "mixed_geometries",
            "curves_linearised",
            "csv_geometry_dropped",
            "csv_points_only",
            "schema_lost",
            "driver_converts",
            "driver_reprojects",
            "crs_missing",
            "crs_not_kept",
            "non_standard_crs",
            "lossless_write",
            "cog_without_overviews",
            "palette_dropped",
            "unknown_driver",
            "predictor",
            "shapefile_limits",
        ],
    ),
];

/// What a policy may name: the server's tools and its loaded domains, with the evidence ids
/// each declares (`None`: a domain whose ids the host cannot know).
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    pub tools: Vec<String>,
    pub domains: Vec<(String, Option<Vec<String>>)>,
}

impl Vocabulary {
    /// The vocabulary of these tools and loaded domains (`builtin`: whether the domain is the
    /// embedded one, whose evidence ids [`BUILTIN_EVIDENCE`] lists).
    pub fn new<'a>(
        tools: impl IntoIterator<Item = &'a str>,
        domains: impl IntoIterator<Item = (&'a str, bool)>,
    ) -> Self {
        Self {
            tools: tools.into_iter().map(str::to_string).collect(),
            domains: domains
                .into_iter()
                .map(|(id, builtin)| {
                    let ids = builtin
                        .then(|| {
                            BUILTIN_EVIDENCE
                                .iter()
                                .find(|(d, _)| *d == id)
                                .map(|(_, ids)| ids.iter().map(|s| s.to_string()).collect())
                        })
                        .flatten();
                    (id.to_string(), ids)
                })
                .collect(),
        }
    }
}

/// Why a policy file cannot be used. The server does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("policy {path}: {message}")]
    File { path: String, message: String },
    #[error("policy {path} line {line}: {message}")]
    At {
        path: String,
        line: usize,
        message: String,
    },
}

/// A numeric condition: every bound given must hold.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Bounds {
    above: Option<f64>,
    at_least: Option<f64>,
    below: Option<f64>,
    at_most: Option<f64>,
}

impl Bounds {
    fn holds(&self, x: f64) -> bool {
        self.above.is_none_or(|b| x > b)
            && self.at_least.is_none_or(|b| x >= b)
            && self.below.is_none_or(|b| x < b)
            && self.at_most.is_none_or(|b| x <= b)
    }

    fn words(&self) -> String {
        let mut parts = Vec::new();
        if let Some(b) = self.above {
            parts.push(format!("> {b}"));
        }
        if let Some(b) = self.at_least {
            parts.push(format!(">= {b}"));
        }
        if let Some(b) = self.below {
            parts.push(format!("< {b}"));
        }
        if let Some(b) = self.at_most {
            parts.push(format!("<= {b}"));
        }
        parts.join(" and ")
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Condition {
    Number(Bounds),
    Flag(bool),
}

/// A list or a single string, as the file may write it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: Option<String>,
    tool: Option<Spanned<OneOrMany>>,
    domain: Option<Spanned<OneOrMany>>,
    severity: Option<Spanned<OneOrMany>>,
    evidence: Option<Spanned<OneOrMany>>,
    #[serde(default)]
    facts: BTreeMap<String, Spanned<toml::Value>>,
    /// A confidence floor: matches a finding whose domain's confidence is below it or unknown.
    confidence_below: Option<Spanned<toml::Value>>,
    outcome: Spanned<String>,
    /// For `human`: an approval covers the decision (like a capsule), not one call.
    #[serde(default)]
    covers_decision: bool,
    /// Why the operator wrote the rule; shown in explanations and refusals.
    reason: Option<String>,
}

/// One rule of the policy.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule's `id`, else `rule N` (1-based, in file order).
    pub name: String,
    /// The line of its `[[rule]]`.
    pub line: usize,
    tools: Vec<String>,
    domains: Vec<String>,
    severities: Vec<Severity>,
    evidence: Vec<String>,
    facts: Vec<(String, Condition)>,
    /// `confidence_below`: the rule matches a finding less sure than this, or of unknown
    /// confidence.
    floor: Option<f64>,
    pub outcome: Outcome,
    pub covers_decision: bool,
    reason: Option<String>,
}

/// A loaded policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `sha256:` of the file's bytes.
    pub digest: String,
    pub path: PathBuf,
    pub rules: Vec<Rule>,
}

/// The facts of one call, as rules test them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Facts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy_m: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ballpark: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planar_scale_error_pct: Option<f64>,
    /// `None` on a call that reads no raster: a fact the call does not have matches no
    /// condition (attack round 10, R10-5: the empty sum, -0.0, matched `at_most` on every
    /// vector call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cells: Option<f64>,
    pub categorical_input: bool,
    pub upstream_interpolation: bool,
}

/// Resampling methods that copy or select an input cell's value (the SDK's list). Lineage
/// records carry GDAL's names, so nearest neighbour is `near` there (attack round 8, R8-2: a
/// nearest resampling counted as interpolation and the operator's rule on it refused).
const VALUE_KEEPING: &[&str] = &["nearest", "near", "mode", "min", "max", "med", "q1", "q3"];

impl Facts {
    /// The facts the host gathered for the domains, as numbers and flags.
    pub fn of(call: &CallFacts) -> Self {
        let used = call.transformation.as_ref().map(|t| &t.used);
        let planar = call.measurement.as_ref().and_then(|m| {
            match (m.area_scale_error, m.length_scale_error) {
                (Some(a), Some(l)) => Some(a.max(l)),
                (a, l) => a.or(l),
            }
            .filter(|_| m.method != "geodesic")
        });
        Self {
            accuracy_m: used.and_then(|u| u.accuracy_metres),
            ballpark: used.map(|u| u.ballpark),
            planar_scale_error_pct: planar.map(|e| e * 100.0),
            cells: call
                .datasets
                .iter()
                .filter_map(|d| d.raster.as_ref())
                .map(|r| f64::from(r.width) * f64::from(r.height))
                .reduce(|a, b| a + b),
            categorical_input: call
                .datasets
                .iter()
                .filter_map(|d| d.raster.as_ref())
                .any(|r| r.looks_categorical),
            upstream_interpolation: call.upstream.iter().any(|l| {
                l.steps.iter().any(|s| {
                    s.resampling.as_deref().is_some_and(|m| {
                        !VALUE_KEEPING.contains(&m.trim().to_ascii_lowercase().as_str())
                    })
                })
            }),
        }
    }

    fn number(&self, name: &str) -> Option<f64> {
        match name {
            "accuracy_m" => self.accuracy_m,
            "planar_scale_error_pct" => self.planar_scale_error_pct,
            "cells" => self.cells,
            _ => None,
        }
    }

    fn flag(&self, name: &str) -> Option<bool> {
        match name {
            "ballpark" => self.ballpark,
            "categorical_input" => Some(self.categorical_input),
            "upstream_interpolation" => Some(self.upstream_interpolation),
            _ => None,
        }
    }
}

/// What the policy says of one domain's finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Ruling {
    /// The outcome in force.
    pub outcome: Outcome,
    /// The domain's own outcome for the finding.
    pub domain_outcome: Outcome,
    /// The rule that decided (the strictest that matched), if any matched.
    pub rule: Option<String>,
    /// For `human`: the approval covers the decision, not one call.
    pub covers_decision: bool,
    /// Which rules matched and why the outcome is what it is, in words.
    pub explanation: String,
}

/// The policy's part in a receipt, a refusal or a ledger line.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PolicyNote {
    /// `sha256:` of the policy file.
    pub digest: String,
    /// The rule that decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub outcome: Outcome,
    /// Which rules matched and why the outcome is what it is.
    pub explanation: String,
    /// For `human`: who signed the call off, as which sign-off, and their note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset.min(text.len()))
        .map_or(1, |before| before.matches('\n').count() + 1)
}

fn severity_named(name: &str) -> Option<Severity> {
    match name {
        "advisory" => Some(Severity::Advisory),
        "required" => Some(Severity::Required),
        "critical" => Some(Severity::Critical),
        _ => None,
    }
}

fn severity_word(severity: Severity) -> &'static str {
    match severity {
        Severity::Advisory => "advisory",
        Severity::Required => "required",
        Severity::Critical => "critical",
    }
}

/// `confidence 0.5`, or `confidence unknown` when the domain does not say.
fn confidence_words(confidence: Option<f64>) -> String {
    confidence.map_or_else(
        || "confidence unknown".to_string(),
        |c| format!("confidence {c}"),
    )
}

fn outcome_named(name: &str) -> Option<Outcome> {
    match name {
        "proceed" => Some(Outcome::Proceed),
        "warn" => Some(Outcome::Warn),
        "justify" => Some(Outcome::Justify),
        "human" => Some(Outcome::Human),
        "refuse" => Some(Outcome::Refuse),
        _ => None,
    }
}

/// Whether `path` (resolved) lies inside `root` (resolved when it exists).
fn inside(path: &Path, root: &Path) -> bool {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    path.starts_with(&root)
}

impl Policy {
    /// Read the policy at `path`, which must lie outside every folder of `forbidden` (the
    /// workspaces and the store), as given and once links are resolved.
    pub fn load(
        path: &Path,
        forbidden: &[PathBuf],
        vocabulary: &Vocabulary,
    ) -> Result<Self, PolicyError> {
        let shown = path.display().to_string();
        let file_error = |message: String| PolicyError::File {
            path: shown.clone(),
            message,
        };
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| file_error(format!("cannot resolve the path: {e}")))?
                .join(path)
        };
        let resolved = absolute
            .canonicalize()
            .map_err(|e| file_error(format!("cannot read it: {e}")))?;
        // The link itself (its folder resolved) and what it points to.
        let as_given = absolute
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .zip(absolute.file_name())
            .map(|(p, n)| p.join(n));
        for root in forbidden {
            for candidate in [Some(&resolved), as_given.as_ref()].into_iter().flatten() {
                if inside(candidate, root) {
                    return Err(file_error(format!(
                        "lies inside {} (a workspace or the store): a tool call could write \
                         it; keep the policy outside every workspace and the store",
                        root.display()
                    )));
                }
            }
        }
        let meta =
            std::fs::metadata(&resolved).map_err(|e| file_error(format!("cannot read it: {e}")))?;
        if !meta.is_file() {
            return Err(file_error("is not a regular file".to_string()));
        }
        if meta.len() > MAX_BYTES {
            return Err(file_error(format!(
                "is {} bytes; a policy is at most {MAX_BYTES}",
                meta.len()
            )));
        }
        let bytes =
            std::fs::read(&resolved).map_err(|e| file_error(format!("cannot read it: {e}")))?;
        let text =
            String::from_utf8(bytes).map_err(|_| file_error("is not UTF-8 text".to_string()))?;
        Self::parse(&text, &shown, vocabulary).map(|mut p| {
            p.path = resolved;
            p
        })
    }

    /// Parse and check a policy's text (`path` names it in errors).
    pub fn parse(text: &str, path: &str, vocabulary: &Vocabulary) -> Result<Self, PolicyError> {
        let at = |offset: usize, message: String| PolicyError::At {
            path: path.to_string(),
            line: line_of(text, offset),
            message,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            at(offset, e.message().trim().to_string())
        })?;
        let mut rules = Vec::new();
        for (index, spanned) in raw.rule.into_iter().enumerate() {
            let start = spanned.span().start;
            let rule = spanned.into_inner();
            let name = rule
                .id
                .clone()
                .unwrap_or_else(|| format!("rule {}", index + 1));
            let list = |field: Option<Spanned<OneOrMany>>| {
                field.map(|s| {
                    let offset = s.span().start;
                    (offset, s.into_inner().into_vec())
                })
            };
            let mut tools = Vec::new();
            if let Some((offset, names)) = list(rule.tool) {
                for tool in names {
                    if !vocabulary.tools.contains(&tool) {
                        return Err(at(
                            offset,
                            format!(
                                "{name}: unknown tool \"{tool}\"; the tools are {}",
                                vocabulary.tools.join(", ")
                            ),
                        ));
                    }
                    tools.push(tool);
                }
            }
            let mut domains = Vec::new();
            if let Some((offset, names)) = list(rule.domain) {
                for domain in names {
                    if !vocabulary.domains.iter().any(|(d, _)| *d == domain) {
                        return Err(at(
                            offset,
                            format!(
                                "{name}: unknown domain \"{domain}\"; the loaded domains are {}",
                                vocabulary
                                    .domains
                                    .iter()
                                    .map(|(d, _)| d.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    }
                    domains.push(domain);
                }
            }
            let mut severities = Vec::new();
            if let Some((offset, names)) = list(rule.severity) {
                for word in names {
                    let severity = severity_named(&word).ok_or_else(|| {
                        at(
                            offset,
                            format!(
                                "{name}: unknown severity \"{word}\"; one of advisory, \
                                 required, critical"
                            ),
                        )
                    })?;
                    severities.push(severity);
                }
            }
            let mut evidence = Vec::new();
            if let Some((offset, ids)) = list(rule.evidence) {
                // The domains the rule names, else every loaded one.
                let scope: Vec<&(String, Option<Vec<String>>)> = vocabulary
                    .domains
                    .iter()
                    .filter(|(d, _)| domains.is_empty() || domains.contains(d))
                    .collect();
                for id in ids {
                    let declared = scope
                        .iter()
                        .any(|(_, ids)| ids.as_ref().is_some_and(|ids| ids.contains(&id)));
                    if !declared {
                        let unknowable: Vec<&str> = scope
                            .iter()
                            .filter(|(_, ids)| ids.is_none())
                            .map(|(d, _)| d.as_str())
                            .collect();
                        let mut message = format!(
                            "{name}: unknown evidence id \"{id}\" for {}",
                            if domains.is_empty() {
                                "any loaded domain".to_string()
                            } else {
                                format!("domain {}", domains.join(", "))
                            }
                        );
                        if !unknowable.is_empty() {
                            message.push_str(&format!(
                                " (the evidence ids of {} are not known to the host: it was \
                                 loaded from --plugins; match it by domain and severity)",
                                unknowable.join(", ")
                            ));
                        }
                        message.push_str("; docs/domains.md lists every finding by id");
                        return Err(at(offset, message));
                    }
                    evidence.push(id);
                }
            }
            let mut facts = Vec::new();
            for (fact, value) in rule.facts {
                let offset = value.span().start;
                let Some((_, kind, _)) = FACTS.iter().find(|(n, _, _)| *n == fact) else {
                    return Err(at(
                        offset,
                        format!(
                            "{name}: unknown fact \"{fact}\"; the facts are {}",
                            FACTS
                                .iter()
                                .map(|(n, _, _)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                };
                let value = value.into_inner();
                let condition = match (kind, value) {
                    (FactKind::Flag, toml::Value::Boolean(b)) => Condition::Flag(b),
                    (FactKind::Number, toml::Value::Table(table)) => {
                        let bounds: Bounds = toml::Value::Table(table).try_into().map_err(
                            |e: toml::de::Error| {
                                at(
                                    offset,
                                    format!(
                                        "{name}: facts.{fact}: {}; write {{ above = N }}, \
                                         {{ at_least = N }}, {{ below = N }} or \
                                         {{ at_most = N }}",
                                        e.message().trim()
                                    ),
                                )
                            },
                        )?;
                        if bounds == Bounds::default() {
                            return Err(at(
                                offset,
                                format!("{name}: facts.{fact}: give at least one bound"),
                            ));
                        }
                        Condition::Number(bounds)
                    }
                    (FactKind::Flag, other) => {
                        return Err(at(
                            offset,
                            format!(
                                "{name}: facts.{fact} is true or false, not {}",
                                other.type_str()
                            ),
                        ))
                    }
                    (FactKind::Number, other) => {
                        return Err(at(
                            offset,
                            format!(
                                "{name}: facts.{fact} is a number: write a bound such as \
                                 {{ above = 2 }}, not a {}",
                                other.type_str()
                            ),
                        ))
                    }
                };
                facts.push((fact, condition));
            }
            let outcome_offset = rule.outcome.span().start;
            let word = rule.outcome.into_inner();
            let outcome = outcome_named(&word).ok_or_else(|| {
                at(
                    outcome_offset,
                    format!(
                        "{name}: unknown outcome \"{word}\"; one of proceed, warn, justify, \
                         human, refuse"
                    ),
                )
            })?;
            let floor = match rule.confidence_below {
                None => None,
                Some(value) => {
                    let offset = value.span().start;
                    let number = match value.into_inner() {
                        toml::Value::Float(x) => x,
                        toml::Value::Integer(i) => i as f64,
                        other => {
                            return Err(at(
                                offset,
                                format!(
                                    "{name}: confidence_below is a number from 0 to 1 (e.g. \
                                     0.8), not a {}",
                                    other.type_str()
                                ),
                            ))
                        }
                    };
                    if !(number > 0.0 && number <= 1.0) {
                        return Err(at(
                            offset,
                            format!(
                                "{name}: confidence_below = {number} is out of range: a \
                                 domain's confidence runs from 0 to 1, so a floor is above 0 \
                                 and at most 1"
                            ),
                        ));
                    }
                    if !matches!(outcome, Outcome::Human | Outcome::Refuse) {
                        return Err(at(
                            outcome_offset,
                            format!(
                                "{name}: a confidence floor escalates: its outcome is human or \
                                 refuse, not {}",
                                outcome.name()
                            ),
                        ));
                    }
                    Some(number)
                }
            };
            if rule.covers_decision && outcome != Outcome::Human {
                return Err(at(
                    start,
                    format!("{name}: covers_decision applies to the outcome human only"),
                ));
            }
            rules.push(Rule {
                name,
                line: line_of(text, start),
                tools,
                domains,
                severities,
                evidence,
                facts,
                floor,
                outcome,
                covers_decision: rule.covers_decision,
                reason: rule.reason,
            });
        }
        Ok(Self {
            digest: format!("sha256:{}", super::key::sha256_hex(text)),
            path: PathBuf::from(path),
            rules,
        })
    }

    /// What the policy says of `domain`'s finding `trigger` in a call of `tool` whose facts
    /// are `facts`. Only the policy file and the host's facts are read: no argument of the
    /// call, no justification.
    pub fn rule_on(&self, tool: &str, domain: &str, trigger: &Trigger, facts: &Facts) -> Ruling {
        let domain_outcome = Outcome::of_severity(trigger.severity);
        let matched: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.matches(tool, domain, trigger, facts))
            .collect();
        // The strictest matching rule; the first of equals.
        let decider =
            matched
                .iter()
                .copied()
                .reduce(|best, r| if r.outcome > best.outcome { r } else { best });
        let mut words = Vec::new();
        words.push(format!(
            "{domain} found {} ({}, {}), which the domain asks to {}",
            trigger
                .evidence
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            severity_word(trigger.severity),
            confidence_words(trigger.confidence),
            domain_outcome.name()
        ));
        let Some(decider) = decider else {
            words.push("no rule of the policy matches: the domain's outcome stands".to_string());
            return Ruling {
                outcome: domain_outcome,
                domain_outcome,
                rule: None,
                covers_decision: false,
                explanation: words.join("; "),
            };
        };
        for rule in &matched {
            words.push(format!(
                "{} (line {}) matches{}: {}{}",
                rule.name,
                rule.line,
                rule.conditions_in_words(facts, Some(trigger.confidence)),
                rule.outcome.name(),
                rule.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ));
        }
        let outcome = if decider.outcome >= domain_outcome {
            words.push(format!(
                "the strictest, {}, decides: {}",
                decider.name,
                decider.outcome.name()
            ));
            decider.outcome
        } else if trigger.relaxable() {
            words.push(format!(
                "{domain} marks every finding of it relaxable (a local convention): {} relaxes \
                 the domain's {} to {}",
                decider.name,
                domain_outcome.name(),
                decider.outcome.name()
            ));
            decider.outcome
        } else {
            let strict: Vec<&str> = trigger
                .evidence
                .iter()
                .filter(|e| !e.relaxable)
                .map(|e| e.id.as_str())
                .collect();
            words.push(format!(
                "{} would relax the domain's {} to {}, but {domain} does not mark {} as \
                 relaxable: the domain's outcome stands",
                decider.name,
                domain_outcome.name(),
                decider.outcome.name(),
                strict.join(", ")
            ));
            domain_outcome
        };
        Ruling {
            outcome,
            domain_outcome,
            rule: Some(decider.name.clone()),
            covers_decision: outcome == Outcome::Human && decider.covers_decision,
            explanation: words.join("; "),
        }
    }

    /// The note a receipt carries for `ruling`, when a rule matched.
    pub fn note(&self, ruling: &Ruling) -> Option<PolicyNote> {
        ruling.rule.as_ref().map(|rule| PolicyNote {
            digest: self.digest.clone(),
            rule: Some(rule.clone()),
            outcome: ruling.outcome,
            explanation: ruling.explanation.clone(),
            approval: None,
        })
    }

    /// The rules in words (for `gdal-mcp policy check`).
    pub fn summary(&self) -> Value {
        json!({
            "digest": self.digest,
            "rules": self.rules.iter().map(|r| json!({
                "rule": r.name,
                "line": r.line,
                "matches": r.conditions_in_words(&Facts::default(), None).trim_start_matches(" when ").to_string(),
                "outcome": r.outcome,
                "covers_decision": r.covers_decision,
            })).collect::<Vec<_>>(),
        })
    }
}

impl Rule {
    fn matches(&self, tool: &str, domain: &str, trigger: &Trigger, facts: &Facts) -> bool {
        (self.tools.is_empty() || self.tools.iter().any(|t| t == tool))
            && (self.domains.is_empty() || self.domains.iter().any(|d| d == domain))
            && (self.severities.is_empty() || self.severities.contains(&trigger.severity))
            && (self.evidence.is_empty()
                || trigger
                    .evidence
                    .iter()
                    .any(|e| self.evidence.contains(&e.id)))
            && self.facts.iter().all(|(name, condition)| match condition {
                Condition::Flag(want) => facts.flag(name) == Some(*want),
                Condition::Number(bounds) => facts.number(name).is_some_and(|x| bounds.holds(x)),
            })
            && self
                .floor
                .is_none_or(|floor| trigger.confidence.is_none_or(|c| c < floor))
    }

    /// ` when tool is ..., domain is ..., accuracy_m = 120 (> 100)`; `confidence` is the
    /// finding's (`Some(None)`: unknown), when there is one.
    fn conditions_in_words(&self, facts: &Facts, confidence: Option<Option<f64>>) -> String {
        let mut parts = Vec::new();
        if !self.tools.is_empty() {
            parts.push(format!("tool {}", self.tools.join(" or ")));
        }
        if !self.domains.is_empty() {
            parts.push(format!("domain {}", self.domains.join(" or ")));
        }
        if !self.severities.is_empty() {
            parts.push(format!(
                "severity {}",
                self.severities
                    .iter()
                    .map(|s| severity_word(*s))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        if !self.evidence.is_empty() {
            parts.push(format!("evidence {}", self.evidence.join(" or ")));
        }
        for (name, condition) in &self.facts {
            parts.push(match condition {
                Condition::Flag(want) => match facts.flag(name) {
                    Some(v) if *facts != Facts::default() => format!("{name} = {v}"),
                    _ => format!("{name} = {want}"),
                },
                Condition::Number(bounds) => match facts.number(name) {
                    Some(x) if *facts != Facts::default() => {
                        format!("{name} = {x} ({})", bounds.words())
                    }
                    _ => format!("{name} {}", bounds.words()),
                },
            });
        }
        if let Some(floor) = self.floor {
            parts.push(match confidence {
                Some(Some(c)) => format!("confidence {c} (< {floor})"),
                Some(None) => {
                    format!("confidence unknown (the domain does not say: below {floor})")
                }
                None => format!("confidence below {floor} or unknown"),
            });
        }
        if parts.is_empty() {
            " (every finding)".to_string()
        } else {
            format!(" when {}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domains::EvidenceItem;

    fn vocabulary() -> Vocabulary {
        Vocabulary::new(
            ["raster_reproject", "vector_measure"],
            [("crs_datum", true), ("measurement", true), ("mine", false)],
        )
    }

    fn trigger(severity: Severity, ids: &[&str]) -> Trigger {
        Trigger {
            severity,
            reason: "r".into(),
            key_fields: json!({}),
            prompt_arguments: Vec::new(),
            evidence: ids
                .iter()
                .map(|id| EvidenceItem {
                    id: id.to_string(),
                    fact: "f".into(),
                    why: "w".into(),
                    alternative: None,
                    relaxable: false,
                })
                .collect(),
            confidence: Some(1.0),
        }
    }

    /// `trigger` with the domain's confidence and the ids it marks relaxable.
    fn marked(
        severity: Severity,
        ids: &[&str],
        confidence: Option<f64>,
        relaxable: &[&str],
    ) -> Trigger {
        let mut t = trigger(severity, ids);
        t.confidence = confidence;
        for e in &mut t.evidence {
            e.relaxable = relaxable.contains(&e.id.as_str());
        }
        t
    }

    fn error(text: &str) -> String {
        Policy::parse(text, "p.toml", &vocabulary())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn unknown_names_stop_with_the_line_and_the_reason() {
        for (text, line, needle) in [
            ("[[rule]]\noutcome = \"refuse\"\ndomain = \"crs\"\n", 3, "unknown domain \"crs\""),
            ("[[rule]]\noutcome = \"never\"\n", 2, "unknown outcome \"never\""),
            ("[[rule]]\noutcome = \"warn\"\ntool = \"rm_rf\"\n", 3, "unknown tool"),
            (
                "[[rule]]\noutcome = \"human\"\nseverity = \"fatal\"\n",
                3,
                "unknown severity",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\nevidence = \"ballpark\"\n",
                3,
                "unknown evidence id \"ballpark\"",
            ),
            (
                "\n[[rule]]\noutcome = \"refuse\"\ndomain = \"measurement\"\nevidence = \"ballpark_operation\"\n",
                5,
                "for domain measurement",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\ndomain = \"mine\"\nevidence = \"x\"\n",
                4,
                "loaded from --plugins",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\nfacts = { accuracy = { above = 1 } }\n",
                3,
                "unknown fact \"accuracy\"",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\nfacts = { ballpark = 1 }\n",
                3,
                "true or false",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\nfacts = { accuracy_m = 1 }\n",
                3,
                "a bound such as",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\nfacts = { accuracy_m = { over = 1 } }\n",
                3,
                "unknown field",
            ),
            ("[[rule]]\noutcome = \"refuse\"\ncolour = 1\n", 3, "unknown field"),
            ("[[rule]]\noutcome = \"refuse\"\n[[rule\n", 3, ""),
            ("[[rule]]\ndomain = \"crs_datum\"\n", 1, "missing field `outcome`"),
            (
                "[[rule]]\noutcome = \"refuse\"\ncovers_decision = true\n",
                1,
                "human only",
            ),
        ] {
            let e = error(text);
            assert!(
                e.starts_with(&format!("policy p.toml line {line}: ")) && e.contains(needle),
                "{text:?}: {e}"
            );
        }
    }

    #[test]
    fn the_strictest_matching_rule_decides_and_never_relaxes() {
        let policy = Policy::parse(
            r#"
[[rule]]
id = "people"
domain = "crs_datum"
severity = "critical"
outcome = "human"

[[rule]]
id = "no ballpark"
facts = { ballpark = true }
outcome = "refuse"

[[rule]]
id = "scale"
domain = "measurement"
facts = { planar_scale_error_pct = { above = 2.0 } }
outcome = "justify"

[[rule]]
id = "loose"
domain = "measurement"
outcome = "proceed"
"#,
            "p.toml",
            &vocabulary(),
        )
        .unwrap();
        let critical = trigger(Severity::Critical, &["ballpark_operation"]);
        let ballpark = Facts {
            ballpark: Some(true),
            ..Facts::default()
        };
        let r = policy.rule_on("raster_reproject", "crs_datum", &critical, &ballpark);
        assert_eq!(r.outcome, Outcome::Refuse);
        assert_eq!(r.rule.as_deref(), Some("no ballpark"));
        assert!(
            r.explanation.contains("people (line 2) matches"),
            "{}",
            r.explanation
        );
        // Its clean twin: an exact operation.
        let exact = Facts {
            ballpark: Some(false),
            accuracy_m: Some(1.0),
            ..Facts::default()
        };
        let r = policy.rule_on("raster_reproject", "crs_datum", &critical, &exact);
        assert_eq!(
            (r.outcome, r.rule.as_deref()),
            (Outcome::Human, Some("people"))
        );
        let required = trigger(Severity::Required, &["crs_change"]);
        let r = policy.rule_on("raster_reproject", "crs_datum", &required, &exact);
        assert_eq!((r.outcome, r.rule), (Outcome::Justify, None));
        // A looser rule has no effect: the finding is not relaxable.
        let planar = trigger(Severity::Required, &["planar_distortion"]);
        let three = Facts {
            planar_scale_error_pct: Some(3.0),
            ..Facts::default()
        };
        let r = policy.rule_on("vector_measure", "measurement", &planar, &three);
        assert_eq!(
            (r.outcome, r.rule.as_deref()),
            (Outcome::Justify, Some("scale"))
        );
        let one = Facts {
            planar_scale_error_pct: Some(1.5),
            ..Facts::default()
        };
        let r = policy.rule_on("vector_measure", "measurement", &planar, &one);
        assert_eq!(r.outcome, Outcome::Justify);
        assert!(
            r.explanation
                .contains("does not mark planar_distortion as relaxable"),
            "{}",
            r.explanation
        );
        // An advisory finding stays a warning under a looser rule.
        let advisory = trigger(Severity::Advisory, &["mixed_geometries"]);
        let r = policy.rule_on("vector_measure", "measurement", &advisory, &one);
        assert_eq!(r.outcome, Outcome::Warn);
    }

    /// Attack round 10, R10-5: `cells` was the empty sum (-0.0) on a call that reads no
    /// raster, so `cells = { at_most = 100 }` refused a plain `vector_reproject` of a point.
    /// A call without rasters has no `cells` fact and matches no condition on it; a raster of
    /// 10,000 cells does not match `at_most = 100` and one of 50 does.
    #[test]
    fn r10_5_cells_is_absent_on_calls_without_rasters() {
        let policy = Policy::parse(
            "[[rule]]\nid = \"small rasters\"\nfacts = { cells = { at_most = 100 } }\noutcome = \"refuse\"\n",
            "p.toml",
            &vocabulary(),
        )
        .unwrap();
        let finding = trigger(Severity::Required, &["crs_change"]);
        let call = |cells: Vec<(u32, u32)>| {
            let datasets = cells
                .into_iter()
                .map(|(width, height)| crate::gdal::facts::DatasetFacts {
                    role: "input".to_string(),
                    path: "r.tif".to_string(),
                    driver: "GTiff".to_string(),
                    crs: None,
                    raster: Some(crate::gdal::facts::RasterFacts {
                        width,
                        height,
                        ..Default::default()
                    }),
                    vector: None,
                })
                .collect();
            Facts::of(&CallFacts {
                tool: "raster_reproject".to_string(),
                arguments: json!({}),
                datasets,
                target_crs: None,
                transformation: None,
                upstream: Vec::new(),
                measurement: None,
                output: None,
                grids: None,
            })
        };
        let none = call(Vec::new());
        assert_eq!(none.cells, None);
        let r = policy.rule_on("vector_reproject", "crs_datum", &finding, &none);
        assert_eq!((r.outcome, r.rule), (Outcome::Justify, None));
        let large = call(vec![(100, 100)]);
        assert_eq!(large.cells, Some(10_000.0));
        let r = policy.rule_on("raster_reproject", "crs_datum", &finding, &large);
        assert_eq!((r.outcome, r.rule), (Outcome::Justify, None));
        let small = call(vec![(5, 5), (5, 5)]);
        let r = policy.rule_on("raster_reproject", "crs_datum", &finding, &small);
        assert_eq!(
            (r.outcome, r.rule.as_deref()),
            (Outcome::Refuse, Some("small rasters"))
        );
    }

    /// The confidence floor (issue 20, item 4): a finding the domain is less sure of than the
    /// floor escalates to the rule's outcome; at or above the floor the rule is silent (the
    /// twin); a domain that does not say (every component built before WIT 0.7) counts as
    /// below it.
    #[test]
    fn a_confidence_floor_escalates_below_and_is_silent_at_or_above() {
        let policy = Policy::parse(
            r#"
[[rule]]
id = "unsure needs a person"
domain = "crs_datum"
confidence_below = 0.8
outcome = "human"

[[rule]]
id = "guesses are refused"
severity = "critical"
confidence_below = 0.5
outcome = "refuse"
"#,
            "p.toml",
            &vocabulary(),
        )
        .unwrap();
        let facts = Facts::default();
        let rule = |severity, confidence| {
            let t = marked(severity, &["crs_change"], confidence, &[]);
            policy.rule_on("raster_reproject", "crs_datum", &t, &facts)
        };
        let person = Some("unsure needs a person");
        let guesses = Some("guesses are refused");
        for (severity, confidence, outcome, decider) in [
            (Severity::Required, Some(0.79), Outcome::Human, person),
            (Severity::Required, Some(0.8), Outcome::Justify, None),
            (Severity::Required, Some(1.0), Outcome::Justify, None),
            (Severity::Required, None, Outcome::Human, person),
            (Severity::Advisory, Some(0.6), Outcome::Human, person),
            (Severity::Advisory, Some(0.9), Outcome::Warn, None),
            (Severity::Critical, Some(0.3), Outcome::Refuse, guesses),
            (Severity::Critical, Some(0.5), Outcome::Human, person),
            (Severity::Critical, None, Outcome::Refuse, guesses),
        ] {
            let r = rule(severity, confidence);
            assert_eq!(
                (r.outcome, r.rule.as_deref()),
                (outcome, decider),
                "{severity:?} at {confidence:?}: {}",
                r.explanation
            );
        }
        let r = rule(Severity::Required, Some(0.5));
        assert!(
            r.explanation
                .contains("unsure needs a person (line 2) matches when domain crs_datum, confidence 0.5 (< 0.8): human"),
            "{}",
            r.explanation
        );
        let r = rule(Severity::Required, None);
        assert!(
            r.explanation.contains("(required, confidence unknown)")
                && r.explanation.contains("the domain does not say: below 0.8"),
            "{}",
            r.explanation
        );
        // Another domain's unsure finding: the rule names crs_datum only.
        let t = marked(Severity::Required, &["planar_distortion"], Some(0.1), &[]);
        assert_eq!(
            policy
                .rule_on("vector_measure", "measurement", &t, &facts)
                .outcome,
            Outcome::Justify
        );
        assert_eq!(
            policy.summary()["rules"][0]["matches"],
            "domain crs_datum, confidence below 0.8 or unknown"
        );
    }

    #[test]
    fn a_confidence_floor_out_of_range_or_loosening_stops_the_server() {
        for (text, line, needle) in [
            (
                "[[rule]]\noutcome = \"human\"\nconfidence_below = \"high\"\n",
                3,
                "confidence_below is a number from 0 to 1 (e.g. 0.8), not a string",
            ),
            (
                "[[rule]]\noutcome = \"human\"\nconfidence_below = 1.5\n",
                3,
                "confidence_below = 1.5 is out of range",
            ),
            (
                "[[rule]]\noutcome = \"refuse\"\nconfidence_below = 0\n",
                3,
                "confidence_below = 0 is out of range",
            ),
            (
                "[[rule]]\noutcome = \"human\"\nconfidence_below = -0.2\n",
                3,
                "out of range",
            ),
            (
                "[[rule]]\noutcome = \"human\"\nconfidence_below = nan\n",
                3,
                "out of range",
            ),
            (
                "[[rule]]\noutcome = \"justify\"\nconfidence_below = 0.8\n",
                2,
                "a confidence floor escalates: its outcome is human or refuse, not justify",
            ),
            (
                "[[rule]]\noutcome = \"proceed\"\nconfidence_below = 0.8\n",
                2,
                "not proceed",
            ),
            (
                "[[rule]]\noutcome = \"human\"\nconfidence_above = 0.8\n",
                3,
                "unknown field",
            ),
        ] {
            let e = error(text);
            assert!(
                e.starts_with(&format!("policy p.toml line {line}: ")) && e.contains(needle),
                "{text:?}: {e}"
            );
        }
        // A floor of 1 (anything short of certain) is accepted, written as an integer too.
        for text in [
            "[[rule]]\noutcome = \"human\"\nconfidence_below = 1\n",
            "[[rule]]\noutcome = \"refuse\"\nconfidence_below = 0.25\n",
        ] {
            assert!(
                Policy::parse(text, "p.toml", &vocabulary()).is_ok(),
                "{text}"
            );
        }
    }

    /// Relaxation (issue 20): a looser rule takes effect only when the domain marked every
    /// finding of the trigger relaxable; on a finding it did not mark, or a trigger that mixes
    /// both, the domain's outcome stands. Stricter rules apply either way.
    #[test]
    fn relaxation_applies_on_relaxable_findings_and_stands_on_the_others() {
        let policy = Policy::parse(
            r#"
[[rule]]
id = "our lab's convention"
domain = "measurement"
severity = "required"
outcome = "warn"

[[rule]]
id = "people see critical"
domain = "measurement"
severity = "critical"
outcome = "human"
"#,
            "p.toml",
            &vocabulary(),
        )
        .unwrap();
        let facts = Facts::default();
        let on = |t: &Trigger| policy.rule_on("vector_measure", "measurement", t, &facts);
        let relaxable = marked(
            Severity::Required,
            &["non_metre_unit"],
            Some(1.0),
            &["non_metre_unit"],
        );
        let r = on(&relaxable);
        assert_eq!(
            (r.outcome, r.domain_outcome, r.rule.as_deref()),
            (
                Outcome::Warn,
                Outcome::Justify,
                Some("our lab's convention")
            )
        );
        assert!(
            r.explanation.contains(
                "measurement marks every finding of it relaxable (a local convention): our \
                 lab's convention relaxes the domain's justify to warn"
            ),
            "{}",
            r.explanation
        );
        // The twin: the same rule on a finding the domain did not mark.
        let strict = marked(Severity::Required, &["planar_distortion"], Some(1.0), &[]);
        let r = on(&strict);
        assert_eq!(r.outcome, Outcome::Justify);
        assert!(
            r.explanation.contains(
                "would relax the domain's justify to warn, but measurement does not mark \
                 planar_distortion as relaxable"
            ),
            "{}",
            r.explanation
        );
        // One finding not relaxable is enough to keep the domain's outcome.
        let mixed = marked(
            Severity::Required,
            &["non_metre_unit", "overlapping_features"],
            Some(1.0),
            &["non_metre_unit"],
        );
        let r = on(&mixed);
        assert_eq!(r.outcome, Outcome::Justify);
        assert!(
            r.explanation
                .contains("does not mark overlapping_features as relaxable"),
            "{}",
            r.explanation
        );
        // Relaxable or not, a stricter rule still applies.
        let critical = marked(
            Severity::Critical,
            &["non_metre_unit"],
            Some(1.0),
            &["non_metre_unit"],
        );
        assert_eq!(on(&critical).outcome, Outcome::Human);
    }

    /// Every ```toml block of docs/operators.md is a policy the server accepts: the guide's
    /// policy, and its examples of relaxation and of the confidence floor.
    #[test]
    fn the_operators_guide_examples_are_valid_policies() {
        let guide = include_str!("../../../docs/operators.md");
        let vocabulary = Vocabulary::new(
            ["raster_reproject", "vector_measure"],
            [
                "crs_datum",
                "resampling",
                "hydrology",
                "format_selection",
                "aggregation",
                "measurement",
            ]
            .map(|d| (d, true)),
        );
        let blocks: Vec<&str> = guide
            .split("```toml\n")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .collect();
        assert!(blocks.len() >= 3, "{}", blocks.len());
        for text in blocks {
            if let Err(e) = Policy::parse(text, "docs/operators.md", &vocabulary) {
                panic!("{e}:\n{text}");
            }
        }
    }

    #[test]
    fn numeric_bounds_and_absent_facts() {
        let b = Bounds {
            above: Some(2.0),
            at_most: Some(10.0),
            ..Bounds::default()
        };
        assert!(!b.holds(2.0) && b.holds(2.01) && b.holds(10.0) && !b.holds(10.5));
        let policy = Policy::parse(
            "[[rule]]\nfacts = { accuracy_m = { at_least = 5 } }\noutcome = \"refuse\"\n",
            "p.toml",
            &vocabulary(),
        )
        .unwrap();
        let t = trigger(Severity::Required, &["crs_change"]);
        let unknown = Facts::default();
        assert_eq!(
            policy
                .rule_on("raster_reproject", "crs_datum", &t, &unknown)
                .outcome,
            Outcome::Justify,
            "an absent fact matches no bound"
        );
        let five = Facts {
            accuracy_m: Some(5.0),
            ..Facts::default()
        };
        assert_eq!(
            policy
                .rule_on("raster_reproject", "crs_datum", &t, &five)
                .outcome,
            Outcome::Refuse
        );
    }

    #[test]
    fn a_policy_inside_a_workspace_or_linked_from_one_is_refused() {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let inner = workspace.path().join("policy.toml");
        std::fs::write(&inner, "").unwrap();
        let forbidden = [workspace.path().to_path_buf()];
        let e = Policy::load(&inner, &forbidden, &vocabulary())
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside every workspace"), "{e}");
        let link = outside.path().join("policy.toml");
        std::os::unix::fs::symlink(&inner, &link).unwrap();
        let e = Policy::load(&link, &forbidden, &vocabulary())
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside every workspace"), "{e}");
        let real = outside.path().join("real.toml");
        std::fs::write(&real, "[[rule]]\noutcome = \"human\"\n").unwrap();
        let policy = Policy::load(&real, &forbidden, &vocabulary()).unwrap();
        assert_eq!(policy.rules.len(), 1);
        assert!(policy.digest.starts_with("sha256:"));
    }
}
