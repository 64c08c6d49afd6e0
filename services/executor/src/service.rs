//! `droidmesh.v1.ExecutorService`: `RunCodeAct` holds one task's JavaScript session for the
//! length of the call and streams its events; later input messages steer it. `ExecuteSubgoal`
//! performs one subgoal under an `invoke_agent executor` span, so its device calls join the
//! caller's trace. Request errors become statuses through `From<ExecutorError> for Status` only.
use std::pin::Pin;
use std::sync::Arc;
use tracing::Instrument as _;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::executor_service_server::ExecutorService;
use droidmesh_proto::v1::{
    AgentEvent, CheckSecretsRequest, CheckSecretsResponse, CodeActInput, DeviceBinding,
    ExecuteSubgoalRequest, ExecuteSubgoalResponse, LeaseRef, code_act_input,
};
use droidmesh_runtime::device::{DeviceClients, DeviceLink, DialError};
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use droidmesh_agent::steer::Steer;

use crate::codeact::Run;
use crate::config::ExecutorConfig;
use crate::error::ExecutorError;
use crate::subgoal::execute_subgoal;

/// Steering messages waiting for the run to take them.
const STEER_QUEUE: usize = 32;
/// Longest wait for a CodeAct stream's `start` message.
const START_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Most steps one CodeAct run may ask for (each is a model call).
pub const MAX_STEPS_CEILING: u32 = 10_000;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<AgentEvent, Status>> + Send>>;

pub struct Executor {
    pub(crate) cfg: ExecutorConfig,
    pub(crate) llm: LlmClient,
    pub(crate) prompts: Arc<PromptSet>,
    /// Every secret this executor holds ([`crate::secrets`]).
    pub(crate) secrets: crate::secrets::Secrets,
    /// The device services tasks may name (the default, used when a binding names none, and
    /// `executor.device_endpoints`), a channel to each reused across calls (bounded).
    pub(crate) devices: Arc<DeviceClients>,
    /// Runs preparing a model call, ahead of background work (see [`crate::foreground`]).
    pub(crate) foreground: Arc<crate::foreground::Foreground>,
    /// Starts let in a few at a time (see [`crate::admission`]).
    pub(crate) admission: Arc<crate::admission::StartAdmission>,
    /// The app cards CodeAct steps get ([`droidmesh_app_cards`]).
    pub(crate) cards: droidmesh_app_cards::AppCards,
    /// The operator's tools ([`crate::custom_tools`]).
    pub(crate) custom: crate::custom_tools::CustomTools,
}

#[tonic::async_trait]
impl ExecutorService for Executor {
    type RunCodeActStream = EventStream;

    async fn run_code_act(
        &self,
        r: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<EventStream>, Status> {
        self.start_code_act(r.into_inner())
            .await
            .map_err(Status::from)
    }

    async fn execute_subgoal(
        &self,
        r: Request<ExecuteSubgoalRequest>,
    ) -> Result<Response<ExecuteSubgoalResponse>, Status> {
        let req = r.into_inner();
        // Under the RPC's span, so the device calls join the caller's trace.
        let serial = req
            .device
            .as_ref()
            .and_then(|d| d.lease.as_ref())
            .map(|l| l.serial.clone())
            .unwrap_or_default();
        let step = (req.step > 0).then_some(req.step);
        droidmesh_runtime::trace_context::tag_call(&req.task_id, &serial, step);
        let span = crate::spans::invoke_agent(&req.task_id, &serial);
        if let Some(step) = step {
            span.record("droidmesh.step", step);
        }
        let done = execute_subgoal(self, req).instrument(span.clone()).await;
        match &done {
            Err(_) => crate::spans::failed(&span, "rpc_error"),
            Ok(r) if !r.result.as_ref().is_some_and(|r| r.success) => {
                crate::spans::failed(&span, "subgoal_failed");
            }
            Ok(_) => {}
        }
        done.map(Response::new).map_err(Status::from)
    }

    async fn check_secrets(
        &self,
        r: Request<CheckSecretsRequest>,
    ) -> Result<Response<CheckSecretsResponse>, Status> {
        // The values are looked up as a run's start would, and dropped here.
        self.secrets
            .for_request(&r.into_inner().secret_ids)
            .map(|_| Response::new(CheckSecretsResponse {}))
            .map_err(Status::from)
    }
}

impl Executor {
    /// The device service client for a task's binding, checking that it carries a lease.
    pub(crate) fn device_for(
        &self,
        binding: Option<&DeviceBinding>,
    ) -> Result<(DeviceLink, LeaseRef), ExecutorError> {
        let binding = binding.cloned().unwrap_or_default();
        let lease = binding
            .lease
            .filter(|l| !l.serial.is_empty() && !l.lease_id.is_empty())
            .ok_or_else(|| {
                ExecutorError::InvalidRequest(
                    "device.lease is required: the gateway leases the device first".into(),
                )
            })?;
        // Only a device service this executor is configured with is ever dialled, in its
        // configured spelling: the request's endpoint only chooses among them.
        let link = self.devices.link(&binding.endpoint).map_err(|e| {
            let endpoint = match &e {
                DialError::Channel { endpoint, .. } => endpoint.clone(),
                _ => binding.endpoint.trim().to_owned(),
            };
            ExecutorError::DeviceEndpoint {
                endpoint,
                detail: e.to_string(),
            }
        })?;
        Ok((link, lease))
    }

    async fn start_code_act(
        &self,
        mut input: Streaming<CodeActInput>,
    ) -> Result<Response<EventStream>, ExecutorError> {
        let first = tokio::time::timeout(START_WAIT, input.next())
            .await
            .map_err(|_| {
                ExecutorError::InvalidRequest(format!(
                    "no `start` message within {} s of opening the stream",
                    START_WAIT.as_secs()
                ))
            })?;
        let start = match first {
            Some(Ok(CodeActInput {
                kind: Some(code_act_input::Kind::Start(s)),
            })) => s,
            Some(Ok(_)) => {
                return Err(ExecutorError::InvalidRequest(
                    "the first message must be `start`".into(),
                ));
            }
            Some(Err(s)) => return Err(ExecutorError::Client(s)),
            None => {
                return Err(ExecutorError::InvalidRequest(
                    "the input stream closed before `start`".into(),
                ));
            }
        };
        let serial = start
            .device
            .as_ref()
            .and_then(|d| d.lease.as_ref())
            .map_or("", |l| l.serial.as_str());
        droidmesh_runtime::trace_context::tag_call(&start.task_id, serial, None);
        if start.goal.trim().is_empty() {
            return Err(ExecutorError::InvalidRequest("goal is empty".into()));
        }
        if start.max_steps > MAX_STEPS_CEILING {
            return Err(ExecutorError::InvalidRequest(format!(
                "max_steps must be at most {MAX_STEPS_CEILING}, got {}",
                start.max_steps
            )));
        }
        let secrets = self.secrets.for_request(&start.secret_ids)?;
        let (device, lease) = self.device_for(start.device.as_ref())?;
        let (tx, rx) = mpsc::channel(64);
        // Steering messages: forwarded until the gateway closes its side. A full queue holds
        // the reader back, and HTTP/2 flow control the gateway.
        let (steer_tx, steer_rx) = mpsc::channel(STEER_QUEUE);
        tokio::spawn(async move {
            while let Some(Ok(msg)) = input.next().await {
                let Some(steer) = msg.kind.and_then(Steer::from_input) else {
                    continue;
                };
                if steer_tx.send(steer).await.is_err() {
                    break;
                }
            }
        });
        let task = start.task_id.clone();
        let run = Run {
            cfg: self.cfg.clone(),
            llm: self.llm.clone(),
            prompts: self.prompts.clone(),
            device,
            start,
            events: tx,
            steer: steer_rx,
            secrets,
            foreground: self.foreground.clone(),
            admission: self.admission.clone(),
            cards: self.cards.clone(),
            custom: self.custom.clone(),
        };
        tracing::info!(%task, "codeact run started");
        // The run keeps this RPC's trace: its device calls are children of the gateway's task.
        let span = crate::spans::invoke_agent(&task, &lease.serial);
        tokio::spawn(run.run().instrument(span));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
