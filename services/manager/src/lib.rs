//! The droidmesh manager. `StructureOutput` turns a task's final answer into JSON that
//! validates against the caller's JSON Schema: the structured_output prompt, the model's reply
//! parsed leniently and validated, and on failure the violations sent back for another try.
//! `Plan` (reasoning mode) is not served yet.
use std::sync::Arc;

use droidmesh_agent::parse::{OutputSchema, StructuredError};
use droidmesh_agent::prompts::{PromptSet, StructuredOutputSystem};
use droidmesh_llm::{ChatRequest, LlmClient, Message};
use droidmesh_proto::v1::manager_service_server::{ManagerService, ManagerServiceServer};
use droidmesh_proto::v1::{
    PlanRequest, PlanResponse, StructureOutputRequest, StructureOutputResponse, TokenUsage,
    UsageReport,
};
use tonic::{Request, Response, Status};

/// Attempts at a valid structure before giving up.
pub const MAX_ATTEMPTS: u32 = 3;
const PROFILE: &str = "structured_output";

pub struct Manager {
    llm: LlmClient,
    prompts: Arc<PromptSet>,
}

pub fn manager_service(
    llm: LlmClient,
    prompts_dir: Option<&str>,
) -> Result<ManagerServiceServer<Manager>, String> {
    let prompts = match prompts_dir {
        Some(d) => PromptSet::with_override_dir(d),
        None => PromptSet::embedded(),
    }
    .map_err(|e| format!("prompt templates: {e}"))?;
    Ok(ManagerServiceServer::new(Manager {
        llm,
        prompts: Arc::new(prompts),
    }))
}

#[tonic::async_trait]
impl ManagerService for Manager {
    async fn plan(&self, _r: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        Err(Status::unimplemented(
            "reasoning mode (Plan) is not served by this manager yet",
        ))
    }

    async fn structure_output(
        &self,
        r: Request<StructureOutputRequest>,
    ) -> Result<Response<StructureOutputResponse>, Status> {
        let r = r.into_inner();
        let schema_value: serde_json::Value = serde_json::from_str(&r.json_schema)
            .map_err(|e| Status::invalid_argument(format!("json_schema is not JSON: {e}")))?;
        let schema = OutputSchema::new(&schema_value)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let pretty =
            serde_json::to_string_pretty(&schema_value).unwrap_or_else(|_| r.json_schema.clone());
        let mut usage = TokenUsage::default();
        let mut last = UsageReport {
            agent: "structured_output".into(),
            ..UsageReport::default()
        };
        let mut previous: Option<String> = None;
        let mut errors: Vec<String> = Vec::new();
        for attempt in 1..=MAX_ATTEMPTS {
            let ctx = StructuredOutputSystem {
                goal: r.goal.clone(),
                final_answer: r.final_answer.clone(),
                schema: pretty.clone(),
                previous_output: previous.clone(),
                errors: errors.clone(),
            };
            let prompt = self
                .prompts
                .render(&ctx)
                .map_err(|e| Status::internal(format!("prompt: {e}")))?;
            let reply = self
                .llm
                .chat(PROFILE, ChatRequest::new(vec![Message::user(prompt)]))
                .await
                .map_err(|e| Status::unavailable(format!("the model call failed: {e}")))?;
            usage.input_tokens += reply.usage.input_tokens;
            usage.output_tokens += reply.usage.output_tokens;
            usage.cached_input_tokens += reply.usage.cached_input_tokens.unwrap_or(0);
            usage.calls += 1;
            last = UsageReport {
                agent: "structured_output".into(),
                provider: reply.provider.clone(),
                model: reply.model.clone(),
                usage: Some(usage),
                latency_ms: u64::try_from(reply.latency.as_millis()).unwrap_or(u64::MAX),
                finish_reason: reply.finish_reason.clone(),
                replay: reply.replay,
            };
            match schema.extract(&reply.text) {
                Ok(value) => {
                    return Ok(Response::new(StructureOutputResponse {
                        valid: true,
                        json: value.to_string(),
                        validation_errors: Vec::new(),
                        attempts: attempt,
                        usage: Some(last),
                    }));
                }
                Err(StructuredError::Invalid { value, errors: v }) => {
                    previous = Some(value.to_string());
                    errors = v
                        .iter()
                        .map(|x| format!("{}: {}", x.path, x.message))
                        .collect();
                }
                Err(e) => {
                    previous = Some(reply.text.chars().take(2_000).collect());
                    errors = vec![e.to_string()];
                }
            }
        }
        Ok(Response::new(StructureOutputResponse {
            valid: false,
            json: previous.unwrap_or_default(),
            validation_errors: errors,
            attempts: MAX_ATTEMPTS,
            usage: Some(last),
        }))
    }
}
