//! Loop detection, one rule for both modes: the same action with the same target on an
//! unchanged screen, `repeats` times in a row (3 by default), is a loop.
//!
//! - **The same action with the same target**: the same [`Tool`] with the same arguments, in
//!   the tool's parameter order (`tap(5)` and `{"action": "tap", "index": 5}` are one action).
//!   On one screen an element index names one element, so the same index is the same target;
//!   coordinates are compared as given.
//! - **An unchanged screen**: each repeat was made on a screen with the same [`ScreenPrint`], a
//!   hash of every field of every element and of the phone's state (app, activity, keyboard,
//!   focus); nothing in it is a time stamp. So the first `repeats - 1` of them left the screen
//!   as it was. A screen that changes with each action (a counter, a list that scrolls, a
//!   switch that flips) is never a loop.
//! - **What counts**: one entry per step. Direct mode's CodeAct step may run several tool
//!   calls: its entry is every call of the step that acts on the screen ([`Action::acts`]:
//!   taps, typing, keys, gestures, opening an app; not `wait`, `remember`, `complete`, questions
//!   or package lists), in order, with the screen the step began on; a step with no such call
//!   is skipped (it neither counts nor breaks a run of repeats). Reasoning mode's entry is the
//!   executor's one action of a subgoal, with the screen it read before acting.
//!
//! What a mode does with a [`Verdict`]: on the first [`Verdict::Warn`] for a repeat it tells
//! its model (direct mode: a note with the step in the next prompt; reasoning mode: a note that
//! asks the manager to plan again) and the user (an event); the count then starts over, and
//! the same repeat reaching `repeats` again is [`Verdict::Stop`]: the run ends with
//! [`Repeat::summary`] in its reason rather than spending the rest of its budget.
//!
//! The guard keeps the last entry's key and how many times in a row it came (the window of
//! the last `repeats` entries, run-length encoded), and the keys of the last
//! [`WARNED_KEPT`] repeats it warned about.
use serde_json::{Map, Value};

use crate::prompts::{PhoneState, UiElement};
use crate::steer::{Kept, cut};
use crate::tools::Tool;

/// Repeats that make a loop when the configuration does not say.
pub const DEFAULT_REPEATS: u32 = 3;
/// Repeats warned about that are remembered (the oldest are forgotten first).
pub const WARNED_KEPT: usize = 16;
/// Actions of one step that are compared; a step that runs more is compared by its first.
pub const ACTIONS_PER_STEP: usize = 64;
/// Actions named in a description, and its longest text.
const DESCRIBED: usize = 3;
const DESCRIPTION_CHARS: usize = 200;
/// Longest string argument shown in a description.
const ARG_CHARS: usize = 40;

/// A 64-bit hash of what it is fed, eight bytes at a time: each word is folded in by a
/// 128-bit multiply whose halves are xored, so every bit of a word reaches every bit of the
/// state. Its own code, so the value is the same in every process and on every build (the
/// executor hashes a screen, the gateway compares the hashes).
struct Fold(u64);

/// Odd constants with well-mixed bits (the 64-bit fractional parts of pi and e).
const START: u64 = 0x243f_6a88_85a3_08d3;
const MULTIPLIER: u64 = 0xb7e1_5162_8aed_2a6b;

impl Fold {
    fn new() -> Self {
        Self(START)
    }

    fn num(&mut self, n: u64) {
        let m = u128::from(self.0 ^ n) * u128::from(MULTIPLIER);
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }

    /// Its length, then its bytes (the last word padded with zeros).
    fn text(&mut self, s: &str) {
        self.num(s.len() as u64);
        let mut words = s.as_bytes().chunks_exact(8);
        for w in words.by_ref() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.num(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.num(u64::from_le_bytes(b));
        }
    }

    fn flags(&mut self, flags: &[bool]) {
        let mut bits = 0u64;
        for (i, f) in flags.iter().enumerate() {
            bits |= u64::from(*f) << i;
        }
        self.num(bits);
    }
}

/// A screen's fingerprint: equal for screens whose elements and phone state are equal, field
/// for field. Shown and carried as 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScreenPrint(u64);

impl ScreenPrint {
    /// The fingerprint of a screen as prompts show it.
    pub fn of(elements: &[UiElement], phone: &PhoneState) -> Self {
        let mut h = Fold::new();
        h.num(elements.len() as u64);
        for e in elements {
            // Every field, named: a field added to `UiElement` must be added here to compile.
            let UiElement {
                index,
                depth,
                class_name,
                text,
                content_desc,
                resource_id,
                bounds,
                clickable,
                long_clickable,
                checkable,
                checked,
                editable,
                focused,
                scrollable,
                selected,
                disabled,
                password,
            } = e;
            h.num(u64::from(*index));
            h.num(u64::from(*depth));
            h.text(class_name);
            h.text(text);
            h.text(content_desc);
            h.text(resource_id);
            // Each coordinate as its 32 bits, two to a word.
            let [left, top, right, bottom] = bounds.map(|b| u64::from(b as u32));
            h.num(left | top << 32);
            h.num(right | bottom << 32);
            h.flags(&[
                *clickable,
                *long_clickable,
                *checkable,
                *checked,
                *editable,
                *focused,
                *scrollable,
                *selected,
                *disabled,
                *password,
            ]);
        }
        let PhoneState {
            package,
            activity,
            keyboard_shown,
            focused_index,
            focused_text,
        } = phone;
        h.text(package);
        h.text(activity);
        h.flags(&[*keyboard_shown, focused_index.is_some()]);
        h.num(u64::from(focused_index.unwrap_or_default()));
        h.text(focused_text);
        Self(h.0)
    }

    /// Reads the 16 hex digits [`ScreenPrint`] is shown as; `None` for anything else.
    pub fn parse(hex: &str) -> Option<Self> {
        if hex.len() != 16 {
            return None;
        }
        u64::from_str_radix(hex, 16).ok().map(Self)
    }
}

impl std::fmt::Display for ScreenPrint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// One tool call: the tool and its arguments in the tool's parameter order (`null` for an
/// optional one left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    tool: Tool,
    args: Vec<Value>,
}

impl Action {
    /// A call as the sandbox makes it: arguments by position. Trailing `null`s are dropped, so
    /// `tap(5)` and `tap(5, undefined)` are one action.
    pub fn new(tool: Tool, args: &[Value]) -> Self {
        let mut args = args.to_vec();
        while args.last().is_some_and(Value::is_null) {
            args.pop();
        }
        Self { tool, args }
    }

    /// A call as executor JSON names it (`{"index": 5}`), put in the tool's parameter order.
    pub fn named(tool: Tool, args: &Map<String, Value>) -> Self {
        let ordered: Vec<Value> = tool
            .spec()
            .params
            .iter()
            .map(|p| args.get(p.name).cloned().unwrap_or(Value::Null))
            .collect();
        Self::new(tool, &ordered)
    }

    pub fn tool(&self) -> Tool {
        self.tool
    }

    /// Whether the call acts on the screen, and so can repeat in a loop. Waiting is how a
    /// slow screen is given time; bookkeeping, questions and package lists change nothing.
    pub fn acts(&self) -> bool {
        match self.tool {
            Tool::Tap
            | Tool::TapAt
            | Tool::LongPress
            | Tool::TypeText
            | Tool::PressKey
            | Tool::Back
            | Tool::Home
            | Tool::Swipe
            | Tool::Drag
            | Tool::OpenApp
            | Tool::TypeSecret => true,
            Tool::Wait
            | Tool::ListPackages
            | Tool::Remember
            | Tool::Complete
            | Tool::RequestHumanHelp => false,
        }
    }

    /// The call in words: `tap on element 5`, `tap_at (540, 612)`, `swipe(540, 1800, 540,
    /// 600)`, `type_text("hello")` (long strings cut).
    pub fn describe(&self) -> String {
        let name = self.tool.name();
        match (self.tool, self.args.as_slice()) {
            (Tool::Tap | Tool::LongPress, [index]) => format!("{name} on element {index}"),
            (Tool::TapAt, [x, y]) => format!("{name} ({x}, {y})"),
            (_, args) => {
                let shown: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        Value::String(s) => Value::String(cut(s, ARG_CHARS)).to_string(),
                        other => other.to_string(),
                    })
                    .collect();
                format!("{name}({})", shown.join(", "))
            }
        }
    }

    fn hash_into(&self, h: &mut Fold) {
        h.text(self.tool.name());
        h.num(self.args.len() as u64);
        for a in &self.args {
            h.text(&a.to_string());
        }
    }
}

/// A repeat found: what was repeated, in words, and how many times in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeat {
    /// The action (or a step's actions, `, then ` between them), described.
    pub what: String,
    /// How many actions the step held.
    pub actions: usize,
    /// Times in a row on one screen (the guard's `repeats`).
    pub times: u32,
}

impl Repeat {
    /// `the same tap on element 5 repeated 3 times on an unchanged screen`; a step of several
    /// actions: `the same actions (tap on element 5, then back()) repeated ...`.
    pub fn summary(&self) -> String {
        let what = if self.actions == 1 {
            self.what.clone()
        } else {
            format!("actions ({})", self.what)
        };
        format!(
            "the same {what} repeated {} times on an unchanged screen",
            self.times
        )
    }
}

/// What a mode does after an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No loop (or detection is off).
    Go,
    /// A loop, the first time for this repeat: tell the model and the user.
    Warn(Repeat),
    /// The same loop again after the warning: end the run.
    Stop(Repeat),
}

/// Watches a run's actions for loops (see the module doc).
#[derive(Debug, Clone)]
pub struct LoopGuard {
    repeats: u32,
    last: Option<u64>,
    run: u32,
    warned: Kept<u64>,
}

impl LoopGuard {
    /// A guard for which `repeats` in a row make a loop; 0 turns detection off.
    pub fn new(repeats: u32) -> Self {
        Self {
            repeats,
            last: None,
            run: 0,
            warned: Kept::new(WARNED_KEPT),
        }
    }

    /// Takes one step's calls, made on `screen`, and says whether they close a loop. Calls
    /// that do not act ([`Action::acts`]) are left out; a step left with none changes nothing.
    pub fn record(&mut self, screen: ScreenPrint, calls: &[Action]) -> Verdict {
        if self.repeats == 0 {
            return Verdict::Go;
        }
        let acting: Vec<&Action> = calls
            .iter()
            .filter(|a| a.acts())
            .take(ACTIONS_PER_STEP)
            .collect();
        if acting.is_empty() {
            return Verdict::Go;
        }
        let mut h = Fold::new();
        h.num(screen.0);
        for a in &acting {
            a.hash_into(&mut h);
        }
        let key = h.0;
        if self.last == Some(key) {
            self.run += 1;
        } else {
            self.last = Some(key);
            self.run = 1;
        }
        if self.run < self.repeats {
            return Verdict::Go;
        }
        // The next repeats are counted afresh, after the warning.
        self.run = 0;
        let repeat = Repeat {
            what: describe(&acting),
            actions: acting.len(),
            times: self.repeats,
        };
        if self.warned.iter().any(|k| *k == key) {
            Verdict::Stop(repeat)
        } else {
            self.warned.push(key);
            Verdict::Warn(repeat)
        }
    }
}

/// A step's actions in words: the first few, `, then ` between them.
fn describe(actions: &[&Action]) -> String {
    let mut parts: Vec<String> = actions
        .iter()
        .take(DESCRIBED)
        .map(|a| a.describe())
        .collect();
    if actions.len() > DESCRIBED {
        parts.push(format!("{} more", actions.len() - DESCRIBED));
    }
    cut(&parts.join(", then "), DESCRIPTION_CHARS)
}

#[cfg(test)]
#[path = "loops_tests.rs"]
mod tests;
