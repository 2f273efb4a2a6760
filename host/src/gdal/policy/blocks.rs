//! The memory GDAL allocates to give the host cells: whole natural blocks.
//!
//! GDAL reads a band's natural block (a tile or a strip) whole to give even one cell of it, and
//! a file's header says how large a block is: a 372-byte sparse GeoTIFF declaring one
//! 16384 x 8192 Float64 tile made every cell read allocate 1 GiB (issue 21, attack round 4,
//! B3). Every host read of cells, and every GDAL program the host runs over an input, therefore
//! reserves what GDAL will allocate from the memory budget all calls share (`crate::budget`)
//! before it reads, and gives it back when the read is over: [`reserve`].
//!
//! The estimate ([`block_bytes`]) is, per band read, its natural block's cells times its data
//! type's size; the largest of its overviews' and its mask's blocks too where GDAL may read
//! them (a decimated read or a GDAL program); every band of a pixel-interleaved dataset
//! (GDAL decodes a pixel-interleaved tile for all bands at once); and, for a VRT, the largest
//! estimate among the datasets its sources name (the VRT's own blocks are small, its sources'
//! need not be), opened through the same checks as any input, to a depth of
//! [`MAX_VRT_DEPTH`]. Reads whose blocks come to at most [`UNRESERVED_BYTES`] take nothing
//! from the budget (GDAL's block cache is bounded separately), so `raster_info` on an ordinary
//! raster never waits for heavy calls.

use crate::budget::Reservation;
use crate::gdal::GdalError;
use gdal::{Dataset, Metadata};
use std::path::{Path, PathBuf};

/// Block bytes a read may hold without a reservation: an ordinary tile (a 1024 x 1024
/// Float64 tile is 8 MiB) or a strip of a wide raster.
pub const UNRESERVED_BYTES: u64 = 16 << 20;
/// VRTs nested deeper than this are not followed for their sources' blocks (the host's checks
/// refuse deeper nesting before the open).
pub const MAX_VRT_DEPTH: usize = 8;

/// How a read reaches the cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Full resolution windows of the bands.
    Full,
    /// Decimated reads, or a GDAL program (which may read overviews and masks).
    Any,
}

/// What reading cells costs in blocks: the bytes GDAL holds at once, and the largest single
/// block among them (named in a refusal).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Bytes GDAL holds at once.
    pub bytes: u64,
    /// The largest block: its bytes, the file it is in, its width and height in cells.
    pub largest: Option<(u64, PathBuf, usize, usize)>,
}

impl Estimate {
    fn block(&mut self, path: &Path, (x, y): (usize, usize), bytes_per_cell: u64) -> u64 {
        let bytes = (x as u64)
            .saturating_mul(y as u64)
            .saturating_mul(bytes_per_cell);
        if self.largest.as_ref().is_none_or(|l| l.0 < bytes) {
            self.largest = Some((bytes, path.to_path_buf(), x, y));
        }
        bytes
    }
}

/// Bytes of one band's natural block, with its overviews' and mask's when `reach` is
/// [`Reach::Any`].
fn band_block_bytes(
    path: &Path,
    band: &gdal::raster::RasterBand<'_>,
    reach: Reach,
    estimate: &mut Estimate,
) -> u64 {
    let own = estimate.block(path, band.block_size(), u64::from(band.band_type().bytes()));
    if reach == Reach::Full {
        return own;
    }
    let mut largest = own;
    let overviews = band.overview_count().unwrap_or(0).max(0) as usize;
    for index in 0..overviews {
        if let Ok(overview) = band.overview(index) {
            largest = largest.max(estimate.block(
                path,
                overview.block_size(),
                u64::from(overview.band_type().bytes()),
            ));
        }
    }
    // A mask other than "all valid" is read beside the band by GDAL's programs (one byte a
    // cell); "all valid" masks are never read.
    let all_valid = band.mask_flags().is_ok_and(|f| f.is_all_valid());
    if !all_valid {
        if let Ok(mask) = band.open_mask_band() {
            largest = largest.saturating_add(estimate.block(path, mask.block_size(), 1));
        }
    }
    largest
}

/// What GDAL holds at once to give cells of `bands` (1-based; empty: every band) of
/// `dataset`, opened from `path`.
pub fn block_bytes(
    path: &Path,
    dataset: &Dataset,
    bands: &[usize],
    reach: Reach,
) -> Result<Estimate, GdalError> {
    let mut estimate = Estimate::default();
    estimate.bytes = measure(path, dataset, bands, reach, 0, &mut estimate)?;
    Ok(estimate)
}

fn measure(
    path: &Path,
    dataset: &Dataset,
    bands: &[usize],
    reach: Reach,
    depth: usize,
    estimate: &mut Estimate,
) -> Result<u64, GdalError> {
    let count = dataset.raster_count();
    let interleaved = dataset
        .metadata_item("INTERLEAVE", "IMAGE_STRUCTURE")
        .is_some_and(|i| i.eq_ignore_ascii_case("PIXEL"));
    let read: Vec<usize> = if bands.is_empty() || interleaved {
        (1..=count).collect()
    } else {
        bands
            .iter()
            .copied()
            .filter(|b| (1..=count).contains(b))
            .collect()
    };
    let mut bytes = 0u64;
    for index in read {
        if let Ok(band) = dataset.rasterband(index) {
            bytes = bytes.saturating_add(band_block_bytes(path, &band, reach, estimate));
        }
    }
    if dataset.driver().short_name() == "VRT" && depth < MAX_VRT_DEPTH {
        bytes = bytes.max(vrt_sources(path, dataset, reach, depth, estimate)?);
    }
    Ok(bytes)
}

/// The largest block estimate among the raster datasets a VRT's sources name (every band of
/// each: the VRT's band need not be the source's).
fn vrt_sources(
    path: &Path,
    dataset: &Dataset,
    reach: Reach,
    depth: usize,
    estimate: &mut Estimate,
) -> Result<u64, GdalError> {
    let own = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut largest = 0u64;
    for listed in crate::gdal::policy::file_list(dataset) {
        let source = PathBuf::from(crate::gdal::policy::unpin_text(&listed));
        // Only files: the host's own in-memory scratch datasets are small by construction.
        let Ok(real) = std::fs::canonicalize(&source) else {
            continue;
        };
        if real == own || seen.contains(&real) || !real.is_file() {
            continue;
        }
        seen.push(real.clone());
        // Opened as the VRT driver opens it (no georeferencing choice), through the checks.
        let Ok(opened) = crate::gdal::raster::overviews::open(&real, false) else {
            // Not a raster GDAL opens (a sidecar listed with the VRT): GDAL will not read
            // cells from it either.
            continue;
        };
        if opened.raster_count() == 0 {
            continue;
        }
        largest = largest.max(measure(&real, &opened, &[], reach, depth + 1, estimate)?);
    }
    Ok(largest)
}

/// Reserve what GDAL allocates to give cells of `bands` (empty: all) of `dataset` (opened from
/// `path`) from the budget all calls share, for `what` (named in the error: "raster_stats:
/// band 1"). Nothing is reserved when the blocks come to at most [`UNRESERVED_BYTES`].
/// Refused as `memory_budget` when they do not fit.
pub fn reserve(
    what: &str,
    path: &Path,
    dataset: &Dataset,
    bands: &[usize],
    reach: Reach,
) -> Result<Reservation<'static>, GdalError> {
    let estimate = block_bytes(path, dataset, bands, reach)?;
    if estimate.bytes <= UNRESERVED_BYTES {
        return Ok(crate::budget::start(what));
    }
    let largest = estimate
        .largest
        .map(|(bytes, file, x, y)| {
            format!(
                "; its largest, in {}, is {x} x {y} cells ({bytes} bytes)",
                file.display()
            )
        })
        .unwrap_or_default();
    let described = format!(
        "{what} (GDAL reads {} through whole blocks, however few cells are asked for{largest}; \
         re-tile a file stored in huge blocks outside the server, e.g. gdal_translate -co \
         TILED=YES)",
        path.display()
    );
    Ok(crate::budget::reserve(&described, estimate.bytes)?)
}
