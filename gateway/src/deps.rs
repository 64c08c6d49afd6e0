//! What every task of the gateway shares: its config, the device and agent clients, the
//! conversations, the signal of a released lease and the task store. The runner, the drivers,
//! the queue and the lease-holder wording all take it from here.
use std::sync::Arc;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_runtime::TracedChannel;
use tokio::sync::Notify;

use crate::agents::Agents;
use crate::config::GatewayConfig;
use crate::conversations::Conversations;

/// What a task needs from its surroundings.
#[derive(Clone)]
pub struct Deps {
    pub cfg: GatewayConfig,
    pub device: DeviceServiceClient<TracedChannel>,
    pub agents: Agents,
    /// The device endpoint agents are told to use.
    pub device_endpoint: String,
    /// Goals and answers of recent conversations (shared by every task).
    pub conversations: Arc<Conversations>,
    /// Notified whenever a task of this gateway releases a lease (wakes queued tasks).
    pub released: Arc<Notify>,
    /// The task store, once opened: whose task a lease holder is ([`crate::busy`]).
    pub store: Option<Arc<crate::store::Store>>,
}
