//! Degrees, minutes and seconds for `points_from_table`: one cell of text (`41°24'12.2"N`,
//! `41 24 12.2 N`, `-41:24:12.2`, `N41°24.2'`) or a degree cell with separate minute, second
//! and hemisphere cells, turned into decimal degrees with every part checked.
//!
//! The rules, each an error whose reason is returned to the caller (which names the row,
//! column and text): the parts come in degree, minute, second order (a unit mark, if any, must
//! be the one of its place); only the last part may have decimals; minutes and seconds are in
//! [0, 60); degrees at most 180 for longitude (x) and 90 for latitude (y), and so the whole
//! value; a hemisphere letter is N or S for latitude and E or W for longitude (the other pair
//! means the columns look swapped); a sign and a hemisphere letter together are refused,
//! because "-41 S" means different things to different people. S and W are negative.

/// Which coordinate a value is: x is longitude (E/W, up to 180), y latitude (N/S, up to 90).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    X,
    Y,
}

impl Axis {
    fn limit(self) -> f64 {
        match self {
            Axis::X => 180.0,
            Axis::Y => 90.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Axis::X => "longitude",
            Axis::Y => "latitude",
        }
    }
}

const DEGREE_MARKS: [char; 3] = ['°', 'º', '˚'];
const MINUTE_MARKS: [char; 3] = ['\'', '′', '’'];
const SECOND_MARKS: [char; 3] = ['"', '″', '”'];

/// Whether a cell is written as degree-minute-second text rather than a plain number: a unit
/// mark, a colon, a hemisphere letter, or several parts separated by spaces.
pub fn looks_like_dms(text: &str) -> bool {
    let t = text.trim();
    t.contains(|c: char| c.is_ascii_digit())
        && (t.contains(DEGREE_MARKS)
            || t.contains(MINUTE_MARKS)
            || t.contains(SECOND_MARKS)
            || t.contains(':')
            || t.starts_with(HEMISPHERES)
            || t.ends_with(HEMISPHERES)
            || t.split_whitespace().count() > 1)
}

const HEMISPHERES: [char; 8] = ['N', 'S', 'E', 'W', 'n', 's', 'e', 'w'];

/// The sign a hemisphere letter gives on `axis`, or why it does not fit.
fn hemisphere(letter: char, axis: Axis) -> Result<f64, String> {
    match (letter.to_ascii_uppercase(), axis) {
        ('N', Axis::Y) | ('E', Axis::X) => Ok(1.0),
        ('S', Axis::Y) | ('W', Axis::X) => Ok(-1.0),
        ('N' | 'S', Axis::X) => Err(format!(
            "has hemisphere {letter}, a latitude, in the x (longitude) column: the columns look \
             swapped (x is longitude, y is latitude)"
        )),
        ('E' | 'W', Axis::Y) => Err(format!(
            "has hemisphere {letter}, a longitude, in the y (latitude) column: the columns look \
             swapped (x is longitude, y is latitude)"
        )),
        _ => Err(format!(
            "has \"{letter}\" where a hemisphere letter (N, S, E or W) or a number was expected"
        )),
    }
}

/// An unsigned plain number part: digits with at most one point.
fn unsigned(part: &str) -> Result<f64, String> {
    if part.contains(',') {
        return Err(format!(
            "has \"{part}\": a decimal comma; write decimals with a point"
        ));
    }
    let digits = part.chars().filter(char::is_ascii_digit).count();
    let points = part.chars().filter(|c| *c == '.').count();
    if digits == 0 || points > 1 || digits + points != part.chars().count() {
        return Err(format!("has \"{part}\", which is not a number"));
    }
    part.parse::<f64>()
        .map_err(|_| format!("has \"{part}\", which is not a number"))
}

/// Degrees, minutes and seconds (each unsigned, minutes and seconds optional) with a sign, as
/// decimal degrees on `axis`, every part checked.
fn combine(
    sign: f64,
    degrees: &str,
    minutes: Option<&str>,
    seconds: Option<&str>,
    axis: Axis,
) -> Result<f64, String> {
    let d = unsigned(degrees)?;
    let m = minutes.map(unsigned).transpose()?;
    let s = seconds.map(unsigned).transpose()?;
    if m.is_some() && degrees.contains('.') {
        return Err(format!(
            "has degrees \"{degrees}\" with decimals followed by minutes; only the last part \
             may have decimals"
        ));
    }
    if let (Some(minutes), Some(_)) = (minutes, s) {
        if minutes.contains('.') {
            return Err(format!(
                "has minutes \"{minutes}\" with decimals followed by seconds; only the last \
                 part may have decimals"
            ));
        }
    }
    if let Some(m) = m {
        if m >= 60.0 {
            return Err(format!(
                "has minutes {}, outside 0 to 60",
                minutes.unwrap_or_default()
            ));
        }
    }
    if let Some(s) = s {
        if s >= 60.0 {
            return Err(format!(
                "has seconds {}, outside 0 to 60",
                seconds.unwrap_or_default()
            ));
        }
    }
    let value = d + m.unwrap_or(0.0) / 60.0 + s.unwrap_or(0.0) / 3600.0;
    if value > axis.limit() {
        return Err(format!(
            "is {value} degrees, beyond the {} range of ±{}",
            axis.name(),
            axis.limit()
        ));
    }
    Ok(sign * value)
}

/// A sign at the start of `t` (ASCII or Unicode minus), and the rest.
fn strip_sign(t: &str) -> (Option<f64>, &str) {
    if let Some(rest) = t.strip_prefix('-').or_else(|| t.strip_prefix('\u{2212}')) {
        (Some(-1.0), rest.trim_start())
    } else if let Some(rest) = t.strip_prefix('+') {
        (Some(1.0), rest.trim_start())
    } else {
        (None, t)
    }
}

/// One cell of degree-minute-second text as decimal degrees on `axis`, or the reason it is
/// not one (to follow the cell's text in an error).
pub fn parse_text(text: &str, axis: Axis) -> Result<f64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("is empty".to_string());
    }
    let (sign, t) = strip_sign(t);
    // A hemisphere letter first or last (not both).
    let mut letter = None;
    let mut body = t;
    if let Some(first) = body.chars().next().filter(char::is_ascii_alphabetic) {
        letter = Some(first);
        body = body[first.len_utf8()..].trim_start();
    }
    if let Some(last) = body.chars().last().filter(char::is_ascii_alphabetic) {
        if letter.is_some() {
            return Err("has a hemisphere letter at both ends".to_string());
        }
        letter = Some(last);
        body = body[..body.len() - last.len_utf8()].trim_end();
    }
    let hemisphere_sign = letter.map(|l| hemisphere(l, axis)).transpose()?;
    if sign.is_some() && letter.is_some() {
        return Err(
            "has both a sign and a hemisphere letter; write one of them (S and W are negative)"
                .to_string(),
        );
    }
    if body.starts_with(['-', '+', '\u{2212}']) {
        return Err("has a sign after its hemisphere letter".to_string());
    }
    // Parts: numbers, each optionally followed by its unit mark; separated by marks, colons or
    // spaces. Two apostrophes are a second mark.
    let mut parts: Vec<(String, Option<usize>)> = Vec::new();
    let mut number = String::new();
    let mut chars = body.chars().peekable();
    let close = |number: &mut String, mark: Option<usize>, parts: &mut Vec<_>| {
        if number.is_empty() {
            if let Some(mark) = mark {
                // A mark with no number before it, or two marks in a row.
                return Err(format!(
                    "has a {} mark without a number before it",
                    ["degree", "minute", "second"][mark]
                ));
            }
            return Ok(());
        }
        parts.push((std::mem::take(number), mark));
        Ok(())
    };
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' || c == ',' {
            number.push(c);
        } else if DEGREE_MARKS.contains(&c) {
            close(&mut number, Some(0), &mut parts)?;
        } else if MINUTE_MARKS.contains(&c) {
            if chars.peek().is_some_and(|n| MINUTE_MARKS.contains(n)) {
                chars.next();
                close(&mut number, Some(2), &mut parts)?;
            } else {
                close(&mut number, Some(1), &mut parts)?;
            }
        } else if SECOND_MARKS.contains(&c) {
            close(&mut number, Some(2), &mut parts)?;
        } else if c == ':' || c.is_whitespace() {
            close(&mut number, None, &mut parts)?;
        } else if c.is_alphabetic() {
            return Err(format!(
                "has the letter \"{c}\" inside; a hemisphere letter goes first or last"
            ));
        } else {
            return Err(format!("has \"{c}\", which is not part of a coordinate"));
        }
    }
    close(&mut number, None, &mut parts)?;
    if parts.is_empty() {
        return Err("has no number".to_string());
    }
    if parts.len() > 3 {
        return Err(format!(
            "has {} numbers; degrees, minutes and seconds are at most three",
            parts.len()
        ));
    }
    for (place, (_, mark)) in parts.iter().enumerate() {
        if let Some(mark) = mark {
            if *mark != place {
                return Err(format!(
                    "has a {} mark on its {} part; the parts go degrees, minutes, seconds",
                    ["degree", "minute", "second"][*mark],
                    ["first", "second", "third"][place]
                ));
            }
        }
    }
    let part = |i: usize| parts.get(i).map(|(n, _)| n.as_str());
    combine(
        sign.or(hemisphere_sign).unwrap_or(1.0),
        part(0).unwrap_or_default(),
        part(1),
        part(2),
        axis,
    )
}

/// Degrees in one cell, minutes and seconds in others, and an optional hemisphere cell, as
/// decimal degrees on `axis`. The degree cell may carry the sign ("-0" keeps it); with
/// minutes, degrees must be whole, and with seconds, minutes too.
pub fn parse_parts(
    degrees: &str,
    minutes: Option<&str>,
    seconds: Option<&str>,
    hemisphere_cell: Option<&str>,
    axis: Axis,
) -> Result<f64, String> {
    let (sign, d) = strip_sign(degrees.trim());
    let letter = match hemisphere_cell.map(str::trim) {
        None => None,
        Some(h) => {
            let mut letters = h.chars();
            match (letters.next(), letters.next()) {
                (Some(l), None) => Some(hemisphere(l, axis)?),
                _ => {
                    return Err(format!(
                        "has hemisphere \"{h}\"; write one letter, N, S, E or W"
                    ))
                }
            }
        }
    };
    if sign.is_some() && letter.is_some() {
        return Err(
            "has both a signed degree and a hemisphere letter; write one of them (S and W are \
             negative)"
                .to_string(),
        );
    }
    for (name, cell) in [("minutes", minutes), ("seconds", seconds)] {
        if cell.is_some_and(|c| c.trim().starts_with(['-', '+', '\u{2212}'])) {
            return Err(format!(
                "has signed {name}; only the degrees (or the hemisphere) carry the sign"
            ));
        }
    }
    combine(
        sign.or(letter).unwrap_or(1.0),
        d,
        minutes.map(str::trim),
        seconds.map(str::trim),
        axis,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn the_usual_spellings_give_the_same_decimal_degrees() {
        let want = 41.0 + 24.0 / 60.0 + 12.2 / 3600.0;
        for text in [
            "41°24'12.2\"N",
            "41 24 12.2 N",
            "41:24:12.2",
            "N41°24'12.2\"",
            "41º24′12.2″N",
            "41°24'12.2''",
            "+41 24 12.2",
            " 41° 24' 12.2\" N ",
        ] {
            let got = parse_text(text, Axis::Y).unwrap();
            assert!(close(got, want), "{text}: {got}");
        }
        assert!(close(parse_text("-41:24:12.2", Axis::Y).unwrap(), -want));
        assert!(close(
            parse_text("2°10'26.5\"E", Axis::X).unwrap(),
            2.0 + 10.0 / 60.0 + 26.5 / 3600.0
        ));
        assert!(close(
            parse_text("2°10'26.5\"W", Axis::X).unwrap(),
            -(2.0 + 10.0 / 60.0 + 26.5 / 3600.0)
        ));
        assert!(close(
            parse_text("41°24.5'S", Axis::Y).unwrap(),
            -41.408_333_333_333_33
        ));
        assert!(close(parse_text("41.5°N", Axis::Y).unwrap(), 41.5));
        assert!(close(parse_text("−0 30 0", Axis::Y).unwrap(), -0.5));
    }

    #[test]
    fn every_part_is_checked_and_the_reason_given() {
        let reason = |t: &str, axis| parse_text(t, axis).unwrap_err();
        assert!(reason("41°61'12\"N", Axis::Y).contains("minutes 61"));
        assert!(reason("41°24'60\"N", Axis::Y).contains("seconds 60"));
        assert!(reason("91°00'00\"N", Axis::Y).contains("latitude range"));
        assert!(reason("181 0 0 E", Axis::X).contains("longitude range"));
        assert!(reason("90 0 1 N", Axis::Y).contains("latitude range"));
        assert!(reason("41°24'12.2\"N", Axis::X).contains("look swapped"));
        assert!(reason("2°10'26.5\"E", Axis::Y).contains("look swapped"));
        assert!(reason("-41°24'N", Axis::Y).contains("both a sign"));
        assert!(reason("41.5°24'N", Axis::Y).contains("only the last part"));
        assert!(reason("41°24.5'12\"N", Axis::Y).contains("only the last part"));
        assert!(reason("24'12\"N", Axis::Y).contains("minute mark on its first"));
        assert!(reason("41°24'12,2\"N", Axis::Y).contains("decimal comma"));
        assert!(reason("41 24 12 5", Axis::Y).contains("at most three"));
        assert!(reason("41°24'12\"X", Axis::Y).contains("hemisphere letter"));
        assert!(reason("N41°24'S", Axis::Y).contains("both ends"));
        assert!(reason("41°°24", Axis::Y).contains("without a number"));
        assert!(reason("41 2a4", Axis::Y).contains("letter"));
    }

    #[test]
    fn separate_columns_are_checked_part_by_part() {
        let want = 41.0 + 24.0 / 60.0 + 12.2 / 3600.0;
        let got = parse_parts("41", Some("24"), Some("12.2"), Some("N"), Axis::Y).unwrap();
        assert!(close(got, want));
        let got = parse_parts("-41", Some("24"), Some("12.2"), None, Axis::Y).unwrap();
        assert!(close(got, -want));
        let got = parse_parts("-0", Some("30"), None, None, Axis::X).unwrap();
        assert!(close(got, -0.5));
        let got = parse_parts("2", Some("10.5"), None, Some("w"), Axis::X).unwrap();
        assert!(close(got, -(2.0 + 10.5 / 60.0)));
        let reason = |d, m, s, h, axis| parse_parts(d, m, s, h, axis).unwrap_err();
        assert!(reason("41", Some("61"), Some("0"), None, Axis::Y).contains("minutes 61"));
        assert!(reason("41", Some("1"), Some("-5"), None, Axis::Y).contains("signed seconds"));
        assert!(reason("-41", Some("1"), None, Some("S"), Axis::Y).contains("both a signed"));
        assert!(reason("41", Some("1"), None, Some("E"), Axis::Y).contains("look swapped"));
        assert!(reason("41", Some("1"), None, Some("North"), Axis::Y).contains("one letter"));
        assert!(reason("41.5", Some("1"), None, None, Axis::Y).contains("only the last"));
        assert!(reason("200", Some("0"), None, None, Axis::X).contains("longitude range"));
    }

    #[test]
    fn plain_numbers_are_not_dms_and_dms_text_is() {
        assert!(!looks_like_dms("41.403"));
        assert!(!looks_like_dms("-2.5e1"));
        assert!(!looks_like_dms("nan"));
        for t in ["41°24'", "41 24", "41:24", "N41.5", "41.5S", "41'"] {
            assert!(looks_like_dms(t), "{t}");
        }
    }
}
