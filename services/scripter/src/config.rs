//! The scripter's settings (`[scripter]` in droidmesh.toml).
use std::path::PathBuf;

use serde::Deserialize;

use droidmesh_netguard::AllowList;

/// Largest step budget a request may ask for; larger values are lowered to it.
pub const MAX_STEPS_CEILING: u32 = 100;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScripterConfig {
    /// Step budget of a request that asks for 0 steps.
    pub default_max_steps: u32,
    /// Wall-clock limit of one step's JavaScript, HTTP requests included.
    pub step_timeout_ms: u64,
    /// Memory limit of a run's JavaScript session.
    pub sandbox_memory_mb: usize,
    /// Consecutive failed steps (model error, script error) that end the run.
    pub max_consecutive_failures: u32,
    /// Earlier steps shown to the model in full; older ones are summarised by their count.
    pub history_steps: usize,
    /// Runs served at once by this replica; more are refused with RESOURCE_EXHAUSTED.
    pub max_concurrent_runs: usize,
    pub http: HttpConfig,
    /// Parent folder of the per-task workspaces; default `<system temp>/droidmesh-scripter`.
    pub workspace_dir: Option<PathBuf>,
    /// Bytes of files one task's workspace may hold.
    pub workspace_max_bytes: u64,
    /// Task workspaces kept; the least recently used beyond this many are deleted.
    pub keep_workspaces: usize,
    /// Folder of prompt templates overriding the embedded ones (same relative paths).
    pub prompts_dir: Option<String>,
    /// This replica's name in the locations of the files it reports
    /// (`scripter://<replica>/<task id>/<name>`) and in what it says of files it does not
    /// have. Default: `$HOSTNAME` (the pod's name under Kubernetes), else the machine's host
    /// name, else `scripter`.
    pub replica: Option<String>,
}

/// Longest replica name, in bytes (a DNS label's limit).
const MAX_REPLICA_NAME: usize = 63;

fn is_replica_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_REPLICA_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// What a script's HTTP requests may do.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Time one request may take, redirects and reading the body included (a script may ask
    /// for less, never more; the step's own limit also applies).
    pub timeout_ms: u64,
    /// Largest response body read; a larger one fails the request.
    pub max_response_bytes: u64,
    /// Redirects followed per request.
    pub max_redirects: u32,
    /// Hosts that may be reached although they are (or resolve to) loopback, private,
    /// link-local or metadata addresses: names or IP literals, optionally `:port`; exact,
    /// case-insensitive.
    pub allow_hosts: Vec<String>,
    /// HTTP requests one run may send (each redirect hop counts).
    pub max_requests_per_run: u32,
}

impl Default for ScripterConfig {
    fn default() -> Self {
        Self {
            default_max_steps: 10,
            step_timeout_ms: 30_000,
            sandbox_memory_mb: 64,
            max_consecutive_failures: 3,
            history_steps: 10,
            max_concurrent_runs: 32,
            http: HttpConfig::default(),
            workspace_dir: None,
            workspace_max_bytes: 50 * 1024 * 1024,
            keep_workspaces: 100,
            prompts_dir: None,
            replica: None,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            timeout_ms: 15_000,
            max_response_bytes: 5 * 1024 * 1024,
            max_redirects: 5,
            allow_hosts: Vec::new(),
            max_requests_per_run: 100,
        }
    }
}

impl ScripterConfig {
    /// The workspace parent folder in effect.
    pub fn workspace_root(&self) -> PathBuf {
        self.workspace_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("droidmesh-scripter"))
    }

    /// Every problem with these settings, each naming its key (`scripter.<key> must ...`);
    /// empty when they are fine.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let at_least = [
            ("default_max_steps", 1, u64::from(self.default_max_steps)),
            ("step_timeout_ms", 100, self.step_timeout_ms),
            ("sandbox_memory_mb", 4, self.sandbox_memory_mb as u64),
            (
                "max_consecutive_failures",
                1,
                u64::from(self.max_consecutive_failures),
            ),
            ("history_steps", 1, self.history_steps as u64),
            ("max_concurrent_runs", 1, self.max_concurrent_runs as u64),
            ("workspace_max_bytes", 1, self.workspace_max_bytes),
            ("keep_workspaces", 1, self.keep_workspaces as u64),
            ("http.timeout_ms", 10, self.http.timeout_ms),
            ("http.max_response_bytes", 1, self.http.max_response_bytes),
            (
                "http.max_requests_per_run",
                1,
                u64::from(self.http.max_requests_per_run),
            ),
        ];
        for (name, min, got) in at_least {
            if got < min {
                problems.push(format!("scripter.{name} must be at least {min}, got {got}"));
            }
        }
        if self.default_max_steps > MAX_STEPS_CEILING {
            problems.push(format!(
                "scripter.default_max_steps must be at most {MAX_STEPS_CEILING}, got {}",
                self.default_max_steps
            ));
        }
        if self.http.max_redirects > 20 {
            problems.push(format!(
                "scripter.http.max_redirects must be at most 20, got {}",
                self.http.max_redirects
            ));
        }
        if let Err(e) = AllowList::new(&self.http.allow_hosts) {
            problems.push(format!("scripter.http.{e}"));
        }
        if self
            .workspace_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            problems.push("scripter.workspace_dir is empty; leave it out for the default".into());
        }
        if let Some(name) = &self.replica
            && !is_replica_name(name)
        {
            problems.push(format!(
                "scripter.replica must be 1 to {MAX_REPLICA_NAME} letters, digits, `.`, `_` or `-`, got `{name}`; leave it out for the host name"
            ));
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

    /// The name this replica gives itself: `replica`, else `$HOSTNAME`, else the host name in
    /// `/etc/hostname`, else `scripter` (names that are not fit are passed over).
    pub fn replica_name(&self) -> String {
        let fit = |n: &String| is_replica_name(n);
        [self.replica.clone(), std::env::var("HOSTNAME").ok()]
            .into_iter()
            .flatten()
            .find(fit)
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|s| s.trim().to_owned())
                    .filter(fit)
            })
            .unwrap_or_else(|| "scripter".to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        assert_eq!(ScripterConfig::default().validate(), Ok(()));
        let mut c = ScripterConfig::default();
        c.http.allow_hosts = vec!["http://x".into()];
        let e = c.validate().unwrap_err();
        assert!(
            e.starts_with("scripter.http.allow_hosts entry `http://x`"),
            "{e}"
        );
        let c = ScripterConfig {
            step_timeout_ms: 5,
            ..ScripterConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err(),
            "scripter.step_timeout_ms must be at least 100, got 5"
        );
        let c = ScripterConfig {
            replica: Some("pod/1".into()),
            ..ScripterConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("scripter.replica must be"), "{e}");
        let c = ScripterConfig {
            replica: Some("scripter-7f9c".into()),
            ..ScripterConfig::default()
        };
        assert_eq!(c.replica_name(), "scripter-7f9c");
        assert!(is_replica_name(&ScripterConfig::default().replica_name()));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let bad: Result<ScripterConfig, _> =
            serde_json::from_value(serde_json::json!({"http": {"timeout": 5}}));
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("unknown field `timeout`")
        );
        let ok: ScripterConfig = serde_json::from_value(serde_json::json!({
            "http": {"allow_hosts": ["localhost:8080"]}, "keep_workspaces": 3
        }))
        .unwrap();
        assert_eq!(ok.http.allow_hosts, vec!["localhost:8080"]);
        assert_eq!(ok.http.max_redirects, 5);
    }

    #[test]
    fn every_problem_is_reported_at_once_each_naming_its_key() {
        let cfg = ScripterConfig {
            default_max_steps: 0,
            sandbox_memory_mb: 1,
            replica: Some("no spaces allowed".into()),
            ..ScripterConfig::default()
        };
        let problems = cfg.problems();
        let keys = [
            "scripter.default_max_steps",
            "scripter.sandbox_memory_mb",
            "scripter.replica",
        ];
        assert_eq!(problems.len(), keys.len(), "{problems:?}");
        let joined = cfg.validate().unwrap_err();
        for (problem, key) in problems.iter().zip(keys) {
            assert!(problem.starts_with(key), "{problem} should name {key}");
            assert!(joined.contains(problem.as_str()), "{joined}");
        }
    }
}
