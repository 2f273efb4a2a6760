//! Append-only JSON-lines files shared by server processes: the one way the store appends
//! (`flock` + a single `O_APPEND` write, so processes never interleave partial lines) and, for
//! [`Journal`], an in-memory index from keys to line offsets that follows the file's tail.
//!
//! Appending to one file is how the store writes on a gated call's hot path: creating and
//! renaming a file per record waited on ext4 journal commits that were flushing the outputs'
//! data (`data=ordered`), and grew from 0.06 to 0.8 ms per record over 1000 calls on
//! Debian 12, where an append stayed at about 0.03 ms.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Open for appending (created 0644 if absent), without following a link or blocking;
/// regular files only.
pub fn open_for_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// An exclusive `flock` on a descriptor, released on drop (declare it after the file it locks,
/// so it is dropped first).
pub struct Lock(std::os::fd::RawFd);

impl Lock {
    pub fn exclusive(file: &std::fs::File) -> std::io::Result<Self> {
        let fd = file.as_raw_fd();
        loop {
            // SAFETY: a valid descriptor owned by `file`, which outlives the lock.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                return Ok(Self(fd));
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: as above; unlocking a held lock on a descriptor still open.
        unsafe { libc::flock(self.0, libc::LOCK_UN) };
    }
}

/// A line of a journal is at most this long; longer lines are skipped when indexing.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Bytes read at a time while indexing.
const FOLLOW_CHUNK: usize = 4 << 20;

/// Which keys a line answers for (parsed from the line; empty for a line to skip).
pub type KeysOf = fn(&str) -> Vec<String>;

/// An append-only JSON-lines file with an index of its keys. The index follows the file's
/// tail, so lines appended by other processes are found at the next lookup; the last line for
/// a key wins.
pub struct Journal {
    path: PathBuf,
    keys_of: KeysOf,
    state: Mutex<Indexed>,
}

#[derive(Default)]
struct Indexed {
    /// Bytes of the file indexed so far (always at a line boundary).
    read_to: u64,
    offsets: HashMap<String, u64>,
}

impl Journal {
    pub fn new(path: PathBuf, keys_of: KeysOf) -> Self {
        Self {
            path,
            keys_of,
            state: Mutex::new(Indexed::default()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one line (without its newline). Blocking.
    pub fn append(&self, line: &str) -> std::io::Result<()> {
        if line.contains('\n') || line.len() >= MAX_LINE_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a journal line must be one line of less than 1 MiB",
            ));
        }
        let mut file = open_for_append(&self.path)?;
        let _lock = Lock::exclusive(&file)?;
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        file.write_all(&bytes)
    }

    /// Whether a line was appended for `key`.
    pub fn contains(&self, key: &str) -> bool {
        let Ok(mut file) = open_regular(&self.path) else {
            return false;
        };
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        if let Err(e) = self.follow(&mut file, &mut state) {
            tracing::warn!(path = %self.path.display(), "journal not indexed: {e}");
        }
        state.offsets.contains_key(key)
    }

    /// The last line appended for `key`, if any.
    pub fn get(&self, key: &str) -> Option<String> {
        let mut file = match open_regular(&self.path) {
            Ok(file) => file,
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.path.display(), "journal not read: {e}");
                }
                return None;
            }
        };
        let mut state = self.state.lock().ok()?;
        if let Err(e) = self.follow(&mut file, &mut state) {
            tracing::warn!(path = %self.path.display(), "journal not indexed: {e}");
        }
        let offset = *state.offsets.get(key)?;
        drop(state);
        read_line_at(&mut file, offset).ok()
    }

    /// Index the lines appended since the last call.
    fn follow(&self, file: &mut std::fs::File, state: &mut Indexed) -> std::io::Result<()> {
        let len = file.metadata()?.len();
        if len < state.read_to {
            // Truncated or replaced: index it again from the start.
            *state = Indexed::default();
        }
        if len == state.read_to {
            return Ok(());
        }
        // In chunks, so that a large journal is indexed in bounded memory.
        file.seek(SeekFrom::Start(state.read_to))?;
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; FOLLOW_CHUNK];
        let mut position = state.read_to;
        while position < len {
            let wanted =
                usize::try_from(len - position).map_or(FOLLOW_CHUNK, |n| n.min(FOLLOW_CHUNK));
            let n = file.read(&mut chunk[..wanted])?;
            if n == 0 {
                break;
            }
            position += n as u64;
            pending.extend_from_slice(&chunk[..n]);
            let mut start = 0usize;
            while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
                let line = &pending[start..start + end];
                if line.len() < MAX_LINE_BYTES {
                    if let Ok(text) = std::str::from_utf8(line) {
                        for key in (self.keys_of)(text) {
                            state.offsets.insert(key, state.read_to);
                        }
                    }
                }
                state.read_to += (end + 1) as u64;
                start += end + 1;
            }
            pending.drain(..start);
            if pending.len() > MAX_LINE_BYTES {
                // A line longer than any journal line: skip past it.
                state.read_to += pending.len() as u64;
                pending.clear();
            }
        }
        // A line still being written (no newline yet) is indexed next time.
        Ok(())
    }
}

/// Open for reading without following a link or blocking; regular files only.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The line starting at `offset`, without its newline.
fn read_line_at(file: &mut std::fs::File, offset: u64) -> std::io::Result<String> {
    file.seek(SeekFrom::Start(offset))?;
    let mut line = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        if let Some(end) = buffer[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buffer[..end]);
            break;
        }
        line.extend_from_slice(&buffer[..n]);
        if line.len() >= MAX_LINE_BYTES {
            return Err(std::io::Error::other("a journal line longer than 1 MiB"));
        }
    }
    String::from_utf8(line).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_word(line: &str) -> Vec<String> {
        line.split(' ')
            .next()
            .map(str::to_string)
            .into_iter()
            .collect()
    }

    #[test]
    fn the_last_line_for_a_key_wins_and_other_writers_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let ours = Journal::new(path.clone(), first_word);
        let theirs = Journal::new(path, first_word);
        assert_eq!(ours.get("a"), None);
        ours.append("a 1").unwrap();
        ours.append("b 2").unwrap();
        assert_eq!(ours.get("a").as_deref(), Some("a 1"));
        theirs.append("a 3").unwrap();
        assert_eq!(ours.get("a").as_deref(), Some("a 3"));
        assert_eq!(ours.get("b").as_deref(), Some("b 2"));
        assert!(ours.append("two\nlines").is_err());
    }

    #[test]
    fn lines_across_read_chunks_are_all_indexed_at_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let journal = Journal::new(path.clone(), first_word);
        let padding = "x".repeat(100_000);
        for i in 0..100 {
            journal.append(&format!("k{i} {padding}{i}")).unwrap();
        }
        let reader = Journal::new(path, first_word);
        for i in [0, 41, 42, 99] {
            let line = reader.get(&format!("k{i}")).unwrap();
            assert!(line.starts_with(&format!("k{i} ")) && line.ends_with(&format!("x{i}")));
        }
    }
}
