//! Observed state: what a target reports it runs, never what anyone declared.

use crate::specification::Refs;
use serde::{Deserialize, Serialize};

/// One observed workload. Bindings are references only: values never enter the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedWorkload {
    pub name: String,
    pub kind: String,
    pub version: String,
    pub replicas_ready: u32,
    pub replicas_desired: u32,
    pub endpoints: Vec<String>,
    pub config_refs: Refs,
    pub secret_refs: Refs,
    /// `healthy`, `progressing` (a rollout under way), `degraded` or `unavailable`.
    pub health: String,
}

impl ObservedWorkload {
    /// What a target running `w` exactly as declared reports: every replica ready, serving at
    /// `endpoints`, healthy (unavailable when it runs no replica).
    pub fn as_declared(w: &crate::specification::Workload, endpoints: Vec<String>) -> Self {
        Self {
            name: w.name.clone(),
            kind: w.kind.clone(),
            version: w.version.clone(),
            replicas_ready: w.replicas,
            replicas_desired: w.replicas,
            endpoints,
            config_refs: w.config_refs.clone(),
            secret_refs: w.secret_refs.clone(),
            health: if w.replicas > 0 {
                "healthy"
            } else {
                "unavailable"
            }
            .to_owned(),
        }
    }
}

crate::wire::wire_enum!(
    /// How a resource of the target's recorded state differs from what its cloud reports.
    ResourceChange, "resource change" {
        /// Changed out of band: its properties are not what was applied.
        Changed => "changed",
        /// Deleted out of band: recorded, but gone.
        Deleted => "deleted",
    }
);

/// A resource the runner's state records (a Pulumi stack's) that its cloud reports
/// otherwise (`pulumi refresh --preview-only`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedResource {
    /// The resource's URN.
    pub urn: String,
    /// Its type (`aws:s3/bucket:Bucket`).
    pub kind: String,
    pub change: ResourceChange,
    /// The property paths that differ (changed resources).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// The result of reading a target once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Observation {
    /// The target answered with these workloads, and the resources of its recorded state
    /// that drifted in its cloud (none for targets without such state).
    Observed {
        workloads: Vec<ObservedWorkload>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        resources: Vec<DriftedResource>,
    },
    /// The target could not be read; the environment becomes stale and no finding is raised.
    Unreachable { reason: String },
}

/// What changed between two observations of an environment, as `ObservedStateChanged` reports
/// it: names of workloads whose version, replicas or health moved, that appeared or went away.
pub fn changes(before: &[ObservedWorkload], after: &[ObservedWorkload]) -> serde_json::Value {
    use std::collections::BTreeMap;
    let before: BTreeMap<&str, &ObservedWorkload> =
        before.iter().map(|w| (w.name.as_str(), w)).collect();
    let after: BTreeMap<&str, &ObservedWorkload> =
        after.iter().map(|w| (w.name.as_str(), w)).collect();
    let mut out = Vec::new();
    for (name, now) in &after {
        match before.get(name) {
            None => out.push(serde_json::json!({ "workload": name, "change": "appeared" })),
            Some(was) => {
                let mut fields = Vec::new();
                if was.version != now.version {
                    fields.push("version");
                }
                if was.replicas_ready != now.replicas_ready
                    || was.replicas_desired != now.replicas_desired
                {
                    fields.push("replicas");
                }
                if was.health != now.health {
                    fields.push("health");
                }
                if was.config_refs != now.config_refs || was.secret_refs != now.secret_refs {
                    fields.push("bindings");
                }
                if !fields.is_empty() {
                    out.push(serde_json::json!({ "workload": name, "change": "changed", "fields": fields }));
                }
            }
        }
    }
    for name in before.keys() {
        if !after.contains_key(name) {
            out.push(serde_json::json!({ "workload": name, "change": "disappeared" }));
        }
    }
    serde_json::Value::Array(out)
}
