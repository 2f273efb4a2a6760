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
//! Above the table byte budget (`GDAL_MCP_TABLE_MAX_BYTES`) the table is refused. Regression,
//! issue 21 attack round 7, R7-10: one 4 MiB shared string referenced by 1000 cells, in a
//! 3.19 MB XLSX that inflates to 4.2 MB (inside every zip budget), took `vector_info` to 4 GB.
//! Tags are recognised as GDAL's expat-based readers see them (CDATA is text, comments are
//! not); every length is an upper bound (markup inside a string and entities are counted as
//! written).

use super::{ErrorCapture, GdalError, TableBudget};
use std::path::Path;

/// Refuse the spreadsheet at `pinned` (shown as `path`) whose cells expand past the budget.
pub(super) fn check(
    path: &Path,
    pinned: &Path,
    names: &[String],
    budget: &TableBudget,
) -> Result<(), GdalError> {
    let entry = |name: &str| format!("/vsizip/{}/{name}", pinned.display());
    let refuse = |what: String, total: u64| {
        GdalError::Arguments(format!(
            "input: {} {what}: its cells expand to at least {total} bytes, more than the {} \
             bytes a table may hold (GDAL_MCP_TABLE_MAX_BYTES); nothing was read",
            path.display(),
            budget.bytes
        ))
    };
    if let Some(shared) = names.iter().find(|n| *n == "xl/sharedStrings.xml") {
        let mut strings = SharedStrings::default();
        stream(&entry(shared), &mut strings)?;
        let mut total: u64 = 0;
        for sheet in names
            .iter()
            .filter(|n| n.starts_with("xl/worksheets/") && n.ends_with(".xml"))
        {
            let mut cells = SharedCells {
                lengths: &strings.lengths,
                total,
                ..SharedCells::default()
            };
            stream(&entry(sheet), &mut cells)?;
            total = cells.total;
            if total > budget.bytes {
                return Err(refuse(
                    format!(
                        "refers to its shared strings from so many cells (sheet \"{}\") that \
                         GDAL, which copies the string into each cell",
                        sheet.chars().take(80).collect::<String>()
                    ),
                    total,
                ));
            }
        }
    }
    if names.iter().any(|n| n == "content.xml") {
        let mut cells = RepeatedCells::default();
        stream(&entry("content.xml"), &mut cells)?;
        if cells.total > budget.bytes {
            return Err(refuse(
                "repeats cells (table:number-columns-repeated, table:number-rows-repeated) so \
                 often that GDAL, which copies each repeated cell"
                    .to_string(),
                cells.total,
            ));
        }
    }
    Ok(())
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
    let digits: Vec<u8> = value
        .unwrap_or_default()
        .iter()
        .copied()
        .skip_while(u8::is_ascii_whitespace)
        .take_while(u8::is_ascii_digit)
        .take(19)
        .collect();
    std::str::from_utf8(&digits)
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
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

/// Stream the entry at `vsi_path` through GDAL, 64 KiB at a time, into `sink`.
fn stream(vsi_path: &str, sink: &mut impl Sink) -> Result<(), GdalError> {
    let failed = |message: String| GdalError::Failed {
        operation: "reading a table's zip entry".to_string(),
        message,
    };
    let c_path = std::ffi::CString::new(vsi_path).map_err(|e| failed(e.to_string()))?;
    let mode = std::ffi::CString::new("rb").map_err(|e| failed(e.to_string()))?;
    let _capture = ErrorCapture::start();
    // SAFETY: the path and mode are valid C strings; the handle is closed below, once.
    let fp = unsafe { gdal_sys::VSIFOpenL(c_path.as_ptr(), mode.as_ptr()) };
    if fp.is_null() {
        return Err(failed("GDAL cannot open the entry".to_string()));
    }
    let mut lexer = Lexer::default();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        // SAFETY: `buffer` holds `buffer.len()` bytes; `fp` is open.
        let n = unsafe { gdal_sys::VSIFReadL(buffer.as_mut_ptr().cast(), 1, buffer.len(), fp) };
        if n == 0 {
            break;
        }
        lexer.feed(&buffer[..n.min(buffer.len())], sink);
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
}
