//! Where each config value came from: a line of the config file, or an environment variable.
//! Problems name it, so a platform team knows which of its many sources to fix.
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A key path as config errors print it: `listen.gateway`, `device.direct_devices[0]`.
pub(crate) fn key_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Where a value was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of the config file (no line when the file could not be read for spans).
    File { path: PathBuf, line: Option<usize> },
    /// An override variable, `DROIDMESH_LISTEN__GATEWAY`.
    Env { var: String },
}

impl Origin {
    /// Problems are listed in this order: the file's from its top, then the environment's.
    pub(crate) fn order(&self) -> (u8, usize, &str) {
        match self {
            Origin::File { line, .. } => (0, line.unwrap_or(0), ""),
            Origin::Env { var } => (1, 0, var),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File {
                path,
                line: Some(line),
            } => write!(f, "{}, line {line}", path.display()),
            Origin::File { path, line: None } => write!(f, "{}", path.display()),
            Origin::Env { var } => write!(f, "from {var}"),
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    origin: Origin,
    /// A value rather than a table: only these are looked for in the words of a problem.
    leaf: bool,
}

/// The origin of every key the file or the environment set; a key neither set has its
/// default.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    entries: BTreeMap<String, Entry>,
}

impl Origins {
    /// Every key of the config file `text` (read from `path`), with its line.
    pub(crate) fn of_file(path: &Path, text: &str) -> Self {
        let mut origins = Origins::default();
        match toml::de::DeTable::parse(text) {
            Ok(table) => origins.walk_table(path, text, table.get_ref(), &mut Vec::new()),
            // The document parsed as a table already; without spans keys get no line.
            Err(_) => {
                if let Ok(table) = text.parse::<toml::Table>() {
                    origins.walk_plain(path, &toml::Value::Table(table), &mut Vec::new());
                }
            }
        }
        origins
    }

    fn walk_table(
        &mut self,
        path: &Path,
        text: &str,
        table: &toml::de::DeTable<'_>,
        at: &mut Vec<Seg>,
    ) {
        for (key, value) in table {
            at.push(Seg::Key(key.get_ref().to_string()));
            let line = line_of(text, key.span().start);
            self.walk_value(path, text, value.get_ref(), line, at);
            at.pop();
        }
    }

    fn walk_value(
        &mut self,
        path: &Path,
        text: &str,
        value: &toml::de::DeValue<'_>,
        line: usize,
        at: &mut Vec<Seg>,
    ) {
        let leaf = !matches!(value, toml::de::DeValue::Table(_));
        self.insert_file(path, at, Some(line), leaf);
        match value {
            toml::de::DeValue::Table(t) => self.walk_table(path, text, t, at),
            toml::de::DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    at.push(Seg::Index(i));
                    let line = line_of(text, item.span().start);
                    self.walk_value(path, text, item.get_ref(), line, at);
                    at.pop();
                }
            }
            _ => {}
        }
    }

    fn walk_plain(&mut self, path: &Path, value: &toml::Value, at: &mut Vec<Seg>) {
        match value {
            toml::Value::Table(t) => {
                for (key, v) in t {
                    at.push(Seg::Key(key.clone()));
                    self.insert_file(path, at, None, !v.is_table());
                    self.walk_plain(path, v, at);
                    at.pop();
                }
            }
            toml::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    at.push(Seg::Index(i));
                    self.insert_file(path, at, None, !v.is_table());
                    self.walk_plain(path, v, at);
                    at.pop();
                }
            }
            _ => {}
        }
    }

    fn insert_file(&mut self, path: &Path, at: &[Seg], line: Option<usize>, leaf: bool) {
        self.entries.insert(
            key_path(at),
            Entry {
                origin: Origin::File {
                    path: path.to_owned(),
                    line,
                },
                leaf,
            },
        );
    }

    /// `var` set the value at `key`: it replaces whatever the file had there, below it too.
    pub(crate) fn set_env(&mut self, key: &str, var: &str) {
        let below = |k: &String| {
            k.strip_prefix(key)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        };
        self.entries.retain(|k, _| !below(k));
        self.entries.insert(
            key.to_owned(),
            Entry {
                origin: Origin::Env {
                    var: var.to_owned(),
                },
                leaf: true,
            },
        );
    }

    /// Whether the file or the environment set `key` (a dotted path: `endpoints.device`).
    pub fn is_set(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Where `key` was set, if it was.
    pub fn get(&self, key: &str) -> Option<&Origin> {
        self.entries.get(key).map(|e| &e.origin)
    }

    /// Where the value at `path` was set: the path's own origin, else the first key set
    /// inside it (a table the environment made), else its nearest table's.
    pub(crate) fn nearest(&self, path: &[Seg]) -> Option<&Origin> {
        (1..=path.len()).rev().find_map(|n| {
            let key = key_path(&path[..n]);
            self.get(&key).or_else(|| {
                self.entries
                    .range(key.clone()..)
                    .take_while(|(k, _)| k.starts_with(&key))
                    .find(|(k, _)| k[key.len()..].starts_with(['.', '[']))
                    .map(|(_, e)| &e.origin)
            })
        })
    }

    /// A problem a config's validation found, with where the keys it names were set:
    /// `device.port: must not be 1 (from DM_DEVICE__PORT)`, and where it sorts
    /// ([`Origin::order`] of the first). Keys it names that were not set (their defaults) add
    /// nothing.
    pub(crate) fn annotate(&self, problem: &str) -> (Option<(u8, usize, &str)>, String) {
        let mut named: Vec<(usize, &str, &Origin)> = self
            .entries
            .iter()
            .filter(|(k, e)| e.leaf && k.contains('.'))
            .filter_map(|(k, e)| mentions(problem, k).map(|at| (at, k.as_str(), &e.origin)))
            .collect();
        // In the order the problem names them; of two starting together, the longer key.
        named.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())));
        named.dedup_by(|later, earlier| later.0 == earlier.0);
        let Some(first) = named.first().map(|n| n.2.order()) else {
            return (None, problem.to_owned());
        };
        // The key a problem starts with is its subject: its origin needs no name.
        let notes: Vec<String> = named
            .iter()
            .take(3)
            .map(|(at, key, origin)| {
                if *at == 0 {
                    origin.to_string()
                } else {
                    format!("{key}: {origin}")
                }
            })
            .collect();
        (Some(first), format!("{problem} ({})", notes.join("; ")))
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Where `text` names the key `key` as a whole key (not part of a longer one).
fn mentions(text: &str, key: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(key) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let rest = &text[at + key.len()..];
        let mut after = rest.chars();
        let whole_start = before.is_none_or(|c| !is_key_char(c) && c != '.');
        let whole_end = match after.next() {
            None => true,
            Some('.') => after.next().is_none_or(|c| !is_key_char(c)),
            Some('[') => false,
            Some(c) => !is_key_char(c),
        };
        if whole_start && whole_end {
            return Some(at);
        }
        from = at + key.len().max(1);
    }
    None
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}
