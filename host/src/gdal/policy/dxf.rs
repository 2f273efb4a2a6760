//! The DXF block budget: how many entities GDAL's DXF driver would build from a drawing once
//! every block `INSERT` is expanded, counted from the text before GDAL opens it.
//!
//! GDAL inlines blocks by default (`DXF_INLINE_BLOCKS`): a block that inserts another block
//! ten times, seven levels deep, is 10^7 lines from a 3 KB file, built inside GDAL before any
//! host budget sees a feature (`vector_info` took 3.7 GB and 215 s: issue 21, attack round 5,
//! F8). The drawing's group codes are read pair by pair (constant memory besides one count
//! and one list of inserts per block), each block's expanded size is computed from its own
//! entities and its inserts (`MINSERT` column and row counts included), and a drawing that
//! expands past [`DEFAULT_MAX_DXF_ENTITIES`] is refused.

use crate::gdal::GdalError;
use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::Path;

/// Operator override of [`DEFAULT_MAX_DXF_ENTITIES`].
pub const MAX_DXF_ENTITIES_VARIABLE: &str = "GDAL_MCP_MAX_DXF_ENTITIES";

/// Entities a DXF may expand to (each ~0.4 KB in GDAL once built: 10^7 took 3.7 GB).
pub const DEFAULT_MAX_DXF_ENTITIES: u64 = 1_000_000;

/// Block nesting followed; GDAL stops deeper (or cyclic) insertion itself.
const MAX_BLOCK_DEPTH: usize = 64;

/// Longest group-code line read (a longer one is cut: only codes 0, 2, 70, 71 matter).
const MAX_LINE_BYTES: u64 = 64 << 10;

/// Whether GDAL would read `path` as DXF: its extension, or a text header with a `SECTION`
/// and a DXF section name in its first KiB (GDAL's identification), or the binary DXF
/// signature.
fn is_dxf(path: &Path, head: &[u8]) -> bool {
    let named = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("dxf"));
    let text = String::from_utf8_lossy(head).to_ascii_uppercase();
    named
        || head.starts_with(b"AutoCAD Binary DXF")
        || (text.contains("SECTION")
            && ["HEADER", "ENTITIES", "TABLES", "BLOCKS"]
                .iter()
                .any(|s| text.contains(s)))
}

/// One block: its own entities and the blocks it inserts, with their multiplicity.
#[derive(Default)]
struct Block {
    entities: u64,
    inserts: Vec<(String, u64)>,
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
    let (blocks, top) = read_blocks(&mut reader);
    let mut memo = HashMap::new();
    let mut total: u64 = top.entities;
    for (name, times) in &top.inserts {
        total = total.saturating_add(times.saturating_mul(expanded(name, &blocks, &mut memo, 0)));
    }
    if total > limit {
        return Err(GdalError::Arguments(format!(
            "{}: its blocks expand to {total} entities once every INSERT is inlined (at most \
             {limit}, {MAX_DXF_ENTITIES_VARIABLE}); GDAL would build them all in memory before \
             anything could be counted. Explode fewer blocks, or split the drawing",
            input.display()
        )));
    }
    Ok(())
}

/// Entities block `name` expands to (saturating); a cycle or unknown block adds none.
fn expanded(
    name: &str,
    blocks: &HashMap<String, Block>,
    memo: &mut HashMap<String, u64>,
    depth: usize,
) -> u64 {
    if let Some(known) = memo.get(name) {
        return *known;
    }
    let Some(block) = blocks.get(name) else {
        return 0;
    };
    if depth >= MAX_BLOCK_DEPTH {
        return block.entities;
    }
    // Marked before the descent: a cycle reads 0 (GDAL refuses to recurse into it).
    memo.insert(name.to_string(), 0);
    let mut count = block.entities;
    for (child, times) in &block.inserts {
        count =
            count.saturating_add(times.saturating_mul(expanded(child, blocks, memo, depth + 1)));
    }
    memo.insert(name.to_string(), count);
    count
}

/// The drawing's blocks by name, and the entities of the ENTITIES section as one block.
fn read_blocks(reader: &mut impl BufRead) -> (HashMap<String, Block>, Block) {
    let mut blocks: HashMap<String, Block> = HashMap::new();
    let mut top = Block::default();
    let mut section = String::new();
    let mut expect_section_name = false;
    // The block being read, and whether its name (its first code 2) is still to come.
    let mut current: Option<(Option<String>, Block)> = None;
    // The entity being read: (is an INSERT, block name, columns, rows).
    let mut entity: Option<(bool, Option<String>, u64, u64)> = None;
    let mut line = Vec::new();
    let mut next = |reader: &mut dyn BufRead| -> Option<String> {
        line.clear();
        let read = (&mut *reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .ok()?;
        if read == 0 {
            return None;
        }
        if !line.ends_with(b"\n") {
            // A cut line: skip the rest of it.
            let mut rest = Vec::new();
            let _ = reader.read_until(b'\n', &mut rest);
        }
        Some(String::from_utf8_lossy(&line).trim().to_string())
    };
    let finish = |entity: &mut Option<(bool, Option<String>, u64, u64)>, target: &mut Block| {
        if let Some((insert, name, columns, rows)) = entity.take() {
            match (insert, name) {
                (true, Some(name)) => target
                    .inserts
                    .push((name, columns.max(1).saturating_mul(rows.max(1)))),
                _ => target.entities = target.entities.saturating_add(1),
            }
        }
    };
    while let (Some(code), Some(value)) = (next(reader), next(reader)) {
        let code: i64 = code.parse().unwrap_or(-1);
        if code == 0 {
            // The previous entity ends here.
            match current.as_mut() {
                Some((_, block)) => finish(&mut entity, block),
                None if section == "ENTITIES" => finish(&mut entity, &mut top),
                None => entity = None,
            }
            // GDAL's reader matches names in any case (attack round 6, R6-B: a lower-case
            // `insert`, `block` or `section` passed the count and GDAL still expanded it).
            match value.to_ascii_uppercase().as_str() {
                "SECTION" => expect_section_name = true,
                "ENDSEC" => section.clear(),
                "BLOCK" if section == "BLOCKS" => current = Some((None, Block::default())),
                "ENDBLK" => {
                    if let Some((Some(name), block)) = current.take() {
                        blocks.insert(name, block);
                    }
                }
                "EOF" => break,
                kind if section == "ENTITIES" || current.is_some() => {
                    entity = Some((kind == "INSERT", None, 1, 1));
                }
                _ => {}
            }
            continue;
        }
        if code == 2 && expect_section_name {
            section = value.to_ascii_uppercase();
            expect_section_name = false;
            continue;
        }
        if let Some((insert, name, columns, rows)) = entity.as_mut() {
            match code {
                2 if *insert && name.is_none() => *name = Some(value.to_ascii_uppercase()),
                70 if *insert => *columns = value.parse().unwrap_or(1),
                71 if *insert => *rows = value.parse().unwrap_or(1),
                _ => {}
            }
        } else if let Some((name @ None, _)) = current.as_mut() {
            if code == 2 {
                // Names in one case: merging two blocks that differ only in case can only
                // count more, never less.
                *name = Some(value.to_ascii_uppercase());
            }
        }
    }
    (blocks, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drawing whose blocks insert the next one `fan` times, `depth` levels deep, over one
    /// line: `fan^depth` lines once expanded (attack round 5's `mk_dxf_bomb.py`).
    fn bomb(depth: usize, fan: usize) -> String {
        let mut l: Vec<String> = Vec::new();
        let mut g = |code: i32, value: &str| {
            l.push(code.to_string());
            l.push(value.to_string());
        };
        for (c, v) in [
            (0, "SECTION"),
            (2, "HEADER"),
            (9, "$ACADVER"),
            (1, "AC1015"),
        ] {
            g(c, v);
        }
        g(0, "ENDSEC");
        g(0, "SECTION");
        g(2, "BLOCKS");
        for k in 0..=depth {
            let name = format!("B{k}");
            for (c, v) in [
                (0, "BLOCK"),
                (8, "0"),
                (2, &name),
                (70, "0"),
                (10, "0"),
                (20, "0"),
            ] {
                g(c, v);
            }
            if k == depth {
                for (c, v) in [
                    (0, "LINE"),
                    (8, "0"),
                    (10, "0"),
                    (20, "0"),
                    (11, "1"),
                    (21, "1"),
                ] {
                    g(c, v);
                }
            } else {
                let child = format!("B{}", k + 1);
                for _ in 0..fan {
                    for (c, v) in [(0, "INSERT"), (8, "0"), (2, &child), (10, "0"), (20, "0")] {
                        g(c, v);
                    }
                }
            }
            g(0, "ENDBLK");
            g(8, "0");
        }
        g(0, "ENDSEC");
        for (c, v) in [
            (0, "SECTION"),
            (2, "ENTITIES"),
            (0, "INSERT"),
            (8, "0"),
            (2, "B0"),
        ] {
            g(c, v);
        }
        for (c, v) in [
            (10, "0"),
            (20, "0"),
            (0, "LINE"),
            (8, "0"),
            (0, "ENDSEC"),
            (0, "EOF"),
        ] {
            g(c, v);
        }
        l.join("\n") + "\n"
    }

    fn total(text: &str) -> u64 {
        let (blocks, top) = read_blocks(&mut std::io::Cursor::new(text.as_bytes()));
        let mut memo = HashMap::new();
        top.inserts.iter().fold(top.entities, |sum, (name, times)| {
            sum + times * expanded(name, &blocks, &mut memo, 0)
        })
    }

    /// Regression (attack round 6, R6-B): GDAL reads `insert`, `block`, `section` and block
    /// names in any case; the count did not, so the round-5 bomb with lower-case names opened
    /// (34 s, 738 MB). Every case variant now counts the same.
    #[test]
    fn names_in_any_case_count_the_same() {
        let bomb = bomb(7, 10);
        assert_eq!(total(&bomb.to_ascii_lowercase()), 10_000_001);
        let mixed = bomb
            .replace("\nINSERT\n", "\ninsert\n")
            .replace("\nBLOCK\n", "\nBlock\n")
            .replace("\nSECTION\n", "\nsection\n");
        assert_eq!(total(&mixed), 10_000_001);
    }

    /// Regression (issue 21, attack round 5, F8): the expansion is counted exactly (one
    /// top-level line plus fan^depth lines), and a self-inserting block counts once.
    #[test]
    fn block_expansion_is_counted_before_the_open() {
        assert_eq!(total(&bomb(7, 10)), 10_000_001);
        assert_eq!(total(&bomb(2, 3)), 10);
        // B1 inserting B0 again: a cycle GDAL does not follow, counted once.
        let cycle = bomb(1, 2).replace("LINE\n8\n0\n10\n0\n20\n0\n11", "INSERT\n8\n0\n2\nB0\n11");
        assert!(total(&cycle) < 10);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.dxf");
        std::fs::write(&path, bomb(7, 10)).unwrap();
        let refused = check_dxf(&path, &path).unwrap_err().to_string();
        assert!(refused.contains("10000001 entities"), "{refused}");
        std::fs::write(&path, bomb(3, 10)).unwrap();
        assert!(check_dxf(&path, &path).is_ok());
    }
}
