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
    /// Who last wrote each part of the workload, when the target records it (Kubernetes
    /// `managedFields`); empty otherwise.
    #[serde(default, skip_serializing_if = "FieldOwners::is_empty")]
    pub changed_by: FieldOwners,
    /// The target's version of what this workload was read from (Kubernetes: the object's
    /// `resourceVersion` and those of the Services and Ingresses that reach it). Unchanged
    /// versions mean unchanged objects: recording skips the comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_version: Option<String>,
    /// The main container's image, where the target runs containers (Kubernetes): what a
    /// manifest generated for an unmanaged workload runs (`models::adoption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The runner whose recorded state manages the workload (`pulumi`: a Kubernetes object of
    /// the environment's Pulumi stack, read with `pulumi stack export`). A workload the stack
    /// manages is not unmanaged, declared in the specification or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// What one replica requests (Kubernetes: its containers' `resources.requests`), which
    /// cost prices (`models::cost`); none where the target says nothing of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<crate::cost::Requests>,
}

/// The product's own field manager: Kubernetes objects it writes carry it in `managedFields`,
/// so a difference it made is recognisable as its own.
pub const FIELD_MANAGER: &str = "runtime-cloud";

/// Who last wrote a field: a Kubernetes `managedFields` entry that owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedBy {
    /// The field manager (`kubectl-edit`, `kube-controller-manager`, `runtime-cloud` …).
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    /// When the entry was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<chrono::DateTime<chrono::Utc>>,
    /// The owned field, as a path: `spec.replicas`, `spec.template.spec.containers[api].image`.
    pub field: String,
    /// `scale` or `status` when the entry was written through a subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

impl ChangedBy {
    /// Whether the product itself made the change.
    pub fn by_runtime_cloud(&self) -> bool {
        self.manager == FIELD_MANAGER
    }
}

/// Who last wrote the parts of a workload the comparer compares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldOwners {
    /// The field the version is read from (the version label, or the main container's image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ChangedBy>,
    /// The desired replica count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ChangedBy>,
    /// The ready replica count (the controller's status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<ChangedBy>,
    /// The ConfigMap and Secret bindings (`env`, `envFrom`, volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bindings: Option<ChangedBy>,
    /// The workload as a whole (its pod template): who created or last rewrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<ChangedBy>,
}

impl FieldOwners {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl ObservedWorkload {
    /// What cost counts of it: its desired replicas and what each requests.
    pub fn usage(&self) -> crate::cost::WorkloadUsage {
        crate::cost::WorkloadUsage {
            name: self.name.clone(),
            replicas: self.replicas_desired,
            requests: self.requests,
        }
    }

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
            changed_by: FieldOwners::default(),
            managed_by: None,
            source_version: None,
            image: None,
            requests: None,
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
        /// The security posture rules its objects break (`models::posture`): none where the
        /// target's observer reads no such facts, or posture findings are turned off.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        posture: Vec<crate::posture::Violation>,
        /// The runner state's resources by type, and how many of each (what cost prices by
        /// type); none for a runner that records no state.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        resource_types: std::collections::BTreeMap<String, u32>,
        /// When the target was read: an observation recorded later than `StalenessMinutes`
        /// after it (a retried record, a worker that was down) is never auto-accepted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observed_at: Option<chrono::DateTime<chrono::Utc>>,
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

/// How long ago environments were last observed successfully: the median, the 99th
/// percentile (nearest rank) and the oldest, in seconds; what an operator reads to know how
/// fresh the inventory is (`GET /fleet/meta/summary`, `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservationAge {
    /// Environments observed successfully at least once.
    pub environments: u64,
    pub p50_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
}

impl ObservationAge {
    /// The quantiles of `ages` (seconds); none without an age.
    pub fn of(mut ages: Vec<f64>) -> Option<Self> {
        let n = ages.len();
        if n == 0 {
            return None;
        }
        ages.sort_by(f64::total_cmp);
        // Nearest rank: the smallest age at least `q` of them are no older than.
        let rank = |q: f64| ages[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Self {
            environments: n as u64,
            p50_seconds: rank(0.5),
            p99_seconds: rank(0.99),
            max_seconds: ages[n - 1],
        })
    }
}

#[cfg(test)]
mod age_tests {
    use super::*;

    #[test]
    fn ages_give_their_nearest_rank_quantiles() {
        assert_eq!(ObservationAge::of(Vec::new()), None);
        let one = ObservationAge::of(vec![7.0]).expect("one");
        assert_eq!(
            (one.p50_seconds, one.p99_seconds, one.max_seconds),
            (7.0, 7.0, 7.0)
        );
        // 1 s … 200 s, shuffled: the median is the 100th, the 99th percentile the 198th.
        let ages: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        let q = ObservationAge::of(ages).expect("ages");
        assert_eq!(q.environments, 200);
        assert_eq!(
            (q.p50_seconds, q.p99_seconds, q.max_seconds),
            (100.0, 198.0, 200.0)
        );
    }
}

/// What a cluster's watches say about one environment observed there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    /// Since when every watch of the cluster has followed every change (none while one fails).
    pub synced_since: Option<chrono::DateTime<chrono::Utc>>,
    /// The watch's holder's last beat.
    pub beat_at: chrono::DateTime<chrono::Utc>,
    /// When the environment's namespace last changed, as far as the watches know.
    pub changed_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// How long a watch's holder may go without a beat and still vouch for its cluster: its
/// heartbeat timeout, twice over.
pub const WATCH_BEAT_FRESH: chrono::TimeDelta = chrono::TimeDelta::seconds(20);

impl Watched {
    /// Whether the watches vouch that nothing of the environment changed since it was last
    /// observed (successfully, at `observed_at`, and not flagged stale since): they followed
    /// every change since before that observation, their holder is alive, and no change came
    /// after it. The sweep then records the last observation again instead of reading the
    /// target; a change since is being observed by the watches already.
    pub fn vouches(
        &self,
        observed_at: Option<chrono::DateTime<chrono::Utc>>,
        stale: bool,
        now: chrono::DateTime<chrono::Utc>,
    ) -> bool {
        let (Some(observed_at), Some(synced_since)) = (observed_at, self.synced_since) else {
            return false;
        };
        !stale
            && now - self.beat_at <= WATCH_BEAT_FRESH
            && synced_since <= observed_at
            && self.changed_at.is_none_or(|changed| changed < observed_at)
    }
}

#[cfg(test)]
mod watched_tests {
    use super::*;
    use chrono::{TimeDelta, Utc};

    #[test]
    fn watches_vouch_only_for_an_unchanged_environment_observed_while_they_followed_it() {
        let now = Utc::now();
        let ago = |s: i64| now - TimeDelta::seconds(s);
        let watched = Watched {
            synced_since: Some(ago(600)),
            beat_at: ago(2),
            changed_at: Some(ago(300)),
        };
        // Observed after the last change, while the watches followed the cluster.
        assert!(watched.vouches(Some(ago(100)), false, now));
        // Never observed, or flagged stale.
        assert!(!watched.vouches(None, false, now));
        assert!(!watched.vouches(Some(ago(100)), true, now));
        // Changed since the observation.
        assert!(!watched.vouches(Some(ago(400)), false, now));
        // Observed before the watches caught up (a relist since): they may have missed one.
        assert!(!watched.vouches(Some(ago(700)), false, now));
        // Failing watches, or a holder silent too long.
        let failing = Watched {
            synced_since: None,
            ..watched
        };
        assert!(!failing.vouches(Some(ago(100)), false, now));
        let silent = Watched {
            beat_at: ago(60),
            ..watched
        };
        assert!(!silent.vouches(Some(ago(100)), false, now));
        // Never changed since the watches started.
        let quiet = Watched {
            changed_at: None,
            ..watched
        };
        assert!(quiet.vouches(Some(ago(100)), false, now));
    }
}
