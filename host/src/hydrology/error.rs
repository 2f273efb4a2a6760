//! The one error type of the hydrology algorithms.
//!
//! Every algorithm in this module validates its inputs up front (grid shapes, cell sizes,
//! direction codes, pour points) and reports problems here instead of panicking, because the
//! grids come from user files. The enum is written by hand (`Display` + `std::error::Error`) so
//! that the module stays std-only; it mirrors what `thiserror` would generate.

use std::fmt;

/// What went wrong in a hydrology computation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HydrologyError {
    /// The progress callback asked to stop.
    Cancelled,
    /// A grid's data does not hold `width * height` values.
    DataLength {
        /// `width * height`.
        expected: usize,
        /// The length of the data given.
        found: usize,
    },
    /// The grid is empty or has more cells than the `u32` cell indices used internally allow.
    UnsupportedSize {
        /// Columns.
        width: usize,
        /// Rows.
        height: usize,
    },
    /// Two grids that must line up cell for cell have different shapes.
    ShapeMismatch {
        /// What the second grid is (`"weights"`, `"accumulation"`...).
        what: &'static str,
        /// `(width, height)` of the reference grid.
        expected: (usize, usize),
        /// `(width, height)` of the mismatching grid.
        found: (usize, usize),
    },
    /// The cell size is not finite and positive in both axes.
    InvalidCellSize {
        /// Cell width in map units.
        dx: f64,
        /// Cell height in map units.
        dy: f64,
    },
    /// The geotransform is not usable (rotated, degenerate or not finite).
    InvalidGeoTransform(String),
    /// A parameter is out of its domain.
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A flow-direction grid holds a code that is not part of its encoding.
    InvalidDirectionCode {
        /// The offending code.
        code: u8,
        /// Column of the first cell holding it.
        col: usize,
        /// Row of the first cell holding it.
        row: usize,
    },
    /// Flow directions form a cycle, so flow never reaches an outlet.
    FlowCycle {
        /// How many cells could not be ordered topologically.
        cells: usize,
    },
    /// A pour point lies outside the grid or on a nodata cell.
    PourPointOutside {
        /// Index of the pour point in the list given.
        index: usize,
        /// Its map x coordinate.
        x: f64,
        /// Its map y coordinate.
        y: f64,
    },
}

impl fmt::Display for HydrologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => write!(f, "hydrology computation cancelled"),
            Self::DataLength { expected, found } => write!(
                f,
                "grid data holds {found} values, but width * height is {expected}"
            ),
            Self::UnsupportedSize { width, height } => write!(
                f,
                "grid of {width} x {height} cells is empty or exceeds the supported {} cells",
                super::grid::MAX_CELLS
            ),
            Self::ShapeMismatch {
                what,
                expected,
                found,
            } => write!(
                f,
                "{what} grid is {} x {}, expected {} x {}",
                found.0, found.1, expected.0, expected.1
            ),
            Self::InvalidCellSize { dx, dy } => write!(
                f,
                "cell size ({dx}, {dy}) must be finite and positive in both axes"
            ),
            Self::InvalidGeoTransform(reason) => write!(f, "invalid geotransform: {reason}"),
            Self::InvalidParameter { name, reason } => write!(f, "invalid {name}: {reason}"),
            Self::InvalidDirectionCode { code, col, row } => write!(
                f,
                "flow direction code {code} at column {col}, row {row} is not part of the encoding"
            ),
            Self::FlowCycle { cells } => write!(
                f,
                "flow directions contain a cycle: {cells} cells never reach an outlet"
            ),
            Self::PourPointOutside { index, x, y } => write!(
                f,
                "pour point {index} at ({x}, {y}) lies outside the grid or on nodata"
            ),
        }
    }
}

impl std::error::Error for HydrologyError {}

/// Result alias for the hydrology module.
pub type Result<T> = std::result::Result<T, HydrologyError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let message = HydrologyError::ShapeMismatch {
            what: "weights",
            expected: (3, 2),
            found: (2, 3),
        }
        .to_string();
        assert_eq!(message, "weights grid is 2 x 3, expected 3 x 2");
        assert!(HydrologyError::Cancelled.to_string().contains("cancelled"));
        let boxed: Box<dyn std::error::Error> = Box::new(HydrologyError::FlowCycle { cells: 4 });
        assert!(boxed.to_string().contains("4 cells"));
    }
}
