//! Depression filling by Priority-Flood (Barnes, Lehman & Mulla 2014, "Priority-Flood: An
//! optimal depression-filling and watershed-labeling algorithm for digital elevation models",
//! Computers & Geosciences 62:117-127).
//!
//! This is the paper's *improved* variant (its Algorithm 2): cells are flooded inward from the
//! outlets in order of elevation, and cells found at or below the flood level are raised and
//! queued on a plain FIFO "pit" queue instead of the priority queue, because inside a depression
//! the order no longer matters. The *epsilon* variant (its Algorithm 3) raises every such cell to
//! the next representable `f32` above the cell it was reached from (`f32::next_up`), so the
//! output has a strictly decreasing path from every cell to an outlet and needs no flat
//! resolution.
//!
//! Outlets (the seeds): every border cell, which drains off the grid, and every cell with a
//! nodata neighbour, which drains into the nodata. Nodata cells (NaN or the grid's nodata value)
//! are never touched. With these seeds the plain fill is the unique minimal depressionless
//! surface above the input — the same surface every correct filler (RichDEM, pysheds,
//! pyflwdir, Planchon & Darboux 2002) produces — and cells are only written where they are
//! raised, so unchanged cells keep their exact bits.

use std::collections::VecDeque;

use super::bitset::BitSet;
use super::error::Result;
use super::grid::{is_nodata, CellSize, Grid};
use super::neighbours::Neighbourhood;
use super::progress::{Progress, ProgressTracker};
use super::queue::CellQueue;

/// How raised cells are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FillMode {
    /// Raise to the spill elevation exactly: filled depressions become flats (resolve them
    /// with [`super::flats`]). The result is the minimal depressionless surface.
    #[default]
    Plain,
    /// Raise to the next `f32` above the cell the flood came from, so every cell drains.
    Epsilon,
}

/// What a fill changed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FillReport {
    /// Cells whose elevation was raised.
    pub cells_raised: u64,
    /// The largest single raise, in elevation units.
    pub max_raise: f64,
    /// Sum of the raises times the cell area (`dx * dy`), in elevation × map units².
    pub volume: f64,
}

/// Fills every depression of `dem` in place (see the module documentation).
pub fn fill_depressions(
    dem: &mut Grid<f32>,
    cell_size: CellSize,
    mode: FillMode,
    progress: &dyn Progress,
) -> Result<FillReport> {
    cell_size.validate()?;
    let hood = Neighbourhood::new(dem.width(), dem.height());
    let nodata = dem.nodata_or_nan();
    let cells = dem.cell_count();
    let elevations = dem.data_mut();

    let mut closed = BitSet::new(cells);
    let mut open = CellQueue::new();
    seed_outlets(elevations, nodata, &hood, &mut closed, &mut open);

    let mut pit: VecDeque<u32> = VecDeque::new();
    let mut raises = RaiseTally::default();
    let mut tracker = ProgressTracker::new(progress, cells as u64);
    let mut processed: u64 = 0;

    loop {
        let cell = match mode {
            FillMode::Plain => match pit.pop_front() {
                Some(cell) => cell,
                None => match open.pop() {
                    Some((_, cell)) => cell,
                    None => break,
                },
            },
            FillMode::Epsilon => {
                // Barnes 2014, Algorithm 3: an open cell level with the pit front goes first.
                let pit_front = pit
                    .front()
                    .and_then(|&front| elevations.get(front as usize).copied());
                match (pit_front, open.peek()) {
                    (Some(front_elevation), Some((open_elevation, _)))
                        if open_elevation == front_elevation =>
                    {
                        match open.pop() {
                            Some((_, cell)) => cell,
                            None => break,
                        }
                    }
                    (Some(_), _) => match pit.pop_front() {
                        Some(cell) => cell,
                        None => break,
                    },
                    (None, _) => match open.pop() {
                        Some((_, cell)) => cell,
                        None => break,
                    },
                }
            }
        };
        processed += 1;
        tracker.tick(processed)?;

        let cell = cell as usize;
        let Some(&level) = elevations.get(cell) else {
            continue;
        };
        let flood_level = match mode {
            FillMode::Plain => level,
            FillMode::Epsilon => level.next_up(),
        };
        hood.for_each(cell, |_, neighbour| {
            if !closed.insert_new(neighbour) {
                return;
            }
            let Some(elevation) = elevations.get_mut(neighbour) else {
                return;
            };
            if *elevation <= flood_level {
                if *elevation < flood_level {
                    raises.record(*elevation, flood_level);
                    *elevation = flood_level;
                }
                pit.push_back(neighbour as u32);
            } else {
                open.push(*elevation, neighbour as u32);
            }
        });
    }
    tracker.finish()?;
    Ok(FillReport {
        cells_raised: raises.cells,
        max_raise: raises.max,
        volume: raises.sum * cell_size.area(),
    })
}

/// Marks nodata cells closed and queues the outlets: border cells and cells next to nodata.
pub(crate) fn seed_outlets(
    elevations: &[f32],
    nodata: f32,
    hood: &Neighbourhood,
    closed: &mut BitSet,
    open: &mut CellQueue,
) {
    let mut nodata_cells = Vec::new();
    for (index, &elevation) in elevations.iter().enumerate() {
        if is_nodata(elevation, nodata) {
            closed.insert(index);
            nodata_cells.push(index as u32);
        }
    }
    let mut seed = |index: usize, closed: &mut BitSet| {
        if let Some(&elevation) = elevations.get(index) {
            if closed.insert_new(index) {
                open.push(elevation, index as u32);
            }
        }
    };
    for &index in &nodata_cells {
        hood.for_each(index as usize, |_, neighbour| seed(neighbour, closed));
    }
    let (width, height) = (hood.width, hood.height);
    for col in 0..width {
        seed(col, closed);
        seed((height - 1) * width + col, closed);
    }
    for row in 1..height.saturating_sub(1) {
        seed(row * width, closed);
        seed(row * width + width - 1, closed);
    }
}

#[derive(Default)]
struct RaiseTally {
    cells: u64,
    max: f64,
    sum: f64,
}

impl RaiseTally {
    #[inline]
    fn record(&mut self, before: f32, after: f32) {
        let raise = f64::from(after) - f64::from(before);
        self.cells += 1;
        self.sum += raise;
        if raise > self.max {
            self.max = raise;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::d8::D8Options;
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{
        assert_drains, d8_on_unit_cells, grid_from_rows, random_dem, XorShift,
    };

    /// The definition of the minimal depressionless surface, by brute-force relaxation
    /// (Planchon & Darboux 2002): outlets keep their elevation, every other cell is the larger
    /// of its own elevation and the lowest filled neighbour, iterated to a fixed point.
    fn reference_fill(dem: &Grid<f32>) -> Vec<f32> {
        let (width, height) = dem.shape();
        let hood = Neighbourhood::new(width, height);
        let nodata = dem.nodata_or_nan();
        let input = dem.data();
        let outlet = |index: usize| {
            let (col, row) = hood.col_row(index);
            let mut next_to_nodata = false;
            hood.for_each(index, |_, n| next_to_nodata |= is_nodata(input[n], nodata));
            !hood.is_interior(col, row) || next_to_nodata
        };
        let mut water: Vec<f32> = (0..input.len())
            .map(|i| {
                if is_nodata(input[i], nodata) || outlet(i) {
                    input[i]
                } else {
                    f32::INFINITY
                }
            })
            .collect();
        loop {
            let mut changed = false;
            for index in 0..input.len() {
                if is_nodata(input[index], nodata) || outlet(index) {
                    continue;
                }
                let mut lowest = f32::INFINITY;
                hood.for_each(index, |_, n| lowest = lowest.min(water[n]));
                let level = input[index].max(lowest);
                if level < water[index] {
                    water[index] = level;
                    changed = true;
                }
            }
            if !changed {
                return water;
            }
        }
    }

    /// A closed basin whose only spill is the 7.5 on the east edge.
    fn closed_basin() -> Grid<f32> {
        grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0, 9.0],
            &[9.0, 5.0, 4.0, 6.0, 9.0],
            &[9.0, 3.0, 2.0, 5.0, 7.5],
            &[9.0, 6.0, 4.0, 5.0, 9.0],
            &[9.0, 9.0, 9.0, 9.0, 9.0],
        ])
    }

    #[test]
    fn closed_basin_fills_to_the_spill_level_exactly() {
        let mut dem = closed_basin();
        let cell_size = CellSize::new(2.0, 3.0).unwrap();
        let report = fill_depressions(&mut dem, cell_size, FillMode::Plain, &NoProgress).unwrap();
        let expected = grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0, 9.0],
            &[9.0, 7.5, 7.5, 7.5, 9.0],
            &[9.0, 7.5, 7.5, 7.5, 7.5],
            &[9.0, 7.5, 7.5, 7.5, 9.0],
            &[9.0, 9.0, 9.0, 9.0, 9.0],
        ]);
        assert_eq!(dem, expected);
        assert_eq!(report.cells_raised, 9);
        assert_eq!(report.max_raise, 5.5);
        let raised = 2.5 + 3.5 + 1.5 + 4.5 + 5.5 + 2.5 + 1.5 + 3.5 + 2.5;
        assert_eq!(report.volume, raised * 6.0);
    }

    #[test]
    fn epsilon_fill_leaves_a_strict_gradient_to_the_spill() {
        let mut dem = closed_basin();
        fill_depressions(&mut dem, CellSize::UNIT, FillMode::Epsilon, &NoProgress).unwrap();
        let spill = 7.5f32;
        // The cell next to the spill is one step up, the far column two steps up.
        assert_eq!(dem.get(3, 2), Some(spill.next_up()));
        assert_eq!(dem.get(2, 2), Some(spill.next_up().next_up()));
        assert_eq!(dem.get(1, 2), Some(spill.next_up().next_up().next_up()));
        for row in 1..4 {
            for col in 1..4 {
                let value = dem.get(col, row).unwrap();
                assert!(value > spill && value < 7.501, "{value} at ({col}, {row})");
            }
        }
        let (directions, report) = d8_on_unit_cells(&dem, D8Options::without_flats());
        assert_eq!(report.no_flow_cells, 0);
        assert_drains(&directions);
    }

    #[test]
    fn nodata_is_an_outlet_and_stays_nodata() {
        let nodata = -9999.0;
        let mut dem = grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
            &[9.0, 1.0, 8.0, 8.0, 8.0, 9.0],
            &[9.0, 8.0, 3.0, 2.0, 8.0, 9.0],
            &[9.0, 8.0, 8.0, 8.0, 8.0, 9.0],
            &[9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
        ]);
        *dem.get_mut(1, 1).unwrap() = nodata;
        *dem.get_mut(5, 3).unwrap() = f32::NAN;
        dem.set_nodata(Some(nodata));
        let before = dem.clone();
        let report =
            fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
        // (2,2) at 3 is next to the nodata hole: an outlet. (3,2) at 2 spills over it at 3.
        assert_eq!(dem.get(1, 1), Some(nodata));
        assert!(dem.get(5, 3).unwrap().is_nan());
        assert_eq!(dem.get(2, 2), Some(3.0));
        assert_eq!(dem.get(3, 2), Some(3.0));
        assert_eq!(report.cells_raised, 1);
        for (after, before) in dem.data().iter().zip(before.data()) {
            assert!(after.is_nan() || after >= before);
        }
    }

    #[test]
    fn plain_fill_is_the_minimal_depressionless_surface_bit_for_bit() {
        for seed in 1..=12u64 {
            let mut rng = XorShift::new(seed);
            let width = 8 + rng.below(30) as usize;
            let height = 8 + rng.below(30) as usize;
            let dem = random_dem(width, height, seed, seed % 3 == 0);
            let expected = reference_fill(&dem);
            let mut filled = dem.clone();
            fill_depressions(&mut filled, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
            for (index, (got, want)) in filled.data().iter().zip(&expected).enumerate() {
                assert_eq!(got.to_bits(), want.to_bits(), "seed {seed} cell {index}");
            }
        }
    }

    #[test]
    fn plain_fill_is_idempotent_and_never_lowers() {
        for seed in 20..30u64 {
            let dem = random_dem(50, 50, seed, seed % 2 == 0);
            let mut once = dem.clone();
            let first =
                fill_depressions(&mut once, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
            assert!(first.cells_raised > 0, "seed {seed} has no depression");
            for (after, before) in once.data().iter().zip(dem.data()) {
                assert!(after.to_bits() == before.to_bits() || after > before);
            }
            let mut twice = once.clone();
            let second =
                fill_depressions(&mut twice, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
            assert_eq!(second, FillReport::default());
            assert_eq!(
                once.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                twice.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn epsilon_fill_drains_every_cell_of_random_dems() {
        for seed in 40..50u64 {
            let mut dem = random_dem(50, 50, seed, seed % 2 == 1);
            let plain = {
                let mut copy = dem.clone();
                fill_depressions(&mut copy, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
                copy
            };
            fill_depressions(&mut dem, CellSize::UNIT, FillMode::Epsilon, &NoProgress).unwrap();
            for (epsilon, flat) in dem.data().iter().zip(plain.data()) {
                assert!(epsilon.is_nan() || epsilon >= flat);
            }
            let (directions, report) = d8_on_unit_cells(&dem, D8Options::without_flats());
            assert_eq!(report.no_flow_cells, 0, "seed {seed}");
            assert_drains(&directions);
        }
    }

    #[test]
    fn cancellation_stops_the_fill() {
        let mut dem = random_dem(60, 60, 7, false);
        let stop_halfway = |fraction: f64| fraction < 0.5;
        let outcome = fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &stop_halfway);
        assert_eq!(
            outcome,
            Err(crate::hydrology::error::HydrologyError::Cancelled)
        );
    }
}
