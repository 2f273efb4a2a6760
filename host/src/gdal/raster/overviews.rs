//! Overviews (reduced-resolution copies inside a file or in a `.ovr` sidecar) with
//! `GDALBuildOverviews`, the function behind `gdaladdo`.
//!
//! Two ways in: [`build_into`] adds overviews to a file this server just staged (a new output),
//! and [`build_external`] writes `<input>.ovr` beside an input without touching the input's
//! bytes. The sidecar is built in a staging folder next to the input (through a symlink to
//! it) and moved into place only when GDAL succeeded, so an existing `.ovr` is never left
//! half-rebuilt.

use crate::gdal::output::Staging;
use crate::gdal::{cstring, ErrorCapture, GdalError};
use gdal::{Dataset, DatasetOptions, GdalOpenFlags};
use std::path::{Path, PathBuf};

/// `gdaladdo`'s default: halve until both dimensions fit in this many pixels.
pub const MIN_SIZE: usize = 256;

/// The levels `gdaladdo` picks when none are given: 2, 4, 8... until the overview fits in
/// [`MIN_SIZE`] pixels both ways.
pub fn auto_levels(width: usize, height: usize) -> Vec<u32> {
    let mut levels = Vec::new();
    let mut factor = 2usize;
    while width.div_ceil(factor / 2) > MIN_SIZE || height.div_ceil(factor / 2) > MIN_SIZE {
        levels.push(factor as u32);
        factor *= 2;
        if factor > 1 << 20 {
            break;
        }
    }
    levels
}

/// Check levels: each at least 2 and strictly increasing.
pub fn check_levels(levels: &[u32]) -> Result<(), GdalError> {
    if levels.iter().any(|l| *l < 2) {
        return Err(GdalError::Arguments(
            "levels: every overview level is a reduction factor of at least 2 (e.g. [2, 4, 8])"
                .to_string(),
        ));
    }
    if levels.windows(2).any(|w| w[0] >= w[1]) {
        return Err(GdalError::Arguments(
            "levels: list the factors in increasing order without repeats (e.g. [2, 4, 8])"
                .to_string(),
        ));
    }
    Ok(())
}

fn build(
    dataset: &Dataset,
    path: &Path,
    resampling: &str,
    levels: &[u32],
) -> Result<(), GdalError> {
    // GDALBuildOverviews reads the raster (and each overview it built) through whole blocks.
    let _blocks = crate::gdal::policy::blocks::reserve_program_input(
        "raster_overviews: the raster",
        path,
        dataset,
    )?;
    let capture = ErrorCapture::start();
    let method = cstring(&resampling.to_ascii_uppercase())?;
    let levels: Vec<i32> = levels.iter().map(|l| *l as i32).collect();
    // SAFETY: the dataset handle is valid while `dataset` lives; the level array outlives the
    // call; a band count of 0 with a NULL list means every band.
    let err = unsafe {
        gdal_sys::GDALBuildOverviews(
            dataset.c_dataset(),
            method.as_ptr(),
            levels.len() as i32,
            levels.as_ptr(),
            0,
            std::ptr::null(),
            Some(crate::gdal::progress_callback),
            std::ptr::null_mut(),
        )
    };
    let failure = capture.messages().iter().any(|m| m.class != "warning");
    if err != gdal_sys::CPLErr::CE_None || failure {
        return Err(GdalError::Failed {
            operation: format!("building overviews of {}", path.display()),
            message: capture.failure_text("GDALBuildOverviews failed"),
        });
    }
    Ok(())
}

/// Open a raster through the policy (checks, pinned folder, the open deadline), without
/// `facts::open`'s georeferencing choice: as GDAL itself opens it.
pub(in crate::gdal) fn open(path: &Path, update: bool) -> Result<Dataset, GdalError> {
    let capture = ErrorCapture::start();
    let mut flags = GdalOpenFlags::GDAL_OF_RASTER | GdalOpenFlags::GDAL_OF_VERBOSE_ERROR;
    flags |= if update {
        GdalOpenFlags::GDAL_OF_UPDATE
    } else {
        GdalOpenFlags::GDAL_OF_READONLY
    };
    let options = DatasetOptions {
        open_flags: flags,
        ..Default::default()
    };
    let open = crate::gdal::policy::deadline::opening(path.display().to_string());
    crate::gdal::policy::check_before_open(path)?;
    let gdal_path = crate::gdal::policy::pinned(path)?;
    crate::gdal::policy::deadline::pause_after_checks(path);
    let dataset = Dataset::open_ex(&gdal_path, options).map_err(|e| GdalError::Failed {
        operation: format!("opening {}", path.display()),
        message: capture.failure_text(&e.to_string()),
    })?;
    crate::gdal::policy::confine_opened(path, &dataset)?;
    crate::gdal::policy::check_opened_crs(path, &dataset)?;
    open.done()?;
    Ok(dataset)
}

/// Add overviews inside a staged output (GeoTIFF), before it is moved into place.
pub fn build_into(staged: &Path, resampling: &str, levels: &[u32]) -> Result<(), GdalError> {
    if levels.is_empty() {
        return Ok(());
    }
    let dataset = open(staged, true)?;
    build(&dataset, staged, resampling, levels)?;
    drop(dataset);
    Ok(())
}

/// Build `<input>.ovr` beside `input`; returns the files moved into place.
pub fn build_external(
    input: &Path,
    resampling: &str,
    levels: &[u32],
) -> Result<Vec<PathBuf>, GdalError> {
    let name = input
        .file_name()
        .ok_or_else(|| GdalError::Arguments(format!("{} does not name a file", input.display())))?;
    let mut sidecar_name = name.to_os_string();
    sidecar_name.push(".ovr");
    let sidecar = input.with_file_name(&sidecar_name);
    let staging = Staging::new(&sidecar)?;
    let io = |source| GdalError::Io {
        operation: format!("staging overviews of {}", input.display()),
        source,
    };
    let folder = staging
        .path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let link = folder.join(name);
    std::os::unix::fs::symlink(input, &link).map_err(io)?;
    {
        let dataset = open(&link, false)?;
        build(&dataset, input, resampling, levels)?;
    }
    // Only the sidecar may move into place: the link, and any .aux.xml GDAL wrote for it,
    // stay behind and vanish with the staging folder.
    for entry in std::fs::read_dir(&folder).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path != staging.path() {
            std::fs::remove_file(&path).map_err(io)?;
        }
    }
    staging.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_levels_follow_gdaladdo() {
        assert!(auto_levels(200, 100).is_empty());
        assert_eq!(auto_levels(300, 100), vec![2]);
        assert_eq!(auto_levels(1024, 1024), vec![2, 4]);
        assert_eq!(auto_levels(4000, 4000), vec![2, 4, 8, 16]);
    }

    #[test]
    fn levels_must_increase() {
        assert!(check_levels(&[2, 4, 8]).is_ok());
        assert!(check_levels(&[4, 2]).is_err());
        assert!(check_levels(&[1]).is_err());
    }
}
