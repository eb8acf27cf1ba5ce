//! `outbox_events`: integration events, appended in the transaction of the change they
//! report. The relay (`runtime_cloud_activities::outbox_relay`) publishes them in `seq` order.

use crate::Error;
use crate::entities::outbox_events;
use chrono::Utc;
use runtime_cloud_models::events::OutboxEvent;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveValue::Set, ConnectionTrait, EntityTrait};
use uuid::Uuid;

/// Namespace of the deterministic event ids: a retried projection writes the same id.
const EVENT_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2b7e_9a41_4c55_8d0e_52b4_a7c3_19e0);

/// The event id of `event_type` about `aggregate_id`: the same on every retry.
pub fn event_id(aggregate_id: &str, event_type: &str) -> String {
    Uuid::new_v5(
        &EVENT_NAMESPACE,
        format!("{aggregate_id}/{event_type}").as_bytes(),
    )
    .to_string()
}

/// Appends an event to the outbox on `db` (the caller's transaction) unless an event with
/// this id is already there (a retried projection): one statement, the unique `event_id`
/// deciding, rather than a read and an insert.
pub async fn append(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    event: OutboxEvent,
    event_id: String,
) -> Result<(), Error> {
    // `exec_without_returning` answers how many rows were inserted, none on a conflict,
    // where `exec` would call that an error.
    outbox_events::Entity::insert(row(tenant_id, event, event_id, Utc::now()))
        .on_conflict(
            OnConflict::column(outbox_events::Column::EventId)
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Removes the events of `aggregate_id` not yet published (a run taken back in the
/// transaction that deletes its row).
pub async fn withdraw(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    aggregate_id: &str,
) -> Result<(), Error> {
    use sea_orm::{ColumnTrait, QueryFilter};
    outbox_events::Entity::delete_many()
        .filter(outbox_events::Column::TenantId.eq(tenant_id))
        .filter(outbox_events::Column::AggregateId.eq(aggregate_id))
        .filter(outbox_events::Column::PublishedAt.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// The row of an event not yet published; `seq` comes from the database.
pub(crate) fn row(
    tenant_id: &str,
    event: OutboxEvent,
    event_id: String,
    now: chrono::DateTime<Utc>,
) -> outbox_events::ActiveModel {
    outbox_events::ActiveModel {
        event_id: Set(event_id),
        tenant_id: Set(tenant_id.to_owned()),
        event_type: Set(event.event_type.to_owned()),
        topic: Set(event.topic.to_owned()),
        aggregate_id: Set(event.aggregate_id),
        payload: Set(event.payload),
        occurred_at: Set(now),
        published_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
}
