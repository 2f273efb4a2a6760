//! Classification tables and validate checks of the domain, run natively.

use super::*;
use gdal_mcp_domain_sdk::testing::{call, crs, measurement, planar_measurement, utm33};
use gdal_mcp_domain_sdk::testing::{checked, evidence_ids, evidence_item as item, offered};
use gdal_mcp_domain_sdk::testing::{vector_dataset, with_measurement};
use gdal_mcp_domain_sdk::{CrsKind, PromptValue, ToolCall};

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

fn classify(raw: ToolCall) -> Option<Trigger> {
    checked(Measurement::classify(&Call::new(raw)))
}

/// Classify `tool` with these measurement facts (and an input dataset, as the host sends it).
fn run(tool: &str, facts: MeasurementFacts) -> Option<Trigger> {
    let dataset = vector_dataset(
        "input",
        "GPKG",
        Some(utm33()),
        &[("parcels", "Multi Polygon")],
    );
    classify(with_measurement(
        call(tool, json!({"input": "parcels.gpkg"}), vec![dataset]),
        facts,
    ))
}

/// `EPSG:3857`, WGS 84 / Pseudo-Mercator.
fn web_mercator() -> CrsFacts {
    crs(
        Some("EPSG:3857"),
        "WGS 84 / Pseudo-Mercator",
        CrsKind::Projected,
        "WGS_1984",
    )
}

/// `EPSG:2264`, NAD83 / North Carolina (ftUS): in US survey feet.
fn state_plane_feet() -> CrsFacts {
    CrsFacts {
        linear_unit: Some("US survey foot".to_string()),
        linear_unit_metres: Some(0.304_800_609_6),
        ..crs(
            Some("EPSG:2264"),
            "NAD83 / North Carolina (ftUS)",
            CrsKind::Projected,
            "North_American_Datum_1983",
        )
    }
}

/// Planar facts in Web Mercator with these area and length errors, worst at 12.5° E, 35° N.
fn planar(area: f64, length: f64) -> MeasurementFacts {
    planar_measurement(web_mercator(), area, length, (12.5, 35.0))
}

fn kinds(kinds: &[&str]) -> Vec<String> {
    kinds.iter().map(|k| (*k).to_string()).collect()
}

fn just(method: &str, tradeoffs: &str, answers: Value) -> Value {
    json!({
        "intent": "total parcel area for the report",
        "alternatives": [
            {"method": "make_valid", "why_not": "repairing splits bow-tie parcels into lobes the registry lacks"},
            {"method": "geodesic", "why_not": "the 2010 survey we compare with was taken in this plane"}],
        "choice": {"method": method, "rationale": "r", "tradeoffs": tradeoffs},
        "evidence": answers,
    })
}

/// A careful answer to `invalid_geometries`.
fn invalid_answer() -> Value {
    json!({"invalid_geometries": "the bow-tie parcels are reported apart and left out of the total"})
}

// ---------------------------------------------------------------------------------------------
// What is not gated

#[test]
fn other_tools_and_calls_without_measurement_facts_are_not_gated() {
    let bad = MeasurementFacts {
        invalid_features: 3,
        ..planar(0.5, 0.5)
    };
    for tool in [
        "vector_info",
        "vector_convert",
        "vector_reproject",
        "vector_clip",
        "zonal_stats",
        "raster_calc",
        "points_from_table",
    ] {
        assert!(run(tool, bad.clone()).is_none(), "{tool}");
    }
    for tool in TOOLS {
        let plain = classify(call(tool, json!({}), Vec::new()));
        assert!(plain.is_none(), "{tool} without measurement facts");
    }
}

#[test]
fn a_clean_measurement_is_not_gated() {
    for tool in TOOLS {
        assert!(run(tool, measurement("geodesic")).is_none(), "{tool}");
        // Planar in UTM inside its zone: 0.08 % of area, 0.04 % of length.
        let utm = planar_measurement(utm33(), 0.0008, 0.0004, (15.0, 45.0));
        assert!(run(tool, utm).is_none(), "{tool}");
    }
}

// ---------------------------------------------------------------------------------------------
// planar_distortion

#[test]
fn planar_distortion_thresholds_for_areas() {
    type Row = (f64, Option<Severity>);
    let table: [Row; 6] = [
        (0.0099, None),
        (0.01, None),
        (0.0101, Some(Severity::Required)),
        (0.10, Some(Severity::Required)),
        (0.1001, Some(Severity::Critical)),
        (0.49, Some(Severity::Critical)),
    ];
    for (area, expected) in table {
        // The length error stays small: polygons in vector_measure are judged by area.
        let got = run("vector_measure", planar(area, 0.001));
        assert_eq!(severity(&got), expected, "area error {area}");
        if expected.is_some() {
            assert_eq!(evidence_ids(&got), ["planar_distortion"], "{area}");
            assert_eq!(
                offered(&got, "planar_distortion"),
                Some(json!({"method": "geodesic"}))
            );
        }
    }
}

#[test]
fn planar_distortion_thresholds_for_lengths() {
    // Lines in vector_measure, and every other tool, are judged by the length error.
    let lines = |area: f64, length: f64| MeasurementFacts {
        geometry_kinds: kinds(&["line"]),
        ..planar(area, length)
    };
    type Row = (&'static str, MeasurementFacts, Option<Severity>);
    let table: Vec<Row> = vec![
        ("vector_measure", lines(0.5, 0.0099), None),
        (
            "vector_measure",
            lines(0.0, 0.0101),
            Some(Severity::Required),
        ),
        ("vector_measure", lines(0.0, 0.10), Some(Severity::Required)),
        (
            "vector_measure",
            lines(0.0, 0.1001),
            Some(Severity::Critical),
        ),
        ("vector_buffer", planar(0.5, 0.0099), None),
        ("vector_buffer", planar(0.0, 0.02), Some(Severity::Required)),
        ("vector_buffer", planar(0.0, 0.22), Some(Severity::Critical)),
        ("vector_overlay", planar(0.5, 0.01), None),
        (
            "vector_overlay",
            planar(0.0, 0.05),
            Some(Severity::Required),
        ),
        ("vector_join", planar(0.0, 0.11), Some(Severity::Critical)),
    ];
    for (tool, facts, expected) in table {
        let label = format!("{tool} {:?}", facts.length_scale_error);
        let got = run(tool, facts);
        assert_eq!(severity(&got), expected, "{label}");
    }
}

#[test]
fn planar_distortion_names_the_crs_the_error_and_where_it_is_worst() {
    let got = run("vector_measure", planar(0.490_3, 0.220_8));
    let e = item(&got, "planar_distortion");
    assert_eq!(
        e.fact,
        "planar figures in EPSG:3857 (WGS 84 / Pseudo-Mercator): scale error of up to 49.0 % \
         for areas over the data's extent (lengths up to 22.1 %), worst at 12.5° E, 35° N"
    );
    assert!(e.why.contains("every area"), "{}", e.why);
    assert_eq!(
        reason(&got),
        "planar areas in EPSG:3857 are off by up to 49.0 % over the data's extent"
    );
    // Lengths: the length error first; the west and south are spelled out.
    let facts = MeasurementFacts {
        worst_at: Some((-71.25, -33.5)),
        crs: Some(CrsFacts {
            id: None,
            ..web_mercator()
        }),
        ..planar(0.04, 0.02)
    };
    let got = run("vector_buffer", facts);
    let e = item(&got, "planar_distortion");
    assert_eq!(
        e.fact,
        "planar figures in WGS 84 / Pseudo-Mercator: scale error of up to 2.0 % for lengths \
         over the data's extent (areas up to 4.0 %), worst at 71.25° W, 33.5° S"
    );
    assert!(e.why.contains("buffer"), "{}", e.why);
}

#[test]
fn planar_distortion_offers_geodesic_only_to_tools_that_take_a_method() {
    for (tool, alternative) in [
        ("vector_measure", Some(json!({"method": "geodesic"}))),
        ("vector_buffer", Some(json!({"method": "geodesic"}))),
        ("vector_overlay", None),
        ("vector_join", None),
    ] {
        let got = run(tool, planar(0.3, 0.2));
        assert_eq!(offered(&got, "planar_distortion"), alternative, "{tool}");
    }
}

#[test]
fn planar_distortion_needs_planar_figures_and_a_known_error() {
    // Geodesic figures have no projection error, whatever the facts say.
    let geodesic = MeasurementFacts {
        method: "geodesic".to_string(),
        ..planar(0.5, 0.5)
    };
    assert!(run("vector_measure", geodesic).is_none());
    // No error sampled (no extent): nothing to say.
    let unknown = MeasurementFacts {
        area_scale_error: None,
        length_scale_error: None,
        worst_at: None,
        ..planar(0.0, 0.0)
    };
    assert!(run("vector_measure", unknown).is_none());
    let nan = planar(f64::NAN, f64::NAN);
    assert!(run("vector_measure", nan).is_none());
    // Only the area error known, for lines: nothing.
    let area_only = MeasurementFacts {
        length_scale_error: None,
        geometry_kinds: kinds(&["line"]),
        ..planar(0.5, 0.0)
    };
    assert!(run("vector_measure", area_only).is_none());
}

// ---------------------------------------------------------------------------------------------
// invalid_geometries, geometries_repaired

#[test]
fn invalid_geometries_are_critical_unless_repaired() {
    let none = MeasurementFacts {
        invalid_features: 0,
        ..measurement("geodesic")
    };
    assert!(run("vector_measure", none).is_none());
    for tool in TOOLS {
        let invalid = MeasurementFacts {
            features_checked: 120,
            invalid_features: 3,
            ..measurement("geodesic")
        };
        let got = run(tool, invalid.clone());
        assert_eq!(severity(&got), Some(Severity::Critical), "{tool}");
        let e = item(&got, "invalid_geometries");
        assert_eq!(
            e.fact,
            "3 of 120 features checked are invalid; the area of a self-crossing ring is \
             undefined: GEOS gives a figure-eight 0 m²"
        );
        assert_eq!(
            offered(&got, "invalid_geometries"),
            Some(json!({"make_valid": true}))
        );
        assert_eq!(key(&got)["findings"], json!(["invalid_geometries"]));

        let repaired = MeasurementFacts {
            make_valid: true,
            ..invalid
        };
        let got = run(tool, repaired);
        assert_eq!(severity(&got), Some(Severity::Advisory), "{tool}");
        assert_eq!(evidence_ids(&got), ["geometries_repaired"]);
        assert!(offered(&got, "geometries_repaired").is_none());
        assert_eq!(key(&got)["findings"], json!([]));
    }
    let one = MeasurementFacts {
        features_checked: 1,
        invalid_features: 1,
        ..measurement("geodesic")
    };
    let got = run("vector_measure", one);
    assert!(item(&got, "invalid_geometries")
        .fact
        .starts_with("1 of 1 features checked is invalid;"));
}

// ---------------------------------------------------------------------------------------------
// overlapping_features

#[test]
fn overlapping_features_count_twice_in_joins() {
    let overlapping = |pairs: Option<u64>, dissolve: bool| MeasurementFacts {
        overlapping_pairs: pairs,
        overlap_area_m2: pairs.map(|p| p as f64 * 1250.5),
        dissolve,
        ..measurement("geodesic")
    };
    type Row = (&'static str, Option<u64>, bool, Option<Severity>);
    // Issue 18: vector_measure's totals are settled by the host (`overlaps`: the sum and the
    // union as candidates, `data_conflict` when they differ), so the domain never judges them.
    let table: [Row; 9] = [
        ("vector_measure", None, false, None),
        ("vector_measure", Some(0), false, None),
        ("vector_measure", Some(2), false, None),
        ("vector_measure", Some(2), true, None),
        ("vector_join", Some(0), false, None),
        ("vector_join", Some(1), false, Some(Severity::Required)),
        ("vector_join", Some(1), true, None),
        ("vector_buffer", Some(5), false, None),
        ("vector_overlay", Some(5), false, None),
    ];
    for (tool, pairs, dissolve, expected) in table {
        let got = run(tool, overlapping(pairs, dissolve));
        assert_eq!(
            severity(&got),
            expected,
            "{tool} pairs {pairs:?} dissolve {dissolve}"
        );
    }
    let got = run("vector_join", overlapping(Some(2), false));
    assert_eq!(
        item(&got, "overlapping_features").fact,
        "2 pairs of polygons overlap by 2501 m² in all: the total counts 2501 m² twice"
    );
    let got = run("vector_join", overlapping(Some(1), false));
    let e = item(&got, "overlapping_features");
    assert!(e
        .fact
        .starts_with("1 pair of polygons overlap by 1250.5 m²"));
    assert!(e.why.contains("matches every polygon"), "{}", e.why);
    assert!(offered(&got, "overlapping_features").is_none());
    // Pairs known, area not measured.
    let unknown_area = MeasurementFacts {
        overlap_area_m2: None,
        ..overlapping(Some(3), false)
    };
    let got = run("vector_join", unknown_area);
    assert!(item(&got, "overlapping_features")
        .fact
        .contains("not measured"));
}

// ---------------------------------------------------------------------------------------------
// What the host settles: ignored Z and unweighted means

/// Issue 18: Z and means are settled by the host (`z`; `weighting`/`weight`), which computes
/// the candidates and refuses as `data_conflict` when they differ. The rules that judged the
/// `z-ignored` and `unweighted-means` facts are gone: nothing fires on them, whatever the tool
/// (the host sends them false and empty).
#[test]
fn ignored_z_and_unweighted_means_are_settled_by_the_host_not_judged() {
    let facts = MeasurementFacts {
        z_ignored: true,
        unweighted_means: kinds(&["rate:mean", "density:mean"]),
        geometry_kinds: kinds(&["line"]),
        ..measurement("geodesic")
    };
    for tool in TOOLS {
        assert!(run(tool, facts.clone()).is_none(), "{tool}");
    }
}

// ---------------------------------------------------------------------------------------------
// Advisories: non_metre_unit, distance_unit_conversion, mixed_geometries

#[test]
fn a_crs_in_feet_is_advisory_for_planar_figures_only() {
    let feet = planar_measurement(state_plane_feet(), 0.0001, 0.0001, (-79.0, 35.5));
    let got = run("vector_measure", feet.clone());
    assert_eq!(severity(&got), Some(Severity::Advisory));
    assert_eq!(evidence_ids(&got), ["non_metre_unit"]);
    assert_eq!(
        item(&got, "non_metre_unit").fact,
        "EPSG:2264 (NAD83 / North Carolina (ftUS)) is in US survey foot (1 US survey foot = \
         0.3048006096 m)"
    );
    assert_eq!(key(&got)["crs"], json!("EPSG:2264"));
    // In metres: nothing; geodesic: the CRS unit does not enter the figures.
    assert!(run(
        "vector_measure",
        planar_measurement(utm33(), 0.0001, 0.0001, (15.0, 45.0))
    )
    .is_none());
    let geodesic = MeasurementFacts {
        method: "geodesic".to_string(),
        ..feet
    };
    assert!(run("vector_measure", geodesic).is_none());
}

#[test]
fn a_converted_distance_is_advisory() {
    let facts = MeasurementFacts {
        distance_units: Some(("m".to_string(), "US survey foot".to_string())),
        ..measurement("geodesic")
    };
    let got = run("vector_buffer", facts);
    assert_eq!(severity(&got), Some(Severity::Advisory));
    assert_eq!(
        item(&got, "distance_unit_conversion").fact,
        "the distance is given in m; the CRS's unit is US survey foot; the host converted it \
         to US survey foot"
    );
    assert!(run("vector_buffer", measurement("geodesic")).is_none());
}

#[test]
fn mixed_geometry_kinds_are_advisory() {
    let mixed = MeasurementFacts {
        geometry_kinds: kinds(&["polygon", "line", "point"]),
        ..measurement("geodesic")
    };
    let got = run("vector_measure", mixed);
    assert_eq!(severity(&got), Some(Severity::Advisory));
    let e = item(&got, "mixed_geometries");
    assert_eq!(e.fact, "the input holds polygon, line, point features");
    assert!(e
        .why
        .contains("a polygon's perimeter is never a line's length"));
    for one in [vec![], kinds(&["point"])] {
        let facts = MeasurementFacts {
            geometry_kinds: one,
            ..measurement("geodesic")
        };
        assert!(run("vector_measure", facts).is_none());
    }
}

// ---------------------------------------------------------------------------------------------
// Severity, evidence order and key fields

#[test]
fn the_severity_is_the_highest_finding_and_advisories_never_raise_it() {
    let everything = MeasurementFacts {
        invalid_features: 2,
        overlapping_pairs: Some(1),
        overlap_area_m2: Some(10.0),
        distance_units: Some(("m".to_string(), "US survey foot".to_string())),
        geometry_kinds: kinds(&["line", "polygon"]),
        ..planar_measurement(state_plane_feet(), 0.05, 0.02, (-79.0, 35.5))
    };
    let got = run("vector_join", everything.clone());
    assert_eq!(severity(&got), Some(Severity::Critical));
    // Critical first, then required, then advisory, each in rule order.
    assert_eq!(
        evidence_ids(&got),
        [
            "invalid_geometries",
            "planar_distortion",
            "overlapping_features",
            "non_metre_unit",
            "distance_unit_conversion",
            "mixed_geometries",
        ]
    );
    assert_eq!(
        key(&got),
        json!({
            "tool": "vector_join",
            "method": "planar",
            "crs": "EPSG:2264",
            "findings": [
                "invalid_geometries",
                "overlapping_features",
                "planar_distortion",
            ],
        })
    );
    let r = reason(&got);
    assert!(
        r.starts_with("2 of 10 features checked are invalid; the call uses them unrepaired; "),
        "{r}"
    );
    assert!(r.ends_with("mixed geometries (line, polygon)"), "{r}");

    // Required and advisory: required.
    let required = MeasurementFacts {
        invalid_features: 0,
        ..everything.clone()
    };
    assert_eq!(
        severity(&run("vector_join", required)),
        Some(Severity::Required)
    );
    // Advisories alone stay advisory, however many.
    let advisory = MeasurementFacts {
        invalid_features: 0,
        overlapping_pairs: Some(0),
        area_scale_error: Some(0.001),
        length_scale_error: Some(0.001),
        ..everything
    };
    let got = run("vector_join", advisory);
    assert_eq!(severity(&got), Some(Severity::Advisory));
    assert_eq!(
        evidence_ids(&got),
        [
            "non_metre_unit",
            "distance_unit_conversion",
            "mixed_geometries"
        ]
    );
    assert_eq!(key(&got)["findings"], json!([]));
}

#[test]
fn the_key_names_the_decision_not_the_numbers() {
    let a = run("vector_measure", planar(0.05, 0.02));
    let b = run("vector_measure", planar(0.07, 0.03));
    assert_eq!(key(&a), key(&b));
    assert_eq!(
        key(&a),
        json!({"tool": "vector_measure", "method": "planar", "crs": "EPSG:3857",
               "findings": ["planar_distortion"]})
    );
    // Geodesic figures have no CRS.
    let geodesic = MeasurementFacts {
        invalid_features: 1,
        ..measurement("geodesic")
    };
    let got = run("vector_buffer", geodesic);
    assert_eq!(
        key(&got),
        json!({"tool": "vector_buffer", "method": "geodesic", "crs": null,
               "findings": ["invalid_geometries"]})
    );
    // A CRS without an id is keyed by its name.
    let unnamed = planar_measurement(
        CrsFacts {
            id: None,
            ..web_mercator()
        },
        0.05,
        0.02,
        (0.0, 0.0),
    );
    let got = run("vector_measure", unnamed);
    assert_eq!(key(&got)["crs"], json!("WGS 84 / Pseudo-Mercator"));
    // The same facts for another tool: another decision.
    let join = run("vector_join", planar(0.05, 0.05));
    assert_ne!(key(&join), key(&a));
}

// ---------------------------------------------------------------------------------------------
// Prompt and describe

#[test]
fn describes_itself_and_renders_its_questions() {
    let info = Measurement::describe();
    assert_eq!(info.id, "measurement");
    assert_eq!(info.version, "0.3.4");
    assert_eq!(info.prompt_name, "justify_measurement");
    let required: Vec<&str> = info
        .prompt_arguments
        .iter()
        .filter(|a| a.required)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(required, ["tool", "method", "findings", "expected"]);
    // The methodology documents every evidence id.
    for id in [
        ids::PLANAR_DISTORTION,
        ids::INVALID_GEOMETRIES,
        ids::GEOMETRIES_REPAIRED,
        ids::OVERLAPPING_FEATURES,
        ids::NON_METRE_UNIT,
        ids::DISTANCE_UNIT_CONVERSION,
        ids::MIXED_GEOMETRIES,
    ] {
        assert!(info.methodology.contains(&format!("`{id}`")), "{id}");
    }

    let got = run("vector_measure", planar(0.31, 0.15));
    let arguments: Vec<PromptValue> = got
        .as_ref()
        .map(|t| t.prompt_arguments.clone())
        .unwrap_or_default();
    let text = Measurement::render_prompt(&arguments);
    assert_eq!(text, Measurement::render_prompt(&arguments));
    assert!(
        text.starts_with("## Measurement decision: vector_measure with planar figures\n"),
        "{text}"
    );
    assert!(
        text.contains("`choice.method` must name `planar`"),
        "{text}"
    );
    assert!(
        text.contains("- CRS: EPSG:3857 (WGS 84 / Pseudo-Mercator)"),
        "{text}"
    );
    assert!(
        text.contains("- Findings to answer: planar_distortion"),
        "{text}"
    );
    assert!(text.contains("area scale error up to 31.0 %"), "{text}");
    assert!(!text.contains("{{"), "{text}");

    // Geodesic: the ellipsoid in place of a CRS; advisory only: no findings to answer.
    let got = run(
        "vector_measure",
        MeasurementFacts {
            geometry_kinds: kinds(&["polygon", "line"]),
            ..measurement("geodesic")
        },
    );
    let arguments = got.map(|t| t.prompt_arguments).unwrap_or_default();
    let text = Measurement::render_prompt(&arguments);
    assert!(
        text.contains("- CRS: none (geodesic, on the WGS 84 ellipsoid)"),
        "{text}"
    );
    assert!(text.contains("- Findings to answer: none (advisory only)"));

    // Only the required arguments (as `prompts/get` may send): no empty lines.
    let minimal = [
        ("tool", "vector_measure"),
        ("method", "geodesic"),
        ("findings", "none"),
        ("expected", "`geodesic`"),
    ]
    .map(|(name, value)| PromptValue {
        name: name.to_string(),
        value: value.to_string(),
    });
    let text = Measurement::render_prompt(&minimal);
    assert!(!text.contains("Flagged because"), "{text}");
    assert!(!text.contains("- CRS:"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// validate

/// The trigger's key fields and evidence, as the host passes them to `validate`.
fn decision(trigger: &Option<Trigger>) -> (Value, Vec<EvidenceItem>) {
    (
        key(trigger),
        trigger
            .as_ref()
            .map(|t| t.evidence.clone())
            .unwrap_or_default(),
    )
}

#[test]
fn the_chosen_method_must_be_the_calls() {
    let got = run(
        "vector_measure",
        MeasurementFacts {
            invalid_features: 1,
            ..measurement("geodesic")
        },
    );
    let (k, e) = decision(&got);
    for ok in [
        "geodesic",
        "Geodesic areas on the WGS 84 ellipsoid",
        "ellipsoidal (GeographicLib)",
    ] {
        let errors = Measurement::validate(&k, &e, &just(ok, "t", invalid_answer()));
        assert!(errors.is_empty(), "{ok}: {errors:?}");
    }
    for wrong in [
        "planar",
        "not geodesic",
        "planar instead of geodesic",
        "UTM",
    ] {
        let errors = Measurement::validate(&k, &e, &just(wrong, "t", invalid_answer()));
        assert_eq!(errors.len(), 1, "{wrong}");
        assert_eq!(errors[0].path, "/choice/method");
        assert!(errors[0].message.contains("measures geodesic"), "{wrong}");
    }
    let missing = Measurement::validate(&k, &e, &json!({"intent": "i"}));
    // The method first; then the unanswered finding and its offered repair, not rejected.
    assert_eq!(missing.len(), 3, "{missing:?}");
    assert_eq!(
        (missing[0].path.as_str(), missing[0].message.as_str()),
        ("/choice/method", "missing")
    );

    // Planar: the message names the CRS.
    let got = run("vector_measure", planar(0.005, 0.002));
    assert!(got.is_none());
    let got = run(
        "vector_measure",
        MeasurementFacts {
            invalid_features: 1,
            ..planar(0.005, 0.002)
        },
    );
    let (k, e) = decision(&got);
    assert!(
        Measurement::validate(&k, &e, &just("planar in EPSG:3857", "t", invalid_answer()))
            .is_empty()
    );
    assert!(Measurement::validate(&k, &e, &just("projected", "t", invalid_answer())).is_empty());
    let errors = Measurement::validate(&k, &e, &just("geodesic", "t", invalid_answer()));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.contains("measures planar in EPSG:3857"));
}

#[test]
fn a_planar_distortion_must_be_accepted_as_a_percentage_of_at_least_the_error() {
    let got = run("vector_measure", planar(0.313, 0.15));
    let (k, e) = decision(&got);
    let answer = |text: &str| json!({"planar_distortion": text});
    // Stated in the evidence answer, or in the tradeoffs.
    for (tradeoffs, answers) in [
        (
            "t",
            answer("we accept up to 35 % because only the ranking matters"),
        ),
        ("t", answer("31.3% is acceptable for a ranking")),
        (
            "we accept 31,3 percent",
            answer("only the ranking of parcels by size is reported"),
        ),
        (
            "we accept 40 per cent",
            answer("only the ranking of parcels by size is reported"),
        ),
        (
            "up to 50 pct",
            answer("only the ranking of parcels by size is reported"),
        ),
    ] {
        let errors = Measurement::validate(&k, &e, &just("planar", tradeoffs, answers.clone()));
        assert!(errors.is_empty(), "{tradeoffs} {answers}: {errors:?}");
    }
    // Nothing stated as a percentage.
    let errors = Measurement::validate(
        &k,
        &e,
        &just(
            "planar",
            "some distortion",
            answer("it is small for a ranking of parcels, 0.3"),
        ),
    );
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "/evidence/planar_distortion");
    assert!(
        errors[0].message.contains("at least 31.3 %"),
        "{}",
        errors[0].message
    );
    // Too little accepted.
    let errors = Measurement::validate(
        &k,
        &e,
        &just(
            "planar",
            "we accept 5 %",
            answer("only the ranking of parcels by size is reported"),
        ),
    );
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].message.contains("accepts at most 5 %"),
        "{}",
        errors[0].message
    );
    assert!(errors[0].message.contains("31.3 %"));
    // Both checks at once: a wrong method and no percentage.
    let errors = Measurement::validate(&k, &e, &just("geodesic", "t", json!({})));
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/choice/method",
            "/evidence/planar_distortion",
            "/evidence/planar_distortion"
        ]
    );
    assert!(errors[1].message.starts_with("missing"), "{errors:?}");
    // Critical (above 10 %): the offered geodesic figures must be rejected, with why.
    let mut no_rejection = just(
        "planar",
        "t",
        answer("we accept up to 35 % because only the ranking matters"),
    );
    no_rejection["alternatives"] =
        json!([{"method": "make_valid", "why_not": "repairs invent lobes"}]);
    let errors = Measurement::validate(&k, &e, &no_rejection);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "/alternatives");
    assert!(
        errors[0].message.contains(r#"{"method":"geodesic"}"#),
        "{errors:?}"
    );
    // Without planar_distortion in the evidence, no percentage is asked for.
    let got = run(
        "vector_measure",
        MeasurementFacts {
            invalid_features: 1,
            ..planar(0.005, 0.002)
        },
    );
    let (k, e) = decision(&got);
    assert!(Measurement::validate(&k, &e, &just("planar", "t", invalid_answer())).is_empty());
}

#[test]
fn percentages_are_read_as_people_write_them() {
    assert_eq!(
        percentages("we accept 35 % and 2.5% or 3 per cent"),
        [35.0, 2.5, 3.0]
    );
    assert_eq!(percentages("12,5 percent; EPSG:3857; 100 m"), [12.5]);
    assert!(percentages("no numbers").is_empty());
    assert_eq!(
        measured_percent(
            "planar figures in EPSG:3857 (WGS 84 / Pseudo-Mercator): scale error of up to 49.0 % \
             for areas (lengths up to 22.1 %)"
        ),
        Some(49.0)
    );
    assert_eq!(measured_percent("3 % of something else"), None);
}

#[test]
fn field_errors_stay_under_a_kibibyte() {
    let long_name = "Very Long Custom Projection ".repeat(40);
    let facts = planar_measurement(
        CrsFacts {
            id: None,
            name: long_name,
            ..web_mercator()
        },
        0.3,
        0.2,
        (12.5, 35.0),
    );
    let got = run("vector_measure", facts);
    let (k, e) = decision(&got);
    let long = "geodesic instead ".repeat(300);
    for tradeoffs in ["none stated", "we accept 1 %"] {
        let errors = Measurement::validate(&k, &e, &just(&long, tradeoffs, json!({})));
        assert!(errors.len() >= 2, "{errors:?}");
        for error in errors {
            assert!(
                error.path.len() + error.message.len() <= 1024,
                "{}",
                error.message.len()
            );
        }
    }
}

#[test]
fn long_lists_stay_within_the_hosts_limits() {
    let many: Vec<String> = (0..300).map(|i| format!("kind_{i:03}")).collect();
    let facts = MeasurementFacts {
        invalid_features: 4,
        overlapping_pairs: Some(9),
        overlap_area_m2: Some(1.0e9),
        distance_units: Some(("m".to_string(), "US survey foot".to_string())),
        geometry_kinds: many,
        ..planar_measurement(state_plane_feet(), 0.3, 0.2, (-79.0, 35.5))
    };
    let got = run("vector_join", facts);
    let t = got.as_ref().map(|t| (t.reason.len(), t.evidence.clone()));
    let (reason_bytes, evidence) = t.unwrap_or_default();
    assert!(reason_bytes <= 2048, "{reason_bytes}");
    let bytes: usize = evidence
        .iter()
        .map(|e| {
            e.id.len() + e.fact.len() + e.why.len() + e.alternative.as_ref().map_or(0, String::len)
        })
        .sum();
    assert!(bytes <= 8192, "{bytes}");
    assert!(evidence.len() <= 16);
    let fact = item(&got, "mixed_geometries").fact;
    assert!(fact.contains("kind_007 and 292 more"), "{fact}");
    assert!(reason(&got).contains("kind_007 and 292 more"));
}
