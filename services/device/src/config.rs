//! Configuration of the device service (the `[device]` section of the droidmesh config).
use serde::Deserialize;

/// Settings of the device service. Every field has a default, so an empty section is valid.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceConfig {
    /// Address of the adb server, `host:port`. Empty disables the adb server transport.
    pub adb_server: String,
    /// Devices reached directly over ADB-over-TCP (`host:port`), without an adb server.
    pub direct_devices: Vec<String>,
    /// Lease lifetime when the caller asks for 0.
    pub lease_default_ttl_ms: u32,
    /// Longest lease a caller may ask for; longer requests are clamped to it.
    pub lease_max_ttl_ms: u32,
    /// Upper bound on every device command; a device that stops answering fails within it.
    pub command_timeout_ms: u64,
    /// Longest side of screenshots when a request leaves it at 0 (fit for an LLM).
    pub screenshot_max_side: u32,
    /// Private key for direct TCP devices that ask for authentication; empty uses
    /// `~/.android/adbkey` (a throwaway key is generated when none exists).
    pub adb_key_path: String,
    /// After an action, how long at most to wait for the UI to settle (0: do not wait).
    pub settle_max_ms: u64,
    /// How long an unchanged screen must stay unchanged after an action before it counts as
    /// settled (catches effects that land late).
    pub settle_quiet_ms: u64,
    /// Least time between the starts of two observations while settling.
    pub settle_interval_ms: u64,
    /// Where the UI tree is read from: "auto" (the companion accessibility service
    /// `com.mobilerun.portal` when the device has it, else `uiautomator dump`), "uiautomator"
    /// or "portal".
    pub ui_source: crate::portal::UiSourcePref,
    /// Whether `ConnectDevice` may attach phones by address. Off by default: it makes this
    /// service dial any address a caller of its port names. Turn it on only where the port
    /// is reached by operators alone (tenants never reach it: the gateway has no way to it).
    pub allow_connect: bool,
    /// Where the masks of typed secrets are kept across restarts of this service (see
    /// `mask_store`); empty: in memory only. `droidmesh serve device` and `droidmesh up` use
    /// `$XDG_DATA_HOME/droidmesh/device` (or `~/.local/share/droidmesh/device`) when unset.
    pub state_dir: String,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            adb_server: "127.0.0.1:5037".to_owned(),
            direct_devices: Vec::new(),
            lease_default_ttl_ms: 30_000,
            lease_max_ttl_ms: 3_600_000,
            command_timeout_ms: 10_000,
            screenshot_max_side: 1024,
            adb_key_path: String::new(),
            settle_max_ms: 3_000,
            settle_quiet_ms: 250,
            settle_interval_ms: 5,
            ui_source: crate::portal::UiSourcePref::Auto,
            allow_connect: false,
            state_dir: String::new(),
        }
    }
}

impl DeviceConfig {
    /// Every problem with these settings, each naming its key (`device.<key> must ...`); empty
    /// when they are fine.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.adb_server.is_empty() && parse_v4(&self.adb_server).is_none() {
            problems.push(format!(
                "device.adb_server must be an IPv4 host:port such as 127.0.0.1:5037, got '{}'",
                self.adb_server
            ));
        }
        for d in &self.direct_devices {
            if d.parse::<std::net::SocketAddr>().is_err() {
                problems.push(format!(
                    "device.direct_devices entries must be ip:port such as 192.168.1.20:5555, got '{d}'"
                ));
            }
        }
        if self.lease_default_ttl_ms == 0 {
            problems.push("device.lease_default_ttl_ms must be greater than 0".to_owned());
        }
        if self.lease_max_ttl_ms < self.lease_default_ttl_ms {
            problems.push(format!(
                "device.lease_max_ttl_ms ({}) must be at least device.lease_default_ttl_ms ({})",
                self.lease_max_ttl_ms, self.lease_default_ttl_ms
            ));
        }
        if self.command_timeout_ms == 0 {
            problems.push("device.command_timeout_ms must be greater than 0".to_owned());
        }
        if self.screenshot_max_side != 0 && self.screenshot_max_side < 64 {
            problems.push(format!(
                "device.screenshot_max_side must be 0 (full size) or at least 64, got {}",
                self.screenshot_max_side
            ));
        }
        if self.settle_max_ms > 60_000 {
            problems.push(format!(
                "device.settle_max_ms must be at most 60000 (a minute), got {}",
                self.settle_max_ms
            ));
        }
        if self.settle_max_ms > 0 && self.settle_quiet_ms > self.settle_max_ms {
            problems.push(format!(
                "device.settle_quiet_ms ({}) must not be longer than device.settle_max_ms ({})",
                self.settle_quiet_ms, self.settle_max_ms
            ));
        }
        if self.settle_interval_ms > 10_000 {
            problems.push(format!(
                "device.settle_interval_ms must be at most 10000, got {}",
                self.settle_interval_ms
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

    /// How actions wait for the UI.
    pub fn settle(&self) -> crate::settle::SettleConfig {
        crate::settle::SettleConfig {
            max: std::time::Duration::from_millis(self.settle_max_ms),
            quiet: std::time::Duration::from_millis(self.settle_quiet_ms),
            interval: std::time::Duration::from_millis(self.settle_interval_ms),
        }
    }
}

/// Parses `host:port` into an IPv4 socket address, resolving `localhost`.
pub(crate) fn parse_v4(addr: &str) -> Option<std::net::SocketAddrV4> {
    let addr = addr.replace("localhost:", "127.0.0.1:");
    addr.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_section_gives_defaults_and_validates() {
        let cfg: DeviceConfig = toml::from_str("").unwrap();
        assert_eq!(cfg, DeviceConfig::default());
        cfg.validate().unwrap();
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = toml::from_str::<DeviceConfig>("adb_sever = 'x'").unwrap_err();
        assert!(err.to_string().contains("adb_sever"), "{err}");
    }

    #[test]
    fn bad_values_name_the_field() {
        let cfg = DeviceConfig {
            adb_server: "nowhere".into(),
            ..DeviceConfig::default()
        };
        assert!(cfg.validate().unwrap_err().contains("device.adb_server"));
        let cfg = DeviceConfig {
            lease_max_ttl_ms: 10,
            ..DeviceConfig::default()
        };
        assert!(cfg.validate().unwrap_err().contains("lease_max_ttl_ms"));
        let cfg = DeviceConfig {
            direct_devices: vec!["phone".into()],
            ..DeviceConfig::default()
        };
        assert!(cfg.validate().unwrap_err().contains("direct_devices"));
    }

    #[test]
    fn every_problem_is_reported_at_once_each_naming_its_key() {
        let cfg = DeviceConfig {
            adb_server: "nowhere".into(),
            command_timeout_ms: 0,
            settle_max_ms: 70_000,
            ..DeviceConfig::default()
        };
        let problems = cfg.problems();
        let keys = [
            "device.adb_server",
            "device.command_timeout_ms",
            "device.settle_max_ms",
        ];
        assert_eq!(problems.len(), keys.len(), "{problems:?}");
        let joined = cfg.validate().unwrap_err();
        for (problem, key) in problems.iter().zip(keys) {
            assert!(problem.starts_with(key), "{problem} should name {key}");
            assert!(joined.contains(problem.as_str()), "{joined}");
        }
    }
}
