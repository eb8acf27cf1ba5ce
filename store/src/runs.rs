//! `provisioning_runs`: the projection of every ProvisioningRun workflow.
//!
//! A run is created once, by [`create`] (the API, the GitOps reconciler, a proposal's run),
//! which also returns the `RunInput` the workflow starts with, so a row and its input can never
//! disagree. After that only [`project`] writes it, with each transition's event.

use crate::decode::{At, to_json};
use crate::entities::provisioning_runs as rows;
use crate::environments::Environment;
use crate::specifications::Specification;
use crate::{Error, Page, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::capacity::apply_minutes;
use runtime_cloud_models::events::{
    ChangeWindowOverridden, OutboxEvent, ProvisioningApplied, ProvisioningFailed,
    ProvisioningPlanned, QuarantineOverridden,
};
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::quarantine::QuarantineOverride;
use runtime_cloud_models::{
    ApplyReceipt, PlanReceipt, ProvisioningKind, ProvisioningState, RunInput, RunStatus, can_move,
    leads_to,
};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    DatabaseTransaction, EntityTrait, FromQueryResult, QueryFilter, QueryOrder, QuerySelect,
    SelectModel,
};
use serde_json::value::RawValue;

const TABLE: &str = "provisioning_runs";

/// Where a run's plan and apply logs are read: the API route that serves its artifacts.
pub fn logs_ref(run_id: &str) -> String {
    format!("/factory/provisioning/runs/{run_id}/logs")
}

/// A run to create: of `specification` on `environment`, not yet planned (state null).
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// A UUIDv7, so ordering by id orders by start time.
    pub run_id: &'a str,
    pub environment: &'a Environment,
    pub specification: &'a Specification,
    pub kind: ProvisioningKind,
    /// The promotion that asked for it.
    pub promotion_id: Option<String>,
    /// An approval that came with the request (a promotion's, or an accepted proposal).
    pub approval_id: Option<String>,
    /// The `Idempotency-Key` the run was requested with.
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to refuse the same key with another body.
    pub request_hash: Option<String>,
    /// A person's explicit run through quarantined versions: who, why, which.
    pub quarantine_override: Option<QuarantineOverride>,
}

impl NewRun<'_> {
    /// The workflow's input for this run, with the configured timeouts.
    pub fn input(&self, options: &ProvisioningOptions) -> RunInput {
        RunInput {
            run_id: self.run_id.to_owned(),
            tenant_id: self.environment.tenant_id.clone(),
            project_id: self.environment.project_id.clone(),
            environment_id: self.environment.environment_id.clone(),
            environment_class: self.environment.class,
            kind: self.kind,
            promotion_id: self.promotion_id.clone(),
            approval_id: self.approval_id.clone(),
            specification: self.specification.snapshot(),
            approval_timeout_secs: options.approval_timeout_secs(),
            apply_timeout_secs: options.apply_timeout_secs(),
            lease_id: None,
            quarantine_override: self.quarantine_override.clone(),
        }
    }
}

/// Creates the run's row and returns the workflow's input. [`Error::Duplicate`] when a run with
/// this id or `Idempotency-Key` exists.
pub async fn create(
    db: &impl ConnectionTrait,
    new: &NewRun<'_>,
    options: &ProvisioningOptions,
) -> Result<RunInput, Error> {
    let input = new.input(options);
    insert(db, new, None).await?;
    Ok(input)
}

/// [`create`] for a caller that retries with the same run id (an activity): a row that exists
/// is left as it is.
pub async fn create_once(
    db: &DatabaseConnection,
    new: &NewRun<'_>,
    options: &ProvisioningOptions,
) -> Result<RunInput, Error> {
    let txn = crate::begin_write(db).await?;
    if !exists(&txn, new.run_id).await? {
        insert(&txn, new, None).await?;
    }
    txn.commit().await?;
    Ok(new.input(options))
}

/// Inserts the row of `new` on `db` (the caller's transaction), showing `waiting` as what
/// holds it back (a run whose start is deferred).
pub async fn insert(
    db: &impl ConnectionTrait,
    new: &NewRun<'_>,
    waiting: Option<&runtime_cloud_models::capacity::CapacityWait>,
) -> Result<(), Error> {
    let now = Utc::now();
    rows::ActiveModel {
        provisioning_run_id: Set(new.run_id.to_owned()),
        tenant_id: Set(new.environment.tenant_id.clone()),
        project_id: Set(new.environment.project_id.clone()),
        environment_id: Set(new.environment.environment_id.clone()),
        specification_id: Set(new.specification.specification_id.clone()),
        specification_version: Set(new.specification.version),
        kind: Set(new.kind.as_str().to_owned()),
        promotion_id: Set(new.promotion_id.clone()),
        approval_id: Set(new.approval_id.clone()),
        plan_receipt: Set(None),
        approval: Set(None),
        apply_receipt: Set(None),
        refused_approvals: Set(None),
        waiting_for_window: Set(None),
        waiting_for_capacity: Set(waiting.map(to_json).transpose()?),
        apply_minutes: Set(None),
        break_glass: Set(None),
        policy: Set(None),
        quarantine_override: Set(new.quarantine_override.as_ref().map(to_json).transpose()?),
        state: Set(None),
        reason: Set(None),
        logs_ref: Set(Some(logs_ref(new.run_id))),
        idempotency_key: Set(new.idempotency_key.clone()),
        request_hash: Set(new.request_hash.clone()),
        started_at: Set(now),
        completed_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .map_err(Error::on_insert(TABLE))?;
    if let Some(o) = &new.quarantine_override {
        let event = QuarantineOverridden {
            provisioning_run_id: new.run_id.to_owned(),
            tenant_id: new.environment.tenant_id.clone(),
            environment_id: new.environment.environment_id.clone(),
            quarantines: o.quarantines.clone(),
            by: o.by.clone(),
            reason: o.reason.clone(),
        };
        let id = outbox::event_id(new.run_id, "QuarantineOverridden");
        outbox::append(db, &new.environment.tenant_id, event.into(), id).await?;
    }
    Ok(())
}

/// How many runs of the tenant's project have not ended (deferred ones too): the runs in
/// flight admission counts against the project's `concurrentRuns`.
pub async fn in_flight(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
) -> Result<u64, Error> {
    use sea_orm::PaginatorTrait;
    Ok(rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::ProjectId.eq(project_id))
        .filter(rows::Column::CompletedAt.is_null())
        .count(db)
        .await?)
}

/// Those of `run_ids` that wait for people or the clock, holding their lease but costing
/// nothing meanwhile: for an approval (which may take days) or for a change window.
pub async fn idle_among(
    db: &impl ConnectionTrait,
    run_ids: &[String],
) -> Result<std::collections::HashSet<String>, Error> {
    use sea_orm::{Condition, QuerySelect};
    let mut idle = std::collections::HashSet::new();
    // Bounded statements: SQLite takes at most 32,766 parameters.
    for ids in run_ids.chunks(1000) {
        let found: Vec<String> = rows::Entity::find()
            .select_only()
            .column(rows::Column::ProvisioningRunId)
            .filter(rows::Column::ProvisioningRunId.is_in(ids.iter().cloned()))
            .filter(
                Condition::any()
                    .add(rows::Column::State.eq(ProvisioningState::AwaitingApproval.as_str()))
                    .add(rows::Column::WaitingForWindow.is_not_null()),
            )
            .into_tuple()
            .all(db)
            .await?;
        idle.extend(found);
    }
    Ok(idle)
}

/// Whether a run row exists.
pub async fn exists(db: &impl ConnectionTrait, run_id: &str) -> Result<bool, Error> {
    Ok(rows::Entity::find_by_id(run_id.to_owned())
        .select_only()
        .column(rows::Column::ProvisioningRunId)
        .into_tuple::<String>()
        .one(db)
        .await?
        .is_some())
}

/// The integration event a transition into `status.state` publishes, if any.
pub fn event(run: &RunInput, status: &RunStatus) -> Option<OutboxEvent> {
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

/// Projects a run's status into its row, with its event, in one transaction, after the
/// states it `passed` through since its last projection (oldest first, each with its event):
/// a run that goes from `Planned` straight on to `Applying` records both in one write. Creates
/// the row when the run was not started through [`create`] (a promotion starting the workflow
/// directly). Idempotent: projecting the same status twice writes the same row and one event.
pub async fn project(
    db: &DatabaseConnection,
    run: &RunInput,
    passed: &[RunStatus],
    status: &RunStatus,
) -> Result<(), Error> {
    let txn = crate::begin_write(db).await?;
    project_through_in(&txn, run, passed, status, Utc::now()).await?;
    txn.commit().await?;
    Ok(())
}

/// [`project`] in the caller's write transaction: the row is read once and written once, with
/// the last status, and each status's event is appended in order.
pub async fn project_through_in(
    txn: &DatabaseTransaction,
    run: &RunInput,
    passed: &[RunStatus],
    status: &RunStatus,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let existing = rows::Entity::find_by_id(run.run_id.clone())
        .one(txn)
        .await?;
    let at = At {
        table: TABLE,
        row: &run.run_id,
    };
    // The state the row holds, as each status moves it on; `None` while there is no row.
    let mut holds = match &existing {
        Some(row) => Some(at.wire_opt::<ProvisioningState>("state", row.state.as_deref())?),
        None => None,
    };
    let mut glass_recorded = existing.as_ref().is_some_and(|r| r.break_glass.is_some());
    let mut last = None;
    for status in passed.iter().chain([status]) {
        let to = status.state;
        if let Some(from) = holds {
            if from != to && leads_to(to, from) {
                // A replay behind the row (a worker died after projecting a later state but
                // before reporting its workflow task): the row already holds more.
                continue;
            }
            // The same state again is a retried (or completed) projection of the same
            // transition.
            if let Some(to) = to
                && from != Some(to)
                && !can_move(from, to)
            {
                return Err(Error::IllegalTransition {
                    run: run.run_id.clone(),
                    from,
                    to,
                });
            }
        }
        holds = Some(to);
        if let Some(event) = event(run, status) {
            let id = outbox::event_id(&run.run_id, event.event_type);
            outbox::append(txn, &run.tenant_id, event, id).await?;
        }
        if let (false, Some(glass)) = (glass_recorded, &status.break_glass) {
            glass_recorded = true;
            let event = ChangeWindowOverridden {
                provisioning_run_id: run.run_id.clone(),
                tenant_id: run.tenant_id.clone(),
                environment_id: run.environment_id.clone(),
                window_id: glass.window_id.clone(),
                by: glass.by.clone(),
                reason: glass.reason.clone(),
            };
            let id = outbox::event_id(&run.run_id, "ChangeWindowOverridden");
            outbox::append(txn, &run.tenant_id, event.into(), id).await?;
        }
        last = Some(status);
    }
    let Some(status) = last else {
        return Ok(());
    };
    let new = existing.is_none();
    let mut row: rows::ActiveModel = match existing {
        Some(row) => row.into(),
        None => rows::ActiveModel {
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
    row.plan_receipt = Set(opt_json(&status.plan_receipt)?);
    row.approval = Set(opt_json(&status.approval)?);
    row.apply_receipt = Set(opt_json(&status.apply_receipt)?);
    row.refused_approvals = Set(Some(to_json(&status.refused_approvals)?));
    row.waiting_for_window = Set(opt_json(&status.waiting_for_window)?);
    row.waiting_for_capacity = Set(opt_json(&status.waiting_for_capacity)?);
    // A failed apply used its minutes too.
    row.apply_minutes = Set(status
        .apply_receipt
        .as_ref()
        .map(|r| i32::try_from(apply_minutes(r.duration_ms)).unwrap_or(i32::MAX)));
    row.break_glass = Set(opt_json(&status.break_glass)?);
    row.policy = Set(opt_json(&status.policy)?);
    row.reason = Set(status.reason.clone());
    row.completed_at = Set(status.state.filter(|s| s.is_terminal()).map(|_| now));
    row.updated_at = Set(now);
    // `save` would update a new row (its primary key is set), so say which.
    crate::write::put(txn, row, new).await
}

fn opt_json<T: serde::Serialize>(v: &Option<T>) -> Result<Option<serde_json::Value>, Error> {
    v.as_ref().map(to_json).transpose()
}

/// A run as every read answers it: its columns, the enums read into their types, the receipts
/// as the stored JSON text (checked to be JSON), which a response passes through instead of
/// parsing and re-serialising every receipt of a page (the list's cost, measured in
/// docs/benchmarks.md).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub specification_id: String,
    pub specification_version: i32,
    pub kind: ProvisioningKind,
    pub promotion_id: Option<String>,
    pub approval_id: Option<String>,
    /// Null while the run waits for its turn on the environment or plans.
    pub state: Option<ProvisioningState>,
    /// The plan receipt, once planned.
    #[schema(value_type = Option<PlanReceipt>)]
    pub plan_receipt: Option<Box<RawValue>>,
    /// What the workflow recorded about its approval, once decided or expired.
    #[schema(value_type = Option<runtime_cloud_models::ApprovalRecord>)]
    pub approval: Option<Box<RawValue>>,
    /// Approvals the run did not count (another plan's inputs hash, a second decision, sent
    /// when the run was not awaiting one): who sent each, when, and why it was refused; oldest
    /// first, `[]` when none (also before the run's first projection).
    #[schema(value_type = Vec<runtime_cloud_models::RefusedApproval>)]
    pub refused_approvals: Box<RawValue>,
    /// While a change window holds the apply: `{windowId, opensAt}`.
    #[schema(value_type = Option<runtime_cloud_models::WindowWait>)]
    pub waiting_for_window: Option<Box<RawValue>>,
    /// While the project's quota (or a pool without workers) holds the run before it plans:
    /// `{heldBy, projectId, concurrentRuns, quotaSource, poolId, since}`.
    #[schema(value_type = Option<runtime_cloud_models::capacity::CapacityWait>)]
    pub waiting_for_capacity: Option<Box<RawValue>>,
    /// The break-glass the run applied with inside a closed window: `{by, reason, windowId, at}`.
    #[schema(value_type = Option<runtime_cloud_models::BreakGlass>)]
    pub break_glass: Option<Box<RawValue>>,
    /// What the policies answered about the plan: `{allow, deny, policyId, version, inputHash,
    /// decidedAt}`.
    #[schema(value_type = Option<runtime_cloud_models::policy::PolicyDecision>)]
    pub policy: Option<Box<RawValue>>,
    /// The quarantined versions a person's explicit run was let through: `{by, reason,
    /// quarantines: [{quarantineId, workload, version}], at}`.
    #[schema(value_type = Option<QuarantineOverride>)]
    pub quarantine_override: Option<Box<RawValue>>,
    /// The immutable apply receipt, once applied or failed.
    #[schema(value_type = Option<ApplyReceipt>)]
    pub apply_receipt: Option<Box<RawValue>>,
    /// Why the run failed, was rejected or cancelled.
    pub reason: Option<String>,
    pub logs_ref: Option<String>,
    /// Hash of the request body the run was created with (not shown).
    #[serde(skip)]
    pub request_hash: Option<String>,
    pub started_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

impl Run {
    /// The plan receipt, parsed.
    pub fn plan(&self) -> Result<Option<PlanReceipt>, Error> {
        self.plan_receipt
            .as_ref()
            .map(|raw| {
                serde_json::from_str(raw.get()).map_err(|e| Error::Corrupt {
                    table: TABLE,
                    column: "plan_receipt",
                    row: self.provisioning_run_id.clone(),
                    source: e.into(),
                })
            })
            .transpose()
    }
}

/// The row of a [`Run`] as selected: the JSON columns cast to text.
#[derive(Debug, FromQueryResult)]
struct RunRow {
    provisioning_run_id: String,
    tenant_id: String,
    project_id: String,
    environment_id: String,
    specification_id: String,
    specification_version: i32,
    kind: String,
    promotion_id: Option<String>,
    approval_id: Option<String>,
    state: Option<String>,
    plan_receipt: Option<String>,
    approval: Option<String>,
    apply_receipt: Option<String>,
    refused_approvals: Option<String>,
    waiting_for_window: Option<String>,
    waiting_for_capacity: Option<String>,
    break_glass: Option<String>,
    policy: Option<String>,
    quarantine_override: Option<String>,
    reason: Option<String>,
    logs_ref: Option<String>,
    request_hash: Option<String>,
    started_at: DateTime<Utc>,
    completed_at: Option<DateTime<Utc>>,
}

impl RunRow {
    /// Selects rows of `select` with the JSON columns cast to text.
    fn select(select: sea_orm::Select<rows::Entity>) -> sea_orm::Selector<SelectModel<Self>> {
        use rows::Column as C;
        let text = |c: C| Expr::col(c).cast_as("TEXT");
        select
            .select_only()
            .columns([
                C::ProvisioningRunId,
                C::TenantId,
                C::ProjectId,
                C::EnvironmentId,
                C::SpecificationId,
                C::SpecificationVersion,
                C::Kind,
                C::PromotionId,
                C::ApprovalId,
                C::State,
                C::Reason,
                C::LogsRef,
                C::RequestHash,
                C::StartedAt,
                C::CompletedAt,
            ])
            .column_as(text(C::PlanReceipt), "plan_receipt")
            .column_as(text(C::Approval), "approval")
            .column_as(text(C::ApplyReceipt), "apply_receipt")
            .column_as(text(C::RefusedApprovals), "refused_approvals")
            .column_as(text(C::WaitingForWindow), "waiting_for_window")
            .column_as(text(C::WaitingForCapacity), "waiting_for_capacity")
            .column_as(text(C::BreakGlass), "break_glass")
            .column_as(text(C::Policy), "policy")
            .column_as(text(C::QuarantineOverride), "quarantine_override")
            .into_model::<Self>()
    }

    fn read(self) -> Result<Run, Error> {
        let at = At {
            table: TABLE,
            row: &self.provisioning_run_id,
        };
        let none_refused = || RawValue::from_string("[]".to_owned()).map_err(Error::Json);
        Ok(Run {
            kind: at.wire("kind", &self.kind)?,
            state: at.wire_opt("state", self.state.as_deref())?,
            plan_receipt: at.raw("plan_receipt", self.plan_receipt)?,
            approval: at.raw("approval", self.approval)?,
            apply_receipt: at.raw("apply_receipt", self.apply_receipt)?,
            refused_approvals: match at.raw("refused_approvals", self.refused_approvals)? {
                Some(raw) => raw,
                None => none_refused()?,
            },
            waiting_for_window: at.raw("waiting_for_window", self.waiting_for_window)?,
            waiting_for_capacity: at.raw("waiting_for_capacity", self.waiting_for_capacity)?,
            break_glass: at.raw("break_glass", self.break_glass)?,
            policy: at.raw("policy", self.policy)?,
            quarantine_override: at.raw("quarantine_override", self.quarantine_override)?,
            provisioning_run_id: self.provisioning_run_id,
            tenant_id: self.tenant_id,
            project_id: self.project_id,
            environment_id: self.environment_id,
            specification_id: self.specification_id,
            specification_version: self.specification_version,
            promotion_id: self.promotion_id,
            approval_id: self.approval_id,
            reason: self.reason,
            logs_ref: self.logs_ref,
            request_hash: self.request_hash,
            started_at: self.started_at,
            completed_at: self.completed_at,
        })
    }
}

fn one(tenant_id: &str, run_id: &str) -> sea_orm::Select<rows::Entity> {
    rows::Entity::find_by_id(run_id.to_owned()).filter(rows::Column::TenantId.eq(tenant_id))
}

/// The tenant's run.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    run_id: &str,
) -> Result<Option<Run>, Error> {
    RunRow::select(one(tenant_id, run_id))
        .one(db)
        .await?
        .map(RunRow::read)
        .transpose()
}

/// The tenant's run requested with `Idempotency-Key` `key`.
pub async fn by_idempotency_key(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    key: &str,
) -> Result<Option<Run>, Error> {
    let select = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::IdempotencyKey.eq(key));
    RunRow::select(select)
        .one(db)
        .await?
        .map(RunRow::read)
        .transpose()
}

/// Removes a run that never started (`run_starts::withdraw`).
pub(crate) async fn delete(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    run_id: &str,
) -> Result<(), Error> {
    rows::Entity::delete_many()
        .filter(rows::Column::ProvisioningRunId.eq(run_id))
        .filter(rows::Column::TenantId.eq(tenant_id))
        .exec(db)
        .await?;
    Ok(())
}

/// Which runs a list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this environment's runs.
    pub environment_id: Option<String>,
    /// Only runs of this kind.
    pub kind: Option<ProvisioningKind>,
    /// Only runs in this state.
    pub state: Option<ProvisioningState>,
}

/// A page of the tenant's runs, newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    filter: &RunFilter,
    page: &Page,
) -> Result<Vec<Run>, Error> {
    RunRow::select(list_query(tenant_id, filter, page))
        .all(db)
        .await?
        .into_iter()
        .map(RunRow::read)
        .collect()
}

/// The rows [`list`] reads (public so a benchmark can `EXPLAIN` the real query).
pub fn list_query(
    tenant_id: &str,
    filter: &RunFilter,
    page: &Page,
) -> sea_orm::Select<rows::Entity> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    if let Some(env) = &filter.environment_id {
        select = select.filter(rows::Column::EnvironmentId.eq(env));
    }
    if let Some(kind) = filter.kind {
        select = select.filter(rows::Column::Kind.eq(kind.as_str()));
    }
    if let Some(state) = filter.state {
        select = select.filter(rows::Column::State.eq(state.as_str()));
    }
    page.apply(select, rows::Column::ProvisioningRunId)
}

/// The run that last applied a specification to an environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub provisioning_run_id: String,
    pub specification_id: String,
    pub specification_version: i32,
}

/// The environment's run that applied last, if any.
pub async fn last_applied(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<Applied>, Error> {
    use rows::Column as C;
    let row: Option<(String, String, i32)> = rows::Entity::find()
        .select_only()
        .columns([
            C::ProvisioningRunId,
            C::SpecificationId,
            C::SpecificationVersion,
        ])
        .filter(C::TenantId.eq(tenant_id))
        .filter(C::EnvironmentId.eq(environment_id))
        .filter(C::State.eq(ProvisioningState::Applied.as_str()))
        .order_by_desc(C::CompletedAt)
        .into_tuple()
        .one(db)
        .await?;
    Ok(row.map(
        |(provisioning_run_id, specification_id, specification_version)| Applied {
            provisioning_run_id,
            specification_id,
            specification_version,
        },
    ))
}

/// The run that applied last to each of the environments `keys` that had one, in one query,
/// with the environment it applied to.
pub async fn last_applied_of(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<(crate::scope::EnvKey, Applied)>, Error> {
    use crate::scope::of_environments;
    use rows::Column as C;
    let last = Expr::cust(
        "completed_at = (SELECT MAX(r.completed_at) FROM provisioning_runs r \
         WHERE r.tenant_id = provisioning_runs.tenant_id \
         AND r.environment_id = provisioning_runs.environment_id AND r.state = 'Applied')",
    );
    let rows: Vec<(String, String, String, String, i32)> = rows::Entity::find()
        .select_only()
        .columns([
            C::TenantId,
            C::EnvironmentId,
            C::ProvisioningRunId,
            C::SpecificationId,
            C::SpecificationVersion,
        ])
        .filter(of_environments(C::TenantId, C::EnvironmentId, keys))
        .filter(C::State.eq(ProvisioningState::Applied.as_str()))
        .filter(last)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(
            |(
                tenant,
                environment,
                provisioning_run_id,
                specification_id,
                specification_version,
            )| {
                let applied = Applied {
                    provisioning_run_id,
                    specification_id,
                    specification_version,
                };
                ((tenant, environment), applied)
            },
        )
        .collect())
}

/// A run's state (`None`: not planned yet, or no such run).
pub(crate) async fn state(
    db: &impl ConnectionTrait,
    run_id: &str,
) -> Result<Option<ProvisioningState>, Error> {
    let state: Option<Option<String>> = rows::Entity::find_by_id(run_id.to_owned())
        .select_only()
        .column(rows::Column::State)
        .into_tuple()
        .one(db)
        .await?;
    let at = At {
        table: TABLE,
        row: run_id,
    };
    at.wire_opt("state", state.flatten().as_deref())
}

/// (tenant, kind, state) of every run that ended (the metrics' runs counter).
pub async fn ended(
    db: &impl ConnectionTrait,
) -> Result<Vec<(String, ProvisioningKind, Option<ProvisioningState>)>, Error> {
    use rows::Column as C;
    let rows: Vec<(String, String, String, Option<String>)> = rows::Entity::find()
        .select_only()
        .columns([C::ProvisioningRunId, C::TenantId, C::Kind, C::State])
        .filter(C::CompletedAt.is_not_null())
        .into_tuple()
        .all(db)
        .await?;
    rows.into_iter()
        .map(|(id, tenant, kind, state)| {
            let at = At {
                table: TABLE,
                row: &id,
            };
            Ok((
                tenant,
                at.wire("kind", &kind)?,
                at.wire_opt("state", state.as_deref())?,
            ))
        })
        .collect()
}

/// (kind, apply receipt) of every run that applied or failed (the metrics' apply durations).
pub async fn apply_receipts(
    db: &impl ConnectionTrait,
) -> Result<Vec<(ProvisioningKind, Option<ApplyReceipt>)>, Error> {
    use rows::Column as C;
    let rows: Vec<(String, String, Option<serde_json::Value>)> = rows::Entity::find()
        .select_only()
        .columns([C::ProvisioningRunId, C::Kind, C::ApplyReceipt])
        .filter(C::State.is_in([
            ProvisioningState::Applied.as_str(),
            ProvisioningState::Failed.as_str(),
        ]))
        .into_tuple()
        .all(db)
        .await?;
    rows.into_iter()
        .map(|(id, kind, receipt)| {
            let at = At {
                table: TABLE,
                row: &id,
            };
            let receipt = receipt
                .as_ref()
                .map(|r| at.json("apply_receipt", r))
                .transpose()?;
            Ok((at.wire("kind", &kind)?, receipt))
        })
        .collect()
}

/// The specification a run was created for, if the run exists.
pub async fn specification_id(
    db: &impl ConnectionTrait,
    run_id: &str,
) -> Result<Option<String>, Error> {
    Ok(rows::Entity::find_by_id(run_id.to_owned())
        .select_only()
        .column(rows::Column::SpecificationId)
        .into_tuple()
        .one(db)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{self, declaration};
    use crate::specifications;
    use runtime_cloud_models::{
        ApplyResult, Approval, ApprovalDecision, EnvironmentClass, PlanChanges, RefusalReason,
        RefusedApproval,
    };

    fn plan() -> PlanReceipt {
        PlanReceipt {
            changes: PlanChanges::default(),
            inputs_hash: "sha256:h1".into(),
            program_version: "a1b2c3d4".into(),
            cost: None,
            posture: Vec::new(),
        }
    }

    fn refused() -> RefusedApproval {
        let approval = Approval {
            decision: ApprovalDecision::Approve,
            approver: "mallory".into(),
            reason: "looks fine".into(),
            inputs_hash: "sha256:other".into(),
            approval_id: None,
        };
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        RefusedApproval::new(approval, at, RefusalReason::OtherPlan)
    }

    async fn a_run_is_created_and_projected_idempotently_on(db: DatabaseConnection) {
        let (env, spec) = fixtures::declared(&db, "prod", EnvironmentClass::Production).await;
        let new = NewRun {
            idempotency_key: Some("deploy-1".into()),
            request_hash: Some("hash-1".into()),
            ..fixtures::new_run("0190f000-0000-7000-8000-000000000001", &env, &spec)
        };
        let options = ProvisioningOptions::default();
        let input = create(&db, &new, &options).await.unwrap();
        assert_eq!(input.environment_class, EnvironmentClass::Production);
        assert_eq!(input.specification, spec.snapshot());
        assert!(input.needs_approval());
        // The same Idempotency-Key again is the caller's to answer.
        let again = NewRun {
            run_id: "0190f000-0000-7000-8000-000000000002",
            ..new.clone()
        };
        let err = create(&db, &again, &options).await.unwrap_err();
        assert!(matches!(err, Error::Duplicate { table: TABLE }), "{err:?}");

        let created = find(&db, "acme", new.run_id).await.unwrap().unwrap();
        assert_eq!(created.state, None);
        assert_eq!(created.refused_approvals.get(), "[]", "none refused yet");
        assert_eq!(
            created.logs_ref.as_deref(),
            Some(logs_ref(new.run_id).as_str())
        );

        let status = RunStatus {
            state: Some(ProvisioningState::AwaitingApproval),
            plan_receipt: Some(plan()),
            refused_approvals: vec![refused()],
            ..Default::default()
        };
        let planned = RunStatus {
            state: Some(ProvisioningState::Planned),
            plan_receipt: Some(plan()),
            ..Default::default()
        };
        project(&db, &input, &[], &planned).await.unwrap();
        project(&db, &input, &[], &planned).await.unwrap();
        assert_eq!(
            fixtures::events(&db, "ProvisioningPlanned").await.len(),
            1,
            "one event"
        );
        project(&db, &input, &[], &status).await.unwrap();
        let first = find(&db, "acme", new.run_id).await.unwrap().unwrap();
        project(&db, &input, &[], &status).await.unwrap();
        let second = find(&db, "acme", new.run_id).await.unwrap().unwrap();
        assert_eq!(format!("{first:?}"), format!("{second:?}"), "the same row");
        assert_eq!(first.state, Some(ProvisioningState::AwaitingApproval));
        assert_eq!(first.plan().unwrap(), Some(plan()));
        let shown: Vec<RefusedApproval> =
            serde_json::from_str(first.refused_approvals.get()).unwrap();
        assert_eq!(shown, [refused()]);
        assert_eq!(fixtures::events(&db, "ProvisioningPlanned").await.len(), 1);

        let applied = RunStatus {
            state: Some(ProvisioningState::Applied),
            plan_receipt: Some(plan()),
            apply_receipt: Some(ApplyReceipt {
                outputs: serde_json::json!({ "versions": { "api": "1.0.0" } }),
                duration_ms: 1500,
                result: ApplyResult::Succeeded,
                runner_version: "sandbox/1".into(),
                reason: None,
            }),
            ..status.clone()
        };
        // The diagram has no arrow from AwaitingApproval to Applied: refused, nothing written.
        let err = project(&db, &input, &[], &applied).await.unwrap_err();
        assert!(matches!(err, Error::IllegalTransition { .. }), "{err:?}");
        assert_eq!(fixtures::events(&db, "ProvisioningApplied").await.len(), 0);
        let applying = RunStatus {
            state: Some(ProvisioningState::Applying),
            ..status.clone()
        };
        project(&db, &input, &[], &applying).await.unwrap();
        project(&db, &input, &[], &applied).await.unwrap();
        let done = find(&db, "acme", new.run_id).await.unwrap().unwrap();
        assert!(done.completed_at.is_some());
        assert_eq!(fixtures::events(&db, "ProvisioningApplied").await.len(), 1);
        let last = last_applied(&db, "acme", "prod").await.unwrap().unwrap();
        assert_eq!(last.specification_version, spec.version);
        // A sweep's batch reads the same, and nothing for an environment nothing applied to.
        let keys = [
            ("acme".to_owned(), "prod".to_owned()),
            ("acme".to_owned(), "dev".to_owned()),
            ("globex".to_owned(), "prod".to_owned()),
        ];
        let batch = last_applied_of(&db, &keys).await.unwrap();
        assert_eq!(batch, [(keys[0].clone(), last)]);

        // The list reads a run exactly as `find` does.
        let listed = list(
            &db,
            "acme",
            &RunFilter::default(),
            &Page {
                after: None,
                rows: 10,
            },
        )
        .await
        .unwrap();
        assert_eq!(format!("{:?}", listed), format!("{:?}", [done]));
        let by_state = RunFilter {
            state: Some(ProvisioningState::Failed),
            ..Default::default()
        };
        let none = list(
            &db,
            "acme",
            &by_state,
            &Page {
                after: None,
                rows: 10,
            },
        )
        .await
        .unwrap();
        assert!(none.is_empty());
        let metrics = apply_receipts(&db).await.unwrap();
        assert_eq!(metrics[0].1.as_ref().map(|r| r.duration_ms), Some(1500));
        // An ended run moves nowhere; projecting its end again is fine, and a replay of an
        // earlier projection (a worker that died before reporting its task) writes nothing.
        project(&db, &input, &[], &applied).await.unwrap();
        let before = format!("{:?}", find(&db, "acme", new.run_id).await.unwrap());
        project(&db, &input, &[], &planned).await.unwrap();
        let after = format!("{:?}", find(&db, "acme", new.run_id).await.unwrap());
        assert_eq!(after, before);
        assert_eq!(fixtures::events(&db, "ProvisioningApplied").await.len(), 1);
    }

    // The receipts are read as text (`CAST(… AS TEXT)`), which PostgreSQL and SQLite spell
    // differently for a JSON column.
    crate::fixtures::on_both_databases!(
        a_run_is_created_and_projected_idempotently_sqlite,
        a_run_is_created_and_projected_idempotently_postgres,
        a_run_is_created_and_projected_idempotently_on
    );

    /// A run that goes from `Planned` straight on to `Applying` records both in one write: the
    /// plan's event, then the row as it applies. Again (a retried local activity, a replay)
    /// it writes the same row and no second event.
    async fn a_run_passing_through_a_state_records_it_with_the_next_on(db: DatabaseConnection) {
        let (env, spec) = fixtures::declared(&db, "dev", EnvironmentClass::NonProduction).await;
        let new = fixtures::new_run("0190f000-0000-7000-8000-000000000003", &env, &spec);
        let input = create(&db, &new, &ProvisioningOptions::default())
            .await
            .unwrap();
        let planned = RunStatus {
            state: Some(ProvisioningState::Planned),
            plan_receipt: Some(plan()),
            ..Default::default()
        };
        let applying = RunStatus {
            state: Some(ProvisioningState::Applying),
            ..planned.clone()
        };
        for _ in 0..2 {
            project(&db, &input, std::slice::from_ref(&planned), &applying)
                .await
                .unwrap();
            let row = find(&db, "acme", new.run_id).await.unwrap().unwrap();
            assert_eq!(row.state, Some(ProvisioningState::Applying));
            assert_eq!(row.plan().unwrap(), Some(plan()));
            let events = fixtures::events(&db, "ProvisioningPlanned").await;
            assert_eq!(events.len(), 1, "{events:?}");
        }
        // A move the diagram does not have (`Planned` → `Applied`) is refused, and the state
        // passed through before it is not written either.
        let applied = RunStatus {
            state: Some(ProvisioningState::Applied),
            ..planned.clone()
        };
        let other = fixtures::new_run("0190f000-0000-7000-8000-000000000004", &env, &spec);
        let other_input = create(&db, &other, &ProvisioningOptions::default())
            .await
            .unwrap();
        let err = project(&db, &other_input, &[planned], &applied)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::IllegalTransition { .. }), "{err:?}");
        let untouched = find(&db, "acme", other.run_id).await.unwrap().unwrap();
        assert_eq!(untouched.state, None, "the transaction wrote nothing");
        assert_eq!(fixtures::events(&db, "ProvisioningPlanned").await.len(), 1);
    }

    crate::fixtures::on_both_databases!(
        a_run_passing_through_a_state_records_it_with_the_next_sqlite,
        a_run_passing_through_a_state_records_it_with_the_next_postgres,
        a_run_passing_through_a_state_records_it_with_the_next_on
    );

    #[tokio::test]
    async fn a_bad_state_or_kind_in_a_row_is_an_error_not_a_default() {
        let db = fixtures::sqlite().await;
        let env = fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let spec = specifications::declare(&db, &declaration("dev", vec![]))
            .await
            .unwrap();
        let new = fixtures::new_run("r1", &env, &spec);
        create(&db, &new, &ProvisioningOptions::default())
            .await
            .unwrap();
        fixtures::execute(&db, "UPDATE provisioning_runs SET state = 'Exploded'").await;
        let err = find(&db, "acme", "r1").await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    table: TABLE,
                    column: "state",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(state(&db, "r1").await.is_err());
        fixtures::execute(
            &db,
            "UPDATE provisioning_runs SET state = NULL, kind = 'teardown'",
        )
        .await;
        let err = find(&db, "acme", "r1").await.unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { column: "kind", .. }),
            "{err:?}"
        );
        fixtures::execute(
            &db,
            "UPDATE provisioning_runs SET kind = 'baseline', plan_receipt = '{\"adds\":'",
        )
        .await;
        let err = find(&db, "acme", "r1").await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    column: "plan_receipt",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// SQLite's plan for one environment's runs walks the index that ends in the run id: no
    /// scan of the tenant's other runs, no sort (without it, 2,000 runs answered 170/s).
    #[tokio::test]
    async fn one_environments_runs_are_one_index_walk_on_sqlite() {
        let db = fixtures::sqlite().await;
        let filter = RunFilter {
            environment_id: Some("prod".into()),
            ..Default::default()
        };
        let page = Page {
            after: Some("0190f000-0000-7000-8000-000000000001".into()),
            rows: 51,
        };
        let plan = fixtures::sqlite_plan(&db, &list_query("t1", &filter, &page)).await;
        assert!(plan.contains("ix_runs_tenant_environment_newest"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "sorts: {plan}");
    }
}
