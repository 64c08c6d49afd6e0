//! Reading the task's device through the device service. Reads need no lease. Channels are
//! kept per endpoint in a small least-recently-used cache, so a plan does not open a
//! connection of its own.
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{DeviceBinding, GetStateRequest, UiState};
use droidmesh_runtime::{ClientOptions, TracedChannel};

use crate::config::ManagerConfig;
use crate::error::ManagerError;

pub(crate) struct Devices {
    /// Device service used when a request names none; may be empty.
    default_endpoint: String,
    opts: ClientOptions,
    screenshot_max_side: u32,
    capacity: usize,
    /// Most recently used last.
    channels: Mutex<VecDeque<(String, TracedChannel)>>,
}

impl Devices {
    /// Checks the default endpoint now, so a bad one fails at start rather than at a plan.
    pub(crate) fn new(cfg: &ManagerConfig, default_endpoint: String) -> Result<Self, String> {
        let devices = Self {
            default_endpoint: default_endpoint.trim().to_owned(),
            opts: ClientOptions {
                request_timeout: Some(Duration::from_millis(cfg.device_timeout_ms)),
                ..ClientOptions::default()
            },
            screenshot_max_side: cfg.screenshot_max_side,
            capacity: cfg.device_channels,
            channels: Mutex::new(VecDeque::new()),
        };
        if !devices.default_endpoint.is_empty() {
            devices
                .channel(&devices.default_endpoint)
                .map_err(|e| format!("default device service: {e}"))?;
        }
        Ok(devices)
    }

    /// Channels currently open.
    #[cfg(test)]
    fn open_channels(&self) -> Vec<String> {
        self.lock().iter().map(|(e, _)| e.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, TracedChannel)>> {
        // The cache holds no invariant a panicking holder could break.
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn channel(&self, endpoint: &str) -> Result<TracedChannel, ManagerError> {
        let mut cache = self.lock();
        if let Some(i) = cache.iter().position(|(e, _)| e == endpoint)
            && let Some(entry) = cache.remove(i)
        {
            let channel = entry.1.clone();
            cache.push_back(entry);
            return Ok(channel);
        }
        let channel = droidmesh_runtime::connect(endpoint, &self.opts).map_err(|e| {
            ManagerError::InvalidArgument(format!("device endpoint '{endpoint}': {e}"))
        })?;
        while cache.len() >= self.capacity {
            cache.pop_front();
        }
        cache.push_back((endpoint.to_owned(), channel.clone()));
        Ok(channel)
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
        let endpoint = binding
            .map(|b| b.endpoint.trim())
            .filter(|e| !e.is_empty())
            .unwrap_or(&self.default_endpoint)
            .to_owned();
        if endpoint.is_empty() {
            return Err(ManagerError::InvalidArgument(
                "device.endpoint is empty and this manager has no default device service".into(),
            ));
        }
        let mut client = DeviceServiceClient::new(self.channel(&endpoint)?);
        let req = GetStateRequest {
            serial: serial.clone(),
            include_screenshot: screenshot,
            screenshot_max_side: self.screenshot_max_side,
        };
        client
            .get_state(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ManagerError::DeviceUnreadable {
                serial,
                endpoint,
                detail: format!("{:?}: {}", s.code(), s.message()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn channels_are_reused_and_the_least_recently_used_is_closed() {
        let cfg = ManagerConfig {
            device_channels: 2,
            ..ManagerConfig::default()
        };
        let devices = Devices::new(&cfg, "http://127.0.0.1:1".into()).unwrap();
        devices.channel("http://127.0.0.1:2").unwrap();
        devices.channel("http://127.0.0.1:1").unwrap();
        assert_eq!(
            devices.open_channels(),
            ["http://127.0.0.1:2", "http://127.0.0.1:1"]
        );
        devices.channel("http://127.0.0.1:3").unwrap();
        assert_eq!(
            devices.open_channels(),
            ["http://127.0.0.1:1", "http://127.0.0.1:3"]
        );
        assert!(matches!(
            devices.channel("not a uri at all"),
            Err(ManagerError::InvalidArgument(_))
        ));
        assert!(Devices::new(&cfg, "::::".into()).is_err());
    }
}
