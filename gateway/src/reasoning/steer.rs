//! Steering a reasoning task while it runs: messages that arrive during an agent call (cancel,
//! stop, goal changes, notes), waiting for a person, and the screenshots streamed per step.
use std::future::Future;
use std::time::Duration;

use droidmesh_agent::steer::Next;
use droidmesh_proto::v1::{HumanHelpRequest, TaskState, task_event};
use tokio::time::Instant;

use super::{Loop, SCREENSHOT_MAX_SIDE};
use crate::driver::non_empty;
use crate::entry::Control;
use crate::error::PeerError;
use crate::task_state::{Ending, set_state};

/// How the device service words a withheld screenshot ("the screenshot of device S is
/// withheld: why"); what follows is the reason told to the user.
const WITHHELD: &str = " is withheld: ";

impl Loop<'_> {
    /// Streams a request for a person and waits for the reply (the lease is kept meanwhile).
    pub(super) async fn ask_human(&mut self, help: HumanHelpRequest) -> Result<(), Ending> {
        let entry = self.ctx.entry;
        let reason = help.reason.clone();
        set_state(
            entry,
            TaskState::WaitingForHuman,
            &format!("waiting for a human: {reason}"),
        );
        entry.push(task_event::Kind::HumanHelp(help));
        let wait = Duration::from_millis(self.ctx.deps.cfg.human_wait_ms);
        let deadline = Instant::now() + wait;
        loop {
            let c = tokio::select! {
                c = self.ctx.control.recv() => c,
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(Ending::failed(format!(
                        "no human answered within {} s (asked: {reason})",
                        wait.as_secs_f64().ceil() as u64
                    )));
                }
            };
            let Some(c) = c else {
                return Err(Ending::cancelled("the gateway is shutting down"));
            };
            self.ctx.steered(&c, true);
            match self.steering.take(c, Some(&reason)) {
                Next::Replied => return Ok(()),
                Next::Stop(r) => {
                    return Err(Ending::cancelled(non_empty(
                        r,
                        "stopped while waiting for a human",
                    )));
                }
                Next::Go => {}
            }
        }
    }

    /// Runs `call` while the task's messages keep arriving: a cancel ends the task at once; a
    /// stop lets the call finish (within the stop grace) and ends the task after it; goal
    /// changes and notes wait for the next plan.
    pub(super) async fn guarded<T>(&mut self, call: impl Future<Output = T>) -> Result<T, Ending> {
        tokio::pin!(call);
        let grace = Duration::from_millis(self.ctx.deps.cfg.stop_grace_ms);
        let mut cut_off: Option<Instant> = None;
        loop {
            let deadline = async {
                match cut_off {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                out = &mut call => return Ok(out),
                c = self.ctx.control.recv() => {
                    let Some(c) = c else {
                        return Err(Ending::cancelled("the gateway is shutting down"));
                    };
                    if let Some(end) = self.on_control(c, true) {
                        return Err(end);
                    }
                    if self.stop.is_some() && cut_off.is_none() {
                        cut_off = Some(Instant::now() + grace);
                    }
                }
                _ = deadline => {
                    let reason = self.stop.take().unwrap_or_default();
                    return Err(Ending::cancelled(non_empty(
                        reason,
                        "stopped by the user (the step in progress was cut off)",
                    )));
                }
            }
        }
    }

    /// Streams the screen as the subgoal left it (best effort: a failed read is logged).
    pub(super) async fn screenshot(&mut self) {
        if self.shots_withheld {
            return;
        }
        let mut device = self.ctx.deps.device.clone();
        let req = droidmesh_proto::v1::TakeScreenshotRequest {
            serial: self.ctx.lease.serial.clone(),
            max_side: SCREENSHOT_MAX_SIDE,
            masks: Vec::new(),
        };
        match self.guarded(device.take_screenshot(req)).await {
            Ok(Ok(shot)) => {
                let shot = shot.into_inner();
                self.ctx.entry.push(task_event::Kind::Screenshot(shot));
            }
            Ok(Err(s))
                if s.code() == tonic::Code::FailedPrecondition
                    && s.message().contains(WITHHELD) =>
            {
                let why = s.message().split_once(WITHHELD).map_or("", |(_, why)| why);
                self.withheld(why);
            }
            Ok(Err(s)) => {
                tracing::warn!(task = %self.ctx.entry.id, error = %PeerError::new("device", &s), "screenshot failed")
            }
            // A cancel or stop arrived meanwhile; the next step of the loop honours it.
            Err(end) => self.pending_end = Some(end),
        }
    }

    /// Tells the user, once per task, that the device service withholds this task's
    /// screenshots (`why` non-empty), and stops streaming them.
    pub(super) fn withheld(&mut self, why: &str) {
        if why.is_empty() || self.shots_withheld {
            return;
        }
        self.shots_withheld = true;
        self.ctx.message(&format!(
            "screenshots are withheld for the rest of the task: {why}"
        ));
    }

    /// The ending a stop asked for, once the call in progress has returned.
    pub(super) fn stopped(&mut self) -> Option<Ending> {
        if let Some(end) = self.pending_end.take() {
            return Some(end);
        }
        self.stop
            .take()
            .map(|r| Ending::cancelled(non_empty(r, "stopped by the user")))
    }

    /// Applies a message while nobody is asked for help (a reply is then a note like any
    /// other); returns the ending when the task must end now.
    pub(super) fn on_control(&mut self, c: Control, during_call: bool) -> Option<Ending> {
        self.ctx.steered(&c, false);
        match self.steering.take(c, None) {
            Next::Stop(r) if during_call => {
                self.stop = Some(r);
                None
            }
            Next::Stop(r) => Some(Ending::cancelled(non_empty(r, "stopped by the user"))),
            Next::Go | Next::Replied => None,
        }
    }

    /// Adds a note of the loop's own for the next plan.
    pub(super) fn note(&mut self, text: String) {
        self.steering.note(text);
    }
}
