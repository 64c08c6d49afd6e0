//! Reading what Android's `content query` prints: one `Row: N col=value, col=value` line per
//! record, or `No result found.`. A value may itself hold ", ", so a line is split only before
//! a known column name (the projection asked for) followed by `=`.
use std::collections::BTreeMap;

/// One record: column → value.
pub type Row = BTreeMap<String, String>;

/// The rows of a `content query` answer whose projection is `columns`; `Err` when a line is
/// not a row (an error message from the phone).
pub fn parse(output: &str, columns: &[String]) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for line in output.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        if line == "No result found." {
            continue;
        }
        let Some(rest) = line.strip_prefix("Row: ") else {
            return Err(format!("expected `Row: N col=value, ...`, found `{line}`"));
        };
        let rest = rest.split_once(' ').map_or("", |(_, r)| r);
        rows.push(parse_row(rest, columns));
    }
    Ok(rows)
}

/// `col=value, col=value` with the columns in `columns`' order.
fn parse_row(text: &str, columns: &[String]) -> Row {
    // Where each column's `name=` starts: the first at 0, each later one after ", ".
    let mut starts: Vec<(usize, &str)> = Vec::new();
    let mut from = 0;
    for (i, col) in columns.iter().enumerate() {
        let at = if i == 0 {
            text.starts_with(&format!("{col}=")).then_some(0)
        } else {
            text[from..]
                .find(&format!(", {col}="))
                .map(|p| from + p + 2)
        };
        if let Some(at) = at {
            starts.push((at, col));
            from = at + col.len() + 1;
        }
    }
    let mut row = Row::new();
    for (k, (at, col)) in starts.iter().enumerate() {
        let value_from = at + col.len() + 1;
        let value_to = starts.get(k + 1).map_or(text.len(), |(next, _)| next - 2);
        let value = text.get(value_from..value_to.max(value_from)).unwrap_or("");
        row.insert((*col).to_owned(), value.to_owned());
    }
    row
}

/// Whether `row` holds every wanted value. Columns in `digits` compare their digits only (a
/// phone number typed as "+1 (617) 555-0103" is "16175550103"); columns in `contains` need only
/// hold the value somewhere; columns in `numbers` compare as whole numbers ("05" is 5) when
/// both sides are one.
pub fn matches(
    row: &Row,
    wanted: &BTreeMap<String, String>,
    digits: &[String],
    contains: &[String],
    numbers: &[String],
) -> bool {
    wanted.iter().all(|(col, want)| {
        let Some(got) = row.get(col) else {
            return false;
        };
        if numbers.contains(col)
            && let (Ok(g), Ok(w)) = (got.trim().parse::<i64>(), want.trim().parse::<i64>())
        {
            return g == w;
        }
        let (got, want) = if digits.contains(col) {
            (only_digits(got), only_digits(want))
        } else {
            (got.trim().to_owned(), want.trim().to_owned())
        };
        if contains.contains(col) {
            got.contains(&want)
        } else {
            got == want
        }
    })
}

fn only_digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// A row in words, for a finding (`display_name=Ada Lovelace, number=+44 …`).
pub fn show(row: &Row) -> String {
    row.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(c: &[&str]) -> Vec<String> {
        c.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn rows_split_only_before_known_columns() {
        let out = "Row: 0 display_name=Lovelace, Ada, number=+44 20 7946 0101\nRow: 1 display_name=Zoë Müller, number=030 1234\n";
        let rows = parse(out, &cols(&["display_name", "number"])).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["display_name"], "Lovelace, Ada");
        assert_eq!(rows[0]["number"], "+44 20 7946 0101");
        assert_eq!(rows[1]["display_name"], "Zoë Müller");
        assert!(
            parse("No result found.\n", &cols(&["a"]))
                .unwrap()
                .is_empty()
        );
        let e = parse("Error while accessing provider:contacts\n", &cols(&["a"])).unwrap_err();
        assert!(e.contains("Error while accessing"), "{e}");
    }

    #[test]
    fn odd_lines_never_panic() {
        for line in [
            "Row: ",
            "Row: 0",
            "Row: 0 =,",
            "Row: 0 a=",
            "Row: 0 a=1, a=2, b",
            "Row: 0 é=ü, b=ß",
        ] {
            let _ = parse(line, &cols(&["a", "b", "é"]));
        }
    }

    #[test]
    fn numbers_compare_by_digits_when_asked() {
        let row: Row = [("number".to_owned(), "+1 (617) 555-0103".to_owned())].into();
        let want = [("number".to_owned(), "16175550103".to_owned())].into();
        assert!(matches(&row, &want, &cols(&["number"]), &[], &[]));
        assert!(!matches(&row, &want, &[], &[], &[]));
        let body: Row = [(
            "body".to_owned(),
            "Ada: +1 (617) 555-0103, call her".to_owned(),
        )]
        .into();
        let want = [("body".to_owned(), "16175550103".to_owned())].into();
        assert!(matches(
            &body,
            &want,
            &cols(&["body"]),
            &cols(&["body"]),
            &[]
        ));
        assert!(!matches(&body, &want, &[], &cols(&["body"]), &[]));
    }

    #[test]
    fn numbers_compare_as_whole_numbers_when_asked() {
        let row: Row = [("minutes".to_owned(), "010".to_owned())].into();
        let want = [("minutes".to_owned(), "10".to_owned())].into();
        assert!(matches(&row, &want, &[], &[], &cols(&["minutes"])));
        assert!(!matches(&row, &want, &[], &[], &[]));
        let empty: Row = [("minutes".to_owned(), String::new())].into();
        let zero = [("minutes".to_owned(), "0".to_owned())].into();
        assert!(!matches(&empty, &zero, &[], &[], &cols(&["minutes"])));
    }
}
