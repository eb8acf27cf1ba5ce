//! Inbound events from NATS JetStream: `PromotionApproved`, `EnvironmentCreated` and
//! `ApprovalDecided` (`models::inbound`), consumed by the API process — the product's entry
//! point that starts and signals workflows — when `NATS_URL` is set.
//!
//! - **Durable, explicit ack**: a pull consumer [`CONSUMER`] on stream [`STREAM`]; a message is
//!   acked only once its effect is recorded (and its workflow started or its signal sent).
//! - **Once**: the inbox table (`store::inbox`) keys every event by its CloudEvents `id`; a
//!   redelivered event (a crash before the ack, a re-publish) writes nothing again and only
//!   finishes what is left (start the run, send the signal).
//! - **Poison**: an event that is not a CloudEvents 1.0 JSON envelope, of an unknown type, whose
//!   `data` does not match its JSON Schema (`schemas/inbound/`), or about an environment or run
//!   that does not exist, goes at once to `runtime-cloud.dead-letter.<subject>` with the reason in
//!   the `Runtime-Cloud-Reason` header; one that keeps failing for another reason (the database
//!   or Temporal away) is retried with backoff and dead-lettered after [`MAX_ATTEMPTS`].
//! - **Proof**: an approval an event carries (`PromotionApproved` in production,
//!   `ApprovalDecided`) is verified before anything is declared or planned ([`verify`], with
//!   the keys of [`sources`]); an unsigned, badly signed, expired, replayed or wrong-tenant one
//!   goes to the dead letters with the reason, counted by
//!   `connectsoft_factory_runtime_inbound_refused_total{type,reason}`.
//! - **Lag**: the consumer's pending and unacknowledged messages, read after every fetch, are
//!   the `connectsoft_factory_runtime_inbox_lag` gauge; the age of the oldest of them (the one
//!   after the consumer's ack floor) is the fleet host's
//!   `connectsoft_factory_fleet_host_inbox_lag{module="inventory"}` (instances are registered
//!   by `EnvironmentCreated`).

pub mod names;
pub mod sign;
pub mod sources;
pub mod verify;

pub use names::{CONSUMER, DEAD_LETTER_PREFIX, DEAD_LETTER_STREAM, STREAM};

use crate::AppState;
use async_nats::jetstream::{self, AckKind, consumer::pull, stream};
use futures::StreamExt;
use runtime_cloud_models::inbound::proof::Refused;
use runtime_cloud_models::inbound::{Inbound, TYPES};
use runtime_cloud_nats::NatsOptions;
use runtime_cloud_store::inbox::{self, Effect};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use verify::Verifier;

/// Deliveries of a message that keeps failing before it is dead-lettered.
pub const MAX_ATTEMPTS: i64 = 5;

/// What became of one message.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Its effect is recorded and delivered (or was, before).
    Done,
    /// Failed for a reason that may pass (the database, Temporal).
    Retry(String),
    /// It can never be handled: to the dead letters with the reason.
    Poison(String),
}

/// Why NATS refused the consumer (a credential, a TLS handshake), while it does: readiness
/// reports it. `None` while the consumer is connected, or failing for a reason that may pass.
#[derive(Debug, Default)]
pub struct NatsRefusal(std::sync::Mutex<Option<String>>);

impl NatsRefusal {
    fn set(&self, reason: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = reason;
    }

    /// The reason, while NATS refuses.
    pub fn reason(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The JSON Schemas of the inbound types, compiled once.
struct Schemas(Vec<(&'static str, jsonschema::Validator)>);

impl Schemas {
    fn new() -> Self {
        let compiled = TYPES
            .iter()
            .map(|(ty, text)| {
                let schema: serde_json::Value =
                    serde_json::from_str(text).expect("the inbound schemas are JSON");
                let validator =
                    jsonschema::validator_for(&schema).expect("the inbound schemas compile");
                (*ty, validator)
            })
            .collect();
        Self(compiled)
    }

    /// Why `data` is not a valid event of `event_type`, if it is not.
    fn check(&self, event_type: &str, data: &serde_json::Value) -> Result<(), String> {
        let Some((_, validator)) = self.0.iter().find(|(t, _)| *t == event_type) else {
            return Err(format!("unknown event type `{event_type}`"));
        };
        let errors: Vec<String> = validator
            .iter_errors(data)
            .map(|e| format!("{}: {e}", e.instance_path))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "data does not match the {event_type} schema: {}",
                errors.join("; ")
            ))
        }
    }
}

/// Consumes inbound events until `shutdown`, reconnecting with backoff while NATS is away.
pub async fn run(
    state: AppState,
    nats: NatsOptions,
    verifier: Arc<Verifier>,
    lag: Arc<AtomicI64>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let schemas = Schemas::new();
    let mut backoff = Duration::from_millis(200);
    loop {
        let round = async {
            let client = nats.connect().await.map_err(|e| {
                // A refused credential or TLS handshake keeps the API unready, saying why.
                state
                    .nats_refusal
                    .set(e.misconfigured.then(|| e.to_string()));
                e.to_string()
            })?;
            state.nats_refusal.set(None);
            let (js, consumer) = connect(client).await?;
            tracing::info!(url = %nats.url, stream = STREAM, consumer = CONSUMER, "inbound events consumer connected");
            backoff = Duration::from_millis(200);
            loop {
                let mut batch = consumer
                    .fetch()
                    .max_messages(16)
                    .expires(Duration::from_secs(1))
                    .messages()
                    .await
                    .map_err(|e| e.to_string())?;
                while let Some(message) = batch.next().await {
                    let message = message.map_err(|e| e.to_string())?;
                    settle(&state, &js, &schemas, &verifier, message).await?;
                }
                if let Ok(info) = consumer.clone().info().await {
                    let waiting = info.num_pending as i64 + info.num_ack_pending as i64;
                    lag.store(waiting, Ordering::Relaxed);
                    let oldest = match waiting {
                        0 => Some(0),
                        _ => oldest_waiting(&js, info.ack_floor.stream_sequence + 1).await,
                    };
                    if let Some(oldest) = oldest {
                        state.inbox_oldest.store(oldest, Ordering::Relaxed);
                    }
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), String>(())
        };
        tokio::select! {
            _ = &mut shutdown => return,
            result = round => {
                if let Err(e) = result {
                    tracing::warn!(error = %e, retry_in = ?backoff, "inbound events consumer lost NATS");
                }
            }
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// When the message at `sequence` (the oldest the consumer has not acknowledged) was
/// published, in Unix milliseconds; None when it cannot be read (removed by the stream's
/// limits, NATS away): the last value stands.
async fn oldest_waiting(js: &jetstream::Context, sequence: u64) -> Option<i64> {
    let stream = js.get_stream(STREAM).await.ok()?;
    let message = stream.get_raw_message(sequence).await.ok()?;
    Some((message.time.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// Creates the streams and the consumer when missing.
async fn connect(
    client: async_nats::Client,
) -> Result<
    (
        jetstream::Context,
        jetstream::consumer::Consumer<pull::Config>,
    ),
    String,
> {
    let js = jetstream::new(client);
    let subjects = TYPES.iter().map(|(t, _)| t.to_string()).collect();
    let inbound = js
        .get_or_create_stream(stream::Config {
            name: STREAM.to_owned(),
            subjects,
            duplicate_window: Duration::from_secs(2 * 3600),
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    js.get_or_create_stream(stream::Config {
        name: DEAD_LETTER_STREAM.to_owned(),
        subjects: vec![format!("{DEAD_LETTER_PREFIX}.>")],
        ..Default::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let consumer = inbound
        .get_or_create_consumer(
            CONSUMER,
            pull::Config {
                durable_name: Some(CONSUMER.to_owned()),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok((js, consumer))
}

/// Handles one message and acks, naks or dead-letters it. An error only when NATS itself
/// fails (the message is redelivered after its ack wait).
async fn settle(
    state: &AppState,
    js: &jetstream::Context,
    schemas: &Schemas,
    verifier: &Verifier,
    message: jetstream::Message,
) -> Result<(), String> {
    let attempts = message.info().map(|i| i.delivered).unwrap_or(1);
    let verdict = handle(state, schemas, verifier, &message.payload).await;
    let poison = match verdict {
        Verdict::Done => None,
        Verdict::Poison(why) => Some(why),
        Verdict::Retry(why) if attempts >= MAX_ATTEMPTS => {
            Some(format!("failed {attempts} times, last: {why}"))
        }
        Verdict::Retry(why) => {
            tracing::warn!(attempts, reason = %why, "inbound event failed; retrying");
            let delay = Duration::from_millis(500 * (1 << attempts.clamp(0, 6)));
            return message
                .ack_with(AckKind::Nak(Some(delay)))
                .await
                .map_err(|e| e.to_string());
        }
    };
    if let Some(why) = poison {
        tracing::warn!(subject = %message.subject, reason = %why, "inbound event dead-lettered");
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Runtime-Cloud-Reason", why.as_str());
        headers.insert("Runtime-Cloud-Attempts", attempts.to_string().as_str());
        if let Ok(info) = message.info() {
            let id = format!("dead-letter-{}", info.stream_sequence);
            headers.insert("Nats-Msg-Id", id.as_str());
        }
        let subject = format!("{DEAD_LETTER_PREFIX}.{}", message.subject);
        js.publish_with_headers(subject, headers, message.payload.clone())
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
    }
    message.ack().await.map_err(|e| e.to_string())
}

/// What one event does.
async fn handle(
    state: &AppState,
    schemas: &Schemas,
    verifier: &Verifier,
    payload: &[u8],
) -> Verdict {
    let envelope: serde_json::Value = match serde_json::from_slice(payload) {
        Ok(v) => v,
        Err(e) => return Verdict::Poison(format!("not a CloudEvents JSON envelope: {e}")),
    };
    let (Some("1.0"), Some(id), Some(event_type)) = (
        envelope["specversion"].as_str(),
        envelope["id"].as_str().filter(|s| !s.is_empty()),
        envelope["type"].as_str(),
    ) else {
        return Verdict::Poison(
            "not a CloudEvents 1.0 envelope: `specversion` 1.0, `id` and `type` are required"
                .into(),
        );
    };
    let data = envelope["data"].clone();
    if let Err(why) = schemas.check(event_type, &data) {
        return Verdict::Poison(why);
    }
    let event = match Inbound::read(event_type, data.clone()) {
        Ok(e) => e,
        Err(why) => return Verdict::Poison(why),
    };
    let refused = |refused: Refused| {
        state
            .inbound_refusals
            .count(event_type, refused.reason.as_str());
        Verdict::Poison(refused.to_string())
    };
    // A redelivery finishes what was recorded; a new event's approval is proven first.
    let proof = match inbox::seen(&state.db, id).await {
        Ok(true) => None,
        Ok(false) => {
            let class = match environment_class(state, &event).await {
                Ok(class) => class,
                Err(e) => return Verdict::Retry(e.to_string()),
            };
            match verifier.check(event_type, &data, &event, class).await {
                Ok(proof) => proof,
                Err(why) => return refused(why),
            }
        }
        Err(e) => return Verdict::Retry(e.to_string()),
    };
    let received = match inbox::receive(
        &state.db,
        id,
        event_type,
        &event,
        proof.as_ref(),
        &state.options,
    )
    .await
    {
        Ok(r) => r,
        Err(runtime_cloud_store::Error::Refused(why)) => return refused(why),
        Err(
            e @ (runtime_cloud_store::Error::Missing { .. }
            | runtime_cloud_store::Error::Invalid(_)),
        ) => return Verdict::Poison(e.to_string()),
        Err(e) => return Verdict::Retry(e.to_string()),
    };
    if received.redelivered {
        tracing::info!(event_id = %id, "inbound event seen before; finishing what is left");
    }
    if received.delivered {
        return Verdict::Done;
    }
    let delivered = match received.effect {
        Effect::Nothing => Ok(()),
        Effect::Start { run } => {
            let run_id = run.run_id.clone();
            crate::http::start_run(state, *run).await.map(|()| {
                tracing::info!(event_id = %id, %run_id, "inbound event planned a run");
            })
        }
        Effect::Signal { run_id, approval } => {
            match crate::http::signal_approval(state, &run_id, approval).await {
                // The run ended since: the decision has nothing left to decide.
                Err(crate::Error::Conflict(why)) => return Verdict::Poison(why),
                other => other,
            }
        }
    };
    if let Err(e) = delivered {
        return Verdict::Retry(e.to_string());
    }
    if let Inbound::EnvironmentCreated(created) = &event {
        // An ephemeral environment's lifetime, as the API starts it (a start that fails here
        // is made by the next worker start).
        match runtime_cloud_store::environments::find(
            &state.db,
            &created.tenant_id,
            &created.environment_id,
        )
        .await
        {
            Ok(Some(env)) => crate::http::start_lifetime(state, &env).await,
            Ok(None) => {}
            Err(e) => return Verdict::Retry(e.to_string()),
        }
    }
    match inbox::delivered(&state.db, id).await {
        Ok(()) => Verdict::Done,
        Err(e) => Verdict::Retry(e.to_string()),
    }
}

/// The class of the environment a promotion is for (whether its approval must be proven);
/// `None` for other events, and for an environment that does not exist.
async fn environment_class(
    state: &AppState,
    event: &Inbound,
) -> Result<Option<runtime_cloud_models::EnvironmentClass>, runtime_cloud_store::Error> {
    let Inbound::PromotionApproved(e) = event else {
        return Ok(None);
    };
    let env =
        runtime_cloud_store::environments::find(&state.db, &e.tenant_id, &e.environment_id).await?;
    Ok(env.map(|env| env.class))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::inbound::{
        APPROVAL_DECIDED, ApprovalDecided, DesiredState, ENVIRONMENT_CREATED, EnvironmentCreated,
        PROMOTION_APPROVED, PromotionApproval, PromotionApproved,
    };
    use runtime_cloud_models::{ApprovalDecision, EnvironmentClass, SpecificationKind, Workload};

    fn desired() -> DesiredState {
        DesiredState {
            kind: SpecificationKind::Environment,
            program_ref: "git://infra//shop".into(),
            program_version: "a1b2c3d4".into(),
            release_id: None,
            strategy: None,
            config_refs: Default::default(),
            secret_refs: [("db".to_owned(), "secretbroker://shop/db".to_owned())].into(),
            workloads: vec![Workload {
                name: "api".into(),
                kind: "deployment".into(),
                version: "1.0.0".into(),
                replicas: 2,
                config_refs: Default::default(),
                secret_refs: Default::default(),
            }],
        }
    }

    /// The published schemas and the types the handlers read agree: what the types write, the
    /// schemas accept, and the types read back.
    #[test]
    fn the_schemas_accept_what_the_types_write() {
        let schemas = Schemas::new();
        let documents = [
            (
                ENVIRONMENT_CREATED,
                serde_json::to_value(EnvironmentCreated {
                    tenant_id: "acme".into(),
                    environment_id: "dev-eu".into(),
                    project_id: "shop".into(),
                    class: EnvironmentClass::NonProduction,
                    target: None,
                    mode: None,
                    specification: Some(desired()),
                    labels: [("region".to_owned(), "eu-west-1".to_owned())].into(),
                    customer_tenant_id: Some("cust-42".into()),
                    ttl: Some("72h".into()),
                    expires_at: None,
                }),
            ),
            (
                PROMOTION_APPROVED,
                serde_json::to_value(PromotionApproved {
                    promotion_id: "p1".into(),
                    tenant_id: "acme".into(),
                    environment_id: "prod".into(),
                    specification: desired(),
                    approval: PromotionApproval {
                        granted_by: "alice".into(),
                        granted_by_roles: vec!["Operator".into()],
                        reason: "release 7".into(),
                        expires_at: Some(chrono::Utc::now()),
                    },
                    signature: Some("eyJhbGciOiJFUzI1NiJ9.e30.c2ln".into()),
                }),
            ),
            (
                APPROVAL_DECIDED,
                serde_json::to_value(ApprovalDecided {
                    tenant_id: "acme".into(),
                    provisioning_run_id: "r1".into(),
                    decision: ApprovalDecision::Approve,
                    decided_by: "bob".into(),
                    decided_by_roles: vec![],
                    reason: String::new(),
                    inputs_hash: format!("sha256:{}", "ab".repeat(32)),
                    signature: None,
                    approval_id: Some("rc-approval-1".into()),
                }),
            ),
        ];
        for (ty, doc) in documents {
            let doc = doc.unwrap();
            schemas
                .check(ty, &doc)
                .unwrap_or_else(|e| panic!("{ty}: {e}"));
            Inbound::read(ty, doc).unwrap_or_else(|e| panic!("{ty}: {e}"));
        }
    }

    #[test]
    fn a_document_the_schema_refuses_names_where() {
        let schemas = Schemas::new();
        let why = schemas
            .check(
                APPROVAL_DECIDED,
                &serde_json::json!({ "tenantId": "acme", "provisioningRunId": "r1",
                                     "decision": "maybe", "decidedBy": "bob", "inputsHash": "x" }),
            )
            .unwrap_err();
        assert!(
            why.contains("/decision") && why.contains("/inputsHash"),
            "{why}"
        );
        let unknown = schemas
            .check("x.y.v1.z", &serde_json::json!({}))
            .unwrap_err();
        assert!(unknown.contains("unknown event type"), "{unknown}");
    }
}
