//! The Kubernetes adapter of the Observer port: an environment's namespace read through the
//! cluster API (`kube`), one paginated list per kind — Deployments, StatefulSets, DaemonSets
//! (with the target's label selector), Services and Ingresses (for endpoints), NetworkPolicies
//! (for the security posture) — never one call per workload, and never a Secret: the pod
//! templates name the Secrets they use, and [`mapping`] keeps those names as references.
//!
//! The cluster is the target's kubeconfig, resolved through the secrets port when observing
//! (`kubeconfigRef`, with an optional `context`), or the worker pod's own service account
//! (`inCluster`). Any failure to read — unreachable, 401, 403, a timeout — is
//! [`Error::Unreachable`]: the environment goes stale with the reason and nothing is raised.

pub mod mapping;
pub mod owners;
pub mod watch;

use crate::Error;
use crate::ports::{Observed, Observer, Target};
use crate::references::SecretBroker;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ListParams};
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::targets::{KubernetesCluster, KubernetesNamespace, ObserverTarget};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Objects per list page (`limit`; the rest follows with `continue`).
const PAGE: u32 = 500;
/// How long one list call may take before the cluster counts as unreachable.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Reads Kubernetes namespaces.
#[derive(Clone)]
pub struct Kubernetes {
    db: sea_orm::DatabaseConnection,
    /// Resolves `kubeconfigRef`.
    secrets: Arc<dyn SecretBroker>,
    /// At most this many list calls in flight to one cluster (by its API server's URL), from
    /// all the observations of this worker: a sweep over many namespaces of one cluster never
    /// floods its API server.
    calls_per_cluster: usize,
    clusters: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    /// The clients made, by what they were made from ([`Self::client`]).
    clients: Arc<Mutex<HashMap<String, Made>>>,
    /// Whether observations read the security posture (`models::posture`): the pod templates'
    /// facts, the Services and Ingresses, and one more list call for the NetworkPolicies.
    pub(crate) posture: bool,
}

impl Kubernetes {
    pub fn new(
        db: sea_orm::DatabaseConnection,
        secrets: Arc<dyn SecretBroker>,
        calls_per_cluster: usize,
        posture: bool,
    ) -> Self {
        Self {
            db,
            secrets,
            calls_per_cluster: calls_per_cluster.max(1),
            clusters: Default::default(),
            clients: Default::default(),
            posture,
        }
    }

    /// The permits of calls to the cluster at `url`.
    fn permits(&self, url: &str) -> Arc<Semaphore> {
        let mut clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        clusters
            .entry(url.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.calls_per_cluster)))
            .clone()
    }

    /// The namespace the environment's target names.
    async fn namespace(&self, target: &Target) -> Result<KubernetesNamespace, Error> {
        let observer = crate::ports::target_of(&self.db, target)
            .await
            .map_err(|e| match e {
                Error::PlanInvalid(why) => Error::Unreachable(why),
                other => other,
            })?
            .observer;
        match observer {
            ObserverTarget::Kubernetes(ns) => Ok(ns),
            ObserverTarget::Sandbox => Err(Error::Unreachable(format!(
                "environment `{}` has no Kubernetes namespace as its observer",
                target.environment_id
            ))),
        }
    }

    /// A client of the namespace's cluster, and the permits of calls to it.
    ///
    /// A client made from the same kubeconfig (the same text, context and reference) in the
    /// last [`CLIENT_FOR`] is used again: it keeps its connections to the API server open
    /// from one observation to the next, where a client per observation loaded the trusted
    /// roots, connected and shook hands again for each of its six lists. A kubeconfig that
    /// changes (a rotated secret) makes a new one at once; certificate files it names by path
    /// are read again after [`CLIENT_FOR`].
    async fn client(
        &self,
        ns: &KubernetesNamespace,
    ) -> Result<(kube::Client, Arc<Semaphore>), Error> {
        let cluster = ns.cluster();
        let source = self.source(&cluster).await?;
        let now = std::time::Instant::now();
        let key = source.key(&cluster);
        {
            let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(made) = clients.get(&key).filter(|m| now < m.until) {
                return Ok((made.client.clone(), made.permits.clone()));
            }
        }
        let mut config = self.config_of(&cluster, source).await?;
        config.connect_timeout = Some(CALL_TIMEOUT);
        config.read_timeout = Some(CALL_TIMEOUT);
        let permits = self.permits(&config.cluster_url.to_string());
        let client = kube::Client::try_from(config)
            .map_err(|e| Error::Unreachable(format!("the cluster's client: {e}")))?;
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain(|_, m| now < m.until);
        let made = Made {
            client: client.clone(),
            permits: permits.clone(),
            until: now + CLIENT_FOR,
        };
        clients.insert(key, made);
        Ok((client, permits))
    }

    /// What `cluster`'s kubeconfig is made from: the file it names (read now), the text its
    /// reference resolves to, or the worker pod's service account.
    async fn source(&self, cluster: &KubernetesCluster) -> Result<Source, Error> {
        let Some(reference) = &cluster.kubeconfig_ref else {
            return Ok(Source::InCluster);
        };
        match kubeconfig_file(reference) {
            Some(path) => {
                let text = tokio::fs::read_to_string(&path).await.map_err(|e| {
                    Error::Unreachable(format!("the cluster's kubeconfig does not read: {e}"))
                })?;
                Ok(Source::File(path, text))
            }
            None => {
                let text = self.secrets.resolve(reference).await.map_err(|e| match e {
                    Error::PlanInvalid(why) => Error::Unreachable(format!("kubeconfigRef: {why}")),
                    other => other,
                })?;
                Ok(Source::Text(text))
            }
        }
    }

    /// How to reach `cluster`: its kubeconfig (resolved through the secrets port unless it is
    /// a file) or the worker pod's service account.
    pub(crate) async fn config(&self, cluster: &KubernetesCluster) -> Result<kube::Config, Error> {
        let source = self.source(cluster).await?;
        self.config_of(cluster, source).await
    }

    /// [`Self::config`] from its `source`, read already.
    async fn config_of(
        &self,
        cluster: &KubernetesCluster,
        source: Source,
    ) -> Result<kube::Config, Error> {
        let unreachable = |what: &str, e: &dyn std::fmt::Display| {
            Error::Unreachable(format!("the cluster's {what}: {e}"))
        };
        let kubeconfig = match source {
            Source::InCluster => {
                return kube::Config::incluster()
                    .map_err(|e| unreachable("in-cluster credentials", &e));
            }
            // Read as a file, the kubeconfig's relative certificate, key and token paths name
            // files beside it (as kubectl reads them), not in the worker's working directory.
            Source::File(path, _) => kube::config::Kubeconfig::read_from(path)
                .map_err(|e| unreachable("kubeconfig does not read", &e))?,
            Source::Text(text) => kube::config::Kubeconfig::from_yaml(text.expose())
                .map_err(|e| unreachable("kubeconfig does not read", &e))?,
        };
        let options = kube::config::KubeConfigOptions {
            context: cluster.context.clone(),
            ..Default::default()
        };
        kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| unreachable("kubeconfig", &e))
    }
}

/// How long a client made is used again ([`Kubernetes::client`]).
const CLIENT_FOR: Duration = Duration::from_secs(300);

/// A client made, the permits of calls to its cluster, and until when it is used again.
struct Made {
    client: kube::Client,
    permits: Arc<Semaphore>,
    until: std::time::Instant,
}

/// What a cluster's kubeconfig is made from.
enum Source {
    InCluster,
    /// A file, and its text as read.
    File(std::path::PathBuf, String),
    /// The text a reference resolved to.
    Text(crate::references::Resolved),
}

impl Source {
    /// What a client made from this for `cluster` is known by: a digest, so no kubeconfig's
    /// credentials are kept beyond the client itself.
    fn key(&self, cluster: &KubernetesCluster) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        // The reference and the context.
        hash.update(cluster.id().as_bytes());
        hash.update(b"\0");
        match self {
            Self::InCluster => hash.update(b"in-cluster"),
            Self::File(path, text) => {
                hash.update(path.as_os_str().as_encoded_bytes());
                hash.update(b"\0");
                hash.update(text.as_bytes());
            }
            Self::Text(text) => hash.update(text.expose().as_bytes()),
        }
        hex::encode(hash.finalize())
    }
}

/// The file a `kubeconfigRef` names as a whole (`file:///path`, no `#key`), made absolute.
fn kubeconfig_file(reference: &str) -> Option<std::path::PathBuf> {
    let path = reference.strip_prefix("file://")?;
    if path.contains('#') {
        return None;
    }
    std::path::absolute(path).ok()
}

/// Every object of kind `K` in the namespace, page by page; any failure is
/// [`Error::Unreachable`].
async fn list_all<K>(
    cluster: (&kube::Client, &Semaphore),
    namespace: &str,
    selector: Option<&str>,
) -> Result<Vec<K>, Error>
where
    K: kube::Resource<Scope = NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    list_pages(cluster, namespace, selector).await.map_err(|e| {
        Error::Unreachable(format!(
            "listing {} in namespace {namespace}: {e}",
            K::plural(&Default::default())
        ))
    })
}

/// How many NetworkPolicies the namespace has; none when the observer may not list them (a
/// role from before posture findings, a cluster without the API): no finding is made up.
async fn network_policies(
    cluster: (&kube::Client, &Semaphore),
    namespace: &str,
) -> Result<Option<usize>, Error> {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    match list_pages::<NetworkPolicy>(cluster, namespace, None).await {
        Ok(policies) => Ok(Some(policies.len())),
        Err(kube::Error::Api(status)) if status.is_forbidden() || status.is_not_found() => {
            tracing::debug!(
                namespace,
                code = status.code,
                "NetworkPolicies cannot be listed: no finding of them"
            );
            Ok(None)
        }
        Err(e) => Err(Error::Unreachable(format!(
            "listing networkpolicies in namespace {namespace}: {e}"
        ))),
    }
}

/// [`list_all`], with the cluster's own error.
async fn list_pages<K>(
    (client, permits): (&kube::Client, &Semaphore),
    namespace: &str,
    selector: Option<&str>,
) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource<Scope = NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(s) = selector {
            params = params.labels(s);
        }
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let _permit = permits
            .acquire()
            .await
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(items),
        }
    }
}

#[async_trait::async_trait]
impl Observer for Kubernetes {
    async fn observe(&self, target: &Target) -> Result<Vec<ObservedWorkload>, Error> {
        Ok(self.read(target).await?.workloads)
    }

    async fn read(&self, target: &Target) -> Result<Observed, Error> {
        let ns = self.namespace(target).await?;
        let (client, permits) = self.client(&ns).await?;
        let cluster = (&client, &*permits);
        let selector = ns.label_selector.as_deref();
        let name = ns.namespace.as_str();
        // One list per kind, at once within the cluster's permits: five calls a namespace,
        // whatever it holds, and a sixth for the NetworkPolicies when posture is read.
        let policies = async {
            match self.posture {
                true => network_policies(cluster, name).await,
                false => Ok(None),
            }
        };
        let (deployments, stateful_sets, daemon_sets, services, ingresses, policies) = tokio::try_join!(
            list_all(cluster, name, selector),
            list_all(cluster, name, selector),
            list_all(cluster, name, selector),
            list_all(cluster, name, None),
            list_all(cluster, name, None),
            policies,
        )?;
        let objects = mapping::Objects {
            deployments,
            stateful_sets,
            daemon_sets,
            services,
            ingresses,
        };
        let posture = match self.posture {
            true => mapping::posture(name, &objects, policies),
            false => Vec::new(),
        };
        Ok(Observed {
            workloads: mapping::workloads(name, &objects),
            posture,
            ..Observed::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One client per kubeconfig: a second observation of the cluster uses the client made
    /// for the first (its connections), and a kubeconfig that changed makes a new one.
    #[tokio::test]
    async fn a_clusters_client_is_made_once_until_its_kubeconfig_changes() {
        let tmp = tempfile::tempdir().expect("dir");
        let path = std::path::absolute(tmp.path().join("kubeconfig")).expect("absolute");
        let kubeconfig = |server: &str| {
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
            )
        };
        std::fs::write(&path, kubeconfig("http://127.0.0.1:1")).expect("kubeconfig");
        let db = sea_orm::Database::connect("sqlite::memory:")
            .await
            .expect("db");
        let k = Kubernetes::new(db, Arc::new(crate::references::LocalReferences), 8, true);
        let ns = KubernetesNamespace {
            kubeconfig_ref: Some(format!("file://{}", path.display())),
            context: None,
            in_cluster: false,
            namespace: "shop".into(),
            label_selector: None,
        };
        let made = |k: &Kubernetes| k.clients.lock().expect("clients").len();
        let (_, first) = k.client(&ns).await.expect("a client");
        let (_, again) = k.client(&ns).await.expect("the same client");
        assert_eq!(made(&k), 1);
        assert!(
            Arc::ptr_eq(&first, &again),
            "one cluster, one set of permits"
        );
        std::fs::write(&path, kubeconfig("http://127.0.0.1:2")).expect("kubeconfig");
        k.client(&ns).await.expect("a new client");
        assert_eq!(made(&k), 2, "the changed kubeconfig made its own");
    }

    /// A kubeconfig named as a file reads its relative certificate and key paths beside it,
    /// wherever the worker runs; one named with `#key` is a value, not a file.
    #[test]
    fn a_kubeconfig_file_names_its_certificates_beside_it() {
        let tmp = tempfile::tempdir().expect("dir");
        let dir = std::path::absolute(tmp.path()).expect("absolute");
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'https://k:6443', certificate-authority: ca.crt}}]\n\
             users: [{name: u, user: {client-certificate: tls/client.crt, client-key: tls/client.key}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u}}]\n",
        )
        .expect("kubeconfig");
        let file = kubeconfig_file(&format!("file://{}", path.display())).expect("a file");
        let read = kube::config::Kubeconfig::read_from(file).expect("reads");
        let cluster = read.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some(dir.join("ca.crt").to_str().expect("utf-8"))
        );
        let user = read.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(
            user.client_key.as_deref(),
            Some(dir.join("tls/client.key").to_str().expect("utf-8"))
        );
        assert_eq!(
            kubeconfig_file("file:///etc/k.toml#cluster.kubeconfig"),
            None
        );
        assert_eq!(kubeconfig_file("env://KUBECONFIG_TEXT"), None);
    }
}
