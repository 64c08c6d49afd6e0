//! Every problem of a config document at once: each value of the wrong type, each unknown
//! key, each key that must be set, named by its key path and where it came from. A value found
//! wrong is taken out (its default applies) and the document read again, so one bad key does
//! not hide the next.
use serde::de::DeserializeOwned;

use super::origin::{Origin, Origins, Seg, key_path};

/// The most problems listed; a document with more says there are more.
pub(crate) const MAX_PROBLEMS: usize = 64;

/// Reads `doc` into `T`, listing every problem on the way. `T` is `None` when a problem could
/// not be taken out of the document (so nothing further could be read).
/// `removed`: keys taken out of the document already, whose problems `found` lists: a later
/// "must be set" about one of them is their echo, not a problem of its own. Each problem found
/// is added to `found`.
pub(crate) fn deserialize<'o, T: DeserializeOwned>(
    mut doc: toml::Table,
    origins: &'o Origins,
    mut removed: Vec<Vec<Seg>>,
    found: &mut Vec<Found<'o>>,
) -> Option<T> {
    read(&mut doc, origins, &mut removed, found)
}

/// Every problem, in the file's order, then the environment's, then the problems of keys set
/// by neither (their defaults), each group as found.
pub(crate) fn in_order(mut found: Vec<Found<'_>>) -> Vec<String> {
    found.sort_by(|a, b| a.0.is_none().cmp(&b.0.is_none()).then(a.0.cmp(&b.0)));
    found.into_iter().map(|(_, p)| p).collect()
}

/// A problem and where its value was set ([`Origin::order`]).
pub(crate) type Found<'o> = (Option<(u8, usize, &'o str)>, String);

fn read<'o, T: DeserializeOwned>(
    doc: &mut toml::Table,
    origins: &'o Origins,
    removed: &mut Vec<Vec<Seg>>,
    problems: &mut Vec<Found<'o>>,
) -> Option<T> {
    for _ in 0..=MAX_PROBLEMS {
        let err = match serde_path_to_error::deserialize::<_, T>(toml::Value::Table(doc.clone())) {
            Ok(config) => return Some(config),
            Err(err) => err,
        };
        let mut path: Vec<Seg> = err
            .path()
            .iter()
            .map(|s| match s {
                serde_path_to_error::Segment::Seq { index } => Seg::Index(*index),
                serde_path_to_error::Segment::Map { key }
                | serde_path_to_error::Segment::Enum { variant: key } => Seg::Key(key.clone()),
                serde_path_to_error::Segment::Unknown => Seg::Key("?".to_owned()),
            })
            .collect();
        let message = err.inner().message().to_owned();
        // Take out what the problem is about: the value itself, or, for a key that must be
        // set, its table.
        let take_out = path.clone();
        let (words, hint) = match missing_field(&message) {
            Some(field) => {
                path.push(Seg::Key(field.to_owned()));
                ("must be set".to_owned(), None)
            }
            None => reword(&message),
        };
        let echo = removed.iter().any(|r| path.starts_with(r));
        if !echo && problems.len() < MAX_PROBLEMS {
            let source = origins.nearest(&path);
            let origin = source.map(|o| format!(" ({o})")).unwrap_or_default();
            let hint = hint.map(|h| format!("; {h}")).unwrap_or_default();
            let key = if path.is_empty() {
                "the config".to_owned()
            } else {
                key_path(&path)
            };
            problems.push((
                source.map(Origin::order),
                format!("{key}: {words}{origin}{hint}"),
            ));
        } else if !echo {
            problems.push((
                None,
                format!("more problems after these {MAX_PROBLEMS}: fix these and load it again"),
            ));
            return None;
        }
        match remove(doc, &take_out) {
            Some(gone) => removed.push(gone),
            None => return None,
        }
    }
    None
}

/// `missing field `x``: the field's name.
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
}

/// Serde's words for a misfit, said as droidmesh says errors: what was expected, what was
/// found, and a hint of what to do (said after the value's source).
fn reword(message: &str) -> (String, Option<String>) {
    for lead in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(lead)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            return (format!("expected {expected}, found {found}"), None);
        }
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((name, known)) = rest.split_once('`')
    {
        let known = names(known);
        let hint = match closest(name, &known) {
            Some(near) => format!("did you mean `{near}`?"),
            None if known.is_empty() => "this table takes no keys".to_owned(),
            None => format!("the keys here are {}", known.join(", ")),
        };
        return ("unknown key".to_owned(), Some(hint));
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((name, known)) = rest.split_once('`')
    {
        let known = names(known);
        let words = format!("expected one of {}, found `{name}`", known.join(", "));
        let hint = closest(name, &known).map(|near| format!("did you mean `{near}`?"));
        return (words, hint);
    }
    (message.to_owned(), None)
}

/// The names serde lists after `expected one of` (each in backquotes).
fn names(list: &str) -> Vec<&str> {
    list.split('`').skip(1).step_by(2).collect()
}

/// The known name a mistyped one most likely meant: at most two edits away (or a third of
/// its length, for long names).
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    // A name this long is no typo of a config key (and the table of edits stays small).
    if name.len() > 64 {
        return None;
    }
    let limit = (name.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (edits(name, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Edits (insertions, deletions, substitutions, swaps of neighbours) between two names.
fn edits(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

/// Takes the value at `path` out of `doc` (a whole array when the path ends in one of its
/// items, so later items keep their numbers). Returns what was taken out, `None` when there
/// is nothing there to take.
pub(crate) fn remove(doc: &mut toml::Table, path: &[Seg]) -> Option<Vec<Seg>> {
    let end = path
        .iter()
        .position(|s| matches!(s, Seg::Index(_)))
        .unwrap_or(path.len());
    let path = &path[..end];
    let (last, parents) = path.split_last()?;
    let mut table = doc;
    for seg in parents {
        let Seg::Key(k) = seg else { return None };
        table = table.get_mut(k)?.as_table_mut()?;
    }
    let Seg::Key(last) = last else { return None };
    table.remove(last)?;
    Some(path.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(message: &str) -> String {
        match reword(message) {
            (words, Some(hint)) => format!("{words}; {hint}"),
            (words, None) => words,
        }
    }

    #[test]
    fn serde_s_words_become_expected_and_found() {
        assert_eq!(
            said("invalid type: string \"a, expected b; c\", expected u16"),
            "expected u16, found string \"a, expected b; c\""
        );
        assert_eq!(
            said("unknown field `prot`, expected one of `addr`, `port`"),
            "unknown key; did you mean `port`?"
        );
        assert_eq!(
            said("unknown field `zzz`, expected one of `addr`, `port`"),
            "unknown key; the keys here are addr, port"
        );
        assert_eq!(
            said("unknown field `x`, there are no fields"),
            "unknown key; this table takes no keys"
        );
        assert_eq!(
            said("unknown variant `opnai`, expected one of `openai`, `anthropic`"),
            "expected one of openai, anthropic, found `opnai`; did you mean `openai`?"
        );
        assert_eq!(said("something else"), "something else");
    }

    #[test]
    fn edits_count_a_swap_as_one() {
        assert_eq!(edits("prot", "port"), 1);
        assert_eq!(edits("default_max_stepz", "default_max_steps"), 1);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(closest("tag", &["key", "port"]), None);
    }
}
