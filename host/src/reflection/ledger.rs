//! The ledger: a tamper-evident, append-only record of every gated decision and every stored
//! capsule, `<store>/ledger.jsonl`.
//!
//! Each line is one JSON object with a sequence number (`seq`, from 1), the time, its `kind`
//! (`gate` or `capsule`), its payload and `prev`: `sha256:` + the hex SHA-256 of the previous
//! line's bytes (64 zeros for the first). Editing, deleting, inserting or reordering a line
//! therefore breaks the chain at that line, which [`verify`] names.
//!
//! Every line also ends with a MAC under the user's sealing key (`super::seal`), so a ledger
//! planted in a workspace, or a line appended or rewritten by hand with a recomputed chain,
//! does not verify: [`verify`] names the lines whose MAC fails. The ledger is opened as the
//! server opens every store file (`super::journal::open_beneath`): no links anywhere under the
//! store, no FIFOs, regular files only; lines are bounded, and [`verify`] reads in constant
//! memory and at most [`MAX_VERIFY_BYTES`].
//!
//! Several server processes may share one store: an append takes an exclusive `flock` on the
//! ledger file, reads the last line under the lock, and writes the new line with one `write`
//! on an `O_APPEND` descriptor, so lines never interleave and the chain never forks. A ledger
//! that cannot take a line fails closed (attack round 4, B6): a gated call opens it
//! ([`Ledger::open_for_append`]) before anything is decided or written and is refused when it
//! cannot; the gate's decision line is appended before the work runs (its failure refuses the
//! call); the lineage lines after the run go through the file opened before it.

use super::journal::{open_beneath, read_line_within, Bounded, Lock};
use super::seal::{Kind, Seal};
use serde::Serialize;
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ledger's file name inside the store.
pub const FILE_NAME: &str = "ledger.jsonl";
/// The `prev` of the first line.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
/// A line is at most this long (receipts of every loaded domain fit many times over).
pub const MAX_LINE_BYTES: usize = 64 << 10;
/// [`verify`] reads at most this much (about 8 million entries).
pub const MAX_VERIFY_BYTES: u64 = 4 << 30;
/// Lines whose MAC fails that [`verify`] names (it counts them all).
const NAMED_FORGERIES: usize = 20;

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
    /// 1-based line number (0: the ledger could not be read at all).
    pub line: usize,
    pub message: String,
    /// Lines whose MAC does not verify (the first [`NAMED_FORGERIES`]), and how many there
    /// were in all.
    pub unsealed: Vec<usize>,
    pub unsealed_count: usize,
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
    root: PathBuf,
    path: PathBuf,
    seal: Arc<Seal>,
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
    /// The ledger of `store_root`, sealed under a key that lives only in this process (tests
    /// and benchmarks; the server uses [`Self::with_seal`]).
    pub fn new(store_root: &Path) -> Self {
        Self::with_seal(store_root, Arc::new(Seal::ephemeral()))
    }

    /// The ledger of `store_root`, sealed under `seal`.
    pub fn with_seal(store_root: &Path, seal: Arc<Seal>) -> Self {
        Self {
            root: store_root.to_path_buf(),
            path: store_root.join(FILE_NAME),
            seal,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry of `kind` (`gate`, `capsule`). Blocking (file lock and I/O).
    pub fn append(&self, kind: &str, entry: &Value) -> Result<(), LedgerError> {
        let mut file = self.open_for_append()?;
        self.append_to(&mut file, kind, entry)
    }

    /// Open the ledger for appending, checked as an append needs it: the store a real folder
    /// (created if absent), the file opened beneath it without following a link or blocking, a
    /// regular file, and its last line a ledger entry the next one can chain to. A gated call
    /// opens it before anything is decided or written (a ledger that cannot take its lines
    /// refuses the call), and appends its lineage lines through this file after the run.
    pub fn open_for_append(&self) -> Result<std::fs::File, LedgerError> {
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
        let mut file = open_beneath(&self.root, &[FILE_NAME], true).map_err(io)?;
        {
            let _lock = Lock::exclusive(&file).map_err(io)?;
            self.next_link(&mut file)?;
        }
        Ok(file)
    }

    /// The `seq` and `prev` of the next line of the ledger open as `file` (locked).
    fn next_link(&self, file: &mut std::fs::File) -> Result<(u64, String), LedgerError> {
        let io = |source| LedgerError::Io {
            path: self.path.display().to_string(),
            source,
        };
        Ok(match last_line(file).map_err(io)? {
            None => (1, GENESIS.to_string()),
            Some(last) => {
                let seq = seq_of(&last).ok_or_else(|| LedgerError::Invalid {
                    path: self.path.display().to_string(),
                    message: "its last line is not a ledger entry, so no entry can chain to it \
                              (run `gdal-mcp ledger verify`)"
                        .to_string(),
                })?;
                (seq + 1, format!("sha256:{}", sha256_hex_bytes(&last)))
            }
        })
    }

    /// Append one entry of `kind` through `file`, a ledger [`Self::open_for_append`] opened.
    pub fn append_to(
        &self,
        file: &mut std::fs::File,
        kind: &str,
        entry: &Value,
    ) -> Result<(), LedgerError> {
        let io = |source| LedgerError::Io {
            path: self.path.display().to_string(),
            source,
        };
        let _lock = Lock::exclusive(file).map_err(io)?;
        let (seq, prev) = self.next_link(file)?;
        let line = Line {
            seq,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            kind,
            entry,
            prev: &prev,
        };
        let text = serde_json::to_string(&line).map_err(|e| LedgerError::Invalid {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        let mut text = self.seal.seal(Kind::LedgerEntry, &text);
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

pub(crate) fn sha256_hex_bytes(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// The last line of the file (without its newline), or `None` for an empty file. Reads
/// backwards in small steps: a line is usually a few hundred bytes.
fn last_line(file: &mut std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    last_line_within(file, MAX_LINE_BYTES)
}

/// The last line of the file (without its newline), at most `max_line` bytes, or `None` for
/// an empty file (also the approvals journal's, `super::approval`).
pub(crate) fn last_line_within(
    file: &mut std::fs::File,
    max_line: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    const STEP: u64 = 4096;
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let limit = len.min((max_line + 2) as u64);
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

/// The `seq` of a line this module (or the approvals journal) wrote (`{"seq":N,...`), without
/// parsing the whole line.
pub(crate) fn seq_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Check the whole chain of the ledger of the store at `store_root`: every line is JSON with
/// the next `seq`, the hash of the line before it as `prev`, and a MAC that verifies under
/// `seal`. A missing ledger is intact and empty. The ledger is opened as the server opens it
/// (a link, a FIFO, a device, a linked store folder are refused with a message, never followed
/// or waited on), lines longer than any entry are refused without being held, and at most
/// [`MAX_VERIFY_BYTES`] are read.
pub fn verify(store_root: &Path, seal: &Seal) -> Result<Intact, Broken> {
    let path = store_root.join(FILE_NAME);
    let broken_at = |line: usize, message: String| Broken {
        line,
        message,
        unsealed: Vec::new(),
        unsealed_count: 0,
    };
    let file = match open_beneath(store_root, &[FILE_NAME], false) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Intact {
                entries: 0,
                head: GENESIS.to_string(),
            })
        }
        Err(e) => return Err(broken_at(0, format!("cannot read {}: {e}", path.display()))),
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_VERIFY_BYTES {
        return Err(broken_at(
            0,
            format!(
                "{} is {size} bytes, more than the {MAX_VERIFY_BYTES} bytes verify reads",
                path.display()
            ),
        ));
    }
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file.take(size));
    let mut prev = GENESIS.to_string();
    let mut entries = 0;
    let mut unsealed = Vec::new();
    let mut unsealed_count = 0usize;
    let mut first_break: Option<(usize, String)> = None;
    let mut line = Vec::with_capacity(4096);
    let mut number = 0usize;
    loop {
        let read = read_line_within(&mut reader, &mut line, MAX_LINE_BYTES)
            .map_err(|e| broken_at(number + 1, format!("cannot read: {e}")))?;
        if read == Bounded::End {
            break;
        }
        number += 1;
        if read == Bounded::TooLong {
            first_break.get_or_insert((
                number,
                format!("longer than any entry ({MAX_LINE_BYTES} bytes); verify stops here"),
            ));
            break;
        }
        let problem = check_line(&line, number, &prev, seal, &mut unsealed_count);
        if let Some(problem) = problem {
            if problem.1 && unsealed.len() < NAMED_FORGERIES {
                unsealed.push(number);
            }
            first_break.get_or_insert((number, problem.0));
        }
        prev = format!("sha256:{}", sha256_hex_bytes(&line));
        entries += 1;
    }
    match first_break {
        None => Ok(Intact {
            entries,
            head: prev,
        }),
        Some((line, message)) => Err(Broken {
            line,
            message,
            unsealed,
            unsealed_count,
        }),
    }
}

/// The problem with one ledger line, if any (`true` when it is its MAC).
fn check_line(
    line: &[u8],
    number: usize,
    prev: &str,
    seal: &Seal,
    unsealed_count: &mut usize,
) -> Option<(String, bool)> {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => return Some((format!("not a JSON object ({e})"), false)),
    };
    let sealed = std::str::from_utf8(line)
        .ok()
        .and_then(|text| seal.open_line(Kind::LedgerEntry, text))
        .is_some();
    if !sealed {
        *unsealed_count += 1;
    }
    let seq = value.get("seq").and_then(Value::as_u64);
    if seq != Some(number as u64) {
        return Some((
            format!(
                "sequence number {} where {number} was expected: a line was deleted, inserted \
                 or moved",
                seq.map_or("missing".to_string(), |s| s.to_string())
            ),
            !sealed,
        ));
    }
    let recorded = value
        .get("prev")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if recorded != prev {
        return Some((
            format!(
                "its `prev` ({recorded}) is not the hash of line {} ({prev}): that line was \
                 edited, or this one was",
                number - 1
            ),
            !sealed,
        ));
    }
    if !sealed {
        return Some((
            format!(
                "its MAC does not verify under the sealing key ({}): it was written by hand, \
                 planted, or under another user's key",
                seal.origin()
            ),
            true,
        ));
    }
    None
}

/// The entry of a gated call: the tool and each domain's decision, key and capsule.
pub fn gate_entry(tool: &str, receipts: &[super::gate::Receipt]) -> Value {
    serde_json::json!({
        "tool": tool,
        "decisions": receipts.iter().map(|r| {
            let mut decision = serde_json::json!({
                "domain": r.domain,
                "plugin_version": r.plugin_version,
                "severity": r.severity,
                "decision": r.decision,
                "key": r.key,
                "capsule": r.capsule,
                "evidence": r.evidence,
            });
            // The operator's policy, only where one of its rules decided (the clean twin's
            // lines are unchanged).
            if let (Some(policy), Some(object)) = (&r.policy, decision.as_object_mut()) {
                object.insert(
                    "policy".to_string(),
                    serde_json::json!({
                        "digest": policy.digest,
                        "rule": policy.rule,
                        "outcome": policy.outcome,
                    }),
                );
                // The execution a sign-off let through names it (who, which sign-off, note).
                if let (Some(approval), Some(Value::Object(p))) =
                    (&policy.approval, object.get_mut("policy"))
                {
                    p.insert("approval".to_string(), Value::String(approval.clone()));
                }
            }
            decision
        }).collect::<Vec<_>>(),
    })
}

/// The entry of a stored capsule.
pub fn capsule_entry(capsule: &super::store::Capsule) -> Value {
    let mut entry = serde_json::json!({
        "domain": capsule.domain,
        "domain_version": capsule.domain_version,
        "key": capsule.key,
        "tool": capsule.tool,
        "integrity": capsule.integrity,
    });
    if let (Some(policy), Some(object)) = (&capsule.policy, entry.as_object_mut()) {
        object.insert("policy".to_string(), serde_json::json!(policy));
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line_hash(line: &str) -> String {
        format!("sha256:{}", super::super::key::sha256_hex(line))
    }

    fn seal() -> Seal {
        Seal::from_bytes([3; 32])
    }

    fn check(ledger: &Ledger) -> Result<Intact, Broken> {
        verify(&ledger.root, &seal())
    }

    fn ledger_with(lines: usize) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::with_seal(dir.path(), Arc::new(seal()));
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
        let intact = check(&ledger).unwrap();
        assert_eq!(intact.entries, 5);
        assert_eq!(intact.head, line_hash(lines(&ledger).last().unwrap()));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(verify(empty.path(), &seal()).unwrap().entries, 0);
    }

    #[test]
    fn an_edit_a_deletion_an_insertion_and_a_reordering_name_the_first_bad_line() {
        let (_dir, ledger) = ledger_with(5);
        let original = lines(&ledger);
        let mut edited = original.clone();
        edited[2] = edited[2].replace("\"i\":2", "\"i\":7");
        write(&ledger, &edited);
        let broken = check(&ledger).unwrap_err();
        assert_eq!(broken.line, 3, "the edited line: its MAC fails");
        assert_eq!(broken.unsealed, vec![3]);

        let mut deleted = original.clone();
        deleted.remove(1);
        write(&ledger, &deleted);
        assert_eq!(check(&ledger).unwrap_err().line, 2);

        let mut inserted = original.clone();
        inserted.insert(3, original[3].clone());
        write(&ledger, &inserted);
        assert_eq!(check(&ledger).unwrap_err().line, 5);

        let mut reordered = original.clone();
        reordered.swap(1, 2);
        write(&ledger, &reordered);
        assert_eq!(check(&ledger).unwrap_err().line, 2);

        let mut last_edited = original.clone();
        last_edited[4] = last_edited[4].replace("\"gate\"", "\"gaTe\"");
        write(&ledger, &last_edited);
        // The last line has no successor to break, but its MAC fails.
        assert_eq!(check(&ledger).unwrap_err().line, 5);

        write(&ledger, &original);
        assert_eq!(check(&ledger).unwrap().entries, 5);
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
        let intact = check(&ledger).unwrap();
        assert_eq!(intact.entries, 3);
        assert_eq!(seq_of(lines(&ledger)[2].as_bytes()), Some(3));
    }

    /// Regression (issue 21): a line appended with a correct `seq` and `prev` (anyone can
    /// compute a SHA-256) passed verify; a whole ledger planted in a workspace passed too.
    #[test]
    fn lines_written_by_hand_or_under_another_key_fail_their_mac() {
        let (dir, ledger) = ledger_with(3);
        let mut all = lines(&ledger);
        let forged = format!(
            r#"{{"seq":4,"time":"2026-01-01T00:00:00.000Z","kind":"gate","entry":{{}},"prev":"{}"}}"#,
            line_hash(all.last().unwrap())
        );
        all.push(forged);
        write(&ledger, &all);
        let broken = check(&ledger).unwrap_err();
        assert_eq!((broken.line, broken.unsealed_count), (4, 1), "{broken:?}");
        assert!(broken.message.contains("MAC"), "{}", broken.message);

        let planted = Ledger::with_seal(dir.path(), Arc::new(Seal::from_bytes([9; 32])));
        std::fs::remove_file(ledger.path()).unwrap();
        for i in 0..4 {
            planted.append("gate", &json!({"i": i})).unwrap();
        }
        let broken = check(&ledger).unwrap_err();
        assert_eq!((broken.line, broken.unsealed_count), (1, 4));
        assert_eq!(broken.unsealed, vec![1, 2, 3, 4]);
    }

    /// Regression (issue 21): verify hung on a ledger that was a FIFO, grew to 2 GB on one
    /// that linked to `/dev/zero`, and followed one that linked elsewhere.
    #[test]
    fn verify_refuses_fifos_links_and_endless_lines_at_once() {
        let outside = tempfile::tempdir().unwrap();
        let (_dir, decoy) = {
            let l = Ledger::with_seal(outside.path(), Arc::new(seal()));
            l.append("gate", &json!({"outside": true})).unwrap();
            (0, l)
        };
        let before = std::fs::read(decoy.path()).unwrap();
        let started = std::time::Instant::now();
        for target in [decoy.path().to_path_buf(), PathBuf::from("/dev/zero")] {
            let store = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(&target, store.path().join(FILE_NAME)).unwrap();
            let broken = verify(store.path(), &seal()).unwrap_err();
            assert!(broken.message.contains("is a link"), "{}", broken.message);
        }
        let store = tempfile::tempdir().unwrap();
        let fifo =
            std::ffi::CString::new(store.path().join(FILE_NAME).as_os_str().as_encoded_bytes())
                .unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let broken = verify(store.path(), &seal()).unwrap_err();
        assert!(
            broken.message.contains("not a regular file"),
            "{}",
            broken.message
        );
        // A store that is a link.
        let parent = tempfile::tempdir().unwrap();
        let linked = parent.path().join("store");
        std::os::unix::fs::symlink(outside.path(), &linked).unwrap();
        let broken = verify(&linked, &seal()).unwrap_err();
        assert!(broken.message.contains("is a link"), "{}", broken.message);
        // A line longer than any entry is not held.
        let long = tempfile::tempdir().unwrap();
        std::fs::write(long.path().join(FILE_NAME), vec![b'x'; 8 << 20]).unwrap();
        let broken = verify(long.path(), &seal()).unwrap_err();
        assert!(
            broken.message.contains("longer than any entry"),
            "{}",
            broken.message
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(std::fs::read(decoy.path()).unwrap(), before);
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
        assert_eq!(check(&ledger).unwrap().entries, 200);
    }
}
