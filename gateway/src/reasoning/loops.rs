//! Loops in reasoning mode (`droidmesh_agent::loops`, the rule direct mode uses too). An entry
//! is one action the executor carried out for a subgoal, with the fingerprint of the screen it
//! read before acting: its result's `data.action`, `data.arguments` and `data.screen`. Results
//! that name no screen (other agents', the executor's handoffs and refusals) are not entries.
//!
//! `gateway.loop_repeats` such subgoals in a row (3 by default) ask the manager to plan again:
//! a note in its next plan request, and a mark on the action in the history it keeps seeing;
//! the user reads a message event. The same loop reaching the count again ends the task with
//! the loop named in its reason.
use droidmesh_agent::loops::{Action, Repeat, ScreenPrint, Verdict};
use droidmesh_agent::tools;

use super::Loop;
use crate::agents::Agent;
use crate::routing::Routed;
use crate::task_state::Ending;

impl Loop<'_> {
    /// Takes a recorded subgoal's action into the loop guard and acts on what it says.
    pub(super) fn watch_loops(&mut self, routed: &Routed) {
        let Some((screen, action)) = entry(routed) else {
            return;
        };
        match self.loops.record(screen, &[action]) {
            Verdict::Go => {}
            Verdict::Warn(repeat) => self.plan_again(&repeat),
            Verdict::Stop(repeat) => {
                let why = format!(
                    "stopped: {}, again after the manager was told",
                    repeat.summary()
                );
                // A cancel that came first keeps its own ending.
                self.pending_end.get_or_insert(Ending::failed(why));
            }
        }
    }

    /// The first time a repeat closes a loop: the manager is asked to plan again and the user
    /// is told.
    fn plan_again(&mut self, repeat: &Repeat) {
        let action = if repeat.actions == 1 {
            "action"
        } else {
            "actions"
        };
        self.note(format!(
            "Loop: the last {} subgoals did the same {action} ({}) and the screen did not change. The plan is not working: plan again from the screen as it is now, a different way, or declare the request cannot be fulfilled.",
            repeat.times, repeat.what
        ));
        let summary = repeat.summary();
        if let Some(last) = self.history.last_mut() {
            last.feedback.push_str(&format!(" (loop: {summary})"));
        }
        self.ctx.message(&format!(
            "loop: {summary}; the manager is asked to plan again"
        ));
    }
}

/// The executor's action and the screen it acted on, when the result names both.
fn entry(routed: &Routed) -> Option<(ScreenPrint, Action)> {
    if routed.agent != Agent::Executor {
        return None;
    }
    let data = droidmesh_proto::struct_to_json(routed.result.data.as_ref()?);
    let screen = ScreenPrint::parse(data.get("screen")?.as_str()?)?;
    let spec = tools::find(data.get("action")?.as_str()?)?;
    let args = data.get("arguments")?.as_object()?;
    Some((screen, Action::named(spec.tool, args)))
}
