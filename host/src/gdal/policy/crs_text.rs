//! CRS text that makes PROJ read a file: the one rule for CRS arguments, for CRS definitions
//! inside inputs (a VRT's or `.aux.xml`'s SRS, a GeoPackage's SRS table, sidecars scanned as
//! text) and for every CRS GDAL parsed while opening an input.
//!
//! PROJ opens a file to resolve `init=`, a grid or parameter file, a step that names a file,
//! or an authority its database does not know. The trust boundary ([`super`]) checks inputs
//! with these rules before and after every open, and [`crate::gdal::facts::parse_crs`] checks
//! CRS arguments with them, so they sit here, below both.

/// Why PROJ would read a file to resolve a CRS text, if it would:
/// * `init=` anywhere (`+init=FILE:ID` reads FILE from PROJ's search path or the working
///   directory);
/// * a grid or parameter file (`+nadgrids=`, `PARAMETERFILE[...]`, `"filename"` in PROJJSON);
///   PROJ's built-in null grid (`@null`) is no file;
/// * an authority code or OGC URN whose authority is not in PROJ's database (PROJ looks an
///   unknown authority up as a file named after it).
///
/// Applied to CRS arguments and to CRS definitions inside inputs (a VRT's or `.aux.xml`'s
/// SRS, a GeoPackage's or SpatiaLite's SRS table) before GDAL parses them.
pub fn crs_text_reads_files(text: &str) -> Option<String> {
    let compact: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if compact.contains("init=") {
        return Some("it uses `init=`, which makes PROJ read an init file".to_string());
    }
    // PROJJSON names a parameter's file as a string `"value"` (every other parameter value is
    // a number; attack round 14, R14-5). Only in a CRS text: a data file's own JSON may hold
    // string values of that name.
    if compact.contains("\"filename\"")
        || compact.contains("\"value\":\"")
        || names_grid_or_parameter_file(&compact)
    {
        return Some("it names a grid or parameter file, which PROJ would open".to_string());
    }
    // PROJ steps that open the file they name: `tinshift` (`file=`), `defmodel` (`model=`).
    // Regression (issue 21, attack round 3): a BOUNDCRS whose "PROJ-based operation method"
    // was `+proj=tinshift +file=<FIFO>` blocked a read worker; in a warped VRT's
    // COORDINATE_OPERATION it leaked an outside file's first line in the error.
    if ["file=", "model=", "tinshift", "defmodel"]
        .iter()
        .any(|k| compact.contains(k))
    {
        return Some(
            "it uses a PROJ step that reads a file (`tinshift` `file=`, `defmodel` `model=`)"
                .to_string(),
        );
    }
    for authority in crs_text_authorities(text.trim()) {
        if !proj_authorities()
            .iter()
            .any(|known| known.eq_ignore_ascii_case(&authority))
        {
            return Some(format!(
                "\"{}\" is not an authority in PROJ's database ({}), and PROJ would look it up \
                 as a file",
                authority.chars().take(16).collect::<String>(),
                proj_authorities().join(", ")
            ));
        }
    }
    None
}

/// Whether lowercased, whitespace-free text names a grid or parameter file (PROJ's built-in
/// null grid `@null` opens no file).
pub fn names_grid_or_parameter_file(text: &str) -> bool {
    names_grid_or_parameter_file_before(text, text.len())
}

/// [`names_grid_or_parameter_file`] counting only matches that start before `cutoff` (a
/// streaming scan's window, whose tail is read again with the next chunk).
pub fn names_grid_or_parameter_file_before(text: &str, cutoff: usize) -> bool {
    let before = |key: &str| text.match_indices(key).any(|(at, _)| at < cutoff);
    if before("parameterfile") || before("parameter_file") {
        return true;
    }
    let real_grid = |value: &str| {
        value
            .split(',')
            .any(|g| g.trim_start_matches('@') != "null")
    };
    // WKT1's `EXTENSION["PROJ4_GRIDS","<files>"]` on a datum is a grid shift PROJ opens
    // (attack round 14, R14-5: a path there passed, and a FIFO named so wedged a worker). A
    // bare grid name (GDAL's NAD27 carries `@conus,@alaska,@ntv2_0.gsb,...`) resolves only in
    // PROJ's own data folder, its one search path here; a name with a folder is a file.
    let wkt_grids = text.match_indices("proj4_grids\"").any(|(at, key)| {
        at < cutoff && {
            let rest = text[at + key.len()..].trim_start_matches([',', '"']);
            let value: String = rest.chars().take_while(|c| *c != '"').collect();
            value.split(',').any(|grid| {
                let grid = grid.trim_start_matches('@');
                grid.contains(['/', '\\', ':']) || grid.starts_with('.')
            })
        }
    });
    if wkt_grids {
        return true;
    }
    text.match_indices("grids=").any(|(at, key)| {
        at < cutoff && {
            let value: String = text[at + key.len()..]
                .chars()
                .take_while(|c| !"+\"']<;&)".contains(*c))
                .collect();
            real_grid(&value)
        }
    })
}

/// The authorities a CRS text names the way PROJ resolves by authority: `AUTH:CODE` (also
/// compound, `EPSG:4326+EPSG:5773`) and OGC URNs (`urn:ogc:def:crs:AUTH:version:code`, also
/// compound). WKT, PROJJSON and PROJ strings name none (their IDs are not looked up).
fn crs_text_authorities(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    if lower.starts_with("urn:") {
        // Every `crs:AUTH:` segment, compound URNs included.
        return lower
            .match_indices("crs:")
            .filter_map(|(at, key)| {
                let rest = &text[at + key.len()..];
                let authority = rest.split([':', ',']).next()?;
                (!authority.is_empty()).then(|| authority.to_string())
            })
            .collect();
    }
    let first = text.chars().next().unwrap_or(' ');
    if !first.is_ascii_alphanumeric() || text.contains('[') || text.contains('{') {
        return Vec::new();
    }
    text.split('+')
        .filter_map(|part| {
            let (authority, _) = part.split_once(':')?;
            let authority = authority.trim();
            let plain = !authority.is_empty()
                && authority
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            plain.then(|| authority.to_string())
        })
        .collect()
}

/// The authorities of PROJ's database (`EPSG`, `ESRI`, `IAU_2015`, `IGNF`, `NKG`, `OGC`,
/// `PROJ`...), asked once from PROJ.
pub fn proj_authorities() -> &'static [String] {
    static AUTHORITIES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    AUTHORITIES.get_or_init(|| {
        // SAFETY: PROJ returns a NULL-terminated list of NUL-terminated strings (or NULL),
        // owned by the caller and freed with proj_string_list_destroy; the default context
        // (NULL) is only read.
        unsafe {
            let list = proj::proj_get_authorities_from_database(std::ptr::null_mut());
            let names = crate::gdal::string_list(list);
            if !list.is_null() {
                proj::proj_string_list_destroy(list);
            }
            names
        }
    })
}

/// The two PROJ functions used directly (GDAL links the same libproj).
mod proj {
    use std::ffi::{c_char, c_void};
    #[link(name = "proj")]
    extern "C" {
        pub fn proj_get_authorities_from_database(ctx: *mut c_void) -> *mut *mut c_char;
        pub fn proj_string_list_destroy(list: *mut *mut c_char);
    }
}
