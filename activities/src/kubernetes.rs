//! The Kubernetes adapter of the Observer port: an environment's namespace read through the
//! cluster API (`kube`), one paginated list per kind — Deployments, StatefulSets, DaemonSets
//! (with the target's label selector), Services and Ingresses (for endpoints) — never one call
//! per workload, and never a Secret: the pod templates name the Secrets they use, and
//! [`mapping`] keeps those names as references.
//!
//! The cluster is the target's kubeconfig, resolved through the secrets port when observing
//! (`kubeconfigRef`, with an optional `context`), or the worker pod's own service account
//! (`inCluster`). Any failure to read — unreachable, 401, 403, a timeout — is
//! [`Error::Unreachable`]: the environment goes stale with the reason and nothing is raised.

pub mod mapping;

use crate::Error;
use crate::ports::{Observer, Target};
use crate::references::SecretBroker;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ListParams};
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::targets::{KubernetesNamespace, ObserverTarget};
use std::sync::Arc;
use std::time::Duration;

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
}

impl Kubernetes {
    pub fn new(db: sea_orm::DatabaseConnection, secrets: Arc<dyn SecretBroker>) -> Self {
        Self { db, secrets }
    }

    /// The namespace the environment's target names.
    async fn namespace(&self, target: &Target) -> Result<KubernetesNamespace, Error> {
        let env = runtime_cloud_store::environments::find(
            &self.db,
            &target.tenant_id,
            &target.environment_id,
        )
        .await?;
        match env.map(|e| e.target.observer) {
            Some(ObserverTarget::Kubernetes(ns)) => Ok(ns),
            _ => Err(Error::Unreachable(format!(
                "environment `{}` has no Kubernetes namespace as its observer",
                target.environment_id
            ))),
        }
    }

    /// A client of the namespace's cluster.
    async fn client(&self, ns: &KubernetesNamespace) -> Result<kube::Client, Error> {
        let unreachable = |what: &str, e: &dyn std::fmt::Display| {
            Error::Unreachable(format!("the cluster's {what}: {e}"))
        };
        let mut config = match &ns.kubeconfig_ref {
            Some(reference) => {
                let text = self.secrets.resolve(reference).await.map_err(|e| match e {
                    Error::PlanInvalid(why) => Error::Unreachable(format!("kubeconfigRef: {why}")),
                    other => other,
                })?;
                let kubeconfig = kube::config::Kubeconfig::from_yaml(text.expose())
                    .map_err(|e| unreachable("kubeconfig does not read", &e))?;
                let options = kube::config::KubeConfigOptions {
                    context: ns.context.clone(),
                    ..Default::default()
                };
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|e| unreachable("kubeconfig", &e))?
            }
            None => {
                kube::Config::incluster().map_err(|e| unreachable("in-cluster credentials", &e))?
            }
        };
        config.connect_timeout = Some(CALL_TIMEOUT);
        config.read_timeout = Some(CALL_TIMEOUT);
        kube::Client::try_from(config).map_err(|e| unreachable("client", &e))
    }
}

/// Every object of kind `K` in the namespace, page by page.
async fn list_all<K>(
    client: &kube::Client,
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
        let page = api.list(&params).await.map_err(|e| {
            Error::Unreachable(format!(
                "listing {} in namespace {namespace}: {e}",
                K::plural(&Default::default())
            ))
        })?;
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
        let ns = self.namespace(target).await?;
        let client = self.client(&ns).await?;
        let selector = ns.label_selector.as_deref();
        let name = ns.namespace.as_str();
        // One list per kind, all at once: five calls a namespace, whatever it holds.
        let (deployments, stateful_sets, daemon_sets, services, ingresses) = tokio::try_join!(
            list_all(&client, name, selector),
            list_all(&client, name, selector),
            list_all(&client, name, selector),
            list_all(&client, name, None),
            list_all(&client, name, None),
        )?;
        let objects = mapping::Objects {
            deployments,
            stateful_sets,
            daemon_sets,
            services,
            ingresses,
        };
        Ok(mapping::workloads(name, &objects))
    }
}
