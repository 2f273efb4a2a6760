//! Zonal statistics with GDAL I/O around the numeric core in [`crate::aggregation`].
//!
//! Zones are read with OGR (reprojected into the raster's CRS when they are in another one),
//! and for each zone only the window of cells its bounding box covers is read from the band,
//! in row blocks, so memory follows the largest zone rather than the raster. The weights of
//! each cell (cell centre, all touched, or exact coverage fraction) come from
//! [`crate::aggregation::coverage`]. Over a lon/lat raster a zone reaching past the raster's
//! longitudes (drawn 178..182°E over -180..180) is also counted a turn east or west
//! ([`crate::aggregation::wrap_longitudes`]), and the result says so.

use crate::aggregation::{
    nodata_predicate, outside_fraction, wrap_longitudes, zone_weights_in, zone_window, GridWindow,
    NodataPolicy, Semantics, Stat, ZonalAccumulator,
};
use crate::gdal::output::Staging;
use crate::gdal::vector::{self as ogr, Zone};
use crate::gdal::{ErrorCapture, GdalError};
use gdal::spatial_ref::SpatialRef;
use gdal::vector::LayerAccess;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Rows of a zone's window read at once.
const BLOCK_ROWS: usize = 1024;
/// Bytes a zone keeps per cell for medians (a value and its weight) or majorities (a
/// frequency-map entry), for the memory budget.
const KEPT_BYTES_PER_CELL: u64 = 32;

/// One zonal-statistics job.
#[derive(Debug, Clone)]
pub struct ZonalRequest {
    pub raster: PathBuf,
    pub zones: PathBuf,
    pub layer: Option<String>,
    pub id_field: Option<String>,
    pub band: usize,
    pub stats: Vec<Stat>,
    pub semantics: Semantics,
    pub policy: NodataPolicy,
    /// Reproject the zones into the raster's CRS (they are in another one).
    pub reproject: bool,
    /// The coordinate operation for the zones when the host chose one more accurate than
    /// GDAL's own (a PROJ pipeline).
    pub operation: Option<String>,
}

/// The statistics of one zone.
#[derive(Debug, Clone)]
pub struct ZoneStats {
    pub fid: Option<u64>,
    pub id: serde_json::Value,
    pub stats: BTreeMap<Stat, Option<f64>>,
    /// Valid cells with a positive weight.
    pub cells: u64,
    /// Weighted count of the nodata cells the zone touched.
    pub nodata: f64,
    /// Cells holding +Inf or -Inf, kept out of the statistics (attack round 6, R6-1).
    pub infinite_cells: u64,
    /// Copies of the zone's polygons moved a turn east or west onto a lon/lat raster's
    /// longitudes (the zone reached past them; attack round 10, R10-9).
    pub wrapped: usize,
    /// The share of the zone's area outside the raster, when above [`UNCOVERED_SHARE`]
    /// (attack round 15, R15-B21).
    pub outside: Option<f64>,
}

/// The share of a zone's area outside the raster from which it is reported: above what
/// rounding in the clipped areas makes of a zone drawn along the raster's edge.
pub const UNCOVERED_SHARE: f64 = 1e-9;

impl ZonalRequest {
    /// A note for the result when the band has a GDAL mask of its own (a per-dataset mask,
    /// an alpha band): its masked cells count as nodata ([`crate::gdal::facts::read_cells`];
    /// attack round 13, R13-B6).
    pub fn mask_note(&self) -> Option<String> {
        let _quiet = ErrorCapture::start();
        let raster = crate::gdal::facts::open(&self.raster).ok()?;
        let band = raster.rasterband(self.band).ok()?;
        crate::gdal::facts::mask::mask_source(&band).map(|source| {
            crate::gdal::facts::mask::note(&format!("band {}", self.band), source, None)
        })
    }

    /// The raster's grid, or why the request cannot be computed on it: a rotated or south-up
    /// grid, a band it lacks.
    fn grid_of(&self, raster: &gdal::Dataset) -> Result<GridWindow, GdalError> {
        let gt = raster
            .geo_transform()
            .map_err(|_| GdalError::Arguments("raster: it has no geotransform".to_string()))?;
        let (width, height) = raster.raster_size();
        let gt = crate::gdal::facts::georef::without_rotation_noise(gt, (width, height));
        let grid = GridWindow::from_geotransform(gt, width, height)
            .map_err(|e| GdalError::Arguments(format!("raster: {e}; warp it north-up first")))?;
        if self.band == 0 || self.band > raster.raster_count() {
            return Err(GdalError::Arguments(format!(
                "band: the raster has {} band(s)",
                raster.raster_count()
            )));
        }
        Ok(grid)
    }

    /// The argument errors no justification changes, found before the gate (attack round 19,
    /// R19-B6: a south-up raster, a band it lacks and an `id_field` the zones lack were
    /// reported only after a justification had been asked for and stored).
    ///
    /// An invalid zone polygon is refused here too: the exact coverage of a bow-tie's lobes
    /// cancelled to 0 cells, a lopsided one counted 5.25 of 6.67, and a hole outside its
    /// shell counted 4 cells under `coverage` and 6 under `cell_centre`, with no note (attack
    /// round 21, R21-B17); `vector_measure` refuses the same polygons.
    pub fn check(
        &self,
        raster: &gdal::Dataset,
        zones: &mut gdal::vector::Layer,
    ) -> Result<(), GdalError> {
        self.grid_of(raster)?;
        if let Some(why) = raster
            .rasterband(self.band)
            .ok()
            .and_then(|b| crate::gdal::facts::complex_band_refusal(&b))
        {
            return Err(GdalError::Arguments(format!("band {}: {why}", self.band)));
        }
        for feature in zones.features() {
            if !crate::gdal::keep_going(0.0) {
                return Err(crate::gdal::cancelled("checking the zones"));
            }
            let Some(geometry) = crate::gdal::geometry_of(&feature) else {
                continue;
            };
            // Each polygon judged alone: the coverage unites a zone's parts, so parts that
            // share an edge or overlap are one well-defined zone (attack round 22, R22-B10: a
            // zone of two squares sharing an edge was refused); a ring that crosses itself, or
            // a hole outside its shell, is not.
            if let Some(reason) = crate::gdal::vector::geometry::invalid_polygon_part(geometry) {
                return Err(GdalError::Arguments(format!(
                    "zones: feature {} holds an invalid polygon (GEOS: {reason}), so which \
                     cells it covers is not defined (a self-crossing ring's lobes cancel); \
                     repair the zones first, outside the server (ogr2ogr -makevalid), and \
                     pass the repaired layer",
                    feature.fid().map_or("?".to_string(), |f| f.to_string())
                )));
            }
        }
        zones.reset_feature_reading();
        if let Some(name) = &self.id_field {
            if zones.defn().field_index(name).is_err() {
                let names: Vec<String> = zones.defn().fields().map(|f| f.name()).collect();
                return Err(GdalError::Arguments(format!(
                    "id_field: the zones have no field \"{name}\"; fields: {}",
                    names.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Compute every zone's statistics.
    pub fn run(&self) -> Result<Vec<ZoneStats>, GdalError> {
        let capture = ErrorCapture::start();
        let raster = crate::gdal::facts::open(&self.raster)?;
        let failed = |what: &str| GdalError::Failed {
            operation: format!("reading {}", self.raster.display()),
            message: capture.failure_text(what),
        };
        let grid = self.grid_of(&raster)?;
        let band = raster.rasterband(self.band).map_err(|_| {
            GdalError::Arguments(format!(
                "band: the raster has {} band(s)",
                raster.raster_count()
            ))
        })?;
        // The band's windows are read through its whole blocks (issue 21 attack round 4, B3).
        let _blocks = crate::gdal::policy::blocks::reserve(
            &format!("zonal_stats: band {}", self.band),
            &self.raster,
            &raster,
            &[self.band],
            crate::gdal::policy::blocks::Reach::Full,
        )?;
        // Cells are read as f64, which holds every value of every band type GDAL reads here
        // (Float64, Int32, UInt32; a Float32 read rounded 16777217 to 16777216, 1e-50 to 0
        // and 1e300 to infinity: attack round 16, R16-B3); the nodata as the band holds it.
        let is_nodata = nodata_predicate(crate::gdal::facts::nodata::band_nodata(&band));
        // Physical values where the band declares a scale or offset; nodata cells become NaN
        // (never a value) before the transform, so no physical value can pass for nodata.
        let scale = band.scale().unwrap_or(1.0);
        let offset = band.offset().unwrap_or(0.0);
        let physical = scale != 1.0 || offset != 0.0;
        let target: Option<SpatialRef> = if self.reproject {
            raster.spatial_ref().ok()
        } else {
            None
        };
        // A lon/lat raster: zones reaching past its longitudes are wrapped onto them.
        let turn = raster
            .spatial_ref()
            .ok()
            .filter(SpatialRef::is_geographic)
            .map(|srs| srs.angular_units())
            .filter(|radians| radians.is_finite() && *radians > 0.0)
            .map(|radians| std::f64::consts::TAU / radians);
        let zones_dataset = ogr::open("zones", &self.zones)?;
        let mut layer = ogr::layer("zone_layer", &zones_dataset, self.layer.as_deref())?;
        let zones: Vec<Zone> = ogr::read_zones(
            &mut layer,
            self.id_field.as_deref(),
            target.as_ref(),
            self.operation.as_deref(),
        )?;
        let mut out = Vec::with_capacity(zones.len());
        let keeps_values = self.stats.iter().any(|s| {
            matches!(
                s,
                Stat::Median | Stat::Majority | Stat::Minority | Stat::Variety
            )
        });
        let total = zones.len().max(1);
        for (index, zone) in zones.into_iter().enumerate() {
            if !crate::gdal::keep_going(index as f64 / total as f64) {
                return Err(crate::gdal::cancelled("zonal statistics"));
            }
            let mut accumulator = ZonalAccumulator::new(&self.stats, self.policy);
            let (polygons, wrapped, outside) = match turn {
                Some(turn) => {
                    let (placed, wrapped) =
                        wrap_longitudes(&zone.polygons, &grid, turn).map_err(|e| {
                            GdalError::Arguments(format!("zones: zone {:?}: {e}", zone.fid))
                        })?;
                    let outside = outside_fraction(&zone.polygons, &placed, &grid);
                    (placed, wrapped, outside)
                }
                None => {
                    let outside = outside_fraction(&zone.polygons, &zone.polygons, &grid);
                    (zone.polygons, 0, outside)
                }
            };
            let outside = Some(outside).filter(|share| *share > UNCOVERED_SHARE);
            if outside.is_some() {
                accumulator.add_uncovered();
            }
            let window = zone_window(&polygons, &grid)
                .map_err(|e| GdalError::Algorithm(format!("zone {:?}: {e}", zone.fid)))?;
            // Medians and majorities keep every value of a zone: bound the window.
            crate::gdal::policy::check_cells(
                &format!("zone {:?}", zone.fid),
                window.cols as u64,
                window.rows as u64,
                1,
            )?;
            // A block's values and weights, and the zone's values kept for medians and
            // majorities, from the budget all calls share.
            let cells = window.cols as u64 * window.rows as u64;
            let block = window.cols as u64 * window.rows.min(BLOCK_ROWS) as u64;
            let _memory = crate::budget::reserve(
                &format!("zone {:?}", zone.fid),
                crate::budget::grid_bytes(block, 12, 1).saturating_add(if keeps_values {
                    crate::budget::grid_bytes(cells, KEPT_BYTES_PER_CELL, 1)
                } else {
                    0
                }),
            )?;
            for block in window.row_blocks(BLOCK_ROWS) {
                if block.is_empty() {
                    continue;
                }
                let weights = zone_weights_in(&polygons, &grid, self.semantics, block)
                    .map_err(|e| GdalError::Algorithm(format!("zone {:?}: {e}", zone.fid)))?;
                if weights.weights.iter().all(|w| *w <= 0.0) {
                    continue;
                }
                // As GDAL reads the band: PIXELTYPE=SIGNEDBYTE is -128..127 (R8-12).
                let values = crate::gdal::facts::read_cells::<f64>(
                    &band,
                    (block.col_off as isize, block.row_off as isize),
                    (block.cols, block.rows),
                    (block.cols, block.rows),
                )
                .map_err(|e| {
                    crate::gdal::facts::cell_read_error(
                        e,
                        || format!("raster {}", self.raster.display()),
                        |_| failed("cannot read a window of the band"),
                    )
                })?;
                let data: std::borrow::Cow<[f64]> = if physical {
                    values
                        .data()
                        .iter()
                        .map(|&v| {
                            if is_nodata(v) {
                                f64::NAN
                            } else {
                                v * scale + offset
                            }
                        })
                        .collect::<Vec<f64>>()
                        .into()
                } else {
                    values.data().into()
                };
                accumulator
                    .add(&data, &weights.weights, is_nodata)
                    .map_err(|e| GdalError::Algorithm(format!("zonal statistics: {e}")))?;
            }
            let result = accumulator.finish();
            out.push(ZoneStats {
                fid: zone.fid,
                id: zone.id,
                stats: result.stats,
                cells: result.cells,
                nodata: result.nodata_weight,
                infinite_cells: result.infinite_cells,
                wrapped,
                outside,
            });
        }
        Ok(out)
    }
}

fn csv_field(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.clone()
            }
        }
        other => other.to_string(),
    }
}

/// Write the table as CSV (fid, id, then one column per statistic) atomically.
pub fn write_csv(
    path: &Path,
    stats: &[Stat],
    rows: &[ZoneStats],
) -> Result<Vec<PathBuf>, GdalError> {
    let staging = Staging::new(path)?;
    let io = |source| GdalError::Io {
        operation: format!("writing {}", path.display()),
        source,
    };
    {
        let file = std::fs::File::create(staging.path()).map_err(io)?;
        let mut writer = std::io::BufWriter::new(file);
        let mut header = vec!["fid".to_string(), "id".to_string()];
        header.extend(stats.iter().map(|s| s.as_str().to_string()));
        writeln!(writer, "{}", header.join(",")).map_err(io)?;
        for row in rows {
            let mut fields = vec![
                row.fid.map(|f| f.to_string()).unwrap_or_default(),
                csv_field(&row.id),
            ];
            for stat in stats {
                fields.push(
                    row.stats
                        .get(stat)
                        .copied()
                        .flatten()
                        // As JSON has it: a value that is not finite is empty (null).
                        .filter(|v| v.is_finite())
                        .map(|v| format!("{v}"))
                        .unwrap_or_default(),
                );
            }
            writeln!(writer, "{}", fields.join(",")).map_err(io)?;
        }
        writer.flush().map_err(io)?;
    }
    staging.commit()
}
