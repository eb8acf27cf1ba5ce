//! Where an environment runs: the runner that plans and applies it, and the observer that
//! reads what it runs. Stored with the environment, chosen per environment by the worker.
//!
//! ```json
//! {"runner": {"kind": "sandbox"}, "observer": {"kind": "sandbox"}}
//! {"runner": {"kind": "pulumi", "stack": "acme/shop/prod", "backendUrl": "s3://state-bucket",
//!             "passphraseRef": "secretbroker://shop/pulumi-passphrase"}}
//! ```
//!
//! A target holds references only: a passphrase is named (`passphraseRef`), never given.

use crate::validation::is_reference;
use serde::{Deserialize, Serialize};

/// An environment's target. Either half defaults to the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Plans and applies.
    #[serde(default)]
    pub runner: RunnerTarget,
    /// Reads what runs.
    #[serde(default)]
    pub observer: ObserverTarget,
}

/// The runner of an environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RunnerTarget {
    /// The embedded simulated target (`runtime-cloud sandbox` edits it).
    #[default]
    Sandbox,
    /// A Pulumi stack, driven through the `pulumi` CLI.
    Pulumi(PulumiStack),
}

/// A Pulumi stack and where its state lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PulumiStack {
    /// `organization/project/stack`.
    pub stack: String,
    /// The state backend: `file://…`, `s3://…` or `https://…` (Pulumi Cloud).
    pub backend_url: String,
    /// A reference to the passphrase of the stack's secrets provider, resolved at apply time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passphrase_ref: Option<String>,
    /// A reference to the credential of a private program repository, resolved when the
    /// runner fetches: `user:token` or a bare token for https, a private key for ssh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_credential_ref: Option<String>,
}

/// The observer of an environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ObserverTarget {
    /// The embedded simulated target.
    #[default]
    Sandbox,
    /// A namespace of a Kubernetes cluster, read through its API.
    Kubernetes(KubernetesNamespace),
}

/// Where a Kubernetes observer reads: a cluster (a kubeconfig reference and context, or the
/// pod's own service account), a namespace and an optional label selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesNamespace {
    /// A reference to a kubeconfig (`file:///…`, `secretbroker://…`), resolved when observing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_ref: Option<String>,
    /// The kubeconfig's context; its current context when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The worker's own service account, instead of a kubeconfig.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_cluster: bool,
    pub namespace: String,
    /// Only workloads with these labels (`app.kubernetes.io/part-of=shop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

impl Target {
    /// What is wrong with this target, if anything, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        match &self.runner {
            RunnerTarget::Sandbox => Ok(()),
            RunnerTarget::Pulumi(p) => p.validate(),
        }?;
        match &self.observer {
            ObserverTarget::Sandbox => Ok(()),
            ObserverTarget::Kubernetes(k) => k.validate(),
        }
    }

    /// The runner's kind, for logs and metrics.
    pub fn runner_kind(&self) -> &'static str {
        match self.runner {
            RunnerTarget::Sandbox => "sandbox",
            RunnerTarget::Pulumi(_) => "pulumi",
        }
    }
}

/// A cluster the product observes namespaces of: how it is reached, whatever the namespace.
/// Every environment observed there shares its watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesCluster {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_cluster: bool,
}

impl KubernetesCluster {
    /// A short stable name for the cluster, for its watch's workflow id: a digest of how it is
    /// reached (the reference names a secret; the id never shows it).
    pub fn id(&self) -> String {
        use sha2::{Digest, Sha256};
        let canonical = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(&Sha256::digest(canonical)[..8])
    }
}

impl KubernetesNamespace {
    /// The cluster this namespace is in.
    pub fn cluster(&self) -> KubernetesCluster {
        KubernetesCluster {
            kubeconfig_ref: self.kubeconfig_ref.clone(),
            context: self.context.clone(),
            in_cluster: self.in_cluster,
        }
    }
}

impl KubernetesNamespace {
    fn validate(&self) -> Result<(), String> {
        match (&self.kubeconfig_ref, self.in_cluster) {
            (Some(_), true) | (None, false) => {
                return Err(
                    "target.observer needs exactly one of kubeconfigRef and inCluster: true"
                        .to_owned(),
                );
            }
            (Some(r), false) if !is_reference(r) => {
                return Err(
                    "target.observer.kubeconfigRef must be a reference (scheme://…), never the \
                     kubeconfig"
                        .to_owned(),
                );
            }
            _ => {}
        }
        if self.in_cluster && self.context.is_some() {
            return Err("target.observer.context needs a kubeconfigRef".to_owned());
        }
        // An RFC 1123 label, as Kubernetes names namespaces.
        let ns = &self.namespace;
        let label = !ns.is_empty()
            && ns.len() <= 63
            && ns
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !ns.starts_with('-')
            && !ns.ends_with('-');
        if !label {
            return Err(format!(
                "target.observer.namespace `{ns}` must be 1–63 characters of [a-z0-9-], not \
                 starting or ending with -"
            ));
        }
        if let Some(sel) = &self.label_selector
            && (sel.trim().is_empty() || sel.chars().any(char::is_control))
        {
            return Err("target.observer.labelSelector must be a label selector".to_owned());
        }
        Ok(())
    }
}

impl PulumiStack {
    fn validate(&self) -> Result<(), String> {
        let segment = |s: &str| {
            !s.is_empty()
                && s.len() <= 100
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        let parts: Vec<&str> = self.stack.split('/').collect();
        if parts.len() != 3 || !parts.iter().all(|p| segment(p)) {
            return Err(format!(
                "target.runner.stack `{}` must be `organization/project/stack`, each part \
                 1–100 characters of [A-Za-z0-9._-]",
                self.stack
            ));
        }
        let backend = &self.backend_url;
        let scheme_ok = ["file://", "s3://", "https://"]
            .iter()
            .any(|s| backend.starts_with(s) && backend.len() > s.len());
        if !scheme_ok {
            return Err(format!(
                "target.runner.backendUrl `{backend}` must be a file://, s3:// or https:// URL"
            ));
        }
        for (field, value, what) in [
            ("passphraseRef", &self.passphrase_ref, "the passphrase"),
            (
                "repositoryCredentialRef",
                &self.repository_credential_ref,
                "the credential",
            ),
        ] {
            if let Some(r) = value
                && !is_reference(r)
            {
                return Err(format!(
                    "target.runner.{field} must be a reference (scheme://…), never {what}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pulumi(v: serde_json::Value) -> Target {
        serde_json::from_value(json!({ "runner": v })).unwrap()
    }

    #[test]
    fn the_default_is_the_sandbox_on_both_halves() {
        let t: Target = serde_json::from_value(json!({})).unwrap();
        assert_eq!(t, Target::default());
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({ "runner": { "kind": "sandbox" }, "observer": { "kind": "sandbox" } })
        );
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn a_kubernetes_observer_names_one_cluster_credential_and_a_namespace() {
        let target = |observer: serde_json::Value| -> Result<(), String> {
            let t: Target = serde_json::from_value(json!({ "observer": observer }))
                .map_err(|e| e.to_string())?;
            t.validate()
        };
        let good = json!({ "kind": "kubernetes", "kubeconfigRef": "file:///etc/kube/config",
                           "context": "prod-eu", "namespace": "shop",
                           "labelSelector": "app.kubernetes.io/part-of=shop" });
        assert_eq!(target(good.clone()), Ok(()));
        assert_eq!(
            target(json!({ "kind": "kubernetes", "inCluster": true, "namespace": "shop" })),
            Ok(())
        );
        let with = |k: &str, v: serde_json::Value| {
            let mut t = good.clone();
            t[k] = v;
            target(t).unwrap_err()
        };
        assert!(with("inCluster", json!(true)).contains("exactly one"));
        assert!(with("kubeconfigRef", json!("apiVersion: v1")).contains("reference"));
        assert!(with("namespace", json!("Shop_EU")).contains("namespace"));
        assert!(with("namespace", json!("")).contains("namespace"));
        assert!(with("labelSelector", json!(" ")).contains("labelSelector"));
        assert!(with("clusterUrl", json!("https://x")).contains("unknown field"));
        let none = json!({ "kind": "kubernetes", "namespace": "shop" });
        assert!(target(none).unwrap_err().contains("exactly one"));
        // Shown as given, without the defaults.
        let t: Target = serde_json::from_value(json!({ "observer": good.clone() })).unwrap();
        assert_eq!(serde_json::to_value(&t).unwrap()["observer"], good);
    }

    #[test]
    fn a_pulumi_stack_is_checked_field_by_field() {
        let good = json!({ "kind": "pulumi", "stack": "acme/shop/prod",
                           "backendUrl": "s3://state", "passphraseRef": "secretbroker://shop/pp" });
        assert_eq!(pulumi(good.clone()).validate(), Ok(()));
        assert_eq!(pulumi(good.clone()).runner_kind(), "pulumi");
        let with = |k: &str, v: &str| {
            let mut t = good.clone();
            t[k] = json!(v);
            pulumi(t).validate().unwrap_err()
        };
        assert!(with("stack", "shop/prod").contains("organization/project/stack"));
        assert!(with("stack", "acme/shop/pr od").contains("[A-Za-z0-9._-]"));
        assert!(with("backendUrl", "gs://bucket").contains("backendUrl"));
        assert!(with("backendUrl", "file://").contains("backendUrl"));
        let refusal = with("passphraseRef", "hunter2");
        assert!(refusal.contains("passphraseRef") && !refusal.contains("hunter2"));
        let refusal = with("repositoryCredentialRef", "ghp_token");
        assert!(refusal.contains("repositoryCredentialRef") && !refusal.contains("ghp_token"));
    }

    #[test]
    fn unknown_kinds_and_fields_do_not_read() {
        let bad = [
            json!({ "runner": { "kind": "terraform" } }),
            json!({ "runner": { "kind": "pulumi", "stack": "a/b/c", "backendUrl": "s3://x", "token": "t" } }),
            json!({ "runners": {} }),
        ];
        for v in bad {
            assert!(serde_json::from_value::<Target>(v.clone()).is_err(), "{v}");
        }
    }
}
