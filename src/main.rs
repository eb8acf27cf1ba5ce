//! `runtime-cloud`: parses arguments, sets up logging, and calls the library.

use clap::{Parser, Subcommand};
use runtime_cloud::config::{self, Config};
use runtime_cloud::{app, cli, inbound_cli, sandbox_cli, telemetry};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "runtime-cloud",
    version,
    about = "Provision and reconcile infrastructure through durable Temporal workflows"
)]
struct Cli {
    /// A TOML configuration file (environment variables override it).
    #[arg(long, global = true, env = config::CONFIG_FILE.env)]
    config: Option<PathBuf>,
    /// `text` or `json` log lines on stderr.
    #[arg(
        long,
        global = true,
        default_value = config::LOG_FORMAT.default,
        env = config::LOG_FORMAT.env
    )]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Everything in one process on the embedded defaults: a local Temporal dev server
    /// (file-backed, started or reused), a SQLite read DB, the worker and the API.
    Dev {
        /// The Temporal frontend port (reused when something already listens there).
        #[arg(long, default_value_t = 7233)]
        temporal_port: u16,
        /// The Temporal Web UI port.
        #[arg(long, default_value_t = 8233)]
        ui_port: u16,
    },
    /// Run a worker: every workflow and activity; with `--pool`, a worker of that worker pool
    /// (only the plans and applies of the environments bound to it).
    Worker {
        /// The worker pool to serve (`/factory/capacity/pools`).
        #[arg(long)]
        pool: Option<String>,
    },
    /// Run the HTTP API.
    Api,
    /// Apply the read-table migrations.
    Migrate,
    /// Mint a bearer token for a tenant.
    Token {
        /// The tenant the token acts in.
        #[arg(long)]
        tenant: String,
        /// A scope; repeat for several.
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        /// A role (`Operator`, `PlatformAdmin`, `Observer`); repeat for several.
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Who the token is for.
        #[arg(long, default_value = "operator")]
        subject: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
    },
    /// Change a sandbox target out of band.
    Sandbox {
        #[arg(long)]
        tenant: String,
        #[arg(long = "env")]
        environment: String,
        #[command(subcommand)]
        command: sandbox_cli::SandboxCommand,
    },
    /// Inbound events: sign a test event's approval with a source's key.
    Inbound {
        #[command(subcommand)]
        command: inbound_cli::InboundCommand,
    },
    /// Save the API's address and a bearer token for the commands below (`--token`, or read
    /// from stdin).
    Login {
        /// The bearer token (prefer stdin: a flag shows in the process list).
        #[arg(long)]
        token: Option<String>,
        #[command(flatten)]
        remote: cli::Remote,
    },
    /// Provisioning runs: list, get, plan, approve, reject, cancel, logs.
    Runs {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Runs,
    },
    /// Environments: list, get, observe, inventory, drift.
    Envs {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Envs,
    },
    /// Reconciliation proposals: list, accept, reject.
    Proposals {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Proposals,
    },
    /// Deployment specifications: declare, list.
    Specs {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Specs,
    },
    /// Fleet rollouts: list, get, start, resume, abort, roll back.
    Rollouts {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Rollouts,
    },
    /// Quarantined workload versions: list, place, lift.
    Quarantines {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Quarantines,
    },
    /// The fleet: summary, instances, off-boarding orders and their archives.
    Fleet {
        #[command(flatten)]
        remote: cli::Remote,
        #[command(subcommand)]
        command: cli::Fleet,
    },
    /// Print docs/configuration.md, the table of every setting (see `config::REGENERATE`).
    #[command(hide = true)]
    ConfigDocs,
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let cli = match cli.command {
        Command::ConfigDocs => {
            // Before loading: the docs are the table's, whatever this environment sets.
            print!("{}", config::markdown());
            return Ok(());
        }
        // Needs no configuration: it only signs.
        Command::Inbound { command } => return inbound_cli::run(command),
        command => Cli { command, ..cli },
    };
    // The operator commands talk to an API: no server configuration, no logging setup.
    let cli = match operator(cli.command) {
        Ok((remote, command)) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            std::process::exit(runtime.block_on(cli::run(&remote, command)));
        }
        Err(command) => Cli {
            command: *command,
            ..cli
        },
    };
    let config = Config::load(cli.config.as_deref())?;
    let service = match &cli.command {
        Command::Dev { .. } => "runtime-cloud-dev",
        Command::Worker { .. } => "runtime-cloud-worker",
        Command::Api => "runtime-cloud-api",
        _ => "runtime-cloud",
    };
    // Before the runtime: the OTLP exporter runs its blocking client on its own thread.
    let telemetry = telemetry::init(&cli.log_format, config.otlp_endpoint.as_deref(), service)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(run(cli.command, config));
    // Stop the runtime first, then flush spans outside it.
    drop(runtime);
    drop(telemetry);
    result
}

/// The operator command `command` is, if it is one; else `command` back.
fn operator(command: Command) -> Result<(cli::Remote, cli::Operator), Box<Command>> {
    Ok(match command {
        Command::Login { token, remote } => (
            remote.clone(),
            cli::Operator::Login {
                server: remote.server,
                token,
            },
        ),
        Command::Runs { remote, command } => (remote, cli::Operator::Runs(command)),
        Command::Envs { remote, command } => (remote, cli::Operator::Envs(command)),
        Command::Proposals { remote, command } => (remote, cli::Operator::Proposals(command)),
        Command::Specs { remote, command } => (remote, cli::Operator::Specs(command)),
        Command::Rollouts { remote, command } => (remote, cli::Operator::Rollouts(command)),
        Command::Quarantines { remote, command } => (remote, cli::Operator::Quarantines(command)),
        Command::Fleet { remote, command } => (remote, cli::Operator::Fleet(command)),
        other => return Err(Box::new(other)),
    })
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::Dev {
            temporal_port,
            ui_port,
        } => app::run_dev(&config, temporal_port, ui_port, shutdown_signal()).await,
        Command::Worker { pool: None } => {
            app::refuse_dev_only_settings(&config)?;
            app::run_worker(&config, shutdown_signal()).await
        }
        Command::Worker { pool: Some(pool) } => {
            app::refuse_dev_only_settings(&config)?;
            app::run_pool_worker(&config, &pool, shutdown_signal()).await
        }
        Command::Api => {
            app::refuse_dev_only_settings(&config)?;
            app::run_api(&config, Default::default(), shutdown_signal(), |addr| {
                println!("runtime-cloud api listening on http://{addr}");
            })
            .await
        }
        Command::Migrate => app::migrate(&config).await,
        Command::Token {
            tenant,
            scopes,
            roles,
            subject,
            ttl,
        } => {
            println!(
                "{}",
                app::mint_token(&config, &subject, &tenant, &scopes, &roles, ttl)?
            );
            Ok(())
        }
        Command::Sandbox {
            tenant,
            environment,
            command,
        } => sandbox_cli::run(&config, &tenant, &environment, command).await,
        Command::ConfigDocs => unreachable!("printed by main before the configuration loads"),
        Command::Inbound { .. } => unreachable!("signed by main before the configuration loads"),
        Command::Login { .. }
        | Command::Runs { .. }
        | Command::Envs { .. }
        | Command::Proposals { .. }
        | Command::Specs { .. }
        | Command::Rollouts { .. }
        | Command::Quarantines { .. }
        | Command::Fleet { .. } => unreachable!("operator commands run before the configuration"),
    }
}
