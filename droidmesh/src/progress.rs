//! A task's progress as `droidmesh run` prints it: a line or a few per event, the ended task's
//! status only when its completion does not say the same, and, on a terminal, how long the
//! model has been working on the step in progress.
use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use droidmesh_proto::v1::{TaskEvent, task_event};

use crate::output::say;

/// How often the wait on a terminal is redrawn.
pub const TICK: Duration = Duration::from_millis(250);

/// A wait shorter than this shows nothing.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Prints a task's events as they come.
pub struct Progress {
    /// A task's last status says why it ended, as its completion does next: held back, it is
    /// printed only when the completion does not say the same.
    held: Option<TaskEvent>,
    /// Since when the step in progress has waited for the model.
    waiting_since: Option<Instant>,
    /// A waiting line is on the screen (to be wiped before the next line).
    shown: bool,
    terminal: bool,
}

impl Progress {
    pub fn new() -> Self {
        Self {
            held: None,
            waiting_since: None,
            shown: false,
            terminal: std::io::stdout().is_terminal(),
        }
    }

    /// Whether standard output is a terminal (the only place a wait is shown).
    pub fn on_terminal(&self) -> bool {
        self.terminal
    }

    /// Prints one event (the ended task's status is held until the next).
    pub fn event(&mut self, ev: TaskEvent) {
        self.wipe();
        if let Some(held) = self.held.take()
            && !repeats(&held, &ev)
        {
            print_event(&held);
        }
        self.waiting_since = match &ev.kind {
            // A step starts with the model's call (the scripter's steps are its own).
            Some(task_event::Kind::StepStarted(s)) if s.agent != "scripter" => Some(Instant::now()),
            _ => None,
        };
        if let Some(task_event::Kind::Status(s)) = &ev.kind
            && ended(s.state)
        {
            self.held = Some(ev);
            return;
        }
        print_event(&ev);
    }

    /// Redraws the wait of the step in progress: `waiting for the model: 12s`.
    pub fn tick(&mut self) {
        let Some(since) = self.waiting_since else {
            return;
        };
        let waited = since.elapsed();
        if !self.terminal || waited < SHOW_AFTER {
            return;
        }
        let secs = Duration::from_secs(waited.as_secs());
        let mut out = std::io::stdout().lock();
        // A terminal that went away is found by the next printed line.
        let _ = write!(
            out,
            "\r\x1b[2K  waiting for the model: {}",
            humantime::format_duration(secs)
        )
        .and_then(|()| out.flush());
        self.shown = true;
    }

    /// Prints what is still held once the events end.
    pub fn finish(&mut self) {
        self.wipe();
        if let Some(held) = self.held.take() {
            print_event(&held);
        }
    }

    /// Takes the waiting line off the screen.
    fn wipe(&mut self) {
        if self.shown {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K").and_then(|()| out.flush());
            self.shown = false;
        }
    }
}

/// Whether a task state is an ending (succeeded, failed, cancelled).
fn ended(state: i32) -> bool {
    use droidmesh_proto::v1::TaskState as S;
    [S::Succeeded, S::Failed, S::Cancelled]
        .iter()
        .any(|s| *s as i32 == state)
}

/// Whether `next` (the task's completion) says what the held status `held` says.
fn repeats(held: &TaskEvent, next: &TaskEvent) -> bool {
    let (Some(task_event::Kind::Status(s)), Some(task_event::Kind::Completed(c))) =
        (&held.kind, &next.kind)
    else {
        return false;
    };
    let detail = s.detail.trim();
    !detail.is_empty() && (detail == c.error.trim() || detail == c.answer.trim())
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a usage line adds when the call was not plain: retries ("2 attempts, 1m 3s in all")
/// and a reply cut at the token limit.
fn call_notes(u: &droidmesh_proto::v1::UsageReport) -> String {
    let mut notes = String::new();
    let calls = u.usage.map_or(1, |t| t.calls.max(1));
    if u.attempts > calls {
        notes.push_str(&format!(
            ", {} attempts, {} in all",
            u.attempts,
            droidmesh_llm::format_elapsed(std::time::Duration::from_millis(u.elapsed_ms))
        ));
    }
    if u.finish_reason == "length" {
        notes.push_str(", reply cut at max_tokens");
    }
    notes
}

fn print_event(ev: &TaskEvent) {
    use task_event::Kind as K;
    let Some(kind) = &ev.kind else { return };
    let line = match kind {
        K::Status(s) => format!(
            "task {}: {}",
            ev.task_id,
            if s.detail.is_empty() {
                "status changed".into()
            } else {
                s.detail.clone()
            }
        ),
        // Steps inside one subgoal (the scripter's session) are not the task's steps.
        K::StepStarted(s) if s.agent == "scripter" => format!("  scripter step {}", s.step),
        K::StepStarted(s) => format!("\nstep {}", s.step),
        K::Thought(t) if t.agent == "codeact" => indent(&t.text, "  thought: "),
        K::Thought(t) => indent(&t.text, &format!("  {} thinks: ", t.agent)),
        K::Code(c) if c.language == "json" => format!("  {} action: {}", c.agent, c.code.trim()),
        K::Code(c) if c.agent == "codeact" => format!("  code:\n{}", indent(&c.code, "    | ")),
        K::Code(c) => format!("  {} code:\n{}", c.agent, indent(&c.code, "    | ")),
        K::ToolCall(_) => return,
        K::ToolResult(r) => {
            let res = r.result.clone().unwrap_or_default();
            if res.success {
                format!("  -> {}: {}", r.tool, res.action_taken)
            } else {
                format!("  -> {} FAILED: {}", r.tool, res.error.unwrap_or_default())
            }
        }
        K::Observation(o) => {
            let mut lines = Vec::new();
            if !o.output.trim().is_empty() {
                lines.push(indent(o.output.trim_end(), "  output: "));
            }
            if let Some(e) = &o.error {
                lines.push(format!("  error: {e}"));
            }
            lines.extend(o.notes.iter().map(|n| format!("  note: {n}")));
            if lines.is_empty() {
                return;
            }
            lines.join("\n")
        }
        K::Usage(u) => {
            let t = u.usage.unwrap_or_default();
            let replay = if u.replay { ", replayed" } else { "" };
            let who = if u.agent.is_empty() || u.agent == "codeact" {
                String::new()
            } else {
                format!("{} ", u.agent)
            };
            format!(
                "  {who}model {}: {} tokens in, {} out, {} ms{}{replay}",
                u.model,
                t.input_tokens,
                t.output_tokens,
                u.latency_ms,
                call_notes(u)
            )
        }
        K::HumanHelp(h) => format!(
            "  the agent asks for help: {} (reply with SendMessage)",
            h.reason
        ),
        K::Message(m) => format!("  message: {}", m.text),
        K::Screenshot(s) => format!("  screenshot {}x{}", s.width, s.height),
        K::Plan(p) => format!("  plan:\n{}", indent(p.plan_text.trim(), "    ")),
        K::Handoff(h) => format!("  handoff {} -> {}: {}", h.from_agent, h.to_agent, h.reason),
        K::SubgoalResult(r) => {
            let res = r.result.clone().unwrap_or_default();
            if res.success {
                format!("  -> {}: {}", r.agent, res.action_taken)
            } else {
                format!("  -> {} FAILED: {}", r.agent, res.error.unwrap_or_default())
            }
        }
        K::Completed(c) => {
            let u = c.usage.unwrap_or_default();
            let mut s = format!(
                "\n{} after {} in {} ({} model calls, {} tokens in, {} out)\nanswer: {}",
                if c.success { "SUCCEEDED" } else { "FAILED" },
                if c.steps == 1 {
                    "1 step".to_owned()
                } else {
                    format!("{} steps", c.steps)
                },
                if c.duration_ms < 1000 {
                    format!("{} ms", c.duration_ms)
                } else {
                    format!("{:.1} s", c.duration_ms as f64 / 1000.0)
                },
                u.calls,
                u.input_tokens,
                u.output_tokens,
                if c.answer.is_empty() {
                    &c.error
                } else {
                    &c.answer
                }
            );
            if let Some(j) = &c.structured_output {
                s.push_str(&format!("\nstructured output: {j}"));
            }
            if c.answered_directly {
                s.push_str("\n(answered from the conversation, without acting on the phone)");
            }
            for f in &c.files {
                s.push_str(&format!("\nfile: {} ({} bytes)", f.path, f.size_bytes));
            }
            s
        }
    };
    say!("{line}");
}
