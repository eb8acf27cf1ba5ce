//! `GET /metrics`: Prometheus text exposition of the spec's metrics and HTTP request durations.
//!
//! The metrics name every tenant and project (the spec's `tenant` dimension), so the API's
//! public listener never answers them to an anonymous caller: with an internal listener
//! configured (`RUNTIME_CLOUD_METRICS_LISTEN`, [`internal_router`]) they are served there only,
//! and the public route is 404; without one, the public route needs a token with the
//! `factory.meta.read` scope and the `PlatformAdmin` role (a scraper's bearer token).
//!
//! The domain metrics are read from the read DB at scrape time, so every API replica reports
//! the same true values whichever process made the change: from the counts the database keeps
//! as rows change (`runtime_cloud_store::metrics`), a few small indexed reads however many runs,
//! findings and environments the tables hold. Counters count rows that never change again
//! (runs that ended, proposals raised), so they only go up. HTTP durations are this process's
//! own.
//!
//! The text is written here rather than by an exposition crate because the scrapers and the
//! tests read families the crates would change: `prometheus-client` names a counter's family
//! without `_total` in `# TYPE` and writes OpenMetrics bounds (`le="1.0"`), and neither it nor
//! `prometheus` writes a family that has no series yet (a fresh install's
//! `connectsoft_factory_provisioning_runs_total`).

use crate::auth::{MetaRead, Scoped};
use crate::openapi::Problems;
use crate::{AppState, Error};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use runtime_cloud_store::metrics::{self as store_metrics, Durations};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Instant;
use utoipa_axum::{router::OpenApiRouter, routes};

/// Histogram buckets, in seconds: the store's apply-duration buckets
/// (`APPLY_DURATION_BOUNDS_MS`; a test checks), and the same for HTTP durations.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics_for_a_token))
}

/// The internal listener's routes: `GET /metrics` without a token, for a scraper that reaches
/// that address only (a NetworkPolicy, a private interface).
pub fn internal_router(state: AppState) -> axum::Router {
    let (router, _internal_document) = OpenApiRouter::new()
        .routes(routes!(metrics))
        .split_for_parts();
    router.with_state(state)
}

/// The roles whose tokens may read every tenant's metrics on the public listener.
pub const METRICS_READERS: &[&str] = &["PlatformAdmin"];

/// A cumulative histogram.
#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, b) in BUCKETS.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    /// The apply durations the store counted, in seconds.
    fn of(d: &Durations) -> Self {
        let mut counts = vec![0; BUCKETS.len()];
        let mut below = 0;
        for (i, c) in counts.iter_mut().enumerate() {
            below += d.buckets[i];
            *c = below;
        }
        Self {
            counts,
            sum: d.sum_ms as f64 / 1000.0,
            count: d.count(),
        }
    }

    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in BUCKETS.iter().enumerate() {
            let c = self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {c}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// This process's HTTP request durations by method, route and status.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    by_route: Mutex<BTreeMap<(String, String, u16), Histogram>>,
}

/// Middleware: times every request under its route template (never the raw path, which would
/// put ids into label values).
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_owned(), |p| p.as_str().to_owned());
    let started = Instant::now();
    let res = next.run(req).await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut map = state
        .http_metrics
        .by_route
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry((method, route, res.status().as_u16()))
        .or_default()
        .observe(elapsed);
    res
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Prometheus text exposition: the spec's provisioning and runtime metrics, read from the read
/// tables at scrape time (so every API replica reports the same), and this process's HTTP
/// request durations. Every tenant's: a token with the `PlatformAdmin` role; 404 when the
/// metrics are served on the internal listener instead.
#[utoipa::path(operation_id = "metrics", get, path = "/metrics", tag = "operations",
    security(("bearer" = ["factory.meta.read"])),
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain; version=0.0.4"),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn metrics_for_a_token(
    state: State<AppState>,
    auth: Scoped<MetaRead>,
) -> Result<Response, Error> {
    if state.metrics_internal {
        return Err(Error::NotFound(
            "the metrics are served on the internal listener".into(),
        ));
    }
    auth.require_role(METRICS_READERS)?;
    metrics(state).await
}

/// The exposition itself; on the internal listener, without a token.
#[utoipa::path(operation_id = "internalMetrics", get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain; version=0.0.4"),
    ))]
async fn metrics(State(state): State<AppState>) -> Result<Response, Error> {
    let db = &state.db;
    let now = Utc::now();
    let counts = store_metrics::read(db, now, &state.inventory).await?;
    let mut out = String::new();

    // Runs by tenant, kind and outcome: runs that ended never change, so this only grows.
    header(
        &mut out,
        "connectsoft_factory_provisioning_runs_total",
        "counter",
        "Provisioning runs by kind and outcome.",
    );
    for ((tenant, kind, st), n) in &counts.runs_ended {
        let _ = writeln!(
            out,
            "connectsoft_factory_provisioning_runs_total{{tenant=\"{}\",kind=\"{}\",state=\"{}\"}} {n}",
            label(tenant),
            label(kind),
            label(st)
        );
    }

    // Apply durations by kind, from the immutable apply receipts.
    header(
        &mut out,
        "connectsoft_factory_provisioning_apply_duration_seconds",
        "histogram",
        "Apply duration.",
    );
    for (kind, durations) in &counts.apply_durations {
        Histogram::of(durations).write(
            &mut out,
            "connectsoft_factory_provisioning_apply_duration_seconds",
            &format!("kind=\"{}\"", label(kind)),
        );
    }

    // Differences found by reconciliation: proposals raised, by tenant and destructiveness.
    header(
        &mut out,
        "connectsoft_factory_provisioning_reconciliation_diffs_total",
        "counter",
        "Differences found by reconciliation.",
    );
    let mut diffs: BTreeMap<(&str, bool), u64> = BTreeMap::new();
    for ((tenant, _, destructive), n) in &counts.proposals {
        *diffs.entry((tenant, *destructive)).or_default() += n;
    }
    for ((tenant, destructive), n) in &diffs {
        let _ = writeln!(
            out,
            "connectsoft_factory_provisioning_reconciliation_diffs_total{{tenant=\"{}\",destructive=\"{destructive}\"}} {n}",
            label(tenant)
        );
    }

    // Environments without a fresh observation (never observed counts as stale).
    header(
        &mut out,
        "connectsoft_factory_runtime_environments_stale",
        "gauge",
        "Environments without a fresh observation.",
    );
    for (tenant, n) in &counts.stale_environments {
        let _ = writeln!(
            out,
            "connectsoft_factory_runtime_environments_stale{{tenant=\"{}\"}} {n}",
            label(tenant)
        );
    }

    // Open findings, and apart from them those a drift rule suppresses.
    for (suppressed, name, help) in [
        (
            false,
            "connectsoft_factory_runtime_drift_open",
            "Open drift findings.",
        ),
        (
            true,
            "connectsoft_factory_runtime_drift_suppressed",
            "Open drift findings a drift rule suppresses.",
        ),
    ] {
        header(&mut out, name, "gauge", help);
        for ((tenant, kind, _), n) in counts
            .open_findings
            .iter()
            .filter(|((_, _, s), _)| *s == suppressed)
        {
            let _ = writeln!(
                out,
                "{name}{{tenant=\"{}\",kind=\"{}\"}} {n}",
                label(tenant),
                label(kind)
            );
        }
    }

    // Fleet rollouts by state, and the instances they move.
    for (name, help, pick) in [
        (
            "connectsoft_factory_fleet_rollouts",
            "Fleet rollouts by state.",
            0usize,
        ),
        (
            "connectsoft_factory_fleet_rollout_instances",
            "Instances of fleet rollouts, by their rollout's state.",
            1,
        ),
    ] {
        header(&mut out, name, "gauge", help);
        for ((tenant, st), (rollouts, instances)) in &counts.rollouts {
            let n = if pick == 0 { rollouts } else { instances };
            let _ = writeln!(
                out,
                "{name}{{tenant=\"{}\",state=\"{}\"}} {n}",
                label(tenant),
                label(st)
            );
        }
    }

    header(
        &mut out,
        "connectsoft_factory_capacity_leases",
        "gauge",
        "Capacity leases held (granted) and waiting, per tenant and pool.",
    );
    for ((tenant, pool, st), n) in &counts.held_leases {
        let _ = writeln!(
            out,
            "connectsoft_factory_capacity_leases{{tenant=\"{}\",pool=\"{}\",state=\"{}\"}} {n}",
            label(tenant),
            label(pool),
            st
        );
    }
    for (name, help) in [
        (
            "connectsoft_factory_capacity_quota_used",
            "What each project uses of its quota: runs holding a lease (concurrentRuns), apply minutes today (executionMinutesPerDay).",
        ),
        (
            "connectsoft_factory_capacity_quota_limit",
            "Each project's quota in force (the default when none is recorded).",
        ),
    ] {
        header(&mut out, name, "gauge", help);
        for u in &counts.quota_use {
            let (runs, minutes) = if name.ends_with("used") {
                (u.leases_granted, u.minutes_used)
            } else {
                (
                    u64::from(u.limits.concurrent_runs),
                    u64::from(u.limits.execution_minutes_per_day),
                )
            };
            for (quota, n) in [
                ("concurrentRuns", runs),
                ("executionMinutesPerDay", minutes),
            ] {
                let _ = writeln!(
                    out,
                    "{name}{{tenant=\"{}\",project=\"{}\",quota=\"{quota}\"}} {n}",
                    label(&u.tenant_id),
                    label(&u.project_id)
                );
            }
        }
    }

    // The inbound consumer's backlog (pending and unacknowledged), when this process runs one.
    let lag = state.inbox_lag.load(std::sync::atomic::Ordering::Relaxed);
    if lag >= 0 {
        header(
            &mut out,
            "connectsoft_factory_runtime_inbox_lag",
            "gauge",
            "Inbound events not yet handled by the consumer.",
        );
        let _ = writeln!(
            out,
            "connectsoft_factory_runtime_inbox_lag{{consumer=\"{}\"}} {lag}",
            crate::inbound::names::CONSUMER
        );
    }

    // Inbound approvals refused (a forged, expired or replayed approval), by type and reason.
    header(
        &mut out,
        "connectsoft_factory_runtime_inbound_refused_total",
        "counter",
        "Inbound events dead-lettered because the approval they carry was not proven.",
    );
    for ((event_type, reason), n) in state.inbound_refusals.counts() {
        let _ = writeln!(
            out,
            "connectsoft_factory_runtime_inbound_refused_total{{type=\"{}\",reason=\"{reason}\"}} {n}",
            label(&event_type)
        );
    }

    // The fleet host's inbox age per module (spec 004): `inventory`, the oldest inbound event
    // not yet handled (when this process consumes them); `rollouts`, how long the rollout
    // under way that looked at its instances longest ago has not seen what changed since.
    header(
        &mut out,
        "connectsoft_factory_fleet_host_inbox_lag",
        "gauge",
        "Age of the oldest unprocessed event per module, in seconds.",
    );
    let oldest = state
        .inbox_oldest
        .load(std::sync::atomic::Ordering::Relaxed);
    if oldest >= 0 {
        let age = match oldest {
            0 => 0.0,
            ms => (now.timestamp_millis() - ms).max(0) as f64 / 1000.0,
        };
        let _ = writeln!(
            out,
            "connectsoft_factory_fleet_host_inbox_lag{{module=\"inventory\"}} {age}"
        );
    }
    let rollouts_age = runtime_cloud_store::rollouts::oldest_check(db)
        .await?
        .map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
    let _ = writeln!(
        out,
        "connectsoft_factory_fleet_host_inbox_lag{{module=\"rollouts\"}} {rollouts_age}"
    );

    header(
        &mut out,
        "connectsoft_factory_runtime_reconciliation_proposals",
        "gauge",
        "Proposals by state.",
    );
    for ((tenant, st, destructive), n) in &counts.proposals {
        let _ = writeln!(
            out,
            "connectsoft_factory_runtime_reconciliation_proposals{{tenant=\"{}\",state=\"{}\",destructive=\"{destructive}\"}} {n}",
            label(tenant),
            label(st)
        );
    }

    header(
        &mut out,
        "http_server_request_duration_seconds",
        "histogram",
        "HTTP request duration by route.",
    );
    let http = state
        .http_metrics
        .by_route
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for ((method, route, status), h) in &http {
        let labels = format!(
            "method=\"{}\",route=\"{}\",status=\"{status}\"",
            label(method),
            label(route)
        );
        h.write(&mut out, "http_server_request_duration_seconds", &labels);
    }

    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_store::metrics::APPLY_DURATION_BOUNDS_MS;

    #[test]
    fn the_buckets_are_the_stores_apply_duration_buckets() {
        let ms: Vec<u64> = BUCKETS
            .iter()
            .map(|b| (b * 1000.0).round() as u64)
            .collect();
        assert_eq!(ms, APPLY_DURATION_BOUNDS_MS);
    }

    #[test]
    fn counted_durations_make_the_same_histogram_as_observed_ones() {
        let durations_ms = [0, 5, 6, 1_500, 300_000, 300_001, 42];
        let mut observed = Histogram::default();
        let mut counted = Durations::default();
        for ms in durations_ms {
            observed.observe(ms as f64 / 1000.0);
            counted.buckets[Durations::bucket_of(ms)] += 1;
            counted.sum_ms += ms;
        }
        let (mut a, mut b) = (String::new(), String::new());
        observed.write(&mut a, "d", "");
        Histogram::of(&counted).write(&mut b, "d", "");
        assert_eq!(a, b);
        assert!(a.contains("d_bucket{le=\"0.005\"} 2\n"), "{a}");
        assert!(a.contains("d_bucket{le=\"+Inf\"} 7\n"), "{a}");
    }
}
