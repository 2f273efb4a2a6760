//! The query family: `raster_sample` (values at points) and `vector_query` (attribute values
//! of the features a filter selects). Both only read; their inputs are confined like every
//! other tool's, and their results are bounded in rows and bytes.

use crate::gdal::raster::sample::{self, Points, SampleOutput, SampleRequest};
use crate::gdal::vector::query::{self, Measure, QueryOutput, QueryRequest};
use crate::server::args::parse;
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
        bands: args
            .bands
            .unwrap_or_default()
            .into_iter()
            .map(|b| b as usize)
            .collect(),
    };
    gated::read_only(&call, move || -> Result<SampleOutput, ToolError> {
        Ok(sample::sample(&input, &request)?)
    })
    .await
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
