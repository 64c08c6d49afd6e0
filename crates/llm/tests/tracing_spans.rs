//! One `chat {model}` span per call with the GenAI attributes, `error.type` on failure, and
//! neither the key nor the prompt in any span or event.
//!
//! The subscriber is global (installed once) and routes to a capture held by the test's own
//! thread: a scoped `set_default` races with other tests registering the same callsites, which
//! can cache "not interested" for the `chat` span.
use crate::support::{KEY, MODEL, client_for, hello};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{CallTags, ChatRequest, ContentCapture, Message, WireFormat};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

type Fields = BTreeMap<String, String>;

thread_local! {
    static ACTIVE: std::cell::RefCell<Option<Capture>> = const { std::cell::RefCell::new(None) };
}

/// Captures what the current thread emits until the returned guard drops.
fn capture_this_thread() -> (Capture, impl Drop) {
    static GLOBAL: std::sync::Once = std::sync::Once::new();
    GLOBAL.call_once(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Router))
            .unwrap();
    });
    let capture = Capture::default();
    ACTIVE.with(|a| *a.borrow_mut() = Some(capture.clone()));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|a| *a.borrow_mut() = None);
        }
    }
    (capture, Reset)
}

struct Router;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Router {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        with_active(|c| c.new_span(attrs, id));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        with_active(|c| c.record(id, values));
    }
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        with_active(|c| c.event(event));
    }
}

fn with_active(f: impl FnOnce(&Capture)) {
    ACTIVE.with(|a| {
        if let Some(c) = a.borrow().as_ref() {
            f(c);
        }
    });
}

#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<(String, Fields)>>>,
    open: Arc<Mutex<HashMap<u64, usize>>>,
    events: Arc<Mutex<Vec<Fields>>>,
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Capture {
    fn new_span(&self, attrs: &Attributes<'_>, id: &Id) {
        let mut fields = Fields::new();
        attrs.record(&mut Visitor(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push((attrs.metadata().name().to_owned(), fields));
        self.open
            .lock()
            .unwrap()
            .insert(id.into_u64(), spans.len() - 1);
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        if let Some(&i) = self.open.lock().unwrap().get(&id.into_u64()) {
            values.record(&mut Visitor(&mut self.spans.lock().unwrap()[i].1));
        }
    }
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        self.events.lock().unwrap().push(fields);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn chat_span_carries_genai_attributes_and_no_secrets() {
    let (capture, _reset) = capture_this_thread();
    let server = MockLlmServer::start([
        MockResponse::success(WireFormat::Openai, "done", "test-model-0613", 42, 7),
        MockResponse::error(401, "bad key"),
    ])
    .await
    .unwrap();
    let client = client_for(WireFormat::Openai, &server);
    client.chat("executor", hello()).await.unwrap();
    client.chat("executor", hello()).await.unwrap_err();

    let spans = capture.spans.lock().unwrap().clone();
    let chats: Vec<&Fields> = spans
        .iter()
        .filter(|(n, _)| n == "chat")
        .map(|(_, f)| f)
        .collect();
    assert_eq!(chats.len(), 2, "one span per call: {spans:?}");
    let ok = chats[0];
    let expect = [
        ("otel.name", format!("chat {MODEL}")),
        ("gen_ai.operation.name", "chat".into()),
        ("gen_ai.provider.name", "mockai".into()),
        ("gen_ai.request.model", MODEL.into()),
        ("gen_ai.response.model", "test-model-0613".into()),
        ("gen_ai.usage.input_tokens", "42".into()),
        ("gen_ai.usage.output_tokens", "7".into()),
        ("gen_ai.request.temperature", "0.2".into()),
        ("droidmesh.llm.attempts", "1".into()),
    ];
    for (k, v) in &expect {
        assert_eq!(ok.get(*k), Some(v), "{k} in {ok:?}");
    }
    assert!(!ok.contains_key("error.type"));
    let failed = chats[1];
    assert_eq!(failed.get("error.type").map(String::as_str), Some("auth"));
    assert!(!failed.contains_key("gen_ai.usage.input_tokens"));

    let everything = format!("{spans:?} {:?}", capture.events.lock().unwrap());
    assert!(!everything.contains(KEY), "the key leaked: {everything}");
    assert!(
        !everything.contains("be brief") && !everything.contains("hello"),
        "prompt leaked"
    );
    assert!(
        everything.contains("llm call failed"),
        "the failure is logged: {everything}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn chat_span_carries_the_call_s_tags_and_redacted_content_when_capture_is_on() {
    const CANARY: &str = "canary-7f3e-0042";
    let (capture, _reset) = capture_this_thread();
    let server = MockLlmServer::start([MockResponse::success(
        WireFormat::Openai,
        &format!("I will type {CANARY} now"),
        "test-model-0613",
        42,
        7,
    )])
    .await
    .unwrap();
    let client = client_for(WireFormat::Openai, &server)
        .with_content_capture(ContentCapture::on(vec![CANARY.to_owned()]));
    let req = ChatRequest::new(vec![
        Message::system("be brief"),
        Message::user(format!("the PIN is {CANARY}")),
    ])
    .tagged(CallTags::new("task-1").device("emulator-5554").step(3));
    client.chat("executor", req).await.unwrap();

    let spans = capture.spans.lock().unwrap().clone();
    let chat = spans
        .iter()
        .find(|(n, _)| n == "chat")
        .map(|(_, f)| f)
        .unwrap();
    assert_eq!(chat.get("droidmesh.task.id").unwrap(), "task-1");
    assert_eq!(
        chat.get("droidmesh.device.serial").unwrap(),
        "emulator-5554"
    );
    assert_eq!(chat.get("droidmesh.step").unwrap(), "3");
    let input = chat.get("gen_ai.input.messages").unwrap();
    assert!(input.contains("be brief"), "{input}");
    assert!(input.contains("the PIN is [REDACTED]"), "{input}");
    let output = chat.get("gen_ai.output.messages").unwrap();
    assert!(output.contains("I will type [REDACTED] now"), "{output}");
    let everything = format!("{spans:?} {:?}", capture.events.lock().unwrap());
    assert!(
        !everything.contains(CANARY),
        "the canary leaked: {everything}"
    );
}
