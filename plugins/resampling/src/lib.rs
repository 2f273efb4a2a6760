//! The `resampling` risk domain: decisions that move values onto a new pixel grid.
//!
//! Every change of the pixel grid (reprojection, resolution change, overviews, compositing of
//! unlike grids) computes new cell values from old ones, and the method decides what they mean.
//! Interpolating a land-cover class code produces classes that do not exist; nearest neighbour on
//! a continuous surface shifts it by up to half a cell and aliases when downsampling. This domain
//! asks why the method fits the data, and makes an interpolating method on categorical data
//! `critical`.

use gdal_mcp_domain_sdk::{
    chosen_method, export_domain, field_error, json, names, prompt_argument, trigger, Call, Domain,
    DomainInfo, FieldError, Severity, Trigger, Value,
};

struct Resampling;

const METHODOLOGY: &str = include_str!("methodology.md");

/// Tools that compute values on a new grid, with the operation name used in key fields.
const GRID_TOOLS: &[(&str, &str)] = &[
    ("raster_reproject", "reproject"),
    ("raster_resample", "resample"),
    ("raster_overviews", "overviews"),
    ("raster_aggregate", "aggregate"),
];

/// Methods that keep an input cell's value as is (safe for classes).
const CLASS_PRESERVING: &[&str] = &["nearest", "mode"];

impl Domain for Resampling {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "resampling".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "Resampling".to_string(),
            summary: "Changes of the pixel grid: which resampling method, whether it suits \
                      categorical or continuous data, and what it does to values."
                .to_string(),
            prompt_name: "justify_resampling".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg("method", "The resampling method the call uses", true),
                arg("data", "categorical or continuous", true),
                arg(
                    "evidence",
                    "Why the data looks categorical or continuous",
                    false,
                ),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        let operation = GRID_TOOLS
            .iter()
            .find(|(tool, _)| *tool == call.tool())
            .map(|(_, op)| *op)?;
        let raster = call.dataset("input").and_then(|d| d.raster.as_ref())?;
        let method = call
            .arg_str("resampling")
            .unwrap_or("nearest")
            .to_ascii_lowercase();

        let categorical = raster.looks_categorical;
        let evidence = if categorical {
            let e = &raster.evidence;
            let mut parts = Vec::new();
            if e.palette {
                parts.push("a colour table");
            }
            if e.attribute_table {
                parts.push("a raster attribute table");
            }
            if e.integer_classes {
                parts.push("integer values with few distinct classes");
            }
            format!("band 1 has {}", parts.join(", "))
        } else {
            format!("data type {}", raster.data_types.join(", "))
        };
        let data = if categorical {
            "categorical"
        } else {
            "continuous"
        };
        let preserving = CLASS_PRESERVING.contains(&method.as_str());

        let (severity, reason) = match (categorical, preserving) {
            (true, false) => (
                Severity::Critical,
                format!(
                    "{method} resampling mixes class codes of categorical data ({evidence}): it \
                     invents classes that do not exist"
                ),
            ),
            (true, true) => (
                Severity::Advisory,
                format!("{method} keeps class codes intact on categorical data ({evidence})"),
            ),
            (false, _) => (
                Severity::Required,
                format!("{operation} computes new cell values with {method} on continuous data"),
            ),
        };
        Some(trigger(
            severity,
            reason.clone(),
            json!({ "operation": operation, "method": method, "data": data }),
            &[
                ("tool", call.tool().to_string()),
                ("method", method.clone()),
                ("data", data.to_string()),
                ("evidence", evidence),
                ("reason", reason),
            ],
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn validate(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
        let method = key_fields
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("");
        match chosen_method(justification) {
            Some(chosen) if names(chosen, method) => Vec::new(),
            Some(chosen) => vec![field_error(
                "/choice/method",
                format!(
                    "the call resamples with \"{method}\", but the choice names \"{chosen}\"; \
                     justify the method this call uses"
                ),
            )],
            None => vec![field_error("/choice/method", "missing")],
        }
    }
}

export_domain!(Resampling);
