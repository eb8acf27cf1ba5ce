//! The worker: every workflow and activity of Runtime Cloud on one task queue.

use crate::Error;
use runtime_cloud_activities::ports::{Approvals, Observer, Policy, Runner};
use runtime_cloud_activities::{
    InventoryActivitiesImpl, ProvisioningActivitiesImpl, ScheduledActivitiesImpl,
};
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_workflows::{
    EnvironmentLock, FleetRollout, GitOpsReconciler, ObservationSweep, ObserveEnvironment,
    ProvisioningRun, ReconciliationProposal,
};
use sea_orm::DatabaseConnection;
use std::future::Future;
use std::sync::Arc;
use temporalio_client::Client;
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

/// What the worker's activities need.
pub struct WorkerDeps {
    /// The Temporal client (also used by activities that start or signal workflows).
    pub client: Client,
    /// The read DB.
    pub db: DatabaseConnection,
    /// The runner adapter.
    pub runner: Arc<dyn Runner>,
    /// The observer adapter.
    pub observer: Arc<dyn Observer>,
    /// The policy adapter.
    pub policy: Arc<dyn Policy>,
    /// The approvals adapter.
    pub approvals: Arc<dyn Approvals>,
    /// Where plan and apply logs are kept.
    pub artifacts: Arc<dyn runtime_cloud_activities::ports::ArtifactStore>,
    /// `RuntimeCloud:Provisioning`.
    pub provisioning: ProvisioningOptions,
    /// `RuntimeCloud:Inventory`.
    pub inventory: InventoryOptions,
    /// The task queue to poll.
    pub task_queue: String,
    /// Create the schedules paused (tests trigger them by hand).
    pub schedules_paused: bool,
    /// Answers fleet rollouts' SLO queries; none without a query service.
    pub slo: Option<Arc<dyn runtime_cloud_activities::slo::SloGuard>>,
}

/// Runs the worker until `shutdown` resolves, then drains it.
///
/// The worker's future is not `Send` (workflows run on a local set), so call this on the task
/// that owns it (`tokio::select!` / `join!` from `main`), never through `tokio::spawn`.
pub async fn run(deps: WorkerDeps, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let runtime = Runtime::from_current_tokio(Default::default())?;
    crate::schedules::ensure(&deps.client, &deps.task_queue, deps.schedules_paused).await?;
    let fleet = runtime_cloud_activities::fleet::FleetActivitiesImpl {
        db: deps.db.clone(),
        client: deps.client.clone(),
        task_queue: deps.task_queue.clone(),
        provisioning: deps.provisioning.clone(),
        slo: deps.slo.clone(),
    };
    let scheduled = ScheduledActivitiesImpl {
        db: deps.db.clone(),
        runner: deps.runner.clone(),
        inventory: deps.inventory.clone(),
        provisioning: deps.provisioning.clone(),
    };
    let lock_holder_check_secs = deps.provisioning.lock_holder_check_secs();
    let inventory = InventoryActivitiesImpl {
        db: deps.db.clone(),
        observer: deps.observer,
        policy: deps.policy.clone(),
        inventory: deps.inventory,
        provisioning: deps.provisioning,
    };
    let activities = ProvisioningActivitiesImpl {
        db: deps.db,
        runner: deps.runner,
        approvals: deps.approvals,
        policy: deps.policy,
        artifacts: deps.artifacts,
        client: deps.client.clone(),
        task_queue: deps.task_queue.clone(),
        lock_holder_check_secs,
    };
    let options = WorkerOptions::new(deps.task_queue.clone())
        .register_workflow::<ProvisioningRun>()?
        .register_workflow::<EnvironmentLock>()?
        .register_workflow::<ObserveEnvironment>()?
        .register_workflow::<ReconciliationProposal>()?
        .register_workflow::<ObservationSweep>()?
        .register_workflow::<GitOpsReconciler>()?
        .register_workflow::<FleetRollout>()?
        .register_activities(activities)
        .register_activities(inventory)
        .register_activities(scheduled)
        .register_activities(fleet)
        .build();
    let mut worker = Worker::new(&runtime, deps.client, options)?;
    let stop = worker.shutdown_handle();
    tracing::info!(task_queue = %deps.task_queue, "worker polling");
    let run = worker.run();
    tokio::pin!(run);
    tokio::select! {
        r = &mut run => return Ok(r?),
        _ = shutdown => stop(),
    }
    Ok(run.await?)
}
