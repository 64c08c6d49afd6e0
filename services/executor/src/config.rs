//! The executor's settings (`[executor]` in droidmesh.toml).
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::custom_tools::{McpServerConfig, ToolConfig};

/// The setting that lists the device services a request may name.
pub const DEVICE_ENDPOINTS: &str = "executor.device_endpoints";

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorConfig {
    /// Wall-clock limit of one step's JavaScript (device calls included).
    pub step_timeout_ms: u64,
    /// Wall-clock limit of a whole step: reading the device, the model call (every attempt)
    /// and the JavaScript. A model that does not answer in time fails the step.
    pub step_deadline_ms: u64,
    /// Memory limit of a task's JavaScript session.
    pub sandbox_memory_mb: usize,
    /// Consecutive failed steps (LLM error, no code, script error) that end the task.
    pub max_consecutive_failures: u32,
    /// Steps in a row doing the same actions on an unchanged screen that make a loop: the
    /// model is told in its next prompt, and the same loop again ends the task
    /// (`droidmesh_agent::loops`). 0 turns detection off.
    pub loop_repeats: u32,
    /// Earlier steps shown to the model in full; older ones are dropped from the prompt.
    pub history_steps: usize,
    /// Longest side of screenshots sent to the model.
    pub screenshot_max_side: u32,
    /// How long a task waits for a human's reply before failing.
    pub human_wait_ms: u64,
    /// Folder of prompt templates overriding the embedded ones (same relative paths).
    pub prompts_dir: Option<String>,
    /// App cards given to each CodeAct step: of the app in front and of apps the goal names.
    pub app_cards: droidmesh_app_cards::AppCardsConfig,
    /// Longest wait for one call to the device service (a read, a tap, a gesture: gestures
    /// last at most 10 s); a device service that does not answer in time fails the step,
    /// named with its endpoint.
    pub device_call_timeout_ms: u64,
    /// Device services a request may name besides the configured one (`endpoints.device`),
    /// e.g. `["http://devices-b:50051"]`; a request naming any other is refused before a
    /// connection is made. Compared by scheme, host (any case), port (80/443 when left out).
    pub device_endpoints: Vec<String>,
    /// Runs let into their start at once (setup, the first device read and prompt, until the
    /// first model call goes out), in arrival order; later ones wait their turn (see
    /// `droidmesh_executor::admission`). Unset: 4 per CPU core; 0: no limit.
    pub start_places: Option<usize>,
    /// Longest a start keeps its place: a slow first read delays the starts queued behind it
    /// by at most this.
    pub start_hold_ms: u64,
    /// Tools the operator defines, by name (`[executor.tools.<name>]`): webhooks and
    /// JavaScript functions CodeAct scripts call next to the device tools
    /// ([`crate::custom_tools`]).
    pub tools: BTreeMap<String, ToolConfig>,
    /// MCP servers the executor starts over stdio, by name (`[executor.mcp.<server>]`):
    /// their tools are CodeAct functions too, named `<prefix><tool>`
    /// ([`crate::custom_tools::mcp`]).
    pub mcp: BTreeMap<String, McpServerConfig>,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            step_timeout_ms: 60_000,
            step_deadline_ms: 300_000,
            sandbox_memory_mb: 64,
            max_consecutive_failures: 3,
            loop_repeats: droidmesh_agent::loops::DEFAULT_REPEATS,
            history_steps: 8,
            screenshot_max_side: 1024,
            human_wait_ms: 600_000,
            prompts_dir: None,
            app_cards: droidmesh_app_cards::AppCardsConfig::default(),
            device_call_timeout_ms: 30_000,
            device_endpoints: Vec::new(),
            start_places: None,
            start_hold_ms: 20,
            tools: BTreeMap::new(),
            mcp: BTreeMap::new(),
        }
    }
}

impl ExecutorConfig {
    /// How many starts may proceed at once (0: no limit).
    pub fn start_places(&self) -> usize {
        self.start_places.unwrap_or_else(|| {
            4 * std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    /// Every problem with these settings, each naming its key (`executor.<key> must ...`); empty
    /// when they are fine.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.step_timeout_ms < 100 {
            problems.push(format!(
                "executor.step_timeout_ms must be at least 100, got {}",
                self.step_timeout_ms
            ));
        }
        if self.step_deadline_ms < self.step_timeout_ms {
            problems.push(format!(
                "executor.step_deadline_ms ({}) must be at least step_timeout_ms ({})",
                self.step_deadline_ms, self.step_timeout_ms
            ));
        }
        if self.sandbox_memory_mb < 4 {
            problems.push(format!(
                "executor.sandbox_memory_mb must be at least 4, got {}",
                self.sandbox_memory_mb
            ));
        }
        if self.device_call_timeout_ms < 100 {
            problems.push(format!(
                "executor.device_call_timeout_ms must be at least 100, got {}",
                self.device_call_timeout_ms
            ));
        }
        if !(1..=60_000).contains(&self.start_hold_ms) {
            problems.push(format!(
                "executor.start_hold_ms must be between 1 and 60000, got {}",
                self.start_hold_ms
            ));
        }
        if let Err(e) =
            droidmesh_runtime::AllowedEndpoints::new("", &self.device_endpoints, DEVICE_ENDPOINTS)
        {
            problems.push(e);
        }
        if self.max_consecutive_failures == 0 {
            problems.push("executor.max_consecutive_failures must be at least 1".into());
        }
        if self.loop_repeats == 1 {
            problems.push(
                "executor.loop_repeats must be 0 (no loop detection) or at least 2, got 1 (every action would be a loop)"
                    .into(),
            );
        }
        if let Err(e) = droidmesh_app_cards::AppCards::new(&self.app_cards) {
            problems.push(format!("executor.{e}"));
        }
        problems.extend(crate::custom_tools::config::problems(
            &self.tools,
            self.step_timeout_ms,
        ));
        problems.extend(crate::custom_tools::mcp::config::problems(
            &self.mcp,
            self.step_timeout_ms,
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_turns_are_configured_within_bounds() {
        let cfg = ExecutorConfig::default();
        assert_eq!(cfg.validate(), Ok(()));
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        assert_eq!(cfg.start_places(), 4 * cores);
        let off = ExecutorConfig {
            start_places: Some(0),
            ..ExecutorConfig::default()
        };
        assert_eq!(off.start_places(), 0);
        for hold in [0, 60_001] {
            let bad = ExecutorConfig {
                start_hold_ms: hold,
                ..ExecutorConfig::default()
            };
            let err = bad.validate().unwrap_err();
            assert!(
                err.contains("executor.start_hold_ms") && err.contains(&hold.to_string()),
                "{err}"
            );
        }
        let bad = ExecutorConfig {
            device_endpoints: vec!["ftp://devices:21".into()],
            ..ExecutorConfig::default()
        };
        let err = bad.validate().unwrap_err();
        assert!(
            err.starts_with(
                "executor.device_endpoints entry 'ftp://devices:21' is not an endpoint"
            ),
            "{err}"
        );
    }

    #[test]
    fn every_problem_is_reported_at_once_each_naming_its_key() {
        let cfg = ExecutorConfig {
            sandbox_memory_mb: 1,
            max_consecutive_failures: 0,
            loop_repeats: 1,
            device_endpoints: vec!["ftp://devices:21".into()],
            ..ExecutorConfig::default()
        };
        let problems = cfg.problems();
        let keys = [
            "executor.sandbox_memory_mb",
            "executor.device_endpoints",
            "executor.max_consecutive_failures",
            "executor.loop_repeats",
        ];
        assert_eq!(problems.len(), keys.len(), "{problems:?}");
        let joined = cfg.validate().unwrap_err();
        for (problem, key) in problems.iter().zip(keys) {
            assert!(problem.starts_with(key), "{problem} should name {key}");
            assert!(joined.contains(problem.as_str()), "{joined}");
        }
    }
}
