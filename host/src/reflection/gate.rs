//! The gate: the reflection decision for one tool call.
//!
//! For each loaded domain, in load order: classify the call; render the domain's questions for
//! the trigger and hash them; derive the decision key; then
//!
//! * `advisory` triggers proceed with a `warn` receipt;
//! * a valid stored capsule for the key proceeds with a `proceed` receipt;
//! * a *stale* capsule (the same decision, answered under an older prompt text or domain
//!   version) proceeds with a `warn` receipt naming it and what changed, or is ignored under
//!   `--stale refuse`;
//! * an inline justification for the domain is validated (schema, host rules, then the
//!   domain's own `validate`), stored, and proceeds;
//! * anything else is collected into one refusal that lists every missing domain at once.
//!
//! A domain that traps, loops or exhausts memory fails the whole call closed. Keys handed out
//! in refusals are remembered so that `persist_justification` accepts only those.
//!
//! Decisions chain: the capsules the inputs' upstream steps rested on (their lineage) are shown
//! in a refusal, with their choices, so the agent can justify consistently, and are recorded in
//! the capsule the call stores.

use super::approval::{self, Approvals, Binding, Standing};
use super::justification::{self, MAX_BYTES};
use super::key::{canonical_json, decision_key, key_hex, sha256_hex};
use super::ledger::{self, Ledger};
use super::policy::{Facts, Outcome, Policy, PolicyNote, Ruling};
use super::store::{self, Capsule, CapsulePrompt, CapsuleStore, StoreError};
use crate::config::StalePolicy;
use crate::domains::sandbox::PluginError;
use crate::domains::{CallFacts, Domain, EvidenceItem, FieldError, Registry, Severity, Trigger};
use crate::memo::Memo;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

/// What a receipt says happened for one domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Justified (stored capsule, or stored by this call).
    Proceed,
    /// Advisory: proceeds without a justification.
    Warn,
    /// Refused for want of a valid justification.
    Blocked,
}

/// One domain's part in a gated call.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Receipt {
    pub domain: String,
    pub plugin_version: String,
    pub severity: Severity,
    pub decision: Decision,
    pub reason: String,
    pub key: String,
    /// `justification://<domain>/<hex>` of the capsule that justified the call.
    pub capsule: Option<String>,
    /// True when this call stored the capsule (inline justification).
    pub stored_now: bool,
    /// The ids of the evidence items the decision rested on (the refusal and the capsule
    /// carry the items themselves).
    pub evidence: Vec<String>,
    /// When the call proceeded on a stale capsule (`decision` is then `warn`): what changed
    /// since it was written (prompt text, domain version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
    /// The operator's policy, when one of its rules matched this finding: its digest, the
    /// rule that decided, the outcome and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyNote>,
    /// The integrity of the capsule the decision rested on when the gate decided: a later
    /// justification for the same decision may replace the capsule (R16-C8), so the call's
    /// lineage record keeps which one it was (attack round 17, R17-C5). Not in the tool's
    /// result.
    #[serde(skip)]
    #[schemars(skip)]
    pub capsule_integrity: Option<String>,
}

/// A decision taken upstream: a capsule an input's making rested on.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UpstreamDecision {
    /// The step's tool, and how far up it is (1 = it wrote the input).
    pub tool: String,
    pub depth: u32,
    pub domain: String,
    /// `justification://<domain>/<hex>`.
    pub capsule: String,
    /// The chosen method and its rationale, when the capsule is still in the store.
    pub choice: Option<String>,
    pub rationale: Option<String>,
}

/// One missing or invalid justification in a refusal.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RefusalEntry {
    pub domain: String,
    pub plugin_version: String,
    pub severity: Severity,
    pub reason: String,
    /// The decision key to quote in `persist_justification`.
    pub key: String,
    /// What is being decided: the domain's key fields (the key hashes them).
    pub decision: Value,
    /// The findings behind the verdict, each with its numbers and, where one exists, a safe
    /// alternative as ready-to-use arguments.
    pub evidence: Vec<EvidenceItem>,
    pub prompt_name: String,
    pub prompt_arguments: BTreeMap<String, String>,
    /// The domain's questions for this decision (Markdown).
    pub prompt: String,
    /// The JSON Schema a justification must satisfy.
    pub schema: Value,
    /// Critical decisions must also list `assumptions` and answer every evidence item by id
    /// (`evidence.<id>`).
    pub requires_assumptions: bool,
    /// What was wrong with the justification supplied for this domain, if one was.
    pub errors: Vec<FieldError>,
    /// Decisions taken when the inputs were made (from their lineage), to justify
    /// consistently with.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstream_decisions: Vec<UpstreamDecision>,
    /// How to supply the justification.
    pub how_to_supply: String,
    /// The operator's policy, when one of its rules decided this refusal: its digest, the
    /// rule, the outcome (`justify`, `human` or `refuse`) and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyNote>,
}

/// A person's sign-off the gate asked for (a `human` outcome with no answer that holds): what
/// a host that shows forms puts in front of its user.
#[derive(Debug, Clone)]
pub struct SignOff {
    /// The request's id in `approvals.jsonl` (`gdal-mcp approve ID`).
    pub id: String,
    pub domain: String,
    pub binding: Binding,
    /// What the person reads ([`approval::form_message`]).
    pub form: Value,
    pub covers_decision: bool,
    /// Why the sign-off on record (if any) did not let the call through, in words ending in
    /// a space, or empty.
    pub standing: String,
    /// Why the policy asks for a person.
    pub explanation: String,
}

/// The gate's answer.
#[derive(Debug, Clone)]
pub enum Verdict {
    Proceed(Vec<Receipt>),
    Refuse {
        entries: Vec<RefusalEntry>,
        receipts: Vec<Receipt>,
        /// The sign-offs asked for, one per refusal entry that only a person's answer can
        /// lift (the entries of the same domains).
        sign_offs: Vec<SignOff>,
    },
}

/// Why the gate could not decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why `persist_justification` refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PersistError {
    #[error("unknown domain \"{domain}\"; loaded domains: {loaded}")]
    UnknownDomain { domain: String, loaded: String },
    #[error(
        "key {key} was not issued by this server for domain \"{domain}\"; call the gated tool \
         first and copy the key from its refusal"
    )]
    UnknownKey { domain: String, key: String },
    #[error(
        "the operator's policy has domain \"{domain}\"'s decision {key} wait for a person's \
         sign-off; no justification replaces it. Retry the call through a host that shows \
         forms, or have a person run `gdal-mcp approve` as the refusal says"
    )]
    AwaitsSignOff { domain: String, key: String },
    #[error("the justification is invalid")]
    Invalid(Vec<FieldError>),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A stored capsule, as reported back.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Stored {
    pub domain: String,
    pub key: String,
    pub uri: String,
    pub path: PathBuf,
}

/// A decision handed out in a refusal and not yet forgotten.
#[derive(Debug, Clone)]
struct Pending {
    domain: String,
    tool: String,
    severity: Severity,
    key_fields: Value,
    prompt: CapsulePrompt,
    evidence: Vec<EvidenceItem>,
    upstream_capsules: Vec<String>,
    /// The digest of the policy whose rule decided, if one did.
    policy: Option<String>,
    /// The prompt as the refusal showed it: its words are not an answer's own.
    asked: String,
}

#[derive(Clone)]
struct Rendered {
    text: String,
    sha256: String,
}

/// The reflection gate.
pub struct Gate {
    registry: Arc<Registry>,
    store: CapsuleStore,
    ledger: Ledger,
    /// Decisions refused and awaiting a justification, by key (the most recent
    /// [`ISSUED_ENTRIES`]; an older key is asked for again).
    issued: Memo<String, Pending>,
    /// Decisions refused until a person signs them off, by key and domain: a justification
    /// persisted for one is told so, not that its key is unknown (attack round 16, R16-C5).
    awaiting_sign_off: Memo<String, String>,
    /// Rendered prompts, by domain and arguments (a prompt's arguments carry caller input, a
    /// CRS say: bounded, issue 21).
    prompts: Memo<(String, String), Rendered>,
    /// Capsules (key, integrity) their domain accepted in this process.
    validated: Memo<(String, String), ()>,
    stale: StalePolicy,
    /// The newest capsule found per (domain, decision), for the stale lookup: the decision
    /// without its prompt hash, so a prompt or version change finds the old answer.
    decisions: Memo<(String, String), Option<String>>,
    /// The operator's policy (`--policy`), if any.
    policy: Option<Arc<Policy>>,
    /// Sign-offs for the policy's `human` outcome; `None` without a key that outlives the
    /// process (the outcome then refuses).
    approvals: Option<Approvals>,
    /// `sha256:` over the loaded domains' ids, versions and component digests (what a sign-off
    /// is bound to).
    components: String,
    /// Capsules stored by calls still running, by key, in the order they were stored: another
    /// call of the decision does not rest on one until its call has ended, so a cancelled
    /// call's justification answers none (attack round 17, R17-C3); and a withdrawn one puts
    /// back what it replaced (attack round 20, R20-C6). Entries leave when their call ends
    /// ([`Gate::end_call`]). Kept per call, not per key: with two calls of one decision in
    /// flight, cancelling one deleted the capsule the other had committed, or put its own
    /// back over it (attack round 21, R21-C2).
    stored_now: std::sync::Mutex<HashMap<String, Vec<StoredNow>>>,
}

/// A capsule a running call stored ([`Gate::stored_now`]).
struct StoredNow {
    /// The request that stored it ([`approval::as_holder`]).
    holder: u64,
    /// The domain it answers.
    domain: String,
    /// Its integrity: which capsule it is.
    integrity: String,
    /// The capsule it replaced in the store, put back if the call is withdrawn while its own
    /// capsule is still the stored one.
    replaced: Option<super::store::Capsule>,
}

/// Refused decisions remembered for `persist_justification`.
const ISSUED_ENTRIES: usize = 1024;
/// Rendered prompts memoised.
const PROMPT_ENTRIES: usize = 256;
/// Accepted capsules and stale lookups memoised.
const DECISION_ENTRIES: usize = 4096;

/// "Or avoid the decision: retry with {...}. " for the evidence that offers a safe alternative.
fn alternatives_line(evidence: &[EvidenceItem]) -> String {
    let offers: Vec<String> = evidence
        .iter()
        .filter_map(|e| e.alternative.as_ref().map(|a| format!("{a} ({})", e.id)))
        .collect();
    if offers.is_empty() {
        String::new()
    } else {
        format!(
            "Or avoid the decision: retry with {}. ",
            offers.join(" or ")
        )
    }
}

/// The first 12 hex digits of a `sha256:` value, for messages.
/// How a capsule found for a decision under another key came to differ from today's question.
enum Earlier {
    /// The same domain and prompt, asked of other data: the prompt arguments that differ, then
    /// and now.
    OtherData(String),
    /// The domain or its prompt text changed since: what changed.
    Stale(String),
}

/// The prompt arguments whose values differ between a capsule's and today's, in words: `data
/// type Float32` then, `data type Int16` now. Each value is cut to a readable length.
fn details_that_differ(then: &BTreeMap<String, String>, now: &[(String, String)]) -> String {
    const SHOWN_CHARS: usize = 160;
    let cut = |text: &str| -> String {
        let mut out: String = text.chars().take(SHOWN_CHARS).collect();
        if text.chars().count() > SHOWN_CHARS {
            out.push('…');
        }
        out
    };
    let differs: Vec<String> = now
        .iter()
        .filter(|(name, value)| then.get(name) != Some(value))
        .map(|(name, value)| {
            let earlier = then.get(name).map_or("(none)", String::as_str);
            format!("{name} was {:?} then, {:?} now", cut(earlier), cut(value))
        })
        .collect();
    if differs.is_empty() {
        "the prompt's details differ".to_string()
    } else {
        differs.join("; ")
    }
}

fn short(hash: &str) -> &str {
    let hex = hash.strip_prefix("sha256:").unwrap_or(hash);
    hex.get(..12).unwrap_or(hex)
}

/// A decision apart from its prompt text: the key fields and the evidence ids, hashed (what
/// a stale capsule must share with the call it answers).
fn decision_of(key_fields: &Value, evidence: &[EvidenceItem]) -> String {
    let ids: Vec<&str> = evidence.iter().map(|e| e.id.as_str()).collect();
    sha256_hex(&format!(
        "{}\n{}",
        canonical_json(key_fields),
        ids.join(",")
    ))
}

fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Advisory => "advisory",
        Severity::Required => "required",
        Severity::Critical => "critical",
    }
}

impl Gate {
    pub fn new(registry: Arc<Registry>, store: CapsuleStore) -> Self {
        Self {
            ledger: Ledger::new(store.root()),
            store,
            issued: Memo::new(ISSUED_ENTRIES),
            awaiting_sign_off: Memo::new(ISSUED_ENTRIES),
            prompts: Memo::new(PROMPT_ENTRIES),
            validated: Memo::new(DECISION_ENTRIES),
            stale: StalePolicy::default(),
            decisions: Memo::new(DECISION_ENTRIES),
            policy: None,
            approvals: None,
            stored_now: std::sync::Mutex::new(HashMap::new()),
            components: format!(
                "sha256:{}",
                sha256_hex(
                    &registry
                        .all()
                        .iter()
                        .map(|d| format!("{} {} {}\n", d.info.id, d.info.version, d.digest))
                        .collect::<String>()
                )
            ),
            registry,
        }
    }

    /// The same gate under the operator's policy.
    pub fn with_policy(mut self, policy: Option<Arc<Policy>>) -> Self {
        self.policy = policy;
        self
    }

    /// The operator's policy, if one is loaded.
    pub fn policy(&self) -> Option<&Arc<Policy>> {
        self.policy.as_ref()
    }

    /// What the policy says of a finding (the domain's own outcome when there is none).
    fn rule_on(&self, tool: &str, domain: &str, trigger: &Trigger, facts: &Facts) -> Ruling {
        match &self.policy {
            Some(policy) => policy.rule_on(tool, domain, trigger, facts),
            None => {
                let outcome = Outcome::of_severity(trigger.severity);
                Ruling {
                    outcome,
                    domain_outcome: outcome,
                    rule: None,
                    covers_decision: false,
                    explanation: "no policy is loaded: the domain's outcome stands".to_string(),
                }
            }
        }
    }

    /// Which rule decides each finding of a call, and why, without deciding anything
    /// (`gdal-mcp policy explain`). Blocking (plugin calls).
    pub fn explain(&self, call: &CallFacts) -> Result<Value, GateError> {
        let facts = Facts::of(call);
        let mut decisions = Vec::new();
        for domain in self.registry.all() {
            let Some(trigger) = domain.classify(call)? else {
                continue;
            };
            let ruling = self.rule_on(&call.tool, &domain.info.id, &trigger, &facts);
            decisions.push(serde_json::json!({
                "domain": domain.info.id,
                "severity": trigger.severity,
                "evidence": trigger.evidence.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
                "confidence": trigger.confidence,
                "relaxable": trigger
                    .evidence
                    .iter()
                    .filter(|e| e.relaxable)
                    .map(|e| e.id.clone())
                    .collect::<Vec<_>>(),
                "domain_outcome": ruling.domain_outcome,
                "outcome": ruling.outcome,
                "rule": ruling.rule,
                "covers_decision": ruling.covers_decision,
                "explanation": ruling.explanation,
            }));
        }
        Ok(serde_json::json!({
            "tool": call.tool,
            "policy": self.policy.as_ref().map(|p| p.digest.clone()),
            "facts": facts,
            "decisions": decisions,
        }))
    }

    /// The same gate, its ledger sealed under `seal`.
    pub fn with_seal(mut self, seal: Arc<super::seal::Seal>) -> Self {
        // A key of this process alone cannot bind a sign-off made by `gdal-mcp approve`.
        if seal.origin() != "in memory" {
            self.approvals = Some(Approvals::new(self.store.root(), seal.clone()));
        }
        self.ledger = Ledger::with_seal(self.store.root(), seal);
        self
    }

    /// The same gate with another stale policy.
    pub fn with_stale(mut self, stale: StalePolicy) -> Self {
        self.stale = stale;
        self
    }

    /// The ids of the loaded domains, in the registry's order.
    pub fn domain_ids(&self) -> Vec<String> {
        self.registry
            .all()
            .iter()
            .map(|d| d.info.id.clone())
            .collect()
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn store(&self) -> &CapsuleStore {
        &self.store
    }

    /// Append to the ledger. A decision the ledger cannot record fails closed (attack round 4,
    /// B6: a `ledger.jsonl` planted as a folder, FIFO or link silently stopped the ledger while
    /// gated calls went on): the call is refused before its work runs.
    fn record(&self, kind: &str, entry: &Value) -> Result<(), StoreError> {
        Ok(self.ledger.append(kind, entry)?)
    }

    /// Withdraw the capsules the call of request `holder` stored (`stored_now`) when the call
    /// did not go on: the
    /// client cancelled it, so nobody saw the justification accepted, and it must not answer
    /// later calls of the decision (attack round 16, R16-C2: a person who pressed stop had in
    /// fact approved the agent's reasoning for every later call). While the call's capsule is
    /// the stored one, it is removed, or gives back its place to the capsule it replaced
    /// (R16-C8, R20-C6); one another call has replaced since stays, and the capsule that call
    /// would give back on its own withdrawal becomes the one this call replaced (R21-C2). The
    /// ledger records the withdrawal, with the withdrawn capsule's integrity, after the
    /// capsule's own line.
    pub fn withdraw(&self, holder: u64, receipts: &[Receipt], why: &str) {
        for receipt in receipts.iter().filter(|r| r.stored_now) {
            if let Some(integrity) = &receipt.capsule_integrity {
                self.withdraw_one(holder, &receipt.domain, &receipt.key, integrity, why);
            }
        }
    }

    /// [`Self::withdraw`] for every capsule the call of request `holder` stored, whatever
    /// receipts it holds: a call that waited for a person's sign-off stored its inline
    /// justification in the first decision, and again in the second, and a cancel on the way
    /// left one standing (attack round 22, R22-C4).
    pub fn withdraw_call(&self, holder: u64, why: &str) {
        let stored: Vec<(String, String, String)> = self
            .stored_now_mut()
            .iter()
            .flat_map(|(key, list)| {
                list.iter()
                    .filter(|e| e.holder == holder)
                    .map(|e| (e.domain.clone(), key.clone(), e.integrity.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (domain, key, integrity) in stored.iter().rev() {
            self.withdraw_one(holder, domain, key, integrity, why);
        }
    }

    /// Withdraw the capsule of `integrity` that the call of `holder` stored for `key`.
    fn withdraw_one(&self, holder: u64, domain: &str, key: &str, integrity: &str, why: &str) {
        let mut stored_now = self.stored_now_mut();
        let list = stored_now.entry(key.to_string()).or_default();
        let Some(at) = list
            .iter()
            .position(|e| e.holder == holder && e.integrity == integrity)
        else {
            if list.is_empty() {
                stored_now.remove(key);
            }
            return;
        };
        let withdrawn = list.remove(at);
        for later in list.iter_mut() {
            if later
                .replaced
                .as_ref()
                .is_some_and(|c| c.integrity == withdrawn.integrity)
            {
                later.replaced = withdrawn.replaced.clone();
            }
        }
        if list.is_empty() {
            stored_now.remove(key);
        }
        drop(stored_now);
        let current = self.store.get(domain, key).map(|c| c.integrity);
        if current.as_deref() == Some(integrity) {
            if let Some(earlier) = &withdrawn.replaced {
                if let Err(e) = self.store.put(earlier) {
                    tracing::warn!("capsule {} not put back: {e}", earlier.uri());
                    return;
                }
            } else if let Ok(path) = self.store.file_of(domain, key) {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!("capsule {} not withdrawn: {e}", path.display());
                    return;
                }
            }
        }
        if let Err(e) = self.record(
            "withdrawal",
            &serde_json::json!({"domain": domain, "key": key, "integrity": integrity,
                                "why": why}),
        ) {
            tracing::warn!("withdrawal of {key} not recorded: {e}");
        }
    }

    /// The call of request `holder` has ended (its work committed, failed or was cancelled and
    /// withdrawn): the capsules it stored answer every call from now on.
    pub fn end_call(&self, holder: u64) {
        self.stored_now_mut().retain(|_, list| {
            list.retain(|e| e.holder != holder);
            !list.is_empty()
        });
    }

    fn stored_now_mut(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<StoredNow>>> {
        self.stored_now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `capsule` was stored by another call still running.
    fn stored_by_another_call(&self, capsule: &Capsule) -> bool {
        let current = approval::current_holder();
        self.stored_now_mut().get(&capsule.key).is_some_and(|list| {
            list.iter()
                .any(|e| e.integrity == capsule.integrity && Some(e.holder) != current)
        })
    }

    /// Render (memoised: rendering is deterministic by contract) and hash a domain's prompt.
    fn render(
        &self,
        domain: &Domain,
        arguments: &[(String, String)],
    ) -> Result<Rendered, PluginError> {
        let args_value = Value::Array(
            arguments
                .iter()
                .map(|(n, v)| {
                    Value::Array(vec![Value::String(n.clone()), Value::String(v.clone())])
                })
                .collect(),
        );
        let memo_key = (domain.info.id.clone(), canonical_json(&args_value));
        if let Some(hit) = self.prompts.get(&memo_key) {
            return Ok(hit);
        }
        let text = domain.render_prompt(arguments)?;
        let rendered = Rendered {
            sha256: sha256_hex(&text),
            text,
        };
        self.prompts.insert(memo_key, rendered.clone());
        Ok(rendered)
    }

    /// Decide a call. Blocking (plugin calls and store I/O): run it on a blocking worker.
    pub fn decide(
        &self,
        call: &CallFacts,
        inline: &BTreeMap<String, Value>,
    ) -> Result<Verdict, GateError> {
        self.decide_call(call, inline, &[])
    }

    /// [`Self::decide`], with the call's input files and their SHA-256 (what a person's
    /// sign-off is bound to).
    pub fn decide_call(
        &self,
        call: &CallFacts,
        inline: &BTreeMap<String, Value>,
        inputs: &[(String, Option<String>)],
    ) -> Result<Verdict, GateError> {
        let mut receipts = Vec::new();
        let mut entries = Vec::new();
        let mut sign_offs = Vec::new();
        // Computed once per call, only under a policy (the clean twin does no work).
        let facts = self.policy.as_ref().map(|_| Facts::of(call));
        for domain in self.registry.all() {
            let Some(trigger) = domain.classify(call)? else {
                continue;
            };
            let rendered = self.render(domain, &trigger.prompt_arguments)?;
            let id = &domain.info.id;
            let key = decision_key(id, &trigger.key_fields, &rendered.sha256, &trigger.evidence);
            let ruling = facts
                .as_ref()
                .map(|facts| self.rule_on(&call.tool, id, &trigger, facts));
            let note = ruling
                .as_ref()
                .and_then(|r| self.policy.as_ref().and_then(|policy| policy.note(r)));
            let outcome = ruling
                .as_ref()
                .map_or(Outcome::of_severity(trigger.severity), |r| r.outcome);
            let mut receipt = Receipt {
                domain: id.clone(),
                plugin_version: domain.info.version.clone(),
                severity: trigger.severity,
                decision: Decision::Proceed,
                reason: trigger.reason.clone(),
                key: key.clone(),
                capsule: None,
                stored_now: false,
                evidence: trigger.evidence.iter().map(|e| e.id.clone()).collect(),
                stale: None,
                policy: note.clone(),
                capsule_integrity: None,
            };
            match outcome {
                Outcome::Proceed => {
                    receipts.push(receipt);
                    continue;
                }
                Outcome::Warn => {
                    receipt.decision = Decision::Warn;
                    receipts.push(receipt);
                    continue;
                }
                Outcome::Human => {
                    let covers = ruling.as_ref().is_some_and(|r| r.covers_decision);
                    let explanation = note
                        .as_ref()
                        .map(|n| n.explanation.clone())
                        .unwrap_or_default();
                    match self.sign_off(
                        call,
                        inputs,
                        domain,
                        &trigger,
                        &key,
                        covers,
                        inline.get(id),
                        &explanation,
                    ) {
                        Ok(approved) => {
                            if let Some(policy) = receipt.policy.as_mut() {
                                policy.approval = Some(approved);
                            }
                            receipts.push(receipt);
                        }
                        Err((how, asked)) => {
                            self.awaiting_sign_off.insert(key.clone(), id.clone());
                            receipt.decision = Decision::Blocked;
                            receipts.push(receipt);
                            sign_offs.extend(asked.map(|b| *b));
                            let how = format!("{}{how}", alternatives_line(&trigger.evidence));
                            entries.push(
                                self.entry(call, domain, &trigger, &key, &rendered, how, note),
                            );
                        }
                    }
                    continue;
                }
                Outcome::Refuse => {
                    // Decided by the operator: no capsule and no inline justification passes.
                    receipt.decision = Decision::Blocked;
                    receipts.push(receipt);
                    let explanation = note
                        .as_ref()
                        .map(|n| n.explanation.clone())
                        .unwrap_or_default();
                    let how = format!(
                        "{}The operator's policy refuses this decision; no justification can \
                         pass it ({explanation}).",
                        alternatives_line(&trigger.evidence)
                    );
                    entries.push(self.entry(call, domain, &trigger, &key, &rendered, how, note));
                    continue;
                }
                Outcome::Justify => {}
            }
            // A justification given with the call is read even when the decision already has
            // a capsule, and replaces it once valid: the output's record then states the
            // purpose given for it (attack round 16, R16-C8: it was dropped, and the record
            // gave the earlier capsule's purpose for the new output).
            let mut replacing = None;
            if let Some(capsule) = self
                .store
                .get(id, &key)
                .filter(|capsule| !self.stored_by_another_call(capsule))
            {
                if self.still_valid(domain, &capsule)? {
                    if !inline.contains_key(id) {
                        receipt.capsule = Some(capsule.uri());
                        receipt.capsule_integrity = Some(capsule.integrity.clone());
                        receipts.push(receipt);
                        continue;
                    }
                    replacing = Some(capsule.uri());
                }
            }
            // A justification given with the call answers for itself.
            let earlier = if inline.contains_key(id) {
                None
            } else {
                self.stale_capsule(domain, &call.tool, &trigger, &rendered)?
            };
            match earlier {
                Some((capsule, Earlier::OtherData(differs))) => {
                    receipt.capsule = Some(capsule.uri());
                    receipt.capsule_integrity = Some(capsule.integrity.clone());
                    receipt.reason = format!(
                        "{} (the justification of this decision, given for other data, \
                         answers it: {differs})",
                        receipt.reason
                    );
                    receipts.push(receipt);
                    continue;
                }
                Some((capsule, Earlier::Stale(changed))) if self.stale == StalePolicy::Warn => {
                    receipt.decision = Decision::Warn;
                    receipt.capsule = Some(capsule.uri());
                    receipt.capsule_integrity = Some(capsule.integrity.clone());
                    receipt.reason = format!(
                        "{} (proceeding on a stale justification: {changed}; answer the \
                         current prompt to refresh it)",
                        receipt.reason
                    );
                    receipt.stale = Some(changed);
                    receipts.push(receipt);
                    continue;
                }
                _ => {}
            }
            let pending = Pending {
                domain: id.clone(),
                tool: call.tool.clone(),
                severity: trigger.severity,
                key_fields: trigger.key_fields.clone(),
                prompt: CapsulePrompt {
                    name: domain.info.prompt_name.clone(),
                    arguments: trigger.prompt_arguments.iter().cloned().collect(),
                    sha256: rendered.sha256.clone(),
                },
                evidence: trigger.evidence.clone(),
                upstream_capsules: call.upstream_capsules(),
                policy: note.as_ref().map(|n| n.digest.clone()),
                asked: rendered.text.clone(),
            };
            self.issued.insert(key.clone(), pending.clone());
            let errors = match inline.get(id) {
                Some(justification) => match self.accept(domain, &key, &pending, justification)? {
                    Ok(capsule) => {
                        if let Some(earlier) = &replacing {
                            receipt.reason = format!(
                                "{} (the justification given with this call replaces the one \
                                 stored for this decision, {earlier})",
                                receipt.reason
                            );
                        }
                        receipt.capsule = Some(capsule.uri());
                        receipt.capsule_integrity = Some(capsule.integrity.clone());
                        receipt.stored_now = true;
                        receipts.push(receipt);
                        continue;
                    }
                    Err(errors) => errors,
                },
                None => Vec::new(),
            };
            receipt.decision = Decision::Blocked;
            receipts.push(receipt);
            let how = format!(
                "{}{}Answer the prompt as a justification object (schema above, at most \
                 {MAX_BYTES} bytes){} and either retry this exact call with \
                 \"justification\": {{\"{id}\": {{...}}}}, or call persist_justification \
                 with domain \"{id}\", key \"{key}\" and the justification, then retry.",
                alternatives_line(&trigger.evidence),
                replacing.as_ref().map_or(String::new(), |earlier| format!(
                    "This decision is already justified by {earlier}: retry without a \
                     \"{id}\" justification to rest on it, or correct the one given to \
                     replace it. "
                )),
                if trigger.severity == Severity::Critical {
                    format!(
                        ", with `assumptions` and an `evidence` object answering {}",
                        trigger
                            .evidence
                            .iter()
                            .map(|e| format!("\"{}\"", e.id))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    String::new()
                }
            );
            let mut entry = self.entry(call, domain, &trigger, &key, &rendered, how, note);
            entry.errors = errors;
            entries.push(entry);
        }
        if !receipts.is_empty() {
            self.record("gate", &ledger::gate_entry(&call.tool, &receipts))?;
        }
        Ok(if entries.is_empty() {
            Verdict::Proceed(receipts)
        } else {
            Verdict::Refuse {
                entries,
                receipts,
                sign_offs,
            }
        })
    }

    /// The sign-offs of this gate's store, when it has a key that outlives the server.
    pub fn approvals(&self) -> Option<&Approvals> {
        self.approvals.as_ref()
    }

    /// Append a sign-off's line (`approval`, `denial`, `expiry`) to the ledger, between the
    /// refused call's `gate` line and the `gate` line of the call it lets through.
    pub fn record_sign_off(&self, kind: &str, entry: &Value) -> Result<(), StoreError> {
        self.record(kind, entry)
    }

    /// A person's sign-off for a `human` outcome: `Ok` with who approved and their note when
    /// an answer on record holds for the call as it is now (a single-use one is used up);
    /// otherwise a request is recorded and `Err` says how a person signs it off through the
    /// terminal route, with the request for a host that shows forms (`None` when the server
    /// cannot take a sign-off at all).
    #[allow(clippy::too_many_arguments)]
    fn sign_off(
        &self,
        call: &CallFacts,
        inputs: &[(String, Option<String>)],
        domain: &Domain,
        trigger: &Trigger,
        key: &str,
        covers: bool,
        justification: Option<&Value>,
        explanation: &str,
    ) -> Result<String, (String, Option<Box<SignOff>>)> {
        let Some(approvals) = &self.approvals else {
            return Err((
                format!(
                    "The operator's policy needs a person to sign this exact call off \
                 ({explanation}), and this server has no sealing key that outlives it to bind a \
                 sign-off to: the call is refused."
                ),
                None,
            ));
        };
        // The justification enters the form and the journal: it is held to the same size as
        // on every other path (attack round 10, R10-11: 1 MB justifications filled the journal).
        if let Some(size) = justification
            .map(|j| j.to_string().len())
            .filter(|size| *size > MAX_BYTES)
        {
            return Err((
                format!(
                    "The operator's policy needs a person to sign this exact call off \
                     ({explanation}); the justification is {size} bytes of JSON, and the limit \
                     is {}: be concise (it is shown to the person as written).",
                    MAX_BYTES
                ),
                None,
            ));
        }
        // A sign-off that covers the decision holds for later calls of it that write elsewhere
        // (attack round 7, R7-9: another `output` name made it "no longer hold"): the output
        // path and `overwrite` are left out of its arguments; the decision key, the inputs
        // and their digests, the policy and the pack are still bound.
        let bound_arguments = if covers {
            let mut arguments = call.arguments.clone();
            if let Some(map) = arguments.as_object_mut() {
                map.remove("output");
                map.remove("overwrite");
            }
            arguments
        } else {
            call.arguments.clone()
        };
        // Everything GDAL reads for the inputs is bound too: their sidecars (attack round 7,
        // R7-2) and a VRT's sources with theirs (attack round 10, R10-1). A set that cannot
        // be bound refuses the sign-off rather than approve data it does not cover.
        let read = approval::read_set_digests(inputs).map_err(|why| {
            (
                format!(
                    "The operator's policy needs a person to sign this exact call off \
                     ({explanation}), and a sign-off cannot be bound to everything GDAL reads \
                     for it: {why}. The call is refused; a person can approve a call on data \
                     whose every file the server can list and hash (build the VRT over files \
                     in a workspace, or copy the data into one file, e.g. with raster_convert)."
                ),
                None,
            )
        })?;
        let binding = Binding {
            tool: call.tool.clone(),
            arguments: approval::arguments_digest(&bound_arguments),
            inputs: [inputs, &read].concat(),
            decision_key: key.to_string(),
            domain: domain.info.id.clone(),
            policy: self
                .policy
                .as_ref()
                .map(|p| p.digest.clone())
                .unwrap_or_default(),
            components: self.components.clone(),
        };
        let id = approval::id_of(&binding, covers);
        let failed = |e: approval::ApprovalError| {
            (
                format!(
                    "The operator's policy needs a person's sign-off, which cannot be read: {e}."
                ),
                None,
            )
        };
        let before = match approvals.standing(&id, &binding).map_err(failed)? {
            // An answer another request carried is that request's (R17-C2): this one asks
            // for its own.
            Standing::Approved { .. } if approvals.held_by_another(&id) => String::new(),
            Standing::Approved { note, by } => {
                if covers {
                    // A sign-off of the decision holds for every later call once its own
                    // request has used it.
                    approvals.release(&id);
                } else {
                    approvals.consume(&id).map_err(failed)?;
                }
                return Ok(format!(
                    "approved by a person ({by}) as sign-off {id}{}",
                    if note.is_empty() {
                        String::new()
                    } else {
                        format!(": \"{note}\"")
                    }
                ));
            }
            Standing::Unanswered => String::new(),
            Standing::Declined { note, by } => format!(
                "A person declined this call ({by}{}). ",
                if note.is_empty() {
                    String::new()
                } else {
                    format!(": \"{note}\"")
                }
            ),
            Standing::Invalid(why) => format!("The sign-off on record no longer holds: {why}. "),
        };
        let form = serde_json::json!({
            "tool": call.tool,
            "arguments": call.arguments,
            "inputs": binding.inputs.iter().map(|(p, d)| serde_json::json!({"path": p, "sha256": d})).collect::<Vec<_>>(),
            "domain": domain.info.id,
            "severity": trigger.severity,
            "reason": trigger.reason,
            "evidence": trigger.evidence,
            "justification": justification,
            "policy": explanation,
            "covers_decision": covers,
        });
        let id = approvals
            .request(binding.clone(), form.clone(), covers)
            .map_err(failed)?;
        Err((
            format!(
                "{before}The operator's policy needs a person to sign this exact call off \
                 ({explanation}). This host cannot show forms: a person runs `gdal-mcp approve \
                 {id} --store {}` in a terminal, reads the call and its findings, and answers \
                 yes or no; then retry this exact call. The sign-off is bound to these \
                 arguments, the input files' contents, the policy and the loaded domains, \
                 expires in {} and is used {}. No justification or argument replaces it.",
                self.store.root().display(),
                approval::ttl_words(),
                if covers {
                    "for this decision from then on"
                } else {
                    "once"
                }
            ),
            Some(Box::new(SignOff {
                id,
                domain: domain.info.id.clone(),
                binding,
                form,
                covers_decision: covers,
                standing: before,
                explanation: explanation.to_string(),
            })),
        ))
    }

    /// A refusal entry for one domain's finding.
    #[allow(clippy::too_many_arguments)]
    fn entry(
        &self,
        call: &CallFacts,
        domain: &Domain,
        trigger: &Trigger,
        key: &str,
        rendered: &Rendered,
        how_to_supply: String,
        policy: Option<PolicyNote>,
    ) -> RefusalEntry {
        RefusalEntry {
            domain: domain.info.id.clone(),
            plugin_version: domain.info.version.clone(),
            severity: trigger.severity,
            reason: trigger.reason.clone(),
            key: key.to_string(),
            decision: trigger.key_fields.clone(),
            evidence: trigger.evidence.clone(),
            prompt_name: domain.info.prompt_name.clone(),
            prompt_arguments: trigger.prompt_arguments.iter().cloned().collect(),
            prompt: rendered.text.clone(),
            schema: justification::schema(),
            requires_assumptions: trigger.severity == Severity::Critical,
            errors: Vec::new(),
            upstream_decisions: self.upstream_decisions(call),
            how_to_supply,
            policy,
        }
    }

    /// A capsule of `domain` for the same decision (key fields and evidence ids) whose prompt
    /// text or domain version differs from today's, if it answers today's question: the
    /// finding is no more severe than it was, and its justification passes the checks against
    /// today's evidence (the measured figures of this call), as a new one would; with how it
    /// differs, in words: [`Earlier::OtherData`] when the same domain's same prompt was asked
    /// of other data, [`Earlier::Stale`] when the domain or its prompt changed.
    ///
    /// The prompt text carries the measured figures, so new data under the same decision
    /// changes it too: a justification accepting "up to 5 %" for a 3.9 % scale error let a
    /// 303.5 % (critical) call of the same CRS pair run on a `warn` receipt when it was checked
    /// against the capsule's own evidence (attack round 15, R15-C3).
    ///
    /// Only a capsule of the same tool answers: the question is put per tool.
    fn stale_capsule(
        &self,
        domain: &Domain,
        tool: &str,
        trigger: &Trigger,
        rendered: &Rendered,
    ) -> Result<Option<(Capsule, Earlier)>, GateError> {
        let (key_fields, evidence) = (&trigger.key_fields, trigger.evidence.as_slice());
        let id = &domain.info.id;
        let ids: Vec<&str> = evidence.iter().map(|e| e.id.as_str()).collect();
        let memo_key = (format!("{id}\n{tool}"), decision_of(key_fields, evidence));
        let remembered = self.decisions.get(&memo_key);
        let key = match remembered {
            Some(key) => key,
            None => {
                let newest = self
                    .store
                    .list(&[id.as_str()])
                    .into_iter()
                    .filter(|c| {
                        c.tool == tool
                            && &c.key_fields == key_fields
                            && c.evidence
                                .iter()
                                .map(|e| e.id.as_str())
                                .eq(ids.iter().copied())
                    })
                    .max_by(|a, b| a.created_at.cmp(&b.created_at))
                    .map(|c| c.key);
                // Only a capsule found is remembered: "none yet" would hide the capsule the
                // same process stores next for this decision (the call after a justified one
                // was asked again; found with R15-C3's twin). A capsule stored later replaces
                // the remembered one in `accept`.
                if newest.is_some() {
                    self.decisions.insert(memo_key.clone(), newest.clone());
                }
                newest
            }
        };
        let Some(capsule) = key
            .and_then(|k| self.store.get(id, &k))
            .filter(|capsule| !self.stored_by_another_call(capsule))
        else {
            return Ok(None);
        };
        if capsule.prompt.sha256 == rendered.sha256 && capsule.domain_version == domain.info.version
        {
            return Ok(None);
        }
        if !self.answers_today(domain, &capsule, trigger)? {
            return Ok(None);
        }
        // The same domain asking the same question of other data: its prompt, rendered from
        // the capsule's own arguments today, is the one the capsule answered. Only the data's
        // details (a data type, a measured figure) differ, and the checks above held them
        // against today's evidence (attack round 20, R20-C8: a Float64 copy of a justified
        // Float32 DEM ran on a `warn` receipt saying the domain's prompt had changed).
        if capsule.domain_version == domain.info.version {
            let arguments: Vec<(String, String)> = capsule
                .prompt
                .arguments
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            if self.render(domain, &arguments)?.sha256 == capsule.prompt.sha256 {
                return Ok(Some((
                    capsule.clone(),
                    Earlier::OtherData(details_that_differ(
                        &capsule.prompt.arguments,
                        &trigger.prompt_arguments,
                    )),
                )));
            }
        }
        let mut changed = Vec::new();
        if capsule.prompt.sha256 != rendered.sha256 {
            changed.push(format!(
                "the domain's prompt text changed (sha256 {} then, {} now)",
                short(&capsule.prompt.sha256),
                short(&rendered.sha256)
            ));
        }
        if capsule.domain_version != domain.info.version {
            changed.push(format!(
                "domain {id} was {} then, {} now",
                capsule.domain_version, domain.info.version
            ));
        }
        Ok(Some((
            capsule.clone(),
            Earlier::Stale(format!(
                "capsule {} answered an older question: {}",
                capsule.uri(),
                changed.join("; ")
            )),
        )))
    }

    /// The decisions the inputs' upstream steps rested on, with their choices.
    fn upstream_decisions(&self, call: &CallFacts) -> Vec<UpstreamDecision> {
        let mut out: Vec<UpstreamDecision> = Vec::new();
        for step in call.upstream.iter().flat_map(|l| l.steps.iter()) {
            for uri in &step.capsules {
                if out.iter().any(|d| &d.capsule == uri) {
                    continue;
                }
                let parsed = uri
                    .strip_prefix("justification://")
                    .and_then(|rest| rest.split_once('/'));
                let Some((domain, hex)) = parsed else {
                    continue;
                };
                let capsule = self.store.get(domain, &format!("sha256:{hex}"));
                out.push(UpstreamDecision {
                    tool: step.tool.clone(),
                    depth: step.depth,
                    domain: domain.to_string(),
                    capsule: uri.clone(),
                    choice: capsule
                        .as_ref()
                        .map(|c| c.justification.choice.method.0.clone()),
                    rationale: capsule.map(|c| c.justification.choice.rationale.0),
                });
            }
        }
        out
    }

    /// Whether a stored capsule still passes its domain's own checks. A capsule written into
    /// the store by anything but this server (a planted file, an older domain's checks) is
    /// honoured only if the domain that would receive it today accepts it.
    /// Whether a stale `capsule` answers today's question ([`Self::stale_capsule`]): its
    /// severity is today's or stricter, and its justification passes the generic and the
    /// domain's checks against today's key fields and evidence.
    fn answers_today(
        &self,
        domain: &Domain,
        capsule: &Capsule,
        trigger: &Trigger,
    ) -> Result<bool, GateError> {
        let rank = |name: &str| match name {
            "critical" => 2,
            "required" => 1,
            _ => 0,
        };
        if rank(&capsule.severity) < rank(severity_name(trigger.severity)) {
            return Ok(false);
        }
        let justification = serde_json::to_value(&capsule.justification).unwrap_or(Value::Null);
        let critical = trigger.severity == Severity::Critical;
        if justification::validate(&justification, critical, &trigger.evidence).is_err() {
            return Ok(false);
        }
        let errors = domain.validate(&trigger.key_fields, &trigger.evidence, &justification)?;
        if !errors.is_empty() {
            tracing::info!(
                "stale capsule {} does not answer today's {} question: {}",
                capsule.uri(),
                domain.info.id,
                errors
                    .iter()
                    .map(|e| format!("{} {}", e.path, e.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        Ok(errors.is_empty())
    }

    fn still_valid(&self, domain: &Domain, capsule: &Capsule) -> Result<bool, GateError> {
        let memo = (capsule.key.clone(), capsule.integrity.clone());
        if self.validated.get(&memo).is_some() {
            return Ok(true);
        }
        let justification = serde_json::to_value(&capsule.justification).unwrap_or(Value::Null);
        let errors = domain.validate(&capsule.key_fields, &capsule.evidence, &justification)?;
        if !errors.is_empty() {
            tracing::warn!(
                "ignoring capsule {}: domain {} {} rejects it now: {}",
                capsule.uri(),
                domain.info.id,
                domain.info.version,
                errors
                    .iter()
                    .map(|e| format!("{} {}", e.path, e.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        if errors.is_empty() {
            self.validated.insert(memo, ());
        }
        Ok(errors.is_empty())
    }

    /// Validate and store a justification for a pending decision. The outer error is a
    /// failure to decide; the inner one lists what is wrong with the justification.
    fn accept(
        &self,
        domain: &Domain,
        key: &str,
        pending: &Pending,
        justification: &Value,
    ) -> Result<Result<Capsule, Vec<FieldError>>, GateError> {
        let critical = pending.severity == Severity::Critical;
        let typed = match justification::validate(justification, critical, &pending.evidence) {
            Ok(typed) => typed,
            Err(errors) => return Ok(Err(errors)),
        };
        let domain_errors =
            domain.validate(&pending.key_fields, &pending.evidence, justification)?;
        if !domain_errors.is_empty() {
            return Ok(Err(domain_errors));
        }
        // Words of its own, beyond the refusal's: the prompt, the findings, and the hints
        // the domain gives for an empty answer (what an agent copies from a refusal).
        let hints = domain.validate(
            &pending.key_fields,
            &pending.evidence,
            &serde_json::json!({}),
        )?;
        let findings: Vec<&str> = pending
            .evidence
            .iter()
            .flat_map(|item| [item.fact.as_str(), item.why.as_str()])
            .collect();
        let mut asked: Vec<&str> = vec![pending.asked.as_str()];
        asked.extend(findings.iter().copied());
        asked.extend(hints.iter().map(|h| h.message.as_str()));
        let copied = justification::own_words(justification, &asked, &findings);
        if !copied.is_empty() {
            return Ok(Err(copied));
        }
        let mut capsule = Capsule {
            format: store::FORMAT.to_string(),
            key: key.to_string(),
            domain: pending.domain.clone(),
            domain_version: domain.info.version.clone(),
            tool: pending.tool.clone(),
            severity: severity_name(pending.severity).to_string(),
            key_fields: pending.key_fields.clone(),
            prompt: pending.prompt.clone(),
            evidence: pending.evidence.clone(),
            justification: typed,
            upstream_capsules: pending.upstream_capsules.clone(),
            policy: pending.policy.clone(),
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            server_version: crate::VERSION.to_string(),
            integrity: String::new(),
        };
        capsule.integrity = capsule.compute_integrity();
        // The ledger is opened (and checked) before the capsule is written, and a capsule whose
        // ledger line cannot be appended is removed again: a capsule is never stored without
        // its entry in the decision record.
        let mut ledger_file = self.ledger.open_for_append().map_err(StoreError::from)?;
        let existed = self
            .store
            .file_of(&capsule.domain, &capsule.key)
            .is_ok_and(|path| std::fs::symlink_metadata(path).is_ok());
        // The capsule this one replaces is kept, so that an output that rested on it still
        // gives its own purpose (attack round 17, R17-C5).
        let mut replaced = None;
        if existed {
            if let Some(earlier) = self
                .store
                .get(&capsule.domain, &capsule.key)
                .filter(|earlier| earlier.integrity != capsule.integrity)
            {
                if let Err(e) = self.store.keep_replaced(&earlier) {
                    tracing::warn!("the replaced capsule {} was not kept: {e}", earlier.uri());
                }
                replaced = Some(earlier);
            }
        }
        let path = self.store.put(&capsule)?;
        if let Some(holder) = approval::current_holder() {
            self.stored_now_mut()
                .entry(capsule.key.clone())
                .or_default()
                .push(StoredNow {
                    holder,
                    domain: capsule.domain.clone(),
                    integrity: capsule.integrity.clone(),
                    replaced,
                });
        }
        if let Err(e) = self.ledger.append_to(
            &mut ledger_file,
            "capsule",
            &ledger::capsule_entry(&capsule),
        ) {
            if !existed {
                if let Err(removed) = std::fs::remove_file(&path) {
                    tracing::warn!("capsule {} not removed: {removed}", path.display());
                }
            }
            return Err(StoreError::from(e).into());
        }
        // The newest capsule of its decision, for the stale path.
        self.decisions.insert(
            (
                format!("{}\n{}", capsule.domain, capsule.tool),
                decision_of(&capsule.key_fields, &capsule.evidence),
            ),
            Some(capsule.key.clone()),
        );
        Ok(Ok(capsule))
    }

    /// `persist_justification`: store a justification for a key this server issued.
    pub fn persist(
        &self,
        domain_id: &str,
        key: &str,
        justification: &Value,
    ) -> Result<Stored, PersistError> {
        let Some(domain) = self.registry.get(domain_id) else {
            return Err(PersistError::UnknownDomain {
                domain: domain_id.to_string(),
                loaded: self
                    .registry
                    .all()
                    .iter()
                    .map(|d| d.info.id.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let unknown = || PersistError::UnknownKey {
            domain: domain_id.to_string(),
            key: key.to_string(),
        };
        if key_hex(key).is_none() {
            return Err(unknown());
        }
        let Some(pending) = self
            .issued
            .get(&key.to_string())
            .filter(|p| p.domain == domain_id)
        else {
            if self
                .awaiting_sign_off
                .get(&key.to_string())
                .is_some_and(|d| d == domain_id)
            {
                return Err(PersistError::AwaitsSignOff {
                    domain: domain_id.to_string(),
                    key: key.to_string(),
                });
            }
            return Err(unknown());
        };
        match self.accept(domain, key, &pending, justification) {
            Ok(Ok(capsule)) => Ok(Stored {
                domain: capsule.domain.clone(),
                key: capsule.key.clone(),
                uri: capsule.uri(),
                path: self
                    .store
                    .root()
                    .join("justifications")
                    .join(&capsule.domain)
                    .join(format!("{}.json", key.trim_start_matches("sha256:"))),
            }),
            Ok(Err(errors)) => Err(PersistError::Invalid(errors)),
            Err(GateError::Plugin(e)) => Err(PersistError::Plugin(e)),
            Err(GateError::Store(e)) => Err(PersistError::Store(e)),
        }
    }
}
