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
//! domains and third-party methodology packs read the same way, and [`testing`] builds the
//! records the host sends, so a domain's classification can be unit-tested natively with
//! [`Call::new`].

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
/// neutral defaults. Build a [`Call`] with [`Call::new`]`(testing::call(...))`.
pub mod testing {
    use super::{
        CategoricalEvidence, CrsFacts, CrsKind, DatasetFacts, LayerFacts, RasterFacts, ToolCall,
        TransformationFacts, Value, VectorFacts,
    };

    /// A CRS with an authority id (or none), a name and a kind; projected CRSs get metres.
    pub fn crs(id: Option<&str>, name: &str, kind: CrsKind, datum: &str) -> CrsFacts {
        CrsFacts {
            id: id.map(String::from),
            name: name.to_string(),
            kind,
            linear_unit: (kind == CrsKind::Projected).then(|| "metre".to_string()),
            datum: Some(datum.to_string()),
            vertical: None,
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

    /// A 100 x 100 raster with `bands` bands of `data_type`, no nodata, 30 m cells; when
    /// `categorical`, band 1 has a colour table and few integer classes.
    pub fn raster(data_type: &str, bands: u32, categorical: bool) -> RasterFacts {
        RasterFacts {
            width: 100,
            height: 100,
            band_count: bands,
            data_types: (0..bands).map(|_| data_type.to_string()).collect(),
            nodata: (0..bands).map(|_| None).collect(),
            pixel_size: (30.0, -30.0),
            looks_categorical: categorical,
            evidence: CategoricalEvidence {
                palette: categorical,
                attribute_table: false,
                integer_classes: categorical,
            },
            flat_fraction: None,
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
        }
    }

    /// Vector dataset facts for argument `role`, one layer per `(name, geometry type)`.
    pub fn vector_dataset(
        role: &str,
        driver: &str,
        crs: Option<CrsFacts>,
        layers: &[(&str, &str)],
    ) -> DatasetFacts {
        DatasetFacts {
            role: role.to_string(),
            driver: driver.to_string(),
            crs,
            raster: None,
            vector: Some(VectorFacts {
                layers: layers
                    .iter()
                    .map(|(name, geometry)| LayerFacts {
                        name: (*name).to_string(),
                        geometry_type: (*geometry).to_string(),
                        feature_count: Some(10),
                    })
                    .collect(),
            }),
        }
    }

    /// A transformation PROJ might pick.
    pub fn transformation(
        name: &str,
        accuracy: Option<f64>,
        ballpark: bool,
    ) -> TransformationFacts {
        TransformationFacts {
            name: name.to_string(),
            accuracy_metres: accuracy,
            ballpark,
            missing_grids: Vec::new(),
        }
    }

    /// A tool call as the host sends it, without target CRS or transformation.
    pub fn call(tool: &str, arguments: Value, datasets: Vec<DatasetFacts>) -> ToolCall {
        ToolCall {
            tool: tool.to_string(),
            arguments: arguments.to_string(),
            datasets,
            target_crs: None,
            transformation: None,
        }
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
