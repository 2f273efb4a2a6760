//! Independent references: the `gdalwarp` command line, read back with the gdal crate.

use anyhow::{bail, Result};
use gdal::Dataset;
use std::path::Path;

/// Run `gdalwarp` with `args` from `input` to `output`.
pub fn gdalwarp(args: &[&str], input: &Path, output: &Path) -> Result<()> {
    let status = std::process::Command::new("gdalwarp")
        .arg("-q")
        .args(args)
        .arg(input)
        .arg(output)
        .status()?;
    if !status.success() {
        bail!("gdalwarp {args:?} failed: {status}");
    }
    Ok(())
}

/// Assert two rasters have the same size, georeferencing, CRS and pixels (every band).
pub fn assert_pixel_identical(actual: &Path, expected: &Path) -> Result<()> {
    let a = Dataset::open(actual)?;
    let b = Dataset::open(expected)?;
    assert_eq!(a.raster_size(), b.raster_size(), "size");
    assert_eq!(a.raster_count(), b.raster_count(), "band count");
    assert_eq!(a.geo_transform()?, b.geo_transform()?, "geotransform");
    assert_eq!(
        a.spatial_ref()?.to_wkt()?,
        b.spatial_ref()?.to_wkt()?,
        "CRS"
    );
    let (w, h) = a.raster_size();
    for index in 1..=a.raster_count() {
        let ba = a.rasterband(index)?;
        let bb = b.rasterband(index)?;
        assert_eq!(ba.band_type(), bb.band_type(), "band {index} type");
        assert_eq!(
            ba.no_data_value(),
            bb.no_data_value(),
            "band {index} nodata"
        );
        let pa = ba.read_as::<f64>((0, 0), (w, h), (w, h), None)?;
        let pb = bb.read_as::<f64>((0, 0), (w, h), (w, h), None)?;
        let differing = pa
            .data()
            .iter()
            .zip(pb.data())
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        assert_eq!(differing, 0, "band {index}: {differing} pixels differ");
    }
    Ok(())
}
