//! `droidmesh.v1.ManagerService`: each RPC's work lives in its own module; errors become
//! statuses through `From<ManagerError> for Status` only.
use std::sync::Arc;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::manager_service_server::ManagerService;
use droidmesh_proto::v1::{
    PlanRequest, PlanResponse, StructureOutputRequest, StructureOutputResponse,
};
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::device::Devices;
use crate::error::ManagerError;

/// Longest task id accepted, in bytes (it names the task in spans and logs).
pub const MAX_TASK_ID_BYTES: usize = 256;

fn check_task_id(task_id: &str) -> Result<(), Status> {
    if task_id.len() > MAX_TASK_ID_BYTES {
        return Err(Status::from(ManagerError::InvalidArgument(format!(
            "task_id is {} bytes; at most {MAX_TASK_ID_BYTES} are accepted",
            task_id.len()
        ))));
    }
    Ok(())
}

pub struct Manager {
    pub(crate) llm: LlmClient,
    pub(crate) prompts: Arc<PromptSet>,
    pub(crate) devices: Arc<Devices>,
    pub(crate) cards: droidmesh_app_cards::AppCards,
}

#[tonic::async_trait]
impl ManagerService for Manager {
    async fn plan(&self, r: Request<PlanRequest>) -> Result<Response<PlanResponse>, Status> {
        let r = r.into_inner();
        check_task_id(&r.task_id)?;
        // Under the RPC's span, so the device read and the model call join the caller's trace.
        let serial = r
            .device
            .as_ref()
            .and_then(|d| d.lease.as_ref())
            .map(|l| l.serial.as_str())
            .filter(|s| !s.is_empty());
        droidmesh_runtime::trace_context::tag_call(&r.task_id, serial.unwrap_or(""), Some(r.step));
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent manager",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = "manager",
            droidmesh.task.id = %r.task_id,
            droidmesh.device.serial = serial,
            droidmesh.step = r.step,
            error.type = tracing::field::Empty,
        );
        let planned = crate::plan::plan(self, r).instrument(span.clone()).await;
        if planned.is_err() {
            span.record("error.type", "plan_failed");
        }
        planned.map(Response::new).map_err(Status::from)
    }

    async fn structure_output(
        &self,
        r: Request<StructureOutputRequest>,
    ) -> Result<Response<StructureOutputResponse>, Status> {
        let r = r.into_inner();
        check_task_id(&r.task_id)?;
        droidmesh_runtime::trace_context::tag_call(&r.task_id, "", None);
        crate::structured::structure_output(&self.llm, &self.prompts, r)
            .await
            .map(Response::new)
            .map_err(Status::from)
    }
}
