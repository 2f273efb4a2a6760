//! Unit-level classification tables for the built-in domains, run against the real embedded
//! WebAssembly components (no MCP, no GDAL I/O): which calls trigger what, at which severity,
//! with which key fields, and what each domain's `validate` accepts.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::{CallFacts, Registry, Severity};
use gdal_mcp::gdal::facts::{CategoricalEvidence, CrsFacts, CrsKind, DatasetFacts, RasterFacts};
use gdal_mcp::gdal::transform::TransformationFacts;
use serde_json::{json, Value};

fn registry() -> Registry {
    Registry::load(&[], None, Limits::default()).expect("built-in domains load")
}

fn crs(id: Option<&str>, name: &str, kind: CrsKind, datum: &str) -> CrsFacts {
    CrsFacts {
        id: id.map(String::from),
        name: name.to_string(),
        kind,
        linear_unit: (kind == CrsKind::Projected).then(|| "metre".to_string()),
        datum: Some(datum.to_string()),
        vertical: None,
    }
}

fn utm33() -> CrsFacts {
    crs(
        Some("EPSG:32633"),
        "WGS 84 / UTM zone 33N",
        CrsKind::Projected,
        "WGS_1984",
    )
}

fn wgs84() -> CrsFacts {
    crs(Some("EPSG:4326"), "WGS 84", CrsKind::Geographic, "WGS_1984")
}

fn nad27() -> CrsFacts {
    crs(
        Some("EPSG:4267"),
        "NAD27",
        CrsKind::Geographic,
        "North_American_Datum_1927",
    )
}

fn raster(categorical: bool) -> RasterFacts {
    RasterFacts {
        width: 100,
        height: 100,
        band_count: 1,
        data_types: vec![if categorical { "Byte" } else { "Float32" }.to_string()],
        nodata: vec![None],
        pixel_size: (30.0, -30.0),
        looks_categorical: categorical,
        evidence: CategoricalEvidence {
            palette: categorical,
            attribute_table: false,
            integer_classes: categorical,
        },
        flat_fraction: None,
    }
}

struct Case {
    name: &'static str,
    tool: &'static str,
    arguments: Value,
    source: Option<CrsFacts>,
    categorical: bool,
    target: Option<CrsFacts>,
    transformation: Option<TransformationFacts>,
}

impl Case {
    fn reproject(name: &'static str, arguments: Value) -> Self {
        Self {
            name,
            tool: "raster_reproject",
            arguments,
            source: Some(utm33()),
            categorical: false,
            target: Some(wgs84()),
            transformation: None,
        }
    }

    fn facts(&self) -> CallFacts {
        CallFacts {
            tool: self.tool.to_string(),
            arguments: self.arguments.clone(),
            datasets: vec![DatasetFacts {
                role: "input".to_string(),
                path: "/w/in.tif".to_string(),
                driver: "GTiff".to_string(),
                crs: self.source.clone(),
                raster: Some(raster(self.categorical)),
                vector: None,
            }],
            target_crs: self.target.clone(),
            transformation: self.transformation.clone(),
        }
    }
}

fn ballpark() -> TransformationFacts {
    TransformationFacts {
        name: "Ballpark geographic offset from NAD27 to WGS 84".to_string(),
        accuracy_metres: None,
        ballpark: true,
        missing_grids: vec!["us_noaa_conus.tif".to_string()],
    }
}

fn classify(domain: &str, case: &Case) -> Option<(Severity, Value, String)> {
    let registry = registry();
    let domain = registry.get(domain).expect("domain loaded");
    domain
        .classify(&case.facts())
        .expect("classify succeeds")
        .map(|t| (t.severity, t.key_fields, t.reason))
}

#[test]
fn crs_datum_classification_table() {
    let args = json!({"input": "in.tif", "output": "out.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"});
    let with_src = json!({"input": "in.tif", "output": "out.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "src_crs": "EPSG:32633"});
    let mut cases: Vec<(Case, Option<Severity>)> = vec![
        (
            Case::reproject("projected to geographic, same datum", args.clone()),
            Some(Severity::Required),
        ),
        (
            Case {
                target: Some(utm33()),
                ..Case::reproject("same CRS in and out", args.clone())
            },
            None,
        ),
        (
            Case {
                source: None,
                ..Case::reproject("no CRS, assigned by src_crs", with_src.clone())
            },
            Some(Severity::Critical),
        ),
        (
            Case::reproject("recorded CRS overridden by src_crs", with_src),
            Some(Severity::Critical),
        ),
        (
            Case {
                source: Some(crs(None, "unknown UTM", CrsKind::Projected, "unknown")),
                ..Case::reproject("source matches no authority code", args.clone())
            },
            Some(Severity::Critical),
        ),
        (
            Case {
                source: Some(nad27()),
                transformation: Some(ballpark()),
                ..Case::reproject(
                    "datum change with only a ballpark transformation",
                    args.clone(),
                )
            },
            Some(Severity::Critical),
        ),
        (
            Case {
                source: Some(nad27()),
                transformation: Some(TransformationFacts {
                    name: "NAD27 to WGS 84 (4)".to_string(),
                    accuracy_metres: Some(10.0),
                    ballpark: false,
                    missing_grids: vec![],
                }),
                ..Case::reproject("datum change with a Helmert transformation", args.clone())
            },
            Some(Severity::Required),
        ),
        (
            Case {
                tool: "raster_info",
                target: None,
                ..Case::reproject("a tool that changes no CRS", json!({"path": "in.tif"}))
            },
            None,
        ),
    ];
    for (case, expected) in cases.drain(..) {
        let got = classify("crs_datum", &case);
        assert_eq!(
            got.as_ref().map(|g| g.0),
            expected,
            "{}: {got:?}",
            case.name
        );
    }

    // Key fields name the decision, not incidental arguments such as paths.
    let (_, key, reason) = classify("crs_datum", &Case::reproject("k", args)).expect("triggers");
    assert_eq!(key["src_crs"], json!("EPSG:32633"));
    assert_eq!(key["dst_crs"], json!("EPSG:4326"));
    assert!(key.get("output").is_none() && key.get("input").is_none());
    assert!(reason.contains("geographic"), "{reason}");
}

#[test]
fn resampling_classification_table() {
    let with = |method: &str| json!({"input": "in.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": method});
    let table: Vec<(&str, bool, Option<Severity>)> = vec![
        ("bilinear", false, Some(Severity::Required)),
        ("cubic", false, Some(Severity::Required)),
        ("nearest", false, Some(Severity::Required)),
        ("average", false, Some(Severity::Required)),
        ("bilinear", true, Some(Severity::Critical)),
        ("cubic", true, Some(Severity::Critical)),
        ("average", true, Some(Severity::Critical)),
        ("med", true, Some(Severity::Critical)),
        ("nearest", true, Some(Severity::Advisory)),
        ("mode", true, Some(Severity::Advisory)),
    ];
    for (method, categorical, expected) in table {
        let case = Case {
            categorical,
            ..Case::reproject("r", with(method))
        };
        let got = classify("resampling", &case);
        assert_eq!(
            got.as_ref().map(|g| g.0),
            expected,
            "{method} categorical={categorical}"
        );
        let (_, key, _) = got.expect("triggers");
        assert_eq!(
            key,
            json!({"operation": "reproject", "method": method, "data": if categorical {"categorical"} else {"continuous"}})
        );
    }
    let info = Case {
        tool: "raster_info",
        ..Case::reproject("info", json!({"path": "in.tif"}))
    };
    assert!(classify("resampling", &info).is_none());
}

#[test]
fn domains_validate_that_the_choice_is_the_method_the_call_uses() {
    let registry = registry();
    let justification = |method: &str| {
        json!({"intent": "i", "alternatives": [{"method": "m", "why_not": "w"}],
               "choice": {"method": method, "rationale": "r", "tradeoffs": "t"}, "confidence": "low"})
    };
    let crs = registry.get("crs_datum").expect("crs_datum");
    let key = json!({"dst_crs": "EPSG:4326", "src_crs": "EPSG:32633"});
    for accepted in [
        "EPSG:4326",
        "epsg 4326",
        "WGS 84 geographic (EPSG:4326)",
        "4326",
    ] {
        assert!(
            crs.validate(&key, &justification(accepted))
                .expect("validate")
                .is_empty(),
            "{accepted}"
        );
    }
    let errors = crs
        .validate(&key, &justification("EPSG:3857"))
        .expect("validate");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "/choice/method");

    let resampling = registry.get("resampling").expect("resampling");
    let key = json!({"operation": "reproject", "method": "bilinear", "data": "continuous"});
    assert!(resampling
        .validate(&key, &justification("Bilinear interpolation"))
        .expect("validate")
        .is_empty());
    assert_eq!(
        resampling
            .validate(&key, &justification("cubic"))
            .expect("validate")
            .len(),
        1
    );
}

#[test]
fn prompts_render_deterministically_with_the_decision() {
    let registry = registry();
    let domain = registry.get("resampling").expect("resampling");
    let args = vec![
        ("tool".to_string(), "raster_reproject".to_string()),
        ("method".to_string(), "lanczos".to_string()),
        ("data".to_string(), "continuous".to_string()),
    ];
    let first = domain.render_prompt(&args).expect("render");
    assert_eq!(first, domain.render_prompt(&args).expect("render"));
    assert!(
        first.contains("`lanczos`") && !first.contains("{{"),
        "{first}"
    );
}

#[test]
fn hydrology_classification_table() {
    let dem = |kind: CrsKind, flat: Option<f64>| {
        let mut raster = raster(false);
        raster.flat_fraction = flat;
        DatasetFacts {
            role: "input".to_string(),
            path: "/w/dem.tif".to_string(),
            driver: "GTiff".to_string(),
            crs: Some(if kind == CrsKind::Geographic {
                wgs84()
            } else {
                utm33()
            }),
            raster: Some(raster),
            vector: None,
        }
    };
    let call = |tool: &str, arguments: Value, kind: CrsKind, flat: Option<f64>| CallFacts {
        tool: tool.to_string(),
        arguments,
        datasets: vec![dem(kind, flat)],
        target_crs: None,
        transformation: None,
    };
    let registry = registry();
    let domain = registry.get("hydrology").expect("hydrology loaded");
    let classify = |facts: &CallFacts| {
        domain
            .classify(facts)
            .expect("classify")
            .map(|t| (t.severity, t.key_fields))
    };
    let p = CrsKind::Projected;
    type Row = (&'static str, Value, CrsKind, Option<f64>, Option<Severity>);
    let table: Vec<Row> = vec![
        (
            "dem_condition",
            json!({"method": "fill"}),
            p,
            Some(0.9),
            Some(Severity::Required),
        ),
        (
            "dem_condition",
            json!({"method": "breach", "max_breach_length": 50}),
            p,
            None,
            Some(Severity::Required),
        ),
        (
            "dem_condition",
            json!({"method": "fill"}),
            CrsKind::Geographic,
            None,
            Some(Severity::Critical),
        ),
        (
            "dem_flow_direction",
            json!({"algorithm": "d8"}),
            p,
            Some(0.05),
            Some(Severity::Required),
        ),
        (
            "dem_flow_direction",
            json!({"algorithm": "d8"}),
            p,
            Some(0.40),
            Some(Severity::Critical),
        ),
        (
            "dem_flow_direction",
            json!({"algorithm": "dinf"}),
            p,
            Some(0.40),
            Some(Severity::Required),
        ),
        (
            "dem_flow_accumulation",
            json!({"algorithm": "d8", "units": "area"}),
            p,
            Some(0.30),
            Some(Severity::Critical),
        ),
        (
            "dem_streams",
            json!({"threshold": 100}),
            p,
            Some(0.30),
            Some(Severity::Critical),
        ),
        (
            "dem_watershed",
            json!({"pour_points": [[1, 2]]}),
            p,
            None,
            Some(Severity::Required),
        ),
        (
            "raster_reproject",
            json!({"resampling": "bilinear"}),
            p,
            None,
            None,
        ),
    ];
    for (tool, arguments, kind, flat, expected) in table {
        let got = classify(&call(tool, arguments.clone(), kind, flat));
        assert_eq!(
            got.as_ref().map(|g| g.0),
            expected,
            "{tool} {arguments} {kind:?} {flat:?}"
        );
    }
    // Key fields: the decision, not the paths; fill and epsilon fill are different decisions.
    let (_, fill) = classify(&call(
        "dem_condition",
        json!({"method": "fill", "input": "a.tif"}),
        p,
        None,
    ))
    .expect("fill");
    let (_, epsilon) = classify(&call(
        "dem_condition",
        json!({"method": "fill_epsilon", "input": "b.tif"}),
        p,
        None,
    ))
    .expect("eps");
    assert_eq!(fill["epsilon"], json!(false));
    assert_ne!(fill, epsilon);
    let (_, streams) = classify(&call(
        "dem_streams",
        json!({"threshold": 100, "output": "x.tif"}),
        p,
        None,
    ))
    .expect("streams");
    assert_eq!(
        streams,
        json!({"operation": "streams", "algorithm": "d8", "threshold": 100, "flats": "resolved"})
    );
    // The choice must name what the call does.
    let just = |m: &str| {
        json!({"intent": "i", "alternatives": [{"method": "m", "why_not": "w"}],
                                "choice": {"method": m, "rationale": "r", "tradeoffs": "t"}, "confidence": "low"})
    };
    assert!(domain
        .validate(&streams, &just("threshold of 100 cells"))
        .expect("v")
        .is_empty());
    assert_eq!(
        domain
            .validate(&streams, &just("threshold 500"))
            .expect("v")
            .len(),
        1
    );
    assert!(domain
        .validate(&epsilon, &just("epsilon Priority-Flood"))
        .expect("v")
        .is_empty());
}
