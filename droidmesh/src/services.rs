//! The six services this binary wires, in one table: each one's name (`serve <name>`), its key
//! in the config's `[listen]` and `[endpoints]` sections, its default port and the gRPC
//! services its port serves. Names, ports, endpoints and defaults are all read from here.
use droidmesh_proto::service_names as grpc;

use crate::config::{Config, Endpoints, Listen};

/// The services this binary can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Device,
    Executor,
    Manager,
    Scripter,
    TextManipulator,
    Gateway,
}

/// One row of [`SERVICES`].
pub struct ServiceSpec {
    pub service: Service,
    /// `serve <name>`, `up`'s listing, the server's health name, `droidmesh-<name>` in
    /// telemetry.
    pub name: &'static str,
    /// `endpoints.<key>`, as config errors name it; `<key>` is its field in `[listen]` and in
    /// `[endpoints]` (config files name it so).
    pub endpoint_key: &'static str,
    /// Where it listens when the config does not say (`[listen] <key>`).
    pub default_port: u16,
    /// The gRPC services its port serves (health and reflection list them).
    pub grpc: &'static [&'static str],
    listen: fn(&Listen) -> u16,
    endpoint: fn(&Endpoints) -> &str,
    endpoint_mut: fn(&mut Endpoints) -> &mut String,
}

/// A row of the table: the config field `$key` of `[listen]` and `[endpoints]` is the key.
macro_rules! spec {
    ($service:ident, $name:literal, $key:ident, $port:literal, $grpc:expr) => {
        ServiceSpec {
            service: Service::$service,
            name: $name,
            endpoint_key: concat!("endpoints.", stringify!($key)),
            default_port: $port,
            grpc: &[$grpc],
            listen: |l| l.$key,
            endpoint: |e| e.$key.as_str(),
            endpoint_mut: |e| &mut e.$key,
        }
    };
}

/// Every service, in the order `up` binds and lists them (and `serve --help` offers them).
pub const SERVICES: [ServiceSpec; 6] = [
    spec!(Device, "device", device, 50051, grpc::DEVICE),
    spec!(Executor, "executor", executor, 50052, grpc::EXECUTOR),
    spec!(Manager, "manager", manager, 50053, grpc::MANAGER),
    spec!(Scripter, "scripter", scripter, 50054, grpc::SCRIPTER),
    spec!(
        TextManipulator,
        "text-manipulator",
        text_manipulator,
        50055,
        grpc::TEXT_MANIPULATOR
    ),
    spec!(Gateway, "gateway", gateway, 50050, grpc::GATEWAY),
];

// Row i of the table is the service whose discriminant is i, so `spec` is an index.
const _: () = {
    let mut i = 0;
    while i < SERVICES.len() {
        assert!(SERVICES[i].service as usize == i);
        i += 1;
    }
};

impl Service {
    pub const ALL: [Service; 6] = {
        let mut all = [Service::Device; 6];
        let mut i = 0;
        while i < SERVICES.len() {
            all[i] = SERVICES[i].service;
            i += 1;
        }
        all
    };

    pub fn spec(self) -> &'static ServiceSpec {
        &SERVICES[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn default_port(self) -> u16 {
        self.spec().default_port
    }

    /// The gRPC services its port serves.
    pub fn grpc(self) -> &'static [&'static str] {
        self.spec().grpc
    }

    /// Its port in `[listen]`.
    pub fn port(self, config: &Config) -> u16 {
        self.listen_port(&config.listen)
    }

    /// Its port in a `[listen]` section.
    pub fn listen_port(self, listen: &Listen) -> u16 {
        (self.spec().listen)(listen)
    }

    /// Its `[endpoints]` entry: where the other services call it.
    pub fn endpoint(self, endpoints: &Endpoints) -> &str {
        (self.spec().endpoint)(endpoints)
    }

    /// Its `[endpoints]` entry, to change.
    pub fn endpoint_mut(self, endpoints: &mut Endpoints) -> &mut String {
        (self.spec().endpoint_mut)(endpoints)
    }
}

impl clap::ValueEnum for Service {
    fn value_variants<'a>() -> &'a [Self] {
        &Service::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn load(text: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("droidmesh.toml");
        std::fs::write(&path, text).unwrap();
        let source = droidmesh_runtime::ConfigSource {
            file: Some(path),
            ..droidmesh_runtime::ConfigSource::default()
        };
        droidmesh_runtime::load_config::<Config>(&source).unwrap()
    }

    /// Config files keep working: each service's `[listen]` and `[endpoints]` keys are the
    /// ones they always were, and each reaches that service's port and endpoint.
    #[test]
    fn each_service_s_config_keys_reach_its_port_and_endpoint() {
        let key = |s: &ServiceSpec| s.endpoint_key.trim_start_matches("endpoints.");
        let keys: Vec<_> = SERVICES.iter().map(key).collect();
        assert_eq!(
            keys,
            [
                "device",
                "executor",
                "manager",
                "scripter",
                "text_manipulator",
                "gateway"
            ]
        );
        let mut text = String::from("[listen]\n");
        for (i, s) in SERVICES.iter().enumerate() {
            text += &format!("{} = {}\n", key(s), 40000 + i);
        }
        text += "[endpoints]\n";
        for s in &SERVICES {
            text += &format!("{} = \"http://{}.mesh:1\"\n", key(s), s.name);
        }
        let config = load(&text);
        for (i, s) in SERVICES.iter().enumerate() {
            assert_eq!(
                usize::from(s.service.port(&config)),
                40000 + i,
                "{}",
                s.name
            );
            assert_eq!(
                s.service.endpoint(&config.endpoints),
                format!("http://{}.mesh:1", s.name)
            );
        }
    }

    #[test]
    fn defaults_come_from_the_table() {
        let config = Config::default();
        for s in Service::ALL {
            assert_eq!(s.port(&config), s.default_port(), "{}", s.name());
            assert_eq!(
                s.endpoint(&config.endpoints),
                format!("http://127.0.0.1:{}", s.default_port())
            );
        }
        let ports: Vec<u16> = SERVICES.iter().map(|s| s.default_port).collect();
        assert_eq!(ports, [50051, 50052, 50053, 50054, 50055, 50050]);
        let names: Vec<_> = Service::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "device",
                "executor",
                "manager",
                "scripter",
                "text-manipulator",
                "gateway"
            ]
        );
    }
}
