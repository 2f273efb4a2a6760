//! What the operator's commands (`gdal-mcp approve`, `provenance`, `policy explain`) print to
//! a terminal: every string that came from an agent or from data goes through [`escape`] (or
//! [`escape_json`] for a JSON document), so that no file name, layer or CRS name, finding
//! text or note can drive the terminal. Regression, issue 21 attack round 7, R7-1: a file
//! named `d ESC[2J ESC[H ... ESC[8m.tif` (which an agent can write through MCP alone) and a
//! GeoTIFF whose CRS is named `T ESC[2J ...` cleared the approve screen and painted a fake
//! call in its place; C1 controls (U+009B, an 8-bit CSI) and bidi overrides (U+202E) in the
//! agent's justification passed the JSON printer raw.
//!
//! Escaped: every character of Unicode's general categories Cc (C0 and C1 controls, DEL),
//! Cf (format characters: bidi embeddings, overrides and isolates U+202A-202E / U+2066-2069,
//! zero-width characters, the BOM, tag characters) and Zl / Zp (line and paragraph
//! separators), written visibly as `\u{1b}`.

use unicode_general_category::{get_general_category, GeneralCategory};

/// Whether `c` could move, hide, reorder or restyle what a terminal shows.
pub fn is_unsafe(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// `text` with every unsafe character ([`is_unsafe`]) written as `\u{hex}`, newlines and tabs
/// included: one untrusted string on one line.
pub fn escape(text: &str) -> String {
    escape_except(text, &[])
}

/// A document of several lines (a Markdown report) whose text quotes untrusted strings: as
/// [`escape`], but its own line breaks and tabs are kept.
pub fn escape_document(text: &str) -> String {
    escape_except(text, &['\n', '\t'])
}

fn escape_except(text: &str, keep: &[char]) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe(c) && !keep.contains(&c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `value` as pretty JSON in which every unsafe character is a JSON escape (`\u009b`,
/// `\u202e`): serde_json escapes C0 controls only.
pub fn escape_json(value: &serde_json::Value) -> Result<String, serde_json::Error> {
    let pretty = serde_json::to_string_pretty(value)?;
    let mut out = String::with_capacity(pretty.len());
    for c in pretty.chars() {
        // The printer's own line breaks are structure (JSON strings hold none raw).
        if is_unsafe(c) && c != '\n' {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression, R7-1: the control and format characters of the attack are shown, not sent.
    #[test]
    fn r7_1_controls_and_bidi_overrides_are_written_visibly() {
        let name =
            "d\u{1b}[2J\u{1b}[H fake\u{9b}2J \u{202e}fig.tif\u{2066}\u{7f}\r\n\u{2028}\u{e0041}";
        let shown = escape(name);
        assert_eq!(
            shown,
            "d\\u{1b}[2J\\u{1b}[H fake\\u{9b}2J \\u{202e}fig.tif\\u{2066}\\u{7f}\\u{d}\\u{a}\\u{2028}\\u{e0041}"
        );
        assert!(!shown.chars().any(is_unsafe));
        let json = escape_json(&serde_json::json!({"intent": name})).unwrap();
        assert!(!json.chars().any(|c| is_unsafe(c) && c != '\n'), "{json}");
        assert!(
            json.contains("\\u009b2J") && json.contains("\\u202e"),
            "{json}"
        );
        assert!(json.contains("\\udb40\\udc41"), "{json}");
        // Still JSON, with the same value.
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["intent"], name);
        let doc = escape_document("# Methods: a\u{1b}[8m.tif\n\n- step\tone\n");
        assert_eq!(doc, "# Methods: a\\u{1b}[8m.tif\n\n- step\tone\n");
    }

    /// The clean twin: ordinary names (accents, CJK, emoji, spaces, quotes) are unchanged.
    #[test]
    fn r7_1_clean_twin_ordinary_text_is_unchanged() {
        for text in [
            "dem.tif",
            "Höhenmodell 2024 (ETRS89 / UTM 33N).tif",
            "東京_標高.tif",
            "\"quoted\" path/with spaces 🌍.gpkg",
            "RGF93 v2 / Lambert-93",
        ] {
            assert_eq!(escape(text), text);
            assert_eq!(escape_document(text), text);
        }
        let value = serde_json::json!({"intent": "Höhen \"x\"", "n": 1});
        assert_eq!(
            escape_json(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap()
        );
    }
}
