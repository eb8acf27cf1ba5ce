//! Who wrote what: the `managedFields` entry that owns each part of a workload the comparer
//! compares. Pure, like [`super::mapping`].
//!
//! Each entry of `metadata.managedFields` names a manager (`kubectl-edit`,
//! `kube-controller-manager` …), an operation (`Update`, `Apply`), optionally a subresource
//! (`scale`, `status`) and a time, and the fields it owns as a trie (`fieldsV1`): `f:<name>` for
//! a field, `k:{"name":"api"}` for the element of a list keyed by name. A field is owned by
//! the entry whose trie holds its path; when several do (managers that applied the same value),
//! the most recently written one is taken.
//!
//! - `version`: the version label (on the workload or its pod template) when the version is
//!   read from it, else the main container's `image`;
//! - `replicas`: `spec.replicas` (an HPA's write: `kube-controller-manager` through the
//!   `scale` subresource; `kubectl scale`: `kubectl` through `scale`);
//! - `ready`: `status.readyReplicas` (`status.numberReady` for a DaemonSet), the controller's;
//! - `bindings`: any container's `env` or `envFrom`, or the pod's `volumes`;
//! - `workload`: the pod template as a whole (who created or last rewrote the workload).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use runtime_cloud_models::observation::{ChangedBy, FieldOwners};
use serde_json::Value;

/// One step of a path into a `fieldsV1` trie.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    /// `f:<name>`.
    Field(&'a str),
    /// `k:{"name":"<name>",…}`: the element of a list keyed by this name.
    Named(&'a str),
    /// Any keyed element.
    AnyNamed,
}

use Step::{AnyNamed, Field, Named};

/// The version label's name.
/// The label Kubernetes recommends for an application's version.
pub(crate) const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// Where a workload's version is read from (the rule of `mapping::version`).
pub enum VersionSource<'a> {
    /// The workload's own `app.kubernetes.io/version` label.
    Label,
    /// Its pod template's.
    TemplateLabel,
    /// The image of the main (first) container, by its name.
    Image(&'a str),
}

/// Who owns each compared part of the workload whose metadata is `meta`.
pub fn field_owners(meta: &ObjectMeta, version: VersionSource<'_>, daemon: bool) -> FieldOwners {
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    let template = [Field("spec"), Field("template")];
    let containers = [
        Field("spec"),
        Field("template"),
        Field("spec"),
        Field("containers"),
    ];
    let with = |base: &[Step<'static>], rest: &[Step<'static>]| -> Vec<Step<'static>> {
        base.iter().chain(rest).copied().collect()
    };
    let version_path: Vec<Step<'_>> = match version {
        VersionSource::Label => vec![Field("metadata"), Field("labels"), Field(VERSION_LABEL)],
        VersionSource::TemplateLabel => with(
            &template,
            &[Field("metadata"), Field("labels"), Field(VERSION_LABEL)],
        ),
        VersionSource::Image(container) => {
            let mut p: Vec<Step<'_>> = containers.to_vec();
            p.extend([Named(container), Field("image")]);
            p
        }
    };
    let init_containers = [
        Field("spec"),
        Field("template"),
        Field("spec"),
        Field("initContainers"),
    ];
    let bindings = [
        with(&containers, &[AnyNamed, Field("env")]),
        with(&containers, &[AnyNamed, Field("envFrom")]),
        with(&init_containers, &[AnyNamed, Field("env")]),
        with(&init_containers, &[AnyNamed, Field("envFrom")]),
        with(&template, &[Field("spec"), Field("volumes")]),
    ];
    let ready = if daemon {
        "numberReady"
    } else {
        "readyReplicas"
    };
    FieldOwners {
        version: owner(entries, &[version_path]),
        replicas: if daemon {
            None
        } else {
            owner(entries, &[vec![Field("spec"), Field("replicas")]])
        },
        ready: owner(entries, &[vec![Field("status"), Field(ready)]]),
        bindings: owner(entries, &bindings),
        workload: owner(entries, &[template.to_vec()]),
    }
}

/// The most recently written entry whose trie holds one of `paths`, with the path it holds.
fn owner(entries: &[ManagedFieldsEntry], paths: &[Vec<Step<'_>>]) -> Option<ChangedBy> {
    let mut best: Option<(&ManagedFieldsEntry, String)> = None;
    for entry in entries {
        let Some(trie) = entry.fields_v1.as_ref().map(|f| &f.0) else {
            continue;
        };
        let Some(field) = paths.iter().find_map(|p| held(trie, p, String::new())) else {
            continue;
        };
        // Later or equally late entries win: the list keeps the order the server wrote.
        if best.as_ref().is_none_or(|(b, _)| time(b) <= time(entry)) {
            best = Some((entry, field));
        }
    }
    best.map(|(e, field)| ChangedBy {
        manager: e.manager.clone().unwrap_or_default(),
        operation: e.operation.clone().unwrap_or_default(),
        time: time(e),
        field,
        subresource: e.subresource.clone().filter(|s| !s.is_empty()),
    })
}

fn time(e: &ManagedFieldsEntry) -> Option<chrono::DateTime<chrono::Utc>> {
    let t = e.time.as_ref()?.0;
    chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
}

/// The path `steps` as written in the trie (`spec.template.spec.containers[api].env`), when the
/// trie holds it.
fn held(trie: &Value, steps: &[Step<'_>], at: String) -> Option<String> {
    let Some((step, rest)) = steps.split_first() else {
        return Some(at);
    };
    let object = trie.as_object()?;
    match *step {
        Field(name) => {
            let next = object.get(&format!("f:{name}"))?;
            let at = if at.is_empty() {
                name.to_owned()
            } else {
                format!("{at}.{name}")
            };
            held(next, rest, at)
        }
        Named(want) => object.iter().find_map(|(key, next)| {
            (keyed_name(key)? == want).then(|| held(next, rest, format!("{at}[{want}]")))?
        }),
        AnyNamed => object.iter().find_map(|(key, next)| {
            let name = keyed_name(key)?;
            held(next, rest, format!("{at}[{name}]"))
        }),
    }
}

/// `k:{"name":"api"}` → `api`.
fn keyed_name(key: &str) -> Option<String> {
    let json: Value = serde_json::from_str(key.strip_prefix("k:")?).ok()?;
    json.get("name")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;

    /// A vendored capture (`tests/fixtures/kubernetes/managed-fields/`, see its SOURCES.md).
    fn fixture(name: &str) -> Deployment {
        let path = format!(
            "{}/../tests/fixtures/kubernetes/managed-fields/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("fixture");
        let value: Value = serde_saphyr::from_str(&text).expect("yaml");
        // A `kind: List` holds the Deployment as its first item.
        let object = match value.get("items") {
            Some(items) => items[0].clone(),
            None => value,
        };
        serde_json::from_value(object).expect("a Deployment")
    }

    fn image_of_first(d: &Deployment) -> String {
        d.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .name
            .clone()
    }

    fn who(c: &Option<ChangedBy>) -> Option<(&str, &str, Option<&str>)> {
        c.as_ref().map(|c| {
            (
                c.manager.as_str(),
                c.operation.as_str(),
                c.subresource.as_deref(),
            )
        })
    }

    #[test]
    fn an_argo_cd_server_side_apply_owns_spec_and_the_controller_its_status() {
        let d = fixture("argocd-ssa-apply-kcm-status.yaml");
        let name = image_of_first(&d);
        let owners = field_owners(&d.metadata, VersionSource::Image(&name), false);
        assert_eq!(
            who(&owners.version),
            Some(("argocd-controller", "Apply", None))
        );
        assert_eq!(
            owners.version.as_ref().unwrap().field,
            "spec.template.spec.containers[nginx].image"
        );
        assert_eq!(
            who(&owners.replicas),
            Some(("argocd-controller", "Apply", None))
        );
        assert_eq!(
            who(&owners.ready),
            Some(("kube-controller-manager", "Update", Some("status")))
        );
        assert_eq!(owners.ready.as_ref().unwrap().field, "status.readyReplicas");
        assert!(owners.version.as_ref().unwrap().time.is_some());
    }

    #[test]
    fn a_second_container_applied_by_hand_is_the_hands_not_the_main_containers_owner() {
        let d = fixture("argocd-update-kubectl-csa-second-container.yaml");
        let name = image_of_first(&d);
        let owners = field_owners(&d.metadata, VersionSource::Image(&name), false);
        assert_eq!(name, "main-container");
        assert_eq!(
            who(&owners.version),
            Some(("argocd-controller", "Update", None))
        );
        // Who owns the `idle` container's image is not who owns the main one's.
        let idle = field_owners(&d.metadata, VersionSource::Image("idle"), false);
        assert_eq!(
            who(&idle.version),
            Some(("kubectl-client-side-apply", "Update", None))
        );
    }

    #[test]
    fn replicas_owned_by_two_managers_go_to_the_later_write() {
        // `argocd` wrote at 20:36:10, `kube-controller-manager` (the HPA, on a server that
        // predates scale tracking) at 21:07:55; both list `f:spec.f:replicas`.
        let d = fixture("kcm-owns-spec-replicas-argocd-update.yaml");
        let name = image_of_first(&d);
        let owners = field_owners(&d.metadata, VersionSource::Image(&name), false);
        assert_eq!(
            who(&owners.replicas),
            Some(("kube-controller-manager", "Update", None))
        );
        assert_eq!(
            owners.version.as_ref().map(|c| c.manager.as_str()),
            Some("argocd")
        );
    }

    #[test]
    fn an_env_var_created_by_kubectl_create_and_an_image_set_by_argo_cd() {
        let d = fixture("kubectl-edit-create-rollout-argocd-list.yaml");
        let name = image_of_first(&d);
        let owners = field_owners(&d.metadata, VersionSource::Image(&name), false);
        assert_eq!(
            who(&owners.bindings),
            Some(("kubectl-create", "Update", None))
        );
        assert_eq!(
            owners.bindings.as_ref().unwrap().field,
            "spec.template.spec.containers[dispatcher].env"
        );
        assert_eq!(
            who(&owners.version),
            Some(("argocd-controller", "Update", None))
        );
        assert_eq!(owners.replicas, None, "no manager owns spec.replicas here");
    }

    #[test]
    fn keyed_elements_read_by_name() {
        assert_eq!(keyed_name(r#"k:{"name":"api"}"#).as_deref(), Some("api"));
        assert_eq!(
            keyed_name(r#"k:{"containerPort":80,"protocol":"TCP"}"#),
            None
        );
        assert_eq!(keyed_name("f:image"), None);
    }
}
