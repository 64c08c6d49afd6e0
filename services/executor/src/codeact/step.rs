//! One CodeAct step's code: which of the reply's blocks runs, running it, and what the step
//! says about it twice over: to the model in its own terms (what to fix in the next reply), and
//! to the user in theirs (what happened, without instructions meant for the model).
use std::time::Duration;

use droidmesh_agent::loops::Repeat;
use droidmesh_agent::parse::{CodeChoice, IgnoredWhy, PromptEcho, choose_code};
use droidmesh_agent::prompts::CodeActStep;
// Cuts `text` to its first `max` characters, saying how much was left out.
use droidmesh_proto::text::shorten_noting as cap;
use droidmesh_proto::v1::{CodeBlock, Observation, Thought, agent_event};
use droidmesh_sandbox::{ErrorKind, ScriptError};
use tokio::time::Instant;

use super::{AGENT, Flow, Halt, Run, Setup};
use crate::observe::Observed;

/// Longest thought kept in the history the model sees again (a weak model's babble would
/// otherwise grow every later prompt); the user's event gets up to [`MAX_THOUGHT_EVENT`].
const MAX_THOUGHT_IN_HISTORY: usize = 600;
const MAX_THOUGHT_EVENT: usize = 4_000;
/// Longest output kept in the history.
const MAX_OUTPUT_IN_HISTORY: usize = 4_000;

/// One step as it happened.
#[derive(Debug, Default)]
pub(super) struct StepRecord {
    /// The model's view of it, rendered into the next prompts.
    pub model: CodeActStep,
    /// The failure in the user's words (the step's events, the final reason).
    pub user_error: Option<String>,
    /// What the user should know besides the output: blocks left out, a reply cut short.
    pub notes: Vec<String>,
    /// The run ends after this step, for this reason (a loop the model was told about came
    /// back).
    pub stop: Option<String>,
}

impl StepRecord {
    pub fn new(step: u32) -> Self {
        Self {
            model: CodeActStep {
                step,
                ..CodeActStep::default()
            },
            ..Self::default()
        }
    }

    /// A failure worded once for the model and once for the user.
    pub fn fail(&mut self, model: impl Into<String>, user: impl Into<String>) {
        self.model.error = Some(model.into());
        self.user_error = Some(user.into());
    }

    /// A failure both read the same way (a model call that failed, a deadline).
    pub fn fail_plainly(&mut self, why: impl Into<String>) {
        let why = why.into();
        self.fail(why.clone(), why);
    }

    /// Adds a remark for both: the model reads it with the step, the user in the step's notes.
    fn notice(&mut self, model: String, user: String) {
        self.model.notice = Some(match self.model.notice.take() {
            Some(before) => format!("{before} {model}"),
            None => model,
        });
        self.notes.push(user);
    }

    /// The device withholds screenshots for the rest of the task (a typed secret shows where
    /// masking cannot be sure), said once to both.
    pub fn withheld(&mut self, why: &str) {
        self.notice(
            "No screenshot is sent from now on: a secret typed on this device shows where it cannot be masked in an image. Work from the element list.".into(),
            format!("screenshots are withheld for the rest of the task: {why}"),
        );
    }

    /// A remark for the user alone (the model is told by the prompt itself).
    pub fn note(&mut self, user: String) {
        self.notes.push(user);
    }

    /// The step closed a loop, the first time for this repeat: the model reads what repeated
    /// with the step, the user in the step's notes.
    pub fn looped(&mut self, repeat: &Repeat) {
        let action = if repeat.actions == 1 {
            "action"
        } else {
            "actions"
        };
        self.notice(
            format!(
                "You did the same {action} {} times in a row ({}) and the screen did not change. Doing it again will not help: try another way (another element, scrolling, going back, another app), or call complete(false, reason) if the goal cannot be reached.",
                repeat.times, repeat.what
            ),
            format!(
                "loop: {}; the model is told to try something else",
                repeat.summary()
            ),
        );
    }

    /// The same loop came back after the model was told: the run ends after this step.
    pub fn stuck(&mut self, repeat: &Repeat) {
        let why = format!(
            "stopped: {}, again after the model was told",
            repeat.summary()
        );
        self.notes.push(why.clone());
        self.stop = Some(why);
    }

    /// The reply was cut off at the model's output limit.
    pub fn truncated(&mut self) {
        self.notice(
            "Your reply was cut off at the output token limit: keep the reasoning short and write the code block early.".into(),
            "the model's reply was cut off at its output token limit".into(),
        );
    }
}

/// A script failure, for the model and for the user.
fn script_failure(e: &ScriptError) -> (String, String) {
    let at = e.line.map(|l| format!(" at line {l}")).unwrap_or_default();
    let model = format!("{:?} error{at}: {}", e.kind, e.message);
    let user = match e.kind {
        ErrorKind::Syntax => format!("the model's code does not parse{at}: {}", e.message),
        ErrorKind::Runtime => format!("the model's code failed{at}: {}", e.message),
        ErrorKind::Host => format!("a tool failed{at}: {}", e.message),
        ErrorKind::Timeout => format!("the model's code was stopped: {}", e.message),
        ErrorKind::Memory => "the model's code ran out of memory and was stopped".to_owned(),
        ErrorKind::Stack => "the model's code recursed too deeply and was stopped".to_owned(),
        // Stopped, and kinds the sandbox may add later.
        _ => format!("the model's code was stopped: {}", e.message),
    };
    (model, user)
}

/// A reply with no code of the model's own, for the model and for the user.
fn no_code(choice: &CodeChoice) -> (String, String) {
    // An example's ending alone gets its own words; among other copies, the copy is the news.
    let ending = choice
        .ignored
        .iter()
        .find(|b| b.why == IgnoredWhy::ExampleEnd)
        .filter(|_| choice.copied() == choice.example_ends());
    if let Some(ending) = ending {
        return (
            format!(
                "Nothing ran: `{}` is copied from the prompt's example, and an example's answer never ends a task. Write one ```js block of your own with the next action for the current screen, and call complete(...) with your own answer once your goal is reached.",
                ending.first_line
            ),
            "nothing ran: the model's reply repeated the complete(...) of its prompt's example, which would have ended the task with the example's answer".into(),
        );
    }
    let copied = choice.copied();
    if copied > 0 {
        let blocks = if copied == 1 { "block" } else { "blocks" };
        return (
            format!(
                "Nothing ran: the code in your reply was copied from this prompt ({copied} {blocks}). Write one ```js block of your own with the next action for the current screen."
            ),
            format!(
                "nothing ran: the model's reply only repeated {copied} code {blocks} of its prompt"
            ),
        );
    }
    (
        "no JavaScript found in the reply: write the next actions in a ```javascript block, and call complete(success, reason) when the goal is reached or cannot be".into(),
        "nothing ran: the model's reply held no JavaScript".into(),
    )
}

impl Run {
    /// Picks the reply's code, runs it in the session (`ui_state` set to the screen `seen`
    /// first) and reports what it did. `prompt` is what the model was shown this step, to tell
    /// its own code from code it copied back.
    pub(super) async fn execute(
        &self,
        setup: &Setup,
        seen: &Observed,
        reply: &str,
        prompt: &PromptEcho,
        record: &mut StepRecord,
        deadline: Instant,
    ) -> Flow<()> {
        let choice = choose_code(reply, prompt);
        // The history shows the model only what it wrote itself: a copied heading kept there
        // as its thought would be its own words at the next step, and the copy would run.
        record.model.thought = cap(&choice.own_prose, MAX_THOUGHT_IN_HISTORY);
        if !choice.prose.is_empty() {
            self.emit(agent_event::Kind::Thought(Thought {
                agent: AGENT.into(),
                text: cap(&choice.prose, MAX_THOUGHT_EVENT),
            }))
            .await?;
        }
        if let Some(summary) = choice.summary() {
            let model = if choice.code.is_some() {
                format!(
                    "Only one block of your reply ran ({summary}); write exactly one ```js block."
                )
            } else {
                summary.clone()
            };
            record.notice(model, summary);
        }
        let Some(code) = choice.code.clone() else {
            let (model, user) = no_code(&choice);
            record.fail(model, user);
            return Ok(());
        };
        record.model.code = code.clone();
        self.emit(agent_event::Kind::Code(CodeBlock {
            agent: AGENT.into(),
            language: "javascript".into(),
            code: code.clone(),
        }))
        .await?;
        let session = match tokio::time::timeout_at(deadline, setup.session.get()).await {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => return Err(Halt::Failed(record.model.step, e)),
            Err(_) => {
                return Err(Halt::Failed(
                    record.model.step,
                    "the JavaScript sandbox did not start before the step's deadline".into(),
                ));
            }
        };
        // Queued ahead of the run: one trip to the session's thread sets it and runs the code.
        let ui_json = serde_json::to_string(&seen.elements).unwrap_or_else(|_| "[]".into());
        let ui_set = session.queue_global_json("ui_state", ui_json);
        // Dropping the run at the step's deadline stops the script.
        let ran = tokio::time::timeout_at(deadline, session.run(code)).await;
        if let Ok(Ok(_)) = &ran {
            // The run came back, so the global queued before it has its outcome.
            let set = match ui_set {
                Ok(set) => set.outcome().await,
                Err(e) => Err(e),
            };
            if let Err(e) = set {
                tracing::warn!(error = %e, "ui_state could not be set");
            }
        }
        match ran {
            Err(_) => record.fail_plainly(format!(
                "the step ran past its deadline of {} while its code ran",
                humantime::format_duration(Duration::from_millis(self.cfg.step_deadline_ms))
            )),
            Ok(Ok(out)) => {
                let mut output = out.console.clone();
                if let Some(v) = &out.value {
                    if !output.is_empty() && !output.ends_with('\n') {
                        output.push('\n');
                    }
                    output.push_str(&format!("=> {v}"));
                }
                record.model.output = cap(&output, MAX_OUTPUT_IN_HISTORY);
                if let Some(e) = &out.error {
                    let (model, user) = script_failure(e);
                    record.fail(model, user);
                }
            }
            Ok(Err(e)) => record.fail_plainly(format!("the JavaScript sandbox failed: {e}")),
        }
        Ok(())
    }

    /// The step's observation event: its output, its failure and notes in the user's words.
    pub(super) async fn observation(&self, record: &StepRecord) -> Flow<()> {
        self.emit(agent_event::Kind::Observation(Observation {
            agent: AGENT.into(),
            output: record.model.output.clone(),
            error: record.user_error.clone(),
            notes: record.notes.clone(),
        }))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_and_say_so() {
        assert_eq!(cap("short", 10), "short");
        assert_eq!(cap("ééééé", 2), "éé […3 more characters cut]");
    }

    #[test]
    fn script_failures_are_told_to_the_user_without_debug_names() {
        let e = ScriptError {
            kind: ErrorKind::Syntax,
            message: "SyntaxError: unexpected token ')'".into(),
            line: Some(3),
            stack: None,
        };
        let (model, user) = script_failure(&e);
        assert_eq!(
            model,
            "Syntax error at line 3: SyntaxError: unexpected token ')'"
        );
        assert_eq!(
            user,
            "the model's code does not parse at line 3: SyntaxError: unexpected token ')'"
        );
    }
}
