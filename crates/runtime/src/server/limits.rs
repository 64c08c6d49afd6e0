//! The `[grpc]` section: how many connections each gRPC port holds and how long it waits for
//! a client that sends nothing, goes idle or stops reading. The names match the gateway's
//! HTTP face (`[gateway_http]`): `max_connections`, `write_stall_ms`.
use serde::Deserialize;
use std::time::Duration;

/// Settings of every gRPC port of a process (each port applies them on its own).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionConfig {
    /// Connections a port holds at once. At the cap a new connection takes the place of the
    /// oldest one that has not yet sent its HTTP/2 preface (closed at once), else of the one
    /// with no call in progress for longest (told to go away, GOAWAY); when every held
    /// connection has a call in progress, the new one is closed at once.
    pub max_connections: usize,
    /// A connection that has not sent the whole HTTP/2 client preface this long after it was
    /// accepted (the TLS handshake included) is closed.
    pub preface_timeout_ms: u64,
    /// A connection with no call in progress for this long is told to go away (GOAWAY, then
    /// closed); clients connect again at their next call. A call or stream in progress
    /// (a CodeAct run, a WatchTask) keeps its connection however long it lasts.
    pub idle_timeout_ms: u64,
    /// A connection whose client takes nothing of what the port writes for this long is
    /// closed.
    pub write_stall_ms: u64,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            preface_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            write_stall_ms: 30_000,
        }
    }
}

/// Most connections one port may hold, whatever the config says: each is a file descriptor.
const MOST_CONNECTIONS: usize = 1 << 20;

impl ConnectionConfig {
    /// Every problem with the section, each naming its key (`grpc.<key>`).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_connections == 0 || self.max_connections > MOST_CONNECTIONS {
            problems.push(format!(
                "grpc.max_connections must be from 1 to {MOST_CONNECTIONS}, got {}",
                self.max_connections
            ));
        }
        for (name, v) in [
            ("preface_timeout_ms", self.preface_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("write_stall_ms", self.write_stall_ms),
        ] {
            if v < 10 {
                problems.push(format!("grpc.{name} must be at least 10, got {v}"));
            }
        }
        problems
    }

    pub fn preface_timeout(&self) -> Duration {
        Duration::from_millis(self.preface_timeout_ms)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    pub fn write_stall(&self) -> Duration {
        Duration::from_millis(self.write_stall_ms)
    }

    /// Connections told to make room that a port may still be closing (on top of
    /// `max_connections`): an eighth of it, at least one. Each closes within the preface
    /// timeout, so a flood cannot make a port hold more than this many extra sockets.
    pub fn most_closing(&self) -> usize {
        (self.max_connections / 8).max(1)
    }

    /// File descriptors a port may hold at most: its cap and the connections it is closing.
    pub fn descriptors(&self) -> usize {
        self.max_connections + self.most_closing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bad_key_is_named() {
        assert!(ConnectionConfig::default().problems().is_empty());
        let bad = ConnectionConfig {
            max_connections: 0,
            preface_timeout_ms: 0,
            idle_timeout_ms: 5,
            write_stall_ms: 10,
        };
        let problems = bad.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("grpc.max_connections must be from 1"));
        assert!(problems[1].contains("grpc.preface_timeout_ms must be at least 10, got 0"));
        assert!(problems[2].contains("grpc.idle_timeout_ms must be at least 10, got 5"));
    }

    #[test]
    fn a_port_holds_its_cap_and_an_eighth_more_while_closing() {
        let cfg = ConnectionConfig {
            max_connections: 1024,
            ..ConnectionConfig::default()
        };
        assert_eq!(cfg.descriptors(), 1024 + 128);
        let small = ConnectionConfig {
            max_connections: 3,
            ..ConnectionConfig::default()
        };
        assert_eq!(small.descriptors(), 4);
    }
}
