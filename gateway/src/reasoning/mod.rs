//! Reasoning mode: the gateway's routing loop. The manager plans; the first subgoal goes to the
//! agent its kind names (an action to the executor, a `<script>` to the scripter, a
//! `TEXT_TASK:` to the text manipulator); the agent's `ActionResult` goes back to the manager
//! with the outcome. The task's state (goal, plan, memory, action and error history, notes,
//! files, step count) lives here; agents get what they need in each request. The executor's
//! actions are watched for loops ([`loops`]).
use std::time::Duration;

use droidmesh_agent::loops::LoopGuard;
use droidmesh_agent::steer::{HISTORY_KEPT, Kept, Memory, NOTES_KEPT, Steering, Voice, cut};
use droidmesh_proto::v1::{
    ActionRecord, ActionResult, ConversationTurn, FileDetail, HumanHelpRequest, Observation,
    PlanRequest, PlanResponse, PlanUpdate, StepStarted, Subgoal, TaskState, Thought, subgoal::Kind,
    task_event,
};

use crate::agents::Agent;
use crate::driver::{Driver, TaskCtx, non_empty};
use crate::error::PeerError;
use crate::routing::{Routed, route};
use crate::task_state::{Ending, record_usage, set_state};

mod loops;
mod steer;

/// Of the action history kept per task (the steering contract's `HISTORY_KEPT`), the manager
/// sees the last [`HISTORY_TO_MANAGER`].
const HISTORY_TO_MANAGER: usize = 20;
/// Failures kept for the error history (consecutive ones only).
const FAILURES_KEPT: usize = 5;
/// Files kept on a task.
const FILES_KEPT: usize = 100;
/// Longest side of the screenshots streamed with `stream_screenshots`.
pub(crate) const SCREENSHOT_MAX_SIDE: u32 = 1024;
/// Waits before retrying a manager that could not be reached or went away mid-call (a call
/// that ran out of time is not retried: it already had its whole budget).
const MANAGER_RETRY: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// Runs a task as the manager plans it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReasoningDriver;

impl Driver for ReasoningDriver {
    async fn drive(&self, ctx: TaskCtx<'_>) -> Ending {
        let conversation = ctx.deps.conversations.turns(&ctx.req.conversation_id);
        Loop::new(ctx, conversation).run().await
    }
}

/// How the manager is told what the user sent (the steering contract decides what each
/// message does).
const VOICE: Voice = Voice {
    note: |text| format!("The user says: {text}"),
    new_goal: |goal| {
        format!(
            "The user changed the goal. The new goal is: {goal}. Plan for it, using what has been done so far."
        )
    },
    reply: |reason, reply| format!("A person answered your request for help ({reason}): {reply}"),
};

pub(crate) struct Loop<'a> {
    pub(crate) ctx: TaskCtx<'a>,
    /// The goal as it stands and the notes for the next plan (the user's and the loop's own).
    steering: Steering,
    conversation: Vec<ConversationTurn>,
    memory: Memory,
    plan_text: String,
    history: Kept<ActionRecord>,
    failures: Kept<ActionRecord>,
    /// The executor's actions and the screens they were made on, watched for loops.
    loops: LoopGuard,
    last_handoff: Option<String>,
    files: Vec<FileDetail>,
    steps: u32,
    /// Steps whose subgoal ended in a failure.
    failed_steps: u32,
    /// Set by a stop request: the task ends once the call in progress returns.
    stop: Option<String>,
    /// An ending that arrived during a call whose caller cannot return it at once.
    pending_end: Option<Ending>,
    /// Set once the device service withheld a screenshot of this task (the user is told once;
    /// the streamed screenshots stop).
    shots_withheld: bool,
}

impl<'a> Loop<'a> {
    fn new(ctx: TaskCtx<'a>, conversation: Vec<ConversationTurn>) -> Self {
        let loops = LoopGuard::new(ctx.deps.cfg.loop_repeats);
        Self {
            steering: Steering::new(ctx.req.goal.clone(), VOICE, NOTES_KEPT),
            ctx,
            conversation,
            memory: Memory::default(),
            plan_text: String::new(),
            history: Kept::new(HISTORY_KEPT),
            failures: Kept::new(FAILURES_KEPT),
            loops,
            last_handoff: None,
            files: Vec::new(),
            steps: 0,
            failed_steps: 0,
            stop: None,
            pending_end: None,
            shots_withheld: false,
        }
    }

    async fn run(mut self) -> Ending {
        let cfg = &self.ctx.deps.cfg;
        let max_steps = self.ctx.max_steps();
        let max_parse_failures = cfg.max_manager_parse_failures;
        // Plans that route nothing (unusable replies, human help) are bounded too.
        let max_plans = max_steps
            .saturating_mul(2)
            .saturating_add(max_parse_failures);
        let mut parse_failures = 0u32;
        let mut plans = 0u32;
        if let Err(end) = self.check_secrets().await {
            return end;
        }
        loop {
            while let Ok(c) = self.ctx.control.try_recv() {
                if let Some(end) = self.on_control(c, false) {
                    return end;
                }
            }
            if plans >= max_plans {
                return Ending::failed(format!(
                    "the manager planned {plans} times without finishing the task"
                ));
            }
            plans += 1;
            let plan = match self.plan().await {
                Ok(p) => p,
                Err(end) => return end,
            };
            if let Some(end) = self.stopped() {
                return end;
            }
            self.withheld(&plan.screenshot_withheld);
            self.take_plan(&plan);
            if let Some(answer) = plan.direct_response.clone() {
                self.ctx.entry.update(|t| t.answered_directly = true);
                set_state(
                    self.ctx.entry,
                    TaskState::Running,
                    "answered from the conversation without acting on the device",
                );
                return Ending::succeeded(answer);
            }
            if let Some(done) = &plan.accomplished {
                return if done.success {
                    Ending::succeeded(done.answer.clone())
                } else {
                    Ending {
                        state: TaskState::Failed,
                        answer: done.answer.clone(),
                        error: non_empty(done.answer.clone(), "the manager gave up"),
                    }
                };
            }
            if let Some(help) = plan.human_help.clone() {
                match self.ask_human(help).await {
                    Ok(()) => continue,
                    Err(end) => return end,
                }
            }
            let Some(first) = plan.subgoals.first().cloned() else {
                parse_failures += 1;
                let why = if plan.parse_warnings.is_empty() {
                    "the reply had neither a plan nor a completion".to_owned()
                } else {
                    plan.parse_warnings.join("; ")
                };
                self.ctx
                    .entry
                    .push(task_event::Kind::Observation(Observation {
                        agent: Agent::Manager.name().into(),
                        output: String::new(),
                        error: Some(why.clone()),
                        notes: Vec::new(),
                    }));
                if parse_failures >= max_parse_failures {
                    return Ending::failed(format!(
                        "the manager's replies could not be used {parse_failures} times in a row; the last: {why}"
                    ));
                }
                self.note(format!(
                    "Your previous reply could not be used: {why}. Reply with a <plan> or a <request_accomplished>."
                ));
                continue;
            };
            parse_failures = 0;
            let agent = match Kind::try_from(first.kind) {
                Ok(Kind::Action) => Agent::Executor,
                Ok(Kind::Script) => Agent::Scripter,
                Ok(Kind::TextTask) => Agent::TextManipulator,
                Ok(Kind::Done) => {
                    self.note(
                        "Your plan's next item was DONE, which routes nothing: declare the end with <request_accomplished>.".into(),
                    );
                    continue;
                }
                Ok(Kind::Unspecified) | Err(_) => {
                    self.note(format!(
                        "Subgoal \"{}\" has no kind any agent takes; write it as an action, a <script> or a TEXT_TASK: line.",
                        first.text
                    ));
                    continue;
                }
            };
            if self.steps >= max_steps {
                return Ending::failed(self.out_of_steps(max_steps));
            }
            self.steps += 1;
            let step = self.steps;
            self.ctx.entry.set_step(step);
            self.ctx
                .entry
                .push(task_event::Kind::StepStarted(StepStarted {
                    agent: Agent::Manager.name().into(),
                    step,
                }));
            match self.carry_out(agent, first).await {
                Ok(()) => {}
                Err(end) => return end,
            }
            if self.history.last().is_some_and(|r| !r.success) {
                self.failed_steps += 1;
            }
            if self.ctx.req.stream_screenshots {
                self.screenshot().await;
            }
            if let Some(end) = self.stopped() {
                return end;
            }
        }
    }

    /// Routes a subgoal and the handoffs its agents ask for, recording each result.
    async fn carry_out(&mut self, agent: Agent, subgoal: Subgoal) -> Result<(), Ending> {
        let max_hops = self.ctx.deps.cfg.max_handoff_hops;
        let mut routed = self
            .route(
                agent,
                &subgoal,
                Agent::Manager.name(),
                subgoal.text.clone(),
                None,
            )
            .await?;
        let mut hops = 0u32;
        while routed.result.handoff_requested {
            let from = routed.agent;
            let target = routed.result.suggested_agent.clone().unwrap_or_default();
            let reason = routed.result.handoff_reason.clone().unwrap_or_default();
            let reason_for_human = reason.clone();
            let context = routed.result.handoff_context.clone();
            self.record(&subgoal, &routed);
            if self.stop.is_some() {
                return Ok(());
            }
            if target.trim().is_empty() || Agent::from_name(&target) == Some(Agent::Manager) {
                return Ok(());
            }
            if target.trim().eq_ignore_ascii_case("human") {
                let help = HumanHelpRequest {
                    agent: from.name().into(),
                    reason: non_empty(reason_for_human, "an agent asked for a person"),
                    instructions: context
                        .as_ref()
                        .and_then(|c| {
                            droidmesh_proto::struct_to_json(c)
                                .get("instructions")
                                .cloned()
                        })
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                };
                return self.ask_human(help).await;
            }
            let Some(next) = Agent::from_name(&target) else {
                self.note(format!(
                    "The {} asked to hand \"{}\" over to \"{target}\", which is not an agent (expected executor, scripter or text_manipulator).",
                    from.name(),
                    subgoal.text
                ));
                return Ok(());
            };
            hops += 1;
            if hops > max_hops {
                self.note(format!(
                    "\"{}\" was handed over {max_hops} times without being done; plan it differently.",
                    subgoal.text
                ));
                return Ok(());
            }
            let handed = Subgoal {
                number: subgoal.number,
                kind: kind_of(next) as i32,
                text: subgoal.text.clone(),
            };
            let why = non_empty(reason, "asked to take over");
            routed = self.route(next, &handed, from.name(), why, context).await?;
        }
        self.record(&subgoal, &routed);
        Ok(())
    }

    async fn route(
        &mut self,
        agent: Agent,
        subgoal: &Subgoal,
        from: &str,
        reason: String,
        context: Option<prost_types::Struct>,
    ) -> Result<Routed, Ending> {
        let call = route(
            self.ctx.deps,
            self.ctx.entry,
            self.request_parts(),
            agent,
            subgoal.clone(),
            from.to_owned(),
            reason,
            context,
        );
        let routed = self.guarded(call).await?;
        self.withheld(&routed.withheld);
        self.ctx.entry.push(task_event::Kind::SubgoalResult(
            droidmesh_proto::v1::SubgoalResult {
                agent: routed.agent.name().into(),
                subgoal: Some(subgoal.clone()),
                result: Some(routed.result.clone()),
            },
        ));
        Ok(routed)
    }

    /// What every agent request shares, as this task has it now.
    pub(crate) fn request_parts(&self) -> crate::routing::Parts {
        let keep = self.history.len().saturating_sub(5);
        crate::routing::Parts {
            task_id: self.ctx.entry.id.clone(),
            instruction: self.steering.goal().to_owned(),
            plan: self.plan_text.clone(),
            progress: self.memory.joined(),
            binding: self.ctx.binding(),
            vision: self.ctx.req.vision,
            app_card: self.ctx.req.app_card.clone(),
            recent: self.history.iter().skip(keep).cloned().collect(),
            secret_ids: self.ctx.req.secret_ids.clone(),
            models: self.ctx.req.models.clone(),
        }
    }

    /// Why the task ends at the step limit: the limit, and the failure that ended the last
    /// subgoal when it failed (every one of them, when none succeeded), since that is the
    /// likely cause.
    fn out_of_steps(&self, max_steps: u32) -> String {
        let mut reason =
            format!("reached the step limit ({max_steps}) before the goal was completed");
        if let Some(last) = self.history.last().filter(|r| !r.success) {
            let which = if self.failed_steps >= self.steps {
                format!("every one of the {} subgoals failed; the last", self.steps)
            } else {
                "the last subgoal failed".to_owned()
            };
            reason.push_str(&format!(
                "; {which} ({}, \"{}\"): {}",
                last.agent,
                cut(&last.action, 200),
                last.feedback
            ));
        }
        reason
    }

    /// Records a subgoal's outcome for the manager's next plan.
    fn record(&mut self, subgoal: &Subgoal, routed: &Routed) {
        let r = &routed.result;
        let answer = routed.answer.clone();
        let feedback = if r.success {
            non_empty(answer.clone(), &r.action_taken)
        } else {
            r.error.clone().unwrap_or_else(|| r.action_taken.clone())
        };
        let record = ActionRecord {
            agent: routed.agent.name().into(),
            action: subgoal.text.clone(),
            description: r.action_taken.clone(),
            success: r.success,
            feedback: cut(&feedback, 2_000),
        };
        if r.success {
            self.failures.clear();
        } else {
            self.failures.push(record.clone());
        }
        self.history.push(record);
        self.watch_loops(routed);
        if matches!(routed.agent, Agent::Scripter | Agent::TextManipulator) {
            let outcome = if r.success { "finished" } else { "failed" };
            let mut text = format!(
                "The {} {outcome} \"{}\": {}",
                routed.agent.name(),
                subgoal.text,
                cut(&feedback, 4_000)
            );
            for f in &r.files {
                text.push_str(&format!(
                    "\nFile: {} ({} bytes) at {}",
                    f.name, f.size_bytes, f.path
                ));
            }
            self.last_handoff = Some(text);
        }
        for f in &r.files {
            self.files.retain(|g| g.path != f.path);
            self.files.push(f.clone());
        }
        if self.files.len() > FILES_KEPT {
            let extra = self.files.len() - FILES_KEPT;
            self.files.drain(..extra);
        }
        let files = self.files.clone();
        self.ctx.entry.update(|t| t.files = files);
    }

    /// Takes the plan's memory, plan and usage into the task.
    fn take_plan(&mut self, plan: &PlanResponse) {
        let entry = self.ctx.entry;
        if let Some(u) = &plan.usage {
            record_usage(entry, u);
        }
        if !plan.thought.trim().is_empty() {
            entry.push(task_event::Kind::Thought(Thought {
                agent: Agent::Manager.name().into(),
                text: plan.thought.clone(),
            }));
        }
        for line in plan.add_memory.lines() {
            self.memory.remember(line);
        }
        if !plan.plan_text.trim().is_empty() {
            self.plan_text = plan.plan_text.clone();
        }
        let memory = self.memory.joined();
        let subgoals = plan.subgoals.clone();
        entry.update(|t| {
            t.plan = subgoals.clone();
            t.memory = memory.clone();
        });
        if !plan.subgoals.is_empty() {
            entry.push(task_event::Kind::Plan(PlanUpdate {
                subgoals,
                plan_text: plan.plan_text.clone(),
                memory,
            }));
        }
    }

    /// Asks the executor whether it holds every secret the task names, before the first plan,
    /// so a task naming one it lacks fails at its start as in direct mode (not at the first
    /// subgoal that types). An executor that cannot answer, or does not within
    /// `agent_call_timeout_ms`, is not waited for further: the first subgoal routed to it says
    /// why.
    async fn check_secrets(&mut self) -> Result<(), Ending> {
        let ids = self.ctx.req.secret_ids.clone();
        if ids.is_empty() {
            return Ok(());
        }
        let mut executor = self.ctx.deps.agents.executor.clone();
        let req = droidmesh_proto::v1::CheckSecretsRequest { secret_ids: ids };
        let call = crate::routing::within(self.ctx.deps, executor.check_secrets(req));
        match self.guarded(call).await? {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(s)) if s.code() == tonic::Code::FailedPrecondition => {
                let endpoint = self.ctx.deps.agents.endpoint(Agent::Executor);
                Err(Ending::failed(
                    PeerError::call("executor", endpoint, &s).to_string(),
                ))
            }
            Ok(Err(s)) => {
                tracing::warn!(task = %self.ctx.entry.id, error = %PeerError::new("executor", &s), "the executor could not say whether it holds the task's secrets");
                Ok(())
            }
            Err(waited) => {
                tracing::warn!(task = %self.ctx.entry.id, %waited, "the executor did not say whether it holds the task's secrets");
                Ok(())
            }
        }
    }

    /// Asks the manager for the next plan; a manager that cannot be reached is tried again
    /// twice before the task fails.
    async fn plan(&mut self) -> Result<PlanResponse, Ending> {
        let threshold = self.ctx.deps.cfg.error_threshold;
        let error_history = if self.failures.len() >= threshold {
            self.failures.iter().cloned().collect()
        } else {
            Vec::new()
        };
        let keep = self.history.len().saturating_sub(HISTORY_TO_MANAGER);
        let req = PlanRequest {
            task_id: self.ctx.entry.id.clone(),
            instruction: self.steering.goal().to_owned(),
            device: Some(self.ctx.binding()),
            vision: self.ctx.req.vision,
            app_card: self.ctx.req.app_card.clone(),
            previous_plan: self.plan_text.clone(),
            memory: self.memory.joined(),
            action_history: self.history.iter().skip(keep).cloned().collect(),
            error_history,
            last_handoff_result: self.last_handoff.clone().unwrap_or_default(),
            secret_ids: self.ctx.req.secret_ids.clone(),
            llm: self.ctx.req.models.get("manager").cloned(),
            step: self.steps + 1,
            conversation: self.conversation.clone(),
            notes: self.steering.notes().to_vec(),
            files: self.files.clone(),
        };
        let mut attempt = 0;
        loop {
            let call = crate::routing::plan(self.ctx.deps, req.clone(), self.steps + 1);
            match self.guarded(call).await? {
                Ok(plan) => {
                    self.steering.clear_notes();
                    self.last_handoff = None;
                    return Ok(plan);
                }
                Err(e)
                    if e.is_unreachable()
                        && !e.timed_out()
                        && !e.stopped_answering()
                        && attempt < MANAGER_RETRY.len() =>
                {
                    tracing::warn!(task = %self.ctx.entry.id, error = %e, "manager call failed; trying again");
                    let wait = tokio::time::sleep(MANAGER_RETRY[attempt]);
                    attempt += 1;
                    self.guarded(wait).await?;
                }
                Err(e) => return Err(Ending::failed(format!("the manager could not plan: {e}"))),
            }
        }
    }
}

/// The subgoal kind an agent takes.
fn kind_of(agent: Agent) -> Kind {
    match agent {
        Agent::Executor => Kind::Action,
        Agent::Scripter => Kind::Script,
        Agent::TextManipulator => Kind::TextTask,
        Agent::Manager => Kind::Unspecified,
    }
}

impl From<PeerError> for ActionResult {
    fn from(e: PeerError) -> Self {
        ActionResult {
            success: false,
            action_taken: format!("the {} could not take the subgoal", e.service),
            method_used: e.service.into(),
            error: Some(e.to_string()),
            ..ActionResult::default()
        }
    }
}
