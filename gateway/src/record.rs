//! A task's record apart from where it is held (memory, a task store): whether its state is
//! final, its summary in a list, its compact form once ended, and the clock and text cut they
//! use.
use std::time::{SystemTime, UNIX_EPOCH};

use droidmesh_proto::v1::{Task, TaskState, TaskSummary};

/// Characters of a goal or final reason in a summary.
pub const SUMMARY_CHARS: usize = 200;
/// Milliseconds since the Unix epoch, by the system clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Whether a task in `state` has ended.
pub fn is_final(state: TaskState) -> bool {
    matches!(
        state,
        TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled
    )
}

/// Longest text fields in an ended task's record.
pub(crate) const KEPT_TEXT: usize = 1_000;
pub(crate) const KEPT_ANSWER: usize = 4_000;
pub(crate) const KEPT_STRUCTURED_BYTES: usize = 4_000;
pub(crate) const KEPT_FILES: usize = 20;

/// The record of an ended task, its long texts cut and its plan dropped.
pub fn compact(t: &mut Task) {
    if let Some(r) = t.request.as_mut() {
        r.goal = cut(&r.goal, KEPT_TEXT);
        r.app_card = cut(&r.app_card, KEPT_TEXT);
        r.output_schema = r.output_schema.as_deref().map(|s| cut(s, KEPT_TEXT));
    }
    t.plan = Vec::new();
    t.memory = cut(&t.memory, KEPT_TEXT);
    t.answer = cut(&t.answer, KEPT_ANSWER);
    t.error = cut(&t.error, KEPT_TEXT);
    if t.structured_output
        .as_ref()
        .is_some_and(|s| s.len() > KEPT_STRUCTURED_BYTES)
    {
        t.structured_output = None;
    }
    if t.files.len() > KEPT_FILES {
        let extra = t.files.len() - KEPT_FILES;
        t.files.drain(..extra);
    }
}

/// `s` cut to `max` characters, `…` marking a cut (the one rule, `droidmesh_proto::text`).
pub use droidmesh_proto::text::shorten as cut;

/// The summary of a task in a list.
pub fn summary(t: &Task) -> TaskSummary {
    let req = t.request.as_ref();
    let ended = is_final(TaskState::try_from(t.state).unwrap_or(TaskState::Unspecified));
    let reason = if t.error.is_empty() {
        &t.answer
    } else {
        &t.error
    };
    TaskSummary {
        id: t.id.clone(),
        state: t.state,
        goal: req.map(|r| cut(&r.goal, SUMMARY_CHARS)).unwrap_or_default(),
        device: t.device.clone(),
        mode: req.map_or(0, |r| r.mode),
        steps: t.steps,
        created_at_ms: t.created_at_ms,
        updated_at_ms: t.updated_at_ms,
        success: t.state == TaskState::Succeeded as i32,
        final_reason: if ended {
            cut(reason, SUMMARY_CHARS)
        } else {
            String::new()
        },
        last_seq: t.last_seq,
    }
}
