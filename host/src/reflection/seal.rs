//! The per-user sealing key, and the MACs that make the store's records unforgeable from inside
//! a workspace.
//!
//! The threat is a workspace that arrives with a `.preflight/` already in it (a downloaded
//! project folder) whose planted records claim a clean upstream, or an edit of the store that
//! appends a record of its own. Every lineage record, every line of the path index and every
//! ledger entry therefore ends in `"mac":"<hex>"`: HMAC-SHA256 (RFC 2104) of the line before
//! that field, under a 256-bit key that lives outside every workspace, by default
//! `$XDG_DATA_HOME/gdal-mcp/key` (else `~/.local/share/gdal-mcp/key`), created mode 0600 in a
//! 0700 folder, and refused if it is a link, not a regular file, or readable by group or
//! others. `--key-file` may name another one, also outside every workspace. The key is never
//! written into a tool result or a log. Each kind of line is sealed under its own label, so a
//! line of one file cannot be replayed into another.
//!
//! HMAC is written here over `sha2` (two hashes and a padded key), not taken from another
//! crate; RFC 4231's test vectors check it.

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Key length in bytes.
const KEY_BYTES: usize = 32;
/// SHA-256's block length.
const BLOCK: usize = 64;
/// The field a sealed line ends with: `,"mac":"<64 hex>"}`.
const MAC_FIELD: &str = ",\"mac\":\"";
/// Length of `,"mac":"<64 hex>"}`.
const SEALED_TAIL: usize = MAC_FIELD.len() + 64 + 2;

/// `N` random bytes from `/dev/urandom`; without it, from the clock and the process (at most
/// 32 of them, the rest zero), still never on disk: for keys that live only in this process
/// and for nonces.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .is_ok();
    if !filled {
        let seed = format!(
            "{:?} {} {:p}",
            std::time::SystemTime::now(),
            std::process::id(),
            &bytes
        );
        for (byte, digest) in bytes.iter_mut().zip(Sha256::digest(seed.as_bytes())) {
            *byte = digest;
        }
    }
    bytes
}

/// What a sealed line is (its MAC is computed under this label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A line of `lineage/records.jsonl`.
    LineageRecord,
    /// A line of `lineage/paths.jsonl`.
    WrittenPath,
    /// A line of `ledger.jsonl`.
    LedgerEntry,
    /// A line of `approvals.jsonl` (a sign-off request, answer or use).
    Approval,
}

impl Kind {
    fn label(self) -> &'static [u8] {
        match self {
            Kind::LineageRecord => b"gdal-mcp lineage record 1\n",
            Kind::WrittenPath => b"gdal-mcp written path 1\n",
            Kind::LedgerEntry => b"gdal-mcp ledger entry 1\n",
            Kind::Approval => b"gdal-mcp approval 1\n",
        }
    }
}

/// Why the key could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    #[error("sealing key {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("sealing key {path}: {message}")]
    Refused { path: String, message: String },
    #[error(
        "no place for the sealing key: set XDG_DATA_HOME or HOME, or give --key-file outside \
         every workspace"
    )]
    NoHome,
}

/// The key. Its bytes are never printed (`Debug` shows only where it came from).
pub struct Seal {
    key: [u8; KEY_BYTES],
    origin: String,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Seal({})", self.origin)
    }
}

/// `$XDG_DATA_HOME/gdal-mcp/key`, else `$HOME/.local/share/gdal-mcp/key`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".local").join("share"))
        })?;
    Some(base.join("gdal-mcp").join("key"))
}

fn refused(path: &Path, message: impl Into<String>) -> SealError {
    SealError::Refused {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Whether `path` (absolute, parents resolved) lies inside `root` (resolved).
fn inside(path: &Path, root: &Path) -> bool {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    path.starts_with(&root)
}

impl Seal {
    /// The key at `path`, created if absent. `workspaces` are the folders tool calls may
    /// write: the key must lie outside all of them.
    pub fn open(path: &Path, workspaces: &[PathBuf]) -> Result<Self, SealError> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
        let io = |source| SealError::Io {
            path: path.display().to_string(),
            source,
        };
        let file_name = path
            .file_name()
            .ok_or_else(|| refused(path, "names no file"))?;
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .ok_or_else(|| refused(path, "must be an absolute path"))?;
        if !path.is_absolute() {
            return Err(refused(path, "must be an absolute path"));
        }
        // The folder: created 0700 if absent.
        if std::fs::symlink_metadata(parent).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(io)?;
        }
        let folder = parent.canonicalize().map_err(io)?;
        let resolved = folder.join(file_name);
        if let Some(root) = workspaces.iter().find(|root| inside(&resolved, root)) {
            return Err(refused(
                path,
                format!(
                    "lies inside the workspace {}; the key must be kept outside every \
                     workspace (a workspace can arrive with a planted store)",
                    root.display()
                ),
            ));
        }
        let folder_meta = std::fs::metadata(&folder).map_err(io)?;
        if folder_meta.mode() & 0o022 != 0 {
            return Err(refused(
                path,
                format!(
                    "its folder {} is writable by group or others (chmod 700 it)",
                    folder.display()
                ),
            ));
        }
        let open = |create: bool| {
            let mut options = std::fs::OpenOptions::new();
            options
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
            if create {
                options.write(true).create_new(true).mode(0o600);
            }
            options.open(&resolved)
        };
        let (mut file, created) = match open(false) {
            Ok(file) => (file, false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match open(true) {
                Ok(file) => (file, true),
                // Another server created it first.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    (open(false).map_err(io)?, false)
                }
                Err(e) => return Err(io(e)),
            },
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(refused(path, "is a link; the key must be a regular file"))
            }
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        if !meta.file_type().is_file() {
            return Err(refused(path, "is not a regular file"));
        }
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(refused(
                path,
                format!(
                    "is readable or writable by group or others (mode {:o}); chmod 600 it",
                    meta.permissions().mode() & 0o777
                ),
            ));
        }
        // SAFETY: geteuid has no preconditions.
        if meta.uid() != unsafe { libc::geteuid() } {
            return Err(refused(path, "belongs to another user"));
        }
        let mut key = [0u8; KEY_BYTES];
        if created {
            std::fs::File::open("/dev/urandom")
                .and_then(|mut random| random.read_exact(&mut key))
                .map_err(io)?;
            let mut text = hex::encode(key);
            text.push('\n');
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
        } else {
            let mut text = String::new();
            (&mut file)
                .take(256)
                .read_to_string(&mut text)
                .map_err(io)?;
            let bytes = hex::decode(text.trim())
                .ok()
                .filter(|b| b.len() == KEY_BYTES)
                .ok_or_else(|| {
                    refused(
                        path,
                        "does not hold a key (64 hex digits); an empty file is left by a \
                         server that stopped while creating it: remove it",
                    )
                })?;
            key.copy_from_slice(&bytes);
        }
        Ok(Self {
            key,
            origin: resolved.display().to_string(),
        })
    }

    /// A key that lives only in this process (tests, or a server whose key file cannot be
    /// used: records it writes verify only while it runs, and every earlier record is
    /// unknown, which is the strict side).
    pub fn ephemeral() -> Self {
        Self {
            key: random_bytes(),
            origin: "in memory".to_string(),
        }
    }

    /// A key from known bytes (tests).
    pub fn from_bytes(key: [u8; KEY_BYTES]) -> Self {
        Self {
            key,
            origin: "given".to_string(),
        }
    }

    /// Where the key came from (a path, or `in memory`), for messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    fn mac(&self, kind: Kind, body: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.key, &[kind.label(), body])
    }

    /// A key of its own for `purpose`, derived from this one (HMAC under a label no line
    /// kind uses): what seals a sign-off's request state (`super::approval`). The bytes never
    /// leave the process.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        hmac_sha256(
            &self.key,
            &[b"gdal-mcp derived key 1\n".as_slice(), purpose.as_bytes()],
        )
    }

    /// `line` (one non-empty JSON object, as serde_json writes it) with its MAC as a last
    /// field.
    pub fn seal(&self, kind: Kind, line: &str) -> String {
        let Some(open) = line.strip_suffix('}') else {
            return line.to_string();
        };
        let mac = hex::encode(self.mac(kind, line.as_bytes()));
        format!("{open}{MAC_FIELD}{mac}\"}}")
    }

    /// The line without its MAC, if the MAC is there and right.
    pub fn open_line<'a>(&self, kind: Kind, line: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        let split = line.len().checked_sub(SEALED_TAIL)?;
        let (body, tail) = (line.get(..split)?, line.get(split..)?);
        let hex = tail.strip_prefix(MAC_FIELD)?.strip_suffix("\"}")?;
        let given = hex::decode(hex).ok()?;
        let unsealed = format!("{body}}}");
        let want = self.mac(kind, unsealed.as_bytes());
        constant_time_eq(&want, &given).then_some(std::borrow::Cow::Owned(unsealed))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for part in parts {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test cases 1, 2 and 6 (a key longer than a block).
    #[test]
    fn hmac_matches_rfc_4231() {
        let one = hmac_sha256(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(
            hex::encode(one),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let two = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(two),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let six = hmac_sha256(
            &[0xaa; 131],
            &[b"Test Using Larger Than Block-Size Key - Hash Key First"],
        );
        assert_eq!(
            hex::encode(six),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_sealed_line_opens_and_any_edit_or_other_key_or_kind_does_not() {
        let seal = Seal::from_bytes([7; 32]);
        let line = r#"{"a":1,"b":"x"}"#;
        let sealed = seal.seal(Kind::LineageRecord, line);
        assert!(sealed.starts_with(r#"{"a":1,"b":"x","mac":""#), "{sealed}");
        let value: serde_json::Value = serde_json::from_str(&sealed).unwrap();
        assert_eq!(value["a"], 1);
        assert_eq!(
            seal.open_line(Kind::LineageRecord, &sealed).as_deref(),
            Some(line)
        );
        assert_eq!(seal.open_line(Kind::LedgerEntry, &sealed), None);
        assert_eq!(
            Seal::from_bytes([8; 32]).open_line(Kind::LineageRecord, &sealed),
            None
        );
        let edited = sealed.replace("\"a\":1", "\"a\":2");
        assert_eq!(seal.open_line(Kind::LineageRecord, &edited), None);
        assert_eq!(seal.open_line(Kind::LineageRecord, line), None);
        assert_eq!(seal.open_line(Kind::LineageRecord, ""), None);
        assert!(!format!("{seal:?}").contains("0707"));
    }

    #[test]
    fn the_key_is_created_private_and_refused_when_exposed_linked_or_inside_a_workspace() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("data/gdal-mcp/key");
        let workspace = tempfile::tempdir().unwrap();
        let first = Seal::open(&path, &[workspace.path().to_path_buf()]).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let again = Seal::open(&path, &[]).unwrap();
        assert_eq!(first.key, again.key, "the same key at the next start");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Seal::open(&path, &[]).unwrap_err().to_string();
        assert!(e.contains("group or others"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();

        let link = home.path().join("data/gdal-mcp/link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = Seal::open(&link, &[]).unwrap_err().to_string();
        assert!(e.contains("link"), "{e}");

        let planted = workspace.path().join("key");
        let e = Seal::open(&planted, &[workspace.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside every workspace"), "{e}");
        assert!(!planted.exists(), "nothing written in the workspace");
    }
}
