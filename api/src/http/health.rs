//! Liveness and readiness: no token needed.

use crate::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(live))
        .routes(routes!(ready))
}

/// `{"status":"ok"}`.
#[derive(Serialize, ToSchema)]
pub struct Liveness {
    /// Always `ok`.
    status: &'static str,
}

/// Readiness and what it checked.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    /// `ok` or `unavailable`.
    status: &'static str,
    checks: ReadinessChecks,
    /// Why NATS refuses the inbound consumer (a credential, a TLS handshake), when it does.
    #[serde(rename = "natsRefusal", skip_serializing_if = "Option::is_none")]
    nats_refusal: Option<String>,
}

/// Each dependency readiness checks.
#[derive(Serialize, ToSchema)]
pub struct ReadinessChecks {
    /// The read DB answers a ping.
    database: bool,
    /// The Temporal frontend answers a visibility query within 2 s.
    temporal: bool,
    /// NATS accepts the inbound consumer's credential and TLS (absent without NATS; a
    /// network outage does not make the API unready, a refused credential does).
    #[serde(skip_serializing_if = "Option::is_none")]
    nats: Option<bool>,
}

/// Whether the read DB answers a ping and the Temporal frontend a visibility query within 2 s.
pub(crate) async fn dependencies(state: &AppState) -> (bool, bool) {
    let db = state.db.ping().await.is_ok();
    let temporal = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        state
            .temporal
            .count_workflows("WorkflowType='ProvisioningRun'", Default::default()),
    )
    .await
    .is_ok_and(|r| r.is_ok());
    (db, temporal)
}

/// Liveness: the process answers (a Kubernetes liveness probe). No token.
#[utoipa::path(operation_id = "liveness", get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is alive", body = Liveness)))]
async fn live() -> Json<Liveness> {
    Json(Liveness { status: "ok" })
}

/// Readiness: the read DB and the Temporal frontend answer, and NATS (when configured) does not
/// refuse the product's credential; each is reported (a Kubernetes readiness probe). No token.
#[utoipa::path(operation_id = "readiness", get, path = "/readyz", tag = "operations", responses(
    (status = 200, description = "Ready to serve", body = Readiness),
    (status = 503, description = "A dependency does not answer; `checks` says which", body = Readiness),
))]
async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let (db, temporal) = dependencies(&state).await;
    let nats_refusal = state.nats_refusal.reason();
    let ok = db && temporal && nats_refusal.is_none();
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let readiness = Readiness {
        status: if ok { "ok" } else { "unavailable" },
        checks: ReadinessChecks {
            database: db,
            temporal,
            nats: state.nats_configured.then_some(nats_refusal.is_none()),
        },
        nats_refusal,
    };
    (status, Json(readiness))
}
