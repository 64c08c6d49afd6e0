//! The calls reasoning mode makes: a plan from the manager, and a subgoal carried out by the
//! agent its kind names. Each is an `invoke_agent {name}` span (so the agent's own spans are
//! its children in the task's trace) and each routing is a Handoff event in the task's log.
use std::collections::HashMap;

use droidmesh_proto::v1::{
    ActionRecord, ActionResult, CodeBlock, DeviceBinding, ExecuteSubgoalRequest, Handoff,
    LlmOverride, ManipulateRequest, PlanRequest, PlanResponse, RunScriptRequest, Subgoal, Thought,
    task_event,
};
use tracing::Instrument as _;

use crate::agents::Agent;
use crate::deps::Deps;
use crate::entry::TaskEntry;
use crate::error::PeerError;
use crate::relay::relay;
use crate::task_state::record_usage;

/// What every agent request of a task shares, as the task has it when the subgoal is routed.
#[derive(Debug, Clone)]
pub struct Parts {
    pub task_id: String,
    pub instruction: String,
    pub plan: String,
    pub progress: String,
    pub binding: DeviceBinding,
    pub vision: bool,
    pub app_card: String,
    /// The last few actions, oldest first.
    pub recent: Vec<ActionRecord>,
    pub secret_ids: Vec<String>,
    pub models: HashMap<String, LlmOverride>,
}

/// A subgoal's outcome: who carried it out, its result, and the agent's answer in words (the
/// scripter's final reply, the text typed), when it has one.
#[derive(Debug, Clone)]
pub struct Routed {
    pub agent: Agent,
    pub result: ActionResult,
    pub answer: String,
    /// Why the agent's screenshot (vision) was withheld by the device service, or empty.
    pub withheld: String,
}

fn invoke_span(
    agent: Agent,
    task_id: &str,
    binding: Option<&DeviceBinding>,
    step: u32,
) -> tracing::Span {
    let name = agent.name();
    let serial = binding
        .and_then(|b| b.lease.as_ref())
        .map(|l| l.serial.as_str())
        .filter(|s| !s.is_empty());
    tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("invoke_agent {name}"),
        otel.kind = "client",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = name,
        droidmesh.task.id = %task_id,
        droidmesh.device.serial = serial,
        droidmesh.step = step,
        error.type = tracing::field::Empty,
    )
}

/// Asks the manager for a plan.
pub async fn plan(deps: &Deps, req: PlanRequest, step: u32) -> Result<PlanResponse, PeerError> {
    let span = invoke_span(Agent::Manager, &req.task_id, req.device.as_ref(), step);
    let mut manager = deps.agents.manager.clone();
    let endpoint = deps.agents.endpoint(Agent::Manager);
    let call = async move {
        match manager.plan(req).await {
            Ok(r) => Ok(r.into_inner()),
            Err(s) => Err(PeerError::call_checked(Agent::Manager.name(), endpoint, &s).await),
        }
    };
    let planned = match within(deps, call).instrument(span.clone()).await {
        Ok(r) => r,
        Err(limit) => Err(PeerError::new(
            Agent::Manager.name(),
            &tonic::Status::deadline_exceeded(limit),
        )),
    };
    if planned.is_err() {
        span.record("error.type", "agent_call_failed");
    }
    planned
}

/// Runs an agent call under the gateway's `agent_call_timeout_ms`; the error says how long
/// it waited.
pub async fn within<T>(
    deps: &Deps,
    call: impl std::future::Future<Output = T>,
) -> Result<T, String> {
    let limit = std::time::Duration::from_millis(deps.cfg.agent_call_timeout_ms);
    tokio::time::timeout(limit, call)
        .await
        .map_err(|_| format!("no answer within {} ms", limit.as_millis()))
}

/// Hands `subgoal` to `agent` (logging the handoff from `from`) and returns its result. A
/// failed call is a failed result naming the agent, never an error: the manager decides.
#[allow(clippy::too_many_arguments)]
pub async fn route(
    deps: &Deps,
    entry: &TaskEntry,
    parts: Parts,
    agent: Agent,
    subgoal: Subgoal,
    from: String,
    reason: String,
    context: Option<prost_types::Struct>,
) -> Routed {
    entry.push(task_event::Kind::Handoff(Handoff {
        from_agent: from,
        to_agent: agent.name().into(),
        reason,
        context: context.clone(),
    }));
    let span = invoke_span(agent, &parts.task_id, Some(&parts.binding), subgoal.number);
    let call = async {
        match agent {
            Agent::Executor => executor(deps, entry, parts, subgoal, context).await,
            Agent::Scripter => scripter(deps, entry, parts, subgoal, context).await,
            Agent::TextManipulator => text(deps, entry, parts, subgoal, context).await,
            Agent::Manager => Routed {
                agent,
                result: ActionResult {
                    success: false,
                    action_taken: "nothing: the manager plans, it does not carry out subgoals"
                        .into(),
                    error: Some("a subgoal cannot be routed to the manager".into()),
                    ..ActionResult::default()
                },
                answer: String::new(),
                withheld: String::new(),
            },
        }
    };
    let routed = match within(deps, call).instrument(span.clone()).await {
        Ok(routed) => routed,
        Err(limit) => {
            let e = PeerError::new(agent.name(), &tonic::Status::deadline_exceeded(limit));
            failed(agent, e.into())
        }
    };
    if !routed.result.success {
        span.record("error.type", "subgoal_failed");
    }
    routed
}

fn failed(agent: Agent, result: ActionResult) -> Routed {
    Routed {
        agent,
        result,
        answer: String::new(),
        withheld: String::new(),
    }
}

async fn executor(
    deps: &Deps,
    entry: &TaskEntry,
    p: Parts,
    subgoal: Subgoal,
    context: Option<prost_types::Struct>,
) -> Routed {
    let agent = Agent::Executor;
    let req = ExecuteSubgoalRequest {
        task_id: p.task_id,
        instruction: p.instruction,
        subgoal: subgoal.text,
        plan: p.plan,
        progress_status: p.progress,
        device: Some(p.binding),
        vision: p.vision,
        app_card: p.app_card,
        action_history: p.recent,
        secret_ids: p.secret_ids,
        llm: p.models.get(agent.name()).cloned(),
        handoff_context: context,
        step: subgoal.number,
    };
    let mut client = deps.agents.executor.clone();
    let r = match client.execute_subgoal(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => return failed(agent, peer(deps, agent, &s).await.into()),
    };
    if let Some(u) = &r.usage {
        record_usage(entry, u);
    }
    if !r.thought.trim().is_empty() {
        entry.push(task_event::Kind::Thought(Thought {
            agent: agent.name().into(),
            text: r.thought.clone(),
        }));
    }
    push_code(entry, agent, "json", &r.action_json);
    let result = r.result.unwrap_or_else(|| ActionResult {
        success: false,
        action_taken: "the executor returned no result".into(),
        error: Some("the executor answered without an ActionResult".into()),
        ..ActionResult::default()
    });
    Routed {
        agent,
        result,
        answer: r.description,
        withheld: r.screenshot_withheld,
    }
}

async fn scripter(
    deps: &Deps,
    entry: &TaskEntry,
    p: Parts,
    subgoal: Subgoal,
    context: Option<prost_types::Struct>,
) -> Routed {
    let agent = Agent::Scripter;
    // A task's scripts share files on the replica that ran them: keep them on one replica.
    let mut req = tonic::Request::new(RunScriptRequest {
        task_id: p.task_id.clone(),
        task: subgoal.text,
        max_steps: 0,
        llm: p.models.get(agent.name()).cloned(),
        instruction: p.instruction,
        handoff_context: context,
    });
    droidmesh_runtime::balance::set_affinity(&mut req, &p.task_id);
    let mut client = deps.agents.scripter.clone();
    let mut stream = match client.run_script(req).await {
        Ok(s) => s.into_inner(),
        Err(s) => return failed(agent, peer(deps, agent, &s).await.into()),
    };
    loop {
        match stream.message().await {
            Ok(Some(ev)) => {
                let Some(done) = relay(entry, ev, false) else {
                    continue;
                };
                let result = done.result.unwrap_or_else(|| ActionResult {
                    success: done.success,
                    action_taken: format!("ran a script in {} steps", done.steps),
                    method_used: agent.name().into(),
                    error: (!done.success).then(|| done.answer.clone()),
                    ..ActionResult::default()
                });
                return Routed {
                    agent,
                    result,
                    answer: done.answer,
                    withheld: String::new(),
                };
            }
            Ok(None) => {
                let e = "the scripter ended its run without a result".to_owned();
                return failed(agent, failure(agent, e));
            }
            Err(s) => {
                let e = peer(deps, agent, &s).await;
                let e = if e.transport.is_some() {
                    e.to_string()
                } else {
                    format!("the scripter's run broke off: {e}")
                };
                return failed(agent, failure(agent, e));
            }
        }
    }
}

async fn text(
    deps: &Deps,
    entry: &TaskEntry,
    p: Parts,
    subgoal: Subgoal,
    context: Option<prost_types::Struct>,
) -> Routed {
    let agent = Agent::TextManipulator;
    let req = ManipulateRequest {
        task_id: p.task_id,
        instruction: p.instruction,
        subgoal: subgoal.text,
        plan: p.plan,
        device: Some(p.binding),
        original: None,
        apply: true,
        max_retries: 0,
        llm: p.models.get(agent.name()).cloned(),
        handoff_context: context,
    };
    let mut client = deps.agents.text_manipulator.clone();
    let r = match client.manipulate(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => return failed(agent, peer(deps, agent, &s).await.into()),
    };
    if let Some(u) = &r.usage {
        record_usage(entry, u);
    }
    push_code(entry, agent, "javascript", &r.code_ran);
    let result = r
        .result
        .unwrap_or_else(|| failure(agent, "the text manipulator returned no result".into()));
    let answer = if result.success {
        format!("the field now reads: {}", r.text_to_type)
    } else {
        String::new()
    };
    Routed {
        agent,
        result,
        answer,
        withheld: String::new(),
    }
}

/// Logs what an agent ran (its JSON action, its program), when it ran something.
fn push_code(entry: &TaskEntry, agent: Agent, language: &str, code: &str) {
    if !code.trim().is_empty() {
        entry.push(task_event::Kind::Code(CodeBlock {
            agent: agent.name().into(),
            language: language.into(),
            code: code.to_owned(),
        }));
    }
}

fn failure(agent: Agent, error: String) -> ActionResult {
    ActionResult {
        success: false,
        action_taken: format!("the {} did not finish", agent.name()),
        method_used: agent.name().into(),
        error: Some(error),
        ..ActionResult::default()
    }
}

/// A failed call to `agent`, named with its endpoint when the connection itself failed.
async fn peer(deps: &Deps, agent: Agent, status: &tonic::Status) -> PeerError {
    PeerError::call_checked(agent.name(), deps.agents.endpoint(agent), status).await
}
