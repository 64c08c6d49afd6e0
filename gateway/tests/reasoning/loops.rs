//! Loop recovery in reasoning mode: the executor's same action on an unchanged screen, three
//! subgoals in a row, asks the manager to plan again (a note in its next plan request, a mark
//! on the action in its history) and tells the user (a message event); the same loop again
//! ends the task naming it. The same tap on a screen that changes is no loop.
use droidmesh_proto::v1::{ActionResult, subgoal::Kind};

use super::*;
use crate::minds::{Act, Minds, plan};

/// The executor's result for `tap(index)` made on the screen `screen` (its fingerprint), as
/// ExecuteSubgoal reports it.
fn tapped(index: u32, screen: &str) -> ActionResult {
    let data = serde_json::json!({
        "action": "tap",
        "arguments": {"index": index},
        "screen": screen,
        "device": {"action_taken": format!("tapped element {index}")},
    });
    ActionResult {
        success: true,
        action_taken: format!("tapped element {index} (Storage)"),
        method_used: "executor".into(),
        confidence: 1.0,
        data: Some(droidmesh_proto::json_to_struct(&data)),
        ..ActionResult::default()
    }
}

fn messages(events: &[TaskEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Message(m)) => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_tap_on_an_unchanged_screen_asks_the_manager_to_plan_again_then_ends_the_task() {
    let Some(shared) = shared() else { return };
    let serial = shared.serials[31].clone();
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let req = |max_steps| TaskRequest {
        max_steps: Some(max_steps),
        ..reasoning("Open the storage settings", &serial)
    };
    // The manager plans the same tap forever; the executor taps a row that changes nothing.
    *minds.plan_fallback.lock().unwrap() = Some(plan(&[(Kind::Action, "Tap the Storage row")]));
    for _ in 0..20 {
        minds.act(Act::Result(tapped(27, "00000000000000aa")));
    }
    let events = run_to_end(&stack, req(20)).await;
    let summary = "the same tap on element 27 repeated 3 times on an unchanged screen";
    let plans = minds.plan_requests();
    // Plans 1-3 are made before the third tap; the fourth is asked to plan again.
    for (i, p) in plans.iter().take(3).enumerate() {
        assert!(p.notes.is_empty(), "plan {}: {:?}", i + 1, p.notes);
    }
    assert_eq!(
        plans[3].notes,
        [
            "Loop: the last 3 subgoals did the same action (tap on element 27) and the screen did not change. The plan is not working: plan again from the screen as it is now, a different way, or declare the request cannot be fulfilled."
        ]
    );
    // The action is marked in the history the manager keeps seeing.
    let marked = &plans[3].action_history[2];
    assert!(
        marked.feedback.ends_with(&format!(" (loop: {summary})")),
        "{}",
        marked.feedback
    );
    assert!(!plans[4].action_history[1].feedback.contains("loop"));
    assert_eq!(
        messages(&events),
        [format!(
            "loop: {summary}; the manager is asked to plan again"
        )]
    );
    // Three more after the note: the task ends, naming the loop, not at step 20.
    let done = completed(&events);
    assert!(!done.success);
    assert_eq!(done.steps, 6);
    assert_eq!(
        done.error,
        format!("stopped: {summary}, again after the manager was told")
    );
    assert_eq!(plans.len(), 6);

    // The same tap on a screen that changes with each tap (a switch that flips) is no loop.
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    *minds.plan_fallback.lock().unwrap() = Some(plan(&[(Kind::Action, "Tap the Wi-Fi switch")]));
    for i in 0..6 {
        let screen = if i % 2 == 0 {
            "00000000000000b0"
        } else {
            "00000000000000b1"
        };
        minds.act(Act::Result(tapped(3, screen)));
    }
    let events = run_to_end(&stack, req(6)).await;
    let done = completed(&events);
    assert_eq!(done.steps, 6);
    assert_eq!(
        done.error,
        "reached the step limit (6) before the goal was completed"
    );
    assert!(messages(&events).is_empty(), "{:?}", messages(&events));
    assert!(minds.plan_requests().iter().all(|p| p.notes.is_empty()));
}
