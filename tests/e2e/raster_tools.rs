//! The everyday raster tools over stdio on real data, each checked against GDAL's own
//! command-line programs run with the command the tool reported (pixel-identical, overviews
//! included), and their refusals of bad input.

use crate::oracle;
use gdal_mcp_tests::{call_justified, is_error, structured, text, Era, Options, Server};
use serde_json::{json, Value};
use std::path::Path;

fn options(data: &[&'static str]) -> Options {
    Options {
        data: data.to_vec(),
        ..Default::default()
    }
}

/// Replay the reported commands into `<name>.ref.<ext>` and compare pixels.
fn assert_matches_cli(server: &Server, result: &Value, output: &str) {
    let actual = server.path(output);
    let reference = server.path(&format!("ref_{output}"));
    oracle::replay(&result["commands"], &actual, &reference).expect("CLI replay");
    oracle::assert_pixel_identical(&actual, &reference).expect("pixel-identical to the CLI");
}

fn read_all(path: &Path, band: usize) -> Vec<f64> {
    let dataset = gdal::Dataset::open(path).expect("open");
    let band = dataset.rasterband(band).expect("band");
    let (w, h) = band.size();
    band.read_as::<f64>((0, 0), (w, h), (w, h), None)
        .expect("read")
        .data()
        .to_vec()
}

#[tokio::test]
async fn raster_stats_match_an_independent_computation_on_landsat() {
    let server = Server::start(Era::Modern, options(&["L7_ETMs.tif"]))
        .await
        .unwrap();
    let result = server
        .call(
            "raster_stats",
            json!({"input": "L7_ETMs.tif", "bands": [1, 4], "percentiles": [0, 10, 50, 90, 100], "histogram_bins": 8}),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    let out = structured(&result);
    assert_eq!(out["sampled"], json!(false));
    for (i, band) in [1usize, 4].into_iter().enumerate() {
        let mut values = read_all(&server.path("L7_ETMs.tif"), band);
        let stats = &out["bands"][i];
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        values.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let rank = p / 100.0 * (n - 1.0);
            let lo = rank.floor() as usize;
            let hi = rank.ceil() as usize;
            values[lo] + (values[hi] - values[lo]) * (rank - lo as f64)
        };
        assert_eq!(stats["band"], json!(band));
        assert_eq!(stats["valid_count"], json!(values.len()));
        assert_eq!(stats["min"], json!(values[0]));
        assert_eq!(stats["max"], json!(values[values.len() - 1]));
        assert!((stats["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
        assert!((stats["std"].as_f64().unwrap() - std).abs() < 1e-9);
        for (j, p) in [0.0, 10.0, 50.0, 90.0, 100.0].iter().enumerate() {
            let got = stats["percentiles"][j]["value"].as_f64().unwrap();
            assert!((got - pct(*p)).abs() < 1e-9, "band {band} p{p}: {got}");
        }
        let counts: u64 = stats["histogram"]["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(
            counts,
            values.len() as u64,
            "the histogram holds every value"
        );
    }
    // Sampling is honoured and flagged only when the raster is bigger than the sample.
    let sampled = server
        .call(
            "raster_stats",
            json!({"input": "L7_ETMs.tif", "sample": true}),
        )
        .await
        .unwrap();
    assert_eq!(structured(&sampled)["sampled"], json!(false));
    let bad = server
        .call(
            "raster_stats",
            json!({"input": "L7_ETMs.tif", "bands": [7]}),
        )
        .await
        .unwrap();
    assert!(is_error(&bad));
    assert!(text(&bad).contains("bands 1 to 6"), "{}", text(&bad));
}

#[tokio::test]
async fn raster_convert_cog_and_gtiff_overviews_equal_gdal_translate_and_gdaladdo() {
    let server = Server::start(
        Era::Legacy,
        options(&["L7_ETMs.tif", "lc.tif", "lc.tif.aux.xml"]),
    )
    .await
    .unwrap();
    // Lossless COG without overviews: advisory at most, runs at once.
    let cog = call_justified(
        &server,
        "raster_convert",
        json!({"input": "lc.tif", "output": "lc_cog.tif", "format": "COG", "compression": "DEFLATE"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&cog.result), "{}", text(&cog.result));
    let out = structured(&cog.result);
    assert_eq!(out["driver"], json!("GTiff"));
    assert_matches_cli(&server, &out, "lc_cog.tif");
    // A GeoTIFF with predictor and average overviews: resampling is asked about.
    let tiff = call_justified(
        &server,
        "raster_convert",
        json!({"input": "L7_ETMs.tif", "output": "l7.tif", "compression": "ZSTD", "predictor": 2,
               "tiled": true, "block_size": 128, "overviews": {"resampling": "average", "levels": [2, 4]}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&tiff.result), "{}", text(&tiff.result));
    assert!(
        tiff.refused_by().iter().any(|(d, _)| d == "resampling"),
        "overviews are a resampling decision: {:?}",
        tiff.refused_by()
    );
    let out = structured(&tiff.result);
    assert_eq!(out["report"]["overview_levels"], json!([2, 4]));
    assert_eq!(
        out["commands"].as_array().unwrap().len(),
        2,
        "translate then gdaladdo"
    );
    assert_matches_cli(&server, &out, "l7.tif");
}

#[tokio::test]
async fn raster_convert_refuses_bad_options_before_any_work() {
    let server = Server::start(Era::Modern, options(&["dem.tif"]))
        .await
        .unwrap();
    let cases = [
        (json!({"format": "NOPE"}), "not a GDAL driver"),
        (
            json!({"format": "PNG", "compression": "DEFLATE"}),
            "no COMPRESS option",
        ),
        (
            json!({"compression": "LZMA", "creation_options": {"COMPRESS": "ZSTD"}}),
            "contradicts",
        ),
        (json!({"predictor": 2}), "predictor"),
        (
            json!({"compression": "DEFLATE", "max_z_error": 0.1}),
            "LERC",
        ),
        (json!({"format": "COG", "tiled": false}), "always tiled"),
        (
            json!({"format": "COG", "overviews": {"resampling": "average", "levels": [2]}}),
            "picks its overview levels",
        ),
        (
            json!({"creation_options": {"NOT_AN_OPTION": "1"}}),
            "NOT_AN_OPTION",
        ),
        (json!({"bands": [2]}), "band 2 does not exist"),
    ];
    for (extra, expected) in cases {
        let mut args = json!({"input": "dem.tif", "output": "out.tif"});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        let result = server.call("raster_convert", args.clone()).await.unwrap();
        assert!(is_error(&result), "{args} should fail");
        assert!(
            text(&result).contains(expected),
            "{args}: expected \"{expected}\" in: {}",
            text(&result)
        );
        assert!(!server.path("out.tif").exists(), "{args} left a file");
    }
    let leftovers: Vec<_> = std::fs::read_dir(server.workspace.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gdal-mcp-"))
        .collect();
    assert!(leftovers.is_empty(), "staging folders left: {leftovers:?}");
    // The output may not be the input, even with overwrite.
    let same = server
        .call(
            "raster_convert",
            json!({"input": "dem.tif", "output": "dem.tif", "overwrite": true}),
        )
        .await
        .unwrap();
    assert!(is_error(&same) && text(&same).contains("input"));
}

#[tokio::test]
async fn raster_resample_and_aggregate_equal_gdalwarp_and_block_means() {
    let server = Server::start(Era::Legacy, options(&["dem.tif"]))
        .await
        .unwrap();
    let resampled = call_justified(
        &server,
        "raster_resample",
        json!({"input": "dem.tif", "output": "dem_200.tif", "resampling": "cubic", "resolution": [200, 200]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&resampled.result), "{}", text(&resampled.result));
    assert_eq!(
        resampled.refused_by(),
        vec![("resampling".to_string(), "required".to_string())]
    );
    let out = structured(&resampled.result);
    assert_eq!(out["pixel_size"], json!([200.0, -200.0]));
    assert_matches_cli(&server, &out, "dem_200.tif");

    let aggregated = call_justified(
        &server,
        "raster_aggregate",
        json!({"input": "dem.tif", "output": "dem_x4.tif", "factor": 4, "statistic": "average"}),
    )
    .await
    .unwrap();
    assert!(
        !is_error(&aggregated.result),
        "{}",
        text(&aggregated.result)
    );
    assert!(aggregated
        .refused_by()
        .iter()
        .any(|(d, _)| d == "aggregation"));
    let out = structured(&aggregated.result);
    assert_matches_cli(&server, &out, "dem_x4.tif");
    // Hand check: every full 4x4 block is the mean of its 16 cells (dem.tif is 111x111).
    let dem = read_all(&server.path("dem.tif"), 1);
    let agg = read_all(&server.path("dem_x4.tif"), 1);
    assert_eq!(
        (out["width"].as_u64(), out["height"].as_u64()),
        (Some(28), Some(28))
    );
    for by in 0..27 {
        for bx in 0..27 {
            let mut sum = 0.0;
            for y in 0..4 {
                for x in 0..4 {
                    sum += dem[(by * 4 + y) * 111 + bx * 4 + x];
                }
            }
            let got = agg[by * 28 + bx];
            assert!(
                (got - sum / 16.0).abs() < 1e-3,
                "block ({bx},{by}): {got} vs {}",
                sum / 16.0
            );
        }
    }
    assert_eq!(out["report"]["partial_edge_blocks"], json!(true));
}

#[tokio::test]
async fn raster_overviews_external_and_into_a_new_file_equal_gdaladdo() {
    let server = Server::start(Era::Modern, options(&["L7_ETMs.tif", "dem.tif"]))
        .await
        .unwrap();
    // L7_ETMs.tif has internal overviews: GDAL cannot add an .ovr beside them.
    let internal = server
        .call(
            "raster_overviews",
            json!({"input": "L7_ETMs.tif", "resampling": "average", "levels": [2, 4]}),
        )
        .await
        .unwrap();
    assert!(
        is_error(&internal) && text(&internal).contains("pass `output`"),
        "{}",
        text(&internal)
    );
    let before = std::fs::read(server.path("dem.tif")).unwrap();
    let external = call_justified(
        &server,
        "raster_overviews",
        json!({"input": "dem.tif", "resampling": "average", "levels": [2, 4]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&external.result), "{}", text(&external.result));
    let out = structured(&external.result);
    assert!(out["output"].as_str().unwrap().ends_with("dem.tif.ovr"));
    assert_eq!(
        std::fs::read(server.path("dem.tif")).unwrap(),
        before,
        "the input's bytes are untouched"
    );
    // Reference: gdaladdo -ro on a copy.
    std::fs::copy(server.path("dem.tif"), server.path("copy.tif")).unwrap();
    let status = std::process::Command::new("gdaladdo")
        .args(["-q", "-ro", "-r", "average"])
        .arg(server.path("copy.tif"))
        .args(["2", "4"])
        .status()
        .unwrap();
    assert!(status.success());
    oracle::assert_pixel_identical(&server.path("dem.tif"), &server.path("copy.tif")).unwrap();
    // Again without overwrite: refused, the .ovr stays.
    let again = server
        .call(
            "raster_overviews",
            json!({"input": "dem.tif", "resampling": "average", "levels": [2, 4]}),
        )
        .await
        .unwrap();
    assert!(
        is_error(&again) && text(&again).contains("overwrite"),
        "{}",
        text(&again)
    );
    // Into a new GeoTIFF.
    let new_file = call_justified(
        &server,
        "raster_overviews",
        json!({"input": "L7_ETMs.tif", "output": "l7_ovr.tif", "resampling": "nearest", "levels": [2]}),
    )
    .await
    .unwrap();
    assert!(!is_error(&new_file.result), "{}", text(&new_file.result));
    assert_matches_cli(&server, &structured(&new_file.result), "l7_ovr.tif");
}

#[tokio::test]
async fn raster_terrain_equals_gdaldem() {
    let server = Server::start(Era::Legacy, options(&["dem.tif"]))
        .await
        .unwrap();
    for (operation, extra) in [
        (
            "slope",
            json!({"slope_units": "percent", "compute_edges": true}),
        ),
        (
            "hillshade",
            json!({"azimuth": 300, "altitude": 40, "z_factor": 2}),
        ),
        ("aspect", json!({"algorithm": "zevenbergen_thorne"})),
        ("tri", json!({})),
        ("tpi", json!({})),
        ("roughness", json!({})),
    ] {
        let output = format!("{operation}.tif");
        let mut args = json!({"input": "dem.tif", "output": output, "operation": operation});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        let result = call_justified(&server, "raster_terrain", args)
            .await
            .unwrap();
        assert!(
            !is_error(&result.result),
            "{operation}: {}",
            text(&result.result)
        );
        assert_matches_cli(&server, &structured(&result.result), &output);
    }
    let bad = server
        .call(
            "raster_terrain",
            json!({"input": "dem.tif", "output": "x.tif", "operation": "tri", "azimuth": 10}),
        )
        .await
        .unwrap();
    assert!(
        is_error(&bad) && text(&bad).contains("hillshade"),
        "{}",
        text(&bad)
    );
}

#[tokio::test]
async fn float32_to_jpeg_is_refused_as_critical_by_format_selection() {
    let server = Server::start(
        Era::Modern,
        options(&["dem.tif", "lc.tif", "lc.tif.aux.xml"]),
    )
    .await
    .unwrap();
    let args = json!({"input": "dem.tif", "output": "dem.jpg", "format": "JPEG"});
    let refused = server.call("raster_convert", args.clone()).await.unwrap();
    assert!(is_error(&refused));
    let content = structured(&refused);
    let entry = content["refusal"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["domain"] == json!("format_selection")))
        .cloned()
        .unwrap_or_default();
    assert_eq!(entry["severity"], json!("critical"), "{content}");
    assert_eq!(entry["requires_assumptions"], json!(true));
    assert!(
        !server.path("dem.jpg").exists(),
        "nothing is written before the gate"
    );
    let justified = call_justified(&server, "raster_convert", args)
        .await
        .unwrap();
    assert!(!is_error(&justified.result), "{}", text(&justified.result));
    assert!(server.path("dem.jpg").exists());

    // Lossy JPEG compression inside a GeoTIFF of Byte data: required, not critical.
    let lossy = server
        .call(
            "raster_convert",
            json!({"input": "lc.tif", "output": "lc_jpeg.tif", "compression": "JPEG", "quality": 90}),
        )
        .await
        .unwrap();
    let severities: Vec<(String, String)> = structured(&lossy)["refusal"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["domain"].as_str().unwrap_or_default().to_string(),
                e["severity"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        severities.iter().any(|(d, _)| d == "format_selection"),
        "{severities:?}"
    );
}

/// An 8 x 8 Float32 raster in EPSG:32633 (30 m cells, top left 500000, 5000000) of `driver`
/// whose four west columns hold `nodata` (written as a double, so a Float32 cell holds it
/// rounded) and declare it, unless `declare` is false; the other cells hold 8 row + column +
/// 100.5, whose mean is 134.
fn write_float32_with_nodata(path: &Path, driver: &str, nodata: f64, declare: bool) {
    let driver = gdal::DriverManager::get_driver_by_name(driver).unwrap();
    let mut dataset = driver
        .create_with_band_type::<f32, _>(path, 8, 8, 1)
        .unwrap();
    dataset
        .set_geo_transform(&[500_000.0, 30.0, 0.0, 5_000_000.0, 0.0, -30.0])
        .unwrap();
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    let mut band = dataset.rasterband(1).unwrap();
    if declare {
        band.set_no_data_value(Some(nodata)).unwrap();
    }
    let cells: Vec<f64> = (0..64)
        .map(|i| {
            if i % 8 < 4 {
                nodata
            } else {
                f64::from(i) + 100.5
            }
        })
        .collect();
    band.write(
        (0, 0),
        (8, 8),
        &mut gdal::raster::Buffer::new((8, 8), cells),
    )
    .unwrap();
}

/// Regression (attack round 9, R9-4): an ENVI or EHdr Float32 band declaring -999.9 holds
/// float32(-999.9) in its nodata cells. GDAL compares them as float32 and skips them; the
/// host compared in double and counted them: `raster_stats` and `zonal_stats` answered a mean
/// of -432.95 for 134, `raster_sample` gave -999.9 as a value and `raster_calc` and
/// `raster_composite` wrote it. Every host read now compares with the nodata as the band's
/// type holds it, and so does a nodata given to `raster_stats`. Clean twin: -9999, which
/// Float32 holds exactly, gives the same answers.
#[tokio::test]
async fn r9_4_float32_nodata_is_compared_as_the_band_holds_it() {
    let near =
        |value: &Value, expected: f64| value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9);
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    std::fs::write(
        server.path("zones.geojson"),
        r#"{"type": "FeatureCollection",
            "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32633"}},
            "features": [{"type": "Feature", "properties": {"id": 1},
              "geometry": {"type": "Polygon", "coordinates": [[[500000, 5000000],
                [500240, 5000000], [500240, 4999760], [500000, 4999760], [500000, 5000000]]]}}]}"#,
    )
    .unwrap();
    for nodata in [-999.9f64, -9999.0] {
        for (driver, name) in [("ENVI", "en.dat"), ("EHdr", "eh.bil")] {
            let input = format!("{}_{name}", nodata.abs());
            write_float32_with_nodata(&server.path(&input), driver, nodata, true);
            let case = format!("{input} (nodata {nodata})");

            let stats = server
                .call("raster_stats", json!({"input": input}))
                .await
                .unwrap();
            assert!(!is_error(&stats), "{case}: {}", text(&stats));
            let band = &structured(&stats)["bands"][0];
            assert!(near(&band["mean"], 134.0), "{case}: {band}");
            assert_eq!(band["min"], json!(104.5), "{case}: {band}");
            assert_eq!(band["nodata_count"], json!(32), "{case}: {band}");
            // The nodata reported is the one the file declares.
            assert_eq!(band["nodata"], json!(nodata), "{case}: {band}");

            let zonal = call_justified(
                &server,
                "zonal_stats",
                json!({"input": input, "zones": "zones.geojson", "stats": ["mean", "min", "count"],
                       "semantics": "cell_centre"}),
            )
            .await
            .unwrap();
            assert!(!is_error(&zonal.result), "{case}: {}", text(&zonal.result));
            let zone = &structured(&zonal.result)["features"][0];
            assert!(near(&zone["mean"], 134.0), "{case}: {zone}");
            assert_eq!(zone["min"], json!(104.5), "{case}: {zone}");
            assert_eq!(zone["count"], json!(32.0), "{case}: {zone}");

            // Row 0: column 0 holds nodata, column 4 holds 104.5.
            let sample = server
                .call(
                    "raster_sample",
                    json!({"input": input, "coordinates": [[500015, 4999985], [500135, 4999985]]}),
                )
                .await
                .unwrap();
            assert!(!is_error(&sample), "{case}: {}", text(&sample));
            let points = &structured(&sample)["points"];
            assert_eq!(
                points[0]["values"][0]["nodata"],
                json!(true),
                "{case}: {points}"
            );
            assert_eq!(
                points[0]["values"][0]["value"],
                Value::Null,
                "{case}: {points}"
            );
            assert_eq!(
                points[1]["values"][0]["value"],
                json!(104.5),
                "{case}: {points}"
            );

            let output = format!("calc_{input}.tif");
            let calc = call_justified(
                &server,
                "raster_calc",
                json!({"inputs": {"a": input}, "expression": "a", "output": output,
                       "data_type": "Float32"}),
            )
            .await
            .unwrap();
            assert!(!is_error(&calc.result), "{case}: {}", text(&calc.result));
            let cells = &structured(&calc.result)["cells"];
            assert_eq!(cells["nodata_input"], json!(32), "{case}: {cells}");
            assert_eq!(cells["valid"], json!(32), "{case}: {cells}");
            let written = read_all(&server.path(&output), 1);
            assert!(written[0].is_nan(), "{case}: {written:?}");
            assert_eq!(written[4], 104.5, "{case}");

            let output = format!("mean_{input}.tif");
            let composite = call_justified(
                &server,
                "raster_composite",
                json!({"inputs": [input, input], "output": output, "statistic": "mean"}),
            )
            .await
            .unwrap();
            assert!(
                !is_error(&composite.result),
                "{case}: {}",
                text(&composite.result)
            );
            let written = read_all(&server.path(&output), 1);
            assert!(written[0].is_nan(), "{case}: {written:?}");
            assert_eq!(written[4], 104.5, "{case}");
        }

        // The same cells in a GeoTIFF declaring no nodata, and the nodata given as the
        // argument: it is compared as the band's type holds it too.
        let input = format!("undeclared_{}.tif", nodata.abs());
        write_float32_with_nodata(&server.path(&input), "GTiff", nodata, false);
        let stats = server
            .call("raster_stats", json!({"input": input, "nodata": nodata}))
            .await
            .unwrap();
        assert!(!is_error(&stats), "{input}: {}", text(&stats));
        let band = &structured(&stats)["bands"][0];
        assert_eq!(band["nodata_count"], json!(32), "{input}: {band}");
        assert!(near(&band["mean"], 134.0), "{input}: {band}");
    }

    // raster_calc's output: -999.90001 is written to Float32 as float32(-999.9), its nodata,
    // so the value is refused; to Float64 (the twin) it stays itself.
    for (data_type, refused) in [("Float32", true), ("Float64", false)] {
        let output = format!("collide_{data_type}.tif");
        let calc = call_justified(
            &server,
            "raster_calc",
            json!({"inputs": {"a": "9999_en.dat"}, "expression": "a * 0 - 999.90001",
                   "output": output, "data_type": data_type, "nodata": -999.9}),
        )
        .await
        .unwrap();
        assert_eq!(
            is_error(&calc.result),
            refused,
            "{data_type}: {}",
            text(&calc.result)
        );
        if refused {
            assert!(
                text(&calc.result).contains("nodata"),
                "{}",
                text(&calc.result)
            );
        }
        assert_eq!(server.path(&output).exists(), !refused, "{data_type}");
    }
}

/// `gdalinfo -checksum` of band 1 of `path`.
fn checksum(path: &Path) -> String {
    let out = std::process::Command::new("gdalinfo")
        .arg("-checksum")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find(|l| l.contains("Checksum="))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Attack round 13, R13-B9 (a false alarm): a clip of a DEM to an area on its own grid (its
/// CRS, its cell size, bounds on its cell edges) computes no value whatever the method, yet
/// the resampling domain asked to justify resampling continuous data. It runs ungated now,
/// and its cells are the input's window exactly; the twin half a cell off its grid is asked.
#[tokio::test]
async fn r13_b9_a_clip_on_the_rasters_own_grid_is_not_resampling() {
    let server = Server::start(Era::Legacy, options(&["dem.tif"]))
        .await
        .unwrap();
    let info = std::process::Command::new("gdalinfo")
        .arg("-json")
        .arg(server.path("dem.tif"))
        .output()
        .unwrap();
    let info: Value = serde_json::from_slice(&info.stdout).unwrap();
    let gt: Vec<f64> = serde_json::from_value(info["geoTransform"].clone()).unwrap();
    let (x0, px, y0) = (gt[0], gt[1], gt[3]);
    let clip = |shift: f64, output: &str| {
        json!({"input": "dem.tif", "output": output, "dst_crs": "EPSG:31985",
               "resampling": "bilinear", "resolution": [px, px],
               "bounds": {"xmin": x0 + (10.0 + shift) * px, "ymin": y0 - (50.0 + shift) * px,
                          "xmax": x0 + (60.0 + shift) * px, "ymax": y0 - (10.0 + shift) * px}})
    };
    let aligned = call_justified(&server, "raster_reproject", clip(0.0, "clip.tif"))
        .await
        .unwrap();
    assert!(!is_error(&aligned.result), "{}", text(&aligned.result));
    assert!(aligned.refused_by().is_empty(), "{:?}", aligned.refusal);
    let window = server.path("window.tif");
    let cut = std::process::Command::new("gdal_translate")
        .args(["-q", "-srcwin", "10", "10", "50", "40"])
        .arg(server.path("dem.tif"))
        .arg(&window)
        .status()
        .unwrap();
    assert!(cut.success());
    assert_eq!(checksum(&server.path("clip.tif")), checksum(&window));
    let off_grid = call_justified(&server, "raster_reproject", clip(0.5, "shifted.tif"))
        .await
        .unwrap();
    assert!(
        off_grid
            .refused_by()
            .contains(&("resampling".to_string(), "required".to_string())),
        "{:?}",
        off_grid.refusal
    );
}

/// A 2×1 CFloat32 GeoTIFF holding 3+4i and 6+8i (magnitudes 5 and 10), or, for the twin, a
/// Float32 one holding 3 and 6; UTM 33N, 10 m cells.
fn complex_or_real(path: &Path, complex: bool) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let data_type = if complex {
        gdal_sys::GDALDataType::GDT_CFloat32
    } else {
        gdal_sys::GDALDataType::GDT_Float32
    };
    // SAFETY: a live driver handle and a NUL-terminated path; the handle is owned below.
    let handle = unsafe {
        gdal_sys::GDALCreate(
            driver.c_driver(),
            c_path.as_ptr(),
            2,
            1,
            1,
            data_type,
            std::ptr::null_mut(),
        )
    };
    assert!(!handle.is_null());
    // SAFETY: the handle GDALCreate just returned, owned by the wrapper from here.
    let mut dataset = unsafe { gdal::Dataset::from_c_dataset(handle) };
    dataset
        .set_geo_transform(&[500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0])
        .unwrap();
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    let band = dataset.rasterband(1).unwrap();
    let mut cells: Vec<f32> = if complex {
        vec![3.0, 4.0, 6.0, 8.0]
    } else {
        vec![3.0, 6.0]
    };
    // SAFETY: a live band handle; `cells` holds 2 cells of the buffer type given.
    let written = unsafe {
        gdal_sys::GDALRasterIO(
            band.c_rasterband(),
            gdal_sys::GDALRWFlag::GF_Write,
            0,
            0,
            2,
            1,
            cells.as_mut_ptr().cast(),
            2,
            1,
            data_type,
            0,
            0,
        )
    };
    assert_eq!(written, gdal_sys::CPLErr::CE_None);
}

/// Attack round 14, R14-B15: GDAL 3.6 reads a complex cell into a real buffer as its real
/// part, so `raster_stats` summarised 3 and 6 (mean 4.5) for cells of magnitude 5 and 10, and
/// called the type "Unknown". Every host reader of cells now refuses a complex band as an
/// argument error naming its type and the ways to a real quantity; `raster_info` names the
/// type; the Float32 twin holding the same real parts is read as ever.
#[tokio::test]
async fn r14_b15_complex_bands_are_refused_by_every_reader_of_cells_not_read_as_real_parts() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    complex_or_real(&server.path("complex.tif"), true);
    complex_or_real(&server.path("real.tif"), false);
    let info = server
        .call("raster_info", json!({"input": "complex.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&info), "{}", text(&info));
    let report = structured(&info).to_string();
    assert!(report.contains("CFloat32"), "{report}");
    assert!(!report.contains("\"Unknown\""), "{report}");
    let refusals = [
        ("raster_stats", json!({"input": "complex.tif"})),
        (
            "raster_info",
            json!({"input": "complex.tif", "stats": true}),
        ),
        (
            "raster_sample",
            json!({"input": "complex.tif", "coordinates": [[500_005.0, 3_999_995.0]]}),
        ),
        (
            "raster_calc",
            json!({"inputs": {"a": "complex.tif"}, "expression": "a * 1", "output": "calc.tif",
                   "data_type": "Float32"}),
        ),
        (
            "raster_terrain",
            json!({"input": "complex.tif", "output": "tri.tif", "operation": "tri"}),
        ),
    ];
    for (tool, arguments) in refusals {
        let result = call_justified(&server, tool, arguments)
            .await
            .unwrap()
            .result;
        assert!(is_error(&result), "{tool}: {}", text(&result));
        assert_eq!(
            structured(&result)["error"]["kind"],
            "invalid_arguments",
            "{tool}: {}",
            text(&result)
        );
        let message = text(&result);
        assert!(
            message.contains("complex (CFloat32)") && message.contains("pixel function"),
            "{tool}: {message}"
        );
    }
    assert!(!server.path("calc.tif").exists(), "nothing written");
    assert!(!server.path("tri.tif").exists(), "nothing written");
    // The twin: the same real parts as Float32 are ordinary data.
    let stats = server
        .call("raster_stats", json!({"input": "real.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&stats), "{}", text(&stats));
    assert_eq!(structured(&stats)["bands"][0]["mean"], json!(4.5));
    let sample = server
        .call(
            "raster_sample",
            json!({"input": "real.tif", "coordinates": [[500_015.0, 3_999_995.0]]}),
        )
        .await
        .unwrap();
    assert!(!is_error(&sample), "{}", text(&sample));
    assert!(
        structured(&sample).to_string().contains("6.0"),
        "{}",
        text(&sample)
    );
}

/// A 4 x 4 GeoTIFF of `T` holding `cells`, UTM 33N, with `scale` and `offset` when given.
fn small<T: gdal::raster::GdalType + Copy>(path: &Path, cells: Vec<T>, packed: Option<(f64, f64)>) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver.create_with_band_type::<T, _>(path, 4, 4, 1).unwrap();
    dataset
        .set_geo_transform(&[500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0])
        .unwrap();
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(32633).unwrap())
        .unwrap();
    let mut band = dataset.rasterband(1).unwrap();
    if let Some((scale, offset)) = packed {
        band.set_scale(scale).unwrap();
        band.set_offset(offset).unwrap();
    }
    band.write(
        (0, 0),
        (4, 4),
        &mut gdal::raster::Buffer::new((4, 4), cells),
    )
    .unwrap();
}

/// Declare band 1's unit on the raster at `path` (the crate has no setter).
fn declare_unit(path: &Path, unit: &str) {
    let dataset = gdal::Dataset::open_ex(
        path,
        gdal::DatasetOptions {
            open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
            ..Default::default()
        },
    )
    .unwrap();
    let band = dataset.rasterband(1).unwrap();
    let unit = std::ffi::CString::new(unit).unwrap();
    // SAFETY: a live band handle and a NUL-terminated string GDAL copies.
    unsafe { gdal_sys::GDALSetRasterUnitType(band.c_rasterband(), unit.as_ptr()) };
}

/// Attack round 15, R15-B7 and R15-B12. `raster_info stats: true` gave GDAL's statistics of
/// the stored values (minimum 1, mean 8.5 for a band of raw x 0.5 + 100, whose values are
/// 100.5 and 104.25) and counted undeclared -9999 cells as data (minimum -9999): both are now
/// refused naming `raster_stats`, and the plain twin still gets its statistics. The
/// undeclared-code check (`raster_stats`) knows Float64's extremes and netCDF's default fill
/// too (mean -4.49e307 and 2.49e36 were answered for 105.5).
#[tokio::test]
async fn r15_b7_b12_statistics_of_stored_values_and_unknown_fills_are_refused() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let raw: Vec<i16> = (1..=16).collect();
    small(&server.path("packed.tif"), raw.clone(), Some((0.5, 100.0)));
    small(&server.path("plain.tif"), raw.clone(), None);
    let mut sentinel: Vec<f32> = (1..=16).map(|v| v as f32).collect();
    sentinel[0] = -9999.0;
    sentinel[5] = -9999.0;
    small(&server.path("sentinel.tif"), sentinel, None);
    for (input, kind, needle) in [
        ("packed.tif", "invalid_arguments", "x 0.5"),
        ("sentinel.tif", "data_conflict", "-9999"),
    ] {
        let result = server
            .call("raster_info", json!({"input": input, "stats": true}))
            .await
            .unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert_eq!(structured(&result)["error"]["kind"], kind, "{input}");
        let message = text(&result);
        assert!(
            message.contains(needle) && message.contains("raster_stats"),
            "{input}: {message}"
        );
    }
    let plain = server
        .call("raster_info", json!({"input": "plain.tif", "stats": true}))
        .await
        .unwrap();
    assert!(!is_error(&plain), "{}", text(&plain));
    assert!(
        structured(&plain).to_string().contains("8.5"),
        "{}",
        text(&plain)
    );

    for (name, fill) in [
        ("f64min.tif", f64::MIN),
        ("ncfill.tif", 9.969_209_968_386_869e36),
    ] {
        let mut cells: Vec<f64> = (100..116).map(f64::from).collect();
        for c in &mut cells[..4] {
            *c = fill;
        }
        small(&server.path(name), cells, None);
        let result = server
            .call("raster_stats", json!({"input": name}))
            .await
            .unwrap();
        assert!(is_error(&result), "{name}: {}", text(&result));
        assert_eq!(
            structured(&result)["error"]["kind"],
            "data_conflict",
            "{name}"
        );
        let declared = server
            .call("raster_stats", json!({"input": name, "nodata": fill}))
            .await
            .unwrap();
        assert!(!is_error(&declared), "{name}: {}", text(&declared));
        assert_eq!(
            structured(&declared)["bands"][0]["mean"],
            json!(109.5),
            "{name}"
        );
    }
}

/// Attack round 15, R15-C13: a call that chose `georef_source: world_file` recorded and
/// returned `gdalwarp ... dem.tif o.tif`, which GDAL replays onto the internal geotransform,
/// 0.05° (about 4 km) from the output the call wrote. The command lines now carry the choice
/// (`--config GDAL_GEOREF_SOURCES WORLDFILE,INTERNAL`): replayed, they give the call's output
/// pixel for pixel, at the world file's origin.
#[tokio::test]
async fn r15_c13_the_recorded_commands_replay_the_georeferencing_chosen() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    gdal_mcp_tests::dem_with_a_world_file_0_05_degrees_east(server.workspace.path());
    let done = call_justified(
        &server,
        "raster_resample",
        json!({"input": "dem.tif", "output": "o.tif", "size": [10, 10], "resampling": "nearest",
               "georef_source": "world_file"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&done), "{}", text(&done));
    let result = structured(&done);
    assert!(
        result["commands"]
            .to_string()
            .contains("GDAL_GEOREF_SOURCES"),
        "{}",
        result["commands"]
    );
    let origin = gdal::Dataset::open(server.path("o.tif"))
        .unwrap()
        .geo_transform()
        .unwrap()[0];
    assert!((origin - 10.05).abs() < 1e-9, "origin {origin}");
    assert_matches_cli(&server, &result, "o.tif");
}

/// A 10 x 10 plane rising 10 m per cell to the west (so facing east), Float32 in metres, in
/// `crs` from the corner (`x`, `y`) with `cell` map units.
fn east_facing_plane(path: &Path, crs: u32, (x, y): (f64, f64), cell: f64) {
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    let mut dataset = driver
        .create_with_band_type::<f32, _>(path, 10, 10, 1)
        .unwrap();
    dataset
        .set_geo_transform(&[x, cell, 0.0, y, 0.0, -cell])
        .unwrap();
    dataset
        .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(crs).unwrap())
        .unwrap();
    let mut band = dataset.rasterband(1).unwrap();
    let cells: Vec<f32> = (0..100).map(|i| 1000.0 - 10.0 * (i % 10) as f32).collect();
    band.write(
        (0, 0),
        (10, 10),
        &mut gdal::raster::Buffer::new((10, 10), cells),
    )
    .unwrap();
    let unit = std::ffi::CString::new("m").unwrap();
    // SAFETY: a live band handle and a NUL-terminated string GDAL copies.
    unsafe { gdal_sys::GDALSetRasterUnitType(band.c_rasterband(), unit.as_ptr()) };
}

/// Attack round 15, R15-B5 and R15-B18: gdaldem reads a projected DEM's cells as ground
/// distances and its rows as north. In Web Mercator at 60° N the cells are twice the ground's
/// (slope 5.71° for 11.28°), and in polar stereographic (EPSG:3413) at 0° E, 70° N grid north
/// is 45° from true north (aspect 90 for a slope facing 135°). Both are refused with the
/// figure and the way out; the twins, the same plane in UTM 32N near its central meridian,
/// run (slope and aspect).
#[tokio::test]
async fn r15_b5_b18_terrain_refuses_a_grid_far_from_the_ground() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    east_facing_plane(
        &server.path("merc.tif"),
        3857,
        (1_113_194.9, 8_399_737.9),
        100.0,
    );
    east_facing_plane(
        &server.path("polar.tif"),
        3413,
        (1_547_098.5, -1_547_098.5),
        100.0,
    );
    east_facing_plane(
        &server.path("utm.tif"),
        32632,
        (560_000.0, 6_660_000.0),
        50.0,
    );
    for (input, operation, needle) in [
        ("merc.tif", "slope", "longer or shorter than the ground"),
        ("polar.tif", "aspect", "from true north"),
    ] {
        let result = call_justified(
            &server,
            "raster_terrain",
            json!({"input": input, "output": format!("{operation}_{input}"),
                   "operation": operation}),
        )
        .await
        .unwrap()
        .result;
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert_eq!(structured(&result)["error"]["kind"], "invalid_arguments");
        assert!(
            text(&result).contains(needle) && text(&result).contains("UTM"),
            "{input}: {}",
            text(&result)
        );
    }
    for operation in ["slope", "aspect"] {
        let result = call_justified(
            &server,
            "raster_terrain",
            json!({"input": "utm.tif", "output": format!("{operation}_utm.tif"),
                   "operation": operation}),
        )
        .await
        .unwrap()
        .result;
        assert!(!is_error(&result), "{operation}: {}", text(&result));
    }
    let aspect = read_all(&server.path("aspect_utm.tif"), 1);
    assert!((aspect[45] - 90.0).abs() < 1.0, "aspect {}", aspect[45]);
    // R15-B15: a geographic DEM's slope is refused; one scale is offered only near the
    // equator, where east-west distances read at it are within 1 %.
    for (input, north, offered) in [("equator.tif", 1.0, true), ("sixty.tif", 60.0, false)] {
        east_facing_plane(&server.path(input), 4326, (10.0, north), 0.001);
        let result = server
            .call(
                "raster_terrain",
                json!({"input": input, "output": "geo_slope.tif", "operation": "slope"}),
            )
            .await
            .unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert_eq!(
            text(&result).contains("pass scale"),
            offered,
            "{input}: {}",
            text(&result)
        );
    }
}

/// Attack round 15, R15-B20: with a `resolution` that does not divide the extent, gdalwarp
/// rounds the number of cells to the nearest, so rounding down cut the far strip off: a sum
/// of 100,000 over 1000 m resampled to 300 m kept 81,000, and a 4326 -> 3035 reprojection at
/// 2000 m lost 3.1 %. The grid now covers the whole raster (its origin kept, whole cells past
/// its far edges; `-tap` for a new CRS): the totals are kept, and the twin at 250 m is the
/// same 4 x 4 grid as before.
#[tokio::test]
async fn r15_b20_a_resolution_that_does_not_divide_the_extent_cuts_nothing_off() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
    for (name, epsg, gt) in [
        (
            "tens.tif",
            32632,
            [500_000.0, 10.0, 0.0, 5_000_000.0, 0.0, -10.0],
        ),
        ("counts.tif", 4326, [10.0, 0.004, 0.0, 50.0, 0.0, -0.004]),
    ] {
        let mut dataset = driver
            .create_with_band_type::<f32, _>(server.path(name), 100, 100, 1)
            .unwrap();
        dataset.set_geo_transform(&gt).unwrap();
        dataset
            .set_spatial_ref(&gdal::spatial_ref::SpatialRef::from_epsg(epsg).unwrap())
            .unwrap();
        let mut band = dataset.rasterband(1).unwrap();
        band.set_no_data_value(Some(-1.0)).unwrap();
        band.write(
            (0, 0),
            (100, 100),
            &mut gdal::raster::Buffer::new((100, 100), vec![10f32; 10_000]),
        )
        .unwrap();
    }
    let total = |name: &str| -> f64 {
        read_all(&server.path(name), 1)
            .into_iter()
            .filter(|v| v.is_finite() && *v != -1.0)
            .sum()
    };
    for (resolution, cells) in [(300.0, 16), (250.0, 16)] {
        let output = format!("sum_{resolution}.tif");
        let done = call_justified(
            &server,
            "raster_resample",
            json!({"input": "tens.tif", "output": output, "resolution": [resolution, resolution],
                   "resampling": "sum"}),
        )
        .await
        .unwrap()
        .result;
        assert!(!is_error(&done), "{}", text(&done));
        assert_eq!(
            read_all(&server.path(&output), 1).len(),
            cells,
            "{resolution}"
        );
        assert!(
            (total(&output) - 100_000.0).abs() < 1e-6,
            "{resolution}: {}",
            total(&output)
        );
    }
    let done = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "counts.tif", "output": "laea.tif", "dst_crs": "EPSG:3035",
               "resolution": [2000, 2000], "resampling": "sum"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&done), "{}", text(&done));
    assert!(
        (total("laea.tif") / 100_000.0 - 1.0).abs() < 0.01,
        "{}",
        total("laea.tif")
    );
}

/// Attack round 15, R15-B14: without `format`, `raster_convert` wrote a GeoTIFF under
/// `out.png`, `out.jpg` or `out.gpkg`, said only by `driver: "GTiff"`. An output named for
/// another format is now an argument error naming the `format` to pass; `.tif` and a given
/// `format` are written as before.
#[tokio::test]
async fn r15_b14_an_output_named_for_another_format_needs_format() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    small(&server.path("in.tif"), (0u8..16).collect::<Vec<_>>(), None);
    for (output, driver) in [
        ("out.png", "PNG"),
        ("out.jpg", "JPEG"),
        ("out.gpkg", "GPKG"),
    ] {
        let result = server
            .call(
                "raster_convert",
                json!({"input": "in.tif", "output": output}),
            )
            .await
            .unwrap();
        assert!(is_error(&result), "{output}: {}", text(&result));
        assert!(
            text(&result).contains(&format!("\"format\": \"{driver}\"")),
            "{output}: {}",
            text(&result)
        );
        assert!(!server.path(output).exists());
    }
    let tif = call_justified(
        &server,
        "raster_convert",
        json!({"input": "in.tif", "output": "out.tif"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&tif), "{}", text(&tif));
    let png = call_justified(
        &server,
        "raster_convert",
        json!({"input": "in.tif", "output": "out.png", "format": "PNG"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&png), "{}", text(&png));
}

/// Attack round 15, R15-B19: `raster_calc` refused a value Int32 cannot hold advising
/// "Float32 holds any such value", and on that route wrote 16777217 as 16777216 with
/// `rounded: 0`. Whole numbers Float32 cannot hold are now counted as rounded and said, and
/// the advice names Float64; the Float64 twin keeps them and rounds nothing.
#[tokio::test]
async fn r15_b19_float32_rounding_of_large_whole_numbers_is_counted() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let mut cells: Vec<f64> = (0..16).map(f64::from).collect();
    cells[0] = 16_777_217.0;
    cells[1] = 4_503_599_627_370_497.0;
    // Attack round 17, R17-B5: a value whose whole part Float32 moves, and one it flushes to 0.
    cells[2] = 123_456_789.123;
    cells[3] = 1e-50;
    small(&server.path("ids.tif"), cells, None);
    let refused = call_justified(
        &server,
        "raster_calc",
        json!({"inputs": {"a": "ids.tif"}, "expression": "a", "output": "i32.tif",
               "data_type": "Int32"}),
    )
    .await
    .unwrap()
    .result;
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("Float64 holds"),
        "{}",
        text(&refused)
    );
    for (data_type, rounded) in [("Float32", 4), ("Float64", 0)] {
        let output = format!("{data_type}.tif");
        let done = call_justified(
            &server,
            "raster_calc",
            json!({"inputs": {"a": "ids.tif"}, "expression": "a", "output": output,
                   "data_type": data_type}),
        )
        .await
        .unwrap()
        .result;
        assert!(!is_error(&done), "{data_type}: {}", text(&done));
        let out = structured(&done);
        assert_eq!(
            out["cells"]["rounded"],
            json!(rounded),
            "{data_type}: {out}"
        );
        if rounded > 0 {
            assert!(out.to_string().contains("Float64 keeps"), "{out}");
        }
    }
}

/// Attack round 15, R15-B6: a band whose nodata is NaN was answered `"nodata": null` by
/// `raster_stats` and `raster_sample`, as a band with no nodata is. JSON has no NaN, so both
/// now say `nodata_text: "nan"` beside it, as `raster_info` does; the twin with nodata -9999
/// keeps its number and no text, and a band with no nodata has neither.
#[tokio::test]
async fn r15_b6_a_nan_nodata_is_named_not_taken_for_none() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let mut cells: Vec<f32> = (1..=16).map(|v| v as f32).collect();
    cells[15] = f32::NAN;
    for (name, nodata) in [
        ("nan.tif", Some(f64::NAN)),
        ("coded.tif", Some(-9999.0)),
        ("none.tif", None),
    ] {
        small(&server.path(name), cells.clone(), None);
        if let Some(value) = nodata {
            let dataset = gdal::Dataset::open_ex(
                server.path(name),
                gdal::DatasetOptions {
                    open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
                    ..Default::default()
                },
            )
            .unwrap();
            dataset
                .rasterband(1)
                .unwrap()
                .set_no_data_value(Some(value))
                .unwrap();
        }
    }
    for (name, number, label) in [
        ("nan.tif", None, Some("nan")),
        ("coded.tif", Some(-9999.0), None),
        ("none.tif", None, None),
    ] {
        let stats = server
            .call("raster_stats", json!({"input": name}))
            .await
            .unwrap();
        assert!(!is_error(&stats), "{name}: {}", text(&stats));
        let sample = server
            .call(
                "raster_sample",
                json!({"input": name, "coordinates": [[500_005.0, 3_999_995.0]]}),
            )
            .await
            .unwrap();
        assert!(!is_error(&sample), "{name}: {}", text(&sample));
        for band in [
            &structured(&stats)["bands"][0],
            &structured(&sample)["bands"][0],
        ] {
            assert_eq!(band["nodata"].as_f64(), number, "{name}: {band}");
            assert_eq!(
                band.get("nodata_text").and_then(Value::as_str),
                label,
                "{name}: {band}"
            );
        }
    }
}

/// Attack round 16, R16-B1 and R16-B2: `raster_calc` mixed unlike units (`a - b` of 100 ft and
/// 100 m answered 0) and dropped the unit its inputs shared (`"a"` of a DEM in feet wrote no
/// unit, and `raster_terrain` then took feet for metres). Unlike units are refused before the
/// work; a copy or a mean of inputs in one unit keeps it; a product declares none unless
/// `unit` is given, and says so.
///
/// Attack round 17, R17-B2 and R17-B18: a conversion by any factor but five listed kept the
/// old label (`a / 100` of centimetres stayed `cm`, `a * 3.2808` of metres stayed `m`), and
/// heights raised by a constant lost theirs (`a + 100` of feet declared none, and the slope
/// read feet as metres). A factor that turns the inputs' length unit into another declares
/// that unit, and a length plus a constant keeps its unit.
#[tokio::test]
async fn r16_b1_b2_band_math_keeps_or_refuses_units() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let cells: Vec<f32> = vec![100.0; 16];
    for (name, unit) in [
        ("feet.tif", "ft"),
        ("feet2.tif", "ft"),
        ("metres.tif", "m"),
        ("centimetres.tif", "cm"),
    ] {
        small(&server.path(name), cells.clone(), None);
        declare_unit(&server.path(name), unit);
    }
    let calc = |inputs: Value, expression: &str, output: &str, unit: Option<&str>| {
        let mut arguments = json!({"inputs": inputs, "expression": expression,
                                   "output": output, "data_type": "Float32"});
        if let Some(unit) = unit {
            arguments["unit"] = json!(unit);
        }
        arguments
    };
    let mixed = server
        .call(
            "raster_calc",
            calc(
                json!({"a": "feet.tif", "b": "metres.tif"}),
                "a - b",
                "mixed.tif",
                None,
            ),
        )
        .await
        .unwrap();
    assert!(is_error(&mixed), "{}", text(&mixed));
    assert!(text(&mixed).contains("unlike units"), "{}", text(&mixed));
    assert!(!server.path("mixed.tif").exists());
    let unit_of = |name: &str| {
        let dataset = gdal::Dataset::open(server.path(name)).unwrap();
        dataset.rasterband(1).unwrap().unit()
    };
    for (inputs, expression, output, unit, want, noted) in [
        (json!({"a": "feet.tif"}), "a", "copy.tif", None, "ft", false),
        (
            json!({"a": "feet.tif", "b": "feet2.tif"}),
            "(a + b) / 2",
            "mean.tif",
            None,
            "ft",
            false,
        ),
        (
            json!({"a": "feet.tif"}),
            "a * 0.3048",
            "converted.tif",
            None,
            "m",
            false,
        ),
        (
            json!({"a": "centimetres.tif"}),
            "a / 100",
            "cm_to_m.tif",
            None,
            "m",
            false,
        ),
        (
            json!({"a": "metres.tif"}),
            "a * 3.2808",
            "m_to_ft.tif",
            None,
            "ft",
            false,
        ),
        (
            json!({"a": "metres.tif"}),
            "a * 1200 / 3937",
            "no_known_unit.tif",
            None,
            "",
            true,
        ),
        (
            json!({"a": "feet.tif"}),
            "a + 100",
            "raised.tif",
            None,
            "ft",
            false,
        ),
        // A length times a factor that converts it into no known unit may be an exaggeration
        // or a change of unit (`a / 25.4` of mm is inches): no unit, said (R22-B13).
        (
            json!({"a": "feet.tif"}),
            "a * 2",
            "doubled.tif",
            None,
            "",
            true,
        ),
        (
            json!({"a": "centimetres.tif"}),
            "a / 2.54",
            "cm_to_in.tif",
            None,
            "in",
            false,
        ),
        (
            json!({"a": "feet.tif"}),
            "a * 0.3048",
            "declared.tif",
            Some("m"),
            "m",
            false,
        ),
        (
            json!({"a": "feet.tif", "b": "feet2.tif"}),
            "a * b",
            "product.tif",
            None,
            "",
            true,
        ),
    ] {
        let result = call_justified(
            &server,
            "raster_calc",
            calc(inputs, expression, output, unit),
        )
        .await
        .unwrap();
        assert!(
            !is_error(&result.result),
            "{expression}: {}",
            text(&result.result)
        );
        assert_eq!(unit_of(output), want, "{expression}");
        let notes = structured(&result.result)["notes"].to_string();
        assert_eq!(
            notes.contains("declares no unit"),
            noted,
            "{expression}: {notes}"
        );
    }
}

/// Attack round 18, R18-B1 and R18-B2: a unit with a factor was read by its letters (10 in
/// "m" minus 100 in "0.1 m", both 10 m, answered -90), and a unit that is no length kept its
/// label through any factor (`a * 86400` of a flux in "kg m-2 s-1" stayed "kg m-2 s-1").
/// Unlike scaled units are refused, a conversion of "0.1 m" by 0.1 declares "m", and a factor
/// on another quantity declares no unit and says so; a mean of fluxes keeps theirs.
#[tokio::test]
async fn r18_b1_b2_units_with_factors_are_read_whole() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    for (name, value, unit) in [
        ("metres.tif", 10.0_f32, "m"),
        ("decimetres.tif", 100.0, "0.1 m"),
        ("flux.tif", 0.0001, "kg m-2 s-1"),
        ("flux2.tif", 0.0003, "kg m-2 s-1"),
    ] {
        small(&server.path(name), vec![value; 16], None);
        declare_unit(&server.path(name), unit);
    }
    let calc = |inputs: Value, expression: &str, output: &str| {
        json!({"inputs": inputs, "expression": expression, "output": output,
               "data_type": "Float32"})
    };
    let mixed = server
        .call(
            "raster_calc",
            calc(
                json!({"a": "metres.tif", "b": "decimetres.tif"}),
                "a - b",
                "mixed.tif",
            ),
        )
        .await
        .unwrap();
    assert!(is_error(&mixed), "{}", text(&mixed));
    assert!(text(&mixed).contains("unlike units"), "{}", text(&mixed));
    assert!(!server.path("mixed.tif").exists());
    let unit_of = |name: &str| {
        let dataset = gdal::Dataset::open(server.path(name)).unwrap();
        dataset.rasterband(1).unwrap().unit()
    };
    for (inputs, expression, output, want, noted) in [
        (
            json!({"a": "decimetres.tif"}),
            "a * 0.1",
            "dm_to_m.tif",
            "m",
            false,
        ),
        (json!({"a": "flux.tif"}), "a * 86400", "daily.tif", "", true),
        (
            json!({"a": "flux.tif", "b": "flux2.tif"}),
            "(a + b) / 2",
            "mean_flux.tif",
            "kg m-2 s-1",
            false,
        ),
        (
            json!({"a": "flux.tif", "b": "flux2.tif"}),
            "b - a",
            "flux_change.tif",
            "kg m-2 s-1",
            false,
        ),
    ] {
        let result = call_justified(&server, "raster_calc", calc(inputs, expression, output))
            .await
            .unwrap();
        assert!(
            !is_error(&result.result),
            "{expression}: {}",
            text(&result.result)
        );
        assert_eq!(unit_of(output), want, "{expression}");
        let notes = structured(&result.result)["notes"].to_string();
        assert_eq!(notes.contains("no unit"), noted, "{expression}: {notes}");
    }
}

/// Attack round 16, R16-B15: a DEM whose band declares its heights in metres while its
/// compound CRS says feet (NAVD88 height (ft), EPSG:8228) gave a slope of 45.00° with no
/// word, where the CRS's reading gives 16.95°. Two declarations that disagree are a data
/// conflict naming both units, and `scale` chooses; the twin without a band unit follows the
/// CRS.
#[tokio::test]
async fn r16_b15_a_band_unit_against_the_crs_heights_is_a_conflict() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    for (name, unit) in [("conflict.tif", Some("m")), ("crs_only.tif", None)] {
        let path = server.path(name);
        {
            let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
            let mut dataset = driver
                .create_with_band_type::<f32, _>(&path, 8, 8, 1)
                .unwrap();
            dataset
                .set_geo_transform(&[500_000.0, 10.0, 0.0, 4_000_000.0, 0.0, -10.0])
                .unwrap();
            dataset
                .set_spatial_ref(
                    &gdal::spatial_ref::SpatialRef::from_definition("EPSG:32633+8228").unwrap(),
                )
                .unwrap();
            let mut band = dataset.rasterband(1).unwrap();
            let rows: Vec<f32> = (0..64).map(|i| (i % 8) as f32 * 10.0).collect();
            band.write((0, 0), (8, 8), &mut gdal::raster::Buffer::new((8, 8), rows))
                .unwrap();
        }
        if let Some(unit) = unit {
            declare_unit(&path, unit);
        }
    }
    let slope = |input: &str, output: &str, scale: Option<f64>| {
        let mut arguments = json!({"input": input, "output": output, "operation": "slope"});
        if let Some(scale) = scale {
            arguments["scale"] = json!(scale);
        }
        arguments
    };
    let refused = server
        .call("raster_terrain", slope("conflict.tif", "a.tif", None))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert_eq!(structured(&refused)["error"]["kind"], "data_conflict");
    assert!(text(&refused).contains("\"m\""), "{}", text(&refused));
    let chosen = call_justified(
        &server,
        "raster_terrain",
        slope("conflict.tif", "b.tif", Some(3.280_833_333)),
    )
    .await
    .unwrap();
    assert!(!is_error(&chosen.result), "{}", text(&chosen.result));
    let twin = call_justified(
        &server,
        "raster_terrain",
        slope("crs_only.tif", "c.tif", None),
    )
    .await
    .unwrap();
    assert!(!is_error(&twin.result), "{}", text(&twin.result));
}

/// Attack round 16, R16-B13: a bathymetry whose depths run from -10500 to -126 with one
/// trench at -9999, declaring nodata 32767, was refused as holding a conventional no-data
/// code, and every way out deleted the depth. A code inside the range of the band's other
/// values is one of them; the twin, a -9999 below every other value, is still refused.
#[tokio::test]
async fn r16_b13_a_code_inside_the_values_range_is_a_value() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let mut depths: Vec<i16> = (0..16).map(|i| -10500 + 650 * i as i16).collect();
    depths[5] = -9999;
    small(&server.path("bathy.tif"), depths, None);
    let mut heights: Vec<i16> = (0..16).map(|i| 100 * i as i16).collect();
    heights[5] = -9999;
    small(&server.path("dem.tif"), heights, None);
    for path in ["bathy.tif", "dem.tif"] {
        let dataset = gdal::Dataset::open_ex(
            server.path(path),
            gdal::DatasetOptions {
                open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE,
                ..Default::default()
            },
        )
        .unwrap();
        dataset
            .rasterband(1)
            .unwrap()
            .set_no_data_value(Some(32767.0))
            .unwrap();
    }
    let bathy = server
        .call("raster_stats", json!({"input": "bathy.tif"}))
        .await
        .unwrap();
    assert!(!is_error(&bathy), "{}", text(&bathy));
    assert_eq!(structured(&bathy)["bands"][0]["valid_count"], 16);
    let dem = server
        .call("raster_stats", json!({"input": "dem.tif"}))
        .await
        .unwrap();
    assert!(is_error(&dem), "{}", text(&dem));
    assert!(text(&dem).contains("-9999"), "{}", text(&dem));
}

/// Attack round 16, R16-B9 and R16-B10: a height conversion (`heights: "convert"`) wrote
/// metres under a band that still said `ft`, and added the geoid separation to the stored
/// values of a scaled band (Int16 decimetres at 100.0 m became 104.7 m). The converted band
/// declares the target's unit; a scaled band is refused, naming raster_calc.
#[tokio::test]
async fn r16_b9_b10_converted_heights_keep_their_unit_and_scaled_bands_are_refused() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    for (name, cells, scale, unit) in [
        ("feet.tif", 100.0_f64, None, Some("ft")),
        ("decimetres.tif", 1000.0, Some(0.1), None),
    ] {
        let path = server.path(name);
        {
            let driver = gdal::DriverManager::get_driver_by_name("GTiff").unwrap();
            let mut dataset = driver
                .create_with_band_type::<f32, _>(&path, 10, 10, 1)
                .unwrap();
            dataset
                .set_geo_transform(&[10.5, 0.01, 0.0, 50.6, 0.0, -0.01])
                .unwrap();
            dataset
                .set_spatial_ref(
                    &gdal::spatial_ref::SpatialRef::from_definition("EPSG:4326+5773").unwrap(),
                )
                .unwrap();
            let mut band = dataset.rasterband(1).unwrap();
            band.write(
                (0, 0),
                (10, 10),
                &mut gdal::raster::Buffer::new((10, 10), vec![cells as f32; 100]),
            )
            .unwrap();
            if let Some(scale) = scale {
                band.set_scale(scale).unwrap();
            }
        }
        if let Some(unit) = unit {
            declare_unit(&path, unit);
        }
    }
    let reproject = |input: &str, output: &str| {
        json!({"input": input, "output": output, "dst_crs": "EPSG:4979",
               "resampling": "bilinear", "heights": "convert"})
    };
    let scaled = server
        .call("raster_reproject", reproject("decimetres.tif", "d.tif"))
        .await
        .unwrap();
    assert!(is_error(&scaled), "{}", text(&scaled));
    assert!(
        text(&scaled).contains("heights: band 1 declares scale 0.1")
            && text(&scaled).contains("raster_calc"),
        "{}",
        text(&scaled)
    );
    let converted = call_justified(&server, "raster_reproject", reproject("feet.tif", "f.tif"))
        .await
        .unwrap();
    assert!(!is_error(&converted.result), "{}", text(&converted.result));
    let dataset = gdal::Dataset::open(server.path("f.tif")).unwrap();
    assert_eq!(dataset.rasterband(1).unwrap().unit(), "m");
}

/// Attack round 17, R17-B17: a GeoTIFF declaring scale 0.1 beside an `.aux.xml` declaring
/// 0.01 was read with the file's 0.1 (GDAL's silent choice), a mean of 15 or 1.5 by which is
/// right, and a sidecar nodata unlike the file's won silently the other way. Both are a
/// `data_conflict` naming each declaration; a sidecar that only adds statistics, or declares
/// what the file lacks, is read (the twins).
#[tokio::test]
async fn r17_b17_a_sidecar_declaring_a_band_unlike_the_file_is_a_conflict() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let cells: Vec<i16> = vec![
        100, 200, 100, 200, 100, 200, 100, 200, 100, 200, 100, 200, 100, 200, 100, 200,
    ];
    for name in ["scaled.tif", "twin.tif", "adds.tif"] {
        small(&server.path(name), cells.clone(), None);
    }
    small(&server.path("scaled.tif"), cells.clone(), Some((0.1, 0.0)));
    small(&server.path("twin.tif"), cells.clone(), Some((0.1, 0.0)));
    let pam = |body: &str| {
        format!("<PAMDataset><PAMRasterBand band=\"1\">{body}</PAMRasterBand></PAMDataset>")
    };
    std::fs::write(
        server.path("scaled.tif.aux.xml"),
        pam("<Scale>0.01</Scale>"),
    )
    .unwrap();
    std::fs::write(
        server.path("twin.tif.aux.xml"),
        pam("<Metadata><MDI key=\"STATISTICS_MEAN\">15</MDI></Metadata>"),
    )
    .unwrap();
    std::fs::write(
        server.path("adds.tif.aux.xml"),
        pam("<UnitType>m</UnitType>"),
    )
    .unwrap();
    let refused = server
        .call("raster_stats", json!({"input": "scaled.tif"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    let content = structured(&refused);
    assert_eq!(
        content["error"]["kind"],
        json!("data_conflict"),
        "{content}"
    );
    let message = content["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("scale 0.1") && message.contains("0.01"),
        "{message}"
    );
    for name in ["twin.tif", "adds.tif"] {
        let read = server
            .call("raster_stats", json!({"input": name}))
            .await
            .unwrap();
        assert!(!is_error(&read), "{name}: {}", text(&read));
    }
}

/// Attack round 17, R17-B16: `raster_composite` compared units as text and refused `m` with
/// `metre` as unlike units, advising a conversion by 0.3048. One unit in two spellings
/// composes, and the output declares it; `m` with `ft` is still refused.
#[tokio::test]
async fn r17_b16_one_unit_in_two_spellings_composes() {
    let server = Server::start(Era::Modern, Options::default())
        .await
        .unwrap();
    let cells: Vec<f32> = vec![10.0; 16];
    for (name, unit) in [("m.tif", "m"), ("metre.tif", "metre"), ("ft.tif", "ft")] {
        small(&server.path(name), cells.clone(), None);
        declare_unit(&server.path(name), unit);
    }
    let composed = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["m.tif", "metre.tif"], "output": "mean.tif", "statistic": "mean"}),
    )
    .await
    .unwrap()
    .result;
    assert!(!is_error(&composed), "{}", text(&composed));
    let refused = call_justified(
        &server,
        "raster_composite",
        json!({"inputs": ["m.tif", "ft.tif"], "output": "mixed.tif", "statistic": "mean"}),
    )
    .await
    .unwrap()
    .result;
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("unlike units"),
        "{}",
        text(&refused)
    );
}

/// Attack round 23, R23-B19: `raster_reproject` to EPSG:4326 with `bounds` in a Pacific-centred
/// CRS (EPSG:3832) round 170° E to 170° W went through gdalwarp's `-te_srs`, which made them
/// 170 to -170: the call failed after the gate with "Attempt to create -339x20 dataset". The
/// host moves such bounds itself, longitudes continuous across 180°, and the window is written
/// as for bounds of 170 to 190 in EPSG:4326: a global 1° raster whose cells hold their column
/// (0 at -180°) gives 350..359 then 0..9 along a row.
#[tokio::test]
async fn r23_b19_bounds_from_a_pacific_crs_make_a_window_across_180() {
    let server = Server::start(Era::Modern, options(&[])).await.unwrap();
    let asc = server.path("g.asc");
    let mut body =
        String::from("ncols 360\nnrows 180\nxllcorner -180\nyllcorner -90\ncellsize 1\n");
    let row: Vec<String> = (0..360).map(|c| c.to_string()).collect();
    for _ in 0..180 {
        body.push_str(&row.join(" "));
        body.push('\n');
    }
    std::fs::write(&asc, body).unwrap();
    gdal_mcp_tests::run_program(
        "gdal_translate",
        &[
            "-q",
            "-a_srs",
            "EPSG:4326",
            "-ot",
            "Float32",
            asc.to_str().unwrap(),
            server.path("g.tif").to_str().unwrap(),
        ],
    );
    let done = call_justified(
        &server,
        "raster_reproject",
        json!({"input": "g.tif", "output": "w.tif", "dst_crs": "EPSG:4326",
               "bounds": {"xmin": 2226389.816, "xmax": 4452779.632, "ymin": 0.0,
                          "ymax": 2258423.649, "crs": "EPSG:3832"},
               "resolution": [1, 1], "resampling": "nearest"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&done.result), "{}", text(&done.result));
    let dataset = gdal::Dataset::open(server.path("w.tif")).unwrap();
    assert_eq!(dataset.raster_size(), (20, 20));
    let first_row: Vec<f64> = read_all(&server.path("w.tif"), 1)[..20].to_vec();
    let expected: Vec<f64> = (350..360).chain(0..10).map(f64::from).collect();
    assert_eq!(first_row, expected);
}
