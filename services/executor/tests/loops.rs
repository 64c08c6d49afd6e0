//! Loop recovery in a CodeAct run, against the model double: the same action on an unchanged
//! screen three times in a row is told to the model in its next prompt and to the user in the
//! step's observation; a model that keeps at it is stopped with the loop named in the reason,
//! long before its step budget. The same tap on a screen that changes with each tap is no loop.
//! In reasoning mode each subgoal's result names the screen it acted on, for the gateway.
use droidmesh_proto::v1::{AgentEvent, GetStateRequest, StartAppRequest, agent_event};

use crate::codeact::{finished, run};
use crate::rig::{Rig, reply, rig};

/// Opens Settings on the rig's phone; returns the index of the element that reads `text`.
async fn settings_element(rig: &Rig, text: &str) -> u32 {
    let (mut device, lease) = rig.lease().await;
    device
        .start_app(StartAppRequest {
            lease: Some(lease.clone()),
            app: Some(droidmesh_proto::v1::start_app_request::App::Package(
                "com.android.settings".into(),
            )),
            activity: String::new(),
        })
        .await
        .unwrap();
    let state = device
        .get_state(GetStateRequest {
            serial: lease.serial.clone(),
            ..GetStateRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    state
        .elements
        .iter()
        .find(|e| e.text == text)
        .unwrap_or_else(|| panic!("no element reads {text:?}"))
        .index
}

/// The user message of the model double's `i`th request.
fn user_prompt(rig: &Rig, i: usize) -> String {
    let body = rig.llm.requests()[i].json();
    body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Every note of the run's observation events, with the step it came with.
fn step_notes(events: &[AgentEvent]) -> Vec<(u32, String)> {
    let mut step = 0;
    let mut notes = Vec::new();
    for e in events {
        match &e.kind {
            Some(agent_event::Kind::Step(s)) => step = s.step,
            Some(agent_event::Kind::Observation(o)) => {
                notes.extend(o.notes.iter().map(|n| (step, n.clone())));
            }
            _ => {}
        }
    }
    notes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tap_repeated_on_an_unchanged_screen_is_told_to_the_model_then_ends_the_run() {
    let rig = rig(vec![]).await;
    // "Storage" is a row that opens nothing: a tap on it leaves the screen as it was.
    let storage = settings_element(&rig, "Storage").await;
    rig.llm.set_fallback(reply(&format!(
        "The storage row should open the storage settings.\n```js\ntap({storage})\n```"
    )));
    let events = run(&rig, "Open the storage settings", 20).await;

    // Three taps on one screen: the fourth prompt says so, the first three do not.
    let said = "the screen did not change";
    for i in 0..3 {
        let p = user_prompt(&rig, i);
        assert!(!p.contains(said), "prompt {} already warns:\n{p}", i + 1);
    }
    let fourth = user_prompt(&rig, 3);
    assert!(
        fourth.contains(&format!(
            "the same action 3 times in a row (tap on element {storage}) and {said}"
        )),
        "{fourth}"
    );
    // The user reads it with step 3's observation.
    let notes = step_notes(&events);
    let loop_notes: Vec<&(u32, String)> = notes
        .iter()
        .filter(|(_, n)| n.starts_with("loop:"))
        .collect();
    assert_eq!(loop_notes.len(), 1, "{notes:?}");
    assert_eq!(
        loop_notes[0],
        &(
            3,
            format!(
                "loop: the same tap on element {storage} repeated 3 times on an unchanged screen; the model is told to try something else"
            )
        )
    );

    // Three more after the note: the run ends there, naming the loop, not at step 20; the
    // last step's observation says so too.
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(done.steps, 6, "{}", done.answer);
    let reason = format!(
        "stopped: the same tap on element {storage} repeated 3 times on an unchanged screen, again after the model was told"
    );
    assert_eq!(done.answer, reason);
    assert!(notes.contains(&(6, reason)), "{notes:?}");
    assert_eq!(rig.llm.request_count(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_tap_on_a_screen_it_changes_is_not_a_loop() {
    let rig = rig(vec![]).await;
    // The Wi-Fi switch flips with every tap: each tap lands on a screen the last one changed.
    let wifi = settings_element(&rig, "Wi-Fi").await;
    rig.llm.set_fallback(reply(&format!(
        "Flip Wi-Fi once more.\n```js\ntap({wifi})\n```"
    )));
    let events = run(&rig, "Flip Wi-Fi", 6).await;
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(done.steps, 6);
    assert_eq!(
        done.answer,
        "reached the step limit (6) before the goal was completed"
    );
    for i in 0..6 {
        let p = user_prompt(&rig, i);
        assert!(!p.contains("did not change"), "prompt {}:\n{p}", i + 1);
    }
    let notes = step_notes(&events);
    assert!(
        notes.iter().all(|(_, n)| !n.starts_with("loop:")),
        "{notes:?}"
    );
    // Six taps flipped the switch six times: back where it started.
    let out = rig.fleet.devices()[0].shell("settings get global wifi_on");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subgoal_s_result_names_the_screen_it_acted_on_for_the_gateway_s_loop_guard() {
    let rig = rig(vec![]).await;
    let storage = settings_element(&rig, "Storage").await;
    let wifi = settings_element(&rig, "Wi-Fi").await;
    for index in [storage, storage, wifi, wifi] {
        rig.llm.push(reply(&format!(
            "### Thought\nTap it.\n\n### Action\n{{\"action\": \"tap\", \"index\": {index}}}\n\n### Description\nA tap."
        )));
    }
    let (_device, lease) = rig.lease().await;
    let mut screens = Vec::new();
    for _ in 0..4 {
        let result = rig
            .executor
            .clone()
            .execute_subgoal(droidmesh_proto::v1::ExecuteSubgoalRequest {
                task_id: "t-1".into(),
                instruction: "Open the storage settings".into(),
                subgoal: "Tap the row".into(),
                device: Some(droidmesh_proto::v1::DeviceBinding {
                    endpoint: String::new(),
                    lease: Some(lease.clone()),
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .result
            .unwrap();
        assert!(result.success, "{result:?}");
        let data = droidmesh_proto::struct_to_json(result.data.as_ref().unwrap());
        assert_eq!(data["action"], "tap");
        let screen = data["screen"].as_str().unwrap_or_default().to_owned();
        assert_eq!(screen.len(), 16, "{data}");
        assert!(screen.chars().all(|c| c.is_ascii_hexdigit()), "{screen}");
        screens.push(screen);
    }
    // Storage twice, then Wi-Fi, on one screen; the last Wi-Fi tap on the screen the first
    // flipped.
    assert_eq!(screens[0], screens[1]);
    assert_eq!(screens[1], screens[2]);
    assert_ne!(screens[2], screens[3]);
}
