//! The manager's settings (`[manager]` in droidmesh.toml).
use serde::Deserialize;

/// The setting that lists the device services a request may name.
pub const DEVICE_ENDPOINTS: &str = "manager.device_endpoints";

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ManagerConfig {
    /// Longest side of the screenshot sent to the model when a task has vision on.
    pub screenshot_max_side: u32,
    /// Deadline of one device read (`GetState`, screenshot included).
    pub device_timeout_ms: u64,
    /// Device service channels kept open, one per endpoint; the least recently used one is
    /// closed when a new endpoint would exceed it.
    pub device_channels: usize,
    /// Device services a request may name besides the configured one (`endpoints.device`),
    /// e.g. `["http://devices-b:50051"]`; a request naming any other is refused before a
    /// connection is made. Compared by scheme, host (any case), port (80/443 when left out).
    pub device_endpoints: Vec<String>,
    /// Folder of prompt templates overriding the embedded ones (same relative paths).
    pub prompts_dir: Option<String>,
    /// App cards given to the planner: of the app in front and of apps the request names.
    pub app_cards: droidmesh_app_cards::AppCardsConfig,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            screenshot_max_side: 1024,
            device_timeout_ms: 30_000,
            device_channels: 16,
            device_endpoints: Vec::new(),
            prompts_dir: None,
            app_cards: droidmesh_app_cards::AppCardsConfig::default(),
        }
    }
}

impl ManagerConfig {
    /// Every problem with these settings, each naming its key (`manager.<key> must ...`); empty
    /// when they are fine.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(64..=4096).contains(&self.screenshot_max_side) {
            problems.push(format!(
                "manager.screenshot_max_side must be between 64 and 4096, got {}",
                self.screenshot_max_side
            ));
        }
        if self.device_timeout_ms < 100 {
            problems.push(format!(
                "manager.device_timeout_ms must be at least 100, got {}",
                self.device_timeout_ms
            ));
        }
        if self.device_channels == 0 {
            problems.push("manager.device_channels must be at least 1".into());
        }
        if let Err(e) =
            droidmesh_runtime::AllowedEndpoints::new("", &self.device_endpoints, DEVICE_ENDPOINTS)
        {
            problems.push(e);
        }
        if let Err(e) = droidmesh_app_cards::AppCards::new(&self.app_cards) {
            problems.push(format!("manager.{e}"));
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
        assert_eq!(ManagerConfig::default().validate(), Ok(()));
        let err = ManagerConfig {
            device_channels: 0,
            ..ManagerConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.contains("manager.device_channels"), "{err}");
        let err = ManagerConfig {
            device_endpoints: vec!["http://".into()],
            ..ManagerConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(
            err.starts_with("manager.device_endpoints entry 'http://' is not an endpoint"),
            "{err}"
        );
        let parsed: Result<ManagerConfig, _> = serde_json::from_str(r#"{"device_chanels": 3}"#);
        assert!(parsed.is_err());
    }

    #[test]
    fn every_problem_is_reported_at_once_each_naming_its_key() {
        let cfg = ManagerConfig {
            screenshot_max_side: 1,
            device_channels: 0,
            ..ManagerConfig::default()
        };
        let problems = cfg.problems();
        let keys = ["manager.screenshot_max_side", "manager.device_channels"];
        assert_eq!(problems.len(), keys.len(), "{problems:?}");
        let joined = cfg.validate().unwrap_err();
        for (problem, key) in problems.iter().zip(keys) {
            assert!(problem.starts_with(key), "{problem} should name {key}");
            assert!(joined.contains(problem.as_str()), "{joined}");
        }
    }
}
