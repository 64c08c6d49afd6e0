//! `ExecuteSubgoal`: reasoning mode's executor. One call reads the device, asks the model for
//! one atomic action (JSON under "### Action"), checks it against the tool table and performs
//! it through the same dispatcher CodeAct uses; or, when the model asks to, hands the subgoal
//! to the scripter or the text manipulator without touching the device.
//!
//! Anything the manager can act on comes back as a failed `ActionResult` whose error a model
//! can read: a reply that does not parse, an unknown or non-atomic action, arguments of the
//! wrong type, a device action that failed, a device service that cannot be reached. Only a
//! malformed request or a model that cannot be called is an RPC error ([`ExecutorError`]).
//!
//! An action's result names it (`data.action`, `data.arguments`) and the fingerprint of the
//! screen it was made on (`data.screen`, `droidmesh_agent::loops::ScreenPrint`), which the
//! gateway watches for loops.
use std::time::Instant;

use droidmesh_agent::loops::ScreenPrint;
use droidmesh_agent::parse::{ExecutorAction, parse_executor};
use droidmesh_agent::prompts::{ActionRecord, ExecutorSystem, handoff_text};
use droidmesh_agent::tools::{self, ATOMIC_ACTIONS, ToolSpec};
use droidmesh_llm::{CallTags, ChatRequest, Message};
use droidmesh_proto::v1::{ActionResult, ExecuteSubgoalRequest, ExecuteSubgoalResponse};
use droidmesh_proto::{json_to_struct, struct_to_json};
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use crate::device_tools::ToolCtx;
use crate::error::ExecutorError;
use crate::model::{describe_model, is_unusable, usage_report};
use crate::observe::{Observed, observe};
use crate::service::Executor;
use crate::spans::{self, ToolCallTags};

const AGENT: &str = "executor";

/// The action that hands a subgoal over instead of acting.
const HANDOFF: &str = "handoff";

/// Agents a subgoal may be handed to.
const HANDOFF_AGENTS: &[&str] = &["scripter", "text_manipulator"];

/// Past actions shown to the model, newest kept.
const ACTION_HISTORY: usize = 5;

/// What the model chose, before it is carried out.
#[derive(Default)]
struct Reply {
    thought: String,
    description: String,
    action_json: String,
}

pub(crate) async fn execute_subgoal(
    exec: &Executor,
    req: ExecuteSubgoalRequest,
) -> Result<ExecuteSubgoalResponse, ExecutorError> {
    let started = Instant::now();
    if req.subgoal.trim().is_empty() {
        return Err(ExecutorError::InvalidRequest("subgoal is empty".into()));
    }
    let secrets = exec.secrets.for_request(&req.secret_ids)?;
    let (device, lease) = exec.device_for(req.device.as_ref())?;
    let target = exec
        .llm
        .target_for_request(AGENT, req.llm.as_ref())
        .map_err(|source| ExecutorError::ModelUnusable {
            agent: AGENT,
            model: describe_model(&exec.llm, AGENT, req.llm.as_ref()),
            source,
        })?;
    // Every secret the task may type is masked in what is read (earlier subgoals may have
    // typed it; this call does not know where).
    let masks = secrets
        .values()
        .filter(|v| !v.is_empty())
        .take(crate::device_tools::MAX_READ_MASKS)
        .map(|v| droidmesh_proto::v1::SecretMask {
            secret: v.clone(),
            field: None,
        })
        .collect();
    let mut seen = match observe(
        &device,
        &lease.serial,
        req.vision,
        exec.cfg.screenshot_max_side,
        masks,
    )
    .await
    {
        Ok(seen) => seen,
        Err(s) => {
            let error = format!("cannot read the device: {s}");
            return Ok(respond(
                failed(error, None, started),
                Reply::default(),
                None,
            ));
        }
    };
    let atomic =
        tools::select(ATOMIC_ACTIONS).map_err(|e| ExecutorError::Prompt(AGENT, e.to_string()))?;
    let attach = req.vision && seen.screenshot.is_some();
    // The gateway tells the user, once per task, when the screenshot was withheld.
    let withheld = if req.vision {
        std::mem::take(&mut seen.withheld)
    } else {
        String::new()
    };
    let shot = seen.screenshot.take();
    let screen = ScreenPrint::of(&seen.elements, &seen.phone);
    let system = prompt(&req, seen, &atomic, attach);
    let system = exec
        .prompts
        .render(&system)
        .map_err(|e| ExecutorError::Prompt(AGENT, e.to_string()))?;
    let mut user = Message::user(format!(
        "Choose the one action that performs this subgoal: {}",
        req.subgoal
    ));
    if attach && let Some(shot) = shot {
        user = user.with_image_png(shot.png);
    }
    let tags = CallTags::new(req.task_id.as_str()).device(lease.serial.as_str());
    let request = ChatRequest::new(vec![Message::system(system), user]).tagged(tags);
    let response = match exec.llm.chat(target, request).await {
        Ok(r) => r,
        Err(source) if is_unusable(&source) => {
            return Err(ExecutorError::ModelUnusable {
                agent: AGENT,
                model: describe_model(&exec.llm, AGENT, req.llm.as_ref()),
                source,
            });
        }
        Err(source) => {
            return Err(ExecutorError::ModelCall {
                agent: AGENT,
                source,
            });
        }
    };
    let usage = usage_report(AGENT, &response);
    let parsed = match parse_executor(&response.text) {
        Ok(p) => p,
        Err(e) => {
            let error = format!("the executor's reply could not be read: {e}");
            return Ok(ExecuteSubgoalResponse {
                screenshot_withheld: withheld,
                ..respond(failed(error, None, started), Reply::default(), Some(usage))
            });
        }
    };
    let reply = Reply {
        thought: parsed.thought.clone().unwrap_or_default(),
        description: parsed.description.clone().unwrap_or_default(),
        action_json: action_json(&parsed),
    };
    let result = if parsed.action.eq_ignore_ascii_case(HANDOFF) {
        handoff(&req.subgoal, &parsed, started)
    } else {
        let ctx = ToolCtx::new(device, lease, secrets, AGENT);
        let step = (req.step > 0).then_some(req.step);
        let on = Acting {
            task_id: &req.task_id,
            step,
            screen,
        };
        act(&ctx, &on, &atomic, &parsed, started).await
    };
    Ok(ExecuteSubgoalResponse {
        screenshot_withheld: withheld,
        ..respond(result, reply, Some(usage))
    })
}

/// The executor prompt's context for this request and screen.
fn prompt(
    req: &ExecuteSubgoalRequest,
    seen: Observed,
    atomic: &[ToolSpec],
    vision: bool,
) -> ExecutorSystem {
    let keep = req.action_history.len().saturating_sub(ACTION_HISTORY);
    let text = |s: &String| Some(s.clone()).filter(|s| !s.trim().is_empty());
    ExecutorSystem {
        instruction: req.instruction.clone(),
        plan: req.plan.clone(),
        subgoal: req.subgoal.clone(),
        progress_status: text(&req.progress_status),
        actions: tools::json_actions(atomic),
        phone: seen.phone,
        ui_state: seen.elements,
        vision,
        app_card: text(&req.app_card),
        secret_ids: req.secret_ids.clone(),
        action_history: req.action_history[keep..]
            .iter()
            .map(|a| ActionRecord {
                agent: a.agent.clone(),
                action: a.action.clone(),
                description: a.description.clone(),
                success: a.success,
                feedback: a.feedback.clone(),
            })
            .collect(),
        handoff_context: req
            .handoff_context
            .as_ref()
            .and_then(|c| handoff_text(&droidmesh_proto::struct_to_json(c))),
    }
}

fn respond(
    result: ActionResult,
    reply: Reply,
    usage: Option<droidmesh_proto::v1::UsageReport>,
) -> ExecuteSubgoalResponse {
    ExecuteSubgoalResponse {
        result: Some(result),
        thought: reply.thought,
        action_json: reply.action_json,
        description: reply.description,
        usage,
        screenshot_withheld: String::new(),
    }
}

/// The action as the model wrote it, as one JSON object.
fn action_json(parsed: &ExecutorAction) -> String {
    let mut object = Map::new();
    object.insert("action".into(), Value::String(parsed.action.clone()));
    object.extend(parsed.args.clone());
    Value::Object(object).to_string()
}

fn elapsed_us(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// A failed result: nothing (more) was done, and `error` says why.
fn failed(error: String, data: Option<Value>, started: Instant) -> ActionResult {
    ActionResult {
        success: false,
        action_taken: String::new(),
        method_used: AGENT.into(),
        confidence: 0.0,
        data: data.map(|d| json_to_struct(&d)),
        error: Some(error),
        duration_us: elapsed_us(started),
        ..ActionResult::default()
    }
}

/// Where an action is made: the task, its step and the screen read before it.
struct Acting<'a> {
    task_id: &'a str,
    step: Option<u32>,
    screen: ScreenPrint,
}

/// Resolves the action among the atomic ones, checks its arguments and performs it.
async fn act(
    ctx: &ToolCtx,
    on: &Acting<'_>,
    atomic: &[ToolSpec],
    parsed: &ExecutorAction,
    started: Instant,
) -> ActionResult {
    let expected = || {
        let mut names: Vec<&str> = atomic.iter().map(|t| t.name).collect();
        names.push(HANDOFF);
        names.join(", ")
    };
    let spec = match tools::find(&parsed.action) {
        Some(spec) if spec.tool.is_atomic() => spec,
        Some(spec) => {
            let named = if spec.name == parsed.action {
                format!("`{}`", spec.name)
            } else {
                format!("`{}` ({})", parsed.action, spec.name)
            };
            let error = format!(
                "{named} is not an action the executor can take for a subgoal; expected one of: {}",
                expected()
            );
            return failed(error, None, started);
        }
        None => {
            let error = format!(
                "unknown action `{}`; expected one of: {}",
                parsed.action,
                expected()
            );
            return failed(error, None, started);
        }
    };
    let args = match spec.args_in_order(&parsed.args) {
        Ok(args) => args,
        Err(e) => return failed(e.to_string(), None, started),
    };
    let named: Map<String, Value> = spec
        .params
        .iter()
        .zip(&args)
        .filter(|(_, v)| !v.is_null())
        .map(|(p, v)| (p.name.to_owned(), v.clone()))
        .collect();
    let tags = ToolCallTags {
        task_id: on.task_id,
        serial: ctx.serial(),
        step: on.step,
        call_id: None,
    };
    let screen = on.screen.to_string();
    let span = spans::execute_tool(spec.name, &tags);
    let done = ctx
        .dispatch(spec.tool, &args)
        .instrument(span.clone())
        .await;
    if !done.as_ref().is_ok_and(|(r, _)| r.success) {
        spans::failed(&span, "tool_failed");
    }
    match done {
        Ok((r, value)) => {
            let data = json!({
                "action": spec.name,
                "arguments": named,
                "screen": screen,
                "device": {
                    "action_taken": r.action_taken,
                    "method_used": r.method_used,
                    "data": r.data.as_ref().map(struct_to_json).unwrap_or(Value::Null),
                    "value": value,
                },
            });
            ActionResult {
                success: r.success,
                action_taken: r.action_taken,
                method_used: AGENT.into(),
                confidence: if r.success { r.confidence } else { 0.0 },
                data: Some(json_to_struct(&data)),
                error: r.error,
                duration_us: elapsed_us(started),
                ..ActionResult::default()
            }
        }
        Err(e) => {
            let data = json!({"action": spec.name, "arguments": named, "screen": screen});
            failed(format!("{} failed: {e}", spec.name), Some(data), started)
        }
    }
}

/// Hands the subgoal to another agent; the device is not touched.
fn handoff(subgoal: &str, parsed: &ExecutorAction, started: Instant) -> ActionResult {
    let text = |key: &str| {
        parsed
            .args
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let (asked, reason) = (text("agent"), text("reason"));
    let agent = asked.to_ascii_lowercase().replace(['-', ' '], "_");
    if !HANDOFF_AGENTS.contains(&agent.as_str()) {
        let error = format!(
            "cannot hand the subgoal to `{asked}`; expected \"agent\" to be one of: {}",
            HANDOFF_AGENTS.join(", ")
        );
        return failed(error, None, started);
    }
    let context = json!({"subgoal": subgoal, "reason": reason});
    ActionResult {
        success: true,
        action_taken: format!("handed the subgoal to the {agent}"),
        method_used: AGENT.into(),
        confidence: 1.0,
        data: Some(json_to_struct(
            &json!({"action": HANDOFF, "agent": agent, "reason": reason}),
        )),
        handoff_requested: true,
        suggested_agent: Some(agent),
        handoff_reason: Some(reason),
        handoff_context: Some(json_to_struct(&context)),
        duration_us: elapsed_us(started),
        ..ActionResult::default()
    }
}
