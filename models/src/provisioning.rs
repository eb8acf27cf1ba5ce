//! Specifications, provisioning runs, their states and receipts.

use crate::specification::SpecificationSnapshot;
use crate::wire::wire_enum;
use serde::{Deserialize, Serialize};

wire_enum!(
    /// The state of a provisioning run (the spec's state diagram, exactly).
    ProvisioningState, "provisioning state" {
        /// The plan is recorded.
        Planned => "Planned",
        /// A production run waits for its approval signal or the expiry timer.
        AwaitingApproval => "AwaitingApproval",
        /// The runner is applying the plan.
        Applying => "Applying",
        /// The runner succeeded; the apply receipt is recorded.
        Applied => "Applied",
        /// The runner failed; the receipt names the failing reason.
        Failed => "Failed",
        /// The approval was refused or expired.
        Rejected => "Rejected",
        /// The run was cancelled before apply.
        Cancelled => "Cancelled",
    }
);

impl ProvisioningState {
    /// Whether the run has ended in this state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Applied | Self::Failed | Self::Rejected | Self::Cancelled
        )
    }

    /// Whether a run in `self` may move to `next` (see [`TRANSITIONS`]).
    pub fn can_move_to(self, next: ProvisioningState) -> bool {
        can_move(Some(self), next)
    }
}

/// The legal moves of a provisioning run: the spec's state diagram, plus the three moves it
/// leaves implicit. `None` is a run that is not planned yet (waiting for its turn on the
/// environment, or planning).
///
/// ```text
/// Planned          --> AwaitingApproval : ProductionWithoutApproval
/// Planned          --> Applying         : ApprovedOrAllowed
/// AwaitingApproval --> Applying         : ApprovalGranted
/// AwaitingApproval --> Rejected         : ApprovalRejectedOrExpired
/// Applying         --> Applied          : RunnerSucceeded
/// Applying         --> Failed           : RunnerFailed
/// Planned          --> Cancelled        : Cancel
/// ```
///
/// Beyond the diagram: a run whose plan fails ends `Failed` without a plan; a run cancelled
/// while it waits for its turn ends `Cancelled` without one; a cancel is valid until the
/// apply starts, so also while the run awaits approval; a plan a policy denies ends
/// `Rejected` with the policy's messages; and a run whose project's execution minutes are
/// spent ends `Rejected` before it plans.
pub const TRANSITIONS: &[(Option<ProvisioningState>, ProvisioningState)] = {
    use ProvisioningState::*;
    &[
        (None, Planned),
        (None, Failed),
        (None, Cancelled),
        (None, Rejected),
        (Some(Planned), AwaitingApproval),
        (Some(Planned), Applying),
        (Some(Planned), Cancelled),
        (Some(Planned), Rejected),
        (Some(AwaitingApproval), Applying),
        (Some(AwaitingApproval), Rejected),
        (Some(AwaitingApproval), Cancelled),
        (Some(Applying), Applied),
        (Some(Applying), Failed),
    ]
};

/// Whether a run in `from` (`None`: not planned yet) may move to `to`.
pub fn can_move(from: Option<ProvisioningState>, to: ProvisioningState) -> bool {
    TRANSITIONS.contains(&(from, to))
}

/// Whether a run in `from` comes to `to` by legal moves, zero or more of them. A projection of
/// `from` over a row already in `to` is a replay that is behind the row: a worker that died
/// after projecting `to` but before reporting its workflow task leaves the next worker to
/// re-run the projections of that task, starting from an earlier state.
pub fn leads_to(from: Option<ProvisioningState>, to: Option<ProvisioningState>) -> bool {
    let mut reached = vec![from];
    let mut i = 0;
    while let Some(&state) = reached.get(i) {
        if state == to {
            return true;
        }
        for &(f, t) in TRANSITIONS {
            if f == state && !reached.contains(&Some(t)) {
                reached.push(Some(t));
            }
        }
        i += 1;
    }
    false
}

/// Whether a run in `state` may still be cancelled: until its apply starts.
pub fn cancellable(state: Option<ProvisioningState>) -> bool {
    can_move(state, ProvisioningState::Cancelled)
}

wire_enum!(
    /// Why a run was requested.
    ProvisioningKind, "provisioning kind" {
        /// The first plan of an environment.
        Baseline => "baseline",
        /// A promotion hands over its desired state.
        Promotion => "promotion",
        /// Drift or the GitOps reconciler asks to converge.
        Reconciliation => "reconciliation",
        /// Tear the environment down.
        Decommission => "decommission",
    }
);

wire_enum!(
    /// The class of an environment: production applies need an approval.
    EnvironmentClass, "environment class" {
        /// Approval-gated.
        Production => "production",
        /// Everything else.
        NonProduction => "non-production",
    }
);

wire_enum!(
    /// An operator's answer to a run waiting for approval.
    ApprovalDecision, "approval decision" {
        /// Apply the plan.
        Approve => "approve",
        /// Do not apply; the run ends `Rejected`.
        Reject => "reject",
    }
);

/// The plan receipt: what an apply would change, recorded before any apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanReceipt {
    /// Resources to add, change and delete.
    #[serde(flatten)]
    pub changes: crate::plan::PlanChanges,
    /// Hash of everything the plan was computed from; an approval names it.
    pub inputs_hash: String,
    /// The program commit that was planned.
    pub program_version: String,
    /// What the environment costs an hour before and after the plan, at the tenant's prices
    /// (`models::cost::estimate`); none without a price table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::Estimate>,
    /// The security posture rules the plan would newly break (`models::posture::introduced`):
    /// given to the policies (`input.plan.posture`), so a tenant can deny such a plan with
    /// the rule as the evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub posture: Vec<crate::posture::Violation>,
}

impl PlanReceipt {
    /// The short summary events carry: counts and the hash.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "adds": self.changes.adds.len(),
            "changes": self.changes.changes.len(),
            "deletes": self.changes.deletes.len(),
            "destructive": self.changes.is_destructive(),
            "inputsHash": self.inputs_hash,
            "programVersion": self.program_version,
            "cost": self.cost,
            "posture": self.posture.len(),
        })
    }
}

/// The result of an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApplyResult {
    /// Every change was applied.
    Succeeded,
    /// The runner stopped; `reason` says where.
    Failed,
}

/// The apply receipt: immutable once recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReceipt {
    /// What the target reports after the apply (endpoints, versions).
    pub outputs: serde_json::Value,
    /// Wall time of the apply.
    pub duration_ms: u64,
    /// Succeeded or failed.
    pub result: ApplyResult,
    /// The runner and its version.
    pub runner_version: String,
    /// Why it failed, naming the failing resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The operator's approval (or refusal) of a plan.
///
/// This is the JSON payload of the `approval` signal:
/// `{"decision":"approve","approver":"alice","reason":"CAB-42","inputsHash":"…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Approval {
    /// Approve or reject.
    pub decision: ApprovalDecision,
    /// Who decided.
    pub approver: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// The inputs hash of the plan this approval is for; any other plan refuses it.
    pub inputs_hash: String,
    /// The recorded approval behind an `approve` (the API records one before it signals);
    /// the run verifies and spends it through the Approvals port before it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

wire_enum!(
    /// Why a run did not count an approval.
    RefusalReason, "refusal reason" {
        /// The approval names another plan's `inputsHash`.
        OtherPlan => "other-plan",
        /// A decision was already counted for this run.
        AlreadyDecided => "already-decided",
        /// The run was not awaiting approval: it did not need one, or no longer does.
        NotAwaited => "not-awaited",
        /// No approval with this id, as far as the run's tenant can see (an invented id).
        UnknownApproval => "unknown-approval",
        /// The approval is for another environment.
        OtherEnvironment => "other-environment",
        /// A production environment needs an approval of production class.
        NotProductionClass => "not-production-class",
        /// The approval was recorded as a rejection.
        ApprovalRejected => "approval-rejected",
        /// The approval expired before the run claimed it.
        ApprovalExpired => "approval-expired",
        /// Whoever granted it holds no role that may grant a production approval.
        GrantorNotAllowed => "grantor-not-allowed",
        /// Another run already spent it: one approval opens the gate once.
        AlreadySpent => "already-spent",
        /// An approval of the run's plan without a recorded approval behind it (a signal sent
        /// to the workflow directly, not through the API).
        NotRecorded => "not-recorded",
    }
);

impl RefusalReason {
    /// The reason in words, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::OtherPlan => "it names another plan's inputsHash",
            Self::AlreadyDecided => "a decision was already counted for this run",
            Self::NotAwaited => "the run was not awaiting approval",
            Self::UnknownApproval => "no such approval",
            Self::OtherEnvironment => "it is for another environment",
            Self::NotProductionClass => "a production environment needs a production approval",
            Self::ApprovalRejected => "it was recorded as a rejection",
            Self::ApprovalExpired => "it has expired",
            Self::GrantorNotAllowed => "whoever granted it holds no role that may grant it",
            Self::AlreadySpent => "another run already spent it",
            Self::NotRecorded => "no recorded approval stands behind it",
        }
    }
}

/// The approval rule: whether a run counts `approval`.
///
/// A run counts the first approval that names its recorded plan while it awaits approval;
/// anything else is refused, with the reason, and changes nothing. (`awaiting`: the run is
/// `AwaitingApproval`; `plan`: its recorded plan; `decided`: a decision was already counted.)
pub fn weigh_approval(
    awaiting: bool,
    plan: Option<&PlanReceipt>,
    decided: bool,
    approval: &Approval,
) -> Result<(), RefusalReason> {
    if !awaiting {
        Err(RefusalReason::NotAwaited)
    } else if plan.map(|p| p.inputs_hash.as_str()) != Some(approval.inputs_hash.as_str()) {
        Err(RefusalReason::OtherPlan)
    } else if decided {
        Err(RefusalReason::AlreadyDecided)
    } else {
        Ok(())
    }
}

/// Why a run refuses, to its sender, a decision sent through the API (the run's `decide`
/// update, or the API itself when no worker answers): what [`weigh_approval`] would refuse,
/// said as the 409 says it. `None` when the run counts it. (`state`: the run's; `plan`: its
/// recorded plan; `decided`: a decision was already counted.)
pub fn decision_refused(
    run_id: &str,
    state: Option<ProvisioningState>,
    plan: Option<&PlanReceipt>,
    decided: bool,
    approval: &Approval,
) -> Option<String> {
    let awaiting = state == Some(ProvisioningState::AwaitingApproval);
    let why = weigh_approval(awaiting, plan, decided, approval).err()?;
    Some(match why {
        RefusalReason::NotAwaited => format!(
            "run `{run_id}` is {}, not AwaitingApproval",
            state.map_or("not planned yet", |s| s.as_str())
        ),
        RefusalReason::OtherPlan => format!(
            "the approval names plan {} but the run's plan is {}; review the current plan",
            approval.inputs_hash,
            plan.map_or("", |p| p.inputs_hash.as_str())
        ),
        _ => format!("run `{run_id}` has counted a decision already"),
    })
}

/// Why a run refuses a cancel (the run's `request_cancel` update, or the API when no worker
/// answers): its apply has started. `None` while it may still be cancelled.
pub fn cancel_refused(run_id: &str, state: Option<ProvisioningState>) -> Option<String> {
    (!cancellable(state)).then(|| {
        format!(
            "run `{run_id}` is {} and can no longer be cancelled",
            state.map_or("in progress", |s| s.as_str())
        )
    })
}

/// Why a run refuses break-glass (the run's `request_break_glass` update, or the API when no
/// worker answers): its apply has started. `None` while it may still wait for a window.
pub fn break_glass_refused(run_id: &str, state: Option<ProvisioningState>) -> Option<String> {
    (!cancellable(state)).then(|| {
        format!(
            "run `{run_id}` is {} and no longer waits for a window",
            state.map_or("in progress", |s| s.as_str())
        )
    })
}

/// An approval the run did not count, kept for the audit: who sent it, when, and why it was
/// refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedApproval {
    /// Who sent it.
    pub approver: String,
    /// Approve or reject.
    pub decision: ApprovalDecision,
    /// The inputs hash it named.
    pub inputs_hash: String,
    /// The approver's reason.
    #[serde(default)]
    pub reason: String,
    /// When the run received it (workflow time).
    pub received_at: chrono::DateTime<chrono::Utc>,
    /// Why the run refused it.
    pub why: RefusalReason,
    /// The recorded approval it named, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

impl RefusedApproval {
    /// `approval`, received at `received_at`, refused for `why`.
    pub fn new(
        approval: Approval,
        received_at: chrono::DateTime<chrono::Utc>,
        why: RefusalReason,
    ) -> Self {
        Self {
            approver: approval.approver,
            decision: approval.decision,
            inputs_hash: approval.inputs_hash,
            reason: approval.reason,
            received_at,
            why,
            approval_id: approval.approval_id,
        }
    }
}

/// What the workflow recorded about its approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    /// The recorded approval the run spent (the one its request named, or the one behind an
    /// operator's decision), or the one a non-production request named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// The decision counted: a rejection, or a verified grant with who granted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Approval>,
    /// Set when no decision came before the expiry timer.
    #[serde(default)]
    pub expired: bool,
    /// A policy allow that opened the production gate instead of a person: the decision is
    /// the evidence (bundle, version, input hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::policy::PolicyDecision>,
}

impl ApprovalRecord {
    /// An approval named by the request, not needed (outside production) and not checked.
    pub fn named(approval_id: String) -> Self {
        Self {
            approval_id: Some(approval_id),
            decision: None,
            expired: false,
            policy: None,
        }
    }

    /// A counted decision: a rejection, or a grant the Approvals port verified.
    pub fn decided(decision: Approval) -> Self {
        Self {
            approval_id: decision.approval_id.clone(),
            decision: Some(decision),
            expired: false,
            policy: None,
        }
    }

    /// No decision came before the expiry.
    pub fn expired() -> Self {
        Self {
            approval_id: None,
            decision: None,
            expired: true,
            policy: None,
        }
    }

    /// The production gate opened on a policy allow, with the decision as its evidence.
    pub fn by_policy(decision: crate::policy::PolicyDecision) -> Self {
        Self {
            approval_id: None,
            decision: None,
            expired: false,
            policy: Some(decision),
        }
    }
}

impl Approval {
    /// The approval a run's request names, as a claim on the plan: the Approvals port says
    /// who granted it.
    pub fn named(approval_id: &str, inputs_hash: &str) -> Self {
        Self {
            decision: ApprovalDecision::Approve,
            approver: String::new(),
            reason: String::new(),
            inputs_hash: inputs_hash.to_owned(),
            approval_id: Some(approval_id.to_owned()),
        }
    }
}

/// Everything a ProvisioningRun workflow needs, fixed at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    /// The run id (the workflow id is `provisioning-run/{run_id}`).
    pub run_id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// Owner project.
    pub project_id: String,
    /// Target environment.
    pub environment_id: String,
    /// Its class: production runs wait for approval.
    pub environment_class: EnvironmentClass,
    /// Why the run was requested.
    pub kind: ProvisioningKind,
    /// The promotion that asked for it.
    pub promotion_id: Option<String>,
    /// An approval that came with the request (a promotion's production approval).
    pub approval_id: Option<String>,
    /// The desired state.
    pub specification: SpecificationSnapshot,
    /// How long to wait for an approval.
    pub approval_timeout_secs: u64,
    /// Runner timeout for the apply.
    pub apply_timeout_secs: u64,
    /// The capacity lease recorded for the run when the API deferred its start (its project's
    /// runs were all in flight); the run asks for that lease instead of a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
    /// The quarantined versions a person's explicit run goes through (`models::quarantine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_override: Option<crate::quarantine::QuarantineOverride>,
}

impl RunInput {
    /// Whether this run must pass the production gate before it applies: every production
    /// run does, with the approval its request names or an operator's decision, each
    /// verified by the Approvals port.
    pub fn needs_approval(&self) -> bool {
        self.environment_class == EnvironmentClass::Production
    }
}

/// The live view of a run, as the `state` query returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// None while the run waits for its turn on the environment or is planning.
    pub state: Option<ProvisioningState>,
    /// The plan, once recorded.
    pub plan_receipt: Option<PlanReceipt>,
    /// The approval, once given, refused or expired.
    pub approval: Option<ApprovalRecord>,
    /// The apply receipt, once the apply ended.
    pub apply_receipt: Option<ApplyReceipt>,
    /// Why the run failed, was rejected or cancelled.
    pub reason: Option<String>,
    /// Approvals the run did not count, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_approvals: Vec<RefusedApproval>,
    /// What the policies answered about the plan, before anything applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::policy::PolicyDecision>,
    /// While a change window holds the apply: which window, and when it opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_window: Option<WindowWait>,
    /// While the project's quota or a pool without workers holds the run before it plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_capacity: Option<crate::capacity::CapacityWait>,
    /// An Operator's break-glass: the run applied inside a closed window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub break_glass: Option<BreakGlass>,
}

/// A run's apply held by a change window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowWait {
    pub window_id: String,
    /// None when no window ever opens (only a break-glass or a changed window lets it go).
    pub opens_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// An Operator's request to apply inside a closed change window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakGlass {
    pub by: String,
    /// Mandatory: why the change cannot wait.
    pub reason: String,
    /// The window it broke (set when the run used it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_id: Option<String>,
    /// When the run used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProvisioningState::*;

    /// The spec's state diagram (001, "ProvisioningRun"), edge for edge, plus the three
    /// moves it leaves implicit. Changing the table without changing this test fails.
    #[test]
    fn transitions_are_the_state_diagram() {
        let diagram = [
            (Some(Planned), AwaitingApproval),  // ProductionWithoutApproval
            (Some(Planned), Applying),          // ApprovedOrAllowed
            (Some(AwaitingApproval), Applying), // ApprovalGranted
            (Some(AwaitingApproval), Rejected), // ApprovalRejectedOrExpired
            (Some(Applying), Applied),          // RunnerSucceeded
            (Some(Applying), Failed),           // RunnerFailed
            (Some(Planned), Cancelled),         // Cancel
        ];
        let implicit = [
            (None, Planned),                     // the first plan is recorded
            (None, Failed),                      // the plan itself failed
            (None, Cancelled),                   // cancelled while waiting for its turn
            (Some(AwaitingApproval), Cancelled), // a cancel is valid until the apply
            (Some(Planned), Rejected),           // a policy denies the plan
            (None, Rejected),                    // the project's minutes are spent
        ];
        let mut expected: Vec<_> = diagram.iter().chain(&implicit).copied().collect();
        let mut table = TRANSITIONS.to_vec();
        let key = |(f, t): &(Option<ProvisioningState>, ProvisioningState)| {
            (f.map(|s| s.as_str()), t.as_str())
        };
        expected.sort_by_key(key);
        table.sort_by_key(key);
        assert_eq!(table, expected);
        for end in [Applied, Failed, Rejected, Cancelled] {
            assert!(end.is_terminal());
            for next in ProvisioningState::ALL {
                assert!(
                    !end.can_move_to(*next),
                    "{end} is terminal, yet moves to {next}"
                );
            }
        }
    }

    #[test]
    fn a_run_is_cancellable_until_it_applies() {
        assert!(cancellable(None));
        assert!(cancellable(Some(Planned)));
        assert!(cancellable(Some(AwaitingApproval)));
        for s in [Applying, Applied, Failed, Rejected, Cancelled] {
            assert!(!cancellable(Some(s)), "{s}");
        }
    }

    #[test]
    fn a_state_leads_to_itself_and_to_what_follows_it_never_back() {
        use ProvisioningState::*;
        assert!(leads_to(Some(Planned), Some(Planned)));
        assert!(leads_to(Some(Planned), Some(AwaitingApproval)));
        assert!(leads_to(None, Some(Applied)));
        assert!(leads_to(Some(Planned), Some(Applied)), "through Applying");
        assert!(!leads_to(Some(AwaitingApproval), Some(Planned)));
        assert!(!leads_to(Some(Applied), Some(Applying)));
        assert!(!leads_to(Some(Applied), None));
        assert!(!leads_to(Some(Rejected), Some(Applied)));
    }

    fn approval(hash: &str) -> Approval {
        Approval {
            decision: ApprovalDecision::Approve,
            approver: "alice".into(),
            reason: "CAB-1".into(),
            inputs_hash: hash.into(),
            approval_id: None,
        }
    }

    fn plan(hash: &str) -> PlanReceipt {
        PlanReceipt {
            changes: Default::default(),
            inputs_hash: hash.into(),
            program_version: "abc".into(),
            cost: None,
            posture: Vec::new(),
        }
    }

    #[test]
    fn a_decision_is_refused_to_its_sender_as_the_approval_rule_refuses_it() {
        let p = plan("h1");
        let awaiting = Some(ProvisioningState::AwaitingApproval);
        assert_eq!(
            decision_refused("r1", awaiting, Some(&p), false, &approval("h1")),
            None
        );
        assert_eq!(
            decision_refused(
                "r1",
                Some(ProvisioningState::Planned),
                Some(&p),
                false,
                &approval("h1")
            ),
            Some("run `r1` is Planned, not AwaitingApproval".into())
        );
        assert_eq!(
            decision_refused("r1", None, None, false, &approval("h1")),
            Some("run `r1` is not planned yet, not AwaitingApproval".into())
        );
        assert_eq!(
            decision_refused("r1", awaiting, Some(&p), false, &approval("h2")),
            Some(
                "the approval names plan h2 but the run's plan is h1; review the current plan"
                    .into()
            )
        );
        assert_eq!(
            decision_refused("r1", awaiting, Some(&p), true, &approval("h1")),
            Some("run `r1` has counted a decision already".into())
        );
    }

    #[test]
    fn cancel_and_break_glass_are_refused_once_the_apply_started() {
        for state in [
            None,
            Some(ProvisioningState::Planned),
            Some(ProvisioningState::AwaitingApproval),
        ] {
            assert_eq!(cancel_refused("r1", state), None, "{state:?}");
            assert_eq!(break_glass_refused("r1", state), None, "{state:?}");
        }
        assert_eq!(
            cancel_refused("r1", Some(ProvisioningState::Applying)),
            Some("run `r1` is Applying and can no longer be cancelled".into())
        );
        assert_eq!(
            break_glass_refused("r1", Some(ProvisioningState::Applied)),
            Some("run `r1` is Applied and no longer waits for a window".into())
        );
    }

    #[test]
    fn only_the_first_approval_of_the_awaited_plan_counts() {
        let p = plan("h1");
        assert_eq!(
            weigh_approval(true, Some(&p), false, &approval("h1")),
            Ok(())
        );
        assert_eq!(
            weigh_approval(true, Some(&p), false, &approval("h2")),
            Err(RefusalReason::OtherPlan)
        );
        assert_eq!(
            weigh_approval(true, Some(&p), true, &approval("h1")),
            Err(RefusalReason::AlreadyDecided)
        );
        assert_eq!(
            weigh_approval(false, Some(&p), false, &approval("h1")),
            Err(RefusalReason::NotAwaited)
        );
        assert_eq!(
            weigh_approval(true, None, false, &approval("h1")),
            Err(RefusalReason::OtherPlan)
        );
    }

    #[test]
    fn a_refused_approval_keeps_who_when_and_why() {
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let refused = RefusedApproval::new(approval("h2"), at, RefusalReason::OtherPlan);
        let json = serde_json::to_value(&refused).unwrap_or_default();
        assert_eq!(json["approver"], "alice");
        assert_eq!(json["why"], "other-plan");
        assert_eq!(json["inputsHash"], "h2");
        assert_eq!(json["receivedAt"], "2027-01-15T08:00:00Z");
    }
}
