//! The tables and columns a task store of the current schema has, per backend, checked at
//! start once migrations have run: a store lacking one (dropped by hand, or put back from a
//! partial copy) is refused as damaged, naming each one missing, rather than taken and left
//! to fail its writes while watchers wait.
use super::SCHEMA_VERSION;

/// A table and its columns.
pub(crate) type Table = (&'static str, &'static [&'static str]);

/// SQLite's (`persist/sqlite.rs`, schema version 5).
pub(crate) const SQLITE: &[Table] = &[
    (
        "tasks",
        &[
            "ord",
            "id",
            "state",
            "owner",
            "created_at_ms",
            "ended_at_ms",
            "lease_serial",
            "lease_id",
            "record",
            "tenant",
            "tokens",
        ],
    ),
    ("events", &["task_ord", "seq", "event"]),
    ("requests", &["task_ord", "request"]),
];

/// PostgreSQL's (`persist/postgres.rs`, schema version 5).
pub(crate) const POSTGRES: &[Table] = &[
    (
        "tasks",
        &[
            "ord",
            "id",
            "state",
            "owner",
            "created_at_ms",
            "ended_at_ms",
            "lease_serial",
            "lease_id",
            "record",
            "tenant",
            "tokens",
            "request",
        ],
    ),
    ("events", &["task_ord", "seq", "event"]),
    ("replicas", &["owner", "seen_at"]),
    ("droidmesh_schema", &["version"]),
];

/// What of `expected` is not among `found` (table, column), each as "table T is missing" or
/// "column T.C is missing"; empty when nothing is.
pub(crate) fn missing(expected: &[Table], found: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (table, columns) in expected {
        if !found.iter().any(|(t, _)| t == table) {
            out.push(format!("table {table} is missing"));
            continue;
        }
        for column in *columns {
            if !found.iter().any(|(t, c)| t == table && c == column) {
                out.push(format!("column {table}.{column} is missing"));
            }
        }
    }
    out
}

/// The refusal of a store lacking what `missing` names, and what to do about it.
pub(crate) fn damaged(missing: &[String], what_to_do: &str) -> String {
    format!(
        "it is damaged: {} (a store of schema version {SCHEMA_VERSION} has them); {what_to_do}",
        missing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(t, c)| ((*t).to_owned(), (*c).to_owned()))
            .collect()
    }

    #[test]
    fn each_missing_table_and_column_is_named_once() {
        let expected: &[Table] = &[("tasks", &["id", "tokens"]), ("events", &["seq"])];
        assert!(
            missing(
                expected,
                &found(&[("tasks", "id"), ("tasks", "tokens"), ("events", "seq")])
            )
            .is_empty()
        );
        assert_eq!(
            missing(expected, &found(&[("tasks", "id"), ("other", "seq")])),
            ["column tasks.tokens is missing", "table events is missing"]
        );
        let words = damaged(&missing(expected, &[]), "do this");
        assert_eq!(
            words,
            format!(
                "it is damaged: table tasks is missing, table events is missing (a store of \
                 schema version {SCHEMA_VERSION} has them); do this"
            )
        );
    }
}
