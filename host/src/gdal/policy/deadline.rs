//! Deadlines on GDAL and PROJ opens, and the bookkeeping of workers set aside.
//!
//! An open can block for good: a FIFO or device swapped in after the pre-open checks, a PROJ
//! grid on a file that never answers, a driver probing a file nobody checked. A blocked worker
//! would hold its pool slot forever, and a few of them would leave the read-only tools
//! unanswered. So the open phase of every GDAL job (the checks before the open, the open
//! itself and the checks after it, and every PROJ parse or transformation built from text) is
//! marked on the worker's thread ([`opening`]); the pool that runs the job
//! (`server::app::run_gdal`) watches that mark and, when an open passes
//! [`open_deadline`], fails the call with a clear error, adds a slot so the pool keeps its
//! size, and sets the worker aside. A worker set aside that ever finishes gives its slot to
//! nobody (the replacement already has it) and does nothing after its open: the guard's
//! [`Opening::done`] fails, [`crate::gdal::keep_going`] answers `false`, and no output is
//! committed. At most [`max_abandoned`] workers per pool are set aside; beyond that the pool
//! refuses new calls with a clear error rather than grow threads without bound, while the
//! other pools (the read-only tools' slots) keep answering.
//!
//! Long computations after the open are not under the deadline: they report progress and are
//! cancelled by the client.
//!
//! In debug builds only, `GDAL_MCP_TEST_PAUSE_AFTER_CHECKS_MS` makes every open sleep between
//! its checks and GDAL's open ([`pause_after_checks`]), so the end-to-end tests can swap a file
//! in that window and prove the race is closed. Release builds have no such hook.

use crate::gdal::GdalError;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long one open may take before its worker is set aside: 30 s. Opening a large VRT
/// mosaic or a remote-looking but local database takes a few seconds at most; reading pixels
/// is not an open. `GDAL_MCP_OPEN_DEADLINE_SECS` overrides it (seconds, fractions allowed).
pub const DEFAULT_OPEN_DEADLINE: Duration = Duration::from_secs(30);

/// Workers one pool may have set aside (blocked past the deadline) before it refuses new
/// calls: 8. `GDAL_MCP_MAX_ABANDONED_WORKERS` overrides it.
pub const DEFAULT_MAX_ABANDONED: usize = 8;

/// The open deadline in force.
pub fn open_deadline() -> Duration {
    static DEADLINE: OnceLock<Duration> = OnceLock::new();
    *DEADLINE.get_or_init(|| {
        std::env::var("GDAL_MCP_OPEN_DEADLINE_SECS")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e7)
            .map(Duration::from_secs_f64)
            .unwrap_or(DEFAULT_OPEN_DEADLINE)
    })
}

/// The cap on workers set aside per pool in force.
pub fn max_abandoned() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("GDAL_MCP_MAX_ABANDONED_WORKERS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_MAX_ABANDONED)
    })
}

/// What became of a job, as the worker and the waiting task agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Running,
    Finished,
    Abandoned,
}

#[derive(Debug)]
struct State {
    /// The open in progress: what it opens and since when.
    opening: Option<(String, Instant)>,
    fate: Fate,
}

/// What a job's worker is doing, shared between the worker and the task waiting for it.
#[derive(Debug)]
pub struct Watch {
    state: Mutex<State>,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                opening: None,
                fate: Fate::Running,
            }),
        }
    }
}

impl Watch {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The open in progress for longer than `deadline`, if any: what it opens.
    pub fn overdue(&self, deadline: Duration) -> Option<String> {
        let state = self.state();
        match &state.opening {
            Some((what, since)) if state.fate == Fate::Running && since.elapsed() > deadline => {
                Some(what.clone())
            }
            _ => None,
        }
    }

    /// Set the job aside if it is still running (`true`); `false` when it finished meanwhile.
    pub fn abandon(&self) -> bool {
        let mut state = self.state();
        if state.fate == Fate::Running {
            state.fate = Fate::Abandoned;
            true
        } else {
            false
        }
    }

    /// Mark the job finished (by its worker); `true` when it had been set aside.
    pub fn finish(&self) -> bool {
        let mut state = self.state();
        if state.fate == Fate::Abandoned {
            true
        } else {
            state.fate = Fate::Finished;
            false
        }
    }

    /// Whether the job was set aside.
    pub fn abandoned(&self) -> bool {
        self.state().fate == Fate::Abandoned
    }
}

thread_local! {
    /// The watch of the job running on this thread (none outside the server's pools).
    static WATCH: RefCell<Option<Arc<Watch>>> = const { RefCell::new(None) };
}

/// Attach `watch` to the job about to run on this thread (`None` when it ends).
pub fn watch_this_thread(watch: Option<Arc<Watch>>) {
    swap_watch(watch);
}

/// Attach `watch` to this thread, giving back the one it replaces (for [`crate::gdal::Job`]).
pub(in crate::gdal) fn swap_watch(watch: Option<Arc<Watch>>) -> Option<Arc<Watch>> {
    WATCH.with(|w| std::mem::replace(&mut *w.borrow_mut(), watch))
}

/// Whether the job on this thread was set aside after its deadline (it must stop).
pub fn set_aside() -> bool {
    WATCH.with(|w| w.borrow().as_ref().is_some_and(|w| w.abandoned()))
}

/// One open under the deadline, from [`opening`] to [`Opening::done`] (or drop). Opens nested
/// inside another (a VRT's sources, a CRS parsed while a file is opened) count from the
/// outermost one.
#[must_use = "the open is under the deadline until `done` is called or the guard dropped"]
pub struct Opening {
    watch: Option<Arc<Watch>>,
    what: String,
}

/// Mark the start of an open of `what` (a path, a CRS) on this thread.
pub fn opening(what: impl Into<String>) -> Opening {
    let what = what.into();
    let watch = WATCH.with(|w| w.borrow().clone());
    let owner = watch.filter(|watch| {
        let mut state = watch.state();
        if state.opening.is_some() {
            return false;
        }
        state.opening = Some((what.clone(), Instant::now()));
        true
    });
    Opening { watch: owner, what }
}

impl Opening {
    /// The open is over: fails when the job was set aside meanwhile (the call already
    /// answered with the deadline error; nothing may be read or written now).
    pub fn done(self) -> Result<(), GdalError> {
        if set_aside() {
            return Err(GdalError::Failed {
                operation: format!("opening {}", self.what),
                message: format!(
                    "it took longer than the {} s open deadline and the call was already \
                     answered",
                    open_deadline().as_secs_f64()
                ),
            });
        }
        Ok(())
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(watch) = &self.watch {
            watch.state().opening = None;
        }
    }
}

/// Workers set aside per pool, process-wide.
fn counts() -> std::sync::MutexGuard<'static, BTreeMap<&'static str, usize>> {
    static COUNTS: Mutex<BTreeMap<&'static str, usize>> = Mutex::new(BTreeMap::new());
    COUNTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Workers of `pool` set aside and not finished.
pub fn abandoned_in(pool: &'static str) -> usize {
    counts().get(pool).copied().unwrap_or(0)
}

/// Whether any pool has a worker set aside and not finished (the process must not wait for it
/// when it exits).
pub fn any_abandoned() -> bool {
    counts().values().any(|n| *n > 0)
}

/// Count one more worker of `pool` set aside.
pub fn count_abandoned(pool: &'static str) {
    *counts().entry(pool).or_insert(0) += 1;
}

/// A worker of `pool` set aside finished (or was not set aside after all).
pub fn uncount_abandoned(pool: &'static str) {
    if let Some(n) = counts().get_mut(pool) {
        *n = n.saturating_sub(1);
    }
}

/// The error of a call whose open passed the deadline.
pub fn overdue_error(what: &str) -> GdalError {
    GdalError::Failed {
        operation: format!("opening {what}"),
        message: format!(
            "GDAL did not finish opening it within the {} s open deadline \
             (GDAL_MCP_OPEN_DEADLINE_SECS): a file it reads blocks (a FIFO or device swapped \
             in after the checks, a grid that never answers) or is far too slow. The worker \
             was set aside and replaced; nothing was written. Check the file and what it \
             references",
            open_deadline().as_secs_f64()
        ),
    }
}

/// The error of a call refused because `pool` has `stuck` workers set aside.
pub fn saturated_error(pool: &str, stuck: usize) -> GdalError {
    GdalError::Failed {
        operation: format!("starting a job on the {pool} workers"),
        message: format!(
            "{stuck} of its workers are blocked in opens that passed the open deadline (the \
             cap is {}, GDAL_MCP_MAX_ABANDONED_WORKERS), so it takes no new calls until they \
             end or the server restarts; remove the FIFOs or devices the earlier calls \
             named. The read-only tools keep their own workers",
            max_abandoned()
        ),
    }
}

/// Debug builds only: sleep `GDAL_MCP_TEST_PAUSE_AFTER_CHECKS_MS` between an open's checks and
/// GDAL's open of `path`, so that the end-to-end tests can swap the file in that window; with
/// `GDAL_MCP_TEST_CHECKED_LOG` set too, append `path` to that file first, so that a test knows
/// when to swap. A no-op in release builds (the code is not compiled in).
pub fn pause_after_checks(path: &std::path::Path) {
    #[cfg(debug_assertions)]
    {
        static PAUSE: OnceLock<Option<Duration>> = OnceLock::new();
        let pause = PAUSE.get_or_init(|| {
            std::env::var("GDAL_MCP_TEST_PAUSE_AFTER_CHECKS_MS")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        });
        let Some(pause) = pause else {
            return;
        };
        if let Some(log) = std::env::var_os("GDAL_MCP_TEST_CHECKED_LOG") {
            use std::io::Write;
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut f| f.write_all(format!("{}\n", path.display()).as_bytes()));
        }
        std::thread::sleep(*pause);
    }
    #[cfg(not(debug_assertions))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_is_overdue_only_while_it_runs_past_the_deadline() {
        let watch = Arc::new(Watch::default());
        watch_this_thread(Some(watch.clone()));
        assert_eq!(watch.overdue(Duration::ZERO), None, "nothing is opening");
        let outer = opening("/ws/a.vrt");
        let inner = opening("/ws/source.tif");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            watch.overdue(Duration::ZERO).as_deref(),
            Some("/ws/a.vrt"),
            "nested opens count from the outermost"
        );
        assert_eq!(watch.overdue(Duration::from_secs(60)), None);
        assert!(inner.done().is_ok());
        assert!(
            watch.overdue(Duration::ZERO).is_some(),
            "the outer open runs"
        );
        assert!(outer.done().is_ok());
        assert_eq!(watch.overdue(Duration::ZERO), None, "the open is over");
        watch_this_thread(None);
    }

    #[test]
    fn a_job_set_aside_stops_at_the_end_of_its_open() {
        let watch = Arc::new(Watch::default());
        watch_this_thread(Some(watch.clone()));
        let open = opening("/ws/fifo.tif");
        assert!(watch.abandon(), "still running: set aside");
        assert!(!watch.abandon(), "only once");
        assert!(open.done().is_err(), "nothing may be read after the open");
        assert!(!crate::gdal::keep_going(0.5), "host loops stop too");
        assert!(watch.finish(), "the worker learns it was set aside");
        watch_this_thread(None);

        let finished = Watch::default();
        assert!(!finished.finish());
        assert!(!finished.abandon(), "a finished job is never set aside");
    }
}
