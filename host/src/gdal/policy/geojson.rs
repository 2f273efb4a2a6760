//! What GDAL's JSON readers build from a GeoJSON-family file (GeoJSON, GeoJSONSeq, ESRIJSON,
//! TopoJSON), estimated before the open by streaming its text once, in constant memory.
//!
//! GDAL 3.6 parses JSON into json-c trees that cost far more than their text: every array
//! allocates room for 32 slots, every object a 16-entry hash table, every number is an object
//! of its own. One GeoJSON feature, a MultiPoint of 1.19 M `[0,0]` pairs (7.1 MB of text),
//! took a read-only `vector_info` to 806 MB (attack round 9, R9-11). What it holds at once:
//! * a `FeatureCollection` read by the GeoJSON driver is streamed: one feature's tree at a time
//!   (built by GDAL's streaming parser, whose arrays keep their 32 slots), plus the collection's
//!   other members;
//! * anything else (a single Feature or geometry, ESRIJSON, TopoJSON) is read whole and parsed
//!   into one tree (json-c's own tokener, which trims arrays), with the text itself;
//! * a GeoJSONSeq file is read record by record.
//!
//! The costs below were measured with GDAL 3.6.2 on this platform (VmHWM of `ogrinfo -so -al`
//! less a one-point file's, 500,000 elements each). Above `GDAL_MCP_GEOJSON_MAX_MEMORY_BYTES`
//! the file is refused; below it the estimate is charged to the shared memory budget for the
//! call.

use crate::gdal::GdalError;
use std::io::Read;
use std::path::Path;

/// Operator override of [`DEFAULT_MAX_MEMORY_BYTES`].
pub const MEMORY_VARIABLE: &str = "GDAL_MCP_GEOJSON_MAX_MEMORY_BYTES";

/// What one GeoJSON-family file may make GDAL hold (as for a KML tree).
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 512 << 20;

/// Costs in bytes of one JSON value in a tree, for the two ways GDAL builds one.
#[derive(Clone, Copy)]
struct Costs {
    /// An object, and each of its members (the key, the hash entry).
    object: u64,
    member: u64,
    /// An array, and each of its slots.
    array: u64,
    slot: u64,
    number: u64,
    /// A string, and each byte of it.
    string: u64,
    string_byte: u64,
    /// `true`, `false`, `null`.
    literal: u64,
    /// An array of 2 to 4 numbers (a position): the OGR point GDAL makes of it.
    position: u64,
}

/// The whole-document tree (json-c's tokener). Measured: `{}` 788, `{"b":0}` 889, `[]` 148,
/// `[0,0]` 279, a number 67-109, a short string 85-104 (186 in properties, copied into the
/// field), a MultiPoint's pair 423, a LineString's 311.
const WHOLE: Costs = Costs {
    object: 800,
    member: 100,
    array: 150,
    slot: 8,
    number: 110,
    string: 130,
    string_byte: 2,
    literal: 16,
    position: 140,
};

/// One feature of a streamed collection (GDAL's streaming parser: arrays keep 32 slots).
/// Measured: `{}` 431, `{"b":0}` 437, `[]` 392, `[0,0]` 520, a number 72, a short string 88
/// (163 in properties), a MultiPoint's pair 592, a LineString's 535.
const STREAM: Costs = Costs {
    object: 450,
    member: 30,
    array: 400,
    slot: 8,
    number: 75,
    string: 130,
    string_byte: 2,
    literal: 16,
    position: 80,
};

/// Containers nested deeper are refused (GDAL's streaming parser stops at 1024 levels).
const MAX_DEPTH: usize = 1024;

/// Whether GDAL may open `path` with one of its JSON drivers: by its name, or by content: a
/// file whose first character past white space (and a byte-order mark or record separator)
/// within its first MiB opens a JSON object. GDAL recognises GeoJSON by content over more
/// than the 4 KiB once sniffed, and from markers the sniff did not know: a 7.8 MB Feature
/// named `big.dat` after 5,000 blank bytes was read whole, 88 -> 640 MB (attack round 12,
/// R12-6). Every JSON driver (GeoJSON, ESRIJSON, TopoJSON, STAC) parses such a file.
pub fn is_json(path: &Path) -> bool {
    let by_name = crate::gdal::extension_of(path)
        .and_then(|e| e.to_str())
        .is_some_and(|e| {
            ["geojson", "geojsons", "geojsonl", "json", "topojson"]
                .iter()
                .any(|s| e.eq_ignore_ascii_case(s))
        });
    if by_name {
        return true;
    }
    let mut head = Vec::with_capacity(1 << 16);
    if super::open_regular(path)
        .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
        .is_err()
    {
        return false;
    }
    json_start(&head).is_some()
}

/// Wrappers GDAL's GeoJSON driver skips before the object (`IsJSONObject` in GDAL 3.6): a
/// JSONP callback. A file `jsonp({...})` named `.dat` was parsed whole and escaped the tree
/// estimate (attack round 16, R16-A7: 678 MB in one `vector_info`).
const JSONP_PREFIXES: &[&[u8]] = &[b"jsonp(", b"loadGeoJSON("];

/// Where the JSON object GDAL parses starts in `head` (past white space, a byte order mark
/// or record separators, and a JSONP wrapper), if `head` holds one.
fn json_start(head: &[u8]) -> Option<usize> {
    let skip = |from: usize| {
        head[from..]
            .iter()
            .position(|b| {
                !crate::gdal::policy::c_space(*b)
                    && *b != 0x1e
                    && *b != 0xef
                    && *b != 0xbb
                    && *b != 0xbf
            })
            .map(|p| from + p)
    };
    let start = skip(0)?;
    if head[start] == b'{' {
        return Some(start);
    }
    let prefix = JSONP_PREFIXES
        .iter()
        .find(|p| head[start..].starts_with(p))?;
    let inner = skip(start + prefix.len())?;
    (head[inner] == b'{').then_some(inner)
}

/// A container being read: its cost so far in both trees, its slots, and what it is.
struct Open {
    object: bool,
    whole: u64,
    stream: u64,
    slots: u64,
    /// Only numbers so far (an array: maybe a position).
    numbers: bool,
    /// The collection's `features` array.
    features: bool,
    /// Its last key was `features` (the root object).
    features_key: bool,
    /// Its last key was `type` (the root object).
    type_key: bool,
}

/// The estimate, as the text streams by.
#[derive(Default)]
pub struct Estimate {
    stack: Vec<Open>,
    /// Top-level values read, and the largest whole tree among them.
    values: u64,
    largest_value: u64,
    /// The root object's members other than `features` (whole tree), and the largest
    /// feature's streamed tree.
    root_members: u64,
    largest_feature: u64,
    collection: bool,
    /// The root's `type`: `Some(true)` when every one is the string `"FeatureCollection"`,
    /// exactly as GDAL's streaming reader requires.
    feature_collection: Option<bool>,
    /// Read by the GeoJSONSeq driver (a record separator, or the file's name): every record is
    /// parsed whole.
    pub sequence: bool,
    /// The text names an ESRIJSON or TopoJSON member (read whole by GDAL).
    whole_only: bool,
    bytes: u64,
    too_deep: bool,
    // Lexer state.
    in_string: bool,
    escape: bool,
    string_len: u64,
    string_start: Vec<u8>,
    token: u8,
    expecting_key: Vec<bool>,
    /// The distinct member names (their first 24 bytes), up to [`MAX_COUNTED_KEYS`]: GDAL
    /// makes a field of every property name it meets (attack round 22, R22-A5: 50,000 names in
    /// 3 MB took a read-only `vector_info` 562 MB past a 256 MiB budget).
    keys: std::collections::HashSet<Vec<u8>>,
}

/// Distinct member names counted at most.
const MAX_COUNTED_KEYS: usize = 1_000_000;

/// Bytes GDAL's GeoJSON driver holds per field of the schema it builds, measured with GDAL
/// 3.6 and rounded up: 50,000 names took `ogrinfo` 590 MB, 20,000 266 MB (R22-A5).
const FIELD_BYTES: u64 = 16 << 10;

impl Estimate {
    /// Read `chunk` of the text.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        let mut i = 0;
        while i < chunk.len() {
            let b = chunk[i];
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.end_string();
                    i += 1;
                    continue;
                }
                self.string_len += 1;
                if self.string_start.len() < 24 {
                    self.string_start.push(b);
                }
                i += 1;
                continue;
            }
            if self.token != 0 && !(b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
                self.end_token();
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.string_len = 0;
                    self.string_start.clear();
                }
                b'{' | b'[' => self.open(b == b'{'),
                b'}' | b']' => self.close(),
                b':' => {
                    if let Some(k) = self.expecting_key.last_mut() {
                        *k = false;
                    }
                }
                b',' => {
                    if let (Some(k), Some(top)) = (self.expecting_key.last_mut(), self.stack.last())
                    {
                        *k = top.object;
                    }
                }
                0x1e => self.sequence = true,
                b if crate::gdal::policy::c_space(b) => {}
                b => {
                    if self.token == 0 {
                        self.token = if b.is_ascii_digit() || b == b'-' || b == b'+' {
                            b'0'
                        } else {
                            b'l'
                        };
                    }
                }
            }
            i += 1;
        }
    }

    fn end_string(&mut self) {
        let key = self.expecting_key.last().copied().unwrap_or(false);
        if key {
            if self.keys.len() < MAX_COUNTED_KEYS && !self.keys.contains(&self.string_start) {
                self.keys.insert(self.string_start.clone());
            }
            let depth = self.stack.len();
            let name = self.string_start.as_slice();
            if let Some(top) = self.stack.last_mut() {
                top.whole += WHOLE.member + self.string_len;
                top.stream += STREAM.member + self.string_len;
                top.features_key = depth == 1 && name == b"features";
                top.type_key = depth == 1 && name == b"type";
            }
            if depth == 1
                && [&b"geometryType"[..], b"fieldAliases", b"arcs", b"objects"].contains(&name)
            {
                self.whole_only = true;
            }
            return;
        }
        if self.stack.len() == 1 && self.string_start.as_slice() == b"Topology" {
            self.whole_only = true;
        }
        if self.stack.last().is_some_and(|top| top.type_key) && self.stack.len() == 1 {
            self.root_type(self.string_start.as_slice() == b"FeatureCollection");
        }
        let whole = WHOLE.string + WHOLE.string_byte * self.string_len;
        let stream = STREAM.string + STREAM.string_byte * self.string_len;
        self.value(whole, stream, false);
    }

    /// The root's `type` member holds `"FeatureCollection"` (or something else).
    fn root_type(&mut self, collection: bool) {
        self.feature_collection = Some(self.feature_collection.unwrap_or(true) && collection);
        if let Some(top) = self.stack.last_mut() {
            top.type_key = false;
        }
    }

    fn end_token(&mut self) {
        if self.stack.len() == 1 && self.stack.last().is_some_and(|top| top.type_key) {
            self.root_type(false);
        }
        let number = self.token == b'0';
        self.token = 0;
        if number {
            self.value(WHOLE.number, STREAM.number, true);
        } else {
            self.value(WHOLE.literal, STREAM.literal, false);
        }
    }

    fn open(&mut self, object: bool) {
        if self.stack.len() == 1 && self.stack.last().is_some_and(|top| top.type_key) {
            self.root_type(false);
        }
        if self.stack.len() >= MAX_DEPTH {
            self.too_deep = true;
            return;
        }
        let features = self
            .stack
            .last()
            .is_some_and(|top| top.object && top.features_key && !object && self.stack.len() == 1);
        self.stack.push(Open {
            object,
            whole: if object { WHOLE.object } else { WHOLE.array },
            stream: if object { STREAM.object } else { STREAM.array },
            slots: 0,
            numbers: true,
            features,
            features_key: false,
            type_key: false,
        });
        self.expecting_key.push(object);
    }

    fn close(&mut self) {
        if self.too_deep && self.stack.len() >= MAX_DEPTH {
            return;
        }
        let Some(done) = self.stack.pop() else {
            return;
        };
        self.expecting_key.pop();
        let position = !done.object && done.numbers && (2..=4).contains(&done.slots);
        let (mut whole, mut stream) = (done.whole, done.stream);
        if position {
            whole += WHOLE.position;
            stream += STREAM.position;
        }
        if done.features {
            self.collection = true;
        }
        self.value(whole, stream, false);
    }

    /// A value of `whole` / `stream` bytes ends: add it to its container.
    fn value(&mut self, whole: u64, stream: u64, number: bool) {
        let depth = self.stack.len();
        match self.stack.last_mut() {
            None => {
                self.values += 1;
                self.largest_value = self.largest_value.max(whole);
            }
            Some(top) => {
                top.slots += 1;
                top.numbers &= number;
                top.whole += whole + WHOLE.slot;
                top.stream += stream + STREAM.slot;
                if top.features {
                    // One feature of the collection, streamed on its own.
                    self.largest_feature = self.largest_feature.max(stream);
                } else if depth == 1 && !top.features_key {
                    self.root_members += whole;
                }
            }
        }
    }

    /// Whether GDAL 3.6 streams the file feature by feature: only the GeoJSON driver, only a
    /// root object whose `type` is exactly `"FeatureCollection"` (wherever it stands), with a
    /// `features` array. `"featurecollection"`, `"Feature"`, no `type`, or the same collection
    /// as one GeoJSONSeq record are parsed whole: +865-907 MB for 22.6 MB of text, where the
    /// estimate had charged one feature (attack round 11, R11-9).
    pub fn streamed(&self) -> bool {
        self.collection
            && !self.whole_only
            && !self.sequence
            && self.feature_collection == Some(true)
            && self.values <= 1
    }

    /// The bytes GDAL is estimated to hold once it has read the file.
    pub fn bytes(&self) -> u64 {
        if self.too_deep {
            return u64::MAX;
        }
        let schema = (self.keys.len() as u64).saturating_mul(FIELD_BYTES);
        self.tree_bytes().saturating_add(schema)
    }

    /// [`Self::bytes`] without the schema.
    fn tree_bytes(&self) -> u64 {
        if self.streamed() {
            // The root's other members (and its `features` key) plus one feature.
            WHOLE.object + self.root_members + self.largest_feature
        } else {
            // Read whole: the text and its tree (a sequence: its largest record).
            let text = if self.values > 1 { 0 } else { self.bytes };
            text.saturating_add(self.largest_value)
        }
    }
}

/// Refuse the JSON file `file` (shown as `input`) whose tree GDAL would hold passes
/// `GDAL_MCP_GEOJSON_MAX_MEMORY_BYTES`; the estimate otherwise.
pub fn check(input: &Path, file: &Path) -> Result<u64, GdalError> {
    let budget = crate::budget::setting(MEMORY_VARIABLE, DEFAULT_MAX_MEMORY_BYTES);
    let mut estimate = Estimate {
        sequence: crate::gdal::extension_of(file)
            .and_then(|e| e.to_str())
            .is_some_and(|e| {
                e.eq_ignore_ascii_case("geojsons") || e.eq_ignore_ascii_case("geojsonl")
            }),
        ..Estimate::default()
    };
    let mut reader = super::open_regular(file).map_err(|e| GdalError::Failed {
        operation: format!("reading {}", input.display()),
        message: e.to_string(),
    })?;
    let mut buffer = vec![0u8; 1 << 16];
    // A JSONP wrapper's callback name is no JSON: the estimate starts at the object.
    let mut first = true;
    loop {
        let n = reader.read(&mut buffer).map_err(|e| GdalError::Failed {
            operation: format!("reading {}", input.display()),
            message: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        let from = if first {
            first = false;
            json_start(&buffer[..n]).unwrap_or(0)
        } else {
            0
        };
        estimate.feed(&buffer[from..n]);
    }
    estimate.feed(b" ");
    let bytes = estimate.bytes();
    if estimate.too_deep {
        return Err(GdalError::Arguments(format!(
            "input: {} is JSON nested more than {MAX_DEPTH} levels deep; GDAL's JSON readers \
             stop there; nothing was read",
            input.display()
        )));
    }
    if bytes > budget {
        let how = if estimate.streamed() {
            format!(
                "its largest feature alone makes GDAL build a JSON tree of about {} bytes \
                 (GDAL reads a FeatureCollection feature by feature, each parsed whole)",
                estimate.largest_feature
            )
        } else {
            "GDAL parses it whole into one JSON tree".to_string()
        };
        return Err(GdalError::Arguments(format!(
            "input: {} ({} bytes): {how}, an estimated {bytes} bytes in all, more than the \
             {budget} bytes one JSON file may take ({MEMORY_VARIABLE}); nothing was read. \
             Split the largest features, convert the file to a GeoPackage or FlatGeobuf outside \
             the server (ogr2ogr), or raise {MEMORY_VARIABLE}",
            input.display(),
            estimate.bytes
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack round 22, R22-A5: 50,000 distinct property names are a schema of 50,000 fields,
    /// past the default budget; the same features under one name are not.
    #[test]
    fn r22_a5_distinct_property_names_build_a_schema() {
        let named = |distinct: bool| {
            let mut text = String::from(r#"{"type":"FeatureCollection","features":["#);
            for n in 0..50_000 {
                if n > 0 {
                    text.push(',');
                }
                let key = if distinct {
                    format!("p{n}")
                } else {
                    "p".to_string()
                };
                text.push_str(&format!(
                    r#"{{"type":"Feature","properties":{{"{key}":1}},"geometry":null}}"#
                ));
            }
            text.push_str("]}");
            estimate(&text).bytes()
        };
        assert!(named(true) > DEFAULT_MAX_MEMORY_BYTES, "{}", named(true));
        assert!(named(false) < 1 << 20, "{}", named(false));
    }

    fn estimate(text: &str) -> Estimate {
        let mut e = Estimate::default();
        for chunk in text.as_bytes().chunks(7) {
            e.feed(chunk);
        }
        e.feed(b" ");
        e
    }

    fn multipoint(n: usize) -> String {
        vec!["[0,0]"; n].join(",")
    }

    /// A collection holds one feature at a time: the largest one counts, not their sum.
    #[test]
    fn a_collection_costs_its_largest_feature() {
        let one = format!(
            r#"{{"type":"FeatureCollection","features":[{{"type":"Feature","properties":{{}},"geometry":{{"type":"MultiPoint","coordinates":[{}]}}}}]}}"#,
            multipoint(1000)
        );
        let e = estimate(&one);
        assert!(e.collection && !e.whole_only);
        // 1000 pairs at 400 + 2 x 8 + 2 x 75 + 80 (+ slot) each, as streamed.
        assert!(
            e.largest_feature > 640_000 && e.largest_feature < 700_000,
            "{}",
            e.largest_feature
        );
        let feature = r#"{"type":"Feature","properties":{"id":1},"geometry":{"type":"Point","coordinates":[1,2]}}"#;
        let many = format!(
            r#"{{"type":"FeatureCollection","features":[{}]}}"#,
            vec![feature; 10_000].join(",")
        );
        let e = estimate(&many);
        assert!(e.tree_bytes() < 10_000, "{}", e.tree_bytes());
    }

    /// A lone feature is read whole: its tree and its text.
    #[test]
    fn a_lone_feature_is_read_whole() {
        let text = format!(
            r#"{{"type":"Feature","properties":{{}},"geometry":{{"type":"MultiPoint","coordinates":[{}]}}}}"#,
            multipoint(1000)
        );
        let e = estimate(&text);
        assert!(!e.collection);
        // 1000 pairs at 150 + 16 + 220 + 140 (+ slot), and the text.
        let bytes = e.tree_bytes();
        assert!(bytes > 520_000 && bytes < 560_000, "{bytes}");
    }

    /// ESRIJSON and TopoJSON are read whole even though they have `features` or arrays.
    #[test]
    fn esrijson_and_topojson_are_read_whole() {
        let esri = format!(
            r#"{{"geometryType":"esriGeometryPoint","features":[{}]}}"#,
            vec![r#"{"attributes":{"a":1},"geometry":{"x":1,"y":2}}"#; 1000].join(",")
        );
        let e = estimate(&esri);
        assert!(e.whole_only);
        assert!(e.tree_bytes() > 1000 * 2 * 800, "{}", e.tree_bytes());
        let topo = r#"{"type":"Topology","objects":{},"arcs":[[[0,0],[1,1]]]}"#;
        assert!(estimate(topo).whole_only);
    }

    /// Strings with escaped quotes and brackets are text, not structure.
    #[test]
    fn strings_are_text() {
        let e = estimate(r#"{"type":"Feature","properties":{"a":"x\"[[[{{{"},"geometry":null}"#);
        assert!(!e.too_deep && e.stack.is_empty(), "{}", e.stack.len());
        assert!(e.tree_bytes() < 10_000);
    }

    /// Nesting past GDAL's own limit is reported, without growing the host's stack.
    #[test]
    fn deep_nesting_is_bounded() {
        let e = estimate(&"[".repeat(100_000));
        assert!(e.too_deep && e.stack.len() == MAX_DEPTH);
    }

    /// R11-9: GDAL 3.6 streams only a root whose `type` is exactly `"FeatureCollection"`
    /// (before or after `features`); any other type, none, or the collection as a GeoJSONSeq
    /// record (a record separator) is parsed whole, and estimated so.
    #[test]
    fn r11_9_only_an_exact_feature_collection_is_streamed() {
        let feature = r#"{"type":"Feature","properties":{},"geometry":{"type":"MultiPoint","coordinates":[[0,0],[1,1]]}}"#;
        let features = vec![feature; 2_000].join(",");
        let streamed = [
            format!(r#"{{"type":"FeatureCollection","features":[{features}]}}"#),
            format!(r#"{{"features":[{features}], "type" : "FeatureCollection"}}"#),
        ];
        for text in &streamed {
            let e = estimate(text);
            assert!(e.streamed(), "{}", &text[..40]);
            assert!(e.tree_bytes() < 10_000, "{}", e.tree_bytes());
        }
        let whole = [
            format!(r#"{{"type":"featurecollection","features":[{features}]}}"#),
            format!(r#"{{"type":"Feature","features":[{features}]}}"#),
            format!(r#"{{"features":[{features}]}}"#),
            format!(r#"{{"type":"FeatureCollection","features":[{features}],"type":"Feature"}}"#),
            format!(r#"{{"type":["FeatureCollection"],"features":[{features}]}}"#),
            format!("\x1e{{\"type\":\"FeatureCollection\",\"features\":[{features}]}}\n"),
        ];
        for text in &whole {
            let e = estimate(text);
            assert!(!e.streamed(), "{}", &text[..40]);
            assert!(
                e.tree_bytes() > 2_000 * 2_000,
                "{}: {}",
                &text[..40],
                e.tree_bytes()
            );
        }
    }

    /// R12-6: GDAL recognises JSON by content past the 4 KiB once sniffed, with markers the
    /// sniff did not know: any file whose first character past white space opens an object
    /// is estimated; a file that does not is not.
    #[test]
    fn r12_6_json_is_recognised_by_its_first_character() {
        let dir = tempfile::tempdir().unwrap();
        let padded = dir.path().join("big.dat");
        std::fs::write(
            &padded,
            format!(
                "{}{{\"type\":\"MultiPoint\",\"bbox\":[{}]}}",
                " ".repeat(5000),
                "0,".repeat(3000) + "0"
            ),
        )
        .unwrap();
        assert!(is_json(&padded));
        let binary = dir.path().join("cells.dat");
        std::fs::write(&binary, [0u8, 1, 2, 3, b'{']).unwrap();
        assert!(!is_json(&binary));
        // R16-A7: GDAL's GeoJSON driver skips a JSONP wrapper, whatever the name.
        let wrapped = dir.path().join("p.dat");
        std::fs::write(&wrapped, b"  jsonp( {\"type\": \"FeatureCollection\"})").unwrap();
        assert!(is_json(&wrapped));
        assert_eq!(json_start(b"loadGeoJSON({}"), Some(12));
        assert_eq!(json_start(b"jsonpx({}"), None);
    }
}
