//! Scripted agents for reasoning-mode tests: a manager, an executor, a scripter and a text
//! manipulator that answer from per-test queues and record every request they receive, each a
//! real gRPC server on loopback.
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::executor_service_server::{ExecutorService, ExecutorServiceServer};
use droidmesh_proto::v1::manager_service_server::{ManagerService, ManagerServiceServer};
use droidmesh_proto::v1::scripter_service_server::{ScripterService, ScripterServiceServer};
use droidmesh_proto::v1::text_manipulator_service_server::{
    TextManipulatorService, TextManipulatorServiceServer,
};
use droidmesh_proto::v1::{
    Accomplished, ActionResult, AgentEvent, AgentFinished, CodeActInput, ExecuteSubgoalRequest,
    ExecuteSubgoalResponse, GetStateRequest, HumanHelpRequest, ManipulateRequest,
    ManipulateResponse, PlanRequest, PlanResponse, RunScriptRequest, StepStarted,
    StructureOutputRequest, StructureOutputResponse, Subgoal, TapRequest, TokenUsage, UsageReport,
    agent_event, subgoal::Kind, tap_request,
};
use tokio::sync::Notify;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

/// What the scripted executor does with a subgoal.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Act {
    /// Taps the element with this text on the task's device, under the task's lease.
    TapText(String),
    /// Answers this result without touching the device.
    Result(ActionResult),
    /// Waits until `Minds::release` is notified, then answers this result.
    Hold(ActionResult),
}

/// What the scripted scripter does.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Script {
    /// Streams a step and finishes with this result and answer.
    Finish(ActionResult, String),
    /// Sends a step, then breaks the stream with UNAVAILABLE (a process killed mid-run).
    Die,
}

#[derive(Default)]
pub struct Minds {
    pub plans: Mutex<VecDeque<PlanResponse>>,
    /// Answered when `plans` is empty (None: an INTERNAL error).
    pub plan_fallback: Mutex<Option<PlanResponse>>,
    pub plan_requests: Mutex<Vec<PlanRequest>>,
    pub acts: Mutex<VecDeque<Act>>,
    pub act_requests: Mutex<Vec<ExecuteSubgoalRequest>>,
    pub scripts: Mutex<VecDeque<Script>>,
    pub script_requests: Mutex<Vec<RunScriptRequest>>,
    /// The affinity key (`droidmesh-affinity` metadata) of each script request.
    pub script_affinity: Mutex<Vec<Option<String>>>,
    pub texts: Mutex<VecDeque<ManipulateResponse>>,
    pub text_requests: Mutex<Vec<ManipulateRequest>>,
    /// Releases executor calls that hold.
    pub release: Notify,
    /// The secret ids (lower case) the scripted executor holds, and every CheckSecrets asked.
    pub held_secrets: Mutex<Vec<String>>,
    pub secret_checks: Mutex<Vec<Vec<String>>>,
    /// CheckSecrets never answers (an executor that hangs).
    pub secret_checks_hang: Mutex<bool>,
}

impl Minds {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub fn plan(&self, p: PlanResponse) {
        self.plans.lock().unwrap().push_back(p);
    }
    pub fn act(&self, a: Act) {
        self.acts.lock().unwrap().push_back(a);
    }
    pub fn script(&self, s: Script) {
        self.scripts.lock().unwrap().push_back(s);
    }
    pub fn text(&self, t: ManipulateResponse) {
        self.texts.lock().unwrap().push_back(t);
    }
    pub fn plan_requests(&self) -> Vec<PlanRequest> {
        self.plan_requests.lock().unwrap().clone()
    }
    pub fn act_requests(&self) -> Vec<ExecuteSubgoalRequest> {
        self.act_requests.lock().unwrap().clone()
    }
}

fn usage(agent: &str) -> UsageReport {
    UsageReport {
        agent: agent.into(),
        model: "scripted".into(),
        usage: Some(TokenUsage {
            input_tokens: 50,
            output_tokens: 5,
            cached_input_tokens: 0,
            calls: 1,
        }),
        ..UsageReport::default()
    }
}

/// A plan whose subgoals are `(kind, text)`.
pub fn plan(items: &[(Kind, &str)]) -> PlanResponse {
    PlanResponse {
        thought: "next".into(),
        subgoals: items
            .iter()
            .enumerate()
            .map(|(i, (k, t))| Subgoal {
                number: i as u32 + 1,
                kind: *k as i32,
                text: (*t).into(),
            })
            .collect(),
        plan_text: items
            .iter()
            .enumerate()
            .map(|(i, (_, t))| format!("{}. {t}", i + 1))
            .collect::<Vec<_>>()
            .join("\n"),
        usage: Some(usage("manager")),
        ..PlanResponse::default()
    }
}

pub fn accomplished(success: bool, answer: &str) -> PlanResponse {
    PlanResponse {
        thought: "done".into(),
        accomplished: Some(Accomplished {
            success,
            answer: answer.into(),
        }),
        usage: Some(usage("manager")),
        ..PlanResponse::default()
    }
}

pub fn unusable() -> PlanResponse {
    PlanResponse {
        parse_warnings: vec!["expected a <plan> or <request_accomplished>, found no tags".into()],
        usage: Some(usage("manager")),
        ..PlanResponse::default()
    }
}

pub fn ok(action: &str) -> ActionResult {
    ActionResult {
        success: true,
        action_taken: action.into(),
        method_used: "scripted".into(),
        confidence: 1.0,
        ..ActionResult::default()
    }
}

pub fn fail(error: &str) -> ActionResult {
    ActionResult {
        success: false,
        action_taken: "nothing".into(),
        method_used: "scripted".into(),
        error: Some(error.into()),
        ..ActionResult::default()
    }
}

pub fn human(reason: &str) -> PlanResponse {
    PlanResponse {
        thought: "a person must help".into(),
        human_help: Some(HumanHelpRequest {
            agent: "manager".into(),
            reason: reason.into(),
            instructions: "scan it".into(),
        }),
        ..PlanResponse::default()
    }
}

pub struct Manager(pub Arc<Minds>);
pub struct Executor(pub Arc<Minds>);
pub struct Scripter(pub Arc<Minds>);
pub struct Text(pub Arc<Minds>);

pub fn manager(m: &Arc<Minds>) -> ManagerServiceServer<Manager> {
    ManagerServiceServer::new(Manager(m.clone()))
}
pub fn executor(m: &Arc<Minds>) -> ExecutorServiceServer<Executor> {
    ExecutorServiceServer::new(Executor(m.clone()))
}
pub fn scripter(m: &Arc<Minds>) -> ScripterServiceServer<Scripter> {
    ScripterServiceServer::new(Scripter(m.clone()))
}
pub fn text(m: &Arc<Minds>) -> TextManipulatorServiceServer<Text> {
    TextManipulatorServiceServer::new(Text(m.clone()))
}

#[tonic::async_trait]
impl ManagerService for Manager {
    async fn plan(&self, r: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        self.0.plan_requests.lock().unwrap().push(r.into_inner());
        let next = self.0.plans.lock().unwrap().pop_front();
        let next = next.or_else(|| self.0.plan_fallback.lock().unwrap().clone());
        next.map(Response::new)
            .ok_or_else(|| Status::internal("the scripted manager has no plan left"))
    }

    async fn structure_output(
        &self,
        r: Request<StructureOutputRequest>,
    ) -> Result<Response<StructureOutputResponse>, Status> {
        let json = serde_json::json!({ "answer": r.into_inner().final_answer }).to_string();
        Ok(Response::new(StructureOutputResponse {
            valid: true,
            json,
            attempts: 1,
            ..Default::default()
        }))
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<AgentEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ExecutorService for Executor {
    type RunCodeActStream = Events;

    async fn run_code_act(
        &self,
        _r: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<Events>, Status> {
        Err(Status::unimplemented("reasoning tests only"))
    }

    async fn check_secrets(
        &self,
        r: Request<droidmesh_proto::v1::CheckSecretsRequest>,
    ) -> Result<Response<droidmesh_proto::v1::CheckSecretsResponse>, Status> {
        let r = r.into_inner();
        self.0
            .secret_checks
            .lock()
            .unwrap()
            .push(r.secret_ids.clone());
        if *self.0.secret_checks_hang.lock().unwrap() {
            std::future::pending::<()>().await;
        }
        let held = self.0.held_secrets.lock().unwrap().clone();
        match r
            .secret_ids
            .iter()
            .find(|id| !held.contains(&id.to_ascii_lowercase()))
        {
            Some(id) => Err(Status::failed_precondition(format!(
                "secret '{id}' is not held by this executor"
            ))),
            None => Ok(Response::new(droidmesh_proto::v1::CheckSecretsResponse {})),
        }
    }

    async fn execute_subgoal(
        &self,
        r: Request<ExecuteSubgoalRequest>,
    ) -> Result<Response<ExecuteSubgoalResponse>, Status> {
        let req = r.into_inner();
        self.0.act_requests.lock().unwrap().push(req.clone());
        let act = self.0.acts.lock().unwrap().pop_front();
        let result = match act {
            None => return Err(Status::internal("the scripted executor has no act left")),
            Some(Act::Result(r)) => r,
            Some(Act::Hold(r)) => {
                self.0.release.notified().await;
                r
            }
            Some(Act::TapText(text)) => {
                let binding = req.device.clone().unwrap_or_default();
                let mut device = DeviceServiceClient::connect(binding.endpoint.clone())
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?;
                let lease = binding.lease.clone().unwrap_or_default();
                let state = device
                    .get_state(GetStateRequest {
                        serial: lease.serial.clone(),
                        include_screenshot: false,
                        screenshot_max_side: 0,
                        masks: Vec::new(),
                    })
                    .await?
                    .into_inner();
                match state.elements.iter().find(|e| e.text == text) {
                    None => fail(&format!("no element reads '{text}'")),
                    Some(e) => device
                        .tap(TapRequest {
                            lease: Some(lease),
                            target: Some(tap_request::Target::Index(e.index)),
                        })
                        .await
                        .map(Response::into_inner)
                        .unwrap_or_else(|s| fail(s.message())),
                }
            }
        };
        Ok(Response::new(ExecuteSubgoalResponse {
            result: Some(result),
            thought: format!("doing: {}", req.subgoal),
            action_json: "{\"action\": \"tap\"}".into(),
            description: "scripted".into(),
            usage: Some(usage("executor")),
            ..ExecuteSubgoalResponse::default()
        }))
    }
}

#[tonic::async_trait]
impl ScripterService for Scripter {
    type RunScriptStream = Events;

    async fn run_script(&self, r: Request<RunScriptRequest>) -> Result<Response<Events>, Status> {
        let key = r.metadata().get("droidmesh-affinity");
        let key = key.map(|v| v.to_str().unwrap().to_owned());
        self.0.script_affinity.lock().unwrap().push(key);
        self.0.script_requests.lock().unwrap().push(r.into_inner());
        let next = self.0.scripts.lock().unwrap().pop_front();
        let Some(next) = next else {
            return Err(Status::internal("the scripted scripter has no script left"));
        };
        let step = Ok(AgentEvent {
            kind: Some(agent_event::Kind::Step(StepStarted {
                agent: "scripter".into(),
                step: 1,
            })),
        });
        let events: Vec<Result<AgentEvent, Status>> = match next {
            Script::Finish(result, answer) => vec![
                step,
                Ok(AgentEvent {
                    kind: Some(agent_event::Kind::Usage(usage("scripter"))),
                }),
                Ok(AgentEvent {
                    kind: Some(agent_event::Kind::Finished(AgentFinished {
                        agent: "scripter".into(),
                        success: result.success,
                        answer,
                        steps: 1,
                        usage: None,
                        result: Some(result),
                    })),
                }),
            ],
            Script::Die => vec![step, Err(Status::unavailable("scripter process went away"))],
        };
        Ok(Response::new(Box::pin(tokio_stream::iter(events))))
    }
}

#[tonic::async_trait]
impl TextManipulatorService for Text {
    async fn manipulate(
        &self,
        r: Request<ManipulateRequest>,
    ) -> Result<Response<ManipulateResponse>, Status> {
        self.0.text_requests.lock().unwrap().push(r.into_inner());
        let next = self.0.texts.lock().unwrap().pop_front();
        next.map(Response::new)
            .ok_or_else(|| Status::internal("the scripted text manipulator has nothing left"))
    }
}

/// Waits (bounded) until `cond` holds.
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
