//! A STAND-IN for a Kubernetes API server, for tests only: no API server can run on the test
//! machines. It serves the list calls the product's Kubernetes observer makes, in the real
//! shapes (`DeploymentList` … with `metadata.resourceVersion` and `metadata.continue`, `limit`
//! and `labelSelector` honoured, a `Status` object for errors), from objects the test puts,
//! behind a bearer token; it answers 401 or 403 on demand and records every request path.
//!
//! Writes keep `metadata.managedFields` as the API server does: [`KubeStandIn::create`] gives
//! the creating manager every field it set, and [`KubeStandIn::update`] (what `kubectl scale`,
//! `kubectl set image`, `kubectl edit` or a controller send) moves the fields it writes to the
//! writing manager's entry (`Update`, with its subresource and time), away from their former
//! owners.
//!
//! It also takes server-side applies, as an IaC tool sends them (`PATCH` of one object with
//! `application/apply-patch+yaml`, `fieldManager` and `force`): a field another manager owns
//! with another value is a 409 conflict unless forced; the applier's `Apply` entry owns what it
//! sent. Objects are read and deleted one by one too. A write to a workload's `spec` is rolled
//! out at once, as if by the controller: its `status` follows and `kube-controller-manager`
//! owns it.
//!
//! It also serves the cluster-wide lists and **watches** of those kinds, as a watched cluster's
//! informer makes them: `watch=true` from a `resourceVersion` streams one JSON object per line
//! (`ADDED`, `MODIFIED`, `DELETED`, with the object at its new `resourceVersion`), a `BOOKMARK`
//! every second while nothing changes when `allowWatchBookmarks=true`, and ends at
//! `timeoutSeconds`; a watch from a version older than the kept history
//! ([`KubeStandIn::compact`]) gets one `ERROR` event carrying a `410` `Status`
//! (`reason: Expired`), as the API server's watch cache answers. The lines' shapes are
//! checked against real captured output (`tests/fixtures/kubernetes/watch/`).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The token the stand-in accepts.
pub const TOKEN: &str = "stand-in-service-account-token";

#[derive(Default)]
struct Cluster {
    /// (namespace, plural) → objects by name.
    objects: BTreeMap<(String, String), BTreeMap<String, Value>>,
    resource_version: u64,
    /// `Some(401 | 403)`: every request is refused so.
    refuse: Option<u16>,
    requests: Vec<String>,
    /// How long each request takes, and how many were served at once at most.
    delay: std::time::Duration,
    in_flight: usize,
    max_in_flight: usize,
    /// Every write since the history was last compacted, for the watches.
    events: Vec<Written>,
    /// A watch from a version below this is answered `410 Gone`.
    expired_before: u64,
    /// The latest `resourceVersion`, for the watches to wait on.
    written: Option<tokio::sync::watch::Sender<u64>>,
    /// Watches being served now.
    watching: usize,
    /// The watches send nothing (a network partition between them and their watchers).
    watches_held: bool,
    /// Lists and watches over every namespace are forbidden (the observer bound per namespace
    /// only, without the watched cluster's ClusterRole).
    cluster_scope_forbidden: bool,
    /// Kinds (plurals) the observer's role may not read.
    forbidden_kinds: std::collections::BTreeSet<String>,
}

/// One write, as a watch tells it.
#[derive(Clone)]
struct Written {
    resource_version: u64,
    plural: String,
    kind: &'static str,
    object: Value,
}

impl Cluster {
    fn written(&mut self) -> &tokio::sync::watch::Sender<u64> {
        self.written
            .get_or_insert_with(|| tokio::sync::watch::channel(0).0)
    }

    /// Stores `object` in `namespace` at the next `resourceVersion` and tells the watches.
    fn store(&mut self, namespace: &str, plural: &str, mut object: Value) -> Value {
        self.resource_version += 1;
        let rv = self.resource_version;
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let name = object["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_owned();
        let before = self
            .objects
            .entry((namespace.to_owned(), plural.to_owned()))
            .or_default()
            .insert(name, object.clone());
        let kind = if before.is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.tell(plural, kind, object.clone());
        object
    }

    /// Deletes `name` at the next `resourceVersion` and tells the watches; false when absent.
    fn remove(&mut self, namespace: &str, plural: &str, name: &str) -> bool {
        let removed = self
            .objects
            .get_mut(&(namespace.to_owned(), plural.to_owned()))
            .and_then(|o| o.remove(name));
        let Some(mut object) = removed else {
            return false;
        };
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        self.tell(plural, "DELETED", object);
        true
    }

    fn tell(&mut self, plural: &str, kind: &'static str, object: Value) {
        let rv = self.resource_version;
        self.events.push(Written {
            resource_version: rv,
            plural: plural.to_owned(),
            kind,
            object,
        });
        self.written().send_replace(rv);
    }
}

/// A running stand-in API server.
pub struct KubeStandIn {
    cluster: Arc<Mutex<Cluster>>,
    served: super::loopback::Served,
}

/// The kinds it serves: (API group path, plural, list kind).
const KINDS: &[(&str, &str, &str)] = &[
    ("apis/apps/v1", "deployments", "DeploymentList"),
    ("apis/apps/v1", "statefulsets", "StatefulSetList"),
    ("apis/apps/v1", "daemonsets", "DaemonSetList"),
    ("api/v1", "services", "ServiceList"),
    ("apis/networking.k8s.io/v1", "ingresses", "IngressList"),
    (
        "apis/networking.k8s.io/v1",
        "networkpolicies",
        "NetworkPolicyList",
    ),
];

impl KubeStandIn {
    pub async fn start() -> Self {
        let cluster = Arc::new(Mutex::new(Cluster::default()));
        use axum::routing::get;
        let app = axum::Router::new()
            .route("/api/v1/namespaces/{ns}/{plural}", get(list))
            .route("/api/v1/{plural}", get(everywhere_core))
            .route("/apis/{group}/{version}/{plural}", get(everywhere_grouped))
            .route(
                "/apis/{group}/{version}/namespaces/{ns}/{plural}",
                get(list_grouped),
            )
            .route(
                "/api/v1/namespaces/{ns}/{plural}/{name}",
                get(one_core).patch(one_core).delete(one_core),
            )
            .route(
                "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}",
                get(one_grouped).patch(one_grouped).delete(one_grouped),
            )
            .fallback(not_found)
            .with_state(cluster.clone());
        let served = super::loopback::serve(app, "").await;
        Self { cluster, served }
    }

    fn cluster(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The API server's URL.
    pub fn url(&self) -> &str {
        &self.served.url
    }

    /// A kubeconfig for this server with context `stand-in`, written as JSON (which is YAML too,
    /// and what the Pulumi CLI's stand-in can read without a YAML parser).
    pub fn kubeconfig(&self) -> String {
        json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
            "clusters": [{ "name": "stand-in", "cluster": { "server": self.url() } }],
            "contexts": [{ "name": "stand-in", "context": { "cluster": "stand-in", "user": "observer" } }],
            "users": [{ "name": "observer", "user": { "token": TOKEN } }]
        })
        .to_string()
    }

    /// Creates or replaces `object` (its `kind` and `metadata.name` say where), bumping its
    /// `resourceVersion` as the API server does on every write.
    pub fn put(&self, namespace: &str, object: Value) {
        let plural = match object["kind"].as_str() {
            Some("Deployment") => "deployments",
            Some("StatefulSet") => "statefulsets",
            Some("DaemonSet") => "daemonsets",
            Some("Service") => "services",
            Some("Ingress") => "ingresses",
            Some("NetworkPolicy") => "networkpolicies",
            other => panic!("the stand-in does not serve {other:?}"),
        };
        self.cluster().store(namespace, plural, object);
    }

    /// Creates `object` as `manager` does with an `Update` (`kubectl create`): one
    /// `managedFields` entry owning every field it sets.
    pub fn create(&self, namespace: &str, mut object: Value, manager: &str) {
        let mut fields = fields_of(&object);
        if let Some(f) = fields.as_object_mut() {
            f.retain(|k, _| k == "f:metadata" || k == "f:spec");
            if let Some(meta) = f.get_mut("f:metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| k == "f:labels" || k == "f:annotations");
            }
        }
        object["metadata"]["managedFields"] = json!([entry(manager, None, fields)]);
        self.put(namespace, object);
    }

    /// Writes to an object as `manager` with an `Update` through `subresource` (`scale`,
    /// `status`) or the main resource: `change` edits it, `fields` (a `fieldsV1` trie) are the
    /// fields the write sets. They move to the manager's entry, away from other entries, as
    /// the API server records an update.
    pub fn update(
        &self,
        namespace: &str,
        plural: &str,
        name: &str,
        (manager, subresource): (&str, Option<&str>),
        fields: Value,
        change: impl FnOnce(&mut Value),
    ) {
        let mut object = self.get(namespace, plural, name);
        change(&mut object);
        let mut entries: Vec<Value> = object["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for e in &mut entries {
            disown(&mut e["fieldsV1"], &fields);
        }
        entries.retain(|e| e["fieldsV1"].as_object().is_some_and(|f| !f.is_empty()));
        let mine = |e: &Value| {
            e["manager"] == manager
                && e["operation"] == "Update"
                && e["subresource"].as_str() == subresource
        };
        match entries.iter_mut().find(|e| mine(e)) {
            Some(e) => {
                merge(&mut e["fieldsV1"], &fields);
                e["time"] = json!(now());
            }
            None => entries.push(entry(manager, subresource, fields)),
        }
        object["metadata"]["managedFields"] = json!(entries);
        self.put(namespace, object);
    }

    /// The object `name` of `plural`, for a test to change and put back.
    pub fn get(&self, namespace: &str, plural: &str, name: &str) -> Value {
        self.cluster()
            .objects
            .get(&(namespace.to_owned(), plural.to_owned()))
            .and_then(|o| o.get(name))
            .cloned()
            .unwrap_or_else(|| panic!("no {plural}/{name} in {namespace}"))
    }

    /// Deletes an object (`kubectl delete`).
    pub fn delete(&self, namespace: &str, plural: &str, name: &str) {
        self.cluster().remove(namespace, plural, name);
    }

    /// Forgets the history of writes, as the API server's watch cache does after a while: a
    /// watch from an earlier `resourceVersion` is answered `410 Gone`.
    pub fn compact(&self) {
        let mut cluster = self.cluster();
        cluster.expired_before = cluster.resource_version + 1;
        cluster.events.clear();
    }

    /// Ends every watch being served (an API server restarting, a load balancer's idle
    /// timeout): the watchers come back with their last `resourceVersion`.
    pub fn drop_watches(&self) {
        self.cluster().written().send_replace(u64::MAX);
    }

    /// Holds every watch's events and bookmarks back (`true`), as a partition between the API
    /// server and its watchers would, or lets them through again.
    pub fn hold_watches(&self, held: bool) {
        self.cluster().watches_held = held;
    }

    /// Forbids lists and watches over every namespace (`true`), as RBAC does for an account
    /// bound in each namespace only, or allows them again.
    pub fn forbid_cluster_scope(&self, forbidden: bool) {
        self.cluster().cluster_scope_forbidden = forbidden;
    }

    /// Forbids every request for `plural` (`true`), as a role without it does, or allows it
    /// again.
    pub fn forbid_kind(&self, plural: &str, forbidden: bool) {
        let mut cluster = self.cluster();
        match forbidden {
            true => cluster.forbidden_kinds.insert(plural.to_owned()),
            false => cluster.forbidden_kinds.remove(plural),
        };
    }

    /// How many watches are being served now.
    pub fn watching(&self) -> usize {
        self.cluster().watching
    }

    /// Refuses every request with `status` (401, 403), or serves again (`None`).
    pub fn refuse(&self, status: Option<u16>) {
        self.cluster().refuse = status;
    }

    /// Makes every request take `delay` (a busy API server).
    pub fn delay(&self, delay: std::time::Duration) {
        self.cluster().delay = delay;
    }

    /// The most requests served at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.cluster().max_in_flight
    }

    /// Every request path (with its query) served so far.
    pub fn requests(&self) -> Vec<String> {
        self.cluster().requests.clone()
    }
}

async fn one_grouped(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    method: axum::http::Method,
    Path((group, version, ns, plural, name)): Path<(String, String, String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let at = (format!("apis/{group}/{version}"), ns, plural, name);
    counted(&cluster, || {
        one(&cluster, method, at, &query, &headers, &body)
    })
    .await
}

async fn one_core(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    method: axum::http::Method,
    Path((ns, plural, name)): Path<(String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let at = ("api/v1".to_owned(), ns, plural, name);
    counted(&cluster, || {
        one(&cluster, method, at, &query, &headers, &body)
    })
    .await
}

/// A request for one object: read it, apply to it (server-side apply), or delete it.
fn one(
    cluster: &Mutex<Cluster>,
    method: axum::http::Method,
    (group, ns, plural, name): (String, String, String, String),
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let mut c = cluster.lock().unwrap_or_else(|e| e.into_inner());
    let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    c.requests.push(format!(
        "{method} /{group}/namespaces/{ns}/{plural}/{name}?{}",
        q.join("&")
    ));
    if let Some(refused) = refused(&c, headers, &plural, &ns) {
        return refused;
    }
    let key = (ns.clone(), plural.clone());
    let existing = c.objects.get(&key).and_then(|o| o.get(&name)).cloned();
    let not_found = || {
        status(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("{plural} \"{name}\" not found"),
        )
    };
    match method {
        axum::http::Method::GET => {
            existing.map_or_else(not_found, |o| axum::Json(o).into_response())
        }
        axum::http::Method::DELETE => {
            let Some(_) = existing else {
                return not_found();
            };
            c.remove(&ns, &plural, &name);
            let done = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": { "name": name, "kind": plural } });
            axum::Json(done).into_response()
        }
        _ => {
            let content_type = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if content_type != "application/apply-patch+yaml" {
                return status(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    "the stand-in takes server-side applies (application/apply-patch+yaml) only",
                );
            }
            let Some(manager) = query.get("fieldManager") else {
                return status(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    "fieldManager is required for apply requests",
                );
            };
            // JSON is YAML: the appliers here send JSON.
            let Ok(patch) = serde_json::from_slice::<Value>(body) else {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "the body does not read",
                );
            };
            let force = query.get("force").is_some_and(|f| f == "true");
            match applied(existing, &patch, manager, force) {
                Ok(mut object) => {
                    object["metadata"]["name"] = json!(name);
                    let object = c.store(&ns, &plural, object);
                    axum::Json(object).into_response()
                }
                Err(conflict) => status(StatusCode::CONFLICT, "Conflict", &conflict),
            }
        }
    }
}

/// The object after `manager` applies `patch` to it (server-side apply), or the conflict.
fn applied(
    existing: Option<Value>,
    patch: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, String> {
    let mut object = existing.unwrap_or_else(|| json!({ "metadata": { "generation": 0 } }));
    let mut fields = fields_of(patch);
    if let Some(f) = fields.as_object_mut() {
        f.retain(|k, _| k == "f:metadata" || k == "f:spec");
        if let Some(meta) = f.get_mut("f:metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| k == "f:labels" || k == "f:annotations");
        }
    }
    let mut entries: Vec<Value> = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mine = |e: &Value| e["manager"] == manager && e["operation"] == "Apply";
    if !force {
        for e in entries.iter().filter(|e| !mine(e)) {
            for path in leaves(&fields) {
                let owned = held(&e["fieldsV1"], &path);
                if owned && value_at(&object, &path) != value_at(patch, &path) {
                    let by = match e["subresource"].as_str() {
                        Some(s) => format!("{} with subresource {s:?}", e["manager"]),
                        None => e["manager"].to_string(),
                    };
                    return Err(format!(
                        "Apply failed with 1 conflict: conflict with {by}: .{}",
                        path.iter()
                            .map(|p| p.trim_start_matches("f:"))
                            .collect::<Vec<_>>()
                            .join(".")
                    ));
                }
            }
        }
    }
    let spec_before = object["spec"].clone();
    overlay(&mut object, patch);
    for e in entries.iter_mut().filter(|e| !mine(e)) {
        disown(&mut e["fieldsV1"], &fields);
    }
    entries.retain(|e| mine(e) || e["fieldsV1"].as_object().is_some_and(|f| !f.is_empty()));
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            e["fieldsV1"] = fields;
            e["time"] = json!(now());
        }
        None => {
            let mut e = entry(manager, None, fields);
            e["operation"] = json!("Apply");
            entries.push(e);
        }
    }
    object["metadata"]["managedFields"] = json!(entries);
    if object["spec"] != spec_before {
        roll_out(&mut object);
    }
    Ok(object)
}

/// What the workload's controller does at once here: the new spec rolled out, every replica
/// ready, written by `kube-controller-manager` through `status`.
fn roll_out(object: &mut Value) {
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
    object["metadata"]["generation"] = json!(generation);
    let n = object["spec"]["replicas"].as_i64().unwrap_or(1);
    object["status"] = json!({
        "observedGeneration": generation, "replicas": n, "updatedReplicas": n,
        "readyReplicas": n, "availableReplicas": n,
        "currentRevision": format!("r{generation}"), "updateRevision": format!("r{generation}"),
        "conditions": [
            { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable" },
            { "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable" }
        ]
    });
    let status_fields = json!({ "f:status": fields_of(&object["status"]) });
    let mut entries: Vec<Value> = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    entries
        .retain(|e| !(e["manager"] == "kube-controller-manager" && e["subresource"] == "status"));
    entries.push(entry(
        "kube-controller-manager",
        Some("status"),
        status_fields,
    ));
    object["metadata"]["managedFields"] = json!(entries);
}

/// Deep-merges `patch` into `object`: objects key by key, anything else replaced.
fn overlay(object: &mut Value, patch: &Value) {
    match (object.as_object_mut(), patch.as_object()) {
        (Some(o), Some(p)) => {
            for (k, v) in p {
                overlay(o.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        _ => *object = patch.clone(),
    }
}

/// The paths of a `fieldsV1` trie's leaves.
fn leaves(trie: &Value) -> Vec<Vec<String>> {
    let Some(o) = trie.as_object().filter(|o| !o.is_empty()) else {
        return vec![Vec::new()];
    };
    o.iter()
        .filter(|(k, _)| *k != ".")
        .flat_map(|(k, sub)| {
            leaves(sub).into_iter().map(move |mut p| {
                p.insert(0, k.clone());
                p
            })
        })
        .collect()
}

/// Whether the trie holds `path`.
fn held(trie: &Value, path: &[String]) -> bool {
    match path.split_first() {
        None => true,
        Some((k, rest)) => trie.get(k).is_some_and(|sub| held(sub, rest)),
    }
}

/// The value at a trie path in an object (`f:` a field, `k:{"name":…}` a named element).
fn value_at<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    let Some((step, rest)) = path.split_first() else {
        return Some(value);
    };
    if let Some(field) = step.strip_prefix("f:") {
        return value_at(value.get(field)?, rest);
    }
    let key: Value = serde_json::from_str(step.strip_prefix("k:")?).ok()?;
    let item = value
        .as_array()?
        .iter()
        .find(|i| i.get("name") == key.get("name"))?;
    value_at(item, rest)
}

/// A `managedFields` entry of an `Update` by `manager`, written now.
fn entry(manager: &str, subresource: Option<&str>, fields: Value) -> Value {
    let mut e = json!({ "manager": manager, "operation": "Update", "apiVersion": "apps/v1",
                        "time": now(), "fieldsType": "FieldsV1", "fieldsV1": fields });
    if let Some(s) = subresource {
        e["subresource"] = json!(s);
    }
    e
}

/// The time as the API server writes it (whole seconds), made distinct per write: writes
/// within one second still order by time, as the tests' mutations follow each other closely.
fn now() -> String {
    static LAST: Mutex<i64> = Mutex::new(0);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let t = chrono::Utc::now().timestamp().max(*last + 1);
    *last = t;
    chrono::DateTime::from_timestamp(t, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The `fieldsV1` trie of every field `value` sets: `f:<name>` per field, `k:{"name":…}` per
/// element of a list of named objects, `{}` at the leaves.
pub fn fields_of(value: &Value) -> Value {
    match value {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (format!("f:{k}"), fields_of(v)))
                .collect(),
        ),
        Value::Array(items) if items.iter().all(|i| i.get("name").is_some()) => Value::Object(
            items
                .iter()
                .map(|i| {
                    let key = format!("k:{}", json!({ "name": i["name"] }));
                    (key, fields_of(i))
                })
                .collect(),
        ),
        _ => json!({}),
    }
}

/// Removes from `owned` the leaves of `taken`.
fn disown(owned: &mut Value, taken: &Value) {
    let (Some(owned), Some(taken)) = (owned.as_object_mut(), taken.as_object()) else {
        return;
    };
    for (k, sub) in taken {
        let leaf = sub.as_object().is_none_or(|s| s.is_empty());
        if leaf {
            owned.remove(k);
        } else if let Some(child) = owned.get_mut(k) {
            disown(child, sub);
            if child.as_object().is_some_and(|c| c.is_empty()) {
                owned.remove(k);
            }
        }
    }
}

/// Adds the fields of `more` to `owned`.
fn merge(owned: &mut Value, more: &Value) {
    let (Some(owned), Some(more)) = (owned.as_object_mut(), more.as_object()) else {
        return;
    };
    for (k, sub) in more {
        let child = owned.entry(k.clone()).or_insert_with(|| json!({}));
        merge(child, sub);
    }
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code.as_u16() });
    (code, axum::Json(body)).into_response()
}

async fn not_found() -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

async fn list_grouped(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    Path((group, version, ns, plural)): Path<(String, String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    counted(&cluster, || {
        serve_list(
            &cluster,
            &format!("apis/{group}/{version}"),
            Some(&ns),
            &plural,
            &query,
            &headers,
        )
    })
    .await
}

/// Serves `respond` after the configured delay, counting the requests in flight.
async fn counted(cluster: &Mutex<Cluster>, respond: impl FnOnce() -> Response) -> Response {
    let delay = {
        let mut c = cluster.lock().unwrap_or_else(|e| e.into_inner());
        c.in_flight += 1;
        c.max_in_flight = c.max_in_flight.max(c.in_flight);
        c.delay
    };
    tokio::time::sleep(delay).await;
    let response = respond();
    cluster.lock().unwrap_or_else(|e| e.into_inner()).in_flight -= 1;
    response
}

async fn list(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    Path((ns, plural)): Path<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    counted(&cluster, || {
        serve_list(&cluster, "api/v1", Some(&ns), &plural, &query, &headers)
    })
    .await
}

/// 401 without the token, or the refusal a test asked for.
fn refused(cluster: &Cluster, headers: &HeaderMap, plural: &str, ns: &str) -> Option<Response> {
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {TOKEN}"));
    if !authorized || cluster.refuse == Some(401) {
        return Some(status(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized",
        ));
    }
    (cluster.refuse.is_some() || cluster.forbidden_kinds.contains(plural)).then(|| {
        status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            &format!(
                "{plural} is forbidden: User \"system:serviceaccount:runtime-cloud:observer\" cannot list resource \"{plural}\" in API group \"\" in the namespace \"{ns}\""
            ),
        )
    })
}

/// A list of `plural` in namespace `ns`, or in every namespace.
fn serve_list(
    cluster: &Mutex<Cluster>,
    group: &str,
    ns: Option<&str>,
    plural: &str,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    let mut cluster = cluster.lock().unwrap_or_else(|e| e.into_inner());
    let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let path = match ns {
        Some(ns) => format!("/{group}/namespaces/{ns}/{plural}"),
        None => format!("/{group}/{plural}"),
    };
    cluster.requests.push(format!("{path}?{}", q.join("&")));
    if let Some(refused) = refused(&cluster, headers, plural, ns.unwrap_or_default()) {
        return refused;
    }
    let Some((_, _, list_kind)) = KINDS.iter().find(|(g, p, _)| *g == group && *p == plural) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let selector = Selector::of(query);
    // One namespace's list looks its objects up, as the API server's storage does by key
    // prefix: walking every namespace's made each list cost as much as the whole fleet.
    let in_namespace;
    let kept: Box<dyn Iterator<Item = &BTreeMap<String, Value>>> = match ns {
        Some(ns) => {
            in_namespace = cluster.objects.get(&(ns.to_owned(), plural.to_owned()));
            Box::new(in_namespace.into_iter())
        }
        None => Box::new(
            cluster
                .objects
                .iter()
                .filter(|((_, p), _)| p == plural)
                .map(|(_, o)| o),
        ),
    };
    let matching: Vec<Value> = kept
        .flat_map(|o| o.values())
        .filter(|o| selector.matches(o))
        .cloned()
        .collect();
    // `continue` is the offset of the next page here; real servers make it opaque.
    let start: usize = query
        .get("continue")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let end = start.saturating_add(limit).min(matching.len());
    let page = matching.get(start..end).unwrap_or_default().to_vec();
    let mut metadata = json!({ "resourceVersion": cluster.resource_version.to_string() });
    if end < matching.len() {
        metadata["continue"] = json!(end.to_string());
        metadata["remainingItemCount"] = json!(matching.len() - end);
    }
    let api_version = group.trim_start_matches("apis/").trim_start_matches("api/");
    axum::Json(json!({ "kind": list_kind, "apiVersion": api_version,
                       "metadata": metadata, "items": page }))
    .into_response()
}

/// A `labelSelector` of `key=value` terms.
struct Selector(Vec<(String, String)>);

impl Selector {
    fn of(query: &BTreeMap<String, String>) -> Self {
        let terms = query
            .get("labelSelector")
            .map(|s| {
                s.split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Self(terms)
    }

    fn matches(&self, object: &Value) -> bool {
        self.0
            .iter()
            .all(|(k, v)| object["metadata"]["labels"][k.as_str()].as_str() == Some(v.as_str()))
    }
}

async fn everywhere_core(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    Path(plural): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    everywhere(cluster, "api/v1".into(), plural, query, headers).await
}

async fn everywhere_grouped(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    Path((group, version, plural)): Path<(String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    everywhere(
        cluster,
        format!("apis/{group}/{version}"),
        plural,
        query,
        headers,
    )
    .await
}

/// A list or a watch of `plural` in every namespace.
async fn everywhere(
    cluster: Arc<Mutex<Cluster>>,
    group: String,
    plural: String,
    query: BTreeMap<String, String>,
    headers: HeaderMap,
) -> Response {
    let forbidden = {
        let mut c = cluster.lock().unwrap_or_else(|e| e.into_inner());
        if c.cluster_scope_forbidden {
            let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            c.requests
                .push(format!("/{group}/{plural}?{}", q.join("&")));
        }
        c.cluster_scope_forbidden
    };
    if forbidden {
        let verb = if query.contains_key("watch") {
            "watch"
        } else {
            "list"
        };
        let group_name = group
            .trim_start_matches("apis/")
            .split('/')
            .next()
            .unwrap_or_default();
        let group_name = if group_name == "api" { "" } else { group_name };
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            &format!(
                "{plural} is forbidden: User \"system:serviceaccount:runtime-cloud:runtime-cloud-worker\" cannot {verb} resource \"{plural}\" in API group \"{group_name}\" at the cluster scope"
            ),
        );
    }
    if query.get("watch").is_some_and(|w| w == "true" || w == "1") {
        return watch(cluster, &group, &plural, &query, &headers);
    }
    counted(&cluster, || {
        serve_list(&cluster, &group, None, &plural, &query, &headers)
    })
    .await
}

/// How often a watch with `allowWatchBookmarks` is sent a bookmark while nothing changes
/// (the API server sends them about once a minute; a test cannot wait that long).
const BOOKMARK_EVERY: Duration = Duration::from_secs(1);

/// One watch event, as a line of the stream.
fn event_line(kind: &str, object: &Value) -> axum::body::Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    axum::body::Bytes::from(line)
}

/// A watch of `plural` in every namespace from the request's `resourceVersion`: the writes
/// after it, one JSON object per line, as they happen.
fn watch(
    cluster: Arc<Mutex<Cluster>>,
    group: &str,
    plural: &str,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    let mut c = cluster.lock().unwrap_or_else(|e| e.into_inner());
    let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    c.requests
        .push(format!("/{group}/{plural}?{}", q.join("&")));
    if let Some(refused) = refused(&c, headers, plural, "") {
        return refused;
    }
    let Some((_, _, list_kind)) = KINDS.iter().find(|(g, p, _)| *g == group && *p == plural) else {
        return not_found_now();
    };
    let kind = list_kind.trim_end_matches("List").to_owned();
    let api_version = group
        .trim_start_matches("apis/")
        .trim_start_matches("api/")
        .to_owned();
    let from: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(c.resource_version);
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(Duration::from_secs(290), Duration::from_secs);
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let selector = Selector::of(query);
    let response = |body: axum::body::Body| {
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    };
    if from < c.expired_before.saturating_sub(1) {
        // What the API server's watch cache answers a version it no longer holds.
        let gone = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure",
                           "message": format!("too old resource version: {from} ({})", c.expired_before - 1),
                           "reason": "Expired", "code": 410 });
        return response(axum::body::Body::from(event_line("ERROR", &gone)));
    }
    let mut written = c.written().subscribe();
    c.watching += 1;
    drop(c);
    let plural = plural.to_owned();
    let deadline = tokio::time::Instant::now() + timeout;
    let (tx, rx) =
        tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        let mut last = from;
        'serving: loop {
            let (lines, current, held) = {
                let c = cluster.lock().unwrap_or_else(|e| e.into_inner());
                let lines: Vec<axum::body::Bytes> = c
                    .events
                    .iter()
                    .filter(|w| w.resource_version > last && w.plural == plural)
                    .filter(|w| selector.matches(&w.object))
                    .map(|w| event_line(w.kind, &w.object))
                    .collect();
                (lines, c.resource_version, c.watches_held)
            };
            if !held {
                last = current;
            }
            for line in lines.into_iter().filter(|_| !held) {
                if tx.send(Ok(line)).await.is_err() {
                    break 'serving;
                }
            }
            tokio::select! {
                changed = written.changed() => {
                    if changed.is_err() || *written.borrow() == u64::MAX {
                        break;
                    }
                }
                () = tokio::time::sleep(BOOKMARK_EVERY) => {
                    if bookmarks && !held {
                        // As the captured bookmarks: the kind, the version, the type's empty
                        // spec and status.
                        let mark = json!({ "kind": kind, "apiVersion": api_version,
                                           "metadata": { "resourceVersion": last.to_string() },
                                           "spec": {}, "status": {} });
                        if tx.send(Ok(event_line("BOOKMARK", &mark))).await.is_err() {
                            break;
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => break,
                () = tx.closed() => break,
            }
        }
        cluster.lock().unwrap_or_else(|e| e.into_inner()).watching -= 1;
    });
    let lines = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (line, rx))
    });
    response(axum::body::Body::from_stream(lines))
}

fn not_found_now() -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}
