//! CodeAct's sandbox functions: one per entry of the agent crate's tool table (so prompt and
//! sandbox cannot disagree), each reporting a ToolCall and a ToolResult event around the
//! shared async dispatcher ([`ToolCtx::dispatch`]); and one per operator-defined tool
//! ([`crate::custom_tools`]), reported the same way around its call.
//!
//! Host functions run on the sandbox's own thread, which is not a runtime thread; the blocking
//! adapter there `block_on`s the async call through the runtime handle. Async code calls
//! [`SandboxTools::call`] (or the dispatcher) directly and never blocks.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use droidmesh_agent::loops::{ACTIONS_PER_STEP, Action};
use droidmesh_agent::tools::{Tool, ToolSpec};
use droidmesh_proto::v1::{ActionResult, AgentEvent, ToolCall, ToolResult, agent_event};
use droidmesh_sandbox::{HostFunction, ParamSpec, ParamType};
use serde_json::Value;
use tokio::sync::mpsc;
use tonic::Status;
use tracing::Instrument as _;

use crate::custom_tools::CustomTool;
use crate::device_tools::ToolCtx;
use crate::spans::{self, ToolCallTags};

/// The tools of one CodeAct run, with the events and the span their calls report to.
pub struct SandboxTools {
    ctx: ToolCtx,
    rt: tokio::runtime::Handle,
    events: mpsc::Sender<Result<AgentEvent, Status>>,
    calls: AtomicU32,
    /// The run's span: tool calls start on the sandbox's thread, outside any span, so each
    /// call's span is parented on this one to stay in the task's trace.
    span: tracing::Span,
    /// The task the calls serve and the step running now, for the calls' spans.
    task_id: String,
    step: AtomicU32,
    /// The calls that acted on the screen since the last [`SandboxTools::take_actions`], in
    /// order (at most the loop guard's `ACTIONS_PER_STEP`).
    actions: Mutex<Vec<Action>>,
    /// Calls made so far of each operator-defined tool, by name (at most one entry per tool).
    custom_calls: Mutex<HashMap<String, u32>>,
}

impl SandboxTools {
    /// Binds `ctx` to the current runtime and span.
    pub fn new(ctx: ToolCtx, events: mpsc::Sender<Result<AgentEvent, Status>>) -> Self {
        Self {
            ctx,
            rt: tokio::runtime::Handle::current(),
            events,
            calls: AtomicU32::new(0),
            span: tracing::Span::current(),
            task_id: String::new(),
            step: AtomicU32::new(0),
            actions: Mutex::default(),
            custom_calls: Mutex::default(),
        }
    }

    /// Labels the calls' spans with `task_id`.
    pub fn for_task(mut self, task_id: &str) -> Self {
        self.task_id = task_id.to_owned();
        self
    }

    /// The step whose script runs next (labels its calls' spans).
    pub fn set_step(&self, step: u32) {
        self.step.store(step, Ordering::Relaxed);
    }

    /// The calls of the step that acted on the screen, for the loop guard, leaving none
    /// behind.
    pub fn take_actions(&self) -> Vec<Action> {
        std::mem::take(&mut *self.actions.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The dispatcher's context (its signals are read after each step).
    pub fn ctx(&self) -> &ToolCtx {
        &self.ctx
    }

    async fn emit(&self, kind: agent_event::Kind) {
        let _ = self.events.send(Ok(AgentEvent { kind: Some(kind) })).await;
    }

    /// Runs one tool call of the script: a ToolCall event, the tool under its own span, a
    /// ToolResult event. The script gets the tool's value, or its error as a thrown error.
    pub async fn call(&self, tool: Tool, args: Vec<Value>) -> Result<Value, String> {
        let name = tool.name();
        let call_id = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let action = Action::new(tool, &args);
        if action.acts() {
            let mut actions = self.actions.lock().unwrap_or_else(|p| p.into_inner());
            if actions.len() < ACTIONS_PER_STEP {
                actions.push(action);
            }
        }
        let mut named = serde_json::Map::new();
        for (p, v) in tool.spec().params.iter().zip(&args) {
            if !v.is_null() {
                // A secret's id is shown; nothing a tool types from a secret ever is.
                named.insert(p.name.to_owned(), v.clone());
            }
        }
        self.emit(agent_event::Kind::ToolCall(ToolCall {
            agent: "codeact".into(),
            tool: name.into(),
            arguments_json: Value::Object(named).to_string(),
            call_id,
        }))
        .await;
        let started = Instant::now();
        let span = self
            .span
            .in_scope(|| spans::execute_tool(name, &self.tags(call_id)));
        let done = self
            .ctx
            .dispatch(tool, &args)
            .instrument(span.clone())
            .await;
        let (mut result, value) = match done {
            Ok((r, v)) => (r, Ok(v)),
            Err(e) => (
                ActionResult {
                    success: false,
                    action_taken: format!("{name} failed"),
                    method_used: "codeact".into(),
                    error: Some(e.clone()),
                    ..ActionResult::default()
                },
                Err(e),
            ),
        };
        if result.duration_us == 0 {
            result.duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        }
        if !result.success {
            spans::failed(&span, "tool_failed");
        }
        let failed = (!result.success).then(|| {
            result
                .error
                .clone()
                .unwrap_or_else(|| result.action_taken.clone())
        });
        self.emit(agent_event::Kind::ToolResult(ToolResult {
            agent: "codeact".into(),
            tool: name.into(),
            call_id,
            result: Some(result),
        }))
        .await;
        match (value, failed) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
        }
    }

    /// The span labels of the call `call_id` made now.
    fn tags(&self, call_id: u32) -> ToolCallTags<'_> {
        let step = self.step.load(Ordering::Relaxed);
        ToolCallTags {
            task_id: &self.task_id,
            serial: self.ctx.serial(),
            step: (step > 0).then_some(step),
            call_id: Some(call_id),
        }
    }

    /// Runs one call of an operator-defined tool: a ToolCall event, then under its own span
    /// the arguments checked against the tool's schema, the run's budget of calls to it, and
    /// the call; then a ToolResult event. The script gets the answer, or what went wrong as a
    /// thrown error (nothing is sent when the arguments do not fit or the budget is spent).
    pub async fn call_custom(&self, tool: &CustomTool, args: Value) -> Result<Value, String> {
        let name = tool.name();
        let call_id = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        // Left out, the argument object is empty.
        let args = if args.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            args
        };
        self.emit(agent_event::Kind::ToolCall(ToolCall {
            agent: "codeact".into(),
            tool: name.into(),
            arguments_json: args.to_string(),
            call_id,
        }))
        .await;
        let started = Instant::now();
        let span = self
            .span
            .in_scope(|| spans::execute_custom_tool(name, tool.tool_type(), &self.tags(call_id)));
        let done = async {
            tool.check(&args).map_err(|e| ("invalid_arguments", e))?;
            self.take_custom_call(tool).map_err(|e| ("call_limit", e))?;
            tool.run(&args).await.map_err(|e| ("tool_failed", e))
        }
        .instrument(span.clone())
        .await;
        let duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let (result, value) = match done {
            Ok((value, summary)) => (
                ActionResult {
                    success: true,
                    action_taken: format!("{name}: {summary}"),
                    method_used: "codeact".into(),
                    confidence: 1.0,
                    duration_us,
                    ..ActionResult::default()
                },
                Ok(value),
            ),
            Err((kind, e)) => {
                spans::failed(&span, kind);
                (
                    ActionResult {
                        success: false,
                        action_taken: format!("{name} failed"),
                        method_used: "codeact".into(),
                        error: Some(e.clone()),
                        duration_us,
                        ..ActionResult::default()
                    },
                    Err(e),
                )
            }
        };
        self.emit(agent_event::Kind::ToolResult(ToolResult {
            agent: "codeact".into(),
            tool: name.into(),
            call_id,
            result: Some(result),
        }))
        .await;
        value
    }

    /// Counts one call of `tool`, or says its budget for the run is spent.
    fn take_custom_call(&self, tool: &CustomTool) -> Result<(), String> {
        let mut calls = self.custom_calls.lock().unwrap_or_else(|p| p.into_inner());
        let made = calls.entry(tool.name().to_owned()).or_insert(0);
        if *made >= tool.max_calls() {
            return Err(format!(
                "called {made} times in this task, its limit; work with the answers you have"
            ));
        }
        *made += 1;
        Ok(())
    }

    /// The blocking adapter for the sandbox's thread.
    fn call_blocking(&self, tool: Tool, args: Vec<Value>) -> Result<Value, String> {
        if tokio::runtime::Handle::try_current().is_ok() {
            // block_on would panic on a runtime thread; refuse instead.
            return Err(format!(
                "{tool} was called from an async worker; tools block only on the sandbox's thread"
            ));
        }
        self.rt.block_on(self.call(tool, args))
    }
}

/// The blocking adapter of operator-defined tools, for the sandbox's thread.
fn call_custom_blocking(
    bridge: &SandboxTools,
    tool: &CustomTool,
    args: Vec<Value>,
) -> Result<Value, String> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(format!(
            "{} was called from an async worker; tools block only on the sandbox's thread",
            tool.name()
        ));
    }
    let args = args.into_iter().next().unwrap_or(Value::Null);
    bridge.rt.block_on(bridge.call_custom(tool, args))
}

/// The sandbox functions of operator-defined tools, bound to `bridge`: each takes one object
/// of named arguments (required when the tool's schema requires a property).
pub fn custom_host_functions(
    tools: &[Arc<CustomTool>],
    bridge: &Arc<SandboxTools>,
) -> Vec<HostFunction> {
    tools
        .iter()
        .map(|tool| {
            let spec = tool.spec();
            let param = if spec.args_required() {
                ParamSpec::required("args", ParamType::Object, "the named arguments")
            } else {
                ParamSpec::optional("args", ParamType::Object, "the named arguments")
            };
            let (bridge, tool) = (bridge.clone(), tool.clone());
            HostFunction::new(spec.name.clone(), spec.description.clone(), move |args| {
                call_custom_blocking(&bridge, &tool, args)
            })
            .param(param)
        })
        .collect()
}

/// Sandbox functions for the tools a task's list leaves out (device tools and operator
/// tools): each throws, naming the task's tools, and does nothing else. Without them a call
/// would read as a mistyped name (`tap is not defined`).
pub fn refused_host_functions(
    granted: &[ToolSpec],
    granted_custom: &[Arc<CustomTool>],
    all_custom: &[Arc<CustomTool>],
) -> Vec<HostFunction> {
    let names: Vec<&str> = granted
        .iter()
        .map(|t| t.name)
        .chain(granted_custom.iter().map(|t| t.name()))
        .collect();
    let listed = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    let why = format!("not one of this task's tools (they are: {listed}); nothing was done");
    let refuse = |name: &str, params: Vec<ParamSpec>| {
        let why = why.clone();
        let mut f = HostFunction::new(name, "not granted to this task", move |_| Err(why.clone()));
        f.params = params;
        f
    };
    let device = droidmesh_agent::tools::device_tools()
        .iter()
        .filter(|t| !names.contains(&t.name))
        .map(|t| {
            // Any arguments are taken, so the refusal is what the script reads.
            let params = t
                .params
                .iter()
                .map(|p| ParamSpec::optional(p.name, ParamType::Any, ""))
                .collect();
            refuse(t.name, params)
        });
    let custom = all_custom
        .iter()
        .filter(|t| !names.contains(&t.name()))
        .map(|t| {
            refuse(
                t.name(),
                vec![ParamSpec::optional("args", ParamType::Any, "")],
            )
        });
    device.chain(custom).collect()
}

/// The sandbox functions for `tools`, bound to `bridge`.
pub fn host_functions(tools: &[ToolSpec], bridge: &Arc<SandboxTools>) -> Vec<HostFunction> {
    tools
        .iter()
        .map(|spec| {
            let bridge = bridge.clone();
            let tool = spec.tool;
            let mut f = HostFunction::new(spec.name, spec.description, move |args| {
                bridge.call_blocking(tool, args)
            });
            for p in &spec.params {
                f = f.param(if p.required {
                    ParamSpec::required(p.name, p.ty, p.description)
                } else {
                    ParamSpec::optional(p.name, p.ty, p.description)
                });
            }
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use std::collections::HashMap;
    use std::time::Duration;

    use droidmesh_proto::v1::LeaseRef;
    use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
    use droidmesh_runtime::ClientOptions;
    use serde_json::json;

    use super::*;

    fn ctx() -> ToolCtx {
        // Lazy: nothing connects unless a device tool runs.
        let channel =
            droidmesh_runtime::connect("http://127.0.0.1:9", &ClientOptions::default()).unwrap();
        let lease = LeaseRef {
            serial: "s".into(),
            lease_id: "l".into(),
        };
        ToolCtx::new(
            droidmesh_runtime::device::DeviceLink::new(
                DeviceServiceClient::new(channel),
                "http://127.0.0.1:9",
                std::time::Duration::from_secs(30),
            ),
            lease,
            HashMap::new(),
            "codeact",
        )
    }

    #[tokio::test(start_paused = true)]
    async fn wait_sleeps_on_the_runtime_s_clock_and_is_capped() {
        let started = tokio::time::Instant::now();
        let (result, _) = ctx().dispatch(Tool::Wait, &[json!(4000)]).await.unwrap();
        assert_eq!(result.action_taken, "waited 4000 ms");
        // Paused time only moves for tokio timers: a thread sleep would leave it at zero.
        assert_eq!(started.elapsed(), Duration::from_millis(4000));
        let (result, _) = ctx().dispatch(Tool::Wait, &[json!(60_000)]).await.unwrap();
        assert_eq!(result.action_taken, "waited 10000 ms");
    }

    #[tokio::test]
    async fn the_blocking_adapter_refuses_a_runtime_thread_instead_of_panicking() {
        let (tx, _rx) = mpsc::channel(4);
        let tools = SandboxTools::new(ctx(), tx);
        let err = tools
            .call_blocking(Tool::Remember, vec![json!("x")])
            .unwrap_err();
        assert!(err.contains("async worker"), "{err}");
        // The same call from a plain thread runs, through the runtime handle.
        let tools = Arc::new(tools);
        let on_thread = tools.clone();
        let value = tokio::task::spawn_blocking(move || {
            std::thread::spawn(move || on_thread.call_blocking(Tool::Remember, vec![json!("x")]))
                .join()
                .unwrap()
        })
        .await
        .unwrap();
        assert_eq!(value, Ok(Value::Null));
        assert_eq!(tools.ctx().take_signals().memory, ["x"]);
    }
}
