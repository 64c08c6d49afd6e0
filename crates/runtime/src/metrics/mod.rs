//! The process's metrics: one OpenTelemetry `SdkMeterProvider`, installed as the global one,
//! with a pull reader that the admin server renders as Prometheus text and, when an OTLP
//! endpoint is configured, a periodic OTLP exporter. Libraries record through
//! `opentelemetry::global::meter("droidmesh")`; this crate is the only one that knows the SDK.
pub mod admin;
mod encode;
pub mod methods;
mod process;
pub mod rpc;
pub mod stream_end;

use crate::error::{Result, RuntimeError};
use opentelemetry::{Key, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

pub use admin::{AdminOptions, serve_admin};
pub use encode::encode;
pub use rpc::RpcMetricsLayer;
pub use stream_end::StreamEndLayer;

/// The name of the meter every droidmesh crate records with.
pub const METER: &str = "droidmesh";

/// The admin port's default: `[listen] admin` (0 turns the admin server off).
pub const DEFAULT_ADMIN_PORT: u16 = 9464;

/// The installed provider and the reader the admin server collects from. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    provider: SdkMeterProvider,
    reader: Arc<ManualReader>,
    otlp: bool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("otlp", &self.inner.otlp)
            .finish_non_exhaustive()
    }
}

/// The one provider of this process, once installed.
static INSTALLED: Mutex<Option<Metrics>> = Mutex::new(None);

/// Installs the global meter provider: a pull reader for `/metrics`, plus an OTLP exporter
/// (every `OTEL_METRIC_EXPORT_INTERVAL` ms, 60 s by default) when `otlp_endpoint` is given.
/// Only the first call in a process installs; later calls return the same handle, whatever
/// they ask for. Instruments made before it are no-ops, so a process calls this (through
/// [`crate::init_telemetry`]) before it builds any service.
pub fn install(service_name: &str, otlp_endpoint: Option<&str>) -> Result<Metrics> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = installed.as_ref() {
        return Ok(m.clone());
    }
    let reader = Arc::new(ManualReader::builder().build());
    let mut builder = SdkMeterProvider::builder()
        .with_reader(SharedReader(reader.clone()))
        .with_resource(resource(service_name));
    if let Some(endpoint) = otlp_endpoint {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| {
                RuntimeError::Telemetry(format!("otlp metric exporter for {endpoint}: {e}"))
            })?;
        builder = builder
            .with_reader(opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).build());
    }
    let provider = builder.build();
    opentelemetry::global::set_meter_provider(provider.clone());
    let metrics = Metrics {
        inner: Arc::new(Inner {
            provider,
            reader,
            otlp: otlp_endpoint.is_some(),
        }),
    };
    *installed = Some(metrics.clone());
    Ok(metrics)
}

/// What this process is, for its metrics and traces alike: `service.name`, `service.version`
/// (droidmesh's), `service.instance.id` (a random UUID made once per process, unless
/// `OTEL_RESOURCE_ATTRIBUTES` names one), and what `OTEL_RESOURCE_ATTRIBUTES` adds.
pub fn resource(service_name: &str) -> Resource {
    static INSTANCE: OnceLock<String> = OnceLock::new();
    let resource = Resource::builder()
        .with_service_name(service_name.to_owned())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let instance = Key::from_static_str("service.instance.id");
    if resource.get(&instance).is_some() {
        return resource;
    }
    let id = INSTANCE.get_or_init(|| uuid::Uuid::new_v4().to_string());
    Resource::builder_empty()
        .with_attributes(
            resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_attribute(KeyValue::new(instance, id.clone()))
        .build()
}

/// The installed provider, if [`install`] ran.
pub fn installed() -> Option<Metrics> {
    INSTALLED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl Metrics {
    /// Whether metrics are also exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.inner.otlp
    }

    /// Collects every instrument now and renders it in the Prometheus text format 0.0.4, with
    /// `target_info` and the process's own use of the machine (`process_*`).
    pub fn render(&self) -> Result<String> {
        let mut rm = ResourceMetrics::default();
        self.inner
            .reader
            .collect(&mut rm)
            .map_err(|e| RuntimeError::Telemetry(format!("collecting metrics: {e}")))?;
        Ok(encode::encode_with(&rm, &process::sample()))
    }

    /// Sends what the OTLP exporter has not sent yet (no-op without one).
    pub fn flush(&self) {
        if self.inner.otlp
            && let Err(e) = self.inner.provider.force_flush()
        {
            tracing::warn!(error = %e, "metrics: flushing the otlp exporter failed");
        }
    }
}

/// Lets the provider own a reader that the admin server also holds.
#[derive(Debug)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }

    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}
