//! Config loading: one TOML file, `${VAR}` / `${VAR:-default}` substitution in string values,
//! then `DROIDMESH_SECTION__KEY=value` environment overrides, then validation, all before any
//! port is bound. A config with problems is refused with all of them, each naming its key and
//! where its value came from.
mod origin;
mod problems;

use crate::error::{Result, RuntimeError};
use origin::{Seg, key_path};
use serde::de::DeserializeOwned;

pub use origin::{Origin, Origins};
use std::path::PathBuf;
use toml::Value;

/// Separator between nested keys in override variable names: `DROIDMESH_DEVICE__ADB_SERVER`.
const NEST: &str = "__";

/// `DROIDMESH_*` variables that mean something else than a config override: the config file's
/// path, the executor's secrets (`DROIDMESH_SECRET_<ID>`) and the gateway key `droidmesh run`
/// sends (`DROIDMESH_API_KEY`).
pub const RESERVED: &[&str] = &["DROIDMESH_CONFIG", "DROIDMESH_SECRET_", "DROIDMESH_API_KEY"];

/// Where configuration comes from. Environment variables are passed in (rather than read from
/// the process) so that loading is testable and deterministic.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// TOML file; `None` starts from an empty document (every field takes its default).
    pub file: Option<PathBuf>,
    /// Variables for `${VAR}` substitution and `PREFIX_...` overrides.
    pub env: Vec<(String, String)>,
    /// Prefix of override variables, e.g. `DROIDMESH`.
    pub prefix: String,
    /// Variables with the prefix that are not overrides: an exact name, or a name prefix when
    /// it ends in `_` (`DROIDMESH_SECRET_` covers every secret).
    pub reserved: Vec<String>,
}

impl ConfigSource {
    /// The process environment with the `DROIDMESH` prefix.
    pub fn from_process(file: Option<PathBuf>) -> Self {
        Self {
            file,
            env: std::env::vars().collect(),
            prefix: "DROIDMESH".to_owned(),
            reserved: RESERVED.iter().map(|r| (*r).to_owned()).collect(),
        }
    }
}

/// Checks a loaded config; every problem is listed, each naming the field.
pub trait Validate {
    fn validate(&self) -> std::result::Result<(), Vec<String>>;
}

/// Loads, substitutes, overrides, deserializes and validates a config.
pub fn load_config<T: DeserializeOwned + Validate>(source: &ConfigSource) -> Result<T> {
    load_config_with_origins(source).map(|(config, _)| config)
}

/// [`load_config`], with where each key the file or the environment set came from. A config
/// with problems is refused listing all of them, each naming its key path and where its
/// value came from (the file and line, or the variable).
pub fn load_config_with_origins<T: DeserializeOwned + Validate>(
    source: &ConfigSource,
) -> Result<(T, Origins)> {
    let (mut doc, mut origins) = match &source.file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::ConfigRead {
                path: path.clone(),
                source: e,
            })?;
            let doc = text
                .parse::<toml::Table>()
                .map_err(|e| RuntimeError::ConfigSyntax {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            (doc, Origins::of_file(path, &text))
        }
        None => (toml::Table::new(), Origins::default()),
    };
    // Values that cannot be used are taken out (their defaults apply) once their problem is
    // listed, so that the rest of the document is still read and checked.
    let mut unset = Vec::new();
    substitute_table(&mut doc, &source.env, &mut Vec::new(), &mut unset);
    let removed: Vec<Vec<Seg>> = unset
        .iter()
        .filter_map(|(path, _)| problems::remove(&mut doc, path))
        .collect();
    let mut bad_overrides = Vec::new();
    apply_overrides(&mut doc, source, &mut origins, &mut bad_overrides);
    let mut found: Vec<problems::Found<'_>> = bad_overrides
        .into_iter()
        .map(|(var, problem)| (Some((1, 0, var)), problem))
        .collect();
    for (path, var) in &unset {
        let origin = origins.nearest(path);
        found.push((
            origin.map(Origin::order),
            format!(
                "{}: refers to ${{{var}}}, but that environment variable is not set{}",
                key_path(path),
                origin.map(|o| format!(" ({o})")).unwrap_or_default()
            ),
        ));
    }
    let config: Option<T> = problems::deserialize(doc, &origins, removed, &mut found);
    if let Some(config) = &config
        && let Err(invalid) = config.validate()
    {
        found.extend(invalid.iter().map(|p| origins.annotate(p)));
    }
    let problems = problems::in_order(found);
    match config {
        Some(config) if problems.is_empty() => Ok((config, origins)),
        _ if problems.is_empty() => Err(RuntimeError::ConfigInvalid(vec![
            "the config cannot be read".to_owned(),
        ])),
        _ => Err(RuntimeError::ConfigInvalid(problems)),
    }
}

fn lookup<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Substitutes every string of `table`; the keys whose variables are missing go to `unset`
/// with the variable's name.
fn substitute_table(
    table: &mut toml::Table,
    env: &[(String, String)],
    at: &mut Vec<Seg>,
    unset: &mut Vec<(Vec<Seg>, String)>,
) {
    for (key, value) in table.iter_mut() {
        at.push(Seg::Key(key.clone()));
        substitute_value(value, env, at, unset);
        at.pop();
    }
}

fn substitute_value(
    value: &mut Value,
    env: &[(String, String)],
    at: &mut Vec<Seg>,
    unset: &mut Vec<(Vec<Seg>, String)>,
) {
    match value {
        Value::String(s) => match substitute(s, env) {
            Ok(done) => *s = done,
            Err(var) => unset.push((at.clone(), var)),
        },
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                at.push(Seg::Index(i));
                substitute_value(item, env, at, unset);
                at.pop();
            }
        }
        Value::Table(t) => substitute_table(t, env, at, unset),
        _ => {}
    }
}

/// Replaces `${VAR}` and `${VAR:-default}`; `$$` stays a literal `$`.
pub fn substitute_str(input: &str, env: &[(String, String)]) -> Result<String> {
    substitute(input, env).map_err(|var| RuntimeError::MissingVariable { var })
}

/// [`substitute_str`]; `Err` is the name of a variable that is not set.
fn substitute(input: &str, env: &[(String, String)]) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                out.push_str(&rest[pos..]);
                return Ok(out);
            };
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (expr, None),
            };
            match (lookup(env, name), default) {
                (Some(v), _) => out.push_str(v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => return Err(name.to_owned()),
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Applies every `PREFIX_SECTION__KEY` variable; one that cannot apply is a problem, listed
/// with the variable's name.
fn apply_overrides<'s>(
    doc: &mut toml::Table,
    source: &'s ConfigSource,
    origins: &mut Origins,
    problems: &mut Vec<(&'s str, String)>,
) {
    let prefix = format!("{}_", source.prefix);
    let mut overrides: Vec<&(String, String)> = source
        .env
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix) && k.len() > prefix.len())
        .filter(|(k, _)| {
            !source
                .reserved
                .iter()
                .any(|r| k == r || (r.ends_with('_') && k.starts_with(r.as_str())))
        })
        .collect();
    overrides.sort();
    for (var, raw) in overrides {
        let path: Vec<String> = var[prefix.len()..]
            .split(NEST)
            .map(str::to_ascii_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            problems.push((
                var,
                format!(
                    "{var}: an empty key between `{NEST}`s; name a key as {prefix}SECTION{NEST}KEY"
                ),
            ));
            continue;
        }
        match set_path(doc, &path, raw) {
            Ok(()) => origins.set_env(&path.join("."), var),
            Err(section) => problems.push((
                var,
                format!(
                    "{var}: {section} is a value in the config, not a table, so {} cannot be set in it",
                    path.join(".")
                ),
            )),
        }
    }
}

/// Sets the value at `path`; `Err` names a key on the way that holds a value, not a table.
fn set_path(
    table: &mut toml::Table,
    path: &[String],
    raw: &str,
) -> std::result::Result<(), String> {
    let (last, parents) = match path.split_last() {
        Some(split) => split,
        None => return Ok(()),
    };
    let mut current = table;
    for (depth, key) in parents.iter().enumerate() {
        let entry = current
            .entry(key.clone())
            .or_insert_with(|| Value::Table(toml::Table::new()));
        current = match entry {
            Value::Table(t) => t,
            _ => return Err(parents[..=depth].join(".")),
        };
    }
    let value = match current.get(last) {
        // Keep strings as strings ("5037" stays text for a text field).
        Some(Value::String(_)) => Value::String(raw.to_owned()),
        _ => infer_value(raw),
    };
    current.insert(last.clone(), value);
    Ok(())
}

/// Interprets an override as a TOML value (number, bool, array) when it parses as one.
fn infer_value(raw: &str) -> Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests;
