//! What GDAL reads for one input, listed without side effects: the input's **read set**.
//!
//! A person's sign-off and an input's lineage must cover every file GDAL reads for the input,
//! not only the file named: a VRT's sources (at any depth: VRTs of VRTs, mask bands,
//! overviews, a warped VRT's source), the datasets an `.aux.xml` names (`OVERVIEW_FILE`,
//! geolocation arrays), the files of a folder dataset, and the sidecars GDAL reads by name
//! beside each of them (PAM `.aux.xml`, overviews, masks, world files, `.prj`, ...).
//!
//! [`list`] finds them from the same parse the confinement checks use
//! (`references::references_in`, `read_document`, `parse`), with the same depth limit, and
//! does nothing else: no folder watch, no memory reservation, no record of checked
//! identities (those belong to the open, `super::check_before_open`). It reads only files
//! inside a workspace: a reference that leads outside, to a virtual path or to a special
//! file makes the set unlistable ([`Unlistable`]), and a caller that binds data to the set
//! (a sign-off) refuses rather than binding less than GDAL reads. Regression, issue 21,
//! attack round 10, R10-1 (a VRT's source rewritten while the sign-off form was open ran as
//! approved) and R10-2 (a VRT around an interpolated output hid its lineage).
//!
//! A list of sidecar names cannot know every companion a driver reads (attack round 13,
//! R13-1: a MIF's `.mid` was missing, the third time this class came back), so the set also
//! holds what GDAL itself listed for the input (`GDALGetFileList`) when it last opened it
//! through the confined open ([`record_listing`], called by `super::confine_opened` after
//! every listed file passed its checks): an IDRISI raster's `.smp` palette, say, which no
//! suffix names. The gated step opens every input right before the gate binds a sign-off and
//! again after the person answered, so the listing is the one of the call being approved.

use super::references;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Most distinct files (sources and sidecars) a read set lists; a larger one is unlistable.
pub const MAX_READ_SET_FILES: usize = 100_000;

/// Most inputs whose last listing is kept (the oldest is forgotten first).
const MAX_LISTED_INPUTS: usize = 256;
/// Most files kept of one listing; a longer one is kept as "too many", which makes the read
/// set unlistable (a sign-off binds far fewer files, `approval::MAX_BOUND_FILES`).
const MAX_LISTED_FILES: usize = 1_000;

/// What GDAL listed for an input at its last confined open: its canonical files, or `None`
/// when it listed more than [`MAX_LISTED_FILES`].
type Listing = Option<Vec<PathBuf>>;

/// The last listing of each input, with the order it was recorded in (for forgetting), and
/// the next order.
type Listings = (u64, HashMap<PathBuf, (u64, Listing)>);

/// Every input's last listing ([`record_listing`]).
static LISTINGS: Mutex<Option<Listings>> = Mutex::new(None);

/// Record what GDAL listed (`GDALGetFileList`, as GDAL names the files) for the dataset
/// opened from `input`: the regular files among them, canonical. Called once every listed
/// file passed the after-open checks (inside a workspace, not special). The server's own
/// staged outputs are not recorded.
pub fn record_listing(input: &Path, listed: &[String]) {
    let Ok(key) = std::fs::canonicalize(input) else {
        return;
    };
    if key
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with(".gdal-mcp-"))
    {
        return;
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for name in listed {
        if !std::fs::metadata(name).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(name) else {
            continue;
        };
        if real != key && !files.contains(&real) {
            files.push(real);
        }
    }
    let listing = (files.len() <= MAX_LISTED_FILES).then_some(files);
    let Ok(mut guard) = LISTINGS.lock() else {
        return;
    };
    let (counter, map) = guard.get_or_insert_with(|| (0, HashMap::new()));
    *counter += 1;
    map.insert(key, (*counter, listing));
    if map.len() > MAX_LISTED_INPUTS {
        if let Some(oldest) = map
            .iter()
            .min_by_key(|(_, (order, _))| *order)
            .map(|(path, _)| path.clone())
        {
            map.remove(&oldest);
        }
    }
}

/// What GDAL listed for `input` at its last confined open (`Ok(empty)` when it was not opened
/// since the server started, or its listing was forgotten).
fn listed(input: &Path) -> Result<Vec<PathBuf>, Unlistable> {
    let key = std::fs::canonicalize(input).unwrap_or_else(|_| input.to_path_buf());
    let Ok(guard) = LISTINGS.lock() else {
        return Err(Unlistable(format!(
            "{}: the files GDAL listed for it cannot be read back",
            input.display()
        )));
    };
    match guard.as_ref().and_then(|(_, map)| map.get(&key)) {
        None => Ok(Vec::new()),
        Some((_, Some(files))) => Ok(files.clone()),
        Some((_, None)) => Err(Unlistable(format!(
            "{}: GDAL lists more than {MAX_LISTED_FILES} files for it",
            input.display()
        ))),
    }
}

/// The files GDAL reads for one input besides the input itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// Every file GDAL opens through the input (a VRT's sources at any depth, the datasets
    /// its `.aux.xml` names, a folder's files), canonical, each once, in the order found.
    pub sources: Vec<PathBuf>,
    /// The sidecars GDAL reads by name beside the input and beside each source, the files
    /// a header names (an IDRISI `.rdc`'s `.ref`) and the files GDAL listed for the input at
    /// its last open ([`record_listing`]), canonical, sorted, each once, none of them a source.
    pub sidecars: Vec<PathBuf>,
}

/// Why a read set cannot be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unlistable(pub String);

/// The read set of `input` (a path inside a workspace, as the tool resolved it).
pub fn list(input: &Path) -> Result<ReadSet, Unlistable> {
    let start = std::fs::canonicalize(input).unwrap_or_else(|_| input.to_path_buf());
    let sources = sources(input)?;
    let mut seen: BTreeSet<PathBuf> = sources.iter().cloned().collect();
    seen.insert(start.clone());
    // The files GDAL reads: the input's and every source's, folders by their files.
    let files: Vec<&PathBuf> = std::iter::once(&start)
        .chain(sources.iter())
        .filter(|p| !p.is_dir())
        .collect();
    let mut sidecars = BTreeSet::new();
    for (folder, names) in by_folder(&files) {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten().take(crate::workspace::MAX_FOLDER_ENTRIES) {
            let lower = entry.file_name().to_string_lossy().to_lowercase();
            if !names.contains(&lower) || !entry.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            if !seen.contains(&path) {
                sidecars.insert(path);
            }
        }
        if seen.len() + sidecars.len() > MAX_READ_SET_FILES {
            return Err(too_many(input));
        }
    }
    // Files a header names by another name than the file's: an IDRISI `.rdc`'s `ref. system`
    // names a `.ref` that IDRISI projects share between rasters (attack round 13, R13-5).
    let mut named: Vec<PathBuf> = Vec::new();
    for file in &files {
        let found =
            super::drivers::idrisi_ref_files(input, file).map_err(|e| Unlistable(e.to_string()))?;
        named.extend(found.into_iter().map(|(_, candidate, _)| candidate));
    }
    // And what GDAL itself listed for the input (R13-1's second half): companions no suffix
    // above names, each inside a workspace (the after-open check refused any other).
    named.extend(listed(input)?);
    for candidate in named {
        if !std::fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let real = std::fs::canonicalize(&candidate).unwrap_or(candidate);
        if !super::inside(&real.display().to_string()) {
            return Err(Unlistable(format!(
                "{}: it makes GDAL read {}, which is outside every workspace",
                input.display(),
                real.display()
            )));
        }
        if !seen.contains(&real) {
            sidecars.insert(real);
        }
    }
    if seen.len() + sidecars.len() > MAX_READ_SET_FILES {
        return Err(too_many(input));
    }
    Ok(ReadSet {
        sources,
        sidecars: sidecars.into_iter().collect(),
    })
}

/// The sources of `input`'s read set alone ([`ReadSet::sources`]), without looking for
/// sidecars: what an input's lineage is made of besides the input's own.
pub fn sources(input: &Path) -> Result<Vec<PathBuf>, Unlistable> {
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let start = std::fs::canonicalize(input).unwrap_or_else(|_| input.to_path_buf());
    seen.insert(start.clone());
    let mut sources = Vec::new();
    let mut stack = vec![(start.clone(), 0usize)];
    while let Some((file, depth)) = stack.pop() {
        for path in named_by(input, &file, depth)? {
            let Ok(meta) = std::fs::metadata(&path) else {
                // Not there: GDAL reads nothing from it now (one that appears is new to a
                // listing made later).
                continue;
            };
            let shown = path.display().to_string();
            if !super::inside(&shown) {
                return Err(Unlistable(format!(
                    "{}: it makes GDAL read {shown}, which is outside every workspace",
                    input.display()
                )));
            }
            if !(meta.is_file() || meta.is_dir()) {
                return Err(Unlistable(format!(
                    "{}: it makes GDAL read {shown}, which is not a regular file or folder",
                    input.display()
                )));
            }
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            if seen.insert(real.clone()) {
                if seen.len() > MAX_READ_SET_FILES {
                    return Err(too_many(input));
                }
                sources.push(real.clone());
                stack.push((real, depth + 1));
            }
        }
    }
    Ok(sources)
}

fn too_many(input: &Path) -> Unlistable {
    Unlistable(format!(
        "{}: GDAL reads more than {MAX_READ_SET_FILES} files for it",
        input.display()
    ))
}

/// The paths `file` makes GDAL open (unresolved): a VRT document's references, the datasets
/// its `.aux.xml` names, a folder's entries.
fn named_by(input: &Path, file: &Path, depth: usize) -> Result<Vec<PathBuf>, Unlistable> {
    let refused = |e: crate::gdal::GdalError| Unlistable(e.to_string());
    let mut found = Vec::new();
    if file.is_dir() {
        if depth >= crate::workspace::MAX_FOLDER_DEPTH {
            return Err(Unlistable(format!(
                "{}: its folders nest more than {} deep",
                input.display(),
                crate::workspace::MAX_FOLDER_DEPTH
            )));
        }
        let entries = std::fs::read_dir(file).map_err(|e| {
            Unlistable(format!(
                "{}: the folder {} cannot be listed ({e})",
                input.display(),
                file.display()
            ))
        })?;
        for entry in entries
            .flatten()
            .take(crate::workspace::MAX_FOLDER_ENTRIES + 1)
        {
            found.push(entry.path());
        }
        if found.len() > crate::workspace::MAX_FOLDER_ENTRIES {
            return Err(too_many(input));
        }
        return Ok(found);
    }
    let mut references = Vec::new();
    if references::is_vrt_document(file) {
        if depth >= super::MAX_VRT_DEPTH {
            return Err(Unlistable(format!(
                "{}: VRTs nested more than {} deep (or referencing themselves)",
                input.display(),
                super::MAX_VRT_DEPTH
            )));
        }
        let text = references::read_document(file).map_err(refused)?;
        let document = references::parse(file, &text).map_err(refused)?;
        references.extend(references::references_in(file, &document).map_err(refused)?);
    }
    for pam in pam_documents(file) {
        references.extend(references::vrt_references(&pam).map_err(refused)?);
    }
    for reference in references {
        if crate::workspace::is_virtual(&reference.written) {
            return Err(Unlistable(format!(
                "{}: it makes GDAL read \"{}\", a virtual path or a URL",
                input.display(),
                reference.written
            )));
        }
        found.extend(reference.paths);
    }
    Ok(found)
}

/// The `.aux.xml` documents GDAL reads beside `file` (`name.aux.xml`, `stem.aux.xml`).
fn pam_documents(file: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else {
        return Vec::new();
    };
    let stem = crate::gdal::stem_of(file).unwrap_or(name);
    let mut found = Vec::new();
    for base in [name, stem] {
        let mut pam = base.to_os_string();
        pam.push(".aux.xml");
        let pam = parent.join(pam);
        if std::fs::metadata(&pam).is_ok_and(|m| m.is_file()) && !found.contains(&pam) {
            found.push(pam);
        }
    }
    found
}

/// The sidecar names GDAL reads by name beside `file`, lower-cased: its PAM `.aux.xml`,
/// overviews, masks, world files, `.prj`, `.hdr`, `.aux`/`.rrd`, `_rpc.txt`, `.gfs`, ...
/// (GDAL and the drivers look for them in either case).
pub fn sidecar_names(file: &Path) -> Vec<String> {
    let Some((name, stem)) = crate::gdal::name_and_stem(file) else {
        return Vec::new();
    };
    let (name, stem) = (name.to_lowercase(), stem.to_lowercase());
    let extension = crate::gdal::extension_of(file)
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    // `<name>.hdr`: ENVI's header appended to the full name (`d.bin.hdr`), which holds the
    // grid, CRS, type and byte order (attack round 11, R11-5: rewritten while the form was
    // open, it ran as approved, moved 10°).
    // `-wal`, `-shm`, `-journal`: a SQLite database's (GeoPackage's) write-ahead log and
    // journal, whose pages GDAL reads as the database's (attack round 12, R12-3: a WAL replaced
    // while the form was open moved a point 9° and ran as approved).
    let mut names: Vec<String> = [
        ".aux.xml", ".ovr", ".msk", ".aux", ".prj", ".xml", ".hdr", "-wal", "-shm", "-journal",
    ]
    .iter()
    .map(|s| format!("{name}{s}"))
    .collect();
    names.extend(
        [
            ".aux.xml", ".aux", ".rrd", ".prj", ".hdr", ".wld", ".gfs", ".xsd", ".csvt", ".cpg",
            ".imd", ".rpb", "_rpc.txt", ".tab", ".stx", ".sta", ".clr", ".blw",
            // Headers and companions of formats whose data file is opened: SAGA's `.sgrd`
            // and `.mgrd` (origin, cell size, Z factor, nodata, byte order: R11-5), IDRISI's
            // `.rdc` and `.ref`, Erdas's spill file `.ige`, a shapefile's `.dbf`, `.shx`, `.qix`.
            ".sgrd", ".mgrd", ".rdc", ".ref", ".ige", ".dbf", ".shx", ".qix",
            // MapInfo TAB's geometry, attributes and index (R12-4: `x.map` swapped ran), and
            // a MIF's attributes (R13-1: `x.mid` replaced while the form was open ran).
            ".map", ".dat", ".id", ".ind", ".mid",
        ]
        .iter()
        .map(|s| format!("{stem}{s}")),
    );
    // World files: `.tfw` (first and last letters of the extension, then `w`), `.tifw`.
    if let (Some(first), Some(last)) = (extension.chars().next(), extension.chars().last()) {
        names.push(format!("{stem}.{first}{last}w"));
        names.push(format!("{stem}.{extension}w"));
    }
    names
}

/// The sidecar names of `files`, grouped by folder (one listing of each folder).
fn by_folder(files: &[&PathBuf]) -> Vec<(PathBuf, BTreeSet<String>)> {
    let mut folders: std::collections::BTreeMap<PathBuf, BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for file in files {
        let Some(parent) = file.parent() else {
            continue;
        };
        folders
            .entry(parent.to_path_buf())
            .or_default()
            .extend(sidecar_names(file));
    }
    folders.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    /// A new temporary folder and its canonical path.
    fn temp_folder() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        (dir, d)
    }

    fn vrt(sources: &[&str]) -> String {
        let mut text = String::from(
            "<VRTDataset rasterXSize=\"2\" rasterYSize=\"2\">\n<VRTRasterBand dataType=\"Byte\" \
             band=\"1\">\n",
        );
        for source in sources {
            text.push_str(&format!(
                "<SimpleSource><SourceFilename relativeToVRT=\"1\">{source}</SourceFilename>\
                 <SourceBand>1</SourceBand></SimpleSource>\n"
            ));
        }
        text.push_str("</VRTRasterBand>\n</VRTDataset>\n");
        text
    }

    /// The read set of a VRT of a VRT: both levels' sources, each once, with the sidecars of
    /// the input and of every source (in any case), and nothing that is not read.
    #[test]
    fn r10_1_a_vrt_reads_its_sources_at_every_depth_and_their_sidecars() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(d.join("tiles")).unwrap();
        write(&d.join("tiles/a.tif"), "a");
        write(&d.join("tiles/b.tif"), "b");
        write(&d.join("tiles/a.tif.aux.xml"), "<PAMDataset/>");
        write(&d.join("tiles/B.TFW"), "1\n0\n0\n-1\n0\n0\n");
        write(&d.join("tiles/unrelated.tif"), "c");
        write(&d.join("inner.vrt"), &vrt(&["tiles/a.tif", "tiles/b.tif"]));
        // The outer names `a.tif` twice (directly and through the inner VRT) and one absent
        // file, which GDAL cannot read now.
        write(
            &d.join("outer.vrt"),
            &vrt(&["inner.vrt", "tiles/a.tif", "tiles/missing.tif"]),
        );
        write(&d.join("outer.vrt.ovr"), "o");
        let set = list(&d.join("outer.vrt")).unwrap();
        let sources: BTreeSet<PathBuf> = set.sources.iter().cloned().collect();
        assert_eq!(
            sources,
            BTreeSet::from([
                d.join("inner.vrt"),
                d.join("tiles/a.tif"),
                d.join("tiles/b.tif")
            ])
        );
        assert_eq!(set.sources.len(), 3, "each source once: {set:?}");
        assert_eq!(
            set.sidecars,
            vec![
                d.join("outer.vrt.ovr"),
                d.join("tiles/B.TFW"),
                d.join("tiles/a.tif.aux.xml"),
            ]
        );
        // The clean twin: a plain file reads nothing else.
        let plain = list(&d.join("tiles/unrelated.tif")).unwrap();
        assert_eq!(plain, ReadSet::default());
    }

    /// R11-5: an ENVI file's header appended to its full name (`d.bin.hdr`) and a SAGA grid's
    /// `.sgrd` are read by GDAL, and listed; a file beside them that GDAL does not read is not.
    #[test]
    fn r11_5_envi_and_saga_headers_are_in_the_read_set() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        for name in ["d.bin", "d.bin.hdr", "x.sdat", "x.sgrd", "x.prj", "x.txt"] {
            write(&d.join(name), name);
        }
        assert_eq!(
            list(&d.join("d.bin")).unwrap().sidecars,
            vec![d.join("d.bin.hdr")]
        );
        assert_eq!(
            list(&d.join("x.sdat")).unwrap().sidecars,
            vec![d.join("x.prj"), d.join("x.sgrd")]
        );
    }

    /// R12-3, R12-4: a GeoPackage's write-ahead log and shared memory, and a MapInfo table's
    /// geometry, attributes and index files, are read by GDAL, and listed.
    #[test]
    fn r12_3_a_databases_log_and_a_mapinfo_tables_files_are_in_the_read_set() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        for name in [
            "x.gpkg",
            "x.gpkg-wal",
            "x.gpkg-shm",
            "t.tab",
            "t.map",
            "t.dat",
            "t.id",
        ] {
            write(&d.join(name), name);
        }
        assert_eq!(
            list(&d.join("x.gpkg")).unwrap().sidecars,
            vec![d.join("x.gpkg-shm"), d.join("x.gpkg-wal")]
        );
        assert_eq!(
            list(&d.join("t.tab")).unwrap().sidecars,
            vec![d.join("t.dat"), d.join("t.id"), d.join("t.map")]
        );
    }

    /// Regression (attack round 13, R13-1): a MIF's attributes live in its `.mid`, replaced
    /// while the form was open (v = 1 became 99) and run as approved; and an IDRISI raster's
    /// CRS in the `.ref` its `.rdc` names (R13-5's list), whatever that file is called.
    #[test]
    fn r13_1_a_mifs_mid_and_an_idrisi_ref_are_in_the_read_set() {
        let (_dir, d) = temp_folder();
        write(&d.join("x.mif"), "Version 300\n");
        write(&d.join("x.mid"), "1\n");
        write(&d.join("y.mid"), "1\n");
        assert_eq!(
            list(&d.join("x.mif")).unwrap().sidecars,
            vec![d.join("x.mid")]
        );
        write(&d.join("r.rst"), "r");
        write(&d.join("r.rdc"), "ref. system=shared\n");
        write(&d.join("shared.ref"), "ref. system : x\n");
        let set = list(&d.join("r.rst")).unwrap();
        assert_eq!(
            set.sidecars,
            vec![d.join("r.rdc"), d.join("shared.ref")],
            "{set:?}"
        );
    }

    /// Regression (attack round 13, R13-1, its second half): the read set was the sidecar
    /// names and the files headers name, not what GDAL reads. GDAL 3.6.2 lists an IDRISI
    /// raster's `.smp` (its palette, read for the colour table), which no sidecar name covers;
    /// once an open recorded GDAL's listing, the read set holds it, and a file GDAL does not
    /// list stays out. A listing longer than a sign-off could bind makes the set unlistable.
    #[test]
    fn r13_1_what_gdal_lists_for_an_input_is_in_the_read_set() {
        let (_dir, d) = temp_folder();
        // A 4 x 4 palette raster described as a VRT, copied to IDRISI (which writes `r.smp`).
        write(
            &d.join("pal.vrt"),
            "<VRTDataset rasterXSize=\"4\" rasterYSize=\"4\"><VRTRasterBand dataType=\"Byte\" \
             band=\"1\"><ColorInterp>Palette</ColorInterp><ColorTable><Entry c1=\"0\" c2=\"0\" \
             c3=\"0\" c4=\"255\"/><Entry c1=\"255\" c2=\"0\" c3=\"0\" c4=\"255\"/></ColorTable>\
             </VRTRasterBand></VRTDataset>",
        );
        let palette = gdal::Dataset::open(d.join("pal.vrt")).unwrap();
        let rst = gdal::DriverManager::get_driver_by_name("RST").unwrap();
        drop(
            palette
                .create_copy(&rst, d.join("r.rst"), &gdal::cpl::CslStringList::new())
                .unwrap(),
        );
        drop(palette);
        std::fs::remove_file(d.join("pal.vrt")).unwrap();
        write(&d.join("r.txt"), "not read");
        let input = d.join("r.rst");
        assert!(!sidecar_names(&input).contains(&"r.smp".to_string()));
        let before = list(&input).unwrap();
        assert!(!before.sidecars.contains(&d.join("r.smp")), "{before:?}");
        let opened = gdal::Dataset::open(&input).unwrap();
        let listed = super::super::file_list(&opened);
        assert!(
            listed.iter().any(|f| f.ends_with("r.smp")),
            "GDAL lists the palette: {listed:?}"
        );
        record_listing(&input, &listed);
        let set = list(&input).unwrap();
        assert!(set.sidecars.contains(&d.join("r.smp")), "{set:?}");
        assert!(!set.sidecars.contains(&d.join("r.txt")), "{set:?}");
        assert_eq!(set.sidecars.len(), before.sidecars.len() + 1, "{set:?}");
        // Too many to bind: unlistable, never bound by less.
        let many: Vec<String> = (0..=MAX_LISTED_FILES)
            .map(|i| {
                let f = d.join(format!("m{i}"));
                write(&f, "m");
                f.display().to_string()
            })
            .collect();
        record_listing(&input, &many);
        let why = list(&input).unwrap_err();
        assert!(why.0.contains("GDAL lists more than"), "{why}");
    }

    /// Regression (attack round 13, R13-4): a VRT band source written as a `SourceFilename`
    /// attribute is a source of the read set (what a sign-off binds and what lineage follows),
    /// as its element twin is.
    #[test]
    fn r13_4_an_attribute_form_source_is_in_the_read_set() {
        let (_dir, d) = temp_folder();
        write(&d.join("interp.tif"), "i");
        let attribute = |source: &str| {
            format!(
                "<VRTDataset rasterXSize=\"2\" rasterYSize=\"2\"><VRTRasterBand \
                 dataType=\"Byte\" band=\"1\"><SimpleSource SourceFilename=\"{source}\"/>\
                 </VRTRasterBand></VRTDataset>"
            )
        };
        write(
            &d.join("attr.vrt"),
            &attribute(&d.join("interp.tif").display().to_string()),
        );
        write(&d.join("elem.vrt"), &vrt(&["interp.tif"]));
        for input in ["attr.vrt", "elem.vrt"] {
            assert_eq!(
                sources(&d.join(input)).unwrap(),
                vec![d.join("interp.tif")],
                "{input}"
            );
        }
    }

    /// An `.aux.xml`'s `OVERVIEW_FILE` is read too; a folder dataset's files are its sources;
    /// a reference GDAL would read as a virtual path makes the set unlistable.
    #[test]
    fn r10_1_pam_references_folders_and_unlistable_sets() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        write(&d.join("x.tif"), "x");
        write(&d.join("ov.tif"), "o");
        write(
            &d.join("x.tif.aux.xml"),
            "<PAMDataset><Metadata><MDI key=\"OVERVIEW_FILE\">ov.tif</MDI></Metadata>\
             </PAMDataset>",
        );
        let set = list(&d.join("x.tif")).unwrap();
        assert!(set.sources.contains(&d.join("ov.tif")), "{set:?}");
        assert!(set.sidecars.contains(&d.join("x.tif.aux.xml")), "{set:?}");
        std::fs::create_dir(d.join("layer.gdb")).unwrap();
        write(&d.join("layer.gdb/a0000001.gdbtable"), "t");
        let folder = list(&d.join("layer.gdb")).unwrap();
        assert_eq!(folder.sources, vec![d.join("layer.gdb/a0000001.gdbtable")]);
        write(&d.join("v.vrt"), &vrt(&["/vsizip/a.zip/b.tif"]));
        let why = list(&d.join("v.vrt")).unwrap_err();
        assert!(why.0.contains("virtual path"), "{why}");
    }
}
