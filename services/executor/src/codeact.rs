//! The CodeAct loop of direct mode. Per step: read the device (and a screenshot when vision
//! is on), refresh the sandbox's `ui_state`, render the prompts, ask the model, run the
//! JavaScript it wrote in the task's session (variables persist across steps), and put the
//! output or error into the history the model sees next. Ends on `complete(...)`, a stop, too
//! many consecutive failures, or the step budget.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use droidmesh_agent::parse::extract_code;
use droidmesh_agent::prompts::{
    CodeActStep, CodeActSystem, CodeActUser, PhoneState, PromptSet, UiElement,
};
use droidmesh_agent::tools as agent_tools;
use droidmesh_llm::{ChatRequest, ChatTarget, LlmClient, LlmError, Message};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AgentEvent, AgentFinished, CodeActStart, CodeBlock, GetStateRequest, HumanHelpRequest,
    Observation, StepStarted, Thought, TokenUsage, UiState, UsageReport, agent_event,
};
use droidmesh_runtime::TracedChannel;
use droidmesh_sandbox::{Capabilities, SandboxLimits, Session};
use tokio::sync::mpsc;
use tonic::Status;

use crate::config::ExecutorConfig;
use crate::device_tools::ToolCtx;
use crate::sandbox_tools::{SandboxTools, host_functions};

/// A message from the gateway during the run.
#[derive(Debug)]
pub enum Steer {
    HumanReply(String),
    NewGoal(String),
    Note(String),
    Stop,
}

pub struct Run {
    pub cfg: ExecutorConfig,
    pub llm: LlmClient,
    pub prompts: Arc<PromptSet>,
    pub device: DeviceServiceClient<TracedChannel>,
    pub start: CodeActStart,
    pub events: mpsc::Sender<Result<AgentEvent, Status>>,
    pub steer: mpsc::UnboundedReceiver<Steer>,
    /// Values of secrets by id, from the executor's environment.
    pub secrets: HashMap<String, String>,
}

const AGENT: &str = "codeact";

struct Outcome {
    success: bool,
    answer: String,
    steps: u32,
}

impl Run {
    async fn emit(&self, kind: agent_event::Kind) -> bool {
        self.events
            .send(Ok(AgentEvent { kind: Some(kind) }))
            .await
            .is_ok()
    }

    /// Runs the loop and sends the final event. Returns when done or when the gateway left.
    pub async fn run(mut self) {
        let mut usage = TokenUsage::default();
        let outcome = self.run_loop(&mut usage).await;
        let Some(o) = outcome else { return };
        let _ = self
            .emit(agent_event::Kind::Finished(AgentFinished {
                agent: AGENT.into(),
                success: o.success,
                answer: o.answer,
                steps: o.steps,
                usage: Some(usage),
                result: None,
            }))
            .await;
    }

    fn target(&self) -> Result<ChatTarget, String> {
        let o = self.start.llm.clone().unwrap_or_default();
        if o.provider.is_empty()
            && o.model.is_empty()
            && o.temperature.is_none()
            && o.max_tokens.is_none()
        {
            return Ok(ChatTarget::from(AGENT));
        }
        let mut p = self.llm.profile(AGENT).map_err(|e| e.to_string())?;
        if !o.provider.is_empty() {
            p.provider = o.provider;
        }
        if !o.model.is_empty() {
            p.model = o.model;
        }
        if let Some(t) = o.temperature {
            p.temperature = Some(t as f32);
        }
        if let Some(m) = o.max_tokens {
            p.max_tokens = Some(m);
        }
        Ok(ChatTarget::Direct(p))
    }

    /// `None` when the gateway went away (nothing more to send).
    async fn run_loop(&mut self, usage: &mut TokenUsage) -> Option<Outcome> {
        let fail = |steps, answer: String| {
            Some(Outcome {
                success: false,
                answer,
                steps,
            })
        };
        let Some(lease) = self.start.device.as_ref().and_then(|d| d.lease.clone()) else {
            return fail(0, "the start message has no device lease".into());
        };
        let serial = lease.serial.clone();
        let tools = match agent_tools::select(&self.start.tools) {
            Ok(t) => t,
            Err(e) => return fail(0, format!("bad tool list: {e}")),
        };
        let secrets: HashMap<String, String> = self
            .start
            .secret_ids
            .iter()
            // Ids are case-insensitive (env names are upper case): `PIN` is DROIDMESH_SECRET_PIN.
            .filter_map(|id| {
                self.secrets
                    .get(&id.to_ascii_lowercase())
                    .map(|v| (id.clone(), v.clone()))
            })
            .collect();
        let tools_bridge = Arc::new(SandboxTools::new(
            ToolCtx::new(self.device.clone(), lease, secrets, AGENT),
            self.events.clone(),
        ));
        let limits = SandboxLimits {
            wall_clock: Duration::from_millis(self.cfg.step_timeout_ms),
            memory_bytes: self.cfg.sandbox_memory_mb * 1024 * 1024,
            ..SandboxLimits::default()
        };
        let mut caps = Capabilities::new();
        for f in host_functions(&tools, &tools_bridge) {
            caps = caps.function(f);
        }
        let session = match Session::new(limits, caps) {
            Ok(s) => s,
            Err(e) => return fail(0, format!("the JavaScript sandbox could not start: {e}")),
        };
        let system = CodeActSystem {
            tool_signatures: agent_tools::js_signatures(&tools),
            vision: self.start.vision,
            secret_ids: self.start.secret_ids.clone(),
            app_card: Some(self.start.app_card.clone()).filter(|s| !s.trim().is_empty()),
            output_schema: Some(self.start.output_schema.clone()).filter(|s| !s.trim().is_empty()),
            max_steps: self.start.max_steps,
        };
        let system = match self.prompts.render(&system) {
            Ok(s) => s,
            Err(e) => return fail(0, format!("the codeact system prompt does not render: {e}")),
        };
        let target = match self.target() {
            Ok(t) => t,
            Err(e) => return fail(0, format!("the model override is not usable: {e}")),
        };
        let max_steps = self.start.max_steps.max(1);
        let mut goal = self.start.goal.clone();
        let mut history: Vec<CodeActStep> = Vec::new();
        let mut memory: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let mut failures = 0u32;
        let mut last_error = String::new();
        for step in 1..=max_steps {
            // Messages that arrived since the last step.
            while let Ok(s) = self.steer.try_recv() {
                match s {
                    Steer::Stop => return fail(step - 1, "stopped by the user".into()),
                    Steer::NewGoal(g) => {
                        notes.push(format!("The user changed the goal to: {g}"));
                        goal = g;
                    }
                    Steer::Note(n) | Steer::HumanReply(n) => notes.push(n),
                }
            }
            if !self
                .emit(agent_event::Kind::Step(StepStarted {
                    agent: AGENT.into(),
                    step,
                }))
                .await
            {
                return None;
            }
            let want_shot = self.start.vision || self.start.stream_screenshots;
            let req = GetStateRequest {
                serial: serial.clone(),
                include_screenshot: want_shot,
                screenshot_max_side: self.cfg.screenshot_max_side,
            };
            let state = match self.device.get_state(req).await {
                Ok(s) => s.into_inner(),
                Err(s) => return fail(step, format!("cannot read the device: {}", s.message())),
            };
            if self.start.stream_screenshots
                && let Some(shot) = state.screenshot.clone()
                && !self.emit(agent_event::Kind::Screenshot(shot)).await
            {
                return None;
            }
            let (elements, phone) = prompt_state(&state);
            let ui_json = serde_json::to_value(&elements).unwrap_or_default();
            if let Err(e) = session.set_global("ui_state", ui_json).await {
                tracing::warn!(error = %e, "ui_state could not be set");
            }
            let keep = history.len().saturating_sub(self.cfg.history_steps);
            let user = CodeActUser {
                goal: goal.clone(),
                step,
                max_steps,
                now: None,
                user_messages: notes.clone(),
                memory: memory.clone(),
                history: history[keep..].to_vec(),
                phone,
                ui_state: elements,
                screenshot_attached: self.start.vision && state.screenshot.is_some(),
            };
            let user = match self.prompts.render(&user) {
                Ok(u) => u,
                Err(e) => {
                    return fail(
                        step,
                        format!("the codeact step prompt does not render: {e}"),
                    );
                }
            };
            let mut message = Message::user(user);
            if self.start.vision
                && let Some(shot) = &state.screenshot
            {
                message = message.with_image_png(shot.png.clone());
            }
            let reply = self
                .llm
                .chat(
                    target.clone(),
                    ChatRequest::new(vec![Message::system(system.clone()), message]),
                )
                .await;
            let mut record = CodeActStep {
                step,
                ..CodeActStep::default()
            };
            match reply {
                // Errors that another step cannot fix (a missing or refused key, a bad
                // configuration, a replay with no answers left) end the run at once.
                Err(
                    e @ (LlmError::Auth { .. }
                    | LlmError::Config(_)
                    | LlmError::ReplayExhausted { .. }
                    | LlmError::Cassette(_)),
                ) => {
                    return fail(step, format!("the model cannot be used: {e}"));
                }
                Err(e) => {
                    record.error = Some(format!("the model call failed: {e}"));
                }
                Ok(r) => {
                    usage.input_tokens += r.usage.input_tokens;
                    usage.output_tokens += r.usage.output_tokens;
                    usage.cached_input_tokens += r.usage.cached_input_tokens.unwrap_or(0);
                    usage.calls += 1;
                    let report = UsageReport {
                        agent: AGENT.into(),
                        provider: r.provider.clone(),
                        model: r.model.clone(),
                        usage: Some(TokenUsage {
                            input_tokens: r.usage.input_tokens,
                            output_tokens: r.usage.output_tokens,
                            cached_input_tokens: r.usage.cached_input_tokens.unwrap_or(0),
                            calls: 1,
                        }),
                        latency_ms: u64::try_from(r.latency.as_millis()).unwrap_or(u64::MAX),
                        finish_reason: r.finish_reason.clone(),
                        replay: r.replay,
                    };
                    if !self.emit(agent_event::Kind::Usage(report)).await {
                        return None;
                    }
                    let extraction = extract_code(&r.text);
                    record.thought = extraction.prose.clone();
                    if !extraction.prose.is_empty()
                        && !self
                            .emit(agent_event::Kind::Thought(Thought {
                                agent: AGENT.into(),
                                text: extraction.prose.clone(),
                            }))
                            .await
                    {
                        return None;
                    }
                    match extraction.code() {
                        None => {
                            record.error = Some(
                                "no JavaScript found in the reply: write the next actions in a ```javascript block, and call complete(success, reason) when the goal is reached or cannot be".into(),
                            );
                        }
                        Some(code) => {
                            record.code = code.clone();
                            let block = CodeBlock {
                                agent: AGENT.into(),
                                language: "javascript".into(),
                                code: code.clone(),
                            };
                            if !self.emit(agent_event::Kind::Code(block)).await {
                                return None;
                            }
                            match session.run(code).await {
                                Ok(out) => {
                                    let mut output = out.console.clone();
                                    if let Some(v) = &out.value {
                                        if !output.is_empty() && !output.ends_with('\n') {
                                            output.push('\n');
                                        }
                                        output.push_str(&format!("=> {v}"));
                                    }
                                    record.output = output;
                                    record.error = out.error.map(|e| match e.line {
                                        Some(line) => format!(
                                            "{:?} error at line {line}: {}",
                                            e.kind, e.message
                                        ),
                                        None => format!("{:?} error: {}", e.kind, e.message),
                                    });
                                }
                                Err(e) => record.error = Some(format!("the sandbox failed: {e}")),
                            }
                            let obs = Observation {
                                agent: AGENT.into(),
                                output: record.output.clone(),
                                error: record.error.clone(),
                            };
                            if !self.emit(agent_event::Kind::Observation(obs)).await {
                                return None;
                            }
                        }
                    }
                }
            }
            let signals = tools_bridge.ctx().take_signals();
            memory.extend(signals.memory);
            if let Some(e) = &record.error {
                failures += 1;
                last_error = e.clone();
                if record.code.is_empty()
                    && !self
                        .emit(agent_event::Kind::Observation(Observation {
                            agent: AGENT.into(),
                            output: String::new(),
                            error: Some(e.clone()),
                        }))
                        .await
                {
                    return None;
                }
            } else {
                failures = 0;
            }
            history.push(record);
            if let Some((success, reason)) = signals.complete {
                return Some(Outcome {
                    success,
                    answer: reason,
                    steps: step,
                });
            }
            if failures >= self.cfg.max_consecutive_failures {
                return fail(
                    step,
                    format!("{failures} steps in a row failed; the last: {last_error}"),
                );
            }
            if let Some(question) = signals.help {
                let req = HumanHelpRequest {
                    agent: AGENT.into(),
                    reason: question,
                    instructions: String::new(),
                };
                if !self.emit(agent_event::Kind::HumanHelp(req)).await {
                    return None;
                }
                match self.wait_for_human().await {
                    Ok(reply) => notes.push(format!("A human answered your question: {reply}")),
                    Err(why) => return fail(step, why),
                }
            }
        }
        fail(
            max_steps,
            format!("reached the step limit ({max_steps}) before the goal was completed"),
        )
    }

    async fn wait_for_human(&mut self) -> Result<String, String> {
        let deadline = tokio::time::sleep(Duration::from_millis(self.cfg.human_wait_ms));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                s = self.steer.recv() => match s {
                    Some(Steer::HumanReply(r)) => return Ok(r),
                    Some(Steer::Stop) | None => return Err("stopped while waiting for a human".into()),
                    Some(Steer::Note(_) | Steer::NewGoal(_)) => {}
                },
                _ = &mut deadline => return Err(format!("no human answered within {} s", self.cfg.human_wait_ms / 1000)),
            }
        }
    }
}

/// The device state as the prompt and the sandbox's `ui_state` show it.
fn prompt_state(state: &UiState) -> (Vec<UiElement>, PhoneState) {
    let elements = state
        .elements
        .iter()
        .map(|e| {
            let b = e.bounds.unwrap_or_default();
            UiElement {
                index: e.index,
                depth: e.depth,
                class_name: e.class_name.clone(),
                text: e.text.clone(),
                content_desc: e.content_desc.clone(),
                resource_id: e.resource_id.clone(),
                bounds: [b.left, b.top, b.right, b.bottom],
                clickable: e.clickable,
                long_clickable: e.long_clickable,
                checkable: e.checkable,
                checked: e.checked,
                editable: e.editable,
                focused: e.focused,
                scrollable: e.scrollable,
                selected: e.selected,
                disabled: !e.enabled,
                password: e.password,
            }
        })
        .collect();
    let p = state.phone.clone().unwrap_or_default();
    let phone = PhoneState {
        package: p.package,
        activity: p.activity,
        keyboard_shown: p.keyboard_shown,
        focused_index: p.focused_index,
        focused_text: p.focused_text,
    };
    (elements, phone)
}
