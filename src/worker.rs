//! The workers: every workflow and activity of Runtime Cloud on one task queue ([`run`]), and
//! a worker pool's worker, which serves only the plans and applies of the environments bound
//! to its pool, on the pool's own task queue ([`run_pool`]).

use runtime_cloud_activities::capacity::CapacityActivitiesImpl;
use runtime_cloud_activities::kubernetes::watch::WatchActivitiesImpl;
use runtime_cloud_activities::ports::{Approvals, Observer, Policy, Runner};
use runtime_cloud_activities::semaphores::Semaphores;
use runtime_cloud_activities::{
    InventoryActivitiesImpl, ProvisioningActivitiesImpl, ScheduledActivitiesImpl,
};
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_temporal::Error;
use runtime_cloud_workflows::ids::pool_task_queue;
use runtime_cloud_workflows::{
    ClusterWatch, EnvironmentLifetime, FleetRollout, GitOpsReconciler, ObservationSweep,
    ObserveEnvironment, OffboardingOrder, ProgramAdoption, ProvisioningRun, ReconciliationProposal,
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
    pub artifacts: runtime_cloud_activities::ports::Artifacts,
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
    /// The Pulumi adapter, for adopting unmanaged workloads into programs.
    pub pulumi: Arc<runtime_cloud_activities::pulumi::Pulumi>,
    /// Reads the Kubernetes clusters, for their watches; none when they are not watched.
    pub kubernetes_watch: Option<Arc<runtime_cloud_activities::kubernetes::Kubernetes>>,
    /// Judge observations and plans by the posture rules (`RUNTIME_CLOUD_POSTURE_FINDINGS`).
    pub posture_findings: bool,
}

/// Runs the worker until `shutdown` resolves, then drains it. A worker that stops on its own
/// (Temporal unreachable while it starts: the SDK gives up checking the namespace after about
/// ten seconds; the SDK shuts a worker down after a network error while polling) is started
/// again after one of [`RestartPauses`], and so is one that stops without an error nobody
/// asked for: a worker process outlives an outage of Temporal, as its API does, and never
/// quietly stops serving.
///
/// The worker's future is not `Send` (workflows run on a local set), so call this on the task
/// that owns it (`tokio::select!` / `join!` from `main`), never through `tokio::spawn`.
pub async fn run(deps: WorkerDeps, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let runtime = Runtime::from_current_tokio(Default::default())?;
    let shutdown = futures::FutureExt::shared(shutdown);
    let mut pauses = RestartPauses::default();
    loop {
        let began = std::time::Instant::now();
        let stopped = serve(&runtime, &deps, shutdown.clone()).await;
        if shutdown.peek().is_some() {
            return stopped;
        }
        let pause = pauses.after_serving(began.elapsed());
        match stopped {
            Ok(()) => tracing::warn!("worker stopped on its own; starting it again in {pause:?}"),
            Err(e) => tracing::warn!(error = %e, "worker stopped; starting it again in {pause:?}"),
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = shutdown.clone() => return Ok(()),
        }
    }
}

/// The pauses before a worker that could not reach Temporal tries again: 1 s, doubling, at most
/// 30 s (an outage of minutes is retried twice a minute, a blip at once).
#[derive(Debug)]
pub struct RestartPauses {
    next: std::time::Duration,
}

impl Default for RestartPauses {
    fn default() -> Self {
        Self {
            next: std::time::Duration::from_secs(1),
        }
    }
}

impl RestartPauses {
    /// The longest pause.
    pub const MAX: std::time::Duration = std::time::Duration::from_secs(30);

    /// The pause before the next attempt.
    pub fn next_pause(&mut self) -> std::time::Duration {
        let pause = self.next;
        self.next = (pause * 2).min(Self::MAX);
        pause
    }

    /// The pause before starting again a worker that served for `served`: one that ran longer
    /// than [`Self::MAX`] was healthy, so its stop is a new blip and the pauses start over.
    pub fn after_serving(&mut self, served: std::time::Duration) -> std::time::Duration {
        if served > Self::MAX {
            *self = Self::default();
        }
        self.next_pause()
    }
}

/// Ensures the schedules, then serves every workflow and activity until `shutdown` resolves
/// or a worker stops.
async fn serve(
    runtime: &Runtime,
    deps: &WorkerDeps,
    shutdown: impl Future<Output = ()> + Clone,
) -> Result<(), Error> {
    runtime_cloud_temporal::schedules::ensure(
        &deps.client,
        &deps.task_queue,
        deps.schedules_paused,
    )
    .await?;
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
    let capacity = CapacityActivitiesImpl {
        db: deps.db.clone(),
        client: deps.client.clone(),
        task_queue: deps.task_queue.clone(),
        semaphores: semaphores(deps),
    };
    // The run observes its environment after its apply in its finish.
    let activities = ProvisioningActivitiesImpl {
        inventory: Some(Arc::new(inventory_activities(deps))),
        ..provisioning_activities(deps)
    };
    if deps.kubernetes_watch.is_some() {
        let started = runtime_cloud_temporal::cluster_watches::start_all(
            &deps.db,
            &deps.client,
            &deps.task_queue,
        )
        .await;
        match started {
            Ok(clusters) => tracing::info!(clusters, "the clusters' watches are started"),
            Err(e) => tracing::warn!(error = %e, "cannot read which clusters to watch"),
        }
    }
    let lifetimes =
        runtime_cloud_temporal::lifetimes::start_all(&deps.db, &deps.client, &deps.task_queue)
            .await;
    match lifetimes {
        Ok(n) => tracing::info!(
            ephemeral = n,
            "the ephemeral environments' lifetimes are started"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot read which environments are ephemeral"),
    }
    let orders =
        runtime_cloud_temporal::offboarding::start_all(&deps.db, &deps.client, &deps.task_queue)
            .await;
    match orders {
        Ok(n) => tracing::info!(orders = n, "the off-boarding orders under way are started"),
        Err(e) => tracing::warn!(error = %e, "cannot read which off-boarding orders are under way"),
    }
    let adoptions =
        runtime_cloud_temporal::adoptions::start_all(&deps.db, &deps.client, &deps.task_queue)
            .await;
    match adoptions {
        Ok(n) => tracing::info!(adoptions = n, "the program adoptions under way are started"),
        Err(e) => tracing::warn!(error = %e, "cannot read which program adoptions are under way"),
    }
    let adoption = runtime_cloud_activities::adoption::AdoptionActivitiesImpl {
        db: deps.db.clone(),
        pulumi: deps.pulumi.clone(),
    };
    let offboarding = runtime_cloud_activities::offboarding::OffboardingActivitiesImpl {
        db: deps.db.clone(),
        artifacts: deps.artifacts.clone(),
        provisioning: deps.provisioning.clone(),
    };
    let lifetime = runtime_cloud_activities::lifetime::LifetimeActivitiesImpl {
        db: deps.db.clone(),
        provisioning: deps.provisioning.clone(),
    };
    let mut options = WorkerOptions::new(deps.task_queue.clone())
        .register_workflow::<ProvisioningRun>()?
        .register_workflow::<ObserveEnvironment>()?
        .register_workflow::<ReconciliationProposal>()?
        .register_workflow::<ObservationSweep>()?
        .register_workflow::<GitOpsReconciler>()?
        .register_workflow::<FleetRollout>()?
        .register_workflow::<EnvironmentLifetime>()?
        .register_workflow::<OffboardingOrder>()?
        .register_workflow::<ProgramAdoption>()?
        .register_activities(activities)
        .register_activities(inventory_activities(deps))
        .register_activities(scheduled)
        .register_activities(fleet)
        .register_activities(capacity)
        .register_activities(lifetime)
        .register_activities(offboarding)
        .register_activities(adoption);
    if let Some(kubernetes) = &deps.kubernetes_watch {
        options = options
            .register_workflow::<ClusterWatch>()?
            .register_activities(WatchActivitiesImpl {
                db: deps.db.clone(),
                kubernetes: kubernetes.clone(),
                client: deps.client.clone(),
                task_queue: deps.task_queue.clone(),
            });
    }
    let options = options.build();
    tracing::info!(task_queue = %deps.task_queue, "worker polling");
    poll(
        Worker::new(runtime, deps.client.clone(), options)?,
        shutdown,
    )
    .await
}

/// Runs a worker of pool `pool_id` until `shutdown` resolves: it polls only the pool's task
/// queue, where runs of the environments bound to the pool send their plans and applies, so
/// a production or customer-isolated boundary is served only by its own workers.
pub async fn run_pool(
    deps: WorkerDeps,
    pool_id: &str,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let runtime = Runtime::from_current_tokio(Default::default())?;
    let task_queue = pool_task_queue(&deps.task_queue, pool_id);
    let options = WorkerOptions::new(task_queue.clone())
        .register_activities(provisioning_activities(&deps))
        .build();
    tracing::info!(%task_queue, pool_id, "pool worker polling");
    poll(Worker::new(&runtime, deps.client, options)?, shutdown).await
}

/// The inventory activities (observations, proposals) on `deps`.
fn inventory_activities(deps: &WorkerDeps) -> InventoryActivitiesImpl {
    InventoryActivitiesImpl {
        db: deps.db.clone(),
        observer: deps.observer.clone(),
        policy: deps.policy.clone(),
        inventory: deps.inventory.clone(),
        provisioning: deps.provisioning.clone(),
        client: deps.client.clone(),
        task_queue: deps.task_queue.clone(),
    }
}

/// The provisioning activities (plan, apply and the steps around them) on `deps`.
fn provisioning_activities(deps: &WorkerDeps) -> ProvisioningActivitiesImpl {
    ProvisioningActivitiesImpl {
        db: deps.db.clone(),
        runner: deps.runner.clone(),
        approvals: deps.approvals.clone(),
        policy: deps.policy.clone(),
        posture: deps.posture_findings,
        artifacts: deps.artifacts.clone(),
        semaphores: semaphores(deps),
        inventory: None,
    }
}

/// The environments' locks and the projects' capacity, on `deps`.
fn semaphores(deps: &WorkerDeps) -> Semaphores {
    Semaphores {
        db: deps.db.clone(),
        client: deps.client.clone(),
        task_queue: deps.task_queue.clone(),
        lock_holder_check_secs: deps.provisioning.lock_holder_check_secs(),
    }
}

/// Polls with `worker` until `shutdown` resolves, then drains it.
async fn poll(mut worker: Worker, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let stop = worker.shutdown_handle();
    let run = worker.run();
    tokio::pin!(run);
    let stopped = tokio::select! {
        r = &mut run => r,
        _ = shutdown => {
            stop();
            run.await
        }
    };
    if stopped.is_err() {
        // A worker that stopped on its own (its first look at the namespace failed, say, in a
        // network blip) is still registered with the client for its task queue, and the
        // client refuses a second worker there: the next start would fail for good. Shutting
        // it down lets the queue go.
        stop();
    }
    Ok(stopped?)
}

#[cfg(test)]
mod tests {
    use super::RestartPauses;
    use std::time::Duration;

    /// A worker whose start fails (here its namespace does not exist; in production a network
    /// blip while it first describes the namespace) leaves its task queue to the next worker
    /// of the same client, instead of every later start being refused as a second worker on
    /// the queue. Needs the suite's Temporal dev server (`./scripts/test`).
    #[tokio::test]
    async fn a_worker_that_failed_to_start_leaves_its_task_queue_to_the_next() {
        use temporalio_sdk::{Runtime, Worker, WorkerOptions};
        let Ok(address) = std::env::var("RC_TEST_TEMPORAL_ADDRESS") else {
            panic!("RC_TEST_TEMPORAL_ADDRESS is not set: run the tests with ./scripts/test");
        };
        let client = runtime_cloud_temporal::connect(&address, "no-such-namespace")
            .await
            .unwrap();
        let runtime = Runtime::from_current_tokio(Default::default()).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let queue = format!("test-{}", now.unwrap().as_nanos());
        let start = || {
            let options = WorkerOptions::new(queue.clone())
                .register_workflow::<super::GitOpsReconciler>()
                .unwrap()
                .build();
            let worker = Worker::new(&runtime, client.clone(), options).map_err(|e| e.to_string());
            async move {
                super::poll(worker?, std::future::pending())
                    .await
                    .map_err(|e| e.to_string())
            }
        };
        for attempt in ["first", "second"] {
            let failed = start().await.expect_err("the namespace does not exist");
            assert!(failed.contains("namespace"), "{attempt} start: {failed}");
            assert!(
                !failed.contains("multiple workers"),
                "{attempt} start: {failed}"
            );
        }
    }

    #[test]
    fn restart_pauses_double_from_a_second_up_to_half_a_minute() {
        let mut pauses = RestartPauses::default();
        let seen: Vec<Duration> = (0..7).map(|_| pauses.next_pause()).collect();
        let secs: Vec<u64> = seen.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn a_worker_that_served_a_while_starts_again_after_a_second() {
        let mut pauses = RestartPauses::default();
        let quick = Duration::from_millis(10);
        assert_eq!(pauses.after_serving(quick), Duration::from_secs(1));
        assert_eq!(pauses.after_serving(quick), Duration::from_secs(2));
        assert_eq!(pauses.after_serving(quick), Duration::from_secs(4));
        let healthy = RestartPauses::MAX + Duration::from_secs(1);
        assert_eq!(pauses.after_serving(healthy), Duration::from_secs(1));
        assert_eq!(pauses.after_serving(quick), Duration::from_secs(2));
    }
}
