//! Watched clusters: one watch stream per cluster and kind (Deployments, StatefulSets,
//! DaemonSets, Services, Ingresses, and NetworkPolicies when posture is read), shared by every
//! namespace the product observes there, and a change to an object of an environment observes
//! that environment within seconds.
//!
//! The watches are `kube`'s watcher: a list, then a watch resumed from the last
//! `resourceVersion` it saw (bookmarks keep that current while nothing changes), and a fresh
//! list-then-watch after `410 Gone`, backing off while the API server refuses. Nothing of the
//! objects is kept: an event says which namespace changed, and the environment's observation
//! reads the namespace as the sweep does (one list per kind), so what it records is what the
//! cluster holds then, whatever the events said.
//!
//! A burst of changes in one namespace is one observation: a namespace is told once its events
//! have settled for [`SETTLE`], and the observation itself (`observe/{tenant}/{env}/watched`)
//! takes a change signalled while it runs as exactly one more. A change in a namespace the watch
//! knows no environment of reads the environments again within seconds (one registered since is
//! told), not at every such change. After a relist the watch cannot
//! know what changed while it was away, so every watched environment of the cluster is told.

use crate::Error;
use crate::error::activity_error;
use crate::kubernetes::Kubernetes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use runtime_cloud_models::environments::EnvironmentKey;
use runtime_cloud_models::targets::KubernetesCluster;
use runtime_cloud_store::cluster_watches;
use runtime_cloud_workflows::contracts::WatchEnd;
use runtime_cloud_workflows::contracts::watch_markers as markers;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tokio::time::Instant;

/// How long a namespace's events must have stopped before its environments are told: a burst
/// (a rollout, a `kubectl apply` of many objects) is one observation.
pub const SETTLE: Duration = Duration::from_millis(300);
/// How long after a watch listed again its namespaces are told: the other kinds' watches,
/// cut off by the same outage, list again meanwhile, and one observation follows them all.
/// The longest any change waits to be told.
pub const RELIST_SETTLE: Duration = Duration::from_secs(2);
/// How often the watch heartbeats (the workflow's heartbeat timeout is five times this), and
/// looks whether a namespace has settled.
const BEAT: Duration = Duration::from_secs(2);
/// How often the watch records that its holder is alive, for the sweep
/// (`models::observation::WATCH_BEAT_FRESH` is four times this): a write to the read DB, so
/// less often than the heartbeat.
const RECORD_BEAT: Duration = Duration::from_secs(5);
/// How often the environments observed on the cluster are read again (one added since is
/// told of changes from then; one removed no longer): the streams go on, as they watch every
/// namespace.
const REREAD: Duration = Duration::from_secs(30);
/// How soon after the last read a change in a namespace the watch does not know reads the
/// environments again: an environment registered since is told of it within seconds, and a
/// cluster whose unobserved namespaces keep changing costs one read of them per this.
const STRANGER_REREAD: Duration = Duration::from_secs(2);
/// Observations signalled at once when many namespaces settle together (a relist, a storm).
const TOLD_AT_ONCE: usize = 16;
/// Watched changes recorded in one statement (well within the databases' bound parameters).
const RECORDED_AT_ONCE: usize = 1000;
/// How long one activity watches before it returns, for the workflow to start again in a fresh
/// history (the watches resume from where they were, in the next activity).
pub const WATCH_FOR: Duration = Duration::from_secs(60 * 60);

/// The watch activity's dependencies.
pub struct WatchActivitiesImpl {
    pub db: sea_orm::DatabaseConnection,
    pub kubernetes: Arc<Kubernetes>,
    /// Starts or signals the environments' observations.
    pub client: temporalio_client::Client,
    /// The task queue those run on.
    pub task_queue: String,
}

/// What a watch event says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// An object of this namespace changed.
    Changed(String),
    /// The watch listed, the first time or again (`again`: after a `410`, it may have missed
    /// changes meanwhile), and follows the cluster from there.
    Listed { again: bool },
    /// The watch failed; it backs off and starts again.
    Failed,
    /// A list under way.
    Listing,
}

/// The kinds a cluster is watched for: Deployments, StatefulSets, DaemonSets, Services,
/// Ingresses, NetworkPolicies.
const KINDS: usize = 6;

/// Every event of `K` in the cluster, as what it says.
fn events<K>(client: &kube::Client, selector: Option<&str>) -> BoxStream<'static, Seen>
where
    K: kube::Resource<Scope = NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    <K as kube::Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let mut config = watcher::Config::default();
    if let Some(s) = selector {
        config = config.labels(s);
    }
    let kind = K::plural(&Default::default()).into_owned();
    let mut listed = false;
    watcher(api, config)
        .default_backoff()
        .map(move |event| match event {
            Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                o.namespace().map_or(Seen::Listing, Seen::Changed)
            }
            Ok(watcher::Event::InitDone) => {
                let again = listed;
                listed = true;
                Seen::Listed { again }
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => Seen::Listing,
            Err(e) => {
                tracing::warn!(%kind, error = %e, "the cluster's watch failed; it backs off and starts again");
                Seen::Failed
            }
        })
        .boxed()
}

/// A kind not watched: listed at once, and nothing ever changes.
fn followed() -> BoxStream<'static, Seen> {
    futures::stream::once(async { Seen::Listed { again: false } })
        .chain(futures::stream::pending())
        .boxed()
}

/// Whether the cluster's watches follow it, and since when all of them have: what lets the
/// sweep trust them for an environment observed since (`Watched::vouches`).
#[derive(Debug, Default)]
struct Following {
    /// Each kind's watch has listed.
    listed: [bool; KINDS],
    /// Each kind's watch failed since it last answered.
    failed: [bool; KINDS],
    since: Option<DateTime<Utc>>,
}

impl Following {
    fn seen(&mut self, kind: usize, seen: &Seen, now: DateTime<Utc>) {
        match seen {
            Seen::Failed => self.failed[kind] = true,
            Seen::Listed { .. } => {
                self.listed[kind] = true;
                self.failed[kind] = false;
            }
            // A resumed watch answers again, from the version it last saw: nothing was missed.
            Seen::Changed(_) => self.failed[kind] = false,
            Seen::Listing => {}
        }
        let following = self.listed.iter().all(|l| *l) && self.failed.iter().all(|f| !*f);
        match (following, self.since) {
            (true, None) => self.since = Some(now),
            (false, Some(_)) => self.since = None,
            _ => {}
        }
    }
}

/// The one label selector every environment on the cluster shares (so the API server filters
/// for all of them), or none.
fn shared_selector(watched: &[(EnvironmentKey, String, Option<String>)]) -> Option<String> {
    let first = watched.first()?.2.clone()?;
    watched
        .iter()
        .all(|(_, _, s)| s.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// Namespaces waiting for their events to settle, each with when it is due to be told: a
/// change makes it due [`SETTLE`] after it (a later change, later), a relist [`RELIST_SETTLE`]
/// after it (the kinds' watches list again one after the other after the same outage). A
/// namespace that never stops changing (a controller writing every 100 ms) is told
/// [`HOLD_AT_MOST`] after its first change all the same: the observation under way takes the
/// changes after it as one more.
#[derive(Debug, Default)]
struct Settling(HashMap<String, Pending>);

/// When a pending namespace is due, and when it is due at the latest.
#[derive(Debug, Clone, Copy)]
struct Pending {
    due: Instant,
    deadline: Instant,
}

/// The longest a changing namespace waits to be told.
const HOLD_AT_MOST: Duration = Duration::from_secs(1);

impl Settling {
    /// A change in `namespace` at `at`, due `wait` after it; true when none was pending there.
    fn changed(&mut self, namespace: String, at: Instant, wait: Duration) -> bool {
        match self.0.get_mut(&namespace) {
            Some(pending) => {
                pending.due = pending.due.max(at + wait).min(pending.deadline);
                false
            }
            None => {
                let pending = Pending {
                    due: at + wait,
                    deadline: at + wait.max(HOLD_AT_MOST),
                };
                self.0.insert(namespace, pending);
                true
            }
        }
    }

    /// The namespaces due at `now`, taken out.
    fn settled(&mut self, now: Instant) -> Vec<String> {
        let due: Vec<String> = self
            .0
            .iter()
            .filter(|(_, pending)| pending.due <= now)
            .map(|(ns, _)| ns.clone())
            .collect();
        for ns in &due {
            self.0.remove(ns);
        }
        due
    }

    fn next_due(&self) -> Option<Instant> {
        self.0.values().map(|p| p.due).min()
    }
}

/// Changes in namespaces the watch knew no environment of when it last read them: an
/// environment registered there since is told once the environments are read again, sooner
/// than [`REREAD`] (at most every [`STRANGER_REREAD`]).
#[derive(Debug)]
struct Strangers {
    /// Each namespace with the time of its latest change.
    pending: HashMap<String, Instant>,
    read_at: Instant,
}

impl Strangers {
    fn new(read_at: Instant) -> Self {
        Self {
            pending: HashMap::new(),
            read_at,
        }
    }

    /// A change in `namespace` at `at`; returns when the environments should be read again.
    fn changed(&mut self, namespace: String, at: Instant) -> Instant {
        self.pending.insert(namespace, at);
        (self.read_at + STRANGER_REREAD).max(at)
    }

    /// The environments were read at `now`: the pending namespaces that now have one, with
    /// the time of their latest change; the others are forgotten (nothing observes them).
    fn read(&mut self, now: Instant, known: impl Fn(&str) -> bool) -> Vec<(String, Instant)> {
        self.read_at = now;
        let mut found: Vec<(String, Instant)> =
            self.pending.drain().filter(|(ns, _)| known(ns)).collect();
        found.sort();
        found
    }
}

impl WatchActivitiesImpl {
    /// The environments observed on `cluster`: (key, namespace, label selector).
    async fn watched(
        &self,
        cluster: &KubernetesCluster,
    ) -> Result<Vec<(EnvironmentKey, String, Option<String>)>, Error> {
        let all = runtime_cloud_store::environments::kubernetes_observed(&self.db).await?;
        Ok(all
            .into_iter()
            .filter(|(_, ns)| &ns.cluster() == cluster)
            .map(|(key, ns)| (key, ns.namespace, ns.label_selector))
            .collect())
    }

    /// Watches `cluster` until [`WATCH_FOR`] has passed, the activity is cancelled, or nothing
    /// is observed there any more.
    async fn watch(
        &self,
        ctx: &ActivityContext,
        cluster: &KubernetesCluster,
    ) -> Result<WatchEnd, Error> {
        let until = Instant::now() + WATCH_FOR;
        let mut config = self.kubernetes.config(cluster).await?;
        // A watch answers when something changes (or with a bookmark): it must not time out
        // between two.
        config.read_timeout = None;
        let client = kube::Client::try_from(config)
            .map_err(|e| Error::Unreachable(format!("the cluster's client: {e}")))?;
        let cluster_id = cluster.id();
        let teller = Teller::start(
            self.db.clone(),
            cluster_id.clone(),
            self.client.clone(),
            self.task_queue.clone(),
        );
        let mut watched = self.watched(cluster).await?;
        loop {
            if watched.is_empty() {
                return Ok(WatchEnd::NothingToWatch);
            }
            let selector = shared_selector(&watched);
            let mut by_namespace = namespaces(&watched);
            let streams: [BoxStream<'static, Seen>; KINDS] = [
                events::<Deployment>(&client, selector.as_deref()),
                events::<StatefulSet>(&client, selector.as_deref()),
                events::<DaemonSet>(&client, selector.as_deref()),
                events::<Service>(&client, None),
                events::<Ingress>(&client, None),
                // A namespace's NetworkPolicies are what its `no-network-policy` finding says:
                // the sweep trusts the watches for them too. Without posture there is nothing
                // of them to follow.
                match self.kubernetes.posture {
                    true => events::<NetworkPolicy>(&client, None),
                    false => followed(),
                },
            ];
            let tagged = streams
                .into_iter()
                .enumerate()
                .map(|(kind, events)| events.map(move |seen| (kind, seen)).boxed());
            let mut seen = futures::stream::select_all(tagged);
            let mut settling = Settling::default();
            let mut following = Following::default();
            // Recorded at once below, then every `RECORD_BEAT`.
            let mut recorded_beat = Instant::now() - RECORD_BEAT;
            let mut reread_at = Instant::now() + REREAD;
            let mut strangers = Strangers::new(Instant::now());
            let mut beat = tokio::time::interval(BEAT);
            loop {
                let due = settling.next_due().unwrap_or(reread_at).min(reread_at);
                tokio::select! {
                    event = seen.next() => {
                        let Some((kind, seen)) = event else { break };
                        let since = following.since;
                        following.seen(kind, &seen, Utc::now());
                        if following.since != since {
                            // The sweep reads what the watches follow from now, or no longer.
                            if let Err(e) = cluster_watches::beat(&self.db, &cluster_id, following.since, Utc::now()).await {
                                tracing::warn!(error = %e, "cannot record the watch's beat");
                            }
                        }
                        let now = Instant::now();
                        let changed: Vec<(String, Instant, Duration)> = match seen {
                            Seen::Changed(ns) if by_namespace.contains_key(&ns) => vec![(ns, now, SETTLE)],
                            Seen::Changed(ns) => {
                                reread_at = reread_at.min(strangers.changed(ns, now));
                                Vec::new()
                            }
                            // Each kind lists again after the same outage: one observation of
                            // each environment once they have.
                            Seen::Listed { again: true } => by_namespace
                                .keys()
                                .map(|ns| (ns.clone(), now, RELIST_SETTLE))
                                .collect(),
                            _ => Vec::new(),
                        };
                        pending(&mut settling, &by_namespace, changed);
                    }
                    _ = tokio::time::sleep_until(due) => {}
                    _ = beat.tick() => {
                        let _ = ctx.record_heartbeat(()).await;
                        if recorded_beat.elapsed() >= RECORD_BEAT {
                            recorded_beat = Instant::now();
                            if let Err(e) = cluster_watches::beat(&self.db, &cluster_id, following.since, Utc::now()).await {
                                tracing::warn!(error = %e, "cannot record the watch's beat");
                            }
                        }
                    }
                }
                let settled = settling.settled(Instant::now());
                if !settled.is_empty() {
                    let told: Vec<EnvironmentKey> = settled
                        .iter()
                        .filter_map(|ns| by_namespace.get(ns))
                        .flatten()
                        .cloned()
                        .collect();
                    teller.tell(told);
                }
                if Instant::now() >= until {
                    return Ok(WatchEnd::Again);
                }
                if Instant::now() >= reread_at {
                    // The environments observed on the cluster now: the streams watch on (they
                    // watch every namespace), unless the label selector they share changed.
                    watched = self.watched(cluster).await?;
                    if watched.is_empty() || shared_selector(&watched) != selector {
                        break;
                    }
                    by_namespace = namespaces(&watched);
                    reread_at = Instant::now() + REREAD;
                    let found = strangers
                        .read(Instant::now(), |ns| by_namespace.contains_key(ns))
                        .into_iter()
                        .map(|(ns, at)| (ns, at, SETTLE));
                    pending(&mut settling, &by_namespace, found);
                }
            }
        }
    }
}

/// Puts each changed namespace of an environment (with when, and how long it settles) in
/// `settling`.
fn pending(
    settling: &mut Settling,
    by_namespace: &BTreeMap<String, Vec<EnvironmentKey>>,
    changed: impl IntoIterator<Item = (String, Instant, Duration)>,
) {
    for (ns, at, wait) in changed {
        if by_namespace.contains_key(&ns) {
            settling.changed(ns, at, wait);
        }
    }
}

/// The environments waiting to be told, the tenants taking turns: each tenant's in the order
/// they came, one tenant's next after every other tenant waiting had one. The turn order lasts
/// across arrivals, so a tenant whose few arrive behind another's thousands is told next, not
/// after them.
#[derive(Debug, Default)]
struct Turns {
    queues: BTreeMap<String, std::collections::VecDeque<EnvironmentKey>>,
    /// The tenants with environments waiting, in turn order.
    order: std::collections::VecDeque<String>,
    waiting: std::collections::HashSet<EnvironmentKey>,
}

impl Turns {
    /// Queues `key` unless it waits already; whether it was queued.
    fn add(&mut self, key: EnvironmentKey) -> bool {
        if !self.waiting.insert(key.clone()) {
            return false;
        }
        let queue = self.queues.entry(key.tenant_id.clone()).or_default();
        if queue.is_empty() {
            self.order.push_back(key.tenant_id.clone());
        }
        queue.push_back(key);
        true
    }

    /// The next environment to tell.
    fn next(&mut self) -> Option<EnvironmentKey> {
        let tenant = self.order.pop_front()?;
        let queue = self.queues.get_mut(&tenant)?;
        let key = queue.pop_front()?;
        if queue.is_empty() {
            self.queues.remove(&tenant);
        } else {
            self.order.push_back(tenant);
        }
        self.waiting.remove(&key);
        Some(key)
    }
}

/// Tells environments to observe themselves, off the watch's loop (which goes on reading
/// events and heartbeating while a storm's thousands of observations are signalled): each
/// signals its watched observation, started by the signal when none runs. At most
/// [`TOLD_AT_ONCE`] at once, the tenants taking turns ([`Turns`]) as new changes arrive: a
/// tenant with thousands of changed environments does not hold up another's few here, nor on
/// the task queue, where the tenant is the observations' fairness key.
struct Teller {
    to_tell: tokio::sync::mpsc::UnboundedSender<Vec<EnvironmentKey>>,
    task: tokio::task::JoinHandle<()>,
}

impl Teller {
    fn start(
        db: sea_orm::DatabaseConnection,
        cluster_id: String,
        client: temporalio_client::Client,
        task_queue: String,
    ) -> Self {
        let (to_tell, mut told) = tokio::sync::mpsc::unbounded_channel::<Vec<EnvironmentKey>>();
        let task = tokio::spawn(async move {
            let (client, task_queue) = (&client, task_queue.as_str());
            let mut turns = Turns::default();
            let mut in_flight = futures::stream::FuturesUnordered::new();
            loop {
                // Wait for a change when nothing is being told; else for whichever comes first.
                let arrived = if in_flight.is_empty() {
                    told.recv().await
                } else {
                    tokio::select! {
                        arrived = told.recv() => arrived,
                        _ = in_flight.next() => Some(Vec::new()),
                    }
                };
                let Some(mut batch) = arrived else {
                    return;
                };
                while let Ok(more) = told.try_recv() {
                    batch.extend(more);
                }
                let mut seen = std::collections::HashSet::new();
                batch.retain(|key| seen.insert(key.clone()));
                // Every change recorded before it is told (one waiting to be told included), in
                // one write: the sweep no longer trusts the watch for them until an observation
                // after this records them again (should one fail, the sweep reads them).
                let at = Utc::now();
                for chunk in batch.chunks(RECORDED_AT_ONCE) {
                    if let Err(e) = cluster_watches::changed(&db, &cluster_id, chunk, at).await {
                        tracing::warn!(error = %e, "cannot record watched changes; the sweep reads those environments");
                    }
                }
                for key in batch {
                    turns.add(key);
                }
                while in_flight.len() < TOLD_AT_ONCE {
                    let Some(key) = turns.next() else { break };
                    in_flight.push(tell(client, task_queue, key));
                }
            }
        });
        Self { to_tell, task }
    }

    fn tell(&self, environments: Vec<EnvironmentKey>) {
        if !environments.is_empty() {
            // Only fails once the task ended, with the watch.
            let _ = self.to_tell.send(environments);
        }
    }
}

impl Drop for Teller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Tells one environment to observe itself.
async fn tell(client: &temporalio_client::Client, task_queue: &str, key: EnvironmentKey) {
    let (tenant_id, environment_id) = (&key.tenant_id, &key.environment_id);
    let told = runtime_cloud_temporal::observations::changed(
        client,
        task_queue,
        tenant_id,
        environment_id,
    )
    .await;
    match told {
        Ok(()) => {
            tracing::info!(%tenant_id, %environment_id, "a watched change observes the environment")
        }
        // The sweep observes it within five minutes anyway.
        Err(e) => {
            tracing::warn!(%tenant_id, %environment_id, error = %e, "a watched change could not start its observation")
        }
    }
}

/// The environments of each namespace.
fn namespaces(
    watched: &[(EnvironmentKey, String, Option<String>)],
) -> BTreeMap<String, Vec<EnvironmentKey>> {
    let mut by_namespace: BTreeMap<String, Vec<EnvironmentKey>> = BTreeMap::new();
    for (key, ns, _) in watched {
        by_namespace
            .entry(ns.clone())
            .or_default()
            .push(key.clone());
    }
    by_namespace
}

#[activities]
impl WatchActivitiesImpl {
    /// See [`WatchActivitiesImpl`] and the module's doc.
    #[activity(definition = markers::WatchCluster)]
    pub async fn watch_cluster(
        self: Arc<Self>,
        ctx: ActivityContext,
        cluster: KubernetesCluster,
    ) -> Result<WatchEnd, ActivityError> {
        let span = tracing::info_span!("watch_cluster", cluster = %cluster.id());
        use tracing::Instrument;
        let watched = async {
            tokio::select! {
                end = self.watch(&ctx, &cluster) => end.map_err(activity_error),
                // Another worker took the cluster over, or the workflow ended.
                () = ctx.cancelled() => Err(ActivityError::cancelled()),
            }
        };
        watched.instrument(span).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_in_a_namespace_settles_into_one_told() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let mut settling = Settling::default();
        assert!(settling.changed("shop".into(), start, SETTLE));
        for i in 1..100 {
            assert!(!settling.changed("shop".into(), start + ms(i), SETTLE));
        }
        settling.changed("billing".into(), start, SETTLE);
        assert_eq!(settling.settled(start + ms(150)), Vec::<String>::new());
        assert_eq!(settling.settled(start + SETTLE + ms(10)), ["billing"]);
        assert_eq!(settling.next_due(), Some(start + ms(99) + SETTLE));
        assert_eq!(settling.settled(start + SETTLE + ms(99)), ["shop"]);
        assert_eq!(settling.next_due(), None);
        // A namespace that keeps changing every 100 ms is told a second after its first change.
        settling.changed("busy".into(), start, SETTLE);
        for i in 1..50 {
            settling.changed("busy".into(), start + ms(100 * i), SETTLE);
        }
        assert_eq!(settling.next_due(), Some(start + HOLD_AT_MOST));
        assert_eq!(settling.settled(start + HOLD_AT_MOST), ["busy"]);
        // A relist waits longer, and a change meanwhile does not bring it forward.
        settling.changed("shop".into(), start, RELIST_SETTLE);
        settling.changed("shop".into(), start + ms(10), SETTLE);
        assert_eq!(settling.next_due(), Some(start + RELIST_SETTLE));
    }

    #[test]
    fn the_watches_follow_the_cluster_once_every_kind_listed_until_one_fails() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(s, 0).expect("time");
        let mut following = Following::default();
        for kind in 0..KINDS - 1 {
            following.seen(kind, &Seen::Listing, t(1));
            following.seen(kind, &Seen::Listed { again: false }, t(2));
        }
        assert_eq!(following.since, None, "one kind has not listed yet");
        following.seen(KINDS - 1, &Seen::Listed { again: false }, t(3));
        assert_eq!(following.since, Some(t(3)));
        following.seen(0, &Seen::Changed("shop".into()), t(4));
        assert_eq!(following.since, Some(t(3)), "a change keeps it following");
        following.seen(2, &Seen::Failed, t(5));
        assert_eq!(following.since, None);
        following.seen(2, &Seen::Listing, t(6));
        assert_eq!(
            following.since, None,
            "a list under way does not follow yet"
        );
        following.seen(2, &Seen::Listed { again: true }, t(7));
        assert_eq!(
            following.since,
            Some(t(7)),
            "from the list on, not from before it"
        );
    }

    #[test]
    fn a_change_where_no_environment_was_known_reads_them_again_soon_but_not_at_every_change() {
        let start = Instant::now();
        let s = Duration::from_secs;
        let mut strangers = Strangers::new(start);
        assert_eq!(
            strangers.changed("new".into(), start + s(1)),
            start + STRANGER_REREAD,
            "not before the last read is STRANGER_REREAD old"
        );
        assert_eq!(
            strangers.changed("kube-system".into(), start + s(5)),
            start + s(5)
        );
        strangers.changed("new".into(), start + s(6));
        let found = strangers.read(start + s(6), |ns| ns == "new");
        assert_eq!(
            found,
            [("new".to_owned(), start + s(6))],
            "the latest change"
        );
        assert_eq!(
            strangers.read(start + s(7), |_| true),
            [],
            "an unobserved namespace is forgotten at the read"
        );
        assert_eq!(
            strangers.changed("kube-system".into(), start + s(8)),
            start + s(7) + STRANGER_REREAD
        );
    }

    #[test]
    fn the_tenants_take_turns_to_be_told_across_arrivals() {
        let key = |t: &str, e: &str| EnvironmentKey {
            tenant_id: t.into(),
            environment_id: e.into(),
        };
        let mut turns = Turns::default();
        for (t, e) in [
            ("a", "1"),
            ("a", "2"),
            ("a", "3"),
            ("b", "1"),
            ("c", "1"),
            ("b", "2"),
        ] {
            assert!(turns.add(key(t, e)));
        }
        assert!(!turns.add(key("a", "2")), "waiting already");
        let mut next = || {
            turns
                .next()
                .map(|k| format!("{}{}", k.tenant_id, k.environment_id))
        };
        assert_eq!(
            [next(), next(), next()],
            [Some("a1".into()), Some("b1".into()), Some("c1".into())]
        );
        // A storm of a's, then b's few: b's first is told next, not after a's storm.
        let mut turns = Turns::default();
        for i in 0..5000 {
            turns.add(key("a", &i.to_string()));
        }
        for _ in 0..100 {
            turns.next();
        }
        turns.add(key("b", "x"));
        turns.add(key("b", "y"));
        let told: Vec<String> = std::iter::from_fn(|| turns.next())
            .take(4)
            .map(|k| format!("{}{}", k.tenant_id, k.environment_id))
            .collect();
        assert_eq!(told, ["a100", "bx", "a101", "by"]);
    }

    #[test]
    fn a_selector_is_sent_only_when_every_environment_shares_it() {
        let key = |e: &str| EnvironmentKey {
            tenant_id: "acme".into(),
            environment_id: e.into(),
        };
        let sel = Some("app.kubernetes.io/part-of=shop".to_owned());
        let same = [
            (key("a"), "a".into(), sel.clone()),
            (key("b"), "b".into(), sel.clone()),
        ];
        assert_eq!(shared_selector(&same), sel);
        let mixed = [
            (key("a"), "a".into(), sel.clone()),
            (key("b"), "b".into(), None),
        ];
        assert_eq!(shared_selector(&mixed), None);
        assert_eq!(shared_selector(&[]), None);
    }
}
