//! `droidmesh.v1.TextManipulatorService`: one `Manipulate` call reads the field (unless given
//! its text), asks the model for a program, runs it, retries with the error on failure, and
//! types the result when asked to.
use std::sync::Arc;
use std::time::Instant;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::{ChatTarget, LlmClient};
use droidmesh_proto::v1::text_manipulator_service_server::TextManipulatorService;
use droidmesh_proto::v1::{DeviceBinding, LeaseRef, ManipulateRequest, ManipulateResponse};
use serde_json::json;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::attempts::Attempts;
use crate::config::{MAX_RETRIES_LIMIT, TextManipulatorConfig};
use crate::device::{self, Check, DeviceClient, Devices};
use crate::error::TextManipulatorError;
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
