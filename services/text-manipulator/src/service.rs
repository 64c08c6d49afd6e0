//! `droidmesh.v1.TextManipulatorService`: one `Manipulate` call reads the field (unless given
//! its text), asks the model for a program, runs it, retries with the error on failure, and
//! types the result when asked to.
use std::sync::Arc;
use std::time::{Duration, Instant};

use droidmesh_agent::parse::{IgnoredWhy, PromptEcho, choose_code};
use droidmesh_agent::prompts::{
    PromptSet, TextManipulatorErrorCorrection, TextManipulatorSystem, handoff_text,
};
use droidmesh_llm::{CallTags, ChatRequest, ChatTarget, LlmClient, LlmError, Message};
use droidmesh_proto::v1::text_manipulator_service_server::TextManipulatorService;
use droidmesh_proto::v1::{DeviceBinding, LeaseRef, ManipulateRequest, ManipulateResponse};
use serde_json::json;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::config::{MAX_RETRIES_LIMIT, TextManipulatorConfig};
use crate::device::{self, Check, DeviceClient, Devices};
use crate::error::TextManipulatorError;
use crate::program::{self, ProgramLimits};
use crate::report::{AGENT, Ending, Usage, lengths};

/// Longest task id accepted, in bytes (it names the task in spans and logs).
pub const MAX_TASK_ID_BYTES: usize = 256;
/// Longest edit description (`subgoal`) accepted, in bytes: it goes into every attempt.
pub const MAX_SUBGOAL_BYTES: usize = 16 * 1024;
/// The user's request and the plan are context: longer ones are cut to this many characters.
pub const CONTEXT_CHARS: usize = 8_000;

pub struct TextManipulator {
    pub(crate) cfg: TextManipulatorConfig,
    pub(crate) llm: LlmClient,
    pub(crate) prompts: Arc<PromptSet>,
    pub(crate) devices: Devices,
}

#[tonic::async_trait]
impl TextManipulatorService for TextManipulator {
    async fn manipulate(
        &self,
        request: Request<ManipulateRequest>,
    ) -> Result<Response<ManipulateResponse>, Status> {
        let request = request.into_inner();
        let serial = request
            .device
            .as_ref()
            .and_then(|d| d.lease.as_ref())
            .map_or("", |l| l.serial.as_str());
        droidmesh_runtime::trace_context::tag_call(&request.task_id, serial, None);
        if request.task_id.len() > MAX_TASK_ID_BYTES {
            return Err(TextManipulatorError::TooLong {
                field: "task_id",
                bytes: request.task_id.len(),
                limit: MAX_TASK_ID_BYTES,
            }
            .into());
        }
        // A child of the RPC's span, which continues the caller's trace: the device and model
        // calls below are made inside it.
        let serial = request
            .device
            .as_ref()
            .and_then(|d| d.lease.as_ref())
            .map(|l| l.serial.clone())
            .filter(|s| !s.is_empty());
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent text_manipulator",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = AGENT,
            droidmesh.task.id = %request.task_id,
            droidmesh.device.serial = serial.as_deref(),
        );
        self.run(request)
            .instrument(span)
            .await
            .map(Response::new)
            .map_err(Status::from)
    }
}

/// The field being edited on the device.
struct Field {
    client: DeviceClient,
    endpoint: String,
    index: u32,
}

/// The model's last failed attempt, shown to it on the next one.
struct Failure {
    reply: String,
    code: String,
    error: String,
}

/// Model errors that another attempt cannot fix.
fn unusable(e: &LlmError) -> bool {
    e.is_unusable()
}

impl TextManipulator {
    async fn run(
        &self,
        req: ManipulateRequest,
    ) -> Result<ManipulateResponse, TextManipulatorError> {
        let started = Instant::now();
        let usage = Usage::default();
        if req.subgoal.trim().is_empty() {
            return Err(TextManipulatorError::EmptySubgoal);
        }
        if req.subgoal.len() > MAX_SUBGOAL_BYTES {
            return Err(TextManipulatorError::TooLong {
                field: "subgoal",
                bytes: req.subgoal.len(),
                limit: MAX_SUBGOAL_BYTES,
            });
        }
        let binding = req.device.clone().unwrap_or_default();
        let lease = binding
            .lease
            .clone()
            .filter(|l| !l.serial.trim().is_empty());
        let leased = lease.as_ref().filter(|l| !l.lease_id.trim().is_empty());
        if req.apply && leased.is_none() {
            return Err(TextManipulatorError::ApplyWithoutLease);
        }
        if req.max_retries > MAX_RETRIES_LIMIT {
            return Err(TextManipulatorError::TooManyRetries {
                limit: MAX_RETRIES_LIMIT,
                got: req.max_retries,
            });
        }
        if let Some(original) = &req.original {
            let max_chars = self.cfg.max_text_chars;
            let chars = original.chars().count();
            if chars > max_chars {
                return Err(TextManipulatorError::OriginalTooLong {
                    chars,
                    limit: max_chars,
                });
            }
        }
        let (target, model) = self.target(&req)?;

        // The field: read when its text is not given, or when the result is to be typed.
        let (field, original) = match (&req.original, req.apply) {
            (Some(text), false) => (None, text.clone()),
            (given, _) => match self.read_field(&binding, lease.as_ref(), given).await? {
                Ok((field, text)) => (Some(field), text),
                Err(why) => return Ok(Ending::refused(why).into_response(&usage, started)),
            },
        };
        let mut run = Attempts {
            service: self,
            req: &req,
            original: &original,
            target,
            model,
            usage,
        };
        let (produced, attempts, last_code) = run.produce().await?;
        let usage = run.usage;
        let text = match produced {
            Ok(text) => text,
            Err(error) => {
                let ending = Ending {
                    code: last_code,
                    attempts,
                    ..Ending::refused(error)
                };
                return Ok(ending.into_response(&usage, started));
            }
        };
        let mut ending = Ending {
            success: true,
            action_taken: format!(
                "computed the field's new text ({}); apply was not set, so nothing was typed",
                lengths(&original, &text)
            ),
            confidence: 0.5,
            text: Some(text.clone()),
            code: last_code,
            attempts,
            ..Ending::default()
        };
        if let (true, Some(field), Some(lease)) = (req.apply, field, leased) {
            self.apply(field, lease, &original, &text, &mut ending)
                .await;
        }
        Ok(ending.into_response(&usage, started))
    }

    /// The focused field and its text (`given` when the request gave it). The inner error is
    /// why the field cannot be edited, for a failed `ActionResult`.
    async fn read_field(
        &self,
        binding: &DeviceBinding,
        lease: Option<&LeaseRef>,
        given: &Option<String>,
    ) -> Result<Result<(Field, String), String>, TextManipulatorError> {
        let serial = lease
            .map(|l| l.serial.clone())
            .ok_or(TextManipulatorError::NoDevice)?;
        let (endpoint, mut client) = self.devices.client(&binding.endpoint)?;
        let state = device::read_state(&mut client, &endpoint, &serial).await?;
        let Some(focused) = device::focused_field(&state) else {
            return Ok(Err(
                "no text field is focused: focus the field first (tap it), then ask for the edit"
                    .into(),
            ));
        };
        if focused.password {
            return Ok(Err(
                "the focused field is a password field: its text is never read or rewritten".into(),
            ));
        }
        let text = given.clone().unwrap_or_else(|| focused.text.clone());
        let (chars, max_chars) = (text.chars().count(), self.cfg.max_text_chars);
        if chars > max_chars {
            return Ok(Err(format!(
                "the focused field holds {chars} characters; at most {max_chars} can be edited"
            )));
        }
        let field = Field {
            client,
            endpoint,
            index: focused.index,
        };
        Ok(Ok((field, text)))
    }

    /// The model for this request, and its name for messages.
    fn target(
        &self,
        req: &ManipulateRequest,
    ) -> Result<(ChatTarget, String), TextManipulatorError> {
        let wanted = || {
            let profile = self.llm.profile(AGENT).ok();
            let ov = req.llm.clone().unwrap_or_default();
            let provider = Some(ov.provider.trim().to_owned())
                .filter(|p| !p.is_empty())
                .or_else(|| profile.as_ref().map(|p| p.provider.clone()))
                .unwrap_or_default();
            let model = Some(ov.model.trim().to_owned())
                .filter(|m| !m.is_empty())
                .or_else(|| profile.as_ref().map(|p| p.model.clone()))
                .unwrap_or_default();
            format!("'{provider}/{model}' (profile {AGENT})")
        };
        let fail = |source| TextManipulatorError::Model {
            model: wanted(),
            source,
        };
        // A profile that is not configured is this service's problem; an override the
        // configuration cannot serve is the caller's.
        self.llm.profile(AGENT).map_err(fail)?;
        let target = self
            .llm
            .target_for_request(AGENT, req.llm.as_ref())
            .map_err(TextManipulatorError::BadOverride)?;
        let bound = self.llm.bind(target.clone()).map_err(fail)?;
        let name = format!(
            "'{}/{}' (profile {AGENT})",
            bound.provider(),
            bound.model_name()
        );
        Ok((target, name))
    }

    /// Types `text` into the field, reads it back and records the outcome in `ending`.
    async fn apply(
        &self,
        mut field: Field,
        lease: &LeaseRef,
        original: &str,
        text: &str,
        ending: &mut Ending,
    ) {
        if let Err(e) = device::type_into(&mut field.client, lease, field.index, text).await {
            ending.success = false;
            ending.confidence = 0.0;
            ending.action_taken =
                "tried to type the new text; the field may be partly changed".into();
            ending.error = Some(format!(
                "typing the new text into element {} failed: {e}",
                field.index
            ));
            return;
        }
        ending.applied = true;
        let read = device::read_state(&mut field.client, &field.endpoint, &lease.serial).await;
        let state = match read {
            Ok(state) => state,
            Err(e) => {
                ending.success = false;
                ending.confidence = 0.0;
                ending.action_taken = "typed the new text; it could not be checked".into();
                ending.error = Some(format!("the field could not be read back: {e}"));
                return;
            }
        };
        match device::check_field(&state, field.index, text) {
            Check::Holds => {
                ending.confidence = 1.0;
                ending.action_taken =
                    format!("rewrote the focused field ({})", lengths(original, text));
            }
            Check::Unverified(shown) => {
                ending.confidence = 0.5;
                ending.action_taken = format!(
                    "emptied the focused field ({}); it shows {shown:?}, probably its hint",
                    lengths(original, text)
                );
                ending.extra.push(("field_text", json!(shown)));
            }
            Check::Differs(actual) => {
                ending.success = false;
                ending.confidence = 0.0;
                ending.action_taken = "typed the new text, but the field does not hold it".into();
                ending.error = Some(device::describe_difference(&actual, text));
                ending.extra.push(("field_text", json!(actual)));
            }
        }
    }
}

/// The model–program loop of one request.
struct Attempts<'a> {
    service: &'a TextManipulator,
    req: &'a ManipulateRequest,
    original: &'a str,
    target: ChatTarget,
    model: String,
    usage: Usage,
}

impl Attempts<'_> {
    /// Asks for programs until one produces a typable text or the attempts run out. Returns
    /// the text (or the last failure, worded for the caller), the number of model calls, and
    /// the last code that ran.
    async fn produce(
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
            let mut messages = vec![Message::user(system.clone())];
            let mut shown = vec![system.clone()];
            if let Some(f) = &last {
                let correction = self
                    .service
                    .prompts
                    .render(&TextManipulatorErrorCorrection {
                        task: self.req.subgoal.trim().to_owned(),
                        original: self.original.to_owned(),
                        code: f.code.clone(),
                        error: f.error.clone(),
                        max_chars: cfg.max_text_chars,
                    })?;
                messages.push(Message::assistant(f.reply.clone()));
                messages.push(Message::user(correction.clone()));
                shown.push(correction);
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
                let languages: Vec<&str> = choice
                    .ignored
                    .iter()
                    .filter_map(|b| match &b.why {
                        IgnoredWhy::NotJavaScript(l) => Some(l.as_str()),
                        _ => None,
                    })
                    .collect();
                let mut error = if choice.copied() > 0 {
                    "nothing ran: the code in the reply was copied from this prompt: write your own program in one ```js block".to_owned()
                } else {
                    "no JavaScript found in the reply: write the program in one ```js block"
                        .to_owned()
                };
                if !languages.is_empty() {
                    error.push_str(&format!(
                        " (blocks tagged {} do not run; only JavaScript does)",
                        languages.join(", ")
                    ));
                }
                last = Some(Failure {
                    reply: reply.text,
                    code: String::new(),
                    error,
                });
                continue;
            };
            match program::run(&code, self.original, &limits).await? {
                Ok(text) => return Ok((Ok(text), attempts, code)),
                Err(error) => {
                    // The error may quote the field's text: it goes to the model, not the log.
                    tracing::info!(attempt = attempts, "the program failed");
                    last = Some(Failure {
                        reply: reply.text,
                        code,
                        error,
                    });
                }
            }
        }
        let (code, error) = last.map(|f| (f.code, f.error)).unwrap_or_default();
        let error =
            format!("no usable program after {attempts} attempt(s); the last failed: {error}");
        Ok((Err(error), attempts, code))
    }
}

/// `text` cut to `max` characters, with a marker that says how much was left out.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => {
            let left_out = text[cut..].chars().count();
            format!("{} […{left_out} more characters cut]", &text[..cut])
        }
    }
}
