//! The runs list on SQLite: the page's JSON built inside SQLite, one row per request.
//!
//! sqlx runs each SQLite connection on its own thread and hands every result row to the async
//! side through a channel, a wake-up per row; a page of 50 runs cost 51 of them, and at 1,000
//! requests/s those hand-offs were a quarter of the API's CPU (docs/benchmarks.md, section 4).
//! Here SQLite writes the page as one JSON array, so a request is one row. PostgreSQL's driver
//! reads rows on the async side and keeps the regular path (`RunRow`).
//!
//! The array's items are exactly what `RunView` serialises to (same names, same values, same
//! timestamp format); `tests/provisioning.rs` compares every listed run with its GET.

use super::pagination::encode;
use crate::Error;
use sea_orm::sea_query::{Expr, SqliteQueryBuilder};
use sea_orm::{
    ConnectionTrait, DatabaseBackend, DatabaseConnection, FromQueryResult, QueryTrait, Statement,
};
use serde::Serialize;
use serde_json::value::RawValue;

/// One `RunView` as a JSON object, from the columns of `provisioning_runs`.
///
/// Timestamps are stored as RFC 3339 with `+00:00` and 0, 3, 6 or 9 fractional digits (sqlx's
/// encoding of `DateTime<Utc>`), and `RunView` writes them with `Z` and the same digits.
/// A receipt that is somehow not JSON shows as null, as in `RunRow`.
const RUN_VIEW: &str = "json_object(\
    'provisioningRunId', provisioning_run_id, \
    'workflowId', 'provisioning-run/' || provisioning_run_id, \
    'tenantId', tenant_id, \
    'projectId', project_id, \
    'environmentId', environment_id, \
    'specificationId', specification_id, \
    'specificationVersion', specification_version, \
    'kind', kind, \
    'promotionId', promotion_id, \
    'approvalId', approval_id, \
    'state', state, \
    'plan', iif(json_valid(plan_receipt), json(plan_receipt), NULL), \
    'approval', iif(json_valid(approval), json(approval), NULL), \
    'applyReceipt', iif(json_valid(apply_receipt), json(apply_receipt), NULL), \
    'reason', reason, \
    'logsRef', logs_ref, \
    'startedAt', replace(started_at, '+00:00', 'Z'), \
    'completedAt', replace(completed_at, '+00:00', 'Z'))";

/// A page as the list answers it, with the items passed through as SQLite wrote them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPage {
    items: Box<RawValue>,
    next_cursor: Option<String>,
}

#[derive(Debug, FromQueryResult)]
struct PageRow {
    items: String,
    fetched: i64,
    last_id: Option<String>,
}

/// Fetches the page `bounded` selects: `limit + 1` runs newest first, as `Page::bound` narrows
/// them (the extra run only says there is a next page).
pub async fn fetch(
    db: &DatabaseConnection,
    bounded: sea_orm::Select<runtime_cloud_models::entities::provisioning_runs::Entity>,
    limit: u64,
) -> Result<RawPage, Error> {
    let mut rows = bounded.into_query();
    rows.expr_as(
        Expr::cust("row_number() OVER (ORDER BY provisioning_run_id DESC)"),
        sea_orm::sea_query::Alias::new("rn"),
    );
    let (rows, values) = rows.build(SqliteQueryBuilder);
    let sql = format!(
        "SELECT coalesce(json_group_array({RUN_VIEW} ORDER BY rn) \
                FILTER (WHERE rn <= {limit}), '[]') AS items, \
                count(*) AS fetched, \
                max(CASE WHEN rn = {limit} THEN provisioning_run_id END) AS last_id \
         FROM ({rows}) AS page"
    );
    let statement = Statement::from_sql_and_values(DatabaseBackend::Sqlite, sql, values);
    let row = db
        .query_one(statement)
        .await?
        .ok_or_else(|| Error::Internal(anyhow::anyhow!("the page query returned no row")))?;
    let page = PageRow::from_query_result(&row, "")?;
    let items = RawValue::from_string(page.items)
        .map_err(|e| Error::Internal(anyhow::anyhow!("the page is not JSON: {e}")))?;
    let more = page.fetched as u64 > limit;
    Ok(RawPage {
        items,
        next_cursor: page.last_id.filter(|_| more).map(|id| encode(&id)),
    })
}
