//! What a spreadsheet's cells expand to once GDAL has copied them out, measured before the
//! open from the zip's entries, streamed through GDAL's own `/vsizip/` reader in constant
//! memory (one length per shared string aside):
//! * **XLSX**: every cell of type `s` (`<c t="s"><v>N</v></c>`, in any sheet) gets its own copy
//!   of shared string N, so the cells hold the sum over such cells of their string's length
//!   (`xl/sharedStrings.xml`, `<si>` by `<si>`);
//! * **ODS**: a cell repeated by `table:number-columns-repeated` in a row repeated by
//!   `table:number-rows-repeated` is copied into each place: the cells hold the sum over cells
//!   of their text (and `office:` value attributes, and the spaces `text:s` stands for) times
//!   both repetitions. Empty cells count nothing (the usual trailing blocks of a million empty
//!   rows are not text).
//!
//! Above the table byte budget (`GDAL_MCP_TABLE_MAX_BYTES`) the table is refused.
//!
//! And the cells GDAL fills whatever they hold: it keeps every row of a layer in memory with
//! one field per column of the widest row, so a sheet whose rows reach a far column (even
//! through an empty formatted cell) costs rows x that column ([`Grid`], [`OdsGrid`]); above
//! `GDAL_MCP_TABLE_MAX_CELLS` the table is refused. Every `<sheet>` of the workbook is one
//! layer reading the part its relationship names, so parts are counted per sheet (two sheets
//! naming one part count it twice). Regression,
//! issue 21 attack round 7, R7-10: one 4 MiB shared string referenced by 1000 cells, in a
//! 3.19 MB XLSX that inflates to 4.2 MB (inside every zip budget), took `vector_info` to 4 GB.
//! Tags are recognised as GDAL's expat-based readers see them (CDATA is text, comments are
//! not); every length is an upper bound (markup inside a string and entities are counted as
//! written).

use super::{ErrorCapture, GdalError, TableBudget};
use std::path::Path;

/// The most fields GDAL's XLSX reader creates (measured with GDAL 3.6: "Maximum number of
/// fields supported is 2000").
const MAX_XLSX_FIELDS: u64 = 2000;
/// The longest run of missing rows GDAL's XLSX reader fills with empty rows (GDAL 3.6 refuses
/// a longer gap: "Too big gap with previous valid row").
const MAX_XLSX_ROW_GAP: u64 = 10_000;
/// Bytes GDAL holds per cell it fills, filled or empty (its field; measured with GDAL 3.6:
/// 20 M cells took 362 MB, 40 M 675 MB).
const CELL_BYTES: u64 = 16;

/// Refuse the spreadsheet or KMZ at `pinned` (shown as `path`) whose cells (or KML tree) expand
/// past the budget; else the bytes GDAL is estimated to hold once it has read it.
pub(super) fn check(
    path: &Path,
    pinned: &Path,
    names: &[String],
    budget: &TableBudget,
) -> Result<u64, GdalError> {
    // What GDAL will hold once it has read the file: 16 bytes a filled-in cell (GDAL's
    // field), the shared strings' copies, a KML tree.
    let mut holds: u64 = 0;
    let entry = |name: &str| format!("/vsizip/{}/{name}", pinned.display());
    let refuse = |what: String, total: u64| {
        GdalError::Arguments(format!(
            "input: {} {what}: its cells expand to at least {total} bytes, more than the {} \
             bytes a table may hold (GDAL_MCP_TABLE_MAX_BYTES); nothing was read",
            path.display(),
            budget.bytes
        ))
    };
    let refuse_cells = |what: String, cells: u64| {
        GdalError::Arguments(format!(
            "input: {} {what}: GDAL keeps every cell of every row in memory (at least 16 bytes \
             each, even empty), {cells} cells, more than the {} cells a table may hold \
             (GDAL_MCP_TABLE_MAX_CELLS); nothing was read. Delete the far column or the empty \
             formatted cells that widen every row, split the sheet, or raise \
             GDAL_MCP_TABLE_MAX_CELLS",
            path.display(),
            budget.cells
        ))
    };
    if names.iter().any(|n| n == "xl/workbook.xml") {
        let lengths = match names.iter().find(|n| *n == "xl/sharedStrings.xml") {
            Some(shared) => {
                let mut strings = SharedStrings::default();
                stream(&entry(shared), &mut strings)?;
                strings.lengths
            }
            None => Vec::new(),
        };
        // GDAL makes a layer of every `<sheet>` of the workbook, reading the entry its
        // relationship names (anywhere in the zip; two sheets may name the same entry), so
        // each sheet counts its entry's cells, and a sheet whose entry is not found here
        // counts as the largest entry.
        let sheets = workbook_sheets(&entry, names)?;
        let mut measured: Vec<(String, u64, u64)> = Vec::new();
        for name in names.iter().filter(|n| {
            n.to_ascii_lowercase().ends_with(".xml")
                && *n != "xl/sharedStrings.xml"
                && *n != "xl/workbook.xml"
                && *n != "[Content_Types].xml"
        }) {
            let mut sheet = Sheet {
                text: SharedCells {
                    lengths: &lengths,
                    ..SharedCells::default()
                },
                grid: Grid::default(),
            };
            stream(&entry(name), &mut sheet)?;
            measured.push((name.clone(), sheet.text.total, sheet.grid.cells()));
        }
        let largest = (
            measured.iter().map(|m| m.1).max().unwrap_or(0),
            measured.iter().map(|m| m.2).max().unwrap_or(0),
        );
        let (mut text, mut cells) = (0u64, 0u64);
        for target in &sheets {
            let (name, bytes, filled) = target
                .as_ref()
                .and_then(|t| measured.iter().find(|m| &m.0 == t))
                .map_or_else(
                    || {
                        (
                            "a sheet whose part is not found".to_string(),
                            largest.0,
                            largest.1,
                        )
                    },
                    |m| (format!("sheet \"{}\"", shorten(&m.0)), m.1, m.2),
                );
            text = text.saturating_add(bytes);
            cells = cells.saturating_add(filled);
            if text > budget.bytes {
                return Err(refuse(
                    format!(
                        "refers to its shared strings from so many cells ({name}) that GDAL, \
                         which copies the string into each cell"
                    ),
                    text,
                ));
            }
            if cells > budget.cells {
                return Err(refuse_cells(
                    format!(
                        "fills every row to its widest column ({name} holds {filled} cells once \
                         filled)"
                    ),
                    cells,
                ));
            }
        }
        holds = holds
            .saturating_add(cells.saturating_mul(CELL_BYTES))
            .saturating_add(text);
    }
    let kml: Vec<String> = names
        .iter()
        .filter(|n| n.to_ascii_lowercase().ends_with(".kml"))
        .map(|n| entry(n))
        .collect();
    if !kml.is_empty() {
        holds = holds.saturating_add(check_kml(path, &kml)?);
    }
    if names.iter().any(|n| n == "content.xml") {
        let mut content = Ods::default();
        stream(&entry("content.xml"), &mut content)?;
        content.grid.close_table();
        if content.text.total > budget.bytes {
            return Err(refuse(
                "repeats cells (table:number-columns-repeated, table:number-rows-repeated) so \
                 often that GDAL, which copies each repeated cell"
                    .to_string(),
                content.text.total,
            ));
        }
        if content.grid.total > budget.cells {
            return Err(refuse_cells(
                "fills every row to its table's last filled column, repeated rows and columns \
                 each in their place"
                    .to_string(),
                content.grid.total,
            ));
        }
        holds = holds
            .saturating_add(content.grid.total.saturating_mul(CELL_BYTES))
            .saturating_add(content.text.total);
    }
    Ok(holds)
}

fn shorten(name: &str) -> String {
    name.chars().take(80).collect()
}

/// The zip entry each `<sheet>` of `xl/workbook.xml` names through its relationship
/// (`xl/_rels/workbook.xml.rels`), resolved as GDAL resolves it (a `Target` starting with `/`
/// from the zip's root, any other from `xl/`); `None` for a sheet whose entry is not known.
fn workbook_sheets(
    entry: &impl Fn(&str) -> String,
    names: &[String],
) -> Result<Vec<Option<String>>, GdalError> {
    let mut rels = Relationships::default();
    if names.iter().any(|n| n == "xl/_rels/workbook.xml.rels") {
        stream(&entry("xl/_rels/workbook.xml.rels"), &mut rels)?;
    }
    let mut workbook = Workbook::default();
    stream(&entry("xl/workbook.xml"), &mut workbook)?;
    Ok(workbook
        .ids
        .iter()
        .map(|id| {
            let target = rels.targets.iter().find(|(i, _)| Some(i) == id.as_ref())?;
            let joined = match target.1.strip_prefix('/') {
                Some(rooted) => rooted.to_string(),
                None => format!("xl/{}", target.1),
            };
            let mut parts: Vec<&str> = Vec::new();
            for part in joined.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        parts.pop();
                    }
                    other => parts.push(other),
                }
            }
            let resolved = parts.join("/");
            names.contains(&resolved).then_some(resolved)
        })
        .collect())
}

/// `xl/_rels/workbook.xml.rels`: each relationship's `Id` and `Target`.
#[derive(Default)]
struct Relationships {
    targets: Vec<(String, String)>,
}

impl Sink for Relationships {
    fn text(&mut self, _: &[u8]) {}

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, _) = parts(tag);
        if closing || local(name) != b"Relationship" || self.targets.len() >= 100_000 {
            return;
        }
        if let (Some(id), Some(target)) = (attribute(tag, b"Id"), attribute(tag, b"Target")) {
            self.targets.push((
                String::from_utf8_lossy(id).to_string(),
                String::from_utf8_lossy(target).to_string(),
            ));
        }
    }
}

/// `xl/workbook.xml`: the relationship id of each `<sheet>` (`r:id`, as GDAL reads it).
#[derive(Default)]
struct Workbook {
    ids: Vec<Option<String>>,
}

impl Sink for Workbook {
    fn text(&mut self, _: &[u8]) {}

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, _) = parts(tag);
        if closing || local(name) != b"sheet" {
            return;
        }
        self.ids
            .push(attribute(tag, b"r:id").map(|id| String::from_utf8_lossy(id).to_string()));
    }
}

/// A part measured both ways at once: by the text GDAL copies out of it (`text`) and by the
/// grid of fields it fills (`grid`).
#[derive(Default)]
struct Both<T, G> {
    text: T,
    grid: G,
}

impl<T: Sink, G: Sink> Sink for Both<T, G> {
    fn text(&mut self, bytes: &[u8]) {
        self.text.text(bytes);
        self.grid.text(bytes);
    }

    fn tag(&mut self, tag: &[u8]) {
        self.text.tag(tag);
        self.grid.tag(tag);
    }
}

/// One worksheet part: its shared strings' text, and its grid.
type Sheet<'a> = Both<SharedCells<'a>, Grid>;

/// The cells GDAL's XLSX reader fills in one worksheet: every row (and every missing row it
/// fills in, up to its gap limit) holds as many fields as the widest column any cell reaches
/// (`r="ALK5"`, or one past the previous cell; an empty formatted cell counts), at most
/// GDAL's 2000. Regression, attack round 8, R8-1: rows holding A, B and an empty styled cell
/// at BXX, 660 KB on disk, took `vector_info` to 1.95 GB.
#[derive(Default)]
struct Grid {
    in_data: bool,
    rows: u64,
    /// The rows GDAL has made so far (its line number, 0-based, of the next row).
    line: u64,
    column: u64,
    widest: u64,
}

impl Grid {
    fn cells(&self) -> u64 {
        self.rows.saturating_mul(self.widest)
    }

    /// The 1-based column of a cell reference (`ALK5` -> 1000), if it starts with letters.
    fn column_of(reference: &[u8]) -> Option<u64> {
        let letters: Vec<u8> = reference
            .iter()
            .copied()
            .take_while(u8::is_ascii_alphabetic)
            .take(8)
            .collect();
        if letters.is_empty() {
            return None;
        }
        Some(letters.iter().fold(0u64, |n, l| {
            n.saturating_mul(26)
                .saturating_add(u64::from(l.to_ascii_uppercase() - b'A') + 1)
        }))
    }
}

impl Sink for Grid {
    fn text(&mut self, _: &[u8]) {}

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, selfclosing) = parts(tag);
        match local(name) {
            b"sheetData" => self.in_data = !closing && !selfclosing,
            b"row" if self.in_data && !closing => {
                if let Some(number) = attribute(tag, b"r").and_then(leading_number) {
                    let gap = number.saturating_sub(1).saturating_sub(self.line);
                    if gap <= MAX_XLSX_ROW_GAP {
                        self.rows = self.rows.saturating_add(gap);
                        self.line = self.line.saturating_add(gap);
                    }
                }
                self.rows = self.rows.saturating_add(1);
                self.line = self.line.saturating_add(1);
                self.column = 0;
            }
            b"c" if self.in_data && !closing => {
                let at = attribute(tag, b"r").and_then(Self::column_of).unwrap_or(0);
                self.column = self.column.saturating_add(1).max(at);
                self.widest = self.widest.max(self.column.min(MAX_XLSX_FIELDS));
            }
            _ => {}
        }
    }
}

/// Operator override of [`DEFAULT_KML_MAX_MEMORY_BYTES`].
pub const KML_MEMORY_VARIABLE: &str = "GDAL_MCP_KML_MAX_MEMORY_BYTES";
/// The most memory GDAL's KML readers may be expected to build for one KML document (512 MiB:
/// 20 MiB of point placemarks, 262,144 of them, are estimated at 362 MiB).
pub const DEFAULT_KML_MAX_MEMORY_BYTES: u64 = 512 << 20;
/// Bytes LIBKML holds per feature element (`Placemark`, `Folder`, ...), per other element, and
/// per byte of text, measured with GDAL 3.6's `ogrinfo -so -al` (VmHWM less the 50 MB of an
/// empty document) and rounded up: 20 MiB of empty `<Placemark/>` (1.75 M) took 920 MB, 525
/// bytes each; 20 MiB of point placemarks (262,144, three elements each) 288 MB; 20 MiB of
/// placemarks of five empty children 440 MB; 20 MiB of `ExtendedData` placemarks 281 MB; 16
/// MiB of coordinates in 200 lines 83 MB. Regression, attack round 8, R8-7: a 12 MB KMZ of
/// 100 MiB of point placemarks took `vector_info` to 1.58 GB (15 times its text).
const KML_FEATURE_BYTES: u64 = 1024;
const KML_ELEMENT_BYTES: u64 = 160;
const KML_TEXT_FACTOR: u64 = 2;

/// What GDAL's KML readers build from a KML document: they parse it whole into a tree.
#[derive(Default)]
struct KmlCost {
    features: u64,
    elements: u64,
    text: u64,
}

impl KmlCost {
    fn bytes(&self) -> u64 {
        self.features
            .saturating_mul(KML_FEATURE_BYTES)
            .saturating_add(self.elements.saturating_mul(KML_ELEMENT_BYTES))
            .saturating_add(self.text.saturating_mul(KML_TEXT_FACTOR))
    }
}

impl Sink for KmlCost {
    fn text(&mut self, bytes: &[u8]) {
        self.text = self.text.saturating_add(bytes.len() as u64);
    }

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, _) = parts(tag);
        if closing {
            return;
        }
        match local(name) {
            b"Placemark" | b"Document" | b"Folder" | b"NetworkLink" | b"GroundOverlay"
            | b"PhotoOverlay" | b"ScreenOverlay" | b"Tour" => {
                self.features = self.features.saturating_add(1);
            }
            _ => self.elements = self.elements.saturating_add(1),
        }
    }
}

/// Refuse a KML document (a `.kml` file, or the `.kml` entries of a KMZ, each given as the
/// path GDAL reads it by) whose tree, estimated from its elements and text as they stream by,
/// passes `GDAL_MCP_KML_MAX_MEMORY_BYTES`; the estimate otherwise. GDAL's LIBKML and KML
/// drivers parse the whole document into memory before the first feature.
pub fn check_kml(path: &Path, vsi_paths: &[String]) -> Result<u64, GdalError> {
    let budget = crate::budget::setting(KML_MEMORY_VARIABLE, DEFAULT_KML_MAX_MEMORY_BYTES);
    let mut cost = KmlCost::default();
    for vsi_path in vsi_paths {
        stream(vsi_path, &mut cost)?;
    }
    let estimate = cost.bytes();
    if estimate > budget {
        return Err(GdalError::Arguments(format!(
            "input: {} is KML that GDAL parses whole into memory: {} features, {} other \
             elements and {} bytes of text, an estimated {estimate} bytes, more than the {budget} \
             bytes one KML document may take ({KML_MEMORY_VARIABLE}); nothing was read. Convert \
             it to a GeoPackage outside the server (ogr2ogr), split it, or raise \
             {KML_MEMORY_VARIABLE}",
            path.display(),
            cost.features,
            cost.elements,
            cost.text
        )));
    }
    Ok(estimate)
}

use crate::gdal::policy::xml::{
    DEFAULT_XML_MAX_MEMORY_BYTES, XML_ELEMENT_BYTES, XML_MEMORY_VARIABLE, XML_TEXT_FACTOR,
};

/// What GDAL's XML readers build from a document: the whole tree, or (GML) the tree of the
/// largest feature, an element three levels down with all it holds (`FeatureCollection` >
/// `featureMember` > feature, or > `featureMembers` > feature).
#[derive(Default)]
struct XmlTreeCost {
    depth: usize,
    elements: u64,
    text: u64,
    feature: (u64, u64),
    largest: u64,
    /// The distinct names of elements four levels down (a GML feature's properties), up to
    /// [`MAX_COUNTED_NAMES`]: GDAL's GML driver makes a field of each.
    properties: std::collections::HashSet<Vec<u8>>,
}

/// Distinct property names counted at most (past it, the schema is past any budget).
const MAX_COUNTED_NAMES: usize = 1_000_000;

/// Bytes GDAL's GML driver holds per field of the schema it prescans, measured with GDAL 3.6
/// and rounded up: 20,000 distinct property names took `ogrinfo` 651 MB, 10,000 335 MB (attack
/// round 22, R22-A4).
const GML_FIELD_BYTES: u64 = 40 << 10;

impl XmlTreeCost {
    fn bytes(elements: u64, text: u64) -> u64 {
        elements
            .saturating_mul(XML_ELEMENT_BYTES)
            .saturating_add(text.saturating_mul(XML_TEXT_FACTOR))
    }

    fn feature_ends(&mut self) {
        let (elements, text) = std::mem::take(&mut self.feature);
        self.largest = self.largest.max(Self::bytes(elements, text));
    }
}

impl Sink for XmlTreeCost {
    fn text(&mut self, bytes: &[u8]) {
        let length = bytes.len() as u64;
        self.text = self.text.saturating_add(length);
        if self.depth >= 3 {
            self.feature.1 = self.feature.1.saturating_add(length);
        }
    }

    fn tag(&mut self, tag: &[u8]) {
        if matches!(tag.first(), Some(b'?' | b'!')) {
            return;
        }
        let (closing, _, selfclosing) = parts(tag);
        if closing {
            if self.depth == 3 {
                self.feature_ends();
            }
            self.depth = self.depth.saturating_sub(1);
            return;
        }
        self.elements = self.elements.saturating_add(1);
        self.depth += 1;
        if self.depth >= 3 {
            self.feature.0 = self.feature.0.saturating_add(1);
        }
        if self.depth == 4 && self.properties.len() < MAX_COUNTED_NAMES {
            let (_, name, _) = parts(tag);
            if !self.properties.contains(name) {
                self.properties.insert(name.to_vec());
            }
        }
        if selfclosing {
            if self.depth == 3 {
                self.feature_ends();
            }
            self.depth -= 1;
        }
    }
}

/// Refuse an XML document GDAL builds a tree from, as `vsi_path` reads it (shown as `path`),
/// whose tree passes `GDAL_MCP_XML_MAX_MEMORY_BYTES`: the whole document's (`whole`: a VRT, a
/// PAM `.aux.xml`), or its largest feature's (a GML file, which GDAL reads a feature at a
/// time); the estimate otherwise, to be charged to the shared memory budget. Nothing bounded
/// these trees but the 256 MiB text scan: four 61 MB GML files of one LineString each aborted
/// the server (attack round 21, R21-A1, R21-A2, R21-A5).
pub fn check_xml_tree(path: &Path, vsi_path: &str, whole: bool) -> Result<u64, GdalError> {
    let budget = crate::budget::setting(XML_MEMORY_VARIABLE, DEFAULT_XML_MAX_MEMORY_BYTES);
    xml_tree_within(path, vsi_path, whole, budget)
}

/// [`check_xml_tree`] against `budget`.
fn xml_tree_within(
    path: &Path,
    vsi_path: &str,
    whole: bool,
    budget: u64,
) -> Result<u64, GdalError> {
    let mut cost = XmlTreeCost::default();
    stream(vsi_path, &mut cost)?;
    let estimate = if whole {
        XmlTreeCost::bytes(cost.elements, cost.text)
    } else {
        cost.feature_ends();
        // The schema GDAL prescans: a field per distinct property name (R22-A4).
        cost.largest
            .saturating_add((cost.properties.len() as u64).saturating_mul(GML_FIELD_BYTES))
    };
    if estimate > budget {
        return Err(GdalError::Arguments(format!(
            "input: {} is XML that GDAL parses into a tree {}: an estimated {estimate} bytes \
             ({} elements and {} bytes of text in all), more than the {budget} bytes one such \
             tree may take ({XML_MEMORY_VARIABLE}); nothing was read. Simplify or split it \
             outside the server, or raise {XML_MEMORY_VARIABLE}",
            path.display(),
            if whole {
                "whole".to_string()
            } else {
                format!(
                    "a feature at a time, after a schema of a field per distinct property name \
                     ({} names)",
                    cost.properties.len()
                )
            },
            cost.elements,
            cost.text
        )));
    }
    Ok(estimate)
}

/// What the XML reader reports.
trait Sink {
    fn text(&mut self, bytes: &[u8]);
    fn tag(&mut self, tag: &[u8]);
}

/// The longest tag kept whole (longer ones are cut: their names and first attributes stay).
const MAX_TAG: usize = 4096;

#[derive(Default, PartialEq, Eq, Clone, Copy)]
enum State {
    #[default]
    Text,
    Tag,
    Cdata,
    Comment,
}

/// A streaming tokenizer: text, tags (`<...>`, without the brackets), CDATA as text, comments
/// and processing instructions dropped.
#[derive(Default)]
struct Lexer {
    state: State,
    tag: Vec<u8>,
    /// The last two bytes seen inside a comment (its end spans chunks).
    last: [u8; 2],
    /// CDATA bytes not yet handed on (up to two: maybe the `]]` of its end).
    pending: Vec<u8>,
}

impl Lexer {
    fn feed(&mut self, mut chunk: &[u8], sink: &mut impl Sink) {
        while !chunk.is_empty() {
            match self.state {
                State::Text => match chunk.iter().position(|&b| b == b'<') {
                    Some(at) => {
                        sink.text(&chunk[..at]);
                        self.state = State::Tag;
                        self.tag.clear();
                        chunk = &chunk[at + 1..];
                    }
                    None => {
                        sink.text(chunk);
                        chunk = &[];
                    }
                },
                State::Tag => {
                    let end = chunk.iter().position(|&b| b == b'>');
                    let part = &chunk[..end.unwrap_or(chunk.len())];
                    let room = MAX_TAG.saturating_sub(self.tag.len());
                    self.tag.extend_from_slice(&part[..part.len().min(room)]);
                    if self.tag.starts_with(b"![CDATA[") {
                        // Everything after the marker is text up to `]]>`.
                        let after = self.tag.split_off(8);
                        self.state = State::Cdata;
                        self.pending.clear();
                        let rest = &chunk[part.len().min(room)..];
                        self.cdata(&after, sink);
                        chunk = rest;
                        continue;
                    }
                    if self.tag.starts_with(b"!--") {
                        // The comment's end is looked for from here (its last two bytes
                        // may be the `--` of `-->`).
                        let seen = &self.tag[3..];
                        self.last = match seen {
                            [.., a, b] => [*a, *b],
                            [b] => [0, *b],
                            [] => [0, 0],
                        };
                        self.state = State::Comment;
                        chunk = &chunk[part.len().min(room)..];
                        continue;
                    }
                    match end {
                        Some(at) => {
                            if !self.tag.starts_with(b"?") && !self.tag.starts_with(b"!") {
                                sink.tag(&self.tag);
                            }
                            self.state = State::Text;
                            chunk = &chunk[at + 1..];
                        }
                        None => chunk = &[],
                    }
                }
                State::Cdata => {
                    let used = self.cdata(chunk, sink);
                    chunk = &chunk[used..];
                }
                State::Comment => {
                    let mut used = chunk.len();
                    for (i, &b) in chunk.iter().enumerate() {
                        if b == b'>' && self.last == *b"--" {
                            self.state = State::Text;
                            used = i + 1;
                            break;
                        }
                        self.last = [self.last[1], b];
                    }
                    chunk = &chunk[used..];
                }
            }
        }
    }

    /// CDATA bytes: text up to `]]>`; returns the bytes of `chunk` used. The last two bytes
    /// wait for the next chunk (they may be the `]]` of the end).
    fn cdata(&mut self, chunk: &[u8], sink: &mut impl Sink) -> usize {
        let mut data = std::mem::take(&mut self.pending);
        let before = data.len();
        data.extend_from_slice(chunk);
        if let Some(end) = data.windows(3).position(|w| w == b"]]>") {
            sink.text(&data[..end]);
            self.state = State::Text;
            return (end + 3).saturating_sub(before);
        }
        let keep = data.len().saturating_sub(2);
        sink.text(&data[..keep]);
        self.pending = data[keep..].to_vec();
        chunk.len()
    }
}

/// A tag's parts: whether it closes (`</x>`), its name as written (prefix included), whether it
/// closes itself (`<x/>`).
fn parts(tag: &[u8]) -> (bool, &[u8], bool) {
    let closing = tag.first() == Some(&b'/');
    let body = if closing { &tag[1..] } else { tag };
    let end = body
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == b'/')
        .unwrap_or(body.len());
    let selfclosing = tag.last() == Some(&b'/');
    (closing, &body[..end], selfclosing)
}

/// The name without its namespace prefix.
fn local(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&b| b == b':') {
        Some(at) => &name[at + 1..],
        None => name,
    }
}

/// The value of attribute `key` (as written, prefix included) of a tag, if present.
fn attribute<'a>(tag: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut from = 0;
    while let Some(at) = find(&tag[from..], key).map(|i| i + from) {
        from = at + key.len();
        let preceded = at > 0 && tag[at - 1].is_ascii_whitespace();
        let mut i = from;
        while tag.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        if !preceded || tag.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while tag.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        let quote = *tag.get(i)?;
        if quote != b'"' && quote != b'\'' {
            continue;
        }
        let start = i + 1;
        let len = tag.get(start..)?.iter().position(|&b| b == quote)?;
        return Some(&tag[start..start + len]);
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A repetition count as GDAL reads it (`atoi`: leading digits; none is 1).
fn count(value: Option<&[u8]>) -> u64 {
    value
        .and_then(leading_number)
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// The number an attribute starts with, as `atoi` reads it (blanks, then at most 19 digits).
fn leading_number(value: &[u8]) -> Option<u64> {
    let digits: Vec<u8> = value
        .iter()
        .copied()
        .skip_while(u8::is_ascii_whitespace)
        .take_while(u8::is_ascii_digit)
        .take(19)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse::<u64>().ok()
}

/// `xl/sharedStrings.xml`: the length of each `<si>`'s text, in order.
#[derive(Default)]
struct SharedStrings {
    lengths: Vec<u32>,
    current: Option<u64>,
}

impl Sink for SharedStrings {
    fn text(&mut self, bytes: &[u8]) {
        if let Some(current) = &mut self.current {
            *current = current.saturating_add(bytes.len() as u64);
        }
    }

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, selfclosing) = parts(tag);
        if local(name) != b"si" {
            return;
        }
        if closing {
            let length = self.current.take().unwrap_or(0);
            self.lengths.push(u32::try_from(length).unwrap_or(u32::MAX));
        } else if selfclosing {
            self.lengths.push(0);
        } else {
            self.current = Some(0);
        }
    }
}

/// A worksheet: the sum of the shared strings its `t="s"` cells refer to.
#[derive(Default)]
struct SharedCells<'a> {
    lengths: &'a [u32],
    total: u64,
    shared: bool,
    in_value: bool,
    value: Vec<u8>,
}

impl Sink for SharedCells<'_> {
    fn text(&mut self, bytes: &[u8]) {
        if self.in_value && self.value.len() < 32 {
            self.value.extend_from_slice(&bytes[..bytes.len().min(32)]);
        }
    }

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, selfclosing) = parts(tag);
        match local(name) {
            b"c" if closing => self.shared = false,
            b"c" => self.shared = !selfclosing && attribute(tag, b"t") == Some(&b"s"[..]),
            b"v" if closing && self.in_value => {
                self.in_value = false;
                let index = std::str::from_utf8(&self.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if let Some(length) = index.and_then(|i| self.lengths.get(i)) {
                    self.total = self.total.saturating_add(u64::from(*length));
                }
            }
            b"v" if self.shared && !selfclosing => {
                self.in_value = true;
                self.value.clear();
            }
            _ => {}
        }
    }
}

/// ODS `content.xml`: cells' text times their column and row repetitions.
#[derive(Default)]
struct RepeatedCells {
    total: u64,
    rows: u64,
    row_cost: u64,
    columns: u64,
    cell: Option<u64>,
}

impl RepeatedCells {
    /// The `office:` value attributes of a cell (a value GDAL may copy).
    fn values(tag: &[u8]) -> u64 {
        let mut sum = 0u64;
        let mut from = 0;
        while let Some(at) = find(&tag[from..], b"office:").map(|i| i + from) {
            from = at + 7;
            let name_end = tag[at..]
                .iter()
                .position(|b| *b == b'=' || b.is_ascii_whitespace())
                .map_or(tag.len(), |i| i + at);
            if let Some(value) = attribute(tag, &tag[at..name_end]) {
                sum = sum.saturating_add(value.len() as u64);
            }
        }
        sum
    }
}

impl Sink for RepeatedCells {
    fn text(&mut self, bytes: &[u8]) {
        if let Some(cell) = &mut self.cell {
            *cell = cell.saturating_add(bytes.len() as u64);
        }
    }

    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, selfclosing) = parts(tag);
        match name {
            b"table:table-row" if closing => {
                self.total = self
                    .total
                    .saturating_add(self.rows.saturating_mul(self.row_cost));
                self.row_cost = 0;
            }
            b"table:table-row" if !selfclosing => {
                self.rows = count(attribute(tag, b"table:number-rows-repeated"));
                self.row_cost = 0;
            }
            b"table:table-cell" | b"table:covered-table-cell" => {
                if closing {
                    let cell = self.cell.take().unwrap_or(0);
                    self.row_cost = self
                        .row_cost
                        .saturating_add(self.columns.saturating_mul(cell));
                    return;
                }
                let columns = count(attribute(tag, b"table:number-columns-repeated"));
                let values = Self::values(tag);
                if selfclosing {
                    self.row_cost = self.row_cost.saturating_add(columns.saturating_mul(values));
                } else {
                    self.columns = columns;
                    self.cell = Some(values);
                }
            }
            b"text:s" if !closing => {
                let spaces = count(attribute(tag, b"text:c"));
                if let Some(cell) = &mut self.cell {
                    *cell = cell.saturating_add(spaces);
                }
            }
            _ => {}
        }
    }
}

/// ODS `content.xml`: its repeated cells' text, and its grid.
type Ods = Both<RepeatedCells, OdsGrid>;

/// The cells GDAL's ODS reader fills: each table (a layer) holds, in every row up to its last
/// filled row, as many fields as its widest filled column reaches, repeated rows and columns
/// each counted in their place. GDAL 3.6 drops a row's trailing empty cells and a table's
/// trailing empty rows (LibreOffice's block of a million), so those count nothing; empty rows
/// and empty cells before a filled one count (measured).
#[derive(Default)]
struct OdsGrid {
    /// Cells of the tables already closed.
    total: u64,
    rows: u64,
    /// Empty rows not yet followed by a filled one.
    pending: u64,
    widest: u64,
    row_repeat: u64,
    position: u64,
    row_end: u64,
    cell: Option<(u64, bool)>,
}

impl Sink for OdsGrid {
    fn tag(&mut self, tag: &[u8]) {
        let (closing, name, selfclosing) = parts(tag);
        match name {
            b"table:table" if closing => self.close_table(),
            b"table:table" if !selfclosing => self.close_table(),
            b"table:table-row" if closing => self.close_row(),
            b"table:table-row" => {
                self.row_repeat = count(attribute(tag, b"table:number-rows-repeated"));
                self.position = 0;
                self.row_end = 0;
                if selfclosing {
                    self.close_row();
                }
            }
            b"table:table-cell" | b"table:covered-table-cell" => {
                if closing {
                    if let Some((columns, filled)) = self.cell.take() {
                        self.close_cell(columns, filled);
                    }
                    return;
                }
                let columns = count(attribute(tag, b"table:number-columns-repeated"));
                let filled = attribute(tag, b"office:value-type").is_some();
                if selfclosing {
                    self.close_cell(columns, filled);
                } else {
                    self.cell = Some((columns, filled));
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, bytes: &[u8]) {
        if let Some((_, filled)) = &mut self.cell {
            *filled |= bytes.iter().any(|b| !b.is_ascii_whitespace());
        }
    }
}

impl OdsGrid {
    fn close_cell(&mut self, columns: u64, filled: bool) {
        self.position = self.position.saturating_add(columns);
        if filled {
            self.row_end = self.position;
        }
    }

    fn close_row(&mut self) {
        if self.row_end > 0 {
            self.rows = self
                .rows
                .saturating_add(self.pending)
                .saturating_add(self.row_repeat);
            self.pending = 0;
            self.widest = self.widest.max(self.row_end);
        } else {
            self.pending = self.pending.saturating_add(self.row_repeat);
        }
        self.row_repeat = 0;
        self.row_end = 0;
    }

    fn close_table(&mut self) {
        self.total = self
            .total
            .saturating_add(self.rows.saturating_mul(self.widest));
        self.rows = 0;
        self.pending = 0;
        self.widest = 0;
    }
}

/// Stream the entry at `vsi_path` through GDAL, 64 KiB at a time, into `sink`.
fn stream(vsi_path: &str, sink: &mut impl Sink) -> Result<(), GdalError> {
    let mut lexer = Lexer::default();
    let mut first = true;
    let mut wide = false;
    read_entry(vsi_path, |chunk| {
        if std::mem::take(&mut first) && wide_text(chunk) {
            wide = true;
            return false;
        }
        lexer.feed(chunk, sink);
        true
    })?;
    if wide {
        let entry = vsi_path.rsplit('/').next().unwrap_or(vsi_path);
        return Err(GdalError::Arguments(format!(
            "input: its document \"{entry}\" is XML in UTF-16 or UTF-32, which GDAL reads like \
             UTF-8 but the server cannot measure before the open; save it as UTF-8 (iconv -f \
             UTF-16 -t UTF-8, or the application's \"UTF-8\" export) and try again"
        )));
    }
    Ok(())
}

/// Whether a document starts as text in UTF-16 or UTF-32: a byte order mark, or `<` beside
/// NUL bytes. The lexer reads bytes as ASCII-compatible text, so a UTF-16 KML's placemarks
/// and a UTF-16 workbook's shared strings went uncounted while GDAL's expat read them whole
/// (attack round 17, R17-A12: 917 MB for one KML call; R17-A13: 1,064 MB for a 0.9 MB XLSX).
fn wide_text(head: &[u8]) -> bool {
    head.starts_with(&[0xFF, 0xFE])
        || head.starts_with(&[0xFE, 0xFF])
        || head.starts_with(&[0x00, 0x00, 0xFE, 0xFF])
        || head.starts_with(&[0x00, b'<'])
        || head.starts_with(&[b'<', 0x00])
        || head.starts_with(&[0x00, 0x00, 0x00, b'<'])
}

/// Read the entry at `vsi_path` through GDAL, 64 KiB at a time, handing each chunk to `each`
/// until the entry ends or `each` says stop (false).
pub(super) fn read_entry(
    vsi_path: &str,
    mut each: impl FnMut(&[u8]) -> bool,
) -> Result<(), GdalError> {
    let failed = |message: String| GdalError::Failed {
        operation: "reading a table's zip entry".to_string(),
        message,
    };
    let c_path = std::ffi::CString::new(vsi_path).map_err(|e| failed(e.to_string()))?;
    let mode = std::ffi::CString::new("rb").map_err(|e| failed(e.to_string()))?;
    let _capture = ErrorCapture::start();
    // SAFETY: the path and mode are valid C strings; the handle is closed below, once, and the
    // buffer outlives every read into it.
    let fp = unsafe { gdal_sys::VSIFOpenL(c_path.as_ptr(), mode.as_ptr()) };
    if fp.is_null() {
        return Err(failed("GDAL cannot open the entry".to_string()));
    }
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        // SAFETY: `buffer` holds `buffer.len()` bytes; `fp` is open.
        let n = unsafe { gdal_sys::VSIFReadL(buffer.as_mut_ptr().cast(), 1, buffer.len(), fp) };
        if n == 0 || !each(&buffer[..n.min(buffer.len())]) {
            break;
        }
    }
    // SAFETY: `fp` was opened above and is closed once.
    unsafe { gdal_sys::VSIFCloseL(fp) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexed<S: Sink>(text: &[u8], mut sink: S, chunk: usize) -> S {
        let mut lexer = Lexer::default();
        for part in text.chunks(chunk) {
            lexer.feed(part, &mut sink);
        }
        sink
    }

    /// R7-10: shared strings are measured by reference, CDATA included, whatever the chunking.
    #[test]
    fn r7_10_shared_string_references_are_summed() {
        let strings = b"<?xml version=\"1.0\"?><sst><si><t>abcd</t></si><si/>\
            <si><t><![CDATA[0123456789]]></t></si><!-- <si><t>xx</t></si> --></sst>";
        for chunk in [1, 3, 7, 4096] {
            let s = lexed(strings, SharedStrings::default(), chunk);
            assert_eq!(s.lengths, vec![4, 0, 10], "chunk {chunk}");
            let sheet = b"<worksheet><sheetData><row><c r=\"A1\" t=\"s\"><v>2</v></c>\
                <c r=\"B1\" t = 's'><v> 0 </v></c><c r=\"C1\"><v>2</v></c>\
                <c t=\"inlineStr\"><is><t>q</t></is></c><x:c t=\"s\"><x:v>2</x:v></x:c>\
                <c t=\"s\"/><c t=\"s\"><v>99</v></c><c t=\"s\"><v><![CDATA[0]]></v></c>\
                </row></sheetData></worksheet>";
            let cells = lexed(
                sheet,
                SharedCells {
                    lengths: &s.lengths,
                    ..SharedCells::default()
                },
                chunk,
            );
            // A1 and x:c refer to string 2, B1 and the CDATA value to string 0; the others are
            // not shared (or out of range).
            assert_eq!(cells.total, 10 + 4 + 10 + 4, "chunk {chunk}");
        }
    }

    /// R7-10 (ODS): repeated cells are counted times both repetitions; the empty trailing
    /// block LibreOffice writes (a million empty rows) counts nothing.
    #[test]
    fn r7_10_repeated_ods_cells_are_multiplied_and_empty_ones_are_free() {
        let content = b"<office:document-content><table:table>\
            <table:table-row table:number-rows-repeated=\"1000\">\
            <table:table-cell table:number-columns-repeated=\"3\" office:value-type=\"string\">\
            <text:p>abcd<text:s text:c=\"6\"/></text:p></table:table-cell></table:table-row>\
            <table:table-row table:number-rows-repeated=\"1048000\">\
            <table:table-cell table:number-columns-repeated=\"1024\"/></table:table-row>\
            <table:table-row><table:table-cell office:value-type=\"float\" office:value=\"12\"/>\
            </table:table-row></table:table>";
        for chunk in [1, 5, 4096] {
            let cells = lexed(content, RepeatedCells::default(), chunk);
            // Row 1: 3 columns x ("string" 6 + "abcd" 4 + 6 spaces) x 1000 rows; last row:
            // "float" 5 + "12" 2.
            assert_eq!(cells.total, 1000 * 3 * 16 + 7, "chunk {chunk}");
        }
    }

    /// R8-1: rows count to the widest column any cell reaches (by `r`, or one past the
    /// previous cell; an empty formatted cell too), at most GDAL's 2000, and missing rows GDAL
    /// fills in count as rows.
    #[test]
    fn r8_1_xlsx_rows_count_to_the_widest_column() {
        let sheet = b"<worksheet><cols><c r=\"ZZ1\"/></cols><sheetData>\
            <row r=\"1\"><c r=\"A1\"/><c/><c r=\"E1\" s=\"1\"/></row>\
            <row r=\"2\"><c><v>1</v></c></row><row r=\"5\"><x:c r=\"ALL5\" s=\"2\"/></row>\
            <row r=\"20000\"/><row/></sheetData></worksheet>";
        for chunk in [1, 4, 4096] {
            let measured = lexed(sheet, Sheet::default(), chunk);
            // Rows 1, 2, 3-4 (filled in), 5, 20000 (a gap GDAL refuses: counted once), and
            // one without a number: 7 rows; widest ALL = 1000 (the `<cols>` cell is not a cell).
            assert_eq!(measured.grid.rows, 7, "chunk {chunk}");
            assert_eq!(measured.grid.widest, 1000, "chunk {chunk}");
            assert_eq!(measured.grid.cells(), 7000, "chunk {chunk}");
        }
        assert_eq!(Grid::column_of(b"A1"), Some(1));
        assert_eq!(Grid::column_of(b"xfd9"), Some(16384));
        assert_eq!(Grid::column_of(b"12"), None);
        let beyond = lexed(
            b"<sheetData><row><c r=\"ZZZ1\"/></row></sheetData>",
            Sheet::default(),
            7,
        );
        assert_eq!(beyond.grid.cells(), MAX_XLSX_FIELDS);
    }

    /// R8-1 (ODS): rows count to the table's last filled column, empty cells before it and
    /// repetitions included; trailing empty cells and trailing empty rows (LibreOffice's
    /// million) count nothing, empty rows before a filled one do.
    #[test]
    fn r8_1_ods_rows_count_to_the_last_filled_column() {
        let content = b"<office:document-content><table:table table:name=\"a\">\
            <table:table-row><table:table-cell office:value-type=\"string\"><text:p>x</text:p>\
            </table:table-cell><table:table-cell table:number-columns-repeated=\"1020\"/>\
            </table:table-row>\
            <table:table-row table:number-rows-repeated=\"3\"><table:table-cell/></table:table-row>\
            <table:table-row table:number-rows-repeated=\"10\">\
            <table:table-cell table:style-name=\"c\" table:number-columns-repeated=\"9\"/>\
            <table:table-cell><text:p>v</text:p></table:table-cell>\
            <table:table-cell table:number-columns-repeated=\"1014\"/></table:table-row>\
            <table:table-row table:number-rows-repeated=\"1048000\">\
            <table:table-cell table:number-columns-repeated=\"1024\"/></table:table-row>\
            </table:table><table:table table:name=\"b\"><table:table-row>\
            <table:table-cell office:value-type=\"float\" office:value=\"1\"/>\
            <table:table-cell office:value-type=\"float\" office:value=\"2\"/>\
            </table:table-row></table:table></office:document-content>";
        for chunk in [1, 6, 4096] {
            let mut measured = lexed(content, Ods::default(), chunk);
            measured.grid.close_table();
            // Table a: 1 + 3 empty + 10 rows, to column 10: 140; table b: 1 row of 2.
            assert_eq!(measured.grid.total, 140 + 2, "chunk {chunk}");
        }
    }

    /// R8-7: a KML tree is estimated from its feature elements, other elements and text,
    /// whatever the chunking; closing tags, comments and declarations count nothing.
    #[test]
    fn r8_7_kml_elements_and_text_are_counted() {
        let kml = b"<?xml version=\"1.0\"?><kml xmlns=\"http://www.opengis.net/kml/2.2\">\
            <Document><!-- <Placemark/> --><Placemark/><kml:Placemark><Point>\
            <coordinates>1,2</coordinates></Point></kml:Placemark></Document></kml>";
        for chunk in [1, 3, 4096] {
            let cost = lexed(kml, KmlCost::default(), chunk);
            assert_eq!(
                (cost.features, cost.elements, cost.text),
                (3, 3, 3),
                "chunk {chunk}"
            );
            assert_eq!(cost.bytes(), 3 * 1024 + 3 * 160 + 3 * 2);
        }
    }

    /// R8-7: a KML whose estimated tree passes the budget is refused before the open, naming
    /// the estimate and the variable; the clean twin (a few MB of placemarks) passes.
    #[test]
    fn r21_a1_a5_xml_trees_are_estimated_whole_or_by_feature() {
        let dir = tempfile::tempdir().unwrap();
        // One feature of 200,000 empty elements: 32 MB of tree, past a 16 MiB budget.
        let mut one = String::from(
            "<?xml version=\"1.0\"?><gml:FeatureCollection><gml:featureMember><F><g><L>",
        );
        one.push_str(&"<a/>".repeat(200_000));
        one.push_str("</L></g></F></gml:featureMember></gml:FeatureCollection>");
        let big = dir.path().join("one.gml");
        std::fs::write(&big, one).unwrap();
        let error = xml_tree_within(&big, &big.display().to_string(), false, 16 << 20)
            .unwrap_err()
            .to_string();
        assert!(error.contains("GDAL_MCP_XML_MAX_MEMORY_BYTES"), "{error}");
        // The twin: 2,000 features of 100 elements each, the same elements in all, are read a
        // feature at a time: 16 KB each. Whole (a VRT, a sidecar), they are refused.
        let mut many = String::from("<gml:FeatureCollection>");
        for _ in 0..2_000 {
            many.push_str("<gml:featureMember><F>");
            many.push_str(&"<a/>".repeat(100));
            many.push_str("</F></gml:featureMember>");
        }
        many.push_str("</gml:FeatureCollection>");
        let split = dir.path().join("many.gml");
        std::fs::write(&split, many).unwrap();
        let per_feature =
            xml_tree_within(&split, &split.display().to_string(), false, 16 << 20).unwrap();
        // 16 KB of tree, and one property name (`a`) of schema.
        assert!(per_feature < 100_000, "{per_feature}");
        assert!(xml_tree_within(&split, &split.display().to_string(), true, 16 << 20).is_err());
        // Attack round 22, R22-A4: 20,000 features of one property each, every name new: a
        // schema of 20,000 fields, 800 MB of it.
        let mut names = String::from("<ogr:FeatureCollection>");
        for n in 0..20_000 {
            names.push_str(&format!(
                "<gml:featureMember><ogr:t><ogr:p{n}>1</ogr:p{n}></ogr:t></gml:featureMember>"
            ));
        }
        names.push_str("</ogr:FeatureCollection>");
        let named = dir.path().join("names.gml");
        std::fs::write(&named, names).unwrap();
        let error = xml_tree_within(&named, &named.display().to_string(), false, 64 << 20)
            .unwrap_err()
            .to_string();
        assert!(error.contains("20000 names"), "{error}");
    }

    #[test]
    fn r8_7_a_kml_tree_above_the_budget_is_refused() {
        crate::gdal::init();
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, placemarks: usize| {
            let path = dir.path().join(name);
            let mut text = String::from("<kml><Document>");
            for i in 0..placemarks {
                text.push_str(&format!(
                    "<Placemark><Point><coordinates>{}.5,45</coordinates></Point></Placemark>",
                    i % 90
                ));
            }
            text.push_str("</Document></kml>");
            std::fs::write(&path, text).unwrap();
            path
        };
        // 600,000 placemarks (45 MB): 600,000 x 1024 + 1.2 M x 160 + text > 512 MiB.
        let big = write("big.kml", 600_000);
        let error = check_kml(&big, &[big.display().to_string()])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("600001 features")
                && error.contains(KML_MEMORY_VARIABLE)
                && error.contains(&DEFAULT_KML_MAX_MEMORY_BYTES.to_string()),
            "{error}"
        );
        // 40,000 placemarks (3 MB) pass, estimated at about 50 MB.
        let small = write("small.kml", 40_000);
        let estimate = check_kml(&small, &[small.display().to_string()]).unwrap();
        assert!((40 << 20..60 << 20).contains(&estimate), "{estimate}");
    }
}
