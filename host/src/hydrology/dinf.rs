//! D-infinity flow directions (Tarboton 1997, "A new method for the determination of flow
//! directions and upslope areas in grid digital elevation models", Water Resources Research
//! 33(2):309-319).
//!
//! Each cell is the apex of eight triangular facets, each spanned by one cardinal neighbour
//! (`e1`) and the adjacent diagonal neighbour (`e2`), taken in Tarboton's order: (E, NE),
//! (N, NE), (N, NW), (W, NW), (W, SW), (S, SW), (S, SE), (E, SE). On each facet the plane's
//! steepest downhill direction is found with the real cell size (`d1` is the distance to `e1`,
//! `d2` from `e1` to `e2`; `dx` or `dy` depending on the facet), clamped to the facet's edges,
//! and the facet with the steepest positive slope wins (ties: first facet). The angle is in
//! radians counter-clockwise from east, in `[0, 2π)`; flow is split between `e1` and `e2` in
//! proportion to the angle's closeness to each (Tarboton's rule).
//!
//! Facets with a vertex off the grid or on nodata are not used. Cells with no downhill facet
//! follow the same policy as [`super::d8`]: the steepest strictly lower neighbour if any (which
//! happens when nodata hides the facets), else off the grid outward at the border, else into
//! the first nodata neighbour, else — on flats, when asked — the D8 direction from the flat
//! mask of Barnes et al. (2014). Cells left without flow get [`DINF_NO_FLOW`] (-1); nodata
//! cells get NaN (the grid's nodata value).

use std::f64::consts::{FRAC_PI_2, PI, TAU};

use super::d8::{steepest_descent, CANONICAL_NODATA, CANONICAL_NO_FLOW};
use super::error::Result;
use super::flats::{resolve_flats_canonical, FlatReport};
use super::grid::{is_nodata, CellSize, Grid};
use super::neighbours::{neighbour_distances, Direction, Neighbourhood};
use super::progress::{Progress, ProgressTracker, SubProgress};

/// Angle of cells without flow.
pub const DINF_NO_FLOW: f32 = -1.0;

/// Route code: no flow.
const ROUTE_NO_FLOW: u8 = 64;
/// Route code: nodata.
const ROUTE_NODATA: u8 = 65;

/// Tarboton's facets: (cardinal `e1`, diagonal `e2`, angle of `e1`, sign of `r`), with
/// directions as [`Direction::ALL`] indices.
const FACETS: [(usize, usize, f64, f64); 8] = [
    (0, 7, 0.0, 1.0),
    (6, 7, FRAC_PI_2, -1.0),
    (6, 5, FRAC_PI_2, 1.0),
    (4, 5, PI, -1.0),
    (4, 3, PI, 1.0),
    (2, 3, 3.0 * FRAC_PI_2, -1.0),
    (2, 1, 3.0 * FRAC_PI_2, 1.0),
    (0, 1, TAU, -1.0),
];

/// D-infinity directions: angles plus, per cell, the two receiving neighbours and the split.
#[derive(Debug, Clone, PartialEq)]
pub struct DinfFlow {
    angles: Grid<f32>,
    /// `first | second << 3` as [`Direction::ALL`] indices, or a `ROUTE_*` code.
    routes: Vec<u8>,
    /// Fraction of the flow going to the first receiver; the rest goes to the second.
    first_fractions: Vec<f32>,
}

/// How one cell's flow is split between two neighbours (the same one twice when it all goes
/// one way).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DinfSplit {
    /// The first receiver (the facet's cardinal neighbour, or the only receiver).
    pub first: Direction,
    /// Fraction of the flow going to `first`.
    pub first_fraction: f64,
    /// The second receiver (the facet's diagonal neighbour).
    pub second: Direction,
    /// Fraction going to `second` (`1 - first_fraction`).
    pub second_fraction: f64,
}

impl DinfFlow {
    /// Angles in radians counter-clockwise from east, [`DINF_NO_FLOW`] without flow, NaN nodata.
    pub fn angles(&self) -> &Grid<f32> {
        &self.angles
    }

    /// Gives the angle grid back.
    pub fn into_angles(self) -> Grid<f32> {
        self.angles
    }

    /// The split of `(col, row)`; `None` outside the grid, for nodata and for no flow.
    pub fn split(&self, col: usize, row: usize) -> Option<DinfSplit> {
        let index = self.angles.index_of(col, row)?;
        let (first, second, first_fraction) = self.route(index)?;
        Some(DinfSplit {
            first: Direction::from_index(first)?,
            first_fraction,
            second: Direction::from_index(second)?,
            second_fraction: 1.0 - first_fraction,
        })
    }

    /// `(first, second, fraction to first)` of a cell with flow.
    #[inline]
    pub(crate) fn route(&self, index: usize) -> Option<(usize, usize, f64)> {
        let route = *self.routes.get(index)?;
        if route >= ROUTE_NO_FLOW {
            return None;
        }
        let fraction = f64::from(self.first_fractions.get(index).copied().unwrap_or(1.0));
        Some((usize::from(route & 7), usize::from(route >> 3), fraction))
    }

    /// Whether the cell is nodata.
    #[inline]
    pub(crate) fn is_nodata_cell(&self, index: usize) -> bool {
        self.routes.get(index).is_none_or(|&r| r == ROUTE_NODATA)
    }
}

/// Options of [`dinf_flow_directions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DinfOptions {
    /// Give flat cells the D8 direction from the Barnes et al. (2014) flat mask.
    pub resolve_flats: bool,
}

/// What [`dinf_flow_directions`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DinfReport {
    /// Cells whose flow is split between two neighbours.
    pub split_cells: u64,
    /// Cells left without flow.
    pub no_flow_cells: u64,
    /// Flat resolution (all zero unless asked).
    pub flats: FlatReport,
}

/// D-infinity directions of `dem` (see the module documentation).
pub fn dinf_flow_directions(
    dem: &Grid<f32>,
    cell_size: CellSize,
    options: &DinfOptions,
    progress: &dyn Progress,
) -> Result<(DinfFlow, DinfReport)> {
    cell_size.validate()?;
    let (width, height) = dem.shape();
    let hood = Neighbourhood::new(width, height);
    let elevations = dem.data();
    let nodata = dem.nodata_or_nan();
    let distances = neighbour_distances(cell_size);
    let mut report = DinfReport::default();

    let flat_share = if options.resolve_flats { 0.5 } else { 0.0 };
    let flat_directions = if options.resolve_flats {
        let descent = SubProgress::new(progress, 0.0, flat_share * 0.5);
        let mut canonical = steepest_descent(dem, cell_size, &hood, &descent)?;
        let flats = SubProgress::new(progress, flat_share * 0.5, flat_share * 0.5);
        report.flats = resolve_flats_canonical(elevations, nodata, &hood, &mut canonical, &flats)?;
        Some(canonical)
    } else {
        None
    };

    let cells = elevations.len();
    let mut angles = vec![f32::NAN; cells];
    let mut routes = vec![ROUTE_NODATA; cells];
    let mut first_fractions = vec![1.0f32; cells];
    let facet_progress = SubProgress::new(progress, flat_share, 1.0 - flat_share);
    let mut tracker = ProgressTracker::new(&facet_progress, height as u64);

    for row in 0..height {
        tracker.tick(row as u64)?;
        for col in 0..width {
            let index = row * width + col;
            let Some(&elevation) = elevations.get(index) else {
                continue;
            };
            if is_nodata(elevation, nodata) {
                continue;
            }
            let mut neighbours = [f64::NAN; 8];
            hood.for_each_at(index, col, row, |k, neighbour| {
                if let Some(&other) = elevations.get(neighbour) {
                    if !is_nodata(other, nodata) {
                        neighbours[k] = f64::from(other);
                    }
                }
            });
            let flat_direction = flat_directions
                .as_ref()
                .and_then(|codes| codes.get(index).copied());
            let decision = decide(
                f64::from(elevation),
                &neighbours,
                cell_size,
                &distances,
                hood.outward_direction(col, row),
                flat_direction,
            );
            let (angle, route, fraction) = match decision {
                Decision::Facet {
                    angle,
                    first,
                    second,
                    first_fraction,
                } => {
                    if first_fraction < 1.0 {
                        report.split_cells += 1;
                    }
                    (angle, (first | second << 3) as u8, first_fraction)
                }
                Decision::Single(k) => {
                    let angle = Direction::from_index(k).map_or(0.0, |d| d.angle(cell_size));
                    (angle, (k | k << 3) as u8, 1.0)
                }
                Decision::NoFlow => {
                    report.no_flow_cells += 1;
                    (f64::from(DINF_NO_FLOW), ROUTE_NO_FLOW, 1.0)
                }
            };
            let mut angle32 = angle as f32;
            if angle32 >= TAU as f32 {
                angle32 = 0.0;
            }
            if let (Some(a), Some(r), Some(f)) = (
                angles.get_mut(index),
                routes.get_mut(index),
                first_fractions.get_mut(index),
            ) {
                *a = angle32;
                *r = route;
                *f = fraction as f32;
            }
        }
    }
    tracker.finish()?;
    let flow = DinfFlow {
        angles: Grid::new(width, height, angles, Some(f32::NAN))?,
        routes,
        first_fractions,
    };
    Ok((flow, report))
}

enum Decision {
    Facet {
        angle: f64,
        first: usize,
        second: usize,
        first_fraction: f64,
    },
    Single(usize),
    NoFlow,
}

/// Tarboton's facet search with the fallbacks of the module documentation. `neighbours` holds
/// the neighbour elevations in direction order, NaN where off-grid or nodata.
fn decide(
    centre: f64,
    neighbours: &[f64; 8],
    cell_size: CellSize,
    distances: &[f64; 8],
    outward: Option<usize>,
    flat_direction: Option<u8>,
) -> Decision {
    let mut best: Option<(f64, usize, f64, f64)> = None; // (slope, facet, r, r_max)
    for (facet, &(e1, e2, _, _)) in FACETS.iter().enumerate() {
        let (z1, z2) = (neighbours[e1], neighbours[e2]);
        if z1.is_nan() || z2.is_nan() {
            continue;
        }
        let (d1, d2) = if e1 == 0 || e1 == 4 {
            (cell_size.dx, cell_size.dy)
        } else {
            (cell_size.dy, cell_size.dx)
        };
        let s1 = (centre - z1) / d1;
        let s2 = (z1 - z2) / d2;
        let r_max = d2.atan2(d1);
        let mut r = s2.atan2(s1);
        let slope;
        if r < 0.0 {
            r = 0.0;
            slope = s1;
        } else if r > r_max {
            r = r_max;
            slope = (centre - z2) / d1.hypot(d2);
        } else {
            slope = s1.hypot(s2);
        }
        if slope > 0.0 && best.is_none_or(|(best_slope, ..)| slope > best_slope) {
            best = Some((slope, facet, r, r_max));
        }
    }
    if let Some((_, facet, r, r_max)) = best {
        let (e1, e2, base, sign) = FACETS[facet & 7];
        let mut angle = base + sign * r;
        if angle >= TAU {
            angle -= TAU;
        }
        let first_fraction = 1.0 - r / r_max;
        return if first_fraction >= 1.0 {
            Decision::Single(e1)
        } else if first_fraction <= 0.0 {
            Decision::Single(e2)
        } else {
            Decision::Facet {
                angle,
                first: e1,
                second: e2,
                first_fraction,
            }
        };
    }
    // No downhill facet: the D8 policy.
    let mut steepest: Option<(f64, usize)> = None;
    for (k, &z) in neighbours.iter().enumerate() {
        let slope = (centre - z) / distances[k];
        if slope > 0.0 && steepest.is_none_or(|(best, _)| slope > best) {
            steepest = Some((slope, k));
        }
    }
    if let Some((_, k)) = steepest {
        return Decision::Single(k);
    }
    if let Some(k) = outward {
        return Decision::Single(k);
    }
    if let Some(k) = neighbours.iter().position(|z| z.is_nan()) {
        return Decision::Single(k);
    }
    match flat_direction {
        Some(code) if code < CANONICAL_NO_FLOW => Decision::Single(usize::from(code)),
        Some(CANONICAL_NODATA) | Some(_) | None => Decision::NoFlow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::fill::{fill_depressions, FillMode};
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{dinf_on_unit_cells, grid_from_rows, random_dem};
    use std::f64::consts::FRAC_PI_4;

    /// A plane `z = a*x + b*y` sampled at cell centres (x east, y north).
    fn plane(a: f64, b: f64, cell_size: CellSize) -> Grid<f32> {
        let mut data = Vec::new();
        for row in 0..5 {
            for col in 0..5 {
                let x = col as f64 * cell_size.dx;
                let y = -(row as f64) * cell_size.dy;
                data.push((100.0 + a * x + b * y) as f32);
            }
        }
        Grid::new(5, 5, data, None).unwrap()
    }

    fn centre_angle(dem: &Grid<f32>, cell_size: CellSize) -> (f64, DinfSplit) {
        let (flow, _) =
            dinf_flow_directions(dem, cell_size, &DinfOptions::default(), &NoProgress).unwrap();
        let angle = f64::from(flow.angles().get(2, 2).unwrap());
        (angle, flow.split(2, 2).unwrap())
    }

    #[test]
    fn planes_give_their_aspect() {
        // Downhill toward the east-north-east at 30 degrees: z falls along (cos 30, sin 30).
        let (c, s) = (30f64.to_radians().cos(), 30f64.to_radians().sin());
        let (angle, split) = centre_angle(&plane(-c, -s, CellSize::UNIT), CellSize::UNIT);
        assert!((angle - 30f64.to_radians()).abs() < 1e-4, "{angle}");
        assert_eq!(split.first, Direction::East);
        assert_eq!(split.second, Direction::NorthEast);
        // Tarboton's split: 30 of 45 degrees toward the diagonal.
        assert!((split.second_fraction - 30.0 / 45.0).abs() < 1e-4);
        // Due south.
        let (angle, split) = centre_angle(&plane(0.0, 1.0, CellSize::UNIT), CellSize::UNIT);
        assert!((angle - 3.0 * FRAC_PI_2).abs() < 1e-6);
        assert_eq!((split.first, split.first_fraction), (Direction::South, 1.0));
        // South-west-ish at 200 degrees.
        let t = 200f64.to_radians();
        let (angle, split) =
            centre_angle(&plane(-t.cos(), -t.sin(), CellSize::UNIT), CellSize::UNIT);
        assert!((angle - t).abs() < 1e-4, "{angle}");
        assert_eq!(split.first, Direction::West);
        assert_eq!(split.second, Direction::SouthWest);
    }

    #[test]
    fn non_square_cells_keep_the_true_aspect() {
        // Aspect 60 degrees on cells 30 x 10: the NE diagonal is at atan(10/30) = 18.4 degrees,
        // so the facet is (N, NE) and the angle is still 60 degrees.
        let cell_size = CellSize::new(30.0, 10.0).unwrap();
        let t = 60f64.to_radians();
        let (angle, split) = centre_angle(&plane(-t.cos(), -t.sin(), cell_size), cell_size);
        assert!((angle - t).abs() < 1e-4, "{angle}");
        assert_eq!(split.first, Direction::North);
        assert_eq!(split.second, Direction::NorthEast);
        let r_max = 30f64.atan2(10.0);
        let r = FRAC_PI_2 - t;
        assert!((split.second_fraction - r / r_max).abs() < 1e-4);
        assert!(split.first_fraction > 0.0 && split.second_fraction > 0.0);
    }

    #[test]
    fn angles_stay_in_range_and_pits_have_no_flow() {
        let dem = grid_from_rows(&[&[5.0, 5.0, 5.0], &[5.0, 1.0, 5.0], &[5.0, 5.0, 5.0]]);
        let (flow, report) = dinf_on_unit_cells(&dem, DinfOptions::default());
        assert_eq!(flow.angles().get(1, 1), Some(DINF_NO_FLOW));
        assert_eq!(report.no_flow_cells, 1);
        assert!(flow.split(1, 1).is_none());
        // Border cells flow inward to the pit (diagonal corners at exactly 45-degree multiples).
        assert!((f64::from(flow.angles().get(0, 0).unwrap()) - 7.0 * FRAC_PI_4).abs() < 1e-6);
        let dem = random_dem(40, 40, 3, true);
        let (flow, _) = dinf_on_unit_cells(&dem, DinfOptions::default());
        for &angle in flow.angles().data() {
            assert!(angle.is_nan() || angle == DINF_NO_FLOW || (0.0..TAU as f32).contains(&angle));
        }
    }

    #[test]
    fn edges_and_flats_follow_the_d8_policy() {
        // A level grid: border cells flow outward; the interior is a flat draining to them.
        let dem = Grid::filled(4, 4, 3.0f32, None).unwrap();
        let (flow, report) = dinf_on_unit_cells(
            &dem,
            DinfOptions {
                resolve_flats: true,
            },
        );
        assert_eq!(report.no_flow_cells, 0);
        assert_eq!(report.flats.resolved_cells, 4);
        assert_eq!(flow.angles().get(1, 0), Some(FRAC_PI_2 as f32));
        assert_eq!(flow.angles().get(0, 2), Some(PI as f32));
        assert!(flow.split(1, 1).is_some());
        let (_, unresolved) = dinf_on_unit_cells(&dem, DinfOptions::default());
        assert_eq!(unresolved.no_flow_cells, 4);
    }

    #[test]
    fn receivers_are_lower_on_filled_random_dems() {
        let mut dem = random_dem(40, 40, 9, false);
        fill_depressions(&mut dem, CellSize::UNIT, FillMode::Epsilon, &NoProgress).unwrap();
        let (flow, report) = dinf_on_unit_cells(&dem, DinfOptions::default());
        assert_eq!(report.no_flow_cells, 0);
        assert!(report.split_cells > 100);
        for row in 0..40 {
            for col in 0..40 {
                let split = flow.split(col, row).unwrap();
                let here = dem.get(col, row).unwrap();
                for (direction, fraction) in [
                    (split.first, split.first_fraction),
                    (split.second, split.second_fraction),
                ] {
                    let (dc, dr) = direction.offset();
                    let target = col
                        .checked_add_signed(dc)
                        .zip(row.checked_add_signed(dr))
                        .and_then(|(c, r)| dem.get(c, r));
                    if let (Some(there), true) = (target, fraction > 0.0) {
                        assert!(there < here, "({col},{row}) -> {direction:?}");
                    }
                }
            }
        }
    }
}
