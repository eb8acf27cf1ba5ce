//! Inventory read-table writes: observations, findings and proposals, each with its events in
//! one transaction.

use crate::Error;
use crate::store::{
    NewSpecification, append_event, event_id, insert_specification, latest_specification,
    new_run_row, run_input, snapshot,
};
use chrono::Utc;
use runtime_cloud_models::drift::{
    Direction, DriftKind, Finding, ProposalPlan, ProposalState, compare, proposal_plan,
};
use runtime_cloud_store::entities::{
    drift_findings as findings, environments, observed_workloads as observed_rows,
    provisioning_runs, reconciliation_proposals as proposals, runtime_inventories as inventories,
};
use runtime_cloud_models::events::{
    ObservedStateChanged, ReconciliationDecided, ReconciliationProposed, RuntimeDriftDetected,
};
use runtime_cloud_models::observation::{Observation, ObservedWorkload, changes};
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::{
    EnvironmentClass, ProvisioningKind, ProvisioningState, RunInput, SpecificationKind, Workload,
};
use runtime_cloud_workflows::contracts::{
    PrepareRunRequest, ProposalInput, ProposalProjection, RecordOutcome, RecordRequest,
};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, QueryFilter, QueryOrder, TransactionTrait,
};
use std::collections::BTreeSet;
use std::str::FromStr;
use uuid::Uuid;

/// Decides whether a proposal may skip the operator; see [`crate::ports::Policy`].
pub type AutoAccept<'a> = &'a (dyn Fn(&str, &str) -> bool + Send + Sync);

/// An environment of a tenant.
pub async fn environment(
    db: &impl ConnectionTrait,
    tenant: &str,
    env: &str,
) -> Result<Option<environments::Model>, Error> {
    Ok(environments::Entity::find()
        .filter(environments::Column::TenantId.eq(tenant))
        .filter(environments::Column::EnvironmentId.eq(env))
        .one(db)
        .await?)
}

/// The inventory row of an environment, if it was ever observed (or marked stale).
pub async fn inventory(
    db: &impl ConnectionTrait,
    tenant: &str,
    env: &str,
) -> Result<Option<inventories::Model>, Error> {
    Ok(inventories::Entity::find()
        .filter(inventories::Column::TenantId.eq(tenant))
        .filter(inventories::Column::EnvironmentId.eq(env))
        .one(db)
        .await?)
}

fn parse_workloads(v: &serde_json::Value) -> Vec<ObservedWorkload> {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// The specification version last applied to an environment.
async fn applied_version(
    db: &impl ConnectionTrait,
    tenant: &str,
    env: &str,
) -> Result<Option<i32>, Error> {
    Ok(provisioning_runs::Entity::find()
        .filter(provisioning_runs::Column::TenantId.eq(tenant))
        .filter(provisioning_runs::Column::EnvironmentId.eq(env))
        .filter(provisioning_runs::Column::State.eq(ProvisioningState::Applied.as_str()))
        .order_by_desc(provisioning_runs::Column::CompletedAt)
        .one(db)
        .await?
        .map(|r| r.specification_version))
}

/// Records one observation. See [`RecordRequest`].
pub async fn record(
    db: &DatabaseConnection,
    req: &RecordRequest,
    auto_accept: AutoAccept<'_>,
) -> Result<RecordOutcome, Error> {
    let txn = db.begin().await?;
    let Some(env) = environment(&txn, &req.tenant_id, &req.environment_id).await? else {
        // The environment was removed since the observation started: nothing to record.
        return Ok(RecordOutcome::default());
    };
    let now = Utc::now();
    let existing = inventory(&txn, &req.tenant_id, &req.environment_id).await?;
    let was_stale = existing.as_ref().is_none_or(|i| i.stale);
    let previous = existing
        .as_ref()
        .map(|i| parse_workloads(&i.workloads))
        .unwrap_or_default();
    let mut row: inventories::ActiveModel = match existing.clone() {
        Some(row) => row.into(),
        None => inventories::ActiveModel {
            id: Set(Uuid::now_v7().to_string()),
            tenant_id: Set(req.tenant_id.clone()),
            environment_id: Set(req.environment_id.clone()),
            project_id: Set(env.project_id.clone()),
            workloads: Set(serde_json::json!([])),
            current_release_id: Set(None),
            specification_version: Set(None),
            observed_at: Set(None),
            created_at: Set(now),
            ..Default::default()
        },
    };
    let event =
        |changes: serde_json::Value, stale: bool, release: Option<String>| ObservedStateChanged {
            environment_id: req.environment_id.clone(),
            tenant_id: req.tenant_id.clone(),
            project_id: env.project_id.clone(),
            current_release_id: release,
            changes,
            stale,
        };

    let workloads = match &req.observation {
        Observation::Unreachable { reason } => {
            // A failed observation marks the environment stale and raises nothing.
            row.stale = Set(true);
            row.last_error = Set(Some(reason.clone()));
            row.updated_at = Set(now);
            upsert(&txn, row, existing.is_none()).await?;
            let changed = existing.is_none() || !was_stale;
            if changed {
                let release = existing.and_then(|i| i.current_release_id);
                let id = event_id(&req.proposal_id, "ObservedStateChanged");
                append_event(
                    &txn,
                    &req.tenant_id,
                    event(serde_json::json!([]), true, release).into(),
                    id,
                )
                .await?;
            }
            txn.commit().await?;
            return Ok(RecordOutcome {
                changed,
                stale: true,
                ..Default::default()
            });
        }
        Observation::Observed { workloads } => workloads,
    };

    let spec = latest_specification(&txn, &req.tenant_id, &req.environment_id).await?;
    let diff = changes(&previous, workloads);
    let changed = existing.is_none() || was_stale || diff.as_array().is_some_and(|a| !a.is_empty());
    let release = spec.as_ref().and_then(|s| s.release_id.clone());
    row.workloads = Set(to_json(workloads));
    row.observed_at = Set(Some(now));
    row.stale = Set(false);
    row.last_error = Set(None);
    row.current_release_id = Set(release.clone());
    row.specification_version =
        Set(applied_version(&txn, &req.tenant_id, &req.environment_id).await?);
    row.updated_at = Set(now);
    upsert(&txn, row, existing.is_none()).await?;
    replace_observed_workloads(&txn, &req.tenant_id, &req.environment_id, workloads, now).await?;
    if changed {
        let id = event_id(&req.proposal_id, "ObservedStateChanged");
        append_event(&txn, &req.tenant_id, event(diff, false, release).into(), id).await?;
    }

    // Compare with the declared specification; without one there is nothing to drift from.
    let found = match &spec {
        Some(spec) => compare(&snapshot(spec)?.workloads, workloads),
        None => Vec::new(),
    };
    let (new_findings, resolved_findings, open) = sync_findings(&txn, req, &found, now).await?;
    let (new_proposal, superseded) =
        sync_proposal(&txn, req, &env, &open, auto_accept, now).await?;
    txn.commit().await?;
    Ok(RecordOutcome {
        changed,
        stale: false,
        new_findings,
        resolved_findings,
        new_proposal,
        superseded,
    })
}

/// Inserts a new inventory row or updates the existing one. (`save` would try an update for a
/// new row, since its primary key is set.)
async fn upsert(
    db: &impl ConnectionTrait,
    row: inventories::ActiveModel,
    new: bool,
) -> Result<(), Error> {
    if new {
        row.insert(db).await?;
    } else {
        row.update(db).await?;
    }
    Ok(())
}

async fn replace_observed_workloads(
    db: &impl ConnectionTrait,
    tenant: &str,
    env: &str,
    workloads: &[ObservedWorkload],
    now: chrono::DateTime<Utc>,
) -> Result<(), Error> {
    observed_rows::Entity::delete_many()
        .filter(observed_rows::Column::TenantId.eq(tenant))
        .filter(observed_rows::Column::EnvironmentId.eq(env))
        .exec(db)
        .await?;
    for w in workloads {
        observed_rows::ActiveModel {
            id: Set(Uuid::now_v7().to_string()),
            tenant_id: Set(tenant.to_owned()),
            environment_id: Set(env.to_owned()),
            name: Set(w.name.clone()),
            kind: Set(w.kind.clone()),
            version: Set(w.version.clone()),
            replicas_ready: Set(w.replicas_ready as i32),
            replicas_desired: Set(w.replicas_desired as i32),
            endpoints: Set(to_json(&w.endpoints)),
            config_refs: Set(to_json(&w.config_refs)),
            secret_refs: Set(to_json(&w.secret_refs)),
            health: Set(w.health.clone()),
            observed_at: Set(now),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(db)
        .await?;
    }
    Ok(())
}

/// Raises findings not open yet and resolves open ones this observation no longer shows.
/// Returns (raised, resolved, the open findings after).
async fn sync_findings(
    db: &impl ConnectionTrait,
    req: &RecordRequest,
    found: &[Finding],
    now: chrono::DateTime<Utc>,
) -> Result<(u32, u32, Vec<findings::Model>), Error> {
    let open = findings::Entity::find()
        .filter(findings::Column::TenantId.eq(&req.tenant_id))
        .filter(findings::Column::EnvironmentId.eq(&req.environment_id))
        .filter(findings::Column::ResolvedAt.is_null())
        .all(db)
        .await?;
    let key = |kind: &str, resource: &str| format!("{kind}\u{0}{resource}");
    let found_keys: BTreeSet<String> = found
        .iter()
        .map(|f| key(f.kind.as_str(), &f.resource))
        .collect();
    let open_keys: BTreeSet<String> = open.iter().map(|f| key(&f.kind, &f.resource)).collect();
    let mut still_open = Vec::new();
    let mut resolved = 0;
    for f in open {
        if found_keys.contains(&key(&f.kind, &f.resource)) {
            still_open.push(f);
        } else {
            let mut row: findings::ActiveModel = f.into();
            row.resolved_at = Set(Some(now));
            row.updated_at = Set(now);
            row.update(db).await?;
            resolved += 1;
        }
    }
    let mut raised = 0;
    for f in found
        .iter()
        .filter(|f| !open_keys.contains(&key(f.kind.as_str(), &f.resource)))
    {
        let row = findings::ActiveModel {
            finding_id: Set(Uuid::now_v7().to_string()),
            tenant_id: Set(req.tenant_id.clone()),
            environment_id: Set(req.environment_id.clone()),
            kind: Set(f.kind.as_str().to_owned()),
            resource: Set(f.resource.clone()),
            declared: Set(f.declared.clone()),
            observed: Set(f.observed.clone()),
            detected_at: Set(now),
            proposal_id: Set(None),
            resolved_at: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(db)
        .await?;
        let event = RuntimeDriftDetected {
            finding_id: row.finding_id.clone(),
            tenant_id: row.tenant_id.clone(),
            environment_id: row.environment_id.clone(),
            kind: row.kind.clone(),
            resource: row.resource.clone(),
        };
        let id = event_id(&row.finding_id, "RuntimeDriftDetected");
        append_event(db, &req.tenant_id, event.into(), id).await?;
        still_open.push(row);
        raised += 1;
    }
    Ok((raised, resolved, still_open))
}

fn finding_ids(p: &proposals::Model) -> BTreeSet<String> {
    serde_json::from_value(p.finding_ids.clone()).unwrap_or_default()
}

fn proposal_input(p: &proposals::Model, production: bool, auto_accept: bool) -> ProposalInput {
    let direction = Direction::from_str(&p.direction).unwrap_or(Direction::ApplyDeclared);
    ProposalInput {
        proposal_id: p.proposal_id.clone(),
        tenant_id: p.tenant_id.clone(),
        environment_id: p.environment_id.clone(),
        production,
        direction,
        destructive: p.destructive,
        auto_accept: auto_accept && !p.destructive && !production,
    }
}

/// Groups the open findings into a proposal when they changed since the active one, and
/// supersedes the open proposals the new one replaces.
async fn sync_proposal(
    db: &impl ConnectionTrait,
    req: &RecordRequest,
    env: &environments::Model,
    open: &[findings::Model],
    auto_accept: AutoAccept<'_>,
    now: chrono::DateTime<Utc>,
) -> Result<(Option<ProposalInput>, Vec<String>), Error> {
    let production = env.class == EnvironmentClass::Production.as_str();
    let allowed = auto_accept(&req.tenant_id, &req.environment_id);
    // A retried record: the proposal it raised the first time is the answer again.
    if let Some(raised) = proposals::Entity::find_by_id(req.proposal_id.clone())
        .one(db)
        .await?
    {
        return Ok((
            Some(proposal_input(&raised, production, allowed)),
            Vec::new(),
        ));
    }
    let active = proposals::Entity::find()
        .filter(proposals::Column::TenantId.eq(&req.tenant_id))
        .filter(proposals::Column::EnvironmentId.eq(&req.environment_id))
        .filter(proposals::Column::State.is_in([
            ProposalState::Proposed.as_str(),
            ProposalState::Accepted.as_str(),
        ]))
        .order_by_desc(proposals::Column::ProposalId)
        .all(db)
        .await?;
    // An accepted proposal whose run ended without applying (failed, rejected, cancelled) no
    // longer covers its findings: the drift needs a new proposal.
    let mut live = Vec::with_capacity(active.len());
    for p in active {
        if p.state == ProposalState::Accepted.as_str()
            && run_ended_unapplied(db, p.provisioning_run_id.as_deref()).await?
        {
            continue;
        }
        live.push(p);
    }
    let active = live;
    let open_ids: BTreeSet<String> = open.iter().map(|f| f.finding_id.clone()).collect();
    if active.first().is_some_and(|p| finding_ids(p) == open_ids) {
        return Ok((None, Vec::new()));
    }
    // Open proposals that no longer match what is observed are superseded.
    let mut superseded = Vec::new();
    for p in active
        .into_iter()
        .filter(|p| p.state == ProposalState::Proposed.as_str())
    {
        superseded.push(p.proposal_id.clone());
        let mut row: proposals::ActiveModel = p.into();
        row.state = Set(ProposalState::Superseded.as_str().to_owned());
        row.updated_at = Set(now);
        row.update(db).await?;
    }
    if open.is_empty() {
        return Ok((None, superseded));
    }
    let as_findings: Vec<Finding> = open
        .iter()
        .map(|f| Finding {
            kind: DriftKind::from_str(&f.kind).unwrap_or(DriftKind::Version),
            resource: f.resource.clone(),
            declared: f.declared.clone(),
            observed: f.observed.clone(),
        })
        .collect();
    let plan = proposal_plan(&as_findings);
    let row = insert_proposal(
        db,
        &req.proposal_id,
        &req.tenant_id,
        &req.environment_id,
        &open_ids,
        &plan,
        now,
    )
    .await?;
    Ok((Some(proposal_input(&row, production, allowed)), superseded))
}

/// Whether a proposal's run has ended in a state other than `Applied`.
async fn run_ended_unapplied(
    db: &impl ConnectionTrait,
    run_id: Option<&str>,
) -> Result<bool, Error> {
    let Some(run_id) = run_id else {
        return Ok(false);
    };
    let state = provisioning_runs::Entity::find_by_id(run_id.to_owned())
        .one(db)
        .await?
        .and_then(|r| r.state);
    Ok(state
        .as_deref()
        .and_then(|s| ProvisioningState::from_str(s).ok())
        .is_some_and(|s| s.is_terminal() && s != ProvisioningState::Applied))
}

/// Inserts a `Proposed` proposal covering `finding_ids`, links the findings to it, and writes
/// `ReconciliationProposed`, on `db` (the caller's transaction).
pub async fn insert_proposal(
    db: &impl ConnectionTrait,
    proposal_id: &str,
    tenant_id: &str,
    environment_id: &str,
    finding_ids: &BTreeSet<String>,
    plan: &ProposalPlan,
    now: chrono::DateTime<Utc>,
) -> Result<proposals::Model, Error> {
    let row = proposals::ActiveModel {
        proposal_id: Set(proposal_id.to_owned()),
        tenant_id: Set(tenant_id.to_owned()),
        environment_id: Set(environment_id.to_owned()),
        finding_ids: Set(to_json(finding_ids)),
        direction: Set(plan.direction.as_str().to_owned()),
        plan_summary: Set(plan.plan_summary.clone()),
        destructive: Set(plan.destructive),
        state: Set(ProposalState::Proposed.as_str().to_owned()),
        decided_by: Set(None),
        decision_reason: Set(None),
        provisioning_run_id: Set(None),
        raised_at: Set(now),
        decided_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    findings::Entity::update_many()
        .col_expr(
            findings::Column::ProposalId,
            sea_orm::sea_query::Expr::value(row.proposal_id.clone()),
        )
        .filter(findings::Column::FindingId.is_in(finding_ids.iter().cloned()))
        .exec(db)
        .await?;
    let event = ReconciliationProposed {
        proposal_id: row.proposal_id.clone(),
        tenant_id: row.tenant_id.clone(),
        environment_id: row.environment_id.clone(),
        direction: row.direction.clone(),
        destructive: row.destructive,
    };
    append_event(
        db,
        tenant_id,
        event.into(),
        event_id(&row.proposal_id, "ReconciliationProposed"),
    )
    .await?;
    Ok(row)
}

/// Projects a proposal's state; a decision (Accepted / Rejected) writes `ReconciliationDecided`.
pub async fn project_proposal(
    db: &DatabaseConnection,
    p: &ProposalProjection,
) -> Result<(), Error> {
    let txn = db.begin().await?;
    let Some(row) = proposals::Entity::find_by_id(p.proposal_id.clone())
        .one(&txn)
        .await?
    else {
        return Err(Error::Invalid(format!(
            "proposal {} has no row",
            p.proposal_id
        )));
    };
    let now = Utc::now();
    let (tenant, env) = (row.tenant_id.clone(), row.environment_id.clone());
    let mut row: proposals::ActiveModel = row.into();
    row.state = Set(p.state.as_str().to_owned());
    if matches!(p.state, ProposalState::Accepted | ProposalState::Rejected) {
        row.decided_by = Set(p.decided_by.clone());
        row.decision_reason = Set(p.reason.clone());
        row.decided_at = Set(Some(now));
    }
    if p.provisioning_run_id.is_some() {
        row.provisioning_run_id = Set(p.provisioning_run_id.clone());
    }
    row.updated_at = Set(now);
    row.update(&txn).await?;
    if matches!(p.state, ProposalState::Accepted | ProposalState::Rejected) {
        let event = ReconciliationDecided {
            proposal_id: p.proposal_id.clone(),
            tenant_id: tenant.clone(),
            environment_id: env,
            state: p.state.as_str().to_owned(),
            provisioning_run_id: p.provisioning_run_id.clone(),
        };
        append_event(
            &txn,
            &tenant,
            event.into(),
            event_id(&p.proposal_id, "ReconciliationDecided"),
        )
        .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// Prepares an accepted proposal's reconciliation run (idempotent by run id). For
/// `adopt-observed`, first declares a specification whose workloads are what was observed.
pub async fn prepare_run(
    db: &DatabaseConnection,
    req: &PrepareRunRequest,
    options: &ProvisioningOptions,
) -> Result<RunInput, Error> {
    let p = &req.proposal;
    let txn = db.begin().await?;
    let env = environment(&txn, &p.tenant_id, &p.environment_id)
        .await?
        .ok_or_else(|| Error::Invalid(format!("environment {} is gone", p.environment_id)))?;
    let existing = provisioning_runs::Entity::find_by_id(req.run_id.clone())
        .one(&txn)
        .await?;
    let spec = match &existing {
        Some(run) => {
            runtime_cloud_store::entities::deployment_specifications::Entity::find_by_id(
                run.specification_id.clone(),
            )
            .one(&txn)
            .await?
        }
        None => {
            let latest = latest_specification(&txn, &p.tenant_id, &p.environment_id).await?;
            match (p.direction, latest) {
                (Direction::AdoptObserved, Some(latest)) => {
                    let observed = inventory(&txn, &p.tenant_id, &p.environment_id)
                        .await?
                        .map(|i| parse_workloads(&i.workloads))
                        .unwrap_or_default();
                    let base = snapshot(&latest)?;
                    let adopted = NewSpecification {
                        tenant_id: p.tenant_id.clone(),
                        project_id: env.project_id.clone(),
                        environment_id: p.environment_id.clone(),
                        kind: SpecificationKind::from_str(&latest.kind)
                            .unwrap_or(SpecificationKind::Environment),
                        program_ref: base.program_ref,
                        program_version: base.program_version,
                        release_id: latest.release_id.clone(),
                        strategy: latest.strategy.clone(),
                        config_refs: base.config_refs,
                        secret_refs: base.secret_refs,
                        workloads: observed.iter().map(adopt).collect(),
                    };
                    Some(insert_specification(&txn, &adopted).await?)
                }
                (_, latest) => latest,
            }
        }
    };
    let spec = spec.ok_or_else(|| {
        Error::Invalid(format!(
            "environment {} has no specification",
            p.environment_id
        ))
    })?;
    if existing.is_none() {
        let row = new_run_row(
            &req.run_id,
            &env,
            &spec,
            ProvisioningKind::Reconciliation,
            None,
            Some(p.proposal_id.clone()),
        );
        row.insert(&txn).await?;
    }
    txn.commit().await?;
    // The accepted proposal is the run's approval: its decision is recorded with evidence.
    run_input(
        &req.run_id,
        &env,
        &spec,
        ProvisioningKind::Reconciliation,
        None,
        Some(p.proposal_id.clone()),
        options,
    )
}

/// The declared form of an observed workload.
fn adopt(w: &ObservedWorkload) -> Workload {
    Workload {
        name: w.name.clone(),
        kind: w.kind.clone(),
        version: w.version.clone(),
        replicas: w.replicas_desired,
        config_refs: w.config_refs.clone(),
        secret_refs: w.secret_refs.clone(),
    }
}
