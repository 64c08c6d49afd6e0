//! Loading templates: overrides, broken overrides, strict variables.

use std::fs;

use droidmesh_agent::{
    prompts::{
        CodeActSystem, CodeActUser, PromptError, PromptName, PromptSet, TextManipulatorSystem,
    },
    tools::{device_tools, js_signatures},
};

fn write(dir: &std::path::Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn embedded_templates_load_and_none_is_overridden() {
    let set = PromptSet::embedded().unwrap();
    assert!(set.overridden().is_empty());
    assert_eq!(PromptName::ALL.len(), 9);
}

#[test]
fn the_prompt_shows_the_same_signatures_the_sandbox_gets() {
    let signatures = js_signatures(device_tools());
    let text = PromptSet::embedded()
        .unwrap()
        .render(&CodeActSystem {
            tool_signatures: signatures.clone(),
            max_steps: 3,
            ..CodeActSystem::default()
        })
        .unwrap();
    assert!(text.contains(&signatures));
    for tool in device_tools() {
        assert!(
            text.contains(&format!("{}(", tool.name)),
            "{} missing",
            tool.name
        );
    }
}

#[test]
fn an_override_replaces_only_its_template_and_extra_files_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "text_manipulator/system.jinja",
        "EDIT {{ task }} OF {{ original|quote }}",
    );
    write(dir.path(), "notes.txt", "{{ this is not a template");
    write(dir.path(), "codeact/extra.jinja", "{% broken");
    let set = PromptSet::with_override_dir(dir.path()).unwrap();
    assert_eq!(set.overridden(), ["text_manipulator/system.jinja"]);
    let text = set
        .render(&TextManipulatorSystem {
            task: "trim".into(),
            original: "a \"b\"\nc".into(),
            ..TextManipulatorSystem::default()
        })
        .unwrap();
    assert_eq!(text, "EDIT trim OF \"a \\\"b\\\"\\nc\"");
    // The others are still the embedded ones.
    let embedded = PromptSet::embedded().unwrap();
    let user = CodeActUser {
        goal: "x".into(),
        ..CodeActUser::default()
    };
    assert_eq!(set.render(&user).unwrap(), embedded.render(&user).unwrap());
}

#[test]
fn a_broken_override_fails_at_load_with_its_file_name() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "manager/system.jinja",
        "Plan:\n{% if instruction %}\nno end",
    );
    let err = PromptSet::with_override_dir(dir.path()).unwrap_err();
    assert!(matches!(err, PromptError::Syntax { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("manager/system.jinja"), "{message}");
    assert!(message.starts_with("prompt template "), "{message}");
}

#[test]
fn an_override_naming_an_unknown_variable_fails_at_load() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "codeact/user.jinja",
        "{{ goal }} {{ golas }} {% for x in steps %}{{ x }}{% endfor %}",
    );
    let err = PromptSet::with_override_dir(dir.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("codeact/user.jinja uses undefined variables: golas, steps; expected only: "),
        "{err}"
    );
    assert!(err.contains("goal, history, max_steps"), "{err}");
}

#[test]
fn a_missing_value_is_an_error_not_an_empty_string() {
    // A name the context provides but whose attribute does not exist passes the load check;
    // strict rendering still refuses it.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "codeact/user.jinja",
        "Goal: {{ goal }}; package: {{ phone.pakage }}",
    );
    let set = PromptSet::with_override_dir(dir.path()).unwrap();
    let err = set.render(&CodeActUser::default()).unwrap_err();
    assert!(
        matches!(
            err,
            PromptError::Render {
                name: "codeact/user.jinja",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("undefined"), "{err}");
}

#[test]
fn a_missing_override_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = PromptSet::with_override_dir(dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, PromptError::OverrideDir { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("cannot read prompt override folder ")
    );
}

#[test]
fn a_broken_partial_override_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "shared/macros.jinja",
        "{% macro ui_elements(elements) %}{{ screen }}{% endmacro %}",
    );
    let err = PromptSet::with_override_dir(dir.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shared/macros.jinja uses undefined variables: screen"),
        "{err}"
    );
}
