//! Every template rendered with fixed inputs, compared with its reviewed snapshot.

use droidmesh_agent::{
    prompts::{
        CodeActStep, CodeActSystem, CodeActUser, ConversationTurn, ExecutorSystem, ManagerSystem,
        ProducedFile, Prompt, PromptSet, ScripterFile, ScripterSystem, ScripterUser,
        StructuredOutputSystem, TextManipulatorErrorCorrection, TextManipulatorSystem,
    },
    tools::{
        ATOMIC_ACTIONS, CustomToolSpec, custom_signatures, js_signatures, json_actions, select,
    },
};

use crate::fixtures;

fn render<P: Prompt>(context: &P) -> String {
    PromptSet::embedded().unwrap().render(context).unwrap()
}

fn weather_schema() -> String {
    serde_json::to_string_pretty(&serde_json::json!({
        "type": "object",
        "properties": {
            "temperature": {"type": "integer"},
            "condition": {"type": "string"}
        },
        "required": ["temperature", "condition"]
    }))
    .unwrap()
}

#[test]
fn codeact_system_full() {
    insta::assert_snapshot!(render(&CodeActSystem {
        tool_signatures: js_signatures(&select::<&str>(&[]).unwrap()),
        custom_tool_signatures: custom_signatures(&[CustomToolSpec {
            name: "weather".into(),
            description: "The weather now in a city.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "the city's name"},
                    "units": {"enum": ["metric", "imperial"]}
                },
                "required": ["city"]
            }),
        }]),
        vision: true,
        secret_ids: vec!["mail_password".into(), "card_pin".into()],
        app_card: Some("In Settings, Wi-Fi lives under \"Network & internet\".".into()),
        output_schema: Some(weather_schema()),
        max_steps: 20,
    }));
}

#[test]
fn codeact_system_minimal() {
    insta::assert_snapshot!(render(&CodeActSystem {
        tool_signatures: js_signatures(&select(&["tap", "complete"]).unwrap()),
        max_steps: 5,
        ..CodeActSystem::default()
    }));
}

#[test]
fn codeact_user_later_step() {
    insta::assert_snapshot!(render(&CodeActUser {
        goal: "Turn Wi-Fi on".into(),
        step: 3,
        max_steps: 20,
        now: Some("2025-01-15 10:30 (Wednesday)".into()),
        user_messages: vec!["Use the 5 GHz network if asked.".into()],
        memory: vec!["Settings has a search box at the top.".into()],
        history: fixtures::history(),
        omitted_steps: 4,
        phone: fixtures::phone(),
        ui_state: fixtures::screen().into(),
        screenshot_attached: true,
        app_cards: Some("### com.android.settings\n# Settings\n- Wi-Fi is the first switch.\n\n(app cards cut to 60 of 90 characters)".into()),
    }));
}

#[test]
fn codeact_user_first_step() {
    insta::assert_snapshot!(render(&CodeActUser {
        goal: "Open the Notes app".into(),
        step: 1,
        max_steps: 10,
        ..CodeActUser::default()
    }));
}

#[test]
fn manager_system_after_failures() {
    insta::assert_snapshot!(render(&ManagerSystem {
        instruction: "Turn Wi-Fi on and tell me the network name".into(),
        executor_actions: json_actions(&select(ATOMIC_ACTIONS).unwrap()),
        now: Some("2025-01-15 10:30 (Wednesday)".into()),
        phone: fixtures::phone(),
        ui_state: fixtures::screen().into(),
        vision: true,
        app_card: Some("Wi-Fi is under \"Network & internet\".".into()),
        secret_ids: vec!["wifi_password".into()],
        previous_plan: Some("1. Tap \"Wi-Fi\"\n2. Read the network name".into()),
        memory: vec!["At step 2, Settings was open.".into()],
        action_history: fixtures::actions(),
        error_history: fixtures::failures(),
        last_handoff_result: Some(
            "<script_result status=\"SUCCESS\">\nThe router API reports SSID \"Home\".\n</script_result>"
                .into(),
        ),
        conversation: Vec::new(),
        notes: vec!["The user changed the goal to: Turn Wi-Fi on and tell me the network name".into()],
        files: vec![ProducedFile {
            name: "router.json".into(),
            size_bytes: 812,
            path: "/var/lib/droidmesh/files/t-1/router.json".into(),
        }],
    }));
}

#[test]
fn manager_system_in_a_conversation() {
    insta::assert_snapshot!(render(&ManagerSystem {
        instruction: "Which network did you connect to earlier?".into(),
        executor_actions: json_actions(&select(&["tap", "open_app"]).unwrap()),
        phone: fixtures::phone(),
        ui_state: fixtures::screen().into(),
        conversation: vec![
            ConversationTurn {
                goal: "Turn Wi-Fi on".into(),
                answer: "Wi-Fi is on and connected to \"Home\".".into(),
                success: true,
            },
            ConversationTurn {
                goal: "Send my location to Sam".into(),
                answer: String::new(),
                success: false,
            },
        ],
        notes: vec!["A person answered your request for help: use the work account".into()],
        ..ManagerSystem::default()
    }));
}

#[test]
fn manager_system_first_turn() {
    insta::assert_snapshot!(render(&ManagerSystem {
        instruction: "Send \"on my way\" to Sam".into(),
        executor_actions: json_actions(&select(&["tap", "open_app"]).unwrap()),
        ..ManagerSystem::default()
    }));
}

#[test]
fn executor_system() {
    insta::assert_snapshot!(render(&ExecutorSystem {
        instruction: "Turn Wi-Fi on".into(),
        plan: "1. Tap the \"Wi-Fi\" switch\n2. Check that it is on".into(),
        subgoal: "Tap the \"Wi-Fi\" switch".into(),
        progress_status: Some("Settings > Network & internet is open.".into()),
        actions: json_actions(&select(ATOMIC_ACTIONS).unwrap()),
        phone: fixtures::phone(),
        ui_state: fixtures::screen().into(),
        vision: false,
        app_card: None,
        secret_ids: vec!["wifi_password".into()],
        action_history: fixtures::actions(),
        handoff_context: None,
    }));
}

#[test]
fn executor_system_handed_over() {
    insta::assert_snapshot!(render(&ExecutorSystem {
        instruction: "Post today's rate and show it on the phone".into(),
        plan: "1. Open the Notes app".into(),
        subgoal: "Open the Notes app".into(),
        actions: json_actions(&select(&["open_app", "tap"]).unwrap()),
        phone: fixtures::phone(),
        ui_state: Vec::new().into(),
        handoff_context: droidmesh_agent::prompts::handoff_text(&serde_json::json!({
            "reason": "the rate is known; it must be shown in Notes",
            "rate": "1.08"
        })),
        ..ExecutorSystem::default()
    }));
}

#[test]
fn scripter_system() {
    insta::assert_snapshot!(render(&ScripterSystem {
        task: "POST the note {\"text\": \"Buy milk\"} as JSON to http://hooks.internal:8080/notes and report the id it returns.".into(),
        instruction: Some("Save my shopping note to the team board and show it on the phone".into()),
        handoff_context: Some("{\n  \"note\": \"Buy milk\"\n}".into()),
        tool_signatures: "await fetch(url: string, options?: object): Response\n  HTTP request.\nwrite_file(name: string, content: string): Save a file.\n".into(),
        allowed_hosts: vec!["hooks.internal:8080".into()],
        request_timeout_ms: 15_000,
        max_response_bytes: 5_242_880,
        step_timeout_ms: 2_500,
        files: vec![ScripterFile { name: "notes/draft.txt".into(), size_bytes: 42 }],
        max_steps: 8,
    }));
}

#[test]
fn scripter_system_minimal() {
    insta::assert_snapshot!(render(&ScripterSystem {
        task: "Fetch https://api.example.com/weather?city=Paris and report the temperature in Celsius.".into(),
        tool_signatures: "await fetch(url: string, options?: object): Response\n".into(),
        request_timeout_ms: 15_000,
        max_response_bytes: 1_000_000,
        step_timeout_ms: 30_000,
        max_steps: 10,
        ..ScripterSystem::default()
    }));
}

#[test]
fn scripter_user_first_step() {
    insta::assert_snapshot!(render(&ScripterUser {
        step: 1,
        max_steps: 8,
        ..ScripterUser::default()
    }));
}

#[test]
fn scripter_user_later_step() {
    insta::assert_snapshot!(render(&ScripterUser {
        step: 8,
        max_steps: 8,
        omitted_steps: 4,
        history: vec![
            CodeActStep {
                step: 5,
                thought: "Fetch the note list first.".into(),
                code: "const res = await fetch('http://hooks.internal:8080/notes')\nconsole.log(res.status)".into(),
                output: "200".into(),
                error: None,
                notice: None,
            },
            CodeActStep {
                step: 6,
                thought: String::new(),
                code: "const notes = await res.json()\nnotes.length".into(),
                output: String::new(),
                error: Some("runtime error: FetchError: the response is not JSON".into()),
                notice: None,
            },
            CodeActStep {
                step: 7,
                error: Some("the model call failed: provider failed (http 503): busy".into()),
                ..CodeActStep::default()
            },
        ],
    }));
}

#[test]
fn text_manipulator_system() {
    insta::assert_snapshot!(render(&TextManipulatorSystem {
        instruction: "Reply to Sam that I am on my way".into(),
        plan: "1. Tap the message field\nTEXT_TASK: Put \"Hi Sam,\" on its own line at the beginning\n2. Tap Send".into(),
        task: "Put \"Hi Sam,\" on its own line at the beginning".into(),
        original: "On my way,\nsee you at 6.".into(),
        handoff_context: None,
        max_chars: 4000,
    }));
}

#[test]
fn text_manipulator_error_correction() {
    insta::assert_snapshot!(render(&TextManipulatorErrorCorrection {
        task: "Put \"Hi Sam,\" on its own line at the beginning".into(),
        original: "On my way".into(),
        code: "input_text(\"Hi Sam,\\n + ORIGINAL)".into(),
        error: "SyntaxError: unexpected end of string (line 1)".into(),
        max_chars: 4000,
    }));
}

#[test]
fn structured_output_first_attempt() {
    insta::assert_snapshot!(render(&StructuredOutputSystem {
        goal: "Check the weather in London".into(),
        final_answer: "It is 22 degrees Celsius and sunny in London.".into(),
        schema: weather_schema(),
        previous_output: None,
        errors: Vec::new(),
    }));
}

#[test]
fn structured_output_retry() {
    insta::assert_snapshot!(render(&StructuredOutputSystem {
        goal: "Check the weather in London".into(),
        final_answer: "It is 22 degrees Celsius and sunny in London.".into(),
        schema: weather_schema(),
        previous_output: Some("{\"temperature\": \"22°C\"}".into()),
        errors: vec![
            "/temperature: \"22°C\" is not of type \"integer\"".into(),
            "(root): \"condition\" is a required property".into(),
        ],
    }));
}
