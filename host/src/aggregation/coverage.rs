//! Rasterising zones onto a north-up grid: the window of cells a zone can touch, and one weight
//! per cell of that window, under the three `zonal_stats` semantics. Zonal statistics are only
//! as honest as this step, so each semantics follows a reference implementation exactly:
//!
//! * [`Semantics::CellCentre`] — weight 1 where the cell centre is inside the zone, by GDAL's
//!   scanline rule (`GDALdllImageFilledPolygon` in `alg/llrasterize.cpp`, the default of
//!   `gdal_rasterize`, `rasterio.features.rasterize` and rasterstats `all_touched=False`),
//!   reproduced operation for operation so that centres lying exactly on an edge resolve the same
//!   way:
//!   - vertices go to pixel space with GDAL's inverse geotransform arithmetic,
//!     `col = -x0/dx + x * (1/dx)`, `row = -y0/(-dy) + y * (1/(-dy))`;
//!   - every ring is turned clockwise in world coordinates first (OGR orientation, decided here
//!     by the sign of the shoelace area);
//!   - on the scanline through the centres of row `r` (`y = r + 0.5` in pixel space), every
//!     non-horizontal edge with `y_top <= y < y_bottom` crosses at `x`, rounded to the boundary
//!     `floor(x + 0.5)`; crossings are sorted and cells between consecutive pairs are inside
//!     (even-odd over all rings of one polygon, so holes need no special case). Hence a centre
//!     exactly on a **left** edge is outside, on a **right** edge inside, on a **top** edge
//!     (north) inside;
//!   - a horizontal edge lying exactly on a row of centres and running right to left (after the
//!     reorientation: the *bottom*, southern edges of the ring) burns its own cells, so centres
//!     exactly on a **bottom** edge are inside too;
//!   - the polygons of a multipolygon are burned one by one and united (GDAL rasterises the parts
//!     of a multipolygon separately in its default replace mode).
//! * [`Semantics::AllTouched`] — weight 1 where the zone covers a positive area of the cell
//!   (coverage fraction above [`COVERAGE_EPSILON`]). Unlike GDAL's `ALL_TOUCHED`, a cell that
//!   the boundary only grazes (an edge lying on a cell side, a vertex on a corner) is *not*
//!   touched.
//! * [`Semantics::Coverage`] — the exact fraction of the cell's area inside the zone, in
//!   `[0, 1]`, as exactextract computes it.
//!
//! Coverage is computed in one pass over the edges plus one prefix sum over the window, O(cells
//! crossed by the boundary + window cells). By Green's theorem the area of the zone inside cell
//! `(r, c)` is `-∮ g_c(x) dy` over the boundary clipped to row strip `r`, with
//! `g_c(x) = clamp(c + 1 - x, 0, 1)`: horizontal pieces (`dy = 0`) contribute nothing, so each
//! edge can be clipped to each strip on its own (no polygon clipping), an edge piece contributes
//! its full `-dy` to every column right of it and a share to the columns it crosses, and a
//! prefix sum along the row turns these contributions into per-cell areas. Ring orientations are
//! normalised (exteriors count positive, holes negative); multipolygon parts are summed and the
//! result clamped to `[0, 1]`, exact for valid (non-overlapping) multipolygons. Values within
//! [`COVERAGE_EPSILON`] of 0 or 1 are snapped to 0 or 1 so that floating-point noise never turns
//! an outside cell into a "touched" one.

use super::AggregationError;

/// A ring: vertices in world coordinates, closed or not, in either orientation.
pub type Ring = Vec<[f64; 2]>;

/// A polygon: ring 0 is the exterior, the others are holes.
pub type Polygon = Vec<Ring>;

/// Coverage fractions below this are 0 and above `1 - COVERAGE_EPSILON` are 1 (rounding noise in
/// the area sums is around 1e-13 of a cell).
pub const COVERAGE_EPSILON: f64 = 1e-9;

/// A north-up raster grid: cell `(row, col)` spans `x0 + col*dx .. x0 + (col+1)*dx` and
/// `y0 - (row+1)*dy .. y0 - row*dy`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridWindow {
    /// World x of the left edge of column 0 (geotransform\[0\]).
    pub x0: f64,
    /// World y of the top edge of row 0 (geotransform\[3\]).
    pub y0: f64,
    /// Cell width, > 0 (geotransform\[1\]).
    pub dx: f64,
    /// Cell height, > 0; rows go down (-geotransform\[5\]).
    pub dy: f64,
    /// Raster width in cells.
    pub cols: usize,
    /// Raster height in cells.
    pub rows: usize,
}

impl GridWindow {
    /// The grid of a GDAL geotransform; rotated and south-up grids are refused.
    pub fn from_geotransform(
        gt: [f64; 6],
        cols: usize,
        rows: usize,
    ) -> Result<Self, AggregationError> {
        if gt[2] != 0.0 || gt[4] != 0.0 {
            return Err(AggregationError::InvalidGrid("rotated geotransform"));
        }
        if gt[5] >= 0.0 {
            return Err(AggregationError::InvalidGrid(
                "not north-up (geotransform[5] must be negative)",
            ));
        }
        let grid = Self {
            x0: gt[0],
            y0: gt[3],
            dx: gt[1],
            dy: -gt[5],
            cols,
            rows,
        };
        grid.validate()?;
        Ok(grid)
    }

    /// Checks the origin is finite and the cell size finite and positive.
    pub fn validate(&self) -> Result<(), AggregationError> {
        if !self.x0.is_finite() || !self.y0.is_finite() {
            return Err(AggregationError::InvalidGrid("origin is not finite"));
        }
        if !(self.dx.is_finite() && self.dx > 0.0 && self.dy.is_finite() && self.dy > 0.0) {
            return Err(AggregationError::InvalidGrid(
                "cell size must be finite and positive",
            ));
        }
        Ok(())
    }

    /// The whole raster as a window.
    pub fn full_window(&self) -> CellWindow {
        CellWindow {
            col_off: 0,
            row_off: 0,
            cols: self.cols,
            rows: self.rows,
        }
    }
}

/// A rectangle of cells of a raster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CellWindow {
    /// First column.
    pub col_off: usize,
    /// First row.
    pub row_off: usize,
    /// Width in cells.
    pub cols: usize,
    /// Height in cells.
    pub rows: usize,
}

impl CellWindow {
    /// True when the window holds no cell.
    pub fn is_empty(&self) -> bool {
        self.cols == 0 || self.rows == 0
    }

    /// Number of cells (saturating).
    pub fn cell_count(&self) -> usize {
        self.cols.saturating_mul(self.rows)
    }

    /// The window cut into horizontal bands of at most `max_rows` rows (at least 1), top to
    /// bottom, for zones too large to rasterise at once.
    pub fn row_blocks(&self, max_rows: usize) -> impl Iterator<Item = CellWindow> {
        let window = *self;
        let step = max_rows.max(1);
        let count = if window.is_empty() {
            0
        } else {
            window.rows.div_ceil(step)
        };
        (0..count).map(move |i| {
            let start = i * step;
            CellWindow {
                col_off: window.col_off,
                row_off: window.row_off + start,
                cols: window.cols,
                rows: step.min(window.rows - start),
            }
        })
    }
}

/// How a zone weighs the cells it meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Semantics {
    /// 1 where the cell centre is inside (GDAL rasterize default).
    CellCentre,
    /// 1 where the zone covers a positive area of the cell.
    AllTouched,
    /// The fraction of the cell's area inside the zone.
    Coverage,
}

impl Semantics {
    /// All semantics, in declaration order.
    pub const ALL: [Semantics; 3] = [Self::CellCentre, Self::AllTouched, Self::Coverage];

    /// The tool argument spelling: `cell_centre`, `all_touched`, `coverage`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CellCentre => "cell_centre",
            Self::AllTouched => "all_touched",
            Self::Coverage => "coverage",
        }
    }
}

impl std::fmt::Display for Semantics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Semantics {
    type Err = AggregationError;

    /// Accepts the [`Semantics::as_str`] names (and `cell_center`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cell_centre" | "cell_center" => Ok(Self::CellCentre),
            "all_touched" => Ok(Self::AllTouched),
            "coverage" => Ok(Self::Coverage),
            _ => Err(AggregationError::UnknownName {
                kind: "semantics",
                name: s.to_string(),
                expected: "cell_centre, all_touched, coverage",
            }),
        }
    }
}

/// One weight per cell of `window`, row-major: `weights[(row - row_off) * cols + (col - col_off)]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZoneWeights {
    /// The cells the weights are for.
    pub window: CellWindow,
    /// `window.cols * window.rows` weights in `[0, 1]` (exactly 0 or 1 except for coverage).
    pub weights: Vec<f32>,
}

impl ZoneWeights {
    /// Sum of the weights: the zone's cell count (or covered area in cells).
    pub fn total(&self) -> f64 {
        self.weights.iter().map(|&w| f64::from(w)).sum()
    }
}

/// The window of raster cells the zone can touch under any semantics: every cell its bounding
/// box overlaps, clipped to the raster (empty when the zone is outside or has no vertex).
pub fn zone_window(zone: &[Polygon], grid: &GridWindow) -> Result<CellWindow, AggregationError> {
    grid.validate()?;
    let pixel = PixelZone::new(zone, &PixelTransform::new(grid))?;
    Ok(pixel.window(grid))
}

/// A zone in a lon/lat raster's CRS brought over the raster's longitudes: each polygon that
/// reaches past them is repeated whole turns (`turn`, 360 in degrees) east or west wherever the
/// copy lies over the raster, beside the polygon as it is, and the number of copies added is
/// returned. A zone drawn 178..182°E over a -180..180 raster keeps its part west of 180° and
/// gains a copy at -182..-178°, whose part east of -180° is the zone's part past 180°: 8
/// cells of 1°, as the zone split at 180° (attack round 10, R10-9: 4 were counted). Copies of
/// one polygon are a turn apart and it is narrower than a turn, so no cell is counted twice on
/// a raster at most a turn wide; a polygon a turn wide or more is left as it is. On a raster
/// wider than a turn (a repeated seam column) a copy that would be needed is refused.
pub fn wrap_longitudes(
    zone: &[Polygon],
    grid: &GridWindow,
    turn: f64,
) -> Result<(Vec<Polygon>, usize), AggregationError> {
    let (west, east) = (grid.x0, grid.x0 + grid.cols as f64 * grid.dx);
    let mut out: Vec<Polygon> = zone.to_vec();
    let mut added = 0;
    if !(turn.is_finite() && turn > 0.0 && west.is_finite() && east.is_finite()) {
        return Ok((out, added));
    }
    for polygon in zone {
        let (mut a, mut b) = (f64::INFINITY, f64::NEG_INFINITY);
        for p in polygon.iter().flatten() {
            a = a.min(p[0]);
            b = b.max(p[0]);
        }
        if !(a.is_finite() && b.is_finite()) || b - a >= turn {
            continue;
        }
        let first = ((west - b) / turn).ceil() as i64;
        let last = ((east - a) / turn).floor() as i64;
        for k in first..=last {
            let shift = k as f64 * turn;
            // Overlapping the raster over some width, and not the polygon itself.
            if k == 0 || a + shift >= east || b + shift <= west {
                continue;
            }
            if east - west > turn * (1.0 + 1e-12) {
                return Err(AggregationError::WrapAcrossRepeatedLongitudes { west, east, turn });
            }
            out.push(
                polygon
                    .iter()
                    .map(|ring| ring.iter().map(|p| [p[0] + shift, p[1]]).collect())
                    .collect(),
            );
            added += 1;
        }
    }
    Ok((out, added))
}

/// The share of a zone's area that no cell of the raster holds: 1 − (the area of `placed`,
/// the zone as counted over the raster with any turn-shifted copies of
/// [`wrap_longitudes`], clipped to the raster's extent) / (the area of `zone`, as drawn). A
/// zone half off the raster answered its half as the whole, even under `propagate` (attack
/// round 15, R15-B21). Areas are in the raster CRS's plane, holes subtracted; 0 for a zone
/// with no area.
pub fn outside_fraction(zone: &[Polygon], placed: &[Polygon], grid: &GridWindow) -> f64 {
    let area = |polygons: &[Polygon], clip: Option<[f64; 4]>| -> f64 {
        polygons
            .iter()
            .map(|polygon| {
                let mut rings = polygon.iter().map(|ring| match clip {
                    Some(rect) => ring_area(&clip_ring(ring, rect)),
                    None => ring_area(ring),
                });
                let outer = rings.next().unwrap_or(0.0);
                (outer - rings.sum::<f64>()).max(0.0)
            })
            .sum()
    };
    let drawn = area(zone, None);
    if !(drawn.is_finite() && drawn > 0.0) {
        return 0.0;
    }
    let extent = [
        grid.x0,
        grid.y0 - grid.rows as f64 * grid.dy,
        grid.x0 + grid.cols as f64 * grid.dx,
        grid.y0,
    ];
    let inside = area(placed, Some(extent));
    (1.0 - inside / drawn).clamp(0.0, 1.0)
}

/// The unsigned area of a ring (shoelace).
fn ring_area(ring: &[[f64; 2]]) -> f64 {
    if ring.len() < 3 {
        return 0.0;
    }
    let mut twice = 0.0;
    for (i, a) in ring.iter().enumerate() {
        let b = ring[(i + 1) % ring.len()];
        twice += a[0] * b[1] - b[0] * a[1];
    }
    (twice / 2.0).abs()
}

/// A ring clipped to the rectangle `[xmin, ymin, xmax, ymax]` (Sutherland–Hodgman: the
/// result may hold degenerate edges along the rectangle, but its area is the area of the
/// ring inside it, concave rings included).
fn clip_ring(ring: &[[f64; 2]], rect: [f64; 4]) -> Vec<[f64; 2]> {
    let [xmin, ymin, xmax, ymax] = rect;
    let mut points: Vec<[f64; 2]> = ring.to_vec();
    // Each side: the axis, where it lies, and whether the inside is above it.
    let sides = [
        (0, xmin, true),
        (0, xmax, false),
        (1, ymin, true),
        (1, ymax, false),
    ];
    for (axis, at, above) in sides {
        if points.is_empty() {
            break;
        }
        let inside = |p: [f64; 2]| if above { p[axis] >= at } else { p[axis] <= at };
        let cross = |a: [f64; 2], b: [f64; 2]| -> [f64; 2] {
            let t = (at - a[axis]) / (b[axis] - a[axis]);
            let mut p = [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])];
            p[axis] = at;
            p
        };
        let mut kept = Vec::with_capacity(points.len() + 4);
        for (i, &b) in points.iter().enumerate() {
            let a = points[(i + points.len() - 1) % points.len()];
            match (inside(a), inside(b)) {
                (true, true) => kept.push(b),
                (true, false) => kept.push(cross(a, b)),
                (false, true) => {
                    kept.push(cross(a, b));
                    kept.push(b);
                }
                (false, false) => {}
            }
        }
        points = kept;
    }
    points
}

/// [`zone_window`] and the zone's weights over it.
pub fn zone_weights(
    zone: &[Polygon],
    grid: &GridWindow,
    semantics: Semantics,
) -> Result<ZoneWeights, AggregationError> {
    grid.validate()?;
    let pixel = PixelZone::new(zone, &PixelTransform::new(grid))?;
    let window = pixel.window(grid);
    weights_for(&pixel, window, semantics)
}

/// The zone's weights over an arbitrary `window` of the raster (cells outside the zone weigh
/// 0). Rows are independent, so a large zone can be processed in [`CellWindow::row_blocks`] of
/// its [`zone_window`] with the same result as in one piece.
pub fn zone_weights_in(
    zone: &[Polygon],
    grid: &GridWindow,
    semantics: Semantics,
    window: CellWindow,
) -> Result<ZoneWeights, AggregationError> {
    grid.validate()?;
    let inside = window
        .col_off
        .checked_add(window.cols)
        .is_some_and(|end| end <= grid.cols)
        && window
            .row_off
            .checked_add(window.rows)
            .is_some_and(|end| end <= grid.rows);
    if !inside {
        return Err(AggregationError::WindowOutsideGrid {
            col_off: window.col_off,
            row_off: window.row_off,
            cols: window.cols,
            rows: window.rows,
            grid_cols: grid.cols,
            grid_rows: grid.rows,
        });
    }
    let pixel = PixelZone::new(zone, &PixelTransform::new(grid))?;
    weights_for(&pixel, window, semantics)
}

fn weights_for(
    zone: &PixelZone,
    window: CellWindow,
    semantics: Semantics,
) -> Result<ZoneWeights, AggregationError> {
    let cells = window
        .cols
        .checked_mul(window.rows)
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or(AggregationError::WindowTooLarge {
            cols: window.cols,
            rows: window.rows,
        })?;
    let mut weights = vec![0.0f32; cells];
    if cells > 0 {
        match semantics {
            Semantics::CellCentre => burn_cell_centres(zone, window, &mut weights),
            Semantics::AllTouched => coverage_fractions(zone, window, &mut weights, true),
            Semantics::Coverage => coverage_fractions(zone, window, &mut weights, false),
        }
    }
    Ok(ZoneWeights { window, weights })
}

/// World to pixel coordinates with the arithmetic of GDAL's `GDALInvGeoTransform` (no-rotation
/// branch) and `GDALGenImgProjTransform`, so that ties resolve as in GDAL.
struct PixelTransform {
    col0: f64,
    col_scale: f64,
    row0: f64,
    row_scale: f64,
}

impl PixelTransform {
    fn new(grid: &GridWindow) -> Self {
        let gt1 = grid.dx;
        let gt5 = -grid.dy;
        Self {
            col0: -grid.x0 / gt1,
            col_scale: 1.0 / gt1,
            row0: -grid.y0 / gt5,
            row_scale: 1.0 / gt5,
        }
    }

    fn apply(&self, p: [f64; 2]) -> [f64; 2] {
        [
            self.col0 + p[0] * self.col_scale,
            self.row0 + p[1] * self.row_scale,
        ]
    }
}

/// A ring of a [`PixelZone`].
struct PixelRing {
    /// Range in `PixelZone::points`.
    start: usize,
    end: usize,
    /// Index of the polygon in the zone.
    polygon: usize,
    /// Ring 0 of its polygon.
    exterior: bool,
    /// OGR orientation in world coordinates (negative shoelace area).
    world_clockwise: bool,
    /// Sign of the shoelace area in pixel coordinates (0 for a degenerate ring).
    pixel_sign: f64,
}

/// A zone in full-raster pixel coordinates (x = column, y = row, y down).
struct PixelZone {
    points: Vec<[f64; 2]>,
    rings: Vec<PixelRing>,
    /// `[xmin, ymin, xmax, ymax]` over all vertices, `None` without vertices.
    bbox: Option<[f64; 4]>,
}

/// Twice the signed shoelace area of a ring, relative to its first vertex for precision.
fn shoelace2(points: &[[f64; 2]]) -> f64 {
    let Some(&[ox, oy]) = points.first() else {
        return 0.0;
    };
    let n = points.len();
    let mut sum = 0.0;
    for i in 0..n {
        let [ax, ay] = points[i];
        let [bx, by] = points[(i + 1) % n];
        sum += (ax - ox) * (by - oy) - (bx - ox) * (ay - oy);
    }
    sum
}

impl PixelZone {
    fn new(zone: &[Polygon], transform: &PixelTransform) -> Result<Self, AggregationError> {
        let mut points = Vec::with_capacity(zone.iter().flatten().map(Vec::len).sum());
        let mut rings = Vec::new();
        let mut bbox: Option<[f64; 4]> = None;
        for (polygon, rings_in) in zone.iter().enumerate() {
            for (index, ring) in rings_in.iter().enumerate() {
                if ring.iter().flatten().any(|v| !v.is_finite()) {
                    return Err(AggregationError::NonFiniteCoordinate);
                }
                if ring.is_empty() {
                    continue;
                }
                let start = points.len();
                for &p in ring {
                    let q = transform.apply(p);
                    if !q[0].is_finite() || !q[1].is_finite() {
                        return Err(AggregationError::NonFiniteCoordinate);
                    }
                    bbox = Some(match bbox {
                        None => [q[0], q[1], q[0], q[1]],
                        Some(b) => [
                            b[0].min(q[0]),
                            b[1].min(q[1]),
                            b[2].max(q[0]),
                            b[3].max(q[1]),
                        ],
                    });
                    points.push(q);
                }
                let end = points.len();
                let pixel_area = shoelace2(&points[start..end]);
                let pixel_sign = if pixel_area > 0.0 {
                    1.0
                } else if pixel_area < 0.0 {
                    -1.0
                } else {
                    0.0
                };
                rings.push(PixelRing {
                    start,
                    end,
                    polygon,
                    exterior: index == 0,
                    world_clockwise: shoelace2(ring) < 0.0,
                    pixel_sign,
                });
            }
        }
        Ok(Self {
            points,
            rings,
            bbox,
        })
    }

    /// Cells overlapped by the bounding box: columns `floor(xmin) .. ceil(xmax)` and the same for
    /// rows, clipped to the raster. Every cell with a centre inside the zone, or a positive area
    /// of it, is in there.
    fn window(&self, grid: &GridWindow) -> CellWindow {
        let Some([xmin, ymin, xmax, ymax]) = self.bbox else {
            return CellWindow::default();
        };
        let clip = |v: f64, limit: usize| -> usize {
            // Clamped to [0, limit] before the cast, so the cast is exact.
            v.clamp(0.0, limit as f64) as usize
        };
        let c0 = clip(xmin.floor(), grid.cols);
        let c1 = clip(xmax.ceil(), grid.cols);
        let r0 = clip(ymin.floor(), grid.rows);
        let r1 = clip(ymax.ceil(), grid.rows);
        if c1 <= c0 || r1 <= r0 {
            return CellWindow::default();
        }
        CellWindow {
            col_off: c0,
            row_off: r0,
            cols: c1 - c0,
            rows: r1 - r0,
        }
    }

    fn ring_points(&self, ring: &PixelRing) -> &[[f64; 2]] {
        self.points.get(ring.start..ring.end).unwrap_or(&[])
    }
}

/// A non-horizontal edge for the scanline, `(x1, y1)` its top (smaller row) end.
#[derive(Debug, Clone, Copy)]
struct ScanEdge {
    x1: f64,
    y1: f64,
    x2: f64,
    y2: f64,
}

/// Sets 1 in `out` for the columns `first..=last` (raster columns) of raster row `row`.
fn burn_span(out: &mut [f32], window: CellWindow, row: usize, first: f64, last: f64) {
    if window.cols == 0 || row < window.row_off || row >= window.row_off + window.rows {
        return;
    }
    let lo = first.max(window.col_off as f64);
    let hi = last.min((window.col_off + window.cols - 1) as f64);
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return;
    }
    // Both within [col_off, col_off + cols - 1] here, so the casts are exact.
    let lo = lo as usize - window.col_off;
    let hi = hi as usize - window.col_off;
    let base = (row - window.row_off) * window.cols;
    if let Some(span) = out.get_mut(base + lo..=base + hi) {
        span.fill(1.0);
    }
}

/// GDAL's `GDALdllImageFilledPolygon`, polygon by polygon, restricted to `window`.
fn burn_cell_centres(zone: &PixelZone, window: CellWindow, out: &mut [f32]) {
    let mut edges: Vec<ScanEdge> = Vec::new();
    let mut active: Vec<ScanEdge> = Vec::new();
    let mut crossings: Vec<f64> = Vec::new();
    let row_end = window.row_off + window.rows;
    let mut ring_index = 0;
    while ring_index < zone.rings.len() {
        let polygon = zone.rings[ring_index].polygon;
        edges.clear();
        while let Some(ring) = zone.rings.get(ring_index).filter(|r| r.polygon == polygon) {
            ring_index += 1;
            let points = zone.ring_points(ring);
            let n = points.len();
            for i in 0..n {
                let prev = points[(i + n - 1) % n];
                let cur = points[i];
                // The ring as GDAL sees it: clockwise in world coordinates.
                let (from, to) = if ring.world_clockwise {
                    (prev, cur)
                } else {
                    (cur, prev)
                };
                if from[1] < to[1] {
                    edges.push(ScanEdge {
                        x1: from[0],
                        y1: from[1],
                        x2: to[0],
                        y2: to[1],
                    });
                } else if from[1] > to[1] {
                    edges.push(ScanEdge {
                        x1: to[0],
                        y1: to[1],
                        x2: from[0],
                        y2: from[1],
                    });
                } else if from[0] > to[0] {
                    // A horizontal edge running right to left (a bottom edge) on a row of
                    // centres burns its own cells.
                    let row = from[1].floor();
                    if row + 0.5 == from[1] && row >= window.row_off as f64 && row < row_end as f64
                    {
                        let first = (to[0] + 0.5).floor();
                        let end = (from[0] + 0.5).floor();
                        burn_span(out, window, row as usize, first, end - 1.0);
                    }
                }
            }
        }
        if edges.is_empty() {
            continue;
        }
        edges.sort_unstable_by(|a, b| a.y1.total_cmp(&b.y1));
        active.clear();
        let mut next = 0;
        for row in window.row_off..row_end {
            let y = row as f64 + 0.5;
            while let Some(edge) = edges.get(next).filter(|e| e.y1 <= y) {
                active.push(*edge);
                next += 1;
            }
            active.retain(|e| e.y2 > y);
            if active.is_empty() {
                if next >= edges.len() {
                    break;
                }
                continue;
            }
            crossings.clear();
            crossings.extend(active.iter().map(|e| {
                let x = (y - e.y1) * (e.x2 - e.x1) / (e.y2 - e.y1) + e.x1;
                (x + 0.5).floor()
            }));
            crossings.sort_unstable_by(f64::total_cmp);
            for pair in crossings.chunks_exact(2) {
                burn_span(out, window, row, pair[0], pair[1] - 1.0);
            }
        }
    }
}

/// Exact coverage fractions (or their `> 0` mask) of the zone over `window`.
fn coverage_fractions(zone: &PixelZone, window: CellWindow, out: &mut [f32], mask: bool) {
    let stride = window.cols + 1;
    let mut acc = vec![0.0f64; window.rows * stride];
    let dx = window.col_off as f64;
    let dy = window.row_off as f64;
    for ring in &zone.rings {
        if ring.pixel_sign == 0.0 {
            continue;
        }
        // Exteriors count positive, holes negative, whatever their orientation.
        let sign = if ring.exterior {
            ring.pixel_sign
        } else {
            -ring.pixel_sign
        };
        let points = zone.ring_points(ring);
        let n = points.len();
        for i in 0..n {
            let a = points[i];
            let b = points[(i + 1) % n];
            // Window-local coordinates; subtracting the integer offsets is exact.
            add_edge(
                &mut acc,
                window,
                [a[0] - dx, a[1] - dy],
                [b[0] - dx, b[1] - dy],
                sign,
            );
        }
    }
    for (acc_row, out_row) in acc
        .chunks_exact(stride)
        .zip(out.chunks_exact_mut(window.cols))
    {
        let mut running = 0.0f64;
        for (a, o) in acc_row.iter().zip(out_row.iter_mut()) {
            running += a;
            let fraction = if running < COVERAGE_EPSILON {
                0.0
            } else if running > 1.0 - COVERAGE_EPSILON {
                1.0
            } else {
                running
            };
            *o = if mask {
                if fraction > 0.0 {
                    1.0
                } else {
                    0.0
                }
            } else {
                fraction as f32
            };
        }
    }
}

/// Adds the contributions of edge `a -> b` (window-local pixel coordinates) to `acc`, one row
/// strip at a time.
fn add_edge(acc: &mut [f64], window: CellWindow, a: [f64; 2], b: [f64; 2], sign: f64) {
    if a[1] == b[1] {
        return;
    }
    let (dir, lo, hi) = if a[1] < b[1] {
        (sign, a, b)
    } else {
        (-sign, b, a)
    };
    let rows = window.rows as f64;
    if hi[1] <= 0.0 || lo[1] >= rows {
        return;
    }
    let stride = window.cols + 1;
    let slope = (hi[0] - lo[0]) / (hi[1] - lo[1]);
    let (x_min, x_max) = if lo[0] <= hi[0] {
        (lo[0], hi[0])
    } else {
        (hi[0], lo[0])
    };
    let x_at = |y: f64| -> f64 {
        if y <= lo[1] {
            lo[0]
        } else if y >= hi[1] {
            hi[0]
        } else {
            (lo[0] + (y - lo[1]) * slope).clamp(x_min, x_max)
        }
    };
    // Both clamped to [0, rows] before the casts.
    let first = lo[1].floor().clamp(0.0, rows) as usize;
    let last = hi[1].ceil().clamp(0.0, rows) as usize;
    for row in first..last {
        let top = (row as f64).max(lo[1]);
        let bottom = ((row + 1) as f64).min(hi[1]);
        if bottom <= top {
            continue;
        }
        if let Some(acc_row) = acc.get_mut(row * stride..(row + 1) * stride) {
            spread(
                acc_row,
                window.cols,
                x_at(top),
                x_at(bottom),
                (bottom - top) * dir,
            );
        }
    }
}

/// Spreads the contribution of one edge piece inside a row strip, from `x0` to `x1` with signed
/// height `d`, over the difference row `acc` (`cols + 1` entries): the piece adds `-d` to the
/// area of every column right of it and `-d * (c + 1 - x)` (averaged over its extent) to a
/// column `c` it crosses.
fn spread(acc: &mut [f64], cols: usize, x0: f64, x1: f64, d: f64) {
    let (left, right) = if x0 <= x1 { (x0, x1) } else { (x1, x0) };
    let width = cols as f64;
    if right <= 0.0 {
        if let Some(first) = acc.first_mut() {
            *first -= d;
        }
        return;
    }
    if left >= width {
        return;
    }
    let span = right - left;
    if span <= 0.0 {
        // Vertical, and 0 < left < width: a single column.
        let column = left.floor();
        let fx = left - column;
        let c = column as usize;
        if c + 1 < acc.len() {
            acc[c] -= d * (1.0 - fx);
            acc[c + 1] -= d * fx;
        }
        return;
    }
    let mut x = left;
    if left < 0.0 {
        if let Some(first) = acc.first_mut() {
            *first -= d * (-left / span);
        }
        x = 0.0;
    }
    let stop = right.min(width);
    // 0 <= x < width here.
    let mut c = x.floor() as usize;
    while x < stop && c < cols {
        let next = ((c + 1) as f64).min(stop);
        let part = d * ((next - x) / span);
        let mid = 0.5 * (x + next) - c as f64;
        acc[c] -= part * (1.0 - mid);
        acc[c + 1] -= part * mid;
        x = next;
        c += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R15-B21: the share of a zone outside the raster, holes and concave rings included.
    #[test]
    fn outside_fraction_measures_the_part_no_cell_holds() {
        let grid = grid4();
        let square = |x0: f64, x1: f64, y0: f64, y1: f64| -> Ring {
            vec![[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]
        };
        let half = vec![vec![square(2.0, 6.0, 1.0, 3.0)]];
        assert!((outside_fraction(&half, &half, &grid) - 0.5).abs() < 1e-12);
        let inside = vec![vec![square(1.0, 3.0, 1.0, 3.0)]];
        assert_eq!(outside_fraction(&inside, &inside, &grid), 0.0);
        let edge = vec![vec![square(0.0, 4.0, 0.0, 4.0)]];
        assert!(outside_fraction(&edge, &edge, &grid) < 1e-12);
        let away = vec![vec![square(10.0, 12.0, 1.0, 3.0)]];
        assert_eq!(outside_fraction(&away, &away, &grid), 1.0);
        // An L whose arm reaches out: 3 of its 7 unit squares lie at x > 4.
        let l_shape = vec![vec![vec![
            [1.0, 1.0],
            [7.0, 1.0],
            [7.0, 2.0],
            [2.0, 2.0],
            [2.0, 3.0],
            [1.0, 3.0],
            [1.0, 1.0],
        ]]];
        assert!((outside_fraction(&l_shape, &l_shape, &grid) - 3.0 / 7.0).abs() < 1e-12);
        // A hole outside the raster: the zone's area is 8 - 1, of which 4 - 0 lie outside.
        let holed = vec![vec![square(2.0, 6.0, 1.0, 3.0), square(4.5, 5.5, 1.5, 2.5)]];
        assert!((outside_fraction(&holed, &holed, &grid) - 3.0 / 7.0).abs() < 1e-12);
    }

    /// 4x4 grid of unit cells, x in [0, 4], y in [0, 4] (row 0 at the top, y 3..4).
    fn grid4() -> GridWindow {
        GridWindow {
            x0: 0.0,
            y0: 4.0,
            dx: 1.0,
            dy: 1.0,
            cols: 4,
            rows: 4,
        }
    }

    fn rect(x0: f64, y0: f64, x1: f64, y1: f64) -> Polygon {
        vec![vec![[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]
    }

    /// Regression, attack round 10, R10-9: a zone drawn 178..182°E over a global -180..180
    /// raster of 1° cells counted the 4 cells west of 180°, not 8. Wrapped, it counts 8 under
    /// every semantics, as its twins do (the zone split at 180° as two polygons, and one at
    /// 10..14°E, neither changed); a zone wholly past 180° (181..183°E) counts its 4; over a
    /// 0..360 raster a zone at -2..2°E counts 8; a polygon a turn wide is left alone; on a raster
    /// wider than a turn (361 columns) a needed copy is refused, an unneeded one is not.
    #[test]
    fn r10_9_zones_past_the_raster_longitudes_are_wrapped_onto_it() {
        let global = |x0: f64, cols: usize| GridWindow {
            x0,
            y0: 90.0,
            dx: 1.0,
            dy: 1.0,
            cols,
            rows: 180,
        };
        // (zone, grid, copies added, cells)
        let cases: [(Vec<Polygon>, GridWindow, usize, f64); 7] = [
            (
                vec![rect(178.0, 0.0, 182.0, 2.0)],
                global(-180.0, 360),
                1,
                8.0,
            ),
            (
                vec![rect(178.0, 0.0, 180.0, 2.0), rect(-180.0, 0.0, -178.0, 2.0)],
                global(-180.0, 360),
                0,
                8.0,
            ),
            (
                vec![rect(10.0, 0.0, 14.0, 2.0)],
                global(-180.0, 360),
                0,
                8.0,
            ),
            (
                vec![rect(181.0, 0.0, 183.0, 2.0)],
                global(-180.0, 360),
                1,
                4.0,
            ),
            (
                vec![rect(-183.0, 0.0, -181.0, 2.0)],
                global(-180.0, 360),
                1,
                4.0,
            ),
            (vec![rect(-2.0, 0.0, 2.0, 2.0)], global(0.0, 360), 1, 8.0),
            (
                vec![rect(178.0, 0.0, 182.0, 2.0)],
                global(100.0, 80),
                0,
                4.0,
            ),
        ];
        for (zone, grid, copies, cells) in &cases {
            let (wrapped, added) = wrap_longitudes(zone, grid, 360.0).unwrap();
            assert_eq!(added, *copies, "{zone:?}");
            for semantics in [
                Semantics::CellCentre,
                Semantics::AllTouched,
                Semantics::Coverage,
            ] {
                let total = zone_weights(&wrapped, grid, semantics).unwrap().total();
                assert!(
                    (total - cells).abs() < 1e-6,
                    "{zone:?} {semantics:?}: {total}"
                );
            }
        }
        // A polygon a turn wide is left as it is.
        let band = vec![rect(-200.0, 0.0, 160.0, 2.0)];
        assert_eq!(
            wrap_longitudes(&band, &global(-180.0, 360), 360.0)
                .unwrap()
                .1,
            0
        );
        // 361 columns (-180.5..180.5): a needed copy is refused, an unneeded one is not.
        let wide = GridWindow {
            x0: -180.5,
            ..global(0.0, 361)
        };
        assert!(matches!(
            wrap_longitudes(&[rect(178.0, 0.0, 182.0, 2.0)], &wide, 360.0),
            Err(AggregationError::WrapAcrossRepeatedLongitudes { .. })
        ));
        assert_eq!(
            wrap_longitudes(&[rect(10.0, 0.0, 14.0, 2.0)], &wide, 360.0)
                .unwrap()
                .1,
            0
        );
    }

    /// The weights of `zone` over the whole raster, as rows of the full grid.
    fn full(zone: &[Polygon], grid: &GridWindow, semantics: Semantics) -> Vec<Vec<f32>> {
        let w = zone_weights_in(zone, grid, semantics, grid.full_window()).unwrap();
        w.weights.chunks(grid.cols).map(<[f32]>::to_vec).collect()
    }

    fn assert_close(actual: &[Vec<f32>], expected: &[&[f64]], tol: f64) {
        assert_eq!(actual.len(), expected.len());
        for (r, (a, e)) in actual.iter().zip(expected).enumerate() {
            assert_eq!(a.len(), e.len());
            for (c, (&x, &y)) in a.iter().zip(e.iter()).enumerate() {
                assert!(
                    (f64::from(x) - y).abs() <= tol,
                    "cell ({r}, {c}): got {x}, expected {y}\n{actual:?}"
                );
            }
        }
    }

    /// Deterministic PRNG (splitmix64).
    struct Rng(u64);
    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn range(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.uniform()
        }
    }

    /// A random star-shaped (hence simple) ring around `centre`, which it contains.
    fn star(rng: &mut Rng, centre: [f64; 2], r_min: f64, r_max: f64, n: usize) -> Ring {
        // Jittered even angles: consecutive gaps stay below π, so `centre` is inside.
        let start = rng.range(0.0, std::f64::consts::TAU);
        let angles: Vec<f64> = (0..n)
            .map(|i| start + (i as f64 + rng.range(0.0, 0.4)) / n as f64 * std::f64::consts::TAU)
            .collect();
        let mut ring: Ring = angles
            .iter()
            .map(|a| {
                let r = rng.range(r_min, r_max);
                [centre[0] + r * a.cos(), centre[1] + r * a.sin()]
            })
            .collect();
        if rng.uniform() < 0.5 {
            ring.reverse();
        }
        if rng.uniform() < 0.5 {
            ring.push(ring[0]);
        }
        ring
    }

    /// Distance from `c` to the nearest edge of `ring` (a safe radius for a hole).
    fn inradius(ring: &Ring, c: [f64; 2]) -> f64 {
        let n = ring.len();
        (0..n)
            .map(|i| {
                let a = ring[i];
                let b = ring[(i + 1) % n];
                let (ex, ey) = (b[0] - a[0], b[1] - a[1]);
                let len2 = ex * ex + ey * ey;
                let t = if len2 > 0.0 {
                    (((c[0] - a[0]) * ex + (c[1] - a[1]) * ey) / len2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                let (px, py) = (a[0] + t * ex - c[0], a[1] + t * ey - c[1]);
                (px * px + py * py).sqrt()
            })
            .fold(f64::INFINITY, f64::min)
    }

    fn polygon_area(polygon: &Polygon) -> f64 {
        polygon
            .iter()
            .enumerate()
            .map(|(i, ring)| {
                let a = shoelace2(ring).abs() / 2.0;
                if i == 0 {
                    a
                } else {
                    -a
                }
            })
            .sum()
    }

    /// Area of `ring` inside the axis-aligned box, by Sutherland–Hodgman clipping (an
    /// independent reference for the coverage algorithm).
    fn clipped_area(ring: &Ring, b: [f64; 4]) -> f64 {
        let mut poly = ring.clone();
        let planes: [(usize, f64, bool); 4] = [
            (0, b[0], true),
            (0, b[2], false),
            (1, b[1], true),
            (1, b[3], false),
        ];
        for (axis, v, keep_above) in planes {
            let inside = |p: &[f64; 2]| {
                if keep_above {
                    p[axis] >= v
                } else {
                    p[axis] <= v
                }
            };
            let mut out = Vec::new();
            let n = poly.len();
            for i in 0..n {
                let p = poly[i];
                let q = poly[(i + 1) % n];
                let (pi, qi) = (inside(&p), inside(&q));
                if pi {
                    out.push(p);
                }
                if pi != qi {
                    let t = (v - p[axis]) / (q[axis] - p[axis]);
                    out.push([p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])]);
                }
            }
            poly = out;
            if poly.is_empty() {
                return 0.0;
            }
        }
        shoelace2(&poly).abs() / 2.0
    }

    /// Even-odd point in polygon (reference for cell centres away from edges).
    fn contains(polygon: &Polygon, p: [f64; 2]) -> bool {
        let mut inside = false;
        for ring in polygon {
            let n = ring.len();
            for i in 0..n {
                let a = ring[i];
                let b = ring[(i + 1) % n];
                if (a[1] > p[1]) != (b[1] > p[1]) {
                    let x = a[0] + (p[1] - a[1]) * (b[0] - a[0]) / (b[1] - a[1]);
                    if p[0] < x {
                        inside = !inside;
                    }
                }
            }
        }
        inside
    }

    #[test]
    fn unit_square_aligned_with_cells() {
        let g = grid4();
        let zone = [rect(1.0, 1.0, 2.0, 2.0)];
        // Cell (row 2, col 1) spans x 1..2, y 1..2.
        let mut expected = vec![vec![0.0f64; 4]; 4];
        expected[2][1] = 1.0;
        let exp: Vec<&[f64]> = expected.iter().map(Vec::as_slice).collect();
        for s in Semantics::ALL {
            assert_close(&full(&zone, &g, s), &exp, 0.0);
        }
        let w = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert_eq!(
            w.window,
            CellWindow {
                col_off: 1,
                row_off: 2,
                cols: 1,
                rows: 1
            }
        );
        assert_eq!(w.weights, vec![1.0]);
    }

    #[test]
    fn offset_unit_square_spans_four_cells() {
        let g = grid4();
        // x 1.5..2.5, y 1.5..2.5: a quarter of cells (1,1), (1,2), (2,1), (2,2), whose centres
        // are the square's corners: GDAL counts the two right-hand ones (right edge inside).
        let zone = [rect(1.5, 1.5, 2.5, 2.5)];
        let w = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert_eq!(
            w.window,
            CellWindow {
                col_off: 1,
                row_off: 1,
                cols: 2,
                rows: 2
            }
        );
        assert_eq!(w.weights, vec![0.25; 4]);
        let at = zone_weights(&zone, &g, Semantics::AllTouched).unwrap();
        assert_eq!(at.weights, vec![1.0; 4]);
        let cc = zone_weights(&zone, &g, Semantics::CellCentre).unwrap();
        assert_eq!(cc.weights, vec![0.0, 1.0, 0.0, 1.0]);
        // Shrunk a little, no centre is inside.
        let zone = [rect(1.6, 1.6, 2.4, 2.4)];
        let cc = zone_weights(&zone, &g, Semantics::CellCentre).unwrap();
        assert_eq!(cc.weights, vec![0.0; 4]);
        let cov = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        for w in cov.weights {
            assert!((f64::from(w) - 0.16).abs() < 1e-7);
        }
    }

    #[test]
    fn triangle_exact_fractions() {
        let g = grid4();
        // Right triangle (0,0) (2,0) (0,2): below the line x + y = 2.
        // Bottom row (row 3, y 0..1): col 0 fully inside, col 1 half (triangle x+y<=2 in
        // [1,2]x[0,1] has area 1/2). Row 2 (y 1..2): col 0 half. Everything else 0.
        let zone = [vec![vec![[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]]]];
        let cov = full(&zone, &g, Semantics::Coverage);
        assert_close(
            &cov,
            &[
                &[0.0, 0.0, 0.0, 0.0],
                &[0.0, 0.0, 0.0, 0.0],
                &[0.5, 0.0, 0.0, 0.0],
                &[1.0, 0.5, 0.0, 0.0],
            ],
            1e-12,
        );
        // All touched: positive area only; cell (2,1) meets the triangle at a corner only.
        let at = full(&zone, &g, Semantics::AllTouched);
        assert_close(
            &at,
            &[
                &[0.0, 0.0, 0.0, 0.0],
                &[0.0, 0.0, 0.0, 0.0],
                &[1.0, 0.0, 0.0, 0.0],
                &[1.0, 1.0, 0.0, 0.0],
            ],
            0.0,
        );
        // Centres: (0.5, 0.5) inside; (1.5, 0.5) and (0.5, 1.5) lie exactly on the hypotenuse
        // (x + y = 2). The hypotenuse is a right-hand edge on both scanlines, so GDAL counts them
        // as inside.
        let cc = full(&zone, &g, Semantics::CellCentre);
        assert_close(
            &cc,
            &[
                &[0.0, 0.0, 0.0, 0.0],
                &[0.0, 0.0, 0.0, 0.0],
                &[1.0, 0.0, 0.0, 0.0],
                &[1.0, 1.0, 0.0, 0.0],
            ],
            0.0,
        );
    }

    #[test]
    fn triangle_fractions_by_hand() {
        // Triangle (0,0) (1,0) (0,1) on a 2 x 2 grid of half-unit cells (x + y <= 1).
        let g = GridWindow {
            x0: 0.0,
            y0: 1.0,
            dx: 0.5,
            dy: 0.5,
            cols: 2,
            rows: 2,
        };
        let zone = [vec![vec![[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]]];
        // Bottom-left cell [0,.5]x[0,.5]: fully inside. Bottom-right [.5,1]x[0,.5]: half.
        // Top-left [0,.5]x[.5,1]: half. Top-right: only the corner (0.5, 0.5) => 0.
        let cov = full(&zone, &g, Semantics::Coverage);
        assert_close(&cov, &[&[0.5, 0.0], &[1.0, 0.5]], 1e-12);
        // A triangle with non-trivial fractions: (0,0) (4,0) (0,1) on grid4. Row 3 (y 0..1):
        // the line y = 1 - x/4 over col c covers the trapezoid area between x=c and c+1:
        // ∫ (1 - x/4) dx = 1 - (2c + 1)/8 → 7/8, 5/8, 3/8, 1/8.
        let zone = [vec![vec![[0.0, 0.0], [4.0, 0.0], [0.0, 1.0]]]];
        let cov = full(&zone, &grid4(), Semantics::Coverage);
        assert_close(
            &cov,
            &[
                &[0.0; 4],
                &[0.0; 4],
                &[0.0; 4],
                &[0.875, 0.625, 0.375, 0.125],
            ],
            1e-12,
        );
    }

    #[test]
    fn polygon_with_hole() {
        let g = grid4();
        // 4x4 square minus the 2x2 hole x 1..3, y 1..3; the hole may run either way.
        for reverse_hole in [false, true] {
            let mut hole = vec![[1.0, 1.0], [3.0, 1.0], [3.0, 3.0], [1.0, 3.0]];
            if reverse_hole {
                hole.reverse();
            }
            let zone = [vec![
                vec![[0.0, 0.0], [4.0, 0.0], [4.0, 4.0], [0.0, 4.0]],
                hole,
            ]];
            let ring: &[f64] = &[1.0, 1.0, 1.0, 1.0];
            let mid: &[f64] = &[1.0, 0.0, 0.0, 1.0];
            for s in Semantics::ALL {
                assert_close(&full(&zone, &g, s), &[ring, mid, mid, ring], 0.0);
            }
        }
        // A hole that cuts cells in half: hole x 0.5..3.5, y 0.5..3.5 inside the 4x4 square.
        let zone = [
            rect(0.0, 0.0, 4.0, 4.0)[0].clone(),
            rect(0.5, 0.5, 3.5, 3.5)[0].clone(),
        ];
        let zone = [zone.to_vec()];
        let cov = full(&zone, &g, Semantics::Coverage);
        assert_close(
            &cov,
            &[
                &[0.75, 0.5, 0.5, 0.75],
                &[0.5, 0.0, 0.0, 0.5],
                &[0.5, 0.0, 0.0, 0.5],
                &[0.75, 0.5, 0.5, 0.75],
            ],
            1e-12,
        );
        assert_close(
            &full(&zone, &g, Semantics::AllTouched),
            &[
                &[1.0; 4],
                &[1.0, 0.0, 0.0, 1.0],
                &[1.0, 0.0, 0.0, 1.0],
                &[1.0; 4],
            ],
            0.0,
        );
        // The centres of the outer ring of cells lie on the hole's boundary (x or y = 0.5 or
        // 3.5), where GDAL's rule decides. Rows 0..2 (pixel y 0.5, 1.5, 2.5; the hole's sides
        // span [0.5, 3.5)): crossings 0 | 1 (hole left, 0.5 rounded) | 4 (hole right, 3.5
        // rounded) | 4 → only col 0; the centres on the hole's right edge are inside the hole.
        // Row 3 (pixel y 3.5, the hole's bottom edge): the hole's sides stop before it → full.
        assert_close(
            &full(&zone, &g, Semantics::CellCentre),
            &[
                &[1.0, 0.0, 0.0, 0.0],
                &[1.0, 0.0, 0.0, 0.0],
                &[1.0, 0.0, 0.0, 0.0],
                &[1.0, 1.0, 1.0, 1.0],
            ],
            0.0,
        );
    }

    #[test]
    fn multipolygon_parts_are_united() {
        let g = grid4();
        let zone = [rect(0.0, 3.0, 1.0, 4.0), rect(2.5, 0.0, 4.0, 1.0)];
        let cov = full(&zone, &g, Semantics::Coverage);
        assert_close(
            &cov,
            &[
                &[1.0, 0.0, 0.0, 0.0],
                &[0.0; 4],
                &[0.0; 4],
                &[0.0, 0.0, 0.5, 1.0],
            ],
            1e-12,
        );
        let w = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert_eq!(w.window, g.full_window());
        assert!((w.total() - 2.5).abs() < 1e-12);
        // Centre (2.5, 0.5) is on the left edge of the second part: outside (GDAL).
        assert_close(
            &full(&zone, &g, Semantics::CellCentre),
            &[
                &[1.0, 0.0, 0.0, 0.0],
                &[0.0; 4],
                &[0.0; 4],
                &[0.0, 0.0, 0.0, 1.0],
            ],
            0.0,
        );
        // Overlapping parts: coverage is clamped at 1, cell centres are united.
        let zone = [rect(0.0, 0.0, 2.0, 2.0), rect(1.0, 1.0, 3.0, 3.0)];
        let cov = full(&zone, &g, Semantics::Coverage);
        assert_close(
            &cov,
            &[
                &[0.0; 4],
                &[0.0, 1.0, 1.0, 0.0],
                &[1.0, 1.0, 1.0, 0.0],
                &[1.0, 1.0, 0.0, 0.0],
            ],
            1e-12,
        );
        assert_eq!(full(&zone, &g, Semantics::CellCentre), cov);
    }

    #[test]
    fn polygon_partly_outside_the_raster() {
        let g = grid4();
        // x -2..1.5, y 2.5..10: covers col 0 fully and half of col 1, rows 0..1 fully and half
        // of row 1 (y 2..3: 2.5..3 is half).
        let zone = [rect(-2.0, 2.5, 1.5, 10.0)];
        let w = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert_eq!(
            w.window,
            CellWindow {
                col_off: 0,
                row_off: 0,
                cols: 2,
                rows: 2
            }
        );
        assert_eq!(w.weights, vec![1.0, 0.5, 0.5, 0.25]);
        let at = zone_weights(&zone, &g, Semantics::AllTouched).unwrap();
        assert_eq!(at.weights, vec![1.0; 4]);
        // Centres (0.5, 3.5) in, (1.5, 3.5) on the right edge: in; row 1 centres at y 2.5 on the
        // bottom edge: in (bottom horizontal edge rule).
        let cc = zone_weights(&zone, &g, Semantics::CellCentre).unwrap();
        assert_eq!(cc.weights, vec![1.0; 4]);
        // Entirely outside: empty window, empty weights.
        let zone = [rect(5.0, 5.0, 6.0, 6.0)];
        for s in Semantics::ALL {
            let w = zone_weights(&zone, &g, s).unwrap();
            assert!(w.window.is_empty());
            assert!(w.weights.is_empty());
        }
        // Touching the raster only along its border: nothing.
        let zone = [rect(4.0, 0.0, 5.0, 4.0)];
        assert!(zone_window(&zone, &g).unwrap().is_empty());
        // Covering the whole raster.
        let zone = [rect(-10.0, -10.0, 10.0, 10.0)];
        for s in Semantics::ALL {
            let w = zone_weights(&zone, &g, s).unwrap();
            assert_eq!(w.window, g.full_window());
            assert_eq!(w.weights, vec![1.0; 16]);
        }
    }

    #[test]
    fn all_touched_ignores_cells_only_grazed() {
        // Triangle (5,1) (7,3) (5,5) on an 8 x 6 grid of unit cells. Its lowest vertex (5, 1)
        // is the top-left corner of cell (row 5, col 5), and its lower edge y = x - 4 passes
        // through the corner (6, 2) of cell (row 4, col 6): GDAL's ALL_TOUCHED burns both
        // (gdal_rasterize -at, GDAL 3.6.2, gives the `gdal` mask below), but neither holds any
        // area of the triangle. (The symmetric corner (6, 4) of cell (row 1, col 6) is not
        // burned by GDAL either.)
        let g = GridWindow {
            x0: 0.0,
            y0: 6.0,
            dx: 1.0,
            dy: 1.0,
            cols: 8,
            rows: 6,
        };
        let zone = [vec![vec![[5.0, 1.0], [7.0, 3.0], [5.0, 5.0]]]];
        let at = full(&zone, &g, Semantics::AllTouched);
        let gdal: [&[f64]; 6] = [
            &[0.0; 8],
            &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
            &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
            &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
            &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
            &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
        ];
        let mut expected: Vec<Vec<f64>> = gdal.iter().map(|r| r.to_vec()).collect();
        expected[5][5] = 0.0;
        expected[4][6] = 0.0;
        let expected: Vec<&[f64]> = expected.iter().map(Vec::as_slice).collect();
        assert_close(&at, &expected, 0.0);
        // Its area is 4 cells.
        let w = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert!((w.total() - 4.0).abs() < 1e-12);
    }

    #[test]
    fn polygon_smaller_than_a_cell() {
        let g = grid4();
        // A 0.2 x 0.1 rectangle in cell (row 1, col 2), away from its centre (2.5, 2.5).
        let zone = [rect(2.1, 2.8, 2.3, 2.9)];
        let cov = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert_eq!(
            cov.window,
            CellWindow {
                col_off: 2,
                row_off: 1,
                cols: 1,
                rows: 1
            }
        );
        assert!((f64::from(cov.weights[0]) - 0.02).abs() < 1e-7);
        assert_eq!(
            zone_weights(&zone, &g, Semantics::AllTouched)
                .unwrap()
                .weights,
            vec![1.0]
        );
        assert_eq!(
            zone_weights(&zone, &g, Semantics::CellCentre)
                .unwrap()
                .weights,
            vec![0.0]
        );
        // Around the centre: the centre rule picks it up.
        let zone = [rect(2.4, 2.4, 2.6, 2.6)];
        assert_eq!(
            zone_weights(&zone, &g, Semantics::CellCentre)
                .unwrap()
                .weights,
            vec![1.0]
        );
        let cov = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
        assert!((f64::from(cov.weights[0]) - 0.04).abs() < 1e-7);
    }

    #[test]
    fn centre_on_edge_follows_gdal() {
        let g = grid4();
        // Square with all four edges through centres: x 0.5..2.5, y 1.5..3.5 (pixel rows
        // 0.5..2.5). GDAL: left edge out, right edge in, top edge in, bottom edge in.
        let expected: [&[f64]; 4] = [
            &[0.0, 1.0, 1.0, 0.0],
            &[0.0, 1.0, 1.0, 0.0],
            &[0.0, 1.0, 1.0, 0.0],
            &[0.0; 4],
        ];
        for closed in [false, true] {
            for reverse in [false, true] {
                let mut ring = vec![[0.5, 1.5], [2.5, 1.5], [2.5, 3.5], [0.5, 3.5]];
                if closed {
                    ring.push(ring[0]);
                }
                if reverse {
                    ring.reverse();
                }
                let zone = [vec![ring]];
                assert_close(&full(&zone, &g, Semantics::CellCentre), &expected, 0.0);
            }
        }
        // A diamond with vertices on centres: (1.5, 3.5) top, (2.5, 2.5) right, (1.5, 1.5)
        // bottom, (0.5, 2.5) left. Pixel rows: top vertex at 0.5, middle at 1.5, bottom 2.5.
        // Row 0 (y = 0.5): both edges start at the top vertex → crossings 2 and 2 → nothing.
        // Row 1: crossings at x 0.5 → 1 and 2.5 → 3: cols 1, 2. Row 2: the edges end → none.
        let zone = [vec![vec![[1.5, 3.5], [2.5, 2.5], [1.5, 1.5], [0.5, 2.5]]]];
        assert_close(
            &full(&zone, &g, Semantics::CellCentre),
            &[&[0.0; 4], &[0.0, 1.0, 1.0, 0.0], &[0.0; 4], &[0.0; 4]],
            0.0,
        );
        // Non-aligned grid origin: same geometry shifted by the origin must give the same mask.
        let shifted = GridWindow {
            x0: 1000.0,
            y0: 5004.0,
            ..g
        };
        let mut ring = vec![[0.5, 1.5], [2.5, 1.5], [2.5, 3.5], [0.5, 3.5]];
        for p in &mut ring {
            p[0] += 1000.0;
            p[1] += 5000.0;
        }
        assert_close(
            &full(&[vec![ring]], &shifted, Semantics::CellCentre),
            &expected,
            0.0,
        );
    }

    #[test]
    fn cell_centre_matches_point_in_polygon_away_from_edges() {
        let mut rng = Rng(7);
        let g = GridWindow {
            x0: 0.0,
            y0: 40.0,
            dx: 1.0,
            dy: 1.0,
            cols: 40,
            rows: 40,
        };
        for _ in 0..200 {
            let n = 3 + (rng.next_u64() % 10) as usize;
            let c = [rng.range(5.0, 35.0), rng.range(5.0, 35.0)];
            let mut polygon = vec![star(&mut rng, c, 4.0, 15.0, n)];
            if rng.uniform() < 0.5 {
                let k = 3 + (rng.next_u64() % 5) as usize;
                let r = inradius(&polygon[0], c);
                polygon.push(star(&mut rng, c, 0.2 * r, 0.9 * r, k));
            }
            let w = full(std::slice::from_ref(&polygon), &g, Semantics::CellCentre);
            for (r, row) in w.iter().enumerate() {
                for (col, &v) in row.iter().enumerate() {
                    let p = [col as f64 + 0.5, 40.0 - r as f64 - 0.5];
                    assert_eq!(v == 1.0, contains(&polygon, p), "cell ({r}, {col})");
                }
            }
        }
    }

    #[test]
    fn coverage_matches_clipping_and_sums_to_area() {
        let mut rng = Rng(42);
        for case in 0..300 {
            let dx = rng.range(0.3, 3.0);
            let dy = rng.range(0.3, 3.0);
            let g = GridWindow {
                x0: rng.range(-1000.0, 1000.0),
                y0: rng.range(-1000.0, 1000.0),
                dx,
                dy,
                cols: 30,
                rows: 25,
            };
            let n = 3 + (rng.next_u64() % 12) as usize;
            let c = [
                g.x0 + rng.range(0.2, 0.8) * 30.0 * dx,
                g.y0 - rng.range(0.2, 0.8) * 25.0 * dy,
            ];
            let scale = rng.range(0.2, 8.0) * dx.max(dy);
            let mut polygon = vec![star(&mut rng, c, 0.6 * scale, scale, n)];
            if rng.uniform() < 0.5 {
                let k = 3 + (rng.next_u64() % 6) as usize;
                let r = inradius(&polygon[0], c);
                polygon.push(star(&mut rng, c, 0.2 * r, 0.9 * r, k));
            }
            let zone = [polygon.clone()];
            let cov = zone_weights(&zone, &g, Semantics::Coverage).unwrap();
            let at = zone_weights(&zone, &g, Semantics::AllTouched).unwrap();
            let w = cov.window;
            let mut total = 0.0;
            for r in 0..w.rows {
                for col in 0..w.cols {
                    let (gr, gc) = (w.row_off + r, w.col_off + col);
                    let b = [
                        g.x0 + gc as f64 * dx,
                        g.y0 - (gr + 1) as f64 * dy,
                        g.x0 + (gc + 1) as f64 * dx,
                        g.y0 - gr as f64 * dy,
                    ];
                    let mut expected = clipped_area(&polygon[0], b);
                    for hole in &polygon[1..] {
                        expected -= clipped_area(hole, b);
                    }
                    let expected = expected / (dx * dy);
                    let got = f64::from(cov.weights[r * w.cols + col]);
                    assert!(
                        (got - expected).abs() < 1e-6,
                        "case {case} cell ({gr}, {gc}): {got} vs {expected}"
                    );
                    let touched = at.weights[r * w.cols + col] == 1.0;
                    assert_eq!(touched, got > 0.0, "case {case} cell ({gr}, {gc})");
                    if expected > 1e-6 {
                        assert!(touched);
                    }
                    total += got;
                }
            }
            // Fully inside the raster? Then the fractions sum to the area in cells.
            let inside = polygon[0].iter().all(|p| {
                p[0] > g.x0 && p[0] < g.x0 + 30.0 * dx && p[1] < g.y0 && p[1] > g.y0 - 25.0 * dy
            });
            if inside {
                let area = polygon_area(&polygon) / (dx * dy);
                assert!(
                    (total - area).abs() < 1e-5 * area.max(1.0),
                    "case {case}: {total} vs {area}"
                );
            }
        }
    }

    #[test]
    fn row_blocks_give_the_same_weights() {
        let mut rng = Rng(3);
        let g = GridWindow {
            x0: 0.0,
            y0: 100.0,
            dx: 1.0,
            dy: 1.0,
            cols: 100,
            rows: 100,
        };
        for _ in 0..20 {
            let zone = [vec![
                star(&mut rng, [50.0, 50.0], 10.0, 49.0, 9),
                star(&mut rng, [50.0, 50.0], 2.0, 8.0, 5),
            ]];
            for s in Semantics::ALL {
                let whole = zone_weights(&zone, &g, s).unwrap();
                let mut pieces = Vec::new();
                for block in whole.window.row_blocks(7) {
                    pieces.extend(zone_weights_in(&zone, &g, s, block).unwrap().weights);
                }
                assert_eq!(whole.weights, pieces);
            }
        }
    }

    #[test]
    fn window_and_input_errors() {
        let g = grid4();
        let zone = [rect(0.0, 0.0, 1.0, 1.0)];
        let bad = CellWindow {
            col_off: 3,
            row_off: 0,
            cols: 2,
            rows: 1,
        };
        assert!(matches!(
            zone_weights_in(&zone, &g, Semantics::Coverage, bad),
            Err(AggregationError::WindowOutsideGrid { .. })
        ));
        let nan = [vec![vec![[0.0, 0.0], [f64::NAN, 1.0], [1.0, 1.0]]]];
        assert_eq!(
            zone_weights(&nan, &g, Semantics::Coverage),
            Err(AggregationError::NonFiniteCoordinate)
        );
        let flat = GridWindow { dx: 0.0, ..g };
        assert!(matches!(
            zone_weights(&zone, &flat, Semantics::Coverage),
            Err(AggregationError::InvalidGrid(_))
        ));
        assert!(GridWindow::from_geotransform([0.0, 1.0, 0.1, 4.0, 0.0, -1.0], 4, 4).is_err());
        assert!(GridWindow::from_geotransform([0.0, 1.0, 0.0, 4.0, 0.0, 1.0], 4, 4).is_err());
        assert_eq!(
            GridWindow::from_geotransform([0.0, 1.0, 0.0, 4.0, 0.0, -1.0], 4, 4).unwrap(),
            g
        );
        // Empty zones and degenerate rings.
        assert!(zone_window(&[], &g).unwrap().is_empty());
        let empty: [Polygon; 1] = [vec![vec![]]];
        assert!(zone_weights(&empty, &g, Semantics::Coverage)
            .unwrap()
            .weights
            .is_empty());
        let line = [vec![vec![[0.5, 0.5], [3.5, 3.5]]]];
        for s in Semantics::ALL {
            assert_eq!(zone_weights(&line, &g, s).unwrap().total(), 0.0);
        }
        assert_eq!(
            "cell_center".parse::<Semantics>().unwrap(),
            Semantics::CellCentre
        );
        assert!("centroid".parse::<Semantics>().is_err());
        for s in Semantics::ALL {
            assert_eq!(s.as_str().parse::<Semantics>().unwrap(), s);
        }
        assert_eq!(
            CellWindow {
                col_off: 1,
                row_off: 2,
                cols: 3,
                rows: 5
            }
            .row_blocks(2)
            .collect::<Vec<_>>(),
            vec![
                CellWindow {
                    col_off: 1,
                    row_off: 2,
                    cols: 3,
                    rows: 2
                },
                CellWindow {
                    col_off: 1,
                    row_off: 4,
                    cols: 3,
                    rows: 2
                },
                CellWindow {
                    col_off: 1,
                    row_off: 6,
                    cols: 3,
                    rows: 1
                },
            ]
        );
    }
}
