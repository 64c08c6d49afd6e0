//! Tests of the tool table and its renderings.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::*;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn every_tool_is_described_and_uniquely_named() {
    let mut names = HashSet::new();
    for tool in device_tools() {
        assert!(
            !tool.description.trim().is_empty(),
            "{} has no description",
            tool.name
        );
        assert!(
            !tool.returns.trim().is_empty(),
            "{} has no return type",
            tool.name
        );
        assert!(names.insert(tool.name), "{} is listed twice", tool.name);
        for param in &tool.params {
            assert!(
                !param.description.trim().is_empty(),
                "{}({}) has no description",
                tool.name,
                param.name
            );
        }
    }
    // Aliases never shadow a name or each other.
    let mut aliases = HashSet::new();
    for alias in device_tools().iter().flat_map(|t| t.aliases.iter()) {
        assert!(!names.contains(alias), "alias {alias} is also a tool name");
        assert!(aliases.insert(alias), "alias {alias} is listed twice");
    }
}

#[test]
fn names_are_javascript_identifiers_and_required_params_come_first() {
    let ident = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for tool in device_tools() {
        assert!(ident(tool.name), "{}", tool.name);
        let mut optional_seen = false;
        for param in &tool.params {
            assert!(ident(param.name), "{}.{}", tool.name, param.name);
            assert!(
                !(param.required && optional_seen),
                "{}: required after optional",
                tool.name
            );
            optional_seen |= !param.required;
        }
    }
}

#[test]
fn the_table_holds_the_codeact_tool_set() {
    let names: Vec<&str> = device_tools().iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "tap",
            "tap_at",
            "long_press",
            "type_text",
            "press_key",
            "back",
            "home",
            "swipe",
            "drag",
            "wait",
            "open_app",
            "list_packages",
            "remember",
            "complete",
            "request_human_help",
            "type_secret"
        ]
    );
    for name in ATOMIC_ACTIONS {
        assert!(find(name).is_some_and(|t| t.name == *name), "{name}");
    }
}

#[test]
fn press_key_lists_every_key() {
    let key = &find("press_key").unwrap().params[0];
    for k in KEYS {
        assert!(key.description.contains(k), "{k} missing");
    }
}

#[test]
fn signatures_are_javascript() {
    let tools = select(&["tap", "type_text", "home"]).unwrap();
    assert_eq!(
        js_signatures(&tools),
        "tap(index: number): string — Tap the centre of an element. Returns what was tapped.\n\
         \x20   index: the element's index in ui_state\n\
         type_text(text: string, index?: number, clear?: boolean): string — Type text into a text field.\n\
         \x20   text: the text to type\n\
         \x20   index: element to focus first; omitted types into the focused field\n\
         \x20   clear: erase the field's current text first (default false)\n\
         home(): string — Go to the home screen.\n"
    );
}

#[test]
fn json_actions_name_the_arguments() {
    let tools = select(&["swipe"]).unwrap();
    assert!(json_actions(&tools).starts_with(
        "{\"action\": \"swipe\", \"x1\": <number>, \"y1\": <number>, \"x2\": <number>, \
         \"y2\": <number>, \"duration_ms\"?: <number>} — Swipe"
    ));
}

#[test]
fn find_accepts_aliases_and_case() {
    assert_eq!(find("click").unwrap().name, "tap");
    assert_eq!(find(" Type_Text ").unwrap().name, "type_text");
    assert_eq!(find("input_text").unwrap().name, "type_text");
    assert_eq!(find("start_app").unwrap().name, "open_app");
    assert!(find("teleport").is_none());
}

#[test]
fn select_keeps_table_order_and_refuses_unknown_names() {
    let names: Vec<&str> = select(&["complete", "tap"])
        .unwrap()
        .iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["tap", "complete"]);
    assert_eq!(select::<&str>(&[]).unwrap().len(), device_tools().len());
    let err = select(&["tap", "teleport"]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("unknown tool `teleport`; expected one of: tap, tap_at")
    );
}

#[test]
fn args_in_order_checks_and_orders() {
    let type_text = find("type_text").unwrap();
    assert_eq!(
        type_text
            .args_in_order(&args(json!({"clear": true, "text": "hi"})))
            .unwrap(),
        vec![json!("hi"), Value::Null, json!(true)]
    );
    assert_eq!(
        type_text
            .args_in_order(&args(json!({"index": 2})))
            .unwrap_err()
            .to_string(),
        "type_text(text: string, index?: number, clear?: boolean): string: missing required argument `text`"
    );
    assert_eq!(
        find("tap")
            .unwrap()
            .args_in_order(&args(json!({"index": "3"})))
            .unwrap_err()
            .to_string(),
        "tap(index: number): string: argument `index` must be an integer, found string \"3\""
    );
    assert!(matches!(
        find("home")
            .unwrap()
            .args_in_order(&args(json!({"text": "x"}))),
        Err(ToolError::Unexpected { .. })
    ));
}

#[test]
fn indices_coordinates_and_durations_are_integers() {
    let tap = find("tap").unwrap();
    let err = tap.args_in_order(&args(json!({"index": 2.7}))).unwrap_err();
    assert!(
        matches!(
            &err,
            ToolError::WrongType { param: "index", expected: "an integer", found, .. }
                if found == "number 2.7"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "tap(index: number): string: argument `index` must be an integer, found number 2.7"
    );
    // A whole number written with a fraction part is still a whole number.
    assert_eq!(
        tap.args_in_order(&args(json!({"index": 3.0}))).unwrap(),
        vec![json!(3.0)]
    );
    let integers = [
        ("tap", "index"),
        ("tap_at", "x"),
        ("tap_at", "y"),
        ("long_press", "index"),
        ("type_text", "index"),
        ("swipe", "x1"),
        ("swipe", "duration_ms"),
        ("drag", "y2"),
        ("wait", "ms"),
        ("type_secret", "index"),
    ];
    for (tool, param) in integers {
        let spec = find(tool).unwrap();
        let p = spec.params.iter().find(|p| p.name == param).unwrap();
        assert_eq!(p.ty, ParamType::Integer, "{tool}.{param}");
    }
    let swipe = find("swipe").unwrap();
    assert!(matches!(
        swipe.args_in_order(&args(json!({"x1": 1, "y1": 2, "x2": 3, "y2": 4.5}))),
        Err(ToolError::WrongType { param: "y2", .. })
    ));
}

#[test]
fn every_tool_has_its_entry_in_declaration_order() {
    assert_eq!(device_tools().len(), Tool::ALL.len());
    for (i, tool) in Tool::ALL.iter().enumerate() {
        assert_eq!(
            *tool as usize, i,
            "Tool::ALL is out of declaration order at {tool}"
        );
        let spec = tool.spec();
        assert_eq!((spec.tool, spec.name), (*tool, tool.name()));
        assert_eq!(find(tool.name()).map(|s| s.tool), Some(*tool));
        assert_eq!(
            serde_json::to_value(tool).unwrap(),
            Value::String(tool.name().to_owned())
        );
    }
    assert_eq!(find("click").map(|s| s.tool), Some(Tool::Tap));
    let atomic: Vec<&str> = Tool::ALL
        .iter()
        .filter(|t| t.is_atomic())
        .map(|t| t.name())
        .collect();
    assert_eq!(atomic, ATOMIC_ACTIONS);
}
