//! A file's lineage written up: a methods section in Markdown, or a W3C PROV-JSON document.
//!
//! Both are built from the lineage records (`super::lineage`) reachable from the file's
//! content digest, and from the capsules those records name (`super::store`): what was done,
//! in order, with its parameters; each decision with its choice, rationale, open assumptions
//! and conditions for revisit; the software versions; and every step whose input had been
//! modified outside the server, flagged. The `provenance_report` tool, the `lineage://`
//! resource and the `gdal-mcp provenance` command all come here.

use super::lineage::{self, LineageStore, Record};
use super::store::{Capsule, CapsuleStore};
use crate::terminal::escape;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The two renderings: a methods section (Markdown) or W3C PROV-JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Markdown,
    ProvJson,
}

/// Why no report could be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProvenanceError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// A report on one file.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Report {
    /// SHA-256 of the file (hex); for a file above the hashing budget
    /// (`GDAL_MCP_HASH_MAX_BYTES`), its partial digest instead, labelled `partial-sha256:`
    /// (its size and sampled windows, not its whole content).
    pub sha256: String,
    /// Steps found in its lineage (0 when the server did not make this content).
    pub steps: usize,
    /// The server wrote this path with other content: the file was modified outside it.
    pub modified_since: bool,
    /// Steps that read an input modified outside the server.
    pub broken_links: usize,
    /// The report: Markdown, or PROV-JSON text.
    pub report: String,
}

/// The report for the file at `path`.
pub fn report(
    lineage: &LineageStore,
    capsules: &CapsuleStore,
    path: &Path,
    format: Format,
) -> Result<Report, ProvenanceError> {
    report_until(lineage, capsules, path, format, &|| false)
}

/// [`report`], its hashing stopped (an error) as soon as `stop` says so.
pub fn report_until(
    lineage: &LineageStore,
    capsules: &CapsuleStore,
    path: &Path,
    format: Format,
    stop: &dyn Fn() -> bool,
) -> Result<Report, ProvenanceError> {
    let sha256 =
        lineage
            .dataset_digest_until(path, stop)
            .map_err(|source| ProvenanceError::Read {
                path: path.display().to_string(),
                source,
            })?;
    let file = lineage.input("input", path);
    Ok(report_for_digest(
        lineage,
        capsules,
        &sha256,
        Some(path),
        file.modified_outside,
        format,
    ))
}

/// The report for content `sha256` (the `lineage://` resource names content, not a path).
pub fn report_for_digest(
    lineage: &LineageStore,
    capsules: &CapsuleStore,
    sha256: &str,
    path: Option<&Path>,
    modified_since: bool,
    format: Format,
) -> Report {
    let mut records: Vec<(u32, Record)> = lineage.walk(sha256);
    // In the order they ran.
    records.sort_by(|a, b| a.1.finished_at.cmp(&b.1.finished_at).then(b.0.cmp(&a.0)));
    let decisions = capsules_of(capsules, &records);
    let broken_links = records
        .iter()
        .filter(|(_, r)| r.inputs.iter().any(|i| i.modified_outside))
        .count();
    let text = match format {
        Format::Markdown => {
            let beyond = lineage.beyond(sha256);
            markdown(sha256, path, modified_since, &records, &decisions, &beyond)
        }
        Format::ProvJson => {
            serde_json::to_string_pretty(&prov_json(&records, &decisions)).unwrap_or_default()
        }
    };
    Report {
        sha256: sha256.to_string(),
        steps: records.len(),
        modified_since,
        broken_links,
        report: text,
    }
}

/// The capsules the records name, by URI (those still in the store); and, under
/// `URI#integrity`, the capsule a receipt rested on where another has replaced it since
/// ([`CapsuleStore::replaced`], R17-C5).
fn capsules_of(store: &CapsuleStore, records: &[(u32, Record)]) -> BTreeMap<String, Capsule> {
    let mut out = BTreeMap::new();
    let parse = |uri: &str| -> Option<(String, String)> {
        let (domain, hex) = uri.strip_prefix("justification://")?.split_once('/')?;
        Some((domain.to_string(), format!("sha256:{hex}")))
    };
    for (_, record) in records {
        for uri in &record.capsules {
            if let Some((domain, key)) = parse(uri) {
                if let Some(capsule) = store.get(&domain, &key) {
                    out.insert(uri.clone(), capsule);
                }
            }
        }
        for receipt in &record.receipts {
            let (Some(uri), Some(integrity)) = (
                receipt["capsule"].as_str(),
                receipt["capsule_integrity"].as_str(),
            ) else {
                continue;
            };
            if out.get(uri).is_some_and(|c| c.integrity == integrity) {
                continue;
            }
            if let Some((domain, key)) = parse(uri) {
                if let Some(capsule) = store.replaced(&domain, &key, integrity) {
                    out.insert(format!("{uri}#{integrity}"), capsule);
                }
            }
        }
    }
    out
}

/// The capsule a receipt rested on: the one in the store when it is still that one, else the
/// one kept when it was replaced.
fn rested_on<'a>(decisions: &'a BTreeMap<String, Capsule>, receipt: &Value) -> Option<&'a Capsule> {
    let uri = receipt["capsule"].as_str()?;
    match receipt["capsule_integrity"].as_str() {
        Some(integrity) => decisions
            .get(uri)
            .filter(|c| c.integrity == integrity)
            .or_else(|| decisions.get(&format!("{uri}#{integrity}"))),
        None => decisions.get(uri),
    }
}

fn file_name(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}

/// A file's name as the Markdown report shows it: every control, format or line-separator
/// character made visible (`\u{a}`), so a name holding a line feed cannot start a line of its
/// own in the report (attack round 8: `gdal-mcp provenance` printed LF raw).
fn shown_name(path: &str) -> String {
    escape(file_name(path))
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

/// A content digest in words: `SHA-256 `hex``, or a partial digest named as such (never
/// presented as a SHA-256 of the file); the first 12 digits when `shorten`.
fn digest_words(digest: &str, shorten: bool) -> String {
    match digest.strip_prefix(lineage::PARTIAL_PREFIX) {
        Some(hex) => format!(
            "partial digest `{}{}`: the file is above the hashing budget, so this digest \
             covers its size and {} sampled windows of {} MiB, not its whole content",
            lineage::PARTIAL_PREFIX,
            if shorten { short(hex) } else { hex },
            lineage::PARTIAL_WINDOWS,
            lineage::PARTIAL_WINDOW >> 20
        ),
        None => format!("SHA-256 `{}`", if shorten { short(digest) } else { digest }),
    }
}

/// An argument value in words (strings escaped as [`shown_name`] does).
fn words(value: &Value) -> String {
    match value {
        Value::String(s) => escape(s),
        Value::Array(items) => items.iter().map(words).collect::<Vec<_>>().join(", "),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{}={}", escape(k), words(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Arguments that name files or the call's mechanics, not the method.
const NOT_PARAMETERS: [&str; 5] = ["input", "inputs", "output", "overwrite", "justification"];

fn markdown(
    sha256: &str,
    path: Option<&Path>,
    modified_since: bool,
    records: &[(u32, Record)],
    decisions: &BTreeMap<String, Capsule>,
    beyond: &lineage::Beyond,
) -> String {
    let mut md = String::new();
    let name = escape(
        path.and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("this file"),
    );
    let _ = writeln!(md, "# Methods: {name}\n");
    if records.is_empty() {
        let _ = writeln!(
            md,
            "No lineage record matches this content ({}): gdal-mcp did not make it{}.",
            digest_words(sha256, false),
            if modified_since {
                ", or it was modified outside the server after gdal-mcp wrote it (this path \
                 was written by gdal-mcp with other content)"
            } else {
                ""
            }
        );
        return md;
    }
    let _ = writeln!(
        md,
        "`{name}` ({}) was made by gdal-mcp in {} step{}.\n",
        digest_words(sha256, false),
        records.len(),
        if records.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(md, "## Steps\n");
    for (index, (_, record)) in records.iter().enumerate() {
        let inputs: Vec<String> = record
            .inputs
            .iter()
            .map(|i| {
                format!(
                    "`{}` ({})",
                    shown_name(&i.path),
                    i.sha256
                        .as_deref()
                        .map_or_else(|| "not hashed".to_string(), |d| digest_words(d, true))
                )
            })
            .collect();
        let outputs: Vec<String> = record
            .outputs
            .iter()
            .map(|o| format!("`{}`", shown_name(&o.path)))
            .collect();
        let mut how = Vec::new();
        if let Some(change) = &record.summary.crs_change {
            how.push(format!("from {}", change.replace(" -> ", " to ")));
        }
        if let Some(method) = &record.summary.resampling {
            how.push(format!("resampling with {method}"));
        }
        if let Some(method) = &record.summary.conditioning {
            how.push(format!("by {method}"));
        }
        if let Some(aggregation) = &record.summary.aggregation {
            how.push(format!("taking the {aggregation}"));
        }
        if let Some(encoding) = &record.summary.lossy_encoding {
            how.push(format!("with lossy {encoding} encoding"));
        }
        let _ = writeln!(
            md,
            "{}. **{}** {} with `{}`{}, writing {} ({}).",
            index + 1,
            if record.verb.is_empty() {
                "Processed"
            } else {
                record.verb.as_str()
            },
            if inputs.is_empty() {
                "nothing read".to_string()
            } else {
                inputs.join(" and ")
            },
            record.tool,
            if how.is_empty() {
                String::new()
            } else {
                format!(", {}", how.join(", "))
            },
            outputs.join(", "),
            record.finished_at
        );
        let parameters: Vec<String> = record
            .arguments
            .as_object()
            .map(|a| {
                a.iter()
                    .filter(|(k, _)| !NOT_PARAMETERS.contains(&k.as_str()))
                    .map(|(k, v)| format!("{} {}", escape(&k.replace('_', " ")), words(v)))
                    .collect()
            })
            .unwrap_or_default();
        if !parameters.is_empty() {
            let _ = writeln!(md, "   - Parameters: {}.", parameters.join("; "));
        }
        for command in &record.commands {
            let _ = writeln!(md, "   - Command: `{}`", escape(&command.join(" ")));
        }
        if let Some(computation) = &record.computation {
            let _ = writeln!(md, "   - Computation: {}", escape(computation));
        }
        for receipt in &record.receipts {
            let domain = receipt["domain"].as_str().unwrap_or("?");
            let decision = receipt["decision"].as_str().unwrap_or("?");
            let severity = receipt["severity"].as_str().unwrap_or("?");
            // A capsule replaced after this call by another justification of the decision
            // (R16-C8, concurrent calls: attack round 17, R17-C5) is not this output's: its
            // text is not given for it.
            let capsule = rested_on(decisions, receipt);
            // Who signed the decision off (the policy's `human` outcome), beside it.
            let signed = receipt["policy"]["approval"]
                .as_str()
                .map(|a| format!(" Signed off: {}.", escape(a)))
                .unwrap_or_default();
            match capsule {
                Some(c) => {
                    let j = &c.justification;
                    let rationale = escape(j.choice.rationale.0.trim_end());
                    let stop = if rationale.ends_with(['.', '!', '?']) {
                        ""
                    } else {
                        "."
                    };
                    let _ = write!(
                        md,
                        "   - Decision ({domain}, {severity}, {decision}): chose {}: {rationale}{stop}",
                        escape(&j.choice.method.0)
                    );
                    if !j.assumptions.is_empty() {
                        let a: Vec<String> = j.assumptions.iter().map(|t| escape(&t.0)).collect();
                        let _ = write!(md, " Assumes: {}.", a.join("; "));
                    }
                    if !j.conditions_for_revisit.is_empty() {
                        let r: Vec<String> = j
                            .conditions_for_revisit
                            .iter()
                            .map(|t| escape(&t.0))
                            .collect();
                        let _ = write!(md, " Revisit if: {}.", r.join("; "));
                    }
                    let _ = writeln!(md, "{signed}");
                }
                None => {
                    let reason = escape(receipt["reason"].as_str().unwrap_or(""));
                    let replaced = receipt["capsule"]
                        .as_str()
                        .and_then(|u| decisions.get(u))
                        .is_some();
                    let _ = writeln!(
                        md,
                        "   - Decision ({domain}, {severity}, {decision}): {reason}{}{signed}",
                        if replaced {
                            " (the justification this output rested on was replaced later by \
                             another for the same decision; its text is not kept)"
                        } else {
                            ""
                        }
                    );
                }
            }
        }
        for input in record.inputs.iter().filter(|i| i.modified_outside) {
            let _ = writeln!(
                md,
                "   - **Flagged:** input `{}` had been modified outside the server after \
                 gdal-mcp wrote it; the steps listed before this one do not describe it.",
                shown_name(&input.path)
            );
        }
    }
    if modified_since {
        let _ = writeln!(
            md,
            "\n**Flagged:** this file was modified outside the server after gdal-mcp wrote it."
        );
    }
    // Steps further up than the walk lists, as the records carry them (attack round 8, R8-9:
    // 64 value-keeping steps hid a bilinear resampling from this report).
    if !beyond.marks.is_empty() || beyond.unknown {
        let _ = writeln!(
            md,
            "\n## Further upstream\n\nThe steps above are the nearest {} the report lists; the \
             records carry what was done further up:\n",
            lineage::max_steps()
        );
        for mark in &beyond.marks {
            let mut what = Vec::new();
            if let Some(method) = &mark.resampling {
                what.push(format!("resampling with {method}"));
            }
            if let Some(encoding) = &mark.lossy_encoding {
                what.push(format!("lossy {encoding} encoding"));
            }
            let _ = writeln!(
                md,
                "- `{}`, {} step{} up: {} (its output {}){}.",
                mark.tool,
                mark.depth,
                if mark.depth == 1 { "" } else { "s" },
                what.join(" and "),
                digest_words(&mark.sha256, true),
                if mark.capsules.is_empty() {
                    String::new()
                } else {
                    format!(", justified by {}", mark.capsules.join(", "))
                }
            );
        }
        if beyond.unknown {
            let _ = writeln!(
                md,
                "- **Unknown:** the records where the list stops were written before records \
                 carried their upstream, so what was done further up is not known; the \
                 domains treat it as interpolated and lossily encoded."
            );
        }
    }
    let _ = writeln!(md, "\n## Software\n");
    let mut versions: Vec<String> = records
        .iter()
        .map(|(_, r)| {
            format!(
                "gdal-mcp {}, GDAL {}, PROJ {}",
                r.versions.gdal_mcp, r.versions.gdal, r.versions.proj
            )
        })
        .collect();
    versions.dedup();
    for line in versions {
        let _ = writeln!(md, "- {line}");
    }
    let mut plugins: Vec<String> = records
        .iter()
        .flat_map(|(_, r)| {
            r.plugins.iter().map(|p| {
                format!(
                    "{} {} (WIT {}, component SHA-256 `{}`)",
                    p.id,
                    p.version,
                    p.contract,
                    short(&p.digest)
                )
            })
        })
        .collect();
    plugins.sort();
    plugins.dedup();
    if !plugins.is_empty() {
        let _ = writeln!(md, "- Risk domains: {}", plugins.join("; "));
    }
    md
}

fn typed(value: &str, kind: &str) -> Value {
    json!({"$": value, "type": kind})
}

fn file_id(digest: &str) -> String {
    match digest.strip_prefix(lineage::PARTIAL_PREFIX) {
        Some(hex) => format!("file:partial-sha256-{hex}"),
        None => format!("file:sha256-{digest}"),
    }
}

/// A PROV local name from free text: letters, digits, `_` and `-` only.
fn local(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The W3C PROV-JSON document: files as entities by digest, tool calls as activities,
/// capsules as plans, the server and the domains as software agents.
fn prov_json(records: &[(u32, Record)], decisions: &BTreeMap<String, Capsule>) -> Value {
    let mut entity = Map::new();
    let mut activity = Map::new();
    let mut agent = Map::new();
    let mut relations: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    let mut relate = |kind: &'static str, body: Value| {
        let bucket = relations.entry(kind).or_default();
        let id = format!("_:{}{}", &kind[..1], bucket.len() + 1);
        bucket.insert(id, body);
    };
    let server = "gdalmcp:server".to_string();
    for (index, (_, record)) in records.iter().enumerate() {
        let call = format!("call:{}-{}", record.tool, index + 1);
        let mut attributes = json!({
            "prov:type": typed("gdalmcp:ToolCall", "xsd:QName"),
            "prov:label": record.tool,
            "prov:startTime": typed(&record.started_at, "xsd:dateTime"),
            "prov:endTime": typed(&record.finished_at, "xsd:dateTime"),
            "gdalmcp:arguments": record.arguments.to_string(),
        });
        if let Some(computation) = &record.computation {
            attributes["gdalmcp:computation"] = Value::String(computation.clone());
        }
        if !record.commands.is_empty() {
            attributes["gdalmcp:commands"] = Value::String(
                record
                    .commands
                    .iter()
                    .map(|c| c.join(" "))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
        activity.insert(call.clone(), attributes);
        agent.entry(server.clone()).or_insert_with(|| {
            json!({
                "prov:type": typed("prov:SoftwareAgent", "xsd:QName"),
                "prov:label": "gdal-mcp",
                "gdalmcp:version": record.versions.gdal_mcp,
                "gdalmcp:gdal": record.versions.gdal,
                "gdalmcp:proj": record.versions.proj,
            })
        });
        relate(
            "wasAssociatedWith",
            json!({"prov:activity": call, "prov:agent": server}),
        );
        for file in record.inputs.iter().chain(record.outputs.iter()) {
            let Some(sha) = &file.sha256 else { continue };
            let mut attributes = json!({
                "prov:type": typed("gdalmcp:File", "xsd:QName"),
                "prov:label": file_name(&file.path),
                "gdalmcp:path": file.path,
            });
            let label = if lineage::is_partial(sha) {
                "gdalmcp:partial_digest"
            } else {
                "gdalmcp:sha256"
            };
            attributes[label] = json!(sha);
            if let Some(size) = file.size {
                attributes["gdalmcp:size_bytes"] = json!(size);
            }
            if file.modified_outside {
                attributes["gdalmcp:modified_outside_server"] = json!(true);
            }
            entity.entry(file_id(sha)).or_insert(attributes);
        }
        for input in record.inputs.iter().filter_map(|i| i.sha256.as_ref()) {
            relate(
                "used",
                json!({"prov:activity": call, "prov:entity": file_id(input)}),
            );
        }
        for output in record.outputs.iter().filter_map(|o| o.sha256.as_ref()) {
            relate(
                "wasGeneratedBy",
                json!({"prov:entity": file_id(output), "prov:activity": call,
                       "prov:time": record.finished_at}),
            );
            relate(
                "wasAttributedTo",
                json!({"prov:entity": file_id(output), "prov:agent": server}),
            );
            for input in record.inputs.iter().filter_map(|i| i.sha256.as_ref()) {
                relate(
                    "wasDerivedFrom",
                    json!({"prov:generatedEntity": file_id(output),
                           "prov:usedEntity": file_id(input), "prov:activity": call}),
                );
            }
        }
        for plugin in &record.plugins {
            let id = format!("plugin:{}-{}", plugin.id, local(&plugin.version));
            if !agent.contains_key(&id) {
                agent.insert(
                    id.clone(),
                    json!({
                        "prov:type": typed("prov:SoftwareAgent", "xsd:QName"),
                        "prov:label": plugin.id,
                        "gdalmcp:version": plugin.version,
                        "gdalmcp:contract": plugin.contract,
                        "gdalmcp:component_sha256": plugin.digest,
                    }),
                );
                relate(
                    "actedOnBehalfOf",
                    json!({"prov:delegate": id, "prov:responsible": server}),
                );
            }
        }
        for receipt in &record.receipts {
            let Some(uri) = receipt["capsule"].as_str() else {
                continue;
            };
            let domain = receipt["domain"].as_str().unwrap_or("unknown");
            let version = receipt["plugin_version"].as_str().unwrap_or("unknown");
            let hex = uri.rsplit('/').next().unwrap_or(uri);
            let plan = format!("capsule:{}-{}", local(domain), local(hex));
            let mut attributes = json!({
                "prov:type": typed("prov:Plan", "xsd:QName"),
                "prov:label": format!("{domain} justification"),
                "gdalmcp:uri": uri,
                "gdalmcp:decision": receipt["decision"].as_str().unwrap_or("unknown"),
            });
            if let Some(capsule) = rested_on(decisions, receipt) {
                attributes["gdalmcp:choice"] = json!(capsule.justification.choice.method.0);
                attributes["gdalmcp:rationale"] = json!(capsule.justification.choice.rationale.0);
            }
            entity.entry(plan.clone()).or_insert(attributes);
            let plugin = format!("plugin:{}-{}", local(domain), local(version));
            agent.entry(plugin.clone()).or_insert_with(|| {
                json!({
                    "prov:type": typed("prov:SoftwareAgent", "xsd:QName"),
                    "prov:label": domain,
                    "gdalmcp:version": version,
                })
            });
            relate(
                "wasAssociatedWith",
                json!({"prov:activity": call, "prov:agent": plugin, "prov:plan": plan}),
            );
        }
    }
    let mut document = json!({
        "prefix": {
            "gdalmcp": "urn:gdal-mcp:vocab#",
            "file": "urn:gdal-mcp:file:",
            "call": "urn:gdal-mcp:call:",
            "capsule": "urn:gdal-mcp:capsule:",
            "plugin": "urn:gdal-mcp:plugin:",
        },
    });
    if !entity.is_empty() {
        document["entity"] = Value::Object(entity);
    }
    if !activity.is_empty() {
        document["activity"] = Value::Object(activity);
    }
    if !agent.is_empty() {
        document["agent"] = Value::Object(agent);
    }
    for (kind, bucket) in relations {
        document[kind] = Value::Object(bucket);
    }
    document
}
