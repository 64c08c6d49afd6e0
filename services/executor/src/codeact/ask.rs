//! Asking the model for one CodeAct step: the step's prompt, fitted to the model's context
//! ([`super::fit`]), and the call, whose failures the step can act on are told apart.
use std::time::Duration;

use droidmesh_agent::budget::step_bytes;
use droidmesh_agent::prompts::CodeActUser;
use droidmesh_llm::{CallTags, ChatRequest, LlmError, Message};
use droidmesh_proto::v1::agent_event;
use tokio::time::Instant;

use super::{AGENT, Flow, Halt, Progress, Run, Setup};
use crate::model::{is_unusable, usage_report};
use crate::observe::Observed;

/// What the model answered, as the step needs it.
pub(super) struct Reply {
    pub text: String,
    /// Cut off at the output token limit.
    pub truncated: bool,
    /// The prompt's size as the provider counted it.
    pub input_tokens: u64,
}

/// This step's prompt as sent.
pub(super) struct Prompt {
    pub message: Message,
    /// The user message's text, to tell the model's own code from copies of it.
    pub text: String,
    /// Bytes of the system prompt and the message together.
    pub bytes: usize,
    pub image: bool,
}

/// How the model call of a step went.
pub(super) enum Called {
    Reply(Reply),
    /// A failure another step may fix.
    Failed(String),
    /// The provider refused the prompt as longer than the model's context.
    Overflow {
        prompt_tokens: Option<u64>,
        context_tokens: Option<u64>,
        message: String,
    },
    /// The provider refused the screenshot: the model takes no images.
    NoImages(String),
}

impl Run {
    /// Renders this step's message (with the screenshot when vision is on and the model takes
    /// images), with as many earlier steps as the step count kept and the model's context allow.
    pub(super) fn prompt(
        &self,
        setup: &Setup,
        progress: &Progress,
        step: u32,
        seen: &Observed,
        app_cards: Option<&str>,
    ) -> Flow<Prompt> {
        let attach = self.start.vision && progress.fit.images && seen.screenshot.is_some();
        let history = progress.history.as_slice();
        // Steps dropped from the history are left out of every prompt.
        let dropped = usize::try_from(progress.history.dropped()).unwrap_or(usize::MAX);
        let mut user = CodeActUser {
            goal: progress.steering.goal().to_owned(),
            step,
            max_steps: setup.max_steps,
            now: None,
            user_messages: progress.steering.notes().to_vec(),
            memory: progress.memory.notes().to_vec(),
            history: Vec::new(),
            omitted_steps: 0,
            phone: seen.phone.clone(),
            ui_state: seen.elements.clone(),
            screenshot_attached: attach,
            app_cards: app_cards.map(str::to_owned),
        };
        let render = |user: &CodeActUser| {
            self.prompts.render(user).map_err(|e| {
                Halt::Failed(
                    step,
                    format!("the codeact step prompt does not render: {e}"),
                )
            })
        };
        let mut keep = history.len().saturating_sub(self.cfg.history_steps);
        user.history = history[keep..].to_vec();
        user.omitted_steps = u32::try_from(dropped.saturating_add(keep)).unwrap_or(u32::MAX);
        let mut text = render(&user)?;
        if progress.fit.applies() {
            // The fixed part (everything but the earlier steps), then the newest steps that
            // fit beside it; rendered again only when steps must go.
            let shown: usize = user.history.iter().map(step_bytes).sum();
            let fixed = (setup.system.len() + text.len()).saturating_sub(shown);
            let fits = progress
                .fit
                .keep_from(history, fixed, attach)
                .map_err(|too_big| Halt::Failed(step, too_big.to_string()))?;
            if fits > keep {
                keep = fits;
                user.history = history[keep..].to_vec();
                user.omitted_steps =
                    u32::try_from(dropped.saturating_add(keep)).unwrap_or(u32::MAX);
                text = render(&user)?;
            }
        }
        let bytes = setup.system.len() + text.len();
        let mut message = Message::user(text.clone());
        if attach && let Some(shot) = &seen.screenshot {
            message = message.with_image_png(shot.png.clone());
        }
        Ok(Prompt {
            message,
            text,
            bytes,
            image: attach,
        })
    }

    /// Asks the model. A failed call another step may fix, or one the step can fix itself (a
    /// prompt too long, a screenshot refused), is a [`Called`]; a model that cannot be used at
    /// all ends the run.
    pub(super) async fn call(
        &self,
        setup: &Setup,
        message: Message,
        progress: &mut Progress,
        step: u32,
        deadline: Instant,
    ) -> Flow<Called> {
        let tags = CallTags::new(self.start.task_id.as_str())
            .device(setup.serial.as_str())
            .step(step);
        let request =
            ChatRequest::new(vec![Message::system(setup.system.clone()), message]).tagged(tags);
        let started = Instant::now();
        let answer =
            tokio::time::timeout_at(deadline, self.llm.chat(setup.target.clone(), request));
        let Ok(answer) = answer.await else {
            return Ok(Called::Failed(format!(
                "the model did not answer within the step deadline of {}: it was asked {} ago",
                humantime::format_duration(Duration::from_millis(self.cfg.step_deadline_ms)),
                humantime::format_duration(Duration::from_secs(started.elapsed().as_secs()))
            )));
        };
        match answer {
            Err(e) if is_unusable(&e) => {
                Err(Halt::Failed(step, format!("the model cannot be used: {e}")))
            }
            Err(e) => Ok(match e.root() {
                LlmError::ContextOverflow {
                    prompt_tokens,
                    context_tokens,
                    message,
                } => Called::Overflow {
                    prompt_tokens: *prompt_tokens,
                    context_tokens: *context_tokens,
                    message: message.clone(),
                },
                LlmError::ImagesUnsupported { message } => Called::NoImages(message.clone()),
                _ => Called::Failed(format!("the model call failed: {e}")),
            }),
            Ok(r) => {
                let usage = &mut progress.usage;
                usage.input_tokens += r.usage.input_tokens;
                usage.output_tokens += r.usage.output_tokens;
                usage.cached_input_tokens += r.usage.cached_input_tokens.unwrap_or(0);
                usage.calls += 1;
                self.emit(agent_event::Kind::Usage(usage_report(AGENT, &r)))
                    .await?;
                Ok(Called::Reply(Reply {
                    truncated: r.truncated,
                    input_tokens: r.usage.input_tokens,
                    text: r.text,
                }))
            }
        }
    }
}
