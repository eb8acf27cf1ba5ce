//! The adoption activities the ProgramAdoption workflow calls: a proposal's unmanaged
//! workloads generated into its environment's Pulumi program (`pulumi::Pulumi::
//! generate_adoption`) and published on the proposal's branch, then recorded
//! (`store::adoptions`).

use crate::Error;
use crate::error::{activity_error, store_failed};
use crate::ports::Target;
use crate::pulumi::Pulumi;
use runtime_cloud_models::drift::DriftKind;
use runtime_cloud_models::targets::{ObserverTarget, RunnerTarget};
use runtime_cloud_store::adoptions::{self, Outcome};
use runtime_cloud_store::{environments, findings, proposals, specifications};
use runtime_cloud_workflows::contracts::{
    AdoptionInput, FailAdoption, adoption_markers as markers,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// How often a publish reports it is alive.
const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Dependencies of the adoption activities.
pub struct AdoptionActivitiesImpl {
    pub db: DatabaseConnection,
    pub pulumi: Arc<Pulumi>,
}

impl AdoptionActivitiesImpl {
    /// Generates and publishes the adoption of `proposal_id`: what it published, or why it
    /// cannot be (`Error::PlanInvalid`, never retried).
    async fn generate_and_publish(&self, proposal_id: &str) -> Result<Outcome, Error> {
        let refused = |why: String| Error::PlanInvalid(why);
        let adoption = adoptions::find_any(&self.db, proposal_id)
            .await?
            .ok_or_else(|| {
                refused(format!(
                    "no adoption of proposal {proposal_id} was asked for"
                ))
            })?;
        let (tenant, env_id) = (&adoption.tenant_id, &adoption.environment_id);
        let proposal = proposals::find(&self.db, tenant, proposal_id)
            .await?
            .ok_or_else(|| refused(format!("proposal {proposal_id} is gone")))?;
        let env = environments::find(&self.db, tenant, env_id)
            .await?
            .ok_or_else(|| refused(format!("environment {env_id} is not registered")))?;
        let (RunnerTarget::Pulumi(_), ObserverTarget::Kubernetes(k)) =
            (&env.target.runner, &env.target.observer)
        else {
            return Err(refused(format!(
                "environment {env_id} is not a Pulumi stack observed in a Kubernetes namespace"
            )));
        };
        let unmanaged: Vec<String> =
            findings::unmanaged_of(&self.db, tenant, &[proposal.proposal_id])
                .await?
                .into_iter()
                .filter(|f| f.kind == DriftKind::Unmanaged && f.resolved_at.is_none())
                .map(|f| f.resource)
                .collect();
        if unmanaged.is_empty() {
            return Err(refused(
                "the proposal covers no unmanaged workload that is still observed".into(),
            ));
        }
        let spec = specifications::latest(&self.db, tenant, env_id)
            .await?
            .ok_or_else(|| refused(format!("environment {env_id} has no specification")))?
            .snapshot();
        let target = Target {
            tenant_id: tenant.clone(),
            environment_id: env_id.clone(),
            limits: None,
        };
        let generated = self
            .pulumi
            .generate_adoption(&target, &spec, &unmanaged, &k.namespace)
            .await?;
        let published = self
            .pulumi
            .publish_adoption(&target, &spec, proposal_id, &generated)
            .await?;
        Ok(Outcome::Published {
            resources: generated.imports,
            branch: published.branch,
            commit: published.commit,
            diff: published.diff,
        })
    }
}

#[activities]
impl AdoptionActivitiesImpl {
    #[activity(definition = markers::Publish)]
    pub async fn publish(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: AdoptionInput,
    ) -> Result<(), ActivityError> {
        // Heartbeats while it works: a lost worker's attempt is given up (and tried again)
        // within the heartbeat timeout, and a cancelled one drops its processes.
        let work = self.generate_and_publish(&req.proposal_id);
        tokio::pin!(work);
        let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
        let generated = loop {
            tokio::select! {
                done = &mut work => break done,
                _ = beat.tick() => {
                    let _ = ctx.record_heartbeat(()).await;
                }
            }
        };
        let outcome = match generated {
            Ok(published) => published,
            Err(Error::PlanInvalid(reason)) => Outcome::Failed { reason },
            Err(e) => return Err(activity_error(e)),
        };
        adoptions::end(&self.db, &req.proposal_id, req.attempt, outcome)
            .await
            .map_err(store_failed)
    }

    #[activity(definition = markers::Fail)]
    pub async fn fail(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: FailAdoption,
    ) -> Result<(), ActivityError> {
        let outcome = Outcome::Failed { reason: req.reason };
        let adoption = req.adoption;
        adoptions::end(&self.db, &adoption.proposal_id, adoption.attempt, outcome)
            .await
            .map_err(store_failed)
    }
}
