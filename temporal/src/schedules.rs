//! The schedules: ObservationSweep every five minutes, GitOpsReconciler every four hours.
//! Created at worker start-up, or updated in place when they exist, so starting twice never
//! duplicates them.

use crate::Error;
use runtime_cloud_workflows::gitops_reconciler::ReconcileInput;
use runtime_cloud_workflows::observation_sweep::SweepInput;
use runtime_cloud_workflows::{GitOpsReconciler, ObservationSweep};
use temporalio_client::Client;
use temporalio_client::schedules::{
    CreateScheduleOptions, ScheduleAction, ScheduleError, ScheduleOverlapPolicy, ScheduleSpec,
};

/// The observation sweep's cron.
pub const SWEEP_CRON: &str = "*/5 * * * *";
/// The GitOps reconciler's cron.
pub const RECONCILER_CRON: &str = "0 */4 * * *";

/// The schedule ids for a task queue (one deployment per task queue).
pub fn schedule_ids(task_queue: &str) -> [String; 2] {
    [
        format!("{task_queue}/observation-sweep"),
        format!("{task_queue}/gitops-reconciler"),
    ]
}

/// Creates both schedules (paused when `paused`), or updates them to the current definition.
/// An update keeps the pause state: an operator who paused a schedule meant it.
pub async fn ensure(client: &Client, task_queue: &str, paused: bool) -> Result<(), Error> {
    let [sweep_id, reconciler_id] = schedule_ids(task_queue);
    let sweep = || {
        ScheduleAction::start_workflow(
            ObservationSweep::run,
            SweepInput::default(),
            task_queue,
            "observation-sweep",
        )
    };
    let reconciler = || {
        ScheduleAction::start_workflow(
            GitOpsReconciler::run,
            ReconcileInput::default(),
            task_queue,
            "gitops-reconciler",
        )
    };
    upsert(client, &sweep_id, SWEEP_CRON, paused, sweep).await?;
    upsert(client, &reconciler_id, RECONCILER_CRON, paused, reconciler).await?;
    Ok(())
}

async fn upsert(
    client: &Client,
    id: &str,
    cron: &str,
    paused: bool,
    action: impl Fn() -> ScheduleAction,
) -> Result<(), Error> {
    let spec = || {
        ScheduleSpec::builder()
            .cron_strings(vec![cron.to_owned()])
            .build()
    };
    let created = client
        .create_schedule(
            id,
            CreateScheduleOptions::builder()
                .action(action())
                .spec(spec())
                // A sweep still running when the next tick comes is not doubled.
                .overlap_policy(ScheduleOverlapPolicy::Skip)
                .paused(paused)
                .note("managed by runtime-cloud".to_owned())
                .build(),
        )
        .await;
    match created {
        Ok(_) => {
            tracing::info!(schedule = id, cron, "schedule created");
            Ok(())
        }
        Err(ScheduleError::Rpc(status)) if status.code() == tonic::Code::AlreadyExists => {
            let (spec, action) = (spec(), action());
            client
                .get_schedule_handle(id)
                .update(
                    move |u| {
                        u.set_spec(spec)
                            .set_action(action)
                            .set_overlap_policy(ScheduleOverlapPolicy::Skip);
                    },
                    Default::default(),
                )
                .await
                .map_err(|source| Error::Schedule {
                    doing: "updating",
                    id: id.to_owned(),
                    source,
                })?;
            tracing::info!(schedule = id, cron, "schedule updated");
            Ok(())
        }
        Err(source) => Err(Error::Schedule {
            doing: "creating",
            id: id.to_owned(),
            source,
        }),
    }
}
