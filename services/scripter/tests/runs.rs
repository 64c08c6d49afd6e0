//! Runs end to end: the webhook flow of the spec, variables across steps, how runs end.
use droidmesh_llm::testkit::MockResponse;
use droidmesh_proto::struct_to_json;
use droidmesh_proto::v1::{LlmOverride, agent_event};
use serde_json::json;
use tonic::Code;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_script_posts_json_to_a_webhook_and_the_answer_uses_the_reply() {
    let hook = target(vec![MockResponse::json(
        201,
        &json!({"id": "n-42", "stored": true}),
    )])
    .await;
    let port = hook.addr().port();
    let code = format!(
        "const res = await fetch('http://127.0.0.1:{port}/hooks/notes', {{ method: 'POST', json: {{ text: 'Buy milk', tags: ['home'] }} }});\nconst saved = await res.json();\nconsole.log(res.status, saved.id)"
    );
    let mut cfg = config();
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let rig = rig_with(
        cfg,
        vec![
            step(&code),
            reply("The webhook stored the note; its id is n-42."),
        ],
    )
    .await;
    let mut req = request(
        "POST the note 'Buy milk' (tag home) as JSON to the notes webhook and report its id.",
    );
    req.instruction = "Save my shopping note".into();
    let events = run(&rig, req).await;

    let got = hook.requests();
    assert_eq!(got.len(), 1, "the webhook is called exactly once");
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/hooks/notes");
    assert_eq!(got[0].header("content-type"), Some("application/json"));
    assert_eq!(got[0].json(), json!({"text": "Buy milk", "tags": ["home"]}));

    assert_eq!(observations(&events), vec![("201 n-42".to_string(), None)]);
    let (system, second) = prompts(&rig, 1);
    assert!(
        second.contains("201 n-42"),
        "the model saw the output: {second}"
    );
    assert!(system.contains("POST the note 'Buy milk'"));
    assert!(system.contains("Save my shopping note"));
    assert!(system.contains(&format!("except these hosts: 127.0.0.1:{port}")));
    assert!(system.contains("await fetch(url: string"), "{system}");
    assert!(!system.contains("__http_request"));

    let f = finished(&events);
    assert!(f.success);
    assert_eq!(f.agent, "scripter");
    assert_eq!(f.answer, "The webhook stored the note; its id is n-42.");
    assert_eq!(f.steps, 2);
    assert_eq!(f.usage.as_ref().unwrap().calls, 2);
    let r = f.result.as_ref().unwrap();
    assert!(r.success);
    assert_eq!(r.method_used, "scripter");
    assert!(r.error.is_none());
    assert!(
        r.action_taken.starts_with("script task done in 2 steps"),
        "{}",
        r.action_taken
    );
    let data = struct_to_json(r.data.as_ref().unwrap());
    assert_eq!(
        data["answer"],
        json!("The webhook stored the note; its id is n-42.")
    );
    assert_eq!(data["steps"], json!(2));
    assert_eq!(data["http_requests"], json!(1));
    assert!(r.duration_us > 0);

    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e.kind.as_ref().unwrap() {
            agent_event::Kind::Step(_) => "step",
            agent_event::Kind::Usage(_) => "usage",
            agent_event::Kind::Thought(_) => "thought",
            agent_event::Kind::Code(_) => "code",
            agent_event::Kind::Observation(_) => "observation",
            agent_event::Kind::Finished(_) => "finished",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "step",
            "usage",
            "thought",
            "code",
            "observation",
            "step",
            "usage",
            "finished"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn variables_from_one_step_are_there_in_the_next() {
    let api = target(vec![MockResponse::json(
        200,
        &json!({"city": "Paris", "temp_c": 21.5}),
    )])
    .await;
    let port = api.addr().port();
    let mut cfg = config();
    cfg.http.allow_hosts = vec!["127.0.0.1".into()];
    let rig = rig_with(
        cfg,
        vec![
            step(&format!(
                "const weather = await fetchJson('http://127.0.0.1:{port}/weather?city=' + handoff.city, {{ headers: {{ 'X-Api-Key': 'k-1' }} }});\nconsole.log(Object.keys(weather).join(','))"
            )),
            step("console.log('temperature', weather.temp_c)"),
            reply("It is 21.5 °C in Paris."),
        ],
    )
    .await;
    let mut req = request("Report the temperature in the city handed over.");
    req.handoff_context = Some(droidmesh_proto::json_to_struct(&json!({"city": "Paris"})));
    let events = run(&rig, req).await;
    let (system, _) = prompts(&rig, 0);
    assert!(system.contains("the global `handoff`"), "{system}");
    assert!(system.contains("\"city\": \"Paris\""), "{system}");
    let obs = observations(&events);
    assert_eq!(obs[0], ("city,temp_c".to_string(), None));
    assert_eq!(obs[1], ("temperature 21.5".to_string(), None));
    let got = api.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/weather?city=Paris");
    assert_eq!(got[0].header("x-api-key"), Some("k-1"));
    let f = finished(&events);
    assert!(f.success);
    assert_eq!(f.steps, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_starting_with_failed_is_a_failure() {
    let rig = rig(vec![
        step("console.log('trying')"),
        reply("FAILED: the service answered 503 three times."),
    ])
    .await;
    let events = run(&rig, request("Fetch the report.")).await;
    let f = finished(&events);
    assert!(!f.success);
    assert_eq!(f.answer, "the service answered 503 three times.");
    let r = f.result.as_ref().unwrap();
    assert!(!r.success);
    assert_eq!(
        r.error.as_deref(),
        Some("the service answered 503 three times.")
    );
    assert!(
        r.action_taken
            .starts_with("script task failed after 2 steps")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_step_budget_ends_a_run_that_never_answers() {
    let rig = rig(vec![
        step("let n = 1; console.log(n)"),
        step("n += 1; console.log(n)"),
        step("n += 1; console.log(n)"),
    ])
    .await;
    let mut req = request("Count forever.");
    req.max_steps = 2;
    let events = run(&rig, req).await;
    let f = finished(&events);
    assert!(!f.success);
    assert_eq!(f.steps, 2);
    assert!(
        f.answer.starts_with(
            "the step limit (2) was reached before the task was finished; the last step printed: 2"
        ),
        "{}",
        f.answer
    );
    assert_eq!(rig.llm.request_count(), 2);
    let (_, last) = prompts(&rig, 1);
    assert!(last.contains("This is step 2, your last."), "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn consecutive_failed_steps_end_the_run_and_a_success_resets_the_count() {
    let mut cfg = config();
    cfg.max_consecutive_failures = 2;
    let rig = rig_with(
        cfg,
        vec![
            step("throw new Error('first')"),
            step("console.log('fine')"),
            step("nope()"),
            reply("```python\nprint('hi')\n```"),
            reply("never asked"),
        ],
    )
    .await;
    let events = run(&rig, request("Do something.")).await;
    let obs = observations(&events);
    assert!(
        obs[0].1.as_deref().unwrap().contains("Error: first"),
        "{obs:?}"
    );
    assert_eq!(obs[1], ("fine".to_string(), None));
    assert!(
        obs[2].1.as_deref().unwrap().contains("ReferenceError"),
        "{obs:?}"
    );
    assert!(
        obs[3]
            .1
            .as_deref()
            .unwrap()
            .starts_with("only JavaScript runs here, and the reply held a python block")
    );
    let f = finished(&events);
    assert!(!f.success);
    assert_eq!(f.steps, 4);
    assert!(
        f.answer
            .starts_with("2 steps in a row failed; the last: only JavaScript runs"),
        "{}",
        f.answer
    );
    assert_eq!(rig.llm.request_count(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_refuses_the_key_ends_the_run_at_once() {
    let rig = rig(vec![MockResponse::error(401, "invalid api key")]).await;
    let events = run(&rig, request("Fetch the report.")).await;
    let f = finished(&events);
    assert!(!f.success);
    assert_eq!(f.steps, 1);
    assert!(
        f.answer
            .starts_with("the model cannot be used: provider refused the credentials"),
        "{}",
        f.answer
    );
    assert_eq!(rig.llm.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_before_anything_runs() {
    let rig = rig(vec![]).await;
    let client = rig.client.clone();
    let refuse = |req| {
        let mut client = client.clone();
        async move { client.run_script(req).await.map(|_| ()).unwrap_err() }
    };
    let e = refuse(request("   ")).await;
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("task is empty"), "{}", e.message());
    let mut no_id = request("Fetch it.");
    no_id.task_id = String::new();
    assert_eq!(refuse(no_id).await.code(), Code::InvalidArgument);
    let mut bad_model = request("Fetch it.");
    bad_model.llm = Some(LlmOverride {
        provider: "nowhere".into(),
        ..LlmOverride::default()
    });
    let e = refuse(bad_model).await;
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("llm override"), "{}", e.message());
    assert_eq!(rig.llm.request_count(), 0);
}
