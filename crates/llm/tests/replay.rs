//! Replay cassettes (in order, by digest, exhausted, labelled) and recording (refused in CI;
//! a recording replays to the same answers).
use crate::support::{KEY, KEY_VAR, MODEL, client, config, hello, provider};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{
    Cassette, ChatModel, ChatRequest, LlmClient, LlmConfig, LlmError, Message, ProfileConfig,
    ProviderConfig, RecordingModel, ReplayModel, WireFormat, request_digest,
};
use std::sync::Arc;

const TWO: &str = r#"{
  "provider_label": "demo",
  "interactions": [
    {"response": {"text": "first", "usage": {"input_tokens": 10, "output_tokens": 2}, "model": "gpt-recorded", "finish_reason": "stop"}},
    {"response": {"text": "second"}}
  ]
}"#;

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::user(text)])
}

#[tokio::test]
async fn plays_in_order_then_runs_out() {
    let model = ReplayModel::new(Cassette::from_json(TWO).unwrap());
    assert_eq!(model.remaining(), 2);
    let a = model.chat(ask("anything")).await.unwrap();
    assert_eq!(
        (a.text.as_str(), a.model.as_str()),
        ("first", "gpt-recorded")
    );
    assert_eq!((a.usage.input_tokens, a.usage.output_tokens), (10, 2));
    assert!(a.replay);
    assert_eq!(a.provider, "replay:demo");
    let b = model.chat(ask("something else")).await.unwrap();
    assert_eq!(b.text, "second");
    assert_eq!(b.finish_reason, "stop", "finish_reason defaults to stop");
    let err = model.chat(ask("one more")).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::ReplayExhausted {
            label: "demo".into(),
            played: 2
        }
    );
    assert_eq!(
        err.to_string(),
        "replay cassette `demo` is exhausted: all 2 recorded interactions were played"
    );
}

#[tokio::test]
async fn digests_pair_answers_with_their_prompts() {
    let mut c = Cassette::from_json(r#"{"provider_label": "d", "interactions": []}"#).unwrap();
    for (q, a) in [("open settings", "A"), ("turn on wifi", "B")] {
        c.interactions.push(droidmesh_llm::Interaction {
            request_digest: Some(request_digest(&ask(q))),
            agent: None,
            response: Some(droidmesh_llm::RecordedResponse::text(a)),
            error: None,
        });
    }
    let model = ReplayModel::new(c);
    // Out of order: each prompt still gets its own answer.
    assert_eq!(model.play(&ask("turn on wifi"), "m").unwrap().text, "B");
    let a = model.play(&ask("open settings"), "m").unwrap();
    assert_eq!(
        (a.text.as_str(), a.model.as_str()),
        ("A", "m"),
        "empty model = requested"
    );
    assert!(model.play(&ask("open settings"), "m").is_err());
}

#[tokio::test]
async fn each_agent_plays_its_own_interactions_from_one_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reasoning.json");
    std::fs::write(
        &path,
        r#"{"provider_label": "two-agents", "interactions": [
            {"agent": "manager", "response": {"text": "plan 1"}},
            {"agent": "executor", "response": {"text": "act 1"}},
            {"agent": "manager", "response": {"text": "plan 2"}},
            {"response": {"text": "anyone"}}
        ]}"#,
    )
    .unwrap();
    let mut c = LlmConfig::defaults();
    c.providers
        .insert("tape".into(), ProviderConfig::replay("tape", &path));
    c.profiles
        .insert("default".into(), ProfileConfig::new("tape", ""));
    // Two services, each with its own client (and replay model) over the same file.
    let manager = LlmClient::from_config_with_env(&c, |_| None).unwrap();
    let executor = LlmClient::from_config_with_env(&c, |_| None).unwrap();
    let text = |r: droidmesh_llm::Result<droidmesh_llm::ChatResponse>| r.unwrap().text;
    assert_eq!(text(executor.chat("executor", hello()).await), "act 1");
    assert_eq!(text(manager.chat("manager", hello()).await), "plan 1");
    // A task's override keeps the agent's name, so it still plays the agent's answers.
    let ov = droidmesh_llm::ModelOverride {
        max_tokens: Some(10),
        ..Default::default()
    };
    let target = manager.target_for("manager", Some(&ov)).unwrap();
    assert_eq!(text(manager.chat(target, hello()).await), "plan 2");
    assert_eq!(text(manager.chat("manager", hello()).await), "anyone");
    assert!(manager.chat("manager", hello()).await.is_err());
    // The executor's model never played the manager's answers.
    assert_eq!(text(executor.chat("executor", hello()).await), "anyone");
}

#[tokio::test]
async fn unmatched_prompt_falls_back_to_order() {
    let model = ReplayModel::new(Cassette::from_json(TWO).unwrap());
    let mut c = Cassette::new("x");
    c.push(
        &ask("recorded prompt"),
        &model.play(&ask("q"), "m").unwrap(),
    );
    let replay = ReplayModel::new(c);
    assert_eq!(
        replay.play(&ask("a drifted prompt"), "m").unwrap().text,
        "first"
    );
}

#[tokio::test]
async fn replay_provider_from_config_is_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.json");
    std::fs::write(&path, TWO).unwrap();
    let mut c = LlmConfig::defaults();
    c.providers
        .insert("tape".into(), ProviderConfig::replay("tape", &path));
    c.profiles
        .insert("default".into(), ProfileConfig::new("tape", ""));
    let client = LlmClient::from_config_with_env(&c, |_| None).unwrap();
    let bound = client.bind("executor").unwrap();
    assert_eq!(bound.provider(), "replay:demo");
    let r = client.chat("executor", hello()).await.unwrap();
    assert!(r.replay);
    assert_eq!(
        (r.provider.as_str(), r.text.as_str()),
        ("replay:demo", "first")
    );
    // Clones share the cassette position.
    let r = client.clone().chat("manager", hello()).await.unwrap();
    assert_eq!(r.text, "second");
    assert!(matches!(
        client.chat("manager", hello()).await,
        Err(LlmError::ReplayExhausted { .. })
    ));
}

#[test]
fn cassette_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let err = Cassette::load(&missing).unwrap_err();
    assert!(
        matches!(&err, LlmError::Cassette(m) if m.contains("nope.json")),
        "{err}"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"interactions\": 3}").unwrap();
    let err = Cassette::load(&bad).unwrap_err();
    assert!(
        err.to_string().contains("bad.json") && err.to_string().contains("expected"),
        "{err}"
    );
    // A replay provider whose cassette is missing fails the client build.
    let mut c = LlmConfig::defaults();
    c.providers
        .insert("tape".into(), ProviderConfig::replay("tape", &missing));
    assert!(matches!(
        LlmClient::from_config_with_env(&c, |_| None),
        Err(LlmError::Cassette(_))
    ));
}

#[test]
fn cassette_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let c = Cassette::from_json(TWO).unwrap();
    c.save(&path).unwrap();
    assert_eq!(Cassette::load(&path).unwrap(), c);
}

#[tokio::test]
async fn recording_is_refused_in_ci() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.json");
    let inner: Arc<dyn ChatModel> = Arc::new(ReplayModel::new(Cassette::from_json(TWO).unwrap()));
    let err = RecordingModel::with_ci(inner, &path, "openai", Some("true"))
        .err()
        .unwrap();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("because CI is set")),
        "{err}"
    );
    assert!(!path.exists(), "nothing written");

    // The same through config: `record_to` with CI set stops the client build.
    let server = MockLlmServer::start([]).await.unwrap();
    let mut p = provider(WireFormat::Openai, &server);
    p.record_to = Some(path.clone());
    let env = |name: &str| match name {
        "CI" => Some("1".to_owned()),
        KEY_VAR => Some(KEY.to_owned()),
        _ => None,
    };
    let err = LlmClient::from_config_with_env(&config(p), env).unwrap_err();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("CI")),
        "{err}"
    );
}

#[tokio::test]
async fn a_recording_replays_to_the_same_answers() {
    let server = MockLlmServer::start([
        MockResponse::success(WireFormat::Openai, "step one", "gpt-live", 100, 10),
        MockResponse::success(WireFormat::Openai, "step two", "gpt-live", 120, 12),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.json");
    let live = client(&config(provider(WireFormat::Openai, &server)))
        .model("executor")
        .unwrap();
    let recorder = RecordingModel::with_ci(live, &path, "openai", None).unwrap();
    let r1 = recorder.chat(ask("first prompt")).await.unwrap();
    let r2 = recorder.chat(ask("second prompt")).await.unwrap();
    assert!(!r1.replay && !r2.replay);

    let cassette = Cassette::load(&path).unwrap();
    assert_eq!(cassette.provider_label, "openai");
    assert_eq!(cassette.interactions.len(), 2);
    assert_eq!(
        cassette.interactions[0].request_digest.as_deref(),
        Some(request_digest(&ask("first prompt")).as_str())
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("first prompt"),
        "cassettes keep digests, not prompts"
    );

    let replay = ReplayModel::load(&path).unwrap();
    let p1 = replay.chat(ask("first prompt")).await.unwrap();
    let p2 = replay.chat(ask("second prompt")).await.unwrap();
    for (live, played) in [(&r1, &p1), (&r2, &p2)] {
        assert_eq!(played.text, live.text);
        assert_eq!(played.usage, live.usage);
        assert_eq!(played.model, "gpt-live");
        assert_eq!(played.finish_reason, live.finish_reason);
        assert_eq!(played.provider, "replay:openai");
    }
}

#[tokio::test]
async fn record_to_in_config_records_every_call() {
    let server =
        MockLlmServer::start([MockResponse::success(WireFormat::Openai, "hi", MODEL, 3, 1)])
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.json");
    let mut p = provider(WireFormat::Openai, &server);
    p.record_to = Some(path.clone());
    let client = client(&config(p));
    assert_eq!(
        Cassette::load(&path).unwrap().interactions.len(),
        0,
        "created at build"
    );
    client.chat("executor", hello()).await.unwrap();
    let c = Cassette::load(&path).unwrap();
    assert_eq!(
        (c.provider_label.as_str(), c.interactions.len()),
        ("mockai", 1)
    );
    assert_eq!(c.interactions[0].response.as_ref().unwrap().text, "hi");
}

#[tokio::test]
async fn two_clients_recording_to_one_file_share_the_cassette() {
    // The executor and the manager of an embedded mesh each build a client from the same
    // config: their answers must land in one cassette, not overwrite each other.
    let server = MockLlmServer::start([
        MockResponse::success(WireFormat::Openai, "from the executor", MODEL, 3, 1),
        MockResponse::success(WireFormat::Openai, "from the manager", MODEL, 3, 1),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.json");
    let mut p = provider(WireFormat::Openai, &server);
    p.record_to = Some(path.clone());
    let executor = client(&config(p.clone()));
    let manager = client(&config(p));
    executor.chat("executor", hello()).await.unwrap();
    manager.chat("manager", hello()).await.unwrap();
    let texts: Vec<(String, Option<String>)> = Cassette::load(&path)
        .unwrap()
        .interactions
        .into_iter()
        .map(|i| (i.response.unwrap().text, i.agent))
        .collect();
    // Each answer is labelled with the agent that asked, so a replay gives it back to it.
    assert_eq!(
        texts,
        [
            ("from the executor".to_owned(), Some("executor".to_owned())),
            ("from the manager".to_owned(), Some("manager".to_owned()))
        ]
    );

    // Once every client is gone, recording to the path again starts a fresh cassette.
    drop((executor, manager));
    let server = MockLlmServer::start([MockResponse::success(
        WireFormat::Openai,
        "new",
        MODEL,
        3,
        1,
    )])
    .await
    .unwrap();
    let mut p = provider(WireFormat::Openai, &server);
    p.record_to = Some(path.clone());
    let again = client(&config(p));
    again.chat("executor", hello()).await.unwrap();
    assert_eq!(Cassette::load(&path).unwrap().interactions.len(), 1);
}

/// What a caller sees of one call, to compare a live run with its replay.
fn seen(r: &droidmesh_llm::Result<droidmesh_llm::ChatResponse>) -> String {
    match r {
        Ok(resp) => format!(
            "ok {:?} {} attempts, {} ms, {} ms in all",
            resp.text,
            resp.attempts,
            resp.latency.as_millis(),
            resp.elapsed.as_millis()
        ),
        Err(e) => format!("err {} {}: {e}", e.kind(), e.attempts()),
    }
}

#[tokio::test]
async fn a_recorded_failure_replays_as_the_same_failure() {
    let ok = |t: &str| MockResponse::success(WireFormat::Openai, t, "gpt-live", 10, 2);
    let busy = || MockResponse::error(503, "overloaded");
    // Call 2 fails after its three attempts; call 4 is refused as too long; call 5 times out.
    let server = MockLlmServer::start([
        ok("one"),
        busy(),
        busy(),
        busy(),
        ok("three"),
        MockResponse::json(
            400,
            &serde_json::json!({"error": {"code": 400, "type": "exceed_context_size_error",
                "message": "the request exceeds the available context size, try increasing it",
                "n_prompt_tokens": 9000, "n_ctx": 8192}}),
        ),
        ok("late").delay(std::time::Duration::from_secs(3)),
        ok("six"),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let mut p = provider(WireFormat::Openai, &server);
    p.record_to = Some(path.clone());
    p.timeout = std::time::Duration::from_millis(300);
    let live = client(&config(p));
    let prompts = ["one", "two", "three", "four", "five", "six"];
    let mut live_seen = Vec::new();
    for q in prompts {
        live_seen.push(seen(&live.chat("codeact", ask(q)).await));
    }
    assert!(
        live_seen[1]
            .starts_with("err server 3: provider failed (http 503): overloaded (3 attempts, "),
        "{live_seen:?}"
    );
    assert!(
        live_seen[3].starts_with("err context_overflow 1:"),
        "{live_seen:?}"
    );
    assert!(
        live_seen[4].starts_with("err timeout 1: the model did not answer"),
        "{live_seen:?}"
    );
    let cassette = Cassette::load(&path).unwrap();
    assert_eq!(cassette.interactions.len(), 6, "failures are recorded too");
    let e = cassette.interactions[1].error.as_ref().unwrap();
    assert_eq!(
        (e.kind.as_str(), e.attempts, e.status),
        ("server", 3, Some(503))
    );

    // Played back with the provider gone: the same answers and the same failures, in order.
    drop(server);
    let mut c = LlmConfig::defaults();
    c.providers
        .insert("tape".into(), ProviderConfig::replay("tape", &path));
    c.profiles
        .insert("default".into(), ProfileConfig::new("tape", ""));
    let replay = LlmClient::from_config_with_env(&c, |_| None).unwrap();
    let mut replay_seen = Vec::new();
    for q in prompts {
        replay_seen.push(seen(&replay.chat("codeact", ask(q)).await));
    }
    assert_eq!(replay_seen, live_seen);
}

#[test]
fn an_interaction_needs_an_answer_or_a_failure_and_a_known_kind() {
    let both = r#"{"provider_label": "x", "interactions": [
        {"response": {"text": "a"}, "error": {"kind": "server", "message": "b"}}]}"#;
    let neither = r#"{"provider_label": "x", "interactions": [{}]}"#;
    let unknown = r#"{"provider_label": "x", "interactions": [{"error": {"kind": "gremlins"}}]}"#;
    for (text, says) in [
        (both, "found both"),
        (neither, "found neither"),
        (unknown, "`gremlins`"),
    ] {
        let err = Cassette::from_json(text).unwrap_err();
        assert!(
            matches!(&err, LlmError::Cassette(m) if m.contains("interaction 0") && m.contains(says)),
            "{err}"
        );
    }
}

#[test]
fn the_demo_cassettes_still_load() {
    for name in ["wifi-on.json", "reasoning-wifi-on.json"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../droidmesh/demo")
            .join(name);
        let c = Cassette::load(&path).unwrap();
        assert!(!c.interactions.is_empty(), "{name}");
        assert!(
            c.interactions.iter().all(|i| i.response.is_some()),
            "{name}"
        );
    }
}
