//! Conversation memory: the last goals and answers of each conversation (tasks sharing a
//! `conversation_id`), handed to the manager so a follow-up question can be answered from them.
//! Bounded in turns per conversation, in characters per turn and in conversations kept (the
//! least recently used is forgotten first).
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use droidmesh_proto::v1::ConversationTurn;

/// Longest goal or answer kept per turn, in characters; longer ones are cut with "…".
pub const MAX_TURN_CHARS: usize = 2_000;

/// Longest conversation id accepted.
pub const MAX_ID_CHARS: usize = 128;

#[derive(Debug)]
pub struct Conversations {
    turns_per_conversation: usize,
    max_conversations: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    turns: HashMap<String, VecDeque<ConversationTurn>>,
    /// Conversation ids, least recently used first.
    recency: VecDeque<String>,
}

fn cut(s: &str) -> String {
    droidmesh_proto::text::shorten(s, MAX_TURN_CHARS)
}

impl Conversations {
    pub fn new(turns_per_conversation: usize, max_conversations: usize) -> Self {
        Self {
            turns_per_conversation,
            max_conversations,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The conversation's turns, oldest first (empty for an unknown or empty id).
    pub fn turns(&self, id: &str) -> Vec<ConversationTurn> {
        if id.is_empty() {
            return Vec::new();
        }
        let inner = self.lock();
        inner
            .turns
            .get(id)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Appends a finished task to its conversation.
    pub fn record(&self, id: &str, goal: &str, answer: &str, success: bool) {
        if id.is_empty() || self.turns_per_conversation == 0 || self.max_conversations == 0 {
            return;
        }
        let mut inner = self.lock();
        let inner = &mut *inner;
        if let Some(pos) = inner.recency.iter().position(|c| c == id) {
            inner.recency.remove(pos);
        }
        inner.recency.push_back(id.to_owned());
        let turns = inner.turns.entry(id.to_owned()).or_default();
        turns.push_back(ConversationTurn {
            goal: cut(goal),
            answer: cut(answer),
            success,
        });
        while turns.len() > self.turns_per_conversation {
            turns.pop_front();
        }
        while inner.recency.len() > self.max_conversations {
            if let Some(old) = inner.recency.pop_front() {
                inner.turns.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_turns_of_the_most_recent_conversations() {
        let c = Conversations::new(3, 2);
        for i in 0..5 {
            c.record("a", &format!("goal {i}"), &format!("answer {i}"), true);
        }
        let goals: Vec<String> = c.turns("a").into_iter().map(|t| t.goal).collect();
        assert_eq!(goals, ["goal 2", "goal 3", "goal 4"]);
        c.record("b", "g", "x", false);
        // "a" was used less recently than "b"; a third conversation forgets "a".
        c.record("c", "g", "x", true);
        assert!(c.turns("a").is_empty());
        assert_eq!(c.turns("b").len(), 1);
        assert!(!c.turns("b")[0].success);
        assert!(c.turns("").is_empty());
        c.record("", "g", "x", true);
        assert!(c.turns("").is_empty());
    }

    #[test]
    fn long_turns_are_cut() {
        let c = Conversations::new(10, 10);
        c.record("a", &"g".repeat(5_000), "ok", true);
        let t = &c.turns("a")[0];
        assert_eq!(t.goal.chars().count(), MAX_TURN_CHARS + 1);
        assert!(t.goal.ends_with('…'));
    }
}
