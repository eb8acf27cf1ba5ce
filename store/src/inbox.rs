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
use runtime_cloud_models::inbound::proof::{Proof, Refusal, Refused};
use runtime_cloud_models::inbound::{DesiredState, Inbound};
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::validation::Declaration;
use runtime_cloud_models::{
    Approval, ApprovalDecision, EnvironmentClass, ProvisioningKind, RunInput,
};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
};
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

/// Whether the event with CloudEvents `id` `event_id` was received before: a redelivery only
/// finishes what [`receive`] recorded then, so its approval is not verified again (it may have
/// expired since it was recorded).
pub async fn seen(db: &impl ConnectionTrait, event_id: &str) -> Result<bool, Error> {
    Ok(rows::Entity::find_by_id(event_id.to_owned())
        .one(db)
        .await?
        .is_some())
}

/// Handles `event` (CloudEvents `id` `event_id`) once. `proof` is the event's approval as its
/// issuer's signature proved it (the caller verified it); without one, a production
/// promotion's approval is recorded as the event asserts it, which only the caller's explicit
/// development setting allows. [`Error::Missing`] for an event about an environment or a run
/// that does not exist, [`Error::Invalid`] for a desired state the validation rule refuses,
/// [`Error::Refused`] for a proven approval another event spent (a replay): nothing is
/// written for any of them.
pub async fn receive(
    db: &sea_orm::DatabaseConnection,
    event_id: &str,
    event_type: &str,
    event: &Inbound,
    proof: Option<&Proof>,
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
    if let Some(proof) = proof {
        let spent = rows::Entity::find()
            .filter(rows::Column::TenantId.eq(event.tenant_id()))
            .filter(rows::Column::SpendKey.eq(&proof.spend_key))
            .one(&txn)
            .await?;
        if let Some(spent) = spent {
            return Err(replayed(proof, &spent.event_id).into());
        }
    }
    // An approval is never recorded beyond what its issuer signed.
    let expiry = |signed: Option<chrono::DateTime<Utc>>| {
        let validity = Utc::now() + options.approval_validity();
        match proof {
            Some(p) => p.expires_at.min(signed.unwrap_or(p.expires_at)),
            None => signed.unwrap_or(validity),
        }
    };
    let effect = match event {
        Inbound::EnvironmentCreated(e) => {
            let env = match environments::find(&txn, &e.tenant_id, &e.environment_id).await? {
                Some(env) => env,
                None => {
                    let invalid =
                        |why| Error::Invalid(runtime_cloud_models::validation::Invalid(why));
                    runtime_cloud_models::environments::check_labels(&e.labels).map_err(invalid)?;
                    // An ephemeral environment, as the API registers one.
                    let lifetime = runtime_cloud_models::lifetime::Lifetime::of(
                        e.ttl.as_deref(),
                        e.expires_at,
                    )
                    .map_err(invalid)?;
                    let expires_at = match lifetime {
                        None => None,
                        Some(lifetime) => {
                            if let Some(why) =
                                runtime_cloud_models::lifetime::ephemeral_refused(e.class)
                            {
                                return Err(invalid(why));
                            }
                            let limit = environments::lifetime_limit(&txn, &e.tenant_id).await?;
                            Some(
                                lifetime
                                    .expiry(Utc::now(), limit.max_ttl)
                                    .map_err(invalid)?,
                            )
                        }
                    };
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
                        expires_at,
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
                        granted_by: proof
                            .map_or(&e.approval.granted_by, |p| &p.granted_by)
                            .clone(),
                        granted_by_roles: proof
                            .map_or(&e.approval.granted_by_roles, |p| &p.granted_by_roles)
                            .clone(),
                        reason: e.approval.reason.clone(),
                        inputs_hash: None,
                        promotion_id: Some(e.promotion_id.clone()),
                        source: ApprovalSource::Promotion,
                        expires_at: expiry(e.approval.expires_at),
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
            let approval_id = match (e.decision, proof) {
                // RunControlService's own approval: the run claims it there.
                (ApprovalDecision::Approve, None) => e.approval_id.clone(),
                (ApprovalDecision::Approve, Some(proof)) => Some(
                    approvals::record(
                        &txn,
                        approvals::NewApproval {
                            tenant_id: e.tenant_id.clone(),
                            environment_id: run.environment_id.clone(),
                            class: EnvironmentClass::Production,
                            decision: ApprovalDecision::Approve,
                            granted_by: proof.granted_by.clone(),
                            granted_by_roles: proof.granted_by_roles.clone(),
                            reason: e.reason.clone(),
                            inputs_hash: Some(e.inputs_hash.clone()),
                            promotion_id: None,
                            source: ApprovalSource::RunControl,
                            expires_at: expiry(None).min(Utc::now() + options.approval_validity()),
                            spent_by_run_id: None,
                        },
                    )
                    .await?
                    .approval_id,
                ),
                (ApprovalDecision::Reject, _) => None,
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
        spend_key: Set(proof.map(|p| p.spend_key.clone())),
    }
    .insert(&txn)
    .await
    .map_err(|e| match (proof, crate::error::is_unique_violation(&e)) {
        // Another consumer recorded the same approval under another event id meanwhile.
        (Some(proof), true) => replayed(proof, "another event").into(),
        _ => Error::Db(e),
    })?;
    txn.commit().await?;
    Ok(Received {
        effect,
        delivered: false,
        redelivered: false,
    })
}

fn replayed(proof: &Proof, by: &str) -> Refused {
    Refused::new(
        Refusal::Replayed,
        format!("{} was spent by event `{by}`", proof.spend_key),
    )
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
        quarantine_override: None,
    };
    let run = runs::create(txn, &new, options).await?;
    Ok(Effect::Start { run: Box::new(run) })
}

/// Records that the event's effect reached Temporal.
pub async fn delivered(db: &impl ConnectionTrait, event_id: &str) -> Result<(), Error> {
    use sea_orm::sea_query::Expr;
    rows::Entity::update_many()
        .col_expr(rows::Column::DeliveredAt, Expr::value(Utc::now()))
        .filter(rows::Column::EventId.eq(event_id))
        .exec(db)
        .await?;
    Ok(())
}
