//! `runtime-cloud sandbox …`: change a sandbox target out of band, as a person with cluster
//! access would, and arm failures for tests.

use crate::config::Config;
use runtime_cloud_activities::ports::Target;
use runtime_cloud_activities::sandbox::Sandbox;

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
    };
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
    }
    Ok(())
}
