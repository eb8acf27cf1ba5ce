//! The router: one module per resource, merged here with the shared layers.

pub(crate) mod environments;
mod health;
mod inventory;
pub mod metrics;
mod pagination;
mod proposals;
mod runs;
mod specifications;

use crate::AppState;
use crate::error::problem_fallback;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use std::future::Future;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Every route of the API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(crate::grpc::routes(state.clone()).with_state(()))
        .merge(health::router())
        .merge(environments::router())
        .merge(specifications::router())
        .merge(runs::router())
        .merge(inventory::router())
        .merge(proposals::router())
        .merge(metrics::router())
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
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
