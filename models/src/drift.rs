//! The DriftComparer: declared workloads against observed ones, as findings; and how open
//! findings group into a reconciliation proposal.

use crate::observation::{DriftedResource, ObservedWorkload, ResourceChange};
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
    }
);

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

/// One difference, identified by `(kind, resource)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub kind: DriftKind,
    /// `{workloadKind}/{name}`.
    pub resource: String,
    pub declared: Option<serde_json::Value>,
    pub observed: Option<serde_json::Value>,
}

fn resource(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

/// Compares declared workloads with observed ones. Pure and allocation-light: it runs on every
/// observation of every environment.
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
            });
            continue;
        };
        if want.version != have.version {
            findings.push(Finding {
                kind: DriftKind::Version,
                resource: res(),
                declared: Some(want.version.clone().into()),
                observed: Some(have.version.clone().into()),
            });
        }
        if want.replicas != have.replicas_desired || want.replicas != have.replicas_ready {
            findings.push(Finding {
                kind: DriftKind::Replica,
                resource: res(),
                declared: Some(want.replicas.into()),
                observed: Some(serde_json::json!({ "desired": have.replicas_desired, "ready": have.replicas_ready })),
            });
        }
        if want.config_refs != have.config_refs {
            findings.push(Finding {
                kind: DriftKind::Configuration,
                resource: res(),
                declared: Some(serde_json::json!(want.config_refs)),
                observed: Some(serde_json::json!(have.config_refs)),
            });
        }
        if want.secret_refs != have.secret_refs {
            findings.push(Finding {
                kind: DriftKind::SecretBinding,
                resource: res(),
                declared: Some(serde_json::json!(want.secret_refs)),
                observed: Some(serde_json::json!(have.secret_refs)),
            });
        }
    }
    let declared_names: std::collections::BTreeSet<&str> =
        declared.iter().map(|w| w.name.as_str()).collect();
    for have in observed {
        if !declared_names.contains(have.name.as_str()) {
            findings.push(Finding {
                kind: DriftKind::Unmanaged,
                resource: resource(&have.kind, &have.name),
                declared: None,
                observed: Some(serde_json::json!({ "version": have.version, "replicas": have.replicas_desired })),
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
            },
            ResourceChange::Deleted => Finding {
                kind: DriftKind::Missing,
                resource: r.urn.clone(),
                declared: Some(serde_json::json!({ "type": r.kind, "state": "as applied" })),
                observed: None,
            },
        })
        .collect()
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
pub fn proposal_plan(findings: &[Finding]) -> ProposalPlan {
    let count = |k: DriftKind| findings.iter().filter(|f| f.kind == k).count();
    let unmanaged = count(DriftKind::Unmanaged);
    let missing = count(DriftKind::Missing);
    let changes = findings.len() - unmanaged - missing;
    if unmanaged > 0 && unmanaged == findings.len() {
        return ProposalPlan {
            direction: Direction::AdoptObserved,
            destructive: false,
            plan_summary: serde_json::json!({ "adds": 0, "changes": 0, "deletes": 0, "adopts": unmanaged }),
        };
    }
    ProposalPlan {
        direction: Direction::ApplyDeclared,
        destructive: unmanaged > 0,
        plan_summary: serde_json::json!({ "adds": missing, "changes": changes, "deletes": unmanaged }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn only_unmanaged_is_adopted_without_deleting() {
        let only = [Finding {
            kind: DriftKind::Unmanaged,
            resource: "d/x".into(),
            declared: None,
            observed: None,
        }];
        let p = proposal_plan(&only);
        assert_eq!(p.direction, Direction::AdoptObserved);
        assert!(!p.destructive);
        let mixed = [
            only[0].clone(),
            Finding {
                kind: DriftKind::Version,
                resource: "d/y".into(),
                declared: None,
                observed: None,
            },
        ];
        let p = proposal_plan(&mixed);
        assert_eq!(p.direction, Direction::ApplyDeclared);
        assert!(p.destructive, "applying deletes the unmanaged workload");
        let p = proposal_plan(&mixed[1..]);
        assert!(!p.destructive);
        assert_eq!(p.plan_summary["changes"], 1);
    }
}
