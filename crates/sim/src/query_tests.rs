//! Tests of the selection, sort and bind parsers.
use super::*;

fn row(pairs: &[(&str, &str)]) -> Record {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn any(_: &str) -> bool {
    true
}

#[test]
fn selections_read_as_sqlite_reads_them() {
    let r = row(&[
        ("display_name", "Ada Lovelace"),
        ("date", "1697384040000"),
        ("type", "2"),
    ]);
    for (w, yes) in [
        ("display_name='Ada Lovelace'", true),
        ("display_name = 'Ada Lovelace' AND type=2", true),
        ("display_name='Ada' OR type = '2'", true),
        ("NOT (type = 2)", false),
        ("date > 1697384039999 and date <= 1697384040000", true),
        ("display_name LIKE 'ada%'", true),
        ("display_name NOT LIKE '%lace'", false),
        ("label IS NULL", true),
        ("label IS NOT NULL", false),
        ("label = NULL", false),
        ("type IN (1, 2)", true),
        ("display_name = 'It''s'", false),
        ("", true),
    ] {
        assert_eq!(Where::parse(w, &any).unwrap().matches(&r), yes, "{w}");
    }
}

#[test]
fn bad_selections_say_where_they_break() {
    let known = |c: &str| c == "a";
    for (w, says) in [
        ("a = ", "near the end: syntax error"),
        ("b = 1", "no such column: b"),
        ("a = 'x", "unrecognized token"),
        ("(a = 1", "near the end"),
        ("a = 1 )", "near \")\""),
        ("a ; 1", "unrecognized token: \";\""),
    ] {
        let err = Where::parse(w, &known).unwrap_err();
        assert!(err.contains(says), "{w}: {err}");
    }
    let deep = format!("{}a=1{}", "(".repeat(100), ")".repeat(100));
    assert!(Where::parse(&deep, &known).unwrap_err().contains("deeper"));
}

#[test]
fn binds_take_androids_types() {
    assert_eq!(
        parse_bind("name:s:a:b").unwrap(),
        ("name".into(), Some("a:b".into()))
    );
    assert_eq!(parse_bind("n:i: 42").unwrap().1.as_deref(), Some("42"));
    assert_eq!(parse_bind("n:b:true").unwrap().1.as_deref(), Some("1"));
    assert_eq!(parse_bind("n:n").unwrap().1, None);
    for bad in ["", ":s:x", "n", "n:q:x", "n:i:x", "n:d:inf", "n:b:maybe"] {
        assert!(parse_bind(bad).is_err(), "{bad}");
    }
}

#[test]
fn sorting_orders_numbers_as_numbers_and_keeps_ties() {
    let rows = [
        row(&[("d", "10"), ("n", "a")]),
        row(&[("d", "9"), ("n", "b")]),
        row(&[("n", "c")]),
    ];
    let mut refs: Vec<&Record> = rows.iter().collect();
    sort(&mut refs, &parse_sort("d DESC", &any).unwrap());
    let names: Vec<&str> = refs.iter().map(|r| r["n"].as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(parse_sort("d sideways", &any).is_err());
    assert!(like("abc", "a%c") && like("abc", "_b_") && !like("abc", "a_") && like("", "%"));
}
