//! A **stand-in** for a PolicyEngineService with OPA's REST data API, for tests only (no OPA
//! binary can be had on these machines): `POST /v1/data/runtime_cloud` with `{"input": …}`,
//! answered `{"result": {"deny": [...], "allow": bool, "revision": "…"}}` as OPA answers a
//! data query for a package. Its rule is fixed by the test: deny every plan of a workload at a
//! banned version. It records every input it was asked about.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

use super::loopback::{Served, serve};

/// The stand-in, serving until dropped.
pub struct OpaStandIn {
    /// Its base URL, for `RUNTIME_CLOUD_POLICY_URL`.
    pub url: String,
    asked: Arc<Mutex<Vec<Value>>>,
    _served: Served,
}

/// The version it denies.
pub const BANNED: &str = "6.6.6";

impl OpaStandIn {
    pub async fn start() -> Self {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/data/runtime_cloud", post(data))
            .with_state(asked.clone());
        let served = serve(app, "").await;
        Self {
            url: served.url.clone(),
            asked,
            _served: served,
        }
    }

    /// Every input asked about, oldest first.
    pub fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

async fn data(State(asked): State<Arc<Mutex<Vec<Value>>>>, Json(body): Json<Value>) -> Json<Value> {
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
    asked.lock().unwrap_or_else(|e| e.into_inner()).push(input);
    Json(json!({ "result": { "deny": banned, "allow": false, "revision": "bundle-42" } }))
}
