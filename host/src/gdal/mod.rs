//! GDAL in process, through the `gdal` crate and `gdal-sys` over the system libgdal.
//!
//! GDAL calls are blocking C: every runner here is synchronous and is run on a blocking worker
//! ([`run_blocking`]) with one dataset handle per job. Errors are captured per call with a
//! thread-local error handler ([`ErrorCapture`]), because the global handler is process-wide.
//!
//! The room is arranged by what depends on what, lowest first:
//!
//! * this module: the worker, the per-call error capture, a job's thread-local settings
//!   ([`Job`]), progress and cancellation, C argument vectors;
//! * [`policy`]: the trust boundary around GDAL, what it may open and read, how long an open may
//!   take and how much memory a read may allocate, checked before and after every open;
//! * [`facts`]: what the host reads from the data for the gate and for the reports (dataset
//!   facts, where georeferencing comes from, PROJ's operation between two CRSs, whether an
//!   output encoding loses values);
//! * [`output`] (atomic, staged writes) and [`programs`] (GDAL's command-line programs in
//!   process), which every runner that writes shares;
//! * [`raster`] and [`vector`]: the runners behind the tools, one module per tool or family.

pub mod facts;
pub mod output;
pub mod policy;
pub mod programs;
pub mod raster;
pub mod vector;

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::marker::PhantomData;

/// What went wrong in a GDAL runner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GdalError {
    /// GDAL reported a failure.
    #[error("{operation} failed: {message}")]
    Failed { operation: String, message: String },
    /// The request cannot work as given (bad driver, option, CRS, band...): an argument error
    /// found at the GDAL level. The message names the argument and how to fix it.
    #[error("{0}")]
    Arguments(String),
    /// The data contradicts itself (a sidecar's georeferencing against the file's own, a
    /// container with several layers and none named): refused with the candidates and the
    /// parameter that chooses between them.
    #[error("{message}")]
    Conflict {
        message: String,
        parameter: String,
        candidates: serde_json::Value,
    },
    /// The host's own numeric core (aggregation), run over data read with GDAL, failed.
    #[error("{0}")]
    Algorithm(String),
    /// Filesystem trouble around the output.
    #[error("{operation}: {source}")]
    Io {
        operation: String,
        source: std::io::Error,
    },
    /// The blocking worker died.
    #[error("GDAL worker failed: {0}")]
    Worker(String),
    /// A heavy step's memory does not fit the budget all calls share (`crate::budget`).
    #[error(transparent)]
    Memory(#[from] crate::budget::BudgetError),
}

/// Declare `band`'s unit (`ft`, `m`): the crate has no setter. `false` when GDAL refused it
/// or the text holds a NUL byte.
pub fn set_band_unit(band: &gdal::raster::RasterBand<'_>, unit: &str) -> bool {
    let Ok(unit) = std::ffi::CString::new(unit) else {
        return false;
    };
    // SAFETY: a live band handle and a NUL-terminated string GDAL copies.
    let set = unsafe { gdal_sys::GDALSetRasterUnitType(band.c_rasterband(), unit.as_ptr()) };
    set == gdal_sys::CPLErr::CE_None
}

/// GDAL's raster block cache, in MB. GDAL's default (5 % of RAM) would keep a whole DEM in
/// cache on top of the copy the hydrology runners hold; whole-band reads and writes stream
/// through blocks, so a small cache costs nothing. `GDAL_CACHEMAX` in the environment wins.
pub const BLOCK_CACHE_MB: &str = "32";

/// Register every GDAL driver and set the block cache, once per process. Called by every GDAL
/// job, so an idle server never pays for it (registration touches ~10 MB of libgdal and takes
/// tens of milliseconds).
pub fn init() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        if std::env::var_os("GDAL_CACHEMAX").is_none() {
            let _ = gdal::config::set_config_option("GDAL_CACHEMAX", BLOCK_CACHE_MB);
        }
        gdal::DriverManager::register_all();
        policy::apply_process_switches();
    });
}

/// The versions of GDAL and PROJ this process runs with, e.g. `("3.6.2", "9.1.1")`.
pub fn versions() -> (String, String) {
    // SAFETY: GDALVersionInfo returns a pointer to a static, NUL-terminated string owned by
    // GDAL; OSRGetPROJVersion writes three ints through valid pointers.
    let gdal = unsafe {
        let key = c"RELEASE_NAME";
        let text = gdal_sys::GDALVersionInfo(key.as_ptr());
        if text.is_null() {
            "unknown".to_string()
        } else {
            std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned()
        }
    };
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    unsafe { gdal_sys::OSRGetPROJVersion(&mut major, &mut minor, &mut patch) };
    (gdal, format!("{major}.{minor}.{patch}"))
}

/// Run a blocking GDAL job on tokio's blocking pool.
pub async fn run_blocking<T, F>(job: F) -> Result<T, GdalError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, GdalError> + Send + 'static,
{
    tokio::task::spawn_blocking(|| {
        init();
        job()
    })
    .await
    .map_err(|e| GdalError::Worker(e.to_string()))?
}

/// A job's progress sink: fraction done in, "go on" out.
type ProgressSink = Box<dyn Fn(f64) -> bool>;

thread_local! {
    /// The progress sink of the job running on this thread.
    static PROGRESS: RefCell<Option<ProgressSink>> = const { RefCell::new(None) };
}

/// Run `job` with `progress` receiving GDAL's progress on this thread; when it answers
/// `false` (the client cancelled), GDAL stops the running program and nothing is committed.
pub fn with_progress<T>(progress: impl Fn(f64) -> bool + 'static, job: impl FnOnce() -> T) -> T {
    let _job = Job::new().progress(progress).enter();
    job()
}

fn swap_progress(progress: Option<ProgressSink>) -> Option<ProgressSink> {
    PROGRESS.with(|p| std::mem::replace(&mut *p.borrow_mut(), progress))
}

/// The thread-local settings of a job on a GDAL worker, which no runner's signature shows:
/// the job's deadline watch ([`deadline`]), the caller's georeferencing choice ([`georef`]),
/// its progress sink, its write rules ([`output`]), and the folders it pinned ([`policy`]).
/// [`Job::enter`] puts the ones named in force and returns the [`JobGuard`] that gives each
/// back its previous value (and releases the pins, when asked) on drop: an early return, an
/// error or a cancelled job leaves nothing to the next job on that worker.
#[derive(Default)]
#[must_use = "nothing is in force until the job is entered"]
pub struct Job {
    watch: Option<Option<std::sync::Arc<policy::deadline::Watch>>>,
    georef: Option<Option<facts::georef::GeorefSource>>,
    progress: Option<Option<ProgressSink>>,
    rules: Option<Option<output::WriteRules>>,
    release_pins: bool,
}

impl Job {
    /// A job that changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The deadline watch of the job (the worker's).
    pub fn watch(mut self, watch: std::sync::Arc<policy::deadline::Watch>) -> Self {
        self.watch = Some(Some(watch));
        self
    }

    /// The caller's georeferencing choice.
    pub fn georef(mut self, choice: Option<facts::georef::GeorefSource>) -> Self {
        self.georef = Some(choice);
        self
    }

    /// The sink of GDAL's progress (and of the host loops' cancellation checks).
    pub fn progress(mut self, progress: impl Fn(f64) -> bool + 'static) -> Self {
        self.progress = Some(Some(Box::new(progress)));
        self
    }

    /// The write rules every commit checks.
    pub fn rules(mut self, rules: output::WriteRules) -> Self {
        self.rules = Some(Some(rules));
        self
    }

    /// Release the folders pinned during the job when it ends (the worker's outermost job).
    pub fn releasing_pins(mut self) -> Self {
        self.release_pins = true;
        self
    }

    /// Put the settings in force on this thread until the guard is dropped.
    pub fn enter(self) -> JobGuard {
        JobGuard {
            previous: Job {
                watch: self.watch.map(policy::deadline::swap_watch),
                georef: self.georef.map(facts::georef::swap_choice),
                progress: self.progress.map(swap_progress),
                rules: self.rules.map(output::swap_rules),
                release_pins: self.release_pins,
            },
        }
    }
}

/// The settings a [`Job`] replaced, given back on drop (in the reverse order of entry).
#[must_use = "the job's settings end as soon as the guard is dropped"]
pub struct JobGuard {
    previous: Job,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let previous = std::mem::take(&mut self.previous);
        if previous.release_pins {
            policy::release_pins();
        }
        if let Some(rules) = previous.rules {
            output::swap_rules(rules);
        }
        if let Some(progress) = previous.progress {
            swap_progress(progress);
        }
        if let Some(choice) = previous.georef {
            facts::georef::swap_choice(choice);
        }
        if let Some(watch) = previous.watch {
            policy::deadline::swap_watch(watch);
        }
    }
}

/// Report `fraction` done to this thread's progress sink; `false` means the client cancelled
/// and the host's own loops (composite strips, zonal zones) must stop.
pub fn keep_going(fraction: f64) -> bool {
    if policy::deadline::set_aside() {
        return false;
    }
    PROGRESS.with(|p| match p.try_borrow() {
        Ok(sink) => sink.as_ref().is_none_or(|sink| sink(fraction)),
        Err(_) => true,
    })
}

/// The error a host loop returns when the client cancelled (the gated step reports it as
/// `cancelled`).
pub fn cancelled(operation: &str) -> GdalError {
    GdalError::Failed {
        operation: operation.to_string(),
        message: "cancelled by the client".to_string(),
    }
}

/// GDAL's progress callback: relays to this thread's sink and stops GDAL on cancellation.
///
/// # Safety
/// Called by GDAL with its own arguments; it reads none of the pointers.
pub unsafe extern "C" fn progress_callback(
    complete: f64,
    _message: *const c_char,
    _data: *mut c_void,
) -> std::ffi::c_int {
    if policy::deadline::set_aside() {
        return 0;
    }
    let go_on = PROGRESS.with(|p| match p.try_borrow() {
        Ok(sink) => sink.as_ref().is_none_or(|sink| sink(complete)),
        Err(_) => true,
    });
    std::ffi::c_int::from(go_on)
}

/// One message GDAL emitted during a captured call.
#[derive(Debug, Clone)]
pub struct CplMessage {
    /// `warning`, `failure` or `fatal`.
    pub class: &'static str,
    pub number: i32,
    pub message: String,
}

type Sink = RefCell<Vec<CplMessage>>;

/// Captures GDAL's error messages on this thread while alive (CPLPushErrorHandlerEx /
/// CPLPopErrorHandler). Not `Send`: the handler stack is per thread.
pub struct ErrorCapture {
    sink: Box<Sink>,
    _thread_bound: PhantomData<*const ()>,
}

unsafe extern "C" fn capture_handler(
    class: gdal_sys::CPLErr::Type,
    number: i32,
    msg: *const c_char,
) {
    // SAFETY: GDAL passes back the pointer given to CPLPushErrorHandlerEx, which points at the
    // boxed sink owned by the live ErrorCapture that pushed this handler on this thread.
    let sink = unsafe { gdal_sys::CPLGetErrorHandlerUserData() } as *const Sink;
    if sink.is_null() || msg.is_null() {
        return;
    }
    let class = match class {
        gdal_sys::CPLErr::CE_Warning => "warning",
        gdal_sys::CPLErr::CE_Failure => "failure",
        gdal_sys::CPLErr::CE_Fatal => "fatal",
        _ => return,
    };
    // SAFETY: msg is a NUL-terminated string owned by GDAL for the duration of the call.
    let message = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: see above; the sink outlives the handler registration.
    if let Ok(mut messages) = unsafe { &*sink }.try_borrow_mut() {
        messages.push(CplMessage {
            class,
            number,
            message,
        });
    }
}

impl ErrorCapture {
    /// Start capturing on the current thread.
    pub fn start() -> Self {
        let sink: Box<Sink> = Box::new(RefCell::new(Vec::new()));
        let user_data = &*sink as *const Sink as *mut c_void;
        // SAFETY: the handler only dereferences user_data while this capture is alive; Drop
        // pops the handler before the box is freed.
        unsafe {
            gdal_sys::CPLErrorReset();
            gdal_sys::CPLPushErrorHandlerEx(Some(capture_handler), user_data);
        }
        Self {
            sink,
            _thread_bound: PhantomData,
        }
    }

    /// Everything captured so far.
    pub fn messages(&self) -> Vec<CplMessage> {
        self.sink.borrow().clone()
    }

    /// The failure messages joined for humans, or `fallback` when GDAL said nothing.
    pub fn failure_text(&self, fallback: &str) -> String {
        let messages = self.messages();
        let failures: Vec<&str> = messages
            .iter()
            .filter(|m| m.class != "warning")
            .map(|m| m.message.as_str())
            .collect();
        let chosen: Vec<&str> = if failures.is_empty() {
            messages.iter().map(|m| m.message.as_str()).collect()
        } else {
            failures
        };
        if chosen.is_empty() {
            fallback.to_string()
        } else {
            chosen.join("; ")
        }
    }

    /// The error of a step of `operation` that failed: GDAL's failure messages, or the step's
    /// own words when GDAL said nothing.
    pub fn failing(&self, operation: String) -> impl Fn(&str) -> GdalError + '_ {
        move |what: &str| GdalError::Failed {
            operation: operation.clone(),
            message: self.failure_text(what),
        }
    }

    /// The warnings, for receipts.
    pub fn warnings(&self) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter(|m| m.class == "warning")
            .map(|m| m.message)
            .collect()
    }
}

impl Drop for ErrorCapture {
    fn drop(&mut self) {
        // SAFETY: pops the handler this capture pushed on this thread.
        unsafe { gdal_sys::CPLPopErrorHandler() };
    }
}

/// A C `argv` (NULL-terminated `char*` array) that owns its strings.
pub struct CArgv {
    _strings: Vec<CString>,
    pointers: Vec<*mut c_char>,
}

impl CArgv {
    /// Convert arguments; a NUL byte inside one is an invalid request.
    pub fn new(args: &[String]) -> Result<Self, GdalError> {
        let strings = args
            .iter()
            .map(|a| cstring(a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut pointers: Vec<*mut c_char> =
            strings.iter().map(|s| s.as_ptr() as *mut c_char).collect();
        pointers.push(std::ptr::null_mut());
        Ok(Self {
            _strings: strings,
            pointers,
        })
    }

    /// The NULL-terminated array; valid while `self` lives.
    pub fn as_mut_ptr(&mut self) -> *mut *mut c_char {
        self.pointers.as_mut_ptr()
    }
}

/// A `CString`, refusing interior NUL bytes with a clear message.
pub use crate::workspace::{extension_of, stem_of};

/// A file's name and its stem (the name without its last extension), as text: what drivers
/// build their sidecars' names from.
pub fn name_and_stem(path: &std::path::Path) -> Option<(String, String)> {
    let name = path.file_name()?.to_string_lossy().to_string();
    let stem = stem_of(path)
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    Some((name, stem))
}

pub fn cstring(text: &str) -> Result<CString, GdalError> {
    CString::new(text).map_err(|_| GdalError::Arguments(format!("\"{text}\" contains a NUL byte")))
}

/// The driver holds data of `capability` (`DCAP_RASTER`, `DCAP_VECTOR`) and can write it
/// (it creates files, or copies a dataset into one).
pub fn driver_writes(driver: &gdal::Driver, capability: &str) -> bool {
    use gdal::Metadata;
    driver.metadata_item(capability, "").is_some()
        && (driver.metadata_item("DCAP_CREATE", "").is_some()
            || driver.metadata_item("DCAP_CREATECOPY", "").is_some())
}

/// The strings of a NULL-terminated list of C strings (GDAL's `char **`, PROJ's string lists),
/// copied; freeing the list is the caller's. A null list is empty.
///
/// # Safety
/// `list` is null, or points to a NULL-terminated array of NUL-terminated strings that stays
/// valid for the call.
pub unsafe fn string_list(list: *const *mut c_char) -> Vec<String> {
    let mut strings = Vec::new();
    if list.is_null() {
        return strings;
    }
    let mut i = 0;
    loop {
        // SAFETY: the caller's guarantee: every entry up to the terminating NULL is readable.
        let entry = unsafe { *list.add(i) };
        if entry.is_null() {
            return strings;
        }
        // SAFETY: a non-null entry is a NUL-terminated string.
        strings.push(
            unsafe { CStr::from_ptr(entry) }
                .to_string_lossy()
                .into_owned(),
        );
        i += 1;
    }
}

/// A feature's geometry, or `None` when it has none: the `gdal` crate's `Feature::geometry`
/// answers `Some` for a null geometry, and every OGR call on it then failed with "Pointer
/// 'hGeom' is NULL" on stderr and answered a default (attack round 20, R20-B8 and B9 were
/// found beside it).
pub fn geometry_of<'a>(feature: &'a gdal::vector::Feature) -> Option<&'a gdal::vector::Geometry> {
    feature
        .geometry()
        // SAFETY: only reads the handle the feature owns; nothing is dereferenced.
        .filter(|geometry| !unsafe { geometry.c_geometry() }.is_null())
}

/// The vertices of a geometry (every ring and part; curves as stored): what the geometry
/// budgets count, in the facts' checks and in the vector tools.
pub fn vertex_count(geometry: &gdal::vector::Geometry) -> u64 {
    fn count(geometry: &gdal::vector::Geometry, depth: usize) -> u64 {
        let parts = geometry.geometry_count();
        if parts == 0 || depth > 32 {
            return geometry.point_count() as u64;
        }
        (0..parts)
            .map(|i| count(&geometry.get_geometry(i), depth + 1))
            .sum()
    }
    count(geometry, 0)
}

#[cfg(test)]
mod tests {
    use super::facts::georef::{choice, GeorefSource};
    use super::*;

    /// Regression (issue 19, the thread-local settings no signature shows): a job that returns
    /// an error early through `?` gives every setting back, so the next job on the worker
    /// starts clean; a nested job gives back the outer one's values, not nothing.
    #[test]
    fn a_job_that_fails_early_leaves_no_setting_behind() {
        fn failing(inner: bool) -> Result<(), String> {
            let _job = Job::new()
                .georef(Some(GeorefSource::WorldFile))
                .progress(|_| false)
                .rules(output::WriteRules::for_call(&[], &[], false, Vec::new()))
                .enter();
            assert_eq!(choice(), Some(GeorefSource::WorldFile));
            assert!(!keep_going(0.5), "the job's sink answers");
            assert!(output::rules_in_force());
            if inner {
                let nested = Job::new().georef(Some(GeorefSource::AuxXml)).enter();
                assert_eq!(choice(), Some(GeorefSource::AuxXml));
                drop(nested);
                assert_eq!(choice(), Some(GeorefSource::WorldFile), "the outer choice");
            }
            Err("the job failed".to_string())?;
            Ok(())
        }
        for inner in [false, true] {
            assert_eq!(choice(), None);
            assert!(failing(inner).is_err());
            assert_eq!(choice(), None, "the choice leaked");
            assert!(keep_going(0.5), "the progress sink leaked");
            assert!(!output::rules_in_force(), "the write rules leaked");
        }
        // The wrappers the runners use go through the same guard.
        let inside = facts::georef::with_choice(Some(GeorefSource::Internal), choice);
        assert_eq!(inside, Some(GeorefSource::Internal));
        assert_eq!(choice(), None);
    }

    /// Issue 19: `facts`, `georef` and `policy` imported each other (facts → policy → facts,
    /// facts → georef → policy). The rooms now depend downwards only (docs/architecture.md,
    /// "The GDAL rooms"): no code in `policy` names `facts`, and neither room names a runner,
    /// except the two older edges listed here.
    #[test]
    fn the_gdal_rooms_depend_downwards() {
        let known = ["raster::overviews::open", "vector::table::"];
        let rooms = [
            ("policy", &["facts", "raster", "vector"][..]),
            ("facts", &["raster", "vector"][..]),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gdal");
        let mut upward = Vec::new();
        for (room, above) in rooms {
            let mut files: Vec<_> = std::fs::read_dir(root.join(room))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect();
            files.sort();
            assert!(files.len() > 2, "{room}: {files:?}");
            for file in files {
                let source = std::fs::read_to_string(&file).unwrap();
                for (number, line) in source.lines().enumerate() {
                    let code = line.trim_start();
                    if code.starts_with("//") || known.iter().any(|k| code.contains(k)) {
                        continue;
                    }
                    for name in above {
                        if code.contains(&format!("crate::gdal::{name}"))
                            || code.contains(&format!("super::{name}"))
                        {
                            upward.push(format!("{}:{}: {code}", file.display(), number + 1));
                        }
                    }
                }
            }
        }
        assert!(upward.is_empty(), "{upward:#?}");
    }
}
