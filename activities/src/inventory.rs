//! The inventory activities behind [`InventoryActivities`]'s contracts.

use crate::Error;
use crate::error::activity_error;
use crate::inventory_store;
use crate::ports::{Observer, Policy, Target};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::observation::Observation;
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_workflows::contracts::inventory_markers as markers;
use runtime_cloud_workflows::contracts::{
    ObserveRequest, PrepareRunRequest, ProposalProjection, RecordOutcome, RecordRequest,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::Instrument as _;

/// Dependencies of the inventory activities.
pub struct InventoryActivitiesImpl {
    pub db: DatabaseConnection,
    pub observer: Arc<dyn Observer>,
    pub policy: Arc<dyn Policy>,
    pub inventory: InventoryOptions,
    pub provisioning: ProvisioningOptions,
}

#[activities]
impl InventoryActivitiesImpl {
    /// Reads the target; an unreachable one is an answer, not a failure.
    #[activity(definition = markers::Observe)]
    pub async fn observe(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: ObserveRequest,
    ) -> Result<Observation, ActivityError> {
        let span = tracing::info_span!("observe", tenant_id = %req.tenant_id, environment_id = %req.environment_id);
        async move {
            let target = Target {
                tenant_id: req.tenant_id,
                environment_id: req.environment_id,
            };
            match self.observer.observe(&target).await {
                Ok(workloads) => Ok(Observation::Observed { workloads }),
                Err(e @ Error::Unreachable(_)) => Ok(Observation::Unreachable {
                    reason: e.to_string(),
                }),
                Err(e) => Err(activity_error(e)),
            }
        }
        .instrument(span)
        .await
    }

    /// Records the observation, findings and proposal.
    #[activity(definition = markers::Record)]
    pub async fn record(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: RecordRequest,
    ) -> Result<RecordOutcome, ActivityError> {
        let span = tracing::info_span!("record_observation", environment_id = %req.environment_id, proposal_id = %req.proposal_id);
        async move {
            let enabled = self
                .inventory
                .auto_accept_non_destructive_outside_production;
            let policy = self.policy.clone();
            let allows =
                move |tenant: &str, env: &str| enabled && policy.allows_auto_accept(tenant, env);
            inventory_store::record(&self.db, &req, &allows)
                .await
                .map_err(activity_error)
        }
        .instrument(span)
        .await
    }

    /// Projects a proposal's state.
    #[activity(definition = markers::ProjectProposal)]
    pub async fn project_proposal(
        self: Arc<Self>,
        _ctx: ActivityContext,
        p: ProposalProjection,
    ) -> Result<(), ActivityError> {
        let span =
            tracing::info_span!("project_proposal", proposal_id = %p.proposal_id, state = %p.state);
        async move {
            inventory_store::project_proposal(&self.db, &p)
                .await
                .map_err(activity_error)
        }
        .instrument(span)
        .await
    }

    /// Prepares the reconciliation run of an accepted proposal.
    #[activity(definition = markers::PrepareRun)]
    pub async fn prepare_run(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: PrepareRunRequest,
    ) -> Result<RunInput, ActivityError> {
        let span = tracing::info_span!("prepare_run", proposal_id = %req.proposal.proposal_id, run_id = %req.run_id);
        async move {
            inventory_store::prepare_run(&self.db, &req, &self.provisioning)
                .await
                .map_err(activity_error)
        }
        .instrument(span)
        .await
    }
}
