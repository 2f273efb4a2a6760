//! Tables to points (`points_from_table`): a CSV, XLSX or ODS table with coordinate columns
//! becomes a point layer, with strict number parsing.
//!
//! Every cell is read as text (`facts::open_table`, `facts::with_text_cells`). Coordinates must be plain decimal numbers:
//! a decimal comma, degree-minute-second text, an empty cell or a value outside a geographic
//! CRS's range is an error naming the row and column, never a guess. The other columns are
//! typed from all their values: whole numbers without leading zeros become Integer64, plain
//! decimals Real, anything else String, so an identifier such as "001" keeps its zeros.

use super::output::Staging;
use super::{ErrorCapture, GdalError};
use gdal::spatial_ref::SpatialRef;
use gdal::vector::{Geometry, LayerAccess, LayerOptions};
use gdal::DriverManager;
use gdal_sys::OGRFieldType;
use schemars::JsonSchema;
use serde::Serialize;
use std::path::PathBuf;

/// A `points_from_table` request, checked by the tool.
#[derive(Debug, Clone)]
pub struct TableRequest {
    pub input: PathBuf,
    pub output: PathBuf,
    /// OGR driver of the output.
    pub driver: String,
    pub x: String,
    pub y: String,
    pub z: Option<String>,
    /// The CRS definition the coordinates are in.
    pub crs: String,
    pub sheet: Option<String>,
}

/// At most this many rows are read (every cell is held as text until the types are known).
pub const MAX_ROWS: usize = 5_000_000;

/// A column of the output and its type.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Column {
    pub name: String,
    /// `Integer64`, `Real` or `String`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// Result of `points_from_table`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TableOutput {
    pub output: String,
    pub files: Vec<String>,
    pub layer: String,
    pub features: u64,
    pub crs: String,
    /// x and y (and z) as read: which column holds which axis.
    pub axes: Vec<String>,
    pub columns: Vec<Column>,
}

/// Why a cell is not a plain number, or `None` when it is one.
fn number_problem(text: &str) -> Option<&'static str> {
    let t = text.trim();
    if t.is_empty() {
        return Some("is empty");
    }
    if t.contains(['°', '\'', '"', '′', '″'])
        || t.ends_with(['N', 'S', 'E', 'W', 'n', 's', 'e', 'w'])
        || t.split_whitespace().count() > 1
    {
        return Some(
            "looks like degrees-minutes-seconds text; convert it to decimal degrees first",
        );
    }
    if t.contains(',') {
        return Some("has a comma: a decimal comma or a thousands separator; write plain decimals with a point (12.5)");
    }
    if plain_decimal(t) {
        None
    } else {
        Some("is not a plain decimal number")
    }
}

/// `[-+]digits[.digits][e[-+]digits]`, or `[-+].digits...`.
fn plain_decimal(t: &str) -> bool {
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = digits(whole)
        && fraction.is_none_or(digits)
        && (!whole.is_empty() || fraction.is_some_and(|f| !f.is_empty()));
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok && t.parse::<f64>().is_ok_and(f64::is_finite)
}

/// A whole number as written by someone who meant a number: no leading zeros.
fn plain_integer(t: &str) -> bool {
    let body = t.strip_prefix('-').unwrap_or(t);
    !body.is_empty()
        && body.chars().all(|c| c.is_ascii_digit())
        && (body == "0" || !body.starts_with('0'))
        && t.parse::<i64>().is_ok()
}

/// A decimal that is not an identifier in disguise: no leading zero before other digits.
fn plain_real(t: &str) -> bool {
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let whole = body.split(['.', 'e', 'E']).next().unwrap_or("");
    plain_decimal(t) && !(whole.len() > 1 && whole.starts_with('0'))
}

/// The type of a table column from all its (trimmed, non-empty) values: `Integer64` when every
/// one is a whole number without leading zeros, `Real` when every one is a plain decimal,
/// else `String` (also for a column without values).
pub fn column_kind<'a>(values: impl Iterator<Item = &'a str> + Clone) -> &'static str {
    if values.clone().all(plain_integer) && values.clone().next().is_some() {
        "Integer64"
    } else if values.clone().all(plain_real) && values.clone().next().is_some() {
        "Real"
    } else {
        "String"
    }
}

/// Read the table, check it, and write the points.
pub fn run(request: &TableRequest) -> Result<TableOutput, GdalError> {
    super::facts::with_text_cells(|| run_with_text_cells(request))
}

fn run_with_text_cells(request: &TableRequest) -> Result<TableOutput, GdalError> {
    let srs = super::facts::parse_crs("crs", &request.crs)?;
    let geographic = srs.is_geographic();
    let dataset = super::facts::open_table(&request.input)?;
    let mut layer = super::vector::layer("sheet", &dataset, request.sheet.as_deref())?;
    let names: Vec<String> = layer.defn().fields().map(|f| f.name()).collect();
    let find = |argument: &str, column: &str| -> Result<usize, GdalError> {
        names.iter().position(|n| n == column).ok_or_else(|| {
            GdalError::Arguments(format!(
                "{argument}: the table has no column \"{column}\"; its columns are {}",
                names.join(", ")
            ))
        })
    };
    let xi = find("x", &request.x)?;
    let yi = find("y", &request.y)?;
    let zi = match &request.z {
        Some(z) => Some(find("z", z)?),
        None => None,
    };
    // Every row as text.
    let mut rows: Vec<Vec<Option<String>>> = Vec::new();
    for feature in layer.features() {
        if rows.len() == MAX_ROWS {
            return Err(GdalError::Arguments(format!(
                "input: the table has more than {MAX_ROWS} rows, the most one call reads; split \
                 it into parts of at most that many rows"
            )));
        }
        rows.push(
            (0..names.len())
                .map(|i| {
                    feature
                        .field_as_string(i)
                        .ok()
                        .flatten()
                        .filter(|v| !v.trim().is_empty())
                })
                .collect(),
        );
    }
    // Coordinates, strictly.
    let mut points = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        let number = |column: usize, argument: &str| -> Result<f64, GdalError> {
            let text = row[column].as_deref().unwrap_or("");
            if let Some(problem) = number_problem(text) {
                return Err(GdalError::Arguments(format!(
                    "{argument}: row {} (data row, header not counted), column \"{}\": \"{text}\" \
                     {problem}; nothing was written",
                    index + 1,
                    names[column]
                )));
            }
            Ok(text.trim().parse::<f64>().unwrap_or(f64::NAN))
        };
        let x = number(xi, "x")?;
        let y = number(yi, "y")?;
        let z = match zi {
            Some(zi) => Some(number(zi, "z")?),
            None => None,
        };
        if geographic && (x.abs() > 180.0 || y.abs() > 90.0) {
            let swapped = y.abs() <= 180.0 && x.abs() <= 90.0;
            return Err(GdalError::Arguments(format!(
                "row {}: ({x}, {y}) is outside longitude -180..180 / latitude -90..90 for a \
                 geographic crs{}; nothing was written",
                index + 1,
                if swapped {
                    ": the columns look swapped (x is longitude, y is latitude)"
                } else {
                    ""
                }
            )));
        }
        points.push((x, y, z));
    }
    // Other columns' types, from all their values.
    let others: Vec<usize> = (0..names.len())
        .filter(|i| *i != xi && *i != yi && Some(*i) != zi)
        .collect();
    let columns: Vec<(usize, Column)> = others
        .iter()
        .map(|&i| {
            let kind = column_kind(rows.iter().filter_map(|r| r[i].as_deref().map(str::trim)));
            (
                i,
                Column {
                    name: names[i].clone(),
                    kind,
                },
            )
        })
        .collect();

    let capture = ErrorCapture::start();
    let failed = |what: &str| GdalError::Failed {
        operation: format!("writing {}", request.output.display()),
        message: capture.failure_text(what),
    };
    let layer_name = request
        .output
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("points")
        .to_string();
    let staging = Staging::new(&request.output)?;
    {
        let driver = DriverManager::get_driver_by_name(&request.driver)
            .map_err(|_| failed("no such driver"))?;
        let mut out = driver
            .create_vector_only(staging.path())
            .map_err(|_| failed("cannot create the file"))?;
        let mut layer_srs: SpatialRef = srs.clone();
        layer_srs
            .set_axis_mapping_strategy(gdal::spatial_ref::AxisMappingStrategy::TraditionalGisOrder);
        let ty = if zi.is_some() {
            gdal_sys::OGRwkbGeometryType::wkbPoint25D
        } else {
            gdal_sys::OGRwkbGeometryType::wkbPoint
        };
        let layer = out
            .create_layer(LayerOptions {
                name: &layer_name,
                srs: Some(&layer_srs),
                ty,
                options: None,
            })
            .map_err(|_| failed("cannot create the layer"))?;
        let defs: Vec<(&str, u32)> = columns
            .iter()
            .map(|(_, c)| {
                (
                    c.name.as_str(),
                    match c.kind {
                        "Integer64" => OGRFieldType::OFTInteger64,
                        "Real" => OGRFieldType::OFTReal,
                        _ => OGRFieldType::OFTString,
                    },
                )
            })
            .collect();
        layer
            .create_defn_fields(&defs)
            .map_err(|_| failed("cannot create the fields"))?;
        for (row, (x, y, z)) in rows.iter().zip(&points) {
            let mut geometry = Geometry::empty(ty).map_err(|_| failed("geometry"))?;
            match z {
                Some(z) => geometry.add_point((*x, *y, *z)),
                None => geometry.add_point_2d((*x, *y)),
            }
            let mut feature =
                gdal::vector::Feature::new(layer.defn()).map_err(|_| failed("feature"))?;
            feature
                .set_geometry(geometry)
                .map_err(|_| failed("geometry"))?;
            for (field, (source, column)) in columns.iter().enumerate() {
                let Some(text) = row[*source].as_deref().map(str::trim) else {
                    continue;
                };
                let set = match column.kind {
                    "Integer64" => feature.set_field_integer64(field, text.parse().unwrap_or(0)),
                    "Real" => feature.set_field_double(field, text.parse().unwrap_or(f64::NAN)),
                    _ => feature.set_field_string(field, text),
                };
                set.map_err(|_| failed("cannot set a field"))?;
            }
            feature
                .create(&layer)
                .map_err(|_| failed("cannot write a feature"))?;
        }
    }
    let files = staging.commit()?;
    let mut axes = vec![
        format!("x (longitude or easting) = \"{}\"", request.x),
        format!("y (latitude or northing) = \"{}\"", request.y),
    ];
    if let Some(z) = &request.z {
        axes.push(format!("z = \"{z}\""));
    }
    Ok(TableOutput {
        output: request.output.display().to_string(),
        files: files.iter().map(|p| p.display().to_string()).collect(),
        layer: layer_name,
        features: points.len() as u64,
        crs: srs
            .auth_name()
            .zip(srs.auth_code().ok())
            .map(|(a, c)| format!("{a}:{c}"))
            .or_else(|| srs.name())
            .unwrap_or_else(|| request.crs.clone()),
        axes,
        columns: columns.into_iter().map(|(_, c)| c).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_plain_decimals_or_refused_with_the_reason() {
        assert_eq!(number_problem("12.5"), None);
        assert_eq!(number_problem("-0.25e3"), None);
        assert_eq!(number_problem(".5"), None);
        assert!(number_problem("12,5").is_some_and(|p| p.contains("comma")));
        assert!(number_problem("12°30'N").is_some_and(|p| p.contains("degrees")));
        assert!(number_problem("12 30 00").is_some_and(|p| p.contains("degrees")));
        assert!(number_problem("").is_some_and(|p| p.contains("empty")));
        assert!(number_problem("nan").is_some());
        assert!(number_problem("inf").is_some());
        assert!(number_problem("0x10").is_some());
    }

    #[test]
    fn identifiers_with_leading_zeros_are_not_numbers() {
        assert!(plain_integer("0"));
        assert!(plain_integer("-12"));
        assert!(!plain_integer("001"));
        assert!(!plain_real("001"));
        assert!(!plain_real("01.5"));
        assert!(plain_real("0.5"));
        assert!(plain_real("10.5"));
    }
}
