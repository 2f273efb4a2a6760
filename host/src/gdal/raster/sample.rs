//! `raster_sample`: the values of a raster at points, with each point's cell.
//!
//! Points come as coordinates (in a CRS the caller names, default the raster's) or as a point
//! layer. Points in another CRS go to the raster's through the most accurate operation PROJ
//! has here ([`crate::gdal::facts::transform`]), in traditional GIS order (x = easting or longitude), and
//! the operation is reported. A point falls in the cell whose pixel coordinates are the floor
//! of its own, so cells are half-open: a point on the edge between two cells belongs to the
//! cell to its right (larger column) and below it (larger row), as `gdallocationinfo` says; a
//! point on the raster's far edge is outside. Points outside are reported as outside, never
//! clamped to the nearest cell.
//!
//! Registration: GDAL shifts a PixelIsPoint GeoTIFF's geotransform by half a cell, so the
//! geotransform describes cell corners for both registrations and a point-registered cell's
//! value stands for the cell centre reported here (see [`crate::gdal::facts::georef`]).

use crate::gdal::facts::georef::{self, Registration};
use crate::gdal::facts::transform::{self, TransformationFacts};
use crate::gdal::facts::{self, CrsFacts};
use crate::gdal::{vector as ogr, ErrorCapture, GdalError};
use gdal::spatial_ref::SpatialRef;
use gdal::vector::LayerAccess;
use schemars::JsonSchema;
use serde::Serialize;
use std::path::Path;

/// At most this many points per call.
pub const MAX_POINTS: usize = 1_000;
/// At most this many values (points x bands) per call.
pub const MAX_VALUES: usize = 20_000;
/// A pixel coordinate this close to a whole number is on the cell edge (float noise such as
/// 0.3 / 0.1 = 2.9999999999999996 must not move a point on an edge to the previous cell).
const EDGE_TOLERANCE: f64 = 1e-9;

/// Where the points come from.
pub enum Points {
    /// Coordinates `[x, y]`, in `crs` (default: the raster's).
    Coordinates {
        coordinates: Vec<[f64; 2]>,
        crs: Option<String>,
    },
    /// The point features of a layer, in its CRS (`crs` names it when the layer has none).
    Layer {
        path: std::path::PathBuf,
        layer: Option<String>,
        crs: Option<String>,
    },
}

/// What to sample.
pub struct SampleRequest {
    pub points: Points,
    /// 1-based bands; empty for all.
    pub bands: Vec<usize>,
}

/// One band's meaning.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SampledBand {
    pub band: usize,
    pub data_type: String,
    /// value = raw * scale + offset (absent: 1 and 0).
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    pub unit: Option<String>,
    /// The declared nodata value (null when none, or when it is not a finite number: see
    /// `nodata_text`).
    pub nodata: Option<f64>,
    /// A declared nodata value JSON cannot hold as a number: "nan", "inf" or "-inf" (attack
    /// round 15, R15-B6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodata_text: Option<String>,
}

/// One band's value at a point.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BandValue {
    pub band: usize,
    /// Physical value (scale and offset applied); null for nodata, and for an infinite cell
    /// (the point's note says so).
    pub value: Option<f64>,
    /// The stored value.
    pub raw: Option<f64>,
    /// The cell holds the band's nodata value (or NaN).
    pub nodata: bool,
}

/// One point.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SampledPoint {
    /// Position in `coordinates`, or the feature id in the `points` layer.
    pub id: i64,
    /// The point as given, [x, y] in the points' CRS (absent: the feature is no point).
    pub given: Option<[f64; 2]>,
    /// The point in the raster's CRS.
    pub at: Option<[f64; 2]>,
    /// Inside the raster's grid.
    pub inside: bool,
    /// 0-based cell row and column (absent when outside).
    pub row: Option<i64>,
    pub column: Option<i64>,
    /// The cell's centre, in the raster's CRS: what a point-registered value stands for.
    pub cell_centre: Option<[f64; 2]>,
    /// The cell's corner at (row, column) in pixel space (top-left for a north-up grid,
    /// bottom-left for a south-up one), in the raster's CRS.
    pub cell_corner: Option<[f64; 2]>,
    pub values: Vec<BandValue>,
    /// Why the point has no cell (outside, transformation failed, not a point).
    pub note: Option<String>,
}

/// The result of sampling.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SampleOutput {
    pub input: String,
    /// The raster's CRS.
    pub crs: Option<CrsFacts>,
    /// The CRS the points were given in, when not the raster's.
    pub points_crs: Option<CrsFacts>,
    /// The operation from the points' CRS to the raster's, when they differ.
    pub transformation: Option<TransformationFacts>,
    /// `AREA_OR_POINT`: `point` means each value stands for its cell centre.
    pub registration: Registration,
    /// The geotransform in use (GDAL order; corners for both registrations).
    pub geotransform: [f64; 6],
    pub width: usize,
    pub height: usize,
    pub bands: Vec<SampledBand>,
    /// Points outside the raster (reported as outside, not clamped).
    pub outside: usize,
    /// When points may land in a neighbouring cell: a ballpark operation, or one less accurate
    /// than half a cell.
    pub warnings: Vec<String>,
    pub points: Vec<SampledPoint>,
}

/// The cell of a point in pixel space: floor of each pixel coordinate, after snapping values
/// within [`EDGE_TOLERANCE`] of a whole number onto it.
fn cell_of(pixel: f64, line: f64, width: usize, height: usize) -> Option<(i64, i64)> {
    let snap = |v: f64| {
        let r = v.round();
        if (v - r).abs() <= EDGE_TOLERANCE {
            r
        } else {
            v
        }
    };
    let (p, l) = (snap(pixel).floor(), snap(line).floor());
    if !(p.is_finite() && l.is_finite()) {
        return None;
    }
    (p >= 0.0 && l >= 0.0 && p < width as f64 && l < height as f64).then_some((l as i64, p as i64))
}

/// The inverse of a geotransform (pixel, line from x, y).
fn inverse(gt: &[f64; 6]) -> Option<[f64; 6]> {
    let det = gt[1] * gt[5] - gt[2] * gt[4];
    if det == 0.0 || !det.is_finite() {
        return None;
    }
    let inv = 1.0 / det;
    Some([
        (gt[2] * gt[3] - gt[0] * gt[5]) * inv,
        gt[5] * inv,
        -gt[2] * inv,
        (-gt[1] * gt[3] + gt[0] * gt[4]) * inv,
        -gt[4] * inv,
        gt[1] * inv,
    ])
}

fn apply(gt: &[f64; 6], a: f64, b: f64) -> (f64, f64) {
    (gt[0] + a * gt[1] + b * gt[2], gt[3] + a * gt[4] + b * gt[5])
}

/// GeoPackage's "Undefined geographic SRS" (`srs_id` 0), as GDAL reads it: a geographic CRS
/// so named, on a datum named "unknown".
fn undefined_geographic(srs: &SpatialRef) -> bool {
    srs.is_geographic()
        && srs
            .name()
            .is_some_and(|n| n.trim().eq_ignore_ascii_case("Undefined geographic SRS"))
}

/// Refuse points whose CRS cannot place them on the raster (regression, issue 21 attack
/// round 4, B7): a vertical-only CRS (heights, no horizontal position), a geocentric one
/// (X, Y, Z from the Earth's centre, not two coordinates), or an engineering (local) CRS
/// other than the raster's own (no operation relates it to the Earth).
fn check_points_crs(
    srs: &SpatialRef,
    raster: Option<&SpatialRef>,
    points: &Points,
) -> Result<(), GdalError> {
    let name = srs.name().unwrap_or_else(|| "unnamed".to_string());
    let id = srs
        .auth_name()
        .zip(srs.auth_code().ok())
        .map(|(a, c)| format!(" ({a}:{c})"))
        .unwrap_or_default();
    let (argument, whose) = match points {
        Points::Coordinates { .. } => ("crs", "the coordinates' CRS"),
        Points::Layer { crs: Some(_), .. } => ("crs", "the CRS named for the points layer"),
        Points::Layer { .. } => ("points", "the points layer's CRS"),
    };
    let horizontal = srs.is_geographic() || srs.is_projected() || srs.is_local();
    let problem = if srs.is_geocentric() {
        Some(
            "is geocentric (X, Y, Z from the Earth's centre), not two horizontal coordinates"
                .to_string(),
        )
    } else if !horizontal && srs.is_vertical() {
        Some("is vertical only: it gives heights or depths, not a horizontal position".to_string())
    } else if !horizontal && !srs.is_compound() {
        Some("has no horizontal coordinates".to_string())
    } else if srs.is_local() && !raster.is_some_and(|r| transform::same_crs(srs, r)) {
        Some(
            "is an engineering (local) CRS, which no operation relates to the Earth, and it is \
             not the raster's own"
                .to_string(),
        )
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(GdalError::Arguments(format!(
            "{argument}: {whose}, {name}{id}, {problem}, so the points cannot be placed on the \
             raster; give the points' horizontal CRS (a geographic or projected one, e.g. \
             \"EPSG:4326\", or the horizontal part of a compound CRS){}",
            if matches!(points, Points::Layer { crs: None, .. }) {
                ": assign it to the layer first (vector_reproject with `src_crs`), or give the \
                 points as `coordinates` with `crs`"
            } else {
                " in `crs`"
            }
        ))),
    }
}

/// The points of a layer, as (feature id, [x, y]) or a note when a feature is not a point.
type LayerPoints = (Vec<(i64, Option<[f64; 2]>)>, Option<SpatialRef>);

fn layer_points(path: &Path, name: Option<&str>) -> Result<LayerPoints, GdalError> {
    let dataset = ogr::open("points", path)?;
    let mut layer = ogr::layer("layer", &dataset, name)?;
    let count = layer.try_feature_count().unwrap_or(0);
    if count > MAX_POINTS as u64 {
        return Err(GdalError::Arguments(format!(
            "points: the layer has {count} features; at most {MAX_POINTS} points per call"
        )));
    }
    let srs = layer.spatial_ref();
    let mut out = Vec::new();
    for feature in layer.features() {
        if out.len() >= MAX_POINTS {
            return Err(GdalError::Arguments(format!(
                "points: the layer has more than {MAX_POINTS} features; at most {MAX_POINTS} \
                 points per call"
            )));
        }
        let id = feature.fid().map_or(out.len() as i64, |f| f as i64);
        let point = crate::gdal::geometry_of(&feature).and_then(|g| {
            let flat = gdal::vector::geometry_type_flatten(g.geometry_type());
            (flat == gdal_sys::OGRwkbGeometryType::wkbPoint && !g.is_empty()).then(|| {
                let (x, y, _) = g.get_point(0);
                [x, y]
            })
        });
        out.push((id, point));
    }
    Ok((out, srs))
}

/// Sample the raster at `path`.
pub fn sample(path: &Path, request: &SampleRequest) -> Result<SampleOutput, GdalError> {
    let dataset = facts::open(path)?;
    facts::require_raster("input", path, &dataset)?;
    let gt = dataset.geo_transform().map_err(|_| {
        GdalError::Arguments(format!(
            "input: {} has no geotransform, so no coordinate names a cell",
            path.display()
        ))
    })?;
    let inv = inverse(&gt).ok_or_else(|| {
        GdalError::Arguments(format!(
            "input: {} has a degenerate geotransform {gt:?}",
            path.display()
        ))
    })?;
    let (width, height) = dataset.raster_size();
    let raster_srs = dataset.spatial_ref().ok();
    let band_count = dataset.raster_count();
    let bands: Vec<usize> = if request.bands.is_empty() {
        (1..=band_count).collect()
    } else {
        request.bands.clone()
    };
    if let Some(bad) = bands.iter().find(|b| **b == 0 || **b > band_count) {
        return Err(GdalError::Arguments(format!(
            "bands: {} has {band_count} band(s); band {bad} does not exist",
            path.display()
        )));
    }
    let (given, given_crs_text, layer_srs) = match &request.points {
        Points::Coordinates { coordinates, crs } => (
            coordinates
                .iter()
                .enumerate()
                .map(|(i, c)| (i as i64, Some(*c)))
                .collect::<Vec<_>>(),
            crs.clone(),
            None,
        ),
        Points::Layer { path, layer, crs } => {
            let (points, srs) = layer_points(path, layer.as_deref())?;
            // A GeoPackage's "Undefined geographic SRS" (srs_id 0) says only that the
            // coordinates are longitudes and latitudes on an unknown datum: no CRS to place
            // them by, so the caller names it, as for a layer without one.
            let srs = srs.filter(|srs| !undefined_geographic(srs));
            if srs.is_some() && crs.is_some() {
                return Err(GdalError::Arguments(
                    "crs: the points layer declares its own CRS; `crs` is only for a layer \
                     without one"
                        .to_string(),
                ));
            }
            (points, crs.clone(), srs)
        }
    };
    if given.len() * bands.len() > MAX_VALUES {
        return Err(GdalError::Arguments(format!(
            "{} points x {} bands is more than {MAX_VALUES} values; name fewer `bands` or \
             fewer points",
            given.len(),
            bands.len()
        )));
    }
    let points_srs = match (given_crs_text, layer_srs) {
        (Some(text), _) => Some(facts::parse_crs("crs", &text)?),
        (None, Some(srs)) => Some(srs),
        (None, None) => None,
    };
    if let Some(srs) = &points_srs {
        check_points_crs(srs, raster_srs.as_ref(), &request.points)?;
    }
    // The points' CRS when it is not the raster's.
    let other = match (&points_srs, &raster_srs) {
        (Some(p), Some(r)) if !transform::same_crs(p, r) => Some(p.clone()),
        (Some(_), None) => {
            return Err(GdalError::Arguments(format!(
                "crs: {} has no CRS, so points in another CRS cannot be placed on it; give \
                 the points in the raster's own coordinates without `crs`",
                path.display()
            )))
        }
        _ => None,
    };
    if matches!(request.points, Points::Layer { .. })
        && points_srs.is_none()
        && raster_srs.is_some()
    {
        return Err(GdalError::Arguments(
            "crs: the points layer has no CRS (or GeoPackage's \"Undefined geographic SRS\", \
             longitudes and latitudes on an unknown datum); name the CRS of its coordinates \
             with `crs`, e.g. \"EPSG:4326\" (assuming the raster's would be a silent choice)"
                .to_string(),
        ));
    }
    let mut transformation = None;
    let transformer = match (&other, &raster_srs) {
        (Some(from), Some(to)) => {
            let area = facts::raster_extent(&dataset).and_then(|e| transform::lonlat_bounds(to, e));
            let found = transform::facts(from, to, area);
            let pipeline = found
                .as_ref()
                .and_then(|f| f.explicit_pipeline())
                .map(str::to_string);
            transformation = found;
            let _quiet = ErrorCapture::start();
            Some(
                transform::coord_transform(from, to, pipeline.as_deref()).map_err(|e| {
                    GdalError::Arguments(format!(
                        "crs: no transformation from the points' CRS to the raster's: {e}"
                    ))
                })?,
            )
        }
        _ => None,
    };
    let mut warnings = Vec::new();
    if other.is_some() {
        match &transformation {
            None => warnings.push(
                "PROJ could not describe the operation from the points' CRS to the raster's; \
                 its accuracy is unknown"
                    .to_string(),
            ),
            Some(t) if t.used.ballpark => warnings.push(format!(
                "the operation from the points' CRS ({}) is a ballpark (datum shift ignored or \
                 approximated, errors up to hundreds of metres): points may land in a \
                 neighbouring cell",
                t.used.name
            )),
            Some(t) => {
                let half = raster_srs
                    .as_ref()
                    .and_then(|srs| half_cell_metres(srs, &gt, height));
                if let (Some(accuracy), Some(half)) = (t.used.accuracy_metres, half) {
                    if accuracy > half {
                        warnings.push(format!(
                            "the operation from the points' CRS ({}) is accurate to {accuracy} \
                             m, coarser than half a cell ({half:.3} m): points near a cell edge \
                             may land in the neighbouring cell",
                            t.used.name
                        ));
                    }
                }
            }
        }
    }
    let mut band_info = Vec::new();
    // GDAL reads a whole natural block to give one cell: a 372-byte GeoTIFF whose one tile is
    // 16384 x 8192 Float64 made a one-point sample allocate 1 GiB, and four at once 4.25 GB
    // (regression, issue 21 attack round 4, B3). Each band's block is reserved from the
    // budget all calls share before any cell is read (`blocks::reserve`).
    for &b in &bands {
        let band = dataset.rasterband(b).map_err(|e| GdalError::Failed {
            operation: format!("reading band {b}"),
            message: e.to_string(),
        })?;
        let unit = band.unit();
        band_info.push(SampledBand {
            band: b,
            data_type: crate::gdal::facts::band_type_name(&band),
            scale: band.scale(),
            offset: band.offset(),
            unit: (!unit.is_empty()).then_some(unit),
            nodata: band.no_data_value(),
            nodata_text: band
                .no_data_value()
                .and_then(crate::gdal::facts::nodata_text),
        });
    }
    let _memory = crate::gdal::policy::blocks::reserve(
        "raster_sample: the blocks a sample reads",
        path,
        &dataset,
        &bands,
        crate::gdal::policy::blocks::Reach::Full,
    )?;
    // A full turn of longitude in the raster's angular unit (360 for degrees, 400 for grads).
    let turn = raster_srs
        .as_ref()
        .filter(|srs| srs.is_geographic())
        .map(|srs| srs.angular_units())
        .filter(|radians| *radians > 0.0)
        .map(|radians| std::f64::consts::TAU / radians);
    // Whether the points' coordinates are longitudes and latitudes (their own CRS, or the
    // raster's when they name none): a pair given as [latitude, longitude] lands elsewhere or
    // nowhere, silently (attack round 14, R14-B21).
    let geographic_points = points_srs
        .as_ref()
        .or(raster_srs.as_ref())
        .is_some_and(|srs| srs.is_geographic());
    // A point in the raster's CRS, `None` when it cannot be transformed there.
    let to_raster = |x: f64, y: f64| match &transformer {
        None => Some((x, y)),
        Some(t) => {
            let (mut xs, mut ys, mut zs) = ([x], [y], [0.0]);
            let _quiet = ErrorCapture::start();
            t.transform_coords(&mut xs, &mut ys, &mut zs)
                .ok()
                .filter(|_| xs[0].is_finite() && ys[0].is_finite())
                .map(|_| (xs[0], ys[0]))
        }
    };
    let lands_inside = |x: f64, y: f64| {
        to_raster(x, y).is_some_and(|(rx, ry)| {
            let (pixel, line) = apply(&inv, rx, ry);
            cell_of(pixel, line, width, height).is_some()
        })
    };
    let mut swapped_inside = 0usize;
    let mut points = Vec::with_capacity(given.len());
    let mut outside = 0;
    let mut not_points = 0usize;
    // Points on cells GDAL's mask marks invalid, per band (R13-B6).
    let mut masked: Vec<(usize, u64)> = Vec::new();
    for (id, point) in given {
        let mut sampled = SampledPoint {
            id,
            given: point,
            at: None,
            inside: false,
            row: None,
            column: None,
            cell_centre: None,
            cell_corner: None,
            values: Vec::new(),
            note: None,
        };
        let Some([x, y]) = point else {
            // Not sampled, and not outside: a MultiPoint inside the raster was counted as a
            // location off it (attack round 21, R21-B11).
            sampled.note = Some(
                "the feature is not a single point, so it was not sampled (a MultiPoint: \
                 split it into points first)"
                    .to_string(),
            );
            not_points += 1;
            points.push(sampled);
            continue;
        };
        if !(x.is_finite() && y.is_finite()) {
            return Err(GdalError::Arguments(format!(
                "coordinates: point {id} is not finite"
            )));
        }
        let Some((rx, ry)) = to_raster(x, y) else {
            sampled.note = Some("the point cannot be transformed to the raster's CRS".to_string());
            outside += 1;
            points.push(sampled);
            continue;
        };
        sampled.at = Some([rx, ry]);
        let (mut pixel, mut line) = apply(&inv, rx, ry);
        // A longitude a turn away from the raster's range is the same place: a point at
        // -170.5 over a 0..360 raster (GFS, ERA5, CMIP) is its cell at 189.5 (attack round
        // 11, R11-7, the mirror of R10-9 in zonal statistics).
        if cell_of(pixel, line, width, height).is_none() {
            if let Some(turn) = turn {
                for shifted in [rx + turn, rx - turn] {
                    let (p, l) = apply(&inv, shifted, ry);
                    if cell_of(p, l, width, height).is_some() {
                        (pixel, line) = (p, l);
                        sampled.at = Some([shifted, ry]);
                        sampled.note = Some(format!(
                            "longitude {rx} is read as {shifted}, the same meridian in the \
                             raster's range"
                        ));
                        break;
                    }
                }
            }
        }
        let Some((row, column)) = cell_of(pixel, line, width, height) else {
            let swapped = geographic_points && x.abs() <= 90.0 && lands_inside(y, x);
            sampled.note = Some(format!(
                "outside the raster ({width} x {height} cells): pixel {pixel:.3}, line \
                 {line:.3}{}",
                if swapped {
                    format!(
                        "; [{y}, {x}] (the pair swapped) would fall inside: coordinates are \
                         [longitude, latitude]"
                    )
                } else {
                    String::new()
                }
            ));
            swapped_inside += usize::from(swapped);
            outside += 1;
            points.push(sampled);
            continue;
        };
        sampled.inside = true;
        sampled.row = Some(row);
        sampled.column = Some(column);
        let corner = apply(&gt, column as f64, row as f64);
        let centre = apply(&gt, column as f64 + 0.5, row as f64 + 0.5);
        sampled.cell_corner = Some([corner.0, corner.1]);
        sampled.cell_centre = Some([centre.0, centre.1]);
        for info in &band_info {
            let band = dataset
                .rasterband(info.band)
                .map_err(|e| GdalError::Failed {
                    operation: format!("reading band {}", info.band),
                    message: e.to_string(),
                })?;
            let capture = ErrorCapture::start();
            // As GDAL reads PIXELTYPE=SIGNEDBYTE: -128..127 (R7-3, R8-12).
            let (buffer, masked_here) = crate::gdal::facts::read_cells_masked::<f64>(
                &band,
                (column as isize, row as isize),
                (1, 1),
                (1, 1),
            )
            .map_err(|e| {
                crate::gdal::facts::cell_read_error(
                    e,
                    || format!("band {}", info.band),
                    |e| GdalError::Failed {
                        operation: format!(
                            "reading band {} at row {row}, column {column}",
                            info.band
                        ),
                        message: capture.failure_text(&e.to_string()),
                    },
                )
            })?;
            if masked_here > 0 {
                match masked.iter_mut().find(|(b, _)| *b == info.band) {
                    Some((_, n)) => *n += 1,
                    None => masked.push((info.band, 1)),
                }
                sampled.note = Some(format!(
                    "band {}: the cell is masked by the raster's mask (read as nodata)",
                    info.band
                ));
            }
            let raw = buffer.data().first().copied().unwrap_or(f64::NAN);
            // The declared nodata as the band's type holds it (R9-4: a Float32 band's -999.9
            // is float32(-999.9) in its cells).
            let is_nodata = raw.is_nan()
                || crate::gdal::facts::nodata::band_nodata(&band).is_some_and(|n| n == raw);
            let value =
                (!is_nodata).then(|| raw * info.scale.unwrap_or(1.0) + info.offset.unwrap_or(0.0));
            // An infinite cell is a value JSON cannot carry: said, not left as a bare null
            // beside `nodata: false` (attack round 19, R19-C6).
            if raw.is_infinite() {
                sampled.note = Some(format!(
                    "band {}: the cell holds {} (an infinite value, no number: value and raw are \
                     null)",
                    info.band,
                    if raw > 0.0 { "+inf" } else { "-inf" }
                ));
            }
            let value = value.filter(|v| v.is_finite());
            sampled.values.push(BandValue {
                band: info.band,
                value,
                raw: raw.is_finite().then_some(raw),
                nodata: is_nodata,
            });
        }
        points.push(sampled);
    }
    // Points that look like longitudes and latitudes, outside a projected raster, given
    // without `crs`: the usual slip (attack round 13, R13-B7 b).
    let degrees = |p: &SampledPoint| {
        p.given
            .is_some_and(|[x, y]| (-180.0..=180.0).contains(&x) && (-90.0..=90.0).contains(&y))
    };
    if points_srs.is_none()
        && outside > 0
        && raster_srs.as_ref().is_some_and(|srs| srs.is_projected())
        && points.iter().filter(|p| !p.inside).all(degrees)
    {
        warnings.push(format!(
            "{outside} point(s) fall outside the raster, and every one lies within ±180 / ±90: \
             they look like longitudes and latitudes, while `crs` defaults to the raster's own \
             (projected) CRS; if they are degrees, pass \"crs\": \"EPSG:4326\""
        ));
    }
    if swapped_inside > 0 {
        warnings.push(format!(
            "{swapped_inside} of the {outside} point(s) outside the raster would fall inside \
             with their two numbers swapped: coordinates are [x, y], which for longitudes and \
             latitudes is [longitude, latitude] whatever the CRS's own axis order (EPSG:4326 \
             lists latitude first); if the points were given as [latitude, longitude], swap \
             them"
        ));
    }
    if not_points > 0 {
        warnings.push(format!(
            "{not_points} feature(s) are not single points (a MultiPoint, a line, a polygon, \
             no geometry) and were not sampled; their notes say so"
        ));
    }
    for (index, count) in masked {
        let source = dataset
            .rasterband(index)
            .ok()
            .and_then(|band| crate::gdal::facts::mask::mask_source(&band));
        if let Some(source) = source {
            warnings.push(format!(
                "{count} point(s) fall on cells that band {index}'s mask ({}) marks invalid: \
                 reported as nodata (value null), as GDAL's programs read them",
                source.describe()
            ));
        }
    }
    Ok(SampleOutput {
        input: path.display().to_string(),
        crs: raster_srs.as_ref().map(facts::crs_facts),
        points_crs: other.as_ref().map(facts::crs_facts),
        transformation,
        registration: georef::registration(&dataset),
        geotransform: gt,
        width,
        height,
        bands: band_info,
        outside,
        warnings,
        points,
    })
}

/// Half the smaller side of a cell, in metres.
fn half_cell_metres(srs: &SpatialRef, gt: &[f64; 6], height: usize) -> Option<f64> {
    let (dx, dy) = (gt[1].hypot(gt[4]), gt[2].hypot(gt[5]));
    let (x, y) = if srs.is_projected() {
        let unit = srs.linear_units();
        (dx * unit, dy * unit)
    } else if srs.is_geographic() {
        let lat = gt[3] + gt[5] * height as f64 / 2.0;
        georef::cell_size_metres(srs, dx, dy, lat)?
    } else {
        return None;
    };
    let half = x.min(y) / 2.0;
    (half.is_finite() && half > 0.0).then_some(half)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (attack round 13, R13-B7 b): lon/lat points on a UTM raster without `crs`
    /// answered only "outside". Now a warning names `crs`; twin: the raster's own coordinates
    /// inside it, and degrees given with `crs`, are not warned about.
    #[test]
    fn r13_b7_lonlat_points_on_a_projected_raster_without_crs_name_crs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("utm.tif");
        let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
        let mut ds = driver
            .create_with_band_type::<f32, _>(&path, 10, 10, 1)
            .unwrap();
        ds.set_geo_transform(&[500_000.0, 100.0, 0.0, 6_000_000.0, 0.0, -100.0])
            .unwrap();
        ds.set_spatial_ref(&SpatialRef::from_epsg(32633).unwrap())
            .unwrap();
        drop(ds);
        let run = |coordinates: Vec<[f64; 2]>, crs: Option<&str>| {
            sample(
                &path,
                &SampleRequest {
                    points: Points::Coordinates {
                        coordinates,
                        crs: crs.map(str::to_string),
                    },
                    bands: vec![1],
                },
            )
            .unwrap()
            .warnings
        };
        let warned = run(vec![[15.0, 54.1]], None);
        assert!(warned.iter().any(|w| w.contains("`crs`")), "{warned:?}");
        let inside = run(vec![[500_050.0, 5_999_950.0]], None);
        assert!(!inside.iter().any(|w| w.contains("`crs`")), "{inside:?}");
        let given = run(vec![[15.0, 54.1]], Some("EPSG:4326"));
        assert!(!given.iter().any(|w| w.contains("`crs`")), "{given:?}");
    }

    #[test]
    fn edges_belong_to_the_next_cell_and_the_far_edge_is_outside() {
        assert_eq!(cell_of(1.0, 0.0, 4, 4), Some((0, 1)));
        assert_eq!(cell_of(0.999_999, 0.0, 4, 4), Some((0, 0)));
        // 0.3 / 0.1 in floating point.
        assert_eq!(cell_of(2.999_999_999_999_999_6, 0.0, 4, 4), Some((0, 3)));
        assert_eq!(cell_of(4.0, 0.0, 4, 4), None);
        assert_eq!(cell_of(-0.000_1, 0.0, 4, 4), None);
        assert_eq!(cell_of(0.0, 3.5, 4, 4), Some((3, 0)));
    }

    #[test]
    fn inverse_geotransform_round_trips() {
        for gt in [
            [100.0, 10.0, 0.0, 200.0, 0.0, -10.0],
            [100.0, 10.0, 0.0, 200.0, 0.0, 10.0],
            [5.0, 2.0, 1.0, 7.0, 0.5, -3.0],
        ] {
            let inv = inverse(&gt).unwrap();
            let (x, y) = apply(&gt, 2.5, 3.25);
            let (p, l) = apply(&inv, x, y);
            assert!(
                (p - 2.5).abs() < 1e-12 && (l - 3.25).abs() < 1e-12,
                "{gt:?}"
            );
        }
        assert!(inverse(&[0.0, 1.0, 1.0, 0.0, 1.0, 1.0]).is_none());
    }
}
