//! A **stand-in** for Prometheus' HTTP API, for tests only (no Prometheus can be had on these
//! machines): `GET /api/v1/query?query=…` answered in the envelope of
//! `tests/fixtures/prometheus/` (a `vector` of one sample per environment the query names in
//! its `environment=~"…"` matcher, or the `error` envelope with HTTP 503 while it is told to
//! fail). It does not evaluate PromQL: the test sets each environment's value. It records
//! every query it was asked.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::loopback::{Served, serve};

#[derive(Default)]
struct Answers {
    values: BTreeMap<String, f64>,
    failing: bool,
    asked: Vec<String>,
}

/// The stand-in, serving until dropped.
pub struct PrometheusStandIn {
    /// Its base URL, for `RUNTIME_CLOUD_PROMETHEUS_URL`.
    pub url: String,
    answers: Arc<Mutex<Answers>>,
    _served: Served,
}

impl PrometheusStandIn {
    pub async fn start() -> Self {
        let answers = Arc::new(Mutex::new(Answers::default()));
        let app = Router::new()
            .route("/api/v1/query", get(query))
            .with_state(answers.clone());
        let served = serve(app, "").await;
        Self {
            url: served.url.clone(),
            answers,
            _served: served,
        }
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of `environment`'s series from now on (none: it has no series).
    pub fn set(&self, environment: &str, value: f64) {
        self.answers().values.insert(environment.to_owned(), value);
    }

    /// Answer every query with an error (as a Prometheus that times out does) or not.
    pub fn fail(&self, failing: bool) {
        self.answers().failing = failing;
    }

    /// Every query asked, oldest first.
    pub fn asked(&self) -> Vec<String> {
        self.answers().asked.clone()
    }
}

async fn query(
    State(answers): State<Arc<Mutex<Answers>>>,
    Query(params): Query<HashMap<String, String>>,
) -> (StatusCode, Json<Value>) {
    let Some(q) = params.get("query").cloned() else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({ "status": "error", "errorType": "bad_data",
                         "error": "invalid parameter \"query\": 1:1: parse error: no expression found in input" })),
        );
    };
    let mut answers = answers.lock().unwrap_or_else(|e| e.into_inner());
    answers.asked.push(q.clone());
    if answers.failing {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "error", "errorType": "timeout",
                         "error": "query timed out in expression evaluation" })),
        );
    }
    // The environments of the matcher `environment=~"a|b"`, unescaped as PromQL would.
    let named: Vec<String> = q
        .split_once("environment=~\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(alternation, _)| {
            alternation
                .split('|')
                .map(|e| e.replace(r"\\.", "."))
                .collect()
        })
        .unwrap_or_default();
    let result: Vec<Value> = named
        .iter()
        .filter_map(|env| {
            let value = answers.values.get(env)?;
            Some(json!({
                "metric": { "__name__": "error_ratio", "environment": env },
                "value": [1435781451.781, value.to_string()],
            }))
        })
        .collect();
    (
        StatusCode::OK,
        Json(json!({ "status": "success", "data": { "resultType": "vector", "result": result } })),
    )
}
