//! Direct mode: one executor CodeAct stream per task. Its events are relayed into the task's
//! log; the client's messages (stop, new goal, note, a human's reply) are relayed to it.
use std::time::Duration;

use droidmesh_proto::v1::{CodeActInput, CodeActStart, TaskState, code_act_input};
use tokio::sync::mpsc;

use crate::agents::Agent;
use crate::driver::{Driver, TaskCtx, non_empty};
use crate::entry::Control;
use crate::error::PeerError;
use crate::relay::relay;
use crate::task_state::Ending;

/// Runs the executor's CodeAct loop for the task.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectDriver;

impl Driver for DirectDriver {
    async fn drive(&self, ctx: TaskCtx<'_>) -> Ending {
        drive(ctx).await
    }
}

async fn drive(ctx: TaskCtx<'_>) -> Ending {
    let (deps, entry, req) = (ctx.deps, ctx.entry, ctx.req);
    let (in_tx, in_rx) = mpsc::channel::<CodeActInput>(16);
    let start = CodeActStart {
        task_id: entry.id.clone(),
        goal: req.goal.clone(),
        device: Some(ctx.binding()),
        max_steps: ctx.max_steps(),
        vision: req.vision,
        secret_ids: req.secret_ids.clone(),
        app_card: req.app_card.clone(),
        output_schema: req.output_schema.clone().unwrap_or_default(),
        tools: Vec::new(),
        llm: req.models.get("codeact").cloned(),
        stream_screenshots: req.stream_screenshots,
    };
    let input = |kind| CodeActInput { kind: Some(kind) };
    if in_tx
        .send(input(code_act_input::Kind::Start(start)))
        .await
        .is_err()
    {
        return Ending::failed("internal error: the executor input closed before starting");
    }
    let mut executor = deps.agents.executor.clone();
    let executor_ep = deps.agents.endpoint(Agent::Executor);
    let mut stream = match executor
        .run_code_act(tokio_stream::wrappers::ReceiverStream::new(in_rx))
        .await
    {
        Ok(s) => s.into_inner(),
        Err(s) => return Ending::failed(PeerError::call("executor", executor_ep, &s).to_string()),
    };
    let mut stop_deadline: Option<tokio::time::Instant> = None;
    let mut stop_reason = String::new();
    loop {
        let grace = async {
            match stop_deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            msg = stream.message() => match msg {
                Ok(Some(ev)) => {
                    if let Some(done) = relay(entry, ev, true) {
                        return match (done.success, stop_deadline.is_some()) {
                            (_, true) => Ending::cancelled(non_empty(stop_reason, "stopped by the user")),
                            (true, false) => Ending::succeeded(done.answer),
                            (false, false) => {
                                let error = non_empty(done.answer.clone(), "the agent gave up");
                                Ending { state: TaskState::Failed, answer: done.answer, error }
                            }
                        };
                    }
                }
                Ok(None) => return Ending::failed("the executor ended the run without finishing it"),
                Err(s) => {
                    let e = PeerError::call_checked("executor", executor_ep, &s).await;
                    return Ending::failed(if e.transport.is_some() {
                        e.to_string()
                    } else {
                        format!("the executor's run broke off: {e}")
                    });
                }
            },
            c = ctx.control.recv() => {
                let Some(c) = c else { return Ending::cancelled("the gateway is shutting down") };
                // The gateway takes a reply only from a task waiting for a person.
                ctx.steered(&c, true);
                if let Control::Stop(reason) = &c {
                    stop_reason = reason.clone();
                    stop_deadline = Some(tokio::time::Instant::now() + Duration::from_millis(deps.cfg.stop_grace_ms));
                }
                // What the message does to the run is the executor's, by the steering contract.
                if in_tx.send(input(c.into_input())).await.is_err() {
                    return Ending::failed("the executor stopped reading messages");
                }
            }
            _ = grace => return Ending::cancelled(non_empty(stop_reason, "stopped by the user (the step in progress was cut off)")),
        }
    }
}
