//! Every host reader of cells against a raster whose invalid cells are marked by a GDAL
//! mask (an internal per-dataset mask, an alpha band), and the twins: no mask, nodata only.
//! (They drive the runners, which `facts` may not name: `gdal::tests::the_gdal_rooms_depend_downwards`.)

use crate::aggregation::{NodataPolicy, Semantics, Stat};
use crate::gdal::raster::{calc, raster_io, sample, stats, zonal};
use gdal::raster::Buffer;
use gdal::DriverManager;
use std::path::Path;

/// How the 3 western columns of a 10 × 10 Byte raster (value 100, 0 in those columns) are
/// marked invalid (GDAL reads an alpha band as a mask only in Byte or UInt16).
#[derive(Clone, Copy, PartialEq)]
enum Marking {
    /// An internal per-dataset mask (`gdal_translate -mask`).
    PerDataset,
    /// Byte RGBA, alpha 0 there.
    Alpha,
    /// Nothing: the zeros are data.
    None,
    /// Nodata 0 declared (the mask GDAL derives from it).
    Nodata,
}

fn raster(path: &Path, marking: Marking) {
    let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
    let bands = if marking == Marking::Alpha { 4 } else { 1 };
    let mut options = gdal::raster::RasterCreationOptions::new();
    if marking == Marking::Alpha {
        options.add_name_value("ALPHA", "YES").unwrap();
        options.add_name_value("PHOTOMETRIC", "RGB").unwrap();
    }
    let mut ds = driver
        .create_with_band_type_with_options::<u8, _>(path, 10, 10, bands, &options)
        .unwrap();
    ds.set_geo_transform(&[500_000.0, 10.0, 0.0, 6_000_000.0, 0.0, -10.0])
        .unwrap();
    ds.set_projection(
        &gdal::spatial_ref::SpatialRef::from_epsg(32633)
            .unwrap()
            .to_wkt()
            .unwrap(),
    )
    .unwrap();
    let values: Vec<u8> = (0..100).map(|i| if i % 10 < 3 { 0 } else { 100 }).collect();
    let valid: Vec<u8> = (0..100).map(|i| if i % 10 < 3 { 0 } else { 255 }).collect();
    for index in 1..=bands.min(3) {
        let mut band = ds.rasterband(index).unwrap();
        band.write((0, 0), (10, 10), &mut Buffer::new((10, 10), values.clone()))
            .unwrap();
        if marking == Marking::Nodata {
            band.set_no_data_value(Some(0.0)).unwrap();
        }
    }
    match marking {
        Marking::Alpha => {
            let mut alpha = ds.rasterband(4).unwrap();
            alpha
                .write((0, 0), (10, 10), &mut Buffer::new((10, 10), valid))
                .unwrap();
        }
        Marking::PerDataset => {
            let mut band = ds.rasterband(1).unwrap();
            // Internal, as `gdal_translate -mask` and COGs write it (the host opens no
            // `.msk` sidecar).
            gdal::config::set_thread_local_config_option("GDAL_TIFF_INTERNAL_MASK", "YES").unwrap();
            band.create_mask_band(true).unwrap();
            gdal::config::clear_thread_local_config_option("GDAL_TIFF_INTERNAL_MASK").unwrap();
            let mut mask = band.open_mask_band().unwrap();
            mask.write((0, 0), (10, 10), &mut Buffer::new((10, 10), valid))
                .unwrap();
        }
        Marking::None | Marking::Nodata => {}
    }
}

/// A GeoJSON of one zone over the whole raster.
fn zones(path: &Path) {
    std::fs::write(
        path,
        r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32633"}},"features":[{"type":"Feature","properties":{"id":1},"geometry":{"type":"Polygon","coordinates":[[[499990,5999890],[500110,5999890],[500110,6000010],[499990,6000010],[499990,5999890]]]}}]}"#,
    )
    .unwrap();
}

/// What every reader answers: (stats valid, stats mean, masked_count, zonal count, zonal
/// mean, sample value at a western cell, calc output cell there, calc note mentions a
/// mask, hydrology read of the western cell is nodata).
#[allow(clippy::type_complexity)]
fn readers(
    dir: &Path,
    marking: Marking,
) -> (u64, f64, u64, f64, f64, Option<f64>, f64, bool, bool) {
    let input = dir.join("in.tif");
    raster(&input, marking);
    let request = stats::StatsRequest {
        bands: vec![1],
        percentiles: Vec::new(),
        histogram_bins: 0,
        sample: false,
        nodata: None,
    };
    let (bands, _) = stats::compute(&input, &request).unwrap();
    let band = &bands[0];
    assert_eq!(band.mask.is_some(), band.masked_count > 0);

    let zones_path = dir.join("zones.geojson");
    zones(&zones_path);
    let zonal = zonal::ZonalRequest {
        raster: input.clone(),
        zones: zones_path,
        layer: None,
        id_field: None,
        band: 1,
        stats: vec![Stat::Count, Stat::Mean],
        semantics: Semantics::CellCentre,
        policy: NodataPolicy::Ignore,
        reproject: false,
        operation: None,
    };
    let rows = zonal.run().unwrap();
    let count = rows[0].stats[&Stat::Count].unwrap();
    let mean = rows[0].stats[&Stat::Mean].unwrap();
    assert_eq!(zonal.mask_note().is_some(), band.masked_count > 0);

    let sampled = sample::sample(
        &input,
        &sample::SampleRequest {
            points: sample::Points::Coordinates {
                coordinates: vec![[500_005.0, 5_999_995.0]],
                crs: None,
            },
            bands: vec![1],
        },
    )
    .unwrap();
    let value = sampled.points[0].values[0].value;
    assert_eq!(
        sampled.warnings.iter().any(|w| w.contains("mask")),
        band.masked_count > 0,
        "{:?}",
        sampled.warnings
    );

    let output = dir.join("calc.tif");
    let calc = calc::run(&calc::CalcRequest {
        inputs: vec![calc::CalcInput {
            name: "a".to_string(),
            path: input.clone(),
            band: 1,
        }],
        expression: "a * 2".to_string(),
        output: output.clone(),
        data_type: "Float32".to_string(),
        nodata: None,
        creation_options: Vec::new(),
        budget: calc::BlockBudget::default(),
        unit: None,
    })
    .unwrap();
    let written = gdal::Dataset::open(&output).unwrap();
    let cell = crate::gdal::facts::read_cells::<f64>(
        &written.rasterband(1).unwrap(),
        (0, 0),
        (1, 1),
        (1, 1),
    )
    .unwrap()
    .data()[0];
    let noted = calc.notes.iter().any(|n| n.contains("mask"));

    let (grid, georef) = raster_io::read_band_f32(&input).unwrap();
    let hydro_nodata = grid.is_nodata_value(grid.data()[0]);
    assert_eq!(georef.mask.is_some(), band.masked_count > 0);
    (
        band.valid_count,
        band.summary.mean.unwrap(),
        band.masked_count,
        count,
        mean,
        value,
        cell,
        noted,
        hydro_nodata,
    )
}

/// Regression (attack round 13, R13-B6 / R13-8): a per-dataset mask and an alpha band were
/// ignored by `raster_stats`, `zonal_stats`, `raster_sample`, `raster_calc` and the DEM
/// reads: mean 70 over 100 cells where the 70 cells the mask marks valid have mean 100.
#[test]
fn r13_b6_masked_cells_are_nodata_in_every_host_reader() {
    for marking in [Marking::PerDataset, Marking::Alpha] {
        let dir = tempfile::tempdir().unwrap();
        let (valid, mean, masked, count, zmean, value, cell, noted, hydro) =
            readers(dir.path(), marking);
        assert_eq!((valid, masked), (70, 30));
        assert!((mean - 100.0).abs() < 1e-9, "{mean}");
        assert_eq!((count, zmean), (70.0, 100.0));
        assert_eq!(value, None);
        assert!(cell.is_nan(), "the calc output's masked cell is {cell}");
        assert!(noted);
        assert!(hydro);
    }
}

/// The twins of R13-B6: no mask (the zeros are data, as before) and nodata only (the
/// nodata is what leaves them out, no mask is reported).
#[test]
fn r13_b6_twin_no_mask_and_nodata_only_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (valid, mean, masked, count, zmean, value, cell, noted, hydro) =
        readers(dir.path(), Marking::None);
    assert_eq!((valid, masked), (100, 0));
    assert!((mean - 70.0).abs() < 1e-9, "{mean}");
    assert_eq!(count, 100.0);
    assert!((zmean - 70.0).abs() < 1e-9, "{zmean}");
    assert_eq!(value, Some(0.0));
    assert_eq!(cell, 0.0);
    assert!(!noted);
    assert!(!hydro);

    let dir = tempfile::tempdir().unwrap();
    let (valid, mean, masked, count, zmean, value, _, noted, hydro) =
        readers(dir.path(), Marking::Nodata);
    assert_eq!((valid, masked), (70, 0));
    assert!((mean - 100.0).abs() < 1e-9, "{mean}");
    assert_eq!((count, zmean), (70.0, 100.0));
    assert_eq!(value, None);
    assert!(!noted);
    assert!(hydro);
}

/// Regression (attack round 14, R14-B4): a copy to netCDF, SAGA, RST, XYZ or GPKG of a raster
/// with a mask wrote the masked cells as data under a `lossless_write` receipt; it is refused
/// before the gate now. The twins: the same raster to GTiff, and a raster without a mask to
/// netCDF, pass.
#[test]
fn r14_b4_a_mask_a_format_cannot_keep_is_refused() {
    use crate::gdal::facts::mask::refuse_mask_lost;
    let dir = tempfile::tempdir().unwrap();
    let masked = dir.path().join("masked.tif");
    raster(&masked, Marking::PerDataset);
    let plain = dir.path().join("plain.tif");
    raster(&plain, Marking::None);
    for driver in ["netCDF", "SAGA", "RST", "XYZ", "GPKG"] {
        let why = refuse_mask_lost("input", &masked, driver)
            .unwrap_err()
            .to_string();
        assert!(why.contains("cannot keep"), "{driver}: {why}");
    }
    assert!(refuse_mask_lost("input", &masked, "GTiff").is_ok());
    assert!(refuse_mask_lost("input", &plain, "netCDF").is_ok());
}

/// Regression (attack round 14, R14-B4, its `raster_terrain` half): gdaldem reads a band's
/// nodata value, not its GDAL mask, so the masked zeros beside a flat plateau of 100 were
/// terrain (80 cells over 45° in the round's repro). The DEM is copied with its masked cells
/// as nodata now: every slope computed is the plateau's 0°. The twin without a mask still
/// sees the step.
#[test]
fn r14_b4_gdaldem_sees_the_mask() {
    use crate::gdal::raster::dem::DemRequest;
    let dir = tempfile::tempdir().unwrap();
    let slope_of = |marking: Marking, name: &str| -> Vec<f32> {
        let input = dir.path().join(format!("{name}.tif"));
        raster(&input, marking);
        let output = dir.path().join(format!("{name}_slope.tif"));
        DemRequest {
            input,
            output: output.clone(),
            processing: "slope".to_string(),
            args: vec!["-of".to_string(), "GTiff".to_string()],
        }
        .run()
        .unwrap();
        let dataset = gdal::Dataset::open(&output).unwrap();
        let band = dataset.rasterband(1).unwrap();
        let nodata = band.no_data_value().unwrap_or(f64::NAN) as f32;
        band.read_as::<f32>((0, 0), (10, 10), (10, 10), None)
            .unwrap()
            .into_shape_and_vec()
            .1
            .into_iter()
            .filter(|v| *v != nodata && !v.is_nan())
            .collect()
    };
    let masked = slope_of(Marking::PerDataset, "masked");
    assert!(!masked.is_empty());
    assert!(masked.iter().all(|v| *v < 1.0), "{masked:?}");
    let plain = slope_of(Marking::None, "plain");
    assert!(plain.iter().any(|v| *v > 45.0), "{plain:?}");
}
