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
}

/// Each dependency readiness checks.
#[derive(Serialize, ToSchema)]
pub struct ReadinessChecks {
    /// The read DB answers a ping.
    database: bool,
    /// The Temporal frontend answers a visibility query within 2 s.
    temporal: bool,
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

/// Readiness: the read DB and the Temporal frontend answer; each is reported (a Kubernetes
/// readiness probe). No token.
#[utoipa::path(operation_id = "readiness", get, path = "/readyz", tag = "operations", responses(
    (status = 200, description = "Ready to serve", body = Readiness),
    (status = 503, description = "A dependency does not answer; `checks` says which", body = Readiness),
))]
async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let (db, temporal) = dependencies(&state).await;
    let ok = db && temporal;
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
        },
    };
    (status, Json(readiness))
}
