//! Every row of the encoding table measured with GDAL: a fixture is written through the driver
//! with the options, read back, and the changed cells counted. The fact must say lossy exactly
//! when a cell changed.

use super::*;
use gdal::raster::{Buffer, ColorEntry, ColorTable, RasterCreationOptions, RgbaEntry};
use gdal::{Dataset, DriverManager};

const SIZE: usize = 64;

/// A gradient with pseudo-random noise, so every codec has detail to lose. Integers stay in
/// `range`; floats get fractions.
fn values(band: usize, range: f64, float: bool) -> Vec<f64> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ (band as u64 * 7919);
    (0..SIZE * SIZE)
        .map(|i| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let noise = (state >> 33) as f64 / f64::from(1u32 << 31);
            let (x, y) = ((i % SIZE) as f64, (i / SIZE) as f64);
            let v = (x * 2.5 + y * 1.5 + noise * 20.0) / (SIZE as f64 * 4.0 + 20.0) * range;
            if float {
                v + 0.123_456_7
            } else {
                v.floor()
            }
        })
        .collect()
}

/// An in-memory raster of `data_type` with `bands` bands of [`values`].
fn source(data_type: &str, bands: usize, palette: bool) -> Dataset {
    let driver = DriverManager::get_driver_by_name("MEM").unwrap();
    let mut ds = match data_type {
        "Byte" => driver.create_with_band_type::<u8, _>("", SIZE, SIZE, bands),
        "UInt16" => driver.create_with_band_type::<u16, _>("", SIZE, SIZE, bands),
        "Int16" => driver.create_with_band_type::<i16, _>("", SIZE, SIZE, bands),
        "Float64" => driver.create_with_band_type::<f64, _>("", SIZE, SIZE, bands),
        _ => driver.create_with_band_type::<f32, _>("", SIZE, SIZE, bands),
    }
    .unwrap();
    ds.set_geo_transform(&[500_000.0, 1.0, 0.0, 4_000_000.0, 0.0, -1.0])
        .unwrap();
    let (range, float) = match data_type {
        "Byte" => (255.0, false),
        "UInt16" | "Int16" => (30_000.0, false),
        _ => (1000.0, true),
    };
    for b in 1..=bands {
        let mut band = ds.rasterband(b).unwrap();
        let mut buffer = Buffer::new((SIZE, SIZE), values(b, range, float));
        band.write((0, 0), (SIZE, SIZE), &mut buffer).unwrap();
        if palette {
            let start = ColorEntry::Rgba(RgbaEntry {
                r: 0,
                g: 0,
                b: 0,
                a: 255,
            });
            let end = ColorEntry::Rgba(RgbaEntry {
                r: 255,
                g: 128,
                b: 0,
                a: 255,
            });
            let table = ColorTable::color_ramp(0, &start, 255, &end).unwrap();
            band.set_color_table(&table);
        }
    }
    ds
}

fn read_all(ds: &Dataset, bands: usize) -> Vec<f64> {
    (1..=bands)
        .flat_map(|b| {
            ds.rasterband(b)
                .unwrap()
                .read_as::<f64>((0, 0), (SIZE, SIZE), (SIZE, SIZE), None)
                .unwrap()
                .data()
                .to_vec()
        })
        .collect()
}

/// Write `data_type` × `bands` through `driver` with `options`, read it back: the number of
/// changed cells.
fn changed(
    driver: &str,
    ext: &str,
    data_type: &str,
    bands: usize,
    palette: bool,
    options: &[(&str, &str)],
) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("out.{ext}"));
    let src = source(data_type, bands, palette);
    let before = read_all(&src, bands);
    let mut creation = RasterCreationOptions::new();
    for (k, v) in options {
        creation.add_name_value(k, v).unwrap();
    }
    let gdal_driver = DriverManager::get_driver_by_name(driver).unwrap();
    {
        let copy = src
            .create_copy(&gdal_driver, &path, &creation)
            .unwrap_or_else(|e| panic!("{driver} {options:?}: {e}"));
        drop(copy);
    }
    let back = Dataset::open(&path).unwrap();
    let after = read_all(&back, bands);
    assert_eq!(before.len(), after.len());
    // Float32 sources compare as the Float32 values they hold.
    before
        .iter()
        .zip(&after)
        .filter(|(a, b)| {
            if data_type == "Float32" {
                (**a as f32) != (**b as f32)
            } else {
                a != b
            }
        })
        .count()
}

fn fact(
    driver: &str,
    data_type: &str,
    bands: usize,
    palette: bool,
    options: &[(&str, &str)],
) -> EncodingFact {
    let options: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assess(
        driver,
        &options,
        &Written {
            types: vec![data_type.to_string(); bands],
            single_band_palette: palette && bands == 1,
            ..Default::default()
        },
        None,
    )
}

/// The table: the fact says lossy exactly where GDAL changed cells. Regression (issue 21): JPEG
/// 2000 defaults, WebP at quality 100 and LERC with an error bound were taken as lossless (or
/// got only a warning), so lineage recorded them as not lossy.
#[test]
fn the_fact_says_lossy_exactly_where_gdal_changes_cells() {
    type Row<'a> = (
        &'a str,
        &'a str,
        &'a str,
        usize,
        bool,
        &'a [(&'a str, &'a str)],
    );
    let rows: &[Row] = &[
        // JPEG 2000: lossy by default; lossless only with both REVERSIBLE=YES and QUALITY=100.
        ("JP2OpenJPEG", "jp2", "Byte", 1, false, &[]),
        (
            "JP2OpenJPEG",
            "jp2",
            "Byte",
            1,
            false,
            &[("QUALITY", "100")],
        ),
        (
            "JP2OpenJPEG",
            "jp2",
            "Byte",
            1,
            false,
            &[("REVERSIBLE", "YES")],
        ),
        (
            "JP2OpenJPEG",
            "jp2",
            "Byte",
            1,
            false,
            &[("REVERSIBLE", "YES"), ("QUALITY", "100")],
        ),
        (
            "JP2OpenJPEG",
            "jp2",
            "Byte",
            3,
            false,
            &[("REVERSIBLE", "YES"), ("QUALITY", "100")],
        ),
        (
            "JP2OpenJPEG",
            "jp2",
            "UInt16",
            1,
            false,
            &[("QUALITY", "100")],
        ),
        (
            "JP2OpenJPEG",
            "jp2",
            "UInt16",
            1,
            false,
            &[("REVERSIBLE", "YES"), ("QUALITY", "100")],
        ),
        // A single band with a colour table defaults to reversible, quality 100.
        ("JP2OpenJPEG", "jp2", "Byte", 1, true, &[]),
        // WebP: lossy at quality 100; LOSSLESS / WEBP_LOSSLESS are lossless; COG QUALITY=100 too.
        ("WEBP", "webp", "Byte", 3, false, &[("QUALITY", "100")]),
        ("WEBP", "webp", "Byte", 3, false, &[]),
        ("WEBP", "webp", "Byte", 3, false, &[("LOSSLESS", "TRUE")]),
        (
            "GTiff",
            "tif",
            "Byte",
            3,
            false,
            &[("COMPRESS", "WEBP"), ("WEBP_LEVEL", "100")],
        ),
        (
            "GTiff",
            "tif",
            "Byte",
            3,
            false,
            &[("COMPRESS", "WEBP"), ("WEBP_LOSSLESS", "YES")],
        ),
        ("COG", "tif", "Byte", 3, false, &[("COMPRESS", "WEBP")]),
        (
            "COG",
            "tif",
            "Byte",
            3,
            false,
            &[("COMPRESS", "WEBP"), ("QUALITY", "100")],
        ),
        // JPEG: lossy at quality 100.
        (
            "GTiff",
            "tif",
            "Byte",
            1,
            false,
            &[("COMPRESS", "JPEG"), ("JPEG_QUALITY", "100")],
        ),
        ("JPEG", "jpg", "Byte", 3, false, &[("QUALITY", "100")]),
        (
            "COG",
            "tif",
            "Byte",
            3,
            false,
            &[("COMPRESS", "JPEG"), ("QUALITY", "95")],
        ),
        // LERC: floats move with any positive bound; integers from a bound of 1.
        ("GTiff", "tif", "Float32", 1, false, &[("COMPRESS", "LERC")]),
        (
            "GTiff",
            "tif",
            "Float32",
            1,
            false,
            &[("COMPRESS", "LERC"), ("MAX_Z_ERROR", "0.001")],
        ),
        // Regression (attack round 14, R14-6): GDAL reads `0x10` as 16 (`CPLAtof`).
        (
            "GTiff",
            "tif",
            "Float32",
            1,
            false,
            &[("COMPRESS", "LERC"), ("MAX_Z_ERROR", "0x10")],
        ),
        (
            "GTiff",
            "tif",
            "Float32",
            1,
            false,
            &[("COMPRESS", "LERC_ZSTD"), ("MAX_Z_ERROR", "0.5")],
        ),
        (
            "GTiff",
            "tif",
            "UInt16",
            1,
            false,
            &[("COMPRESS", "LERC"), ("MAX_Z_ERROR", "0.5")],
        ),
        (
            "GTiff",
            "tif",
            "UInt16",
            1,
            false,
            &[("COMPRESS", "LERC_DEFLATE"), ("MAX_Z_ERROR", "0.99")],
        ),
        (
            "GTiff",
            "tif",
            "UInt16",
            1,
            false,
            &[("COMPRESS", "LERC_DEFLATE"), ("MAX_Z_ERROR", "1")],
        ),
        (
            "COG",
            "tif",
            "Float32",
            1,
            false,
            &[("COMPRESS", "LERC_ZSTD"), ("MAX_Z_ERROR", "0.01")],
        ),
        // Bits cut.
        ("GTiff", "tif", "Float32", 1, false, &[("NBITS", "16")]),
        (
            "GTiff",
            "tif",
            "UInt16",
            1,
            false,
            &[("COMPRESS", "DEFLATE"), ("DISCARD_LSB", "4")],
        ),
        // Text grids round floats.
        ("AAIGrid", "asc", "Float32", 1, false, &[]),
        ("AAIGrid", "asc", "Float64", 1, false, &[]),
        (
            "AAIGrid",
            "asc",
            "Float64",
            1,
            false,
            &[("SIGNIFICANT_DIGITS", "9")],
        ),
        (
            "AAIGrid",
            "asc",
            "Float32",
            1,
            false,
            &[("SIGNIFICANT_DIGITS", "9")],
        ),
        (
            "AAIGrid",
            "asc",
            "Float32",
            1,
            false,
            &[("DECIMAL_PRECISION", "2")],
        ),
        ("AAIGrid", "asc", "Int16", 1, false, &[]),
        (
            "XYZ",
            "xyz",
            "Float32",
            1,
            false,
            &[("DECIMAL_PRECISION", "2")],
        ),
        // GeoPackage tiles.
        // Fully opaque tiles (one 64 × 64 tile) are JPEG under the default PNG_JPEG.
        ("GPKG", "gpkg", "Byte", 3, false, &[("BLOCKSIZE", "64")]),
        // R13-B5: one Byte band is written as PNG tiles under the default, opaque or not:
        // lossless; an explicit PNG_JPEG makes its opaque tiles JPEG.
        ("GPKG", "gpkg", "Byte", 1, false, &[("BLOCKSIZE", "64")]),
        (
            "GPKG",
            "gpkg",
            "Byte",
            1,
            false,
            &[("BLOCKSIZE", "64"), ("TILE_FORMAT", "PNG_JPEG")],
        ),
        (
            "GPKG",
            "gpkg",
            "Byte",
            1,
            false,
            &[("BLOCKSIZE", "64"), ("TILE_FORMAT", "JPEG")],
        ),
        (
            "GPKG",
            "gpkg",
            "Byte",
            3,
            false,
            &[("BLOCKSIZE", "64"), ("TILE_FORMAT", "PNG")],
        ),
        ("GPKG", "gpkg", "Float32", 1, false, &[]),
        // Lossless codecs and formats: nothing changes.
        (
            "GTiff",
            "tif",
            "Float32",
            1,
            false,
            &[("COMPRESS", "DEFLATE"), ("PREDICTOR", "3")],
        ),
        (
            "GTiff",
            "tif",
            "UInt16",
            1,
            false,
            &[("COMPRESS", "ZSTD"), ("PREDICTOR", "2")],
        ),
        ("COG", "tif", "Float32", 1, false, &[]),
        ("PNG", "png", "UInt16", 1, false, &[]),
        ("HFA", "img", "Float32", 1, false, &[("COMPRESSED", "YES")]),
        ("ENVI", "bin", "Float32", 1, false, &[]),
        ("netCDF", "nc", "Float32", 1, false, &[]),
        ("RST", "rst", "Float32", 1, false, &[]),
    ];
    let mut wrong = Vec::new();
    for (driver, ext, data_type, bands, palette, options) in rows {
        let n = changed(driver, ext, data_type, *bands, *palette, options);
        let f = fact(driver, data_type, *bands, *palette, options);
        eprintln!(
            "{driver} {data_type}×{bands}{} {options:?}: {n} of {} cells changed; fact lossy={}",
            if *palette { " (palette)" } else { "" },
            SIZE * SIZE * bands,
            f.lossy
        );
        if f.lossy != (n > 0) {
            wrong.push(format!(
                "{driver} {data_type}×{bands} {options:?}: {n} changed, fact {f:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_call_s_arguments_give_the_fact() {
    let written = Written::typed(vec!["Byte".to_string(); 3]);
    let declared = |tool: &str| {
        crate::server::registry::find(tool)
            .and_then(|spec| spec.raster_output)
            .unwrap_or_else(|| panic!("{tool} declares a raster output"))
    };
    let jp2 = for_call(
        &declared("raster_convert"),
        &serde_json::json!({"format": "jp2openjpeg"}),
        &written,
    )
    .unwrap();
    assert_eq!(jp2.driver, "JP2OpenJPEG");
    assert!(jp2.lossy);
    assert_eq!(jp2.lineage_label().as_deref(), Some("JPEG2000 quality 25"));
    let webp = for_call(
        &declared("raster_convert"),
        &serde_json::json!({"compression": "WEBP", "quality": 100}),
        &written,
    )
    .unwrap();
    assert_eq!(webp.lineage_label().as_deref(), Some("WEBP quality 100"));
    // raster_calc: ZSTD by default (lossless); LERC with a bound on Float32 is lossy.
    let float = Written::typed(vec!["Float32".to_string()]);
    let calc = for_call(&declared("raster_calc"), &serde_json::json!({}), &float).unwrap();
    assert_eq!((calc.compression.as_str(), calc.lossy), ("ZSTD", false));
    let lerc = for_call(
        &declared("raster_calc"),
        &serde_json::json!({"creation_options": {"COMPRESS": "LERC", "MAX_Z_ERROR": "0.5"}}),
        &float,
    )
    .unwrap();
    assert_eq!(
        lerc.lineage_label().as_deref(),
        Some("LERC max_z_error 0.5")
    );
    assert!(crate::server::registry::find("vector_convert")
        .is_some_and(|spec| spec.raster_output.is_none()));
}

/// Regression (attack round 8, R8-3): the signed-byte fact read the input's largest value
/// whatever the method. The output's largest is carried through it; methods that keep the
/// input's range keep the input's largest (the clean twins).
#[test]
fn r8_3_the_output_range_follows_the_method() {
    use serde_json::json;
    for method in ["cubic", "lanczos", "sum"] {
        let (max, note) = output_byte_max(&json!({"resampling": method}), Some(100.0));
        assert_eq!(max, None, "{method}");
        assert!(note.is_some_and(|n| n.contains(method)), "{method}");
    }
    let (max, note) = output_byte_max(
        &json!({"overviews": {"resampling": "lanczos"}}),
        Some(100.0),
    );
    assert_eq!(max, None);
    assert!(note.is_some());
    for method in [
        "nearest",
        "near",
        "bilinear",
        "cubicspline",
        "average",
        "mode",
        "gauss",
        "rms",
    ] {
        assert_eq!(
            output_byte_max(&json!({"resampling": method}), Some(100.0)),
            (Some(100.0), None),
            "{method}"
        );
    }
    let sum = |factor| json!({"statistic": "sum", "factor": factor});
    assert_eq!(output_byte_max(&sum(json!(2)), Some(31.0)).0, Some(124.0));
    assert_eq!(
        output_byte_max(&sum(json!([3, 2])), Some(31.0)).0,
        Some(186.0)
    );
    assert_eq!(
        output_byte_max(&sum(json!([4])), Some(100.0)).0,
        Some(255.0)
    );
    assert_eq!(
        output_byte_max(
            &json!({"statistic": "sum", "inputs": ["a", "b"]}),
            Some(60.0)
        )
        .0,
        Some(120.0)
    );
    assert_eq!(
        output_byte_max(&json!({"statistic": "average", "factor": 4}), Some(100.0)),
        (Some(100.0), None)
    );
    assert_eq!(
        output_byte_max(&json!({"scale": [0, 100, 0, 255]}), Some(100.0)).0,
        Some(255.0)
    );
    assert_eq!(
        output_byte_max(&json!({"scale": [0, 255, 0, 127]}), Some(255.0)).0,
        Some(127.0)
    );
    // The fact: lossy above 127, silent at or below.
    let written = |arguments: serde_json::Value| Written {
        types: vec!["Byte".to_string()],
        byte_max: output_byte_max(&arguments, Some(100.0)).0,
        range_note: output_byte_max(&arguments, Some(100.0)).1,
        ..Default::default()
    };
    let options = vec![("PIXELTYPE".to_string(), "SIGNEDBYTE".to_string())];
    let lanczos = assess(
        "GTiff",
        &options,
        &written(json!({"resampling": "lanczos"})),
        None,
    );
    assert!(lanczos.lossy);
    let nearest = assess(
        "GTiff",
        &options,
        &written(json!({"resampling": "nearest"})),
        None,
    );
    assert!(!nearest.lossy);
}

/// Attack round 17, R17-C7: a COG's `OVERVIEW_COMPRESS=JPEG` wrote a class map's overviews
/// with codes of no class under "lossless: COG (DEFLATE)". The overviews' codec is a loss of
/// its own; lossless overview codecs, and the same option on a GeoTIFF (which has none), are
/// not.
#[test]
fn r17_c7_a_cogs_overview_codec_is_judged() {
    let jpeg = fact(
        "COG",
        "Byte",
        1,
        false,
        &[("COMPRESS", "DEFLATE"), ("OVERVIEW_COMPRESS", "JPEG")],
    );
    assert!(jpeg.lossy, "{jpeg:?}");
    assert!(jpeg.losses[0].text.contains("overviews"), "{jpeg:?}");
    let webp = fact(
        "COG",
        "Byte",
        1,
        false,
        &[("OVERVIEW_COMPRESS", "WEBP"), ("OVERVIEW_QUALITY", "90")],
    );
    assert!(webp.lossy, "{webp:?}");
    for (driver, options) in [
        (
            "COG",
            &[("COMPRESS", "DEFLATE"), ("OVERVIEW_COMPRESS", "ZSTD")][..],
        ),
        (
            "COG",
            &[("OVERVIEW_COMPRESS", "LERC"), ("MAX_Z_ERROR", "0")][..],
        ),
    ] {
        let clean = fact(driver, "Byte", 1, false, options);
        assert!(!clean.lossy, "{options:?}: {clean:?}");
    }
}
