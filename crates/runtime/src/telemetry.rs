//! Tracing setup: human-readable or JSON logs to stderr, and OTLP span export when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. W3C trace context is the global propagator. The
//! process's meter provider is installed here too (see [`crate::metrics`]).
use crate::error::{Result, RuntimeError};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Targets that must never feed the exporter (it would trace its own exports).
const QUIET: &str = "h2=warn,hyper=warn,hyper_util=warn,tower=warn,tonic=warn,reqwest=warn,rustls=warn,opentelemetry=warn,opentelemetry_sdk=warn";

#[derive(Debug, Clone)]
pub struct TelemetryOptions {
    /// `service.name` of exported spans.
    pub service_name: String,
    /// Filter used when `RUST_LOG` is not set.
    pub default_filter: String,
    /// Log as JSON lines instead of text.
    pub json: bool,
    /// OTLP endpoint; `None` reads `OTEL_EXPORTER_OTLP_ENDPOINT`, empty disables export.
    pub otlp_endpoint: Option<String>,
    /// Install the meter provider even without an OTLP endpoint (an admin server will read
    /// it). Without either, instruments stay no-ops and cost next to nothing.
    pub metrics: bool,
}

impl TelemetryOptions {
    pub fn new(service_name: &str) -> Self {
        Self {
            service_name: service_name.to_owned(),
            default_filter: "info".to_owned(),
            json: false,
            otlp_endpoint: None,
            metrics: true,
        }
    }
}

/// Keeps the exporter alive; flushes and shuts it down on `shutdown` or drop.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    metrics: Option<crate::metrics::Metrics>,
}

impl Telemetry {
    /// Whether spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// The process's metrics (what the admin server renders).
    pub fn metrics(&self) -> Option<crate::metrics::Metrics> {
        self.metrics.clone()
    }

    /// Flushes pending spans and metrics and stops the span exporter. The meter provider is
    /// the process's and stays installed.
    pub fn shutdown(&mut self) {
        if let Some(m) = self.metrics.take() {
            m.flush();
        }
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("telemetry: shutdown failed: {e}");
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Installs the global subscriber. Safe to call more than once (later calls keep the first
/// subscriber, which matters when several services share one process).
pub fn init_telemetry(opts: &TelemetryOptions) -> Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let filter = || {
        let base = std::env::var("RUST_LOG").unwrap_or_else(|_| opts.default_filter.clone());
        EnvFilter::try_new(format!("{base},{QUIET}"))
            .or_else(|_| EnvFilter::try_new(format!("info,{QUIET}")))
            .map_err(|e| RuntimeError::Telemetry(e.to_string()))
    };
    let endpoint = opts
        .otlp_endpoint
        .clone()
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
        .filter(|e| !e.trim().is_empty());

    let metrics = if opts.metrics || endpoint.is_some() {
        Some(crate::metrics::install(
            &opts.service_name,
            endpoint.as_deref(),
        )?)
    } else {
        None
    };
    let provider = match endpoint {
        Some(endpoint) => Some(build_provider(&opts.service_name, &endpoint)?),
        None => None,
    };
    let otel_layer = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("droidmesh"))
            .with_filter(filter().unwrap_or_else(|_| EnvFilter::new("info")))
    });
    let fmt_layer = if opts.json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour_on_stderr())
            .with_target(false)
            .compact()
            .boxed()
    };
    let installed = tracing_subscriber::registry()
        .with(fmt_layer.with_filter(filter()?))
        .with(otel_layer)
        .try_init()
        .is_ok();
    if installed {
        if let Some(p) = &provider {
            opentelemetry::global::set_tracer_provider(p.clone());
        }
        Ok(Telemetry { provider, metrics })
    } else {
        // Another service in this process set the subscriber up already.
        if let Some(p) = provider {
            let _ = p.shutdown();
        }
        Ok(Telemetry {
            provider: None,
            metrics,
        })
    }
}

/// Colour codes only for a person at a terminal: a pipe, a file or a log collector gets plain
/// text (as does a terminal when `NO_COLOR` is set).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn build_provider(service_name: &str, endpoint: &str) -> Result<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| RuntimeError::Telemetry(format!("otlp exporter for {endpoint}: {e}")))?;
    let resource = crate::metrics::resource(service_name);
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}
