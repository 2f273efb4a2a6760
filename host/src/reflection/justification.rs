//! The justification an agent writes for one methodological decision.
//!
//! The Rust type is the source of truth: its schemars-generated JSON Schema is the one the
//! server publishes (in refusals, tool input schemas and `schema://justification`), and
//! [`validate`] enforces the same rules, reporting every problem at once as `{path, message}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domains::{EvidenceItem, FieldError};
use std::collections::BTreeMap;

/// A justification may take at most this many bytes of compact JSON.
pub const MAX_BYTES: usize = 4096;

/// The visible text of `s`: without whitespace, control characters and whatever
/// [`shows_nothing`] (zero-width spaces and joiners, bidi marks, the BOM, soft hyphens,
/// variation selectors, tags, unassigned code points, Hangul fillers), which would make an
/// empty answer look non-empty, nor combining marks with nothing to sit on.
pub fn visible(s: &str) -> String {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    s.chars()
        .filter(|c| {
            !c.is_whitespace()
                && !c.is_control()
                && !shows_nothing(*c)
                && !matches!(
                    get_general_category(*c),
                    G::NonspacingMark | G::EnclosingMark | G::SpacingMark
                )
        })
        .collect()
}

/// Whether a reader sees nothing of `c`: Unicode's whole `Default_Ignorable_Code_Point`
/// property (DerivedCoreProperties.txt, its unassigned code points included, which a renderer
/// must show as nothing), format characters, unassigned and private-use code points, and the
/// braille blank. Hand lists of ranges missed U+2065, U+FFF0 and the tags: one after each
/// word's first letter hid an acknowledgement from every word list, and a field of U+034F
/// passed as written (attack round 21, R21-C1; Hangul fillers were round 20's, R20-C1).
pub fn shows_nothing(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    ) || matches!(
        get_general_category(c),
        G::Format | G::Unassigned | G::PrivateUse | G::Surrogate
    )
}

/// Non-empty text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Text(pub String);

inline_json_schema!(Text, { "type": "string", "minLength": 1 });

/// How sure the agent is of its choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// A method considered and rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Alternative {
    /// The method, CRS or approach considered.
    pub method: Text,
    /// Why it was not chosen for this analysis.
    pub why_not: Text,
}

/// The method chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// The method, CRS or approach this call actually uses.
    pub method: Text,
    /// Why it fits the analysis.
    pub rationale: Text,
    /// What it costs: the errors or distortions accepted.
    pub tradeoffs: Text,
}

/// A methodological justification for one decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Justification")]
pub struct Justification {
    /// What the analysis needs this call to achieve.
    pub intent: Text,
    /// At least one alternative considered, with why not.
    #[schemars(length(min = 1))]
    pub alternatives: Vec<Alternative>,
    /// The choice, its rationale and its tradeoffs.
    pub choice: Choice,
    /// Confidence in the choice.
    pub confidence: Confidence,
    /// What is assumed without evidence. Required (non-empty) for critical decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumptions: Vec<Text>,
    /// What would make this decision worth revisiting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions_for_revisit: Vec<Text>,
    /// How the analysis accounts for each evidence item of the refusal, by id. Required for
    /// every item of a critical decision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub evidence: BTreeMap<String, Text>,
}

/// The published JSON Schema (draft 2020-12) of [`Justification`], generated once.
pub fn schema() -> Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(generate_schema).clone()
}

fn generate_schema() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<Justification>();
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "description".to_string(),
            Value::String(format!(
                "A methodological justification. All strings non-empty; at most {MAX_BYTES} bytes \
                 of JSON; critical decisions need non-empty `assumptions` and an `evidence` \
                 answer for every evidence id of the refusal."
            )),
        );
    }
    value
}

const FIELDS: &[&str] = &[
    "intent",
    "alternatives",
    "choice",
    "confidence",
    "assumptions",
    "conditions_for_revisit",
    "evidence",
];

fn err(errors: &mut Vec<FieldError>, path: &str, message: impl Into<String>) {
    errors.push(FieldError {
        path: path.to_string(),
        message: message.into(),
    });
}

fn text(errors: &mut Vec<FieldError>, value: Option<&Value>, path: &str) {
    match value {
        None => err(errors, path, "missing; a non-empty string is required"),
        Some(Value::String(s)) if visible(s).is_empty() => err(
            errors,
            path,
            "must not be empty (whitespace and invisible format characters do not count)",
        ),
        Some(Value::String(_)) => {}
        Some(_) => err(errors, path, "must be a string"),
    }
}

fn object_fields(errors: &mut Vec<FieldError>, value: &Value, path: &str, allowed: &[&str]) {
    if let Some(object) = value.as_object() {
        for key in object.keys() {
            if !allowed.contains(&key.as_str()) {
                err(
                    errors,
                    &format!("{path}/{key}"),
                    format!("unknown field; allowed: {}", allowed.join(", ")),
                );
            }
        }
    }
}

fn text_list(errors: &mut Vec<FieldError>, value: Option<&Value>, path: &str, required: bool) {
    match value {
        None if required => err(
            errors,
            path,
            "missing; critical decisions must list their assumptions",
        ),
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            if required && items.is_empty() {
                err(
                    errors,
                    path,
                    "must list at least one assumption for a critical decision",
                );
            }
            for (index, item) in items.iter().enumerate() {
                text(errors, Some(item), &format!("{path}/{index}"));
            }
        }
        Some(_) => err(errors, path, "must be an array of strings"),
    }
}

/// The `evidence` answers: an object from evidence id to text. Every id must be one of the
/// decision's; a critical decision must answer each of them.
fn evidence_answers(
    errors: &mut Vec<FieldError>,
    value: Option<&Value>,
    evidence: &[EvidenceItem],
    critical: bool,
) {
    let ids: Vec<&str> = evidence.iter().map(|e| e.id.as_str()).collect();
    let answers = match value {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => {
            err(
                errors,
                "/evidence",
                "must be an object from evidence id to how the analysis accounts for it",
            );
            return;
        }
    };
    if let Some(map) = answers {
        for (id, answer) in map {
            if !ids.contains(&id.as_str()) {
                err(
                    errors,
                    &format!("/evidence/{id}"),
                    format!(
                        "not an evidence id of this decision; its ids are: {}",
                        ids.join(", ")
                    ),
                );
                continue;
            }
            text(errors, Some(answer), &format!("/evidence/{id}"));
        }
    }
    if !critical {
        return;
    }
    for item in evidence {
        if answers.is_none_or(|m| !m.contains_key(&item.id)) {
            err(
                errors,
                &format!("/evidence/{}", item.id),
                format!(
                    "missing: this critical decision rests on evidence \"{}\" ({}); say how \
                     the analysis accounts for it{}",
                    item.id,
                    item.fact,
                    item.alternative
                        .as_ref()
                        .map(|a| format!(", or retry with the safe alternative {a}"))
                        .unwrap_or_default()
                ),
            );
        }
    }
}

/// Check `value` against the schema and the host's rules; `critical` also requires
/// `assumptions` and an answer for every item of `evidence`. Returns the typed justification
/// or every problem found.
pub fn validate(
    value: &Value,
    critical: bool,
    evidence: &[EvidenceItem],
) -> Result<Justification, Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(object) = value.as_object() else {
        err(&mut errors, "", "a justification must be a JSON object");
        return Err(errors);
    };
    object_fields(&mut errors, value, "", FIELDS);
    text(&mut errors, object.get("intent"), "/intent");
    match object.get("alternatives") {
        None => err(
            &mut errors,
            "/alternatives",
            "missing; list at least one alternative",
        ),
        Some(Value::Array(items)) if items.is_empty() => err(
            &mut errors,
            "/alternatives",
            "list at least one alternative with why_not",
        ),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let path = format!("/alternatives/{index}");
                if !item.is_object() {
                    err(&mut errors, &path, "must be an object {method, why_not}");
                    continue;
                }
                object_fields(&mut errors, item, &path, &["method", "why_not"]);
                text(&mut errors, item.get("method"), &format!("{path}/method"));
                text(&mut errors, item.get("why_not"), &format!("{path}/why_not"));
            }
        }
        Some(_) => err(&mut errors, "/alternatives", "must be an array"),
    }
    match object.get("choice") {
        None => err(
            &mut errors,
            "/choice",
            "missing; give {method, rationale, tradeoffs}",
        ),
        Some(choice) if choice.is_object() => {
            object_fields(
                &mut errors,
                choice,
                "/choice",
                &["method", "rationale", "tradeoffs"],
            );
            for field in ["method", "rationale", "tradeoffs"] {
                text(&mut errors, choice.get(field), &format!("/choice/{field}"));
            }
        }
        Some(_) => err(
            &mut errors,
            "/choice",
            "must be an object {method, rationale, tradeoffs}",
        ),
    }
    match object.get("confidence").and_then(Value::as_str) {
        Some("low" | "medium" | "high") => {}
        _ => err(
            &mut errors,
            "/confidence",
            "must be one of low, medium, high",
        ),
    }
    text_list(
        &mut errors,
        object.get("assumptions"),
        "/assumptions",
        critical,
    );
    text_list(
        &mut errors,
        object.get("conditions_for_revisit"),
        "/conditions_for_revisit",
        false,
    );
    evidence_answers(&mut errors, object.get("evidence"), evidence, critical);
    let size = value.to_string().len();
    if size > MAX_BYTES {
        err(
            &mut errors,
            "",
            format!("is {size} bytes of JSON; the limit is {MAX_BYTES}: be concise"),
        );
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    serde_json::from_value(value.clone()).map_err(|e| {
        vec![FieldError {
            path: String::new(),
            message: e.to_string(),
        }]
    })
}

/// A justification must say this many distinct words of its own: words that are neither in
/// the findings it answers nor grammar or acknowledgement in a language agents write in.
/// Numbers are not words.
pub const MIN_OWN_WORDS: usize = 8;

/// An answer (one text field of three words or more) copies the refusal when this share of
/// its runs of three words, or more, stands in the refusal's text, and it adds no word of its
/// own.
const COPIED_SHARE: f64 = 0.6;

/// Grammar and acknowledgement, in the languages an agent is likely to write when it only
/// acknowledges: English, radio and chat shorthand, Spanish, French, German, Portuguese and
/// Italian (attack round 16, R16-C1: "Affirmative, copy that.", "Entendido, visto bueno.",
/// "Verstanden, passt schon." passed a domain's list of English words).
const ACKNOWLEDGING: &[&str] = &[
    // Everyday English acknowledgement a list had missed (attack round 22, R22-C3), and chat
    // spellings (R22-C1).
    "fair",
    "enough",
    "sensible",
    "plausible",
    "valid",
    "solid",
    "legit",
    "agree",
    "accept",
    "appreciate",
    "objection",
    "worry",
    "worries",
    "problem",
    "issue",
    "flag",
    "warning",
    "handle",
    "address",
    "cover",
    "minor",
    "negligible",
    "trivial",
    "irrelevant",
    "typical",
    "normal",
    "routine",
    "usual",
    "expected",
    "everyone",
    "everything",
    "anything",
    "nothing",
    "gud",
    // Short acknowledgement words as chat and hurried typing spell them (R21-C6, R22-C1):
    // below seven letters no misspelling is read through the edit distance.
    "lookz",
    "luks",
    "lukz",
    "looz",
    "makez",
    "mkz",
    "sence",
    "sens",
    "workz",
    "wrks",
    "sndz",
    "soundz",
    "semz",
    "seemz",
    "notd",
    "thankz",
    "nuthin",
    "nothin",
    "frthr",
    "furthr",
    "fndngs",
    "findngs",
    "thx",
    "thnx",
    "thanx",
    "ty",
    "np",
    "lgtm",
    "ack",
    "kk",
    // English grammar and acknowledgement
    "a",
    "an",
    "i",
    "we",
    "us",
    "me",
    "my",
    "is",
    "be",
    "am",
    "in",
    "on",
    "at",
    "to",
    "of",
    "as",
    "by",
    "or",
    "if",
    "so",
    "no",
    "do",
    "up",
    "the",
    "and",
    "for",
    "with",
    "that",
    "this",
    "these",
    "those",
    "are",
    "was",
    "were",
    "been",
    "being",
    "have",
    "has",
    "had",
    "will",
    "would",
    "can",
    "could",
    "should",
    "may",
    "might",
    "must",
    "shall",
    "not",
    "all",
    "any",
    "each",
    "every",
    "some",
    "such",
    "which",
    "what",
    "who",
    "its",
    "our",
    "ours",
    "you",
    "your",
    "they",
    "their",
    "them",
    "then",
    "than",
    "also",
    "very",
    "just",
    "only",
    "into",
    "onto",
    "about",
    "per",
    "because",
    "since",
    "yes",
    "now",
    "here",
    "there",
    "from",
    "but",
    "nor",
    "yet",
    "did",
    "does",
    "done",
    "doing",
    "fine",
    "okay",
    "ok",
    "reviewed",
    "review",
    "accept",
    "accepted",
    "acceptable",
    "risk",
    "risks",
    "aware",
    "acknowledge",
    "acknowledged",
    "understand",
    "understood",
    "noted",
    "seen",
    "see",
    "saw",
    "read",
    "roger",
    "lgtm",
    "ack",
    "yep",
    "yeah",
    "yup",
    "sure",
    "cool",
    "alright",
    "great",
    "nice",
    "perfect",
    "thanks",
    "thank",
    "please",
    "checked",
    "check",
    "looked",
    "looks",
    "approve",
    "approved",
    "ready",
    "happy",
    "agree",
    "agreed",
    "proceed",
    "proceeding",
    "continue",
    "ahead",
    "go",
    "good",
    "got",
    "get",
    "it",
    "right",
    "correct",
    "confirmed",
    "confirm",
    "affirmative",
    "affirm",
    "copy",
    "copied",
    "wilco",
    "over",
    "out",
    "negative",
    "received",
    "receipt",
    "acknowledgement",
    "acknowledgment",
    "noticed",
    "clear",
    "clearly",
    "indeed",
    "certainly",
    "absolutely",
    "definitely",
    "exactly",
    "totally",
    "completely",
    "fully",
    "carefully",
    "thoroughly",
    "finding",
    "findings",
    "evidence",
    "considered",
    "consider",
    "taken",
    "account",
    "matter",
    "matters",
    "issue",
    "issues",
    "concern",
    "concerns",
    "point",
    "points",
    "well",
    "too",
    "again",
    "still",
    "anyway",
    "whatever",
    "everything",
    "nothing",
    "thing",
    "things",
    "same",
    "above",
    "below",
    "mentioned",
    "stated",
    "listed",
    "given",
    "known",
    "makes",
    "make",
    "sense",
    "works",
    "work",
    "way",
    "ways",
    "one",
    "ones",
    // Spanish
    "entendido",
    "entiendo",
    "visto",
    "bueno",
    "buena",
    "vale",
    "adelante",
    "acuerdo",
    "claro",
    "perfecto",
    "listo",
    "sí",
    "si",
    "de",
    "del",
    "la",
    "el",
    "los",
    "las",
    "lo",
    "que",
    "con",
    "por",
    "para",
    "una",
    "uno",
    "un",
    "es",
    "está",
    "esta",
    "todo",
    "bien",
    "revisado",
    "aceptado",
    "acepto",
    "recibido",
    "correcto",
    "gracias",
    "hecho",
    "seguir",
    "sigue",
    // French
    "vu",
    "compris",
    "entendu",
    "accord",
    "oui",
    "parfait",
    "ça",
    "ca",
    "marche",
    "bon",
    "le",
    "les",
    "des",
    "du",
    "et",
    "est",
    "une",
    "pour",
    "avec",
    "tout",
    "très",
    "tres",
    "noté",
    "note",
    "reçu",
    "recu",
    "validé",
    "valide",
    "accepté",
    "accepte",
    "merci",
    "vas",
    "allez",
    "continuer",
    // German
    "verstanden",
    "passt",
    "schon",
    "alles",
    "klar",
    "gut",
    "ja",
    "einverstanden",
    "gesehen",
    "geprüft",
    "geprueft",
    "gelesen",
    "der",
    "die",
    "das",
    "und",
    "ist",
    "ein",
    "eine",
    "mit",
    "für",
    "fur",
    "von",
    "zu",
    "danke",
    "weiter",
    "akzeptiert",
    "erledigt",
    "stimmt",
    "genau",
    "prima",
    "super",
    "jawohl",
    "zur",
    "kenntnis",
    "genommen",
    // Portuguese and Italian
    "certo",
    "beleza",
    "sim",
    "tudo",
    "bem",
    "obrigado",
    "capito",
    "va",
    "bene",
    "perfetto",
    "grazie",
    "ricevuto",
    "d",
    "accordo",
    "daccordo",
    "il",
    "gli",
    "che",
    "della",
    "di",
    // Dutch, Polish and Swedish acknowledgement (attack round 17, R17-C1)
    "gezien",
    "begrepen",
    "akkoord",
    "hoor",
    "helemaal",
    "goed",
    "ga",
    "je",
    "gang",
    "oké",
    "doe",
    "maar",
    "klinkt",
    "logisch",
    "dank",
    "wel",
    "afgesproken",
    "top",
    "en",
    "dobrze",
    "rozumiem",
    "zgoda",
    "jasne",
    "dzięki",
    "dziękuję",
    "tak",
    "świetnie",
    "uppfattat",
    "toppen",
    "kör",
    "på",
    "tack",
    "bra",
    "förstått",
    "absolut",
    // English approval filler that names nothing (R17-C1)
    "look",
    "reasonable",
    "sounds",
    "seems",
    "appropriate",
    "standard",
    "practice",
    "whatsoever",
    "further",
    "add",
    // Dutch, Polish, Turkish and Russian acknowledgement (attack round 20, R20-C5)
    "ik",
    "begrijp",
    "bevindingen",
    "lijkt",
    "redelijk",
    "voor",
    "mij",
    "geen",
    "zorgen",
    "gepast",
    "hier",
    "gebruikelijke",
    "praktijk",
    "niets",
    "toe",
    "te",
    "voegen",
    "genoteerd",
    "bedankt",
    "het",
    "een",
    "van",
    "dat",
    "dit",
    "zijn",
    "wordt",
    "wij",
    "mee",
    "eens",
    "zeker",
    "duidelijk",
    "potwierdzam",
    "ustalenia",
    "wygląda",
    "rozsądnie",
    "ma",
    "sens",
    "dla",
    "mnie",
    "w",
    "porządku",
    "żadnych",
    "zastrzeżeń",
    "brzmi",
    "wydaje",
    "się",
    "właściwe",
    "standardowa",
    "praktyka",
    "nic",
    "dodania",
    "przyjęte",
    "wszystko",
    "jest",
    "nie",
    "na",
    "z",
    "zgadzam",
    "akceptuję",
    "bulguları",
    "onaylıyorum",
    "makul",
    "görünüyor",
    "mantıklı",
    "benim",
    "için",
    "uygun",
    "hiçbir",
    "endişe",
    "yok",
    "kulağa",
    "hoş",
    "geliyor",
    "standart",
    "uygulama",
    "eklenecek",
    "bir",
    "şey",
    "edildi",
    "teşekkürler",
    "her",
    "yolunda",
    "ve",
    "bu",
    "tamam",
    "kabul",
    "anladım",
    "evet",
    "я",
    "подтверждаю",
    "выводы",
    "выглядит",
    "разумно",
    "всё",
    "все",
    "понятно",
    "меня",
    "устраивает",
    "никаких",
    "вопросов",
    "звучит",
    "хорошо",
    "кажется",
    "уместным",
    "обычная",
    "практика",
    "добавить",
    "нечего",
    "принято",
    "спасибо",
    "и",
    "в",
    "на",
    "это",
    "не",
    "да",
    "согласен",
    "ок",
    // English praise and interjections, and the like in other languages: words that grade
    // the call and name nothing in it (attack round 18, R18-C1: "Excellent, splendid",
    // "Terrific, superb" passed a critical decision, and R18-C2: a praise tail counted as
    // the words a copied answer adds)
    "excellent",
    "splendid",
    "awesome",
    "wonderful",
    "terrific",
    "superb",
    "brilliant",
    "lovely",
    "kudos",
    "bravo",
    "neat",
    "hooray",
    "yay",
    "sweet",
    "marvellous",
    "marvelous",
    "fantastic",
    "cheers",
    "amazing",
    "outstanding",
    "fabulous",
    "magnificent",
    "stellar",
    "phenomenal",
    "incredible",
    "remarkable",
    "impressive",
    "exceptional",
    "glorious",
    "delightful",
    "beautiful",
    "gorgeous",
    "spectacular",
    "tremendous",
    "extraordinary",
    "sublime",
    "divine",
    "dandy",
    "peachy",
    "wicked",
    "epic",
    "legendary",
    "nifty",
    "spiffy",
    "groovy",
    "ace",
    "champion",
    "stupendous",
    "astounding",
    "astonishing",
    "wondrous",
    "exquisite",
    "bravissimo",
    "bingo",
    "woohoo",
    "woo",
    "wow",
    "whoa",
    "hurrah",
    "hurray",
    "huzzah",
    "yippee",
    "hallelujah",
    "congratulations",
    "congrats",
    "applause",
    "praise",
    "admirable",
    "commendable",
    "praiseworthy",
    "laudable",
    "exemplary",
    "classy",
    "elegant",
    "pleasant",
    "pleased",
    "glad",
    "delighted",
    "thrilled",
    "satisfied",
    "satisfying",
    "satisfactory",
    "decent",
    "favourable",
    "favorable",
    "superlative",
    "unbeatable",
    "flawless",
    "impeccable",
    "faultless",
    "immaculate",
    "pristine",
    "heavenly",
    "dreamy",
    "charming",
    "cute",
    "enjoy",
    "enjoyed",
    "love",
    "loved",
    "lovin",
    "marvel",
    "magnifique",
    "genial",
    "genius",
    "smashing",
    "corking",
    "ripping",
    "jolly",
    "brill",
    "fab",
    "gr8",
    "wunderbar",
    "klasse",
    "excelente",
    "estupendo",
    "magnifico",
    "formidable",
    "superbe",
    "génial",
    "bellissimo",
    "ottimo",
    "bravi",
    "brava",
    "encore",
    "voila",
    "voilà",
    "tada",
    "olé",
    "ole",
    "yahoo",
    "yeehaw",
    "woot",
    "w00t",
    "aces",
    "dope",
    "blessed",
    "yummy",
    "tasty",
    "stunning",
    "breathtaking",
    "dazzling",
    "plush",
    "posh",
    "swanky",
    "snazzy",
    "jazzy",
    "zippy",
    "peppy",
    "perky",
    // Placeholder Latin (R17-C1)
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "eiusmod",
    "tempor",
    "incididunt",
    "ut",
    "labore",
    "dolore",
    "magna",
    "aliqua",
];

/// Whether `word` (lower case) is grammar, acknowledgement or praise ([`ACKNOWLEDGING`]),
/// or an adverb made of one (`excellently`, `splendidly`, `happily`).
fn acknowledging(word: &str) -> bool {
    let read = acknowledging_words();
    // A listed word's inflections too: `acknowledges`, `acknowledging`, `agreed`,
    // `objections`, `acknowledgments` (attack round 22, R22-C3).
    let stems = |w: &str| -> bool {
        read.contains(w)
            || ["s", "es", "d", "ed", "ing", "ment", "ments"]
                .iter()
                .filter_map(|suffix| w.strip_suffix(suffix))
                // A stem of 4 letters or more: `sites`, `dates`, `used` and `bed` are no
                // inflections of the listed `sit`, `dat`, `us` and `be` (attack round 23,
                // R23-C2).
                .filter(|stem| stem.chars().count() >= 4)
                .any(|stem| {
                    read.contains(stem)
                        || read.contains(&format!("{stem}e"))
                        || stem
                            .strip_suffix('i')
                            .is_some_and(|s| read.contains(&format!("{s}y")))
                })
    };
    let listed = |w: &str| stems(w);
    let acknowledges = |word: &str| {
        listed(word)
            || word.strip_suffix("ly").is_some_and(|stem| {
                listed(stem)
                    || stem
                        .strip_suffix('i')
                        .is_some_and(|s| listed(&format!("{s}y")))
                    || listed(&format!("{stem}e"))
                    || listed(&format!("{stem}le"))
                    || stem.strip_suffix("al").is_some_and(listed)
            })
    };
    acknowledges(word) || acknowledges(&folded(word))
}

/// [`ACKNOWLEDGING`] as a reader sees it too: `geprüft` is read `gepruft`.
fn acknowledging_words() -> &'static std::collections::HashSet<String> {
    static READ: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    READ.get_or_init(|| ACKNOWLEDGING.iter().map(|w| as_read(w)).collect())
}

/// The words an answer is compared with (the refusal's, the findings', the acknowledgements),
/// to read a misspelt one as the word it misspells: one letter added, dropped, changed or two
/// swapped, in a word of [`Spelling::SHORTEST`] letters or more. "I acknowlege the findngs,
/// lookz reasonble" passed a critical decision as eight words of its own, and a copy of the
/// refusal with two letters swapped in each word as no copy (attack round 21, R21-C6).
struct Spelling {
    known: std::collections::HashSet<String>,
    /// The known words a misspelling may be read as.
    targets: Vec<String>,
    /// Each known word, and each with one letter dropped, to the known words it comes from.
    by_deletion: std::collections::HashMap<String, Vec<String>>,
}

impl Spelling {
    /// Words shorter than this are read as written: one edit of a short word is another word.
    const SHORTEST: usize = 5;
    /// Words this long may be two edits from the word they misspell.
    const TWO_EDITS: usize = 8;
    /// Acknowledgement words shorter than this are read only as written.
    const SHORTEST_ACKNOWLEDGING: usize = 7;

    /// The refusal's and the findings' words (`asked`), read through a misspelling from
    /// [`Spelling::SHORTEST`] letters, and the acknowledgement words, from
    /// [`Spelling::SHORTEST_ACKNOWLEDGING`]: one edit of a short grammar word is an ordinary
    /// word ("dense" is not "sense", "three" not "there": attack round 22, R22-C7).
    fn of(
        asked: impl Iterator<Item = String>,
        acknowledging: impl Iterator<Item = String>,
    ) -> Self {
        let asked: Vec<String> = asked.collect();
        let acknowledging: Vec<String> = acknowledging.collect();
        let known: std::collections::HashSet<String> =
            asked.iter().chain(&acknowledging).cloned().collect();
        let mut by_deletion: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        let targets: Vec<String> = asked
            .iter()
            .filter(|w| w.chars().count() >= Self::SHORTEST)
            .chain(
                acknowledging
                    .iter()
                    .filter(|w| w.chars().count() >= Self::SHORTEST_ACKNOWLEDGING),
            )
            .cloned()
            .collect();
        for word in &targets {
            for key in std::iter::once(word.clone()).chain(deletions(word)) {
                by_deletion.entry(key).or_default().push(word.clone());
            }
        }
        Self {
            known,
            targets,
            by_deletion,
        }
    }

    /// `word`, or the known word it is one edit from (the first in order, when several are);
    /// a word of [`Spelling::TWO_EDITS`] letters or more may be two edits from it (R22-C1).
    fn respelled(&self, word: String) -> String {
        if word.chars().count() < Self::SHORTEST || self.known.contains(&word) {
            return word;
        }
        let respelled = self.nearest(&word);
        // A negating prefix is no slip: `unexpected`, `implausible` and `incorrect` reject
        // what `expected`, `plausible` and `correct` accept (attack round 23, R23-C2).
        let negated = ["un", "in", "im", "ir", "il", "non", "dis", "a"]
            .iter()
            .any(|prefix| {
                word.strip_prefix(prefix).is_some_and(|rest| {
                    !respelled.starts_with(prefix) && edit_distance(rest, &respelled) <= 1
                })
            });
        if negated {
            word
        } else {
            respelled
        }
    }

    /// The known word `word` is read as ([`Spelling::respelled`]), or `word`.
    fn nearest(&self, word: &str) -> String {
        let word = word.to_string();
        let length = word.chars().count();
        if length >= Self::TWO_EDITS {
            let mut near: Vec<&String> = self
                .targets
                .iter()
                .filter(|k| k.chars().count().abs_diff(length) <= 2 && k.chars().count() >= 6)
                .filter(|k| edit_distance(&word, k) <= 2)
                .collect();
            near.sort_by_key(|k| (edit_distance(&word, k), (*k).clone()));
            if let Some(known) = near.first() {
                return (*known).clone();
            }
        }
        let mut candidates: Vec<&String> = std::iter::once(word.clone())
            .chain(deletions(&word))
            .filter_map(|key| self.by_deletion.get(&key))
            .flatten()
            .filter(|known| one_edit_apart(&word, known))
            .collect();
        candidates.sort();
        candidates
            .first()
            .map_or(word.clone(), |known| (*known).clone())
    }
}

/// The optimal string alignment distance of `a` and `b` (letters added, dropped, changed, two
/// neighbours swapped).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// `word` with each one of its letters dropped.
fn deletions(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    (0..chars.len())
        .map(|skip| {
            chars
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, c)| *c)
                .collect()
        })
        .collect()
}

/// Whether `a` and `b` differ by one letter added, dropped or changed, or two neighbours
/// swapped (optimal string alignment distance 1).
fn one_edit_apart(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a == b || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let (start, end_a, end_b) = {
        let start = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let tail = a[start..]
            .iter()
            .rev()
            .zip(b[start..].iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        (start, a.len() - tail, b.len() - tail)
    };
    let (da, db) = (&a[start..end_a], &b[start..end_b]);
    match (da.len(), db.len()) {
        (1, 1) | (0, 1) | (1, 0) => true,
        (2, 2) => da[0] == db[1] && da[1] == db[0],
        _ => false,
    }
}

/// A justification must use this many distinct words of the refusal's own vocabulary (its
/// prompt, findings and hints: the method, the data, the measured effect), grammar and
/// acknowledgement aside: an answer about this decision names what it decides on. Filler in any
/// language ("Looks reasonable to me, makes sense.", Dutch or Polish acknowledgements, lorem
/// ipsum) names none (attack round 17, R17-C1).
pub const MIN_SHARED_WORDS: usize = 2;

/// An answer that copies the refusal ([`COPIED_SHARE`] of its runs) must add at least this many
/// distinct words of its own, and at least half as many as it copies: one word appended to a
/// finding's fact ("... exact: no datum shift galoshes.") is no answer (attack round 17,
/// R17-C4).
const MIN_ADDED_TO_A_COPY: usize = 3;

/// Latin letters that Cyrillic and Greek letters are drawn like: a word written with them
/// reads as the English word to a person, so it is read as one here.
const LOOK_ALIKES: &[(char, char)] = &[
    ('а', 'a'),
    ('в', 'b'),
    ('е', 'e'),
    ('ё', 'e'),
    ('к', 'k'),
    ('м', 'm'),
    ('н', 'h'),
    ('о', 'o'),
    ('р', 'p'),
    ('с', 'c'),
    ('т', 't'),
    ('у', 'y'),
    ('х', 'x'),
    ('ѕ', 's'),
    ('і', 'i'),
    ('ї', 'i'),
    ('ј', 'j'),
    ('ԁ', 'd'),
    ('ԛ', 'q'),
    ('ԝ', 'w'),
    ('ɡ', 'g'),
    ('ʏ', 'y'),
    ('ɪ', 'i'),
    ('ᴏ', 'o'),
    ('α', 'a'),
    ('β', 'b'),
    ('ε', 'e'),
    ('η', 'n'),
    ('ι', 'i'),
    ('κ', 'k'),
    ('ν', 'v'),
    ('ο', 'o'),
    ('ρ', 'p'),
    ('τ', 't'),
    ('υ', 'u'),
    ('χ', 'x'),
    ('γ', 'y'),
    ('ω', 'w'),
    ('ı', 'i'),
    ('ℓ', 'l'),
    // IPA, small capitals and Armenian (attack round 20, R20-C1)
    ('ɑ', 'a'),
    ('ɒ', 'a'),
    ('ɛ', 'e'),
    ('ɩ', 'i'),
    ('ɴ', 'n'),
    ('ʀ', 'r'),
    ('ʜ', 'h'),
    ('ᴀ', 'a'),
    ('ᴄ', 'c'),
    ('ᴅ', 'd'),
    ('ᴇ', 'e'),
    ('ᴊ', 'j'),
    ('ᴋ', 'k'),
    ('ᴍ', 'm'),
    ('ᴘ', 'p'),
    ('ᴛ', 't'),
    ('ᴜ', 'u'),
    ('ᴠ', 'v'),
    ('ᴡ', 'w'),
    ('ᴢ', 'z'),
    ('һ', 'h'),
    ('օ', 'o'),
    ('ս', 'u'),
    ('ց', 'g'),
    ('հ', 'h'),
    ('ո', 'n'),
    ('ռ', 'n'),
    ('℮', 'e'),
];

/// Whether `c`, a letter in a word that has ASCII letters (read by [`as_read`], so accents
/// are gone), is of another script: anything but the Latin letters of European languages
/// (`ß`, `ø`, `ł`, `ı`, `œ`, Latin Extended-B without its click letters drawn like `l` and
/// `!`, Latin Extended Additional) and the basic Greek letters of formulas (`Δh`, `μm`;
/// [`LOOK_ALIKES`] folds the ones drawn like Latin). Ranges of scripts that look Latin
/// missed Greek's lunate sigma `ϲ`, Coptic `ⲟ`, Latin small capitals and Latin Extended-E:
/// one in each word hid an acknowledgement (attack round 21, R21-C5; Cyrillic, Armenian,
/// Cherokee and IPA were round 19's and 20's).
fn foreign_in_latin_word(c: char) -> bool {
    c.is_alphabetic()
        && !c.is_ascii_alphabetic()
        && !matches!(c,
            '\u{00DF}'..='\u{00F6}' | '\u{00F8}'..='\u{00FF}' | '\u{0100}'..='\u{017F}'
            | '\u{1E00}'..='\u{1EFF}' | '\u{03B1}'..='\u{03C9}')
        // Letters of Azerbaijani and African Latin alphabets (Gəncə, Ɗanbatta, Kɔforidua):
        // words, not look-alikes (attack round 22, R22-C6); folded for comparison (STROKED).
        // The rest of Latin Extended-B and IPA is phonetic, not a letter of an orthography:
        // a hook, curl or topbar on `l d t n c p` (ƚ ƌ ƭ ƞ ƈ ƥ) hid an acknowledgement and a
        // copy, unfolded, where the whole block was allowed (attack round 23, R23-C5).
        && !STROKED.iter().any(|(from, _)| *from == c)
        && !ORTHOGRAPHY_LETTERS.contains(&c)
}

/// Letters outside Latin-1 and Latin Extended-A that orthographies write, not in [`STROKED`]:
/// Ewe's `ƒ`, Sami's and African alphabets' `ŋ`, Kabiyè's `ɩ`, Pan-Nigerian `ǝ`, `ʉ`, `ɵ`,
/// Old English `ȝ` and `ƿ`.
const ORTHOGRAPHY_LETTERS: &[char] = &['ƒ', 'ŋ', 'ɩ', 'ǝ', 'ʉ', 'ɵ', 'ȝ', 'ƿ'];

/// `text` as a reader sees it: compatibility forms composed (NFKC: a full-width `ａ` is `a`),
/// what [`shows_nothing`] (a zero-width space, a soft hyphen, a direction mark, a Hangul
/// filler, an unassigned code point) and combining marks dropped, lower-cased. The acknowledgement the gate
/// refuses passed a critical decision with a zero-width space inside each word (attack round
/// 19, R19-C3), or a Hangul filler (round 20, R20-C1). Look-alikes of other scripts are
/// judged word by word ([`folded`], [`foreign_in_latin_word`]).
fn as_read(text: &str) -> String {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    use unicode_normalization::UnicodeNormalization;
    text.nfkd()
        // Spacing modifier letters (the ʻokina of Hawaiʻi, the prime of Tverʹ, ayin and hamza
        // of Sanʿāʾ, Ukraine's apostrophe ʼ) are apostrophes to a reader: read as nothing,
        // not as a letter of another script (attack round 23, R23-C6).
        .filter(|c| !matches!(c, '\u{02B0}'..='\u{02FF}'))
        .filter(|c| {
            !shows_nothing(*c)
                && !matches!(
                    get_general_category(*c),
                    G::NonspacingMark | G::EnclosingMark | G::SpacingMark
                )
        })
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .nfkc()
        .collect()
}

/// `word` with Cyrillic, Greek and other look-alikes read as the Latin letters they are drawn
/// like (a word written all in them, "сорy", reads as the English one), and letters with a
/// stroke (`ø`, `ł`, `đ`, `ħ`, `ŧ`), which no decomposition takes apart, as their base letter:
/// one in each word hid an acknowledgement (attack round 22, R22-C2).
fn folded(word: &str) -> String {
    word.chars()
        .map(|c| {
            LOOK_ALIKES
                .iter()
                .chain(STROKED)
                .find(|(from, _)| *from == c)
                .map_or(c, |(_, to)| *to)
        })
        .collect()
}

/// Latin letters with a stroke or bar, and the letters they are drawn over.
const STROKED: &[(char, char)] = &[
    ('ø', 'o'),
    ('ł', 'l'),
    ('đ', 'd'),
    ('ħ', 'h'),
    ('ŧ', 't'),
    ('ƀ', 'b'),
    ('ɨ', 'i'),
    ('ǥ', 'g'),
    ('ƶ', 'z'),
    ('ȼ', 'c'),
    ('ɇ', 'e'),
    ('ɉ', 'j'),
    ('ɍ', 'r'),
    ('ɏ', 'y'),
    ('ᵽ', 'p'),
    ('ꝁ', 'k'),
    ('ꝑ', 'p'),
    ('ꝗ', 'q'),
    ('ꝟ', 'v'),
    ('ı', 'i'),
    ('ə', 'e'),
    ('ɛ', 'e'),
    ('ɔ', 'o'),
    ('ɓ', 'b'),
    ('ɗ', 'd'),
    ('ɖ', 'd'),
    ('ƙ', 'k'),
    ('ƴ', 'y'),
    ('ɲ', 'n'),
    ('ɣ', 'g'),
    ('ʋ', 'v'),
    ('ʃ', 's'),
    ('ʒ', 'z'),
];

/// The lower-case words of `text` as a reader sees it ([`as_read`]): runs of letters (any
/// script), without digits, as written.
fn raw_words(text: &str) -> Vec<String> {
    as_read(&joined_pieces(text))
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty() && w.chars().any(char::is_alphabetic))
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .collect()
}

/// `text` with a word's pieces put together as a reader reads them: a hyphen or a middle dot
/// between two letters joins them (`acknow-ledge`, `sen-se`), and a word run together in
/// camel case comes apart (`LooksReasonableToMe` is `Looks Reasonable To Me`). Each was a
/// run of new, unlisted words: a hyphenated acknowledgement, and a verbatim copy of the
/// refusal with a hyphen in each long word, passed a critical decision (attack round 23,
/// R23-C1, R23-C4).
fn joined_pieces(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let before = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
        let after = chars.get(i + 1).copied();
        let joins = matches!(c, '-' | '\u{2010}' | '\u{2011}' | '\u{00B7}' | '\u{2027}');
        if joins
            && before.is_some_and(char::is_alphabetic)
            && after.is_some_and(char::is_alphabetic)
        {
            continue;
        }
        if c.is_uppercase() && before.is_some_and(char::is_lowercase) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// [`raw_words`], a word with a Latin letter [`folded`]: `lοοks` with Greek omicrons is
/// `looks`. A word without one (Russian, Greek) is left as written.
fn words(text: &str) -> Vec<String> {
    raw_words(text)
        .into_iter()
        .map(|w| {
            if w.chars().any(|c| c.is_ascii_alphabetic()) {
                folded(&undigited(&w))
            } else {
                w
            }
        })
        .collect()
}

/// A word of letters and digits with the digits drawn like letters read as those letters:
/// "4ckn0wl3dg3" is "acknowledge" (attack round 22, R22-C1). A word with no letter, or a
/// number with a unit ("10m", "3d"), keeps its digits: only a word with at least as many
/// letters as digits, and a digit between two letters or three or more digits, is read so.
fn undigited(word: &str) -> String {
    let letters = word.chars().filter(|c| c.is_alphabetic()).count();
    let digits = word.chars().filter(|c| c.is_ascii_digit()).count();
    let chars: Vec<char> = word.chars().collect();
    let inside = chars
        .windows(3)
        .any(|w| w[0].is_alphabetic() && w[1].is_ascii_digit() && w[2].is_alphabetic());
    if digits == 0 || letters < digits || !(inside || digits >= 3) {
        return word.to_string();
    }
    chars
        .iter()
        .map(|c| match c {
            '0' => 'o',
            '1' => 'i',
            '3' => 'e',
            '4' => 'a',
            '5' => 's',
            '7' => 't',
            '8' => 'b',
            other => *other,
        })
        .collect()
}

/// The strings of a justification agents write, by path (the `method` names and
/// `confidence` are choices, not answers).
fn answer_texts(value: &Value) -> Vec<(String, &str)> {
    fn push<'a>(out: &mut Vec<(String, &'a str)>, path: String, v: Option<&'a Value>) {
        if let Some(text) = v.and_then(Value::as_str) {
            out.push((path, text));
        }
    }
    let mut out: Vec<(String, &str)> = Vec::new();
    push(&mut out, "/intent".to_string(), value.get("intent"));
    if let Some(choice) = value.get("choice") {
        push(
            &mut out,
            "/choice/rationale".to_string(),
            choice.get("rationale"),
        );
        push(
            &mut out,
            "/choice/tradeoffs".to_string(),
            choice.get("tradeoffs"),
        );
    }
    for (i, item) in value
        .get("alternatives")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        push(
            &mut out,
            format!("/alternatives/{i}/why_not"),
            item.get("why_not"),
        );
    }
    for list in ["assumptions", "conditions_for_revisit"] {
        for (i, item) in value
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            push(&mut out, format!("/{list}/{i}"), Some(item));
        }
    }
    if let Some(map) = value.get("evidence").and_then(Value::as_object) {
        for (id, answer) in map {
            push(&mut out, format!("/evidence/{id}"), Some(answer));
        }
    }
    out
}

/// Letters a run copied from the refusal holds, however its words are cut, joined or spaced.
const COPY_RUN_LETTERS: usize = 24;

/// The share of an answer's letters in runs copied from the refusal above which it is a copy.
const COPIED_LETTERS_SHARE: f64 = 0.8;

/// `text`'s letters as a reader reads them, in one stream: [`as_read`], look-alikes and
/// stroked letters [`folded`], digits drawn like letters read so, every separator dropped.
fn letter_stream(text: &str) -> Vec<char> {
    raw_words(text)
        .iter()
        .flat_map(|w| folded(&undigited(w)).chars().collect::<Vec<_>>())
        .filter(|c| c.is_alphabetic())
        .collect()
}

/// Every run of [`COPY_RUN_LETTERS`] letters of `stream`.
fn letter_windows(stream: &[char]) -> Vec<String> {
    stream
        .windows(COPY_RUN_LETTERS)
        .map(|w| w.iter().collect())
        .collect()
}

/// Whether [`COPIED_LETTERS_SHARE`] of the letters of `stream` lie in runs of
/// [`COPY_RUN_LETTERS`] letters found in the refusal (`asked`): a copy whose words were cut
/// (`rep-rojects`, `rep rojects`) or run together (`PlanarFigures`) reads as new words, and
/// passed a critical decision (attack round 23, R23-C4); its letters are the refusal's.
fn copied_letters(stream: &[char], asked: &std::collections::HashSet<String>) -> bool {
    if stream.len() < 2 * COPY_RUN_LETTERS || asked.is_empty() {
        return false;
    }
    let mut covered = vec![false; stream.len()];
    for (start, window) in stream.windows(COPY_RUN_LETTERS).enumerate() {
        let run: String = window.iter().collect();
        if asked.contains(&run) {
            for flag in &mut covered[start..start + COPY_RUN_LETTERS] {
                *flag = true;
            }
        }
    }
    let share = covered.iter().filter(|c| **c).count() as f64 / stream.len() as f64;
    share >= COPIED_LETTERS_SHARE
}

/// The runs of three consecutive words of `words`.
fn trigrams(words: &[String]) -> Vec<String> {
    words.windows(3).map(|w| w.join(" ")).collect()
}

/// The host's rule that a justification says something of its own, in every domain and in
/// every language. An answer whose runs of words come from the refusal (`asked`: the prompt's
/// questions, the findings, the domain's hints) is named at its path as a copy (attack round
/// 16, R16-C4: the prompt's own questions, question marks and all, passed a critical
/// decision). And the justification as a whole must hold [`MIN_OWN_WORDS`] distinct words
/// that are not the findings' (`findings`: their facts and whys), nor grammar and
/// acknowledgement in the languages of [`ACKNOWLEDGING`], nor numbers (R16-C1:
/// acknowledgements in words no list held, and bare digits, passed).
pub fn own_words(value: &Value, asked: &[&str], findings: &[&str]) -> Vec<FieldError> {
    let asked_runs: std::collections::HashSet<String> =
        asked.iter().flat_map(|t| trigrams(&words(t))).collect();
    let asked_words: std::collections::HashSet<String> =
        asked.iter().flat_map(|t| words(t)).collect();
    let known: std::collections::HashSet<String> = findings.iter().flat_map(|t| words(t)).collect();
    let spelling = Spelling::of(
        asked_words.iter().chain(&known).cloned(),
        acknowledging_words().iter().cloned(),
    );
    let answer_words = |text: &str| -> Vec<String> {
        words(text)
            .into_iter()
            .map(|w| spelling.respelled(w))
            .collect()
    };
    let asked_letters: std::collections::HashSet<String> = asked
        .iter()
        .flat_map(|t| letter_windows(&letter_stream(t)))
        .collect();
    let mut errors = Vec::new();
    let mut own_total: Vec<String> = Vec::new();
    for (path, text) in answer_texts(value) {
        if copied_letters(&letter_stream(text), &asked_letters) {
            err(
                &mut errors,
                &path,
                "copies the refusal's own words (its questions, findings or hints) instead of \
                 answering them; say in your words what this analysis does and why",
            );
            continue;
        }
        let all = answer_words(text);
        let runs = trigrams(&all);
        let copied = runs.iter().filter(|r| asked_runs.contains(*r)).count();
        // A paraphrase that adds words of its own ("breaching cuts through real
        // embankments", after the prompt's "... real barriers") is an answer; a copy with a
        // token tail is not (R17-C4).
        let mut added: Vec<&String> = all
            .iter()
            .filter(|w| w.chars().count() >= 2 && !asked_words.contains(*w) && !acknowledging(w))
            .collect();
        added.sort();
        added.dedup();
        let copied_words = all.iter().filter(|w| asked_words.contains(*w)).count();
        let adds = added.len() >= MIN_ADDED_TO_A_COPY.max(copied_words / 2);
        if !runs.is_empty() && copied as f64 >= COPIED_SHARE * runs.len() as f64 && !adds {
            err(
                &mut errors,
                &path,
                "copies the refusal's own words (its questions, findings or hints) instead of \
                 answering them; say in your words what this analysis does and why",
            );
            continue;
        }
        for w in all {
            if w.chars().count() >= 2
                && !known.contains(&w)
                && !acknowledging(&w)
                && !own_total.contains(&w)
            {
                own_total.push(w);
            }
        }
    }
    // A word that mixes Latin letters with look-alikes of another script reads as one word
    // and compares as another (R20-C1: letters no table folds, ɑ, օ, Cherokee).
    if let Some(mixed) = answer_texts(value)
        .iter()
        .flat_map(|(_, text)| raw_words(text))
        .find(|w| {
            w.chars().any(|c| c.is_ascii_alphabetic()) && w.chars().any(foreign_in_latin_word)
        })
    {
        err(
            &mut errors,
            "",
            format!(
                "the word \"{mixed}\" mixes Latin letters with letters of another script \
                 (some are drawn like Latin ones); write each word in one script"
            ),
        );
    }
    let mut shared: Vec<String> = answer_texts(value)
        .iter()
        .flat_map(|(_, text)| answer_words(text))
        .filter(|w| w.chars().count() >= 3 && asked_words.contains(w) && !acknowledging(w))
        .collect();
    shared.sort();
    shared.dedup();
    if errors.is_empty() && !asked.is_empty() && shared.len() < MIN_SHARED_WORDS {
        err(
            &mut errors,
            "",
            "the justification names nothing this decision is about: none of the method, data \
             or effect the refusal speaks of appears in it. Acknowledging or approving in \
             general words is not a justification: say what the analysis is for, why the \
             chosen method fits it, and what each finding changes in it",
        );
    }
    if errors.is_empty() && own_total.len() < MIN_OWN_WORDS {
        err(
            &mut errors,
            "",
            format!(
                "the justification says almost nothing of its own: {} word(s){} beyond the \
                 findings' words, acknowledgements and numbers, where at least {MIN_OWN_WORDS} \
                 are needed. Acknowledging the findings is not a justification: say what the \
                 analysis is for, why this method fits it better than the alternatives, and \
                 what each finding changes in it",
                own_total.len(),
                if own_total.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        own_total
                            .iter()
                            .take(8)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        );
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({
            "intent": "area statistics in metres",
            "alternatives": [{"method": "EPSG:3857", "why_not": "distorts areas"}],
            "choice": {"method": "EPSG:32633", "rationale": "local UTM zone", "tradeoffs": "<0.1% scale error"},
            "confidence": "high"
        })
    }

    /// Regression: a justification made of zero-width characters passed the non-empty check.
    #[test]
    fn invisible_text_is_empty() {
        let mut zero_width = good();
        zero_width["intent"] = json!("\u{200B}\u{200C}\u{200D}\u{FEFF}\u{2060}");
        zero_width["choice"]["rationale"] = json!(" \u{00AD}\u{202E} ");
        let errors = validate(&zero_width, false, &[]).err().unwrap_or_default();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/intent", "/choice/rationale"], "{errors:?}");
        assert_eq!(visible("a\u{200B}b"), "ab");
        // Attack round 21, R21-C1: fields a reader sees as blank.
        for blank in [
            "\u{034F}\u{034F}",
            "\u{FE0F}",
            "\u{E0020}\u{E0020}",
            "\u{2065}",
            "\u{FFF0}",
            "\u{0301}",
        ] {
            let mut shown = good();
            shown["choice"]["tradeoffs"] = json!(blank);
            let errors = validate(&shown, false, &[]).err().unwrap_or_default();
            assert!(
                errors.iter().any(|e| e.path == "/choice/tradeoffs"),
                "{blank:?}: {errors:?}"
            );
        }
        // The twin: letters with their marks, in any script, are text.
        assert_eq!(visible("e\u{0301}"), "e");
        assert_eq!(visible("क्षेत्र"), "कषतर");
    }

    #[test]
    fn a_complete_justification_passes() {
        assert!(validate(&good(), false, &[]).is_ok());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let bad = json!({
            "intent": " ",
            "alternatives": [],
            "choice": {"method": "x", "rationale": ""},
            "confidence": "certain",
            "extra": 1
        });
        let errors = validate(&bad, false, &[]).err().unwrap_or_default();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        for expected in [
            "/extra",
            "/intent",
            "/alternatives",
            "/choice/rationale",
            "/choice/tradeoffs",
            "/confidence",
        ] {
            assert!(
                paths.contains(&expected),
                "{expected} missing from {paths:?}"
            );
        }
    }

    #[test]
    fn critical_decisions_need_assumptions() {
        let errors = validate(&good(), true, &[]).err().unwrap_or_default();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "/assumptions");
        let mut with = good();
        with["assumptions"] = json!(["the header CRS is right"]);
        assert!(validate(&with, true, &[]).is_ok());
    }

    fn ballpark() -> Vec<EvidenceItem> {
        vec![EvidenceItem {
            id: "ballpark_operation".into(),
            fact: "ballpark operation, error unknown".into(),
            why: "positions may be off by 100 m".into(),
            alternative: None,
            relaxable: false,
        }]
    }

    /// The hurried agent: a well-formed critical justification that never engages with the
    /// evidence is refused, naming the item.
    #[test]
    fn critical_decisions_answer_every_evidence_item() {
        let mut hurried = good();
        hurried["assumptions"] = json!(["chosen on purpose"]);
        let errors = validate(&hurried, true, &ballpark())
            .err()
            .unwrap_or_default();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/evidence/ballpark_operation");
        assert!(errors[0]
            .message
            .contains("ballpark operation, error unknown"));
        let mut blank = hurried.clone();
        blank["evidence"] = json!({"ballpark_operation": " \u{200B} "});
        assert!(validate(&blank, true, &ballpark()).is_err());
        let mut stray = hurried.clone();
        stray["evidence"] = json!({"ballpark_operation": "we accept 100 m", "other": "x"});
        let errors = validate(&stray, true, &ballpark())
            .err()
            .unwrap_or_default();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "/evidence/other");
        let mut answered = hurried;
        answered["evidence"] = json!({"ballpark_operation": "we accept 100 m: 1 km cells"});
        assert!(validate(&answered, true, &ballpark()).is_ok());
        // Not critical: answers are optional.
        assert!(validate(&good(), false, &ballpark()).is_ok());
    }

    #[test]
    fn oversized_justifications_are_refused() {
        let mut big = good();
        big["intent"] = Value::String("x".repeat(MAX_BYTES));
        let errors = validate(&big, false, &[]).err().unwrap_or_default();
        assert!(errors.iter().any(|e| e.message.contains("limit")));
    }

    #[test]
    fn the_schema_requires_the_core_fields() {
        let schema = schema();
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        for field in ["intent", "alternatives", "choice", "confidence"] {
            assert!(required.contains(&json!(field)), "{field}");
        }
        assert_eq!(schema["properties"]["alternatives"]["minItems"], json!(1));
    }

    /// Attack round 16, R16-C1 and R16-C4: acknowledgements in other words and languages,
    /// bare digits, and answers copied from the refusal's questions say nothing of their own;
    /// a short genuine justification that reuses the prompt's vocabulary does.
    #[test]
    fn own_words_refuse_acknowledgements_digits_and_copies() {
        let prompt = "1. **Intent** — what analysis needs the data in `EPSG:3857`? Which \
                      quantities (areas, distances, overlays with other layers) must survive \
                      the change?\n2. **Alternatives** — name at least one other CRS or \
                      approach you considered and say why not.";
        let findings = [
            "planar figures in EPSG:3857 are off by up to 101.4 % for areas",
            "areas and distances measured in the output will be wrong",
        ];
        let asked: Vec<&str> = std::iter::once(prompt).chain(findings).collect();
        let shaped = |intent: &str, why_not: &str, rationale: &str, tradeoffs: &str| {
            json!({"intent": intent,
                   "alternatives": [{"method": "EPSG:3035", "why_not": why_not}],
                   "choice": {"method": "EPSG:3857", "rationale": rationale,
                              "tradeoffs": tradeoffs},
                   "confidence": "high"})
        };
        let refused = [
            shaped(
                "Affirmative, copy that.",
                "Negative, over and out.",
                "Affirmative, copy that, over.",
                "Wilco: 101.4 % for areas, over.",
            ),
            shaped(
                "Entendido, visto bueno.",
                "Vale, entendido, adelante.",
                "Vu et compris.",
                "Verstanden, passt schon.",
            ),
            shaped("7 9", "3 8", "4 6", "5 2"),
            // Attack round 17, R17-C1: other languages, filler and placeholder text.
            shaped(
                "Gezien en begrepen, akkoord hoor.",
                "Prima, helemaal goed, ga je gang. 12",
                "Oké, doe maar, klinkt logisch.",
                "Dank je wel, afgesproken, top. 40",
            ),
            shaped(
                "Looks reasonable to me, makes sense.",
                "Sounds fine, seems appropriate here.",
                "Standard practice, nothing further to add.",
                "Works for me, no concerns whatsoever.",
            ),
            shaped(
                "Lorem ipsum dolor sit amet.",
                "Consectetur adipiscing elit.",
                "Sed do eiusmod tempor incididunt.",
                "Ut labore et dolore magna aliqua.",
            ),
        ];
        // Attack round 18, R18-C1: praise, interjections and their adverbs, with two words of
        // the refusal ("areas", "distances").
        let praised = [
            shaped(
                "Excellent areas, splendid.",
                "Awesome, wonderful.",
                "Terrific, superb distances.",
                "Brilliant, lovely, 150 %.",
            ),
            shaped(
                "Marvellous areas, fantastic, cheers.",
                "Kudos, bravo, neat.",
                "Hooray, yay, sweet distances.",
                "Splendidly, excellently, wonderfully done.",
            ),
        ];
        // Attack round 19, R19-C3: R17-C1's filler in Cyrillic look-alike vowels, and with a
        // zero-width space inside each word.
        let disguised = [
            shaped(
                "Lооks rеаsоnаblе tо mе, mаkеs sеnsе.",
                "Sоunds finе, sееms аpprоpriаtе hеrе.",
                "Stаndаrd prаcticе, nоthing furthеr tо аdd.",
                "Wоrks fоr mе, nо cоncеrns whаtsоеvеr.",
            ),
            shaped(
                "L\u{200B}ooks r\u{200B}easonable to me, m\u{200B}akes s\u{200B}ense.",
                "S\u{200B}ounds f\u{200B}ine, s\u{200B}eems a\u{200B}ppropriate h\u{200B}ere.",
                "S\u{200B}tandard p\u{200B}ractice, n\u{200B}othing f\u{200B}urther to a\u{200B}dd.",
                "W\u{200B}orks for me, no c\u{200B}oncerns w\u{200B}hatsoever.",
            ),
        ];
        // Attack round 20, R20-C1: a Hangul filler inside each word, look-alikes no table
        // held (ɑ, օ, һ) and Cherokee; R20-C5: the method's own name and an acknowledgement
        // in Dutch, Polish or Turkish.
        let filled = |hidden: char, text: &str| -> String {
            text.split(' ')
                .map(|w| {
                    let mut chars = w.chars();
                    chars.next().map_or(String::new(), |first| {
                        format!("{first}{hidden}{}", chars.as_str())
                    })
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let filler = |text: &str| filled('\u{3164}', text);
        let mut evaded = vec![
            shaped(
                &filler("Looks reasonable to me, makes sense."),
                &filler("Sounds fine, seems appropriate here."),
                &filler("Standard practice, nothing further to add."),
                &filler("Works for me, no concerns whatsoever."),
            ),
            shaped(
                "Lօօks rеɑsօnɑblе tօ mе, mɑkеs sеnsе.",
                "Sօunds finе, sееms ɑpprօpriɑtе hеrе.",
                "Stɑndɑrd prɑcticе, nօthing furthеr tօ ɑdd.",
                "Wօrks fօr mе, nօ cօncеrns whɑtsօеvеr, Ꭺ.",
            ),
            shaped(
                "Mercator reprojection. Ik begrijp de bevindingen, lijkt me redelijk, klinkt logisch.",
                "Prima voor mij, geen zorgen.",
                "Klinkt goed, lijkt gepast hier.",
                "Gebruikelijke praktijk, niets toe te voegen.",
            ),
            shaped(
                "Mercator reprojection. Potwierdzam ustalenia, wygląda rozsądnie, ma sens.",
                "Dla mnie w porządku, żadnych zastrzeżeń.",
                "Brzmi dobrze, wydaje się właściwe.",
                "Standardowa praktyka, nic do dodania.",
            ),
            shaped(
                "Mercator reprojection. Bulguları onaylıyorum, makul görünüyor, mantıklı.",
                "Benim için uygun, hiçbir endişe yok.",
                "Kulağa hoş geliyor, uygun görünüyor.",
                "Standart uygulama, eklenecek bir şey yok.",
            ),
        ];
        // Attack round 21, R21-C6: the acknowledgement misspelt.
        evaded.push(shaped(
            "Mercator reprojection. I acknowlege the findngs, lookz reasonble to me, makez sence.",
            "Workz for me, no concernz whatsoevr.",
            "Notted, thankz, all gud, I acknowlege.",
            "Standrd practise, nothng furhter to add.",
        ));
        // Attack round 22: two slips a long word, chat spellings and digits (R22-C1), letters
        // with a stroke (R22-C2), everyday words the list lacked (R22-C3).
        evaded.push(shaped(
            "Mercator reprojection. I aknowlege the fndngs, resonble, 4ckn0wl3dg3d.",
            "Notd, thnx, all gud, I aknowlege, whatsovr.",
            "Sndz fine, apropriat here, acknøwłeđge.",
            "łøøks reasønabłe tø me, whatsøever.",
        ));
        evaded.push(shaped(
            "Mercator reprojection. Fair enough; the warnings are noted and acknowledged, \
             sensible and plausible.",
            "No objections, no worries, no problems here.",
            "Solid, valid and legit; typical, normal, routine.",
            "Everything flagged is handled, addressed and covered.",
        ));
        // Attack round 23: hyphenated and run-together acknowledgements (R23-C1), and hooked
        // letters no table folds (R23-C5).
        evaded.push(shaped(
            "Mercator reprojection. I acknow-ledge the find-ings, looks reason-able to me.",
            "Works for me, no con-cerns what-so-ever.",
            "Stan-dard prac-tice, no-thing fur-ther to add.",
            "Sounds fine, seems appro-priate here, makes sen-se.",
        ));
        evaded.push(shaped(
            "Mercator reprojection. IAcknowledge the findings, LooksReasonableToMe.",
            "WorksForMe, NoConcernsWhatsoever.",
            "SoundsFine, SeemsAppropriateHere.",
            "StandardPractice, NothingFurtherToAdd.",
        ));
        evaded.push(shaped(
            "Mercator reprojection. I aƈkƞowƚeƌge ƭhe fiƞƌiƞgs, ƚooks reasoƞabƚe ƭo me.",
            "Works for me, ƞo ƈoƞƈerƞs whaƭsoever.",
            "Sƭaƞƌarƌ praƈƭiƈe, ƞoƭhiƞg furƭher ƭo aƌƌ.",
            "Souƞƌs fiƞe, seems aƥƥroƥriaƭe here.",
        ));
        // Attack round 21, R21-C5: letters of other scripts no table folds.
        for (c, o) in [('ϲ', 'ⲟ'), ('ꜱ', 'ⲁ'), ('ǀ', 'ꬲ')] {
            let swap = |text: &str| {
                text.replace('c', &c.to_string())
                    .replace('o', &o.to_string())
            };
            evaded.push(shaped(
                &swap("Looks reasonable to me, makes sense."),
                &swap("Sounds fine, seems appropriate here."),
                &swap("Standard practice, nothing further to add."),
                &swap("Works for me, no concerns whatsoever."),
            ));
        }
        // Attack round 21, R21-C1: unassigned default-ignorable code points, tags, variation
        // selectors and private-use letters inside each word.
        for hidden in [
            '\u{2065}',
            '\u{FFF0}',
            '\u{E0080}',
            '\u{E0020}',
            '\u{FE0F}',
            '\u{034F}',
            '\u{E000}',
        ] {
            evaded.push(shaped(
                &filled(hidden, "Looks reasonable to me, makes sense."),
                &filled(hidden, "Sounds fine, seems appropriate here."),
                &filled(hidden, "Standard practice, nothing further to add."),
                &filled(hidden, "Works for me, no concerns whatsoever."),
            ));
        }
        for justification in refused
            .iter()
            .chain(&praised)
            .chain(&disguised)
            .chain(&evaded)
        {
            let errors = own_words(justification, &asked, &findings);
            assert!(
                errors.iter().any(|e| e.path.is_empty()),
                "{justification}: {errors:?}"
            );
        }
        // R17-C4: a finding's fact with a token word appended is still a copy.
        let tailed = shaped(
            "tiles for a slippy web map over the other layers",
            "planar figures in EPSG:3857 are off by up to 101.4 % for areas galoshes.",
            "areas and distances measured in the output will be wrong pistachio.",
            "shapes stay conformal; nobody measures areas on a display map",
        );
        let errors = own_words(&tailed, &asked, &findings);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/choice/rationale", "/alternatives/0/why_not"],
            "{errors:?}"
        );
        // R18-C2: a copy with a tail of praise half its length adds nothing of its own.
        let praise_tailed = shaped(
            "tiles for a slippy web map over the other layers",
            "planar figures in EPSG:3857 are off by up to 101.4 % for areas: excellent, \
             splendid, awesome, superb, bravo, wonderful.",
            "areas and distances measured in the output will be wrong; terrific, marvellous, \
             kudos, fantastic.",
            "shapes stay conformal; nobody measures areas on a display map",
        );
        let errors = own_words(&praise_tailed, &asked, &findings);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/choice/rationale", "/alternatives/0/why_not"],
            "{errors:?}"
        );
        let copied = shaped(
            "what analysis needs the data in EPSG:3857? Which quantities (areas, distances, \
             overlays with other layers) must survive the change?",
            "name at least one other CRS or approach you considered and say why not.",
            "tiles for a slippy web map whose basemap is already in Web Mercator",
            "shapes stay conformal; nobody measures areas on a display map",
        );
        let errors = own_words(&copied, &asked, &findings);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/intent", "/alternatives/0/why_not"], "{errors:?}");
        // R21-C6: the same copy with two letters swapped in each longer word.
        let swapped = shaped(
            "waht analysis needs the data in EPSG:3857? Wihch quantities (areas, distances, \
             oevrlays with other layers) msut survive the cahnge?",
            "name at least one other CRS or apporach you considered and say why not.",
            "tiles for a slippy web map whose basemap is already in Web Mercator",
            "shapes stay conformal; nobody measures areas on a display map",
        );
        let errors = own_words(&swapped, &asked, &findings);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/intent", "/alternatives/0/why_not"], "{errors:?}");
        // R23-C4: the same copy with a hyphen inside each long word, and with words run
        // together in pairs.
        for cut in [
            shaped(
                "what ana-lysis needs the data in EPSG:3857? Which quan-tities (areas, dis-tances, \
                 over-lays with other lay-ers) must sur-vive the cha-nge?",
                "name at least one other CRS or app-roach you con-sidered and say why not.",
                "tiles for a slippy web map whose basemap is already in Web Mercator",
                "shapes stay conformal; nobody measures areas on a display map",
            ),
            shaped(
                "WhatAnalysis NeedsThe DataIn EPSG:3857? WhichQuantities (AreasDistances, \
                 OverlaysWith OtherLayers) MustSurvive TheChange?",
                "NameAt LeastOne OtherCRS OrApproach YouConsidered AndSay WhyNot.",
                "tiles for a slippy web map whose basemap is already in Web Mercator",
                "shapes stay conformal; nobody measures areas on a display map",
            ),
        ] {
            let errors = own_words(&cut, &asked, &findings);
            let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
            assert_eq!(paths, ["/intent", "/alternatives/0/why_not"], "{errors:?}");
        }
        assert!(one_edit_apart("rperojects", "reprojects"));
        assert!(one_edit_apart("acknowlege", "acknowledge"));
        assert!(!one_edit_apart("reprojects", "reprojects"));
        assert!(!one_edit_apart("abcd", "badc"));
        let genuine = shaped(
            "tiles for a slippy web map over the other layers",
            "the other layers are geographic",
            "the basemap tiles are already in Web Mercator",
            "shapes stay conformal; nobody measures areas on a display map",
        );
        assert!(own_words(&genuine, &asked, &findings).is_empty());
        // The twins of R22-C6 and R22-C7: Azerbaijani and African letters are words, and short
        // ordinary words one letter from a grammar word are not acknowledgement.
        let alphabets = shaped(
            "tiles for a slippy web map over the other layers of Gəncə, Ɗanbatta and Kɔforidua",
            "the other layers are geographic, three light sheets of the small world atlas",
            "the basemap tiles are already in Web Mercator, a dense street network",
            "shapes stay conformal; nobody measures areas on a display map",
        );
        assert!(
            own_words(&alphabets, &asked, &findings).is_empty(),
            "{:?}",
            own_words(&alphabets, &asked, &findings)
        );
        // The twins of R23-C2 and R23-C6: words that reject (`unexpected`, `implausible`) and
        // nouns (`sites`, `dates`, `points`) are the author's own; official spellings with
        // modifier letters (Hawaiʻi, Tverʹ, Sanʿāʾ) are words.
        let rejecting = shaped(
            "tiles for a slippy web map over the sites and points of Hawaiʻi, Tverʹ and Sanʿāʾ",
            "the other layers are geographic; unexpected, implausible, incorrect shapes there",
            "the basemap tiles are already in Web Mercator, on the dates the survey ran",
            "shapes stay conformal; nobody measures areas on a display map, unreasonable here",
        );
        assert!(
            own_words(&rejecting, &asked, &findings).is_empty(),
            "{:?}",
            own_words(&rejecting, &asked, &findings)
        );
        // The twin of R21-C5: European letters and the Greek of formulas inside Latin words.
        let european = shaped(
            "tiles for a slippy web map over the other layers of the Straße and Łódź sheets",
            "the other layers are geographic; Ærøskøbing's naïve Δh grid in μm is not",
            "the basemap tiles are already in Web Mercator (façade of Kırşehir, Øresund)",
            "shapes stay conformal; nobody measures areas on a display map of Hà Nội",
        );
        assert!(
            own_words(&european, &asked, &findings).is_empty(),
            "{:?}",
            own_words(&european, &asked, &findings)
        );
    }
}
