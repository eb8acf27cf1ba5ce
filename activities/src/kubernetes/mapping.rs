//! What a namespace's objects say runs: Deployments, StatefulSets and DaemonSets as observed
//! workloads, with the endpoints of the Services and Ingresses that reach them. Pure: the
//! adapter lists the objects, this reads them.
//!
//! The rules (docs/targets.md, "The Kubernetes observer"):
//! - `version`: the workload's `app.kubernetes.io/version` label, else its pod template's, else
//!   the first container's image tag (`…:1.4.2` → `1.4.2`) or digest (`…@sha256:…`), else
//!   `latest` for an image without either.
//! - `replicasDesired` / `replicasReady`: `spec.replicas` (1 when absent) and
//!   `status.readyReplicas`; a DaemonSet's `status.desiredNumberScheduled` and
//!   `status.numberReady`.
//! - `configRefs` / `secretRefs`: every ConfigMap and Secret the pod template names, by
//!   reference only: `configmap://<name>#<key>` / `secret://<name>#<key>` for an `env[]`
//!   `valueFrom` (keyed by the variable), `configmap://<name>` / `secret://<name>` for an
//!   `envFrom` (keyed `envFrom:<name>`) and for a volume (keyed `volume:<volume name>`).
//! - `health`, as `kubectl rollout status` judges a rollout: `degraded` when the `Progressing`
//!   condition says `ProgressDeadlineExceeded`; `unavailable` when replicas are wanted and none
//!   is ready; `progressing` while the controller has not observed the newest generation or
//!   not every replica is updated and available; `healthy` otherwise.
//! - `endpoints`: `<service>.<namespace>.svc:<port>` of every Service whose selector matches
//!   the pod template's labels, and `https://<host><path>` (`http://` without TLS for the host)
//!   of every Ingress rule whose backend is one of those Services.

use super::owners::{VERSION_LABEL, VersionSource, field_owners};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, Service};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use runtime_cloud_models::cost::{Requests, quantity};
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::posture::{
    ContainerFacts, NamespaceFacts, PodFacts, StateResource, Violation, namespace_violations,
    workload_violations,
};
use runtime_cloud_models::specification::Refs;
use serde_json::Value;
use std::collections::BTreeMap;

/// The objects of one namespace the observer lists.
#[derive(Debug, Default, Clone)]
pub struct Objects {
    pub deployments: Vec<Deployment>,
    pub stateful_sets: Vec<StatefulSet>,
    pub daemon_sets: Vec<DaemonSet>,
    pub services: Vec<Service>,
    pub ingresses: Vec<Ingress>,
}

impl Objects {
    /// The `resourceVersion`s of the Services and Ingresses, as one string.
    fn routing_version(&self) -> String {
        let services = self.services.iter().map(|s| &s.metadata);
        let ingresses = self.ingresses.iter().map(|i| &i.metadata);
        let versions: Vec<&str> = services
            .chain(ingresses)
            .map(|m| m.resource_version.as_deref().unwrap_or("-"))
            .collect();
        versions.join(",")
    }
}

/// The workloads of a namespace, by name.
pub fn workloads(namespace: &str, objects: &Objects) -> Vec<ObservedWorkload> {
    let mut out = Vec::new();
    for d in &objects.deployments {
        let (Some(spec), status) = (&d.spec, d.status.clone().unwrap_or_default()) else {
            continue;
        };
        let desired = spec.replicas.unwrap_or(1).max(0) as u32;
        let ready = status.ready_replicas.unwrap_or(0).max(0) as u32;
        let progressing = generation_pending(&d.metadata, status.observed_generation)
            || status.updated_replicas.unwrap_or(0) < desired as i32
            || status.available_replicas.unwrap_or(0) < desired as i32
            || status.replicas.unwrap_or(0) > status.updated_replicas.unwrap_or(0);
        let deadline_exceeded = status.conditions.iter().flatten().any(|c| {
            c.type_ == "Progressing"
                && c.status == "False"
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        });
        let health = health(desired, ready, progressing, deadline_exceeded);
        out.push(workload(
            namespace,
            objects,
            &d.metadata,
            "deployment",
            &spec.template,
            (desired, ready),
            health,
        ));
    }
    for s in &objects.stateful_sets {
        let (Some(spec), status) = (&s.spec, s.status.clone().unwrap_or_default()) else {
            continue;
        };
        let desired = spec.replicas.unwrap_or(1).max(0) as u32;
        let ready = status.ready_replicas.unwrap_or(0).max(0) as u32;
        let progressing = generation_pending(&s.metadata, status.observed_generation)
            || status.updated_replicas.unwrap_or(0) < desired as i32
            || status.update_revision.is_some()
                && status.update_revision != status.current_revision;
        let health = health(desired, ready, progressing, false);
        out.push(workload(
            namespace,
            objects,
            &s.metadata,
            "statefulset",
            &spec.template,
            (desired, ready),
            health,
        ));
    }
    for d in &objects.daemon_sets {
        let (Some(spec), Some(status)) = (&d.spec, &d.status) else {
            continue;
        };
        let desired = status.desired_number_scheduled.max(0) as u32;
        let ready = status.number_ready.max(0) as u32;
        let progressing = generation_pending(&d.metadata, status.observed_generation)
            || status.updated_number_scheduled.unwrap_or(0) < status.desired_number_scheduled
            || status.number_available.unwrap_or(0) < status.desired_number_scheduled;
        let health = health(desired, ready, progressing, false);
        out.push(workload(
            namespace,
            objects,
            &d.metadata,
            "daemonset",
            &spec.template,
            (desired, ready),
            health,
        ));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Whether the controller has yet to see the object's newest spec.
fn generation_pending(meta: &ObjectMeta, observed: Option<i64>) -> bool {
    matches!((meta.generation, observed), (Some(g), Some(o)) if o < g)
}

fn health(desired: u32, ready: u32, progressing: bool, deadline_exceeded: bool) -> &'static str {
    if deadline_exceeded {
        "degraded"
    } else if desired > 0 && ready == 0 {
        "unavailable"
    } else if progressing {
        "progressing"
    } else {
        "healthy"
    }
}

fn workload(
    namespace: &str,
    objects: &Objects,
    meta: &ObjectMeta,
    kind: &str,
    template: &PodTemplateSpec,
    (desired, ready): (u32, u32),
    health: &str,
) -> ObservedWorkload {
    let pod = template.spec.clone().unwrap_or_default();
    let pod_labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let (config_refs, secret_refs) = references(&pod);
    let endpoints = endpoints(namespace, objects, &pod_labels);
    let main_container = pod
        .containers
        .first()
        .map(|c| c.name.as_str())
        .unwrap_or("");
    let version_source = if meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(VERSION_LABEL))
    {
        VersionSource::Label
    } else if pod_labels.contains_key(VERSION_LABEL) {
        VersionSource::TemplateLabel
    } else {
        VersionSource::Image(main_container)
    };
    // The object's resourceVersion and those of the namespace's Services and Ingresses (any
    // of which may come to reach it): while none changes, nothing observed of it does.
    let source_version = meta
        .resource_version
        .as_ref()
        .map(|own| format!("{own}/{}", objects.routing_version()));
    ObservedWorkload {
        name: meta.name.clone().unwrap_or_default(),
        kind: kind.to_owned(),
        version: version(meta, &pod_labels, &pod),
        replicas_ready: ready,
        replicas_desired: desired,
        endpoints,
        config_refs,
        secret_refs,
        health: health.to_owned(),
        changed_by: field_owners(meta, version_source, kind == "daemonset"),
        source_version,
        image: pod.containers.first().and_then(|c| c.image.clone()),
        managed_by: None,
        requests: requests(&pod),
    }
}

/// What one replica requests: the sum of its containers' `resources.requests` (init
/// containers aside: they do not run alongside them); none when no container requests CPU or
/// memory. A quantity that does not read counts as none.
pub fn requests(pod: &PodSpec) -> Option<Requests> {
    let mut sum: Option<Requests> = None;
    for c in &pod.containers {
        let Some(requested) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) else {
            continue;
        };
        let read = |key: &str| requested.get(key).and_then(|q| quantity(&q.0));
        let (cpu, memory) = (read("cpu"), read("memory"));
        if cpu.is_none() && memory.is_none() {
            continue;
        }
        let total = sum.get_or_insert_with(Requests::default);
        total.cpu_millis += cpu.map_or(0, |c| (c * 1000.0).round() as u64);
        total.memory_bytes += memory.map_or(0, |m| m.round() as u64);
    }
    sum
}

/// What one replica of each workload among `objects` requests, by name (those that request).
pub fn workload_requests(objects: &Objects) -> BTreeMap<String, Requests> {
    let pods = objects
        .deployments
        .iter()
        .map(|d| (&d.metadata, d.spec.as_ref().map(|s| &s.template)))
        .chain(
            objects
                .stateful_sets
                .iter()
                .map(|s| (&s.metadata, s.spec.as_ref().map(|s| &s.template))),
        )
        .chain(
            objects
                .daemon_sets
                .iter()
                .map(|d| (&d.metadata, d.spec.as_ref().map(|s| &s.template))),
        );
    pods.filter_map(|(meta, template)| {
        let pod = template?.spec.as_ref()?;
        Some((meta.name.clone()?, requests(pod)?))
    })
    .collect()
}

/// The security posture rules the namespace's workloads (each as `{kind}/{name}`, as its
/// findings name it) and its Services, Ingresses and `network_policies` break.
pub fn posture(
    namespace: &str,
    objects: &Objects,
    network_policies: Option<usize>,
) -> Vec<Violation> {
    let templates = objects
        .deployments
        .iter()
        .map(|d| {
            (
                "deployment",
                &d.metadata,
                d.spec.as_ref().map(|s| &s.template),
            )
        })
        .chain(objects.stateful_sets.iter().map(|s| {
            (
                "statefulset",
                &s.metadata,
                s.spec.as_ref().map(|s| &s.template),
            )
        }))
        .chain(objects.daemon_sets.iter().map(|d| {
            (
                "daemonset",
                &d.metadata,
                d.spec.as_ref().map(|s| &s.template),
            )
        }));
    let mut out = Vec::new();
    for (kind, meta, template) in templates {
        let (Some(name), Some(pod)) = (&meta.name, template.and_then(|t| t.spec.as_ref())) else {
            continue;
        };
        out.extend(workload_violations(
            &format!("{kind}/{name}"),
            &pod_facts(pod),
        ));
    }
    out.extend(namespace_violations(
        namespace,
        &namespace_facts(objects, network_policies),
    ));
    out
}

/// The Kubernetes objects among a Pulumi program's resources (`kubernetes:` types, whose
/// inputs are the object as the program declares it), for the posture rules. An object whose
/// inputs do not read as one (a preview's values not known yet) is left out.
pub fn planned_objects<'a>(resources: impl IntoIterator<Item = &'a StateResource>) -> Objects {
    fn read<T: k8s_openapi::Resource + serde::de::DeserializeOwned>(inputs: &Value) -> Option<T> {
        // The program may leave `apiVersion` and `kind` to the type token.
        let mut object = inputs.as_object()?.clone();
        object.insert("apiVersion".into(), T::API_VERSION.into());
        object.insert("kind".into(), T::KIND.into());
        serde_json::from_value(Value::Object(object)).ok()
    }
    let mut objects = Objects::default();
    for r in resources {
        let inputs = &r.inputs;
        match r.kind.as_str() {
            "kubernetes:apps/v1:Deployment" => objects.deployments.extend(read(inputs)),
            "kubernetes:apps/v1:StatefulSet" => objects.stateful_sets.extend(read(inputs)),
            "kubernetes:apps/v1:DaemonSet" => objects.daemon_sets.extend(read(inputs)),
            "kubernetes:core/v1:Service" => objects.services.extend(read(inputs)),
            "kubernetes:networking.k8s.io/v1:Ingress" => objects.ingresses.extend(read(inputs)),
            _ => {}
        }
    }
    objects
}

/// What the posture rules read of a pod template (`models::posture`): its containers' (init
/// containers' too) security contexts, memory limits, CPU requests and images, the pod's
/// security context, `hostNetwork` and `hostPath` volumes.
pub fn pod_facts(pod: &PodSpec) -> PodFacts {
    let context = pod.security_context.as_ref();
    let containers = pod
        .init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .map(|c| {
            let security = c.security_context.as_ref();
            let resources = c.resources.as_ref();
            ContainerFacts {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                privileged: security.and_then(|s| s.privileged) == Some(true),
                run_as_non_root: security.and_then(|s| s.run_as_non_root),
                run_as_user: security.and_then(|s| s.run_as_user),
                memory_limit: resources
                    .and_then(|r| r.limits.as_ref())
                    .is_some_and(|l| l.contains_key("memory")),
                cpu_request: resources
                    .and_then(|r| r.requests.as_ref())
                    .is_some_and(|r| r.contains_key("cpu")),
            }
        })
        .collect();
    PodFacts {
        host_network: pod.host_network == Some(true),
        host_path_volumes: pod
            .volumes
            .iter()
            .flatten()
            .filter(|v| v.host_path.is_some())
            .map(|v| v.name.clone())
            .collect(),
        run_as_non_root: context.and_then(|c| c.run_as_non_root),
        run_as_user: context.and_then(|c| c.run_as_user),
        containers,
    }
}

/// What the posture rules read of a namespace's Services and Ingresses; `network_policies`
/// as listed (none when the observer may not list them).
pub fn namespace_facts(objects: &Objects, network_policies: Option<usize>) -> NamespaceFacts {
    let services = objects
        .services
        .iter()
        .map(|s| {
            let kind = s.spec.as_ref().and_then(|s| s.type_.clone());
            (
                s.metadata.name.clone().unwrap_or_default(),
                kind.unwrap_or_else(|| "ClusterIP".into()),
            )
        })
        .collect();
    let ingresses = objects
        .ingresses
        .iter()
        .map(|i| {
            let spec = i.spec.as_ref();
            let secured: Vec<&String> = spec
                .and_then(|s| s.tls.as_ref())
                .into_iter()
                .flatten()
                .flat_map(|t| t.hosts.iter().flatten())
                .collect();
            let plain = spec
                .and_then(|s| s.rules.as_ref())
                .into_iter()
                .flatten()
                .map(|r| r.host.clone().unwrap_or_default())
                .filter(|host| !secured.contains(&host))
                .collect();
            (i.metadata.name.clone().unwrap_or_default(), plain)
        })
        .collect();
    NamespaceFacts {
        services,
        ingresses,
        network_policies,
    }
}

/// The version rule of the module's documentation.
pub fn version(meta: &ObjectMeta, pod_labels: &BTreeMap<String, String>, pod: &PodSpec) -> String {
    if let Some(v) = meta.labels.as_ref().and_then(|l| l.get(VERSION_LABEL)) {
        return v.clone();
    }
    if let Some(v) = pod_labels.get(VERSION_LABEL) {
        return v.clone();
    }
    let image = pod
        .containers
        .first()
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    image_version(&image)
}

/// `registry:5000/team/app:1.4.2` → `1.4.2`; `app@sha256:ab…` → `sha256:ab…`; `app` →
/// `latest`. A registry's port is not a tag: the tag follows the last `/`.
pub fn image_version(image: &str) -> String {
    if let Some((_, digest)) = image.split_once('@') {
        return digest.to_owned();
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) if !tag.is_empty() => tag.to_owned(),
        _ => "latest".to_owned(),
    }
}

/// The ConfigMaps and Secrets the pod template names, as references (never a value: the
/// observer never reads a Secret or a ConfigMap, only the pod template that names them).
pub fn references(pod: &PodSpec) -> (Refs, Refs) {
    let mut config = Refs::new();
    let mut secrets = Refs::new();
    let containers = pod
        .init_containers
        .iter()
        .flatten()
        .chain(pod.containers.iter());
    for c in containers {
        for e in c.env.iter().flatten() {
            let Some(from) = &e.value_from else { continue };
            if let Some(k) = &from.config_map_key_ref {
                config.insert(e.name.clone(), format!("configmap://{}#{}", k.name, k.key));
            }
            if let Some(k) = &from.secret_key_ref {
                secrets.insert(e.name.clone(), format!("secret://{}#{}", k.name, k.key));
            }
        }
        for from in c.env_from.iter().flatten() {
            if let Some(m) = &from.config_map_ref {
                config.insert(
                    format!("envFrom:{}", m.name),
                    format!("configmap://{}", m.name),
                );
            }
            if let Some(s) = &from.secret_ref {
                secrets.insert(
                    format!("envFrom:{}", s.name),
                    format!("secret://{}", s.name),
                );
            }
        }
    }
    for v in pod.volumes.iter().flatten() {
        if let Some(m) = &v.config_map {
            config.insert(
                format!("volume:{}", v.name),
                format!("configmap://{}", m.name),
            );
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.insert(format!("volume:{}", v.name), format!("secret://{s}"));
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(m) = &source.config_map {
                config.insert(
                    format!("volume:{}", v.name),
                    format!("configmap://{}", m.name),
                );
            }
            if let Some(s) = &source.secret {
                secrets.insert(format!("volume:{}", v.name), format!("secret://{}", s.name));
            }
        }
    }
    (config, secrets)
}

/// The endpoints of the Services that select `pod_labels`, and of the Ingress rules that
/// route to those Services.
fn endpoints(
    namespace: &str,
    objects: &Objects,
    pod_labels: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut selecting = Vec::new();
    for svc in &objects.services {
        let Some(spec) = &svc.spec else { continue };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        if !selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)) {
            continue;
        }
        let name = svc.metadata.name.clone().unwrap_or_default();
        for port in spec.ports.iter().flatten() {
            out.push(format!("{name}.{namespace}.svc:{}", port.port));
        }
        selecting.push(name);
    }
    for ing in &objects.ingresses {
        let Some(spec) = &ing.spec else { continue };
        let tls_hosts: Vec<&String> = spec
            .tls
            .iter()
            .flatten()
            .flat_map(|t| t.hosts.iter().flatten())
            .collect();
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.clone().unwrap_or_default();
            let scheme = if tls_hosts.contains(&&host) {
                "https"
            } else {
                "http"
            };
            for path in rule.http.iter().flat_map(|h| h.paths.iter()) {
                let routed = path
                    .backend
                    .service
                    .as_ref()
                    .is_some_and(|s| selecting.contains(&s.name));
                if routed && !host.is_empty() {
                    let p = path.path.clone().unwrap_or_else(|| "/".into());
                    out.push(format!("{scheme}://{host}{p}"));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Deployment recorded from a real cluster (Argo CD's health test data, vendored under
    /// `tests/fixtures/kubernetes/` with its source): a rollout past its progress deadline.
    const REAL_DEGRADED: &str =
        include_str!("../../../tests/fixtures/kubernetes/deployment-degraded.yaml");

    fn objects(deployments: Vec<Deployment>) -> Objects {
        Objects {
            deployments,
            ..Default::default()
        }
    }

    #[test]
    fn posture_facts_are_read_from_the_pod_template_services_and_ingresses() {
        let pod: PodSpec = serde_json::from_value(json!({
            "hostNetwork": true,
            "securityContext": { "runAsNonRoot": true },
            "volumes": [{ "name": "sock", "hostPath": { "path": "/var/run/docker.sock" } },
                        { "name": "cfg", "configMap": { "name": "cfg" } }],
            "initContainers": [{ "name": "init", "image": "busybox:1.36" }],
            "containers": [{ "name": "api", "image": "registry.example.com/api@sha256:0123",
                             "securityContext": { "privileged": true, "runAsUser": 0 },
                             "resources": { "limits": { "memory": "256Mi" }, "requests": { "cpu": "100m" } } }],
        }))
        .unwrap();
        let facts = pod_facts(&pod);
        assert!(facts.host_network);
        assert_eq!(facts.host_path_volumes, ["sock"]);
        assert_eq!(facts.run_as_non_root, Some(true));
        let names: Vec<&str> = facts.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["init", "api"], "init containers too");
        let api = &facts.containers[1];
        assert!(api.privileged && api.memory_limit && api.cpu_request);
        assert_eq!(api.run_as_user, Some(0));
        assert!(!facts.containers[0].memory_limit && !facts.containers[0].cpu_request);

        let objects = Objects {
            services: vec![
                serde_json::from_value(json!({ "metadata": { "name": "web" }, "spec": { "type": "LoadBalancer" } })).unwrap(),
                serde_json::from_value(json!({ "metadata": { "name": "api" }, "spec": {} })).unwrap(),
            ],
            ingresses: vec![serde_json::from_value(json!({
                "metadata": { "name": "shop" },
                "spec": { "tls": [{ "hosts": ["shop.example.com"], "secretName": "shop-tls" }],
                          "rules": [{ "host": "shop.example.com" }, { "host": "plain.example.com" }] } }))
            .unwrap()],
            ..Default::default()
        };
        let ns = namespace_facts(&objects, Some(0));
        assert_eq!(
            ns.services,
            [
                ("web".to_owned(), "LoadBalancer".to_owned()),
                ("api".to_owned(), "ClusterIP".to_owned())
            ]
        );
        assert_eq!(
            ns.ingresses,
            [("shop".to_owned(), vec!["plain.example.com".to_owned()])]
        );
        assert_eq!(ns.network_policies, Some(0));
    }

    #[test]
    fn a_rollout_past_its_deadline_is_degraded_as_kubectl_judges_it() {
        // Recorded as `extensions/v1beta1`, which API servers since 1.16 serve as `apps/v1`:
        // the same object under the group the observer lists.
        let mut recorded: serde_json::Value = serde_saphyr::from_str(REAL_DEGRADED).unwrap();
        recorded["apiVersion"] = json!("apps/v1");
        let d: Deployment = serde_json::from_value(recorded).unwrap();
        let w = &workloads("default", &objects(vec![d]))[0];
        assert_eq!(w.name, "guestbook-ui");
        assert_eq!(w.kind, "deployment");
        assert_eq!(w.version, "0.3");
        assert_eq!((w.replicas_desired, w.replicas_ready), (1, 1));
        assert_eq!(w.health, "degraded");
    }

    fn deployment(status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "api", "generation": 2 },
            "spec": { "replicas": 3, "selector": {},
                      "template": { "spec": { "containers": [{ "name": "api", "image": "api:2" }] } } },
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn health_follows_the_rollout() {
        let health = |status| {
            workloads("ns", &objects(vec![deployment(status)]))[0]
                .health
                .clone()
        };
        let done = json!({ "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                           "readyReplicas": 3, "availableReplicas": 3 });
        assert_eq!(health(done.clone()), "healthy");
        let mut unseen = done.clone();
        unseen["observedGeneration"] = json!(1);
        assert_eq!(
            health(unseen),
            "progressing",
            "the controller has not seen the spec"
        );
        let mut rolling = done.clone();
        rolling["updatedReplicas"] = json!(1);
        rolling["replicas"] = json!(4);
        assert_eq!(health(rolling), "progressing");
        let mut down = done;
        down["readyReplicas"] = json!(0);
        down["availableReplicas"] = json!(0);
        assert_eq!(health(down), "unavailable");
    }

    #[test]
    fn the_version_is_the_label_else_the_image_tag_or_digest() {
        for (image, version) in [
            ("registry.example.com:5000/team/api:1.4.2", "1.4.2"),
            ("api@sha256:0f1e", "sha256:0f1e"),
            ("registry.example.com:5000/team/api", "latest"),
            ("api", "latest"),
        ] {
            assert_eq!(image_version(image), version, "{image}");
        }
        let mut d = deployment(json!({}));
        d.metadata.labels = Some([(VERSION_LABEL.to_owned(), "2026.11".to_owned())].into());
        assert_eq!(workloads("ns", &objects(vec![d]))[0].version, "2026.11");
    }

    #[test]
    fn bindings_are_references_to_config_maps_and_secrets_never_values() {
        let pod: PodSpec = serde_json::from_value(json!({
            "initContainers": [{ "name": "migrate", "envFrom": [{ "secretRef": { "name": "migrations" } }] }],
            "containers": [{
                "name": "api",
                "env": [
                    { "name": "PLAIN", "value": "not a reference" },
                    { "name": "LOG_LEVEL", "valueFrom": { "configMapKeyRef": { "name": "cfg", "key": "log" } } },
                    { "name": "DB", "valueFrom": { "secretKeyRef": { "name": "db", "key": "url" } } }
                ],
                "envFrom": [{ "configMapRef": { "name": "shared" } }]
            }],
            "volumes": [
                { "name": "tls", "secret": { "secretName": "api-tls" } },
                { "name": "settings", "configMap": { "name": "settings" } },
                { "name": "bundle", "projected": { "sources": [{ "secret": { "name": "ca" } }] } }
            ]
        }))
        .unwrap();
        let (config, secrets) = references(&pod);
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            json!({ "LOG_LEVEL": "configmap://cfg#log", "envFrom:shared": "configmap://shared",
                    "volume:settings": "configmap://settings" })
        );
        assert_eq!(
            serde_json::to_value(&secrets).unwrap(),
            json!({ "DB": "secret://db#url", "envFrom:migrations": "secret://migrations",
                    "volume:tls": "secret://api-tls", "volume:bundle": "secret://ca" })
        );
    }
}
