//! Read-table writes. Each change is one transaction together with its outbox event, so an
//! event is never published for a change that did not happen, nor lost for one that did.

use crate::Error;
use chrono::Utc;
use runtime_cloud_store::entities::{deployment_specifications, outbox_events, provisioning_runs};
use runtime_cloud_models::events::{
    OutboxEvent, ProvisioningApplied, ProvisioningFailed, ProvisioningPlanned,
};
use runtime_cloud_models::{ProvisioningState, RunInput, RunStatus};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ConnectionTrait, DatabaseConnection, EntityTrait,
    TransactionTrait,
};
use uuid::Uuid;

/// Namespace of the deterministic event ids: a retried projection writes the same id.
const EVENT_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2b7e_9a41_4c55_8d0e_52b4_a7c3_19e0);

/// The event id of `event_type` about `aggregate_id`: the same on every retry.
pub fn event_id(aggregate_id: &str, event_type: &str) -> String {
    Uuid::new_v5(
        &EVENT_NAMESPACE,
        format!("{aggregate_id}/{event_type}").as_bytes(),
    )
    .to_string()
}

/// Appends an event to the outbox unless an event with this id is already there.
pub async fn append_event(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    event: OutboxEvent,
    event_id: String,
) -> Result<(), Error> {
    if outbox_events::Entity::find()
        .filter_by_event_id(&event_id)
        .one(db)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let now = Utc::now();
    outbox_events::ActiveModel {
        event_id: Set(event_id),
        tenant_id: Set(tenant_id.to_owned()),
        event_type: Set(event.event_type.to_owned()),
        topic: Set(event.topic.to_owned()),
        aggregate_id: Set(event.aggregate_id),
        payload: Set(event.payload),
        occurred_at: Set(now),
        published_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
    .insert(db)
    .await?;
    Ok(())
}

trait FindByEventId {
    fn filter_by_event_id(self, id: &str) -> Self;
}

impl FindByEventId for sea_orm::Select<outbox_events::Entity> {
    fn filter_by_event_id(self, id: &str) -> Self {
        use sea_orm::{ColumnTrait, QueryFilter};
        self.filter(outbox_events::Column::EventId.eq(id))
    }
}

/// The integration event a transition into `status.state` publishes, if any.
pub fn run_event(run: &RunInput, status: &RunStatus) -> Option<OutboxEvent> {
    let kind = run.kind.as_str().to_owned();
    match status.state? {
        ProvisioningState::Planned => Some(
            ProvisioningPlanned {
                provisioning_run_id: run.run_id.clone(),
                tenant_id: run.tenant_id.clone(),
                environment_id: run.environment_id.clone(),
                kind,
                promotion_id: run.promotion_id.clone(),
                plan_summary: status
                    .plan_receipt
                    .as_ref()
                    .map(|p| p.summary())
                    .unwrap_or_default(),
            }
            .into(),
        ),
        ProvisioningState::Applied => Some(
            ProvisioningApplied {
                provisioning_run_id: run.run_id.clone(),
                tenant_id: run.tenant_id.clone(),
                project_id: run.project_id.clone(),
                environment_id: run.environment_id.clone(),
                kind,
                promotion_id: run.promotion_id.clone(),
                specification_version: run.specification.version,
                outputs: status
                    .apply_receipt
                    .as_ref()
                    .map(|r| r.outputs.clone())
                    .unwrap_or_default(),
            }
            .into(),
        ),
        ProvisioningState::Failed => Some(
            ProvisioningFailed {
                provisioning_run_id: run.run_id.clone(),
                tenant_id: run.tenant_id.clone(),
                environment_id: run.environment_id.clone(),
                kind,
                promotion_id: run.promotion_id.clone(),
                reason: status.reason.clone().unwrap_or_default(),
            }
            .into(),
        ),
        _ => None,
    }
}

fn to_json<T: serde::Serialize>(v: &Option<T>) -> Result<Option<serde_json::Value>, Error> {
    v.as_ref()
        .map(|v| serde_json::to_value(v).map_err(|e| Error::Invalid(e.to_string())))
        .transpose()
}

/// Projects a run's status into `provisioning_runs`, with its event, in one transaction.
/// Creates the row when the run was not started through the API (a promotion starting the
/// workflow directly). Idempotent: projecting the same status twice writes the same row and
/// one event.
pub async fn project_run(
    db: &DatabaseConnection,
    run: &RunInput,
    status: &RunStatus,
) -> Result<(), Error> {
    let txn = db.begin().await?;
    let now = Utc::now();
    let existing = provisioning_runs::Entity::find_by_id(run.run_id.clone())
        .one(&txn)
        .await?;
    let new = existing.is_none();
    let mut row: provisioning_runs::ActiveModel = match existing {
        Some(row) => row.into(),
        None => provisioning_runs::ActiveModel {
            provisioning_run_id: Set(run.run_id.clone()),
            tenant_id: Set(run.tenant_id.clone()),
            project_id: Set(run.project_id.clone()),
            environment_id: Set(run.environment_id.clone()),
            specification_id: Set(run.specification.specification_id.clone()),
            specification_version: Set(run.specification.version),
            kind: Set(run.kind.as_str().to_owned()),
            promotion_id: Set(run.promotion_id.clone()),
            approval_id: Set(run.approval_id.clone()),
            logs_ref: Set(Some(logs_ref(&run.run_id))),
            idempotency_key: Set(None),
            request_hash: Set(None),
            started_at: Set(now),
            created_at: Set(now),
            ..Default::default()
        },
    };
    row.state = Set(status.state.map(|s| s.as_str().to_owned()));
    row.plan_receipt = Set(to_json(&status.plan_receipt)?);
    row.approval = Set(to_json(&status.approval)?);
    row.apply_receipt = Set(to_json(&status.apply_receipt)?);
    row.reason = Set(status.reason.clone());
    row.completed_at = Set(status.state.filter(|s| s.is_terminal()).map(|_| now));
    row.updated_at = Set(now);
    // `save` would update a new row (its primary key is set), so say which.
    if new {
        row.insert(&txn).await?;
    } else {
        row.update(&txn).await?;
    }
    if let Some(event) = run_event(run, status) {
        let id = event_id(&run.run_id, event.event_type);
        append_event(&txn, &run.tenant_id, event, id).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// Where a run's plan and apply logs are found: its workflow history.
pub fn logs_ref(run_id: &str) -> String {
    format!("temporal://workflows/provisioning-run/{run_id}/history")
}

/// Re-exported for callers that build specification rows.
pub type SpecificationRow = deployment_specifications::Model;

/// A specification version to declare.
#[derive(Debug, Clone)]
pub struct NewSpecification {
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub kind: runtime_cloud_models::SpecificationKind,
    pub program_ref: String,
    pub program_version: String,
    pub release_id: Option<String>,
    pub strategy: Option<String>,
    pub config_refs: runtime_cloud_models::Refs,
    pub secret_refs: runtime_cloud_models::Refs,
    pub workloads: Vec<runtime_cloud_models::Workload>,
}

/// Declares the next version of an environment's specification with its
/// `SpecificationDeclared` event, in one transaction. Two declarations racing for a version
/// meet the unique index; the loser takes the next version.
pub async fn declare_specification(
    db: &DatabaseConnection,
    spec: NewSpecification,
) -> Result<SpecificationRow, Error> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let txn = db.begin().await?;
        match insert_specification(&txn, &spec).await {
            Ok(row) => {
                txn.commit().await?;
                return Ok(row);
            }
            Err(Error::Db(e)) if attempts < 8 && retryable_conflict(&e) => {
                txn.rollback().await?;
                // SQLite refuses a read-then-write transaction that meets another writer at
                // once instead of waiting; a short pause lets the other commit.
                tokio::time::sleep(std::time::Duration::from_millis(20 * attempts)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A conflict that a retry of the whole transaction resolves: another declaration took the
/// version, or (SQLite) another writer held the database.
fn retryable_conflict(e: &sea_orm::DbErr) -> bool {
    matches!(
        e.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    ) || e.to_string().contains("database is locked")
}

/// The latest declared specification of an environment.
pub async fn latest_specification(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<SpecificationRow>, Error> {
    use sea_orm::{ColumnTrait, QueryFilter, QueryOrder};
    Ok(deployment_specifications::Entity::find()
        .filter(deployment_specifications::Column::TenantId.eq(tenant_id))
        .filter(deployment_specifications::Column::EnvironmentId.eq(environment_id))
        .order_by_desc(deployment_specifications::Column::Version)
        .one(db)
        .await?)
}

/// Inserts the next version and its event on `db` (the caller's transaction).
pub async fn insert_specification(
    db: &impl ConnectionTrait,
    spec: &NewSpecification,
) -> Result<SpecificationRow, Error> {
    use runtime_cloud_models::events::SpecificationDeclared;
    let latest = latest_specification(db, &spec.tenant_id, &spec.environment_id).await?;
    let version = latest.map_or(1, |s| s.version + 1);
    let now = Utc::now();
    let row = deployment_specifications::ActiveModel {
        specification_id: Set(Uuid::now_v7().to_string()),
        tenant_id: Set(spec.tenant_id.clone()),
        project_id: Set(spec.project_id.clone()),
        environment_id: Set(spec.environment_id.clone()),
        kind: Set(spec.kind.as_str().to_owned()),
        program_ref: Set(spec.program_ref.clone()),
        program_version: Set(spec.program_version.clone()),
        release_id: Set(spec.release_id.clone()),
        strategy: Set(spec.strategy.clone()),
        config_refs: Set(json(&spec.config_refs)),
        secret_refs: Set(json(&spec.secret_refs)),
        workloads: Set(json(&spec.workloads)),
        version: Set(version),
        declared_at: Set(now),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    let event = SpecificationDeclared {
        specification_id: row.specification_id.clone(),
        tenant_id: row.tenant_id.clone(),
        environment_id: row.environment_id.clone(),
        kind: row.kind.clone(),
        version: row.version,
        program_version: row.program_version.clone(),
    };
    let id = event_id(&row.specification_id, "SpecificationDeclared");
    append_event(db, &row.tenant_id, event.into(), id).await?;
    Ok(row)
}

/// Serializes the plain data of a specification (string maps and workloads), which cannot fail.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}

fn parse<T: serde::de::DeserializeOwned>(
    row: &SpecificationRow,
    v: &serde_json::Value,
    what: &str,
) -> Result<T, Error> {
    serde_json::from_value(v.clone()).map_err(|e| {
        Error::Invalid(format!(
            "{what} of specification {}: {e}",
            row.specification_id
        ))
    })
}

/// The snapshot a run carries, read back from a specification row.
pub fn snapshot(
    row: &SpecificationRow,
) -> Result<runtime_cloud_models::SpecificationSnapshot, Error> {
    Ok(runtime_cloud_models::SpecificationSnapshot {
        specification_id: row.specification_id.clone(),
        version: row.version,
        program_ref: row.program_ref.clone(),
        program_version: row.program_version.clone(),
        config_refs: parse(row, &row.config_refs, "configRefs")?,
        secret_refs: parse(row, &row.secret_refs, "secretRefs")?,
        workloads: parse(row, &row.workloads, "workloads")?,
    })
}

/// A new `provisioning_runs` row, not yet planned (state null). The caller inserts it.
pub fn new_run_row(
    run_id: &str,
    env: &runtime_cloud_store::entities::environments::Model,
    spec: &SpecificationRow,
    kind: runtime_cloud_models::ProvisioningKind,
    promotion_id: Option<String>,
    approval_id: Option<String>,
) -> provisioning_runs::ActiveModel {
    let now = Utc::now();
    provisioning_runs::ActiveModel {
        provisioning_run_id: Set(run_id.to_owned()),
        tenant_id: Set(env.tenant_id.clone()),
        project_id: Set(env.project_id.clone()),
        environment_id: Set(env.environment_id.clone()),
        specification_id: Set(spec.specification_id.clone()),
        specification_version: Set(spec.version),
        kind: Set(kind.as_str().to_owned()),
        promotion_id: Set(promotion_id),
        approval_id: Set(approval_id),
        plan_receipt: Set(None),
        approval: Set(None),
        apply_receipt: Set(None),
        state: Set(None),
        reason: Set(None),
        logs_ref: Set(Some(logs_ref(run_id))),
        idempotency_key: Set(None),
        request_hash: Set(None),
        started_at: Set(now),
        completed_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
}

/// The input of a run of `spec` on `env`, with the configured timeouts.
pub fn run_input(
    run_id: &str,
    env: &runtime_cloud_store::entities::environments::Model,
    spec: &SpecificationRow,
    kind: runtime_cloud_models::ProvisioningKind,
    promotion_id: Option<String>,
    approval_id: Option<String>,
    options: &runtime_cloud_models::options::ProvisioningOptions,
) -> Result<RunInput, Error> {
    use std::str::FromStr;
    Ok(RunInput {
        run_id: run_id.to_owned(),
        tenant_id: env.tenant_id.clone(),
        project_id: env.project_id.clone(),
        environment_id: env.environment_id.clone(),
        environment_class: runtime_cloud_models::EnvironmentClass::from_str(&env.class)
            .map_err(|e| Error::Invalid(e.to_string()))?,
        kind,
        promotion_id,
        approval_id,
        specification: snapshot(spec)?,
        approval_timeout_secs: options.approval_timeout_secs(),
        apply_timeout_secs: options.apply_timeout_secs(),
    })
}

/// Whether a run row exists (a retried activity that already created it).
pub async fn run_exists(db: &impl ConnectionTrait, run_id: &str) -> Result<bool, Error> {
    Ok(provisioning_runs::Entity::find_by_id(run_id.to_owned())
        .one(db)
        .await?
        .is_some())
}
