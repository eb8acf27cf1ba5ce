//! A **stand-in** for RunControlService, for tests only: it speaks the claim contract the
//! product's adapter (`activities/src/run_control.rs`) is written against, documented in
//! docs/operations.md ("RunControlService"), on a real HTTP server on loopback. It holds the
//! approvals a test gives it and spends each on the first run that claims it.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::loopback::{Served, serve};

/// The bearer token the stand-in expects.
pub const TOKEN: &str = "stand-in-run-control-token";

#[derive(Default)]
struct Held {
    approvals: HashMap<String, Value>,
    claims: Vec<Value>,
}

type Shared = Arc<Mutex<Held>>;

/// The stand-in, serving until dropped.
pub struct RunControlStandIn {
    /// Its base URL, for `RUNTIME_CLOUD_RUN_CONTROL_URL`.
    pub url: String,
    held: Shared,
    _served: Served,
}

impl RunControlStandIn {
    pub async fn start() -> Self {
        let held = Shared::default();
        let app = Router::new()
            .route("/v1/approvals/{approval_id}/claims", post(claim))
            .with_state(held.clone());
        let served = serve(app, "/v1").await;
        Self {
            url: served.url.clone(),
            held,
            _served: served,
        }
    }

    /// Holds `approval` (the JSON of `GET /factory/approvals/{approvalId}`).
    pub fn hold(&self, approval: Value) {
        let id = approval["approvalId"]
            .as_str()
            .expect("approvalId")
            .to_owned();
        self.held
            .lock()
            .expect("not poisoned")
            .approvals
            .insert(id, approval);
    }

    /// Every claim received, in order: `{"authorization": …, "body": …}`.
    pub fn claims(&self) -> Vec<Value> {
        self.held.lock().expect("not poisoned").claims.clone()
    }
}

/// `POST /v1/approvals/{approvalId}/claims`: 401 without the token, 404 for an approval it
/// does not hold, 409 when another run spent it, else 200 with the approval spent on the run.
async fn claim(
    State(held): State<Shared>,
    Path(approval_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut held = held.lock().expect("not poisoned");
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    held.claims
        .push(json!({ "authorization": authorization, "body": body }));
    if authorization != format!("Bearer {TOKEN}") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "title": "Unauthorized" })),
        );
    }
    let run = body["runId"].clone();
    let Some(approval) = held.approvals.get_mut(&approval_id) else {
        return (StatusCode::NOT_FOUND, Json(json!({ "title": "Not Found" })));
    };
    if !approval["spentByRunId"].is_null() && approval["spentByRunId"] != run {
        return (StatusCode::CONFLICT, Json(json!({ "title": "Conflict" })));
    }
    approval["spentByRunId"] = run;
    approval["spentAt"] = json!(chrono::Utc::now());
    (StatusCode::OK, Json(approval.clone()))
}
