//! The tool table's entries: one [`ToolSpec`] per [`Tool`], written as data.

use super::{ParamSpec, ParamType, Tool, ToolSpec};

const fn req(name: &'static str, ty: ParamType, description: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        ty,
        required: true,
        description,
    }
}

const fn opt(name: &'static str, ty: ParamType, description: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        ty,
        required: false,
        description,
    }
}

fn stroke(verb: &'static str) -> Vec<ParamSpec> {
    use ParamType::Integer;
    vec![
        req("x1", Integer, "start x in screen pixels"),
        req("y1", Integer, "start y in screen pixels"),
        req("x2", Integer, "end x in screen pixels"),
        req("y2", Integer, "end y in screen pixels"),
        opt("duration_ms", Integer, verb),
    ]
}

/// The entry of one tool. The match is exhaustive: a tool without an entry does not compile.
pub(super) fn spec(tool: Tool) -> ToolSpec {
    use ParamType::{Boolean, Integer, String as Text};
    let index = || req("index", Integer, "the element's index in ui_state");
    let focus = || {
        opt(
            "index",
            Integer,
            "element to focus first; omitted types into the focused field",
        )
    };
    let entry = |params, returns, description, aliases| ToolSpec {
        tool,
        name: tool.name(),
        params,
        returns,
        description,
        aliases,
    };
    match tool {
        Tool::Tap => entry(
            vec![index()],
            "string",
            "Tap the centre of an element. Returns what was tapped.",
            &["click", "tap_by_index", "click_by_index"],
        ),
        Tool::TapAt => entry(
            vec![
                req("x", Integer, "x in screen pixels"),
                req("y", Integer, "y in screen pixels"),
            ],
            "string",
            "Tap a point on the screen, for targets that have no element of their own.",
            &["click_at", "tap_coordinates"],
        ),
        Tool::LongPress => entry(
            vec![index()],
            "string",
            "Press and hold an element for about a second (context menus, selection).",
            &["long_click", "long_tap"],
        ),
        Tool::TypeText => entry(
            vec![
                req("text", Text, "the text to type"),
                focus(),
                opt(
                    "clear",
                    Boolean,
                    "erase the field's current text first (default false)",
                ),
            ],
            "string",
            "Type text into a text field.",
            &["type", "input_text", "enter_text"],
        ),
        Tool::PressKey => entry(
            vec![req(
                "key",
                Text,
                "one of back, home, enter, delete, tab, app_switch, menu, search, volume_up, \
                 volume_down, power, dpad_up, dpad_down, dpad_left, dpad_right, escape",
            )],
            "string",
            "Press a hardware or keyboard key.",
            &["key", "press", "keyevent"],
        ),
        Tool::Back => entry(
            Vec::new(),
            "string",
            "Go back one screen (the system back key).",
            &["go_back"],
        ),
        Tool::Home => entry(Vec::new(), "string", "Go to the home screen.", &["go_home"]),
        Tool::Swipe => entry(
            stroke("how long the gesture lasts (default 300)"),
            "string",
            "Swipe from one point to another. Swipe up (y1 > y2) to scroll a list down.",
            &["scroll"],
        ),
        Tool::Drag => entry(
            stroke("how long the drag lasts (default 1500)"),
            "string",
            "Press at the start point, move slowly to the end point and release \
             (moving icons, sliders).",
            &["drag_and_drop"],
        ),
        Tool::Wait => entry(
            vec![req("ms", Integer, "milliseconds, at most 10000")],
            "void",
            "Pause, for screens that are still loading.",
            &["sleep"],
        ),
        Tool::OpenApp => entry(
            vec![req(
                "name_or_package",
                Text,
                "a launcher label such as \"Settings\" or a package such as \"com.android.settings\"",
            )],
            "string",
            "Launch an app, or bring it to the front.",
            &["start_app", "launch_app", "open"],
        ),
        Tool::ListPackages => entry(
            Vec::new(),
            "Array<{ package: string, label: string }>",
            "List the apps installed on the device.",
            &["list_apps"],
        ),
        Tool::Remember => entry(
            vec![req("note", Text, "one fact worth keeping")],
            "void",
            "Keep a note; every later step shows you your notes.",
            &["add_memory", "note"],
        ),
        Tool::Complete => entry(
            vec![
                req("success", Boolean, "whether the goal was reached"),
                req(
                    "reason",
                    Text,
                    "the final answer, or why the goal cannot be reached",
                ),
            ],
            "void",
            "End the task. Call it once, as the last statement of your final step.",
            &["finish", "done"],
        ),
        Tool::RequestHumanHelp => entry(
            vec![
                req(
                    "reason",
                    Text,
                    "what blocks you that only a person can resolve (a CAPTCHA, a login code, \
                     a choice only the user can make)",
                ),
                opt(
                    "instructions",
                    Text,
                    "what the person should do or answer, step by step",
                ),
            ],
            "string",
            "Ask a person for help. The task pauses after this step until they reply; their \
             reply is shown to you at the next step.",
            &["ask_human", "human_help"],
        ),
        Tool::TypeSecret => entry(
            vec![
                req("secret_id", Text, "one of the allowed secret ids"),
                focus(),
            ],
            "string",
            "Type a stored secret (a password, a card number) without ever seeing its value.",
            &["input_secret"],
        ),
    }
}
