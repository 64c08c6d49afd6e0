//! The model–program loop of one `Manipulate` call: ask for a program, run it, and on failure
//! show the model what went wrong, a bounded number of times. What the model is shown as its
//! own turn is only what it wrote itself: a reply whose code was copied from the prompt ran
//! nothing and is never shown back as the model's words.
use std::time::Duration;

use droidmesh_agent::parse::{IgnoredWhy, PromptEcho, choose_code};
use droidmesh_agent::prompts::{
    TextManipulatorErrorCorrection, TextManipulatorSystem, handoff_text,
};
use droidmesh_llm::{CallTags, ChatRequest, ChatTarget, LlmError, Message};
// `text` cut to `max` characters, with a marker that says how much was left out.
use droidmesh_proto::text::shorten_noting as clip;
use droidmesh_proto::v1::ManipulateRequest;

use crate::error::TextManipulatorError;
use crate::program::{self, ProgramLimits};
use crate::report::Usage;
use crate::service::{CONTEXT_CHARS, TextManipulator};

/// What the model is told when its latest reply ran nothing because its code was copied from
/// the prompt.
const COPIED: &str = "nothing ran: the code in your last reply was copied from this prompt: write your own program in one ```js block";

/// The model's last failed attempt, shown to it on the next one.
struct Failure {
    /// What the model wrote itself, shown back as its turn: its own prose and the program
    /// that ran; empty when it has written nothing of its own yet. A copied reply is never
    /// shown as the model's own words.
    said: String,
    /// The last program of the model's own that ran and failed (empty when none has).
    code: String,
    /// How `code` failed, or why the reply had no program.
    error: String,
    /// The latest reply ran nothing: its code was copied from the prompt. What the model
    /// wrote itself before stays its last turn and program.
    copied: bool,
}

impl Failure {
    /// The failure after a reply whose code was copied from the prompt.
    fn copied(before: Option<Failure>) -> Failure {
        let before = before.unwrap_or(Failure {
            said: String::new(),
            code: String::new(),
            error: String::new(),
            copied: true,
        });
        Failure {
            copied: true,
            ..before
        }
    }

    /// What went wrong, for the model.
    fn error(&self) -> String {
        match (self.copied, self.code.is_empty()) {
            (false, _) => self.error.clone(),
            (true, true) => COPIED.to_owned(),
            (true, false) => format!(
                "{COPIED}. Your program above, the last one of your own, failed before: {}",
                self.error
            ),
        }
    }
}

/// The model's own words of a reply: its own prose, then the program that ran.
fn own_words(prose: &str, code: &str) -> String {
    match (prose.is_empty(), code.is_empty()) {
        (_, true) => prose.to_owned(),
        (true, false) => format!("```js\n{code}\n```"),
        (false, false) => format!("{prose}\n```js\n{code}\n```"),
    }
}

/// Model errors that another attempt cannot fix.
fn unusable(e: &LlmError) -> bool {
    e.is_unusable()
}

/// The model–program loop of one request.
pub(crate) struct Attempts<'a> {
    pub service: &'a TextManipulator,
    pub req: &'a ManipulateRequest,
    pub original: &'a str,
    pub target: ChatTarget,
    pub model: String,
    pub usage: Usage,
}

impl Attempts<'_> {
    /// Asks for programs until one produces a typable text or the attempts run out. Returns
    /// the text (or the last failure, worded for the caller), the number of model calls, and
    /// the last code that ran.
    pub async fn produce(
        &mut self,
    ) -> Result<(Result<String, String>, u32, String), TextManipulatorError> {
        let cfg = &self.service.cfg;
        let retries = match self.req.max_retries {
            0 => cfg.max_retries,
            n => n,
        };
        let limits = ProgramLimits {
            wall_clock: Duration::from_millis(cfg.sandbox_timeout_ms),
            memory_bytes: cfg.sandbox_memory_mb.saturating_mul(1024 * 1024),
            max_chars: cfg.max_text_chars,
        };
        let system = self.service.prompts.render(&TextManipulatorSystem {
            instruction: clip(&self.req.instruction, CONTEXT_CHARS),
            plan: clip(&self.req.plan, CONTEXT_CHARS),
            task: self.req.subgoal.trim().to_owned(),
            original: self.original.to_owned(),
            handoff_context: self
                .req
                .handoff_context
                .as_ref()
                .and_then(|c| handoff_text(&droidmesh_proto::struct_to_json(c))),
            max_chars: cfg.max_text_chars,
        })?;
        let mut last: Option<Failure> = None;
        let mut attempts = 0;
        while attempts <= retries {
            attempts += 1;
            let mut messages = Vec::with_capacity(3);
            let mut shown = vec![system.clone()];
            match &last {
                None => messages.push(Message::user(system.clone())),
                Some(f) => {
                    let correction =
                        self.service
                            .prompts
                            .render(&TextManipulatorErrorCorrection {
                                task: self.req.subgoal.trim().to_owned(),
                                original: self.original.to_owned(),
                                code: f.code.clone(),
                                error: f.error(),
                                max_chars: cfg.max_text_chars,
                            })?;
                    if f.said.is_empty() {
                        // Nothing of the model's own to show as its turn: one user message.
                        messages.push(Message::user(format!("{system}\n\n{correction}")));
                    } else {
                        messages.push(Message::user(system.clone()));
                        messages.push(Message::assistant(f.said.clone()));
                        messages.push(Message::user(correction.clone()));
                    }
                    shown.push(correction);
                }
            }
            let reply = match self
                .service
                .llm
                .chat(
                    self.target.clone(),
                    ChatRequest::new(messages).tagged(CallTags::new(self.req.task_id.as_str())),
                )
                .await
            {
                Ok(reply) => reply,
                Err(e) if unusable(&e) => {
                    return Err(TextManipulatorError::Model {
                        model: self.model.clone(),
                        source: e,
                    });
                }
                // The client has already retried what can be retried.
                Err(e) => {
                    let code = last.map(|f| f.code).unwrap_or_default();
                    let error = format!("the model call failed after {attempts} attempt(s): {e}");
                    return Ok((Err(error), attempts, code));
                }
            };
            self.usage.add(&reply);
            // Only the program the model wrote runs, not code copied back from the prompt.
            let choice = choose_code(
                &reply.text,
                &PromptEcho::new(shown.iter().map(String::as_str)),
            );
            let Some(code) = choice.code.clone() else {
                if choice.copied() > 0 {
                    last = Some(Failure::copied(last.take()));
                    continue;
                }
                let languages: Vec<&str> = choice
                    .ignored
                    .iter()
                    .filter_map(|b| match &b.why {
                        IgnoredWhy::NotJavaScript(l) => Some(l.as_str()),
                        _ => None,
                    })
                    .collect();
                let mut error =
                    "no JavaScript found in the reply: write the program in one ```js block"
                        .to_owned();
                if !languages.is_empty() {
                    error.push_str(&format!(
                        " (blocks tagged {} do not run; only JavaScript does)",
                        languages.join(", ")
                    ));
                }
                last = Some(Failure {
                    said: choice.own_prose.clone(),
                    code: String::new(),
                    error,
                    copied: false,
                });
                continue;
            };
            match program::run(&code, self.original, &limits).await? {
                Ok(text) => return Ok((Ok(text), attempts, code)),
                Err(error) => {
                    // The error may quote the field's text: it goes to the model, not the log.
                    tracing::info!(attempt = attempts, "the program failed");
                    last = Some(Failure {
                        said: own_words(&choice.own_prose, &code),
                        code,
                        error,
                        copied: false,
                    });
                }
            }
        }
        let (error, code) = last.map(|f| (f.error(), f.code)).unwrap_or_default();
        let error =
            format!("no usable program after {attempts} attempt(s); the last failed: {error}");
        Ok((Err(error), attempts, code))
    }
}
