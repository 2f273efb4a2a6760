//! The reflection middleware: before a risky call runs, every risk domain decides whether it
//! needs a methodological justification; missing ones refuse the call with an actionable
//! payload, supplied ones are validated and stored as portable capsules, and every gated call
//! leaves a receipt.
//!
//! * [`justification`]: the schema an agent fills in, and its validation;
//! * [`key`]: canonical JSON and decision keys;
//! * [`store`]: capsules on disk under `<store>/justifications/<domain>/`;
//! * [`ledger`]: the tamper-evident record of every decision and capsule, `<store>/ledger.jsonl`;
//! * [`lineage`]: how every output was made, `<store>/lineage/`, keyed by content;
//! * [`provenance`]: a file's lineage written up, as a methods section or W3C PROV-JSON;
//! * [`seal`]: the per-user key, outside every workspace, whose MACs seal lineage and ledger;
//! * [`journal`]: how the store opens and appends its files (no links, no FIFOs, sealed lines);
//! * [`approval`]: a person's sign-off of one call, for the policy's `human` outcome;
//! * [`policy`]: the operator's policy file, rules that make a domain's decision stricter;
//! * [`gate`]: the decision for one call.

pub mod approval;
pub mod gate;
pub mod journal;
pub mod justification;
pub mod key;
pub mod ledger;
pub mod lineage;
pub mod policy;
pub mod provenance;
pub mod seal;
mod stamp;
pub mod store;
