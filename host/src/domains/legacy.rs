//! The adapter that keeps components built against `gdal-mcp:risk@0.2.x` loading.
//!
//! A 0.2 component sees the 0.2 subset of the facts: no georeferencing, band or geometry
//! facts, a pixel size of (1, 1) for a raster without a geotransform (as 0.2 hosts reported
//! it), and the operation the call *uses* as its transformation. Its triggers carry no
//! evidence, so the host makes one item from the reason ([`super::Domain::classify`]); its
//! `validate` does not see the evidence. Like every trigger from before 0.7, its confidence is
//! unknown and nothing in it is relaxable. Everything else is the same record under another
//! package name.

use super::sandbox::{wit, wit_v0_2 as old};
use super::CallFacts;
use crate::gdal::facts::{CrsFacts, CrsKind};

fn crs(crs: &CrsFacts) -> old::CrsFacts {
    old::CrsFacts {
        id: crs.id.clone(),
        name: crs.name.clone(),
        kind: match crs.kind {
            CrsKind::Geographic => old::CrsKind::Geographic,
            CrsKind::Projected => old::CrsKind::Projected,
            CrsKind::Geocentric => old::CrsKind::Geocentric,
            CrsKind::Local => old::CrsKind::Local,
            CrsKind::Other => old::CrsKind::Other,
        },
        linear_unit: crs.linear_unit.clone(),
        datum: crs.datum.clone(),
        vertical: crs.vertical.clone(),
    }
}

/// The 0.2 view of a call.
pub fn to_call(call: &CallFacts) -> old::ToolCall {
    old::ToolCall {
        tool: call.tool.clone(),
        arguments: call.arguments.to_string(),
        datasets: call
            .datasets
            .iter()
            .map(|d| old::DatasetFacts {
                role: d.role.clone(),
                driver: d.driver.clone(),
                crs: d.crs.as_ref().map(crs),
                raster: d.raster.as_ref().map(|r| old::RasterFacts {
                    width: r.width,
                    height: r.height,
                    band_count: r.band_count,
                    data_types: r.data_types.clone(),
                    nodata: r.nodata.clone(),
                    pixel_size: r.pixel_size.unwrap_or((1.0, 1.0)),
                    looks_categorical: r.looks_categorical,
                    evidence: old::CategoricalEvidence {
                        palette: r.evidence.palette,
                        attribute_table: r.evidence.attribute_table,
                        integer_classes: r.evidence.integer_classes,
                    },
                    flat_fraction: r.flat_fraction,
                }),
                vector: d.vector.as_ref().map(|v| old::VectorFacts {
                    layers: v
                        .layers
                        .iter()
                        .map(|l| old::LayerFacts {
                            name: l.name.clone(),
                            geometry_type: l.geometry_type.clone(),
                            feature_count: l.feature_count,
                        })
                        .collect(),
                }),
            })
            .collect(),
        target_crs: call.target_crs.as_ref().map(crs),
        transformation: call
            .transformation
            .as_ref()
            .map(|t| old::TransformationFacts {
                name: t.used.name.clone(),
                accuracy_metres: t.used.accuracy_metres,
                ballpark: t.used.ballpark,
                missing_grids: t.missing_grids.clone(),
            }),
    }
}

/// A 0.2 trigger as a current one, without evidence.
pub fn from_trigger(trigger: old::Trigger) -> wit::Trigger {
    wit::Trigger {
        severity: match trigger.severity {
            old::Severity::Advisory => wit::Severity::Advisory,
            old::Severity::Required => wit::Severity::Required,
            old::Severity::Critical => wit::Severity::Critical,
        },
        reason: trigger.reason,
        key_fields: trigger.key_fields,
        prompt_arguments: trigger
            .prompt_arguments
            .into_iter()
            .map(|p| wit::PromptValue {
                name: p.name,
                value: p.value,
            })
            .collect(),
        evidence: Vec::new(),
        confidence: None,
    }
}

pub fn prompt_values(values: &[wit::PromptValue]) -> Vec<old::PromptValue> {
    values
        .iter()
        .map(|v| old::PromptValue {
            name: v.name.clone(),
            value: v.value.clone(),
        })
        .collect()
}

pub fn from_field_error(error: old::FieldError) -> wit::FieldError {
    wit::FieldError {
        path: error.path,
        message: error.message,
    }
}

pub fn from_info(info: old::DomainInfo) -> wit::DomainInfo {
    wit::DomainInfo {
        id: info.id,
        version: info.version,
        title: info.title,
        summary: info.summary,
        prompt_name: info.prompt_name,
        prompt_arguments: info
            .prompt_arguments
            .into_iter()
            .map(|a| wit::PromptArgument {
                name: a.name,
                description: a.description,
                required: a.required,
            })
            .collect(),
        methodology: info.methodology,
    }
}
