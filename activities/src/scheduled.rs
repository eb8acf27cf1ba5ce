//! The scheduled activities: page through environments, mark stale ones, re-plan one.

use crate::Error;
use crate::error::activity_error;
use crate::inventory_store;
use crate::ports::{Runner, Target};
use crate::store::{
    append_event, event_id, latest_specification, new_run_row, run_input, snapshot,
};
use chrono::Utc;
use runtime_cloud_models::drift::{Direction, ProposalPlan, ProposalState};
use runtime_cloud_store::entities::{
    drift_findings as findings, environments, reconciliation_proposals as proposals,
    runtime_inventories as inventories,
};
use runtime_cloud_models::events::ObservedStateChanged;
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_models::{EnvironmentClass, ProvisioningKind};
use runtime_cloud_workflows::contracts::scheduled_markers as markers;
use runtime_cloud_workflows::contracts::{
    EnvironmentKey, EnvironmentPage, EnvironmentPageRequest, ProposalInput, ReplanOutcome,
    ReplanRequest,
};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, TransactionTrait,
};
use std::collections::BTreeSet;
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
        let mut select = environments::Entity::find().order_by_asc(environments::Column::Id);
        if let Some(after) = &req.after {
            select = select.filter(environments::Column::Id.gt(after.clone()));
        }
        let rows = select.limit(req.limit).all(&self.db).await?;
        let next = (rows.len() as u64 == req.limit)
            .then(|| rows.last().map(|r| r.id.clone()))
            .flatten();
        let environments = rows
            .into_iter()
            .map(|r| EnvironmentKey {
                tenant_id: r.tenant_id,
                environment_id: r.environment_id,
            })
            .collect();
        Ok(EnvironmentPage { environments, next })
    }

    async fn mark_stale_since(&self, window: &str) -> Result<u64, Error> {
        let cutoff = Utc::now() - chrono::Duration::seconds(self.inventory.staleness_secs() as i64);
        let txn = self.db.begin().await?;
        let stale = inventories::Entity::find()
            .filter(inventories::Column::Stale.eq(false))
            .filter(inventories::Column::ObservedAt.lt(cutoff))
            .all(&txn)
            .await?;
        let count = stale.len() as u64;
        for row in stale {
            let event = ObservedStateChanged {
                environment_id: row.environment_id.clone(),
                tenant_id: row.tenant_id.clone(),
                project_id: row.project_id.clone(),
                current_release_id: row.current_release_id.clone(),
                changes: serde_json::json!([]),
                stale: true,
            };
            let id = event_id(
                &format!("{}/{window}", row.id),
                "ObservedStateChanged/stale",
            );
            append_event(&txn, &row.tenant_id, event.into(), id).await?;
            let mut row: inventories::ActiveModel = row.into();
            row.stale = Set(true);
            row.updated_at = Set(Utc::now());
            row.update(&txn).await?;
        }
        txn.commit().await?;
        Ok(count)
    }

    async fn replan_environment(&self, req: &ReplanRequest) -> Result<ReplanOutcome, Error> {
        let key = &req.environment;
        let Some(env) =
            inventory_store::environment(&self.db, &key.tenant_id, &key.environment_id).await?
        else {
            return Ok(ReplanOutcome::Nothing);
        };
        let Some(spec) =
            latest_specification(&self.db, &key.tenant_id, &key.environment_id).await?
        else {
            return Ok(ReplanOutcome::Nothing);
        };
        let target = Target {
            tenant_id: key.tenant_id.clone(),
            environment_id: key.environment_id.clone(),
        };
        let plan = match self.runner.plan(&target, &snapshot(&spec)?).await {
            Ok(plan) => plan,
            // Unreachable now: the observation sweep marks it stale; try again next pass.
            Err(Error::Unreachable(_)) => return Ok(ReplanOutcome::Nothing),
            Err(e) => return Err(e),
        };
        if plan.changes.is_empty() {
            return Ok(ReplanOutcome::Nothing);
        }
        let production = env.class == EnvironmentClass::Production.as_str();
        let destructive = plan.changes.is_destructive();
        let txn = self.db.begin().await?;
        if !destructive && !production && self.provisioning.auto_apply_non_destructive {
            if crate::store::run_exists(&txn, &req.run_id).await? {
                txn.commit().await?;
            } else {
                new_run_row(
                    &req.run_id,
                    &env,
                    &spec,
                    ProvisioningKind::Reconciliation,
                    None,
                    None,
                )
                .insert(&txn)
                .await?;
                txn.commit().await?;
            }
            let run = run_input(
                &req.run_id,
                &env,
                &spec,
                ProvisioningKind::Reconciliation,
                None,
                None,
                &self.provisioning,
            )?;
            return Ok(ReplanOutcome::Apply { run: Box::new(run) });
        }
        // Destructive or production: an operator reviews it, unless a proposal is already open.
        let open_proposal = proposals::Entity::find()
            .filter(proposals::Column::TenantId.eq(&key.tenant_id))
            .filter(proposals::Column::EnvironmentId.eq(&key.environment_id))
            .filter(proposals::Column::State.is_in([
                ProposalState::Proposed.as_str(),
                ProposalState::Accepted.as_str(),
            ]))
            .one(&txn)
            .await?;
        if let Some(p) = open_proposal {
            let ours = p.proposal_id == req.proposal_id;
            txn.commit().await?;
            return Ok(if ours {
                self.propose_outcome(&p, production)
            } else {
                ReplanOutcome::Nothing
            });
        }
        let open_findings: BTreeSet<String> = findings::Entity::find()
            .filter(findings::Column::TenantId.eq(&key.tenant_id))
            .filter(findings::Column::EnvironmentId.eq(&key.environment_id))
            .filter(findings::Column::ResolvedAt.is_null())
            .all(&txn)
            .await?
            .into_iter()
            .map(|f| f.finding_id)
            .collect();
        let proposal = ProposalPlan {
            direction: Direction::ApplyDeclared,
            destructive,
            plan_summary: plan.summary(),
        };
        let row = inventory_store::insert_proposal(
            &txn,
            &req.proposal_id,
            &key.tenant_id,
            &key.environment_id,
            &open_findings,
            &proposal,
            Utc::now(),
        )
        .await?;
        txn.commit().await?;
        Ok(self.propose_outcome(&row, production))
    }

    fn propose_outcome(&self, p: &proposals::Model, production: bool) -> ReplanOutcome {
        ReplanOutcome::Propose {
            proposal: ProposalInput {
                proposal_id: p.proposal_id.clone(),
                tenant_id: p.tenant_id.clone(),
                environment_id: p.environment_id.clone(),
                production,
                direction: Direction::ApplyDeclared,
                destructive: p.destructive,
                // Only destructive or production differences become proposals: never automatic.
                auto_accept: false,
            },
            superseded: Vec::new(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Sandbox;
    use runtime_cloud_store::migration::Migrator;
    use sea_orm_migration::MigratorTrait;

    async fn activities(staleness_minutes: f64) -> ScheduledActivitiesImpl {
        let db = sea_orm::Database::connect("sqlite::memory:").await.unwrap();
        Migrator::up(&db, None).await.unwrap();
        ScheduledActivitiesImpl {
            db,
            runner: Arc::new(Sandbox::new(std::path::Path::new("/nonexistent"))),
            inventory: InventoryOptions {
                staleness_minutes,
                ..Default::default()
            },
            provisioning: ProvisioningOptions::default(),
        }
    }

    async fn inventory(db: &DatabaseConnection, env: &str, observed_minutes_ago: i64) {
        let now = Utc::now();
        inventories::ActiveModel {
            id: Set(format!("inv-{env}")),
            tenant_id: Set("acme".into()),
            environment_id: Set(env.into()),
            project_id: Set("shop".into()),
            workloads: Set(serde_json::json!([])),
            current_release_id: Set(None),
            specification_version: Set(None),
            observed_at: Set(Some(now - chrono::Duration::minutes(observed_minutes_ago))),
            stale: Set(false),
            last_error: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(db)
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn mark_stale_marks_only_old_observations_once() {
        let a = activities(15.0).await;
        inventory(&a.db, "old", 20).await;
        inventory(&a.db, "fresh", 5).await;
        assert_eq!(a.mark_stale_since("w1").await.unwrap(), 1);
        let rows = inventories::Entity::find().all(&a.db).await.unwrap();
        let stale: Vec<_> = rows
            .iter()
            .filter(|r| r.stale)
            .map(|r| r.environment_id.as_str())
            .collect();
        assert_eq!(stale, ["old"]);
        let events = runtime_cloud_store::entities::outbox_events::Entity::find()
            .all(&a.db)
            .await
            .unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].payload["stale"], true);
        // Already stale: not marked (nor announced) again.
        assert_eq!(a.mark_stale_since("w2").await.unwrap(), 0);
    }

    #[tokio::test]
    async fn environments_page_in_a_stable_order() {
        let a = activities(15.0).await;
        let now = Utc::now();
        for i in 0..5 {
            environments::ActiveModel {
                id: Set(format!("e{i}")),
                tenant_id: Set("acme".into()),
                environment_id: Set(format!("env-{i}")),
                project_id: Set("p".into()),
                class: Set("non-production".into()),
                target: Set("sandbox".into()),
                created_at: Set(now),
                updated_at: Set(now),
            }
            .insert(&a.db)
            .await
            .unwrap();
        }
        let first = a
            .page(&EnvironmentPageRequest {
                after: None,
                limit: 2,
            })
            .await
            .unwrap();
        let second = a
            .page(&EnvironmentPageRequest {
                after: first.next.clone(),
                limit: 2,
            })
            .await
            .unwrap();
        let third = a
            .page(&EnvironmentPageRequest {
                after: second.next.clone(),
                limit: 2,
            })
            .await
            .unwrap();
        let names: Vec<_> = [first, second, third.clone()]
            .iter()
            .flat_map(|p| p.environments.iter().map(|e| e.environment_id.clone()))
            .collect();
        assert_eq!(names, ["env-0", "env-1", "env-2", "env-3", "env-4"]);
        assert_eq!(third.next, None);
    }
}
