//! The droidmesh binary: `sim`, `serve <service>`, `up`, `run`, `state`, `devices`, `keys`,
//! `tls`. `main` parses the command line and dispatches to one function per command
//! (`commands`); each loads and validates its config before binding any port.
mod admin;
mod commands;
mod config;
mod eval;
mod mesh;
mod model_flags;
mod output;
mod progress;
mod reach;
mod run;
mod services;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "droidmesh",
    version,
    about = "LLM agents that operate Android phones, as gRPC microservices"
)]
struct Cli {
    /// Config file (TOML). DROIDMESH_SECTION__KEY environment variables override it.
    #[arg(long, global = true, env = "DROIDMESH_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run simulated Android devices that speak ADB over TCP (attach with `adb connect`).
    Sim(commands::SimArgs),
    /// Run a task and show its progress (starts the mesh in-process unless --gateway is given).
    Run(Box<run::RunArgs>),
    /// Run the task suite on simulated phones and score the agent by what each task's check
    /// reads back from the phone (with no model configured: the suite's scripted solutions).
    Eval(Box<eval::EvalArgs>),
    /// Run every service in this process, each on its own port, with simulated devices.
    Up(commands::UpArgs),
    /// Serve one service (as each Kubernetes Deployment does).
    Serve(commands::ServeArgs),
    /// Print a device's screen as the agents see it: indexed elements and phone state.
    State(commands::StateArgs),
    /// List the devices the device service sees, with their leases.
    Devices(commands::DevicesArgs),
    /// API keys for the gateway (`gateway.auth.keys_file`).
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Certificates for the `[tls]` section.
    Tls {
        #[command(subcommand)]
        action: TlsAction,
    },
}

#[derive(Debug, Subcommand)]
enum TlsAction {
    /// Write a private CA (`ca.crt`, `ca.key`; the folder's own if it has one) and a
    /// certificate it signs (`NAME.crt`, `NAME.key`), good for servers and clients, to try TLS
    /// and mutual TLS on one machine. Not for production: the keys are not encrypted.
    DevCerts(commands::TlsDevCertsArgs),
}

#[derive(Debug, Subcommand)]
enum KeysAction {
    /// Print a fresh random key once, and the entry to add to the keys file (its hash only).
    New(commands::KeyArgs),
}

#[tokio::main]
async fn main() {
    // An error is a message with its causes, not a stack trace (whatever RUST_BACKTRACE says);
    // the exit code is 1, as for a task that failed.
    if let Err(e) = dispatch(Cli::parse()).await {
        let _ = writeln!(std::io::stderr(), "error: {}", output::error_text(&e));
        std::process::exit(1);
    }
}

async fn dispatch(cli: Cli) -> Result<()> {
    let config = cli.config;
    match cli.command {
        Command::Sim(args) => commands::sim(args).await,
        Command::Run(args) => commands::run(config, *args).await,
        Command::Eval(args) => commands::eval(config, *args).await,
        Command::Up(args) => commands::up(config, args).await,
        Command::Serve(args) => commands::serve(config, args).await,
        Command::State(args) => commands::state(config, args).await,
        Command::Devices(args) => commands::devices(config, args).await,
        Command::Keys {
            action: KeysAction::New(args),
        } => commands::keys_new(args),
        Command::Tls {
            action: TlsAction::DevCerts(args),
        } => commands::tls_dev_certs(args),
    }
}
