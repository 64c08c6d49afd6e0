//! Shared helpers: a provider config pointing at a mock server, a client with a fake key.
use droidmesh_llm::testkit::MockLlmServer;
use droidmesh_llm::{
    ChatRequest, LlmClient, LlmConfig, Message, ProfileConfig, ProviderConfig, RetryPolicy,
    WireFormat,
};
use std::time::Duration;

pub const KEY: &str = "sk-test-0123456789abcdef";
pub const KEY_VAR: &str = "MOCK_API_KEY";
pub const MODEL: &str = "test-model";

/// The base URL a provider of `wire` uses for `server` (OpenAI-style URLs carry `/v1`).
pub fn base_url(wire: WireFormat, server: &MockLlmServer) -> String {
    match wire {
        WireFormat::Openai => format!("{}/v1", server.url()),
        _ => server.url(),
    }
}

/// The path each wire format posts to for [`MODEL`].
pub fn path(wire: WireFormat) -> String {
    match wire {
        WireFormat::Openai => "/v1/chat/completions".to_owned(),
        WireFormat::Anthropic => "/v1/messages".to_owned(),
        WireFormat::Gemini => format!("/v1beta/models/{MODEL}:generateContent"),
        WireFormat::Replay => String::new(),
    }
}

/// Provider `mockai` at `server`, with fast retries (10 ms, 3 attempts) and a 5 s timeout.
pub fn provider(wire: WireFormat, server: &MockLlmServer) -> ProviderConfig {
    let mut p =
        ProviderConfig::new("mockai", wire, base_url(wire, server)).with_api_key_env(KEY_VAR);
    p.timeout = Duration::from_secs(5);
    p.call_timeout = Duration::from_secs(10);
    p.retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        on_timeout: false,
    };
    p
}

/// Defaults plus `mockai`, with `default` pointing at it.
pub fn config(p: ProviderConfig) -> LlmConfig {
    let mut c = LlmConfig::defaults();
    c.providers.insert("mockai".to_owned(), p);
    c.profiles
        .insert("default".to_owned(), ProfileConfig::new("mockai", MODEL));
    c
}

/// A client whose environment holds only the mock key.
pub fn client(c: &LlmConfig) -> LlmClient {
    LlmClient::from_config_with_env(c, |name| (name == KEY_VAR).then(|| KEY.to_owned())).unwrap()
}

pub fn client_for(wire: WireFormat, server: &MockLlmServer) -> LlmClient {
    client(&config(provider(wire, server)))
}

pub fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hello")]).temperature(0.2)
}
