//! The DriftComparer: declared workloads against observed ones, as findings; and how open
//! findings group into a reconciliation proposal.

use crate::observation::{ChangedBy, DriftedResource, ObservedWorkload, ResourceChange};
use crate::posture::Violation;
use crate::specification::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::wire::wire_enum!(
    /// What differs.
    DriftKind, "drift kind" {
        /// Another version runs than declared.
        Version => "version",
        /// Another replica count is desired or ready than declared.
        Replica => "replica",
        /// Configuration bindings differ.
        Configuration => "configuration",
        /// Declared but not running.
        Missing => "missing",
        /// Running but not declared.
        Unmanaged => "unmanaged",
        /// Secret bindings differ.
        SecretBinding => "secret-binding",
        /// A security posture rule is broken (`rule` names which): nothing declared differs,
        /// so it is never proposed for reconciliation (`models::posture`).
        Posture => "posture",
    }
);

impl DriftKind {
    /// Whether findings of this kind are grouped into reconciliation proposals: every drift
    /// kind is (applying the declared state, or declaring the observed one, ends it); a
    /// posture finding is not (there is no declared state to apply).
    pub fn proposes(self) -> bool {
        self != DriftKind::Posture
    }
}

crate::wire::wire_enum!(
    /// The state of a reconciliation proposal.
    ProposalState, "proposal state" {
        /// Waiting for a decision.
        Proposed => "Proposed",
        /// Accepted (by policy or an operator): a provisioning run is planned.
        Accepted => "Accepted",
        /// Rejected by an operator.
        Rejected => "Rejected",
        /// A newer proposal (or an observation without drift) replaced it.
        Superseded => "Superseded",
        /// Its provisioning run applied.
        Applied => "Applied",
    }
);

crate::wire::wire_enum!(
    /// Which way a proposal reconciles.
    Direction, "direction" {
        /// Apply the declared specification to the target.
        ApplyDeclared => "apply-declared",
        /// Declare what is observed (when applying would only delete unmanaged workloads).
        AdoptObserved => "adopt-observed",
    }
);

/// One difference, identified by `(kind, resource, rule)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub kind: DriftKind,
    /// `{workloadKind}/{name}`.
    pub resource: String,
    /// The posture rule a `posture` finding breaks (`privileged-container`); none for drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub declared: Option<serde_json::Value>,
    pub observed: Option<serde_json::Value>,
    /// Who made the difference, when the target records it (Kubernetes `managedFields`): the
    /// entry that owns the drifted field. None for a missing workload (its object is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<ChangedBy>,
}

pub(crate) fn resource(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

/// Compares declared workloads with observed ones. Pure and allocation-light: it runs on every
/// observation of every environment. A workload neither declared nor managed by the runner's
/// recorded state (`managed_by`) is unmanaged.
pub fn compare(declared: &[Workload], observed: &[ObservedWorkload]) -> Vec<Finding> {
    let observed_by_name: BTreeMap<&str, &ObservedWorkload> =
        observed.iter().map(|w| (w.name.as_str(), w)).collect();
    let mut findings = Vec::new();
    for want in declared {
        let res = || resource(&want.kind, &want.name);
        let Some(have) = observed_by_name.get(want.name.as_str()) else {
            findings.push(Finding {
                kind: DriftKind::Missing,
                resource: res(),
                declared: Some(
                    serde_json::json!({ "version": want.version, "replicas": want.replicas }),
                ),
                observed: None,
                rule: None,
                changed_by: None,
            });
            continue;
        };
        let owners = &have.changed_by;
        if want.version != have.version {
            findings.push(Finding {
                kind: DriftKind::Version,
                resource: res(),
                declared: Some(want.version.clone().into()),
                observed: Some(have.version.clone().into()),
                rule: None,
                changed_by: owners.version.clone(),
            });
        }
        if want.replicas != have.replicas_desired || want.replicas != have.replicas_ready {
            findings.push(Finding {
                kind: DriftKind::Replica,
                resource: res(),
                declared: Some(want.replicas.into()),
                observed: Some(serde_json::json!({ "desired": have.replicas_desired, "ready": have.replicas_ready })),
                // Someone scaled it, or its replicas are not ready (the controller says so).
                rule: None,
                changed_by: if want.replicas != have.replicas_desired {
                    owners.replicas.clone()
                } else {
                    owners.ready.clone()
                },
            });
        }
        if want.config_refs != have.config_refs {
            findings.push(Finding {
                kind: DriftKind::Configuration,
                resource: res(),
                declared: Some(serde_json::json!(want.config_refs)),
                observed: Some(serde_json::json!(have.config_refs)),
                rule: None,
                changed_by: owners.bindings.clone(),
            });
        }
        if want.secret_refs != have.secret_refs {
            findings.push(Finding {
                kind: DriftKind::SecretBinding,
                resource: res(),
                declared: Some(serde_json::json!(want.secret_refs)),
                observed: Some(serde_json::json!(have.secret_refs)),
                rule: None,
                changed_by: owners.bindings.clone(),
            });
        }
    }
    let declared_names: std::collections::BTreeSet<&str> =
        declared.iter().map(|w| w.name.as_str()).collect();
    for have in observed {
        if !declared_names.contains(have.name.as_str()) && have.managed_by.is_none() {
            findings.push(Finding {
                kind: DriftKind::Unmanaged,
                resource: resource(&have.kind, &have.name),
                declared: None,
                observed: Some(serde_json::json!({ "version": have.version, "replicas": have.replicas_desired })),
                rule: None,
                changed_by: have.changed_by.workload.clone(),
            });
        }
    }
    findings
}

/// Findings of the resources a runner's state records that drifted in their cloud: a changed
/// one is a `configuration` finding, a deleted one `missing`, each with the URN as resource.
/// Applying the declared specification again restores both.
pub fn resource_findings(drifted: &[DriftedResource]) -> Vec<Finding> {
    drifted
        .iter()
        .map(|r| match r.change {
            ResourceChange::Changed => Finding {
                kind: DriftKind::Configuration,
                resource: r.urn.clone(),
                declared: Some(serde_json::json!({ "type": r.kind, "state": "as applied" })),
                observed: Some(serde_json::json!({ "type": r.kind, "changed": r.fields })),
                rule: None,
                changed_by: None,
            },
            ResourceChange::Deleted => Finding {
                kind: DriftKind::Missing,
                resource: r.urn.clone(),
                declared: Some(serde_json::json!({ "type": r.kind, "state": "as applied" })),
                observed: None,
                rule: None,
                changed_by: None,
            },
        })
        .collect()
}

/// The `posture` findings of an observation's violations: one per resource and rule (a pod
/// with two privileged containers is one finding), what breaks it as the finding's
/// `observed.details`, in the order the rules found them.
pub fn posture_findings(violations: &[Violation]) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut details: Vec<Vec<&str>> = Vec::new();
    for v in violations {
        let same = |f: &Finding| f.resource == v.resource && f.rule.as_deref() == Some(&v.rule);
        match out.iter().position(same) {
            Some(at) => details[at].push(&v.detail),
            None => {
                out.push(Finding {
                    kind: DriftKind::Posture,
                    resource: v.resource.clone(),
                    rule: Some(v.rule.clone()),
                    declared: None,
                    observed: None,
                    changed_by: None,
                });
                details.push(vec![&v.detail]);
            }
        }
    }
    for (f, details) in out.iter_mut().zip(details) {
        f.observed = Some(serde_json::json!({ "details": details }));
    }
    out
}

/// How a set of open findings would be reconciled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalPlan {
    pub direction: Direction,
    pub destructive: bool,
    pub plan_summary: serde_json::Value,
}

/// Groups open findings into a proposal: adopt what is observed when applying would only
/// delete unmanaged workloads; otherwise apply the declared state, which is destructive when
/// it deletes something.
///
/// The summary names who made each difference when the target records it (`changedBy`: the
/// finding's kind and resource with the manager, operation and time), so a reviewer sees
/// whether a person, a controller or the product itself moved the target.
pub fn proposal_plan(findings: &[Finding]) -> ProposalPlan {
    let findings: Vec<&Finding> = findings.iter().filter(|f| f.kind.proposes()).collect();
    let count = |k: DriftKind| findings.iter().filter(|f| f.kind == k).count();
    let unmanaged = count(DriftKind::Unmanaged);
    let missing = count(DriftKind::Missing);
    let changes = findings.len() - unmanaged - missing;
    let (direction, destructive, mut plan_summary) = if unmanaged > 0 && unmanaged == findings.len()
    {
        (
            Direction::AdoptObserved,
            false,
            serde_json::json!({ "adds": 0, "changes": 0, "deletes": 0, "adopts": unmanaged }),
        )
    } else {
        (
            Direction::ApplyDeclared,
            unmanaged > 0,
            serde_json::json!({ "adds": missing, "changes": changes, "deletes": unmanaged }),
        )
    };
    let changed_by: Vec<serde_json::Value> = findings
        .iter()
        .filter_map(|f| {
            let by = f.changed_by.as_ref()?;
            let mut entry = serde_json::json!({ "kind": f.kind, "resource": f.resource });
            if let (Some(e), Ok(serde_json::Value::Object(by))) =
                (entry.as_object_mut(), serde_json::to_value(by))
            {
                e.extend(by);
            }
            Some(entry)
        })
        .collect();
    if let (false, Some(summary)) = (changed_by.is_empty(), plan_summary.as_object_mut()) {
        summary.insert("changedBy".into(), changed_by.into());
    }
    ProposalPlan {
        direction,
        destructive,
        plan_summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::posture;

    #[test]
    fn drifted_resources_are_configuration_and_missing_findings_by_urn() {
        let urn = |n: &str| format!("urn:pulumi:dev::shop::aws:s3/bucket:Bucket::{n}");
        let drifted = [
            DriftedResource {
                urn: urn("docs"),
                kind: "aws:s3/bucket:Bucket".into(),
                change: ResourceChange::Changed,
                fields: vec!["acl".into()],
            },
            DriftedResource {
                urn: urn("logs"),
                kind: "aws:s3/bucket:Bucket".into(),
                change: ResourceChange::Deleted,
                fields: vec![],
            },
        ];
        let found = resource_findings(&drifted);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].kind, found[0].resource.as_str()),
            (DriftKind::Configuration, urn("docs").as_str())
        );
        assert_eq!(
            found[0].observed.as_ref().unwrap()["changed"],
            serde_json::json!(["acl"])
        );
        assert_eq!(
            (found[1].kind, found[1].resource.as_str()),
            (DriftKind::Missing, urn("logs").as_str())
        );
        assert_eq!(found[1].observed, None);
        // Reconciling applies the declared program again: a change and an add, nothing deleted.
        let plan = proposal_plan(&found);
        assert_eq!(plan.direction, Direction::ApplyDeclared);
        assert!(!plan.destructive);
        assert_eq!(
            plan.plan_summary,
            serde_json::json!({ "adds": 1, "changes": 1, "deletes": 0 })
        );
    }

    fn declared(name: &str) -> Workload {
        Workload {
            name: name.into(),
            kind: "deployment".into(),
            version: "1.0".into(),
            replicas: 2,
            config_refs: [("settings".to_owned(), "config://a".to_owned())].into(),
            secret_refs: [("db".to_owned(), "secretbroker://a/db".to_owned())].into(),
        }
    }

    fn observed(w: &Workload) -> ObservedWorkload {
        ObservedWorkload::as_declared(w, Vec::new())
    }

    fn kinds(f: &[Finding]) -> Vec<DriftKind> {
        f.iter().map(|f| f.kind).collect()
    }

    #[test]
    fn no_drift_when_observed_matches_declared() {
        let d = vec![declared("api"), declared("web")];
        let o: Vec<_> = d.iter().map(observed).collect();
        assert!(compare(&d, &o).is_empty());
    }

    #[test]
    fn version_drift() {
        let d = vec![declared("api")];
        let mut o = observed(&d[0]);
        o.version = "1.1".into();
        let f = compare(&d, &[o]);
        assert_eq!(kinds(&f), [DriftKind::Version]);
        assert_eq!(f[0].resource, "deployment/api");
        assert_eq!(f[0].declared, Some("1.0".into()));
        assert_eq!(f[0].observed, Some("1.1".into()));
    }

    #[test]
    fn replica_drift_desired_or_ready() {
        let d = vec![declared("api")];
        let mut scaled = observed(&d[0]);
        scaled.replicas_desired = 5;
        scaled.replicas_ready = 5;
        assert_eq!(kinds(&compare(&d, &[scaled])), [DriftKind::Replica]);
        let mut not_ready = observed(&d[0]);
        not_ready.replicas_ready = 1;
        assert_eq!(kinds(&compare(&d, &[not_ready])), [DriftKind::Replica]);
    }

    fn by(manager: &str, field: &str) -> Option<ChangedBy> {
        Some(ChangedBy {
            manager: manager.into(),
            operation: "Update".into(),
            time: None,
            field: field.into(),
            subresource: None,
        })
    }

    #[test]
    fn each_finding_names_the_owner_of_its_drifted_field() {
        let d = vec![declared("api"), declared("web")];
        let mut api = observed(&d[0]);
        api.changed_by = crate::observation::FieldOwners {
            version: by("kubectl-set", "spec.template.spec.containers[api].image"),
            replicas: by("kubectl", "spec.replicas"),
            ready: by("kube-controller-manager", "status.readyReplicas"),
            bindings: by("kubectl-edit", "spec.template.spec.containers[api].env"),
            workload: by("kubectl-create", "spec.template"),
        };
        api.version = "1.1".into();
        api.replicas_desired = 3;
        api.config_refs.clear();
        let mut stray = observed(&declared("debug"));
        stray.changed_by = api.changed_by.clone();
        let found = compare(&d, &[api.clone(), stray]);
        let manager = |k: DriftKind| {
            found
                .iter()
                .find(|f| f.kind == k)
                .and_then(|f| f.changed_by.as_ref())
                .map(|c| c.manager.as_str())
        };
        assert_eq!(manager(DriftKind::Version), Some("kubectl-set"));
        assert_eq!(manager(DriftKind::Replica), Some("kubectl"), "scaled");
        assert_eq!(manager(DriftKind::Configuration), Some("kubectl-edit"));
        assert_eq!(manager(DriftKind::Unmanaged), Some("kubectl-create"));
        assert_eq!(manager(DriftKind::Missing), None, "web's object is gone");
        // Desired as declared but not every replica ready: the controller's status says so.
        api.version = "1.0".into();
        api.replicas_desired = 2;
        api.replicas_ready = 1;
        api.config_refs = d[0].config_refs.clone();
        let found = compare(&d[..1], &[api]);
        assert_eq!(kinds(&found), [DriftKind::Replica]);
        assert_eq!(
            found[0].changed_by.as_ref().map(|c| c.manager.as_str()),
            Some("kube-controller-manager")
        );
    }

    #[test]
    fn configuration_drift() {
        let d = vec![declared("api")];
        let mut o = observed(&d[0]);
        o.config_refs.insert("settings".into(), "config://b".into());
        assert_eq!(kinds(&compare(&d, &[o])), [DriftKind::Configuration]);
    }

    #[test]
    fn secret_binding_drift() {
        let d = vec![declared("api")];
        let mut o = observed(&d[0]);
        o.secret_refs.clear();
        assert_eq!(kinds(&compare(&d, &[o])), [DriftKind::SecretBinding]);
    }

    #[test]
    fn missing_and_unmanaged() {
        let d = vec![declared("api")];
        let mut stray = observed(&declared("debug-shell"));
        stray.kind = "pod".into();
        let f = compare(&d, &[stray]);
        assert_eq!(kinds(&f), [DriftKind::Missing, DriftKind::Unmanaged]);
        assert_eq!(f[1].resource, "pod/debug-shell");
    }

    #[test]
    fn a_workload_the_runners_state_manages_is_not_unmanaged() {
        let mut adopted = observed(&declared("batch"));
        adopted.managed_by = Some("pulumi".into());
        assert!(compare(&[], &[adopted.clone()]).is_empty());
        adopted.managed_by = None;
        assert_eq!(kinds(&compare(&[], &[adopted])), [DriftKind::Unmanaged]);
    }

    #[test]
    fn violations_of_one_rule_on_one_resource_are_one_finding() {
        let v = |rule: &str, resource: &str, detail: &str| Violation {
            rule: rule.into(),
            resource: resource.into(),
            detail: detail.into(),
        };
        let found = posture_findings(&[
            v(
                posture::PRIVILEGED_CONTAINER,
                "deployment/api",
                "container `a` is privileged",
            ),
            v(
                posture::MUTABLE_IMAGE_TAG,
                "deployment/api",
                "container `a`: latest",
            ),
            v(
                posture::PRIVILEGED_CONTAINER,
                "deployment/api",
                "container `b` is privileged",
            ),
            v(
                posture::PRIVILEGED_CONTAINER,
                "deployment/web",
                "container `w` is privileged",
            ),
        ]);
        let keys: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|f| (f.resource.as_str(), f.rule.as_deref()))
            .collect();
        assert_eq!(
            keys,
            [
                ("deployment/api", Some(posture::PRIVILEGED_CONTAINER)),
                ("deployment/api", Some(posture::MUTABLE_IMAGE_TAG)),
                ("deployment/web", Some(posture::PRIVILEGED_CONTAINER)),
            ]
        );
        assert!(found.iter().all(|f| f.kind == DriftKind::Posture));
        assert_eq!(
            found[0].observed,
            Some(serde_json::json!({ "details": [
                "container `a` is privileged",
                "container `b` is privileged"
            ] }))
        );
        assert_eq!(posture_findings(&[]), []);
    }

    #[test]
    fn posture_findings_are_never_proposed() {
        let d = vec![declared("api")];
        let mut stray = observed(&declared("debug-shell"));
        stray.kind = "pod".into();
        let mut found = compare(&d, &[stray]);
        let posture = Finding {
            kind: DriftKind::Posture,
            resource: "pod/debug-shell".into(),
            rule: Some("privileged-container".into()),
            declared: None,
            observed: None,
            changed_by: None,
        };
        let without = proposal_plan(&found);
        found.push(posture.clone());
        assert_eq!(proposal_plan(&found), without);
        // Alone, a posture finding plans nothing.
        let alone = proposal_plan(&[posture]);
        assert_eq!(
            alone.plan_summary,
            serde_json::json!({ "adds": 0, "changes": 0, "deletes": 0 })
        );
        assert!(!DriftKind::Posture.proposes() && DriftKind::Unmanaged.proposes());
    }

    #[test]
    fn only_unmanaged_is_adopted_without_deleting() {
        let only = [Finding {
            kind: DriftKind::Unmanaged,
            resource: "d/x".into(),
            declared: None,
            observed: None,
            rule: None,
            changed_by: None,
        }];
        let p = proposal_plan(&only);
        assert_eq!(p.direction, Direction::AdoptObserved);
        assert!(!p.destructive);
        let mixed = [
            only[0].clone(),
            Finding {
                kind: DriftKind::Version,
                resource: "d/y".into(),
                rule: None,
                declared: None,
                observed: None,
                changed_by: Some(ChangedBy {
                    manager: "kubectl-set".into(),
                    operation: "Update".into(),
                    time: None,
                    field: "spec.template.spec.containers[y].image".into(),
                    subresource: None,
                }),
            },
        ];
        let p = proposal_plan(&mixed);
        assert_eq!(p.direction, Direction::ApplyDeclared);
        assert!(p.destructive, "applying deletes the unmanaged workload");
        let p = proposal_plan(&mixed[1..]);
        assert!(!p.destructive);
        assert_eq!(p.plan_summary["changes"], 1);
        assert_eq!(
            p.plan_summary["changedBy"],
            serde_json::json!([{ "kind": "version", "resource": "d/y", "manager": "kubectl-set",
                                 "operation": "Update",
                                 "field": "spec.template.spec.containers[y].image" }]),
            "the summary names who made the difference"
        );
    }
}
