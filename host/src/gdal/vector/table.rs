//! Tables to points, lines and polygons (`points_from_table`): a CSV, XLSX or ODS table with
//! coordinate columns becomes a point layer, or, with `geometry`, a layer of lines or polygons
//! whose vertices are rows grouped by `group_by` and ordered by `order_by` ([`shapes`]).
//!
//! Before GDAL opens a table, its size is bounded from what the file declares
//! ([`check_budget`]): an XLSX or ODS file is a zip, whose central directory is read here (never
//! inflated) and refused when an entry or their total declares more than the byte budget, or
//! inflates absurdly (a zip bomb: 3.4 MB declaring 3.4 GB); a CSV is refused above the byte
//! budget, with a line longer than the line budget, or a header with more columns than the
//! column budget. Every budget is configurable ([`TableBudget`]).
//!
//! Every cell is read as text (`facts::open_table`, `facts::with_text_cells`). Coordinates must be
//! plain decimal numbers, or, in a geographic CRS, degrees-minutes-seconds ([`dms`]): a column
//! whose every value is DMS text, or whole degrees with minute, second and hemisphere columns
//! named in `dms`. A decimal comma, an empty cell, a column mixing DMS text and plain numbers,
//! a DMS part out of range or a value outside a geographic CRS's range is an error naming the
//! row and column, never a guess; where the values fit the other axis, the error says the
//! columns look swapped. The other columns are typed from all their values: whole numbers
//! without leading zeros become Integer64, plain decimals Real, anything else String, so an
//! identifier such as "001" keeps its zeros. Lines and polygons keep the columns whose value is
//! the same on every row of a group.

pub mod dms;
mod expansion;
pub use expansion::{check_kml, check_xml_tree, DEFAULT_KML_MAX_MEMORY_BYTES, KML_MEMORY_VARIABLE};
pub mod shapes;

use crate::gdal::output::Staging;
use crate::gdal::{ErrorCapture, GdalError};
use gdal::spatial_ref::SpatialRef;
use gdal::vector::{Geometry, LayerAccess, LayerOptions};
use gdal_sys::OGRFieldType;
use schemars::JsonSchema;
use serde::Serialize;
use std::path::{Path, PathBuf};

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
    /// What each row (point) or group of rows (line, polygon) becomes.
    pub geometry: shapes::Kind,
    /// The column naming each line's or polygon's group of vertex rows.
    pub group_by: Option<String>,
    /// The column of vertex sequence numbers, optionally followed by ASC or DESC.
    pub order_by: Option<String>,
    /// Minute, second and hemisphere columns of DMS coordinates.
    pub dms: DmsColumns,
    /// What the table may make GDAL expand.
    pub budget: TableBudget,
}

// Degree-minute-second coordinates in separate columns: `x` and `y` then hold the degrees
// (whole when minutes follow; the sign, or a hemisphere column, gives the direction). (A plain
// comment: the `dms` argument describes it.)
#[derive(Debug, Clone, Default, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DmsColumns {
    pub x_minutes: Option<String>,
    pub x_seconds: Option<String>,
    pub x_hemisphere: Option<String>,
    pub y_minutes: Option<String>,
    pub y_seconds: Option<String>,
    pub y_hemisphere: Option<String>,
}

/// At most this many rows are read (every cell is held as text until the types are known).
pub const MAX_ROWS: usize = 5_000_000;

/// Default byte budget of a table: a CSV's size, and the declared uncompressed size of a
/// spreadsheet's zip entries, each and in total (256 MiB).
pub const DEFAULT_TABLE_BYTES: u64 = 256 << 20;
/// Default largest ratio of declared uncompressed to compressed size of one zip entry over
/// 1 MiB (spreadsheet XML compresses 5-50 times; a zip bomb about 1000 times).
pub const DEFAULT_TABLE_RATIO: u64 = 200;
/// Default longest CSV line (1 MiB).
pub const DEFAULT_TABLE_LINE_BYTES: u64 = 1 << 20;
/// Default most columns of a table.
pub const DEFAULT_TABLE_COLUMNS: usize = 1000;
/// Default most cells of a spreadsheet once GDAL fills every row to its widest column (16 Mi:
/// a full Excel sheet of 16 columns, or 100,000 rows of 167 columns). GDAL keeps every cell
/// of every row in memory, at least 16 bytes each even when empty (measured with GDAL 3.6:
/// 20,000 rows filled to column ALL, 20 million cells, took `ogrinfo` to 362 MB; 100,000 rows
/// of 50 numbers, 5 million cells, to 138 MB).
pub const DEFAULT_TABLE_CELLS: u64 = 16 << 20;
/// Entries smaller than this are not checked for their ratio (a small file of one repeated
/// value is not a bomb).
const RATIO_FLOOR: u64 = 1 << 20;
/// The most entries and central-directory bytes a spreadsheet's zip may declare.
const MAX_ZIP_ENTRIES: u64 = 100_000;
const MAX_CENTRAL_DIRECTORY: u64 = 16 << 20;

/// What a table may make GDAL expand. Set by `GDAL_MCP_TABLE_MAX_BYTES`,
/// `GDAL_MCP_TABLE_MAX_RATIO`, `GDAL_MCP_TABLE_MAX_LINE_BYTES`,
/// `GDAL_MCP_TABLE_MAX_COLUMNS` and `GDAL_MCP_TABLE_MAX_CELLS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableBudget {
    pub bytes: u64,
    pub ratio: u64,
    pub line_bytes: u64,
    pub columns: usize,
    /// Cells of a spreadsheet, every row counted to its sheet's widest column.
    pub cells: u64,
}

impl Default for TableBudget {
    fn default() -> Self {
        Self {
            bytes: DEFAULT_TABLE_BYTES,
            ratio: DEFAULT_TABLE_RATIO,
            line_bytes: DEFAULT_TABLE_LINE_BYTES,
            columns: DEFAULT_TABLE_COLUMNS,
            cells: DEFAULT_TABLE_CELLS,
        }
    }
}

impl TableBudget {
    /// The budget in force: the environment's, else the defaults.
    pub fn from_env() -> Self {
        fn read<T: std::str::FromStr + PartialOrd + Default>(name: &str, default: T) -> T {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<T>().ok())
                .filter(|v| *v > T::default())
                .unwrap_or(default)
        }
        Self {
            bytes: read("GDAL_MCP_TABLE_MAX_BYTES", DEFAULT_TABLE_BYTES),
            ratio: read("GDAL_MCP_TABLE_MAX_RATIO", DEFAULT_TABLE_RATIO),
            line_bytes: read("GDAL_MCP_TABLE_MAX_LINE_BYTES", DEFAULT_TABLE_LINE_BYTES),
            columns: read("GDAL_MCP_TABLE_MAX_COLUMNS", DEFAULT_TABLE_COLUMNS),
            cells: read("GDAL_MCP_TABLE_MAX_CELLS", DEFAULT_TABLE_CELLS),
        }
    }
}

/// Open a table file for our own reading: no link followed, no blocking, regular files only.
fn open_plain(path: &Path) -> Result<std::fs::File, GdalError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source: std::io::Error| GdalError::Io {
        operation: format!("reading {}", path.display()),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(GdalError::Arguments(format!(
            "input: {} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// Refuse a table that would make GDAL expand more than the budget, from what the file
/// declares, before GDAL opens it: a zip (XLSX, ODS, KMZ) by its central directory and its
/// streamed entries, a CSV by its size, its longest line and its header's columns. Else the
/// bytes GDAL is estimated to hold once it has read a zip (0 for a CSV, read row by row).
pub fn check_budget(path: &Path, budget: &TableBudget) -> Result<u64, GdalError> {
    let mut file = open_plain(path)?;
    let mut magic = [0u8; 4];
    let n = read_at(&mut file, 0, &mut magic)?;
    if n == 4 && magic == *b"PK\x03\x04" {
        check_zip(path, &mut file, budget)
    } else {
        check_csv(path, &mut file, budget).map(|()| 0)
    }
}

fn read_at(file: &mut std::fs::File, offset: u64, buf: &mut [u8]) -> Result<usize, GdalError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| GdalError::Io {
        operation: "reading a table".to_string(),
        source,
    };
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut done = 0;
    while done < buf.len() {
        let n = file.read(&mut buf[done..]).map_err(io)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

fn u16_at(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 2)
        .map_or(0, |s| u64::from(u16::from_le_bytes([s[0], s[1]])))
}

fn u32_at(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 4).map_or(0, |s| {
        u64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    })
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 8).map_or(0, |s| {
        u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]])
    })
}

/// A spreadsheet's zip, by its central directory (ZIP64 included).
fn check_zip(
    path: &Path,
    file: &mut std::fs::File,
    budget: &TableBudget,
) -> Result<u64, GdalError> {
    let refuse = |what: String| {
        Err(GdalError::Arguments(format!(
            "input: {} {what}; nothing was read. Tables are bounded to {} bytes uncompressed \
             (GDAL_MCP_TABLE_MAX_BYTES) and a compression ratio of {} for entries over 1 MiB \
             (GDAL_MCP_TABLE_MAX_RATIO)",
            path.display(),
            budget.bytes,
            budget.ratio
        )))
    };
    let size = file
        .metadata()
        .map_err(|source| GdalError::Io {
            operation: format!("reading {}", path.display()),
            source,
        })?
        .len();
    // The end-of-central-directory record is in the last 22 + 65535 bytes.
    let tail_len = size.min(22 + 65_535);
    let tail_start = size - tail_len;
    let mut tail = vec![0u8; tail_len as usize];
    read_at(file, tail_start, &mut tail)?;
    let Some(eocd) = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
    else {
        return refuse("is not a readable zip (no end of central directory)".to_string());
    };
    let mut entries = u16_at(&tail, eocd + 10);
    let mut cd_size = u32_at(&tail, eocd + 12);
    let mut cd_offset = u32_at(&tail, eocd + 16);
    if entries == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF {
        // ZIP64: the locator sits just before the record and points at the ZIP64 record.
        let locator = eocd
            .checked_sub(20)
            .filter(|&l| tail[l..l + 4] == [0x50, 0x4b, 0x06, 0x07]);
        let Some(locator) = locator else {
            return refuse("declares a ZIP64 directory without its locator".to_string());
        };
        let record_offset = u64_at(&tail, locator + 8);
        let mut record = [0u8; 56];
        if read_at(file, record_offset, &mut record)? < 56
            || record[..4] != [0x50, 0x4b, 0x06, 0x06]
        {
            return refuse("has a broken ZIP64 directory".to_string());
        }
        entries = u64_at(&record, 32);
        cd_size = u64_at(&record, 40);
        cd_offset = u64_at(&record, 48);
    }
    if entries > MAX_ZIP_ENTRIES || cd_size > MAX_CENTRAL_DIRECTORY || cd_offset > size {
        return refuse(format!(
            "declares {entries} entries in a central directory of {cd_size} bytes, more than a \
             table holds"
        ));
    }
    let mut directory = vec![0u8; cd_size as usize];
    let read = read_at(file, cd_offset, &mut directory)?;
    directory.truncate(read);
    let mut total: u64 = 0;
    let mut at = 0usize;
    let mut names: Vec<String> = Vec::new();
    for _ in 0..entries {
        if directory.get(at..at + 4) != Some(&[0x50u8, 0x4b, 0x01, 0x02][..]) {
            return refuse("has a broken central directory".to_string());
        }
        let mut compressed = u32_at(&directory, at + 20);
        let mut uncompressed = u32_at(&directory, at + 24);
        let name_len = u16_at(&directory, at + 28) as usize;
        let extra_len = u16_at(&directory, at + 30) as usize;
        let comment_len = u16_at(&directory, at + 32) as usize;
        let name = String::from_utf8_lossy(
            directory
                .get(at + 46..at + 46 + name_len)
                .unwrap_or_default(),
        )
        .to_string();
        // ZIP64 sizes: the 0x0001 extra field holds the 64-bit values of the fields set to
        // 0xFFFFFFFF, uncompressed first.
        let extra_start = at + 46 + name_len;
        let extra = directory
            .get(extra_start..extra_start + extra_len)
            .unwrap_or_default();
        let mut e = 0usize;
        while e + 4 <= extra.len() {
            let id = u16_at(extra, e);
            let len = u16_at(extra, e + 2) as usize;
            if id == 1 {
                let mut field = e + 4;
                if uncompressed == 0xFFFF_FFFF {
                    uncompressed = u64_at(extra, field);
                    field += 8;
                }
                if compressed == 0xFFFF_FFFF {
                    compressed = u64_at(extra, field);
                }
            }
            e += 4 + len;
        }
        if uncompressed > budget.bytes {
            return refuse(format!(
                "declares an entry \"{}\" of {uncompressed} bytes uncompressed",
                shorten_name(&name)
            ));
        }
        if uncompressed > RATIO_FLOOR && uncompressed / compressed.max(1) > budget.ratio {
            return refuse(format!(
                "declares an entry \"{}\" of {uncompressed} bytes compressed into {compressed} \
                 (a ratio of {}: a zip bomb, not a table)",
                shorten_name(&name),
                uncompressed / compressed.max(1)
            ));
        }
        total = total.saturating_add(uncompressed);
        if total > budget.bytes {
            return refuse(format!(
                "declares more than {} bytes uncompressed in all (at least {total})",
                budget.bytes
            ));
        }
        if name.contains("..") || name.starts_with('/') || name.contains('\\') {
            return refuse(format!(
                "has an entry named \"{}\", outside the archive",
                shorten_name(&name)
            ));
        }
        if !name.ends_with('/') {
            names.push(name);
        }
        at = extra_start + extra_len + comment_len;
    }
    // GDAL's zip reader does not stop at the declared size (measured with GDAL 3.6: an entry
    // declaring 100 bytes gave all its 1.2 MB), so the sizes are measured too: every entry is
    // inflated through GDAL as a stream, 64 KiB at a time, and counted up to the budget.
    let pinned = crate::gdal::policy::pinned(path)?;
    let mut inflated: u64 = 0;
    for name in &names {
        let limit = budget.bytes.saturating_sub(inflated);
        let n = stream_length(&format!("/vsizip/{}/{name}", pinned.display()), limit)?;
        inflated = inflated.saturating_add(n);
        if inflated > budget.bytes {
            return refuse(format!(
                "inflates to more than {} bytes (entry \"{}\" alone to at least {n}), more than \
                 its directory declares",
                budget.bytes,
                shorten_name(name)
            ));
        }
    }
    // What GDAL builds from the entries: a shared string copied into every cell that refers to
    // it, a repeated cell into every place (attack round 7, R7-10).
    expansion::check(path, &pinned, &names, budget)
}

/// The bytes GDAL reads from `vsi_path`, counted in 64 KiB chunks and stopped one past
/// `limit`.
fn stream_length(vsi_path: &str, limit: u64) -> Result<u64, GdalError> {
    let mut total: u64 = 0;
    expansion::read_entry(vsi_path, |chunk| {
        total = total.saturating_add(chunk.len() as u64);
        total <= limit
    })?;
    Ok(total)
}

fn shorten_name(name: &str) -> String {
    name.chars().take(80).collect()
}

/// A CSV: its size, its longest line and its header's columns.
fn check_csv(path: &Path, file: &mut std::fs::File, budget: &TableBudget) -> Result<(), GdalError> {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    let io = |source| GdalError::Io {
        operation: format!("reading {}", path.display()),
        source,
    };
    let size = file.metadata().map_err(io)?.len();
    if size > budget.bytes {
        return Err(GdalError::Arguments(format!(
            "input: {} is {size} bytes, above the table budget of {} bytes \
             (GDAL_MCP_TABLE_MAX_BYTES); split it",
            path.display(),
            budget.bytes
        )));
    }
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut reader = BufReader::with_capacity(1 << 16, &*file);
    let mut line: u64 = 0;
    let mut number: u64 = 1;
    let mut header_fields: [usize; 3] = [1, 1, 1];
    let mut in_header = true;
    loop {
        let chunk = reader.fill_buf().map_err(io)?;
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        for &byte in chunk {
            if byte == b'\n' {
                line = 0;
                number += 1;
                in_header = false;
                continue;
            }
            line += 1;
            if line > budget.line_bytes {
                return Err(GdalError::Arguments(format!(
                    "input: line {number} of {} is longer than {} bytes \
                     (GDAL_MCP_TABLE_MAX_LINE_BYTES); nothing was read",
                    path.display(),
                    budget.line_bytes
                )));
            }
            if in_header {
                match byte {
                    b',' => header_fields[0] += 1,
                    b';' => header_fields[1] += 1,
                    b'\t' => header_fields[2] += 1,
                    _ => {}
                }
            }
        }
        reader.consume(n);
    }
    let columns = header_fields.iter().copied().max().unwrap_or(1);
    if columns > budget.columns {
        return Err(GdalError::Arguments(format!(
            "input: the header of {} has {columns} columns, more than {} \
             (GDAL_MCP_TABLE_MAX_COLUMNS); nothing was read",
            path.display(),
            budget.columns
        )));
    }
    Ok(())
}

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
    /// `point`, `line` or `polygon`.
    pub geometry: String,
    pub features: u64,
    pub crs: String,
    /// x and y (and z) as read: which column holds which axis, and how it was written.
    pub axes: Vec<String>,
    /// `decimal`, `decimal_comma`, `dms` (text) or `dms_columns`; "x: ..., y: ..." when the
    /// axes differ.
    pub coordinate_format: String,
    pub columns: Vec<Column>,
    /// What was done to the data (rings closed, reoriented; columns dropped).
    pub notes: Vec<String>,
}

/// Why a cell is not a plain number, or `None` when it is one.
fn number_problem(text: &str) -> Option<&'static str> {
    let t = text.trim();
    if t.is_empty() {
        return Some("is empty");
    }
    if dms::looks_like_dms(t) {
        return Some(
            "looks like degrees-minutes-seconds text, which is read only in x and y columns in a \
             geographic crs; convert it to decimal degrees first",
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
    crate::gdal::facts::with_text_cells(|| run_with_text_cells(request))
}

/// What a column's name says it holds: `Some(true)` for the first axis of a map (longitude,
/// easting, x), `Some(false)` for the second (latitude, northing, y), `None` when the name does
/// not say, or says both. The name is read word by word, its words split at anything not a
/// letter or digit, at a lower-case letter followed by a capital and between letters and
/// digits: `decimalLatitude` (Darwin Core, every GBIF export), `POINT_Y` (ArcGIS's Add XY
/// Coordinates), `lat_dd` and `LatitudeWGS84` say the second axis; a whole-name list missed
/// them all (attack round 21, R21-B2).
#[cfg(test)]
fn axis_named(column: &str, geographic: bool) -> Option<bool> {
    axis_named_with(column, geographic, true)
}

/// Whether the CRS calls its east axis "X" and its north axis "Y", as GIS does; `false` for
/// the surveying convention of several national grids, whose EPSG definitions call the
/// easting "Y" and the northing "X" (CH1903 / LV03, EPSG:21781; DHDN / Gauss-Krüger,
/// EPSG:31467): there the letters say nothing of the axis (attack round 22, R22-B2: the right
/// columns of a Swiss table were refused as swapped, and the swap advised was 565 km off).
fn letters_are_gis(srs: &gdal::spatial_ref::SpatialRef) -> bool {
    // The CRS's own axes, with their abbreviations (PROJJSON: `{"name": "Easting",
    // "abbreviation": "Y", "direction": "east"}`; GDAL's WKT1 drops the abbreviation).
    let Ok(json) = srs.to_projjson() else {
        return true;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&json) else {
        return true;
    };
    let axes = value
        .pointer("/coordinate_system/axis")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    axes.iter().all(|axis| {
        let abbreviation = axis
            .get("abbreviation")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_ascii_uppercase();
        match axis.get("direction").and_then(serde_json::Value::as_str) {
            Some("north" | "south") => abbreviation != "X",
            Some("east" | "west") => abbreviation != "Y",
            _ => true,
        }
    })
}

/// [`axis_named`], reading the words `x` and `y` only where `letters` (the CRS calls east X and
/// north Y: [`letters_are_gis`]).
fn axis_named_with(column: &str, geographic: bool, letters: bool) -> Option<bool> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut previous: Option<char> = None;
    for c in column.chars() {
        let boundary = match previous {
            None => false,
            Some(p) => {
                !c.is_alphanumeric()
                    || (p.is_lowercase() && c.is_uppercase())
                    || (p.is_alphabetic() != c.is_alphabetic())
            }
        };
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word).to_lowercase());
        }
        if c.is_alphanumeric() {
            word.push(c);
        }
        previous = Some(c);
    }
    if !word.is_empty() {
        words.push(word.to_lowercase());
    }
    let first: &[&str] = if geographic {
        &[
            "lon",
            "long",
            "lng",
            "longitude",
            "longitud",
            "longitudine",
            "laenge",
            "x",
        ]
    } else {
        &["easting", "east", "x"]
    };
    let second: &[&str] = if geographic {
        &["lat", "latitude", "latitud", "latitudine", "breite", "y"]
    } else {
        &["northing", "north", "y"]
    };
    let counts = |w: &String, list: &[&str]| {
        list.contains(&w.as_str()) && (letters || !matches!(w.as_str(), "x" | "y"))
    };
    let says_first = words.iter().any(|w| counts(w, first));
    let says_second = words.iter().any(|w| counts(w, second));
    match (says_first, says_second) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// Refuse `x` and `y` given the columns whose names say the other axis: `x: "lat"` and
/// `y: "lon"` placed points in northern Italy 4,500 km away in Somalia, both readings in range
/// (attack round 20, R20-B10). The table's own header says which is which.
#[cfg(test)]
fn check_axis_names(x: &str, y: &str, geographic: bool) -> Result<(), GdalError> {
    check_axis_names_with(x, y, geographic, true)
}

/// [`check_axis_names`], with the CRS's own letters ([`letters_are_gis`]).
fn check_axis_names_with(
    x: &str,
    y: &str,
    geographic: bool,
    letters: bool,
) -> Result<(), GdalError> {
    let swapped = axis_named_with(x, geographic, letters) == Some(false)
        || axis_named_with(y, geographic, letters) == Some(true);
    if swapped {
        let (first, second) = if geographic {
            ("longitude", "latitude")
        } else {
            ("easting", "northing")
        };
        return Err(GdalError::Arguments(format!(
            "x, y: the columns look swapped: x names the column \"{x}\" and y the column \
             \"{y}\", whose names say the other axis (x is the {first}, y the {second}); swap \
             them (x: \"{y}\", y: \"{x}\")"
        )));
    }
    Ok(())
}

/// How far, in degrees, points may lie outside a projected CRS's area of use before the
/// other order of the columns is tried: a UTM zone's data often spills into the next zone.
const AREA_OF_USE_MARGIN_DEGREES: f64 = 3.0;

/// The CRS's area of use (west, south, east, north, in degrees) and its name, from PROJ's
/// database; `None` for a CRS without one.
fn area_of_use(srs: &gdal::spatial_ref::SpatialRef) -> Option<([f64; 4], String)> {
    let (mut west, mut south, mut east, mut north) = (0.0, 0.0, 0.0, 0.0);
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: a live SRS handle; the four outputs are written; `name` points into the SRS
    // (copied at once).
    let found = unsafe {
        gdal_sys::OSRGetAreaOfUse(
            srs.to_c_hsrs(),
            &mut west,
            &mut south,
            &mut east,
            &mut north,
            &mut name,
        )
    } != 0;
    if !found || west < -1000.0 {
        return None;
    }
    let name = if name.is_null() {
        "its area of use".to_string()
    } else {
        // SAFETY: a NUL-terminated string owned by the SRS, alive for this call.
        unsafe { std::ffi::CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    };
    Some(([west, south, east, north], name))
}

/// Refuse points of a projected `crs` that lie far outside its area of use ([`area_of_use`],
/// widened by [`AREA_OF_USE_MARGIN_DEGREES`]) when the columns the other way round put them
/// inside: the swap the column names could not show. A German table read with `x: Hochwert`,
/// `y: Rechtswert` in EPSG:31467 was written in Egypt, 2,648 km off, and Swiss LV03 `x`, `y`
/// (X is LV03's northing) in France, silently (attack round 23, R23-B16). Points outside
/// either way are written (a CRS used beyond its area, as UTM zones often are).
fn check_area_of_use(
    srs: &gdal::spatial_ref::SpatialRef,
    points: &[(f64, f64, Option<f64>)],
    x: &str,
    y: &str,
) -> Result<(), GdalError> {
    let Some(([west, south, east, north], name)) = area_of_use(srs) else {
        return Ok(());
    };
    let Ok(wgs84) = gdal::spatial_ref::SpatialRef::from_epsg(4326) else {
        return Ok(());
    };
    let Ok(to_degrees) = crate::gdal::facts::transform::coord_transform(srs, &wgs84, None) else {
        return Ok(());
    };
    let m = AREA_OF_USE_MARGIN_DEGREES;
    let inside = |lon: f64, lat: f64| {
        let lon_inside = if west <= east {
            lon >= west - m && lon <= east + m
        } else {
            lon >= west - m || lon <= east + m
        };
        lat.is_finite() && lon.is_finite() && lon_inside && lat >= south - m && lat <= north + m
    };
    // A sample of at most 1,000 points, evenly through the table.
    let step = points.len().div_ceil(1000).max(1);
    let sample: Vec<(f64, f64)> = points
        .iter()
        .step_by(step)
        .map(|(x, y, _)| (*x, *y))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if sample.is_empty() {
        return Ok(());
    }
    let degrees = |pairs: &[(f64, f64)]| -> Vec<(f64, f64)> {
        let mut xs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let mut ys: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let mut zs = vec![0.0; xs.len()];
        let _quiet = crate::gdal::ErrorCapture::start();
        if to_degrees
            .transform_coords(&mut xs, &mut ys, &mut zs)
            .is_err()
        {
            return Vec::new();
        }
        xs.into_iter().zip(ys).collect()
    };
    let outside = |found: &[(f64, f64)]| {
        if found.is_empty() {
            sample.len()
        } else {
            found
                .iter()
                .filter(|(lon, lat)| !inside(*lon, *lat))
                .count()
        }
    };
    let given = degrees(&sample);
    let given_outside = outside(&given);
    if given_outside * 2 <= sample.len() {
        return Ok(());
    }
    let swapped: Vec<(f64, f64)> = sample.iter().map(|(x, y)| (*y, *x)).collect();
    let other = degrees(&swapped);
    if outside(&other) * 10 > sample.len() {
        return Ok(());
    }
    let example = given
        .first()
        .map(|(lon, lat)| format!(" (the first at {lon:.2}° E, {lat:.2}° N)"))
        .unwrap_or_default();
    let example_swapped = other
        .first()
        .map(|(lon, lat)| format!(" (the first at {lon:.2}° E, {lat:.2}° N)"))
        .unwrap_or_default();
    Err(GdalError::Arguments(format!(
        "x, y: the columns look swapped: read as given, {given_outside} of {} points checked \
         lie outside {name}, the crs's area of use ({west}° to {east}° E, {south}° to {north}° \
         N){example}; read the other way round, they lie inside it{example_swapped}. Swap \
         them (x: \"{y}\", y: \"{x}\"), or give the crs the table is in; nothing was written",
        sample.len()
    )))
}

fn run_with_text_cells(request: &TableRequest) -> Result<TableOutput, GdalError> {
    let srs = crate::gdal::facts::parse_crs("crs", &request.crs)?;
    super::geometry::refuse_unless_degrees_from_greenwich(&srs, "crs")?;
    let geographic = srs.is_geographic();
    check_budget(&request.input, &request.budget)?;
    let dataset = crate::gdal::facts::open_table(&request.input)?;
    let mut layer = crate::gdal::vector::layer("sheet", &dataset, request.sheet.as_deref())?;
    let names: Vec<String> = layer.defn().fields().map(|f| f.name()).collect();
    if names.len() > request.budget.columns {
        return Err(GdalError::Arguments(format!(
            "input: the table has {} columns, more than {} (GDAL_MCP_TABLE_MAX_COLUMNS)",
            names.len(),
            request.budget.columns
        )));
    }
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
    check_axis_names_with(&request.x, &request.y, geographic, letters_are_gis(&srs))?;
    let zi = match &request.z {
        Some(z) => Some(find("z", z)?),
        None => None,
    };
    // Every row as text.
    // Held in memory: each cell's slot and its text, at most twice the byte budget.
    let most_held = request.budget.bytes.saturating_mul(2);
    let slot = std::mem::size_of::<Option<String>>() as u64;
    let mut held: u64 = 0;
    let mut memory = crate::budget::start("input: the table read into memory");
    let mut rows: Vec<Vec<Option<String>>> = Vec::new();
    for feature in layer.features() {
        if rows.len() == MAX_ROWS {
            return Err(GdalError::Arguments(format!(
                "input: the table has more than {MAX_ROWS} rows, the most one call reads; split \
                 it into parts of at most that many rows"
            )));
        }
        let row: Vec<Option<String>> = (0..names.len())
            .map(|i| {
                feature
                    .field_as_string(i)
                    .ok()
                    .flatten()
                    .filter(|v| !v.trim().is_empty())
            })
            .collect();
        held = held.saturating_add(
            row.iter()
                .map(|c| slot + c.as_ref().map_or(0, |t| t.len() as u64))
                .sum::<u64>(),
        );
        if held > most_held {
            return Err(GdalError::Arguments(format!(
                "input: the table's {} rows read so far hold more than {most_held} bytes of text, \
                 twice the table budget (GDAL_MCP_TABLE_MAX_BYTES); split it",
                rows.len() + 1
            )));
        }
        memory.cover(held)?;
        rows.push(row);
    }
    // Coordinates, strictly: each axis decimal, DMS text or DMS columns.
    let dms_column =
        |argument: &str, column: &Option<String>| -> Result<Option<usize>, GdalError> {
            column.as_deref().map(|c| find(argument, c)).transpose()
        };
    let x_parts = [
        dms_column("dms.x_minutes", &request.dms.x_minutes)?,
        dms_column("dms.x_seconds", &request.dms.x_seconds)?,
        dms_column("dms.x_hemisphere", &request.dms.x_hemisphere)?,
    ];
    let y_parts = [
        dms_column("dms.y_minutes", &request.dms.y_minutes)?,
        dms_column("dms.y_seconds", &request.dms.y_seconds)?,
        dms_column("dms.y_hemisphere", &request.dms.y_hemisphere)?,
    ];
    let axis_reader = AxisReader {
        rows: &rows,
        names: &names,
        geographic,
    };
    let (xs, x_format) = axis_reader.read("x", xi, x_parts, dms::Axis::X)?;
    let (ys, y_format) = axis_reader.read("y", yi, y_parts, dms::Axis::Y)?;
    let z_commas = zi.is_some_and(|zi| decimal_commas(&rows, zi, false));
    let mut points = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        let (x, y) = (xs[index], ys[index]);
        let z = match zi {
            Some(zi) => {
                let written = row[zi].as_deref().unwrap_or("");
                let pointed = z_commas.then(|| written.replace(',', "."));
                let text = pointed.as_deref().unwrap_or(written);
                if let Some(problem) = number_problem(text) {
                    return Err(GdalError::Arguments(format!(
                        "z: row {} (data row, header not counted), column \"{}\": \"{text}\" \
                         {problem}; nothing was written",
                        index + 1,
                        names[zi]
                    )));
                }
                Some(text.trim().parse::<f64>().unwrap_or(f64::NAN))
            }
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
    if !geographic {
        check_area_of_use(&srs, &points, &request.x, &request.y)?;
    }
    // Points, or groups of rows as lines or polygons.
    let kind = request.geometry;
    let mut notes = Vec::new();
    let mut used: Vec<usize> = [Some(xi), Some(yi), zi]
        .into_iter()
        .chain(x_parts)
        .chain(y_parts)
        .flatten()
        .collect();
    let shapes: Vec<shapes::Shape> = if kind == shapes::Kind::Point {
        for (argument, given) in [
            ("group_by", &request.group_by),
            ("order_by", &request.order_by),
        ] {
            if given.is_some() {
                return Err(GdalError::Arguments(format!(
                    "{argument}: applies to geometry \"line\" or \"polygon\"; a point layer has \
                     one feature per row"
                )));
            }
        }
        points
            .iter()
            .enumerate()
            .map(|(row, vertex)| shapes::Shape {
                key: String::new(),
                rows: vec![row],
                vertices: vec![*vertex],
            })
            .collect()
    } else {
        let group = match &request.group_by {
            Some(g) => Some((find("group_by", g)?, g.as_str())),
            None => None,
        };
        let order = match &request.order_by {
            Some(o) => {
                let (column, descending) = shapes::order_column(o, &names);
                Some((find("order_by", column)?, column, descending))
            }
            None => None,
        };
        for (index, argument) in [
            (group.map(|g| g.0), "group_by"),
            (order.map(|o| o.0), "order_by"),
        ] {
            if index.is_some_and(|i| used.contains(&i)) {
                return Err(GdalError::Arguments(format!(
                    "{argument}: names a coordinate column; name the column of group ids or of \
                     vertex sequence numbers"
                )));
            }
        }
        let groups = shapes::group_rows(&rows, group, order)?;
        let order_hint = match order {
            Some((_, column, _)) => format!(
                "its vertices were taken in \"{column}\" order: check that column (vertices out \
                 of order make a ring cross itself)"
            ),
            None => "its vertices were taken in the table's row order; name the column of \
                     vertex sequence numbers with order_by"
                .to_string(),
        };
        let mut builder = shapes::Builder {
            kind,
            grouped: group.is_some(),
            order_hint: &order_hint,
            repairs: shapes::Repairs::default(),
        };
        let mut built = Vec::with_capacity(groups.len());
        for (key, members) in groups {
            let vertices = members.iter().map(|&r| points[r]).collect();
            built.push(builder.build(key, &members, vertices, ring_invalidity)?);
        }
        let grouped = group.is_some();
        let repairs = builder.repairs;
        if !repairs.closed.is_empty() {
            notes.push(format!(
                "{}: the ring was not closed; closed by repeating its first vertex",
                shapes::list(&repairs.closed, grouped)
            ));
        }
        if !repairs.snapped.is_empty() {
            notes.push(format!(
                "{}: the last vertex was within 1e-9 of the ring's extent of the first; snapped \
                 onto it to close the ring",
                shapes::list(&repairs.snapped, grouped)
            ));
        }
        if !repairs.reversed.is_empty() {
            notes.push(format!(
                "{}: the ring ran clockwise; reversed to counter-clockwise (exterior rings are \
                 counter-clockwise, as in GeoJSON and the OGC simple features)",
                shapes::list(&repairs.reversed, grouped)
            ));
        }
        if order.is_none() {
            notes.push("vertices taken in the table's row order (no order_by)".to_string());
        }
        if let Some((o, _, _)) = order {
            used.push(o);
        }
        // Columns that vary within a group are per-vertex values: dropped, and said.
        let varying: Vec<usize> = (0..names.len())
            .filter(|i| !used.contains(i) && Some(*i) != group.map(|g| g.0))
            .filter(|&i| {
                let cell = |r: usize| rows[r][i].as_deref().map(str::trim);
                built.iter().any(|shape| {
                    let first = shape.rows.first().and_then(|&r| cell(r));
                    shape.rows.iter().any(|&r| cell(r) != first)
                })
            })
            .collect();
        if !varying.is_empty() {
            notes.push(format!(
                "column(s) {} vary within a group (per-vertex values): not kept",
                varying
                    .iter()
                    .map(|&i| format!("\"{}\"", names[i]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            used.extend(varying);
        }
        built
    };
    // Other columns' types, from all their values.
    let others: Vec<usize> = (0..names.len()).filter(|i| !used.contains(i)).collect();
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
        let mut out = staging.create_vector(&request.driver, failed)?;
        let mut layer_srs: SpatialRef = srs.clone();
        layer_srs
            .set_axis_mapping_strategy(gdal::spatial_ref::AxisMappingStrategy::TraditionalGisOrder);
        use gdal_sys::OGRwkbGeometryType as T;
        let ty = match (kind, zi.is_some()) {
            (shapes::Kind::Point, false) => T::wkbPoint,
            (shapes::Kind::Point, true) => T::wkbPoint25D,
            (shapes::Kind::Line, false) => T::wkbLineString,
            (shapes::Kind::Line, true) => T::wkbLineString25D,
            (shapes::Kind::Polygon, false) => T::wkbPolygon,
            (shapes::Kind::Polygon, true) => T::wkbPolygon25D,
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
        for shape in &shapes {
            let geometry = geometry_of(kind, &shape.vertices).map_err(|_| failed("geometry"))?;
            let mut feature =
                gdal::vector::Feature::new(layer.defn()).map_err(|_| failed("feature"))?;
            feature
                .set_geometry(geometry)
                .map_err(|_| failed("geometry"))?;
            let Some(row) = shape.rows.first().map(|&r| &rows[r]) else {
                continue;
            };
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
    let described = |format: Format| match format {
        Format::Decimal => "",
        Format::DecimalComma => ", decimals written with a comma (\"10,5\" read as 10.5)",
        Format::Dms => ", degrees-minutes-seconds text",
        Format::DmsColumns => ", degrees with minute/second columns",
    };
    let mut axes = vec![
        format!(
            "x (longitude or easting) = \"{}\"{}",
            request.x,
            described(x_format)
        ),
        format!(
            "y (latitude or northing) = \"{}\"{}",
            request.y,
            described(y_format)
        ),
    ];
    if let Some(z) = &request.z {
        axes.push(format!("z = \"{z}\""));
    }
    let coordinate_format = if x_format == y_format {
        x_format.name().to_string()
    } else {
        format!("x: {}, y: {}", x_format.name(), y_format.name())
    };
    Ok(TableOutput {
        output: request.output.display().to_string(),
        files: files.iter().map(|p| p.display().to_string()).collect(),
        layer: layer_name,
        geometry: kind.name().to_string(),
        features: shapes.len() as u64,
        crs: srs
            .auth_name()
            .zip(srs.auth_code().ok())
            .map(|(a, c)| format!("{a}:{c}"))
            .or_else(|| srs.name())
            .unwrap_or_else(|| request.crs.clone()),
        axes,
        coordinate_format,
        columns: columns.into_iter().map(|(_, c)| c).collect(),
        notes,
    })
}

/// The OGR geometry of one shape's vertices.
fn geometry_of(kind: shapes::Kind, vertices: &[shapes::Vertex]) -> gdal::errors::Result<Geometry> {
    use gdal_sys::OGRwkbGeometryType as T;
    let has_z = vertices.iter().any(|v| v.2.is_some());
    let add = |geometry: &mut Geometry| {
        for (x, y, z) in vertices {
            match z {
                Some(z) => geometry.add_point((*x, *y, *z)),
                None => geometry.add_point_2d((*x, *y)),
            }
        }
    };
    match kind {
        shapes::Kind::Point => {
            let mut point = Geometry::empty(if has_z { T::wkbPoint25D } else { T::wkbPoint })?;
            add(&mut point);
            Ok(point)
        }
        shapes::Kind::Line => {
            let mut line = Geometry::empty(if has_z {
                T::wkbLineString25D
            } else {
                T::wkbLineString
            })?;
            add(&mut line);
            Ok(line)
        }
        shapes::Kind::Polygon => {
            let mut ring = Geometry::empty(T::wkbLinearRing)?;
            add(&mut ring);
            let mut polygon = Geometry::empty(if has_z {
                T::wkbPolygon25D
            } else {
                T::wkbPolygon
            })?;
            polygon.add_geometry(ring)?;
            Ok(polygon)
        }
    }
}

/// GEOS's reason a ring (as a polygon) is invalid, if it is.
fn ring_invalidity(vertices: &[shapes::Vertex]) -> Option<String> {
    let flat: Vec<shapes::Vertex> = vertices.iter().map(|&(x, y, _)| (x, y, None)).collect();
    let polygon = geometry_of(shapes::Kind::Polygon, &flat).ok()?;
    crate::gdal::vector::geometry::invalidity_reason(&polygon)
}

/// How an axis was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Decimal,
    /// Decimals written with a comma ("10,5"), in a column where no value can be read
    /// otherwise ([`decimal_commas`]).
    DecimalComma,
    Dms,
    DmsColumns,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Decimal => "decimal",
            Format::DecimalComma => "decimal_comma",
            Format::Dms => "dms",
            Format::DmsColumns => "dms_columns",
        }
    }
}

/// Whether `column` writes its decimals with a comma: a value such as "10,5" is a decimal
/// comma or a thousands separator, and the column settles which. It does when no value has a
/// point, every value with a comma is `digits,digits`, and at least one cannot be a
/// thousands group: a fraction that is not three digits ("10,5", "11,75"), a whole part of
/// more than three digits or with a leading zero ("0,500"). In a geographic CRS every value
/// settles it, since "1,234" read as thousands is beyond any degree (attack round 16, R16-B20:
/// the usual European export, `name;lon;lat` / `A;10,5;50,25`, was refused as ambiguous).
/// "1,234" alone in a projected column stays refused.
fn decimal_commas(rows: &[Vec<Option<String>>], column: usize, geographic: bool) -> bool {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let mut commas = false;
    let mut settled = geographic;
    for row in rows {
        let text = cell(row, column).trim();
        if text.contains('.') {
            return false;
        }
        let Some((whole, fraction)) = text.split_once(',') else {
            continue;
        };
        let whole = whole.strip_prefix(['-', '+']).unwrap_or(whole);
        if !digits(whole) || !digits(fraction) {
            return false;
        }
        commas = true;
        settled |= fraction.len() != 3 || whole.len() > 3 || whole.starts_with('0');
    }
    commas && settled
}

/// A cell's text ("" when empty).
fn cell(row: &[Option<String>], column: usize) -> &str {
    row[column].as_deref().unwrap_or("")
}

/// Reads one coordinate axis of every row.
struct AxisReader<'a> {
    rows: &'a [Vec<Option<String>>],
    names: &'a [String],
    geographic: bool,
}

impl AxisReader<'_> {
    /// The axis's value on every row, and how it was written: `parts` are the minute, second and
    /// hemisphere columns, if any.
    fn read(
        &self,
        argument: &str,
        column: usize,
        parts: [Option<usize>; 3],
        axis: dms::Axis,
    ) -> Result<(Vec<f64>, Format), GdalError> {
        let name = &self.names[column];
        let at = |index: usize| format!("row {} (data row, header not counted)", index + 1);
        if parts.iter().any(Option::is_some) {
            if !self.geographic {
                return Err(GdalError::Arguments(
                    "dms: degrees-minutes-seconds columns need a geographic crs; the crs given \
                     is projected"
                        .to_string(),
                ));
            }
            let [minutes, seconds, hemisphere] = parts;
            if seconds.is_some() && minutes.is_none() {
                return Err(GdalError::Arguments(format!(
                    "dms.{argument}_seconds: needs {argument}_minutes too"
                )));
            }
            let mut values = Vec::with_capacity(self.rows.len());
            for (index, row) in self.rows.iter().enumerate() {
                let mut texts = vec![cell(row, column)];
                let mut columns = vec![format!("\"{name}\"")];
                for part in [minutes, seconds, hemisphere].into_iter().flatten() {
                    texts.push(cell(row, part));
                    columns.push(format!("\"{}\"", self.names[part]));
                }
                let empty = [Some(column), minutes, seconds, hemisphere]
                    .into_iter()
                    .flatten()
                    .find(|&c| row[c].is_none());
                let value = match empty {
                    Some(c) => Err(format!("has column \"{}\" empty", self.names[c])),
                    None => dms::parse_parts(
                        cell(row, column),
                        minutes.map(|c| cell(row, c)),
                        seconds.map(|c| cell(row, c)),
                        hemisphere.map(|c| cell(row, c)),
                        axis,
                    ),
                };
                match value {
                    Ok(v) => values.push(v),
                    Err(problem) => {
                        return Err(GdalError::Arguments(format!(
                            "{argument}: {}, columns {}: \"{}\" {problem}; nothing was written",
                            at(index),
                            columns.join(", "),
                            texts.join(" | ")
                        )))
                    }
                }
            }
            return Ok((values, Format::DmsColumns));
        }
        let first_dms = self
            .rows
            .iter()
            .position(|row| dms::looks_like_dms(cell(row, column)));
        let comma = first_dms.is_none() && decimal_commas(self.rows, column, self.geographic);
        let mut values = Vec::with_capacity(self.rows.len());
        for (index, row) in self.rows.iter().enumerate() {
            let text = cell(row, column);
            let pointed = comma.then(|| text.replace(',', "."));
            let decimal = pointed.as_deref().unwrap_or(text);
            let value = match first_dms {
                Some(_) if !self.geographic => Err(
                    "is degrees-minutes-seconds text, which needs a geographic crs (the crs \
                     given is projected)"
                        .to_string(),
                ),
                Some(first) if !dms::looks_like_dms(text) && !text.trim().is_empty() => {
                    Err(format!(
                        "is a plain number in a column of degrees-minutes-seconds text (row {}: \
                         \"{}\"); write every value one way",
                        first + 1,
                        cell(&self.rows[first], column)
                    ))
                }
                Some(_) => dms::parse_text(text, axis),
                None => match number_problem(decimal) {
                    Some(problem) => Err(problem.to_string()),
                    None => Ok(decimal.trim().parse::<f64>().unwrap_or(f64::NAN)),
                },
            };
            match value {
                Ok(v) => values.push(v),
                Err(problem) => {
                    return Err(GdalError::Arguments(format!(
                        "{argument}: {}, column \"{name}\": \"{text}\" {problem}; nothing was \
                         written",
                        at(index)
                    )))
                }
            }
        }
        Ok((
            values,
            if first_dms.is_some() {
                Format::Dms
            } else if comma {
                Format::DecimalComma
            } else {
                Format::Decimal
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack round 21, R21-B2: the names of ordinary exports say their axis word by word;
    /// a name that says both, or neither, says nothing (the twins).
    #[test]
    fn r21_b2_column_names_say_their_axis_word_by_word() {
        for (name, first) in [
            ("decimalLatitude", false),
            ("decimalLongitude", true),
            ("POINT_Y", false),
            ("POINT_X", true),
            ("lat_dd", false),
            ("LatitudeWGS84", false),
            ("Y", false),
            ("lon", true),
            ("Long", true),
        ] {
            assert_eq!(axis_named(name, true), Some(first), "{name}");
        }
        assert_eq!(axis_named("Northing_m", false), Some(false));
        assert_eq!(axis_named("EASTING", false), Some(true));
        for name in [
            "latlon_id",
            "lat_lon",
            "year",
            "value",
            "plot",
            "xylem",
            "Layer",
        ] {
            assert_eq!(axis_named(name, true), None, "{name}");
        }
        assert!(check_axis_names("decimalLatitude", "decimalLongitude", true).is_err());
        assert!(check_axis_names("POINT_Y", "POINT_X", false).is_err());
        assert!(check_axis_names("decimalLongitude", "decimalLatitude", true).is_ok());
        // Attack round 22, R22-B2: where the CRS calls the easting Y, the letters say nothing.
        let lv03 = gdal::spatial_ref::SpatialRef::from_epsg(21781).unwrap();
        assert!(!letters_are_gis(&lv03));
        assert!(check_axis_names_with("Y", "X", false, letters_are_gis(&lv03)).is_ok());
        assert!(check_axis_names_with("Rechtswert_Y", "Hochwert_X", false, false).is_ok());
        let utm = gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap();
        assert!(letters_are_gis(&utm));
        assert!(check_axis_names_with("Y", "X", false, letters_are_gis(&utm)).is_err());
    }

    /// Attack round 16, R16-B20: a column settles whether its commas are decimal commas.
    #[test]
    fn r16_b20_a_column_settles_its_decimal_commas() {
        let column = |values: &[&str]| -> Vec<Vec<Option<String>>> {
            values.iter().map(|v| vec![Some(v.to_string())]).collect()
        };
        // A fraction that is not three digits, a long or zero whole part: decimal commas.
        assert!(decimal_commas(&column(&["10,5", "11,75"]), 0, false));
        assert!(decimal_commas(&column(&["1,234", "2,5"]), 0, false));
        assert!(decimal_commas(&column(&["0,500"]), 0, false));
        assert!(decimal_commas(&column(&["4321,125", "-12"]), 0, false));
        // In degrees, "1,234" cannot be a thousand and more.
        assert!(decimal_commas(&column(&["10,123", "11,456"]), 0, true));
        // Ambiguous in a projected column, or not of the form at all: left to the refusal.
        assert!(!decimal_commas(&column(&["1,234", "5,678"]), 0, false));
        assert!(!decimal_commas(&column(&["1,234,567"]), 0, false));
        assert!(!decimal_commas(&column(&["10,5", "12.25"]), 0, true));
        assert!(!decimal_commas(&column(&["1.234,5"]), 0, true));
        assert!(!decimal_commas(&column(&["12", "13"]), 0, true));
    }

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

    /// Write a zip with one deflated entry `name` holding `bytes`, through GDAL's own zip
    /// writer.
    fn zip_with(path: &Path, name: &str, bytes: &[u8]) {
        let target = format!("/vsizip/{}/{name}", path.display());
        let c_path = std::ffi::CString::new(target).unwrap();
        let mode = std::ffi::CString::new("wb").unwrap();
        unsafe {
            let fp = gdal_sys::VSIFOpenL(c_path.as_ptr(), mode.as_ptr());
            assert!(!fp.is_null());
            let written = gdal_sys::VSIFWriteL(bytes.as_ptr().cast(), 1, bytes.len(), fp);
            assert_eq!(written, bytes.len());
            gdal_sys::VSIFCloseL(fp);
        }
    }

    /// A tiny budget for the tests: 1 MiB, ratio 200, lines of 1 KiB, 10 columns.
    fn small() -> TableBudget {
        TableBudget {
            bytes: 1 << 20,
            ratio: 200,
            line_bytes: 1024,
            columns: 10,
            cells: 10_000,
        }
    }

    /// Write an XLSX of `sheets` (name, zip entry), each with its relationship, and the entries
    /// `parts` (name, XML), through GDAL's own zip writer.
    fn xlsx_with(path: &Path, sheets: &[(&str, &str)], parts: &[(&str, String)]) {
        let ns = "http://schemas.openxmlformats.org";
        let mut workbook = format!(
            "<?xml version=\"1.0\"?><workbook xmlns=\"{ns}/spreadsheetml/2006/main\" \
             xmlns:r=\"{ns}/officeDocument/2006/relationships\"><sheets>"
        );
        let mut rels = format!(
            "<?xml version=\"1.0\"?><Relationships xmlns=\"{ns}/package/2006/relationships\">"
        );
        for (i, (name, target)) in sheets.iter().enumerate() {
            workbook.push_str(&format!(
                "<sheet name=\"{name}\" sheetId=\"{}\" r:id=\"rId{}\"/>",
                i + 1,
                i + 1
            ));
            rels.push_str(&format!(
                "<Relationship Id=\"rId{}\" Type=\"{ns}/officeDocument/2006/relationships/worksheet\" \
                 Target=\"{target}\"/>",
                i + 1
            ));
        }
        workbook.push_str("</sheets></workbook>");
        rels.push_str("</Relationships>");
        zip_with(
            path,
            "[Content_Types].xml",
            format!(
                "<?xml version=\"1.0\"?><Types xmlns=\"{ns}/package/2006/content-types\">\
                 <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
                 <Override PartName=\"/xl/workbook.xml\" ContentType=\"application/\
                 vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/></Types>"
            )
            .as_bytes(),
        );
        zip_with(path, "xl/workbook.xml", workbook.as_bytes());
        zip_with(path, "xl/_rels/workbook.xml.rels", rels.as_bytes());
        for (name, xml) in parts {
            zip_with(path, name, xml.as_bytes());
        }
    }

    /// A worksheet: a header `x`, `y` and `z` in column `far`, then `rows` rows holding x and
    /// y and, at `far`, an empty formatted cell (as Excel writes for formatted rows).
    fn far_sheet(far: &str, rows: usize) -> String {
        let mut xml = format!(
            "<?xml version=\"1.0\"?><worksheet><sheetData><row r=\"1\">\
             <c r=\"A1\" t=\"inlineStr\"><is><t>x</t></is></c>\
             <c r=\"B1\" t=\"inlineStr\"><is><t>y</t></is></c>\
             <c r=\"{far}1\" t=\"inlineStr\"><is><t>z</t></is></c></row>"
        );
        for i in 2..rows + 2 {
            xml.push_str(&format!(
                "<row r=\"{i}\"><c r=\"A{i}\"><v>10</v></c><c r=\"B{i}\"><v>45</v></c>\
                 <c r=\"{far}{i}\" s=\"1\"/></row>"
            ));
        }
        xml.push_str("</sheetData></worksheet>");
        xml
    }

    /// Regression, issue 21 attack round 8, R8-1: GDAL's XLSX reader gives every row as many
    /// fields as the widest column any cell reaches, so rows of three cells, the third an
    /// empty formatted cell at ALK (column 1000), made a 660 KB file take `vector_info` to
    /// 1.95 GB. The cells GDAL fills (rows x widest column) are counted from the sheet before
    /// the open and refused above `GDAL_MCP_TABLE_MAX_CELLS`, naming the count; the clean twin
    /// (the same rows, three columns) passes. Every sheet of the workbook counts its part,
    /// wherever it is in the zip and however often it is named.
    #[test]
    fn r8_1_rows_filled_to_a_far_column_are_refused_by_their_cells() {
        crate::gdal::init();
        let dir = tempfile::tempdir().unwrap();
        let budget = TableBudget {
            cells: 100_000,
            ..TableBudget::default()
        };
        // 201 rows (the header too) x 1000 columns.
        let far = dir.path().join("far.xlsx");
        xlsx_with(
            &far,
            &[("pts", "worksheets/sheet1.xml")],
            &[("xl/worksheets/sheet1.xml", far_sheet("ALL", 200))],
        );
        assert!(std::fs::metadata(&far).unwrap().len() < 10_000);
        let error = check_budget(&far, &budget).err().unwrap().to_string();
        assert!(
            error.contains("201000 cells")
                && error.contains("100000 cells")
                && error.contains("GDAL_MCP_TABLE_MAX_CELLS"),
            "{error}"
        );
        // A column past GDAL's 2000 fields counts as 2000.
        let farther = dir.path().join("farther.xlsx");
        xlsx_with(
            &farther,
            &[("pts", "worksheets/sheet1.xml")],
            &[("xl/worksheets/sheet1.xml", far_sheet("ZZZ", 60))],
        );
        let error = check_budget(&farther, &budget).err().unwrap().to_string();
        assert!(error.contains("122000 cells,"), "{error}");
        // The clean twin: the same rows up to column C, and an ordinary wide sheet.
        let near = dir.path().join("near.xlsx");
        xlsx_with(
            &near,
            &[("pts", "worksheets/sheet1.xml")],
            &[("xl/worksheets/sheet1.xml", far_sheet("C", 200))],
        );
        check_budget(&near, &budget).unwrap();
        // 60 rows to ALL: 61,000 cells pass alone; named by two sheets, or placed outside
        // xl/worksheets and named by two, they count twice.
        for (sheets, part) in [
            (
                vec![
                    ("a", "worksheets/sheet1.xml"),
                    ("b", "worksheets/sheet1.xml"),
                ],
                "xl/worksheets/sheet1.xml",
            ),
            (
                vec![("a", "/other/x.xml"), ("b", "../other/x.xml")],
                "other/x.xml",
            ),
        ] {
            let path = dir.path().join(format!("twice{}.xlsx", sheets[0].1.len()));
            xlsx_with(&path, &sheets, &[(part, far_sheet("ALL", 60))]);
            let error = check_budget(&path, &budget).err().unwrap().to_string();
            assert!(error.contains("122000 cells,"), "{part}: {error}");
            let once = dir.path().join(format!("once{}.xlsx", sheets[0].1.len()));
            xlsx_with(&once, &sheets[..1], &[(part, far_sheet("ALL", 60))]);
            check_budget(&once, &budget).unwrap();
        }
    }

    /// Regression (issue 21): a 3.4 MB XLSX that inflates to 3.4 GB made points_from_table
    /// take 3.4 GB. The zip's central directory is read before GDAL opens the file: an entry
    /// whose ratio is absurd, or above the byte budget, is refused; an ordinary one passes.
    #[test]
    fn a_zip_bomb_is_refused_from_its_central_directory() {
        let dir = tempfile::tempdir().unwrap();
        // 4 MiB of zeros deflate to a few KiB: a ratio near 1000.
        let bomb = dir.path().join("bomb.xlsx");
        zip_with(&bomb, "xl/worksheets/sheet1.xml", &vec![b'0'; 4 << 20]);
        let error = check_budget(&bomb, &TableBudget::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("zip bomb") && error.contains("GDAL_MCP_TABLE_MAX_RATIO"),
            "{error}"
        );
        // Above the byte budget, whatever the ratio.
        let error = check_budget(&bomb, &small()).err().unwrap().to_string();
        assert!(
            error.contains("4194304 bytes uncompressed")
                && error.contains("GDAL_MCP_TABLE_MAX_BYTES"),
            "{error}"
        );
        // The clean twin: ordinary spreadsheet XML passes.
        let mut xml = String::new();
        for i in 0..2000 {
            xml.push_str(&format!(
                "<row r=\"{i}\"><c><v>{}</v></c></row>",
                i * 7919 % 1000
            ));
        }
        let table = dir.path().join("ok.xlsx");
        zip_with(&table, "xl/worksheets/sheet1.xml", xml.as_bytes());
        check_budget(&table, &TableBudget::default()).unwrap();
        // Not a zip at all, though it starts like one.
        let broken = dir.path().join("broken.xlsx");
        std::fs::write(&broken, b"PK\x03\x04 nothing else").unwrap();
        assert!(check_budget(&broken, &small()).is_err());
    }

    /// GDAL reads past an entry's declared size: an archive whose directory understates its
    /// entry is measured, and refused once the inflated bytes pass the budget.
    #[test]
    fn a_directory_that_understates_its_sizes_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lie.xlsx");
        let mut state: u64 = 7;
        let text: Vec<u8> = (0..(3 << 20))
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                b'0' + (state >> 60) as u8 % 10
            })
            .collect();
        zip_with(&path, "xl/worksheets/sheet1.xml", &text);
        let honest = check_budget(&path, &small()).err().unwrap().to_string();
        assert!(honest.contains("3145728 bytes uncompressed"), "{honest}");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes
            .windows(4)
            .position(|w| w == [0x50, 0x4b, 0x01, 0x02])
            .unwrap();
        bytes[at + 24..at + 28].copy_from_slice(&100u32.to_le_bytes());
        // The local header says the same (as a forger would write it).
        bytes[22..26].copy_from_slice(&100u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let error = check_budget(&path, &small()).err().unwrap().to_string();
        assert!(
            error.contains("inflates to more than 1048576 bytes"),
            "{error}"
        );
    }

    #[test]
    fn a_csv_is_bounded_in_bytes_lines_and_columns() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.csv");
        std::fs::write(&ok, "id,x,y\n1,10.5,20.5\n2,11,21\n").unwrap();
        check_budget(&ok, &small()).unwrap();
        let long = dir.path().join("long.csv");
        std::fs::write(&long, format!("id,x,y\n1,{},2\n", "9".repeat(2000))).unwrap();
        let error = check_budget(&long, &small()).err().unwrap().to_string();
        assert!(
            error.contains("line 2") && error.contains("GDAL_MCP_TABLE_MAX_LINE_BYTES"),
            "{error}"
        );
        let wide = dir.path().join("wide.csv");
        std::fs::write(&wide, format!("{}\n", ["c"; 11].join(";"))).unwrap();
        let error = check_budget(&wide, &small()).err().unwrap().to_string();
        assert!(error.contains("11 columns"), "{error}");
        let big = dir.path().join("big.csv");
        std::fs::write(&big, "x,y\n1,2\n".repeat(200_000)).unwrap();
        let error = check_budget(&big, &small()).err().unwrap().to_string();
        assert!(error.contains("GDAL_MCP_TABLE_MAX_BYTES"), "{error}");
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
