//! The `aggregation` risk domain: statistics that summarise many cells into one number.
//!
//! Zonal statistics, composites and block aggregation all choose a statistic and decide which
//! cells it sees. Both choices change results without any error: the mean of land-cover codes is
//! a code of no class, a sum over `all_touched` zones counts the cells on a shared boundary in
//! both zones, and a composite of scenes
//! without nodata averages their fill values in. The size and shape of the zones or blocks is
//! itself a choice (the modifiable areal unit problem). This domain owns those decisions:
//! every `zonal_stats`, `raster_composite` and `raster_aggregate` call is `required`, and
//! `critical` when the statistic cannot mean anything for the data or is known to be biased.
//!
//! Key fields are the operation, the statistic(s), the zone semantics and nodata policy, and
//! what the data is (categorical, continuous or unknown); never paths, factors or band numbers.
//!
//! Evidence: every trigger carries its operation's item (`zonal_method`, `composite_method`,
//! `aggregate_method`: the statistics, the data with its numbers, the zones, nodata and
//! sentinels), then one item per critical finding (`categorical_mean`, `all_touched_sum`,
//! `coverage_without_area`), with a ready-to-use alternative where one exists (`majority` for
//! zones of classes, `mode` for blocks, `coverage` semantics). `block_sum_saturates` is kept
//! for the operators' policies and answers that name it, but no longer raised (since 0.5.0):
//! the host writes a block sum in a type that holds it, from the input's values read exactly.
//!
//! Since 0.3 the domain reads how the inputs were made (WIT 0.4 lineage): a class statistic
//! (majority, minority, variety, mode), or an averaging one on data that looks categorical, of
//! an input a step upstream resampled with a value-creating method is `critical`, with
//! `upstream_interpolated_classes` (the nearest such step and its method): interpolated class
//! codes are not classes. The key then gains `upstream: interpolated`.

use gdal_mcp_domain_sdk::careful::{self, alternative_named};
use gdal_mcp_domain_sdk::{
    approx, categorical_evidence, categorical_fact, categorical_input_confidence, check_answers,
    chosen_method, crs_label, evidence, export_domain, field_error, json, names,
    nearest_interpolation, prompt_argument, shorten, step_fact, trigger, weakest, Call, CrsKind,
    Domain, DomainInfo, EvidenceItem, FieldError, Finding, LayerFacts, Need, RasterFacts, Severity,
    Trigger, Value, CERTAIN,
};

struct Aggregation;

const METHODOLOGY: &str = include_str!("methodology.md");

/// Statistics that add or average values: meaningless on class codes.
const AVERAGING: &[&str] = &[
    "mean", "average", "sum", "std", "median", "med", "rms", "q1", "q3",
];

/// Order statistics: meaningful on class codes only if the codes are ordered.
const ORDER: &[&str] = &["min", "max"];

/// Statistics that treat values as classes: they count or pick codes, and mean something only
/// if the codes still are classes.
const CLASS_STATISTICS: &[&str] = &["majority", "minority", "variety", "mode"];

/// Evidence ids.
mod ids {
    pub const ZONAL_METHOD: &str = "zonal_method";
    pub const COMPOSITE_METHOD: &str = "composite_method";
    pub const AGGREGATE_METHOD: &str = "aggregate_method";
    pub const CATEGORICAL_MEAN: &str = "categorical_mean";
    pub const ALL_TOUCHED_SUM: &str = "all_touched_sum";
    pub const COVERAGE_WITHOUT_AREA: &str = "coverage_without_area";
    pub const BLOCK_SUM_SATURATES: &str = "block_sum_saturates";
    pub const UPSTREAM_INTERPOLATED_CLASSES: &str = "upstream_interpolated_classes";
}

/// Declared nodata of band `index` (0-based), and the undeclared sentinels a sample found.
fn nodata_text(raster: &RasterFacts, index: usize) -> String {
    let declared = raster.nodata.get(index).copied().flatten();
    let mut text = match declared {
        Some(v) => format!("nodata {}", approx(v, 8)),
        None => "no nodata declared".to_string(),
    };
    if let Some(band) = raster.bands.get(index) {
        if !band.undeclared_sentinels.is_empty() {
            let found: Vec<String> = band
                .undeclared_sentinels
                .iter()
                .map(|s| format!("{} in {} cells", approx(s.value, 8), s.count))
                .collect();
            text.push_str(&format!(
                " (a sample of {} cells holds {}, undeclared)",
                band.sampled_cells,
                found.join(", ")
            ));
        }
    }
    text
}

/// The cell size of a raster with its unit: `30 × 30 m`.
fn cells_text(raster: &RasterFacts, crs: Option<&gdal_mcp_domain_sdk::CrsFacts>) -> String {
    let unit = match crs {
        Some(c) if c.kind == CrsKind::Geographic => "°".to_string(),
        Some(c) => match c.linear_unit.as_deref() {
            Some("metre" | "meter") => " m".to_string(),
            Some(u) => format!(" {u}"),
            None => String::new(),
        },
        None => String::new(),
    };
    match raster.pixel_size {
        Some((x, y)) => format!(
            "cells of {} × {}{unit}",
            approx(x.abs(), 4),
            approx(y.abs(), 4)
        ),
        None => "cells of unknown size".to_string(),
    }
}

/// A zones layer in numbers: `districts (Multi Polygon, 12 features)`.
fn layer_text(layer: Option<&LayerFacts>) -> String {
    match layer {
        Some(l) => match l.feature_count {
            Some(n) => format!("{} ({}, {n} features)", l.name, l.geometry_type),
            None => format!("{} ({})", l.name, l.geometry_type),
        },
        None => "no zones layer facts".to_string(),
    }
}

/// What the statistic reads.
#[derive(Clone, PartialEq, Eq)]
enum Data {
    Categorical(String),
    Continuous(String),
    /// A band other than the first: its type is integer, and the categorical evidence covers
    /// band 1 only.
    Unknown(String),
}

impl Data {
    fn label(&self) -> &'static str {
        match self {
            Data::Categorical(_) => "categorical",
            Data::Continuous(_) => "continuous",
            Data::Unknown(_) => "unknown",
        }
    }

    fn evidence(&self) -> &str {
        match self {
            Data::Categorical(e) | Data::Continuous(e) | Data::Unknown(e) => e,
        }
    }
}

fn is_float(data_type: &str) -> bool {
    data_type.contains("Float")
}

/// The data with its numbers, for evidence: the categorical fact of the raster shown for band
/// 1, else the band's type.
fn data_fact(rasters: &[&RasterFacts], band: Option<u64>, data: &Data) -> String {
    let band = band.unwrap_or(1);
    if band > 1 {
        return data.evidence().to_string();
    }
    rasters
        .iter()
        .find(|r| r.looks_categorical)
        .or_else(|| rasters.first())
        .map(|r| categorical_fact(r))
        .unwrap_or_default()
}

/// Classify the band read from `rasters` (band 1 unless `band` says otherwise).
fn data_of(rasters: &[&RasterFacts], band: Option<u64>) -> Option<Data> {
    let first = rasters.first()?;
    let band = band.unwrap_or(1);
    if band <= 1 {
        return Some(match rasters.iter().find(|r| r.looks_categorical) {
            Some(r) => Data::Categorical(categorical_evidence(r)),
            None => Data::Continuous(categorical_evidence(first)),
        });
    }
    let index = usize::try_from(band - 1).ok()?;
    let data_type = first.data_types.get(index).cloned().unwrap_or_default();
    Some(if is_float(&data_type) {
        Data::Continuous(format!("band {band} is {data_type}"))
    } else {
        Data::Unknown(format!(
            "band {band} is {data_type}; whether it holds classes is known for band 1 only"
        ))
    })
}

/// The geometry family of a zones layer.
fn zone_kind(geometry_type: &str) -> &'static str {
    let base = geometry_type.strip_prefix("3D ").unwrap_or(geometry_type);
    let base = base.strip_prefix("Measured ").unwrap_or(base);
    match base {
        "Polygon" | "Multi Polygon" | "Curve Polygon" | "Multi Surface" | "Surface"
        | "Triangle" | "TIN" | "Polyhedral Surface" => "polygons",
        "Point" | "Multi Point" | "Line String" | "Multi Line String" | "Circular String"
        | "Compound Curve" | "Multi Curve" | "Curve" | "Linear Ring" => "points_or_lines",
        _ => "mixed",
    }
}

/// A statistic list as the call gives it: lower case, sorted, without repeats.
fn statistics(call: &Call) -> Vec<String> {
    let mut stats: Vec<String> = match call.args.get("stats") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .collect(),
        _ => call
            .arg_str("statistic")
            .map(|s| vec![s.to_ascii_lowercase()])
            .unwrap_or_default(),
    };
    stats.sort();
    stats.dedup();
    stats
}

/// What one call decides, before it becomes a trigger.
struct Decision {
    verdict: Verdict,
    /// The operation's own evidence item: id and fact (its `why` is the notes).
    base: (&'static str, String),
    key: Value,
    /// Prompt arguments: the other decision fields, and what the data is.
    details: String,
    data: String,
    /// What `choice.method` must name.
    expected: Vec<String>,
}

/// A severity with its reasons (which set it), notes (which do not) and the evidence of the
/// critical findings.
struct Verdict {
    severity: Severity,
    reasons: Vec<String>,
    notes: Vec<String>,
    evidence: Vec<EvidenceItem>,
    /// The statistic reads class codes an upstream step interpolated (`upstream` key field).
    upstream_interpolated: bool,
}

impl Verdict {
    fn new() -> Self {
        Self {
            severity: Severity::Required,
            reasons: Vec::new(),
            notes: Vec::new(),
            evidence: Vec::new(),
            upstream_interpolated: false,
        }
    }

    fn critical(&mut self, reason: String, item: EvidenceItem) {
        self.severity = Severity::Critical;
        self.reasons.push(reason);
        self.evidence.push(item);
    }
}

/// The common critical case: adding or averaging class codes. `fact` is the data in numbers,
/// `alternative` the call's arguments with a class statistic instead.
fn check_classes(
    verdict: &mut Verdict,
    stats: &[String],
    data: &Data,
    fact: &str,
    alternative: Option<Value>,
) {
    let averaging: Vec<&str> = stats
        .iter()
        .map(String::as_str)
        .filter(|s| AVERAGING.contains(s))
        .collect();
    let order: Vec<&str> = stats
        .iter()
        .map(String::as_str)
        .filter(|s| ORDER.contains(s))
        .collect();
    match data {
        Data::Categorical(summary) if !averaging.is_empty() => verdict.critical(
            format!(
                "{} of categorical data ({summary}) adds or averages class codes: the result is \
                 a number of no class",
                averaging.join(", ")
            ),
            evidence(
                ids::CATEGORICAL_MEAN,
                format!("{fact}; the call computes {}", averaging.join(", ")),
                format!(
                    "{} add(s) or average(s) class codes: the mean of codes 1 (forest) and 5 \
                     (water) is 3, a code of another class or of none",
                    averaging.join(", ")
                ),
                alternative,
            ),
        ),
        Data::Unknown(evidence) if !averaging.is_empty() => verdict.notes.push(format!(
            "{} assumes the values are measurements ({evidence})",
            averaging.join(", ")
        )),
        _ => {}
    }
    if matches!(data, Data::Categorical(_)) && !order.is_empty() {
        verdict.notes.push(format!(
            "{} of class codes means something only if the codes are ordered",
            order.join(", ")
        ));
    }
}

/// The critical case of lineage: class codes interpolated upstream. A class statistic of an
/// input that a step upstream resampled with a value-creating method, or an averaging statistic
/// of such an input that still looks categorical, reads codes that are no longer classes.
fn check_upstream(verdict: &mut Verdict, call: &Call, stats: &[String], data: &Data) {
    let class: Vec<&str> = stats
        .iter()
        .map(String::as_str)
        .filter(|s| CLASS_STATISTICS.contains(s))
        .collect();
    // Averaging statistics read class codes only where the data still looks categorical.
    let averaging: Vec<&str> = stats
        .iter()
        .map(String::as_str)
        .filter(|s| AVERAGING.contains(s) && matches!(data, Data::Categorical(_)))
        .collect();
    let mut read = class.clone();
    read.extend(&averaging);
    if read.is_empty() {
        return;
    }
    // The raster inputs (`input`, `input2`, ... of a composite), the first interpolated one.
    let Some((dataset, step)) = call
        .raw
        .datasets
        .iter()
        .filter(|d| d.role.starts_with("input") && d.raster.is_some())
        .find_map(|d| nearest_interpolation(&d.upstream).map(|s| (d, s)))
    else {
        return;
    };
    let (role, modified) = (dataset.role.as_str(), dataset.upstream.modified_since);
    let mut made = if role == "input" {
        step_fact(step)
    } else {
        format!("{role}: {}", step_fact(step))
    };
    if modified {
        // An edit outside the server cannot undo the interpolation (issue 21).
        made.push_str(" (the file was modified outside the server since)");
    }
    let method = step.resampling.as_deref().unwrap_or("interpolation");
    let mut uses = Vec::new();
    if !class.is_empty() {
        uses.push(format!(
            "{} count(s) or pick(s) those codes as if they were classes",
            class.join(", ")
        ));
    }
    if !averaging.is_empty() {
        uses.push(format!(
            "{} average(s) or add(s) codes that were never measurements",
            averaging.join(", ")
        ));
    }
    verdict.upstream_interpolated = true;
    verdict.critical(
        format!(
            "{} read(s) class codes that {} interpolated upstream with {method}: interpolated \
             codes are not classes",
            read.join(", "),
            step.tool
        ),
        evidence(
            ids::UPSTREAM_INTERPOLATED_CLASSES,
            format!("{made}; the call computes {} of it", read.join(", ")),
            format!(
                "{method} computed each cell from its neighbours' codes: along every boundary \
                 between classes 1 and 3 it wrote 2, a class that is not there, and fractions \
                 that are no class at all; {}. Redo {} with nearest or mode, or say why the \
                 values are measurements",
                uses.join(", and "),
                step.tool
            ),
            None,
        ),
    );
}

fn zonal(call: &Call) -> Option<Decision> {
    let raster_dataset = call.dataset("input")?;
    let raster = raster_dataset.raster.as_ref()?;
    let band = call.args.get("band").and_then(Value::as_u64);
    let data = data_of(&[raster], band)?;
    let stats = statistics(call);
    let semantics = call
        .arg_str("semantics")
        .unwrap_or("cell_centre")
        .to_ascii_lowercase();
    let policy = call
        .arg_str("nodata_policy")
        .unwrap_or("ignore")
        .to_ascii_lowercase();
    let zones = call
        .dataset("zones")
        .and_then(|d| d.vector.as_ref())
        .and_then(|v| match call.arg_str("zone_layer") {
            Some(name) => v.layers.iter().find(|l| l.name == name),
            None => v.layers.first(),
        });
    let zone_kind = zones
        .map(|l| zone_kind(&l.geometry_type))
        .unwrap_or("mixed");

    let fact = data_fact(&[raster], band, &data);
    let cells = cells_text(raster, raster_dataset.crs.as_ref());
    let zones_text = layer_text(zones);
    // Zones of classes: the majority class instead of every adding or averaging statistic.
    let mut class_stats: Vec<String> = stats
        .iter()
        .filter(|s| !AVERAGING.contains(&s.as_str()))
        .cloned()
        .collect();
    if !class_stats.iter().any(|s| s == "majority") {
        class_stats.push("majority".to_string());
    }
    class_stats.sort();
    let mut verdict = Verdict::new();
    check_classes(
        &mut verdict,
        &stats,
        &data,
        &fact,
        Some(json!({ "stats": class_stats })),
    );
    check_upstream(&mut verdict, call, &stats, &data);
    if semantics == "all_touched" && stats.iter().any(|s| s == "sum") {
        verdict.critical(
            "sum with all_touched counts every cell a zone boundary crosses in each zone that \
             touches it: adjacent zones share those cells, so zone sums add up to more than the \
             total"
                .to_string(),
            evidence(
                ids::ALL_TOUCHED_SUM,
                format!(
                    "sum under all_touched over zones {zones_text} on {cells}: every cell a \
                     boundary crosses counts in full in each zone touching it"
                ),
                "adjacent zones share their boundary cells, so the zone sums add up to more than \
                 the raster's total, by more the smaller the zones are in cells",
                (zone_kind == "polygons").then(|| json!({ "semantics": "coverage" })),
            ),
        );
    }
    if semantics == "coverage" && zone_kind == "points_or_lines" {
        verdict.critical(
            "coverage weights each cell by the share of its area inside the zone; points and \
             lines cover no area, so every statistic is empty"
                .to_string(),
            evidence(
                ids::COVERAGE_WITHOUT_AREA,
                format!("coverage semantics over zones {zones_text}, which have no area"),
                "coverage weights each cell by the share of its area inside the zone: zero for \
                 every cell, so every statistic is empty",
                Some(json!({ "semantics": "cell_centre" })),
            ),
        );
    } else if zone_kind == "points_or_lines" {
        verdict.notes.push(format!(
            "point or line zones select the cells they are burnt into; {semantics} decides how \
             many"
        ));
    }
    if semantics == "all_touched" && stats.iter().any(|s| s == "count") {
        verdict.notes.push(
            "count under all_touched includes partly covered cells: it overstates zone areas"
                .to_string(),
        );
    }
    if raster_dataset
        .crs
        .as_ref()
        .is_some_and(|c| c.kind == CrsKind::Geographic)
    {
        verdict.notes.push(format!(
            "the raster is in a geographic CRS ({}): its cells shrink towards the poles, so \
             counts are not areas and means weight cells, not area",
            raster_dataset
                .crs
                .as_ref()
                .map(crs_label)
                .unwrap_or_default()
        ));
    }
    let index = usize::try_from(band.unwrap_or(1).saturating_sub(1)).unwrap_or(0);
    let declared = raster.nodata.get(index).copied().flatten().is_some();
    if !declared {
        verdict.notes.push(
            "the raster declares no nodata: every cell counts, fill values included".to_string(),
        );
    } else if policy == "propagate" {
        verdict.notes.push(
            "with propagate, a zone touching any nodata cell gets no statistics but count"
                .to_string(),
        );
    }
    let key = json!({
        "operation": "zonal",
        "statistics": stats,
        "semantics": semantics,
        "nodata_policy": policy,
        "data": data.label(),
        "zones": zone_kind,
    });
    let details = format!(
        "zone semantics {semantics}, nodata policy {policy}, zones are {}",
        zone_kind.replace('_', " ")
    );
    verdict.reasons.insert(
        0,
        format!(
            "zonal statistics {} under {semantics} on {} data",
            stats.join(", "),
            data.label()
        ),
    );
    let base = format!(
        "{} under {semantics} (nodata policy {policy}) of {fact}, {cells}, {}; zones: \
         {zones_text}",
        stats.join(", "),
        nodata_text(raster, index)
    );
    let mut expected = vec![semantics];
    expected.extend(stats);
    Some(Decision {
        verdict,
        base: (ids::ZONAL_METHOD, base),
        key,
        details,
        data: format!("{} ({})", data.label(), data.evidence()),
        expected,
    })
}

fn composite(call: &Call) -> Option<Decision> {
    let rasters: Vec<&RasterFacts> = call
        .raw
        .datasets
        .iter()
        .filter(|d| d.role.starts_with("input"))
        .filter_map(|d| d.raster.as_ref())
        .collect();
    let band = call.args.get("band").and_then(Value::as_u64);
    let data = data_of(&rasters, band)?;
    let stats = statistics(call);
    let index = usize::try_from(band.unwrap_or(1).saturating_sub(1)).unwrap_or(0);
    let with_nodata = rasters
        .iter()
        .filter(|r| r.nodata.get(index).copied().flatten().is_some())
        .count();
    let input_nodata = if with_nodata == rasters.len() {
        "declared"
    } else if with_nodata == 0 {
        "none"
    } else {
        "partial"
    };
    let fact = data_fact(&rasters, band, &data);
    let mut verdict = Verdict::new();
    // No class statistic exists for composites: no alternative.
    check_classes(&mut verdict, &stats, &data, &fact, None);
    check_upstream(&mut verdict, call, &stats, &data);
    if input_nodata != "declared" {
        verdict.notes.push(format!(
            "{} of {} inputs declare no nodata: their fill and masked cells (scene edges, \
             clouds set to 0) enter the {} as data",
            rasters.len() - with_nodata,
            rasters.len(),
            stats.join(", ")
        ));
    }
    if stats.iter().any(|s| s == "mean" || s == "median") {
        verdict.notes.push(
            "where the number of valid inputs changes from cell to cell, a mean or median \
             composite shows seams"
                .to_string(),
        );
    }
    verdict.reasons.insert(
        0,
        format!(
            "per-cell {} composite of {} inputs on {} data",
            stats.join(", "),
            rasters.len(),
            data.label()
        ),
    );
    let key = json!({
        "operation": "composite",
        "statistics": stats,
        "data": data.label(),
        "input_nodata": input_nodata,
    });
    let base = format!(
        "per-cell {} of {} inputs, {with_nodata} of them with nodata declared, on {fact}",
        stats.join(", "),
        rasters.len()
    );
    Some(Decision {
        verdict,
        base: (ids::COMPOSITE_METHOD, base),
        key,
        details: format!("inputs with nodata: {input_nodata}"),
        data: format!("{} ({})", data.label(), data.evidence()),
        expected: stats,
    })
}

fn aggregate(call: &Call) -> Option<Decision> {
    let raster = call.dataset("input").and_then(|d| d.raster.as_ref())?;
    let data = data_of(&[raster], None)?;
    let stats = statistics(call);
    // The output keeps the input's types unless the call sets `output_type`.
    let mut types = match call.arg_str("output_type") {
        Some(t) => vec![t.to_string()],
        None => raster.data_types.clone(),
    };
    types.sort();
    types.dedup();
    let factor: Vec<u64> = match call.args.get("factor") {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_u64).collect(),
        Some(v) => v.as_u64().map(|f| vec![f, f]).unwrap_or_default(),
        None => Vec::new(),
    };
    let block = factor.iter().product::<u64>();
    let block_text = match factor.as_slice() {
        [x, y] => format!("blocks of {x} × {y} = {block} cells"),
        _ => "blocks of unknown size".to_string(),
    };
    let fact = data_fact(&[raster], None, &data);
    let mut verdict = Verdict::new();
    check_classes(
        &mut verdict,
        &stats,
        &data,
        &fact,
        Some(json!({ "statistic": "mode" })),
    );
    check_upstream(&mut verdict, call, &stats, &data);
    // A block sum cannot saturate any more: the host writes it in a type that holds every
    // block's sum of the input's values, read exactly, and refuses an `output_type` that
    // cannot (attack round 10, R10-6). `block_sum_saturates` is no longer raised: it asked a
    // question the data answers (a 0/1 mask summed in Byte was asked to be justified).
    let integer = types.iter().any(|t| !is_float(t));
    if integer
        && stats
            .iter()
            .any(|s| matches!(s.as_str(), "average" | "rms" | "med" | "q1" | "q3"))
    {
        verdict.notes.push(format!(
            "the result is written as {}: averages and quantiles are rounded to integers",
            types.join(", ")
        ));
    }
    if stats.iter().any(|s| s == "count") {
        verdict.notes.push(
            "count is the number of valid cells per block, which is constant unless nodata is \
             declared"
                .to_string(),
        );
    }
    if stats.iter().any(|s| s == "mode") && types.iter().all(|t| is_float(t)) {
        verdict.notes.push(
            "the mode of floating-point values is the most frequent exact value: usually \
             arbitrary"
                .to_string(),
        );
    }
    if raster.nodata.iter().all(Option::is_none) {
        verdict.notes.push(
            "the input declares no nodata: every cell, fill values included, enters each \
             block"
                .to_string(),
        );
    }
    verdict.reasons.insert(
        0,
        format!(
            "block aggregation with {} on {} data",
            stats.join(", "),
            data.label()
        ),
    );
    let key = json!({
        "operation": "aggregate",
        "statistics": stats,
        "data": data.label(),
        "data_types": types.join(","),
    });
    let base = format!(
        "{} over {block_text}, written as {}, of {fact}, {}",
        stats.join(", "),
        types.join(", "),
        nodata_text(raster, 0)
    );
    Some(Decision {
        verdict,
        base: (ids::AGGREGATE_METHOD, base),
        key,
        details: format!("input types {}", types.join(", ")),
        data: format!("{} ({})", data.label(), data.evidence()),
        expected: stats,
    })
}

impl Domain for Aggregation {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "aggregation".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "Aggregation".to_string(),
            summary: "Zonal statistics, composites and block aggregation: which statistic, which \
                      cells a zone contains, how nodata is handled, and whether the statistic \
                      means anything for the data."
                .to_string(),
            prompt_name: "justify_aggregation".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg("operation", "zonal, composite or aggregate", true),
                arg("statistics", "The statistic(s) the call computes", true),
                arg(
                    "details",
                    "Zone semantics, nodata policy, input nodata and types",
                    false,
                ),
                arg(
                    "data",
                    "categorical, continuous or unknown, with the evidence",
                    true,
                ),
                arg("expected", "What choice.method must name", true),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        let (operation, decision) = match call.tool() {
            "zonal_stats" => ("zonal", zonal(call)?),
            "raster_composite" => ("composite", composite(call)?),
            "raster_aggregate" => ("aggregate", aggregate(call)?),
            _ => return None,
        };
        let Decision {
            verdict,
            base,
            mut key,
            details,
            data,
            expected,
        } = decision;
        if verdict.upstream_interpolated {
            if let Some(key) = key.as_object_mut() {
                key.insert("upstream".to_string(), json!("interpolated"));
            }
        }
        let why = if verdict.notes.is_empty() {
            match operation {
                "zonal" => {
                    "the statistic and which cells belong to a zone decide the number: another \
                     semantics or statistic gives another result, and so do other zones (MAUP)"
                        .to_string()
                }
                "composite" => {
                    "each statistic favours different cells (max bright ones, min dark ones, \
                     median the typical one); fill and cloud cells must be nodata first"
                        .to_string()
                }
                _ => "each output cell summarises a block: the statistic and the block size \
                     decide what the coarser grid means (MAUP)"
                    .to_string(),
            }
        } else {
            verdict.notes.join("; ")
        };
        let mut items = vec![evidence(base.0, base.1, why, None)];
        items.extend(verdict.evidence);
        let mut parts = verdict.reasons;
        parts.extend(verdict.notes);
        let reason = parts.join("; ");
        let statistics = key
            .get("statistics")
            .and_then(Value::as_array)
            .map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        Some(trigger(
            verdict.severity,
            reason.clone(),
            key,
            &[
                ("tool", call.tool().to_string()),
                ("operation", operation.to_string()),
                ("statistics", statistics),
                ("details", details),
                ("data", data),
                ("expected", expected.join(", ")),
                ("reason", reason),
            ],
            items,
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    /// The statistics, semantics, types and lineage are read from the call and the records:
    /// certain. `categorical_mean` rests on the input looking categorical, certain for declared
    /// classes (a colour table, an attribute table) and a guess for a few integer values in a
    /// sample, and a critical verdict resting on it is no surer.
    fn confidence(call: &Call, trigger: &Trigger) -> Option<f64> {
        weakest(trigger, |item| {
            Some(match item.id.as_str() {
                ids::CATEGORICAL_MEAN => categorical_input_confidence(call).unwrap_or(CERTAIN),
                _ => CERTAIN,
            })
        })
    }

    /// Which statistic a team reports (`zonal_method`, `composite_method`,
    /// `aggregate_method`: the decision every call carries) is its own convention. Averaging
    /// class codes, double-counted boundary cells, empty coverage statistics, saturated sums
    /// and interpolated classes are wrong numbers: never relaxable.
    fn relaxable(evidence_id: &str) -> bool {
        matches!(
            evidence_id,
            ids::ZONAL_METHOD | ids::COMPOSITE_METHOD | ids::AGGREGATE_METHOD
        )
    }

    fn validate(
        key_fields: &Value,
        evidence: &[EvidenceItem],
        justification: &Value,
    ) -> Vec<FieldError> {
        let mut wanted: Vec<String> = Vec::new();
        if let Some(semantics) = key_fields.get("semantics").and_then(Value::as_str) {
            wanted.push(semantics.to_string());
        }
        if let Some(stats) = key_fields.get("statistics").and_then(Value::as_array) {
            wanted.extend(stats.iter().filter_map(Value::as_str).map(String::from));
        }
        let Some(method) = chosen_method(justification) else {
            return vec![field_error("/choice/method", "missing")];
        };
        let missing: Vec<&str> = wanted
            .iter()
            .map(String::as_str)
            .filter(|w| !mentions(method, w))
            .collect();
        let mut errors = Vec::new();
        if !missing.is_empty() {
            errors.push(field_error(
                "/choice/method",
                format!(
                    "the call computes {}, but the choice \"{}\" does not name {}; name the \
                     zone semantics and every statistic this call uses",
                    wanted.join(", "),
                    shorten(method, 200),
                    missing.join(", ")
                ),
            ));
        }
        // The statistic or semantics considered instead: any the call does not use, by any of
        // its names.
        let used: Vec<&str> = CHOICES
            .iter()
            .copied()
            .filter(|c| wanted.iter().any(|w| mentions(c, w) || mentions(w, c)))
            .collect();
        let method_item = alternative_named(
            CHOICES,
            &used,
            "the statistic or zone semantics considered instead",
        );
        let findings = [
            Finding::new(ids::ZONAL_METHOD, vec![method_item.clone()]),
            Finding::new(ids::COMPOSITE_METHOD, vec![method_item.clone()]),
            Finding::new(ids::AGGREGATE_METHOD, vec![method_item]),
            Finding::new(
                ids::CATEGORICAL_MEAN,
                vec![
                    careful::mentions(
                        ORDERED_CODES,
                        "why adding or averaging these codes means something: they are ordered \
                         or binary (a mean of 0/1 is a fraction), not nominal classes",
                    ),
                    Need::RejectsOffered,
                ],
            ),
            Finding::new(
                ids::ALL_TOUCHED_SUM,
                vec![
                    careful::mentions(
                        BOUNDARIES,
                        "how the boundary cells counted in several zones are handled: the zones \
                         do not touch, or the double count is accepted and how large it is",
                    ),
                    Need::RejectsOffered,
                ],
            ),
            Finding::new(ids::COVERAGE_WITHOUT_AREA, vec![Need::RejectsOffered]),
            Finding::new(ids::BLOCK_SUM_SATURATES, vec![Need::RejectsOffered]),
            Finding::new(
                ids::UPSTREAM_INTERPOLATED_CLASSES,
                vec![careful::mentions(
                    ORDERED_CODES,
                    "why interpolated codes still mean something here (the codes are ordered \
                     or continuous fractions), or that they were checked to hold only valid \
                     classes",
                )],
            ),
        ];
        errors.extend(check_answers(evidence, justification, &findings));
        errors
    }
}

/// Every statistic and zone semantics a call can choose, by its names.
const CHOICES: &[&str] = &[
    "count",
    "sum",
    "mean",
    "average",
    "min",
    "max",
    "std",
    "median",
    "med",
    "majority",
    "minority",
    "variety",
    "mode",
    "rms",
    "q1",
    "q3",
    "cell_centre",
    "all_touched",
    "coverage",
];

/// Words that say class codes may be added or averaged.
const ORDERED_CODES: &[&str] = &[
    "ordinal",
    "ordered",
    "order",
    "binary",
    "fraction",
    "share",
    "proportion",
    "indicator",
    "continuous",
    "interval",
    "rank",
    "percent",
    "0/1",
    "boolean",
    "mask",
    "checked",
    "verified",
    "valid class",
    "interpolat",
    "blend",
];

/// Words that say how cells on a shared boundary are handled.
const BOUNDARIES: &[&str] = &[
    "boundar",
    "border",
    "edge",
    "touch",
    "adjacent",
    "neighbour",
    "neighbor",
    "disjoint",
    "apart",
    "separate",
    "isolated",
    "gap",
    "double",
    "twice",
    "overcount",
    "overstat",
    "shared",
];

/// The words of `text`, lower case.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Whether `method` names the statistic or semantics `name`, by a word or a known synonym.
fn mentions(method: &str, name: &str) -> bool {
    let synonyms: &[&str] = match name {
        "cell_centre" => &["cell_centre", "cell center"],
        "all_touched" => &["all_touched", "all touched"],
        "coverage" => &[
            "coverage",
            "exact",
            "area-weighted",
            "area weighted",
            "fraction",
        ],
        "mean" => &["mean", "average"],
        "average" => &["average", "mean"],
        "std" => &["std", "stdev", "stddev", "standard deviation"],
        "median" | "med" => &["median", "med"],
        "majority" | "mode" => &["majority", "mode", "most frequent"],
        "minority" => &["minority", "least frequent"],
        "variety" => &["variety", "distinct"],
        "sum" => &["sum", "total"],
        "min" => &["min", "minimum"],
        "max" => &["max", "maximum"],
        "rms" => &["rms", "root mean square"],
        "q1" => &["q1", "first quartile", "lower quartile", "25th percentile"],
        "q3" => &["q3", "third quartile", "upper quartile", "75th percentile"],
        other => return names(method, other),
    };
    let tokens = words(method);
    synonyms.iter().any(|s| {
        if s.chars().all(|c| c.is_ascii_alphanumeric()) {
            tokens.iter().any(|t| t == s)
        } else {
            names(method, s)
        }
    })
}

export_domain!(Aggregation);

#[cfg(test)]
mod tests;
