//! The query family: `raster_sample` (values at points) and `vector_query` (attribute values
//! of the features a filter selects). Both only read; their inputs are confined like every
//! other tool's, and their results are bounded in rows and bytes.

use crate::gdal::raster::sample::{self, Points, SampleOutput, SampleRequest};
use crate::gdal::vector::query::{self, Measure, QueryOutput, QueryRequest};
use crate::server::args::{band_numbers, parse};
use crate::server::call::Call;
use crate::server::error::ToolError;
use crate::server::gated;
use crate::server::tool::{handler, Effect, Family, Schemas, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Arguments of `raster_sample`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleArgs {
    /// Raster inside a workspace.
    pub input: String,
    /// Points as [x, y] (x = easting or longitude), in `crs`. Excludes `points`.
    pub coordinates: Option<Vec<[f64; 2]>>,
    /// A point layer inside a workspace. Excludes `coordinates`.
    pub points: Option<String>,
    /// Layer of `points` (needed when it has several).
    pub layer: Option<String>,
    /// CRS of `coordinates` (default: the raster's), or of a `points` layer without one.
    pub crs: Option<String>,
    /// 1-based bands (default: all).
    pub bands: Option<Vec<u32>>,
}

/// `raster_sample`, as the tool table lists it.
pub const RASTER_SAMPLE: ToolSpec = ToolSpec {
    name: "raster_sample",
    family: Family::Query,
    title: "Sample a raster at points",
    verb: "Sampled",
    description: "Band values at points (coordinates in a `crs`, or a point layer): \
        scale/offset applied, nodata as null, each point's cell (row, column, centre, \
        corner). Points outside are reported, not clamped.",
    effect: Effect::ReadOnly,
    opens_rasters: true,
    raster_output: None,
    schemas: Schemas::plain::<SampleArgs, crate::gdal::raster::sample::SampleOutput>(),
    handler: handler!(raster_sample),
};

/// `raster_sample`.
pub async fn raster_sample(call: Call) -> Result<Value, ToolError> {
    let args: SampleArgs = parse(call.tool, &call.arguments)?;
    let points = match (args.coordinates, args.points) {
        (Some(_), Some(_)) => {
            return Err(ToolError::Arguments(
                "coordinates and points are mutually exclusive: give coordinates, or a point \
                 layer"
                    .to_string(),
            ))
        }
        (None, None) => {
            return Err(ToolError::Arguments(
                "give `coordinates` ([[x, y], ...]) or `points` (a point layer) to sample at"
                    .to_string(),
            ))
        }
        (Some(coordinates), None) => {
            if args.layer.is_some() {
                return Err(ToolError::Arguments(
                    "layer: only with `points` (a layer of a point dataset)".to_string(),
                ));
            }
            if coordinates.is_empty() || coordinates.len() > sample::MAX_POINTS {
                return Err(ToolError::Arguments(format!(
                    "coordinates: give 1 to {} points (got {})",
                    sample::MAX_POINTS,
                    coordinates.len()
                )));
            }
            // A coordinate no CRS has (a fill value or a mis-scaled number) is refused: GDAL
            // 3.6's Web Mercator shortcut looped for good on x = 3.4e38 (attack round 19,
            // R19-C2).
            let limit = crate::gdal::facts::transform::MAX_BOUNDS_COORDINATE;
            if let Some(point) = coordinates
                .iter()
                .find(|p| !p.iter().all(|v| v.is_finite() && v.abs() <= limit))
            {
                return Err(ToolError::Arguments(format!(
                    "coordinates: [{}, {}] is no place in any CRS (at most {limit:e} in \
                     magnitude); check the point's units and order",
                    point[0], point[1]
                )));
            }
            Points::Coordinates {
                coordinates,
                crs: args.crs,
            }
        }
        (None, Some(points)) => Points::Layer {
            path: call.input_path("points", &points)?,
            layer: args.layer,
            crs: args.crs,
        },
    };
    let input = call.input_path("input", &args.input)?;
    let request = SampleRequest {
        points,
        bands: band_numbers(args.bands),
    };
    let policy = call.app.gate.policy().cloned();
    gated::read_only(&call, move || -> Result<SampleOutput, ToolError> {
        let output = sample::sample(&input, &request)?;
        if let Some(policy) = &policy {
            refuse_by_policy(policy, &output)?;
        }
        Ok(output)
    })
    .await
}

/// The operator's policy over the coordinate operation `raster_sample` ran for the caller
/// (attack round 6, R6-2: "ballpark coordinate operations are refused" stopped
/// `raster_reproject` and every gated tool, while `raster_sample` ran the same ballpark and
/// answered). The operation is put to the policy as the `crs_datum` domain would find it in a
/// gated call (a critical `ballpark_operation`, with the call's facts), and a `refuse` or
/// `human` outcome (a sign-off a read cannot carry) refuses the call, naming the rule; no rule
/// matching leaves today's warning. Nothing is answered from the values sampled.
fn refuse_by_policy(
    policy: &crate::reflection::policy::Policy,
    output: &SampleOutput,
) -> Result<(), ToolError> {
    use crate::domains::{EvidenceItem, Severity, Trigger};
    use crate::reflection::policy::{Facts, Outcome};
    let Some(transformation) = output.transformation.as_ref().filter(|t| t.used.ballpark) else {
        return Ok(());
    };
    let fact = format!(
        "the operation from the points' CRS to the raster's ({}) is a ballpark one",
        transformation.used.name
    );
    let trigger = Trigger {
        severity: Severity::Critical,
        reason: fact.clone(),
        key_fields: serde_json::json!({}),
        prompt_arguments: Vec::new(),
        evidence: vec![EvidenceItem {
            id: "ballpark_operation".to_string(),
            fact: fact.clone(),
            why: "points may land in a neighbouring cell".to_string(),
            alternative: None,
            relaxable: false,
        }],
        // PROJ reports the operation as ballpark: measured, not inferred.
        confidence: Some(1.0),
    };
    let facts = Facts {
        accuracy_m: transformation.used.accuracy_metres,
        ballpark: Some(true),
        cells: Some(output.width as f64 * output.height as f64),
        ..Facts::default()
    };
    let ruling = policy.rule_on("raster_sample", "crs_datum", &trigger, &facts);
    if ruling.outcome < Outcome::Human {
        return Ok(());
    }
    Err(ToolError::Arguments(format!(
        "refused by the operator's policy ({}, rule {}: {}): {fact}, and {}. Give the points \
         in the raster's CRS (vector_reproject them first, through an operation the policy \
         accepts), or ask the operator",
        policy.path.display(),
        ruling.rule.as_deref().unwrap_or("?"),
        ruling.outcome.name(),
        ruling.explanation
    )))
}

/// Arguments of `vector_query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryArgs {
    /// Vector dataset inside a workspace.
    pub input: String,
    /// Layer (needed when the dataset has several).
    pub layer: Option<String>,
    /// Filter, e.g. `code = 'P-7' AND area > 10`: fields, literals, = <> < <= > >=, [NOT]
    /// LIKE/ILIKE, [NOT] IN (...), IS [NOT] NULL, AND, OR, NOT, parentheses.
    #[serde(rename = "where")]
    pub filter: Option<String>,
    /// Fields to return (default: all).
    pub fields: Option<Vec<String>>,
    /// A field to sort by, optionally followed by ASC or DESC.
    pub order_by: Option<String>,
    /// Rows to return (default 100, at most 1000).
    pub limit: Option<u32>,
    /// Per feature: area (m²), length (m), centroid; geodesic in a geographic CRS, planar in
    /// a projected one.
    pub measures: Option<Vec<Measure>>,
}

/// `vector_query`, as the tool table lists it.
pub const VECTOR_QUERY: ToolSpec = ToolSpec {
    name: "vector_query",
    family: Family::Query,
    title: "Query attribute values",
    verb: "Queried",
    description: "Attribute values of the features a `where` filter selects (fields, \
        order_by, limit; optional area, length, centroid): bounded, with the count \
        matched.",
    effect: Effect::ReadOnly,
    opens_rasters: false,
    raster_output: None,
    schemas: Schemas::plain::<QueryArgs, crate::gdal::vector::query::QueryOutput>(),
    handler: handler!(vector_query),
};

/// `vector_query`.
pub async fn vector_query(call: Call) -> Result<Value, ToolError> {
    let args: QueryArgs = parse(call.tool, &call.arguments)?;
    let limit = args.limit.unwrap_or(query::DEFAULT_LIMIT as u32) as usize;
    if limit == 0 || limit > query::MAX_LIMIT {
        return Err(ToolError::Arguments(format!(
            "limit: from 1 to {} rows (got {limit})",
            query::MAX_LIMIT
        )));
    }
    if let Some(filter) = &args.filter {
        if filter.chars().count() > query::MAX_FILTER_CHARS {
            return Err(ToolError::Arguments(format!(
                "where: at most {} characters (got {})",
                query::MAX_FILTER_CHARS,
                filter.chars().count()
            )));
        }
    }
    let input = call.input_path("input", &args.input)?;
    let request = QueryRequest {
        layer: args.layer,
        filter: args.filter,
        fields: args.fields,
        order_by: args.order_by,
        limit,
        measures: args.measures.unwrap_or_default(),
    };
    gated::read_only(&call, move || -> Result<QueryOutput, ToolError> {
        Ok(query::query(&input, &request)?)
    })
    .await
}
