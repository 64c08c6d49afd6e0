//! Waiting after an action until the UI has settled, as long as it needs and no longer: the
//! device is observed again and again (one device command each, see `observe`) until two
//! observations in a row are the same and nothing says the screen is still moving, bounded by
//! `device.settle_max_ms`. Never a fixed sleep.
//!
//! The screen is still moving while a window animation runs (`dumpsys window` reports
//! `mAppTransitionState=APP_STATE_RUNNING`), while an app's starting window has the focus, and
//! while a progress spinner (`android.widget.ProgressBar`) is on screen. An action whose
//! effect lands late (a switch backed by a slow service) leaves the screen as it was at
//! first: an unchanged screen is trusted only after `device.settle_quiet_ms`.
//!
//! The observation an action settled on is kept for the next `GetState` (within
//! [`REUSE_WITHIN`], once), so settling costs no extra round trip when the agent reads the
//! screen next.
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::observe::Observed;
use crate::registry::Slot;

/// How an action waits for the UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleConfig {
    /// Longest wait; zero turns settling off.
    pub max: Duration,
    /// How long an unchanged screen must stay unchanged before it counts as settled.
    pub quiet: Duration,
    /// Least time from one observation's start to the next one's.
    pub interval: Duration,
}

impl SettleConfig {
    pub fn off() -> Self {
        Self {
            max: Duration::ZERO,
            quiet: Duration::ZERO,
            interval: Duration::ZERO,
        }
    }

    pub fn is_on(&self) -> bool {
        !self.max.is_zero()
    }
}

/// A settled observation is given to the next `GetState` only this soon after it was taken.
pub const REUSE_WITHIN: Duration = Duration::from_millis(1000);

/// Per device: the fingerprint of the latest observation, and the one an action settled on.
#[derive(Debug, Default)]
pub struct SettleState {
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    last: Option<u64>,
    settled: Option<(Instant, Observed)>,
}

impl SettleState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records what the screen looked like at the latest observation.
    pub fn seen(&self, observed: &Observed) {
        self.lock().last = Some(fingerprint(observed));
    }

    /// Drops a kept observation: an action is about to change the screen.
    pub fn forget(&self) {
        self.lock().settled = None;
    }

    /// The observation the last action settled on, once, if it is recent.
    pub fn take_fresh(&self) -> Option<Observed> {
        let (at, observed) = self.lock().settled.take()?;
        (at.elapsed() <= REUSE_WITHIN).then_some(observed)
    }

    fn keep(&self, observed: Observed) {
        let mut kept = self.lock();
        kept.last = Some(fingerprint(&observed));
        kept.settled = Some((Instant::now(), observed));
    }

    fn last(&self) -> Option<u64> {
        self.lock().last
    }
}

/// A cheap hash of everything an observation shows.
pub fn fingerprint(o: &Observed) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    o.ui.text.hash(&mut h);
    o.window.text.hash(&mut h);
    o.ime.text.hash(&mut h);
    h.finish()
}

/// Why the screen is still moving, if something says it is.
pub fn busy(o: &Observed) -> Option<&'static str> {
    let window = &o.window.text;
    // The most specific reason first: a starting window shows during an app transition.
    if window
        .lines()
        .any(|l| l.contains("mCurrentFocus=") && l.contains("Splash Screen"))
    {
        Some("the app's starting window was still showing")
    } else if window.contains("mAppTransitionState=APP_STATE_RUNNING") {
        Some("a window animation was still running")
    } else if o.ui.text.contains("class=\"android.widget.ProgressBar\"") {
        Some("a progress spinner was still showing")
    } else {
        None
    }
}

/// How a wait for the UI ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub waited: Duration,
    pub observations: u32,
    pub settled: bool,
    /// What the wait ended on, in words.
    pub reason: String,
}

impl Settled {
    /// `ActionResult.data.settle`.
    pub fn to_json(&self) -> Value {
        json!({
            "waited_ms": u64::try_from(self.waited.as_millis()).unwrap_or(u64::MAX),
            "observations": self.observations,
            "settled": self.settled,
            "reason": self.reason,
        })
    }
}

/// Observes `slot` until its UI has settled or `cfg.max` has passed (the observation under
/// way then is waited for: each is bounded by the command timeout).
pub async fn settle(slot: &Slot, cfg: &SettleConfig) -> Settled {
    settle_on(&slot.settle, cfg, || crate::state::observe(slot)).await
}

/// [`settle`] with the screen read by `observe` (a device's, or a test's script), the
/// observations recorded in `state`.
async fn settle_on<F, E>(
    state: &SettleState,
    cfg: &SettleConfig,
    mut observe: impl FnMut() -> F,
) -> Settled
where
    F: Future<Output = Result<Observed, E>>,
    E: std::fmt::Display,
{
    let started = Instant::now();
    let deadline = started + cfg.max;
    let before = state.last();
    let mut previous: Option<u64> = None;
    let mut observations = 0u32;
    loop {
        let round = Instant::now();
        let observed = match observe().await {
            Ok(o) => o,
            Err(e) => {
                return Settled {
                    waited: started.elapsed(),
                    observations,
                    settled: false,
                    reason: format!("could not observe the screen: {e}"),
                };
            }
        };
        observations += 1;
        let print = fingerprint(&observed);
        let moving = busy(&observed);
        let elapsed = started.elapsed();
        let changed = before.is_some_and(|b| b != print);
        if moving.is_none() && previous == Some(print) && (changed || elapsed >= cfg.quiet) {
            state.keep(observed);
            return Settled {
                waited: elapsed,
                observations,
                settled: true,
                reason: if changed {
                    "the screen changed and then held still".into()
                } else {
                    "the screen held still".into()
                },
            };
        }
        previous = Some(print);
        if Instant::now() >= deadline {
            state.seen(&observed);
            return Settled {
                waited: elapsed,
                observations,
                settled: false,
                reason: format!(
                    "gave up after {} ms: {}",
                    cfg.max.as_millis(),
                    moving.unwrap_or("the screen was still changing")
                ),
            };
        }
        let next = (round + cfg.interval).min(deadline);
        if next > Instant::now() {
            tokio::time::sleep_until(next).await;
        }
    }
}

#[cfg(test)]
#[path = "settle_clock_tests.rs"]
mod clock_tests;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::observe::Part;

    fn obs(ui: &str, window: &str) -> Observed {
        Observed {
            ui: Part {
                text: ui.into(),
                status: Some(0),
            },
            window: Part {
                text: window.into(),
                status: Some(0),
            },
            ime: Part::default(),
            ..Observed::default()
        }
    }

    #[test]
    fn moving_screens_are_told_apart_from_still_ones() {
        let still = obs(
            "<node class=\"android.widget.TextView\"/>",
            "  mCurrentFocus=Window{1 u0 a/a.B}\n  mAppTransitionState=APP_STATE_IDLE",
        );
        assert_eq!(busy(&still), None);
        let animating = obs("", "  mAppTransitionState=APP_STATE_RUNNING");
        assert!(busy(&animating).unwrap().contains("animation"));
        let splash = obs("", "  mCurrentFocus=Window{1 u0 Splash Screen a}");
        assert!(busy(&splash).unwrap().contains("starting window"));
        let spinner = obs("<node class=\"android.widget.ProgressBar\"/>", "");
        assert!(busy(&spinner).unwrap().contains("spinner"));
        assert_ne!(fingerprint(&still), fingerprint(&spinner));
        assert_eq!(fingerprint(&still), fingerprint(&still.clone()));
    }

    #[test]
    fn a_kept_observation_is_given_once() {
        let state = SettleState::default();
        state.keep(obs("a", "b"));
        assert!(state.take_fresh().is_some());
        assert!(state.take_fresh().is_none());
        state.keep(obs("a", "b"));
        state.forget();
        assert!(state.take_fresh().is_none());
        assert_eq!(state.last(), Some(fingerprint(&obs("a", "b"))));
    }
}
