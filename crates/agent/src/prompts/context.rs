//! The typed context of each template: what a template may use, field for field.
//!
//! Every field is always serialized (an absent optional value is `none` in the template), so a
//! template that names a variable not listed here fails when it is loaded, not when it is
//! rendered.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use serde::{Serialize, Serializer};

use super::{Prompt, PromptName};

/// One element of the screen, as prompts show it and as the CodeAct sandbox's `ui_state`
/// global holds it: set `ui_state` from the same values (`serde_json::to_value`) so that what
/// the model reads and what its code sees agree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UiElement {
    /// Index for `tap(index)` and friends; valid for this screen only.
    pub index: u32,
    /// Depth in the view tree (root 0), for indentation.
    pub depth: u32,
    /// Android class, e.g. `android.widget.Switch` (prompts show the last segment).
    pub class_name: String,
    /// Visible text.
    pub text: String,
    /// Accessibility description.
    pub content_desc: String,
    /// Resource id, e.g. `com.android.settings:id/switch_widget` (prompts show the part after
    /// the last `/`).
    pub resource_id: String,
    /// `[left, top, right, bottom]` in screen pixels.
    pub bounds: [i32; 4],
    /// Reacts to taps.
    pub clickable: bool,
    /// Reacts to long presses.
    pub long_clickable: bool,
    /// Can be checked (switch, checkbox, radio button).
    pub checkable: bool,
    /// Is checked.
    pub checked: bool,
    /// Accepts text.
    pub editable: bool,
    /// Has input focus.
    pub focused: bool,
    /// Can be scrolled.
    pub scrollable: bool,
    /// Is selected.
    pub selected: bool,
    /// Is disabled (the inverse of Android's `enabled`, so that the default is "enabled").
    pub disabled: bool,
    /// Is a password field.
    pub password: bool,
}

/// The elements of one screen, shared: cloning one is cheap, so a step's prompt, its model
/// call and CodeAct's `ui_state` all use the screen read once. Templates see a list of
/// elements; the `ui_lines` filter writes its lines from the elements themselves rather than
/// from template values made of every field of every element (a screen is shown at every
/// step of every task). Serialized (`serde_json`) as the list of elements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Screen(Arc<[UiElement]>);

impl Screen {
    pub fn elements(&self) -> &[UiElement] {
        &self.0
    }
}

impl std::ops::Deref for Screen {
    type Target = [UiElement];

    fn deref(&self) -> &[UiElement] {
        &self.0
    }
}

impl From<Vec<UiElement>> for Screen {
    fn from(elements: Vec<UiElement>) -> Self {
        Self(elements.into())
    }
}

impl FromIterator<UiElement> for Screen {
    fn from_iter<I: IntoIterator<Item = UiElement>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl Serialize for Screen {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if minijinja::value::serializing_for_value() {
            // Into a template: the screen itself, read in place.
            Value::from_object(self.clone()).serialize(s)
        } else {
            self.0.serialize(s)
        }
    }
}

/// A list to templates: its length, its items by index (each made a template value only when
/// a template reads it) and iteration.
impl Object for Screen {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let index = usize::try_from(key.clone()).ok()?;
        self.0
            .get(index)
            .map(|el| Value::from(minijinja::value::Serde(el)))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }
}

/// What the phone is doing, besides its screen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PhoneState {
    /// Foreground package, e.g. `com.android.settings`.
    pub package: String,
    /// Focused activity, e.g. `com.android.settings/.Settings`.
    pub activity: String,
    /// Whether the on-screen keyboard is shown.
    pub keyboard_shown: bool,
    /// Index of the focused element, if any.
    pub focused_index: Option<u32>,
    /// Text of the focused element.
    pub focused_text: String,
}

/// One earlier step of a CodeAct run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CodeActStep {
    /// Step number, from 1.
    pub step: u32,
    /// The prose of the reply (the model's thought), may be empty.
    pub thought: String,
    /// The code that ran.
    pub code: String,
    /// What it printed, and its completion value.
    pub output: String,
    /// The error it raised, if any.
    pub error: Option<String>,
    /// A remark on the reply itself (blocks that did not run, a reply cut short).
    pub notice: Option<String>,
}

/// One past action, as the Manager and the Executor see it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ActionRecord {
    /// Which agent acted: `executor`, `scripter`, `text_manipulator`.
    pub agent: String,
    /// The action, e.g. `tap` or the subgoal handed over.
    pub action: String,
    /// What it was meant to do.
    pub description: String,
    /// Whether it worked.
    pub success: bool,
    /// What came back: an error, a result, an observation.
    pub feedback: String,
}

/// `codeact/system.jinja`: how the CodeAct agent works; fixed for a task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CodeActSystem {
    /// [`crate::tools::js_signatures`] of the tools the task allows.
    pub tool_signatures: String,
    /// [`crate::tools::custom_signatures`] of the operator's tools the task allows (the
    /// executor's `[executor.tools.<name>]`); empty when there are none.
    pub custom_tool_signatures: String,
    /// Whether a screenshot comes with each step.
    pub vision: bool,
    /// Ids of the secrets `type_secret` may type; never their values.
    pub secret_ids: Vec<String>,
    /// Guidance about the app the task is about.
    pub app_card: Option<String>,
    /// JSON Schema (text) the final answer will be structured into.
    pub output_schema: Option<String>,
    /// Step budget.
    pub max_steps: u32,
}

/// `codeact/user.jinja`: the state at one step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CodeActUser {
    /// The user's goal.
    pub goal: String,
    /// This step's number, from 1.
    pub step: u32,
    /// Step budget.
    pub max_steps: u32,
    /// The device's date and time, as the caller formats it.
    pub now: Option<String>,
    /// Messages the user sent while the task ran.
    pub user_messages: Vec<String>,
    /// Notes kept with `remember`.
    pub memory: Vec<String>,
    /// Earlier steps, oldest first.
    pub history: Vec<CodeActStep>,
    /// Earlier steps left out before `history` (to fit the model's context, or the step
    /// count kept).
    pub omitted_steps: u32,
    /// The phone's state.
    pub phone: PhoneState,
    /// The screen.
    pub ui_state: Screen,
    /// Whether a screenshot is attached to this message.
    pub screenshot_attached: bool,
    /// Notes on the app in front and the apps the goal names (app cards), with the line that
    /// says when they were cut.
    pub app_cards: Option<String>,
}

/// One earlier goal of the task's conversation and how it ended, as the Manager sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConversationTurn {
    /// What the user asked.
    pub goal: String,
    /// The answer given, or why it failed.
    pub answer: String,
    /// Whether it was fulfilled.
    pub success: bool,
}

/// A file one of the task's agents produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProducedFile {
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Where it lives.
    pub path: String,
}

/// `manager/system.jinja`: everything the planner sees at one turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ManagerSystem {
    /// The user's request.
    pub instruction: String,
    /// [`crate::tools::json_actions`] of the Executor's actions.
    pub executor_actions: String,
    /// The device's date and time, as the caller formats it.
    pub now: Option<String>,
    /// The phone's state.
    pub phone: PhoneState,
    /// The screen.
    pub ui_state: Screen,
    /// Whether a screenshot is attached.
    pub vision: bool,
    /// Guidance about the current app.
    pub app_card: Option<String>,
    /// Ids of the secrets the Executor may type.
    pub secret_ids: Vec<String>,
    /// The plan of the previous turn, as written.
    pub previous_plan: Option<String>,
    /// Facts kept with `<add_memory>`.
    pub memory: Vec<String>,
    /// Recent actions, oldest first.
    pub action_history: Vec<ActionRecord>,
    /// Consecutive failures; the caller fills it once they reach its threshold (two).
    pub error_history: Vec<ActionRecord>,
    /// The Scripter's or Text Manipulator's last result, already worded.
    pub last_handoff_result: Option<String>,
    /// Earlier goals of the conversation and their answers, oldest first.
    pub conversation: Vec<ConversationTurn>,
    /// Messages from the user since the last plan (a changed goal, a note, a human's reply).
    pub notes: Vec<String>,
    /// Files the task's agents produced so far.
    pub files: Vec<ProducedFile>,
}

/// `executor/system.jinja`: one subgoal to turn into one action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExecutorSystem {
    /// The user's request.
    pub instruction: String,
    /// The Manager's plan, as written.
    pub plan: String,
    /// The subgoal to perform now.
    pub subgoal: String,
    /// What has been achieved so far, in words.
    pub progress_status: Option<String>,
    /// [`crate::tools::json_actions`] of the allowed actions.
    pub actions: String,
    /// The phone's state.
    pub phone: PhoneState,
    /// The screen.
    pub ui_state: Screen,
    /// Whether a screenshot is attached.
    pub vision: bool,
    /// Guidance about the current app.
    pub app_card: Option<String>,
    /// Ids of the secrets `type_secret` may type.
    pub secret_ids: Vec<String>,
    /// The last few actions, oldest first.
    pub action_history: Vec<ActionRecord>,
    /// What the agent that handed the subgoal over passed along (pretty JSON), if any.
    pub handoff_context: Option<String>,
}

/// `scripter/system.jinja`: an off-device task; fixed for a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScripterSystem {
    /// The task from the Manager's `<script>` element.
    pub task: String,
    /// The user's request, for context.
    pub instruction: Option<String>,
    /// Context another agent handed over with the task, as JSON text.
    pub handoff_context: Option<String>,
    /// The API the scripter's sandbox grants (`fetch`, the workspace files, ...), as text.
    pub tool_signatures: String,
    /// Hosts that HTTP may reach although they are loopback, private or link-local addresses
    /// (public addresses are reachable without being listed).
    pub allowed_hosts: Vec<String>,
    /// Longest time one HTTP request may take, in milliseconds.
    pub request_timeout_ms: u64,
    /// Largest response body one HTTP request may read, in bytes.
    pub max_response_bytes: u64,
    /// Wall-clock limit of one step's code, in milliseconds.
    pub step_timeout_ms: u64,
    /// Files already in the task's workspace (from earlier scripts of the task).
    pub files: Vec<ScripterFile>,
    /// Step budget.
    pub max_steps: u32,
}

/// A file in the scripter's workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScripterFile {
    /// Name relative to the workspace.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
}

/// `scripter/user.jinja`: the earlier steps of a run and the step to write now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScripterUser {
    /// This step's number, from 1.
    pub step: u32,
    /// Step budget.
    pub max_steps: u32,
    /// Earlier steps left out of `history` (the oldest ones).
    pub omitted_steps: u32,
    /// The most recent earlier steps, oldest first (the CodeAct step shape: thought, code,
    /// output, error).
    pub history: Vec<CodeActStep>,
}

/// `text_manipulator/system.jinja`: one edit of the focused text field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TextManipulatorSystem {
    /// The user's request, for context.
    pub instruction: String,
    /// The Manager's plan, for context.
    pub plan: String,
    /// The edit, from the `TEXT_TASK:` line.
    pub task: String,
    /// The field's current text (the script's `ORIGINAL`).
    pub original: String,
    /// What the agent that asked for the edit passed along (pretty JSON), if any.
    pub handoff_context: Option<String>,
    /// Longest text the program may produce, in characters.
    pub max_chars: usize,
}

/// `text_manipulator/error_correction.jinja`: the previous program failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TextManipulatorErrorCorrection {
    /// The edit, from the `TEXT_TASK:` line.
    pub task: String,
    /// The field's current text.
    pub original: String,
    /// The last program of the model's own that failed; empty when none has run (the
    /// template then says that nothing ran).
    pub code: String,
    /// How it failed.
    pub error: String,
    /// Longest text the program may produce, in characters.
    pub max_chars: usize,
}

/// `structured_output/system.jinja`: a final answer to turn into JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StructuredOutputSystem {
    /// The task's goal.
    pub goal: String,
    /// The task's final answer.
    pub final_answer: String,
    /// The JSON Schema, as (pretty) JSON text.
    pub schema: String,
    /// The previous attempt's JSON, when retrying.
    pub previous_output: Option<String>,
    /// Why the previous attempt was refused ([`crate::parse::Violation`]s as text).
    pub errors: Vec<String>,
}

macro_rules! prompts {
    ($($ty:ident => $name:ident),* $(,)?) => {
        $(impl Prompt for $ty { const NAME: PromptName = PromptName::$name; })*

        /// The top-level variable names of a template's context.
        pub(super) fn context_fields(name: PromptName) -> Vec<String> {
            match name {
                $(PromptName::$name => field_names(&$ty::default()),)*
            }
        }
    };
}

prompts! {
    CodeActSystem => CodeActSystem,
    CodeActUser => CodeActUser,
    ManagerSystem => ManagerSystem,
    ExecutorSystem => ExecutorSystem,
    ScripterSystem => ScripterSystem,
    ScripterUser => ScripterUser,
    TextManipulatorSystem => TextManipulatorSystem,
    TextManipulatorErrorCorrection => TextManipulatorErrorCorrection,
    StructuredOutputSystem => StructuredOutputSystem,
}

fn field_names<T: Serialize>(value: &T) -> Vec<String> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    }
}
