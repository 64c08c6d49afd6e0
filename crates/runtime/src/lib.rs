//! What every droidmesh service repeats: config loading with environment overrides, telemetry
//! (traces and metrics, OTLP export when configured, a Prometheus admin port), the gRPC server
//! bootstrap (health, reflection, trace context, RPC metrics, graceful drain) and the gRPC
//! client stack (timeouts, balancing, trace context), and TLS for both (`[tls]`).

pub mod allowed;
pub mod balance;
pub mod client;
pub mod config;
mod counted;
pub mod device;
mod error;
pub mod load;
pub mod metrics;
pub mod peer;
pub mod server;
pub mod service_error;
pub mod telemetry;
pub mod tls;
pub mod trace_context;

pub use allowed::AllowedEndpoints;
pub use client::{ChannelCache, ClientOptions, TracedChannel, connect, connect_mesh, traced};
pub use config::{ConfigSource, Origin, Origins, Validate, load_config, load_config_with_origins};
pub use error::{Result, RuntimeError};
pub use load::LoadState;
pub use metrics::Metrics;
pub use server::{ServeOptions, serve, shutdown_signal};
pub use service_error::{ServiceError, ServiceErrorCode};
pub use telemetry::{Telemetry, TelemetryOptions, init_telemetry};
