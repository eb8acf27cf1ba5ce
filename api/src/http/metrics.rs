//! `GET /metrics`: the spec's metrics and HTTP request durations, in the OpenMetrics text format
//! `prometheus-client` writes.
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
//! findings and environments the tables hold. So each scrape builds a registry of its own from
//! those counts; only the HTTP durations and the inbound refusals are this process's own
//! metrics, kept between scrapes. Counters count rows that never change again (runs that ended,
//! proposals raised), so they only go up.
//!
//! OpenMetrics names a counter's family without its `_total` suffix (`# TYPE
//! connectsoft_factory_provisioning_runs counter`, the spec's `connectsoft.factory.provisioning.runs`);
//! its samples, which dashboards query, are `connectsoft_factory_provisioning_runs_total`.

use crate::auth::{MetaRead, Scoped};
use crate::openapi::Problems;
use crate::{AppState, Error};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use runtime_cloud_store::metrics::{self as store_metrics, Counts, Durations};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use utoipa_axum::{router::OpenApiRouter, routes};

/// Histogram buckets, in seconds: the store's apply-duration buckets
/// (`APPLY_DURATION_BOUNDS_MS`; a test checks), and the same for HTTP durations.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// What the exposition is, for the `Content-Type` header.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

fn request_histogram() -> Histogram {
    Histogram::new(BUCKETS.iter().copied())
}

/// This process's HTTP request durations by method, route and status.
#[derive(Debug)]
pub struct HttpMetrics(Family<RequestLabels, Histogram>);

impl Default for HttpMetrics {
    fn default() -> Self {
        Self(Family::new_with_constructor(request_histogram))
    }
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
    let labels = RequestLabels {
        method,
        route,
        status: res.status().as_u16(),
    };
    state
        .http_metrics
        .0
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    res
}

/// The inbound approvals refused (a forged, expired or replayed approval), by event type and
/// reason, since the process started.
#[derive(Debug, Default)]
pub struct Refusals(Family<RefusalLabels, Counter>);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    r#type: String,
    reason: &'static str,
}

impl Refusals {
    pub fn count(&self, event_type: &str, reason: &'static str) {
        let labels = RefusalLabels {
            r#type: event_type.to_owned(),
            reason,
        };
        self.0.get_or_create(&labels).inc();
    }
}

/// Apply durations the store counted, by kind: a histogram family whose buckets were counted
/// by the database rather than observed here.
#[derive(Debug)]
struct CountedDurations(Vec<(KindLabel, Durations)>);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

impl EncodeMetric for CountedDurations {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, durations) in &self.0 {
            let (sum, count, buckets) = histogram_of(durations);
            encoder
                .encode_family(labels)?
                .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The store's counts as a histogram's sum (seconds), count and per-bucket counts (the last,
/// above every bound, is `+Inf`).
fn histogram_of(d: &Durations) -> (f64, u64, Vec<(f64, u64)>) {
    let bounds = BUCKETS.iter().copied().chain([f64::INFINITY]);
    let buckets = bounds.zip(d.buckets.iter().copied()).collect();
    (d.sum_ms as f64 / 1000.0, d.count(), buckets)
}

/// A counter family holding the given counts.
fn counters<L>(rows: impl IntoIterator<Item = (L, u64)>) -> Family<L, Counter>
where
    L: EncodeLabelSet + Clone + Hash + Eq + Debug + Send + Sync + 'static,
{
    let family = Family::<L, Counter>::default();
    for (labels, n) in rows {
        family.get_or_create(&labels).inc_by(n);
    }
    family
}

/// A gauge family holding the given values.
fn gauges<L>(rows: impl IntoIterator<Item = (L, u64)>) -> Family<L, Gauge>
where
    L: EncodeLabelSet + Clone + Hash + Eq + Debug + Send + Sync + 'static,
{
    let family = Family::<L, Gauge>::default();
    for (labels, n) in rows {
        family
            .get_or_create(&labels)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    family
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    tenant: String,
    kind: &'static str,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DiffLabels {
    tenant: String,
    destructive: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    tenant: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    tenant: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    tenant: String,
    pool: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    tenant: String,
    project: String,
    quota: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProjectLabels {
    tenant: String,
    project: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConsumerLabel {
    consumer: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModuleLabel {
    module: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgeLabels {
    tenant: String,
    stat: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProposalLabels {
    tenant: String,
    state: &'static str,
    destructive: bool,
}

/// A family declared (`# HELP`, `# TYPE`) even while it has no series, as on a fresh install:
/// `prometheus-client` leaves an empty family out, and whoever reads the exposition would not
/// see that the metric exists.
#[derive(Debug)]
struct Declared<M>(M);

impl<M: EncodeMetric> EncodeMetric for Declared<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

fn declare<M>(registry: &mut Registry, name: &str, help: &str, metric: M)
where
    M: EncodeMetric + Debug + Send + Sync + 'static,
{
    registry.register(name, help, Declared(metric));
}

/// The spec's provisioning and runtime metrics, and the fleet's and capacity's, from the counts
/// the read tables keep.
fn register_counts(registry: &mut Registry, counts: &Counts) {
    // Runs by tenant, kind and outcome: runs that ended never change, so this only grows.
    declare(
        registry,
        "connectsoft_factory_provisioning_runs",
        "Provisioning runs by kind and outcome",
        counters(counts.runs_ended.iter().map(|((tenant, kind, state), n)| {
            let labels = RunLabels {
                tenant: tenant.clone(),
                kind,
                state,
            };
            (labels, *n)
        })),
    );
    // Apply durations by kind, from the immutable apply receipts.
    declare(
        registry,
        "connectsoft_factory_provisioning_apply_duration_seconds",
        "Apply duration",
        CountedDurations(
            counts
                .apply_durations
                .iter()
                .map(|(kind, d)| (KindLabel { kind }, d.clone()))
                .collect(),
        ),
    );
    // Differences found by reconciliation: proposals raised, by tenant and destructiveness.
    let mut diffs: BTreeMap<(&str, bool), u64> = BTreeMap::new();
    for ((tenant, _, destructive), n) in &counts.proposals {
        *diffs.entry((tenant, *destructive)).or_default() += n;
    }
    declare(
        registry,
        "connectsoft_factory_provisioning_reconciliation_diffs",
        "Differences found by reconciliation",
        counters(diffs.into_iter().map(|((tenant, destructive), n)| {
            let labels = DiffLabels {
                tenant: tenant.to_owned(),
                destructive,
            };
            (labels, n)
        })),
    );
    // Environments without a fresh observation (never observed counts as stale).
    declare(
        registry,
        "connectsoft_factory_runtime_environments_stale",
        "Environments without a fresh observation",
        gauges(counts.stale_environments.iter().map(|(tenant, n)| {
            let labels = TenantLabel {
                tenant: tenant.clone(),
            };
            (labels, *n)
        })),
    );
    // Open findings, and apart from them those a drift rule suppresses.
    for (suppressed, name, help) in [
        (
            false,
            "connectsoft_factory_runtime_drift_open",
            "Open drift findings",
        ),
        (
            true,
            "connectsoft_factory_runtime_drift_suppressed",
            "Open drift findings a drift rule suppresses",
        ),
    ] {
        let open = counts
            .open_findings
            .iter()
            .filter(|((_, _, s), _)| *s == suppressed)
            .map(|((tenant, kind, _), n)| {
                let labels = FindingLabels {
                    tenant: tenant.clone(),
                    kind,
                };
                (labels, *n)
            });
        declare(registry, name, help, gauges(open));
    }
    // Fleet rollouts by state, and the instances they move.
    let rollouts = |pick: fn(&(u64, u64)) -> u64| {
        gauges(counts.rollouts.iter().map(move |((tenant, state), n)| {
            let labels = StateLabels {
                tenant: tenant.clone(),
                state,
            };
            (labels, pick(n))
        }))
    };
    declare(
        registry,
        "connectsoft_factory_fleet_rollouts",
        "Fleet rollouts by state",
        rollouts(|(rollouts, _)| *rollouts),
    );
    declare(
        registry,
        "connectsoft_factory_fleet_rollout_instances",
        "Instances of fleet rollouts, by their rollout's state",
        rollouts(|(_, instances)| *instances),
    );
    declare(
        registry,
        "connectsoft_factory_capacity_leases",
        "Capacity leases held (granted) and waiting, per tenant and pool",
        gauges(counts.held_leases.iter().map(|((tenant, pool, state), n)| {
            let labels = LeaseLabels {
                tenant: tenant.clone(),
                pool: pool.clone(),
                state,
            };
            (labels, *n)
        })),
    );
    let quotas = |values: fn(&store_metrics::QuotaUse) -> [u64; 2]| {
        gauges(counts.quota_use.iter().flat_map(move |u| {
            let [runs, minutes] = values(u);
            [
                ("concurrentRuns", runs),
                ("executionMinutesPerDay", minutes),
            ]
            .map(|(quota, n)| {
                let labels = QuotaLabels {
                    tenant: u.tenant_id.clone(),
                    project: u.project_id.clone(),
                    quota,
                };
                (labels, n)
            })
        }))
    };
    declare(
        registry,
        "connectsoft_factory_capacity_quota_used",
        "What each project uses of its quota: runs holding a lease (concurrentRuns), apply minutes today (executionMinutesPerDay)",
        quotas(|u| [u.leases_granted, u.minutes_used]),
    );
    declare(
        registry,
        "connectsoft_factory_capacity_quota_limit",
        "Each project's quota in force (the default when none is recorded)",
        quotas(|u| {
            [
                u64::from(u.limits.concurrent_runs),
                u64::from(u.limits.execution_minutes_per_day),
            ]
        }),
    );
    declare(
        registry,
        "connectsoft_factory_runtime_reconciliation_proposals",
        "Proposals by state",
        gauges(
            counts
                .proposals
                .iter()
                .map(|((tenant, state, destructive), n)| {
                    let labels = ProposalLabels {
                        tenant: tenant.clone(),
                        state,
                        destructive: *destructive,
                    };
                    (labels, *n)
                }),
        ),
    );
}

/// Prometheus text exposition: the spec's provisioning and runtime metrics, read from the read
/// tables at scrape time (so every API replica reports the same), and this process's HTTP
/// request durations. Every tenant's: a token with the `PlatformAdmin` role; 404 when the
/// metrics are served on the internal listener instead.
#[utoipa::path(operation_id = "metrics", get, path = "/metrics", tag = "operations",
    security(("bearer" = ["factory.meta.read"])),
    responses(
        (status = 200, description = "OpenMetrics text format 1.0.0", content_type = "application/openmetrics-text; version=1.0.0"),
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
        (status = 200, description = "OpenMetrics text format 1.0.0", content_type = "application/openmetrics-text; version=1.0.0"),
    ))]
async fn metrics(State(state): State<AppState>) -> Result<Response, Error> {
    let now = Utc::now();
    let counts = store_metrics::read(&state.db, now, &state.inventory).await?;
    let rollouts_checked = runtime_cloud_store::rollouts::oldest_check(&state.db).await?;
    let observed_ages = store_metrics::observation_ages(&state.db, now, None).await?;
    let mut registry = Registry::default();
    register_counts(&mut registry, &counts);

    // The inbound consumer's backlog (pending and unacknowledged), when this process runs one.
    let lag = state.inbox_lag.load(Ordering::Relaxed);
    if lag >= 0 {
        declare(
            &mut registry,
            "connectsoft_factory_runtime_inbox_lag",
            "Inbound events not yet handled by the consumer",
            gauges([(
                ConsumerLabel {
                    consumer: crate::inbound::names::CONSUMER,
                },
                lag.unsigned_abs(),
            )]),
        );
    }
    // Inbound approvals refused (a forged, expired or replayed approval), by type and reason.
    declare(
        &mut registry,
        "connectsoft_factory_runtime_inbound_refused",
        "Inbound events dead-lettered because the approval they carry was not proven",
        state.inbound_refusals.0.clone(),
    );
    // The fleet host's inbox age per module (spec 004): `inventory`, the oldest inbound event
    // not yet handled (when this process consumes them); `rollouts`, how long the rollout
    // under way that looked at its instances longest ago has not seen what changed since.
    let ages = Family::<ModuleLabel, Gauge<f64, AtomicU64>>::default();
    let seconds_since = |ms: i64| (now.timestamp_millis() - ms).max(0) as f64 / 1000.0;
    let oldest = state.inbox_oldest.load(Ordering::Relaxed);
    if oldest >= 0 {
        let age = if oldest == 0 {
            0.0
        } else {
            seconds_since(oldest)
        };
        ages.get_or_create(&ModuleLabel {
            module: "inventory",
        })
        .set(age);
    }
    let checked = rollouts_checked.map_or(0.0, |t| seconds_since(t.timestamp_millis()));
    ages.get_or_create(&ModuleLabel { module: "rollouts" })
        .set(checked);
    declare(
        &mut registry,
        "connectsoft_factory_fleet_host_inbox_lag",
        "Age of the oldest unprocessed event per module, in seconds",
        ages,
    );
    // What each tenant's projects cost an hour, as last priced (tenants with a price table).
    let hourly_cost = Family::<ProjectLabels, Gauge<f64, AtomicU64>>::default();
    for (tenant, project, hourly) in
        runtime_cloud_store::fleet::hourly_cost_by_project(&state.db).await?
    {
        hourly_cost
            .get_or_create(&ProjectLabels { tenant, project })
            .set(hourly);
    }
    declare(
        &mut registry,
        "connectsoft_factory_runtime_hourly_cost",
        "What a project's observed environments cost an hour at its tenant's prices",
        hourly_cost,
    );
    // How long ago each tenant's environments were last observed successfully.
    let observation_age = Family::<AgeLabels, Gauge<f64, AtomicU64>>::default();
    for (tenant, age) in &observed_ages {
        for (stat, seconds) in [
            ("p50", age.p50_seconds),
            ("p99", age.p99_seconds),
            ("max", age.max_seconds),
        ] {
            let labels = AgeLabels {
                tenant: tenant.clone(),
                stat,
            };
            observation_age.get_or_create(&labels).set(seconds);
        }
    }
    declare(
        &mut registry,
        "connectsoft_factory_runtime_observation_age_seconds",
        "How long ago each tenant's environments were last observed successfully: the median (p50), the 99th percentile (p99) and the oldest (max)",
        observation_age,
    );
    declare(
        &mut registry,
        "http_server_request_duration_seconds",
        "HTTP request duration by route",
        state.http_metrics.0.clone(),
    );

    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|e| Error::Internal(anyhow::Error::new(e).context("encoding the metrics")))?;
    Ok(([(CONTENT_TYPE, OPENMETRICS)], out).into_response())
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

    fn encoded(name: &str, metric: impl prometheus_client::registry::Metric) -> String {
        let mut registry = Registry::default();
        registry.register(name, "d", metric);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        out
    }

    #[test]
    fn counted_durations_make_the_same_histogram_as_observed_ones() {
        let durations_ms = [0, 5, 6, 1_500, 300_000, 300_001, 42];
        let observed = Family::<KindLabel, Histogram>::new_with_constructor(request_histogram);
        let mut counted = Durations::default();
        let labels = KindLabel { kind: "baseline" };
        for ms in durations_ms {
            observed.get_or_create(&labels).observe(ms as f64 / 1000.0);
            counted.buckets[Durations::bucket_of(ms)] += 1;
            counted.sum_ms += ms;
        }
        let a = encoded("d", observed);
        let b = encoded("d", CountedDurations(vec![(labels, counted)]));
        assert_eq!(a, b);
        assert!(
            a.contains("d_bucket{le=\"0.005\",kind=\"baseline\"} 2\n"),
            "{a}"
        );
        assert!(
            a.contains("d_bucket{le=\"+Inf\",kind=\"baseline\"} 7\n"),
            "{a}"
        );
        assert!(a.contains("d_count{kind=\"baseline\"} 7\n"), "{a}");
    }
}
