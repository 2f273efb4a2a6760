//! The nodata of the cells a gdalwarp output holds outside its source (attack round 14,
//! R14-B1, B2, B3, B5, B6, B8): every fixture is built here, its right answer known by
//! construction (a constant raster, a constructed block), each rule with its clean twin.

use gdal::raster::{Buffer, ColorInterpretation, GdalType, RasterCreationOptions};
use gdal::spatial_ref::SpatialRef;
use gdal::DriverManager;
use gdal_mcp_tests::{call_justified, is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::path::Path;

/// UTM 33N at 12° E, 55° N (off the zone's meridian: turned to EPSG:4326 the grid gets
/// wedges outside the source), 100 m cells.
const OFF_MERIDIAN: [f64; 6] = [320_000.0, 100.0, 0.0, 6_100_000.0, 0.0, -100.0];

async fn server() -> Server {
    Server::start(Era::Modern, Options::default())
        .await
        .unwrap()
}

/// A GeoTIFF (or `driver`) of `bands` bands of `w` x `h` cells, band `b` holding `value(b, i)`
/// at cell `i`, in EPSG:32633 with geotransform `gt`; `setup` sets band properties.
#[allow(clippy::too_many_arguments)]
fn write<T: GdalType + Copy>(
    path: &Path,
    driver: &str,
    (w, h): (usize, usize),
    bands: usize,
    gt: [f64; 6],
    options: &[&str],
    value: impl Fn(usize, usize) -> T,
    setup: impl Fn(usize, &mut gdal::raster::RasterBand),
) {
    let driver = DriverManager::get_driver_by_name(driver).unwrap();
    let options = RasterCreationOptions::from_iter(options.iter().copied());
    let mut dataset = driver
        .create_with_band_type_with_options::<T, _>(path, w, h, bands, &options)
        .unwrap();
    dataset.set_geo_transform(&gt).unwrap();
    dataset
        .set_spatial_ref(&SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    for b in 1..=bands {
        let mut band = dataset.rasterband(b).unwrap();
        let data: Vec<T> = (0..w * h).map(|i| value(b, i)).collect();
        band.write((0, 0), (w, h), &mut Buffer::new((w, h), data))
            .unwrap();
        setup(b, &mut band);
    }
}

/// A one-band 40 x 40 GeoTIFF of `value` at [`OFF_MERIDIAN`], declaring no nodata.
fn constant<T: GdalType + Copy>(path: &Path, value: T) {
    write::<T>(
        path,
        "GTiff",
        (40, 40),
        1,
        OFF_MERIDIAN,
        &[],
        |_, _| value,
        |_, _| {},
    );
}

/// Band `b` of `path`: its values (as f64) and its nodata.
fn band(path: &Path, b: usize) -> (Vec<f64>, Option<f64>) {
    let dataset = gdal::Dataset::open(path).unwrap();
    let band = dataset.rasterband(b).unwrap();
    let (_, data) = band.read_band_as::<f64>().unwrap().into_shape_and_vec();
    (data, band.no_data_value())
}

async fn run(server: &Server, tool: &str, arguments: Value) -> rmcp::model::CallToolResult {
    call_justified(server, tool, arguments)
        .await
        .unwrap()
        .result
}

/// `raster_reproject` of `input` to EPSG:4326, nearest (in `format`, if given), asserted to
/// succeed.
async fn to_4326(
    server: &Server,
    input: &str,
    output: &str,
    format: Option<&str>,
) -> rmcp::model::CallToolResult {
    let mut args = json!({"input": input, "output": output, "dst_crs": "EPSG:4326",
                          "resampling": "nearest"});
    if let Some(format) = format {
        args["format"] = json!(format);
    }
    let done = run(server, "raster_reproject", args).await;
    assert!(!is_error(&done), "{input} -> {output}: {}", text(&done));
    done
}

fn warnings(result: &rmcp::model::CallToolResult) -> String {
    structured(result)["warnings"].to_string()
}

/// Attack round 14, R14-B1 (a): a raster whose geotransform is rotated is regridded by
/// gdalwarp onto a north-up grid round its footprint, whose corners lie outside it; GDAL 3.6
/// wrote 0 there and declared nothing (46.7 % of the cells of a constant 500 raster were 0,
/// mean 266.4), in `raster_resample` and in `raster_reproject` onto the raster's own CRS.
/// Those cells are now NaN, declared and said; the north-up twin declares nothing new.
#[tokio::test]
async fn r14_b1_a_rotated_raster_regridded_declares_its_outside() {
    let server = server().await;
    let rotated = [
        500_000.0,
        86.602_540_378,
        50.0,
        5_000_000.0,
        50.0,
        -86.602_540_378,
    ];
    let north_up = [500_000.0, 100.0, 0.0, 5_000_000.0, 0.0, -100.0];
    for (name, gt) in [("rotated.tif", rotated), ("north.tif", north_up)] {
        write::<f32>(
            &server.path(name),
            "GTiff",
            (40, 40),
            1,
            gt,
            &[],
            |_, _| 500.0,
            |_, _| {},
        );
    }
    let resample = |input: &str, output: &str| {
        json!({"input": input, "output": output, "resampling": "bilinear",
               "resolution": [100, 100]})
    };
    let reproject = |input: &str, output: &str| {
        json!({"input": input, "output": output, "resampling": "nearest",
               "dst_crs": "EPSG:32633", "resolution": [100, 100]})
    };
    for (tool, args) in [
        ("raster_resample", resample("rotated.tif", "r1.tif")),
        ("raster_reproject", reproject("rotated.tif", "r2.tif")),
    ] {
        let output = args["output"].as_str().unwrap().to_string();
        let done = run(&server, tool, args).await;
        assert!(!is_error(&done), "{tool}: {}", text(&done));
        assert!(
            warnings(&done).contains("declares no nodata"),
            "{tool}: {}",
            warnings(&done)
        );
        let (values, nodata) = band(&server.path(&output), 1);
        assert!(nodata.is_some_and(f64::is_nan), "{tool}: {nodata:?}");
        let outside = values.iter().filter(|v| v.is_nan()).count();
        assert!(
            outside > values.len() / 5,
            "{tool}: {outside} of {}",
            values.len()
        );
        let valid: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        assert!(
            valid.iter().all(|v| (v - 500.0).abs() < 1e-3),
            "{tool}: a valid cell is not 500: {:?}",
            valid.iter().find(|v| (*v - 500.0).abs() >= 1e-3)
        );
    }
    // The twins: a north-up raster regridded on its own CRS stays inside it.
    for (tool, args) in [
        ("raster_resample", resample("north.tif", "n1.tif")),
        ("raster_reproject", reproject("north.tif", "n2.tif")),
    ] {
        let output = args["output"].as_str().unwrap().to_string();
        let done = run(&server, tool, args).await;
        assert!(!is_error(&done), "{tool}: {}", text(&done));
        assert!(
            !warnings(&done).contains("nodata"),
            "{tool}: {}",
            warnings(&done)
        );
        let (values, nodata) = band(&server.path(&output), 1);
        assert_eq!(nodata, None, "{tool}");
        assert!(values.iter().all(|v| *v == 500.0), "{tool}");
    }
}

/// Attack round 14, R14-B1 (b): `raster_reproject` of Int64, UInt64 and complex rasters
/// declaring no nodata passed gdalwarp no `-dstnodata` (the fill rule gave up on those types):
/// the wedges were 0, undeclared (2,794 of 36,000 cells, mean 922.39 for 1000). Int64 now gets
/// -2^53, UInt64 2^53 (the widest integers a double holds exactly; GDAL 3.6 declares -2^63 as
/// "-9"), complex NaN. Int32, the held twin, keeps its -2^31.
#[tokio::test]
async fn r14_b1_b_64_bit_and_complex_reprojections_declare_their_outside() {
    let server = server().await;
    constant::<i64>(&server.path("i64.tif"), 1000);
    constant::<u64>(&server.path("u64.tif"), 1000);
    constant::<i32>(&server.path("i32.tif"), 1000);
    // A CFloat32 raster: the crate writes no complex type, GDAL converts the real values.
    {
        let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
        let path = std::ffi::CString::new(server.path("c32.tif").to_str().unwrap()).unwrap();
        // SAFETY: a live driver handle, a NUL-terminated path; the handle is owned below.
        let handle = unsafe {
            gdal_sys::GDALCreate(
                driver.c_driver(),
                path.as_ptr(),
                40,
                40,
                1,
                gdal_sys::GDALDataType::GDT_CFloat32,
                std::ptr::null_mut(),
            )
        };
        assert!(!handle.is_null());
        // SAFETY: a dataset handle GDALCreate just returned, owned by the wrapper from here.
        let mut dataset = unsafe { gdal::Dataset::from_c_dataset(handle) };
        dataset.set_geo_transform(&OFF_MERIDIAN).unwrap();
        dataset
            .set_spatial_ref(&SpatialRef::from_epsg(32633).unwrap())
            .unwrap();
        dataset
            .rasterband(1)
            .unwrap()
            .write(
                (0, 0),
                (40, 40),
                &mut Buffer::new((40, 40), vec![1000f32; 1600]),
            )
            .unwrap();
    }
    for (input, expected) in [
        ("i64.tif", -9_007_199_254_740_992.0),
        ("u64.tif", 9_007_199_254_740_992.0),
        ("c32.tif", f64::NAN),
        ("i32.tif", -2_147_483_648.0),
    ] {
        let output = format!("{}_4326.tif", input.trim_end_matches(".tif"));
        let done = to_4326(&server, input, &output, None).await;
        assert!(
            warnings(&done).contains("declares no nodata"),
            "{input}: {}",
            warnings(&done)
        );
        let (values, nodata) = band(&server.path(&output), 1);
        let nodata = nodata.unwrap_or_else(|| panic!("{input}: no nodata declared"));
        let is_fill = |v: f64| {
            if expected.is_nan() {
                v.is_nan()
            } else {
                v == expected
            }
        };
        assert!(is_fill(nodata), "{input}: nodata {nodata}");
        assert!(values.iter().any(|v| is_fill(*v)), "{input}: no wedge");
        assert!(
            values.iter().all(|v| *v == 1000.0 || is_fill(*v)),
            "{input}: a cell is neither 1000 nor the fill: {:?}",
            values.iter().find(|v| **v != 1000.0 && !is_fill(**v))
        );
    }
}

/// Attack round 14, R14-B1 (c): `raster_composite` warped an input with another extent onto
/// the first input's grid without a nodata, so the cells it does not cover were 0 and counted
/// (mean 5 where only the first input, 10, covers; count 2 for 1). Those cells are now NaN in
/// the warped copy and left out; the twin whose inputs declare -9999 is unchanged.
#[tokio::test]
async fn r14_b1_c_a_composite_leaves_out_the_cells_an_input_does_not_cover() {
    let server = server().await;
    let whole = [500_000.0, 100.0, 0.0, 5_000_000.0, 0.0, -100.0];
    for (suffix, nodata) in [("", None), ("_nd", Some(-9999.0))] {
        let setup = move |_: usize, band: &mut gdal::raster::RasterBand| {
            if let Some(v) = nodata {
                band.set_no_data_value(Some(v)).unwrap();
            }
        };
        write::<f32>(
            &server.path(&format!("a{suffix}.tif")),
            "GTiff",
            (10, 10),
            1,
            whole,
            &[],
            |_, _| 10.0,
            setup,
        );
        // The west half only, on the same cells.
        write::<f32>(
            &server.path(&format!("b{suffix}.tif")),
            "GTiff",
            (5, 10),
            1,
            whole,
            &[],
            |_, _| 20.0,
            setup,
        );
    }
    for suffix in ["", "_nd"] {
        for (statistic, west, east) in [
            ("mean", 15.0, 10.0),
            ("count", 2.0, 1.0),
            ("min", 10.0, 10.0),
        ] {
            let output = format!("{statistic}{suffix}.tif");
            let done = run(
                &server,
                "raster_composite",
                json!({"inputs": [format!("a{suffix}.tif"), format!("b{suffix}.tif")],
                       "output": output, "statistic": statistic, "resampling": "nearest"}),
            )
            .await;
            assert!(!is_error(&done), "{statistic}{suffix}: {}", text(&done));
            let (values, _) = band(&server.path(&output), 1);
            for (i, v) in values.iter().enumerate() {
                let expected = if i % 10 < 5 { west } else { east };
                assert_eq!(*v, expected, "{statistic}{suffix}: cell {i}");
            }
        }
    }
}

/// Attack round 14, R14-B2: a raster whose band 1 declares a nodata and band 2 none (HFA
/// holds per-band nodata) was passed to gdalwarp without `-dstnodata`; GDAL 3.6 declared its
/// internal -123456.789 on both bands of the GTiff output and wrote the wedges clamped to Byte,
/// 255 on band 1 and 0 on band 2, read as data (mean 65.91 for 50, 6.46 for 7). One value no
/// band holds (band 1's own 255 here) is now passed for every band and declared; the twin
/// whose bands both declare 255 is unchanged.
#[tokio::test]
async fn r14_b2_some_bands_without_nodata_get_one_declared_fill() {
    let server = server().await;
    for (name, both) in [("mixed.img", false), ("both.img", true)] {
        write::<u8>(
            &server.path(name),
            "HFA",
            (40, 40),
            2,
            OFF_MERIDIAN,
            &[],
            |b, _| if b == 1 { 50 } else { 7 },
            |b, band| {
                if b == 1 || both {
                    band.set_no_data_value(Some(255.0)).unwrap();
                }
            },
        );
    }
    for (input, said) in [("mixed.img", true), ("both.img", false)] {
        let output = format!("{}_4326.tif", input.trim_end_matches(".img"));
        let done = to_4326(&server, input, &output, None).await;
        assert_eq!(
            warnings(&done).contains("declare no nodata"),
            said,
            "{input}: {}",
            warnings(&done)
        );
        for (b, value) in [(1, 50.0), (2, 7.0)] {
            let (values, nodata) = band(&server.path(&output), b);
            assert_eq!(nodata, Some(255.0), "{input} band {b}");
            assert!(values.contains(&255.0), "{input} band {b}: no wedge");
            assert!(
                values.iter().all(|v| *v == value || *v == 255.0),
                "{input} band {b}: {:?}",
                values.iter().find(|v| **v != value && **v != 255.0)
            );
        }
    }
}

/// Attack round 14, R14-B3: every RGBA image was refused by `raster_reproject` ("values fill
/// Byte's whole range") because the alpha band's 0 and 255 were counted. The alpha band is
/// left out: gdalwarp carries it, the cells outside are transparent (alpha 0), and the warning
/// says so. The twin without the alpha band, filling Byte's range, is still refused. A band
/// under a per-dataset mask counts only its valid cells (0 and 255 masked, 1..254 valid: 255
/// declared); its twin without the mask is refused.
#[tokio::test]
async fn r14_b3_an_rgba_image_is_reprojected_with_its_alpha() {
    let server = server().await;
    let colour = |b: usize, i: usize| ((i * 7 + b * 31) % 256) as u8;
    write::<u8>(
        &server.path("rgba.tif"),
        "GTiff",
        (40, 40),
        4,
        OFF_MERIDIAN,
        &["PHOTOMETRIC=RGB", "ALPHA=YES"],
        |b, i| {
            if b == 4 {
                if i < 160 {
                    0
                } else {
                    255
                }
            } else {
                colour(b, i)
            }
        },
        |b, band| {
            if b == 4 {
                band.set_color_interpretation(ColorInterpretation::AlphaBand)
                    .unwrap();
            }
        },
    );
    write::<u8>(
        &server.path("rgb.tif"),
        "GTiff",
        (40, 40),
        3,
        OFF_MERIDIAN,
        &["PHOTOMETRIC=RGB"],
        colour,
        |_, _| {},
    );
    let done = to_4326(&server, "rgba.tif", "rgba4326.tif", None).await;
    assert!(
        warnings(&done).contains("transparent"),
        "{}",
        warnings(&done)
    );
    let dataset = gdal::Dataset::open(server.path("rgba4326.tif")).unwrap();
    assert_eq!(dataset.raster_count(), 4);
    assert_eq!(
        dataset.rasterband(4).unwrap().color_interpretation(),
        ColorInterpretation::AlphaBand
    );
    let (alpha, _) = band(&server.path("rgba4326.tif"), 4);
    let (transparent, opaque) = (
        alpha.iter().filter(|v| **v == 0.0).count(),
        alpha.iter().filter(|v| **v == 255.0).count(),
    );
    assert_eq!(transparent + opaque, alpha.len());
    // The wedges and the 4 transparent rows of the source.
    assert!(
        transparent > 160 && opaque > alpha.len() / 2,
        "{transparent} / {opaque}"
    );

    let refused = run(
        &server,
        "raster_reproject",
        json!({"input": "rgb.tif", "output": "rgb4326.tif", "dst_crs": "EPSG:4326",
               "resampling": "nearest"}),
    )
    .await;
    assert!(is_error(&refused));
    assert!(text(&refused).contains("\"nodata\""), "{}", text(&refused));

    // A band under a per-dataset mask: its masked cells (0 and 255 here) are no values, the
    // valid ones 1..254 leave 255 free; the same cells without the mask fill Byte's range.
    gdal::config::set_config_option("GDAL_TIFF_INTERNAL_MASK", "YES").unwrap();
    let cells = |_: usize, i: usize| match i / 40 {
        0..4 => 0u8,
        4..8 => 255,
        _ => 1 + (i % 254) as u8,
    };
    for (name, masked) in [("masked.tif", true), ("unmasked.tif", false)] {
        write::<u8>(
            &server.path(name),
            "GTiff",
            (40, 40),
            1,
            OFF_MERIDIAN,
            &[],
            cells,
            |_, band| {
                if masked {
                    band.create_mask_band(true).unwrap();
                    let mut mask = band.open_mask_band().unwrap();
                    let valid: Vec<u8> = (0..1600).map(|i| if i < 320 { 0 } else { 255 }).collect();
                    mask.write((0, 0), (40, 40), &mut Buffer::new((40, 40), valid))
                        .unwrap();
                }
            },
        );
    }
    let done = to_4326(&server, "masked.tif", "masked4326.tif", None).await;
    assert!(
        warnings(&done).contains("declares no nodata"),
        "{}",
        warnings(&done)
    );
    let (values, nodata) = band(&server.path("masked4326.tif"), 1);
    assert_eq!(nodata, Some(255.0));
    assert!(
        values.iter().all(|v| (1.0..=255.0).contains(v)),
        "a masked 0 came through"
    );
    let refused = run(
        &server,
        "raster_reproject",
        json!({"input": "unmasked.tif", "output": "unmasked4326.tif",
               "dst_crs": "EPSG:4326", "resampling": "nearest"}),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
}

/// Attack round 14, R14-B8: the fill nodata was chosen after format_selection judged the call
/// and never checked against the output format: GS7BG (its own fixed nodata, 1.70141e38) and
/// XYZ (none) wrote 65535 as data (mean 5,730.89 for 698.89) while the warning said
/// "declared". The fill is now checked against what the driver declares when it writes (a file
/// written and read back): GS7BG and XYZ are refused before any work, naming GTiff; GTiff and
/// HFA, the twins, declare 65535 and say so.
#[tokio::test]
async fn r14_b8_a_fill_the_format_cannot_declare_is_refused() {
    let server = server().await;
    write::<u16>(
        &server.path("u16.tif"),
        "GTiff",
        (40, 40),
        1,
        OFF_MERIDIAN,
        &[],
        |_, i| 500 + (i % 399) as u16,
        |_, _| {},
    );
    for (format, output) in [("GS7BG", "out.grd"), ("XYZ", "out.xyz")] {
        let refused = run(
            &server,
            "raster_reproject",
            json!({"input": "u16.tif", "output": output, "dst_crs": "EPSG:4326",
                   "resampling": "nearest", "format": format}),
        )
        .await;
        assert!(is_error(&refused), "{format}: {}", text(&refused));
        assert_eq!(
            structured(&refused)["error"]["kind"],
            "invalid_arguments",
            "{format}: {}",
            text(&refused)
        );
        let message = text(&refused);
        assert!(
            message.contains("65535") && message.contains("GTiff"),
            "{format}: {message}"
        );
        assert!(!server.path(output).exists(), "{format}");
    }
    for (format, output) in [("GTiff", "out.tif"), ("HFA", "out.img")] {
        let done = to_4326(&server, "u16.tif", output, Some(format)).await;
        assert!(
            warnings(&done).contains("nodata 65535, declared"),
            "{format}: {}",
            warnings(&done)
        );
        let (values, nodata) = band(&server.path(output), 1);
        assert_eq!(nodata, Some(65535.0), "{format}");
        assert!(values.contains(&65535.0), "{format}: no wedge");
        assert!(
            values
                .iter()
                .all(|v| (500.0..=898.0).contains(v) || *v == 65535.0),
            "{format}"
        );
    }
}

/// Attack round 14, R14-B5: a widened sum (R10-6) kept the input's nodata, which then lay
/// within the sums' range; gdalwarp 3.6 writes a valid cell equal to the nodata one less, so a
/// block summing to 255 over a nodata of 255 was written 254. The output's nodata now moves to
/// the written type's maximum (65535 in UInt16) and the widening note says so; the block sums
/// to 255, its twin to 254, a block with a nodata cell to the sum of its other three.
#[tokio::test]
async fn r14_b5_a_widened_sum_moves_its_nodata_out_of_the_sums() {
    let server = server().await;
    for (name, first) in [("sum255.tif", 60u8), ("sum254.tif", 59u8)] {
        let cells = move |_: usize, i: usize| match (i / 8, i % 8) {
            (0, 0) => first,
            (0, 1) | (1, 0) | (1, 1) => 65,
            (7, 7) => 255,
            _ => 10,
        };
        write::<u8>(
            &server.path(name),
            "GTiff",
            (8, 8),
            1,
            [500_000.0, 100.0, 0.0, 5_000_000.0, 0.0, -100.0],
            &[],
            cells,
            |_, band| band.set_no_data_value(Some(255.0)).unwrap(),
        );
    }
    for (input, block) in [("sum255.tif", 255.0), ("sum254.tif", 254.0)] {
        for (tool, args) in [
            (
                "raster_aggregate",
                json!({"input": input, "output": format!("agg_{input}"), "factor": [2, 2],
                       "statistic": "sum"}),
            ),
            (
                "raster_resample",
                json!({"input": input, "output": format!("res_{input}"), "resampling": "sum",
                       "resolution": [200, 200]}),
            ),
        ] {
            let output = args["output"].as_str().unwrap().to_string();
            let done = run(&server, tool, args).await;
            assert!(!is_error(&done), "{tool} {input}: {}", text(&done));
            let said = structured(&done).to_string();
            assert!(
                said.contains("instead of the input's 255"),
                "{tool} {input}: {said}"
            );
            let dataset = gdal::Dataset::open(server.path(&output)).unwrap();
            assert_eq!(dataset.rasterband(1).unwrap().band_type().name(), "UInt16");
            drop(dataset);
            let (values, nodata) = band(&server.path(&output), 1);
            assert_eq!(nodata, Some(65535.0), "{tool} {input}");
            assert_eq!(values.len(), 16, "{tool} {input}");
            assert_eq!(values[0], block, "{tool} {input}");
            assert_eq!(
                values[15], 30.0,
                "{tool} {input}: the block with a nodata cell"
            );
            assert!(
                values[1..15].iter().all(|v| *v == 40.0),
                "{tool} {input}: {values:?}"
            );
        }
    }
    // The twin: a sum that fits the input's type keeps its type and its nodata.
    write::<u8>(
        &server.path("small.tif"),
        "GTiff",
        (8, 8),
        1,
        [500_000.0, 100.0, 0.0, 5_000_000.0, 0.0, -100.0],
        &[],
        |_, _| 1,
        |_, band| band.set_no_data_value(Some(255.0)).unwrap(),
    );
    let done = run(
        &server,
        "raster_aggregate",
        json!({"input": "small.tif", "output": "agg_small.tif", "factor": [2, 2],
               "statistic": "sum"}),
    )
    .await;
    assert!(!is_error(&done), "{}", text(&done));
    assert!(!structured(&done).to_string().contains("instead of"));
    let (values, nodata) = band(&server.path("agg_small.tif"), 1);
    assert_eq!(nodata, Some(255.0));
    assert!(values.iter().all(|v| *v == 4.0));
}

/// Attack round 14, R14-B6: an aligned clip (R13-B9) was still asked to justify resampling
/// (`continuous_input`, required) when `bounds.crs` named the raster's own CRS, and for a
/// south-up raster (positive geotransform height), though no cell changes. Both now run
/// without a question, 0 cells changed; the twin off the grid (bounds half a cell over) is
/// still asked.
#[tokio::test]
async fn r14_b6_aligned_clips_in_the_own_crs_and_south_up_are_not_resampling() {
    let server = server().await;
    let height = |i: usize| 500.0 + (i % 200) as f32 * 1.3 + (i / 200) as f32 * 0.7;
    write::<f32>(
        &server.path("dem.tif"),
        "GTiff",
        (200, 200),
        1,
        [300_000.0, 100.0, 0.0, 6_100_000.0, 0.0, -100.0],
        &[],
        |_, i| height(i),
        |_, band| band.set_no_data_value(Some(-9999.0)).unwrap(),
    );
    // The same footprint and cells, rows stored south to north.
    write::<f32>(
        &server.path("south.tif"),
        "GTiff",
        (200, 200),
        1,
        [300_000.0, 100.0, 0.0, 6_080_000.0, 0.0, 100.0],
        &[],
        |_, i| height((199 - i / 200) * 200 + i % 200),
        |_, band| band.set_no_data_value(Some(-9999.0)).unwrap(),
    );
    let bounds = json!({"xmin": 305_000, "ymin": 6_085_000, "xmax": 315_000, "ymax": 6_095_000});
    let mut own = bounds.clone();
    own["crs"] = json!("EPSG:32633");
    let mut off = bounds.clone();
    off["xmin"] = json!(305_050);
    let reproject = |input: &str, output: &str, bounds: &Value| {
        json!({"input": input, "output": output, "dst_crs": "EPSG:32633",
               "resolution": [100, 100], "resampling": "nearest", "bounds": bounds})
    };
    let (dem, _) = band(&server.path("dem.tif"), 1);
    for (tool, args, window) in [
        (
            "raster_reproject",
            reproject("dem.tif", "own.tif", &own),
            Some((50, 50)),
        ),
        (
            "raster_reproject",
            reproject("south.tif", "south_clip.tif", &bounds),
            Some((50, 50)),
        ),
        (
            "raster_resample",
            json!({"input": "south.tif", "output": "south_res.tif", "resampling": "nearest",
                   "resolution": [100, 100]}),
            None,
        ),
    ] {
        let output = args["output"].as_str().unwrap().to_string();
        let call = call_justified(&server, tool, args).await.unwrap();
        assert!(
            !is_error(&call.result),
            "{tool} {output}: {}",
            text(&call.result)
        );
        assert!(
            call.refused_by().is_empty(),
            "{tool} {output}: {}",
            call.refusal
        );
        let (values, _) = band(&server.path(&output), 1);
        let (c0, r0, w) = match window {
            Some((c0, r0)) => (c0, r0, 100),
            None => (0, 0, 200),
        };
        assert_eq!(values.len(), w * w, "{tool} {output}");
        for (i, v) in values.iter().enumerate() {
            let (r, c) = (r0 + i / w, c0 + i % w);
            assert_eq!(
                *v,
                f64::from(dem[r * 200 + c] as f32),
                "{tool} {output}: cell {i}"
            );
        }
    }
    // The twin: bounds half a cell off the grid resample.
    let call = call_justified(
        &server,
        "raster_reproject",
        reproject("dem.tif", "off.tif", &off),
    )
    .await
    .unwrap();
    assert!(
        call.refused_by()
            .iter()
            .any(|(domain, _)| domain == "resampling"),
        "{}",
        call.refusal
    );
}

/// Attack round 14, R14-B12 and R14-B14: `raster_resample` of an 11 x 11 raster without
/// nodata to twice its cell size rounds the grid up past the raster's edge, and gdalwarp wrote
/// the last row and column 0, undeclared (mean 354 m for a 500..520 m DEM); and a raster whose
/// western columns lie under a GDAL mask was aggregated with those blocks 0 (mean 70 where
/// the data is 100). Both declare the fill now; the twins (a resolution that divides the
/// extent, no mask) declare nothing new.
#[tokio::test]
async fn r14_b12_b14_cells_no_valid_source_cell_reaches_are_nodata() {
    let server = server().await;
    let grid = [500_000.0, 10.0, 0.0, 6_000_000.0, 0.0, -10.0];
    let odd = server.path("odd.tif");
    write::<f32>(
        &odd,
        "GTiff",
        (11, 11),
        1,
        grid,
        &[],
        |_, _| 500.0,
        |_, _| {},
    );
    let done = run(
        &server,
        "raster_resample",
        json!({"input": "odd.tif", "output": "odd_20.tif", "resolution": [20, 20],
               "resampling": "nearest"}),
    )
    .await;
    assert!(!is_error(&done), "{}", text(&done));
    let (values, nodata) = band(&server.path("odd_20.tif"), 1);
    assert!(nodata.is_some_and(f64::is_nan), "{nodata:?}");
    assert!(
        values.iter().all(|v| v.is_nan() || *v == 500.0),
        "{values:?}"
    );
    let twin = run(
        &server,
        "raster_resample",
        json!({"input": "odd.tif", "output": "odd_11.tif", "size": [11, 11],
               "resampling": "nearest"}),
    )
    .await;
    assert!(!is_error(&twin), "{}", text(&twin));
    assert_eq!(band(&server.path("odd_11.tif"), 1).1, None);

    let masked = server.path("masked.tif");
    write::<f32>(
        &masked,
        "GTiff",
        (20, 20),
        1,
        grid,
        &[],
        |_, i| if i % 20 < 6 { 0.0 } else { 100.0 },
        |_, band| {
            gdal::config::set_thread_local_config_option("GDAL_TIFF_INTERNAL_MASK", "YES").unwrap();
            band.create_mask_band(true).unwrap();
            gdal::config::clear_thread_local_config_option("GDAL_TIFF_INTERNAL_MASK").unwrap();
            let valid: Vec<u8> = (0..400).map(|i| if i % 20 < 6 { 0 } else { 255 }).collect();
            band.open_mask_band()
                .unwrap()
                .write((0, 0), (20, 20), &mut Buffer::new((20, 20), valid))
                .unwrap();
        },
    );
    let done = run(
        &server,
        "raster_aggregate",
        json!({"input": "masked.tif", "output": "masked_2.tif", "factor": [2, 2],
               "statistic": "average"}),
    )
    .await;
    assert!(!is_error(&done), "{}", text(&done));
    let (values, nodata) = band(&server.path("masked_2.tif"), 1);
    let nodata = nodata.expect("a declared nodata");
    let valid: Vec<f64> = values
        .into_iter()
        .filter(|v| !(v.is_nan() || *v == nodata))
        .collect();
    assert_eq!(valid.len(), 70, "{valid:?}");
    assert!(valid.iter().all(|v| *v == 100.0), "{valid:?}");
}

/// Attack round 14, R14-B11: a raster whose nodata is NaN (the host's own reprojection fill)
/// converted to Int16: gdal_translate declared 0 and wrote 960 of 1,000 nodata cells as
/// -32768 values. The conversion is an argument error now, naming Float32 and `raster_calc`;
/// the twin with a numeric nodata converts.
#[tokio::test]
async fn r14_b11_a_nan_nodata_is_not_narrowed_to_an_integer_by_a_copy() {
    let server = server().await;
    let grid = [500_000.0, 10.0, 0.0, 6_000_000.0, 0.0, -10.0];
    for (name, nodata) in [("nan.tif", f64::NAN), ("num.tif", -9999.0)] {
        write::<f32>(
            &server.path(name),
            "GTiff",
            (10, 10),
            1,
            grid,
            &[],
            move |_, i| if i < 10 { nodata as f32 } else { 500.0 },
            move |_, band| band.set_no_data_value(Some(nodata)).unwrap(),
        );
    }
    let refused = run(
        &server,
        "raster_convert",
        json!({"input": "nan.tif", "output": "nan16.tif", "output_type": "Int16"}),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(text(&refused).contains("raster_calc"), "{}", text(&refused));
    assert!(!server.path("nan16.tif").exists());
    let twin = run(
        &server,
        "raster_convert",
        json!({"input": "num.tif", "output": "num16.tif", "output_type": "Int16"}),
    )
    .await;
    assert!(!is_error(&twin), "{}", text(&twin));
}

/// Attack round 14, R14-B19: the `nodata` a call gives for the cells outside the source was
/// not checked against the data: `nodata: 0` on a Byte image holding 0s made its valid 0-cells
/// nodata, silently. A value the data holds is an argument error now; a value it does not hold
/// runs.
#[tokio::test]
async fn r14_b19_a_nodata_the_data_holds_is_refused() {
    let server = server().await;
    write::<u8>(
        &server.path("bytes.tif"),
        "GTiff",
        (40, 40),
        1,
        OFF_MERIDIAN,
        &[],
        |_, i| if i % 7 == 0 { 0 } else { 100 },
        |_, _| {},
    );
    let refused = run(
        &server,
        "raster_reproject",
        json!({"input": "bytes.tif", "output": "b0.tif", "dst_crs": "EPSG:4326",
               "resampling": "nearest", "nodata": 0}),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("is a value of band 1"),
        "{}",
        text(&refused)
    );
    let twin = run(
        &server,
        "raster_reproject",
        json!({"input": "bytes.tif", "output": "b255.tif", "dst_crs": "EPSG:4326",
               "resampling": "nearest", "nodata": 255}),
    )
    .await;
    assert!(!is_error(&twin), "{}", text(&twin));
}

/// Attack round 14, R14-B17: `raster_convert` with `scale: [min, max, 0, 255]` to Byte of a
/// raster whose nodata (-9999) Byte cannot hold: GDAL clamps the nodata to 0, where the
/// rescale puts the data's minimum, and those valid cells became nodata. The nodata is judged
/// as the output type holds it now; the twin rescaled onto 1..255 runs.
#[tokio::test]
async fn r14_b17_a_rescale_onto_the_clamped_nodata_is_refused() {
    let server = server().await;
    let grid = [500_000.0, 10.0, 0.0, 6_000_000.0, 0.0, -10.0];
    write::<f32>(
        &server.path("dem.tif"),
        "GTiff",
        (50, 50),
        1,
        grid,
        &[],
        |_, i| {
            if i < 250 {
                -9999.0
            } else {
                100.0 + (i % 50) as f32 * 10.0
            }
        },
        |_, band| band.set_no_data_value(Some(-9999.0)).unwrap(),
    );
    let refused = run(
        &server,
        "raster_convert",
        json!({"input": "dem.tif", "output": "d0.tif", "output_type": "Byte",
               "scale": [100, 590, 0, 255]}),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("kept in the output as 0"),
        "{}",
        text(&refused)
    );
    let twin = run(
        &server,
        "raster_convert",
        json!({"input": "dem.tif", "output": "d1.tif", "output_type": "Byte",
               "scale": [100, 590, 1, 255]}),
    )
    .await;
    assert!(!is_error(&twin), "{}", text(&twin));
}

/// Attack round 16, R16-B19: `raster_convert nodata: 0` on a coastal DEM whose sea-level cells
/// hold 0 wrote them as nodata under "lossless: GTiff keeps every value", and 24 of 64 cells
/// vanished from every later statistic with no word. The count is a warning now; the twin, a
/// nodata no cell holds, warns of nothing. Found beside it: relabelling a band that declares
/// -9999, with two voids, to `nodata: 0` read the voids as -9999 m (gdal_translate -a_nodata
/// rewrites no cell). That is refused, naming `raster_calc`, and writes nothing; relabelling a
/// band whose declared nodata no cell holds runs.
#[tokio::test]
async fn r16_b19_a_new_nodata_counts_the_cells_it_takes_and_never_revives_voids() {
    let server = server().await;
    // Columns 0..2 at sea level (0 m), the rest 5 m a column higher: 24 cells of 64 hold 0.
    write::<i16>(
        &server.path("coast.tif"),
        "GTiff",
        (8, 8),
        1,
        OFF_MERIDIAN,
        &[],
        |_, i| (((i % 8) as i16) - 2).max(0) * 5,
        |_, _| {},
    );
    let answered = run(
        &server,
        "raster_convert",
        json!({"input": "coast.tif", "output": "coast0.tif", "nodata": 0}),
    )
    .await;
    assert!(!is_error(&answered), "{}", text(&answered));
    let warnings = structured(&answered)["warnings"].to_string();
    assert!(
        warnings.contains("24 of 64 cells of band 1 held 0"),
        "{warnings}"
    );
    let twin = run(
        &server,
        "raster_convert",
        json!({"input": "coast.tif", "output": "coast_low.tif", "nodata": -32768}),
    )
    .await;
    assert!(!is_error(&twin), "{}", text(&twin));
    let warnings = structured(&twin)["warnings"].to_string();
    assert!(!warnings.contains("held"), "{warnings}");

    // Two voids at -9999 among 1..62.
    for (name, voids) in [("voids.tif", 2usize), ("no_voids.tif", 0)] {
        write::<i16>(
            &server.path(name),
            "GTiff",
            (8, 8),
            1,
            OFF_MERIDIAN,
            &[],
            move |_, i| if i < voids { -9999 } else { 1 + i as i16 },
            |_, band| band.set_no_data_value(Some(-9999.0)).unwrap(),
        );
    }
    let refused = run(
        &server,
        "raster_convert",
        json!({"input": "voids.tif", "output": "voids0.tif", "nodata": 0}),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
    let message = text(&refused);
    assert!(
        message.contains("2 cells hold it") && message.contains("raster_calc"),
        "{message}"
    );
    assert!(!server.path("voids0.tif").exists());
    let relabelled = run(
        &server,
        "raster_convert",
        json!({"input": "no_voids.tif", "output": "no_voids0.tif", "nodata": 0}),
    )
    .await;
    assert!(!is_error(&relabelled), "{}", text(&relabelled));
    let (_, nodata) = band(&server.path("no_voids0.tif"), 1);
    assert_eq!(nodata, Some(0.0));
}
