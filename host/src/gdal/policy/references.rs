//! What an input makes GDAL read besides itself, found *before* GDAL opens it, from the bytes
//! GDAL would parse and parsed the way GDAL parses them.
//!
//! * **SQLite databases** (GeoPackage, SpatiaLite, MBTiles, or any file that starts with the
//!   16-byte `SQLite format 3\0` header, whatever its name): a schema may declare a virtual
//!   table whose module reads another file (SpatiaLite's `VirtualText`, `VirtualShape`,
//!   `VirtualDBF`, `VirtualXL`, `VirtualGeoJSON`, GDAL's own `VirtualOGR`, ...), and a view,
//!   trigger, generated column or index may call a function that reads or writes files
//!   (`load_extension`, SpatiaLite's `BlobFromFile`, `ImportSHP`, ...) or corrupts memory
//!   (`fts3_tokenizer`). GDAL lists only the container, so the schema is read here, with the
//!   system SQLite opened read-only and no module instantiated ([`check_sqlite`]).
//! * **VRT documents**: every element that names a file GDAL opens (`SourceFilename` in every
//!   kind of source, mask bands and overviews included, `SourceDataset` of a warped VRT,
//!   geolocation arrays, an `OVERVIEW_FILE`) and every CRS definition, read with a real XML
//!   parser, so character references (`&#47;`), CDATA and predefined entities are decoded as
//!   GDAL decodes them ([`vrt_references`]). A document GDAL would parse and this parser cannot
//!   (a DTD, a byte that is not UTF-8) is refused, never skipped.

use super::xml;
use crate::gdal::GdalError;
use std::path::{Path, PathBuf};

/// The first 16 bytes of every SQLite 3 database.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Virtual-table modules that read only the database they are declared in: SQLite's R*Tree
/// (every GeoPackage's spatial index) and full-text indexes, and the SpatiaLite modules that
/// GDAL and SpatiaLite write into SpatiaLite databases (spatial index, elementary geometries,
/// nearest neighbours). Every other module (`VirtualText`, `VirtualShape`, `VirtualDBF`,
/// `VirtualXL`, `VirtualGeoJSON`, `VirtualNetwork`, `VirtualOGR`, ...) is refused.
const DATABASE_ONLY_MODULES: &[&str] = &[
    "rtree",
    "rtree_i32",
    "fts3",
    "fts4",
    "fts5",
    "virtualspatialindex",
    "virtualelementary",
    "virtualknn",
    "virtualknn2",
];

/// SQL functions a schema may not call (in a view, trigger, generated column, default, check
/// or index expression): they read, write or load files, or corrupt memory. Names are matched
/// exactly; [`FILE_FUNCTION_PREFIXES`] are matched as prefixes.
const FILE_FUNCTIONS: &[&str] = &[
    "load_extension",
    "fts3_tokenizer",
    "readfile",
    "writefile",
    "edit",
    "fsdir",
    "blobfromfile",
    "blobtofile",
    "xb_loadxml",
    "xb_storexml",
];

/// SQL functions that build a value far larger than their input (`hex(zeroblob(200000000))`
/// took 1.4 GB in `vector_info`: issue 21, attack round 5, F5), or aggregate rows into one
/// value. A view or a generated column calling one is refused: it runs on every read.
const GROWTH_FUNCTIONS: &[&str] = &[
    "zeroblob",
    "randomblob",
    "printf",
    "format",
    "replace",
    "group_concat",
    "string_agg",
    "json_group_array",
    "json_group_object",
];

/// Prefixes of SpatiaLite's and GDAL's file functions (`ImportSHP`, `ExportGeoJSON2`,
/// `ZipFile_ShpN`, `SqlProc_FromFile`, `ogr_datasource_load_layers`, ...).
const FILE_FUNCTION_PREFIXES: &[&str] = &["import", "export", "zipfile", "sqlproc_", "ogr_"];

/// Whether `path` is a regular file that starts with SQLite's header.
pub fn is_sqlite(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 16];
    crate::gdal::policy::open_regular(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == SQLITE_HEADER
}

/// Refuse a SQLite database whose schema makes GDAL read anything but the database: a virtual
/// table over another module than `DATABASE_ONLY_MODULES`, or SQL that calls a file
/// function. The schema is read with SQLite opened read-only, without extensions and without
/// touching any table: declaring a virtual table instantiates nothing until it is queried, and
/// nothing here queries one.
pub fn check_sqlite(path: &Path) -> Result<(), GdalError> {
    if !is_sqlite(path) {
        return Ok(());
    }
    check_journal_files(path)?;
    // Before any connection here or in GDAL attaches the log: held read-only with a read-only
    // index until the job ends, so that nothing writes the database, its log or its index.
    super::sqlite_wal::hold(path)?;
    let refuse = |why: String| {
        GdalError::Arguments(format!(
            "{}: {why}; GDAL would read outside the database. Export the data you need into a \
             plain GeoPackage (without virtual tables) inside the workspace",
            path.display()
        ))
    };
    // A table GDAL would read that cannot be read here first.
    let unreadable = |what: &str, e: rusqlite::Error| {
        hot_journal(path, &e).unwrap_or_else(|| {
            GdalError::Arguments(format!(
                "{}: its {what} cannot be read safely ({e}); it is refused before GDAL opens it",
                path.display()
            ))
        })
    };
    let schema = read_schema(path).map_err(|e| unreadable("SQLite schema", e))?;
    for sql in &schema {
        let tokens = tokens(sql).ok_or_else(|| {
            refuse(format!(
                "its schema holds SQL that cannot be read (\"{}\")",
                excerpt(sql)
            ))
        })?;
        if let Some(module) = virtual_table_module(&tokens)? {
            let known = DATABASE_ONLY_MODULES
                .iter()
                .any(|m| m.eq_ignore_ascii_case(&module));
            if !known {
                return Err(refuse(format!(
                    "its schema declares a virtual table over the `{module}` module (\"{}\"), \
                     which can read other files",
                    excerpt(sql)
                )));
            }
        }
        if let Some(why) = unbounded_read(&tokens) {
            return Err(GdalError::Arguments(format!(
                "{}: its schema {why} (\"{}\"); reading it could take unbounded memory or never \
                 end, and a read inside SQLite cannot be cancelled. Materialise the view as a \
                 table (CREATE TABLE t AS SELECT * FROM v, then drop the view) or remove the \
                 expression",
                path.display(),
                excerpt(sql)
            )));
        }
        if let Some(function) = file_function(&tokens) {
            return Err(refuse(format!(
                "its schema calls `{function}` (\"{}\"), which reads, writes or loads files",
                excerpt(sql)
            )));
        }
    }
    // Growth without a listed function: concatenation through nested subqueries or views,
    // nested `hex()`, functions nothing bounds (attack round 6, R6-A).
    let limit = crate::budget::setting(MAX_VIEW_GROWTH_VARIABLE, DEFAULT_MAX_VIEW_GROWTH);
    if let Some(why) = view_growth(&schema, limit) {
        return Err(GdalError::Arguments(format!(
            "{}: its schema {why}; reading it could take memory far beyond the file's size, \
             and a read inside SQLite cannot be cancelled. Materialise the view as a table \
             (CREATE TABLE t AS SELECT * FROM v, then drop the view) or simplify it",
            path.display()
        )));
    }
    // How many rows each view yields, and how long it takes, measured (R16-A9).
    check_view_rows(path)?;
    check_tile_size(path, &schema)?;
    // The CRS definitions GDAL will hand to PROJ, once the schema is known to be plain.
    let definitions = read_srs_definitions(path).map_err(|e| unreadable("SRS table", e))?;
    for definition in definitions {
        if let Some(why) = super::crs_text::crs_text_reads_files(&definition) {
            return Err(GdalError::Arguments(format!(
                "{}: a CRS definition in its SRS table makes PROJ read a file ({why}): \"{}\"; \
                 fix the table or export the data with a CRS by authority code",
                path.display(),
                excerpt(&definition)
            )));
        }
    }
    Ok(())
}

/// The most cells a GeoPackage tile may hold: GDAL 3.6's driver allocates its tile cache at
/// the open, 4 bands by 4 tiles of the declared size, whatever the raster's size (2048 x 2048:
/// 64 Mi cells of cache; tiles are 256 or 512 wide in practice).
const MAX_GPKG_TILE_CELLS: i64 = 2048 * 2048;

/// Refuse a GeoPackage whose tile matrix declares tiles larger than [`MAX_GPKG_TILE_CELLS`]:
/// a 116 KB file whose tiles were declared 16384 x 16384 made a read-only `raster_info` map 4
/// GiB at the open, 16 times the block the host reserved (attack round 21, R21-A3).
fn check_tile_size(path: &Path, schema: &[String]) -> Result<(), GdalError> {
    let has_matrix = schema
        .iter()
        .any(|sql| sql.to_ascii_lowercase().contains("gpkg_tile_matrix"));
    if !has_matrix {
        return Ok(());
    }
    let largest: Option<(i64, i64)> = inspection_connection(path)
        .and_then(|connection| {
            connection.query_row(
                "SELECT tile_width, tile_height FROM main.gpkg_tile_matrix \
                 ORDER BY CAST(tile_width AS REAL) * CAST(tile_height AS REAL) DESC LIMIT 1",
                [],
                |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
            )
        })
        .ok();
    match largest {
        Some((width, height))
            if width <= 0 || height <= 0 || width.saturating_mul(height) > MAX_GPKG_TILE_CELLS =>
        {
            Err(GdalError::Arguments(format!(
                "{}: its gpkg_tile_matrix declares tiles of {width} x {height} cells; GDAL's \
                 GeoPackage driver allocates 16 such tiles at the open, so tiles may hold at \
                 most {MAX_GPKG_TILE_CELLS} cells (2048 x 2048). Retile it outside the server \
                 (gdal_translate -of GPKG, 256 x 256 tiles)",
                path.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Every text value of the SRS tables GDAL reads CRS definitions from: the GeoPackage's
/// `gpkg_spatial_ref_sys` (`definition`, `definition_12_063`) and SpatiaLite's
/// `spatial_ref_sys` (`srtext`, `proj4text`). Read only after [`check_sqlite`] found the
/// schema plain (no virtual table over files, no file function).
fn read_srs_definitions(path: &Path) -> Result<Vec<String>, rusqlite::Error> {
    let connection = inspection_connection(path)?;
    let exists = |name: &str| -> Result<bool, rusqlite::Error> {
        let count: i64 = connection.query_row(
            "SELECT count(*) FROM main.sqlite_master WHERE type IN ('table', 'view') \
             AND name = ?1 AND sql NOT LIKE '%VIRTUAL%'",
            [name],
            |row| row.get(0),
        )?;
        Ok(count > 0)
    };
    let mut found = Vec::new();
    // (SRS table, its key, the tables that say which SRSs GDAL will parse). SpatiaLite's
    // table holds the whole EPSG register (some with geoid grids) and GDAL parses only the
    // rows its layers use; with no referencing table, every row counts.
    for (table, key, users) in [
        (
            "gpkg_spatial_ref_sys",
            "srs_id",
            &["gpkg_contents", "gpkg_geometry_columns"][..],
        ),
        ("spatial_ref_sys", "srid", &["geometry_columns"][..]),
    ] {
        if !exists(table)? {
            continue;
        }
        let mut used = Vec::new();
        for user in users {
            if exists(user)? {
                used.push(format!("SELECT {key} FROM main.\"{user}\""));
            }
        }
        let filter = if used.is_empty() {
            String::new()
        } else {
            format!(" WHERE {key} IN ({})", used.join(" UNION "))
        };
        let mut statement = connection.prepare(&format!(
            "SELECT * FROM main.\"{table}\"{filter} LIMIT 100000"
        ))?;
        let columns = statement.column_count();
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            for i in 0..columns {
                if let Ok(Some(text)) = row.get::<_, Option<String>>(i) {
                    found.push(text);
                }
            }
        }
    }
    Ok(found)
}

/// The connection the host inspects a database through before GDAL opens it: read-only,
/// private, never waiting for a lock, with triggers off and SQLite's defensive mode on.
fn inspection_connection(path: &Path) -> Result<rusqlite::Connection, rusqlite::Error> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_PRIVATE_CACHE;
    let connection = rusqlite::Connection::open_with_flags(path, flags)?;
    connection.busy_timeout(std::time::Duration::from_millis(0))?;
    connection.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER,
        false,
    )?;
    connection.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    Ok(connection)
}

/// The SQL of every schema entry, read-only, with extension loading off. Only `sqlite_master`
/// is read (which parses the schema, as SQLite must, but connects no virtual table).
fn read_schema(path: &Path) -> Result<Vec<String>, rusqlite::Error> {
    let connection = inspection_connection(path)?;
    let mut statement = connection.prepare("SELECT sql FROM main.sqlite_master LIMIT 1000000")?;
    let rows = statement.query_map([], |row| row.get::<_, Option<String>>(0))?;
    let mut schema = Vec::new();
    for row in rows {
        if let Some(sql) = row? {
            schema.push(sql);
        }
    }
    Ok(schema)
}

/// Operator override of [`DEFAULT_MAX_VIEW_ROWS`].
pub const MAX_VIEW_ROWS_VARIABLE: &str = "GDAL_MCP_MAX_VIEW_ROWS";
/// Most rows a view of an input database may yield.
pub const DEFAULT_MAX_VIEW_ROWS: u64 = 10_000_000;
/// Operator override of [`DEFAULT_MAX_VIEW_MILLIS`].
pub const MAX_VIEW_MILLIS_VARIABLE: &str = "GDAL_MCP_MAX_VIEW_MILLIS";
/// Longest a view of an input database may take to yield its rows, measured before GDAL
/// opens it.
pub const DEFAULT_MAX_VIEW_MILLIS: u64 = 3_000;

/// A view is read by GDAL (its layer listed, its features counted and read) inside SQLite,
/// where nothing can cancel or bound it: a 20 KB file whose view joins a 1,000-row table with
/// itself four times (10^12 rows) kept `vector_info` from ever answering, and four such calls
/// starved every read-only tool (attack round 16, R16-A9). Each view's rows are counted here
/// with the system SQLite, read-only, up to [`DEFAULT_MAX_VIEW_ROWS`] and for at most
/// [`DEFAULT_MAX_VIEW_MILLIS`]; a view past either is refused. A view this SQLite cannot
/// evaluate (a SpatiaLite function) is left to the other schema rules.
fn check_view_rows(path: &Path) -> Result<(), GdalError> {
    let rows_limit = crate::budget::setting(MAX_VIEW_ROWS_VARIABLE, DEFAULT_MAX_VIEW_ROWS);
    let millis = crate::budget::setting(MAX_VIEW_MILLIS_VARIABLE, DEFAULT_MAX_VIEW_MILLIS);
    let failed = |e: rusqlite::Error| {
        GdalError::Arguments(format!(
            "{}: its views cannot be measured safely ({e}); it is refused before GDAL opens it",
            path.display()
        ))
    };
    let connection = inspection_connection(path).map_err(failed)?;
    let views: Vec<String> = {
        let mut statement = connection
            .prepare("SELECT name FROM main.sqlite_master WHERE type = 'view' LIMIT 10000")
            .map_err(failed)?;
        let names = statement
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(failed)?;
        names.collect::<Result<_, _>>().map_err(failed)?
    };
    for view in views {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(millis);
        connection.progress_handler(10_000, Some(move || std::time::Instant::now() > deadline));
        // Every row read with every column, as GDAL reads a feature: `count(*)` over
        // `SELECT 1` let SQLite skip the columns, so a view whose one column is a scalar
        // cross-join subquery measured in no time and then held GDAL for good (attack round
        // 17, R17-A14).
        let sql = format!(
            "SELECT * FROM main.\"{}\" LIMIT {}",
            view.replace('"', "\"\""),
            rows_limit.saturating_add(1)
        );
        let counted = read_every_column(&connection, &sql);
        connection.progress_handler(0, None::<fn() -> bool>);
        let shown = excerpt(&view);
        match counted {
            Ok(rows) if u64::try_from(rows).unwrap_or(u64::MAX) > rows_limit => {
                return Err(GdalError::Arguments(format!(
                    "{}: its view \"{shown}\" yields more than {rows_limit} rows \
                     ({MAX_VIEW_ROWS_VARIABLE}); GDAL reads a view inside SQLite, where the read \
                     cannot be cancelled. Materialise what you need as a table (CREATE TABLE t \
                     AS SELECT ... with the join's conditions) or drop the view",
                    path.display()
                )));
            }
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::OperationInterrupted =>
            {
                return Err(GdalError::Arguments(format!(
                    "{}: its view \"{shown}\" takes more than {millis} ms to read \
                     ({MAX_VIEW_MILLIS_VARIABLE}); GDAL reads a view inside SQLite, where the \
                     read cannot be cancelled. Materialise what you need as a table (CREATE \
                     TABLE t AS SELECT ... with the join's conditions) or drop the view",
                    path.display()
                )));
            }
            Err(e) => {
                tracing::debug!(view = %shown, "view not measured here: {e}");
            }
        }
    }
    Ok(())
}

/// The rows of `sql`, each of its columns read (its value computed), or SQLite's error.
fn read_every_column(connection: &rusqlite::Connection, sql: &str) -> Result<i64, rusqlite::Error> {
    let mut statement = connection.prepare(sql)?;
    let columns = statement.column_count();
    let mut rows = statement.query([])?;
    let mut count = 0i64;
    while let Some(row) = rows.next()? {
        for i in 0..columns {
            row.get_ref(i)?;
        }
        count += 1;
    }
    Ok(count)
}

/// The refusal of a database SQLite found a **hot rollback journal** beside (a write that did
/// not finish: its writer crashed or was killed): SQLite rolls such a journal back into the
/// database at the next open that can write, and a read-only open fails with
/// `SQLITE_READONLY_ROLLBACK` ("attempt to write a readonly database"). Measured with GDAL 3.6.2
/// and SQLite 3.40.1: GDAL's read-only open fails the same way and writes nothing, and an
/// update open rolls the journal back (the database rewritten, the journal deleted). The
/// server opens inputs read-only and never rolls one back, so the input is refused naming the
/// fix. `None` for any other error.
fn hot_journal(path: &Path, e: &rusqlite::Error) -> Option<GdalError> {
    let rusqlite::Error::SqliteFailure(failure, _) = e else {
        return None;
    };
    if failure.extended_code != rusqlite::ffi::SQLITE_READONLY_ROLLBACK {
        return None;
    }
    let mut journal = path.as_os_str().to_os_string();
    journal.push("-journal");
    let journal = PathBuf::from(journal);
    let size = std::fs::metadata(&journal).map_or(0, |m| m.len());
    Some(GdalError::Arguments(format!(
        "{}: a rollback journal is beside it ({}, {size} bytes) from a write that did not \
         finish (the program writing the database crashed or was killed); SQLite rolls it back \
         into the database at the next open that may write, and the server opens its inputs \
         read-only and does not write them. Open the database once with the program that \
         wrote it, or run `sqlite3 {} \"PRAGMA integrity_check\"` (which rolls the journal \
         back), then try again",
        path.display(),
        journal.display(),
        path.display()
    )))
}

/// A database's journal and WAL files, which SQLite opens beside it, must be regular files
/// (not links, FIFOs or devices) when they exist.
fn check_journal_files(path: &Path) -> Result<(), GdalError> {
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        let side = PathBuf::from(name);
        match std::fs::symlink_metadata(&side) {
            Ok(meta) if !meta.file_type().is_file() => {
                return Err(GdalError::Arguments(format!(
                    "{}: SQLite would open it beside the database, and it is a link, a FIFO or a \
                     device, not a regular file; remove it",
                    side.display()
                )));
            }
            // SQLite writes these files (it maps and initialises a `-shm` whoever opens the
            // database): one with another name elsewhere would take the write (attack round
            // 22, R22-A10: a `-shm` hard-linked to the store's ledger overwrote it).
            Ok(meta) if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 => {
                return Err(GdalError::Arguments(format!(
                    "{}: SQLite writes this file beside the database, and it is a hard link to \
                     another file, which the write would change; remove it",
                    side.display()
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// At most 120 characters of SQL, for messages.
fn excerpt(sql: &str) -> String {
    let one_line: String = sql
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(120) {
        Some((at, _)) => format!("{}...", &one_line[..at]),
        None => one_line,
    }
}

/// A SQL token: a bare word (keyword, identifier or number), a quoted identifier (dequoted),
/// a string literal or one punctuation character. Nothing here needs more.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Text(String),
    Punct(char),
}

/// SQLite's tokens of `sql`, with comments dropped and quoted identifiers (`"x"`, `[x]`,
/// `` `x` ``) dequoted. `None` for an unterminated quote or comment.
fn tokens(sql: &str) -> Option<Vec<Token>> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let quoted = |i: usize, close: char| -> Option<(String, usize)> {
        let mut text = String::new();
        let mut j = i + 1;
        loop {
            let c = *chars.get(j)?;
            if c == close {
                if close != ']' && chars.get(j + 1) == Some(&close) {
                    text.push(c);
                    j += 2;
                    continue;
                }
                return Some((text, j + 1));
            }
            text.push(c);
            j += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            let mut j = i + 2;
            loop {
                if j + 1 >= chars.len() {
                    // SQLite accepts a comment left open at the end of the text.
                    j = chars.len();
                    break;
                }
                if chars[j] == '*' && chars[j + 1] == '/' {
                    j += 2;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if c == '\'' {
            let (text, next) = quoted(i, '\'')?;
            out.push(Token::Text(text));
            i = next;
        } else if c == '"' || c == '`' {
            let (text, next) = quoted(i, c)?;
            out.push(Token::Quoted(text));
            i = next;
        } else if c == '[' {
            let (text, next) = quoted(i, ']')?;
            out.push(Token::Quoted(text));
            i = next;
        } else if c.is_alphanumeric() || c == '_' || c == '$' || !c.is_ascii() {
            let mut j = i;
            while j < chars.len()
                && (chars[j].is_alphanumeric()
                    || chars[j] == '_'
                    || chars[j] == '$'
                    || !chars[j].is_ascii())
                && !chars[j].is_whitespace()
            {
                j += 1;
            }
            out.push(Token::Word(chars[i..j].iter().collect()));
            i = j;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    Some(out)
}

fn is_word(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
}

/// The module of a `CREATE VIRTUAL TABLE [IF NOT EXISTS] [schema.]name USING module(...)`
/// statement (SQLite's grammar), `None` for any other statement. A statement that starts like
/// one and cannot be read to its module is refused.
fn virtual_table_module(tokens: &[Token]) -> Result<Option<String>, GdalError> {
    if !(is_word(tokens.first(), "create") && is_word(tokens.get(1), "virtual")) {
        return Ok(None);
    }
    let name = |t: Option<&Token>| match t {
        Some(Token::Word(n) | Token::Quoted(n) | Token::Text(n)) => Some(n.clone()),
        _ => None,
    };
    let module = (|| {
        if !is_word(tokens.get(2), "table") {
            return None;
        }
        let mut at = 3;
        if is_word(tokens.get(at), "if")
            && is_word(tokens.get(at + 1), "not")
            && is_word(tokens.get(at + 2), "exists")
        {
            at += 3;
        }
        name(tokens.get(at))?;
        at += 1;
        if tokens.get(at) == Some(&Token::Punct('.')) {
            name(tokens.get(at + 1))?;
            at += 2;
        }
        if !is_word(tokens.get(at), "using") {
            return None;
        }
        name(tokens.get(at + 1))
    })();
    match module {
        Some(module) => Ok(Some(module)),
        None => Err(GdalError::Arguments(
            "a SQLite schema declares a virtual table whose module cannot be read; it is \
             refused before GDAL opens it"
                .to_string(),
        )),
    }
}

/// The first file function called in `tokens` (a word or quoted name followed by `(`).
fn file_function(tokens: &[Token]) -> Option<String> {
    tokens.windows(2).find_map(|pair| {
        let (Token::Word(name) | Token::Quoted(name) | Token::Text(name)) = &pair[0] else {
            return None;
        };
        if pair[1] != Token::Punct('(') {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        let named = FILE_FUNCTIONS.contains(&lower.as_str())
            || FILE_FUNCTION_PREFIXES.iter().any(|p| lower.starts_with(p));
        named.then(|| name.clone())
    })
}

/// Why a view or table (its generated columns) would make a read take unbounded memory or
/// time, if it would: a view with a common table expression (`WITH`, recursive or not: SQLite
/// recurses without the keyword too; an endless one never answered and could not be
/// cancelled: issue 21, attack round 5, F6), or a view or generated column calling one of
/// [`GROWTH_FUNCTIONS`]. Triggers and indexes run only on writes, which no tool makes to an
/// input.
fn unbounded_read(tokens: &[Token]) -> Option<String> {
    let word = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.eq_ignore_ascii_case(w));
    let create = tokens.first().is_some_and(|t| word(t, "create"));
    let kind =
        tokens.iter().skip(1).take(3).find(|t| {
            word(t, "view") || word(t, "table") || word(t, "trigger") || word(t, "index")
        });
    let view = create && kind.is_some_and(|t| word(t, "view"));
    let table = create && kind.is_some_and(|t| word(t, "table"));
    if view
        && tokens
            .iter()
            .any(|t| word(t, "with") || word(t, "recursive"))
    {
        return Some(
            "declares a view over a common table expression (`WITH`), which can recurse \
             without end"
                .to_string(),
        );
    }
    if !(view || table) {
        return None;
    }
    tokens.windows(2).find_map(|pair| {
        let (Token::Word(name) | Token::Quoted(name)) = &pair[0] else {
            return None;
        };
        (pair[1] == Token::Punct('(')
            && GROWTH_FUNCTIONS.contains(&name.to_ascii_lowercase().as_str()))
        .then(|| {
            format!(
                "declares a {} that calls `{name}`, which can build values far larger than the \
                 file",
                if view { "view" } else { "generated column" }
            )
        })
    })
}

/// Operator override of [`DEFAULT_MAX_VIEW_GROWTH`].
pub const MAX_VIEW_GROWTH_VARIABLE: &str = "GDAL_MCP_MAX_VIEW_GROWTH";

/// How many times a view (or a generated column) may multiply what it reads: the largest
/// value it can build, in units of the largest value stored in the database (or of a string
/// literal in its SQL), and the number of leaves SQLite's query flattener makes of one of its
/// expressions. A join view or `a || ' ' || b` is 2 or 3; five nested subqueries each
/// concatenating a value with itself 8 times are 8^5 = 32768 (issue 21, attack round 6,
/// R6-A: 1.3 GB in `vector_info` from a 73 KB file, and SQLite's flattener alone took 3.6 GB
/// preparing 8 such levels over a 1-byte value).
pub const DEFAULT_MAX_VIEW_GROWTH: u64 = 64;

/// What an expression builds, as a multiple of its inputs: `value` bounds the largest value
/// built anywhere in it (units: the largest stored value), `tree` the number of leaves once
/// every reference to a subquery's or view's column is replaced by its expression (what
/// SQLite's flattener does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Growth {
    value: u64,
    tree: u64,
    /// A whole row of what is read, in the same units: a stored row is 1 (stored data, however
    /// many columns), a select's row the sum of its columns' values. Distinct columns of one
    /// row concatenated build at most this (attack round 8, R8-10).
    row: u64,
}

impl Growth {
    const NONE: Growth = Growth {
        value: 0,
        tree: 0,
        row: 0,
    };
    const ONE: Growth = Growth {
        value: 1,
        tree: 1,
        row: 1,
    };
    fn max(self, other: Growth) -> Growth {
        Growth {
            value: self.value.max(other.value),
            tree: self.tree.max(other.tree),
            row: self.row.max(other.row),
        }
    }
}

/// SQL functions whose result is no larger than their largest argument (SQLite's core
/// scalar, aggregate, date and math functions, GDAL's GeoPackage functions, SpatiaLite's
/// measures and accessors). `hex`, `quote` and the JSON builders grow by a known factor
/// ([`growth_factor`]); any other function is refused in a view, since what it builds cannot
/// be bounded from the schema.
const BOUNDED_FUNCTIONS: &[&str] = &[
    "abs",
    "avg",
    "ceil",
    "ceiling",
    "changes",
    "char",
    "coalesce",
    "count",
    "date",
    "datetime",
    "floor",
    "glob",
    "ifnull",
    "iif",
    "instr",
    "julianday",
    "last_insert_rowid",
    "length",
    "like",
    "likelihood",
    "likely",
    "lower",
    "ltrim",
    "max",
    "min",
    "nullif",
    "random",
    "round",
    "rtrim",
    "sign",
    "soundex",
    "substr",
    "substring",
    "sum",
    "time",
    "total",
    "total_changes",
    "trim",
    "typeof",
    "unicode",
    "unixepoch",
    "unlikely",
    "upper",
    "unhex",
    "cast",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cos",
    "cosh",
    "degrees",
    "exp",
    "ln",
    "log",
    "log10",
    "log2",
    "mod",
    "pi",
    "pow",
    "power",
    "radians",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
    "json",
    "json_extract",
    "json_type",
    "json_valid",
    "json_array_length",
    "json_remove",
    "json_each",
    "json_tree",
    "st_minx",
    "st_miny",
    "st_maxx",
    "st_maxy",
    "st_minz",
    "st_maxz",
    "st_isempty",
    "st_geometrytype",
    "st_srid",
    // Not `st_transform`: SpatiaLite's takes PROJ strings as arguments, which a view can
    // assemble from pieces no scan sees (`'+nadgri' || 'ds=/outside/grid'`), and PROJ then
    // opens any file as a grid, a FIFO included (attack round 16, R16-A6, R16-A8).
    "st_envintersects",
    "st_envelopesintersects",
    "st_area",
    "st_length",
    "st_x",
    "st_y",
    "st_z",
    "st_m",
    "st_isvalid",
    "st_issimple",
    "st_numpoints",
    "st_npoints",
    "st_centroid",
    "st_pointonsurface",
    "st_envelope",
    "st_intersects",
    "st_contains",
    "st_within",
    "st_disjoint",
    "st_touches",
    "st_crosses",
    "st_overlaps",
    "st_equals",
    "st_distance",
    "setsrid",
    "st_makevalid",
    "gpkg_isassignable",
    "hasspatialindex",
    "sridfromauthcrs",
    "asbinary",
    "st_asbinary",
    "geomfromwkb",
    "st_geomfromwkb",
    "castautomagic",
];

/// The factor by which a function can grow its arguments (summed), if it is known.
fn growth_factor(name: &str) -> Option<u64> {
    match name {
        "hex" | "quote" => Some(2),
        // Each character may be escaped as `\u00XX`.
        "json_quote" | "json_array" | "json_object" | "json_set" | "json_insert"
        | "json_replace" | "json_patch" => Some(6),
        "strftime" => Some(10),
        _ => BOUNDED_FUNCTIONS.contains(&name).then_some(1),
    }
}

/// Words of SQL that stand for no column and build no value of their own.
const NOT_COLUMNS: &[&str] = &[
    "distinct",
    "all",
    "null",
    "true",
    "false",
    "asc",
    "desc",
    "nulls",
    "first",
    "last",
    "filter",
    "over",
    "partition",
    "by",
    "rows",
    "range",
    "groups",
    "unbounded",
    "preceding",
    "following",
    "current",
    "row",
    "exclude",
    "ties",
    "others",
    "no",
    "order",
    "where",
];

/// Words that end one value and start another (operators producing small values or choosing
/// among their operands).
const SEPARATORS: &[&str] = &[
    "and", "or", "not", "is", "in", "like", "glob", "regexp", "match", "between", "escape", "when",
    "then", "else", "isnull", "notnull", "exists", "as",
];

/// One chain of `||` being read: what its terms build. Regression, attack round 8, R8-10:
/// each term counted as a copy of the largest value, so an ordinary line-per-row view of 40
/// columns joined with `','` (79 terms) was refused.
#[derive(Default)]
struct Run {
    /// Terms other than plain columns and literals (calls, subqueries, parentheses).
    other: u64,
    /// Whether a string literal is in the chain: all of them together are no longer than the
    /// view's own text, stored data (one unit).
    literal: bool,
    /// Each column referred to, and how often.
    columns: std::collections::HashMap<String, u64>,
}

impl Run {
    /// The value the chain builds, and start a new one: distinct columns of one row together
    /// build at most that row (`column.row`); each further reference to a column is another
    /// copy of the largest value.
    fn finish(&mut self, column: Growth) -> u64 {
        let distinct = self.columns.len() as u64;
        let references: u64 = self.columns.values().sum();
        let columns = if distinct == 0 {
            0
        } else {
            distinct
                .saturating_mul(column.value)
                .min(column.row.max(column.value))
                .saturating_add((references - distinct).saturating_mul(column.value))
        };
        let value = self
            .other
            .saturating_add(u64::from(self.literal))
            .saturating_add(columns);
        *self = Run::default();
        value
    }
}

/// Reads the growth of every view and generated column of a schema.
struct GrowthReader<'a> {
    views: std::collections::HashMap<String, &'a [Token]>,
    tables: std::collections::HashMap<String, Vec<&'a [Token]>>,
    memo: std::collections::HashMap<String, Growth>,
    visiting: std::collections::HashSet<String>,
    depth: usize,
}

/// Leaves an expression may have once SQLite's flattener has inlined its subqueries' and
/// views' columns (each costs SQLite about 300 bytes while it prepares the statement).
const MAX_VIEW_TREE: u64 = 100_000;

/// Nesting of subqueries and views followed before the reader gives up (and refuses).
const MAX_GROWTH_DEPTH: usize = 64;

fn name_of(token: Option<&Token>) -> Option<String> {
    match token {
        Some(Token::Word(n) | Token::Quoted(n) | Token::Text(n)) => Some(n.to_ascii_lowercase()),
        _ => None,
    }
}

/// The tokens of the balanced group opening at `open` (a `(`), without its parentheses, and
/// the index after its `)`.
fn group(tokens: &[Token], open: usize) -> Result<(&[Token], usize), String> {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok((&tokens[open + 1..i], i + 1));
                }
            }
            _ => {}
        }
    }
    Err("holds unbalanced parentheses".to_string())
}

/// Splits `tokens` at depth 0 wherever `at` says.
fn split_at_depth0(tokens: &[Token], at: impl Fn(&Token) -> bool) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::Punct('(') => depth += 1,
            Token::Punct(')') => depth = depth.saturating_sub(1),
            _ if depth == 0 && at(t) => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// A result column without its alias (`expr AS name`, `expr name`).
fn without_alias(column: &[Token]) -> &[Token] {
    let n = column.len();
    if n >= 2 && is_word(column.get(n - 2), "as") {
        return &column[..n - 2];
    }
    if n >= 2
        && matches!(
            column.last(),
            Some(Token::Word(_) | Token::Quoted(_) | Token::Text(_))
        )
        && !is_word(column.last(), "end")
        && matches!(
            column.get(n - 2),
            Some(Token::Word(_) | Token::Quoted(_) | Token::Text(_) | Token::Punct(')'))
        )
        && !is_word(column.get(n - 2), "case")
    {
        return &column[..n - 1];
    }
    column
}

fn is_select(tokens: &[Token]) -> bool {
    let mut i = 0;
    while tokens.get(i) == Some(&Token::Punct('(')) {
        i += 1;
    }
    is_word(tokens.get(i), "select") || is_word(tokens.get(i), "values")
}

impl<'a> GrowthReader<'a> {
    fn new(schema: &'a [Vec<Token>]) -> GrowthReader<'a> {
        let mut views = std::collections::HashMap::new();
        let mut tables = std::collections::HashMap::new();
        for tokens in schema {
            if !is_word(tokens.first(), "create") {
                continue;
            }
            let Some(kind) = tokens.iter().skip(1).take(3).position(|t| {
                matches!(t, Token::Word(w) if w.eq_ignore_ascii_case("view") || w.eq_ignore_ascii_case("table"))
            }) else {
                continue;
            };
            let mut at = kind + 2;
            if is_word(tokens.get(at), "if") {
                at += 3;
            }
            if tokens.get(at + 1) == Some(&Token::Punct('.')) {
                at += 2;
            }
            let Some(name) = name_of(tokens.get(at)) else {
                continue;
            };
            if is_word(tokens.get(kind + 1), "view") {
                // `CREATE VIEW name [(columns)] AS select`
                if let Some(as_at) = tokens.iter().skip(at).position(|t| is_word(Some(t), "as")) {
                    views.insert(name, &tokens[at + as_at + 1..]);
                }
            } else if tokens.get(at + 1) == Some(&Token::Punct('(')) {
                // Generated columns: `... [GENERATED ALWAYS] AS (expr) ...`
                let Ok((body, _)) = group(tokens, at + 1) else {
                    continue;
                };
                let mut generated = Vec::new();
                for (i, t) in body.iter().enumerate() {
                    if is_word(Some(t), "as") && body.get(i + 1) == Some(&Token::Punct('(')) {
                        if let Ok((expr, _)) = group(body, i + 1) {
                            generated.push(expr);
                        }
                    }
                }
                tables.insert(name, generated);
            }
        }
        GrowthReader {
            views,
            tables,
            memo: std::collections::HashMap::new(),
            visiting: std::collections::HashSet::new(),
            depth: 0,
        }
    }

    /// What a name in a FROM clause stands for: a view's growth, a table's (1, or its
    /// generated columns', which may refer to one another), or 1 for anything else.
    fn named(&mut self, name: &str) -> Result<Growth, String> {
        if let Some(known) = self.memo.get(name) {
            return Ok(*known);
        }
        if self.visiting.contains(name) {
            // SQLite refuses a view defined through itself.
            return Ok(Growth::ONE);
        }
        let growth = if let Some(select) = self.views.get(name).copied() {
            self.visiting.insert(name.to_string());
            let growth = self.select(select);
            self.visiting.remove(name);
            growth?
        } else if let Some(generated) = self.tables.get(name).cloned() {
            let mut columns = Growth::ONE;
            for _ in 0..generated.len() {
                let mut next = columns;
                let mut row = 1u64;
                for expr in &generated {
                    let built = self.expression(expr, columns)?;
                    row = row.saturating_add(built.value);
                    next = next.max(built);
                }
                next.row = row.max(columns.row);
                columns = next;
            }
            columns
        } else {
            Growth::ONE
        };
        self.memo.insert(name.to_string(), growth);
        Ok(growth)
    }

    /// A SELECT statement (compound or not, or VALUES): the growth of its largest column.
    fn select(&mut self, tokens: &'a [Token]) -> Result<Growth, String> {
        self.depth += 1;
        if self.depth > MAX_GROWTH_DEPTH {
            return Err(format!(
                "nests subqueries and views deeper than {MAX_GROWTH_DEPTH} levels"
            ));
        }
        let mut tokens = tokens;
        // `(SELECT ...)` written in parentheses.
        while tokens.first() == Some(&Token::Punct('(')) && group(tokens, 0)?.1 == tokens.len() {
            tokens = group(tokens, 0)?.0;
        }
        if is_word(tokens.first(), "with") {
            return Err("uses a common table expression".to_string());
        }
        let cores = split_at_depth0(tokens, |t| {
            is_word(Some(t), "union") || is_word(Some(t), "intersect") || is_word(Some(t), "except")
        });
        let mut growth = Growth::NONE;
        for core in cores {
            let core = match core.first() {
                Some(t) if is_word(Some(t), "all") => &core[1..],
                _ => core,
            };
            growth = growth.max(self.core(core)?);
        }
        self.depth -= 1;
        Ok(growth)
    }

    /// One `SELECT ... FROM ... WHERE ...` (or `VALUES (...), ...`).
    fn core(&mut self, tokens: &'a [Token]) -> Result<Growth, String> {
        if is_word(tokens.first(), "values") {
            return self.expression(&tokens[1..], Growth::NONE);
        }
        if !is_word(tokens.first(), "select") {
            // Something else between compound operators (ORDER BY of the whole, LIMIT):
            // read as expressions over the columns.
            return self.expression(tokens, Growth::ONE);
        }
        let clause = |w: &str| {
            [
                "from", "where", "group", "having", "window", "order", "limit",
            ]
            .contains(&w)
        };
        // Depth-0 clause keywords.
        let mut marks = Vec::new();
        let mut depth = 0usize;
        for (i, t) in tokens.iter().enumerate() {
            match t {
                Token::Punct('(') => depth += 1,
                Token::Punct(')') => depth = depth.saturating_sub(1),
                Token::Word(w) if depth == 0 && clause(&w.to_ascii_lowercase()) => {
                    marks.push((i, w.to_ascii_lowercase()))
                }
                _ => {}
            }
        }
        let end_of = |k: usize| marks.get(k + 1).map_or(tokens.len(), |m| m.0);
        let columns_end = marks.first().map_or(tokens.len(), |m| m.0);
        let mut from = Growth::ONE;
        let mut later = Vec::new();
        for (k, (at, word)) in marks.iter().enumerate() {
            let part = &tokens[at + 1..end_of(k)];
            if word == "from" {
                from = self.from(part, &mut later)?;
            } else {
                later.push(part);
            }
        }
        // A reference to this select's column stands for that column's expression (per
        // column: the largest); the other clauses' values are built too.
        let mut growth = Growth::NONE;
        let mut row = 0u64;
        for column in split_at_depth0(&tokens[1..columns_end], |t| *t == Token::Punct(',')) {
            let column = without_alias(column);
            if column.last() == Some(&Token::Punct('*')) {
                growth = growth.max(from);
                row = row.saturating_add(from.row);
            }
            let built = self.expression(column, from)?;
            row = row.saturating_add(built.value);
            growth = growth.max(built);
        }
        growth.row = row;
        for part in later {
            let other = self.expression(part, from)?;
            growth.value = growth.value.max(other.value);
        }
        Ok(growth)
    }

    /// A FROM clause: the largest growth of what it reads (tables, views, subqueries,
    /// table-valued functions); its ON clauses are left in `later`.
    fn from(
        &mut self,
        tokens: &'a [Token],
        later: &mut Vec<&'a [Token]>,
    ) -> Result<Growth, String> {
        let mut growth = Growth::ONE;
        // The rows of what is joined, side by side.
        let mut row = 0u64;
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                Token::Punct('(') => {
                    let (inner, next) = group(tokens, i)?;
                    let source = if is_select(inner) {
                        self.select(inner)?
                    } else {
                        self.from(inner, later)?
                    };
                    row = row.saturating_add(source.row);
                    growth = growth.max(source);
                    i = next;
                }
                Token::Word(w) if w.eq_ignore_ascii_case("on") => {
                    let end = tokens[i + 1..]
                        .iter()
                        .position(|t| {
                            matches!(t, Token::Punct(','))
                                || is_word(Some(t), "join")
                                || is_word(Some(t), "natural")
                                || is_word(Some(t), "left")
                                || is_word(Some(t), "inner")
                                || is_word(Some(t), "cross")
                                || is_word(Some(t), "right")
                                || is_word(Some(t), "full")
                        })
                        .map_or(tokens.len(), |p| i + 1 + p);
                    later.push(&tokens[i + 1..end]);
                    i = end;
                }
                Token::Word(w) | Token::Quoted(w) => {
                    if tokens.get(i + 1) == Some(&Token::Punct('(')) {
                        // A table-valued function (`json_each(x)`).
                        let (args, next) = group(tokens, i + 1)?;
                        let source = self.expression(args, Growth::ONE)?;
                        row = row.saturating_add(source.value.max(1));
                        growth = growth.max(source);
                        i = next;
                    } else {
                        let name = w.to_ascii_lowercase();
                        let source = self.named(&name)?;
                        // Keywords and aliases are no rows; tables and views are.
                        if self.views.contains_key(&name) || self.tables.contains_key(&name) {
                            row = row.saturating_add(source.row.max(1));
                        }
                        growth = growth.max(source);
                        i += 1;
                    }
                }
                _ => i += 1,
            }
        }
        growth.row = row.max(1);
        Ok(growth)
    }

    /// An expression list over columns that each stand for `column`.
    fn expression(&mut self, tokens: &'a [Token], column: Growth) -> Result<Growth, String> {
        let mut best = 0u64; // the largest value built
        let mut run = Run::default(); // the current chain of `||`
        let mut tree = 0u64;
        let mut i = 0;
        while i < tokens.len() {
            let term: Growth;
            match &tokens[i] {
                Token::Punct('|') if tokens.get(i + 1) == Some(&Token::Punct('|')) => {
                    i += 2;
                    continue;
                }
                Token::Punct('(') => {
                    let (inner, next) = group(tokens, i)?;
                    term = if is_select(inner) {
                        self.select(inner)?
                    } else {
                        self.expression(inner, column)?
                    };
                    i = next;
                }
                Token::Punct(_) => {
                    best = best.max(run.finish(column));
                    i += 1;
                    continue;
                }
                Token::Text(_) => {
                    // The literals of one chain are all in the view's own text.
                    run.literal = true;
                    tree = tree.saturating_add(1);
                    i += 1;
                    continue;
                }
                Token::Word(w) if w.eq_ignore_ascii_case("case") => {
                    // CASE ... END is one value: the largest of its branches.
                    let mut nested = 0usize;
                    let mut depth = 0usize;
                    let mut end = None;
                    for (j, t) in tokens.iter().enumerate().skip(i) {
                        match t {
                            Token::Punct('(') => depth += 1,
                            Token::Punct(')') => depth = depth.saturating_sub(1),
                            Token::Word(x) if depth == 0 && x.eq_ignore_ascii_case("case") => {
                                nested += 1
                            }
                            Token::Word(x) if depth == 0 && x.eq_ignore_ascii_case("end") => {
                                nested -= 1;
                                if nested == 0 {
                                    end = Some(j);
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    let end = end.ok_or_else(|| "holds a CASE without END".to_string())?;
                    term = self.expression(&tokens[i + 1..end], column)?;
                    i = end + 1;
                }
                Token::Word(w) if w.eq_ignore_ascii_case("collate") => {
                    best = best.max(run.finish(column));
                    i += 2;
                    continue;
                }
                Token::Word(w) if SEPARATORS.contains(&w.to_ascii_lowercase().as_str()) => {
                    best = best.max(run.finish(column));
                    i += 1;
                    continue;
                }
                Token::Word(w)
                    if NOT_COLUMNS.contains(&w.to_ascii_lowercase().as_str())
                        || w.starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    term = Growth {
                        value: 0,
                        tree: 1,
                        row: 0,
                    };
                    i += 1;
                }
                Token::Word(w) | Token::Quoted(w)
                    if tokens.get(i + 1) == Some(&Token::Punct('(')) =>
                {
                    let name = w.to_ascii_lowercase();
                    let (args, next) = group(tokens, i + 1)?;
                    let Some(factor) = growth_factor(&name) else {
                        return Err(format!(
                            "calls `{w}`, a function whose result the host cannot bound"
                        ));
                    };
                    // CAST(x AS type): the type is no column.
                    let args = if name == "cast" {
                        let stop = args
                            .iter()
                            .rposition(|t| is_word(Some(t), "as"))
                            .unwrap_or(args.len());
                        &args[..stop]
                    } else {
                        args
                    };
                    let mut sum = 0u64;
                    let mut largest = 0u64;
                    let mut leaves = 0u64;
                    for arg in split_at_depth0(args, |t| *t == Token::Punct(',')) {
                        let g = self.expression(arg, column)?;
                        sum = sum.saturating_add(g.value);
                        largest = largest.max(g.value);
                        leaves = leaves.saturating_add(g.tree);
                    }
                    let value = if factor == 1 {
                        largest
                    } else {
                        sum.saturating_mul(factor)
                    };
                    term = Growth {
                        value: value.max(largest),
                        tree: leaves.max(1),
                        row: 0,
                    };
                    i = next;
                }
                Token::Word(w) | Token::Quoted(w) => {
                    // A column, possibly qualified (`t.c`, `s.t.c`).
                    let mut name = w.to_ascii_lowercase();
                    while tokens.get(i + 1) == Some(&Token::Punct('.'))
                        && matches!(tokens.get(i + 2), Some(Token::Word(_) | Token::Quoted(_)))
                    {
                        if let Some(Token::Word(part) | Token::Quoted(part)) = tokens.get(i + 2) {
                            name.push('.');
                            name.push_str(&part.to_ascii_lowercase());
                        }
                        i += 2;
                    }
                    *run.columns.entry(name).or_insert(0) += 1;
                    tree = tree.saturating_add(column.tree);
                    i += 1;
                    continue;
                }
            }
            run.other = run.other.saturating_add(term.value);
            tree = tree.saturating_add(term.tree);
        }
        best = best.max(run.finish(column));
        Ok(Growth {
            value: best,
            tree,
            row: best,
        })
    }
}

/// Why a view or generated column of `schema` could build values or expressions
/// super-linearly larger than the database (attack round 6, R6-A), if one could: its growth
/// ([`Growth`]) above `limit`, or a function whose result cannot be bounded.
fn view_growth(schema: &[String], limit: u64) -> Option<String> {
    let parsed: Vec<Vec<Token>> = schema.iter().filter_map(|sql| tokens(sql)).collect();
    let mut reader = GrowthReader::new(&parsed);
    let mut names: Vec<String> = reader.views.keys().cloned().collect();
    names.extend(
        reader
            .tables
            .iter()
            .filter(|(_, g)| !g.is_empty())
            .map(|(n, _)| n.clone()),
    );
    names.sort();
    for name in names {
        reader.depth = 0;
        let kind = if reader.views.contains_key(&name) {
            "view"
        } else {
            "generated column of table"
        };
        match reader.named(&name) {
            Err(why) => {
                return Some(format!(
                    "declares a {kind} `{name}` that {why}, so what it builds on every read \
                     cannot be bounded"
                ))
            }
            Ok(g) if g.value > limit || g.tree > MAX_VIEW_TREE => {
                return Some(format!(
                    "declares a {kind} `{name}` that can build values {} times the largest \
                     value it reads, from expressions of {} terms once its subqueries are \
                     inlined (at most {limit} times, {MAX_VIEW_GROWTH_VARIABLE}, and {MAX_VIEW_TREE} terms)",
                    g.value, g.tree
                ))
            }
            Ok(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 21, attack round 5, F5/F6): views that build huge values or recurse
    /// without end are found; a plain view, GDAL's rtree triggers (`INSERT OR REPLACE`) and
    /// `WITHOUT ROWID` tables are not.
    #[test]
    fn views_that_read_without_bound_are_found() {
        let found = |sql: &str| unbounded_read(&tokens(sql).unwrap());
        assert!(
            found("CREATE VIEW v AS SELECT fid, hex(zeroblob(200000000)) AS big FROM t").is_some()
        );
        assert!(found("create view v as with recursive c(x) as (select 1 union all select x+1 from c) select x from c").is_some());
        assert!(found(
            "CREATE VIEW v AS WITH c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT * FROM c"
        )
        .is_some());
        assert!(
            found("CREATE VIEW v AS SELECT \"printf\"('%.*c', 1000000000, 'x') FROM t").is_some()
        );
        assert!(found("CREATE TABLE t (a, b AS (randomblob(1000000000)))").is_some());
        assert!(
            found("CREATE VIEW v AS SELECT fid, geom, name FROM t WHERE name <> 'x'").is_none()
        );
        assert!(found("CREATE TRIGGER r AFTER INSERT ON t BEGIN INSERT OR REPLACE INTO rtree_t_geom VALUES (NEW.fid, 0, 0, 0, 0); END").is_none());
        assert!(found("CREATE TABLE k (id INTEGER PRIMARY KEY, v TEXT) WITHOUT ROWID").is_none());
    }

    fn grows(schema: &[&str]) -> Option<String> {
        let schema: Vec<String> = schema.iter().map(|s| s.to_string()).collect();
        view_growth(&schema, DEFAULT_MAX_VIEW_GROWTH)
    }

    /// Regression (issue 21, attack round 6, R6-A): views that grow values without a listed
    /// function (nested subqueries concatenating a value with itself, nested `hex()`, the same
    /// split over several views or generated columns, a function nothing bounds) are found by
    /// their structure; ordinary views (joins, filters, labels, aggregates, views over views)
    /// are not.
    /// Regression, attack round 8, R8-10: a column that appears once in a chain counts by its
    /// own size (distinct columns of a stored row build at most that row) and the literals
    /// of a chain count once, so a line-per-row view of 40 or 200 columns joined with `','`
    /// is silent; a column repeated still counts each copy, and distinct names for copies of
    /// one value (`big AS b1, big AS b2, ...`) count by the row they make, so nested growth
    /// is still refused.
    #[test]
    fn r8_10_distinct_columns_of_a_row_count_as_that_row() {
        for n in [40, 200] {
            let columns: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
            let table = format!(
                "CREATE TABLE t (fid INTEGER PRIMARY KEY, {})",
                columns.join(", ")
            );
            let view = format!(
                "CREATE VIEW v_line AS SELECT fid, {} AS line FROM t",
                columns.join(" || ',' || ")
            );
            assert_eq!(grows(&[&table, &view]), None, "{n} columns");
            // Over a join of two tables, qualified.
            let join = format!(
                "CREATE VIEW v_join AS SELECT t.fid, {} || ';' || u.name AS line FROM t JOIN u ON u.id = t.fid",
                columns.iter().map(|c| format!("t.{c}")).collect::<Vec<_>>().join(" || ' ' || ")
            );
            assert_eq!(
                grows(&[&table, "CREATE TABLE u (id INTEGER, name TEXT)", &join]),
                None,
                "{n} columns, joined"
            );
        }
        // Repetition still counts: 65 copies of one column.
        let copies = vec!["a"; 65].join(" || ',' || ");
        assert!(grows(&[&format!("CREATE VIEW v AS SELECT {copies} FROM t")]).is_some());
        // Copies of a value under distinct names, nested: each level's row holds 8 copies.
        let mut inner = "SELECT a AS big FROM t".to_string();
        for _ in 0..3 {
            let names: Vec<String> = (0..8).map(|i| format!("big AS b{i}")).collect();
            let cat: Vec<String> = (0..8).map(|i| format!("b{i}")).collect();
            inner = format!(
                "SELECT {} AS big FROM (SELECT {} FROM ({inner}))",
                cat.join(" || "),
                names.join(", ")
            );
        }
        let why = grows(&[&format!("CREATE VIEW v AS {inner}")]).unwrap();
        assert!(why.contains("512"), "{why}");
    }

    #[test]
    fn r6a_view_growth_is_bounded_by_structure_not_by_a_function_list() {
        let mut inner = "SELECT fid, a AS big FROM t".to_string();
        for _ in 0..5 {
            inner =
                format!("SELECT fid, big||big||big||big||big||big||big||big AS big FROM ({inner})");
        }
        let cat = format!("CREATE VIEW v AS {inner}");
        let why = grows(&["CREATE TABLE t (fid INTEGER PRIMARY KEY, a TEXT)", &cat]).unwrap();
        assert!(why.contains("`v`") && why.contains("32768"), "{why}");
        let mut hex = "a".to_string();
        for _ in 0..18 {
            hex = format!("hex({hex})");
        }
        assert!(grows(&[&format!("CREATE VIEW v AS SELECT fid, {hex} AS big FROM t")]).is_some());
        // Eight levels of `length(big)+...`: small values, but a flattened tree of 8^8 leaves.
        let mut inner = "SELECT a AS big FROM t".to_string();
        for _ in 0..8 {
            inner = format!("SELECT length(big)+length(big)+length(big)+length(big)+length(big)+length(big)+length(big)+length(big) AS big FROM ({inner})");
        }
        assert!(grows(&[&format!("CREATE VIEW v AS {inner}")]).is_some());
        // The same growth split over views, and over generated columns.
        let mut schema = vec!["CREATE VIEW v0 AS SELECT fid, a AS big FROM t".to_string()];
        for i in 1..4 {
            schema.push(format!(
                "CREATE VIEW v{i} AS SELECT fid, big || big || big || big || big || big || big || big AS big FROM \"v{}\"",
                i - 1
            ));
        }
        let refs: Vec<&str> = schema.iter().map(String::as_str).collect();
        assert!(grows(&refs).is_some());
        assert!(grows(&[
            "CREATE TABLE t (a TEXT, b AS (a||a||a||a||a), c AS (b||b||b||b||b), d AS (c||c||c||c||c))"
        ])
        .is_some());
        assert!(grows(&["CREATE VIEW v AS SELECT CASE WHEN 1 THEN a END || CASE WHEN 1 THEN a END || a FROM (SELECT a||a||a||a||a||a||a||a AS a FROM (SELECT a||a||a||a||a||a||a||a AS a FROM t))"]).is_some());
        assert!(
            grows(&["CREATE VIEW v AS SELECT fid, ST_Segmentize(geom, 0.000001) AS g FROM t"])
                .unwrap()
                .contains("ST_Segmentize")
        );
        assert!(grows(&["CREATE VIEW v AS SELECT * FROM (SELECT hex(hex(hex(hex(hex(hex(hex(a))))))) AS a FROM t)"]).is_some());

        // Clean twins.
        assert_eq!(grows(&[
            "CREATE TABLE a (fid INTEGER PRIMARY KEY, geom BLOB, id INTEGER, name TEXT)",
            "CREATE TABLE b (fid INTEGER PRIMARY KEY, id INTEGER, label TEXT, pop REAL)",
            "CREATE VIEW joined AS SELECT a.fid AS fid, a.geom, b.label || ' (' || a.name || ')' AS label, b.pop FROM a JOIN b ON a.id = b.id WHERE b.pop > 1000 AND a.name NOT LIKE 'x%' ORDER BY b.pop DESC",
            "CREATE VIEW filtered AS SELECT * FROM joined WHERE label IS NOT NULL",
            "CREATE VIEW again AS SELECT fid, geom, upper(label) lab, CAST(pop AS INTEGER) AS p, CASE WHEN pop > 5 THEN 'big' ELSE 'small' END AS kind FROM filtered",
            "CREATE VIEW summary AS SELECT name, count(*) AS n, avg(id), max(name) FROM a GROUP BY name HAVING count(*) > 1",
            "CREATE VIEW \"with spaces\" (x, y) AS SELECT id, ST_MinX(geom) FROM a UNION ALL SELECT id, 0 FROM b",
            "CREATE TABLE g (a TEXT, b TEXT GENERATED ALWAYS AS (a || '-' || a) VIRTUAL)",
            "CREATE VIEW onb AS SELECT b, coalesce(b, a) FROM g",
            "CREATE VIRTUAL TABLE rtree_a_geom USING rtree(id, minx, maxx, miny, maxy)",
            "CREATE TABLE gpkg_contents (table_name TEXT NOT NULL PRIMARY KEY, last_change DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))",
            "CREATE TRIGGER trigger_insert_feature_count_a AFTER INSERT ON a BEGIN UPDATE gpkg_ogr_contents SET feature_count = feature_count + 1 WHERE lower(table_name) = lower('a'); END",
        ]), None);
        // A chain of seven plain views over forty columns stays silent too.
        let columns: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
        let mut schema = vec![format!(
            "CREATE VIEW w0 AS SELECT {} FROM t",
            columns.join(", ")
        )];
        for i in 1..7 {
            schema.push(format!(
                "CREATE VIEW w{i} AS SELECT {} FROM w{}",
                columns
                    .iter()
                    .map(|c| format!("{c} AS {c}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                i - 1
            ));
        }
        let refs: Vec<&str> = schema.iter().map(String::as_str).collect();
        assert_eq!(grows(&refs), None);
    }

    fn module(sql: &str) -> Option<String> {
        virtual_table_module(&tokens(sql).unwrap()).unwrap()
    }

    #[test]
    fn virtual_table_modules_are_read_as_sqlite_reads_them() {
        assert_eq!(
            module("CREATE VIRTUAL TABLE x USING VirtualText('/o.csv', 'UTF-8', 1)").as_deref(),
            Some("VirtualText")
        );
        assert_eq!(
            module(
                "create /* c */ virtual table if not exists \"using\" using \"VirtualShape\"('/o')"
            )
            .as_deref(),
            Some("VirtualShape")
        );
        assert_eq!(
            module("CREATE VIRTUAL TABLE [a b] --x\n USING 'virtualdbf'").as_deref(),
            Some("virtualdbf")
        );
        assert_eq!(
            module("CREATE VIRTUAL TABLE rtree_t_geom USING rtree(id, minx, maxx, miny, maxy)")
                .as_deref(),
            Some("rtree")
        );
        assert_eq!(module("CREATE TABLE t (a INTEGER)"), None);
        assert!(virtual_table_module(&tokens("CREATE VIRTUAL TABLE x").unwrap()).is_err());
    }

    #[test]
    fn file_functions_are_found_however_they_are_quoted() {
        let found = |sql: &str| file_function(&tokens(sql).unwrap());
        assert!(found("CREATE VIEW v AS SELECT BlobFromFile('/etc/passwd') AS b").is_some());
        assert!(found("CREATE VIEW v AS SELECT \"load_extension\" /*x*/ ('/tmp/x.so')").is_some());
        assert!(
            found("CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT [ImportSHP]('x'); END")
                .is_some()
        );
        assert!(found("CREATE TABLE t (a, b AS (fts3_tokenizer('simple')))").is_some());
        assert!(
            found("CREATE VIEW v AS SELECT ST_Buffer(geom, 1) AS g, importance FROM t").is_none()
        );
        assert!(found("CREATE VIEW v AS SELECT 'readfile(' AS s").is_none());
    }

    #[test]
    fn unterminated_quotes_are_not_read() {
        assert!(tokens("CREATE VIRTUAL TABLE \"x USING rtree").is_none());
    }
}

/// Largest XML document read to find its references (GDAL reads VRTs whole too; a mosaic of
/// tens of thousands of tiles is a few MB).
const MAX_DOCUMENT_BYTES: u64 = 64 << 20;

/// A file a document makes GDAL open: the name as written (decoded, for messages) and the
/// paths GDAL can resolve it to (built from the name's bytes, never from a lossy decoding).
#[derive(Debug, Clone)]
pub struct FileReference {
    pub written: String,
    pub paths: Vec<PathBuf>,
}

/// Whether `path` is a VRT document the way GDAL identifies one: `<VRTDataset` in the first
/// 1024 bytes before any NUL byte (GDAL's test is `strstr` on its 1024-byte header, whatever
/// the file's name); matched without case, which only widens it.
pub fn is_vrt_document(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(1024);
    if crate::gdal::policy::open_regular(path)
        .and_then(|f| f.take(1024).read_to_end(&mut head))
        .is_err()
    {
        return false;
    }
    let end = head.iter().position(|b| *b == 0).unwrap_or(head.len());
    String::from_utf8_lossy(&head[..end])
        .to_ascii_lowercase()
        .contains("<vrtdataset")
}

/// Every file a VRT document makes GDAL open, read from the tree GDAL's own parser builds
/// ([`xml`]): `SourceFilename` anywhere (simple, complex, averaged, kernel-filtered and raw
/// sources, in bands, mask bands, overviews, derived and pansharpened datasets), a warped
/// VRT's `SourceDataset`, and the metadata items that name datasets (`OVERVIEW_FILE`,
/// geolocation `X_DATASET`/`Y_DATASET`). Names are matched without case, as GDAL matches them.
/// A name marked `relativeToVRT` resolves against the document's folder; any other against
/// the working directory, as GDAL resolves it. A document that cannot be parsed is refused.
pub fn vrt_references(path: &Path) -> Result<Vec<FileReference>, GdalError> {
    let bytes = read_document(path)?;
    references_in(path, &parse(path, &bytes)?)
}

/// [`vrt_references`] of a document already parsed (with [`read_document`] and [`parse`]),
/// for a caller that reads the same document for something else too.
pub(super) fn references_in(
    path: &Path,
    document: &xml::Document,
) -> Result<Vec<FileReference>, GdalError> {
    let base = path.parent().unwrap_or(Path::new("/"));
    let mut found = Vec::new();
    for node in document.elements() {
        // GDAL reads a file name with `CPLGetXMLValue(node, "SourceFilename")`, which finds an
        // attribute of that name as well as a child element: `<SimpleSource
        // SourceFilename="/x">` and `<VRTRasterBand subClass="VRTRawRasterBand"
        // SourceFilename="/x">` are read (attack round 13, R13-2/3/4/10: the attribute form
        // was not walked, and a mask band copied an outside file into the workspace). An
        // attribute carries no `relativeToVRT` of its own (GDAL reads the default, which is
        // "0" for a source and "1" for a raw band), so both resolutions are checked.
        for (name, value) in node.attributes() {
            if FILE_NAMES.contains(&name.to_ascii_lowercase().as_str()) {
                push_reference(&mut found, base, value, None);
            }
        }
        // A warped VRT's `DestinationDataset` is opened by GDAL for update while the VRT
        // opens (`GDALDeserializeWarpOptions`): a read would write it (attack round 14, R14-8:
        // `raster_info` checkpointed an outside GeoPackage). GDAL never writes the name into a
        // VRT; a document that has one is refused, whatever it names.
        let destination = node.name().eq_ignore_ascii_case("DestinationDataset")
            || node
                .attributes()
                .any(|(name, _)| name.eq_ignore_ascii_case("DestinationDataset"));
        if destination {
            return Err(GdalError::Arguments(format!(
                "{}: a warped VRT that names a <DestinationDataset> is not opened: GDAL opens \
                 that file for writing while it opens the VRT; remove the element (gdalwarp \
                 -of VRT never writes it)",
                path.display()
            )));
        }
        // What GDAL's own lookup gives for each file name under this element.
        for name in FILE_NAMES {
            if let Some(value) = node.value(name) {
                let flag = node
                    .child(name)
                    .filter(|c| c.is_element())
                    .and_then(|c| relative(&c));
                push_reference(&mut found, base, value, flag);
            }
        }
        let tag = node.name().to_ascii_lowercase();
        let (values, relative_flag) = match tag.as_str() {
            "sourcefilename" | "sourcedataset" | "dempath" => (texts(&node), relative(&node)),
            "option" => {
                // GDAL reads an option's name with `CPLGetXMLValue(item, "Name")`.
                let key = node
                    .value_text("name")
                    .or_else(|| node.value_text("key"))
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_uppercase();
                if key != "RPC_DEM" {
                    continue;
                }
                (texts(&node), None)
            }
            // A source's open options reach its driver: GeoPackage's `PRELUDE_STATEMENTS` runs
            // any SQL (`ATTACH` an outside database, `VACUUM INTO` an outside file), and other
            // drivers' options name files. No VRT input may carry them.
            "openoptions" | "ooi" => {
                return Err(GdalError::Arguments(format!(
                    "{}: a VRT whose sources carry open options (<OpenOptions>) is not opened: \
                     they reach the source's driver (GeoPackage's PRELUDE_STATEMENTS runs SQL \
                     that can attach or write other files); open the source itself, or remove \
                     the open options",
                    path.display()
                )))
            }
            "mdi" => {
                if !mdi_keys(&node)
                    .iter()
                    .any(|k| ["OVERVIEW_FILE", "X_DATASET", "Y_DATASET"].contains(&k.as_str()))
                {
                    continue;
                }
                (mdi_values(&node), None)
            }
            _ => continue,
        };
        for value in values {
            push_reference(&mut found, base, &value, relative_flag);
        }
    }
    // One reference per name and resolution.
    let mut seen = std::collections::HashSet::new();
    found.retain(|r| seen.insert(r.paths.clone()));
    Ok(found)
}

/// The files a GeoTIFF's own metadata tag (`GDAL_METADATA`, the XML text `xml` GDAL parses
/// into its metadata domains) makes GDAL open: the `X_DATASET` and `Y_DATASET` of a
/// `GEOLOCATION` domain (gdalwarp opens them as geolocation arrays) and an `OVERVIEW_FILE`,
/// whatever domain an item claims. GDAL's file list names none of them (attack round 14,
/// R14-13: a plain GeoTIFF placed a warp's output by outside rasters). Text that is not
/// GDAL's metadata document names nothing.
pub(super) fn tiff_metadata_references(
    file: &Path,
    xml: &[u8],
) -> Result<Vec<FileReference>, GdalError> {
    let start = xml
        .iter()
        .position(|b| !crate::gdal::policy::c_space(*b))
        .unwrap_or(0);
    if !xml[start..]
        .get(..13)
        .is_some_and(|h| h.eq_ignore_ascii_case(b"<gdalmetadata"))
    {
        return Ok(Vec::new());
    }
    let document = parse(file, xml)?;
    let base = file.parent().unwrap_or(Path::new("/"));
    let mut found = Vec::new();
    for item in document.elements() {
        let named = item.value_text("name").is_some_and(|k| {
            ["X_DATASET", "Y_DATASET", "OVERVIEW_FILE"]
                .contains(&k.trim().to_ascii_uppercase().as_str())
        });
        if named {
            for value in texts(&item) {
                push_reference(&mut found, base, &value, None);
            }
        }
    }
    Ok(found)
}

/// The signature box every JP2 file starts with.
const JP2_SIGNATURE: &[u8; 12] = b"\x00\x00\x00\x0cjP  \r\n\x87\n";

/// Most boxes walked in one JP2 file, and the deepest nesting of superboxes followed.
const MAX_JP2_BOXES: usize = 4096;
const MAX_JP2_DEPTH: usize = 8;

/// The XML boxes (`xml `, top level or inside `asoc` superboxes) of a JPEG 2000 file, which
/// GDAL's JP2 readers parse on every open: GDAL's own metadata box (`GDALMultiDomainMetadata`,
/// written by `WRITE_METADATA=YES`) and the GMLJP2 boxes. At most `limit` bytes in all (more is
/// refused, never read in part). A file that is not JP2 has none.
pub(super) fn jp2_xml_boxes(path: &Path, limit: u64) -> Result<Vec<Vec<u8>>, GdalError> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = crate::gdal::policy::open_regular(path) else {
        return Ok(Vec::new());
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut head = [0u8; 12];
    // GDAL 3.6's JP2 drivers know a JP2 by the box type `jP  ` at offset 4 alone, whatever the
    // signature box holds: a file whose signature read `ABCD` skipped this walk and was
    // opened, its GMLJP2 features and all (attack round 17, R17-A1, R17-A6).
    if file.read_exact(&mut head).is_err() || head[4..8] != JP2_SIGNATURE[4..8] {
        return Ok(Vec::new());
    }
    let too_much = || {
        GdalError::Arguments(format!(
            "{}: its JPEG 2000 boxes hold more XML (or more boxes) than the {limit} bytes the \
             server reads before an open (GDAL_MCP_MAX_SCANNED_TEXT_BYTES); rewrite it without \
             metadata boxes (gdal_translate -co WRITE_METADATA=NO -co GMLJP2=NO)",
            path.display()
        ))
    };
    let mut found = Vec::new();
    let mut total = 0u64;
    let mut boxes = 0usize;
    // (start, end, depth) of the spans still to walk: the whole file, its signature box read
    // by its own length as GDAL reads it.
    let mut spans = vec![(0u64, size, 0usize)];
    while let Some((mut at, end, depth)) = spans.pop() {
        while at + 8 <= end {
            boxes += 1;
            if boxes > MAX_JP2_BOXES {
                return Err(too_much());
            }
            let mut header = [0u8; 8];
            file.seek(SeekFrom::Start(at))
                .and_then(|_| file.read_exact(&mut header))
                .map_err(|_| too_much())?;
            let length = u64::from(u32::from_be_bytes([
                header[0], header[1], header[2], header[3],
            ]));
            let kind = [header[4], header[5], header[6], header[7]];
            let (content, next) = match length {
                0 => (at + 8, end),
                1 => {
                    let mut wide = [0u8; 8];
                    if file.read_exact(&mut wide).is_err() {
                        break;
                    }
                    let length = u64::from_be_bytes(wide);
                    (at + 16, at.saturating_add(length))
                }
                _ => (at + 8, at.saturating_add(length)),
            };
            if next <= at || next > end || content > next {
                // A box past its parent's end: GDAL stops reading there too.
                break;
            }
            match &kind {
                b"xml " => {
                    let len = next - content;
                    total = total.saturating_add(len);
                    if total > limit {
                        return Err(too_much());
                    }
                    let mut bytes = vec![0u8; len as usize];
                    file.seek(SeekFrom::Start(content))
                        .and_then(|_| file.read_exact(&mut bytes))
                        .map_err(|_| too_much())?;
                    found.push(bytes);
                }
                b"asoc" | b"jp2h" | b"res " | b"uinf" if depth < MAX_JP2_DEPTH => {
                    spans.push((content, next, depth + 1));
                }
                _ => {}
            }
            at = next;
        }
    }
    Ok(found)
}

/// What an XML box of a JPEG 2000 file makes GDAL read besides the file: the `OVERVIEW_FILE`
/// and geolocation arrays (`X_DATASET`, `Y_DATASET`) named in GDAL's own metadata box, which
/// the JP2 reader puts back on the dataset (attack round 16, R16-A3: R14-13's overview file
/// through a JP2, and a FIFO there blocked every open). A GMLJP2 box carrying vector
/// features or annotations is refused whole: GDAL copies them into memory and parses the
/// schemas they name on every open, whatever the box says (R16-A1, A2, A5: an outside schema's
/// field names answered, a FIFO blocked the open, 14 MB aborted the server).
pub(super) fn jp2_box_references(file: &Path, xml: &[u8]) -> Result<Vec<FileReference>, GdalError> {
    let document = parse(file, xml)?;
    let base = file.parent().unwrap_or(Path::new("/"));
    let mut found = Vec::new();
    for node in document.elements() {
        let name = node.name().to_ascii_lowercase();
        let local = name.rsplit(':').next().unwrap_or_default();
        if local == "feature" || local == "annotation" {
            return Err(GdalError::Arguments(format!(
                "{}: its GMLJP2 metadata carries vector {}s, which GDAL parses into memory (with \
                 any schema they name) whenever the file opens; rewrite the raster without \
                 them (gdal_translate -co GMLJP2=NO, or a GMLJP2V2_DEF without features or \
                 annotations) and pass the vector data as its own file",
                file.display(),
                local
            )));
        }
        if local == "mdi"
            && mdi_keys(&node)
                .iter()
                .any(|k| ["OVERVIEW_FILE", "X_DATASET", "Y_DATASET"].contains(&k.as_str()))
        {
            for value in mdi_values(&node) {
                push_reference(&mut found, base, &value, None);
            }
        }
    }
    Ok(found)
}

/// Most schema files followed from one GML input's `.xsd` through its includes.
const MAX_GML_SCHEMAS: usize = 64;

/// The files a GML input's schema makes GDAL read: its `<stem>.xsd` (when there is one) and,
/// in turn, every file an `xs:include`, `xs:import` or `xs:redefine` of it names by
/// `schemaLocation` (resolved against the including schema's folder; `http(s)://` names are
/// left to the refused HTTP client). GDAL's GML driver resolves the includes itself and lists
/// none of them (attack round 14, R14-12: an include of `../../outside/inc.xsd` put an outside
/// schema's field names in `vector_info`'s answer, and one naming a FIFO blocked the open).
/// A schema is followed only once it is a regular file; the caller refuses any reference
/// outside a workspace.
pub(super) fn gml_schema_references(file: &Path) -> Result<Vec<FileReference>, GdalError> {
    // Whatever the input's name: GDAL's GML driver knows a GML by its content and reads the
    // `<stem>.xsd` beside any such file (attack round 16, R16-A4: `d.dat` beside `d.xsd` read
    // an outside schema that `d.gml` was refused for). A schema beside a file that is no GML
    // is walked too, at the cost of a few reads.
    let stem = crate::gdal::stem_of(file)
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let parent = file.parent().unwrap_or_else(|| Path::new("."));
    let mut pending: Vec<PathBuf> = ["xsd", "XSD"]
        .iter()
        .map(|e| parent.join(format!("{stem}.{e}")))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut found = Vec::new();
    while let Some(schema) = pending.pop() {
        if seen.contains(&schema) {
            continue;
        }
        if seen.len() >= MAX_GML_SCHEMAS {
            return Err(GdalError::Arguments(format!(
                "{}: its GML schema includes more than {MAX_GML_SCHEMAS} schema files; merge \
                 them into one .xsd",
                file.display()
            )));
        }
        seen.push(schema.clone());
        let document = parse(&schema, &read_bytes(&schema)?)?;
        let base = schema.parent().unwrap_or(Path::new("/"));
        for node in document.elements() {
            let name = node.name().to_ascii_lowercase();
            let local = name.rsplit(':').next().unwrap_or_default();
            if !["include", "import", "redefine"].contains(&local) {
                continue;
            }
            let Some(location) = node.value("schemaLocation") else {
                continue;
            };
            let lower = String::from_utf8_lossy(location)
                .trim()
                .to_ascii_lowercase();
            if lower.starts_with("http://") || lower.starts_with("https://") {
                continue;
            }
            let before = found.len();
            push_reference(&mut found, base, location, Some(true));
            for reference in &found[before..] {
                for path in &reference.paths {
                    // Followed only inside: an outside schema is the caller's refusal, and is
                    // never read here.
                    let inside = super::inside(&path.display().to_string());
                    if inside && std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
                        pending.push(path.clone());
                    }
                }
            }
        }
    }
    // The schema itself is read too.
    for schema in seen {
        found.push(FileReference {
            written: schema.display().to_string(),
            paths: vec![schema],
        });
    }
    Ok(found)
}

/// Names GDAL reads as files to open, from an element or an attribute alike
/// (`CPLGetXMLValue`): every kind of source's and a raw band's `SourceFilename`, a warped
/// VRT's `SourceDataset`, an RPC transformer's `DEMPath`.
const FILE_NAMES: &[&str] = &["sourcefilename", "sourcedataset", "dempath"];

/// The texts of an element GDAL could take as a name: each text child, and all joined.
fn texts(node: &xml::Node) -> Vec<Vec<u8>> {
    let parts = node.texts();
    let mut values: Vec<Vec<u8>> = parts.iter().map(|p| p.to_vec()).collect();
    if parts.len() > 1 {
        values.push(parts.concat());
    }
    values
}

/// One name `value` a document makes GDAL open, with the paths it resolves to:
/// `relativeToVRT` true against the document's folder `base`, false as written (the working
/// directory), unknown (`None`: a metadata item, an attribute-form name) both. The name is
/// taken byte for byte as GDAL's parser left it (it skips ASCII white space before a text and
/// keeps everything else: attack round 14, R14-1), and also without ASCII white space at
/// either end, never Unicode's (a leading no-break space is part of the name to GDAL).
fn push_reference(
    found: &mut Vec<FileReference>,
    base: &Path,
    value: &[u8],
    relative_flag: Option<bool>,
) {
    use std::os::unix::ffi::OsStrExt;
    let trimmed = value.trim_ascii();
    if trimmed.is_empty() {
        return;
    }
    let mut paths = Vec::new();
    for name in [value, value.trim_ascii_start(), trimmed] {
        let absolute = name.starts_with(b"/") || name.starts_with(b"\\");
        let name = Path::new(std::ffi::OsStr::from_bytes(name));
        let joined = base.join(name);
        let candidates: Vec<PathBuf> = match relative_flag {
            Some(true) if !absolute => vec![joined],
            Some(_) => vec![name.to_path_buf()],
            None if absolute => vec![name.to_path_buf()],
            None => vec![name.to_path_buf(), joined],
        };
        for candidate in candidates {
            if !paths.contains(&candidate) {
                paths.push(candidate);
            }
        }
    }
    found.push(FileReference {
        written: String::from_utf8_lossy(trimmed).into_owned(),
        paths,
    });
}

/// The keys GDAL's PAM and VRT metadata reader (`GDALMultiDomainMetadata::XMLInit`) may take
/// for an `<MDI>`, upper-cased: the value of its **first child node when that is an attribute,
/// whatever it is called** (`<MDI name="OVERVIEW_FILE">`, and `<MDI xmlns="X_DATASET">`, which
/// GDAL's parser keeps as an attribute: attack round 13, R13-11, and round 14, R14-2), and a
/// `key` attribute's value wherever it stands.
pub(super) fn mdi_keys(node: &xml::Node) -> Vec<String> {
    let key_of = |value: &[u8]| String::from_utf8_lossy(value).trim().to_ascii_uppercase();
    let mut keys: Vec<String> = node
        .children()
        .next()
        .filter(|first| first.kind() == xml::Kind::Attribute)
        .and_then(|first| first.children().next())
        .map(|value| key_of(value.bytes()))
        .into_iter()
        .collect();
    if let Some(key) = node.value("key").map(key_of) {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// The values GDAL may take for an `<MDI>`: the value of the node after its first child,
/// **whatever that node is** (a text, a comment, a second attribute's or an element's name:
/// R14-2), and its texts (each, and joined).
fn mdi_values(node: &xml::Node) -> Vec<Vec<u8>> {
    let mut values = texts(node);
    if let Some(second) = node.children().nth(1) {
        let value = second.bytes().to_vec();
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// Every value of an XML document as GDAL's parser hands it over (texts, attribute values,
/// comments, literals and names, decoded), joined by newlines, for the CRS checks. A document
/// GDAL's parser cannot read (or too deep, too large) is refused, never skipped.
/// Regression (issue 21, attack round 5, F3): a bare `&` made a strict parser fail and the
/// document's SRS went unchecked; GDAL's own parser reads it.
pub fn decoded_xml_text(path: &Path) -> Result<String, GdalError> {
    let document = parse(path, &read_bytes(path)?)?;
    let mut all = String::new();
    for node in document.descendants() {
        all.push_str(&node.text());
        all.push('\n');
    }
    Ok(all)
}

/// Decode character references and the predefined entities, and drop CDATA markers, over raw
/// text, as GDAL's lenient parser does; unknown `&...;` stay as they are.
pub fn decode_leniently(text: &str) -> String {
    let text = text.replace("<![CDATA[", "").replace("]]>", "");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest
            .char_indices()
            .take(16)
            .find(|(_, c)| *c == ';')
            .map(|(at, _)| at);
        let decoded = end.and_then(|end| {
            let entity = &rest[1..end];
            let c = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let number = entity.strip_prefix('#')?;
                    let code = match number.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => number.parse().ok()?,
                    };
                    char::from_u32(code)
                }
            }?;
            Some((c, end + 1))
        });
        match decoded {
            Some((c, used)) => {
                out.push(c);
                rest = &rest[used..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The CRS definitions of an XML document (a VRT, an `.aux.xml`), as GDAL's parser reads
/// them: the text of every element whose name ends in `SRS` (`SRS`, `SourceSRS`,
/// `TargetSRS`, `OverviewSRS`...), every `Projection` attribute (GCP lists), every `SRS`
/// metadata item and a warped VRT's `COORDINATE_OPERATION`. Not XML: none. XML GDAL's parser
/// cannot read (or too deep, too large): refused, never skipped (regression, issue 21, attack
/// round 5, F3).
pub fn srs_texts(path: &Path) -> Result<Vec<String>, GdalError> {
    use std::io::Read;
    let mut head = [0u8; 64];
    let n = crate::gdal::policy::open_regular(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let start = String::from_utf8_lossy(&head[..n]);
    let is_xml = std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && start
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('<');
    if !is_xml {
        return Ok(Vec::new());
    }
    let document = parse(path, &read_bytes(path)?)?;
    let lossy = |value: &[u8]| String::from_utf8_lossy(value).into_owned();
    let mut found = Vec::new();
    for node in document.elements() {
        let tag = node.name().to_ascii_lowercase();
        let srs_item = tag == "mdi" && mdi_keys(&node).iter().any(|k| k == "SRS");
        // A warped VRT's explicit coordinate operation is PROJ text like a CRS (a `tinshift`
        // or `defmodel` step opens the file it names).
        let operation = tag == "option"
            && node
                .value_text("name")
                .or_else(|| node.value_text("key"))
                .is_some_and(|k| k.trim().eq_ignore_ascii_case("coordinate_operation"));
        let values = if srs_item {
            mdi_values(&node)
        } else if tag.ends_with("srs") || operation {
            texts(&node)
        } else {
            Vec::new()
        };
        for value in values {
            let value = lossy(&value);
            if !found.contains(&value) {
                found.push(value);
            }
        }
        for (name, value) in node.attributes() {
            if name.eq_ignore_ascii_case("projection") || name.to_ascii_lowercase().ends_with("srs")
            {
                found.push(lossy(value));
            }
        }
    }
    Ok(found)
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, GdalError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let read = crate::gdal::policy::open_regular(path)
        .and_then(|f| f.take(MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes));
    if let Err(e) = read {
        return Err(GdalError::Arguments(format!(
            "{}: cannot be read to check what it references ({e})",
            path.display()
        )));
    }
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(GdalError::Arguments(format!(
            "{}: an XML document over {} MiB is not read; split the mosaic",
            path.display(),
            MAX_DOCUMENT_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// A VRT document's bytes, which must be UTF-8 (GDAL writes VRTs in UTF-8; a document in
/// another encoding is refused rather than guessed at).
pub(super) fn read_document(path: &Path) -> Result<Vec<u8>, GdalError> {
    let bytes = read_bytes(path)?;
    if std::str::from_utf8(&bytes).is_err() {
        return Err(GdalError::Arguments(format!(
            "{}: an XML document that is not UTF-8 is not opened (its references could not be \
             checked as GDAL reads them); save it as UTF-8",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Parse a document the way every check here reads one: by GDAL's own parser ([`xml`]),
/// nesting bounded first. A document GDAL's parser cannot read, or with a DTD, is refused.
pub(super) fn parse(path: &Path, bytes: &[u8]) -> Result<xml::Document, GdalError> {
    xml::Document::parse(path, bytes)
}

/// GDAL's `atoi(relativeToVRT)` ([`super::vrt_work::gdal_atoi`], one emulation of it for the
/// walk and the work estimate): a non-zero number marks the name relative to the VRT.
///
/// `Some(flag)` from an attribute (or a child element: `CPLGetXMLValue` reads either); absent,
/// `None` (both resolutions checked): a source's default is "0", but a raw band reads
/// `SourceFilename.relativeToVRT` with a default of "1".
fn relative(node: &xml::Node) -> Option<bool> {
    let value = node.value_text("relativetovrt")?;
    Some(super::vrt_work::gdal_atoi(&value) != 0)
}

#[cfg(test)]
mod vrt_tests {
    use super::*;

    /// `text` written to `name` in `dir`.
    fn written(dir: &tempfile::TempDir, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    /// A new temporary folder holding `text` as `name`.
    fn in_temp_dir(name: &str, text: impl AsRef<[u8]>) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = written(&dir, name, text);
        (dir, path)
    }

    /// Regression (issue 21, attack round 5, F7): a document nested deeper than
    /// [`xml::MAX_XML_DEPTH`] is refused by every reader before GDAL's parser sees it.
    #[test]
    fn deep_documents_are_refused_and_latin1_ones_read() {
        let deep = format!("{}{}", "<a>".repeat(100_000), "</a>".repeat(100_000));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = written(&dir, "deep.vrt", format!("<VRTDataset>{deep}</VRTDataset>"));
        let refused = vrt_references(&path).unwrap_err().to_string();
        assert!(refused.contains("levels deep"), "{refused}");
        assert!(srs_texts(&path).is_err());
        assert!(decoded_xml_text(&path).is_err());
        // A Latin-1 GML is read (its CRS checked), not refused as unparseable.
        let latin = written(
            &dir,
            "l.gml",
            b"<?xml version='1.0' encoding='ISO-8859-1'?><a srsName='EPSG:4326'>caf\xe9</a>",
        );
        let text = decoded_xml_text(&latin).unwrap();
        assert!(text.contains("caf") && text.contains("EPSG:4326"), "{text}");
    }

    fn refs(xml: &str) -> Vec<FileReference> {
        let (_dir, path) = in_temp_dir("d.vrt", xml);
        vrt_references(&path).unwrap()
    }

    /// Regression (attack round 13, R13-2/3/4/10): GDAL reads a source's name with
    /// `CPLGetXMLValue`, from an attribute as well as a child element, so
    /// `<SimpleSource SourceFilename="/x">` in a mask band, a raw band's `SourceFilename`
    /// attribute and a warped VRT's `SourceDataset` attribute are references, resolved both
    /// ways (an attribute carries no `relativeToVRT`); the element form keeps its flag.
    #[test]
    fn r13_2_source_names_given_as_attributes_are_references() {
        let (dir, path) = in_temp_dir(
            "d.vrt",
            r#"<VRTDataset rasterXSize="4" rasterYSize="4">
              <VRTRasterBand dataType="Byte" band="1"><SimpleSource><SourceFilename relativeToVRT="1">clean.tif</SourceFilename></SimpleSource></VRTRasterBand>
              <MaskBand><VRTRasterBand dataType="Byte"><SimpleSource SourceFilename="/outside/secret.tif"/></VRTRasterBand></MaskBand>
              <VRTRasterBand subClass="VRTRawRasterBand" SOURCEFILENAME="raw.bin"/>
              <GDALWarpOptions SourceDataset="/outside/warped.tif"/>
              <Overview><SourceFilename relativeToVRT="0">/abs/ovr.tif</SourceFilename></Overview>
            </VRTDataset>"#,
        );
        let found = vrt_references(&path).unwrap();
        let paths: Vec<Vec<PathBuf>> = found.iter().map(|r| r.paths.clone()).collect();
        assert!(
            paths.contains(&vec![dir.path().join("clean.tif")]),
            "{found:?}"
        );
        assert!(
            paths.contains(&vec![PathBuf::from("/outside/secret.tif")]),
            "{found:?}"
        );
        assert!(
            paths.contains(&vec![PathBuf::from("raw.bin"), dir.path().join("raw.bin")]),
            "{found:?}"
        );
        assert!(
            paths.contains(&vec![PathBuf::from("/outside/warped.tif")]),
            "{found:?}"
        );
        assert!(
            paths.contains(&vec![PathBuf::from("/abs/ovr.tif")]),
            "{found:?}"
        );
        assert_eq!(found.len(), 5, "{found:?}");
        // The clean twin: nothing but elements, one reference each.
        let clean = refs(
            r#"<VRTDataset rasterXSize="4" rasterYSize="4"><VRTRasterBand dataType="Byte" band="1"><SimpleSource><SourceFilename relativeToVRT="1">a.tif</SourceFilename></SimpleSource></VRTRasterBand></VRTDataset>"#,
        );
        assert_eq!(clean.len(), 1, "{clean:?}");
        assert_eq!(clean[0].written, "a.tif");
    }

    /// Regression (attack round 14, R14-1): a source name holding a literal CR (text), an LF
    /// or TAB (attribute) or a leading no-break space is checked byte for byte as GDAL's
    /// parser keeps it; a conforming parser had turned `d\r/` into `d\n/`, an attribute's LF
    /// into a space, and `str::trim` had dropped the no-break space, naming inside folders
    /// where GDAL opened links to an outside one.
    #[test]
    fn r14_1_names_are_checked_byte_for_byte() {
        let (dir, path) = in_temp_dir(
            "d.vrt",
            "<VRTDataset rasterXSize=\"4\" rasterYSize=\"4\"><MaskBand><VRTRasterBand dataType=\"Byte\">\
             <SimpleSource><SourceFilename relativeToVRT=\"1\">d\r/secret.tif</SourceFilename></SimpleSource>\
             <SimpleSource SourceFilename=\"/ws/e\n/secret.tif\"/>\
             <SimpleSource SourceFilename=\"/ws/g\t/secret.tif\"/>\
             <SimpleSource><SourceFilename relativeToVRT=\"1\">\u{a0}f/secret.tif</SourceFilename></SimpleSource>\
             </VRTRasterBand></MaskBand></VRTDataset>",
        );
        let found = vrt_references(&path).unwrap();
        let paths: Vec<PathBuf> = found.iter().flat_map(|r| r.paths.clone()).collect();
        for expected in [
            dir.path().join("d\r/secret.tif"),
            PathBuf::from("/ws/e\n/secret.tif"),
            PathBuf::from("/ws/g\t/secret.tif"),
            dir.path().join("\u{a0}f/secret.tif"),
        ] {
            assert!(paths.contains(&expected), "{expected:?} not in {paths:?}");
        }
        for normalised in [
            dir.path().join("d\n/secret.tif"),
            PathBuf::from("/ws/e /secret.tif"),
            dir.path().join("f/secret.tif"),
        ] {
            assert!(!paths.contains(&normalised), "{normalised:?} in {paths:?}");
        }
    }

    /// Regression (attack round 14, R14-2): GDAL keys an `<MDI>` by its first child when that
    /// is an attribute, an `xmlns` declaration included, and takes the next node's value
    /// whatever it is, a comment included.
    #[test]
    fn r14_2_metadata_keyed_by_a_namespace_or_valued_by_a_comment() {
        let found = refs(
            r#"<PAMDataset><Metadata domain="GEOLOCATION"><MDI xmlns="X_DATASET">/outside/lon.tif</MDI><MDI key="Y_DATASET"><!--/outside/lat.tif--></MDI><MDI xmlns:p="OVERVIEW_FILE"><!--/outside/o.ovr--></MDI></Metadata></PAMDataset>"#,
        );
        let written: Vec<&str> = found.iter().map(|r| r.written.as_str()).collect();
        for expected in ["/outside/lon.tif", "/outside/lat.tif", "/outside/o.ovr"] {
            assert!(written.contains(&expected), "{expected} not in {written:?}");
        }
        let (_dir, pam) = in_temp_dir(
            "x.tif.aux.xml",
            r#"<PAMDataset><Metadata><MDI key="SRS"><!--+proj=longlat +nadgrids=/outside/g.gsb--></MDI></Metadata></PAMDataset>"#,
        );
        let srs = srs_texts(&pam).unwrap();
        assert!(srs.iter().any(|t| t.contains("nadgrids")), "{srs:?}");
        // The clean twin: an ordinary item names nothing.
        assert!(refs(
            r#"<PAMDataset><Metadata><MDI key="AREA_OR_POINT">Area</MDI></Metadata></PAMDataset>"#
        )
        .is_empty());
    }

    /// Regression (attack round 13, R13-11): GDAL's metadata reader takes an `<MDI>`'s key
    /// from its first attribute whatever its name, so `<MDI name="X_DATASET">` names a
    /// geolocation array and `<MDI name="OVERVIEW_FILE">` an overview; `<MDI foo="SRS">` is a
    /// CRS. An item whose first attribute names another key is not a reference.
    #[test]
    fn r13_11_metadata_keys_are_read_from_the_first_attribute() {
        let found = refs(
            r#"<PAMDataset><Metadata domain="GEOLOCATION"><MDI name="X_DATASET">/outside/lon.tif</MDI><MDI whatever="y_dataset">/outside/lat.tif</MDI><MDI name="LINE_OFFSET">/not/a/file</MDI></Metadata><Metadata domain="OVERVIEWS"><MDI name="OVERVIEW_FILE">/ws/f.ovr</MDI></Metadata></PAMDataset>"#,
        );
        let written: Vec<&str> = found.iter().map(|r| r.written.as_str()).collect();
        assert_eq!(
            written,
            ["/outside/lon.tif", "/outside/lat.tif", "/ws/f.ovr"],
            "{found:?}"
        );
        let (_dir, pam) = in_temp_dir(
            "x.tif.aux.xml",
            r#"<PAMDataset><Metadata><MDI name="SRS">+proj=longlat +nadgrids=/outside/g.gsb</MDI></Metadata></PAMDataset>"#,
        );
        let srs = srs_texts(&pam).unwrap();
        assert!(srs.iter().any(|t| t.contains("nadgrids")), "{srs:?}");
    }

    /// Regression (issue 21): a mask band's source written with character references
    /// (`&#47;`) and marked relative read any file, because the raw-text scan joined the
    /// undecoded name to the VRT's folder.
    #[test]
    fn character_references_are_decoded_as_gdal_decodes_them() {
        let found = refs(
            r#"<VRTDataset rasterXSize="1" rasterYSize="1"><MaskBand><VRTRasterBand dataType="Byte">
            <SimpleSource><SourceFilename relativeToVRT="1">&#47;etc&#x2F;passwd</SourceFilename></SimpleSource>
            </VRTRasterBand></MaskBand></VRTDataset>"#,
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].written, "/etc/passwd");
        assert_eq!(found[0].paths, vec![PathBuf::from("/etc/passwd")]);
    }

    #[test]
    fn every_source_element_is_found_whatever_its_case_or_wrapping() {
        let found = refs(
            r#"<VRTDataset subClass="VRTWarpedDataset"><GDALWarpOptions>
            <SourceDataset relativeToVRT="0"><![CDATA[/outside/w.tif]]></SourceDataset></GDALWarpOptions>
            <VRTRasterBand subClass="VRTRawRasterBand"><sourcefilename RELATIVETOVRT=" 01">raw.bin</sourcefilename></VRTRasterBand>
            <Metadata domain="GEOLOCATION"><MDI key="x_dataset">/outside/lon.tif</MDI></Metadata>
            <Overview><SourceFilename relativeToVRT="1">/outside/<!-- split -->ovr.tif</SourceFilename></Overview>
            </VRTDataset>"#,
        );
        let written: Vec<&str> = found.iter().map(|f| f.written.as_str()).collect();
        assert!(written.contains(&"/outside/w.tif"), "{written:?}");
        assert!(written.contains(&"raw.bin"), "{written:?}");
        assert!(written.contains(&"/outside/lon.tif"), "{written:?}");
        assert!(written.contains(&"/outside/ovr.tif"), "{written:?}");
        let raw = found.iter().find(|f| f.written == "raw.bin").unwrap();
        assert!(raw.paths[0].ends_with("raw.bin") && raw.paths[0].is_absolute());
    }

    #[test]
    fn open_options_are_refused_and_a_dem_path_is_a_reference() {
        // Regression (issue 21, attack round 3): `<OpenOptions><OOI key="PRELUDE_STATEMENTS">`
        // on a GeoPackage source ran `ATTACH`/`VACUUM INTO` outside the workspace; a warped
        // VRT's `<DEMPath>` opened an outside raster.
        let (_dir, vrt) = in_temp_dir(
            "v.vrt",
            "<VRTDataset rasterXSize=\"1\" rasterYSize=\"1\"><VRTRasterBand band=\"1\">\
             <SimpleSource><SourceFilename relativeToVRT=\"1\">r.gpkg</SourceFilename>\
             <OpenOptions><OOI key=\"PRELUDE_STATEMENTS\">VACUUM INTO '/tmp/x'</OOI>\
             </OpenOptions></SimpleSource></VRTRasterBand></VRTDataset>",
        );
        assert!(vrt_references(&vrt).is_err());
        let found = refs(
            "<VRTDataset subClass=\"VRTWarpedDataset\"><GDALWarpOptions><Transformer>\
             <RPCTransformer><DEMPath>/outside/dem.tif</DEMPath></RPCTransformer></Transformer>\
             <Option name=\"RPC_DEM\">/outside/dem2.tif</Option></GDALWarpOptions></VRTDataset>",
        );
        let written: Vec<&str> = found.iter().map(|r| r.written.as_str()).collect();
        assert_eq!(written, ["/outside/dem.tif", "/outside/dem2.tif"]);
    }

    /// Regression (attack round 14, R14-8): a warped VRT's `<DestinationDataset>` is opened for
    /// update while the VRT opens; `raster_info` rewrote an outside GeoPackage. Refused in
    /// either form; the clean warped VRT still reads its source.
    #[test]
    fn r14_8_a_destination_dataset_is_refused() {
        for xml in [
            "<VRTDataset subClass=\"VRTWarpedDataset\"><GDALWarpOptions><SourceDataset>s.tif</SourceDataset><DestinationDataset>/outside/o.gpkg</DestinationDataset></GDALWarpOptions></VRTDataset>",
            "<VRTDataset subClass=\"VRTWarpedDataset\"><GDALWarpOptions DestinationDataset=\"o.gpkg\"><SourceDataset>s.tif</SourceDataset></GDALWarpOptions></VRTDataset>",
        ] {
            let (_dir, path) = in_temp_dir("w.vrt", xml);
            let why = vrt_references(&path).unwrap_err().to_string();
            assert!(why.contains("DestinationDataset"), "{why}");
        }
        let clean = refs("<VRTDataset subClass=\"VRTWarpedDataset\"><GDALWarpOptions><SourceDataset relativeToVRT=\"1\">s.tif</SourceDataset></GDALWarpOptions></VRTDataset>");
        assert_eq!(clean.len(), 1, "{clean:?}");
    }

    /// Regression (attack round 14, R14-12): GDAL's GML driver follows a `.xsd`'s
    /// `xs:include` to any file; every include, import and redefine is a reference, followed
    /// in turn; `http(s)://` names are not.
    #[test]
    fn r14_12_a_gml_schema_s_includes_are_references() {
        let dir = tempfile::tempdir().unwrap();
        let gml = written(&dir, "x.gml", "<gml:FeatureCollection/>");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        written(
            &dir,
            "x.xsd",
            r#"<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><xs:import namespace="http://www.opengis.net/gml" schemaLocation="http://schemas.opengis.net/gml/3.1.1/base/gml.xsd"/><xs:include schemaLocation="../../outside/inc.xsd"/><xs:include schemaLocation="sub/inner.xsd"/></xs:schema>"#,
        );
        written(
            &dir,
            "sub/inner.xsd",
            r#"<schema><redefine schemaLocation="/outside/deeper.xsd"/></schema>"#,
        );
        let found: Vec<String> = gml_schema_references(&gml)
            .unwrap()
            .into_iter()
            .map(|r| r.written)
            .collect();
        for expected in [
            "../../outside/inc.xsd",
            "sub/inner.xsd",
            "/outside/deeper.xsd",
        ] {
            assert!(
                found.iter().any(|f| f == expected),
                "{expected} not in {found:?}"
            );
        }
        assert!(!found.iter().any(|f| f.starts_with("http")), "{found:?}");
        // The twin: a GML whose schema includes nothing names only its schema.
        written(
            &dir,
            "x.xsd",
            r#"<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"/>"#,
        );
        assert_eq!(gml_schema_references(&gml).unwrap().len(), 1);
    }

    #[test]
    fn a_coordinate_operation_is_checked_like_a_crs() {
        let (_dir, vrt) = in_temp_dir(
            "w.vrt",
            "<VRTDataset subClass=\"VRTWarpedDataset\"><GDALWarpOptions>\
             <Option name=\"COORDINATE_OPERATION\">+proj=tinshift +file=/outside/s.json</Option>\
             </GDALWarpOptions></VRTDataset>",
        );
        assert_eq!(
            srs_texts(&vrt).unwrap(),
            ["+proj=tinshift +file=/outside/s.json".to_string()]
        );
    }

    #[test]
    fn a_document_with_a_dtd_is_refused() {
        let (_dir, path) = in_temp_dir(
            "d.vrt",
            r#"<!DOCTYPE x [<!ENTITY p "/etc/passwd">]><VRTDataset><SourceFilename>&p;</SourceFilename></VRTDataset>"#,
        );
        assert!(vrt_references(&path).is_err());
    }

    #[test]
    fn lenient_decoding_matches_gdal() {
        assert_eq!(
            decode_leniently("+nadgrids&#61;x&amp;&#x2f;"),
            "+nadgrids=x&/"
        );
        assert_eq!(
            decode_leniently("a &unknown; <![CDATA[b]]>"),
            "a &unknown; b"
        );
        // Binary bytes after an ampersand (a GeoPackage's blobs) are not text to slice.
        assert_eq!(
            decode_leniently("&2B@\u{fffd}\u{fffd}x;"),
            "&2B@\u{fffd}\u{fffd}x;"
        );
    }
}
