//! A person's sign-off of one call, for the operator policy's `human` outcome
//! (`<store>/approvals.jsonl`).
//!
//! When a rule asks for a person, the gate records a **request**: the form a person reads (the
//! tool, the arguments, the input files with their digests, each finding with its evidence,
//! the agent's justification when one was given) and the **binding** the answer will be held
//! to: the SHA-256 of the canonical arguments, the input digests, the decision key, the policy
//! digest and the digest of the loaded domains' components, and an expiry (10 minutes). The
//! call is refused naming the operator route, `gdal-mcp approve ID`, which shows the form in a
//! terminal, asks yes or no and a note, and records the **answer** with the request's binding.
//! On the retry the gate re-checks every binding against the call as it is now and names the
//! one that failed (an argument, an input file, the policy, the domains, the expiry); an
//! approval is used once (a **used** line), unless the rule covers the decision, as a capsule
//! does.
//!
//! Every line is sealed under the per-user key (`super::seal`, its own label), so an answer
//! cannot be written by hand, copied from another store's key, or moved between kinds; the
//! file is opened beneath the store like every store file (`super::journal`). Without a usable
//! key (a server sealing for its own process only) the `human` outcome refuses.
//!
//! The lines are **chained** as the ledger's are (`{"seq":N,"prev":"sha256:..."`, the hash of
//! the line before, inside the sealed body), so a deleted, inserted, edited or reordered line
//! breaks the chain, and every read of the journal checks the whole chain: a broken one fails
//! closed ([`ApprovalError::Broken`], naming the file, the line and how an operator recovers),
//! and `gdal-mcp ledger verify` reports it ([`verify`]). A journal written before the chain
//! keeps its lines as an unchained prefix: each is read on its own as before, and the first
//! chained line links to the SHA-256 of the whole prefix, so the old lines are fixed from then
//! on. Regression, attack round 8, R8-8: deleting the one sealed `spent` line let a used
//! request state run its call again, in the same process. Besides the chain, the server
//! remembers in memory every nonce it spent and every sign-off it used, for as long as the
//! state or the answer could still be valid (its expiry bounds the set), so a line cut from
//! the end of the file, which no chain can see, does not undo a use within the process.
//!
//! A host that shows forms gets the same request as a form ([`form_message`],
//! [`form_schema`], read back by [`read_answer`]): through `elicitation/create` within the call
//! (2025-11-25), or as an `InputRequiredResult` whose **request state** ([`State`], sealed by
//! [`Approvals::seal_state`] with rmcp's `RequestStateCodec` under a key derived from the
//! per-user key and bound to this store) carries the bindings, an expiry and a nonce, spent
//! once ([`Approvals::spend`]) when the retry is answered (2026-07-28).

use super::journal::{open_beneath, read_line_within, Bounded, Lock};
use super::key::{canonical_json, sha256_hex};
use super::ledger::{last_line_within, seq_of, sha256_hex_bytes, GENESIS};
use super::seal::{self, Kind, Seal};
use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The approvals journal's file name inside the store.
pub const FILE_NAME: &str = "approvals.jsonl";
/// How long a request may wait for its answer (and a single-use approval for its retry).
pub const TTL_MS: i64 = 10 * 60 * 1000;
/// Test-only: the lifetime of a sign-off request in seconds instead of [`TTL_MS`] (the
/// end-to-end tests of expiry set it; an operator has no reason to).
pub const TTL_VARIABLE: &str = "GDAL_MCP_SIGN_OFF_TTL_SECS";
/// The longest note kept from a form or a terminal.
pub const MAX_NOTE_CHARS: usize = 500;
/// What the request state's seal is bound to besides its payload.
const STATE_CONTEXT: &[u8] = b"gdal-mcp sign-off request state 1";

/// The lifetime of a sign-off request, in milliseconds: [`TTL_MS`] unless the test-only
/// [`TTL_VARIABLE`] says otherwise (read once).
pub fn ttl_ms() -> i64 {
    static TTL: OnceLock<i64> = OnceLock::new();
    *TTL.get_or_init(|| {
        std::env::var(TTL_VARIABLE)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
            .map_or(TTL_MS, |s| (s * 1000.0).round() as i64)
    })
}

/// The lifetime in words ("10 minutes", "2 s").
pub fn ttl_words() -> String {
    let ms = ttl_ms();
    if ms % 60_000 == 0 {
        let minutes = ms / 60_000;
        format!("{minutes} minute{}", if minutes == 1 { "" } else { "s" })
    } else {
        format!("{} s", ms as f64 / 1000.0)
    }
}
/// The journal is read up to this size (a larger one cannot be checked: it fails closed).
const MAX_BYTES: u64 = 64 << 20;
/// A line is at most this long (a request's form holds a justification of at most 4 KiB).
const MAX_LINE_BYTES: usize = 1 << 20;
/// A request's form is at most this long as JSON: the call, its findings and a justification
/// of at most 4 KiB fit many times over. A larger one is refused, not recorded: a `human`
/// decision wrote the agent's justification unchecked, and ~64 calls of 1 MB pushed the
/// journal past [`MAX_BYTES`], after which every sign-off failed closed (issue 21, attack
/// round 10, R10-11).
pub const MAX_FORM_BYTES: usize = 64 << 10;
/// Files a sign-off binds besides the inputs (a VRT's sources and every sidecar): the form
/// lists each one, and must stay within [`MAX_FORM_BYTES`].
pub const MAX_BOUND_FILES: usize = 200;
/// New requests are refused once the journal holds this much, so that answers, spends and
/// uses can still be written and the journal stays readable (R10-11).
const MAX_REQUEST_JOURNAL_BYTES: u64 = MAX_BYTES / 2;

/// What an answer is held to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub tool: String,
    /// `sha256:` of the canonical JSON of the call's arguments (without `justification`).
    pub arguments: String,
    /// Each input file and its SHA-256 (`None`: not hashable).
    pub inputs: Vec<(String, Option<String>)>,
    pub decision_key: String,
    pub domain: String,
    /// The policy's digest.
    pub policy: String,
    /// `sha256:` over the loaded domains' ids, versions and component digests.
    pub components: String,
}

impl Binding {
    /// The first binding that differs from `now`, in words.
    pub fn mismatch(&self, now: &Binding) -> Option<String> {
        if self.tool != now.tool || self.arguments != now.arguments {
            return Some("the call's arguments changed since the approval".to_string());
        }
        for (path, digest) in &self.inputs {
            let current = now.inputs.iter().find(|(p, _)| p == path);
            match current {
                Some((_, d)) if d == digest => {}
                Some((_, d)) => {
                    return Some(format!(
                        "the input file {path} changed since the approval (sha256 {} then, {} \
                         now)",
                        digest.as_deref().unwrap_or("unknown"),
                        d.as_deref().unwrap_or("unknown")
                    ))
                }
                None => return Some(format!("the input file {path} is no longer an input")),
            }
        }
        if let Some((path, _)) = now
            .inputs
            .iter()
            .find(|(p, _)| !self.inputs.iter().any(|(q, _)| q == p))
        {
            return Some(format!(
                "the file {path}, which GDAL reads with the input, appeared since the approval"
            ));
        }
        if now.inputs.len() != self.inputs.len() {
            return Some("the call's input files changed since the approval".to_string());
        }
        if self.decision_key != now.decision_key || self.domain != now.domain {
            return Some("the decision changed since the approval (another decision key)".into());
        }
        if self.policy != now.policy {
            return Some(format!(
                "the operator's policy changed since the approval ({} then, {} now)",
                self.policy, now.policy
            ));
        }
        if self.components != now.components {
            return Some(
                "the loaded domains changed since the approval (another pack or version)".into(),
            );
        }
        None
    }
}

/// One line of the journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Request {
        id: String,
        binding: Binding,
        /// What the person is shown.
        form: Value,
        created_ms: i64,
        expires_ms: i64,
        covers_decision: bool,
    },
    Answer {
        id: String,
        approved: bool,
        note: String,
        /// Who answered: `terminal (user)` for the CLI route.
        by: String,
        binding: Binding,
        expires_ms: i64,
        covers_decision: bool,
        at_ms: i64,
    },
    Used {
        id: String,
        at_ms: i64,
    },
    /// A request state's nonce, spent by the retry that carried it (`id` is `state-<nonce>`).
    Spent {
        id: String,
        at_ms: i64,
    },
}

/// One sign-off a request state carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSignOff {
    pub id: String,
    pub binding: Binding,
    pub covers_decision: bool,
}

/// What a sealed request state holds (readable by the client, never trusted before its seal
/// verifies: rmcp's codec signs, it does not encrypt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub v: u32,
    /// Random, spent once.
    pub nonce: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub sign_offs: Vec<StateSignOff>,
}

/// A person's answer to a sign-off form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormAnswer {
    Approve {
        note: String,
    },
    Decline {
        note: String,
    },
    /// The person dismissed the form without answering.
    Cancel,
}

/// What the journal says of a call's sign-off now.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// No answer yet.
    Unanswered,
    Approved {
        note: String,
        by: String,
    },
    Declined {
        note: String,
        by: String,
    },
    /// An answer exists but no longer holds; says which binding failed.
    Invalid(String),
}

/// Why the journal could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    #[error("approvals {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("approval {id}: {message}")]
    Refused { id: String, message: String },
    /// The journal's chain is broken: no sign-off is read from it or written to it.
    #[error(
        "approvals {path}: the chain is broken at line {line}: {message}. Sign-offs fail closed \
         until an operator looks at it: `gdal-mcp ledger verify --store <store>` reports it; \
         keep the file as evidence and move it aside (the server starts a new one, pending \
         sign-offs are asked again, and approvals that cover a decision must be given again)"
    )]
    Broken {
        path: String,
        /// 1-based line number (0: the file as a whole).
        line: usize,
        message: String,
    },
}

/// What this process spent and used, remembered for as long as it could be replayed.
#[derive(Debug, Default)]
struct Memory {
    /// A request state's nonce and the state's expiry (ms).
    spent: HashMap<String, i64>,
    /// A single-use sign-off's id and when it was used (ms): an answer given at or before
    /// that time is used up.
    used: HashMap<String, i64>,
    /// An answered sign-off's id, the request that carried the answer ([`Approvals::hold`])
    /// and when (ms): until that request has asked the gate again, no other takes it.
    held: HashMap<String, (u64, i64)>,
}

impl Memory {
    /// Forget what can no longer be replayed: a state past its expiry, a use older than a
    /// request's lifetime (the answer it used expired by then).
    fn prune(&mut self, now: i64) {
        self.spent.retain(|_, expires| *expires >= now);
        let ttl = ttl_ms();
        self.used.retain(|_, at| at.saturating_add(ttl) >= now);
        self.held.retain(|_, (_, at)| at.saturating_add(ttl) >= now);
    }
}

thread_local! {
    static HOLDER: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Run `job` (the gate's decision for one request) as request `holder`: a sign-off answered
/// through that request's form is its own ([`Approvals::hold`]).
pub fn as_holder<T>(holder: u64, job: impl FnOnce() -> T) -> T {
    let before = HOLDER.with(|h| h.replace(Some(holder)));
    let out = job();
    HOLDER.with(|h| h.set(before));
    out
}

/// The request the gate decides for on this thread ([`as_holder`]), if any.
pub fn current_holder() -> Option<u64> {
    HOLDER.with(std::cell::Cell::get)
}

/// A token for one request's part in the sign-off: unique in this process.
pub fn new_holder() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// What an intact journal holds ([`verify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Lines in all.
    pub lines: usize,
    /// Lines written before the chain (by an earlier gdal-mcp), read each on its own.
    pub unchained: usize,
}

/// What one read of the journal found.
struct Scanned {
    /// The lines asked for whose MAC verifies, in order.
    lines: Vec<Line>,
    /// The `seq` and `prev` of the next line.
    next: (u64, String),
    chain: Chain,
}

/// The `prev` of a chained line as this module writes it (`{"seq":N,"prev":"...",`).
fn prev_of(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(",\"prev\":\"")?;
    rest.split('"').next()
}

/// The approvals of one store.
#[derive(Debug, Clone)]
pub struct Approvals {
    root: PathBuf,
    seal: Arc<Seal>,
    /// Seals request states under a key derived from the per-user key, with a key id bound
    /// to this store, so a state from another key or store is named as such.
    codec: Option<RequestStateCodec>,
    /// Spent nonces and used sign-offs of this process (shared by the clones the gate hands
    /// out), whatever the file says.
    memory: Arc<Mutex<Memory>>,
}

/// Check the chain of the approvals journal of the store at `store_root` (as the server reads
/// it); a missing journal is intact and empty.
pub fn verify(store_root: &Path, seal: Arc<Seal>) -> Result<Chain, ApprovalError> {
    let approvals = Approvals::new(store_root, seal);
    let file = match open_beneath(store_root, &[FILE_NAME], false) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Chain {
                lines: 0,
                unchained: 0,
            })
        }
        Err(e) => return Err(approvals.io(e)),
    };
    let _lock = Lock::exclusive(&file).map_err(|e| approvals.io(e))?;
    Ok(approvals.scan(&file, &|_| false)?.chain)
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The id of a sign-off: the same call (tool, arguments, decision) has the same id, so a retry
/// finds its answer and a changed input is named; a sign-off that covers the decision is keyed
/// by the decision and the policy alone.
pub fn id_of(binding: &Binding, covers_decision: bool) -> String {
    let material = if covers_decision {
        format!("decision\n{}\n{}", binding.decision_key, binding.policy)
    } else {
        format!(
            "call\n{}\n{}\n{}",
            binding.tool, binding.arguments, binding.decision_key
        )
    };
    sha256_hex(&material)[..20].to_string()
}

/// `sha256:` of the canonical JSON of `arguments`.
pub fn arguments_digest(arguments: &Value) -> String {
    format!("sha256:{}", sha256_hex(&canonical_json(arguments)))
}

impl Approvals {
    pub fn new(store_root: &Path, seal: Arc<Seal>) -> Self {
        let derived = seal.derive("sign-off request state");
        // The key id names the key and the store (not secret: a hash of another derived
        // value), so a state from another key or store is told apart from an edited one.
        let kid = sha256_hex(&format!(
            "{}\n{}",
            hex::encode(seal.derive("sign-off request state key id")),
            store_root.display()
        ))[..16]
            .to_string();
        let codec = RequestStateCodec::new_with_keyring(kid.clone(), [(kid, derived.to_vec())])
            .map_err(|e| tracing::warn!("approvals: no request-state codec: {e}"))
            .ok();
        Self {
            root: store_root.to_path_buf(),
            seal,
            codec,
            memory: Arc::default(),
        }
    }

    fn io(&self, source: std::io::Error) -> ApprovalError {
        ApprovalError::Io {
            path: self.root.join(FILE_NAME).display().to_string(),
            source,
        }
    }

    fn broken(&self, line: usize, message: impl Into<String>) -> ApprovalError {
        ApprovalError::Broken {
            path: self.root.join(FILE_NAME).display().to_string(),
            line,
            message: message.into(),
        }
    }

    /// Keep the answer to sign-off `id` for the request `holder` that carried it: an
    /// identical request that reaches the gate first took it, and the request the person
    /// answered was told its answer was used (attack round 17, R17-C2).
    pub fn hold(&self, id: &str, holder: u64) {
        let mut memory = self.memory();
        memory.prune(now_ms());
        memory.held.insert(id.to_string(), (holder, now_ms()));
    }

    /// Let every request use the answer to sign-off `id` ([`Approvals::hold`]).
    pub fn release(&self, id: &str) {
        self.memory().held.remove(id);
    }

    /// Whether the answer to sign-off `id` is kept for another request than the one this
    /// thread decides for ([`as_holder`]).
    pub fn held_by_another(&self, id: &str) -> bool {
        let current = current_holder();
        let mut memory = self.memory();
        memory.prune(now_ms());
        memory
            .held
            .get(id)
            .is_some_and(|(holder, _)| Some(*holder) != current)
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Read the whole journal (`file`, at its start, locked), checking its chain: every
    /// chained line has the next `seq`, the hash of the line before it (of the unchained
    /// prefix, for the first) as `prev`, and a MAC that verifies; the first that does not
    /// breaks the chain. Unchained lines (written before the chain) may only come first, and
    /// are read each on its own, as before: one whose MAC fails is ignored. Returns the
    /// verified lines `want` picks (given the line's JSON without its MAC), and the next link.
    fn scan(
        &self,
        file: &std::fs::File,
        want: &dyn Fn(&str) -> bool,
    ) -> Result<Scanned, ApprovalError> {
        use sha2::{Digest, Sha256};
        let size = file.metadata().map_err(|e| self.io(e))?.len();
        if size > MAX_BYTES {
            return Err(self.broken(
                0,
                format!("it is {size} bytes, more than the {MAX_BYTES} bytes the server reads"),
            ));
        }
        let mut reader = std::io::BufReader::new(Read::take(file, size));
        let mut prefix = Sha256::new();
        let mut unchained = 0usize;
        let mut chained = false;
        let mut last_hash = GENESIS.to_string();
        let mut number = 0usize;
        let mut out = Vec::new();
        let mut line = Vec::with_capacity(4096);
        let prefix_hash =
            |prefix: &Sha256| format!("sha256:{}", hex::encode(prefix.clone().finalize()));
        let keep = |open: &str, out: &mut Vec<Line>| {
            if want(open) {
                if let Ok(parsed) = serde_json::from_str::<Line>(open) {
                    out.push(parsed);
                }
            }
        };
        loop {
            let read =
                read_line_within(&mut reader, &mut line, MAX_LINE_BYTES).map_err(|e| self.io(e))?;
            if read == Bounded::End {
                break;
            }
            number += 1;
            if read == Bounded::TooLong {
                return Err(self.broken(
                    number,
                    format!("longer than any line ({MAX_LINE_BYTES} bytes)"),
                ));
            }
            let text = std::str::from_utf8(&line).ok();
            match seq_of(&line) {
                None => {
                    if chained {
                        return Err(self.broken(
                            number,
                            "a line without a chain link after chained lines: it was written \
                             by hand, or by an older gdal-mcp sharing this store",
                        ));
                    }
                    unchained += 1;
                    prefix.update(&line);
                    prefix.update(b"\n");
                    match text.and_then(|t| self.seal.open_line(Kind::Approval, t)) {
                        Some(open) => keep(&open, &mut out),
                        None => tracing::warn!(
                            "approvals: line {number} (before the chain) does not verify; ignored"
                        ),
                    }
                }
                Some(seq) => {
                    let expected = if chained {
                        last_hash.clone()
                    } else if unchained == 0 {
                        GENESIS.to_string()
                    } else {
                        prefix_hash(&prefix)
                    };
                    if seq != number as u64 {
                        return Err(self.broken(
                            number,
                            format!(
                                "sequence number {seq} where {number} was expected: a line \
                                 before it was deleted, or one was inserted or moved"
                            ),
                        ));
                    }
                    let Some(open) = text.and_then(|t| self.seal.open_line(Kind::Approval, t))
                    else {
                        return Err(self.broken(
                            number,
                            format!(
                                "its MAC does not verify under the sealing key ({}): it was \
                                 edited, written by hand, planted, or sealed under another key",
                                self.seal.origin()
                            ),
                        ));
                    };
                    if prev_of(&open) != Some(expected.as_str()) {
                        return Err(self.broken(
                            number,
                            format!(
                                "its `prev` is not the hash of line {}: a line before it was \
                                 deleted, edited or moved",
                                number - 1
                            ),
                        ));
                    }
                    chained = true;
                    keep(&open, &mut out);
                }
            }
            last_hash = format!("sha256:{}", sha256_hex_bytes(&line));
        }
        let next_prev = if chained || unchained == 0 {
            last_hash
        } else {
            prefix_hash(&prefix)
        };
        Ok(Scanned {
            lines: out,
            next: (number as u64 + 1, next_prev),
            chain: Chain {
                lines: number,
                unchained,
            },
        })
    }

    /// The link of the next line of the journal open as `file` (locked): after a chained last
    /// line, read backwards; otherwise (a journal from before the chain, or none yet) from a
    /// scan of the whole file.
    fn next_link(&self, file: &mut std::fs::File) -> Result<(u64, String), ApprovalError> {
        match last_line_within(file, MAX_LINE_BYTES) {
            Ok(None) => return Ok((1, GENESIS.to_string())),
            Ok(Some(last)) => {
                if let Some(seq) = seq_of(&last) {
                    return Ok((seq + 1, format!("sha256:{}", sha256_hex_bytes(&last))));
                }
            }
            Err(_) => {}
        }
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| self.io(e))?;
        Ok(self.scan(file, &|_| false)?.next)
    }

    /// Write `line` as the journal's next link through `file` (locked, `O_APPEND`).
    fn write_line(
        &self,
        file: &mut std::fs::File,
        (seq, prev): (u64, String),
        line: &Line,
    ) -> Result<(), ApprovalError> {
        let body = serde_json::to_string(line).map_err(|e| self.io(std::io::Error::other(e)))?;
        let rest = body.strip_prefix('{').unwrap_or(&body);
        let text = format!("{{\"seq\":{seq},\"prev\":\"{prev}\",{rest}");
        let mut text = self.seal.seal(Kind::Approval, &text);
        if text.len() > MAX_LINE_BYTES {
            return Err(self.io(std::io::Error::other(format!(
                "a line of {} bytes; at most {MAX_LINE_BYTES}",
                text.len()
            ))));
        }
        text.push('\n');
        file.write_all(text.as_bytes()).map_err(|e| self.io(e))
    }

    /// Open the journal for appending, locked by the caller (the store created if absent).
    fn open_append(&self) -> Result<std::fs::File, ApprovalError> {
        if std::fs::symlink_metadata(&self.root).is_err() {
            std::fs::create_dir_all(&self.root).map_err(|e| self.io(e))?;
        }
        open_beneath(&self.root, &[FILE_NAME], true).map_err(|e| self.io(e))
    }

    /// Append one sealed, chained line.
    fn append(&self, line: &Line) -> Result<(), ApprovalError> {
        let mut file = self.open_append()?;
        let _lock = Lock::exclusive(&file).map_err(|e| self.io(e))?;
        let next = self.next_link(&mut file)?;
        self.write_line(&mut file, next, line)
    }

    /// Every line of `id` that verifies, in order, from a journal whose chain holds.
    fn lines(&self, id: &str) -> Result<Vec<Line>, ApprovalError> {
        let file = match open_beneath(&self.root, &[FILE_NAME], false) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        let _lock = Lock::exclusive(&file).map_err(|e| self.io(e))?;
        let needle = format!("\"id\":\"{id}\"");
        Ok(self.scan(&file, &|open| open.contains(&needle))?.lines)
    }

    /// Seal a request state for `sign_offs`, expiring after [`ttl_ms`], with a fresh nonce.
    /// `None` when this server has no codec (it then offers no form).
    pub fn seal_state(&self, sign_offs: Vec<StateSignOff>) -> Option<(String, State)> {
        let codec = self.codec.as_ref()?;
        let created_ms = now_ms();
        let state = State {
            v: 1,
            nonce: nonce(),
            created_ms,
            expires_ms: created_ms + ttl_ms(),
            sign_offs,
        };
        let sealed = codec
            .seal_json_with(&state, &SealOptions::new().associated_data(STATE_CONTEXT))
            .map_err(|e| tracing::warn!("approvals: cannot seal a request state: {e}"))
            .ok()?;
        Some((sealed, state))
    }

    /// Open a request state this store's key sealed; `Err` says in words why it is not one
    /// (another server's, edited, malformed). Expiry and bindings are the caller's to check.
    pub fn open_state(&self, sealed: &str) -> Result<State, String> {
        let Some(codec) = &self.codec else {
            return Err("This server cannot open request states (no codec)".to_string());
        };
        codec
            .open_json_with::<State>(sealed, STATE_CONTEXT)
            .map_err(|e| match e {
                RequestStateError::UnknownKeyId => "The request state was sealed by another server (another key or another store): it approves nothing here"
                    .to_string(),
                RequestStateError::IntegrityCheckFailed => "The request state was edited: its seal does not verify under this server's key"
                    .to_string(),
                _ => "The request state is not one this server sealed (malformed)".to_string(),
            })
    }

    /// Spend a request state's nonce (the state expiring at `expires_ms`): `true` when this
    /// retry is the first to spend it, `false` when it was spent before (a replay), by this
    /// process (remembered until the state expires, whatever the file says) or on record.
    /// Checked and recorded under the journal's lock, in a journal whose chain holds.
    pub fn spend(&self, nonce: &str, expires_ms: i64) -> Result<bool, ApprovalError> {
        let mut memory = self.memory();
        memory.prune(now_ms());
        if memory.spent.contains_key(nonce) {
            return Ok(false);
        }
        let id = format!("state-{nonce}");
        let mut file = self.open_append()?;
        let _lock = Lock::exclusive(&file).map_err(|e| self.io(e))?;
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| self.io(e))?;
        let needle = format!("\"id\":\"{id}\"");
        let scanned = self.scan(&file, &|open| open.contains(&needle))?;
        if !scanned.lines.is_empty() {
            memory.spent.insert(nonce.to_string(), expires_ms);
            return Ok(false);
        }
        // Remembered before it is written: a line that cannot be written still spends it.
        memory.spent.insert(nonce.to_string(), expires_ms);
        self.write_line(
            &mut file,
            scanned.next,
            &Line::Spent {
                id,
                at_ms: now_ms(),
            },
        )?;
        Ok(true)
    }

    /// Record a request (refreshing its expiry) and return its id.
    pub fn request(
        &self,
        binding: Binding,
        form: Value,
        covers_decision: bool,
    ) -> Result<String, ApprovalError> {
        let id = id_of(&binding, covers_decision);
        let size = form.to_string().len();
        if size > MAX_FORM_BYTES {
            return Err(ApprovalError::Refused {
                id,
                message: format!(
                    "its form is {size} bytes of JSON, more than the {MAX_FORM_BYTES} a sign-off \
                     request may record; shorten the call's arguments and justification"
                ),
            });
        }
        let journal = std::fs::metadata(self.root.join(FILE_NAME)).map_or(0, |m| m.len());
        if journal > MAX_REQUEST_JOURNAL_BYTES {
            return Err(ApprovalError::Refused {
                id,
                message: format!(
                    "the journal {} holds {journal} bytes, more than the \
                     {MAX_REQUEST_JOURNAL_BYTES} under which new requests are recorded (answers \
                     to pending ones still are); an operator checks it (`gdal-mcp ledger \
                     verify`) and moves it aside once its sign-offs are no longer needed",
                    self.root.join(FILE_NAME).display()
                ),
            });
        }
        let created_ms = now_ms();
        self.append(&Line::Request {
            id: id.clone(),
            binding,
            form,
            created_ms,
            expires_ms: created_ms + ttl_ms(),
            covers_decision,
        })?;
        Ok(id)
    }

    /// The newest request of `id`, if it verifies.
    pub fn pending(&self, id: &str) -> Result<Option<Line>, ApprovalError> {
        Ok(self
            .lines(id)?
            .into_iter()
            .rev()
            .find(|l| matches!(l, Line::Request { .. })))
    }

    /// Record a person's answer to the newest request of `id` (the CLI route). Refused when
    /// there is no such request or it expired.
    pub fn answer(
        &self,
        id: &str,
        approved: bool,
        note: &str,
        by: &str,
    ) -> Result<Line, ApprovalError> {
        let refused = |message: &str| ApprovalError::Refused {
            id: id.to_string(),
            message: message.to_string(),
        };
        let Some(Line::Request {
            binding,
            expires_ms,
            covers_decision,
            ..
        }) = self.pending(id)?
        else {
            return Err(refused(
                "no request with this id in this store (check --store and the id in the refusal)",
            ));
        };
        let at_ms = now_ms();
        if at_ms > expires_ms {
            return Err(refused(&format!(
                "the request expired ({}); retry the call to ask again",
                ttl_words()
            )));
        }
        let line = Line::Answer {
            id: id.to_string(),
            approved,
            note: note.to_string(),
            by: by.to_string(),
            binding,
            expires_ms,
            covers_decision,
            at_ms,
        };
        self.append(&line)?;
        Ok(line)
    }

    /// Where the sign-off of `id` stands against the call as it is now (`binding`).
    pub fn standing(&self, id: &str, binding: &Binding) -> Result<Standing, ApprovalError> {
        let lines = self.lines(id)?;
        let Some(position) = lines.iter().rposition(|l| matches!(l, Line::Answer { .. })) else {
            return Ok(Standing::Unanswered);
        };
        let Line::Answer {
            approved,
            note,
            by,
            binding: bound,
            expires_ms,
            covers_decision,
            at_ms,
            ..
        } = &lines[position]
        else {
            return Ok(Standing::Unanswered);
        };
        if !approved {
            return Ok(Standing::Declined {
                note: note.clone(),
                by: by.clone(),
            });
        }
        if let Some(failed) = bound.mismatch(binding) {
            return Ok(Standing::Invalid(failed));
        }
        if !covers_decision {
            if now_ms() > *expires_ms {
                return Ok(Standing::Invalid(format!(
                    "the approval expired ({} after the request)",
                    ttl_words()
                )));
            }
            // Used, on record after the answer or (whatever the file says) by this process
            // since it was given.
            let used_here = self
                .memory()
                .used
                .get(id)
                .is_some_and(|used_ms| at_ms <= used_ms);
            if used_here
                || lines[position..]
                    .iter()
                    .any(|l| matches!(l, Line::Used { .. }))
            {
                return Ok(Standing::Invalid(
                    "the approval was already used by an earlier call (single-use: replayed)"
                        .to_string(),
                ));
            }
        }
        Ok(Standing::Approved {
            note: note.clone(),
            by: by.clone(),
        })
    }

    /// Mark the approval of `id` used (single-use approvals): remembered by this process
    /// (before the line is written: a line that cannot be written still uses it) and recorded.
    pub fn consume(&self, id: &str) -> Result<(), ApprovalError> {
        let at_ms = now_ms();
        {
            let mut memory = self.memory();
            memory.prune(at_ms);
            memory.used.insert(id.to_string(), at_ms);
            memory.held.remove(id);
        }
        self.append(&Line::Used {
            id: id.to_string(),
            at_ms,
        })
    }
}

/// 16 random bytes in hex.
fn nonce() -> String {
    hex::encode(seal::random_bytes::<16>())
}

/// The form's fields: a decision (approve or decline) and an optional note. A client may
/// answer the decision as `"approve"`/`"decline"` or, for a checkbox, `approve: true/false`.
pub fn form_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Your decision on the call or decision described",
                "enum": ["approve", "decline"],
            },
            "note": {
                "type": "string",
                "title": "A note for the record (optional)",
                "maxLength": MAX_NOTE_CHARS,
            },
        },
        "required": ["decision"],
    })
}

/// The form's text: the tool, the arguments in words, the input files with their digests,
/// each finding with its evidence, the agent's justification when one was given, and why a
/// person is asked (`form` as the gate records it in a request).
pub fn form_message(form: &Value) -> String {
    // Hosts may show the form in a terminal: every string from the agent or the data is
    // escaped as on the approve screen (attack round 8, R8-4: a file name holding ESC[2J
    // reached `elicitation/create` raw).
    use crate::terminal::escape;
    // What a yes covers, as the binding takes it (attack round 8, R8-13: under a rule that
    // covers the decision the form said "this exact call only, once" while later calls of the
    // decision ran on the same yes).
    let covers = if form["covers_decision"].as_bool() == Some(true) {
        "Your answer approves this decision: this call and later calls of it that write to \
         another output (the same input files as they are now, the other arguments, this \
         policy), until it expires."
    } else {
        "Your answer approves this exact call only (these arguments, these input files as they \
         are now, this policy), once."
    };
    let mut text = format!(
        "gdal-mcp asks a person to sign off one tool call: {}. {covers}\n",
        escape(form["tool"].as_str().unwrap_or("?"))
    );
    text.push_str("\nArguments:\n");
    match form["arguments"].as_object() {
        Some(arguments) if !arguments.is_empty() => {
            for (name, value) in arguments {
                let shown = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let _ = writeln!(text, "- {} = {}", escape(name), escape(&shown));
            }
        }
        _ => text.push_str("- (none)\n"),
    }
    text.push_str("\nInput files:\n");
    for input in form["inputs"].as_array().into_iter().flatten() {
        let _ = writeln!(
            text,
            "- {} (sha256 {})",
            escape(input["path"].as_str().unwrap_or("?")),
            escape(input["sha256"].as_str().unwrap_or("unknown"))
        );
    }
    let _ = writeln!(
        text,
        "\nFinding of {} ({}): {}",
        escape(form["domain"].as_str().unwrap_or("?")),
        escape(form["severity"].as_str().unwrap_or("?")),
        escape(form["reason"].as_str().unwrap_or(""))
    );
    for item in form["evidence"].as_array().into_iter().flatten() {
        let _ = writeln!(
            text,
            "- {}: {} Why it matters: {}",
            escape(item["id"].as_str().unwrap_or("?")),
            escape(item["fact"].as_str().unwrap_or("")),
            escape(item["why"].as_str().unwrap_or(""))
        );
    }
    match &form["justification"] {
        Value::Null => text.push_str("\nThe agent gave no justification.\n"),
        j => {
            let _ = writeln!(
                text,
                "\nThe agent's justification:\n{}",
                crate::terminal::escape_json(j).unwrap_or_default()
            );
        }
    }
    let _ = write!(
        text,
        "\nWhy a person is asked: {}",
        escape(form["policy"].as_str().unwrap_or(""))
    );
    text
}

/// A person's answer from a form's result (an `ElicitResult` as JSON: `action` and, when
/// accepted, `content`); `Err` says what is wrong with it.
pub fn read_answer(result: &Value) -> Result<FormAnswer, String> {
    let note = |content: &Value| -> String {
        content["note"]
            .as_str()
            .unwrap_or("")
            .trim()
            .chars()
            .take(MAX_NOTE_CHARS)
            .collect()
    };
    match result["action"].as_str() {
        Some("accept") => {
            let content = &result["content"];
            // Only an unambiguous answer counts (attack round 8, observation: `{"decision":
            // "approve", "approve": false}` ran the call): the form's fields and nothing
            // else, each of its type, and `decision` and `approve` agreeing when both are
            // given.
            let Some(fields) = content.as_object() else {
                return Err("the form's answer has no content".into());
            };
            if let Some(other) = fields
                .keys()
                .find(|k| !["decision", "approve", "note"].contains(&k.as_str()))
            {
                return Err(format!(
                    "the form's answer holds a field the form did not ask for ({other:?}): \
                     nothing is approved"
                ));
            }
            if !matches!(content["note"], Value::Null | Value::String(_)) {
                return Err("the form's note is not text".into());
            }
            let decision = match &content["decision"] {
                Value::Null => None,
                Value::String(d) if d == "approve" => Some(true),
                Value::String(d) if d == "decline" => Some(false),
                _ => {
                    return Err("the form's decision is neither \"approve\" nor \"decline\"".into())
                }
            };
            let checkbox = match &content["approve"] {
                Value::Null => None,
                Value::Bool(b) => Some(*b),
                _ => return Err("the form's `approve` is not true or false".into()),
            };
            let approved = match (decision, checkbox) {
                (Some(d), Some(c)) if d != c => {
                    return Err(
                        "the form's answer contradicts itself (its decision and its `approve` \
                         differ): nothing is approved"
                            .into(),
                    )
                }
                (Some(d), _) | (None, Some(d)) => d,
                (None, None) => {
                    return Err(
                        "the form's answer has no decision (\"approve\" or \"decline\")".into(),
                    )
                }
            };
            Ok(if approved {
                FormAnswer::Approve {
                    note: note(content),
                }
            } else {
                FormAnswer::Decline {
                    note: note(content),
                }
            })
        }
        Some("decline") => Ok(FormAnswer::Decline {
            note: String::new(),
        }),
        Some("cancel") => Ok(FormAnswer::Cancel),
        _ => Err("the form's answer has no action (accept, decline or cancel)".into()),
    }
}

/// Everything GDAL reads for each input besides the input itself, each with its digest, to
/// bind into a sign-off with the inputs: the input's read set
/// (`crate::gdal::policy::read_set`): a VRT's sources at any depth, the datasets an
/// `.aux.xml` names, a folder's files, and the sidecars GDAL reads by name beside the input
/// and beside each source (its PAM `.aux.xml`, overviews, masks, world files, `.prj`, ...).
/// Regressions, issue 21: attack round 7, R7-2 (a `dem.tif.aux.xml` with a scale and offset
/// written after a person approved `raster_reproject dem.tif` changed every output height
/// under the approval) and attack round 10, R10-1 (a VRT's source rewritten while the form
/// was open ran as approved: only the VRT's own bytes were bound). A source is hashed as an
/// input is (its SHA-256, or a labelled partial digest above the hashing budget), all of them
/// within the hashing time budget (`GDAL_MCP_HASH_MAX_SECONDS`, for the whole set); a sidecar
/// too large to hash ([`super::lineage::hash_max_bytes`]) is bound by its presence only.
/// `Err` says why the set cannot be bound (it cannot be listed, or a source cannot be hashed
/// in time): the sign-off is then refused, never given on less than GDAL reads.
pub fn read_set_digests(
    inputs: &[(String, Option<String>)],
) -> Result<Vec<(String, Option<String>)>, String> {
    let seconds = super::lineage::hash_max_seconds();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let past = || std::time::Instant::now() > deadline;
    let mut found: Vec<(String, Option<String>)> = Vec::new();
    let known = |found: &[(String, Option<String>)], shown: &str| {
        inputs.iter().chain(found.iter()).any(|(p, _)| p == shown)
    };
    for (input, _) in inputs {
        let set = crate::gdal::policy::read_set::list(Path::new(input)).map_err(|e| e.0)?;
        let files = set.sources.len() + set.sidecars.len();
        if found.len() + files > MAX_BOUND_FILES {
            return Err(format!(
                "GDAL reads {files} files for {input} besides it, more than the \
                 {MAX_BOUND_FILES} a sign-off binds (and a person's form lists)"
            ));
        }
        for source in &set.sources {
            let shown = source.display().to_string();
            if known(&found, &shown) {
                continue;
            }
            // A folder is bound by its files, each a source of its own.
            let digest = if source.is_dir() {
                None
            } else {
                Some(
                    super::lineage::file_digest_within(source, &past).map_err(|e| {
                        format!(
                            "{shown}, which GDAL reads for {input}, cannot be hashed to bind \
                             the sign-off to its contents within {seconds} s, the server's \
                             hashing budget for a sign-off (GDAL_MCP_HASH_MAX_SECONDS): {e}"
                        )
                    })?,
                )
            };
            found.push((shown, digest));
        }
        for sidecar in &set.sidecars {
            let shown = sidecar.display().to_string();
            if !known(&found, &shown) {
                found.push((shown, digest_of(sidecar)));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The SHA-256 of a sidecar, hex, or `None` when it cannot be read or is too large to hash.
fn digest_of(path: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = crate::gdal::policy::open_regular(path).ok()?;
    if file.metadata().ok()?.len() > super::lineage::hash_max_bytes() {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Some(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> Binding {
        Binding {
            tool: "raster_reproject".into(),
            arguments: "sha256:a".into(),
            inputs: vec![("/w/in.tif".into(), Some("sha256:1".into()))],
            decision_key: "sha256:k".into(),
            domain: "crs_datum".into(),
            policy: "sha256:p".into(),
            components: "sha256:c".into(),
        }
    }

    /// R10-1: a VRT's source and the source's sidecar are bound with the VRT, each by its
    /// digest (a rewritten source changes its entry); a VRT whose sources a person's form
    /// could not list is refused, not bound by less than GDAL reads.
    #[test]
    fn r10_1_a_sign_off_binds_a_vrts_sources_or_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        let vrt = |n: usize| {
            let mut text = String::from(
                "<VRTDataset rasterXSize=\"1\" rasterYSize=\"1\"><VRTRasterBand band=\"1\">",
            );
            for i in 0..n {
                text.push_str(&format!(
                    "<SimpleSource><SourceFilename relativeToVRT=\"1\">s{i}.tif\
                     </SourceFilename></SimpleSource>"
                ));
            }
            text + "</VRTRasterBand></VRTDataset>"
        };
        std::fs::write(d.join("v.vrt"), vrt(1)).unwrap();
        std::fs::write(d.join("s0.tif"), b"cells of 1").unwrap();
        std::fs::write(d.join("s0.tif.aux.xml"), b"<PAMDataset/>").unwrap();
        let inputs = vec![(d.join("v.vrt").display().to_string(), None)];
        let bound = read_set_digests(&inputs).unwrap();
        let paths: Vec<&str> = bound.iter().map(|(p, _)| p.as_str()).collect();
        let source = d.join("s0.tif").display().to_string();
        let pam = d.join("s0.tif.aux.xml").display().to_string();
        assert_eq!(paths, vec![source.as_str(), pam.as_str()]);
        assert!(bound.iter().all(|(_, digest)| digest.is_some()));
        std::fs::write(d.join("s0.tif"), b"cells of 1000").unwrap();
        let again = read_set_digests(&inputs).unwrap();
        assert_ne!(again[0].1, bound[0].1, "the rewritten source is bound anew");
        // More files than a form lists: refused, saying so.
        std::fs::write(d.join("v.vrt"), vrt(MAX_BOUND_FILES + 1)).unwrap();
        for i in 0..=MAX_BOUND_FILES {
            std::fs::write(d.join(format!("s{i}.tif")), b"x").unwrap();
        }
        let why = read_set_digests(&inputs).unwrap_err();
        assert!(why.contains("a sign-off binds"), "{why}");
    }

    #[test]
    fn an_answer_binds_the_call_is_used_once_and_names_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let seal = Arc::new(Seal::from_bytes([5; 32]));
        let approvals = Approvals::new(dir.path(), seal.clone());
        let b = binding();
        let id = approvals.request(b.clone(), Value::Null, false).unwrap();
        assert_eq!(approvals.standing(&id, &b).unwrap(), Standing::Unanswered);
        approvals.answer(&id, true, "ok", "terminal").unwrap();
        assert!(matches!(
            approvals.standing(&id, &b).unwrap(),
            Standing::Approved { .. }
        ));
        for (change, needle) in [
            (
                Binding {
                    inputs: vec![("/w/in.tif".into(), Some("sha256:2".into()))],
                    ..b.clone()
                },
                "input file /w/in.tif changed",
            ),
            (
                Binding {
                    policy: "sha256:q".into(),
                    ..b.clone()
                },
                "policy changed",
            ),
            (
                Binding {
                    components: "sha256:d".into(),
                    ..b.clone()
                },
                "domains changed",
            ),
        ] {
            match approvals.standing(&id, &change).unwrap() {
                Standing::Invalid(why) => assert!(why.contains(needle), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        approvals.consume(&id).unwrap();
        match approvals.standing(&id, &b).unwrap() {
            Standing::Invalid(why) => assert!(why.contains("replayed"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A store written under another key approves nothing here: its chain does not
        // verify, and every sign-off fails closed until the file is moved aside.
        let foreign = Approvals::new(dir.path(), Arc::new(Seal::from_bytes([6; 32])));
        let e = foreign.standing(&id, &b).unwrap_err().to_string();
        assert!(e.contains("MAC") && e.contains("move it aside"), "{e}");
        assert!(foreign.answer(&id, true, "x", "y").is_err());
    }

    /// Attack round 17, R17-C2: an answer given through one request's form is held for that
    /// request: another deciding meanwhile does not see it, the holder does, and once used
    /// (or released, for a sign-off of the decision) it is no longer held.
    #[test]
    fn r17_c2_an_answer_is_held_for_the_request_that_carried_it() {
        let dir = tempfile::tempdir().unwrap();
        let approvals = Approvals::new(dir.path(), Arc::new(Seal::from_bytes([7; 32])));
        let id = approvals.request(binding(), Value::Null, false).unwrap();
        approvals.answer(&id, true, "ok once", "form").unwrap();
        let (carrier, other) = (new_holder(), new_holder());
        approvals.hold(&id, carrier);
        assert!(as_holder(other, || approvals.held_by_another(&id)));
        assert!(!as_holder(carrier, || approvals.held_by_another(&id)));
        approvals.consume(&id).unwrap();
        assert!(!as_holder(other, || approvals.held_by_another(&id)));
        let covering = approvals.request(binding(), Value::Null, true).unwrap();
        approvals.hold(&covering, carrier);
        approvals.release(&covering);
        assert!(!as_holder(other, || approvals.held_by_another(&covering)));
    }

    #[test]
    fn a_decline_and_an_expired_request() {
        let dir = tempfile::tempdir().unwrap();
        let approvals = Approvals::new(dir.path(), Arc::new(Seal::from_bytes([5; 32])));
        let b = binding();
        let id = approvals.request(b.clone(), Value::Null, false).unwrap();
        approvals
            .answer(&id, false, "not this datum", "terminal")
            .unwrap();
        assert!(matches!(
            approvals.standing(&id, &b).unwrap(),
            Standing::Declined { .. }
        ));
        // An expired request cannot be answered.
        approvals
            .append(&Line::Request {
                id: "old".into(),
                binding: b,
                form: Value::Null,
                created_ms: 0,
                expires_ms: 1,
                covers_decision: false,
            })
            .unwrap();
        let e = approvals
            .answer("old", true, "", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expired"), "{e}");
    }

    /// A request state opens only under the key and store that sealed it, names an edit and
    /// another server apart, and its nonce is spent once.
    #[test]
    fn a_request_state_is_bound_to_its_key_and_store_and_spent_once() {
        let dir = tempfile::tempdir().unwrap();
        let seal = Arc::new(Seal::from_bytes([5; 32]));
        let approvals = Approvals::new(dir.path(), seal.clone());
        let sign_offs = vec![StateSignOff {
            id: "abc".into(),
            binding: binding(),
            covers_decision: false,
        }];
        let (sealed, state) = approvals.seal_state(sign_offs.clone()).unwrap();
        assert_eq!(approvals.open_state(&sealed).unwrap(), state);
        assert_eq!(state.expires_ms - state.created_ms, ttl_ms());
        let (again, other) = approvals.seal_state(sign_offs).unwrap();
        assert_ne!(state.nonce, other.nonce, "a fresh nonce per state");
        assert_ne!(sealed, again);
        // Another key, or the same key over another store: another server.
        let foreign = Approvals::new(dir.path(), Arc::new(Seal::from_bytes([6; 32])));
        let why = foreign.open_state(&sealed).unwrap_err();
        assert!(why.contains("another server"), "{why}");
        let elsewhere = tempfile::tempdir().unwrap();
        let moved = Approvals::new(elsewhere.path(), seal);
        assert!(moved
            .open_state(&sealed)
            .unwrap_err()
            .contains("another server"));
        // One character of the tag edited.
        let mut bytes = sealed.clone().into_bytes();
        let at = bytes.len() - 10;
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let edited = String::from_utf8(bytes).unwrap();
        assert!(approvals
            .open_state(&edited)
            .unwrap_err()
            .contains("edited"));
        assert!(approvals
            .open_state("not a state")
            .unwrap_err()
            .contains("not one this server sealed"));
        // Spent once, under the key of the store.
        assert!(approvals.spend(&state.nonce, state.expires_ms).unwrap());
        assert!(!approvals.spend(&state.nonce, state.expires_ms).unwrap());
        assert!(approvals.spend(&other.nonce, other.expires_ms).unwrap());
    }

    fn file_lines(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join(FILE_NAME))
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    fn write_lines(dir: &Path, lines: &[String]) {
        std::fs::write(dir.join(FILE_NAME), lines.join("\n") + "\n").unwrap();
    }

    fn broken_at(result: Result<impl std::fmt::Debug, ApprovalError>) -> (usize, String) {
        match result {
            Err(e @ ApprovalError::Broken { line, .. }) => (line, e.to_string()),
            other => panic!("not a broken chain: {other:?}"),
        }
    }

    /// Regression, attack round 8, R8-8: single use rested on one sealed `spent` (or `used`)
    /// line; the lines were not chained and nothing was remembered, so deleting that line
    /// let a used request state (or a used terminal approval) run its call again in the same
    /// process. Now the process remembers, and a restarted reader finds the chain broken.
    #[test]
    fn r8_8_a_deleted_spent_or_used_line_replays_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let seal = Arc::new(Seal::from_bytes([5; 32]));
        let approvals = Approvals::new(dir.path(), seal.clone());
        let b = binding();
        // The form route: request, spent, answer, used, as a retry writes them.
        let id = approvals.request(b.clone(), Value::Null, false).unwrap();
        let (_, state) = approvals
            .seal_state(vec![StateSignOff {
                id: id.clone(),
                binding: b.clone(),
                covers_decision: false,
            }])
            .unwrap();
        assert!(approvals.spend(&state.nonce, state.expires_ms).unwrap());
        approvals.answer(&id, true, "once", "host").unwrap();
        assert!(matches!(
            approvals.standing(&id, &b).unwrap(),
            Standing::Approved { .. }
        ));
        approvals.consume(&id).unwrap();
        approvals.request(b.clone(), Value::Null, false).unwrap();
        let original = file_lines(dir.path());
        assert_eq!(original.len(), 5);
        assert!(original
            .iter()
            .all(|l| seq_of(l.as_bytes()).is_some() && l.contains("\"mac\"")));

        // The `spent` line deleted (nothing forged): this process still refuses the replay.
        let without_spent: Vec<String> = original
            .iter()
            .filter(|l| !l.contains("\"type\":\"spent\""))
            .cloned()
            .collect();
        assert_eq!(without_spent.len(), 4);
        write_lines(dir.path(), &without_spent);
        assert!(!approvals
            .spend(&state.nonce, state.expires_ms)
            .unwrap_or(false));
        // A restarted server (nothing in memory) finds the chain broken at the next line and
        // fails closed, naming the file and the operator's way out.
        let restarted = Approvals::new(dir.path(), seal.clone());
        let (line, message) = broken_at(restarted.spend(&state.nonce, state.expires_ms));
        assert_eq!(line, 2, "{message}");
        for needle in [FILE_NAME, "deleted", "ledger verify", "move it aside"] {
            assert!(message.contains(needle), "{needle}: {message}");
        }
        broken_at(restarted.standing(&id, &b));
        broken_at(restarted.pending(&id));
        broken_at(restarted.answer(&id, true, "again", "terminal"));
        broken_at(verify(dir.path(), seal.clone()));

        // The `used` line deleted: this process still says replayed; a restart, broken.
        let without_used: Vec<String> = original
            .iter()
            .filter(|l| !l.contains("\"type\":\"used\""))
            .cloned()
            .collect();
        write_lines(dir.path(), &without_used);
        let fresh = Approvals::new(dir.path(), seal.clone());
        assert_eq!(broken_at(fresh.standing(&id, &b)).0, 4);
        match approvals.standing(&id, &b) {
            Ok(Standing::Invalid(why)) => assert!(why.contains("replayed"), "{why}"),
            // The chain is read first: broken is as good a refusal.
            Err(ApprovalError::Broken { .. }) => {}
            other => panic!("{other:?}"),
        }

        // Reordered, or one line edited: broken too.
        let mut reordered = original.clone();
        reordered.swap(1, 2);
        write_lines(dir.path(), &reordered);
        assert_eq!(broken_at(verify(dir.path(), seal.clone())).0, 2);
        let mut edited = original.clone();
        edited[3] = edited[3].replace("\"type\":\"used\"", "\"type\":\"usex\"");
        write_lines(dir.path(), &edited);
        assert!(broken_at(verify(dir.path(), seal.clone()))
            .1
            .contains("MAC"));

        // The lines cut from the end (no chain sees that): this process still remembers.
        write_lines(dir.path(), &original[..1]);
        assert!(!approvals.spend(&state.nonce, state.expires_ms).unwrap());
        match approvals.standing(&id, &b).unwrap() {
            Standing::Unanswered => {}
            other => panic!("{other:?}"),
        }
        write_lines(dir.path(), &original[..3]);
        match approvals.standing(&id, &b).unwrap() {
            Standing::Invalid(why) => assert!(why.contains("replayed"), "{why}"),
            other => panic!("{other:?}"),
        }

        // Intact again: verify says so.
        write_lines(dir.path(), &original);
        assert_eq!(
            verify(dir.path(), seal).unwrap(),
            Chain {
                lines: 5,
                unchained: 0
            }
        );
    }

    /// R8-8's clean twin: a state never used runs once after a restart, and once only.
    #[test]
    fn r8_8_clean_twin_an_unused_state_still_runs_once() {
        let dir = tempfile::tempdir().unwrap();
        let seal = Arc::new(Seal::from_bytes([5; 32]));
        let first = Approvals::new(dir.path(), seal.clone());
        let id = first.request(binding(), Value::Null, false).unwrap();
        let (_, state) = first
            .seal_state(vec![StateSignOff {
                id,
                binding: binding(),
                covers_decision: false,
            }])
            .unwrap();
        let restarted = Approvals::new(dir.path(), seal.clone());
        assert!(restarted.spend(&state.nonce, state.expires_ms).unwrap());
        assert!(!restarted.spend(&state.nonce, state.expires_ms).unwrap());
        assert!(!first.spend(&state.nonce, state.expires_ms).unwrap());
        assert_eq!(verify(dir.path(), seal).unwrap().lines, 2);
    }

    /// A journal written before the chain (each line sealed alone) keeps its lines: they are
    /// read as before, the first chained line links to the hash of all of them, and from
    /// then on deleting or reordering one breaks the chain.
    #[test]
    fn r8_8_a_journal_from_before_the_chain_is_read_and_then_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let seal = Arc::new(Seal::from_bytes([5; 32]));
        let b = binding();
        let id = id_of(&b, false);
        let old = |line: &Line| seal.seal(Kind::Approval, &serde_json::to_string(line).unwrap());
        let legacy = vec![
            old(&Line::Request {
                id: id.clone(),
                binding: b.clone(),
                form: Value::Null,
                created_ms: now_ms(),
                expires_ms: now_ms() + ttl_ms(),
                covers_decision: false,
            }),
            old(&Line::Answer {
                id: id.clone(),
                approved: true,
                note: "old".into(),
                by: "terminal".into(),
                binding: b.clone(),
                expires_ms: now_ms() + ttl_ms(),
                covers_decision: false,
                at_ms: now_ms(),
            }),
            old(&Line::Spent {
                id: "state-abc".into(),
                at_ms: now_ms(),
            }),
        ];
        write_lines(dir.path(), &legacy);
        let approvals = Approvals::new(dir.path(), seal.clone());
        assert!(matches!(
            approvals.standing(&id, &b).unwrap(),
            Standing::Approved { .. }
        ));
        assert!(
            !approvals.spend("abc", now_ms() + 1000).unwrap(),
            "spent on record"
        );
        assert_eq!(
            verify(dir.path(), seal.clone()).unwrap(),
            Chain {
                lines: 3,
                unchained: 3
            }
        );
        approvals.consume(&id).unwrap();
        let now = file_lines(dir.path());
        assert_eq!(now.len(), 4);
        assert!(
            now[3].starts_with("{\"seq\":4,\"prev\":\"sha256:"),
            "{}",
            now[3]
        );
        let restarted = Approvals::new(dir.path(), seal.clone());
        match restarted.standing(&id, &b).unwrap() {
            Standing::Invalid(why) => assert!(why.contains("replayed"), "{why}"),
            other => panic!("{other:?}"),
        }
        // An old line deleted or moved now breaks the chain at the first chained line.
        let mut deleted = now.clone();
        deleted.remove(0);
        write_lines(dir.path(), &deleted);
        assert_eq!(broken_at(restarted.standing(&id, &b)).0, 3);
        let mut moved = now.clone();
        moved.swap(0, 1);
        write_lines(dir.path(), &moved);
        assert_eq!(broken_at(verify(dir.path(), seal.clone())).0, 4);
        // An unchained line after the chain (by hand, or an older server): broken.
        let mut appended = now.clone();
        appended.push(legacy[2].clone());
        write_lines(dir.path(), &appended);
        assert_eq!(broken_at(verify(dir.path(), seal.clone())).0, 5);
        // A chained line written by hand with the right link but no key: broken (its MAC).
        let forged = format!(
            "{{\"seq\":5,\"prev\":\"sha256:{}\",\"type\":\"spent\",\"id\":\"state-x\",\"at_ms\":1}}",
            sha256_hex_bytes(now[3].as_bytes())
        );
        let mut hand = now.clone();
        hand.push(forged);
        write_lines(dir.path(), &hand);
        assert!(broken_at(verify(dir.path(), seal.clone()))
            .1
            .contains("MAC"));
        write_lines(dir.path(), &now);
        assert_eq!(verify(dir.path(), seal).unwrap().unchained, 3);
    }

    #[test]
    fn a_form_answer_is_read_by_action_and_decision() {
        let read = |v: Value| read_answer(&v);
        assert_eq!(
            read(
                serde_json::json!({"action": "accept", "content": {"decision": "approve", "note": " ok "}})
            ),
            Ok(FormAnswer::Approve { note: "ok".into() })
        );
        assert_eq!(
            read(serde_json::json!({"action": "accept", "content": {"approve": false}})),
            Ok(FormAnswer::Decline {
                note: String::new()
            })
        );
        assert_eq!(
            read(serde_json::json!({"action": "decline"})),
            Ok(FormAnswer::Decline {
                note: String::new()
            })
        );
        assert_eq!(
            read(serde_json::json!({"action": "cancel"})),
            Ok(FormAnswer::Cancel)
        );
        assert!(read(serde_json::json!({"action": "accept", "content": {}})).is_err());
        // Regression, attack round 8 (observation): a contradictory or unexpected answer
        // approved. Only an unambiguous approve approves; agreeing fields still do.
        for refused in [
            serde_json::json!({"decision": "approve", "approve": false}),
            serde_json::json!({"decision": "decline", "approve": true}),
            serde_json::json!({"decision": "approve", "approved": true}),
            serde_json::json!({"decision": "approve", "approve": "true"}),
            serde_json::json!({"decision": "approve", "note": 5}),
            serde_json::json!({"decision": "Approve "}),
            serde_json::json!("approve"),
        ] {
            assert!(
                read(serde_json::json!({"action": "accept", "content": refused})).is_err(),
                "{refused}"
            );
        }
        assert_eq!(
            read(serde_json::json!({"action": "accept",
                                    "content": {"decision": "approve", "approve": true}})),
            Ok(FormAnswer::Approve {
                note: String::new()
            })
        );
        assert!(read(serde_json::json!({"action": "approve"})).is_err());
        let long = "x".repeat(2 * MAX_NOTE_CHARS);
        match read(
            serde_json::json!({"action": "accept", "content": {"decision": "approve", "note": long}}),
        ) {
            Ok(FormAnswer::Approve { note }) => assert_eq!(note.chars().count(), MAX_NOTE_CHARS),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_form_schema_is_one_rmcp_accepts_and_the_message_shows_the_call() {
        let Value::Object(object) = form_schema() else {
            panic!("not an object")
        };
        rmcp::model::ElicitationSchema::from_json_schema(object).unwrap();
        let message = form_message(&serde_json::json!({
            "tool": "raster_reproject",
            "arguments": {"input": "in.tif", "dst_crs": "EPSG:4326"},
            "inputs": [{"path": "/w/in.tif", "sha256": "abc"}],
            "domain": "crs_datum", "severity": "critical", "reason": "a datum change",
            "evidence": [{"id": "crs_change", "fact": "from A to B.", "why": "positions move."}],
            "justification": null, "policy": "rule 1 asks a person",
        }));
        for shown in [
            "raster_reproject",
            "dst_crs = EPSG:4326",
            "/w/in.tif (sha256 abc)",
            "crs_change: from A to B.",
            "no justification",
            "rule 1 asks a person",
        ] {
            assert!(message.contains(shown), "{shown}: {message}");
        }
    }
    /// Regression, attack round 8, R8-4: the sign-off form's message carried a file name's
    /// ESC[2J and U+202E raw to hosts that show forms in a terminal.
    #[test]
    fn r8_4_the_form_message_escapes_what_came_from_the_agent_or_the_data() {
        let form = serde_json::json!({
            "tool": "vector_reproject",
            "arguments": {"input": "c\u{1b}[2J\u{202e}x.geojson"},
            "inputs": [{"path": "/w/c\u{1b}[2J\u{202e}x.geojson", "sha256": "ab"}],
            "domain": "crs_datum", "severity": "critical",
            "reason": "CRS T\u{9b}8m", "evidence": [{"id": "e", "fact": "f\u{1b}", "why": "w"}],
            "justification": {"text": "j\u{202e}"}, "policy": "p",
        });
        let message = form_message(&form);
        assert!(
            !message
                .chars()
                .any(|c| crate::terminal::is_unsafe(c) && c != '\n'),
            "{message:?}"
        );
        assert!(
            message.contains("c\\u{1b}[2J\\u{202e}x.geojson"),
            "{message}"
        );
        // The clean twin: an accented name is shown as it is.
        let clean =
            form_message(&serde_json::json!({"tool": "t", "inputs": [{"path": "Höhen.tif"}]}));
        assert!(clean.contains("Höhen.tif"), "{clean}");
    }
    /// Regression, attack round 8, R8-13: under a rule that covers the decision the form
    /// said the yes approved "this exact call only", once, while later calls ran on it.
    #[test]
    fn r8_13_the_form_says_what_a_covering_yes_covers() {
        let covering = form_message(&serde_json::json!({"tool": "t", "covers_decision": true}));
        assert!(covering.contains("later calls"), "{covering}");
        assert!(!covering.contains("this exact call only"), "{covering}");
        let once = form_message(&serde_json::json!({"tool": "t", "covers_decision": false}));
        assert!(once.contains("this exact call only"), "{once}");
    }
}
