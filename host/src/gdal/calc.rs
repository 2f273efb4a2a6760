//! Band math (`raster_calc`): an expression over bands of rasters on one grid, evaluated block
//! by block so memory stays bounded however large the rasters are.
//!
//! The expression language is `exmex`'s value language (arithmetic, comparisons, `&&`, `||`,
//! `a if cond else b`, `min`, `max`, `abs`, `sqrt`, `ln`, `log10`, `exp`, `floor`, `round`,
//! ...): parsed once, evaluated per cell on plain values, with no access to anything but the
//! cells' values. Declared scale and offset are applied before the expression sees a value, a
//! nodata (or NaN) cell in any input makes the output cell nodata, and the output type is the
//! caller's: a value that does not fit it is an error, never a silent clamp.

use super::output::Staging;
use super::{ErrorCapture, GdalError};
use exmex::{Express, Val};
use gdal::raster::{Buffer, GdalType, RasterCreationOptions};
use gdal::{Dataset, DriverManager};
use schemars::JsonSchema;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Cells read per block (rows of full width).
const BLOCK_CELLS: usize = 1 << 20;

/// One variable of the expression: a band of a raster.
#[derive(Debug, Clone)]
pub struct CalcInput {
    pub name: String,
    pub path: PathBuf,
    pub band: usize,
}

/// A `raster_calc` request, checked by the tool.
#[derive(Debug, Clone)]
pub struct CalcRequest {
    pub inputs: Vec<CalcInput>,
    pub expression: String,
    pub output: PathBuf,
    /// GDAL type name: Byte, UInt16, Int16, UInt32, Int32, Float32, Float64.
    pub data_type: String,
    pub nodata: Option<f64>,
    pub creation_options: Vec<(String, String)>,
}

/// Result of `raster_calc`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CalcOutput {
    pub output: String,
    pub files: Vec<String>,
    pub width: usize,
    pub height: usize,
    pub data_type: String,
    /// The output's nodata value (`null` for NaN, which JSON cannot hold).
    pub nodata: Option<f64>,
    pub nodata_is_nan: bool,
    pub cells: CellCounts,
    /// Over the valid output cells; `null` when there are none.
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// Per input: the scale and offset applied, and its nodata.
    pub inputs: Vec<InputReport>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct CellCounts {
    pub valid: u64,
    /// Nodata because an input cell was nodata (or NaN).
    pub nodata_input: u64,
    /// Nodata because the expression has no value there (division by zero, log of zero, ...).
    pub undefined: u64,
    /// Valid cells rounded to the output's integer type.
    pub rounded: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InputReport {
    pub name: String,
    pub path: String,
    pub band: usize,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    pub nodata: Option<f64>,
}

/// The range of a GDAL type, and whether it holds integers only.
fn type_range(data_type: &str) -> Option<(f64, f64, bool)> {
    Some(match data_type {
        "Byte" => (0.0, 255.0, true),
        "UInt16" => (0.0, 65535.0, true),
        "Int16" => (-32768.0, 32767.0, true),
        "UInt32" => (0.0, 4_294_967_295.0, true),
        "Int32" => (-2_147_483_648.0, 2_147_483_647.0, true),
        "Float32" => (f32::MIN as f64, f32::MAX as f64, false),
        "Float64" => (f64::MIN, f64::MAX, false),
        _ => return None,
    })
}

/// The default nodata of a type: NaN for floats, else the value farthest from zero on the
/// type's side that is least often data (255 for Byte, the minimum for signed types).
fn default_nodata(data_type: &str) -> f64 {
    match data_type {
        "Byte" => 255.0,
        "UInt16" => 65535.0,
        "UInt32" => 4_294_967_295.0,
        "Int16" => -32768.0,
        "Int32" => -2_147_483_648.0,
        _ => f64::NAN,
    }
}

/// The functions and constants an expression may use: exmex's numeric ones. Its integer
/// bit operations, arrays, `fact` (which prints to stdout) and casts are left out.
const FUNCTIONS: &[&str] = &[
    "sqrt", "cbrt", "ln", "log", "log2", "log10", "exp", "abs", "signum", "floor", "ceil", "round",
    "trunc", "fract", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "min", "max", "if", "else", "PI", "E", "TAU", "true", "false",
];

/// The longest expression accepted.
const MAX_EXPRESSION_BYTES: usize = 4096;

/// Refuse what the expression language has but band math must not use.
fn check_vocabulary(expression: &str, names: &[String]) -> Result<(), GdalError> {
    let refuse = |what: String| {
        Err(GdalError::Arguments(format!(
            "expression: {what}; use + - * / ^ %, comparisons, && ||, `a if cond else b` and \
             {}",
            FUNCTIONS.join(", ")
        )))
    };
    if expression.len() > MAX_EXPRESSION_BYTES {
        return refuse(format!(
            "is {} bytes long, at most {MAX_EXPRESSION_BYTES}",
            expression.len()
        ));
    }
    for banned in ["<<", ">>", "[", "]", "XOR"] {
        if expression.contains(banned) {
            return refuse(format!("`{banned}` is not available"));
        }
    }
    let bytes = expression.as_bytes();
    for (i, c) in bytes.iter().enumerate() {
        let next = bytes.get(i + 1).copied();
        let previous = i.checked_sub(1).map(|p| bytes[p]);
        if (*c == b'|' && next != Some(b'|') && previous != Some(b'|'))
            || (*c == b'&' && next != Some(b'&') && previous != Some(b'&'))
        {
            return refuse("bit operations (`|`, `&`) are not available".to_string());
        }
    }
    let mut word = String::new();
    let mut after_digit = false;
    for c in expression.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            if word.is_empty() && c.is_ascii_digit() {
                after_digit = true;
            }
            word.push(c);
            continue;
        }
        // `1e5` and `2.5E-3` are numbers, not names.
        let is_number = after_digit || word.chars().next().is_some_and(|f| f.is_ascii_digit());
        if !word.is_empty()
            && !is_number
            && !FUNCTIONS.contains(&word.as_str())
            && !names.contains(&word)
        {
            return refuse(format!(
                "`{word}` is neither one of `inputs` ({}) nor an available function",
                names.join(", ")
            ));
        }
        after_digit = c == '.' && (after_digit || is_number);
        word.clear();
    }
    Ok(())
}

/// Parse the expression and check its variables against the inputs. Returns the index of
/// each of the expression's variables in `inputs`.
pub fn check_expression(expression: &str, names: &[String]) -> Result<Vec<usize>, GdalError> {
    check_vocabulary(expression, names)?;
    let parsed = exmex::parse_val::<i64, f64>(expression).map_err(|e| {
        GdalError::Arguments(format!(
            "expression: cannot parse \"{expression}\": {e}. Use + - * / ^, comparisons, \
             && ||, `a if cond else b`, min, max, abs, sqrt, ln, log10, exp, floor, round"
        ))
    })?;
    parsed
        .var_names()
        .iter()
        .map(|v| {
            names.iter().position(|n| n == v).ok_or_else(|| {
                GdalError::Arguments(format!(
                    "expression: uses `{v}`, which is not one of `inputs` ({}); name every \
                     raster the expression uses in `inputs`",
                    names.join(", ")
                ))
            })
        })
        .collect()
}

struct Source {
    dataset: Dataset,
    band: usize,
    scale: f64,
    offset: f64,
    nodata: Option<f64>,
}

/// Check that every input is on the first one's grid: same size, geotransform and CRS.
fn check_grid(sources: &[(String, &Dataset)]) -> Result<(), GdalError> {
    let Some((first_name, first)) = sources.first() else {
        return Err(GdalError::Arguments(
            "inputs: name at least one raster".to_string(),
        ));
    };
    let size = first.raster_size();
    let transform = first.geo_transform().ok();
    let crs = first.spatial_ref().ok();
    for (name, dataset) in &sources[1..] {
        let other = dataset.raster_size();
        let other_transform = dataset.geo_transform().ok();
        let same_transform = match (&transform, &other_transform) {
            (Some(a), Some(b)) => a
                .iter()
                .zip(b.iter())
                .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)),
            (None, None) => true,
            _ => false,
        };
        let same_crs = match (&crs, dataset.spatial_ref().ok()) {
            (Some(a), Some(b)) => *a == b,
            (None, None) => true,
            _ => false,
        };
        if other != size || !same_transform || !same_crs {
            return Err(GdalError::Arguments(format!(
                "inputs: `{name}` is not on `{first_name}`'s grid ({}×{} cells{}{} against \
                 {}×{}); bring it onto that grid first with raster_resample or \
                 raster_reproject, choosing the resampling method for what the values mean",
                other.0,
                other.1,
                if same_transform {
                    ""
                } else {
                    ", another geotransform"
                },
                if same_crs { "" } else { ", another CRS" },
                size.0,
                size.1
            )));
        }
    }
    Ok(())
}

/// Run the band math into a staged GeoTIFF and commit it.
pub fn run(request: &CalcRequest) -> Result<CalcOutput, GdalError> {
    let names: Vec<String> = request.inputs.iter().map(|i| i.name.clone()).collect();
    let order = check_expression(&request.expression, &names)?;
    let expression = exmex::parse_val::<i64, f64>(&request.expression)
        .map_err(|e| GdalError::Arguments(format!("expression: {e}")))?;
    let (low, high, integer) = type_range(&request.data_type).ok_or_else(|| {
        GdalError::Arguments(format!(
            "data_type: {} is not one of Byte, UInt16, Int16, UInt32, Int32, Float32, Float64",
            request.data_type
        ))
    })?;
    let nodata = request
        .nodata
        .unwrap_or_else(|| default_nodata(&request.data_type));
    if !nodata.is_nan() && (nodata < low || nodata > high || (integer && nodata.fract() != 0.0)) {
        return Err(GdalError::Arguments(format!(
            "nodata: {nodata} does not fit {} ({low} to {high}{})",
            request.data_type,
            if integer { ", whole numbers" } else { "" }
        )));
    }
    let mut sources = Vec::with_capacity(request.inputs.len());
    for input in &request.inputs {
        let dataset = super::facts::open(&input.path)?;
        super::facts::require_raster(&input.name, &input.path, &dataset)?;
        let band = dataset.rasterband(input.band).map_err(|_| {
            GdalError::Arguments(format!(
                "bands: `{}` has {} band(s); there is no band {}",
                input.name,
                dataset.raster_count(),
                input.band
            ))
        })?;
        let scale = band.scale().unwrap_or(1.0);
        let offset = band.offset().unwrap_or(0.0);
        let nodata = band.no_data_value();
        sources.push(Source {
            band: input.band,
            scale,
            offset,
            nodata,
            dataset,
        });
    }
    check_grid(
        &names
            .iter()
            .cloned()
            .zip(sources.iter().map(|s| &s.dataset))
            .collect::<Vec<_>>(),
    )?;
    let (width, height) = sources[0].dataset.raster_size();
    let geotransform = sources[0].dataset.geo_transform().ok();
    let projection = sources[0].dataset.projection();

    let capture = ErrorCapture::start();
    let failed = |what: &str| GdalError::Failed {
        operation: format!("writing {}", request.output.display()),
        message: capture.failure_text(what),
    };
    let staging = Staging::new(&request.output)?;
    let mut cells = CellCounts::default();
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    let mut out_of_range = 0u64;
    let mut first_out: Option<f64> = None;
    {
        let mut dataset = create(
            &request.data_type,
            staging.path(),
            width,
            height,
            &request.creation_options,
        )
        .map_err(|e| failed(&e))?;
        if let Some(gt) = &geotransform {
            dataset
                .set_geo_transform(gt)
                .map_err(|_| failed("cannot set the geotransform"))?;
        }
        if !projection.is_empty() {
            dataset
                .set_projection(&projection)
                .map_err(|_| failed("cannot set the CRS"))?;
        }
        let mut out_band = dataset.rasterband(1).map_err(|_| failed("no band"))?;
        out_band
            .set_no_data_value(Some(nodata))
            .map_err(|_| failed("cannot set nodata"))?;
        let rows_per_block = (BLOCK_CELLS / width.max(1)).clamp(1, height.max(1));
        let mut values: Vec<Val<i64, f64>> = vec![Val::Float(0.0); order.len()];
        let mut row = 0;
        while row < height {
            if !super::keep_going(row as f64 / height.max(1) as f64) {
                return Err(super::cancelled("raster_calc"));
            }
            let rows = rows_per_block.min(height - row);
            let mut blocks = Vec::with_capacity(sources.len());
            for (source, input) in sources.iter().zip(&request.inputs) {
                let band = source
                    .dataset
                    .rasterband(source.band)
                    .map_err(|_| failed("cannot open an input band"))?;
                let block = band
                    .read_as::<f64>((0, row as isize), (width, rows), (width, rows), None)
                    .map_err(|e| GdalError::Failed {
                        operation: format!("reading `{}` ({})", input.name, input.path.display()),
                        message: e.to_string(),
                    })?;
                blocks.push(block.data().to_vec());
            }
            let mut out = vec![nodata; width * rows];
            'cell: for (cell, slot) in out.iter_mut().enumerate() {
                for (k, &index) in order.iter().enumerate() {
                    let source = &sources[index];
                    let raw = blocks[index][cell];
                    if raw.is_nan() || source.nodata.is_some_and(|n| n == raw) {
                        cells.nodata_input += 1;
                        continue 'cell;
                    }
                    values[k] = Val::Float(raw * source.scale + source.offset);
                }
                let value = match expression.eval(&values) {
                    Ok(Val::Float(v)) => v,
                    Ok(Val::Int(v)) => v as f64,
                    Ok(Val::Bool(b)) => f64::from(u8::from(b)),
                    _ => f64::NAN,
                };
                if !value.is_finite() {
                    cells.undefined += 1;
                    continue;
                }
                let mut value = value;
                if integer && value.fract() != 0.0 {
                    value = value.round();
                    cells.rounded += 1;
                }
                if value < low || value > high {
                    out_of_range += 1;
                    first_out.get_or_insert(value);
                    continue;
                }
                if value == nodata {
                    return Err(GdalError::Arguments(format!(
                        "nodata: the expression gives {value} at a valid cell, which is the \
                         output's nodata; pass another `nodata`"
                    )));
                }
                cells.valid += 1;
                min = min.min(value);
                max = max.max(value);
                sum += value;
                *slot = value;
            }
            if out_of_range > 0 {
                return Err(GdalError::Algorithm(format!(
                    "the expression gives values outside {} ({low} to {high}), e.g. {}, in \
                     at least {out_of_range} cells of rows {row} to {}; choose a wider \
                     data_type (Float32 holds any such value) or scale the expression",
                    request.data_type,
                    first_out.unwrap_or_default(),
                    row + rows - 1
                )));
            }
            let mut buffer = Buffer::new((width, rows), out);
            out_band
                .write((0, row as isize), (width, rows), &mut buffer)
                .map_err(|_| failed("cannot write pixels"))?;
            row += rows;
        }
        dataset.flush_cache().map_err(|_| failed("cannot flush"))?;
    }
    let files = staging.commit()?;
    let mut notes = Vec::new();
    for (source, input) in sources.iter().zip(&request.inputs) {
        if source.scale != 1.0 || source.offset != 0.0 {
            notes.push(format!(
                "`{}` band {}: declared scale {} and offset {} applied before the expression",
                input.name, source.band, source.scale, source.offset
            ));
        }
    }
    if cells.rounded > 0 {
        notes.push(format!(
            "{} cells rounded to the nearest whole number for {}",
            cells.rounded, request.data_type
        ));
    }
    let valid = cells.valid;
    Ok(CalcOutput {
        output: request.output.display().to_string(),
        files: files.iter().map(|p| p.display().to_string()).collect(),
        width,
        height,
        data_type: request.data_type.clone(),
        nodata: (!nodata.is_nan()).then_some(nodata),
        nodata_is_nan: nodata.is_nan(),
        cells,
        min: (valid > 0).then_some(min),
        max: (valid > 0).then_some(max),
        mean: (valid > 0).then(|| sum / valid as f64),
        inputs: sources
            .iter()
            .zip(&request.inputs)
            .map(|(s, i)| InputReport {
                name: i.name.clone(),
                path: i.path.display().to_string(),
                band: s.band,
                scale: (s.scale != 1.0).then_some(s.scale),
                offset: (s.offset != 0.0).then_some(s.offset),
                nodata: s.nodata,
            })
            .collect(),
        notes,
    })
}

/// Create a one-band GeoTIFF of the named type.
fn create(
    data_type: &str,
    path: &Path,
    width: usize,
    height: usize,
    options: &[(String, String)],
) -> Result<Dataset, String> {
    let driver = DriverManager::get_driver_by_name("GTiff").map_err(|e| e.to_string())?;
    let mut creation = RasterCreationOptions::new();
    let mut given: Vec<&str> = Vec::new();
    for (key, value) in options {
        creation
            .add_name_value(key, value)
            .map_err(|e| e.to_string())?;
        given.push(key);
    }
    for (key, value) in [
        ("COMPRESS", "ZSTD"),
        ("TILED", "YES"),
        ("BIGTIFF", "IF_SAFER"),
    ] {
        if !given.iter().any(|g| g.eq_ignore_ascii_case(key)) {
            creation
                .add_name_value(key, value)
                .map_err(|e| e.to_string())?;
        }
    }
    fn make<T: GdalType>(
        driver: &gdal::Driver,
        path: &Path,
        width: usize,
        height: usize,
        options: &RasterCreationOptions,
    ) -> Result<Dataset, String> {
        driver
            .create_with_band_type_with_options::<T, _>(path, width, height, 1, options)
            .map_err(|e| e.to_string())
    }
    match data_type {
        "Byte" => make::<u8>(&driver, path, width, height, &creation),
        "UInt16" => make::<u16>(&driver, path, width, height, &creation),
        "Int16" => make::<i16>(&driver, path, width, height, &creation),
        "UInt32" => make::<u32>(&driver, path, width, height, &creation),
        "Int32" => make::<i32>(&driver, path, width, height, &creation),
        "Float32" => make::<f32>(&driver, path, width, height, &creation),
        _ => make::<f64>(&driver, path, width, height, &creation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["nir".to_string(), "red".to_string()]
    }

    #[test]
    fn expressions_use_the_inputs_and_the_numeric_functions_only() {
        let ok = [
            "(nir - red) / (nir + red)",
            "sqrt(nir) * 0.001 + 250.5",
            "nir if nir > red && red >= 0 || nir == 1 else red",
            "max(nir, red) ^ 2 % 7",
        ];
        for e in ok {
            assert!(check_expression(e, &names()).is_ok(), "{e}");
        }
        // exmex's `fact` prints to stdout; bit operations, arrays and casts are out.
        let refused = [
            "fact(nir)",
            "nir << 2",
            "nir | 1",
            "nir & red",
            "[1, 2]",
            "to_int(nir)",
            "swir + 1",
        ];
        for e in refused {
            assert!(check_expression(e, &names()).is_err(), "{e}");
        }
        assert!(check_expression(&"nir+".repeat(2000), &names()).is_err());
    }
}
