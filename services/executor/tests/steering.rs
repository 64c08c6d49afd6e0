//! Steering a CodeAct run through its gRPC stream, as the gateway does in direct mode: what the
//! user sends while the run waits for a person reaches the next step, and what a run keeps for
//! its prompts (notes, memory) stays within the caps of the steering contract however long it
//! runs.
use std::time::Duration;

use droidmesh_agent::steer::{MEMORY_KEPT, MEMORY_NOTE_CHARS};
use droidmesh_executor::ExecutorConfig;
use droidmesh_proto::v1::{
    AgentEvent, CodeActInput, CodeActStart, DeviceBinding, agent_event, code_act_input,
};
use tokio_stream::StreamExt;

use crate::codeact::finished;
use crate::rig::{Rig, reply, rig, rig_with};

/// Starts a CodeAct run on the rig's leased device; returns the input side and the events.
pub(crate) async fn start(
    rig: &Rig,
    goal: &str,
    max_steps: u32,
) -> (
    tokio::sync::mpsc::Sender<CodeActInput>,
    tonic::Streaming<AgentEvent>,
) {
    let (_device, lease) = rig.lease().await;
    let start = CodeActStart {
        task_id: "t-steer".into(),
        goal: goal.into(),
        device: Some(DeviceBinding {
            endpoint: rig.device_ep.clone(),
            lease: Some(lease),
        }),
        max_steps,
        ..CodeActStart::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(input(code_act_input::Kind::Start(start)))
        .await
        .unwrap();
    let mut exec = rig.executor.clone();
    let stream = exec
        .run_code_act(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (tx, stream)
}

pub(crate) fn input(kind: code_act_input::Kind) -> CodeActInput {
    CodeActInput { kind: Some(kind) }
}

/// The events until the run's `finished`, within `within`.
pub(crate) async fn until_finished(
    stream: &mut tonic::Streaming<AgentEvent>,
    within: Duration,
) -> Vec<AgentEvent> {
    let deadline = tokio::time::Instant::now() + within;
    let mut events = Vec::new();
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("the run did not finish within {within:?}"))
            .expect("the stream ended before `finished`")
            .unwrap();
        let done = matches!(ev.kind, Some(agent_event::Kind::Finished(_)));
        events.push(ev);
        if done {
            return events;
        }
    }
}

/// The user message of the model double's `i`th request.
fn user_prompt(rig: &Rig, i: usize) -> String {
    let body = rig.llm.requests()[i].json();
    body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The lines of a prompt's section (`## heading` up to the next heading), without their `- `.
fn section(prompt: &str, heading: &str) -> Vec<String> {
    let mut lines = prompt.lines().skip_while(|l| *l != heading).skip(1);
    let mut out = Vec::new();
    for line in lines.by_ref() {
        if line.starts_with("## ") {
            break;
        }
        if let Some(item) = line.strip_prefix("- ") {
            out.push(item.to_owned());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn notes_and_a_new_goal_sent_while_the_run_waits_for_a_person_reach_the_next_step() {
    let rig = rig(vec![
        reply("```js\nrequest_human_help('the app asks for a login code')\n```"),
        reply("```js\ncomplete(true, 'done')\n```"),
    ])
    .await;
    let (tx, mut stream) = start(&rig, "Log in to the bank app", 5).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("no request for help within 60 s")
            .unwrap()
            .unwrap();
        if matches!(ev.kind, Some(agent_event::Kind::HumanHelp(_))) {
            break;
        }
    }
    // While the run waits: a note, a new goal, then the reply that ends the wait.
    for kind in [
        code_act_input::Kind::UserMessage("use the work account, not the personal one".into()),
        code_act_input::Kind::NewGoal("Log in to the bank app and read the balance".into()),
        code_act_input::Kind::HumanReply("the code is 4711".into()),
    ] {
        tx.send(input(kind)).await.unwrap();
    }
    let events = until_finished(&mut stream, Duration::from_secs(60)).await;
    let done = finished(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(rig.llm.request_count(), 2);
    let second = user_prompt(&rig, 1);
    let goal = second
        .lines()
        .skip_while(|l| *l != "## Goal")
        .nth(1)
        .unwrap_or_default();
    assert_eq!(
        goal, "Log in to the bank app and read the balance",
        "{second}"
    );
    let messages = section(&second, "## Messages from the user");
    assert_eq!(
        messages,
        [
            "use the work account, not the personal one",
            "The user changed the goal to: Log in to the bank app and read the balance",
            "A human answered your request for help: the code is 4711",
        ],
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn remembered_notes_stay_within_their_caps_over_a_thousand_steps() {
    const STEPS: u32 = 1_000;
    // Every step remembers one note, every hundredth a long one; the run never completes.
    let rig = rig_with(
        vec![],
        ExecutorConfig {
            step_timeout_ms: 5_000,
            ..ExecutorConfig::default()
        },
    )
    .await;
    rig.llm.set_fallback(reply(
        "```js\nglobalThis.n = (globalThis.n || 0) + 1;\nremember('note ' + n + (n % 100 == 50 ? ' ' + 'x'.repeat(1500) : ''));\n```",
    ));
    let (_tx, mut stream) = start(&rig, "Keep notes", STEPS).await;
    // Bounded, with room for a slow machine: each step is a loopback model call and a device
    // read.
    let events = until_finished(&mut stream, Duration::from_secs(900)).await;
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(done.steps, STEPS, "{}", done.answer);
    assert!(done.answer.contains("step limit (1000)"), "{}", done.answer);
    assert_eq!(rig.llm.request_count(), STEPS as usize);
    // The last prompt shows the newest notes (those of steps 950..=999), each cut to its cap.
    let last = user_prompt(&rig, STEPS as usize - 1);
    let notes = section(&last, "## Your notes");
    assert_eq!(notes.len(), MEMORY_KEPT, "{last}");
    let first_kept = STEPS as usize - MEMORY_KEPT;
    for (i, note) in notes.iter().enumerate() {
        let n = first_kept + i;
        assert!(note.starts_with(&format!("note {n}")), "note {i}: {note}");
        assert!(
            note.chars().count() <= MEMORY_NOTE_CHARS + 1,
            "note {n} has {} characters",
            note.chars().count()
        );
    }
    let long = &notes[0];
    assert!(long.ends_with("x…"), "{long}");
    // No prompt ever showed more than the cap.
    let most = rig
        .llm
        .requests()
        .iter()
        .map(|r| {
            r.json()["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .map(|p| section(&p, "## Your notes").len())
        .max();
    assert_eq!(most, Some(MEMORY_KEPT));
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_beyond_the_kept_history_are_still_counted_as_not_shown() {
    // More steps than the run keeps (the contract's 50): each prompt shows the newest 8 and
    // says how many came before them.
    const STEPS: u32 = 60;
    let rig = rig(vec![]).await;
    rig.llm.set_fallback(reply(
        "```js\nglobalThis.n = (globalThis.n || 0) + 1;\nconsole.log('step ' + n)\n```",
    ));
    let (_tx, mut stream) = start(&rig, "Keep going", STEPS).await;
    let events = until_finished(&mut stream, Duration::from_secs(300)).await;
    assert_eq!(finished(&events).steps, STEPS);
    let last = user_prompt(&rig, STEPS as usize - 1);
    assert!(
        last.contains("(51 earlier steps are not shown; your notes above are kept.)"),
        "{last}"
    );
    let shown: Vec<&str> = last
        .lines()
        .filter(|l| l.starts_with("### Step "))
        .collect();
    assert_eq!(shown.first(), Some(&"### Step 52"), "{last}");
    assert_eq!(shown.len(), 8, "{last}");
    assert!(last.contains("Output:\nstep 59"), "{last}");
}
