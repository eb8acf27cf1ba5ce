//! Security posture: what the observer reads of a workload's pod template and of a
//! namespace's Services, Ingresses and NetworkPolicies, and the rules that make a `posture`
//! finding of it. Pure: the observer gathers the facts ([`PodFacts`], [`NamespaceFacts`]),
//! these rules judge them. Each rule's reason is in docs/targets.md ("Posture findings").

use serde::{Deserialize, Serialize};

/// A `LoadBalancer` or `NodePort` Service: reachable from outside the cluster.
pub const PUBLIC_ENDPOINT: &str = "public-endpoint";
/// An Ingress host served without TLS.
pub const INGRESS_WITHOUT_TLS: &str = "ingress-without-tls";
/// A container with `securityContext.privileged: true`.
pub const PRIVILEGED_CONTAINER: &str = "privileged-container";
/// A container that may run as root: neither `runAsNonRoot: true` nor a non-zero `runAsUser`
/// (its own, else the pod's).
pub const RUNS_AS_ROOT: &str = "runs-as-root";
/// A pod in the node's network namespace (`hostNetwork: true`).
pub const HOST_NETWORK: &str = "host-network";
/// A pod mounting a directory of the node (`hostPath` volume).
pub const HOST_PATH: &str = "host-path";
/// A container without a memory limit.
pub const NO_MEMORY_LIMIT: &str = "no-memory-limit";
/// A container without a CPU request.
pub const NO_CPU_REQUEST: &str = "no-cpu-request";
/// A container image by tag (no digest), `latest` or none at all.
pub const MUTABLE_IMAGE_TAG: &str = "mutable-image-tag";
/// A namespace no NetworkPolicy selects pods of.
pub const NO_NETWORK_POLICY: &str = "no-network-policy";

/// Every rule the observer applies, in the order findings are listed.
pub const RULES: [&str; 10] = [
    PUBLIC_ENDPOINT,
    INGRESS_WITHOUT_TLS,
    PRIVILEGED_CONTAINER,
    RUNS_AS_ROOT,
    HOST_NETWORK,
    HOST_PATH,
    NO_MEMORY_LIMIT,
    NO_CPU_REQUEST,
    MUTABLE_IMAGE_TAG,
    NO_NETWORK_POLICY,
];

/// What the posture rules read of one container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerFacts {
    pub name: String,
    /// Empty when the container names none.
    pub image: String,
    pub privileged: bool,
    pub run_as_non_root: Option<bool>,
    pub run_as_user: Option<i64>,
    pub memory_limit: bool,
    pub cpu_request: bool,
}

/// What the posture rules read of a workload's pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodFacts {
    pub host_network: bool,
    /// The names of its `hostPath` volumes.
    pub host_path_volumes: Vec<String>,
    /// The pod's `securityContext`, which its containers inherit.
    pub run_as_non_root: Option<bool>,
    pub run_as_user: Option<i64>,
    /// Init containers included.
    pub containers: Vec<ContainerFacts>,
}

/// What the posture rules read of a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceFacts {
    /// Each Service's name and `spec.type`.
    pub services: Vec<(String, String)>,
    /// Each Ingress's name and the hosts of its rules that no `tls` entry names.
    pub ingresses: Vec<(String, Vec<String>)>,
    /// How many NetworkPolicies the namespace has; none when they could not be read (the
    /// observer's RBAC lacks them), so no finding is made up.
    pub network_policies: Option<usize>,
}

/// One resource of a runner's recorded state (a Pulumi stack's, from `pulumi stack export`),
/// as the posture rules written in Rego read it: `input.resources[_]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateResource {
    pub urn: String,
    /// `aws:s3/bucket:Bucket`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the program set.
    #[serde(default)]
    pub inputs: serde_json::Value,
    /// What the provider reported back.
    #[serde(default)]
    pub outputs: serde_json::Value,
}

/// A resource a plan would leave: as it is now (none when the plan creates it) and as the
/// plan would leave it (Pulumi: a preview step's `oldState` and `newState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedResource {
    pub before: Option<StateResource>,
    pub after: StateResource,
}

/// What a plan would introduce: the rules its resources would break (`after`) that they do
/// not break already (`before`, an open finding rather than the plan's doing). Each (rule,
/// resource) once, in the order found.
pub fn introduced(before: &[Violation], after: Vec<Violation>) -> Vec<Violation> {
    let mut seen: std::collections::BTreeSet<(String, String)> = before
        .iter()
        .map(|v| (v.rule.clone(), v.resource.clone()))
        .collect();
    after
        .into_iter()
        .filter(|v| seen.insert((v.rule.clone(), v.resource.clone())))
        .collect()
}

/// The `input` of the posture rules written in Rego (package `runtime_cloud.posture`, rule
/// `violations`: a set of `{rule, resource, detail}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostureInput {
    pub tenant_id: String,
    pub environment_id: String,
    pub resources: Vec<StateResource>,
}

/// One rule a resource breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// One of [`RULES`], or a tenant's own rule id.
    pub rule: String,
    /// `deployment/api`, `service/web`, `ingress/web`, `namespace/shop`.
    pub resource: String,
    /// What breaks it (the container, the host, the type).
    pub detail: String,
}

fn violation(rule: &str, resource: &str, detail: String) -> Violation {
    Violation {
        rule: rule.to_owned(),
        resource: resource.to_owned(),
        detail,
    }
}

/// Whether `image` is referred to by a tag that can move: no `@sha256:` digest.
pub fn mutable_image(image: &str) -> bool {
    !image.contains("@sha256:")
}

/// The tag `image` is referred to by (`latest` when it names none).
fn tag(image: &str) -> &str {
    let name = image.rsplit('/').next().unwrap_or(image);
    name.split_once(':').map_or("latest", |(_, tag)| tag)
}

/// The rules the pod template of workload `resource` breaks, container by container.
pub fn workload_violations(resource: &str, pod: &PodFacts) -> Vec<Violation> {
    let mut out = Vec::new();
    if pod.host_network {
        out.push(violation(
            HOST_NETWORK,
            resource,
            "hostNetwork: true".into(),
        ));
    }
    for volume in &pod.host_path_volumes {
        out.push(violation(
            HOST_PATH,
            resource,
            format!("volume `{volume}` mounts a host path"),
        ));
    }
    for c in &pod.containers {
        let container = &c.name;
        if c.privileged {
            out.push(violation(
                PRIVILEGED_CONTAINER,
                resource,
                format!("container `{container}` is privileged"),
            ));
        }
        let non_root = c.run_as_non_root.or(pod.run_as_non_root) == Some(true)
            || c.run_as_user.or(pod.run_as_user).is_some_and(|uid| uid > 0);
        if !non_root {
            out.push(violation(
                RUNS_AS_ROOT,
                resource,
                format!("container `{container}` may run as root (no runAsNonRoot, no non-zero runAsUser)"),
            ));
        }
        if !c.memory_limit {
            out.push(violation(
                NO_MEMORY_LIMIT,
                resource,
                format!("container `{container}` has no memory limit"),
            ));
        }
        if !c.cpu_request {
            out.push(violation(
                NO_CPU_REQUEST,
                resource,
                format!("container `{container}` has no CPU request"),
            ));
        }
        if mutable_image(&c.image) {
            let shown = if c.image.is_empty() {
                "no image".to_owned()
            } else {
                format!("image `{}` by tag `{}`", c.image, tag(&c.image))
            };
            out.push(violation(
                MUTABLE_IMAGE_TAG,
                resource,
                format!("container `{container}`: {shown}, not by digest"),
            ));
        }
    }
    out
}

/// The rules namespace `namespace`'s Services, Ingresses and NetworkPolicies break.
pub fn namespace_violations(namespace: &str, facts: &NamespaceFacts) -> Vec<Violation> {
    let mut out = Vec::new();
    for (name, kind) in &facts.services {
        if kind == "LoadBalancer" || kind == "NodePort" {
            out.push(violation(
                PUBLIC_ENDPOINT,
                &format!("service/{name}"),
                format!("a {kind} Service is reachable from outside the cluster"),
            ));
        }
    }
    for (name, hosts) in &facts.ingresses {
        for host in hosts {
            let host = if host.is_empty() { "*" } else { host };
            out.push(violation(
                INGRESS_WITHOUT_TLS,
                &format!("ingress/{name}"),
                format!("host `{host}` is served without TLS"),
            ));
        }
    }
    if facts.network_policies == Some(0) {
        out.push(violation(
            NO_NETWORK_POLICY,
            &format!("namespace/{namespace}"),
            "no NetworkPolicy: every pod accepts traffic from anywhere in the cluster".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hardened() -> ContainerFacts {
        ContainerFacts {
            name: "api".into(),
            image: "registry.example.com/api@sha256:0123".into(),
            privileged: false,
            run_as_non_root: Some(true),
            run_as_user: None,
            memory_limit: true,
            cpu_request: true,
        }
    }

    fn rules(v: &[Violation]) -> Vec<&str> {
        v.iter().map(|v| v.rule.as_str()).collect()
    }

    #[test]
    fn a_hardened_pod_breaks_no_rule() {
        let pod = PodFacts {
            containers: vec![hardened()],
            ..PodFacts::default()
        };
        assert_eq!(workload_violations("deployment/api", &pod), []);
        // A non-zero user is not root either, from the pod's context too.
        let by_uid = PodFacts {
            run_as_user: Some(1000),
            containers: vec![ContainerFacts {
                run_as_non_root: None,
                ..hardened()
            }],
            ..PodFacts::default()
        };
        assert_eq!(workload_violations("deployment/api", &by_uid), []);
    }

    #[test]
    fn each_rule_names_the_container_that_breaks_it() {
        let pod = PodFacts {
            host_network: true,
            host_path_volumes: vec!["docker-sock".into()],
            containers: vec![ContainerFacts {
                name: "miner".into(),
                image: "ghcr.io/x/miner:latest".into(),
                privileged: true,
                run_as_non_root: None,
                run_as_user: Some(0),
                memory_limit: false,
                cpu_request: false,
            }],
            ..PodFacts::default()
        };
        let found = workload_violations("deployment/miner", &pod);
        assert_eq!(
            rules(&found),
            [
                HOST_NETWORK,
                HOST_PATH,
                PRIVILEGED_CONTAINER,
                RUNS_AS_ROOT,
                NO_MEMORY_LIMIT,
                NO_CPU_REQUEST,
                MUTABLE_IMAGE_TAG
            ]
        );
        assert!(found.iter().all(|v| v.resource == "deployment/miner"));
        assert!(found[2].detail.contains("`miner`"), "{found:?}");
        assert!(found[6].detail.contains("by tag `latest`"), "{found:?}");
        // The container's own context wins over the pod's.
        let overridden = PodFacts {
            run_as_non_root: Some(true),
            containers: vec![ContainerFacts {
                run_as_non_root: Some(false),
                ..hardened()
            }],
            ..PodFacts::default()
        };
        assert_eq!(
            rules(&workload_violations("d/x", &overridden)),
            [RUNS_AS_ROOT]
        );
    }

    #[test]
    fn images_are_mutable_unless_by_digest() {
        assert!(mutable_image("nginx"));
        assert!(mutable_image("registry:5000/shop/api:1.4.2"));
        assert!(!mutable_image("registry:5000/shop/api:1.4.2@sha256:abcd"));
        assert_eq!(
            tag("registry:5000/shop/api"),
            "latest",
            "a port is not a tag"
        );
        assert_eq!(tag("registry:5000/shop/api:1.4.2"), "1.4.2");
    }

    #[test]
    fn public_services_plain_ingress_hosts_and_open_namespaces_are_found() {
        let facts = NamespaceFacts {
            services: vec![
                ("web".into(), "LoadBalancer".into()),
                ("ssh".into(), "NodePort".into()),
                ("api".into(), "ClusterIP".into()),
            ],
            ingresses: vec![("shop".into(), vec!["shop.example.com".into()])],
            network_policies: Some(0),
        };
        let found = namespace_violations("shop", &facts);
        let pairs: Vec<(&str, &str)> = found
            .iter()
            .map(|v| (v.rule.as_str(), v.resource.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                (PUBLIC_ENDPOINT, "service/web"),
                (PUBLIC_ENDPOINT, "service/ssh"),
                (INGRESS_WITHOUT_TLS, "ingress/shop"),
                (NO_NETWORK_POLICY, "namespace/shop"),
            ]
        );
        let unread = NamespaceFacts {
            network_policies: None,
            ..NamespaceFacts::default()
        };
        assert_eq!(namespace_violations("shop", &unread), [], "none made up");
    }

    #[test]
    fn a_plan_introduces_only_what_its_resources_did_not_break_already() {
        let v = |rule: &str, resource: &str, detail: &str| Violation {
            rule: rule.into(),
            resource: resource.into(),
            detail: detail.into(),
        };
        let before = [v(MUTABLE_IMAGE_TAG, "deployment/api", "image `a:1`")];
        let after = vec![
            v(MUTABLE_IMAGE_TAG, "deployment/api", "image `a:2`"),
            v(PRIVILEGED_CONTAINER, "deployment/api", "container `a`"),
            v(PRIVILEGED_CONTAINER, "deployment/api", "container `b`"),
            v(MUTABLE_IMAGE_TAG, "deployment/web", "image `w:1`"),
        ];
        assert_eq!(
            introduced(&before, after),
            [
                v(PRIVILEGED_CONTAINER, "deployment/api", "container `a`"),
                v(MUTABLE_IMAGE_TAG, "deployment/web", "image `w:1`"),
            ]
        );
        assert_eq!(introduced(&[], Vec::new()), []);
    }
}
