//! `droidmesh eval`: the task suite run against the configured model (or one of the suite's
//! scripted agents) on simulated phones, each task on a phone reset to its first start and set
//! up as the task says, several at once; each task's check then reads the phone's state back.
//! The mesh runs embedded in this process, as `run` without `--gateway`.
mod agents;
mod report;
mod select;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use droidmesh_eval::{Instance, Phone, ShellOutput};
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::{CancelTaskRequest, Mode, TaskRequest, task_event};
use droidmesh_runtime::ClientOptions;
use droidmesh_sim::SimDevice;
use tokio_stream::StreamExt;

pub use agents::Scripted;
use report::{Report, Summary, TaskRecord};

use crate::config::Config;
use crate::mesh::{Mesh, Service};
use crate::model_flags::ModelArgs;
use crate::output::say;

/// Most tasks run at once (each on its own simulated phone).
const MAX_PARALLEL: usize = 64;

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Templates to run, as `family/template` globs (`settings/*`); repeat for more. All
    /// when absent.
    #[arg(long = "tasks", value_name = "GLOB")]
    pub tasks: Vec<String>,
    /// Instances of each template (seeds 0 to N-1; 1 to 1000, and a run makes at most 10000
    /// instances in all).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=select::MAX_SEEDS))]
    pub seeds: u64,
    /// Tasks run at once, each on its own simulated phone.
    #[arg(long, default_value_t = 2)]
    pub parallel: usize,
    /// Reasoning mode (a manager plans, the executor acts) instead of CodeAct.
    #[arg(long)]
    pub reasoning: bool,
    /// Step budget of every task, instead of each task's own.
    #[arg(long)]
    pub max_steps: Option<u32>,
    /// A directory of task files to run instead of the built-in suite.
    #[arg(long, value_name = "DIR")]
    pub suite: Option<PathBuf>,
    /// Run one of the suite's scripted agents instead of a model: `oracle` (each task's
    /// scripted solution), `near-miss` (each task's wrong solution), `noop` (finishes at once).
    #[arg(long, value_enum)]
    pub agent: Option<Scripted>,
    /// The keyboard app the simulated phones have, for typing text beyond ASCII: `adb`
    /// (ADBKeyBoard), `portal` (the companion app, which also serves the UI tree) or `none`
    /// (tasks with such text then fail to type it, as on a phone without either).
    #[arg(long, value_enum, default_value = "adb")]
    pub keyboard: Keyboard,
    /// Longest a task may run before it is cancelled and counted as failed.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    pub task_timeout: Duration,
    /// Write the whole run as JSON (every task's parameters, seed, outcome and finding).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the run as JUnit XML.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Record every model answer of the run to a cassette (a live model, or a scripted
    /// agent). Tasks with the same goal run one after another, so a replay pairs each answer
    /// with the task that got it.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Replay a cassette recorded with --record instead of calling a model: the run
    /// reproduces the recorded one (timings aside).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["agent"])]
    pub replay: Option<PathBuf>,
    /// List the selected task instances and their goals, and run nothing.
    #[arg(long)]
    pub list: bool,
    /// A directory of app cards (`android/app_cards.json` naming a Markdown card per package)
    /// the agents read, besides the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub app_cards: Option<PathBuf>,
    #[command(flatten)]
    pub llm: ModelArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Keyboard {
    Adb,
    Portal,
    None,
}

/// A simulated phone of the embedded mesh, reached through its shell.
struct SimPhone(SimDevice);

impl Phone for SimPhone {
    async fn shell(&self, command: &str) -> std::result::Result<ShellOutput, String> {
        let device = self.0.clone();
        let command = command.to_owned();
        let out = tokio::task::spawn_blocking(move || device.shell(&command))
            .await
            .map_err(|e| format!("the shell command did not finish: {e}"))?;
        let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(ShellOutput {
            stdout,
            exit_code: out.code,
        })
    }
}

pub async fn eval(args: EvalArgs, mut config: Config) -> Result<bool> {
    if !(1..=MAX_PARALLEL).contains(&args.parallel) {
        bail!(
            "--parallel must be 1 to {MAX_PARALLEL}, got {}",
            args.parallel
        );
    }
    let (families, suite) = match &args.suite {
        Some(dir) => (
            droidmesh_eval::task::load_dir(dir)?,
            dir.display().to_string(),
        ),
        None => (droidmesh_eval::builtin()?, "built-in".to_owned()),
    };
    let instances = select::instances(&families, &args.tasks, args.seeds)?;
    if args.list {
        for i in &instances {
            say!("{:<34} {}", i.id, i.goal);
        }
        return Ok(true);
    }
    if let Some(dir) = &args.app_cards {
        config.use_app_cards(dir)?;
    }
    let flagged = args.llm.apply(false, &mut config.llm, &|var| {
        std::env::var(var).is_ok_and(|k| !k.trim().is_empty())
    })?;
    let mut agent = args.agent;
    if args.replay.is_some() && flagged {
        bail!("--replay plays a cassette instead of calling a model: drop the model flags");
    }
    if agent.is_none()
        && args.replay.is_none()
        && !flagged
        && config.llm.is_none()
        && !crate::run::api_key_in_env()
    {
        say!("note: no model is configured (no [llm] section, no OPENAI_API_KEY, no --llm-url).");
        say!("      Running the suite's scripted solutions (--agent oracle): this measures the");
        say!("      mesh and the suite's checks on the simulated phones, not a model.");
        agent = Some(Scripted::Oracle);
    }
    if agent.is_some() && args.reasoning {
        bail!("the scripted agents answer CodeAct prompts: run --agent without --reasoning");
    }
    if agent.is_some() && flagged {
        bail!("--agent runs a scripted agent instead of a model: drop the model flags, or --agent");
    }
    let scripted = match agent {
        Some(kind) => {
            let server = agents::ScriptedModel::start(kind, &instances).await?;
            config.llm = Some(scripted_llm(kind, &server.base_url())?);
            Some((kind, server))
        }
        None => None,
    };
    let cassettes = crate::run::CassetteFlags {
        record: args.record.as_deref(),
        replay: args.replay.as_deref(),
    };
    crate::run::apply_cassettes(&cassettes, &mut config, flagged || scripted.is_some())?;
    let agent_name = match (&scripted, &args.replay) {
        (Some((kind, _)), _) => format!("scripted {}", kind.name()),
        (None, Some(path)) => format!("replay of {}", path.display()),
        (None, None) => model_name(&config),
    };
    crate::run::embed(&mut config).await;
    // Every task runs on a simulated phone it can reset: phones attached otherwise are not used.
    config.device.direct_devices.clear();
    config.device.adb_server.clear();
    let started = Instant::now();
    let phones = droidmesh_sim::SimOptions {
        devices: args.parallel,
        adb_keyboard: args.keyboard == Keyboard::Adb,
        portal: args.keyboard == Keyboard::Portal,
        ..droidmesh_sim::SimOptions::default()
    };
    let mesh = Mesh::start_with_phones(config, phones).await?;
    let endpoint = mesh
        .endpoint(Service::Gateway)
        .context("the embedded gateway did not start")?;
    let phones: Vec<SimDevice> = mesh
        .sims
        .as_ref()
        .map(|f| f.devices().to_vec())
        .unwrap_or_default();
    let mode = if args.reasoning {
        "reasoning"
    } else {
        "direct"
    };
    say!(
        "eval: {} task instances ({} templates × {} seeds) with {agent_name} in {mode} mode, {} at a time",
        instances.len(),
        instances.len() as u64 / args.seeds.max(1),
        args.seeds,
        phones.len()
    );
    let records = run_all(&args, &endpoint, phones, instances, started).await?;
    mesh.shutdown().await?;
    drop(scripted);
    let report = Report {
        agent: agent_name,
        mode,
        suite,
        summary: Summary::of(&records, started.elapsed()),
        tasks: records,
    };
    say!("\n{}", report::table(&report));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        say!("wrote {}", path.display());
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
        say!("wrote {}", path.display());
    }
    Ok(report.summary.errors == 0)
}

/// Every agent talks to the scripted agent's server.
fn scripted_llm(kind: Scripted, base_url: &str) -> Result<droidmesh_llm::LlmConfig> {
    let mut llm = droidmesh_llm::LlmConfig::default();
    llm.providers.insert(
        "scripted".into(),
        droidmesh_llm::ProviderConfig::new("scripted", droidmesh_llm::WireFormat::Openai, base_url),
    );
    llm.profiles.insert(
        droidmesh_llm::DEFAULT_PROFILE.to_owned(),
        droidmesh_llm::ProfileConfig::new("scripted", format!("droidmesh-{}", kind.name())),
    );
    if let Err(problems) = llm.validate() {
        bail!("the scripted agent's model config: {}", problems.join("; "));
    }
    Ok(llm)
}

/// `provider/model` of the default profile, for the report.
fn model_name(config: &Config) -> String {
    config
        .llm
        .as_ref()
        .and_then(|l| l.profile(droidmesh_llm::DEFAULT_PROFILE))
        .map_or_else(
            || "the default model".to_owned(),
            |(_, p)| format!("{}/{}", p.provider, p.model),
        )
}

/// Runs every instance, at most one per phone at a time, and returns their records in order.
async fn run_all(
    args: &EvalArgs,
    endpoint: &str,
    phones: Vec<SimDevice>,
    instances: Vec<Instance>,
    started: Instant,
) -> Result<Vec<TaskRecord>> {
    let opts = ClientOptions {
        request_timeout: None,
        ..ClientOptions::default()
    };
    let client = GatewayClient::new(droidmesh_runtime::connect(endpoint, &opts)?);
    let (free_tx, free_rx) = tokio::sync::mpsc::channel(phones.len().max(1));
    for p in phones {
        free_tx.send(p).await.context("the phone pool closed")?;
    }
    let total = instances.len();
    // (started, finished, failed)
    let progress = Arc::new(std::sync::Mutex::new((0usize, 0usize, 0usize)));
    let free_rx = Arc::new(tokio::sync::Mutex::new(free_rx));
    let mut running = tokio::task::JoinSet::new();
    for chain in same_goal_chains(instances) {
        let (client, free_tx, free_rx) = (client.clone(), free_tx.clone(), free_rx.clone());
        let progress = progress.clone();
        let (mode, max_steps, timeout) = (args.reasoning, args.max_steps, args.task_timeout);
        running.spawn(async move {
            let mut done = Vec::with_capacity(chain.len());
            for (index, inst) in chain {
                let Some(phone) = free_rx.lock().await.recv().await else {
                    break;
                };
                progress.lock().unwrap_or_else(|p| p.into_inner()).0 += 1;
                let record = run_one(client.clone(), &phone, &inst, mode, max_steps, timeout).await;
                let _ = free_tx.send(phone).await;
                let (started_n, finished, failed) = {
                    let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
                    p.1 += 1;
                    p.2 += usize::from(!record.success);
                    *p
                };
                let running_n = started_n - finished;
                say!(
                    "[{finished}/{total} done, {running_n} running, {failed} failed, {:.1} s] {} {}: {}",
                    started.elapsed().as_secs_f64(),
                    record.id,
                    if record.success { "passed" } else { "FAILED" },
                    record.finding
                );
                done.push((index, record));
            }
            done
        });
    }
    let mut records: Vec<Option<TaskRecord>> = vec![None; total];
    while let Some(joined) = running.join_next().await {
        for (index, record) in joined.context("a task's runner stopped")? {
            records[index] = Some(record);
        }
    }
    if records.iter().any(Option::is_none) {
        bail!("the phone pool closed before every task ran");
    }
    Ok(records.into_iter().flatten().collect())
}

/// The instances grouped by goal, each group in suite order: tasks with the same goal (the
/// same template drawn the same way by two seeds) run one after another, so a model's
/// answers, recorded or replayed by prompt, stay paired with the task that got them.
fn same_goal_chains(instances: Vec<Instance>) -> Vec<Vec<(usize, Instance)>> {
    let mut chains: Vec<Vec<(usize, Instance)>> = Vec::new();
    let mut by_goal: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, inst) in instances.into_iter().enumerate() {
        match by_goal.get(&inst.goal) {
            Some(&c) => chains[c].push((index, inst)),
            None => {
                by_goal.insert(inst.goal.clone(), chains.len());
                chains.push(vec![(index, inst)]);
            }
        }
    }
    chains
}

/// One instance: reset and set up its phone, run it through the gateway, check the phone.
async fn run_one(
    mut client: GatewayClient<droidmesh_runtime::TracedChannel>,
    phone: &SimDevice,
    inst: &Instance,
    reasoning: bool,
    max_steps: Option<u32>,
    timeout: Duration,
) -> TaskRecord {
    let started = Instant::now();
    phone
        .state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .reset();
    let sim = SimPhone(phone.clone());
    if let Err(e) = droidmesh_eval::set_up(&sim, inst).await {
        return TaskRecord::failed(inst, format!("setup failed: {e}"), started.elapsed());
    }
    let mut record = TaskRecord::new(inst);
    record.setup_us = started.elapsed().as_micros() as u64;
    let request = TaskRequest {
        goal: inst.goal.clone(),
        device: phone.addr.to_string(),
        mode: if reasoning {
            Mode::Reasoning
        } else {
            Mode::Direct
        } as i32,
        max_steps: Some(max_steps.unwrap_or(inst.max_steps)),
        ..TaskRequest::default()
    };
    let ran = tokio::time::timeout(timeout, follow(&mut client, request, &mut record)).await;
    match ran {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return TaskRecord::failed(inst, e, started.elapsed()),
        Err(_) => {
            let task_id = record.agent_answer.clone();
            let _ = client
                .cancel_task(CancelTaskRequest {
                    task_id,
                    reason: "droidmesh eval: the task ran past --task-timeout".into(),
                })
                .await;
            let e = format!("the task ran past --task-timeout ({timeout:?}) and was cancelled");
            return TaskRecord::failed(inst, e, started.elapsed());
        }
    }
    match inst.check.run(&sim, &record.agent_answer).await {
        Ok(f) => record.found(f),
        Err(e) => {
            return TaskRecord::failed(inst, format!("the check failed: {e}"), started.elapsed());
        }
    }
    record.wall_ms = started.elapsed().as_millis() as u64;
    record
}

/// Runs the task and follows its events to the end, filling the record. While it runs, the
/// record's answer holds the task's id (so a task past its time can be cancelled).
async fn follow(
    client: &mut GatewayClient<droidmesh_runtime::TracedChannel>,
    request: TaskRequest,
    record: &mut TaskRecord,
) -> std::result::Result<(), String> {
    let mut stream = client
        .run_task(request)
        .await
        .map_err(|s| format!("the gateway refused the task: {}", s.message()))?
        .into_inner();
    while let Some(ev) = stream.next().await {
        let ev = ev.map_err(|s| format!("the event stream broke: {}", s.message()))?;
        if record.agent_answer.is_empty() {
            record.agent_answer.clone_from(&ev.task_id);
        }
        match ev.kind {
            Some(task_event::Kind::Usage(u)) => record.model_ms += u.latency_ms,
            Some(task_event::Kind::Completed(c)) => {
                let usage = c.usage.unwrap_or_default();
                record.agent_claimed_success = c.success;
                record.agent_answer = if c.answer.is_empty() {
                    c.error
                } else {
                    c.answer
                };
                record.steps = c.steps;
                record.tokens_in = usage.input_tokens;
                record.tokens_out = usage.output_tokens;
                record.model_calls = u64::from(usage.calls);
                return Ok(());
            }
            _ => {}
        }
    }
    Err("the task's event stream ended before the task completed".into())
}
