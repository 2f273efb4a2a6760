//! The `crs_datum` risk domain: decisions that move data between coordinate reference systems.
//!
//! A reprojection is never neutral: it picks a datum transformation (or silently falls back to
//! a ballpark one), it bends distances and areas, and it is impossible to audit afterwards
//! unless someone wrote down why. This domain asks for that record whenever a call changes
//! CRS, and escalates to `critical` when the source CRS is missing, overridden or ambiguous,
//! or when PROJ could only find a ballpark transformation.

use gdal_mcp_domain_sdk::{
    chosen_method, crs_label, export_domain, field_error, json, names, prompt_argument, trigger,
    Call, CrsFacts, CrsKind, Domain, DomainInfo, FieldError, Severity, Trigger, Value,
};

struct CrsDatum;

const METHODOLOGY: &str = include_str!("methodology.md");

/// Tools that change the CRS of their output.
const REPROJECTING_TOOLS: &[&str] = &["raster_reproject", "vector_reproject"];

impl Domain for CrsDatum {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "crs_datum".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "CRS and datum".to_string(),
            summary: "Reprojection, datum transformations and CRS assignment: which CRS, which \
                      transformation, and what accuracy the analysis can live with."
                .to_string(),
            prompt_name: "justify_crs_datum".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg("src_crs", "Source CRS (id or name)", true),
                arg("dst_crs", "Target CRS (id or name)", true),
                arg(
                    "datum_change",
                    "Source and target datums, if they differ",
                    false,
                ),
                arg(
                    "transformation",
                    "The operation PROJ selected, with accuracy",
                    false,
                ),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        if !REPROJECTING_TOOLS.contains(&call.tool()) {
            return None;
        }
        let target = call.raw.target_crs.as_ref()?;
        let recorded = call.dataset("input").and_then(|d| d.crs.as_ref());
        let src_override = call.arg_str("src_crs");

        let (source_label, mut severity, mut reasons) = match (recorded, src_override) {
            (None, None) => (
                "unknown".to_string(),
                Severity::Critical,
                vec!["the input has no CRS and none was given".to_string()],
            ),
            (None, Some(given)) => (
                given.to_string(),
                Severity::Critical,
                vec![format!(
                    "the input has no CRS; the call assumes {given} without evidence in the file"
                )],
            ),
            (Some(crs), Some(given)) => (
                given.to_string(),
                Severity::Critical,
                vec![format!(
                    "the call overrides the recorded CRS {} with {given}",
                    crs_label(crs)
                )],
            ),
            (Some(crs), None) => (crs_label(crs), Severity::Required, Vec::new()),
        };
        let target_label = crs_label(target);

        if let Some(crs) = recorded {
            if crs.id.is_none() && src_override.is_none() {
                severity = Severity::Critical;
                reasons.push(format!(
                    "the source CRS \"{}\" matches no authority code, so PROJ may pick the wrong \
                     transformation",
                    crs.name
                ));
            }
            if src_override.is_none() && same_crs(crs, target) {
                // Same CRS in and out: no CRS decision is being made.
                return None;
            }
        }

        let datum_change = match (recorded.and_then(|c| c.datum.as_deref()), &target.datum) {
            (Some(a), Some(b)) if a != b => format!("{a} → {b}"),
            _ => String::new(),
        };
        let mut transformation = String::new();
        if let Some(t) = &call.raw.transformation {
            transformation = match t.accuracy_metres {
                Some(m) => format!("{} (accuracy {m} m)", t.name),
                None => format!("{} (accuracy unknown)", t.name),
            };
            if t.ballpark {
                severity = Severity::Critical;
                reasons.push(format!(
                    "PROJ falls back to a ballpark transformation ({}): the datum shift is \
                     ignored, errors of tens to hundreds of metres are possible",
                    t.name
                ));
            }
            if !t.missing_grids.is_empty() {
                reasons.push(format!(
                    "a more accurate transformation needs grids this machine lacks: {}",
                    t.missing_grids.join(", ")
                ));
            }
        }
        if reasons.is_empty() {
            reasons.push(if datum_change.is_empty() {
                format!("reprojects from {source_label} to {target_label}")
            } else {
                format!("reprojects from {source_label} to {target_label} across datums ({datum_change})")
            });
        }
        if target.kind == CrsKind::Geographic && call.tool() == "raster_reproject" {
            reasons.push(
                "the target is geographic: pixel sizes become degrees, so areas and distances \
                 vary with latitude"
                    .to_string(),
            );
        }
        let reason = reasons.join("; ");

        let key_fields = json!({
            "operation": "reproject",
            "src_crs": source_label,
            "src_crs_assigned": src_override.is_some(),
            "dst_crs": target_label,
            "transformation": call.raw.transformation.as_ref().map(|t| t.name.clone()),
        });
        Some(trigger(
            severity,
            reason.clone(),
            key_fields,
            &[
                ("tool", call.tool().to_string()),
                ("src_crs", source_label),
                ("dst_crs", target_label),
                ("datum_change", datum_change),
                ("transformation", transformation),
                ("reason", reason),
            ],
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn validate(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let dst = key_fields
            .get("dst_crs")
            .and_then(Value::as_str)
            .unwrap_or("");
        match chosen_method(justification) {
            Some(method) if crs_named(method, dst) => {}
            Some(method) => errors.push(field_error(
                "/choice/method",
                format!(
                    "the call reprojects to {dst}, but the choice names \"{method}\"; name the \
                     target CRS this call uses (e.g. \"{dst}\")"
                ),
            )),
            None => errors.push(field_error("/choice/method", "missing")),
        }
        errors
    }
}

/// Whether two CRS facts denote the same CRS.
fn same_crs(a: &CrsFacts, b: &CrsFacts) -> bool {
    match (&a.id, &b.id) {
        (Some(x), Some(y)) => x.eq_ignore_ascii_case(y),
        _ => a.name == b.name && a.datum == b.datum,
    }
}

/// Whether `method` names the CRS `label` (e.g. "EPSG:4326", "epsg 4326" or just "4326").
fn crs_named(method: &str, label: &str) -> bool {
    if names(method, label) {
        return true;
    }
    match label.rsplit_once(':') {
        Some((_, code)) => names(method, code),
        None => false,
    }
}

export_domain!(CrsDatum);
