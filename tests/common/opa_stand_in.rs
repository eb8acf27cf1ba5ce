//! A **stand-in** for a PolicyEngineService with OPA's REST data API, for tests only (no OPA
//! binary can be had on these machines): `POST /v1/data/runtime_cloud` with `{"input": …}`,
//! answered `{"result": {"deny": [...], "allow": bool, "revision": "…"}}` as OPA answers a
//! data query for a package. Its rule is fixed by the test: deny every plan of a workload at a
//! banned version. It records every input it was asked about, and can be made to answer 503
//! (an engine that cannot answer).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::loopback::{Served, serve};

/// The stand-in, serving until dropped.
pub struct OpaStandIn {
    /// Its base URL, for `RUNTIME_CLOUD_POLICY_URL`.
    pub url: String,
    state: Arc<Asked>,
    _served: Served,
}

#[derive(Default)]
struct Asked {
    inputs: Mutex<Vec<Value>>,
    /// Answers 503 while set.
    down: AtomicBool,
    /// Requests answered 503.
    refused: AtomicUsize,
}

/// The version it denies.
pub const BANNED: &str = "6.6.6";

impl OpaStandIn {
    pub async fn start() -> Self {
        let state = Arc::new(Asked::default());
        let app = Router::new()
            .route("/v1/data/runtime_cloud", post(data))
            .with_state(state.clone());
        let served = serve(app, "").await;
        Self {
            url: served.url.clone(),
            state,
            _served: served,
        }
    }

    /// Every input answered, oldest first.
    pub fn asked(&self) -> Vec<Value> {
        self.state
            .inputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Answers 503 to every request (`true`) or decides again (`false`).
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// How many requests it answered 503.
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }
}

async fn data(
    State(state): State<Arc<Asked>>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, StatusCode> {
    if state.down.load(Ordering::SeqCst) {
        state.refused.fetch_add(1, Ordering::SeqCst);
        return Err(StatusCode::SERVICE_UNAVAILABLE);
    }
    let input = body["input"].clone();
    let banned: Vec<String> = input["specification"]["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["version"] == BANNED)
        .map(|w| {
            format!(
                "{} {BANNED} is banned",
                w["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    state
        .inputs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(input);
    Ok(Json(
        json!({ "result": { "deny": banned, "allow": false, "revision": "bundle-42" } }),
    ))
}
