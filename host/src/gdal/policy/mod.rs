//! What GDAL may touch: the process-wide switches and the checks that keep GDAL inside the
//! workspaces, whatever the arguments or the data say.
//!
//! Paths given as arguments are confined by `workspace`. This room covers the ways GDAL reaches
//! further on its own (all verified with GDAL 3.6.2):
//!
//! * **Driver options that take file names** (MRF `DATANAME`, PDS4 `IMAGE_FILENAME`, ISIS3
//!   `EXTERNAL_FILENAME`, MVT `TEMPORARY_DB`, PDF `JAVASCRIPT_FILE`...): outputs use an
//!   allow-list of drivers, an option must be one the driver declares and not one that names a
//!   file, and no option value may be a path, a `/vsi` name or a URL ([`check_options`]).
//! * **Network access**: the network drivers are deregistered and the curl-based virtual file
//!   systems refuse every file name ([`init`]).
//! * **Files that make GDAL open other files** (a VRT's sources, an `.aux.xml`'s
//!   `OVERVIEW_FILE` or geolocation arrays, a SQLite schema's virtual tables, a CRS naming a
//!   grid or init file, a FIFO inside a folder dataset): before the open, what GDAL would read
//!   is found from the bytes it would parse ([`check_before_open`], with
//!   [`references`]); after every open, every file GDAL lists for the dataset is
//!   resolved and must lie inside a workspace ([`confine_opened`]).
//! * **PROJ's search paths** are narrowed to its own data folder (`apply_process_switches`).
//! * **Sizes**: cell and byte budgets checked from the header before any whole-band read or
//!   output allocation ([`check_cells`]).
//!
//! The room's other modules are the rest of the boundary, each one way GDAL could reach too far:
//! [`references`] (what an input makes GDAL read besides itself, from its bytes), [`xml`]
//! (XML documents parsed and looked up by GDAL's own parser, as its drivers read them), [`read_set`]
//! (the files GDAL reads for an input, listed without the open's side effects), [`drivers`]
//! (which drivers may open anything, and the references the allowed ones follow), [`dxf`] (the
//! entity count of a drawing once its blocks are expanded), [`sqlite_wal`] (SQLite inputs in
//! write-ahead-log mode, read without a checkpoint), [`watch`] (folder watches on a VRT's
//! sources), [`deadline`] (deadlines on opens) and [`blocks`] (the natural blocks GDAL allocates
//! to give the host cells).

pub mod blocks;
pub mod crs_text;
pub mod deadline;
pub mod drivers;
pub mod dxf;
pub mod geojson;
pub mod inflated;
pub mod probe;
pub mod read_set;
pub mod references;
pub mod sqlite_wal;
pub mod vrt_work;
pub mod watch;
pub mod xml;

use super::GdalError;
use gdal::{Dataset, Metadata};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Raster drivers a tool may write. Left out on purpose: drivers whose options or behaviour
/// reach outside the output (MRF, PDS4, ISIS3, PDF, VRT, and RST, whose writer computes its
/// input's statistics, which GDAL then writes beside the input: `<input>.aux.xml`, an EHdr
/// input's `.stx`, an input VRT rewritten; attack round 23, R23-A6) and drivers that
/// reproject or expand on write behind the gate's back (MBTiles, KMLSUPEROVERLAY).
pub const RASTER_OUTPUT_DRIVERS: &[&str] = &[
    "GTiff",
    "COG",
    "PNG",
    "JPEG",
    "WEBP",
    "GPKG",
    "HFA",
    "ENVI",
    "AAIGrid",
    "XYZ",
    "netCDF",
    "JP2OpenJPEG",
    "SAGA",
    "GS7BG",
];

/// Creation options a driver takes that make it compute its input's statistics, which GDAL
/// keeps in the input's PAM and writes beside the input when it closes (HFA's `STATISTICS`
/// wrote `<input>.aux.xml`: attack round 23, R23-A6). Refused when true.
pub const INPUT_STATISTICS_OPTIONS: &[(&str, &str)] = &[("HFA", "STATISTICS")];

/// Vector drivers a tool may write (MVT, whose `TEMPORARY_DB` deletes a file, and PDF are
/// left out).
pub const VECTOR_OUTPUT_DRIVERS: &[&str] = &[
    "GPKG",
    "GeoJSON",
    "GeoJSONSeq",
    "FlatGeobuf",
    "ESRI Shapefile",
    "CSV",
    "KML",
    "LIBKML",
    "GML",
    "SQLite",
    "GPX",
    "MapInfo File",
    "DXF",
    "ODS",
    "XLSX",
];

/// Drivers that talk to the network or to database servers; deregistered at start-up so that
/// neither an argument nor a nested reference (a VRT source) can reach them.
const NETWORK_DRIVERS: &[&str] = &[
    "HTTP",
    "WMS",
    "WMTS",
    "WCS",
    "WFS",
    "OAPIF",
    "OGCAPI",
    "ELASTIC",
    "CouchDB",
    "Cloudant",
    "PostgreSQL",
    "PostGISRaster",
    "MySQL",
    "ODBC",
    "PGeo",
    "MSSQLSpatial",
    "OCI",
    "Carto",
    "AmigoCloud",
    "DAAS",
    "EEDA",
    "EEDAI",
    "PLMOSAIC",
    "PLSCENES",
    "NGW",
    "STACTA",
    "STACIT",
    "MongoDBv3",
    "GNMDatabase",
    "WEBHDFS",
    "CSW",
    "SOSI",
    "OGR_GMT",
    "HANA",
    "TileDB",
    "Rasterlite",
    "OGR_VRT",
];

/// Option names that take a file or directory name, denied whatever the driver declares.
const FILE_OPTIONS: &[&str] = &[
    "DATANAME",
    "INDEXNAME",
    "IMAGE_FILENAME",
    "EXTERNAL_FILENAME",
    "TEMPORARY_DB",
    "TEMPORARY_DIR",
    "JAVASCRIPT_FILE",
    "CACHEDSOURCE",
    "EXTRA_RASTERS",
    "EXTRA_IMAGES",
    "CONF",
    "HEADER",
    "TRAILER",
    "SEED",
    "TEMPLATE",
    "GMLJP2V2_DEF",
    "OGR_DATASOURCE",
    "XSISCHEMAURI",
    "SCHEMA",
    "TEMPLATE_FILE",
    "METADATA_FILE",
];

/// Default budget of cells a tool may read whole or allocate: 100 M cells (400 MB as Float32;
/// the hydrology chain holds about 2.5 times the DEM), sized for a 2-core, 24 GiB machine with
/// several calls at once. `GDAL_MCP_MAX_CELLS` overrides it.
pub const DEFAULT_MAX_CELLS: u64 = 100_000_000;

/// The cell budget in force.
pub fn max_cells() -> u64 {
    static MAX: OnceLock<u64> = OnceLock::new();
    *MAX.get_or_init(|| crate::budget::setting("GDAL_MCP_MAX_CELLS", DEFAULT_MAX_CELLS))
}

/// Refuse a grid of `width × height × bands` cells above the budget, before any allocation.
pub fn check_cells(what: &str, width: u64, height: u64, bands: u64) -> Result<(), GdalError> {
    let cells = width.saturating_mul(height).saturating_mul(bands.max(1));
    if cells > max_cells() {
        return Err(GdalError::Arguments(format!(
            "{what}: {width} x {height} x {bands} = {cells} cells exceeds the server's budget of \
             {} cells per call (GDAL_MCP_MAX_CELLS); work on a window, a coarser resolution or \
             a sample",
            max_cells()
        )));
    }
    Ok(())
}

/// Prefix of the host's own in-memory scratch files (`/vsimem/`); nothing else in `/vsi*` is
/// ever read.
pub const SCRATCH_PREFIX: &str = "/vsimem/gdal-mcp-";

/// The workspace roots GDAL may read from, set once at start-up.
static ROOTS: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Set the workspace roots (canonical). The first call wins.
pub fn set_roots(roots: &[PathBuf]) {
    let _ = ROOTS.set(roots.to_vec());
}

thread_local! {
    /// Directories pinned for the job running on this thread, with the path GDAL sees for
    /// each (`/proc/self/fd/N`) and the real path it stands for.
    static PINS: std::cell::RefCell<Vec<(std::os::fd::OwnedFd, String, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// What the job running on this thread checked before its opens (see [`Checked`]).
    static CHECKED: std::cell::RefCell<Checked> = std::cell::RefCell::new(Checked::default());
    /// The memory the job's opens of expanding formats are estimated to make GDAL hold, taken
    /// from the shared budget until the job ends (see [`charge_open`]).
    static OPENS: std::cell::RefCell<Vec<(PathBuf, crate::budget::Reservation<'static>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Take from the shared memory budget ([`crate::budget`]) what GDAL is estimated to hold once
/// it has read `file` (a KML tree, a spreadsheet's filled cells), until the job ends: a
/// read-only call reserves nothing else, and four such opens at once passed 4 GB between
/// them (attack round 8, R8-1 and R8-7). A file already charged in this job is not charged
/// again.
fn charge_open(input: &Path, file: &Path, bytes: u64) -> Result<(), GdalError> {
    if bytes == 0 || OPENS.with(|o| o.borrow().iter().any(|(p, _)| p == file)) {
        return Ok(());
    }
    let reservation = crate::budget::reserve(
        &format!(
            "input: reading {} (what GDAL builds from it)",
            input.display()
        ),
        bytes,
    )?;
    OPENS.with(|o| o.borrow_mut().push((file.to_path_buf(), reservation)));
    Ok(())
}

/// A file's identity as it was checked: its device and inode, and its change time, which any
/// write, rename, link or permission change moves (a file swapped and swapped back too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// What the pre-open checks of the job on this thread found acceptable (the inputs, their
/// sidecars, VRT sources at any depth and theirs, folder entries), with their identities, and
/// when the latest check started. After GDAL opened a dataset, every file it lists is compared
/// with this ([`confine_opened`]): the race between the check and GDAL's open, which works on
/// paths, closes on the files themselves.
#[derive(Debug, Default)]
struct Checked {
    by_path: std::collections::HashMap<PathBuf, Identity>,
    by_inode: std::collections::HashMap<(u64, u64), Identity>,
    since: Option<std::time::SystemTime>,
    /// The files GDAL listed for the datasets opened so far, as they were when they passed
    /// the after-open check (re-checked before a commit and before a read-only answer).
    listed: Vec<(String, Identity)>,
}

/// A file GDAL lists that no check saw must have changed (`ctime`) before the check started,
/// by at least this much: the kernel stamps change times from a clock that lags the system's
/// by up to a tick.
const CHANGE_TIME_MARGIN: std::time::Duration = std::time::Duration::from_millis(50);

/// Record what a check found acceptable.
fn record_checked(seen: Vec<(PathBuf, std::fs::Metadata)>) {
    CHECKED.with(|c| {
        let mut c = c.borrow_mut();
        for (path, meta) in seen {
            let identity = Identity::of(&meta);
            c.by_inode.insert((identity.dev, identity.ino), identity);
            c.by_path.insert(path, identity);
        }
    });
}

/// Refuse `listed` (a file GDAL lists for the dataset opened from `input`, as GDAL names it)
/// when it is not what the checks saw: a checked path now naming another file or a changed
/// one, or a file no check saw that changed after the checks started.
fn check_identity(input: &Path, listed: &str) -> Result<(), GdalError> {
    let Ok(meta) = std::fs::metadata(listed) else {
        // Not there (an optional sidecar GDAL names): nothing was read from it.
        return Ok(());
    };
    let now = Identity::of(&meta);
    let real = PathBuf::from(unpin_text(listed));
    let changed = CHECKED.with(|c| {
        let c = c.borrow();
        let Some(since) = c.since else {
            return false;
        };
        match c.by_path.get(&real) {
            Some(was) => *was != now,
            None => match c.by_inode.get(&(now.dev, now.ino)) {
                Some(was) => *was != now,
                None => {
                    let changed_at = std::time::UNIX_EPOCH
                        + std::time::Duration::new(
                            u64::try_from(now.ctime.0).unwrap_or(0),
                            u32::try_from(now.ctime.1).unwrap_or(0),
                        );
                    changed_at + CHANGE_TIME_MARGIN >= since
                }
            },
        }
    });
    if changed {
        return Err(GdalError::Arguments(format!(
            "{}: {} changed between check and open (it was replaced, rewritten, linked or \
             appeared while GDAL opened the input), so nothing was read from it; try again \
             once nothing is modifying these files",
            input.display(),
            real.display()
        )));
    }
    // The server's own staged outputs (`.gdal-mcp-*` staging folders) change as they are
    // written; only inputs are held to their identity until the commit.
    let staged = real
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with(".gdal-mcp-"));
    if !staged {
        CHECKED.with(|c| c.borrow_mut().listed.push((listed.to_string(), now)));
    }
    Ok(())
}

/// Refuse to commit an output or answer a read when a file GDAL listed for a dataset of this
/// job is no longer the file that passed the after-open check: GDAL opens a VRT's sources
/// lazily, at the first read, by name, so a source swapped after the open (and swapped back:
/// its change time moved) may have been read. Called before an output is moved into place and
/// before a read-only job answers.
pub fn verify_listed_unchanged() -> Result<(), GdalError> {
    let changed = CHECKED.with(|c| {
        c.borrow().listed.iter().find_map(|(listed, was)| {
            let now = std::fs::metadata(listed).ok().map(|m| Identity::of(&m));
            (now != Some(*was)).then(|| unpin_text(listed))
        })
    });
    // A name GDAL reads through that was replaced after the checks, seen by the folder
    // watches whatever the change times say (a swap and a swap back within one clock tick).
    let changed = changed.or_else(watch::changed);
    match changed {
        Some(file) => Err(GdalError::Arguments(format!(
            "{file} changed while the call was reading it (it was replaced, rewritten or \
             linked after GDAL opened it), so the result is withheld and nothing is written; \
             try again once nothing is modifying these files"
        ))),
        None => Ok(()),
    }
}

/// The workspace root that contains `path`, if any.
fn root_of(path: &Path) -> Option<PathBuf> {
    ROOTS
        .get()?
        .iter()
        .find(|root| path.starts_with(root))
        .cloned()
}

/// Open `dir` (canonical, inside a workspace) without following any symlink: from the
/// workspace root, one component at a time with `O_NOFOLLOW`, each checked to be a directory.
/// The descriptor names that very directory whatever happens to the path afterwards, so a
/// folder swapped for a symlink after the check cannot redirect GDAL. `None` when no workspace
/// contains `dir` (no workspaces configured: unit tests).
pub fn pin_dir(dir: &Path) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let Some(root) = root_of(dir) else {
        return Ok(None);
    };
    let open = |at: Option<&OwnedFd>, name: &std::ffi::CStr| -> std::io::Result<OwnedFd> {
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name and, when given, a live directory descriptor.
        let fd = unsafe {
            match at {
                Some(dirfd) => libc::openat(dirfd.as_raw_fd(), name.as_ptr(), flags),
                None => libc::open(name.as_ptr(), flags),
            }
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let meta = std::fs::metadata(format!("/proc/self/fd/{}", owned.as_raw_fd()))?;
        if !meta.is_dir() {
            return Err(std::io::Error::other("not a directory"));
        }
        Ok(owned)
    };
    let c = |text: &str| {
        std::ffi::CString::new(text).map_err(|_| std::io::Error::other("NUL in a path"))
    };
    let mut fd = open(None, &c(&root.to_string_lossy())?)?;
    let relative = dir.strip_prefix(&root).unwrap_or(Path::new(""));
    for component in relative.components() {
        let std::path::Component::Normal(name) = component else {
            return Err(std::io::Error::other("unexpected path component"));
        };
        fd = open(Some(&fd), &c(&name.to_string_lossy())?)?;
    }
    Ok(Some(fd))
}

/// The path GDAL should open for `path`: its folder pinned for the rest of this job (see
/// [`pin_dir`]), as `/proc/self/fd/N/<name>`. Paths outside every workspace (or with no
/// workspaces configured) are returned unchanged.
pub fn pinned(path: &Path) -> Result<PathBuf, GdalError> {
    use std::os::fd::AsRawFd;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(path.to_path_buf());
    };
    match pin_dir(parent) {
        Ok(Some(fd)) => {
            let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let pinned = Path::new(&via).join(name);
            PINS.with(|p| p.borrow_mut().push((fd, via, parent.display().to_string())));
            Ok(pinned)
        }
        Ok(None) => Ok(path.to_path_buf()),
        Err(e) => Err(GdalError::Arguments(format!(
            "{}: its folder changed while the call was running ({e}); a folder inside the \
             workspace was replaced by a link",
            path.display()
        ))),
    }
}

/// [`pinned`], for a path that may hold `..` (a nested VRT's `outer/../v0/v.vrt`): its folder
/// resolved first, as the kernel resolves it (links on the way are refused by the checks
/// before), since a pin takes no `..`.
fn pinned_resolved(path: &Path) -> Result<PathBuf, GdalError> {
    let dotted = path.components().any(|c| {
        matches!(
            c,
            std::path::Component::ParentDir | std::path::Component::CurDir
        )
    });
    let (true, Some(parent), Some(name)) = (dotted, path.parent(), path.file_name()) else {
        return pinned(path);
    };
    let parent = std::fs::canonicalize(parent).map_err(|e| {
        GdalError::Arguments(format!(
            "{}: its folder cannot be read ({e})",
            path.display()
        ))
    })?;
    pinned(&parent.join(name))
}

/// Replace the pinned folders' `/proc/self/fd/N` paths in GDAL's text with their real paths.
pub fn unpin_text(text: &str) -> String {
    PINS.with(|p| {
        let mut out = text.to_string();
        for (_, via, real) in p.borrow().iter().rev() {
            out = replace_fd_path(&out, via, real);
        }
        out
    })
}

/// `text` with every `via` (a `/proc/self/fd/N` path) replaced by `real`, where it is a
/// whole descriptor number: `/proc/self/fd/5` is not replaced inside `/proc/self/fd/57`
/// (attack round 6 notes: the textual replace turned fd 57's paths into fd 5's folder).
fn replace_fd_path(text: &str, via: &str, real: &str) -> String {
    if via.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(via) {
        let after = &rest[at + via.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(via);
        } else {
            out.push_str(real);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The file of a GDAL subdataset name, `DRIVER:"<file>":<variable>` (netCDF, HDF4, HDF5), or
/// `None` when `name` is no such name.
fn subdataset_file(name: &str) -> Option<String> {
    let (driver, rest) = name.split_once(':')?;
    if !["NETCDF", "HDF5", "HDF4_SDS", "HDF4_EOS"].contains(&driver.to_ascii_uppercase().as_str()) {
        return None;
    }
    let quoted = rest.strip_prefix('"')?;
    let end = quoted.find('"')?;
    Some(quoted[..end].to_string())
}

/// Close the folders pinned by the job on this thread and forget what it checked (at the end
/// of the job).
pub fn release_pins() {
    watch::release();
    // After the job's datasets are closed: GDAL's last close of a WAL database found these
    // connections still open and checkpointed nothing (attack round 12, R12-5).
    sqlite_wal::release();
    crate::gdal::output::forget_staged();
    PINS.with(|p| p.borrow_mut().clear());
    CHECKED.with(|c| *c.borrow_mut() = Checked::default());
    OPENS.with(|o| o.borrow_mut().clear());
}

/// Process-wide switches, applied once before the first GDAL job (from `gdal::init`).
pub(super) fn apply_process_switches() {
    for (key, value) in [
        // Every curl-based virtual file system (/vsicurl/, /vsis3/, ...) accepts only this
        // file name, which cannot exist: no URL is ever fetched.
        (
            "CPL_VSIL_CURL_ALLOWED_FILENAME",
            "/nonexistent/gdal-mcp-refuses-network-access",
        ),
        ("GDAL_HTTP_TIMEOUT", "1"),
        ("GDAL_HTTP_MAX_RETRY", "0"),
        // A VRT may not run Python pixel functions (GDAL 3.6 refuses them by default too).
        ("GDAL_VRT_ENABLE_PYTHON", "NO"),
        // No .aux.xml is written beside inputs when statistics are computed.
        ("GDAL_PAM_ENABLED", "YES"),
        // Opening a `.gz` made GDAL write `<name>.gz.properties` beside the input (measured
        // with GDAL 3.6.2, attack round 7's `.gml.gz`): a write into the workspace, through a
        // link there to anywhere.
        ("CPL_VSIL_GZIP_WRITE_PROPERTIES", "NO"),
    ] {
        let _ = gdal::config::set_config_option(key, value);
    }
    restrict_proj_search_paths();
    drivers::refuse_http_fetches();
    for name in NETWORK_DRIVERS {
        if let Ok(driver) = gdal::DriverManager::get_driver_by_name(name) {
            // SAFETY: deregistering a driver handle GDAL returned; drivers are never destroyed
            // here, only removed from the manager, before any dataset is opened with them.
            unsafe { gdal_sys::GDALDeregisterDriver(driver.c_driver()) };
        }
    }
    drivers::keep_only_allowed_drivers();
}

/// Give PROJ no search path but its own data folders (those holding `proj.db`): the working
/// directory and the user's writable folder are never searched for grids or init files.
fn restrict_proj_search_paths() {
    // SAFETY: OSRGetPROJSearchPaths returns a NULL-terminated list owned by the caller (freed
    // with CSLDestroy); OSRSetPROJSearchPaths copies the NULL-terminated list it is given.
    unsafe {
        let list = gdal_sys::OSRGetPROJSearchPaths();
        let current = super::string_list(list);
        if !list.is_null() {
            gdal_sys::CSLDestroy(list);
        }
        let data: Vec<std::ffi::CString> = current
            .iter()
            .filter(|dir| Path::new(dir).is_absolute() && Path::new(dir).join("proj.db").is_file())
            .filter_map(|dir| std::ffi::CString::new(dir.as_str()).ok())
            .collect();
        if data.is_empty() {
            tracing::warn!(
                "PROJ's data folder (with proj.db) was not found among {current:?}; its search \
                 paths are left as they are"
            );
            return;
        }
        let mut pointers: Vec<*const std::ffi::c_char> = data.iter().map(|c| c.as_ptr()).collect();
        pointers.push(std::ptr::null());
        gdal_sys::OSRSetPROJSearchPaths(pointers.as_ptr());
    }
}

/// Whether `path` (as GDAL lists it) resolves inside a workspace. GDAL virtual paths and URLs
/// never do.
fn inside(path: &str) -> bool {
    let Some(roots) = ROOTS.get() else {
        return true;
    };
    // The host's own in-memory scratch files (band VRTs for composites).
    if path.starts_with(SCRATCH_PREFIX) {
        return true;
    }
    if path.starts_with("/vsi") || path.contains("://") {
        return false;
    }
    let resolved = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved,
        // A dangling link could be created through: never inside.
        Err(_) if std::fs::symlink_metadata(path).is_ok() => return false,
        // A listed file that does not exist (an optional sidecar) is judged by its folder.
        Err(_) => match Path::new(path).parent().map(std::fs::canonicalize) {
            Some(Ok(parent)) => parent,
            _ => return false,
        },
    };
    roots.iter().any(|root| resolved.starts_with(root))
}

/// Whether `path` (as GDAL would open it) resolves inside a workspace (for the per-format
/// checks of `drivers`).
pub(super) fn is_inside(path: &str) -> bool {
    inside(path)
}

/// Checks before GDAL opens `path` (its real path inside a workspace), for what GDAL would act
/// on *during* the open, on the file itself and, recursively, on every file a VRT document
/// makes it open (`check_file_before_open`).
pub fn check_before_open(path: &Path) -> Result<(), GdalError> {
    if ROOTS.get().is_none() {
        return Ok(());
    }
    CHECKED.with(|c| c.borrow_mut().since = Some(std::time::SystemTime::now()));
    // Every input's folder is watched, not a VRT's only: GDAL reads sidecars it does not list
    // (a GML's `.gfs` and `.xsd`) by name after the checks, and one swapped for a link to an
    // outside file was read (attack round 19, R19-A2). The server's own staged outputs
    // (`.gdal-mcp-*` folders) change as they are written, and are no input.
    let staged = path
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with(".gdal-mcp-"));
    if !staged || references::is_vrt_document(path) {
        watch(path, path)?;
    }
    let mut walk = Walk {
        limit: crate::budget::setting(MAX_VRT_REFERENCES_VARIABLE, DEFAULT_MAX_VRT_REFERENCES),
        ..Walk::default()
    };
    check_file_before_open(path, path, 0, &mut walk).map(|_| ())
}

/// Watch the folders GDAL walks to reach `file` (read by name after the checks: a VRT and its
/// sources) before its identity is checked (`watch`). A watch that cannot be set
/// refuses the open: the race it closes would be open.
fn watch(input: &Path, file: &Path) -> Result<(), GdalError> {
    let Some(roots) = ROOTS.get() else {
        return Ok(());
    };
    // The server's own staging folders (`.gdal-mcp-*`) change as the job writes into them:
    // an external overview being built beside a VRT is listed by GDAL as the VRT's, and its
    // own writes were reported as a swap (attack round 23, R23-A9).
    if watch::in_own_folder(Path::new(&unpin_text(&file.to_string_lossy()))) {
        return Ok(());
    }
    watch::watch_reference(file, roots).map_err(|e| GdalError::Failed {
        operation: format!("opening {}", input.display()),
        message: format!(
            "cannot watch the folders of {} while GDAL reads it by name ({e}); try again \
                 (the system's inotify limits, fs.inotify.max_user_instances and \
                 max_user_watches, may be too low)",
            file.display()
        ),
    })
}

/// Whether GDAL would open `path` as a zip it inflates whole: a spreadsheet (XLSX, XLSM,
/// ODS) or a KMZ (LIBKML; attack round 7, measured: a 306 KB KMZ whose `doc.kml` inflates to
/// 300 MiB took `ogrinfo` to 1.6 GB), by its name, or any file that starts as a zip: GDAL
/// 3.6's XLSX and ODS drivers recognise a workbook by its content, so one named `.zip` (or
/// anything) was inflated with no budget (attack round 13, R13-13: 10 KB took 621 MB).
fn is_spreadsheet(path: &Path) -> bool {
    use std::io::Read;
    // A zipped shapefile is refused by its own rule below, with its own reason.
    if is_zipped_shapefile(path) {
        return false;
    }
    let named = crate::gdal::extension_of(path)
        .and_then(|e| e.to_str())
        .is_some_and(|e| {
            ["xlsx", "xlsm", "ods", "kmz"]
                .iter()
                .any(|s| e.eq_ignore_ascii_case(s))
        });
    let mut magic = Vec::with_capacity(4);
    named
        || (open_regular(path)
            .and_then(|f| f.take(4).read_to_end(&mut magic))
            .is_ok()
            && magic == b"PK\x03\x04")
}

/// Whether GDAL would open `path` as a KML document (LIBKML and KML both parse it whole): by
/// its name, by a `<kml` in its first 4 KiB, or by a root element named `kml` after any
/// prolog (GDAL's KML driver reads past XML comments to the root: `<kml` after a comment of
/// 7,000 bytes, named `.dat`, opened as KML; attack round 13, R13-12).
/// Whether GDAL builds an XML tree from `path` when it opens it: `Some(false)` for GML (a
/// feature at a time), `Some(true)` for a VRT (whole); `None` otherwise.
fn xml_tree_kind(path: &Path) -> Option<bool> {
    let extension = crate::gdal::extension_of(path)?
        .to_str()?
        .to_ascii_lowercase();
    match extension.as_str() {
        "gml" | "xml" => Some(false),
        "vrt" => Some(true),
        _ => None,
    }
}

fn is_kml(path: &Path) -> bool {
    use std::io::Read;
    if crate::gdal::extension_of(path)
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("kml"))
    {
        return true;
    }
    let mut head = Vec::with_capacity(4096);
    let Ok(file) = open_regular(path) else {
        return false;
    };
    let mut reader = std::io::BufReader::new(file);
    if (&mut reader).take(4096).read_to_end(&mut head).is_err() {
        return false;
    }
    if head.windows(4).any(|w| w == b"<kml") {
        return true;
    }
    root_element_is(head.as_slice().chain(reader), b"kml")
}

/// Bytes of prolog read before an XML document's root element is taken to be the one asked
/// for (a prolog that long is read by GDAL's parsers too, so the estimate runs).
const MAX_PROLOG_BYTES: u64 = 64 << 20;

/// Whether the root element of the XML document `text` streams is `name` (its local part,
/// any case), after a byte order mark, white space, processing instructions, comments and a
/// document type declaration (its internal subset included); `false` for text that is not
/// XML, `true` when the prolog runs past [`MAX_PROLOG_BYTES`].
fn root_element_is(text: impl std::io::Read, name: &[u8]) -> bool {
    use std::io::Read;
    let mut stream = std::io::BufReader::new(text.take(MAX_PROLOG_BYTES))
        .bytes()
        .map_while(Result::ok)
        .peekable();
    let mut consumed = 0u64;
    let root = root_element(&mut stream, &mut consumed);
    match root {
        Some(element) => {
            let local = element.rsplit(|&c| c == b':').next().unwrap_or_default();
            local.eq_ignore_ascii_case(name)
        }
        None => consumed >= MAX_PROLOG_BYTES,
    }
}

/// The name of the root element `stream` reaches after its prolog (`None`: not XML, or the
/// stream ended first), counting the bytes it takes in `consumed`.
fn root_element(
    stream: &mut std::iter::Peekable<impl Iterator<Item = u8>>,
    consumed: &mut u64,
) -> Option<Vec<u8>> {
    let mut next = |stream: &mut std::iter::Peekable<_>| {
        let b = Iterator::next(stream);
        *consumed += u64::from(b.is_some());
        b
    };
    if stream.peek() == Some(&0xEF) {
        for expected in [0xEFu8, 0xBB, 0xBF] {
            (next(stream) == Some(expected)).then_some(())?;
        }
    }
    loop {
        let b = next(stream)?;
        if c_space(b) {
            continue;
        }
        (b == b'<').then_some(())?;
        match stream.peek() {
            Some(b'?' | b'!') => {
                let bang = next(stream) == Some(b'!');
                let comment = bang && stream.peek() == Some(&b'-');
                // A processing instruction ends at `?>`, a comment at `-->`, a declaration
                // (`<!DOCTYPE ...>`) at the `>` outside its `[...]` internal subset.
                let mut window = [0u8; 3];
                let mut depth = 0i64;
                loop {
                    let c = next(stream)?;
                    window = [window[1], window[2], c];
                    let closed = if comment {
                        window == *b"-->"
                    } else if bang {
                        depth += i64::from(c == b'[') - i64::from(c == b']');
                        c == b'>' && depth <= 0
                    } else {
                        window[1..] == *b"?>"
                    };
                    if closed {
                        break;
                    }
                }
            }
            _ => {
                let mut element = Vec::new();
                while let Some(&c) = stream.peek() {
                    if c.is_ascii_whitespace() || c == b'>' || c == b'/' || element.len() > 256 {
                        break;
                    }
                    element.push(c);
                    next(stream);
                }
                return Some(element);
            }
        }
    }
}

/// Whether the shapefile driver would open `path` as a zip of a shapefile (`.shz`,
/// `.shp.zip`): regression, issue 21 attack round 4, B2: a `.prj` deflated inside one named
/// an outside FIFO as a `+nadgrids` grid and `vector_reproject` never answered.
fn is_zipped_shapefile(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".shz") || name.ends_with(".shp.zip")
}

/// VRTs nested deeper than this are refused (GDAL's own guard against cycles is deeper).
const MAX_VRT_DEPTH: usize = 8;

/// Operator override of [`DEFAULT_MAX_VRT_REFERENCES`].
pub const MAX_VRT_REFERENCES_VARIABLE: &str = "GDAL_MCP_MAX_VRT_REFERENCES";

/// Source references a VRT may make GDAL go through, counted with repeats down every level
/// (a VRT of 20 sources that are each a VRT of 20 sources is 20 + 400): GDAL reads a block
/// through every one of them, and 4.9 KB of VRTs nested 4 levels with 20 sources each made
/// the host's checks run past the open deadline (attack round 9, R9-10). A mosaic of 100,000
/// tiles, or 100 VRTs of 10,000 tiles, fits.
pub const DEFAULT_MAX_VRT_REFERENCES: u64 = 1_000_000;

/// One open's walk over the files a VRT makes GDAL open: each file whose checks passed, by
/// path and identity (device, inode, size, change time), with the deepest level it passed at
/// and the source references beneath it (counted with repeats), so a document named many
/// times is checked once (the checks were 20x slower a level: attack round 9, R9-10).
#[derive(Default)]
struct Walk {
    passed: std::collections::HashMap<FileKey, (usize, u64)>,
    limit: u64,
    /// Work per cell of each VRT document estimated in this walk ([`vrt_work`]), by path.
    per_cell: std::collections::HashMap<PathBuf, f64>,
    /// Folders whose metadata documents this walk counted ([`xml::check_metadata_documents`]):
    /// once per folder, however many of a mosaic's sources it holds.
    metadata_folders: std::collections::HashSet<PathBuf>,
}

/// A file's path and identity, as the walk remembers it.
type FileKey = (PathBuf, u64, u64, u64, i64, i64);

fn file_key(file: &Path) -> Option<FileKey> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).ok()?;
    Some((
        file.to_path_buf(),
        m.dev(),
        m.ino(),
        m.size(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// The checks on one file GDAL will open for `input`:
/// * a SQLite database (by its header) must declare no virtual table over a module that reads
///   other files and call no file function ([`references::check_sqlite`]);
/// * a VRT document's references ([`references::vrt_references`], parsed as XML) must each be
///   a plain path (no `/vsi`, URL or `DRIVER:` string) inside a workspace that is a regular
///   file or folder (a FIFO blocks the open), and are checked the same way in turn;
/// * a DXF may not expand past the entity budget once its blocks are inlined
///   ([`dxf::check_dxf`]);
/// * no CRS carried by the file (a text file scanned whole, decoded as GDAL decodes it), or by
///   its `.prj` / `.aux.xml` / `.xml` / ENVI `.hdr` sidecars, may name a grid, parameter,
///   init or `tinshift`/`defmodel` file (PROJ opens it while GDAL parses the CRS: a path
///   outside, a FIFO, `/dev/stdin`) ([`crs_reads_files`]).
///
/// Returns the source references beneath `file` (with repeats, down every level); a file
/// already checked in this walk at this depth or deeper is not checked again, and a walk
/// whose references pass [`DEFAULT_MAX_VRT_REFERENCES`] is refused.
fn check_file_before_open(
    input: &Path,
    file: &Path,
    depth: usize,
    walk: &mut Walk,
) -> Result<u64, GdalError> {
    let key = file_key(file);
    if let Some((deepest, beneath)) = key.as_ref().and_then(|k| walk.passed.get(k)) {
        // Passed at `deepest`: from a level no deeper, its nesting fits again.
        if depth <= *deepest {
            return Ok(*beneath);
        }
    }
    let beneath = check_one_file(input, file, depth, walk)?;
    if let Some(key) = key {
        let entry = walk.passed.entry(key).or_insert((depth, beneath));
        entry.0 = entry.0.max(depth);
    }
    Ok(beneath)
}

/// [`check_file_before_open`] on a file not yet checked in this walk.
fn check_one_file(
    input: &Path,
    file: &Path,
    depth: usize,
    walk: &mut Walk,
) -> Result<u64, GdalError> {
    let mut beneath: u64 = 0;
    // GDAL probes sidecars by name for every file it opens, the sources of a VRT included: a
    // FIFO planted as `src.tif.ovr` beside a clean source blocked the open (regression, issue
    // 21 item 7). Checked here, on the worker, right before the open.
    // The host's own in-memory scratch files (a composite's band VRT) are not on disk, and no
    // caller can name one (a `/vsi` path is refused in arguments and references). Regression
    // of the merge of issue 21 item 7: the check stat()ed them and refused every composite of
    // unlike grids as "does not exist".
    let scratch = file.to_string_lossy().starts_with(SCRATCH_PREFIX);
    if let (Some(roots), false) = (ROOTS.get(), scratch) {
        let argument = input.display().to_string();
        let mut seen = Vec::new();
        crate::workspace::check_not_special_seen(&argument, file, roots, &mut seen)
            .map_err(|e| GdalError::Arguments(e.to_string()))?;
        record_checked(seen);
    }
    let folder = file.parent().map(Path::to_path_buf).unwrap_or_default();
    if !scratch && walk.metadata_folders.insert(folder) {
        xml::check_metadata_documents(input, file)?;
    }
    if !scratch {
        check_embedded_references(input, file)?;
        // The TIFFs GDAL opens beside a raster, an external mask and overviews, carry their
        // own `GDAL_METADATA` and `.aux.xml`, which GDAL applies: an `OVERVIEW_FILE` in
        // `y.tif.msk` (or `y.tif.msk.aux.xml`) naming an outside FIFO blocked every open of
        // `y.tif` (attack round 17, R17-A15).
        // Found among the folder's names without case, as GDAL's `CPLCheckForFile` finds them
        // (R18-A2: `y.tif.Msk` was opened, and not checked).
        if let (Some(parent), Some(name)) = (file.parent(), file.file_name()) {
            let name = name.to_string_lossy().to_lowercase();
            let wanted: Vec<String> = [".msk", ".ovr", ".msk.ovr", ".ovr.msk"]
                .iter()
                .map(|suffix| format!("{name}{suffix}"))
                .collect();
            if let Ok(entries) = std::fs::read_dir(parent) {
                for entry in entries
                    .filter_map(Result::ok)
                    .take(crate::workspace::MAX_FOLDER_ENTRIES)
                {
                    let sibling_name = entry.file_name().to_string_lossy().to_lowercase();
                    let sibling = entry.path();
                    if wanted.contains(&sibling_name)
                        && std::fs::metadata(&sibling).is_ok_and(|m| m.is_file())
                    {
                        check_embedded_references(input, &sibling)?;
                        check_pam_references(input, &sibling)?;
                    }
                }
            }
        }
    }
    references::check_sqlite(file)?;
    dxf::check_dxf(input, file)?;
    drivers::check_file(input, file)?;
    // A spreadsheet is a zip GDAL inflates whole: the table budget holds for every open, not
    // only `points_from_table`'s (regression, issue 21 attack round 3: `vector_info` on a
    // 636 KB XLSX that expands to 601 MB took 0.6 GB, `vector_query` 1.2 GB).
    if is_spreadsheet(file) {
        let holds = super::vector::table::check_budget(
            file,
            &super::vector::table::TableBudget::from_env(),
        )?;
        charge_open(input, file, holds)?;
    }
    // A KML document is parsed whole into a tree about 15 times its text (attack round 8,
    // R8-7): estimated from its elements and text before the open, refused above its budget,
    // and charged to the shared memory budget (a KMZ's is, through the table check above).
    if is_kml(file) {
        let holds = super::vector::table::check_kml(input, &[pinned(file)?.display().to_string()])?;
        charge_open(input, file, holds)?;
    }
    // A GML feature, and a VRT document, are parsed into `CPLXMLNode` trees about 30 times
    // their text (attack round 21, R21-A1, R21-A2): estimated before the open, refused above
    // their budget, charged to the shared memory budget.
    if let Some(whole) = xml_tree_kind(file) {
        let holds = super::vector::table::check_xml_tree(
            input,
            &pinned_resolved(file)?.display().to_string(),
            whole,
        )?;
        charge_open(input, file, holds)?;
        // A GML's schema and `.gfs` are parsed whole at the open (R21-A5: a 22 MB `.xsd` or
        // `.gfs` of empty elements took `vector_info` about 580 MB each).
        if !whole {
            for sidecar in ["xsd", "gfs", "XSD", "GFS"] {
                let sidecar = file.with_extension(sidecar);
                if std::fs::symlink_metadata(&sidecar).is_ok_and(|m| m.is_file()) {
                    let holds = super::vector::table::check_xml_tree(
                        &sidecar,
                        &pinned_resolved(&sidecar)?.display().to_string(),
                        true,
                    )?;
                    charge_open(input, &sidecar, holds)?;
                }
            }
        }
    }
    // A GeoJSON-family file is parsed into json-c trees far larger than its text: one 7 MB
    // feature took a read-only `vector_info` to 806 MB (attack round 9, R9-11). Estimated
    // before the open, refused above its budget, charged to the shared memory budget.
    if !scratch && geojson::is_json(file) {
        let holds = geojson::check(input, file)?;
        charge_open(input, file, holds)?;
    }
    // A gzip stream GDAL inflates by itself (a `.gml.gz`): measured against its budget, and
    // its inflated text scanned below as the file's own (issue 21 attack round 7, R7-7/R7-8).
    let inflated = inflated::inflate(input, file)?;
    if is_zipped_shapefile(file) {
        return Err(GdalError::Arguments(format!(
            "{}: a zipped shapefile is read by GDAL through /vsizip/, where its .prj (which can \
             make PROJ open any file as a grid) cannot be checked before the open; unzip it \
             into the workspace and pass the .shp",
            input.display()
        )));
    }
    if references::is_vrt_document(file) {
        if depth >= MAX_VRT_DEPTH {
            return Err(GdalError::Arguments(format!(
                "{}: VRTs nested more than {MAX_VRT_DEPTH} deep (or referencing themselves) \
                 are not opened",
                input.display()
            )));
        }
        let text = references::read_document(file)?;
        let document = references::parse(file, &text)?;
        for reference in references::references_in(file, &document)? {
            let refuse = |target: &str| {
                GdalError::Arguments(format!(
                    "{}: it makes GDAL read \"{target}\", which is outside every workspace or \
                     not a regular file; copy the data into a workspace",
                    input.display()
                ))
            };
            if crate::workspace::is_virtual(&reference.written) {
                return Err(refuse(&reference.written));
            }
            for path in &reference.paths {
                watch(input, path)?;
                let shown = path.display().to_string();
                let special = std::fs::metadata(path).is_ok_and(|m| !(m.is_file() || m.is_dir()));
                if !inside(&shown) || special {
                    return Err(refuse(&shown));
                }
                // A source that is a link is read by name, lazily, after every check, through
                // the folders on the way to its target, which nothing pins: one swapped for a
                // link to an outside folder served its cells, or blocked the read on a FIFO
                // (attack round 20, R20-A2, R20-A5).
                if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(GdalError::Arguments(format!(
                        "{}: its source \"{shown}\" is a link, which GDAL follows by name when \
                         it reads the cells, after the checks; put the file itself there (or \
                         name the file the link points to)",
                        input.display()
                    )));
                }
                beneath = beneath.saturating_add(1);
                if std::fs::metadata(path).is_ok_and(|m| m.is_file() || m.is_dir()) {
                    let below = check_file_before_open(input, path, depth + 1, walk)?;
                    beneath = beneath.saturating_add(below);
                }
                if beneath > walk.limit {
                    return Err(GdalError::Arguments(format!(
                        "{}: its VRTs make GDAL go through more than {} source references \
                         for every block it reads (VRTs of VRTs multiply: {} names {} once or \
                         more, at most {} in all, {MAX_VRT_REFERENCES_VARIABLE}); build one \
                         VRT over the files themselves (gdalbuildvrt)",
                        input.display(),
                        walk.limit,
                        file.display(),
                        path.display(),
                        walk.limit
                    )));
                }
            }
        }
        check_vrt_work(input, file, &document, walk)?;
    }
    check_pam_references(input, file)?;
    let mut carriers = vec![file.to_path_buf()];
    if let Some(inflated) = &inflated {
        carriers.push(inflated.path().to_path_buf());
    }
    if let (Some(parent), Some(name)) = (file.parent(), file.file_name()) {
        let name = name.to_string_lossy();
        let stem = crate::gdal::stem_of(file)
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let sidecars = [
            format!("{stem}.prj"),
            format!("{name}.prj"),
            format!("{name}.aux.xml"),
            format!("{stem}.aux.xml"),
            format!("{name}.xml"),
            // An ENVI header's `coordinate system string` (attack round 5, F1).
            format!("{stem}.hdr"),
            format!("{name}.hdr"),
            // GML's `.gfs` schema: its `<SRSName>` reached PROJ while GDAL opened a clean
            // `.gml` (attack round 6, R6-0).
            format!("{stem}.gfs"),
        ]
        .map(|s| s.to_lowercase());
        // Drivers look for sidecars in either case (the shapefile driver reads `x.PRJ` when
        // there is no `x.prj`: regression, issue 21 attack round 4, B2's hang).
        if let Ok(entries) = std::fs::read_dir(parent) {
            for entry in entries.flatten().take(crate::workspace::MAX_FOLDER_ENTRIES) {
                if sidecars.contains(&entry.file_name().to_string_lossy().to_lowercase()) {
                    carriers.push(entry.path());
                }
            }
        }
    }
    for carrier in carriers {
        // The inflated copy is named as the file it came from.
        let shown = match &inflated {
            Some(t) if t.path() == carrier => format!("{} (inflated)", file.display()),
            _ => carrier.display().to_string(),
        };
        let found = crs_reads_files(&carrier).map_err(|e| match e {
            GdalError::Arguments(m) => {
                GdalError::Arguments(m.replace(&carrier.display().to_string(), &shown))
            }
            other => other,
        })?;
        if let Some(why) = found {
            return Err(GdalError::Arguments(format!(
                "{shown}: its CRS makes PROJ read a file while GDAL reads it: {why}; assign the \
                 CRS by authority code instead (src_crs, e.g. \"EPSG:4326\")"
            )));
        }
    }
    Ok(beneath)
}

/// Refuse a VRT whose whole read makes GDAL read more source cells (or do more kernel
/// multiply-adds) than the cell budget, at more than [`vrt_work::MAX_WORK_PER_CELL`] per VRT
/// cell (issue 21, attack round 10, R10-13); remember its work per cell for the VRTs above it.
fn check_vrt_work(
    input: &Path,
    file: &Path,
    document: &xml::Document,
    walk: &mut Walk,
) -> Result<(), GdalError> {
    let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let candidates = |name: &str| [base.join(name), PathBuf::from(name)];
    let per_cell = |name: &str| {
        candidates(name)
            .iter()
            .find_map(|p| walk.per_cell.get(p).copied())
            .unwrap_or(1.0)
    };
    // A warped or pansharpened VRT's source, already checked in this walk, opened for what
    // `measure` reads of it (its size; GDAL's open of the VRT opens it too), times its work per
    // cell: the largest among the files the name may resolve to.
    let measure_source = |name: &str, measure: &dyn Fn(&Dataset) -> Option<f64>| {
        candidates(name)
            .iter()
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
            .filter_map(|p| {
                let options = gdal::DatasetOptions {
                    open_flags: gdal::GdalOpenFlags::GDAL_OF_READONLY
                        | gdal::GdalOpenFlags::GDAL_OF_RASTER,
                    ..Default::default()
                };
                let dataset = Dataset::open_ex(pinned(p).ok()?, options).ok()?;
                Some(measure(&dataset)? * per_cell(&p.display().to_string()))
            })
            .reduce(f64::max)
    };
    let bands = |dataset: &Dataset| dataset.raster_count().max(1) as f64;
    let whole = |name: &str| {
        measure_source(name, &|dataset| {
            let (x, y) = dataset.raster_size();
            Some(x as f64 * y as f64 * bands(dataset))
        })
    };
    // The window a warped VRT reads of its source (R12-2), through the transformer GDAL will
    // deserialise from the document: only once the document's CRS texts are known to make
    // PROJ read no file (the check below runs on it again; it is the same scan).
    let crs_clean = matches!(crs_reads_files(file), Ok(None));
    let warped = |name: &str, grid: &vrt_work::WarpedGrid| {
        if !crs_clean {
            return None;
        }
        measure_source(name, &|dataset| {
            let (x, y) = dataset.raster_size();
            let (x0, y0, x1, y1) = vrt_work::warped_source_window(
                grid.transformer,
                (grid.cols, grid.rows),
                (x as f64, y as f64),
                grid.pad,
            )?;
            Some((x1 - x0) * (y1 - y0) * bands(dataset))
        })
    };
    let sources = vrt_work::Sources {
        per_cell: &per_cell,
        whole: &whole,
        warped: &warped,
    };
    let Some(work) = vrt_work::estimate(document, &sources) else {
        return Ok(());
    };
    let budget = max_cells() as f64;
    if work.work > budget && work.per_cell() > vrt_work::MAX_WORK_PER_CELL {
        return Err(GdalError::Arguments(format!(
            "{}: reading it whole makes GDAL read or combine {:.0} source cells ({:.0} per \
             cell of the VRT's {:.0}: {} overlaps its sources, resamples larger windows or \
             filters with a large kernel), more than the server's budget of {} cells per call (GDAL_MCP_MAX_CELLS) \
             at more than {} per cell; open the source itself, on a window, or build the VRT \
             over a coarser copy of it (gdal_translate -outsize) or with a smaller kernel",
            input.display(),
            work.work,
            work.per_cell(),
            work.cells,
            file.display(),
            max_cells(),
            vrt_work::MAX_WORK_PER_CELL
        )));
    }
    walk.per_cell.insert(file.to_path_buf(), work.per_cell());
    Ok(())
}

/// The datasets an `.aux.xml` beside `file` names (`OVERVIEW_FILE`, geolocation `X_DATASET` /
/// `Y_DATASET`, which gdalwarp opens by itself) must lie inside a workspace and be regular
/// files, like a VRT's sources. An `.aux.xml` the XML parser cannot read is scanned for those
/// keys in its leniently decoded text instead (GDAL would still read what it can of it).
fn check_pam_references(input: &Path, file: &Path) -> Result<(), GdalError> {
    let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else {
        return Ok(());
    };
    let stem = crate::gdal::stem_of(file).unwrap_or(name);
    for sidecar in [name, stem] {
        let mut pam = sidecar.to_os_string();
        pam.push(".aux.xml");
        let pam = parent.join(pam);
        if !std::fs::metadata(&pam).is_ok_and(|m| m.is_file()) {
            continue;
        }
        // GDAL parses the sidecar whole at the open (attack round 21, R21-A5: a 22 MB one of
        // 6 M empty elements took a read-only `raster_info` 619 MB).
        let holds = super::vector::table::check_xml_tree(
            &pam,
            &pinned_resolved(&pam)?.display().to_string(),
            true,
        )?;
        charge_open(input, &pam, holds)?;
        let refuse = |target: &str| {
            GdalError::Arguments(format!(
                "{}: its {} makes GDAL read \"{target}\", which is outside every workspace or \
                 not a regular file; remove that entry or copy the data into a workspace",
                input.display(),
                pam.display()
            ))
        };
        match references::vrt_references(&pam) {
            Ok(references) => {
                for reference in references {
                    if crate::workspace::is_virtual(&reference.written) {
                        return Err(refuse(&reference.written));
                    }
                    for path in &reference.paths {
                        let shown = path.display().to_string();
                        let special =
                            std::fs::metadata(path).is_ok_and(|m| !(m.is_file() || m.is_dir()));
                        if !inside(&shown) || special {
                            return Err(refuse(&shown));
                        }
                    }
                }
            }
            // Fail closed: GDAL's lenient parser reads what this one cannot (issue 21,
            // attack round 5, F3).
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Operator override of [`DEFAULT_MAX_SCANNED_TEXT_BYTES`].
pub const SCANNED_TEXT_VARIABLE: &str = "GDAL_MCP_MAX_SCANNED_TEXT_BYTES";

/// Largest text file (an input or a sidecar with no NUL byte in its first 64 KiB: GeoJSON,
/// GML, KML, CSV, an ENVI header, a `.prj`) scanned whole for CRS text that names files. A
/// larger one is refused rather than scanned in part (a GeoJSON `crs` member after the first
/// MiB reached PROJ: issue 21, attack round 5, F1). The scan streams, in constant memory.
pub const DEFAULT_MAX_SCANNED_TEXT_BYTES: u64 = 256 << 20;

/// Bytes of a binary file (NUL bytes in its first 64 KiB) scanned for CRS text: its head,
/// where the headers that carry CRS text sit (see Known limits in docs/security.md).
const BINARY_HEAD_BYTES: u64 = 1 << 20;

/// Why a CRS carried by `path` (a raster, a `.prj`, an ENVI `.hdr`, an `.aux.xml`, a VRT)
/// would make PROJ read a file, if it would: a grid or parameter file (`+nadgrids=`,
/// `PARAMETERFILE`, the text "grid or parameter file" is kept in the message for callers),
/// `init=`, a PROJ step that opens the file it names (`tinshift`, `defmodel`) anywhere in the
/// text, raw, with XML references decoded and with JSON escapes decoded (GDAL decodes both
/// before PROJ sees the text), or, in an XML document's SRS elements, an authority PROJ's
/// database does not know. A text file is scanned whole; one too large to scan, or an XML
/// document that cannot be parsed, is refused.
fn crs_reads_files(path: &Path) -> Result<Option<String>, GdalError> {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let Ok(file) = open_regular(path) else {
        return Ok(None);
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut chunk = Vec::with_capacity(1 << 20);
    let read = |reader: &mut std::io::BufReader<std::fs::File>, chunk: &mut Vec<u8>| {
        chunk.clear();
        reader.by_ref().take(1 << 20).read_to_end(chunk)
    };
    if read(&mut reader, &mut chunk).is_err() {
        return Ok(None);
    }
    let binary = chunk[..chunk.len().min(64 << 10)].contains(&0);
    let limit = if binary {
        BINARY_HEAD_BYTES
    } else {
        crate::budget::setting(SCANNED_TEXT_VARIABLE, DEFAULT_MAX_SCANNED_TEXT_BYTES)
    };
    if !binary && size > limit {
        return Err(GdalError::Arguments(format!(
            "{}: a text file of {size} bytes is larger than the {limit} bytes scanned for CRS \
             text that makes PROJ read files ({SCANNED_TEXT_VARIABLE}); it is refused rather \
             than scanned in part. Convert it to a GeoPackage, or split it",
            path.display()
        )));
    }
    let xml = !binary
        && String::from_utf8_lossy(&chunk[..chunk.len().min(64)])
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('<');
    let mut scans = [
        TextScan::new(|t| t.to_string()),
        TextScan::new(references::decode_leniently),
        TextScan::new(json_unescape),
    ];
    let mut scanned = 0u64;
    loop {
        scanned += chunk.len() as u64;
        let last = chunk.is_empty() || scanned >= limit;
        let text = String::from_utf8_lossy(&chunk);
        for scan in &mut scans {
            if let Some(why) = scan.feed(&text, last) {
                return Ok(Some(why));
            }
        }
        if last {
            break;
        }
        if read(&mut reader, &mut chunk).is_err() {
            break;
        }
    }
    // Past a binary file's head: where GDAL reads CRS text in it (a TIFF's ASCII tags, the
    // GeoKeyDirectory's GeoAsciiParams among them; a FlatGeobuf's header), wherever it lies
    // (attack round 5, left open: a citation key or header padded past the first MiB).
    if binary && size > BINARY_HEAD_BYTES {
        let text_limit =
            crate::budget::setting(SCANNED_TEXT_VARIABLE, DEFAULT_MAX_SCANNED_TEXT_BYTES);
        for region in binary_text_regions(path, size, text_limit)? {
            let text = String::from_utf8_lossy(&region);
            for decode in [
                (|t: &str| t.to_string()) as fn(&str) -> String,
                references::decode_leniently,
                json_unescape,
            ] {
                if let Some(why) = TextScan::new(decode).feed(&text, true) {
                    return Ok(Some(why));
                }
            }
        }
    }
    // An XML document (a VRT, an `.aux.xml`, KML, GML) is also read as GDAL's parser hands
    // it over (text split by comments or CDATA joined).
    if xml {
        let parsed = references::decoded_xml_text(path)?;
        let mut scan = TextScan::new(|t| t.to_string());
        if let Some(why) = scan.feed(&parsed, true) {
            return Ok(Some(why));
        }
    }
    Ok(references::srs_texts(path)?
        .iter()
        .find_map(|text| crs_text::crs_text_reads_files(text)))
}

/// Refuse a GeoTIFF whose own metadata tag names a file GDAL opens (geolocation arrays, an
/// overview file: [`references::tiff_metadata_references`]; attack round 14, R14-13: outside
/// arrays placed a warp's output, and a FIFO named as `OVERVIEW_FILE` blocked the open), and
/// a GML whose schema includes another file ([`references::gml_schema_references`], R14-12),
/// when what they name is outside every workspace or not a regular file.
fn check_embedded_references(input: &Path, file: &Path) -> Result<(), GdalError> {
    let refuse_outside = |references: Vec<references::FileReference>, carrier: &str| {
        for reference in references {
            for path in &reference.paths {
                let shown = path.display().to_string();
                let special = std::fs::metadata(path).is_ok_and(|m| !(m.is_file() || m.is_dir()));
                if crate::workspace::is_virtual(&reference.written) || !inside(&shown) || special {
                    return Err(GdalError::Arguments(format!(
                        "{}: {carrier} names \"{}\" for GDAL to read, which is outside every \
                         workspace or not a regular file; remove the reference or copy the \
                         file into a workspace",
                        input.display(),
                        reference.written
                    )));
                }
            }
        }
        Ok(())
    };
    let Ok(size) = std::fs::metadata(file).map(|m| m.len()) else {
        return Ok(());
    };
    let limit = crate::budget::setting(SCANNED_TEXT_VARIABLE, DEFAULT_MAX_SCANNED_TEXT_BYTES);
    for region in binary_text_regions(file, size, limit)? {
        refuse_outside(
            references::tiff_metadata_references(file, &region)?,
            "its GDAL metadata (a geolocation array or overview file)",
        )?;
    }
    for xml in references::jp2_xml_boxes(file, limit)? {
        refuse_outside(
            references::jp2_box_references(file, &xml)?,
            "its JPEG 2000 metadata box (an overview file or a geolocation array)",
        )?;
    }
    refuse_outside(
        references::gml_schema_references(file)?,
        "its GML schema (.xsd, with its includes)",
    )
}

/// Most TIFF directory entries [`binary_text_regions`] reads in all (a few hundred per
/// image; a pyramid of 30 levels of 50 tags is 1,500).
const MAX_TIFF_ENTRIES: u64 = 100_000;

/// White space as GDAL's parsers skip it: C's `isspace` in the "C" locale, which Rust's
/// `is_ascii_whitespace` is not (it leaves out the vertical tab, 0x0B). A GeoJSON and a TIFF's
/// `GDAL_METADATA` starting with a vertical tab escaped the host's checks while GDAL read them
/// (attack round 17, R17-A3, R17-A4).
pub fn c_space(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0x0b
}

/// The byte ranges of a binary file past its head where GDAL reads CRS text: every ASCII tag
/// value of every IFD of a TIFF or BigTIFF (GeoAsciiParams, GDAL's metadata, citations), and
/// a FlatGeobuf's whole header (its CRS WKT). At most `limit` bytes in all (more is refused
/// rather than scanned in part); an IFD chain is followed for at most 65536 IFDs, and one that
/// loops or points outside the file ends the walk (GDAL stops there too).
fn binary_text_regions(path: &Path, size: u64, limit: u64) -> Result<Vec<Vec<u8>>, GdalError> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = open_regular(path) else {
        return Ok(Vec::new());
    };
    let at = |file: &mut std::fs::File, offset: u64, len: u64| -> Option<Vec<u8>> {
        if offset.checked_add(len)? > size {
            return None;
        }
        file.seek(SeekFrom::Start(offset)).ok()?;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        file.read_exact(&mut buf).ok()?;
        Some(buf)
    };
    let too_much = || {
        GdalError::Arguments(format!(
            "{}: its CRS text (TIFF ASCII tags or FlatGeobuf header) is larger than the {limit} \
             bytes scanned for CRS text that makes PROJ read files ({SCANNED_TEXT_VARIABLE}); it \
             is refused rather than scanned in part",
            path.display()
        ))
    };
    let Some(head) = at(&mut file, 0, 16.min(size)) else {
        return Ok(Vec::new());
    };
    let mut regions = Vec::new();
    let mut total = 0u64;
    // FlatGeobuf: magic, then the header's length (u32 LE) and the header.
    if head.len() >= 12 && head.starts_with(b"fgb\x03") {
        let len = u64::from(u32::from_le_bytes([head[8], head[9], head[10], head[11]]));
        if len > limit {
            return Err(too_much());
        }
        if let Some(header) = at(&mut file, 12, len.min(size.saturating_sub(12))) {
            regions.push(header);
        }
        return Ok(regions);
    }
    let little = match head.get(..2) {
        Some(b"II") => true,
        Some(b"MM") => false,
        _ => return Ok(regions),
    };
    // The unsigned integer of `width` bytes (2, 4 or 8) at `i`, in the file's byte order.
    let uint_at = |b: &[u8], i: usize, width: usize| -> Option<u64> {
        let bytes = b.get(i..i.checked_add(width)?)?;
        let push = |n: u64, byte: &u8| n << 8 | u64::from(*byte);
        Some(if little {
            bytes.iter().rev().fold(0, push)
        } else {
            bytes.iter().fold(0, push)
        })
    };
    let big = match uint_at(&head, 2, 2) {
        Some(42) => false,
        Some(43) => true,
        _ => return Ok(regions),
    };
    let mut next = if big {
        uint_at(&head, 8, 8)
    } else {
        uint_at(&head, 4, 4)
    }
    .unwrap_or(0);
    let mut seen = std::collections::HashSet::new();
    let (count_len, entry_len, inline) = if big { (8u64, 20u64, 8u64) } else { (2, 12, 4) };
    // Directory entries read in all: 65,535 overlapping directories of 65,535 entries each
    // made this scan read 51 GB where GDAL refuses the file at once (attack round 18,
    // R18-A7). Past the bound the file is refused, never scanned in part.
    let mut entries_read = 0u64;
    while next != 0 && seen.len() < 65536 && seen.insert(next) {
        let Some(count_bytes) = at(&mut file, next, count_len) else {
            break;
        };
        let Some(count) = (if big {
            uint_at(&count_bytes, 0, 8)
        } else {
            uint_at(&count_bytes, 0, 2)
        }) else {
            break;
        };
        if count > 65536 {
            break;
        }
        entries_read = entries_read.saturating_add(count);
        if entries_read > MAX_TIFF_ENTRIES {
            return Err(GdalError::Arguments(format!(
                "{}: its TIFF directories hold more than {MAX_TIFF_ENTRIES} entries in all, \
                 more than any image needs (GDAL refuses overlapping directories); it is not \
                 opened. Rewrite it with gdal_translate",
                path.display()
            )));
        }
        let Some(entries) = count
            .checked_mul(entry_len)
            .and_then(|n| at(&mut file, next + count_len, n))
        else {
            break;
        };
        for i in 0..count as usize {
            let e = i * entry_len as usize;
            // Type 2 (ASCII), and every integer type libtiff reads a text tag from
            // (`TIFFReadDirEntryByteArray` narrows each element to a byte): 1 (BYTE), 6
            // (SBYTE), 7 (UNDEFINED), 3 and 8 (SHORT), 4 and 9 (LONG), 16 and 17 (LONG8). A
            // `GDAL_METADATA` typed UNDEFINED (attack round 17, R17-A2), then SHORT (round 18,
            // R18-A1), was read by GDAL and never scanned here.
            let width: u64 = match uint_at(&entries, e + 2, 2) {
                Some(1 | 2 | 6 | 7) => 1,
                Some(3 | 8) => 2,
                Some(4 | 9) => 4,
                Some(16 | 17) => 8,
                _ => continue,
            };
            let count_of = if big {
                uint_at(&entries, e + 4, 8)
            } else {
                uint_at(&entries, e + 4, 4)
            };
            let Some(n) = count_of.and_then(|c| c.checked_mul(width)) else {
                continue;
            };
            let value = if n <= inline {
                entries
                    .get(e + 4 + if big { 8 } else { 4 }..)
                    .map(|v| v[..n as usize].to_vec())
            } else {
                total = total.saturating_add(n);
                if total > limit {
                    return Err(too_much());
                }
                let offset = if big {
                    uint_at(&entries, e + 12, 8)
                } else {
                    uint_at(&entries, e + 8, 4)
                };
                offset.and_then(|o| at(&mut file, o, n))
            };
            if let Some(value) = value {
                // Each element narrowed to its byte, as libtiff reads it.
                let narrowed: Vec<u8> = if width == 1 {
                    value
                } else {
                    (0..value.len() / width as usize)
                        .filter_map(|k| uint_at(&value, k * width as usize, width as usize))
                        .map(|v| (v & 0xFF) as u8)
                        .collect()
                };
                regions.push(narrowed);
            }
        }
        let link = next + count_len + count * entry_len;
        next = at(&mut file, link, count_len * if big { 1 } else { 2 })
            .and_then(|b| {
                if big {
                    uint_at(&b, 0, 8)
                } else {
                    uint_at(&b, 0, 4)
                }
            })
            .unwrap_or(0);
    }
    Ok(regions)
}

/// One pass over a file's text, chunk by chunk, decoded one way, lowercased and without
/// whitespace (PROJ drops whitespace around `=`), looking for what makes PROJ open a file. A
/// possible escape cut by the chunk's end waits for the next chunk; the last 1 KiB of each
/// window is carried into the next, so nothing is missed at a seam.
struct TextScan {
    decode: fn(&str) -> String,
    pending: String,
    tail: String,
}

/// Normalised text carried from one window into the next.
const SCAN_CARRY: usize = 1024;

/// A match starting this close to a window's end is judged in the next window (its value may
/// be cut).
const SCAN_MARGIN: usize = 256;

impl TextScan {
    fn new(decode: fn(&str) -> String) -> TextScan {
        TextScan {
            decode,
            pending: String::new(),
            tail: String::new(),
        }
    }

    fn feed(&mut self, raw: &str, last: bool) -> Option<String> {
        let mut text = std::mem::take(&mut self.pending);
        text.push_str(raw);
        if !last {
            if let Some(at) = text.rfind(['&', '\\']) {
                if text.len() - at < 16 {
                    self.pending = text.split_off(at);
                }
            }
        }
        let mut window = std::mem::take(&mut self.tail);
        window.push_str(&squeeze(&(self.decode)(&text)));
        let mut cutoff = if last {
            window.len()
        } else {
            window.len().saturating_sub(SCAN_MARGIN)
        };
        while !window.is_char_boundary(cutoff) {
            cutoff -= 1;
        }
        let found = file_naming_keyword(&window, cutoff);
        let mut keep = window.len().saturating_sub(SCAN_CARRY);
        while !window.is_char_boundary(keep) {
            keep -= 1;
        }
        self.tail = window.split_off(keep);
        found
    }
}

/// What in lowercased, whitespace-free text makes PROJ open a file, among matches starting
/// before `cutoff`: every key ending in `grids=` (`nadgrids`, `geoidgrids`, `grids` of
/// `hgridshift`/`vgridshift`, `xy_grids`/`z_grids` of `deformation`) unless each grid is
/// PROJ's built-in `@null`, `PARAMETERFILE`, `init=`, and the steps that open the file they
/// name (`tinshift` `file=`, `defmodel` `model=`), PROJ 9.1's whole list.
fn file_naming_keyword(text: &str, cutoff: usize) -> Option<String> {
    let before = |key: &str| text.match_indices(key).any(|(at, _)| at < cutoff);
    if crs_text::names_grid_or_parameter_file_before(text, cutoff) {
        return Some(
            "it names a grid or parameter file (`+nadgrids=`, `PARAMETERFILE`...)".to_string(),
        );
    }
    if before("init=") {
        return Some("it uses `init=`, which reads an init file".to_string());
    }
    if before("tinshift") || before("defmodel") {
        return Some(
            "it uses a PROJ step that reads a file (`tinshift` `file=`, `defmodel` `model=`)"
                .to_string(),
        );
    }
    None
}

/// JSON string escapes decoded (`\u0067` is `g`, `\/` is `/`), as GDAL's JSON parser decodes
/// them before a GeoJSON `crs` member reaches PROJ; anything else kept as written.
pub fn json_unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().map(|(_, n)| *n) {
            Some('u') => {
                let hex = text.get(at + 2..at + 6).unwrap_or("");
                match u32::from_str_radix(hex, 16).ok().filter(|_| hex.len() == 4) {
                    Some(code) => {
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        for _ in 0..5 {
                            chars.next();
                        }
                    }
                    None => out.push('\\'),
                }
            }
            Some(n @ ('/' | '"' | '\\')) => {
                out.push(n);
                chars.next();
            }
            Some('n' | 't' | 'r' | 'b' | 'f') => {
                out.push(' ');
                chars.next();
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// Open `path` for reading without ever blocking: `O_NONBLOCK` (which a FIFO swapped in after
/// a check would otherwise block on until a writer came), then refused unless the descriptor
/// is a regular file. The host's own reads of files before GDAL opens them go through this.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// Lowercased text without whitespace.
fn squeeze(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Refuse a dataset GDAL opened if any file it lists (a VRT's sources, sidecars, overview
/// files) lies outside the workspaces, or if a listed sidecar is a symlink leaving them.
pub fn confine_opened(path: &Path, dataset: &Dataset) -> Result<(), GdalError> {
    if ROOTS.get().is_none() {
        return Ok(());
    }
    let mut files = file_list(dataset);
    if let Some(overview) = dataset.metadata_item("OVERVIEW_FILE", "OVERVIEWS") {
        files.push(overview);
    }
    // Geolocation arrays, whatever carried the items (an `.aux.xml`, a TIFF tag, a
    // GeoPackage's metadata table): gdalwarp opens them, and GDAL's file list does not name
    // them (attack round 14, R14-13).
    for key in ["X_DATASET", "Y_DATASET"] {
        if let Some(array) = dataset.metadata_item(key, "GEOLOCATION") {
            // A variable of a netCDF or HDF file, `NETCDF:"<file>":lon`, is read from that
            // file: checked as the file (attack round 20, R20-A4: the input itself was refused
            // as "outside every workspace").
            files.push(subdataset_file(&array).unwrap_or(array));
        }
    }
    let vrts: Vec<String> = files
        .iter()
        .filter(|f| references::is_vrt_document(Path::new(f.as_str())))
        .cloned()
        .collect();
    for vrt in vrts {
        // GDAL does not list a mask band's sources: they are read from the document itself.
        for reference in references::vrt_references(Path::new(&vrt))? {
            files.extend(reference.paths.iter().map(|p| p.display().to_string()));
        }
    }
    // Each file is what the checks saw (or older than them) before anything is read, and no
    // name GDAL reads through was replaced since the checks.
    for file in &files {
        check_identity(path, file)?;
    }
    if let Some(changed) = watch::changed() {
        return Err(GdalError::Arguments(format!(
            "{}: {changed} changed between check and open (it was replaced, linked or \
             appeared while GDAL opened the input), so nothing was read from it; try again \
             once nothing is modifying these files",
            path.display()
        )));
    }
    for file in &files {
        if !inside(file) {
            return Err(GdalError::Arguments(format!(
                "{}: opening it makes GDAL read \"{file}\", which is outside every workspace \
                 (a VRT source, sidecar or overview file); copy the data into a workspace",
                path.display()
            )));
        }
        // A listed FIFO, socket or device blocks the worker that reads it (attack round 13,
        // R13-3: a band's source GDAL listed was a FIFO inside), whoever listed it.
        if std::fs::metadata(file).is_ok_and(|m| !(m.is_file() || m.is_dir())) {
            return Err(GdalError::Arguments(format!(
                "{}: opening it makes GDAL read \"{file}\", which is not a regular file or \
                 folder (a FIFO, socket or device blocks the read); replace it with the file",
                path.display()
            )));
        }
    }
    // What GDAL listed, every file checked: what a sign-off on this input binds besides the
    // sidecar names (attack round 13, R13-1).
    read_set::record_listing(path, &files);
    Ok(())
}

/// Refuse a dataset GDAL opened whose CRS, as GDAL parsed it from whatever carried it (a
/// `.prj` of any case, an ENVI header, a GeoJSON `crs` written with escapes, a GeoTIFF
/// citation, a netCDF attribute, a layer's SRS in any driver), would make PROJ open a file:
/// a grid or parameter file, `init=`, a step that reads one. PROJ opens grids when an
/// operation is built from the CRS (a FIFO named as `+nadgrids` in an upper-case `.PRJ` left
/// `vector_reproject` unanswered past the open deadline: regression, issue 21 attack round 4,
/// B2's hang). Run inside the open (and its deadline): asking GDAL for every SRS here makes
/// the lazy drivers parse them now, not later outside the deadline.
pub fn check_opened_crs(path: &Path, dataset: &Dataset) -> Result<(), GdalError> {
    use gdal::vector::LayerAccess;
    let refuse = |srs: &gdal::spatial_ref::SpatialRef, whose: &str| -> Result<(), GdalError> {
        let Ok(wkt) = srs.to_wkt() else {
            return Ok(());
        };
        match crs_text::crs_text_reads_files(&wkt) {
            None => Ok(()),
            Some(why) => Err(GdalError::Arguments(format!(
                "{}: {whose} CRS ({}) makes PROJ read a file: {why}; fix the CRS in the file \
                 (an authority code such as EPSG:4326, or WKT without grid names), or give the \
                 data without it",
                path.display(),
                srs.name().unwrap_or_else(|| "unnamed".to_string())
            ))),
        }
    };
    if let Ok(srs) = dataset.spatial_ref() {
        refuse(&srs, "its")?;
    }
    if let Some(srs) = dataset.gcp_spatial_ref() {
        refuse(&srs, "its GCPs'")?;
    }
    for layer in dataset.layers() {
        if let Some(srs) = layer.spatial_ref() {
            refuse(&srs, &format!("layer {:?}'s", layer.name()))?;
        }
        for field in layer.defn().geom_fields() {
            if let Ok(srs) = field.spatial_ref() {
                refuse(&srs, &format!("layer {:?}'s geometry field", layer.name()))?;
            }
        }
    }
    Ok(())
}

/// `GDALGetFileList` of a dataset.
pub fn file_list(dataset: &Dataset) -> Vec<String> {
    // SAFETY: the dataset handle is valid for the call; the returned list is owned by us and
    // freed with CSLDestroy.
    unsafe {
        let list = gdal_sys::GDALGetFileList(dataset.c_dataset());
        let files = super::string_list(list);
        if !list.is_null() {
            gdal_sys::CSLDestroy(list);
        }
        files
    }
}

/// Which list of options an argument feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// `-co` / `-dsco`: the driver's creation options.
    Creation,
    /// `-lco`: the driver's layer creation options.
    Layer,
}

/// Refuse an output driver outside the allow-list.
pub fn check_output_driver(argument: &str, driver: &str, raster: bool) -> Result<(), GdalError> {
    let allowed = if raster {
        RASTER_OUTPUT_DRIVERS
    } else {
        VECTOR_OUTPUT_DRIVERS
    };
    if allowed.iter().any(|d| d.eq_ignore_ascii_case(driver)) {
        return Ok(());
    }
    Err(GdalError::Arguments(format!(
        "{argument}: the {driver} driver is not allowed for outputs (it can reach files outside \
         the output, or change data behind the methodology gate); use one of {}",
        allowed.join(", ")
    )))
}

/// Check driver options: each name must be declared by the driver and must not name a file,
/// and no value may be a path, a `/vsi` name or a URL.
pub fn check_options(
    argument: &str,
    driver: &gdal::Driver,
    kind: OptionKind,
    options: &[(String, String)],
) -> Result<(), GdalError> {
    let list = match kind {
        OptionKind::Creation => "DMD_CREATIONOPTIONLIST",
        OptionKind::Layer => "DS_LAYER_CREATIONOPTIONLIST",
    };
    let declared = drivers::declared_options(driver, list);
    for (key, value) in options {
        let upper = key.to_ascii_uppercase();
        if FILE_OPTIONS.contains(&upper.as_str())
            || upper.ends_with("FILENAME")
            || upper.ends_with("_FILE")
            || upper.ends_with("_DIR")
        {
            return Err(GdalError::Arguments(format!(
                "{argument}.{key}: options that name files are not allowed; outputs are \
                 written only where `output` says"
            )));
        }
        if !declared.is_empty() && !declared.contains(&upper) {
            return Err(GdalError::Arguments(format!(
                "{argument}.{key}: the {} driver has no such option; it has {}",
                driver.short_name(),
                declared.join(", ")
            )));
        }
        if looks_like_a_location(value) {
            return Err(GdalError::Arguments(format!(
                "{argument}.{key}: \"{value}\" looks like a path, a GDAL virtual file or a URL; \
                 option values may not name files or locations"
            )));
        }
    }
    Ok(())
}

/// Creation options that take a methodological decision inside the driver (a resampling, a
/// tiling scheme that regrids, a CRS): the domains would never see it, so they are typed
/// arguments of the tools (`resampling`, `dst_crs`) or refused.
pub const DECISION_OPTIONS: &[&str] = &[
    "RESAMPLING",
    "OVERVIEW_RESAMPLING",
    "WARP_RESAMPLING",
    "TILING_SCHEME",
    "TARGET_SRS",
    "ZOOM_LEVEL",
    "ZOOM_LEVEL_STRATEGY",
    "RES",
    "EXTENT",
    "ALIGNED_LEVELS",
];

/// Vector driver options that round or recode what is written, which no fact measures: GeoJSON's
/// `COORDINATE_PRECISION` and `SIGNIFICANT_FIGURES` (`COORDINATE_PRECISION=0` wrote 10.05°,
/// 45.05° as `[10, 45]` and collapsed a polygon to a point under "GeoJSON holds these layers
/// without loss"), MapInfo's `BOUNDS` (int32 coordinates over the bounds given: a 2e9° range
/// left half-degree steps), and GeoJSON's `ID_TYPE` (a text id forced to Integer became 0)
/// (attack round 17, R17-C8). Refused by [`rounding_option`].
pub const ROUNDING_OPTIONS: &[&str] = &[
    "COORDINATE_PRECISION",
    "SIGNIFICANT_FIGURES",
    "BOUNDS",
    "ID_TYPE",
];

/// Why a driver option `key` with `value` would round or recode the written values unmeasured
/// ([`ROUNDING_OPTIONS`]), or `None` when it does not (`ID_TYPE=String` keeps every id).
pub fn rounding_option(key: &str, value: &str) -> Option<&'static str> {
    let key = key.to_ascii_uppercase();
    if !ROUNDING_OPTIONS.contains(&key.as_str()) {
        return None;
    }
    match key.as_str() {
        "ID_TYPE" if value.trim().eq_ignore_ascii_case("string") => None,
        "ID_TYPE" => Some("forces every feature id to a type its values may not have (a text id becomes 0)"),
        "BOUNDS" => Some("makes MapInfo store coordinates as integers over the bounds given, so wide bounds round every coordinate"),
        _ => Some("rounds every coordinate (and with SIGNIFICANT_FIGURES every real field) as it writes"),
    }
}

/// The creation options that decide a driver's own overviews, given the resampling the call
/// chose (and the domains saw), if any. COG builds overviews by default with CUBIC (NEAREST
/// only for paletted bands), which invents values in a class map: it gets the call's method,
/// or no overviews (build them with `raster_overviews`, which is gated).
pub fn overview_options(format: &str, resampling: Option<&str>) -> Vec<(String, String)> {
    if !format.eq_ignore_ascii_case("COG") {
        return Vec::new();
    }
    let method = resampling.and_then(|r| match r {
        "near" | "nearest" => Some("NEAREST"),
        "bilinear" => Some("BILINEAR"),
        "cubic" => Some("CUBIC"),
        "cubicspline" => Some("CUBICSPLINE"),
        "lanczos" => Some("LANCZOS"),
        "average" => Some("AVERAGE"),
        "rms" => Some("RMS"),
        "mode" => Some("MODE"),
        "gauss" => Some("GAUSS"),
        _ => None,
    });
    match method {
        Some(method) => vec![("OVERVIEW_RESAMPLING".to_string(), method.to_string())],
        None => vec![("OVERVIEWS".to_string(), "NONE".to_string())],
    }
}

/// A value that could make GDAL read or write elsewhere.
fn looks_like_a_location(value: &str) -> bool {
    let lower = value.trim().to_ascii_lowercase();
    lower.contains('/')
        || lower.contains('\\')
        || lower.contains("..")
        || lower.starts_with('~')
        || lower.contains("://")
        || lower.starts_with("vsi")
        || lower.contains('\n')
        || lower.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack round 18, R18-A7: overlapping TIFF directories of many entries each made the
    /// host's own tag scan read tens of gigabytes. Past the entries bound the file is refused.
    #[test]
    fn r18_a7_overlapping_tiff_directories_are_bounded() {
        const COUNT: u16 = 40_000;
        let span = 2 + usize::from(COUNT) * 12;
        let mut bytes = vec![0u8; 8 + span + 64];
        for pair in bytes.chunks_mut(2) {
            pair.copy_from_slice(&COUNT.to_le_bytes()[..pair.len()]);
        }
        bytes[..4].copy_from_slice(b"II*\0");
        bytes[4..8].copy_from_slice(&8u32.to_le_bytes());
        // Directories at 8, 12 and 16, each naming the next.
        for (at, next) in [(8usize, 12u32), (12, 16), (16, 0)] {
            bytes[at + span..at + span + 4].copy_from_slice(&next.to_le_bytes());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.tif");
        std::fs::write(&path, &bytes).unwrap();
        let refused = binary_text_regions(&path, bytes.len() as u64, 1 << 20)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(refused.contains("TIFF directories"), "{refused}");
    }

    /// Regression (attack round 14, R14-13): a GeoTIFF keeps a `GEOLOCATION` domain in its own
    /// `GDAL_METADATA` tag, and gdalwarp opened the arrays it names; the tag is read before the
    /// open now. The twin's ordinary metadata names nothing.
    #[test]
    fn r14_13_a_geotiff_s_own_metadata_names_its_geolocation_arrays() {
        use gdal::Metadata;
        let dir = tempfile::tempdir().unwrap();
        let tif = dir.path().join("g.tif");
        let twin = dir.path().join("t.tif");
        for (path, geolocated) in [(&tif, true), (&twin, false)] {
            let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
            let mut dataset = driver
                .create_with_band_type::<u8, _>(path, 4, 4, 1)
                .unwrap();
            dataset.set_metadata_item("AREA", "x", "").unwrap();
            if geolocated {
                for (key, value) in [
                    ("X_DATASET", "/outside/lon.tif"),
                    ("Y_DATASET", "/outside/lat.tif"),
                ] {
                    dataset
                        .set_metadata_item(key, value, "GEOLOCATION")
                        .unwrap();
                }
            }
        }
        let found = |path: &Path| -> Vec<String> {
            let size = std::fs::metadata(path).unwrap().len();
            binary_text_regions(path, size, 1 << 20)
                .unwrap()
                .iter()
                .flat_map(|r| references::tiff_metadata_references(path, r).unwrap())
                .map(|r| r.written)
                .collect()
        };
        assert_eq!(found(&tif), ["/outside/lon.tif", "/outside/lat.tif"]);
        assert!(found(&twin).is_empty());
    }

    /// R13-12: a document is KML by its root element, after any prolog, whatever its name;
    /// R13-13: a file is inflated as a workbook by its zip signature, whatever its name.
    #[test]
    fn r13_12_r13_13_kml_and_workbooks_are_known_by_their_content() {
        let comment = format!("<!--{}-->", "x".repeat(7000));
        let kml = format!("\u{feff}<?xml version=\"1.0\"?>\n{comment}<!DOCTYPE k [<!ENTITY a \"b\">]>\n<kml xmlns=\"http://www.opengis.net/kml/2.2\"><Document/></kml>");
        assert!(root_element_is(kml.as_bytes(), b"kml"));
        assert!(root_element_is(&b"<k:kml xmlns:k='x'/>"[..], b"kml"));
        assert!(!root_element_is(
            &b"<?xml version='1.0'?><gml><kml/></gml>"[..],
            b"kml"
        ));
        assert!(!root_element_is(&b"id,name\n1,<kml"[..], b"kml"));
        assert!(!root_element_is(&b"<!-- never closed"[..], b"kml"));
        let dir = tempfile::tempdir().unwrap();
        let named_dat = dir.path().join("big.dat");
        std::fs::write(&named_dat, &kml).unwrap();
        assert!(is_kml(&named_dat));
        let csv = dir.path().join("t.dat");
        std::fs::write(&csv, format!("{comment}\nid\n")).unwrap();
        assert!(!is_kml(&csv));
        let zip = dir.path().join("book.zip");
        std::fs::write(&zip, b"PK\x03\x04rest").unwrap();
        assert!(is_spreadsheet(&zip));
        let text = dir.path().join("notes.zip");
        std::fs::write(&text, b"plain").unwrap();
        assert!(!is_spreadsheet(&text));
    }

    /// Regression (attack round 5, left open in Known limits): a binary file's CRS text past
    /// its first MiB (a GeoTIFF's GeoAsciiParams, a FlatGeobuf header padded past it) is read
    /// where GDAL reads it; the clean twins pass.
    #[test]
    fn crs_text_past_a_binary_files_first_mib_is_scanned_where_gdal_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let tiff = |name: &str, text: &str| {
            let far: u32 = 2 << 20;
            let mut bytes = b"II*\0".to_vec();
            bytes.extend(8u32.to_le_bytes());
            bytes.extend(1u16.to_le_bytes());
            bytes.extend(34737u16.to_le_bytes());
            bytes.extend(2u16.to_le_bytes());
            bytes.extend((text.len() as u32 + 1).to_le_bytes());
            bytes.extend(far.to_le_bytes());
            bytes.extend(0u32.to_le_bytes());
            bytes.resize(far as usize, 0);
            bytes.extend(text.as_bytes());
            bytes.push(0);
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let grid = "+proj=longlat +ellps=GRS80 +nadgrids=/outside/grid.gsb +type=crs|";
        assert!(crs_reads_files(&tiff("far.tif", grid)).unwrap().is_some());
        assert!(crs_reads_files(&tiff("clean.tif", "WGS 84|"))
            .unwrap()
            .is_none());
        let fgb = |name: &str, text: &str| {
            let mut header = vec![0u8; 3 << 19];
            header.extend(text.as_bytes());
            let mut bytes = b"fgb\x03fgb\x01".to_vec();
            bytes.extend((header.len() as u32).to_le_bytes());
            bytes.extend(header);
            bytes.extend([0u8; 64]);
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        assert!(crs_reads_files(&fgb("far.fgb", grid)).unwrap().is_some());
        assert!(crs_reads_files(&fgb("clean.fgb", "GEOGCS[\"WGS 84\"]"))
            .unwrap()
            .is_none());
    }

    /// Regression (attack round 6 notes): fd 5's path is not replaced inside fd 57's.
    #[test]
    fn r6_unpin_replaces_whole_descriptor_numbers_only() {
        let text = "/proc/self/fd/5/a.tif, /proc/self/fd/57/b.tif, /proc/self/fd/5";
        assert_eq!(
            replace_fd_path(text, "/proc/self/fd/5", "/ws/in"),
            "/ws/in/a.tif, /proc/self/fd/57/b.tif, /ws/in"
        );
        assert_eq!(
            replace_fd_path(text, "/proc/self/fd/57", "/ws/other"),
            "/proc/self/fd/5/a.tif, /ws/other/b.tif, /proc/self/fd/5"
        );
        assert_eq!(
            replace_fd_path("no pins here", "/proc/self/fd/5", "/x"),
            "no pins here"
        );
    }

    #[test]
    fn locations_are_recognised() {
        for bad in [
            "/etc/passwd",
            "../x",
            "/vsistdout/",
            "http://127.0.0.1:8/x",
            "C:\\x",
            "~/x",
            "vsicurl",
        ] {
            assert!(looks_like_a_location(bad), "{bad}");
        }
        for fine in [
            "DEFLATE",
            "YES",
            "256",
            "1.5",
            "EPSG:4326",
            "AS_WKT",
            "SEMICOLON",
        ] {
            assert!(!looks_like_a_location(fine), "{fine}");
        }
    }

    #[test]
    fn cell_budget() {
        assert!(check_cells("input", 1000, 1000, 1).is_ok());
        assert!(check_cells("input", 100_000, 100_000, 1).is_err());
        assert!(check_cells("input", u64::MAX, u64::MAX, u64::MAX).is_err());
    }
}

#[cfg(test)]
mod grid_mentions {
    use crate::gdal::policy::crs_text::names_grid_or_parameter_file as names_grid_files;

    /// Regression (issue 21, attack round 5, F1): JSON escapes are decoded before the scan,
    /// the whole text is scanned (a key cut by a chunk's end, or after the first MiB, is
    /// found), and `tinshift` is a file-naming step; PROJ's built-in `@null` stays clean.
    #[test]
    fn the_whole_text_is_scanned_decoded() {
        use super::{crs_reads_files, json_unescape, TextScan};
        assert_eq!(
            json_unescape(r#"+nad\u0067rids=\/x \"q\""#),
            "+nadgrids=/x \"q\""
        );
        let mut scan = TextScan::new(json_unescape);
        assert!(scan
            .feed("{\"crs\": \"+proj=longlat +nad\\u00", false)
            .is_none());
        assert!(scan.feed("67rids   =  /outside/fifo\"}", true).is_some());
        let mut null = TextScan::new(|t| t.to_string());
        assert!(null
            .feed(&format!("{}+nadgrids=@nu", " ".repeat(300)), false)
            .is_none());
        assert!(null.feed("ll +no_defs", true).is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late.geojson");
        let padding = format!("{{\"pad\": \"{}\",", "x".repeat(3 << 20));
        std::fs::write(
            &path,
            format!("{padding} \"crs\": {{\"type\": \"name\", \"properties\": {{\"name\": \"+proj=longlat +nadgrids=/o/g\"}}}}}}"),
        )
        .unwrap();
        assert!(crs_reads_files(&path).unwrap().is_some());
        std::fs::write(&path, format!("{padding} \"crs\": {{\"type\": \"name\", \"properties\": {{\"name\": \"EPSG:4326\"}}}}}}")).unwrap();
        assert!(crs_reads_files(&path).unwrap().is_none());
        let tin = dir.path().join("tin.prj");
        std::fs::write(
            &tin,
            "BOUNDCRS[METHOD[\"PROJ-based operation method: +proj=tinshift +file=/o/t.json\"]]",
        )
        .unwrap();
        assert!(crs_reads_files(&tin).unwrap().is_some());
    }

    /// Regression (issue 11): GDAL stores EPSG:3857 with `+nadgrids=@null` (PROJ's built-in
    /// null grid), so every GeoPackage it wrote in Web Mercator was refused as naming a grid
    /// file. The null grid opens nothing; any other grid still counts.
    #[test]
    fn the_built_in_null_grid_is_not_a_file() {
        assert!(!names_grid_files(
            "+proj=merc+a=6378137+b=6378137+nadgrids=@null+wktext+no_defs"
        ));
        assert!(!names_grid_files(
            "extension[\"proj4\",\"+proj=merc+nadgrids=@null+no_defs\"]"
        ));
        assert!(names_grid_files(
            "+proj=longlat+nadgrids=/outside/fifo+no_defs"
        ));
        assert!(names_grid_files("+nadgrids=@null,/etc/shadow"));
        assert!(names_grid_files("+geoidgrids=egm96_15.gtx"));
        assert!(names_grid_files("parameterfile[\"x\",\"/etc/passwd\"]"));
        // Regression (attack round 14, R14-5): WKT1's datum extension and PROJJSON's string
        // parameter value name grid files too; the null grid still opens nothing.
        assert!(names_grid_files(
            "datum[\"x\",spheroid[\"c\",6378206.4,294.97],extension[\"proj4_grids\",\"/outside/fifo.gsb\"]]"
        ));
        assert!(!names_grid_files("extension[\"proj4_grids\",\"@null\"]"));
        // GDAL's own NAD27: bare grid names resolve in PROJ's data folder only.
        assert!(!names_grid_files(
            "extension[\"proj4_grids\",\"@conus,@alaska,@ntv2_0.gsb,@ntv1_can.dat\"]"
        ));
        let projjson = crate::gdal::policy::crs_text::crs_text_reads_files;
        assert!(projjson(
            r#"{"type": "BoundCRS", "transformation": {"parameters": [{"name": "Latitude and longitude difference file", "value": "/outside/fifo.gsb"}]}}"#
        )
        .is_some());
        assert!(
            projjson(r#"{"parameters": [{"name": "Scale factor", "value": 0.9996}]}"#).is_none()
        );
    }
}
