//! The `format_selection` risk domain: what the output format and its encoding do to the data.
//!
//! Writing a file is a methodological decision whenever the format cannot hold what the data
//! is. A Float32 surface written as JPEG or PNG comes back as 8-bit integers, a GeoTIFF keeps one
//! nodata value for all bands, JPEG and lossy WebP blur class codes and nodata edges, LERC with an
//! error bound moves every value, and a Shapefile, CSV or GeoJSON cannot hold what a GeoPackage
//! held. GDAL mostly does these things with a warning at best. This domain owns the choice of
//! format, compression and output type for every tool that writes a raster or vector file:
//!
//! * lossy encodings are `required`: someone must say the loss is acceptable, and a second
//!   lossy encoding of an input that a step upstream already encoded lossily (WIT 0.4 lineage)
//!   adds `second_lossy_encoding`, with a lossless alternative;
//! * a format that cannot hold the data (data type, band count, nodata, class codes, layers,
//!   geometry types, CRS) is `critical`;
//! * a lossless `raster_convert` or `vector_convert` is `advisory`, as is a COG without
//!   overviews. The other writing tools are gated only when something is lost.
//!
//! Key fields name the decision (format, encoding, the kind of data) and never a path.
//!
//! Every finding is an evidence item with a stable id (`lossy_encoding`, `lossy_categorical`,
//! `unsupported_data_type`, `too_many_layers`, ...; see [`why`] for the list), the finding with
//! the numbers of what is written, and, where the same format can do without the loss, a
//! ready-to-use lossless alternative. An advisory's evidence is its notes (`lossless_write`,
//! `cog_without_overviews`, `predictor`, ...).

mod raster;
mod vector;

use gdal_mcp_domain_sdk::{
    categorical_input_confidence, check_answers, chosen_method, evidence, evidence_answer,
    export_domain, field_error, names, prompt_argument, shorten, trigger, weakest, Call, Domain,
    DomainInfo, EvidenceItem, FieldError, Need, Severity, Trigger, Value, CERTAIN, GUESS,
};

struct FormatSelection;

const METHODOLOGY: &str = include_str!("methodology.md");

/// One thing the chosen format or encoding does to the data: a line of the reason and an
/// evidence item.
pub(crate) struct Finding {
    pub severity: Severity,
    /// The evidence id.
    pub id: &'static str,
    /// The reason's words.
    pub text: String,
    /// The evidence fact, when it says more than `text`.
    pub fact: Option<String>,
    /// Ready-to-use arguments that avoid the loss.
    pub alternative: Option<Value>,
}

impl Finding {
    pub fn new(severity: Severity, id: &'static str, text: impl Into<String>) -> Self {
        Self {
            severity,
            id,
            text: text.into(),
            fact: None,
            alternative: None,
        }
    }

    /// The evidence fact, in place of the reason's words.
    pub fn with_fact(mut self, fact: impl Into<String>) -> Self {
        self.fact = Some(fact.into());
        self
    }

    /// Arguments that avoid the loss, if there are any.
    pub fn or_use(mut self, alternative: Option<Value>) -> Self {
        self.alternative = alternative;
        self
    }
}

/// A note: advice that never raises the severity.
pub(crate) fn note(id: &'static str, text: impl Into<String>) -> Finding {
    Finding::new(Severity::Advisory, id, text)
}

/// Why each finding matters, by evidence id.
pub(crate) fn why(id: &str) -> &'static str {
    match id {
        "scaled_output_type" => {
            "the linear mapping is deliberate, but every value is rounded to the new type's steps \
             and values outside the mapped range are clipped"
        }
        "narrowing_output_type" => {
            "values the new type cannot hold are clipped to its range and fractions are dropped, \
             silently: the file reads back different numbers"
        }
        "rescaled_values" => {
            "the output holds rescaled numbers, no longer the original units; every reader must \
             know the mapping"
        }
        "unsupported_data_type" => {
            "the driver converts the values to a type it holds, clipping and truncating them, \
             or the write fails"
        }
        "unsupported_band_count" => "bands are dropped, or the write fails",
        "scale_offset_lost" => {
            "the raw integers are read back as the values: every reader takes a packed 64.3 for \
             693, silently"
        }
        "nodata_lost" => {
            "without a nodata value, empty cells read back as data and enter every statistic"
        }
        "per_band_nodata" => {
            "one nodata value for the whole file: the other bands' empty cells read back as data, \
             and some of their real values may read back as empty"
        }
        "nodata_with_alpha" => "the empty cells are marked only by the alpha band",
        "codec_data_type" | "codec_band_count" => {
            "the codec cannot hold what is written: values are converted, or the write fails"
        }
        "lossy_near_nodata" => {
            "the codec blurs values across the edge of the empty area: cells next to it take \
             values near the nodata value, and the mask frays"
        }
        "lossy_categorical" => {
            "a lossy codec approximates blocks of cells: class codes along every boundary turn \
             into codes of no class, or of another class"
        }
        "lossy_encoding" => {
            "every value read back differs from the original by up to the codec's error; the \
             loss cannot be undone"
        }
        "second_lossy_encoding" => {
            "a lossy codec treats the first codec's artefacts (block edges, ringing, quantised \
             steps) as detail to keep: the errors add up, and a JPEG of a JPEG is worse than \
             either quality says; write the intermediate result losslessly and encode lossily \
             once, at the end"
        }
        "too_many_layers" => "only one layer ends up in the file, or the write fails",
        "mixed_geometries" => {
            "features of the other geometry types are refused or converted, so the layer is \
             not written whole"
        }
        "curves_linearised" => "arcs become straight segments: lengths and areas change slightly",
        "csv_geometry_dropped" | "csv_points_only" => {
            "the geometry (or all but point coordinates) is not written: the file holds \
             attributes only"
        }
        "schema_lost" => {
            "fields are renamed, cut or dropped without a question: a reader looks for a field \
             that is not there, or reads a value that is not the one written"
        }
        "crs_missing" => {
            "coordinates without a CRS are read as WGS 84 longitude and latitude, which they \
             are probably not"
        }
        "crs_not_kept" => "the output is in WGS 84, not in the CRS the call asked for",
        "driver_reprojects" => {
            "the driver reprojects to WGS 84 with whatever datum transformation PROJ picks, \
             outside the crs_datum review"
        }
        "driver_converts" => "coordinates move to longitude and latitude exactly: nothing is lost",
        "non_standard_crs" => "most web clients ignore the `crs` member and misplace the data",
        "palette_dropped" => "the colour table, and with it the class colours, is lost",
        "unknown_driver" => "the domain cannot tell what this driver drops; check it yourself",
        "cog_without_overviews" => {
            "a client zoomed out reads every full-resolution tile; overviews are a resampling \
             decision of their own"
        }
        "predictor" => "the predictor changes only the size of the file, never the values",
        "shapefile_limits" => {
            "a Shapefile cuts names, long strings and date-times; here they fit, as far as the \
             features checked show"
        }
        "lossless_write" => "nothing is lost; the format is still a decision worth recording",
        _ => "the format or encoding changes what is written",
    }
}

/// The evidence items of `findings`, one per id (findings with the same id are joined), each
/// fact followed by what is written.
fn evidence_of(findings: &[Finding], data: &str) -> Vec<EvidenceItem> {
    let mut items: Vec<EvidenceItem> = Vec::new();
    for f in findings {
        let fact = f.fact.clone().unwrap_or_else(|| f.text.clone());
        match items.iter_mut().find(|i| i.id == f.id) {
            Some(item) => {
                item.fact = item
                    .fact
                    .replacen("; written: ", &format!("; {fact}; written: "), 1);
            }
            None => items.push(evidence(
                f.id,
                format!("{fact}; written: {data}"),
                why(f.id),
                f.alternative.clone(),
            )),
        }
    }
    items
}

/// The domain's view of one writing call.
pub(crate) struct Assessment {
    /// Losses, most severe first once sorted.
    pub findings: Vec<Finding>,
    /// What an advisory says when nothing is lost.
    pub notes: Vec<Finding>,
    /// Whether a loss-free call still gets an advisory (the conversion tools).
    pub advise_when_clean: bool,
    pub key_fields: Value,
    /// Prompt arguments.
    pub format: String,
    pub encoding: String,
    pub data: String,
    /// What `choice.method` must name, in words.
    pub expected: String,
}

fn rank(severity: Severity) -> u8 {
    match severity {
        Severity::Advisory => 0,
        Severity::Required => 1,
        Severity::Critical => 2,
    }
}

/// The advisory notes: they never raise the severity.
const NOTES: &[&str] = &[
    "lossless_write",
    "cog_without_overviews",
    "palette_dropped",
    "unknown_driver",
    "predictor",
    "shapefile_limits",
];

impl Domain for FormatSelection {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "format_selection".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "Format selection".to_string(),
            summary: "Output formats, compression and data types: lossy encodings, and formats \
                      that cannot hold the data's type, bands, nodata, classes, layers, \
                      geometries or CRS."
                .to_string(),
            prompt_name: "justify_format_selection".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg("format", "The output format (GDAL/OGR driver)", true),
                arg(
                    "encoding",
                    "Compression, quality or error bound, and output type",
                    true,
                ),
                arg(
                    "data",
                    "What is being written (types, bands, nodata, layers)",
                    true,
                ),
                arg(
                    "expected",
                    "What choice.method must name (format, lossy codec, output type)",
                    true,
                ),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        let mut assessment = if raster::TOOLS.contains(&call.tool()) {
            raster::assess(call)?
        } else if vector::TOOLS.contains(&call.tool()) {
            vector::assess(call)?
        } else {
            return None;
        };
        assessment
            .findings
            .sort_by_key(|f| std::cmp::Reverse(rank(f.severity)));
        let (severity, shown) = match assessment.findings.first() {
            Some(worst) => (worst.severity, &assessment.findings),
            None if assessment.advise_when_clean => (Severity::Advisory, &assessment.notes),
            None => return None,
        };
        let reason = shown
            .iter()
            .map(|f| f.text.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let items = evidence_of(shown, &assessment.data);
        Some(trigger(
            severity,
            reason.clone(),
            assessment.key_fields,
            &[
                ("tool", call.tool().to_string()),
                ("format", assessment.format),
                ("encoding", assessment.encoding),
                ("data", assessment.data),
                ("expected", assessment.expected),
                ("reason", reason),
            ],
            items,
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    /// What a write loses is measured against GDAL by the host or read from the driver's
    /// capabilities and the data: certain. `lossy_categorical` rests on the input looking
    /// categorical (certain for declared classes, a guess for a few integer values). The
    /// advisory notes never raise the severity and do not count, so a trigger of notes only is
    /// certain, unless one of them is `unknown_driver`: without a capability table for the
    /// driver the domain is guessing.
    fn confidence(call: &Call, trigger: &Trigger) -> Option<f64> {
        let rated = weakest(trigger, |item| match item.id.as_str() {
            id if NOTES.contains(&id) => None,
            "lossy_categorical" => Some(categorical_input_confidence(call).unwrap_or(CERTAIN)),
            _ => Some(CERTAIN),
        });
        rated.or_else(|| {
            let guessing = trigger.evidence.iter().any(|e| e.id == "unknown_driver");
            Some(if guessing { GUESS } else { CERTAIN })
        })
    }

    /// Advice on how a lossless file is laid out (`lossless_write`, `cog_without_overviews`,
    /// `predictor`) is a team's convention. Everything that loses or changes values, nodata,
    /// bands, layers, geometries, the CRS or the colour table, the Shapefile limits and a
    /// driver the domain cannot judge are never relaxable.
    fn relaxable(evidence_id: &str) -> bool {
        matches!(
            evidence_id,
            "lossless_write" | "cog_without_overviews" | "predictor"
        )
    }

    fn validate(
        key_fields: &Value,
        evidence: &[EvidenceItem],
        justification: &Value,
    ) -> Vec<FieldError> {
        let mut errors = method_errors(key_fields, justification);
        errors.extend(check_answers(
            evidence,
            justification,
            &careful_findings(key_fields, evidence, justification),
        ));
        errors
    }
}

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

/// What a careful answer to each finding of a format decision contains (issue 18, rule 3),
/// checked by the SDK's `careful` helpers like every built-in domain's:
///
/// * every finding is answered, by id or by the choice's words, with something the finding did
///   not say, and no answer is the same text as another's (the generic checks);
/// * a finding that changes values bounds the loss by a number in the data's own units
///   ([`Need::Number`]); for LERC one no smaller than `max_z_error`;
/// * a CRS finding names the CRS readers must assume ([`Need::NamesCrs`]);
/// * an answered finding that offers a safe alternative (every finding of a critical
///   decision is answered) rejects it in `alternatives`, with why ([`Need::RejectsOffered`]).
fn careful_findings(
    key_fields: &Value,
    evidence: &[EvidenceItem],
    justification: &Value,
) -> Vec<gdal_mcp_domain_sdk::Finding> {
    evidence
        .iter()
        .map(|item| {
            let id = item.id.as_str();
            let mut needs = Vec::new();
            if LOSSES.contains(&id) {
                let bound = key_fields
                    .get("max_z_error")
                    .and_then(Value::as_f64)
                    .filter(|e| *e > 0.0 && id == "lossy_encoding");
                needs.push(Need::Number {
                    at_least: bound,
                    of_what: "error".to_string(),
                });
            }
            if CRS_FINDINGS.contains(&id) {
                needs.push(Need::NamesCrs);
            }
            if evidence_answer(justification, id).is_some_and(|a| !a.trim().is_empty()) {
                needs.push(Need::RejectsOffered);
            }
            gdal_mcp_domain_sdk::Finding::new(id, needs)
        })
        .collect()
}

/// `choice.method` must name the format, the lossy codec and the output type the call writes.
fn method_errors(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
    let field = |name: &str| key_fields.get(name).and_then(Value::as_str);
    let Some(format) = field("format") else {
        return Vec::new();
    };
    let mut wanted: Vec<(&str, Vec<&str>)> = vec![(format, format_aliases(format))];
    if let Some(lossy) = field("lossy_by") {
        if !names_any(lossy, &format_aliases(format)) {
            wanted.push((lossy, codec_aliases(lossy)));
        }
    }
    if let Some(output_type) = field("output_type") {
        wanted.push((output_type, vec![output_type]));
    }
    let Some(method) = chosen_method(justification) else {
        return vec![field_error("/choice/method", "missing")];
    };
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|(_, aliases)| !names_any(method, aliases))
        .map(|(name, _)| *name)
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let all: Vec<&str> = wanted.iter().map(|(name, _)| *name).collect();
    vec![field_error(
        "/choice/method",
        format!(
            "the call writes {}, but the choice \"{}\" does not name {}; justify the \
                 format and encoding this call uses",
            all.join(" with "),
            shorten(method, 200),
            missing.join(" or ")
        ),
    )]
}

/// Whether `text` names any of `aliases`.
pub(crate) fn names_any(text: &str, aliases: &[&str]) -> bool {
    aliases.iter().any(|a| names(text, a))
}

/// Names that count as naming a driver in a justification.
pub(crate) fn format_aliases(format: &str) -> Vec<&str> {
    match format {
        "GTiff" => vec!["GTiff", "GeoTIFF", "TIFF"],
        "COG" => vec!["COG", "cloud optimized", "cloud optimised"],
        "GPKG" => vec!["GPKG", "GeoPackage"],
        "ESRI Shapefile" => vec!["Shapefile", "SHP"],
        "FlatGeobuf" => vec!["FlatGeobuf", "FGB"],
        "GeoJSONSeq" => vec!["GeoJSONSeq", "GeoJSON sequence", "GeoJSONL"],
        "JPEG" => vec!["JPEG", "JPG"],
        "AAIGrid" => vec!["AAIGrid", "ASCII grid"],
        "SQLite" => vec!["SQLite", "SpatiaLite"],
        "LIBKML" => vec!["KML"],
        "JP2OpenJPEG" => vec!["JP2OpenJPEG", "JPEG 2000", "JPEG2000", "JP2"],
        other => vec![other],
    }
}

/// Names that count as naming a lossy encoding.
fn codec_aliases(codec: &str) -> Vec<&str> {
    match codec {
        "JPEG" | "PNG_JPEG" => vec!["JPEG", "JPG"],
        "LERC" | "LERC_DEFLATE" | "LERC_ZSTD" => vec!["LERC"],
        "JXL" => vec!["JXL", "JPEG XL", "JPEG-XL"],
        "DISCARD_LSB" => vec!["DISCARD_LSB", "discard"],
        "JPEG2000" => vec!["JPEG 2000", "JPEG2000", "JP2"],
        other => vec![other],
    }
}

/// A string, number or boolean option value as text.
pub(crate) fn option_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Option `key` (any case) of the options object in argument `argument`.
pub(crate) fn option(call: &Call, argument: &str, key: &str) -> Option<String> {
    call.args
        .get(argument)?
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .and_then(|(_, v)| option_text(v))
}

/// YES, TRUE, ON or 1.
pub(crate) fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_uppercase().as_str(),
        "YES" | "TRUE" | "ON" | "1"
    )
}

/// A number as people write it: `75`, not `75.0`.
pub(crate) fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        value.to_string()
    }
}

export_domain!(FormatSelection);

#[cfg(test)]
mod tests;
