//! The tool table: one ordered list from which both `tools/list` and dispatch are derived, so a
//! tool cannot be listed without being callable, or the reverse.
//!
//! Each tool is declared once, beside its handler in its family file (`server::tools::*`, a
//! [`ToolSpec`]); this list only orders them. Adding a tool means its declaration and handler
//! in its family file and one line here (see "Adding a tool" in `docs/architecture.md`).

use super::tool::ToolSpec;
use super::tools::{aggregate, analysis, convert, dem, justify, query, raster, vector};
use crate::config::Toolset;
use rmcp::model::Tool;
use std::sync::OnceLock;

/// The tools, in the order they are listed.
pub fn table() -> &'static [ToolSpec] {
    static TABLE: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    TABLE.get_or_init(|| {
        vec![
            raster::RASTER_INFO,
            raster::RASTER_REPROJECT,
            justify::PERSIST_JUSTIFICATION,
            justify::PROVENANCE_REPORT,
            raster::RASTER_STATS,
            query::RASTER_SAMPLE,
            convert::RASTER_CONVERT,
            raster::RASTER_RESAMPLE,
            raster::RASTER_OVERVIEWS,
            raster::RASTER_TERRAIN,
            raster::RASTER_CALC,
            vector::VECTOR_INFO,
            query::VECTOR_QUERY,
            vector::VECTOR_REPROJECT,
            vector::VECTOR_CONVERT,
            vector::VECTOR_CLIP,
            vector::POINTS_FROM_TABLE,
            analysis::VECTOR_MEASURE,
            analysis::VECTOR_BUFFER,
            analysis::VECTOR_OVERLAY,
            analysis::VECTOR_JOIN,
            aggregate::ZONAL_STATS,
            aggregate::RASTER_COMPOSITE,
            aggregate::RASTER_AGGREGATE,
            dem::DEM_CONDITION,
            dem::DEM_FLOW_DIRECTION,
            dem::DEM_FLOW_ACCUMULATION,
            dem::DEM_STREAMS,
            dem::DEM_WATERSHED,
        ]
    })
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

/// The published definitions of the tools `toolsets` enables (empty: all), in table order.
pub fn definitions_for(toolsets: &[Toolset]) -> Vec<Tool> {
    table()
        .iter()
        .zip(definitions())
        .filter(|(spec, _)| spec.family.enabled_by(toolsets))
        .map(|(_, tool)| tool.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::schema;
    use crate::server::tool::Family;
    use serde_json::Value;
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
            let schema = Value::Object((*(tool.schemas.input)()).clone());
            let found = schema::non_portable(&schema);
            assert!(found.is_empty(), "{}: {found:?}", tool.name);
            assert_eq!(schema["type"], "object", "{}", tool.name);
            let takes = schema["properties"].get("justification").is_some();
            assert!(
                takes == tool.gated() || tool.family == Family::Justify,
                "{}: gated {} but justification argument {takes}",
                tool.name,
                tool.gated()
            );
        }
    }

    /// Regression (issue 19): `provenance::verb` knew 16 of the 22 gated tools by name, so
    /// `raster_calc`, `points_from_table`, `vector_buffer`, `vector_overlay` and `vector_join`
    /// came out of a methods section as "Processed". The verb is now part of the entry.
    #[test]
    fn every_tool_names_what_it_did_with_a_verb_of_its_own() {
        for tool in table() {
            let first = tool.verb.chars().next();
            assert!(
                first.is_some_and(char::is_uppercase) && tool.verb != "Processed",
                "{}: verb {:?}",
                tool.name,
                tool.verb
            );
        }
    }

    /// Tools that are gated (so their steps are recorded and receipted) although no built-in
    /// domain has a rule for them yet, each with why. Adding one here is a decision.
    const SEEN_BY_NO_BUILT_IN_DOMAIN: &[(&str, &str)] = &[(
        "points_from_table",
        "its input is a table, not a dataset the domains' facts describe; the host checks \
         its coordinates itself, and the step is gated so that it is recorded",
    )];

    /// Every gated tool is named by at least one built-in domain's classification, so a tool
    /// added to the table without a domain that looks at it fails here (issue 19).
    #[test]
    fn every_gated_tool_is_named_by_a_built_in_domain() {
        let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
        let mut sources = String::new();
        for domain in std::fs::read_dir(&plugins).unwrap() {
            let src = domain.unwrap().path().join("src");
            let Ok(files) = std::fs::read_dir(&src) else {
                continue;
            };
            if src.parent().and_then(|d| d.file_name()) == Some("sdk".as_ref()) {
                continue;
            }
            for file in files {
                let path = file.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if name.ends_with(".rs") && name != "tests.rs" {
                    sources.push_str(&std::fs::read_to_string(&path).unwrap());
                }
            }
        }
        assert!(
            sources.contains("\"raster_reproject\""),
            "no domain sources read"
        );
        for tool in table().iter().filter(|t| t.gated()) {
            let named = sources.contains(&format!("\"{}\"", tool.name));
            let excused = SEEN_BY_NO_BUILT_IN_DOMAIN
                .iter()
                .any(|(name, _)| *name == tool.name);
            assert!(
                named != excused,
                "{}: named by a domain {named}, listed as seen by none {excused}",
                tool.name
            );
        }
    }

    #[test]
    fn a_dataset_read_is_called_input_everywhere() {
        for tool in table() {
            let schema = Value::Object((*(tool.schemas.input)()).clone());
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

    /// Issue 19: the output fact of a raster-writing call follows from the tool's declaration
    /// (`raster_output`), not from a list of tool names in `gdal::facts::encoding`. Every tool
    /// that declares one gets the fact; the tools that wrote rasters before the declaration
    /// existed declare one; and the encoding module names no tool.
    #[test]
    fn every_tool_declaring_a_raster_output_gets_the_output_fact() {
        use crate::gdal::facts::encoding::output_of_call;
        let declared: Vec<&str> = table()
            .iter()
            .filter(|t| t.raster_output.is_some())
            .map(|t| t.name)
            .collect();
        assert_eq!(
            declared,
            [
                "raster_reproject",
                "raster_convert",
                "raster_resample",
                "raster_overviews",
                "raster_terrain",
                "raster_calc",
                "raster_composite",
                "raster_aggregate"
            ]
        );
        let arguments = serde_json::json!({"input": "in.tif", "output": "out.tif"});
        for tool in table() {
            let Some(write) = tool.raster_output else {
                continue;
            };
            assert!(
                tool.gated(),
                "{} declares a raster output but is not gated",
                tool.name
            );
            let fact = output_of_call(&write, &arguments, &[])
                .unwrap_or_else(|| panic!("{} gets no output fact", tool.name));
            assert_eq!(fact.driver, "GTiff", "{}", tool.name);
            assert!(fact.encoding.is_some(), "{}", tool.name);
        }
        let encoding = include_str!("../gdal/facts/encoding.rs");
        for tool in table() {
            assert!(
                !encoding.contains(&format!("\"{}\"", tool.name)),
                "gdal::facts::encoding names {}",
                tool.name
            );
        }
    }
}
