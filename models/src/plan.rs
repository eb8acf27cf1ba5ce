//! The plan diff: declared workloads against what a target currently runs.

use crate::specification::{SpecificationSnapshot, Workload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// One resource a plan would add, change or delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadChange {
    /// The workload's name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// For a change: the fields that differ (`version`, `replicas`, `configRefs` …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// What a plan would do, sorted by workload name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanChanges {
    /// Declared but not running.
    pub adds: Vec<WorkloadChange>,
    /// Running with different fields.
    pub changes: Vec<WorkloadChange>,
    /// Running but not declared.
    pub deletes: Vec<WorkloadChange>,
}

impl PlanChanges {
    /// A plan that deletes anything is destructive.
    pub fn is_destructive(&self) -> bool {
        !self.deletes.is_empty()
    }

    /// How many resources applying changes: every add, change and delete.
    pub fn count(&self) -> usize {
        self.adds.len() + self.changes.len() + self.deletes.len()
    }

    /// Whether applying would change nothing.
    pub fn is_empty(&self) -> bool {
        self.adds.is_empty() && self.changes.is_empty() && self.deletes.is_empty()
    }
}

/// Diffs the declared workloads against the current ones.
pub fn diff(declared: &[Workload], current: &[Workload]) -> PlanChanges {
    let declared: BTreeMap<&str, &Workload> =
        declared.iter().map(|w| (w.name.as_str(), w)).collect();
    let current: BTreeMap<&str, &Workload> = current.iter().map(|w| (w.name.as_str(), w)).collect();
    let mut plan = PlanChanges::default();
    for (name, want) in &declared {
        match current.get(name) {
            None => plan.adds.push(change(want, Vec::new())),
            Some(have) => {
                let fields = changed_fields(want, have);
                if !fields.is_empty() {
                    plan.changes.push(change(want, fields));
                }
            }
        }
    }
    for (name, have) in &current {
        if !declared.contains_key(name) {
            plan.deletes.push(change(have, Vec::new()));
        }
    }
    plan
}

fn change(w: &Workload, fields: Vec<String>) -> WorkloadChange {
    WorkloadChange {
        name: w.name.clone(),
        kind: w.kind.clone(),
        fields,
    }
}

fn changed_fields(want: &Workload, have: &Workload) -> Vec<String> {
    let mut fields = Vec::new();
    if want.kind != have.kind {
        fields.push("kind".to_owned());
    }
    if want.version != have.version {
        fields.push("version".to_owned());
    }
    if want.replicas != have.replicas {
        fields.push("replicas".to_owned());
    }
    if want.config_refs != have.config_refs {
        fields.push("configRefs".to_owned());
    }
    if want.secret_refs != have.secret_refs {
        fields.push("secretRefs".to_owned());
    }
    fields
}

/// Hash of every input of a plan: the specification and the target state it was planned
/// against. Any change to either gives another hash, so an approval of one plan can never be
/// used for another.
pub fn inputs_hash(spec: &SpecificationSnapshot, current: &[Workload]) -> String {
    let mut current: Vec<&Workload> = current.iter().collect();
    current.sort_by(|a, b| a.name.cmp(&b.name));
    let mut declared: Vec<&Workload> = spec.workloads.iter().collect();
    declared.sort_by(|a, b| a.name.cmp(&b.name));
    // serde_json writes struct fields in declaration order and BTreeMaps sorted, so this
    // document is canonical for equal inputs.
    let doc = serde_json::json!({
        "programRef": spec.program_ref,
        "programVersion": spec.program_version,
        "configRefs": spec.config_refs,
        "secretRefs": spec.secret_refs,
        "declared": declared,
        "current": current,
    });
    let digest = Sha256::digest(doc.to_string().as_bytes());
    format!("sha256:{}", hex::encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str, version: &str, replicas: u32) -> Workload {
        Workload {
            name: name.into(),
            kind: "deployment".into(),
            version: version.into(),
            replicas,
            config_refs: Default::default(),
            secret_refs: Default::default(),
        }
    }

    fn spec(workloads: Vec<Workload>) -> SpecificationSnapshot {
        SpecificationSnapshot {
            specification_id: "s".into(),
            version: 1,
            program_ref: "repo//infra".into(),
            program_version: "abc123".into(),
            config_refs: Default::default(),
            secret_refs: Default::default(),
            workloads,
        }
    }

    #[test]
    fn empty_target_adds_every_declared_workload() {
        let plan = diff(&[w("api", "1.0", 2), w("web", "1.0", 1)], &[]);
        let names: Vec<_> = plan.adds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["api", "web"]);
        assert!(plan.changes.is_empty() && plan.deletes.is_empty());
        assert!(!plan.is_destructive());
    }

    #[test]
    fn converged_target_plans_nothing() {
        let ws = [w("api", "1.0", 2)];
        assert!(diff(&ws, &ws).is_empty());
    }

    #[test]
    fn changed_fields_are_named() {
        let mut want = w("api", "2.0", 3);
        want.config_refs.insert("db".into(), "cfg://db".into());
        let plan = diff(&[want], &[w("api", "1.0", 2)]);
        assert_eq!(plan.changes.len(), 1);
        assert_eq!(
            plan.changes[0].fields,
            ["version", "replicas", "configRefs"]
        );
    }

    #[test]
    fn undeclared_workloads_are_deleted_and_destructive() {
        let plan = diff(
            &[w("api", "1.0", 1)],
            &[w("api", "1.0", 1), w("old", "0.1", 1)],
        );
        assert_eq!(plan.deletes.len(), 1);
        assert_eq!(plan.deletes[0].name, "old");
        assert!(plan.is_destructive());
    }

    #[test]
    fn inputs_hash_depends_on_spec_and_target_but_not_order() {
        let s = spec(vec![w("a", "1", 1), w("b", "1", 1)]);
        let reordered = spec(vec![w("b", "1", 1), w("a", "1", 1)]);
        assert_eq!(inputs_hash(&s, &[]), inputs_hash(&reordered, &[]));
        assert_ne!(inputs_hash(&s, &[]), inputs_hash(&s, &[w("a", "1", 1)]));
        let mut other = s.clone();
        other.program_version = "def456".into();
        assert_ne!(inputs_hash(&s, &[]), inputs_hash(&other, &[]));
    }
}
