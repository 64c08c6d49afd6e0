//! The executor's connection to one device service: the client and where it points, so a
//! failed call can say which device service failed and how ("the device service at
//! http://10.0.0.5:50051 did not answer within 30s") instead of the transport's own words.
use std::sync::Arc;
use std::time::Duration;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_runtime::TracedChannel;
use droidmesh_runtime::peer::{Transport, probe, transport_failure};
use tonic::Status;

/// How long a device service whose connection broke is given to answer a fresh one.
const PROBE_WITHIN: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct DeviceLink {
    client: DeviceServiceClient<TracedChannel>,
    endpoint: Arc<str>,
    /// The channel's deadline for one call.
    timeout: Duration,
}

impl DeviceLink {
    pub fn new(
        client: DeviceServiceClient<TracedChannel>,
        endpoint: &str,
        timeout: Duration,
    ) -> Self {
        Self {
            client,
            endpoint: endpoint.into(),
            timeout,
        }
    }

    /// A client for one call (clients are cheap handles on one channel).
    pub fn client(&self) -> DeviceServiceClient<TracedChannel> {
        self.client.clone()
    }

    /// What a failed call tells the model and the user: the device service's own refusal as
    /// it said it, or, when the connection failed, one sentence naming the device service and
    /// its endpoint (the transport's words go to the log).
    pub async fn describe(&self, status: &Status) -> String {
        let Some(mut transport) = transport_failure(status) else {
            return status.message().to_owned();
        };
        if transport == Transport::Broken {
            let found = probe(&self.endpoint, PROBE_WITHIN).await;
            if matches!(found, Transport::Silent | Transport::Tls) {
                transport = found;
            }
        }
        tracing::warn!(
            endpoint = %self.endpoint,
            code = ?status.code(),
            transport_error = droidmesh_runtime::peer::detail(status),
            "a call to the device service failed"
        );
        let words = match transport {
            Transport::TimedOut => format!(
                "did not answer within {}",
                humantime::format_duration(self.timeout)
            ),
            other => other.words().to_owned(),
        };
        format!("the device service at {} {words}", self.endpoint)
    }
}
