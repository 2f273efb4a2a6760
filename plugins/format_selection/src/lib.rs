//! The `format_selection` risk domain: what the output format and its encoding do to the data.
//!
//! Writing a file is a methodological decision whenever the format cannot hold what the data
//! is. A Float32 surface written as JPEG or PNG comes back as 8-bit integers, a GeoTIFF keeps one
//! nodata value for all bands, JPEG and lossy WebP blur class codes and nodata edges, LERC with an
//! error bound moves every value, and a Shapefile, CSV or GeoJSON cannot hold what a GeoPackage
//! held. GDAL mostly does these things with a warning at best. This domain owns the choice of
//! format, compression and output type for every tool that writes a raster or vector file:
//!
//! * lossy encodings are `required`: someone must say the loss is acceptable;
//! * a format that cannot hold the data (data type, band count, nodata, class codes, layers,
//!   geometry types, CRS) is `critical`;
//! * a lossless `raster_convert` or `vector_convert` is `advisory`, as is a COG without
//!   overviews. The other writing tools are gated only when something is lost.
//!
//! Key fields name the decision (format, encoding, the kind of data) and never a path.

mod raster;
mod vector;

use gdal_mcp_domain_sdk::{
    chosen_method, export_domain, field_error, names, prompt_argument, trigger, Call, Domain,
    DomainInfo, FieldError, Severity, Trigger, Value,
};

struct FormatSelection;

const METHODOLOGY: &str = include_str!("methodology.md");

/// One thing the chosen format or encoding does to the data.
pub(crate) struct Finding {
    pub severity: Severity,
    pub text: String,
}

impl Finding {
    pub fn new(severity: Severity, text: impl Into<String>) -> Self {
        Self {
            severity,
            text: text.into(),
        }
    }
}

/// The domain's view of one writing call.
pub(crate) struct Assessment {
    /// Losses, most severe first once sorted.
    pub findings: Vec<Finding>,
    /// What an advisory says when nothing is lost.
    pub notes: Vec<String>,
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
        let (severity, reason) = match assessment.findings.first() {
            Some(worst) => (
                worst.severity,
                assessment
                    .findings
                    .iter()
                    .map(|f| f.text.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            None if assessment.advise_when_clean => {
                (Severity::Advisory, assessment.notes.join("; "))
            }
            None => return None,
        };
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
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn validate(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
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
                "the call writes {}, but the choice \"{method}\" does not name {}; justify the \
                 format and encoding this call uses",
                all.join(" with "),
                missing.join(" or ")
            ),
        )]
    }
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
