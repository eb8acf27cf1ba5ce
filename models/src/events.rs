//! Integration events: topic names and payloads, exactly as the spec pages list them.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// One event ready for the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    /// The spec's event name (`ProvisioningApplied`).
    pub event_type: &'static str,
    /// The spec's topic (`provisioning.runs.v1.provisioning-applied`).
    pub topic: &'static str,
    /// The aggregate the event is about (a run or specification id).
    pub aggregate_id: String,
    /// The payload with exactly the spec's fields.
    pub payload: serde_json::Value,
}

/// Topic of `SpecificationDeclared`.
pub const SPECIFICATION_DECLARED: &str = "provisioning.specifications.v1.specification-declared";
/// Topic of `ProvisioningPlanned`.
pub const PROVISIONING_PLANNED: &str = "provisioning.runs.v1.provisioning-planned";
/// Topic of `ProvisioningApplied`.
pub const PROVISIONING_APPLIED: &str = "provisioning.runs.v1.provisioning-applied";
/// Topic of `ProvisioningFailed`.
pub const PROVISIONING_FAILED: &str = "provisioning.runs.v1.provisioning-failed";

/// `SpecificationDeclared`: a desired-state version exists for an environment.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecificationDeclared {
    pub specification_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub kind: String,
    pub version: i32,
    pub program_version: String,
}

/// `ProvisioningPlanned`: a plan exists and may await approval.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningPlanned {
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub kind: String,
    pub promotion_id: Option<String>,
    pub plan_summary: serde_json::Value,
}

/// `ProvisioningApplied`: the desired state was applied; outputs are recorded.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningApplied {
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub kind: String,
    pub promotion_id: Option<String>,
    pub specification_version: i32,
    pub outputs: serde_json::Value,
}

/// `ProvisioningFailed`: the apply failed; the reason names the failing resource.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningFailed {
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub kind: String,
    pub promotion_id: Option<String>,
    pub reason: String,
}

macro_rules! into_outbox {
    ($ty:ident, $topic:ident, $id:ident) => {
        impl From<$ty> for OutboxEvent {
            fn from(e: $ty) -> Self {
                OutboxEvent {
                    event_type: stringify!($ty),
                    topic: $topic,
                    aggregate_id: e.$id.clone(),
                    // Serializing a struct of strings and JSON values cannot fail.
                    payload: serde_json::to_value(&e).unwrap_or_default(),
                }
            }
        }
    };
}

into_outbox!(
    SpecificationDeclared,
    SPECIFICATION_DECLARED,
    specification_id
);
into_outbox!(
    ProvisioningPlanned,
    PROVISIONING_PLANNED,
    provisioning_run_id
);
into_outbox!(
    ProvisioningApplied,
    PROVISIONING_APPLIED,
    provisioning_run_id
);
into_outbox!(ProvisioningFailed, PROVISIONING_FAILED, provisioning_run_id);

/// Topic of `ObservedStateChanged`.
pub const OBSERVED_STATE_CHANGED: &str = "provisioning.inventory.v1.observed-state-changed";
/// Topic of `RuntimeDriftDetected`.
pub const RUNTIME_DRIFT_DETECTED: &str = "provisioning.inventory.v1.runtime-drift-detected";
/// Topic of `ReconciliationProposed`.
pub const RECONCILIATION_PROPOSED: &str = "provisioning.inventory.v1.reconciliation-proposed";
/// Topic of `ReconciliationDecided`.
pub const RECONCILIATION_DECIDED: &str = "provisioning.inventory.v1.reconciliation-decided";

/// `ObservedStateChanged`: versions, replicas, health or staleness changed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedStateChanged {
    pub environment_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub current_release_id: Option<String>,
    pub changes: serde_json::Value,
    pub stale: bool,
}

/// `RuntimeDriftDetected`: one new finding (or one that a drift rule no longer suppresses).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeDriftDetected {
    pub finding_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub kind: String,
    pub resource: String,
    /// The posture rule a `posture` finding breaks (optional; beyond the spec's required
    /// fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Who made the difference, when the target records it (optional; beyond the spec's
    /// required fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<crate::observation::ChangedBy>,
}

/// `ReconciliationProposed`: a reviewable reconciliation exists.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationProposed {
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub direction: String,
    pub destructive: bool,
}

/// `ReconciliationDecided`: accepted (a run is planned) or rejected.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationDecided {
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub state: String,
    pub provisioning_run_id: Option<String>,
}

/// Topic of `EnvironmentTargetChanged`.
pub const ENVIRONMENT_TARGET_CHANGED: &str =
    "provisioning.environments.v1.environment-target-changed";

/// `EnvironmentTargetChanged` (not in the spec: the audit of a changed runner or observer):
/// who moved an environment from one target to another. Targets hold references only.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentTargetChanged {
    pub tenant_id: String,
    pub environment_id: String,
    pub before: crate::targets::Target,
    pub after: crate::targets::Target,
    pub changed_by: String,
}

/// Topic of `EnvironmentModeChanged`.
pub const ENVIRONMENT_MODE_CHANGED: &str = "provisioning.environments.v1.environment-mode-changed";

/// `EnvironmentModeChanged` (not in the spec: the audit of how far the product may go on its
/// own in an environment): who moved it from one mode to another.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentModeChanged {
    pub tenant_id: String,
    pub environment_id: String,
    pub before: crate::environments::EnvironmentMode,
    pub after: crate::environments::EnvironmentMode,
    pub changed_by: String,
}

into_outbox!(
    EnvironmentModeChanged,
    ENVIRONMENT_MODE_CHANGED,
    environment_id
);

/// Topic of `EnvironmentExpiring`.
pub const ENVIRONMENT_EXPIRING: &str = "provisioning.environments.v1.environment-expiring";

/// `EnvironmentExpiring` (not in the spec: ephemeral environments): an ephemeral environment
/// is decommissioned at `expiresAt` unless it is extended first. Sent once per expiry; an
/// extension warns again before the new one.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentExpiring {
    pub tenant_id: String,
    pub environment_id: String,
    pub project_id: String,
    pub expires_at: DateTime<Utc>,
}

into_outbox!(EnvironmentExpiring, ENVIRONMENT_EXPIRING, environment_id);

/// Topic of `EnvironmentExpiryExtended`.
pub const ENVIRONMENT_EXPIRY_EXTENDED: &str =
    "provisioning.environments.v1.environment-expiry-extended";

/// `EnvironmentExpiryExtended` (not in the spec: ephemeral environments): who moved an
/// ephemeral environment's expiry, from when to when.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentExpiryExtended {
    pub tenant_id: String,
    pub environment_id: String,
    pub before: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub extended_by: String,
}

into_outbox!(
    EnvironmentExpiryExtended,
    ENVIRONMENT_EXPIRY_EXTENDED,
    environment_id
);

/// Topic of `EnvironmentRetired`.
pub const ENVIRONMENT_RETIRED: &str = "provisioning.environments.v1.environment-retired";

/// `EnvironmentRetired` (not in the spec): a decommission run destroyed what the environment
/// ran; it left the sweep, the reconciler and the fleet.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentRetired {
    pub tenant_id: String,
    pub environment_id: String,
    pub project_id: String,
    /// The decommission run; absent when nothing was ever declared for the environment, so
    /// there was nothing to destroy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_run_id: Option<String>,
    /// The expiry it reached, for an ephemeral environment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

into_outbox!(EnvironmentRetired, ENVIRONMENT_RETIRED, environment_id);

/// Topic of `ChangeWindowOverridden`.
pub const CHANGE_WINDOW_OVERRIDDEN: &str = "provisioning.runs.v1.change-window-overridden";

/// `ChangeWindowOverridden` (not in the spec: the audit of a break-glass): a run applied inside
/// a closed change window because an Operator said why it could not wait.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeWindowOverridden {
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// The window that was closed.
    pub window_id: Option<String>,
    pub by: String,
    pub reason: String,
}

into_outbox!(
    ChangeWindowOverridden,
    CHANGE_WINDOW_OVERRIDDEN,
    provisioning_run_id
);
/// Topic of `OffboardingOrdered`.
pub const OFFBOARDING_ORDERED: &str = "provisioning.fleet.v1.offboarding-ordered";

/// `OffboardingOrdered` (not in the spec): an instance is to leave operation; its record is
/// exported before anything is destroyed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OffboardingOrdered {
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub requested_by: String,
    pub reason: String,
}

into_outbox!(OffboardingOrdered, OFFBOARDING_ORDERED, order_id);

/// Topic of `InstanceOffboarded`.
pub const INSTANCE_OFFBOARDED: &str = "provisioning.fleet.v1.instance-offboarded";

/// `InstanceOffboarded` (not in the spec): the instance's record is archived and verified, what
/// it ran is destroyed, and the environment is `offboarded`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceOffboarded {
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub archive_key: String,
    pub archive_sha256: String,
    /// The decommission run; none when nothing was ever declared for the instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_run_id: Option<String>,
}

into_outbox!(InstanceOffboarded, INSTANCE_OFFBOARDED, order_id);

/// Topic of `OffboardingFailed`.
pub const OFFBOARDING_FAILED: &str = "provisioning.fleet.v1.offboarding-failed";

/// `OffboardingFailed` (not in the spec): an off-boarding order could not go on; `reason` says
/// why. An archive exported and verified stays.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OffboardingFailed {
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub reason: String,
}

into_outbox!(OffboardingFailed, OFFBOARDING_FAILED, order_id);

/// Topic of `AdoptionPublished`.
pub const ADOPTION_PUBLISHED: &str = "provisioning.inventory.v1.adoption-published";

/// `AdoptionPublished` (not in the spec): the code that manages a proposal's unmanaged
/// workloads was generated and committed on a branch of the program's repository, for review.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionPublished {
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub branch: String,
    pub commit: String,
    /// The findings' resources adopted (`deployment/batch`).
    pub resources: Vec<String>,
}

into_outbox!(AdoptionPublished, ADOPTION_PUBLISHED, proposal_id);

/// Topic of `AdoptionFailed`.
pub const ADOPTION_FAILED: &str = "provisioning.inventory.v1.adoption-failed";

/// `AdoptionFailed` (not in the spec): a proposal's adoption published nothing; `reason` says
/// why (the program, the import, or the repository refusing the push).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionFailed {
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub reason: String,
}

into_outbox!(AdoptionFailed, ADOPTION_FAILED, proposal_id);

/// Topic of `VersionQuarantined`.
pub const VERSION_QUARANTINED: &str = "provisioning.quarantines.v1.version-quarantined";

/// `VersionQuarantined` (not in the spec): a workload version is refused fleet-wide for the
/// tenant, because its rollout was rolled back or an Operator said why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionQuarantined {
    pub quarantine_id: String,
    pub tenant_id: String,
    pub workload: String,
    pub version: String,
    /// `rollback` or `operator`.
    pub source: String,
    pub reason: String,
    /// The rollout rolled back, for a rollback's quarantine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_id: Option<String>,
    pub quarantined_by: String,
}

into_outbox!(VersionQuarantined, VERSION_QUARANTINED, quarantine_id);

/// Topic of `QuarantineLifted`.
pub const QUARANTINE_LIFTED: &str = "provisioning.quarantines.v1.quarantine-lifted";

/// `QuarantineLifted` (not in the spec): an Operator let a quarantined version run again.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineLifted {
    pub quarantine_id: String,
    pub tenant_id: String,
    pub workload: String,
    pub version: String,
    pub lifted_by: String,
    pub reason: String,
}

into_outbox!(QuarantineLifted, QUARANTINE_LIFTED, quarantine_id);

/// Topic of `QuarantineOverridden`.
pub const QUARANTINE_OVERRIDDEN: &str = "provisioning.runs.v1.quarantine-overridden";

/// `QuarantineOverridden` (not in the spec: the audit of an override): a person's explicit run
/// was let through quarantined versions, with the reason they gave.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineOverridden {
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// The quarantines it went through: `{quarantineId, workload, version}`.
    pub quarantines: Vec<crate::quarantine::QuarantinedVersion>,
    pub by: String,
    pub reason: String,
}

into_outbox!(
    QuarantineOverridden,
    QUARANTINE_OVERRIDDEN,
    provisioning_run_id
);
/// Topic of `ReconciliationHeld`.
pub const RECONCILIATION_HELD: &str = "provisioning.inventory.v1.reconciliation-held";

/// `ReconciliationHeld` (not in the spec): the GitOps reconciler found an environment's latest
/// specification different from what runs, and did not apply or propose it because it carries
/// quarantined versions. Once per specification version and set of quarantines.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationHeld {
    pub tenant_id: String,
    pub environment_id: String,
    pub specification_version: i32,
    /// The quarantines that hold it: `{quarantineId, workload, version}`.
    pub quarantines: Vec<crate::quarantine::QuarantinedVersion>,
    pub reason: String,
}

into_outbox!(ReconciliationHeld, RECONCILIATION_HELD, environment_id);
into_outbox!(
    EnvironmentTargetChanged,
    ENVIRONMENT_TARGET_CHANGED,
    environment_id
);
into_outbox!(ObservedStateChanged, OBSERVED_STATE_CHANGED, environment_id);
into_outbox!(RuntimeDriftDetected, RUNTIME_DRIFT_DETECTED, finding_id);
into_outbox!(ReconciliationProposed, RECONCILIATION_PROPOSED, proposal_id);
into_outbox!(ReconciliationDecided, RECONCILIATION_DECIDED, proposal_id);

/// A fleet rollout's events (not in the spec's list): `RolloutStarted`,
/// `WaveCompleted`, `RolloutHalted`, `RolloutCompleted`, `RolloutAborted`, `RolloutRolledBack`, topics
/// `provisioning.fleet.v1.<kebab-case name>`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutEvent {
    pub rollout_id: String,
    pub tenant_id: String,
    pub state: crate::rollouts::RolloutState,
    /// The wave it is about (completed, or halted in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<usize>,
    /// Why it halted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The instances involved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<String>,
}

impl RolloutEvent {
    /// The outbox event of type `event_type` (one of the five).
    pub fn into_outbox(self, event_type: &'static str) -> OutboxEvent {
        let topic = match event_type {
            "RolloutStarted" => "provisioning.fleet.v1.rollout-started",
            "WaveCompleted" => "provisioning.fleet.v1.wave-completed",
            "RolloutHalted" => "provisioning.fleet.v1.rollout-halted",
            "RolloutCompleted" => "provisioning.fleet.v1.rollout-completed",
            "RolloutRolledBack" => "provisioning.fleet.v1.rollout-rolled-back",
            _ => "provisioning.fleet.v1.rollout-aborted",
        };
        OutboxEvent {
            event_type,
            topic,
            aggregate_id: self.rollout_id.clone(),
            payload: serde_json::to_value(&self).unwrap_or_default(),
        }
    }
}
