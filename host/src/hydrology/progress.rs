//! Progress reporting and cancellation for the long-running hydrology passes.
//!
//! Every pass over a grid takes a [`Progress`] and reports the fraction done at most about a
//! hundred times (never per cell: a 16-million-cell grid must not pay for a virtual call per
//! cell). Returning `false` from [`Progress::report`] cancels the computation, which then returns
//! [`HydrologyError::Cancelled`]. Passes that run inside other passes (the Priority-Flood fill
//! inside breaching, flat resolution inside D8) report through [`SubProgress`], which maps their
//! fraction into the caller's range and keeps the total number of reports near a hundred.

use std::cell::Cell;

use super::error::{HydrologyError, Result};

/// Receives the fraction done (`0.0..=1.0`); returns `false` to cancel.
pub trait Progress {
    /// Reports `fraction` done. Returning `false` cancels the computation.
    fn report(&self, fraction: f64) -> bool;
}

impl<F: Fn(f64) -> bool> Progress for F {
    fn report(&self, fraction: f64) -> bool {
        self(fraction)
    }
}

/// A [`Progress`] that ignores reports and never cancels.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn report(&self, _fraction: f64) -> bool {
        true
    }
}

/// Maps a nested computation's `0..=1` onto `start..=start + span` of an outer [`Progress`],
/// forwarding only when the outer fraction advanced by at least 1 % (or reached the end).
pub struct SubProgress<'a> {
    outer: &'a dyn Progress,
    start: f64,
    span: f64,
    last_forwarded: Cell<f64>,
}

impl<'a> SubProgress<'a> {
    /// A view of `outer` covering `start..=start + span`.
    pub fn new(outer: &'a dyn Progress, start: f64, span: f64) -> Self {
        Self {
            outer,
            start,
            span,
            last_forwarded: Cell::new(f64::NEG_INFINITY),
        }
    }
}

impl Progress for SubProgress<'_> {
    fn report(&self, fraction: f64) -> bool {
        let outer_fraction = self.start + self.span * fraction.clamp(0.0, 1.0);
        if outer_fraction - self.last_forwarded.get() < 0.01 && fraction < 1.0 {
            return true;
        }
        self.last_forwarded.set(outer_fraction);
        self.outer.report(outer_fraction)
    }
}

/// Counts units of work and calls the [`Progress`] each time another percent is done.
pub(crate) struct ProgressTracker<'a> {
    progress: &'a dyn Progress,
    total: u64,
    step: u64,
    next_report: u64,
}

impl<'a> ProgressTracker<'a> {
    /// A tracker for `total` units of work.
    pub(crate) fn new(progress: &'a dyn Progress, total: u64) -> Self {
        let step = (total / 100).max(1);
        Self {
            progress,
            total: total.max(1),
            step,
            next_report: step,
        }
    }

    /// Notes that `done` units are finished; reports when another percent is reached.
    #[inline]
    pub(crate) fn tick(&mut self, done: u64) -> Result<()> {
        if done >= self.next_report {
            self.report(done)
        } else {
            Ok(())
        }
    }

    #[cold]
    fn report(&mut self, done: u64) -> Result<()> {
        self.next_report = (done / self.step + 1).saturating_mul(self.step);
        let fraction = (done as f64 / self.total as f64).min(1.0);
        if self.progress.report(fraction) {
            Ok(())
        } else {
            Err(HydrologyError::Cancelled)
        }
    }

    /// Reports completion (fraction 1.0).
    pub(crate) fn finish(&mut self) -> Result<()> {
        if self.progress.report(1.0) {
            Ok(())
        } else {
            Err(HydrologyError::Cancelled)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Keeps every fraction reported to it, and never cancels.
    #[derive(Default)]
    struct Recorder(RefCell<Vec<f64>>);

    impl Progress for Recorder {
        fn report(&self, fraction: f64) -> bool {
            self.0.borrow_mut().push(fraction);
            true
        }
    }

    #[test]
    fn tracker_reports_about_a_hundred_times_in_order() {
        let record = Recorder::default();
        let mut tracker = ProgressTracker::new(&record, 1_000_003);
        for done in 0..1_000_003u64 {
            tracker.tick(done).unwrap();
        }
        tracker.finish().unwrap();
        let seen = record.0.into_inner();
        assert!(seen.len() <= 102, "{} reports", seen.len());
        assert!(seen.len() >= 99);
        assert!(seen.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(seen.last().copied(), Some(1.0));
    }

    #[test]
    fn returning_false_cancels() {
        let stop = |fraction: f64| fraction < 0.5;
        let mut tracker = ProgressTracker::new(&stop, 100);
        let outcome = (0..100u64).try_for_each(|done| tracker.tick(done));
        assert_eq!(outcome, Err(HydrologyError::Cancelled));
    }

    #[test]
    fn sub_progress_maps_and_throttles() {
        let record = Recorder::default();
        let sub = SubProgress::new(&record, 0.5, 0.5);
        for step in 0..=1000 {
            assert!(sub.report(f64::from(step) / 1000.0));
        }
        let seen = record.0.into_inner();
        assert!(seen.len() <= 52, "{} reports", seen.len());
        assert!(seen.iter().all(|&f| (0.5..=1.0).contains(&f)));
        assert_eq!(seen.last().copied(), Some(1.0));
    }
}
