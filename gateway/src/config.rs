//! The gateway's settings (`[gateway]` in droidmesh.toml) and where its peers listen.
use serde::Deserialize;

/// The most steps a task may be given: agents refuse more (a step is a model call).
pub const MAX_STEPS_CEILING: u32 = 10_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Steps a task may take when the request does not say.
    pub default_max_steps: u32,
    /// Most steps a request may ask for.
    pub max_steps_limit: u32,
    /// Lease time-to-live asked of the device service; renewed every third of it.
    pub lease_ttl_ms: u32,
    /// A task waiting for a busy device asks again after this, then twice as long each time
    /// up to 5 s (or this, if longer); a lease this gateway releases wakes it at once.
    pub device_poll_ms: u64,
    /// Longest a task waits for a device (`wait_for_device`) before it fails.
    pub device_wait_ms: u64,
    /// Finished tasks kept for GetTask/WatchTask before the oldest are forgotten.
    pub keep_finished_tasks: usize,
    /// A finished task is forgotten this long after it ended, however few there are.
    pub keep_finished_for_ms: u64,
    /// Events kept per task (the newest; the completed event always stays).
    pub max_events_per_task: usize,
    /// Bytes of events kept per task (encoded size; the newest event always stays).
    pub max_event_bytes_per_task: usize,
    /// Longest goal, in bytes (UTF-8), for a task or a goal change; also the longest note,
    /// human reply, stop or cancel reason.
    pub max_goal_bytes: usize,
    /// Largest whole task request, in bytes as encoded (goal, schema, app card, models ...).
    pub max_request_bytes: usize,
    /// Messages (notes, replies, goal changes, stops) waiting for a task to take them; more
    /// are refused with RESOURCE_EXHAUSTED.
    pub max_queued_messages: usize,
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
    /// Reasoning mode: subgoals in a row whose executor did the same action on an unchanged
    /// screen that make a loop: the manager is asked to plan again, and the same loop again
    /// ends the task (`droidmesh_agent::loops`; direct mode has the executor's
    /// `loop_repeats`). 0 turns detection off.
    pub loop_repeats: u32,
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
    /// HTTP/2 keep-alive pings to agents and the device service are sent this often; one not
    /// answered within twice this ends the calls on that connection, so a peer that stopped
    /// (SIGSTOP, a frozen VM) in the middle of a step is noticed within three times this.
    pub peer_keepalive_ms: u64,
    /// Longest unary call to the device service (leases, device lists).
    pub device_call_timeout_ms: u64,
    /// Peer endpoints that are names (a headless Service) are resolved again this often, and
    /// at once when a connection to one of their replicas fails.
    pub resolve_every_ms: u64,
    /// Each replica of a balanced peer is asked for its health and its work this often; one
    /// that fails or drains gets no new calls until it answers well again.
    pub probe_every_ms: u64,
    /// A hosts file (`address name...` per line) consulted before DNS at every resolution, so
    /// replicas can be listed by hand and changed while the gateway runs.
    pub hosts_file: Option<std::path::PathBuf>,
    /// How long a call waits for a replica of an agent with room when every healthy one is at
    /// its capacity (a task keeps its device meanwhile); then it fails RESOURCE_EXHAUSTED.
    pub agent_wait_ms: u64,
    /// Where tasks are kept: `sqlite` (the file `gateway.sqlite` in `data_dir`),
    /// `sqlite:PATH`, `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (shared by every gateway
    /// replica pointed at it), or `memory` (lost when the gateway stops).
    pub store: String,
    /// With a PostgreSQL store: a replica that has not renewed its heartbeat there for this
    /// long is taken for stopped, and another ends the tasks it ran and gives their leases
    /// back. Heartbeats are renewed every fifth of it.
    pub replica_timeout_ms: u64,
    /// With a PostgreSQL store whose URL says `sslmode=require`: PEM CA certificates that
    /// sign the server's certificate (unset: the system's roots). The server's host name is
    /// checked too. Without `sslmode=require` the connection is cleartext.
    pub store_ca: Option<std::path::PathBuf>,
    /// The directory of the embedded store; unset: `$XDG_DATA_HOME/droidmesh`, else
    /// `~/.local/share/droidmesh`.
    pub data_dir: Option<std::path::PathBuf>,
    /// `[gateway.auth]`: API keys and tenants.
    pub auth: crate::auth::AuthConfig,
}

/// Where the gateway keeps its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreAt {
    Memory,
    Sqlite(std::path::PathBuf),
    Postgres(PostgresUrl),
}

/// A PostgreSQL connection URL; shown (`Debug`) without its password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(pub String);

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::persist::pg_pool::redact_url(&self.0))
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            default_max_steps: 30,
            max_steps_limit: 500,
            lease_ttl_ms: 30_000,
            device_poll_ms: 500,
            device_wait_ms: 600_000,
            keep_finished_tasks: 1_000,
            keep_finished_for_ms: 3_600_000,
            max_events_per_task: 2_000,
            max_event_bytes_per_task: 2 * 1024 * 1024,
            max_goal_bytes: 64 * 1024,
            max_request_bytes: 256 * 1024,
            max_queued_messages: 32,
            stop_grace_ms: 10_000,
            agent_call_timeout_ms: 600_000,
            human_wait_ms: 600_000,
            error_threshold: 2,
            loop_repeats: droidmesh_agent::loops::DEFAULT_REPEATS,
            max_handoff_hops: 3,
            max_manager_parse_failures: 3,
            conversation_turns: 10,
            max_conversations: 1_000,
            peer_keepalive_ms: 5_000,
            device_call_timeout_ms: 30_000,
            resolve_every_ms: 10_000,
            probe_every_ms: 1_000,
            hosts_file: None,
            agent_wait_ms: 60_000,
            store: "sqlite".into(),
            replica_timeout_ms: 15_000,
            store_ca: None,
            data_dir: None,
            auth: crate::auth::AuthConfig::default(),
        }
    }
}

impl GatewayConfig {
    /// Where `store` says tasks are kept.
    pub fn store_at(&self) -> Result<StoreAt, String> {
        let store = self.store.trim();
        if store == "memory" {
            return Ok(StoreAt::Memory);
        }
        if store == "sqlite" {
            return Ok(StoreAt::Sqlite(self.data_dir()?.join("gateway.sqlite")));
        }
        if let Some(path) = store.strip_prefix("sqlite:") {
            if path.trim().is_empty() {
                return Err("gateway.store 'sqlite:' names no file: write sqlite:PATH".into());
            }
            return Ok(StoreAt::Sqlite(path.trim().into()));
        }
        if store.starts_with("postgres://") || store.starts_with("postgresql://") {
            return Ok(StoreAt::Postgres(PostgresUrl(store.to_owned())));
        }
        Err(format!(
            "gateway.store must be 'sqlite', 'sqlite:PATH', \
             'postgres://USER:PASSWORD@HOST:PORT/DATABASE' or 'memory', got '{}'",
            crate::record::cut(store.split('@').next_back().unwrap_or_default(), 80)
        ))
    }

    fn data_dir(&self) -> Result<std::path::PathBuf, String> {
        if let Some(dir) = &self.data_dir {
            return Ok(dir.clone());
        }
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        if let Some(xdg) = env("XDG_DATA_HOME") {
            return Ok(std::path::PathBuf::from(xdg).join("droidmesh"));
        }
        if let Some(home) = env("HOME") {
            return Ok(std::path::PathBuf::from(home).join(".local/share/droidmesh"));
        }
        Err("gateway.data_dir is not set and neither XDG_DATA_HOME nor HOME is: set gateway.data_dir, or gateway.store = \"memory\"".into())
    }

    /// Every problem with these settings, each naming its key (`gateway.<key> must ...`);
    /// empty when they are fine.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.default_max_steps == 0 || self.default_max_steps > self.max_steps_limit {
            problems.push(format!(
                "gateway.default_max_steps must be between 1 and gateway.max_steps_limit ({}), got {}",
                self.max_steps_limit, self.default_max_steps
            ));
        }
        if self.lease_ttl_ms < 3_000 {
            problems.push(format!(
                "gateway.lease_ttl_ms must be at least 3000, got {}",
                self.lease_ttl_ms
            ));
        }
        if self.max_steps_limit > MAX_STEPS_CEILING {
            problems.push(format!(
                "gateway.max_steps_limit must be at most {MAX_STEPS_CEILING} (what agents accept), got {}",
                self.max_steps_limit
            ));
        }
        if self.device_poll_ms == 0 {
            problems.push("gateway.device_poll_ms must be at least 1".into());
        }
        let at_least_1 = [
            ("device_wait_ms", self.device_wait_ms as usize),
            ("keep_finished_for_ms", self.keep_finished_for_ms as usize),
            ("max_events_per_task", self.max_events_per_task),
            ("max_goal_bytes", self.max_goal_bytes),
            ("max_queued_messages", self.max_queued_messages),
        ];
        for (name, _) in at_least_1.iter().filter(|(_, v)| *v == 0) {
            problems.push(format!("gateway.{name} must be at least 1, got 0"));
        }
        if self.max_event_bytes_per_task < 1024 {
            problems.push(format!(
                "gateway.max_event_bytes_per_task must be at least 1024, got {}",
                self.max_event_bytes_per_task
            ));
        }
        if self.max_request_bytes < self.max_goal_bytes {
            problems.push(format!(
                "gateway.max_request_bytes ({}) must be at least gateway.max_goal_bytes ({})",
                self.max_request_bytes, self.max_goal_bytes
            ));
        }
        for (name, v) in [
            ("peer_keepalive_ms", self.peer_keepalive_ms),
            ("device_call_timeout_ms", self.device_call_timeout_ms),
            ("resolve_every_ms", self.resolve_every_ms),
            ("agent_wait_ms", self.agent_wait_ms),
        ] {
            if v < 100 {
                problems.push(format!("gateway.{name} must be at least 100, got {v}"));
            }
        }
        if self.agent_call_timeout_ms < 100 {
            problems.push(format!(
                "gateway.agent_call_timeout_ms must be at least 100, got {}",
                self.agent_call_timeout_ms
            ));
        }
        if self.probe_every_ms < 10 {
            problems.push(format!(
                "gateway.probe_every_ms must be at least 10, got {}",
                self.probe_every_ms
            ));
        }
        if self.replica_timeout_ms < 1_000 {
            problems.push(format!(
                "gateway.replica_timeout_ms must be at least 1000, got {}",
                self.replica_timeout_ms
            ));
        }
        if self.human_wait_ms == 0 {
            problems.push("gateway.human_wait_ms must be at least 1".into());
        }
        if self.error_threshold == 0 {
            problems.push("gateway.error_threshold must be at least 1".into());
        }
        if self.loop_repeats == 1 {
            problems.push(
                "gateway.loop_repeats must be 0 (no loop detection) or at least 2, got 1 (every action would be a loop)"
                    .into(),
            );
        }
        if self.max_manager_parse_failures == 0 {
            problems.push("gateway.max_manager_parse_failures must be at least 1".into());
        }
        if let Err(e) = self.store_at() {
            problems.push(e);
        }
        problems
    }

    /// Every problem at once, joined with "; " (what callers that take one message get).
    pub fn validate(&self) -> Result<(), String> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_store_is_named_by_its_url_and_never_shown_with_its_password() {
        for url in [
            "postgres://gw:s3cret@db:5432/tasks",
            "postgresql://gw:s3cret@db:5432/tasks",
        ] {
            let cfg = GatewayConfig {
                store: format!(" {url} "),
                ..GatewayConfig::default()
            };
            let at = cfg.store_at().unwrap();
            assert_eq!(at, StoreAt::Postgres(PostgresUrl(url.into())));
            let shown = format!("{at:?}");
            assert!(
                shown.contains("gw@db:5432/tasks") && !shown.contains("s3cret"),
                "{shown}"
            );
        }
        let bad = GatewayConfig {
            store: "mysql://gw:s3cret@db/tasks".into(),
            ..GatewayConfig::default()
        };
        let e = bad.store_at().unwrap_err();
        assert!(
            e.contains("postgres://USER:PASSWORD@HOST:PORT/DATABASE"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_step_limit_above_what_agents_accept_is_refused() {
        assert_eq!(GatewayConfig::default().validate(), Ok(()));
        let cfg = GatewayConfig {
            max_steps_limit: 20_000,
            ..GatewayConfig::default()
        };
        assert_eq!(
            cfg.validate(),
            Err(
                "gateway.max_steps_limit must be at most 10000 (what agents accept), got 20000"
                    .into()
            )
        );
    }

    #[test]
    fn a_loop_of_one_action_is_refused_and_zero_turns_detection_off() {
        let cfg = |loop_repeats| GatewayConfig {
            loop_repeats,
            ..GatewayConfig::default()
        };
        assert_eq!(
            cfg(1).validate(),
            Err("gateway.loop_repeats must be 0 (no loop detection) or at least 2, got 1 (every action would be a loop)".into())
        );
        assert_eq!(cfg(0).validate(), Ok(()));
        assert_eq!(cfg(2).validate(), Ok(()));
    }
}
