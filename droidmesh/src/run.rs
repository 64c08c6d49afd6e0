//! `droidmesh run "<goal>"`: a gateway client with live progress. Without `--gateway` it
//! starts the whole mesh in this process first (simulated devices included). With no model
//! configured it replays a recorded demo session and says so. The events are printed by
//! `progress`.
use std::time::Instant;

use anyhow::{Context, Result};
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::{Mode, TaskRequest, task_event};
use droidmesh_runtime::ClientOptions;
use tokio_stream::StreamExt;

use crate::config::Config;
use crate::mesh::{Mesh, Service};
use crate::model_flags::ModelArgs;
use crate::output::say;
use crate::progress::Progress;

/// The goal the recorded demos answer.
pub const DEMO_GOAL: &str = "Open Settings and turn on Wi-Fi";
const DEMO_CASSETTE: &str = include_str!("../demo/wifi-on.json");
/// The same goal in reasoning mode: the manager's and the executor's recorded answers.
const REASONING_DEMO_CASSETTE: &str = include_str!("../demo/reasoning-wifi-on.json");

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What the agent should do on the phone.
    pub goal: String,
    /// Gateway endpoint; without it the mesh runs embedded in this process.
    #[arg(long)]
    pub gateway: Option<String>,
    /// API key for a gateway that requires one (sent as `authorization: Bearer <key>`).
    #[arg(long, env = "DROIDMESH_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Device serial; empty takes a free device (a simulator when the mesh is embedded).
    #[arg(long, default_value = "")]
    pub device: String,
    #[arg(long)]
    pub max_steps: Option<u32>,
    /// JSON Schema (a file path, or JSON text) the final answer is structured into.
    #[arg(long)]
    pub schema: Option<String>,
    /// Send a screenshot to the model at every step.
    #[arg(long)]
    pub vision: bool,
    /// Reasoning mode: a manager plans, the executor performs one action per subgoal, and
    /// `<script>` / `TEXT_TASK:` subgoals go to the scripter and the text manipulator.
    #[arg(long)]
    pub reasoning: bool,
    /// Conversation id: tasks that share one see the goals and answers of the conversation's
    /// earlier tasks (reasoning mode answers questions about them without touching the phone).
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// Simulated devices to start when the mesh is embedded.
    #[arg(long, default_value_t = 2)]
    pub sims: usize,
    /// A directory of app cards (`android/app_cards.json` naming a Markdown card per package)
    /// the agents read, besides the built-in ones (embedded mesh; a gateway's services have
    /// their own `executor.app_cards` and `manager.app_cards`).
    #[arg(long, value_name = "DIR", conflicts_with = "gateway")]
    pub app_cards: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub llm: ModelArgs,
    /// Record every model answer of this run to a cassette file (embedded mesh, live model;
    /// refused when CI is set). Play it back later with --replay.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<std::path::PathBuf>,
    /// Play a recorded cassette instead of calling a model (embedded mesh, no network).
    #[arg(long, value_name = "FILE", conflicts_with_all = crate::model_flags::FLAG_IDS)]
    pub replay: Option<std::path::PathBuf>,
}

/// Whether something accepts TCP connections at `addr` within a short time.
async fn reachable(addr: &str) -> bool {
    let connect = tokio::net::TcpStream::connect(addr);
    matches!(
        tokio::time::timeout(std::time::Duration::from_millis(300), connect).await,
        Ok(Ok(_))
    )
}

pub(crate) fn api_key_in_env() -> bool {
    std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.trim().is_empty())
}

/// Points every agent at the recorded demo session of the mode.
fn demo_llm(reasoning: bool) -> Result<droidmesh_llm::LlmConfig> {
    let (name, cassette) = if reasoning {
        ("reasoning-demo", REASONING_DEMO_CASSETTE)
    } else {
        ("demo", DEMO_CASSETTE)
    };
    let path = std::env::temp_dir().join(format!("droidmesh-{name}-{}.json", std::process::id()));
    std::fs::write(&path, cassette).with_context(|| format!("cannot write {}", path.display()))?;
    replay_llm(&path, "recorded-demo-model")
}

/// Every agent plays `cassette`.
fn replay_llm(cassette: &std::path::Path, model: &str) -> Result<droidmesh_llm::LlmConfig> {
    let mut llm = droidmesh_llm::LlmConfig::default();
    llm.providers.insert(
        "replay".into(),
        droidmesh_llm::ProviderConfig::replay("replay", cassette),
    );
    llm.profiles.insert(
        droidmesh_llm::DEFAULT_PROFILE.to_owned(),
        droidmesh_llm::ProfileConfig::new("replay", model),
    );
    if let Err(problems) = llm.validate() {
        anyhow::bail!("replay of {}: {}", cassette.display(), problems.join("; "));
    }
    Ok(llm)
}

/// Where `--record` writes and `--replay` reads a cassette.
pub(crate) struct CassetteFlags<'a> {
    pub record: Option<&'a std::path::Path>,
    pub replay: Option<&'a std::path::Path>,
}

/// Applies `--replay` and `--record` to the embedded mesh's `[llm]` config.
fn apply_cassette_flags(args: &RunArgs, config: &mut Config, live_flags: bool) -> Result<()> {
    if args.gateway.is_some() && (args.record.is_some() || args.replay.is_some()) {
        anyhow::bail!(
            "--record and --replay apply to the embedded mesh; a remote gateway's agents use their own [llm] config"
        );
    }
    let flags = CassetteFlags {
        record: args.record.as_deref(),
        replay: args.replay.as_deref(),
    };
    apply_cassettes(&flags, config, live_flags)
}

/// `--replay`: every agent plays the cassette; `--record`: every live provider the agents use
/// records its answers to it.
pub(crate) fn apply_cassettes(
    args: &CassetteFlags<'_>,
    config: &mut Config,
    live_flags: bool,
) -> Result<()> {
    if let Some(path) = args.replay {
        // Read now: a missing or malformed file is refused before the mesh starts.
        let cassette = droidmesh_llm::Cassette::load(path)
            .with_context(|| format!("--replay {}", path.display()))?;
        let failed = cassette
            .interactions
            .iter()
            .filter(|i| i.error.is_some())
            .count();
        let failures = match failed {
            0 => String::new(),
            1 => " and 1 failed call".to_owned(),
            n => format!(" and {n} failed calls"),
        };
        say!(
            "note: replaying {} ({} recorded answers{failures} from {}): no live model is called.",
            path.display(),
            cassette.interactions.len() - failed,
            cassette.provider_label
        );
        config.llm = Some(replay_llm(path, "recorded")?);
    }
    if let Some(path) = args.record {
        if !live_flags && config.llm.is_none() && !api_key_in_env() {
            anyhow::bail!(
                "--record needs a live model: pass --llm-url/--model, set OPENAI_API_KEY, or configure [llm]"
            );
        }
        let mut llm = config
            .llm
            .take()
            .unwrap_or_else(droidmesh_llm::LlmConfig::defaults);
        // The providers the agents actually use (so the cassette is labelled by the one that
        // answered, not by an unused built-in).
        let used: std::collections::BTreeSet<String> =
            llm.profiles.values().map(|p| p.provider.clone()).collect();
        for (name, provider) in &mut llm.providers {
            if used.contains(name) && provider.wire != droidmesh_llm::WireFormat::Replay {
                provider.record_to = Some(path.to_path_buf());
            }
        }
        say!("note: recording every model answer to {}", path.display());
        config.llm = Some(llm);
    }
    Ok(())
}

/// The config of a mesh embedded in this command's process: every port picked free, no HTTP
/// face, an in-memory task store (tasks watched to their end: nothing to keep after them), no
/// API keys (the gateway serves only this command), and no adb server when none answers.
pub(crate) async fn embed(config: &mut Config) {
    for port in [
        &mut config.listen.gateway,
        &mut config.listen.device,
        &mut config.listen.executor,
        &mut config.listen.manager,
        &mut config.listen.scripter,
        &mut config.listen.text_manipulator,
    ] {
        *port = 0;
    }
    // One task from this terminal: no HTTP face.
    config.listen.gateway_http = 0;
    // No adb server running is the common case on a machine without a phone: say so
    // once, plainly, and run on the direct devices (the simulators) only.
    let server = config.device.adb_server.trim().to_owned();
    if !server.is_empty() && !reachable(&server).await {
        say!("note: no adb server at {server}; phones attached through adb are not used");
        config.device.adb_server.clear();
    }
    config.gateway.store = "memory".into();
    config.gateway.auth.keys_file = None;
    config.gateway.auth.open = true;
}

pub async fn run(args: RunArgs, mut config: Config) -> Result<bool> {
    let started = Instant::now();
    let mut device = args.device.clone();
    let flagged = args
        .llm
        .apply(args.gateway.is_some(), &mut config.llm, &|var| {
            std::env::var(var).is_ok_and(|k| !k.trim().is_empty())
        })?;
    apply_cassette_flags(&args, &mut config, flagged)?;
    if let Some(dir) = &args.app_cards {
        config.use_app_cards(dir)?;
    }
    let (endpoint, mesh) = match &args.gateway {
        Some(g) => (g.clone(), None),
        None => {
            if !flagged && config.llm.is_none() && !api_key_in_env() {
                let mode = if args.reasoning {
                    " in reasoning mode"
                } else {
                    ""
                };
                say!("note: no model is configured (no [llm] section, no OPENAI_API_KEY).");
                say!("      Replaying a recorded session of the demo goal \"{DEMO_GOAL}\"{mode}:");
                say!("      the answers below come from a cassette, not from a live model.");
                if args.goal.trim() != DEMO_GOAL {
                    say!(
                        "      Your goal is run on the device, but the recorded answers were made for the demo goal."
                    );
                }
                config.llm = Some(demo_llm(args.reasoning)?);
            }
            embed(&mut config).await;
            let sims = if config.device.direct_devices.is_empty() {
                args.sims.max(1)
            } else {
                args.sims
            };
            let mesh = Mesh::start(config, sims).await?;
            if device.is_empty()
                && let Some(first) = mesh.sims.as_ref().and_then(|f| f.addrs().first().copied())
            {
                device = first.to_string();
            }
            let ep = mesh
                .endpoint(Service::Gateway)
                .context("the embedded gateway did not start")?;
            say!(
                "mesh: started in {} ms (gateway {ep})",
                started.elapsed().as_millis()
            );
            (ep, Some(mesh))
        }
    };
    let schema = match &args.schema {
        Some(s) if std::path::Path::new(s).is_file() => {
            Some(std::fs::read_to_string(s).with_context(|| format!("cannot read {s}"))?)
        }
        other => other.clone(),
    };
    let opts = ClientOptions {
        request_timeout: None,
        ..ClientOptions::default()
    };
    let mut client = GatewayClient::new(droidmesh_runtime::connect(&endpoint, &opts)?);
    let mode = if args.reasoning {
        Mode::Reasoning
    } else {
        Mode::Direct
    };
    let request = TaskRequest {
        goal: args.goal.clone(),
        device,
        mode: mode as i32,
        max_steps: args.max_steps,
        vision: args.vision,
        output_schema: schema,
        conversation_id: args.conversation.clone().unwrap_or_default(),
        ..TaskRequest::default()
    };
    let mut request = tonic::Request::new(request);
    if let Some(key) = args.api_key.as_deref().filter(|_| args.gateway.is_some()) {
        let value = format!("Bearer {}", key.trim())
            .parse()
            .map_err(|_| anyhow::anyhow!("--api-key holds characters a header cannot carry"))?;
        request.metadata_mut().insert("authorization", value);
    }
    let what_to_do = if args.gateway.is_some() {
        "start one with `droidmesh up` or check --gateway"
    } else {
        "the embedded mesh stopped; run again"
    };
    let gateway_failed = |s: tonic::Status| {
        crate::reach::transport_error("gateway", &endpoint, &s, what_to_do)
            .unwrap_or_else(|| anyhow::anyhow!("{}", s.message()))
    };
    let mut stream = client
        .run_task(request)
        .await
        .map_err(gateway_failed)?
        .into_inner();
    let mut success = false;
    let mut progress = Progress::new();
    // On a terminal, a wait is shown as it goes (the ticks are not awaited elsewhere).
    let mut ticks = tokio::time::interval(crate::progress::TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            ev = stream.next() => {
                let Some(ev) = ev else { break };
                let ev = ev.map_err(|s| gateway_failed(s).context("the task's event stream broke"))?;
                if let Some(task_event::Kind::Completed(c)) = &ev.kind {
                    success = c.success;
                }
                progress.event(ev);
            }
            _ = ticks.tick(), if progress.on_terminal() => progress.tick(),
        }
    }
    progress.finish();
    if let Some(mesh) = mesh {
        mesh.shutdown().await?;
    }
    Ok(success)
}
