//! Flow accumulation over D8 (O'Callaghan & Mark 1984) and D-infinity (Tarboton 1997) flow
//! directions, in topological order by in-degree counting (Kahn 1962, see
//! [`super::upstream_first`]), O(n) and without recursion.
//!
//! Every cell starts with its own weight (1, or the weights grid where nodata and NaN weigh 0;
//! times `dx * dy` for contributing area) and passes its total downstream, so a cell's value
//! *includes itself*. D-infinity splits each cell's total between its two receivers by
//! Tarboton's proportions.
//!
//! Mass is conserved: what reaches an *outlet* — a cell flowing off the grid or into nodata, or
//! a pit without flow — leaves the network, and the outlets' totals sum to the total weight
//! (reported as [`AccumulationReport::outlet_total`]). Directions that form a cycle are
//! rejected with [`HydrologyError::FlowCycle`].

use super::d8::{FlowDirections, Receiver, CANONICAL_NODATA};
use super::dinf::DinfFlow;
use super::error::{HydrologyError, Result};
use super::grid::{CellSize, Grid};
use super::neighbours::Neighbourhood;
use super::progress::Progress;
use super::upstream_first::visit_upstream_first;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The float types accumulation can produce (`f32` halves the memory of `f64`).
pub trait AccumulationValue: Copy + PartialOrd + std::fmt::Debug + sealed::Sealed {
    /// The value written on nodata cells (NaN).
    const NODATA: Self;
    /// Converts (rounding for `f32`).
    fn from_f64(value: f64) -> Self;
    /// Widens to `f64`.
    fn to_f64(self) -> f64;
    /// `self + other`.
    fn plus(self, other: Self) -> Self;
    /// `self * fraction`.
    fn scaled(self, fraction: f64) -> Self;
}

impl AccumulationValue for f32 {
    const NODATA: Self = f32::NAN;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn plus(self, other: Self) -> Self {
        self + other
    }
    fn scaled(self, fraction: f64) -> Self {
        (f64::from(self) * fraction) as f32
    }
}

impl AccumulationValue for f64 {
    const NODATA: Self = f64::NAN;
    fn from_f64(value: f64) -> Self {
        value
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn plus(self, other: Self) -> Self {
        self + other
    }
    fn scaled(self, fraction: f64) -> Self {
        self * fraction
    }
}

/// What each cell contributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccumulationUnits {
    /// Cell counts (or summed weights).
    #[default]
    Cells,
    /// Contributing area: counts (or weights) times `dx * dy`.
    Area,
}

/// Options of the accumulation functions.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccumulationOptions<'a> {
    /// Cells or area.
    pub units: AccumulationUnits,
    /// Per-cell weights (same shape; nodata and NaN weigh 0). `None` weighs every cell 1.
    pub weights: Option<&'a Grid<f32>>,
}

/// Totals of an accumulation.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AccumulationReport {
    /// Cells through which flow leaves the network (off the grid, into nodata, or pits).
    pub outlets: u64,
    /// Sum of what left through the outlets; equals `total_weight` up to rounding.
    pub outlet_total: f64,
    /// Sum of all cell contributions.
    pub total_weight: f64,
    /// The largest accumulated value.
    pub max: f64,
}

/// D8 flow accumulation (see the module documentation). Nodata direction cells get NaN.
pub fn d8_accumulation<T: AccumulationValue>(
    directions: &FlowDirections,
    cell_size: CellSize,
    options: &AccumulationOptions<'_>,
    progress: &dyn Progress,
) -> Result<(Grid<T>, AccumulationReport)> {
    cell_size.validate()?;
    let grid = directions.grid();
    let (width, height) = grid.shape();
    let router = directions.router();
    let (mut totals, total_weight) = initial_weights::<T>(
        width,
        height,
        |index| router.canonical(index) == CANONICAL_NODATA,
        cell_size,
        options,
    )?;

    let mut report = AccumulationReport {
        total_weight,
        ..AccumulationReport::default()
    };
    let mut outlet_total = 0.0f64;
    visit_upstream_first(
        grid.cell_count(),
        |cell| match router.receiver(cell) {
            Receiver::Nodata => None,
            Receiver::Cell(next) => Some([Some(next)]),
            Receiver::Outlet | Receiver::Pit => Some([None]),
        },
        progress,
        |cell| {
            let carried = totals.get(cell).copied().unwrap_or(T::NODATA);
            match router.receiver(cell) {
                Receiver::Cell(next) => {
                    if let Some(total) = totals.get_mut(next) {
                        *total = total.plus(carried);
                    }
                }
                Receiver::Outlet | Receiver::Pit => {
                    report.outlets += 1;
                    outlet_total += carried.to_f64();
                }
                Receiver::Nodata => {}
            }
        },
    )?;
    report.outlet_total = outlet_total;
    report.max = maximum(&totals);
    Ok((Grid::new(width, height, totals, Some(T::NODATA))?, report))
}

/// D-infinity flow accumulation (see the module documentation). Nodata cells get NaN.
pub fn dinf_accumulation<T: AccumulationValue>(
    flow: &DinfFlow,
    cell_size: CellSize,
    options: &AccumulationOptions<'_>,
    progress: &dyn Progress,
) -> Result<(Grid<T>, AccumulationReport)> {
    cell_size.validate()?;
    let (width, height) = flow.angles().shape();
    let hood = Neighbourhood::new(width, height);
    let cells = width * height;

    // Receivers of a cell with a non-zero share: (target, share); target None = outlet.
    let receivers = |index: usize| -> [(Option<usize>, f64); 2] {
        let Some((first, second, first_fraction)) = flow.route(index) else {
            return [(None, 0.0), (None, 0.0)];
        };
        let (col, row) = hood.col_row(index);
        let target = |k: usize| {
            hood.neighbour(index, col, row, k)
                .filter(|&n| !flow.is_nodata_cell(n))
        };
        if first == second {
            [(target(first), 1.0), (None, 0.0)]
        } else {
            [
                (target(first), first_fraction),
                (target(second), 1.0 - first_fraction),
            ]
        }
    };

    let (mut totals, total_weight) = initial_weights::<T>(
        width,
        height,
        |i| flow.is_nodata_cell(i),
        cell_size,
        options,
    )?;

    let mut report = AccumulationReport {
        total_weight,
        ..AccumulationReport::default()
    };
    let mut outlet_total = 0.0f64;
    visit_upstream_first(
        cells,
        |cell| {
            if flow.is_nodata_cell(cell) {
                return None;
            }
            // Only a receiver with a share is downstream of the cell.
            Some(receivers(cell).map(|(target, share)| target.filter(|_| share > 0.0)))
        },
        progress,
        |cell| {
            let carried = totals.get(cell).copied().unwrap_or(T::NODATA);
            if flow.route(cell).is_none() {
                // A pit keeps what it received.
                report.outlets += 1;
                outlet_total += carried.to_f64();
                return;
            }
            let mut leaves_network = false;
            for (target, share) in receivers(cell) {
                if share <= 0.0 {
                    continue;
                }
                let Some(next) = target else {
                    outlet_total += carried.to_f64() * share;
                    leaves_network = true;
                    continue;
                };
                if let Some(total) = totals.get_mut(next) {
                    *total = total.plus(carried.scaled(share));
                }
            }
            if leaves_network {
                report.outlets += 1;
            }
        },
    )?;
    report.outlet_total = outlet_total;
    report.max = maximum(&totals);
    Ok((Grid::new(width, height, totals, Some(T::NODATA))?, report))
}

/// Each cell's own contribution (NaN on nodata) and their sum.
fn initial_weights<T: AccumulationValue>(
    width: usize,
    height: usize,
    is_nodata_cell: impl Fn(usize) -> bool,
    cell_size: CellSize,
    options: &AccumulationOptions<'_>,
) -> Result<(Vec<T>, f64)> {
    let scale = match options.units {
        AccumulationUnits::Cells => 1.0,
        AccumulationUnits::Area => cell_size.area(),
    };
    let weights = match options.weights {
        Some(weights) => {
            if weights.shape() != (width, height) {
                return Err(HydrologyError::ShapeMismatch {
                    what: "weights",
                    expected: (width, height),
                    found: weights.shape(),
                });
            }
            Some((weights.data(), weights.nodata_or_nan()))
        }
        None => None,
    };
    let mut total = 0.0f64;
    let values = (0..width * height)
        .map(|index| {
            if is_nodata_cell(index) {
                return T::NODATA;
            }
            let weight = match weights {
                Some((data, nodata)) => match data.get(index) {
                    Some(&w) if !super::grid::is_nodata(w, nodata) => f64::from(w),
                    _ => 0.0,
                },
                None => 1.0,
            };
            let value = T::from_f64(weight * scale);
            total += value.to_f64();
            value
        })
        .collect();
    Ok((values, total))
}

fn maximum<T: AccumulationValue>(values: &[T]) -> f64 {
    values
        .iter()
        .map(|v| v.to_f64())
        .filter(|v| !v.is_nan())
        .fold(f64::NEG_INFINITY, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::d8::{d8_flow_directions, D8Encoding, D8Options};
    use crate::hydrology::dinf::DinfOptions;
    use crate::hydrology::fill::{fill_depressions, FillMode};
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{
        accumulation_on_unit_cells, dinf_on_unit_cells, grid_from_rows, random_dem,
    };

    /// A V-shaped valley: the thalweg is column 3, sloping south; the sides slope to it.
    fn valley(width: usize, height: usize) -> Grid<f32> {
        let mid = width / 2;
        let mut data = Vec::new();
        for row in 0..height {
            for col in 0..width {
                let side = (col as f32 - mid as f32).abs();
                data.push(10.0 * side + (height - row) as f32);
            }
        }
        Grid::new(width, height, data, None).unwrap()
    }

    fn d8(dem: &Grid<f32>) -> FlowDirections {
        d8_flow_directions(dem, CellSize::UNIT, &D8Options::default(), &NoProgress)
            .unwrap()
            .0
    }

    #[test]
    fn valley_thalweg_counts_its_upstream_cells() {
        let (width, height) = (7, 6);
        let dem = valley(width, height);
        let directions = d8(&dem);
        let (accumulation, report) = accumulation_on_unit_cells(&directions);
        // The valley sides fall 10 per column toward the thalweg and 1 per row southward, so
        // every side cell flows straight across to the thalweg (interior rows) and the thalweg
        // flows south. Row 0's cells are on the north border: they have lower neighbours.
        for row in 0..height {
            let expected = (row + 1) * width;
            assert_eq!(
                accumulation.get(3, row),
                Some(expected as f64),
                "thalweg row {row}"
            );
        }
        assert_eq!(accumulation.get(0, 2), Some(1.0));
        assert_eq!(accumulation.get(2, 2), Some(3.0));
        assert_eq!(report.outlet_total, (width * height) as f64);
        assert_eq!(report.total_weight, (width * height) as f64);
        assert_eq!(report.max, (width * height) as f64);
    }

    #[test]
    fn area_units_and_weights() {
        let dem = valley(7, 6);
        let directions = d8(&dem);
        let cell_size = CellSize::new(2.0, 3.0).unwrap();
        let (area, _) = d8_accumulation::<f32>(
            &directions,
            cell_size,
            &AccumulationOptions {
                units: AccumulationUnits::Area,
                weights: None,
            },
            &NoProgress,
        )
        .unwrap();
        assert_eq!(area.get(3, 5), Some(42.0 * 6.0));
        let mut weights = Grid::filled(7, 6, 0.5f32, Some(-1.0)).unwrap();
        *weights.get_mut(0, 0).unwrap() = -1.0;
        *weights.get_mut(1, 0).unwrap() = f32::NAN;
        let (weighted, report) = d8_accumulation::<f64>(
            &directions,
            cell_size,
            &AccumulationOptions {
                units: AccumulationUnits::Cells,
                weights: Some(&weights),
            },
            &NoProgress,
        )
        .unwrap();
        assert_eq!(weighted.get(3, 5), Some(20.0));
        assert_eq!(report.total_weight, 20.0);
        let wrong = Grid::filled(6, 7, 1.0f32, None).unwrap();
        assert!(matches!(
            d8_accumulation::<f64>(
                &directions,
                cell_size,
                &AccumulationOptions {
                    units: AccumulationUnits::Cells,
                    weights: Some(&wrong),
                },
                &NoProgress,
            ),
            Err(HydrologyError::ShapeMismatch { .. })
        ));
    }

    #[test]
    fn nodata_holes_are_outlets_and_stay_nodata() {
        let nodata = -9999.0;
        let dem = Grid::new(
            4,
            3,
            vec![
                5.0, 4.0, 3.0, 4.0, //
                5.0, 4.0, nodata, 4.0, //
                5.0, 4.0, 3.0, 4.0,
            ],
            Some(nodata),
        )
        .unwrap();
        let directions = d8(&dem);
        let (accumulation, report) = accumulation_on_unit_cells(&directions);
        assert!(accumulation.get(2, 1).unwrap().is_nan());
        assert_eq!(accumulation.nodata().map(f64::is_nan), Some(true));
        assert_eq!(report.outlet_total, 11.0);
        assert_eq!(report.total_weight, 11.0);
    }

    #[test]
    fn cycles_are_rejected() {
        // Two cells pointing at each other (Esri: 1 = E, 16 = W).
        let grid = Grid::new(3, 1, vec![1u8, 16, 1], Some(255)).unwrap();
        let directions = FlowDirections::new(grid, D8Encoding::Esri).unwrap();
        let outcome = d8_accumulation::<f64>(
            &directions,
            CellSize::UNIT,
            &AccumulationOptions::default(),
            &NoProgress,
        );
        assert_eq!(outcome.err(), Some(HydrologyError::FlowCycle { cells: 2 }));
    }

    #[test]
    fn accumulation_is_conserved_on_random_dems() {
        for seed in 80..90u64 {
            let mut dem = random_dem(50, 50, seed, seed % 2 == 0);
            let valid = dem
                .data()
                .iter()
                .filter(|v| !dem.is_nodata_value(**v))
                .count();
            // Unfilled: pits keep their water, still conserved.
            let raw = d8(&dem);
            let (_, report) = accumulation_on_unit_cells(&raw);
            assert_eq!(report.outlet_total, valid as f64, "seed {seed}");
            fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
            let (accumulation, report) = d8_accumulation::<f32>(
                &d8(&dem),
                CellSize::UNIT,
                &AccumulationOptions::default(),
                &NoProgress,
            )
            .unwrap();
            assert_eq!(report.outlet_total, valid as f64);
            assert!(accumulation.data().iter().all(|v| v.is_nan() || *v >= 1.0));
            let (dinf, _) = dinf_on_unit_cells(
                &dem,
                DinfOptions {
                    resolve_flats: true,
                },
            );
            let (_, report) = dinf_accumulation::<f64>(
                &dinf,
                CellSize::UNIT,
                &AccumulationOptions::default(),
                &NoProgress,
            )
            .unwrap();
            assert!(
                (report.outlet_total - valid as f64).abs() < 1e-6 * valid as f64,
                "seed {seed}: {} vs {valid}",
                report.outlet_total
            );
        }
    }

    #[test]
    fn dinf_splits_flow_between_two_cells() {
        // A plane falling toward 30 degrees (E-NE); every cell splits 1/3 E, 2/3 NE.
        let (c, s) = (30f64.to_radians().cos(), 30f64.to_radians().sin());
        let mut data = Vec::new();
        for row in 0..3 {
            for col in 0..3 {
                data.push((100.0 - 10.0 * (c * col as f64 - s * row as f64)) as f32);
            }
        }
        let dem = Grid::new(3, 3, data, None).unwrap();
        let (flow, _) = dinf_on_unit_cells(&dem, DinfOptions::default());
        let (accumulation, report) = dinf_accumulation::<f64>(
            &flow,
            CellSize::UNIT,
            &AccumulationOptions::default(),
            &NoProgress,
        )
        .unwrap();
        let split = flow.split(0, 2).unwrap();
        // The south-west corner (0,2) is a source; its E neighbour (1,2) gets its share.
        let share_east = split.first_fraction;
        assert!((share_east - 1.0 / 3.0).abs() < 1e-3, "{share_east}");
        let east = accumulation.get(1, 2).unwrap();
        assert!((east - (1.0 + share_east)).abs() < 1e-9, "{east}");
        assert!((report.outlet_total - 9.0).abs() < 1e-9);
    }

    #[test]
    fn cancellation_stops_accumulation() {
        let dem = valley(60, 60);
        let directions = d8(&dem);
        let stop_halfway = |fraction: f64| fraction < 0.5;
        let outcome = d8_accumulation::<f32>(
            &directions,
            CellSize::UNIT,
            &AccumulationOptions::default(),
            &stop_halfway,
        );
        assert_eq!(outcome.err(), Some(HydrologyError::Cancelled));
    }

    #[test]
    fn hand_made_pit_keeps_its_water() {
        let dem = grid_from_rows(&[&[5.0, 5.0, 5.0], &[5.0, 1.0, 5.0], &[5.0, 5.0, 5.0]]);
        let (accumulation, report) = accumulation_on_unit_cells(&d8(&dem));
        assert_eq!(accumulation.get(1, 1), Some(9.0));
        assert_eq!(report.outlets, 1);
        assert_eq!(report.outlet_total, 9.0);
    }
}
