//! The CodeAct loop of direct mode. Per step: read the device (and a screenshot when vision
//! is on), refresh the sandbox's `ui_state`, render the prompts, ask the model, run the
//! JavaScript it wrote in the task's session (variables persist across steps), and put the
//! output or error into the history the model sees next. Ends on `complete(...)`, a stop, too
//! many consecutive failures, or the step budget.
//!
//! A step is five methods of `Run`: `observe`, `prompt`, `call`, `execute` and `record`;
//! observing the device and dispatching tools are shared with `ExecuteSubgoal`
//! ([`crate::observe`], [`crate::device_tools`]).
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use droidmesh_agent::loops::{LoopGuard, ScreenPrint, Verdict};
use droidmesh_agent::parse::{EchoText, PromptEcho};
use droidmesh_agent::prompts::{CodeActStep, CodeActSystem, PromptSet};
use droidmesh_agent::steer::{HISTORY_KEPT, Kept, Memory, Next, Steer, Steering, Voice};
use droidmesh_agent::tools as agent_tools;
use droidmesh_llm::{ChatTarget, LlmClient};
use droidmesh_proto::v1::{
    AgentEvent, AgentFinished, CodeActStart, HumanHelpRequest, StepStarted, TokenUsage, agent_event,
};
use droidmesh_sandbox::{Capabilities, SandboxLimits, Session};
use tokio::sync::mpsc;
use tonic::Status;

use crate::admission::{Admitted, StartAdmission};
use crate::config::ExecutorConfig;
use crate::device_tools::ToolCtx;
use crate::foreground::{BackgroundSession, Foreground};
use crate::observe::{Observed, observe};
use crate::sandbox_tools::{
    SandboxTools, custom_host_functions, host_functions, refused_host_functions,
};
use droidmesh_runtime::device::DeviceLink;

mod ask;
mod fit;
mod step;
use ask::Called;
use fit::Fit;
use step::StepRecord;

pub struct Run {
    pub cfg: ExecutorConfig,
    pub llm: LlmClient,
    pub prompts: Arc<PromptSet>,
    pub device: DeviceLink,
    pub start: CodeActStart,
    pub events: mpsc::Sender<Result<AgentEvent, Status>>,
    pub steer: mpsc::Receiver<Steer>,
    /// The secrets the run may type (its `secret_ids`) and their values.
    pub secrets: HashMap<String, String>,
    /// The executor's runs preparing a model call; this run counts itself in while it does.
    pub foreground: Arc<Foreground>,
    /// Starts let in a few at a time; this run holds a place until its first model call.
    pub admission: Arc<StartAdmission>,
    /// The app cards each step's prompt gets.
    pub cards: droidmesh_app_cards::AppCards,
    /// The operator's tools the task may call besides the device tools.
    pub custom: crate::custom_tools::CustomTools,
}

const AGENT: &str = "codeact";

/// How the CodeAct model is told what the user sent (the steering contract decides what each
/// message does).
const VOICE: Voice = Voice {
    note: |note| note.to_owned(),
    new_goal: |goal| format!("The user changed the goal to: {goal}"),
    reply: |_, reply| format!("A human answered your request for help: {reply}"),
};

struct Outcome {
    success: bool,
    answer: String,
    steps: u32,
}

/// Why a run stops before its budget: the gateway left (nothing more to send), or the run
/// failed at a step and says why.
enum Halt {
    Gone,
    Failed(u32, String),
}

type Flow<T> = Result<T, Halt>;

/// What a run holds for its whole length.
struct Setup {
    /// Made in the background: the first model call does not wait for it.
    session: BackgroundSession,
    tools: Arc<SandboxTools>,
    system: String,
    target: ChatTarget,
    serial: String,
    max_steps: u32,
}

/// What the run has learnt so far, shown to the model at each step.
struct Progress {
    /// The run's place among the starts, given back when its first model call goes out.
    admitted: Option<Admitted>,
    /// The goal as it stands and the user's notes for the next step.
    steering: Steering,
    /// The newest earlier steps: what the prompt can show (`history_steps`), at least the
    /// steering contract's `HISTORY_KEPT`; older ones are only counted.
    history: Kept<CodeActStep>,
    /// What the model kept with `remember(...)`, within the steering contract's caps.
    memory: Memory,
    /// The steps' actions and screens, watched for loops.
    loops: LoopGuard,
    failures: u32,
    last_error: String,
    usage: TokenUsage,
    /// The model's limits as far as known: context, reply size, images.
    fit: Fit,
    /// Whether the provider's token counts were found implausible (said once).
    miscounted: bool,
    /// Why the device withholds screenshots, once it does: none is asked for again this run
    /// (the device withholds them for the rest of the lease, which is the run's).
    shots_withheld: Option<String>,
}

impl Run {
    async fn emit(&self, kind: agent_event::Kind) -> Flow<()> {
        self.events
            .send(Ok(AgentEvent { kind: Some(kind) }))
            .await
            .map_err(|_| Halt::Gone)
    }

    /// Runs the loop and sends the final event. Returns when done or when the gateway left.
    pub async fn run(mut self) {
        let mut usage = TokenUsage::default();
        let outcome = match self.run_loop(&mut usage).await {
            Ok(o) => o,
            Err(Halt::Gone) => return,
            Err(Halt::Failed(steps, answer)) => Outcome {
                success: false,
                answer,
                steps,
            },
        };
        if !outcome.success {
            crate::spans::failed(&tracing::Span::current(), "goal_not_reached");
        }
        let _ = self
            .emit(agent_event::Kind::Finished(AgentFinished {
                agent: AGENT.into(),
                success: outcome.success,
                answer: outcome.answer,
                steps: outcome.steps,
                usage: Some(usage),
                result: None,
            }))
            .await;
    }

    async fn run_loop(&mut self, usage: &mut TokenUsage) -> Flow<Outcome> {
        // A task cancelled while it waits for its turn leaves the queue at once.
        let admitted = tokio::select! {
            admitted = self.admission.admit() => admitted,
            () = self.events.closed() => return Err(Halt::Gone),
        };
        let entered = self.foreground.enter();
        let setup = self.setup().await.map_err(|e| Halt::Failed(0, e))?;
        drop(entered);
        let limits = self
            .llm
            .limits(&setup.target)
            .map_err(|e| Halt::Failed(0, format!("the model override is not usable: {e}")))?;
        let mut progress = Progress {
            admitted: Some(admitted),
            fit: Fit::new(limits),
            miscounted: false,
            shots_withheld: None,
            steering: Steering::new(
                self.start.goal.clone(),
                VOICE,
                droidmesh_agent::steer::NOTES_KEPT,
            ),
            history: Kept::new(self.cfg.history_steps.max(HISTORY_KEPT)),
            memory: Memory::default(),
            loops: LoopGuard::new(self.cfg.loop_repeats),
            failures: 0,
            last_error: String::new(),
            usage: TokenUsage::default(),
        };
        let result = self.steps(&setup, &mut progress).await;
        *usage = progress.usage;
        result
    }

    /// The session, its tools, the system prompt and the model, before the first step.
    async fn setup(&self) -> Result<Setup, String> {
        let Some(lease) = self.start.device.as_ref().and_then(|d| d.lease.clone()) else {
            return Err("the start message has no device lease".into());
        };
        let serial = lease.serial.clone();
        let (tools, custom) = self
            .custom
            .select(&self.start.tools)
            .map_err(|e| format!("bad tool list: {e}"))?;
        let secrets = self.secrets.clone();
        let bridge = Arc::new(
            SandboxTools::new(
                ToolCtx::new(self.device.clone(), lease, secrets, AGENT),
                self.events.clone(),
            )
            .for_task(&self.start.task_id),
        );
        let limits = SandboxLimits {
            wall_clock: Duration::from_millis(self.cfg.step_timeout_ms),
            memory_bytes: self.cfg.sandbox_memory_mb * 1024 * 1024,
            ..SandboxLimits::default()
        };
        let mut caps = Capabilities::new();
        for f in host_functions(&tools, &bridge) {
            caps = caps.function(f);
        }
        for f in custom_host_functions(&custom, &bridge) {
            caps = caps.function(f);
        }
        for f in refused_host_functions(&tools, &custom, self.custom.all()) {
            caps = caps.function(f);
        }
        let session = BackgroundSession::new(self.foreground.clone(), async move {
            Session::start(limits, caps)
                .await
                .map_err(|e| format!("the JavaScript sandbox could not start: {e}"))
        });
        let system = CodeActSystem {
            tool_signatures: agent_tools::js_signatures(&tools),
            custom_tool_signatures: agent_tools::custom_signatures(
                &custom.iter().map(|t| t.spec().clone()).collect::<Vec<_>>(),
            ),
            vision: self.start.vision,
            secret_ids: self.start.secret_ids.clone(),
            app_card: Some(self.start.app_card.clone()).filter(|s| !s.trim().is_empty()),
            output_schema: Some(self.start.output_schema.clone()).filter(|s| !s.trim().is_empty()),
            max_steps: self.start.max_steps,
        };
        let system = self
            .prompts
            .render(&system)
            .map_err(|e| format!("the codeact system prompt does not render: {e}"))?;
        let target = self
            .llm
            .target_for_request(AGENT, self.start.llm.as_ref())
            .map_err(|e| format!("the model override is not usable: {e}"))?;
        Ok(Setup {
            session,
            tools: bridge,
            system,
            target,
            serial,
            max_steps: self.start.max_steps.max(1),
        })
    }

    async fn steps(&mut self, setup: &Setup, progress: &mut Progress) -> Flow<Outcome> {
        let max_steps = setup.max_steps;
        for step in 1..=max_steps {
            let deadline = Instant::now() + Duration::from_millis(self.cfg.step_deadline_ms);
            // In the foreground until the model call goes out.
            let mut entered = Some(self.foreground.enter());
            self.steer(progress, step)?;
            setup.tools.set_step(step);
            self.emit(agent_event::Kind::Step(StepStarted {
                agent: AGENT.into(),
                step,
            }))
            .await?;
            let seen = self.observe(setup, progress, step).await?;
            // Cards of the app in front and of apps the goal names, read again each step.
            let foreground = Some(seen.phone.package.as_str()).filter(|p| !p.is_empty());
            let cards = self
                .cards
                .prompt_text(foreground, progress.steering.goal(), None)
                .await;
            let mut record = StepRecord::new(step);
            if !seen.withheld.is_empty() && progress.shots_withheld.is_none() {
                record.withheld(&seen.withheld);
                progress.shots_withheld = Some(seen.withheld.clone());
            }
            // A prompt the provider refused as too long is fitted again once, to what the
            // refusal taught; a refused screenshot is dropped for the rest of the run.
            let mut refitted = false;
            let (called, shown) = loop {
                let prompt = self.prompt(setup, progress, step, &seen, cards.as_deref())?;
                entered.take();
                progress.admitted.take();
                let called = self
                    .call(setup, prompt.message, progress, step, deadline)
                    .await?;
                match called {
                    Called::Overflow {
                        prompt_tokens,
                        context_tokens,
                        ..
                    } if !refitted => {
                        refitted = true;
                        let before = progress.fit.context();
                        progress
                            .fit
                            .refused(prompt.bytes, prompt_tokens, context_tokens);
                        if progress.fit.context() != before {
                            record.note(format!(
                                "the model refused the prompt as too long; earlier steps are now fitted to a context of {} tokens",
                                progress.fit.context().unwrap_or_default()
                            ));
                        }
                    }
                    Called::NoImages(why) if prompt.image => {
                        progress.fit.images = false;
                        record.note(format!(
                            "the model does not take images ({why}): screenshots are no longer sent to it"
                        ));
                    }
                    Called::Reply(ref r) if !prompt.image => {
                        if !progress.fit.counted(prompt.bytes, r.input_tokens)
                            && !progress.miscounted
                            && prompt.bytes >= 1024
                            && r.input_tokens > 0
                        {
                            progress.miscounted = true;
                            record.note(format!(
                                "the provider counted {} tokens for a prompt of {} bytes, which no tokenizer gives (is its chat template dropping the prompt?); token estimates ignore its counts",
                                r.input_tokens, prompt.bytes
                            ));
                        }
                        break (called, prompt.text);
                    }
                    other => break (other, prompt.text),
                }
            };
            match called {
                Called::Failed(e) => record.fail_plainly(e),
                Called::Overflow { message, .. } => record.fail_plainly(format!(
                    "the prompt was refused as longer than the model's context: {message}"
                )),
                Called::NoImages(e) => record.fail_plainly(format!("the model call failed: {e}")),
                Called::Reply(reply) => {
                    if reply.truncated {
                        record.truncated();
                    }
                    let own = progress.history.iter();
                    let echo = PromptEcho::of([
                        EchoText::shared(&setup.system),
                        Arc::new(EchoText::new(shown)),
                    ])
                    .with_own_words(own.flat_map(|s| [s.thought.as_str(), s.code.as_str()]))
                    .with_task_end(agent_tools::Tool::Complete.name());
                    self.execute(setup, &seen, &reply.text, &echo, &mut record, deadline)
                        .await?;
                }
            }
            // The step's actions, on the screen its prompt showed.
            let screen = ScreenPrint::of(&seen.elements, &seen.phone);
            match progress.loops.record(screen, &setup.tools.take_actions()) {
                Verdict::Go => {}
                Verdict::Warn(repeat) => record.looped(&repeat),
                Verdict::Stop(repeat) => record.stuck(&repeat),
            }
            self.observation(&record).await?;
            if let Some(outcome) = self.record(setup, progress, record, step).await? {
                return Ok(outcome);
            }
        }
        // The budget ran out; a last step that failed is the real cause, so name it.
        let mut reason =
            format!("reached the step limit ({max_steps}) before the goal was completed");
        if progress.failures > 0 {
            reason.push_str(&format!("; the last step failed: {}", progress.last_error));
        }
        Err(Halt::Failed(max_steps, reason))
    }

    /// Takes the messages that arrived since the last step.
    fn steer(&mut self, progress: &mut Progress, step: u32) -> Flow<()> {
        while let Ok(s) = self.steer.try_recv() {
            if let Next::Stop(_) = progress.steering.take(s, None) {
                return Err(Halt::Failed(step - 1, "stopped by the user".into()));
            }
        }
        Ok(())
    }

    /// Reads the device, with the task's secrets masked, and streams the screenshot when
    /// asked.
    async fn observe(&mut self, setup: &Setup, progress: &Progress, step: u32) -> Flow<Observed> {
        let want_shot = (self.start.vision || self.start.stream_screenshots)
            && progress.shots_withheld.is_none();
        let seen = observe(
            &self.device,
            &setup.serial,
            want_shot,
            self.cfg.screenshot_max_side,
            setup.tools.ctx().masks(),
        )
        .await
        .map_err(|e| Halt::Failed(step, format!("cannot read the device: {e}")))?;
        if self.start.stream_screenshots
            && let Some(shot) = seen.screenshot.clone()
        {
            self.emit(agent_event::Kind::Screenshot(shot)).await?;
        }
        Ok(seen)
    }

    /// Keeps the step in the history, counts failures, and acts on what the script signalled
    /// (notes, completion, a question for a human). `Some` ends the run.
    async fn record(
        &mut self,
        setup: &Setup,
        progress: &mut Progress,
        record: StepRecord,
        step: u32,
    ) -> Flow<Option<Outcome>> {
        let signals = setup.tools.ctx().take_signals();
        for note in &signals.memory {
            progress.memory.remember(note);
        }
        let stop = record.stop.clone();
        if let Some(e) = &record.user_error {
            progress.failures += 1;
            progress.last_error = e.clone();
        } else {
            progress.failures = 0;
        }
        progress.history.push(record.model);
        if let Some((success, reason)) = signals.complete {
            return Ok(Some(Outcome {
                success,
                answer: reason,
                steps: step,
            }));
        }
        if let Some(why) = stop {
            return Err(Halt::Failed(step, why));
        }
        if progress.failures >= self.cfg.max_consecutive_failures {
            return Err(Halt::Failed(
                step,
                format!(
                    "{} steps in a row failed; the last: {}",
                    progress.failures, progress.last_error
                ),
            ));
        }
        if let Some((reason, instructions)) = signals.help {
            self.emit(agent_event::Kind::HumanHelp(HumanHelpRequest {
                agent: AGENT.into(),
                reason: reason.clone(),
                instructions,
            }))
            .await?;
            if let Err(why) = self.wait_for_human(progress, &reason).await {
                return Err(Halt::Failed(step, why));
            }
        }
        Ok(None)
    }

    /// Waits for a person's reply to the request for help made for `reason`; the reply goes
    /// into the notes for the next step.
    async fn wait_for_human(
        &mut self,
        progress: &mut Progress,
        reason: &str,
    ) -> Result<(), String> {
        let deadline = tokio::time::sleep(Duration::from_millis(self.cfg.human_wait_ms));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                // Notes and goal changes are taken as while the run steps: the next step
                // shows them.
                s = self.steer.recv() => match s {
                    Some(s) => match progress.steering.take(s, Some(reason)) {
                        Next::Replied => return Ok(()),
                        Next::Stop(_) => return Err("stopped while waiting for a human".into()),
                        Next::Go => {}
                    },
                    None => return Err("stopped while waiting for a human".into()),
                },
                _ = &mut deadline => return Err(format!("no human answered within {} s", self.cfg.human_wait_ms / 1000)),
            }
        }
    }
}
