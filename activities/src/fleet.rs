//! The fleet activities the FleetRollout workflow calls: record and start an instance's
//! promotion run (or its run back), quarantine a rolled-back release, read a wave's progress
//! (runs and observations), read the SLO, open a halt's incident, project the rollout. Each is
//! idempotent by the ids the workflow chose.

use crate::error::{activity_error, store_failed};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::quarantine::QuarantineSource;
use runtime_cloud_store::quarantines::{self, NewQuarantine};
use runtime_cloud_store::{incidents, rollouts};
use runtime_cloud_workflows::contracts::{
    HaltIncident, PrepareInstance, PrepareRollback, ProgressRequest, QuarantineRelease,
    RolloutProjection, SloCheck, SloReading, Standing, fleet_markers as markers,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;

use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// Dependencies of the fleet activities.
pub struct FleetActivitiesImpl {
    pub db: DatabaseConnection,
    /// Starts the instances' runs.
    pub client: temporalio_client::Client,
    /// The task queue runs are started on.
    pub task_queue: String,
    /// The timeouts the instances' runs are created with.
    pub provisioning: ProvisioningOptions,
    /// The SloGuard that answers rollouts' SLO queries; none without a query service.
    pub slo: Option<Arc<dyn crate::slo::SloGuard>>,
}

impl FleetActivitiesImpl {
    /// Starts the workflow of run `input` (a retry finds it started, running or closed, and
    /// starts nothing).
    async fn start_run(&self, input: RunInput) -> Result<(), ActivityError> {
        runtime_cloud_temporal::admission::start_run(&self.client, &self.task_queue, input)
            .await
            .map_err(|e| activity_error(crate::Error::Temporal(e.to_string())))
    }
}

#[activities]
impl FleetActivitiesImpl {
    /// Declares the instance's next specification, records its promotion run and starts it.
    #[activity(definition = markers::StartInstanceRun)]
    pub async fn start_instance_run(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: PrepareInstance,
    ) -> Result<(), ActivityError> {
        let rollout = rollouts::input(&self.db, &req.rollout_id)
            .await
            .map_err(store_failed)?;
        let run = rollouts::prepare_instance(
            &self.db,
            &rollout,
            &req.environment_id,
            &req.run_id,
            &self.provisioning,
        )
        .await
        .map_err(store_failed)?;
        self.start_run(run).await
    }

    /// Declares the instance's previous specification again, records its run back to it and
    /// starts it.
    #[activity(definition = markers::StartRollbackRun)]
    pub async fn start_rollback_run(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: PrepareRollback,
    ) -> Result<(), ActivityError> {
        let rollout = rollouts::input(&self.db, &req.rollout_id)
            .await
            .map_err(store_failed)?;
        let run = rollouts::prepare_rollback(
            &self.db,
            &rollout,
            &req.environment_id,
            &req.rolled_out,
            &req.run_id,
            &self.provisioning,
        )
        .await
        .map_err(store_failed)?;
        self.start_run(run).await
    }

    /// Quarantines the versions a rolled-back rollout moved its instances to, for its tenant
    /// (`models::quarantine::moved`; a retry finds them in quarantine and places nothing
    /// twice).
    #[activity(definition = markers::QuarantineRelease)]
    pub async fn quarantine_release(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: QuarantineRelease,
    ) -> Result<(), ActivityError> {
        let rollout = rollouts::input(&self.db, &req.rollout_id)
            .await
            .map_err(store_failed)?;
        let reason = match req.halted_because.as_str() {
            "" => format!("rollout {} was rolled back", rollout.rollout_id),
            why => format!("rollout {} was rolled back ({why})", rollout.rollout_id),
        };
        let before = rollouts::workloads_before(&self.db, &rollout.tenant_id, &rollout.rollout_id)
            .await
            .map_err(store_failed)?;
        let moved = runtime_cloud_models::quarantine::moved(&rollout.versions, &before);
        let new: Vec<NewQuarantine> = moved
            .into_iter()
            .map(|(workload, version)| NewQuarantine {
                tenant_id: rollout.tenant_id.clone(),
                workload,
                version,
                source: QuarantineSource::Rollback,
                reason: reason.clone(),
                rollout_id: Some(rollout.rollout_id.clone()),
                by: format!("fleet-rollout/{}", rollout.rollout_id),
            })
            .collect();
        let placed = quarantines::place(&self.db, &new)
            .await
            .map_err(store_failed)?;
        tracing::warn!(rollout_id = %rollout.rollout_id, quarantined = placed.len(), "the rolled-back release is quarantined");
        Ok(())
    }

    /// Where the wave's instances stand: their runs, and whether the last observations show
    /// them converged on the target.
    #[activity(definition = markers::Progress)]
    pub async fn progress(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: ProgressRequest,
    ) -> Result<Vec<Standing>, ActivityError> {
        let progress =
            rollouts::progress(&self.db, &req.rollout_id, &req.tenant_id, &req.instances)
                .await
                .map_err(store_failed)?;
        Ok(progress.iter().map(|p| p.standing(&req.versions)).collect())
    }

    /// Reads a rollout's SLO query once.
    #[activity(definition = markers::CheckSlo)]
    pub async fn check_slo(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: SloCheck,
    ) -> Result<SloReading, ActivityError> {
        let Some(guard) = &self.slo else {
            return Ok(SloReading::Unavailable {
                reason: "no SLO query service is configured (RUNTIME_CLOUD_PROMETHEUS_URL)".into(),
            });
        };
        Ok(match guard.samples(&req.query).await {
            Ok(samples) => match runtime_cloud_models::rollouts::slo_breach(
                &runtime_cloud_models::rollouts::SloQuery {
                    query: req.query.clone(),
                    ..req.slo
                },
                &samples,
            ) {
                Some(reason) => SloReading::Breached { reason },
                None => SloReading::Met,
            },
            Err(e) => {
                tracing::warn!(error = %e, "a rollout's SLO query failed");
                SloReading::Unavailable {
                    reason: e.to_string(),
                }
            }
        })
    }

    /// Opens the incident of a halt.
    #[activity(definition = markers::OpenIncident)]
    pub async fn open_incident(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: HaltIncident,
    ) -> Result<String, ActivityError> {
        let incident = incidents::open(
            &self.db,
            incidents::NewIncident {
                tenant_id: req.tenant_id,
                title: req.title,
                source: req.source,
                environment_id: req.environment_id,
                rollout_id: Some(req.rollout_id),
                opened_by: "fleet-rollout".into(),
            },
        )
        .await
        .map_err(store_failed)?;
        Ok(incident.incident_id)
    }

    /// Projects the rollout's status with its events.
    #[activity(definition = markers::Project)]
    pub async fn project(
        self: Arc<Self>,
        _ctx: ActivityContext,
        p: RolloutProjection,
    ) -> Result<(), ActivityError> {
        rollouts::project(&self.db, &p.rollout_id, &p.status)
            .await
            .map_err(store_failed)
    }
}
