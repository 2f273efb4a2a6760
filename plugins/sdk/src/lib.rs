//! The guest-side SDK for gdal-mcp risk domains.
//!
//! A risk domain implements [`Domain`] and registers it with [`export_domain!`]. The SDK owns
//! the WIT bindings (generated once, here, from `wit/risk.wit`) so that a domain crate never
//! touches `wit-bindgen` itself, and it gives every export but `describe` and `classify` a
//! sensible default body:
//!
//! * [`Domain::render_prompt`] fills `{{name}}` placeholders of [`Domain::prompt_template`];
//! * [`Domain::validate`] accepts everything.
//!
//! Helpers for reading call arguments and building triggers and their evidence live here too
//! ([`trigger`], [`evidence`], [`evidence_answer`]), so the built-in domains and third-party
//! methodology packs read the same way, and [`testing`] builds the records the host sends, so a
//! domain's classification can be unit-tested natively with [`Call::new`].
//!
//! The bindings follow `gdal-mcp:risk@0.6.0`: every trigger carries a list of
//! [`EvidenceItem`]s (stable id, the fact with its numbers, why it matters, and optionally a
//! ready-to-use alternative as a JSON object of call arguments), and `validate` receives the
//! trigger's evidence next to the key fields and the justification. Since 0.4 every dataset
//! carries its [`Lineage`]: the steps that made it ([`UpstreamStep`]). The SDK reads them in one
//! place: [`Call::upstream`], [`upstream_steps`] (the whole chain, through edits outside the
//! server), [`creates_values`], [`nearest_interpolation`], [`nearest_regridding`],
//! [`nearest_lossy_encoding`] and [`step_fact`]. Since 0.5 a measuring call (`vector_measure`,
//! `vector_buffer`, `vector_overlay`, `vector_join`) carries [`MeasurementFacts`]: the method,
//! the planar CRS and its scale error over the data, invalid and overlapping geometries, ignored
//! Z, distance units and unweighted means; read them with [`Call::measurement`]. A reprojection
//! to a projected CRS carries the same record with the target's planar scale error over the
//! data only. Since 0.6 a writing call carries [`OutputFacts`] (the driver the host resolved,
//! the options as passed, and whether the encoding loses values, measured against GDAL), read
//! with [`Call::output`], and a composite carries its [`GridRelation`], read with
//! [`Call::grids`]: a domain never resolves a driver from an extension or reads a host fact
//! from the arguments. Since 0.7 a trigger says how sure the domain is that its finding is real
//! on this data (`confidence`, from 0 to 1; see [`CERTAIN`], [`LIKELY`], [`GUESS`] and
//! [`UNLIKELY`]) and each
//! evidence item whether an operator's policy may loosen it (`relaxable`): a domain rates its
//! triggers in [`Domain::confidence`] and names its relaxable findings in
//! [`Domain::relaxable`]; both default to saying nothing (confidence unknown, nothing
//! relaxable), so a domain written for 0.6 builds unchanged and is treated as strictly as a
//! 0.6 component. [`decide`] is `classify` with both applied, as the host receives it.

#![forbid(unsafe_code)]

pub use serde_json::{json, Value};

pub mod careful;
pub use careful::{check_answers, says_more_than, Finding, Need, Unit};

/// Bindings generated from the `gdal-mcp:risk` WIT package.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "risk-domain",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "__export_risk_domain",
        default_bindings_module: "gdal_mcp_domain_sdk::bindings",
    });
}

pub use bindings::gdal_mcp::risk::types::{
    BandFacts, CategoricalEvidence, CrsFacts, CrsKind, DatasetFacts, DomainInfo, EncodingLoss,
    EvidenceItem, FieldError, GeorefCandidate, Georeferencing, GridRelation, LayerFacts, Lineage,
    MeasurementFacts, OperationFacts, OutputFacts, PromptArgument, PromptValue, RasterFacts,
    Registration, Sentinel, Severity, ToolCall, TransformationFacts, Trigger, UpstreamStep,
    VectorFacts,
};

/// A risk domain. Implement this on a unit struct and pass it to [`export_domain!`].
pub trait Domain {
    /// Identity, prompt signature and methodology. Must be constant.
    fn describe() -> DomainInfo;

    /// Whether `call` needs a justification; `None` when this domain has nothing to say.
    fn classify(call: &Call) -> Option<Trigger>;

    /// The Markdown questions with `{{argument}}` placeholders, used by the default
    /// [`Domain::render_prompt`].
    fn prompt_template() -> &'static str {
        "Justify this decision: {{reason}}"
    }

    /// The rendered questions for one decision. Must be deterministic.
    fn render_prompt(arguments: &[PromptValue]) -> String {
        render_template(Self::prompt_template(), arguments)
    }

    /// Domain-specific checks of a justification that already passed the host's schema.
    /// `key_fields` and `evidence` are the trigger's; the justification answers evidence items
    /// by id in its `evidence` object (read one with [`evidence_answer`]). Return an empty list
    /// to accept.
    ///
    /// The default runs the generic checks of [`careful::check_answers`] on the answers given:
    /// none repeated for another finding, none that only acknowledges or restates its finding.
    /// Declare what each finding's careful answer must contain with [`Finding`]s and call
    /// [`check_answers`] yourself.
    fn validate(
        _key_fields: &Value,
        evidence: &[EvidenceItem],
        justification: &Value,
    ) -> Vec<FieldError> {
        check_answers(evidence, justification, &[])
    }

    /// How sure the domain is that `trigger`'s finding is real on this call's data, from 0 to
    /// 1 ([`CERTAIN`] for what the host measured or the data declares, [`LIKELY`],
    /// [`GUESS`] or [`UNLIKELY`] for an inference). A verdict is as sure as the least sure
    /// finding it rests on ([`weakest`]): a critical verdict resting on a guess is a guess.
    /// An operator's policy can set a floor below which the decision goes to a person or is
    /// refused (`confidence_below`).
    ///
    /// The default keeps what [`Domain::classify`] set (the [`trigger`] helper sets `None`:
    /// the domain does not say, which a floor treats as below it).
    fn confidence(_call: &Call, trigger: &Trigger) -> Option<f64> {
        trigger.confidence
    }

    /// Whether evidence items with this id are a local convention an operator's policy may
    /// loosen (a statistic a team aggregates with, a file layout, a format habit); never a
    /// correctness matter (a wrong number, lost or invented values, an ignored datum shift).
    /// The host relaxes a decision only when every finding of its trigger is relaxable.
    ///
    /// The default marks nothing relaxable.
    fn relaxable(_evidence_id: &str) -> bool {
        false
    }
}

/// Confidence for what the host measured or the data declares: a ballpark operation PROJ
/// reports, a colour table, an upstream step in the lineage records, a codec's measured loss.
pub const CERTAIN: f64 = 1.0;

/// Confidence for a sound inference that can still be wrong on unusual data: an integer band
/// without a palette, attribute table or few classes read as measurements; a figure the host
/// computed on a sample of the data.
pub const LIKELY: f64 = 0.75;

/// Confidence for a heuristic: an integer band with few distinct values in a sample *looks*
/// categorical; a value filling a border *looks* like an undeclared no-data code.
pub const GUESS: f64 = 0.5;

/// Confidence for a finding the data argues against, raised only because a mistake would go
/// unseen: a DEM whose band declares its heights in the CRS's own unit, asked about its units
/// all the same.
pub const UNLIKELY: f64 = 0.25;

/// The confidence of the least sure finding `trigger` rests on: `rate` gives each evidence
/// item's confidence, `None` for an item the verdict does not rest on (informational). `None`
/// when no item is rated.
pub fn weakest(trigger: &Trigger, rate: impl Fn(&EvidenceItem) -> Option<f64>) -> Option<f64> {
    trigger
        .evidence
        .iter()
        .filter_map(rate)
        .fold(None, |low: Option<f64>, c| {
            Some(low.map_or(c, |l| l.min(c)))
        })
}

/// How sure a raster's categorical look is: [`CERTAIN`] when band 1 declares classes (a
/// colour table or a raster attribute table), [`GUESS`] when only its integer values are few
/// (a sample of them; whole-number classes carried from a categorical input upstream read the
/// same), [`CERTAIN`] when it does not look categorical at all (nothing to be unsure of).
pub fn categorical_confidence(raster: &RasterFacts) -> f64 {
    let e = &raster.evidence;
    if !raster.looks_categorical || e.palette || e.attribute_table {
        CERTAIN
    } else {
        GUESS
    }
}

/// How sure it is that a raster that does not look categorical holds measurements:
/// [`CERTAIN`] for floating-point bands (classes are never stored as fractions), [`LIKELY`]
/// for integer bands (a class map with more than a few classes, or without a colour table,
/// reads the same).
pub fn continuous_confidence(raster: &RasterFacts) -> f64 {
    let floating = !raster.data_types.is_empty()
        && raster
            .data_types
            .iter()
            .all(|t| t.starts_with("Float") || t.starts_with("CFloat"));
    if floating {
        CERTAIN
    } else {
        LIKELY
    }
}

/// The categorical confidence ([`categorical_confidence`]) of the surest raster of `call`
/// that looks categorical (one declared class map is enough), or `None` when none does.
pub fn categorical_input_confidence(call: &Call) -> Option<f64> {
    call.raw
        .datasets
        .iter()
        .filter_map(|d| d.raster.as_ref())
        .filter(|r| r.looks_categorical)
        .map(categorical_confidence)
        .fold(None, |high: Option<f64>, c| {
            Some(high.map_or(c, |h| h.max(c)))
        })
}

/// `classify` as the host receives it: the domain's trigger with its
/// [`Domain::confidence`] (kept only when a finite number in [0, 1]) and its evidence marked
/// by [`Domain::relaxable`] (an item built relaxable stays so). The export glue calls it; a
/// domain's native tests call it to check what the host will see.
pub fn decide<T: Domain>(call: &Call) -> Option<Trigger> {
    let mut trigger = T::classify(call)?;
    trigger.confidence = T::confidence(call, &trigger).filter(|c| (0.0..=1.0).contains(c));
    for item in &mut trigger.evidence {
        item.relaxable = item.relaxable || T::relaxable(&item.id);
    }
    Some(trigger)
}

impl<T: Domain> bindings::Guest for T {
    fn describe() -> DomainInfo {
        T::describe()
    }

    fn classify(call: ToolCall) -> Option<Trigger> {
        decide::<T>(&Call::new(call))
    }

    fn render_prompt(arguments: Vec<PromptValue>) -> String {
        T::render_prompt(&arguments)
    }

    fn validate(
        key_fields: String,
        evidence: Vec<EvidenceItem>,
        justification: String,
    ) -> Vec<FieldError> {
        let key_fields = match serde_json::from_str::<Value>(&key_fields) {
            Ok(value) => value,
            Err(e) => return vec![field_error("", format!("key fields are not JSON: {e}"))],
        };
        match serde_json::from_str::<Value>(&justification) {
            Ok(justification) => T::validate(&key_fields, &evidence, &justification),
            Err(e) => vec![field_error("", format!("justification is not JSON: {e}"))],
        }
    }
}

/// Export a [`Domain`] implementation as the component's `risk-domain` world.
#[macro_export]
macro_rules! export_domain {
    ($domain:ident) => {
        $crate::bindings::__export_risk_domain!($domain with_types_in $crate::bindings);
    };
}

/// A tool call with its JSON arguments parsed once.
pub struct Call {
    /// The raw call as the host sent it.
    pub raw: ToolCall,
    /// The arguments object (`Value::Null` if the host sent something unparsable).
    pub args: Value,
}

impl Call {
    /// Parse the arguments of `raw` once. The export glue calls this for every `classify`;
    /// native unit tests of a domain call it to build the calls they classify.
    pub fn new(raw: ToolCall) -> Self {
        let args = serde_json::from_str(&raw.arguments).unwrap_or(Value::Null);
        Self { raw, args }
    }

    /// The tool name.
    pub fn tool(&self) -> &str {
        &self.raw.tool
    }

    /// A string argument.
    pub fn arg_str(&self, name: &str) -> Option<&str> {
        self.args.get(name).and_then(Value::as_str)
    }

    /// A numeric argument.
    pub fn arg_f64(&self, name: &str) -> Option<f64> {
        self.args.get(name).and_then(Value::as_f64)
    }

    /// Whether an argument is present and not null.
    pub fn has_arg(&self, name: &str) -> bool {
        self.args.get(name).is_some_and(|v| !v.is_null())
    }

    /// The facts of the dataset that came from argument `role`.
    pub fn dataset(&self, role: &str) -> Option<&DatasetFacts> {
        self.raw.datasets.iter().find(|d| d.role == role)
    }

    /// How the dataset that came from argument `role` was made, from the host's lineage
    /// records (read its steps with [`upstream_steps`] and the `nearest_*` helpers).
    pub fn upstream(&self, role: &str) -> Option<&Lineage> {
        self.dataset(role).map(|d| &d.upstream)
    }

    /// What the host measured about a measuring call (`vector_measure`, `vector_buffer`,
    /// `vector_overlay`, `vector_join`) before it runs; for a reprojection (`raster_reproject`,
    /// `vector_reproject`) to a projected CRS, the target's planar scale error over the data
    /// (method `planar`, `crs` the target, the other fields empty); `None` for every other
    /// tool. Check the tool before reading it as a measuring call's.
    pub fn measurement(&self) -> Option<&MeasurementFacts> {
        self.raw.measurement.as_ref()
    }

    /// What a writing call writes, as the host resolved it: the driver, the options as
    /// passed, and whether the encoding loses values (since 0.6); `None` for a tool that
    /// writes no output of the caller's format.
    pub fn output(&self) -> Option<&OutputFacts> {
        self.raw.output.as_ref()
    }

    /// How a composite's input grids relate (since 0.6); `None` for other tools.
    pub fn grids(&self) -> Option<GridRelation> {
        self.raw.grids
    }
}

/// Resampling methods that copy or select an input cell's value: nearest neighbour (`near`
/// is GDAL's name, the one lineage records carry: attack round 8, R8-2), the majority class
/// and the order statistics. Every other method computes values of its own.
const VALUE_KEEPING: &[&str] = &["nearest", "near", "mode", "min", "max", "med", "q1", "q3"];

/// Whether resampling `method` computes new cell values (bilinear, cubic, cubicspline,
/// lanczos, average, rms, sum, gauss) rather than copying or selecting an input cell's value
/// (nearest, mode, min, max, med, q1, q3). Case-insensitive; an unknown method counts as
/// computing values, the conservative answer.
pub fn creates_values(method: &str) -> bool {
    let method = method.trim().to_ascii_lowercase();
    !VALUE_KEEPING.contains(&method.as_str())
}

/// The steps of `lineage`, nearest first (by depth): all of them, including those before an
/// edit outside the server. For a dataset modified since the server wrote it (or one of whose
/// inputs was), the host gives the steps of the content the server last wrote at that path,
/// and an edit cannot undo what they did to the cells: a domain treats them as the dataset's
/// own, at least as strictly as it would have without the edit (issue 21: an edit outside the
/// server must never launder a finding).
pub fn upstream_steps(lineage: &Lineage) -> Vec<&UpstreamStep> {
    let mut steps: Vec<&UpstreamStep> = lineage.steps.iter().collect();
    steps.sort_by_key(|s| s.depth);
    steps
}

/// Whether `step` computed new cell values by resampling ([`creates_values`]).
pub fn interpolates(step: &UpstreamStep) -> bool {
    step.resampling.as_deref().is_some_and(creates_values)
}

/// The nearest step of `lineage` (smallest depth) that resampled with a value-creating method
/// ([`interpolates`]).
pub fn nearest_interpolation(lineage: &Lineage) -> Option<&UpstreamStep> {
    upstream_steps(lineage)
        .into_iter()
        .find(|s| interpolates(s))
}

/// The nearest step of `lineage` (smallest depth) that resampled with a value-creating method
/// or changed the CRS (which moves every cell onto a new grid, whatever the method).
pub fn nearest_regridding(lineage: &Lineage) -> Option<&UpstreamStep> {
    upstream_steps(lineage)
        .into_iter()
        .find(|s| interpolates(s) || s.crs_change.is_some())
}

/// The nearest step of `lineage` (smallest depth) that wrote a lossy encoding.
pub fn nearest_lossy_encoding(lineage: &Lineage) -> Option<&UpstreamStep> {
    upstream_steps(lineage)
        .into_iter()
        .find(|s| s.lossy_encoding.is_some())
}

/// Where a step is: `raster_reproject 2 steps up` (`1 step up` for the call that wrote the
/// dataset).
pub fn step_label(step: &UpstreamStep) -> String {
    let plural = if step.depth == 1 { "" } else { "s" };
    format!("{} {} step{plural} up", step.tool, step.depth)
}

/// What a step did to the cells, as an evidence fact: `raster_reproject 2 steps up resampled
/// with bilinear (EPSG:4326 -> EPSG:32633)`, `... changed the CRS (EPSG:4326 -> EPSG:32633)`
/// when it names no method, `... wrote JPEG quality 75` for a lossy encoding alone.
pub fn step_fact(step: &UpstreamStep) -> String {
    let mut parts = Vec::new();
    match (&step.resampling, &step.crs_change) {
        (Some(method), Some(change)) => parts.push(format!("resampled with {method} ({change})")),
        (Some(method), None) => parts.push(format!("resampled with {method}")),
        (None, Some(change)) => parts.push(format!("changed the CRS ({change})")),
        (None, None) => {}
    }
    if let Some(encoding) = &step.lossy_encoding {
        parts.push(format!("wrote {encoding}"));
    }
    if parts.is_empty() {
        return step_label(step);
    }
    format!("{} {}", step_label(step), parts.join(" and "))
}

/// Why a raster looks categorical (`band 1 has a colour table, ...`), or its data types when
/// it does not.
pub fn categorical_evidence(raster: &RasterFacts) -> String {
    if raster.looks_categorical {
        let e = &raster.evidence;
        let mut parts = Vec::new();
        if e.palette {
            parts.push("a colour table");
        }
        if e.attribute_table {
            parts.push("a raster attribute table");
        }
        if e.integer_classes {
            parts.push("integer values with few distinct classes");
        }
        format!("band 1 has {}", parts.join(", "))
    } else {
        format!("data type {}", raster.data_types.join(", "))
    }
}

/// The categorical evidence as a fact with its numbers, for an evidence item: `band 1 is Byte
/// with a colour table; a 256 × 256 sample of it holds at most 32 distinct integer values`.
/// For a raster that does not look categorical: its data types and that no evidence holds.
pub fn categorical_fact(raster: &RasterFacts) -> String {
    let data_type = raster
        .data_types
        .first()
        .map(String::as_str)
        .unwrap_or("of unknown type");
    if !raster.looks_categorical {
        let types = distinct_types(&raster.data_types);
        return format!(
            "{} band(s) of {}; band 1 has no colour table, no attribute table and is not an \
             integer band with few distinct values",
            raster.band_count,
            if types.is_empty() {
                "unknown type".to_string()
            } else {
                types.join(", ")
            }
        );
    }
    let e = &raster.evidence;
    let mut with = Vec::new();
    if e.palette {
        with.push("a colour table");
    }
    if e.attribute_table {
        with.push("a raster attribute table");
    }
    let mut fact = format!("band 1 is {data_type}");
    if !with.is_empty() {
        fact.push_str(" with ");
        fact.push_str(&with.join(" and "));
    }
    if e.integer_classes {
        fact.push_str(&format!(
            "; a {SAMPLE_SIDE} × {SAMPLE_SIDE} sample of it holds at most {MAX_CLASSES} distinct \
             integer values"
        ));
    }
    fact
}

/// The host samples band 1 on a grid of this many cells a side to count distinct values.
pub const SAMPLE_SIDE: u32 = 256;

/// At most this many distinct integer values in the sample make a band look categorical.
pub const MAX_CLASSES: u32 = 32;

/// The distinct entries of `types`, in order.
pub fn distinct_types(types: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in types {
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    out
}

/// A stable label for a CRS: its authority id, else its name.
pub fn crs_label(crs: &CrsFacts) -> String {
    crs.id.clone().unwrap_or_else(|| crs.name.clone())
}

/// Build a trigger; `key_fields` must be a JSON object. `evidence` lists the findings behind
/// the verdict (build them with [`evidence`]); a trigger without any gets one item, `finding`,
/// made by the host from `reason`, so give at least one. Its confidence is `None` (rate it in
/// [`Domain::confidence`]).
pub fn trigger(
    severity: Severity,
    reason: impl Into<String>,
    key_fields: Value,
    prompt_arguments: &[(&str, String)],
    evidence: Vec<EvidenceItem>,
) -> Trigger {
    Trigger {
        severity,
        reason: reason.into(),
        key_fields: key_fields.to_string(),
        prompt_arguments: prompt_arguments
            .iter()
            .map(|(name, value)| PromptValue {
                name: (*name).to_string(),
                value: value.clone(),
            })
            .collect(),
        evidence,
        confidence: None,
    }
}

/// One evidence item: a stable snake_case `id` (lowercase letters, digits, `_`; at most 64
/// characters), the `fact` with its numbers, `why` it matters for this call, and, when a safe
/// one exists, an `alternative`: a JSON object of ready-to-use call arguments (anything else
/// is dropped). It is not relaxable (mark its id in [`Domain::relaxable`]).
pub fn evidence(
    id: &str,
    fact: impl Into<String>,
    why: impl Into<String>,
    alternative: Option<Value>,
) -> EvidenceItem {
    EvidenceItem {
        id: id.to_string(),
        fact: fact.into(),
        why: why.into(),
        alternative: alternative.filter(Value::is_object).map(|a| a.to_string()),
        relaxable: false,
    }
}

/// The item with `id` among a trigger's evidence.
pub fn find_evidence<'a>(evidence: &'a [EvidenceItem], id: &str) -> Option<&'a EvidenceItem> {
    evidence.iter().find(|e| e.id == id)
}

/// An item's alternative, parsed (`None` when it has none or it is not a JSON object).
pub fn alternative(item: &EvidenceItem) -> Option<Value> {
    item.alternative
        .as_deref()
        .and_then(|a| serde_json::from_str::<Value>(a).ok())
        .filter(Value::is_object)
}

/// The justification's answer to evidence item `id`: the string at `evidence.<id>`.
pub fn evidence_answer<'a>(justification: &'a Value, id: &str) -> Option<&'a str> {
    justification
        .get("evidence")
        .and_then(|e| e.get(id))
        .and_then(Value::as_str)
}

/// `text` cut to at most `max` characters (with `…` when cut), for quoting a justification in a
/// field error: the host refuses field errors over 1 KiB as a broken contract.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The justification's `choice.tradeoffs`, if it is a string.
pub fn chosen_tradeoffs(justification: &Value) -> Option<&str> {
    justification
        .get("choice")
        .and_then(|c| c.get("tradeoffs"))
        .and_then(Value::as_str)
}

/// A number for a sentence: integers without a fraction (`30`, not `30.0`), others with at most
/// `digits` significant digits and no trailing zeros (`0.000278`, `27.83`).
pub fn approx(value: f64, digits: u32) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let magnitude = if value == 0.0 {
        0
    } else {
        value.abs().log10().floor() as i32
    };
    let decimals = (i64::from(digits.max(1)) - 1 - i64::from(magnitude)).clamp(0, 17);
    let text = format!("{value:.prec$}", prec = decimals as usize);
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A declared prompt argument.
pub fn prompt_argument(name: &str, description: &str, required: bool) -> PromptArgument {
    PromptArgument {
        name: name.to_string(),
        description: description.to_string(),
        required,
    }
}

/// A field error at a JSON pointer path.
pub fn field_error(path: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        path: path.to_string(),
        message: message.into(),
    }
}

/// The value of a prompt argument, or the empty string.
pub fn prompt_value<'a>(arguments: &'a [PromptValue], name: &str) -> &'a str {
    arguments
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.value.as_str())
        .unwrap_or("")
}

/// Replace every `{{name}}` with the argument's value. A line that names an argument which was
/// not given at all is left out (a heading is kept, without the missing parts), so a prompt rendered from only its required arguments (as
/// `prompts/get` may be) has no blank "**Flagged because:** " lines. An argument given as the
/// empty string renders as empty.
pub fn render_template(template: &str, arguments: &[PromptValue]) -> String {
    let given = |name: &str| arguments.iter().any(|a| a.name == name);
    let mut out = String::with_capacity(template.len() + 256);
    for line in template.split_inclusive('\n') {
        let mut rendered = String::with_capacity(line.len() + 64);
        let mut rest = line;
        let mut missing = false;
        while let Some(start) = rest.find("{{") {
            rendered.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after.find("}}") {
                Some(end) => {
                    let name = after[..end].trim();
                    missing |= !given(name);
                    rendered.push_str(prompt_value(arguments, name));
                    rest = &after[end + 2..];
                }
                None => {
                    rendered.push_str(&rest[start..]);
                    rest = "";
                }
            }
        }
        rendered.push_str(rest);
        if !missing {
            out.push_str(&rendered);
        } else if line.starts_with('#') {
            // A heading stays, without the parts that were not given.
            let kept = rendered.trim_end().trim_end_matches([':', ' ']);
            out.push_str(kept);
            out.push('\n');
        }
    }
    // A dropped line must not leave a double blank line behind.
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    out
}

/// The justification's `choice.method`, if it is a string.
pub fn chosen_method(justification: &Value) -> Option<&str> {
    justification
        .get("choice")
        .and_then(|c| c.get("method"))
        .and_then(Value::as_str)
}

/// Lower-case and drop everything but letters and digits, so that `EPSG:4326`,
/// `epsg 4326` and `EPSG_4326` compare equal.
pub fn normalise(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Words that turn a method's name into its opposite ("nearest, definitely not bilinear").
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "without", "instead", "rather", "avoid", "avoiding", "except", "nor",
    "isnt", "dont", "doesnt", "wont", "cannot", "cant", "unlike", "versus", "vs",
];

/// The lower-case letter-and-digit runs of `text`.
pub fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Whether `method` names `expected`: some run of whole tokens of `method` spells `expected`
/// (so `EPSG:4326`, `epsg 4326` and `scale 111,120` match `EPSG:4326` and `111120`, but
/// `nonbilinear` does not match `bilinear`), and `method` negates nothing (`not bilinear`,
/// `nearest instead of bilinear` name no method at all). Compared by parsed tokens, never by
/// substring.
pub fn names(method: &str, expected: &str) -> bool {
    let expected = normalise(expected);
    if expected.is_empty() {
        return false;
    }
    let tokens = tokens(&method.replace("n't", "nt"));
    if tokens.iter().any(|t| NEGATIONS.contains(&t.as_str())) {
        return false;
    }
    (0..tokens.len()).any(|start| {
        let mut run = String::new();
        for token in &tokens[start..] {
            run.push_str(token);
            if run == expected {
                return true;
            }
            if run.len() >= expected.len() || !expected.starts_with(&run) {
                return false;
            }
        }
        false
    })
}

/// Builders for native unit tests of domains: the records the host would send, with
/// neutral defaults. Build a [`Call`] with [`Call::new`]`(testing::call(...))`; set the facts
/// 0.3 added with [`testing::georeferencing`], [`testing::with_bands`],
/// [`testing::transformations`], [`testing::layer`] and friends, or by assigning the public
/// record fields; give a dataset the upstream steps 0.4 added with [`testing::with_upstream`]
/// and [`testing::upstream_step`] (or [`testing::resampled_step`]); give a measuring call the
/// measurement facts 0.5 added with [`testing::with_measurement`], built from
/// [`testing::measurement`] (neutral defaults) or [`testing::planar_measurement`] with struct
/// update syntax.
pub mod testing {
    use super::{
        BandFacts, CategoricalEvidence, CrsFacts, CrsKind, DatasetFacts, EvidenceItem,
        GeorefCandidate, Georeferencing, GridRelation, LayerFacts, Lineage, MeasurementFacts,
        OperationFacts, OutputFacts, RasterFacts, Registration, Sentinel, ToolCall,
        TransformationFacts, Trigger, UpstreamStep, Value, VectorFacts,
    };

    /// Check what the host requires of a trigger's evidence, and hand the trigger back: at
    /// least one item, unique ids of 1-64 lowercase letters, digits or `_`, a fact and a why,
    /// and alternatives that are JSON objects. Panics (it is for tests) naming the item.
    pub fn checked(trigger: Option<Trigger>) -> Option<Trigger> {
        if let Some(t) = &trigger {
            assert!(!t.evidence.is_empty(), "no evidence: {}", t.reason);
            let mut seen: Vec<&str> = Vec::new();
            for item in &t.evidence {
                let id = item.id.as_str();
                assert!(
                    !id.is_empty()
                        && id.len() <= 64
                        && id
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "evidence id {id:?}"
                );
                assert!(!seen.contains(&id), "duplicate evidence id {id}");
                seen.push(id);
                assert!(!item.fact.is_empty() && !item.why.is_empty(), "{id}");
                if let Some(a) = &item.alternative {
                    assert!(
                        serde_json::from_str::<Value>(a).is_ok_and(|v| v.is_object()),
                        "{id}: alternative {a} is not a JSON object"
                    );
                }
            }
        }
        trigger
    }

    /// The evidence ids of a trigger, in order.
    pub fn evidence_ids(trigger: &Option<Trigger>) -> Vec<String> {
        trigger
            .as_ref()
            .map(|t| t.evidence.iter().map(|e| e.id.clone()).collect())
            .unwrap_or_default()
    }

    /// The evidence item `id` of a trigger; panics naming the ids there are.
    pub fn evidence_item(trigger: &Option<Trigger>, id: &str) -> EvidenceItem {
        trigger
            .as_ref()
            .and_then(|t| super::find_evidence(&t.evidence, id).cloned())
            .unwrap_or_else(|| panic!("no evidence item {id}: {:?}", evidence_ids(trigger)))
    }

    /// The safe alternative the evidence item `id` offers, if any.
    pub fn offered(trigger: &Option<Trigger>, id: &str) -> Option<Value> {
        super::alternative(&evidence_item(trigger, id))
    }

    /// A CRS with an authority id (or none), a name and a kind; projected CRSs get metres
    /// (easting, northing), geographic ones no unit (latitude first, as EPSG orders them).
    pub fn crs(id: Option<&str>, name: &str, kind: CrsKind, datum: &str) -> CrsFacts {
        let projected = kind == CrsKind::Projected;
        CrsFacts {
            id: id.map(String::from),
            name: name.to_string(),
            kind,
            linear_unit: projected.then(|| "metre".to_string()),
            datum: Some(datum.to_string()),
            vertical: None,
            linear_unit_metres: projected.then_some(1.0),
            axis_order: match kind {
                CrsKind::Projected => Some("east,north".to_string()),
                CrsKind::Geographic => Some("north,east".to_string()),
                _ => None,
            },
        }
    }

    /// `EPSG:32633`, WGS 84 / UTM zone 33N.
    pub fn utm33() -> CrsFacts {
        crs(
            Some("EPSG:32633"),
            "WGS 84 / UTM zone 33N",
            CrsKind::Projected,
            "WGS_1984",
        )
    }

    /// `EPSG:4326`, WGS 84 geographic.
    pub fn wgs84() -> CrsFacts {
        crs(Some("EPSG:4326"), "WGS 84", CrsKind::Geographic, "WGS_1984")
    }

    /// `EPSG:4267`, NAD27 geographic.
    pub fn nad27() -> CrsFacts {
        crs(
            Some("EPSG:4267"),
            "NAD27",
            CrsKind::Geographic,
            "North_American_Datum_1927",
        )
    }

    /// Georeferencing from one `source` (`internal`, `aux-xml`, `world-file`, `gcps`, `rpc` or
    /// `none`): no competing candidates, no conflicts, area registration, north-up, not
    /// rotated, no metric cell size.
    pub fn georeferencing(source: &str) -> Georeferencing {
        Georeferencing {
            geotransform_source: source.to_string(),
            candidates: Vec::new(),
            conflicts: Vec::new(),
            registration: Registration::Area,
            rotated: false,
            south_up: false,
            cell_size_metres: None,
        }
    }

    /// One georeferencing candidate from `source`.
    pub fn candidate(
        source: &str,
        geotransform: Option<[f64; 6]>,
        crs: Option<&str>,
    ) -> GeorefCandidate {
        GeorefCandidate {
            source: source.to_string(),
            geotransform: geotransform.map(|g| g.to_vec()),
            crs: crs.map(String::from),
        }
    }

    /// `raster` with `georeferencing` in place of the default.
    pub fn with_georeferencing(
        mut raster: RasterFacts,
        georeferencing: Georeferencing,
    ) -> RasterFacts {
        raster.georeferencing = georeferencing;
        raster
    }

    /// A band's facts: declared nodata, no scale, offset or unit, no sentinels, not sampled.
    pub fn band(nodata: Option<f64>) -> BandFacts {
        BandFacts {
            scale: None,
            offset: None,
            unit: None,
            nodata,
            undeclared_sentinels: Vec::new(),
            sampled_cells: 0,
        }
    }

    /// A band with a declared scale, offset and unit.
    pub fn scaled_band(scale: f64, offset: f64, unit: Option<&str>) -> BandFacts {
        BandFacts {
            scale: Some(scale),
            offset: Some(offset),
            unit: unit.map(String::from),
            ..band(None)
        }
    }

    /// A value found in a band's sample that is not its declared nodata.
    pub fn sentinel(value: f64, count: u64, kind: &str) -> Sentinel {
        Sentinel {
            value,
            count,
            kind: kind.to_string(),
        }
    }

    /// `raster` with these per-band facts; its `band_count`, `nodata` and `data_types` follow
    /// (extra bands repeat the last data type).
    pub fn with_bands(mut raster: RasterFacts, bands: Vec<BandFacts>) -> RasterFacts {
        let last = raster
            .data_types
            .last()
            .cloned()
            .unwrap_or_else(|| "Byte".to_string());
        raster.data_types.resize(bands.len(), last);
        raster.nodata = bands.iter().map(|b| b.nodata).collect();
        raster.band_count = u32::try_from(bands.len()).unwrap_or(u32::MAX);
        raster.bands = bands;
        raster
    }

    /// `raster` with the pixel size `(x, y)` (y negative for north-up), or none.
    pub fn with_pixel_size(mut raster: RasterFacts, pixel_size: Option<(f64, f64)>) -> RasterFacts {
        raster.pixel_size = pixel_size;
        raster
    }

    /// A 100 x 100 raster with `bands` bands of `data_type`, no nodata, 30 m cells, internal
    /// georeferencing; when `categorical`, band 1 has a colour table and few integer classes.
    pub fn raster(data_type: &str, bands: u32, categorical: bool) -> RasterFacts {
        RasterFacts {
            width: 100,
            height: 100,
            band_count: bands,
            data_types: (0..bands).map(|_| data_type.to_string()).collect(),
            nodata: (0..bands).map(|_| None).collect(),
            pixel_size: Some((30.0, -30.0)),
            looks_categorical: categorical,
            evidence: CategoricalEvidence {
                palette: categorical,
                attribute_table: false,
                integer_classes: categorical,
            },
            flat_fraction: None,
            georeferencing: georeferencing("internal"),
            bands: (0..bands).map(|_| band(None)).collect(),
        }
    }

    /// Raster dataset facts for argument `role`.
    pub fn raster_dataset(role: &str, crs: Option<CrsFacts>, raster: RasterFacts) -> DatasetFacts {
        DatasetFacts {
            role: role.to_string(),
            driver: "GTiff".to_string(),
            crs,
            raster: Some(raster),
            vector: None,
            upstream: no_lineage(),
        }
    }

    /// A layer of 10 features of one `geometry` type (3D when it starts with `3D `, measured
    /// when it says `Measured`), all checked, none invalid.
    pub fn layer(name: &str, geometry: &str) -> LayerFacts {
        LayerFacts {
            name: name.to_string(),
            geometry_type: geometry.to_string(),
            feature_count: Some(10),
            has_z: geometry.starts_with("3D "),
            has_m: geometry.contains("Measured"),
            geometry_types: vec![geometry.to_string()],
            invalid_geometries: Some(0),
            features_checked: 10,
        }
    }

    /// Vector dataset facts for argument `role`, with these layers and no selected layer.
    pub fn vector_layers(
        role: &str,
        driver: &str,
        crs: Option<CrsFacts>,
        layers: Vec<LayerFacts>,
    ) -> DatasetFacts {
        DatasetFacts {
            role: role.to_string(),
            driver: driver.to_string(),
            crs,
            raster: None,
            vector: Some(VectorFacts {
                layers,
                selected_layer: None,
            }),
            upstream: no_lineage(),
        }
    }

    /// No lineage: a dataset the server did not make.
    pub fn no_lineage() -> Lineage {
        Lineage {
            sha256: None,
            modified_since: false,
            steps: Vec::new(),
        }
    }

    /// The lineage of a dataset the server made through `steps` (nearest first): hashed, not
    /// modified since.
    pub fn lineage(steps: Vec<UpstreamStep>) -> Lineage {
        Lineage {
            sha256: Some("0".repeat(64)),
            modified_since: false,
            steps,
        }
    }

    /// `dataset` as made by the server through `steps` ([`lineage`]).
    pub fn with_upstream(mut dataset: DatasetFacts, steps: Vec<UpstreamStep>) -> DatasetFacts {
        dataset.upstream = lineage(steps);
        dataset
    }

    /// One upstream step of `tool` at `depth` (1: the call that wrote the dataset): arguments
    /// `{}`, no resampling, CRS change, conditioning, aggregation or lossy encoding, input not
    /// modified, no capsules. Set what the step did with struct update syntax.
    pub fn upstream_step(depth: u32, tool: &str) -> UpstreamStep {
        UpstreamStep {
            depth,
            tool: tool.to_string(),
            arguments: "{}".to_string(),
            resampling: None,
            crs_change: None,
            conditioning: None,
            aggregation: None,
            lossy_encoding: None,
            input_modified: false,
            capsules: Vec::new(),
        }
    }

    /// An [`upstream_step`] that resampled with `method`, changing the CRS when `crs_change`
    /// says `source -> target`.
    pub fn resampled_step(
        depth: u32,
        tool: &str,
        method: &str,
        crs_change: Option<&str>,
    ) -> UpstreamStep {
        UpstreamStep {
            resampling: Some(method.to_string()),
            crs_change: crs_change.map(String::from),
            ..upstream_step(depth, tool)
        }
    }

    /// Vector dataset facts for argument `role`, one [`layer`] per `(name, geometry type)`.
    pub fn vector_dataset(
        role: &str,
        driver: &str,
        crs: Option<CrsFacts>,
        layers: &[(&str, &str)],
    ) -> DatasetFacts {
        vector_layers(
            role,
            driver,
            crs,
            layers
                .iter()
                .map(|(name, geometry)| layer(name, geometry))
                .collect(),
        )
    }

    /// One coordinate operation: direct (no intermediate CRS), area of use unknown.
    pub fn operation(name: &str, accuracy: Option<f64>, ballpark: bool) -> OperationFacts {
        OperationFacts {
            name: name.to_string(),
            accuracy_metres: accuracy,
            ballpark,
            via: None,
            covers_data: None,
        }
    }

    /// An operation through the intermediate CRS `via`.
    pub fn operation_via(name: &str, accuracy: Option<f64>, via: &str) -> OperationFacts {
        OperationFacts {
            via: Some(via.to_string()),
            ..operation(name, accuracy, false)
        }
    }

    /// The transformation facts when the host uses what PROJ would pick anyway: `used` and
    /// `default` are the same operation, no grids missing.
    pub fn transformation(
        name: &str,
        accuracy: Option<f64>,
        ballpark: bool,
    ) -> TransformationFacts {
        let op = operation(name, accuracy, ballpark);
        transformations(op.clone(), op, &[])
    }

    /// The transformation facts with the operation the call `used`, PROJ's `default`, and the
    /// grids better operations need but the machine lacks.
    pub fn transformations(
        used: OperationFacts,
        default: OperationFacts,
        missing_grids: &[&str],
    ) -> TransformationFacts {
        TransformationFacts {
            used,
            default,
            missing_grids: missing_grids.iter().map(|g| (*g).to_string()).collect(),
        }
    }

    /// Measurement facts with neutral defaults, for the `method` given (`geodesic` or
    /// `planar`): no CRS, the WGS 84 ellipsoid for geodesic figures (none for planar ones), no
    /// scale error, 10 features checked and none invalid, no repair, overlaps not checked, no
    /// dissolve, polygons only, no ignored Z, no distance units, no unweighted means. Set what a
    /// test needs with struct update syntax:
    ///
    /// ```
    /// use gdal_mcp_domain_sdk::testing::measurement;
    /// use gdal_mcp_domain_sdk::MeasurementFacts;
    /// let facts = MeasurementFacts { invalid_features: 2, ..measurement("geodesic") };
    /// assert_eq!((facts.features_checked, facts.invalid_features), (10, 2));
    /// ```
    pub fn measurement(method: &str) -> MeasurementFacts {
        MeasurementFacts {
            method: method.to_string(),
            crs: None,
            ellipsoid: (method == "geodesic").then(|| "WGS 84".to_string()),
            area_scale_error: None,
            length_scale_error: None,
            worst_at: None,
            features_checked: 10,
            invalid_features: 0,
            make_valid: false,
            overlapping_pairs: None,
            overlap_area_m2: None,
            dissolve: false,
            geometry_kinds: vec!["polygon".to_string()],
            z_ignored: false,
            distance_units: None,
            unweighted_means: Vec::new(),
        }
    }

    /// Planar [`measurement`] facts in `crs`, with the largest relative area and length errors
    /// over the data (e.g. 0.31 for 31 %) found at `worst_at` (`[longitude, latitude]`).
    pub fn planar_measurement(
        crs: CrsFacts,
        area_scale_error: f64,
        length_scale_error: f64,
        worst_at: (f64, f64),
    ) -> MeasurementFacts {
        MeasurementFacts {
            crs: Some(crs),
            area_scale_error: Some(area_scale_error),
            length_scale_error: Some(length_scale_error),
            worst_at: Some(worst_at),
            ..measurement("planar")
        }
    }

    /// `call` with the measurement facts the host sends for a measuring call.
    pub fn with_measurement(mut call: ToolCall, facts: MeasurementFacts) -> ToolCall {
        call.measurement = Some(facts);
        call
    }

    /// A tool call as the host sends it, without target CRS, transformation, measurement,
    /// output or grid facts.
    pub fn call(tool: &str, arguments: Value, datasets: Vec<DatasetFacts>) -> ToolCall {
        ToolCall {
            tool: tool.to_string(),
            arguments: arguments.to_string(),
            datasets,
            target_crs: None,
            transformation: None,
            measurement: None,
            output: None,
            grids: None,
        }
    }

    /// The output facts of a lossless write by `driver` with `options`.
    pub fn output(driver: &str, options: &[(&str, &str)]) -> OutputFacts {
        OutputFacts {
            driver: driver.to_string(),
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            compression: None,
            lossy: false,
            losses: Vec::new(),
            quality: None,
            max_z_error: None,
        }
    }

    /// `call` with the output facts the host sends for a writing call.
    pub fn with_output(mut call: ToolCall, facts: OutputFacts) -> ToolCall {
        call.output = Some(facts);
        call
    }

    /// `call` with the grid relation the host sends for a composite.
    pub fn with_grids(mut call: ToolCall, grids: GridRelation) -> ToolCall {
        call.grids = Some(grids);
        call
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, value: &str) -> PromptValue {
        PromptValue {
            name: name.to_string(),
            value: value.to_string(),
        }
    }

    #[test]
    fn evidence_items_keep_only_object_alternatives() {
        let item = evidence(
            "categorical_input",
            "band 1 is Byte with a colour table",
            "bilinear mixes class codes",
            Some(json!({"resampling": "mode"})),
        );
        assert_eq!(
            item.alternative.as_deref(),
            Some(r#"{"resampling":"mode"}"#)
        );
        assert_eq!(alternative(&item), Some(json!({"resampling": "mode"})));
        assert!(evidence("x", "f", "w", Some(json!("mode")))
            .alternative
            .is_none());
        assert!(evidence("x", "f", "w", None).alternative.is_none());
        let items = [item];
        assert!(find_evidence(&items, "categorical_input").is_some());
        assert!(find_evidence(&items, "finding").is_none());
        let t = trigger(
            Severity::Critical,
            "r",
            json!({"a": 1}),
            &[],
            items.to_vec(),
        );
        assert_eq!(t.evidence.len(), 1);
    }

    /// A domain that rates and marks its findings (WIT 0.7), one that ignores both (it still
    /// builds: confidence unknown, nothing relaxable), and one that rates out of range.
    struct Marks;
    struct Silent;
    struct Overconfident;

    fn info() -> DomainInfo {
        DomainInfo {
            id: "marks".to_string(),
            version: "0.1.0".to_string(),
            title: "t".to_string(),
            summary: "s".to_string(),
            prompt_name: "p".to_string(),
            prompt_arguments: Vec::new(),
            methodology: "m".to_string(),
        }
    }

    fn two_findings() -> Option<Trigger> {
        Some(trigger(
            Severity::Required,
            "r",
            json!({}),
            &[],
            vec![
                evidence("convention", "f", "w", None),
                evidence("loss", "f", "w", None),
            ],
        ))
    }

    impl Domain for Marks {
        fn describe() -> DomainInfo {
            info()
        }
        fn classify(_call: &Call) -> Option<Trigger> {
            two_findings()
        }
        fn confidence(_call: &Call, trigger: &Trigger) -> Option<f64> {
            weakest(trigger, |e| {
                Some(if e.id == "loss" { GUESS } else { CERTAIN })
            })
        }
        fn relaxable(evidence_id: &str) -> bool {
            evidence_id == "convention"
        }
    }

    impl Domain for Silent {
        fn describe() -> DomainInfo {
            info()
        }
        fn classify(_call: &Call) -> Option<Trigger> {
            two_findings()
        }
    }

    impl Domain for Overconfident {
        fn describe() -> DomainInfo {
            info()
        }
        fn classify(_call: &Call) -> Option<Trigger> {
            two_findings()
        }
        fn confidence(_call: &Call, _trigger: &Trigger) -> Option<f64> {
            Some(1.5)
        }
    }

    #[test]
    fn decide_applies_the_domains_confidence_and_relaxable_marks() {
        let call = Call::new(testing::call("raster_info", json!({}), Vec::new()));
        let marked = decide::<Marks>(&call).expect("a trigger");
        assert_eq!(marked.confidence, Some(GUESS), "the least sure finding");
        let marks: Vec<(&str, bool)> = marked
            .evidence
            .iter()
            .map(|e| (e.id.as_str(), e.relaxable))
            .collect();
        assert_eq!(marks, [("convention", true), ("loss", false)]);
        let silent = decide::<Silent>(&call).expect("a trigger");
        assert_eq!(silent.confidence, None);
        assert!(silent.evidence.iter().all(|e| !e.relaxable));
        let over = decide::<Overconfident>(&call).expect("a trigger");
        assert_eq!(over.confidence, None, "out of range is not said at all");
        assert_eq!(weakest(&silent, |_| None), None);
    }

    #[test]
    fn categorical_and_continuous_confidence_read_the_evidence() {
        let declared = testing::raster("Byte", 1, true);
        assert_eq!(categorical_confidence(&declared), CERTAIN);
        let mut sampled = declared.clone();
        sampled.evidence.palette = false;
        sampled.evidence.attribute_table = false;
        assert_eq!(categorical_confidence(&sampled), GUESS);
        assert_eq!(
            continuous_confidence(&testing::raster("Float32", 1, false)),
            CERTAIN
        );
        assert_eq!(
            continuous_confidence(&testing::raster("Int16", 1, false)),
            LIKELY
        );
    }

    #[test]
    fn justification_answers_are_read_by_id() {
        let just = json!({"evidence": {"ballpark_operation": "we accept 100 m"},
                          "choice": {"tradeoffs": "t"}});
        assert_eq!(
            evidence_answer(&just, "ballpark_operation"),
            Some("we accept 100 m")
        );
        assert_eq!(evidence_answer(&just, "missing_grids"), None);
        assert_eq!(chosen_tradeoffs(&just), Some("t"));
    }

    #[test]
    fn shorten_cuts_long_quotes() {
        assert_eq!(shorten("bilinear", 10), "bilinear");
        assert_eq!(shorten("abcdefghijk", 5), "abcd…");
        assert_eq!(shorten(&"é".repeat(300), 200).chars().count(), 200);
    }

    #[test]
    fn approx_keeps_integers_and_trims_fractions() {
        assert_eq!(approx(30.0, 4), "30");
        assert_eq!(approx(111120.0, 4), "111120");
        assert_eq!(approx(27.834_12, 4), "27.83");
        assert_eq!(approx(0.000_277_777_8, 3), "0.000278");
        assert_eq!(approx(2.5, 4), "2.5");
        assert_eq!(approx(-0.5, 2), "-0.5");
        assert_eq!(approx(0.0, 3), "0");
    }

    #[test]
    fn categorical_fact_has_the_numbers() {
        let r = testing::raster("Byte", 1, true);
        assert_eq!(
            categorical_fact(&r),
            "band 1 is Byte with a colour table; a 256 × 256 sample of it holds at most 32 \
             distinct integer values"
        );
        let f = testing::raster("Float32", 2, false);
        assert!(categorical_fact(&f).starts_with("2 band(s) of Float32"));
    }

    #[test]
    fn creates_values_tells_interpolators_from_selectors() {
        for method in [
            "bilinear",
            "cubic",
            "cubicspline",
            "lanczos",
            "average",
            "rms",
            "sum",
            "gauss",
            "Bilinear",
            "something_new",
        ] {
            assert!(creates_values(method), "{method}");
        }
        for method in [
            "nearest", "near", "mode", "min", "max", "med", "q1", "q3", "NEAREST",
        ] {
            assert!(!creates_values(method), "{method}");
        }
    }

    #[test]
    fn nearest_steps_are_found_by_depth_within_the_unbroken_chain() {
        use testing::{lineage, resampled_step, upstream_step};
        let lossy = UpstreamStep {
            lossy_encoding: Some("JPEG quality 75".to_string()),
            ..upstream_step(1, "raster_convert")
        };
        let nearest = resampled_step(2, "raster_resample", "nearest", None);
        let moved = resampled_step(
            3,
            "raster_reproject",
            "mode",
            Some("EPSG:4326 -> EPSG:32633"),
        );
        let bilinear = resampled_step(4, "raster_resample", "bilinear", None);
        // Out of order on purpose: depth decides.
        let l = lineage(vec![
            bilinear.clone(),
            moved.clone(),
            lossy.clone(),
            nearest.clone(),
        ]);
        assert_eq!(upstream_steps(&l).len(), 4);
        assert_eq!(nearest_interpolation(&l).map(|s| s.depth), Some(4));
        assert_eq!(nearest_regridding(&l).map(|s| s.depth), Some(3));
        assert_eq!(nearest_lossy_encoding(&l).map(|s| s.depth), Some(1));
        assert_eq!(
            nearest_regridding(&l).map(step_fact).as_deref(),
            Some("raster_reproject 3 steps up resampled with mode (EPSG:4326 -> EPSG:32633)")
        );
        assert_eq!(
            step_fact(&lossy),
            "raster_convert 1 step up wrote JPEG quality 75"
        );
        // Nearest neighbour and no CRS change: nothing interpolated.
        let l = lineage(vec![nearest.clone()]);
        assert!(nearest_interpolation(&l).is_none() && nearest_regridding(&l).is_none());
        // Regression (issue 21): an edit outside the server laundered what came before it.
        // Steps beyond a step whose input was modified still count (the host walks on to
        // what the server wrote there), and so do a modified file's own.
        let broken = UpstreamStep {
            input_modified: true,
            ..nearest.clone()
        };
        let l = lineage(vec![lossy, broken, bilinear.clone()]);
        assert_eq!(upstream_steps(&l).len(), 3);
        assert_eq!(nearest_interpolation(&l).map(|s| s.depth), Some(4));
        let mut l = lineage(vec![bilinear]);
        l.modified_since = true;
        assert_eq!(upstream_steps(&l).len(), 1);
        assert_eq!(nearest_interpolation(&l).map(|s| s.depth), Some(4));
    }

    #[test]
    fn calls_read_upstream_by_role() {
        use testing::{call, raster, raster_dataset, resampled_step, with_upstream};
        let input = with_upstream(
            raster_dataset("input", None, raster("Float32", 1, false)),
            vec![resampled_step(1, "raster_resample", "cubic", None)],
        );
        let c = Call::new(call("dem_condition", json!({}), vec![input]));
        assert_eq!(
            c.upstream("input")
                .and_then(nearest_interpolation)
                .map(step_fact)
                .as_deref(),
            Some("raster_resample 1 step up resampled with cubic")
        );
        assert!(c.upstream("zones").is_none());
    }

    #[test]
    fn calls_read_their_measurement_facts() {
        use testing::{call, measurement, planar_measurement, utm33, with_measurement};
        let plain = Call::new(call("vector_info", json!({}), Vec::new()));
        assert!(plain.measurement().is_none());
        let facts = MeasurementFacts {
            invalid_features: 3,
            geometry_kinds: vec!["line".to_string()],
            ..planar_measurement(utm33(), 0.0008, 0.0004, (15.0, 45.0))
        };
        let c = Call::new(with_measurement(
            call("vector_measure", json!({"method": "planar"}), Vec::new()),
            facts,
        ));
        let m = c.measurement();
        assert_eq!(m.map(|m| m.method.as_str()), Some("planar"));
        assert_eq!(
            m.and_then(|m| m.crs.as_ref()).map(crs_label).as_deref(),
            Some("EPSG:32633")
        );
        assert_eq!(
            m.map(|m| (m.features_checked, m.invalid_features)),
            Some((10, 3))
        );
        assert_eq!(m.and_then(|m| m.worst_at), Some((15.0, 45.0)));
        assert!(m.is_some_and(|m| m.ellipsoid.is_none()));
        let geodesic = measurement("geodesic");
        assert_eq!(geodesic.ellipsoid.as_deref(), Some("WGS 84"));
        assert!(geodesic.crs.is_none() && geodesic.area_scale_error.is_none());
        assert_eq!(geodesic.geometry_kinds, ["polygon"]);
    }

    /// Regression: `validate` compared by containment, so "nearest, definitely not bilinear"
    /// passed for a bilinear call.
    #[test]
    fn names_compares_tokens_and_refuses_negations() {
        assert!(names("EPSG:4326", "EPSG:4326"));
        assert!(names("epsg 4326 (WGS 84)", "EPSG:4326"));
        assert!(names("scale 111,120 (metres per degree)", "111120"));
        assert!(names("Bilinear interpolation", "bilinear"));
        assert!(!names("nearest, definitely not bilinear", "bilinear"));
        assert!(!names("nearest instead of bilinear", "bilinear"));
        assert!(!names("don't use bilinear", "bilinear"));
        assert!(!names("nonbilinear", "bilinear"));
        assert!(!names("EPSG:43260", "EPSG:4326"));
        assert!(!names("anything", ""));
    }

    /// Regression: `prompts/get` with only the required arguments rendered
    /// "**Flagged because:** " followed by nothing.
    #[test]
    fn lines_naming_arguments_that_were_not_given_are_left_out() {
        let template = "## {{tool}}\n\n**Flagged because:** {{reason}}\n\nAnswer.\n";
        assert_eq!(
            render_template(template, &[value("tool", "raster_reproject")]),
            "## raster_reproject\n\nAnswer.\n"
        );
        assert_eq!(
            render_template("## Decision: {{tool}}\n**Why:** {{reason}}\nEnd.\n", &[]),
            "## Decision\nEnd.\n"
        );
        assert_eq!(
            render_template(template, &[value("tool", "t"), value("reason", "")]),
            "## t\n\n**Flagged because:** \n\nAnswer.\n"
        );
        assert_eq!(
            render_template(template, &[value("tool", "t"), value("reason", "r")]),
            "## t\n\n**Flagged because:** r\n\nAnswer.\n"
        );
    }
}
