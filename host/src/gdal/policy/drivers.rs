//! Which GDAL drivers may open anything at all, and the references to other files that the
//! allowed ones follow by themselves, found before GDAL opens an input.
//!
//! GDAL 3.6 registers about 190 drivers, and many multi-file formats name their data files in
//! their headers: an ERS `DataFile = "../x"`, a KML read as a raster by `KMLSUPEROVERLAY`
//! (its `GroundOverlay` `href`, opened during the open: a FIFO there blocked a worker), PDS
//! `^IMAGE`, MRF `DataFile`, DIMAP, SAFE, TIL, FAST, NDF, ILWIS, ADRG and many more. Each would
//! need its own reader to be checked, so only an allow-list stays registered
//! ([`INPUT_DRIVERS`] and the output drivers; [`keep_only_allowed_drivers`]); neither an
//! argument nor a VRT's source can reach the others.
//!
//! The allowed drivers that follow references on their own, each verified with GDAL 3.6.2
//! and closed here before the open ([`check_file`]):
//! * **HDF5-based files** (netCDF-4, read by the netCDF driver): HDF5 external links, virtual
//!   datasets (VDS) and external raw storage are followed by libhdf5 itself, and GDAL lists
//!   only the container. The file's links and datasets are walked with libhdf5 (found in the
//!   process, thread-safe build) without traversing any link or opening any source, and such
//!   a file is refused ([`check_hdf5`]).
//! * **Erdas Imagine (HFA)**: a spill file (`ImgExternalRaster.fileName`, opened during the
//!   open, `../` honoured), external overviews (`RRDNamesList`) and dependent files named in
//!   the `.img` or in an `.aux` beside any raster ([`check_hfa`]).
//! * **Idrisi (RST)**: the `.rdc`'s `ref. system` names a `.ref` file that GDAL reads for the
//!   CRS, `../` honoured ([`check_idrisi`]).
//! * **MapInfo TAB**: a seamless table lists other tables by path (`../outside.tab` was read
//!   in full, and the file list named only the index); a view opens two tables by name
//!   ([`check_mapinfo`]).
//!
//! And one switch for every driver: GDAL's own HTTP client (`CPLHTTPFetch`, used by a GeoJSON
//! `crs` of type `link`, which made the server GET any URL) is replaced by one that refuses
//! ([`refuse_http_fetches`]).

use crate::gdal::GdalError;
use gdal::Metadata;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Drivers that may open inputs besides the output drivers
/// ([`crate::gdal::policy::RASTER_OUTPUT_DRIVERS`], [`crate::gdal::policy::VECTOR_OUTPUT_DRIVERS`]): the
/// host's own in-memory drivers, raster VRTs (their sources are checked), ESRI's `.hdr`
/// formats, File Geodatabases (folders, walked before the open) and IDRISI rasters (read, no
/// longer written: attack round 23, R23-A6).
pub const INPUT_DRIVERS: &[&str] = &["VRT", "MEM", "Memory", "EHdr", "OpenFileGDB", "RST"];

/// The drivers deregistered at start (their names), for messages.
static DEREGISTERED: OnceLock<Vec<String>> = OnceLock::new();

/// Whether `name` is a driver this server deregistered (any case).
pub fn was_deregistered(name: &str) -> bool {
    DEREGISTERED
        .get()
        .is_some_and(|names| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
}

/// Every driver that may open or write anything.
pub fn allowed() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = INPUT_DRIVERS
        .iter()
        .chain(crate::gdal::policy::RASTER_OUTPUT_DRIVERS)
        .chain(crate::gdal::policy::VECTOR_OUTPUT_DRIVERS)
        .copied()
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The refusal for a format argument naming a deregistered driver (MRF, PDS4, MVT, PDF...),
/// worded as the output allow-list words it; `None` for a name GDAL never had.
pub fn refusal(argument: &str, name: &str, raster: bool) -> Option<GdalError> {
    if !was_deregistered(name) {
        return None;
    }
    crate::gdal::policy::check_output_driver(argument, name, raster).err()
}

/// Deregister every driver that is not allowed ([`allowed`]), once, before any dataset is
/// opened (from `policy::apply_process_switches`).
pub(in crate::gdal) fn keep_only_allowed_drivers() {
    let allowed = allowed();
    let mut removed = Vec::new();
    // SAFETY: GDALGetDriverCount / GDALGetDriver / GDALGetDriverShortName read the driver
    // manager; GDALDeregisterDriver removes a driver handle it returned (drivers are never
    // destroyed here). Runs once, before any dataset is opened.
    unsafe {
        let mut handles = Vec::new();
        for i in 0..gdal_sys::GDALGetDriverCount() {
            let driver = gdal_sys::GDALGetDriver(i);
            if driver.is_null() {
                continue;
            }
            let name = gdal_sys::GDALGetDriverShortName(driver);
            if name.is_null() {
                continue;
            }
            let name = CStr::from_ptr(name).to_string_lossy().into_owned();
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(&name)) {
                handles.push((driver, name));
            }
        }
        for (driver, name) in handles {
            gdal_sys::GDALDeregisterDriver(driver);
            removed.push(name);
        }
    }
    let _ = DEREGISTERED.set(removed);
}

/// `CPLHTTPResult` of `cpl_http.h` (GDAL 3.6), freed by GDAL with `CPLHTTPDestroyResult`.
#[repr(C)]
struct HttpResult {
    status: c_int,
    content_type: *mut c_char,
    error: *mut c_char,
    data_len: c_int,
    data_alloc: c_int,
    data: *mut u8,
    headers: *mut *mut c_char,
    mime_part_count: c_int,
    mime_parts: *mut c_void,
}

type FetchCallback = unsafe extern "C" fn(
    url: *const c_char,
    options: *const *const c_char,
    progress: *mut c_void,
    progress_arg: *mut c_void,
    write: *mut c_void,
    write_arg: *mut c_void,
    user: *mut c_void,
) -> *mut HttpResult;

extern "C" {
    fn CPLHTTPSetFetchCallback(callback: Option<FetchCallback>, user: *mut c_void);
}

/// GDAL's HTTP client, replaced: every request fails without touching the network.
unsafe extern "C" fn refuse_fetch(
    _url: *const c_char,
    _options: *const *const c_char,
    _progress: *mut c_void,
    _progress_arg: *mut c_void,
    _write: *mut c_void,
    _write_arg: *mut c_void,
    _user: *mut c_void,
) -> *mut HttpResult {
    // SAFETY: GDAL frees the result and its strings with CPLFree (VSIFree), so they are
    // allocated with VSICalloc / CPLStrdup; a zeroed result is a valid empty one.
    unsafe {
        let result = gdal_sys::VSICalloc(1, std::mem::size_of::<HttpResult>()) as *mut HttpResult;
        if result.is_null() {
            return result;
        }
        (*result).status = 1;
        (*result).error = gdal_sys::CPLStrdup(c"gdal-mcp refuses network access".as_ptr());
        result
    }
}

/// Make every `CPLHTTPFetch` fail: a GeoJSON `crs` of type `link` or `url` (and any other
/// driver or SRS import that fetches with GDAL's HTTP client rather than `/vsicurl/`) reached
/// any URL, `CPL_VSIL_CURL_ALLOWED_FILENAME` notwithstanding.
pub(in crate::gdal) fn refuse_http_fetches() {
    // SAFETY: installs a process-wide callback with the signature GDAL 3.6 declares
    // (`CPLHTTPFetchCallbackFunc`); it touches no state and lives for the whole process.
    unsafe { CPLHTTPSetFetchCallback(Some(refuse_fetch), std::ptr::null_mut()) };
}

/// The per-format checks on one file GDAL will open for `input` (called by
/// `policy::check_file_before_open` for the input and for every VRT source): HDF5 links and
/// storage, HFA spill/overview/dependent files (also of an `.aux` beside any raster), MapInfo
/// seamless tables and views (also inside a folder opened as a vector source).
pub fn check_file(input: &Path, file: &Path) -> Result<(), GdalError> {
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(());
    };
    if meta.is_dir() {
        // A folder opened as a vector source: the MapInfo driver opens every `.tab` in it.
        let Ok(entries) = std::fs::read_dir(file) else {
            return Ok(());
        };
        for entry in entries.flatten().take(crate::workspace::MAX_FOLDER_ENTRIES) {
            let path = entry.path();
            if is_tab(&path) {
                check_mapinfo(input, &path)?;
            }
        }
        return Ok(());
    }
    if !meta.is_file() {
        return Ok(());
    }
    // GDAL 3.6's EHdr driver, for a file named `imspatio.bil` or `haspatio.bil` (SPOT
    // products), opens `image.rep` beside it and in every folder above it up to `/`: through a
    // VRT source it left the workspace, and a FIFO there wedged the read (attack round 22,
    // R22-A6).
    if let Some(stem) = crate::gdal::stem_of(file) {
        let stem = stem.to_string_lossy().to_ascii_lowercase();
        if stem == "imspatio" || stem == "haspatio" {
            return Err(GdalError::Arguments(format!(
                "{}: GDAL's EHdr driver looks for `image.rep` in every folder above a file of \
                 this name, outside the workspace too; rename the file (with its .hdr) and \
                 retry",
                input.display()
            )));
        }
    }
    check_hdf5(input, file)?;
    check_classic_netcdf(input, file)?;
    check_shapefile_index(input, file)?;
    check_hfa(input, file)?;
    if let (Some(parent), Some(name), Some(stem)) =
        (file.parent(), file.file_name(), crate::gdal::stem_of(file))
    {
        // `<name>.aux` and `<stem>.aux` in any case, as GDAL finds them among the folder's
        // names (attack round 18, R18-A4: `P.tif.AUX` was never checked).
        let wanted: Vec<String> = [name, stem]
            .iter()
            .map(|base| format!("{}.aux", base.to_string_lossy().to_lowercase()))
            .collect();
        if let Ok(entries) = std::fs::read_dir(parent) {
            for entry in entries
                .filter_map(Result::ok)
                .take(crate::workspace::MAX_FOLDER_ENTRIES)
            {
                if wanted.contains(&entry.file_name().to_string_lossy().to_lowercase()) {
                    check_hfa(input, &entry.path())?;
                }
            }
        }
    }
    if is_tab(file) {
        check_mapinfo(input, file)?;
    }
    check_idrisi(input, file)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Idrisi (RST)

/// Largest IDRISI `.rdc` header read (a real one is a few KiB); a larger one is refused rather
/// than read in part (GDAL's `CSLLoad` reads it whole: attack round 13, R13-5).
pub const MAX_RDC_BYTES: u64 = 4 << 20;

/// Refuse an Idrisi raster whose `.rdc` names a reference system file outside: GDAL 3.6 opens
/// `<folder>/<ref. system>.ref` to read the CRS (`ref. system : ../outside/x` read
/// `../outside/x.ref`, and GDAL's file list named only the `.rst` and `.rdc`). The header is
/// read whole and its lines as GDAL reads them ([`idrisi_ref_systems`]).
pub fn check_idrisi(input: &Path, file: &Path) -> Result<(), GdalError> {
    for (rdc, candidate, value) in idrisi_ref_files(input, file)? {
        let shown = candidate.display().to_string();
        let special = std::fs::metadata(&candidate).is_ok_and(|m| !m.is_file());
        if !crate::gdal::policy::is_inside(&shown) || special {
            return Err(refuse(
                input,
                &rdc,
                &format!(
                    "its reference system \"{value}\" makes GDAL read {shown}, outside every \
                     workspace or not a regular file"
                ),
            ));
        }
    }
    Ok(())
}

/// The `.ref` files an Idrisi raster's `.rdc` makes GDAL read (unresolved, possibly absent),
/// with the `.rdc` and the name as written; none for a file that is not an `.rst`. An `.rdc`
/// over [`MAX_RDC_BYTES`] is refused.
pub fn idrisi_ref_files(
    input: &Path,
    file: &Path,
) -> Result<Vec<(std::path::PathBuf, std::path::PathBuf, String)>, GdalError> {
    use std::io::Read;
    let is_rst = crate::gdal::extension_of(file)
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("rst"));
    let (true, Some(folder), Some(stem)) = (is_rst, file.parent(), crate::gdal::stem_of(file))
    else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for extension in ["rdc", "RDC"] {
        let mut name = stem.to_os_string();
        name.push(".");
        name.push(extension);
        let rdc = folder.join(name);
        if !std::fs::metadata(&rdc).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let mut text = Vec::new();
        if crate::gdal::policy::open_regular(&rdc)
            .and_then(|f| f.take(MAX_RDC_BYTES + 1).read_to_end(&mut text))
            .is_err()
        {
            continue;
        }
        if text.len() as u64 > MAX_RDC_BYTES {
            return Err(refuse(
                input,
                &rdc,
                &format!(
                    "its IDRISI header is over {} MiB, more than a header holds, and is not \
                     read in part (GDAL reads it whole)",
                    MAX_RDC_BYTES >> 20
                ),
            ));
        }
        for value in idrisi_ref_systems(&String::from_utf8_lossy(&text)) {
            // GDAL builds the name from the raw bytes; a lossy decoding would check another
            // file (attack round 14, R14-3: `d\xff/crs` was checked as `d\u{FFFD}/crs.ref`, a
            // file inside, while GDAL read `d\xff/crs.ref` through a link to an outside folder).
            if value.contains(char::REPLACEMENT_CHARACTER) {
                return Err(refuse(
                    input,
                    &rdc,
                    "its reference system names a file with bytes that are not UTF-8, which \
                     cannot be checked as GDAL reads them; rename the .ref file and the \
                     `ref. system` line in UTF-8",
                ));
            }
            for name in [value.as_str(), value.trim(), value.trim_start()] {
                if name.is_empty() {
                    continue;
                }
                let candidate = folder.join(format!("{name}.ref"));
                if !found.iter().any(|(_, c, _)| *c == candidate) {
                    found.push((rdc.clone(), candidate, name.to_string()));
                }
            }
        }
    }
    Ok(found)
}

/// Every `ref. system` value of an `.rdc`'s text, as GDAL 3.6's IDRISI driver reads them:
/// lines end at `\n` or `\r` and at a NUL byte (C strings); `myCSLSetNameValueSeparator`
/// splits each line at its first `=`, or else its first `:`, skips white space after it and
/// joins the two again; `myCSLFetchNameValue` then matches `ref. system` at the line's start
/// without case, skips spaces, and takes what follows an `=` or `:`, blanks skipped. Attack round 13,
/// R13-5: `ref. system=../../outside/crs` was split at `:` only and read an outside `.ref`.
pub fn idrisi_ref_systems(text: &str) -> Vec<String> {
    const KEY: &str = "ref. system";
    let mut found = Vec::new();
    for line in text.split(['\n', '\r']) {
        let line = line.split('\0').next().unwrap_or_default();
        let Some(at) = line.find('=').or_else(|| line.find(':')) else {
            continue;
        };
        let value = line[at + 1..].trim_start_matches([' ', '\t', '\x0b', '\x0c']);
        let joined = format!("{}: {value}", &line[..at]);
        // The key as GDAL matches it, and (wider) with leading blanks skipped.
        for candidate in [joined.as_str(), joined.trim_start()] {
            let Some(head) = candidate.get(..KEY.len()) else {
                continue;
            };
            if !head.eq_ignore_ascii_case(KEY) {
                continue;
            }
            let rest = candidate[KEY.len()..].trim_start_matches(' ');
            if let Some(v) = rest.strip_prefix([':', '=']) {
                // The blanks after the separator are not part of the name (measured: GDAL
                // opened `../outside/crs.ref` for `ref. system=../outside/crs`).
                let v = v.trim_start_matches([' ', '\t', '\x0b', '\x0c']);
                if !found.iter().any(|f| f == v) {
                    found.push(v.to_string());
                }
            }
        }
    }
    found
}

fn refuse(input: &Path, file: &Path, why: &str) -> GdalError {
    let shown = if input == file {
        String::new()
    } else {
        format!(" (through {})", file.display())
    };
    GdalError::Arguments(format!(
        "{}{shown}: {why}; GDAL would read other files through it. Copy the data you need into a \
         self-contained file inside the workspace (for example with gdal_translate or ogr2ogr \
         outside this server)",
        input.display()
    ))
}

// ---------------------------------------------------------------------------------------------
// MapInfo

fn is_tab(path: &Path) -> bool {
    crate::gdal::extension_of(path)
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("tab"))
}

/// Largest MapInfo `.tab` read (a `.tab` is a short text header; an index of thousands of
/// tables is a few hundred KiB); a larger one is refused rather than read in part.
pub const MAX_TAB_BYTES: u64 = 16 << 20;

/// Refuse a MapInfo `.tab` that GDAL reads as a seamless table (`"\IsSeamless" = "TRUE"`: the
/// index's features name other tables by path, `../` included, and GDAL lists only the index)
/// or as a view (`create view` over tables opened by name). Lines are read as GDAL's
/// `IMapInfoFile::SmartOpen` reads them: **every line** to the end of the file (attack round
/// 13, R13-6: the marker after 1.2 M blank lines, past the first MiB that was read, opened an
/// outside table), leading blanks skipped, matched without case. The file is streamed line by
/// line; one over [`MAX_TAB_BYTES`] is refused.
pub fn check_mapinfo(input: &Path, file: &Path) -> Result<(), GdalError> {
    use std::io::{BufRead, Read};
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(());
    };
    if !meta.is_file() {
        return Ok(());
    }
    if meta.len() > MAX_TAB_BYTES {
        return Err(refuse(
            input,
            file,
            &format!(
                "it is a MapInfo .tab of {} bytes, more than the {} MiB a table header holds, \
                 and is not read in part (GDAL reads every line of it)",
                meta.len(),
                MAX_TAB_BYTES >> 20
            ),
        ));
    }
    let Ok(opened) = crate::gdal::policy::open_regular(file) else {
        return Ok(());
    };
    let mut reader = std::io::BufReader::new(opened.take(MAX_TAB_BYTES + 1));
    let mut raw = Vec::new();
    let mut read: u64 = 0;
    loop {
        raw.clear();
        let n = match reader.read_until(b'\n', &mut raw) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                return Err(refuse(
                    input,
                    file,
                    &format!("it cannot be read to check what it opens ({e})"),
                ))
            }
        };
        read += n as u64;
        if read > MAX_TAB_BYTES {
            return Err(refuse(
                input,
                file,
                &format!(
                    "it is a MapInfo .tab over {} MiB, and is not read in part",
                    MAX_TAB_BYTES >> 20
                ),
            ));
        }
        for line in String::from_utf8_lossy(&raw).split(['\n', '\r']) {
            if let Some(why) = mapinfo_line(line) {
                return Err(refuse(input, file, why));
            }
        }
    }
    Ok(())
}

/// Why one `.tab` line makes GDAL open other tables, if it does.
fn mapinfo_line(line: &str) -> Option<&'static str> {
    let squeezed: String = line
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let lower = line.trim_start().to_ascii_lowercase();
    if squeezed.starts_with("\"\\isseamless\"=\"true\"") {
        return Some(
            "it is a MapInfo seamless table, whose index names other tables by path \
             (seamless tables are not opened)",
        );
    }
    if lower.starts_with("create") && squeezed.starts_with("createview") {
        return Some(
            "it is a MapInfo view, which opens other tables by name (views are not opened)",
        );
    }
    None
}

// ---------------------------------------------------------------------------------------------
// HFA (Erdas Imagine)

const HFA_MAGIC: &[u8; 16] = b"EHFA_HEADER_TAG\0";
/// Entries read from one HFA tree at most (a real `.img` has tens to a few thousands).
const MAX_HFA_ENTRIES: usize = 200_000;
/// Largest entry data read to find file names.
const MAX_HFA_DATA: u32 = 1 << 20;

/// A file name an HFA file makes GDAL open, and how GDAL forms its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfaReference {
    /// The node type that names it (`ImgExternalRaster`, `Eimg_RRDNamesList`,
    /// `Eimg_DependentFile`).
    pub kind: String,
    /// The name as stored (for overviews, without the `(:Layer:...)` suffix).
    pub name: String,
}

/// Refuse an HFA file (`EHFA_HEADER_TAG` header: an `.img`, or an `.aux` GDAL reads beside
/// any raster) that names a spill, overview or dependent file outside the workspaces or not
/// a regular file. GDAL forms those paths as `<folder>/<name>` (so `../` leaves the folder),
/// then `<folder>/<file name of name>`: both must be inside, links resolved.
pub fn check_hfa(input: &Path, file: &Path) -> Result<(), GdalError> {
    if !has_magic(file, 0, HFA_MAGIC) {
        return Ok(());
    }
    let references = hfa_references(file).map_err(|e| {
        refuse(
            input,
            file,
            &format!(
                "its Erdas Imagine (HFA) tree cannot be read to check the files it names ({e})"
            ),
        )
    })?;
    let folder = file.parent().unwrap_or(Path::new("/"));
    for reference in references {
        for candidate in hfa_candidates(folder, &reference.name) {
            let shown = candidate.display().to_string();
            let special = std::fs::metadata(&candidate).is_ok_and(|m| !m.is_file());
            if !crate::gdal::policy::is_inside(&shown) || special {
                return Err(refuse(
                    input,
                    file,
                    &format!(
                        "its {} names \"{}\", which GDAL opens as {shown}: outside every \
                         workspace or not a regular file",
                        reference.kind, reference.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The paths GDAL 3.6 tries for a name stored in an HFA file: `CPLFormFilename(folder, name)`
/// (a plain concatenation: an absolute name does not replace the folder) and the name's last
/// component in the folder.
fn hfa_candidates(folder: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(format!("{}/{name}", folder.display()))];
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    if !last.is_empty() {
        let basename = folder.join(last);
        if !out.contains(&basename) {
            out.push(basename);
        }
    }
    out.retain(|p| !p.as_os_str().is_empty());
    out
}

fn has_magic(file: &Path, offset: u64, magic: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    if !std::fs::metadata(file).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(mut f) = std::fs::File::open(file) else {
        return false;
    };
    let mut head = vec![0u8; magic.len()];
    f.seek(SeekFrom::Start(offset)).is_ok() && f.read_exact(&mut head).is_ok() && head == magic
}

/// The file names an HFA tree stores, read as GDAL reads its entries: the file header points
/// to an `Ehfa_File` record, which points to the root entry; each entry is `next`, `prev`,
/// `parent`, `child`, `data`, `dataSize` (little-endian u32), a 64-byte name and a 32-byte
/// type. Strings (`Emif_String`) are a count, a pointer and the characters.
pub fn hfa_references(file: &Path) -> Result<Vec<HfaReference>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(file).map_err(|e| e.to_string())?;
    let mut read_at = |offset: u32, len: usize| -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; len];
        f.seek(SeekFrom::Start(u64::from(offset)))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|e| format!("at byte {offset}: {e}"))?;
        Ok(buf)
    };
    let u32_at = |buf: &[u8], at: usize| -> Option<u32> {
        buf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let header = read_at(16, 4)?;
    let header_pos = u32_at(&header, 0).ok_or("short header")?;
    let file_record = read_at(header_pos, 18)?;
    let root = u32_at(&file_record, 8).ok_or("short file record")?;
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut pending = vec![root];
    while let Some(pos) = pending.pop() {
        if pos == 0 || !seen.insert(pos) {
            continue;
        }
        if seen.len() > MAX_HFA_ENTRIES {
            return Err(format!("more than {MAX_HFA_ENTRIES} entries"));
        }
        let entry = read_at(pos, 120)?;
        let field = |i: usize| u32_at(&entry, i * 4).unwrap_or(0);
        let (next, child, data, size) = (field(0), field(3), field(4), field(5));
        pending.push(next);
        pending.push(child);
        let kind: String = entry[88..120]
            .iter()
            .take_while(|b| **b != 0)
            .map(|b| char::from(*b))
            .collect();
        let interesting = [
            "ImgExternalRaster",
            "Eimg_RRDNamesList",
            "Eimg_DependentFile",
        ];
        if !interesting.contains(&kind.as_str()) {
            continue;
        }
        if size > MAX_HFA_DATA {
            return Err(format!("a {kind} entry of {size} bytes"));
        }
        let body = read_at(data, size as usize)?;
        // An Emif_String at `at`: its characters and the offset after it.
        let string_at = |at: usize| -> Result<(String, usize), String> {
            let count = u32_at(&body, at).ok_or(format!("{kind}: truncated"))? as usize;
            let start = at + 8;
            let chars = body
                .get(start..start + count)
                .ok_or(format!("{kind}: a string past its entry"))?;
            let text: String = String::from_utf8_lossy(chars)
                .split('\0')
                .next()
                .unwrap_or_default()
                .to_string();
            Ok((text, start + count))
        };
        let mut names = Vec::new();
        if kind == "Eimg_RRDNamesList" {
            let (_algorithm, after) = string_at(0)?;
            let count = u32_at(&body, after).ok_or(format!("{kind}: truncated"))? as usize;
            let mut at = after + 8;
            for _ in 0..count.min(100_000) {
                let (name, next) = string_at(at)?;
                // `file.rrd(:Layer_1:_ss_2_)`: the file is before `(:`.
                let file_part = name.split("(:").next().unwrap_or_default().to_string();
                names.push(file_part);
                at = next;
            }
        } else {
            names.push(string_at(0)?.0);
        }
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            // As for IDRISI (R14-3): a name GDAL reads as bytes that are not UTF-8 is not
            // checked through a lossy decoding.
            if name.contains(char::REPLACEMENT_CHARACTER) {
                return Err(format!("{kind}: a file name whose bytes are not UTF-8"));
            }
            found.push(HfaReference {
                kind: kind.clone(),
                name,
            });
        }
    }
    Ok(found)
}

// ---------------------------------------------------------------------------------------------
// Shapefile index

/// Refuse a shapefile whose index (`.shx`) points two records at overlapping bytes of the
/// `.shp`. GDAL reads each record where the index says, so one 400,000-vertex polygon pointed
/// at 10,000 times read as 10,000 features: 6.5 MB of files held a read worker for minutes and
/// would have converted to 64 GB (attack round 19, R19-A3). Every shapefile writer lays its
/// records one after another; an index that cannot be read is left to GDAL.
fn check_shapefile_index(input: &Path, file: &Path) -> Result<(), GdalError> {
    use std::io::Read;
    let is_shp = crate::gdal::extension_of(file)
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("shp"));
    let (Some(parent), Some(stem)) = (file.parent(), crate::gdal::stem_of(file)) else {
        return Ok(());
    };
    if !is_shp {
        return Ok(());
    }
    let stem = stem.to_string_lossy();
    let Some(index) = ["shx", "SHX"]
        .iter()
        .map(|e| parent.join(format!("{stem}.{e}")))
        .find(|p| p.is_file())
    else {
        return Ok(());
    };
    let Ok(f) = crate::gdal::policy::open_regular(&index) else {
        return Ok(());
    };
    let mut reader = std::io::BufReader::new(f);
    let mut header = [0u8; 100];
    if reader.read_exact(&mut header).is_err() {
        return Ok(());
    }
    let mut end_of_last: u64 = 100;
    let mut entry = [0u8; 8];
    let mut record = 0u64;
    while reader.read_exact(&mut entry).is_ok() {
        record += 1;
        let words = |b: &[u8]| u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let (offset, length) = (words(&entry[..4]) * 2, words(&entry[4..]) * 2);
        if offset < end_of_last {
            return Err(GdalError::Arguments(format!(
                "{}: its index {} points record {record} at bytes {offset} of the .shp, which \
                 record {} already holds (up to byte {end_of_last}): GDAL would read the same \
                 geometry again for each such record. Every shapefile writer lays records one \
                 after another; rebuild the index from the .shp (GDAL's SHAPE_RESTORE_SHX, \
                 outside this server) or convert the data from its source",
                input.display(),
                index.display(),
                record - 1
            )));
        }
        end_of_last = offset + 8 + length;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Classic netCDF (CDF-1, CDF-2, CDF-5)

/// Most attributes (global and of every variable) and variables a classic netCDF header may
/// declare: GDAL's netCDF driver copies each into the dataset's metadata with a linear
/// search, so a 1.9 MB file of 80,000 global attributes held `raster_info` past its 30 s open
/// deadline (attack round 17, R17-A8). Real files hold hundreds.
const MAX_NETCDF_ATTRIBUTES: u64 = 20_000;
/// See [`MAX_NETCDF_ATTRIBUTES`].
const MAX_NETCDF_VARIABLES: u64 = 10_000;
/// The bytes of a classic netCDF file read to walk its header.
const NETCDF_HEAD_BYTES: usize = 16 << 20;
/// The most band metadata entries one variable may make: GDAL's netCDF driver makes a band of
/// every index of a variable's extra dimensions and copies the variable's attributes into
/// each, with a linear search per entry; 32,768 bands of 2,000 attributes (a 60 KB file) kept
/// an open running past its deadline, holding GDAL's netCDF lock (attack round 22, R22-A3).
const MAX_NETCDF_BAND_METADATA: u64 = 2_000_000;

/// Refuse a classic netCDF file whose header declares more than [`MAX_NETCDF_ATTRIBUTES`]
/// attributes or [`MAX_NETCDF_VARIABLES`] variables, counted by walking the header (its
/// layout is fixed: dimensions, global attributes, variables with their own attributes)
/// before GDAL opens it. A header that cannot be walked is left to GDAL (which refuses it).
fn check_classic_netcdf(input: &Path, file: &Path) -> Result<(), GdalError> {
    use std::io::Read;
    let Ok(f) = crate::gdal::policy::open_regular(file) else {
        return Ok(());
    };
    let mut head = Vec::new();
    // A header of these counts fits well within 16 MiB; one that runs past it is refused.
    if f.take(NETCDF_HEAD_BYTES as u64)
        .read_to_end(&mut head)
        .is_err()
    {
        return Ok(());
    }
    let Some(counts) = netcdf_header_counts(&head) else {
        // A classic header that runs past the bytes read hid what it declares: a 17 MiB
        // attribute before the variables hid R20-A1's 800 M-double coordinate, and the server
        // aborted (attack round 22, R22-A1).
        let classic = matches!(head.get(..4), Some([b'C', b'D', b'F', 1 | 2 | 5]));
        if classic && head.len() >= NETCDF_HEAD_BYTES {
            return Err(GdalError::Arguments(format!(
                "{}: its netCDF header runs past its first {} MiB, so what it declares cannot \
                 be checked before GDAL reads it; move large attributes into variables, or \
                 extract the variables you need first (ncks)",
                input.display(),
                NETCDF_HEAD_BYTES >> 20
            )));
        }
        return Ok(());
    };
    if counts.band_metadata > MAX_NETCDF_BAND_METADATA {
        return Err(GdalError::Arguments(format!(
            "{}: a variable of its netCDF header makes {} bands and carries {} attributes, \
             which GDAL copies into every band's metadata: {} entries, more than the {} the \
             server opens (the copy takes time quadratic in the attributes); extract a slice \
             first (ncks -d)",
            input.display(),
            counts.band_metadata_parts.0,
            counts.band_metadata_parts.1,
            counts.band_metadata,
            MAX_NETCDF_BAND_METADATA
        )));
    }
    // A one-dimensional variable GDAL reads whole at the open: a 500-byte CDF-2 declaring an
    // `x` of 800 M doubles made it allocate 6.4 GB and the server abort (attack round 20,
    // R20-A1; R15-A4 bounded netCDF-4's only).
    let (values, bytes) = counts.largest_vector;
    let (most_values, most_bytes) = (super::max_cells(), crate::budget::global().total());
    if values > most_values || bytes > most_bytes {
        return Err(GdalError::Arguments(format!(
            "{}: its netCDF header declares a one-dimensional variable of {values} values ({} \
             MB), which GDAL reads whole at the open (at most {most_values} values, \
             GDAL_MCP_MAX_CELLS, and {} MB, the memory budget); cut the variable first (ncks)",
            input.display(),
            bytes >> 20,
            most_bytes >> 20
        )));
    }
    if counts.attributes > MAX_NETCDF_ATTRIBUTES || counts.variables > MAX_NETCDF_VARIABLES {
        return Err(GdalError::Arguments(format!(
            "{}: its netCDF header declares {} attributes and {} variables, more than the \
             {MAX_NETCDF_ATTRIBUTES} attributes and {MAX_NETCDF_VARIABLES} variables the server \
             opens (GDAL builds its metadata from them in time quadratic in their number); \
             extract the variables you need first (ncks, or gdal_translate NETCDF:file:var)",
            input.display(),
            counts.attributes,
            counts.variables
        )));
    }
    Ok(())
}

/// What a classic netCDF header declares.
#[derive(Debug, PartialEq, Eq)]
struct NetcdfCounts {
    attributes: u64,
    variables: u64,
    /// The largest one-dimensional variable: its values and bytes (GDAL's netCDF driver reads
    /// a coordinate variable whole at the open).
    largest_vector: (u64, u64),
    /// The most band metadata entries of one variable: its bands (the product of its
    /// dimensions but the last two) times its attributes, and those two.
    band_metadata: u64,
    band_metadata_parts: (u64, u64),
}

/// The attributes and variables a classic netCDF header (`head`, the file's first bytes)
/// declares, or `None` when `head` is no classic netCDF or its header runs past `head`. Past
/// the limits the walk stops early with what it counted.
fn netcdf_header_counts(head: &[u8]) -> Option<NetcdfCounts> {
    let version = match head.get(..4)? {
        [b'C', b'D', b'F', v @ (1 | 2 | 5)] => *v,
        _ => return None,
    };
    let wide = version == 5;
    let mut at = 4usize;
    let word = |at: &mut usize| -> Option<u64> {
        let bytes = head.get(*at..*at + 4)?;
        *at += 4;
        Some(u64::from(u32::from_be_bytes([
            bytes[0], bytes[1], bytes[2], bytes[3],
        ])))
    };
    let count = |at: &mut usize| -> Option<u64> {
        if wide {
            let bytes = head.get(*at..*at + 8)?;
            *at += 8;
            Some(u64::from_be_bytes(bytes.try_into().ok()?))
        } else {
            word(at)
        }
    };
    let name = |at: &mut usize| -> Option<()> {
        let length = count(at)?;
        let padded = usize::try_from(length.checked_add(3)? / 4 * 4).ok()?;
        *at = at.checked_add(padded)?;
        (*at <= head.len()).then_some(())
    };
    let type_size = |t: u64| -> Option<u64> {
        Some(match t {
            1 | 2 | 7 => 1,
            3 | 8 => 2,
            4 | 5 | 9 => 4,
            6 | 10 | 11 => 8,
            _ => return None,
        })
    };
    let limit = MAX_NETCDF_ATTRIBUTES.max(MAX_NETCDF_VARIABLES);
    let mut counts = NetcdfCounts {
        attributes: 0,
        variables: 0,
        largest_vector: (0, 0),
        band_metadata: 0,
        band_metadata_parts: (0, 0),
    };
    let records = count(&mut at)?;
    // Dimensions: tag (0x0A or ABSENT 0), then that many (name, length); length 0 is the
    // record dimension, as long as `numrecs`.
    let _tag = word(&mut at)?;
    let dimensions = count(&mut at)?;
    let mut lengths: Vec<u64> = Vec::new();
    for _ in 0..dimensions.min(limit) {
        name(&mut at)?;
        let length = count(&mut at)?;
        lengths.push(if length == 0 { records } else { length });
    }
    // Attributes: tag (0x0C or 0), count, then (name, type, n, values padded to 4 bytes).
    let attributes = |at: &mut usize, counts: &mut NetcdfCounts| -> Option<()> {
        let _tag = word(at)?;
        let n = count(at)?;
        counts.attributes = counts.attributes.saturating_add(n);
        if counts.attributes > MAX_NETCDF_ATTRIBUTES {
            return Some(());
        }
        for _ in 0..n {
            name(at)?;
            let t = word(at)?;
            let values = count(at)?;
            let bytes = values.checked_mul(type_size(t)?)?.checked_add(3)? / 4 * 4;
            *at = at.checked_add(usize::try_from(bytes).ok()?)?;
            if *at > head.len() {
                return None;
            }
        }
        Some(())
    };
    attributes(&mut at, &mut counts)?;
    if counts.attributes > MAX_NETCDF_ATTRIBUTES {
        return Some(counts);
    }
    // Variables: tag (0x0B or 0), count, then (name, dimension ids, attributes, type, size,
    // begin).
    let _tag = word(&mut at)?;
    let variables = count(&mut at)?;
    counts.variables = variables;
    if variables > MAX_NETCDF_VARIABLES {
        return Some(counts);
    }
    for _ in 0..variables {
        name(&mut at)?;
        let rank = count(&mut at)?;
        let mut first = None;
        let mut ids = Vec::new();
        for _ in 0..rank.min(limit) {
            let id = count(&mut at)?;
            first.get_or_insert(id);
            ids.push(id);
        }
        let before = counts.attributes;
        attributes(&mut at, &mut counts)?;
        if counts.attributes > MAX_NETCDF_ATTRIBUTES {
            return Some(counts);
        }
        if ids.len() > 2 {
            let bands = ids[..ids.len() - 2].iter().fold(1u64, |product, id| {
                let length = usize::try_from(*id)
                    .ok()
                    .and_then(|i| lengths.get(i))
                    .copied()
                    .unwrap_or(1);
                product.saturating_mul(length.max(1))
            });
            let own = counts.attributes - before;
            let entries = bands.saturating_mul(own);
            if entries > counts.band_metadata {
                counts.band_metadata = entries;
                counts.band_metadata_parts = (bands, own);
            }
        }
        let t = word(&mut at)?;
        if let (1, Some(id)) = (rank, first) {
            let values = usize::try_from(id)
                .ok()
                .and_then(|i| lengths.get(i))
                .copied()
                .unwrap_or(0);
            let bytes = values.saturating_mul(type_size(t).unwrap_or(8));
            if bytes > counts.largest_vector.1 {
                counts.largest_vector = (values, bytes);
            }
        }
        count(&mut at)?;
        if version == 1 {
            word(&mut at)?;
        } else {
            head.get(at..at + 8)?;
            at += 8;
        }
    }
    Some(counts)
}

// HDF5 (netCDF-4)

const HDF5_MAGIC: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Whether `file` is an HDF5 file: the signature at byte 0 or after a user block (512, 1024,
/// 2048... bytes), where libhdf5 and netCDF look for it.
pub fn is_hdf5(file: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(meta) = std::fs::metadata(file) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let Ok(mut f) = std::fs::File::open(file) else {
        return false;
    };
    let mut offset = 0u64;
    while offset + 8 <= meta.len() {
        let mut head = [0u8; 8];
        if f.seek(SeekFrom::Start(offset)).is_ok()
            && f.read_exact(&mut head).is_ok()
            && &head == HDF5_MAGIC
        {
            return true;
        }
        offset = if offset == 0 { 512 } else { offset * 2 };
    }
    false
}

type Hid = i64;
type Herr = c_int;
type LinkVisitor = unsafe extern "C" fn(
    group: Hid,
    name: *const c_char,
    info: *const c_int,
    data: *mut c_void,
) -> Herr;

/// The few libhdf5 (1.10, `hid_t` = 64 bits) functions the check uses, found in the process
/// (libgdal loads libhdf5): no link-time dependency, and no check at all if absent (then
/// HDF5 files are refused).
struct Hdf5 {
    fopen: unsafe extern "C" fn(*const c_char, c_uint, Hid) -> Hid,
    fclose: unsafe extern "C" fn(Hid) -> Herr,
    lvisit: unsafe extern "C" fn(Hid, c_int, c_int, LinkVisitor, *mut c_void) -> Herr,
    oopen: unsafe extern "C" fn(Hid, *const c_char, Hid) -> Hid,
    oclose: unsafe extern "C" fn(Hid) -> Herr,
    iget_type: unsafe extern "C" fn(Hid) -> c_int,
    dget_create_plist: unsafe extern "C" fn(Hid) -> Hid,
    pget_layout: unsafe extern "C" fn(Hid) -> c_int,
    pget_external_count: unsafe extern "C" fn(Hid) -> c_int,
    pclose: unsafe extern "C" fn(Hid) -> Herr,
    pget_chunk: unsafe extern "C" fn(Hid, c_int, *mut u64) -> c_int,
    dget_space: unsafe extern "C" fn(Hid) -> Hid,
    sget_ndims: unsafe extern "C" fn(Hid) -> c_int,
    sget_dims: unsafe extern "C" fn(Hid, *mut u64, *mut u64) -> c_int,
    sclose: unsafe extern "C" fn(Hid) -> Herr,
    dget_type: unsafe extern "C" fn(Hid) -> Hid,
    tget_size: unsafe extern "C" fn(Hid) -> usize,
    tclose: unsafe extern "C" fn(Hid) -> Herr,
    aget_num_attrs: unsafe extern "C" fn(Hid) -> c_int,
}

/// A symbol as the function pointer type `F`.
///
/// # Safety
/// `F` must be an `extern "C"` function pointer type matching the symbol's C signature.
unsafe fn function<F: Copy>(pointer: *mut c_void) -> Option<F> {
    if std::mem::size_of::<F>() != std::mem::size_of::<*mut c_void>() {
        return None;
    }
    // SAFETY: same size, and the caller vouches for the signature.
    Some(unsafe { std::mem::transmute_copy(&pointer) })
}

fn hdf5() -> Option<&'static Hdf5> {
    static LIB: OnceLock<Option<Hdf5>> = OnceLock::new();
    LIB.get_or_init(|| {
        let symbol = |name: &CStr| -> Option<*mut c_void> {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
            let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!found.is_null()).then_some(found)
        };
        // SAFETY: H5open takes no arguments and initialises the library (idempotent).
        let open: unsafe extern "C" fn() -> Herr = unsafe { function(symbol(c"H5open")?)? };
        // SAFETY: as above.
        if unsafe { open() } < 0 {
            return None;
        }
        // SAFETY: each symbol is the libhdf5 1.10 function of that name, whose C signature
        // the field's type matches.
        unsafe {
            Some(Hdf5 {
                fopen: function(symbol(c"H5Fopen")?)?,
                fclose: function(symbol(c"H5Fclose")?)?,
                lvisit: function(symbol(c"H5Lvisit")?)?,
                oopen: function(symbol(c"H5Oopen")?)?,
                oclose: function(symbol(c"H5Oclose")?)?,
                iget_type: function(symbol(c"H5Iget_type")?)?,
                dget_create_plist: function(symbol(c"H5Dget_create_plist")?)?,
                pget_layout: function(symbol(c"H5Pget_layout")?)?,
                pget_external_count: function(symbol(c"H5Pget_external_count")?)?,
                pclose: function(symbol(c"H5Pclose")?)?,
                pget_chunk: function(symbol(c"H5Pget_chunk")?)?,
                dget_space: function(symbol(c"H5Dget_space")?)?,
                sget_ndims: function(symbol(c"H5Sget_simple_extent_ndims")?)?,
                sget_dims: function(symbol(c"H5Sget_simple_extent_dims")?)?,
                sclose: function(symbol(c"H5Sclose")?)?,
                dget_type: function(symbol(c"H5Dget_type")?)?,
                tget_size: function(symbol(c"H5Tget_size")?)?,
                tclose: function(symbol(c"H5Tclose")?)?,
                aget_num_attrs: function(symbol(c"H5Aget_num_attrs")?)?,
            })
        }
    })
    .as_ref()
}

/// What an HDF5 file makes libhdf5 open besides itself, as `"what: name"` lines.
#[derive(Default)]
struct Hdf5Findings {
    lib: Option<&'static Hdf5>,
    found: Vec<String>,
    /// What reading the file would cost beyond `limit` bytes at once (a chunk libhdf5
    /// inflates whole, a one-dimensional variable GDAL reads whole).
    costly: Vec<String>,
    /// What a dataset may hold at once, in bytes ([`Hdf5Limits`]).
    limit: Hdf5Limits,
    visited: usize,
    /// Attributes of the root group and of every object reached by a hard link.
    attributes: u64,
    /// Datasets (netCDF variables) reached by a hard link.
    datasets: u64,
}

impl Hdf5Findings {
    /// Count the attributes of `object`, an open object of `lib`.
    ///
    /// # Safety
    /// `object` is an open object identifier of `lib`.
    unsafe fn count_attributes(&mut self, lib: &Hdf5, object: Hid) {
        // SAFETY: as the caller vouches.
        let count = unsafe { (lib.aget_num_attrs)(object) };
        // An object whose attributes cannot be counted counts as the whole bound: it is
        // refused rather than opened unmeasured.
        self.attributes = self
            .attributes
            .saturating_add(u64::try_from(count).unwrap_or(MAX_NETCDF_ATTRIBUTES + 1));
    }
}

/// What one HDF5 dataset may make GDAL hold or walk at once.
#[derive(Debug, Clone, Copy)]
struct Hdf5Limits {
    /// Bytes of one chunk uncompressed: the smaller of [`MAX_HDF5_CHUNK_BYTES`] and the
    /// memory budget. A chunk larger than libhdf5's chunk cache is inflated again for every
    /// read of it: four `raster_info` calls on a 1 GiB chunk held the read-only workers for
    /// 112-124 s each (attack round 15, R15-A2).
    chunk_bytes: u64,
    /// Bytes of a one-dimensional variable: the memory budget.
    vector_bytes: u64,
    /// Values of a one-dimensional variable: the cell budget (`GDAL_MCP_MAX_CELLS`). A CF-1.8
    /// geometry container over 200 M features (800 MB of `node_count`, under a 1.5 GB
    /// budget) kept GDAL's open looping for minutes (R15-A3).
    vector_values: u64,
}

impl Default for Hdf5Limits {
    fn default() -> Self {
        Self {
            chunk_bytes: u64::MAX,
            vector_bytes: u64::MAX,
            vector_values: u64::MAX,
        }
    }
}

/// The largest HDF5 chunk, uncompressed, GDAL may be let read (`GDAL_MCP_MAX_HDF5_CHUNK_BYTES`
/// overrides it): 64 MiB, far above the chunks netCDF-4 writers choose (a few MB at most).
const MAX_HDF5_CHUNK_BYTES: u64 = 64 << 20;

const H5D_CHUNKED: c_int = 2;
/// Dimensions read at most per dataset (HDF5's own limit is 32).
const MAX_HDF5_RANK: usize = 32;

/// What reading dataset `object` would hold in memory at once, when more than `limit`
/// bytes: a chunk (libhdf5 inflates a whole chunk to give any of its cells: a 1 MB
/// netCDF-4 file holding one 1 GiB deflate chunk took `raster_info` to 2,219 MB against a
/// 300 MiB budget, attack round 15, R15-A1), or a one-dimensional variable (GDAL's netCDF
/// driver reads coordinate and CF geometry variables whole at the open: an 800 M-long `x`
/// never written made the open allocate 6.4 GB and the process abort, R15-A4; a geometry
/// container over 200 M features kept the open looping for minutes, R15-A3).
///
/// # Safety
/// `object` is an open dataset of `lib`, and `plist` its creation property list.
unsafe fn dataset_cost(lib: &Hdf5, object: Hid, plist: Hid, limit: Hdf5Limits) -> Option<String> {
    // SAFETY: as the caller vouches; every handle opened here is closed here.
    unsafe {
        let datatype = (lib.dget_type)(object);
        if datatype < 0 {
            return Some("a dataset whose type cannot be read".to_string());
        }
        let size = (lib.tget_size)(datatype) as u64;
        (lib.tclose)(datatype);
        let space = (lib.dget_space)(object);
        if space < 0 {
            return Some("a dataset whose shape cannot be read".to_string());
        }
        let rank = (lib.sget_ndims)(space);
        let mut dims = [0u64; MAX_HDF5_RANK];
        let read = if (0..=MAX_HDF5_RANK as c_int).contains(&rank) {
            (lib.sget_dims)(space, dims.as_mut_ptr(), std::ptr::null_mut())
        } else {
            -1
        };
        (lib.sclose)(space);
        if read < 0 {
            return Some("a dataset whose shape cannot be read".to_string());
        }
        let rank = rank.max(0) as usize;
        let bytes = |extent: &[u64]| {
            extent
                .iter()
                .try_fold(size.max(1), |acc, d| acc.checked_mul(*d))
                .unwrap_or(u64::MAX)
        };
        if (lib.pget_layout)(plist) == H5D_CHUNKED {
            let mut chunk = [0u64; MAX_HDF5_RANK];
            let chunk_rank = (lib.pget_chunk)(plist, MAX_HDF5_RANK as c_int, chunk.as_mut_ptr());
            if chunk_rank > 0 {
                let chunk_bytes = bytes(&chunk[..chunk_rank as usize]);
                if chunk_bytes > limit.chunk_bytes {
                    return Some(format!(
                        "a chunk of {} MB uncompressed, which libhdf5 inflates whole to read any \
                         of its cells (at most {} MB, GDAL_MCP_MAX_HDF5_CHUNK_BYTES)",
                        chunk_bytes >> 20,
                        limit.chunk_bytes >> 20
                    ));
                }
            }
        }
        if rank == 1 {
            let total = bytes(&dims[..1]);
            if total > limit.vector_bytes || dims[0] > limit.vector_values {
                return Some(format!(
                    "a one-dimensional variable of {} values ({} MB), which GDAL reads whole \
                     (at most {} values, GDAL_MCP_MAX_CELLS, and {} MB, the memory budget)",
                    dims[0],
                    total >> 20,
                    limit.vector_values,
                    limit.vector_bytes >> 20
                ));
            }
        }
        None
    }
}

const H5L_TYPE_HARD: c_int = 0;
const H5L_TYPE_SOFT: c_int = 1;
const H5I_DATASET: c_int = 5;
const H5D_VIRTUAL: c_int = 3;
/// Links visited at most (beyond, the file is refused as unchecked).
const MAX_HDF5_LINKS: usize = 1_000_000;
/// Groups nested at most: GDAL's netCDF and HDF5 drivers recurse through them at the open, and
/// a 1.9 MB file of 9,900 nested groups kept a read-only worker busy past its deadline (the
/// CLI overflowed its stack after 60 s); eight took the read-only pool out of service (attack
/// round 21, R21-A6).
const MAX_HDF5_DEPTH: usize = 64;

unsafe extern "C" fn visit_link(
    group: Hid,
    name: *const c_char,
    info: *const c_int,
    data: *mut c_void,
) -> Herr {
    // SAFETY: `data` is the `Hdf5Findings` passed to H5Lvisit by `hdf5_findings`, alive for
    // the whole visit; `info` points to an `H5L_info_t` whose first field is the link type;
    // `name` is a NUL-terminated path relative to `group`.
    unsafe {
        let findings = &mut *(data as *mut Hdf5Findings);
        findings.visited += 1;
        if findings.visited > MAX_HDF5_LINKS {
            findings
                .found
                .push(format!("more than {MAX_HDF5_LINKS} links"));
            return 1;
        }
        let shown = CStr::from_ptr(name).to_string_lossy().into_owned();
        let depth = shown.split('/').filter(|part| !part.is_empty()).count();
        if depth > MAX_HDF5_DEPTH {
            let start: String = shown.chars().take(60).collect();
            findings.costly.push(format!(
                "groups nested more than {MAX_HDF5_DEPTH} deep, which GDAL walks recursively: \
                 /{start}..."
            ));
            return 1;
        }
        let kind = if info.is_null() { -1 } else { *info };
        if kind == H5L_TYPE_SOFT {
            return 0;
        }
        if kind != H5L_TYPE_HARD {
            let what = if kind == 64 {
                "an external link"
            } else {
                "a user-defined link"
            };
            findings.found.push(format!("{what}: /{shown}"));
            return 0;
        }
        let Some(lib) = findings.lib else {
            return -1;
        };
        // A hard link: the object is in this file. Opening it (never a link's target file)
        // tells a dataset from a group; a dataset's creation properties say where its
        // values are.
        let object = (lib.oopen)(group, name, 0);
        if object < 0 {
            findings
                .found
                .push(format!("an object that cannot be opened: /{shown}"));
            return 0;
        }
        findings.count_attributes(lib, object);
        if (lib.iget_type)(object) == H5I_DATASET {
            findings.datasets += 1;
            let plist = (lib.dget_create_plist)(object);
            if plist >= 0 {
                if (lib.pget_layout)(plist) == H5D_VIRTUAL {
                    findings
                        .found
                        .push(format!("a virtual dataset over other files: /{shown}"));
                }
                if (lib.pget_external_count)(plist) > 0 {
                    findings
                        .found
                        .push(format!("a dataset stored in external files: /{shown}"));
                }
                if let Some(cost) = dataset_cost(lib, object, plist, findings.limit) {
                    findings.costly.push(format!("/{shown}: {cost}"));
                }
                (lib.pclose)(plist);
            } else {
                findings
                    .found
                    .push(format!("a dataset whose storage cannot be read: /{shown}"));
            }
        }
        (lib.oclose)(object);
        0
    }
}

/// What an HDF5 file would make libhdf5 open besides itself: external and user-defined links,
/// virtual datasets and externally stored datasets, found by visiting every link from the
/// root without traversing any (only hard links are descended).
pub fn hdf5_findings(file: &Path) -> Result<Vec<String>, String> {
    hdf5_walk(file, Hdf5Limits::default()).map(|findings| findings.found)
}

/// Every link of an HDF5 file from the root ([`hdf5_findings`]), with what reading its
/// datasets would hold at once beyond `limit` bytes.
fn hdf5_walk(file: &Path, limit: Hdf5Limits) -> Result<Hdf5Findings, String> {
    let lib = hdf5().ok_or("libhdf5 is not available in this process")?;
    let name = std::ffi::CString::new(file.as_os_str().as_encoded_bytes())
        .map_err(|_| "a NUL in the path".to_string())?;
    // SAFETY: H5Fopen with a NUL-terminated name, read-only (0) and default properties (0);
    // the handle is closed below.
    let handle = unsafe { (lib.fopen)(name.as_ptr(), 0, 0) };
    if handle < 0 {
        return Err("libhdf5 cannot open it".to_string());
    }
    let mut findings = Hdf5Findings {
        lib: Some(lib),
        limit,
        ..Default::default()
    };
    // SAFETY: opens the root group of the open file (closed here) to count its attributes,
    // the netCDF-4 global attributes.
    unsafe {
        let root = (lib.oopen)(handle, c"/".as_ptr(), 0);
        if root >= 0 {
            findings.count_attributes(lib, root);
            (lib.oclose)(root);
        } else {
            findings
                .found
                .push("a root group that cannot be opened".to_string());
        }
    }
    // SAFETY: visits the links of an open file by name order (0), native order (2); the
    // callback gets `findings`, which outlives the call.
    let status = unsafe {
        (lib.lvisit)(
            handle,
            0,
            2,
            visit_link,
            &mut findings as *mut Hdf5Findings as *mut c_void,
        )
    };
    // SAFETY: closes the handle opened above.
    unsafe { (lib.fclose)(handle) };
    if status < 0 {
        return Err("its links cannot be visited".to_string());
    }
    if findings.attributes > MAX_NETCDF_ATTRIBUTES || findings.datasets > MAX_NETCDF_VARIABLES {
        findings.costly.push(format!(
            "{} attributes and {} variables, more than the {MAX_NETCDF_ATTRIBUTES} attributes \
             and {MAX_NETCDF_VARIABLES} variables the server opens (GDAL builds its metadata \
             from them in time quadratic in their number; attack round 18, R18-A6)",
            findings.attributes, findings.datasets
        ));
    }
    Ok(findings)
}

/// Refuse an HDF5-based file (netCDF-4) whose links or datasets make libhdf5 open other
/// files: GDAL lists only the container, and libhdf5 resolves an external link's or a
/// virtual dataset's absolute path as written (verified with GDAL 3.6.2: an external link
/// named like the file's only variable served an outside file's pixels).
pub fn check_hdf5(input: &Path, file: &Path) -> Result<(), GdalError> {
    if !is_hdf5(file) {
        return Ok(());
    }
    let budget = crate::budget::global().total();
    let limit = Hdf5Limits {
        chunk_bytes: crate::budget::setting("GDAL_MCP_MAX_HDF5_CHUNK_BYTES", MAX_HDF5_CHUNK_BYTES)
            .min(budget),
        vector_bytes: budget,
        vector_values: super::max_cells(),
    };
    match hdf5_walk(file, limit) {
        Ok(findings) if !findings.found.is_empty() => Err(refuse(
            input,
            file,
            &format!(
                "this HDF5/netCDF-4 file makes libhdf5 open other files ({})",
                findings
                    .found
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )),
        Ok(findings) if !findings.costly.is_empty() => Err(refuse(
            input,
            file,
            &format!(
                "reading this HDF5/netCDF-4 file would make GDAL hold or walk more at once \
                 than the server's budgets allow: {}. Rechunk it (nccopy -c) or cut the \
                 variable first",
                findings
                    .costly
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )),
        Ok(_) => Ok(()),
        Err(e) => Err(refuse(
            input,
            file,
            &format!("this HDF5/netCDF-4 file cannot be checked for links to other files ({e})"),
        )),
    }
}

/// The option names a driver declares in one of its option lists (`DMD_CREATIONOPTIONLIST`,
/// `DS_LAYER_CREATIONOPTIONLIST`), upper-cased.
pub fn declared_options(driver: &gdal::Driver, list: &str) -> Vec<String> {
    let list = driver.metadata_item(list, "").unwrap_or_default();
    let mut names = Vec::new();
    let mut rest = list.as_str();
    while let Some(start) = rest.find("name='") {
        let after = &rest[start + 6..];
        match after.find('\'') {
            Some(end) => {
                names.push(after[..end].to_ascii_uppercase());
                rest = &after[end..];
            }
            None => break,
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack round 17, R17-A8: a classic netCDF header is walked for its attribute and
    /// variable counts (built by hand, and written by GDAL's own netCDF driver).
    #[test]
    fn r17_a8_classic_netcdf_headers_are_counted() {
        fn header(attributes: u32) -> Vec<u8> {
            let mut h = b"CDF\x01".to_vec();
            h.extend(0u32.to_be_bytes()); // numrecs
            h.extend([0u8; 8]); // no dimensions
            h.extend(0x0Cu32.to_be_bytes());
            h.extend(attributes.to_be_bytes());
            for _ in 0..attributes {
                h.extend(1u32.to_be_bytes());
                h.extend(b"a\0\0\0");
                h.extend(2u32.to_be_bytes()); // char
                h.extend(1u32.to_be_bytes());
                h.extend(b"x\0\0\0");
            }
            h.extend([0u8; 8]); // no variables
            h
        }
        assert_eq!(
            netcdf_header_counts(&header(3)),
            Some(NetcdfCounts {
                attributes: 3,
                variables: 0,
                largest_vector: (0, 0),
                band_metadata: 0,
                band_metadata_parts: (0, 0),
            })
        );
        // Attack round 20, R20-A1: a CDF-2 header declaring `x` of 800 M doubles, a 500-byte
        // file.
        let mut huge = b"CDF\x02".to_vec();
        huge.extend(0u32.to_be_bytes()); // numrecs
        huge.extend(0x0Au32.to_be_bytes());
        huge.extend(1u32.to_be_bytes());
        huge.extend(1u32.to_be_bytes());
        huge.extend(b"x\0\0\0");
        huge.extend(800_000_000u32.to_be_bytes());
        huge.extend([0u8; 8]); // no global attributes
        huge.extend(0x0Bu32.to_be_bytes());
        huge.extend(1u32.to_be_bytes());
        huge.extend(1u32.to_be_bytes());
        huge.extend(b"x\0\0\0");
        huge.extend(1u32.to_be_bytes()); // rank
        huge.extend(0u32.to_be_bytes()); // dimension 0
        huge.extend([0u8; 8]); // no attributes
        huge.extend(6u32.to_be_bytes()); // double
        huge.extend(0u32.to_be_bytes()); // vsize
        huge.extend(0u64.to_be_bytes()); // begin (64-bit in CDF-2)
        let counts = netcdf_header_counts(&huge).unwrap();
        assert_eq!(
            counts.largest_vector,
            (800_000_000, 6_400_000_000),
            "{counts:?}"
        );
        let many = netcdf_header_counts(&header(30_000)).unwrap();
        assert!(many.attributes > MAX_NETCDF_ATTRIBUTES, "{many:?}");
        // Attack round 22, R22-A3: `z(d0, d1, y, x)` of 100,000 bands and 100 attributes, each
        // copied into every band's metadata.
        let mut bands = b"CDF\x01".to_vec();
        bands.extend(0u32.to_be_bytes()); // numrecs
        bands.extend(0x0Au32.to_be_bytes());
        bands.extend(4u32.to_be_bytes());
        for (name, length) in [
            (b"a\0\0\0", 1000u32),
            (b"b\0\0\0", 100),
            (b"y\0\0\0", 2),
            (b"x\0\0\0", 2),
        ] {
            bands.extend(1u32.to_be_bytes());
            bands.extend(name);
            bands.extend(length.to_be_bytes());
        }
        bands.extend([0u8; 8]); // no global attributes
        bands.extend(0x0Bu32.to_be_bytes());
        bands.extend(1u32.to_be_bytes());
        bands.extend(1u32.to_be_bytes());
        bands.extend(b"z\0\0\0");
        bands.extend(4u32.to_be_bytes()); // rank
        for id in 0u32..4 {
            bands.extend(id.to_be_bytes());
        }
        bands.extend(0x0Cu32.to_be_bytes());
        bands.extend(100u32.to_be_bytes());
        for _ in 0..100 {
            bands.extend(1u32.to_be_bytes());
            bands.extend(b"t\0\0\0");
            bands.extend(2u32.to_be_bytes()); // char
            bands.extend(1u32.to_be_bytes());
            bands.extend(b"v\0\0\0");
        }
        bands.extend(5u32.to_be_bytes()); // float
        bands.extend(16u32.to_be_bytes()); // vsize
        bands.extend(0u32.to_be_bytes()); // begin
        let counted = netcdf_header_counts(&bands).unwrap();
        assert_eq!(counted.band_metadata_parts, (100_000, 100), "{counted:?}");
        assert!(counted.band_metadata > MAX_NETCDF_BAND_METADATA);
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("bands.nc");
        std::fs::write(&file, &bands).unwrap();
        let error = check_classic_netcdf(&file, &file).unwrap_err().to_string();
        assert!(error.contains("100000 bands"), "{error}");
        // Attack round 22, R22-A1: a header that runs past the bytes read is refused.
        let mut long = b"CDF\x01".to_vec();
        long.extend(0u32.to_be_bytes()); // numrecs
        long.extend([0u8; 8]); // no dimensions
        long.extend(0x0Cu32.to_be_bytes());
        long.extend(1u32.to_be_bytes());
        long.extend(1u32.to_be_bytes());
        long.extend(b"c\0\0\0");
        long.extend(2u32.to_be_bytes()); // char
        long.extend((17u32 << 20).to_be_bytes());
        long.resize(long.len() + (17 << 20), b' ');
        let padded = folder.path().join("long.nc");
        std::fs::write(&padded, &long).unwrap();
        let error = check_classic_netcdf(&padded, &padded)
            .unwrap_err()
            .to_string();
        assert!(error.contains("runs past its first 16 MiB"), "{error}");
        assert_eq!(netcdf_header_counts(b"GIF89a"), None);
        let folder = tempfile::tempdir().unwrap();
        let asc = folder.path().join("g.asc");
        std::fs::write(
            &asc,
            "ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3 4\n",
        )
        .unwrap();
        let nc = folder.path().join("g.nc");
        let status = std::process::Command::new("gdal_translate")
            .args(["-q", "-of", "netCDF"])
            .arg(&asc)
            .arg(&nc)
            .status()
            .unwrap();
        assert!(status.success());
        let counts = netcdf_header_counts(&std::fs::read(&nc).unwrap()).unwrap();
        assert!(
            counts.variables >= 1 && counts.attributes >= 1 && counts.attributes < 100,
            "{counts:?}"
        );
    }

    #[test]
    fn hfa_names_resolve_as_gdal_forms_them() {
        let folder = Path::new("/w/d");
        assert_eq!(
            hfa_candidates(folder, "../out/secret.txt"),
            vec![
                PathBuf::from("/w/d/../out/secret.txt"),
                PathBuf::from("/w/d/secret.txt")
            ]
        );
        // An absolute name is concatenated, not substituted (CPLFormFilename).
        assert_eq!(
            hfa_candidates(folder, "/etc/passwd")[0],
            PathBuf::from("/w/d//etc/passwd")
        );
        assert_eq!(
            hfa_candidates(folder, "C:\\data\\x.ige")[1],
            PathBuf::from("/w/d/x.ige")
        );
    }

    #[test]
    fn mapinfo_seamless_tables_and_views_are_recognised() {
        let dir = tempfile::tempdir().expect("tempdir");
        let seamless = dir.path().join("s.TAB");
        std::fs::write(
            &seamless,
            "!table\n!version 300\nbegin_metadata\n  \"\\IsSeamless\" = \"TRUE\"\nend_metadata\n",
        )
        .expect("write");
        assert!(check_mapinfo(&seamless, &seamless).is_err());
        let view = dir.path().join("v.tab");
        std::fs::write(&view, "!Table\n  Create View v As\nSelect a From t1, t2\n").expect("write");
        assert!(check_mapinfo(&view, &view).is_err());
        let plain = dir.path().join("p.tab");
        std::fs::write(
            &plain,
            "!table\n!version 300\nDefinition Table\n  Type NATIVE\n  Fields 1\n    \
             IsSeamless Char (10) ;\n",
        )
        .expect("write");
        assert!(check_mapinfo(&plain, &plain).is_ok());
    }

    /// Regression (attack round 13, R13-6): GDAL reads every line of a `.tab`, so the
    /// seamless marker after 1.2 M blank lines (past the first MiB, where the check stopped)
    /// opened an outside table. The whole file is scanned; an oversize one is refused; the
    /// same padding without the marker still opens.
    #[test]
    fn r13_6_the_seamless_marker_is_found_past_the_first_mib() {
        let dir = tempfile::tempdir().expect("tempdir");
        let padding = "\n".repeat(1_200_000);
        let padded = dir.path().join("padded.tab");
        std::fs::write(
            &padded,
            format!("!table\n!version 300\n{padding}  \"\\IsSeamless\" = \"TRUE\"\n"),
        )
        .expect("write");
        let why = check_mapinfo(&padded, &padded).unwrap_err().to_string();
        assert!(why.contains("seamless"), "{why}");
        let twin = dir.path().join("twin.tab");
        std::fs::write(&twin, format!("!table\n!version 300\n{padding}")).expect("write");
        assert!(check_mapinfo(&twin, &twin).is_ok());
        let huge = dir.path().join("huge.tab");
        std::fs::File::create(&huge)
            .and_then(|f| f.set_len(MAX_TAB_BYTES + 1))
            .expect("sparse");
        let why = check_mapinfo(&huge, &huge).unwrap_err().to_string();
        assert!(why.contains("not read in part"), "{why}");
    }

    /// Regression (attack round 14, R14-3): a `ref. system` holding a byte that is not UTF-8
    /// was checked through a lossy decoding (`d\u{FFFD}/crs.ref`, a file inside) while GDAL
    /// read `d\xff/crs.ref` (a link to an outside folder). It is refused; the UTF-8 twin is
    /// checked as before.
    #[test]
    fn r14_3_a_reference_system_name_that_is_not_utf8_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rst = dir.path().join("x.rst");
        std::fs::write(&rst, b"\0\0").expect("write");
        std::fs::write(
            dir.path().join("x.rdc"),
            b"file format : IDRISI Raster A.1\nref. system : d\xff/crs\n",
        )
        .expect("write");
        let why = idrisi_ref_files(&rst, &rst).unwrap_err().to_string();
        assert!(why.contains("not UTF-8"), "{why}");
        std::fs::write(dir.path().join("x.rdc"), "ref. system : d\u{ff}/crs\n").expect("write");
        let found = idrisi_ref_files(&rst, &rst).expect("read");
        assert!(
            found
                .iter()
                .any(|(_, c, _)| *c == dir.path().join("d\u{ff}/crs.ref")),
            "{found:?}"
        );
    }

    /// Regression (attack round 13, R13-5): GDAL's IDRISI driver splits an `.rdc` line at its
    /// first `=` (else `:`) and skips the blanks after it, and reads the whole header, so
    /// `ref. system=../../outside/crs`, or the `:` form after 1.2 M blank lines, read an
    /// outside `.ref`. Lines are now read as GDAL reads them, the whole header, bounded.
    #[test]
    fn r13_5_idrisi_ref_system_lines_are_read_as_gdal_reads_them() {
        assert_eq!(
            idrisi_ref_systems("ref. system=../../outside/crs\n"),
            ["../../outside/crs"]
        );
        assert_eq!(
            idrisi_ref_systems("REF. SYSTEM  :   utm-33n\r\n"),
            ["utm-33n"]
        );
        assert_eq!(idrisi_ref_systems("ref. system : a=b"), ["a: b"]);
        assert_eq!(
            idrisi_ref_systems("ref. system\0: x\nfile title  : ref. system"),
            Vec::<String>::new()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("x.rst"), [0u8; 4]).expect("write");
        let rst = dir.path().join("x.rst");
        let fifo = dir.path().join("crs.ref");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let padding = "\n".repeat(1_200_000);
        for header in [
            "ref. system=crs\n".to_string(),
            format!("file format : IDRISI Raster A.1\n{padding}ref. system : crs\n"),
        ] {
            std::fs::write(dir.path().join("x.rdc"), &header).expect("write");
            let why = check_idrisi(&rst, &rst).unwrap_err().to_string();
            assert!(why.contains("crs.ref"), "{why}");
        }
        // The clean twin: a reference system that names no file here.
        std::fs::write(dir.path().join("x.rdc"), "ref. system : plane\n").expect("write");
        assert!(check_idrisi(&rst, &rst).is_ok());
        std::fs::File::create(dir.path().join("x.rdc"))
            .and_then(|f| f.set_len(MAX_RDC_BYTES + 1))
            .expect("sparse");
        let why = check_idrisi(&rst, &rst).unwrap_err().to_string();
        assert!(why.contains("not"), "{why}");
    }
}
