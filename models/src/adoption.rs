//! Adopting an unmanaged workload: besides declaring it in the specification (the
//! `adopt-observed` proposal), the product offers what would manage it, generated from what
//! the observer read — for a Kubernetes namespace the workload's manifest, for the sandbox its
//! `workloads[]` entry. A starting point for a person to review and commit: it holds what the
//! observer reads (kind, name, namespace, replicas, the main container's image, configuration
//! and secret bindings by reference), never a value, and nothing the observer does not read
//! (probes, resources, mounts' paths). Its labels and selector are the recommended
//! `app.kubernetes.io/name`, not the live object's (which the observer does not keep): a
//! selector is immutable, so the manifest is for managing the workload anew, not for applying
//! over the live object as it is.

use crate::observation::ObservedWorkload;
use crate::targets::ObserverTarget;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The label Kubernetes' recommended labels name an application by.
const NAME_LABEL: &str = "app.kubernetes.io/name";
/// The version label the observer reads a workload's version from first.
const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// What would manage one unmanaged workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedManifest {
    /// The unmanaged workload.
    pub workload: String,
    /// `kubernetes` (an `apps/v1` object) or `specification` (a `workloads[]` entry).
    pub format: String,
    #[schema(value_type = Object)]
    pub manifest: Value,
}

/// The manifest of `w` as `target` runs it.
pub fn generate(w: &ObservedWorkload, target: &ObserverTarget) -> GeneratedManifest {
    match target {
        ObserverTarget::Kubernetes(k) => GeneratedManifest {
            workload: w.name.clone(),
            format: "kubernetes".into(),
            manifest: kubernetes(w, &k.namespace),
        },
        ObserverTarget::Sandbox => GeneratedManifest {
            workload: w.name.clone(),
            format: "specification".into(),
            manifest: json!({ "name": w.name, "kind": w.kind, "version": w.version,
                              "replicas": w.replicas_desired,
                              "configRefs": w.config_refs, "secretRefs": w.secret_refs }),
        },
    }
}

/// What would manage each of `unmanaged` (findings' resources, `deployment/miner`) that
/// `observed` still shows, in the order given.
pub fn for_findings(
    unmanaged: &[String],
    observed: &[ObservedWorkload],
    target: &ObserverTarget,
) -> Vec<GeneratedManifest> {
    unmanaged
        .iter()
        .filter_map(|r| {
            observed
                .iter()
                .find(|w| crate::drift::resource(&w.kind, &w.name) == *r)
        })
        .map(|w| generate(w, target))
        .collect()
}

/// `configmap://name#key` → (`name`, `Some(key)`); `configmap://name` → (`name`, None).
fn referenced<'a>(reference: &'a str, scheme: &str) -> Option<(&'a str, Option<&'a str>)> {
    let rest = reference.strip_prefix(scheme)?;
    Some(match rest.split_once('#') {
        Some((name, key)) => (name, Some(key)),
        None => (rest, None),
    })
}

/// An `apps/v1` object of the workload's kind, its pod template's main container with the
/// image and bindings the observer read.
fn kubernetes(w: &ObservedWorkload, namespace: &str) -> Value {
    let kind = match w.kind.as_str() {
        "statefulset" => "StatefulSet",
        "daemonset" => "DaemonSet",
        _ => "Deployment",
    };
    let labels = json!({ NAME_LABEL: w.name, VERSION_LABEL: w.version });
    let (mut env, mut env_from) = (Vec::new(), Vec::new());
    // A volume's sources by its name: a projected volume names a ConfigMap and a Secret.
    let mut volumes: std::collections::BTreeMap<&str, Vec<(&str, &str)>> = Default::default();
    let refs = w
        .config_refs
        .iter()
        .map(|r| {
            (
                r,
                "configmap://",
                "configMapKeyRef",
                "configMapRef",
                "configMap",
            )
        })
        .chain(
            w.secret_refs
                .iter()
                .map(|r| (r, "secret://", "secretKeyRef", "secretRef", "secret")),
        );
    for ((binding, reference), scheme, key_ref, from_ref, volume) in refs {
        let Some((name, key)) = referenced(reference, scheme) else {
            continue;
        };
        if let Some(key) = key {
            env.push(
                json!({ "name": binding, "valueFrom": { key_ref: { "name": name, "key": key } } }),
            );
        } else if let Some(volume_name) = binding.strip_prefix("volume:") {
            volumes.entry(volume_name).or_default().push((volume, name));
        } else {
            env_from.push(json!({ from_ref: { "name": name } }));
        }
    }
    // An image the observer did not read is left out, for the reviewer to fill in: never a
    // made-up one.
    let mut container = json!({ "name": w.name });
    if let Some(image) = &w.image {
        container["image"] = json!(image);
    }
    if !env.is_empty() {
        container["env"] = Value::Array(env);
    }
    if !env_from.is_empty() {
        container["envFrom"] = Value::Array(env_from);
    }
    let mut pod = json!({ "containers": [container] });
    if !volumes.is_empty() {
        let volumes = volumes
            .into_iter()
            .map(|(volume, sources)| match sources.as_slice() {
                [("secret", name)] => json!({ "name": volume, "secret": { "secretName": name } }),
                [(kind, name)] => json!({ "name": volume, *kind: { "name": name } }),
                many => json!({ "name": volume, "projected": { "sources":
                    many.iter().map(|(kind, name)| json!({ *kind: { "name": name } })).collect::<Vec<_>>() } }),
            })
            .collect();
        pod["volumes"] = Value::Array(volumes);
    }
    let mut spec = json!({
        "selector": { "matchLabels": { NAME_LABEL: w.name } },
        "template": { "metadata": { "labels": labels }, "spec": pod },
    });
    if kind != "DaemonSet" {
        spec["replicas"] = json!(w.replicas_desired);
    }
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(w.name);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": { "name": w.name, "namespace": namespace, "labels": labels },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::KubernetesNamespace;

    fn miner() -> ObservedWorkload {
        serde_json::from_value(json!({
            "name": "miner", "kind": "deployment", "version": "6.1", "image": "ghcr.io/x/miner:6.1",
            "replicasReady": 3, "replicasDesired": 3, "endpoints": [],
            "configRefs": { "POOL": "configmap://miner-config#pool", "envFrom:miner-env": "configmap://miner-env",
                            "volume:both": "configmap://ca" },
            "secretRefs": { "volume:wallet": "secret://wallet", "volume:both": "secret://tls" },
            "health": "healthy",
        }))
        .unwrap()
    }

    #[test]
    fn a_kubernetes_workload_becomes_its_apps_v1_object_with_its_bindings_by_reference() {
        let target: ObserverTarget = ObserverTarget::Kubernetes(
            serde_json::from_value::<KubernetesNamespace>(json!({
                "inCluster": true, "namespace": "shop" }))
            .unwrap(),
        );
        let generated = generate(&miner(), &target);
        assert_eq!(generated.format, "kubernetes");
        let m = &generated.manifest;
        assert_eq!(m["kind"], "Deployment");
        assert_eq!(m["metadata"]["namespace"], "shop");
        assert_eq!(m["spec"]["replicas"], 3);
        assert_eq!(
            m["spec"]["selector"]["matchLabels"],
            m["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
                .as_str()
                .map(|n| json!({ "app.kubernetes.io/name": n }))
                .unwrap()
        );
        let container = &m["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "ghcr.io/x/miner:6.1");
        assert_eq!(
            container["env"][0],
            json!({ "name": "POOL", "valueFrom": { "configMapKeyRef": { "name": "miner-config", "key": "pool" } } })
        );
        assert_eq!(
            container["envFrom"][0],
            json!({ "configMapRef": { "name": "miner-env" } })
        );
        assert_eq!(
            m["spec"]["template"]["spec"]["volumes"],
            json!([{ "name": "both", "projected": { "sources": [
                        { "configMap": { "name": "ca" } }, { "secret": { "name": "tls" } }] } },
                   { "name": "wallet", "secret": { "secretName": "wallet" } }]),
            "one volume per name"
        );
    }

    #[test]
    fn only_the_unmanaged_workloads_still_observed_are_generated() {
        let observed = [miner()];
        let unmanaged = ["deployment/miner".to_owned(), "deployment/gone".to_owned()];
        let generated = for_findings(&unmanaged, &observed, &ObserverTarget::Sandbox);
        assert_eq!(generated.len(), 1);
        assert_eq!(generated[0].workload, "miner");
        assert!(for_findings(&[], &observed, &ObserverTarget::Sandbox).is_empty());
    }

    #[test]
    fn a_sandbox_workload_becomes_its_specification_entry() {
        let generated = generate(&miner(), &ObserverTarget::Sandbox);
        assert_eq!(generated.format, "specification");
        assert_eq!(
            generated.manifest,
            json!({ "name": "miner", "kind": "deployment", "version": "6.1", "replicas": 3,
                    "configRefs": miner().config_refs, "secretRefs": miner().secret_refs })
        );
    }
}
