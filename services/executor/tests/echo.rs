//! A model that copies its prompt back, over several CodeAct steps: what it copied never runs,
//! at any step, and never becomes the model's own words in the history it is shown.
use droidmesh_proto::v1::{AgentEvent, agent_event};

use crate::codeact::{finished, run};
use crate::rig::{Rig, reply, rig};

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

/// The reported case: the system prompt's last example step, answered at every step for
/// another goal. Step 1 ignored it; step 2 ran it, because step 1's ignored heading had gone
/// into the history as the model's own thought.
#[tokio::test(flavor = "multi_thread")]
async fn the_example_s_complete_answered_at_every_step_never_ends_the_task() {
    let rig = rig(vec![]).await;
    rig.llm.set_fallback(reply(
        "Step 4 (the switch is checked):\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```",
    ));
    let events = run(&rig, "Turn off Bluetooth", 5).await;
    let done = finished(&events);
    assert!(!done.success, "{done:?}");
    assert_ne!(done.answer, "Wi-Fi is on.");
    assert_eq!(done.steps, 3, "three failed steps end the run: {done:?}");
    assert!(tools_run(&events).is_empty(), "{:?}", tools_run(&events));
    assert_eq!(setting(&rig, "bluetooth_on"), "1", "Bluetooth was touched");
    // The copied heading is not shown back as the model's thought.
    for i in 1..3 {
        let prompt = user_prompt(&rig, i);
        assert!(!prompt.contains("### Step 1\nStep 4"), "{prompt}");
        assert!(prompt.contains("Nothing ran"), "{prompt}");
    }
}

/// The example's `complete` under a lead-in of the model's own at every step: nothing says it
/// was copied but the code, and it would end the task with the example's answer. It never
/// runs, and the model is told why.
#[tokio::test(flavor = "multi_thread")]
async fn the_example_s_complete_with_a_fresh_lead_in_never_ends_the_task() {
    let rig = rig(vec![]).await;
    rig.llm.set_fallback(reply(
        "Bluetooth looks handled, so I finish.\n```js\ncomplete(true, \"Wi-Fi is on.\")\n```",
    ));
    let events = run(&rig, "Turn off Bluetooth", 5).await;
    let done = finished(&events);
    assert!(!done.success, "{done:?}");
    assert_eq!(done.steps, 3, "three failed steps end the run: {done:?}");
    assert!(
        done.answer.ends_with("nothing ran: the model's reply repeated the complete(...) of its prompt's example, which would have ended the task with the example's answer"),
        "{}",
        done.answer
    );
    assert!(tools_run(&events).is_empty(), "{:?}", tools_run(&events));
    assert_eq!(setting(&rig, "bluetooth_on"), "1");
    for i in 1..3 {
        let prompt = user_prompt(&rig, i);
        assert!(
            prompt.contains("Nothing ran: `complete(true, \"Wi-Fi is on.\")` is copied from the prompt's example"),
            "{prompt}"
        );
    }
}

const BLUETOOTH_TAP: &str =
    "const bt = ui_state.find(e => e.text === \"Bluetooth\")\ntap(bt.index)";

/// The history echoed with its heading, the model's own earlier thought and code under it:
/// the heading says it was copied, though the line just above the block is the model's own.
/// Before, the last line alone counted, and the echo tapped the switch back on.
#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_earlier_step_does_not_run_again() {
    let thought = "The Bluetooth switch is on; I turn it off.";
    let rig = rig(vec![
        reply("Bluetooth is in Settings.\n```js\nopen_app(\"Settings\")\n```"),
        reply(&format!("{thought}\n```js\n{BLUETOOTH_TAP}\n```")),
        reply(&format!(
            "### Step 2\n{thought}\n```js\n{BLUETOOTH_TAP}\n```"
        )),
        reply("Bluetooth is off now.\n```js\ncomplete(true, \"Bluetooth is off.\")\n```"),
    ])
    .await;
    let events = run(&rig, "Turn off Bluetooth", 6).await;
    let done = finished(&events);
    assert!(done.success, "{done:?}");
    assert_eq!((done.answer.as_str(), done.steps), ("Bluetooth is off.", 4));
    assert_eq!(tools_run(&events), ["open_app", "tap", "complete"]);
    assert_eq!(
        setting(&rig, "bluetooth_on"),
        "0",
        "the echo tapped it back on"
    );
    // Step 4 shows step 3 as nothing that ran, and why; not the copy as the model's words.
    let fourth = user_prompt(&rig, 3);
    let step3 = &fourth[fourth.find("### Step 3").unwrap()..fourth.find("## Phone").unwrap()];
    assert!(step3.contains("(no code ran)"), "{step3}");
    assert!(
        step3.contains("Nothing ran: the code in your reply was copied"),
        "{step3}"
    );
    assert!(!step3.contains(thought), "{step3}");
}
