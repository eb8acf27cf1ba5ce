//! A **stand-in** for a Secret Broker (or Config Platform), for tests only: it speaks the
//! `POST {base}/resolve` contract the product's `HttpReferences` adapter is written against
//! (docs/targets.md) on a real HTTP server on loopback, serving the values a test gives it.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::loopback::{Served, serve};

/// The bearer token the stand-in expects.
pub const TOKEN: &str = "stand-in-secret-broker-token";

#[derive(Default)]
struct Held {
    values: HashMap<String, String>,
    asked: Vec<String>,
}

type Shared = Arc<Mutex<Held>>;

/// The stand-in, serving until dropped.
pub struct SecretBrokerStandIn {
    /// Its base URL.
    pub url: String,
    held: Shared,
    _served: Served,
}

impl SecretBrokerStandIn {
    pub async fn start() -> Self {
        let held = Shared::default();
        let app = Router::new()
            .route("/v1/resolve", post(resolve))
            .with_state(held.clone());
        let served = serve(app, "/v1").await;
        Self {
            url: served.url.clone(),
            held,
            _served: served,
        }
    }

    /// Serves `value` for `reference`.
    pub fn hold(&self, reference: &str, value: &str) {
        let mut held = self.held.lock().expect("not poisoned");
        held.values.insert(reference.to_owned(), value.to_owned());
    }

    /// Every reference asked for, in order.
    pub fn asked(&self) -> Vec<String> {
        self.held.lock().expect("not poisoned").asked.clone()
    }
}

/// `POST /v1/resolve {"reference": …}`: 401 without the token, 404 for a reference it does
/// not hold, else 200 `{"value": …}`.
async fn resolve(
    State(held): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut held = held.lock().expect("not poisoned");
    let reference = body["reference"].as_str().unwrap_or_default().to_owned();
    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(format!("Bearer {TOKEN}").as_str());
    if !authorized {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "title": "Unauthorized" })),
        );
    }
    held.asked.push(reference.clone());
    match held.values.get(&reference) {
        Some(value) => (StatusCode::OK, Json(json!({ "value": value }))),
        None => (StatusCode::NOT_FOUND, Json(json!({ "title": "Not Found" }))),
    }
}
