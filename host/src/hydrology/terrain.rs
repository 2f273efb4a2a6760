//! Terrain facts for the methodology domains: how much of a DEM has nowhere to drain locally.

use super::grid::Grid;

/// Share (0-1) of valid cells with no strictly lower valid neighbour among their eight (pits
/// and flats, border cells included); 0 for a grid without valid cells.
pub fn flat_fraction(dem: &Grid<f32>) -> f64 {
    let (width, height) = dem.shape();
    let data = dem.data();
    let valid = |value: f32| !dem.is_nodata_value(value);
    let mut cells = 0u64;
    let mut stuck = 0u64;
    for row in 0..height {
        for col in 0..width {
            let Some(&z) = data.get(row * width + col) else {
                continue;
            };
            if !valid(z) {
                continue;
            }
            cells += 1;
            let mut lower = false;
            'neighbours: for dr in -1isize..=1 {
                for dc in -1isize..=1 {
                    if dr == 0 && dc == 0 {
                        continue;
                    }
                    let (r, c) = (row as isize + dr, col as isize + dc);
                    if r < 0 || c < 0 || r >= height as isize || c >= width as isize {
                        continue;
                    }
                    if let Some(&n) = data.get(r as usize * width + c as usize) {
                        if valid(n) && n < z {
                            lower = true;
                            break 'neighbours;
                        }
                    }
                }
            }
            if !lower {
                stuck += 1;
            }
        }
    }
    if cells == 0 {
        0.0
    } else {
        stuck as f64 / cells as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plane_has_one_stuck_row_and_a_flat_is_all_stuck() {
        // Elevation rises with the row: only row 0 has no lower neighbour.
        let plane = Grid::new(4, 4, (0..16).map(|i| (i / 4) as f32).collect(), None).unwrap();
        assert!((flat_fraction(&plane) - 0.25).abs() < 1e-12);
        let flat = Grid::new(3, 3, vec![5.0; 9], None).unwrap();
        assert_eq!(flat_fraction(&flat), 1.0);
        let nodata = Grid::new(2, 1, vec![-9999.0, -9999.0], Some(-9999.0)).unwrap();
        assert_eq!(flat_fraction(&nodata), 0.0);
    }
}
