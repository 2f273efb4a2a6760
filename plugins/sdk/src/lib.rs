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
//! Helpers for reading call arguments and building triggers live here too, so the built-in
//! domains and third-party methodology packs read the same way.

#![forbid(unsafe_code)]

pub use serde_json::{json, Value};

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
    CategoricalEvidence, CrsFacts, CrsKind, DatasetFacts, DomainInfo, FieldError, LayerFacts,
    PromptArgument, PromptValue, RasterFacts, Severity, ToolCall, TransformationFacts, Trigger,
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
    fn validate(_key_fields: &Value, _justification: &Value) -> Vec<FieldError> {
        Vec::new()
    }
}

impl<T: Domain> bindings::Guest for T {
    fn describe() -> DomainInfo {
        T::describe()
    }

    fn classify(call: ToolCall) -> Option<Trigger> {
        T::classify(&Call::new(call))
    }

    fn render_prompt(arguments: Vec<PromptValue>) -> String {
        T::render_prompt(&arguments)
    }

    fn validate(key_fields: String, justification: String) -> Vec<FieldError> {
        let key_fields = match serde_json::from_str::<Value>(&key_fields) {
            Ok(value) => value,
            Err(e) => return vec![field_error("", format!("key fields are not JSON: {e}"))],
        };
        match serde_json::from_str::<Value>(&justification) {
            Ok(justification) => T::validate(&key_fields, &justification),
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
    fn new(raw: ToolCall) -> Self {
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

    /// Whether an argument is present and not null.
    pub fn has_arg(&self, name: &str) -> bool {
        self.args.get(name).is_some_and(|v| !v.is_null())
    }

    /// The facts of the dataset that came from argument `role`.
    pub fn dataset(&self, role: &str) -> Option<&DatasetFacts> {
        self.raw.datasets.iter().find(|d| d.role == role)
    }
}

/// A stable label for a CRS: its authority id, else its name.
pub fn crs_label(crs: &CrsFacts) -> String {
    crs.id.clone().unwrap_or_else(|| crs.name.clone())
}

/// Build a trigger; `key_fields` must be a JSON object.
pub fn trigger(
    severity: Severity,
    reason: impl Into<String>,
    key_fields: Value,
    prompt_arguments: &[(&str, String)],
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

/// Replace every `{{name}}` with the argument's value (unknown names become empty).
pub fn render_template(template: &str, arguments: &[PromptValue]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                out.push_str(prompt_value(arguments, after[..end].trim()));
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
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

/// Whether `method` names `expected` (normalised containment).
pub fn names(method: &str, expected: &str) -> bool {
    let expected = normalise(expected);
    !expected.is_empty() && normalise(method).contains(&expected)
}
