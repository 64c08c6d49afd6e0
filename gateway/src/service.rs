//! The public `droidmesh.v1.Gateway` service: checks requests, creates tasks, streams and
//! replays their events, lists them a page at a time, and steers them.
use std::sync::Arc;
use tracing::Instrument as _;

use droidmesh_proto::v1::gateway_server::Gateway;
use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, Lease, ListDevicesRequest, ListDevicesResponse,
    ListTasksRequest, ListTasksResponse, Mode, SendMessageRequest, SendMessageResponse,
    SubmitTaskResponse, Task, TaskRequest, TaskState, WatchTaskRequest, send_message_request,
};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use crate::auth::{Caller, Keys};
use crate::check;
use crate::deps::Deps;
use crate::direct::DirectDriver;
use crate::driver::{Driver, TaskCtx};
use crate::entry::{Control, Limits, Refused, TaskEntry};
use crate::error::{GatewayError, PeerError};
use crate::limits::Retention;
use crate::persist::Opened;
use crate::reasoning::ReasoningDriver;
use crate::record::{is_final, now_ms};
use crate::runner;
use crate::store::{Found, Store};
use crate::task_state::Ending;
use crate::watch::{EventStream, watch, watch_stored};
use crate::writer::durable;

/// Summaries in a ListTasks page when the request does not say.
const DEFAULT_PAGE: usize = 100;

/// Longest an RPC waits for the tasks of a stopped gateway to be recovered at start.
const RECOVERY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The driver of a task's mode.
enum ModeDriver {
    Direct(DirectDriver),
    Reasoning(ReasoningDriver),
}

impl Driver for ModeDriver {
    async fn drive(&self, ctx: TaskCtx<'_>) -> Ending {
        match self {
            ModeDriver::Direct(d) => d.drive(ctx).await,
            ModeDriver::Reasoning(d) => d.drive(ctx).await,
        }
    }
}

pub struct GatewayService {
    deps: Deps,
    store: Arc<Store>,
    /// True once the tasks a stopped gateway left unfinished are recovered.
    ready: tokio::sync::watch::Receiver<bool>,
    /// The API keys callers must send (none: every caller is the open tenant).
    keys: Keys,
    /// Per-tenant limits of this process.
    quotas: crate::quota::Quotas,
    /// Per-tenant model tokens per day.
    tokens: crate::quota::TokenBudget,
}

impl GatewayService {
    /// Keeps tasks in `store` (opened by the caller, [`crate::open_store`]; `None`: in memory
    /// only), recovers what a stopped gateway left unfinished there (in the background; RPCs
    /// wait for it) and starts its writer. Must be called within a Tokio runtime.
    pub fn new(mut deps: Deps, store: Option<Opened>) -> Result<Self, String> {
        let cfg = &deps.cfg;
        let retention = Retention {
            keep: cfg.keep_finished_tasks,
            keep_for_ms: cfg.keep_finished_for_ms,
        };
        let limits = Limits {
            max_events: cfg.max_events_per_task,
            max_event_bytes: cfg.max_event_bytes_per_task,
            max_queued: cfg.max_queued_messages,
        };
        let keys = Keys::new(&cfg.auth)?;
        let quotas = crate::quota::Quotas::new(
            cfg.auth.max_running_per_tenant,
            cfg.auth.tasks_per_minute_per_tenant,
        );
        let tokens = crate::quota::TokenBudget::new(cfg.auth.model_tokens_per_day_per_tenant);
        let (done, ready) = tokio::sync::watch::channel(false);
        let store = match store {
            None => {
                done.send_replace(true);
                Arc::new(Store::new(retention, limits))
            }
            Some(Opened { backend, owner }) => {
                durable(&deps.device, retention, limits, backend, owner, done)
            }
        };
        deps.store = Some(store.clone());
        Ok(Self {
            deps,
            store,
            ready,
            keys,
            quotas,
            tokens,
        })
    }

    /// Whether callers must send an API key (a keys file is configured).
    pub fn keys_required(&self) -> bool {
        self.keys.required()
    }

    /// The caller of a request: its key checked, or the open tenant without keys.
    fn caller<T>(&self, r: &Request<T>) -> Result<Caller, Status> {
        self.keys.caller(r.metadata()).map_err(Status::from)
    }

    /// Waits (bounded) until the tasks of a stopped gateway are recovered.
    async fn ready(&self) {
        let mut ready = self.ready.clone();
        let _ = tokio::time::timeout(RECOVERY_WAIT, ready.wait_for(|r| *r)).await;
    }

    /// Starts the task's run under the driver of its mode (checked by [`check::task_request`]);
    /// once the run is over the store makes the task compact and may forget it.
    fn spawn_run(
        &self,
        entry: Arc<TaskEntry>,
        req: TaskRequest,
        lease: Option<Lease>,
        control: mpsc::Receiver<Control>,
        allowed: Option<Vec<String>>,
        slot: crate::quota::Slot,
    ) {
        // The task runs under its own span, a child of this RPC's span: every agent call it
        // makes (and the device calls those make) joins the caller's trace.
        let serial = lease.as_ref().map_or("", |l| l.serial.as_str());
        droidmesh_runtime::trace_context::tag_call(&entry.id, serial, None);
        let span = task_span(&entry.id, &req, lease.as_ref());
        let deps = self.deps.clone();
        let store = self.store.clone();
        let e = entry.clone();
        let ended = move || {
            // The tenant's count of running tasks goes down when the run is over.
            drop(slot);
            let state = entry.state();
            if state != TaskState::Succeeded {
                let kind = state.as_str_name().trim_start_matches("TASK_STATE_");
                tracing::Span::current().record("error.type", kind.to_ascii_lowercase());
            }
            store.ended(&entry)
        };
        let driver = if req.mode == Mode::Reasoning as i32 {
            ModeDriver::Reasoning(ReasoningDriver)
        } else {
            ModeDriver::Direct(DirectDriver)
        };
        let run = runner::run(driver, deps, e, req, lease, control, allowed);
        tokio::spawn(
            async move {
                run.await;
                ended()
            }
            .instrument(span),
        );
    }

    /// Creates the task: leases its device first unless it may wait for one, so a busy or
    /// unknown device is refused before anything exists.
    async fn create(
        &self,
        caller: Caller,
        req: TaskRequest,
    ) -> Result<Arc<TaskEntry>, GatewayError> {
        check::task_request(&self.deps.cfg, &req)?;
        check::secret_ids(&caller, &req)?;
        if !req.device.is_empty() && !caller.may_use(&req.device) {
            return Err(GatewayError::PermissionDenied(format!(
                "device '{}' is not among the devices this API key may use; leave device empty \
                 to take a free one of them",
                crate::record::cut(&req.device, 100)
            )));
        }
        self.ready().await;
        self.tokens
            .check(&caller.tenant, &self.store, now_ms())
            .await?;
        let mut slot = self
            .quotas
            .admit(&caller.tenant)
            .map_err(GatewayError::OverLimit)?;
        // Time-ordered (UUIDv7: a millisecond clock, then 74 random bits): new ids land at
        // the end of the task store's id index instead of on a random page of it.
        let id = format!("task-{}", uuid::Uuid::now_v7().simple());
        let lease = if req.wait_for_device {
            None
        } else {
            let allowed = caller.devices.as_deref();
            match crate::queue::acquire(&self.deps, &req.device, &id, allowed).await {
                Ok(lease) => Some(lease),
                Err(s) if crate::busy::is_busy(&s) => {
                    let why =
                        crate::busy::refusal(&self.deps, &caller.tenant, &req.device, allowed, &s)
                            .await;
                    return Err(GatewayError::DeviceBusy(why));
                }
                Err(s) => return Err(GatewayError::from_lease(&self.deps.device_endpoint, &s)),
            }
        };
        let now = now_ms();
        let task = Task {
            id: id.clone(),
            request: Some(req.clone()),
            state: TaskState::Pending as i32,
            device: lease.as_ref().map(|l| l.serial.clone()).unwrap_or_default(),
            created_at_ms: now,
            updated_at_ms: now,
            tenant: caller.tenant,
            ..Task::default()
        };
        let (entry, control) = match self.store.create(task, self.quotas.limits()).await {
            Ok(created) => created,
            Err(e) => {
                if let Some(lease) = &lease {
                    let mut device = self.deps.device.clone();
                    let _ = device
                        .release_lease(droidmesh_proto::v1::ReleaseLeaseRequest {
                            lease: Some(crate::driver::lease_ref(lease)),
                        })
                        .await;
                }
                return Err(e);
            }
        };
        slot.created();
        crate::task_state::set_state(&entry, TaskState::Pending, "created");
        tracing::info!(task = %id, goal_bytes = req.goal.len(), "task created");
        self.spawn_run(entry.clone(), req, lease, control, caller.devices, slot);
        Ok(entry)
    }

    /// The caller's task with this id, in memory or in the task store; another tenant's task
    /// is not found, in the same words as an unknown id.
    async fn find(&self, caller: &Caller, id: &str) -> Result<Found, GatewayError> {
        if id.trim().is_empty() {
            return Err(GatewayError::InvalidRequest("task_id is empty".into()));
        }
        check::text("task_id", id, 200)?;
        self.ready().await;
        let found = self.store.find(id).await?.filter(|found| {
            caller.tenant
                == match found {
                    Found::Live(entry) => entry.tenant.as_str(),
                    Found::Stored(task) => task.tenant.as_str(),
                }
        });
        found.ok_or_else(|| GatewayError::TaskNotFound { id: id.to_owned() })
    }
}

/// The refusal to steer a task that is in the store but not run by this process.
fn not_here(task: &Task) -> GatewayError {
    GatewayError::Unsupported(format!(
        "task {} is not run by this gateway process, so it cannot be steered from here",
        task.id
    ))
}

/// The task's span: the whole mesh invoked as one agent, `invoke_agent droidmesh` (its agents'
/// invocations are its descendants). The device is recorded once leased when the task had to
/// wait for one; `error.type` is the final state of a task that did not succeed.
fn task_span(id: &str, req: &TaskRequest, lease: Option<&Lease>) -> tracing::Span {
    let conversation = Some(req.conversation_id.as_str()).filter(|c| !c.is_empty());
    let mode = if req.mode == Mode::Reasoning as i32 {
        "reasoning"
    } else {
        "direct"
    };
    tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent droidmesh",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "droidmesh",
        gen_ai.conversation.id = conversation,
        droidmesh.task.id = %id,
        droidmesh.device.serial = lease.map(|l| l.serial.as_str()),
        droidmesh.mode = mode,
        error.type = tracing::field::Empty,
    )
}

#[tonic::async_trait]
impl Gateway for GatewayService {
    type RunTaskStream = EventStream;
    type WatchTaskStream = EventStream;

    async fn run_task(&self, r: Request<TaskRequest>) -> Result<Response<EventStream>, Status> {
        let caller = self.caller(&r)?;
        let entry = self.create(caller, r.into_inner()).await?;
        Ok(Response::new(watch(entry, 1, true)?))
    }

    async fn submit_task(
        &self,
        r: Request<TaskRequest>,
    ) -> Result<Response<SubmitTaskResponse>, Status> {
        let caller = self.caller(&r)?;
        let entry = self.create(caller, r.into_inner()).await?;
        Ok(Response::new(SubmitTaskResponse {
            task_id: entry.id.clone(),
        }))
    }

    async fn get_task(&self, r: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        let caller = self.caller(&r)?;
        Ok(Response::new(
            match self.find(&caller, &r.into_inner().task_id).await? {
                Found::Live(entry) => entry.snapshot(),
                Found::Stored(task) => *task,
            },
        ))
    }

    async fn list_tasks(
        &self,
        r: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        let caller = self.caller(&r)?;
        let r = r.into_inner();
        check::states(&r.states)?;
        let size = match (r.page_size, r.limit) {
            (0, 0) => DEFAULT_PAGE,
            (0, limit) => limit as usize,
            (size, _) => size as usize,
        };
        self.ready().await;
        let (summaries, next_page_token) = self
            .store
            .page_any(&caller.tenant, &r.states, size, &r.page_token)
            .await?;
        #[allow(deprecated)]
        Ok(Response::new(ListTasksResponse {
            tasks: Vec::new(),
            summaries,
            next_page_token,
        }))
    }

    async fn cancel_task(&self, r: Request<CancelTaskRequest>) -> Result<Response<Task>, Status> {
        let caller = self.caller(&r)?;
        let r = r.into_inner();
        check::text("reason", &r.reason, self.deps.cfg.max_goal_bytes)?;
        let entry = match self.find(&caller, &r.task_id).await? {
            Found::Live(entry) => entry,
            Found::Stored(task) if is_final(task.state()) => return Ok(Response::new(*task)),
            Found::Stored(task) => return Err(not_here(&task).into()),
        };
        if !is_final(entry.state()) {
            let reason = if r.reason.trim().is_empty() {
                "cancelled by the user".to_owned()
            } else {
                r.reason
            };
            entry.cancel(reason);
            // Wait (bounded) for the run to record its ending so the reply shows it.
            let mut seq = entry.subscribe();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while !is_final(entry.state()) {
                    if seq.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
        Ok(Response::new(entry.snapshot()))
    }

    async fn watch_task(
        &self,
        r: Request<WatchTaskRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let caller = self.caller(&r)?;
        let r = r.into_inner();
        Ok(Response::new(
            match self.find(&caller, &r.task_id).await? {
                Found::Live(entry) => watch(entry, r.from_seq, false)?,
                Found::Stored(task) => match self.store.backend() {
                    Some((backend, _)) => watch_stored(backend.clone(), *task, r.from_seq).await?,
                    None => return Err(GatewayError::TaskNotFound { id: r.task_id }.into()),
                },
            },
        ))
    }

    async fn send_message(
        &self,
        r: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let caller = self.caller(&r)?;
        let r = r.into_inner();
        let found = self.find(&caller, &r.task_id).await?;
        let Some(kind) = r.kind else {
            return Err(GatewayError::InvalidRequest(
                "message is empty: set human_reply, change_goal, stop or note".into(),
            )
            .into());
        };
        let text = match &kind {
            send_message_request::Kind::HumanReply(t)
            | send_message_request::Kind::ChangeGoal(t)
            | send_message_request::Kind::Stop(t)
            | send_message_request::Kind::Note(t) => t,
        };
        check::text(message_field(&kind), text, self.deps.cfg.max_goal_bytes)?;
        if matches!(&kind, send_message_request::Kind::ChangeGoal(g) if g.trim().is_empty()) {
            return Err(GatewayError::InvalidRequest(
                "change_goal is empty: give the new goal".into(),
            )
            .into());
        }
        let entry = match found {
            Found::Live(entry) => entry,
            Found::Stored(task) if is_final(task.state()) => {
                return Ok(Response::new(SendMessageResponse {
                    accepted: false,
                    detail: format!(
                        "task {} has already ended ({})",
                        task.id,
                        task.state().as_str_name()
                    ),
                }));
            }
            Found::Stored(task) => return Err(not_here(&task).into()),
        };
        let state = entry.state();
        let reply = |accepted: bool, detail: String| {
            Ok(Response::new(SendMessageResponse { accepted, detail }))
        };
        if is_final(state) {
            return reply(
                false,
                format!(
                    "task {} has already ended ({})",
                    entry.id,
                    state.as_str_name()
                ),
            );
        }
        let control = match kind {
            send_message_request::Kind::HumanReply(t) => {
                if state != TaskState::WaitingForHuman {
                    return reply(
                        false,
                        "the task is not waiting for a human; send a note instead".into(),
                    );
                }
                Control::HumanReply(t)
            }
            send_message_request::Kind::ChangeGoal(g) => Control::NewGoal(g),
            send_message_request::Kind::Stop(reason) if state == TaskState::Pending => {
                // Not started (waiting for its device): nothing to let finish.
                entry.cancel(if reason.trim().is_empty() {
                    "stopped before it started".into()
                } else {
                    reason
                });
                return reply(true, "the task had not started; it is cancelled".into());
            }
            send_message_request::Kind::Stop(reason) => Control::Stop(reason),
            send_message_request::Kind::Note(n) => Control::Note(n),
        };
        match entry.control(control) {
            Ok(()) => reply(true, "delivered to the running task".into()),
            Err(Refused::Ended) => reply(false, "the task's run has ended".into()),
            Err(Refused::Full(n)) => Err(GatewayError::Full(format!(
                "task {} already has {n} messages waiting to be taken (gateway.max_queued_messages); send again once it has taken some",
                entry.id
            ))
            .into()),
        }
    }

    async fn list_devices(
        &self,
        r: Request<ListDevicesRequest>,
    ) -> Result<Response<ListDevicesResponse>, Status> {
        let caller = self.caller(&r)?;
        let mut device = self.deps.device.clone();
        let mut list = device.list_devices(r.into_inner()).await.map_err(|s| {
            Status::from(GatewayError::Peer(PeerError::call(
                "device",
                &self.deps.device_endpoint,
                &s,
            )))
        })?;
        let devices = &mut list.get_mut().devices;
        devices.retain(|d| caller.may_use(&d.serial));
        crate::busy::hide_foreign_holders(&self.deps, &caller.tenant, devices).await;
        Ok(list)
    }
}

/// The name of a message's field, for refusals.
fn message_field(kind: &send_message_request::Kind) -> &'static str {
    match kind {
        send_message_request::Kind::HumanReply(_) => "human_reply",
        send_message_request::Kind::ChangeGoal(_) => "change_goal",
        send_message_request::Kind::Stop(_) => "stop",
        send_message_request::Kind::Note(_) => "note",
    }
}
