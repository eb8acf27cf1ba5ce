//! Liveness and readiness: no token needed.

use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(live))
        .route("/readyz", get(ready))
}

/// The process answers.
async fn live() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// The read DB and the Temporal frontend answer; each is reported.
async fn ready(State(state): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    let db = state.db.ping().await.is_ok();
    let temporal = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        state
            .temporal
            .count_workflows("WorkflowType='ProvisioningRun'", Default::default()),
    )
    .await
    .is_ok_and(|r| r.is_ok());
    let ok = db && temporal;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(
            json!({ "status": if ok { "ok" } else { "unavailable" }, "checks": { "database": db, "temporal": temporal } }),
        ),
    )
}
