//! Quarantine: a workload's version refused fleet-wide for a tenant, because a rollout of it
//! was rolled back or an Operator said why.
//!
//! A quarantined version is not applied by anything automatic: the GitOps reconciler's
//! re-plan, an auto-accepted proposal, a new rollout and every run's gate refuse a
//! specification that carries it, and say why. A person's explicit run with a reason
//! overrides it (recorded on the run, [`QuarantineOverride`]); lifting it is an Operator's
//! call, recorded on the quarantine.

use crate::ProvisioningKind;
use crate::specification::SpecificationSnapshot;
use crate::wire::wire_enum;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

wire_enum!(
    /// Why a version was quarantined.
    QuarantineSource, "quarantine source" {
        /// A fleet rollout of it was rolled back.
        Rollback => "rollback",
        /// An Operator quarantined it, with a reason.
        Operator => "operator",
    }
);

wire_enum!(
    /// Whether a quarantine still refuses its version.
    QuarantineState, "quarantine state" {
        /// Refused fleet-wide for the tenant.
        InForce => "in-force",
        /// An Operator lifted it.
        Lifted => "lifted",
    }
);

/// A quarantine in force, as the gates weigh it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quarantined {
    pub quarantine_id: String,
    /// The workload's name in the specifications.
    pub workload: String,
    pub version: String,
    /// Why: the rollout rolled back, or the Operator's words.
    pub reason: String,
}

impl Quarantined {
    /// The quarantine as an override or an event names it.
    pub fn named(&self) -> QuarantinedVersion {
        QuarantinedVersion {
            quarantine_id: self.quarantine_id.clone(),
            workload: self.workload.clone(),
            version: self.version.clone(),
        }
    }
}

/// One quarantined version, as a run's override or an event names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuarantinedVersion {
    pub quarantine_id: String,
    pub workload: String,
    pub version: String,
}

/// A person's explicit run through quarantined versions: who, why, and which quarantines it
/// overrode when it was requested (one placed later still holds the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineOverride {
    pub by: String,
    /// Mandatory: why the version must run anyway.
    pub reason: String,
    pub quarantines: Vec<QuarantinedVersion>,
    pub at: DateTime<Utc>,
}

impl QuarantineOverride {
    /// The override of `hits` by `by`, for `reason`.
    pub fn of(hits: &[&Quarantined], by: &str, reason: &str, at: DateTime<Utc>) -> Self {
        Self {
            by: by.to_owned(),
            reason: reason.to_owned(),
            quarantines: hits.iter().map(|q| q.named()).collect(),
            at,
        }
    }

    fn covers(&self, q: &Quarantined) -> bool {
        self.quarantines
            .iter()
            .any(|o| o.quarantine_id == q.quarantine_id)
    }
}

/// The quarantines of `in_force` among `versions` (workload name, version): a workload of
/// that name at that version.
pub fn among<'a, 'v>(
    versions: impl IntoIterator<Item = (&'v str, &'v str)>,
    in_force: &'a [Quarantined],
) -> Vec<&'a Quarantined> {
    let versions: Vec<(&str, &str)> = versions.into_iter().collect();
    in_force
        .iter()
        .filter(|q| versions.contains(&(q.workload.as_str(), q.version.as_str())))
        .collect()
}

/// The quarantines of `in_force` that `spec` carries.
pub fn carried<'a>(
    spec: &SpecificationSnapshot,
    in_force: &'a [Quarantined],
) -> Vec<&'a Quarantined> {
    among(
        spec.workloads
            .iter()
            .map(|w| (w.name.as_str(), w.version.as_str())),
        in_force,
    )
}

/// The quarantines of `in_force` a release (workload → version, a rollout's) moves to.
pub fn in_release<'a>(
    versions: &std::collections::BTreeMap<String, String>,
    in_force: &'a [Quarantined],
) -> Vec<&'a Quarantined> {
    among(
        versions.iter().map(|(w, v)| (w.as_str(), v.as_str())),
        in_force,
    )
}

/// The versions of a release (workload → version) that a rolled-back rollout moved some
/// instance to: a workload one of `before` (each started instance's workloads before the
/// rollout) ran at another version. A version every instance already ran is not the release's
/// change, and is not quarantined: quarantining it would hold the rollback itself.
pub fn moved(
    versions: &std::collections::BTreeMap<String, String>,
    before: &[Vec<crate::Workload>],
) -> Vec<(String, String)> {
    versions
        .iter()
        .filter(|(w, v)| {
            before
                .iter()
                .flatten()
                .any(|b| &b.name == *w && &b.version != *v)
        })
        .map(|(w, v)| (w.clone(), v.clone()))
        .collect()
}

/// Why `hits` refuse a specification, one sentence for all of them.
pub fn refusal(hits: &[&Quarantined]) -> String {
    let each: Vec<String> = hits
        .iter()
        .map(|q| {
            format!(
                "workload `{}` version {} is quarantined ({}: {})",
                q.workload, q.version, q.quarantine_id, q.reason
            )
        })
        .collect();
    each.join("; ")
}

/// What a run's gate denies: every quarantine in force its specification carries that its
/// override (if any) does not name. A decommission applies no version, and is never held.
pub fn gate(
    kind: ProvisioningKind,
    spec: &SpecificationSnapshot,
    in_force: &[Quarantined],
    overridden: Option<&QuarantineOverride>,
) -> Option<String> {
    if kind == ProvisioningKind::Decommission {
        return None;
    }
    let held: Vec<&Quarantined> = carried(spec, in_force)
        .into_iter()
        .filter(|q| overridden.is_none_or(|o| !o.covers(q)))
        .collect();
    (!held.is_empty()).then(|| {
        format!(
            "{}; an Operator's explicit run with quarantineOverride.reason overrides it",
            refusal(&held)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Workload;

    fn spec(workloads: &[(&str, &str)]) -> SpecificationSnapshot {
        SpecificationSnapshot {
            specification_id: "s".into(),
            version: 1,
            program_ref: "git://infra//shop".into(),
            program_version: "a1b2c3d".into(),
            config_refs: Default::default(),
            secret_refs: Default::default(),
            workloads: workloads
                .iter()
                .map(|(name, version)| Workload {
                    name: (*name).into(),
                    kind: "deployment".into(),
                    version: (*version).into(),
                    replicas: 1,
                    config_refs: Default::default(),
                    secret_refs: Default::default(),
                })
                .collect(),
        }
    }

    fn quarantined(id: &str, workload: &str, version: &str) -> Quarantined {
        Quarantined {
            quarantine_id: id.into(),
            workload: workload.into(),
            version: version.into(),
            reason: "rollout r1 was rolled back".into(),
        }
    }

    #[test]
    fn a_specification_carries_a_quarantine_by_its_workloads_name_and_version() {
        let in_force = [
            quarantined("q1", "api", "2.0.0"),
            quarantined("q2", "worker", "1.1.0"),
        ];
        let hits = carried(&spec(&[("api", "2.0.0"), ("worker", "1.0.0")]), &in_force);
        assert_eq!(hits, vec![&in_force[0]]);
        // The same version of another workload is another thing.
        assert!(carried(&spec(&[("web", "2.0.0")]), &in_force).is_empty());
        let release = [
            ("worker".to_owned(), "1.1.0".to_owned()),
            ("web".to_owned(), "2.0.0".to_owned()),
        ];
        assert_eq!(
            in_release(&release.into_iter().collect(), &in_force),
            vec![&in_force[1]]
        );
    }

    #[test]
    fn a_rollback_quarantines_only_the_versions_the_rollout_moved() {
        let release = [
            ("api".to_owned(), "2.0.0".to_owned()),
            ("worker".to_owned(), "1.4.0".to_owned()),
            ("web".to_owned(), "3.0.0".to_owned()),
        ]
        .into_iter()
        .collect();
        let before = vec![
            spec(&[("api", "1.9.0"), ("worker", "1.4.0")]).workloads,
            spec(&[("api", "2.0.0"), ("worker", "1.4.0")]).workloads,
        ];
        assert_eq!(
            moved(&release, &before),
            vec![("api".to_owned(), "2.0.0".to_owned())]
        );
        assert!(
            moved(&release, &[]).is_empty(),
            "no instance started: nothing moved"
        );
    }

    #[test]
    fn the_gate_holds_every_kind_but_a_decommission_and_names_why() {
        let in_force = [quarantined("q1", "api", "2.0.0")];
        let bad = spec(&[("api", "2.0.0")]);
        for kind in [
            ProvisioningKind::Baseline,
            ProvisioningKind::Promotion,
            ProvisioningKind::Reconciliation,
        ] {
            let why = gate(kind, &bad, &in_force, None).expect("held");
            assert!(
                why.contains(
                    "workload `api` version 2.0.0 is quarantined (q1: rollout r1 was rolled back)"
                ),
                "{why}"
            );
        }
        assert_eq!(
            gate(ProvisioningKind::Decommission, &bad, &in_force, None),
            None
        );
        assert_eq!(
            gate(
                ProvisioningKind::Promotion,
                &spec(&[("api", "1.9.0")]),
                &in_force,
                None
            ),
            None
        );
    }

    #[test]
    fn an_override_lets_through_the_quarantines_it_named_and_no_later_one() {
        let first = [quarantined("q1", "api", "2.0.0")];
        let hits = carried(&spec(&[("api", "2.0.0")]), &first);
        let o = QuarantineOverride::of(&hits, "alice", "hotfix only in 2.0.0", Utc::now());
        let both = spec(&[("api", "2.0.0"), ("worker", "1.1.0")]);
        assert_eq!(
            gate(ProvisioningKind::Promotion, &both, &first, Some(&o)),
            None
        );
        let later = [first[0].clone(), quarantined("q2", "worker", "1.1.0")];
        let why = gate(ProvisioningKind::Promotion, &both, &later, Some(&o)).expect("held by q2");
        assert!(why.contains("q2") && !why.contains("q1"), "{why}");
    }
}
