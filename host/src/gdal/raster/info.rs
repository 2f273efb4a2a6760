//! `gdalinfo -json`, in process (GDALInfo).

use crate::gdal::{CArgv, ErrorCapture, GdalError};
use gdal::Dataset;
use serde_json::Value;
use std::ffi::CStr;

/// How many times the cell budget `raster_info stats` may stream (it holds a block at a time).
const STREAMED_STATS_FACTOR: u64 = 10;

/// GDALInfo's JSON report of an open raster dataset. `stats` adds exact statistics
/// (`-stats`), which reads every pixel.
pub fn gdalinfo_json(dataset: &Dataset, stats: bool) -> Result<Value, GdalError> {
    let capture = ErrorCapture::start();
    let mut args = vec!["-json".to_string()];
    if stats {
        args.push("-stats".to_string());
    }
    let mut argv = CArgv::new(&args)?;
    // SAFETY: argv is NULL-terminated and outlives the call; the options are freed below.
    let options = unsafe { gdal_sys::GDALInfoOptionsNew(argv.as_mut_ptr(), std::ptr::null_mut()) };
    if options.is_null() {
        return Err(GdalError::Arguments(
            capture.failure_text("bad gdalinfo options"),
        ));
    }
    // GDALInfo hands the dataset's CRS to PROJ again (its WGS 84 extent builds a
    // transformation), after the open: without statistics it is under the open deadline like
    // an open (regression, issue 21, attack round 5, F1: a grid named by an ENVI header that
    // was a FIFO blocked here, past the deadline, on the read pool's workers). With
    // statistics every pixel is read, which may rightly take longer.
    let open =
        (!stats).then(|| crate::gdal::policy::deadline::opening("the dataset's report (its CRS)"));
    // SAFETY: the dataset handle is valid while `dataset` lives; the string GDAL returns is
    // ours to free with VSIFree after copying it.
    let report = unsafe {
        let raw = gdal_sys::GDALInfo(dataset.c_dataset(), options);
        gdal_sys::GDALInfoOptionsFree(options);
        if raw.is_null() {
            None
        } else {
            let text = crate::gdal::policy::unpin_text(&CStr::from_ptr(raw).to_string_lossy());
            gdal_sys::VSIFree(raw.cast());
            Some(text)
        }
    };
    if let Some(open) = open {
        open.done()?;
    }
    let report = report.ok_or_else(|| GdalError::Failed {
        operation: "gdalinfo".to_string(),
        message: capture.failure_text("GDALInfo returned nothing"),
    })?;
    serde_json::from_str(&report).map_err(|e| {
        // GDAL 3.6 writes a NaN or an infinity as a bare `nan` or `inf`, which JSON has no
        // word for: name the line it is on (attack round 19, R19-C5).
        let line = report
            .lines()
            .nth(e.line().saturating_sub(1))
            .map(str::trim)
            .unwrap_or_default()
            .chars()
            .take(120)
            .collect::<String>();
        GdalError::Failed {
            operation: "gdalinfo".to_string(),
            message: format!(
                "GDAL's report of this raster holds a value JSON cannot carry (a NaN or an \
                 infinity among its declared numbers or statistics?), at line {}: `{line}` \
                 ({e})",
                e.line()
            ),
        }
    })
}

/// `gdalinfo -json -stats` of the raster at `path`, computed with GDAL's auxiliary files
/// (PAM) switched off on this thread, so that computing statistics writes nothing beside the
/// input: `raster_info` is read-only (and an `.aux.xml` link could otherwise be written
/// through).
pub fn gdalinfo_json_with_stats(path: &std::path::Path) -> Result<Value, GdalError> {
    let _ = gdal::config::set_thread_local_config_option("GDAL_PAM_ENABLED", "NO");
    let report = crate::gdal::facts::open(path).and_then(|dataset| {
        // GDAL 3.6 writes the statistics it computes into a VRT document itself when the
        // dataset closes, PAM or not, even when opened read-only (regression, issue 21 attack
        // round 4, B4: `raster_info stats: true` rewrote an input VRT).
        // GDAL 3.6's EHdr driver writes `<stem>.stx` whenever it computes exact statistics,
        // whatever the access mode: beside the input, through a link made during the call or
        // a planted hard link to the store's ledger (attack round 22, R22-A8, R22-A9).
        let driver = dataset.driver().short_name();
        if driver == "VRT" || driver == "EHdr" {
            return Err(GdalError::Arguments(format!(
                "stats: GDAL writes the statistics it computes into {} itself, so raster_info \
                 cannot compute them on {} without writing beside it; use raster_stats, which \
                 reads the same cells and writes nothing",
                if driver == "VRT" {
                    "a VRT file"
                } else {
                    "an EHdr raster's .stx sidecar"
                },
                path.display()
            )));
        }
        // GDAL 3.6's statistics honour a nodata value but not a per-dataset mask or an alpha
        // band: a band masked everywhere reported mean 49.5 and 100 % valid where
        // `raster_stats` counts 0 valid cells (attack round 14, R14-7 / R14-B22).
        for index in 1..=dataset.raster_count() {
            // GDAL 3.6's statistics of a complex band are those of its real parts (measured:
            // cells 3+4i and 6+8i gave minimum 3, maximum 6, mean 4.5; R14-B15).
            let complex = dataset
                .rasterband(index)
                .ok()
                .and_then(|band| crate::gdal::facts::complex_band_refusal(&band));
            if let Some(refusal) = complex {
                return Err(GdalError::Arguments(format!(
                    "stats: band {index} of {}: {refusal}; GDAL's statistics would be those of \
                     the real parts. raster_info without stats reports the band",
                    path.display()
                )));
            }
            // GDAL's statistics are of the stored values: a band declaring raw x 0.5 + 100
            // reported minimum 1, mean 8.5 where its values are 100.5 and 104.25 (attack
            // round 15, R15-B7).
            let packed = dataset.rasterband(index).ok().and_then(|band| {
                let (scale, offset) = (band.scale().unwrap_or(1.0), band.offset().unwrap_or(0.0));
                (scale != 1.0 || offset != 0.0).then_some((scale, offset))
            });
            if let Some((scale, offset)) = packed {
                return Err(GdalError::Arguments(format!(
                    "stats: band {index} of {} declares its values as the stored ones x {scale} \
                     + {offset}, and GDAL's statistics are of the stored values; use \
                     raster_stats, which reports the values, or raster_info without stats",
                    path.display()
                )));
            }
            let masked = dataset
                .rasterband(index)
                .ok()
                .and_then(|band| crate::gdal::facts::mask::mask_source(&band));
            if let Some(mask) = masked {
                return Err(GdalError::Arguments(format!(
                    "stats: band {index} of {} has {}, which GDAL's statistics ignore (they \
                     would count the cells it marks invalid); use raster_stats, which honours \
                     it, or raster_info without stats",
                    path.display(),
                    mask.describe()
                )));
            }
        }
        // Exact statistics read every cell, streamed block by block: ten times the cell
        // budget `raster_stats` holds whole (attack round 19, R19-A6: 1.68e11 cells were
        // read for a 96 KB file whose tiles repeat).
        let (width, height) = dataset.raster_size();
        let cells = (width as u64)
            .saturating_mul(height as u64)
            .saturating_mul(dataset.raster_count().max(1) as u64);
        let most = crate::gdal::policy::max_cells().saturating_mul(STREAMED_STATS_FACTOR);
        if cells > most {
            return Err(GdalError::Arguments(format!(
                "stats: {width} x {height} x {} = {cells} cells exceeds the {most} cells \
                 raster_info's statistics read per call ({STREAMED_STATS_FACTOR} times \
                 GDAL_MCP_MAX_CELLS); use raster_stats with a window, or a coarser copy",
                dataset.raster_count()
            )));
        }
        // GDAL reads every band through its whole blocks (issue 21 attack round 4, B3).
        let _blocks = crate::gdal::policy::blocks::reserve(
            "raster_info stats",
            path,
            &dataset,
            &[],
            crate::gdal::policy::blocks::Reach::Full,
        )?;
        let report = gdalinfo_json(&dataset, true)?;
        refuse_sentinel_extremes(path, &dataset, &report)?;
        Ok(report)
    });
    let _ = gdal::config::clear_thread_local_config_option("GDAL_PAM_ENABLED");
    report
}

/// A band whose minimum or maximum is a conventional no-data code it does not declare
/// ([`crate::gdal::facts::KNOWN_SENTINELS`]): GDAL's statistics counted those cells as data
/// (minimum -9999, mean -1243.312 where the data's is 7.5; attack round 15, R15-B7), which
/// `raster_stats` refuses as a data conflict. Refused the same way here, naming the way out.
fn refuse_sentinel_extremes(
    path: &std::path::Path,
    dataset: &Dataset,
    report: &Value,
) -> Result<(), GdalError> {
    let bands = report["bands"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, band) in bands.iter().enumerate() {
        let declared = dataset
            .rasterband(index + 1)
            .ok()
            .and_then(|b| crate::gdal::facts::nodata::band_nodata(&b));
        for extreme in ["minimum", "maximum"] {
            let Some(value) = band[extreme].as_f64() else {
                continue;
            };
            if crate::gdal::facts::KNOWN_SENTINELS.contains(&value) && declared != Some(value) {
                return Err(GdalError::Conflict {
                    message: format!(
                        "stats: band {} of {} has {extreme} {value}, a conventional no-data \
                         code it does not declare, so GDAL's statistics count those cells as \
                         data; use raster_stats with \"nodata\": {value} to leave them out \
                         (or declare it with raster_convert `nodata`)",
                        index + 1,
                        path.display()
                    ),
                    parameter: "nodata".to_string(),
                    candidates: serde_json::json!([
                        {"nodata": value, "tool": "raster_stats"},
                        {"nodata": null, "tool": "raster_stats"}
                    ]),
                });
            }
        }
    }
    Ok(())
}
