//! The `hydrology` risk domain: DEM conditioning, flow routing and stream extraction.
//!
//! Hydrology is where a careless default ruins results without a sound: filling versus
//! breaching, flat handling, D8 versus D-infinity, the stream threshold. Every `dem_*` call is
//! `required`; it is `critical` when the DEM is in a geographic CRS (steepest descent then
//! divides metres by degrees) and when D8 routing runs on terrain the host's facts mark as
//! flat-dominated (directions on flats are an artefact of the flat-resolution method).

use gdal_mcp_domain_sdk::{
    chosen_method, export_domain, field_error, json, names, prompt_argument, trigger, Call,
    CrsKind, Domain, DomainInfo, FieldError, Severity, Trigger, Value,
};

struct Hydrology;

const METHODOLOGY: &str = include_str!("methodology.md");

/// A DEM with at least this share of cells without a strictly lower neighbour is
/// flat-dominated.
const FLAT_DOMINATED: f64 = 0.25;

/// The governed tools and the operation each performs.
const TOOLS: &[(&str, &str)] = &[
    ("dem_condition", "condition"),
    ("dem_flow_direction", "flow_direction"),
    ("dem_flow_accumulation", "flow_accumulation"),
    ("dem_streams", "streams"),
    ("dem_watershed", "watershed"),
];

impl Domain for Hydrology {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "hydrology".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "DEM hydrology".to_string(),
            summary: "Depression handling, flat resolution, flow-routing algorithm and encoding, \
                      accumulation units and stream thresholds on elevation models."
                .to_string(),
            prompt_name: "justify_hydrology".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg(
                    "operation",
                    "condition, flow_direction, flow_accumulation, streams or watershed",
                    true,
                ),
                arg(
                    "method",
                    "The method the call uses (fill, breach, d8, dinf, threshold...)",
                    true,
                ),
                arg("details", "The other decision fields", false),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        let operation = TOOLS
            .iter()
            .find(|(tool, _)| *tool == call.tool())
            .map(|(_, op)| *op)?;
        let dem = call.dataset("input");
        let algorithm = call.arg_str("algorithm").unwrap_or("d8").to_string();
        let flats = if call.args.get("resolve_flats").and_then(Value::as_bool) == Some(false) {
            "unresolved"
        } else {
            "resolved"
        };
        let (method, key_fields, details) = match operation {
            "condition" => {
                let method = call.arg_str("method").unwrap_or("fill").to_string();
                let length = call
                    .args
                    .get("max_breach_length")
                    .cloned()
                    .unwrap_or(Value::Null);
                let depth = call
                    .args
                    .get("max_breach_depth")
                    .cloned()
                    .unwrap_or(Value::Null);
                let breach = method == "breach";
                (
                    method.clone(),
                    json!({
                        "operation": operation,
                        "method": method,
                        "epsilon": method != "fill",
                        "max_breach_length": if breach { length.clone() } else { Value::Null },
                        "max_breach_depth": if breach { depth.clone() } else { Value::Null },
                    }),
                    if breach {
                        format!("breach paths up to {length} cells, max depth {depth}, then epsilon fill")
                    } else if method == "fill" {
                        "plain Priority-Flood: filled depressions become exactly flat".to_string()
                    } else {
                        "Priority-Flood with an epsilon gradient: every cell drains".to_string()
                    },
                )
            }
            "flow_direction" => {
                let encoding = if algorithm == "d8" {
                    call.arg_str("encoding").unwrap_or("esri").to_string()
                } else {
                    "radians".to_string()
                };
                (
                    algorithm.clone(),
                    json!({"operation": operation, "algorithm": algorithm, "encoding": encoding, "flats": flats}),
                    format!("encoding {encoding}, flats {flats}"),
                )
            }
            "flow_accumulation" => {
                let units = call.arg_str("units").unwrap_or("cells").to_string();
                let weighted = call.has_arg("weights");
                (
                    algorithm.clone(),
                    json!({"operation": operation, "algorithm": algorithm, "units": units,
                           "weighted": weighted, "flats": flats}),
                    format!("units {units}, weighted {weighted}, flats {flats}"),
                )
            }
            "streams" => {
                let threshold = call.args.get("threshold").cloned().unwrap_or(Value::Null);
                (
                    format!("threshold {threshold}"),
                    json!({"operation": operation, "algorithm": "d8", "threshold": threshold, "flats": flats}),
                    format!("D8 network, streams where accumulation ≥ {threshold} cells, Strahler order"),
                )
            }
            _ => {
                let snap = call
                    .args
                    .get("snap_distance")
                    .cloned()
                    .unwrap_or(Value::Null);
                (
                    "pour points".to_string(),
                    json!({"operation": operation, "algorithm": "d8", "snap_distance": snap, "flats": flats}),
                    format!("D8 watersheds, snapping distance {snap}"),
                )
            }
        };

        let mut severity = Severity::Required;
        let mut reasons = vec![format!("{operation} with {method}: {details}")];
        if let Some(crs) = dem.and_then(|d| d.crs.as_ref()) {
            if crs.kind == CrsKind::Geographic {
                severity = Severity::Critical;
                reasons.push(format!(
                    "the DEM is in a geographic CRS ({}): cell sizes are degrees, so slopes and \
                     steepest descent mix metres with degrees",
                    crs.id.clone().unwrap_or_else(|| crs.name.clone())
                ));
            }
        }
        let flat_fraction = dem
            .and_then(|d| d.raster.as_ref())
            .and_then(|r| r.flat_fraction);
        let routes_d8 = operation != "condition"
            && (algorithm == "d8" || operation == "streams" || operation == "watershed");
        if let Some(share) = flat_fraction {
            if routes_d8 && share >= FLAT_DOMINATED {
                severity = Severity::Critical;
                reasons.push(format!(
                    "{:.0} % of the DEM's cells have no lower neighbour (flat-dominated): D8 \
                     directions there come from the flat-resolution method, not the terrain",
                    share * 100.0
                ));
            }
        }
        let reason = reasons.join("; ");
        Some(trigger(
            severity,
            reason.clone(),
            key_fields,
            &[
                ("tool", call.tool().to_string()),
                ("operation", operation.to_string()),
                ("method", method),
                ("details", details),
                ("reason", reason),
            ],
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn validate(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
        let operation = key_fields
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or("");
        let expected = match operation {
            "condition" => key_fields
                .get("method")
                .and_then(Value::as_str)
                .map(|m| match m {
                    "fill_epsilon" => "epsilon".to_string(),
                    other => other.to_string(),
                }),
            "flow_direction" | "flow_accumulation" => key_fields
                .get("algorithm")
                .and_then(Value::as_str)
                .map(String::from),
            "streams" => key_fields.get("threshold").map(|t| t.to_string()),
            _ => None,
        };
        let Some(expected) = expected else {
            return Vec::new();
        };
        match chosen_method(justification) {
            Some(chosen) if names(chosen, &expected) => Vec::new(),
            Some(chosen) => vec![field_error(
                "/choice/method",
                format!(
                    "the call's {operation} uses \"{expected}\", but the choice names \"{chosen}\"; \
                     justify what this call does"
                ),
            )],
            None => vec![field_error("/choice/method", "missing")],
        }
    }
}

export_domain!(Hydrology);
