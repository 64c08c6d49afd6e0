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
    let mut action_taken = if o.success {
        format!("script task done in {} {steps_word}: {task}", o.steps)
    } else {
        format!("script task failed after {} {steps_word}: {task}", o.steps)
    };
    let mut data = json!({
        "answer": o.answer,
        "steps": o.steps,
        "http_requests": run.ctx.budget.used(),
    });
    if let Some(lost) = &run.lost {
        action_taken = format!("{action_taken}; {lost}");
        data["files_lost"] = json!(lost);
    }
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

/// Every file in the task's workspace, with its absolute path on this replica and its location
/// off it (see [`location`]).
async fn files(run: &Run) -> Vec<FileDetail> {
    let ctx = run.ctx.clone();
    let listed = tokio::task::spawn_blocking(move || ctx.workspace.list()).await;
    match listed {
        Ok(Ok(files)) => files
            .into_iter()
            .map(|f| FileDetail {
                path: f.path.to_string_lossy().into_owned(),
                mime_type: mime_type(&f.name).into(),
                location: location(&run.replica, &run.req.task_id, &f.name),
                name: f.name,
                size_bytes: f.size,
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

/// `scripter://<replica>/<task id>/<name>`: the replica that holds the file, the task and the
/// file's name in the task's workspace, the task id and each part of the name percent-encoded
/// (all but letters, digits, `-`, `.`, `_` and `~`), so a `/` in a task id stays inside its
/// segment.
pub(crate) fn location(replica: &str, task_id: &str, name: &str) -> String {
    let parts: Vec<String> = name.split('/').map(encode).collect();
    format!(
        "scripter://{replica}/{}/{}",
        encode(task_id),
        parts.join("/")
    )
}

fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::location;

    #[test]
    fn locations_keep_the_task_and_the_name_apart() {
        assert_eq!(
            location("scripter-7f9c", "task/7", "data/raw file.json"),
            "scripter://scripter-7f9c/task%2F7/data/raw%20file.json"
        );
        assert_eq!(
            location("a", "t-1", "r\u{e9}sum\u{e9}.txt"),
            "scripter://a/t-1/r%C3%A9sum%C3%A9.txt"
        );
    }
}
