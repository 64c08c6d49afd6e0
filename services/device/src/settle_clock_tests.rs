//! The settle decisions on tokio's paused clock against a scripted screen: how long a wait
//! takes, how many observations it makes, when it declares the screen settled and when it
//! gives up, asserted to the millisecond whatever the machine's speed. (The tests against the
//! simulator in real time, `tests/it/settle.rs`, show the same on a phone.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::config::DeviceConfig;
use crate::observe::Part;

fn screen(ui: &str, window: &str) -> Observed {
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

const IDLE: &str = "  mCurrentFocus=Window{1 u0 com.android.settings/.Settings}\n  \
                    mAppTransitionState=APP_STATE_IDLE";

fn home() -> Observed {
    screen("<node text=\"Phone\"/><node text=\"Settings\"/>", IDLE)
}

fn splash() -> Observed {
    screen(
        "",
        "  mCurrentFocus=Window{2 u0 Splash Screen com.android.settings}",
    )
}

fn settings(wifi_on: bool) -> Observed {
    screen(
        &format!("<node text=\"Wi-Fi\" class=\"android.widget.Switch\" checked=\"{wifi_on}\"/>"),
        IDLE,
    )
}

fn spinner() -> Observed {
    screen("<node class=\"android.widget.ProgressBar\"/>", IDLE)
}

/// A screen that shows `frames[i].1` from `frames[i].0` ms after the script starts (an `Err`
/// frame: reading fails from then on). A read takes `cost` and returns what the screen showed
/// when the read began; the time each read began is kept.
struct Screen {
    start: Instant,
    frames: Vec<(u64, Result<Observed, &'static str>)>,
    cost: Duration,
    reads: Mutex<Vec<u64>>,
}

impl Screen {
    fn new(cost_ms: u64, frames: Vec<(u64, Result<Observed, &'static str>)>) -> Self {
        Self {
            start: Instant::now(),
            frames,
            cost: Duration::from_millis(cost_ms),
            reads: Mutex::new(Vec::new()),
        }
    }

    async fn read(&self) -> Result<Observed, String> {
        let at = u64::try_from(self.start.elapsed().as_millis()).unwrap();
        self.reads.lock().unwrap().push(at);
        tokio::time::sleep(self.cost).await;
        let (_, shown) = self
            .frames
            .iter()
            .rev()
            .find(|(from, _)| *from <= at)
            .expect("a frame from 0 ms");
        shown.clone().map_err(str::to_owned)
    }

    fn reads(&self) -> Vec<u64> {
        self.reads.lock().unwrap().clone()
    }
}

/// The shipped settings: at most 3 s, 250 ms quiet, an observation at most every 5 ms.
fn shipped() -> SettleConfig {
    let cfg = DeviceConfig::default().settle();
    assert_eq!(
        (cfg.max, cfg.quiet, cfg.interval),
        (
            Duration::from_millis(3_000),
            Duration::from_millis(250),
            Duration::from_millis(5)
        )
    );
    cfg
}

async fn run(state: &SettleState, cfg: &SettleConfig, screen: &Screen) -> Settled {
    settle_on(state, cfg, || screen.read()).await
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// An app launch: the starting window shows for 600 ms, then the app. Reads of 20 ms follow
/// one another; the first two alike after the change (600 and 620) settle it, at 640 ms.
#[tokio::test(start_paused = true)]
async fn a_launch_settles_on_the_second_alike_read_after_its_starting_window() {
    let state = SettleState::default();
    state.seen(&home());
    let screen = Screen::new(20, vec![(0, Ok(splash())), (600, Ok(settings(false)))]);
    let s = run(&state, &shipped(), &screen).await;
    assert_eq!(
        s,
        Settled {
            waited: ms(640),
            observations: 32,
            settled: true,
            reason: "the screen changed and then held still".into(),
        }
    );
    assert_eq!(screen.reads(), (0..=620).step_by(20).collect::<Vec<_>>());
    // The screen it settled on is what the next GetState is given.
    assert_eq!(state.take_fresh(), Some(settings(false)));
}

/// A switch whose setting lands 150 ms after the tap: the screen first stays as it was, which
/// is not trusted before 250 ms; the change is caught, and settled on two reads later.
#[tokio::test(start_paused = true)]
async fn a_late_effect_is_waited_for_within_the_quiet_time() {
    let state = SettleState::default();
    state.seen(&settings(false));
    let screen = Screen::new(
        20,
        vec![(0, Ok(settings(false))), (150, Ok(settings(true)))],
    );
    let s = run(&state, &shipped(), &screen).await;
    assert_eq!(
        s,
        Settled {
            waited: ms(200),
            observations: 10,
            settled: true,
            reason: "the screen changed and then held still".into(),
        }
    );
    assert_eq!(state.take_fresh(), Some(settings(true)));
}

/// An action that changes nothing: the screen is trusted once a read ends at or after the
/// quiet time (the 13th, ending at 260 ms), not before.
#[tokio::test(start_paused = true)]
async fn an_unchanged_screen_is_settled_after_the_quiet_time() {
    let state = SettleState::default();
    state.seen(&settings(true));
    let screen = Screen::new(20, vec![(0, Ok(settings(true)))]);
    let s = run(&state, &shipped(), &screen).await;
    assert_eq!(
        s,
        Settled {
            waited: ms(260),
            observations: 13,
            settled: true,
            reason: "the screen held still".into(),
        }
    );
}

/// Reads quicker than the interval are spaced by it: one starts every 5 ms.
#[tokio::test(start_paused = true)]
async fn quick_reads_are_spaced_by_the_interval() {
    let state = SettleState::default();
    state.seen(&home());
    let screen = Screen::new(1, vec![(0, Ok(splash())), (100, Ok(settings(false)))]);
    let s = run(&state, &shipped(), &screen).await;
    assert_eq!(screen.reads(), (0..=105).step_by(5).collect::<Vec<_>>());
    assert_eq!((s.waited, s.observations, s.settled), (ms(106), 22, true));
}

/// A spinner that never goes: the wait gives up at the cap, saying why, after the read under
/// way then has ended (here at 210 ms: reads of 30 ms, the cap at 200 ms). Nothing is kept for
/// the next GetState, but the screen is remembered as seen.
#[tokio::test(start_paused = true)]
async fn a_screen_still_moving_at_the_cap_is_given_up_on_saying_why() {
    let state = SettleState::default();
    state.seen(&home());
    let cfg = SettleConfig {
        max: ms(200),
        quiet: ms(100),
        interval: ms(5),
    };
    let screen = Screen::new(30, vec![(0, Ok(spinner()))]);
    let s = run(&state, &cfg, &screen).await;
    assert_eq!(
        s,
        Settled {
            waited: ms(210),
            observations: 7,
            settled: false,
            reason: "gave up after 200 ms: a progress spinner was still showing".into(),
        }
    );
    assert_eq!(state.take_fresh(), None);
    assert_eq!(state.last(), Some(fingerprint(&spinner())));
}

/// A screen that keeps changing is given up on at the cap of the shipped settings, 3 s.
#[tokio::test(start_paused = true)]
async fn a_screen_that_keeps_changing_is_given_up_on_after_three_seconds() {
    let state = SettleState::default();
    state.seen(&home());
    // A new frame every 10 ms, read every 20 ms: no two reads alike.
    let frames = (0..400u64)
        .map(|i| (i * 10, Ok(screen(&format!("<node text=\"{i}\"/>"), IDLE))))
        .collect();
    let screen = Screen::new(20, frames);
    let s = run(&state, &shipped(), &screen).await;
    assert_eq!(
        s,
        Settled {
            waited: ms(3_000),
            observations: 150,
            settled: false,
            reason: "gave up after 3000 ms: the screen was still changing".into(),
        }
    );
}

/// A read that fails ends the wait at once, saying so.
#[tokio::test(start_paused = true)]
async fn a_failed_read_ends_the_wait_saying_so() {
    let state = SettleState::default();
    let screen = Screen::new(20, vec![(0, Ok(splash())), (50, Err("device offline"))]);
    let s = run(&state, &shipped(), &screen).await;
    assert_eq!(
        s,
        Settled {
            waited: ms(80),
            observations: 3,
            settled: false,
            reason: "could not observe the screen: device offline".into(),
        }
    );
}

/// The screen an action settled on is given to the next GetState only within
/// [`REUSE_WITHIN`] (1 s), and once.
#[tokio::test(start_paused = true)]
async fn a_settled_screen_is_reused_within_a_second_only() {
    let state = SettleState::default();
    state.keep(settings(true));
    tokio::time::advance(REUSE_WITHIN).await;
    assert_eq!(state.take_fresh(), Some(settings(true)));
    assert_eq!(state.take_fresh(), None);
    state.keep(settings(true));
    tokio::time::advance(REUSE_WITHIN + ms(1)).await;
    assert_eq!(state.take_fresh(), None);
}
