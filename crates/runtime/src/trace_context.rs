//! W3C trace context in gRPC metadata: injected by clients, extracted by servers, so one trace
//! spans every hop between services.
use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(k, v);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Client interceptor that writes the current span's context as `traceparent`/`tracestate`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceContextInjector;

impl tonic::service::Interceptor for TraceContextInjector {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        inject(request.metadata_mut());
        Ok(request)
    }
}

/// Writes the current span's context into `metadata`.
pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut MetadataInjector(metadata));
    });
}

/// Server-side span for one RPC, parented on the caller's trace context when it sent one.
pub fn server_span(service: &str, request: &http::Request<()>) -> tracing::Span {
    let path = request.uri().path();
    let span = tracing::info_span!(
        "rpc",
        otel.name = %path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.method = %path,
        droidmesh.service = %service,
        droidmesh.task.id = tracing::field::Empty,
        droidmesh.device.serial = tracing::field::Empty,
        droidmesh.step = tracing::field::Empty,
    );
    let parent = opentelemetry::global::get_text_map_propagator(|p| {
        p.extract(&HeaderExtractor(request.headers()))
    });
    let _ = span.set_parent(parent);
    span
}

/// Labels the current RPC's span (see [`server_span`]) with the task, device and step the call
/// serves, as far as the handler knows them (empty or `None`: left out). Call it in the
/// handler before it enters spans of its own.
pub fn tag_call(task_id: &str, serial: &str, step: Option<u32>) {
    let span = tracing::Span::current();
    if !task_id.is_empty() {
        span.record("droidmesh.task.id", task_id);
    }
    if !serial.is_empty() {
        span.record("droidmesh.device.serial", serial);
    }
    if let Some(step) = step {
        span.record("droidmesh.step", step);
    }
}

/// The `traceparent` header value of the current span, if it has a valid context.
pub fn current_traceparent() -> Option<String> {
    let mut metadata = tonic::metadata::MetadataMap::new();
    inject(&mut metadata);
    metadata
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
