//! Risk domains: WebAssembly components that decide which calls need a methodological
//! justification.
//!
//! This room owns loading (built-in components embedded at build time, then `*.wasm` files from
//! `--plugins` folders), the host-side view of a domain ([`DomainInfo`], [`Trigger`],
//! [`FieldError`]) and the translation between host facts and the WIT records. It knows nothing
//! of MCP, capsules or GDAL runners: the gate asks, a domain answers.

mod additive;
pub mod cache;
mod legacy;
pub mod sandbox;

use crate::gdal::facts::encoding::OutputFacts;
use crate::gdal::facts::georef::Registration;
use crate::gdal::facts::transform::{OperationFacts, TransformationFacts};
use crate::gdal::facts::{CrsFacts, CrsKind, DatasetFacts};
use crate::gdal::raster::composite::GridRelation;
use crate::gdal::vector::measure::MeasurementFacts;
use cache::ComponentCache;
use sandbox::{wit, Bindings, Limits, PluginError, Prepared, Provenance, Sandbox};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;

/// A `match` on a domain's bindings (`$domain`) with one arm for every contract that only
/// extended the one before (0.3 to 0.6, which `additive` adapts alike): that arm is written
/// once, with `$d` the bindings and `$adapter` the contract's `additive` module.
macro_rules! match_contract {
    ($domain:expr, {
        current($c:ident) => $current:expr,
        additive($d:ident, $adapter:ident) => $additive:expr,
        legacy($l:ident) => $legacy:expr $(,)?
    }) => {
        match $domain {
            Bindings::Current($c) => $current,
            Bindings::V0_6($d) => {
                use additive::v0_6 as $adapter;
                $additive
            }
            Bindings::V0_5($d) => {
                use additive::v0_5 as $adapter;
                $additive
            }
            Bindings::V0_4($d) => {
                use additive::v0_4 as $adapter;
                $additive
            }
            Bindings::V0_3($d) => {
                use additive::v0_3 as $adapter;
                $additive
            }
            Bindings::V0_2($l) => $legacy,
        }
    };
}

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));
}

/// How strongly a domain objects to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Advisory,
    Required,
    Critical,
}

/// A declared prompt argument.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PromptArgument {
    pub name: String,
    pub description: String,
    pub required: bool,
}

/// What a domain says about itself.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DomainInfo {
    pub id: String,
    pub version: String,
    pub title: String,
    pub summary: String,
    pub prompt_name: String,
    pub prompt_arguments: Vec<PromptArgument>,
    #[serde(skip)]
    pub methodology: String,
}

/// One finding behind a trigger.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, JsonSchema)]
pub struct EvidenceItem {
    /// Stable id; a critical justification answers the item under `evidence.<id>`.
    pub id: String,
    /// The fact, with numbers.
    pub fact: String,
    /// Why it matters for this call.
    pub why: String,
    /// Ready-to-use call arguments that avoid the risk, when a safe alternative exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternative: Option<Value>,
    /// The domain marks the finding as a local convention an operator's policy may loosen
    /// (WIT 0.7); never a correctness matter. Absent when false, so the records written before
    /// 0.7 read and verify unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relaxable: bool,
}

/// A domain's verdict on a call.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub severity: Severity,
    pub reason: String,
    /// Always a JSON object.
    pub key_fields: Value,
    pub prompt_arguments: Vec<(String, String)>,
    /// Never empty: a trigger without evidence gets one item, `finding`, from its reason.
    pub evidence: Vec<EvidenceItem>,
    /// How sure the domain is that the finding is real on this data, in [0, 1] (WIT 0.7);
    /// `None` when it does not say (every component built before 0.7).
    pub confidence: Option<f64>,
}

impl Trigger {
    /// Whether every finding of the trigger is marked relaxable (the only case where an
    /// operator's rule may make the decision less strict than the domain's severity).
    pub fn relaxable(&self) -> bool {
        !self.evidence.is_empty() && self.evidence.iter().all(|e| e.relaxable)
    }
}

/// A domain-specific problem with a justification.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// Everything a domain is told about a call.
#[derive(Debug, Clone, Default)]
pub struct CallFacts {
    pub tool: String,
    /// The validated arguments, without `justification`.
    pub arguments: Value,
    pub datasets: Vec<DatasetFacts>,
    pub target_crs: Option<CrsFacts>,
    pub transformation: Option<TransformationFacts>,
    /// How each dataset was made, by index into `datasets` (empty until the gated step looks
    /// the datasets up in the lineage records).
    pub upstream: Vec<DatasetLineage>,
    /// What the host found about a measuring call's method and data.
    pub measurement: Option<MeasurementFacts>,
    /// What a writing call writes: driver, options, encoding loss.
    pub output: Option<OutputFacts>,
    /// How a combining call's input grids relate; for `raster_reproject` and
    /// `raster_resample`, `aligned` when the output is the input's grid or a window of it (the
    /// WIT's `grid-relation` read with the output as the second grid; R13-B9).
    pub grids: Option<GridRelation>,
}

impl CallFacts {
    /// The capsules the inputs' upstream steps rested on, each once, sorted.
    pub fn upstream_capsules(&self) -> Vec<String> {
        let mut capsules: Vec<String> = self
            .upstream
            .iter()
            .flat_map(|l| l.steps.iter().flat_map(|s| s.capsules.iter().cloned()))
            .collect();
        capsules.sort();
        capsules.dedup();
        capsules
    }
}

/// What the lineage records say of how one dataset was made (WIT `lineage`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DatasetLineage {
    /// SHA-256 of the dataset's file(s), hex; `None` when it could not be hashed.
    pub sha256: Option<String>,
    /// The server wrote this path with other content: modified outside the server since.
    pub modified_since: bool,
    /// The steps that made it, nearest first.
    pub steps: Vec<UpstreamStep>,
}

/// One step that made a dataset (WIT `upstream-step`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpstreamStep {
    /// 1 for the call that wrote the dataset, 2 for the one before, ...
    pub depth: u32,
    pub tool: String,
    pub arguments: Value,
    pub resampling: Option<String>,
    pub crs_change: Option<String>,
    pub conditioning: Option<String>,
    pub aggregation: Option<String>,
    pub lossy_encoding: Option<String>,
    /// An input of the step looked categorical (host-side only: the domains see it as the
    /// dataset's `looks-categorical`, set by the gated step when the data still holds whole
    /// number classes).
    #[serde(skip)]
    pub categorical_input: Option<String>,
    /// An input of this step had been modified outside the server.
    pub input_modified: bool,
    /// `justification://...` of the capsules the step rested on.
    pub capsules: Vec<String>,
}

/// Where a domain came from.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum Origin {
    Builtin,
    File(PathBuf),
}

/// A loaded domain.
pub struct Domain {
    pub info: DomainInfo,
    pub origin: Origin,
    /// SHA-256 of the component's bytes (hex), as recorded in lineage.
    pub digest: String,
    prepared: Prepared,
}

/// Why domains could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error("plugin {origin}: cannot read it: {source}")]
    Read {
        origin: String,
        source: std::io::Error,
    },
    #[error(
        "plugin {origin}: domain id \"{id}\" is invalid; use 1-64 lowercase letters, digits or _"
    )]
    InvalidId { origin: String, id: String },
    #[error(
        "plugin {origin}: domain \"{id}\" renders different prompts for the same arguments; \
         render-prompt must be deterministic (decision keys hash the prompt)"
    )]
    Nondeterministic { origin: String, id: String },
    #[error(
        "built-in domain {expected}: the loaded component describes itself as \"{id}\"; the \
         compiled-component cache may have been tampered with (remove it, or start with \
         --no-cache)"
    )]
    BuiltinMismatch { expected: String, id: String },
    #[error("plugin {origin}: domain \"{id}\" is already loaded from {existing}; domain ids must be unique")]
    Duplicate {
        origin: String,
        id: String,
        existing: String,
    },
}

/// Caps on what a plugin may hand back, so that a hostile or broken domain cannot blow up a
/// response (a 40 MB prompt became an 80 MiB response before these).
pub const MAX_REASON_BYTES: usize = 2 << 10;
pub const MAX_KEY_FIELDS_BYTES: usize = 16 << 10;
pub const MAX_PROMPT_ARGUMENTS_BYTES: usize = 16 << 10;
pub const MAX_PROMPT_BYTES: usize = 64 << 10;
pub const MAX_FIELD_ERRORS: usize = 64;
pub const MAX_FIELD_ERROR_BYTES: usize = 1 << 10;
pub const MAX_EVIDENCE_ITEMS: usize = 16;
pub const MAX_EVIDENCE_BYTES: usize = 8 << 10;

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Domain {
    fn provenance(&self) -> Provenance<'_> {
        Provenance {
            plugin: &self.info.id,
            version: &self.info.version,
        }
    }

    /// The contract version the component was built against (`0.7.0`, `0.6.0`, `0.5.0`,
    /// `0.4.0`, `0.3.0` or `0.2.0`).
    pub fn contract(&self) -> &'static str {
        self.prepared.contract()
    }

    /// Ask the domain whether `call` needs a justification.
    pub fn classify(&self, call: &CallFacts) -> Result<Option<Trigger>, PluginError> {
        let answer = self
            .prepared
            .call(&self.provenance(), "classify", |domain, store| {
                match_contract!(domain, {
                    current(d) => d.call_classify(store, &to_wit_call(call)),
                    additive(d, adapter) => d
                        .call_classify(store, &adapter::to_call(&to_wit_call(call))?)?
                        .as_ref()
                        .map(adapter::from_trigger)
                        .transpose(),
                    legacy(d) => d
                        .call_classify(store, &legacy::to_call(call))
                        .map(|t| t.map(legacy::from_trigger)),
                })
            })?;
        let Some(trigger) = answer else {
            return Ok(None);
        };
        if trigger.reason.len() > MAX_REASON_BYTES {
            return Err(self.contract_error(format!(
                "reason is {} bytes; at most {MAX_REASON_BYTES}",
                trigger.reason.len()
            )));
        }
        if trigger.key_fields.len() > MAX_KEY_FIELDS_BYTES {
            return Err(self.contract_error(format!(
                "key-fields is {} bytes; at most {MAX_KEY_FIELDS_BYTES}",
                trigger.key_fields.len()
            )));
        }
        let argument_bytes: usize = trigger
            .prompt_arguments
            .iter()
            .map(|p| p.name.len() + p.value.len())
            .sum();
        if argument_bytes > MAX_PROMPT_ARGUMENTS_BYTES {
            return Err(self.contract_error(format!(
                "prompt arguments are {argument_bytes} bytes; at most {MAX_PROMPT_ARGUMENTS_BYTES}"
            )));
        }
        let key_fields: Value = serde_json::from_str(&trigger.key_fields)
            .map_err(|e| self.contract_error(e.to_string()))?;
        if !key_fields.is_object() {
            return Err(self.contract_error("key-fields must be a JSON object".to_string()));
        }
        if let Some(c) = trigger.confidence {
            if !(c.is_finite() && (0.0..=1.0).contains(&c)) {
                return Err(self
                    .contract_error(format!("confidence is {c}; a number from 0 to 1, or none")));
            }
        }
        let evidence = self.evidence(&trigger.reason, trigger.evidence)?;
        Ok(Some(Trigger {
            confidence: trigger.confidence,
            severity: match trigger.severity {
                wit::Severity::Advisory => Severity::Advisory,
                wit::Severity::Required => Severity::Required,
                wit::Severity::Critical => Severity::Critical,
            },
            reason: trigger.reason,
            key_fields,
            prompt_arguments: trigger
                .prompt_arguments
                .into_iter()
                .map(|p| (p.name, p.value))
                .collect(),
            evidence,
        }))
    }

    /// Check a trigger's evidence against the contract; none becomes one `finding` item.
    fn evidence(
        &self,
        reason: &str,
        items: Vec<wit::EvidenceItem>,
    ) -> Result<Vec<EvidenceItem>, PluginError> {
        if items.is_empty() {
            return Ok(vec![EvidenceItem {
                id: "finding".to_string(),
                fact: reason.to_string(),
                why: format!("domain {} raised it for this call", self.info.id),
                alternative: None,
                relaxable: false,
            }]);
        }
        let bytes: usize = items
            .iter()
            .map(|e| {
                e.id.len()
                    + e.fact.len()
                    + e.why.len()
                    + e.alternative.as_ref().map_or(0, String::len)
            })
            .sum();
        if items.len() > MAX_EVIDENCE_ITEMS || bytes > MAX_EVIDENCE_BYTES {
            return Err(self.contract_error(format!(
                "{} evidence items, {bytes} bytes; at most {MAX_EVIDENCE_ITEMS} items and \
                 {MAX_EVIDENCE_BYTES} bytes",
                items.len()
            )));
        }
        let mut out: Vec<EvidenceItem> = Vec::with_capacity(items.len());
        for item in items {
            if !valid_id(&item.id) || out.iter().any(|e| e.id == item.id) {
                return Err(self.contract_error(format!(
                    "evidence id \"{}\" is invalid or repeated; use unique ids of 1-64 \
                     lowercase letters, digits or _",
                    item.id
                )));
            }
            let alternative = match item.alternative {
                None => None,
                Some(text) => {
                    let value: Value = serde_json::from_str(&text).map_err(|e| {
                        self.contract_error(format!("evidence {} alternative: {e}", item.id))
                    })?;
                    if !value.is_object() {
                        return Err(self.contract_error(format!(
                            "evidence {} alternative must be a JSON object of arguments",
                            item.id
                        )));
                    }
                    Some(value)
                }
            };
            out.push(EvidenceItem {
                id: item.id,
                fact: item.fact,
                why: item.why,
                alternative,
                relaxable: item.relaxable,
            });
        }
        Ok(out)
    }

    /// The domain's questions for these prompt arguments.
    pub fn render_prompt(&self, arguments: &[(String, String)]) -> Result<String, PluginError> {
        let values: Vec<wit::PromptValue> = arguments
            .iter()
            .map(|(name, value)| wit::PromptValue {
                name: name.clone(),
                value: value.clone(),
            })
            .collect();
        let text = self
            .prepared
            .call(&self.provenance(), "render-prompt", |domain, store| {
                match_contract!(domain, {
                    current(d) => d.call_render_prompt(store, &values),
                    additive(d, adapter) => {
                        d.call_render_prompt(store, &adapter::prompt_values(&values)?)
                    },
                    legacy(d) => d.call_render_prompt(store, &legacy::prompt_values(&values)),
                })
            })?;
        if text.len() > MAX_PROMPT_BYTES {
            return Err(self.contract_in(
                "render-prompt",
                format!(
                    "the prompt is {} bytes; at most {MAX_PROMPT_BYTES}",
                    text.len()
                ),
            ));
        }
        Ok(text)
    }

    /// The domain's own checks of a justification (JSON object) for these key fields and
    /// this evidence.
    pub fn validate(
        &self,
        key_fields: &Value,
        evidence: &[EvidenceItem],
        justification: &Value,
    ) -> Result<Vec<FieldError>, PluginError> {
        let key_fields = key_fields.to_string();
        let justification = justification.to_string();
        let evidence: Vec<wit::EvidenceItem> = evidence
            .iter()
            .map(|e| wit::EvidenceItem {
                id: e.id.clone(),
                fact: e.fact.clone(),
                why: e.why.clone(),
                alternative: e.alternative.as_ref().map(Value::to_string),
                relaxable: e.relaxable,
            })
            .collect();
        let errors = self
            .prepared
            .call(&self.provenance(), "validate", |domain, store| {
                match_contract!(domain, {
                    current(d) => d.call_validate(store, &key_fields, &evidence, &justification),
                    additive(d, adapter) => d
                        .call_validate(
                            store,
                            &key_fields,
                            &adapter::evidence(&evidence)?,
                            &justification,
                        )
                        .and_then(|errors| adapter::from_field_errors(&errors)),
                    legacy(d) => d
                        .call_validate(store, &key_fields, &justification)
                        .map(|errors| errors.into_iter().map(legacy::from_field_error).collect()),
                })
            })?;
        let oversized = errors
            .iter()
            .any(|e| e.path.len() + e.message.len() > MAX_FIELD_ERROR_BYTES);
        if errors.len() > MAX_FIELD_ERRORS || oversized {
            return Err(self.contract_in(
                "validate",
                format!(
                    "returned {} field errors (at most {MAX_FIELD_ERRORS}, each at most \
                     {MAX_FIELD_ERROR_BYTES} bytes)",
                    errors.len()
                ),
            ));
        }
        Ok(errors
            .into_iter()
            .map(|e| FieldError {
                path: e.path,
                message: e.message,
            })
            .collect())
    }

    fn contract_error(&self, message: String) -> PluginError {
        self.contract_in("classify", message)
    }

    fn contract_in(&self, call: &'static str, message: String) -> PluginError {
        PluginError::Contract {
            plugin: self.info.id.clone(),
            version: self.info.version.clone(),
            call,
            message,
        }
    }
}

/// The loaded domains, in load order.
pub struct Registry {
    domains: Vec<Arc<Domain>>,
}

impl Registry {
    /// Load the built-in domains, then every `*.wasm` in `plugin_dirs` (sorted by name).
    pub fn load(
        plugin_dirs: &[PathBuf],
        cache_dir: Option<PathBuf>,
        limits: Limits,
    ) -> Result<Self, LoadError> {
        let sandbox = Sandbox::new(limits)?;
        let cache = ComponentCache::new(cache_dir);
        let mut registry = Self {
            domains: Vec::new(),
        };
        for (name, bytes) in builtin::BUILTIN_COMPONENTS {
            registry.add(
                &sandbox,
                &cache,
                &format!("built-in {name}"),
                Origin::Builtin,
                bytes,
            )?;
        }
        for dir in plugin_dirs {
            let entries = std::fs::read_dir(dir).map_err(|source| LoadError::Read {
                origin: dir.display().to_string(),
                source,
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
                .collect();
            files.sort();
            for file in files {
                let origin = file.display().to_string();
                let bytes = std::fs::read(&file).map_err(|source| LoadError::Read {
                    origin: origin.clone(),
                    source,
                })?;
                registry.add(&sandbox, &cache, &origin, Origin::File(file), &bytes)?;
            }
        }
        Ok(registry)
    }

    fn add(
        &mut self,
        sandbox: &Sandbox,
        cache: &ComponentCache,
        origin_text: &str,
        origin: Origin,
        bytes: &[u8],
    ) -> Result<(), LoadError> {
        let component = cache
            .load(sandbox.engine(), bytes)
            .map_err(|e| PluginError::Load {
                origin: origin_text.to_string(),
                message: format!("not a valid WebAssembly component: {e:#}"),
            })?;
        let prepared = sandbox.prepare(origin_text, &component)?;
        let unknown = Provenance {
            plugin: origin_text,
            version: "?",
        };
        let info = prepared.call(&unknown, "describe", |domain, store| {
            match_contract!(domain, {
                current(d) => d.call_describe(store),
                additive(d, adapter) => d
                    .call_describe(store)
                    .and_then(|i| adapter::from_info(&i)),
                legacy(d) => d.call_describe(store).map(legacy::from_info),
            })
        })?;
        if let Origin::Builtin = &origin {
            let expected = origin_text.trim_start_matches("built-in ");
            if info.id != expected {
                return Err(LoadError::BuiltinMismatch {
                    expected: expected.to_string(),
                    id: info.id,
                });
            }
        }
        if !valid_id(&info.id) {
            return Err(LoadError::InvalidId {
                origin: origin_text.to_string(),
                id: info.id,
            });
        }
        if let Some(existing) = self.get(&info.id) {
            return Err(LoadError::Duplicate {
                origin: origin_text.to_string(),
                id: info.id,
                existing: match &existing.origin {
                    Origin::Builtin => "the built-in set".to_string(),
                    Origin::File(p) => p.display().to_string(),
                },
            });
        }
        let info = DomainInfo {
            id: info.id,
            version: info.version,
            title: info.title,
            summary: info.summary,
            prompt_name: info.prompt_name,
            prompt_arguments: info
                .prompt_arguments
                .into_iter()
                .map(|a| PromptArgument {
                    name: a.name,
                    description: a.description,
                    required: a.required,
                })
                .collect(),
            methodology: info.methodology,
        };
        let domain = Domain {
            info,
            origin,
            digest: hex::encode(Sha256::digest(bytes)),
            prepared,
        };
        // Keys hash the rendered prompt, so a domain whose prompt changes from call to call
        // would never find its own capsules: check a dropped-in domain's determinism once, at
        // load (the built-ins are checked by their own tests, and cold start stays short).
        let sample: Vec<(String, String)> = domain
            .info
            .prompt_arguments
            .iter()
            .map(|a| (a.name.clone(), format!("<{}>", a.name)))
            .collect();
        let dropped_in = matches!(domain.origin, Origin::File(_));
        if dropped_in && domain.render_prompt(&sample)? != domain.render_prompt(&sample)? {
            return Err(LoadError::Nondeterministic {
                origin: origin_text.to_string(),
                id: domain.info.id.clone(),
            });
        }
        self.domains.push(Arc::new(domain));
        Ok(())
    }

    /// All domains, in load order.
    pub fn all(&self) -> &[Arc<Domain>] {
        &self.domains
    }

    /// The domain with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<Domain>> {
        self.domains.iter().find(|d| d.info.id == id)
    }

    /// The domain whose prompt has this name.
    pub fn by_prompt(&self, prompt_name: &str) -> Option<&Arc<Domain>> {
        self.domains
            .iter()
            .find(|d| d.info.prompt_name == prompt_name)
    }
}

fn to_wit_crs(crs: &CrsFacts) -> wit::CrsFacts {
    wit::CrsFacts {
        id: crs.id.clone(),
        name: crs.name.clone(),
        kind: match crs.kind {
            CrsKind::Geographic => wit::CrsKind::Geographic,
            CrsKind::Projected => wit::CrsKind::Projected,
            CrsKind::Geocentric => wit::CrsKind::Geocentric,
            CrsKind::Local => wit::CrsKind::Local,
            CrsKind::Other => wit::CrsKind::Other,
        },
        linear_unit: crs.linear_unit.clone(),
        datum: crs.datum.clone(),
        vertical: crs.vertical.clone(),
        linear_unit_metres: crs.linear_unit_metres,
        axis_order: crs.axis_order.clone(),
    }
}

fn to_wit_operation(op: &OperationFacts) -> wit::OperationFacts {
    wit::OperationFacts {
        name: op.name.clone(),
        accuracy_metres: op.accuracy_metres,
        ballpark: op.ballpark,
        via: op.via.clone(),
        covers_data: op.covers_data,
    }
}

fn to_wit_transformation(t: &TransformationFacts) -> wit::TransformationFacts {
    wit::TransformationFacts {
        used: to_wit_operation(&t.used),
        default: to_wit_operation(&t.default),
        missing_grids: t.missing_grids.clone(),
    }
}

fn to_wit_raster(r: &crate::gdal::facts::RasterFacts) -> wit::RasterFacts {
    let g = &r.georeferencing;
    wit::RasterFacts {
        width: r.width,
        height: r.height,
        band_count: r.band_count,
        data_types: r.data_types.clone(),
        nodata: r.nodata.clone(),
        pixel_size: r.pixel_size,
        looks_categorical: r.looks_categorical,
        evidence: wit::CategoricalEvidence {
            palette: r.evidence.palette,
            attribute_table: r.evidence.attribute_table,
            integer_classes: r.evidence.integer_classes,
        },
        flat_fraction: r.flat_fraction,
        georeferencing: wit::Georeferencing {
            geotransform_source: g.geotransform_source.replace('_', "-"),
            candidates: g
                .candidates
                .iter()
                .map(|c| wit::GeorefCandidate {
                    source: c.source.replace('_', "-"),
                    geotransform: c.geotransform.map(|gt| gt.to_vec()),
                    crs: c.crs.clone(),
                })
                .collect(),
            conflicts: g.conflicts.clone(),
            registration: match g.registration {
                Registration::Area => wit::Registration::Area,
                Registration::Point => wit::Registration::Point,
                Registration::Unknown => wit::Registration::Unknown,
            },
            rotated: g.rotated,
            south_up: g.south_up,
            cell_size_metres: g.cell_size_metres,
        },
        bands: r
            .bands
            .iter()
            .map(|b| wit::BandFacts {
                scale: b.scale,
                offset: b.offset,
                unit: b.unit.clone(),
                nodata: b.nodata,
                undeclared_sentinels: b
                    .undeclared_sentinels
                    .iter()
                    .map(|s| wit::Sentinel {
                        value: s.value,
                        count: s.count,
                        kind: s.kind.replace('_', "-"),
                    })
                    .collect(),
                sampled_cells: b.sampled_cells,
            })
            .collect(),
    }
}

fn to_wit_lineage(lineage: Option<&DatasetLineage>) -> wit::Lineage {
    let Some(lineage) = lineage else {
        return wit::Lineage {
            sha256: None,
            modified_since: false,
            steps: Vec::new(),
        };
    };
    wit::Lineage {
        sha256: lineage.sha256.clone(),
        modified_since: lineage.modified_since,
        steps: lineage
            .steps
            .iter()
            .map(|s| wit::UpstreamStep {
                depth: s.depth,
                tool: s.tool.clone(),
                arguments: s.arguments.to_string(),
                resampling: s.resampling.clone(),
                crs_change: s.crs_change.clone(),
                conditioning: s.conditioning.clone(),
                aggregation: s.aggregation.clone(),
                lossy_encoding: s.lossy_encoding.clone(),
                input_modified: s.input_modified,
                capsules: s.capsules.clone(),
            })
            .collect(),
    }
}

fn to_wit_call(call: &CallFacts) -> wit::ToolCall {
    wit::ToolCall {
        tool: call.tool.clone(),
        arguments: call.arguments.to_string(),
        datasets: call
            .datasets
            .iter()
            .enumerate()
            .map(|(index, d)| wit::DatasetFacts {
                upstream: to_wit_lineage(call.upstream.get(index)),
                role: d.role.clone(),
                driver: d.driver.clone(),
                crs: d.crs.as_ref().map(to_wit_crs),
                raster: d.raster.as_ref().map(to_wit_raster),
                vector: d.vector.as_ref().map(|v| wit::VectorFacts {
                    layers: v
                        .layers
                        .iter()
                        .map(|l| wit::LayerFacts {
                            name: l.name.clone(),
                            geometry_type: l.geometry_type.clone(),
                            feature_count: l.feature_count,
                            has_z: l.has_z,
                            has_m: l.has_m,
                            geometry_types: l.geometry_types.clone(),
                            invalid_geometries: l.invalid_geometries,
                            features_checked: l.features_checked,
                        })
                        .collect(),
                    selected_layer: v.selected_layer.clone(),
                }),
            })
            .collect(),
        target_crs: call.target_crs.as_ref().map(to_wit_crs),
        transformation: call.transformation.as_ref().map(to_wit_transformation),
        measurement: call.measurement.as_ref().map(|m| wit::MeasurementFacts {
            method: m.method.clone(),
            crs: m.crs.as_ref().map(to_wit_crs),
            ellipsoid: m.ellipsoid.clone(),
            area_scale_error: m.area_scale_error,
            length_scale_error: m.length_scale_error,
            worst_at: m.worst_at,
            features_checked: m.features_checked,
            invalid_features: m.invalid_features,
            make_valid: m.make_valid,
            overlapping_pairs: m.overlapping_pairs,
            overlap_area_m2: m.overlap_area_m2,
            dissolve: m.dissolve,
            geometry_kinds: m.geometry_kinds.clone(),
            z_ignored: m.z_ignored,
            distance_units: m.distance_units.clone(),
            unweighted_means: m.unweighted_means.clone(),
        }),
        output: call.output.as_ref().map(|o| {
            let encoding = o.encoding.as_ref();
            wit::OutputFacts {
                driver: o.driver.clone(),
                options: o.options.clone(),
                compression: encoding.map(|e| e.compression.clone()),
                lossy: encoding.is_some_and(|e| e.lossy) || !o.schema.is_empty(),
                // The encoding's losses, then what a vector driver cannot hold of the
                // attribute fields (R13-B8).
                losses: encoding
                    .map(|e| e.losses.as_slice())
                    .unwrap_or_default()
                    .iter()
                    .chain(&o.schema)
                    .map(|l| wit::EncodingLoss {
                        codec: l.codec.clone(),
                        text: l.text.clone(),
                    })
                    .collect(),
                quality: encoding.and_then(|e| e.quality),
                max_z_error: encoding.and_then(|e| e.max_z_error),
            }
        }),
        grids: call.grids.map(|g| match g {
            GridRelation::Aligned => wit::GridRelation::Aligned,
            GridRelation::Differ => wit::GridRelation::Differ,
        }),
    }
}
