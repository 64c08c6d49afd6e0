//! The process's own use of the machine, read when `/metrics` is scraped, under the names
//! every Prometheus client gives them: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`. On Linux from `/proc/self` (a few small
//! files, no dependency); elsewhere there are none.

/// One sample without labels: name, Prometheus type, help, value.
pub(crate) struct Plain {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    pub value: f64,
}

/// What the process uses now; empty where it cannot be read.
pub(crate) fn sample() -> Vec<Plain> {
    imp::sample()
}

/// The numbers `/proc/self/stat` gives, in its units (clock ticks, pages).
#[derive(Debug, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    /// Clock ticks after boot.
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
}

/// Parses `/proc/self/stat`: the command name (field 2) is in parentheses and may hold
/// spaces and parentheses itself, so fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    // Field 3 (state) is the first after the name.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n.checked_sub(3)?)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The boot time (seconds after the epoch) from `/proc/stat`'s `btime` line.
fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Plain, parse_btime, parse_stat};

    pub(super) fn sample() -> Vec<Plain> {
        let mut out = Vec::new();
        let stat = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|t| parse_stat(&t));
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        if let Some(stat) = &stat
            && ticks > 0.0
        {
            out.push(Plain {
                name: "process_cpu_seconds_total",
                kind: "counter",
                help: "User and system CPU time spent, in seconds",
                value: (stat.utime + stat.stime) as f64 / ticks,
            });
            out.push(Plain {
                name: "process_resident_memory_bytes",
                kind: "gauge",
                help: "Resident memory size, in bytes",
                value: (stat.rss_pages as f64) * (rustix::param::page_size() as f64),
            });
            out.push(Plain {
                name: "process_virtual_memory_bytes",
                kind: "gauge",
                help: "Virtual memory size, in bytes",
                value: stat.vsize as f64,
            });
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|t| parse_btime(&t));
            if let Some(boot) = boot {
                out.push(Plain {
                    name: "process_start_time_seconds",
                    kind: "gauge",
                    help: "Start time of the process since the Unix epoch, in seconds",
                    value: boot as f64 + stat.starttime as f64 / ticks,
                });
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            out.push(Plain {
                name: "process_open_fds",
                kind: "gauge",
                help: "Open file descriptors",
                // Less the one reading the folder.
                value: dir.count().saturating_sub(1) as f64,
            });
        }
        if let Some(max) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
            out.push(Plain {
                name: "process_max_fds",
                kind: "gauge",
                help: "Most open file descriptors the process may have",
                value: max as f64,
            });
        }
        out
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn sample() -> Vec<super::Plain> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        // A command name with spaces and parentheses of its own.
        let line = "4242 (dm (x) y) S 1 4242 4242 0 -1 4194560 2048 0 0 0 150 25 0 0 20 0 \
                    9 0 987654 123456789 3000 18446744073709551615 1 1 0 0 0 0 0 4096 17664 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                utime: 150,
                stime: 25,
                starttime: 987654,
                vsize: 123456789,
                rss_pages: 3000,
            })
        );
        assert_eq!(parse_stat("4242 (dm) S 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn boot_time_is_the_btime_line() {
        let text = "cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n";
        assert_eq!(parse_btime(text), Some(1_700_000_000));
        assert_eq!(parse_btime("cpu 1\n"), None);
        assert_eq!(parse_btime("btime soon\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_as_itself() {
        let sample = sample();
        let get = |name: &str| sample.iter().find(|p| p.name == name).unwrap().value;
        assert!(get("process_cpu_seconds_total") >= 0.0);
        assert!(get("process_resident_memory_bytes") > 1e6);
        assert!(get("process_open_fds") >= 3.0);
        assert!(get("process_max_fds") >= get("process_open_fds"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = get("process_start_time_seconds");
        // Rounded to clock ticks, and boot time to whole seconds.
        assert!(
            started <= now + 2.0 && started > now - 86_400.0,
            "{started} {now}"
        );
    }
}
