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
//! [`MAX_VRT_DEPTH`]. A driver that decodes its whole image at the first read of any cell,
//! whatever blocks it reports ([`WHOLE_IMAGE_DRIVERS`]: a 10 KB lossless WebP of 16383²
//! reported 16383 x 1 blocks and took ~930 MB per read-only call, attack round 9, R9-2),
//! counts its whole image, every band, as one block. Reads whose blocks come to at most
//! [`UNRESERVED_BYTES`] take nothing
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

/// Drivers that decode the whole image into one buffer at the first read of any cell,
/// whatever blocks they report. Measured with GDAL 3.6.2: WEBP reports `width x 1` blocks
/// and decodes `width x height x bands` bytes (`gdallocationinfo` on a 16383² WebP: 960 MB).
/// PNG (line by line; interlaced in chunks, counted apart), a baseline JPEG and JPEG 2000
/// (per block) do not; a progressive JPEG is counted by [`jpeg_buffers_whole_image`] (libjpeg's
/// own cap of about 500 MB bounds one image, not the sum); GIF and BMP are not opened by this
/// server.
pub const WHOLE_IMAGE_DRIVERS: &[&str] = &["WEBP"];

/// Whether libjpeg decodes the JPEG file at `path` into a buffer of the whole image before its
/// first line: a progressive or hierarchical frame (SOF2, SOF3's lossless and SOF5-7, SOF10,
/// SOF11 and SOF13-15), or a sequential one whose first scan carries fewer components than the
/// frame (more scans follow). libjpeg then holds every coefficient, about 2 bytes a sample,
/// while GDAL reports one-line blocks: a 1.32 MB progressive 15000² JPEG took a read-only
/// `raster_info` from 100 to 530 MB, and four at once to 1.8 GB, unreserved (attack round 13,
/// R13-14; the baseline twin took 18 MB). A file whose markers cannot be read is taken as
/// decoded whole (it reserves, it is not refused).
pub fn jpeg_buffers_whole_image(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = crate::gdal::policy::open_regular(path) else {
        return false;
    };
    let mut marker = [0u8; 4];
    if file.read_exact(&mut marker[..2]).is_err() || marker[..2] != [0xFF, 0xD8] {
        return false;
    }
    let mut frame_components: Option<u8> = None;
    for _ in 0..4096 {
        if file.read_exact(&mut marker).is_err() {
            return true;
        }
        // Fill bytes (0xFF repeated) may precede a marker.
        while marker[0] == 0xFF && marker[1] == 0xFF {
            marker = [0xFF, marker[2], marker[3], 0];
            if file.read_exact(&mut marker[3..4]).is_err() {
                return true;
            }
        }
        if marker[0] != 0xFF {
            return true;
        }
        let length = u64::from(u16::from_be_bytes([marker[2], marker[3]]));
        if length < 2 {
            return true;
        }
        match marker[1] {
            0xC0 | 0xC1 | 0xC9 => {
                // Precision, height, width, then the frame's component count.
                let mut frame = [0u8; 6];
                if length < 8 || file.read_exact(&mut frame).is_err() {
                    return true;
                }
                frame_components = Some(frame[5]);
                if file.seek(SeekFrom::Current(length as i64 - 8)).is_err() {
                    return true;
                }
            }
            0xC2 | 0xC3 | 0xC5..=0xC7 | 0xCA | 0xCB | 0xCD..=0xCF => return true,
            0xDA => {
                let mut count = [0u8; 1];
                if file.read_exact(&mut count).is_err() {
                    return true;
                }
                return frame_components.is_none_or(|frame| count[0] < frame);
            }
            0xD9 => return false,
            _ => {
                if file.seek(SeekFrom::Current(length as i64 - 2)).is_err() {
                    return true;
                }
            }
        }
    }
    true
}

/// The most GDAL's PNG driver decodes at once of an interlaced image (GDAL 3.6.2).
const PNG_INTERLACED_CHUNK_BYTES: u64 = 100_000_000;

/// Whether the PNG at `path` is interlaced (Adam7): its IHDR's interlace byte, at offset 28.
/// A file whose header cannot be read is taken as interlaced (it reserves, it is not refused).
fn png_is_interlaced(path: &Path) -> bool {
    use std::io::Read;
    let Ok(mut file) = crate::gdal::policy::open_regular(path) else {
        return false;
    };
    let mut head = [0u8; 29];
    if file.read_exact(&mut head).is_err() {
        return true;
    }
    &head[12..16] != b"IHDR" || head[28] != 0
}

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
    /// Whether a file among them is decoded whole ([`WHOLE_IMAGE_DRIVERS`]).
    pub whole_image: bool,
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
        // The host's readers read a mask of the band's own beside its cells (R13-B6).
        let own_mask = band
            .mask_flags()
            .is_ok_and(|f| !f.is_all_valid() && !f.is_nodata());
        return match own_mask.then(|| band.open_mask_band().ok()).flatten() {
            Some(mask) => own.saturating_add(estimate.block(path, mask.block_size(), 1)),
            None => own,
        };
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
    let driver = dataset.driver().short_name();
    // libjpeg's coefficients, 2 bytes a sample, for a JPEG it buffers whole (R13-14).
    let coefficients = driver == "JPEG" && jpeg_buffers_whole_image(path);
    if WHOLE_IMAGE_DRIVERS.contains(&driver.as_str()) || coefficients {
        // The whole image, every band, in one buffer (regression, attack round 9, R9-2).
        let per_cell = dataset
            .rasterband(1)
            .map(|b| u64::from(b.band_type().bytes()))
            .unwrap_or(1)
            .saturating_mul(count as u64)
            .saturating_mul(if coefficients { 2 } else { 1 });
        let whole = estimate.block(path, dataset.raster_size(), per_cell);
        estimate.whole_image = true;
        bytes = bytes.max(whole);
    }
    // OpenJPEG decodes every component of a tile, as 32-bit integers, to give one band's
    // block: a 211 KB JPEG 2000 of 4,000 components took `raster_info` 1,096 MB past a 256 MiB
    // budget that had reserved one band's blocks (attack round 21, R21-A4).
    if driver == "JP2OpenJPEG" {
        let (width, height) = dataset
            .rasterband(1)
            .map(|b| b.block_size())
            .unwrap_or((0, 0));
        let tile = (width as u64)
            .saturating_mul(height as u64)
            .saturating_mul(count as u64)
            .saturating_mul(4);
        bytes = bytes.max(tile);
    }
    // GDAL's JPEG driver inflates a mask appended to the file (its zlib bitmask) whole, one
    // bit a cell, at the first read of any mask block, while it reports one-line mask blocks:
    // an 8.5 MB JPEG took `raster_info` +267 MB, four at once 1,171 MB under a 300 MB budget
    // (attack round 14, R14-4).
    let jpeg_mask = driver == "JPEG"
        && dataset.rasterband(1).is_ok_and(|b| {
            b.mask_flags()
                .is_ok_and(|f| f.is_per_dataset() && !f.is_all_valid())
        });
    // GDAL's PNG driver decodes an interlaced image in chunks of up to 100,000,000 bytes (all
    // of it when smaller), whatever one-line blocks it reports: twelve 97 KB interlaced
    // 9999² PNGs took the server from 91 to 1,094 MB under a 256 MiB budget (attack round 19,
    // R19-A4; GDAL 3.6.2's `LoadInterlacedChunk`).
    if driver == "PNG" && png_is_interlaced(path) {
        let (x, y) = dataset.raster_size();
        let per_cell = dataset
            .rasterband(1)
            .map(|b| u64::from(b.band_type().bytes()))
            .unwrap_or(1)
            .saturating_mul(count as u64);
        let image = (x as u64).saturating_mul(y as u64).saturating_mul(per_cell);
        estimate.whole_image = true;
        bytes = bytes.max(image.min(PNG_INTERLACED_CHUNK_BYTES));
    }
    if jpeg_mask {
        let (x, y) = dataset.raster_size();
        let bitmask = (x as u64).saturating_mul(y as u64).div_ceil(8);
        estimate.whole_image = true;
        bytes = bytes.saturating_add(bitmask);
    }
    if driver == "VRT" && depth < MAX_VRT_DEPTH {
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

/// Reserve, for `what`, the blocks a GDAL program (gdal_translate, gdalwarp, gdaldem,
/// gdaladdo) reads `dataset` (opened from `path`) through: every band's whole blocks, or its
/// overviews' (issue 21 attack round 4, B3).
pub fn reserve_program_input(
    what: &str,
    path: &Path,
    dataset: &Dataset,
) -> Result<Reservation<'static>, GdalError> {
    reserve(what, path, dataset, &[], Reach::Any)
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
    let whole = if estimate.whole_image {
        " (a WebP, a progressive JPEG's coefficients or a JPEG's appended mask is decoded \
         whole at the first cell read)"
    } else {
        ""
    };
    let described = format!(
        "{what} (GDAL reads {} through whole blocks{whole}, however few cells are asked \
         for{largest}; re-tile a file stored in huge blocks outside the server, e.g. \
         gdal_translate -co TILED=YES)",
        path.display()
    );
    Ok(crate::budget::reserve(&described, estimate.bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack round 19, R19-A4: an interlaced PNG is known by its IHDR's interlace byte.
    #[test]
    fn r19_a4_an_interlaced_png_is_known_by_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let header = |interlace: u8| {
            let mut h = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
            h.extend(9999u32.to_be_bytes());
            h.extend(9999u32.to_be_bytes());
            h.extend([8, 0, 0, 0, interlace]);
            h
        };
        let (plain, adam7) = (dir.path().join("p.png"), dir.path().join("i.png"));
        std::fs::write(&plain, header(0)).unwrap();
        std::fs::write(&adam7, header(1)).unwrap();
        assert!(!png_is_interlaced(&plain));
        assert!(png_is_interlaced(&adam7));
    }

    /// A `size`² image of `bands` bands of `value` at `path`, written by `gdal_translate` as
    /// `format` with the creation `option` (a few KB, whatever its size).
    fn encoded(path: &Path, size: usize, bands: &str, value: &str, format: &str, option: &str) {
        let tif = path.with_extension("tif");
        let size = size.to_string();
        let created = std::process::Command::new("gdal_create")
            .args([
                "-q", "-of", "GTiff", "-outsize", &size, &size, "-bands", bands,
            ])
            .args([
                "-ot",
                "Byte",
                "-burn",
                value,
                "-co",
                "TILED=YES",
                "-co",
                "SPARSE_OK=TRUE",
            ])
            .arg(&tif)
            .status()
            .unwrap();
        assert!(created.success());
        let encoded = std::process::Command::new("gdal_translate")
            .args(["-q", "-of", format, "-co", option])
            .arg(&tif)
            .arg(path)
            .status()
            .unwrap();
        assert!(encoded.success());
        std::fs::remove_file(tif).unwrap();
    }

    /// A lossless WebP of `size`² x 3 zeros at `path`.
    fn webp(path: &Path, size: usize) {
        encoded(path, size, "3", "0", "WEBP", "LOSSLESS=TRUE");
    }

    /// Regression (attack round 9, R9-2): a 10 KB lossless WebP of 16383² reports 16383 x 1
    /// blocks, so nothing was reserved, while GDAL's WEBP driver decodes the whole image at
    /// the first cell read (~930 MB per read-only call). Its whole image, every band, is the
    /// block now; a small WebP still takes nothing from the budget and reads.
    #[test]
    fn r9_2_a_webp_reserves_its_whole_image() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.webp");
        webp(&big, 4096);
        assert!(std::fs::metadata(&big).unwrap().len() < 20_000);
        let dataset = Dataset::open(&big).unwrap();
        assert_eq!(dataset.rasterband(1).unwrap().block_size(), (4096, 1));
        let estimate = block_bytes(&big, &dataset, &[1], Reach::Full).unwrap();
        assert_eq!(estimate.bytes, 4096 * 4096 * 3);
        assert!(estimate.whole_image);
        assert_eq!(estimate.largest.map(|l| (l.2, l.3)), Some((4096, 4096)));
        let small = dir.path().join("small.webp");
        webp(&small, 64);
        let dataset = Dataset::open(&small).unwrap();
        let estimate = block_bytes(&small, &dataset, &[], Reach::Any).unwrap();
        assert_eq!(estimate.bytes, 64 * 64 * 3);
        assert!(estimate.bytes <= UNRESERVED_BYTES);
        let _reserved = reserve("test", &small, &dataset, &[], Reach::Full).unwrap();
        let cells = dataset
            .rasterband(1)
            .unwrap()
            .read_as::<u8>((0, 0), (64, 64), (64, 64), None)
            .unwrap();
        assert!(cells.data().iter().all(|v| *v == 0));
    }

    /// A `size`² grey JPEG at `path`, progressive or baseline.
    fn jpeg(path: &Path, size: usize, progressive: bool) {
        let option = if progressive {
            "PROGRESSIVE=ON"
        } else {
            "PROGRESSIVE=OFF"
        };
        encoded(path, size, "1", "7", "JPEG", option);
    }

    /// Regression (attack round 13, R13-14): a progressive JPEG reports one-line blocks, but
    /// libjpeg buffers every coefficient of the image (2 bytes a sample) before the first
    /// line; it reserves its whole image now. The baseline twin decodes by lines and reserves
    /// a line.
    #[test]
    fn r13_14_a_progressive_jpeg_reserves_its_coefficients() {
        let dir = tempfile::tempdir().unwrap();
        let progressive = dir.path().join("p.jpg");
        jpeg(&progressive, 2048, true);
        assert!(jpeg_buffers_whole_image(&progressive));
        let dataset = Dataset::open(&progressive).unwrap();
        assert_eq!(dataset.rasterband(1).unwrap().block_size(), (2048, 1));
        let estimate = block_bytes(&progressive, &dataset, &[1], Reach::Full).unwrap();
        assert_eq!(estimate.bytes, 2048 * 2048 * 2);
        assert!(estimate.whole_image);
        let baseline = dir.path().join("b.jpg");
        jpeg(&baseline, 2048, false);
        assert!(!jpeg_buffers_whole_image(&baseline));
        let dataset = Dataset::open(&baseline).unwrap();
        let estimate = block_bytes(&baseline, &dataset, &[1], Reach::Full).unwrap();
        assert_eq!(estimate.bytes, 2048);
        assert!(!estimate.whole_image);
    }

    /// Regression (attack round 14, R14-4): GDAL's JPEG driver inflates a mask appended to the
    /// file whole (one bit a cell) at the first mask read, behind one-line mask blocks; the
    /// bitmask is reserved now. The twin without a mask reserves its line (above).
    #[test]
    fn r14_4_a_jpeg_mask_reserves_its_bitmask() {
        let dir = tempfile::tempdir().unwrap();
        let tif = dir.path().join("m.tif");
        let created = std::process::Command::new("gdal_create")
            .args([
                "-q", "-of", "GTiff", "-outsize", "2048", "2048", "-bands", "1",
            ])
            .args(["-ot", "Byte", "-burn", "7"])
            .arg(&tif)
            .status()
            .unwrap();
        assert!(created.success());
        let jpg = dir.path().join("m.jpg");
        let encoded = std::process::Command::new("gdal_translate")
            .args(["-q", "-of", "JPEG", "-mask", "1"])
            .arg(&tif)
            .arg(&jpg)
            .status()
            .unwrap();
        assert!(encoded.success());
        let dataset = Dataset::open(&jpg).unwrap();
        assert!(dataset
            .rasterband(1)
            .unwrap()
            .mask_flags()
            .unwrap()
            .is_per_dataset());
        let estimate = block_bytes(&jpg, &dataset, &[1], Reach::Full).unwrap();
        assert!(estimate.bytes >= 2048 * 2048 / 8, "{}", estimate.bytes);
        assert!(estimate.whole_image);
    }
}
