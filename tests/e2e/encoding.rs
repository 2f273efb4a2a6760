//! Issue 21, item 6: whether an output encoding loses values is a fact of the driver and the
//! options as written, every raster writer goes through `format_selection` with it (band math
//! included), and lineage records it, so the next step's `second_lossy_encoding` fires.

use gdal::raster::Buffer;
use gdal::DriverManager;
use gdal_mcp_tests::{call_justified, is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::path::Path;

/// A 64 × 64 GeoTIFF of `bands` bands of `T` in EPSG:32633 with a gradient and noise.
fn write_raster<T: gdal::raster::GdalType + Copy>(
    path: &Path,
    bands: usize,
    value: impl Fn(usize, usize, usize) -> T,
) {
    let driver = DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut ds = driver
        .create_with_band_type::<T, _>(path, 64, 64, bands)
        .unwrap();
    ds.set_geo_transform(&[500_000.0, 10.0, 0.0, 4_000_640.0, 0.0, -10.0])
        .unwrap();
    ds.set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    for b in 1..=bands {
        let values: Vec<T> = (0..64 * 64).map(|i| value(b, i % 64, i / 64)).collect();
        ds.rasterband(b)
            .unwrap()
            .write((0, 0), (64, 64), &mut Buffer::new((64, 64), values))
            .unwrap();
    }
}

fn noise(b: usize, x: usize, y: usize) -> usize {
    (x * 7919 + y * 104_729 + b * 31).wrapping_mul(2_654_435_761) % 23
}

fn entry_of(refusal: &Value, domain: &str) -> Value {
    refusal["refusal"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["domain"] == domain))
        .cloned()
        .unwrap_or_else(|| panic!("{domain} did not gate: {refusal}"))
}

fn evidence<'a>(entry: &'a Value, id: &str) -> &'a Value {
    entry["evidence"]
        .as_array()
        .and_then(|items| items.iter().find(|e| e["id"] == id))
        .unwrap_or_else(|| panic!("no evidence {id}: {entry}"))
}

/// Regression (issue 21): `raster_calc` wrote LERC with an error bound with no gate and no
/// receipt (80-96 % of cells changed). Now format_selection gates it, the result reports the
/// cells the encoding changed (measured on the written file), and the next lossy step sees it.
#[tokio::test]
async fn band_math_with_a_lossy_encoding_is_gated_measured_and_recorded() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_raster::<f32>(&server.path("dem.tif"), 1, |_, x, y| {
        x as f32 * 1.37 + y as f32 * 0.71 + noise(1, x, y) as f32 * 0.013
    });
    let lerc = json!({"inputs": {"a": "dem.tif"}, "expression": "a * 2",
                      "output": "lerc.tif", "data_type": "Float32",
                      "creation_options": {"COMPRESS": "LERC", "MAX_Z_ERROR": "0.5"}});
    let refused = server.call("raster_calc", lerc.clone()).await.unwrap();
    assert!(is_error(&refused));
    let entry = entry_of(&structured(&refused), "format_selection");
    assert_eq!(entry["severity"], "required", "{entry}");
    let fact = evidence(&entry, "lossy_encoding")["fact"].as_str().unwrap();
    assert!(fact.contains("LERC with max_z_error 0.5"), "{fact}");
    assert!(!server.path("lerc.tif").exists());

    let done = call_justified(&server, "raster_calc", lerc).await.unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let out = structured(&done.result);
    assert_eq!(out["encoding"]["lossy"], json!(true), "{out}");
    let changed = out["encoding"]["changed_cells"].as_u64().unwrap();
    assert!(changed > 64 * 64 / 2, "{out}");
    assert!(out["encoding"]["max_abs_change"].as_f64().unwrap() <= 0.5 + 1e-6);
    assert!(out["reflection"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["domain"] == "format_selection"));

    // The next lossy step names the band math's LERC upstream.
    let again = server
        .call(
            "raster_convert",
            json!({"input": "lerc.tif", "output": "again.tif", "compression": "LERC",
                   "max_z_error": 0.5}),
        )
        .await
        .unwrap();
    let entry = entry_of(&structured(&again), "format_selection");
    let second = evidence(&entry, "second_lossy_encoding")["fact"]
        .as_str()
        .unwrap();
    assert!(
        second.contains("raster_calc") && second.contains("LERC max_z_error 0.5"),
        "{second}"
    );

    // The clean twin: band math with its default encoding is not gated and changes nothing.
    let plain = server
        .call(
            "raster_calc",
            json!({"inputs": {"a": "dem.tif"}, "expression": "a * 2",
                   "output": "plain.tif", "data_type": "Float32"}),
        )
        .await
        .unwrap();
    assert!(!is_error(&plain), "{}", text(&plain));
    let out = structured(&plain);
    assert_eq!(out["encoding"]["changed_cells"], json!(0), "{out}");
    assert_eq!(out["encoding"]["compression"], json!("ZSTD"));
}

/// Regression (issue 21): JPEG 2000 with its defaults got only a `warn`, WebP at quality 100
/// passed as lossless, and lineage recorded both as not lossy, so a second lossy encoding
/// was never named. Both are now required decisions and recorded lossy.
#[tokio::test]
async fn jpeg2000_defaults_and_webp_at_100_are_lossy_and_recorded_so() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    write_raster::<u8>(&server.path("rgb.tif"), 3, |b, x, y| {
        ((x * 3 + y * 2 * b + noise(b, x, y) * 5) % 256) as u8
    });
    for (output, arguments, upstream) in [
        (
            "rgb.jp2",
            json!({"format": "JP2OpenJPEG"}),
            "JPEG2000 quality 25",
        ),
        (
            "rgb.webp",
            json!({"format": "WEBP", "quality": 100}),
            "WEBP quality 100",
        ),
    ] {
        let mut call = json!({"input": "rgb.tif", "output": output});
        call.as_object_mut()
            .unwrap()
            .extend(arguments.as_object().unwrap().clone());
        let refused = server.call("raster_convert", call.clone()).await.unwrap();
        let entry = entry_of(&structured(&refused), "format_selection");
        assert_eq!(entry["severity"], "required", "{output}: {entry}");
        evidence(&entry, "lossy_encoding");
        let done = call_justified(&server, "raster_convert", call)
            .await
            .unwrap();
        assert!(!is_error(&done.result), "{}", text(&done.result));
        // Read back: the cells did change.
        let before = gdal::Dataset::open(server.path("rgb.tif")).unwrap();
        let after = gdal::Dataset::open(server.path(output)).unwrap();
        let read = |d: &gdal::Dataset| {
            d.rasterband(1)
                .unwrap()
                .read_as::<u8>((0, 0), (64, 64), (64, 64), None)
                .unwrap()
                .data()
                .to_vec()
        };
        let changed = read(&before)
            .iter()
            .zip(read(&after))
            .filter(|(a, b)| **a != *b)
            .count();
        assert!(changed > 0, "{output}: no cell changed");
        // The next lossy write names it as the upstream encoding.
        let next = server
            .call(
                "raster_convert",
                json!({"input": output, "output": format!("twice-{}.tif", output.replace('.', "-")),
                       "compression": "JPEG"}),
            )
            .await
            .unwrap();
        let entry = entry_of(&structured(&next), "format_selection");
        let second = evidence(&entry, "second_lossy_encoding")["fact"]
            .as_str()
            .unwrap();
        assert!(second.contains(upstream), "{output}: {second}");
    }
    // The clean twin: lossless JPEG 2000 is an advisory, and nothing changes.
    let lossless = server
        .call(
            "raster_convert",
            json!({"input": "rgb.tif", "output": "exact.jp2", "format": "JP2OpenJPEG",
                   "creation_options": {"REVERSIBLE": "YES", "QUALITY": "100"}}),
        )
        .await
        .unwrap();
    assert!(!is_error(&lossless), "{}", text(&lossless));
    let receipts = structured(&lossless)["reflection"].clone();
    assert!(
        receipts
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["domain"] == "format_selection" && r["decision"] == "warn"),
        "{receipts}"
    );
}

/// Regression (attack round 7, R7-3): `PIXELTYPE=SIGNEDBYTE` passed as lossless ("GTiff (NONE)
/// keeps every value") while GDAL read 2048 of 4096 cells back changed (130 as -126), and the
/// server's own `raster_stats` and `raster_sample` read such a file as unsigned (0..255 where
/// GDAL reads -128..127). The encoding fact reads the input's largest value; the readers
/// honour the band's `PIXELTYPE`. Twin: the same option on values of at most 127 runs.
#[tokio::test]
async fn r7_3_signed_bytes_are_lossy_above_127_and_read_signed() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // 0..255, each 16 times; and 0..127, each 32 times.
    write_raster::<u8>(&server.path("ramp.tif"), 1, |_, x, y| {
        ((x + 64 * y) % 256) as u8
    });
    write_raster::<u8>(&server.path("low.tif"), 1, |_, x, y| {
        ((x + 64 * y) % 128) as u8
    });
    let signed = |input: &str, output: &str| {
        json!({"input": input, "output": output,
               "creation_options": {"PIXELTYPE": "SIGNEDBYTE"}})
    };
    let refused = server
        .call("raster_convert", signed("ramp.tif", "ramp_sb.tif"))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let entry = entry_of(&structured(&refused), "format_selection");
    let fact = evidence(&entry, "lossy_encoding")["fact"].as_str().unwrap();
    assert!(
        fact.contains("SIGNEDBYTE") && fact.contains("255") && fact.contains("-1"),
        "{fact}"
    );
    assert!(!server.path("ramp_sb.tif").exists());

    let twin = server
        .call("raster_convert", signed("low.tif", "low_sb.tif"))
        .await
        .unwrap();
    assert!(!is_error(&twin), "{}", text(&twin));

    // A signed-byte file made outside: GDAL reads -128..127, mean -0.5.
    let status = std::process::Command::new("gdal_translate")
        .args(["-q", "-co", "PIXELTYPE=SIGNEDBYTE"])
        .arg(server.path("ramp.tif"))
        .arg(server.path("outside_sb.tif"))
        .status()
        .unwrap();
    assert!(status.success());
    let stats = server
        .call("raster_stats", json!({"input": "outside_sb.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
    let band = &structured(&stats)["bands"][0];
    assert_eq!(band["min"], json!(-128.0), "{band}");
    assert_eq!(band["max"], json!(127.0), "{band}");
    assert!(
        (band["mean"].as_f64().unwrap() + 0.5).abs() < 1e-9,
        "{band}"
    );
    // Row 3, column 63 holds byte 255: -1 signed.
    let sample = server
        .call(
            "raster_sample",
            json!({"input": "outside_sb.tif", "coordinates": [[500_635.0, 4_000_605.0]]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&sample), "{}", text(&sample));
    let point = &structured(&sample)["points"][0];
    assert_eq!(point["column"], 63, "{point}");
    assert_eq!(point["values"][0]["value"], json!(-1.0), "{point}");
}

/// Regression (attack round 8, R8-12): R7-3 taught `raster_stats` and `raster_sample` to read
/// a band that declares `PIXELTYPE=SIGNEDBYTE` as GDAL does (-128..127), but `zonal_stats`
/// answered 200 where GDAL reads -56, `raster_calc "a"` to Float32 wrote 200 in every cell,
/// `raster_composite` and `raster_aggregate` (gdalwarp, which reads the stored bytes) wrote
/// 200 too. Every host-side cell read now goes through one read that honours the mark, and
/// GDAL's programs refuse a signed band holding negative values. Twins: a plain Byte band with
/// the same stored bytes still reads 200 everywhere; a signed band of 0..127 aggregates.
#[tokio::test]
async fn r8_12_signed_bytes_read_signed_by_every_tool() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // Stored bytes: 10 in the west half, 200 in the east half (GDAL reads 200 signed as -56).
    write_raster::<u8>(
        &server.path("plain.tif"),
        1,
        |_, x, _| {
            if x < 32 {
                10
            } else {
                200
            }
        },
    );
    write_raster::<u8>(
        &server.path("low.tif"),
        1,
        |_, x, _| {
            if x < 32 {
                10
            } else {
                100
            }
        },
    );
    for (from, to) in [("plain.tif", "sb.tif"), ("low.tif", "low_sb.tif")] {
        let status = std::process::Command::new("gdal_translate")
            .args(["-q", "-co", "PIXELTYPE=SIGNEDBYTE"])
            .arg(server.path(from))
            .arg(server.path(to))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let read = |name: &str| -> Vec<f64> {
        let dataset = gdal::Dataset::open(server.path(name)).unwrap();
        let band = dataset.rasterband(1).unwrap();
        let (w, h) = band.size();
        band.read_as::<f64>((0, 0), (w, h), (w, h), None)
            .unwrap()
            .data()
            .to_vec()
    };
    // West column 0 and east column 63 of row 0, after a copy or composite on the same grid.
    let ends = |name: &str| {
        let cells = read(name);
        (cells[0], cells[63])
    };

    for (input, east) in [("sb.tif", -56.0), ("plain.tif", 200.0)] {
        // raster_calc "a" to Float32: a copy.
        let output = format!("calc_{input}");
        let calc = call_justified(
            &server,
            "raster_calc",
            json!({"inputs": {"a": input}, "expression": "a", "output": output,
                   "data_type": "Float32"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&calc.result), "{input}: {}", text(&calc.result));
        assert_eq!(ends(&output), (10.0, east), "raster_calc of {input}");

        // raster_composite mean of the raster with itself.
        let output = format!("mean_{input}");
        let composite = call_justified(
            &server,
            "raster_composite",
            json!({"inputs": [input, input], "output": output, "statistic": "mean"}),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&composite.result),
            "{input}: {}",
            text(&composite.result)
        );
        assert_eq!(ends(&output), (10.0, east), "raster_composite of {input}");

        // zonal_stats over the whole raster: half 10, half `east`.
        std::fs::write(
            server.path("zone.geojson"),
            r#"{"type": "FeatureCollection",
                "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}},
                "features": [{"type": "Feature", "properties": {"name": "all"},
                  "geometry": {"type": "Polygon", "coordinates": [[[500000, 4000000],
                    [500640, 4000000], [500640, 4000640], [500000, 4000640], [500000, 4000000]]]}}]}"#,
        )
        .unwrap();
        let zonal = call_justified(
            &server,
            "zonal_stats",
            json!({"input": input, "zones": "zone.geojson", "stats": ["mean", "min", "max"],
                   "id_field": "name", "semantics": "cell_centre"}),
        )
        .await
        .unwrap();
        assert!(!is_error(&zonal.result), "{input}: {}", text(&zonal.result));
        let zone = &structured(&zonal.result)["features"][0];
        let (min, max) = (east.min(10.0), east.max(10.0));
        assert_eq!(zone["min"], json!(min), "{input}: {zone}");
        assert_eq!(zone["max"], json!(max), "{input}: {zone}");
        assert!(
            (zone["mean"].as_f64().unwrap() - (10.0 + east) / 2.0).abs() < 1e-6,
            "{input}: {zone}"
        );
    }

    // raster_aggregate is gdalwarp, which reads the stored bytes: refused on negative signed
    // bytes, naming the copy that reads them signed; nothing written.
    let aggregate = |input: &str, output: &str| {
        json!({"input": input, "output": output, "factor": 2, "statistic": "average",
               "output_type": "Float32"})
    };
    let refused = call_justified(
        &server,
        "raster_aggregate",
        aggregate("sb.tif", "agg_sb.tif"),
    )
    .await
    .unwrap();
    assert!(is_error(&refused.result));
    let message = text(&refused.result);
    assert!(
        message.contains("SIGNEDBYTE") && message.contains("raster_calc"),
        "{message}"
    );
    assert!(!server.path("agg_sb.tif").exists());
    // Twins: the plain band and a signed band of 0..127 (the same read either way) aggregate.
    for (input, east) in [("plain.tif", 200.0), ("low_sb.tif", 100.0)] {
        let output = format!("agg_{input}");
        let done = call_justified(&server, "raster_aggregate", aggregate(input, &output))
            .await
            .unwrap();
        assert!(!is_error(&done.result), "{input}: {}", text(&done.result));
        let cells = read(&output);
        assert_eq!((cells[0], cells[31]), (10.0, east), "{input}");
    }
}

/// The `format_selection` entries of a result: in its refusal, or among its receipts.
fn format_findings(result: &gdal_mcp_tests::Justified) -> Vec<Value> {
    let mut found: Vec<Value> = result.refusal["refusal"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["domain"] == "format_selection")
        .cloned()
        .collect();
    found.extend(
        structured(&result.result)["reflection"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["domain"] == "format_selection")
            .cloned(),
    );
    found
}

/// Regression (attack round 8, R8-3): R7-3's signed-byte fact read the input's largest value,
/// so `raster_resample` with lanczos of a 0..127 step under `PIXELTYPE=SIGNEDBYTE` ran with no
/// finding while lanczos wrote cells above 127 (read back negative), and `raster_aggregate
/// sum` saturated at 255 (read back -1). The fact now carries the input's range through the
/// method. Twins: nearest, average and mode of the same 0..127 raster, and a sum that stays
/// within 127, are silent.
#[tokio::test]
async fn r8_3_signed_bytes_are_lossy_where_the_method_leaves_the_input_range() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    // A step from 0 to 127, with every other cell of every other row 0 (the repro's fixture).
    write_raster::<u8>(&server.path("step.tif"), 1, |_, x, y| {
        if x < 32 || (x % 2 == 0 && y % 2 == 0) {
            0
        } else {
            127
        }
    });
    write_raster::<u8>(&server.path("small.tif"), 1, |_, x, _| (x % 32) as u8);
    let max_of = |name: &str| -> f64 {
        let dataset = gdal::Dataset::open(server.path(name)).unwrap();
        let band = dataset.rasterband(1).unwrap();
        let (w, h) = band.size();
        band.read_as::<f64>((0, 0), (w, h), (w, h), None)
            .unwrap()
            .data()
            .iter()
            .fold(f64::MIN, |a, b| a.max(*b))
    };
    let resample = |method: &str, output: &str, signed: bool| {
        let mut args = json!({"input": "step.tif", "output": output, "resolution": [5, 5],
                              "resampling": method});
        if signed {
            args["creation_options"] = json!({"PIXELTYPE": "SIGNEDBYTE"});
        }
        args
    };
    // Measured, not assumed: plain Byte lanczos writes above 127.
    let plain = call_justified(
        &server,
        "raster_resample",
        resample("lanczos", "l.tif", false),
    )
    .await
    .unwrap();
    assert!(!is_error(&plain.result), "{}", text(&plain.result));
    assert!(
        max_of("l.tif") > 127.0,
        "lanczos overshoots: {}",
        max_of("l.tif")
    );
    assert!(format_findings(&plain).is_empty());

    let lanczos = call_justified(
        &server,
        "raster_resample",
        resample("lanczos", "l_sb.tif", true),
    )
    .await
    .unwrap();
    let entry = entry_of(&lanczos.refusal, "format_selection");
    let fact = evidence(&entry, "lossy_encoding")["fact"].as_str().unwrap();
    assert!(
        fact.contains("SIGNEDBYTE") && fact.contains("lanczos"),
        "{fact}"
    );
    for method in ["nearest", "average", "mode"] {
        let output = format!("{method}_sb.tif");
        let twin = call_justified(&server, "raster_resample", resample(method, &output, true))
            .await
            .unwrap();
        assert!(!is_error(&twin.result), "{method}: {}", text(&twin.result));
        assert!(
            format_findings(&twin).is_empty(),
            "{method}: {:?}",
            format_findings(&twin)
        );
        assert!(max_of(&output) <= 127.0, "{method}");
    }

    // raster_aggregate sum of 2 x 2 blocks: 4 x 127 saturates; 4 x 31 = 124 stays signed.
    let sum = |input: &str, output: &str| {
        json!({"input": input, "output": output, "factor": 2, "statistic": "sum",
               "output_type": "Byte", "creation_options": {"PIXELTYPE": "SIGNEDBYTE"}})
    };
    // Since R10-6 the host refuses a Byte output the sums cannot fit before the gate (the
    // values read exactly: 4 x 127 = 508), naming a type that holds them.
    let refused = server
        .call("raster_aggregate", sum("step.tif", "sum_sb.tif"))
        .await
        .unwrap();
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("Byte cannot hold the sums")
            && text(&refused).contains("0..508")
            && text(&refused).contains("UInt16"),
        "{}",
        text(&refused)
    );
    let twin = call_justified(
        &server,
        "raster_aggregate",
        sum("small.tif", "sum_small.tif"),
    )
    .await
    .unwrap();
    assert!(!is_error(&twin.result), "{}", text(&twin.result));
    assert!(
        format_findings(&twin).is_empty(),
        "{:?}",
        format_findings(&twin)
    );
    // Columns 30 and 31 of two rows: 2 x (30 + 31), within the bound 4 x 31.
    assert_eq!(max_of("sum_small.tif"), 122.0);
}

/// Round 14 (follow-up of attack round 13, R13-B5): `nodata_lost` (critical) was raised for
/// every GeoPackage of two Byte bands and more, while GDAL 3.6.2 keeps one nodata value and
/// reads it back on every band. A 3-band Byte raster declaring nodata 0 (a 4 × 4 block of it)
/// written with PNG tiles now runs as an advisory `lossless_write`: every band reads back
/// nodata 0 and no cell changes. Under the default `PNG_JPEG` tiles the cells next to nodata
/// are blurred, and that is what is asked (`lossy_near_nodata`), not `nodata_lost`.
#[tokio::test]
async fn gpkg_multi_band_nodata_is_kept_and_not_called_lost() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let source = server.path("rgb.tif");
    write_raster::<u8>(&source, 3, |b, x, y| {
        if x < 4 && y < 4 {
            0
        } else {
            (1 + (x * 3 + y * 5 + noise(b, x, y)) % 250) as u8
        }
    });
    {
        let ds = gdal::Dataset::open_ex(
            &source,
            gdal::DatasetOptions {
                open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
                ..Default::default()
            },
        )
        .unwrap();
        for b in 1..=3 {
            ds.rasterband(b)
                .unwrap()
                .set_no_data_value(Some(0.0))
                .unwrap();
        }
    }
    let png = server
        .call(
            "raster_convert",
            json!({"input": "rgb.tif", "output": "png.gpkg", "format": "GPKG",
                   "creation_options": {"TILE_FORMAT": "PNG"}}),
        )
        .await
        .unwrap();
    assert!(!is_error(&png), "{}", text(&png));
    let receipts: Vec<Value> = structured(&png)["reflection"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["domain"] == "format_selection")
        .cloned()
        .collect();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(receipts[0]["decision"], "warn", "{receipts:?}");
    assert!(
        !receipts[0].to_string().contains("nodata_lost"),
        "{receipts:?}"
    );
    let written = gdal::Dataset::open(server.path("png.gpkg")).unwrap();
    let original = gdal::Dataset::open(&source).unwrap();
    for b in 1..=3 {
        let band = written.rasterband(b).unwrap();
        assert_eq!(band.no_data_value(), Some(0.0), "band {b}");
        let got = band
            .read_as::<u8>((0, 0), (64, 64), (64, 64), None)
            .unwrap();
        let want = original
            .rasterband(b)
            .unwrap()
            .read_as::<u8>((0, 0), (64, 64), (64, 64), None)
            .unwrap();
        assert_eq!(got.data(), want.data(), "band {b}");
    }

    let default = server
        .call(
            "raster_convert",
            json!({"input": "rgb.tif", "output": "jpeg.gpkg", "format": "GPKG"}),
        )
        .await
        .unwrap();
    let refusal = structured(&default);
    let entry = entry_of(&refusal, "format_selection");
    evidence(&entry, "lossy_near_nodata");
    assert!(!entry.to_string().contains("nodata_lost"), "{entry}");
}
