//! `droidmesh.v1.ManagerService`: each RPC's work lives in its own module; errors become
//! statuses in [`to_status`] only.
use std::sync::Arc;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::manager_service_server::ManagerService;
use droidmesh_proto::v1::{
    PlanRequest, PlanResponse, StructureOutputRequest, StructureOutputResponse,
};
use tonic::{Request, Response, Status};

use crate::error::to_status;

pub struct Manager {
    pub(crate) llm: LlmClient,
    pub(crate) prompts: Arc<PromptSet>,
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
        crate::structured::structure_output(&self.llm, &self.prompts, r.into_inner())
            .await
            .map(Response::new)
            .map_err(to_status)
    }
}
