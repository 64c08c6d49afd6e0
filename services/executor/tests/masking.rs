//! The executor masks every secret its task may type in what it reads, also where the device
//! service was never told it is one (typed as plain text, or before a restart): the model, the
//! events and the screenshots never carry it; where screenshots cannot be masked for sure, the
//! run stops asking for them and says so once.
use std::collections::HashMap;

use droidmesh_executor::ExecutorConfig;
use droidmesh_proto::v1::{TypeTextRequest, agent_event};

use crate::codeact::{finished, run_with};
use crate::rig::{reply, rig_full};

const SECRET: &str = "4711-2342-zz";

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_the_device_service_never_saw_typed_is_masked_in_every_read() {
    let secrets = HashMap::from([("pin".to_owned(), SECRET.to_owned())]);
    let cfg = ExecutorConfig {
        step_timeout_ms: 5_000,
        ..ExecutorConfig::default()
    };
    let rig = rig_full(
        vec![
            reply("```js\nconsole.log(JSON.stringify(ui_state))\n```"),
            reply("```js\nconsole.log(ui_state.find(e => e.editable).text)\n```"),
            reply("```js\ncomplete(true, 'looked')\n```"),
        ],
        cfg,
        secrets,
    )
    .await;
    // Someone typed the PIN as plain text into a note before the task: the phone shows it.
    let (mut device, lease, field) = rig.open_notes().await;
    device
        .type_text(TypeTextRequest {
            lease: Some(lease),
            text: format!("door code {SECRET}"),
            index: Some(field),
            clear: false,
            sensitive: false,
        })
        .await
        .unwrap();
    let dump = rig.fleet.devices()[0].shell("uiautomator dump /dev/tty");
    assert!(String::from_utf8_lossy(&dump.stdout).contains(SECRET));

    let events = run_with(&rig, "Look at the note", 4, None, |s| {
        s.secret_ids = vec!["pin".into()];
        s.vision = true;
        s.stream_screenshots = true;
    })
    .await;
    assert!(finished(&events).success, "{:?}", finished(&events));
    let requests = rig.llm.requests();
    assert_eq!(requests.len(), 3);
    for (i, request) in requests.iter().enumerate() {
        let body = request.json().to_string();
        assert!(!body.contains(SECRET), "request {i} carries the secret");
    }
    let shown = format!("{events:?}");
    assert!(!shown.contains(SECRET), "an event carries the secret");
    assert!(
        shown.contains("door code \u{2022}"),
        "the note is not shown masked"
    );
    // Where it shows, nobody knows its field: no screenshot is sent, and the run says why once.
    let screenshots = events
        .iter()
        .filter(|e| matches!(e.kind, Some(agent_event::Kind::Screenshot(_))))
        .count();
    assert_eq!(screenshots, 0);
    let notes: Vec<&String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::Observation(o)) => Some(&o.notes),
            _ => None,
        })
        .flatten()
        .filter(|n| n.contains("screenshots are withheld for the rest of the task"))
        .collect();
    assert_eq!(notes.len(), 1, "{shown}");
}
