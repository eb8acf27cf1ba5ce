//! `inbox_events`: inbound events (`models::inbound`), each handled once by its CloudEvents id.
//!
//! [`receive`] writes an event's rows — the environment it registers, the specification it
//! declares, the approval it records, the run it plans — together with the inbox row, in one
//! transaction, and returns what is left to do outside the database: start the run's workflow,
//! or signal a decision to a run. A redelivered event finds its inbox row and gets the same
//! [`Effect`] back, without writing anything again; once the effect reached Temporal
//! ([`delivered`]) a redelivery has nothing left to do.

use crate::entities::inbox_events as rows;
use crate::runs::NewRun;
use crate::{Error, approvals, decode::At, decode::to_json, environments, runs, specifications};
use chrono::Utc;
use runtime_cloud_models::approvals::ApprovalSource;
use runtime_cloud_models::inbound::{DesiredState, Inbound};
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::validation::Declaration;
use runtime_cloud_models::{
    Approval, ApprovalDecision, EnvironmentClass, ProvisioningKind, RunInput,
};
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ConnectionTrait, EntityTrait};
use serde::{Deserialize, Serialize};

/// What an event leaves to do outside the database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "effect")]
pub enum Effect {
    /// Nothing (an environment registered without a desired state).
    Nothing,
    /// Start this run's workflow (idempotent by its id).
    Start { run: Box<RunInput> },
    /// Signal this decision to the run.
    Signal { run_id: String, approval: Approval },
}

/// The outcome of [`receive`].
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub effect: Effect,
    /// The effect already reached Temporal (a redelivery after [`delivered`]).
    pub delivered: bool,
    /// Seen before: nothing was written this time.
    pub redelivered: bool,
}

/// Handles `event` (CloudEvents `id` `event_id`) once. [`Error::Missing`] for an event about
/// an environment or a run that does not exist, [`Error::Invalid`] for a desired state the
/// validation rule refuses: nothing is written for either.
pub async fn receive(
    db: &sea_orm::DatabaseConnection,
    event_id: &str,
    event_type: &str,
    event: &Inbound,
    options: &ProvisioningOptions,
) -> Result<Received, Error> {
    let txn = crate::begin_write(db).await?;
    if let Some(seen) = rows::Entity::find_by_id(event_id.to_owned())
        .one(&txn)
        .await?
    {
        let at = At {
            table: "inbox_events",
            row: &seen.event_id,
        };
        return Ok(Received {
            effect: at.json("effect", &seen.effect)?,
            delivered: seen.delivered_at.is_some(),
            redelivered: true,
        });
    }
    let effect = match event {
        Inbound::EnvironmentCreated(e) => {
            let env = match environments::find(&txn, &e.tenant_id, &e.environment_id).await? {
                Some(env) => env,
                None => {
                    runtime_cloud_models::environments::check_labels(&e.labels).map_err(|why| {
                        Error::Invalid(runtime_cloud_models::validation::Invalid(why))
                    })?;
                    let new = environments::NewEnvironment {
                        tenant_id: e.tenant_id.clone(),
                        environment_id: e.environment_id.clone(),
                        project_id: e.project_id.clone(),
                        class: e.class,
                        target: e.target.clone().unwrap_or_default(),
                        mode: e.mode,
                        labels: e.labels.clone(),
                        customer_tenant_id: e.customer_tenant_id.clone(),
                        pool_id: None,
                    };
                    environments::register(&txn, new).await?
                }
            };
            match &e.specification {
                None => Effect::Nothing,
                Some(desired) => {
                    plan(
                        &txn,
                        event_id,
                        &env,
                        desired,
                        ProvisioningKind::Baseline,
                        None,
                        None,
                        options,
                    )
                    .await?
                }
            }
        }
        Inbound::PromotionApproved(e) => {
            let env = environments::find(&txn, &e.tenant_id, &e.environment_id)
                .await?
                .ok_or_else(|| Error::Missing {
                    what: "environment",
                    id: e.environment_id.clone(),
                })?;
            // The promotion's approval opens the production gate of this run only: recorded
            // here, verified and spent by the run like any other.
            let approval_id = if env.class == EnvironmentClass::Production {
                let recorded = approvals::record(
                    &txn,
                    approvals::NewApproval {
                        tenant_id: e.tenant_id.clone(),
                        environment_id: e.environment_id.clone(),
                        class: env.class,
                        decision: ApprovalDecision::Approve,
                        granted_by: e.approval.granted_by.clone(),
                        granted_by_roles: e.approval.granted_by_roles.clone(),
                        reason: e.approval.reason.clone(),
                        inputs_hash: None,
                        promotion_id: Some(e.promotion_id.clone()),
                        source: ApprovalSource::Promotion,
                        expires_at: e
                            .approval
                            .expires_at
                            .unwrap_or_else(|| Utc::now() + options.approval_validity()),
                        spent_by_run_id: None,
                    },
                )
                .await?;
                Some(recorded.approval_id)
            } else {
                None
            };
            plan(
                &txn,
                event_id,
                &env,
                &e.specification,
                ProvisioningKind::Promotion,
                Some(e.promotion_id.clone()),
                approval_id,
                options,
            )
            .await?
        }
        Inbound::ApprovalDecided(e) => {
            let run = runs::find(&txn, &e.tenant_id, &e.provisioning_run_id)
                .await?
                .ok_or_else(|| Error::Missing {
                    what: "provisioning run",
                    id: e.provisioning_run_id.clone(),
                })?;
            let approval_id = match e.decision {
                ApprovalDecision::Approve => Some(
                    approvals::record(
                        &txn,
                        approvals::NewApproval {
                            tenant_id: e.tenant_id.clone(),
                            environment_id: run.environment_id.clone(),
                            class: EnvironmentClass::Production,
                            decision: ApprovalDecision::Approve,
                            granted_by: e.decided_by.clone(),
                            granted_by_roles: e.decided_by_roles.clone(),
                            reason: e.reason.clone(),
                            inputs_hash: Some(e.inputs_hash.clone()),
                            promotion_id: None,
                            source: ApprovalSource::RunControl,
                            expires_at: Utc::now() + options.approval_validity(),
                            spent_by_run_id: None,
                        },
                    )
                    .await?
                    .approval_id,
                ),
                ApprovalDecision::Reject => None,
            };
            Effect::Signal {
                run_id: run.provisioning_run_id,
                approval: Approval {
                    decision: e.decision,
                    approver: e.decided_by.clone(),
                    reason: e.reason.clone(),
                    inputs_hash: e.inputs_hash.clone(),
                    approval_id,
                },
            }
        }
    };
    rows::ActiveModel {
        event_id: Set(event_id.to_owned()),
        event_type: Set(event_type.to_owned()),
        tenant_id: Set(event.tenant_id().to_owned()),
        received_at: Set(Utc::now()),
        effect: Set(to_json(&effect)?),
        delivered_at: Set(None),
    }
    .insert(&txn)
    .await?;
    crate::commit(txn).await?;
    Ok(Received {
        effect,
        delivered: false,
        redelivered: false,
    })
}

/// Declares `desired` for `env` and creates a run of it (its workflow is the caller's to
/// start), in the caller's transaction; the run's idempotency key is the event's.
#[allow(clippy::too_many_arguments)]
async fn plan(
    txn: &impl ConnectionTrait,
    event_id: &str,
    env: &environments::Environment,
    desired: &DesiredState,
    kind: ProvisioningKind,
    promotion_id: Option<String>,
    approval_id: Option<String>,
    options: &ProvisioningOptions,
) -> Result<Effect, Error> {
    let declaration = Declaration {
        tenant_id: env.tenant_id.clone(),
        project_id: env.project_id.clone(),
        environment_id: env.environment_id.clone(),
        kind: desired.kind,
        program_ref: desired.program_ref.clone(),
        program_version: desired.program_version.clone(),
        release_id: desired.release_id.clone(),
        strategy: desired.strategy.clone(),
        config_refs: desired.config_refs.clone(),
        secret_refs: desired.secret_refs.clone(),
        workloads: desired.workloads.clone(),
    };
    let spec = specifications::declare_in(txn, &declaration).await?;
    let run_id = uuid::Uuid::now_v7().to_string();
    let new = NewRun {
        run_id: &run_id,
        environment: env,
        specification: &spec,
        kind,
        promotion_id,
        approval_id,
        idempotency_key: Some(format!("event:{event_id}")),
        request_hash: None,
    };
    let run = runs::create(txn, &new, options).await?;
    Ok(Effect::Start { run: Box::new(run) })
}

/// Records that the event's effect reached Temporal.
pub async fn delivered(db: &impl ConnectionTrait, event_id: &str) -> Result<(), Error> {
    use sea_orm::{ColumnTrait, QueryFilter, sea_query::Expr};
    rows::Entity::update_many()
        .col_expr(rows::Column::DeliveredAt, Expr::value(Utc::now()))
        .filter(rows::Column::EventId.eq(event_id))
        .exec(db)
        .await?;
    Ok(())
}
