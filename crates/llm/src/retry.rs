//! When to try again: exponential backoff with jitter, and the provider's own Retry-After.
use crate::config::RetryPolicy;
use rand::Rng;
use std::time::{Duration, SystemTime};

/// The wait before attempt `attempt + 1`, after `attempt` (1-based) failed: the exponential step
/// `initial_backoff * 2^(attempt-1)`, capped at `max_backoff`, then jittered uniformly into
/// its upper half so that clients that failed together do not retry together.
pub fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let step = exponential_step(policy, attempt);
    let half = step / 2;
    let spread = step.saturating_sub(half);
    let jitter = if spread.is_zero() {
        Duration::ZERO
    } else {
        let nanos = u64::try_from(spread.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    };
    half + jitter
}

/// The un-jittered step: `initial_backoff * 2^(attempt-1)`, at most `max_backoff`.
pub fn exponential_step(policy: &RetryPolicy, attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(30);
    policy
        .initial_backoff
        .saturating_mul(1u32 << exp)
        .min(policy.max_backoff)
}

/// Parses a Retry-After value: delay-seconds (`"2"`, also `"1.5"`) or an HTTP date, measured
/// from `now`; a date in the past means no wait. `None` when it is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = value.parse().ok()?;
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait a response asks for: `retry-after-ms` (sent by OpenAI and Anthropic) first, then
/// `retry-after`.
pub fn retry_after_from_headers(headers: &http::HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && let Ok(d) = Duration::try_from_secs_f64(ms / 1000.0)
    {
        return Some(d);
    }
    text("retry-after").and_then(|v| parse_retry_after(v, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(initial_ms: u64, max_ms: u64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(initial_ms),
            max_backoff: Duration::from_millis(max_ms),
            on_timeout: false,
        }
    }

    #[test]
    fn retry_after_seconds() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn retry_after_http_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:40 GMT", now),
            Some(Duration::from_secs(3))
        );
        // In the past: go now.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO)
        );
        // The obsolete RFC 850 form is also accepted by httpdate.
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn retry_after_ms_header_wins() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", http::HeaderValue::from_static("5"));
        let now = SystemTime::now();
        assert_eq!(
            retry_after_from_headers(&h, now),
            Some(Duration::from_secs(5))
        );
        h.insert("retry-after-ms", http::HeaderValue::from_static("250"));
        assert_eq!(
            retry_after_from_headers(&h, now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(retry_after_from_headers(&http::HeaderMap::new(), now), None);
    }

    #[test]
    fn steps_double_and_cap() {
        let p = policy(100, 1000);
        let steps: Vec<u64> = (1..=6)
            .map(|a| exponential_step(&p, a).as_millis() as u64)
            .collect();
        assert_eq!(steps, [100, 200, 400, 800, 1000, 1000]);
        // Absurd attempt numbers neither overflow nor exceed the cap.
        assert_eq!(exponential_step(&p, u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn jitter_stays_in_upper_half_of_step() {
        let p = policy(100, 1000);
        for attempt in 1..=8 {
            let step = exponential_step(&p, attempt);
            for _ in 0..200 {
                let d = backoff(&p, attempt);
                assert!(
                    d >= step / 2 && d <= step,
                    "attempt {attempt}: {d:?} vs {step:?}"
                );
                assert!(d <= p.max_backoff);
            }
        }
        assert_eq!(backoff(&policy(0, 0), 3), Duration::ZERO);
    }
}
