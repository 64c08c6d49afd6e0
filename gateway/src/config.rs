//! The gateway's settings (`[gateway]` in droidmesh.toml) and where its peers listen.
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Steps a task may take when the request does not say.
    pub default_max_steps: u32,
    /// Most steps a request may ask for.
    pub max_steps_limit: u32,
    /// Lease time-to-live asked of the device service; renewed every third of it.
    pub lease_ttl_ms: u32,
    /// How often a task waiting for a busy device asks again.
    pub device_poll_ms: u64,
    /// Finished tasks kept for GetTask/WatchTask before the oldest are forgotten.
    pub keep_finished_tasks: usize,
    /// After a stop request, how long the agent may take to end its step before the task is
    /// cut off.
    pub stop_grace_ms: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            default_max_steps: 30,
            max_steps_limit: 500,
            lease_ttl_ms: 30_000,
            device_poll_ms: 500,
            keep_finished_tasks: 1_000,
            stop_grace_ms: 10_000,
        }
    }
}

impl GatewayConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.default_max_steps == 0 || self.default_max_steps > self.max_steps_limit {
            return Err(format!(
                "gateway.default_max_steps must be between 1 and gateway.max_steps_limit ({}), got {}",
                self.max_steps_limit, self.default_max_steps
            ));
        }
        if self.lease_ttl_ms < 3_000 {
            return Err(format!(
                "gateway.lease_ttl_ms must be at least 3000, got {}",
                self.lease_ttl_ms
            ));
        }
        if self.device_poll_ms == 0 {
            return Err("gateway.device_poll_ms must be at least 1".into());
        }
        Ok(())
    }
}

/// gRPC endpoints of the services the gateway calls (comma-separated lists balance).
#[derive(Debug, Clone)]
pub struct Peers {
    pub device: String,
    pub executor: String,
    pub manager: String,
    pub scripter: String,
    pub text_manipulator: String,
}
