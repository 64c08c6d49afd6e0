//! The planner's prompt context from a `PlanRequest` and the device's state, cut to bounds so
//! that one long task cannot outgrow the model's context: the newest entries of each history
//! are kept, long texts are shortened with a marker that says so.
use droidmesh_agent::prompts::{
    ActionRecord, ConversationTurn, ManagerSystem, PhoneState, ProducedFile, Screen,
};
use droidmesh_agent::tools::{ATOMIC_ACTIONS, json_actions, select};
// `text` cut to `max` characters, with a marker that says how much was left out.
use droidmesh_proto::text::shorten_noting as clip;
use droidmesh_proto::v1::{self as pb, PlanRequest, UiState};

/// Past actions shown (the newest).
pub const MAX_ACTION_HISTORY: usize = 20;
/// Failed attempts shown under "Repeated failures" (the newest).
pub const MAX_ERROR_HISTORY: usize = 5;
/// Longest action, description or feedback of one past action.
pub const MAX_RECORD_FIELD_CHARS: usize = 800;
/// Memory notes shown (the newest), and their total length.
pub const MAX_MEMORY_NOTES: usize = 50;
pub const MAX_MEMORY_CHARS: usize = 6_000;
/// Messages from the user shown (the newest), and the longest one.
pub const MAX_NOTES: usize = 10;
pub const MAX_NOTE_CHARS: usize = 2_000;
/// Earlier goals of the conversation shown (the newest), and the longest goal and answer.
pub const MAX_CONVERSATION_TURNS: usize = 10;
pub const MAX_TURN_GOAL_CHARS: usize = 500;
pub const MAX_TURN_ANSWER_CHARS: usize = 1_500;
/// Produced files listed (the newest).
pub const MAX_FILES: usize = 20;
/// Longest instruction.
pub const MAX_INSTRUCTION_CHARS: usize = 8_000;
/// Longest app card, previous plan and handoff result.
pub const MAX_BLOCK_CHARS: usize = 4_000;
/// Secret ids listed.
pub const MAX_SECRET_IDS: usize = 32;
/// Screen elements listed (in the device's order).
pub const MAX_UI_ELEMENTS: usize = 600;

/// Everything `manager/system.jinja` shows for this request and device state.
pub(crate) fn context(
    r: &PlanRequest,
    state: &UiState,
    screenshot_attached: bool,
) -> ManagerSystem {
    let (ui_state, phone) = screen(state);
    ManagerSystem {
        instruction: clip(r.instruction.trim(), MAX_INSTRUCTION_CHARS),
        executor_actions: select(ATOMIC_ACTIONS)
            .map(|tools| json_actions(&tools))
            .unwrap_or_default(),
        now: None,
        phone,
        ui_state,
        vision: screenshot_attached,
        app_card: block(&r.app_card),
        secret_ids: r
            .secret_ids
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .take(MAX_SECRET_IDS)
            .map(|s| clip(s, 100))
            .collect(),
        previous_plan: block(&r.previous_plan),
        memory: memory_notes(&r.memory),
        action_history: records(&r.action_history, MAX_ACTION_HISTORY),
        error_history: records(&r.error_history, MAX_ERROR_HISTORY),
        last_handoff_result: block(&r.last_handoff_result),
        conversation: newest(&r.conversation, MAX_CONVERSATION_TURNS)
            .iter()
            .map(|t| ConversationTurn {
                goal: clip(t.goal.trim(), MAX_TURN_GOAL_CHARS),
                answer: clip(t.answer.trim(), MAX_TURN_ANSWER_CHARS),
                success: t.success,
            })
            .collect(),
        notes: newest(&r.notes, MAX_NOTES)
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(|n| clip(n, MAX_NOTE_CHARS))
            .collect(),
        files: newest(&r.files, MAX_FILES)
            .iter()
            .map(|f| ProducedFile {
                name: clip(&f.name, 200),
                size_bytes: f.size_bytes,
                path: clip(&f.path, 500),
            })
            .collect(),
    }
}

/// The last `n` items.
fn newest<T>(items: &[T], n: usize) -> &[T] {
    &items[items.len().saturating_sub(n)..]
}

fn block(text: &str) -> Option<String> {
    Some(text.trim())
        .filter(|t| !t.is_empty())
        .map(|t| clip(t, MAX_BLOCK_CHARS))
}

fn records(items: &[pb::ActionRecord], n: usize) -> Vec<ActionRecord> {
    newest(items, n)
        .iter()
        .map(|a| ActionRecord {
            agent: clip(&a.agent, 50),
            action: clip(&a.action, MAX_RECORD_FIELD_CHARS),
            description: clip(&a.description, MAX_RECORD_FIELD_CHARS),
            success: a.success,
            feedback: clip(&a.feedback, MAX_RECORD_FIELD_CHARS),
        })
        .collect()
}

/// The task's memory, one note per non-empty line, newest kept within the bounds; a first
/// note says how many older ones were left out.
pub(crate) fn memory_notes(memory: &str) -> Vec<String> {
    let lines: Vec<&str> = memory
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut kept: Vec<String> = Vec::new();
    let mut total = 0usize;
    for line in lines.iter().rev() {
        if kept.len() == MAX_MEMORY_NOTES || total >= MAX_MEMORY_CHARS {
            break;
        }
        let note = clip(line, MAX_MEMORY_CHARS - total);
        total += note.chars().count();
        kept.push(note);
    }
    let left_out = lines.len() - kept.len();
    if left_out > 0 {
        kept.push(format!("({left_out} older notes are not shown)"));
    }
    kept.reverse();
    kept
}

/// The device state as the prompt shows it (at most [`MAX_UI_ELEMENTS`] elements).
fn screen(state: &UiState) -> (Screen, PhoneState) {
    droidmesh_agent::prompts::screen(state, MAX_UI_ELEMENTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_counts_characters_and_says_what_it_cut() {
        assert_eq!(clip("héllo", 5), "héllo");
        assert_eq!(clip("héllo wörld", 5), "héllo […6 more characters cut]");
    }

    #[test]
    fn memory_keeps_the_newest_notes_within_bounds() {
        assert_eq!(memory_notes("a\n\n  b  \n"), ["a", "b"]);
        let many: String = (0..200).map(|i| format!("note {i}\n")).collect();
        let notes = memory_notes(&many);
        assert_eq!(notes.len(), MAX_MEMORY_NOTES + 1);
        assert_eq!(notes[0], "(150 older notes are not shown)");
        assert_eq!(notes.last().unwrap(), "note 199");
        let long = format!("old\n{}", "x".repeat(3 * MAX_MEMORY_CHARS));
        let notes = memory_notes(&long);
        assert_eq!(notes[0], "(1 older notes are not shown)");
        assert!(
            notes[1].chars().count() < MAX_MEMORY_CHARS + 40,
            "{}",
            notes[1].len()
        );
    }

    #[test]
    fn histories_keep_their_newest_entries() {
        let r = PlanRequest {
            instruction: "go".into(),
            action_history: (0..30)
                .map(|i| pb::ActionRecord {
                    action: format!("tap {i}"),
                    feedback: "y".repeat(5_000),
                    ..pb::ActionRecord::default()
                })
                .collect(),
            notes: (0..15).map(|i| format!("note {i}")).collect(),
            ..PlanRequest::default()
        };
        let ctx = context(&r, &UiState::default(), false);
        assert_eq!(ctx.action_history.len(), MAX_ACTION_HISTORY);
        assert_eq!(ctx.action_history[0].action, "tap 10");
        assert!(ctx.action_history[0].feedback.chars().count() < MAX_RECORD_FIELD_CHARS + 40);
        assert_eq!(ctx.notes.first().map(String::as_str), Some("note 5"));
        assert_eq!(ctx.notes.len(), MAX_NOTES);
    }
}
