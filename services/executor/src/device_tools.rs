//! The device tools' implementations: one async dispatcher with a handler per
//! [`Tool`], calling the device service under the task's lease.
//!
//! It is the one registry both modes use: CodeAct reaches it from the sandbox's thread through
//! [`crate::sandbox_tools`], `ExecuteSubgoal` awaits it directly. The `match` over `Tool` is
//! exhaustive, so a tool added to the agent crate's table without a handler does not compile.
//! Arguments arrive checked against the table (by the sandbox or by
//! `ToolSpec::args_in_order`): one JSON value per parameter, `null` for an omitted optional one.
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use droidmesh_agent::steer::MEMORY_KEPT;
use droidmesh_agent::tools::{KEYS, Tool};
use droidmesh_proto::v1::{
    ActionResult, Bounds, DragRequest, Key, LeaseRef, ListPackagesRequest, LongPressRequest,
    MaskedField, Point, PressKeyRequest, SecretMask, StartAppRequest, SwipeRequest, TapRequest,
    TypeTextRequest, long_press_request, press_key_request, start_app_request, tap_request,
};

use droidmesh_runtime::device::DeviceLink;
use serde_json::{Value, json};
use tonic::Status;

/// The longest `wait` a tool call may ask for.
pub const MAX_WAIT_MS: i64 = 10_000;

/// What a script asked for besides device actions, read by the CodeAct loop after each step.
#[derive(Debug, Default, Clone)]
pub struct Signals {
    pub complete: Option<(bool, String)>,
    /// A request for a person: the reason, and instructions (may be empty).
    pub help: Option<(String, String)>,
    pub memory: Vec<String>,
}

/// The outcome of one tool: the result to report and the value the caller gets back.
pub type Done = Result<(ActionResult, Value), String>;

/// Everything a tool call needs: the device service, the task's lease and secrets.
pub struct ToolCtx {
    device: DeviceLink,
    lease: LeaseRef,
    /// Allowed secret ids and their values (values leave this struct only for the device
    /// service: typed, or sent with each read to be masked).
    secrets: HashMap<String, String>,
    /// The field each secret id was typed into, as the device service named it.
    typed: Mutex<HashMap<String, MaskedField>>,
    /// `method_used` of the results the executor makes itself ("codeact", "executor").
    agent: &'static str,
    signals: Mutex<Signals>,
}

impl ToolCtx {
    pub fn new(
        device: DeviceLink,
        lease: LeaseRef,
        secrets: HashMap<String, String>,
        agent: &'static str,
    ) -> Self {
        Self {
            device,
            lease,
            secrets,
            typed: Mutex::default(),
            agent,
            signals: Mutex::default(),
        }
    }

    /// What every read of the device sends to be masked: each secret the task may type, with
    /// the field it went into once typed (so a restarted device service masks it as its
    /// field's), those typed first, at most [`MAX_READ_MASKS`].
    pub fn masks(&self) -> Vec<SecretMask> {
        let typed = self.typed.lock().unwrap_or_else(|p| p.into_inner());
        let mut masks: Vec<SecretMask> = self
            .secrets
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(id, v)| SecretMask {
                secret: v.clone(),
                field: typed.get(id).cloned(),
            })
            .collect();
        masks.sort_by_key(|m| m.field.is_none());
        masks.truncate(MAX_READ_MASKS);
        masks
    }

    /// The leased device's serial.
    pub fn serial(&self) -> &str {
        &self.lease.serial
    }

    /// The signals gathered since the last call, leaving none behind.
    pub fn take_signals(&self) -> Signals {
        std::mem::take(&mut *self.signals.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn signal(&self, f: impl FnOnce(&mut Signals)) {
        f(&mut self.signals.lock().unwrap_or_else(|p| p.into_inner()));
    }

    fn ok(&self, action: impl Into<String>) -> ActionResult {
        ActionResult {
            success: true,
            action_taken: action.into(),
            method_used: self.agent.into(),
            confidence: 1.0,
            ..ActionResult::default()
        }
    }

    /// Runs one tool. Must be awaited on the runtime (directly, or through
    /// `Handle::block_on` from a thread that is not a runtime thread).
    pub async fn dispatch(&self, tool: Tool, a: &[Value]) -> Done {
        match tool {
            Tool::Tap => {
                let index = u32_arg(a, 0, "index")?;
                self.tap(tap_request::Target::Index(index)).await
            }
            Tool::TapAt => self.tap(tap_request::Target::Point(point(a, 0, 1)?)).await,
            Tool::LongPress => {
                let target = Some(long_press_request::Target::Index(u32_arg(a, 0, "index")?));
                let lease = self.lease();
                action(
                    self.device(|mut d| async move {
                        d.long_press(LongPressRequest {
                            lease,
                            target,
                            duration_ms: 0,
                        })
                        .await
                    })
                    .await?,
                )
            }
            Tool::TypeText => {
                let (text, index) = (text(a, 0), opt_u32(a, 1));
                let clear = a.get(2).and_then(Value::as_bool).unwrap_or(false);
                let lease = self.lease();
                action(
                    self.device(|mut d| async move {
                        d.type_text(TypeTextRequest {
                            lease,
                            text,
                            index,
                            clear,
                            sensitive: false,
                        })
                        .await
                    })
                    .await?,
                )
            }
            Tool::TypeSecret => self.type_secret(&text(a, 0), opt_u32(a, 1)).await,
            Tool::PressKey => self.press_key(&text(a, 0).to_ascii_lowercase()).await,
            Tool::Back => self.press_key("back").await,
            Tool::Home => self.press_key("home").await,
            Tool::Swipe | Tool::Drag => {
                let (start, end) = (Some(point(a, 0, 1)?), Some(point(a, 2, 3)?));
                let duration_ms = opt_u32(a, 4).unwrap_or(0);
                let lease = self.lease();
                let r = if tool == Tool::Swipe {
                    self.device(|mut d| async move {
                        d.swipe(SwipeRequest {
                            lease,
                            start,
                            end,
                            duration_ms,
                        })
                        .await
                    })
                    .await?
                } else {
                    self.device(|mut d| async move {
                        d.drag(DragRequest {
                            lease,
                            start,
                            end,
                            duration_ms,
                        })
                        .await
                    })
                    .await?
                };
                action(r)
            }
            Tool::OpenApp => self.open_app(text(a, 0).trim()).await,
            Tool::ListPackages => self.list_packages().await,
            Tool::Wait => {
                let ms = num(a, 0).unwrap_or(0).clamp(0, MAX_WAIT_MS);
                tokio::time::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).await;
                Ok((self.ok(format!("waited {ms} ms")), Value::Null))
            }
            Tool::Remember => {
                let note = text(a, 0);
                // A step's notes beyond what the memory keeps would only be dropped after it.
                self.signal(|s| {
                    s.memory.push(note);
                    let over = s.memory.len().saturating_sub(MEMORY_KEPT);
                    s.memory.drain(..over);
                });
                Ok((self.ok("remembered a note"), Value::Null))
            }
            Tool::Complete => {
                let success = a.first().and_then(Value::as_bool).unwrap_or(false);
                let reason = text(a, 1);
                self.signal(|s| s.complete = Some((success, reason)));
                Ok((
                    self.ok(format!("completed (success: {success})")),
                    Value::String("the task ends after this step".into()),
                ))
            }
            Tool::RequestHumanHelp => {
                let (reason, instructions) = (text(a, 0), text(a, 1));
                self.signal(|s| s.help = Some((reason, instructions)));
                Ok((
                    self.ok("asked a human for help"),
                    Value::String("a human will answer before the next step".into()),
                ))
            }
        }
    }

    /// Runs a device RPC; a refusal becomes the device service's message, a failed connection
    /// a sentence naming the device service.
    async fn device<T, F, Fut>(&self, f: F) -> Result<T, String>
    where
        F: FnOnce(
            droidmesh_proto::v1::device_service_client::DeviceServiceClient<
                droidmesh_runtime::TracedChannel,
            >,
        ) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        match f(self.device.client()).await {
            Ok(r) => Ok(r.into_inner()),
            Err(s) => Err(self.device.describe(&s).await),
        }
    }

    fn lease(&self) -> Option<LeaseRef> {
        Some(self.lease.clone())
    }

    async fn tap(&self, target: tap_request::Target) -> Done {
        let lease = self.lease();
        action(
            self.device(|mut d| async move {
                d.tap(TapRequest {
                    lease,
                    target: Some(target),
                })
                .await
            })
            .await?,
        )
    }

    async fn press_key(&self, name: &str) -> Done {
        let enum_name = match name {
            "delete" => "KEY_DEL".to_owned(),
            other => format!("KEY_{}", other.to_ascii_uppercase()),
        };
        let key = Key::from_str_name(&enum_name)
            .ok_or_else(|| format!("unknown key '{name}'; expected one of {KEYS:?}"))?;
        let lease = self.lease();
        action(
            self.device(|mut d| async move {
                d.press_key(PressKeyRequest {
                    lease,
                    key_spec: Some(press_key_request::KeySpec::Key(key as i32)),
                })
                .await
            })
            .await?,
        )
    }

    async fn type_secret(&self, id: &str, index: Option<u32>) -> Done {
        let found = self.secrets.get(id).or_else(|| {
            self.secrets
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(id))
                .map(|(_, v)| v)
        });
        let key = self
            .secrets
            .keys()
            .find(|k| k.as_str() == id || k.eq_ignore_ascii_case(id))
            .cloned();
        let Some(secret) = found.cloned() else {
            let mut known: Vec<&String> = self.secrets.keys().collect();
            known.sort();
            return Err(format!(
                "secret '{id}' is not allowed for this task; allowed: {known:?}"
            ));
        };
        let lease = self.lease();
        let r = self
            .device(|mut d| async move {
                d.type_text(TypeTextRequest {
                    lease,
                    text: secret,
                    index,
                    clear: true,
                    sensitive: true,
                })
                .await
            })
            .await;
        // Whatever the device said, it must not carry the secret on.
        let r = r.map_err(|_| format!("typing secret '{id}' failed"))?;
        let data = r.data.as_ref().map(droidmesh_proto::struct_to_json);
        if let (Some(key), Some(field)) = (key, data.as_ref().and_then(typed_field)) {
            self.typed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, field);
        }
        action(ActionResult {
            success: r.success,
            action_taken: format!("typed secret '{id}'"),
            method_used: r.method_used,
            confidence: r.confidence,
            error: r.error.map(|_| format!("typing secret '{id}' failed")),
            duration_us: r.duration_us,
            ..ActionResult::default()
        })
    }

    async fn open_app(&self, name: &str) -> Done {
        if name.is_empty() {
            return Err("open_app needs an app name or package".into());
        }
        let app = if name.contains('.') && !name.contains(' ') {
            start_app_request::App::Package(name.to_owned())
        } else {
            start_app_request::App::Label(name.to_owned())
        };
        let lease = self.lease();
        action(
            self.device(|mut d| async move {
                d.start_app(StartAppRequest {
                    lease,
                    app: Some(app),
                    activity: String::new(),
                })
                .await
            })
            .await?,
        )
    }

    async fn list_packages(&self) -> Done {
        let serial = self.lease.serial.clone();
        let r = self
            .device(|mut d| async move {
                d.list_packages(ListPackagesRequest {
                    serial,
                    include_system: false,
                })
                .await
            })
            .await?;
        let list: Vec<Value> = r
            .packages
            .iter()
            .map(|p| json!({"package": p.package, "label": p.label}))
            .collect();
        Ok((
            self.ok(format!("listed {} packages", list.len())),
            Value::Array(list),
        ))
    }
}

/// Secrets one read may send to be masked (the device service's bound).
pub const MAX_READ_MASKS: usize = 64;

/// The field a sensitive `TypeText` answer names (`data.field`).
fn typed_field(data: &Value) -> Option<MaskedField> {
    let f = data.get("field")?;
    let n = |k: &str| f["bounds"][k].as_f64().map(|v| v as i32);
    Some(MaskedField {
        resource_id: f.get("resource_id")?.as_str()?.to_owned(),
        class_name: f.get("class_name")?.as_str()?.to_owned(),
        bounds: Some(Bounds {
            left: n("left")?,
            top: n("top")?,
            right: n("right")?,
            bottom: n("bottom")?,
        }),
    })
}

/// A device action's result; the caller gets its summary.
fn action(r: ActionResult) -> Done {
    let v = Value::String(r.action_taken.clone());
    Ok((r, v))
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

/// An optional whole-number argument; omitted or out of range is `None`.
fn opt_u32(args: &[Value], i: usize) -> Option<u32> {
    num(args, i).and_then(|v| u32::try_from(v).ok())
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
