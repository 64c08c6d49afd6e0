//! The end of a run as the gateway receives it: `AgentFinished` with the `ActionResult` every
//! agent returns, the files left in the task's workspace included.
use droidmesh_proto::json_to_struct;
use droidmesh_proto::v1::{ActionResult, AgentFinished, FileDetail, TokenUsage};
use serde_json::json;

use crate::run::{AGENT, Outcome, Run, excerpt};
use crate::workspace::mime_type;

pub(crate) async fn finished(run: &Run, o: Outcome, usage: TokenUsage) -> AgentFinished {
    let files = files(run).await;
    let steps_word = if o.steps == 1 { "step" } else { "steps" };
    let task = excerpt(run.req.task.trim(), 120);
    let action_taken = if o.success {
        format!("script task done in {} {steps_word}: {task}", o.steps)
    } else {
        format!("script task failed after {} {steps_word}: {task}", o.steps)
    };
    let data = json!({
        "answer": o.answer,
        "steps": o.steps,
        "http_requests": run.ctx.budget.used(),
    });
    let result = ActionResult {
        success: o.success,
        action_taken,
        method_used: AGENT.into(),
        confidence: if o.success { 1.0 } else { 0.0 },
        data: Some(json_to_struct(&data)),
        error: (!o.success).then(|| o.answer.clone()),
        files,
        duration_us: u64::try_from(run.started.elapsed().as_micros()).unwrap_or(u64::MAX),
        ..ActionResult::default()
    };
    AgentFinished {
        agent: AGENT.into(),
        success: o.success,
        answer: o.answer,
        steps: o.steps,
        usage: Some(usage),
        result: Some(result),
    }
}

/// Every file in the task's workspace, with its absolute path.
async fn files(run: &Run) -> Vec<FileDetail> {
    let ctx = run.ctx.clone();
    let listed = tokio::task::spawn_blocking(move || ctx.workspace.list()).await;
    match listed {
        Ok(Ok(files)) => files
            .into_iter()
            .map(|f| FileDetail {
                path: f.path.to_string_lossy().into_owned(),
                mime_type: mime_type(&f.name).into(),
                name: f.name,
                size_bytes: f.size,
                location: "host".into(),
            })
            .collect(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the workspace could not be listed");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "listing the workspace failed");
            Vec::new()
        }
    }
}
