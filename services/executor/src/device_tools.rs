//! The CodeAct sandbox's functions: one per entry of the agent crate's tool table (so prompt
//! and sandbox cannot disagree), each calling the device service under the task's lease and
//! reporting a ToolCall and a ToolResult event. Handlers run on the sandbox's own thread and
//! block on the runtime handle; they never run on an async worker.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use droidmesh_agent::tools::{self as agent_tools, ToolSpec};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    ActionResult, AgentEvent, DragRequest, Key, LeaseRef, ListPackagesRequest, LongPressRequest,
    Point, PressKeyRequest, StartAppRequest, SwipeRequest, TapRequest, ToolCall, ToolResult,
    TypeTextRequest, agent_event, long_press_request, press_key_request, start_app_request,
    tap_request,
};
use droidmesh_runtime::TracedChannel;
use droidmesh_sandbox::{HostFunction, ParamSpec};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tonic::Status;

/// What the script asked for besides device actions, read by the loop after each step.
#[derive(Debug, Default, Clone)]
pub struct Signals {
    pub complete: Option<(bool, String)>,
    pub help: Option<String>,
    pub memory: Vec<String>,
}

/// Everything a tool call needs.
pub struct ToolCtx {
    pub rt: tokio::runtime::Handle,
    pub device: DeviceServiceClient<TracedChannel>,
    pub lease: LeaseRef,
    pub events: mpsc::Sender<Result<AgentEvent, Status>>,
    pub signals: Mutex<Signals>,
    /// Allowed secret ids and their values (values never leave this struct).
    pub secrets: HashMap<String, String>,
    calls: AtomicU32,
    /// The run's span: tool calls run on the sandbox's thread, outside any span, so device
    /// calls are made under this one to stay in the task's trace.
    span: tracing::Span,
}

impl ToolCtx {
    pub fn new(
        rt: tokio::runtime::Handle,
        device: DeviceServiceClient<TracedChannel>,
        lease: LeaseRef,
        events: mpsc::Sender<Result<AgentEvent, Status>>,
        secrets: HashMap<String, String>,
    ) -> Self {
        Self {
            rt,
            device,
            lease,
            events,
            signals: Mutex::default(),
            secrets,
            calls: AtomicU32::new(0),
            span: tracing::Span::current(),
        }
    }

    pub fn take_signals(&self) -> Signals {
        std::mem::take(&mut *self.signals.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn signal(&self, f: impl FnOnce(&mut Signals)) {
        f(&mut self.signals.lock().unwrap_or_else(|p| p.into_inner()));
    }

    fn emit(&self, kind: agent_event::Kind) {
        let _ = self
            .events
            .blocking_send(Ok(AgentEvent { kind: Some(kind) }));
    }
}

/// The sandbox functions for `tools`, bound to `ctx`.
pub fn host_functions(tools: &[ToolSpec], ctx: &Arc<ToolCtx>) -> Vec<HostFunction> {
    tools
        .iter()
        .map(|spec| {
            let ctx = ctx.clone();
            let name = spec.name;
            let params: Vec<&'static str> = spec.params.iter().map(|p| p.name).collect();
            let mut f = HostFunction::new(name, spec.description, move |args| {
                ctx.call(name, &params, args)
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

/// A whole-number argument (the tool table declares them `Integer`, so the sandbox and
/// `args_in_order` have refused fractions already; nothing is rounded here).
fn num(args: &[Value], i: usize) -> Option<i64> {
    let v = args.get(i)?;
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0)
            .map(|f| f as i64)
    })
}

fn u32_arg(args: &[Value], i: usize, what: &str) -> Result<u32, String> {
    num(args, i)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("{what} must be a whole number >= 0"))
}

fn point(args: &[Value], x: usize, y: usize) -> Result<Point, String> {
    let coord = |i| {
        num(args, i)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or("coordinates must be numbers")
    };
    Ok(Point {
        x: coord(x)?,
        y: coord(y)?,
    })
}

fn text(args: &[Value], i: usize) -> String {
    args.get(i)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn ok_result(action: impl Into<String>) -> ActionResult {
    ActionResult {
        success: true,
        action_taken: action.into(),
        method_used: "codeact".into(),
        confidence: 1.0,
        ..ActionResult::default()
    }
}

/// The outcome of one tool: the result to report and the value the script gets.
type Done = Result<(ActionResult, Value), String>;

impl ToolCtx {
    fn call(&self, tool: &'static str, params: &[&str], args: Vec<Value>) -> Result<Value, String> {
        let call_id = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let mut named = serde_json::Map::new();
        for (p, v) in params.iter().zip(&args) {
            if !v.is_null() {
                // A secret's id is shown; nothing a tool types from a secret ever is.
                named.insert((*p).to_owned(), v.clone());
            }
        }
        self.emit(agent_event::Kind::ToolCall(ToolCall {
            agent: "codeact".into(),
            tool: tool.into(),
            arguments_json: Value::Object(named).to_string(),
            call_id,
        }));
        let started = Instant::now();
        let span = tracing::info_span!(parent: &self.span, "tool", tool = %tool, call_id);
        let done = span.in_scope(|| self.run(tool, &args));
        let (mut result, value) = match done {
            Ok((r, v)) => (r, Ok(v)),
            Err(e) => (
                ActionResult {
                    success: false,
                    action_taken: format!("{tool} failed"),
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
        let failed = (!result.success).then(|| {
            result
                .error
                .clone()
                .unwrap_or_else(|| result.action_taken.clone())
        });
        self.emit(agent_event::Kind::ToolResult(ToolResult {
            agent: "codeact".into(),
            tool: tool.into(),
            call_id,
            result: Some(result),
        }));
        match (value, failed) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(e),
            (Ok(v), None) => Ok(v),
        }
    }

    /// Runs a device RPC on the runtime from this (non-runtime) thread.
    fn device<T, F, Fut>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce(DeviceServiceClient<TracedChannel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        use tracing::Instrument as _;
        self.rt
            .block_on(f(self.device.clone()).instrument(tracing::Span::current()))
            .map(tonic::Response::into_inner)
            .map_err(|s| s.message().to_owned())
    }

    fn lease(&self) -> Option<LeaseRef> {
        Some(self.lease.clone())
    }

    fn action(r: ActionResult) -> Done {
        let v = Value::String(r.action_taken.clone());
        Ok((r, v))
    }

    fn run(&self, tool: &str, a: &[Value]) -> Done {
        match tool {
            "tap" => {
                let index = u32_arg(a, 0, "index")?;
                let lease = self.lease();
                Self::action(self.device(|mut d| async move {
                    d.tap(TapRequest {
                        lease,
                        target: Some(tap_request::Target::Index(index)),
                    })
                    .await
                })?)
            }
            "tap_at" => {
                let p = point(a, 0, 1)?;
                let lease = self.lease();
                Self::action(self.device(|mut d| async move {
                    d.tap(TapRequest {
                        lease,
                        target: Some(tap_request::Target::Point(p)),
                    })
                    .await
                })?)
            }
            "long_press" => {
                let index = u32_arg(a, 0, "index")?;
                let lease = self.lease();
                Self::action(self.device(|mut d| async move {
                    let target = Some(long_press_request::Target::Index(index));
                    d.long_press(LongPressRequest {
                        lease,
                        target,
                        duration_ms: 0,
                    })
                    .await
                })?)
            }
            "type_text" => {
                let (t, index, clear) = (
                    text(a, 0),
                    num(a, 1).and_then(|v| u32::try_from(v).ok()),
                    a.get(2).and_then(Value::as_bool).unwrap_or(false),
                );
                let lease = self.lease();
                Self::action(self.device(|mut d| async move {
                    d.type_text(TypeTextRequest {
                        lease,
                        text: t,
                        index,
                        clear,
                        sensitive: false,
                    })
                    .await
                })?)
            }
            "type_secret" => {
                let id = text(a, 0);
                let found = self.secrets.get(&id).or_else(|| {
                    self.secrets
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(&id))
                        .map(|(_, v)| v)
                });
                let Some(secret) = found.cloned() else {
                    let mut known: Vec<&String> = self.secrets.keys().collect();
                    known.sort();
                    return Err(format!(
                        "secret '{id}' is not allowed for this task; allowed: {known:?}"
                    ));
                };
                let index = num(a, 1).and_then(|v| u32::try_from(v).ok());
                let lease = self.lease();
                let r = self.device(|mut d| async move {
                    d.type_text(TypeTextRequest {
                        lease,
                        text: secret,
                        index,
                        clear: true,
                        sensitive: true,
                    })
                    .await
                });
                // Whatever the device said, it must not carry the secret on.
                let r = r.map_err(|_| format!("typing secret '{id}' failed"))?;
                let redacted = ActionResult {
                    success: r.success,
                    action_taken: format!("typed secret '{id}'"),
                    method_used: r.method_used,
                    confidence: r.confidence,
                    error: r.error.map(|_| format!("typing secret '{id}' failed")),
                    duration_us: r.duration_us,
                    ..ActionResult::default()
                };
                Self::action(redacted)
            }
            "press_key" | "back" | "home" => {
                let name = match tool {
                    "press_key" => text(a, 0).to_ascii_lowercase(),
                    other => other.to_owned(),
                };
                let enum_name = format!(
                    "KEY_{}",
                    if name == "delete" {
                        "DEL".into()
                    } else {
                        name.to_ascii_uppercase()
                    }
                );
                let key = Key::from_str_name(&enum_name).ok_or_else(|| {
                    format!(
                        "unknown key '{name}'; expected one of {:?}",
                        agent_tools::KEYS
                    )
                })?;
                let lease = self.lease();
                Self::action(self.device(|mut d| async move {
                    d.press_key(PressKeyRequest {
                        lease,
                        key_spec: Some(press_key_request::KeySpec::Key(key as i32)),
                    })
                    .await
                })?)
            }
            "swipe" | "drag" => {
                let (start, end) = (point(a, 0, 1)?, point(a, 2, 3)?);
                let duration_ms = num(a, 4).and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
                let lease = self.lease();
                let r = if tool == "swipe" {
                    self.device(|mut d| async move {
                        d.swipe(SwipeRequest {
                            lease,
                            start: Some(start),
                            end: Some(end),
                            duration_ms,
                        })
                        .await
                    })?
                } else {
                    self.device(|mut d| async move {
                        d.drag(DragRequest {
                            lease,
                            start: Some(start),
                            end: Some(end),
                            duration_ms,
                        })
                        .await
                    })?
                };
                Self::action(r)
            }
            "open_app" => {
                let name = text(a, 0).trim().to_owned();
                if name.is_empty() {
                    return Err("open_app needs an app name or package".into());
                }
                let app = if name.contains('.') && !name.contains(' ') {
                    start_app_request::App::Package(name)
                } else {
                    start_app_request::App::Label(name)
                };
                let lease = self.lease();
                Self::action(self.device(|mut d| async move {
                    d.start_app(StartAppRequest {
                        lease,
                        app: Some(app),
                        activity: String::new(),
                    })
                    .await
                })?)
            }
            "list_packages" => {
                let serial = self.lease.serial.clone();
                let r = self.device(|mut d| async move {
                    d.list_packages(ListPackagesRequest {
                        serial,
                        include_system: false,
                    })
                    .await
                })?;
                let list: Vec<Value> = r
                    .packages
                    .iter()
                    .map(|p| json!({"package": p.package, "label": p.label}))
                    .collect();
                Ok((
                    ok_result(format!("listed {} packages", list.len())),
                    Value::Array(list),
                ))
            }
            "wait" => {
                let ms = num(a, 0).unwrap_or(0).clamp(0, 10_000);
                std::thread::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
                Ok((ok_result(format!("waited {ms} ms")), Value::Null))
            }
            "remember" => {
                let note = text(a, 0);
                self.signal(|s| s.memory.push(note.clone()));
                Ok((ok_result("remembered a note"), Value::Null))
            }
            "complete" => {
                let success = a.first().and_then(Value::as_bool).unwrap_or(false);
                let reason = text(a, 1);
                self.signal(|s| s.complete = Some((success, reason.clone())));
                Ok((
                    ok_result(format!("completed (success: {success})")),
                    Value::String("the task ends after this step".into()),
                ))
            }
            "request_human_help" => {
                let q = text(a, 0);
                self.signal(|s| s.help = Some(q.clone()));
                Ok((
                    ok_result("asked a human for help"),
                    Value::String("a human will answer before the next step".into()),
                ))
            }
            other => Err(format!(
                "tool `{other}` has no implementation in this executor"
            )),
        }
    }
}
