//! The text manipulator's settings (`[text_manipulator]` in droidmesh.toml).
use serde::Deserialize;

/// The setting that lists the device services a request may name.
pub const DEVICE_ENDPOINTS: &str = "text_manipulator.device_endpoints";

/// Most further model calls one request may ask for (`max_retries`).
pub const MAX_RETRIES_LIMIT: u32 = 10;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TextManipulatorConfig {
    /// Further model calls after a failed program, when a request's `max_retries` is 0.
    pub max_retries: u32,
    /// Wall-clock limit of one program run.
    pub sandbox_timeout_ms: u64,
    /// Memory limit of one program run's JavaScript engine.
    pub sandbox_memory_mb: usize,
    /// Longest text, in characters, read from a field or produced by a program.
    pub max_text_chars: usize,
    /// Deadline of each call to the device service (reading the state, typing).
    pub device_timeout_ms: u64,
    /// Folder of prompt templates overriding the embedded ones (same relative paths).
    pub prompts_dir: Option<String>,
    /// Device services a request may name besides the configured one (`endpoints.device`),
    /// e.g. `["http://devices-b:50051"]`; a request naming any other is refused before a
    /// connection is made. Compared by scheme, host (any case), port (80/443 when left out).
    pub device_endpoints: Vec<String>,
}

impl Default for TextManipulatorConfig {
    fn default() -> Self {
        Self {
            max_retries: 4,
            sandbox_timeout_ms: 1_000,
            sandbox_memory_mb: 16,
            max_text_chars: 4_000,
            device_timeout_ms: 30_000,
            prompts_dir: None,
            device_endpoints: Vec::new(),
        }
    }
}

impl TextManipulatorConfig {
    /// Every problem with these settings, each naming its key (`text_manipulator.<key> must ...`); empty
    /// when they are fine.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_retries > MAX_RETRIES_LIMIT {
            problems.push(format!(
                "text_manipulator.max_retries must be at most {MAX_RETRIES_LIMIT}, got {}",
                self.max_retries
            ));
        }
        if !(10..=60_000).contains(&self.sandbox_timeout_ms) {
            problems.push(format!(
                "text_manipulator.sandbox_timeout_ms must be between 10 and 60000, got {}",
                self.sandbox_timeout_ms
            ));
        }
        if !(2..=1_024).contains(&self.sandbox_memory_mb) {
            problems.push(format!(
                "text_manipulator.sandbox_memory_mb must be between 2 and 1024, got {}",
                self.sandbox_memory_mb
            ));
        }
        if !(1..=100_000).contains(&self.max_text_chars) {
            problems.push(format!(
                "text_manipulator.max_text_chars must be between 1 and 100000, got {}",
                self.max_text_chars
            ));
        }
        if self.device_timeout_ms < 100 {
            problems.push(format!(
                "text_manipulator.device_timeout_ms must be at least 100, got {}",
                self.device_timeout_ms
            ));
        }
        if let Err(e) =
            droidmesh_runtime::AllowedEndpoints::new("", &self.device_endpoints, DEVICE_ENDPOINTS)
        {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        assert!(TextManipulatorConfig::default().validate().is_ok());
        let bad = TextManipulatorConfig {
            sandbox_timeout_ms: 0,
            ..TextManipulatorConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "text_manipulator.sandbox_timeout_ms must be between 10 and 60000, got 0"
        );
        let bad = TextManipulatorConfig {
            max_retries: 11,
            ..TextManipulatorConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("max_retries"));
        let bad = TextManipulatorConfig {
            device_endpoints: vec!["ftp://devices:21".into()],
            ..TextManipulatorConfig::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .starts_with("text_manipulator.device_endpoints entry 'ftp://devices:21'"),
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed: Result<TextManipulatorConfig, _> =
            serde_json::from_value(serde_json::json!({ "max_retries": 2, "retries": 3 }));
        assert!(parsed.unwrap_err().to_string().contains("unknown field"));
        let parsed: TextManipulatorConfig =
            serde_json::from_value(serde_json::json!({ "max_retries": 2 })).unwrap();
        assert_eq!(parsed.max_retries, 2);
        assert_eq!(parsed.max_text_chars, 4_000);
    }

    #[test]
    fn every_problem_is_reported_at_once_each_naming_its_key() {
        let cfg = TextManipulatorConfig {
            sandbox_timeout_ms: 1,
            max_text_chars: 0,
            ..TextManipulatorConfig::default()
        };
        let problems = cfg.problems();
        let keys = [
            "text_manipulator.sandbox_timeout_ms",
            "text_manipulator.max_text_chars",
        ];
        assert_eq!(problems.len(), keys.len(), "{problems:?}");
        let joined = cfg.validate().unwrap_err();
        for (problem, key) in problems.iter().zip(keys) {
            assert!(problem.starts_with(key), "{problem} should name {key}");
            assert!(joined.contains(problem.as_str()), "{joined}");
        }
    }
}
