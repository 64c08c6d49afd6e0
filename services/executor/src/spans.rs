//! The executor's spans, named and labelled per the OpenTelemetry GenAI conventions:
//! `invoke_agent executor` for a CodeAct run or one subgoal, `execute_tool {tool}` for each
//! tool call. Every one carries the task (`droidmesh.task.id`), the device
//! (`droidmesh.device.serial`) and, where one exists, the step (`droidmesh.step`); a failure
//! records `error.type`.

/// The executor's invocation: a whole CodeAct run, or one subgoal of reasoning mode.
pub fn invoke_agent(task_id: &str, serial: &str) -> tracing::Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent executor",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "executor",
        droidmesh.task.id = %task_id,
        droidmesh.device.serial = non_empty(serial),
        droidmesh.step = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// What one tool call's span is labelled with.
pub struct ToolCallTags<'a> {
    pub task_id: &'a str,
    pub serial: &'a str,
    pub step: Option<u32>,
    /// Unique within the run (`gen_ai.tool.call.id`); `None` when the call has no id.
    pub call_id: Option<u32>,
}

/// One tool call. Device tools run agent-side against the device service: `gen_ai.tool.type`
/// is `extension`.
pub fn execute_tool(tool: &str, tags: &ToolCallTags<'_>) -> tracing::Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool,
        gen_ai.tool.type = "extension",
        gen_ai.tool.call.id = tags.call_id.map(tracing::field::display),
        droidmesh.task.id = %tags.task_id,
        droidmesh.device.serial = non_empty(tags.serial),
        droidmesh.step = tags.step,
        error.type = tracing::field::Empty,
    )
}

/// One call of an operator-defined tool ([`crate::custom_tools`]): `gen_ai.tool.type` is
/// `extension` for a webhook, `function` for a JavaScript function. A webhook records the
/// request's `http.request.method`, `server.address`, `server.port` and
/// `http.response.status_code` on it.
pub fn execute_custom_tool(
    tool: &str,
    tool_type: &'static str,
    tags: &ToolCallTags<'_>,
) -> tracing::Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool,
        gen_ai.tool.type = tool_type,
        gen_ai.tool.call.id = tags.call_id.map(tracing::field::display),
        droidmesh.task.id = %tags.task_id,
        droidmesh.device.serial = non_empty(tags.serial),
        droidmesh.step = tags.step,
        http.request.method = tracing::field::Empty,
        server.address = tracing::field::Empty,
        server.port = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Records a failure on `span` (`error.type` is low-cardinality: a kind, not a message).
pub fn failed(span: &tracing::Span, kind: &'static str) {
    span.record("error.type", kind);
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}
