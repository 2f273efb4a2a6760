//! The capsule store: one portable JSON file per justified decision, at
//! `<root>/justifications/<domain>/<hex>.json`.
//!
//! A capsule records what it justifies (domain and version, tool, key fields, the prompt's
//! name, arguments and hash), the justification and when it was written, plus an integrity
//! hash over all of that. It counts only when it parses, its justification passes the schema,
//! its recorded fields re-hash to its own key, the key matches the file name, and the
//! integrity hash matches. Anything else is logged and treated as missing. Domain names come
//! only from loaded plugins (validated ids), never from client input, so they cannot escape
//! the store; keys are checked to be exactly `sha256:` + 64 lowercase hex digits.

use super::justification::{self, Justification};
use super::key::{canonical_json, decision_key, key_hex, sha256_hex};
use super::ledger::LedgerError;
use super::lineage::LineageError;
use super::stamp::{self, FileStamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The capsule format identifier.
pub const FORMAT: &str = "gdal-mcp.justification-capsule/1";

/// The prompt a capsule answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapsulePrompt {
    pub name: String,
    pub arguments: BTreeMap<String, String>,
    pub sha256: String,
}

/// A stored justification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capsule {
    pub format: String,
    pub key: String,
    pub domain: String,
    pub domain_version: String,
    pub tool: String,
    pub severity: String,
    pub key_fields: Value,
    pub prompt: CapsulePrompt,
    /// The evidence the decision rested on, as the domain gave it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<crate::domains::EvidenceItem>,
    pub justification: Justification,
    /// `justification://...` of the capsules the call's inputs were made under (from their
    /// lineage): the decisions this one was taken on top of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream_capsules: Vec<String>,
    /// `sha256:` of the operator's policy file whose rule decided this decision (absent
    /// without one, so older capsules keep their integrity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    pub created_at: String,
    pub server_version: String,
    /// `sha256:` of the canonical JSON of every other field.
    pub integrity: String,
}

impl Capsule {
    /// The integrity hash this capsule should carry.
    pub fn compute_integrity(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.remove("integrity");
        }
        format!("sha256:{}", sha256_hex(&canonical_json(&value)))
    }

    /// The resource URI of this capsule.
    pub fn uri(&self) -> String {
        uri(&self.domain, &self.key)
    }
}

/// `justification://<domain>/<hex>`.
pub fn uri(domain: &str, key: &str) -> String {
    format!(
        "justification://{domain}/{}",
        key.strip_prefix("sha256:").unwrap_or(key)
    )
}

/// Why a capsule did not count.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("capsule {path}: {message}")]
    Invalid { path: String, message: String },
    #[error("store {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("malformed key \"{0}\"; keys look like sha256:<64 hex digits>")]
    BadKey(String),
    /// A store file a call must append to (the ledger, a lineage journal) cannot take its
    /// line: the call is refused before anything is decided or written (attack round 4, B6).
    #[error(
        "the store cannot record this call, so it was refused and nothing was written: \
         {path}: {problem}. The store (`.preflight/` in the first workspace unless --store \
         names another folder) is the record of every decision, and each of its files must be \
         a regular file (not a folder, a FIFO, a device or a link) in a real folder. Move \
         {path} aside (for example rename it to {path}.planted) and the server starts it \
         afresh, or start the server with --store naming a clean folder; `gdal-mcp ledger \
         verify` reports what an old ledger holds."
    )]
    Unusable { path: String, problem: String },
}

impl From<LineageError> for StoreError {
    fn from(error: LineageError) -> Self {
        match error {
            LineageError::Io { path, source } => unusable(path, source),
            LineageError::Invalid { path, message } => unusable(path, message),
        }
    }
}

impl From<LedgerError> for StoreError {
    fn from(error: LedgerError) -> Self {
        match error {
            LedgerError::Io { path, source } => unusable(path, source),
            LedgerError::Invalid { path, message } => unusable(path, message),
        }
    }
}

/// The store file at `path` cannot be used, because of `problem`.
fn unusable(path: String, problem: impl ToString) -> StoreError {
    StoreError::Unusable {
        path,
        problem: problem.to_string(),
    }
}

/// How long a check that the store's folders are real folders is trusted for reads (writes
/// always check): the gate reads a capsule per domain per call, on the cheap-call path.
const FOLDER_CHECK_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// Verified capsules kept at most before the memo starts over.
const VERIFIED_ENTRIES: usize = 4096;

/// The store rooted at a directory.
#[derive(Debug, Clone)]
pub struct CapsuleStore {
    root: PathBuf,
    /// Domains whose store folders were found real, and when.
    checked:
        std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>>,
    /// Capsules verified in this process, by path and file version: a cache hit of the gate
    /// re-reads a capsule's metadata, not its JSON.
    verified:
        std::sync::Arc<std::sync::Mutex<std::collections::HashMap<PathBuf, (FileStamp, Capsule)>>>,
}

impl CapsuleStore {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            checked: Default::default(),
            verified: Default::default(),
        }
    }

    /// [`Self::folders_are_real`] for reads, trusted for [`FOLDER_CHECK_TTL`].
    fn folders_are_real_for_reading(&self, domain: &str) -> bool {
        let fresh = self.checked.lock().is_ok_and(|checked| {
            checked
                .get(domain)
                .is_some_and(|at| at.elapsed() < FOLDER_CHECK_TTL)
        });
        if fresh {
            return true;
        }
        let real = self.folders_are_real(domain);
        if real {
            if let Ok(mut checked) = self.checked.lock() {
                checked.insert(domain.to_string(), std::time::Instant::now());
            }
        }
        real
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the capsule of `key` for `domain` is filed.
    pub fn file_of(&self, domain: &str, key: &str) -> Result<PathBuf, StoreError> {
        self.path(domain, key)
    }

    fn path(&self, domain: &str, key: &str) -> Result<PathBuf, StoreError> {
        let hex = key_hex(key).ok_or_else(|| StoreError::BadKey(key.to_string()))?;
        Ok(self
            .root
            .join("justifications")
            .join(domain)
            .join(format!("{hex}.json")))
    }

    /// Whether the store's folders for `domain` are real folders, not links: a store folder
    /// replaced by a link (`.preflight -> /elsewhere`) would make the server read and write
    /// capsules outside the workspace.
    fn folders_are_real(&self, domain: &str) -> bool {
        let chain = [
            self.root.clone(),
            self.root.join("justifications"),
            self.root.join("justifications").join(domain),
        ];
        chain
            .iter()
            .all(|dir| match std::fs::symlink_metadata(dir) {
                Ok(meta) => meta.is_dir() && !meta.file_type().is_symlink(),
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            })
    }

    /// The valid capsule for this decision, if any. Invalid capsules are logged and ignored.
    pub fn get(&self, domain: &str, key: &str) -> Option<Capsule> {
        if !self.folders_are_real_for_reading(domain) {
            tracing::warn!("ignoring the store for {domain}: a store folder is a link");
            return None;
        }
        let path = self.path(domain, key).ok()?;
        if std::fs::symlink_metadata(&path).is_err() {
            return None;
        }
        let verified = open_capsule(&self.root, domain, &path).and_then(|(file, stamp)| {
            let memo = self.verified.lock().ok().and_then(|m| {
                m.get(&path)
                    .filter(|(seen, _)| *seen == stamp)
                    .map(|(_, c)| c.clone())
            });
            if let Some(capsule) = memo {
                return Ok(capsule);
            }
            let capsule = read_verified(file, &path, domain, key)?;
            if let Ok(mut memo) = self.verified.lock() {
                if memo.len() >= VERIFIED_ENTRIES {
                    memo.clear();
                }
                memo.insert(path.clone(), (stamp, capsule.clone()));
            }
            Ok(capsule)
        });
        match verified {
            Ok(capsule) => Some(capsule),
            Err(e) => {
                tracing::warn!("ignoring capsule: {e}");
                None
            }
        }
    }

    /// Write a capsule atomically (temporary file, fsync, rename, fsync of the folder).
    pub fn put(&self, capsule: &Capsule) -> Result<PathBuf, StoreError> {
        let path = self.path(&capsule.domain, &capsule.key)?;
        self.write_capsule(capsule, path)
    }

    /// Keep a capsule another justification replaces for its decision (R16-C8), under
    /// `replaced/`: an output that rested on it still gives its own purpose (attack round 17,
    /// R17-C5). Kept as written, integrity and all.
    pub fn keep_replaced(&self, capsule: &Capsule) -> Result<PathBuf, StoreError> {
        let path = self.replaced_path(&capsule.domain, &capsule.key, &capsule.integrity)?;
        self.write_capsule(capsule, path)
    }

    /// A capsule kept by [`Self::keep_replaced`] for `domain`, `key` and `integrity`, if it is
    /// there and verifies.
    pub fn replaced(&self, domain: &str, key: &str, integrity: &str) -> Option<Capsule> {
        let path = self.replaced_path(domain, key, integrity).ok()?;
        let name = path.file_name()?.to_str()?.to_string();
        let file = super::journal::open_beneath(
            &self.root,
            &["justifications", domain, "replaced", &name],
            false,
        )
        .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() || meta.len() > MAX_CAPSULE_BYTES {
            return None;
        }
        read_verified(file, &path, domain, key)
            .ok()
            .filter(|c| c.integrity == integrity)
    }

    fn replaced_path(
        &self,
        domain: &str,
        key: &str,
        integrity: &str,
    ) -> Result<PathBuf, StoreError> {
        let hex = key_hex(key).ok_or_else(|| StoreError::BadKey(key.to_string()))?;
        let version: String = integrity
            .trim_start_matches("sha256:")
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(16)
            .collect();
        Ok(self
            .root
            .join("justifications")
            .join(domain)
            .join("replaced")
            .join(format!("{hex}-{version}.json")))
    }

    /// Write `capsule` at `path` atomically.
    fn write_capsule(&self, capsule: &Capsule, path: PathBuf) -> Result<PathBuf, StoreError> {
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        if !self.folders_are_real(&capsule.domain) {
            return Err(StoreError::Invalid {
                path: dir.display().to_string(),
                message: "a folder of the store is a link or not a folder; the store must be a real folder \
                          (remove the link or start with --store)"
                    .to_string(),
            });
        }
        std::fs::create_dir_all(&dir).map_err(io)?;
        // The capsule's own folder too (`replaced/` below a domain's): never a link.
        let real_dir = std::fs::symlink_metadata(&dir)
            .is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink());
        if !self.folders_are_real(&capsule.domain) || !real_dir {
            return Err(StoreError::Invalid {
                path: dir.display().to_string(),
                message: "a folder of the store became a link while it was created".to_string(),
            });
        }
        let text = serde_json::to_string_pretty(capsule).map_err(|e| StoreError::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let mut file = tempfile::Builder::new()
            .prefix(".capsule-")
            .tempfile_in(&dir)
            .map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        file.write_all(b"\n").map_err(io)?;
        file.as_file().sync_all().map_err(io)?;
        file.persist(&path).map_err(|e| io(e.error))?;
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(path)
    }

    /// Every valid capsule of the given domains (for resource listings).
    pub fn list(&self, domains: &[&str]) -> Vec<Capsule> {
        let mut capsules = Vec::new();
        for domain in domains {
            if !self.folders_are_real(domain) {
                continue;
            }
            let dir = self.root.join("justifications").join(domain);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for file in files {
                let Some(stem) = file.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                let key = format!("sha256:{stem}");
                match open_capsule(&self.root, domain, &file)
                    .and_then(|(opened, _)| read_verified(opened, &file, domain, &key))
                {
                    Ok(capsule) => capsules.push(capsule),
                    Err(e) => tracing::warn!("ignoring capsule: {e}"),
                }
            }
        }
        capsules
    }
}

/// A capsule is at most this large (a justification is at most 4 KiB; the rest is small).
pub const MAX_CAPSULE_BYTES: u64 = 64 << 10;

/// Open a capsule file (`path`, under `<root>/justifications/<domain>/`) as the store opens
/// every file (`super::journal::open_beneath`): each store folder opened without following a
/// link, so a folder swapped for a link after the folder check is still refused; the file
/// without following a link or blocking, only if it is a regular file of at most
/// [`MAX_CAPSULE_BYTES`] (a capsule name that is a symlink to `/dev/zero` or a FIFO must not
/// make the gate or the listing read forever or hang); with the file's version stamp.
fn open_capsule(
    root: &Path,
    domain: &str,
    path: &Path,
) -> Result<(std::fs::File, FileStamp), StoreError> {
    let io = |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    };
    let invalid = |message: &str| StoreError::Invalid {
        path: path.display().to_string(),
        message: message.to_string(),
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| invalid("not a capsule name"))?;
    let file =
        super::journal::open_beneath(root, &["justifications", domain, name], false).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(invalid("not a regular file"));
    }
    if meta.len() > MAX_CAPSULE_BYTES {
        return Err(invalid("larger than any capsule"));
    }
    Ok((file, stamp::of(&meta)))
}

/// The text of an opened capsule (at most [`MAX_CAPSULE_BYTES`]).
fn read_capsule_text(file: std::fs::File, path: &Path) -> Result<String, StoreError> {
    use std::io::Read;
    let io = |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut text = String::new();
    file.take(MAX_CAPSULE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    Ok(text)
}

fn read_verified(
    file: std::fs::File,
    path: &Path,
    domain: &str,
    key: &str,
) -> Result<Capsule, StoreError> {
    let invalid = |message: String| StoreError::Invalid {
        path: path.display().to_string(),
        message,
    };
    let text = read_capsule_text(file, path)?;
    let raw: Value = serde_json::from_str(&text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let severity_critical = raw.get("severity").and_then(Value::as_str) == Some("critical");
    let justification_value = raw.get("justification").cloned().unwrap_or(Value::Null);
    let evidence: Vec<crate::domains::EvidenceItem> = raw
        .get("evidence")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| invalid(format!("evidence: {e}")))?
        .unwrap_or_default();
    justification::validate(&justification_value, severity_critical, &evidence).map_err(
        |errors| {
            invalid(format!(
                "justification fails the schema: {}",
                errors
                    .iter()
                    .map(|e| format!("{} {}", e.path, e.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        },
    )?;
    let capsule: Capsule =
        serde_json::from_value(raw).map_err(|e| invalid(format!("not a capsule: {e}")))?;
    if capsule.format != FORMAT {
        return Err(invalid(format!("unknown format {}", capsule.format)));
    }
    if capsule.domain != domain || capsule.key != key {
        return Err(invalid(format!(
            "records {}/{} but is filed as {domain}/{key}",
            capsule.domain, capsule.key
        )));
    }
    let rehashed = decision_key(
        &capsule.domain,
        &capsule.key_fields,
        &capsule.prompt.sha256,
        &capsule.evidence,
    );
    if rehashed != capsule.key {
        return Err(invalid(format!(
            "its recorded fields hash to {rehashed}, not to its key: it was edited"
        )));
    }
    if capsule.compute_integrity() != capsule.integrity {
        return Err(invalid(
            "integrity hash mismatch: it was edited".to_string(),
        ));
    }
    Ok(capsule)
}
