//! Client behaviour beyond one wire format: profiles and targets, deadlines, connection errors,
//! rate limits that outlast the call, missing keys.
use crate::support::{self, KEY, MODEL, client, client_for, config, hello, provider};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{
    ChatModel, ChatRequest, LlmClient, LlmError, Message, ModelOverride, ProfileConfig,
    RetryPolicy, WireFormat,
};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ok() -> MockResponse {
    MockResponse::success(WireFormat::Openai, "ok", MODEL, 1, 1)
}

#[tokio::test]
async fn profiles_fall_back_to_default_and_supply_sampling() {
    let server = MockLlmServer::start([ok(), ok(), ok()]).await.unwrap();
    let mut c = config(provider(WireFormat::Openai, &server));
    let mut manager = ProfileConfig::new("mockai", "planner-model");
    manager.temperature = Some(0.7);
    manager.max_tokens = Some(300);
    c.profiles.insert("manager".into(), manager);
    let client = client(&c);

    // The manager profile's defaults fill what the request leaves unset.
    let req = ChatRequest::new(vec![Message::user("plan")]);
    client.chat("manager", req.clone()).await.unwrap();
    // The request's own values win over the profile's.
    client
        .chat("manager", req.clone().temperature(0.0).max_tokens(5))
        .await
        .unwrap();
    // No `scripter` profile: the default one answers.
    client.chat("scripter", req).await.unwrap();

    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies[0]["model"], "planner-model");
    assert_eq!(bodies[0]["temperature"], json!(0.7));
    assert_eq!(bodies[0]["max_tokens"], 300);
    assert_eq!(bodies[1]["temperature"], json!(0.0));
    assert_eq!(bodies[1]["max_tokens"], 5);
    assert_eq!(bodies[2]["model"], MODEL);
    assert!(bodies[2].get("temperature").is_none());
}

#[tokio::test]
async fn direct_target_and_trait_object() {
    let server = MockLlmServer::start([ok(), ok(), ok()]).await.unwrap();
    let client = client_for(WireFormat::Openai, &server);
    let resp = client
        .chat(ProfileConfig::new("mockai", "other-model"), hello())
        .await
        .unwrap();
    assert_eq!(resp.text, "ok");
    assert_eq!(server.requests()[0].json()["model"], "other-model");

    // A per-task model override: the agent's profile with another model.
    let mut overridden = client.profile("codeact").unwrap();
    overridden.model = "override-model".into();
    client.chat(overridden, hello()).await.unwrap();
    assert_eq!(server.requests()[1].json()["model"], "override-model");

    let model: Arc<dyn ChatModel> = client.model("codeact").unwrap();
    let cloned = client.clone();
    drop(client);
    assert_eq!(model.chat(hello()).await.unwrap().text, "ok");
    assert!(format!("{cloned:?}").contains("mockai"));
}

#[tokio::test]
async fn a_task_override_merges_over_the_agent_profile() {
    let server = MockLlmServer::start([ok(), ok(), ok()]).await.unwrap();
    let mut c = config(provider(WireFormat::Openai, &server));
    let mut manager = ProfileConfig::new("mockai", "planner-model");
    manager.temperature = Some(0.7);
    manager.max_tokens = Some(300);
    c.profiles.insert("manager".into(), manager);
    let client = client(&c);
    let hi = || ChatRequest::new(vec![Message::user("plan")]);

    // No override, or an empty one: the profile itself.
    let plain = client.target_for("manager", None).unwrap();
    assert_eq!(plain, droidmesh_llm::ChatTarget::from("manager"));
    let empty = ModelOverride::default();
    client
        .chat(client.target_for("manager", Some(&empty)).unwrap(), hi())
        .await
        .unwrap();
    // A model and a temperature: the rest of the profile stays.
    let ov = ModelOverride {
        model: "bigger-model".into(),
        temperature: Some(0.1),
        ..ModelOverride::default()
    };
    client
        .chat(client.target_for("manager", Some(&ov)).unwrap(), hi())
        .await
        .unwrap();
    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies[0]["model"], "planner-model");
    assert_eq!(bodies[1]["model"], "bigger-model");
    assert_eq!(bodies[1]["temperature"], json!(0.1));
    assert_eq!(bodies[1]["max_tokens"], 300);

    // An unknown provider, an impossible temperature or no tokens at all is refused before
    // any call.
    let unknown = ModelOverride {
        provider: "nope".into(),
        ..ModelOverride::default()
    };
    let err = client.target_for("manager", Some(&unknown)).unwrap_err();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("`nope`")),
        "{err}"
    );
    let hot = ModelOverride {
        temperature: Some(7.0),
        ..ModelOverride::default()
    };
    let err = client.target_for("manager", Some(&hot)).unwrap_err();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("between 0 and 2")),
        "{err}"
    );
    let none = ModelOverride {
        max_tokens: Some(0),
        ..ModelOverride::default()
    };
    let err = client.target_for("manager", Some(&none)).unwrap_err();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("max_tokens of at least 1")),
        "{err}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn unknown_profile_and_provider_fail_at_bind() {
    let server = MockLlmServer::start([]).await.unwrap();
    let mut c = config(provider(WireFormat::Openai, &server));
    c.profiles.clear();
    let client = client(&c);
    let err = client.bind("executor").unwrap_err();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("expected profile `executor` or a `default` profile")),
        "{err}"
    );
    let err = client.bind(ProfileConfig::new("nope", "m")).unwrap_err();
    assert!(
        matches!(&err, LlmError::Config(m) if m.contains("found `nope`") && m.contains("mockai")),
        "{err}"
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn invalid_request_never_leaves_the_process() {
    let server = MockLlmServer::start([ok()]).await.unwrap();
    let client = client_for(WireFormat::Openai, &server);
    let err = client
        .chat(
            "executor",
            ChatRequest::new(vec![Message::system("only a system prompt")]),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::InvalidRequest(_)), "{err}");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn missing_key_is_a_config_error_naming_the_variable() {
    let server = MockLlmServer::start([ok()]).await.unwrap();
    let c = config(provider(WireFormat::Openai, &server));
    let client = LlmClient::from_config_with_env(&c, |_| None).unwrap();
    let err = client.chat("executor", hello()).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::Config(
            "provider `mockai` needs an api key in environment variable MOCK_API_KEY, found it unset or empty".into()
        )
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    // A port that was just free: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let server = MockLlmServer::start([]).await.unwrap();
    let mut p = provider(WireFormat::Openai, &server);
    p.base_url = format!("http://127.0.0.1:{port}/v1");
    let err = client(&config(p))
        .chat("executor", hello())
        .await
        .unwrap_err();
    let LlmError::Connect(message) = err.root() else {
        panic!("expected Connect, got {err:?}");
    };
    assert!(
        message.contains("connecting to http://127.0.0.1"),
        "{message}"
    );
    assert!(err.is_retryable());
    // Every attempt failed: the error says how many there were and what they took in all.
    assert_eq!(err.attempts(), 3);
    let took = err.elapsed().unwrap();
    assert!(
        err.to_string().ends_with(&format!(
            "(3 attempts, {} in all)",
            droidmesh_llm::format_elapsed(took)
        )),
        "{err}"
    );
}

#[tokio::test]
async fn whole_call_deadline_bounds_retries() {
    let server = MockLlmServer::start([]).await.unwrap();
    server.set_fallback(ok().delay(Duration::from_secs(10)));
    let mut p = provider(WireFormat::Openai, &server);
    p.timeout = Duration::from_millis(300);
    p.call_timeout = Duration::from_millis(500);
    p.retry = RetryPolicy {
        max_attempts: 10,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
        on_timeout: true,
    };
    let client = client(&config(p));
    let start = Instant::now();
    let err = client.chat("executor", hello()).await.unwrap_err();
    let took = start.elapsed();
    let LlmError::Timeout { after, attempts } = err else {
        panic!("expected a timeout, got {err:?}");
    };
    // The call's deadline cuts the retries (10 attempts of 300 ms would take 3 s): the second
    // attempt, or the first where this machine is slow enough to pass the deadline in it. The
    // error says what was waited, and no attempt waited for the server's 10 s reply.
    assert!((1..=2).contains(&attempts), "{attempts} attempts");
    assert_eq!(server.request_count(), attempts as usize);
    assert!(
        after >= Duration::from_millis(500) && after <= took,
        "{after:?}"
    );
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[tokio::test]
async fn rate_limit_exhausted_reports_retry_after() {
    let limited = || MockResponse::error(429, "quota").header("retry-after", "0");
    let server = MockLlmServer::start([limited(), limited(), limited()])
        .await
        .unwrap();
    let err = client_for(WireFormat::Openai, &server)
        .chat("executor", hello())
        .await
        .unwrap_err();
    assert_eq!(
        err.root(),
        &LlmError::RateLimited {
            retry_after: Some(Duration::ZERO),
            message: "quota".into()
        }
    );
    assert_eq!(err.attempts(), 3);
    assert!(err.to_string().contains("quota (3 attempts, "), "{err}");
    assert_eq!(server.request_count(), 3, "max_attempts");
}

#[tokio::test]
async fn retry_after_beyond_the_call_deadline_fails_fast() {
    let server = MockLlmServer::start([
        MockResponse::error(429, "come back in a minute").header("retry-after", "60"),
        ok(),
    ])
    .await
    .unwrap();
    let client = client_for(WireFormat::Openai, &server);
    let start = Instant::now();
    let err = client.chat("executor", hello()).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(30), "no 60 s wait");
    assert_eq!(
        err,
        LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(60)),
            message: "come back in a minute".into()
        }
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn retry_after_on_503_is_honoured() {
    let server = MockLlmServer::start([
        MockResponse::error(503, "overloaded").header("retry-after-ms", "300"),
        ok(),
    ])
    .await
    .unwrap();
    client_for(WireFormat::Openai, &server)
        .chat("executor", hello())
        .await
        .unwrap();
    let reqs = server.requests();
    assert!(reqs[1].at - reqs[0].at >= Duration::from_millis(300));
}

#[tokio::test]
async fn custom_headers_are_sent_and_redirects_not_followed() {
    let server = MockLlmServer::start([MockResponse::raw(307, "")
        .header("location", "https://elsewhere.invalid/v1/chat/completions")])
    .await
    .unwrap();
    let mut p = provider(WireFormat::Openai, &server);
    p.headers
        .insert("HTTP-Referer".into(), "https://droidmesh.invalid".into());
    let err = client(&config(p))
        .chat("executor", hello())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::BadRequest { status: 307, message } if message.contains("check base_url")),
        "{err}"
    );
    let r = &server.requests()[0];
    assert_eq!(r.header("http-referer"), Some("https://droidmesh.invalid"));
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn ollama_style_provider_without_key() {
    let server = MockLlmServer::start([ok()]).await.unwrap();
    let mut p = provider(WireFormat::Openai, &server);
    p.api_key_env = None;
    let resp = support::client(&config(p))
        .chat("executor", hello())
        .await
        .unwrap();
    assert_eq!(resp.text, "ok");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn the_model_double_keeps_arrival_times_with_its_request_log_off() {
    let server = MockLlmServer::start([ok(), ok(), ok()]).await.unwrap();
    server.set_log_requests(false);
    let client = client(&config(provider(WireFormat::Openai, &server)));
    let before = Instant::now();
    for _ in 0..3 {
        client
            .chat("default", ChatRequest::new(vec![Message::user("hi")]))
            .await
            .unwrap();
    }
    let after = Instant::now();
    // The bodies are not kept, the times are: one per request, in order, within the calls.
    assert_eq!(server.request_count(), 0);
    let at = server.arrivals();
    assert_eq!(at.len(), 3);
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    assert!(at[0] >= before && at[2] <= after, "{at:?}");
}
