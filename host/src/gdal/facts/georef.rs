//! Where a raster's georeferencing comes from, and what to do when its sources disagree.
//!
//! GDAL reads a GeoTIFF's geotransform and CRS from the first source that has one, in the order
//! `PAM` (the `.aux.xml` sidecar), `INTERNAL` (the file's own tags), `TABFILE`, `WORLDFILE`. A
//! sidecar that disagrees with the file therefore wins silently, and every tool inherits it (a
//! 20 m sidecar over a 10 m file makes every area 4x too large). This room reads each source on
//! its own, reports every candidate and every disagreement, and opens a raster with the source
//! the caller chose (`georef_source`); without a choice, a raster whose sources disagree is
//! refused with the candidates ([`GdalError::Conflict`]).
//!
//! The choice is per call: the gated step sets it on the worker thread for the whole call
//! ([`with_choice`]), so every open of every input honours it.

use crate::gdal::GdalError;
use gdal::spatial_ref::SpatialRef;
use gdal::{Dataset, DatasetOptions, GdalOpenFlags, Metadata};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::cell::Cell;
use std::path::{Path, PathBuf};

/// A source of georeferencing the caller can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GeorefSource {
    /// The file's own tags (GeoTIFF keys, the format's header).
    Internal,
    /// The `.aux.xml` sidecar (GDAL's PAM).
    AuxXml,
    /// The world file (`.tfw`, `.wld`, ...).
    WorldFile,
}

impl GeorefSource {
    pub fn name(self) -> &'static str {
        match self {
            GeorefSource::Internal => "internal",
            GeorefSource::AuxXml => "aux_xml",
            GeorefSource::WorldFile => "world_file",
        }
    }
}

thread_local! {
    static CHOICE: Cell<Option<GeorefSource>> = const { Cell::new(None) };
}

/// Run `job` with the caller's georeferencing choice in force on this thread (through the
/// job guard, [`crate::gdal::Job`], so the previous choice comes back however `job` ends).
pub fn with_choice<T>(choice: Option<GeorefSource>, job: impl FnOnce() -> T) -> T {
    let _job = crate::gdal::Job::new().georef(choice).enter();
    job()
}

/// Put `choice` in force on this thread, giving back the one it replaces (for [`crate::gdal::Job`]).
pub(in crate::gdal) fn swap_choice(choice: Option<GeorefSource>) -> Option<GeorefSource> {
    CHOICE.with(|c| c.replace(choice))
}

/// The choice in force on this thread.
pub fn choice() -> Option<GeorefSource> {
    CHOICE.with(Cell::get)
}

/// Whether a pixel value stands for the cell's area or for its centre point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    Area,
    Point,
    #[default]
    Unknown,
}

/// One source's georeferencing.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct GeorefCandidate {
    /// `internal`, `aux_xml` or `world_file`.
    pub source: String,
    /// The six geotransform coefficients (GDAL order), when this source has them.
    pub geotransform: Option<[f64; 6]>,
    /// The CRS this source declares (authority id, else name), when it declares one.
    pub crs: Option<String>,
    /// That CRS as WKT, to compare by meaning: a sidecar's ESRI WKT without an authority
    /// code is labelled by its name, and was refused as disagreeing with the file's own
    /// `EPSG:32633` (attack round 21, R21-B6).
    #[serde(skip)]
    #[schemars(skip)]
    pub crs_wkt: Option<String>,
}

/// Where a raster's georeferencing comes from and how it is oriented.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Georeferencing {
    /// Source of the geotransform in use: `internal`, `aux_xml`, `world_file`, `gcps`, `rpc`
    /// or `none` (pixel coordinates only: no tool can measure anything in it).
    pub geotransform_source: String,
    /// The geotransform in use (GDAL order: x0, dx, rx, y0, ry, dy); absent without one.
    pub geotransform: Option<[f64; 6]>,
    /// Every source present, when a sidecar could disagree with the file.
    pub candidates: Vec<GeorefCandidate>,
    /// One line per disagreement; tools refuse until the call names `georef_source`.
    pub conflicts: Vec<String>,
    /// `AREA_OR_POINT`. GDAL shifts a point-registered GeoTIFF's geotransform by half a cell,
    /// so the geotransform (and every extent and coordinate the tools report) describes cell
    /// corners, and cell centres sit at corner + half a cell.
    pub registration: Registration,
    /// Rotation or shear terms in the geotransform.
    pub rotated: bool,
    /// Rows run south to north (positive y pixel size).
    pub south_up: bool,
    /// For geographic CRSs: the true cell size (x, y) in metres at the data's centre latitude.
    pub cell_size_metres: Option<(f64, f64)>,
}

/// Sidecars GDAL may take georeferencing from, for a raster at `path`.
fn sidecars(path: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return (Vec::new(), Vec::new());
    };
    let name = name.to_string_lossy();
    let stem = crate::gdal::stem_of(path)
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let aux = vec![parent.join(format!("{name}.aux.xml"))];
    let mut world = vec![parent.join(format!("{stem}.wld"))];
    if let Some(ext) = crate::gdal::extension_of(path).map(|e| e.to_string_lossy().to_string()) {
        let chars: Vec<char> = ext.chars().collect();
        if chars.len() >= 2 {
            let short = format!("{}{}w", chars[0], chars[chars.len() - 1]);
            for e in [short.clone(), short.to_ascii_uppercase()] {
                world.push(parent.join(format!("{stem}.{e}")));
            }
        }
        world.push(parent.join(format!("{stem}.{ext}w")));
    }
    let existing = |v: Vec<PathBuf>| -> Vec<PathBuf> {
        v.into_iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .collect()
    };
    (existing(aux), existing(world))
}

/// The first 1 MiB of a small regular sidecar (not following a final link, never blocking).
fn read_sidecar(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(1 << 20).read_to_string(&mut text).ok()?;
    Some(text)
}

/// A world file's six numbers (A, D, B, E, C, F: C/F are the centre of the top-left cell) as
/// a GDAL geotransform.
fn parse_world_file(text: &str) -> Option<[f64; 6]> {
    let numbers: Vec<f64> = text
        .split_whitespace()
        .take(6)
        .map(|t| t.parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()?;
    let [a, d, b, e, c, f] = <[f64; 6]>::try_from(numbers).ok()?;
    Some([c - a / 2.0 - b / 2.0, a, b, f - d / 2.0 - e / 2.0, d, e])
}

/// The `<GeoTransform>` of a PAM document.
fn parse_aux_geotransform(text: &str) -> Option<[f64; 6]> {
    let start = text.find("<GeoTransform>")? + "<GeoTransform>".len();
    let end = start + text[start..].find("</GeoTransform>")?;
    let numbers: Vec<f64> = text[start..end]
        .split(',')
        .map(|t| t.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .ok()?;
    <[f64; 6]>::try_from(numbers).ok()
}

/// The `<SRS>` WKT of a PAM document, unescaped.
fn parse_aux_srs(text: &str) -> Option<String> {
    let open = text.find("<SRS")?;
    let start = open + text[open..].find('>')? + 1;
    let end = start + text[start..].find("</SRS>")?;
    let wkt = text[start..end]
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let wkt = wkt.trim().to_string();
    (!wkt.is_empty()).then_some(wkt)
}

/// Whether CRS text names a grid or parameter file (`PARAMETERFILE[...]`, `+nadgrids=`).
fn names_a_file(text: &str) -> bool {
    let compact: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    ["PARAMETERFILE", "PARAMETER_FILE", "GRIDS="]
        .iter()
        .any(|k| compact.contains(k))
}

fn crs_label(srs: &SpatialRef) -> String {
    match (srs.auth_name(), srs.auth_code()) {
        (Some(name), Ok(code)) => format!("{name}:{code}"),
        _ => srs.name().unwrap_or_else(|| "unnamed CRS".to_string()),
    }
}

pub fn same_geotransform(a: &[f64; 6], b: &[f64; 6]) -> bool {
    a.iter()
        .zip(b)
        .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0))
}

/// Open `path` with only the file's own georeferencing (no PAM; GeoTIFF keys only).
fn open_internal(path: &Path) -> Option<Dataset> {
    open_with(path, Some(GeorefSource::Internal)).ok()
}

/// GDAL's command lines as they replay a call run with the georeferencing `choice`: each
/// program gets `--config GDAL_GEOREF_SOURCES ...`, the order the choice opened the inputs
/// with. A recorded `gdalwarp` of a call that chose the world file replayed onto the internal
/// geotransform, 0.05° away (attack round 15, R15-C13). Unchanged without a choice.
pub fn replayable(commands: Vec<Vec<String>>, choice: Option<GeorefSource>) -> Vec<Vec<String>> {
    let Some(sources) = choice.map(|c| match c {
        GeorefSource::Internal => "INTERNAL",
        GeorefSource::AuxXml => "PAM,INTERNAL",
        GeorefSource::WorldFile => "WORLDFILE,INTERNAL",
    }) else {
        return commands;
    };
    commands
        .into_iter()
        .map(|mut command| {
            if !command.is_empty() {
                command.splice(
                    1..1,
                    ["--config", "GDAL_GEOREF_SOURCES", sources].map(str::to_string),
                );
            }
            command
        })
        .collect()
}

/// Open `path` read-only with GDAL told which georeferencing source to use. `None` is GDAL's
/// default order.
pub(in crate::gdal) fn open_with(
    path: &Path,
    source: Option<GeorefSource>,
) -> gdal::errors::Result<Dataset> {
    let gtiff_sources = match source {
        None => None,
        Some(GeorefSource::Internal) => Some("GEOREF_SOURCES=INTERNAL"),
        Some(GeorefSource::AuxXml) => Some("GEOREF_SOURCES=PAM,INTERNAL"),
        Some(GeorefSource::WorldFile) => Some("GEOREF_SOURCES=WORLDFILE,INTERNAL"),
    };
    let open_options: Vec<&str> = gtiff_sources.into_iter().collect();
    let options = DatasetOptions {
        open_flags: GdalOpenFlags::GDAL_OF_READONLY
            | GdalOpenFlags::GDAL_OF_RASTER
            | GdalOpenFlags::GDAL_OF_VECTOR
            | GdalOpenFlags::GDAL_OF_VERBOSE_ERROR,
        open_options: (!open_options.is_empty()).then_some(open_options.as_slice()),
        ..Default::default()
    };
    // Drivers other than GTiff take PAM first and know no open option: without PAM they read
    // only the file (and, for formats without internal georeferencing, the world file).
    let no_pam = matches!(
        source,
        Some(GeorefSource::Internal) | Some(GeorefSource::WorldFile)
    );
    let _pam = no_pam.then(|| ThreadConfig::set("GDAL_PAM_ENABLED", "NO"));
    Dataset::open_ex(path, options)
}

/// A thread-local GDAL configuration option, restored on drop.
struct ThreadConfig {
    key: std::ffi::CString,
    previous: Option<std::ffi::CString>,
}

impl ThreadConfig {
    fn set(key: &str, value: &str) -> Option<Self> {
        let key = std::ffi::CString::new(key).ok()?;
        let value = std::ffi::CString::new(value).ok()?;
        // SAFETY: valid NUL-terminated strings; GDAL copies them.
        let previous = unsafe {
            let old = gdal_sys::CPLGetThreadLocalConfigOption(key.as_ptr(), std::ptr::null());
            let previous = (!old.is_null()).then(|| std::ffi::CStr::from_ptr(old).to_owned());
            gdal_sys::CPLSetThreadLocalConfigOption(key.as_ptr(), value.as_ptr());
            previous
        };
        Some(Self { key, previous })
    }
}

impl Drop for ThreadConfig {
    fn drop(&mut self) {
        let previous = self
            .previous
            .as_ref()
            .map_or(std::ptr::null(), |p| p.as_ptr());
        // SAFETY: valid strings or NULL (which unsets the option).
        unsafe { gdal_sys::CPLSetThreadLocalConfigOption(self.key.as_ptr(), previous) };
    }
}

/// Every georeferencing candidate of the raster at `path`, or none when no sidecar carries
/// georeferencing (the common case, which costs a few `stat`s).
pub fn candidates(path: &Path, opened: &Dataset) -> Vec<GeorefCandidate> {
    let (aux, world) = sidecars(path);
    let mut found = Vec::new();
    for file in &aux {
        if let Some(text) = read_sidecar(file) {
            let geotransform = parse_aux_geotransform(&text);
            // A CRS naming a grid or parameter file makes PROJ open it while parsing; the
            // check before the open refused such sidecars, but this read comes later.
            let srs = parse_aux_srs(&text)
                .filter(|wkt| !names_a_file(wkt))
                .and_then(|wkt| SpatialRef::from_wkt(&wkt).ok());
            let crs = srs.as_ref().map(crs_label);
            if geotransform.is_some() || crs.is_some() {
                found.push(GeorefCandidate {
                    source: "aux_xml".to_string(),
                    geotransform,
                    crs,
                    crs_wkt: srs.and_then(|s| s.to_wkt().ok()),
                });
            }
        }
    }
    for file in &world {
        if let Some(geotransform) = read_sidecar(file).and_then(|t| parse_world_file(&t)) {
            found.push(GeorefCandidate {
                source: "world_file".to_string(),
                geotransform: Some(geotransform),
                crs: None,
                crs_wkt: None,
            });
            break;
        }
    }
    if found.is_empty() {
        return found;
    }
    let _quiet = crate::gdal::ErrorCapture::start();
    let internal = if opened.driver().short_name() == "GTiff" || !aux.is_empty() {
        open_internal(&crate::gdal::policy::pinned(path).unwrap_or_else(|_| path.to_path_buf()))
    } else {
        None
    };
    if let Some(internal) = internal {
        let geotransform = internal.geo_transform().ok();
        let srs = internal.spatial_ref().ok();
        let crs = srs.as_ref().map(crs_label);
        let crs_wkt = srs.and_then(|s| s.to_wkt().ok());
        // Without PAM, a format with no georeferencing of its own reports the world file's.
        let from_world = geotransform.is_some_and(|g| {
            found.iter().any(|c| {
                c.source == "world_file"
                    && c.geotransform.is_some_and(|w| same_geotransform(&g, &w))
            })
        }) && opened.driver().short_name() != "GTiff";
        if (geotransform.is_some() && !from_world) || crs.is_some() {
            found.insert(
                0,
                GeorefCandidate {
                    source: "internal".to_string(),
                    geotransform: geotransform.filter(|_| !from_world),
                    crs,
                    crs_wkt,
                },
            );
        }
    }
    found
}

/// Largest move, in cells, of a corner of the raster between two geotransforms below which
/// they place it alike: a six-decimal world file (pixel 0.333333 m) beside a GeoTIFF's own
/// 1/3 m moved no corner of a 300 x 300 raster by more than 0.0003 of a cell, and was refused
/// as a conflict (attack round 17, R17-B3).
const SAME_PLACE_CELLS: f64 = 0.01;

/// Whether two geotransforms place a raster of `size` cells alike: every corner within
/// [`SAME_PLACE_CELLS`] of a cell of the other's.
pub fn same_place(a: &[f64; 6], b: &[f64; 6], (width, height): (usize, usize)) -> bool {
    if same_geotransform(a, b) {
        return true;
    }
    let cell_x = a[1].hypot(a[4]);
    let cell_y = a[2].hypot(a[5]);
    if !(cell_x > 0.0 && cell_y > 0.0) {
        return false;
    }
    let (w, h) = (width as f64, height as f64);
    [(0.0, 0.0), (w, 0.0), (0.0, h), (w, h)]
        .iter()
        .all(|(p, l)| {
            let at = |g: &[f64; 6]| (g[0] + p * g[1] + l * g[2], g[3] + p * g[4] + l * g[5]);
            let ((xa, ya), (xb, yb)) = (at(a), at(b));
            (xa - xb).abs() <= SAME_PLACE_CELLS * cell_x
                && (ya - yb).abs() <= SAME_PLACE_CELLS * cell_y
        })
}

/// The disagreements between candidates for a raster of `size` cells, one line each.
pub fn conflicts(candidates: &[GeorefCandidate], size: (usize, usize)) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, a) in candidates.iter().enumerate() {
        for b in &candidates[i + 1..] {
            if let (Some(ga), Some(gb)) = (&a.geotransform, &b.geotransform) {
                if !same_place(ga, gb, size) {
                    lines.push(format!(
                        "{} and {} disagree on the geotransform: pixel size {} x {} at \
                         ({}, {}) vs {} x {} at ({}, {})",
                        a.source, b.source, ga[1], ga[5], ga[0], ga[3], gb[1], gb[5], gb[0], gb[3]
                    ));
                }
            }
            if let (Some(ca), Some(cb)) = (&a.crs, &b.crs) {
                let same_meaning = match (&a.crs_wkt, &b.crs_wkt) {
                    (Some(wa), Some(wb)) => {
                        match (SpatialRef::from_wkt(wa), SpatialRef::from_wkt(wb)) {
                            (Ok(sa), Ok(sb)) => crate::gdal::facts::transform::same_crs(&sa, &sb),
                            _ => false,
                        }
                    }
                    _ => false,
                };
                if ca != cb && !same_meaning {
                    lines.push(format!(
                        "{} and {} disagree on the CRS: {ca} vs {cb}",
                        a.source, b.source
                    ));
                }
            }
        }
    }
    lines
}

/// The refusal for a raster whose georeferencing sources disagree.
pub fn conflict_error(
    path: &Path,
    candidates: &[GeorefCandidate],
    conflicts: &[String],
) -> GdalError {
    let choices: Vec<&str> = candidates.iter().map(|c| c.source.as_str()).collect();
    GdalError::Conflict {
        message: format!(
            "{}: its georeferencing sources disagree ({}). GDAL would silently use the first \
             it finds (the .aux.xml sidecar wins over the file's own tags), and every size, \
             area and coordinate would follow it. Check which is right and retry with \
             georef_source set to one of: {}.",
            path.display(),
            conflicts.join("; "),
            choices.join(", ")
        ),
        parameter: "georef_source".to_string(),
        candidates: json!(candidates),
    }
}

/// Refuse a raster whose `.aux.xml` declares a band's scale, offset, nodata or unit unlike the
/// file's own declaration: GDAL settles each silently, and not the same way (a GeoTIFF's own
/// scale wins over the sidecar's, the sidecar's nodata over the file's), so every physical
/// value follows a choice nobody made (attack round 17, R17-B17: scale 0.1 in the file, 0.01
/// beside it, a mean of 15 or 1.5). A sidecar that adds a declaration the file lacks is no
/// conflict.
/// Refuse a raster whose declared numbers describe no data: a geotransform with a NaN or an
/// infinity, or an extent beyond any place (a corner past 1e12 in magnitude), and a band whose
/// scale or offset is not finite, or whose scale carries the type's values past what a number
/// holds (a Byte band at scale 1e308). Every tool read such a raster into figures JSON cannot
/// carry: `raster_stats` answered `null` where its schema promises numbers (the TypeScript
/// SDK's `callTool` then threw), `raster_info` failed with "GDALInfo returned invalid JSON"
/// (attack round 19, R19-C1 and R19-C5), and a Web Mercator corner at 1e17 held GDAL's
/// transformation for good (R19-C2).
pub fn check_declared_numbers(path: &Path, dataset: &Dataset) -> Result<(), GdalError> {
    let limit = super::transform::MAX_BOUNDS_COORDINATE;
    if let Ok(gt) = dataset.geo_transform() {
        let (w, h) = dataset.raster_size();
        let corners = [
            (0.0, 0.0),
            (w as f64, 0.0),
            (0.0, h as f64),
            (w as f64, h as f64),
        ];
        let far = gt.iter().any(|v| !v.is_finite())
            || corners.iter().any(|(c, r)| {
                let x = gt[0] + c * gt[1] + r * gt[2];
                let y = gt[3] + c * gt[4] + r * gt[5];
                !(x.is_finite() && y.is_finite() && x.abs() <= limit && y.abs() <= limit)
            });
        if far {
            return Err(GdalError::Arguments(format!(
                "{}: its geotransform {gt:?} places the raster nowhere (a NaN or infinite \
                 number, or a corner past {limit:e}); fix its georeferencing first",
                path.display()
            )));
        }
    }
    for index in 1..=dataset.raster_count() {
        let Ok(band) = dataset.rasterband(index) else {
            continue;
        };
        let scale = band.scale().unwrap_or(1.0);
        let offset = band.offset().unwrap_or(0.0);
        let largest = match crate::gdal::facts::band_type_name(&band).as_str() {
            "Byte" => 255.0,
            "UInt16" => 65_535.0,
            "Int16" => 32_768.0,
            "UInt32" => 4_294_967_295.0,
            "Int32" => 2_147_483_648.0,
            "Float32" => f64::from(f32::MAX),
            _ => 1.0,
        };
        if !(scale.is_finite()
            && offset.is_finite()
            && (largest * scale.abs() + offset.abs()).is_finite())
        {
            return Err(GdalError::Arguments(format!(
                "{}: band {index} declares scale {scale} and offset {offset}, which carry its \
                 values past any number; fix the declaration (gdal_edit -scale/-offset, \
                 outside this server) or convert the raw values with raster_convert",
                path.display()
            )));
        }
    }
    Ok(())
}

pub fn check_band_declarations(path: &Path, dataset: &Dataset) -> Result<(), GdalError> {
    use std::io::Read;
    let (Some(parent), Some((name, stem))) = (path.parent(), crate::gdal::name_and_stem(path))
    else {
        return Ok(());
    };
    let Some(pam) = [format!("{name}.aux.xml"), format!("{stem}.aux.xml")]
        .iter()
        .map(|n| parent.join(n))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
    else {
        return Ok(());
    };
    let mut bytes = Vec::new();
    if crate::gdal::policy::open_regular(&pam)
        .and_then(|f| f.take(4 << 20).read_to_end(&mut bytes))
        .is_err()
    {
        return Ok(());
    }
    let Ok(document) = crate::gdal::policy::xml::Document::parse(&pam, &bytes) else {
        return Ok(());
    };
    let Some(root) = document.root_element("PAMDataset") else {
        return Ok(());
    };
    // The file's own declarations: the same file opened with GDAL's PAM off.
    let Some(description) = dataset_description(dataset) else {
        return Ok(());
    };
    let _pam_off = PamOff::start();
    let Ok(own) = Dataset::open_ex(
        &description,
        gdal::DatasetOptions {
            open_flags: gdal::GdalOpenFlags::GDAL_OF_READONLY | gdal::GdalOpenFlags::GDAL_OF_RASTER,
            ..Default::default()
        },
    ) else {
        return Ok(());
    };
    let number = |text: &str| text.trim().parse::<f64>().ok();
    let same = |a: f64, b: f64| {
        a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
    };
    let mut lines = Vec::new();
    for band_node in root.elements().filter(|e| e.name() == "PAMRasterBand") {
        let index = band_node
            .value_text("band")
            .and_then(|b| b.trim().parse::<usize>().ok())
            .unwrap_or(1);
        let (Ok(file_band), Ok(used)) = (own.rasterband(index), dataset.rasterband(index)) else {
            continue;
        };
        let declared = |key: &str| band_node.value_text(key).map(|v| v.to_string());
        let mut disagree = |what: &str,
                            file: Option<String>,
                            beside: Option<String>,
                            in_use: String| {
            if let (Some(file), Some(beside)) = (file, beside) {
                lines.push(format!(
                    "band {index}: the file declares {what} {file}, its .aux.xml {beside} (GDAL reads {in_use})"
                ));
            }
        };
        if let (Some(f), Some(b)) = (
            file_band.scale(),
            declared("Scale").as_deref().and_then(number),
        ) {
            if !same(f, b) {
                disagree(
                    "scale",
                    Some(f.to_string()),
                    Some(b.to_string()),
                    used.scale().map_or("none".into(), |v| v.to_string()),
                );
            }
        }
        if let (Some(f), Some(b)) = (
            file_band.offset(),
            declared("Offset").as_deref().and_then(number),
        ) {
            if !same(f, b) {
                disagree(
                    "offset",
                    Some(f.to_string()),
                    Some(b.to_string()),
                    used.offset().map_or("none".into(), |v| v.to_string()),
                );
            }
        }
        let beside_nodata = declared("NoDataValue").and_then(|v| {
            let t = v.trim().to_ascii_lowercase();
            if t == "nan" {
                Some(f64::NAN)
            } else {
                number(&t)
            }
        });
        if let (Some(f), Some(b)) = (file_band.no_data_value(), beside_nodata) {
            if !same(f, b) {
                disagree(
                    "nodata",
                    Some(f.to_string()),
                    Some(b.to_string()),
                    used.no_data_value()
                        .map_or("none".into(), |v| v.to_string()),
                );
            }
        }
        let file_unit = file_band.unit();
        if let Some(b) = declared("UnitType").filter(|u| !u.trim().is_empty()) {
            if !file_unit.trim().is_empty() && !file_unit.trim().eq_ignore_ascii_case(b.trim()) {
                disagree(
                    "unit",
                    Some(format!("\"{}\"", file_unit.trim())),
                    Some(format!("\"{}\"", b.trim())),
                    format!("\"{}\"", used.unit()),
                );
            }
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    Err(GdalError::Conflict {
        message: format!(
            "{}: the file and its sidecar {} declare its bands differently ({}); GDAL settles \
             each silently, and every value read follows the declaration it picks. Check which \
             is right, then correct or remove the sidecar (or rewrite the file with the right \
             declarations: raster_convert with `nodata`, or raster_calc with `unit`)",
            path.display(),
            pam.display(),
            lines.join("; ")
        ),
        parameter: "input".to_string(),
        candidates: json!(lines),
    })
}

/// While alive, GDAL reads no `.aux.xml` on this thread (`GDAL_PAM_ENABLED=NO`); cleared on
/// drop.
struct PamOff(());

impl PamOff {
    fn start() -> Self {
        let _ = gdal::config::set_thread_local_config_option("GDAL_PAM_ENABLED", "NO");
        Self(())
    }
}

impl Drop for PamOff {
    fn drop(&mut self) {
        let _ = gdal::config::clear_thread_local_config_option("GDAL_PAM_ENABLED");
    }
}

/// The name a dataset was opened by (`GDALGetDescription`).
fn dataset_description(dataset: &Dataset) -> Option<String> {
    // SAFETY: a live dataset handle; GDAL returns a string it owns, copied at once.
    let text = unsafe { gdal_sys::GDALGetDescription(dataset.c_dataset().cast()) };
    if text.is_null() {
        return None;
    }
    // SAFETY: GDAL's description is a NUL-terminated string valid while the dataset lives.
    let text = unsafe { std::ffi::CStr::from_ptr(text) };
    text.to_str()
        .ok()
        .map(str::to_string)
        .filter(|t| !t.is_empty())
}

/// Which candidate the opened dataset's geotransform came from.
pub fn source_of(
    geotransform: Option<[f64; 6]>,
    candidates: &[GeorefCandidate],
    dataset: &Dataset,
) -> String {
    let Some(gt) = geotransform else {
        if !dataset.gcps().is_empty() {
            return "gcps".to_string();
        }
        if dataset.metadata_domain("RPC").is_some() {
            return "rpc".to_string();
        }
        return "none".to_string();
    };
    candidates
        .iter()
        .find(|c| c.geotransform.is_some_and(|g| same_geotransform(&g, &gt)))
        .map(|c| c.source.clone())
        .unwrap_or_else(|| "internal".to_string())
}

/// `AREA_OR_POINT` of the dataset.
pub fn registration(dataset: &Dataset) -> Registration {
    match dataset.metadata_item("AREA_OR_POINT", "").as_deref() {
        Some(v) if v.eq_ignore_ascii_case("point") => Registration::Point,
        Some(v) if v.eq_ignore_ascii_case("area") => Registration::Area,
        _ => Registration::Unknown,
    }
}

/// The true size in metres of a cell of `dx` x `dy` degrees at latitude `lat`, on the
/// ellipsoid of `srs` (meridian and prime-vertical radii of curvature).
pub fn cell_size_metres(srs: &SpatialRef, dx: f64, dy: f64, lat: f64) -> Option<(f64, f64)> {
    let a = srs.semi_major().ok()?;
    let mut err = gdal_sys::OGRErr::OGRERR_NONE;
    // SAFETY: a valid SRS handle and an error out-parameter.
    let inv_f = unsafe { gdal_sys::OSRGetInvFlattening(srs.to_c_hsrs(), &mut err) };
    if err != gdal_sys::OGRErr::OGRERR_NONE {
        return None;
    }
    let f = if inv_f == 0.0 { 0.0 } else { 1.0 / inv_f };
    let e2 = f * (2.0 - f);
    let phi = lat.to_radians();
    let w = (1.0 - e2 * phi.sin().powi(2)).sqrt();
    let n = a / w;
    let m = a * (1.0 - e2) / w.powi(3);
    let rad = std::f64::consts::PI / 180.0;
    Some((dx.abs() * rad * n * phi.cos(), dy.abs() * rad * m))
}

/// Rotation terms that move no cell corner by more than this fraction of a cell across the
/// whole raster are float noise, not a rotation.
pub const ROTATION_NOISE: f64 = 1e-9;

/// Whether the geotransform `gt` of a `width` x `height` raster is rotated or sheared: its
/// rotation terms move a cell corner by more than [`ROTATION_NOISE`] of a cell across the
/// raster. Terms of -2.4e-16 (sin 2π, what a writer that builds them from an angle of 360°
/// leaves) moved a corner of a 10 x 10 raster by 2.4e-15 m and made it "rotated" for
/// `zonal_stats`, `raster_aggregate`, `raster_terrain` and the DEM tools, which asked for a
/// warp that resamples every cell (attack round 23, R23-B23).
pub fn is_rotated(gt: &[f64; 6], (width, height): (usize, usize)) -> bool {
    let across_rows = gt[2].abs() * height.max(1) as f64;
    let across_columns = gt[4].abs() * width.max(1) as f64;
    across_rows > ROTATION_NOISE * gt[1].abs() || across_columns > ROTATION_NOISE * gt[5].abs()
}

/// `gt` with rotation terms that are noise ([`is_rotated`]) set to 0, so that the host's own
/// grid arithmetic (which reads cells as axis-aligned) and the checks agree; a rotated `gt`
/// unchanged.
pub fn without_rotation_noise(gt: [f64; 6], size: (usize, usize)) -> [f64; 6] {
    if is_rotated(&gt, size) {
        gt
    } else {
        [gt[0], gt[1], 0.0, gt[3], 0.0, gt[5]]
    }
}

/// The most a second raster's cell corners may lie from the first's, anywhere on a grid, as a
/// fraction of a cell, for the two to be one grid.
pub const SAME_GRID_TOLERANCE: f64 = 1e-6;

/// Whether the geotransforms `a` and `b` of two `width` x `height` rasters put every cell
/// corner within [`SAME_GRID_TOLERANCE`] of a cell of the other's: the tools that need one
/// grid (`raster_calc`, `raster_composite`, weights) read such rasters cell for cell. Origins
/// 1e-7 m apart (float noise between writers) made `raster_composite` warp an input that
/// `raster_calc` read as on the grid (attack round 23, R23-B24).
pub fn same_grid(a: &[f64; 6], b: &[f64; 6], (width, height): (usize, usize)) -> bool {
    let cell = a[1].abs().min(a[5].abs()).max(a[2].abs()).max(a[4].abs());
    if !(cell.is_finite() && cell > 0.0) {
        return a == b;
    }
    let (w, h) = (width.max(1) as f64, height.max(1) as f64);
    // The corner (col, row) lies at origin + col * (a[1], a[4]) + row * (a[2], a[5]); the
    // farthest corner's difference is bounded by the terms' differences times the size.
    let dx = (a[0] - b[0]).abs() + (a[1] - b[1]).abs() * w + (a[2] - b[2]).abs() * h;
    let dy = (a[3] - b[3]).abs() + (a[4] - b[4]).abs() * w + (a[5] - b[5]).abs() * h;
    dx.max(dy) <= SAME_GRID_TOLERANCE * cell
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_file_is_centre_based() {
        // 10 m cells, top-left cell centred at (105, 195): the corner is (100, 200).
        let gt = parse_world_file("10\n0\n0\n-10\n105\n195\n").unwrap();
        assert_eq!(gt, [100.0, 10.0, 0.0, 200.0, 0.0, -10.0]);
    }

    #[test]
    fn aux_geotransform_and_srs() {
        let text = "<PAMDataset><SRS dataAxisToSRSAxisMapping=\"1,2\">PROJCS[&quot;x&quot;]</SRS>\
                    <GeoTransform>  1.0e+02,  2.0e+01,  0,  2.0e+02,  0, -2.0e+01</GeoTransform></PAMDataset>";
        assert_eq!(
            parse_aux_geotransform(text).unwrap(),
            [100.0, 20.0, 0.0, 200.0, 0.0, -20.0]
        );
        assert_eq!(parse_aux_srs(text).unwrap(), "PROJCS[\"x\"]");
    }

    /// Regression guard: the sidecar is read again after the pre-open check, so its CRS text
    /// must not reach PROJ if it names a file (a swapped sidecar).
    #[test]
    fn sidecar_crs_naming_a_file_is_not_parsed() {
        assert!(names_a_file(
            "BOUNDCRS[SOURCECRS[],ABRIDGEDTRANSFORMATION[\"x\",PARAMETERFILE[\"f\",\"/dev/stdin\"]]]"
        ));
        assert!(names_a_file("+proj=longlat +NADGRIDS=/x"));
        assert!(!names_a_file("GEOGCS[\"WGS 84\"]"));
    }

    /// Attack round 21, R21-B6: a sidecar repeating the file's CRS in ESRI WKT (no authority
    /// code, so labelled by its name) is the same CRS, no conflict; another CRS still is.
    #[test]
    fn r21_b6_one_crs_in_two_spellings_is_no_conflict() {
        let epsg = SpatialRef::from_epsg(32633).unwrap();
        let esri = r#"PROJCS["WGS_1984_UTM_Zone_33N",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",0.0],PARAMETER["Central_Meridian",15.0],PARAMETER["Scale_Factor",0.9996],PARAMETER["Latitude_Of_Origin",0.0],UNIT["Meter",1.0]]"#;
        let candidate = |source: &str, crs: &str, wkt: String| GeorefCandidate {
            source: source.into(),
            geotransform: None,
            crs: Some(crs.into()),
            crs_wkt: Some(wkt),
        };
        let internal = candidate("internal", "EPSG:32633", epsg.to_wkt().unwrap());
        let same = candidate("aux_xml", "WGS_1984_UTM_Zone_33N", esri.to_string());
        assert!(conflicts(&[internal.clone(), same], (10, 10)).is_empty());
        let other = SpatialRef::from_epsg(32634).unwrap();
        let different = candidate("aux_xml", "EPSG:32634", other.to_wkt().unwrap());
        assert_eq!(conflicts(&[internal, different], (10, 10)).len(), 1);
    }

    #[test]
    fn conflicting_pixel_sizes_are_named() {
        let a = GeorefCandidate {
            source: "internal".into(),
            geotransform: Some([0.0, 10.0, 0.0, 0.0, 0.0, -10.0]),
            crs: None,
            crs_wkt: None,
        };
        let b = GeorefCandidate {
            source: "aux_xml".into(),
            geotransform: Some([0.0, 20.0, 0.0, 0.0, 0.0, -20.0]),
            crs: None,
            crs_wkt: None,
        };
        let lines = conflicts(&[a.clone(), b], (100, 100));
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("10 x -10") && lines[0].contains("20 x -20"),
            "{lines:?}"
        );
        assert!(conflicts(&[a.clone(), a], (100, 100)).is_empty());
    }

    /// Attack round 17, R17-B3: a six-decimal world file beside a GeoTIFF of 1/3 m cells
    /// places a 300 x 300 raster within 0.0003 of a cell of the file's own geotransform: the
    /// same place, no conflict. Half a cell off is one.
    #[test]
    fn r17_b3_geotransforms_that_place_the_raster_alike_agree() {
        let third = 1.0 / 3.0;
        let own = [500_000.0, third, 0.0, 5_000_100.0, 0.0, -third];
        let written = [
            499_999.999_999_5,
            0.333_333,
            0.0,
            5_000_100.000_000_5,
            0.0,
            -0.333_333,
        ];
        assert!(same_place(&own, &written, (300, 300)));
        let half = [
            500_000.0 + third / 2.0,
            third,
            0.0,
            5_000_100.0,
            0.0,
            -third,
        ];
        assert!(!same_place(&own, &half, (300, 300)));
    }

    #[test]
    fn a_degree_is_about_111_km() {
        let wgs84 = SpatialRef::from_epsg(4326).unwrap();
        let (x, y) = cell_size_metres(&wgs84, 1.0, 1.0, 0.0).unwrap();
        assert!((x - 111_319.5).abs() < 1.0, "{x}");
        assert!((y - 110_574.4).abs() < 1.0, "{y}");
        let (x60, _) = cell_size_metres(&wgs84, 1.0, 1.0, 60.0).unwrap();
        assert!((x60 - 55_799.9).abs() < 5.0, "{x60}");
    }
}
