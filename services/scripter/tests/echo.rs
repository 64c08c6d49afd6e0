//! A model that copies its prompt back, over several scripter steps: what it copied never runs,
//! at any step, and never becomes the model's own words in the history it is shown.
use droidmesh_llm::testkit::MockResponse;
use serde_json::json;

use crate::common::*;

/// The reported case: step 1 posts a note; steps 2 and 3 echo "### Step 1" with its block.
/// Step 2 ignored the echo; step 3 ran it again (a second POST), because step 2's ignored
/// heading had gone into the history as the model's own thought.
#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_earlier_step_never_repeats_its_side_effects() {
    let hook = target(vec![]).await;
    hook.set_fallback(MockResponse::json(201, &json!({"stored": true})));
    let port = hook.addr().port();
    let code = format!(
        "const res = await fetch('http://127.0.0.1:{port}/hooks/notes', {{ method: 'POST', json: {{ text: 'Buy milk' }} }});\nconsole.log('posted', res.status)"
    );
    let echoed = format!("### Step 1\n```js\n{code}\n```");
    let mut cfg = config();
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let rig = rig_with(
        cfg,
        vec![
            reply(&format!("```js\n{code}\n```")),
            reply(&echoed),
            reply(&echoed),
            reply("The note was posted once."),
        ],
    )
    .await;
    let events = run(
        &rig,
        request("POST the note 'Buy milk' to the notes webhook."),
    )
    .await;
    let f = finished(&events);
    assert!(f.success, "{f:?}");
    assert_eq!(f.steps, 4);
    assert_eq!(hook.requests().len(), 1, "the echoed step posted again");
    let obs = observations(&events);
    assert_eq!(obs[0], ("posted 201".to_string(), None));
    for (output, error) in &obs[1..] {
        assert_eq!(output, "");
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("nothing ran")),
            "{error:?}"
        );
    }
    // The copied heading is not shown back as the model's thought.
    let (_, fourth) = prompts(&rig, 3);
    assert!(!fourth.contains("### Step 2\n### Step 1"), "{fourth}");
}

/// The history echoed with its heading and the model's own earlier thought under it: the
/// heading says it was copied, though the line just above the block is the model's own.
/// Before, the last line alone counted, and the echo posted the note a second time.
#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_step_with_its_own_thought_does_not_run_again() {
    let hook = target(vec![]).await;
    hook.set_fallback(MockResponse::json(201, &json!({"stored": true})));
    let port = hook.addr().port();
    let code = format!(
        "const res = await fetch('http://127.0.0.1:{port}/hooks/notes', {{ method: 'POST', json: {{ text: 'Buy milk' }} }});\nconsole.log('posted', res.status)"
    );
    let thought = "I post the note to the webhook.";
    let mut cfg = config();
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let rig = rig_with(
        cfg,
        vec![
            reply(&format!("{thought}\n```js\n{code}\n```")),
            reply(&format!("### Step 1\n{thought}\n```js\n{code}\n```")),
            reply("The note was posted once."),
        ],
    )
    .await;
    let events = run(
        &rig,
        request("POST the note 'Buy milk' to the notes webhook."),
    )
    .await;
    let f = finished(&events);
    assert!(f.success, "{f:?}");
    assert_eq!(f.steps, 3);
    assert_eq!(hook.requests().len(), 1, "the echoed step posted again");
    let (_, third) = prompts(&rig, 2);
    let step2 = &third[third.find("### Step 2").unwrap()..];
    assert!(
        step2.contains("Error: nothing ran: the code in the reply was copied"),
        "{step2}"
    );
    assert!(!step2.contains(thought), "{step2}");
}
