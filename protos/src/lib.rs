//! The droidmesh v1 gRPC contract: messages, clients and server traits for every service, the
//! encoded descriptor set for reflection, conversions between JSON and protobuf `Struct`, and
//! the one rule for shortening text that every service follows (`text`).

pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("droidmesh.v1");
}

mod json;
pub mod text;

/// Shows a mask's field but never its secret (requests are printed with `{:?}` in logs).
impl std::fmt::Debug for v1::SecretMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretMask")
            .field(
                "secret",
                &format_args!("<{} characters>", self.secret.chars().count()),
            )
            .field("field", &self.field)
            .finish()
    }
}

pub use json::{json_to_struct, json_to_value, struct_to_json, value_to_json};

/// Encoded `FileDescriptorSet` of every droidmesh proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/droidmesh_descriptor.bin"));

/// Fully qualified gRPC service names, as health checks and reflection know them.
pub mod service_names {
    pub const DEVICE: &str = "droidmesh.v1.DeviceService";
    pub const MANAGER: &str = "droidmesh.v1.ManagerService";
    pub const EXECUTOR: &str = "droidmesh.v1.ExecutorService";
    pub const SCRIPTER: &str = "droidmesh.v1.ScripterService";
    pub const TEXT_MANIPULATOR: &str = "droidmesh.v1.TextManipulatorService";
    pub const GATEWAY: &str = "droidmesh.v1.Gateway";
    pub const REPLICA: &str = "droidmesh.v1.ReplicaService";
}
