//! Per-session resource limits and their human-readable rendering.

use std::time::Duration;

/// Limits applied to every run of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Wall-clock time one run may take, including host calls and `sleep` (default 5 s).
    pub wall_clock: Duration,
    /// Heap the engine may allocate, for the whole session (default 64 MiB).
    pub memory_bytes: usize,
    /// Native stack the engine may use (default 1 MiB).
    pub stack_bytes: usize,
    /// Console output kept per run; the rest is dropped and counted (default 64 KiB).
    pub console_bytes: usize,
    /// Largest string, and largest JSON size of any one argument, a script may pass to a host
    /// function (default 4 MiB).
    pub max_string_arg_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            wall_clock: Duration::from_secs(5),
            memory_bytes: 64 * MIB,
            stack_bytes: MIB,
            console_bytes: 64 * KIB,
            max_string_arg_bytes: 4 * MIB,
        }
    }
}

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Renders a byte count the way a person writes it: `64 MiB`, `512 KiB`, `1000 bytes`.
pub(crate) fn human_bytes(bytes: usize) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Renders a duration as `5s`, `250ms` or `1.5s`.
pub(crate) fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis >= 1000 && millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else if millis >= 1000 {
        format!("{:.1}s", duration.as_secs_f64())
    } else {
        format!("{millis}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_sizes_and_durations() {
        assert_eq!(human_bytes(64 * MIB), "64 MiB");
        assert_eq!(human_bytes(512 * KIB), "512 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(human_duration(Duration::from_secs(5)), "5s");
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
    }
}
