//! `runtime-cloud sandbox …`: change a sandbox target out of band, as a person with cluster
//! access would, and arm failures for tests. A change to what runs is observed at once
//! (`RUNTIME_CLOUD_SANDBOX_OBSERVE_CHANGES`), as a watched Kubernetes cluster's is: the sandbox
//! is a file, and the command that writes it is the one that knows it changed.

use crate::config::Config;
use runtime_cloud_activities::ports::Target;
use runtime_cloud_activities::sandbox::{Sandbox, SandboxDocument};
use runtime_cloud_models::Workload;

/// What to do to the target.
#[derive(Debug, clap::Subcommand)]
pub enum SandboxCommand {
    /// Print the target's document.
    Show,
    /// Make the next apply fail with this reason.
    FailNextApply {
        /// The failure reason, naming the failing resource.
        #[arg(long)]
        reason: String,
    },
    /// Make every apply take this long (a slow runner).
    ApplyDelay {
        /// Milliseconds.
        #[arg(long)]
        ms: u64,
    },
    /// Make every observation take this long (a slow cluster API).
    ObserveDelay {
        /// Milliseconds.
        #[arg(long)]
        ms: u64,
    },
    /// Scale a workload (`kubectl scale`).
    Scale {
        #[arg(long)]
        workload: String,
        #[arg(long)]
        replicas: u32,
    },
    /// Run another version of a workload (`kubectl set image`).
    SetVersion {
        #[arg(long)]
        workload: String,
        #[arg(long)]
        version: String,
    },
    /// Delete a workload.
    Delete {
        #[arg(long)]
        workload: String,
    },
    /// Start a workload nobody declared.
    AddUnmanaged {
        #[arg(long)]
        workload: String,
        #[arg(long, default_value = "deployment")]
        kind: String,
        #[arg(long, default_value = "0.0.1")]
        version: String,
        #[arg(long, default_value_t = 1)]
        replicas: u32,
    },
    /// Bind (or with no `--reference`, unbind) a configuration key of a workload.
    SetConfig {
        #[arg(long)]
        workload: String,
        #[arg(long)]
        key: String,
        #[arg(long)]
        reference: Option<String>,
    },
    /// Bind (or with no `--reference`, unbind) a secret of a workload. References only.
    SetSecret {
        #[arg(long)]
        workload: String,
        #[arg(long)]
        key: String,
        #[arg(long)]
        reference: Option<String>,
    },
    /// Make observations report what runs now from here on, whatever applies do (`--on`), or
    /// what runs again (`--off`): an observer that lags.
    FreezeObservation {
        #[arg(long, conflicts_with = "off")]
        on: bool,
        #[arg(long)]
        off: bool,
    },
    /// Make the target unreachable (`--on`) or reachable again (`--off`).
    Unreachable {
        #[arg(long, conflicts_with = "off")]
        on: bool,
        #[arg(long)]
        off: bool,
    },
}

fn workload<'a>(doc: &'a mut SandboxDocument, name: &str) -> anyhow::Result<&'a mut Workload> {
    doc.workloads
        .iter_mut()
        .find(|w| w.name == name)
        .ok_or_else(|| anyhow::anyhow!("no workload `{name}` runs in this environment"))
}

fn bind(refs: &mut runtime_cloud_models::Refs, key: String, reference: Option<String>) {
    match reference {
        Some(r) => {
            refs.insert(key, r);
        }
        None => {
            refs.remove(&key);
        }
    }
}

/// Runs a sandbox command against `tenant`/`environment`.
pub async fn run(
    config: &Config,
    tenant: &str,
    environment: &str,
    cmd: SandboxCommand,
) -> anyhow::Result<()> {
    let sandbox = Sandbox::new(&config.data_dir);
    let target = Target {
        tenant_id: tenant.to_owned(),
        environment_id: environment.to_owned(),
        limits: None,
    };
    // What changes what runs there, as someone with cluster access would.
    let out_of_band = matches!(
        cmd,
        SandboxCommand::Scale { .. }
            | SandboxCommand::SetVersion { .. }
            | SandboxCommand::Delete { .. }
            | SandboxCommand::AddUnmanaged { .. }
            | SandboxCommand::SetConfig { .. }
            | SandboxCommand::SetSecret { .. }
    );
    match cmd {
        SandboxCommand::Show => {
            let doc = sandbox.load(&target).await?;
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        SandboxCommand::FailNextApply { reason } => {
            sandbox
                .modify(&target, |d| d.fail_next_apply = Some(reason))
                .await?;
        }
        SandboxCommand::ApplyDelay { ms } => {
            sandbox.modify(&target, |d| d.apply_delay_ms = ms).await?;
        }
        SandboxCommand::ObserveDelay { ms } => {
            sandbox.modify(&target, |d| d.observe_delay_ms = ms).await?;
        }
        SandboxCommand::Scale {
            workload: name,
            replicas,
        } => {
            sandbox
                .modify(&target, |d| {
                    workload(d, &name).map(|w| w.replicas = replicas)
                })
                .await??;
        }
        SandboxCommand::SetVersion {
            workload: name,
            version,
        } => {
            sandbox
                .modify(&target, |d| workload(d, &name).map(|w| w.version = version))
                .await??;
        }
        SandboxCommand::Delete { workload: name } => {
            sandbox
                .modify(&target, |d| {
                    let before = d.workloads.len();
                    d.workloads.retain(|w| w.name != name);
                    anyhow::ensure!(
                        d.workloads.len() < before,
                        "no workload `{name}` runs in this environment"
                    );
                    Ok(())
                })
                .await??;
        }
        SandboxCommand::AddUnmanaged {
            workload: name,
            kind,
            version,
            replicas,
        } => {
            sandbox
                .modify(&target, |d| {
                    anyhow::ensure!(
                        d.workloads.iter().all(|w| w.name != name),
                        "workload `{name}` already runs"
                    );
                    d.workloads.push(Workload {
                        name,
                        kind,
                        version,
                        replicas,
                        config_refs: Default::default(),
                        secret_refs: Default::default(),
                    });
                    Ok(())
                })
                .await??;
        }
        SandboxCommand::SetConfig {
            workload: name,
            key,
            reference,
        } => {
            sandbox
                .modify(&target, |d| {
                    workload(d, &name).map(|w| bind(&mut w.config_refs, key, reference))
                })
                .await??;
        }
        SandboxCommand::SetSecret {
            workload: name,
            key,
            reference,
        } => {
            sandbox
                .modify(&target, |d| {
                    workload(d, &name).map(|w| bind(&mut w.secret_refs, key, reference))
                })
                .await??;
        }
        SandboxCommand::FreezeObservation { on, off } => {
            anyhow::ensure!(on || off, "say --on or --off");
            sandbox
                .modify(&target, |d| {
                    d.frozen_observation = on.then(|| d.workloads.clone());
                })
                .await?;
        }
        SandboxCommand::Unreachable { on, off } => {
            anyhow::ensure!(on || off, "say --on or --off");
            sandbox.modify(&target, |d| d.unreachable = on).await?;
        }
    }
    if out_of_band && config.sandbox_observe_changes {
        observe_now(config, tenant, environment).await;
    }
    Ok(())
}

/// How long the command waits for Temporal to take the observation.
const OBSERVE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Tells the environment to observe itself now, as a watched cluster's change does
/// (`runtime_cloud_temporal::observations::changed`); with no Temporal to tell, the change
/// waits for the sweep or `POST …/observe`, and the command says so.
async fn observe_now(config: &Config, tenant: &str, environment: &str) {
    let told = tokio::time::timeout(OBSERVE_WAIT, async {
        let client = crate::app::connect_temporal(config).await?;
        runtime_cloud_temporal::observations::changed(
            &client,
            &config.task_queue,
            tenant,
            environment,
        )
        .await?;
        anyhow::Ok(())
    })
    .await;
    match told {
        Ok(Ok(())) => eprintln!("changed; {environment} is being observed"),
        Ok(Err(e)) => eprintln!(
            "changed; {environment} is not observed now ({e:#}): the sweep observes it within \
             five minutes, or POST …/environments/{environment}/observe"
        ),
        Err(_) => eprintln!(
            "changed; no Temporal answered within {}s to observe {environment} now: the sweep \
             observes it within five minutes, or POST …/environments/{environment}/observe",
            OBSERVE_WAIT.as_secs()
        ),
    }
}
