//! The ledger: a tamper-evident, append-only record of every gated decision and every stored
//! capsule, `<store>/ledger.jsonl`.
//!
//! Each line is one JSON object with a sequence number (`seq`, from 1), the time, its `kind`
//! (`gate` or `capsule`), its payload and `prev`: `sha256:` + the hex SHA-256 of the previous
//! line's bytes (64 zeros for the first). Editing, deleting, inserting or reordering a line
//! therefore breaks the chain at that line, which [`verify`] names.
//!
//! Several server processes may share one store: an append takes an exclusive `flock` on the
//! ledger file, reads the last line under the lock, and writes the new line with one `write`
//! on an `O_APPEND` descriptor, so lines never interleave and the chain never forks. A ledger
//! that cannot be written is logged and does not fail the call: the capsules remain the record
//! of what was justified, and `verify` says where the ledger stopped being whole.

use super::journal::{open_for_append, Lock};
use serde::Serialize;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The ledger's file name inside the store.
pub const FILE_NAME: &str = "ledger.jsonl";
/// The `prev` of the first line.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
/// A line is at most this long (receipts of every loaded domain fit many times over).
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Why an append failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    #[error("ledger {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("ledger {path}: {message}")]
    Invalid { path: String, message: String },
}

/// The first problem [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

/// What an intact ledger holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intact {
    pub entries: usize,
    /// The hash of the last line (`GENESIS` for an empty ledger): the head of the chain.
    pub head: String,
}

/// The ledger of one store.
#[derive(Debug, Clone)]
pub struct Ledger {
    path: PathBuf,
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    time: String,
    kind: &'a str,
    entry: &'a Value,
    prev: &'a str,
}

impl Ledger {
    pub fn new(store_root: &Path) -> Self {
        Self {
            path: store_root.join(FILE_NAME),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry of `kind` (`gate`, `capsule`). Blocking (file lock and I/O).
    pub fn append(&self, kind: &str, entry: &Value) -> Result<(), LedgerError> {
        let io = |source| LedgerError::Io {
            path: self.path.display().to_string(),
            source,
        };
        if let Some(store) = self.path.parent() {
            match std::fs::symlink_metadata(store) {
                Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => {
                    return Err(LedgerError::Invalid {
                        path: store.display().to_string(),
                        message: "the store is not a real folder (a link?)".to_string(),
                    })
                }
                Ok(_) => {}
                // The first entry of a new store (a refusal comes before any capsule).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(store).map_err(io)?
                }
                Err(e) => return Err(io(e)),
            }
        }
        let mut file = open_for_append(&self.path).map_err(io)?;
        let _lock = Lock::exclusive(&file).map_err(io)?;
        let (seq, prev) = match last_line(&mut file).map_err(io)? {
            None => (1, GENESIS.to_string()),
            Some(last) => {
                let seq = seq_of(&last).ok_or_else(|| LedgerError::Invalid {
                    path: self.path.display().to_string(),
                    message: "its last line is not a ledger entry; run `gdal-mcp ledger verify`"
                        .to_string(),
                })?;
                (seq + 1, format!("sha256:{}", sha256_hex_bytes(&last)))
            }
        };
        let line = Line {
            seq,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            kind,
            entry,
            prev: &prev,
        };
        let mut text = serde_json::to_string(&line).map_err(|e| LedgerError::Invalid {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        if text.len() > MAX_LINE_BYTES {
            return Err(LedgerError::Invalid {
                path: self.path.display().to_string(),
                message: format!("an entry of {} bytes; at most {MAX_LINE_BYTES}", text.len()),
            });
        }
        text.push('\n');
        // One write on an O_APPEND descriptor, under the lock. No fsync: the chain is about
        // order and integrity, not durability, and a line cut short by a crash is reported by
        // `verify` as such.
        file.write_all(text.as_bytes()).map_err(io)
    }
}

fn sha256_hex_bytes(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// The last line of the file (without its newline), or `None` for an empty file. Reads
/// backwards in small steps: a line is usually a few hundred bytes.
fn last_line(file: &mut std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    const STEP: u64 = 4096;
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let limit = len.min((MAX_LINE_BYTES + 2) as u64);
    let mut window = STEP.min(limit);
    loop {
        file.seek(SeekFrom::Start(len - window))?;
        let mut tail = Vec::with_capacity(window as usize);
        Read::take(&*file, window).read_to_end(&mut tail)?;
        if tail.last() == Some(&b'\n') {
            tail.pop();
        }
        if let Some(newline) = tail.iter().rposition(|b| *b == b'\n') {
            return Ok(Some(tail[newline + 1..].to_vec()));
        }
        if window == len {
            return Ok(Some(tail));
        }
        if window == limit {
            return Err(std::io::Error::other(
                "the last line is longer than any entry",
            ));
        }
        window = (window * 4).min(limit);
    }
}

/// The `seq` of a line this module wrote (`{"seq":N,...`), without parsing the whole line.
fn seq_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Check the whole chain of the ledger at `path`: every line is JSON with the next `seq` and
/// the hash of the line before it as `prev`. A missing ledger is intact and empty.
pub fn verify(path: &Path) -> Result<Intact, Broken> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Intact {
                entries: 0,
                head: GENESIS.to_string(),
            })
        }
        Err(e) => {
            return Err(Broken {
                line: 0,
                message: format!("cannot read {}: {e}", path.display()),
            })
        }
    };
    let mut prev = GENESIS.to_string();
    let mut entries = 0;
    let body = text.strip_suffix(b"\n").unwrap_or(&text);
    if body.is_empty() {
        return Ok(Intact {
            entries: 0,
            head: prev,
        });
    }
    for (index, line) in body.split(|b| *b == b'\n').enumerate() {
        let number = index + 1;
        let broken = |message: String| Broken {
            line: number,
            message,
        };
        let value: Value =
            serde_json::from_slice(line).map_err(|e| broken(format!("not a JSON object ({e})")))?;
        let seq = value.get("seq").and_then(Value::as_u64);
        if seq != Some(number as u64) {
            return Err(broken(format!(
                "sequence number {} where {number} was expected: a line was deleted, inserted or \
                 moved",
                seq.map_or("missing".to_string(), |s| s.to_string())
            )));
        }
        let recorded = value
            .get("prev")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if recorded != prev {
            return Err(broken(format!(
                "its `prev` ({recorded}) is not the hash of line {} ({prev}): that line was \
                 edited, or this one was",
                number - 1
            )));
        }
        prev = format!("sha256:{}", sha256_hex_bytes(line));
        entries += 1;
    }
    Ok(Intact {
        entries,
        head: prev,
    })
}

/// The entry of a gated call: the tool and each domain's decision, key and capsule.
pub fn gate_entry(tool: &str, receipts: &[super::gate::Receipt]) -> Value {
    serde_json::json!({
        "tool": tool,
        "decisions": receipts.iter().map(|r| serde_json::json!({
            "domain": r.domain,
            "plugin_version": r.plugin_version,
            "severity": r.severity,
            "decision": r.decision,
            "key": r.key,
            "capsule": r.capsule,
            "evidence": r.evidence,
        })).collect::<Vec<_>>(),
    })
}

/// The entry of a stored capsule.
pub fn capsule_entry(capsule: &super::store::Capsule) -> Value {
    serde_json::json!({
        "domain": capsule.domain,
        "domain_version": capsule.domain_version,
        "key": capsule.key,
        "tool": capsule.tool,
        "integrity": capsule.integrity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line_hash(line: &str) -> String {
        format!("sha256:{}", super::super::key::sha256_hex(line))
    }

    fn ledger_with(lines: usize) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        for i in 0..lines {
            ledger
                .append("gate", &json!({"tool": "t", "i": i}))
                .unwrap();
        }
        (dir, ledger)
    }

    fn lines(ledger: &Ledger) -> Vec<String> {
        std::fs::read_to_string(ledger.path())
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    fn write(ledger: &Ledger, lines: &[String]) {
        std::fs::write(ledger.path(), lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn an_intact_chain_verifies_and_its_head_is_the_last_line() {
        let (_dir, ledger) = ledger_with(5);
        let intact = verify(ledger.path()).unwrap();
        assert_eq!(intact.entries, 5);
        assert_eq!(intact.head, line_hash(lines(&ledger).last().unwrap()));
        assert_eq!(
            verify(&ledger.path().with_extension("none"))
                .unwrap()
                .entries,
            0
        );
    }

    #[test]
    fn an_edit_a_deletion_an_insertion_and_a_reordering_name_the_first_bad_line() {
        let (_dir, ledger) = ledger_with(5);
        let original = lines(&ledger);
        let mut edited = original.clone();
        edited[2] = edited[2].replace("\"i\":2", "\"i\":7");
        write(&ledger, &edited);
        assert_eq!(
            verify(ledger.path()).unwrap_err().line,
            4,
            "the line after the edit"
        );

        let mut deleted = original.clone();
        deleted.remove(1);
        write(&ledger, &deleted);
        assert_eq!(verify(ledger.path()).unwrap_err().line, 2);

        let mut inserted = original.clone();
        inserted.insert(3, original[3].clone());
        write(&ledger, &inserted);
        assert_eq!(verify(ledger.path()).unwrap_err().line, 5);

        let mut reordered = original.clone();
        reordered.swap(1, 2);
        write(&ledger, &reordered);
        assert_eq!(verify(ledger.path()).unwrap_err().line, 2);

        let mut last_edited = original.clone();
        last_edited[4] = last_edited[4].replace("\"gate\"", "\"gaTe\"");
        write(&ledger, &last_edited);
        // The last line has no successor to break: its own hash is the head, which changes.
        assert_ne!(
            verify(ledger.path()).unwrap().head,
            line_hash(original.last().unwrap())
        );

        write(&ledger, &original);
        assert_eq!(verify(ledger.path()).unwrap().entries, 5);
    }

    /// The last line is found by reading backwards in 4 KiB steps: a line longer than a step
    /// (receipts of many domains) must still chain.
    #[test]
    fn long_lines_chain_too() {
        let (_dir, ledger) = ledger_with(1);
        ledger
            .append("gate", &json!({"big": "x".repeat(20_000)}))
            .unwrap();
        ledger.append("gate", &json!({"after": 1})).unwrap();
        ledger
            .append("gate", &json!({"big": "y".repeat(MAX_LINE_BYTES)}))
            .unwrap_err();
        let intact = verify(ledger.path()).unwrap();
        assert_eq!(intact.entries, 3);
        assert_eq!(seq_of(lines(&ledger)[2].as_bytes()), Some(3));
    }

    #[test]
    fn concurrent_appenders_keep_one_chain() {
        let (_dir, ledger) = ledger_with(0);
        std::thread::scope(|scope| {
            for t in 0..8 {
                let ledger = ledger.clone();
                scope.spawn(move || {
                    for i in 0..25 {
                        ledger.append("gate", &json!({"t": t, "i": i})).unwrap();
                    }
                });
            }
        });
        assert_eq!(verify(ledger.path()).unwrap().entries, 200);
    }
}
