//! The `resampling` risk domain: decisions that move values onto a new pixel grid.
//!
//! Every change of the pixel grid (reprojection, resolution change, overviews, compositing of
//! unlike grids) computes new cell values from old ones, and the method decides what they mean.
//! Interpolating a land-cover class code produces classes that do not exist; nearest neighbour on
//! a continuous surface shifts it by up to half a cell and aliases when downsampling. This domain
//! asks why the method fits the data, and makes an interpolating method on categorical data
//! `critical`.
//!
//! Block aggregation (`raster_aggregate`) is not a resampling decision here: its statistic is
//! the decision, and the `aggregation` domain owns it.

use gdal_mcp_domain_sdk::{
    categorical_evidence, chosen_method, export_domain, field_error, json, names, prompt_argument,
    trigger, Call, Domain, DomainInfo, FieldError, RasterFacts, Severity, Trigger, Value,
};

struct Resampling;

const METHODOLOGY: &str = include_str!("methodology.md");

/// Methods that keep an input cell's value as is (safe for classes).
const CLASS_PRESERVING: &[&str] = &["nearest", "mode"];

/// A grid change found in a call: what it is, the method, and the rasters it reads.
struct GridChange<'a> {
    operation: &'static str,
    method: String,
    rasters: Vec<&'a RasterFacts>,
}

/// The grid change `call` makes, if any.
fn grid_change(call: &Call) -> Option<GridChange<'_>> {
    let input = || call.dataset("input").and_then(|d| d.raster.as_ref());
    let method = |value: Option<&str>| value.unwrap_or("nearest").to_ascii_lowercase();
    let (operation, method, rasters) = match call.tool() {
        "raster_reproject" => (
            "reproject",
            method(call.arg_str("resampling")),
            vec![input()?],
        ),
        "raster_resample" => (
            "resample",
            method(call.arg_str("resampling")),
            vec![input()?],
        ),
        "raster_overviews" => (
            "overviews",
            method(call.arg_str("resampling")),
            vec![input()?],
        ),
        "raster_convert" => {
            // Only a conversion that builds overviews changes a grid.
            let overviews = call.args.get("overviews").filter(|o| o.is_object())?;
            let chosen = overviews.get("resampling").and_then(Value::as_str);
            ("overviews", method(chosen), vec![input()?])
        }
        "raster_composite" => {
            // Inputs on other grids are warped onto the first input's grid.
            if call.arg_str("_grids") != Some("differ") {
                return None;
            }
            let rasters: Vec<&RasterFacts> = call
                .raw
                .datasets
                .iter()
                .filter(|d| d.role.starts_with("input"))
                .filter_map(|d| d.raster.as_ref())
                .collect();
            if rasters.is_empty() {
                return None;
            }
            ("composite", method(call.arg_str("resampling")), rasters)
        }
        _ => return None,
    };
    Some(GridChange {
        operation,
        method,
        rasters,
    })
}

impl Domain for Resampling {
    fn describe() -> DomainInfo {
        let arg = prompt_argument;
        DomainInfo {
            id: "resampling".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            title: "Resampling".to_string(),
            summary: "Changes of the pixel grid: which resampling method, whether it suits \
                      categorical or continuous data, and what it does to values."
                .to_string(),
            prompt_name: "justify_resampling".to_string(),
            prompt_arguments: vec![
                arg("tool", "The tool being called", true),
                arg("method", "The resampling method the call uses", true),
                arg("data", "categorical or continuous", true),
                arg(
                    "evidence",
                    "Why the data looks categorical or continuous",
                    false,
                ),
                arg("reason", "Why the call was flagged", false),
            ],
            methodology: METHODOLOGY.to_string(),
        }
    }

    fn classify(call: &Call) -> Option<Trigger> {
        let GridChange {
            operation,
            method,
            rasters,
        } = grid_change(call)?;
        // Categorical if any raster read looks categorical; the evidence names that raster.
        let shown = rasters
            .iter()
            .find(|r| r.looks_categorical)
            .or_else(|| rasters.first())?;
        let categorical = shown.looks_categorical;
        let evidence = categorical_evidence(shown);
        let data = if categorical {
            "categorical"
        } else {
            "continuous"
        };
        let preserving = CLASS_PRESERVING.contains(&method.as_str());

        let (severity, reason) = match (categorical, preserving) {
            (true, false) => (
                Severity::Critical,
                format!(
                    "{method} resampling mixes class codes of categorical data ({evidence}): it \
                     invents classes that do not exist"
                ),
            ),
            (true, true) => (
                Severity::Advisory,
                format!("{method} keeps class codes intact on categorical data ({evidence})"),
            ),
            (false, _) if operation == "composite" => (
                Severity::Required,
                format!(
                    "the composite's inputs lie on different grids: they are warped onto the \
                     first input's grid with {method}, on continuous data"
                ),
            ),
            (false, _) => (
                Severity::Required,
                format!("{operation} computes new cell values with {method} on continuous data"),
            ),
        };
        Some(trigger(
            severity,
            reason.clone(),
            json!({ "operation": operation, "method": method, "data": data }),
            &[
                ("tool", call.tool().to_string()),
                ("method", method.clone()),
                ("data", data.to_string()),
                ("evidence", evidence),
                ("reason", reason),
            ],
        ))
    }

    fn prompt_template() -> &'static str {
        include_str!("prompt.md")
    }

    fn validate(key_fields: &Value, justification: &Value) -> Vec<FieldError> {
        let method = key_fields
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("");
        match chosen_method(justification) {
            Some(chosen) if names(chosen, method) => Vec::new(),
            Some(chosen) => vec![field_error(
                "/choice/method",
                format!(
                    "the call resamples with \"{method}\", but the choice names \"{chosen}\"; \
                     justify the method this call uses"
                ),
            )],
            None => vec![field_error("/choice/method", "missing")],
        }
    }
}

export_domain!(Resampling);

#[cfg(test)]
mod tests {
    use super::*;
    use gdal_mcp_domain_sdk::testing::{call, raster, raster_dataset, utm33};

    fn classify_with(tool: &str, arguments: Value, categorical: bool) -> Option<Trigger> {
        let data_type = if categorical { "Byte" } else { "Float32" };
        let input = raster_dataset("input", Some(utm33()), raster(data_type, 1, categorical));
        Resampling::classify(&Call::new(call(tool, arguments, vec![input])))
    }

    fn severity(trigger: &Option<Trigger>) -> Option<Severity> {
        trigger.as_ref().map(|t| t.severity)
    }

    fn key(trigger: &Option<Trigger>) -> Value {
        trigger
            .as_ref()
            .and_then(|t| serde_json::from_str(&t.key_fields).ok())
            .unwrap_or(Value::Null)
    }

    #[test]
    fn grid_changes_of_continuous_data_are_required() {
        for (tool, args, operation) in [
            (
                "raster_reproject",
                json!({"resampling": "bilinear", "dst_crs": "EPSG:4326"}),
                "reproject",
            ),
            (
                "raster_resample",
                json!({"resampling": "cubic", "resolution": [60, 60]}),
                "resample",
            ),
            (
                "raster_overviews",
                json!({"resampling": "average"}),
                "overviews",
            ),
            (
                "raster_convert",
                json!({"format": "COG", "overviews": {"resampling": "lanczos"}}),
                "overviews",
            ),
        ] {
            let got = classify_with(tool, args, false);
            assert_eq!(severity(&got), Some(Severity::Required), "{tool}");
            assert_eq!(key(&got)["operation"], json!(operation), "{tool}");
        }
    }

    #[test]
    fn interpolation_on_categorical_data_is_critical_and_nearest_advisory() {
        let bilinear = classify_with("raster_resample", json!({"resampling": "bilinear"}), true);
        assert_eq!(severity(&bilinear), Some(Severity::Critical));
        let gauss = classify_with(
            "raster_convert",
            json!({"overviews": {"resampling": "gauss"}}),
            true,
        );
        assert_eq!(severity(&gauss), Some(Severity::Critical));
        let nearest = classify_with("raster_overviews", json!({"resampling": "nearest"}), true);
        assert_eq!(severity(&nearest), Some(Severity::Advisory));
        let mode = classify_with(
            "raster_convert",
            json!({"overviews": {"resampling": "mode"}}),
            true,
        );
        assert_eq!(severity(&mode), Some(Severity::Advisory));
        assert_eq!(
            key(&bilinear),
            json!({"operation": "resample", "method": "bilinear", "data": "categorical"})
        );
    }

    #[test]
    fn convert_without_overviews_and_aggregate_are_not_resampling() {
        assert!(classify_with("raster_convert", json!({"format": "COG"}), false).is_none());
        assert!(classify_with(
            "raster_aggregate",
            json!({"factor": 4, "statistic": "average"}),
            false
        )
        .is_none());
        assert!(classify_with("raster_info", json!({"input": "x.tif"}), false).is_none());
    }

    #[test]
    fn composites_resample_only_when_grids_differ() {
        let inputs = |second_categorical: bool| {
            vec![
                raster_dataset("input", Some(utm33()), raster("Float32", 1, false)),
                raster_dataset(
                    "input2",
                    Some(utm33()),
                    raster("Byte", 1, second_categorical),
                ),
            ]
        };
        let composite = |grids: &str, categorical: bool| {
            Resampling::classify(&Call::new(call(
                "raster_composite",
                json!({"statistic": "max", "resampling": "bilinear", "_grids": grids}),
                inputs(categorical),
            )))
        };
        assert!(composite("aligned", false).is_none());
        let differ = composite("differ", false);
        assert_eq!(severity(&differ), Some(Severity::Required));
        assert_eq!(
            key(&differ),
            json!({"operation": "composite", "method": "bilinear", "data": "continuous"})
        );
        // A categorical second input makes interpolation critical.
        assert_eq!(
            severity(&composite("differ", true)),
            Some(Severity::Critical)
        );
    }

    #[test]
    fn validate_wants_the_method_the_call_uses() {
        let key = json!({"operation": "overviews", "method": "average", "data": "continuous"});
        let just = |m: &str| json!({"choice": {"method": m}});
        assert!(Resampling::validate(&key, &just("Average of the footprint")).is_empty());
        assert_eq!(Resampling::validate(&key, &just("cubic")).len(), 1);
        assert_eq!(Resampling::validate(&key, &json!({})).len(), 1);
    }
}
