//! D8 flow directions: each cell drains to the one neighbour of steepest descent (O'Callaghan &
//! Mark 1984; Jenson & Domingue 1988), with flats resolved by the flat mask of Barnes, Lehman &
//! Mulla (2014, Computers & Geosciences 62:128-135; see [`super::flats`]).
//!
//! **Slope** is `drop / distance` with the real cell size: `dx` east-west, `dy` north-south,
//! `sqrt(dx² + dy²)` diagonally, so non-square cells are handled. It is evaluated as
//! `drop * (1 / distance)` in `f64` (the drop of two `f32` values is exact in `f64`).
//! **Ties** go to the first direction in the fixed order E, SE, S, SW, W, NW, N, NE
//! ([`Direction::ALL`]).
//!
//! **Edge policy.** A cell with a strictly lower in-grid, non-nodata neighbour always flows to
//! the steepest one. Otherwise:
//! 1. a border cell flows off the grid, outward: N/S/E/W by its edge, the diagonal at a corner;
//! 2. a cell next to nodata flows into its first nodata neighbour (in direction order);
//! 3. a cell on a flat with an outlet gets the flat-mask direction (when flats are resolved);
//! 4. anything else (a pit, or a flat without outlet) gets the no-flow code 0.
//!
//! This matches the outlets of [`super::fill`], so a filled DEM drains completely. Nodata cells
//! get [`D8_NODATA`] (255), which is also the output grid's nodata value.
//!
//! **Encodings** ([`D8Encoding`]): Esri (1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE, the
//! default), TauDEM (1 E, 2 NE, 3 N, 4 NW, 5 W, 6 SW, 7 S, 8 SE) and GRASS `r.watershed`
//! (1 NE, 2 N, 3 NW, 4 W, 5 SW, 6 S, 7 SE, 8 E). Internally directions are the index in
//! [`Direction::ALL`] ("canonical" codes), translated once at the end.

use super::error::{HydrologyError, Result};
use super::flats::{resolve_flats_canonical, FlatReport};
use super::grid::{is_nodata, CellSize, Grid};
use super::neighbours::{neighbour_distances, Direction, Neighbourhood};
use super::progress::{Progress, ProgressTracker, SubProgress};

/// Output code of cells that do not flow (pits, flats without outlet).
pub const NO_FLOW: u8 = 0;
/// Output code (and grid nodata value) of nodata cells.
pub const D8_NODATA: u8 = 255;

/// Canonical code: no flow.
pub(crate) const CANONICAL_NO_FLOW: u8 = 8;
/// Canonical code: nodata.
pub(crate) const CANONICAL_NODATA: u8 = 9;

/// How directions are written as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum D8Encoding {
    /// 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, 128 NE (ArcGIS, RichDEM's ArcGIS mode, pysheds).
    #[default]
    Esri,
    /// 1 E, 2 NE, 3 N, 4 NW, 5 W, 6 SW, 7 S, 8 SE (TauDEM `D8FlowDir`).
    TauDem,
    /// 1 NE, 2 N, 3 NW, 4 W, 5 SW, 6 S, 7 SE, 8 E (GRASS `r.watershed`).
    Grass,
}

impl D8Encoding {
    /// Codes in [`Direction::ALL`] order (E, SE, S, SW, W, NW, N, NE).
    fn codes(self) -> [u8; 8] {
        match self {
            Self::Esri => [1, 2, 4, 8, 16, 32, 64, 128],
            Self::TauDem => [1, 8, 7, 6, 5, 4, 3, 2],
            Self::Grass => [8, 7, 6, 5, 4, 3, 2, 1],
        }
    }

    /// The code of `direction`.
    pub fn code(self, direction: Direction) -> u8 {
        self.codes()
            .get(direction.index())
            .copied()
            .unwrap_or(NO_FLOW)
    }

    /// The direction a code stands for (`None` for no-flow or unknown codes).
    pub fn direction(self, code: u8) -> Option<Direction> {
        let position = self.codes().iter().position(|&c| c == code)?;
        Direction::from_index(position)
    }

    /// Canonical → encoded translation table.
    fn encode_table(self) -> [u8; 10] {
        let codes = self.codes();
        let mut table = [NO_FLOW; 10];
        table[..8].copy_from_slice(&codes);
        table[usize::from(CANONICAL_NO_FLOW)] = NO_FLOW;
        table[usize::from(CANONICAL_NODATA)] = D8_NODATA;
        table
    }
}

/// A D8 direction grid and the encoding its codes use.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowDirections {
    grid: Grid<u8>,
    encoding: D8Encoding,
}

/// Where one cell's flow goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receiver {
    /// Into another in-grid, valid cell.
    Cell(usize),
    /// Off the grid or into a nodata cell: an outlet.
    Outlet,
    /// No flow (pit or unresolved flat): an outlet that keeps its water.
    Pit,
    /// The cell itself is nodata.
    Nodata,
}

impl FlowDirections {
    /// Wraps a direction grid, checking every code: it must be the grid's nodata value, 0 (no
    /// flow) or a direction code of `encoding`.
    pub fn new(grid: Grid<u8>, encoding: D8Encoding) -> Result<Self> {
        let table = decode_table(encoding, grid.nodata());
        if let Some(position) = grid
            .data()
            .iter()
            .position(|&code| table[usize::from(code)] == INVALID_CODE)
        {
            let (col, row) = (position % grid.width(), position / grid.width());
            return Err(HydrologyError::InvalidDirectionCode {
                code: grid.data().get(position).copied().unwrap_or_default(),
                col,
                row,
            });
        }
        Ok(Self { grid, encoding })
    }

    /// The encoded grid (nodata value [`D8_NODATA`] when produced here).
    pub fn grid(&self) -> &Grid<u8> {
        &self.grid
    }

    /// Gives the encoded grid back.
    pub fn into_grid(self) -> Grid<u8> {
        self.grid
    }

    /// The encoding of the codes.
    pub fn encoding(&self) -> D8Encoding {
        self.encoding
    }

    /// The direction of `(col, row)`: `None` outside the grid, for nodata and for no flow.
    pub fn direction(&self, col: usize, row: usize) -> Option<Direction> {
        let code = self.grid.get(col, row)?;
        if Some(code) == self.grid.nodata() {
            return None;
        }
        self.encoding.direction(code)
    }

    /// Rewrites the codes in another encoding.
    pub fn reencode(&mut self, encoding: D8Encoding) {
        let canonical = self.canonical();
        let table = encoding.encode_table();
        for (code, canonical) in self.grid.data_mut().iter_mut().zip(canonical) {
            *code = table[usize::from(canonical.min(CANONICAL_NODATA))];
        }
        self.grid.set_nodata(Some(D8_NODATA));
        self.encoding = encoding;
    }

    /// The directions as canonical codes (0..8 = [`Direction::ALL`] index, 8 no flow, 9 nodata).
    pub(crate) fn canonical(&self) -> Vec<u8> {
        let table = decode_table(self.encoding, self.grid.nodata());
        self.grid
            .data()
            .iter()
            .map(|&code| match table[usize::from(code)] {
                INVALID_CODE => CANONICAL_NO_FLOW,
                canonical => canonical,
            })
            .collect()
    }

    /// Wraps canonical codes, translating them to `encoding`.
    pub(crate) fn from_canonical(
        width: usize,
        height: usize,
        mut canonical: Vec<u8>,
        encoding: D8Encoding,
    ) -> Result<Self> {
        let table = encoding.encode_table();
        for code in canonical.iter_mut() {
            *code = table[usize::from((*code).min(CANONICAL_NODATA))];
        }
        Ok(Self {
            grid: Grid::new(width, height, canonical, Some(D8_NODATA))?,
            encoding,
        })
    }

    /// A reader that follows the directions cell by cell.
    pub(crate) fn router(&self) -> Router<'_> {
        Router {
            codes: self.grid.data(),
            table: decode_table(self.encoding, self.grid.nodata()),
            hood: Neighbourhood::new(self.grid.width(), self.grid.height()),
        }
    }
}

/// Follows encoded directions without decoding the whole grid.
pub(crate) struct Router<'a> {
    codes: &'a [u8],
    table: [u8; 256],
    pub(crate) hood: Neighbourhood,
}

impl Router<'_> {
    /// The canonical code of a cell (nodata outside the grid).
    #[inline]
    pub(crate) fn canonical(&self, index: usize) -> u8 {
        match self.codes.get(index) {
            Some(&code) => match self.table[usize::from(code)] {
                INVALID_CODE => CANONICAL_NO_FLOW,
                canonical => canonical,
            },
            None => CANONICAL_NODATA,
        }
    }

    /// Where the flow of `index` goes.
    #[inline]
    pub(crate) fn receiver(&self, index: usize) -> Receiver {
        let canonical = self.canonical(index);
        match canonical {
            CANONICAL_NODATA => Receiver::Nodata,
            CANONICAL_NO_FLOW => Receiver::Pit,
            k => {
                let (col, row) = self.hood.col_row(index);
                match self.hood.neighbour(index, col, row, usize::from(k)) {
                    Some(next) if self.canonical(next) != CANONICAL_NODATA => Receiver::Cell(next),
                    _ => Receiver::Outlet,
                }
            }
        }
    }
}

const INVALID_CODE: u8 = 0xff;

/// Encoded → canonical table for one encoding and nodata value.
fn decode_table(encoding: D8Encoding, nodata: Option<u8>) -> [u8; 256] {
    let mut table = [INVALID_CODE; 256];
    table[usize::from(NO_FLOW)] = CANONICAL_NO_FLOW;
    for (k, code) in encoding.codes().iter().enumerate() {
        table[usize::from(*code)] = k as u8;
    }
    if let Some(nodata) = nodata {
        table[usize::from(nodata)] = CANONICAL_NODATA;
    }
    table
}

/// Options of [`d8_flow_directions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct D8Options {
    /// How codes are written.
    pub encoding: D8Encoding,
    /// Give flat cells directions from the Barnes et al. (2014) flat mask.
    pub resolve_flats: bool,
}

impl Default for D8Options {
    fn default() -> Self {
        Self {
            encoding: D8Encoding::Esri,
            resolve_flats: true,
        }
    }
}

impl D8Options {
    /// Esri codes, flats left without flow (for surfaces that already drain, e.g. epsilon-filled).
    pub fn without_flats() -> Self {
        Self {
            encoding: D8Encoding::Esri,
            resolve_flats: false,
        }
    }
}

/// What [`d8_flow_directions`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct D8Report {
    /// Cells that flow off the grid or into nodata (including by the edge policy).
    pub outlet_cells: u64,
    /// Cells left with the no-flow code (pits, flats without outlet).
    pub no_flow_cells: u64,
    /// Flat resolution (all zero when flats were not resolved).
    pub flats: FlatReport,
}

/// D8 steepest-descent directions of `dem` (see the module documentation for the policies).
pub fn d8_flow_directions(
    dem: &Grid<f32>,
    cell_size: CellSize,
    options: &D8Options,
    progress: &dyn Progress,
) -> Result<(FlowDirections, D8Report)> {
    cell_size.validate()?;
    let (width, height) = dem.shape();
    let hood = Neighbourhood::new(width, height);
    let descent_share = if options.resolve_flats { 0.6 } else { 1.0 };
    let descent_progress = SubProgress::new(progress, 0.0, descent_share);
    let mut canonical = steepest_descent(dem, cell_size, &hood, &descent_progress)?;

    let mut report = D8Report::default();
    if options.resolve_flats {
        let flat_progress = SubProgress::new(progress, descent_share, 1.0 - descent_share);
        report.flats = resolve_flats_canonical(
            dem.data(),
            dem.nodata_or_nan(),
            &hood,
            &mut canonical,
            &flat_progress,
        )?;
    }
    for (index, &code) in canonical.iter().enumerate() {
        match code {
            CANONICAL_NO_FLOW => report.no_flow_cells += 1,
            CANONICAL_NODATA => {}
            k => {
                let (col, row) = hood.col_row(index);
                let target = hood.neighbour(index, col, row, usize::from(k));
                let drains_out = target
                    .and_then(|t| canonical.get(t))
                    .is_none_or(|&t| t == CANONICAL_NODATA);
                if drains_out {
                    report.outlet_cells += 1;
                }
            }
        }
    }
    let directions = FlowDirections::from_canonical(width, height, canonical, options.encoding)?;
    Ok((directions, report))
}

/// Canonical steepest-descent codes with the edge policy, flats left as no flow.
pub(crate) fn steepest_descent(
    dem: &Grid<f32>,
    cell_size: CellSize,
    hood: &Neighbourhood,
    progress: &dyn Progress,
) -> Result<Vec<u8>> {
    let (width, height) = dem.shape();
    let elevations = dem.data();
    let nodata = dem.nodata_or_nan();
    let inverse_distance = neighbour_distances(cell_size).map(|d| 1.0 / d);
    let mut codes = vec![CANONICAL_NO_FLOW; elevations.len()];
    let mut tracker = ProgressTracker::new(progress, height as u64);

    for (row, row_codes) in codes.chunks_mut(width).enumerate() {
        tracker.tick(row as u64)?;
        let row_start = row * width;
        for (col, code) in row_codes.iter_mut().enumerate() {
            let index = row_start + col;
            let Some(&elevation) = elevations.get(index) else {
                continue;
            };
            if is_nodata(elevation, nodata) {
                *code = CANONICAL_NODATA;
                continue;
            }
            let centre = f64::from(elevation);
            let mut best_direction = CANONICAL_NO_FLOW;
            let mut best_slope = 0.0f64;
            let mut first_nodata = CANONICAL_NO_FLOW;
            hood.for_each_at(index, col, row, |k, neighbour| {
                let Some(&other) = elevations.get(neighbour) else {
                    return;
                };
                if is_nodata(other, nodata) {
                    if first_nodata == CANONICAL_NO_FLOW {
                        first_nodata = k as u8;
                    }
                    return;
                }
                let slope = (centre - f64::from(other)) * inverse_distance[k];
                if slope > best_slope {
                    best_slope = slope;
                    best_direction = k as u8;
                }
            });
            *code = if best_direction != CANONICAL_NO_FLOW {
                best_direction
            } else if let Some(outward) = hood.outward_direction(col, row) {
                outward as u8
            } else {
                first_nodata
            };
        }
    }
    tracker.finish()?;
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrology::fill::{fill_depressions, FillMode};
    use crate::hydrology::progress::NoProgress;
    use crate::hydrology::test_support::{
        assert_drains, d8_on_unit_cells, grid_from_rows, random_dem,
    };

    fn codes(directions: &FlowDirections) -> Vec<u8> {
        directions.grid().data().to_vec()
    }

    #[test]
    fn encodings_round_trip_and_match_their_tables() {
        use Direction::*;
        assert_eq!(D8Encoding::Esri.code(NorthEast), 128);
        assert_eq!(D8Encoding::TauDem.code(NorthEast), 2);
        assert_eq!(D8Encoding::TauDem.code(South), 7);
        assert_eq!(D8Encoding::Grass.code(NorthEast), 1);
        assert_eq!(D8Encoding::Grass.code(East), 8);
        for encoding in [D8Encoding::Esri, D8Encoding::TauDem, D8Encoding::Grass] {
            for direction in Direction::ALL {
                assert_eq!(
                    encoding.direction(encoding.code(direction)),
                    Some(direction)
                );
            }
            assert_eq!(encoding.direction(NO_FLOW), None);
        }
        assert_eq!(D8Encoding::Esri.direction(3), None);
    }

    #[test]
    fn steepest_descent_uses_the_real_cell_size() {
        // Drop 3 east over dx = 10 (slope 0.3); drop 2 south over dy = 5 (0.4);
        // drop 4 south-east over sqrt(125) (0.358). South wins with these cells...
        let dem = grid_from_rows(&[&[5.0, 2.0], &[3.0, 1.0]]);
        let tall = CellSize::new(10.0, 5.0).unwrap();
        let (directions, _) =
            d8_flow_directions(&dem, tall, &D8Options::without_flats(), &NoProgress).unwrap();
        assert_eq!(directions.direction(0, 0), Some(Direction::South));
        // ...and east wins when the cells are wide the other way.
        let wide = CellSize::new(5.0, 10.0).unwrap();
        let (directions, _) =
            d8_flow_directions(&dem, wide, &D8Options::without_flats(), &NoProgress).unwrap();
        assert_eq!(directions.direction(0, 0), Some(Direction::East));
    }

    #[test]
    fn ties_take_the_first_direction_in_order() {
        // Equal drops east and south: east comes first.
        let dem = grid_from_rows(&[
            &[9.0, 9.0, 9.0, 9.0],
            &[9.0, 5.0, 4.0, 9.0],
            &[9.0, 4.0, 9.0, 9.0],
            &[9.0, 9.0, 9.0, 9.0],
        ]);
        let (directions, _) = d8_on_unit_cells(&dem, D8Options::without_flats());
        assert_eq!(directions.direction(1, 1), Some(Direction::East));
    }

    #[test]
    fn border_and_nodata_edges_flow_outward() {
        let nodata = -1.0;
        let dem = Grid::new(
            4,
            4,
            vec![
                1.0, 1.0, 1.0, 1.0, //
                1.0, 5.0, 5.0, 1.0, //
                1.0, 5.0, nodata, 1.0, //
                1.0, 1.0, 1.0, 1.0,
            ],
            Some(nodata),
        )
        .unwrap();
        let (directions, report) = d8_on_unit_cells(&dem, D8Options::without_flats());
        use Direction::*;
        assert_eq!(directions.direction(0, 0), Some(NorthWest));
        assert_eq!(directions.direction(1, 0), Some(North));
        assert_eq!(directions.direction(3, 3), Some(SouthEast));
        assert_eq!(directions.direction(0, 2), Some(West));
        assert_eq!(directions.direction(3, 1), Some(East));
        // (1,1) at 5 has lower border neighbours: steepest is the first cardinal, W? No: the
        // first in order with the largest slope: W (drop 4 over 1) beats diagonals.
        assert_eq!(directions.direction(1, 1), Some(West));
        assert_eq!(directions.grid().get(2, 2), Some(D8_NODATA));
        assert_eq!(directions.grid().nodata(), Some(D8_NODATA));
        assert_eq!(report.no_flow_cells, 0);
        assert_eq!(report.outlet_cells, 12);
        // A raised cell ringed by equal cells flows into the nodata beside it.
        let ring = Grid::new(
            3,
            3,
            vec![2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, nodata],
            Some(nodata),
        )
        .unwrap();
        let (directions, _) = d8_on_unit_cells(&ring, D8Options::without_flats());
        assert_eq!(directions.direction(1, 1), Some(SouthEast));
    }

    #[test]
    fn pits_get_no_flow() {
        let dem = grid_from_rows(&[&[5.0, 5.0, 5.0], &[5.0, 1.0, 5.0], &[5.0, 5.0, 5.0]]);
        let (directions, report) = d8_on_unit_cells(&dem, D8Options::default());
        assert_eq!(directions.grid().get(1, 1), Some(NO_FLOW));
        assert_eq!(report.no_flow_cells, 1);
        assert_eq!(report.flats.undrained_cells, 1);
    }

    #[test]
    fn encodings_describe_the_same_flow() {
        let mut dem = random_dem(30, 20, 5, true);
        fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
        let esri = d8_on_unit_cells(&dem, D8Options::default()).0;
        for encoding in [D8Encoding::TauDem, D8Encoding::Grass] {
            let options = D8Options {
                encoding,
                resolve_flats: true,
            };
            let other = d8_flow_directions(&dem, CellSize::UNIT, &options, &NoProgress)
                .unwrap()
                .0;
            assert_ne!(codes(&esri), codes(&other));
            for row in 0..20 {
                for col in 0..30 {
                    assert_eq!(esri.direction(col, row), other.direction(col, row));
                }
            }
            let mut reencoded = esri.clone();
            reencoded.reencode(encoding);
            assert_eq!(reencoded, other);
        }
    }

    #[test]
    fn foreign_grids_are_validated() {
        let grid = Grid::new(2, 1, vec![1u8, 3], Some(255)).unwrap();
        assert_eq!(
            FlowDirections::new(grid, D8Encoding::Esri),
            Err(HydrologyError::InvalidDirectionCode {
                code: 3,
                col: 1,
                row: 0
            })
        );
        let grid = Grid::new(2, 1, vec![1u8, 3], Some(255)).unwrap();
        assert!(FlowDirections::new(grid, D8Encoding::TauDem).is_ok());
    }

    /// D8 picks the steepest strictly lower neighbour wherever one exists (exact ties and
    /// near-ties excluded), on square and non-square cells.
    #[test]
    fn d8_is_local_steepest_descent_on_random_dems() {
        for (seed, cell_size) in [
            (60u64, CellSize::UNIT),
            (61, CellSize::new(30.0, 10.0).unwrap()),
            (62, CellSize::new(0.5, 2.0).unwrap()),
        ] {
            let dem = random_dem(50, 50, seed, true);
            let (directions, _) =
                d8_flow_directions(&dem, cell_size, &D8Options::default(), &NoProgress).unwrap();
            let distances = neighbour_distances(cell_size);
            let nodata = dem.nodata_or_nan();
            let mut checked = 0;
            for row in 0..50 {
                for col in 0..50 {
                    let here = dem.get(col, row).unwrap();
                    if is_nodata(here, nodata) {
                        continue;
                    }
                    let mut slopes = Vec::new();
                    for direction in Direction::ALL {
                        let (dc, dr) = direction.offset();
                        let (Some(c), Some(r)) =
                            (col.checked_add_signed(dc), row.checked_add_signed(dr))
                        else {
                            continue;
                        };
                        let Some(there) = dem.get(c, r) else { continue };
                        if is_nodata(there, nodata) || there >= here {
                            continue;
                        }
                        let slope =
                            (f64::from(here) - f64::from(there)) / distances[direction.index()];
                        slopes.push((slope, direction));
                    }
                    slopes.sort_by(|a, b| b.0.total_cmp(&a.0));
                    let Some(&(best, best_direction)) = slopes.first() else {
                        continue;
                    };
                    if slopes.get(1).is_some_and(|s| s.0 >= best * (1.0 - 1e-9)) {
                        continue;
                    }
                    assert_eq!(directions.direction(col, row), Some(best_direction));
                    checked += 1;
                }
            }
            assert!(checked > 1500, "only {checked} cells checked");
        }
    }

    #[test]
    fn progress_is_reported_about_a_hundred_times_and_can_cancel() {
        let mut dem = random_dem(120, 120, 8, true);
        fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
        let calls = std::cell::Cell::new(0u32);
        let count = |fraction: f64| {
            assert!((0.0..=1.0).contains(&fraction));
            calls.set(calls.get() + 1);
            true
        };
        d8_flow_directions(&dem, CellSize::UNIT, &D8Options::default(), &count).unwrap();
        assert!((10..=105).contains(&calls.get()), "{} calls", calls.get());
        let stop_at_a_third = |fraction: f64| fraction < 0.3;
        let outcome = d8_flow_directions(
            &dem,
            CellSize::UNIT,
            &D8Options::default(),
            &stop_at_a_third,
        );
        assert_eq!(outcome.err(), Some(HydrologyError::Cancelled));
    }

    #[test]
    fn filled_and_resolved_random_dems_drain_everywhere() {
        for seed in 70..80u64 {
            let mut dem = random_dem(50, 50, seed, seed % 2 == 0);
            fill_depressions(&mut dem, CellSize::UNIT, FillMode::Plain, &NoProgress).unwrap();
            let (directions, report) = d8_on_unit_cells(&dem, D8Options::default());
            assert_eq!(report.no_flow_cells, 0, "seed {seed}");
            assert_eq!(report.flats.undrained_cells, 0);
            assert!(report.flats.flats > 0);
            assert_drains(&directions);
        }
    }
}
