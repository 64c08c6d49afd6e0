//! What a task's run records in its entry as it goes: a new state, the agents' token usage,
//! and how it ended ([`Ending`]: the task record, a status event, then the completed event).
//! The runner, the drivers, the relay and the queue all record through here.
use std::time::Duration;

use droidmesh_proto::v1::{
    TaskCompleted, TaskState, TaskStatus, TokenUsage, UsageReport, task_event,
};

use crate::entry::TaskEntry;

/// How a run ended, before structured output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub state: TaskState,
    pub answer: String,
    pub error: String,
}

impl Ending {
    pub fn succeeded(answer: impl Into<String>) -> Self {
        Self {
            state: TaskState::Succeeded,
            answer: answer.into(),
            error: String::new(),
        }
    }

    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            state: TaskState::Failed,
            answer: String::new(),
            error: error.into(),
        }
    }

    pub fn cancelled(reason: impl Into<String>) -> Self {
        Self {
            state: TaskState::Cancelled,
            answer: String::new(),
            error: reason.into(),
        }
    }
}

pub fn set_state(entry: &TaskEntry, state: TaskState, detail: &str) {
    entry.update(|t| t.state = state as i32);
    entry.push(task_event::Kind::Status(TaskStatus {
        state: state as i32,
        detail: detail.to_owned(),
    }));
}

/// Records the ending (`took`: how long the run took): the task record, a status event, then the completed event (the last).
pub fn finish(entry: &TaskEntry, ending: Ending, took: Duration) {
    entry.update(|t| {
        t.answer = if ending.answer.is_empty() {
            ending.error.clone()
        } else {
            ending.answer.clone()
        };
        t.error = ending.error.clone();
    });
    let detail = if ending.error.is_empty() {
        "finished".to_owned()
    } else {
        ending.error.clone()
    };
    set_state(entry, ending.state, &detail);
    let task = entry.snapshot();
    crate::metrics::task_ended(ending.state, task.steps);
    entry.push(task_event::Kind::Completed(TaskCompleted {
        success: ending.state == TaskState::Succeeded,
        answer: ending.answer,
        structured_output: task.structured_output,
        steps: task.steps,
        usage: task.usage,
        duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        error: ending.error,
        answered_directly: task.answered_directly,
        files: task.files,
    }));
}

/// Records a task that ended before it ran (cancelled while queued, device gone).
pub fn finish_early(entry: &TaskEntry, state: TaskState, reason: &str) {
    finish(
        entry,
        Ending {
            state,
            answer: String::new(),
            error: reason.to_owned(),
        },
        Duration::ZERO,
    );
}

/// Adds an agent's usage report to the task's totals and its event log.
pub fn record_usage(entry: &TaskEntry, report: &UsageReport) {
    if let Some(usage) = &report.usage {
        entry.update(|t| add_usage(&mut t.usage, usage));
    }
    entry.push(task_event::Kind::Usage(report.clone()));
}

pub fn add_usage(total: &mut Option<TokenUsage>, u: &TokenUsage) {
    let t = total.get_or_insert_with(TokenUsage::default);
    t.input_tokens += u.input_tokens;
    t.output_tokens += u.output_tokens;
    t.cached_input_tokens += u.cached_input_tokens;
    t.calls += u.calls.max(1);
}
