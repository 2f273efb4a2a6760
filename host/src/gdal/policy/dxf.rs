//! The DXF block budget: how many entities GDAL's DXF driver would build from a drawing once
//! every block is inlined, counted from the text before GDAL opens it.
//!
//! GDAL inlines blocks by default (`DXF_INLINE_BLOCKS`): a block that inserts another block
//! ten times, seven levels deep, is 10^7 lines from a 3 KB file, built inside GDAL before any
//! host budget sees a feature (`vector_info` took 3.7 GB and 215 s: issue 21, attack round 5,
//! F8). GDAL 3.6 inlines a block, nested blocks and all, wherever a drawing uses one:
//! * an `INSERT` (code 2, the block's name; `MINSERT` column and row counts 70/71);
//! * a `DIMENSION` (code 2), inlined even while the BLOCKS section is read;
//! * a `MULTILEADER`/`MLEADER`'s block content (code 341 inside `CONTEXT_DATA{`) and its
//!   arrowhead (code 342, once per leader line), both by a BLOCK_RECORD handle that GDAL
//!   maps to a block through the code 330 of the block's header;
//! * a `LEADER`'s arrowhead, the `DIMLDRBLK` handle of its dimension style (code 341 of a
//!   `DIMSTYLE` record) or of an `ACAD` XDATA override (`1070 341` then the handle).
//!
//! Arrowheads and dimensions inside a block definition are inlined when the BLOCKS section is
//! read, whether or not the block is ever inserted; they are counted for every block.
//!
//! The drawing is read pair by pair, lines split as GDAL splits them (`\r\n`, `\n\r`, `\r` or
//! `\n`), entity and section names matched as GDAL matches them (in any case, never trimmed).
//! Where the count cannot follow GDAL's reader exactly it counts more, never less: every
//! `BLOCK` marker opens a candidate block (GDAL ignores one inside a block, but starts one
//! after a block its reader ended early), every `ENTITIES` value starts the drawing's own
//! entities, a `POLYLINE` swallows `ENDBLK`/`ENDSEC` until its `SEQEND` as GDAL's reader does,
//! names are compared trimmed and in one case (blocks that GDAL keeps apart are summed), and
//! every code 2 of an entity or block header counts (GDAL keeps the last).
//! Nesting is followed to GDAL's own limit (`PushBlockInsertion`: 129 blocks on its stack);
//! a drawing nested deeper, or whose blocks insert themselves, is refused rather than
//! guessed (attack round 9, R9-1, R9-14).

use crate::gdal::GdalError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

/// Operator override of [`DEFAULT_MAX_DXF_ENTITIES`].
pub const MAX_DXF_ENTITIES_VARIABLE: &str = "GDAL_MCP_MAX_DXF_ENTITIES";

/// Entities a DXF may expand to (each ~0.4 KB in GDAL once built: 10^7 took 3.7 GB).
pub const DEFAULT_MAX_DXF_ENTITIES: u64 = 1_000_000;

/// Blocks followed on one chain of insertions: GDAL's `PushBlockInsertion` refuses a block
/// once 129 are on its stack, so every chain it expands is counted whole; a longer one is
/// refused (the count stopped at 64 before: attack round 9, R9-14).
const MAX_BLOCK_DEPTH: usize = 129;

/// `BLOCK` markers open at once (a block header inside a block): GDAL ignores them, a drawing
/// written by a CAD program never has one; more than this is refused.
const MAX_OPEN_BLOCKS: usize = 8;

/// Longest line read (the rest of a longer one is skipped: names and handles are compared on
/// their first [`KEY_BYTES`] bytes).
const MAX_LINE_BYTES: usize = 64 << 10;

/// Bytes of a name or handle compared: GDAL reads them into 257-byte buffers.
const KEY_BYTES: usize = 256;

/// Whether GDAL would read `path` as DXF: its extension, the binary DXF signature, GDAL's
/// own identification of a text header ([`gdal_identifies_dxf`]), or a `SECTION` and a DXF
/// section name anywhere in its first KiB (what this check asked before, kept: counting a
/// file that is no drawing costs a scan, never a refusal).
fn is_dxf(path: &Path, head: &[u8]) -> bool {
    let named = crate::gdal::extension_of(path).is_some_and(|e| e.eq_ignore_ascii_case("dxf"));
    let text = String::from_utf8_lossy(head).to_ascii_uppercase();
    named
        || head.starts_with(b"AutoCAD Binary DXF")
        || gdal_identifies_dxf(head)
        || (text.contains("SECTION")
            && ["HEADER", "ENTITIES", "TABLES", "BLOCKS"]
                .iter()
                .any(|s| text.contains(s)))
}

/// GDAL 3.6's `OGRDXFDriverIdentify` on a file's first KiB, whatever its name: the first `0`
/// that only spaces separate from the start of a line, then spaces, then line ends, then
/// `SECTION` (any case) and a line end; the header is read as a C string, so it ends at a NUL.
/// The section's name may come after any number of `999` comment groups, which is why the
/// name is not asked for (attack round 13, R13-7: `0 / SECTION`, 40 comments, then `2 /
/// HEADER` was a drawing to GDAL and not to this check, and a 5 KB block bomb named `.dat`
/// expanded to 2 million entities in GDAL's open).
fn gdal_identifies_dxf(head: &[u8]) -> bool {
    let head = &head[..head.iter().position(|&b| b == 0).unwrap_or(head.len())];
    let line_initial_zero = |at: usize| {
        head[..at]
            .iter()
            .rev()
            .find(|&&b| b != b' ')
            .is_none_or(|&b| b == b'\n' || b == b'\r')
    };
    let Some(zero) = (0..head.len()).find(|&i| head[i] == b'0' && line_initial_zero(i)) else {
        return false;
    };
    let mut at = zero + 1;
    while head.get(at) == Some(&b' ') {
        at += 1;
    }
    while matches!(head.get(at), Some(b'\n' | b'\r')) {
        at += 1;
    }
    let rest = &head[at.min(head.len())..];
    rest.len() > 7 && rest[..7].eq_ignore_ascii_case(b"SECTION") && matches!(rest[7], b'\n' | b'\r')
}

/// How a use names the block it inlines.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    /// By name (an `INSERT`'s or `DIMENSION`'s code 2).
    Name(u32),
    /// By BLOCK_RECORD handle (a `MULTILEADER`'s content or arrowhead, a `LEADER` override).
    Handle(u32),
    /// The `DIMLDRBLK` of a `LEADER`'s dimension style: the largest any `DIMSTYLE` names.
    LeaderStyle,
}

/// One block's content (or the drawing's own entities): entities built as they are, and the
/// blocks inlined, by target and whether GDAL inlines them while reading the BLOCKS section.
#[derive(Default, Clone)]
struct Block {
    entities: u64,
    uses: BTreeMap<(Target, bool), u64>,
}

impl Block {
    fn add(&mut self, other: &Block) {
        self.entities = self.entities.saturating_add(other.entities);
        for (key, times) in &other.uses {
            let slot = self.uses.entry(*key).or_insert(0);
            *slot = slot.saturating_add(*times);
        }
    }
}

/// What the count found: blocks by name key, BLOCK_RECORD handles, the `DIMLDRBLK` handles of
/// the dimension styles, and the drawing's own entities.
#[derive(Default)]
struct Drawing {
    keys: Vec<String>,
    ids: HashMap<String, u32>,
    blocks: HashMap<u32, Block>,
    handles: HashMap<u32, Vec<u32>>,
    leader_styles: HashSet<u32>,
    top: Block,
}

impl Drawing {
    /// A name's or handle's key: its first [`KEY_BYTES`] bytes, trimmed, in upper case
    /// (GDAL compares them exactly; merging more names can only count more).
    fn key(&mut self, raw: &[u8]) -> u32 {
        let cut = &raw[..raw.len().min(KEY_BYTES)];
        let key = String::from_utf8_lossy(cut).trim().to_ascii_uppercase();
        if let Some(id) = self.ids.get(&key) {
            return *id;
        }
        let id = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(key.clone());
        self.ids.insert(key, id);
        id
    }
}

/// Why a drawing's expansion is not counted.
enum Uncounted {
    Cycle(String),
    Deep,
    Nested,
}

/// Refuse a DXF whose blocks expand past the entity budget, or a binary DXF (not counted).
/// Called for every file GDAL opens, before the open.
pub fn check_dxf(input: &Path, file: &Path) -> Result<(), GdalError> {
    let mut head = [0u8; 1024];
    let Ok(opened) = crate::gdal::policy::open_regular(file) else {
        return Ok(());
    };
    let mut reader = std::io::BufReader::new(opened);
    let n = reader.fill_buf().map(|b| b.len().min(1024)).unwrap_or(0);
    if let Ok(buffer) = reader.fill_buf() {
        head[..n].copy_from_slice(&buffer[..n]);
    }
    if !is_dxf(file, &head[..n]) {
        return Ok(());
    }
    if head[..n].starts_with(b"AutoCAD Binary DXF") {
        return Err(GdalError::Arguments(format!(
            "{}: a binary DXF is not opened, because how far its blocks expand cannot be \
             counted before GDAL builds them; save it as ASCII DXF",
            input.display()
        )));
    }
    let limit = crate::budget::setting(MAX_DXF_ENTITIES_VARIABLE, DEFAULT_MAX_DXF_ENTITIES);
    let total = read_drawing(&mut reader).and_then(|drawing| count(&drawing));
    match total {
        Ok(total) if total > limit => Err(GdalError::Arguments(format!(
            "{}: its blocks expand to {total} entities once every block is inlined (INSERT, \
             DIMENSION, MULTILEADER content and arrowheads, LEADER arrowheads; at most \
             {limit}, {MAX_DXF_ENTITIES_VARIABLE}); GDAL would build them all in memory \
             before anything could be counted. Explode fewer blocks, or split the drawing",
            input.display()
        ))),
        Ok(_) => Ok(()),
        Err(Uncounted::Cycle(path)) => Err(GdalError::Arguments(format!(
            "{}: block {path} inserts itself; GDAL skips such an insertion, and how far the \
             rest expands cannot be bounded by a count, so the drawing is not opened. Remove \
             the self-reference",
            input.display()
        ))),
        Err(Uncounted::Deep) => Err(GdalError::Arguments(format!(
            "{}: its blocks are nested more than {MAX_BLOCK_DEPTH} levels deep (GDAL's own \
             limit), so how far they expand cannot be counted; flatten the nesting",
            input.display()
        ))),
        Err(Uncounted::Nested) => Err(GdalError::Arguments(format!(
            "{}: more than {MAX_OPEN_BLOCKS} BLOCK definitions open inside one another (no \
             CAD program writes this), so the blocks cannot be told apart to count them; \
             save the drawing again from a CAD program",
            input.display()
        ))),
    }
}

/// The entities GDAL builds from `drawing`: its own entities with every use expanded, and the
/// uses GDAL inlines while reading each block definition.
fn count(drawing: &Drawing) -> Result<u64, Uncounted> {
    let mut counter = Counter {
        drawing,
        memo: HashMap::new(),
        stack: Vec::new(),
    };
    let mut total = drawing.top.entities;
    for ((target, _), times) in &drawing.top.uses {
        total = total.saturating_add(counter.cost(*target, *times)?);
    }
    let mut names: Vec<&u32> = drawing.blocks.keys().collect();
    names.sort();
    for name in names {
        if let Some(block) = drawing.blocks.get(name) {
            for ((target, when_read), times) in &block.uses {
                if *when_read {
                    total = total.saturating_add(counter.cost(*target, *times)?);
                }
            }
        }
    }
    Ok(total)
}

struct Counter<'a> {
    drawing: &'a Drawing,
    memo: HashMap<u32, u64>,
    stack: Vec<u32>,
}

impl Counter<'_> {
    /// Entities `times` uses of `target` expand to (saturating).
    fn cost(&mut self, target: Target, times: u64) -> Result<u64, Uncounted> {
        let drawing = self.drawing;
        let by_handle = |counter: &mut Self, handle: u32| -> Result<u64, Uncounted> {
            let mut sum: u64 = 0;
            for name in drawing.handles.get(&handle).into_iter().flatten() {
                sum = sum.saturating_add(counter.expanded(*name)?);
            }
            Ok(sum)
        };
        let one = match target {
            Target::Name(name) => self.expanded(name)?,
            Target::Handle(handle) => by_handle(self, handle)?,
            Target::LeaderStyle => {
                let mut largest = 0;
                let mut styles: Vec<&u32> = drawing.leader_styles.iter().collect();
                styles.sort();
                for handle in styles {
                    largest = largest.max(by_handle(self, *handle)?);
                }
                largest
            }
        };
        Ok(times.saturating_mul(one))
    }

    /// Entities block `name` expands to (saturating); an unknown block adds none.
    fn expanded(&mut self, name: u32) -> Result<u64, Uncounted> {
        if let Some(known) = self.memo.get(&name) {
            return Ok(*known);
        }
        let Some(block) = self.drawing.blocks.get(&name) else {
            return Ok(0);
        };
        if let Some(at) = self.stack.iter().position(|n| *n == name) {
            let keys = &self.drawing.keys;
            let path: Vec<&str> = self.stack[at..]
                .iter()
                .chain(std::iter::once(&name))
                .map(|n| keys.get(*n as usize).map_or("?", String::as_str))
                .collect();
            return Err(Uncounted::Cycle(path.join(" -> ")));
        }
        if self.stack.len() >= MAX_BLOCK_DEPTH {
            return Err(Uncounted::Deep);
        }
        self.stack.push(name);
        let mut count = block.entities;
        for ((target, _), times) in &block.uses {
            count = count.saturating_add(self.cost(*target, *times)?);
        }
        self.stack.pop();
        self.memo.insert(name, count);
        Ok(count)
    }
}

/// Lines as GDAL's DXF reader splits them: at `\r\n`, `\n\r`, `\r` or `\n`.
struct Lines<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    /// Reads the next line (without its end, cut at [`MAX_LINE_BYTES`]) into `self.line`;
    /// false at the end of the file.
    fn advance(&mut self) -> bool {
        self.line.clear();
        let mut any = false;
        loop {
            let buffer = match self.reader.fill_buf() {
                Ok(buffer) => buffer,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return any,
            };
            if buffer.is_empty() {
                return any;
            }
            any = true;
            let room = MAX_LINE_BYTES.saturating_sub(self.line.len());
            if let Some(at) = buffer.iter().position(|b| *b == b'\n' || *b == b'\r') {
                self.line.extend_from_slice(&buffer[..at.min(room)]);
                let end = buffer[at];
                self.reader.consume(at + 1);
                let paired = self.reader.fill_buf().ok().and_then(|b| b.first().copied());
                if matches!((end, paired), (b'\r', Some(b'\n')) | (b'\n', Some(b'\r'))) {
                    self.reader.consume(1);
                }
                return true;
            }
            let taken = buffer.len();
            self.line.extend_from_slice(&buffer[..taken.min(room)]);
            self.reader.consume(taken);
        }
    }
}

/// C's `atoi`, as GDAL reads group codes: leading blanks, a sign, digits, the rest ignored.
fn atoi(text: &[u8]) -> i64 {
    let mut rest = text
        .iter()
        .skip_while(|b| b.is_ascii_whitespace() || **b == 0x0b)
        .peekable();
    let negative = match rest.peek() {
        Some(b'-') => {
            rest.next();
            true
        }
        Some(b'+') => {
            rest.next();
            false
        }
        _ => false,
    };
    let mut value: i64 = 0;
    for b in rest.take_while(|b| b.is_ascii_digit()) {
        value = value.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if negative {
        -value
    } else {
        value
    }
}

/// The entity being read and what it inlines so far.
enum Entity {
    /// Counted as itself, inlining nothing.
    Plain,
    /// Not an entity GDAL builds (a section or block marker).
    Marker,
    Insert {
        names: Vec<u32>,
        columns: u64,
        rows: u64,
    },
    Dimension {
        names: Vec<u32>,
    },
    /// `section`: 0 common, 1 `CONTEXT_DATA{`, 2 `LEADER{`, 3 `LEADER_LINE{` (GDAL's states).
    MultiLeader {
        section: u8,
        contents: Vec<u32>,
        arrows: Vec<u32>,
        lines: u64,
    },
    Leader {
        override_next: bool,
        arrows: Vec<u32>,
    },
    DimStyle,
}

impl Entity {
    fn start(kind: &[u8]) -> Entity {
        let is = |name: &str| kind.eq_ignore_ascii_case(name.as_bytes());
        if is("INSERT") {
            Entity::Insert {
                names: Vec::new(),
                columns: 1,
                rows: 1,
            }
        } else if is("DIMENSION") {
            Entity::Dimension { names: Vec::new() }
        } else if is("MULTILEADER") || is("MLEADER") {
            Entity::MultiLeader {
                section: 0,
                contents: Vec::new(),
                arrows: Vec::new(),
                lines: 0,
            }
        } else if is("LEADER") {
            Entity::Leader {
                override_next: false,
                arrows: Vec::new(),
            }
        } else if is("DIMSTYLE") {
            Entity::DimStyle
        } else if ["BLOCK", "ENDBLK", "SECTION", "ENDSEC", "SEQEND", "EOF"]
            .iter()
            .any(|m| is(m))
        {
            Entity::Marker
        } else {
            Entity::Plain
        }
    }

    /// One group of the entity.
    fn read(&mut self, code: i64, value: &[u8], drawing: &mut Drawing) {
        match self {
            Entity::Insert {
                names,
                columns,
                rows,
            } => match code {
                2 => names.push(drawing.key(value)),
                70 => *columns = (*columns).max(u64::try_from(atoi(value)).unwrap_or(1)),
                71 => *rows = (*rows).max(u64::try_from(atoi(value)).unwrap_or(1)),
                _ => {}
            },
            Entity::Dimension { names } if code == 2 => names.push(drawing.key(value)),
            Entity::MultiLeader {
                section,
                contents,
                arrows,
                lines,
            } => match (*section, code) {
                (0, 300) => *section = 1,
                (0, 342) => arrows.push(drawing.key(value)),
                (1, 301) => *section = 0,
                (1, 302) => *section = 2,
                (1, 341) => contents.push(drawing.key(value)),
                (2, 303) => *section = 1,
                (2, 304) => {
                    *section = 3;
                    *lines = lines.saturating_add(1);
                }
                (3, 305) => *section = 2,
                _ => {}
            },
            Entity::Leader {
                override_next,
                arrows,
            } => {
                if *override_next {
                    arrows.push(drawing.key(value));
                    *override_next = false;
                } else if code == 1070 && atoi(value) == 341 {
                    *override_next = true;
                }
            }
            Entity::DimStyle if code == 341 => {
                let handle = drawing.key(value);
                drawing.leader_styles.insert(handle);
            }
            _ => {}
        }
    }

    /// What the finished entity adds to the block (or drawing) it belongs to.
    fn content(self) -> Block {
        let mut block = Block::default();
        let mut uses = |target, when_read, times: u64| {
            let slot = block.uses.entry((target, when_read)).or_insert(0);
            *slot = slot.saturating_add(times);
        };
        let mut entities = 1;
        match self {
            Entity::Marker | Entity::DimStyle => entities = 0,
            Entity::Plain => {}
            Entity::Insert {
                names,
                columns,
                rows,
            } => {
                if !names.is_empty() {
                    entities = 0;
                }
                for name in names {
                    uses(Target::Name(name), false, columns.saturating_mul(rows));
                }
            }
            Entity::Dimension { names } => {
                for name in names {
                    uses(Target::Name(name), true, 1);
                }
            }
            Entity::MultiLeader {
                contents,
                arrows,
                lines,
                ..
            } => {
                for handle in contents {
                    uses(Target::Handle(handle), false, 1);
                }
                for handle in arrows {
                    uses(Target::Handle(handle), true, lines);
                }
            }
            Entity::Leader { arrows, .. } => {
                uses(Target::LeaderStyle, true, 1);
                for handle in arrows {
                    uses(Target::Handle(handle), true, 1);
                }
            }
        }
        block.entities = entities;
        block
    }
}

/// A block definition being read: its header's names and handles, and its content.
struct Open {
    names: Vec<u32>,
    handles: Vec<u32>,
    block: Block,
}

/// The state of the reading: the entity being read, the blocks open, whether the header of
/// the last one is still being read, whether the drawing's own entities are being read, and
/// whether a `POLYLINE` is swallowing markers until its `SEQEND`.
struct Reading {
    drawing: Drawing,
    entity: Option<Entity>,
    open: Vec<Open>,
    header: bool,
    top: bool,
    polyline: bool,
}

impl Reading {
    /// Adds the entity being read to every open block past its header and to the drawing.
    fn finish(&mut self) {
        let Some(entity) = self.entity.take() else {
            return;
        };
        let content = entity.content();
        let past_header = if self.header {
            self.open.len().saturating_sub(1)
        } else {
            self.open.len()
        };
        for open in &mut self.open[..past_header] {
            open.block.add(&content);
        }
        if self.top {
            self.drawing.top.add(&content);
        }
    }

    /// Registers every open block under each of its names and handles.
    fn close(&mut self) {
        for open in std::mem::take(&mut self.open) {
            for name in &open.names {
                self.drawing
                    .blocks
                    .entry(*name)
                    .or_default()
                    .add(&open.block);
                for handle in &open.handles {
                    let names = self.drawing.handles.entry(*handle).or_default();
                    if !names.contains(name) {
                        names.push(*name);
                    }
                }
            }
        }
        self.header = false;
    }
}

/// The drawing's blocks, handles, dimension styles and own entities.
fn read_drawing(reader: &mut impl BufRead) -> Result<Drawing, Uncounted> {
    let mut lines = Lines {
        reader,
        line: Vec::new(),
    };
    let mut state = Reading {
        drawing: Drawing::default(),
        entity: None,
        open: Vec::new(),
        header: false,
        top: false,
        polyline: false,
    };
    loop {
        if !lines.advance() {
            break;
        }
        let code = atoi(&lines.line);
        if !lines.advance() {
            break;
        }
        let value = lines.line.as_slice();
        let is = |name: &str| value.eq_ignore_ascii_case(name.as_bytes());
        if code == 0 {
            state.finish();
            state.header = false;
            if (is("ENDBLK") || is("ENDSEC")) && !state.polyline {
                // GDAL's reader ends a block, and the drawing's entities, at either.
                state.close();
                state.top = false;
            }
            if is("SEQEND") {
                state.polyline = false;
            }
            if is("POLYLINE") {
                // GDAL's POLYLINE reader swallows every entity until its SEQEND.
                state.polyline = true;
            }
            if is("BLOCK") {
                if state.open.len() >= MAX_OPEN_BLOCKS {
                    return Err(Uncounted::Nested);
                }
                state.open.push(Open {
                    names: Vec::new(),
                    handles: Vec::new(),
                    block: Block::default(),
                });
                state.header = true;
            }
            state.entity = Some(Entity::start(value));
        } else {
            if state.header {
                if let Some(open) = state.open.last_mut() {
                    match code {
                        2 => open.names.push(state.drawing.key(value)),
                        330 => open.handles.push(state.drawing.key(value)),
                        _ => {}
                    }
                }
            }
            if let Some(entity) = state.entity.as_mut() {
                entity.read(code, value, &mut state.drawing);
            }
        }
        if is("ENTITIES") {
            // GDAL's entities start after the ENTITIES section name, wherever it reads one.
            state.top = true;
        }
    }
    state.finish();
    state.close();
    Ok(state.drawing)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R13-7: GDAL's identification of a DXF header, whatever the file's name: a section
    /// opened before any section name (comments between) is a drawing; text that only
    /// mentions SECTION, or has it not after a line-initial 0, is not.
    #[test]
    fn r13_7_a_header_is_a_drawing_as_gdal_identifies_one() {
        let comments = "999\nnote\n".repeat(40);
        let head = format!("  0\r\nSECTION\r\n{comments}  2\nHEADER\n");
        assert!(gdal_identifies_dxf(
            &head.as_bytes()[..1024.min(head.len())]
        ));
        assert!(is_dxf(Path::new("bomb.dat"), head.as_bytes()));
        assert!(gdal_identifies_dxf(b"0\nsection\n"));
        assert!(!gdal_identifies_dxf(b"x 0\nSECTION\n"));
        assert!(!gdal_identifies_dxf(b"0\nSECTIONS\n"));
        assert!(gdal_identifies_dxf(b"10\n0\nSECTION\n"));
        assert!(!gdal_identifies_dxf(b"0\nfoo\n0\nSECTION\n"));
        assert!(!gdal_identifies_dxf(b"\x00  0\nSECTION\n"));
        assert!(!gdal_identifies_dxf(b"id,name\n1,a SECTION\n"));
    }

    /// Group-code pairs as DXF text, one line each, ended by `end`.
    fn text(pairs: &[(i32, String)], end: &str) -> String {
        let mut out = String::new();
        for (code, value) in pairs {
            out.push_str(&code.to_string());
            out.push_str(end);
            out.push_str(value);
            out.push_str(end);
        }
        out
    }

    fn p(code: i32, value: &str) -> (i32, String) {
        (code, value.to_string())
    }

    /// Blocks `B{first}`..`B{last}`, each with BLOCK_RECORD handle `1{k:02X}` (code 330):
    /// `B{k}` inserts `B{k+1}` once while `k < pad`, `fan` times after, and the last holds
    /// one LINE.
    fn chain(pad: usize, depth: usize, fan: usize) -> Vec<(i32, String)> {
        let mut g = Vec::new();
        let last = pad + depth;
        for k in 0..=last {
            g.extend([
                p(0, "BLOCK"),
                p(8, "0"),
                p(2, &format!("B{k}")),
                p(330, &format!("1{k:02X}")),
                p(70, "0"),
                p(10, "0"),
                p(20, "0"),
            ]);
            if k < last {
                let times = if k < pad { 1 } else { fan };
                for _ in 0..times {
                    g.extend([p(0, "INSERT"), p(8, "0"), p(2, &format!("B{}", k + 1))]);
                    g.extend([p(10, "0"), p(20, "0")]);
                }
            } else {
                g.extend([p(0, "LINE"), p(8, "0"), p(10, "0"), p(20, "0")]);
                g.extend([p(11, "1"), p(21, "1")]);
            }
            g.extend([p(0, "ENDBLK"), p(8, "0")]);
        }
        g
    }

    /// A drawing: HEADER, TABLES (`tables`, if any), BLOCKS (`blocks`), ENTITIES (`entities`).
    fn drawing(
        tables: &[(i32, String)],
        blocks: &[(i32, String)],
        entities: &[(i32, String)],
    ) -> Vec<(i32, String)> {
        let mut g = vec![p(0, "SECTION"), p(2, "HEADER"), p(9, "$ACADVER")];
        g.extend([p(1, "AC1018"), p(0, "ENDSEC")]);
        if !tables.is_empty() {
            g.extend([p(0, "SECTION"), p(2, "TABLES")]);
            g.extend(tables.iter().cloned());
            g.push(p(0, "ENDSEC"));
        }
        g.extend([p(0, "SECTION"), p(2, "BLOCKS")]);
        g.extend(blocks.iter().cloned());
        g.extend([p(0, "ENDSEC"), p(0, "SECTION"), p(2, "ENTITIES")]);
        g.extend(entities.iter().cloned());
        g.extend([p(0, "ENDSEC"), p(0, "EOF")]);
        g
    }

    fn insert(name: &str) -> Vec<(i32, String)> {
        vec![
            p(0, "INSERT"),
            p(8, "0"),
            p(2, name),
            p(10, "0"),
            p(20, "0"),
        ]
    }

    /// A MULTILEADER whose block content is the block of BLOCK_RECORD `handle`.
    fn multileader_content(handle: &str) -> Vec<(i32, String)> {
        [
            (0, "MULTILEADER"),
            (5, "A1"),
            (8, "0"),
            (300, "CONTEXT_DATA{"),
            (40, "1"),
            (341, handle),
            (15, "0"),
            (25, "0"),
            (16, "1"),
            (26, "1"),
            (301, "}"),
            (170, "0"),
        ]
        .iter()
        .map(|(c, v)| p(*c, v))
        .collect()
    }

    /// A MULTILEADER whose arrowhead is the block of BLOCK_RECORD `handle`, on `lines` leader
    /// lines.
    fn multileader_arrows(handle: &str, lines: usize) -> Vec<(i32, String)> {
        let mut g: Vec<(i32, String)> = [
            (0, "MULTILEADER"),
            (5, "A2"),
            (8, "0"),
            (342, handle),
            (42, "1"),
            (300, "CONTEXT_DATA{"),
            (40, "1"),
            (302, "LEADER{"),
            (10, "100"),
            (20, "0"),
        ]
        .iter()
        .map(|(c, v)| p(*c, v))
        .collect();
        for _ in 0..lines {
            g.extend([p(304, "LEADER_LINE{"), p(10, "0"), p(20, "0"), p(305, "}")]);
        }
        g.extend([p(303, "}"), p(301, "}"), p(170, "1")]);
        g
    }

    /// A LEADER from (0,0) to (100,0), with `extra` groups (a dimension style, an override).
    fn leader(extra: &[(i32, String)]) -> Vec<(i32, String)> {
        let mut g = vec![p(0, "LEADER"), p(8, "0")];
        g.extend(extra.iter().cloned());
        g.extend([p(10, "0"), p(20, "0"), p(30, "0"), p(10, "100"), p(20, "0")]);
        g.push(p(30, "0"));
        g
    }

    fn total(text: &str) -> Result<u64, Uncounted> {
        read_drawing(&mut std::io::Cursor::new(text.as_bytes())).and_then(|d| count(&d))
    }

    fn counted(text: &str) -> u64 {
        match total(text) {
            Ok(n) => n,
            Err(Uncounted::Cycle(path)) => panic!("refused as a cycle: {path}"),
            Err(Uncounted::Deep) => panic!("refused as too deep"),
            Err(Uncounted::Nested) => panic!("refused as nested blocks"),
        }
    }

    fn check(text: &str) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.dxf");
        std::fs::write(&path, text).unwrap();
        check_dxf(&path, &path).map_err(|e| e.to_string())
    }

    /// The round-5 bomb: `fan^depth` lines through INSERTs, plus one top-level LINE.
    fn bomb(depth: usize, fan: usize) -> String {
        let mut entities = insert("B0");
        entities.extend([p(0, "LINE"), p(8, "0")]);
        text(&drawing(&[], &chain(0, depth, fan), &entities), "\n")
    }

    /// Regression (attack round 6, R6-B): GDAL reads `insert`, `block` and `section` in any
    /// case; the count did not, so the round-5 bomb with lower-case names opened (34 s,
    /// 738 MB). Every case variant now counts the same.
    #[test]
    fn names_in_any_case_count_the_same() {
        let bomb = bomb(7, 10);
        assert_eq!(counted(&bomb.to_ascii_lowercase()), 10_000_001);
        let mixed = bomb
            .replace("\nINSERT\n", "\ninsert\n")
            .replace("\nBLOCK\n", "\nBlock\n")
            .replace("\nSECTION\n", "\nsection\n");
        assert_eq!(counted(&mixed), 10_000_001);
    }

    /// Regression (issue 21, attack round 5, F8): the expansion is counted exactly (one
    /// top-level line plus fan^depth lines), and a block that inserts itself is refused
    /// (GDAL skips the insertion; a count that read it as 0 undercounted whatever else
    /// reached the block).
    #[test]
    fn block_expansion_is_counted_before_the_open() {
        assert_eq!(counted(&bomb(7, 10)), 10_000_001);
        assert_eq!(counted(&bomb(2, 3)), 10);
        let cycle = bomb(1, 2).replace("LINE\n8\n0\n10\n0\n20\n0\n11", "INSERT\n8\n0\n2\nB0\n11");
        assert!(matches!(total(&cycle), Err(Uncounted::Cycle(path)) if path == "B0 -> B1 -> B0"));
        assert!(check(&cycle).unwrap_err().contains("inserts itself"));
        let refused = check(&bomb(7, 10)).unwrap_err();
        assert!(refused.contains("10000001 entities"), "{refused}");
        assert!(check(&bomb(3, 10)).is_ok());
    }

    /// Regression (attack round 9, R9-1): a MULTILEADER's block content (code 341, a
    /// BLOCK_RECORD handle GDAL maps to a block by the block header's code 330) and its
    /// arrowheads (code 342, once per leader line) are inlined by GDAL like an INSERT; the
    /// count saw one entity, and 2,829 bytes took 35 s and 752 MB in `vector_info`. GDAL
    /// 3.6.2 (`ogrinfo`, merging off) builds 9 + 1 features for the content of a 3 x 3
    /// block and 27 + 1 for the arrowheads of 3 leader lines: the same figures here.
    #[test]
    fn r9_1_multileader_content_and_arrowheads_are_counted() {
        let blocks = chain(0, 2, 3);
        let content = text(&drawing(&[], &blocks, &multileader_content("100")), "\n");
        assert_eq!(counted(&content), 9 + 1);
        let arrows = text(&drawing(&[], &blocks, &multileader_arrows("100", 3)), "\n");
        assert_eq!(counted(&arrows), 27 + 1);
        // The attack: depth 6, fan 11 by the content, depth 5, fan 10 by an arrowhead.
        let bomb = text(
            &drawing(&[], &chain(0, 6, 11), &multileader_content("100")),
            "\n",
        );
        assert!(bomb.len() < 4_000, "{}", bomb.len());
        let refused = check(&bomb).unwrap_err();
        assert!(refused.contains("1771562 entities"), "{refused}");
        assert!(refused.contains("MULTILEADER"), "{refused}");
        let bomb = text(
            &drawing(&[], &chain(0, 6, 10), &multileader_arrows("100", 1)),
            "\n",
        );
        assert!(check(&bomb).unwrap_err().contains("1000001 entities"));
        // A handle no block carries inlines nothing (GDAL draws its default arrowhead).
        let unknown = text(&drawing(&[], &blocks, &multileader_arrows("FFF", 3)), "\n");
        assert_eq!(counted(&unknown), 1);
    }

    /// Regression (attack round 9, R9-1): the other ways GDAL inlines a block: a DIMENSION's
    /// block (code 2), a LEADER's arrowhead through its dimension style's DIMLDRBLK or an
    /// ACAD XDATA override (`1070 341`, then the handle as 1005 or 1070), and arrowheads
    /// inside a block definition, built when GDAL reads the BLOCKS section even if the block
    /// is never inserted. GDAL 3.6.2 builds 9, 10, 10, 10 features (and 9 held in the unused
    /// block).
    #[test]
    fn r9_1_dimensions_and_leader_arrowheads_are_counted() {
        let blocks = chain(0, 2, 3);
        let dimension = vec![p(0, "DIMENSION"), p(8, "0"), p(2, "B0"), p(10, "0")];
        assert_eq!(
            counted(&text(&drawing(&[], &blocks, &dimension), "\n")),
            1 + 9
        );
        for handle_code in [1005, 1070] {
            let xdata = leader(&[
                p(1001, "ACAD"),
                p(1000, "DSTYLE"),
                p(1002, "{"),
                p(1070, "341"),
                p(handle_code, "100"),
                p(1002, "}"),
            ]);
            assert_eq!(counted(&text(&drawing(&[], &blocks, &xdata), "\n")), 1 + 9);
        }
        let tables = [
            p(0, "TABLE"),
            p(2, "DIMSTYLE"),
            p(0, "DIMSTYLE"),
            p(2, "ST"),
            p(341, "100"),
            p(0, "ENDTAB"),
        ];
        let styled = leader(&[p(3, "ST")]);
        assert_eq!(
            counted(&text(&drawing(&tables, &blocks, &styled), "\n")),
            1 + 9
        );
        let mut unused = blocks.clone();
        unused.extend([p(0, "BLOCK"), p(8, "0"), p(2, "U"), p(70, "0")]);
        unused.extend(multileader_arrows("100", 1));
        unused.extend([p(0, "ENDBLK"), p(8, "0")]);
        let line = [p(0, "LINE"), p(8, "0"), p(10, "0"), p(20, "0")];
        assert_eq!(counted(&text(&drawing(&[], &unused, &line), "\n")), 1 + 9);
    }

    /// Regression (attack round 9, R9-14): the count stopped descending at 64 levels while
    /// GDAL inlines up to 128, so 64 single insertions before the fan-out hid it (8,214 bytes:
    /// 218 s and 1.28 GB in `vector_info`). Every level GDAL follows is counted now, and a
    /// chain deeper than GDAL's own limit is refused.
    #[test]
    fn r9_14_nesting_past_64_levels_is_counted() {
        let padded = |pad| text(&drawing(&[], &chain(pad, 6, 11), &insert("B0")), "\n");
        assert_eq!(counted(&padded(64)), 1_771_561);
        assert_eq!(counted(&padded(60)), 1_771_561);
        assert!(check(&padded(64)).unwrap_err().contains("1771561 entities"));
        // 122 single levels, then 2 of fan 3: 125 blocks on the chain, all counted.
        let deep = text(&drawing(&[], &chain(122, 2, 3), &insert("B0")), "\n");
        assert_eq!(counted(&deep), 9);
        let deeper = text(&drawing(&[], &chain(140, 2, 3), &insert("B0")), "\n");
        assert!(matches!(total(&deeper), Err(Uncounted::Deep)));
        assert!(check(&deeper).unwrap_err().contains("nested more than 129"));
    }

    /// Regression (attack round 9, found with R9-1): the text is read as GDAL 3.6.2 reads
    /// it, each case checked with `ogrinfo` (which builds 9 features from B0, 6 from X):
    /// lines ended by a lone `\r` or by `\n\r`; an INSERT or block header with two names (GDAL
    /// keeps the last); ` ENDBLK` (GDAL matches markers untrimmed: no end); a BLOCK inside a
    /// block (ignored by GDAL); a block ended by ENDSEC; a POLYLINE whose reader swallows
    /// an ENDBLK until its SEQEND.
    #[test]
    fn r9_1_reader_quirks_count_what_gdal_builds() {
        let blocks = chain(0, 2, 3);
        let plain = drawing(&[], &blocks, &insert("B0"));
        for end in ["\n", "\r\n", "\r", "\n\r"] {
            assert_eq!(counted(&text(&plain, end)), 9, "{end:?}");
        }
        let two = vec![p(0, "INSERT"), p(8, "0"), p(2, "ZZ"), p(2, "B0")];
        assert_eq!(counted(&text(&drawing(&[], &blocks, &two), "\n")), 9);
        // X inserts B0 (9 lines each) around the quirk; GDAL gives X 18 unless noted.
        let with = |quirk: &[(i32, String)], top: &str| {
            let mut b = blocks.clone();
            b.extend([p(0, "BLOCK"), p(8, "0"), p(2, top), p(70, "0")]);
            b.extend(insert("B0"));
            b.extend(quirk.iter().cloned());
            b.extend(insert("B0"));
            b.extend([p(0, "ENDBLK"), p(8, "0")]);
            counted(&text(&drawing(&[], &b, &insert("X")), "\n"))
        };
        assert_eq!(with(&[], "X"), 18);
        // GDAL ignores ` ENDBLK` as an unknown entity; the count takes it as one entity.
        assert_eq!(with(&[p(0, " ENDBLK"), p(8, "0")], "X") - 1, 18);
        assert_eq!(with(&[p(0, "BLOCK"), p(2, "Y")], "X"), 18);
        let polyline = [p(0, "POLYLINE"), p(66, "1"), p(0, "ENDBLK"), p(0, "SEQEND")];
        assert_eq!(with(&polyline, "X") - 1, 18);
        let mut header = blocks.clone();
        header.extend([p(0, "BLOCK"), p(2, "DECOY"), p(2, "X"), p(70, "0")]);
        header.extend(insert("B0"));
        header.extend([p(0, "ENDBLK"), p(8, "0")]);
        assert_eq!(
            counted(&text(&drawing(&[], &header, &insert("X")), "\n")),
            9
        );
        let mut unended = blocks.clone();
        unended.extend([p(0, "BLOCK"), p(2, "X"), p(70, "0")]);
        unended.extend(insert("B0"));
        assert_eq!(
            counted(&text(&drawing(&[], &unended, &insert("X")), "\n")),
            9
        );
    }

    /// The clean twin: an ordinary drawing with a title block, a LEADER whose dimension
    /// style names an arrowhead block, a MULTILEADER with a block content and an arrowhead,
    /// a DIMENSION with its block and a few inserts is counted small and opens in GDAL.
    #[test]
    fn an_ordinary_drawing_with_leaders_opens() {
        let mut blocks = Vec::new();
        for (name, handle, lines) in [("ARROW", "1A", 1), ("TAG", "1B", 3), ("*D1", "1C", 4)] {
            blocks.extend([p(0, "BLOCK"), p(8, "0"), p(2, name), p(330, handle)]);
            blocks.extend([p(70, "0"), p(10, "0"), p(20, "0"), p(30, "0")]);
            for k in 0..lines {
                blocks.extend([p(0, "LINE"), p(8, "0"), p(10, &k.to_string()), p(20, "0")]);
                blocks.extend([p(30, "0"), p(11, "1"), p(21, "1"), p(31, "0")]);
            }
            blocks.extend([p(0, "ENDBLK"), p(8, "0")]);
        }
        let tables = [
            p(0, "TABLE"),
            p(2, "DIMSTYLE"),
            p(0, "DIMSTYLE"),
            p(2, "ST"),
            p(41, "1"),
            p(341, "1A"),
            p(0, "ENDTAB"),
        ];
        let mut entities = Vec::new();
        for k in 0..5 {
            entities.extend(insert("TAG"));
            entities.push(p(30, &k.to_string()));
        }
        entities.extend(leader(&[p(3, "ST")]));
        entities.extend(multileader_content("1B"));
        entities.extend(multileader_arrows("1A", 2));
        entities.extend([p(0, "DIMENSION"), p(8, "0"), p(2, "*D1"), p(10, "0")]);
        entities.extend([p(20, "0"), p(30, "0")]);
        let text = text(&drawing(&tables, &blocks, &entities), "\n");
        // 5 x 3 lines, a leader and its arrowhead (1), a multileader with 3 lines of
        // content and 2 arrowheads, a dimension and its 4 lines.
        assert_eq!(counted(&text), 15 + (1 + 1) + (1 + 3) + (1 + 2) + (1 + 4));
        assert!(check(&text).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ordinary.dxf");
        std::fs::write(&path, &text).unwrap();
        let dataset = ::gdal::Dataset::open(&path).unwrap();
        use ::gdal::vector::LayerAccess;
        let mut layer = dataset.layer(0).unwrap();
        assert!(layer.features().count() >= 5);
    }
}
