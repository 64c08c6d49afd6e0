//! What every droidmesh service repeats: config loading with environment overrides, telemetry
//! (traces and metrics, OTLP export when configured, a Prometheus admin port), the gRPC server
//! bootstrap (health, reflection, trace context, RPC metrics, graceful drain) and the gRPC
//! client stack (timeouts, balancing, trace context).

pub mod client;
pub mod config;
mod error;
pub mod metrics;
pub mod peer;
pub mod server;
pub mod telemetry;
pub mod trace_context;

pub use client::{ChannelCache, ClientOptions, TracedChannel, connect};
pub use config::{ConfigSource, Validate, load_config};
pub use error::{Result, RuntimeError};
pub use metrics::Metrics;
pub use server::{ServeOptions, serve, shutdown_signal};
pub use telemetry::{Telemetry, TelemetryOptions, init_telemetry};
