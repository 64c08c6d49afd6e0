//! Example-based tests of the Executor parser, one per model habit.

use serde_json::json;

use super::*;

fn action(text: &str) -> (String, Value) {
    let a = parse_executor(text).unwrap();
    (a.action, Value::Object(a.args))
}

#[test]
fn the_documented_format() {
    let reply = "### Thought ###\nThe subgoal is to tap Wi-Fi, element 3.\n\n### Action ###\n{\"action\": \"tap\", \"index\": 3}\n\n### Description ###\nTapping Wi-Fi to open its settings.\n";
    let a = parse_executor(reply).unwrap();
    assert_eq!(a.action, "tap");
    assert_eq!(Value::Object(a.args), json!({"index": 3}));
    assert_eq!(
        a.thought.as_deref(),
        Some("The subgoal is to tap Wi-Fi, element 3.")
    );
    assert_eq!(
        a.description.as_deref(),
        Some("Tapping Wi-Fi to open its settings.")
    );
}

#[test]
fn fenced_json_with_comments_and_trailing_commas() {
    let reply = "### Action\n```json\n{\n  \"action\": \"swipe\", // scroll down\n  \"x1\": 540, \"y1\": 1600, \"x2\": 540, \"y2\": 600,\n}\n```";
    assert_eq!(
        action(reply),
        (
            "swipe".into(),
            json!({"x1": 540, "y1": 1600, "x2": 540, "y2": 600})
        )
    );
}

#[test]
fn single_quotes_and_bare_keys() {
    assert_eq!(
        action("### Action\n{'action': 'type_text', text: 'It\\'s me', clear: True}"),
        (
            "type_text".into(),
            json!({"text": "It's me", "clear": true})
        )
    );
}

#[test]
fn json_embedded_in_prose_without_a_heading() {
    let reply = "I'll press back now: {\"action\": \"back\"} — that should close the dialog.";
    let a = parse_executor(reply).unwrap();
    assert_eq!(a.action, "back");
    assert!(a.args.is_empty());
    assert_eq!(a.thought, None);
}

#[test]
fn other_heading_styles() {
    for reply in [
        "**Thought:** tap it\n**Action:** {\"action\": \"tap\", \"index\": 1}",
        "Thought: tap it\nAction: {\"action\": \"tap\", \"index\": 1}",
        "## Thought\ntap it\n**Action**\n{\"action\": \"tap\", \"index\": 1}",
    ] {
        let a = parse_executor(reply).unwrap();
        assert_eq!(
            (a.action.as_str(), a.thought.as_deref()),
            ("tap", Some("tap it")),
            "{reply}"
        );
    }
}

#[test]
fn an_example_in_the_thought_does_not_win_over_the_action_section() {
    let reply = "### Thought\nLast time {\"action\": \"back\"} did nothing.\n### Action\n{\"action\": \"home\"}";
    assert_eq!(action(reply).0, "home");
}

#[test]
fn nested_arguments_and_inner_descriptions_are_flattened() {
    let reply = "### Action\n{\"action\": \"open_app\", \"args\": {\"name_or_package\": \"Settings\"}, \"description\": \"open it\"}";
    let a = parse_executor(reply).unwrap();
    assert_eq!(
        Value::Object(a.args),
        json!({"name_or_package": "Settings"})
    );
    assert_eq!(a.description.as_deref(), Some("open it"));
    assert_eq!(action("{\"name\": \"home\"}").0, "home");
}

#[test]
fn truncated_json_is_closed() {
    assert_eq!(
        action("### Action\n{\"action\": \"type_text\", \"text\": \"Hello"),
        ("type_text".into(), json!({"text": "Hello"}))
    );
}

#[test]
fn errors_tell_the_model_what_to_write() {
    assert_eq!(
        parse_executor("I will tap the button.")
            .unwrap_err()
            .to_string(),
        "expected a JSON object such as {\"action\": \"tap\", \"index\": 3} under \"### Action\", found no JSON object"
    );
    assert_eq!(
        parse_executor("### Action\n{\"index\": 3}")
            .unwrap_err()
            .to_string(),
        "expected an \"action\" field naming the action, found an object with keys: index"
    );
    assert_eq!(
        parse_executor("### Action\n{\"action\": 3}")
            .unwrap_err()
            .to_string(),
        "expected \"action\" to be the action's name as a string, found number 3"
    );
    let err = parse_executor("### Action\n{\"action\" \"tap\"}").unwrap_err();
    assert!(matches!(err, ExecutorError::BadJson(_)), "{err}");
    assert!(err.to_string().contains("':' after an object key"), "{err}");
}
