//! Rows a transaction's writers defer, to insert them together before it commits: a sweep's
//! batch records a hundred observations, each with its inventory and workload rows when new,
//! and a finding per rule its namespace breaks (tens), each finding with its event. Deferred,
//! they are one multi-row insert per table for the batch, where each observation's own would be
//! several statements (on PostgreSQL, each a round trip while the batch's transaction holds its
//! environments' locks; a fleet's first sweep inserts 10,000 inventories and 200,000 workloads).
//!
//! They are inserted table by table, the events last, in the order they were deferred (the
//! outbox's order). Whoever writes something that refers to a deferred row (a proposal links the
//! findings it covers) or appends an event itself inserts what is deferred first
//! ([`Deferred::insert`]).

use crate::entities::{drift_findings, observed_workloads, outbox_events, runtime_inventories};
use crate::{Error, outbox};
use runtime_cloud_models::events::OutboxEvent;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, EntityTrait};

/// Rows deferred (see the module's documentation).
#[derive(Default)]
pub struct Deferred {
    inventories: Vec<runtime_inventories::ActiveModel>,
    workloads: Vec<observed_workloads::ActiveModel>,
    findings: Vec<drift_findings::ActiveModel>,
    events: Vec<outbox_events::ActiveModel>,
}

/// Rows per insert statement: well under the bind parameters either database takes (SQLite
/// 32,766, PostgreSQL 65,535) at a workload's or a finding's 15 columns.
const ROWS_PER_INSERT: usize = 1_000;

impl Deferred {
    /// Defers appending `event` (with id `event_id`) to the outbox. An event whose id is there
    /// already (a retried record's) is not appended again.
    pub fn event(&mut self, tenant_id: &str, event: OutboxEvent, event_id: String) {
        self.events
            .push(outbox::row(tenant_id, event, event_id, chrono::Utc::now()));
    }

    /// Defers inserting a new inventory.
    pub fn inventory(&mut self, row: runtime_inventories::ActiveModel) {
        self.inventories.push(row);
    }

    /// Defers inserting a new workload row.
    pub fn workload(&mut self, row: observed_workloads::ActiveModel) {
        self.workloads.push(row);
    }

    /// Defers inserting a new finding.
    pub(crate) fn finding(&mut self, row: drift_findings::ActiveModel) {
        self.findings.push(row);
    }

    /// Inserts what is deferred on `db` (the transaction that deferred it), and defers nothing
    /// any more.
    pub async fn insert(&mut self, db: &impl ConnectionTrait) -> Result<(), Error> {
        insert_all(db, std::mem::take(&mut self.inventories), None).await?;
        insert_all(db, std::mem::take(&mut self.workloads), None).await?;
        insert_all(db, std::mem::take(&mut self.findings), None).await?;
        let once = OnConflict::column(outbox_events::Column::EventId)
            .do_nothing()
            .to_owned();
        insert_all(db, std::mem::take(&mut self.events), Some(once)).await
    }
}

/// Inserts `rows` in order, [`ROWS_PER_INSERT`] per statement, each `on_conflict` if given.
async fn insert_all<A>(
    db: &impl ConnectionTrait,
    mut rows: Vec<A>,
    on_conflict: Option<OnConflict>,
) -> Result<(), Error>
where
    A: sea_orm::ActiveModelTrait + Send,
    <A::Entity as EntityTrait>::Model: sea_orm::IntoActiveModel<A>,
{
    while !rows.is_empty() {
        let rest = rows.split_off(rows.len().min(ROWS_PER_INSERT));
        let mut insert = A::Entity::insert_many(std::mem::replace(&mut rows, rest));
        if let Some(on_conflict) = &on_conflict {
            insert = insert.on_conflict(on_conflict.clone());
        }
        // Not `exec`: a conflict that inserts nothing is no error here.
        insert.exec_without_returning(db).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use runtime_cloud_models::events::ObservedStateChanged;

    fn changed(environment_id: &str) -> OutboxEvent {
        ObservedStateChanged {
            environment_id: environment_id.into(),
            tenant_id: "acme".into(),
            project_id: "shop".into(),
            current_release_id: None,
            changes: serde_json::json!([]),
            stale: false,
        }
        .into()
    }

    /// Events deferred are appended in the order they were deferred, more than one
    /// statement's worth too, and one whose id is there already is not appended again.
    async fn deferred_events_are_appended_in_order_and_once_on(db: sea_orm::DatabaseConnection) {
        let envs: Vec<String> = (0..ROWS_PER_INSERT + 5)
            .map(|i| format!("env-{i:04}"))
            .collect();
        let mut deferred = Deferred::default();
        deferred.event("acme", changed("env-0003"), "again".into());
        deferred.insert(&db).await.unwrap();
        for env in envs.iter().rev() {
            deferred.event("acme", changed(env), format!("{env}/changed"));
        }
        deferred.event("acme", changed("env-0003"), "again".into());
        deferred.insert(&db).await.unwrap();
        let appended: Vec<String> = fixtures::events(&db, "ObservedStateChanged")
            .await
            .into_iter()
            .map(|e| {
                e.payload["environmentId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let mut expected = vec!["env-0003".to_owned()];
        expected.extend(envs.iter().rev().cloned());
        assert_eq!(appended, expected);
    }

    fixtures::on_both_databases!(
        deferred_events_are_appended_in_order_and_once_sqlite,
        deferred_events_are_appended_in_order_and_once_postgres,
        deferred_events_are_appended_in_order_and_once_on
    );
}
