//! A model that copies its prompt back, over several CodeAct steps, as a table of cases: what
//! it copied never runs, at any step, and never becomes the model's own words in the history
//! it is shown; what it wrote itself runs, a repeat of its own action included. Each case
//! checks what a user would: the task's outcome and answer, what ran on the phone (its tools
//! and the Bluetooth setting they change), and what the model reads about each step next.
use droidmesh_proto::v1::{AgentEvent, agent_event};

use crate::codeact::{finished, run};
use crate::rig::{Rig, reply, rig};

/// The system prompt's last example step, heading and block.
const EXAMPLE_END: &str =
    "Step 4 (the switch is checked):\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```";
/// What the model reads after a step whose only code was the example's `complete`.
const TOLD_EXAMPLE_END: &str = "Nothing ran: `complete(true, \"Wi-Fi is on.\")` is copied from the prompt's example, and an example's answer never ends a task.";
/// What the model reads after a step whose code was copied with its heading.
const TOLD_COPIED: &str =
    "Nothing ran: the code in your reply was copied from this prompt (1 block).";
const BLUETOOTH_TAP: &str =
    "const bt = ui_state.find(e => e.text === \"Bluetooth\")\ntap(bt.index)";
const OPEN_SETTINGS: &str = "Bluetooth is in Settings.\n```js\nopen_app(\"Settings\")\n```";
const TAP_THOUGHT: &str = "The Bluetooth switch is on; I tap it.";

fn tap_step() -> String {
    format!("{TAP_THOUGHT}\n```js\n{BLUETOOTH_TAP}\n```")
}

fn finish(answer: &str) -> String {
    format!("That is done.\n```js\ncomplete(true, \"{answer}\")\n```")
}

struct Case {
    name: &'static str,
    goal: &'static str,
    /// The model's replies, one a step; the last one is repeated for any later step.
    replies: Vec<String>,
    success: bool,
    /// The answer, or how the failure reason ends.
    answer: &'static str,
    steps: u32,
    /// The tools that ran on the phone, in order.
    tools: &'static [&'static str],
    /// `settings get global bluetooth_on` after the run.
    bluetooth: &'static str,
    /// Steps that ran nothing: the next prompt shows them as "(no code ran)", "Nothing ran".
    ran_nothing: &'static [u32],
    /// (step, what the next prompt shows with it).
    told: &'static [(u32, &'static str)],
    /// A line a copy brought, and the steps it was in: never shown with those steps as the
    /// model's words.
    copied: Option<(&'static str, &'static [u32])>,
}

/// What the prompt of a later step shows of step `step`.
fn section(prompt: &str, step: u32) -> &str {
    let head = format!("### Step {step}\n");
    let Some(at) = prompt.find(&head) else {
        panic!("no {head:?} in {prompt}");
    };
    let rest = &prompt[at + head.len()..];
    let end = ["\n### Step ", "\n## Phone"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The tools that ran and succeeded on the phone, in order.
fn tools_run(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::ToolResult(r))
                if r.result.as_ref().is_some_and(|r| r.success) =>
            {
                Some(r.tool.clone())
            }
            _ => None,
        })
        .collect()
}

/// A global setting of the rig's phone, as `settings get global` prints it.
fn setting(rig: &Rig, key: &str) -> String {
    let out = rig.fleet.devices()[0].shell(&format!("settings get global {key}"));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The user message of the model's `i`-th request.
fn user_prompt(rig: &Rig, i: usize) -> String {
    let body = rig.llm.requests()[i].json();
    match &body["messages"][1]["content"] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn check(case: &Case) {
    let name = case.name;
    let rig = rig(case.replies.iter().map(|r| reply(r)).collect()).await;
    if let Some(last) = case.replies.last() {
        rig.llm.set_fallback(reply(last));
    }
    let events = run(&rig, case.goal, 6).await;
    let done = finished(&events);
    assert_eq!(done.success, case.success, "{name}: {done:?}");
    let answer = match case.success {
        true => case.answer.to_owned(),
        false => format!("3 steps in a row failed; the last: {}", case.answer),
    };
    assert_eq!(done.answer, answer, "{name}");
    assert_eq!(done.steps, case.steps, "{name}: {done:?}");
    assert_eq!(tools_run(&events), case.tools, "{name}");
    assert_eq!(setting(&rig, "bluetooth_on"), case.bluetooth, "{name}");
    // What the model read about each step at the steps after it.
    for shown_at in 2..=case.steps {
        let prompt = user_prompt(&rig, shown_at as usize - 1);
        for step in 1..shown_at {
            let seen = section(&prompt, step);
            let nothing = case.ran_nothing.contains(&step);
            assert_eq!(
                seen.contains("(no code ran)") && seen.contains("Nothing ran"),
                nothing,
                "{name}: step {step} as shown at step {shown_at}:\n{seen}"
            );
            for (_, text) in case.told.iter().filter(|(s, _)| *s == step) {
                assert!(seen.contains(text), "{name}: step {step}:\n{seen}");
            }
            if let Some((line, _)) = case.copied.filter(|(_, s)| s.contains(&step)) {
                assert!(!seen.contains(line), "{name}: step {step}:\n{seen}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn echoes_over_several_steps_run_nothing_copied_and_everything_of_the_model_s_own() {
    let cases = [
        // The reported case: step 2 ran it, since step 1's heading had become the model's.
        Case {
            name: "the example's complete with its heading, every step",
            goal: "Turn off Bluetooth",
            replies: vec![EXAMPLE_END.into()],
            success: false,
            answer: "nothing ran: the model's reply repeated the complete(...) of its prompt's example, which would have ended the task with the example's answer",
            steps: 3,
            tools: &[],
            bluetooth: "1",
            ran_nothing: &[1, 2],
            told: &[(1, TOLD_EXAMPLE_END), (2, TOLD_EXAMPLE_END)],
            copied: Some(("Step 4 (the switch is checked):", &[1, 2])),
        },
        Case {
            name: "another example with its heading, every step",
            goal: "Turn off Bluetooth",
            replies: vec![
                "Step 2 (Settings; [4] is \"Network & internet\"):\n```js\ntap(4)\n```".into(),
            ],
            success: false,
            answer: "nothing ran: the model's reply only repeated 1 code block of its prompt",
            steps: 3,
            tools: &[],
            bluetooth: "1",
            ran_nothing: &[1, 2],
            told: &[(1, TOLD_COPIED), (2, TOLD_COPIED)],
            copied: Some(("Step 2 (Settings; [4] is \"Network & internet\"):", &[1, 2])),
        },
        Case {
            name: "the example's complete with a lead-in of the model's own, every step",
            goal: "Turn off Bluetooth",
            replies: vec![
                "Bluetooth looks handled, so I finish.\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```"
                    .into(),
            ],
            success: false,
            answer: "nothing ran: the model's reply repeated the complete(...) of its prompt's example, which would have ended the task with the example's answer",
            steps: 3,
            tools: &[],
            bluetooth: "1",
            ran_nothing: &[1, 2],
            told: &[(1, TOLD_EXAMPLE_END), (2, TOLD_EXAMPLE_END)],
            copied: None,
        },
        Case {
            name: "the history echoed under its ### Step heading, twice",
            goal: "Turn off Bluetooth",
            replies: vec![
                OPEN_SETTINGS.into(),
                tap_step(),
                format!("### Step 2\n{}", tap_step()),
                format!("### Step 2\n{}", tap_step()),
                finish("Bluetooth is off."),
            ],
            success: true,
            answer: "Bluetooth is off.",
            steps: 5,
            tools: &["open_app", "tap", "complete"],
            bluetooth: "0",
            ran_nothing: &[3, 4],
            told: &[(2, BLUETOOTH_TAP), (3, TOLD_COPIED), (4, TOLD_COPIED)],
            copied: Some((TAP_THOUGHT, &[3, 4])),
        },
        // The negative control: the same words and code again are the model's own.
        Case {
            name: "the model repeats its own action in its own words",
            goal: "Turn Bluetooth off and on again",
            replies: vec![
                OPEN_SETTINGS.into(),
                tap_step(),
                tap_step(),
                finish("Bluetooth was turned off and on."),
            ],
            success: true,
            answer: "Bluetooth was turned off and on.",
            steps: 4,
            tools: &["open_app", "tap", "tap", "complete"],
            bluetooth: "1",
            ran_nothing: &[],
            told: &[(2, BLUETOOTH_TAP), (3, TAP_THOUGHT), (3, BLUETOOTH_TAP)],
            copied: None,
        },
        Case {
            name: "a copied block, then a block of the model's own, twice",
            goal: "Turn off Bluetooth",
            replies: vec![
                OPEN_SETTINGS.into(),
                format!("{EXAMPLE_END}\n{}", tap_step()),
                format!("{EXAMPLE_END}\n{}", finish("Bluetooth is off.")),
            ],
            success: true,
            answer: "Bluetooth is off.",
            steps: 3,
            tools: &["open_app", "tap", "complete"],
            bluetooth: "0",
            ran_nothing: &[],
            told: &[
                (2, TAP_THOUGHT),
                (2, BLUETOOTH_TAP),
                (2, "Only one block of your reply ran (ignored 1 block copied from the prompt's example that would end the task with the example's answer)"),
            ],
            copied: Some(("Step 4 (the switch is checked):", &[2])),
        },
    ];
    for case in &cases {
        check(case).await;
    }
}
