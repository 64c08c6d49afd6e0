//! The methods a gRPC server registers, by fully qualified service name, as the descriptor
//! sets droidmesh embeds list them: its own protos (`droidmesh_proto::FILE_DESCRIPTOR_SET`),
//! health and reflection v1 and v1alpha. The RPC metrics label only these; any other path a
//! caller makes up shares the placeholder `_OTHER`.
use prost::Message as _;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Every service the embedded descriptor sets describe, with its methods in their order.
fn described() -> &'static HashMap<String, Vec<String>> {
    static DESCRIBED: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    DESCRIBED.get_or_init(|| {
        let mut services = HashMap::new();
        for set in [
            droidmesh_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ] {
            add_services(&mut services, set);
        }
        services
    })
}

/// Adds the services of one encoded `FileDescriptorSet`; one that does not decode adds none
/// (the sets are built in, so a test catches that).
fn add_services(services: &mut HashMap<String, Vec<String>>, encoded: &[u8]) {
    let Ok(set) = prost_types::FileDescriptorSet::decode(encoded) else {
        tracing::warn!(
            "metrics: an embedded descriptor set does not decode; its methods go unlabelled"
        );
        return;
    };
    for file in set.file {
        let package = file.package.unwrap_or_default();
        for service in file.service {
            let name = service.name.unwrap_or_default();
            let full = if package.is_empty() {
                name
            } else {
                format!("{package}.{name}")
            };
            let methods = service.method.into_iter().filter_map(|m| m.name).collect();
            services.insert(full, methods);
        }
    }
}

/// The methods of `service` (fully qualified, `droidmesh.v1.ExecutorService`); `None` when no
/// embedded descriptor set describes it.
pub fn methods_of(service: &str) -> Option<&'static [String]> {
    described().get(service).map(Vec::as_slice)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_served_service_and_the_bootstrap_ones_are_described() {
        let executor = methods_of(droidmesh_proto::service_names::EXECUTOR).unwrap();
        assert!(executor.iter().any(|m| m == "RunCodeAct"), "{executor:?}");
        assert!(
            executor.iter().any(|m| m == "ExecuteSubgoal"),
            "{executor:?}"
        );
        assert_eq!(
            methods_of("grpc.health.v1.Health").unwrap(),
            ["Check", "Watch"]
        );
        assert_eq!(
            methods_of("grpc.reflection.v1.ServerReflection").unwrap(),
            ["ServerReflectionInfo"]
        );
        assert!(methods_of("grpc.reflection.v1alpha.ServerReflection").is_some());
        assert!(methods_of(droidmesh_proto::service_names::REPLICA).is_some());
        for service in [
            droidmesh_proto::service_names::DEVICE,
            droidmesh_proto::service_names::MANAGER,
            droidmesh_proto::service_names::SCRIPTER,
            droidmesh_proto::service_names::TEXT_MANIPULATOR,
            droidmesh_proto::service_names::GATEWAY,
        ] {
            assert!(!methods_of(service).unwrap().is_empty(), "{service}");
        }
        assert!(methods_of("droidmesh.v1.Nope").is_none());
    }
}
