//! The router: one module per resource, merged here with the shared layers.
//!
//! Every API route is registered through `utoipa_axum`'s `routes!`, which adds the handler's
//! `#[utoipa::path]` to the OpenAPI document in the same step: served and documented routes
//! cannot diverge. [`router`] splits the two and hands the document to [`openapi`] to serve.
//! The console (`/console`, [`console`]) is not the API: its page, files and sign-in are plain
//! axum routes beside it.

mod adoptions;
mod approvals;
mod capacity;
mod codec;
mod console;
mod costs;
mod drift_rules;
mod environments;
mod fleet;
mod health;
mod inventory;
mod lifetimes;
pub mod metrics;
mod offboarding;
mod pagination;
mod proposals;
mod quarantines;
mod rollouts;
mod run_logs;
mod runs;
mod specifications;
mod windows;

use crate::AppState;
use crate::error::problem_fallback;
use crate::openapi::{self, ApiDoc};
use axum::extract::DefaultBodyLimit;
use axum::{Extension, Router};
use std::future::Future;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) use lifetimes::start_lifetime;
pub(crate) use runs::{forget_start, signal_approval, start as start_run};

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Every HTTP route with its documentation.
fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(health::router())
        .merge(environments::router())
        .merge(lifetimes::router())
        .merge(specifications::router())
        .merge(runs::router())
        .merge(run_logs::router())
        .merge(approvals::router())
        .merge(inventory::router())
        .merge(drift_rules::router())
        .merge(windows::router())
        .merge(fleet::router())
        .merge(costs::router())
        .merge(rollouts::router())
        .merge(offboarding::router())
        .merge(capacity::router())
        .merge(proposals::router())
        .merge(adoptions::router())
        .merge(quarantines::router())
        .merge(metrics::router())
        .merge(codec::router())
        .routes(routes!(openapi::openapi_json))
        .routes(routes!(openapi::docs))
}

/// Every route of the API: HTTP and gRPC on one port.
pub fn router(state: AppState) -> Router {
    let (http, document) = api_router().split_for_parts();
    Router::new()
        .merge(crate::grpc::routes(state.clone()).with_state(()))
        .merge(http)
        .merge(console::router())
        .layer(Extension(openapi::Document::new(&document)))
        .fallback(problem_fallback)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` resolves.
/// Serves the internal listener (`/metrics` without a token) until `shutdown`.
pub async fn serve_internal(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, metrics::internal_router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
