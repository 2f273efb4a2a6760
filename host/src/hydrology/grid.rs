//! Raster containers shared by the hydrology algorithms: [`Grid`], [`CellSize`] and
//! [`GeoTransform`].
//!
//! A [`Grid`] is one band in row-major order, north up (row 0 is the northern edge), with an
//! optional nodata value. Its constructor checks that the data holds exactly `width * height`
//! values and that every cell index fits in a `u32`, which is what lets the algorithms use
//! compact `u32` cell indices (Barnes, Lehman & Mulla 2014 pack their priority queues the same
//! way) and index their own buffers without bounds failures. For `f32` elevation grids NaN is
//! always nodata, in addition to the declared nodata value.

use super::error::{HydrologyError, Result};

/// The largest number of cells a grid may hold: cell indices are `u32`, and `u32::MAX` is kept
/// free as a sentinel.
pub const MAX_CELLS: usize = u32::MAX as usize - 1;

/// One raster band, row-major, north up.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid<T> {
    width: usize,
    height: usize,
    data: Vec<T>,
    nodata: Option<T>,
}

impl<T: Copy> Grid<T> {
    /// The declared nodata value, if any.
    pub fn nodata(&self) -> Option<T> {
        self.nodata
    }

    /// The value at `(col, row)`, if inside the grid.
    pub fn get(&self, col: usize, row: usize) -> Option<T> {
        self.index_of(col, row)
            .and_then(|index| self.data.get(index).copied())
    }

    /// Wraps `data` (row-major, `width * height` values) as a grid.
    pub fn new(width: usize, height: usize, data: Vec<T>, nodata: Option<T>) -> Result<Self> {
        let cells = checked_cell_count(width, height)?;
        if data.len() != cells {
            return Err(HydrologyError::DataLength {
                expected: cells,
                found: data.len(),
            });
        }
        Ok(Self {
            width,
            height,
            data,
            nodata,
        })
    }

    /// A grid with every cell set to `value`.
    pub fn filled(width: usize, height: usize, value: T, nodata: Option<T>) -> Result<Self> {
        let cells = checked_cell_count(width, height)?;
        Ok(Self {
            width,
            height,
            data: vec![value; cells],
            nodata,
        })
    }
}

impl<T> Grid<T> {
    /// Number of columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// `width * height`.
    pub fn cell_count(&self) -> usize {
        self.data.len()
    }

    /// Sets the declared nodata value.
    pub fn set_nodata(&mut self, nodata: Option<T>) {
        self.nodata = nodata;
    }

    /// The cells, row-major.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The cells, row-major, mutable (the length cannot change).
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Gives the cells back.
    pub fn into_data(self) -> Vec<T> {
        self.data
    }

    /// Row-major index of `(col, row)`, if inside the grid.
    pub fn index_of(&self, col: usize, row: usize) -> Option<usize> {
        (col < self.width && row < self.height).then(|| row * self.width + col)
    }

    /// Mutable access to `(col, row)`, if inside the grid.
    pub fn get_mut(&mut self, col: usize, row: usize) -> Option<&mut T> {
        self.index_of(col, row)
            .and_then(|index| self.data.get_mut(index))
    }

    /// `(width, height)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// Fails unless `other` has this grid's shape.
    pub fn check_same_shape<U>(&self, other: &Grid<U>, what: &'static str) -> Result<()> {
        if self.shape() == other.shape() {
            Ok(())
        } else {
            Err(HydrologyError::ShapeMismatch {
                what,
                expected: self.shape(),
                found: other.shape(),
            })
        }
    }
}

impl Grid<f32> {
    /// Whether `value` means nodata in this grid: NaN, or equal to the declared nodata value.
    pub fn is_nodata_value(&self, value: f32) -> bool {
        is_nodata(value, self.nodata_or_nan())
    }

    /// The declared nodata value, or NaN (which never compares equal) when there is none.
    pub(crate) fn nodata_or_nan(&self) -> f32 {
        self.nodata.unwrap_or(f32::NAN)
    }
}

/// NaN or equal to `nodata` (pass NaN when the grid declares none).
#[inline]
pub(crate) fn is_nodata(value: f32, nodata: f32) -> bool {
    value.is_nan() || value == nodata
}

fn checked_cell_count(width: usize, height: usize) -> Result<usize> {
    match width.checked_mul(height) {
        Some(cells) if cells > 0 && cells <= MAX_CELLS => Ok(cells),
        _ => Err(HydrologyError::UnsupportedSize { width, height }),
    }
}

/// Cell size in map units: `dx` across columns, `dy` across rows, both positive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellSize {
    /// Width of a cell (west to east) in map units.
    pub dx: f64,
    /// Height of a cell (north to south) in map units.
    pub dy: f64,
}

impl CellSize {
    /// A validated cell size.
    pub fn new(dx: f64, dy: f64) -> Result<Self> {
        let size = Self { dx, dy };
        size.validate()?;
        Ok(size)
    }

    /// Square cells of one map unit.
    pub const UNIT: Self = Self { dx: 1.0, dy: 1.0 };

    /// Fails unless both sizes are finite and positive.
    pub fn validate(&self) -> Result<()> {
        if self.dx.is_finite() && self.dy.is_finite() && self.dx > 0.0 && self.dy > 0.0 {
            Ok(())
        } else {
            Err(HydrologyError::InvalidCellSize {
                dx: self.dx,
                dy: self.dy,
            })
        }
    }

    /// `dx * dy`.
    pub fn area(&self) -> f64 {
        self.dx * self.dy
    }

    /// Centre-to-centre distance of diagonal neighbours, `sqrt(dx² + dy²)`.
    pub fn diagonal(&self) -> f64 {
        self.dx.hypot(self.dy)
    }
}

/// A GDAL affine geotransform `[x0, a, b, y0, d, e]`: the map position of pixel corner
/// `(col, row)` is `(x0 + col*a + row*b, y0 + col*d + row*e)`. North-up rasters have
/// `[x0, dx, 0, y0, 0, -dy]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoTransform {
    coefficients: [f64; 6],
    inverse_determinant: f64,
}

impl GeoTransform {
    /// Validates a GDAL geotransform (finite, non-degenerate).
    pub fn new(coefficients: [f64; 6]) -> Result<Self> {
        if coefficients.iter().any(|c| !c.is_finite()) {
            return Err(HydrologyError::InvalidGeoTransform(
                "coefficients must be finite".to_string(),
            ));
        }
        let [_, a, b, _, d, e] = coefficients;
        let determinant = a * e - b * d;
        if determinant == 0.0 || !determinant.is_finite() {
            return Err(HydrologyError::InvalidGeoTransform(
                "pixel axes are degenerate (zero determinant)".to_string(),
            ));
        }
        Ok(Self {
            coefficients,
            inverse_determinant: 1.0 / determinant,
        })
    }

    /// A north-up geotransform with its top-left corner at `(x0, y0)`.
    pub fn north_up(x0: f64, y0: f64, cell_size: CellSize) -> Result<Self> {
        cell_size.validate()?;
        Self::new([x0, cell_size.dx, 0.0, y0, 0.0, -cell_size.dy])
    }

    /// The six GDAL coefficients.
    pub fn coefficients(&self) -> [f64; 6] {
        self.coefficients
    }

    /// Map coordinates of fractional pixel position `(col, row)` (corner convention: the centre
    /// of cell `(c, r)` is `(c + 0.5, r + 0.5)`).
    pub fn pixel_to_map(&self, col: f64, row: f64) -> [f64; 2] {
        let [x0, a, b, y0, d, e] = self.coefficients;
        [x0 + col * a + row * b, y0 + col * d + row * e]
    }

    /// Map coordinates of the centre of cell `(col, row)`.
    pub fn cell_center(&self, col: usize, row: usize) -> [f64; 2] {
        self.pixel_to_map(col as f64 + 0.5, row as f64 + 0.5)
    }

    /// Fractional pixel position `(col, row)` of map point `(x, y)`.
    pub fn map_to_pixel(&self, x: f64, y: f64) -> [f64; 2] {
        let [x0, a, b, y0, d, e] = self.coefficients;
        let (u, v) = (x - x0, y - y0);
        [
            (e * u - b * v) * self.inverse_determinant,
            (a * v - d * u) * self.inverse_determinant,
        ]
    }

    /// The cell `(col, row)` containing map point `(x, y)`, if inside a `width x height` grid.
    pub fn cell_at(&self, x: f64, y: f64, width: usize, height: usize) -> Option<(usize, usize)> {
        let [col, row] = self.map_to_pixel(x, y);
        let (col, row) = (col.floor(), row.floor());
        let inside = col >= 0.0 && row >= 0.0 && col < width as f64 && row < height as f64;
        inside.then_some((col as usize, row as usize))
    }

    /// The cell size of a north-up (unrotated) geotransform.
    pub fn cell_size(&self) -> Result<CellSize> {
        let [_, a, b, _, d, e] = self.coefficients;
        if b != 0.0 || d != 0.0 {
            return Err(HydrologyError::InvalidGeoTransform(
                "rotated geotransforms have no single cell size".to_string(),
            ));
        }
        CellSize::new(a.abs(), e.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_checks_length_and_size() {
        assert!(Grid::new(3, 2, vec![0u8; 6], None).is_ok());
        assert_eq!(
            Grid::new(3, 2, vec![0u8; 5], None),
            Err(HydrologyError::DataLength {
                expected: 6,
                found: 5
            })
        );
        assert!(matches!(
            Grid::new(0, 2, Vec::<u8>::new(), None),
            Err(HydrologyError::UnsupportedSize { .. })
        ));
        assert!(matches!(
            Grid::<u8>::filled(usize::MAX, 2, 0, None),
            Err(HydrologyError::UnsupportedSize { .. })
        ));
    }

    #[test]
    fn access_is_bounds_checked() {
        let mut grid = Grid::new(2, 2, vec![1, 2, 3, 4], None).unwrap();
        assert_eq!(grid.get(1, 1), Some(4));
        assert_eq!(grid.get(2, 0), None);
        *grid.get_mut(0, 1).unwrap() = 9;
        assert_eq!(grid.data(), &[1, 2, 9, 4]);
        assert!(grid.get_mut(0, 2).is_none());
    }

    #[test]
    fn nan_and_declared_value_are_nodata() {
        let grid = Grid::new(2, 1, vec![0.0f32, -9999.0], Some(-9999.0)).unwrap();
        assert!(grid.is_nodata_value(f32::NAN));
        assert!(grid.is_nodata_value(-9999.0));
        assert!(!grid.is_nodata_value(0.0));
        let no_declared = Grid::new(1, 1, vec![0.0f32], None).unwrap();
        assert!(!no_declared.is_nodata_value(-9999.0));
    }

    #[test]
    fn cell_size_must_be_positive() {
        assert!(CellSize::new(30.0, 10.0).is_ok());
        assert!(CellSize::new(0.0, 10.0).is_err());
        assert!(CellSize::new(1.0, f64::NAN).is_err());
        assert!((CellSize::new(3.0, 4.0).unwrap().diagonal() - 5.0).abs() < 1e-12);
    }

    #[test]
    fn geotransform_round_trips() {
        let transform =
            GeoTransform::north_up(1000.0, 2000.0, CellSize::new(30.0, 10.0).unwrap()).unwrap();
        assert_eq!(transform.cell_center(0, 0), [1015.0, 1995.0]);
        assert_eq!(transform.cell_at(1015.0, 1995.0, 4, 4), Some((0, 0)));
        assert_eq!(transform.cell_at(1119.0, 1961.0, 4, 4), Some((3, 3)));
        assert_eq!(transform.cell_at(999.0, 1995.0, 4, 4), None);
        assert_eq!(
            transform.cell_size().unwrap(),
            CellSize::new(30.0, 10.0).unwrap()
        );
        let rotated = GeoTransform::new([0.0, 1.0, 0.5, 0.0, 0.5, -1.0]).unwrap();
        let [x, y] = rotated.pixel_to_map(3.25, 1.5);
        let [col, row] = rotated.map_to_pixel(x, y);
        assert!((col - 3.25).abs() < 1e-12 && (row - 1.5).abs() < 1e-12);
        assert!(rotated.cell_size().is_err());
        assert!(GeoTransform::new([0.0, 1.0, 1.0, 0.0, 1.0, 1.0]).is_err());
    }
}
