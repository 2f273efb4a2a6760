//! Inputs GDAL inflates by itself before a driver reads them, measured and inflated before the
//! open: a gzip file (GDAL 3.6.2, measured: the GML driver opens any `*.gz` name, in any case,
//! through `/vsigzip/`, and so does the XYZ raster driver; no other allowed driver does, and a
//! gzip stream under another name is not inflated) is inflated here as a stream through the
//! same `/vsigzip/` reader, counted against [`DEFAULT_MAX_INFLATED_BYTES`] and refused above
//! it, and the inflated text is handed to the same CRS scan as an uncompressed file.
//!
//! Regression, issue 21 attack round 7: R7-7, a `.gml.gz` whose `srsName` named an outside
//! `+nadgrids=` grid was scanned as its compressed bytes, so PROJ opened the grid (a FIFO there
//! blocked read workers); R7-8, a 612 KB `.gml.gz` inflating to 600 MiB made `vector_info` peak
//! at 1.3 GB. Zipped containers are measured elsewhere: spreadsheets and KMZ by
//! [`crate::gdal::vector::table::check_budget`], zipped shapefiles refused (`policy`).

use crate::gdal::{ErrorCapture, GdalError};
use std::io::Write;
use std::path::Path;

/// Operator override of [`DEFAULT_MAX_INFLATED_BYTES`].
pub const INFLATED_VARIABLE: &str = "GDAL_MCP_MAX_INFLATED_BYTES";

/// Bytes a gzip input may inflate to: the size of the largest uncompressed text file the CRS
/// scan reads whole (`GDAL_MCP_MAX_SCANNED_TEXT_BYTES`), and of the table budget.
pub const DEFAULT_MAX_INFLATED_BYTES: u64 = 256 << 20;

/// Whether `file` starts with the gzip magic (`1f 8b`), whatever its name.
pub fn is_gzip(file: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 2];
    super::open_regular(file)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == [0x1f, 0x8b]
}

/// The inflated content of a gzip `file` (opened for the caller's `input`), in a private
/// temporary file, or `None` when `file` is not gzip; refused when it inflates to more than
/// the budget, or GDAL cannot inflate it.
pub fn inflate(input: &Path, file: &Path) -> Result<Option<tempfile::NamedTempFile>, GdalError> {
    if !is_gzip(file) {
        return Ok(None);
    }
    let budget = crate::budget::setting(INFLATED_VARIABLE, DEFAULT_MAX_INFLATED_BYTES);
    let failed = |message: String| GdalError::Failed {
        operation: format!("inflating {}", input.display()),
        message,
    };
    let io = |source| GdalError::Io {
        operation: format!("inflating {} into a temporary file", input.display()),
        source,
    };
    let pinned = super::pinned(file)?;
    let c_path = std::ffi::CString::new(format!("/vsigzip/{}", pinned.display()))
        .map_err(|e| failed(e.to_string()))?;
    let mode = std::ffi::CString::new("rb").map_err(|e| failed(e.to_string()))?;
    let mut out = tempfile::Builder::new()
        .prefix("gdal-mcp-inflated-")
        .tempfile()
        .map_err(io)?;
    let _capture = ErrorCapture::start();
    // SAFETY: the path and mode are valid C strings; the handle is closed below, once.
    let fp = unsafe { gdal_sys::VSIFOpenL(c_path.as_ptr(), mode.as_ptr()) };
    if fp.is_null() {
        return Err(failed("GDAL cannot open it as gzip".to_string()));
    }
    let mut buffer = vec![0u8; 1 << 16];
    let mut total: u64 = 0;
    let mut written = Ok(());
    loop {
        // SAFETY: `buffer` holds `buffer.len()` bytes; `fp` is open.
        let n = unsafe { gdal_sys::VSIFReadL(buffer.as_mut_ptr().cast(), 1, buffer.len(), fp) };
        if n == 0 {
            break;
        }
        total = total.saturating_add(n as u64);
        if total > budget {
            break;
        }
        if let Err(e) = out.write_all(&buffer[..n.min(buffer.len())]) {
            written = Err(e);
            break;
        }
    }
    // SAFETY: `fp` was opened above and is closed once.
    unsafe { gdal_sys::VSIFCloseL(fp) };
    written.map_err(io)?;
    if total > budget {
        return Err(GdalError::Arguments(format!(
            "{}: a gzip file that inflates to more than {budget} bytes \
             ({INFLATED_VARIABLE}); GDAL would inflate it whole while reading. Unpack it and \
             convert it to a GeoPackage, or raise the budget",
            input.display()
        )));
    }
    out.flush().map_err(io)?;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(path: &Path, text: &[u8]) {
        // The host's own GDAL writes the gzip stream (no compression crate in the host).
        let c_path = std::ffi::CString::new(format!("/vsigzip/{}", path.display())).unwrap();
        let mode = std::ffi::CString::new("wb").unwrap();
        unsafe {
            let fp = gdal_sys::VSIFOpenL(c_path.as_ptr(), mode.as_ptr());
            assert!(!fp.is_null());
            assert_eq!(
                gdal_sys::VSIFWriteL(text.as_ptr().cast(), 1, text.len(), fp),
                text.len()
            );
            gdal_sys::VSIFCloseL(fp);
        }
    }

    /// R7-8: the inflated size is measured and refused above the budget, naming it; the
    /// clean twin inflates to its text.
    #[test]
    fn r7_8_gzip_is_inflated_under_a_budget() {
        crate::gdal::init();
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("a.gml.gz");
        gzip(&small, b"<a>clean</a>");
        assert!(is_gzip(&small));
        let inflated = inflate(&small, &small).unwrap().unwrap();
        assert_eq!(std::fs::read(inflated.path()).unwrap(), b"<a>clean</a>");
        let plain = dir.path().join("b.gml");
        std::fs::write(&plain, b"<a/>").unwrap();
        assert!(inflate(&plain, &plain).unwrap().is_none());
        let big = dir.path().join("big.GZ");
        gzip(&big, &vec![b'A'; (DEFAULT_MAX_INFLATED_BYTES + 1) as usize]);
        assert!(std::fs::metadata(&big).unwrap().len() < 1 << 20);
        let refused = inflate(&big, &big).unwrap_err().to_string();
        assert!(refused.contains(INFLATED_VARIABLE), "{refused}");
    }
}
