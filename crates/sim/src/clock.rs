//! The phone's clock: every phone starts (and a reset starts it again) at 2023-10-15 15:34:00
//! UTC, and the clock then runs with real time, so dates in a task's goal are the same on every
//! run while messages sent one after another still get later dates. `date` shows it and new
//! records (a sent SMS) are stamped with it.
use std::time::Instant;

/// 2023-10-15 15:34:00 UTC in ms since the epoch: the time every phone starts at.
pub const START_MS: i64 = 1_697_384_040_000;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    started: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Self {
            started: Instant::now(),
        }
    }

    /// The phone's time, in ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        let ran = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX / 2);
        START_MS.saturating_add(ran)
    }
}

/// (year, month 1–12, day 1–31) of a day counted from 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `date`'s default format (toybox's).
pub const DEFAULT_FORMAT: &str = "%a %b %e %H:%M:%S %Z %Y";

/// `ms` formatted as `date +FORMAT` does, in UTC; an unknown `%x` stays as written.
pub fn format(ms: i64, fmt: &str) -> String {
    let secs = ms.div_euclid(1_000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let (hh, mm, ss) = (of_day / 3_600, of_day % 3_600 / 60, of_day % 60);
    let weekday = usize::try_from((days + 4).rem_euclid(7)).unwrap_or(0);
    let month = MONTHS[usize::try_from(m.saturating_sub(1)).unwrap_or(0).min(11)];
    let day_name = DAYS[weekday];
    let year_start = days - (1..m).map(|k| month_len(y, k)).sum::<i64>() - i64::from(d) + 1;
    let yday = days - year_start + 1;
    let mut out = String::new();
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let s = match it.next() {
            Some('Y') => y.to_string(),
            Some('y') => format!("{:02}", y.rem_euclid(100)),
            Some('m') => format!("{m:02}"),
            Some('d') => format!("{d:02}"),
            Some('e') => format!("{d:>2}"),
            Some('H') => format!("{hh:02}"),
            Some('M') => format!("{mm:02}"),
            Some('S') => format!("{ss:02}"),
            Some('T') => format!("{hh:02}:{mm:02}:{ss:02}"),
            Some('F') => format!("{y}-{m:02}-{d:02}"),
            Some('D') => format!("{m:02}/{d:02}/{:02}", y.rem_euclid(100)),
            Some('z') => "+0000".into(),
            Some('Z') => "UTC".into(),
            Some('s') => secs.to_string(),
            Some('N') => format!("{:09}", ms.rem_euclid(1_000) * 1_000_000),
            Some('a') => day_name[..3].into(),
            Some('A') => day_name.into(),
            Some('b' | 'h') => month[..3].into(),
            Some('B') => month.into(),
            Some('j') => format!("{yday:03}"),
            Some('u') => (if weekday == 0 { 7 } else { weekday }).to_string(),
            Some('w') => weekday.to_string(),
            Some('%') => "%".into(),
            Some('n') => "\n".into(),
            Some(o) => format!("%{o}"),
            None => "%".into(),
        };
        out.push_str(&s);
    }
    out
}

fn month_len(y: i64, m: u32) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_reads_as_android_world_fixes_it() {
        assert_eq!(
            format(START_MS, DEFAULT_FORMAT),
            "Sun Oct 15 15:34:00 UTC 2023"
        );
        assert_eq!(
            format(START_MS, "%F %T %s %j %u"),
            "2023-10-15 15:34:00 1697384040 288 7"
        );
        assert_eq!(format(0, "%a %e %b %Y %N"), "Thu  1 Jan 1970 000000000");
        assert_eq!(
            format(951_782_400_000 + 1, "%F %j %N %q"),
            "2000-02-29 060 001000000 %q"
        );
        assert_eq!(format(START_MS, "%"), "%");
    }

    #[test]
    fn the_clock_runs_from_the_start() {
        let c = Clock::start();
        let a = c.now_ms();
        assert!((START_MS..START_MS + 60_000).contains(&a));
        assert!(c.now_ms() >= a);
    }
}
