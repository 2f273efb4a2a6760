//! The one memory budget that every heavy step of every call shares (issue 21: eight
//! concurrent `vector_measure` calls took 4 GB between them).
//!
//! Before a heavy step allocates (band-math windows, a vector layer's features, a whole-band
//! grid for hydrology or statistics, a zone's window, a table), it reserves its estimate, in
//! bytes, from the process-wide budget, and the [`Reservation`] gives the bytes back when it is
//! dropped. Estimates come from what is known before the allocation: cells times bytes per
//! cell, features and vertices counted as they are read.
//!
//! A reservation that does not fit now waits for others to finish, at most
//! [`DEFAULT_WAIT`] (`GDAL_MCP_MEMORY_WAIT_MS`), then fails with an error that names the
//! estimate, what others hold, the budget and `GDAL_MCP_MEMORY_BUDGET_BYTES`. One larger than the
//! whole budget fails at once. The budget is `GDAL_MCP_MEMORY_BUDGET_BYTES`, else a quarter of
//! the memory this process may use (physical memory, or the cgroup's limit when lower),
//! capped at [`DEFAULT_CAP`].

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The variable that sets the budget, in bytes.
pub const BUDGET_VARIABLE: &str = "GDAL_MCP_MEMORY_BUDGET_BYTES";
/// The variable that sets how long a reservation waits for room, in milliseconds.
pub const WAIT_VARIABLE: &str = "GDAL_MCP_MEMORY_WAIT_MS";
/// The default budget is this fraction (1/N) of the memory the process may use...
pub const DEFAULT_DIVISOR: u64 = 4;
/// ...at most this much...
pub const DEFAULT_CAP: u64 = 4 << 30;
/// ...and at least this much (a machine that cannot say how much memory it has).
pub const DEFAULT_FLOOR: u64 = 256 << 20;
/// How long a reservation waits for other calls to give memory back.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);

/// Why a heavy step may not allocate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BudgetError {
    /// The estimate alone is above the whole budget: the call can never run as asked.
    TooLarge {
        what: String,
        bytes: u64,
        budget: u64,
    },
    /// Other calls hold too much of the budget, and did not give enough back in time.
    Busy {
        what: String,
        bytes: u64,
        held: u64,
        budget: u64,
        waited: Duration,
    },
}

impl std::fmt::Display for BudgetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetError::TooLarge {
                what,
                bytes,
                budget,
            } => write!(
                f,
                "{what} needs an estimated {} of memory, more than the server's whole memory \
                 budget of {} shared by all calls ({BUDGET_VARIABLE}); nothing was written: make \
                 the call smaller (a window, a clip, a coarser resolution) or raise \
                 {BUDGET_VARIABLE}",
                mib(*bytes),
                mib(*budget)
            ),
            BudgetError::Busy {
                what,
                bytes,
                held,
                budget,
                waited,
            } => write!(
                f,
                "{what} needs an estimated {} of memory; other calls in flight hold {} of the \
                 server's memory budget of {} ({BUDGET_VARIABLE}) and did not free enough \
                 within {} ms ({WAIT_VARIABLE}); nothing was written: retry when they have \
                 finished, make the call smaller, or raise {BUDGET_VARIABLE}",
                mib(*bytes),
                mib(*held),
                mib(*budget),
                waited.as_millis()
            ),
        }
    }
}

impl std::error::Error for BudgetError {}

/// `bytes` as MiB with one decimal, and the exact count.
fn mib(bytes: u64) -> String {
    format!(
        "{:.1} MiB ({bytes} bytes)",
        bytes as f64 / f64::from(1u32 << 20)
    )
}

/// A budget of bytes that reservations take from and give back to.
#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    wait: Duration,
    held: Mutex<u64>,
    freed: Condvar,
}

impl MemoryBudget {
    /// A budget of `total` bytes, whose reservations wait at most `wait` for room.
    pub const fn new(total: u64, wait: Duration) -> Self {
        Self {
            total,
            wait,
            held: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    /// The budget, in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes held by reservations now.
    pub fn held(&self) -> u64 {
        self.held.lock().map_or(0, |held| *held)
    }

    /// Reserve `bytes` for `what` (named in the error), waiting for room at most the budget's
    /// wait. Zero bytes reserve nothing.
    pub fn reserve(&self, what: &str, bytes: u64) -> Result<Reservation<'_>, BudgetError> {
        let mut reservation = self.start(what);
        reservation.grow(bytes)?;
        Ok(reservation)
    }

    /// A reservation of nothing yet, for `what`, to [`Reservation::cover`] as work goes on.
    pub fn start(&self, what: &str) -> Reservation<'_> {
        Reservation {
            budget: self,
            what: what.to_string(),
            bytes: 0,
        }
    }

    /// Take `bytes` from the budget, waiting at most the budget's wait for room.
    fn take(&self, what: &str, bytes: u64, already: u64) -> Result<(), BudgetError> {
        if bytes == 0 {
            return Ok(());
        }
        let wanted = bytes.saturating_add(already);
        if wanted > self.total {
            return Err(BudgetError::TooLarge {
                what: what.to_string(),
                bytes: wanted,
                budget: self.total,
            });
        }
        let started = Instant::now();
        // A poisoned lock means a thread panicked while holding it; the count is still a
        // number, so keep using it.
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if held.saturating_add(bytes) <= self.total {
                *held += bytes;
                return Ok(());
            }
            let waited = started.elapsed();
            let Some(left) = self.wait.checked_sub(waited).filter(|l| !l.is_zero()) else {
                return Err(BudgetError::Busy {
                    what: what.to_string(),
                    bytes: wanted,
                    held: held.saturating_sub(already),
                    budget: self.total,
                    waited,
                });
            };
            held = match self.freed.wait_timeout(held, left) {
                Ok((guard, _)) => guard,
                Err(p) => p.into_inner().0,
            };
        }
    }

    fn give_back(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        *held = held.saturating_sub(bytes);
        drop(held);
        self.freed.notify_all();
    }
}

/// Bytes taken from a [`MemoryBudget`], given back when dropped.
#[derive(Debug)]
#[must_use = "the bytes are given back as soon as the reservation is dropped"]
pub struct Reservation<'a> {
    budget: &'a MemoryBudget,
    what: String,
    bytes: u64,
}

impl Reservation<'_> {
    /// Bytes held by this reservation.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Take `more` bytes too (a layer read further than expected), waiting as [`MemoryBudget::reserve`] does.
    pub fn grow(&mut self, more: u64) -> Result<(), BudgetError> {
        self.budget.take(&self.what, more, self.bytes)?;
        self.bytes += more;
        Ok(())
    }

    /// Hold at least `bytes` in all (growing by the difference; never shrinks).
    pub fn grow_to(&mut self, bytes: u64) -> Result<(), BudgetError> {
        self.grow(bytes.saturating_sub(self.bytes))
    }
}

impl Reservation<'_> {
    /// Hold at least `need` bytes, taking some more than asked when it grows (an eighth, and
    /// 1 MiB) so that a layer read feature by feature takes the lock rarely; never more than
    /// the whole budget when `need` fits in it.
    pub fn cover(&mut self, need: u64) -> Result<(), BudgetError> {
        if need <= self.bytes {
            return Ok(());
        }
        let ahead = need.saturating_add(need / 8).saturating_add(1 << 20);
        let target = if need <= self.budget.total {
            ahead.min(self.budget.total)
        } else {
            need
        };
        self.grow_to(target)
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// The memory this process may use: physical memory, or the cgroup's limit when lower.
fn usable_memory() -> Option<u64> {
    // SAFETY: sysconf only reads system constants.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = (pages > 0 && page > 0).then(|| (pages as u64).saturating_mul(page as u64));
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
    });
    match (physical, cgroup) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

/// The default budget for a process that may use `usable` bytes.
pub fn default_budget(usable: Option<u64>) -> u64 {
    usable
        .map_or(DEFAULT_FLOOR, |u| u / DEFAULT_DIVISOR)
        .clamp(DEFAULT_FLOOR, DEFAULT_CAP)
}

/// The process-wide budget: from the environment, read once.
pub fn global() -> &'static MemoryBudget {
    static GLOBAL: OnceLock<MemoryBudget> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let read = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let total = read(BUDGET_VARIABLE)
            .filter(|v| *v > 0)
            .unwrap_or_else(|| default_budget(usable_memory()));
        let wait = read(WAIT_VARIABLE).map_or(DEFAULT_WAIT, Duration::from_millis);
        tracing::debug!(bytes = total, "memory budget shared by heavy steps");
        MemoryBudget::new(total, wait)
    })
}

/// A reservation of nothing yet from the process-wide budget (see [`Reservation::cover`]).
pub fn start(what: &str) -> Reservation<'static> {
    global().start(what)
}

/// Reserve `bytes` for `what` from the process-wide budget.
pub fn reserve(what: &str, bytes: u64) -> Result<Reservation<'static>, BudgetError> {
    global().reserve(what, bytes)
}

/// A budget the operator sets in the environment: `variable` as a positive whole number,
/// else `default` (unset, zero or anything else keeps the default). Every per-call budget
/// (cells, features, vertices, LIKE comparisons, nearest pairs, hashing) reads its override
/// here, once, through its own `OnceLock`.
pub fn setting(variable: &str, default: u64) -> u64 {
    std::env::var(variable)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

/// Bytes a grid of `cells` cells of `bytes_per_cell` bytes holds, times `copies` (the grids a
/// step holds at once), saturating.
pub fn grid_bytes(cells: u64, bytes_per_cell: u64, copies: u64) -> u64 {
    cells
        .saturating_mul(bytes_per_cell)
        .saturating_mul(copies.max(1))
}

/// Bytes a vector layer held in memory takes per feature (the feature, its field values, the
/// geometry object), besides its vertices.
pub const BYTES_PER_FEATURE: u64 = 512;
/// Bytes per vertex held: x, y, z as doubles in GDAL's geometry, and the copy GEOS works on.
pub const BYTES_PER_VERTEX: u64 = 48;

/// Bytes of `features` features holding `vertices` vertices, read into memory.
pub fn vector_bytes(features: u64, vertices: u64) -> u64 {
    features
        .saturating_mul(BYTES_PER_FEATURE)
        .saturating_add(vertices.saturating_mul(BYTES_PER_VERTEX))
}

/// The memory a JSON value (a call's `arguments`, a request's `_meta`) holds once parsed by
/// serde_json: every value is a [`Value`], a string or key adds
/// its bytes, an object entry its node. Counted so, not as text: `[]` is 2 bytes of text and
/// 32 of memory, and a 1.36 MB line of 340,000 of them held 13.7 MB (attack round 11, R11-1).
/// An array's slots count twice (a parsed `Vec` grows by doubling), and an object's entries
/// live in B-tree nodes of 11 slots of about 632 bytes, at least half full past the root: a
/// one-key object `{"a":0}` holds a whole node (attack round 12, R12-7: counted at 113 bytes,
/// such arguments held 6.6 times the bound).
pub fn json_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    const VALUE: usize = std::mem::size_of::<Value>();
    VALUE
        + match value {
            Value::String(s) => s.len(),
            Value::Array(items) => {
                items.len() * VALUE + items.iter().map(json_bytes).sum::<usize>()
            }
            Value::Object(map) => json_entries_bytes(map.iter()),
            _ => 0,
        }
}

/// The memory of a JSON object's entries once parsed (a [`serde_json::Map`], or a map of
/// values such as a request's `inputResponses`), as [`json_bytes`] counts an object's.
pub fn json_entries_bytes<'a>(
    entries: impl ExactSizeIterator<Item = (&'a String, &'a serde_json::Value)>,
) -> usize {
    const NODE: usize =
        11 * (std::mem::size_of::<String>() + std::mem::size_of::<serde_json::Value>()) + 16;
    NODE * (1 + entries.len() / 5) + entries.map(|(k, v)| k.len() + json_bytes(v)).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const MIB: u64 = 1 << 20;

    /// R13-9: a map's entries (a request's `_meta`) count as the object that holds them does.
    #[test]
    fn r13_9_a_maps_entries_count_as_its_object() {
        let object = serde_json::json!({"x": [[], [], []], "progressToken": "p"});
        let serde_json::Value::Object(map) = &object else {
            unreachable!()
        };
        assert_eq!(
            json_entries_bytes(map.iter()) + std::mem::size_of::<serde_json::Value>(),
            json_bytes(&object)
        );
        assert!(json_bytes(&serde_json::json!({"a": 0})) > 600);
    }

    #[test]
    fn reservations_give_their_bytes_back_when_dropped() {
        let budget = MemoryBudget::new(10 * MIB, Duration::from_millis(10));
        let a = budget.reserve("a", 4 * MIB).unwrap();
        let mut b = budget.reserve("b", 4 * MIB).unwrap();
        assert_eq!(budget.held(), 8 * MIB);
        b.grow(2 * MIB).unwrap();
        assert_eq!(b.bytes(), 6 * MIB);
        assert_eq!(budget.held(), 10 * MIB);
        drop(a);
        assert_eq!(budget.held(), 6 * MIB);
        b.grow_to(3 * MIB).unwrap();
        assert_eq!(b.bytes(), 6 * MIB, "grow_to never shrinks");
        drop(b);
        assert_eq!(budget.held(), 0);
        let empty = budget.reserve("nothing", 0).unwrap();
        assert_eq!(empty.bytes(), 0);
        assert_eq!(budget.held(), 0);
    }

    /// An estimate above the whole budget fails at once, naming the estimate, the budget and
    /// the variable, and holds nothing.
    #[test]
    fn an_estimate_above_the_whole_budget_is_refused_at_once() {
        let budget = MemoryBudget::new(10 * MIB, Duration::from_secs(60));
        let started = Instant::now();
        let error = budget.reserve("vector_measure", 11 * MIB).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1), "no wait");
        assert!(matches!(error, BudgetError::TooLarge { .. }));
        let text = error.to_string();
        assert!(text.contains("vector_measure"), "{text}");
        assert!(text.contains("11534336 bytes"), "{text}");
        assert!(text.contains("10485760 bytes"), "{text}");
        assert!(text.contains(BUDGET_VARIABLE), "{text}");
        assert_eq!(budget.held(), 0);
        // A reservation that grows past the whole budget is refused the same way, and keeps
        // what it held.
        let mut growing = budget.reserve("layer", 6 * MIB).unwrap();
        assert!(matches!(
            growing.grow(5 * MIB),
            Err(BudgetError::TooLarge { bytes, .. }) if bytes == 11 * MIB
        ));
        assert_eq!(growing.bytes(), 6 * MIB);
        assert_eq!(budget.held(), 6 * MIB);
    }

    /// Two heavy steps that do not fit together: the second waits, and gets its bytes once
    /// the first gives them back within the wait.
    #[test]
    fn a_reservation_waits_for_another_to_finish() {
        let budget = Arc::new(MemoryBudget::new(10 * MIB, Duration::from_secs(10)));
        let first = budget.reserve("first", 8 * MIB).unwrap();
        let waiting = {
            let budget = budget.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let second = budget.reserve("second", 8 * MIB).map(|r| r.bytes());
                (second, started.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            budget.held(),
            8 * MIB,
            "the second has not taken anything yet"
        );
        drop(first);
        let (second, waited) = waiting.join().unwrap();
        assert_eq!(second, Ok(8 * MIB));
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert_eq!(budget.held(), 0);
    }

    /// One that does not fit within the wait is refused with the estimate, what others hold,
    /// the budget and both variables; a small one still fits beside the holder.
    #[test]
    fn a_reservation_that_does_not_fit_in_time_is_refused_clearly() {
        let budget = MemoryBudget::new(10 * MIB, Duration::from_millis(300));
        let _first = budget.reserve("first", 8 * MIB).unwrap();
        let started = Instant::now();
        let error = budget.reserve("raster_calc windows", 4 * MIB).unwrap_err();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        let text = error.to_string();
        assert!(matches!(error, BudgetError::Busy { .. }), "{text}");
        for part in [
            "raster_calc windows",
            "4194304 bytes",
            "8388608 bytes",
            "10485760 bytes",
            BUDGET_VARIABLE,
            WAIT_VARIABLE,
            "nothing was written",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        assert_eq!(
            budget.held(),
            8 * MIB,
            "a refused reservation holds nothing"
        );
        let small = budget.reserve("light", 2 * MIB).unwrap();
        assert_eq!(small.bytes(), 2 * MIB);
    }

    /// A layer read feature by feature covers its growing estimate with some slack, never
    /// asking for more than the whole budget while its need fits.
    #[test]
    fn cover_grows_ahead_of_need_within_the_budget() {
        let budget = MemoryBudget::new(10 * MIB, Duration::from_millis(10));
        let mut layer = budget.start("layer");
        assert_eq!(layer.bytes(), 0);
        layer.cover(1000).unwrap();
        let first = layer.bytes();
        assert!(first >= 1000 + MIB, "{first}");
        layer.cover(2000).unwrap();
        assert_eq!(layer.bytes(), first, "covered already: no new take");
        layer.cover(9 * MIB).unwrap();
        assert_eq!(layer.bytes(), 10 * MIB, "the slack stops at the budget");
        assert!(matches!(
            layer.cover(10 * MIB + 1),
            Err(BudgetError::TooLarge { .. })
        ));
        drop(layer);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn the_default_is_a_quarter_of_usable_memory_within_floor_and_cap() {
        assert_eq!(default_budget(Some(8 << 30)), 2 << 30);
        assert_eq!(default_budget(Some(64 << 30)), DEFAULT_CAP);
        assert_eq!(default_budget(Some(512 << 20)), DEFAULT_FLOOR);
        assert_eq!(default_budget(None), DEFAULT_FLOOR);
        let here = default_budget(usable_memory());
        assert!((DEFAULT_FLOOR..=DEFAULT_CAP).contains(&here));
    }

    #[test]
    fn estimates_saturate() {
        assert_eq!(grid_bytes(1000, 4, 3), 12_000);
        assert_eq!(grid_bytes(u64::MAX, 8, 2), u64::MAX);
        assert_eq!(
            vector_bytes(2, 10),
            2 * BYTES_PER_FEATURE + 10 * BYTES_PER_VERTEX
        );
        assert_eq!(vector_bytes(u64::MAX, u64::MAX), u64::MAX);
    }
}
