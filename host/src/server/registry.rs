//! The tool table: one ordered list from which both `tools/list` and dispatch are derived, so a
//! tool cannot be listed without being callable, or the reverse.
//!
//! An entry names the tool, its family, its model-facing description, its argument and result
//! types (whose schemas `server::schema` builds), its annotations and its handler. Adding a tool
//! means adding its handler in its family file and one entry here (see "Adding a tool" in
//! `docs/architecture.md`).

use super::call::Call;
use super::error::ToolError;
use super::gated::Gated;
use super::schema;
use super::tools::{
    aggregate, analysis, convert, dem, justify, query, raster, vector, RasterOutput,
};
use crate::reflection::gate::Stored;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

/// The future a handler returns.
pub type Reply = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>;

/// A tool's handler.
pub type Handler = fn(Call) -> Reply;

/// Which family file a tool lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Raster,
    Convert,
    Vector,
    Aggregate,
    Analysis,
    Dem,
    Justify,
    Query,
}

/// What a tool does to the filesystem, as MCP annotations say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    ReadOnly,
    /// Writes new files; replaces one only with `overwrite`.
    Writes,
    /// Stores a justification capsule.
    Stores,
}

/// One entry of the table.
pub struct ToolSpec {
    pub name: &'static str,
    pub family: Family,
    pub title: &'static str,
    pub description: &'static str,
    pub effect: Effect,
    /// Whether the reflection gate sees the call (it then takes `justification`).
    pub gated: bool,
    /// Whether the tool opens rasters (it then takes `georef_source`).
    pub opens_rasters: bool,
    pub input: fn() -> Arc<JsonObject>,
    pub output: fn() -> Arc<JsonObject>,
    pub handler: Handler,
}

impl ToolSpec {
    /// The MCP tool definition.
    pub fn definition(&self) -> Tool {
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = Some(self.effect == Effect::ReadOnly);
        annotations.destructive_hint = Some(self.effect == Effect::Writes);
        annotations.idempotent_hint = Some(true);
        annotations.open_world_hint = Some(false);
        let input = if self.opens_rasters {
            schema::with_georef_source((self.input)())
        } else {
            (self.input)()
        };
        Tool::new(self.name, self.description, input)
            .with_title(self.title)
            .with_raw_output_schema((self.output)())
            .with_annotations(annotations)
    }
}

macro_rules! handler {
    ($path:path) => {{
        fn handle(call: Call) -> Reply {
            Box::pin($path(call))
        }
        handle as Handler
    }};
}

/// The tools, in the order they are listed.
pub fn table() -> &'static [ToolSpec] {
    static TABLE: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// The published definitions, in table order (built once).
pub fn definitions() -> &'static [Tool] {
    static DEFINITIONS: OnceLock<Vec<Tool>> = OnceLock::new();
    DEFINITIONS.get_or_init(|| table().iter().map(ToolSpec::definition).collect())
}

/// The entry for a tool name.
pub fn find(name: &str) -> Option<&'static ToolSpec> {
    table().iter().find(|t| t.name == name)
}

fn build() -> Vec<ToolSpec> {
    use Effect::*;
    use Family::*;
    vec![
        ToolSpec {
            name: "raster_info",
            family: Raster,
            title: "Raster info",
            description: "Describe a raster: size, bands, types, nodata, CRS, georeferencing \
                (`gdalinfo -json`) plus the facts the methodology domains use. `stats` adds \
                exact per-band statistics.",
            effect: ReadOnly,
            gated: false,
            opens_rasters: true,
            input: schema::input::<raster::InfoArgs>,
            output: schema::output::<raster::InfoOutput>,
            handler: handler!(raster::info),
        },
        ToolSpec {
            name: "raster_reproject",
            family: Raster,
            title: "Reproject raster",
            description: "Reproject and/or regrid a raster with gdalwarp, through the most \
                accurate PROJ operation available (reported, with the gdalwarp command). Gated \
                by crs_datum and resampling.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<raster::ReprojectArgs>,
            output: schema::output::<Gated<raster::ReprojectOutput>>,
            handler: handler!(raster::reproject),
        },
        ToolSpec {
            name: "persist_justification",
            family: Justify,
            title: "Persist justification",
            description: "Store a justification for a decision a gated tool refused, with the \
                `domain` and `key` from that refusal; then retry the call unchanged.",
            effect: Stores,
            gated: false,
            opens_rasters: false,
            input: schema::input::<justify::PersistArgs>,
            output: schema::output::<Stored>,
            handler: handler!(justify::persist),
        },
        ToolSpec {
            name: "provenance_report",
            family: Justify,
            title: "Provenance report",
            description: "How a file was made, from lineage records: steps, parameters, \
                decisions, versions, edits outside the server. Markdown methods or W3C PROV-JSON.",
            effect: ReadOnly,
            gated: false,
            opens_rasters: false,
            input: schema::input::<justify::ProvenanceArgs>,
            output: schema::output::<crate::reflection::provenance::Report>,
            handler: handler!(justify::provenance_report),
        },
        ToolSpec {
            name: "raster_stats",
            family: Raster,
            title: "Raster statistics",
            description: "Per-band statistics in physical values (scale and offset applied): \
                counts, min, max, mean, std, exact percentiles, histogram. `sample` reads at \
                most 2^20 cells.",
            effect: ReadOnly,
            gated: false,
            opens_rasters: true,
            input: schema::input::<raster::StatsArgs>,
            output: schema::output::<raster::StatsOutput>,
            handler: handler!(raster::statistics),
        },
        ToolSpec {
            name: "raster_sample",
            family: Query,
            title: "Sample a raster at points",
            description: "Band values at points (coordinates in a `crs`, or a point layer): \
                scale/offset applied, nodata as null, each point's cell (row, column, centre, \
                corner). Points outside are reported, not clamped.",
            effect: ReadOnly,
            gated: false,
            opens_rasters: true,
            input: schema::input::<query::SampleArgs>,
            output: schema::output::<crate::gdal::sample::SampleOutput>,
            handler: handler!(query::raster_sample),
        },
        ToolSpec {
            name: "raster_convert",
            family: Convert,
            title: "Convert a raster",
            description: "Convert a raster with gdal_translate (GTiff, COG, PNG, JPEG, WEBP, \
                GPKG...): compression, tiling, bands, type, scaling, nodata, overviews. Gated \
                by format_selection and resampling.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<convert::ConvertArgs>,
            output: schema::output::<Gated<RasterOutput>>,
            handler: handler!(convert::convert),
        },
        ToolSpec {
            name: "raster_resample",
            family: Raster,
            title: "Resample a raster",
            description: "Change a raster's resolution or pixel count without changing its CRS \
                (gdalwarp). Gated by resampling.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<raster::ResampleArgs>,
            output: schema::output::<Gated<RasterOutput>>,
            handler: handler!(raster::resample),
        },
        ToolSpec {
            name: "raster_overviews",
            family: Raster,
            title: "Build overviews",
            description: "Build overviews (gdaladdo) as an external `<input>.ovr` (the input is \
                not modified) or into a new GeoTIFF `output`. Gated by resampling.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<raster::OverviewsArgs>,
            output: schema::output::<Gated<RasterOutput>>,
            handler: handler!(raster::build_overviews),
        },
        ToolSpec {
            name: "raster_terrain",
            family: Raster,
            title: "Terrain derivatives",
            description: "Slope, aspect, hillshade, TRI, TPI or roughness of a DEM (gdaldem), \
                with unit ratios and band scale taken from the data (or asked for).",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<raster::TerrainArgs>,
            output: schema::output::<Gated<RasterOutput>>,
            handler: handler!(raster::terrain),
        },
        ToolSpec {
            name: "raster_calc",
            family: Raster,
            title: "Band math",
            description: "Band math over rasters on one grid, block by block: scale/offset \
                applied, nodata propagated, explicit output type (values that do not fit are \
                an error).",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<raster::CalcArgs>,
            output: schema::output::<Gated<crate::gdal::calc::CalcOutput>>,
            handler: handler!(raster::calc),
        },
        ToolSpec {
            name: "vector_info",
            family: Vector,
            title: "Vector info",
            description: "Describe a vector dataset: driver and, per layer, geometry type, \
                feature count, extent, CRS and fields.",
            effect: ReadOnly,
            gated: false,
            opens_rasters: false,
            input: schema::input::<vector::VectorInfoArgs>,
            output: schema::output::<vector::VectorInfoOutput>,
            handler: handler!(vector::info),
        },
        ToolSpec {
            name: "vector_query",
            family: Query,
            title: "Query attribute values",
            description: "Attribute values of the features a `where` filter selects (fields, \
                order_by, limit; optional area, length, centroid): bounded, with the count \
                matched.",
            effect: ReadOnly,
            gated: false,
            opens_rasters: false,
            input: schema::input::<query::QueryArgs>,
            output: schema::output::<crate::gdal::query::QueryOutput>,
            handler: handler!(query::vector_query),
        },
        ToolSpec {
            name: "vector_reproject",
            family: Vector,
            title: "Reproject vector data",
            description: "Reproject vector layers (ogr2ogr -t_srs). Gated by crs_datum, which \
                sees the PROJ operation (accuracy, ballpark, missing grids).",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<vector::VectorReprojectArgs>,
            output: schema::output::<Gated<vector::VectorOutput>>,
            handler: handler!(vector::reproject),
        },
        ToolSpec {
            name: "vector_convert",
            family: Vector,
            title: "Convert vector data",
            description: "Convert vector layers between formats (GPKG, GeoJSON, FlatGeobuf, \
                Shapefile, CSV, KML, GML...) with dataset and layer options. Gated by \
                format_selection.",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<vector::VectorConvertArgs>,
            output: schema::output::<Gated<vector::VectorOutput>>,
            handler: handler!(vector::convert),
        },
        ToolSpec {
            name: "vector_clip",
            family: Vector,
            title: "Clip vector data",
            description: "Clip vector layers to `bounds` or to the polygons of a `mask` dataset. \
                A mask in another CRS is reprojected by the host (gated by crs_datum).",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<vector::VectorClipArgs>,
            output: schema::output::<Gated<vector::VectorOutput>>,
            handler: handler!(vector::clip),
        },
        ToolSpec {
            name: "points_from_table",
            family: Vector,
            title: "Points from a table",
            description: "A point layer from a CSV/XLSX/ODS table's coordinate columns, in the \
                CRS you name, or lines/polygons from vertex rows (`geometry`, `group_by`, \
                `order_by`). Strict: decimal commas, bad DMS parts and out-of-range values are \
                errors naming the row; ID-like columns keep leading zeros.",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<vector::PointsArgs>,
            output: schema::output::<Gated<crate::gdal::table::TableOutput>>,
            handler: handler!(vector::points_from_table),
        },
        ToolSpec {
            name: "vector_measure",
            family: Analysis,
            title: "Measure vector data",
            description: "Areas, perimeters, lengths and counts per feature, per group and in \
                total: geodesic on the ellipsoid, or planar in a projected CRS. Reports invalid \
                geometries and overlaps. Gated by measurement.",
            effect: ReadOnly,
            gated: true,
            opens_rasters: false,
            input: schema::input::<analysis::MeasureArgs>,
            output: schema::output::<Gated<crate::gdal::measure::MeasureOutput>>,
            handler: handler!(analysis::measure),
        },
        ToolSpec {
            name: "vector_buffer",
            family: Analysis,
            title: "Buffer vector data",
            description: "Buffer features by a distance with explicit units: geodesic (true \
                metres around each feature, any CRS) or planar in a projected CRS. Gated by \
                measurement.",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<analysis::BufferArgs>,
            output: schema::output::<Gated<crate::gdal::analysis::BufferOutput>>,
            handler: handler!(analysis::buffer),
        },
        ToolSpec {
            name: "vector_overlay",
            family: Analysis,
            title: "Overlay two layers",
            description: "Intersection, difference, union, symmetric difference or identity of \
                two layers, attributes from both (overlay_ prefix). Another CRS is reprojected \
                by the host (crs_datum); an empty result says why.",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<analysis::OverlayArgs>,
            output: schema::output::<Gated<crate::gdal::analysis::OverlayOutput>>,
            handler: handler!(analysis::overlay),
        },
        ToolSpec {
            name: "vector_join",
            family: Analysis,
            title: "Join two layers",
            description: "Spatial join (predicate, dwithin a distance, or nearest: geodesic \
                metres, ties all joined; gives Voronoi assignment) or attribute join \
                (key as text) of a source layer onto target features: join_count plus \
                summaries per field. Another CRS is reprojected by the host (crs_datum).",
            effect: Writes,
            gated: true,
            opens_rasters: false,
            input: schema::input::<analysis::JoinArgs>,
            output: schema::output::<Gated<crate::gdal::analysis::JoinOutput>>,
            handler: handler!(analysis::join),
        },
        ToolSpec {
            name: "zonal_stats",
            family: Aggregate,
            title: "Zonal statistics",
            description: "Statistics of a raster band per polygon zone under cell_centre, \
                all_touched or coverage (exact fractions) semantics; optional CSV. Zones in \
                another CRS are reprojected (crs_datum). Gated by aggregation.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<aggregate::ZonalArgs>,
            output: schema::output::<Gated<aggregate::ZonalOutput>>,
            handler: handler!(aggregate::zonal),
        },
        ToolSpec {
            name: "raster_composite",
            family: Aggregate,
            title: "Composite rasters",
            description: "Per-pixel max, min, mean, median, count or sum of the valid values of \
                two or more rasters, on the first input's grid. Gated by aggregation (and \
                resampling).",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<aggregate::CompositeArgs>,
            output: schema::output::<Gated<RasterOutput>>,
            handler: handler!(aggregate::composite),
        },
        ToolSpec {
            name: "raster_aggregate",
            family: Aggregate,
            title: "Aggregate a raster",
            description: "Aggregate to a coarser grid whose cells are exact blocks of `factor` \
                cells (average, sum, min, max, mode, median, quartiles, rms of the valid cells). \
                Gated by aggregation.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<aggregate::AggregateArgs>,
            output: schema::output::<Gated<RasterOutput>>,
            handler: handler!(aggregate::aggregate),
        },
        ToolSpec {
            name: "dem_condition",
            family: Dem,
            title: "Condition a DEM",
            description: "Remove depressions from a projected DEM: Priority-Flood fill (plain or \
                epsilon) or least-cost breaching within limits. Gated by hydrology; progress \
                and cancellation.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<dem::ConditionArgs>,
            output: schema::output::<Gated<dem::DemOutput>>,
            handler: handler!(dem::condition),
        },
        ToolSpec {
            name: "dem_flow_direction",
            family: Dem,
            title: "Flow direction",
            description: "Flow direction from a conditioned DEM: D8 (ESRI, TauDEM or GRASS \
                codes) or D-infinity angles, with flat resolution. Gated by hydrology.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<dem::FlowDirectionArgs>,
            output: schema::output::<Gated<dem::DemOutput>>,
            handler: handler!(dem::flow_direction),
        },
        ToolSpec {
            name: "dem_flow_accumulation",
            family: Dem,
            title: "Flow accumulation",
            description: "Flow accumulation from a conditioned DEM (D8 or D-infinity), in cells \
                or area, optionally weighted. Gated by hydrology.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<dem::FlowAccumulationArgs>,
            output: schema::output::<Gated<dem::DemOutput>>,
            handler: handler!(dem::flow_accumulation),
        },
        ToolSpec {
            name: "dem_streams",
            family: Dem,
            title: "Streams",
            description: "Streams from a conditioned DEM: cells at or above a D8 accumulation \
                threshold, Strahler order, optional stream lines. Gated by hydrology.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<dem::StreamsArgs>,
            output: schema::output::<Gated<dem::DemOutput>>,
            handler: handler!(dem::streams),
        },
        ToolSpec {
            name: "dem_watershed",
            family: Dem,
            title: "Watersheds",
            description: "Watersheds of pour points on a conditioned DEM (D8), optionally \
                snapped to the highest accumulation nearby. Gated by hydrology.",
            effect: Writes,
            gated: true,
            opens_rasters: true,
            input: schema::input::<dem::WatershedArgs>,
            output: schema::output::<Gated<dem::DemOutput>>,
            handler: handler!(dem::watershed),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_and_valid() {
        let mut seen = BTreeSet::new();
        for tool in table() {
            assert!(seen.insert(tool.name), "{} is listed twice", tool.name);
            assert!(
                tool.name.len() <= 64
                    && tool
                        .name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_'),
                "{}",
                tool.name
            );
            assert!(!tool.description.is_empty());
        }
    }

    #[test]
    fn every_input_schema_is_portable_and_gated_tools_take_a_justification() {
        for tool in table() {
            let schema = Value::Object((*(tool.input)()).clone());
            let found = schema::non_portable(&schema);
            assert!(found.is_empty(), "{}: {found:?}", tool.name);
            assert_eq!(schema["type"], "object", "{}", tool.name);
            let takes = schema["properties"].get("justification").is_some();
            assert!(
                takes == tool.gated || tool.family == Family::Justify,
                "{}: gated {} but justification argument {takes}",
                tool.name,
                tool.gated
            );
        }
    }

    #[test]
    fn a_dataset_read_is_called_input_everywhere() {
        for tool in table() {
            let schema = Value::Object((*(tool.input)()).clone());
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if tool.family != Family::Justify {
                assert!(
                    properties.contains_key("input") || properties.contains_key("inputs"),
                    "{} has no `input`",
                    tool.name
                );
            }
            for banned in ["path", "raster", "src", "source", "dst", "out"] {
                assert!(
                    !properties.contains_key(banned),
                    "{} takes `{banned}`",
                    tool.name
                );
            }
        }
    }
}
