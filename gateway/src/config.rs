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
    /// Longest wait for one agent call: a plan, a subgoal (a scripter session included), the
    /// structuring of an answer. A subgoal that outlasts it is a failed result for the manager.
    pub agent_call_timeout_ms: u64,
    /// Reasoning mode: how long a task waits for a human's reply before it fails (direct mode's
    /// CodeAct run has the executor's `human_wait_ms`).
    pub human_wait_ms: u64,
    /// Reasoning mode: consecutive failed subgoals after which the manager sees the error
    /// history.
    pub error_threshold: usize,
    /// Reasoning mode: handoffs one subgoal may go through (an agent asking another to take
    /// over) before the result goes back to the manager.
    pub max_handoff_hops: u32,
    /// Reasoning mode: consecutive manager replies that could not be used before the task
    /// fails.
    pub max_manager_parse_failures: u32,
    /// Goals and answers kept per conversation (tasks sharing a conversation_id).
    pub conversation_turns: usize,
    /// Conversations kept; the least recently used is forgotten first.
    pub max_conversations: usize,
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
            agent_call_timeout_ms: 600_000,
            human_wait_ms: 600_000,
            error_threshold: 2,
            max_handoff_hops: 3,
            max_manager_parse_failures: 3,
            conversation_turns: 10,
            max_conversations: 1_000,
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
        if self.agent_call_timeout_ms < 100 {
            return Err(format!(
                "gateway.agent_call_timeout_ms must be at least 100, got {}",
                self.agent_call_timeout_ms
            ));
        }
        if self.human_wait_ms == 0 {
            return Err("gateway.human_wait_ms must be at least 1".into());
        }
        if self.error_threshold == 0 {
            return Err("gateway.error_threshold must be at least 1".into());
        }
        if self.max_manager_parse_failures == 0 {
            return Err("gateway.max_manager_parse_failures must be at least 1".into());
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
