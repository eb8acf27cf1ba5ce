//! Whether an observation is compared at all: one that read the same objects as the last one
//! recorded, against the same inputs, finds what that one found, and its record skips the
//! comparison. Decided before the batch reads the open findings: a record that skips it needs
//! only those a proposal covers, not a namespace's tens of posture findings.

use chrono::{DateTime, Utc};
use runtime_cloud_models::drift_rules::DriftRule;
use runtime_cloud_models::inventory::RecordRequest;
use runtime_cloud_models::observation::{DriftedResource, Observation, ObservedWorkload};
use runtime_cloud_models::posture::Violation;
use runtime_cloud_store::Error;
use runtime_cloud_store::decode::At;
use runtime_cloud_store::entities::runtime_inventories as rows;
use runtime_cloud_store::specifications::Specification;

/// An observed (not unreachable) observation's comparison with the inventory recorded last.
#[derive(Debug)]
pub(super) struct Comparison {
    /// What it compares against ([`key`]), recorded with the inventory.
    pub key: String,
    /// The workloads recorded last.
    pub previous: Vec<ObservedWorkload>,
    /// The same objects against the same inputs as the last recorded comparison, which was
    /// of a reachable target: its findings stand.
    pub unchanged: bool,
}

impl Comparison {
    /// The comparison of `req` with the `inventory` recorded last, against `spec` and `rules`
    /// (the environment's) at `now`; none for an unreachable target (nothing is compared).
    pub(super) fn of(
        req: &RecordRequest,
        inventory: Option<&rows::Model>,
        spec: Option<&Specification>,
        rules: &[DriftRule],
        now: DateTime<Utc>,
    ) -> Result<Option<Self>, Error> {
        let Observation::Observed {
            workloads,
            resources,
            posture,
            ..
        } = &req.observation
        else {
            return Ok(None);
        };
        let previous: Vec<ObservedWorkload> = match inventory {
            Some(i) => At {
                table: super::TABLE,
                row: &i.id,
            }
            .json("workloads", &i.workloads)?,
            None => Vec::new(),
        };
        let key = key(
            spec.map(|s| s.specification_id.as_str()),
            rules,
            resources,
            posture,
            now,
        );
        let unchanged = inventory
            .is_some_and(|i| !i.stale && i.compared_with.as_deref() == Some(key.as_str()))
            && same_objects(&previous, workloads);
        Ok(Some(Self {
            key,
            previous,
            unchanged,
        }))
    }
}

/// What a comparison compares against, besides the observed workloads: the specification, the
/// drift rules active at `now`, the runner state's drift and the posture violations (a
/// NetworkPolicy is none of the workloads' objects).
fn key(
    specification_id: Option<&str>,
    rules: &[DriftRule],
    resources: &[DriftedResource],
    posture: &[Violation],
    now: DateTime<Utc>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(specification_id.unwrap_or("-").as_bytes());
    for rule in rules.iter().filter(|r| r.active(now)) {
        hash.update(b"\0rule:");
        hash.update(rule.rule_id.as_bytes());
    }
    for r in resources {
        hash.update(b"\0resource:");
        hash.update(serde_json::to_string(r).unwrap_or_default().as_bytes());
    }
    // A namespace's violations are tens: hashed field by field, not serialized.
    for v in posture {
        for field in [&v.rule, &v.resource, &v.detail] {
            hash.update(b"\0posture:");
            hash.update(field.as_bytes());
        }
    }
    hex::encode(hash.finalize())
}

/// Whether two observations read the same objects: each workload's source version is the
/// same (objects with the same `resourceVersion` are the same objects) and so is who manages
/// them (a stack that took an object over does not change it), or, where the target gives
/// none, the workloads are equal.
fn same_objects(before: &[ObservedWorkload], after: &[ObservedWorkload]) -> bool {
    before.len() == after.len()
        && before.iter().zip(after).all(|(a, b)| {
            a.name == b.name
                && a.managed_by == b.managed_by
                && match (&a.source_version, &b.source_version) {
                    (Some(x), Some(y)) => x == y,
                    _ => a == b,
                }
        })
}
