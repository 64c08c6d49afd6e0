//! The gRPC `DeviceService`: requests in, leases checked, device work out, errors mapped.
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use droidmesh_proto::v1::device_service_server::{DeviceService, DeviceServiceServer};
use droidmesh_proto::v1::{
    AcquireLeaseRequest, ActionResult, AppPackage, ConnectDeviceRequest, DeviceInfo, DragRequest,
    GetStateRequest, Key, Lease, LeaseRef, ListDevicesRequest, ListDevicesResponse,
    ListPackagesRequest, ListPackagesResponse, LongPressRequest, PressKeyRequest,
    ReleaseLeaseRequest, ReleaseLeaseResponse, RenewLeaseRequest, Screenshot, StartAppRequest,
    SwipeRequest, TakeScreenshotRequest, TapRequest, TypeTextRequest, UiState, long_press_request,
    press_key_request, start_app_request, tap_request,
};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::actions::{self, App, Outcome, Target};
use crate::config::{DeviceConfig, parse_v4};
use crate::error::{DeviceError, Result};
use crate::input::keycode;
use crate::labels;
use crate::lease::{Clock, LeaseManager, SystemClock};
use crate::registry::{Registry, Slot};
use crate::state;
use crate::status::{MAX_SERIAL_SHOWN, record, tool_span};

/// The device service. Cheap to clone; all clones share devices and leases.
#[derive(Debug, Clone)]
pub struct DeviceServiceImpl {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    leases: LeaseManager,
    screenshot_max_side: u32,
    settle: crate::settle::SettleConfig,
    attach: crate::attach::AttachPolicy,
}

impl crate::metrics::LeaseCount for Inner {
    fn held(&self) -> usize {
        self.leases.held()
    }
}

/// Builds the tonic server for `cfg` (validated here).
pub fn device_service(cfg: DeviceConfig) -> Result<DeviceServiceServer<DeviceServiceImpl>> {
    Ok(DeviceServiceServer::new(DeviceServiceImpl::new(
        cfg,
        Arc::new(SystemClock),
    )?))
}

impl DeviceServiceImpl {
    /// A service over the devices of `cfg`, with leases timed by `clock`.
    pub fn new(cfg: DeviceConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        cfg.validate().map_err(DeviceError::Config)?;
        let server = if cfg.adb_server.is_empty() {
            None
        } else {
            parse_v4(&cfg.adb_server)
        };
        let direct: Vec<std::net::SocketAddr> = cfg
            .direct_devices
            .iter()
            .filter_map(|d| d.parse().ok())
            .collect();
        let key = (!cfg.adb_key_path.is_empty()).then(|| PathBuf::from(&cfg.adb_key_path));
        let masks = if cfg.state_dir.is_empty() {
            None
        } else {
            Some(Arc::new(crate::mask_store::MaskStore::open(
                std::path::Path::new(&cfg.state_dir),
            )?))
        };
        let service = Self {
            inner: Arc::new(Inner {
                registry: Registry::new(
                    server,
                    &direct,
                    Duration::from_millis(cfg.command_timeout_ms),
                    key,
                    cfg.ui_source,
                    masks,
                ),
                leases: LeaseManager::new(clock, cfg.lease_default_ttl_ms, cfg.lease_max_ttl_ms),
                screenshot_max_side: cfg.screenshot_max_side,
                settle: cfg.settle(),
                attach: crate::attach::AttachPolicy {
                    allowed: cfg.allow_connect,
                    floor: Duration::from_millis(cfg.command_timeout_ms),
                },
            }),
        };
        let weak: std::sync::Weak<dyn crate::metrics::LeaseCount> =
            Arc::downgrade(&service.inner) as _;
        crate::metrics::watch_leases(weak);
        Ok(service)
    }

    fn info(&self, slot: &Slot) -> DeviceInfo {
        let info = slot.info.lock().unwrap_or_else(|p| p.into_inner()).clone();
        DeviceInfo {
            serial: slot.adb.serial().to_owned(),
            state: info.state,
            transport: slot.transport as i32,
            model: info.model,
            product: info.product,
            lease: self.inner.leases.info(slot.adb.serial()),
        }
    }

    /// Resolves the device of a lease and checks the lease is the current one.
    async fn leased(&self, lease: Option<&LeaseRef>) -> Result<Arc<Slot>> {
        let lease = lease.ok_or_else(|| {
            DeviceError::InvalidArgument(
                "lease is required for actions: pass the LeaseRef from AcquireLease".into(),
            )
        })?;
        let slot = self.inner.registry.get(&lease.serial).await?;
        self.inner.leases.check(lease)?;
        Ok(slot)
    }

    fn max_side(&self, requested: u32) -> u32 {
        if requested == 0 {
            self.inner.screenshot_max_side
        } else {
            requested
        }
    }

    /// Runs one action: lease check, the action, timing, `ActionResult`, span.
    async fn act<F, Fut>(
        &self,
        tool: &'static str,
        lease: Option<&LeaseRef>,
        f: F,
    ) -> Result<Response<ActionResult>, Status>
    where
        F: FnOnce(Arc<Slot>) -> Fut,
        Fut: Future<Output = Result<Outcome>>,
    {
        let serial = lease.map(|l| l.serial.clone()).unwrap_or_default();
        let shown = crate::printable::printable(&serial, MAX_SERIAL_SHOWN);
        let span = tool_span(tool, &shown);
        // The gateway leases a task's device under the task's id.
        let mut task = String::new();
        if let Some(holder) = self.inner.leases.info(&serial).map(|l| l.holder)
            && holder.starts_with("task-")
        {
            span.record("droidmesh.task.id", holder.as_str());
            task = holder;
        }
        droidmesh_runtime::trace_context::tag_call(&task, &shown, None);
        async {
            let started = Instant::now();
            let slot = self.leased(lease).await?;
            slot.settle.forget();
            let mut out = f(slot.clone()).await?;
            let settle = &self.inner.settle;
            if settle.is_on() {
                // Wait for the UI the action caused, so the agent's next look is at a still
                // screen; say so when the wait gave up.
                let settled = crate::settle::settle(&slot, settle).await;
                let span = tracing::Span::current();
                span.record(
                    "droidmesh.settle.wait_ms",
                    u64::try_from(settled.waited.as_millis()).unwrap_or(u64::MAX),
                );
                span.record("droidmesh.settle.settled", settled.settled);
                if !settled.settled {
                    out.action_taken = format!(
                        "{}; the screen had not settled ({})",
                        out.action_taken, settled.reason
                    );
                }
                match &mut out.data {
                    serde_json::Value::Object(map) => {
                        map.insert("settle".into(), settled.to_json());
                    }
                    other => {
                        *other = serde_json::json!({ "result": other.take(), "settle": settled.to_json() });
                    }
                }
            }
            Ok(ActionResult {
                success: true,
                action_taken: out.action_taken,
                method_used: "adb".into(),
                confidence: out.confidence,
                data: Some(droidmesh_proto::json_to_struct(&out.data)),
                duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                ..ActionResult::default()
            })
        }
        .instrument(span.clone())
        .await
        .map(Response::new)
        .map_err(|e| record(&span, e))
    }

    /// Runs a read (no lease) inside its span with errors mapped.
    async fn read<T, Fut>(
        &self,
        tool: &'static str,
        serial: &str,
        fut: Fut,
    ) -> Result<Response<T>, Status>
    where
        Fut: Future<Output = Result<T>>,
    {
        let shown = crate::printable::printable(serial, MAX_SERIAL_SHOWN);
        let span = tool_span(tool, &shown);
        let holder = self.inner.leases.info(serial).map(|l| l.holder);
        let task = holder
            .filter(|h| h.starts_with("task-"))
            .unwrap_or_default();
        if !task.is_empty() {
            span.record("droidmesh.task.id", task.as_str());
        }
        droidmesh_runtime::trace_context::tag_call(&task, &shown, None);
        fut.instrument(span.clone())
            .await
            .map(Response::new)
            .map_err(|e| record(&span, e))
    }
}

fn target(index: Option<u32>, point: Option<droidmesh_proto::v1::Point>) -> Result<Target> {
    match (index, point) {
        (Some(i), _) => Ok(Target::Index(i)),
        (None, Some(p)) => Ok(Target::Point(p.x, p.y)),
        (None, None) => Err(DeviceError::InvalidArgument(
            "target is required: an element index or a point".into(),
        )),
    }
}

/// Refuses a renew or release that names no lease.
fn require_lease(given: bool) -> Result<(), DeviceError> {
    if given {
        Ok(())
    } else {
        Err(DeviceError::InvalidArgument(
            "lease is required: the serial and lease_id that AcquireLease returned".into(),
        ))
    }
}

#[tonic::async_trait]
impl DeviceService for DeviceServiceImpl {
    async fn list_devices(
        &self,
        _r: Request<ListDevicesRequest>,
    ) -> Result<Response<ListDevicesResponse>, Status> {
        self.read("list_devices", "", async {
            let slots = self.inner.registry.refresh().await?;
            // What is not known yet about a device (model and product when adb did not give
            // them, screen size, UI source) is asked, all devices at once; one that does not
            // answer is listed without model and product.
            let mut asks = tokio::task::JoinSet::new();
            for slot in slots.iter().filter(|s| crate::state::unlearned(s)) {
                let slot = slot.clone();
                asks.spawn(async move { crate::state::learn(&slot).await });
            }
            while asks.join_next().await.is_some() {}
            Ok(ListDevicesResponse {
                devices: slots.iter().map(|s| self.info(s)).collect(),
            })
        })
        .await
    }

    async fn connect_device(
        &self,
        r: Request<ConnectDeviceRequest>,
    ) -> Result<Response<DeviceInfo>, Status> {
        let r = r.into_inner();
        self.read("connect_device", &r.address, async {
            let slot = crate::attach::attach(&self.inner.registry, self.inner.attach, &r).await?;
            Ok(self.info(&slot))
        })
        .await
    }

    async fn acquire_lease(
        &self,
        r: Request<AcquireLeaseRequest>,
    ) -> Result<Response<Lease>, Status> {
        let r = r.into_inner();
        if r.holder.starts_with("task-") && crate::printable::check_holder(&r.holder).is_ok() {
            droidmesh_runtime::trace_context::tag_call(&r.holder, "", None);
        }
        self.read("acquire_lease", &r.serial, async {
            let known = self.inner.registry.usable_serials().await?;
            if !r.serial.is_empty() && !known.contains(&r.serial) {
                // Known but not usable (offline, unauthorized) is a different answer from unknown.
                if let Ok(slot) = self.inner.registry.get(&r.serial).await {
                    let state = slot
                        .info
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .state
                        .clone();
                    return Err(DeviceError::Unavailable {
                        serial: r.serial.clone(),
                        detail: format!("adb reports it as '{state}', not 'device'"),
                    });
                }
            }
            self.inner
                .leases
                .acquire(&r.serial, &r.holder, r.ttl_ms, &known)
        })
        .await
    }

    async fn renew_lease(&self, r: Request<RenewLeaseRequest>) -> Result<Response<Lease>, Status> {
        let r = r.into_inner();
        let given = r.lease.is_some();
        let lease = r.lease.unwrap_or_default();
        self.read("renew_lease", &lease.serial.clone(), async {
            require_lease(given)?;
            self.inner.leases.renew(&lease, r.ttl_ms)
        })
        .await
    }

    async fn release_lease(
        &self,
        r: Request<ReleaseLeaseRequest>,
    ) -> Result<Response<ReleaseLeaseResponse>, Status> {
        let lease = r.into_inner().lease;
        let given = lease.is_some();
        let lease = lease.unwrap_or_default();
        self.read("release_lease", &lease.serial.clone(), async {
            require_lease(given)?;
            Ok(ReleaseLeaseResponse {
                released: self.inner.leases.release(&lease)?,
            })
        })
        .await
    }

    async fn get_state(&self, r: Request<GetStateRequest>) -> Result<Response<UiState>, Status> {
        let r = r.into_inner();
        self.read("get_state", &r.serial, async {
            let slot = self.inner.registry.get(&r.serial).await?;
            let side = r
                .include_screenshot
                .then(|| self.max_side(r.screenshot_max_side));
            let lease = self.inner.leases.current_id(&r.serial);
            let masks = slot.secret_fields.for_read(&r.masks, lease.as_deref())?;
            state::read_state(&slot, side, &masks, lease.as_deref()).await
        })
        .await
    }

    async fn take_screenshot(
        &self,
        r: Request<TakeScreenshotRequest>,
    ) -> Result<Response<Screenshot>, Status> {
        let r = r.into_inner();
        self.read("take_screenshot", &r.serial, async {
            let slot = self.inner.registry.get(&r.serial).await?;
            let lease = self.inner.leases.current_id(&r.serial);
            let masks = slot.secret_fields.for_read(&r.masks, lease.as_deref())?;
            let side = self.max_side(r.max_side);
            state::take_screenshot(&slot, side, &masks, lease.as_deref()).await
        })
        .await
    }

    async fn list_packages(
        &self,
        r: Request<ListPackagesRequest>,
    ) -> Result<Response<ListPackagesResponse>, Status> {
        let r = r.into_inner();
        self.read("list_packages", &r.serial, async {
            let slot = self.inner.registry.get(&r.serial).await?;
            let (listed, system) = if r.include_system {
                tokio::try_join!(actions::packages(&slot, ""), actions::packages(&slot, "-s"))?
            } else {
                (actions::packages(&slot, "-3").await?, Vec::new())
            };
            Ok(ListPackagesResponse {
                packages: listed
                    .into_iter()
                    .map(|p| AppPackage {
                        label: labels::label_of(&p).unwrap_or_default().to_owned(),
                        system: system.contains(&p),
                        package: p,
                    })
                    .collect(),
            })
        })
        .await
    }

    async fn tap(&self, r: Request<TapRequest>) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        let (index, point) = match r.target {
            Some(tap_request::Target::Index(i)) => (Some(i), None),
            Some(tap_request::Target::Point(p)) => (None, Some(p)),
            None => (None, None),
        };
        self.act("tap", r.lease.as_ref(), |slot| async move {
            actions::tap(&slot, target(index, point)?).await
        })
        .await
    }

    async fn long_press(
        &self,
        r: Request<LongPressRequest>,
    ) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        let (index, point) = match r.target {
            Some(long_press_request::Target::Index(i)) => (Some(i), None),
            Some(long_press_request::Target::Point(p)) => (None, Some(p)),
            None => (None, None),
        };
        self.act("long_press", r.lease.as_ref(), |slot| async move {
            actions::long_press(&slot, target(index, point)?, r.duration_ms).await
        })
        .await
    }

    async fn swipe(&self, r: Request<SwipeRequest>) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        self.act("swipe", r.lease.as_ref(), |slot| async move {
            actions::swipe(&slot, r.start, r.end, r.duration_ms, false).await
        })
        .await
    }

    async fn drag(&self, r: Request<DragRequest>) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        self.act("drag", r.lease.as_ref(), |slot| async move {
            actions::swipe(&slot, r.start, r.end, r.duration_ms, true).await
        })
        .await
    }

    async fn type_text(
        &self,
        r: Request<TypeTextRequest>,
    ) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        let lease = r.lease.as_ref().map(|l| l.lease_id.clone());
        self.act("type_text", r.lease.as_ref(), |slot| async move {
            let typing = actions::Typing {
                text: &r.text,
                index: r.index,
                clear: r.clear,
                sensitive: r.sensitive,
                lease: lease.as_deref(),
            };
            actions::type_text(&slot, typing).await
        })
        .await
    }

    async fn press_key(
        &self,
        r: Request<PressKeyRequest>,
    ) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        self.act("press_key", r.lease.as_ref(), |slot| async move {
            let (code, name) = match r.key_spec {
                Some(press_key_request::KeySpec::Key(k)) => {
                    let key = Key::try_from(k).unwrap_or(Key::Unspecified);
                    let code = keycode(key).ok_or_else(|| {
                        DeviceError::InvalidArgument(format!(
                            "key {k} is not a known Key; use keycode for raw codes"
                        ))
                    })?;
                    (
                        code,
                        key.as_str_name().trim_start_matches("KEY_").to_owned(),
                    )
                }
                Some(press_key_request::KeySpec::Keycode(c)) if (1..=400).contains(&c) => {
                    (c, format!("keycode {c}"))
                }
                Some(press_key_request::KeySpec::Keycode(c)) => {
                    return Err(DeviceError::InvalidArgument(format!(
                        "keycode must be an Android KEYCODE_* value between 1 and 400, got {c}"
                    )));
                }
                None => {
                    return Err(DeviceError::InvalidArgument(
                        "key or keycode is required".into(),
                    ));
                }
            };
            actions::press_key(&slot, code, &name).await
        })
        .await
    }

    async fn start_app(
        &self,
        r: Request<StartAppRequest>,
    ) -> Result<Response<ActionResult>, Status> {
        let r = r.into_inner();
        self.act("start_app", r.lease.as_ref(), |slot| async move {
            let app = match &r.app {
                Some(start_app_request::App::Package(p)) => App::Package(p),
                Some(start_app_request::App::Label(l)) => App::Label(l),
                None => {
                    return Err(DeviceError::InvalidArgument(
                        "package or label is required".into(),
                    ));
                }
            };
            actions::start_app(&slot, app, &r.activity).await
        })
        .await
    }
}
