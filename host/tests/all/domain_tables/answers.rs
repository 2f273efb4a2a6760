//! Issue 18, rules 3 and 4, through the real embedded components.
//!
//! * **Boilerplate is refused.** One row per gated finding of every built-in domain (but
//!   `format_selection`, tested on its own): the hurried agent's justification (the method named
//!   right, and one acknowledging sentence repeated for every evidence id, in the rationale,
//!   the tradeoffs, the assumptions and the alternative) passes the host's schema and must be
//!   refused by the domain's `validate` at `/evidence/<finding>`; a careful answer (the content
//!   each finding asks for: a tolerance no smaller than the measured error, the alternative
//!   considered named by its id, the offered safe alternative rejected with why) passes both.
//! * **No false alarms.** One clean twin per rule: a call next to the trap on which the finding
//!   does not fire (and nothing fires at all where the domain can stay silent).

use super::*;
use gdal_mcp::domains::{DatasetLineage, FieldError, Trigger, UpstreamStep};
use gdal_mcp::reflection::justification;

/// The hurried agent's answer to every finding.
const BOILERPLATE: &str = "I have reviewed the findings and accept the risk for this analysis.";

/// One gated finding, the call that raises it, and a careful justification.
struct Row {
    domain: &'static str,
    finding: &'static str,
    severity: Severity,
    facts: CallFacts,
    /// How the call's method is named (what the old checks already wanted).
    method: &'static str,
    /// `alternatives` of the careful answer.
    alternatives: Value,
    /// `evidence` of the careful answer.
    evidence: Value,
}

fn trigger_of(registry: &Registry, domain: &str, facts: &CallFacts) -> Option<Trigger> {
    registry
        .get(domain)
        .expect("domain loaded")
        .classify(facts)
        .expect("classify succeeds")
}

/// The gate's check of a justification: the host's schema, then the domain's `validate`.
fn refusal(
    registry: &Registry,
    domain: &str,
    trigger: &Trigger,
    just: &Value,
) -> (Vec<FieldError>, Vec<FieldError>) {
    let critical = trigger.severity == Severity::Critical;
    let host = justification::validate(just, critical, &trigger.evidence)
        .err()
        .unwrap_or_default();
    let own = registry
        .get(domain)
        .expect("domain loaded")
        .validate(&trigger.key_fields, &trigger.evidence, just)
        .expect("validate succeeds");
    (host, own)
}

fn boilerplate(trigger: &Trigger, method: &str) -> Value {
    let answers: serde_json::Map<String, Value> = trigger
        .evidence
        .iter()
        .map(|e| (e.id.clone(), json!(BOILERPLATE)))
        .collect();
    json!({"intent": "run this step of the analysis",
           "alternatives": [{"method": "another approach", "why_not": BOILERPLATE}],
           "choice": {"method": method, "rationale": BOILERPLATE, "tradeoffs": BOILERPLATE},
           "confidence": "high", "assumptions": [BOILERPLATE], "evidence": answers})
}

fn careful(row: &Row) -> Value {
    json!({"intent": "the figures this step feeds are compared across the study area",
           "alternatives": row.alternatives,
           "choice": {"method": row.method,
                      "rationale": "fits the data and the question, as the evidence answers say",
                      "tradeoffs": "as stated per finding in evidence"},
           "confidence": "medium",
           "assumptions": ["the inputs are what their metadata says"],
           "evidence": row.evidence})
}

fn vector_reproject(
    source: Option<CrsFacts>,
    target: CrsFacts,
    t: Option<TransformationFacts>,
    arguments: Value,
) -> CallFacts {
    let mut facts = call(
        "vector_reproject",
        arguments,
        vec![vector_dataset("input", source, &[("wells", "Point")])],
    );
    facts.target_crs = Some(target);
    facts.transformation = t;
    facts
}

fn to_wgs84() -> Value {
    json!({"input": "wells.gpkg", "output": "out.gpkg", "dst_crs": "EPSG:4326"})
}

fn nad27_to_wgs84(t: TransformationFacts) -> CallFacts {
    vector_reproject(Some(nad27()), wgs84(), Some(t), to_wgs84())
}

fn helmert_outside() -> TransformationFacts {
    let mut t = helmert();
    t.used.covers_data = Some(false);
    t.default.covers_data = Some(false);
    t
}

/// A DEM in EPSG:4326 with 1″ cells, about 21.5 × 30.9 m at 46° N.
fn geographic_dem() -> DatasetFacts {
    let mut r = raster(false);
    r.pixel_size = Some((0.000_277_777_8, -0.000_277_777_8));
    r.georeferencing.cell_size_metres = Some((21.47, 30.87));
    raster_dataset("input", Some(wgs84()), r)
}

fn terrain_call(dem: DatasetFacts, arguments: Value) -> CallFacts {
    call("raster_terrain", arguments, vec![dem])
}

fn feet_crs() -> CrsFacts {
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

fn utm34() -> CrsFacts {
    crs(
        Some("EPSG:32634"),
        "WGS 84 / UTM zone 34N",
        CrsKind::Projected,
        "WGS_1984",
    )
}

/// A conversion as PROJ describes it through its C API: no published accuracy, and the target
/// projection's area of use (18° E to 24° E for UTM 34N) does not hold data at 13° E.
fn conversion(name: &str) -> TransformationFacts {
    let op = OperationFacts {
        name: name.to_string(),
        accuracy_metres: None,
        ballpark: false,
        via: None,
        covers_data: Some(false),
        pipeline: None,
    };
    TransformationFacts {
        used: op.clone(),
        default: op,
        missing_grids: Vec::new(),
    }
}

fn mercator() -> CrsFacts {
    crs(
        Some("EPSG:3857"),
        "WGS 84 / Pseudo-Mercator",
        CrsKind::Projected,
        "WGS_1984",
    )
}

/// A geographic raster reprojected to `target` (a conversion), with the target's planar scale
/// errors over the data as the host measures them (`tool-call.measurement`, issue 18).
fn converted_to(target: CrsFacts, area: f64, length: f64, worst_at: (f64, f64)) -> CallFacts {
    let mut facts = call(
        "raster_reproject",
        json!({"input": "t.tif", "output": "o.tif", "dst_crs": target.id.clone(), "resampling": "bilinear"}),
        vec![raster_dataset("input", Some(wgs84()), raster(false))],
    );
    facts.target_crs = Some(target.clone());
    facts.transformation = Some(conversion(&target.name));
    facts.measurement = Some(MeasurementFacts {
        method: "planar".to_string(),
        crs: Some(target),
        area_scale_error: Some(area),
        length_scale_error: Some(length),
        worst_at: Some(worst_at),
        ..MeasurementFacts::default()
    });
    facts
}

fn dem_call(
    tool: &str,
    arguments: Value,
    flat: Option<f64>,
    upstream: Option<UpstreamStep>,
) -> CallFacts {
    let mut r = raster(false);
    r.flat_fraction = flat;
    let mut facts = call(
        tool,
        arguments,
        vec![raster_dataset("input", Some(utm33()), r)],
    );
    if let Some(step) = upstream {
        facts.upstream = vec![DatasetLineage {
            steps: vec![step],
            ..DatasetLineage::default()
        }];
    }
    facts
}

fn resampled(method: &str) -> UpstreamStep {
    UpstreamStep {
        depth: 1,
        tool: "raster_resample".to_string(),
        arguments: json!({}),
        resampling: Some(method.to_string()),
        ..UpstreamStep::default()
    }
}

fn zonal_call(
    stats: Value,
    semantics: &str,
    categorical: bool,
    zones: &str,
    upstream: Option<UpstreamStep>,
) -> CallFacts {
    let mut facts = call(
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
                    Some(255.0),
                ),
            ),
            vector_dataset("zones", Some(utm33()), &[("districts", zones)]),
        ],
    );
    if let Some(step) = upstream {
        facts.upstream = vec![
            DatasetLineage {
                steps: vec![step],
                ..DatasetLineage::default()
            },
            DatasetLineage::default(),
        ];
    }
    facts
}

fn aggregate_call(statistic: &str, data_type: &str) -> CallFacts {
    call(
        "raster_aggregate",
        json!({"input": "a.tif", "output": "b.tif", "factor": 4, "statistic": statistic}),
        vec![raster_dataset(
            "input",
            Some(utm33()),
            raster_of(data_type, 1, false, None),
        )],
    )
}

fn composite_call(statistic: &str) -> CallFacts {
    call(
        "raster_composite",
        json!({"inputs": ["a.tif", "b.tif"], "statistic": statistic, "_grids": "aligned"}),
        vec![
            raster_dataset(
                "input",
                Some(utm33()),
                raster_of("Float32", 1, false, Some(-9999.0)),
            ),
            raster_dataset(
                "input2",
                Some(utm33()),
                raster_of("Float32", 1, false, Some(-9999.0)),
            ),
        ],
    )
}

fn planar(area: f64) -> MeasurementFacts {
    MeasurementFacts {
        crs: Some(utm33()),
        area_scale_error: Some(area),
        length_scale_error: Some(area / 2.0),
        worst_at: Some((15.0, 50.0)),
        ..measurement_facts("planar")
    }
}

fn rows() -> Vec<Row> {
    let measure =
        |facts: MeasurementFacts, arguments: Value| measuring("vector_measure", arguments, facts);
    vec![
        // ---- crs_datum
        Row {
            domain: "crs_datum",
            finding: "crs_change",
            severity: Severity::Required,
            facts: vector_reproject(Some(utm33()), wgs84(), None, to_wgs84()),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:3857 (Web Mercator)",
                "why_not": "the partner's viewer reprojects on its own and reads lon/lat only"}]),
            evidence: json!({"crs_change": "only positions must survive: areas and distances were computed in UTM 33N before this export"}),
        },
        Row {
            domain: "crs_datum",
            finding: "crs_change",
            severity: Severity::Required,
            facts: nad27_to_wgs84(helmert()),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:4269 (NAD83)",
                "why_not": "the partner's GPS fixes are WGS 84, and the NAD83 shift would need another step"}]),
            evidence: json!({"crs_change": "distances between wells must survive: we accept 25 m of positional error, the wells are mapped at 1:50000"}),
        },
        Row {
            domain: "crs_datum",
            finding: "source_crs_assigned",
            severity: Severity::Critical,
            facts: vector_reproject(None, utm33(), None,
                json!({"input": "w.gpkg", "output": "o.gpkg", "dst_crs": "EPSG:32633", "src_crs": "EPSG:4326"})),
            method: "EPSG:32633",
            alternatives: json!([{"method": "EPSG:3035 (LAEA Europe)",
                "why_not": "the survey lines are short and local; UTM 33N keeps their lengths within 0.04 %"}]),
            evidence: json!({
                "crs_change": "distances along the survey lines must survive, and UTM 33N is the national mapping grid here",
                "source_crs_assigned": "the provider's delivery note documents WGS 84 coordinates from handheld GPS receivers"}),
        },
        Row {
            domain: "crs_datum",
            finding: "source_crs_overridden",
            severity: Severity::Critical,
            facts: vector_reproject(Some(utm33()), wgs84(), None,
                json!({"input": "w.gpkg", "output": "o.gpkg", "dst_crs": "EPSG:4326", "src_crs": "EPSG:32634"})),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:3857",
                "why_not": "the exchange format agreed with the ministry is geographic WGS 84"}]),
            evidence: json!({
                "crs_change": "only positions must survive for the exchange; areas are computed in the source grid",
                "source_crs_overridden": "the provider's metadata says zone 34, and overlaid on the orthophoto the wells land 400 km west when read as zone 33"}),
        },
        Row {
            domain: "crs_datum",
            finding: "source_crs_unidentified",
            severity: Severity::Critical,
            facts: vector_reproject(Some(crs(None, "UTM 33 (custom)", CrsKind::Projected, "WGS_1984")), wgs84(), None, to_wgs84()),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:3857",
                "why_not": "the exchange format agreed with the ministry is geographic WGS 84"}]),
            evidence: json!({
                "crs_change": "only positions must survive for the exchange; areas are computed in the source grid",
                "source_crs_unidentified": "the .prj matches EPSG:32633 parameter by parameter: transverse Mercator, central meridian 15° E, k 0.9996, WGS 84"}),
        },
        Row {
            domain: "crs_datum",
            finding: "crs_missing",
            severity: Severity::Critical,
            facts: zonal_call_with_zones(None),
            method: "EPSG:32633",
            alternatives: json!([{"method": "assign EPSG:4326 to the zones first",
                "why_not": "the zones were digitised on this raster, so its grid is their CRS"}]),
            evidence: json!({"crs_missing": "the zones were digitised on this raster in QGIS and exported without a .prj; overlaid on it they align with the field boundaries"}),
        },
        Row {
            domain: "crs_datum",
            finding: "ballpark_operation",
            severity: Severity::Critical,
            facts: nad27_to_wgs84(ballpark()),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:4269 (NAD83)",
                "why_not": "NAD27 to NAD83 needs the same missing NADCON grid"}]),
            evidence: json!({
                "crs_change": "only the positions of the roads must survive, for a regional overview map",
                "ballpark_operation": "we accept up to 150 m: the roads are drawn at 1:250000, where a line is 60 m wide",
                "missing_grids": "the NOAA grid cannot be installed on this machine; the decision is asked again once it is"}),
        },
        Row {
            domain: "crs_datum",
            finding: "unknown_accuracy",
            severity: Severity::Critical,
            facts: nad27_to_wgs84(transformation("NAD27 to WGS 84 (X)".to_string(), None, false, vec![])),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:4269 (NAD83)",
                "why_not": "the partner's GPS fixes are WGS 84, and the NAD83 step has no better accuracy"}]),
            evidence: json!({
                "crs_change": "well positions must survive to within the 5 km hexagons the counts are reported in",
                "unknown_accuracy": "we accept up to 50 m: counts are aggregated to 5 km hexagons, so a well rarely changes cell"}),
        },
        Row {
            domain: "crs_datum",
            finding: "outside_area_of_use",
            severity: Severity::Critical,
            facts: nad27_to_wgs84(helmert_outside()),
            method: "EPSG:4326",
            alternatives: json!([{"method": "EPSG:4269 (NAD83)",
                "why_not": "no NAD83 operation covers the offshore platforms either"}]),
            evidence: json!({
                "crs_change": "platform positions must survive to within 200 m, we accept 200 m, for a regional overview",
                "outside_area_of_use": "we accept up to 200 m offshore: the platforms are shown on a 1:1000000 chart"}),
        },
        // Issue 18: a conversion graded by its target's scale error over the data (Web
        // Mercator over 15° to 25° E, 60° to 70° N: areas +750.5 %, lengths +191.7 %, as the
        // host measures them on the WGS 84 ellipsoid).
        Row {
            domain: "crs_datum",
            finding: "target_distortion",
            severity: Severity::Critical,
            facts: converted_to(mercator(), 7.5048, 1.9175, (20.0, 70.0)),
            method: "EPSG:3857",
            alternatives: json!([{"method": "EPSG:3035 (LAEA Europe)",
                "why_not": "the output is cut into the basemap's web tiles, which are Web Mercator"}]),
            evidence: json!({
                "crs_change": "only the display over the basemap must survive; no area or distance is read from the tiles",
                "target_distortion": "we accept up to 760 %: the tiles are viewed, never measured, and the legend says so"}),
        },
        Row {
            domain: "crs_datum",
            finding: "geographic_dem_unscaled",
            severity: Severity::Critical,
            facts: terrain_call(geographic_dem(), json!({"input": "dem.tif", "output": "s.tif", "operation": "slope"})),
            method: "EPSG:4326",
            alternatives: json!([{"method": "scale 111120",
                "why_not": "the classifier downstream was trained on unscaled slopes of this very product; rescaling breaks its thresholds"}]),
            evidence: json!({"geographic_dem_unscaled": "the slope classes' thresholds were fitted on unscaled degree-based gradients of this SRTM tile"}),
        },
        Row {
            domain: "crs_datum",
            finding: "geographic_dem_scaled",
            severity: Severity::Required,
            facts: terrain_call(geographic_dem(), json!({"operation": "slope", "scale": 111120})),
            method: "scale 111120",
            alternatives: json!([{"method": "reproject to EPSG:32633 first", "why_not": "a second resampling of the 1″ cells smooths the ridges we classify"}]),
            evidence: json!({"geographic_dem_scaled": "we accept up to 50 % on east-west gradients: only north-facing classes are used, which rest on north-south gradients"}),
        },
        Row {
            domain: "crs_datum",
            finding: "geographic_dem_aspect",
            severity: Severity::Required,
            facts: terrain_call(geographic_dem(), json!({"operation": "aspect"})),
            method: "EPSG:4326",
            alternatives: json!([{"method": "reproject to EPSG:32633 first", "why_not": "a second resampling of the 1″ cells smooths the ridges we classify"}]),
            evidence: json!({"geographic_dem_aspect": "we accept up to 15° of aspect error: aspects are binned into 8 sectors of 45°"}),
        },
        Row {
            domain: "crs_datum",
            finding: "unit_mismatch",
            severity: Severity::Required,
            facts: terrain_call(raster_dataset("input", Some(feet_crs()), raster(false)), json!({"operation": "slope"})),
            method: "EPSG:2264",
            alternatives: json!([{"method": "scale 0.3048", "why_not": "that would be right only for heights in metres, and these are in feet"}]),
            evidence: json!({"unit_mismatch": "the heights are in US survey feet as well, per the county's LiDAR delivery report"}),
        },
        Row {
            domain: "crs_datum",
            finding: "dem_crs_missing",
            severity: Severity::Required,
            facts: terrain_call(raster_dataset("input", None, raster(false)), json!({"operation": "slope"})),
            method: "unknown CRS: pixel units as stored",
            alternatives: json!([{"method": "assign EPSG:32633 first", "why_not": "the drone block is a local grid; no national CRS fits it"}]),
            evidence: json!({"dem_crs_missing": "pixels are 1 metre and heights are metres too, per the drone survey's processing report"}),
        },
        // ---- resampling
        Row {
            domain: "resampling",
            finding: "continuous_input",
            severity: Severity::Required,
            facts: Case::reproject("r", json!({"input": "in.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"})).facts(),
            method: "bilinear",
            alternatives: json!([{"method": "cubic",
                "why_not": "cubic overshoots next to the cliffs by up to 2 m; bilinear stays within the input's range"}]),
            evidence: json!({"continuous_input": "temperature is a smooth field; bilinear keeps it continuous without overshoot at station spacing"}),
        },
        Row {
            domain: "resampling",
            finding: "categorical_input",
            severity: Severity::Critical,
            facts: Case { categorical: true, ..Case::reproject("r", json!({"input": "in.tif", "output": "o.tif", "dst_crs": "EPSG:4326", "resampling": "bilinear"})) }.facts(),
            method: "bilinear",
            alternatives: json!([{"method": "nearest",
                "why_not": "it keeps the tenths on a jagged grid; the downstream model expects smooth cover fractions"}]),
            evidence: json!({"categorical_input": "the codes are forest cover in tenths (0-10), a continuous fraction, so blended values are meaningful"}),
        },
        // ---- hydrology
        Row {
            domain: "hydrology",
            finding: "depression_handling",
            severity: Severity::Required,
            facts: dem_call("dem_condition", json!({"method": "breach", "max_breach_length": 50}), None, None),
            method: "breach",
            alternatives: json!([{"method": "fill",
                "why_not": "filling floods the quarry pits into 3 m deep flat lakes that do not drain"}]),
            evidence: json!({"depression_handling": "road embankments are crossed by culverts every 200 m, so cutting them mimics real drainage"}),
        },
        Row {
            domain: "hydrology",
            finding: "routing_method",
            severity: Severity::Required,
            facts: dem_call("dem_flow_direction", json!({"algorithm": "d8"}), Some(0.05), None),
            method: "D8",
            alternatives: json!([{"method": "dinf",
                "why_not": "D-infinity disperses flow; the ditch network we compare against is single-cell"}]),
            evidence: json!({"routing_method": "the ditches are one cell wide and straight, so single-neighbour paths match them"}),
        },
        Row {
            domain: "hydrology",
            finding: "stream_threshold",
            severity: Severity::Required,
            facts: dem_call("dem_streams", json!({"threshold": 1000}), None, None),
            method: "threshold of 1000 cells",
            alternatives: json!([{"method": "threshold 500 cells", "why_not": "half the area puts channel heads on the hillslopes where the field maps show none"}]),
            evidence: json!({"stream_threshold": "channel heads mapped in the field start at about 1 km² of contributing area, matching the 1:25000 blue lines"}),
        },
        Row {
            domain: "hydrology",
            finding: "pour_points",
            severity: Severity::Required,
            facts: dem_call("dem_watershed", json!({"pour_points": [[1, 2]]}), None, None),
            method: "watershed above the gauge",
            alternatives: json!([{"method": "snap distance 200 m", "why_not": "a wide snap jumps to the main river next to the tributary gauge"}]),
            evidence: json!({"pour_points": "the gauge comes from the agency register with 20 m positional accuracy, within one cell of the channel"}),
        },
        Row {
            domain: "hydrology",
            finding: "flat_fraction",
            severity: Severity::Critical,
            facts: dem_call("dem_flow_direction", json!({"algorithm": "d8", "resolve_flats": false}), Some(0.40), None),
            method: "D8",
            alternatives: json!([
                {"method": "resolve_flats", "why_not": "resolving invents gradients across the polder, whose pumps set the drainage"},
                {"method": "dinf", "why_not": "D-infinity disperses flow; the polder ditches are single-cell"}]),
            evidence: json!({
                "routing_method": "the polder's ditches are one cell wide and straight, as single-neighbour paths are",
                "flat_fraction": "we accept that up to 45 % of cells get no direction: the polder is masked with the pumping districts afterwards"}),
        },
        Row {
            domain: "hydrology",
            finding: "upstream_interpolation",
            severity: Severity::Required,
            facts: dem_call("dem_condition", json!({"method": "fill"}), None, Some(resampled("bilinear"))),
            method: "fill",
            alternatives: json!([{"method": "breach",
                "why_not": "breaching cuts the dams of the reservoirs this study must keep"}]),
            evidence: json!({
                "depression_handling": "the reservoirs are real sinks to be kept full, which filling reproduces",
                "upstream_interpolation": "bilinear from 10 m to 30 m lowers crests by under 0.5 m here; we accept 1 m of vertical error against the 2 m LiDAR tolerance"}),
        },
        // ---- aggregation
        Row {
            domain: "aggregation",
            finding: "zonal_method",
            severity: Severity::Required,
            facts: zonal_call(json!(["mean", "count"]), "cell_centre", false, "Multi Polygon", None),
            method: "cell centre mean and count",
            alternatives: json!([{"method": "coverage",
                "why_not": "districts span thousands of cells, so exact fractions move the mean by under 1 %"}]),
            evidence: json!({"zonal_method": "rainfall is continuous; the district mean over cell centres is the quantity reported"}),
        },
        Row {
            domain: "aggregation",
            finding: "composite_method",
            severity: Severity::Required,
            facts: composite_call("max"),
            method: "maximum",
            alternatives: json!([{"method": "median",
                "why_not": "the median hides the flood peak the map must show"}]),
            evidence: json!({"composite_method": "the flood extent map needs each cell's highest water level over both dates"}),
        },
        Row {
            domain: "aggregation",
            finding: "aggregate_method",
            severity: Severity::Required,
            facts: aggregate_call("average", "Float32"),
            method: "average",
            alternatives: json!([{"method": "median",
                "why_not": "the median of 16 temperatures ignores the warm street canyons the model needs"}]),
            evidence: json!({"aggregate_method": "temperature is intensive; the block mean is the 120 m value the climate model expects"}),
        },
        Row {
            domain: "aggregation",
            finding: "categorical_mean",
            severity: Severity::Critical,
            facts: zonal_call(json!(["mean"]), "cell_centre", true, "Polygon", None),
            method: "cell centre mean",
            alternatives: json!([{"method": "majority",
                "why_not": "majority gives forest or not per zone; the report needs the forest share"}]),
            evidence: json!({
                "zonal_method": "each zone's share of forest cells is the reported indicator",
                "categorical_mean": "the codes 0/1 are a binary forest mask, so their mean is the forest fraction of each zone"}),
        },
        Row {
            domain: "aggregation",
            finding: "all_touched_sum",
            severity: Severity::Critical,
            facts: zonal_call(json!(["sum"]), "all_touched", false, "Polygon", None),
            method: "all touched sum",
            alternatives: json!([{"method": "coverage",
                "why_not": "the wetland outlines are coarser than a cell; all touched keeps their narrow channels"}]),
            evidence: json!({
                "zonal_method": "storage volume per wetland is the sum of depth cells",
                "all_touched_sum": "the wetlands are isolated, 2 km apart, so no cell on a boundary belongs to two zones"}),
        },
        Row {
            domain: "aggregation",
            finding: "coverage_without_area",
            severity: Severity::Critical,
            facts: zonal_call(json!(["mean"]), "coverage", false, "Line String", None),
            method: "coverage mean",
            alternatives: json!([{"method": "cell_centre",
                "why_not": "a trial run is wanted that proves the empty result for the methods chapter"}]),
            evidence: json!({
                "zonal_method": "the mean elevation under each transect line is asked",
                "coverage_without_area": "the empty statistics are the expected output of this demonstration run"}),
        },
        Row {
            domain: "aggregation",
            finding: "upstream_interpolated_classes",
            severity: Severity::Critical,
            facts: zonal_call(json!(["majority"]), "cell_centre", true, "Polygon", Some(resampled("bilinear"))),
            method: "cell centre majority",
            alternatives: json!([{"method": "minority", "why_not": "rare classes are not the question; the dominant land use is"}]),
            evidence: json!({
                "zonal_method": "the dominant land use per parcel is reported",
                "upstream_interpolated_classes": "the resampled raster was checked: all 12 codes in it are valid legend classes, counted with raster_stats"}),
        },
        // ---- measurement
        Row {
            domain: "measurement",
            finding: "planar_distortion",
            severity: Severity::Required,
            facts: measure(planar(0.05), json!({"input": "p.gpkg", "method": "planar"})),
            method: "planar",
            alternatives: json!([{"method": "geodesic", "why_not": "the cadastre we reconcile with reports planar UTM areas"}]),
            evidence: json!({"planar_distortion": "we accept up to 6 % because the areas only rank the parcels by size"}),
        },
        Row {
            domain: "measurement",
            finding: "planar_distortion",
            severity: Severity::Critical,
            facts: measure(planar(0.3), json!({"input": "p.gpkg", "method": "planar"})),
            method: "planar",
            alternatives: json!([{"method": "geodesic",
                "why_not": "the 2010 survey figures we compare with were taken in this same plane"}]),
            evidence: json!({"planar_distortion": "we accept up to 35 %: the figures are compared with the 2010 survey in the same projection"}),
        },
        Row {
            domain: "measurement",
            finding: "invalid_geometries",
            severity: Severity::Critical,
            facts: measure(MeasurementFacts { invalid_features: 2, ..measurement_facts("geodesic") }, json!({"input": "p.gpkg"})),
            method: "geodesic",
            alternatives: json!([{"method": "make_valid",
                "why_not": "repairing splits the bow-tie parcels into lobes the registry does not have"}]),
            evidence: json!({"invalid_geometries": "the two bow-tie parcels are reported separately and excluded from the total downstream"}),
        },
        // Issue 18: in vector_measure the host settles overlaps (`overlaps`); a spatial join
        // summing over overlapping source polygons is the finding left to justify.
        Row {
            domain: "measurement",
            finding: "overlapping_features",
            severity: Severity::Required,
            facts: measuring("vector_join", json!({"predicate": "intersects", "fields": ["pop"], "stats": ["sum"]}),
                MeasurementFacts { overlapping_pairs: Some(3), overlap_area_m2: Some(120.0), ..measurement_facts("geodesic") }),
            method: "geodesic",
            alternatives: json!([{"method": "dissolve the source polygons first", "why_not": "each district's own sum is reported, so merging them loses the per-district figures"}]),
            evidence: json!({"overlapping_features": "we accept up to 150 m² counted twice: shared driveways, against a 40 ha total"}),
        },
    ]
}

fn zonal_call_with_zones(zones: Option<CrsFacts>) -> CallFacts {
    call(
        "zonal_stats",
        json!({"input": "r.tif", "zones": "z.gpkg", "stats": ["mean"], "semantics": "cell_centre"}),
        vec![
            raster_dataset("input", Some(utm33()), raster(false)),
            vector_dataset("zones", zones, &[("districts", "Multi Polygon")]),
        ],
    )
}

/// Issue 18: the hurried agent's boilerplate passed every gated finding; `validate` checked
/// only that the method was named. Now each finding's `validate` refuses it, and a careful
/// answer passes.
#[test]
fn boilerplate_is_refused_and_a_careful_answer_passes_for_every_gated_finding() {
    let registry = registry();
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        let name = format!("{} / {}", row.domain, row.finding);
        let Some(trigger) = trigger_of(&registry, row.domain, &row.facts) else {
            failures.push(format!("{name}: not gated"));
            continue;
        };
        if trigger.severity != row.severity {
            failures.push(format!(
                "{name}: {:?}: {}",
                trigger.severity, trigger.reason
            ));
        }
        if !trigger.evidence.iter().any(|e| e.id == row.finding) {
            failures.push(format!(
                "{name}: evidence {:?}",
                trigger.evidence.iter().map(|e| &e.id).collect::<Vec<_>>()
            ));
            continue;
        }
        // The boilerplate passes the host's schema (every string non-empty, every id answered)
        // and names the method right: only the domain's content checks can refuse it.
        let hurried = boilerplate(&trigger, row.method);
        let (host, own) = refusal(&registry, row.domain, &trigger, &hurried);
        if !host.is_empty() {
            failures.push(format!(
                "{name}: host refused the boilerplate itself: {host:?}"
            ));
        }
        if own.iter().any(|e| e.path == "/choice/method") {
            failures.push(format!("{name}: the row's method is named wrong: {own:?}"));
        }
        let path = format!("/evidence/{}", row.finding);
        if !own.iter().any(|e| e.path == path) {
            failures.push(format!(
                "{name}: the boilerplate is not refused at {path}: {own:?}"
            ));
        }
        // The careful answer passes both.
        let (host, own) = refusal(&registry, row.domain, &trigger, &careful(row));
        if !(host.is_empty() && own.is_empty()) {
            failures.push(format!("{name}: careful answer refused: {host:?} {own:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every gated finding of every built-in domain but format_selection has its row (the
    // host refuses `geographic_dem` before the gate).
    let covered: Vec<&str> = rows.iter().map(|r| r.finding).collect();
    for finding in [
        "crs_change",
        "source_crs_assigned",
        "source_crs_overridden",
        "source_crs_unidentified",
        "crs_missing",
        "ballpark_operation",
        "unknown_accuracy",
        "outside_area_of_use",
        "target_distortion",
        "geographic_dem_unscaled",
        "geographic_dem_scaled",
        "geographic_dem_aspect",
        "unit_mismatch",
        "dem_crs_missing",
        "continuous_input",
        "categorical_input",
        "depression_handling",
        "routing_method",
        "stream_threshold",
        "pour_points",
        "flat_fraction",
        "upstream_interpolation",
        "zonal_method",
        "composite_method",
        "aggregate_method",
        "categorical_mean",
        "all_touched_sum",
        "coverage_without_area",
        "upstream_interpolated_classes",
        "planar_distortion",
        "invalid_geometries",
        "overlapping_features",
    ] {
        assert!(covered.contains(&finding), "no row for {finding}");
    }
}

/// The per-finding checks hold on their own: an answer that is not boilerplate but lacks the
/// content its finding asks for is refused with a message that says what to write.
#[test]
fn answers_without_the_content_their_finding_asks_for_are_refused_precisely() {
    let registry = registry();
    let rows = rows();
    let row = |finding: &str| rows.iter().find(|r| r.finding == finding).expect("row");
    let check = |row: &Row, evidence: Value, alternatives: Value| {
        let trigger = trigger_of(&registry, row.domain, &row.facts).expect("gated");
        let mut just = careful(row);
        just["evidence"] = evidence;
        just["alternatives"] = alternatives;
        refusal(&registry, row.domain, &trigger, &just).1
    };
    // A tolerance smaller than the measured error (5 % < the 30 % measured).
    let r = row("planar_distortion");
    let errors = check(
        rows.iter()
            .filter(|r| r.finding == "planar_distortion")
            .nth(1)
            .expect("critical row"),
        json!({"planar_distortion": "we accept up to 5 %: the areas only rank parcels by size"}),
        r.alternatives.clone(),
    );
    assert!(
        errors.iter().any(|e| (e.message.contains("at most 5 %")
            || e.message.contains("a limit of 5 %"))
            && e.message.contains("30 %")),
        "{errors:?}"
    );
    // A datum transformation's published 10 m is more than the 5 m accepted.
    let r = &rows[1];
    let errors = check(
        r,
        json!({"crs_change": "distances between wells must survive: we accept 5 m, mapped at 1:50000"}),
        r.alternatives.clone(),
    );
    assert!(
        errors
            .iter()
            .any(|e| e.path == "/evidence/crs_change" && e.message.contains("10 m")),
        "{errors:?}"
    );
    // The alternative considered must be named by its id.
    let r = row("continuous_input");
    let errors = check(
        r,
        r.evidence.clone(),
        json!([{"method": "another method", "why_not": "it overshoots next to the cliffs by 2 m"}]),
    );
    assert!(
        errors
            .iter()
            .any(|e| e.path == "/alternatives" && e.message.contains("cubic")),
        "{errors:?}"
    );
    // A critical finding's offered alternative must be rejected explicitly, with why.
    let r = row("categorical_input");
    let errors = check(
        r,
        r.evidence.clone(),
        json!([{"method": "cubic", "why_not": "cubic overshoots the class codes badly"}]),
    );
    assert!(errors.iter().any(|e| e.path == "/alternatives" && e.message.contains(r#"{"resampling":"nearest"}"#)), "{errors:?}");
    let errors = check(
        r,
        r.evidence.clone(),
        json!([{"method": "nearest", "why_not": BOILERPLATE}]),
    );
    assert!(
        errors
            .iter()
            .any(|e| e.path == "/alternatives" && e.message.contains("no reason")),
        "{errors:?}"
    );
    // Restating the finding is no answer.
    let r = row("crs_missing");
    let trigger = trigger_of(&registry, r.domain, &r.facts).expect("gated");
    let restated = trigger.evidence[0].fact.clone();
    let errors = check(r, json!({"crs_missing": restated}), r.alternatives.clone());
    assert!(
        errors
            .iter()
            .any(|e| e.path == "/evidence/crs_missing" && e.message.contains("restates")),
        "{errors:?}"
    );
}

/// A clean twin: a call next to the trap on which `absent` does not fire; `silent` when the
/// domain says nothing at all.
struct Twin {
    name: &'static str,
    domain: &'static str,
    facts: CallFacts,
    absent: &'static [&'static str],
    silent: bool,
}

fn twins() -> Vec<Twin> {
    let measure =
        |facts: MeasurementFacts| measuring("vector_measure", json!({"input": "p.gpkg"}), facts);
    let dem_4326_to = |target: CrsFacts, t: TransformationFacts| {
        let mut facts = call(
            "raster_reproject",
            json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:32634", "resampling": "bilinear"}),
            vec![geographic_dem()],
        );
        facts.target_crs = Some(target);
        facts.transformation = Some(t);
        facts
    };
    let mut flat_d8_resolved = dem_call(
        "dem_flow_direction",
        json!({"algorithm": "dinf"}),
        Some(0.40),
        None,
    );
    flat_d8_resolved.arguments = json!({"algorithm": "dinf"});
    vec![
        // ---- crs_datum
        Twin {
            name: "same CRS in and out",
            domain: "crs_datum",
            facts: vector_reproject(Some(utm33()), utm33(), None, to_wgs84()),
            absent: &["crs_change"],
            silent: true,
        },
        Twin {
            name: "a src_crs that repeats the recorded CRS overrides nothing",
            domain: "crs_datum",
            facts: vector_reproject(
                Some(utm33()),
                wgs84(),
                None,
                json!({"input": "w.gpkg", "output": "o.gpkg", "dst_crs": "EPSG:4326", "src_crs": "EPSG:32633"}),
            ),
            absent: &["source_crs_overridden", "source_crs_assigned"],
            silent: false,
        },
        Twin {
            name: "an input with a recorded CRS and no src_crs",
            domain: "crs_datum",
            facts: vector_reproject(Some(utm33()), wgs84(), None, to_wgs84()),
            absent: &[
                "source_crs_assigned",
                "source_crs_overridden",
                "source_crs_unidentified",
            ],
            silent: false,
        },
        Twin {
            name: "zones and raster in one CRS",
            domain: "crs_datum",
            facts: zonal_call_with_zones(Some(utm33())),
            absent: &["crs_missing"],
            silent: true,
        },
        Twin {
            name: "a Helmert transformation inside its area of use",
            domain: "crs_datum",
            facts: nad27_to_wgs84(helmert()),
            absent: &[
                "ballpark_operation",
                "unknown_accuracy",
                "outside_area_of_use",
                "missing_grids",
                "better_operation_used",
            ],
            silent: false,
        },
        // Issue 18: a DEM in EPSG:4326 reprojected to the adjacent UTM zone was critical, with
        // "accuracy unknown" and "outside the area of use". It is a conversion: exact.
        Twin {
            name: "geographic DEM to the adjacent UTM zone (a conversion)",
            domain: "crs_datum",
            facts: dem_4326_to(utm34(), conversion("UTM zone 34N")),
            absent: &[
                "outside_area_of_use",
                "unknown_accuracy",
                "ballpark_operation",
                "geographic_target",
            ],
            silent: false,
        },
        // Issue 18: the UTM zone at its central meridian distorts by its k0 (0.04 %, areas
        // 0.08 %): the target CRS stays a judgment call, but no distortion is said.
        Twin {
            name: "a conversion to the UTM zone at its central meridian",
            domain: "crs_datum",
            facts: converted_to(utm33(), 0.0008, 0.0004, (15.0, 47.0)),
            absent: &[
                "target_distortion",
                "unknown_accuracy",
                "outside_area_of_use",
            ],
            silent: false,
        },
        Twin {
            name: "UTM 33N to UTM 34N (two conversions)",
            domain: "crs_datum",
            facts: {
                let mut f = vector_reproject(
                    Some(utm33()),
                    utm34(),
                    Some(conversion("Inverse of UTM zone 33N + UTM zone 34N")),
                    json!({"input": "w.gpkg", "output": "o.gpkg", "dst_crs": "EPSG:32634"}),
                );
                f.datasets[0].crs = Some(utm33());
                f
            },
            absent: &["outside_area_of_use", "unknown_accuracy"],
            silent: false,
        },
        Twin {
            name: "a projected DEM in metres",
            domain: "crs_datum",
            facts: terrain_call(
                raster_dataset("input", Some(utm33()), raster(false)),
                json!({"operation": "slope"}),
            ),
            absent: &[
                "geographic_dem_unscaled",
                "geographic_dem_scaled",
                "geographic_dem_aspect",
                "unit_mismatch",
            ],
            silent: true,
        },
        Twin {
            name: "a geographic DEM with scale",
            domain: "crs_datum",
            facts: terrain_call(
                geographic_dem(),
                json!({"operation": "slope", "scale": 111120}),
            ),
            absent: &["geographic_dem_unscaled"],
            silent: false,
        },
        Twin {
            name: "TRI on a geographic DEM",
            domain: "crs_datum",
            facts: terrain_call(geographic_dem(), json!({"operation": "tri"})),
            absent: &["geographic_dem_unscaled", "geographic_dem_aspect"],
            silent: true,
        },
        // Attack round 13, R13-B1: heights declared in the CRS's own unit (ftUS in a ftUS
        // State Plane CRS) need no scale; the host applies ratio 1.
        Twin {
            name: "a DEM in feet whose band declares US survey feet",
            domain: "crs_datum",
            facts: terrain_call(
                raster_dataset("input", Some(feet_crs()), {
                    let mut dem = raster(false);
                    dem.bands = vec![gdal_mcp::gdal::facts::BandFacts {
                        unit: Some("US survey foot".to_string()),
                        ..Default::default()
                    }];
                    dem
                }),
                json!({"operation": "slope"}),
            ),
            absent: &["unit_mismatch"],
            silent: true,
        },
        Twin {
            name: "a DEM in feet with its scale",
            domain: "crs_datum",
            facts: terrain_call(
                raster_dataset("input", Some(feet_crs()), raster(false)),
                json!({"operation": "slope", "scale": 1.0}),
            ),
            absent: &["unit_mismatch"],
            silent: true,
        },
        Twin {
            name: "a DEM without CRS with its scale",
            domain: "crs_datum",
            facts: terrain_call(
                raster_dataset("input", None, raster(false)),
                json!({"operation": "slope", "scale": 1.0}),
            ),
            absent: &["dem_crs_missing"],
            silent: true,
        },
        Twin {
            name: "reprojection to a projected target",
            domain: "crs_datum",
            facts: {
                let mut f = Case::reproject(
                    "r",
                    json!({"dst_crs": "EPSG:32633", "resampling": "bilinear"}),
                )
                .facts();
                f.datasets[0].crs = Some(wgs84());
                f.target_crs = Some(utm33());
                f
            },
            absent: &["geographic_target"],
            silent: false,
        },
        // ---- resampling
        Twin {
            name: "a conversion that changes no grid",
            domain: "resampling",
            facts: call(
                "raster_convert",
                json!({"format": "GTiff"}),
                vec![raster_dataset("input", Some(utm33()), raster(false))],
            ),
            absent: &["continuous_input"],
            silent: true,
        },
        Twin {
            name: "nearest on classes",
            domain: "resampling",
            facts: Case {
                categorical: true,
                ..Case::reproject(
                    "r",
                    json!({"dst_crs": "EPSG:4326", "resampling": "nearest"}),
                )
            }
            .facts(),
            absent: &["categorical_input"],
            silent: false,
        },
        Twin {
            name: "bilinear on a continuous surface",
            domain: "resampling",
            facts: Case::reproject(
                "r",
                json!({"dst_crs": "EPSG:4326", "resampling": "bilinear"}),
            )
            .facts(),
            absent: &["categorical_input", "class_preserving_method"],
            silent: false,
        },
        // ---- hydrology
        Twin {
            name: "not a DEM tool",
            domain: "hydrology",
            facts: call(
                "raster_resample",
                json!({"resampling": "bilinear"}),
                vec![raster_dataset("input", Some(utm33()), raster(false))],
            ),
            absent: &[
                "depression_handling",
                "routing_method",
                "stream_threshold",
                "pour_points",
            ],
            silent: true,
        },
        Twin {
            name: "D8 on a DEM that drains",
            domain: "hydrology",
            facts: dem_call(
                "dem_flow_direction",
                json!({"algorithm": "d8"}),
                Some(0.05),
                None,
            ),
            absent: &[
                "flat_fraction",
                "geographic_dem",
                "undeclared_sentinels",
                "upstream_interpolation",
            ],
            silent: false,
        },
        Twin {
            name: "D-infinity on a flat DEM",
            domain: "hydrology",
            facts: flat_d8_resolved,
            absent: &["flat_fraction"],
            silent: false,
        },
        Twin {
            name: "a DEM resampled upstream with nearest, same CRS",
            domain: "hydrology",
            facts: dem_call(
                "dem_condition",
                json!({"method": "fill"}),
                None,
                Some(resampled("nearest")),
            ),
            absent: &["upstream_interpolation"],
            silent: false,
        },
        // ---- aggregation
        Twin {
            name: "not an aggregation",
            domain: "aggregation",
            facts: call(
                "raster_resample",
                json!({"resampling": "average"}),
                vec![raster_dataset("input", Some(utm33()), raster(false))],
            ),
            absent: &["zonal_method", "composite_method", "aggregate_method"],
            silent: true,
        },
        Twin {
            name: "majority of classes",
            domain: "aggregation",
            facts: zonal_call(json!(["majority"]), "cell_centre", true, "Polygon", None),
            absent: &["categorical_mean", "upstream_interpolated_classes"],
            silent: false,
        },
        Twin {
            name: "mean of a surface",
            domain: "aggregation",
            facts: zonal_call(json!(["mean"]), "cell_centre", false, "Polygon", None),
            absent: &["categorical_mean"],
            silent: false,
        },
        Twin {
            name: "sum with coverage semantics",
            domain: "aggregation",
            facts: zonal_call(json!(["sum"]), "coverage", false, "Polygon", None),
            absent: &["all_touched_sum"],
            silent: false,
        },
        Twin {
            name: "cell-centre statistics of line zones",
            domain: "aggregation",
            facts: zonal_call(json!(["mean"]), "cell_centre", false, "Line String", None),
            absent: &["coverage_without_area"],
            silent: false,
        },
        Twin {
            name: "block sum of Float32",
            domain: "aggregation",
            facts: aggregate_call("sum", "Float32"),
            absent: &["block_sum_saturates"],
            silent: false,
        },
        Twin {
            name: "majority of classes resampled upstream with nearest",
            domain: "aggregation",
            facts: zonal_call(
                json!(["majority"]),
                "cell_centre",
                true,
                "Polygon",
                Some(resampled("nearest")),
            ),
            absent: &["upstream_interpolated_classes"],
            silent: false,
        },
        // ---- measurement
        Twin {
            name: "planar figures within 1 %",
            domain: "measurement",
            facts: measure(planar(0.004)),
            absent: &["planar_distortion"],
            silent: true,
        },
        Twin {
            name: "valid polygons",
            domain: "measurement",
            facts: measure(measurement_facts("geodesic")),
            absent: &["invalid_geometries", "geometries_repaired"],
            silent: true,
        },
        Twin {
            name: "a join over disjoint polygons (overlaps checked: none)",
            domain: "measurement",
            facts: measuring(
                "vector_join",
                json!({"predicate": "intersects", "fields": ["pop"], "stats": ["sum"]}),
                MeasurementFacts {
                    overlapping_pairs: Some(0),
                    overlap_area_m2: Some(0.0),
                    ..measurement_facts("geodesic")
                },
            ),
            absent: &["overlapping_features"],
            silent: true,
        },
        // Issue 18: the host settles Z, means and vector_measure's overlaps by arguments
        // (`data_conflict` when the candidates differ); the domain has no rule left for them,
        // so even the facts that once raised them raise nothing.
        Twin {
            name: "facts the host settles (Z, unweighted means, overlaps in a measure)",
            domain: "measurement",
            facts: measure(MeasurementFacts {
                z_ignored: true,
                unweighted_means: vec!["rate:mean".to_string()],
                overlapping_pairs: Some(3),
                overlap_area_m2: Some(120.0),
                geometry_kinds: vec!["line".to_string()],
                ..measurement_facts("geodesic")
            }),
            absent: &["z_ignored", "unweighted_means", "overlapping_features"],
            silent: true,
        },
        Twin {
            name: "a layer in metres",
            domain: "measurement",
            facts: measure(planar(0.004)),
            absent: &[
                "non_metre_unit",
                "distance_unit_conversion",
                "mixed_geometries",
            ],
            silent: true,
        },
    ]
}

/// Issue 18, rule 4: every built-in rule has a clean twin on which it stays silent.
#[test]
fn every_rule_stays_silent_on_its_clean_twin() {
    let registry = registry();
    for twin in twins() {
        let name = format!("{} / {}", twin.domain, twin.name);
        let trigger = trigger_of(&registry, twin.domain, &twin.facts);
        let ids: Vec<&str> = trigger
            .as_ref()
            .map(|t| t.evidence.iter().map(|e| e.id.as_str()).collect())
            .unwrap_or_default();
        for absent in twin.absent {
            assert!(!ids.contains(absent), "{name}: {absent} fires: {ids:?}");
        }
        if twin.silent {
            assert!(trigger.is_none(), "{name}: gated: {ids:?}");
        }
    }
}

/// Issue 18: a DEM in geographic coordinates reprojected to the UTM zone next to it was
/// critical, "accuracy unknown" and "outside the area of use". A conversion is exact: the
/// target CRS stays a required judgment call, graded by no accuracy.
#[test]
fn a_projection_conversion_is_required_and_never_said_to_be_of_unknown_accuracy() {
    let registry = registry();
    let mut facts = call(
        "raster_reproject",
        json!({"input": "dem.tif", "output": "o.tif", "dst_crs": "EPSG:32634", "resampling": "bilinear"}),
        vec![geographic_dem()],
    );
    facts.target_crs = Some(utm34());
    facts.transformation = Some(conversion("UTM zone 34N"));
    let trigger =
        trigger_of(&registry, "crs_datum", &facts).expect("the target CRS is a judgment call");
    assert_eq!(trigger.severity, Severity::Required, "{}", trigger.reason);
    let ids: Vec<&str> = trigger.evidence.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["crs_change"]);
    let fact = &trigger.evidence[0].fact;
    assert!(
        !fact.contains("accuracy unknown") && fact.contains("conversion"),
        "{fact}"
    );
    assert!(
        !trigger.reason.contains("area of use"),
        "{}",
        trigger.reason
    );
    // Cached per decision: the key names the CRSs and the operation, no numbers or paths.
    assert_eq!(
        trigger.key_fields,
        json!({"operation": "reproject", "src_crs": "EPSG:4326", "src_crs_assigned": false,
               "dst_crs": "EPSG:32634", "transformation": "UTM zone 34N"})
    );
    // The same facts across a datum change (NAD27 to WGS 84 without published accuracy) are a
    // datum transformation of unknown accuracy, and outside its area of use: critical.
    let mut datum = nad27_to_wgs84(conversion("NAD27 to WGS 84 (X)"));
    datum.tool = "vector_reproject".to_string();
    let trigger = trigger_of(&registry, "crs_datum", &datum).expect("gated");
    assert_eq!(trigger.severity, Severity::Critical);
    let ids: Vec<&str> = trigger.evidence.iter().map(|e| e.id.as_str()).collect();
    assert!(
        ids.contains(&"unknown_accuracy") && ids.contains(&"outside_area_of_use"),
        "{ids:?}"
    );
}
