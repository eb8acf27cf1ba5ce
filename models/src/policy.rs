//! Policy as code: what a policy is asked about a plan, and what it answers.
//!
//! Every plan is evaluated before anything applies, with its context: the tenant, the
//! environment and its class, the run's kind, the specification and the last observed
//! workloads. A policy answers `deny` (messages: the run ends `Rejected` with them) and
//! `allow` (true: the production gate opens for a baseline or reconciliation run without a
//! human approval, recorded as the approval *with evidence*: the bundle, its version, the hash
//! of the input and the decision). The Rego package is `runtime_cloud`: rules `deny` (a set of
//! strings) and `allow` (a boolean; undefined is false).

use crate::observation::ObservedWorkload;
use crate::{EnvironmentClass, PlanReceipt, ProvisioningKind, SpecificationSnapshot};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a policy is asked about a plan (`input` in Rego).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInput {
    pub tenant_id: String,
    pub environment: PolicyEnvironment,
    pub run: PolicyRun,
    pub specification: SpecificationSnapshot,
    pub plan: PlanReceipt,
    /// The environment's last observed workloads (none before its first observation).
    pub observed: Vec<ObservedWorkload>,
}

/// The environment, as a policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEnvironment {
    pub environment_id: String,
    pub project_id: String,
    pub class: EnvironmentClass,
}

/// The run, as a policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRun {
    pub run_id: String,
    pub kind: ProvisioningKind,
    /// The quarantined versions a person's explicit run goes through, with who and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_override: Option<crate::quarantine::QuarantineOverride>,
}

impl PolicyInput {
    /// `sha256:<hex>` of the input's JSON: the evidence names exactly what was decided on.
    pub fn hash(&self) -> String {
        input_hash(self)
    }
}

/// `sha256:<hex>` of a policy input's JSON.
pub fn input_hash<T: Serialize>(input: &T) -> String {
    let json = serde_json::to_vec(input).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(json)))
}

/// What a policy is asked before a proposal is accepted without an operator (`input` in Rego;
/// rule `no_auto_accept`, a set of reasons: any reason keeps the proposal for an operator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalPolicyInput {
    pub tenant_id: String,
    pub environment: PolicyEnvironment,
    /// The proposal as `GET /factory/reconciliation/proposals` shows it (`direction`,
    /// `destructive`, `planSummary` with `changedBy`, `findingIds` …).
    pub proposal: serde_json::Value,
    /// The environment's last observed workloads.
    pub observed: Vec<ObservedWorkload>,
}

/// What the policies answered about a plan: the evidence a policy allow is recorded with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDecision {
    /// The production gate may open without a human approval.
    pub allow: bool,
    /// Why the plan may not apply; empty when it may.
    pub deny: Vec<String>,
    /// Which bundle decided (`embedded`, a directory, or the PolicyEngineService's URL).
    pub policy_id: String,
    /// The bundle's version (`sha256:` of its files, or what the service says).
    pub version: String,
    /// [`PolicyInput::hash`] of what was decided on.
    pub input_hash: String,
    pub decided_at: DateTime<Utc>,
}

impl PolicyDecision {
    /// Whether the decision lets the production gate open on its own: an allow, for a
    /// baseline or a reconciliation (a promotion brings the promotion's approval; a
    /// decommission is a person's call), with nothing denied, of a plan that deletes nothing
    /// (no delete in production without a person's approval, whatever a policy says).
    pub fn opens_production_gate(&self, kind: ProvisioningKind, plan: &PlanReceipt) -> bool {
        self.allow
            && self.deny.is_empty()
            && plan.changes.deletes.is_empty()
            && matches!(
                kind,
                ProvisioningKind::Baseline | ProvisioningKind::Reconciliation
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allow: bool, deny: &[&str]) -> PolicyDecision {
        PolicyDecision {
            allow,
            deny: deny.iter().map(|d| d.to_string()).collect(),
            policy_id: "embedded".into(),
            version: "sha256:00".into(),
            input_hash: "sha256:11".into(),
            decided_at: Utc::now(),
        }
    }

    fn plan(deletes: usize) -> PlanReceipt {
        serde_json::from_value(serde_json::json!({
            "adds": [], "changes": [],
            "deletes": (0..deletes).map(|i| serde_json::json!({ "name": format!("w{i}"), "kind": "deployment" })).collect::<Vec<_>>(),
            "inputsHash": "sha256:22", "programVersion": "a1b2c3d4"
        }))
        .expect("a plan")
    }

    #[test]
    fn only_an_undenied_allow_opens_the_gate_and_only_for_baselines_and_reconciliations() {
        use ProvisioningKind::*;
        let none = plan(0);
        assert!(decision(true, &[]).opens_production_gate(Baseline, &none));
        assert!(decision(true, &[]).opens_production_gate(Reconciliation, &none));
        assert!(!decision(true, &[]).opens_production_gate(Promotion, &none));
        assert!(!decision(true, &[]).opens_production_gate(Decommission, &none));
        assert!(!decision(true, &["no"]).opens_production_gate(Baseline, &none));
        assert!(!decision(false, &[]).opens_production_gate(Baseline, &none));
        assert!(
            !decision(true, &[]).opens_production_gate(Baseline, &plan(1)),
            "a delete in production needs a person"
        );
    }
}
