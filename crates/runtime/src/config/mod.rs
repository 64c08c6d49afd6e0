//! Config loading: one TOML file, `${VAR}` / `${VAR:-default}` substitution in string values,
//! then `DROIDMESH_SECTION__KEY=value` environment overrides, then validation, all before any
//! port is bound.
use crate::error::{Result, RuntimeError};
use serde::de::DeserializeOwned;
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
    let mut doc = match &source.file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::ConfigRead {
                path: path.clone(),
                source: e,
            })?;
            text.parse::<toml::Table>()
                .map_err(|e| RuntimeError::ConfigSyntax {
                    path: path.clone(),
                    message: e.to_string(),
                })?
        }
        None => toml::Table::new(),
    };
    substitute_table(&mut doc, &source.env)?;
    apply_overrides(&mut doc, source)?;
    let config: T = Value::Table(doc)
        .try_into()
        .map_err(|e: toml::de::Error| RuntimeError::ConfigInvalid(e.message().to_owned()))?;
    config
        .validate()
        .map_err(|problems| RuntimeError::ConfigInvalid(problems.join("; ")))?;
    Ok(config)
}

fn lookup<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn substitute_table(table: &mut toml::Table, env: &[(String, String)]) -> Result<()> {
    for (_, value) in table.iter_mut() {
        substitute_value(value, env)?;
    }
    Ok(())
}

fn substitute_value(value: &mut Value, env: &[(String, String)]) -> Result<()> {
    match value {
        Value::String(s) => *s = substitute_str(s, env)?,
        Value::Array(items) => {
            for item in items {
                substitute_value(item, env)?;
            }
        }
        Value::Table(t) => substitute_table(t, env)?,
        _ => {}
    }
    Ok(())
}

/// Replaces `${VAR}` and `${VAR:-default}`; `$$` stays a literal `$`.
pub fn substitute_str(input: &str, env: &[(String, String)]) -> Result<String> {
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
                (None, None) => {
                    return Err(RuntimeError::MissingVariable {
                        var: name.to_owned(),
                    });
                }
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

fn apply_overrides(doc: &mut toml::Table, source: &ConfigSource) -> Result<()> {
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
            return Err(RuntimeError::BadOverride {
                var: var.clone(),
                reason: "empty key segment".to_owned(),
            });
        }
        set_path(doc, &path, raw, var)?;
    }
    Ok(())
}

fn set_path(table: &mut toml::Table, path: &[String], raw: &str, var: &str) -> Result<()> {
    let (last, parents) = match path.split_last() {
        Some(split) => split,
        None => return Ok(()),
    };
    let mut current = table;
    for key in parents {
        let entry = current
            .entry(key.clone())
            .or_insert_with(|| Value::Table(toml::Table::new()));
        current = match entry {
            Value::Table(t) => t,
            _ => {
                return Err(RuntimeError::BadOverride {
                    var: var.to_owned(),
                    reason: format!("{key} is not a section"),
                });
            }
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
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::io::Write;

    #[derive(Debug, Deserialize, Default)]
    #[serde(default, deny_unknown_fields)]
    struct Section {
        addr: String,
        port: u16,
        enabled: bool,
        tags: Vec<String>,
    }

    #[derive(Debug, Deserialize, Default)]
    #[serde(default, deny_unknown_fields)]
    struct Root {
        device: Section,
        key: String,
    }

    impl Validate for Root {
        fn validate(&self) -> std::result::Result<(), Vec<String>> {
            if self.device.port == 1 {
                return Err(vec!["device.port: must not be 1".to_owned()]);
            }
            Ok(())
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn substitutes_and_overrides() {
        let f =
            write("key = \"${HOME_DIR}/x\"\n[device]\naddr = \"${ADDR:-127.0.0.1}\"\nport = 5\n");
        let source = ConfigSource {
            file: Some(f.path().to_owned()),
            env: env(&[
                ("HOME_DIR", "/h"),
                ("DM_DEVICE__PORT", "5037"),
                ("DM_DEVICE__ENABLED", "true"),
                ("DM_DEVICE__TAGS", "[\"a\", \"b\"]"),
            ]),
            prefix: "DM".to_owned(),
            reserved: Vec::new(),
        };
        let root: Root = load_config(&source).unwrap();
        assert_eq!(root.key, "/h/x");
        assert_eq!(root.device.addr, "127.0.0.1");
        assert_eq!(root.device.port, 5037);
        assert!(root.device.enabled);
        assert_eq!(root.device.tags, vec!["a", "b"]);
    }

    #[test]
    fn reserved_variables_are_not_overrides() {
        let f = write("key = \"x\"\n[device]\naddr = \"a\"\nport = 5\n");
        let source = ConfigSource {
            file: Some(f.path().to_owned()),
            env: env(&[
                ("DM_CONFIG", "/somewhere.toml"),
                ("DM_SECRET_PIN", "1234"),
                ("DM_SECRET_CARD__NUMBER", "4111"),
                ("DM_DEVICE__PORT", "6"),
            ]),
            prefix: "DM".to_owned(),
            reserved: vec!["DM_CONFIG".into(), "DM_SECRET_".into()],
        };
        let root: Root = load_config(&source).unwrap();
        assert_eq!(root.device.port, 6);
        // Without the reservation the same variables are refused as unknown fields.
        let strict = ConfigSource {
            reserved: Vec::new(),
            ..source
        };
        assert!(load_config::<Root>(&strict).is_err());
    }

    #[test]
    fn string_fields_stay_strings() {
        let f = write("key = \"x\"\n");
        let source = ConfigSource {
            file: Some(f.path().to_owned()),
            env: env(&[("DM_KEY", "12")]),
            prefix: "DM".to_owned(),
            reserved: Vec::new(),
        };
        let root: Root = load_config(&source).unwrap();
        assert_eq!(root.key, "12");
    }

    #[test]
    fn missing_variable_is_named() {
        let f = write("key = \"${NOPE}\"\n");
        let source = ConfigSource {
            file: Some(f.path().to_owned()),
            env: vec![],
            prefix: "DM".to_owned(),
            reserved: Vec::new(),
        };
        let err = load_config::<Root>(&source).unwrap_err().to_string();
        assert!(err.contains("NOPE"), "{err}");
    }

    #[test]
    fn unknown_field_and_validation_fail_clearly() {
        let f = write("[device]\nadress = \"x\"\n");
        let source = ConfigSource {
            file: Some(f.path().to_owned()),
            env: vec![],
            prefix: "DM".to_owned(),
            reserved: Vec::new(),
        };
        let err = load_config::<Root>(&source).unwrap_err().to_string();
        assert!(err.contains("adress"), "{err}");

        let source = ConfigSource {
            file: None,
            env: env(&[("DM_DEVICE__PORT", "1")]),
            prefix: "DM".to_owned(),
            reserved: Vec::new(),
        };
        let err = load_config::<Root>(&source).unwrap_err().to_string();
        assert!(err.contains("device.port"), "{err}");
    }

    #[test]
    fn bad_toml_names_the_file() {
        let f = write("[device\n");
        let source = ConfigSource {
            file: Some(f.path().to_owned()),
            env: vec![],
            prefix: "DM".to_owned(),
            reserved: Vec::new(),
        };
        let err = load_config::<Root>(&source).unwrap_err().to_string();
        assert!(err.contains("not valid TOML"), "{err}");
    }

    #[test]
    fn dollar_escapes() {
        assert_eq!(substitute_str("a$$b", &[]).unwrap(), "a$b");
        assert_eq!(substitute_str("cost $5", &[]).unwrap(), "cost $5");
        assert_eq!(substitute_str("${unclosed", &[]).unwrap(), "${unclosed");
    }
}
