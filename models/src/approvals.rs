//! Approvals of production applies: what a recorded approval says, and the one rule that
//! decides whether a run may spend it ([`verify_approval`]).
//!
//! A production apply needs an approval that *verifies*: it exists, it is this tenant's and
//! this environment's, it is of production class, it was granted (not rejected) and has not
//! expired, it was granted by a principal allowed to grant it, it names this run's plan when
//! it names one, and no other run has spent it. An id alone proves nothing: the run asks the
//! Approvals port, which answers with the recorded approval, and spends it on the run.

use crate::provisioning::{ApprovalDecision, EnvironmentClass, RefusalReason};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The roles whose holders may grant a production approval (and decide a production run).
pub const APPROVER_ROLES: &[&str] = &["Operator", "PlatformAdmin"];

crate::wire::wire_enum!(
    /// Where an approval was recorded.
    ApprovalSource, "approval source" {
        /// An Operator's `POST /factory/approvals`.
        Operator => "operator",
        /// An Operator's decision on a run that waited (`POST …/runs/{id}/approval`).
        RunDecision => "run-decision",
        /// Carried by a verified `PromotionApproved` event.
        Promotion => "promotion",
        /// An Operator's acceptance of a production reconciliation proposal.
        ProposalDecision => "proposal-decision",
        /// RunControlService (the HTTP adapter).
        RunControl => "run-control",
    }
);

/// An approval as recorded: who granted (or rejected) what, for which environment, until when,
/// and which run spent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedApproval {
    /// The approval's id (a GUID).
    pub approval_id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// The environment it is for.
    pub environment_id: String,
    /// `production` for an approval that may open the production gate.
    pub class: EnvironmentClass,
    /// Granted (`approve`) or rejected (`reject`).
    pub decision: ApprovalDecision,
    /// The principal (token subject) who decided.
    pub granted_by: String,
    /// That principal's roles when it decided.
    pub granted_by_roles: Vec<String>,
    /// Why (a change ticket, …).
    pub reason: String,
    /// The plan it is for (`inputsHash`); an approval without one is for any plan of the
    /// environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_hash: Option<String>,
    /// The promotion it came with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_id: Option<String>,
    /// Where it was recorded.
    pub source: ApprovalSource,
    /// When it was decided.
    pub decided_at: DateTime<Utc>,
    /// After this it no longer verifies.
    pub expires_at: DateTime<Utc>,
    /// The run that spent it: one approval opens the gate once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_by_run_id: Option<String>,
    /// When that run spent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_at: Option<DateTime<Utc>>,
}

/// Who decided, as the API saw them: an accepted production proposal's run spends an
/// approval recorded from this.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grantor {
    /// The token subject.
    pub principal: String,
    /// Its roles.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// A run's claim on an approval: "let this run, with this plan, apply to this environment".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalClaim {
    /// The approval the run names.
    pub approval_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// The environment's class: only a production environment needs a production approval.
    pub environment_class: EnvironmentClass,
    /// The run that would spend it.
    pub run_id: String,
    /// The run's plan, once recorded; `None` when the claim is checked before planning (the
    /// API, on a request that names an approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_hash: Option<String>,
    /// When the claim is made (workflow time in a run): an approval expires.
    pub at: DateTime<Utc>,
}

/// The rule: whether `claim` may spend `approval` (`None`: no approval with the claimed id,
/// as far as the claim's tenant can see). The first failed check is the reason.
pub fn verify_approval(
    approval: Option<&RecordedApproval>,
    claim: &ApprovalClaim,
) -> Result<(), RefusalReason> {
    // Another tenant's approval is reported as absent: a tenant learns nothing of another's ids.
    let Some(a) = approval.filter(|a| a.tenant_id == claim.tenant_id) else {
        return Err(RefusalReason::UnknownApproval);
    };
    let spent_elsewhere = a
        .spent_by_run_id
        .as_deref()
        .is_some_and(|run| run != claim.run_id);
    if a.environment_id != claim.environment_id {
        Err(RefusalReason::OtherEnvironment)
    } else if claim.environment_class == EnvironmentClass::Production
        && a.class != EnvironmentClass::Production
    {
        Err(RefusalReason::NotProductionClass)
    } else if a.decision != ApprovalDecision::Approve {
        Err(RefusalReason::ApprovalRejected)
    } else if claim.at >= a.expires_at {
        Err(RefusalReason::ApprovalExpired)
    } else if !a
        .granted_by_roles
        .iter()
        .any(|r| APPROVER_ROLES.contains(&r.as_str()))
    {
        Err(RefusalReason::GrantorNotAllowed)
    } else if let (Some(approved), Some(planned)) = (&a.inputs_hash, &claim.inputs_hash)
        && approved != planned
    {
        Err(RefusalReason::OtherPlan)
    } else if spent_elsewhere {
        Err(RefusalReason::AlreadySpent)
    } else {
        Ok(())
    }
}

/// What the Approvals port answers a claim: the approval, spent on the claim's run, or why
/// it did not verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum ClaimOutcome {
    /// It verified and is now spent on the run (again, for a retried claim of the same run).
    Spent { approval: Box<RecordedApproval> },
    /// It did not verify; nothing changed.
    Refused { why: RefusalReason },
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(hour: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, hour, 0, 0).unwrap()
    }

    fn granted() -> RecordedApproval {
        RecordedApproval {
            approval_id: "a1".into(),
            tenant_id: "acme".into(),
            environment_id: "prod".into(),
            class: EnvironmentClass::Production,
            decision: ApprovalDecision::Approve,
            granted_by: "ops-lead".into(),
            granted_by_roles: vec!["Operator".into()],
            reason: "CAB-42".into(),
            inputs_hash: Some("sha256:plan".into()),
            promotion_id: None,
            source: ApprovalSource::Operator,
            decided_at: at(9),
            expires_at: at(12),
            spent_by_run_id: None,
            spent_at: None,
        }
    }

    fn claim() -> ApprovalClaim {
        ApprovalClaim {
            approval_id: "a1".into(),
            tenant_id: "acme".into(),
            environment_id: "prod".into(),
            environment_class: EnvironmentClass::Production,
            run_id: "r1".into(),
            inputs_hash: Some("sha256:plan".into()),
            at: at(10),
        }
    }

    fn refused(change: impl FnOnce(&mut RecordedApproval, &mut ApprovalClaim)) -> RefusalReason {
        let (mut a, mut c) = (granted(), claim());
        change(&mut a, &mut c);
        verify_approval(Some(&a), &c).expect_err("refused")
    }

    #[test]
    fn a_granted_approval_for_this_environment_and_plan_verifies() {
        assert_eq!(verify_approval(Some(&granted()), &claim()), Ok(()));
    }

    #[test]
    fn each_failed_check_is_its_own_reason() {
        use RefusalReason::*;
        assert_eq!(
            verify_approval(None, &claim()),
            Err(UnknownApproval),
            "an invented id"
        );
        assert_eq!(
            refused(|a, _| a.tenant_id = "other".into()),
            UnknownApproval
        );
        assert_eq!(
            refused(|a, _| a.environment_id = "staging".into()),
            OtherEnvironment
        );
        assert_eq!(
            refused(|a, _| a.class = EnvironmentClass::NonProduction),
            NotProductionClass
        );
        assert_eq!(
            refused(|a, _| a.decision = ApprovalDecision::Reject),
            ApprovalRejected
        );
        assert_eq!(
            refused(|_, c| c.at = at(12)),
            ApprovalExpired,
            "expiry is exclusive"
        );
        assert_eq!(
            refused(|a, _| a.granted_by_roles = vec!["Observer".into()]),
            GrantorNotAllowed
        );
        assert_eq!(
            refused(|a, _| a.granted_by_roles.clear()),
            GrantorNotAllowed
        );
        assert_eq!(
            refused(|_, c| c.inputs_hash = Some("sha256:other".into())),
            OtherPlan
        );
        assert_eq!(
            refused(|a, _| a.spent_by_run_id = Some("r0".into())),
            AlreadySpent
        );
    }

    #[test]
    fn a_claim_retried_by_the_run_that_spent_it_verifies_again() {
        let mut a = granted();
        a.spent_by_run_id = Some("r1".into());
        assert_eq!(verify_approval(Some(&a), &claim()), Ok(()));
    }

    #[test]
    fn an_approval_for_any_plan_or_a_claim_before_planning_skips_the_plan_check() {
        let mut a = granted();
        a.inputs_hash = None;
        assert_eq!(verify_approval(Some(&a), &claim()), Ok(()));
        let mut c = claim();
        c.inputs_hash = None;
        assert_eq!(verify_approval(Some(&granted()), &c), Ok(()));
    }

    #[test]
    fn a_non_production_environment_takes_an_approval_of_either_class() {
        let mut a = granted();
        a.class = EnvironmentClass::NonProduction;
        let mut c = claim();
        c.environment_class = EnvironmentClass::NonProduction;
        assert_eq!(verify_approval(Some(&a), &c), Ok(()));
    }
}
