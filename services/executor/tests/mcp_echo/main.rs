//! A tiny MCP server for the executor's tests, speaking the protocol over stdin and stdout
//! with droidmesh's MCP library (rmcp) on the server side. Its tools: `say` (echoes text),
//! `add` (structured content), `fail` (an `isError` result), `pid` (its process id), `env`
//! (one environment variable), `big` (a long answer), `slow` (answers after a while) and
//! `exit` (the process exits without answering). With `MCP_ECHO_ODD_NAME=1` it also offers
//! `odd-name`, which is not a JavaScript identifier. It writes a line to stderr when it
//! starts and one per call; `MCP_ECHO_STDERR_LINES=N` adds N lines at start, and
//! `MCP_ECHO_PID_FILE=PATH` has it write its process id to PATH.
//!
//! Built only with the executor's `testkit` feature (its own tests turn it on).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

struct Echo;

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

fn tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    let mut tools = vec![
        Tool::new(
            "say",
            "Says the text back.",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "what to say"}},
                "required": ["text"]
            })),
        ),
        Tool::new(
            "add",
            "Adds two numbers.",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            })),
        ),
        Tool::new("fail", "Always fails.", schema(none.clone())),
        Tool::new("pid", "The server's process id.", schema(none.clone())),
        Tool::new(
            "env",
            "One variable of the server's environment, or null.",
            schema(json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            })),
        ),
        Tool::new(
            "big",
            "A text of the given length.",
            schema(json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer"}},
                "required": ["bytes"]
            })),
        ),
        Tool::new(
            "slow",
            "Answers after the given time.",
            schema(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer"}},
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "exit",
            "Exits the server without answering.",
            schema(none.clone()),
        ),
    ];
    if std::env::var("MCP_ECHO_ODD_NAME").is_ok_and(|v| v == "1") {
        tools.push(Tool::new("odd-name", "A name with a dash.", schema(none)));
    }
    tools
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t.into())])
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        eprintln!("mcp-echo: call {} {args}", request.name);
        let result = match request.name.as_ref() {
            "say" => text(format!("echo: {}", args["text"].as_str().unwrap_or(""))),
            "add" => {
                let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                CallToolResult::structured(json!({"sum": sum}))
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text(
                "the echo server failed on purpose",
            )]),
            "pid" => text(std::process::id().to_string()),
            "env" => {
                let name = args["name"].as_str().unwrap_or("");
                CallToolResult::structured(json!({"value": std::env::var(name).ok()}))
            }
            "big" => {
                text("x".repeat(usize::try_from(args["bytes"].as_u64().unwrap_or(0)).unwrap()))
            }
            "slow" => {
                tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
                text("slept")
            }
            "exit" => std::process::exit(3),
            "odd-name" => text("odd"),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let extra: usize = std::env::var("MCP_ECHO_STDERR_LINES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for i in 0..extra {
        eprintln!("mcp-echo: noise line {i}");
    }
    if let Ok(path) = std::env::var("MCP_ECHO_PID_FILE") {
        std::fs::write(path, std::process::id().to_string())
            .expect("the pid file should be written");
    }
    eprintln!("mcp-echo: ready, pid {}", std::process::id());
    let running = Echo
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await
        .expect("the client should initialize");
    let _ = running.waiting().await;
}
