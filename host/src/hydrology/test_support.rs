//! Test helpers shared by the hydrology tests: a tiny deterministic PRNG (Marsaglia's 2003
//! xorshift64, so the tests need no dependency), random DEM generation with pits, flats and
//! nodata holes, D8 and D-infinity directions and D8 accumulation on unit cells, and the
//! "every cell drains" check used by the property tests.

use super::accumulation::{d8_accumulation, AccumulationOptions, AccumulationReport};
use super::d8::{d8_flow_directions, D8Options, D8Report, FlowDirections, Receiver};
use super::dinf::{dinf_flow_directions, DinfFlow, DinfOptions, DinfReport};
use super::grid::{CellSize, Grid};
use super::progress::NoProgress;

/// Marsaglia (2003) xorshift64.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // SplitMix64 step so that small seeds give unrelated streams; never zero.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..bound`.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }
}

/// A grid from literal rows (no nodata).
pub(crate) fn grid_from_rows(rows: &[&[f32]]) -> Grid<f32> {
    let height = rows.len();
    let width = rows.first().map_or(0, |r| r.len());
    let data: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Grid::new(width, height, data, None).expect("rectangular rows")
}

/// A rough random terrain: waves plus noise, quantised to 1/8 so ties and flats occur, with
/// random pits (dug cells and patches) and level patches; with `holes`, nodata blocks
/// (declared value -9999) and a NaN cell.
pub(crate) fn random_dem(width: usize, height: usize, seed: u64, holes: bool) -> Grid<f32> {
    let mut rng = XorShift::new(seed);
    let phase = rng.next_f64() * 6.0;
    let mut data: Vec<f32> = (0..width * height)
        .map(|index| {
            let (x, y) = ((index % width) as f64, (index / width) as f64);
            let z = 50.0
                + 8.0 * (x / 7.0 + phase).sin()
                + 6.0 * (y / 5.0).cos()
                + 3.0 * ((x + y) / 3.0).sin()
                + 2.0 * rng.next_f64();
            ((z * 8.0).round() / 8.0) as f32
        })
        .collect();
    let cells = width * height;
    for _ in 0..cells / 40 {
        let index = rng.below(cells as u64) as usize;
        data[index] -= (1 + rng.below(6)) as f32;
    }
    for _ in 0..cells / 400 + 1 {
        let (col, row) = (
            rng.below(width as u64) as usize,
            rng.below(height as u64) as usize,
        );
        let level = data[row * width + col];
        let dig = rng.below(2) == 0;
        for r in row..(row + 3).min(height) {
            for c in col..(col + 3).min(width) {
                data[r * width + c] = if dig { level - 3.0 } else { level };
            }
        }
    }
    let nodata = if holes {
        for _ in 0..cells / 500 + 1 {
            let (col, row) = (
                rng.below(width as u64) as usize,
                rng.below(height as u64) as usize,
            );
            for r in row..(row + 2).min(height) {
                for c in col..(col + 2).min(width) {
                    data[r * width + c] = -9999.0;
                }
            }
        }
        let index = rng.below(cells as u64) as usize;
        data[index] = f32::NAN;
        Some(-9999.0)
    } else {
        None
    };
    Grid::new(width, height, data, nodata).expect("consistent size")
}

/// D8 directions of `dem` on unit cells, without progress reporting.
pub(crate) fn d8_on_unit_cells(dem: &Grid<f32>, options: D8Options) -> (FlowDirections, D8Report) {
    d8_flow_directions(dem, CellSize::UNIT, &options, &NoProgress).expect("D8 directions")
}

/// D8 flow accumulation, in cells, of `directions` on unit cells, without progress reporting.
pub(crate) fn accumulation_on_unit_cells(
    directions: &FlowDirections,
) -> (Grid<f64>, AccumulationReport) {
    d8_accumulation(
        directions,
        CellSize::UNIT,
        &AccumulationOptions::default(),
        &NoProgress,
    )
    .expect("D8 accumulation")
}

/// D-infinity directions of `dem` on unit cells, without progress reporting.
pub(crate) fn dinf_on_unit_cells(dem: &Grid<f32>, options: DinfOptions) -> (DinfFlow, DinfReport) {
    dinf_flow_directions(dem, CellSize::UNIT, &options, &NoProgress).expect("D-infinity directions")
}

/// Panics unless every valid cell reaches the grid edge or nodata by following the directions:
/// no cell without flow, no cycle.
pub(crate) fn assert_drains(directions: &FlowDirections) {
    const UNKNOWN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DRAINS: u8 = 2;
    let router = directions.router();
    let cells = directions.grid().cell_count();
    let mut state = vec![UNKNOWN; cells];
    let mut path = Vec::new();
    for start in 0..cells {
        let mut cell = start;
        path.clear();
        loop {
            if state[cell] == DRAINS {
                break;
            }
            assert_ne!(state[cell], ON_PATH, "cycle through cell {cell}");
            match router.receiver(cell) {
                Receiver::Nodata | Receiver::Outlet => break,
                Receiver::Pit => panic!("cell {cell} (reached from {start}) has no flow"),
                Receiver::Cell(next) => {
                    state[cell] = ON_PATH;
                    path.push(cell);
                    cell = next;
                }
            }
        }
        for &on_path in &path {
            state[on_path] = DRAINS;
        }
        state[start] = DRAINS;
    }
}
