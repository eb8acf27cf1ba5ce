//! `approvals`: the approvals the product records itself, and spending one on a run.
//!
//! Spending is one conditional `UPDATE … WHERE spent_by_run_id IS NULL`: of two runs that
//! claim the same approval at once exactly one spends it, on either database, without a lock.

use crate::Error;
use crate::decode::{At, to_json};
use crate::entities::approvals as rows;
use crate::page::Page;
use chrono::{DateTime, Utc};
use runtime_cloud_models::approvals::{
    ApprovalClaim, ApprovalSource, ClaimOutcome, RecordedApproval, verify_approval,
};
use runtime_cloud_models::{ApprovalDecision, EnvironmentClass, RefusalReason};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
};

/// An approval to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApproval {
    pub tenant_id: String,
    pub environment_id: String,
    pub class: EnvironmentClass,
    pub decision: ApprovalDecision,
    pub granted_by: String,
    pub granted_by_roles: Vec<String>,
    pub reason: String,
    pub inputs_hash: Option<String>,
    pub promotion_id: Option<String>,
    pub source: ApprovalSource,
    pub expires_at: DateTime<Utc>,
    /// Recorded already spent on this run (an accepted proposal's run, created with it).
    pub spent_by_run_id: Option<String>,
}

fn read(m: rows::Model) -> Result<RecordedApproval, Error> {
    let at = At {
        table: "approvals",
        row: &m.approval_id,
    };
    Ok(RecordedApproval {
        class: at.wire("class", &m.class)?,
        decision: at.wire("decision", &m.decision)?,
        source: at.wire("source", &m.source)?,
        granted_by_roles: at.json("granted_by_roles", &m.granted_by_roles)?,
        approval_id: m.approval_id,
        tenant_id: m.tenant_id,
        environment_id: m.environment_id,
        granted_by: m.granted_by,
        reason: m.reason,
        inputs_hash: m.inputs_hash,
        promotion_id: m.promotion_id,
        decided_at: m.decided_at,
        expires_at: m.expires_at,
        spent_by_run_id: m.spent_by_run_id,
        spent_at: m.spent_at,
    })
}

/// Records an approval with a new id.
pub async fn record(
    db: &impl ConnectionTrait,
    new: NewApproval,
) -> Result<RecordedApproval, Error> {
    let now = Utc::now();
    let row = rows::ActiveModel {
        approval_id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(new.tenant_id),
        environment_id: Set(new.environment_id),
        class: Set(new.class.as_str().to_owned()),
        decision: Set(new.decision.as_str().to_owned()),
        granted_by: Set(new.granted_by),
        granted_by_roles: Set(to_json(&new.granted_by_roles)?),
        reason: Set(new.reason),
        inputs_hash: Set(new.inputs_hash),
        promotion_id: Set(new.promotion_id),
        source: Set(new.source.as_str().to_owned()),
        decided_at: Set(now),
        expires_at: Set(new.expires_at),
        spent_at: Set(new.spent_by_run_id.as_ref().map(|_| now)),
        spent_by_run_id: Set(new.spent_by_run_id),
    }
    .insert(db)
    .await
    .map_err(Error::on_insert("approvals"))?;
    read(row)
}

/// The tenant's approval, if it exists.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    approval_id: &str,
) -> Result<Option<RecordedApproval>, Error> {
    rows::Entity::find_by_id(approval_id)
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// The tenant's approvals, newest first, optionally of one environment.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    page: &Page,
) -> Result<Vec<RecordedApproval>, Error> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    if let Some(env) = environment_id {
        select = select.filter(rows::Column::EnvironmentId.eq(env));
    }
    page.apply(select, rows::Column::ApprovalId)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// Removes an approval nothing has spent (the API's undo when the run it was for cannot be
/// signalled). A spent approval stays: it is part of a run's record.
pub async fn forget(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    approval_id: &str,
) -> Result<(), Error> {
    rows::Entity::delete_many()
        .filter(rows::Column::ApprovalId.eq(approval_id))
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::SpentByRunId.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// Whether `claim` may spend the recorded approval it names ([`verify_approval`]), without
/// spending it: the API's check of a request, and the first half of [`claim`].
pub async fn verify(
    db: &impl ConnectionTrait,
    claim: &ApprovalClaim,
) -> Result<Result<(), RefusalReason>, Error> {
    let found = find(db, &claim.tenant_id, &claim.approval_id).await?;
    Ok(verify_approval(found.as_ref(), claim))
}

/// Verifies `claim` ([`verify_approval`]) and spends the approval on the claim's run. The
/// same run claiming again (a retried activity) spends nothing more and gets it again.
pub async fn claim(
    db: &impl ConnectionTrait,
    claim: &ApprovalClaim,
) -> Result<ClaimOutcome, Error> {
    if let Err(why) = verify(db, claim).await? {
        return Ok(ClaimOutcome::Refused { why });
    }
    rows::Entity::update_many()
        .col_expr(
            rows::Column::SpentByRunId,
            Expr::value(claim.run_id.clone()),
        )
        .col_expr(rows::Column::SpentAt, Expr::value(Utc::now()))
        .filter(rows::Column::ApprovalId.eq(&claim.approval_id))
        .filter(rows::Column::SpentByRunId.is_null())
        .exec(db)
        .await?;
    // Whoever won the update, the row now says which run spent it.
    let after = find(db, &claim.tenant_id, &claim.approval_id)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "approval",
            id: claim.approval_id.clone(),
        })?;
    Ok(
        if after.spent_by_run_id.as_deref() == Some(claim.run_id.as_str()) {
            ClaimOutcome::Spent {
                approval: Box::new(after),
            }
        } else {
            ClaimOutcome::Refused {
                why: RefusalReason::AlreadySpent,
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn granted(env: &str) -> NewApproval {
        NewApproval {
            tenant_id: "acme".into(),
            environment_id: env.into(),
            class: EnvironmentClass::Production,
            decision: ApprovalDecision::Approve,
            granted_by: "ops-lead".into(),
            granted_by_roles: vec!["Operator".into()],
            reason: "CAB-42".into(),
            inputs_hash: None,
            promotion_id: None,
            source: ApprovalSource::Operator,
            expires_at: Utc::now() + chrono::Duration::hours(1),
            spent_by_run_id: None,
        }
    }

    fn claim_for(approval_id: &str, run_id: &str) -> ApprovalClaim {
        ApprovalClaim {
            approval_id: approval_id.into(),
            tenant_id: "acme".into(),
            environment_id: "prod".into(),
            environment_class: EnvironmentClass::Production,
            run_id: run_id.into(),
            inputs_hash: Some("sha256:plan".into()),
            at: Utc::now(),
        }
    }

    async fn an_approval_is_spent_once_on(db: sea_orm::DatabaseConnection) {
        let a = record(&db, granted("prod")).await.unwrap();
        assert_eq!(
            find(&db, "acme", &a.approval_id).await.unwrap(),
            Some(a.clone())
        );
        assert_eq!(find(&db, "other", &a.approval_id).await.unwrap(), None);

        let first = claim(&db, &claim_for(&a.approval_id, "r1")).await.unwrap();
        let ClaimOutcome::Spent { approval } = first else {
            panic!("spent: {first:?}")
        };
        assert_eq!(approval.spent_by_run_id.as_deref(), Some("r1"));
        assert!(approval.spent_at.is_some());
        // The same run again (a retried activity) gets it again; another run does not.
        let again = claim(&db, &claim_for(&a.approval_id, "r1")).await.unwrap();
        assert!(matches!(again, ClaimOutcome::Spent { .. }), "{again:?}");
        assert_eq!(
            claim(&db, &claim_for(&a.approval_id, "r2")).await.unwrap(),
            ClaimOutcome::Refused {
                why: RefusalReason::AlreadySpent
            }
        );
        // A spent approval is part of a run's record: forgetting it does nothing.
        forget(&db, "acme", &a.approval_id).await.unwrap();
        assert!(find(&db, "acme", &a.approval_id).await.unwrap().is_some());

        let other = record(&db, granted("staging")).await.unwrap();
        assert_eq!(
            claim(&db, &claim_for(&other.approval_id, "r3"))
                .await
                .unwrap(),
            ClaimOutcome::Refused {
                why: RefusalReason::OtherEnvironment
            }
        );
        assert_eq!(
            claim(&db, &claim_for("no-such-id", "r3")).await.unwrap(),
            ClaimOutcome::Refused {
                why: RefusalReason::UnknownApproval
            }
        );
        forget(&db, "acme", &other.approval_id).await.unwrap();
        assert_eq!(find(&db, "acme", &other.approval_id).await.unwrap(), None);

        let page = Page {
            after: None,
            rows: 10,
        };
        let listed = list(&db, "acme", Some("prod"), &page).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].approval_id, a.approval_id);
    }

    fixtures::on_both_databases!(
        an_approval_is_spent_once_sqlite,
        an_approval_is_spent_once_postgres,
        an_approval_is_spent_once_on
    );

    /// Two runs claiming one approval at the same moment: exactly one spends it.
    async fn racing_claims_spend_it_once_on(db: sea_orm::DatabaseConnection) {
        let a = record(&db, granted("prod")).await.unwrap();
        let claims: Vec<_> = (0..8)
            .map(|i| {
                let db = db.clone();
                let c = claim_for(&a.approval_id, &format!("r{i}"));
                tokio::spawn(async move { claim(&db, &c).await.unwrap() })
            })
            .collect();
        let mut spent = 0;
        for c in claims {
            if matches!(c.await.unwrap(), ClaimOutcome::Spent { .. }) {
                spent += 1;
            }
        }
        assert_eq!(spent, 1);
    }

    fixtures::on_both_databases!(
        racing_claims_spend_it_once_sqlite,
        racing_claims_spend_it_once_postgres,
        racing_claims_spend_it_once_on
    );
}
