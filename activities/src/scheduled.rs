//! The scheduled activities: page through environments, mark stale ones, re-plan one (held
//! back when its specification carries a quarantined version).

use crate::Error;
use crate::error::activity_error;
use crate::ports::{Runner, Target};
use chrono::Utc;
use runtime_cloud_models::drift::{Direction, ProposalPlan};
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_models::quarantine::{carried, refusal};
use runtime_cloud_models::{ProvisioningKind, rules};
use runtime_cloud_store::runs::NewRun;
use runtime_cloud_store::{environments, inventory, quarantines, runs, specifications};
use runtime_cloud_workflows::contracts::scheduled_markers as markers;
use runtime_cloud_workflows::contracts::{
    EnvironmentPage, EnvironmentPageRequest, ReplanOutcome, ReplanRequest,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// Dependencies of the scheduled activities.
pub struct ScheduledActivitiesImpl {
    pub db: DatabaseConnection,
    pub runner: Arc<dyn Runner>,
    pub inventory: InventoryOptions,
    pub provisioning: ProvisioningOptions,
}

impl ScheduledActivitiesImpl {
    async fn page(&self, req: &EnvironmentPageRequest) -> Result<EnvironmentPage, Error> {
        Ok(environments::page(&self.db, req.after.as_deref(), req.limit).await?)
    }

    async fn mark_stale_since(&self, window: &str) -> Result<u64, Error> {
        let cutoff = Utc::now() - chrono::Duration::seconds(self.inventory.staleness_secs() as i64);
        Ok(inventory::mark_stale(&self.db, window, cutoff).await?)
    }

    async fn replan_environment(&self, req: &ReplanRequest) -> Result<ReplanOutcome, Error> {
        let key = &req.environment;
        let Some(env) = environments::find(&self.db, &key.tenant_id, &key.environment_id).await?
        else {
            return Ok(ReplanOutcome::Nothing);
        };
        let Some(spec) =
            specifications::latest(&self.db, &key.tenant_id, &key.environment_id).await?
        else {
            return Ok(ReplanOutcome::Nothing);
        };
        let target = Target {
            tenant_id: key.tenant_id.clone(),
            environment_id: key.environment_id.clone(),
            limits: None,
        };
        // A look, not a run's plan: its log is not kept (the run it starts plans and logs).
        let log = crate::step_log::StepLog::default();
        let plan = match self.runner.plan(&target, &spec.snapshot(), &log).await {
            Ok(plan) => plan.receipt,
            // Unreachable now: the observation sweep marks it stale; try again next pass.
            Err(Error::Unreachable(_)) => return Ok(ReplanOutcome::Nothing),
            Err(e) => return Err(e),
        };
        if plan.changes.is_empty() {
            return Ok(ReplanOutcome::Nothing);
        }
        // A specification that carries a quarantined version is neither applied nor proposed:
        // said once per version (`ReconciliationHeld`), until it changes or the quarantine is
        // lifted.
        let snapshot = spec.snapshot();
        let in_force = quarantines::in_force(&self.db, &key.tenant_id).await?;
        let hits = carried(&snapshot, &in_force);
        if !hits.is_empty() {
            quarantines::record_held(
                &self.db,
                &key.tenant_id,
                &key.environment_id,
                spec.version,
                &hits,
            )
            .await?;
            let reason = refusal(&hits);
            tracing::warn!(environment_id = %key.environment_id, %reason, "the reconciler holds a specification with a quarantined version");
            return Ok(ReplanOutcome::Held { reason });
        }
        let destructive = plan.changes.is_destructive();
        let auto_apply = rules::auto_apply(
            destructive,
            env.production(),
            self.provisioning.auto_apply_non_destructive,
        );
        if auto_apply {
            let new = NewRun {
                run_id: &req.run_id,
                environment: &env,
                specification: &spec,
                kind: ProvisioningKind::Reconciliation,
                promotion_id: None,
                approval_id: None,
                idempotency_key: None,
                request_hash: None,
                quarantine_override: None,
            };
            let run = runs::create_once(&self.db, &new, &self.provisioning).await?;
            return Ok(ReplanOutcome::Apply { run: Box::new(run) });
        }
        // Not applied automatically: an operator reviews it, unless a proposal is already open.
        let proposal = ProposalPlan {
            direction: Direction::ApplyDeclared,
            destructive,
            plan_summary: plan.summary(),
        };
        let raised = runtime_cloud_transactions::raise_for_replan(
            &self.db,
            &env,
            &req.proposal_id,
            &proposal,
        )
        .await?;
        Ok(match raised {
            Some(proposal) => ReplanOutcome::Propose {
                proposal,
                superseded: Vec::new(),
            },
            None => ReplanOutcome::Nothing,
        })
    }
}

#[activities]
impl ScheduledActivitiesImpl {
    /// A page of every tenant's environments.
    #[activity(definition = markers::ListEnvironments)]
    pub async fn list_environments(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: EnvironmentPageRequest,
    ) -> Result<EnvironmentPage, ActivityError> {
        self.page(&req).await.map_err(activity_error)
    }

    /// Marks stale every environment not observed within `StalenessMinutes`.
    #[activity(definition = markers::MarkStale)]
    pub async fn mark_stale(
        self: Arc<Self>,
        _ctx: ActivityContext,
        window: String,
    ) -> Result<u64, ActivityError> {
        self.mark_stale_since(&window).await.map_err(activity_error)
    }

    /// Re-plans one environment for the GitOps reconciler.
    #[activity(definition = markers::Replan)]
    pub async fn replan(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: ReplanRequest,
    ) -> Result<ReplanOutcome, ActivityError> {
        self.replan_environment(&req).await.map_err(activity_error)
    }
}
