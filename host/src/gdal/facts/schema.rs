//! What a vector output driver cannot hold of a layer's attribute fields: measured from the
//! layer's own schema (names, types) and, where the loss depends on the values (long strings,
//! date-times with a time, large 64-bit integers), from the values of the features the host's
//! feature budget reads ([`super::FEATURE_BUDGET`]), before anything is written.
//!
//! The rules are GDAL 3.6.2's behaviour, measured by writing with `ogr2ogr` and reading back
//! (attack round 13, R13-B8; each rule has a test in `schema/tests` that writes with real GDAL):
//!
//! * **ESRI Shapefile** (DBF): a field name longer than 10 characters is cut to 10, and a name
//!   that then equals an earlier one (case-insensitively) becomes its first 8 characters and
//!   `_1`, `_2`, ... (`10`, `11`, ... from the tenth), so `population_2020` and
//!   `population_2021` are written as `population` and `populati_1`, and a field `Population`
//!   after them as `Populati_3`; a DateTime field is written as Date, so every time of day is
//!   dropped; a string longer than 254 characters is cut to 254; a Binary field is not
//!   written at all; a 64-bit integer whose text is longer than 18 characters turns the field
//!   into Real (-999999999999999999 is read back as -1e18). A Time field is written as text
//!   and keeps its values; integers, short strings and dates are kept.
//! * **MapInfo File** (TAB): a name longer than 31 characters is cut to 31; a string longer
//!   than 254 bytes is cut to 254 bytes; Integer64 is written as Real, so values beyond 2^53
//!   lose their last digits; a Binary field is not written.
//! * **LIBKML** leaves out Date and DateTime fields, **GML** Binary fields, and **DXF** every
//!   attribute field (its layers have a fixed schema). KML writes Integer64 as Real with 15
//!   significant digits (R16-B6), and a Shapefile writes Reals 24 characters wide with 15
//!   decimals (R16-B7): both measured on the values. GeoJSON, FlatGeobuf, GeoPackage, SQLite
//!   and CSV keep every field's value (CSV as text; KML writes dates as text).
//!
//! The losses are handed to the domains in the `output` fact's `losses` (WIT 0.6's
//! `encoding-loss` record: `codec` names the kind of loss, `text` the fields and numbers), so
//! that `format_selection` asks about them as `schema_lost` instead of calling the write
//! lossless.

use super::encoding::Loss;
use super::ErrorCapture;
use chrono::Timelike;
use gdal::vector::{LayerAccess, OGRFieldType};
use gdal::Dataset;

/// The longest string a Shapefile's DBF holds, in characters (GDAL 3.6.2 counts characters).
const SHAPEFILE_STRING: usize = 254;
/// The longest string a MapInfo TAB field holds, in bytes.
const MAPINFO_STRING: usize = 254;
/// The longest text of a 64-bit integer a Shapefile keeps as an integer.
const SHAPEFILE_INTEGER64_CHARS: usize = 18;
/// Field names: Shapefile (DBF) and MapInfo.
const SHAPEFILE_NAME: usize = 10;
const MAPINFO_NAME: usize = 31;

/// The kinds of loss, as `Loss::codec`.
pub const FIELD_NAME: &str = "field_name";
pub const DATE_TIME: &str = "date_time";
pub const STRING_LENGTH: &str = "string_length";
pub const FIELD_DROPPED: &str = "field_dropped";
pub const INTEGER64: &str = "integer64";
pub const REAL: &str = "real_precision";
pub const TEXT_ENCODING: &str = "text_encoding";
/// The width and decimals GDAL 3.6.2 gives a Shapefile Real field from a source without
/// its own (`N(24,15)` in the DBF).
const SHAPEFILE_REAL_WIDTH: usize = 24;
const SHAPEFILE_REAL_DECIMALS: usize = 15;
/// The significant digits KML writes a number with (`%.15g`): Integer64 values are written
/// as Real.
const KML_DIGITS: usize = 15;

/// One attribute field of a layer, as the schema declares it.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    kind: OGRFieldType::Type,
}

/// What the values of one layer show, within the feature budget.
#[derive(Debug, Default)]
struct Values {
    /// Per field: values read, values that lose, and the worst one as text.
    per_field: Vec<FieldValues>,
    features: u64,
}

#[derive(Debug, Default, Clone)]
struct FieldValues {
    losing: u64,
    /// Strings holding characters the DBF's encoding cannot (written as `?`).
    unencodable: u64,
    /// The longest string (characters or bytes, by the rule), or the example value.
    longest: usize,
    example: Option<String>,
}

/// Whether `driver` is one whose field limits this module knows.
pub fn knows(driver: &str) -> bool {
    matches!(
        driver,
        "ESRI Shapefile" | "MapInfo File" | "LIBKML" | "KML" | "GML" | "DXF"
    )
}

/// Whether `driver` leaves a field of `kind` out of the output altogether (GDAL 3.6.2,
/// measured): Binary in Shapefile, MapInfo and GML; Date and DateTime in LIBKML; every
/// attribute field in DXF, whose layers have a fixed schema.
fn dropped(driver: &str, kind: OGRFieldType::Type) -> bool {
    match driver {
        "DXF" => true,
        "LIBKML" => matches!(kind, OGRFieldType::OFTDate | OGRFieldType::OFTDateTime),
        "ESRI Shapefile" | "MapInfo File" | "GML" => kind == OGRFieldType::OFTBinary,
        _ => false,
    }
}

/// What writing the layers of `dataset` (only `layer` when the call names one) with `driver`
/// loses of their attribute fields; empty when everything fits or the driver's limits are not
/// known here.
pub fn losses(
    driver: &str,
    dataset: &Dataset,
    layer: Option<&str>,
    layer_options: &[(String, String)],
) -> Vec<Loss> {
    if !knows(driver) {
        return Vec::new();
    }
    let _quiet = ErrorCapture::start();
    let mut losses = Vec::new();
    for mut l in dataset.layers() {
        let name = l.name();
        if layer.is_some_and(|wanted| wanted != name) {
            continue;
        }
        let fields: Vec<Field> = l
            .defn()
            .fields()
            .map(|f| Field {
                name: f.name(),
                kind: f.field_type(),
            })
            .collect();
        if fields.is_empty() {
            continue;
        }
        let values = read_values(driver, &mut l, &fields, dbf_text_limit(layer_options));
        let prefix = if layer.is_none() && dataset.layer_count() > 1 {
            format!("layer {name}: ")
        } else {
            String::new()
        };
        for loss in layer_losses(driver, &fields, &values) {
            losses.push(Loss {
                codec: loss.codec,
                text: format!("{prefix}{}", loss.text),
            });
        }
    }
    losses
}

/// Whether a field's values must be read to know what `driver` does to them.
fn value_rule(driver: &str, kind: OGRFieldType::Type) -> bool {
    match driver {
        "ESRI Shapefile" => matches!(
            kind,
            OGRFieldType::OFTString
                | OGRFieldType::OFTDateTime
                | OGRFieldType::OFTInteger64
                | OGRFieldType::OFTReal
        ),
        "MapInfo File" => matches!(kind, OGRFieldType::OFTString | OGRFieldType::OFTInteger64),
        "LIBKML" | "KML" => matches!(kind, OGRFieldType::OFTInteger64 | OGRFieldType::OFTReal),
        "GML" => kind == OGRFieldType::OFTReal,
        _ => false,
    }
}

/// The highest character a Shapefile's DBF holds under the layer's `ENCODING` option: Latin-1
/// by default (GDAL 3.6 writes `LDID/87`), none for UTF-8, ASCII for any other (GDAL recodes
/// what it can and writes `?` for the rest: "東京 Zürich Ελλάδα" read back "?? Zürich ??????",
/// attack round 17, R17-C9).
fn dbf_text_limit(layer_options: &[(String, String)]) -> Option<u32> {
    let encoding = layer_options
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("ENCODING"))
        .map(|(_, v)| v.trim().to_ascii_uppercase());
    match encoding.as_deref() {
        None => Some(0xFF),
        Some("UTF-8" | "UTF8") => None,
        Some("ISO-8859-1" | "LATIN1" | "LDID/87") => Some(0xFF),
        Some(_) => Some(0x7F),
    }
}

/// Reads up to the feature budget and measures, per field, the values `driver` changes.
fn read_values(
    driver: &str,
    layer: &mut gdal::vector::Layer<'_>,
    fields: &[Field],
    text_limit: Option<u32>,
) -> Values {
    let mut values = Values {
        per_field: vec![FieldValues::default(); fields.len()],
        features: 0,
    };
    if !fields.iter().any(|f| value_rule(driver, f.kind)) {
        return values;
    }
    layer.reset_feature_reading();
    for feature in layer.features().take(super::FEATURE_BUDGET as usize) {
        values.features += 1;
        for (index, field) in fields.iter().enumerate() {
            if !value_rule(driver, field.kind) {
                continue;
            }
            let seen = &mut values.per_field[index];
            match field.kind {
                OGRFieldType::OFTString => {
                    let Ok(Some(text)) = feature.field_as_string(index) else {
                        continue;
                    };
                    let (length, limit) = if driver == "MapInfo File" {
                        (text.len(), MAPINFO_STRING)
                    } else {
                        (text.chars().count(), SHAPEFILE_STRING)
                    };
                    if length > limit {
                        seen.losing += 1;
                    }
                    seen.longest = seen.longest.max(length);
                    let beyond = |c: char| text_limit.is_some_and(|most| c as u32 > most);
                    if driver == "ESRI Shapefile" && text.chars().any(beyond) {
                        seen.unencodable += 1;
                        if seen.example.is_none() {
                            seen.example = Some(text.chars().take(40).collect());
                        }
                    }
                }
                OGRFieldType::OFTDateTime => {
                    let Ok(Some(when)) = feature.field_as_datetime(index) else {
                        continue;
                    };
                    if when.hour() != 0 || when.minute() != 0 || when.second() != 0 {
                        seen.losing += 1;
                        if seen.example.is_none() {
                            seen.example = feature.field_as_string(index).ok().flatten();
                        }
                    }
                }
                OGRFieldType::OFTInteger64 => {
                    let Ok(Some(value)) = feature.field_as_integer64(index) else {
                        continue;
                    };
                    let loses = match driver {
                        // Written as Real: exact only where the double holds the integer.
                        "MapInfo File" => (value as f64) as i64 != value || value == i64::MAX,
                        // Written as Real with 15 significant digits (attack round 16,
                        // R16-B6: 9007199254740993 read back 9007199254740990).
                        "LIBKML" | "KML" => format!("{:.*e}", KML_DIGITS - 1, value as f64)
                            .parse::<f64>()
                            .map_or(true, |back| {
                                back != value as f64 || (value as f64) as i64 != value
                            }),
                        _ => value.to_string().len() > SHAPEFILE_INTEGER64_CHARS,
                    };
                    if loses {
                        seen.losing += 1;
                        if seen.example.is_none() {
                            seen.example = Some(value.to_string());
                        }
                    }
                }
                // A DBF number of 24 characters with 15 decimals: values below 1e-15 become 0,
                // small ones lose their digits, and huge ones overflow the width (attack round
                // 16, R16-B7: 2.5e-20 written 0, 3.217e-13 as 3.22e-13, 1e300 as 1e23). A
                // change below a billionth of the value (1/3's sixteenth digit) is no loss.
                // KML and GML write a Real with 15 significant digits (`%.15g`): a whole
                // number past 10^15 (an id or a time in microseconds kept as Real) loses units,
                // 1700000000123456 read back 1700000000123460 (attack round 17, R17-B9). A
                // change below a billionth of a fraction's value is no loss, as for Shapefile.
                OGRFieldType::OFTReal if driver != "ESRI Shapefile" => {
                    let Ok(Some(value)) = feature.field_as_double(index) else {
                        continue;
                    };
                    if !value.is_finite() || value == 0.0 {
                        continue;
                    }
                    let back = format!("{:.*e}", KML_DIGITS - 1, value)
                        .parse::<f64>()
                        .unwrap_or(f64::NAN);
                    let whole = value.fract() == 0.0 && value.abs() >= 1e15;
                    let loses = if whole {
                        back != value
                    } else {
                        (back - value).abs() > 1e-9 * value.abs()
                    };
                    if loses {
                        seen.losing += 1;
                        if seen.example.is_none() {
                            seen.example = Some(format!("{value} written {back}"));
                        }
                    }
                }
                OGRFieldType::OFTReal => {
                    let Ok(Some(value)) = feature.field_as_double(index) else {
                        continue;
                    };
                    if !value.is_finite() || value == 0.0 {
                        continue;
                    }
                    let text = format!("{value:.SHAPEFILE_REAL_DECIMALS$}");
                    let back = text.parse::<f64>().unwrap_or(f64::NAN);
                    let loses = text.len() > SHAPEFILE_REAL_WIDTH
                        || back.is_nan()
                        || (back - value).abs() > 1e-9 * value.abs();
                    if loses {
                        seen.losing += 1;
                        if seen.example.is_none() {
                            seen.example = Some(format!("{value:e} written {back:e}"));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    layer.reset_feature_reading();
    values
}

/// The names GDAL 3.6.2's Shapefile driver gives `names`, in order: cut to 10 characters, and
/// a name equal (case-insensitively) to one already taken becomes its first 8 characters and a
/// number, `_1` to `_9`, then `10` to `99`.
pub fn shapefile_names(names: &[String]) -> Vec<String> {
    let mut taken: Vec<String> = Vec::new();
    let mut written = Vec::with_capacity(names.len());
    for name in names {
        let cut: String = name.chars().take(SHAPEFILE_NAME).collect();
        let free = |candidate: &str, taken: &[String]| {
            !taken.iter().any(|t| t.eq_ignore_ascii_case(candidate))
        };
        let mut chosen = cut.clone();
        if !free(&chosen, &taken) {
            let stem: String = name.chars().take(8).collect();
            chosen = (1..100)
                .map(|n| {
                    if n < 10 {
                        format!("{stem}_{n}")
                    } else {
                        format!("{stem}{n}")
                    }
                })
                .find(|c| free(c, &taken))
                .unwrap_or(cut);
        }
        taken.push(chosen.clone());
        written.push(chosen);
    }
    written
}

/// A plural `s` for `n`.
fn s(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The losses of one layer.
fn layer_losses(driver: &str, fields: &[Field], values: &Values) -> Vec<Loss> {
    let mut losses = Vec::new();
    let mut lose = |codec: &str, text: String| {
        losses.push(Loss {
            codec: codec.to_string(),
            text,
        })
    };
    let checked = values.features;
    for field in fields.iter().filter(|f| dropped(driver, f.kind)) {
        let what = match driver {
            "DXF" => "DXF layers have a fixed schema".to_string(),
            _ => format!(
                "{driver} has no {} type",
                gdal::vector::field_type_to_name(field.kind)
            ),
        };
        lose(
            FIELD_DROPPED,
            format!("the field `{}` is not written: {what}", field.name),
        );
    }
    if matches!(driver, "LIBKML" | "KML") {
        for (field, seen) in fields.iter().zip(&values.per_field) {
            if field.kind == OGRFieldType::OFTInteger64 && seen.losing > 0 {
                lose(
                    INTEGER64,
                    format!(
                        "the Integer64 field `{}`: KML writes it as Real with {KML_DIGITS} \
                         significant digits, so longer integers lose their last digits; {} of \
                         {checked} feature{} checked (e.g. {})",
                        field.name,
                        seen.losing,
                        s(checked),
                        seen.example.as_deref().unwrap_or("?")
                    ),
                );
            }
        }
    }
    if matches!(driver, "LIBKML" | "KML" | "GML") {
        for (field, seen) in fields.iter().zip(&values.per_field) {
            if field.kind == OGRFieldType::OFTReal && seen.losing > 0 {
                lose(
                    REAL,
                    format!(
                        "the Real field `{}`: {driver} writes numbers with {KML_DIGITS} \
                         significant digits, so whole numbers past 10^15 (ids, times in \
                         microseconds) lose their last units; {} of {checked} feature{} checked \
                         (e.g. {})",
                        field.name,
                        seen.losing,
                        s(checked),
                        seen.example.as_deref().unwrap_or("?")
                    ),
                );
            }
        }
    }
    if !matches!(driver, "ESRI Shapefile" | "MapInfo File") {
        return losses;
    }
    // Field names.
    let names: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
    let written = match driver {
        "ESRI Shapefile" => shapefile_names(&names),
        _ => names
            .iter()
            .map(|n| n.chars().take(MAPINFO_NAME).collect())
            .collect(),
    };
    let limit = if driver == "ESRI Shapefile" {
        SHAPEFILE_NAME
    } else {
        MAPINFO_NAME
    };
    let renamed: Vec<String> = names
        .iter()
        .zip(&written)
        .filter(|(from, to)| from != to)
        .map(|(from, to)| format!("`{from}` as `{to}`"))
        .collect();
    if !renamed.is_empty() {
        lose(
            FIELD_NAME,
            format!(
                "field names longer than {limit} characters are cut, and names that collide \
                 once cut are renumbered: {}",
                renamed.join(", ")
            ),
        );
    }
    for (field, seen) in fields.iter().zip(&values.per_field) {
        let name = &field.name;
        match field.kind {
            OGRFieldType::OFTDateTime if driver == "ESRI Shapefile" && seen.losing > 0 => lose(
                DATE_TIME,
                format!(
                    "the DateTime field `{name}` is written as Date: the time of day of {} of \
                     {checked} feature{} checked is dropped (e.g. {} keeps only its date)",
                    seen.losing,
                    s(checked),
                    seen.example.as_deref().unwrap_or("?")
                ),
            ),
            OGRFieldType::OFTString if seen.unencodable > 0 && seen.losing == 0 => lose(
                TEXT_ENCODING,
                format!(
                    "the string field `{name}` holds {} value{} with characters the DBF's \
                     encoding cannot hold (Latin-1 unless `ENCODING` says otherwise; layer \
                     option ENCODING=UTF-8 keeps them) among {checked} feature{} checked: they \
                     are written as `?` (e.g. \"{}\")",
                    seen.unencodable,
                    s(seen.unencodable),
                    s(checked),
                    seen.example.as_deref().unwrap_or("?")
                ),
            ),
            OGRFieldType::OFTString if seen.losing > 0 => {
                let (limit, unit) = if driver == "MapInfo File" {
                    (MAPINFO_STRING, "bytes")
                } else {
                    (SHAPEFILE_STRING, "characters")
                };
                lose(
                    STRING_LENGTH,
                    format!(
                        "the string field `{name}` holds {} value{} longer than {limit} {unit} \
                         (the longest {}) among {checked} feature{} checked: they are cut to \
                         {limit}{}",
                        seen.losing,
                        s(seen.losing),
                        seen.longest,
                        s(checked),
                        if seen.unencodable > 0 {
                            format!(
                                "; and {} hold characters the DBF's encoding cannot hold, \
                                 written as `?` (layer option ENCODING=UTF-8 keeps them)",
                                seen.unencodable
                            )
                        } else {
                            String::new()
                        }
                    ),
                )
            }
            OGRFieldType::OFTReal if seen.losing > 0 => lose(
                REAL,
                format!(
                    "the Real field `{name}`: a Shapefile writes numbers {SHAPEFILE_REAL_WIDTH} \
                     characters wide with {SHAPEFILE_REAL_DECIMALS} decimals, so very small \
                     values become 0 or lose digits and very large ones overflow; {} of \
                     {checked} feature{} checked (e.g. {})",
                    seen.losing,
                    s(checked),
                    seen.example.as_deref().unwrap_or("?")
                ),
            ),
            OGRFieldType::OFTInteger64 if seen.losing > 0 => {
                let what = if driver == "MapInfo File" {
                    "MapInfo writes Integer64 as Real, and values beyond 2^53 lose their last \
                     digits"
                } else {
                    "a value longer than 18 characters turns the field into Real, and values \
                     beyond 2^53 lose their last digits"
                };
                lose(
                    INTEGER64,
                    format!(
                        "the Integer64 field `{name}`: {what}; {} of {checked} feature{} \
                         checked (e.g. {})",
                        seen.losing,
                        s(checked),
                        seen.example.as_deref().unwrap_or("?")
                    ),
                )
            }
            _ => {}
        }
    }
    losses
}

#[cfg(test)]
mod tests;
