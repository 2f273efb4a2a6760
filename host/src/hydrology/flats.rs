//! Flat resolution: drainage directions across flats without touching the DEM, after Barnes,
//! Lehman & Mulla (2014, "An efficient assignment of drainage direction over flat surfaces in
//! raster digital elevation models", Computers & Geosciences 62:128-135), which improves on
//! Garbrecht & Martz (1997).
//!
//! A *flat* is a connected (8-neighbour) set of cells that D8 left without flow. Such cells can
//! only touch cells at or above their own elevation, so every flat is level. Its *low edge* is
//! the set of same-elevation neighbours that do have a direction (the flat's outlets); its *high
//! edge* the flat cells next to higher terrain. Two breadth-first passes inside each flat build
//! integer gradients: `towards`, the step distance to the low edge, and `away`, the step distance
//! from the high edge, inverted so that it is largest next to higher terrain. The flat mask is
//! `2 * towards + away`; each flat cell then drains to the neighbour with the smallest mask (low
//! edge cells count as 0; ties to the first in [`super::neighbours::Direction::ALL`] order).
//! Doubling `towards` guarantees every flat cell has a strictly smaller neighbour (the paper's
//! proof), so the result has no cycles; the `away` term spreads flow across the flat instead of
//! hugging its rim.
//!
//! Flats with no low edge (closed pits, including single-cell pits) are left without flow and
//! counted as undrained. Memory: one `u32` per cell for the mask plus per-flat work lists; the
//! BFS "visited" state lives in spare bits of the mask itself.

use super::d8::{FlowDirections, CANONICAL_NODATA, CANONICAL_NO_FLOW};
use super::error::{HydrologyError, Result};
use super::grid::{is_nodata, Grid};
use super::neighbours::Neighbourhood;
use super::progress::{Progress, ProgressTracker};

/// What flat resolution found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlatReport {
    /// Flats that have an outlet (and were resolved).
    pub flats: u64,
    /// Cells of those flats that received a direction.
    pub resolved_cells: u64,
    /// Flats without an outlet (closed pits, including single cells).
    pub undrained_flats: u64,
    /// Cells of those flats, left without flow.
    pub undrained_cells: u64,
}

/// Mask value: cell collected into the current flat, not yet reached by the away pass.
const COLLECTED: u32 = u32::MAX;
/// Mask value: cell of a flat without outlet (reset to 0 at the end).
const UNDRAINED: u32 = u32::MAX - 1;
/// Bit marking a flat cell whose `towards` distance is still unknown.
const PENDING: u32 = 1 << 31;
/// Flats larger than this could overflow `2 * towards + away` below [`PENDING`].
const MAX_FLAT_CELLS: usize = (PENDING as usize - 2) / 3;

/// The flat mask of `dem` for directions computed without flat resolution: 0 outside flats and
/// on flats without outlet, `2 * towards + away >= 2` on flat cells that can drain.
pub fn flat_mask(
    dem: &Grid<f32>,
    directions: &FlowDirections,
    progress: &dyn Progress,
) -> Result<(Grid<u32>, FlatReport)> {
    dem.check_same_shape(directions.grid(), "flow directions")?;
    let (width, height) = dem.shape();
    let hood = Neighbourhood::new(width, height);
    let mut canonical = directions.canonical();
    let (mask, report) = build(
        dem.data(),
        dem.nodata_or_nan(),
        &hood,
        &mut canonical,
        false,
        progress,
    )?;
    Ok((Grid::new(width, height, mask, Some(0))?, report))
}

/// Gives the no-flow cells of `directions` that lie on drainable flats a direction from the flat
/// mask. `directions` must come from [`super::d8::d8_flow_directions`] on `dem` without flat
/// resolution (or any grid where no-flow marks cells without a lower neighbour).
pub fn resolve_flats(
    dem: &Grid<f32>,
    directions: &mut FlowDirections,
    progress: &dyn Progress,
) -> Result<FlatReport> {
    dem.check_same_shape(directions.grid(), "flow directions")?;
    let (width, height) = dem.shape();
    let hood = Neighbourhood::new(width, height);
    let mut canonical = directions.canonical();
    let report = resolve_flats_canonical(
        dem.data(),
        dem.nodata_or_nan(),
        &hood,
        &mut canonical,
        progress,
    )?;
    *directions = FlowDirections::from_canonical(width, height, canonical, directions.encoding())?;
    Ok(report)
}

/// [`resolve_flats`] on canonical codes.
pub(crate) fn resolve_flats_canonical(
    elevations: &[f32],
    nodata: f32,
    hood: &Neighbourhood,
    canonical: &mut [u8],
    progress: &dyn Progress,
) -> Result<FlatReport> {
    build(elevations, nodata, hood, canonical, true, progress).map(|(_, report)| report)
}

/// Work lists reused from flat to flat.
#[derive(Default)]
struct FlatScratch {
    cells: Vec<u32>,
    high_edge: Vec<u32>,
    next_to_low_edge: Vec<u32>,
    frontier: Vec<u32>,
    next_frontier: Vec<u32>,
}

/// Builds the mask flat by flat; with `assign`, also writes the flat directions.
fn build(
    elevations: &[f32],
    nodata: f32,
    hood: &Neighbourhood,
    canonical: &mut [u8],
    assign: bool,
    progress: &dyn Progress,
) -> Result<(Vec<u32>, FlatReport)> {
    let mut mask = vec![0u32; canonical.len()];
    let mut report = FlatReport::default();
    let mut scratch = FlatScratch::default();
    let mut tracker = ProgressTracker::new(progress, canonical.len() as u64);

    for seed in 0..canonical.len() {
        tracker.tick(seed as u64)?;
        if canonical.get(seed) != Some(&CANONICAL_NO_FLOW) || mask.get(seed) != Some(&0) {
            continue;
        }
        let Some(&level) = elevations.get(seed) else {
            continue;
        };
        collect_flat(
            seed,
            level,
            elevations,
            nodata,
            hood,
            canonical,
            &mut mask,
            &mut scratch,
        );
        let size = scratch.cells.len() as u64;
        if scratch.next_to_low_edge.is_empty() {
            for &cell in &scratch.cells {
                set(&mut mask, cell, UNDRAINED);
            }
            report.undrained_flats += 1;
            report.undrained_cells += size;
            continue;
        }
        if scratch.cells.len() > MAX_FLAT_CELLS {
            return Err(HydrologyError::InvalidParameter {
                name: "dem",
                reason: format!("a flat of {size} cells is larger than supported"),
            });
        }
        away_from_higher(hood, &mut mask, &mut scratch);
        towards_lower(hood, &mut mask, &mut scratch);
        if assign {
            assign_directions(
                level,
                elevations,
                hood,
                canonical,
                &mask,
                &scratch,
                &mut report,
            );
        } else {
            report.resolved_cells += size;
        }
        report.flats += 1;
    }
    for value in mask.iter_mut() {
        if *value == UNDRAINED {
            *value = 0;
        }
    }
    tracker.finish()?;
    Ok((mask, report))
}

#[inline]
fn get(mask: &[u32], cell: u32) -> u32 {
    mask.get(cell as usize).copied().unwrap_or(0)
}

#[inline]
fn set(mask: &mut [u32], cell: u32, value: u32) {
    if let Some(slot) = mask.get_mut(cell as usize) {
        *slot = value;
    }
}

/// Collects the flat containing `seed` (marking it [`COLLECTED`]) with its high-edge cells and
/// the cells next to its low edge.
#[allow(clippy::too_many_arguments)]
fn collect_flat(
    seed: usize,
    level: f32,
    elevations: &[f32],
    nodata: f32,
    hood: &Neighbourhood,
    canonical: &[u8],
    mask: &mut [u32],
    scratch: &mut FlatScratch,
) {
    scratch.cells.clear();
    scratch.high_edge.clear();
    scratch.next_to_low_edge.clear();
    scratch.frontier.clear();
    scratch.frontier.push(seed as u32);
    set(mask, seed as u32, COLLECTED);
    while let Some(cell) = scratch.frontier.pop() {
        scratch.cells.push(cell);
        let mut next_to_higher = false;
        let mut next_to_outlet = false;
        hood.for_each(cell as usize, |_, neighbour| {
            let Some(&elevation) = elevations.get(neighbour) else {
                return;
            };
            if is_nodata(elevation, nodata) {
                return;
            }
            let code = canonical
                .get(neighbour)
                .copied()
                .unwrap_or(CANONICAL_NODATA);
            if elevation == level {
                if code == CANONICAL_NO_FLOW {
                    if mask.get(neighbour) == Some(&0) {
                        set(mask, neighbour as u32, COLLECTED);
                        scratch.frontier.push(neighbour as u32);
                    }
                } else if code < CANONICAL_NO_FLOW {
                    next_to_outlet = true;
                }
            } else if elevation > level {
                next_to_higher = true;
            }
        });
        if next_to_higher {
            scratch.high_edge.push(cell);
        }
        if next_to_outlet {
            scratch.next_to_low_edge.push(cell);
        }
    }
}

/// Breadth-first distance from the high edge, inverted (largest next to higher terrain), left
/// in the mask with the [`PENDING`] bit set.
fn away_from_higher(hood: &Neighbourhood, mask: &mut [u32], scratch: &mut FlatScratch) {
    let mut distance = 1u32;
    scratch.frontier.clear();
    for &cell in &scratch.high_edge {
        set(mask, cell, distance);
        scratch.frontier.push(cell);
    }
    let mut farthest = 0u32;
    while !scratch.frontier.is_empty() {
        farthest = distance;
        distance += 1;
        scratch.next_frontier.clear();
        for &cell in &scratch.frontier {
            hood.for_each(cell as usize, |_, neighbour| {
                if mask.get(neighbour) == Some(&COLLECTED) {
                    set(mask, neighbour as u32, distance);
                    scratch.next_frontier.push(neighbour as u32);
                }
            });
        }
        std::mem::swap(&mut scratch.frontier, &mut scratch.next_frontier);
    }
    for &cell in &scratch.cells {
        let away = get(mask, cell);
        let inverted = if away == COLLECTED {
            0
        } else {
            farthest - away
        };
        set(mask, cell, inverted | PENDING);
    }
}

/// Breadth-first distance from the low edge, combined into `2 * towards + away`.
fn towards_lower(hood: &Neighbourhood, mask: &mut [u32], scratch: &mut FlatScratch) {
    let mut distance = 1u32;
    scratch.frontier.clear();
    for &cell in &scratch.next_to_low_edge {
        let away = get(mask, cell) & !PENDING;
        set(mask, cell, away + 2 * distance);
        scratch.frontier.push(cell);
    }
    while !scratch.frontier.is_empty() {
        distance += 1;
        scratch.next_frontier.clear();
        for &cell in &scratch.frontier {
            hood.for_each(cell as usize, |_, neighbour| {
                let value = mask.get(neighbour).copied().unwrap_or(0);
                if value & PENDING != 0 && value != UNDRAINED && value != COLLECTED {
                    set(mask, neighbour as u32, (value & !PENDING) + 2 * distance);
                    scratch.next_frontier.push(neighbour as u32);
                }
            });
        }
        std::mem::swap(&mut scratch.frontier, &mut scratch.next_frontier);
    }
}

/// Points every cell of the flat at its smallest-mask neighbour.
fn assign_directions(
    level: f32,
    elevations: &[f32],
    hood: &Neighbourhood,
    canonical: &mut [u8],
    mask: &[u32],
    scratch: &FlatScratch,
    report: &mut FlatReport,
) {
    for &cell in &scratch.cells {
        let own = get(mask, cell);
        let mut best_value = own;
        let mut best_direction = CANONICAL_NO_FLOW;
        hood.for_each(cell as usize, |k, neighbour| {
            let value = match mask.get(neighbour) {
                Some(&0) => {
                    let outlet = canonical
                        .get(neighbour)
                        .is_some_and(|&c| c < CANONICAL_NO_FLOW)
                        && elevations.get(neighbour) == Some(&level);
                    if !outlet {
                        return;
                    }
                    0
                }
                Some(&value) => value,
                None => return,
            };
            if value < best_value {
                best_value = value;
                best_direction = k as u8;
            }
        });
        if best_direction != CANONICAL_NO_FLOW {
            if let Some(code) = canonical.get_mut(cell as usize) {
                *code = best_direction;
            }
            report.resolved_cells += 1;
        } else {
            report.undrained_cells += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::d8::D8Options;
    use crate::hydrology::neighbours::Direction;
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{assert_drains, d8_on_unit_cells, grid_from_rows};

    /// A 5 x 5 plateau at 10 inside a rim at 20, open on the east side to a lower column.
    fn plateau() -> Grid<f32> {
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for row in 0..7 {
            let mut cells = Vec::new();
            for col in 0..7 {
                let rim = row == 0 || row == 6 || col == 0;
                cells.push(match (rim, col) {
                    (true, _) => 20.0,
                    (false, 6) => 5.0,
                    _ => 10.0,
                });
            }
            rows.push(cells);
        }
        let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
        grid_from_rows(&refs)
    }

    #[test]
    fn plateau_drains_toward_its_outlet_side() {
        let dem = plateau();
        let (directions, report) = d8_on_unit_cells(&dem, D8Options::default());
        // The plateau is columns 1..=5; column 5 touches the lower column 6 and has slope.
        // Columns 1..=4 (rows 1..=5) are the flat: 20 cells.
        assert_eq!(report.flats.flats, 1);
        assert_eq!(report.flats.resolved_cells, 20);
        assert_eq!(report.flats.undrained_cells, 0);
        assert_eq!(report.no_flow_cells, 0);
        for row in 1..6 {
            for col in 1..6 {
                let direction = directions.direction(col, row).unwrap();
                assert_eq!(
                    direction.offset().0,
                    1,
                    "({col}, {row}) flows {direction:?}"
                );
            }
        }
        assert_drains(&directions);
    }

    #[test]
    fn mask_combines_both_gradients() {
        let dem = plateau();
        let (directions, _) = d8_on_unit_cells(&dem, D8Options::without_flats());
        let (mask, report) = flat_mask(&dem, &directions, &NoProgress).unwrap();
        assert_eq!(report.flats, 1);
        // `towards` drops by one per column eastward (doubled: -2) and the inverted `away` term
        // changes by at most one between neighbours, so the mask strictly decreases eastward.
        for row in 1..6 {
            for col in 1..4 {
                let here = mask.get(col, row).unwrap();
                let east = mask.get(col + 1, row).unwrap();
                assert!(here > east, "mask ({col},{row}) = {here} vs {east}");
            }
            assert!(mask.get(4, row).unwrap() >= 2);
            assert_eq!(mask.get(5, row), Some(0));
        }
        assert_eq!(mask.get(0, 0), Some(0));
    }

    #[test]
    fn narrow_flat_drains_along_its_length() {
        // A flat strip one cell wide: each cell flows one step closer to the outlet.
        let dem = grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0, 9.0],
            &[9.0, 3.0, 3.0, 3.0, 1.0],
            &[9.0, 9.0, 9.0, 9.0, 9.0],
        ]);
        let (directions, report) = d8_on_unit_cells(&dem, D8Options::default());
        assert_eq!(report.flats.resolved_cells, 2);
        assert_eq!(directions.direction(1, 1), Some(Direction::East));
        assert_eq!(directions.direction(2, 1), Some(Direction::East));
        assert_eq!(directions.direction(3, 1), Some(Direction::East));
    }

    #[test]
    fn closed_flats_stay_without_flow() {
        let dem = grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0],
            &[9.0, 2.0, 2.0, 9.0],
            &[9.0, 2.0, 2.0, 9.0],
            &[9.0, 9.0, 9.0, 9.0],
        ]);
        let (directions, report) = d8_on_unit_cells(&dem, D8Options::default());
        assert_eq!(report.flats.undrained_flats, 1);
        assert_eq!(report.flats.undrained_cells, 4);
        assert_eq!(report.no_flow_cells, 4);
        assert_eq!(directions.direction(1, 1), None);
        let (mask, _) = flat_mask(
            &dem,
            &d8_on_unit_cells(&dem, D8Options::without_flats()).0,
            &NoProgress,
        )
        .unwrap();
        assert!(mask.data().iter().all(|&v| v == 0));
    }

    #[test]
    fn resolve_flats_matches_the_built_in_pass() {
        let dem = plateau();
        let (mut directions, _) = d8_on_unit_cells(&dem, D8Options::without_flats());
        let report = resolve_flats(&dem, &mut directions, &NoProgress).unwrap();
        let (built_in, built_in_report) = d8_on_unit_cells(&dem, D8Options::default());
        assert_eq!(directions, built_in);
        assert_eq!(report, built_in_report.flats);
    }
}
