//! The attribute filter of `vector_query`: a small, closed subset of OGR SQL's WHERE syntax,
//! parsed here and evaluated here, feature by feature. No filter text ever reaches a driver
//! (a GeoPackage's attribute filter is SQLite SQL, where `load_extension(...)` or a subquery
//! would run), so the grammar is the whole attack surface:
//!
//! ```text
//! expr      := and (OR and)*
//! and       := unary (AND unary)*
//! unary     := NOT unary | '(' expr ')' | predicate
//! predicate := operand (cmp operand | [NOT] LIKE|ILIKE 'text' | [NOT] IN (literal, ...)
//!              | IS [NOT] NULL)
//! operand   := field | "quoted field" | number | 'text'
//! cmp       := = | == | <> | != | < | <= | > | >=
//! ```
//!
//! Field names must be the layer's; types are checked before any feature is read (a text field
//! compared with a number is an error, not a silent "no match"). Semantics are OGR SQL's:
//! three-valued logic with NULL, `LIKE` case-sensitive and `ILIKE` not (`%` any run, `_` one
//! character; there is no escape character). Bounded: at most [`MAX_TOKENS`] tokens and
//! [`MAX_DEPTH`] nested levels.
//!
//! LIKE is bounded too (issue 21, attack finding F5: a backtracking matcher took minutes over a
//! hostile pattern and long text values). A pattern is compiled once, at parse time, into the
//! segments between its `%` runs, and refused there above [`MAX_LIKE_CHARS`] characters or
//! [`MAX_LIKE_WILDCARDS`] `%` runs. A text is then matched without backtracking: the segment
//! before the first `%` at the start, the one after the last `%` at the end, and each one in
//! between at its leftmost place after the previous one (segments have fixed lengths, so the
//! leftmost place is never worse than a later one). That costs at most the text's length times
//! the longest segment's in character comparisons, and every comparison is counted against
//! the query's budget ([`Steps`], `GDAL_MCP_MAX_LIKE_STEPS`, default [`DEFAULT_LIKE_STEPS`]):
//! past it, the query fails with a clear error instead of running on.

use std::fmt;

/// Tokens in a filter, at most.
pub const MAX_TOKENS: usize = 400;
/// Nesting (parentheses, NOT) at most.
pub const MAX_DEPTH: usize = 32;
/// Characters of one LIKE pattern, at most.
pub const MAX_LIKE_CHARS: usize = 256;
/// Runs of `%` in one LIKE pattern, at most (`%%` is one run: it means what `%` means).
pub const MAX_LIKE_WILDCARDS: usize = 16;
/// Default budget of character comparisons the LIKE and ILIKE matching of one query may make
/// (`GDAL_MCP_MAX_LIKE_STEPS` overrides it): a few seconds of work at most.
pub const DEFAULT_LIKE_STEPS: u64 = 1_000_000_000;

/// The LIKE budget in force: `GDAL_MCP_MAX_LIKE_STEPS`, else [`DEFAULT_LIKE_STEPS`].
pub fn max_like_steps() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| crate::budget::setting("GDAL_MCP_MAX_LIKE_STEPS", DEFAULT_LIKE_STEPS))
}

/// The character comparisons LIKE matching may still make in one query.
#[derive(Debug, Clone)]
pub struct Steps {
    used: u64,
    limit: u64,
    /// Comparisons of a date-time with a time zone against one without (an instant against a
    /// wall-clock time), and how close they came ([`ZoneReadings`]): refused after the scan
    /// when another reading of the zone-less values would order one of them otherwise.
    pub mixed_zones: u64,
    pub zone_readings: ZoneReadings,
    /// Comparisons of a text value that is no number against a number, and the first such
    /// text: a numeric comparison cannot place it, so the query is refused after the scan
    /// (attack round 20, R20-B11).
    pub not_numbers: u64,
    pub not_number_example: Option<String>,
}

/// The LIKE budget of a query ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted;

impl Steps {
    /// A budget of `limit` comparisons.
    pub fn new(limit: u64) -> Self {
        Self {
            used: 0,
            limit,
            mixed_zones: 0,
            zone_readings: ZoneReadings::default(),
            not_numbers: 0,
            not_number_example: None,
        }
    }

    /// The comparisons made so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The budget.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    fn take(&mut self, n: u64) -> Result<(), Exhausted> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limit {
            return Err(Exhausted);
        }
        Ok(())
    }
}

/// One character of a compiled LIKE pattern: itself, or `_` (any one character).
type Unit = Option<char>;

/// A LIKE pattern compiled once: the segments between its `%` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LikePattern {
    /// Before the first `%` (the whole pattern when it has none): matched at the start.
    head: Vec<Unit>,
    /// Between `%` runs, in order, none empty: each matched at its leftmost place.
    middle: Vec<Vec<Unit>>,
    /// After the last `%`, matched at the end; `None` when the pattern has no `%`.
    tail: Option<Vec<Unit>>,
    insensitive: bool,
}

fn fold(text: &str, insensitive: bool) -> Vec<char> {
    if insensitive {
        text.chars().flat_map(char::to_lowercase).collect()
    } else {
        text.chars().collect()
    }
}

impl LikePattern {
    /// Compile `pattern`, refusing one longer than [`MAX_LIKE_CHARS`] or with more than
    /// [`MAX_LIKE_WILDCARDS`] runs of `%`.
    pub fn compile(pattern: &str, insensitive: bool) -> Result<Self, String> {
        let shown = || {
            let start: String = pattern.chars().take(40).collect();
            if start.len() < pattern.len() {
                format!("'{start}...'")
            } else {
                format!("'{start}'")
            }
        };
        let chars = pattern.chars().count();
        if chars > MAX_LIKE_CHARS {
            return Err(err(format!(
                "the LIKE pattern {} has {chars} characters, more than the {MAX_LIKE_CHARS} a \
                 pattern may have; match on a shorter pattern (a fixed prefix such as 'P-%' is \
                 the cheapest) or compare with = or IN",
                shown()
            )));
        }
        let units: Vec<char> = fold(pattern, insensitive);
        let mut parts: Vec<Vec<Unit>> = vec![Vec::new()];
        let mut runs = 0usize;
        let mut previous_percent = false;
        for c in units {
            if c == '%' {
                if !previous_percent {
                    runs += 1;
                    parts.push(Vec::new());
                }
                previous_percent = true;
                continue;
            }
            previous_percent = false;
            if let Some(last) = parts.last_mut() {
                last.push((c != '_').then_some(c));
            }
        }
        if runs > MAX_LIKE_WILDCARDS {
            return Err(err(format!(
                "the LIKE pattern {} has {runs} runs of '%', more than the \
                 {MAX_LIKE_WILDCARDS} a pattern may have; use fewer '%' (a fixed prefix such as \
                 'P-%' is the cheapest) or compare with = or IN",
                shown()
            )));
        }
        let head = parts.remove(0);
        let tail = parts.pop();
        Ok(Self {
            head,
            middle: parts.into_iter().filter(|p| !p.is_empty()).collect(),
            tail,
            insensitive,
        })
    }

    /// Whether `text` matches, each character comparison counted in `steps`.
    pub fn matches(&self, text: &str, steps: &mut Steps) -> Result<bool, Exhausted> {
        let t = fold(text, self.insensitive);
        let Some(tail) = &self.tail else {
            return Ok(t.len() == self.head.len() && fits(&self.head, &t, 0, steps)?);
        };
        if self.head.len() + tail.len() > t.len() {
            return Ok(false);
        }
        let end = t.len() - tail.len();
        if !fits(&self.head, &t, 0, steps)? || !fits(tail, &t, end, steps)? {
            return Ok(false);
        }
        let mut at = self.head.len();
        for segment in &self.middle {
            match leftmost(segment, &t[..end], at, steps)? {
                Some(found) => at = found + segment.len(),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// Whether `segment` matches `text` at `at` (which leaves room for it).
fn fits(segment: &[Unit], text: &[char], at: usize, steps: &mut Steps) -> Result<bool, Exhausted> {
    let mut compared = 0u64;
    let mut all = true;
    for (unit, c) in segment.iter().zip(&text[at..]) {
        compared += 1;
        if unit.is_some_and(|u| u != *c) {
            all = false;
            break;
        }
    }
    steps.take(compared)?;
    Ok(all)
}

/// The first place at or after `from` where `segment` matches `text`.
fn leftmost(
    segment: &[Unit],
    text: &[char],
    from: usize,
    steps: &mut Steps,
) -> Result<Option<usize>, Exhausted> {
    let Some(last) = text.len().checked_sub(segment.len()) else {
        return Ok(None);
    };
    for at in from..=last {
        if fits(segment, text, at, steps)? {
            return Ok(Some(at));
        }
    }
    Ok(None)
}

/// What a field holds, for type checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Number,
    Text,
    /// Dates and times, compared as ISO text (`2024-05-01`, `2024-05-01T10:00:00`).
    Date,
    /// Lists, binary: only IS [NOT] NULL applies.
    Other,
}

/// A field the filter may name.
#[derive(Debug, Clone)]
pub struct FieldDef {
    pub name: String,
    pub kind: Kind,
}

/// A value of a feature's field, or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl Datum {
    fn number(&self) -> Option<f64> {
        match self {
            Datum::Int(i) => Some(*i as f64),
            Datum::Real(r) => Some(*r),
            _ => None,
        }
    }

    /// Order of two non-null values of one kind (numbers numerically, text by bytes).
    pub fn order(&self, other: &Datum) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (Datum::Int(a), Datum::Int(b)) => Some(a.cmp(b)),
            // Date-times in their own zones order as instants (R15-B2).
            (Datum::Text(a), Datum::Text(b)) => match (canonical_time(a), canonical_time(b)) {
                (Some(x), Some(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
                _ => Some(a.as_bytes().cmp(b.as_bytes())),
            },
            // A 64-bit integer against a Real, exactly: in doubles, 9007199254740993 read as
            // 9007199254740992 and `id > 9007199254740992.5` dropped it (R17-B7).
            (Datum::Int(a), Datum::Real(b)) => int_real_order(*a, *b),
            (Datum::Real(a), Datum::Int(b)) => {
                int_real_order(*b, *a).map(std::cmp::Ordering::reverse)
            }
            (a, b) => a.number()?.partial_cmp(&b.number()?),
        }
    }
}

/// The order of a 64-bit integer against a double, exactly (no rounding of either).
fn int_real_order(a: i64, b: f64) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    if b.is_nan() {
        return None;
    }
    // 2^63: past it every i64 is below; from -2^63 down every i64 is above or equal.
    if b >= 9_223_372_036_854_775_808.0 {
        return Some(Ordering::Less);
    }
    if b < -9_223_372_036_854_775_808.0 {
        return Some(Ordering::Greater);
    }
    let whole = b.floor();
    // `whole` is within i64's range here, and a whole double converts exactly.
    match a.cmp(&(whole as i64)) {
        Ordering::Equal if b > whole => Some(Ordering::Less),
        other => Some(other),
    }
}

/// A field (by position in the field list) or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Field(usize),
    Literal(Datum),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Operand, Cmp, Operand),
    Like {
        operand: Operand,
        pattern: String,
        compiled: LikePattern,
        negated: bool,
        insensitive: bool,
    },
    In {
        operand: Operand,
        list: Vec<Datum>,
        negated: bool,
    },
    IsNull {
        operand: Operand,
        negated: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Text(String),
    Number(Datum),
    Symbol(&'static str),
}

/// Words that end a filter in SQL but have no place in it.
const SQL_WORDS: &[&str] = &[
    "select", "from", "union", "drop", "insert", "update", "delete", "attach", "detach", "pragma",
    "create", "alter", "replace", "exec", "execute", "with", "case", "when", "cast", "exists",
    "between", "glob", "regexp", "match", "escape", "collate", "limit", "order", "group", "having",
    "join", "vacuum", "begin", "commit", "rollback", "into", "values",
];

fn err(message: impl Into<String>) -> String {
    format!("where: {}", message.into())
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if out.len() > MAX_TOKENS {
            return Err(err(format!(
                "more than {MAX_TOKENS} tokens; simplify the filter"
            )));
        }
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '\'' || c == '"' {
            let mut value = String::new();
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => {
                        return Err(err(format!(
                            "the {} opened at character {} is not closed",
                            if c == '\'' { "text" } else { "quoted name" },
                            i + 1
                        )))
                    }
                    Some(&q) if q == c => {
                        if chars.get(j + 1) == Some(&c) {
                            value.push(c);
                            j += 2;
                        } else {
                            j += 1;
                            break;
                        }
                    }
                    Some(&other) => {
                        value.push(other);
                        j += 1;
                    }
                }
            }
            out.push(if c == '\'' {
                Token::Text(value)
            } else {
                Token::Quoted(value)
            });
            i = j;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let mut j = i;
            while j < chars.len()
                && (chars[j].is_ascii_digit()
                    || chars[j] == '.'
                    || ((chars[j] == 'e' || chars[j] == 'E') && j > i)
                    || ((chars[j] == '+' || chars[j] == '-')
                        && j > i
                        && (chars[j - 1] == 'e' || chars[j - 1] == 'E')))
            {
                j += 1;
            }
            let literal: String = chars[i..j].iter().collect();
            if chars
                .get(j)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                return Err(err(format!(
                    "\"{literal}{}\" at character {} is neither a number nor a field name",
                    chars[j],
                    i + 1
                )));
            }
            // A whole number written with a zero fraction (`9007199254740993.0`) is that
            // integer: read as a double it was 9007199254740992 (R17-B7).
            let whole = literal
                .split_once('.')
                .filter(|(_, fraction)| !fraction.is_empty() && fraction.chars().all(|c| c == '0'))
                .and_then(|(integer, _)| integer.parse::<i64>().ok());
            let number = if let Some(integer) = whole {
                Some(Datum::Int(integer))
            } else if literal.contains(['.', 'e', 'E']) {
                literal
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .map(Datum::Real)
            } else {
                // An integer beyond 64 bits is a Real, as SQL reads it (attack round 17,
                // R17-B7: `r = 100000000000000000000` was "not a number").
                literal.parse::<i64>().ok().map(Datum::Int).or_else(|| {
                    literal
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .map(Datum::Real)
                })
            };
            let Some(number) = number else {
                return Err(err(format!("\"{literal}\" is not a number")));
            };
            out.push(Token::Number(number));
            i = j;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            out.push(Token::Word(chars[i..j].iter().collect()));
            i = j;
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let symbol = match two.as_str() {
            "<=" => Some("<="),
            ">=" => Some(">="),
            "<>" => Some("<>"),
            "!=" => Some("!="),
            "==" => Some("=="),
            _ => None,
        };
        if let Some(symbol) = symbol {
            out.push(Token::Symbol(symbol));
            i += 2;
            continue;
        }
        let symbol = match c {
            '=' => "=",
            '<' => "<",
            '>' => ">",
            '(' => "(",
            ')' => ")",
            ',' => ",",
            '-' => "-",
            ';' => {
                return Err(err(
                    "`;` is not allowed: `where` is one filter expression, not SQL statements",
                ))
            }
            other => {
                return Err(err(format!(
                    "unexpected character '{other}' at character {}; the filter takes field \
                     names, literals, comparisons, LIKE, IN, IS NULL, AND, OR, NOT and \
                     parentheses",
                    i + 1
                )))
            }
        };
        out.push(Token::Symbol(symbol));
        i += 1;
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    fields: &'a [FieldDef],
    depth: usize,
}

fn is_word(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn word(&mut self, word: &str) -> bool {
        if is_word(self.peek(), word) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn symbol(&mut self, symbol: &str) -> bool {
        if matches!(self.peek(), Some(Token::Symbol(s)) if *s == symbol) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(format!("nested more than {MAX_DEPTH} levels deep")));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, String> {
        self.left_associative("or", Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, String> {
        self.left_associative("and", Self::unary, Expr::And)
    }

    /// `operand (word operand)*`, grouped from the left.
    fn left_associative(
        &mut self,
        word: &str,
        operand: fn(&mut Self) -> Result<Expr, String>,
        join: fn(Box<Expr>, Box<Expr>) -> Expr,
    ) -> Result<Expr, String> {
        let mut left = operand(self)?;
        while self.word(word) {
            let right = operand(self)?;
            left = join(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.word("not") {
            self.deeper()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        if self.symbol("(") {
            self.deeper()?;
            if is_word(self.peek(), "select") {
                return Err(err("subqueries are not allowed"));
            }
            let inner = self.expr()?;
            if !self.symbol(")") {
                return Err(err(format!("expected ')' but found {}", self.describe())));
            }
            self.depth -= 1;
            return Ok(inner);
        }
        self.predicate()
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end of the filter".to_string(),
            Some(Token::Word(w)) => format!("'{w}'"),
            Some(Token::Quoted(q)) => format!("\"{q}\""),
            Some(Token::Text(t)) => format!("'{t}' (text)"),
            Some(Token::Number(n)) => format!("{n:?}"),
            Some(Token::Symbol(s)) => format!("'{s}'"),
        }
    }

    fn field(&self, name: &str) -> Result<usize, String> {
        if let Some(i) = self.fields.iter().position(|f| f.name == name) {
            return Ok(i);
        }
        let folded: Vec<usize> = (0..self.fields.len())
            .filter(|&i| self.fields[i].name.eq_ignore_ascii_case(name))
            .collect();
        if folded.len() == 1 {
            return Ok(folded[0]);
        }
        let names: Vec<&str> = self
            .fields
            .iter()
            .take(60)
            .map(|f| f.name.as_str())
            .collect();
        Err(err(format!(
            "no field named \"{name}\"; the layer's fields are: {}",
            names.join(", ")
        )))
    }

    fn literal(&mut self) -> Result<Option<Datum>, String> {
        let negative = self.symbol("-");
        match (self.peek().cloned(), negative) {
            (Some(Token::Number(n)), _) => {
                self.at += 1;
                Ok(Some(match (n, negative) {
                    (Datum::Int(i), true) => Datum::Int(-i),
                    (Datum::Real(r), true) => Datum::Real(-r),
                    (n, _) => n,
                }))
            }
            (Some(Token::Text(t)), false) => {
                self.at += 1;
                Ok(Some(Datum::Text(t)))
            }
            (_, true) => Err(err("'-' must be followed by a number")),
            _ => Ok(None),
        }
    }

    fn operand(&mut self) -> Result<Operand, String> {
        if let Some(literal) = self.literal()? {
            return Ok(Operand::Literal(literal));
        }
        match self.next() {
            Some(Token::Quoted(name)) => Ok(Operand::Field(self.field(&name)?)),
            Some(Token::Word(word)) => {
                if matches!(self.peek(), Some(Token::Symbol("("))) {
                    return Err(err(format!(
                        "function calls such as {word}(...) are not allowed; compare fields \
                         with literals"
                    )));
                }
                let lower = word.to_ascii_lowercase();
                if SQL_WORDS.contains(&lower.as_str()) {
                    return Err(err(format!(
                        "{} is not part of the filter language (a filter, not SQL: fields, \
                         literals, comparisons, LIKE, IN, IS NULL, AND, OR, NOT)",
                        word.to_ascii_uppercase()
                    )));
                }
                if ["and", "or", "not", "like", "ilike", "in", "is", "null"]
                    .contains(&lower.as_str())
                {
                    return Err(err(format!(
                        "expected a field or a literal but found {}",
                        word.to_ascii_uppercase()
                    )));
                }
                Ok(Operand::Field(self.field(&word)?))
            }
            None => Err(err(
                "the filter ends where a field or a literal was expected",
            )),
            Some(other) => {
                self.at -= 1;
                let found = self.describe();
                let _ = other;
                Err(err(format!(
                    "expected a field or a literal but found {found}"
                )))
            }
        }
    }

    fn kind(&self, operand: &Operand) -> Kind {
        match operand {
            Operand::Field(i) => self.fields[*i].kind,
            Operand::Literal(Datum::Text(_)) => Kind::Text,
            Operand::Literal(_) => Kind::Number,
        }
    }

    fn name(&self, operand: &Operand) -> String {
        match operand {
            Operand::Field(i) => format!("field \"{}\"", self.fields[*i].name),
            Operand::Literal(Datum::Text(t)) => format!("text '{t}'"),
            Operand::Literal(d) => format!("number {}", show(d)),
        }
    }

    fn compatible(&self, a: &Operand, b: &Operand) -> Result<(), String> {
        let (ka, kb) = (self.kind(a), self.kind(b));
        let text = |k| matches!(k, Kind::Text | Kind::Date);
        if ka == Kind::Other || kb == Kind::Other {
            return Err(err(format!(
                "{} holds lists or binary data; only IS [NOT] NULL applies to it",
                if ka == Kind::Other {
                    self.name(a)
                } else {
                    self.name(b)
                }
            )));
        }
        // A text field against a number: its text read as a number (R20-B11).
        let text_field_and_number = |x: &Operand, kx: Kind, ky: Kind| {
            matches!(x, Operand::Field(_)) && kx == Kind::Text && ky == Kind::Number
        };
        if text_field_and_number(a, ka, kb) || text_field_and_number(b, kb, ka) {
            return Ok(());
        }
        if (ka == Kind::Number) != (kb == Kind::Number) || (text(ka) != text(kb)) {
            return Err(err(format!(
                "{} and {} have different types; compare numbers with numbers and text with \
                 quoted text",
                self.name(a),
                self.name(b)
            )));
        }
        Ok(())
    }

    fn predicate(&mut self) -> Result<Expr, String> {
        let operand = self.operand()?;
        if self.word("is") {
            let negated = self.word("not");
            if !self.word("null") {
                return Err(err(format!(
                    "expected NULL after IS but found {}",
                    self.describe()
                )));
            }
            return Ok(Expr::IsNull { operand, negated });
        }
        let negated = self.word("not");
        let insensitive = is_word(self.peek(), "ilike");
        if self.word("like") || self.word("ilike") {
            if !matches!(self.kind(&operand), Kind::Text | Kind::Date) {
                return Err(err(format!(
                    "LIKE applies to text, not to {}",
                    self.name(&operand)
                )));
            }
            let Some(Token::Text(pattern)) = self.next() else {
                self.at -= 1;
                return Err(err(format!(
                    "LIKE takes a quoted pattern such as 'P-%', not {}",
                    self.describe()
                )));
            };
            let compiled = LikePattern::compile(&pattern, insensitive)?;
            return Ok(Expr::Like {
                operand,
                pattern,
                compiled,
                negated,
                insensitive,
            });
        }
        if self.word("in") {
            if !self.symbol("(") {
                return Err(err("IN takes a parenthesised list of literals"));
            }
            if is_word(self.peek(), "select") {
                return Err(err("subqueries are not allowed"));
            }
            let mut list = Vec::new();
            loop {
                let Some(item) = self.literal()? else {
                    return Err(err(format!(
                        "IN lists take literals only, not {}",
                        self.describe()
                    )));
                };
                self.compatible(&operand, &Operand::Literal(item.clone()))?;
                list.push(item);
                if self.symbol(")") {
                    break;
                }
                if !self.symbol(",") {
                    return Err(err(format!(
                        "expected ',' or ')' in the IN list but found {}",
                        self.describe()
                    )));
                }
            }
            return Ok(Expr::In {
                operand,
                list,
                negated,
            });
        }
        if negated {
            return Err(err(format!(
                "expected LIKE, ILIKE or IN after NOT but found {}",
                self.describe()
            )));
        }
        let cmp = match self.next() {
            Some(Token::Symbol("=" | "==")) => Cmp::Eq,
            Some(Token::Symbol("<>" | "!=")) => Cmp::Ne,
            Some(Token::Symbol("<")) => Cmp::Lt,
            Some(Token::Symbol("<=")) => Cmp::Le,
            Some(Token::Symbol(">")) => Cmp::Gt,
            Some(Token::Symbol(">=")) => Cmp::Ge,
            _ => {
                self.at -= 1;
                return Err(err(format!(
                    "expected a comparison (=, <>, <, <=, >, >=), LIKE, IN or IS after {} but \
                     found {}",
                    self.name(&operand),
                    self.describe()
                )));
            }
        };
        let right = self.operand()?;
        // A text field against a number written as text, ordered: text orders character by
        // character, "100" before "50" (attack round 20, R20-B11: `pop > '50'` found none of
        // "100", "20", "3", with no word). The number unquoted compares the field's text as a
        // number.
        let ordered = matches!(cmp, Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge);
        for (field, literal) in [(&operand, &right), (&right, &operand)] {
            if let (Operand::Field(i), Operand::Literal(Datum::Text(t))) = (field, literal) {
                let numeric = t.trim().parse::<f64>().is_ok_and(f64::is_finite);
                if ordered && numeric && self.fields[*i].kind == Kind::Text {
                    return Err(err(format!(
                        "field \"{}\" holds text and '{t}' is a number written as text: text \
                         is ordered character by character ('100' sorts before '50'), not by \
                         value; write the number unquoted ({} {t}), which reads the field's \
                         text as a number",
                        self.fields[*i].name, self.fields[*i].name
                    )));
                }
            }
        }
        self.compatible(&operand, &right)?;
        Ok(Expr::Compare(operand, cmp, right))
    }
}

/// Parse `text` against the layer's `fields`.
pub fn parse(text: &str, fields: &[FieldDef]) -> Result<Expr, String> {
    let tokens = tokens(text)?;
    if tokens.is_empty() {
        return Err(err(
            "the filter is empty; leave `where` out to select every feature",
        ));
    }
    let mut parser = Parser {
        tokens,
        at: 0,
        fields,
        depth: 0,
    };
    let expr = parser.expr()?;
    if let Some(Token::Word(word)) = parser.peek() {
        if SQL_WORDS.contains(&word.to_ascii_lowercase().as_str()) {
            return Err(err(format!(
                "{} is not part of the filter language (a filter, not SQL)",
                word.to_ascii_uppercase()
            )));
        }
    }
    if parser.at < parser.tokens.len() {
        return Err(err(format!(
            "unexpected {} after a complete filter",
            parser.describe()
        )));
    }
    Ok(expr)
}

fn value_of<'a>(operand: &'a Operand, row: &'a [Datum]) -> &'a Datum {
    match operand {
        Operand::Field(i) => row.get(*i).unwrap_or(&Datum::Null),
        Operand::Literal(d) => d,
    }
}

/// Dates written with slashes (OGR's `2024/05/01`) compare as ISO text; a date-time as its
/// [`canonical_time`].
fn text_of(datum: &Datum) -> Option<String> {
    match datum {
        Datum::Text(t) => {
            let t = t.replace('/', "-");
            Some(canonical_time(&t).unwrap_or(t))
        }
        _ => None,
    }
}

/// A date-time written `YYYY-MM-DD[T ]HH:MM[:SS[.fff]]`, with an optional zone (`Z`,
/// `+02:00`, `+0200`, `+02`): its wall-clock time, and its offset from UTC in minutes when it
/// has one. `None` for other text (a date alone compares as text).
pub fn parse_time(text: &str) -> Option<(chrono::NaiveDateTime, Option<i32>)> {
    use chrono::{DateTime, NaiveDateTime};
    let text = text.trim();
    if text.len() < 16 || !matches!(text.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let normalised = format!("{}T{}", &text[..10], &text[11..]).replace('z', "Z");
    let zoned = |at: DateTime<chrono::FixedOffset>| {
        Some((at.naive_local(), Some(at.offset().local_minus_utc() / 60)))
    };
    if let Ok(at) = DateTime::parse_from_rfc3339(&normalised) {
        return zoned(at);
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%dT%H:%M%#z"] {
        if let Ok(at) = DateTime::parse_from_str(&normalised, format) {
            return zoned(at);
        }
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(&normalised, format) {
            return Some((at, None));
        }
    }
    None
}

/// A date-time as it orders against one of its own kind: the instant in UTC with `Z` when it
/// has a zone, the wall clock without (`YYYY-MM-DDTHH:MM:SS.fff`).
///
/// Compared as written, `2020-01-01T12:00:00` matched nothing (OGR's value is
/// `2020-01-01T12:00:00.000`, and a zone-less one was written `+00:00`), and times in other
/// zones were ordered by their wall clocks (attack round 15, R15-B2).
pub fn canonical_time(text: &str) -> Option<String> {
    let (wall, offset) = parse_time(text)?;
    Some(match offset {
        None => wall.format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
        Some(minutes) => (wall - chrono::Duration::minutes(i64::from(minutes)))
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string(),
    })
}

/// What a query's comparisons of zone-less date-times (wall-clock times) against zoned ones
/// (instants) left open. A wall-clock time is read as UTC; it could have been written in any of
/// the zones the data and the query carry (the offsets of every zoned value compared, the
/// literal's included). A comparison whose order another of those readings changes makes the
/// query's answer a guess, refused after the scan with the readings.
///
/// The candidates were once UTC and the other value's own zone only, so against a `Z` literal
/// (the usual way to write an instant) the two were one and a wall-clock time was never in
/// doubt: `t < '2024-01-01T06:00:00Z'` answered a layer whose zoned values carry +05:00 as if
/// its zone-less 06:00 were UTC, while the same instant written `+05:00` was refused (attack
/// round 22, R22-B3).
#[derive(Debug, Clone, Default)]
pub struct ZoneReadings {
    /// Offsets from UTC, in minutes, of the zoned date-times compared (0, UTC, always counts).
    offsets: std::collections::BTreeSet<i32>,
    /// Of the comparisons read as UTC: the smallest lead of a wall-clock time over the instant
    /// (seconds, above 0), the smallest lag (seconds, below 0), and whether one was equal.
    least_after: Option<i64>,
    least_before: Option<i64>,
    equal: bool,
}

impl ZoneReadings {
    /// Note the offset of a zoned date-time compared.
    fn saw_zone(&mut self, minutes: i32) {
        // At most one entry per offset the world uses; a value past ±24 h is no zone.
        if minutes.abs() <= 24 * 60 {
            self.offsets.insert(minutes);
        }
    }

    /// Note a wall-clock time `lead` seconds after an instant, reading it as UTC.
    fn saw_pair(&mut self, lead: i64) {
        match lead.cmp(&0) {
            std::cmp::Ordering::Greater => {
                self.least_after = Some(self.least_after.map_or(lead, |d| d.min(lead)))
            }
            std::cmp::Ordering::Less => {
                self.least_before = Some(self.least_before.map_or(lead, |d| d.max(lead)))
            }
            std::cmp::Ordering::Equal => self.equal = true,
        }
    }

    /// The zones whose reading orders some comparison otherwise than UTC does, as `+05:00`
    /// texts; empty when every reading agrees.
    pub fn disagreeing(&self) -> Vec<String> {
        let changes = |minutes: i32| {
            let offset = i64::from(minutes) * 60;
            // Read in a zone `offset` east, the wall-clock time is `offset` earlier.
            (self.equal && minutes != 0)
                || self.least_after.is_some_and(|lead| lead - offset <= 0)
                || self.least_before.is_some_and(|lag| lag - offset >= 0)
        };
        self.offsets
            .iter()
            .copied()
            .filter(|m| changes(*m))
            .map(|m| {
                let sign = if m < 0 { '-' } else { '+' };
                format!("{sign}{:02}:{:02}", m.abs() / 60, m.abs() % 60)
            })
            .collect()
    }
}

/// How two date-times order when one has a zone and the other not (an instant against a
/// wall-clock time): the zone-less one read as UTC, the pair noted in `readings` (with every
/// zone seen) for the check after the scan. `None` when `a` and `b` are not such a pair.
fn mixed_zone_order(
    a: &Datum,
    b: &Datum,
    readings: &mut ZoneReadings,
) -> Option<std::cmp::Ordering> {
    let (Datum::Text(x), Datum::Text(y)) = (a, b) else {
        return None;
    };
    let (x, y) = (
        parse_time(&x.replace('/', "-"))?,
        parse_time(&y.replace('/', "-"))?,
    );
    for offset in [x.1, y.1].into_iter().flatten() {
        readings.saw_zone(offset);
    }
    let minutes = |m: i32| chrono::Duration::minutes(i64::from(m));
    let (wall, instant, flipped) = match (x, y) {
        ((xw, Some(xo)), (yw, None)) => (yw, xw - minutes(xo), true),
        ((xw, None), (yw, Some(yo))) => (xw, yw - minutes(yo), false),
        _ => return None,
    };
    readings.saw_pair((wall - instant).num_seconds());
    let order = wall.cmp(&instant);
    Some(if flipped { order.reverse() } else { order })
}

/// A date (`2021-06-30`) set against a date-time reads as its midnight, a wall-clock time
/// (`2021-06-30T00:00:00`), as SQL and OGR's own SQL read it; as text it sorted before every
/// instant of its own day (attack round 16, R16-B16: `d >= '2021-06-30T00:00:00'` dropped the
/// feature dated that day, and `=` never matched).
fn at_midnight_against<'a>(value: &'a Datum, other: &Datum) -> std::borrow::Cow<'a, Datum> {
    if let (Datum::Text(date), Datum::Text(time)) = (value, other) {
        let is_date = date.len() == 10
            && chrono::NaiveDate::parse_from_str(&date.replace('/', "-"), "%Y-%m-%d").is_ok();
        if is_date && parse_time(&time.replace('/', "-")).is_some() {
            return std::borrow::Cow::Owned(Datum::Text(format!(
                "{}T00:00:00",
                date.replace('/', "-")
            )));
        }
    }
    std::borrow::Cow::Borrowed(value)
}

fn compare(a: &Datum, b: &Datum) -> Option<std::cmp::Ordering> {
    if matches!(a, Datum::Null) || matches!(b, Datum::Null) {
        return None;
    }
    // A text field's value against a number: the text read as a number, unknown when it is
    // none (R20-B11).
    let as_number = |t: &str| t.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    match (a, b) {
        (Datum::Text(t), Datum::Int(_) | Datum::Real(_)) => {
            return as_number(t)?.partial_cmp(&b.number()?)
        }
        (Datum::Int(_) | Datum::Real(_), Datum::Text(t)) => {
            return a.number()?.partial_cmp(&as_number(t)?)
        }
        _ => {}
    }
    match (text_of(a), text_of(b)) {
        (Some(x), Some(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => a.order(b),
    }
}

impl Expr {
    /// Whether a feature whose field values are `row` (in field order) matches: SQL's
    /// three-valued logic, `None` for unknown (a NULL compared). LIKE's character comparisons
    /// are counted in `steps`; [`Exhausted`] when the query's budget ran out.
    pub fn eval(&self, row: &[Datum], steps: &mut Steps) -> Result<Option<bool>, Exhausted> {
        Ok(match self {
            Expr::And(a, b) => match (a.eval(row, steps)?, b.eval(row, steps)?) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Expr::Or(a, b) => match (a.eval(row, steps)?, b.eval(row, steps)?) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Expr::Not(a) => a.eval(row, steps)?.map(|v| !v),
            Expr::Compare(a, cmp, b) => {
                let (x, y) = (value_of(a, row), value_of(b, row));
                let (x, y) = (at_midnight_against(x, y), at_midnight_against(y, x));
                let (x, y) = (&*x, &*y);
                let unread = match (x, y) {
                    (Datum::Text(t), Datum::Int(_) | Datum::Real(_))
                    | (Datum::Int(_) | Datum::Real(_), Datum::Text(t))
                        if !t.trim().parse::<f64>().is_ok_and(f64::is_finite) =>
                    {
                        Some(t.clone())
                    }
                    _ => None,
                };
                if let Some(text) = unread {
                    steps.not_numbers += 1;
                    steps.not_number_example.get_or_insert(text);
                    return Ok(None);
                }
                let ordering = match mixed_zone_order(x, y, &mut steps.zone_readings) {
                    Some(ordering) => {
                        steps.mixed_zones += 1;
                        ordering
                    }
                    None => match compare(x, y) {
                        Some(ordering) => ordering,
                        None => return Ok(None),
                    },
                };
                use std::cmp::Ordering::*;
                Some(match cmp {
                    Cmp::Eq => ordering == Equal,
                    Cmp::Ne => ordering != Equal,
                    Cmp::Lt => ordering == Less,
                    Cmp::Le => ordering != Greater,
                    Cmp::Gt => ordering == Greater,
                    Cmp::Ge => ordering != Less,
                })
            }
            Expr::Like {
                operand,
                compiled,
                negated,
                ..
            } => match value_of(operand, row) {
                Datum::Text(t) => Some(compiled.matches(t, steps)? != *negated),
                _ => None,
            },
            Expr::In {
                operand,
                list,
                negated,
            } => {
                let value = value_of(operand, row);
                if matches!(value, Datum::Null) {
                    return Ok(None);
                }
                let found = list
                    .iter()
                    .any(|item| compare(value, item) == Some(std::cmp::Ordering::Equal));
                Some(found != *negated)
            }
            Expr::IsNull { operand, negated } => {
                Some(matches!(value_of(operand, row), Datum::Null) != *negated)
            }
        })
    }

    /// The filter written back, names quoted, for the result (what was understood).
    pub fn show(&self, fields: &[FieldDef]) -> String {
        Shown(self, fields).to_string()
    }
}

fn show(d: &Datum) -> String {
    match d {
        Datum::Null => "NULL".to_string(),
        Datum::Int(i) => i.to_string(),
        Datum::Real(r) => format!("{r:?}"),
        Datum::Text(t) => format!("'{}'", t.replace('\'', "''")),
    }
}

struct Shown<'a>(&'a Expr, &'a [FieldDef]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields = self.1;
        let operand = |o: &Operand| match o {
            Operand::Field(i) => format!(
                "\"{}\"",
                fields
                    .get(*i)
                    .map_or("?", |d| d.name.as_str())
                    .replace('"', "\"\"")
            ),
            Operand::Literal(d) => show(d),
        };
        let not = |n: &bool| if *n { "NOT " } else { "" };
        match self.0 {
            Expr::And(a, b) => write!(f, "({} AND {})", Shown(a, fields), Shown(b, fields)),
            Expr::Or(a, b) => write!(f, "({} OR {})", Shown(a, fields), Shown(b, fields)),
            Expr::Not(a) => write!(f, "NOT {}", Shown(a, fields)),
            Expr::Compare(a, cmp, b) => {
                let op = match cmp {
                    Cmp::Eq => "=",
                    Cmp::Ne => "<>",
                    Cmp::Lt => "<",
                    Cmp::Le => "<=",
                    Cmp::Gt => ">",
                    Cmp::Ge => ">=",
                };
                write!(f, "{} {op} {}", operand(a), operand(b))
            }
            Expr::Like {
                operand: o,
                pattern,
                negated,
                insensitive,
                ..
            } => write!(
                f,
                "{} {}{} {}",
                operand(o),
                not(negated),
                if *insensitive { "ILIKE" } else { "LIKE" },
                show(&Datum::Text(pattern.clone()))
            ),
            Expr::In {
                operand: o,
                list,
                negated,
            } => {
                let items: Vec<String> = list.iter().map(show).collect();
                write!(
                    f,
                    "{} {}IN ({})",
                    operand(o),
                    not(negated),
                    items.join(", ")
                )
            }
            Expr::IsNull {
                operand: o,
                negated,
            } => write!(f, "{} IS {}NULL", operand(o), not(negated)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack round 17, R17-B7: an integer literal beyond 64 bits is a Real, and a 64-bit
    /// integer compares with a Real exactly.
    #[test]
    fn r17_b7_big_literals_and_integers_against_reals() {
        use std::cmp::Ordering;
        let big: i64 = 9_007_199_254_740_993;
        assert_eq!(
            Datum::Int(big).order(&Datum::Real(9_007_199_254_740_992.5)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            Datum::Int(big - 1).order(&Datum::Real(9_007_199_254_740_992.0)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            Datum::Int(big).order(&Datum::Real(9_007_199_254_740_992.0)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            Datum::Real(1e20).order(&Datum::Int(i64::MAX)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            Datum::Int(-3).order(&Datum::Real(-2.5)),
            Some(Ordering::Less)
        );
        assert_eq!(Datum::Int(2).order(&Datum::Real(2.5)), Some(Ordering::Less));
    }

    fn fields() -> Vec<FieldDef> {
        vec![
            FieldDef {
                name: "code".into(),
                kind: Kind::Text,
            },
            FieldDef {
                name: "area".into(),
                kind: Kind::Number,
            },
            FieldDef {
                name: "Owner Name".into(),
                kind: Kind::Text,
            },
        ]
    }

    fn row(code: Option<&str>, area: Option<f64>) -> Vec<Datum> {
        vec![
            code.map_or(Datum::Null, |c| Datum::Text(c.into())),
            area.map_or(Datum::Null, Datum::Real),
            Datum::Null,
        ]
    }

    #[test]
    fn filters_select_what_sql_selects() {
        let f = fields();
        let cases: &[(&str, Vec<Datum>, Option<bool>)] = &[
            ("code = 'P-7'", row(Some("P-7"), None), Some(true)),
            ("CODE = 'P-7'", row(Some("P-8"), None), Some(false)),
            (
                "area > 10 AND code LIKE 'P-%'",
                row(Some("P-1"), Some(12.0)),
                Some(true),
            ),
            ("area >= -1.5e1", row(None, Some(-15.0)), Some(true)),
            ("code LIKE 'p-%'", row(Some("P-1"), None), Some(false)),
            ("code ILIKE 'p-_'", row(Some("P-1"), None), Some(true)),
            ("code NOT IN ('A', 'B')", row(Some("C"), None), Some(true)),
            ("code IN ('A', 'B')", row(None, None), None),
            ("NOT (area = 1)", row(None, None), None),
            ("area IS NULL OR area < 0", row(None, None), Some(true)),
            ("\"Owner Name\" IS NOT NULL", row(None, None), Some(false)),
            ("code = 'it''s'", row(Some("it's"), None), Some(true)),
            ("1 = 1", row(None, None), Some(true)),
        ];
        for (text, values, want) in cases {
            let expr = parse(text, &f).unwrap_or_else(|e| panic!("{text}: {e}"));
            let got = expr.eval(values, &mut Steps::new(u64::MAX)).unwrap();
            assert_eq!(got, *want, "{text} -> {}", expr.show(&f));
        }
    }

    #[test]
    fn anything_but_a_filter_is_refused_with_the_reason() {
        let f = fields();
        let cases = [
            ("1=1; DROP TABLE parcels", "`;` is not allowed"),
            ("code IN (SELECT name FROM sqlite_master)", "subqueries"),
            ("(SELECT 1) = 1", "subqueries"),
            ("load_extension('/tmp/x.so') = 1", "function calls"),
            ("code = lower('P')", "function calls"),
            ("nosuch = 1", "no field named \"nosuch\""),
            // A text field against a number: its values read as numbers (attack round 20,
            // R20-B11); a quoted number ordered against text is refused instead.
            ("code > '7'", "number written as text"),
            ("area LIKE '1%'", "LIKE applies to text"),
            ("code = 'P' UNION SELECT 1", "UNION is not part"),
            ("code = 'P' --", "after a complete filter"),
            ("code = 'P' /* x */", "unexpected character '/'"),
            ("code = 'open", "not closed"),
            ("", "empty"),
            ("area BETWEEN 1 AND 2", "expected a comparison"),
            ("code = 'a' code = 'b'", "after a complete filter"),
        ];
        for (text, want) in cases {
            let error = parse(text, &f).expect_err(text);
            assert!(error.contains(want), "{text}: {error}");
        }
        let deep = format!("{}area = 1{}", "(".repeat(40), ")".repeat(40));
        assert!(parse(&deep, &f).unwrap_err().contains("nested"));
        let long = vec!["area = 1"; 200].join(" OR ");
        assert!(parse(&long, &f).unwrap_err().contains("tokens"));
    }

    /// LIKE through the compiled matcher, with no budget to speak of.
    fn like(text: &str, pattern: &str, insensitive: bool) -> bool {
        LikePattern::compile(pattern, insensitive)
            .unwrap()
            .matches(text, &mut Steps::new(u64::MAX))
            .unwrap()
    }

    #[test]
    fn like_patterns() {
        assert!(like("P-7", "P-%", false));
        assert!(like("abc", "%b%", false));
        assert!(like("abc", "a_c", false));
        assert!(!like("abc", "a_", false));
        assert!(like("", "%", false));
        assert!(like("", "%%", false));
        assert!(like("", "", false));
        assert!(!like("a", "", false));
        assert!(like("aXbXc", "%X%c", false));
        assert!(!like("ABC", "abc", false));
        assert!(like("ÄBC", "äbc", true));
        assert!(like("ÄBC", "%B_", true));
        assert!(!like("a", "a%a", false));
        assert!(like("aa", "a%a", false));
        assert!(like("abcabc", "%bc%bc", false));
        assert!(!like("abcab", "%bc%bc", false));
        assert!(like("mississippi", "m%iss%pi", false));
        assert!(like("x_y", "x_y", false));
    }

    /// The textbook dynamic programme over every prefix pair: slow, obviously right.
    fn like_reference(text: &[char], pattern: &[char]) -> bool {
        let (n, m) = (text.len(), pattern.len());
        let mut table = vec![vec![false; n + 1]; m + 1];
        table[0][0] = true;
        for i in 1..=m {
            for j in 0..=n {
                table[i][j] = match pattern[i - 1] {
                    '%' => table[i - 1][j] || (j > 0 && table[i][j - 1]),
                    '_' => j > 0 && table[i - 1][j - 1],
                    c => j > 0 && text[j - 1] == c && table[i - 1][j - 1],
                };
            }
        }
        table[m][n]
    }

    /// Every pattern of up to 5 units over {a, b, _, %} against every text of up to 6
    /// characters over {a, b}: the segment matcher agrees with the reference on all of them.
    #[test]
    fn like_agrees_with_the_reference_on_every_small_case() {
        fn all(alphabet: &[char], max: usize) -> Vec<Vec<char>> {
            let mut out = vec![Vec::new()];
            let mut last = vec![Vec::new()];
            for _ in 0..max {
                let next: Vec<Vec<char>> = last
                    .iter()
                    .flat_map(|w: &Vec<char>| {
                        alphabet.iter().map(move |c| {
                            let mut w = w.clone();
                            w.push(*c);
                            w
                        })
                    })
                    .collect();
                out.extend(next.iter().cloned());
                last = next;
            }
            out
        }
        let patterns = all(&['a', 'b', '_', '%'], 5);
        let texts = all(&['a', 'b'], 6);
        let mut cases = 0;
        for p in &patterns {
            let pattern: String = p.iter().collect();
            let compiled = LikePattern::compile(&pattern, false).unwrap();
            for t in &texts {
                let text: String = t.iter().collect();
                let got = compiled.matches(&text, &mut Steps::new(u64::MAX)).unwrap();
                assert_eq!(got, like_reference(t, p), "'{text}' LIKE '{pattern}'");
                cases += 1;
            }
        }
        assert_eq!(cases, 1365 * 127);
    }

    /// Regression (issue 21, attack finding F5): a hostile pattern against long text values
    /// took minutes with the backtracking matcher (every failed segment re-compared from each
    /// start). Each case's comparisons stay within the text's length times the longest segment
    /// (plus the pattern), counted, not timed; the backtracking matcher made the quadratic
    /// figure noted for each.
    #[test]
    fn pathological_like_patterns_are_matched_in_bounded_steps() {
        let n = 100_000;
        let many = "a".repeat(n);
        let segment = format!("%{}b%", "a".repeat(200));
        let runs = format!("{}%b", "%a".repeat(15));
        let underscores = format!("%{}b", "_".repeat(250));
        let cases: [(&str, &str, usize, bool); 5] = [
            // The backtracking matcher: about n × 200 comparisons, which this one also makes
            // (each start compares the whole segment) and counts.
            (&many, &segment, 201, false),
            (&many, &runs, 1, false),
            (&many, &underscores, 251, false),
            (
                &many,
                "%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%b",
                1,
                false,
            ),
            (&many, "%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%", 1, true),
        ];
        for (text, pattern, longest, want) in cases {
            let compiled = LikePattern::compile(pattern, false).unwrap();
            let mut steps = Steps::new(u64::MAX);
            assert_eq!(
                compiled.matches(text, &mut steps).unwrap(),
                want,
                "{pattern}"
            );
            let bound = (text.chars().count() * longest + pattern.len()) as u64;
            assert!(
                steps.used() <= bound,
                "{pattern}: {} comparisons, bound {bound}",
                steps.used()
            );
        }
        // The per-query budget stops the matcher rather than letting it run on.
        let compiled = LikePattern::compile(&segment, false).unwrap();
        let mut steps = Steps::new(1_000_000);
        assert_eq!(compiled.matches(&many, &mut steps), Err(Exhausted));
        assert!(steps.used() > steps.limit() && steps.used() <= steps.limit() + 201);
        // A cheap pattern on the same text costs about nothing: the tail is checked at the end.
        let mut steps = Steps::new(u64::MAX);
        assert!(!LikePattern::compile("%b", false)
            .unwrap()
            .matches(&many, &mut steps)
            .unwrap());
        assert_eq!(steps.used(), 1);
    }

    /// Patterns too long or with too many `%` runs are refused when the filter is parsed,
    /// naming the limit; `%%` counts once (it means what `%` means).
    #[test]
    fn like_patterns_are_bounded_at_parse_time() {
        let f = fields();
        let long = format!("code LIKE '{}'", "a".repeat(MAX_LIKE_CHARS + 1));
        let error = parse(&long, &f).unwrap_err();
        assert!(
            error.contains("257 characters") && error.contains("256"),
            "{error}"
        );
        let runs = format!("code LIKE '{}'", "%a".repeat(MAX_LIKE_WILDCARDS + 1));
        let error = parse(&runs, &f).unwrap_err();
        assert!(
            error.contains("17 runs of '%'") && error.contains("16"),
            "{error}"
        );
        // The clean twins: at the limits, and a long run of `%`.
        let at_length = format!("code LIKE '{}'", "a".repeat(MAX_LIKE_CHARS));
        assert!(parse(&at_length, &f).is_ok());
        let at_runs = format!("code ILIKE '{}'", "%a".repeat(MAX_LIKE_WILDCARDS));
        assert!(parse(&at_runs, &f).is_ok());
        let one_run = format!("code LIKE '{}P'", "%".repeat(200));
        let expr = parse(&one_run, &f).unwrap();
        let matched = expr
            .eval(&row(Some("xxP"), None), &mut Steps::new(u64::MAX))
            .unwrap();
        assert_eq!(matched, Some(true));
    }
}
