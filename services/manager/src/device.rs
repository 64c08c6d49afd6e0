//! Reading the task's device through the device service. Reads need no lease. Only the
//! device services this manager is configured with are read (`AllowedEndpoints`: its default
//! and `manager.device_endpoints`); channels are kept per endpoint in a bounded cache, so a
//! plan does not open a connection of its own (both through the agents' shared
//! `droidmesh_runtime::device::DeviceClients`).
use std::time::Duration;

use droidmesh_proto::v1::{DeviceBinding, GetStateRequest, UiState};
use droidmesh_runtime::device::{DeviceClients, DialError};

use crate::config::{DEVICE_ENDPOINTS, ManagerConfig};
use crate::error::ManagerError;

pub(crate) struct Devices {
    /// The device services a request may name; the default one (used when a request names
    /// none) may be empty.
    clients: DeviceClients,
    screenshot_max_side: u32,
}

impl Devices {
    /// Checks the endpoints now, so a bad one fails at start rather than at a plan.
    pub(crate) fn new(cfg: &ManagerConfig, default_endpoint: String) -> Result<Self, String> {
        Ok(Self {
            clients: DeviceClients::new(
                &default_endpoint,
                &cfg.device_endpoints,
                DEVICE_ENDPOINTS,
                Duration::from_millis(cfg.device_timeout_ms),
                cfg.device_channels,
            )?,
            screenshot_max_side: cfg.screenshot_max_side,
        })
    }

    /// The device's screen and phone state, with a downscaled screenshot when asked.
    pub(crate) async fn read(
        &self,
        binding: Option<&DeviceBinding>,
        screenshot: bool,
    ) -> Result<UiState, ManagerError> {
        let serial = binding
            .and_then(|b| b.lease.as_ref())
            .map(|l| l.serial.trim().to_owned())
            .unwrap_or_default();
        if serial.is_empty() {
            return Err(ManagerError::InvalidArgument(
                "device.lease.serial is empty: name the task's device, whose state the plan \
                 is based on"
                    .into(),
            ));
        }
        let named = binding.map_or("", |b| b.endpoint.trim());
        // Only a configured device service is read, in its configured spelling.
        let link = self.clients.link(named).map_err(|e| {
            ManagerError::InvalidArgument(match e {
                DialError::NoDefault => "device.endpoint is empty and this manager has no \
                                         default device service"
                    .into(),
                DialError::NotAllowed(e) => format!("device endpoint '{named}': {e}"),
                DialError::Channel { endpoint, detail } => {
                    format!("device endpoint '{endpoint}': {detail}")
                }
            })
        })?;
        let endpoint = link.endpoint().to_owned();
        let req = GetStateRequest {
            serial: serial.clone(),
            include_screenshot: screenshot,
            screenshot_max_side: self.screenshot_max_side,
            masks: Vec::new(),
        };
        link.client()
            .get_state(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| unreadable(serial, endpoint, &s))
    }
}

/// Why a device read failed: the caller named a device the service does not know, asked for
/// something it refuses, or the service (or the device) could not answer.
fn unreadable(serial: String, endpoint: String, s: &tonic::Status) -> ManagerError {
    match s.code() {
        tonic::Code::NotFound => ManagerError::UnknownDevice {
            serial,
            endpoint,
            detail: s.message().to_owned(),
        },
        tonic::Code::InvalidArgument => ManagerError::InvalidArgument(format!(
            "the device service at {endpoint} refused to read device {serial}: {}",
            s.message()
        )),
        code => ManagerError::DeviceUnreadable {
            serial,
            endpoint,
            detail: format!("{code:?}: {}", s.message()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_endpoints_are_refused_at_start_and_per_request() {
        let cfg = ManagerConfig::default();
        let devices = Devices::new(&cfg, "http://127.0.0.1:1".into()).unwrap();
        let binding = DeviceBinding {
            endpoint: "not a uri at all".into(),
            lease: Some(droidmesh_proto::v1::LeaseRef {
                serial: "emulator-5554".into(),
                lease_id: String::new(),
            }),
        };
        match devices.read(Some(&binding), false).await {
            Err(ManagerError::InvalidArgument(m)) => assert!(
                m.contains("'not a uri at all'") && m.contains(DEVICE_ENDPOINTS),
                "{m}"
            ),
            other => panic!("expected a refusal naming the endpoint, got {other:?}"),
        }
        assert!(Devices::new(&cfg, "::::".into()).is_err());
        let listed = ManagerConfig {
            device_endpoints: vec!["http://exa mple:1".into()],
            ..ManagerConfig::default()
        };
        assert!(Devices::new(&listed, "http://127.0.0.1:1".into()).is_err());
    }
}
