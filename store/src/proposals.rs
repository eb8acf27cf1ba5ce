//! `reconciliation_proposals`: reviewable changes grouping an environment's open findings.
//!
//! Observations raise and supersede proposals, and the GitOps reconciler raises one for a
//! difference it does not apply itself (`transactions::raise_findings`); the
//! ReconciliationProposal workflow projects its decisions ([`project`]); the run of an accepted
//! one is prepared by `transactions::prepare_proposal_run`.

use crate::decode::{At, to_json};
use crate::deferred::Deferred;
use crate::entities::reconciliation_proposals as rows;
use crate::entities::untold_supersessions as untold_rows;
use crate::environments::Environment;
use crate::findings::{self, Finding};
use crate::runs;
use crate::{Error, Page, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::drift::{Direction, ProposalPlan, ProposalState, proposal_plan};
use runtime_cloud_models::events::{ReconciliationDecided, ReconciliationProposed};
use runtime_cloud_models::inventory::{ProposalInput, ProposalProjection};
use runtime_cloud_models::{ProvisioningState, rules};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};
use std::collections::BTreeSet;

const TABLE: &str = "reconciliation_proposals";

/// One proposal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Proposal {
    /// A UUIDv7 (time-ordered, for cursor pagination).
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// The findings it covers.
    pub finding_ids: Vec<String>,
    pub direction: Direction,
    /// Counts of adds, changes and deletes, and the resources.
    #[schema(value_type = Object)]
    pub plan_summary: serde_json::Value,
    /// It deletes something: never accepted without an operator.
    pub destructive: bool,
    pub state: ProposalState,
    pub decided_by: Option<String>,
    pub decision_reason: Option<String>,
    /// The reconciliation run of an accepted proposal.
    pub provisioning_run_id: Option<String>,
    pub raised_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    /// What the policies answered before it would have been accepted on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<runtime_cloud_models::policy::PolicyDecision>,
    /// Its workflow is known to have started ([`mark_started`]); not shown to clients.
    #[serde(skip)]
    pub workflow_started: bool,
}

impl Proposal {
    fn read(m: rows::Model) -> Result<Self, Error> {
        let at = At {
            table: TABLE,
            row: &m.proposal_id,
        };
        Ok(Self {
            finding_ids: at.json("finding_ids", &m.finding_ids)?,
            policy: m
                .policy
                .as_ref()
                .map(|p| at.json("policy", p))
                .transpose()?,
            direction: at.wire("direction", &m.direction)?,
            state: at.wire("state", &m.state)?,
            proposal_id: m.proposal_id,
            tenant_id: m.tenant_id,
            environment_id: m.environment_id,
            plan_summary: m.plan_summary,
            destructive: m.destructive,
            decided_by: m.decided_by,
            decision_reason: m.decision_reason,
            provisioning_run_id: m.provisioning_run_id,
            raised_at: m.raised_at,
            decided_at: m.decided_at,
            workflow_started: m.workflow_started,
        })
    }

    /// The proposal's workflow input.
    pub fn input(&self, production: bool, auto_accept: bool) -> ProposalInput {
        ProposalInput {
            proposal_id: self.proposal_id.clone(),
            tenant_id: self.tenant_id.clone(),
            environment_id: self.environment_id.clone(),
            production,
            direction: self.direction,
            destructive: self.destructive,
            auto_accept,
        }
    }
}

/// What decides whether a proposal an observation raises is accepted without an operator,
/// besides the proposal itself ([`rules::auto_accept`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Acceptance {
    /// `AutoAcceptNonDestructiveOutsideProduction`.
    pub option: bool,
    /// The policy allows it for this environment.
    pub policy_allows: bool,
    /// The observation is younger than `StalenessMinutes`.
    pub fresh: bool,
}

/// The workflow input of a proposal an observation raised: the one place the auto-accept rule
/// is applied.
fn observed_input(p: &Proposal, env: &Environment, acceptance: Acceptance) -> ProposalInput {
    let production = env.production();
    let auto_accept = rules::auto_accept(
        p.destructive,
        rules::AcceptanceContext {
            mode: env.mode,
            production,
            option: acceptance.option,
            policy_allows: acceptance.policy_allows,
            stale: !acceptance.fresh,
        },
    );
    p.input(production, auto_accept)
}

/// Those of the proposals `ids` that exist, in one query.
pub async fn find_many(
    db: &impl ConnectionTrait,
    ids: impl IntoIterator<Item = String>,
) -> Result<Vec<Proposal>, Error> {
    rows::Entity::find()
        .filter(rows::Column::ProposalId.is_in(ids))
        .all(db)
        .await?
        .into_iter()
        .map(Proposal::read)
        .collect()
}

/// Proposals still in play: `Proposed` or `Accepted`.
fn in_play() -> sea_orm::sea_query::SimpleExpr {
    rows::Column::State.is_in([
        ProposalState::Proposed.as_str(),
        ProposalState::Accepted.as_str(),
    ])
}

/// The proposals in play of the environments `keys`, newest first, in one query.
pub async fn active_of(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<Proposal>, Error> {
    use crate::scope::of_environments;
    rows::Entity::find()
        .filter(of_environments(
            rows::Column::TenantId,
            rows::Column::EnvironmentId,
            keys,
        ))
        .filter(in_play())
        .order_by_desc(rows::Column::ProposalId)
        .all(db)
        .await?
        .into_iter()
        .map(Proposal::read)
        .collect()
}

/// The input of `recorded`, the proposal a record with the request's `proposal_id` raised
/// already: a retried record answers what the first one did, so that its workflow is started
/// even if the first answer was lost.
pub fn raised(
    recorded: Option<&Proposal>,
    env: &Environment,
    acceptance: Acceptance,
) -> Option<ProposalInput> {
    // Only one still open: a superseded one must not get a workflow that waits for a decision.
    recorded
        .filter(|p| p.state == ProposalState::Proposed)
        .map(|p| observed_input(p, env, acceptance))
}

/// Groups an observation's open findings into a proposal `proposal_id` when they changed since
/// the active one, and supersedes the open proposals it replaces, on `db` (the caller's
/// transaction). `recorded` is the proposal `proposal_id` if a record raised it already, and
/// `active` the environment's proposals in play, as this transaction read them; what the
/// record `deferred` is inserted before a proposal is. Returns the
/// new proposal's input and the superseded ids (recorded as not told yet: [`untold_of`]).
#[allow(clippy::too_many_arguments)] // what the observation's record read, passed on
pub async fn sync(
    db: &impl ConnectionTrait,
    deferred: &mut Deferred,
    env: &Environment,
    proposal_id: &str,
    recorded: Option<&Proposal>,
    active: Vec<Proposal>,
    open: &[Finding],
    acceptance: Acceptance,
    now: DateTime<Utc>,
) -> Result<(Option<ProposalInput>, Vec<String>), Error> {
    let (tenant_id, environment_id) = (&env.tenant_id, &env.environment_id);
    if let Some(raised) = raised(recorded, env, acceptance) {
        return Ok((Some(raised), Vec::new()));
    }
    // An accepted proposal whose run ended without applying (failed, rejected, cancelled) no
    // longer covers its findings: the drift needs a new proposal.
    let mut live = Vec::new();
    for p in active {
        if p.state == ProposalState::Accepted
            && run_ended_unapplied(db, p.provisioning_run_id.as_deref()).await?
        {
            continue;
        }
        live.push(p);
    }
    let open_ids: BTreeSet<String> = open.iter().map(|f| f.finding_id.clone()).collect();
    let covers = |p: &Proposal| p.finding_ids.iter().cloned().collect::<BTreeSet<_>>() == open_ids;
    if let Some(first) = live.first().filter(|p| covers(p)) {
        // Still the right proposal. One whose workflow may never have started (the sweep's
        // page that raised it failed before starting it) is answered again, so the hand-over
        // starts it (a start of one that exists starts nothing) and marks it started.
        let again = (first.state == ProposalState::Proposed && !first.workflow_started)
            .then(|| observed_input(first, env, acceptance));
        return Ok((again, Vec::new()));
    }
    // Open proposals that no longer match what is observed are superseded.
    let mut superseded = Vec::new();
    for p in live
        .into_iter()
        .filter(|p| p.state == ProposalState::Proposed)
    {
        set_state(db, &p.proposal_id, ProposalState::Superseded, now).await?;
        superseded.push(p.proposal_id);
    }
    untold(db, env, &superseded, now).await?;
    if open.is_empty() {
        return Ok((None, superseded));
    }
    let drift: Vec<_> = open.iter().map(Finding::as_drift).collect();
    let plan = proposal_plan(&drift);
    // The proposal links its findings, some perhaps raised by this record, and its event
    // follows theirs.
    deferred.insert(db).await?;
    let row = insert(
        db,
        proposal_id,
        tenant_id,
        environment_id,
        &open_ids,
        &plan,
        now,
    )
    .await?;
    Ok((Some(observed_input(&row, env, acceptance)), superseded))
}

/// The workflows of `proposal_ids` are to be started by a sweep's page after its batch
/// commits, not durably by a workflow: until [`mark_started`], later observations answer them
/// again ([`sync`]), so a page that failed in between leaves none without its workflow. One
/// statement for a batch, in its transaction.
pub async fn mark_pending(db: &impl ConnectionTrait, proposal_ids: &[String]) -> Result<(), Error> {
    set_started(db, proposal_ids, false).await
}

/// The workflows of `proposal_ids` started (or had already): later observations no longer
/// answer them again. One statement for a sweep's batch.
pub async fn mark_started(db: &impl ConnectionTrait, proposal_ids: &[String]) -> Result<(), Error> {
    set_started(db, proposal_ids, true).await
}

async fn set_started(
    db: &impl ConnectionTrait,
    ids: &[String],
    started: bool,
) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    rows::Entity::update_many()
        .col_expr(rows::Column::WorkflowStarted, Expr::value(started))
        .filter(rows::Column::ProposalId.is_in(ids.iter().cloned()))
        .filter(rows::Column::WorkflowStarted.eq(!started))
        .exec(db)
        .await?;
    Ok(())
}

/// Records `superseded` (the environment's proposals just superseded) as not told yet: the
/// callers signal their workflows after the transaction commits, and a worker killed in
/// between would leave them waiting for a decision that can no longer come — a retried
/// record finds them superseded already and would not name them again. Until
/// [`mark_told`], every record of the environment names them again ([`untold_of`]).
async fn untold(
    db: &impl ConnectionTrait,
    env: &Environment,
    superseded: &[String],
    now: DateTime<Utc>,
) -> Result<(), Error> {
    if superseded.is_empty() {
        return Ok(());
    }
    let new = superseded.iter().map(|id| untold_rows::ActiveModel {
        proposal_id: Set(id.clone()),
        tenant_id: Set(env.tenant_id.clone()),
        environment_id: Set(env.environment_id.clone()),
        superseded_at: Set(now),
    });
    untold_rows::Entity::insert_many(new)
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// The proposals of the environments `keys` that were superseded and whose workflows were not
/// told yet, as (tenant, environment, proposal) triples, in one query.
pub async fn untold_of(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<(String, String, String)>, Error> {
    use crate::scope::of_environments;
    Ok(untold_rows::Entity::find()
        .filter(of_environments(
            untold_rows::Column::TenantId,
            untold_rows::Column::EnvironmentId,
            keys,
        ))
        .order_by_asc(untold_rows::Column::ProposalId)
        .all(db)
        .await?
        .into_iter()
        .map(|r| (r.tenant_id, r.environment_id, r.proposal_id))
        .collect())
}

/// The workflows of the superseded `proposal_ids` were told (or had ended): later records no
/// longer name them. One statement for a sweep's batch.
pub async fn mark_told(db: &impl ConnectionTrait, proposal_ids: &[String]) -> Result<(), Error> {
    if proposal_ids.is_empty() {
        return Ok(());
    }
    untold_rows::Entity::delete_many()
        .filter(untold_rows::Column::ProposalId.is_in(proposal_ids.iter().cloned()))
        .exec(db)
        .await?;
    Ok(())
}

async fn set_state(
    db: &impl ConnectionTrait,
    proposal_id: &str,
    state: ProposalState,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    rows::Entity::update_many()
        .col_expr(rows::Column::State, Expr::value(state.as_str()))
        .col_expr(rows::Column::UpdatedAt, Expr::value(now))
        .filter(rows::Column::ProposalId.eq(proposal_id))
        .exec(db)
        .await?;
    Ok(())
}

/// Whether a proposal's run has ended in a state other than `Applied`.
async fn run_ended_unapplied(
    db: &impl ConnectionTrait,
    run_id: Option<&str>,
) -> Result<bool, Error> {
    let Some(run_id) = run_id else {
        return Ok(false);
    };
    Ok(runs::state(db, run_id)
        .await?
        .is_some_and(|s| s.is_terminal() && s != ProvisioningState::Applied))
}

/// Inserts a `Proposed` proposal covering `finding_ids`, links the findings to it, and writes
/// `ReconciliationProposed`, on `db` (the caller's transaction).
pub async fn insert(
    db: &impl ConnectionTrait,
    proposal_id: &str,
    tenant_id: &str,
    environment_id: &str,
    finding_ids: &BTreeSet<String>,
    plan: &ProposalPlan,
    now: DateTime<Utc>,
) -> Result<Proposal, Error> {
    let row = rows::ActiveModel {
        proposal_id: Set(proposal_id.to_owned()),
        tenant_id: Set(tenant_id.to_owned()),
        environment_id: Set(environment_id.to_owned()),
        finding_ids: Set(to_json(finding_ids)?),
        direction: Set(plan.direction.as_str().to_owned()),
        plan_summary: Set(plan.plan_summary.clone()),
        destructive: Set(plan.destructive),
        state: Set(ProposalState::Proposed.as_str().to_owned()),
        decided_by: Set(None),
        decision_reason: Set(None),
        provisioning_run_id: Set(None),
        raised_at: Set(now),
        decided_at: Set(None),
        policy: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        // Its caller starts its workflow durably (a workflow's child), but for a sweep's page,
        // which marks its own proposals pending ([`mark_pending`]) until it started them.
        workflow_started: Set(true),
    }
    .insert(db)
    .await?;
    findings::link(db, finding_ids, proposal_id).await?;
    let event = ReconciliationProposed {
        proposal_id: row.proposal_id.clone(),
        tenant_id: row.tenant_id.clone(),
        environment_id: row.environment_id.clone(),
        direction: row.direction.clone(),
        destructive: row.destructive,
    };
    let id = outbox::event_id(&row.proposal_id, "ReconciliationProposed");
    outbox::append(db, tenant_id, event.into(), id).await?;
    Proposal::read(row)
}

/// The environment's proposal in play, if any (there is at most one that is not superseded).
pub async fn in_play_of(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<Proposal>, Error> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .filter(in_play())
        .one(db)
        .await?
        .map(Proposal::read)
        .transpose()
}

/// Projects a proposal's state; a decision (`Accepted` / `Rejected`) is recorded with who,
/// why and when, and writes `ReconciliationDecided`; in one transaction.
pub async fn project(db: &DatabaseConnection, p: &ProposalProjection) -> Result<(), Error> {
    let txn = crate::begin_write(db).await?;
    let Some(row) = rows::Entity::find_by_id(p.proposal_id.clone())
        .one(&txn)
        .await?
    else {
        return Err(Error::Missing {
            what: "proposal",
            id: p.proposal_id.clone(),
        });
    };
    let now = Utc::now();
    let (tenant, env) = (row.tenant_id.clone(), row.environment_id.clone());
    let decided = matches!(p.state, ProposalState::Accepted | ProposalState::Rejected);
    let mut row: rows::ActiveModel = row.into();
    row.state = Set(p.state.as_str().to_owned());
    if decided {
        row.decided_by = Set(p.decided_by.clone());
        row.decision_reason = Set(p.reason.clone());
        row.decided_at = Set(Some(now));
    }
    if p.provisioning_run_id.is_some() {
        row.provisioning_run_id = Set(p.provisioning_run_id.clone());
    }
    row.updated_at = Set(now);
    row.update(&txn).await?;
    if decided {
        let event = ReconciliationDecided {
            proposal_id: p.proposal_id.clone(),
            tenant_id: tenant.clone(),
            environment_id: env,
            state: p.state.as_str().to_owned(),
            provisioning_run_id: p.provisioning_run_id.clone(),
        };
        let id = outbox::event_id(&p.proposal_id, "ReconciliationDecided");
        outbox::append(&txn, &tenant, event.into(), id).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The state the read table shows for a proposal (`None`: it has no row). A proposal's
/// workflow reads it when it starts and while it waits: an observation may have superseded
/// the proposal before its workflow existed to be told.
pub async fn state_of(
    db: &impl ConnectionTrait,
    proposal_id: &str,
) -> Result<Option<ProposalState>, Error> {
    let state: Option<String> = rows::Entity::find_by_id(proposal_id.to_owned())
        .select_only()
        .column(rows::Column::State)
        .into_tuple()
        .one(db)
        .await?;
    let at = At {
        table: TABLE,
        row: proposal_id,
    };
    at.wire_opt("state", state.as_deref())
}

/// The tenant's proposal.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    proposal_id: &str,
) -> Result<Option<Proposal>, Error> {
    rows::Entity::find_by_id(proposal_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
        .map(Proposal::read)
        .transpose()
}

/// A page of the tenant's proposals (of one environment, in one state, when given), newest
/// first.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    state: Option<ProposalState>,
    page: &Page,
) -> Result<Vec<Proposal>, Error> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    if let Some(env) = environment_id {
        select = select.filter(rows::Column::EnvironmentId.eq(env));
    }
    if let Some(state) = state {
        select = select.filter(rows::Column::State.eq(state.as_str()));
    }
    page.apply(select, rows::Column::ProposalId)
        .all(db)
        .await?
        .into_iter()
        .map(Proposal::read)
        .collect()
}

/// (tenant, destructive, state) of every proposal (the metrics' diffs counter and proposals
/// gauge).
pub async fn tally(db: &impl ConnectionTrait) -> Result<Vec<(String, bool, ProposalState)>, Error> {
    use rows::Column as C;
    let rows: Vec<(String, String, bool, String)> = rows::Entity::find()
        .select_only()
        .columns([C::ProposalId, C::TenantId, C::Destructive, C::State])
        .into_tuple()
        .all(db)
        .await?;
    rows.into_iter()
        .map(|(id, tenant, destructive, state)| {
            let at = At {
                table: TABLE,
                row: &id,
            };
            Ok((tenant, destructive, at.wire("state", &state)?))
        })
        .collect()
}

/// Records what the policies answered about auto-accepting the proposal.
pub async fn set_policy(
    db: &impl ConnectionTrait,
    proposal_id: &str,
    decision: &runtime_cloud_models::policy::PolicyDecision,
) -> Result<(), Error> {
    rows::Entity::update_many()
        .col_expr(
            rows::Column::Policy,
            Expr::value(crate::decode::to_json(decision)?),
        )
        .filter(rows::Column::ProposalId.eq(proposal_id))
        .exec(db)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[tokio::test]
    async fn a_decision_is_recorded_with_its_event() {
        let db = fixtures::sqlite().await;
        fixtures::proposal(&db).await;
        let decision = ProposalProjection {
            proposal_id: "p1".into(),
            state: ProposalState::Rejected,
            decided_by: Some("alice".into()),
            reason: Some("keep it off".into()),
            provisioning_run_id: None,
        };
        project(&db, &decision).await.unwrap();
        project(&db, &decision).await.unwrap();
        let p = find(&db, "acme", "p1").await.unwrap().unwrap();
        assert_eq!(p.state, ProposalState::Rejected);
        assert_eq!(p.decided_by.as_deref(), Some("alice"));
        assert!(p.decided_at.is_some());
        assert_eq!(
            fixtures::events(&db, "ReconciliationDecided").await.len(),
            1
        );
        let missing = ProposalProjection {
            proposal_id: "nope".into(),
            ..decision
        };
        assert!(matches!(
            project(&db, &missing).await.unwrap_err(),
            Error::Missing {
                what: "proposal",
                ..
            }
        ));
    }

    #[tokio::test]
    async fn an_unknown_direction_in_a_row_is_an_error_not_a_default() {
        let db = fixtures::sqlite().await;
        fixtures::proposal(&db).await;
        fixtures::execute(
            &db,
            "UPDATE reconciliation_proposals SET direction = 'sideways'",
        )
        .await;
        let err = find(&db, "acme", "p1").await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    table: TABLE,
                    column: "direction",
                    ..
                }
            ),
            "{err:?}"
        );
        let page = Page {
            after: None,
            rows: 10,
        };
        assert!(list(&db, "acme", None, None, &page).await.is_err());
    }
}
