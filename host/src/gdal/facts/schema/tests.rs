//! Each rule of [`super::losses`] against GDAL 3.6.2: a layer built with known fields and
//! values is written with `ogr2ogr` (GDALVectorTranslate) and read back (attack round 13,
//! R13-B8).

use super::*;
use gdal::vector::{FieldDefn, Geometry, LayerOptions};
use gdal::DriverManager;
use std::ffi::CString;
use std::path::Path;

/// A GeoPackage layer `name` with `fields` and one feature per row of `rows` (values as text,
/// `None` for null).
fn layer(
    path: &Path,
    name: &str,
    fields: &[(&str, OGRFieldType::Type)],
    rows: &[Vec<Option<&str>>],
) {
    let driver = DriverManager::get_driver_by_name("GPKG").unwrap();
    let mut ds = if path.exists() {
        Dataset::open_ex(
            path,
            gdal::DatasetOptions {
                open_flags: gdal::GdalOpenFlags::GDAL_OF_UPDATE
                    | gdal::GdalOpenFlags::GDAL_OF_VECTOR,
                ..Default::default()
            },
        )
        .unwrap()
    } else {
        driver.create_vector_only(path).unwrap()
    };
    let l = ds
        .create_layer(LayerOptions {
            name,
            ty: gdal::vector::OGRwkbGeometryType::wkbPoint,
            ..Default::default()
        })
        .unwrap();
    for (n, t) in fields {
        FieldDefn::new(n, *t).unwrap().add_to_layer(&l).unwrap();
    }
    for row in rows {
        // SAFETY: plain OGR C calls on handles that live for this block.
        unsafe {
            let defn = gdal_sys::OGR_L_GetLayerDefn(l.c_layer());
            let f = gdal_sys::OGR_F_Create(defn);
            for (i, v) in row.iter().enumerate() {
                if let Some(v) = v {
                    let c = CString::new(*v).unwrap();
                    gdal_sys::OGR_F_SetFieldString(f, i as i32, c.as_ptr());
                }
            }
            let g = Geometry::from_wkt("POINT (1 2)").unwrap();
            gdal_sys::OGR_F_SetGeometry(f, g.c_geometry());
            assert_eq!(gdal_sys::OGR_L_CreateFeature(l.c_layer(), f), 0);
            gdal_sys::OGR_F_Destroy(f);
        }
    }
}

/// `ogr2ogr -f driver out src layer`, as the vector tools run it.
fn translate(src: &Path, out: &Path, driver: &str, layer: &str) {
    let src_ds = Dataset::open(src).unwrap();
    let args: Vec<CString> = ["-f", driver, layer]
        .iter()
        .map(|a| CString::new(*a).unwrap())
        .collect();
    let mut argv: Vec<*mut std::ffi::c_char> = args.iter().map(|a| a.as_ptr() as *mut _).collect();
    argv.push(std::ptr::null_mut());
    let dest = CString::new(out.to_str().unwrap()).unwrap();
    // SAFETY: argv is null-terminated and outlives the call; the source handle is valid.
    unsafe {
        let options =
            gdal_sys::GDALVectorTranslateOptionsNew(argv.as_mut_ptr(), std::ptr::null_mut());
        let mut handle = src_ds.c_dataset();
        let mut usage = 0;
        let out = gdal_sys::GDALVectorTranslate(
            dest.as_ptr(),
            std::ptr::null_mut(),
            1,
            &mut handle,
            options,
            &mut usage,
        );
        gdal_sys::GDALVectorTranslateOptionsFree(options);
        assert!(!out.is_null(), "ogr2ogr failed");
        gdal_sys::GDALClose(out);
    }
}

/// Field names and the values of the first feature, as text, read back from `path`.
fn read_back(path: &Path) -> Vec<(String, Option<String>)> {
    let ds = Dataset::open(path).unwrap();
    let mut l = ds.layer(0).unwrap();
    let names: Vec<String> = l.defn().fields().map(|f| f.name()).collect();
    let f = l.features().next().unwrap();
    names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), f.field_as_string(i).unwrap()))
        .collect()
}

const FIELDS: &[(&str, OGRFieldType::Type)] = &[
    ("population_2020", OGRFieldType::OFTInteger),
    ("population_2021", OGRFieldType::OFTInteger),
    ("Population", OGRFieldType::OFTInteger),
    ("note", OGRFieldType::OFTString),
    ("surveyed", OGRFieldType::OFTDateTime),
    ("big", OGRFieldType::OFTInteger64),
    ("bin", OGRFieldType::OFTBinary),
];

fn lossy_row(note: &str) -> Vec<Option<&str>> {
    vec![
        Some("1000"),
        Some("2000"),
        Some("4"),
        Some(note),
        Some("2024/03/01 12:34:56"),
        Some("-999999999999999999"),
        None,
    ]
}

#[test]
fn r13_b8_shapefile_names_follow_gdal_laundering() {
    let names: Vec<String> = [
        "population_2020",
        "population_2021",
        "Population",
        "abcdefghijXX",
        "short",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut long: Vec<String> = (0..12).map(|i| format!("abcdefghij{i:02}")).collect();
    long.insert(0, "abcdefghij".to_string());
    assert_eq!(
        shapefile_names(&names),
        [
            "population",
            "populati_1",
            "Populati_2",
            "abcdefghij",
            "short"
        ]
    );
    let cut = shapefile_names(&long);
    assert_eq!(cut[1], "abcdefgh_1");
    assert_eq!(cut[9], "abcdefgh_9");
    assert_eq!(cut[10], "abcdefgh10");
}

/// R13-B8: every loss the module predicts for a Shapefile happens when GDAL writes it, and the
/// clean twin (short names, Date, short strings, a DateTime at midnight, small integers)
/// predicts none and loses none.
#[test]
fn r13_b8_shapefile_losses_are_what_gdal_writes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.gpkg");
    let long = "x".repeat(300);
    layer(&src, "parcels", FIELDS, &[lossy_row(&long)]);
    layer(
        &src,
        "clean",
        &[
            ("pop_2020", OGRFieldType::OFTInteger),
            ("note", OGRFieldType::OFTString),
            ("day", OGRFieldType::OFTDate),
            ("at", OGRFieldType::OFTDateTime),
            ("big", OGRFieldType::OFTInteger64),
        ],
        &[vec![
            Some("1000"),
            Some(&"y".repeat(254)),
            Some("2024/03/01"),
            Some("2024/03/01 00:00:00"),
            Some("99999999999999999"),
        ]],
    );
    let ds = Dataset::open(&src).unwrap();
    let found = losses("ESRI Shapefile", &ds, Some("parcels"), &[]);
    let codecs: Vec<&str> = found.iter().map(|l| l.codec.as_str()).collect();
    assert_eq!(
        codecs,
        [
            FIELD_DROPPED,
            FIELD_NAME,
            STRING_LENGTH,
            DATE_TIME,
            INTEGER64
        ],
        "{found:?}"
    );
    for (index, needle) in [
        (0, "`bin`"),
        (1, "`population_2021` as `populati_1`"),
        (1, "`Population` as `Populati_2`"),
        (2, "the longest 300"),
        (3, "2024/03/01 12:34:56"),
    ] {
        assert!(found[index].text.contains(needle), "{}", found[index].text);
    }
    assert!(losses("ESRI Shapefile", &ds, Some("clean"), &[]).is_empty());
    assert!(losses("FlatGeobuf", &ds, Some("parcels"), &[]).is_empty());

    let out = dir.path().join("o.shp");
    translate(&src, &out, "ESRI Shapefile", "parcels");
    let back = read_back(&out);
    let names: Vec<&str> = back.iter().map(|(n, _)| n.as_str()).collect();
    // The names predicted, the Binary field not written.
    assert_eq!(
        names,
        [
            "population",
            "populati_1",
            "Populati_2",
            "note",
            "surveyed",
            "big"
        ]
    );
    assert_eq!(back[3].1.as_deref().map(str::len), Some(254));
    assert_eq!(back[4].1.as_deref(), Some("2024/03/01"));
    assert_ne!(back[5].1.as_deref(), Some("-999999999999999999"));

    let clean = dir.path().join("c.shp");
    translate(&src, &clean, "ESRI Shapefile", "clean");
    let back = read_back(&clean);
    assert_eq!(
        back,
        [
            ("pop_2020".to_string(), Some("1000".to_string())),
            ("note".to_string(), Some("y".repeat(254))),
            ("day".to_string(), Some("2024/03/01".to_string())),
            ("at".to_string(), Some("2024/03/01".to_string())),
            ("big".to_string(), Some("99999999999999999".to_string())),
        ]
    );
}

/// R13-B8 (MapInfo): strings over 254 bytes are cut, Integer64 becomes Real; the twin keeps
/// everything.
#[test]
fn r13_b8_mapinfo_losses_are_what_gdal_writes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.gpkg");
    let fields = [
        ("note", OGRFieldType::OFTString),
        ("big", OGRFieldType::OFTInteger64),
        ("surveyed", OGRFieldType::OFTDateTime),
    ];
    let long = "é".repeat(200);
    layer(
        &src,
        "lossy",
        &fields,
        &[vec![
            Some(&long),
            Some("9007199254740993"),
            Some("2024/03/01 12:34:56"),
        ]],
    );
    layer(
        &src,
        "clean",
        &fields,
        &[vec![
            Some("short"),
            Some("9007199254740992"),
            Some("2024/03/01 12:34:56"),
        ]],
    );
    let ds = Dataset::open(&src).unwrap();
    let found = losses("MapInfo File", &ds, Some("lossy"), &[]);
    let codecs: Vec<&str> = found.iter().map(|l| l.codec.as_str()).collect();
    assert_eq!(codecs, [STRING_LENGTH, INTEGER64], "{found:?}");
    assert!(
        found[0].text.contains("the longest 400"),
        "{}",
        found[0].text
    );
    assert!(losses("MapInfo File", &ds, Some("clean"), &[]).is_empty());

    let out = dir.path().join("o.tab");
    translate(&src, &out, "MapInfo File", "lossy");
    let back = read_back(&out);
    assert_eq!(back[0].1.as_deref().map(str::len), Some(254));
    let ds = Dataset::open(&out).unwrap();
    let mut l = ds.layer(0).unwrap();
    let f = l.features().next().unwrap();
    assert_eq!(f.field_as_double(1).unwrap(), Some(9007199254740992.0));
    assert_eq!(back[2].1.as_deref(), Some("2024/03/01 12:34:56"));
    let twin = dir.path().join("c.tab");
    translate(&src, &twin, "MapInfo File", "clean");
    let back = read_back(&twin);
    assert_eq!(back[0].1.as_deref(), Some("short"));
    let ds = Dataset::open(&twin).unwrap();
    let mut l = ds.layer(0).unwrap();
    let f = l.features().next().unwrap();
    assert_eq!(f.field_as_double(1).unwrap(), Some(9007199254740992.0));
}

/// Round 14, item 3: the fields LIBKML (Date, DateTime), GML (Binary) and DXF (every field)
/// leave out are the ones GDAL 3.6.2 leaves out; GeoJSON, FlatGeobuf and CSV keep them all.
#[test]
fn fields_dropped_by_libkml_gml_and_dxf_are_what_gdal_drops() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.gpkg");
    let fields = [
        ("d", OGRFieldType::OFTDate),
        ("dt", OGRFieldType::OFTDateTime),
        ("b", OGRFieldType::OFTBinary),
        ("i", OGRFieldType::OFTInteger),
    ];
    layer(
        &src,
        "p",
        &fields,
        &[vec![
            Some("2024/03/01"),
            Some("2024/03/01 12:00:00"),
            None,
            Some("3"),
        ]],
    );
    let ds = Dataset::open(&src).unwrap();
    for (driver, out) in [("LIBKML", "o.kml"), ("GML", "o.gml"), ("DXF", "o.dxf")] {
        let predicted: Vec<String> = losses(driver, &ds, Some("p"), &[])
            .iter()
            .inspect(|l| assert_eq!(l.codec, FIELD_DROPPED))
            .filter_map(|l| l.text.split('`').nth(1).map(str::to_string))
            .collect();
        let path = dir.path().join(out);
        translate(&src, &path, driver, "p");
        let kept: Vec<String> = read_back(&path).into_iter().map(|(n, _)| n).collect();
        let gone: Vec<String> = fields
            .iter()
            .map(|(n, _)| n.to_string())
            .filter(|n| !kept.contains(n))
            .collect();
        assert_eq!(predicted, gone, "{driver}");
        assert!(!gone.is_empty(), "{driver}");
    }
    for driver in ["GeoJSON", "FlatGeobuf", "CSV", "GPKG"] {
        assert!(losses(driver, &ds, Some("p"), &[]).is_empty(), "{driver}");
    }
}

/// Attack round 16, R16-B6 and R16-B7: KML writes Integer64 as Real with 15 significant
/// digits, and a Shapefile writes Reals 24 characters wide with 15 decimals; both are losses,
/// measured on the values, and what GDAL 3.6.2 writes agrees. Values that survive (12345 in
/// KML; 12.5 and 1/3, whose sixteenth digit only changes, in a Shapefile) are the twins.
#[test]
fn r16_b6_b7_kml_integers_and_shapefile_reals_are_what_gdal_writes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.gpkg");
    let fields = [
        ("big", OGRFieldType::OFTInteger64),
        ("tiny", OGRFieldType::OFTReal),
    ];
    layer(
        &src,
        "lossy",
        &fields,
        &[vec![Some("9007199254740993"), Some("2.5e-20")]],
    );
    layer(
        &src,
        "clean",
        &fields,
        &[
            vec![Some("12345"), Some("12.5")],
            vec![Some("7"), Some("0.3333333333333333")],
        ],
    );
    let ds = Dataset::open(&src).unwrap();
    let kml: Vec<String> = losses("LIBKML", &ds, Some("lossy"), &[])
        .into_iter()
        .map(|l| l.codec)
        .collect();
    assert!(kml.contains(&INTEGER64.to_string()), "{kml:?}");
    let shp: Vec<String> = losses("ESRI Shapefile", &ds, Some("lossy"), &[])
        .into_iter()
        .map(|l| l.codec)
        .collect();
    assert_eq!(shp, [REAL.to_string()], "{shp:?}");
    assert!(losses("LIBKML", &ds, Some("clean"), &[])
        .iter()
        .all(|l| l.codec != INTEGER64));
    assert!(losses("ESRI Shapefile", &ds, Some("clean"), &[]).is_empty());
    // What GDAL writes.
    let shapefile = dir.path().join("o.shp");
    translate(&src, &shapefile, "ESRI Shapefile", "lossy");
    let out = Dataset::open(&shapefile).unwrap();
    let mut l = out.layer(0).unwrap();
    let f = l.features().next().unwrap();
    assert_eq!(f.field_as_double(1).unwrap(), Some(0.0));
    let kml_path = dir.path().join("o.kml");
    translate(&src, &kml_path, "LIBKML", "lossy");
    let text = std::fs::read_to_string(&kml_path).unwrap();
    assert!(!text.contains("9007199254740993"), "{text}");
}

/// Attack round 17, R17-C9: a Shapefile's DBF is Latin-1 unless `ENCODING` says otherwise, so
/// "東京 Zürich Ελλάδα" read back "?? Zürich ??????" under "holds these layers without loss".
/// Measured: a `text_encoding` loss, and none with ENCODING=UTF-8 or for Latin-1 text; the
/// write itself is checked with GDAL.
#[test]
fn r17_c9_text_a_dbf_cannot_hold_is_a_loss() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("names.gpkg");
    let fields = [("name", OGRFieldType::OFTString)];
    layer(&src, "wide", &fields, &[vec![Some("東京 Zürich Ελλάδα")]]);
    layer(&src, "latin", &fields, &[vec![Some("Zürich São Paulo")]]);
    let ds = Dataset::open(&src).unwrap();
    let found = losses("ESRI Shapefile", &ds, Some("wide"), &[]);
    assert_eq!(
        found.iter().map(|l| l.codec.as_str()).collect::<Vec<_>>(),
        [TEXT_ENCODING],
        "{found:?}"
    );
    assert!(found[0].text.contains("ENCODING=UTF-8"), "{found:?}");
    let utf8 = [("ENCODING".to_string(), "UTF-8".to_string())];
    assert!(losses("ESRI Shapefile", &ds, Some("wide"), &utf8).is_empty());
    assert!(losses("ESRI Shapefile", &ds, Some("latin"), &[]).is_empty());
    // What GDAL 3.6 writes without the option.
    let out = dir.path().join("o.shp");
    let status = std::process::Command::new("ogr2ogr")
        .arg(&out)
        .arg(&src)
        .arg("wide")
        .status()
        .unwrap();
    assert!(status.success());
    let back = Dataset::open(&out).unwrap();
    let mut layer = back.layer(0).unwrap();
    let text = layer
        .features()
        .next()
        .and_then(|f| f.field_as_string(0).ok().flatten())
        .unwrap();
    assert_ne!(text, "東京 Zürich Ελλάδα");
}

/// Attack round 17, R17-B9: KML and GML write a Real with 15 significant digits, so a whole
/// number past 10^15 kept as Real (an id, a time in microseconds) lost its last units under
/// "holds these layers without loss". Measured: 1700000000123456 is a loss; a fraction whose
/// 16th digit changes (0.1 + 0.2) is none, as for Shapefile.
#[test]
fn r17_b9_text_formats_lose_the_units_of_large_whole_reals() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("reals.gpkg");
    let fields = [("v", OGRFieldType::OFTReal)];
    layer(&src, "big", &fields, &[vec![Some("1700000000123456")]]);
    layer(&src, "small", &fields, &[vec![Some("0.30000000000000004")]]);
    let ds = Dataset::open(&src).unwrap();
    for driver in ["KML", "LIBKML", "GML"] {
        let found = losses(driver, &ds, Some("big"), &[]);
        assert_eq!(
            found.iter().map(|l| l.codec.as_str()).collect::<Vec<_>>(),
            [REAL],
            "{driver}: {found:?}"
        );
        assert!(
            losses(driver, &ds, Some("small"), &[]).is_empty(),
            "{driver}"
        );
    }
}
