//! Classification tables of the domain, run natively.

use super::*;
use gdal_mcp_domain_sdk::testing::{call, raster, raster_dataset, utm33, vector_dataset, wgs84};
use gdal_mcp_domain_sdk::testing::{checked, evidence_ids as ids, evidence_item as item, offered};
use gdal_mcp_domain_sdk::testing::{lineage, resampled_step, upstream_step, with_upstream};
use gdal_mcp_domain_sdk::{DatasetFacts, ToolCall, UpstreamStep};

fn severity(trigger: &Option<Trigger>) -> Option<Severity> {
    trigger.as_ref().map(|t| t.severity)
}

fn key(trigger: &Option<Trigger>) -> Value {
    trigger
        .as_ref()
        .and_then(|t| serde_json::from_str(&t.key_fields).ok())
        .unwrap_or(Value::Null)
}

fn reason(trigger: &Option<Trigger>) -> String {
    trigger
        .as_ref()
        .map(|t| t.reason.clone())
        .unwrap_or_default()
}

/// Classify, and check the evidence contract and that the operation's item comes first.
fn run(raw: ToolCall) -> Option<Trigger> {
    let got = checked(Aggregation::classify(&Call::new(raw)));
    if let Some(t) = &got {
        assert!(
            t.evidence
                .first()
                .is_some_and(|e| e.id.ends_with("_method")),
            "{}",
            t.reason
        );
    }
    got
}

fn zonal_call(arguments: Value, categorical: bool, zones: &str) -> ToolCall {
    let data_type = if categorical { "Byte" } else { "Float32" };
    let mut r = raster(data_type, 1, categorical);
    r.nodata = vec![Some(-9999.0)];
    call(
        "zonal_stats",
        arguments,
        vec![
            raster_dataset("input", Some(utm33()), r),
            vector_dataset("zones", "GPKG", Some(utm33()), &[("districts", zones)]),
        ],
    )
}

#[test]
fn zonal_table() {
    let z = |stats: Value, semantics: &str| json!({"stats": stats, "semantics": semantics});
    type Row = (&'static str, Value, bool, &'static str, Option<Severity>);
    let table: Vec<Row> = vec![
        (
            "mean of a surface",
            z(json!(["mean", "count"]), "cell_centre"),
            false,
            "Multi Polygon",
            Some(Severity::Required),
        ),
        (
            "majority of classes",
            z(json!(["majority", "variety"]), "coverage"),
            true,
            "Polygon",
            Some(Severity::Required),
        ),
        (
            "mean of classes",
            z(json!(["mean"]), "cell_centre"),
            true,
            "Polygon",
            Some(Severity::Critical),
        ),
        (
            "median of classes",
            z(json!(["median", "count"]), "coverage"),
            true,
            "Polygon",
            Some(Severity::Critical),
        ),
        (
            "max of classes",
            z(json!(["max"]), "cell_centre"),
            true,
            "Polygon",
            Some(Severity::Required),
        ),
        (
            "sum with all_touched",
            z(json!(["sum"]), "all_touched"),
            false,
            "Polygon",
            Some(Severity::Critical),
        ),
        (
            "mean with all_touched",
            z(json!(["mean"]), "all_touched"),
            false,
            "Polygon",
            Some(Severity::Required),
        ),
        (
            "sum with coverage",
            z(json!(["sum"]), "coverage"),
            false,
            "Polygon",
            Some(Severity::Required),
        ),
        (
            "coverage of lines",
            z(json!(["mean"]), "coverage"),
            false,
            "Line String",
            Some(Severity::Critical),
        ),
        (
            "centres of points",
            z(json!(["mean"]), "cell_centre"),
            false,
            "3D Point",
            Some(Severity::Required),
        ),
    ];
    for (name, arguments, categorical, zones, expected) in table {
        let got = run(zonal_call(arguments, categorical, zones));
        assert_eq!(severity(&got), expected, "{name}: {}", reason(&got));
    }
    let got = run(zonal_call(
        json!({"input": "/w/r.tif", "zones": "/w/z.gpkg", "stats": ["mean", "count", "mean"],
               "semantics": "coverage", "nodata_policy": "propagate", "zone_layer": "districts"}),
        false,
        "Multi Polygon",
    ));
    assert_eq!(
        key(&got),
        json!({"operation": "zonal", "statistics": ["count", "mean"], "semantics": "coverage",
               "nodata_policy": "propagate", "data": "continuous", "zones": "polygons"})
    );
    assert!(reason(&got).contains("propagate"), "{}", reason(&got));
}

#[test]
fn zonal_notes_do_not_raise_the_severity() {
    let mut raw = zonal_call(
        json!({"stats": ["count", "mean"], "semantics": "all_touched", "band": 2}),
        true,
        "Polygon",
    );
    raw.datasets[0].crs = Some(wgs84());
    if let Some(r) = raw.datasets[0].raster.as_mut() {
        r.band_count = 2;
        r.data_types = vec!["Byte".to_string(), "Int16".to_string()];
        r.nodata = vec![None, None];
    }
    let got = run(raw);
    assert_eq!(severity(&got), Some(Severity::Required), "{}", reason(&got));
    let text = reason(&got);
    for expected in ["band 2 is Int16", "overstates", "geographic", "no nodata"] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    assert_eq!(key(&got)["data"], json!("unknown"));
}

fn inputs(categorical: bool, nodata: bool) -> Vec<DatasetFacts> {
    (1..=3)
        .map(|i| {
            let mut r = raster(if categorical { "Byte" } else { "Int16" }, 1, categorical);
            if nodata {
                r.nodata = vec![Some(0.0)];
            }
            let role = if i == 1 {
                "input".to_string()
            } else {
                format!("input{i}")
            };
            raster_dataset(&role, Some(utm33()), r)
        })
        .collect()
}

#[test]
fn composite_table() {
    let composite = |statistic: &str, categorical: bool, nodata: bool| {
        run(call(
            "raster_composite",
            json!({"statistic": statistic}),
            inputs(categorical, nodata),
        ))
    };
    assert_eq!(
        severity(&composite("median", false, true)),
        Some(Severity::Required)
    );
    assert_eq!(
        severity(&composite("max", false, true)),
        Some(Severity::Required)
    );
    assert_eq!(
        severity(&composite("mean", true, true)),
        Some(Severity::Critical)
    );
    assert_eq!(
        severity(&composite("sum", true, true)),
        Some(Severity::Critical)
    );
    assert_eq!(
        severity(&composite("count", true, true)),
        Some(Severity::Required)
    );
    let bare = composite("min", false, false);
    assert_eq!(severity(&bare), Some(Severity::Required));
    assert!(
        reason(&bare).contains("3 of 3 inputs declare no nodata"),
        "{}",
        reason(&bare)
    );
    assert_eq!(
        key(&bare),
        json!({"operation": "composite", "statistics": ["min"], "data": "continuous",
               "input_nodata": "none"})
    );
}

#[test]
fn aggregate_table() {
    let aggregate = |statistic: &str, data_type: &str, categorical: bool, factor: Value| {
        let input = raster_dataset("input", Some(utm33()), raster(data_type, 1, categorical));
        run(call(
            "raster_aggregate",
            json!({"input": "a.tif", "output": "b.tif", "statistic": statistic, "factor": factor}),
            vec![input],
        ))
    };
    type Row = (&'static str, &'static str, bool, Value, Option<Severity>);
    let table: Vec<Row> = vec![
        (
            "average",
            "Float32",
            false,
            json!(4),
            Some(Severity::Required),
        ),
        ("sum", "Float32", false, json!(4), Some(Severity::Required)),
        ("mode", "Byte", true, json!(4), Some(Severity::Required)),
        ("average", "Byte", true, json!(4), Some(Severity::Critical)),
        ("q3", "Byte", true, json!([2, 3]), Some(Severity::Critical)),
        // R10-6: integer block sums are settled by the host (a type that holds them).
        (
            "sum",
            "Byte",
            false,
            json!([2, 2]),
            Some(Severity::Required),
        ),
        ("sum", "Int16", false, json!(10), Some(Severity::Required)),
        ("sum", "Int32", false, json!(10), Some(Severity::Required)),
        ("max", "Byte", true, json!(4), Some(Severity::Required)),
        ("count", "Byte", true, json!(4), Some(Severity::Required)),
    ];
    for (statistic, data_type, categorical, factor, expected) in table {
        let got = aggregate(statistic, data_type, categorical, factor.clone());
        assert_eq!(
            severity(&got),
            expected,
            "{statistic} {data_type} categorical={categorical} factor={factor}: {}",
            reason(&got)
        );
    }
    let got = aggregate("average", "Int16", false, json!(4));
    assert_eq!(
        key(&got),
        json!({"operation": "aggregate", "statistics": ["average"], "data": "continuous",
               "data_types": "Int16"})
    );
    assert!(reason(&got).contains("rounded"), "{}", reason(&got));
    assert!(run(call(
        "raster_resample",
        json!({"resampling": "average"}),
        inputs(false, true)
    ))
    .is_none());
}

#[test]
fn validate_wants_the_statistics_and_semantics() {
    let just = |m: &str| json!({"choice": {"method": m}});
    let zonal = json!({"operation": "zonal", "statistics": ["count", "mean", "std"], "semantics": "cell_centre"});
    assert!(Aggregation::validate(
        &zonal,
        &[],
        &just("mean, standard deviation and count of cells whose cell centre is inside")
    )
    .is_empty());
    assert_eq!(
        Aggregation::validate(&zonal, &[], &just("mean and count, cell centre")).len(),
        1
    );
    assert_eq!(
        Aggregation::validate(&zonal, &[], &just("mean, std, count, all touched")).len(),
        1
    );
    let touched = json!({"statistics": ["min"], "semantics": "all_touched"});
    assert_eq!(
        Aggregation::validate(&touched, &[], &just("minority with all_touched")).len(),
        1
    );
    assert!(Aggregation::validate(&touched, &[], &just("minimum, all touched")).is_empty());
    let aggregate = json!({"operation": "aggregate", "statistics": ["average"]});
    assert!(Aggregation::validate(&aggregate, &[], &just("block mean")).is_empty());
    assert_eq!(
        Aggregation::validate(&aggregate, &[], &just("block sum")).len(),
        1
    );
    assert_eq!(Aggregation::validate(&aggregate, &[], &json!({})).len(), 1);
}

#[test]
fn the_prompt_renders_every_placeholder() {
    let got = run(zonal_call(
        json!({"stats": ["sum"], "semantics": "all_touched"}),
        false,
        "Polygon",
    ));
    let arguments = got.map(|t| t.prompt_arguments).unwrap_or_default();
    let text = Aggregation::render_prompt(&arguments);
    assert!(
        text.contains("all_touched, sum") && !text.contains("{{"),
        "{text}"
    );
}

#[test]
fn a_choice_that_restates_the_decision_is_accepted() {
    let cases = [
        run(zonal_call(
            json!({"stats": ["count", "sum", "mean", "min", "max", "median", "majority", "variety", "std", "minority"], "semantics": "all_touched"}),
            false,
            "Polygon",
        )),
        run(zonal_call(
            json!({"stats": ["mean"], "semantics": "cell_centre"}),
            true,
            "Polygon",
        )),
        run(call(
            "raster_composite",
            json!({"statistic": "median"}),
            inputs(false, true),
        )),
    ];
    for got in cases {
        let key = key(&got);
        let method = key
            .as_object()
            .map(|fields| {
                fields
                    .values()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let errors = Aggregation::validate(&key, &[], &json!({"choice": {"method": method}}));
        assert!(
            errors.is_empty(),
            "{method}: {:?}",
            errors.first().map(|e| &e.message)
        );
    }
}

#[test]
fn zonal_evidence_has_the_numbers_and_the_alternatives() {
    let got = run(zonal_call(
        json!({"stats": ["mean", "count"], "semantics": "cell_centre"}),
        true,
        "Multi Polygon",
    ));
    assert_eq!(ids(&got), vec!["zonal_method", "categorical_mean"]);
    assert_eq!(
        item(&got, "zonal_method").fact,
        "count, mean under cell_centre (nodata policy ignore) of band 1 is Byte with a colour \
         table; a 256 × 256 sample of it holds at most 32 distinct integer values, cells of \
         30 × 30 m, nodata -9999; zones: districts (Multi Polygon, 10 features)"
    );
    assert!(item(&got, "categorical_mean")
        .fact
        .ends_with("the call computes mean"));
    assert_eq!(
        offered(&got, "categorical_mean"),
        Some(json!({"stats": ["count", "majority"]}))
    );
    let touched = run(zonal_call(
        json!({"stats": ["sum"], "semantics": "all_touched"}),
        false,
        "Polygon",
    ));
    assert_eq!(ids(&touched), vec!["zonal_method", "all_touched_sum"]);
    assert!(item(&touched, "all_touched_sum")
        .fact
        .contains("zones districts (Polygon, 10 features) on cells of 30 × 30 m"));
    assert_eq!(
        offered(&touched, "all_touched_sum"),
        Some(json!({"semantics": "coverage"}))
    );
    let lines = run(zonal_call(
        json!({"stats": ["mean"], "semantics": "coverage"}),
        false,
        "Line String",
    ));
    assert_eq!(
        offered(&lines, "coverage_without_area"),
        Some(json!({"semantics": "cell_centre"}))
    );
}

#[test]
fn block_sums_are_settled_by_the_host_and_modes_offered_for_classes() {
    let aggregate = |statistic: &str, data_type: &str, categorical: bool| {
        run(call(
            "raster_aggregate",
            json!({"statistic": statistic, "factor": [4, 4]}),
            vec![raster_dataset(
                "input",
                Some(utm33()),
                raster(data_type, 1, categorical),
            )],
        ))
    };
    // Attack round 10, R10-6: the host writes a block sum in a type that holds it (from the
    // input's values read exactly) and refuses an output_type that cannot, so the domain no
    // longer asks a question the data answers (a 0/1 mask summed in Byte was asked).
    let sum = aggregate("sum", "Byte", false);
    assert_eq!(severity(&sum), Some(Severity::Required));
    assert!(sum
        .as_ref()
        .is_some_and(|t| t.evidence.iter().all(|e| e.id != "block_sum_saturates")));
    let average = aggregate("average", "Byte", true);
    assert_eq!(
        offered(&average, "categorical_mean"),
        Some(json!({"statistic": "mode"}))
    );
    assert!(item(&average, "aggregate_method")
        .fact
        .starts_with("average over blocks of 4 × 4 = 16 cells, written as Byte"));
    // Composites have no class statistic: no alternative.
    let composite = run(call(
        "raster_composite",
        json!({"statistic": "mean"}),
        inputs(true, true),
    ));
    assert_eq!(offered(&composite, "categorical_mean"), None);
    assert!(item(&composite, "composite_method")
        .fact
        .starts_with("per-cell mean of 3 inputs, 3 of them with nodata declared"));
}

#[test]
fn undeclared_sentinels_are_in_the_facts() {
    let mut r = raster("Float32", 1, false);
    r.bands[0].undeclared_sentinels =
        vec![gdal_mcp_domain_sdk::testing::sentinel(-9999.0, 40, "known")];
    r.bands[0].sampled_cells = 10_000;
    let got = run(call(
        "raster_aggregate",
        json!({"statistic": "average", "factor": 2}),
        vec![raster_dataset("input", Some(utm33()), r)],
    ));
    assert!(item(&got, "aggregate_method").fact.ends_with(
        "no nodata declared (a sample of 10000 cells holds -9999 in 40 cells, undeclared)"
    ));
}

/// `raw` with its first dataset (the raster `input`) made through `steps`.
fn made_through(mut raw: ToolCall, steps: Vec<UpstreamStep>) -> ToolCall {
    if let Some(first) = raw.datasets.first_mut() {
        first.upstream = lineage(steps);
    }
    raw
}

fn bilinear() -> Vec<UpstreamStep> {
    vec![resampled_step(1, "raster_resample", "bilinear", None)]
}

#[test]
fn class_statistics_of_codes_interpolated_upstream_are_critical() {
    // Zonal majority of a surface that no longer looks categorical: the lineage says why.
    let got = run(made_through(
        zonal_call(
            json!({"stats": ["majority", "variety"], "semantics": "cell_centre"}),
            false,
            "Polygon",
        ),
        bilinear(),
    ));
    assert_eq!(severity(&got), Some(Severity::Critical), "{}", reason(&got));
    let upstream = item(&got, "upstream_interpolated_classes");
    assert_eq!(
        upstream.fact,
        "raster_resample 1 step up resampled with bilinear; the call computes majority, variety \
         of it"
    );
    assert!(
        upstream.why.contains("classes 1 and 3 it wrote 2"),
        "{}",
        upstream.why
    );
    assert_eq!(key(&got)["upstream"], json!("interpolated"));
    assert!(reason(&got).contains("interpolated upstream with bilinear"));

    // Block mode of a raster a reprojection interpolated two steps up.
    let input = with_upstream(
        raster_dataset("input", Some(utm33()), raster("Byte", 1, true)),
        vec![
            upstream_step(1, "raster_convert"),
            resampled_step(
                2,
                "raster_reproject",
                "cubic",
                Some("EPSG:4326 -> EPSG:32633"),
            ),
        ],
    );
    let got = run(call(
        "raster_aggregate",
        json!({"statistic": "mode", "factor": 4}),
        vec![input],
    ));
    assert_eq!(severity(&got), Some(Severity::Critical));
    assert_eq!(
        item(&got, "upstream_interpolated_classes").fact,
        "raster_reproject 2 steps up resampled with cubic (EPSG:4326 -> EPSG:32633); the call \
         computes mode of it"
    );
}

#[test]
fn averaging_interpolated_codes_that_look_categorical_is_critical_twice() {
    let got = run(made_through(
        zonal_call(
            json!({"stats": ["mean"], "semantics": "cell_centre"}),
            true,
            "Polygon",
        ),
        bilinear(),
    ));
    assert_eq!(severity(&got), Some(Severity::Critical));
    assert_eq!(
        ids(&got),
        vec![
            "zonal_method".to_string(),
            "categorical_mean".to_string(),
            "upstream_interpolated_classes".to_string()
        ]
    );
    assert!(item(&got, "upstream_interpolated_classes")
        .why
        .contains("mean average(s) or add(s) codes"));
    // A composite: the interpolated input is named by its role.
    let mut datasets = inputs(true, true);
    datasets[1].upstream = lineage(vec![resampled_step(1, "raster_resample", "average", None)]);
    let got = run(call(
        "raster_composite",
        json!({"statistic": "mean"}),
        datasets,
    ));
    assert_eq!(severity(&got), Some(Severity::Critical));
    assert_eq!(
        item(&got, "upstream_interpolated_classes").fact,
        "input2: raster_resample 1 step up resampled with average; the call computes mean of it"
    );
}

/// Regression (issue 21): rewriting an interpolated file outside the server laundered the
/// finding (the host reported `modified_since` and the steps were dropped). The host now gives
/// the steps of what the server last wrote there; the edit cannot undo them.
#[test]
fn a_file_modified_since_its_interpolation_is_still_critical() {
    let mut raw = made_through(
        zonal_call(
            json!({"stats": ["majority"], "semantics": "cell_centre"}),
            true,
            "Polygon",
        ),
        bilinear(),
    );
    raw.datasets[0].upstream.modified_since = true;
    let got = run(raw);
    assert_eq!(severity(&got), Some(Severity::Critical));
    assert!(ids(&got).contains(&"upstream_interpolated_classes".to_string()));
    assert_eq!(key(&got)["upstream"], json!("interpolated"));
}

#[test]
fn no_upstream_finding_without_interpolated_codes() {
    let majority = || {
        zonal_call(
            json!({"stats": ["majority"], "semantics": "cell_centre"}),
            true,
            "Polygon",
        )
    };
    let mut modified = majority();
    modified.datasets[0].upstream.modified_since = true;
    let cases: Vec<(&str, ToolCall)> = vec![
        ("made outside the server", majority()),
        (
            "nearest upstream",
            made_through(
                majority(),
                vec![resampled_step(1, "raster_resample", "nearest", None)],
            ),
        ),
        (
            "mode upstream, reprojected",
            made_through(
                majority(),
                vec![resampled_step(
                    1,
                    "raster_reproject",
                    "mode",
                    Some("EPSG:4326 -> EPSG:32633"),
                )],
            ),
        ),
        ("modified since (the host reports it)", modified),
        (
            "a mean of a continuous surface interpolated upstream",
            made_through(
                zonal_call(
                    json!({"stats": ["mean"], "semantics": "cell_centre"}),
                    false,
                    "Polygon",
                ),
                bilinear(),
            ),
        ),
    ];
    for (name, raw) in cases {
        let got = run(raw);
        assert_eq!(severity(&got), Some(Severity::Required), "{name}");
        assert!(
            !ids(&got).contains(&"upstream_interpolated_classes".to_string()),
            "{name}"
        );
        assert_eq!(key(&got).get("upstream"), None, "{name}");
    }
    let nearest = with_upstream(
        raster_dataset("input", Some(utm33()), raster("Byte", 1, true)),
        vec![resampled_step(1, "raster_resample", "nearest", None)],
    );
    let got = run(call(
        "raster_aggregate",
        json!({"statistic": "mode", "factor": 4}),
        vec![nearest],
    ));
    assert_eq!(severity(&got), Some(Severity::Required));
}
