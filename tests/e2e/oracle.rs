//! Independent references: GDAL's command-line programs, read back with the gdal crate.

use anyhow::{bail, Result};
use gdal::vector::LayerAccess;
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

/// Run the command lines a tool reported, with every occurrence of `from` replaced by `to`,
/// as separate processes (the real CLI programs).
pub fn replay(commands: &serde_json::Value, from: &Path, to: &Path) -> Result<()> {
    let from = from.display().to_string();
    let to = to.display().to_string();
    let Some(commands) = commands.as_array() else {
        bail!("no commands reported");
    };
    for command in commands {
        let argv: Vec<String> = command
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str())
                    .map(|s| if s == from { to.clone() } else { s.to_string() })
                    .collect()
            })
            .unwrap_or_default();
        let Some((program, args)) = argv.split_first() else {
            bail!("empty command");
        };
        let output = std::process::Command::new(program).args(args).output()?;
        if !output.status.success() {
            bail!(
                "{argv:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    Ok(())
}

/// Assert two rasters have the same size, georeferencing, CRS and pixels (every band), and
/// the same overviews with the same pixels.
pub fn assert_pixel_identical(actual: &Path, expected: &Path) -> Result<()> {
    let a = Dataset::open(actual)?;
    let b = Dataset::open(expected)?;
    assert_eq!(a.raster_size(), b.raster_size(), "size");
    assert_eq!(a.raster_count(), b.raster_count(), "band count");
    assert_eq!(a.geo_transform()?, b.geo_transform()?, "geotransform");
    assert_eq!(
        a.spatial_ref().and_then(|s| s.to_wkt()).ok(),
        b.spatial_ref().and_then(|s| s.to_wkt()).ok(),
        "CRS"
    );
    for index in 1..=a.raster_count() {
        let ba = a.rasterband(index)?;
        let bb = b.rasterband(index)?;
        assert_eq!(ba.band_type(), bb.band_type(), "band {index} type");
        assert_eq!(
            ba.no_data_value().map(f64::to_bits),
            bb.no_data_value().map(f64::to_bits),
            "band {index} nodata (NaN equals NaN here)"
        );
        assert_same_pixels(&ba, &bb, &format!("band {index}"))?;
        let count = ba.overview_count()?;
        assert_eq!(count, bb.overview_count()?, "band {index} overview count");
        for o in 0..count as usize {
            let oa = ba.overview(o)?;
            let ob = bb.overview(o)?;
            assert_eq!(oa.size(), ob.size(), "band {index} overview {o} size");
            assert_same_pixels(&oa, &ob, &format!("band {index} overview {o}"))?;
        }
    }
    Ok(())
}

fn assert_same_pixels(
    a: &gdal::raster::RasterBand,
    b: &gdal::raster::RasterBand,
    what: &str,
) -> Result<()> {
    let (w, h) = a.size();
    let pa = a.read_as::<f64>((0, 0), (w, h), (w, h), None)?;
    let pb = b.read_as::<f64>((0, 0), (w, h), (w, h), None)?;
    let differing = pa
        .data()
        .iter()
        .zip(pb.data())
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count();
    assert_eq!(differing, 0, "{what}: {differing} pixels differ");
    Ok(())
}

/// Every feature of every layer as (layer, attributes, geometry WKT), in order.
pub fn features(path: &Path) -> Result<Vec<(String, Vec<String>, String)>> {
    let dataset = Dataset::open(path)?;
    let mut out = Vec::new();
    for mut layer in dataset.layers() {
        let name = layer.name();
        for feature in layer.features() {
            let fields = feature
                .fields()
                .map(|(n, v)| format!("{n}={v:?}"))
                .collect();
            let wkt = feature
                .geometry()
                .map(|g| g.wkt())
                .transpose()?
                .unwrap_or_default();
            out.push((name.clone(), fields, wkt));
        }
    }
    Ok(out)
}
