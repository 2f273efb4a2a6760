//! Depression breaching by least-cost paths, in the spirit of Lindsay (2016, "Efficient hybrid
//! breaching-filling sink removal methods for flow path enforcement in digital elevation
//! models", Hydrological Processes 30(6):846-857), followed by Priority-Flood filling of what
//! could not be breached.
//!
//! A *pit* is a local minimum: a connected set of cells at one elevation that D8 leaves without
//! flow (see [`super::d8`]) and that has no same-elevation neighbour with a direction, so it
//! cannot drain even across a flat. Drainable flats are not pits; a flat-bottomed pit is one
//! pit. Pits are processed from the lowest up (ties by cell index). For each one still without
//! a lower neighbour, Dijkstra's algorithm searches outward from it for the cheapest path to a
//! *target* — a cell lower than the pit, or an outlet cell (border or next to nodata) — where
//! entering a cell costs its height above the pit (Lindsay's cost: how much must be cut). Paths
//! are at most `max_length` steps; with `max_depth`, cells more than that above the pit cannot be
//! cut. Ties go to the shorter path, then the lower cell index.
//!
//! The path is carved with a strictly decreasing gradient of the smallest steps `f32` allows:
//! each cell becomes `min(its elevation, next_down(previous cell))`, so cells are only lowered
//! and the pit drains along the path. Pits without a path within the limits are counted and,
//! when [`BreachOptions::fill`] is set, filled by [`super::fill::fill_depressions`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::bitset::BitSet;
use super::d8::{steepest_descent, CANONICAL_NO_FLOW};
use super::error::{HydrologyError, Result};
use super::fill::{fill_depressions, FillMode, FillReport};
use super::grid::{is_nodata, CellSize, Grid};
use super::neighbours::Neighbourhood;
use super::progress::{Progress, ProgressTracker, SubProgress};
use super::queue::elevation_key;

/// Options of [`breach_depressions`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreachOptions {
    /// Longest breach path, in cell steps from the pit (at least 1).
    pub max_length: usize,
    /// Deepest allowed cut: cells more than this above the pit are not cut. `None`: no limit.
    pub max_depth: Option<f64>,
    /// How the pits left unbreached are filled afterwards; `None` leaves them.
    pub fill: Option<FillMode>,
}

impl Default for BreachOptions {
    /// 100-cell paths, no depth limit, epsilon fill of the rest (the output drains everywhere).
    fn default() -> Self {
        Self {
            max_length: 100,
            max_depth: None,
            fill: Some(FillMode::Epsilon),
        }
    }
}

/// What breaching changed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BreachReport {
    /// Pits found in the input.
    pub pits_found: u64,
    /// Pits drained by carving a path from them.
    pub pits_breached: u64,
    /// Pits that a path carved for another pit had already drained.
    pub pits_drained_by_other_paths: u64,
    /// Pits without a path within the limits, left to the fill.
    pub pits_filled: u64,
    /// Distinct cells lowered by carving.
    pub cells_breached: u64,
    /// The deepest cut made, in elevation units.
    pub max_cut: f64,
    /// The fill of the remaining pits (zero when `fill` is `None`).
    pub fill: FillReport,
}

/// Breaches the pits of `dem` in place, then fills what remains (see the module documentation).
pub fn breach_depressions(
    dem: &mut Grid<f32>,
    cell_size: CellSize,
    options: &BreachOptions,
    progress: &dyn Progress,
) -> Result<BreachReport> {
    cell_size.validate()?;
    if options.max_length == 0 {
        return Err(HydrologyError::InvalidParameter {
            name: "max_length",
            reason: "must be at least 1 cell".to_string(),
        });
    }
    if let Some(depth) = options.max_depth {
        if depth.is_nan() || depth < 0.0 {
            return Err(HydrologyError::InvalidParameter {
                name: "max_depth",
                reason: "must be non-negative".to_string(),
            });
        }
    }
    let (width, height) = dem.shape();
    let hood = Neighbourhood::new(width, height);
    let nodata = dem.nodata_or_nan();
    let pits = find_pits(dem, cell_size, &hood, &SubProgress::new(progress, 0.0, 0.2))?;

    let mut report = BreachReport {
        pits_found: pits.len() as u64,
        ..BreachReport::default()
    };
    let mut search = PathSearch::new(width, height, options.max_length);
    let mut carved = BitSet::new(dem.cell_count());
    let breach_progress = SubProgress::new(progress, 0.2, 0.6);
    let mut tracker = ProgressTracker::new(&breach_progress, pits.len() as u64);
    let elevations = dem.data_mut();
    for (done, &pit) in pits.iter().enumerate() {
        tracker.tick(done as u64)?;
        let pit = pit as usize;
        let Some(&level) = elevations.get(pit) else {
            continue;
        };
        let mut has_lower = false;
        hood.for_each(pit, |_, n| {
            has_lower |= elevations
                .get(n)
                .is_some_and(|&z| !is_nodata(z, nodata) && z < level);
        });
        if has_lower {
            report.pits_drained_by_other_paths += 1;
            continue;
        }
        match search.cheapest_path(elevations, nodata, &hood, pit, options) {
            Some(path) => {
                carve(elevations, &path, &mut carved, &mut report);
                report.pits_breached += 1;
            }
            None => report.pits_filled += 1,
        }
    }
    tracker.finish()?;
    if let Some(mode) = options.fill {
        report.fill =
            fill_depressions(dem, cell_size, mode, &SubProgress::new(progress, 0.8, 0.2))?;
    }
    Ok(report)
}

/// One representative cell per pit, lowest first.
fn find_pits(
    dem: &Grid<f32>,
    cell_size: CellSize,
    hood: &Neighbourhood,
    progress: &dyn Progress,
) -> Result<Vec<u32>> {
    let codes = steepest_descent(dem, cell_size, hood, &SubProgress::new(progress, 0.0, 0.8))?;
    let elevations = dem.data();
    let mut visited = BitSet::new(codes.len());
    let mut stack: Vec<u32> = Vec::new();
    let mut pits: Vec<(u32, u32)> = Vec::new();
    for (seed, &code) in codes.iter().enumerate() {
        if code != CANONICAL_NO_FLOW || !visited.insert_new(seed) {
            continue;
        }
        let Some(&level) = elevations.get(seed) else {
            continue;
        };
        let mut drains = false;
        stack.clear();
        stack.push(seed as u32);
        while let Some(cell) = stack.pop() {
            hood.for_each(cell as usize, |_, n| {
                if elevations.get(n) != Some(&level) {
                    return;
                }
                match codes.get(n) {
                    Some(&CANONICAL_NO_FLOW) if visited.insert_new(n) => stack.push(n as u32),
                    Some(&c) if c < CANONICAL_NO_FLOW => drains = true,
                    _ => {}
                }
            });
        }
        if !drains {
            pits.push((elevation_key(level), seed as u32));
        }
    }
    pits.sort_unstable();
    if !progress.report(1.0) {
        return Err(HydrologyError::Cancelled);
    }
    Ok(pits.into_iter().map(|(_, cell)| cell).collect())
}

/// Lowers the cells of `path` (pit first) into a strictly decreasing sequence.
fn carve(elevations: &mut [f32], path: &[u32], carved: &mut BitSet, report: &mut BreachReport) {
    let Some(&pit) = path.first() else {
        return;
    };
    let Some(mut previous) = elevations.get(pit as usize).copied() else {
        return;
    };
    for &cell in path.iter().skip(1) {
        let Some(elevation) = elevations.get_mut(cell as usize) else {
            return;
        };
        let allowed = previous.next_down();
        if *elevation > allowed {
            let cut = f64::from(*elevation) - f64::from(allowed);
            report.max_cut = report.max_cut.max(cut);
            *elevation = allowed;
            if carved.insert_new(cell as usize) {
                report.cells_breached += 1;
            }
        }
        previous = *elevation;
    }
}

/// Dijkstra over a window of `max_length` cells around each pit, with state reset by
/// generation stamps instead of clearing.
struct PathSearch {
    window_width: usize,
    window_height: usize,
    radius: usize,
    stamp: Vec<u32>,
    generation: u32,
    cost: Vec<f64>,
    steps: Vec<u32>,
    parent: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
}

impl PathSearch {
    fn new(width: usize, height: usize, max_length: usize) -> Self {
        let span = max_length.saturating_mul(2).saturating_add(1);
        let (window_width, window_height) = (span.min(width), span.min(height));
        let size = window_width * window_height;
        Self {
            window_width,
            window_height,
            radius: max_length,
            stamp: vec![0; size],
            generation: 0,
            cost: vec![0.0; size],
            steps: vec![0; size],
            parent: vec![u32::MAX; size],
            heap: BinaryHeap::new(),
        }
    }

    /// The cheapest path from `pit` to a target, pit first, or `None` within the limits.
    fn cheapest_path(
        &mut self,
        elevations: &[f32],
        nodata: f32,
        hood: &Neighbourhood,
        pit: usize,
        options: &BreachOptions,
    ) -> Option<Vec<u32>> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.heap.clear();
        let (pit_col, pit_row) = hood.col_row(pit);
        // The window's top-left corner, kept inside the grid.
        let left = pit_col
            .saturating_sub(self.radius)
            .min(hood.width - self.window_width);
        let top = pit_row
            .saturating_sub(self.radius)
            .min(hood.height - self.window_height);
        let (window_width, window_height) = (self.window_width, self.window_height);
        let local = |cell: usize| -> Option<usize> {
            let (col, row) = hood.col_row(cell);
            let (c, r) = (col.checked_sub(left)?, row.checked_sub(top)?);
            (c < window_width && r < window_height).then_some(r * window_width + c)
        };
        let global = |slot: usize| -> usize {
            (top + slot / window_width) * hood.width + left + slot % window_width
        };
        let level = f64::from(*elevations.get(pit)?);
        let start = local(pit)?;
        self.visit(start, 0.0, 0, u32::MAX);

        while let Some(Reverse((cost_bits, steps, slot))) = self.heap.pop() {
            let slot = slot as usize;
            let cost = f64::from_bits(cost_bits);
            if self.cost.get(slot) != Some(&cost) || self.steps.get(slot) != Some(&steps) {
                continue;
            }
            let cell = global(slot);
            if cell != pit && is_target(elevations, nodata, hood, cell, level) {
                return Some(self.path_to(slot, &global));
            }
            if steps as usize >= options.max_length {
                continue;
            }
            hood.for_each(cell, |_, neighbour| {
                let Some(&z) = elevations.get(neighbour) else {
                    return;
                };
                if is_nodata(z, nodata) {
                    return;
                }
                let rise = (f64::from(z) - level).max(0.0);
                if options.max_depth.is_some_and(|depth| rise > depth) {
                    return;
                }
                let Some(next) = local(neighbour) else {
                    return;
                };
                let (next_cost, next_steps) = (cost + rise, steps + 1);
                let better = self.stamp.get(next) != Some(&self.generation)
                    || (next_cost, next_steps)
                        < (
                            self.cost.get(next).copied().unwrap_or(f64::INFINITY),
                            self.steps.get(next).copied().unwrap_or(u32::MAX),
                        );
                if better {
                    self.visit(next, next_cost, next_steps, slot as u32);
                }
            });
        }
        None
    }

    fn visit(&mut self, slot: usize, cost: f64, steps: u32, parent: u32) {
        if let (Some(s), Some(c), Some(n), Some(p)) = (
            self.stamp.get_mut(slot),
            self.cost.get_mut(slot),
            self.steps.get_mut(slot),
            self.parent.get_mut(slot),
        ) {
            *s = self.generation;
            *c = cost;
            *n = steps;
            *p = parent;
            self.heap
                .push(Reverse((cost.to_bits(), steps, slot as u32)));
        }
    }

    fn path_to(&self, target: usize, global: &dyn Fn(usize) -> usize) -> Vec<u32> {
        let mut path = Vec::new();
        let mut slot = target;
        loop {
            path.push(global(slot) as u32);
            match self.parent.get(slot) {
                Some(&parent) if parent != u32::MAX && path.len() <= self.stamp.len() => {
                    slot = parent as usize;
                }
                _ => break,
            }
        }
        path.reverse();
        path
    }
}

/// Lower than the pit, or an outlet (border cell or next to nodata).
fn is_target(
    elevations: &[f32],
    nodata: f32,
    hood: &Neighbourhood,
    cell: usize,
    level: f64,
) -> bool {
    let Some(&z) = elevations.get(cell) else {
        return false;
    };
    if f64::from(z) < level {
        return true;
    }
    let (col, row) = hood.col_row(cell);
    if !hood.is_interior(col, row) {
        return true;
    }
    let mut next_to_nodata = false;
    hood.for_each_at(cell, col, row, |_, n| {
        next_to_nodata |= elevations.get(n).is_some_and(|&v| is_nodata(v, nodata));
    });
    next_to_nodata
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::d8::D8Options;
    use crate::hydrology::neighbours::Direction;
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{
        assert_drains, d8_on_unit_cells, grid_from_rows, random_dem,
    };

    /// A valley draining east along row 2, walled by 20s, with a pit at (2,2) behind a dam
    /// (7, 8, 7) three cells thick.
    fn dammed_valley() -> Grid<f32> {
        let wall = [20.0; 9];
        grid_from_rows(&[
            &wall,
            &wall,
            &[20.0, 5.0, 4.0, 7.0, 8.0, 7.0, 3.0, 2.0, 1.0],
            &wall,
            &wall,
        ])
    }

    /// Breach `dem` on unit cells, without progress reporting.
    fn on_unit_cells(dem: &mut Grid<f32>, options: &BreachOptions) -> Result<BreachReport> {
        breach_depressions(dem, CellSize::UNIT, options, &NoProgress)
    }

    /// The default limits, leaving the pits they cannot breach unfilled.
    fn without_fill() -> BreachOptions {
        BreachOptions {
            fill: None,
            ..BreachOptions::default()
        }
    }

    #[test]
    fn breaching_cuts_through_a_thin_dam() {
        let mut dem = grid_from_rows(&[&[9.0; 7], &[9.0, 5.0, 4.0, 6.0, 3.0, 2.0, 1.0], &[9.0; 7]]);
        let report = on_unit_cells(&mut dem, &without_fill()).unwrap();
        assert_eq!(report.pits_found, 1);
        assert_eq!(report.pits_breached, 1);
        assert_eq!(report.pits_filled, 0);
        assert_eq!(report.cells_breached, 1);
        assert_eq!(dem.get(3, 1), Some(4.0f32.next_down()));
        assert_eq!(dem.get(2, 1), Some(4.0), "the pit itself is not lowered");
        let (directions, d8) = d8_on_unit_cells(&dem, D8Options::without_flats());
        assert_eq!(d8.no_flow_cells, 0);
        assert_eq!(directions.direction(2, 1), Some(Direction::East));
    }

    #[test]
    fn limits_decide_between_breaching_and_filling() {
        let limited = BreachOptions {
            max_length: 4,
            max_depth: Some(5.0),
            fill: Some(FillMode::Plain),
        };
        let mut dem = dammed_valley();
        let report = on_unit_cells(&mut dem, &limited).unwrap();
        assert_eq!((report.pits_breached, report.pits_filled), (1, 0));
        assert_eq!(report.cells_breached, 3);
        let below = 4.0f32.next_down();
        assert_eq!(dem.get(3, 2), Some(below));
        assert_eq!(dem.get(4, 2), Some(below.next_down()));
        assert_eq!(dem.get(5, 2), Some(below.next_down().next_down()));
        assert_eq!(dem.get(6, 2), Some(3.0));
        assert!((report.max_cut - (8.0 - 4.0)).abs() < 1e-5);
        assert_eq!(report.fill.cells_raised, 0);

        // One step short: the dam path is out of reach and the 20 m walls are too deep to cut.
        let mut dem = dammed_valley();
        let short = BreachOptions {
            max_length: 3,
            ..limited
        };
        let report = on_unit_cells(&mut dem, &short).unwrap();
        assert_eq!((report.pits_breached, report.pits_filled), (0, 1));
        assert_eq!(report.cells_breached, 0);
        assert_eq!(report.fill.cells_raised, 3);
        for col in 1..4 {
            assert_eq!(dem.get(col, 2), Some(8.0), "filled to the dam's crest");
        }
    }

    #[test]
    fn a_flat_bottomed_pit_is_one_pit_and_drainable_flats_are_none() {
        let mut dem = grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
            &[9.0, 2.0, 2.0, 6.0, 5.0, 9.0],
            &[9.0, 9.0, 9.0, 9.0, 9.0, 1.0],
            &[9.0, 7.0, 7.0, 7.0, 7.0, 9.0],
            &[9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
        ]);
        // The pit is the two cells at 2. Row 3 is a flat at 7 that drains through (4,3), which
        // touches the low border cell (5,2): a drainable flat, not a pit.
        let report = on_unit_cells(&mut dem, &without_fill()).unwrap();
        assert_eq!(report.pits_found, 1);
        assert_eq!(report.pits_breached, 1);
        let (directions, d8) = d8_on_unit_cells(&dem, D8Options::default());
        assert_eq!(d8.no_flow_cells, 0);
        assert_drains(&directions);
    }

    #[test]
    fn breached_random_dems_drain_and_are_only_lowered() {
        for seed in 100..110u64 {
            let original = random_dem(50, 50, seed, seed % 2 == 0);
            let mut breached = original.clone();
            let options = BreachOptions {
                max_length: 10,
                max_depth: Some(4.0),
                fill: None,
            };
            let report = on_unit_cells(&mut breached, &options).unwrap();
            assert!(report.pits_breached > 0, "seed {seed}");
            assert_eq!(
                report.pits_found,
                report.pits_breached + report.pits_filled + report.pits_drained_by_other_paths
            );
            let mut changed = 0u64;
            for (after, before) in breached.data().iter().zip(original.data()) {
                if after.to_bits() != before.to_bits() {
                    assert!(after < before);
                    changed += 1;
                }
            }
            assert_eq!(changed, report.cells_breached);

            let mut conditioned = original.clone();
            let report = on_unit_cells(&mut conditioned, &BreachOptions::default()).unwrap();
            assert!(report.fill.cells_raised < 2500);
            let (directions, d8) = d8_on_unit_cells(&conditioned, D8Options::without_flats());
            assert_eq!(d8.no_flow_cells, 0, "seed {seed}");
            assert_drains(&directions);
        }
    }

    #[test]
    fn invalid_limits_are_rejected() {
        let mut dem = dammed_valley();
        let zero = BreachOptions {
            max_length: 0,
            ..BreachOptions::default()
        };
        assert!(on_unit_cells(&mut dem, &zero).is_err());
        let negative = BreachOptions {
            max_depth: Some(-1.0),
            ..BreachOptions::default()
        };
        assert!(on_unit_cells(&mut dem, &negative).is_err());
    }
}
