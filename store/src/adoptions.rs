//! `program_adoptions`: a proposal's unmanaged workloads adopted into its Pulumi program
//! (`models::program_adoption`): requested (`generating`), then `published` with its branch,
//! commit and diff (`AdoptionPublished`) or `failed` with the reason (`AdoptionFailed`), each
//! with its event in the same transaction. A failed adoption may be requested again.

use crate::entities::program_adoptions as rows;
use crate::{Error, begin_write, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::events::{AdoptionFailed, AdoptionPublished};
use runtime_cloud_models::program_adoption::{AdoptionState, ImportedResource};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, IntoActiveModel, QueryFilter,
};

const TABLE: &str = "program_adoptions";

/// A proposal's adoption, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Adoption {
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// How many times it was asked for (its workflow is `program-adoption/{proposalId}/{attempt}`).
    pub attempt: u32,
    pub state: AdoptionState,
    /// What each workload became in the program; `[]` until generated.
    pub resources: Vec<ImportedResource>,
    /// `runtime-cloud/adopt/{proposalId}`, once published.
    pub branch: Option<String>,
    /// The commit on the branch.
    pub commit: Option<String>,
    /// `git diff` of the commit from the program's commit.
    pub diff: Option<String>,
    /// Why it failed.
    pub reason: Option<String>,
    pub requested_by: String,
    pub requested_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

fn read(m: rows::Model) -> Result<Adoption, Error> {
    let at = crate::decode::At {
        table: TABLE,
        row: &m.proposal_id,
    };
    Ok(Adoption {
        state: at.wire("state", &m.state)?,
        resources: at.json("resources", &m.resources)?,
        attempt: u32::try_from(m.attempt).unwrap_or_default(),
        proposal_id: m.proposal_id,
        tenant_id: m.tenant_id,
        environment_id: m.environment_id,
        branch: m.branch,
        commit: m.commit_sha,
        diff: m.diff,
        reason: m.reason,
        requested_by: m.requested_by,
        requested_at: m.requested_at,
        completed_at: m.completed_at,
    })
}

/// What asking for an adoption found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// Recorded `generating` now (new, or a failed one asked again): start its workflow.
    Started(Adoption),
    /// One is generating or published already: left as it is.
    Already(Adoption),
}

/// Records the adoption of proposal `proposal_id` (of `environment_id`) asked by `by`.
pub async fn request(
    db: &DatabaseConnection,
    tenant_id: &str,
    environment_id: &str,
    proposal_id: &str,
    by: &str,
) -> Result<Requested, Error> {
    let txn = begin_write(db).await?;
    let now = Utc::now();
    let existing = rows::Entity::find_by_id(proposal_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(&txn)
        .await?;
    let row = match existing {
        Some(row) if row.state != AdoptionState::Failed.as_str() => {
            return Ok(Requested::Already(read(row)?));
        }
        Some(row) => {
            let attempt = row.attempt + 1;
            let mut again = row.into_active_model();
            again.attempt = Set(attempt);
            again.state = Set(AdoptionState::Generating.as_str().to_owned());
            again.resources = Set(serde_json::json!([]));
            again.reason = Set(None);
            again.requested_by = Set(by.to_owned());
            again.requested_at = Set(now);
            again.completed_at = Set(None);
            again.update(&txn).await?
        }
        None => rows::ActiveModel {
            proposal_id: Set(proposal_id.to_owned()),
            tenant_id: Set(tenant_id.to_owned()),
            environment_id: Set(environment_id.to_owned()),
            attempt: Set(1),
            state: Set(AdoptionState::Generating.as_str().to_owned()),
            resources: Set(serde_json::json!([])),
            branch: Set(None),
            commit_sha: Set(None),
            diff: Set(None),
            reason: Set(None),
            requested_by: Set(by.to_owned()),
            requested_at: Set(now),
            completed_at: Set(None),
        }
        .insert(&txn)
        .await
        .map_err(Error::on_insert(TABLE))?,
    };
    txn.commit().await?;
    Ok(Requested::Started(read(row)?))
}

/// The tenant's adoption of proposal `proposal_id`, if one was asked for.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    proposal_id: &str,
) -> Result<Option<Adoption>, Error> {
    rows::Entity::find_by_id(proposal_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// The adoption of proposal `proposal_id`, whichever tenant's (its workflow knows only the id).
pub async fn find_any(
    db: &impl ConnectionTrait,
    proposal_id: &str,
) -> Result<Option<Adoption>, Error> {
    rows::Entity::find_by_id(proposal_id.to_owned())
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// The adoptions still generating, for a worker to start their workflows again.
pub async fn generating(db: &impl ConnectionTrait) -> Result<Vec<Adoption>, Error> {
    rows::Entity::find()
        .filter(rows::Column::State.eq(AdoptionState::Generating.as_str()))
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// The tenant's adoptions of `proposal_ids` (a page of proposals), in one query.
pub async fn of_proposals(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    proposal_ids: &[String],
) -> Result<Vec<Adoption>, Error> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::ProposalId.is_in(proposal_ids.iter().cloned()))
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// How an adoption that was generating ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    Published {
        resources: Vec<ImportedResource>,
        branch: String,
        commit: String,
        diff: String,
    },
    Failed {
        reason: String,
    },
}

/// Ends attempt `attempt` of the adoption of `proposal_id` with `outcome` and its event, in one
/// transaction; an adoption that ended already, or was asked for again since, is left as it
/// is (a retried activity, or an earlier request's workflow still running, records nothing).
pub async fn end(
    db: &DatabaseConnection,
    proposal_id: &str,
    attempt: u32,
    outcome: Outcome,
) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    let Some(row) = rows::Entity::find_by_id(proposal_id.to_owned())
        .one(&txn)
        .await?
        .filter(|r| {
            r.state == AdoptionState::Generating.as_str()
                && u32::try_from(r.attempt).ok() == Some(attempt)
        })
    else {
        return Ok(());
    };
    let (tenant_id, environment_id) = (row.tenant_id.clone(), row.environment_id.clone());
    let mut ended = row.into_active_model();
    ended.completed_at = Set(Some(Utc::now()));
    match outcome {
        Outcome::Published {
            resources,
            branch,
            commit,
            diff,
        } => {
            ended.state = Set(AdoptionState::Published.as_str().to_owned());
            ended.resources = Set(crate::decode::to_json(&resources)?);
            ended.branch = Set(Some(branch.clone()));
            ended.commit_sha = Set(Some(commit.clone()));
            ended.diff = Set(Some(diff));
            ended.update(&txn).await?;
            let event = AdoptionPublished {
                proposal_id: proposal_id.to_owned(),
                tenant_id: tenant_id.clone(),
                environment_id,
                branch,
                commit,
                resources: resources.into_iter().map(|r| r.resource).collect(),
            };
            let id = outbox::event_id(proposal_id, &format!("AdoptionPublished:{}", event.commit));
            outbox::append(&txn, &tenant_id, event.into(), id).await?;
        }
        Outcome::Failed { reason } => {
            let reason = runtime_cloud_models::wire::truncated(&reason, 4000);
            ended.state = Set(AdoptionState::Failed.as_str().to_owned());
            ended.reason = Set(Some(reason.clone()));
            ended.update(&txn).await?;
            let event = AdoptionFailed {
                proposal_id: proposal_id.to_owned(),
                tenant_id: tenant_id.clone(),
                environment_id,
                reason,
            };
            // One per request: a failed adoption may be asked for again, and fail again.
            let id = outbox::event_id(proposal_id, &format!("AdoptionFailed:{attempt}"));
            outbox::append(&txn, &tenant_id, event.into(), id).await?;
        }
    }
    txn.commit().await?;
    Ok(())
}
