//! Prompt and parser figures against their targets: CodeAct system and step prompts rendered,
//! a typical Manager reply and Executor reply parsed, code extracted, a screen fingerprinted
//! and a step taken by the loop guard. Run with
//! `cargo bench -p droidmesh-agent`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use droidmesh_agent::{
    budget::{TokenEstimator, newest_that_fit, step_bytes},
    loops::{Action, LoopGuard, ScreenPrint},
    parse::{extract_code, parse_executor, parse_manager, structured_output},
    prompts::{CodeActStep, CodeActSystem, CodeActUser, PhoneState, PromptSet, UiElement},
    tools::{device_tools, js_signatures},
};
use serde_json::json;

const MANAGER_REPLY: &str = r#"<thought>
Settings is open on "Network & internet". The Wi-Fi switch [2] is off, so the next step is to turn it on; after that I need the network name, which the Wi-Fi page shows once connected.
</thought>

<add_memory>
At step 3, Settings > Network & internet was open and Wi-Fi was off.
</add_memory>

<plan>
1. Tap the "Wi-Fi" switch to turn it on
2. Wait for the connection, then open the Wi-Fi page
3. Read the name of the connected network
<script>
Post the network name to https://webhook.site/abc123 as JSON {"ssid": "<name>"}
</script>
TEXT_TASK: Append the network name on a new line
4. DONE
</plan>"#;

const EXECUTOR_REPLY: &str = "### Thought ###\nThe subgoal asks to tap the Wi-Fi switch, which is element 2.\n\n### Action ###\n```json\n{\"action\": \"tap\", \"index\": 2,}\n```\n\n### Description ###\nTurning Wi-Fi on.";

const CODEACT_REPLY: &str = "The switch is off; I'll turn it on and check.\n```js\nconst wifi = ui_state.find(e => e.text === \"Wi-Fi\")\nif (wifi && !wifi.checked) tap(wifi.index)\nconsole.log(wifi)\n```";

fn screen(n: u32) -> Vec<UiElement> {
    (0..n)
        .map(|i| UiElement {
            index: i,
            depth: i % 4,
            class_name: "android.widget.TextView".into(),
            text: format!("Item number {i}"),
            resource_id: format!("com.example:id/item_{i}"),
            bounds: [0, i as i32 * 100, 1080, i as i32 * 100 + 90],
            clickable: i % 2 == 0,
            ..UiElement::default()
        })
        .collect()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(iterations: usize, mut f: impl FnMut() -> T) -> Duration {
    for _ in 0..iterations / 10 {
        black_box(f());
    }
    median(
        (0..iterations)
            .map(|_| {
                let start = Instant::now();
                black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

fn report(name: &str, took: Duration, target: Option<Duration>) {
    let (target, verdict) = match target {
        Some(t) if took <= t => (format!("{t:?}"), "ok"),
        Some(t) => (format!("{t:?}"), "OVER TARGET"),
        None => ("-".to_owned(), ""),
    };
    println!(
        "{name:<48} {:>12}   target {target:<8} {verdict}",
        format!("{took:?}")
    );
}

fn main() {
    let set = PromptSet::embedded().unwrap();
    let system = CodeActSystem {
        tool_signatures: js_signatures(device_tools()),
        custom_tool_signatures: String::new(),
        vision: true,
        secret_ids: vec!["mail_password".into()],
        app_card: Some("Wi-Fi lives under Network & internet.".into()),
        output_schema: None,
        max_steps: 30,
    };
    let rendered = set.render(&system).unwrap();
    let user = CodeActUser {
        goal: "Turn Wi-Fi on and tell me the network name".into(),
        step: 6,
        max_steps: 30,
        now: Some("2025-01-15 10:30".into()),
        user_messages: Vec::new(),
        memory: vec!["Settings opened".into()],
        history: (1..=5)
            .map(|step| CodeActStep {
                step,
                thought: "Looking for the switch.".into(),
                code: "tap(3)\nconsole.log(ui_state.length)".into(),
                output: "tapped 3\n42".into(),
                error: None,
                notice: None,
            })
            .collect(),
        omitted_steps: 0,
        phone: PhoneState {
            package: "com.android.settings".into(),
            ..PhoneState::default()
        },
        ui_state: screen(60).into(),
        screenshot_attached: true,
        app_cards: Some(
            "### com.android.settings\n# Settings\n- Wi-Fi is the first switch.".into(),
        ),
    };
    let schema =
        json!({"type": "object", "properties": {"ssid": {"type": "string"}}, "required": ["ssid"]});

    println!(
        "prompt sizes: codeact system {} bytes, codeact step (60 elements, 5 steps) {} bytes\n",
        rendered.len(),
        set.render(&user).unwrap().len()
    );
    report(
        "load + check all templates (PromptSet::embedded)",
        time(200, || PromptSet::embedded().unwrap()),
        None,
    );
    report(
        "render codeact system prompt",
        time(2000, || set.render(&system).unwrap()),
        Some(Duration::from_millis(1)),
    );
    report(
        "js_signatures + render codeact system prompt",
        time(2000, || {
            let system = CodeActSystem {
                tool_signatures: js_signatures(device_tools()),
                ..system.clone()
            };
            set.render(&system).unwrap()
        }),
        Some(Duration::from_millis(1)),
    );
    report(
        "render codeact step prompt (60 elements)",
        time(2000, || set.render(&user).unwrap()),
        Some(Duration::from_millis(2)),
    );
    report(
        "  of which the step's context made template values",
        time(2000, || {
            minijinja::Value::from(minijinja::value::Serde(&user))
        }),
        None,
    );
    report(
        "parse typical manager reply",
        time(5000, || parse_manager(MANAGER_REPLY).unwrap()),
        Some(Duration::from_micros(100)),
    );
    report(
        "parse typical executor reply",
        time(5000, || parse_executor(EXECUTOR_REPLY).unwrap()),
        Some(Duration::from_micros(100)),
    );
    report(
        "extract code from a codeact reply",
        time(5000, || extract_code(CODEACT_REPLY)),
        Some(Duration::from_micros(100)),
    );
    // The per-step budget accounting of CodeAct: the bytes of the steps shown, then the
    // newest steps that fit (a 6k-token history: 32 steps of about 190 tokens).
    let history: Vec<CodeActStep> = (1..=32)
        .map(|step| CodeActStep {
            step,
            thought: "Looking for the switch; the list may need scrolling. ".repeat(8),
            code: "swipe(540, 1800, 540, 600)\nconsole.log(ui_state.length)".into(),
            output: "42".into(),
            error: Some("no element with index 9 on this screen".into()),
            notice: None,
        })
        .collect();
    let estimator = TokenEstimator::default();
    let total: usize = history.iter().map(step_bytes).sum();
    println!(
        "history for the budget figure: {} steps, {} bytes, ~{} tokens",
        history.len(),
        total,
        estimator.tokens(total)
    );
    report(
        "budget accounting per step (6k-token history)",
        time(20_000, || {
            let shown: usize = history.iter().map(step_bytes).sum();
            (shown, newest_that_fit(&history, 4_000, &estimator))
        }),
        Some(Duration::from_micros(100)),
    );
    // Loop detection, once per step: the screen's fingerprint, then the step's actions.
    let elements = screen(60);
    let phone = PhoneState::default();
    report(
        "screen fingerprint (60 elements)",
        time(20_000, || ScreenPrint::of(&elements, &phone)),
        Some(Duration::from_micros(100)),
    );
    let print = ScreenPrint::of(&elements, &phone);
    let actions = [
        Action::new(droidmesh_agent::tools::Tool::Tap, &[json!(3)]),
        Action::new(
            droidmesh_agent::tools::Tool::TypeText,
            &[json!("hello"), json!(5)],
        ),
    ];
    let mut guard = LoopGuard::new(3);
    report(
        "loop guard takes a step of two actions",
        time(20_000, || guard.record(print, &actions)),
        Some(Duration::from_micros(100)),
    );
    report(
        "structured output (compile schema + extract)",
        time(500, || {
            structured_output("Result: {\"ssid\": \"Home\"}", &schema).unwrap()
        }),
        None,
    );
}
