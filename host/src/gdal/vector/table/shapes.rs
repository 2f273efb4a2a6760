//! Lines and polygons from a table of vertices (`points_from_table` with `geometry`): rows are
//! grouped by the `group_by` column (the whole table is one shape without it) and ordered by
//! the `order_by` column (the table's row order without it), then every group is checked.
//!
//! - A group cell or a sequence cell that is empty, a sequence value that is not a number, and
//!   two rows of one group with the same sequence value are errors naming the rows.
//! - A line needs 2 distinct vertices and a polygon 3, or the group is refused by name.
//! - A polygon ring not closed is closed by repeating its first vertex (a last vertex within
//!   1e-9 of the ring's extent of the first is snapped onto it instead), and said.
//! - A ring GEOS finds invalid (a self-intersection, usually vertices out of order) is refused
//!   with GEOS's reason; a ring without area is refused.
//! - A clockwise ring is reversed to counter-clockwise (the exterior-ring winding of GeoJSON and
//!   the OGC simple features), and said. Lines keep their direction.

use crate::gdal::GdalError;
use std::collections::HashMap;

// What each table row becomes (a plain comment: the `geometry` argument describes it).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    Point,
    Line,
    Polygon,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Point => "point",
            Kind::Line => "line",
            Kind::Polygon => "polygon",
        }
    }
}

/// A vertex: x, y and optional z.
pub type Vertex = (f64, f64, Option<f64>);

/// One shape: its group's key, the group's rows (0-based, in vertex order; the first gives
/// its attributes) and its vertices in order (a polygon's ring closed and counter-clockwise).
#[derive(Debug, Clone)]
pub struct Shape {
    pub key: String,
    pub rows: Vec<usize>,
    pub vertices: Vec<Vertex>,
}

/// The sequence column and its direction, from `order_by`: a column name, optionally followed
/// by ASC or DESC (as in `vector_query`).
pub fn order_column<'a>(order_by: &'a str, names: &[String]) -> (&'a str, bool) {
    if names.iter().any(|n| n == order_by) {
        return (order_by, false);
    }
    let trimmed = order_by.trim();
    if let Some((column, direction)) = trimmed.rsplit_once(char::is_whitespace) {
        if direction.eq_ignore_ascii_case("desc") {
            return (column.trim_end(), true);
        }
        if direction.eq_ignore_ascii_case("asc") {
            return (column.trim_end(), false);
        }
    }
    (trimmed, false)
}

/// How a group is named in messages.
fn group_name(key: &str, grouped: bool) -> String {
    if grouped {
        format!("group \"{key}\"")
    } else {
        "the table (one shape: no group_by)".to_string()
    }
}

/// The rows of each group, in first-appearance order, each sorted by its sequence value.
/// `rows` are the table's cells; `group` and `order` are column indices with their names.
pub fn group_rows(
    rows: &[Vec<Option<String>>],
    group: Option<(usize, &str)>,
    order: Option<(usize, &str, bool)>,
) -> Result<Vec<(String, Vec<usize>)>, GdalError> {
    let mut groups: Vec<(String, Vec<(f64, usize)>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (row, cells) in rows.iter().enumerate() {
        let key = match group {
            Some((column, name)) => match cells[column].as_deref().map(str::trim) {
                Some(key) => key.to_string(),
                None => {
                    return Err(GdalError::Arguments(format!(
                        "group_by: row {} (data row, header not counted), column \"{name}\" is \
                         empty; every vertex row needs its group; nothing was written",
                        row + 1
                    )))
                }
            },
            None => String::new(),
        };
        let sequence = match order {
            Some((column, name, _)) => {
                let text = cells[column].as_deref().unwrap_or("");
                if let Some(problem) = super::number_problem(text) {
                    return Err(GdalError::Arguments(format!(
                        "order_by: row {} (data row, header not counted), column \"{name}\": \
                         \"{text}\" {problem}; every vertex needs its place in the sequence; \
                         nothing was written",
                        row + 1
                    )));
                }
                text.trim().parse::<f64>().unwrap_or(f64::NAN)
            }
            None => row as f64,
        };
        let at = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push((sequence, row));
    }
    let mut out = Vec::with_capacity(groups.len());
    for (key, mut members) in groups {
        members.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        if let Some((column, name, _)) = order {
            if let Some(pair) = members.windows(2).find(|w| w[0].0 == w[1].0) {
                let text = rows[pair[0].1][column].as_deref().unwrap_or("").trim();
                return Err(GdalError::Arguments(format!(
                    "order_by: rows {} and {} ({}) both have \"{name}\" = {text}; each vertex \
                     needs its own place in the sequence; nothing was written",
                    pair[0].1 + 1,
                    pair[1].1 + 1,
                    group_name(&key, group.is_some())
                )));
            }
        }
        if order.is_some_and(|(_, _, descending)| descending) {
            members.reverse();
        }
        out.push((key, members.into_iter().map(|(_, row)| row).collect()));
    }
    Ok(out)
}

/// Twice the signed area of a ring (positive when counter-clockwise), taken relative to its
/// first vertex.
fn signed_area2(ring: &[Vertex]) -> f64 {
    let Some(&(x0, y0, _)) = ring.first() else {
        return 0.0;
    };
    ring.windows(2)
        .map(|w| (w[0].0 - x0) * (w[1].1 - y0) - (w[1].0 - x0) * (w[0].1 - y0))
        .sum()
}

fn distinct(vertices: &[Vertex]) -> usize {
    let mut keys: Vec<(u64, u64)> = vertices
        .iter()
        .map(|(x, y, _)| ((x + 0.0).to_bits(), (y + 0.0).to_bits()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// What was done to the groups, for the result's notes.
#[derive(Debug, Default)]
pub struct Repairs {
    pub closed: Vec<String>,
    pub snapped: Vec<String>,
    pub reversed: Vec<String>,
}

/// How the groups of one table are built: the kind, whether there is a `group_by`, how the
/// vertices were ordered (for a refusal) and what was done so far.
#[derive(Debug)]
pub struct Builder<'a> {
    pub kind: Kind,
    pub grouped: bool,
    pub order_hint: &'a str,
    pub repairs: Repairs,
}

impl Builder<'_> {
    /// Build and check one group's shape. `validity` is GEOS's reason a polygon ring is
    /// invalid, if it is.
    pub fn build(
        &mut self,
        key: String,
        rows: &[usize],
        vertices: Vec<Vertex>,
        validity: impl Fn(&[Vertex]) -> Option<String>,
    ) -> Result<Shape, GdalError> {
        build(self, key, rows, vertices, validity)
    }
}

fn build(
    builder: &mut Builder<'_>,
    key: String,
    rows: &[usize],
    vertices: Vec<Vertex>,
    validity: impl Fn(&[Vertex]) -> Option<String>,
) -> Result<Shape, GdalError> {
    let (kind, order_hint) = (builder.kind, builder.order_hint);
    let repairs = &mut builder.repairs;
    let name = group_name(&key, builder.grouped);
    let mut vertices = vertices;
    match kind {
        Kind::Point => {}
        Kind::Line => {
            let n = distinct(&vertices);
            if n < 2 {
                return Err(GdalError::Arguments(format!(
                    "geometry: {name} has {n} distinct vertex(es); a line needs at least 2; \
                     nothing was written"
                )));
            }
        }
        Kind::Polygon => {
            let (Some(&first), Some(&last)) = (vertices.first(), vertices.last()) else {
                return Err(GdalError::Arguments(format!(
                    "geometry: {name} has no vertices; nothing was written"
                )));
            };
            let closed = first.0 == last.0 && first.1 == last.1 && vertices.len() > 1;
            let open_part = if closed {
                &vertices[..vertices.len() - 1]
            } else {
                &vertices[..]
            };
            let n = distinct(open_part);
            if n < 3 {
                return Err(GdalError::Arguments(format!(
                    "geometry: {name} has {n} distinct vertex(es); a polygon needs at least 3; \
                     nothing was written"
                )));
            }
            if !closed {
                let (mut min_x, mut min_y, mut max_x, mut max_y) = (
                    f64::INFINITY,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NEG_INFINITY,
                );
                for (x, y, _) in &vertices {
                    min_x = min_x.min(*x);
                    min_y = min_y.min(*y);
                    max_x = max_x.max(*x);
                    max_y = max_y.max(*y);
                }
                let extent = (max_x - min_x).max(max_y - min_y);
                let gap = (first.0 - last.0).abs().max((first.1 - last.1).abs());
                if gap <= 1e-9 * extent && vertices.len() > 3 {
                    if let Some(end) = vertices.last_mut() {
                        *end = first;
                    }
                    repairs.snapped.push(key.clone());
                } else {
                    vertices.push(first);
                    repairs.closed.push(key.clone());
                }
            }
            if let Some(reason) = validity(&vertices) {
                return Err(GdalError::Arguments(format!(
                    "geometry: {name} is not a valid polygon ring: GEOS says \"{reason}\"; \
                     {order_hint}; nothing was written"
                )));
            }
            let area2 = signed_area2(&vertices);
            if area2 == 0.0 {
                return Err(GdalError::Arguments(format!(
                    "geometry: {name} has no area (its vertices are collinear); nothing was \
                     written"
                )));
            }
            if area2 < 0.0 {
                vertices.reverse();
                repairs.reversed.push(key.clone());
            }
        }
    }
    Ok(Shape {
        key,
        rows: rows.to_vec(),
        vertices,
    })
}

/// A list of group names for a note: the first ten, then how many more.
pub fn list(keys: &[String], grouped: bool) -> String {
    if !grouped {
        return "the table's ring".to_string();
    }
    let mut named: Vec<String> = keys.iter().take(10).map(|k| format!("\"{k}\"")).collect();
    if keys.len() > 10 {
        named.push(format!("and {} more", keys.len() - 10));
    }
    format!("group(s) {}", named.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(rows: &[&[&str]]) -> Vec<Vec<Option<String>>> {
        rows.iter()
            .map(|r| {
                r.iter()
                    .map(|c| (!c.is_empty()).then(|| c.to_string()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn rows_are_grouped_in_first_appearance_and_sorted_by_sequence() {
        let rows = cells(&[
            &["B", "2"],
            &["A", "3"],
            &["B", "1"],
            &["A", "1"],
            &["A", "2"],
        ]);
        let groups = group_rows(&rows, Some((0, "id")), Some((1, "seq", false))).unwrap();
        assert_eq!(
            groups,
            vec![
                ("B".to_string(), vec![2, 0]),
                ("A".to_string(), vec![3, 4, 1])
            ]
        );
        let groups = group_rows(&rows, Some((0, "id")), Some((1, "seq", true))).unwrap();
        assert_eq!(groups[1].1, vec![1, 4, 3]);
        // Without order_by: the table's order.
        let groups = group_rows(&rows, Some((0, "id")), None).unwrap();
        assert_eq!(groups[1].1, vec![1, 3, 4]);
    }

    #[test]
    fn empty_duplicate_and_non_numeric_sequences_name_their_rows() {
        let error = |rows: &[&[&str]]| {
            group_rows(&cells(rows), Some((0, "id")), Some((1, "seq", false)))
                .unwrap_err()
                .to_string()
        };
        let e = error(&[&["A", "1"], &["A", "2"], &["A", "2"]]);
        assert!(
            e.contains("rows 2 and 3") && e.contains("group \"A\""),
            "{e}"
        );
        let e = error(&[&["A", "1"], &["A", ""]]);
        assert!(e.contains("row 2") && e.contains("empty"), "{e}");
        let e = error(&[&["A", "1"], &["A", "two"]]);
        assert!(e.contains("row 2") && e.contains("\"two\""), "{e}");
        let e = error(&[&["A", "1"], &["", "2"]]);
        assert!(e.contains("group_by: row 2"), "{e}");
        // The same sequence in different groups is fine.
        assert!(group_rows(
            &cells(&[&["A", "1"], &["B", "1"]]),
            Some((0, "id")),
            Some((1, "seq", false))
        )
        .is_ok());
    }

    #[test]
    fn order_by_takes_an_optional_direction() {
        let names = vec!["seq".to_string(), "odd name".to_string()];
        assert_eq!(order_column("seq", &names), ("seq", false));
        assert_eq!(order_column("seq DESC", &names), ("seq", true));
        assert_eq!(order_column("seq asc", &names), ("seq", false));
        assert_eq!(order_column("odd name", &names), ("odd name", false));
    }

    fn ring(points: &[(f64, f64)]) -> Vec<Vertex> {
        points.iter().map(|&(x, y)| (x, y, None)).collect()
    }

    fn builder(kind: Kind, order_hint: &str) -> Builder<'_> {
        Builder {
            kind,
            grouped: true,
            order_hint,
            repairs: Repairs::default(),
        }
    }

    #[test]
    fn rings_are_closed_oriented_and_counted() {
        let valid = |_: &[Vertex]| None;
        // Clockwise and open: closed and reversed.
        let mut b = builder(Kind::Polygon, "");
        let shape = b
            .build(
                "P".into(),
                &[0, 1, 2, 3],
                ring(&[(0.0, 0.0), (0.0, 1.0), (1.0, 1.0), (1.0, 0.0)]),
                valid,
            )
            .unwrap();
        assert_eq!(shape.vertices.len(), 5);
        assert_eq!(shape.vertices.first(), shape.vertices.last());
        assert!(signed_area2(&shape.vertices) > 0.0);
        assert_eq!(b.repairs.closed, vec!["P".to_string()]);
        assert_eq!(b.repairs.reversed, vec!["P".to_string()]);
        // Counter-clockwise and closed: untouched.
        let mut b = builder(Kind::Polygon, "");
        let square = ring(&[(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0), (0.0, 0.0)]);
        let shape = b.build("Q".into(), &[0], square.clone(), valid).unwrap();
        assert_eq!(shape.vertices, square);
        assert!(b.repairs.closed.is_empty() && b.repairs.reversed.is_empty());
        // A last vertex a hair from the first is snapped onto it, not doubled.
        let mut b = builder(Kind::Polygon, "");
        let shape = b
            .build(
                "R".into(),
                &[0],
                ring(&[(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0), (1e-12, 0.0)]),
                valid,
            )
            .unwrap();
        assert_eq!(shape.vertices.len(), 5);
        assert_eq!(b.repairs.snapped, vec!["R".to_string()]);
        // (kind, hint, group, ring, GEOS's reason, what the refusal says): too few distinct
        // vertices, no area, and GEOS's reason passed on with the hint.
        type Refusal<'a> = (
            Kind,
            &'a str,
            &'a str,
            &'a [(f64, f64)],
            Option<&'a str>,
            &'a [&'a str],
        );
        let refused: [Refusal; 4] = [
            (
                Kind::Polygon,
                "",
                "S",
                &[(0.0, 0.0), (1.0, 0.0), (0.0, 0.0)],
                None,
                &["group \"S\" has 2 distinct"],
            ),
            (
                Kind::Polygon,
                "",
                "T",
                &[(0.0, 0.0), (1.0, 0.0), (2.0, 0.0)],
                None,
                &["no area"],
            ),
            (
                Kind::Line,
                "",
                "U",
                &[(1.0, 1.0), (1.0, 1.0)],
                None,
                &["group \"U\" has 1 distinct"],
            ),
            (
                Kind::Polygon,
                "check the order",
                "V",
                &[(0.0, 0.0), (1.0, 1.0), (1.0, 0.0), (0.0, 1.0)],
                Some("Self-intersection[0.5 0.5]"),
                &["Self-intersection", "check the order"],
            ),
        ];
        for (kind, hint, group, points, reason, said) in refused {
            let e = builder(kind, hint)
                .build(group.into(), &[0], ring(points), |_: &[Vertex]| {
                    reason.map(str::to_string)
                })
                .unwrap_err()
                .to_string();
            assert!(said.iter().all(|s| e.contains(s)), "{e}");
        }
    }
}
