//! The eight-neighbourhood (D8) shared by every algorithm: [`Direction`], its fixed order, and
//! the index arithmetic that walks it.
//!
//! The order is clockwise from east — E, SE, S, SW, W, NW, N, NE — as in the Esri D8 code
//! sequence (1, 2, 4, ... 128; Jenson & Domingue 1988). Every tie in this module (steepest
//! descent, flat-mask minimum, outward edge direction, snapping) is broken by taking the first
//! candidate in this order, so results are deterministic. Rows grow southward (north up), so
//! "south" is `row + 1`.

use super::grid::CellSize;

/// The eight neighbour directions, in the fixed tie-breaking order (clockwise from east).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `col + 1`.
    East,
    /// `col + 1, row + 1`.
    SouthEast,
    /// `row + 1`.
    South,
    /// `col - 1, row + 1`.
    SouthWest,
    /// `col - 1`.
    West,
    /// `col - 1, row - 1`.
    NorthWest,
    /// `row - 1`.
    North,
    /// `col + 1, row - 1`.
    NorthEast,
}

impl Direction {
    /// All directions in tie-breaking order.
    pub const ALL: [Direction; 8] = [
        Direction::East,
        Direction::SouthEast,
        Direction::South,
        Direction::SouthWest,
        Direction::West,
        Direction::NorthWest,
        Direction::North,
        Direction::NorthEast,
    ];

    /// Position in [`Direction::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The direction at position `index` of [`Direction::ALL`].
    pub fn from_index(index: usize) -> Option<Self> {
        Self::ALL.get(index).copied()
    }

    /// `(column step, row step)`; rows grow southward.
    pub fn offset(self) -> (isize, isize) {
        let k = self.index();
        (COLUMN_STEP[k & 7], ROW_STEP[k & 7])
    }

    /// Whether the step is diagonal.
    pub fn is_diagonal(self) -> bool {
        self.index() % 2 == 1
    }

    /// The geometric angle of the step in radians, counter-clockwise from east in `[0, 2π)`,
    /// with real (possibly non-square) cell sizes.
    pub fn angle(self, cell_size: CellSize) -> f64 {
        let (col_step, row_step) = self.offset();
        let east = col_step as f64 * cell_size.dx;
        let north = -(row_step as f64) * cell_size.dy;
        let angle = north.atan2(east);
        if angle < 0.0 {
            angle + std::f64::consts::TAU
        } else {
            angle
        }
    }
}

/// Column step of each direction, in [`Direction::ALL`] order.
pub(crate) const COLUMN_STEP: [isize; 8] = [1, 1, 0, -1, -1, -1, 0, 1];
/// Row step of each direction, in [`Direction::ALL`] order.
pub(crate) const ROW_STEP: [isize; 8] = [0, 1, 1, 1, 0, -1, -1, -1];

/// Index arithmetic for one grid shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Neighbourhood {
    pub(crate) width: usize,
    pub(crate) height: usize,
    width_u32: u32,
    offsets: [isize; 8],
}

impl Neighbourhood {
    /// For a `width x height` grid; the caller guarantees `width * height` fits in `u32`
    /// (every [`super::grid::Grid`] does).
    pub(crate) fn new(width: usize, height: usize) -> Self {
        let stride = width as isize;
        let mut offsets = [0isize; 8];
        for (k, offset) in offsets.iter_mut().enumerate() {
            *offset = ROW_STEP[k] * stride + COLUMN_STEP[k];
        }
        Self {
            width,
            height,
            width_u32: u32::try_from(width).unwrap_or(u32::MAX),
            offsets,
        }
    }

    /// `(col, row)` of a cell index (one 32-bit division).
    #[inline]
    pub(crate) fn col_row(&self, index: usize) -> (usize, usize) {
        let index = index as u32;
        (
            (index % self.width_u32) as usize,
            (index / self.width_u32) as usize,
        )
    }

    /// Whether all eight neighbours of `(col, row)` are inside the grid.
    #[inline]
    pub(crate) fn is_interior(&self, col: usize, row: usize) -> bool {
        col > 0 && row > 0 && col + 1 < self.width && row + 1 < self.height
    }

    /// The neighbour of `index` (at `(col, row)`) in direction `k`, if inside the grid.
    #[inline]
    pub(crate) fn neighbour(
        &self,
        index: usize,
        col: usize,
        row: usize,
        k: usize,
    ) -> Option<usize> {
        let k = k & 7;
        if self.is_interior(col, row) {
            return Some(index.wrapping_add_signed(self.offsets[k]));
        }
        let next_col = col.checked_add_signed(COLUMN_STEP[k])?;
        let next_row = row.checked_add_signed(ROW_STEP[k])?;
        (next_col < self.width && next_row < self.height).then(|| next_row * self.width + next_col)
    }

    /// Calls `visit(k, neighbour_index)` for every in-grid neighbour, in direction order.
    #[inline(always)]
    pub(crate) fn for_each(&self, index: usize, visit: impl FnMut(usize, usize)) {
        let (col, row) = self.col_row(index);
        self.for_each_at(index, col, row, visit);
    }

    /// As [`Self::for_each`] when `(col, row)` is already known.
    #[inline(always)]
    pub(crate) fn for_each_at(
        &self,
        index: usize,
        col: usize,
        row: usize,
        mut visit: impl FnMut(usize, usize),
    ) {
        if self.is_interior(col, row) {
            for (k, offset) in self.offsets.iter().enumerate() {
                visit(k, index.wrapping_add_signed(*offset));
            }
        } else {
            for k in 0..8 {
                if let Some(neighbour) = self.neighbour(index, col, row, k) {
                    visit(k, neighbour);
                }
            }
        }
    }

    /// The direction pointing off the grid from a border cell (E/W/N/S by edge, diagonal at
    /// corners); `None` for interior cells.
    pub(crate) fn outward_direction(&self, col: usize, row: usize) -> Option<usize> {
        let north = row == 0;
        let south = !north && row + 1 == self.height;
        let west = col == 0;
        let east = !west && col + 1 == self.width;
        let direction = match (north, south, west, east) {
            (true, _, true, _) => Direction::NorthWest,
            (true, _, _, true) => Direction::NorthEast,
            (_, true, true, _) => Direction::SouthWest,
            (_, true, _, true) => Direction::SouthEast,
            (true, ..) => Direction::North,
            (_, true, ..) => Direction::South,
            (_, _, true, _) => Direction::West,
            (.., true) => Direction::East,
            _ => return None,
        };
        Some(direction.index())
    }
}

/// Centre-to-centre distance to each neighbour, in direction order.
pub(crate) fn neighbour_distances(cell_size: CellSize) -> [f64; 8] {
    let diagonal = cell_size.diagonal();
    let mut distances = [0.0; 8];
    for (k, distance) in distances.iter_mut().enumerate() {
        *distance = match k {
            0 | 4 => cell_size.dx,
            2 | 6 => cell_size.dy,
            _ => diagonal,
        };
    }
    distances
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

    #[test]
    fn offsets_and_angles_follow_the_documented_order() {
        assert_eq!(Direction::East.offset(), (1, 0));
        assert_eq!(Direction::South.offset(), (0, 1));
        assert_eq!(Direction::NorthEast.offset(), (1, -1));
        let unit = CellSize::UNIT;
        assert!((Direction::East.angle(unit)).abs() < 1e-15);
        assert!((Direction::NorthEast.angle(unit) - FRAC_PI_4).abs() < 1e-15);
        assert!((Direction::North.angle(unit) - FRAC_PI_2).abs() < 1e-15);
        assert!((Direction::West.angle(unit) - PI).abs() < 1e-15);
        assert!((Direction::SouthEast.angle(unit) - 7.0 * FRAC_PI_4).abs() < 1e-15);
        let wide = CellSize::new(2.0, 1.0).unwrap();
        assert!((Direction::NorthEast.angle(wide) - 0.5f64.atan()).abs() < 1e-15);
        for (k, direction) in Direction::ALL.iter().enumerate() {
            assert_eq!(direction.index(), k);
            assert_eq!(Direction::from_index(k), Some(*direction));
        }
        assert_eq!(Direction::from_index(8), None);
    }

    #[test]
    fn border_cells_only_see_in_grid_neighbours() {
        let hood = Neighbourhood::new(3, 3);
        let mut seen = Vec::new();
        hood.for_each(0, |k, n| seen.push((k, n)));
        assert_eq!(seen, vec![(0, 1), (1, 4), (2, 3)]);
        let mut centre = Vec::new();
        hood.for_each(4, |_, n| centre.push(n));
        assert_eq!(centre, vec![5, 8, 7, 6, 3, 0, 1, 2]);
        assert_eq!(hood.col_row(7), (1, 2));
    }

    #[test]
    fn outward_directions_point_off_the_grid() {
        let hood = Neighbourhood::new(4, 3);
        assert_eq!(
            hood.outward_direction(0, 0),
            Some(Direction::NorthWest.index())
        );
        assert_eq!(
            hood.outward_direction(3, 2),
            Some(Direction::SouthEast.index())
        );
        assert_eq!(hood.outward_direction(1, 0), Some(Direction::North.index()));
        assert_eq!(hood.outward_direction(3, 1), Some(Direction::East.index()));
        assert_eq!(hood.outward_direction(1, 1), None);
        for row in 0..3 {
            for col in 0..4 {
                if let Some(k) = hood.outward_direction(col, row) {
                    assert_eq!(hood.neighbour(row * 4 + col, col, row, k), None);
                }
            }
        }
    }

    #[test]
    fn distances_use_the_real_cell_size() {
        let distances = neighbour_distances(CellSize::new(3.0, 4.0).unwrap());
        assert_eq!(distances, [3.0, 5.0, 4.0, 5.0, 3.0, 5.0, 4.0, 5.0]);
    }
}
