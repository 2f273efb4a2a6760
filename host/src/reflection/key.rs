//! Canonical JSON and decision keys.
//!
//! A decision key is `sha256:` + the hex SHA-256 of the canonical JSON (object keys sorted
//! recursively, no whitespace) of `{domain, key_fields, prompt_sha256}`. Canonicalisation is
//! explicit rather than relying on serde_json's map ordering, which a feature flag elsewhere in
//! the dependency graph could change.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON text of `value`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The decision key of a domain's decision. It covers the evidence by id (and the safe
/// alternative each item offers), so a new kind of finding asks again, while the numbers in a
/// fact (a cell size, a count) do not make every file a new decision.
pub fn decision_key(
    domain: &str,
    key_fields: &Value,
    prompt_sha256: &str,
    evidence: &[crate::domains::EvidenceItem],
) -> String {
    let evidence: Vec<Value> = evidence
        .iter()
        .map(|e| serde_json::json!({"id": e.id, "alternative": e.alternative}))
        .collect();
    let material = serde_json::json!({
        "domain": domain,
        "key_fields": key_fields,
        "prompt_sha256": prompt_sha256,
        "evidence": evidence,
    });
    format!("sha256:{}", sha256_hex(&canonical_json(&material)))
}

/// The hex part of a key, if it is well formed.
pub fn key_hex(key: &str) -> Option<&str> {
    let hex = key.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
    .then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_recursively_without_whitespace() {
        let value = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": "é"}], "c": null}});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":{"c":null,"z":[1,{"x":"é","y":2}]},"b":1}"#
        );
    }

    #[test]
    fn keys_depend_on_every_part() {
        let fields = json!({"dst_crs": "EPSG:4326"});
        let base = decision_key("crs_datum", &fields, "aa", &[]);
        assert!(key_hex(&base).is_some());
        assert_ne!(base, decision_key("resampling", &fields, "aa", &[]));
        assert_ne!(
            base,
            decision_key("crs_datum", &json!({"dst_crs": "EPSG:3857"}), "aa", &[])
        );
        assert_ne!(base, decision_key("crs_datum", &fields, "ab", &[]));
        // A new finding asks again.
        let finding = crate::domains::EvidenceItem {
            id: "ballpark_operation".into(),
            fact: "ballpark, error unknown".into(),
            why: "positions".into(),
            alternative: None,
            relaxable: false,
        };
        assert_ne!(base, decision_key("crs_datum", &fields, "aa", &[finding]));
        // Independent of the order the fields were written in.
        let a = decision_key("d", &json!({"x": 1, "y": 2}), "p", &[]);
        let b = decision_key("d", &json!({"y": 2, "x": 1}), "p", &[]);
        assert_eq!(a, b);
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for bad in [
            "",
            "sha256:",
            "sha256:../../etc",
            "md5:00",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(key_hex(bad).is_none(), "{bad}");
        }
    }
}
