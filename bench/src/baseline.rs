//! The baselines: the smallest Temporal workflows with the same shape as the product's, whose
//! activities do nothing. Run on the same Temporal server by a worker process with the same
//! settings as the product's (`WorkerOptions` defaults, `Runtime::from_current_tokio`), they
//! measure what Temporal itself costs on this machine, so the product's numbers can be read as
//! a ratio to them.
//!
//! - [`BaselineRun`]: one provisioning run's six activities in sequence (take the lock, plan,
//!   project Planned, project Applying, apply, project Applied; see
//!   `workflows/src/provisioning_run.rs`), all regular activities ([`REGULAR_RUN`], the
//!   issue's baseline) or with the product's split of local and regular activities
//!   ([`PRODUCT_SHAPED_RUN`]).
//! - [`BaselineSweep`]: the observation sweep's shape: a page activity, the page's
//!   environments in batch activities of 25 all in flight at once, 200 per run then
//!   continue-as-new, a closing activity (`workflows/src/observation_sweep.rs`).

use runtime_cloud_workflows::search_attributes::PROVISIONING_STATE;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{
    ActivityOptions, ContinueAsNewOptions, LocalActivityOptions, Runtime, Worker, WorkerOptions,
    WorkflowContext, WorkflowContextView, WorkflowResult,
};

/// A run's six steps as regular activities (`R`): the baseline.
pub const REGULAR_RUN: &str = "RRRRRR";
/// The same six steps split as the product runs them: request-lock, plan, project Planned,
/// project Applying, apply, project Applied, with the quick steps local (`L`).
pub const PRODUCT_SHAPED_RUN: &str = "LRLLRL";
/// Environments per sweep run and per batch activity, as in `ObservationSweep`.
const PAGE: u64 = 200;
const BATCH: usize = 25;

/// No-op activities.
pub struct NoopActivities;

#[activities]
impl NoopActivities {
    /// Does nothing.
    #[activity]
    pub async fn noop(_ctx: ActivityContext) -> Result<(), ActivityError> {
        Ok(())
    }

    /// Observes a batch of environments: nothing, like `inventory.observe-batch` without the
    /// target or the DB.
    #[activity]
    pub async fn batch(
        _ctx: ActivityContext,
        environments: Vec<String>,
    ) -> Result<u32, ActivityError> {
        Ok(environments.len() as u32)
    }

    /// A page of synthetic environment ids, like `list_environments` without the DB.
    #[activity]
    pub async fn page(
        _ctx: ActivityContext,
        req: SweepInput,
    ) -> Result<Vec<String>, ActivityError> {
        let end = (req.after + PAGE).min(req.total);
        Ok((req.after..end)
            .map(|i| format!("{}/{i}", req.prefix))
            .collect())
    }
}

/// Short activities, as the product's `quick_opts`.
fn opts() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(30)).build()
}

/// A provisioning run without the product: no-op activities in sequence, one per character of
/// its shape, `R` a regular activity and `L` a local one; `U` upserts the `ProvisioningState`
/// search attribute, and a run whose shape has an `A` is started with the product's search
/// attributes and its tenant's fairness key (`S` only the attributes, `F` only the key;
/// `throughput --shape`).
#[workflow]
pub struct BaselineRun {
    shape: String,
}

#[workflow_methods]
impl BaselineRun {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, shape: String) -> Self {
        Self { shape }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let shape = ctx.state(|s| s.shape.clone());
        for step in shape.chars() {
            if matches!(step, 'A' | 'S' | 'F') {
                // How it was started (see `throughput`): no step.
                continue;
            }
            if step == 'U' {
                ctx.upsert_search_attributes([PROVISIONING_STATE.value_set("Applying".to_owned())]);
                continue;
            }
            if step == 'L' {
                let local = LocalActivityOptions::builder()
                    .start_to_close_timeout(Duration::from_secs(30))
                    .build();
                ctx.execute_local_activity(NoopActivities::noop, (), local)
                    .await?;
            } else {
                ctx.execute_activity(NoopActivities::noop, (), opts())
                    .await?;
            }
        }
        Ok(())
    }
}

/// Where a baseline sweep is; also its continue-as-new input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepInput {
    /// Environment ids are `{prefix}/{index}`.
    pub prefix: String,
    pub total: u64,
    pub after: u64,
}

/// The sweep without the product.
#[workflow]
pub struct BaselineSweep {
    input: SweepInput,
}

#[workflow_methods]
impl BaselineSweep {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: SweepInput) -> Self {
        Self { input }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<u64> {
        let input = ctx.state(|s| s.input.clone());
        let page = ctx
            .execute_activity(NoopActivities::page, input.clone(), opts())
            .await?;
        let running: Vec<_> = page
            .chunks(BATCH)
            .map(|batch| ctx.execute_activity(NoopActivities::batch, batch.to_vec(), opts()))
            .collect();
        let _ = temporalio_sdk::workflows::join_all(running).await;
        let after = input.after + page.len() as u64;
        if after < input.total {
            let next = SweepInput { after, ..input };
            ctx.continue_as_new(next, ContinueAsNewOptions::default())?;
        }
        // The product closes with `mark_stale`.
        ctx.execute_activity(NoopActivities::noop, (), opts())
            .await?;
        Ok(after)
    }
}

/// Runs the baseline worker on `task_queue` until the process is killed: the `rc-bench
/// baseline-worker` subcommand. Built like the `runtime-cloud` binary's `worker::run`.
pub async fn run_worker(temporal_address: &str, task_queue: &str) -> anyhow::Result<()> {
    let client = runtime_cloud_temporal::connect(temporal_address, "default").await?;
    let runtime = Runtime::from_current_tokio(Default::default()).map_err(anyhow::Error::msg)?;
    let options = WorkerOptions::new(task_queue.to_owned())
        .register_workflow::<BaselineRun>()?
        .register_workflow::<BaselineSweep>()?
        .register_activities(NoopActivities)
        .build();
    let mut worker = Worker::new(&runtime, client, options)?;
    worker.run().await?;
    Ok(())
}

/// Starts `rc-bench baseline-worker` (this executable) as its own process, as the product's
/// worker is; killed when the returned handle drops.
pub fn spawn_worker(
    task_queue: &str,
    log_dir: &std::path::Path,
) -> anyhow::Result<crate::stack::Proc> {
    let log = crate::stack::log_file(log_dir, "baseline-worker")?;
    let child = std::process::Command::new(std::env::current_exe()?)
        .args(["baseline-worker", "--task-queue", task_queue])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    Ok(crate::stack::Proc { child })
}
