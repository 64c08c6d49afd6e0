//! The droidmesh config file: one TOML document with a section per service, loaded through
//! the runtime crate (`${VAR}` substitution, `DROIDMESH_SECTION__KEY` overrides) and validated
//! before any port is bound.
use droidmesh_runtime::Validate;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::services::{SERVICES, Service};

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub listen: Listen,
    /// Connections of every gRPC port: how many each holds, how long it waits for a client
    /// that sends nothing, stays idle or stops reading (see `droidmesh_runtime::server`).
    pub grpc: droidmesh_runtime::server::ConnectionConfig,
    pub endpoints: Endpoints,
    pub device: droidmesh_device::DeviceConfig,
    pub gateway: droidmesh_gateway::GatewayConfig,
    /// The gateway's HTTP face (its port is `[listen] gateway_http`).
    pub gateway_http: droidmesh_gateway::http::HttpConfig,
    pub executor: droidmesh_executor::ExecutorConfig,
    /// Where the executor's secrets come from besides `DROIDMESH_SECRET_<ID>`: a directory
    /// of files, one per id (a mounted Kubernetes Secret).
    pub secrets: droidmesh_executor::SecretsConfig,
    pub manager: droidmesh_manager::ManagerConfig,
    pub scripter: droidmesh_scripter::ScripterConfig,
    pub text_manipulator: droidmesh_text_manipulator::TextManipulatorConfig,
    /// Providers and per-agent profiles; absent means no model is configured (`run` then
    /// replays its recorded demo).
    pub llm: Option<droidmesh_llm::LlmConfig>,
    pub telemetry: Telemetry,
    /// TLS on every gRPC port and the gateway's HTTP face, mutual TLS between services, and
    /// how `https://` endpoints are called (see `droidmesh_runtime::tls`).
    pub tls: droidmesh_runtime::tls::TlsConfig,
}

/// Where each service listens when served.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Listen {
    pub host: IpAddr,
    pub gateway: u16,
    /// The gateway's HTTP/JSON face (REST, Server-Sent Events, `/openapi.json`), served by the
    /// gateway process next to its gRPC port. 0 serves none.
    pub gateway_http: u16,
    pub device: u16,
    pub executor: u16,
    pub manager: u16,
    pub scripter: u16,
    pub text_manipulator: u16,
    /// How long the gateway and device service finish calls in progress once asked to stop.
    pub drain_secs: u64,
    /// How long an agent (manager, executor, scripter, text manipulator) finishes its work in
    /// progress once asked to stop: a CodeAct run lasts a task, so this is sized for one.
    /// Kubernetes' termination grace period must be longer.
    pub agent_drain_secs: u64,
    /// `serve` only: once asked to stop, a server reports NOT_SERVING and draining for this
    /// long while still taking calls, so balancing clients (probing every
    /// `gateway.probe_every_ms`) stop sending before it stops accepting.
    pub drain_notice_ms: u64,
    /// `serve` only: the most calls and streams an agent replica serves at once (a CodeAct run
    /// is one); more are refused with RESOURCE_EXHAUSTED, and balancing gateways send them to
    /// a replica with room or wait for one (`gateway.agent_wait_ms`). 0: no limit.
    pub agent_max_in_flight: u32,
    /// The admin port of every `serve` (and `up`) process: `GET /metrics` in the Prometheus
    /// text format. 0 serves no admin port.
    pub admin: u16,
}

impl Default for Listen {
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            gateway: Service::Gateway.default_port(),
            gateway_http: 50049,
            device: Service::Device.default_port(),
            executor: Service::Executor.default_port(),
            manager: Service::Manager.default_port(),
            scripter: Service::Scripter.default_port(),
            text_manipulator: Service::TextManipulator.default_port(),
            drain_secs: 10,
            agent_drain_secs: 300,
            drain_notice_ms: 2_000,
            agent_max_in_flight: 256,
            admin: droidmesh_runtime::metrics::DEFAULT_ADMIN_PORT,
        }
    }
}

impl Listen {
    pub fn addr(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.host, port)
    }

    /// Where the gateway's HTTP face listens, unless `gateway_http` is 0.
    pub fn gateway_http_addr(&self) -> Option<SocketAddr> {
        (self.gateway_http != 0).then(|| self.addr(self.gateway_http))
    }

    /// The address a client on this machine calls to reach what listens on `host`: the
    /// loopback address when `host` is every address (`0.0.0.0`, `::`), else `host` itself.
    pub fn reachable_host(&self) -> IpAddr {
        match self.host {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            host => host,
        }
    }

    /// Where the admin server listens, unless `admin` is 0.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        (self.admin != 0).then(|| self.addr(self.admin))
    }
}

/// Where services reach one another. A comma-separated list balances across replicas. An
/// endpoint the config does not set follows its service's `[listen]` port
/// ([`Endpoints::follow_listen`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Endpoints {
    pub gateway: String,
    pub device: String,
    pub executor: String,
    pub manager: String,
    pub scripter: String,
    pub text_manipulator: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        let local = |service: Service| format!("http://127.0.0.1:{}", service.default_port());
        Self {
            gateway: local(Service::Gateway),
            device: local(Service::Device),
            executor: local(Service::Executor),
            manager: local(Service::Manager),
            scripter: local(Service::Scripter),
            text_manipulator: local(Service::TextManipulator),
        }
    }
}

impl Endpoints {
    /// Each endpoint with its config name.
    pub fn named(&self) -> [(&'static str, &str); 6] {
        SERVICES.map(|s| (s.endpoint_key, s.service.endpoint(self)))
    }

    /// The endpoint of a config name from [`Endpoints::named`] ("" for another name).
    fn get(&self, name: &str) -> &str {
        self.named()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v)
    }

    /// Points every endpoint the config does not set (`is_set("endpoints.device")` is false)
    /// at its service's `[listen]` port on this machine: `[listen] device = 6001` moves where
    /// `droidmesh devices` and the other services look too. `scheme` is `https` when the mesh
    /// serves TLS, which also upgrades a set endpoint that is the plain default.
    pub fn follow_listen(&mut self, listen: &Listen, is_set: impl Fn(&str) -> bool, scheme: &str) {
        let defaults = Endpoints::default();
        for spec in &SERVICES {
            let default = spec.service.endpoint(&defaults).to_owned();
            let slot = spec.service.endpoint_mut(self);
            if !is_set(spec.endpoint_key) {
                let port = spec.service.listen_port(listen);
                *slot = format!(
                    "{scheme}://{}",
                    SocketAddr::new(listen.reachable_host(), port)
                );
            } else if scheme == "https"
                && *slot == default
                && let Some(rest) = default.strip_prefix("http://")
            {
                *slot = format!("https://{rest}");
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Telemetry {
    /// Log JSON lines instead of text.
    pub json: bool,
    /// Record prompts and completions on `chat` spans (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`), every `DROIDMESH_SECRET_*` value redacted, at most 16 KiB
    /// of text each. Off by default: content may hold personal data.
    pub capture_content: bool,
}

impl Config {
    /// Loads and checks the config `source` names; endpoints it does not set follow their
    /// services' `[listen]` ports, over `https://` when the mesh serves TLS.
    pub fn load(source: &droidmesh_runtime::ConfigSource) -> droidmesh_runtime::Result<Config> {
        let (mut config, origins) = droidmesh_runtime::load_config_with_origins::<Config>(source)?;
        let scheme = if config.tls.serves() { "https" } else { "http" };
        let listen = config.listen.clone();
        config
            .endpoints
            .follow_listen(&listen, |key| origins.is_set(key), scheme);
        Ok(config)
    }

    /// App cards from `dir` (holding `android/app_cards.json`) for both agents that read them,
    /// the executor's CodeAct steps and the manager's plans.
    pub fn use_app_cards(&mut self, dir: &std::path::Path) -> anyhow::Result<()> {
        if !dir.is_dir() {
            anyhow::bail!(
                "--app-cards {}: not a directory; give the folder that holds android/app_cards.json",
                dir.display()
            );
        }
        self.executor.app_cards.dir = Some(dir.to_owned());
        self.manager.app_cards.dir = Some(dir.to_owned());
        Ok(())
    }

    /// Where a device service that outlives a command keeps typed secrets' masks, unless the
    /// config says: `$XDG_DATA_HOME/droidmesh/device`, else `~/.local/share/droidmesh/device`
    /// (neither set: in memory only; the note to show says so).
    pub fn keep_masks_by_default(&mut self) -> Option<&'static str> {
        if !self.device.state_dir.is_empty() {
            return None;
        }
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let dir = env("XDG_DATA_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| env("HOME").map(|h| std::path::PathBuf::from(h).join(".local/share")));
        match dir {
            Some(d) => {
                self.device.state_dir = d.join("droidmesh/device").to_string_lossy().into_owned();
                None
            }
            None => Some(
                "note: neither device.state_dir, XDG_DATA_HOME nor HOME is set: the masks of typed secrets are kept in memory only, and a restart of the device service loses them",
            ),
        }
    }
}

impl Validate for Config {
    fn validate(&self) -> Result<(), Vec<String>> {
        // Every problem of every section, each naming its key.
        let mut problems = self.device.problems();
        problems.extend(self.gateway.problems());
        problems.extend(self.gateway_http.problems(self.gateway.max_request_bytes));
        problems.extend(self.executor.problems());
        problems.extend(self.manager.problems());
        problems.extend(self.scripter.problems());
        problems.extend(self.text_manipulator.problems());
        if let Some(llm) = &self.llm
            && let Err(errs) = llm.validate()
        {
            // Each names its key below [llm] (`profiles.default.model: ...`).
            problems.extend(errs.into_iter().map(|e| format!("llm.{e}")));
        }
        problems.extend(self.tls.problems());
        problems.extend(self.grpc.problems());
        for (name, value) in self.endpoints.named() {
            if value.trim().is_empty() {
                problems.push(format!("{name}: must not be empty"));
            }
            // A mesh that serves TLS is called over TLS: a plain endpoint would reach a TLS
            // port with cleartext HTTP/2 and fail in words nobody could act on.
            if self.tls.serves()
                && value != Endpoints::default().get(name)
                && value.split(',').any(|e| e.trim().starts_with("http://"))
            {
                problems.push(format!(
                    "{name}: {value} is plain http:// but tls.cert makes every droidmesh port \
                     serve TLS: use https://"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn load(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("droidmesh.toml");
        std::fs::write(&path, text).unwrap();
        let source = droidmesh_runtime::ConfigSource {
            file: Some(path),
            ..droidmesh_runtime::ConfigSource::default()
        };
        Config::load(&source).map_err(|e| e.to_string())
    }

    fn with_tls(endpoints: &str) -> Result<Config, String> {
        load(&format!(
            "[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\n[endpoints]\n{endpoints}\n"
        ))
    }

    #[test]
    fn every_problem_of_every_section_is_reported_at_once() {
        let err = load(
            "[device]\ncommand_timeout_ms = 0\nsettle_max_ms = 70000\n\
             [executor]\nstep_timeout_ms = 0\n",
        )
        .unwrap_err();
        for key in [
            "device.command_timeout_ms",
            "device.settle_max_ms",
            "executor.step_timeout_ms",
        ] {
            assert!(err.contains(key), "{key} is not named: {err}");
        }
    }

    #[test]
    fn a_mesh_serving_tls_refuses_plain_endpoints_and_upgrades_its_defaults() {
        let err = with_tls("device = \"http://droidmesh-device:50051\"").unwrap_err();
        assert!(
            err.contains("endpoints.device: http://droidmesh-device:50051 is plain http://"),
            "{err}"
        );
        let config = with_tls("device = \"https://droidmesh-device:50051\"").unwrap();
        assert_eq!(config.endpoints.device, "https://droidmesh-device:50051");
        assert_eq!(config.endpoints.executor, "https://127.0.0.1:50052");
        // A set endpoint that is the plain default is called over TLS too.
        let config = with_tls("manager = \"http://127.0.0.1:50053\"").unwrap();
        assert_eq!(config.endpoints.manager, "https://127.0.0.1:50053");
        // Without TLS, plain endpoints are fine; a half-set [tls] is refused.
        load("[endpoints]\ndevice = \"http://d:1\"\n").unwrap();
        let err = load("[tls]\ncert = \"/c.pem\"\n").unwrap_err();
        assert!(err.contains("tls.key: must be set with tls.cert"), "{err}");
    }

    #[test]
    fn endpoints_the_config_does_not_set_follow_the_listen_ports() {
        let config = load(
            "[listen]\ndevice = 6001\nmanager = 6003\n[endpoints]\nmanager = \"http://m:1\"\n",
        )
        .unwrap();
        assert_eq!(config.endpoints.device, "http://127.0.0.1:6001");
        assert_eq!(config.endpoints.executor, "http://127.0.0.1:50052");
        assert_eq!(
            config.endpoints.manager, "http://m:1",
            "a set endpoint wins"
        );
        // Listening on every address is called on loopback; on one address, at it.
        let config = load("[listen]\nhost = \"0.0.0.0\"\ngateway = 7000\n").unwrap();
        assert_eq!(config.endpoints.gateway, "http://127.0.0.1:7000");
        let config = load("[listen]\nhost = \"::\"\n").unwrap();
        assert_eq!(config.endpoints.device, "http://[::1]:50051");
        let config = load("[listen]\nhost = \"10.1.2.3\"\n").unwrap();
        assert_eq!(config.endpoints.device, "http://10.1.2.3:50051");
    }

    #[test]
    fn grpc_connection_settings_are_read_and_checked() {
        let config = load("[grpc]\nmax_connections = 64\nidle_timeout_ms = 1000\n").unwrap();
        assert_eq!(config.grpc.max_connections, 64);
        assert_eq!(config.grpc.idle_timeout_ms, 1000);
        assert_eq!(config.grpc.preface_timeout_ms, 10_000);
        let err = load("[grpc]\nmax_connections = 0\npreface_timeout_ms = 1\n").unwrap_err();
        assert!(err.contains("grpc.max_connections must be from 1"), "{err}");
        assert!(
            err.contains("grpc.preface_timeout_ms must be at least 10, got 1"),
            "{err}"
        );
    }
}
