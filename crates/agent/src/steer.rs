//! Steering a running task, one contract for both modes: what a user may send while a task
//! runs (a note, a new goal, a reply to a request for help, a stop), what each does while the
//! task runs and while it waits for a person, and the caps on what a task keeps for its model
//! (notes, memory, history).
//!
//! The gateway's reasoning loop and the executor's CodeAct loop (direct mode) both keep their
//! task's goal and notes in a [`Steering`], their memory in a [`Memory`] and their history in
//! a [`Kept`]; in direct mode the gateway relays each [`Steer`] to the executor as a
//! `CodeActInput` ([`Steer::into_input`], [`Steer::from_input`]). Each mode words the notes
//! for its own model ([`Voice`]); what a message does is decided here only.
use droidmesh_proto::v1::code_act_input;

/// Notes from the user kept for the next step (the oldest go first).
pub const NOTES_KEPT: usize = 20;
/// Memory notes kept (`remember(...)` in direct mode, the manager's memory in reasoning mode),
/// and the longest note in characters.
pub const MEMORY_KEPT: usize = 50;
pub const MEMORY_NOTE_CHARS: usize = 1_000;
/// Earlier steps (direct mode) or routed actions (reasoning mode) a task keeps.
pub const HISTORY_KEPT: usize = 50;

/// A message for a running task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Steer {
    /// A note shown to the model at the next step.
    Note(String),
    /// The goal from now on; the task goes on with what it has done so far.
    NewGoal(String),
    /// A person's reply to the task's request for help (a note when none is pending).
    HumanReply(String),
    /// End after the step in progress, for the reason given (may be empty).
    Stop(String),
}

impl Steer {
    /// The message as the executor's `RunCodeAct` stream carries it (a stop's reason stays
    /// with the gateway).
    pub fn into_input(self) -> code_act_input::Kind {
        match self {
            Self::Note(n) => code_act_input::Kind::UserMessage(n),
            Self::NewGoal(g) => code_act_input::Kind::NewGoal(g),
            Self::HumanReply(r) => code_act_input::Kind::HumanReply(r),
            Self::Stop(_) => code_act_input::Kind::Stop(true),
        }
    }

    /// The message a `RunCodeAct` input carries; `None` for a start or `stop: false`.
    pub fn from_input(kind: code_act_input::Kind) -> Option<Self> {
        match kind {
            code_act_input::Kind::UserMessage(n) => Some(Self::Note(n)),
            code_act_input::Kind::NewGoal(g) => Some(Self::NewGoal(g)),
            code_act_input::Kind::HumanReply(r) => Some(Self::HumanReply(r)),
            code_act_input::Kind::Stop(true) => Some(Self::Stop(String::new())),
            code_act_input::Kind::Stop(false) | code_act_input::Kind::Start(_) => None,
        }
    }
}

/// The newest items of a list that only grows, oldest first, within a cap; counts those
/// dropped.
#[derive(Debug, Clone)]
pub struct Kept<T> {
    items: Vec<T>,
    cap: usize,
    dropped: u64,
}

impl<T> Kept<T> {
    /// An empty list keeping at most `cap` items (at least one).
    pub fn new(cap: usize) -> Self {
        Self {
            items: Vec::new(),
            cap: cap.max(1),
            dropped: 0,
        }
    }

    /// Adds `item` as the newest, dropping the oldest beyond the cap.
    pub fn push(&mut self, item: T) {
        self.items.push(item);
        if self.items.len() > self.cap {
            let over = self.items.len() - self.cap;
            self.items.drain(..over);
            self.dropped += over as u64;
        }
    }

    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn last(&self) -> Option<&T> {
        self.items.last()
    }

    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.items.last_mut()
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// How many items were dropped to keep within the cap, since the list was made.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets every item (they do not count as dropped).
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Keeps only the items `keep` says yes to (they do not count as dropped).
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.items.retain(keep);
    }
}

/// `text` cut to its first `max` characters, `…` marking a cut (droidmesh's one rule,
/// [`droidmesh_proto::text::shorten`]).
pub use droidmesh_proto::text::shorten as cut;

/// What the model keeps for itself across steps: the newest [`MEMORY_KEPT`] notes, each cut to
/// [`MEMORY_NOTE_CHARS`] characters (and `…` when cut).
#[derive(Debug, Clone)]
pub struct Memory(Kept<String>);

impl Default for Memory {
    fn default() -> Self {
        Self(Kept::new(MEMORY_KEPT))
    }
}

impl Memory {
    /// Keeps `note`, trimmed and cut to its cap; a blank note is not kept.
    pub fn remember(&mut self, note: &str) {
        let note = note.trim();
        if !note.is_empty() {
            self.0.push(cut(note, MEMORY_NOTE_CHARS));
        }
    }

    /// The notes kept, oldest first.
    pub fn notes(&self) -> &[String] {
        self.0.as_slice()
    }

    /// The notes one a line.
    pub fn joined(&self) -> String {
        self.0.as_slice().join("\n")
    }
}

/// How a mode's model is told what the user sent.
#[derive(Debug, Clone, Copy)]
pub struct Voice {
    /// A note from the user.
    pub note: fn(&str) -> String,
    /// The goal the user changed to.
    pub new_goal: fn(&str) -> String,
    /// A person's reply to the request for help made for the reason given.
    pub reply: fn(reason: &str, reply: &str) -> String,
}

/// What a message asks of the loop once taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Taken into the goal or the notes: the loop goes on, and a wait for a person goes on
    /// waiting.
    Go,
    /// The person replied (taken into the notes): the wait ends.
    Replied,
    /// End after the step in progress, for the reason given.
    Stop(String),
}

/// The part of a task's state the user steers: the goal as it stands and the notes for the
/// next step.
#[derive(Debug, Clone)]
pub struct Steering {
    goal: String,
    notes: Kept<String>,
    voice: Voice,
}

impl Steering {
    /// `notes_kept`: how many notes wait for the next step at most (the oldest go first).
    pub fn new(goal: impl Into<String>, voice: Voice, notes_kept: usize) -> Self {
        Self {
            goal: goal.into(),
            notes: Kept::new(notes_kept),
            voice,
        }
    }

    pub fn goal(&self) -> &str {
        &self.goal
    }

    /// The notes for the next step, oldest first.
    pub fn notes(&self) -> &[String] {
        self.notes.as_slice()
    }

    /// Forgets the notes once a step has shown them (reasoning mode shows each to one plan).
    pub fn clear_notes(&mut self) {
        self.notes.clear();
    }

    /// Adds a note of the loop's own (already worded for its model).
    pub fn note(&mut self, text: String) {
        self.notes.push(text);
    }

    /// Takes one message. `waiting`: the reason of the request for help the task waits on,
    /// when it waits for a person. Notes and goal changes are taken the same way whether or
    /// not the task waits; a reply ends a wait, and is a note like any other when nobody asked.
    pub fn take(&mut self, message: Steer, waiting: Option<&str>) -> Next {
        match message {
            Steer::Stop(reason) => Next::Stop(reason),
            Steer::NewGoal(goal) => {
                self.note((self.voice.new_goal)(&goal));
                self.goal = goal;
                Next::Go
            }
            Steer::HumanReply(reply) => match waiting {
                Some(reason) => {
                    self.note((self.voice.reply)(reason, &reply));
                    Next::Replied
                }
                None => {
                    self.note((self.voice.note)(&reply));
                    Next::Go
                }
            },
            Steer::Note(text) => {
                self.note((self.voice.note)(&text));
                Next::Go
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Voice = Voice {
        note: |n| format!("note: {n}"),
        new_goal: |g| format!("goal: {g}"),
        reply: |why, r| format!("reply to {why}: {r}"),
    };

    #[test]
    fn a_kept_list_holds_the_newest_and_counts_the_rest() {
        let mut k = Kept::new(3);
        for i in 1..=5 {
            k.push(i);
        }
        assert_eq!(k.as_slice(), [3, 4, 5]);
        assert_eq!((k.len(), k.dropped(), k.last()), (3, 2, Some(&5)));
        if let Some(last) = k.last_mut() {
            *last = 6;
        }
        assert_eq!(k.as_slice(), [3, 4, 6]);
        k.retain(|i| *i != 4);
        assert_eq!(k.as_slice(), [3, 6]);
        k.clear();
        assert_eq!((k.is_empty(), k.dropped()), (true, 2));
        assert_eq!(Kept::<u8>::new(0).cap(), 1);
    }

    #[test]
    fn memory_keeps_the_newest_notes_each_cut_to_its_cap() {
        let mut m = Memory::default();
        m.remember("   ");
        assert!(m.notes().is_empty());
        m.remember(&"é".repeat(MEMORY_NOTE_CHARS + 5));
        assert_eq!(m.notes()[0].chars().count(), MEMORY_NOTE_CHARS + 1);
        assert!(m.notes()[0].ends_with("é…"));
        for i in 0..MEMORY_KEPT + 10 {
            m.remember(&format!(" n{i} "));
        }
        assert_eq!(m.notes().len(), MEMORY_KEPT);
        assert_eq!(m.notes()[0], "n10");
        assert!(m.joined().ends_with("\nn59"));
    }

    #[test]
    fn notes_and_goals_are_taken_alike_while_waiting_and_a_reply_ends_the_wait() {
        let mut s = Steering::new("g1", PLAIN, 2);
        let why = Some("a code");
        assert_eq!(s.take(Steer::Note("a".into()), why), Next::Go);
        assert_eq!(s.take(Steer::NewGoal("g2".into()), why), Next::Go);
        assert_eq!(s.goal(), "g2");
        assert_eq!(s.take(Steer::HumanReply("1234".into()), why), Next::Replied);
        // Two notes kept: the oldest went first.
        assert_eq!(s.notes(), ["goal: g2", "reply to a code: 1234"]);
        assert_eq!(s.take(Steer::HumanReply("late".into()), None), Next::Go);
        assert_eq!(s.notes()[1], "note: late");
        assert_eq!(
            s.take(Steer::Stop("enough".into()), why),
            Next::Stop("enough".into())
        );
        s.clear_notes();
        assert!(s.notes().is_empty());
    }

    #[test]
    fn messages_cross_the_codeact_stream_unchanged_but_for_a_stop_s_reason() {
        for m in [
            Steer::Note("n".into()),
            Steer::NewGoal("g".into()),
            Steer::HumanReply("r".into()),
            Steer::Stop(String::new()),
        ] {
            assert_eq!(Steer::from_input(m.clone().into_input()), Some(m));
        }
        assert_eq!(
            Steer::Stop("why".into()).into_input(),
            code_act_input::Kind::Stop(true)
        );
        assert_eq!(Steer::from_input(code_act_input::Kind::Stop(false)), None);
    }
}
