//! The `resampling` risk domain: decisions that move values onto a new pixel grid.
//!
//! Every change of the pixel grid (reprojection, resolution change, overviews, compositing of
//! unlike grids) computes new cell values from old ones, and the method decides what they mean.
//! Interpolating a land-cover class code produces classes that do not exist; nearest neighbour on
//! a continuous surface shifts it by up to half a cell and aliases when downsampling. This domain
//! asks why the method fits the data, and makes an interpolating method on categorical data
//! `critical`, with the evidence (`categorical_input`: data type, colour table, attribute table,
//! few integer classes) and a ready-to-use alternative: `mode` when the output cells are
//! coarser than the input's (each output cell then summarises several input cells, and the
//! majority class is the faithful summary), `nearest` otherwise (same, finer or unknown cell
//! size: it copies codes exactly).
//!
//! An `overview_resampling` argument, in any call that has one, is a grid change of its own
//! (overviews are coarser grids of the output) and is judged like `resampling`.
//!
//! Block aggregation (`raster_aggregate`) is not a resampling decision here: its statistic is
//! the decision, and the `aggregation` domain owns it.

use gdal_mcp_domain_sdk::careful::alternative_named;
use gdal_mcp_domain_sdk::{
    alternative, approx, categorical_confidence, categorical_evidence, categorical_fact,
    check_answers, chosen_method, continuous_confidence, crs_label, evidence, evidence_answer,
    export_domain, field_error, find_evidence, json, names, prompt_argument, shorten, trigger,
    Call, CrsFacts, CrsKind, DatasetFacts, Domain, DomainInfo, EvidenceItem, FieldError, Finding,
    GridRelation, Need, RasterFacts, Severity, Trigger, Value,
};

struct Resampling;

const METHODOLOGY: &str = include_str!("methodology.md");

/// Methods that keep an input cell's value as is (safe for classes).
const CLASS_PRESERVING: &[&str] = &["nearest", "mode"];

/// The methods GDAL knows that compute a value from several input cells: interpolators,
/// aggregates and order statistics. On class codes each of them can produce a code of no class
/// or of another class.
const MIXING: &[&str] = &[
    "bilinear",
    "cubic",
    "cubicspline",
    "lanczos",
    "gauss",
    "average",
    "average_magphase",
    "rms",
    "sum",
    "min",
    "max",
    "med",
    "q1",
    "q3",
];

/// Words an answer to `categorical_input` must use to show it faced what interpolated class
/// codes are (matched case-insensitively, as substrings).
const CODES_FACED: &[&str] = &[
    "interpolat",
    "blend",
    "mixed",
    "average",
    "not a class",
    "no class",
    "continuous",
    "fraction",
];

/// Evidence ids.
mod ids {
    pub const CATEGORICAL_INPUT: &str = "categorical_input";
    pub const CLASS_PRESERVING_METHOD: &str = "class_preserving_method";
    pub const CONTINUOUS_INPUT: &str = "continuous_input";
}

/// Where a call names a resampling method.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The `resampling` argument.
    Resampling,
    /// `overviews.resampling` of `raster_convert`.
    OverviewsObject,
    /// A top-level `overview_resampling` argument.
    OverviewResampling,
}

/// One method the call applies to move values onto a new grid.
struct Change {
    source: Source,
    /// `reproject`, `resample`, `overviews` or `composite`.
    operation: &'static str,
    method: String,
    /// Output cell size over input cell size (linear); `None` when unknown.
    factor: Option<f64>,
}

impl Change {
    fn mixes(&self) -> bool {
        !CLASS_PRESERVING.contains(&self.method.as_str())
    }

    /// The argument that names this method, as the alternative spells it.
    fn replaced_by(&self, call: &Call, method: &str) -> (String, Value) {
        match self.source {
            Source::Resampling => ("resampling".to_string(), json!(method)),
            Source::OverviewResampling => ("overview_resampling".to_string(), json!(method)),
            Source::OverviewsObject => {
                let mut overviews = call
                    .args
                    .get("overviews")
                    .cloned()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                overviews["resampling"] = json!(method);
                ("overviews".to_string(), overviews)
            }
        }
    }

    /// The class-preserving method that fits this change: `mode` when the output cells are
    /// coarser, `nearest` otherwise.
    fn safe_method(&self) -> &'static str {
        if self.factor.is_some_and(|f| f > 1.0 + 1e-9) {
            "mode"
        } else {
            "nearest"
        }
    }
}

/// A grid change found in a call: what it is, the methods, and the rasters it reads.
struct GridChange<'a> {
    /// The main change first, then an `overview_resampling` one.
    changes: Vec<Change>,
    rasters: Vec<&'a DatasetFacts>,
    /// The input cell size and how the output's compares, for the facts.
    cells: String,
}

/// The method of a call argument, lower case.
fn method_of(value: Option<&str>) -> String {
    value.unwrap_or("nearest").to_ascii_lowercase()
}

/// `(x, y)` cell size of a raster, positive.
fn cell_size(raster: &RasterFacts) -> Option<(f64, f64)> {
    let (x, y) = raster.pixel_size?;
    (x != 0.0 && y != 0.0).then(|| (x.abs(), y.abs()))
}

/// A pair of numbers from an argument `[a, b]`.
fn pair(call: &Call, name: &str) -> Option<(f64, f64)> {
    let items = call.args.get(name)?.as_array()?;
    Some((items.first()?.as_f64()?, items.get(1)?.as_f64()?))
}

/// Metres per CRS unit of a projected CRS.
fn unit_metres(crs: &CrsFacts) -> Option<f64> {
    crs.linear_unit_metres
        .or_else(|| matches!(crs.linear_unit.as_deref(), Some("metre" | "meter")).then_some(1.0))
}

/// The smallest overview factor of the call (`levels`, else `overviews.levels`), default 2.
fn overview_factor(call: &Call) -> f64 {
    let levels = call
        .args
        .get("levels")
        .or_else(|| call.args.get("overviews").and_then(|o| o.get("levels")))
        .and_then(Value::as_array);
    levels
        .and_then(|l| l.iter().filter_map(Value::as_f64).reduce(f64::min))
        .filter(|f| *f >= 1.0)
        .unwrap_or(2.0)
}

/// How the output cells of a `raster_reproject` or `raster_resample` compare with the input's:
/// the linear factor (>1 coarser) and a sentence with the sizes.
fn output_scale(call: &Call, dataset: &DatasetFacts) -> (Option<f64>, String) {
    let Some(raster) = dataset.raster.as_ref() else {
        return (None, String::new());
    };
    let input = cell_size(raster);
    let input_text = input.map_or(
        "input cells of unknown size (no geotransform)".to_string(),
        |(x, y)| format!("input cells {} × {}", approx(x, 4), approx(y, 4)),
    );
    if let Some((w, h)) = pair(call, "size").filter(|_| !call.has_arg("bounds")) {
        if w > 0.0 && h > 0.0 {
            let cells_in = f64::from(raster.width) * f64::from(raster.height);
            let factor = (cells_in / (w * h)).sqrt();
            return (
                Some(factor),
                format!(
                    "{input_text}; output {} × {} cells for the input's {} × {} ({} × the \
                     input's cell size)",
                    approx(w, 6),
                    approx(h, 6),
                    raster.width,
                    raster.height,
                    approx(factor, 3)
                ),
            );
        }
    }
    let Some((rx, ry)) = pair(call, "resolution").map(|(x, y)| (x.abs(), y.abs())) else {
        return (None, input_text);
    };
    let output_text = format!("output cells {} × {}", approx(rx, 4), approx(ry, 4));
    let Some((ix, iy)) = input else {
        return (None, format!("{input_text}; {output_text}"));
    };
    // Both sizes in one unit: the CRS's for a resample, metres or degrees for a reprojection.
    let same_units = || -> Option<((f64, f64), (f64, f64))> {
        if call.tool() != "raster_reproject" {
            return Some(((ix, iy), (rx, ry)));
        }
        let src = dataset.crs.as_ref()?;
        let dst = call.raw.target_crs.as_ref()?;
        match (src.kind, dst.kind) {
            (CrsKind::Geographic, CrsKind::Geographic) => Some(((ix, iy), (rx, ry))),
            (CrsKind::Projected, CrsKind::Projected) => {
                let (s, d) = (unit_metres(src)?, unit_metres(dst)?);
                Some(((ix * s, iy * s), (rx * d, ry * d)))
            }
            (CrsKind::Geographic, CrsKind::Projected) => {
                let metres = raster.georeferencing.cell_size_metres?;
                let d = unit_metres(dst)?;
                Some((metres, (rx * d, ry * d)))
            }
            _ => None,
        }
    };
    match same_units() {
        Some(((ix, iy), (ox, oy))) if ix > 0.0 && iy > 0.0 => {
            let factor = ((ox / ix) * (oy / iy)).sqrt();
            (
                Some(factor),
                format!(
                    "{input_text}; {output_text} ({} × the input's cell size)",
                    approx(factor, 3)
                ),
            )
        }
        _ => (
            None,
            format!("{input_text}; {output_text} (units not comparable)"),
        ),
    }
}

/// The grid change `call` makes, if any.
fn grid_change(call: &Call) -> Option<GridChange<'_>> {
    let input = || call.dataset("input").filter(|d| d.raster.is_some());
    let overview = |source: Source, method: String| Change {
        source,
        operation: "overviews",
        method,
        factor: Some(overview_factor(call)),
    };
    let overview_text = || {
        format!(
            "overviews {}× coarser or more",
            approx(overview_factor(call), 3)
        )
    };
    let (mut changes, rasters, cells) = match call.tool() {
        tool @ ("raster_reproject" | "raster_resample") => {
            // The output is the input's grid or a window of it: no value is computed.
            if call.grids() == Some(GridRelation::Aligned) {
                return None;
            }
            let dataset = input()?;
            let (factor, cells) = output_scale(call, dataset);
            let operation = if tool == "raster_reproject" {
                "reproject"
            } else {
                "resample"
            };
            let change = Change {
                source: Source::Resampling,
                operation,
                method: method_of(call.arg_str("resampling")),
                factor,
            };
            (vec![change], vec![dataset], cells)
        }
        "raster_overviews" => {
            let change = overview(Source::Resampling, method_of(call.arg_str("resampling")));
            (vec![change], vec![input()?], overview_text())
        }
        "raster_convert" => {
            // Only a conversion that builds overviews changes a grid.
            let object = call.args.get("overviews").filter(|o| o.is_object());
            let change = match object {
                Some(o) => overview(
                    Source::OverviewsObject,
                    method_of(o.get("resampling").and_then(Value::as_str)),
                ),
                None if call.has_arg("overview_resampling") => overview(
                    Source::OverviewResampling,
                    method_of(call.arg_str("overview_resampling")),
                ),
                None => return None,
            };
            (vec![change], vec![input()?], overview_text())
        }
        "raster_composite" => {
            // Inputs on other grids are warped onto the first input's grid.
            if call.grids() != Some(GridRelation::Differ) {
                return None;
            }
            let rasters: Vec<&DatasetFacts> = call
                .raw
                .datasets
                .iter()
                .filter(|d| d.role.starts_with("input") && d.raster.is_some())
                .collect();
            let first = rasters.first()?;
            // The categorical input that moves (not the first: it is the grid), compared
            // with the first when both share a CRS.
            let moving = rasters
                .iter()
                .skip(1)
                .find(|d| d.raster.as_ref().is_some_and(|r| r.looks_categorical))
                .or_else(|| rasters.get(1));
            let grid = first.raster.as_ref().and_then(cell_size);
            let (factor, cells) = match (moving, grid) {
                (Some(m), Some((gx, gy))) => {
                    let from = m.raster.as_ref().and_then(cell_size);
                    let same_crs =
                        m.crs.as_ref().map(crs_label) == first.crs.as_ref().map(crs_label);
                    match from {
                        Some((mx, my)) if same_crs => {
                            let factor = ((gx / mx) * (gy / my)).sqrt();
                            (
                                Some(factor),
                                format!(
                                    "`{}` cells {} × {} are warped onto the `{}` grid of {} × {} \
                                     ({} × their size)",
                                    m.role,
                                    approx(mx, 4),
                                    approx(my, 4),
                                    first.role,
                                    approx(gx, 4),
                                    approx(gy, 4),
                                    approx(factor, 3)
                                ),
                            )
                        }
                        _ => (
                            None,
                            format!(
                                "`{}` is warped onto the `{}` grid of {} × {}",
                                m.role,
                                first.role,
                                approx(gx, 4),
                                approx(gy, 4)
                            ),
                        ),
                    }
                }
                _ => (None, String::new()),
            };
            let change = Change {
                source: Source::Resampling,
                operation: "composite",
                method: method_of(call.arg_str("resampling")),
                factor,
            };
            (vec![change], rasters, cells)
        }
        _ if call.has_arg("overview_resampling") => {
            // Any other call that builds overviews of its output.
            let change = overview(
                Source::OverviewResampling,
                method_of(call.arg_str("overview_resampling")),
            );
            (vec![change], vec![input()?], overview_text())
        }
        _ => return None,
    };
    let main_source = changes.first().map(|c| c.source);
    if call.has_arg("overview_resampling") && main_source != Some(Source::OverviewResampling) {
        changes.push(overview(
            Source::OverviewResampling,
            method_of(call.arg_str("overview_resampling")),
        ));
    }
    Some(GridChange {
        changes,
        rasters,
        cells,
    })
}

fn rank(severity: Severity) -> u8 {
    match severity {
        Severity::Advisory => 0,
        Severity::Required => 1,
        Severity::Critical => 2,
    }
}

/// What `method` does to values, for the `why` of continuous data.
fn effect(method: &str) -> &'static str {
    match method {
        "nearest" => {
            "copies the nearest input cell: values stay exact but shift by up to half a cell, and \
             a coarser grid keeps one sample per footprint"
        }
        "mode" => "keeps the most frequent value of each footprint, which on measurements is arbitrary",
        "bilinear" | "cubic" | "cubicspline" | "lanczos" | "gauss" => {
            "interpolates between cells: smoother values that did not exist in the input (cubic and \
             lanczos can overshoot near sharp edges)"
        }
        "average" | "rms" | "average_magphase" => {
            "averages each footprint: extremes are flattened"
        }
        "sum" => "adds each footprint: right for counts, wrong for intensive measurements",
        _ => "keeps an order statistic of each footprint: an extreme or a quantile, not a typical value",
    }
}

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
        let GridChange {
            changes,
            rasters,
            cells,
        } = grid_change(call)?;
        let primary = changes.first()?;
        // Categorical if any raster read looks categorical; the evidence names that raster.
        let shown = rasters
            .iter()
            .find(|d| d.raster.as_ref().is_some_and(|r| r.looks_categorical))
            .or_else(|| rasters.first())?;
        let raster = shown.raster.as_ref()?;
        let categorical = raster.looks_categorical;
        let summary = categorical_evidence(raster);
        let mut fact = categorical_fact(raster);
        if rasters.len() > 1 {
            fact = format!("`{}`: {fact}", shown.role);
        }
        if !cells.is_empty() {
            fact.push_str(&format!("; {cells}"));
        }
        let data = if categorical {
            "categorical"
        } else {
            "continuous"
        };

        let mut severity = Severity::Advisory;
        let mut reasons = Vec::new();
        for change in &changes {
            let method = &change.method;
            let (s, reason) = match (categorical, change.mixes()) {
                (true, true) => (
                    Severity::Critical,
                    format!(
                        "{method} resampling mixes class codes of categorical data ({summary}): \
                         it invents classes that do not exist"
                    ),
                ),
                (true, false) => (
                    Severity::Advisory,
                    format!("{method} keeps class codes intact on categorical data ({summary})"),
                ),
                (false, _) if change.operation == "composite" => (
                    Severity::Required,
                    format!(
                        "the composite's inputs lie on different grids: they are warped onto \
                         the first input's grid with {method}, on continuous data"
                    ),
                ),
                (false, _) => (
                    Severity::Required,
                    format!(
                        "{} computes new cell values with {method} on continuous data",
                        change.operation
                    ),
                ),
            };
            if rank(s) > rank(severity) {
                severity = s;
            }
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
        let reason = reasons.join("; ");

        let described = |list: &[&Change]| {
            list.iter()
                .map(|c| match c.source {
                    Source::Resampling => c.method.clone(),
                    _ => format!("{} (overviews)", c.method),
                })
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let mut items = Vec::new();
        let mixing: Vec<&Change> = changes.iter().filter(|c| c.mixes()).collect();
        if categorical && !mixing.is_empty() {
            let mut replacement = serde_json::Map::new();
            for change in &mixing {
                let (name, value) = change.replaced_by(call, change.safe_method());
                replacement.insert(name, value);
            }
            items.push(evidence(
                ids::CATEGORICAL_INPUT,
                format!("{fact}; the call resamples it with {}", described(&mixing)),
                format!(
                    "{} compute(s) each output cell from several input class codes: along every \
                     class boundary the output holds values that are no class, or a different \
                     class",
                    described(&mixing)
                ),
                Some(Value::Object(replacement)),
            ));
        } else if categorical {
            // Nearest or mode throughout: codes survive. Nearest on a coarser grid keeps one
            // sample per footprint, where mode would keep the majority.
            let all: Vec<&Change> = changes.iter().collect();
            let mut replacement = serde_json::Map::new();
            for change in &changes {
                if change.method == "nearest" && change.safe_method() == "mode" {
                    let (name, value) = change.replaced_by(call, "mode");
                    replacement.insert(name, value);
                }
            }
            let why = if replacement.is_empty() {
                "every output cell holds an input class code; small classes can still thin out \
                 or vanish on a coarser grid"
                    .to_string()
            } else {
                "nearest keeps one input cell per coarser output cell, so the class it copies \
                 depends on where the sample falls; mode keeps each footprint's majority class"
                    .to_string()
            };
            items.push(evidence(
                ids::CLASS_PRESERVING_METHOD,
                format!("{fact}; the call resamples it with {}", described(&all)),
                why,
                (!replacement.is_empty()).then_some(Value::Object(replacement)),
            ));
        } else {
            let all: Vec<&Change> = changes.iter().collect();
            let effects: Vec<String> = changes
                .iter()
                .map(|c| format!("{}: {}", c.method, effect(&c.method)))
                .collect();
            items.push(evidence(
                ids::CONTINUOUS_INPUT,
                format!("{fact}; {} with {}", primary.operation, described(&all)),
                effects.join("; "),
                None,
            ));
        }

        let mut key =
            json!({ "operation": primary.operation, "method": primary.method, "data": data });
        let mut method_text = primary.method.clone();
        if let Some(secondary) = changes.get(1).filter(|c| c.method != primary.method) {
            key["overview_method"] = json!(secondary.method);
            method_text = format!("{} (overviews: {})", primary.method, secondary.method);
        }
        let mut verdict = trigger(
            severity,
            reason.clone(),
            key,
            &[
                ("tool", call.tool().to_string()),
                ("method", method_text),
                ("data", data.to_string()),
                ("evidence", summary),
                ("reason", reason),
            ],
            items,
        );
        // The verdict rests on what the data is: declared classes (a colour table, an
        // attribute table) and floating-point measurements are certain; a few integer values
        // in a sample only look like classes, and an integer band without them only looks
        // like measurements.
        verdict.confidence = Some(if categorical {
            categorical_confidence(raster)
        } else {
            continuous_confidence(raster)
        });
        Some(verdict)
    }

    /// Which interpolation a team uses on measurements (`continuous_input`) is its own
    /// convention, and so is the advisory note on a class-preserving method; blending class
    /// codes (`categorical_input`) invents classes and is never relaxable.
    fn relaxable(evidence_id: &str) -> bool {
        matches!(
            evidence_id,
            ids::CONTINUOUS_INPUT | ids::CLASS_PRESERVING_METHOD
        )
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn validate(
        key_fields: &Value,
        evidence: &[EvidenceItem],
        justification: &Value,
    ) -> Vec<FieldError> {
        let field = |name: &str| key_fields.get(name).and_then(Value::as_str);
        let method = field("method").unwrap_or("");
        let mut wanted = vec![method];
        wanted.extend(field("overview_method"));
        let Some(chosen) = chosen_method(justification) else {
            return vec![field_error("/choice/method", "missing")];
        };
        let mut errors = Vec::new();
        let missing: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|m| !names(chosen, m))
            .collect();
        if !missing.is_empty() {
            errors.push(field_error(
                "/choice/method",
                format!(
                    "the call resamples with \"{}\", but the choice names \"{}\"; \
                     justify the method this call uses",
                    wanted.join("\" and \""),
                    shorten(chosen, 200)
                ),
            ));
        }
        if let Some(item) = find_evidence(evidence, ids::CATEGORICAL_INPUT) {
            let interpolating = MIXING.iter().any(|m| names(chosen, m))
                || wanted
                    .iter()
                    .any(|m| !CLASS_PRESERVING.contains(m) && names(chosen, m));
            let answer = evidence_answer(justification, ids::CATEGORICAL_INPUT)
                .unwrap_or("")
                .to_ascii_lowercase();
            let faced = CODES_FACED.iter().any(|w| answer.contains(w));
            if interpolating && !faced {
                let offered = alternative(item)
                    .map(|a| format!(", or rerun the call with {a}"))
                    .unwrap_or_default();
                errors.push(field_error(
                    "/evidence/categorical_input",
                    format!(
                        "the call interpolates categorical data with \"{}\"; say in \
                         evidence.categorical_input why interpolated class codes (values that \
                         are no class, or a different class, where codes are blended) are \
                         acceptable here, e.g. because the codes are continuous fractions, not \
                         classes{offered}",
                        wanted.join("\" and \"")
                    ),
                ));
            }
        }
        let methods: Vec<&str> = CLASS_PRESERVING
            .iter()
            .chain(MIXING)
            .copied()
            .filter(|m| *m != "average_magphase")
            .collect();
        let findings = [
            Finding::new(
                ids::CONTINUOUS_INPUT,
                vec![alternative_named(
                    &methods,
                    &wanted,
                    "the resampling method considered instead, by its name",
                )],
            ),
            Finding::new(ids::CATEGORICAL_INPUT, vec![Need::RejectsOffered]),
        ];
        errors.extend(check_answers(evidence, justification, &findings));
        errors
    }
}

export_domain!(Resampling);

#[cfg(test)]
mod tests {
    use super::*;
    use gdal_mcp_domain_sdk::testing::{call, raster, raster_dataset, utm33, wgs84, with_grids};
    use gdal_mcp_domain_sdk::testing::{checked, evidence_item as item, offered};
    use gdal_mcp_domain_sdk::ToolCall;

    /// Classify, and check the evidence contract.
    fn run(raw: ToolCall) -> Option<Trigger> {
        checked(Resampling::classify(&Call::new(raw)))
    }

    fn classify_with(tool: &str, arguments: Value, categorical: bool) -> Option<Trigger> {
        let data_type = if categorical { "Byte" } else { "Float32" };
        let input = raster_dataset("input", Some(utm33()), raster(data_type, 1, categorical));
        run(call(tool, arguments, vec![input]))
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

    /// R13-B9: a warp whose output is the input's grid or a window of it (the host's `grids`
    /// fact `aligned`) computes no value: nothing is asked, whatever the method or data; the
    /// same call without the fact is asked.
    #[test]
    fn r13_b9_a_warp_onto_the_inputs_own_grid_is_not_gated() {
        for tool in ["raster_reproject", "raster_resample"] {
            for categorical in [false, true] {
                let data_type = if categorical { "Byte" } else { "Float32" };
                let make = || {
                    call(
                        tool,
                        json!({"resampling": "bilinear", "resolution": [30, 30]}),
                        vec![raster_dataset(
                            "input",
                            Some(utm33()),
                            raster(data_type, 1, categorical),
                        )],
                    )
                };
                assert!(run(with_grids(make(), GridRelation::Aligned)).is_none());
                assert!(run(make()).is_some(), "{tool} {categorical}");
            }
        }
    }

    #[test]
    fn grid_changes_of_continuous_data_are_required() {
        for (tool, args, operation) in [
            (
                "raster_reproject",
                json!({"resampling": "bilinear", "dst_crs": "EPSG:4326"}),
                "reproject",
            ),
            (
                "raster_resample",
                json!({"resampling": "cubic", "resolution": [60, 60]}),
                "resample",
            ),
            (
                "raster_overviews",
                json!({"resampling": "average"}),
                "overviews",
            ),
            (
                "raster_convert",
                json!({"format": "COG", "overviews": {"resampling": "lanczos"}}),
                "overviews",
            ),
        ] {
            let got = classify_with(tool, args, false);
            assert_eq!(severity(&got), Some(Severity::Required), "{tool}");
            assert_eq!(key(&got)["operation"], json!(operation), "{tool}");
        }
    }

    #[test]
    fn interpolation_on_categorical_data_is_critical_and_nearest_advisory() {
        let bilinear = classify_with("raster_resample", json!({"resampling": "bilinear"}), true);
        assert_eq!(severity(&bilinear), Some(Severity::Critical));
        let gauss = classify_with(
            "raster_convert",
            json!({"overviews": {"resampling": "gauss"}}),
            true,
        );
        assert_eq!(severity(&gauss), Some(Severity::Critical));
        let nearest = classify_with("raster_overviews", json!({"resampling": "nearest"}), true);
        assert_eq!(severity(&nearest), Some(Severity::Advisory));
        let mode = classify_with(
            "raster_convert",
            json!({"overviews": {"resampling": "mode"}}),
            true,
        );
        assert_eq!(severity(&mode), Some(Severity::Advisory));
        assert_eq!(
            key(&bilinear),
            json!({"operation": "resample", "method": "bilinear", "data": "categorical"})
        );
    }

    #[test]
    fn convert_without_overviews_and_aggregate_are_not_resampling() {
        assert!(classify_with("raster_convert", json!({"format": "COG"}), false).is_none());
        assert!(classify_with(
            "raster_aggregate",
            json!({"factor": 4, "statistic": "average"}),
            false
        )
        .is_none());
        assert!(classify_with("raster_info", json!({"input": "x.tif"}), false).is_none());
    }

    #[test]
    fn composites_resample_only_when_grids_differ() {
        let inputs = |second_categorical: bool| {
            vec![
                raster_dataset("input", Some(utm33()), raster("Float32", 1, false)),
                raster_dataset(
                    "input2",
                    Some(utm33()),
                    raster("Byte", 1, second_categorical),
                ),
            ]
        };
        let composite = |grids: GridRelation, categorical: bool| {
            run(with_grids(
                call(
                    "raster_composite",
                    json!({"statistic": "max", "resampling": "bilinear"}),
                    inputs(categorical),
                ),
                grids,
            ))
        };
        assert!(composite(GridRelation::Aligned, false).is_none());
        let differ = composite(GridRelation::Differ, false);
        assert_eq!(severity(&differ), Some(Severity::Required));
        assert_eq!(
            key(&differ),
            json!({"operation": "composite", "method": "bilinear", "data": "continuous"})
        );
        // A categorical second input makes interpolation critical.
        assert_eq!(
            severity(&composite(GridRelation::Differ, true)),
            Some(Severity::Critical)
        );
    }

    #[test]
    fn validate_wants_the_method_the_call_uses() {
        let key = json!({"operation": "overviews", "method": "average", "data": "continuous"});
        let just = |m: &str| json!({"choice": {"method": m}});
        assert!(Resampling::validate(&key, &[], &just("Average of the footprint")).is_empty());
        assert_eq!(Resampling::validate(&key, &[], &just("cubic")).len(), 1);
        assert_eq!(Resampling::validate(&key, &[], &json!({})).len(), 1);
    }

    #[test]
    fn interpolating_classes_brings_the_evidence_and_a_class_preserving_alternative() {
        let coarser = classify_with(
            "raster_resample",
            json!({"resampling": "bilinear", "resolution": [60, 60]}),
            true,
        );
        assert_eq!(severity(&coarser), Some(Severity::Critical));
        let categorical = item(&coarser, "categorical_input");
        assert!(
            categorical.fact.starts_with(
                "band 1 is Byte with a colour table; a 256 × 256 sample of it holds \
                              at most 32 distinct integer values; input cells 30 × 30; output \
                              cells 60 × 60 (2 × the input's cell size)"
            ),
            "{}",
            categorical.fact
        );
        assert_eq!(
            alternative(&categorical),
            Some(json!({"resampling": "mode"}))
        );
        // Same or finer cells, or unknown ones: nearest copies codes exactly.
        let finer = classify_with(
            "raster_resample",
            json!({"resampling": "cubic", "resolution": [15, 15]}),
            true,
        );
        assert_eq!(
            offered(&finer, "categorical_input"),
            Some(json!({"resampling": "nearest"}))
        );
        let reprojected = classify_with(
            "raster_reproject",
            json!({"resampling": "bilinear", "dst_crs": "EPSG:4326"}),
            true,
        );
        assert_eq!(
            offered(&reprojected, "categorical_input"),
            Some(json!({"resampling": "nearest"}))
        );
        // Fewer output cells than input cells: coarser.
        let sized = classify_with(
            "raster_resample",
            json!({"resampling": "average", "size": [25, 25]}),
            true,
        );
        assert!(item(&sized, "categorical_input")
            .fact
            .contains("4 × the input's cell size"));
        assert_eq!(
            offered(&sized, "categorical_input"),
            Some(json!({"resampling": "mode"}))
        );
        // Overviews are always coarser; the alternative keeps the overviews object whole.
        let overviews = classify_with(
            "raster_convert",
            json!({"format": "COG", "overviews": {"resampling": "average", "levels": [2, 4]}}),
            true,
        );
        assert_eq!(
            offered(&overviews, "categorical_input"),
            Some(json!({"overviews": {"resampling": "mode", "levels": [2, 4]}}))
        );
        let gdaladdo = classify_with("raster_overviews", json!({"resampling": "gauss"}), true);
        assert_eq!(
            offered(&gdaladdo, "categorical_input"),
            Some(json!({"resampling": "mode"}))
        );
    }

    #[test]
    fn reprojection_compares_cells_in_metres() {
        let mut r = raster("Byte", 1, true);
        r.pixel_size = Some((0.000_277_777_8, -0.000_277_777_8));
        r.georeferencing.cell_size_metres = Some((21.4, 30.9));
        let mut raw = call(
            "raster_reproject",
            json!({"resampling": "bilinear", "dst_crs": "EPSG:32633", "resolution": [100, 100]}),
            vec![raster_dataset("input", Some(wgs84()), r)],
        );
        raw.target_crs = Some(utm33());
        let got = run(raw);
        assert_eq!(
            offered(&got, "categorical_input"),
            Some(json!({"resampling": "mode"}))
        );
    }

    #[test]
    fn class_preserving_and_continuous_grid_changes_carry_evidence() {
        let nearest = classify_with(
            "raster_resample",
            json!({"resampling": "nearest", "resolution": [90, 90]}),
            true,
        );
        assert_eq!(severity(&nearest), Some(Severity::Advisory));
        assert_eq!(
            offered(&nearest, "class_preserving_method"),
            Some(json!({"resampling": "mode"}))
        );
        let mode = classify_with("raster_overviews", json!({"resampling": "mode"}), true);
        assert_eq!(offered(&mode, "class_preserving_method"), None);
        let continuous = classify_with(
            "raster_resample",
            json!({"resampling": "cubic", "resolution": [60, 60]}),
            false,
        );
        let fact = item(&continuous, "continuous_input").fact;
        assert!(
            fact.starts_with("1 band(s) of Float32") && fact.contains("2 × the input's cell size"),
            "{fact}"
        );
    }

    #[test]
    fn overview_resampling_is_judged_like_resampling() {
        // Nearest for the warp, bilinear for the overviews of a categorical output.
        let got = classify_with(
            "raster_reproject",
            json!({"resampling": "nearest", "overview_resampling": "bilinear", "dst_crs": "EPSG:4326"}),
            true,
        );
        assert_eq!(severity(&got), Some(Severity::Critical));
        assert_eq!(
            key(&got),
            json!({"operation": "reproject", "method": "nearest", "data": "categorical",
                   "overview_method": "bilinear"})
        );
        assert_eq!(
            offered(&got, "categorical_input"),
            Some(json!({"overview_resampling": "mode"}))
        );
        // Both interpolating: the alternative replaces both.
        let both = classify_with(
            "raster_resample",
            json!({"resampling": "cubic", "overview_resampling": "average", "resolution": [60, 60]}),
            true,
        );
        assert_eq!(
            offered(&both, "categorical_input"),
            Some(json!({"resampling": "mode", "overview_resampling": "mode"}))
        );
        // Alone, it is the overviews decision of a conversion, or of any writing tool.
        let convert = classify_with(
            "raster_convert",
            json!({"format": "COG", "overview_resampling": "lanczos"}),
            true,
        );
        assert_eq!(
            key(&convert),
            json!({"operation": "overviews", "method": "lanczos", "data": "categorical"})
        );
        let aggregate = classify_with(
            "raster_aggregate",
            json!({"factor": 2, "statistic": "mode", "overview_resampling": "average"}),
            false,
        );
        assert_eq!(severity(&aggregate), Some(Severity::Required));
        assert_eq!(key(&aggregate)["operation"], json!("overviews"));
        // Validate wants both methods named.
        let k = key(&got);
        let just = |m: &str| {
            json!({"choice": {"method": m},
                   "evidence": {"categorical_input": "the overviews are only a display aid; blended codes are fine there"}})
        };
        assert_eq!(Resampling::validate(&k, &[], &just("nearest")).len(), 1);
        assert!(Resampling::validate(&k, &[], &just("nearest, bilinear overviews")).is_empty());
    }

    #[test]
    fn interpolating_classes_needs_an_answer_about_interpolated_codes() {
        let got = classify_with(
            "raster_resample",
            json!({"resampling": "bilinear", "resolution": [60, 60]}),
            true,
        );
        let k = key(&got);
        let evidence = got.map(|t| t.evidence).unwrap_or_default();
        let just = |answer: &str| {
            json!({"choice": {"method": "bilinear"},
                   "alternatives": [{"method": "mode",
                       "why_not": "the majority class drops the intermediate shares the model needs"}],
                   "evidence": {"categorical_input": answer}})
        };
        let errors = Resampling::validate(
            &k,
            &evidence,
            &just("we need a smooth picture for the poster"),
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/evidence/categorical_input");
        assert!(
            errors[0].message.contains(r#"{"resampling":"mode"}"#),
            "{}",
            errors[0].message
        );
        // Unanswered, and the offered mode not rejected: the answer is missing, it does not
        // face blended codes, and the alternative is not rejected.
        let errors =
            Resampling::validate(&k, &evidence, &json!({"choice": {"method": "bilinear"}}));
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/evidence/categorical_input",
                "/evidence/categorical_input",
                "/alternatives"
            ],
            "{errors:?}"
        );
        for accepted in [
            "The codes are tree-cover fractions (0-100), so interpolation gives a meaningful share",
            "Blended codes at field edges are masked afterwards",
            "values that are NO CLASS are dropped downstream",
        ] {
            assert!(
                Resampling::validate(&k, &evidence, &just(accepted)).is_empty(),
                "{accepted}"
            );
        }
        // Continuous data, or no categorical evidence: nothing more to say.
        assert!(Resampling::validate(&k, &[], &just("we need a smooth picture")).is_empty());
    }

    /// The host refuses field errors over 1 KiB as a broken contract: a long choice is quoted
    /// shortened.
    #[test]
    fn field_errors_stay_under_a_kibibyte() {
        let got = classify_with("raster_resample", json!({"resampling": "bilinear"}), true);
        let k = key(&got);
        let evidence = got.map(|t| t.evidence).unwrap_or_default();
        let long = "cubic ".repeat(500);
        let errors = Resampling::validate(
            &k,
            &evidence,
            &json!({"choice": {"method": long}, "evidence": {"categorical_input": "x"}}),
        );
        assert!(errors.len() >= 2, "{errors:?}");
        for e in errors {
            assert!(
                e.path.len() + e.message.len() <= 1024,
                "{}",
                e.message.len()
            );
        }
    }
}
