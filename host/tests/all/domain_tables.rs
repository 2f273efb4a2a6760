//! Unit-level classification tables for the built-in domains, run against the real embedded
//! WebAssembly components (no MCP, no GDAL I/O): which calls trigger what, at which severity,
//! with which key fields, and what each domain's `validate` accepts.

// Test code: a failed expectation should stop the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use gdal_mcp::domains::sandbox::Limits;
use gdal_mcp::domains::{CallFacts, Registry, Severity};
use gdal_mcp::gdal::facts::transform::{OperationFacts, TransformationFacts};
use gdal_mcp::gdal::facts::{
    CategoricalEvidence, CrsFacts, CrsKind, DatasetFacts, LayerFacts, RasterFacts, VectorFacts,
};
use gdal_mcp::gdal::raster::composite::GridRelation;
use gdal_mcp::gdal::vector::measure::MeasurementFacts;
use serde_json::{json, Value};

/// Issue 18: boilerplate refused and careful answers accepted per gated finding; clean twins.
#[path = "domain_tables/answers.rs"]
mod answers;

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
        linear_unit_metres: (kind == CrsKind::Projected).then_some(1.0),
        axis_order: None,
        vertical_unit: None,
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

/// WGS 84 longitude and latitude as a GeoPackage in OGC:CRS84 reports it: no EPSG id, the
/// datum ensemble's name.
fn crs84() -> CrsFacts {
    crs(
        None,
        "WGS 84 (CRS84)",
        CrsKind::Geographic,
        "World Geodetic System 1984 ensemble",
    )
}

/// `facts` with the geometry types met in its input's first layer.
fn with_types(mut facts: CallFacts, types: &[&str]) -> CallFacts {
    for dataset in &mut facts.datasets {
        if let Some(layer) = dataset.vector.as_mut().and_then(|v| v.layers.first_mut()) {
            layer.geometry_types = types.iter().map(|t| (*t).to_string()).collect();
        }
    }
    facts
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
        pixel_size: Some((30.0, -30.0)),
        looks_categorical: categorical,
        evidence: CategoricalEvidence {
            palette: categorical,
            attribute_table: false,
            integer_classes: categorical,
            ..Default::default()
        },
        flat_fraction: None,
        georeferencing: Default::default(),
        bands: Vec::new(),
        ..Default::default()
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
            upstream: Vec::new(),
            measurement: None,
            output: None,
            grids: None,
        }
    }
}

fn ballpark() -> TransformationFacts {
    transformation(
        "Ballpark geographic offset from NAD27 to WGS 84".to_string(),
        None,
        true,
        vec!["us_noaa_conus.tif".to_string()],
    )
}

/// The same operation used and picked by default (the host found nothing better).
fn transformation(
    name: String,
    accuracy_metres: Option<f64>,
    ballpark: bool,
    missing_grids: Vec<String>,
) -> TransformationFacts {
    let op = OperationFacts {
        name,
        accuracy_metres,
        ballpark,
        via: None,
        covers_data: Some(true),
        pipeline: None,
    };
    TransformationFacts {
        used: op.clone(),
        default: op,
        missing_grids,
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
            Case::reproject(
                "recorded CRS overridden by src_crs",
                json!({"input": "in.tif", "output": "out.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear", "src_crs": "EPSG:32634"}),
            ),
            Some(Severity::Critical),
        ),
        // Issue 18: a src_crs that repeats the recorded CRS overrides nothing (it was critical).
        (
            Case::reproject("src_crs repeating the recorded CRS", with_src),
            Some(Severity::Required),
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
                transformation: Some(transformation(
                    "NAD27 to WGS 84 (4)".to_string(),
                    Some(10.0),
                    false,
                    vec![],
                )),
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
            crs.validate(&key, &[], &justification(accepted))
                .expect("validate")
                .is_empty(),
            "{accepted}"
        );
    }
    let errors = crs
        .validate(&key, &[], &justification("EPSG:3857"))
        .expect("validate");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "/choice/method");

    let resampling = registry.get("resampling").expect("resampling");
    let key = json!({"operation": "reproject", "method": "bilinear", "data": "continuous"});
    assert!(resampling
        .validate(&key, &[], &justification("Bilinear interpolation"))
        .expect("validate")
        .is_empty());
    assert_eq!(
        resampling
            .validate(&key, &[], &justification("cubic"))
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
        upstream: Vec::new(),
        measurement: None,
        output: None,
        grids: None,
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
        // Flats resolved (the default): required; left unresolved: critical (R21-B15).
        (
            "dem_flow_direction",
            json!({"algorithm": "d8"}),
            p,
            Some(0.40),
            Some(Severity::Required),
        ),
        (
            "dem_flow_direction",
            json!({"algorithm": "d8", "resolve_flats": false}),
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
            Some(Severity::Required),
        ),
        (
            "dem_streams",
            json!({"threshold": 100}),
            p,
            Some(0.30),
            Some(Severity::Required),
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
        .validate(&streams, &[], &just("threshold of 100 cells"))
        .expect("v")
        .is_empty());
    assert_eq!(
        domain
            .validate(&streams, &[], &just("threshold 500"))
            .expect("v")
            .len(),
        1
    );
    assert!(domain
        .validate(&epsilon, &[], &just("epsilon Priority-Flood"))
        .expect("v")
        .is_empty());
}

// ---------------------------------------------------------------------------------------------
// The tools of issue 3: the two new domains, and the tools crs_datum and resampling now cover.

/// A raster with `bands` bands of `data_type`, every band with nodata `nodata`.
fn raster_of(data_type: &str, bands: u32, categorical: bool, nodata: Option<f64>) -> RasterFacts {
    RasterFacts {
        band_count: bands,
        data_types: vec![data_type.to_string(); bands as usize],
        nodata: vec![nodata; bands as usize],
        ..raster(categorical)
    }
}

fn raster_dataset(role: &str, crs: Option<CrsFacts>, raster: RasterFacts) -> DatasetFacts {
    DatasetFacts {
        role: role.to_string(),
        path: format!("/w/{role}.tif"),
        driver: "GTiff".to_string(),
        crs,
        raster: Some(raster),
        vector: None,
    }
}

fn vector_dataset(role: &str, crs: Option<CrsFacts>, layers: &[(&str, &str)]) -> DatasetFacts {
    DatasetFacts {
        role: role.to_string(),
        path: format!("/w/{role}.gpkg"),
        driver: "GPKG".to_string(),
        crs,
        raster: None,
        vector: Some(VectorFacts {
            layers: layers
                .iter()
                .map(|(name, geometry)| LayerFacts {
                    name: (*name).to_string(),
                    geometry_type: (*geometry).to_string(),
                    feature_count: Some(12),
                    has_z: false,
                    has_m: false,
                    geometry_types: vec![],
                    invalid_geometries: Some(0),
                    features_checked: 12,
                })
                .collect(),
            selected_layer: None,
        }),
    }
}

fn call(tool: &str, arguments: Value, datasets: Vec<DatasetFacts>) -> CallFacts {
    CallFacts {
        tool: tool.to_string(),
        arguments,
        datasets,
        target_crs: None,
        transformation: None,
        upstream: Vec::new(),
        measurement: None,
        output: None,
        grids: None,
    }
}

fn helmert() -> TransformationFacts {
    transformation("NAD27 to WGS 84 (4)".to_string(), Some(10.0), false, vec![])
}

/// Severity, key fields and reason of `domain`'s verdict on `facts`.
fn verdict(
    registry: &Registry,
    domain: &str,
    facts: &CallFacts,
) -> Option<(Severity, Value, String)> {
    registry
        .get(domain)
        .expect("domain loaded")
        .classify(facts)
        .expect("classify succeeds")
        .map(|t| (t.severity, t.key_fields, t.reason))
}

fn justification(method: &str) -> Value {
    json!({"intent": "i", "alternatives": [{"method": "m", "why_not": "w"}],
           "choice": {"method": method, "rationale": "r", "tradeoffs": "t"}, "confidence": "low"})
}

#[test]
fn the_six_builtin_domains_load_in_order() {
    let registry = registry();
    let ids: Vec<&str> = registry.all().iter().map(|d| d.info.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "crs_datum",
            "resampling",
            "hydrology",
            "format_selection",
            "aggregation",
            "measurement"
        ]
    );
}

fn measurement_facts(method: &str) -> MeasurementFacts {
    MeasurementFacts {
        method: method.to_string(),
        features_checked: 10,
        geometry_kinds: vec!["polygon".to_string()],
        ..MeasurementFacts::default()
    }
}

fn measuring(tool: &str, arguments: Value, facts: MeasurementFacts) -> CallFacts {
    let mut call = call(
        tool,
        arguments,
        vec![vector_dataset(
            "input",
            Some(wgs84()),
            &[("parcels", "Polygon")],
        )],
    );
    call.measurement = Some(facts);
    call
}

/// The `measurement` table (docs/domains.md), through the embedded component.
#[test]
fn measurement_classification_table() {
    let registry = registry();
    let severity = |facts: &CallFacts| verdict(&registry, "measurement", facts).map(|v| v.0);
    let measure =
        |facts: MeasurementFacts| measuring("vector_measure", json!({"input": "p.gpkg"}), facts);
    // Geodesic, valid, no overlaps: nothing to say.
    assert_eq!(severity(&measure(measurement_facts("geodesic"))), None);
    // Planar scale error: > 1 % required, > 10 % critical, below 1 % nothing.
    let planar = |area: f64| MeasurementFacts {
        crs: Some(utm33()),
        area_scale_error: Some(area),
        length_scale_error: Some(area / 2.0),
        worst_at: Some((15.0, 50.0)),
        ..measurement_facts("planar")
    };
    assert_eq!(severity(&measure(planar(0.004))), None);
    assert_eq!(severity(&measure(planar(0.05))), Some(Severity::Required));
    assert_eq!(severity(&measure(planar(0.3))), Some(Severity::Critical));
    // Invalid geometries: critical unless repaired (then advisory).
    let invalid = |make_valid: bool| MeasurementFacts {
        invalid_features: 2,
        make_valid,
        ..measurement_facts("geodesic")
    };
    assert_eq!(severity(&measure(invalid(false))), Some(Severity::Critical));
    assert_eq!(severity(&measure(invalid(true))), Some(Severity::Advisory));
    // Overlapping sources of a spatial join's sums: required unless dissolved, and the key
    // names the finding. In vector_measure the host settles overlaps (`overlaps`): nothing.
    let overlapping = |dissolve: bool| MeasurementFacts {
        overlapping_pairs: Some(3),
        overlap_area_m2: Some(120.0),
        dissolve,
        ..measurement_facts("geodesic")
    };
    let join = |facts| {
        measuring(
            "vector_join",
            json!({"fields": ["pop"], "stats": ["sum"]}),
            facts,
        )
    };
    let (level, key, _) =
        verdict(&registry, "measurement", &join(overlapping(false))).expect("a trigger");
    assert_eq!(level, Severity::Required);
    assert_eq!(key["findings"], json!(["overlapping_features"]));
    assert_eq!(severity(&join(overlapping(true))), None);
    assert_eq!(severity(&measure(overlapping(false))), None);
    // Issue 18: Z and unweighted means are settled by the host's arguments (`z`, `weighting`
    // / `weight`); no rule judges those facts any more, for any tool.
    let settled = MeasurementFacts {
        z_ignored: true,
        unweighted_means: vec!["rate:mean".to_string()],
        geometry_kinds: vec!["line".to_string()],
        ..measurement_facts("geodesic")
    };
    for tool in [
        "vector_measure",
        "vector_buffer",
        "vector_overlay",
        "vector_join",
    ] {
        assert_eq!(
            severity(&measuring(tool, json!({}), settled.clone())),
            None,
            "{tool}"
        );
    }
    // Other tools, or no measurement facts: nothing.
    let mut other = measure(planar(0.3));
    other.tool = "vector_convert".to_string();
    assert_eq!(severity(&other), None);
    other.tool = "vector_measure".to_string();
    other.measurement = None;
    assert_eq!(severity(&other), None);
}

#[test]
fn crs_datum_covers_zones_masks_vectors_and_terrain() {
    let registry = registry();
    let zonal = |zones: Option<CrsFacts>, t: Option<TransformationFacts>| {
        let mut facts = call(
            "zonal_stats",
            json!({"input": "r.tif", "zones": "z.gpkg", "stats": ["mean"], "semantics": "cell_centre"}),
            vec![
                raster_dataset("input", Some(utm33()), raster(false)),
                vector_dataset("zones", zones.clone(), &[("districts", "Multi Polygon")]),
            ],
        );
        if zones.as_ref().and_then(|z| z.id.as_deref()) != Some("EPSG:32633") && zones.is_some() {
            facts.target_crs = Some(utm33());
            facts.transformation = t;
        }
        facts
    };
    let table: Vec<(&str, CallFacts, Option<Severity>)> = vec![
        // Attack round 21, R21-B10: the tool fixes the target, so an accurate move inside its
        // area of use chooses nothing and is not asked.
        (
            "zones in NAD27 over a UTM raster, by a published Helmert",
            zonal(Some(nad27()), Some(helmert())),
            None,
        ),
        (
            "zones with only a ballpark transformation",
            zonal(Some(nad27()), Some(ballpark())),
            Some(Severity::Critical),
        ),
        (
            "zones in the raster's CRS",
            zonal(Some(utm33()), None),
            None,
        ),
        (
            "zones without a CRS",
            zonal(None, None),
            Some(Severity::Critical),
        ),
    ];
    for (name, facts, expected) in table {
        let got = verdict(&registry, "crs_datum", &facts);
        assert_eq!(got.as_ref().map(|g| g.0), expected, "{name}: {got:?}");
    }
    let (_, key, _) = verdict(
        &registry,
        "crs_datum",
        &zonal(Some(nad27()), Some(ballpark())),
    )
    .expect("gated");
    assert_eq!(key["operation"], json!("zones_to_raster"));
    assert_eq!(key["src_crs"], json!("EPSG:4267"));
    assert_eq!(key["dst_crs"], json!("EPSG:32633"));

    let mut reproject = call(
        "vector_reproject",
        json!({"input": "roads.gpkg", "output": "out.gpkg", "dst_crs": "EPSG:4326"}),
        vec![vector_dataset(
            "input",
            Some(nad27()),
            &[("roads", "Line String")],
        )],
    );
    reproject.target_crs = Some(wgs84());
    reproject.transformation = Some(helmert());
    let (severity, key, _) = verdict(&registry, "crs_datum", &reproject).expect("gated");
    assert_eq!(severity, Severity::Required);
    assert_eq!(key["src_crs"], json!("EPSG:4267"));

    let mut clip = call(
        "vector_clip",
        json!({"input": "roads.gpkg", "output": "out.gpkg", "mask": "area.gpkg"}),
        vec![
            vector_dataset("input", Some(utm33()), &[("roads", "Line String")]),
            vector_dataset("mask", Some(wgs84()), &[("area", "Polygon")]),
        ],
    );
    clip.target_crs = Some(utm33());
    // A mask on the input's datum: a conversion, not asked (R21-B10).
    assert!(verdict(&registry, "crs_datum", &clip).is_none());
    let by_bounds = call(
        "vector_clip",
        json!({"input": "roads.gpkg", "output": "out.gpkg", "bounds": {"xmin": 0, "ymin": 0, "xmax": 1, "ymax": 1}}),
        vec![vector_dataset(
            "input",
            Some(utm33()),
            &[("roads", "Line String")],
        )],
    );
    assert!(verdict(&registry, "crs_datum", &by_bounds).is_none());

    let terrain = |crs: CrsFacts, arguments: Value| {
        call(
            "raster_terrain",
            arguments,
            vec![raster_dataset("input", Some(crs), raster(false))],
        )
    };
    let slope = terrain(
        wgs84(),
        json!({"input": "dem.tif", "output": "s.tif", "operation": "slope"}),
    );
    let (severity, key, _) = verdict(&registry, "crs_datum", &slope).expect("gated");
    assert_eq!(severity, Severity::Critical);
    assert_eq!(
        key,
        json!({"operation": "terrain", "terrain": "slope", "crs": "EPSG:4326",
               "crs_kind": "geographic", "scale": null})
    );
    let scaled = terrain(wgs84(), json!({"operation": "slope", "scale": 111120}));
    assert_eq!(
        verdict(&registry, "crs_datum", &scaled).map(|g| g.0),
        Some(Severity::Required)
    );
    assert!(verdict(
        &registry,
        "crs_datum",
        &terrain(utm33(), json!({"operation": "hillshade"}))
    )
    .is_none());
    // Terrain asks its own questions, and the choice must name the scale.
    let domain = registry.get("crs_datum").expect("crs_datum");
    let key = json!({"operation": "terrain", "terrain": "slope", "crs": "EPSG:4326",
                     "crs_kind": "geographic", "scale": 111120.0});
    assert!(domain
        .validate(
            &key,
            &[],
            &justification("scale 111120 (metres per degree of latitude)")
        )
        .expect("validate")
        .is_empty());
    assert_eq!(
        domain
            .validate(&key, &[], &justification("EPSG:4326"))
            .expect("validate")
            .len(),
        1
    );
}

#[test]
fn resampling_covers_every_grid_change() {
    let registry = registry();
    let one = |tool: &str, arguments: Value, categorical: bool| {
        verdict(
            &registry,
            "resampling",
            &call(
                tool,
                arguments,
                vec![raster_dataset("input", Some(utm33()), raster(categorical))],
            ),
        )
    };
    type Row = (
        &'static str,
        Value,
        bool,
        Option<Severity>,
        Option<&'static str>,
    );
    let table: Vec<Row> = vec![
        (
            "raster_resample",
            json!({"resampling": "bilinear", "resolution": [60, 60]}),
            true,
            Some(Severity::Critical),
            Some("resample"),
        ),
        (
            "raster_resample",
            json!({"resampling": "nearest", "resolution": [60, 60]}),
            true,
            Some(Severity::Advisory),
            Some("resample"),
        ),
        (
            "raster_resample",
            json!({"resampling": "cubic", "size": [50, 50]}),
            false,
            Some(Severity::Required),
            Some("resample"),
        ),
        (
            "raster_overviews",
            json!({"resampling": "average"}),
            false,
            Some(Severity::Required),
            Some("overviews"),
        ),
        (
            "raster_overviews",
            json!({"resampling": "mode"}),
            true,
            Some(Severity::Advisory),
            Some("overviews"),
        ),
        (
            "raster_convert",
            json!({"format": "COG", "overviews": {"resampling": "bilinear"}}),
            true,
            Some(Severity::Critical),
            Some("overviews"),
        ),
        ("raster_convert", json!({"format": "COG"}), true, None, None),
        (
            "raster_aggregate",
            json!({"factor": 4, "statistic": "average"}),
            false,
            None,
            None,
        ),
    ];
    for (tool, arguments, categorical, expected, operation) in table {
        let got = one(tool, arguments.clone(), categorical);
        assert_eq!(
            got.as_ref().map(|g| g.0),
            expected,
            "{tool} {arguments} categorical={categorical}"
        );
        assert_eq!(
            got.as_ref()
                .and_then(|g| g.1["operation"].as_str().map(String::from))
                .as_deref(),
            operation,
            "{tool} {arguments}"
        );
    }
    let composite = |grids: GridRelation, categorical: bool| {
        let mut facts = call(
            "raster_composite",
            json!({"inputs": ["a.tif", "b.tif"], "statistic": "max", "resampling": "bilinear"}),
            vec![
                raster_dataset("input", Some(utm33()), raster(false)),
                raster_dataset("input2", Some(utm33()), raster(categorical)),
            ],
        );
        facts.grids = Some(grids);
        verdict(&registry, "resampling", &facts)
    };
    assert!(composite(GridRelation::Aligned, false).is_none());
    let (severity, key, _) = composite(GridRelation::Differ, false).expect("gated");
    assert_eq!(severity, Severity::Required);
    assert_eq!(
        key,
        json!({"operation": "composite", "method": "bilinear", "data": "continuous"})
    );
    assert_eq!(
        composite(GridRelation::Differ, true).map(|g| g.0),
        Some(Severity::Critical)
    );
}

#[test]
fn format_selection_classification_table() {
    let registry = registry();
    let convert = |arguments: Value, input: RasterFacts| {
        call(
            "raster_convert",
            arguments,
            vec![raster_dataset("input", Some(utm33()), input)],
        )
    };
    let float = || raster_of("Float32", 1, false, None);
    let rgb = || raster_of("Byte", 3, false, None);
    let table: Vec<(&str, CallFacts, Option<Severity>)> = vec![
        (
            "float32 to JPEG",
            convert(json!({"format": "JPEG"}), float()),
            Some(Severity::Critical),
        ),
        (
            "float32 to PNG",
            convert(json!({"format": "PNG"}), float()),
            Some(Severity::Critical),
        ),
        (
            "RGB to JPEG",
            convert(json!({"format": "JPEG", "quality": 85}), rgb()),
            Some(Severity::Required),
        ),
        (
            "RGB to PNG",
            convert(json!({"format": "PNG"}), rgb()),
            Some(Severity::Advisory),
        ),
        (
            "RGB to WEBP, two bands",
            convert(json!({"format": "WEBP", "bands": [1, 2]}), rgb()),
            Some(Severity::Critical),
        ),
        (
            "DEFLATE GeoTIFF",
            convert(json!({"compression": "DEFLATE", "predictor": 3}), float()),
            Some(Severity::Advisory),
        ),
        (
            "COG without overviews",
            convert(json!({"format": "COG"}), float()),
            Some(Severity::Advisory),
        ),
        (
            "LERC with an error bound",
            convert(json!({"compression": "LERC", "max_z_error": 0.01}), float()),
            Some(Severity::Required),
        ),
        (
            "Float32 to Byte without scale",
            convert(json!({"output_type": "Byte"}), float()),
            Some(Severity::Critical),
        ),
        (
            "Float32 to Byte with scale",
            convert(
                json!({"output_type": "Byte", "scale": [0, 100, 0, 255]}),
                float(),
            ),
            Some(Severity::Required),
        ),
        (
            "classes to JPEG",
            convert(json!({"format": "JPEG"}), raster(true)),
            Some(Severity::Critical),
        ),
        (
            "nodata to JPEG",
            convert(
                json!({"format": "JPEG"}),
                raster_of("Byte", 1, false, Some(0.0)),
            ),
            Some(Severity::Critical),
        ),
        (
            "JPEG in GeoTIFF next to nodata",
            convert(
                json!({"compression": "JPEG"}),
                raster_of("Byte", 3, false, Some(0.0)),
            ),
            Some(Severity::Critical),
        ),
        (
            "different nodata per band in GeoTIFF",
            convert(
                json!({}),
                RasterFacts {
                    nodata: vec![Some(0.0), Some(-1.0)],
                    ..raster_of("Int16", 2, false, None)
                },
            ),
            Some(Severity::Critical),
        ),
        (
            "reprojection to a lossless GeoTIFF",
            call(
                "raster_reproject",
                json!({"dst_crs": "EPSG:4326", "resampling": "bilinear"}),
                vec![raster_dataset("input", Some(utm33()), float())],
            ),
            None,
        ),
        (
            "reprojection into JPEG-in-TIFF",
            call(
                "raster_reproject",
                json!({"dst_crs": "EPSG:4326", "resampling": "bilinear", "creation_options": {"COMPRESS": "JPEG"}}),
                vec![raster_dataset("input", Some(utm33()), float())],
            ),
            Some(Severity::Critical),
        ),
        (
            "slope to PNG",
            call(
                "raster_terrain",
                json!({"operation": "slope", "format": "PNG"}),
                vec![raster_dataset("input", Some(utm33()), float())],
            ),
            Some(Severity::Critical),
        ),
    ];
    for (name, facts, expected) in table {
        let got = verdict(&registry, "format_selection", &facts);
        assert_eq!(got.as_ref().map(|g| g.0), expected, "{name}: {got:?}");
    }
    let (_, key, _) = verdict(
        &registry,
        "format_selection",
        &convert(
            json!({"input": "a.tif", "output": "b.jpg", "format": "JPEG"}),
            float(),
        ),
    )
    .expect("gated");
    assert_eq!(
        key,
        json!({"operation": "raster_encode", "format": "JPEG", "compression": "JPEG",
               "lossy_by": "JPEG", "quality": 75, "max_z_error": null, "data_types": "Float32",
               "output_type": null, "scaled": false, "bands": 1, "data": "continuous",
               "nodata": "none"})
    );

    let vector = |output: &str, layers: &[(&str, &str)], crs: CrsFacts, extra: Value| {
        let mut arguments = json!({"input": "in.gpkg", "output": output});
        if let (Some(a), Some(e)) = (arguments.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        with_vector_output(call(
            "vector_convert",
            arguments,
            vec![vector_dataset("input", Some(crs), layers)],
        ))
    };
    let two = [("roads", "Line String"), ("parcels", "Multi Polygon")];
    let vectors: Vec<(&str, CallFacts, Option<Severity>)> = vec![
        (
            "two layers to GeoPackage",
            vector("o.gpkg", &two, utm33(), json!({})),
            Some(Severity::Advisory),
        ),
        (
            "two layers to GeoJSON",
            vector("o.geojson", &two, wgs84(), json!({})),
            Some(Severity::Critical),
        ),
        (
            "one layer of two to GeoJSON",
            vector("o.geojson", &two, wgs84(), json!({"layer": "roads"})),
            Some(Severity::Advisory),
        ),
        (
            "mixed geometries to Shapefile",
            vector("o.shp", &[("all", "Unknown (any)")], utm33(), json!({})),
            Some(Severity::Critical),
        ),
        (
            "CSV without geometry option",
            vector("o.csv", &two[1..], utm33(), json!({})),
            Some(Severity::Required),
        ),
        (
            "CSV with WKT",
            vector(
                "o.csv",
                &two[1..],
                utm33(),
                json!({"layer_options": {"GEOMETRY": "AS_WKT"}}),
            ),
            Some(Severity::Advisory),
        ),
        (
            "KML from UTM",
            vector("o.kml", &two, utm33(), json!({})),
            Some(Severity::Advisory),
        ),
    ];
    for (name, facts, expected) in vectors {
        let got = verdict(&registry, "format_selection", &facts);
        assert_eq!(got.as_ref().map(|g| g.0), expected, "{name}: {got:?}");
    }

    let domain = registry.get("format_selection").expect("format_selection");
    let key = json!({"format": "GTiff", "lossy_by": "JPEG", "output_type": null});
    assert!(domain
        .validate(
            &key,
            &[],
            &justification("JPEG-compressed GeoTIFF at quality 75")
        )
        .expect("validate")
        .is_empty());
    assert_eq!(
        domain
            .validate(&key, &[], &justification("GeoTIFF with DEFLATE"))
            .expect("validate")
            .len(),
        1
    );
}

#[test]
fn aggregation_classification_table() {
    let registry = registry();
    let zonal = |stats: Value, semantics: &str, categorical: bool, zones: &str| {
        call(
            "zonal_stats",
            json!({"input": "r.tif", "zones": "z.gpkg", "stats": stats, "semantics": semantics}),
            vec![
                raster_dataset(
                    "input",
                    Some(utm33()),
                    raster_of(
                        if categorical { "Byte" } else { "Float32" },
                        1,
                        categorical,
                        Some(-9999.0),
                    ),
                ),
                vector_dataset("zones", Some(utm33()), &[("districts", zones)]),
            ],
        )
    };
    let composite = |statistic: &str, categorical: bool| {
        let mut facts = call(
            "raster_composite",
            json!({"inputs": ["a.tif", "b.tif"], "statistic": statistic}),
            vec![
                raster_dataset(
                    "input",
                    Some(utm33()),
                    raster_of("Byte", 1, categorical, Some(0.0)),
                ),
                raster_dataset(
                    "input2",
                    Some(utm33()),
                    raster_of("Byte", 1, categorical, Some(0.0)),
                ),
            ],
        );
        facts.grids = Some(GridRelation::Aligned);
        facts
    };
    let aggregate = |statistic: &str, data_type: &str, categorical: bool| {
        call(
            "raster_aggregate",
            json!({"input": "a.tif", "output": "b.tif", "factor": 4, "statistic": statistic}),
            vec![raster_dataset(
                "input",
                Some(utm33()),
                raster_of(data_type, 1, categorical, None),
            )],
        )
    };
    let table: Vec<(&str, CallFacts, Option<Severity>)> = vec![
        (
            "zonal mean of a surface",
            zonal(
                json!(["mean", "count"]),
                "cell_centre",
                false,
                "Multi Polygon",
            ),
            Some(Severity::Required),
        ),
        (
            "zonal majority of classes",
            zonal(json!(["majority"]), "coverage", true, "Polygon"),
            Some(Severity::Required),
        ),
        (
            "zonal mean of classes",
            zonal(json!(["mean"]), "cell_centre", true, "Polygon"),
            Some(Severity::Critical),
        ),
        (
            "zonal sum with all_touched",
            zonal(json!(["sum"]), "all_touched", false, "Polygon"),
            Some(Severity::Critical),
        ),
        (
            "zonal sum with coverage",
            zonal(json!(["sum"]), "coverage", false, "Polygon"),
            Some(Severity::Required),
        ),
        (
            "coverage of line zones",
            zonal(json!(["mean"]), "coverage", false, "Line String"),
            Some(Severity::Critical),
        ),
        (
            "composite max",
            composite("max", false),
            Some(Severity::Required),
        ),
        (
            "composite mean of classes",
            composite("mean", true),
            Some(Severity::Critical),
        ),
        (
            "aggregate average of a surface",
            aggregate("average", "Float32", false),
            Some(Severity::Required),
        ),
        (
            "aggregate mode of classes",
            aggregate("mode", "Byte", true),
            Some(Severity::Required),
        ),
        (
            "aggregate average of classes",
            aggregate("average", "Byte", true),
            Some(Severity::Critical),
        ),
        (
            // R10-6: the host writes a type that holds the sums (or refuses the caller's).
            "aggregate sum of Byte: settled by the host",
            aggregate("sum", "Byte", false),
            Some(Severity::Required),
        ),
        (
            "not an aggregation",
            call(
                "raster_resample",
                json!({"resampling": "average"}),
                vec![raster_dataset("input", Some(utm33()), raster(false))],
            ),
            None,
        ),
    ];
    for (name, facts, expected) in table {
        let got = verdict(&registry, "aggregation", &facts);
        assert_eq!(got.as_ref().map(|g| g.0), expected, "{name}: {got:?}");
    }
    let (_, key, _) = verdict(
        &registry,
        "aggregation",
        &zonal(json!(["mean", "count"]), "coverage", false, "Multi Polygon"),
    )
    .expect("gated");
    assert_eq!(
        key,
        json!({"operation": "zonal", "statistics": ["count", "mean"], "semantics": "coverage",
               "nodata_policy": "ignore", "data": "continuous", "zones": "polygons"})
    );

    let domain = registry.get("aggregation").expect("aggregation");
    assert!(domain
        .validate(
            &key,
            &[],
            &justification("coverage-weighted mean and count")
        )
        .expect("validate")
        .is_empty());
    assert_eq!(
        domain
            .validate(&key, &[], &justification("cell-centre mean and count"))
            .expect("validate")
            .len(),
        1
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 21 / issue 18 rule 3: format_selection, finding by finding: the finding fires, its clean
// twin stays silent, and the hurried agent's boilerplate (one answer under every id) is refused.

/// The facts the gated step would send: the host's output fact (driver, options, encoding).
fn with_encoding_fact(mut facts: CallFacts) -> CallFacts {
    facts.output = gdal_mcp::server::registry::find(&facts.tool)
        .and_then(|spec| spec.raster_output)
        .and_then(|write| {
            gdal_mcp::gdal::facts::encoding::output_of_call(
                &write,
                &facts.arguments,
                &facts.datasets,
            )
        });
    facts
}

/// The facts the gated step would send for a vector writer: the driver the host resolves
/// (`gdal::vector::driver_for`) and the layer options, as its gather sets them.
fn with_vector_output(mut facts: CallFacts) -> CallFacts {
    let format = facts.arguments["format"].as_str().map(str::to_string);
    let output = facts.arguments["output"].as_str().unwrap_or("").to_string();
    let driver =
        gdal_mcp::gdal::vector::driver_for(format.as_deref(), std::path::Path::new(&output))
            .expect("the host resolves the output driver");
    let options: Vec<(String, String)> = facts.arguments["layer_options"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    facts.output = Some(gdal_mcp::gdal::facts::encoding::OutputFacts::vector(
        &driver, &options,
    ));
    facts
}

/// An input whose lineage says a step upstream wrote `encoding`.
fn lossy_upstream(facts: CallFacts, encoding: &str) -> CallFacts {
    use gdal_mcp::domains::{DatasetLineage, UpstreamStep};
    let upstream = vec![DatasetLineage {
        sha256: Some("ab".repeat(32)),
        modified_since: false,
        steps: vec![UpstreamStep {
            depth: 1,
            tool: "raster_convert".to_string(),
            lossy_encoding: Some(encoding.to_string()),
            ..UpstreamStep::default()
        }],
    }];
    CallFacts { upstream, ..facts }
}

const BOILERPLATE: &str =
    "Acknowledged: this finding has been reviewed and is acceptable for the purposes of this analysis.";

#[test]
fn format_selection_findings_have_clean_twins_and_refuse_boilerplate() {
    let registry = registry();
    let domain = registry.get("format_selection").expect("format_selection");
    let convert = |arguments: Value, input: RasterFacts| {
        with_encoding_fact(call(
            "raster_convert",
            arguments,
            vec![raster_dataset("input", Some(utm33()), input)],
        ))
    };
    let calc = |arguments: Value| {
        with_encoding_fact(call(
            "raster_calc",
            arguments,
            vec![raster_dataset(
                "inputs.a",
                Some(utm33()),
                raster_of("Float32", 1, false, None),
            )],
        ))
    };
    let vector = |output: &str, layers: &[(&str, &str)], crs: Option<CrsFacts>, extra: Value| {
        let mut arguments = json!({"input": "in.gpkg", "output": output});
        if let (Some(a), Some(e)) = (arguments.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        with_vector_output(call(
            "vector_convert",
            arguments,
            vec![vector_dataset("input", crs, layers)],
        ))
    };
    let rgb = || raster_of("Byte", 3, false, None);
    let float = || raster_of("Float32", 1, false, None);
    let packed = || {
        let mut r = raster_of("Int16", 1, false, Some(-32768.0));
        r.bands = vec![gdal_mcp::gdal::facts::BandFacts {
            scale: Some(0.1),
            offset: Some(-5.0),
            nodata: Some(-32768.0),
            ..Default::default()
        }];
        r
    };
    let two = [("roads", "Line String"), ("parcels", "Multi Polygon")];
    // (finding, facts on which it fires, the clean twin on which it is silent)
    let rows: Vec<(&str, CallFacts, CallFacts)> = vec![
        // R13-B5 (attack round 13): GDAL 3.6 writes one Byte band to GeoPackage as PNG tiles,
        // opaque or not, and keeps its nodata (0 of 262,144 cells changed); three bands are
        // JPEG wherever a tile is opaque, and lose the nodata.
        (
            "lossy_encoding",
            convert(json!({"format": "GPKG"}), rgb()),
            convert(
                json!({"format": "GPKG"}),
                raster_of("Byte", 1, false, Some(0.0)),
            ),
        ),
        // R13-B2 (attack round 13): GPKG, RST, SAGA and XYZ drop a band's scale and offset;
        // GTiff keeps them.
        (
            "scale_offset_lost",
            convert(json!({"format": "GPKG"}), packed()),
            convert(json!({"format": "GTiff"}), packed()),
        ),
        (
            "scale_offset_lost",
            convert(json!({"format": "RST"}), packed()),
            convert(json!({"format": "RST"}), raster_of("Int16", 1, false, None)),
        ),
        // R14-B7 (attack round 14): gdalwarp sets the scale and offset on the RST or SAGA
        // file it creates, and they read back; only gdal_translate's copy drops them.
        (
            "scale_offset_lost",
            convert(json!({"format": "SAGA"}), packed()),
            with_encoding_fact(call(
                "raster_resample",
                json!({"format": "SAGA", "resolution": [60, 60], "resampling": "nearest"}),
                vec![raster_dataset("input", Some(utm33()), packed())],
            )),
        ),
        // Round 14 (measured with GDAL 3.6.2): GeoPackage Byte tiles of 2 to 4 bands keep one
        // nodata value, read back on every band; JPEG tiles blur the cells next to it, PNG
        // tiles keep them. `nodata_lost` stays for formats without nodata (JPEG, below).
        (
            "lossy_near_nodata",
            convert(
                json!({"format": "GPKG"}),
                raster_of("Byte", 3, false, Some(0.0)),
            ),
            convert(
                json!({"format": "GPKG", "creation_options": {"TILE_FORMAT": "PNG"}}),
                raster_of("Byte", 3, false, Some(0.0)),
            ),
        ),
        (
            "nodata_lost",
            convert(
                json!({"format": "JPEG"}),
                raster_of("Byte", 3, false, Some(0.0)),
            ),
            convert(
                json!({"format": "GPKG", "creation_options": {"TILE_FORMAT": "PNG"}}),
                raster_of("Byte", 3, false, Some(0.0)),
            ),
        ),
        (
            "lossy_encoding",
            convert(json!({"format": "JP2OpenJPEG"}), rgb()),
            convert(
                json!({"format": "JP2OpenJPEG",
                       "creation_options": {"REVERSIBLE": "YES", "QUALITY": "100"}}),
                rgb(),
            ),
        ),
        (
            "lossy_encoding",
            convert(json!({"compression": "WEBP", "quality": 100}), rgb()),
            convert(
                json!({"compression": "WEBP", "creation_options": {"WEBP_LOSSLESS": "YES"}}),
                rgb(),
            ),
        ),
        (
            "lossy_encoding",
            calc(json!({"data_type": "Float32",
                        "creation_options": {"COMPRESS": "LERC", "MAX_Z_ERROR": "0.5"}})),
            calc(json!({"data_type": "Float32", "creation_options": {"COMPRESS": "LERC"}})),
        ),
        // R7-3 (attack round 7): PIXELTYPE=SIGNEDBYTE reads 130 back as -126; values of at
        // most 127 (the input's largest, read exactly) read back the same.
        (
            "lossy_encoding",
            convert(
                json!({"creation_options": {"PIXELTYPE": "SIGNEDBYTE"}}),
                RasterFacts {
                    byte_max: Some(255.0),
                    ..raster_of("Byte", 1, false, None)
                },
            ),
            convert(
                json!({"creation_options": {"PIXELTYPE": "SIGNEDBYTE"}}),
                RasterFacts {
                    byte_max: Some(127.0),
                    ..raster_of("Byte", 1, false, None)
                },
            ),
        ),
        (
            "second_lossy_encoding",
            lossy_upstream(
                convert(json!({"compression": "JPEG"}), rgb()),
                "JPEG2000 quality 25",
            ),
            lossy_upstream(
                convert(json!({"compression": "DEFLATE"}), rgb()),
                "JPEG2000 quality 25",
            ),
        ),
        (
            "scaled_output_type",
            convert(
                json!({"output_type": "Byte", "scale": [0, 100, 0, 255]}),
                float(),
            ),
            convert(json!({"output_type": "Float64"}), float()),
        ),
        (
            "narrowing_output_type",
            convert(json!({"output_type": "Byte"}), float()),
            convert(json!({"output_type": "Float32"}), float()),
        ),
        (
            "unsupported_data_type",
            convert(json!({"format": "PNG"}), float()),
            convert(
                json!({"format": "PNG"}),
                raster_of("UInt16", 1, false, None),
            ),
        ),
        (
            "codec_data_type",
            convert(json!({"compression": "JPEG"}), float()),
            convert(json!({"compression": "DEFLATE"}), float()),
        ),
        (
            "unsupported_band_count",
            convert(json!({"format": "WEBP", "bands": [1, 2]}), rgb()),
            convert(
                json!({"format": "WEBP", "creation_options": {"LOSSLESS": "TRUE"}}),
                rgb(),
            ),
        ),
        (
            "nodata_lost",
            convert(
                json!({"format": "JPEG"}),
                raster_of("Byte", 1, false, Some(0.0)),
            ),
            convert(
                json!({"format": "PNG"}),
                raster_of("Byte", 1, false, Some(0.0)),
            ),
        ),
        (
            "lossy_near_nodata",
            convert(
                json!({"compression": "JPEG"}),
                raster_of("Byte", 3, false, Some(0.0)),
            ),
            convert(json!({"compression": "JPEG"}), rgb()),
        ),
        (
            "lossy_categorical",
            convert(json!({"compression": "JPEG"}), raster(true)),
            convert(json!({"compression": "DEFLATE"}), raster(true)),
        ),
        (
            // A single palette band: JPEG 2000 defaults to reversible at quality 100.
            "lossy_encoding",
            convert(
                json!({"format": "JP2OpenJPEG"}),
                raster_of("Byte", 1, false, None),
            ),
            convert(json!({"format": "JP2OpenJPEG"}), raster(true)),
        ),
        (
            "too_many_layers",
            vector("o.geojson", &two, Some(wgs84()), json!({})),
            vector("o.gpkg", &two, Some(wgs84()), json!({})),
        ),
        // R13-B8 (attack round 13): the fields a Shapefile cannot hold, measured by the host
        // (`gdal::facts::schema`), are asked; the same layer whose fields fit is not.
        (
            "schema_lost",
            {
                let mut facts = vector("o.shp", &two[1..], Some(utm33()), json!({}));
                facts.output = facts.output.map(|o| {
                    o.with_schema(vec![gdal_mcp::gdal::facts::encoding::Loss {
                        codec: "field_name".to_string(),
                        text: "`population_2021` as `populati_1`".to_string(),
                    }])
                });
                facts
            },
            vector("o.shp", &two[1..], Some(utm33()), json!({})),
        ),
        (
            "csv_geometry_dropped",
            vector("o.csv", &two[1..], Some(utm33()), json!({})),
            vector(
                "o.csv",
                &two[1..],
                Some(utm33()),
                json!({"layer_options": {"GEOMETRY": "AS_WKT"}}),
            ),
        ),
        // R23-B14 (attack round 23): from WGS 84 / UTM the driver converts on one datum and is
        // not asked; from NAD27 it reprojects across datums.
        (
            "driver_reprojects",
            vector("o.kml", &two[..1], Some(nad27()), json!({})),
            vector("o.kml", &two[..1], Some(utm33()), json!({})),
        ),
        (
            "non_standard_crs",
            vector("o.geojson", &two[..1], Some(utm33()), json!({})),
            vector("o.geojson", &two[..1], Some(wgs84()), json!({})),
        ),
        // R15-B11 (attack round 15): a GeoPackage layer in OGC:CRS84 (WGS 84 longitude and
        // latitude under another id, or none) is written to GeoJSON and KML as EPSG:4326 is;
        // NAD27 is still asked.
        (
            "non_standard_crs",
            vector("o.geojson", &two[..1], Some(nad27()), json!({})),
            vector("o.geojson", &two[..1], Some(crs84()), json!({})),
        ),
        (
            "driver_reprojects",
            vector("o.kml", &two[..1], Some(nad27()), json!({})),
            vector("o.kml", &two[..1], Some(crs84()), json!({})),
        ),
        // R15-B10 (attack round 15): a layer of any declared type whose features, all checked,
        // are polygons and multipolygons is written whole to a Shapefile; points and polygons
        // are not.
        (
            "mixed_geometries",
            with_types(
                vector(
                    "o.shp",
                    &[("all", "Unknown (any)")],
                    Some(utm33()),
                    json!({}),
                ),
                &["Point", "Polygon"],
            ),
            with_types(
                vector(
                    "o.shp",
                    &[("all", "Unknown (any)")],
                    Some(utm33()),
                    json!({}),
                ),
                &["Polygon", "Multi Polygon"],
            ),
        ),
        (
            "mixed_geometries",
            with_types(
                vector("o.shp", &[("all", "Geometry")], Some(utm33()), json!({})),
                &["Point", "Multi Point"],
            ),
            with_types(
                vector("o.shp", &[("all", "Geometry")], Some(utm33()), json!({})),
                &["Line String", "Multi Line String"],
            ),
        ),
    ];
    for (finding, fires, twin) in rows {
        let trigger = domain
            .classify(&fires)
            .expect("classify")
            .unwrap_or_else(|| panic!("{finding}: not gated"));
        assert!(
            trigger.evidence.iter().any(|e| e.id == finding),
            "{finding}: fired {:?}",
            trigger.evidence.iter().map(|e| &e.id).collect::<Vec<_>>()
        );
        if let Some(twin) = domain.classify(&twin).expect("classify") {
            assert!(
                twin.evidence.iter().all(|e| e.id != finding),
                "{finding}: the twin fires it too: {}",
                twin.reason
            );
        }
        // The hurried agent: the method named as the key says, one line under every id.
        let method = trigger
            .key_fields
            .as_object()
            .map(|k| {
                k.values()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let answers: serde_json::Map<String, Value> = trigger
            .evidence
            .iter()
            .map(|e| (e.id.clone(), json!(BOILERPLATE)))
            .collect();
        let hurried = json!({
            "intent": BOILERPLATE,
            "alternatives": [{"method": "another format", "why_not": BOILERPLATE}],
            "choice": {"method": method, "rationale": BOILERPLATE, "tradeoffs": BOILERPLATE},
            "confidence": "high",
            "assumptions": [BOILERPLATE],
            "evidence": answers,
        });
        let errors = domain
            .validate(&trigger.key_fields, &trigger.evidence, &hurried)
            .expect("validate");
        let path = format!("/evidence/{finding}");
        assert!(
            errors.iter().any(|e| e.path == path),
            "{finding}: the boilerplate passed: {errors:?}"
        );
    }
}

/// Regression (issue 21): an edit outside the server laundered an interpolation upstream. The
/// host now gives a file modified since the steps of what the server last wrote at its path
/// (`modified_since` set); the aggregation domain treats them as the file's own: as strict as
/// without the edit, the fact saying the file was modified since. Its clean twin: the same
/// edited file whose last written content was resampled with nearest is not about upstream.
#[test]
fn aggregation_treats_a_file_modified_since_its_interpolation_as_interpolated() {
    use gdal_mcp::domains::{DatasetLineage, UpstreamStep};
    let registry = registry();
    let majority = |resampling: &str, modified_since: bool| {
        let mut facts = call(
            "zonal_stats",
            json!({"input": "r.tif", "zones": "z.gpkg", "stats": ["majority"],
                   "semantics": "cell_centre"}),
            vec![
                raster_dataset("input", Some(utm33()), raster_of("Byte", 1, true, None)),
                vector_dataset("zones", Some(utm33()), &[("districts", "Polygon")]),
            ],
        );
        facts.upstream = vec![DatasetLineage {
            sha256: Some("ab".repeat(32)),
            modified_since,
            steps: vec![UpstreamStep {
                depth: 1,
                tool: "raster_resample".to_string(),
                arguments: json!({}),
                resampling: Some(resampling.to_string()),
                ..UpstreamStep::default()
            }],
        }];
        verdict(&registry, "aggregation", &facts).expect("zonal statistics are gated")
    };
    let (severity, key, _) = majority("bilinear", false);
    assert_eq!(severity, Severity::Critical);
    assert_eq!(key["upstream"], "interpolated");
    let (severity, key, reason) = majority("bilinear", true);
    assert_eq!(
        severity,
        Severity::Critical,
        "the edit launders nothing: {reason}"
    );
    assert_eq!(key["upstream"], "interpolated");
    let (severity, key, _) = majority("nearest", true);
    assert_eq!(severity, Severity::Required);
    assert_eq!(key.get("upstream"), None);
}

/// The evidence ids a built-in domain's source declares: the literals of its `mod ids` block,
/// or, for `format_selection`, the ids its `why` matches on.
fn declared_ids(domain: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join(format!("plugins/{domain}/src/lib.rs")))
        .expect("the domain's source");
    let (start, end) = if domain == "format_selection" {
        let start = source.find("fn why(id: &str)").expect("fn why");
        let end = start + source[start..].find("_ =>").expect("the default arm");
        (start, end)
    } else {
        let start = source.find("mod ids {").expect("mod ids");
        let end = start + source[start..].find("\n}").expect("the end of mod ids");
        (start, end)
    };
    let block = &source[start..end];
    let mut ids = Vec::new();
    for (i, part) in block.split('"').enumerate() {
        let after = block.split('"').nth(i + 1).unwrap_or("");
        let is_id = i % 2 == 1
            && !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && (domain != "format_selection"
                || after.trim_start().starts_with("=>")
                || after.trim_start().starts_with('|'));
        if is_id && !ids.contains(&part.to_string()) {
            ids.push(part.to_string());
        }
    }
    ids
}

/// Issue 18: "docs/domains.md says, finding by finding, how each built-in finding is settled".
/// The table under "Every finding" names every evidence id each built-in domain declares, and
/// no id that none declares (a removed rule must leave the table: `z_ignored`,
/// `unweighted_means`).
#[test]
fn docs_name_every_finding_of_every_builtin_domain() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = std::fs::read_to_string(root.join("docs/domains.md")).expect("docs/domains.md");
    let section = &docs[docs.find("### Every finding").expect("the table's heading")..];
    let domains = [
        "crs_datum",
        "resampling",
        "hydrology",
        "aggregation",
        "measurement",
        "format_selection",
    ];
    let settled = [
        "refused by the host",
        "computed away",
        "argument",
        "justified",
        "informational",
    ];
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in section
        .lines()
        .skip_while(|l| !l.starts_with("| domain |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cells: Vec<&str> = line
            .split(" | ")
            .map(|c| c.trim_matches(['|', ' ']))
            .collect();
        assert!(cells.len() >= 5, "a row of five columns: {line}");
        assert!(domains.contains(&cells[0]), "unknown domain: {line}");
        assert!(
            settled.iter().any(|k| cells[3].contains(k)),
            "the row says how the finding is settled: {line}"
        );
        let id = cells[1].trim_matches('`').to_string();
        assert!(
            !rows.contains(&(cells[0].to_string(), id.clone())),
            "twice: {line}"
        );
        if cells[3].contains("justified") {
            assert!(
                !cells[4].is_empty(),
                "a justified finding says what validate checks: {line}"
            );
        }
        rows.push((cells[0].to_string(), id));
    }
    let mut declared = Vec::new();
    for domain in domains {
        let ids = declared_ids(domain);
        assert!(ids.len() >= 3, "{domain}: {ids:?}");
        for id in ids {
            declared.push((domain.to_string(), id));
        }
    }
    let missing: Vec<&(String, String)> = declared.iter().filter(|d| !rows.contains(d)).collect();
    let stale: Vec<&(String, String)> = rows.iter().filter(|r| !declared.contains(r)).collect();
    assert!(
        missing.is_empty(),
        "not in docs/domains.md's table: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "in the table, declared by no domain: {stale:?}"
    );
}

/// The evidence ids a policy file may name for each built-in domain
/// (`reflection::policy::BUILTIN_EVIDENCE`, issue 20) are exactly those its source declares: a
/// new finding cannot be missing from the policy's vocabulary, nor a removed one linger.
#[test]
fn the_policy_vocabulary_names_every_finding_of_every_builtin_domain() {
    use gdal_mcp::reflection::policy::BUILTIN_EVIDENCE;
    for domain in [
        "crs_datum",
        "resampling",
        "hydrology",
        "aggregation",
        "measurement",
        "format_selection",
    ] {
        let mut declared = declared_ids(domain);
        declared.sort();
        let mut listed: Vec<String> = BUILTIN_EVIDENCE
            .iter()
            .find(|(d, _)| *d == domain)
            .map(|(_, ids)| ids.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        listed.sort();
        assert_eq!(listed, declared, "{domain}");
    }
    assert_eq!(BUILTIN_EVIDENCE.len(), 6);
}

/// Issue 20 (WIT 0.7): every built-in domain says how sure it is of its verdict and marks the
/// findings an operator may loosen, as docs/domains.md's "Confidence and relaxable findings"
/// says. Declared classes and measured facts are certain, a few integer values in a sample a
/// guess; a team's conventions are relaxable, a correctness matter never.
#[test]
fn builtin_domains_rate_their_confidence_and_mark_relaxable_findings() {
    use gdal_mcp::domains::Trigger;
    use gdal_mcp::gdal::facts::BandFacts;
    let registry = registry();
    let trigger = |domain: &str, facts: &CallFacts| -> Trigger {
        registry
            .get(domain)
            .expect("domain loaded")
            .classify(facts)
            .expect("classify succeeds")
            .unwrap_or_else(|| panic!("{domain} triggers"))
    };
    // Every item seen is marked as docs/domains.md says (its table's yes and no rows).
    let docs = docs_marks();
    let relaxable = |domain: &str, t: &Trigger, id: &str| {
        for item in &t.evidence {
            let row = docs.iter().find(|(d, i, _)| d == domain && *i == item.id);
            if let Some((_, _, said)) = row.filter(|(_, _, r)| r == "yes" || r == "no") {
                assert_eq!(item.relaxable, said == "yes", "{domain} {}", item.id);
            }
        }
        t.evidence
            .iter()
            .find(|e| e.id == id)
            .unwrap_or_else(|| panic!("{id} in {:?}", t.evidence))
            .relaxable
    };
    let reproject = |raster: RasterFacts, source: CrsFacts, t: Option<TransformationFacts>| {
        let mut facts = call(
            "raster_reproject",
            json!({"input": "in.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"}),
            vec![raster_dataset("input", Some(source), raster)],
        );
        facts.target_crs = Some(wgs84());
        facts.transformation = t;
        facts
    };
    let palette = raster(true);
    let mut few_values = raster(true);
    few_values.evidence.palette = false;
    let floats = raster(false);
    let integers = raster_of("Int16", 1, false, None);

    // resampling: bilinear over classes is never relaxable; its confidence is the data's.
    let t = trigger("resampling", &reproject(palette.clone(), utm33(), None));
    assert_eq!(t.confidence, Some(1.0));
    assert!(!relaxable("resampling", &t, "categorical_input") && !t.relaxable());
    let t = trigger("resampling", &reproject(few_values.clone(), utm33(), None));
    assert_eq!(
        t.confidence,
        Some(0.5),
        "a few integer values only look like classes"
    );
    let t = trigger("resampling", &reproject(floats.clone(), utm33(), None));
    assert_eq!(t.confidence, Some(1.0));
    assert!(relaxable("resampling", &t, "continuous_input") && t.relaxable());
    let t = trigger("resampling", &reproject(integers, utm33(), None));
    assert_eq!(
        t.confidence,
        Some(0.75),
        "an integer band only looks like measurements"
    );

    // crs_datum: a conversion on one datum is a team's choice; a datum shift is not.
    let t = trigger("crs_datum", &reproject(floats.clone(), utm33(), None));
    assert_eq!(t.confidence, Some(1.0));
    assert!(
        relaxable("crs_datum", &t, "crs_change") && t.relaxable(),
        "{:?}",
        t.evidence
    );
    let t = trigger(
        "crs_datum",
        &reproject(floats.clone(), nad27(), Some(helmert())),
    );
    assert_eq!(t.confidence, Some(1.0));
    assert!(!relaxable("crs_datum", &t, "crs_change") && !t.relaxable());
    let t = trigger(
        "crs_datum",
        &reproject(floats.clone(), nad27(), Some(ballpark())),
    );
    assert!(!relaxable("crs_datum", &t, "ballpark_operation") && !t.relaxable());
    // ... and a projected DEM's heights: undeclared (a guess); declared in any unit, nothing
    // is raised (the host applies the ratio and says so; attack round 13, R13-B1).
    let feet = CrsFacts {
        linear_unit: Some("US survey foot".to_string()),
        linear_unit_metres: Some(0.3048006096),
        ..utm33()
    };
    let slope = |unit: Option<&str>| {
        let mut dem = raster(false);
        dem.bands = vec![BandFacts {
            unit: unit.map(String::from),
            ..BandFacts::default()
        }];
        call(
            "raster_terrain",
            json!({"input": "dem.tif", "output": "s.tif", "operation": "slope"}),
            vec![raster_dataset("input", Some(feet.clone()), dem)],
        )
    };
    let t = trigger("crs_datum", &slope(None));
    assert_eq!(t.confidence, Some(0.5), "undeclared heights");
    assert!(!relaxable("crs_datum", &t, "unit_mismatch"));
    for unit in ["m", "US survey foot", "ft"] {
        let silent = registry
            .get("crs_datum")
            .expect("domain loaded")
            .classify(&slope(Some(unit)))
            .expect("classify succeeds");
        assert!(silent.is_none(), "heights in {unit}: {silent:?}");
    }

    // aggregation: the statistic is a team's convention; averaging classes is not, and rests
    // on the categorical evidence.
    let zonal = |input: RasterFacts| {
        call(
            "zonal_stats",
            json!({"input": "r.tif", "zones": "z.gpkg", "stats": ["mean"], "semantics": "cell_centre"}),
            vec![
                raster_dataset("input", Some(utm33()), input),
                vector_dataset("zones", Some(utm33()), &[("districts", "Polygon")]),
            ],
        )
    };
    let t = trigger("aggregation", &zonal(floats.clone()));
    assert_eq!((t.severity, t.confidence), (Severity::Required, Some(1.0)));
    assert!(relaxable("aggregation", &t, "zonal_method") && t.relaxable());
    let t = trigger("aggregation", &zonal(palette));
    assert_eq!((t.severity, t.confidence), (Severity::Critical, Some(1.0)));
    assert!(!relaxable("aggregation", &t, "categorical_mean") && !t.relaxable());
    let t = trigger("aggregation", &zonal(few_values));
    assert_eq!(
        (t.severity, t.confidence),
        (Severity::Critical, Some(0.5)),
        "a critical verdict resting on a guess is a guess"
    );

    // measurement: what the host settled is relaxable; distortion and invalid shapes are not.
    let measure =
        |facts: MeasurementFacts| measuring("vector_measure", json!({"input": "p.gpkg"}), facts);
    let foot_plane = MeasurementFacts {
        crs: Some(feet.clone()),
        area_scale_error: Some(0.004),
        length_scale_error: Some(0.002),
        worst_at: Some((15.0, 50.0)),
        ..measurement_facts("planar")
    };
    let t = trigger("measurement", &measure(foot_plane.clone()));
    assert_eq!((t.severity, t.confidence), (Severity::Advisory, Some(1.0)));
    assert!(relaxable("measurement", &t, "non_metre_unit") && t.relaxable());
    let distorted = MeasurementFacts {
        area_scale_error: Some(0.05),
        ..foot_plane
    };
    let t = trigger("measurement", &measure(distorted));
    assert!(!relaxable("measurement", &t, "planar_distortion") && !t.relaxable());

    // hydrology: how a team conditions a DEM is its standing method.
    let t = trigger(
        "hydrology",
        &call(
            "dem_condition",
            json!({"method": "breach", "max_breach_length": 50}),
            vec![raster_dataset("input", Some(utm33()), raster(false))],
        ),
    );
    assert_eq!(t.confidence, Some(1.0));
    assert!(relaxable("hydrology", &t, "depression_handling") && t.relaxable());
}

/// The rows of docs/domains.md's "Confidence and relaxable findings" table: (domain, finding,
/// relaxable column).
fn docs_marks() -> Vec<(String, String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = std::fs::read_to_string(root.join("docs/domains.md")).expect("docs/domains.md");
    let section = &docs[docs
        .find("## Confidence and relaxable findings")
        .expect("the section")..];
    section
        .lines()
        .skip_while(|l| !l.starts_with("| domain | finding | confidence | relaxable |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line
                .split(" | ")
                .map(|c| c.trim_matches(['|', ' ']))
                .collect();
            assert_eq!(cells.len(), 4, "four columns: {line}");
            (
                cells[0].to_string(),
                cells[1].trim_matches('`').to_string(),
                cells[3].to_string(),
            )
        })
        .collect()
}

/// Issue 20 (WIT 0.7): docs/domains.md rates every finding of every built-in domain and says
/// whether it is relaxable, once, and names no finding no domain declares.
#[test]
fn docs_rate_every_finding_of_every_builtin_domain() {
    let rows = docs_marks();
    let mut declared = Vec::new();
    for domain in [
        "crs_datum",
        "resampling",
        "hydrology",
        "aggregation",
        "measurement",
        "format_selection",
    ] {
        for id in declared_ids(domain) {
            declared.push((domain.to_string(), id));
        }
    }
    let named: Vec<(String, String)> = rows
        .iter()
        .map(|(d, i, _)| (d.clone(), i.clone()))
        .collect();
    for (i, row) in named.iter().enumerate() {
        assert!(!named[..i].contains(row), "twice: {row:?}");
        assert!(declared.contains(row), "declared by no domain: {row:?}");
    }
    for d in &declared {
        assert!(named.contains(d), "not rated in docs/domains.md: {d:?}");
    }
    for (domain, id, relaxable) in &rows {
        assert!(
            relaxable == "yes" || relaxable == "no" || id == "crs_change",
            "{domain} {id}: relaxable is yes or no (crs_change says when): {relaxable}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Attack round 10, R10-7: every raster output driver the server allows has a capability row in
// format_selection, measured against GDAL 3.6: each type written through the driver and read
// back. RST stores only Byte, Int16 and Float32 and GDAL converts on write (Float64
// 123456789.123 came back 123456792, Int32 2000000001 came back 2000000000) behind an advisory
// `unknown_driver`.

/// A 3 x 1 raster of `data_type` holding `values`, written by `driver` into `dir` and read
/// back; `None` when the write or the read fails.
fn written_and_read_back(
    dir: &std::path::Path,
    driver: &str,
    data_type: &str,
    values: [f64; 3],
) -> Option<Vec<f64>> {
    use gdal::raster::Buffer;
    use gdal::DriverManager;
    let mem = DriverManager::get_driver_by_name("MEM").ok()?;
    let (w, h) = (3usize, 2usize);
    let source = match data_type {
        "Byte" => mem.create_with_band_type::<u8, _>("", w, h, 1),
        "UInt16" => mem.create_with_band_type::<u16, _>("", w, h, 1),
        "Int16" => mem.create_with_band_type::<i16, _>("", w, h, 1),
        "UInt32" => mem.create_with_band_type::<u32, _>("", w, h, 1),
        "Int32" => mem.create_with_band_type::<i32, _>("", w, h, 1),
        "Float32" => mem.create_with_band_type::<f32, _>("", w, h, 1),
        _ => mem.create_with_band_type::<f64, _>("", w, h, 1),
    };
    let mut source = source.ok()?;
    source
        .set_geo_transform(&[500000.0, 30.0, 0.0, 5000000.0, 0.0, -30.0])
        .ok()?;
    {
        let mut band = source.rasterband(1).ok()?;
        let cells: Vec<f64> = values.iter().chain(values.iter()).copied().collect();
        let mut buffer = Buffer::new((w, h), cells);
        band.write((0, 0), (w, h), &mut buffer).ok()?;
    }
    let target = DriverManager::get_driver_by_name(driver).ok()?;
    let extension = ["DMD_EXTENSION", "DMD_EXTENSIONS"]
        .iter()
        .find_map(|key| gdal::Metadata::metadata_item(&target, key, ""))
        .and_then(|e| e.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "out".to_string());
    let path = dir.join(format!("{driver}-{data_type}.{extension}"));
    // Non-strict, as gdal_translate and gdalwarp write.
    let copy = source
        .create_copy(&target, &path, &Default::default())
        .ok()?;
    drop(copy);
    let back = gdal::Dataset::open(&path).ok()?;
    let band = back.rasterband(1).ok()?;
    let read = band.read_as::<f64>((0, 0), (w, 1), (w, 1), None).ok()?;
    Some(read.data().to_vec())
}

/// `format_selection`'s answer to a `raster_convert` (with `arguments`) of a one-band raster
/// of `data_type`, with the host's encoding fact, and its evidence ids.
fn classify_convert(
    domain: &gdal_mcp::domains::Domain,
    arguments: Value,
    data_type: &str,
) -> (Option<gdal_mcp::domains::Trigger>, Vec<String>) {
    let facts = with_encoding_fact(call(
        "raster_convert",
        arguments,
        vec![raster_dataset(
            "input",
            Some(utm33()),
            raster_of(data_type, 1, false, None),
        )],
    ));
    assert!(
        facts.output.as_ref().is_some_and(|o| o.encoding.is_some()),
        "the host's encoding fact is sent"
    );
    let trigger = domain.classify(&facts).expect("classify");
    let ids = trigger
        .as_ref()
        .map(|t| t.evidence.iter().map(|e| e.id.clone()).collect())
        .unwrap_or_default();
    (trigger, ids)
}

#[test]
fn format_selection_capacity_is_gdal_3_6_measured() {
    let registry = registry();
    let domain = registry.get("format_selection").expect("format_selection");
    let dir = tempfile::tempdir().expect("temp dir");
    // Each type's extremes, and a value a narrower float cannot hold.
    let types: [(&str, [f64; 3]); 7] = [
        ("Byte", [0.0, 255.0, 7.0]),
        ("UInt16", [0.0, 65535.0, 7.0]),
        ("Int16", [-32768.0, 32767.0, 7.0]),
        ("UInt32", [0.0, 4294967295.0, 16777217.0]),
        ("Int32", [-2147483648.0, 2000000001.0, 16777217.0]),
        ("Float32", [f64::from(-3.0e38_f32), f64::from(0.1_f32), 1.5]),
        ("Float64", [123456789.123, 0.123456789012345, -2.5]),
    ];
    // The drivers whose rows R10-7 added: measured here, asked exactly where values change.
    // (RST is read, no longer written: attack round 23, R23-A6.)
    let added = ["HFA", "ENVI", "XYZ", "netCDF", "SAGA", "GS7BG"];
    let mut measured = Vec::new();
    for driver in gdal_mcp::gdal::policy::RASTER_OUTPUT_DRIVERS {
        for (data_type, values) in types {
            let back = written_and_read_back(dir.path(), driver, data_type, values);
            let kept = back.as_deref() == Some(&values[..]);
            let (trigger, ids) = classify_convert(
                domain,
                json!({"input": "in.tif", "output": "out.x", "format": driver}),
                data_type,
            );
            let asked = trigger
                .as_ref()
                .is_some_and(|t| t.severity != Severity::Advisory);
            assert!(
                !ids.iter().any(|id| id == "unknown_driver"),
                "{driver}: an allowed output driver has no capability row ({ids:?})"
            );
            if !kept {
                assert!(
                    asked,
                    "{driver} {data_type}: GDAL 3.6 wrote {values:?} and read back {back:?}, \
                     but format_selection asks nothing ({ids:?})"
                );
            }
            if added.contains(driver) {
                assert_eq!(
                    ids.iter().any(|id| id == "unsupported_data_type"),
                    !kept,
                    "{driver} {data_type}: wrote {values:?}, read back {back:?}; findings {ids:?}"
                );
            }
            measured.push(format!(
                "{driver} {data_type}: {}",
                if kept { "kept" } else { "changed" }
            ));
        }
    }
    // The measurement itself, for the record (GDAL 3.6.2): GS7BG keeps every type (as
    // Float64); XYZ changes UInt32 and Float64. (RST, when it was written, kept Byte, UInt16
    // as Float32, Int16 and Float32 and changed UInt32, Int32 and Float64.)
    for expected in [
        "GS7BG Int32: kept",
        "GS7BG Float64: kept",
        "XYZ UInt32: changed",
        "XYZ Float64: changed",
        "HFA Float64: kept",
        "ENVI UInt32: kept",
        "SAGA Int32: kept",
        "netCDF Float64: kept",
    ] {
        assert!(
            measured.iter().any(|m| m == expected),
            "{expected}: measured {measured:#?}"
        );
    }
}

/// The host's own type rows (`gdal::facts::capacity`, for the output type it chooses for a
/// widened `sum`) give, for every allowed driver and type, the answer `format_selection` gives:
/// the type is stored exactly when the domain raises neither `unsupported_data_type` nor
/// `codec_data_type` for it (also GeoTIFF with JPEG or WebP compression, and GeoPackage's
/// Byte tiles against its other types).
#[test]
fn host_capacity_rows_agree_with_format_selection() {
    let registry = registry();
    let domain = registry.get("format_selection").expect("format_selection");
    let types = [
        "Byte", "UInt16", "Int16", "UInt32", "Int32", "Float32", "Float64",
    ];
    // (driver, extra arguments, the creation options they pass)
    type Case = (String, Value, Vec<(String, String)>);
    let mut cases: Vec<Case> = gdal_mcp::gdal::policy::RASTER_OUTPUT_DRIVERS
        .iter()
        .map(|d| (d.to_string(), json!({}), Vec::new()))
        .collect();
    for (driver, codec) in [("GTiff", "JPEG"), ("COG", "WEBP")] {
        cases.push((
            driver.to_string(),
            json!({"creation_options": {"COMPRESS": codec}}),
            vec![("COMPRESS".to_string(), codec.to_string())],
        ));
    }
    for (driver, extra, options) in &cases {
        for data_type in types {
            let mut arguments = json!({"input": "in.tif", "output": "out.x", "format": driver});
            if let Some(o) = extra.as_object() {
                for (k, v) in o {
                    arguments[k] = v.clone();
                }
            }
            let (_, ids) = classify_convert(domain, arguments, data_type);
            let domain_stores = !ids
                .iter()
                .any(|id| id == "unsupported_data_type" || id == "codec_data_type");
            let host_stores =
                gdal_mcp::gdal::facts::capacity::stores(driver, options, &[data_type], data_type);
            assert_eq!(
                host_stores, domain_stores,
                "{driver} {options:?} {data_type}: the host says {host_stores}, the domain {ids:?}"
            );
        }
    }
}

/// Float64 to AAIGrid was asked twice for one fact: `unsupported_data_type` (AAIGrid converts
/// it to Float32) and `lossy_encoding` (AAIGrid is read back as Float32). It is asked once, as
/// `unsupported_data_type`; the clean twin, Float32 (which AAIGrid holds), raises nothing but
/// the advisory that the write is lossless.
#[test]
fn aaigrid_float64_is_asked_once() {
    let registry = registry();
    let domain = registry.get("format_selection").expect("format_selection");
    let classify = |data_type: &str| {
        classify_convert(
            domain,
            json!({"input": "in.tif", "output": "out.asc", "format": "AAIGrid"}),
            data_type,
        )
        .0
    };
    let wide = classify("Float64").expect("Float64 is asked");
    let ids: Vec<&str> = wide.evidence.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["unsupported_data_type"], "one question for one fact");
    assert_eq!(wide.severity, Severity::Critical);
    let narrow = classify("Float32");
    let asked: Vec<String> = narrow
        .iter()
        .filter(|t| t.severity != Severity::Advisory)
        .flat_map(|t| t.evidence.iter().map(|e| e.id.clone()))
        .collect();
    assert!(asked.is_empty(), "Float32 fits AAIGrid: {asked:?}");
    let notes: Vec<String> = narrow
        .iter()
        .flat_map(|t| t.evidence.iter().map(|e| e.id.clone()))
        .collect();
    assert_eq!(notes, ["lossless_write"]);
}
