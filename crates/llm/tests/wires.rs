//! The same scenarios for each wire format against a loopback server: success with usage (and
//! `max_tokens` always sent), an image, 429 with Retry-After (attempts and times reported), 500
//! retried, 401 not retried, a timeout, a body that is not JSON, the provider's error message on
//! 400, a reply cut at the token limit, and the provider's own context-overflow refusal.
use crate::support::{KEY, MODEL, client_for, hello, path};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse, ReceivedRequest};
use droidmesh_llm::{ChatRequest, LlmError, Message, RetryPolicy, WireFormat};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The PNG signature; base64 `iVBORw0KGgo=`.
const PNG: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
const PNG_B64: &str = "iVBORw0KGgo=";

fn ok(wire: WireFormat) -> MockResponse {
    MockResponse::success(wire, "tapped the button", "test-model-2025", 42, 7)
}

/// The credentials and fixed headers each wire format must send.
fn assert_auth(wire: WireFormat, r: &ReceivedRequest) {
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, path(wire), "path");
    assert_eq!(r.header("content-type"), Some("application/json"));
    match wire {
        WireFormat::Openai => {
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer {KEY}").as_str())
            );
        }
        WireFormat::Anthropic => {
            assert_eq!(r.header("x-api-key"), Some(KEY));
            assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(r.header("authorization"), None);
        }
        WireFormat::Gemini => {
            assert_eq!(r.header("x-goog-api-key"), Some(KEY));
            assert!(
                !r.path.contains("key="),
                "the key must not travel in the URL"
            );
        }
        WireFormat::Replay => unreachable!(),
    }
}

/// The body of `hello()` (system "be brief", user "hello", temperature 0.2) in each format.
fn assert_hello_body(wire: WireFormat, b: &Value) {
    match wire {
        WireFormat::Openai => {
            assert_eq!(b["model"], MODEL);
            assert_eq!(
                b["messages"],
                json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}])
            );
            assert_eq!(b["temperature"], json!(0.2));
            assert_eq!(b["max_tokens"], 4096, "always sent: the default");
        }
        WireFormat::Anthropic => {
            assert_eq!(b["model"], MODEL);
            assert_eq!(b["system"], "be brief");
            assert_eq!(
                b["messages"],
                json!([{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
            );
            assert_eq!(b["max_tokens"], 4096);
            assert_eq!(b["temperature"], json!(0.2));
        }
        WireFormat::Gemini => {
            assert_eq!(
                b["system_instruction"],
                json!({"parts": [{"text": "be brief"}]})
            );
            assert_eq!(
                b["contents"],
                json!([{"role": "user", "parts": [{"text": "hello"}]}])
            );
            assert_eq!(b["generation_config"]["temperature"], json!(0.2));
            assert_eq!(b["generation_config"]["max_output_tokens"], 4096);
            assert!(
                b.get("model").is_none(),
                "gemini names the model in the URL"
            );
        }
        WireFormat::Replay => unreachable!(),
    }
}

pub async fn success_with_usage(wire: WireFormat) {
    let server = MockLlmServer::start([ok(wire)]).await.unwrap();
    let resp = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap();
    assert_eq!(resp.text, "tapped the button");
    assert_eq!(resp.usage.input_tokens, 42);
    assert_eq!(resp.usage.output_tokens, 7);
    assert_eq!(
        resp.model, "test-model-2025",
        "the model the provider reports wins"
    );
    assert_eq!(resp.finish_reason, "stop");
    assert_eq!(resp.provider, "mockai");
    assert!(!resp.replay);
    assert!(resp.latency > Duration::ZERO);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_auth(wire, &reqs[0]);
    assert_hello_body(wire, &reqs[0].json());
}

pub async fn image_part(wire: WireFormat) {
    let server = MockLlmServer::start([ok(wire)]).await.unwrap();
    let req = ChatRequest::new(vec![
        Message::user("what is on screen?").with_image_png(PNG),
    ]);
    client_for(wire, &server)
        .chat("executor", req)
        .await
        .unwrap();
    let b = server.requests()[0].json();
    let (text, image) = match wire {
        WireFormat::Openai => (
            json!({"type": "text", "text": "what is on screen?"}),
            json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}}),
        ),
        WireFormat::Anthropic => (
            json!({"type": "text", "text": "what is on screen?"}),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}),
        ),
        WireFormat::Gemini => (
            json!({"text": "what is on screen?"}),
            json!({"inline_data": {"mime_type": "image/png", "data": PNG_B64}}),
        ),
        WireFormat::Replay => unreachable!(),
    };
    let parts = match wire {
        WireFormat::Openai => &b["messages"][0]["content"],
        WireFormat::Anthropic => &b["messages"][0]["content"],
        _ => &b["contents"][0]["parts"],
    };
    assert_eq!(parts, &json!([text, image]));
}

pub async fn rate_limited_then_success(wire: WireFormat) {
    let server = MockLlmServer::start([
        MockResponse::error(429, "slow down").header("retry-after", "1"),
        ok(wire),
    ])
    .await
    .unwrap();
    let resp = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap();
    assert_eq!(resp.text, "tapped the button");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let waited = reqs[1].at - reqs[0].at;
    assert!(
        waited >= Duration::from_secs(1),
        "retried after {waited:?}, expected >= 1s"
    );
    assert!(waited < Duration::from_secs(5), "retried after {waited:?}");
    assert_eq!(
        reqs[0].body, reqs[1].body,
        "the retry sends the same request"
    );
    // The answer says it took two attempts: its latency is the second's, its elapsed time
    // the whole call's, the one-second wait included.
    assert_eq!(resp.attempts, 2);
    assert!(resp.elapsed >= Duration::from_secs(1), "{:?}", resp.elapsed);
    assert!(resp.latency < Duration::from_secs(1), "{:?}", resp.latency);
    let report = resp.usage_report("codeact");
    assert_eq!(report.attempts, 2);
    assert!(
        report.elapsed_ms >= 1000 && report.latency_ms < 1000,
        "{report:?}"
    );
}

/// A success body whose finish reason is the wire's "cut at the token limit".
fn cut_off(wire: WireFormat) -> MockResponse {
    let body = match wire {
        WireFormat::Anthropic => json!({
            "model": MODEL, "content": [{"type": "text", "text": "tap("}],
            "stop_reason": "max_tokens", "usage": {"input_tokens": 9, "output_tokens": 16}
        }),
        WireFormat::Gemini => json!({
            "candidates": [{"content": {"parts": [{"text": "tap("}]}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 16}
        }),
        _ => json!({
            "model": MODEL,
            "choices": [{"message": {"content": "tap("}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 16}
        }),
    };
    MockResponse::json(200, &body)
}

pub async fn reply_cut_at_max_tokens(wire: WireFormat) {
    let server = MockLlmServer::start([cut_off(wire), ok(wire)])
        .await
        .unwrap();
    let client = client_for(wire, &server);
    let cut = client
        .chat("executor", hello().max_tokens(16))
        .await
        .unwrap();
    assert!(cut.truncated, "{cut:?}");
    assert_eq!(
        (cut.finish_reason.as_str(), cut.text.as_str()),
        ("length", "tap(")
    );
    let whole = client.chat("executor", hello()).await.unwrap();
    assert!(!whole.truncated);
    let sent = server.requests()[0].json();
    let limit = match wire {
        WireFormat::Gemini => &sent["generation_config"]["max_output_tokens"],
        _ => &sent["max_tokens"],
    };
    assert_eq!(limit, 16, "the request's own limit wins");
}

/// Each provider's own refusal of a prompt longer than its context window.
pub async fn context_overflow_refused(wire: WireFormat) {
    let (body, prompt, context) = match wire {
        WireFormat::Anthropic => (
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum"}}),
            208_310,
            200_000,
        ),
        WireFormat::Gemini => (
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."}}),
            1_200_293,
            1_048_576,
        ),
        _ => (
            json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            130_512,
            128_000,
        ),
    };
    let server = MockLlmServer::start([MockResponse::json(400, &body), ok(wire)])
        .await
        .unwrap();
    let err = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap_err();
    let LlmError::ContextOverflow {
        prompt_tokens,
        context_tokens,
        ..
    } = &err
    else {
        panic!("expected ContextOverflow, found {err:?}");
    };
    assert_eq!(
        (*prompt_tokens, *context_tokens),
        (Some(prompt), Some(context))
    );
    assert_eq!(server.request_count(), 1, "never retried");
}

pub async fn server_error_retried(wire: WireFormat) {
    let server = MockLlmServer::start([MockResponse::error(500, "oops"), ok(wire)])
        .await
        .unwrap();
    let resp = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap();
    assert_eq!(resp.text, "tapped the button");
    assert_eq!(server.request_count(), 2);
}

pub async fn unauthorized_not_retried(wire: WireFormat) {
    let server = MockLlmServer::start([MockResponse::error(401, "invalid api key"), ok(wire)])
        .await
        .unwrap();
    let err = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::Auth {
            status: 401,
            message: "invalid api key".into()
        }
    );
    assert!(!err.is_retryable());
    assert_eq!(server.request_count(), 1);
}

pub async fn attempt_timeout(wire: WireFormat) {
    let slow = ok(wire).delay(Duration::from_secs(10));
    // By default a timed-out attempt is not retried: the server may still be working on it.
    let server = MockLlmServer::start([slow.clone(), slow.clone()])
        .await
        .unwrap();
    let mut p = crate::support::provider(wire, &server);
    p.timeout = Duration::from_millis(200);
    let client = crate::support::client(&crate::support::config(p.clone()));
    let err = client.chat("executor", hello()).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Timeout { after, attempts: 1 } if after >= Duration::from_millis(200)),
        "{err:?}"
    );
    // The attempt may time out before its request arrives on a slow machine; a second
    // request never comes.
    assert!(
        server.request_count() <= 1,
        "a timed-out attempt is not retried"
    );

    // Asked to, it retries, and the error reports the whole wait and every attempt.
    let server = MockLlmServer::start([slow.clone(), slow]).await.unwrap();
    let mut p = crate::support::provider(wire, &server);
    p.timeout = Duration::from_millis(200);
    p.retry = RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
        on_timeout: true,
    };
    let client = crate::support::client(&crate::support::config(p));
    let start = Instant::now();
    let err = client.chat("executor", hello()).await.unwrap_err();
    let took = start.elapsed();
    let LlmError::Timeout { after, attempts } = err else {
        panic!("expected a timeout, got {err:?}");
    };
    assert_eq!(attempts, 2);
    assert!(
        after >= Duration::from_millis(400) && after <= took,
        "two attempts of 200ms: reported {after:?}, took {took:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "bounded by the attempt timeout, took {took:?}"
    );
    assert!(
        err_text(after, attempts).contains("2 attempts"),
        "{}",
        err_text(after, attempts)
    );
    // (Counted as they arrive: on a slow machine an attempt can time out before its request
    // reaches the server.)
    assert!(
        server.request_count() <= 2,
        "a timed-out attempt is retried, once"
    );
}

fn err_text(after: Duration, attempts: u32) -> String {
    LlmError::Timeout { after, attempts }.to_string()
}

pub async fn not_json(wire: WireFormat) {
    let server = MockLlmServer::start([MockResponse::raw(200, "<html>gateway</html>"), ok(wire)])
        .await
        .unwrap();
    let err = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap_err();
    let LlmError::Malformed { detail } = &err else {
        panic!("expected Malformed, got {err:?}");
    };
    assert!(detail.contains("expected a JSON body"), "{detail}");
    assert!(detail.contains("<html>gateway</html>"), "{detail}");
    assert_eq!(
        server.request_count(),
        1,
        "a malformed answer is not retried"
    );
}

pub async fn bad_request_message(wire: WireFormat) {
    // Each provider's own error body shape.
    let body = match wire {
        WireFormat::Openai => {
            json!({"error": {"message": "model `x` does not exist", "type": "invalid_request_error", "code": "model_not_found"}})
        }
        WireFormat::Anthropic => {
            json!({"type": "error", "error": {"type": "not_found_error", "message": "model `x` does not exist"}})
        }
        _ => {
            json!({"error": {"code": 404, "message": "model `x` does not exist", "status": "NOT_FOUND"}})
        }
    };
    let server = MockLlmServer::start([MockResponse::json(404, &body)])
        .await
        .unwrap();
    let err = client_for(wire, &server)
        .chat("executor", hello())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::BadRequest {
            status: 404,
            message: "model `x` does not exist".into()
        }
    );
    assert_eq!(server.request_count(), 1);
}

macro_rules! wire_suite {
    ($module:ident, $wire:expr) => {
        mod $module {
            use droidmesh_llm::WireFormat;

            #[tokio::test]
            async fn success_with_usage() {
                super::success_with_usage($wire).await;
            }
            #[tokio::test]
            async fn image_part() {
                super::image_part($wire).await;
            }
            #[tokio::test]
            async fn rate_limited_then_success() {
                super::rate_limited_then_success($wire).await;
            }
            #[tokio::test]
            async fn server_error_retried() {
                super::server_error_retried($wire).await;
            }
            #[tokio::test]
            async fn unauthorized_not_retried() {
                super::unauthorized_not_retried($wire).await;
            }
            #[tokio::test]
            async fn attempt_timeout() {
                super::attempt_timeout($wire).await;
            }
            #[tokio::test]
            async fn not_json() {
                super::not_json($wire).await;
            }
            #[tokio::test]
            async fn bad_request_message() {
                super::bad_request_message($wire).await;
            }
            #[tokio::test]
            async fn reply_cut_at_max_tokens() {
                super::reply_cut_at_max_tokens($wire).await;
            }
            #[tokio::test]
            async fn context_overflow_refused() {
                super::context_overflow_refused($wire).await;
            }
        }
    };
}

wire_suite!(openai, WireFormat::Openai);
wire_suite!(anthropic, WireFormat::Anthropic);
wire_suite!(gemini, WireFormat::Gemini);
