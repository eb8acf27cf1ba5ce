//! The inventory activities behind [`InventoryActivities`]'s contracts.

use crate::Error;
use crate::error::activity_error;
use crate::ports::{Observer, Policy, Target};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::observation::Observation;
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_store::{observations, proposals};
use runtime_cloud_workflows::contracts::inventory_markers as markers;
use runtime_cloud_workflows::contracts::{
    BatchOutcome, ObserveBatchRequest, ObserveRequest, PrepareRunRequest, ProposalProjection,
    RecordOutcome, RecordRequest,
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

/// Tries before a target that fails (other than by being unreachable) counts as unreachable.
const READ_ATTEMPTS: u32 = 3;

impl InventoryActivitiesImpl {
    /// One read of the target; an unreachable one is an observation.
    async fn read_target(&self, target: &Target) -> Result<Observation, Error> {
        let read = async {
            Ok(Observation::Observed {
                workloads: self.observer.observe(target).await?,
                resources: self.observer.drifted(target).await?,
                observed_at: Some(chrono::Utc::now()),
            })
        };
        match read.await {
            Ok(observation) => Ok(observation),
            Err(e @ Error::Unreachable(_)) => Ok(Observation::Unreachable {
                reason: e.to_string(),
            }),
            Err(e) => Err(e),
        }
    }

    /// [`Self::read_target`] with a few quick retries, then unreachable.
    async fn read_target_with_retries(&self, target: &Target) -> Observation {
        let mut attempt = 1;
        loop {
            match self.read_target(target).await {
                Ok(observation) => return observation,
                Err(e) if attempt >= READ_ATTEMPTS => {
                    return Observation::Unreachable {
                        reason: e.to_string(),
                    };
                }
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)))
                        .await;
                    attempt += 1;
                }
            }
        }
    }

    async fn record_observation(&self, req: &RecordRequest) -> Result<RecordOutcome, Error> {
        let observed_at = match &req.observation {
            Observation::Observed { observed_at, .. } => *observed_at,
            Observation::Unreachable { .. } => None,
        };
        let acceptance = proposals::Acceptance {
            option: self
                .inventory
                .auto_accept_non_destructive_outside_production,
            policy_allows: self
                .policy
                .allows_auto_accept(&req.tenant_id, &req.environment_id),
            fresh: !self
                .inventory
                .is_stale(false, observed_at, chrono::Utc::now()),
        };
        let mut outcome = observations::record(&self.db, req, acceptance).await?;
        if let Some(proposal) = outcome.new_proposal.as_mut().filter(|p| p.auto_accept) {
            proposal.auto_accept = self
                .policy_allows_auto_accept(req, &proposal.proposal_id)
                .await?;
        }
        Ok(outcome)
    }

    /// Asks the policies whether a proposal the rules would accept on its own may be; the
    /// decision is recorded on the proposal. (A retried record asks again, and the same
    /// policies answer the same.)
    async fn policy_allows_auto_accept(
        &self,
        req: &RecordRequest,
        proposal_id: &str,
    ) -> Result<bool, Error> {
        use runtime_cloud_models::policy::{PolicyEnvironment, ProposalPolicyInput};
        let (tenant, env_id) = (req.tenant_id.as_str(), req.environment_id.as_str());
        let (Some(proposal), Some(env)) = (
            proposals::find(&self.db, tenant, proposal_id).await?,
            runtime_cloud_store::environments::find(&self.db, tenant, env_id).await?,
        ) else {
            return Ok(false);
        };
        let observed = runtime_cloud_store::inventory::find(&self.db, tenant, env_id)
            .await?
            .map(|i| i.workloads)
            .unwrap_or_default();
        let input = ProposalPolicyInput {
            tenant_id: tenant.to_owned(),
            environment: PolicyEnvironment {
                environment_id: env.environment_id,
                project_id: env.project_id,
                class: env.class,
            },
            proposal: serde_json::to_value(&proposal).unwrap_or_default(),
            observed,
        };
        let decision = self.policy.evaluate_auto_accept(&input).await?;
        if !decision.allow {
            tracing::info!(%proposal_id, reasons = ?decision.deny, "the policies keep the proposal for an operator");
        }
        proposals::set_policy(&self.db, proposal_id, &decision).await?;
        Ok(decision.allow)
    }
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
                limits: None,
            };
            self.read_target(&target).await.map_err(activity_error)
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
        async move { self.record_observation(&req).await.map_err(activity_error) }
            .instrument(span)
            .await
    }

    /// Observes and records a batch of environments, heartbeating after each one.
    ///
    /// A target that keeps failing is recorded as unreachable (stale) after a few quick tries,
    /// as `ObserveEnvironment` does; a recording failure fails the batch, whose retry repeats
    /// it harmlessly: the proposal ids are fixed, an unchanged observation writes nothing.
    #[activity(definition = markers::ObserveBatch)]
    pub async fn observe_batch(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: ObserveBatchRequest,
    ) -> Result<BatchOutcome, ActivityError> {
        let span = tracing::info_span!("observe_batch", environments = req.environments.len());
        async move {
            let mut outcome = BatchOutcome::default();
            for env in req.environments {
                let target = Target {
                    tenant_id: env.tenant_id.clone(),
                    environment_id: env.environment_id.clone(),
                    limits: None,
                };
                let observation = self.read_target_with_retries(&target).await;
                if matches!(observation, Observation::Unreachable { .. }) {
                    outcome.unreachable += 1;
                }
                let record = RecordRequest {
                    tenant_id: env.tenant_id,
                    environment_id: env.environment_id,
                    observation,
                    proposal_id: env.proposal_id,
                };
                let recorded = self
                    .record_observation(&record)
                    .await
                    .map_err(activity_error)?;
                outcome.observed += 1;
                outcome.new_proposals.extend(recorded.new_proposal);
                outcome.superseded.extend(recorded.superseded);
                // Progress for the UI; an error only means the server did not take it yet.
                let _ = ctx.record_heartbeat(outcome.observed).await;
            }
            Ok(outcome)
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
            proposals::project(&self.db, &p)
                .await
                .map_err(|e| activity_error(e.into()))
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
            let grantor = req.grantor.as_ref();
            proposals::prepare_run(
                &self.db,
                &req.proposal,
                &req.run_id,
                grantor,
                &self.provisioning,
            )
            .await
            .map_err(|e| activity_error(e.into()))
        }
        .instrument(span)
        .await
    }
}
