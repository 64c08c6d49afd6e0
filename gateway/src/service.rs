//! The public `droidmesh.v1.Gateway` service: checks requests, creates tasks, streams and
//! replays their events, and steers them.
use std::pin::Pin;
use std::sync::Arc;
use tracing::Instrument as _;

use droidmesh_proto::v1::gateway_server::Gateway;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, CancelTaskRequest, GetTaskRequest, Lease, ListDevicesRequest,
    ListDevicesResponse, ListTasksRequest, ListTasksResponse, Mode, SendMessageRequest,
    SendMessageResponse, SubmitTaskResponse, Task, TaskEvent, TaskRequest, TaskState,
    WatchTaskRequest, send_message_request, task_event,
};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::conversations::MAX_ID_CHARS;
use crate::direct::DirectDriver;
use crate::error::{GatewayError, PeerError};
use crate::reasoning::ReasoningDriver;
use crate::runner::{self, Deps};
use crate::store::{Control, Store, TaskEntry, is_final, now_ms};

pub type EventStream = Pin<Box<dyn Stream<Item = Result<TaskEvent, Status>> + Send>>;

pub struct GatewayService {
    deps: Deps,
    store: Arc<Store>,
}

impl GatewayService {
    pub fn new(deps: Deps) -> Self {
        Self {
            deps,
            store: Arc::default(),
        }
    }

    /// Checks a request; every refusal says what to fix.
    fn check(&self, req: &TaskRequest) -> Result<(), GatewayError> {
        let bad = |m: String| Err(GatewayError::InvalidRequest(m));
        if req.goal.trim().is_empty() {
            return bad("goal is empty: say what the agent should do, e.g. \"Open Settings and turn on Wi-Fi\"".into());
        }
        if let Some(n) = req.max_steps {
            let limit = self.deps.cfg.max_steps_limit;
            if n == 0 || n > limit {
                return bad(format!(
                    "max_steps must be between 1 and {limit}, got {n} (leave it unset for the default of {})",
                    self.deps.cfg.default_max_steps
                ));
            }
        }
        if let Some(schema) = &req.output_schema {
            check_schema(schema).map_err(GatewayError::InvalidRequest)?;
        }
        if req.conversation_id.chars().count() > MAX_ID_CHARS {
            return bad(format!(
                "conversation_id is {} characters long; at most {MAX_ID_CHARS} are accepted",
                req.conversation_id.chars().count()
            ));
        }
        match Mode::try_from(req.mode) {
            Ok(Mode::Direct | Mode::Unspecified | Mode::Reasoning) => Ok(()),
            Err(_) => bad(format!(
                "mode {} is not a known Mode (1 = MODE_DIRECT, 2 = MODE_REASONING)",
                req.mode
            )),
        }
    }

    /// Starts the task's run under the driver of its mode (checked by [`Self::check`]).
    fn spawn_run(
        &self,
        entry: Arc<TaskEntry>,
        req: TaskRequest,
        lease: Option<Lease>,
        control: mpsc::UnboundedReceiver<Control>,
    ) {
        // The task runs under its own span, a child of this RPC's span: every agent call it
        // makes (and the device calls those make) joins the caller's trace.
        let span = tracing::info_span!("task", task = %entry.id);
        let deps = self.deps.clone();
        if req.mode == Mode::Reasoning as i32 {
            let run = runner::run(ReasoningDriver, deps, entry, req, lease, control);
            tokio::spawn(run.instrument(span));
        } else {
            let run = runner::run(DirectDriver, deps, entry, req, lease, control);
            tokio::spawn(run.instrument(span));
        }
    }

    /// Creates the task: leases its device first unless it may wait for one, so a busy or
    /// unknown device is refused before anything exists.
    async fn create(&self, req: TaskRequest) -> Result<Arc<TaskEntry>, GatewayError> {
        self.check(&req)?;
        let id = format!("task-{}", uuid::Uuid::new_v4().simple());
        let lease = if req.wait_for_device {
            None
        } else {
            let mut device = self.deps.device.clone();
            let acquired = device
                .acquire_lease(AcquireLeaseRequest {
                    serial: req.device.clone(),
                    holder: id.clone(),
                    ttl_ms: self.deps.cfg.lease_ttl_ms,
                })
                .await;
            Some(
                acquired
                    .map_err(|s| GatewayError::from_lease(&s))?
                    .into_inner(),
            )
        };
        let now = now_ms();
        let task = Task {
            id: id.clone(),
            request: Some(req.clone()),
            state: TaskState::Pending as i32,
            device: lease.as_ref().map(|l| l.serial.clone()).unwrap_or_default(),
            created_at_ms: now,
            updated_at_ms: now,
            ..Task::default()
        };
        let (entry, control) = self.store.insert(task, self.deps.cfg.keep_finished_tasks);
        runner::set_state(&entry, TaskState::Pending, "created");
        tracing::info!(task = %id, goal_chars = req.goal.len(), "task created");
        self.spawn_run(entry.clone(), req, lease, control);
        Ok(entry)
    }

    fn entry(&self, id: &str) -> Result<Arc<TaskEntry>, GatewayError> {
        if id.trim().is_empty() {
            return Err(GatewayError::InvalidRequest("task_id is empty".into()));
        }
        self.store
            .get(id)
            .ok_or_else(|| GatewayError::TaskNotFound { id: id.to_owned() })
    }
}

/// Parses `schema` as JSON and checks it is a JSON Schema.
pub fn check_schema(schema: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_str(schema).map_err(|e| format!("output_schema is not JSON: {e}"))?;
    if !value.is_object() && !value.is_boolean() {
        return Err(
            "output_schema must be a JSON Schema object, e.g. {\"type\": \"object\", ...}".into(),
        );
    }
    jsonschema::validator_for(&value)
        .map(|_| ())
        .map_err(|e| format!("output_schema is not a valid JSON Schema: {e}"))
}

/// Streams a task's events from `from` (1-based): the log first, then live events, ending
/// after the completed event. When the client goes away and `cancel_on_drop` is set, the task
/// is cancelled.
fn watch(entry: Arc<TaskEntry>, from: u64, cancel_on_drop: bool) -> EventStream {
    let (tx, rx) = mpsc::channel::<Result<TaskEvent, Status>>(64);
    tokio::spawn(async move {
        let mut seq_rx = entry.subscribe();
        let mut next = from.max(1);
        loop {
            let batch = entry.events_from(next, 256);
            for ev in batch {
                next = ev.seq + 1;
                let done = matches!(ev.kind, Some(task_event::Kind::Completed(_)));
                if tx.send(Ok(ev)).await.is_err() {
                    if cancel_on_drop && !is_final(entry.state()) {
                        entry.control(Control::Cancel(
                            "the client that ran the task disconnected".into(),
                        ));
                    }
                    return;
                }
                if done {
                    return;
                }
            }
            if *seq_rx.borrow_and_update() >= next {
                continue;
            }
            tokio::select! {
                changed = seq_rx.changed() => if changed.is_err() { return },
                _ = tx.closed() => {
                    if cancel_on_drop && !is_final(entry.state()) {
                        entry.control(Control::Cancel("the client that ran the task disconnected".into()));
                    }
                    return;
                }
            }
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

#[tonic::async_trait]
impl Gateway for GatewayService {
    type RunTaskStream = EventStream;
    type WatchTaskStream = EventStream;

    async fn run_task(&self, r: Request<TaskRequest>) -> Result<Response<EventStream>, Status> {
        let entry = self.create(r.into_inner()).await?;
        Ok(Response::new(watch(entry, 1, true)))
    }

    async fn submit_task(
        &self,
        r: Request<TaskRequest>,
    ) -> Result<Response<SubmitTaskResponse>, Status> {
        let entry = self.create(r.into_inner()).await?;
        Ok(Response::new(SubmitTaskResponse {
            task_id: entry.id.clone(),
        }))
    }

    async fn get_task(&self, r: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        Ok(Response::new(
            self.entry(&r.into_inner().task_id)?.snapshot(),
        ))
    }

    async fn list_tasks(
        &self,
        r: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        let r = r.into_inner();
        let limit = if r.limit == 0 { 100 } else { r.limit as usize };
        let tasks = self
            .store
            .list()
            .into_iter()
            .map(|e| e.snapshot())
            .filter(|t| r.states.is_empty() || r.states.contains(&t.state))
            .take(limit)
            .collect();
        Ok(Response::new(ListTasksResponse { tasks }))
    }

    async fn cancel_task(&self, r: Request<CancelTaskRequest>) -> Result<Response<Task>, Status> {
        let r = r.into_inner();
        let entry = self.entry(&r.task_id)?;
        if !is_final(entry.state()) {
            let reason = if r.reason.trim().is_empty() {
                "cancelled by the user".to_owned()
            } else {
                r.reason
            };
            entry.control(Control::Cancel(reason));
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
        let r = r.into_inner();
        let entry = self.entry(&r.task_id)?;
        Ok(Response::new(watch(entry, r.from_seq, false)))
    }

    async fn send_message(
        &self,
        r: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let r = r.into_inner();
        let entry = self.entry(&r.task_id)?;
        let Some(kind) = r.kind else {
            return Err(GatewayError::InvalidRequest(
                "message is empty: set human_reply, change_goal, stop or note".into(),
            )
            .into());
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
            send_message_request::Kind::ChangeGoal(g) if g.trim().is_empty() => {
                return Err(GatewayError::InvalidRequest(
                    "change_goal is empty: give the new goal".into(),
                )
                .into());
            }
            send_message_request::Kind::ChangeGoal(g) => Control::ChangeGoal(g),
            send_message_request::Kind::Stop(reason) => Control::Stop(reason),
            send_message_request::Kind::Note(n) => Control::Note(n),
        };
        if entry.control(control) {
            reply(true, "delivered to the running task".into())
        } else {
            reply(false, "the task's run has ended".into())
        }
    }

    async fn list_devices(
        &self,
        r: Request<ListDevicesRequest>,
    ) -> Result<Response<ListDevicesResponse>, Status> {
        let mut device = self.deps.device.clone();
        device
            .list_devices(r.into_inner())
            .await
            .map_err(|s| GatewayError::Peer(PeerError::new("device", &s)).into())
    }
}

#[cfg(test)]
mod tests {
    use super::check_schema;

    #[test]
    fn schemas_are_checked_with_messages() {
        assert!(
            check_schema(r#"{"type":"object","properties":{"name":{"type":"string"}}}"#).is_ok()
        );
        assert!(check_schema("{not json").unwrap_err().contains("not JSON"));
        assert!(
            check_schema(r#"{"type": 12}"#)
                .unwrap_err()
                .contains("not a valid JSON Schema")
        );
        assert!(
            check_schema("[1,2]")
                .unwrap_err()
                .contains("must be a JSON Schema object")
        );
    }
}
