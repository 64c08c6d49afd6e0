//! The one device service client the agents share. An agent (executor, manager, text
//! manipulator) is told in each request which device service holds the task's device;
//! [`DeviceClients`] checks that name against the endpoints the agent was configured with
//! ([`AllowedEndpoints`], before any channel is made), dials the configured spelling over a
//! bounded per-endpoint channel cache ([`ChannelCache`]), and hands back a [`DeviceLink`]: the
//! client and where it points, so a failed call can name the device service that failed and
//! how ("the device service at http://10.0.0.5:50051 did not answer within 30s") rather than
//! the transport's own words. Each agent turns a [`DialError`] into its own error type.
use std::sync::Arc;
use std::time::Duration;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use tonic::Status;

use crate::allowed::{AllowedEndpoints, NotAllowed};
use crate::client::{ChannelCache, ClientOptions, TracedChannel};
use crate::peer::{Transport, probe, transport_failure};

/// How long a device service whose connection broke is given to answer a fresh one.
const PROBE_WITHIN: Duration = Duration::from_secs(1);

/// The client type every agent calls the device service with.
pub type DeviceClient = DeviceServiceClient<TracedChannel>;

/// Why no client was made for a request's device service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    /// The request named an endpoint the agent is not configured with.
    #[error(transparent)]
    NotAllowed(#[from] NotAllowed),
    /// The request named no endpoint and the agent has no default device service.
    #[error("no device service named and no default configured: name one in device.endpoint")]
    NoDefault,
    /// A channel to a configured endpoint cannot be made.
    #[error("{detail}")]
    Channel { endpoint: String, detail: String },
}

/// The device services an agent may call and a channel to each, made on first use.
#[derive(Debug)]
pub struct DeviceClients {
    allowed: AllowedEndpoints,
    channels: ChannelCache,
    /// Each call's deadline.
    timeout: Duration,
}

impl DeviceClients {
    /// Clients of `default` (may be empty) and of the endpoints `setting` lists (`more`); at
    /// most `capacity` channels are kept, the least recently used dropped first. An entry that
    /// is not an endpoint is refused, named, and so is one no channel can be made for.
    pub fn new(
        default: &str,
        more: &[String],
        setting: &'static str,
        timeout: Duration,
        capacity: usize,
    ) -> Result<Self, String> {
        let options = ClientOptions {
            request_timeout: Some(timeout),
            ..ClientOptions::default()
        };
        let clients = Self {
            allowed: AllowedEndpoints::new(default, more, setting)?,
            channels: ChannelCache::new(options, capacity),
            timeout,
        };
        // Channels connect lazily: this checks each endpoint's form, and dials nothing.
        for endpoint in clients.allowed.configured() {
            ChannelCache::new(ClientOptions::default(), 1)
                .get(endpoint)
                .map_err(|e| format!("device service {endpoint}: {e}"))?;
        }
        Ok(clients)
    }

    /// A link to the device service a request names (`requested`; the default when it names
    /// none), dialled in its configured spelling. Makes no network call.
    pub fn link(&self, requested: &str) -> Result<DeviceLink, DialError> {
        let endpoint = self.allowed.pick(requested)?;
        if endpoint.is_empty() {
            return Err(DialError::NoDefault);
        }
        let channel = self
            .channels
            .get(&endpoint)
            .map_err(|e| DialError::Channel {
                endpoint: endpoint.clone(),
                detail: e.to_string(),
            })?;
        Ok(DeviceLink::new(
            DeviceServiceClient::new(channel),
            &endpoint,
            self.timeout,
        ))
    }

    /// How many endpoints have a channel now.
    pub fn cached(&self) -> usize {
        self.channels.endpoints().len()
    }
}

/// A client of one device service and where it points.
#[derive(Debug, Clone)]
pub struct DeviceLink {
    client: DeviceClient,
    endpoint: Arc<str>,
    /// The channel's deadline for one call.
    timeout: Duration,
}

impl DeviceLink {
    /// A link over `client` (a test may pass one on any channel), calls cut at `timeout`.
    pub fn new(client: DeviceClient, endpoint: &str, timeout: Duration) -> Self {
        Self {
            client,
            endpoint: endpoint.into(),
            timeout,
        }
    }

    /// A client for one call (clients are cheap handles on one channel).
    pub fn client(&self) -> DeviceClient {
        self.client.clone()
    }

    /// The endpoint dialled, as configured.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
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
            transport_error = crate::peer::detail(status),
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

#[cfg(test)]
mod tests {
    use super::*;

    const SETTING: &str = "agent.device_endpoints";

    #[tokio::test]
    async fn links_go_to_configured_endpoints_only_in_their_configured_spelling() {
        let more: Vec<String> = (2..40).map(|p| format!("http://127.0.0.1:{p}")).collect();
        let clients = DeviceClients::new(
            "http://127.0.0.1:1",
            &more,
            SETTING,
            Duration::from_secs(1),
            16,
        )
        .unwrap();
        assert_eq!(clients.link("").unwrap().endpoint(), "http://127.0.0.1:1");
        assert_eq!(
            clients.link(" HTTP://127.0.0.1:1/ ").unwrap().endpoint(),
            "http://127.0.0.1:1"
        );
        assert_eq!(clients.cached(), 1, "one spelling, one channel");
        for endpoint in &more {
            clients.link(endpoint).unwrap();
        }
        assert_eq!(clients.cached(), 16, "the cache is bounded");
        let refused = clients.link("http://127.0.0.1:40").unwrap_err();
        assert!(
            matches!(&refused, DialError::NotAllowed(n) if n.endpoint == "http://127.0.0.1:40")
        );
        assert!(refused.to_string().contains(SETTING), "{refused}");
        assert!(matches!(
            clients.link("not a url"),
            Err(DialError::NotAllowed(_))
        ));
    }

    #[tokio::test]
    async fn no_default_and_bad_entries_are_refused() {
        let clients = DeviceClients::new("", &[], SETTING, Duration::ZERO, 4).unwrap();
        assert_eq!(clients.link("").unwrap_err(), DialError::NoDefault);
        let bad = DeviceClients::new(
            "http://127.0.0.1:1",
            &["ftp://x:1".into()],
            SETTING,
            Duration::ZERO,
            4,
        );
        assert!(
            bad.unwrap_err()
                .contains("agent.device_endpoints entry 'ftp://x:1'")
        );
        assert!(DeviceClients::new("::::", &[], SETTING, Duration::ZERO, 4).is_err());
    }
}
