//! Lineage: for every file a gated tool writes, a record of how it was made, in
//! `<store>/lineage/`.
//!
//! A record names the tool, its validated arguments, the equivalent command lines, the SHA-256
//! of every input and output, the versions of gdal-mcp, GDAL and PROJ, each domain's id,
//! version and component digest, the receipts and capsules, and the time. Records are keyed by
//! the output's content: `lineage/records.jsonl` holds one line per record, indexed by the
//! SHA-256 of each output (every line for a digest counts: a content made twice has both
//! records, and the walk reads them all), so a renamed or copied output
//! keeps its lineage and a modified one loses it. A second journal, `lineage/paths.jsonl`,
//! remembers which content the server last wrote at each path: a file whose content differs
//! from that was modified outside the server, and is flagged wherever it is used. Both are
//! append-only (`super::journal`): one append per record on a call's hot path, and servers
//! sharing a store see each other's records at their next lookup.
//!
//! Both journals are sealed (`super::seal`): every line carries a MAC under the user's key,
//! kept outside every workspace, and a line that does not verify (planted with a downloaded
//! workspace, appended or edited by hand) is ignored with a warning, as if it were not there.
//! An edit must never launder what the lineage says: a file modified outside the server is
//! described by the steps of the content the server last wrote at its path, flagged
//! `modified_since` (the edit cannot undo what those steps did to its cells), and a walk
//! continues through an input that was modified the same way. A file whose exact content the
//! server wrote, but whose record no longer verifies, is flagged `modified_since` with no
//! steps: its upstream is unknown.
//!
//! Walking records from a file's digest back through its inputs' digests gives the steps that
//! made it ([`LineageStore::upstream`]); the domains see them as facts, and
//! `super::provenance` writes them up.
//!
//! The walk reads at most [`MAX_STEPS`] records, so what a step did further up must not depend
//! on it (attack round 8, R8-9: 64 ungated `raster_calc "a"` steps pushed a bilinear
//! resampling out of the walk and the operator's rule on `upstream_interpolation` no longer
//! fired). Every record therefore **carries** the marks of its inputs' whole upstream
//! ([`Carry`]: each interpolating resampling and lossy encoding, the nearest of each kind, with
//! the step, its depth and the capsules that justified it), taken from the walk of each input
//! and the marks the records found there carry in turn, and says whether that upstream is
//! complete. A walk adds the marks its records carry from beyond what it read as steps of
//! their own; a walk cut by the limit whose nearest records cannot vouch for what lies beyond
//! (written before marks were carried) adds one step of **unknown** upstream, whose
//! resampling and encoding are unknown: every domain and rule treats an unknown method as
//! interpolating and lossy, the strict side. Files are hashed with SHA-256 (sha2, which uses the
//! CPU's SHA extensions), on the blocking worker that wrote or read them, and digests are
//! memoised by file version (device, inode, size, mtime, ctime) so that a chain hashes each
//! file once. Every record written is also entered in the ledger (`super::ledger`), so an
//! edited record shows.
//!
//! Hashing is bounded (issue 21: four `provenance_report` calls on a sparse 64 GiB file kept
//! the read tools waiting for a minute, and could not be cancelled). A file of at most
//! `GDAL_MCP_HASH_MAX_BYTES` (default [`DEFAULT_HASH_MAX_BYTES`]) is hashed whole; a larger one
//! gets a *partial digest*, labelled `partial-sha256:` wherever it appears ([`PARTIAL_PREFIX`]),
//! never passed off as a SHA-256 of the file: the SHA-256 of its size and of
//! [`PARTIAL_WINDOWS`] windows of [`PARTIAL_WINDOW`] bytes spread evenly from its first byte to
//! its last. It keys the file's lineage as a full digest does (a copy keeps it, a change of
//! size or in a window loses it), but an edit elsewhere keeps it. No file's hashing runs
//! longer than `GDAL_MCP_HASH_MAX_SECONDS` (default [`DEFAULT_HASH_MAX_SECONDS`]), and a caller
//! can stop it between chunks ([`LineageStore::dataset_digest_until`]).

use super::journal::Journal;
use super::ledger::Ledger;
use super::seal::{Kind, Seal};
use super::stamp::{self, FileStamp as Stamp};
use crate::domains::{DatasetLineage, UpstreamStep};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The record format identifier.
pub const FORMAT: &str = "gdal-mcp.lineage/1";
/// The folder under the store.
pub const DIR: &str = "lineage";
/// Upstream walks stop after this many steps (a chain longer than this is reported cut).
pub const MAX_STEPS: usize = 64;
/// Test-only: the walk's limit instead of [`MAX_STEPS`] (the end-to-end test of a cut walk sets
/// it low so that it need not write 65 files; an operator has no reason to).
pub const MAX_STEPS_VARIABLE: &str = "GDAL_MCP_LINEAGE_MAX_STEPS";
/// Marks a record carries at most (one per kind and value, the nearest).
const MAX_CARRIED: usize = 32;
/// Capsules kept with a carried mark.
const MAX_CARRIED_CAPSULES: usize = 8;
/// The tool of the step a cut walk adds for what lies beyond it.
pub const UNKNOWN_TOOL: &str = "unknown upstream";

/// The walk's limit in force: [`MAX_STEPS`] unless the test-only [`MAX_STEPS_VARIABLE`] says
/// otherwise (read once).
pub fn max_steps() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var(MAX_STEPS_VARIABLE)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| (1..=4096).contains(n))
            .unwrap_or(MAX_STEPS)
    })
}
/// Digests memoised before the memo starts over.
const MEMO_ENTRIES: usize = 4096;
/// Read buffer for hashing.
const HASH_BUFFER: usize = 1 << 20;
/// Default most bytes of a file hashed whole (`GDAL_MCP_HASH_MAX_BYTES` overrides it): about
/// a second of SHA-256; a larger file gets a partial digest.
pub const DEFAULT_HASH_MAX_BYTES: u64 = 2 << 30;
/// Default most seconds one file's hashing may take (`GDAL_MCP_HASH_MAX_SECONDS`).
pub const DEFAULT_HASH_MAX_SECONDS: u64 = 60;
/// The label of a partial digest (a file above the hashing budget): never a full SHA-256.
pub const PARTIAL_PREFIX: &str = "partial-sha256:";
/// Windows a partial digest reads.
pub const PARTIAL_WINDOWS: u64 = 16;
/// Bytes of each window of a partial digest.
pub const PARTIAL_WINDOW: u64 = 1 << 20;

/// The most bytes hashed whole, in force.
pub fn hash_max_bytes() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| crate::budget::setting("GDAL_MCP_HASH_MAX_BYTES", DEFAULT_HASH_MAX_BYTES))
}

/// The most seconds one file's hashing may take, in force.
pub fn hash_max_seconds() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        crate::budget::setting("GDAL_MCP_HASH_MAX_SECONDS", DEFAULT_HASH_MAX_SECONDS)
    })
}

/// Whether `digest` is a partial digest (see [`PARTIAL_PREFIX`]).
pub fn is_partial(digest: &str) -> bool {
    digest.starts_with(PARTIAL_PREFIX)
}

/// A digest as written in a record key or a `lineage://` URI: 64 hex digits, or those after
/// [`PARTIAL_PREFIX`]; lower-cased. `None` for anything else.
pub fn parse_digest(text: &str) -> Option<String> {
    let (label, hex) = match text.get(..PARTIAL_PREFIX.len()) {
        Some(head) if head.eq_ignore_ascii_case(PARTIAL_PREFIX) => {
            (PARTIAL_PREFIX, &text[PARTIAL_PREFIX.len()..])
        }
        _ => ("", text),
    };
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{label}{}", hex.to_ascii_lowercase()))
}

/// Why lineage could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineageError {
    #[error("lineage {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("lineage {path}: {message}")]
    Invalid { path: String, message: String },
}

/// One file in a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRef {
    /// The argument the file came from (`input`, `zones`, `output`, ...).
    pub role: String,
    pub path: String,
    /// SHA-256 (hex) of the file, or of a shapefile's parts; `None` if it could not be read.
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A lineage record for this content existed when the step ran.
    #[serde(default)]
    pub recorded: bool,
    /// The server had written this path with other content: the file was modified outside
    /// the server before this step read it (or the server wrote this content and its record
    /// no longer verifies).
    #[serde(default)]
    pub modified_outside: bool,
    /// When modified outside: the content the server last wrote at this path, whose lineage
    /// still describes what was done to the file before the edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_sha256: Option<String>,
}

/// What kind of step it was, in the terms the domains and the methods section use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resampling: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crs_change: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditioning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lossy_encoding: Option<String>,
    /// An input raster looked categorical (its evidence, e.g. "lc.tif: a colour table"): what
    /// the step wrote from it is derived from classes (attack round 7, R7-13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categorical_input: Option<String>,
}

/// One mark a record carries from its inputs' upstream: a step that interpolated or encoded
/// lossily, however far up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carried {
    /// Steps above the record that carries it (1: the step that made one of its inputs).
    pub depth: u32,
    /// The content the marking step wrote (its record is filed under it).
    pub sha256: String,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resampling: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lossy_encoding: Option<String>,
    /// `justification://...` of the capsules the marking step rested on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capsules: Vec<String>,
}

/// What a record carries from its inputs' whole upstream (attack round 8, R8-9).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Carry {
    /// The marks are the whole upstream's: every input's walk ended, or the records it was
    /// cut at carried complete marks. `false` in records written before marks were carried,
    /// and where an input's upstream is unknown.
    #[serde(default)]
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<Carried>,
}

impl Carry {
    fn is_unknown(&self) -> bool {
        !self.complete && self.marks.is_empty()
    }

    /// Add `mark` unless a mark of the same kind and value is nearer; bounded by
    /// [`MAX_CARRIED`] (a mark dropped for room makes the carry incomplete).
    fn add(&mut self, mark: Carried) {
        let same = |m: &Carried| {
            m.resampling == mark.resampling && m.lossy_encoding == mark.lossy_encoding
        };
        if let Some(kept) = self.marks.iter_mut().find(|m| same(m)) {
            if mark.depth < kept.depth {
                *kept = mark;
            }
            return;
        }
        if self.marks.len() >= MAX_CARRIED {
            self.complete = false;
            return;
        }
        self.marks.push(mark);
    }
}

/// A step's own mark, if it interpolated (any recorded resampling: what counts as
/// interpolating is the reader's to say) or encoded lossily.
fn own_mark(record: &Record, sha256: &str, depth: u32) -> Option<Carried> {
    let resampling = record.summary.resampling.clone();
    let lossy_encoding = record.summary.lossy_encoding.clone();
    (resampling.is_some() || lossy_encoding.is_some()).then(|| Carried {
        depth,
        sha256: sha256.to_string(),
        tool: record.tool.clone(),
        resampling,
        lossy_encoding,
        capsules: record
            .capsules
            .iter()
            .take(MAX_CARRIED_CAPSULES)
            .cloned()
            .collect(),
    })
}

/// What lies upstream beyond a walk's steps ([`LineageStore::beyond`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Beyond {
    /// Marks the walked records carry from further up, nearest first, each at its depth
    /// from the content walked.
    pub marks: Vec<Carried>,
    /// The walk was cut where no record vouched for the rest: unknown upstream.
    pub unknown: bool,
}

/// A walk: the records (depth, record, copy, the digest it was found under), and whether the
/// limit cut it.
struct Walk {
    records: Vec<(u32, Record, bool, String)>,
    cut: bool,
}

/// Software versions a step ran with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versions {
    pub gdal_mcp: String,
    pub gdal: String,
    pub proj: String,
}

/// A domain that was loaded when the step ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginRef {
    pub id: String,
    pub version: String,
    /// The WIT contract it was built against.
    pub contract: String,
    /// SHA-256 of the component (hex).
    pub digest: String,
}

/// How one gated call made its outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub format: String,
    pub tool: String,
    /// What the tool did, as the methods section says it (from the tool table; empty in
    /// records written before it was recorded).
    #[serde(default)]
    pub verb: String,
    /// The validated arguments, without `justification`.
    pub arguments: Value,
    /// The equivalent command lines, in order (empty for host algorithms).
    pub commands: Vec<Vec<String>>,
    /// The host's own computation in words, for steps no GDAL command replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computation: Option<String>,
    pub inputs: Vec<FileRef>,
    pub outputs: Vec<FileRef>,
    pub summary: StepSummary,
    pub versions: Versions,
    pub plugins: Vec<PluginRef>,
    /// The gate's receipts, as returned to the client.
    pub receipts: Vec<Value>,
    /// `justification://...` of the capsules this call rested on.
    pub capsules: Vec<String>,
    /// Capsules found in the inputs' lineage (justification chaining).
    #[serde(default)]
    pub upstream_capsules: Vec<String>,
    /// The marks of the inputs' whole upstream, filled in when the record is written
    /// ([`LineageStore::write`]).
    #[serde(default, skip_serializing_if = "Carry::is_unknown")]
    pub carried: Carry,
    pub started_at: String,
    pub finished_at: String,
}

impl Record {
    /// The step as the domains see it, at `depth`.
    pub fn step(&self, depth: u32) -> UpstreamStep {
        UpstreamStep {
            depth,
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            resampling: self.summary.resampling.clone(),
            crs_change: self.summary.crs_change.clone(),
            conditioning: self.summary.conditioning.clone(),
            aggregation: self.summary.aggregation.clone(),
            lossy_encoding: self.summary.lossy_encoding.clone(),
            categorical_input: self.summary.categorical_input.clone(),
            input_modified: self.inputs.iter().any(|i| i.modified_outside),
            capsules: self.capsules.clone(),
        }
    }
}

impl Carried {
    /// The marking step as the domains see it, at `depth` (what the record carries, not what
    /// it read: no arguments).
    fn step(&self, depth: u32) -> UpstreamStep {
        UpstreamStep {
            depth,
            tool: self.tool.clone(),
            arguments: Value::Object(serde_json::Map::new()),
            resampling: self.resampling.clone(),
            lossy_encoding: self.lossy_encoding.clone(),
            capsules: self.capsules.clone(),
            ..UpstreamStep::default()
        }
    }
}

/// The step a cut walk adds for what lies beyond it: unknown, so every reader takes its
/// resampling as interpolating and its encoding as lossy (the strict side).
fn unknown_step(depth: u32) -> UpstreamStep {
    unknown_source_step(
        depth,
        &format!(
            "the lineage walk stopped at {} steps, and the records there were written before \
             records carried their upstream's marks",
            max_steps()
        ),
    )
}

/// A step of unknown upstream, `why` it is unknown: every reader takes its resampling as
/// interpolating and its encoding as lossy (the strict side). A cut walk adds one
/// ([`unknown_step`]), and so does an input for a file GDAL reads through it (a VRT's source)
/// whose lineage cannot be looked up (attack round 10, R10-2).
pub fn unknown_source_step(depth: u32, why: &str) -> UpstreamStep {
    let why = format!("unknown: {why}");
    UpstreamStep {
        depth,
        tool: UNKNOWN_TOOL.to_string(),
        arguments: Value::Object(serde_json::Map::new()),
        resampling: Some(why.clone()),
        lossy_encoding: Some(why),
        ..UpstreamStep::default()
    }
}

/// `lineage://<sha256>`.
pub fn uri(sha256: &str) -> String {
    format!("lineage://{sha256}")
}

/// Open without following a link anywhere on the path or blocking, regular files only
/// ([`crate::workspace::open_regular_no_links`]).
fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let file = crate::workspace::open_regular_no_links(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Why hashing stopped short: the caller asked, or the time budget ran out.
fn stopped(path: &Path, cancelled: bool, seconds: u64) -> std::io::Error {
    if cancelled {
        return std::io::Error::other(format!("hashing {} was cancelled", path.display()));
    }
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "hashing {} took more than {seconds} s, the server's budget per file \
             (GDAL_MCP_HASH_MAX_SECONDS)",
            path.display(),
        ),
    )
}

/// A file's digest, streamed: its SHA-256 when it has at most [`hash_max_bytes`] bytes, else
/// its partial digest; with the file's version before and after. `stop` is asked between
/// chunks, and the time budget checked there.
fn hash_file(path: &Path, stop: &dyn Fn() -> bool) -> std::io::Result<(String, Stamp, Stamp)> {
    hash_file_within(path, stop, hash_max_bytes(), hash_max_seconds())
}

/// A file's digest as an input's is taken ([`hash_file`]: its SHA-256, or a labelled partial
/// digest above the byte budget; within the time budget per file), not memoised: for the
/// files a sign-off binds besides the inputs (`super::approval::read_set_digests`).
pub fn file_digest_within(path: &Path, stop: &dyn Fn() -> bool) -> std::io::Result<String> {
    hash_file(path, stop).map(|(digest, _, _)| digest)
}

/// [`hash_file`] with the byte and time budgets given.
fn hash_file_within(
    path: &Path,
    stop: &dyn Fn() -> bool,
    limit: u64,
    seconds: u64,
) -> std::io::Result<(String, Stamp, Stamp)> {
    let (mut file, before) = open_regular(path)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let go_on = || -> std::io::Result<()> {
        if stop() {
            return Err(stopped(path, true, seconds));
        }
        if std::time::Instant::now() > deadline {
            return Err(stopped(path, false, seconds));
        }
        Ok(())
    };
    let size = before.len();
    let digest = if size > limit {
        partial_digest(&file, size, &go_on)?
    } else {
        let mut hasher = Sha256::new();
        // A small file needs no megabyte of zeroed buffer.
        let wanted = usize::try_from(size).unwrap_or(HASH_BUFFER);
        let mut buffer = vec![0u8; wanted.saturating_add(1).clamp(4096, HASH_BUFFER)];
        let mut total = 0u64;
        loop {
            go_on()?;
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > limit {
                return Err(std::io::Error::other(format!(
                    "{} grew past {limit} bytes, the hashing budget \
                     (GDAL_MCP_HASH_MAX_BYTES), while it was hashed",
                    path.display()
                )));
            }
            hasher.update(&buffer[..n]);
        }
        hex::encode(hasher.finalize())
    };
    let after = file.metadata()?;
    Ok((digest, stamp::of(&before), stamp::of(&after)))
}

/// The partial digest of a file of `size` bytes: SHA-256 of a header naming the scheme and
/// the size, then [`PARTIAL_WINDOWS`] windows of [`PARTIAL_WINDOW`] bytes at evenly spaced
/// offsets from 0 to `size - PARTIAL_WINDOW`; labelled [`PARTIAL_PREFIX`].
fn partial_digest(
    file: &std::fs::File,
    size: u64,
    go_on: &dyn Fn() -> std::io::Result<()>,
) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let window = PARTIAL_WINDOW.min(size);
    let mut hasher = Sha256::new();
    hasher.update(format!(
        "gdal-mcp partial digest 1\nsize {size}\nwindows {PARTIAL_WINDOWS} of {window} \
         bytes, evenly spaced from the first byte to the last\n"
    ));
    let mut buffer = vec![0u8; usize::try_from(window).unwrap_or(0)];
    let span = u128::from(size - window);
    for k in 0..PARTIAL_WINDOWS {
        go_on()?;
        let offset = span * u128::from(k) / u128::from(PARTIAL_WINDOWS - 1);
        let offset = u64::try_from(offset).unwrap_or(size - window);
        file.read_exact_at(&mut buffer, offset)?;
        hasher.update(&buffer);
    }
    Ok(format!(
        "{PARTIAL_PREFIX}{}",
        hex::encode(hasher.finalize())
    ))
}

/// The parts of a shapefile whose edits change what the layer says.
const SHAPEFILE_PARTS: [&str; 4] = ["shx", "dbf", "prj", "cpg"];

/// The store files a call's record is appended to, opened before the call ran
/// ([`LineageStore::open_for_append`]).
pub struct Appenders {
    records: std::fs::File,
    paths: std::fs::File,
    ledger: std::fs::File,
}

/// What is wrong with the ledger, without the path a [`LineageError`] names already.
fn ledger_problem(error: super::ledger::LedgerError) -> String {
    match error {
        super::ledger::LedgerError::Io { source, .. } => source.to_string(),
        super::ledger::LedgerError::Invalid { message, .. } => message,
    }
}

/// The store's lineage folder.
#[derive(Clone)]
pub struct LineageStore {
    root: PathBuf,
    ledger: Arc<Ledger>,
    digests: Arc<Mutex<HashMap<PathBuf, (Stamp, String)>>>,
    records: Arc<Journal>,
    paths: Arc<Journal>,
}

/// The output digests a record line answers for, and a [`size_key`] for each output's size
/// (`size:unknown` for an output recorded without one), so that a file whose size no record
/// wrote is known to have no record without hashing it ([`LineageStore::may_have_record`]).
fn record_keys(line: &str) -> Vec<String> {
    #[derive(Deserialize)]
    struct Output {
        sha256: Option<String>,
        #[serde(default)]
        size: Option<u64>,
    }
    #[derive(Deserialize)]
    struct Outputs {
        outputs: Vec<Output>,
    }
    let Ok(record) = serde_json::from_str::<Outputs>(line) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for output in record.outputs {
        if let Some(digest) = output.sha256 {
            keys.push(digest);
            keys.push(match output.size {
                Some(size) => size_key(size),
                None => UNKNOWN_SIZE_KEY.to_string(),
            });
        }
    }
    keys
}

/// The index key of the records of outputs of `size` bytes (never a digest: digests are hex).
fn size_key(size: u64) -> String {
    format!("size:{size}")
}

/// The index key of records with an output of unrecorded size.
const UNKNOWN_SIZE_KEY: &str = "size:unknown";

/// A record line read back, if it is a readable record of this format.
fn parse_record(sha256: &str, line: &str) -> Option<Record> {
    match serde_json::from_str::<Record>(line) {
        Ok(record) if record.format == FORMAT => Some(record),
        Ok(_) => {
            tracing::warn!("ignoring a lineage record of another format for {sha256}");
            None
        }
        Err(e) => {
            tracing::warn!("ignoring an unreadable lineage record for {sha256}: {e}");
            None
        }
    }
}

/// What the server wrote at a path.
#[derive(Debug, Serialize, Deserialize)]
struct Written {
    path: String,
    sha256: String,
}

fn path_keys(line: &str) -> Vec<String> {
    serde_json::from_str::<Written>(line)
        .map(|w| vec![w.path])
        .unwrap_or_default()
}

impl LineageStore {
    /// The lineage of the store at `store_root`, sealed under a key that lives only in this
    /// process (tests and benchmarks; the server uses [`Self::with_seal`]).
    pub fn new(store_root: &Path) -> Self {
        Self::with_seal(store_root, Arc::new(Seal::ephemeral()))
    }

    /// The lineage of the store at `store_root`, sealed under `seal`.
    pub fn with_seal(store_root: &Path, seal: Arc<Seal>) -> Self {
        let root = store_root.join(DIR);
        Self {
            records: Arc::new(Journal::new(
                store_root,
                &[DIR, "records.jsonl"],
                record_keys,
                seal.clone(),
                Kind::LineageRecord,
            )),
            paths: Arc::new(Journal::new(
                store_root,
                &[DIR, "paths.jsonl"],
                path_keys,
                seal.clone(),
                Kind::WrittenPath,
            )),
            root,
            ledger: Arc::new(Ledger::with_seal(store_root, seal)),
            digests: Arc::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// SHA-256 of one file (a partial digest above the hashing budget), memoised by file
    /// version. A file that changed while it was read is hashed but not memoised.
    pub fn file_digest(&self, path: &Path) -> std::io::Result<String> {
        self.file_digest_until(path, &|| false)
    }

    /// [`Self::file_digest`], stopped (an error) as soon as `stop` says so.
    pub fn file_digest_until(
        &self,
        path: &Path,
        stop: &dyn Fn() -> bool,
    ) -> std::io::Result<String> {
        let meta = std::fs::symlink_metadata(path)?;
        let now = stamp::of(&meta);
        if let Some(hit) = self.digests.lock().ok().and_then(|m| {
            m.get(path)
                .filter(|(s, _)| *s == now)
                .map(|(_, d)| d.clone())
        }) {
            return Ok(hit);
        }
        let (digest, before, after) = hash_file(path, stop)?;
        if before == after {
            if let Ok(mut memo) = self.digests.lock() {
                if memo.len() >= MEMO_ENTRIES {
                    memo.clear();
                }
                memo.insert(path.to_path_buf(), (after, digest.clone()));
            }
        }
        Ok(digest)
    }

    /// The digest that identifies a dataset: its file's, or for a shapefile, the digest of its
    /// parts' digests (an edit of the `.dbf` alone is an edit of the layer).
    pub fn dataset_digest(&self, path: &Path) -> std::io::Result<String> {
        self.dataset_digest_until(path, &|| false)
    }

    /// [`Self::dataset_digest`], stopped (an error) as soon as `stop` says so.
    pub fn dataset_digest_until(
        &self,
        path: &Path,
        stop: &dyn Fn() -> bool,
    ) -> std::io::Result<String> {
        let main = self.file_digest_until(path, stop)?;
        let is_shapefile = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("shp"));
        if !is_shapefile {
            return Ok(main);
        }
        let mut combined = Sha256::new();
        combined.update(format!("shp {main}\n"));
        // Partial when any part's digest is.
        let mut partial = is_partial(&main);
        for part in SHAPEFILE_PARTS {
            let sibling = path.with_extension(part);
            match self.file_digest_until(&sibling, stop) {
                Ok(digest) => {
                    partial |= is_partial(&digest);
                    combined.update(format!("{part} {digest}\n"));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let label = if partial { PARTIAL_PREFIX } else { "" };
        Ok(format!("{label}{}", hex::encode(combined.finalize())))
    }

    /// The record of the call that last wrote content `sha256`, if one exists and is readable.
    pub fn record(&self, sha256: &str) -> Option<Record> {
        let line = self.records.get(&sha256.to_ascii_lowercase())?;
        parse_record(sha256, &line)
    }

    /// Every readable record of a call that wrote content `sha256`, oldest first: the same
    /// content made twice (a byte-identical conversion, or two routes to the same bytes) has
    /// a record for each, and none may hide another (attack round 7, R7-12).
    pub fn records(&self, sha256: &str) -> Vec<Record> {
        let mut lines = self.records.get_all(&sha256.to_ascii_lowercase());
        lines.dedup();
        lines
            .iter()
            .filter_map(|line| parse_record(sha256, line))
            .collect()
    }

    /// The content the server last wrote at `path`, if it wrote there.
    fn written_at(&self, path: &Path) -> Option<String> {
        let line = self.paths.get(&path.display().to_string())?;
        serde_json::from_str::<Written>(&line)
            .ok()
            .map(|w| w.sha256)
    }

    /// An input as a record names it: its digest, whether a record exists for that content,
    /// and whether the server wrote this path with other content (modified outside).
    pub fn input(&self, role: &str, path: &Path) -> FileRef {
        match self.input_until(role, path, &|| false) {
            Ok(file) => file,
            // Never stopped: `input_until` fails only when asked to stop.
            Err(_) => FileRef {
                role: role.to_string(),
                path: path.display().to_string(),
                sha256: None,
                size: None,
                recorded: false,
                modified_outside: false,
                written_sha256: None,
            },
        }
    }

    /// [`Self::input`], whose hashing stops between chunks as soon as `stop` says so (the
    /// client cancelled a gated call while its inputs were hashed: issue 21). Fails only then;
    /// any other hashing failure leaves the input unhashed, as [`Self::input`] does.
    pub fn input_until(
        &self,
        role: &str,
        path: &Path,
        stop: &dyn Fn() -> bool,
    ) -> std::io::Result<FileRef> {
        let sha256 = match self.dataset_digest_until(path, stop) {
            Ok(digest) => Some(digest),
            Err(e) if stop() => return Err(e),
            Err(e) => {
                tracing::debug!(path = %path.display(), "not hashed for lineage: {e}");
                None
            }
        };
        let recorded = sha256.as_deref().is_some_and(|d| self.records.contains(d));
        let written = match (&sha256, recorded) {
            (Some(_), false) => self.written_at(path),
            _ => None,
        };
        // Modified outside: the server wrote other content here (an edit), or wrote this very
        // content but its record no longer verifies (the lineage was tampered with).
        let modified_outside = written.is_some();
        let written_sha256 = written.filter(|w| Some(w) != sha256.as_ref());
        Ok(FileRef {
            role: role.to_string(),
            path: path.display().to_string(),
            sha256,
            size: std::fs::metadata(path).ok().map(|m| m.len()),
            recorded,
            modified_outside,
            written_sha256,
        })
    }

    /// Whether the file at `path`, of `size` bytes, can have lineage: some record wrote an
    /// output of that size (or of a size not recorded), or the server wrote at that path (a
    /// file modified outside is described by what the server wrote). `false` is exact: no
    /// record can be filed under the digest of a file whose size no record wrote, so such a
    /// file is original data without being hashed (the sources of a VRT, which may be a
    /// mosaic of thousands of tiles: attack round 10, R10-2).
    pub fn may_have_record(&self, path: &Path, size: u64) -> bool {
        self.records.contains(&size_key(size))
            || self.records.contains(UNKNOWN_SIZE_KEY)
            || self.written_at(path).is_some()
    }

    /// How the dataset at `path` was made: its steps, nearest first (breadth first through the
    /// inputs' records, each record once, at most [`MAX_STEPS`]).
    pub fn upstream(&self, path: &Path) -> DatasetLineage {
        self.upstream_of(&self.input("input", path))
    }

    /// [`Self::upstream`] of a file already named by [`Self::input`].
    pub fn upstream_of(&self, file: &FileRef) -> DatasetLineage {
        let mut lineage = DatasetLineage {
            sha256: file.sha256.clone(),
            modified_since: file.modified_outside,
            steps: Vec::new(),
        };
        // A file modified outside the server is described by what the server last wrote
        // there: the edit cannot undo what those steps did to its cells.
        let start = if file.modified_outside {
            file.written_sha256.as_ref()
        } else {
            file.sha256.as_ref()
        };
        let Some(start) = start else {
            return lineage;
        };
        let walk = self.walk_full(start);
        for (depth, record, copy, _) in &walk.records {
            if !copy {
                lineage.steps.push(record.step(*depth));
            }
        }
        // What the records carry from further up than the walk read (R8-9).
        let beyond = Self::beyond_walk(&walk);
        for mark in &beyond.marks {
            lineage.steps.push(mark.step(mark.depth));
        }
        if beyond.unknown {
            let deepest = lineage.steps.iter().map(|s| s.depth).max().unwrap_or(0);
            lineage.steps.push(unknown_step(deepest + 1));
        }
        lineage
    }

    /// What lies upstream of content `sha256` beyond the steps its walk reads
    /// ([`Self::walk`]): the marks its records carry from further up, and whether the walk
    /// was cut where no record could vouch for the rest (unknown upstream).
    pub fn beyond(&self, sha256: &str) -> Beyond {
        Self::beyond_walk(&self.walk_full(sha256))
    }

    fn beyond_walk(walk: &Walk) -> Beyond {
        let read: BTreeSet<(&str, &str)> = walk
            .records
            .iter()
            .map(|(_, r, _, d)| (d.as_str(), r.tool.as_str()))
            .collect();
        let mut beyond = Carry::default();
        for (depth, record, _, _) in &walk.records {
            for mark in &record.carried.marks {
                if !read.contains(&(mark.sha256.as_str(), mark.tool.as_str())) {
                    beyond.add(Carried {
                        depth: depth + mark.depth,
                        ..mark.clone()
                    });
                }
            }
        }
        beyond.marks.sort_by_key(|m| m.depth);
        Beyond {
            marks: beyond.marks,
            unknown: walk.cut && !Self::vouched(walk),
        }
    }

    /// Whether the nearest records of a walk carry complete marks (so a cut walk's beyond is
    /// known through them).
    fn vouched(walk: &Walk) -> bool {
        let nearest: Vec<_> = walk.records.iter().filter(|(d, ..)| *d == 1).collect();
        !nearest.is_empty() && nearest.iter().all(|(_, r, ..)| r.carried.complete)
    }

    /// The marks of content `sha256`'s whole upstream, as a record reading it carries them:
    /// its walk's own marks and the marks its records carry, each one step further up
    /// (1 = the step that made the content); complete when the walk ended, or was cut below
    /// records whose marks are complete. A content with no record is original data (complete,
    /// nothing upstream).
    pub fn carry_of(&self, sha256: &str) -> Carry {
        let walk = self.walk_full(sha256);
        let mut carry = Carry {
            complete: !walk.cut || Self::vouched(&walk),
            marks: Vec::new(),
        };
        for (depth, record, copy, digest) in &walk.records {
            if !copy {
                if let Some(mark) = own_mark(record, digest, *depth) {
                    carry.add(mark);
                }
            }
            for mark in &record.carried.marks {
                carry.add(Carried {
                    depth: depth + mark.depth,
                    ..mark.clone()
                });
            }
        }
        carry
    }

    /// The carry of a record reading `inputs`: every input's [`Self::carry_of`], merged;
    /// incomplete when an input could not be hashed or its lineage no longer verifies.
    pub fn carry_of_inputs(&self, inputs: &[FileRef]) -> Carry {
        let mut carry = Carry {
            complete: true,
            marks: Vec::new(),
        };
        for input in inputs {
            let followed = if input.modified_outside {
                input.written_sha256.as_ref()
            } else {
                input.sha256.as_ref()
            };
            let Some(digest) = followed else {
                // Not hashed, or written by the server with a record that no longer verifies.
                carry.complete = false;
                continue;
            };
            let of = self.carry_of(digest);
            carry.complete &= of.complete;
            for mark in of.marks {
                carry.add(mark);
            }
        }
        carry
    }

    /// The records that made content `sha256`, breadth first, with their depth (1 = the
    /// records of `sha256` itself).
    ///
    /// Every record of a content is walked, oldest first, not only the newest: a
    /// byte-identical conversion writes a second record for the same content, whose input is
    /// that content again, and answering with it alone dropped the resampling that made the
    /// content (attack round 7, R7-12: one lossless `raster_convert` laundered
    /// `upstream_interpolated_classes`). A copy (a record whose every input has the content
    /// it wrote) adds no upstream, so one copy per content is listed, and repeated copies
    /// cannot push the steps that made the content past [`MAX_STEPS`].
    pub fn walk(&self, sha256: &str) -> Vec<(u32, Record)> {
        self.walk_marking_copies(sha256)
            .into_iter()
            .map(|(depth, record, _)| (depth, record))
            .collect()
    }

    /// [`Self::walk`], each record marked `true` when it is a copy of the content it was found
    /// under (every input had the content it wrote). A copy changed no value, so it adds no
    /// step to what a domain sees upstream: an ungated nearest `raster_resample` at the
    /// raster's own cell size writes the very bytes it read, and its record, filed under the
    /// original's content, made an untouched DEM look interpolated, refused by the operator's
    /// rule on `upstream_interpolation` (attack round 8, R8-2).
    pub fn walk_marking_copies(&self, sha256: &str) -> Vec<(u32, Record, bool)> {
        self.walk_full(sha256)
            .records
            .into_iter()
            .map(|(depth, record, copy, _)| (depth, record, copy))
            .collect()
    }

    /// [`Self::walk_marking_copies`] with the digest each record was found under, and whether
    /// the limit ([`max_steps`]) cut the walk short.
    fn walk_full(&self, sha256: &str) -> Walk {
        let limit = max_steps();
        let mut cut = false;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut queue: VecDeque<(u32, String)> = VecDeque::from([(1, sha256.to_string())]);
        let mut out = Vec::new();
        // Through an input modified outside the server, to what the server wrote.
        let followed = |input: &FileRef| {
            if input.modified_outside {
                input.written_sha256.clone().or(input.sha256.clone())
            } else {
                input.sha256.clone()
            }
        };
        while let Some((depth, digest)) = queue.pop_front() {
            if seen.contains(&digest) {
                continue;
            }
            if out.len() >= limit {
                cut |= !self.records(&digest).is_empty();
                if cut {
                    break;
                }
                continue;
            }
            seen.insert(digest.clone());
            let mut copy_listed = false;
            for record in self.records(&digest) {
                if out.len() >= limit {
                    cut = true;
                    break;
                }
                let copy = !record.inputs.is_empty()
                    && record
                        .inputs
                        .iter()
                        .all(|i| followed(i).as_deref() == Some(digest.as_str()));
                if copy {
                    if copy_listed {
                        continue;
                    }
                    copy_listed = true;
                }
                for input in &record.inputs {
                    if let Some(d) = followed(input) {
                        queue.push_back((depth + 1, d));
                    }
                }
                out.push((depth, record, copy, digest.clone()));
            }
        }
        Walk { records: out, cut }
    }

    /// Open every store file a call's record is appended to (`lineage/records.jsonl`,
    /// `lineage/paths.jsonl`, `ledger.jsonl`), creating what is absent, as the store opens its
    /// files: a gated call does this before anything is decided or written, so a store file
    /// planted as a folder, a FIFO or a link (or a ledger whose last line nothing can chain
    /// to) refuses the call instead of silently losing its record (attack round 4, B6).
    pub fn open_for_append(&self) -> Result<Appenders, LineageError> {
        self.ensure_folder()?;
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| LineageError::Io { path, source }
        };
        Ok(Appenders {
            records: self
                .records
                .open_for_append()
                .map_err(io(self.records.path()))?,
            paths: self
                .paths
                .open_for_append()
                .map_err(io(self.paths.path()))?,
            ledger: self
                .ledger
                .open_for_append()
                .map_err(|e| LineageError::Invalid {
                    path: self.ledger.path().display().to_string(),
                    message: ledger_problem(e),
                })?,
        })
    }

    /// Hash the outputs of a finished call and write its record under each output's digest,
    /// the path index for each output, and a ledger entry per record. Returns the
    /// `lineage://` URI of each output recorded.
    pub fn write(&self, record: Record) -> Result<Vec<String>, LineageError> {
        let mut appenders = self.open_for_append()?;
        self.write_with(record, &mut appenders)
    }

    /// [`Self::write`] through store files opened before the call ran.
    pub fn write_with(
        &self,
        mut record: Record,
        appenders: &mut Appenders,
    ) -> Result<Vec<String>, LineageError> {
        let mut uris = Vec::new();
        for output in &mut record.outputs {
            let path = PathBuf::from(&output.path);
            match self.dataset_digest(&path) {
                Ok(digest) => {
                    output.size = std::fs::metadata(&path).ok().map(|m| m.len());
                    output.sha256 = Some(digest);
                }
                Err(e) => {
                    tracing::debug!(path = %path.display(), "output not hashed: {e}");
                }
            }
        }
        record.outputs.retain(|o| o.sha256.is_some());
        if record.outputs.is_empty() {
            return Ok(uris);
        }
        // The marks of the inputs' whole upstream, so that no walk's limit can drop them
        // (attack round 8, R8-9).
        record.carried = self.carry_of_inputs(&record.inputs);
        let text = serde_json::to_string(&record).map_err(|e| LineageError::Invalid {
            path: self.root.display().to_string(),
            message: e.to_string(),
        })?;
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| LineageError::Io { path, source }
        };
        self.records
            .append_to(&mut appenders.records, &text)
            .map_err(io(self.records.path()))?;
        let record_sha = hex::encode(Sha256::digest(text.as_bytes()));
        for output in &record.outputs {
            let Some(digest) = &output.sha256 else {
                continue;
            };
            let output_path = Path::new(&output.path);
            if self.written_at(output_path).as_deref() != Some(digest.as_str()) {
                let written = serde_json::to_string(&Written {
                    path: output.path.clone(),
                    sha256: digest.clone(),
                })
                .map_err(|e| LineageError::Invalid {
                    path: output.path.clone(),
                    message: e.to_string(),
                })?;
                self.paths
                    .append_to(&mut appenders.paths, &written)
                    .map_err(io(self.paths.path()))?;
            }
            let entry = serde_json::json!({
                "tool": record.tool,
                "output": digest,
                "record_sha256": record_sha,
            });
            self.ledger
                .append_to(&mut appenders.ledger, "lineage", &entry)
                .map_err(|e| LineageError::Invalid {
                    path: self.ledger.path().display().to_string(),
                    message: ledger_problem(e),
                })?;
            uris.push(uri(digest));
        }
        Ok(uris)
    }

    /// The store and its lineage folder exist and are real folders, not links.
    fn ensure_folder(&self) -> Result<(), LineageError> {
        let store = self.root.parent().unwrap_or(&self.root).to_path_buf();
        for dir in [store, self.root.clone()] {
            match std::fs::symlink_metadata(&dir) {
                Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {}
                Ok(_) => {
                    return Err(LineageError::Invalid {
                        path: dir.display().to_string(),
                        message: "not a real folder (a link?); the store must be a real folder"
                            .to_string(),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&dir).map_err(|source| LineageError::Io {
                        path: dir.display().to_string(),
                        source,
                    })?;
                }
                Err(source) => {
                    return Err(LineageError::Io {
                        path: dir.display().to_string(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Regression (issue 21): JPEG 2000 with its defaults and WebP at quality 100 were recorded
    /// as not lossy, so the next step's `second_lossy_encoding` never fired. The host's
    /// encoding fact decides.
    #[test]
    fn the_host_encoding_fact_decides_what_is_recorded_as_lossy() {
        use crate::gdal::facts::encoding::{for_call, Written};
        let written = Written {
            types: vec!["Byte".to_string(); 3],
            single_band_palette: false,
            ..Default::default()
        };
        let with_fact = |arguments: Value| {
            let declared = crate::server::registry::find("raster_convert")
                .and_then(|spec| spec.raster_output)
                .unwrap();
            for_call(&declared, &arguments, &written)
                .unwrap()
                .lineage_label()
        };
        assert_eq!(
            with_fact(json!({"format": "JP2OpenJPEG"})).as_deref(),
            Some("JPEG2000 quality 25")
        );
        assert_eq!(
            with_fact(json!({"format": "JP2OpenJPEG",
                             "creation_options": {"REVERSIBLE": "YES", "QUALITY": "100"}})),
            None
        );
        assert_eq!(
            with_fact(json!({"format": "WEBP", "quality": 100})).as_deref(),
            Some("WEBP quality 100")
        );
        assert_eq!(
            with_fact(json!({"format": "WEBP", "creation_options": {"LOSSLESS": "TRUE"}})),
            None
        );
    }

    /// A record of `tool` reading `inputs` (role, path) and writing `output`, with `summary`.
    fn record_of(tool: &str, store: &LineageStore, inputs: &[&Path], output: &Path) -> Record {
        Record {
            format: FORMAT.to_string(),
            tool: tool.to_string(),
            verb: String::new(),
            arguments: json!({}),
            commands: Vec::new(),
            computation: None,
            inputs: inputs.iter().map(|p| store.input("input", p)).collect(),
            outputs: vec![FileRef {
                role: "output".to_string(),
                path: output.display().to_string(),
                sha256: None,
                size: None,
                recorded: false,
                modified_outside: false,
                written_sha256: None,
            }],
            summary: StepSummary::default(),
            versions: Versions {
                gdal_mcp: "t".to_string(),
                gdal: "t".to_string(),
                proj: "t".to_string(),
            },
            plugins: Vec::new(),
            receipts: Vec::new(),
            capsules: Vec::new(),
            upstream_capsules: Vec::new(),
            carried: Carry::default(),
            started_at: "2026-11-27T00:00:00Z".to_string(),
            finished_at: "2026-11-27T00:00:00Z".to_string(),
        }
    }

    /// Regression (attack round 7, R7-12): a byte-identical `raster_convert` wrote a second
    /// record for the resampled content, whose input is that content again; the walk answered
    /// with the newest record only and stopped at the self-reference, so the bilinear
    /// resampling vanished from the upstream facts (and `upstream_interpolated_classes` with
    /// it). Every record of a content is walked; 70 more copies cannot push it out either.
    #[test]
    fn r7_12_a_byte_identical_copy_does_not_launder_the_resampling() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let source = dir.path().join("classes.tif");
        let resampled = dir.path().join("r.tif");
        std::fs::write(&source, b"classes").unwrap();
        std::fs::write(&resampled, b"resampled classes").unwrap();
        let mut resample = record_of("raster_resample", &store, &[&source], &resampled);
        resample.summary.resampling = Some("bilinear".to_string());
        store.write(resample).unwrap();
        // Clean twin: one record, one step.
        let before = store.upstream(&resampled);
        assert_eq!(before.steps.len(), 1);
        assert_eq!(before.steps[0].resampling.as_deref(), Some("bilinear"));

        for i in 0..70 {
            let copy = dir.path().join(format!("copy{i}.tif"));
            std::fs::write(&copy, b"resampled classes").unwrap();
            store
                .write(record_of("raster_convert", &store, &[&resampled], &copy))
                .unwrap();
        }
        let after = store.upstream(&resampled);
        let tools: Vec<_> = after
            .steps
            .iter()
            .map(|s| (s.depth, s.tool.as_str()))
            .collect();
        // The copies changed no value: they add no step (attack round 8, R8-2).
        assert_eq!(tools, [(1, "raster_resample")]);
        assert_eq!(after.steps[0].resampling.as_deref(), Some("bilinear"));
        // A copy of the copy (another path, same content) has the same upstream.
        let last = dir.path().join("copy69.tif");
        assert_eq!(store.upstream(&last).steps.len(), 1);
        // The newest record still answers `record` (the lineage:// resource's JSON).
        assert_eq!(
            store
                .record(&store.dataset_digest(&resampled).unwrap())
                .unwrap()
                .tool,
            "raster_convert"
        );
    }

    /// A chain: `first` written from `source`, then `n` value-keeping steps each writing new
    /// content from the one before; returns the last file.
    fn chain(store: &LineageStore, dir: &Path, from: &Path, n: usize) -> PathBuf {
        let mut previous = from.to_path_buf();
        for i in 1..=n {
            let next = dir.join(format!("s{i}.tif"));
            std::fs::write(&next, format!("step {i}")).unwrap();
            store
                .write(record_of("raster_calc", store, &[&previous], &next))
                .unwrap();
            previous = next;
        }
        previous
    }

    fn interpolating(lineage: &DatasetLineage) -> Vec<(u32, String, String)> {
        lineage
            .steps
            .iter()
            .filter(|s| s.resampling.is_some())
            .map(|s| {
                (
                    s.depth,
                    s.tool.clone(),
                    s.resampling.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Regression, attack round 8, R8-9: the walk reads 64 steps, so after a bilinear
    /// resampling 64 value-keeping `raster_calc` steps hid it (and the operator's rule on
    /// `upstream_interpolation` no longer fired). Every record carries its inputs' marks: the
    /// nearest record says it, with the capsule that justified it, however far up.
    #[test]
    fn r8_9_an_interpolation_past_the_walks_limit_is_still_upstream() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let dem = dir.path().join("dem.tif");
        let s0 = dir.path().join("s0.tif");
        std::fs::write(&dem, b"dem").unwrap();
        std::fs::write(&s0, b"bilinear dem").unwrap();
        let mut resample = record_of("raster_resample", &store, &[&dem], &s0);
        resample.summary.resampling = Some("bilinear".to_string());
        resample.capsules = vec!["justification://resampling/abc".to_string()];
        store.write(resample).unwrap();
        for n in [1, 63, 64, 66] {
            let sub = dir.path().join(format!("c{n}"));
            std::fs::create_dir(&sub).unwrap();
            let last = chain(&store, &sub, &s0, n);
            let lineage = store.upstream(&last);
            assert_eq!(
                interpolating(&lineage),
                [(
                    n as u32 + 1,
                    "raster_resample".to_string(),
                    "bilinear".to_string()
                )],
                "after {n} steps"
            );
            let bilinear = lineage
                .steps
                .iter()
                .find(|s| s.resampling.is_some())
                .unwrap();
            assert_eq!(bilinear.capsules, ["justification://resampling/abc"]);
            assert!(
                lineage.steps.len() <= MAX_STEPS + 1,
                "{}",
                lineage.steps.len()
            );
        }
        // The record of the last step says it itself.
        let last = dir.path().join("c66").join("s66.tif");
        let record = store.record(&store.dataset_digest(&last).unwrap()).unwrap();
        assert!(record.carried.complete);
        assert_eq!(record.carried.marks.len(), 1);
        assert_eq!(record.carried.marks[0].depth, 66);
        // The methods section lists the nearest 64 steps and names the resampling beyond.
        let report = super::super::provenance::report_for_digest(
            &store,
            &super::super::store::CapsuleStore::new(dir.path().to_path_buf()),
            &store.dataset_digest(&last).unwrap(),
            Some(&last),
            false,
            super::super::provenance::Format::Markdown,
        );
        assert_eq!(report.steps, MAX_STEPS);
        assert!(
            report.report.contains("## Further upstream"),
            "{}",
            report.report
        );
        assert!(
            report
                .report
                .contains("`raster_resample`, 67 steps up: resampling with bilinear"),
            "{}",
            report.report
        );
    }

    /// Attack round 8 (observation): `gdal-mcp provenance` printed a line feed in a file name
    /// raw, so a name holding `\n` started Markdown lines of the agent's choosing. Every
    /// string from the agent or the data is escaped in the report; the twin, an accented
    /// name, is shown as it is.
    #[test]
    fn r8_provenance_escapes_line_feeds_in_names_and_parameters() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let input = dir.path().join("a\nTool: raster_info\n\u{202e}.tif");
        let output = dir.path().join("Höhen.tif");
        std::fs::write(&input, b"in").unwrap();
        std::fs::write(&output, b"out").unwrap();
        let mut record = record_of("raster_calc", &store, &[&input], &output);
        record.arguments = json!({"expression": "a\n# Forged heading"});
        store.write(record).unwrap();
        let report = super::super::provenance::report_for_digest(
            &store,
            &super::super::store::CapsuleStore::new(dir.path().to_path_buf()),
            &store.dataset_digest(&output).unwrap(),
            Some(&output),
            false,
            super::super::provenance::Format::Markdown,
        )
        .report;
        assert!(
            !report
                .lines()
                .any(|l| l.starts_with("Tool:") || l.starts_with("# Forged")),
            "{report}"
        );
        assert!(
            report.contains("a\\u{a}Tool: raster_info\\u{a}\\u{202e}.tif"),
            "{report}"
        );
        assert!(report.contains("# Methods: Höhen.tif"), "{report}");
        assert!(report.contains("a\\u{a}# Forged heading"), "{report}");
    }

    /// R8-9's clean twin: 70 value-keeping steps from an original DEM carry no mark, and the
    /// cut walk adds nothing (its nearest record vouches for what lies beyond).
    #[test]
    fn r8_9_clean_twin_a_long_chain_without_interpolation_stays_clean() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let dem = dir.path().join("dem.tif");
        std::fs::write(&dem, b"dem").unwrap();
        let last = chain(&store, dir.path(), &dem, 70);
        let lineage = store.upstream(&last);
        assert_eq!(lineage.steps.len(), MAX_STEPS);
        assert!(interpolating(&lineage).is_empty());
        assert!(lineage.steps.iter().all(|s| s.tool == "raster_calc"));
        let record = store.record(&store.dataset_digest(&last).unwrap()).unwrap();
        assert_eq!(
            record.carried,
            Carry {
                complete: true,
                marks: Vec::new()
            }
        );
    }

    /// A walk cut at its limit below records written before marks were carried (an older
    /// store) cannot know what lies beyond: it adds one step of unknown upstream, which every
    /// reader takes as interpolating and lossy. Under the limit, such records are read whole.
    #[test]
    fn r8_9_a_cut_walk_over_records_without_marks_is_unknown_upstream() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        store.ensure_folder().unwrap();
        let mut previous = dir.path().join("dem.tif");
        std::fs::write(&previous, b"dem").unwrap();
        let mut files = Vec::new();
        for i in 1..=70 {
            let next = dir.path().join(format!("old{i}.tif"));
            std::fs::write(&next, format!("old step {i}")).unwrap();
            let mut record = record_of("raster_calc", &store, &[&previous], &next);
            record.outputs[0].sha256 = Some(store.dataset_digest(&next).unwrap());
            // As an earlier gdal-mcp wrote it: no carry.
            store
                .records
                .append(&serde_json::to_string(&record).unwrap())
                .unwrap();
            files.push(next.clone());
            previous = next;
        }
        let short = store.upstream(&files[9]);
        assert_eq!(short.steps.len(), 10);
        assert!(interpolating(&short).is_empty(), "an uncut walk is whole");
        let long = store.upstream(&files[69]);
        let unknown = interpolating(&long);
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        assert_eq!(unknown[0].1, UNKNOWN_TOOL);
        assert_eq!(unknown[0].0, MAX_STEPS as u32 + 1);
        assert!(unknown[0].2.starts_with("unknown"), "{unknown:?}");
        // A new step on top of it carries "incomplete"; on top of a short old chain, complete.
        let next = dir.path().join("new.tif");
        std::fs::write(&next, b"new").unwrap();
        store
            .write(record_of("raster_calc", &store, &[&files[69]], &next))
            .unwrap();
        let record = store.record(&store.dataset_digest(&next).unwrap()).unwrap();
        assert!(!record.carried.complete);
        assert_eq!(interpolating(&store.upstream(&next)).len(), 1);
        let fresh = dir.path().join("fresh.tif");
        std::fs::write(&fresh, b"fresh").unwrap();
        store
            .write(record_of("raster_calc", &store, &[&files[9]], &fresh))
            .unwrap();
        let record = store
            .record(&store.dataset_digest(&fresh).unwrap())
            .unwrap();
        assert!(record.carried.complete);
    }

    /// Regression (attack round 8, R8-2): a nearest `raster_resample` at the raster's own cell
    /// size writes the very bytes it read; its record, filed under the original's content,
    /// made the untouched original look resampled (and an operator's rule on upstream
    /// interpolation refused it). A record that wrote the content it read adds no step; the
    /// twin, a resampling that wrote other bytes, is a step of its output.
    #[test]
    fn r8_2_a_step_that_wrote_the_bytes_it_read_adds_no_upstream_step() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let original = dir.path().join("dem.tif");
        let same = dir.path().join("near.tif");
        let other = dir.path().join("bil.tif");
        std::fs::write(&original, b"dem").unwrap();
        std::fs::write(&same, b"dem").unwrap();
        std::fs::write(&other, b"smoothed dem").unwrap();
        let mut identity = record_of("raster_resample", &store, &[&original], &same);
        identity.summary.resampling = Some("bilinear".to_string());
        store.write(identity).unwrap();
        assert!(store.upstream(&original).steps.is_empty());
        assert!(store.upstream(&same).steps.is_empty());
        let mut resample = record_of("raster_resample", &store, &[&original], &other);
        resample.summary.resampling = Some("bilinear".to_string());
        store.write(resample).unwrap();
        assert_eq!(store.upstream(&other).steps.len(), 1);
    }

    /// R10-2's filter: a file whose size no record wrote, at a path the server never wrote,
    /// cannot have a record and is not hashed; the output itself, a byte-identical copy of it
    /// elsewhere, and an edit at the path the server wrote all may have one.
    #[test]
    fn r10_2_only_files_a_record_could_name_may_have_lineage() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(&dir.path().join("store"));
        let input = dir.path().join("in.tif");
        let output = dir.path().join("out.tif");
        std::fs::write(&input, b"original data").unwrap();
        std::fs::write(&output, b"resampled").unwrap();
        let size = |p: &Path| std::fs::metadata(p).unwrap().len();
        assert!(!store.may_have_record(&output, size(&output)));
        store
            .write(record_of("raster_resample", &store, &[&input], &output))
            .unwrap();
        assert!(store.may_have_record(&output, size(&output)));
        let copy = dir.path().join("copy.tif");
        std::fs::copy(&output, &copy).unwrap();
        assert!(store.may_have_record(&copy, size(&copy)));
        assert!(
            !store.may_have_record(&input, size(&input)),
            "original data of another size"
        );
        std::fs::write(&output, b"edited outside the server").unwrap();
        assert!(store.may_have_record(&output, size(&output)));
    }

    #[test]
    fn a_digest_is_memoised_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let file = dir.path().join("a.bin");
        std::fs::write(&file, b"abc").unwrap();
        let first = store.file_digest(&file).unwrap();
        assert_eq!(
            first,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        std::fs::write(&file, b"abd").unwrap();
        assert_ne!(store.file_digest(&file).unwrap(), first);
    }

    #[test]
    fn a_shapefile_digest_changes_when_only_its_dbf_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = LineageStore::new(dir.path());
        let shp = dir.path().join("a.shp");
        std::fs::write(&shp, b"shape").unwrap();
        std::fs::write(dir.path().join("a.dbf"), b"attributes").unwrap();
        let before = store.dataset_digest(&shp).unwrap();
        std::fs::write(dir.path().join("a.dbf"), b"attributez").unwrap();
        assert_ne!(store.dataset_digest(&shp).unwrap(), before);
    }

    /// The partial digest of a file of `size` zero bytes, computed independently: the
    /// header, then 16 windows of zeros.
    fn zeros_partial(size: u64) -> String {
        let window = PARTIAL_WINDOW.min(size);
        let mut hasher = Sha256::new();
        hasher.update(format!(
            "gdal-mcp partial digest 1\nsize {size}\nwindows 16 of {window} bytes, evenly \
             spaced from the first byte to the last\n"
        ));
        let zeros = vec![0u8; window as usize];
        for _ in 0..16 {
            hasher.update(&zeros);
        }
        format!("partial-sha256:{}", hex::encode(hasher.finalize()))
    }

    /// Regression (issue 21): a sparse 64 GiB file was hashed whole (a minute of the read
    /// tools' slots per call). Above the byte budget it gets the labelled partial digest, which
    /// reads 16 MiB: known by construction for a file of zeros.
    #[test]
    fn a_file_above_the_budget_gets_a_labelled_partial_digest() {
        let dir = tempfile::tempdir().unwrap();
        let sparse = dir.path().join("sparse.bin");
        let file = std::fs::File::create(&sparse).unwrap();
        file.set_len(64 << 30).unwrap();
        drop(file);
        let (digest, before, after) = hash_file(&sparse, &|| false).unwrap();
        assert!(is_partial(&digest), "{digest}");
        assert_eq!(digest, zeros_partial(64 << 30));
        assert_eq!(before, after);
        let store = LineageStore::new(dir.path());
        assert_eq!(store.dataset_digest(&sparse).unwrap(), digest);
        assert_eq!(
            parse_digest(&digest.to_ascii_uppercase()),
            Some(digest.clone())
        );
    }

    /// At the budget a file is hashed whole (its SHA-256); one byte above, partially. A
    /// partial digest changes with the size and with a byte in a window.
    #[test]
    fn the_byte_budget_chooses_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, b"abc").unwrap();
        let whole = hash_file_within(&path, &|| false, 3, 60).unwrap().0;
        assert_eq!(
            whole,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let partial = hash_file_within(&path, &|| false, 2, 60).unwrap().0;
        assert!(is_partial(&partial) && partial != format!("{PARTIAL_PREFIX}{whole}"));

        let big = dir.path().join("big.bin");
        let size = 40u64 << 20;
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(size).unwrap();
        drop(file);
        let zeros = hash_file_within(&big, &|| false, 1 << 20, 60).unwrap().0;
        assert_eq!(zeros, zeros_partial(size));
        // The second window starts at (size - 1 MiB) / 15: a byte there changes the digest.
        use std::os::unix::fs::FileExt;
        let second = (size - PARTIAL_WINDOW) / 15;
        let file = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
        file.write_all_at(b"x", second).unwrap();
        let edited = hash_file_within(&big, &|| false, 1 << 20, 60).unwrap().0;
        assert_ne!(edited, zeros);
        file.set_len(size + 1).unwrap();
        assert_ne!(
            hash_file_within(&big, &|| false, 1 << 20, 60).unwrap().0,
            edited
        );
    }

    /// Hashing stops between chunks when asked: a 64 MiB file hashed whole stops after the
    /// third chunk, with an error that says it was cancelled.
    #[test]
    fn hashing_stops_when_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.bin");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(64 << 20).unwrap();
        drop(file);
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let stop = || asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 3;
        let error = hash_file_within(&path, &stop, u64::MAX, 60).unwrap_err();
        assert!(error.to_string().contains("cancelled"), "{error}");
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 4);
        // The same for a partial digest, between windows.
        asked.store(0, std::sync::atomic::Ordering::Relaxed);
        let error = hash_file_within(&path, &stop, 1 << 20, 60).unwrap_err();
        assert!(error.to_string().contains("cancelled"), "{error}");
    }

    /// A shapefile whose `.shp` is above the budget has a partial dataset digest, labelled.
    #[test]
    fn a_shapefile_with_a_partial_part_is_labelled_partial() {
        let dir = tempfile::tempdir().unwrap();
        let shp = dir.path().join("a.shp");
        let file = std::fs::File::create(&shp).unwrap();
        file.set_len(hash_max_bytes() + 1).unwrap();
        drop(file);
        std::fs::write(dir.path().join("a.dbf"), b"attributes").unwrap();
        let store = LineageStore::new(dir.path());
        assert!(is_partial(&store.dataset_digest(&shp).unwrap()));
    }
}
