//! The `measurement` risk domain: areas, lengths and distances taken from vector geometries.
//!
//! A measured figure looks exact whatever went into it. An area taken in Web Mercator at 60°
//! latitude is four times the ground's, a buffer of "1 km" in a CRS in feet is 3.28 km wide
//! unless someone converts, the area of a self-crossing polygon is whatever its lobes cancel to,
//! and overlapping polygons count their shared ground twice in a total. This domain owns those
//! decisions for the measuring tools (`vector_measure`, `vector_buffer`, `vector_overlay`,
//! `vector_join`), from the `measurement-facts` the host gathers before the call runs (WIT 0.5):
//!
//! * `planar_distortion`: planar figures in a CRS whose scale error over the data exceeds
//!   1 % (`required`) or 10 % (`critical`); the area error for `vector_measure` of polygons,
//!   the length error otherwise; alternative `{"method":"geodesic"}` for the tools that take a
//!   method;
//! * `invalid_geometries` (`critical`, alternative `{"make_valid":true}`) or, when the call
//!   repairs them, `geometries_repaired` (advisory);
//! * `overlapping_features` (`required`) for a spatial `vector_join` summing or averaging over
//!   overlapping source polygons;
//! * advisories that never raise the severity: `non_metre_unit`, `distance_unit_conversion`,
//!   `mixed_geometries`.
//!
//! What the host settles is not judged here (since 0.3, issue 18): ignored Z, unweighted means
//! and overlaps in `vector_measure`'s totals are computed as candidates by the host, which
//! proceeds when they agree and refuses as `data_conflict` naming the argument (`z`,
//! `weighting`/`weight`, `overlaps`) when they do not; no justification can settle them. The
//! WIT facts `z-ignored` and `unweighted-means` stay in the 0.5 record, and the host sends them
//! false and empty.
//!
//! A call with no finding is not gated. Key fields: the tool, the method, the CRS planar figures
//! are taken in (id, else name; `null` for geodesic figures) and the sorted ids of the findings
//! that are not advisory, so one justification covers exactly one decision.

use gdal_mcp_domain_sdk::careful::{measured_after, tolerance};
use gdal_mcp_domain_sdk::{
    approx, careful, check_answers, chosen_method, crs_label, evidence, export_domain, field_error,
    find_evidence, json, names, prompt_argument, shorten, trigger, Call, CrsFacts, Domain,
    DomainInfo, EvidenceItem, FieldError, MeasurementFacts, Need, Severity, Trigger, Unit, Value,
    CERTAIN,
};

struct Measurement;

const METHODOLOGY: &str = include_str!("methodology.md");

/// The tools this domain governs.
pub const TOOLS: &[&str] = &[
    "vector_measure",
    "vector_buffer",
    "vector_overlay",
    "vector_join",
];

/// The tools that take a `method` argument (`geodesic` | `planar`).
const WITH_METHOD: &[&str] = &["vector_measure", "vector_buffer"];

/// A planar scale error above this share needs a justification...
pub const REQUIRED_ERROR: f64 = 0.01;

/// ... and above this one is critical.
pub const CRITICAL_ERROR: f64 = 0.10;

/// The longest quote of a justification in a field error.
const QUOTE: usize = 200;

/// Evidence ids.
pub mod ids {
    pub const PLANAR_DISTORTION: &str = "planar_distortion";
    pub const INVALID_GEOMETRIES: &str = "invalid_geometries";
    pub const GEOMETRIES_REPAIRED: &str = "geometries_repaired";
    pub const OVERLAPPING_FEATURES: &str = "overlapping_features";
    pub const NON_METRE_UNIT: &str = "non_metre_unit";
    pub const DISTANCE_UNIT_CONVERSION: &str = "distance_unit_conversion";
    pub const MIXED_GEOMETRIES: &str = "mixed_geometries";
}

/// Where a planar distortion fact states the error the call's figures carry; `validate` reads
/// the number after it.
const ERROR_MARKER: &str = "scale error of up to ";

/// One finding: its severity, its words in the reason, and its evidence item.
struct Finding {
    severity: Severity,
    text: String,
    item: EvidenceItem,
}

fn rank(severity: Severity) -> u8 {
    match severity {
        Severity::Advisory => 0,
        Severity::Required => 1,
        Severity::Critical => 2,
    }
}

/// A share as a percentage with one decimal: `0.3104` → `31.0 %`.
fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// A CRS as the facts name it: `EPSG:3857 (WGS 84 / Pseudo-Mercator)`, or its name alone.
fn crs_text(crs: &CrsFacts) -> String {
    match &crs.id {
        Some(id) => format!("{id} ({})", crs.name),
        None => crs.name.clone(),
    }
}

/// `[longitude, latitude]` as `12.5° E, 35° N`.
fn place(lon: f64, lat: f64) -> String {
    let degrees = |v: f64| {
        let text = format!("{:.4}", v.abs());
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    let ew = if lon < 0.0 { "W" } else { "E" };
    let ns = if lat < 0.0 { "S" } else { "N" };
    format!("{}° {ew}, {}° {ns}", degrees(lon), degrees(lat))
}

/// A count with its noun: `1 pair`, `3 pairs`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// At most `max` of `items`, joined, with how many more there are: `a, b and 3 more`. Keeps a
/// reason within the host's 2 KiB and the evidence within its 8 KiB whatever the call asks.
fn listed(items: &[String], max: usize) -> String {
    let shown: Vec<String> = items.iter().take(max).map(|i| shorten(i, 64)).collect();
    match items.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

fn has_kind(m: &MeasurementFacts, kind: &str) -> bool {
    m.geometry_kinds.iter().any(|k| k == kind)
}

/// Planar figures in a CRS that distorts them over the data by more than 1 %.
fn planar_distortion(tool: &str, m: &MeasurementFacts) -> Option<Finding> {
    if m.method != "planar" {
        return None;
    }
    let areas = tool == "vector_measure" && has_kind(m, "polygon");
    let (what, error, other_what, other) = if areas {
        (
            "areas",
            m.area_scale_error?,
            "lengths",
            m.length_scale_error,
        )
    } else {
        (
            "lengths",
            m.length_scale_error?,
            "areas",
            m.area_scale_error,
        )
    };
    if error.is_nan() || error <= REQUIRED_ERROR {
        return None;
    }
    let severity = if error > CRITICAL_ERROR {
        Severity::Critical
    } else {
        Severity::Required
    };
    let crs = m
        .crs
        .as_ref()
        .map_or_else(|| "an unnamed CRS".to_string(), crs_text);
    let crs_short = m
        .crs
        .as_ref()
        .map_or_else(|| "the planar CRS".to_string(), crs_label);
    let mut fact = format!(
        "planar figures in {crs}: {ERROR_MARKER}{} for {what} over the data's extent",
        percent(error)
    );
    if let Some(other) = other.filter(|o| o.is_finite()) {
        fact.push_str(&format!(" ({other_what} up to {})", percent(other)));
    }
    if let Some((lon, lat)) = m.worst_at {
        fact.push_str(&format!(", worst at {}", place(lon, lat)));
    }
    let why = match tool {
        "vector_measure" => format!(
            "a planar figure is taken on the map, not on the ground: where this CRS stretches the \
             data, every {} and every total of them is off by up to that share; geodesic figures \
             on the ellipsoid carry no projection error",
            if areas { "area" } else { "length or perimeter" }
        ),
        "vector_buffer" => "a planar buffer is as wide as the distance on the map: where this \
                            CRS's scale is off, the buffer on the ground is narrower or wider by \
                            up to that share; a geodesic buffer is the distance on the ground"
            .to_string(),
        "vector_join" => "the join's predicates are evaluated on the map: a `dwithin` distance is \
                          off by up to that share on the ground, and straight edges in this CRS \
                          are not the shortest lines on the ground"
            .to_string(),
        _ => "the overlay is computed on the map: straight edges in this CRS are not the \
              shortest lines on the ground, so where the scale error is this large the \
              intersections move, and any area taken from the result inherits the error"
            .to_string(),
    };
    let alternative = WITH_METHOD
        .contains(&tool)
        .then(|| json!({"method": "geodesic"}));
    Some(Finding {
        severity,
        text: format!(
            "planar {what} in {crs_short} are off by up to {} over the data's extent",
            percent(error)
        ),
        item: evidence(ids::PLANAR_DISTORTION, fact, why, alternative),
    })
}

/// Invalid geometries, measured as they are (critical) or repaired (advisory).
fn invalid_geometries(tool: &str, m: &MeasurementFacts) -> Option<Finding> {
    if m.invalid_features == 0 {
        return None;
    }
    let share = format!(
        "{} of {} features checked {} invalid",
        m.invalid_features,
        m.features_checked,
        if m.invalid_features == 1 { "is" } else { "are" }
    );
    if m.make_valid {
        return Some(Finding {
            severity: Severity::Advisory,
            text: format!("{share}; the call repairs them (make_valid)"),
            item: evidence(
                ids::GEOMETRIES_REPAIRED,
                format!("{share}; the call repairs them with GEOS MakeValid before it uses them"),
                "a repair changes the shapes: a bow-tie becomes two triangles, a hole outside its \
                 shell becomes a polygon of its own; the figures describe the repaired shapes, \
                 of which only the parts of each feature's own kind are kept",
                None,
            ),
        });
    }
    let why = match tool {
        "vector_measure" => {
            "areas, perimeters and overlaps of invalid polygons mean nothing: a bow-tie's lobes \
             cancel, a hole outside its shell is subtracted from nothing, and the totals include \
             them without a warning"
        }
        "vector_buffer" => {
            "the buffer of an invalid polygon is arbitrary: GEOS may drop a lobe of a bow-tie or \
             return an empty geometry, without an error"
        }
        "vector_overlay" => {
            "an overlay of invalid geometries fails (a GEOS topology exception) or silently drops \
             parts of the result"
        }
        _ => {
            "spatial predicates on invalid geometries are undefined: a point inside one lobe of \
             a bow-tie may test as outside, so matches are missed or invented"
        }
    };
    Some(Finding {
        severity: Severity::Critical,
        text: format!("{share}; the call uses them unrepaired"),
        item: evidence(
            ids::INVALID_GEOMETRIES,
            format!(
                "{share}; the area of a self-crossing ring is undefined: GEOS gives a \
                 figure-eight 0 m²"
            ),
            why,
            Some(json!({"make_valid": true})),
        ),
    })
}

/// Overlapping source polygons in a spatial join's sums and means. (`vector_measure`'s totals
/// are settled by the host: `overlaps`, or the sum and the union agree; it sends `dissolve`.)
fn overlapping_features(tool: &str, m: &MeasurementFacts) -> Option<Finding> {
    if tool != "vector_join" || m.dissolve {
        return None;
    }
    let pairs = m.overlapping_pairs.filter(|p| *p > 0)?;
    let overlap = match m.overlap_area_m2.filter(|a| a.is_finite()) {
        Some(area) => {
            let area = approx(area, 6);
            format!(" by {area} m² in all: the total counts {area} m² twice")
        }
        None => " (their overlapping area was not measured): the total counts it twice".to_string(),
    };
    let fact = format!("{} of polygons overlap{overlap}", count(pairs, "pair"));
    Some(Finding {
        severity: Severity::Required,
        text: format!("{} of polygons overlap", count(pairs, "pair")),
        item: evidence(
            ids::OVERLAPPING_FEATURES,
            fact,
            "a target feature inside an overlap matches every polygon over it: it enters the \
             counts and sums of each, and totals over the joined output count it more than once",
            None,
        ),
    })
}

/// Planar figures in a CRS whose unit is not the metre.
fn non_metre_unit(m: &MeasurementFacts) -> Option<Finding> {
    if m.method != "planar" {
        return None;
    }
    let crs = m.crs.as_ref()?;
    let metres = crs.linear_unit_metres.filter(|u| u.is_finite())?;
    if (metres - 1.0).abs() <= 1e-12 {
        return None;
    }
    let unit = crs.linear_unit.as_deref().unwrap_or("its unit");
    Some(Finding {
        severity: Severity::Advisory,
        text: format!("{} is in {unit}", crs_label(crs)),
        item: evidence(
            ids::NON_METRE_UNIT,
            format!(
                "{} is in {unit} (1 {unit} = {} m)",
                crs_text(crs),
                approx(metres, 10)
            ),
            "the host converts the CRS's unit to the units asked for; a figure read in the CRS's \
             own unit would be off by that factor",
            None,
        ),
    })
}

/// A distance given in another unit than the CRS's.
fn distance_unit_conversion(m: &MeasurementFacts) -> Option<Finding> {
    let (given, crs_unit) = m.distance_units.as_ref()?;
    Some(Finding {
        severity: Severity::Advisory,
        text: format!("the distance in {given} is converted to {crs_unit}"),
        item: evidence(
            ids::DISTANCE_UNIT_CONVERSION,
            format!(
                "the distance is given in {given}; the CRS's unit is {crs_unit}; the host \
                 converted it to {crs_unit}"
            ),
            "a distance taken in the wrong unit is off by the ratio of the units (3.28 between \
             metres and feet); the result records the converted distance",
            None,
        ),
    })
}

/// Several geometry kinds in one input.
fn mixed_geometries(m: &MeasurementFacts) -> Option<Finding> {
    if m.geometry_kinds.len() < 2 {
        return None;
    }
    let kinds = listed(&m.geometry_kinds, 8);
    Some(Finding {
        severity: Severity::Advisory,
        text: format!("mixed geometries ({kinds})"),
        item: evidence(
            ids::MIXED_GEOMETRIES,
            format!("the input holds {kinds} features"),
            "each kind is measured for what it is: a polygon's perimeter is never a line's \
             length, and a point has neither; the figures are given per kind",
            None,
        ),
    })
}

/// What `choice.method` must name, and the words that name it.
fn method_synonyms(method: &str) -> Vec<&str> {
    match method {
        "geodesic" => vec![
            "geodesic",
            "geodetic",
            "ellipsoidal",
            "ellipsoid",
            "GeographicLib",
        ],
        "planar" => vec!["planar", "plane", "cartesian", "projected"],
        other => vec![other],
    }
}

/// The numbers written as percentages in `text` (`31 %`, `2.5%`, `12,5 percent`, `3 per cent`).
fn percentages(text: &str) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], '.' | ',')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        let number: String = chars[start..i]
            .iter()
            .map(|c| if *c == ',' { '.' } else { *c })
            .collect();
        let rest: String = chars[i..].iter().collect::<String>().to_ascii_lowercase();
        let rest = rest.trim_start();
        let is_percent = rest.starts_with('%')
            || rest.starts_with("percent")
            || rest.starts_with("per cent")
            || rest.starts_with("pct");
        if is_percent {
            if let Ok(value) = number.parse::<f64>() {
                found.push(value);
            }
        }
    }
    found
}

/// The error (in per cent) a planar distortion fact states for the call's figures.
fn measured_percent(fact: &str) -> Option<f64> {
    let after = &fact[fact.find(ERROR_MARKER)? + ERROR_MARKER.len()..];
    percentages(after).first().copied()
}

impl Domain for Measurement {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "measurement".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "Measurement".to_string(),
            summary: "Areas, lengths, buffers, overlays and spatial joins: geodesic or planar \
                      figures and the scale error a planar CRS puts in them, invalid \
                      geometries, overlapping polygons in a join, and units."
                .to_string(),
            prompt_name: "justify_measurement".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg("method", "geodesic or planar", true),
                arg(
                    "crs",
                    "The CRS planar figures are taken in, or the ellipsoid of geodesic ones",
                    false,
                ),
                arg(
                    "findings",
                    "The findings that need an answer (evidence ids), or none",
                    true,
                ),
                arg(
                    "details",
                    "The data: geometry kinds, features checked, scale error",
                    false,
                ),
                arg("expected", "What choice.method must name", true),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        let tool = call.tool();
        if !TOOLS.contains(&tool) {
            return None;
        }
        let m = call.measurement()?;
        let mut findings: Vec<Finding> = [
            planar_distortion(tool, m),
            invalid_geometries(tool, m),
            overlapping_features(tool, m),
            non_metre_unit(m),
            distance_unit_conversion(m),
            mixed_geometries(m),
        ]
        .into_iter()
        .flatten()
        .collect();
        if findings.is_empty() {
            return None;
        }
        findings.sort_by_key(|f| std::cmp::Reverse(rank(f.severity)));
        let severity = findings
            .iter()
            .map(|f| f.severity)
            .max_by_key(|s| rank(*s))
            .unwrap_or(Severity::Advisory);
        let mut gated: Vec<&str> = findings
            .iter()
            .filter(|f| f.severity != Severity::Advisory)
            .map(|f| f.item.id.as_str())
            .collect();
        gated.sort_unstable();
        let crs = m.crs.as_ref().map(crs_label);
        let key = json!({
            "tool": tool,
            "method": m.method,
            "crs": crs,
            "findings": gated,
        });
        let reason = findings
            .iter()
            .map(|f| f.text.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let crs_argument = match (&m.crs, &m.ellipsoid) {
            (Some(c), _) => crs_text(c),
            (None, Some(e)) => format!("none (geodesic, on the {e} ellipsoid)"),
            (None, None) => "none".to_string(),
        };
        let mut details = vec![
            format!(
                "{} feature(s) of kind {}",
                m.features_checked,
                if m.geometry_kinds.is_empty() {
                    "none".to_string()
                } else {
                    m.geometry_kinds.join(", ")
                }
            ),
            format!("{} invalid", m.invalid_features),
        ];
        if let Some(e) = m.area_scale_error.filter(|e| e.is_finite()) {
            details.push(format!("area scale error up to {}", percent(e)));
        }
        if let Some(e) = m.length_scale_error.filter(|e| e.is_finite()) {
            details.push(format!("length scale error up to {}", percent(e)));
        }
        let findings_argument = if gated.is_empty() {
            "none (advisory only)".to_string()
        } else {
            gated.join(", ")
        };
        let items = findings.into_iter().map(|f| f.item).collect();
        Some(trigger(
            severity,
            reason.clone(),
            key,
            &[
                ("tool", tool.to_string()),
                ("method", m.method.clone()),
                ("crs", crs_argument),
                ("findings", findings_argument),
                ("details", details.join("; ")),
                ("expected", format!("`{}`", m.method)),
                ("reason", reason),
            ],
            items,
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    /// Every finding is measured by the host before the call runs (the scale error over the
    /// data's extent, GEOS's validity, the overlapping pairs and their area, the units and the
    /// geometry kinds): certain.
    fn confidence(_call: &Call, _trigger: &Trigger) -> Option<f64> {
        Some(CERTAIN)
    }

    /// The advisory notes on what the host already settled (it repaired the geometries,
    /// converted a foot CRS or a distance unit, measured each geometry kind for what it is)
    /// are relaxable: a team that knows them may silence the warning. Planar distortion,
    /// invalid geometries and overlaps change the figures: never relaxable.
    fn relaxable(evidence_id: &str) -> bool {
        matches!(
            evidence_id,
            ids::GEOMETRIES_REPAIRED
                | ids::NON_METRE_UNIT
                | ids::DISTANCE_UNIT_CONVERSION
                | ids::MIXED_GEOMETRIES
        )
    }

    fn validate(
        key_fields: &Value,
        evidence: &[EvidenceItem],
        justification: &Value,
    ) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let method = key_fields
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("");
        let crs = key_fields.get("crs").and_then(Value::as_str);
        if !method.is_empty() {
            let synonyms = method_synonyms(method);
            match chosen_method(justification) {
                Some(chosen) if synonyms.iter().any(|s| names(chosen, s)) => {}
                Some(chosen) => errors.push(field_error(
                    "/choice/method",
                    format!(
                        "the call measures {method}{}, but the choice \"{}\" does not name it; \
                         name the method this call uses (e.g. \"{method}\"), or call again with \
                         the other method",
                        crs.map(|c| format!(" in {}", shorten(c, 120)))
                            .unwrap_or_default(),
                        shorten(chosen, QUOTE)
                    ),
                )),
                None => errors.push(field_error("/choice/method", "missing")),
            }
        }
        let measured = find_evidence(evidence, ids::PLANAR_DISTORTION)
            .and_then(|item| measured_percent(&item.fact));
        let mut planar = vec![tolerance(
            Unit::Percent,
            measured.map(|m| (m * 10.0).round() / 10.0),
            "scale error of the planar figures",
        )];
        if measured.is_some_and(|m| m > CRITICAL_ERROR * 100.0) {
            // Critical: the offered geodesic figures must be rejected, with why.
            planar.push(Need::RejectsOffered);
        }
        let overlap = find_evidence(evidence, ids::OVERLAPPING_FEATURES)
            .and_then(|i| measured_after(&i.fact, "overlap by ", Unit::SquareMetres));
        let findings = [
            careful::Finding::new(ids::PLANAR_DISTORTION, planar),
            careful::Finding::new(ids::INVALID_GEOMETRIES, vec![Need::RejectsOffered]),
            careful::Finding::new(
                ids::OVERLAPPING_FEATURES,
                vec![tolerance(
                    Unit::SquareMetres,
                    overlap,
                    "area the total may count twice",
                )],
            ),
        ];
        errors.extend(check_answers(evidence, justification, &findings));
        errors
    }
}

export_domain!(Measurement);

#[cfg(test)]
mod tests;
