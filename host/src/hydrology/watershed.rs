//! Watersheds of pour points over D8 directions (Jenson & Domingue 1988, "Extracting
//! topographic structure from digital elevation data for geographic information system
//! analysis", Photogrammetric Engineering and Remote Sensing 54(11):1593-1600).
//!
//! Pour points are map coordinates, located through the geotransform. With [`Snap`], each point
//! first moves to the cell of highest accumulation whose centre lies within `max_distance` map
//! units (ties: the nearer, then the lower row-major index; the containing cell is always a
//! candidate), the usual remedy for outlets digitised a little off the channel.
//!
//! Labels: 0 outside every watershed, `i + 1` for pour point `i`. All pour cells are labelled
//! first and the upstream search never enters a labelled cell, so a pour point upstream of
//! another takes its own sub-basin and the downstream one gets the rest (nested watersheds, as
//! in ArcGIS `Watershed`). When two pour points share a cell, the first keeps it and the second
//! reports an empty watershed. The upstream search is an explicit stack (no recursion): donors
//! of a cell are the neighbours whose direction points at it.
//!
//! A label is a sub-basin, not a catchment: each outcome also names the pour point its pour
//! cell drains into ([`PourPointOutcome::drains_into`], the label of the cell just downstream)
//! and its whole catchment, its own cells and those of every pour point upstream of it
//! ([`PourPointOutcome::cells_with_upstream`]). A downstream gauge's label had 36 cells where
//! D8 accumulation at it counted 52, unsaid (attack round 22, R22-B18).

use super::accumulation::AccumulationValue;
use super::d8::{FlowDirections, Receiver, CANONICAL_NODATA};
use super::error::{HydrologyError, Result};
use super::grid::{GeoTransform, Grid};
use super::progress::{Progress, ProgressTracker};

/// A grid pour points can snap to (any accumulation grid).
pub trait SnapSurface {
    /// `(width, height)`.
    fn shape(&self) -> (usize, usize);
    /// The value of a cell, `None` for nodata (NaN or the declared value).
    fn value(&self, index: usize) -> Option<f64>;
}

impl<T: AccumulationValue> SnapSurface for Grid<T> {
    fn shape(&self) -> (usize, usize) {
        Grid::shape(self)
    }

    fn value(&self, index: usize) -> Option<f64> {
        let value = self.data().get(index)?.to_f64();
        let nodata = self.nodata().map(T::to_f64);
        (!value.is_nan() && Some(value) != nodata).then_some(value)
    }
}

/// Snapping of pour points to high accumulation.
#[derive(Clone, Copy)]
pub struct Snap<'a> {
    /// The accumulation grid (same shape as the directions).
    pub accumulation: &'a dyn SnapSurface,
    /// Search radius in map units (cell centres within it are candidates).
    pub max_distance: f64,
}

/// Where a pour point ended up and what it drains.
#[derive(Debug, Clone, PartialEq)]
pub struct PourPointOutcome {
    /// Column of the pour cell.
    pub col: usize,
    /// Row of the pour cell.
    pub row: usize,
    /// Map coordinates of the pour cell's centre.
    pub position: [f64; 2],
    /// Distance in map units from the given point to `position`.
    pub snap_distance: f64,
    /// The label written for this pour point (`index + 1`).
    pub label: u32,
    /// Cells labelled for it: those that reach no other pour point first.
    pub cells: u64,
    /// The label of the sub-basin its pour cell drains into (the pour point next downstream),
    /// `None` when it drains into no other pour point's.
    pub drains_into: Option<u32>,
    /// Its whole catchment: its own cells and those of every pour point upstream of it.
    pub cells_with_upstream: u64,
}

/// Labels the watershed of every pour point (see the module documentation).
pub fn watersheds(
    directions: &FlowDirections,
    geotransform: &GeoTransform,
    pour_points: &[[f64; 2]],
    snap: Option<&Snap<'_>>,
    progress: &dyn Progress,
) -> Result<(Grid<u32>, Vec<PourPointOutcome>)> {
    let (width, height) = directions.grid().shape();
    if pour_points.len() >= u32::MAX as usize {
        return Err(HydrologyError::InvalidParameter {
            name: "pour_points",
            reason: "too many pour points".to_string(),
        });
    }
    if let Some(snap) = snap {
        if !(snap.max_distance.is_finite() && snap.max_distance >= 0.0) {
            return Err(HydrologyError::InvalidParameter {
                name: "max_distance",
                reason: "must be finite and non-negative".to_string(),
            });
        }
        let found = snap.accumulation.shape();
        if found != (width, height) {
            return Err(HydrologyError::ShapeMismatch {
                what: "accumulation",
                expected: (width, height),
                found,
            });
        }
    }
    let router = directions.router();
    let is_valid = |index: usize| router.canonical(index) != CANONICAL_NODATA;

    let mut outcomes = Vec::with_capacity(pour_points.len());
    for (index, &[x, y]) in pour_points.iter().enumerate() {
        let outside = HydrologyError::PourPointOutside { index, x, y };
        let (col, row) = geotransform
            .cell_at(x, y, width, height)
            .filter(|&(col, row)| is_valid(row * width + col))
            .ok_or(outside)?;
        let (col, row) = match snap {
            Some(snap) => snap_to_highest(
                snap,
                geotransform,
                [x, y],
                (col, row),
                width,
                height,
                &is_valid,
            ),
            None => (col, row),
        };
        let position = geotransform.cell_center(col, row);
        outcomes.push(PourPointOutcome {
            col,
            row,
            position,
            snap_distance: (position[0] - x).hypot(position[1] - y),
            label: index as u32 + 1,
            cells: 0,
            drains_into: None,
            cells_with_upstream: 0,
        });
    }

    let mut labels = vec![0u32; width * height];
    for outcome in &outcomes {
        if let Some(slot) = labels.get_mut(outcome.row * width + outcome.col) {
            if *slot == 0 {
                *slot = outcome.label;
            }
        }
    }
    let hood = router.hood;
    let mut tracker = ProgressTracker::new(progress, (width * height) as u64);
    let mut labelled: u64 = 0;
    let mut stack: Vec<u32> = Vec::new();
    for outcome in outcomes.iter_mut() {
        let pour_cell = outcome.row * width + outcome.col;
        if labels.get(pour_cell) != Some(&outcome.label) {
            continue;
        }
        let mut cells: u64 = 1;
        stack.clear();
        stack.push(pour_cell as u32);
        while let Some(cell) = stack.pop() {
            let cell = cell as usize;
            hood.for_each(cell, |_, neighbour| {
                if labels.get(neighbour) == Some(&0)
                    && router.receiver(neighbour) == Receiver::Cell(cell)
                {
                    if let Some(slot) = labels.get_mut(neighbour) {
                        *slot = outcome.label;
                    }
                    stack.push(neighbour as u32);
                    cells += 1;
                }
            });
            labelled += 1;
            tracker.tick(labelled)?;
        }
        outcome.cells = cells;
    }
    tracker.finish()?;
    nest(&mut outcomes, &labels, width, |cell| router.receiver(cell));
    Ok((Grid::new(width, height, labels, Some(0))?, outcomes))
}

/// Fill in [`PourPointOutcome::drains_into`] and [`PourPointOutcome::cells_with_upstream`]:
/// the label of the cell just downstream of each pour cell, then every sub-basin's cells added
/// to each pour point downstream of it, leaves first (Kahn's order over the nesting forest).
fn nest(
    outcomes: &mut [PourPointOutcome],
    labels: &[u32],
    width: usize,
    receiver: impl Fn(usize) -> Receiver,
) {
    let count = outcomes.len();
    let index_of = |label: u32| (label as usize).checked_sub(1).filter(|i| *i < count);
    for outcome in outcomes.iter_mut() {
        outcome.cells_with_upstream = outcome.cells;
        let pour_cell = outcome.row * width + outcome.col;
        // A pour point that shares its cell with an earlier one labels nothing.
        if outcome.cells == 0 || labels.get(pour_cell) != Some(&outcome.label) {
            continue;
        }
        if let Receiver::Cell(next) = receiver(pour_cell) {
            let below = labels.get(next).copied().unwrap_or(0);
            if below != 0 && below != outcome.label {
                outcome.drains_into = Some(below);
            }
        }
    }
    let mut waiting = vec![0usize; count];
    for outcome in outcomes.iter() {
        if let Some(parent) = outcome.drains_into.and_then(index_of) {
            waiting[parent] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..count).filter(|i| waiting[*i] == 0).collect();
    while let Some(i) = ready.pop() {
        let Some(parent) = outcomes[i].drains_into.and_then(index_of) else {
            continue;
        };
        outcomes[parent].cells_with_upstream += outcomes[i].cells_with_upstream;
        waiting[parent] -= 1;
        if waiting[parent] == 0 {
            ready.push(parent);
        }
    }
}

/// The candidate cell of highest accumulation near `point` (see the module documentation).
fn snap_to_highest(
    snap: &Snap<'_>,
    geotransform: &GeoTransform,
    point: [f64; 2],
    containing: (usize, usize),
    width: usize,
    height: usize,
    is_valid: &dyn Fn(usize) -> bool,
) -> (usize, usize) {
    let [x, y] = point;
    let radius = snap.max_distance;
    let corners = [
        geotransform.map_to_pixel(x - radius, y - radius),
        geotransform.map_to_pixel(x + radius, y - radius),
        geotransform.map_to_pixel(x - radius, y + radius),
        geotransform.map_to_pixel(x + radius, y + radius),
    ];
    let clamp = |value: f64, size: usize| value.floor().clamp(0.0, size as f64 - 1.0) as usize;
    // The cells the corners span along `axis` (0: columns, 1: rows), inside the grid.
    let span = |axis: usize, size: usize| {
        let values = || corners.iter().map(|c| c[axis]);
        (
            clamp(values().fold(f64::INFINITY, f64::min), size),
            clamp(values().fold(f64::NEG_INFINITY, f64::max), size),
        )
    };
    let col_range = span(0, width);
    let row_range = span(1, height);
    let score = |col: usize, row: usize| {
        let index = row * width + col;
        let value = snap.accumulation.value(index).filter(|_| is_valid(index))?;
        let [cx, cy] = geotransform.cell_center(col, row);
        Some((value, (cx - x).hypot(cy - y), index))
    };
    let better = |a: (f64, f64, usize), b: (f64, f64, usize)| {
        a.0 > b.0 || (a.0 == b.0 && (a.1 < b.1 || (a.1 == b.1 && a.2 < b.2)))
    };
    let mut best = score(containing.0, containing.1).map(|s| (s, containing));
    for row in row_range.0..=row_range.1 {
        for col in col_range.0..=col_range.1 {
            let Some(candidate) = score(col, row) else {
                continue;
            };
            if candidate.1 > radius {
                continue;
            }
            if best.is_none_or(|(current, _)| better(candidate, current)) {
                best = Some((candidate, (col, row)));
            }
        }
    }
    best.map_or(containing, |(_, cell)| cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::accumulation::{d8_accumulation, AccumulationOptions};
    use crate::hydrology::d8::{d8_flow_directions, D8Options};
    use crate::hydrology::fill::{fill_depressions, FillMode};
    use crate::hydrology::grid::CellSize;
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{d8_on_unit_cells, random_dem};

    /// A V-shaped valley with its thalweg in column 3, draining south (7 x 6 cells of 10 m).
    fn valley() -> (FlowDirections, Grid<f64>, GeoTransform) {
        let (width, height) = (7usize, 6usize);
        let mut data = Vec::new();
        for row in 0..height {
            for col in 0..width {
                data.push(10.0 * (col as f32 - 3.0).abs() + (height - row) as f32);
            }
        }
        let dem = Grid::new(width, height, data, None).unwrap();
        let cell_size = CellSize::new(10.0, 10.0).unwrap();
        let (directions, _) =
            d8_flow_directions(&dem, cell_size, &D8Options::default(), &NoProgress).unwrap();
        let (accumulation, _) = d8_accumulation::<f64>(
            &directions,
            cell_size,
            &AccumulationOptions::default(),
            &NoProgress,
        )
        .unwrap();
        let transform = GeoTransform::north_up(0.0, 60.0, cell_size).unwrap();
        (directions, accumulation, transform)
    }

    #[test]
    fn outlet_watershed_is_the_whole_valley() {
        let (directions, _, transform) = valley();
        // The centre of the outlet cell (3,5).
        let (labels, outcomes) =
            watersheds(&directions, &transform, &[[35.0, 5.0]], None, &NoProgress).unwrap();
        assert!(labels.data().iter().all(|&l| l == 1));
        assert_eq!(outcomes[0].cells, 42);
        assert_eq!((outcomes[0].col, outcomes[0].row), (3, 5));
    }

    #[test]
    fn nested_pour_points_split_the_basin() {
        let (directions, _, transform) = valley();
        // Outlet, and the thalweg cell (3,2) upstream of it.
        let points = [[35.0, 5.0], [35.0, 35.0]];
        let (labels, outcomes) =
            watersheds(&directions, &transform, &points, None, &NoProgress).unwrap();
        assert_eq!(outcomes[1].cells, 21, "rows 0..=2 drain to (3,2)");
        assert_eq!(outcomes[0].cells, 21);
        // R22-B18: the outlet's whole catchment is both sub-basins, 42 cells, and the upstream
        // pour point names the one it drains into.
        assert_eq!(outcomes[1].drains_into, Some(1));
        assert_eq!(outcomes[0].drains_into, None);
        assert_eq!(outcomes[1].cells_with_upstream, 21);
        assert_eq!(outcomes[0].cells_with_upstream, 42);
        for row in 0..6 {
            for col in 0..7 {
                let expected = if row <= 2 { 2 } else { 1 };
                assert_eq!(labels.get(col, row), Some(expected), "({col},{row})");
            }
        }
    }

    /// Three gauges down one thalweg and one beside it: catchments add up down the chain,
    /// whatever order the pour points are given in.
    #[test]
    fn catchments_add_up_down_a_chain_of_pour_points() {
        let (directions, _, transform) = valley();
        // (3,1), the outlet (3,5), (3,3), and the corner (0,0) on the slope above (3,1).
        let points = [[35.0, 45.0], [35.0, 5.0], [35.0, 25.0], [5.0, 55.0]];
        let (_, outcomes) =
            watersheds(&directions, &transform, &points, None, &NoProgress).unwrap();
        assert_eq!(outcomes[0].drains_into, Some(3));
        assert_eq!(outcomes[2].drains_into, Some(2));
        assert_eq!(
            outcomes[2].cells_with_upstream,
            outcomes[2].cells + outcomes[0].cells_with_upstream
        );
        assert_eq!(outcomes[1].cells_with_upstream, 42);
        assert_eq!(outcomes[3].drains_into, Some(1));
        assert_eq!(outcomes[3].cells_with_upstream, outcomes[3].cells);
        assert_eq!(outcomes[0].cells_with_upstream, outcomes[0].cells + 1);
    }

    #[test]
    fn snapping_moves_the_point_onto_the_channel() {
        let (directions, accumulation, transform) = valley();
        // A point in cell (1,4), 20 m west of the thalweg: without snapping it drains itself and
        // (0,4).
        // Within 21 m the thalweg cell (3,4) is the best candidate; (3,5), with more
        // accumulation, is 22.4 m away.
        let point = [[15.0, 15.0]];
        let (_, plain) = watersheds(&directions, &transform, &point, None, &NoProgress).unwrap();
        assert_eq!(plain[0].cells, 2);
        let snapped_within = |max_distance: f64| {
            let snap = Snap {
                accumulation: &accumulation,
                max_distance,
            };
            watersheds(&directions, &transform, &point, Some(&snap), &NoProgress).unwrap()
        };
        let (labels, snapped) = snapped_within(21.0);
        assert_eq!((snapped[0].col, snapped[0].row), (3, 4));
        assert_eq!(snapped[0].position, [35.0, 15.0]);
        assert_eq!(snapped[0].snap_distance, 20.0);
        assert_eq!(snapped[0].cells, 35);
        assert_eq!(labels.get(3, 5), Some(0));
        // A radius too small to reach the channel leaves the point where it is.
        let (_, unsnapped) = snapped_within(5.0);
        assert_eq!((unsnapped[0].col, unsnapped[0].row), (1, 4));
    }

    #[test]
    fn pour_points_off_the_grid_are_rejected() {
        let (directions, _, transform) = valley();
        let outcome = watersheds(&directions, &transform, &[[-5.0, 5.0]], None, &NoProgress);
        assert_eq!(
            outcome.err(),
            Some(HydrologyError::PourPointOutside {
                index: 0,
                x: -5.0,
                y: 5.0
            })
        );
    }

    #[test]
    fn all_edge_outlets_label_every_draining_cell() {
        let mut dem = random_dem(40, 40, 123, false);
        fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
        let (directions, _) = d8_on_unit_cells(&dem, D8Options::default());
        let transform = GeoTransform::north_up(0.0, 40.0, CellSize::UNIT).unwrap();
        let router = directions.router();
        let points: Vec<[f64; 2]> = (0..1600)
            .filter(|&i| router.receiver(i) == Receiver::Outlet)
            .map(|i| transform.cell_center(i % 40, i / 40))
            .collect();
        let (labels, outcomes) =
            watersheds(&directions, &transform, &points, None, &NoProgress).unwrap();
        assert!(labels.data().iter().all(|&l| l > 0));
        assert_eq!(outcomes.iter().map(|o| o.cells).sum::<u64>(), 1600);
    }
}
