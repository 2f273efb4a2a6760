//! Geometry and geodesy shared by the vector analysis runners (`measure`, `analysis`): simple
//! parts of any geometry (curves linearised, collections opened), repairs that keep a feature's
//! own kinds, cascaded unions, figures on the ellipsoid (GeographicLib) or in the plane, a
//! planar CRS's scale error over an extent, and local azimuthal equidistant projections (one
//! per part, centred longitude-aware).

use crate::gdal::{facts::transform, ErrorCapture, GdalError};
use gdal::spatial_ref::{AxisMappingStrategy, CoordTransform, SpatialRef};
use gdal::vector::Geometry;
use gdal_sys::OGRwkbGeometryType as Wkb;
use geographiclib_rs::{Geodesic, InverseGeodesic, PolygonArea, Winding};
use schemars::JsonSchema;
use serde::Serialize;

/// What a geometry part is measured as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Polygon,
    Line,
    Point,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Polygon => "polygon",
            Kind::Line => "line",
            Kind::Point => "point",
        }
    }
}

/// One simple part of a geometry: a polygon's rings (shell first), a line's vertices or a
/// point, as `[x, y, z]`.
#[derive(Debug, Clone)]
pub struct Part {
    pub kind: Kind,
    pub rings: Vec<Vec<[f64; 3]>>,
}

/// The simple parts of a geometry, curves linearised, collections opened.
pub fn parts(geometry: &Geometry) -> Vec<Part> {
    let mut out = Vec::new();
    collect_parts(geometry, &mut out, 0);
    out
}

fn points_of(geometry: &Geometry) -> Vec<[f64; 3]> {
    let mut points = Vec::new();
    geometry.get_points(&mut points);
    points.into_iter().map(|(x, y, z)| [x, y, z]).collect()
}

fn collect_parts(geometry: &Geometry, out: &mut Vec<Part>, depth: usize) {
    if geometry.is_empty() || depth > 32 {
        return;
    }
    if has_curves(geometry) {
        if let Some(linear) = linearised(geometry) {
            collect_parts(&linear, out, depth + 1);
        }
        return;
    }
    match gdal::vector::geometry_type_flatten(geometry.geometry_type()) {
        Wkb::wkbPoint => out.push(Part {
            kind: Kind::Point,
            rings: vec![points_of(geometry)],
        }),
        Wkb::wkbLineString | Wkb::wkbLinearRing => out.push(Part {
            kind: Kind::Line,
            rings: vec![points_of(geometry)],
        }),
        Wkb::wkbPolygon | Wkb::wkbTriangle => out.push(Part {
            kind: Kind::Polygon,
            rings: (0..geometry.geometry_count())
                .map(|i| points_of(&geometry.get_geometry(i)))
                .collect(),
        }),
        _ => {
            for i in 0..geometry.geometry_count() {
                collect_parts(&geometry.get_geometry(i), out, depth + 1);
            }
        }
    }
}

pub fn has_curves(geometry: &Geometry) -> bool {
    // SAFETY: the handle is valid for the borrow of `geometry`.
    unsafe { gdal_sys::OGR_G_HasCurveGeometry(geometry.c_geometry(), 0) != 0 }
}

/// `geometry` with its arcs as line segments in its own plane, or `None` when it has none:
/// what every reader of a curved geometry starts from (attack round 18, R18-B3 to B6).
pub fn without_arcs(geometry: &Geometry) -> Option<Geometry> {
    has_curves(geometry).then(|| linearised(geometry)).flatten()
}

/// The geometry with arcs replaced by line segments (OGR's default step).
pub fn linearised(geometry: &Geometry) -> Option<Geometry> {
    // SAFETY: the input handle is valid for the borrow; the result is a new geometry that
    // `owned` takes over and destroys.
    unsafe {
        let handle =
            gdal_sys::OGR_G_GetLinearGeometry(geometry.c_geometry(), 0.0, std::ptr::null_mut());
        owned(handle)
    }
}

/// Take over a geometry handle GDAL returned (through ISO WKB), destroying it.
///
/// # Safety
/// `handle` must be null or a geometry the caller owns and does not use afterwards.
unsafe fn owned(handle: gdal_sys::OGRGeometryH) -> Option<Geometry> {
    if handle.is_null() {
        return None;
    }
    let size = gdal_sys::OGR_G_WkbSize(handle);
    let mut buffer = vec![0u8; usize::try_from(size).unwrap_or(0)];
    let status = gdal_sys::OGR_G_ExportToIsoWkb(
        handle,
        gdal_sys::OGRwkbByteOrder::wkbNDR,
        buffer.as_mut_ptr(),
    );
    gdal_sys::OGR_G_DestroyGeometry(handle);
    if status != gdal_sys::OGRErr::OGRERR_NONE {
        return None;
    }
    Geometry::from_wkb(&buffer).ok()
}

/// The union of many geometries at once (GEOS cascaded union).
pub fn union_all(geometries: &[Geometry]) -> Option<Geometry> {
    let mut collection = Geometry::empty(Wkb::wkbMultiPolygon).ok()?;
    let mut count = 0;
    for geometry in geometries {
        for part in polygon_pieces(geometry) {
            if collection.add_geometry(part).is_ok() {
                count += 1;
            }
        }
    }
    if count == 0 {
        return None;
    }
    // SAFETY: the collection's handle is valid; the union is a new geometry `owned` destroys.
    unsafe { owned(gdal_sys::OGR_G_UnionCascaded(collection.c_geometry())) }
}

/// Whether a ring or line of `geometry` (lon/lat) jumps across the antimeridian: two
/// consecutive vertices more than 180° of longitude apart.
pub fn crosses_antimeridian(geometry: &Geometry) -> bool {
    let count = geometry.geometry_count();
    if count == 0 {
        let mut points = Vec::new();
        geometry.get_points(&mut points);
        // An edge between two points both on ±180° runs along the antimeridian or the pole
        // (a world box, Antarctica as Natural Earth draws it) and crosses nothing (attack
        // round 8, R8-11: such rings were refused as crossings).
        // So does an edge between two points on a pole (a surface closed along it).
        let on_the_antimeridian = |lon: f64| (lon.abs() - 180.0).abs() < 1e-9;
        let on_a_pole = |lat: f64| (lat.abs() - 90.0).abs() < 1e-9;
        return points.windows(2).any(|w| {
            (w[1].0 - w[0].0).abs() > 180.0
                && !(on_the_antimeridian(w[0].0) && on_the_antimeridian(w[1].0))
                && !(on_a_pole(w[0].1) && on_a_pole(w[1].1))
        });
    }
    (0..count).any(|i| crosses_antimeridian(&geometry.get_geometry(i)))
}

/// Longest step, in degrees, of an edge of a lon/lat layer's feature followed straight in
/// longitude and latitude ([`drawn_edges`]).
pub const DRAWN_EDGE_STEP_DEGREES: f64 = 1.0;

/// In a lon/lat layer, `geometry` with every edge longer than [`DRAWN_EDGE_STEP_DEGREES`]
/// cut into steps straight in longitude and latitude: the shape the layer draws and the
/// spatial predicates (GEOS, in the layer's plane) read. Projected vertex by vertex into
/// another plane, a long edge became a straight line there instead: a point inside a
/// 4-vertex latitude band was 6,308 km from it (attack round 14, R14-B10), and one lon/lat box
/// measured in two equal-area CRSs gave areas 2.4 times apart (attack round 16, R16-B21).
///
/// `Ok(None)` when nothing needs cutting: a projected layer, a feature within 1° each way, or
/// one whose ring jumps across the antimeridian (cut in lon/lat it would wrap round the globe;
/// its vertices are projected as they are). The vertices the cut adds count against the
/// vertex budget ([`max_vertices`]), so a feature zigzagging round the globe is refused rather
/// than grown without bound.
pub fn drawn_edges(
    argument: &str,
    geometry: &Geometry,
    geographic_layer: bool,
) -> Result<Option<Geometry>, GdalError> {
    if !geographic_layer || crosses_antimeridian(geometry) {
        return Ok(None);
    }
    segmentized(argument, geometry, DRAWN_EDGE_STEP_DEGREES)
}

/// The length of the lines of `geometry` (a lon/lat layer's feature) two ways, when it has an
/// edge longer than [`DRAWN_EDGE_STEP_DEGREES`]: with geodesic edges, and along edges straight
/// in longitude and latitude as the layer draws them (an edge across ±180° goes the long way
/// round, as GEOS reads it). `to_measuring` moves the feature to the measurer's lon/lat when
/// the layer's own is not it. `None` for short edges, where the two agree.
pub fn line_length_readings(
    geometry: &Geometry,
    to_measuring: Option<&CoordTransform>,
    measurer: &Measurer,
) -> Result<Option<(f64, f64)>, GdalError> {
    let length = |g: &Geometry| -> Result<f64, GdalError> {
        let moved = match to_measuring {
            Some(t) => Some(g.transform(t).map_err(|e| GdalError::Failed {
                operation: "transforming a geometry to the measuring CRS".to_string(),
                message: e.to_string(),
            })?),
            None => None,
        };
        let lines = of_kinds(parts(moved.as_ref().unwrap_or(g)), &[Kind::Line]);
        Ok(measurer.figures(&lines, false).length)
    };
    let linear = without_arcs(geometry);
    let geometry = linear.as_ref().unwrap_or(geometry);
    if !parts(geometry).iter().any(|p| p.kind == Kind::Line) {
        return Ok(None);
    }
    let Some(cut) = segmentized("input", geometry, DRAWN_EDGE_STEP_DEGREES)? else {
        return Ok(None);
    };
    Ok(Some((length(geometry)?, length(&cut)?)))
}

/// A lon/lat polygon's area with geodesic edges and along its edges as the layer draws them
/// (straight in longitude and latitude, followed in steps of [`DRAWN_EDGE_STEP_DEGREES`]), in
/// the measurer's units; `None` for a geometry without a polygon or without a long edge.
/// `vector_query` measured a 4-vertex latitude band 0 m² and a polar cap 36 % short as
/// geodesics, with no word, where `vector_measure` refuses with both (attack round 23,
/// R23-B4).
pub fn polygon_area_readings(
    geometry: &Geometry,
    measurer: &Measurer,
) -> Result<Option<(f64, f64)>, GdalError> {
    let area = |g: &Geometry| -> f64 {
        let polygons = of_kinds(parts(g), &[Kind::Polygon]);
        measurer.figures(&polygons, false).area
    };
    let linear = without_arcs(geometry);
    let geometry = linear.as_ref().unwrap_or(geometry);
    if !parts(geometry).iter().any(|p| p.kind == Kind::Polygon) {
        return Ok(None);
    }
    let Some(cut) = segmentized("input", geometry, DRAWN_EDGE_STEP_DEGREES)? else {
        return Ok(None);
    };
    Ok(Some((area(geometry), area(&cut))))
}

/// Longest step, in metres, of an edge of a projected layer's feature followed straight in its
/// plane before the feature is moved into another CRS ([`moved_as_drawn`]).
pub const PROJECTED_EDGE_STEP_METRES: f64 = 50_000.0;

/// `geometry` with every edge longer than `step` (in its own units) cut into steps of at most
/// `step`, or `None` when it is within `step` each way. The vertices the cut adds count
/// against the vertex budget ([`max_vertices`]).
pub fn segmentized(
    argument: &str,
    geometry: &Geometry,
    step: f64,
) -> Result<Option<Geometry>, GdalError> {
    if !(step.is_finite() && step > 0.0) {
        return Ok(None);
    }
    let e = geometry.envelope();
    if e.MaxX - e.MinX <= step && e.MaxY - e.MinY <= step {
        return Ok(None);
    }
    let added: f64 = parts(geometry)
        .iter()
        .flat_map(|p| p.rings.iter())
        .flat_map(|ring| ring.windows(2))
        .map(|w| {
            let span = (w[1][0] - w[0][0]).abs().max((w[1][1] - w[0][1]).abs());
            (span / step).ceil().max(1.0) - 1.0
        })
        .sum();
    let total = added + vertex_count(geometry) as f64;
    if total > max_vertices() as f64 {
        return Err(GdalError::Arguments(format!(
            "{argument}: a feature's long edges, followed as its layer draws them in steps of \
             {step} of its units, would hold {total:.0} vertices, more than the server's \
             budget of {} (GDAL_MCP_MAX_VERTICES); simplify or clip the layer first",
            max_vertices()
        )));
    }
    let cut = geometry.clone();
    // SAFETY: `cut` is an owned geometry; Segmentize only adds vertices to it in place.
    unsafe { gdal_sys::OGR_G_Segmentize(cut.c_geometry(), step) };
    Ok(Some(cut))
}

/// A feature of a layer in `from` moved into `to` through `transform` as the layer draws it:
/// its long edges are first followed in `from`'s own plane ([`DRAWN_EDGE_STEP_DEGREES`] in
/// lon/lat, [`PROJECTED_EDGE_STEP_METRES`] in a projected CRS), and a polygon that lands
/// across ±180° in a lon/lat `to` is split there ([`split_at_antimeridian`]). Moved vertex by
/// vertex, a lon/lat box's 120° edge along 50° N became a chord 2,200 km from the pole in a
/// polar plane, so one intersection answered 23.4 % less one way round than the other
/// (attack round 16, R16-B17); and a Pacific box in EPSG:3832 became, in lon/lat, a band round
/// the rest of the globe, meeting nothing it covers (R16-B5). The second value says whether
/// the feature was split at ±180°.
pub fn moved_as_drawn(
    argument: &str,
    geometry: &Geometry,
    from: &SpatialRef,
    transform: &CoordTransform,
    to: &SpatialRef,
) -> Result<(Geometry, bool), GdalError> {
    // Arcs as line segments first: GDAL's transform and the host's splitting read rings of
    // points (attack round 18, R18-B5, R18-B6).
    let linear = without_arcs(geometry);
    let geometry = linear.as_ref().unwrap_or(geometry);
    let dense = if from.is_geographic() {
        drawn_edges(argument, geometry, true)?
    } else if from.is_projected() {
        let metres = from.linear_units();
        if metres.is_finite() && metres > 0.0 {
            segmentized(argument, geometry, PROJECTED_EDGE_STEP_METRES / metres)?
        } else {
            None
        }
    } else {
        None
    };
    let moved = dense
        .as_ref()
        .unwrap_or(geometry)
        .transform(transform)
        .map_err(|e| GdalError::Failed {
            operation: format!("{argument}: moving a feature into the other layer's CRS"),
            message: e.to_string(),
        })?;
    if to.is_geographic() {
        if let Some(split) = split_at_antimeridian(&moved)? {
            return Ok((split, true));
        }
    }
    Ok((moved, false))
}

/// The error of a tool that works in a layer's lon/lat and met a feature crossing the
/// antimeridian, where it wraps round the globe: refused, never computed wrong (attack
/// round 7, R7-4). `consequence` says what would have gone wrong in this tool.
pub fn antimeridian_refusal(argument: &str, fid: Option<u64>, consequence: &str) -> GdalError {
    GdalError::Arguments(format!(
        "{argument}: feature {} crosses the antimeridian (consecutive longitudes more than 180° \
         apart), and this tool works in the layer's lon/lat, where such a feature wraps round \
         the globe: {consequence}. Split the features at ±180° (or reproject the layer to a \
         projected CRS that keeps them whole) first",
        fid.map_or_else(|| "without id".to_string(), |f| f.to_string())
    ))
}

/// A lon/lat polygon or multipolygon whose edges jump across ±180° (a buffer drawn round a
/// feature near the antimeridian and brought back to lon/lat) as the same surface split at
/// ±180°: every part within [-180°, 180°], no edge a jump. A ring that winds round a pole (a
/// circle round it) is closed along the pole. `None` when nothing needs splitting, so an
/// ordinary geometry is never rewritten.
///
/// Each ring is unwrapped (every step between consecutive vertices taken the short way round,
/// holes on their shell's sheet), then the surface is cut by 360°-wide windows and each piece
/// shifted back by whole turns: the split parts cover exactly the unsplit surface.
pub fn split_at_antimeridian(geometry: &Geometry) -> Result<Option<Geometry>, GdalError> {
    let failed = |what: String| GdalError::Failed {
        operation: "splitting a lon/lat polygon at the antimeridian".to_string(),
        message: what,
    };
    let turn = |d: f64| d - 360.0 * (d / 360.0).round();
    let mut unwrapped: Vec<Vec<Vec<(f64, f64)>>> = Vec::new();
    let mut needs_split = false;
    let (mut west, mut east) = (f64::INFINITY, f64::NEG_INFINITY);
    for polygon in polygon_pieces(geometry) {
        let mut rings = Vec::new();
        let mut sheet: Option<f64> = None;
        for i in 0..polygon.geometry_count() {
            let mut points = Vec::new();
            polygon.get_geometry(i).get_points(&mut points);
            let Some(&(x0, _, _)) = points.first() else {
                continue;
            };
            let mut x = sheet.map_or(x0, |s| s + turn(x0 - s));
            sheet.get_or_insert(x);
            let ring_start = x;
            let mut ring = vec![(x, points[0].1)];
            for w in points.windows(2) {
                x += turn(w[1].0 - w[0].0);
                ring.push((x, w[1].1));
            }
            let winds = ((x - ring[0].0) / 360.0).round();
            // Closed exactly, as GEOS requires (the sums above may leave a last bit).
            if let Some(last) = ring.last_mut() {
                last.0 = ring_start + 360.0 * winds;
            }
            if winds != 0.0 {
                // Round a pole: close the ring along it, on the side its vertices lie, from
                // where the ring meets a ±180° seam, so that the cut below leaves it whole.
                // Closed at its first vertex, a ring starting at 0° (a buffer round the South
                // Pole drawn from (0°, -80°)) was cut into two pieces sharing the meridian 0°
                // down to the pole: an invalid multipolygon (attack round 10, R10-4).
                let mean = ring.iter().map(|p| p.1).sum::<f64>() / ring.len() as f64;
                let pole = if mean >= 0.0 { 90.0 } else { -90.0 };
                ring = from_the_seam(&ring, winds);
                let (first, last) = (ring[0], ring[ring.len() - 1]);
                ring.push((last.0, pole));
                ring.push((first.0, pole));
                ring.push(first);
                needs_split = true;
            }
            for p in &ring {
                west = west.min(p.0);
                east = east.max(p.0);
            }
            rings.push(ring);
        }
        if !rings.is_empty() {
            unwrapped.push(rings);
        }
    }
    if !needs_split && west >= -180.0 - 1e-9 && east <= 180.0 + 1e-9 {
        return Ok(None);
    }
    let mut out = Geometry::empty(Wkb::wkbMultiPolygon).map_err(|e| failed(e.to_string()))?;
    for rings in &unwrapped {
        let polygon = polygon_from(rings, 0.0).map_err(|e| failed(e.to_string()))?;
        let first = ((west + 180.0) / 360.0).floor() as i64;
        let last = ((east + 180.0) / 360.0).floor() as i64;
        for k in first..=last {
            let shift = 360.0 * k as f64;
            let window = vec![vec![
                (-180.0 + shift, -90.0),
                (180.0 + shift, -90.0),
                (180.0 + shift, 90.0),
                (-180.0 + shift, 90.0),
                (-180.0 + shift, -90.0),
            ]];
            let window = polygon_from(&window, 0.0).map_err(|e| failed(e.to_string()))?;
            let Some(piece) = polygon.intersection(&window) else {
                return Err(failed("GEOS could not intersect a piece".to_string()));
            };
            for part in polygon_pieces(&piece) {
                let mut rings = Vec::new();
                for i in 0..part.geometry_count() {
                    let mut points = Vec::new();
                    part.get_geometry(i).get_points(&mut points);
                    rings.push(points.into_iter().map(|(x, y, _)| (x, y)).collect());
                }
                let back = polygon_from(&rings, -shift).map_err(|e| failed(e.to_string()))?;
                out.add_geometry(back).map_err(|e| failed(e.to_string()))?;
            }
        }
    }
    Ok(Some(out))
}

/// An unwrapped ring that winds `winds` times round a pole (its last vertex its first moved by
/// `360° × winds`), started instead where it first meets a seam (-180° + k·360°, the first
/// one it reaches), with the point there added at both ends; unchanged if it meets none.
fn from_the_seam(ring: &[(f64, f64)], winds: f64) -> Vec<(f64, f64)> {
    let Some(&(x0, _)) = ring.first() else {
        return Vec::new();
    };
    let n = ring.len() - 1;
    let seam = if winds > 0.0 {
        -180.0 + 360.0 * ((x0 + 180.0) / 360.0).ceil()
    } else {
        -180.0 + 360.0 * ((x0 + 180.0) / 360.0).floor()
    };
    let shift = 360.0 * winds;
    for i in 0..n {
        let (a, b) = (ring[i], ring[i + 1]);
        let crossing = if a.0 == seam {
            Some(a.1)
        } else if (a.0 - seam) * (b.0 - seam) <= 0.0 && a.0 != b.0 {
            Some(a.1 + (seam - a.0) / (b.0 - a.0) * (b.1 - a.1))
        } else {
            None
        };
        let Some(y) = crossing else {
            continue;
        };
        let mut out = Vec::with_capacity(ring.len() + 2);
        out.push((seam, y));
        out.extend(
            ring[i + 1..=n]
                .iter()
                .copied()
                .filter(|p| p.0 != seam || p.1 != y),
        );
        out.extend(ring[1..=i].iter().map(|&(x, y)| (x + shift, y)));
        out.push((seam + shift, y));
        return out;
    }
    ring.to_vec()
}

/// A polygon of `rings` (shell first), every x shifted by `dx`.
fn polygon_from(rings: &[Vec<(f64, f64)>], dx: f64) -> Result<Geometry, gdal::errors::GdalError> {
    let mut polygon = Geometry::empty(Wkb::wkbPolygon)?;
    for ring in rings {
        let mut r = Geometry::empty(Wkb::wkbLinearRing)?;
        for &(x, y) in ring {
            r.add_point_2d((x + dx, y));
        }
        polygon.add_geometry(r)?;
    }
    Ok(polygon)
}

/// The polygons inside a geometry (a polygon, a multipolygon or a collection), as owned
/// polygons.
pub fn polygon_pieces(geometry: &Geometry) -> Vec<Geometry> {
    let mut out = Vec::new();
    collect_polygons(geometry, &mut out, 0);
    out
}

fn collect_polygons(geometry: &Geometry, out: &mut Vec<Geometry>, depth: usize) {
    if geometry.is_empty() || depth > 32 {
        return;
    }
    match gdal::vector::geometry_type_flatten(geometry.geometry_type()) {
        Wkb::wkbPolygon => out.push(geometry.clone()),
        Wkb::wkbMultiPolygon | Wkb::wkbGeometryCollection | Wkb::wkbMultiSurface => {
            for i in 0..geometry.geometry_count() {
                collect_polygons(&geometry.get_geometry(i), out, depth + 1);
            }
        }
        Wkb::wkbCurvePolygon => {
            if let Some(linear) = linearised(geometry) {
                collect_polygons(&linear, out, depth + 1);
            }
        }
        _ => {}
    }
}

/// Keep only the parts of a repaired geometry of the kinds the original had: a repaired
/// polygon's collapsed slivers are not lines, and must not be measured as such.
pub fn of_kinds(parts: Vec<Part>, kinds: &[Kind]) -> Vec<Part> {
    parts
        .into_iter()
        .filter(|p| kinds.contains(&p.kind))
        .collect()
}

/// The figures of one set of parts, in metres and square metres.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub area: f64,
    pub perimeter: f64,
    pub length: f64,
    pub polygons: u64,
    pub lines: u64,
    pub points: u64,
}

impl Figures {
    pub fn add(&mut self, other: &Figures) {
        self.area += other.area;
        self.perimeter += other.perimeter;
        self.length += other.length;
        self.polygons += other.polygons;
        self.lines += other.lines;
        self.points += other.points;
    }
}

/// How figures are computed from parts already in the measuring CRS.
pub enum Measurer {
    /// Parts in longitude/latitude degrees on this ellipsoid.
    Geodesic(Box<Geodesic>),
    /// Parts in a projected CRS with this many metres per unit.
    Planar { metres_per_unit: f64 },
}

impl Measurer {
    /// The figures of one feature's parts: area (shells less holes, whatever their winding)
    /// and perimeter (every ring) of its polygons, length of its lines (3D when `three_d` and Z
    /// is present). Counts are of the feature: 1 for each kind it holds, however many parts.
    pub fn figures(&self, parts: &[Part], three_d: bool) -> Figures {
        let mut figures = Figures::default();
        for part in parts {
            match part.kind {
                Kind::Point => figures.points += 1,
                Kind::Line => {
                    figures.lines += 1;
                    figures.length += self.line_length(&part.rings[0], three_d);
                }
                Kind::Polygon => {
                    figures.polygons += 1;
                    for (index, ring) in part.rings.iter().enumerate() {
                        let (perimeter, area) = self.ring(ring);
                        figures.perimeter += perimeter;
                        if index == 0 {
                            figures.area += area;
                        } else {
                            figures.area -= area;
                        }
                    }
                }
            }
        }
        figures.polygons = figures.polygons.min(1);
        figures.lines = figures.lines.min(1);
        figures.points = figures.points.min(1);
        figures
    }

    /// Perimeter and unsigned area of a closed ring.
    fn ring(&self, ring: &[[f64; 3]]) -> (f64, f64) {
        let mut points = ring;
        if points.len() > 1 && points[0][..2] == points[points.len() - 1][..2] {
            points = &points[..points.len() - 1];
        }
        if points.len() < 2 {
            return (0.0, 0.0);
        }
        match self {
            Measurer::Geodesic(geodesic) => {
                let mut polygon = PolygonArea::new(geodesic, Winding::CounterClockwise);
                for p in points {
                    polygon.add_point(p[1], p[0]);
                }
                let (perimeter, area, _) = polygon.compute(true);
                (perimeter, area.abs())
            }
            Measurer::Planar { metres_per_unit } => {
                let n = points.len();
                let mut twice_area = 0.0;
                let mut perimeter = 0.0;
                for i in 0..n {
                    let a = points[i];
                    let b = points[(i + 1) % n];
                    // Relative to the first vertex, so large coordinates keep their precision.
                    let (ax, ay) = (a[0] - points[0][0], a[1] - points[0][1]);
                    let (bx, by) = (b[0] - points[0][0], b[1] - points[0][1]);
                    twice_area += ax * by - bx * ay;
                    perimeter += ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt();
                }
                let unit = *metres_per_unit;
                (perimeter * unit, (twice_area / 2.0).abs() * unit * unit)
            }
        }
    }

    /// Length of a line; with `three_d`, each segment's height difference (in metres) is
    /// added by Pythagoras.
    fn line_length(&self, line: &[[f64; 3]], three_d: bool) -> f64 {
        line.windows(2)
            .map(|w| {
                let (a, b) = (w[0], w[1]);
                let flat = match self {
                    Measurer::Geodesic(geodesic) => {
                        let s: f64 = geodesic.inverse(a[1], a[0], b[1], b[0]);
                        s
                    }
                    Measurer::Planar { metres_per_unit } => {
                        ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt() * metres_per_unit
                    }
                };
                let dz = if three_d { b[2] - a[2] } else { 0.0 };
                (flat * flat + dz * dz).sqrt()
            })
            .sum()
    }
}

/// The ellipsoid of a CRS, for geodesic figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Ellipsoid {
    pub name: String,
    /// Semi-major axis in metres.
    pub a: f64,
    pub inverse_flattening: f64,
}

/// The ellipsoid of `srs` (its geographic base), and the geodesic on it.
pub fn ellipsoid_of(srs: &SpatialRef) -> Result<(Ellipsoid, Geodesic), GdalError> {
    let failed = |what: &str| {
        GdalError::Arguments(format!(
            "the layer's CRS defines no usable ellipsoid ({what}); geodesic figures need one: \
             assign the CRS with vector_reproject's src_crs, or use method \"planar\" with a \
             projected `crs`"
        ))
    };
    let a = srs.semi_major().map_err(|_| failed("no semi-major axis"))?;
    let b = srs.semi_minor().map_err(|_| failed("no semi-minor axis"))?;
    if !(a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0) {
        return Err(failed("axes not positive"));
    }
    let f = (a - b) / a;
    let inverse_flattening = if f > 0.0 { 1.0 / f } else { 0.0 };
    let name = srs
        .get_attr_value("SPHEROID", 0)
        .ok()
        .flatten()
        .or_else(|| srs.get_attr_value("ELLIPSOID", 0).ok().flatten())
        .unwrap_or_else(|| format!("a = {a} m, 1/f = {inverse_flattening}"));
    Ok((
        Ellipsoid {
            name,
            a,
            inverse_flattening,
        },
        Geodesic::new(a, f),
    ))
}

/// The geographic CRS (longitude, latitude order) underlying `srs`.
pub fn geographic_of(srs: &SpatialRef) -> Result<SpatialRef, GdalError> {
    let mut geographic = srs.geog_cs().map_err(|e| GdalError::Failed {
        operation: "finding the layer CRS's geographic base".to_string(),
        message: e.to_string(),
    })?;
    geographic.set_axis_mapping_strategy(AxisMappingStrategy::TraditionalGisOrder);
    if degrees_from_greenwich(&geographic) {
        return Ok(geographic);
    }
    // The same datum and ellipsoid in degrees from Greenwich, which GeographicLib takes: NTF
    // (Paris), EPSG:4807, counts grads from Paris, and its coordinates given to the geodesic
    // as degrees from Greenwich made a 1 x 1 grad square 12.1 % too large, and a 10 km square
    // in Lambert II étendu (EPSG:27572, on that base) 9.7 % too large (attack round 11,
    // R11-6). PROJ converts to it by a longitude rotation and a unit change, as to EPSG:4275.
    let text = |key: &str| {
        geographic
            .get_attr_value(key, 0)
            .ok()
            .flatten()
            .unwrap_or_else(|| "unknown".to_string())
    };
    let (name, datum, spheroid) = (text("GEOGCS"), text("DATUM"), text("SPHEROID"));
    let failed = |what: &str| GdalError::Failed {
        operation: "converting the layer CRS's geographic base to degrees from Greenwich"
            .to_string(),
        message: what.to_string(),
    };
    let a = geographic
        .semi_major()
        .map_err(|e| failed(&e.to_string()))?;
    let b = geographic
        .semi_minor()
        .map_err(|e| failed(&e.to_string()))?;
    let inverse_flattening = if a > b { a / (a - b) } else { 0.0 };
    let normalised = SpatialRef::new().map_err(|e| failed(&e.to_string()))?;
    let c =
        |t: &str| std::ffi::CString::new(t.replace('\0', "")).map_err(|e| failed(&e.to_string()));
    let (name, datum, spheroid) = (
        c(&format!("{name} (degrees from Greenwich)"))?,
        c(&datum)?,
        c(&spheroid)?,
    );
    let (greenwich, degree) = (c("Greenwich")?, c("degree")?);
    // SAFETY: the handle is live (owned by `normalised`) and every string outlives the call.
    let code = unsafe {
        gdal_sys::OSRSetGeogCS(
            normalised.to_c_hsrs(),
            name.as_ptr(),
            datum.as_ptr(),
            spheroid.as_ptr(),
            a,
            inverse_flattening,
            greenwich.as_ptr(),
            0.0,
            degree.as_ptr(),
            DEGREE_IN_RADIANS,
        )
    };
    if code != gdal_sys::OGRErr::OGRERR_NONE {
        return Err(failed(&format!("OSRSetGeogCS failed ({code})")));
    }
    let mut normalised = normalised;
    normalised.set_axis_mapping_strategy(AxisMappingStrategy::TraditionalGisOrder);
    Ok(normalised)
}

/// The refusal for a tool that reads a layer's own lon/lat as degrees from Greenwich, when
/// its geographic CRS counts otherwise (grads, or from Paris: attack round 11, R11-6).
pub fn refuse_unless_degrees_from_greenwich(
    srs: &SpatialRef,
    argument: &str,
) -> Result<(), GdalError> {
    if !srs.is_geographic() || degrees_from_greenwich(srs) {
        return Ok(());
    }
    let name = srs.name().unwrap_or_else(|| "the CRS".to_string());
    let meridian = srs
        .get_attr_value("PRIMEM", 0)
        .ok()
        .flatten()
        .unwrap_or_default();
    let unit = srs
        .get_attr_value("UNIT", 0)
        .ok()
        .flatten()
        .unwrap_or_default();
    Err(GdalError::Arguments(format!(
        "{argument}: {name} counts longitudes in {unit} from the {meridian} meridian, and this \
         tool reads lon/lat as degrees from Greenwich; reproject to the same datum in degrees \
         from Greenwich first (vector_reproject; for NTF (Paris), EPSG:4275)"
    )))
}

/// A degree in radians, as GDAL writes it.
const DEGREE_IN_RADIANS: f64 = 0.017_453_292_519_943_3;

/// Whether a geographic CRS counts longitudes in degrees from Greenwich, as the geodesic
/// (GeographicLib) and every lon/lat check here take them.
pub fn degrees_from_greenwich(srs: &SpatialRef) -> bool {
    let degrees = (srs.angular_units() / DEGREE_IN_RADIANS - 1.0).abs() < 1e-9;
    let meridian = srs
        .get_attr_value("PRIMEM", 1)
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    degrees && meridian == 0.0
}

/// A transformation in traditional (x, y) order.
pub fn transformer(from: &SpatialRef, to: &SpatialRef) -> Result<CoordTransform, GdalError> {
    transform::coord_transform(from, to, None).map_err(|e| GdalError::Failed {
        operation: "preparing a coordinate transformation".to_string(),
        message: e.to_string(),
    })
}

/// A projected layer is measured in its own plane by default (`vector_measure`,
/// `vector_query`'s measures) when its scale error over the data (areas for polygons, else
/// lengths) is at most this share: the `measurement` domain's threshold, so a default never
/// needs a justification.
pub const OWN_PLANE_TOLERANCE: f64 = 0.01;

/// How wrong planar figures in `planar` are over a lon/lat extent, sampled on a 9 × 9 grid:
/// at each sample, small steps east, north and diagonally are measured in the plane and on
/// the ellipsoid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleError {
    pub area: f64,
    pub length: f64,
    pub worst_at: (f64, f64),
}

pub fn scale_error(planar: &SpatialRef, extent: [f64; 4]) -> Option<ScaleError> {
    let geographic = geographic_of(planar).ok()?;
    let (_, geodesic) = ellipsoid_of(planar).ok()?;
    let to_plane = transformer(&geographic, planar).ok()?;
    let to_ground = transformer(planar, &geographic).ok()?;
    let metres = planar.linear_units();
    if !(metres.is_finite() && metres > 0.0) {
        return None;
    }
    let _quiet = ErrorCapture::start();
    let steps = 9;
    let (mut area_error, mut length_error) = (0.0_f64, 0.0_f64);
    let mut worst: Option<(f64, (f64, f64))> = None;
    for i in 0..steps {
        for j in 0..steps {
            let lon = extent[0] + (extent[2] - extent[0]) * i as f64 / (steps - 1) as f64;
            let lat = extent[1] + (extent[3] - extent[1]) * j as f64 / (steps - 1) as f64;
            let Some((x, y)) = project(&to_plane, lon, lat) else {
                continue;
            };
            // A step of about 10 m, in the CRS's unit.
            let h = 10.0 / metres;
            let corners = [(x, y), (x + h, y), (x + h, y + h), (x, y + h)];
            let ground: Option<Vec<(f64, f64)>> = corners
                .iter()
                .map(|(cx, cy)| project(&to_ground, *cx, *cy))
                .collect();
            let Some(ground) = ground else {
                continue;
            };
            let distance =
                |a: (f64, f64), b: (f64, f64)| -> f64 { geodesic.inverse(a.1, a.0, b.1, b.0) };
            let plane_step = h * metres;
            let mut length: f64 = 0.0;
            for (a, b, plane) in [
                (0, 1, plane_step),
                (0, 3, plane_step),
                (0, 2, plane_step * std::f64::consts::SQRT_2),
                (1, 3, plane_step * std::f64::consts::SQRT_2),
            ] {
                let on_ground = distance(ground[a], ground[b]);
                if on_ground > 0.0 {
                    length = length.max((plane / on_ground - 1.0).abs());
                }
            }
            let mut polygon = PolygonArea::new(&geodesic, Winding::CounterClockwise);
            for (glon, glat) in &ground {
                polygon.add_point(*glat, *glon);
            }
            let (_, ground_area, _) = polygon.compute(false);
            if ground_area <= 0.0 {
                continue;
            }
            let area = (plane_step * plane_step / ground_area - 1.0).abs();
            area_error = area_error.max(area);
            length_error = length_error.max(length);
            if worst.is_none_or(|(value, _)| area.max(length) > value) {
                worst = Some((area.max(length), (lon, lat)));
            }
        }
    }
    worst.map(|(_, worst_at)| ScaleError {
        area: area_error,
        length: length_error,
        worst_at,
    })
}

fn project(transform: &CoordTransform, x: f64, y: f64) -> Option<(f64, f64)> {
    let mut xs = [x];
    let mut ys = [y];
    let mut zs = [0.0];
    transform.transform_coords(&mut xs, &mut ys, &mut zs).ok()?;
    (xs[0].is_finite() && ys[0].is_finite()).then_some((xs[0], ys[0]))
}

/// A pair of overlapping polygons, by their features' ids.
pub type FidPair = (Option<u64>, Option<u64>);

/// Default budget of polygon pairs the overlap search of one call tests with GEOS, once their
/// envelopes meet (`GDAL_MCP_MAX_OVERLAP_PAIRS` overrides it). A parcel layer meets a few
/// neighbours per polygon; 50,000 polygons stacked on one another were 1.25 × 10⁹ GEOS tests,
/// before the gate.
pub const DEFAULT_MAX_OVERLAP_PAIRS: u64 = 10_000_000;

/// The overlap-pair budget in force.
pub fn max_overlap_pairs() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        crate::budget::setting("GDAL_MCP_MAX_OVERLAP_PAIRS", DEFAULT_MAX_OVERLAP_PAIRS)
    })
}

/// Pairs of polygons whose interiors overlap, found by a sweep over their envelopes, with
/// their pairwise overlapping area as `area_of` measures it and a few examples. The pairs
/// tested are counted before each polygon's are tested, and refused past `limit`
/// ([`max_overlap_pairs`]), naming `argument`.
pub fn overlapping_pairs(
    argument: &str,
    polygons: &[(Option<u64>, &Geometry)],
    limit: u64,
    area_of: impl Fn(&Geometry) -> Result<f64, GdalError>,
) -> Result<(u64, f64, Vec<FidPair>), GdalError> {
    let mut order: Vec<(usize, gdal::vector::Envelope)> = polygons
        .iter()
        .enumerate()
        .map(|(i, (_, g))| (i, g.envelope()))
        .collect();
    order.sort_by(|a, b| a.1.MinX.total_cmp(&b.1.MinX));
    let (mut pairs, mut area, mut examples) = (0u64, 0.0, Vec::new());
    let mut tested = 0u64;
    let _quiet = ErrorCapture::start();
    for (n, (i, a)) in order.iter().enumerate() {
        let mut candidates = Vec::new();
        for (j, b) in order.iter().skip(n + 1) {
            if b.MinX > a.MaxX {
                break;
            }
            if b.MinY > a.MaxY || b.MaxY < a.MinY {
                continue;
            }
            candidates.push(*j);
        }
        tested = tested.saturating_add(candidates.len() as u64);
        if tested > limit {
            return Err(GdalError::Arguments(format!(
                "{argument}: looking for overlapping polygons would test more than {limit} pairs \
                 whose envelopes meet, the server's budget per call (GDAL_MCP_MAX_OVERLAP_PAIRS), \
                 at polygon {} of {}, whose envelope alone meets {} others further east; clip \
                 the layer to the area of interest first (vector_clip with bounds), or raise \
                 GDAL_MCP_MAX_OVERLAP_PAIRS",
                n + 1,
                order.len(),
                candidates.len()
            )));
        }
        for j in candidates {
            let (ga, gb) = (polygons[*i].1, polygons[j].1);
            if !(ga.overlaps(gb) || ga.contains(gb) || ga.within(gb)) {
                continue;
            }
            let Some(common) = ga.intersection(gb) else {
                continue;
            };
            let common_area = area_of(&common)?;
            if common_area <= 0.0 {
                continue;
            }
            pairs += 1;
            area += common_area;
            if examples.len() < 10 {
                examples.push((polygons[*i].0, polygons[j].0));
            }
        }
    }
    Ok((pairs, area, examples))
}

/// Repair an invalid geometry (GEOS MakeValid), keeping only pieces of the kinds it had: a
/// repaired polygon's collapsed slivers are dropped rather than turned into lines.
pub fn repair(geometry: &Geometry) -> Result<Geometry, GdalError> {
    let fixed = geometry
        .make_valid(&gdal::cpl::CslStringList::new())
        .map_err(|e| GdalError::Failed {
            operation: "repairing a geometry (make_valid)".to_string(),
            message: e.to_string(),
        })?;
    let original: Vec<Kind> = parts(geometry).iter().map(|p| p.kind).collect();
    if original.contains(&Kind::Polygon) && !original.contains(&Kind::Line) {
        let pieces = polygon_pieces(&fixed);
        let mut multi = Geometry::empty(Wkb::wkbMultiPolygon).map_err(|e| GdalError::Failed {
            operation: "repairing a geometry".to_string(),
            message: e.to_string(),
        })?;
        for piece in pieces {
            let _ = multi.add_geometry(piece);
        }
        // The pieces of a collection's overlapping polygons overlap still: made valid as one
        // MultiPolygon, they are their union (R21-B8).
        if !multi.is_valid() {
            if let Ok(merged) = multi.make_valid(&gdal::cpl::CslStringList::new()) {
                let mut union =
                    Geometry::empty(Wkb::wkbMultiPolygon).map_err(|e| GdalError::Failed {
                        operation: "repairing a geometry".to_string(),
                        message: e.to_string(),
                    })?;
                for piece in polygon_pieces(&merged) {
                    let _ = union.add_geometry(piece);
                }
                return Ok(union);
            }
        }
        return Ok(multi);
    }
    Ok(fixed)
}

/// Whether GEOS finds `geometry` valid, and the polygons of a GeometryCollection share no
/// area with one another. GEOS judges each member of a collection alone, so two squares
/// overlapping by 50 m² in one feature were "valid" and measured 200 m² where they cover 150
/// (attack round 21, R21-B8). Members that only touch, along an edge or at a point, share no
/// area: judged as one MultiPolygon they had been refused (attack round 22, R22-B9).
pub fn is_valid_whole(geometry: &Geometry) -> bool {
    geometry.is_valid() && collection_overlap(geometry).is_none()
}

/// The pairs of a GeometryCollection's polygons that share area, and that area (in the
/// geometry's own units), when there are any.
fn collection_overlap(geometry: &Geometry) -> Option<(u64, f64)> {
    let polygons = collection_polygons(geometry)?;
    let members: Vec<Geometry> = (0..polygons.geometry_count())
        .map(|i| polygons.get_geometry(i).clone())
        .collect();
    let listed: Vec<(Option<u64>, &Geometry)> = members.iter().map(|g| (None, g)).collect();
    // Within the overlap-pair budget: a collection of thousands of stacked polygons is no
    // reason for unbounded work before the gate (past it, GEOS's own verdict stands).
    let (pairs, area, _) =
        overlapping_pairs("geometry", &listed, max_overlap_pairs(), |g| Ok(g.area())).ok()?;
    (pairs > 0).then_some((pairs, area))
}

/// GEOS's reason why one of `geometry`'s polygons, judged alone, is invalid (a ring that
/// crosses itself, a hole outside its shell); `None` when every one is valid. Parts that
/// touch or overlap one another are no reason here: what unites them is the caller's.
pub fn invalid_polygon_part(geometry: &Geometry) -> Option<String> {
    fn walk(geometry: &Geometry, depth: usize) -> Option<String> {
        // SAFETY: OGR_GT_Flatten only maps a type code.
        let flat = unsafe { gdal_sys::OGR_GT_Flatten(geometry.geometry_type()) };
        match flat {
            Wkb::wkbPolygon if !geometry.is_valid() => {
                Some(geos_reason(geometry).unwrap_or_else(|| "not valid".to_string()))
            }
            Wkb::wkbMultiPolygon | Wkb::wkbGeometryCollection if depth < 32 => (0..geometry
                .geometry_count())
                .find_map(|i| walk(&geometry.get_geometry(i), depth + 1)),
            _ => None,
        }
    }
    walk(geometry, 0)
}

/// The polygons of a GeometryCollection (nested collections and multipolygons opened) as one
/// MultiPolygon, when it holds two or more; `None` for anything else.
fn collection_polygons(geometry: &Geometry) -> Option<Geometry> {
    // SAFETY: OGR_GT_Flatten only maps a type code.
    let flat = unsafe { gdal_sys::OGR_GT_Flatten(geometry.geometry_type()) };
    if flat != Wkb::wkbGeometryCollection {
        return None;
    }
    fn gather(geometry: &Geometry, into: &mut Vec<Geometry>, depth: usize) {
        // SAFETY: OGR_GT_Flatten only maps a type code.
        let flat = unsafe { gdal_sys::OGR_GT_Flatten(geometry.geometry_type()) };
        match flat {
            Wkb::wkbPolygon => into.push(geometry.clone()),
            Wkb::wkbMultiPolygon | Wkb::wkbGeometryCollection if depth < 32 => {
                for index in 0..geometry.geometry_count() {
                    gather(&geometry.get_geometry(index), into, depth + 1);
                }
            }
            _ => {}
        }
    }
    let mut polygons = Vec::new();
    gather(geometry, &mut polygons, 0);
    if polygons.len() < 2 {
        return None;
    }
    let mut multi = Geometry::empty(Wkb::wkbMultiPolygon).ok()?;
    for polygon in polygons {
        multi.add_geometry(polygon).ok()?;
    }
    Some(multi)
}

/// An azimuthal equidistant projection centred on (`lon`, `lat`), on the same datum as
/// `geographic`, in metres: distances from the centre are true.
pub fn local_aeqd(geographic: &SpatialRef, lon: f64, lat: f64) -> Result<SpatialRef, GdalError> {
    let failed = |message: String| GdalError::Failed {
        operation: "building a local azimuthal equidistant projection".to_string(),
        message,
    };
    let mut local = SpatialRef::new().map_err(|e| failed(e.to_string()))?;
    // SAFETY: both handles are valid for the calls; the functions copy what they need.
    let status = unsafe {
        let copied = gdal_sys::OSRCopyGeogCSFrom(local.to_c_hsrs(), geographic.to_c_hsrs());
        if copied != gdal_sys::OGRErr::OGRERR_NONE {
            copied
        } else {
            gdal_sys::OSRSetAE(local.to_c_hsrs(), lat, lon, 0.0, 0.0)
        }
    };
    if status != gdal_sys::OGRErr::OGRERR_NONE {
        return Err(failed(format!("OGR error {status}")));
    }
    local.set_axis_mapping_strategy(AxisMappingStrategy::TraditionalGisOrder);
    Ok(local)
}

/// The centre of a geometry's envelope.
pub fn centre(geometry: &Geometry) -> (f64, f64) {
    let e = geometry.envelope();
    ((e.MinX + e.MaxX) / 2.0, (e.MinY + e.MaxY) / 2.0)
}

/// One part (as [`parts`] gives it) as a geometry of its own, in the coordinates it is in (2D:
/// the buffers and distances drawn from it are).
pub fn part_geometry(part: &Part) -> Result<Geometry, GdalError> {
    let failed = |e: gdal::errors::GdalError| GdalError::Failed {
        operation: "rebuilding one part of a geometry".to_string(),
        message: e.to_string(),
    };
    let line = |kind: Wkb::Type, points: &[[f64; 3]]| -> Result<Geometry, GdalError> {
        let mut g = Geometry::empty(kind).map_err(failed)?;
        for p in points {
            g.add_point_2d((p[0], p[1]));
        }
        Ok(g)
    };
    let first = part.rings.first().map_or(&[][..], Vec::as_slice);
    match part.kind {
        Kind::Point => line(Wkb::wkbPoint, &first[..first.len().min(1)]),
        Kind::Line => line(Wkb::wkbLineString, first),
        Kind::Polygon => {
            let mut polygon = Geometry::empty(Wkb::wkbPolygon).map_err(failed)?;
            for ring in &part.rings {
                polygon
                    .add_geometry(line(Wkb::wkbLinearRing, ring)?)
                    .map_err(failed)?;
            }
            Ok(polygon)
        }
    }
}

/// The centre of one lon/lat part, longitude-aware: its rings are unwrapped (each step between
/// consecutive vertices taken the short way round, holes on their shell's sheet, as
/// [`split_at_antimeridian`] does) and the centre of that extent is brought back within ±180°;
/// a polygon whose ring winds round a pole is centred on the pole. For a part that neither
/// jumps across ±180° nor winds, this is its envelope's centre ([`centre`]).
///
/// The azimuthal frames of buffers, joins and centroids are centred here, one per part: a
/// frame centred on a whole multi-part feature's envelope put parts 100° away in a frame that
/// shrank a 100 km buffer to 56 km there, and a feature split at ±180° (RFC 7946) in a frame
/// on the far side of the Earth (attack round 10, R10-8 and R10-10).
pub fn part_centre(part: &Part) -> (f64, f64) {
    let turn = |d: f64| d - 360.0 * (d / 360.0).round();
    let (mut west, mut east) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut south, mut north) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut sheet: Option<f64> = None;
    for ring in &part.rings {
        let Some(first) = ring.first() else {
            continue;
        };
        let mut x = sheet.map_or(first[0], |s| s + turn(first[0] - s));
        sheet.get_or_insert(x);
        let start = x;
        let mut take = |x: f64, y: f64| {
            west = west.min(x);
            east = east.max(x);
            south = south.min(y);
            north = north.max(y);
        };
        take(x, first[1]);
        for w in ring.windows(2) {
            x += turn(w[1][0] - w[0][0]);
            take(x, w[1][1]);
        }
        if part.kind == Kind::Polygon && ((x - start) / 360.0).round() != 0.0 {
            let mean = ring.iter().map(|p| p[1]).sum::<f64>() / ring.len() as f64;
            return (0.0, if mean >= 0.0 { 90.0 } else { -90.0 });
        }
    }
    if !(west.is_finite() && south.is_finite()) {
        return (0.0, 0.0);
    }
    let mut lon = (west + east) / 2.0;
    if lon.abs() > 180.0 {
        lon -= 360.0 * (lon / 360.0).round();
    }
    (lon, (south + north) / 2.0)
}

/// GEOS's own reason why a geometry is invalid (`GEOSisValidReason`, e.g. "Self-intersection[5
/// 5]" or "Nested shells[...]"); `None` when GEOS finds it valid or cannot read it.
pub fn invalidity_reason(geometry: &Geometry) -> Option<String> {
    if geometry.is_valid() {
        // A collection whose polygons overlap one another ([`is_valid_whole`]).
        let (pairs, area) = collection_overlap(geometry)?;
        return Some(format!(
            "the collection's polygons overlap one another ({pairs} pair(s) sharing {area} \
             square units of the CRS)"
        ));
    }
    geos_reason(geometry)
}

/// GEOS's reason why `geometry` itself is invalid.
fn geos_reason(geometry: &Geometry) -> Option<String> {
    let wkb = geometry.wkb().ok()?;
    // SAFETY: a fresh GEOS context, used on this thread only and finished before returning;
    // the WKB buffer outlives the read; every GEOS object made here is destroyed or freed
    // with the same context.
    unsafe {
        let context = geos::GEOS_init_r();
        if context.is_null() {
            return None;
        }
        let handle = geos::GEOSGeomFromWKB_buf_r(context, wkb.as_ptr(), wkb.len());
        let mut reason = None;
        if !handle.is_null() {
            let text = geos::GEOSisValidReason_r(context, handle);
            if !text.is_null() {
                let said = std::ffi::CStr::from_ptr(text)
                    .to_string_lossy()
                    .into_owned();
                geos::GEOSFree_r(context, text.cast());
                if said != "Valid Geometry" {
                    reason = Some(said);
                }
            }
            geos::GEOSGeom_destroy_r(context, handle);
        }
        geos::GEOS_finish_r(context);
        reason
    }
}

/// The few GEOS C API functions GDAL does not expose (GDAL links the same `libgeos_c`).
mod geos {
    use std::ffi::{c_char, c_void};

    #[link(name = "geos_c")]
    extern "C" {
        pub fn GEOS_init_r() -> *mut c_void;
        pub fn GEOS_finish_r(context: *mut c_void);
        pub fn GEOSGeomFromWKB_buf_r(
            context: *mut c_void,
            wkb: *const u8,
            size: usize,
        ) -> *mut c_void;
        pub fn GEOSisValidReason_r(context: *mut c_void, geometry: *const c_void) -> *mut c_char;
        pub fn GEOSGeom_destroy_r(context: *mut c_void, geometry: *mut c_void);
        pub fn GEOSFree_r(context: *mut c_void, buffer: *mut c_void);
    }
}

/// While alive, polygons read on this thread get their rings' roles by containment, not by
/// winding: OGR's shapefile reader otherwise takes every clockwise ring for a shell
/// (`METHOD=ONLY_CCW`), so a hole wound like its shell became a second, nested shell that a
/// total then added. `OGR_ORGANIZE_POLYGONS=DEFAULT` overrides the driver's method with the full
/// containment analysis; the option is cleared again on drop.
pub struct RingsByContainment(());

impl RingsByContainment {
    pub fn start() -> Self {
        let _ = gdal::config::set_thread_local_config_option("OGR_ORGANIZE_POLYGONS", "DEFAULT");
        Self(())
    }
}

impl Drop for RingsByContainment {
    fn drop(&mut self) {
        let _ = gdal::config::clear_thread_local_config_option("OGR_ORGANIZE_POLYGONS");
    }
}

/// Default budget of vertices one layer read by a vector analysis tool may hold, and of the
/// vertices a buffer may write (`GDAL_MCP_MAX_VERTICES` overrides it): about 0.5 GB of
/// geometries and their copies at most, so several calls at once fit a small machine.
pub const DEFAULT_MAX_VERTICES: u64 = 5_000_000;
/// Default budget of features one layer read by a vector analysis tool may hold
/// (`GDAL_MCP_MAX_FEATURES` overrides it).
pub const DEFAULT_MAX_FEATURES: u64 = 1_000_000;

/// The vertex budget in force.
pub fn max_vertices() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| crate::budget::setting("GDAL_MCP_MAX_VERTICES", DEFAULT_MAX_VERTICES))
}

/// The feature budget in force.
pub fn max_features() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| crate::budget::setting("GDAL_MCP_MAX_FEATURES", DEFAULT_MAX_FEATURES))
}

pub use crate::gdal::vertex_count;

/// Features and vertices read so far from one layer, refused past the budgets before more is
/// held in memory.
///
/// The features read also hold their estimate in the memory budget all calls share
/// ([`crate::budget`]); [`ReadBudget::into_memory`] keeps it for as long as they are held.
pub struct ReadBudget {
    argument: String,
    features: u64,
    vertices: u64,
    memory: crate::budget::Reservation<'static>,
}

impl ReadBudget {
    pub fn new(argument: &str) -> Self {
        Self {
            argument: argument.to_string(),
            features: 0,
            vertices: 0,
            memory: crate::budget::start(&format!("{argument}: the layer read into memory")),
        }
    }

    /// The memory reserved for what was read, to keep while it is held.
    pub fn into_memory(self) -> crate::budget::Reservation<'static> {
        self.memory
    }

    /// Count one feature (and its geometry's vertices).
    pub fn take(&mut self, geometry: Option<&Geometry>) -> Result<(), GdalError> {
        self.features += 1;
        if self.features > max_features() {
            return Err(GdalError::Arguments(format!(
                "{}: the layer holds more than {} features, the server's budget per layer \
                 (GDAL_MCP_MAX_FEATURES); clip it to the area of interest first (vector_clip with \
                 bounds)",
                self.argument,
                max_features()
            )));
        }
        self.vertices += geometry.map_or(0, vertex_count);
        if self.vertices > max_vertices() {
            return Err(GdalError::Arguments(format!(
                "{}: the layer's first {} features hold more than {} vertices, the server's \
                 budget per layer (GDAL_MCP_MAX_VERTICES); clip it to the area of interest first \
                 (vector_clip with bounds)",
                self.argument,
                self.features,
                max_vertices()
            )));
        }
        self.memory
            .cover(crate::budget::vector_bytes(self.features, self.vertices))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The geodesic area of a lon/lat polygon or multipolygon, m² (WGS 84).
    fn geodesic_area(geometry: &Geometry) -> f64 {
        let wgs84 = Geodesic::wgs84();
        polygon_pieces(geometry)
            .iter()
            .map(|polygon| {
                (0..polygon.geometry_count())
                    .map(|i| {
                        let mut points = Vec::new();
                        polygon.get_geometry(i).get_points(&mut points);
                        let mut area = PolygonArea::new(&wgs84, Winding::CounterClockwise);
                        for (x, y, _) in &points[..points.len() - 1] {
                            area.add_point(*y, *x);
                        }
                        let (_, a, _) = area.compute(true);
                        if i == 0 {
                            a.abs()
                        } else {
                            -a.abs()
                        }
                    })
                    .sum::<f64>()
            })
            .sum()
    }

    /// A ring through the geodesic circle's vertices, as GDAL's lon/lat gives them (wrapped to
    /// [-180°, 180°]).
    fn wrapped_circle(lon: f64, lat: f64, radius: f64, steps: usize) -> Geometry {
        use geographiclib_rs::DirectGeodesic;
        let wgs84 = Geodesic::wgs84();
        let mut ring = Geometry::empty(Wkb::wkbLinearRing).unwrap();
        for k in 0..=steps {
            let azimuth = 360.0 * (k % steps) as f64 / steps as f64;
            let (lat2, lon2): (f64, f64) = wgs84.direct(lat, lon, azimuth, radius);
            ring.add_point_2d((lon2, lat2));
        }
        let mut polygon = Geometry::empty(Wkb::wkbPolygon).unwrap();
        polygon.add_geometry(ring).unwrap();
        polygon
    }

    /// Regression, attack round 7, R7-4 (the buffer side): a geodesic buffer near ±180° came
    /// back to lon/lat as a ring jumping across the antimeridian, a band round the globe that
    /// the other tools then refused. Split, its parts lie on both sides, none crosses, and
    /// together they keep the circle's own area (the unsplit ring's geodesic area, which
    /// GeographicLib reads right); a circle round the pole is closed along it and keeps its
    /// area too; a circle away from both is left as it is.
    #[test]
    fn r7_4_surfaces_across_the_antimeridian_are_split_there() {
        crate::gdal::init();
        let radius = 10_000.0;
        let disc = std::f64::consts::PI * radius * radius;
        for (lon, lat) in [(179.99, 0.0), (-179.95, -45.0), (180.0, 60.0)] {
            let circle = wrapped_circle(lon, lat, radius, 64);
            assert!(crosses_antimeridian(&circle), "{lon} {lat}");
            let split = split_at_antimeridian(&circle).unwrap().expect("split");
            assert!(!crosses_antimeridian(&split), "{lon} {lat}");
            let pieces = polygon_pieces(&split);
            assert_eq!(pieces.len(), 2, "{lon} {lat}");
            let e = split.envelope();
            assert!(e.MinX >= -180.0 && e.MaxX <= 180.0, "{lon} {lat}: {e:?}");
            let (whole, parts) = (geodesic_area(&circle), geodesic_area(&split));
            assert!((parts - whole).abs() < 1e-6 * whole, "{parts} vs {whole}");
            assert!((whole - disc).abs() < 3e-3 * disc, "{whole} vs {disc}");
        }
        // Round the north pole: 50 km from a centre 10 km short of it.
        let polar = wrapped_circle(30.0, 89.91, 50_000.0, 64);
        let split = split_at_antimeridian(&polar)
            .unwrap()
            .expect("closed at the pole");
        assert!(!crosses_antimeridian(&split));
        let cap = std::f64::consts::PI * 50_000.0_f64.powi(2);
        let area = geodesic_area(&split);
        assert!((area - cap).abs() < 5e-3 * cap, "{area} vs {cap}");
        // The twin: away from ±180° and the poles nothing is rewritten.
        let plain = wrapped_circle(10.0, 45.0, radius, 64);
        assert!(split_at_antimeridian(&plain).unwrap().is_none());
    }

    /// The centre of a part is its envelope's unless it jumps across ±180° or winds round a
    /// pole (attack round 10, R10-8 and R10-10): a square at 10°E and one written 179..181°E
    /// are centred on their envelopes; a ring jumping from 179°E to 179°W is centred on 180°;
    /// a hole written on the other side keeps its shell's sheet; a ring round the South Pole
    /// is centred on it.
    #[test]
    fn r10_8_parts_are_centred_longitude_aware() {
        let cases = [
            ("POLYGON ((10 0, 12 0, 12 2, 10 2, 10 0))", (11.0, 1.0)),
            (
                "POLYGON ((179 0, 181 0, 181 2, 179 2, 179 0))",
                (180.0, 1.0),
            ),
            (
                "POLYGON ((179 0, -179 0, -179 2, 179 2, 179 0))",
                (180.0, 1.0),
            ),
            (
                "POLYGON ((181 0, 183 0, 183 2, 181 2, 181 0))",
                (-178.0, 1.0),
            ),
            (
                "POLYGON ((178 0, 182 0, 182 2, 178 2, 178 0), \
                 (-179.5 0.5, -179 0.5, -179 1, -179.5 1, -179.5 0.5))",
                (180.0, 1.0),
            ),
            ("LINESTRING (179.5 5, -179.5 6)", (180.0, 5.5)),
            ("POINT (-179.5 3)", (-179.5, 3.0)),
            (
                "POLYGON ((0 -70, 90 -70, 180 -70, -90 -70, 0 -70))",
                (0.0, -90.0),
            ),
        ];
        for (wkt, (lon, lat)) in cases {
            let geometry = Geometry::from_wkt(wkt).unwrap();
            let got = part_centre(&parts(&geometry)[0]);
            assert!(
                (got.0 - lon).abs() < 1e-12 && (got.1 - lat).abs() < 1e-12,
                "{wkt}: {got:?}"
            );
        }
        // Rebuilt parts are the parts.
        let multi = Geometry::from_wkt(
            "MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5), (5.5 5.2, 5.8 5.2, 5.8 5.5, 5.5 5.2)))",
        )
        .unwrap();
        for (i, part) in parts(&multi).iter().enumerate() {
            let rebuilt = part_geometry(part).unwrap();
            assert_eq!(rebuilt.wkt().unwrap(), multi.get_geometry(i).wkt().unwrap());
        }
    }

    /// Regression, attack round 10, R10-4 (the South-Pole twin of R9-12): a geodesic circle
    /// round a pole was closed along it from its first vertex; drawn from (0°, -80°) that vertex
    /// is at 0°, so the cut at ±180° left two pieces sharing the meridian 0° down to the pole,
    /// an invalid multipolygon. Closed from where the ring meets ±180°, the cap is one valid
    /// polygon, whatever the centre's longitude, north or south: it holds the pole's
    /// neighbourhood and points 500 km inside its edge (off ±180°, where a point lies on its
    /// boundary), not a point 500 km outside, and its
    /// area is the unsplit ring's (GeographicLib reads a ring round a pole right) and within
    /// 0.5 % of the geodesic cap (a ring of 3,600 vertices).
    #[test]
    fn r10_4_caps_round_either_pole_are_valid_and_whole() {
        use geographiclib_rs::DirectGeodesic;
        crate::gdal::init();
        let wgs84 = Geodesic::wgs84();
        let radius = 2_000_000.0;
        for lat in [-80.0, 80.0] {
            let cap = geodesic_area(&wrapped_circle(0.0, lat, radius, 3600));
            for lon in [0.0, 30.0, -150.0, 100.0, 180.0, -179.99] {
                let circle = wrapped_circle(lon, lat, radius, 128);
                let split = split_at_antimeridian(&circle).unwrap().expect("split");
                assert_eq!(invalidity_reason(&split), None, "{lon} {lat}");
                assert_eq!(polygon_pieces(&split).len(), 1, "{lon} {lat}");
                assert!(!crosses_antimeridian(&split), "{lon} {lat}");
                let area = geodesic_area(&split);
                let whole = geodesic_area(&circle);
                assert!(
                    (area - whole).abs() < 1e-6 * whole,
                    "{lon} {lat}: {area} vs {whole}"
                );
                assert!(
                    (area - cap).abs() < 5e-3 * cap,
                    "{lon} {lat}: {area} vs {cap}"
                );
                let sign: f64 = if lat > 0.0 { 1.0 } else { -1.0 };
                let mut inside = vec![
                    (0.0, 85.0 * sign),
                    (90.0, 88.0 * sign),
                    (-45.0, 89.99 * sign),
                ];
                for azimuth in [10.0, 100.0, 190.0, 280.0] {
                    let (y, x): (f64, f64) = wgs84.direct(lat, lon, azimuth, radius - 500_000.0);
                    inside.push((x, y));
                }
                for (x, y) in inside {
                    let point = Geometry::from_wkt(&format!("POINT ({x} {y})")).unwrap();
                    assert!(split.contains(&point), "{lon} {lat}: ({x} {y})");
                }
                let (y, x): (f64, f64) = wgs84.direct(lat, lon, 0.0, radius + 500_000.0);
                let outside = Geometry::from_wkt(&format!("POINT ({x} {y})")).unwrap();
                assert!(!split.intersects(&outside), "{lon} {lat}: ({x} {y})");
            }
        }
    }

    /// Regression, attack round 8, R8-11: rings that run along ±180° or the pole (a world
    /// box, Antarctica as Natural Earth draws it) were refused as antimeridian crossings; a
    /// ring that jumps from 179.95°E to 179.95°W still crosses.
    #[test]
    fn r8_11_edges_along_the_antimeridian_are_not_crossings() {
        crate::gdal::init();
        let cases = [
            (
                "POLYGON ((-180 -90,180 -90,180 90,-180 90,-180 -90))",
                false,
            ),
            (
                "POLYGON ((-180 -84.7,-90 -80,0 -75,90 -80,180 -84.7,180 -90,-180 -90,-180 -84.7))",
                false,
            ),
            ("POLYGON ((10 10,11 10,11 11,10 11,10 10))", false),
            (
                "POLYGON ((179.95 0,-179.95 0,-179.95 0.1,179.95 0.1,179.95 0))",
                true,
            ),
        ];
        for (wkt, crossing) in cases {
            let geometry = Geometry::from_wkt(wkt).unwrap();
            assert_eq!(crosses_antimeridian(&geometry), crossing, "{wkt}");
        }
    }

    /// Every ring and part counts, closing vertices included.
    #[test]
    fn vertices_are_counted_over_rings_and_parts() {
        let cases = [
            ("POINT (1 2)", 1),
            ("LINESTRING (0 0, 1 1, 2 0)", 3),
            (
                "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (2 2, 3 2, 3 3, 2 2))",
                9,
            ),
            (
                "MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))",
                8,
            ),
            ("GEOMETRYCOLLECTION (POINT (0 0), LINESTRING (0 0, 1 1))", 3),
        ];
        for (wkt, want) in cases {
            let geometry = Geometry::from_wkt(wkt).unwrap();
            assert_eq!(vertex_count(&geometry), want, "{wkt}");
        }
    }

    /// GEOS's own words, not a template: a bow-tie's crossing point, a hole outside its shell.
    #[test]
    fn invalidity_reasons_are_geos_own() {
        let bowtie = Geometry::from_wkt("POLYGON ((0 0, 10 10, 10 0, 0 10, 0 0))").unwrap();
        assert_eq!(
            invalidity_reason(&bowtie).as_deref(),
            Some("Self-intersection[5 5]")
        );
        let outside =
            Geometry::from_wkt("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0), (5 5, 6 5, 6 6, 5 6, 5 5))")
                .unwrap();
        assert!(
            invalidity_reason(&outside).is_some_and(|r| r.starts_with("Hole lies outside shell"))
        );
        let square = Geometry::from_wkt("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))").unwrap();
        assert_eq!(invalidity_reason(&square), None);
    }

    fn square(x: f64, y: f64, side: f64) -> Geometry {
        Geometry::from_wkt(&format!(
            "POLYGON (({x} {y}, {} {y}, {} {}, {x} {}, {x} {y}))",
            x + side,
            x + side,
            y + side,
            y + side
        ))
        .unwrap()
    }

    /// Overlapping pairs known by drawing: n identical unit squares are n(n-1)/2 pairs of area
    /// 1 each; squares sharing only an edge or a corner overlap nowhere; a square inside
    /// another is one pair of its own area; squares a column apart (envelopes apart in y) are
    /// never tested.
    #[test]
    fn overlapping_pairs_are_counted_by_their_shared_area() {
        let planar = |g: &Geometry| Ok(g.area());
        let cases: [(Vec<Geometry>, u64, f64); 5] = [
            ((0..5).map(|_| square(0.0, 0.0, 1.0)).collect(), 10, 10.0),
            (vec![square(0.0, 0.0, 1.0), square(1.0, 0.0, 1.0)], 0, 0.0),
            (vec![square(0.0, 0.0, 1.0), square(1.0, 1.0, 1.0)], 0, 0.0),
            (vec![square(0.0, 0.0, 4.0), square(1.0, 1.0, 2.0)], 1, 4.0),
            (
                (0..4).map(|k| square(0.0, 3.0 * k as f64, 1.0)).collect(),
                0,
                0.0,
            ),
        ];
        for (polygons, pairs, area) in &cases {
            let listed: Vec<(Option<u64>, &Geometry)> = polygons
                .iter()
                .enumerate()
                .map(|(i, g)| (Some(i as u64), g))
                .collect();
            let (got_pairs, got_area, examples) =
                overlapping_pairs("input", &listed, 1000, planar).unwrap();
            assert_eq!(got_pairs, *pairs);
            assert!((got_area - area).abs() < 1e-12, "{got_area} vs {area}");
            assert_eq!(examples.len() as u64, (*pairs).min(10));
        }
    }

    /// The pairs tested are counted before each polygon's, and the polygon that passes the
    /// limit is named with its own share: 5 stacked squares test 4 + 3 + 2 + 1 pairs, so a
    /// limit of 8 stops at polygon 3 (4 + 3 + 2 = 9), and 10 lets all through.
    #[test]
    fn the_overlap_search_stops_at_its_pair_budget() {
        let stack: Vec<Geometry> = (0..5).map(|_| square(0.0, 0.0, 1.0)).collect();
        let listed: Vec<(Option<u64>, &Geometry)> = stack.iter().map(|g| (None, g)).collect();
        let text = overlapping_pairs("join", &listed, 8, |g| Ok(g.area()))
            .unwrap_err()
            .to_string();
        for part in [
            "join: looking for overlapping polygons would test more than 8 pairs",
            "at polygon 3 of 5",
            "alone meets 2 others",
            "GDAL_MCP_MAX_OVERLAP_PAIRS",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        assert!(overlapping_pairs("join", &listed, 10, |g| Ok(g.area())).is_ok());
    }

    fn close(got: f64, want: f64, relative: f64) -> bool {
        (got - want).abs() <= relative * want.abs().max(1e-12)
    }

    /// Figures against independent references: GeographicLib's Python implementation on
    /// WGS 84 for the geodesic rows (`Geodesic.WGS84.Polygon()`, `Inverse`), arithmetic for the
    /// planar ones. A hole wound like its shell still subtracts (rings by their role).
    #[test]
    fn figures_match_independent_references() {
        let geodesic = || Measurer::Geodesic(Box::new(Geodesic::wgs84()));
        let planar = |metres_per_unit| Measurer::Planar { metres_per_unit };
        // (measurer, WKT, 3D, area m², perimeter m, length m)
        let cases: [(Measurer, &str, bool, f64, f64, f64); 7] = [
            (
                geodesic(),
                "POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))",
                false,
                12_308_778_361.469_452,
                443_770.917_248_301_96,
                0.0,
            ),
            (
                geodesic(),
                "LINESTRING (0 0, 1 0)",
                false,
                0.0,
                0.0,
                111_319.490_793_273_57,
            ),
            (
                planar(1.0),
                "POLYGON ((0 0, 4 0, 0 3, 0 0))",
                false,
                6.0,
                12.0,
                0.0,
            ),
            // International feet: 100 ft squares are 929.0304 m².
            (
                planar(0.3048),
                "POLYGON ((0 0, 100 0, 100 100, 0 100, 0 0))",
                false,
                929.0304,
                121.92,
                0.0,
            ),
            // The hole is wound like the shell (both counter-clockwise): 100 - 4.
            (
                planar(1.0),
                "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (2 2, 4 2, 4 4, 2 4, 2 2))",
                false,
                96.0,
                48.0,
                0.0,
            ),
            (
                planar(1.0),
                "LINESTRING Z (0 0 0, 3 0 4)",
                true,
                0.0,
                0.0,
                5.0,
            ),
            (
                planar(1.0),
                "LINESTRING Z (0 0 0, 3 0 4)",
                false,
                0.0,
                0.0,
                3.0,
            ),
        ];
        for (measurer, wkt, three_d, area, perimeter, length) in cases {
            let geometry = Geometry::from_wkt(wkt).unwrap();
            let got = measurer.figures(&parts(&geometry), three_d);
            assert!(close(got.area, area, 1e-9), "{wkt}: area {}", got.area);
            assert!(
                close(got.perimeter, perimeter, 1e-9),
                "{wkt}: perimeter {}",
                got.perimeter
            );
            assert!(
                close(got.length, length, 1e-9),
                "{wkt}: length {}",
                got.length
            );
        }
    }

    /// The scale error of a plane over an extent: UTM at its central meridian is the scale
    /// factor 0.9996 (lengths 4e-4 short, areas 8e-4), Web Mercator at 60° N doubles lengths
    /// (sec 60° = 2) and quadruples areas.
    #[test]
    fn scale_error_follows_the_projection() {
        let cases = [
            (
                32633,
                [14.999, 44.999, 15.001, 45.001],
                4.0e-4,
                7.998_4e-4,
                1e-5,
            ),
            (3857, [9.999, 59.999, 10.001, 60.001], 1.0, 3.0, 0.01),
        ];
        for (epsg, extent, length, area, tolerance) in cases {
            let srs = SpatialRef::from_epsg(epsg).unwrap();
            let got = scale_error(&srs, extent).unwrap();
            assert!(
                (got.length - length).abs() <= tolerance * length.max(1.0),
                "EPSG:{epsg}: length error {}",
                got.length
            );
            assert!(
                (got.area - area).abs() <= tolerance * area.max(1.0) * 2.0,
                "EPSG:{epsg}: area error {}",
                got.area
            );
        }
    }
}
