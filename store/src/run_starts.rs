//! `run_starts`: runs the API wrote whose workflow may not have started yet.
//!
//! A run's row and its workflow live in two systems, so no single write makes both. The API
//! writes the row and its start here in one transaction ([`accept`]), then starts the workflow
//! and forgets the start ([`started`]); a start Temporal refused takes the run back
//! ([`withdraw`]). A process killed between the two, or a withdrawal the database refused,
//! leaves the start here: the API's starter starts what is older than a grace period
//! ([`due`]) — a start is idempotent by the workflow's id — so no run's row is left without its
//! workflow, and a client that sends the same `Idempotency-Key` again has it started at once
//! ([`pending`]).

use crate::decode::{At, to_json};
use crate::entities::run_starts as rows;
use crate::runs::{self, NewRun};
use crate::{Error, begin_write};
use chrono::{DateTime, Utc};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::options::ProvisioningOptions;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};

const TABLE: &str = "run_starts";

/// Writes the run's row and its start in one transaction and returns the workflow's input.
/// [`Error::Duplicate`] when a run with this id or `Idempotency-Key` exists.
pub async fn accept(
    db: &sea_orm::DatabaseConnection,
    new: &NewRun<'_>,
    options: &ProvisioningOptions,
) -> Result<RunInput, Error> {
    let txn = begin_write(db).await?;
    let input = runs::create(&txn, new, options).await?;
    rows::ActiveModel {
        provisioning_run_id: Set(input.run_id.clone()),
        tenant_id: Set(input.tenant_id.clone()),
        input: Set(to_json(&input)?),
        accepted_at: Set(Utc::now()),
    }
    .insert(&txn)
    .await
    .map_err(Error::on_insert(TABLE))?;
    txn.commit().await?;
    Ok(input)
}

/// The run's workflow started: nothing is left to start.
pub async fn started(db: &impl ConnectionTrait, run_id: &str) -> Result<(), Error> {
    rows::Entity::delete_by_id(run_id.to_owned())
        .exec(db)
        .await?;
    Ok(())
}

/// Takes back a run whose workflow could not be started: its row and its start go together.
pub async fn withdraw(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    run_id: &str,
) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    started(&txn, run_id).await?;
    runs::delete(&txn, tenant_id, run_id).await?;
    txn.commit().await?;
    Ok(())
}

/// A run whose workflow may not have started.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The workflow's input.
    pub input: RunInput,
    /// When the request wrote the run: until [`RUN_START_IN_FLIGHT`] after, it may still be
    /// starting it, or about to take it back.
    ///
    /// [`RUN_START_IN_FLIGHT`]: runtime_cloud_models::options::RUN_START_IN_FLIGHT
    pub accepted_at: DateTime<Utc>,
}

/// The tenant's run `run_id`, when its workflow may not have started.
pub async fn pending(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    run_id: &str,
) -> Result<Option<Pending>, Error> {
    let Some(row) = rows::Entity::find_by_id(run_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let accepted_at = row.accepted_at;
    Ok(Some(Pending {
        input: read(row)?,
        accepted_at,
    }))
}

/// Up to `limit` starts accepted before `before`, oldest first: their requests are over, so
/// their workflows are started by nobody else.
pub async fn due(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<RunInput>, Error> {
    rows::Entity::find()
        .filter(rows::Column::AcceptedAt.lt(before))
        .order_by_asc(rows::Column::AcceptedAt)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

fn read(row: rows::Model) -> Result<RunInput, Error> {
    let at = At {
        table: TABLE,
        row: &row.provisioning_run_id,
    };
    at.json("input", &row.input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{self, declaration, workload};
    use crate::specifications;
    use runtime_cloud_models::EnvironmentClass;

    #[tokio::test]
    async fn a_start_is_pending_until_started_and_withdrawn_with_its_run() {
        let db = fixtures::sqlite().await;
        let env = fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let spec =
            specifications::declare(&db, &declaration("dev", vec![workload("api", "1.0.0", 2)]))
                .await
                .unwrap();
        let options = ProvisioningOptions::default();
        let new = |id: &'static str| fixtures::new_run(id, &env, &spec);
        let input = accept(&db, &new("r1"), &options).await.unwrap();
        accept(&db, &new("r2"), &options).await.unwrap();
        let err = accept(&db, &new("r1"), &options).await.unwrap_err();
        assert!(matches!(err, Error::Duplicate { .. }), "{err:?}");

        let found = pending(&db, "acme", "r1").await.unwrap().expect("pending");
        assert_eq!(found.input, input);
        assert!(found.accepted_at <= Utc::now());
        assert_eq!(
            pending(&db, "other", "r1").await.unwrap(),
            None,
            "another tenant's"
        );
        let later = Utc::now() + chrono::Duration::seconds(1);
        let ids = |due: Vec<RunInput>| due.into_iter().map(|i| i.run_id).collect::<Vec<_>>();
        assert_eq!(ids(due(&db, later, 10).await.unwrap()), ["r1", "r2"]);
        assert_eq!(ids(due(&db, later, 1).await.unwrap()), ["r1"]);
        let earlier = Utc::now() - chrono::Duration::seconds(60);
        assert!(
            due(&db, earlier, 10).await.unwrap().is_empty(),
            "still in its request"
        );

        started(&db, "r1").await.unwrap();
        assert_eq!(pending(&db, "acme", "r1").await.unwrap(), None);
        assert!(
            runs::find(&db, "acme", "r1").await.unwrap().is_some(),
            "the run stays"
        );

        withdraw(&db, "acme", "r2").await.unwrap();
        assert_eq!(pending(&db, "acme", "r2").await.unwrap(), None);
        assert!(
            runs::find(&db, "acme", "r2").await.unwrap().is_none(),
            "taken back"
        );
        assert!(due(&db, later, 10).await.unwrap().is_empty());
    }
}
