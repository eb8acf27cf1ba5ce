//! The outbox relay: publishes `outbox_events` rows, in order, to NATS JetStream.
//!
//! Subject = the event's topic (`provisioning.runs.v1.provisioning-applied` …), body = a
//! CloudEvents 1.0 JSON envelope whose `data` is the payload, `Nats-Msg-Id` = the event id so a
//! re-publish (a relay killed between the ack and marking the row) is dropped by JetStream's
//! duplicate window. A row is marked published only after JetStream acknowledged it: delivery
//! is at least once, and with the dedupe id a consumer sees each event once.
//!
//! On PostgreSQL a batch is claimed with `FOR UPDATE SKIP LOCKED`, so several relays never
//! publish the same row at the same time. When NATS is down the relay backs off and retries;
//! the API and the workflows keep writing to the outbox meanwhile.

use crate::Error;
use chrono::Utc;
use runtime_cloud_nats::NatsOptions;
use runtime_cloud_store::entities::outbox_events as outbox;
use sea_orm::sea_query::{Expr, LockBehavior};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseBackend, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, TransactionTrait, sea_query::LockType,
};
use std::future::Future;
use std::time::Duration;

/// The stream that holds every Runtime Cloud event.
pub const STREAM: &str = "RUNTIME_CLOUD";
/// The subjects it captures: every topic starts with `provisioning.`.
pub const SUBJECTS: &str = "provisioning.>";
/// Rows claimed per batch.
const BATCH: u64 = 100;
/// How long JetStream remembers a message id: longer than any relay outage we retry through.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(2 * 3600);

/// The CloudEvents 1.0 envelope of an outbox row.
pub fn cloud_event(row: &outbox::Model) -> serde_json::Value {
    serde_json::json!({
        "specversion": "1.0",
        "id": row.event_id,
        "source": "runtime-cloud",
        "type": row.topic,
        "subject": row.aggregate_id,
        "time": row.occurred_at.to_rfc3339(),
        "datacontenttype": "application/json",
        "tenantid": row.tenant_id,
        "data": row.payload,
    })
}

/// Connects to NATS and creates (or updates) the stream.
pub async fn connect(nats: &NatsOptions) -> Result<async_nats::jetstream::Context, Error> {
    let client = nats.connect().await.map_err(|e| Error::Nats {
        doing: format!("at {}", nats.url),
        source: e.into(),
    })?;
    let js = async_nats::jetstream::new(client);
    js.get_or_create_stream(async_nats::jetstream::stream::Config {
        name: STREAM.to_owned(),
        subjects: vec![SUBJECTS.to_owned()],
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    })
    .await
    .map_err(|e| Error::Nats {
        doing: format!("stream {STREAM}"),
        source: e.into(),
    })?;
    Ok(js)
}

/// Publishes one batch of unpublished rows in `seq` order; returns how many were published.
/// Every row JetStream acknowledged is marked, even when another of the batch failed.
///
/// The batch's messages are all sent before any acknowledgement is awaited (JetStream stores a
/// connection's messages in the order they arrive), and the acknowledged rows are marked with
/// one statement: a round trip per row each way was the relay's cost when a sweep writes a
/// fleet's posture findings at once. A message refused while later ones of its batch were
/// stored is published again after them: order holds except across such a failure.
pub async fn publish_batch(
    db: &DatabaseConnection,
    js: &async_nats::jetstream::Context,
) -> Result<usize, Error> {
    let txn = db.begin().await?;
    let mut select = outbox::Entity::find()
        .filter(outbox::Column::PublishedAt.is_null())
        .order_by_asc(outbox::Column::Seq)
        .limit(BATCH);
    if db.get_database_backend() == DatabaseBackend::Postgres {
        select = select.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
    }
    let rows = select.all(&txn).await?;
    let mut failure = None;
    let mut sent = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", row.event_id.as_str());
        let body = bytes::Bytes::from(cloud_event(row).to_string());
        match js
            .publish_with_headers(row.topic.clone(), headers, body)
            .await
        {
            Ok(ack) => sent.push((row, ack)),
            Err(e) => {
                failure = Some(Error::Nats {
                    doing: format!("publishing {}", row.event_id),
                    source: e.into(),
                });
                break;
            }
        }
    }
    let mut acked = Vec::with_capacity(sent.len());
    for (row, ack) in sent {
        match ack.await {
            Err(e) => {
                failure.get_or_insert(Error::Nats {
                    doing: format!("publishing {}", row.event_id),
                    source: e.into(),
                });
            }
            // Expected only after a relay died between the ack and marking the row; seen
            // otherwise, two relays published one row.
            Ok(ack) if ack.duplicate => {
                tracing::warn!(event_id = %row.event_id, "event was already in JetStream; the re-publish was deduplicated");
                acked.push(row.seq);
            }
            Ok(_) => acked.push(row.seq),
        }
    }
    if !acked.is_empty() {
        let now = Utc::now();
        outbox::Entity::update_many()
            .col_expr(outbox::Column::PublishedAt, Expr::value(Some(now)))
            .col_expr(outbox::Column::UpdatedAt, Expr::value(now))
            .filter(outbox::Column::Seq.is_in(acked.iter().copied()))
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    match failure {
        Some(e) => Err(e),
        None => Ok(acked.len()),
    }
}

/// Runs the relay until `shutdown`: connect (retrying), then publish batches, polling every
/// `poll` when the outbox is empty and backing off (up to 30 s) while NATS fails.
pub async fn run(
    db: DatabaseConnection,
    nats: NatsOptions,
    poll: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(200);
    let mut js = None;
    loop {
        let wait = match &js {
            None => match connect(&nats).await {
                Ok(ctx) => {
                    tracing::info!(url = %nats.url, stream = STREAM, "outbox relay connected");
                    js = Some(ctx);
                    backoff = Duration::from_millis(200);
                    Duration::ZERO
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "outbox relay cannot reach NATS");
                    backoff
                }
            },
            Some(ctx) => match publish_batch(&db, ctx).await {
                Ok(0) => poll,
                Ok(n) => {
                    tracing::debug!(published = n, "outbox relay published a batch");
                    backoff = Duration::from_millis(200);
                    Duration::ZERO
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "outbox relay failed; events stay in the outbox");
                    backoff
                }
            },
        };
        if wait == backoff {
            backoff = (backoff * 2).min(Duration::from_secs(30));
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
