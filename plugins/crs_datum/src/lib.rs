//! The `crs_datum` risk domain: decisions that move data between coordinate reference systems.
//!
//! A reprojection is never neutral: it picks a datum transformation (or silently falls back to
//! a ballpark one), it bends distances and areas, and it is impossible to audit afterwards
//! unless someone wrote down why. This domain asks for that record whenever a call changes
//! CRS, and escalates to `critical` when the source CRS is missing, overridden or ambiguous,
//! or when PROJ could only find a ballpark transformation.
//!
//! Some calls change CRS without saying so: `zonal_stats` brings zones in another CRS onto the
//! raster's grid, `vector_clip` brings a mask onto the input's CRS. They are gated like a
//! reprojection of the layer that moves. And one call misreads a CRS without changing it:
//! `raster_terrain` on a geographic DEM divides metres of height by degrees of distance unless
//! a `scale` converts them, which makes slopes wrong by orders of magnitude.

use gdal_mcp_domain_sdk::{
    chosen_method, crs_label, export_domain, field_error, json, names, prompt_argument,
    prompt_value, render_template, trigger, Call, CrsFacts, CrsKind, Domain, DomainInfo,
    FieldError, PromptValue, Severity, Trigger, Value,
};

struct CrsDatum;

const METHODOLOGY: &str = include_str!("methodology.md");

/// The questions for `raster_terrain` on a DEM whose CRS units do not match its heights.
const TERRAIN_PROMPT: &str = include_str!("prompt_terrain.md");

/// Tools that change the CRS of their output.
const REPROJECTING_TOOLS: &[&str] = &["raster_reproject", "vector_reproject"];

/// `raster_terrain` operations whose result depends on the horizontal-to-vertical unit ratio.
const GRADIENT_OPERATIONS: &[&str] = &["slope", "hillshade", "aspect"];

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
                arg(
                    "operation",
                    "reproject, zones_to_raster, mask_to_input, inputs_to_grid or terrain \
                     (terrain asks different questions)",
                    false,
                ),
                arg(
                    "scale",
                    "raster_terrain: the horizontal-to-vertical unit ratio the call passes",
                    false,
                ),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        match call.tool() {
            tool if REPROJECTING_TOOLS.contains(&tool) => reproject(call),
            "zonal_stats" => moved_layer(call, "zones", "input", "zones_to_raster"),
            "vector_clip" if call.has_arg("mask") => {
                moved_layer(call, "mask", "input", "mask_to_input")
            }
            "raster_terrain" => terrain(call),
            "raster_composite" => {
                // The host warps inputs in another CRS onto the first input's grid.
                let reference = call.dataset("input").and_then(|d| d.crs.as_ref());
                let moving = call.raw.datasets.iter().find(|d| {
                    d.role != "input" && d.crs.as_ref().map(crs_label) != reference.map(crs_label)
                })?;
                let role = moving.role.clone();
                moved_layer(call, &role, "input", "inputs_to_grid")
            }
            _ => None,
        }
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn render_prompt(arguments: &[PromptValue]) -> String {
        let template = if prompt_value(arguments, "operation") == "terrain" {
            TERRAIN_PROMPT
        } else {
            Self::prompt_template()
        };
        render_template(template, arguments)
    }

    fn validate(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
        let field = |name: &str| key_fields.get(name).and_then(Value::as_str).unwrap_or("");
        let mut errors = Vec::new();
        if field("operation") == "terrain" {
            // The decision is the unit ratio, or computing without one in the DEM's CRS.
            let crs = field("crs");
            let expected = match key_fields.get("scale").and_then(Value::as_f64) {
                Some(scale) => format!("scale {}", number(scale)),
                None => crs.to_string(),
            };
            let named = |method: &str| match key_fields.get("scale").and_then(Value::as_f64) {
                Some(scale) => names(method, &number(scale)),
                None => crs_named(method, crs),
            };
            match chosen_method(justification) {
                Some(method) if named(method) => {}
                Some(method) => errors.push(field_error(
                    "/choice/method",
                    format!(
                        "the call computes terrain with {expected}, but the choice names \
                         \"{method}\"; name what this call uses (e.g. \"{expected}\")"
                    ),
                )),
                None => errors.push(field_error("/choice/method", "missing")),
            }
            return errors;
        }
        // The CRS the data ends up in; when that one is unknown, the CRS assumed for both.
        let dst = match field("dst_crs") {
            "unknown" => field("src_crs"),
            dst => dst,
        };
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

/// `raster_reproject` and `vector_reproject`: the input moves to `target-crs`.
fn reproject(call: &Call) -> Option<Trigger> {
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

    let datum_change = datum_change(recorded, target);
    let transformation = describe_transformation(call, &mut severity, &mut reasons);
    if reasons.is_empty() {
        reasons.push(if datum_change.is_empty() {
            format!("reprojects from {source_label} to {target_label}")
        } else {
            format!(
                "reprojects from {source_label} to {target_label} across datums ({datum_change})"
            )
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
            ("operation", "reproject".to_string()),
        ],
    ))
}

/// A call that brings the dataset of argument `moving` into the CRS of the dataset of argument
/// `fixed` on the fly (zones onto a raster, a clip mask onto the input).
fn moved_layer(call: &Call, moving: &str, fixed: &str, operation: &str) -> Option<Trigger> {
    let from = call.dataset(moving).and_then(|d| d.crs.as_ref());
    let onto = call.dataset(fixed).and_then(|d| d.crs.as_ref());
    let from = match (from, onto) {
        // Neither has a CRS: both are taken as they are, and no CRS is chosen.
        (None, None) => return None,
        (Some(known), None) | (None, Some(known)) => {
            let (missing, other) = if from.is_none() {
                (moving, fixed)
            } else {
                (fixed, moving)
            };
            let label = crs_label(known);
            let reason = format!(
                "the `{missing}` dataset has no CRS: its coordinates are taken to be in the \
                 `{other}` dataset's CRS ({label}) without any evidence"
            );
            let (src, dst) = if from.is_none() {
                ("unknown".to_string(), label)
            } else {
                (label, "unknown".to_string())
            };
            return Some(trigger(
                Severity::Critical,
                reason.clone(),
                json!({
                    "operation": operation,
                    "src_crs": src,
                    "dst_crs": dst,
                    "transformation": Value::Null,
                }),
                &[
                    ("tool", call.tool().to_string()),
                    ("src_crs", src.clone()),
                    ("dst_crs", dst.clone()),
                    ("datum_change", String::new()),
                    (
                        "transformation",
                        "none: no CRS to transform from".to_string(),
                    ),
                    ("reason", reason),
                    ("operation", operation.to_string()),
                ],
            ));
        }
        (Some(from), Some(_)) => from,
    };
    // The host sets a target only when it judged the two CRSs different (it compares them
    // with PROJ, which knows more than these facts); without one nothing moves.
    let target = call.raw.target_crs.as_ref()?;
    if same_crs(from, target) {
        return None;
    }
    let source_label = crs_label(from);
    let target_label = crs_label(target);
    let mut severity = Severity::Required;
    let mut reasons = vec![format!(
        "{} brings the {moving} from {source_label} into the {fixed}'s CRS {target_label} on \
         the fly",
        call.tool()
    )];
    if from.id.is_none() {
        severity = Severity::Critical;
        reasons.push(format!(
            "the {moving} CRS \"{}\" matches no authority code, so PROJ may pick the wrong \
             transformation",
            from.name
        ));
    }
    let datum_change = datum_change(Some(from), target);
    if !datum_change.is_empty() {
        reasons.push(format!("across datums ({datum_change})"));
    }
    let transformation = describe_transformation(call, &mut severity, &mut reasons);
    let reason = reasons.join("; ");
    Some(trigger(
        severity,
        reason.clone(),
        json!({
            "operation": operation,
            "src_crs": source_label,
            "dst_crs": target_label,
            "transformation": call.raw.transformation.as_ref().map(|t| t.name.clone()),
        }),
        &[
            ("tool", call.tool().to_string()),
            ("src_crs", source_label),
            ("dst_crs", target_label),
            ("datum_change", datum_change),
            ("transformation", transformation),
            ("reason", reason),
            ("operation", operation.to_string()),
        ],
    ))
}

/// `raster_terrain`: gradients need horizontal and vertical distances in one unit.
fn terrain(call: &Call) -> Option<Trigger> {
    let operation = call.arg_str("operation")?.to_ascii_lowercase();
    if !GRADIENT_OPERATIONS.contains(&operation.as_str()) {
        // TRI, TPI and roughness compare heights only.
        return None;
    }
    let crs = call.dataset("input").and_then(|d| d.crs.as_ref());
    let scale = call.arg_f64("scale");
    let aspect = operation == "aspect";
    let (severity, label, kind, reason) = match crs {
        Some(crs) if crs.kind == CrsKind::Geographic => {
            let label = crs_label(crs);
            let (severity, reason) = match (aspect, scale) {
                (true, _) => (
                    Severity::Required,
                    format!(
                        "aspect on a DEM in the geographic CRS {label}: a degree of longitude is \
                         shorter than a degree of latitude away from the equator, so aspects \
                         are skewed east-west; no single scale corrects that"
                    ),
                ),
                (false, None) => (
                    Severity::Critical,
                    format!(
                        "{operation} on a DEM in the geographic CRS {label} without `scale`: \
                         heights in metres are divided by distances in degrees, so gradients \
                         are wrong by orders of magnitude (about 111120 for metres over \
                         degrees)"
                    ),
                ),
                (false, Some(s)) => (
                    Severity::Required,
                    format!(
                        "{operation} on a DEM in the geographic CRS {label} with scale {}: one \
                         ratio holds for north-south distances only; east-west ones shrink \
                         with the cosine of the latitude",
                        number(s)
                    ),
                ),
            };
            (severity, label, "geographic", reason)
        }
        Some(crs) => {
            let unit = crs.linear_unit.clone().unwrap_or_default();
            let metric = unit.is_empty() || unit == "metre" || unit == "meter";
            if metric || scale.is_some() || aspect {
                return None;
            }
            let label = crs_label(crs);
            (
                Severity::Required,
                label.clone(),
                "projected",
                format!(
                    "{operation} on a DEM in {label}, whose horizontal unit is {unit}, without \
                     `scale`: correct only if the heights are in {unit} too"
                ),
            )
        }
        None => {
            if scale.is_some() || aspect {
                return None;
            }
            (
                Severity::Required,
                "unknown".to_string(),
                "none",
                format!(
                    "{operation} on a DEM without a CRS and without `scale`: gdaldem assumes \
                     horizontal distances and heights share one unit"
                ),
            )
        }
    };
    let scale_text = scale.map(number).unwrap_or_default();
    Some(trigger(
        severity,
        reason.clone(),
        json!({
            "operation": "terrain",
            "terrain": operation,
            "crs": label,
            "crs_kind": kind,
            "scale": scale,
        }),
        &[
            ("tool", call.tool().to_string()),
            ("src_crs", label.clone()),
            ("dst_crs", label),
            ("datum_change", String::new()),
            ("transformation", String::new()),
            ("reason", reason),
            ("operation", "terrain".to_string()),
            ("scale", scale_text),
        ],
    ))
}

/// `source datum → target datum` when they differ, else empty.
fn datum_change(source: Option<&CrsFacts>, target: &CrsFacts) -> String {
    match (source.and_then(|c| c.datum.as_deref()), &target.datum) {
        (Some(a), Some(b)) if a != b => format!("{a} → {b}"),
        _ => String::new(),
    }
}

/// Describe the call's transformation, raising `severity` and adding to `reasons` for a
/// ballpark operation or missing grids.
fn describe_transformation(
    call: &Call,
    severity: &mut Severity,
    reasons: &mut Vec<String>,
) -> String {
    let Some(t) = &call.raw.transformation else {
        return String::new();
    };
    if t.ballpark {
        *severity = Severity::Critical;
        reasons.push(format!(
            "PROJ falls back to a ballpark transformation ({}): the datum shift is ignored, \
             errors of tens to hundreds of metres are possible",
            t.name
        ));
    }
    if !t.missing_grids.is_empty() {
        reasons.push(format!(
            "a more accurate transformation needs grids this machine lacks: {}",
            t.missing_grids.join(", ")
        ));
    }
    match t.accuracy_metres {
        Some(m) => format!("{} (accuracy {m} m)", t.name),
        None => format!("{} (accuracy unknown)", t.name),
    }
}

/// A number as people write it: `111120`, not `111120.0`.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        value.to_string()
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

#[cfg(test)]
mod tests {
    use super::*;
    use gdal_mcp_domain_sdk::testing::{
        call, crs, nad27, raster, raster_dataset, transformation, utm33, vector_dataset, wgs84,
    };
    use gdal_mcp_domain_sdk::{DatasetFacts, ToolCall, TransformationFacts};

    fn run(raw: ToolCall) -> Option<Trigger> {
        CrsDatum::classify(&Call::new(raw))
    }

    fn severity(trigger: &Option<Trigger>) -> Option<Severity> {
        trigger.as_ref().map(|t| t.severity)
    }

    fn key(trigger: &Option<Trigger>) -> Value {
        trigger
            .as_ref()
            .and_then(|t| serde_json::from_str(&t.key_fields).ok())
            .unwrap_or(Value::Null)
    }

    fn dem(crs: Option<CrsFacts>) -> DatasetFacts {
        raster_dataset("input", crs, raster("Float32", 1, false))
    }

    fn zonal(
        zones: Option<CrsFacts>,
        raster_crs: Option<CrsFacts>,
        t: Option<TransformationFacts>,
    ) -> ToolCall {
        let mut raw = call(
            "zonal_stats",
            json!({"input": "r.tif", "zones": "z.gpkg", "stats": ["mean"], "semantics": "cell_centre"}),
            vec![
                raster_dataset("input", raster_crs.clone(), raster("Float32", 1, false)),
                vector_dataset("zones", "GPKG", zones.clone(), &[("z", "Multi Polygon")]),
            ],
        );
        // As the host does: a target only when the CRSs differ.
        if let (Some(z), Some(r)) = (&zones, &raster_crs) {
            if !same_crs(z, r) {
                raw.target_crs = Some(r.clone());
                raw.transformation = t;
            }
        }
        raw
    }

    #[test]
    fn reprojection_table_is_unchanged() {
        let mut raw = call(
            "raster_reproject",
            json!({"dst_crs": "EPSG:4326", "resampling": "bilinear"}),
            vec![dem(Some(utm33()))],
        );
        raw.target_crs = Some(wgs84());
        let got = run(raw.clone());
        assert_eq!(severity(&got), Some(Severity::Required));
        assert_eq!(
            key(&got),
            json!({"operation": "reproject", "src_crs": "EPSG:32633", "src_crs_assigned": false,
                   "dst_crs": "EPSG:4326", "transformation": null})
        );
        raw.target_crs = Some(utm33());
        assert!(run(raw.clone()).is_none());
        raw.datasets = vec![dem(None)];
        raw.target_crs = Some(wgs84());
        assert_eq!(severity(&run(raw)), Some(Severity::Critical));
    }

    #[test]
    fn vector_reprojection_reads_the_layer_crs() {
        let mut raw = call(
            "vector_reproject",
            json!({"dst_crs": "EPSG:4326"}),
            vec![vector_dataset(
                "input",
                "GPKG",
                Some(nad27()),
                &[("roads", "Line String")],
            )],
        );
        raw.target_crs = Some(wgs84());
        raw.transformation = Some(transformation("NAD27 to WGS 84 (4)", Some(10.0), false));
        let got = run(raw.clone());
        assert_eq!(severity(&got), Some(Severity::Required));
        assert_eq!(key(&got)["src_crs"], json!("EPSG:4267"));
        raw.transformation = Some(transformation("Ballpark", None, true));
        assert_eq!(severity(&run(raw)), Some(Severity::Critical));
    }

    #[test]
    fn zonal_stats_with_zones_in_another_crs() {
        let helmert = transformation("NAD27 to WGS 84 (4)", Some(10.0), false);
        let got = run(zonal(Some(nad27()), Some(utm33()), Some(helmert)));
        assert_eq!(severity(&got), Some(Severity::Required));
        assert_eq!(
            key(&got),
            json!({"operation": "zones_to_raster", "src_crs": "EPSG:4267",
                   "dst_crs": "EPSG:32633", "transformation": "NAD27 to WGS 84 (4)"})
        );
        let ballpark = transformation("Ballpark geographic offset", None, true);
        assert_eq!(
            severity(&run(zonal(Some(nad27()), Some(utm33()), Some(ballpark)))),
            Some(Severity::Critical)
        );
        let custom = crs(None, "local grid", CrsKind::Projected, "unknown");
        assert_eq!(
            severity(&run(zonal(Some(custom), Some(utm33()), None))),
            Some(Severity::Critical)
        );
        assert!(run(zonal(Some(utm33()), Some(utm33()), None)).is_none());
        // One side without a CRS: an unstated assumption.
        let missing = run(zonal(None, Some(utm33()), None));
        assert_eq!(severity(&missing), Some(Severity::Critical));
        assert_eq!(key(&missing)["src_crs"], json!("unknown"));
        assert_eq!(
            severity(&run(zonal(Some(utm33()), None, None))),
            Some(Severity::Critical)
        );
        assert!(run(zonal(None, None, None)).is_none());
    }

    #[test]
    fn vector_clip_with_a_mask_in_another_crs() {
        let clip = |mask: bool, mask_crs: CrsFacts| {
            let arguments = if mask {
                json!({"input": "a.gpkg", "output": "b.gpkg", "mask": "m.gpkg"})
            } else {
                json!({"input": "a.gpkg", "output": "b.gpkg", "bounds": {"xmin": 0, "ymin": 0, "xmax": 1, "ymax": 1}})
            };
            let mut raw = call(
                "vector_clip",
                arguments,
                vec![
                    vector_dataset("input", "GPKG", Some(utm33()), &[("roads", "Line String")]),
                    vector_dataset("mask", "GPKG", Some(mask_crs.clone()), &[("m", "Polygon")]),
                ],
            );
            if !same_crs(&mask_crs, &utm33()) {
                raw.target_crs = Some(utm33());
            }
            run(raw)
        };
        let got = clip(true, wgs84());
        assert_eq!(severity(&got), Some(Severity::Required));
        assert_eq!(key(&got)["operation"], json!("mask_to_input"));
        assert!(clip(true, utm33()).is_none());
        assert!(clip(false, wgs84()).is_none());
    }

    #[test]
    fn terrain_on_geographic_dems() {
        let terrain = |crs: Option<CrsFacts>, arguments: Value| {
            run(call("raster_terrain", arguments, vec![dem(crs)]))
        };
        let slope = terrain(Some(wgs84()), json!({"operation": "slope"}));
        assert_eq!(severity(&slope), Some(Severity::Critical));
        assert_eq!(
            key(&slope),
            json!({"operation": "terrain", "terrain": "slope", "crs": "EPSG:4326",
                   "crs_kind": "geographic", "scale": null})
        );
        let scaled = terrain(
            Some(wgs84()),
            json!({"operation": "hillshade", "scale": 111120}),
        );
        assert_eq!(severity(&scaled), Some(Severity::Required));
        assert_eq!(
            severity(&terrain(Some(wgs84()), json!({"operation": "aspect"}))),
            Some(Severity::Required)
        );
        assert!(terrain(Some(wgs84()), json!({"operation": "tri"})).is_none());
        assert!(terrain(Some(utm33()), json!({"operation": "slope"})).is_none());
        let mut feet = utm33();
        feet.linear_unit = Some("US survey foot".to_string());
        assert_eq!(
            severity(&terrain(Some(feet.clone()), json!({"operation": "slope"}))),
            Some(Severity::Required)
        );
        assert!(terrain(Some(feet), json!({"operation": "slope", "scale": 3.28})).is_none());
        assert_eq!(
            severity(&terrain(None, json!({"operation": "slope"}))),
            Some(Severity::Required)
        );
    }

    #[test]
    fn terrain_prompt_and_validation() {
        let scaled = run(call(
            "raster_terrain",
            json!({"operation": "slope", "scale": 111120.0}),
            vec![dem(Some(wgs84()))],
        ));
        let trigger = scaled
            .as_ref()
            .map(|t| t.prompt_arguments.clone())
            .unwrap_or_default();
        let text = CrsDatum::render_prompt(&trigger);
        assert!(
            text.contains("scale 111120") && text.contains("CRS and units"),
            "{text}"
        );
        let key = key(&scaled);
        let just = |m: &str| json!({"choice": {"method": m}});
        assert!(CrsDatum::validate(&key, &just("scale 111,120 (metres per degree)")).is_empty());
        assert_eq!(CrsDatum::validate(&key, &just("EPSG:4326")).len(), 1);
        let unscaled = json!({"operation": "terrain", "crs": "EPSG:4326", "scale": null});
        assert!(CrsDatum::validate(&unscaled, &just("compute in EPSG:4326 as is")).is_empty());
    }

    #[test]
    fn validation_uses_the_known_crs_when_one_is_missing() {
        let just = |m: &str| json!({"choice": {"method": m}});
        let key =
            json!({"operation": "zones_to_raster", "src_crs": "EPSG:4267", "dst_crs": "unknown"});
        assert!(CrsDatum::validate(&key, &just("NAD27 (EPSG:4267)")).is_empty());
        let key =
            json!({"operation": "reproject", "src_crs": "EPSG:32633", "dst_crs": "EPSG:4326"});
        assert!(CrsDatum::validate(&key, &just("epsg 4326")).is_empty());
        assert_eq!(CrsDatum::validate(&key, &just("EPSG:3857")).len(), 1);
        // The reprojection prompt is the original one.
        let args = vec![PromptValue {
            name: "dst_crs".to_string(),
            value: "EPSG:4326".to_string(),
        }];
        assert!(CrsDatum::render_prompt(&args).starts_with("## CRS and datum decision"));
    }
}
