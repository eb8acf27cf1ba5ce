//! Raising findings and grouping them into a proposal: what an observation found raises the
//! findings not open yet, resolves those it no longer holds, and groups the open ones into a
//! reconciliation proposal when they changed since the one in play (in the observation's
//! transaction: [`raise_findings`]); the GitOps reconciler groups them into its own proposal
//! for a difference it does not apply itself ([`raise_for_replan`], a transaction of its own).

use chrono::{DateTime, Utc};
use runtime_cloud_models::drift::{self, ProposalPlan};
use runtime_cloud_models::drift_rules::DriftRule;
use runtime_cloud_models::inventory::ProposalInput;
use runtime_cloud_store::deferred::Deferred;
use runtime_cloud_store::environments::Environment;
use runtime_cloud_store::findings::{self, Finding, Synced};
use runtime_cloud_store::proposals::{self, Acceptance, Proposal};
use runtime_cloud_store::{DatabaseConnection, Error};
use sea_orm::DatabaseTransaction;

/// What an observation's findings came to.
#[derive(Debug, Default)]
pub struct Raised {
    /// Findings raised.
    pub raised: u32,
    /// Findings resolved.
    pub resolved: u32,
    /// The proposal raised (or raised already by this record's earlier attempt), whose
    /// workflow the caller starts.
    pub new_proposal: Option<ProposalInput>,
    /// Proposals superseded, whose workflows are to be told.
    pub superseded: Vec<String>,
}

/// What the observation read of the environment before it compared: its `open` findings
/// (suppressed ones too), its drift `rules`, the proposal this record raised already
/// (`recorded`) and its proposals in play (`active`), all read in this transaction.
pub struct Standing<'a> {
    pub env: &'a Environment,
    pub open: Vec<Finding>,
    pub rules: &'a [DriftRule],
    pub recorded: Option<&'a Proposal>,
    pub active: Vec<Proposal>,
}

/// Raises and resolves the environment's findings from what the observation `found` (`None`:
/// it compared the same objects against the same inputs as the last one, and the open
/// findings stand), then groups the open ones into proposal `proposal_id` when they changed,
/// superseding the proposals it replaces, in the observation's transaction `txn`. New findings
/// and events are `deferred` (see [`findings::sync`]), for the caller to insert. Proposals
/// are synced either way: an accepted proposal whose run failed since no longer covers its
/// findings, whether or not the target moved. In `observe` mode there are none.
pub async fn raise_findings(
    txn: &DatabaseTransaction,
    deferred: &mut Deferred,
    standing: Standing<'_>,
    found: Option<&[drift::Finding]>,
    proposal_id: &str,
    acceptance: Acceptance,
    now: DateTime<Utc>,
) -> Result<Raised, Error> {
    let Standing {
        env,
        open,
        rules,
        recorded,
        active,
    } = standing;
    let synced = match found {
        Some(found) => {
            let (tenant, environment) = (&env.tenant_id, &env.environment_id);
            findings::sync(txn, deferred, tenant, environment, open, found, rules, now).await?
        }
        None => {
            let unsuppressed = open.into_iter().filter(|f| f.suppressed_by.is_none());
            Synced::unchanged(unsuppressed.collect())
        }
    };
    let (new_proposal, superseded) = if env.mode.proposes() {
        let open = &synced.open;
        proposals::sync(
            txn,
            deferred,
            env,
            proposal_id,
            recorded,
            active,
            open,
            acceptance,
            now,
        )
        .await?
    } else {
        (None, Vec::new())
    };
    Ok(Raised {
        raised: synced.raised,
        resolved: synced.resolved,
        new_proposal,
        superseded,
    })
}

/// Raises the GitOps reconciler's proposal `proposal_id` for a re-planned difference it does
/// not apply itself, covering the environment's open findings, in one transaction, unless a
/// proposal is already in play for the environment. Returns its workflow input when this is
/// the reconciler's proposal (raised now, or by an earlier attempt of the same re-plan), none
/// when another proposal is in play. Never accepted without an operator: the reconciler
/// proposes exactly what it chose not to apply.
pub async fn raise_for_replan(
    db: &DatabaseConnection,
    env: &Environment,
    proposal_id: &str,
    plan: &ProposalPlan,
) -> Result<Option<ProposalInput>, Error> {
    let (tenant_id, environment_id) = (&env.tenant_id, &env.environment_id);
    let txn = runtime_cloud_store::begin_write(db).await?;
    if let Some(p) = proposals::in_play_of(&txn, tenant_id, environment_id).await? {
        txn.commit().await?;
        return Ok((p.proposal_id == proposal_id).then(|| p.input(env.production(), false)));
    }
    let open = findings::open_ids(&txn, tenant_id, environment_id).await?;
    let now = Utc::now();
    let row = proposals::insert(
        &txn,
        proposal_id,
        tenant_id,
        environment_id,
        &open,
        plan,
        now,
    )
    .await?;
    txn.commit().await?;
    Ok(Some(row.input(env.production(), false)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_models::drift::Direction;
    use runtime_cloud_store::fixtures;

    #[tokio::test]
    async fn the_reconcilers_proposal_is_raised_once_and_never_auto_accepted() {
        let db = fixtures::sqlite().await;
        let env = fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let plan = ProposalPlan {
            direction: Direction::ApplyDeclared,
            destructive: false,
            plan_summary: serde_json::json!({ "adds": 1, "changes": 0, "deletes": 0 }),
        };
        let raised = raise_for_replan(&db, &env, "g1", &plan)
            .await
            .unwrap()
            .unwrap();
        assert!(!raised.auto_accept);
        // Its retry answers it again; another re-plan while it is open raises nothing.
        assert_eq!(
            raise_for_replan(&db, &env, "g1", &plan).await.unwrap(),
            Some(raised)
        );
        assert_eq!(
            raise_for_replan(&db, &env, "g2", &plan).await.unwrap(),
            None
        );
        assert_eq!(
            fixtures::events(&db, "ReconciliationProposed").await.len(),
            1
        );
    }
}
