//! Tests of config loading: substitution, overrides, and problems named with their keys and sources.
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
    let f = write("key = \"${HOME_DIR}/x\"\n[device]\naddr = \"${ADDR:-127.0.0.1}\"\nport = 5\n");
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

fn dm(file: Option<&tempfile::NamedTempFile>, pairs: &[(&str, &str)]) -> ConfigSource {
    ConfigSource {
        file: file.map(|f| f.path().to_owned()),
        env: env(pairs),
        prefix: "DM".to_owned(),
        reserved: Vec::new(),
    }
}

#[test]
fn a_bad_type_names_the_key_the_file_its_line_and_the_value() {
    let f = write("key = \"x\"\n[device]\naddr = \"a\"\nport = \"nine\"\n");
    let err = load_config::<Root>(&dm(Some(&f), &[]))
        .unwrap_err()
        .to_string();
    let file = f.path().display().to_string();
    assert!(err.contains("device.port"), "{err}");
    assert!(err.contains(&format!("{file}, line 4")), "{err}");
    assert!(err.contains("expected u16, found string \"nine\""), "{err}");
}

#[test]
fn a_bad_type_from_the_environment_names_the_variable() {
    let err = load_config::<Root>(&dm(None, &[("DM_DEVICE__PORT", "nine")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("device.port"), "{err}");
    assert!(err.contains("from DM_DEVICE__PORT"), "{err}");
    assert!(err.contains("\"nine\""), "{err}");
}

#[test]
fn every_problem_is_listed_at_once_each_with_its_source() {
    let f = write("[device]\nenabled = 3\nprot = \"x\"\ntags = [1]\nport = 7\n");
    let err = load_config::<Root>(&dm(
        Some(&f),
        &[("DM_KEY", "${NOPE}"), ("DM_DEVICE__PORT", "1")],
    ))
    .unwrap_err()
    .to_string();
    let file = f.path().display().to_string();
    // In the file's order, then the environment's.
    let mut from = 0;
    for part in [
        format!("device.enabled: expected a boolean, found integer `3` ({file}, line 2)"),
        format!("device.prot: unknown key ({file}, line 3); did you mean `port`?"),
        format!("device.tags[0]: expected a string, found integer `1` ({file}, line 4)"),
        // A semantic problem of a value the environment set names the variable.
        "device.port: must not be 1 (from DM_DEVICE__PORT)".to_owned(),
    ] {
        let at = err[from..].find(&part);
        assert!(at.is_some(), "{part} is not in (or not in order): {err}");
        from += at.unwrap_or_default() + part.len();
    }
    assert!(err.starts_with("the config has 4 problems:\n"), "{err}");
}

#[test]
fn missing_variables_are_all_named_with_their_keys() {
    let f = write("key = \"${NOPE}\"\n[device]\naddr = \"${NADA}:1\"\n");
    let err = load_config::<Root>(&dm(Some(&f), &[]))
        .unwrap_err()
        .to_string();
    let file = f.path().display().to_string();
    assert!(
        err.contains(&format!(
            "key: refers to ${{NOPE}}, but that environment variable is not set ({file}, line 1)"
        )),
        "{err}"
    );
    assert!(err.contains("device.addr: refers to ${NADA}"), "{err}");
}

#[test]
fn origins_say_which_keys_a_file_or_the_environment_set() {
    let f = write("[device]\naddr = \"a\"\n");
    let (_, origins) =
        load_config_with_origins::<Root>(&dm(Some(&f), &[("DM_DEVICE__PORT", "5")])).unwrap();
    assert!(origins.is_set("device.addr"));
    assert!(origins.is_set("device.port"));
    assert!(!origins.is_set("device.tags"));
    assert!(!origins.is_set("key"));
}

#[test]
fn dollar_escapes() {
    assert_eq!(substitute_str("a$$b", &[]).unwrap(), "a$b");
    assert_eq!(substitute_str("cost $5", &[]).unwrap(), "cost $5");
    assert_eq!(substitute_str("${unclosed", &[]).unwrap(), "${unclosed");
}

#[test]
fn problems_of_every_kind_come_in_the_file_s_order() {
    // A value its validation refuses on line 2, one of the wrong type on line 3.
    let f = write("[device]\nport = 1\nenabled = 3\n");
    let err = load_config::<Root>(&dm(Some(&f), &[]))
        .unwrap_err()
        .to_string();
    let port = err.find("device.port: must not be 1");
    let enabled = err.find("device.enabled: expected a boolean");
    assert!(
        port.is_some() && enabled.is_some() && port < enabled,
        "{err}"
    );
}
