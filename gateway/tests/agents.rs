//! Scripted agent services: an executor whose behaviour is chosen by keywords in the goal, and
//! a manager that structures an answer as `{<the schema's first required property>: answer}`.
use std::pin::Pin;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::executor_service_server::ExecutorService;
use droidmesh_proto::v1::manager_service_server::ManagerService;
use droidmesh_proto::v1::{
    ActionResult, AgentEvent, AgentFinished, CodeActInput, CodeBlock, ExecuteSubgoalRequest,
    ExecuteSubgoalResponse, GetStateRequest, HumanHelpRequest, PlanRequest, PlanResponse,
    StartAppRequest, StepStarted, StructureOutputRequest, StructureOutputResponse, TapRequest,
    TokenUsage, ToolResult, UsageReport, agent_event, code_act_input, start_app_request,
    tap_request,
};
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

type Events = Pin<Box<dyn Stream<Item = Result<AgentEvent, Status>> + Send>>;

pub struct ScriptedExecutor;

fn ev(kind: agent_event::Kind) -> Result<AgentEvent, Status> {
    Ok(AgentEvent { kind: Some(kind) })
}

fn step(n: u32) -> Result<AgentEvent, Status> {
    ev(agent_event::Kind::Step(StepStarted {
        agent: "codeact".into(),
        step: n,
    }))
}

fn finished(success: bool, answer: &str, steps: u32) -> Result<AgentEvent, Status> {
    ev(agent_event::Kind::Finished(AgentFinished {
        agent: "codeact".into(),
        success,
        answer: answer.into(),
        steps,
        ..AgentFinished::default()
    }))
}

fn usage() -> Result<AgentEvent, Status> {
    ev(agent_event::Kind::Usage(UsageReport {
        agent: "codeact".into(),
        model: "scripted".into(),
        usage: Some(TokenUsage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 0,
            calls: 1,
        }),
        ..UsageReport::default()
    }))
}

#[tonic::async_trait]
impl ExecutorService for ScriptedExecutor {
    type RunCodeActStream = Events;

    async fn run_code_act(
        &self,
        r: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<Events>, Status> {
        let mut input = r.into_inner();
        let Some(Ok(CodeActInput {
            kind: Some(code_act_input::Kind::Start(start)),
        })) = input.next().await
        else {
            return Err(Status::invalid_argument("first message must be start"));
        };
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            let goal = start.goal.clone();
            let binding = start.device.clone().unwrap();
            let send = |e| {
                let tx = tx.clone();
                async move { tx.send(e).await.is_ok() }
            };
            if goal.contains("crash") {
                send(step(1)).await;
                send(Err(Status::unavailable("executor process went away"))).await;
                return;
            }
            if goal.contains("wifi") {
                // Act on the device with the lease the gateway gave us.
                let mut device = DeviceServiceClient::connect(binding.endpoint.clone())
                    .await
                    .unwrap();
                send(step(1)).await;
                send(ev(agent_event::Kind::Code(CodeBlock {
                    agent: "codeact".into(),
                    language: "javascript".into(),
                    code: "open_app('Settings')".into(),
                })))
                .await;
                let started = device
                    .start_app(StartAppRequest {
                        lease: binding.lease.clone(),
                        app: Some(start_app_request::App::Label("Settings".into())),
                        activity: String::new(),
                    })
                    .await;
                let result = match started {
                    Ok(r) => r.into_inner(),
                    Err(s) => ActionResult {
                        success: false,
                        error: Some(s.message().into()),
                        ..ActionResult::default()
                    },
                };
                send(ev(agent_event::Kind::ToolResult(ToolResult {
                    agent: "codeact".into(),
                    tool: "open_app".into(),
                    call_id: 1,
                    result: Some(result),
                })))
                .await;
                send(usage()).await;
                send(step(2)).await;
                let serial = binding.lease.as_ref().unwrap().serial.clone();
                let st = device
                    .get_state(GetStateRequest {
                        serial,
                        include_screenshot: false,
                        screenshot_max_side: 0,
                        masks: Vec::new(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                let wifi = st
                    .elements
                    .iter()
                    .find(|e| e.text == "Wi-Fi")
                    .unwrap()
                    .index;
                let tapped = device
                    .tap(TapRequest {
                        lease: binding.lease.clone(),
                        target: Some(tap_request::Target::Index(wifi)),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                send(ev(agent_event::Kind::ToolResult(ToolResult {
                    agent: "codeact".into(),
                    tool: "tap".into(),
                    call_id: 2,
                    result: Some(tapped),
                })))
                .await;
                send(usage()).await;
                send(finished(true, "Wi-Fi is on", 2)).await;
                return;
            }
            if goal.contains("help") {
                send(step(1)).await;
                send(ev(agent_event::Kind::HumanHelp(HumanHelpRequest {
                    agent: "codeact".into(),
                    reason: "which account?".into(),
                    instructions: String::new(),
                })))
                .await;
                while let Some(Ok(msg)) = input.next().await {
                    if let Some(code_act_input::Kind::HumanReply(reply)) = msg.kind {
                        send(finished(true, &format!("used {reply}"), 1)).await;
                        return;
                    }
                }
                return;
            }
            if goal.contains("deaf") {
                // Streams one step, then neither reads its input nor ends until the gateway
                // drops the call.
                send(step(1)).await;
                tx.closed().await;
                drop(input);
                return;
            }
            if let Some(n) = goal
                .split("count:")
                .nth(1)
                .and_then(|n| n.trim().parse::<u32>().ok())
            {
                // Counts to n, a step every 20 ms, then succeeds.
                for i in 1..=n {
                    if !send(step(i)).await {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                send(finished(true, &format!("counted to {n}"), n)).await;
                return;
            }
            if goal.contains("slow") {
                let (stop_tx, mut stop_rx) = mpsc::channel::<()>(1);
                tokio::spawn(async move {
                    while let Some(Ok(msg)) = input.next().await {
                        if matches!(msg.kind, Some(code_act_input::Kind::Stop(true))) {
                            let _ = stop_tx.send(()).await;
                        }
                    }
                });
                for n in 1..=400 {
                    if !send(step(n)).await {
                        return; // the gateway dropped the stream (cancel)
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_millis(25)) => {}
                        _ = stop_rx.recv() => {
                            send(finished(false, "stopped on request", n)).await;
                            return;
                        }
                    }
                }
                send(finished(false, "max steps", 400)).await;
                return;
            }
            let answer = goal
                .split("answer:")
                .nth(1)
                .unwrap_or("done")
                .trim()
                .to_owned();
            send(step(1)).await;
            send(usage()).await;
            send(finished(true, &answer, 1)).await;
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn check_secrets(
        &self,
        _r: Request<droidmesh_proto::v1::CheckSecretsRequest>,
    ) -> Result<Response<droidmesh_proto::v1::CheckSecretsResponse>, Status> {
        Err(Status::unimplemented("not asked of this double"))
    }

    async fn execute_subgoal(
        &self,
        _r: Request<ExecuteSubgoalRequest>,
    ) -> Result<Response<ExecuteSubgoalResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

pub struct ScriptedManager;

#[tonic::async_trait]
impl ManagerService for ScriptedManager {
    async fn plan(&self, _r: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn structure_output(
        &self,
        r: Request<StructureOutputRequest>,
    ) -> Result<Response<StructureOutputResponse>, Status> {
        // The answer goes under the schema's first required property, so what comes back
        // depends on the schema the gateway sent.
        let r = r.into_inner();
        let schema: serde_json::Value = serde_json::from_str(&r.json_schema)
            .map_err(|e| Status::invalid_argument(format!("schema is not JSON: {e}")))?;
        let Some(key) = schema["required"][0].as_str() else {
            return Ok(Response::new(StructureOutputResponse {
                valid: false,
                attempts: 1,
                validation_errors: vec![format!("the schema requires no property: {schema}")],
                ..Default::default()
            }));
        };
        let json = serde_json::json!({ key: r.final_answer }).to_string();
        Ok(Response::new(StructureOutputResponse {
            valid: true,
            json,
            attempts: 1,
            ..Default::default()
        }))
    }
}
