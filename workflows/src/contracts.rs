//! Activity contracts: what the workflows may ask of the outside world.
//!
//! The names are fixed strings so a renamed Rust method never breaks a running history.

#![allow(clippy::unimplemented)] // `#[activity_definitions]` requires `unimplemented!()` bodies.

use runtime_cloud_models::approvals::{ApprovalClaim, ClaimOutcome};
use runtime_cloud_models::{ApplyReceipt, PlanReceipt, RunInput, RunStatus, SpecificationSnapshot};
use serde::{Deserialize, Serialize};
use temporalio_common::ActivityError;
use temporalio_macros::activity_definitions;

/// Take, ask for, or release a slot of a semaphore ([`crate::semaphore`]): an environment's
/// lock or a project's capacity, held in the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockRequest {
    /// The semaphore's tenant.
    pub tenant_id: String,
    /// The semaphore (`environment/{tenant}/{env}`, `capacity/{tenant}/{project}`).
    pub semaphore_id: String,
    /// The workflow id that wants a slot and is signalled `granted` when it gets it.
    pub requester_workflow_id: String,
    /// How many may hold the semaphore at once, as the requester reads it.
    pub slots: u32,
    /// A holder found gone has its capacity lease recorded as expired.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub records_leases: bool,
    /// A waiter looking again after a while: when nobody waits before it, it also checks that
    /// the holders' workflows still exist (one terminated by hand never releases).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_holders: bool,
}

/// The answer to [`LockRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockAnswer {
    /// The requester holds a slot now; else it waits for `granted`.
    pub holds: bool,
    /// A waiter looks again this often (`LockHolderCheckMinutes`).
    pub recheck_secs: u64,
}

/// Record where a run ended and let its semaphores go, in one transaction, in this order: its
/// project's capacity (slot and lease), so no reader sees an ended run still holding capacity;
/// the projection of its ending; the observation after its apply, when asked (`observe`); its
/// environment's lock, so no other run applies there before this one's ending, and what its
/// apply left, are recorded. It repeats harmlessly: a retry after a killed worker writes the
/// same ending and releases nothing more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finish {
    /// The capacity slot the run holds or waits for; none when it never asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<LockRequest>,
    /// The run's final status.
    pub projection: RunProjection,
    /// The environment's lock, held or waited for.
    pub environment: LockRequest,
    /// Observe the environment before it is let go (after an apply, or a failed one), in the
    /// same local activity and transaction: the observation shows what this run's apply left,
    /// never a later run's apply under way. It is given up rather than fail the finish (a read
    /// over its time, a record that fails): the next sweep observes the environment within
    /// five minutes anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe: Option<ObserveRequest>,
}

/// Plan a specification against its environment's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRequest {
    pub run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub specification: SpecificationSnapshot,
    /// What the OS holds the runner's processes to (the project's quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<runtime_cloud_models::capacity::ProcessLimits>,
    /// A decommission: plan the destruction of what the environment runs, not the
    /// specification.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
}

/// Apply a recorded plan. The runner refuses when the target no longer matches the plan's
/// inputs hash, and answers a repeated request for the same run with the recorded receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    pub run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub specification: SpecificationSnapshot,
    pub plan: PlanReceipt,
    /// What the OS holds the runner's processes to (the project's quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<runtime_cloud_models::capacity::ProcessLimits>,
    /// A decommission: destroy what the environment runs, as planned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destroy: bool,
}

/// Project a run's current status into the read tables, with its event, in one transaction,
/// after the states it passed through since its last projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunProjection {
    pub run: RunInput,
    /// The statuses of the states the run went on from without waiting (`Planned` on its way
    /// to `Applying`), oldest first: projected with their events before `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed: Vec<RunStatus>,
    pub status: RunStatus,
}

/// The `ApplicationFailure` type name of a runner that failed the apply: never retried.
pub const APPLY_FAILED: &str = "ApplyFailed";
/// The `ApplicationFailure` type name of a plan that cannot succeed (program version missing).
pub const PLAN_INVALID: &str = "PlanInvalid";

/// The provisioning activities.
pub struct ProvisioningActivities;

#[activity_definitions]
impl ProvisioningActivities {
    /// Take a slot if one is free and nobody waits before the requester, else queue it
    /// (`granted` follows); asking again keeps its place.
    #[activity(name = "provisioning.acquire-lock")]
    pub fn acquire_lock(req: LockRequest) -> Result<LockAnswer, ActivityError> {
        unimplemented!()
    }

    /// See [`Finish`]: what the observation recorded, none when none was asked or it was
    /// given up.
    #[activity(name = "provisioning.finish")]
    pub fn finish(req: Finish) -> Result<Option<RecordOutcome>, ActivityError> {
        unimplemented!()
    }

    /// See [`PlanRequest`].
    #[activity(name = "provisioning.plan")]
    pub fn plan(req: PlanRequest) -> Result<PlanReceipt, ActivityError> {
        unimplemented!()
    }

    /// See [`ApplyRequest`].
    #[activity(name = "provisioning.apply")]
    pub fn apply(req: ApplyRequest) -> Result<ApplyReceipt, ActivityError> {
        unimplemented!()
    }

    /// Verify the run's claim on an approval and spend the approval on the run (the
    /// Approvals port); a refusal is an answer, not a failure.
    #[activity(name = "provisioning.claim-approval")]
    pub fn claim_approval(claim: ApprovalClaim) -> Result<ClaimOutcome, ActivityError> {
        unimplemented!()
    }

    /// See [`RunProjection`].
    #[activity(name = "provisioning.project")]
    pub fn project(p: RunProjection) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// The policies' decision on a plan. The input's `observed` is filled in by the activity
    /// (the environment's last observed workloads).
    #[activity(name = "provisioning.evaluate-policy")]
    pub fn evaluate_policy(input: PolicyInput) -> Result<PolicyDecision, ActivityError> {
        unimplemented!()
    }

    /// The gate the environment's change windows make at a time (see [`WindowQuery`]).
    #[activity(name = "provisioning.change-window")]
    pub fn change_window(q: WindowQuery) -> Result<Gate, ActivityError> {
        unimplemented!()
    }

    /// Why the run's specification is held by the tenant's quarantines now (none: it is not),
    /// weighed again before the apply of a run that waited (`models::quarantine::gate`).
    #[activity(name = "provisioning.quarantine-gate")]
    pub fn quarantine_gate(run: RunInput) -> Result<Option<String>, ActivityError> {
        unimplemented!()
    }

    /// See [`DecideOnPlan`].
    #[activity(name = "provisioning.decide-on-plan")]
    pub fn decide_on_plan(req: DecideOnPlan) -> Result<PlanDecisions, ActivityError> {
        unimplemented!()
    }
}

/// The policies' decision on a plan ([`ProvisioningActivities::evaluate_policy`]) and the
/// change windows' gate at the plan's time ([`ProvisioningActivities::change_window`]), read
/// in one local activity: both are reads, and most runs go from their plan straight on to
/// their apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecideOnPlan {
    pub policy: PolicyInput,
    pub window: WindowQuery,
}

/// The answer to a [`DecideOnPlan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDecisions {
    pub policy: PolicyDecision,
    pub window: Gate,
}

pub use runtime_cloud_models::policy::{PolicyDecision, PolicyInput};
pub use runtime_cloud_models::windows::Gate;

/// May the environment be changed at `at`? Its own change windows and its tenant's decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowQuery {
    pub tenant_id: String,
    pub environment_id: String,
    pub at: chrono::DateTime<chrono::Utc>,
}

pub use runtime_cloud_models::capacity::LeaseRequest;

/// The answer to a [`LeaseRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "answer")]
pub enum LeaseAnswer {
    /// The project's quota lets the run ask for a slot.
    Ask {
        /// The quota in force.
        quota: QuotaInForce,
        /// The environment's worker pool; none for the default task queue.
        pool_id: Option<String>,
        /// The answer of the capacity semaphore, asked with the quota's `concurrentRuns`
        /// slots; none when the environment has a pool (the run asks once it is served).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        taken: Option<LockAnswer>,
    },
    /// The day's execution minutes are spent: the run must not start.
    Refused { reason: String },
}

/// A project's quota as a run reads it when it asks for a lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaInForce {
    pub limits: runtime_cloud_models::capacity::QuotaLimits,
    /// `default` when none is recorded.
    pub source: String,
}

/// A run's first step: take its environment's lock ([`ProvisioningActivities::acquire_lock`])
/// and, when that was free, ask for its capacity lease ([`LeaseRequest`]) in the same local
/// activity. Most runs find their environment free; one that waits for it asks for the lease
/// once it has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRequest {
    pub lock: LockRequest,
    pub lease: LeaseRequest,
}

/// The answer to a [`TurnRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnAnswer {
    /// The environment's lock.
    pub lock: LockAnswer,
    /// The lease's answer; none when the lock was not free (nothing was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseAnswer>,
}

/// Move a run's lease to `granted` or `released`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseMove {
    pub lease_id: String,
    pub to: runtime_cloud_models::capacity::LeaseState,
    pub at: chrono::DateTime<chrono::Utc>,
}

/// Whether a run may go to its environment's pool now: the pool's state, and how many workers
/// poll its task queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolQuery {
    pub tenant_id: String,
    pub pool_id: String,
    pub task_queue: String,
}

/// The capacity activities (spec 003, ExecutionCapacityService).
pub struct CapacityActivities;

#[activity_definitions]
impl CapacityActivities {
    /// See [`LeaseRequest`].
    #[activity(name = "capacity.request-lease")]
    pub fn request_lease(req: LeaseRequest) -> Result<LeaseAnswer, ActivityError> {
        unimplemented!()
    }

    /// See [`TurnRequest`].
    #[activity(name = "capacity.take-turn")]
    pub fn take_turn(req: TurnRequest) -> Result<TurnAnswer, ActivityError> {
        unimplemented!()
    }

    /// See [`LeaseMove`].
    #[activity(name = "capacity.move-lease")]
    pub fn move_lease(req: LeaseMove) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// See [`PoolQuery`]: why the run cannot go to the pool yet, None when it can.
    #[activity(name = "capacity.pool-hold")]
    pub fn pool_hold(req: PoolQuery) -> Result<Option<String>, ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the capacity activities.
pub mod capacity_markers {
    pub use super::capacity_activities::{MoveLease, PoolHold, RequestLease, TakeTurn};
}

/// Marker types of the provisioning activities, for `#[activity(definition = …)]` on the
/// implementations.
pub mod provisioning_markers {
    pub use super::provisioning_activities::{
        AcquireLock, Apply, ChangeWindow, ClaimApproval, DecideOnPlan, EvaluatePolicy, Finish,
        Plan, Project, QuarantineGate,
    };
}

/// Read an environment's target (a few quick tries, then it counts as unreachable: the
/// environment becomes stale) and record what it shows: inventory, findings, a new proposal
/// (with `proposal_id`), in one activity. A retry reads the target again, which changes
/// nothing; the observation never enters the caller's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveRequest {
    pub tenant_id: String,
    pub environment_id: String,
    /// The id of the proposal the observation raises, if it raises one (chosen by the
    /// workflow, so a retry raises the same one).
    pub proposal_id: String,
}

pub use runtime_cloud_models::inventory::RecordRequest;

pub use runtime_cloud_models::inventory::RecordOutcome;

/// Observe and record one page of environments in one activity: the observation sweep's unit
/// of work. The activity lists the page itself, reads the targets a few at a time, records
/// them a batch per transaction, and starts the workflows of the proposals they raise, so the
/// sweep's history holds one small activity per page whatever its size (a workflow per
/// environment cost four Temporal actions per environment and sweep).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservePageRequest {
    /// Start after this environment (the store's key, exclusive); from the first when absent.
    pub after: Option<String>,
    pub limit: u64,
    /// New proposals' ids derive from this, the page's time and their environment
    /// ([`crate::ids::derived_time_ordered_id`]), so a retried page raises the same ones.
    pub proposal_seed: String,
    /// The page's time, in milliseconds since the epoch (the sweep's workflow time).
    pub proposed_at_millis: u64,
}

/// What observing a page did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageOutcome {
    /// Environments read and recorded (reachable or not).
    pub observed: u32,
    /// Of those, the ones whose target did not answer (now stale).
    pub unreachable: u32,
    /// Proposals raised, their workflows started.
    pub proposals: u32,
    /// Where the next page starts; none after the last.
    pub next: Option<String>,
}

pub use runtime_cloud_models::inventory::ProposalInput;

pub use runtime_cloud_models::inventory::ProposalProjection;

/// Prepare the reconciliation run of an accepted proposal: for `adopt-observed` first declare
/// a specification matching what was observed; record the run row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareRunRequest {
    pub proposal: ProposalInput,
    /// The run's id, chosen by the workflow so a retry prepares the same run.
    pub run_id: String,
    /// The Operator who accepted it: in production, the run's approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grantor: Option<runtime_cloud_models::approvals::Grantor>,
}

/// The inventory activities.
pub struct InventoryActivities;

#[activity_definitions]
impl InventoryActivities {
    /// See [`ObserveRequest`].
    #[activity(name = "inventory.observe")]
    pub fn observe(req: ObserveRequest) -> Result<RecordOutcome, ActivityError> {
        unimplemented!()
    }

    /// See [`ObservePageRequest`].
    #[activity(name = "inventory.observe-page")]
    pub fn observe_page(req: ObservePageRequest) -> Result<PageOutcome, ActivityError> {
        unimplemented!()
    }

    /// See [`ProposalProjection`].
    #[activity(name = "inventory.project-proposal")]
    pub fn project_proposal(p: ProposalProjection) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// The state the read table shows for proposal `proposal_id` (`None`: no row).
    #[activity(name = "inventory.proposal-state")]
    pub fn read_proposal_state(
        proposal_id: String,
    ) -> Result<Option<runtime_cloud_models::drift::ProposalState>, ActivityError> {
        unimplemented!()
    }

    /// The workflows of these superseded proposals were told: later records of their
    /// environments no longer name them.
    #[activity(name = "inventory.mark-told")]
    pub fn mark_told(proposal_ids: Vec<String>) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// See [`PrepareRunRequest`].
    #[activity(name = "inventory.prepare-run")]
    pub fn prepare_run(req: PrepareRunRequest) -> Result<RunInput, ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the inventory activities.
pub mod inventory_markers {
    pub use super::inventory_activities::{
        MarkTold, Observe, ObservePage, PrepareRun, ProjectProposal, ReadProposalState,
    };
}

/// Watching a Kubernetes cluster.
pub struct WatchActivities;

#[activity_definitions]
impl WatchActivities {
    /// Watches `cluster` (one watch per kind, shared by every namespace observed there) and
    /// tells each environment whose objects change to observe itself; heartbeats while it
    /// watches. See `runtime_cloud_activities::kubernetes::watch`.
    #[activity(name = "kubernetes.watch-cluster")]
    pub fn watch_cluster(cluster: KubernetesCluster) -> Result<WatchEnd, ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the watch activities.
pub mod watch_markers {
    pub use super::watch_activities::WatchCluster;
}

pub use runtime_cloud_models::targets::KubernetesCluster;

/// Why a cluster's watch returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WatchEnd {
    /// No environment is observed on the cluster any more.
    NothingToWatch,
    /// It watched its while; watch on in a fresh workflow history.
    Again,
}

/// One page of environments, in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentPageRequest {
    /// Start after this key (exclusive); from the beginning when absent.
    pub after: Option<String>,
    pub limit: u64,
}

pub use runtime_cloud_models::environments::EnvironmentKey;

pub use runtime_cloud_models::environments::EnvironmentPage;

/// What the GitOps reconciler does about one environment after re-planning it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum ReplanOutcome {
    /// No specification, no difference, or a proposal for it is already open.
    Nothing,
    /// A non-destructive difference outside production: apply it through this run.
    Apply { run: Box<RunInput> },
    /// Destructive or production: an operator reviews this proposal.
    Propose {
        proposal: ProposalInput,
        superseded: Vec<String>,
    },
    /// A difference, but the specification carries a quarantined version: neither applied nor
    /// proposed (`ReconciliationHeld`), for this reason.
    Held { reason: String },
}

/// Re-plan one environment (GitOps reconciler).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplanRequest {
    pub environment: EnvironmentKey,
    /// Ids for what the re-plan may create, chosen by the workflow (idempotent retries).
    pub run_id: String,
    pub proposal_id: String,
}

/// The scheduled activities (observation sweep, GitOps reconciler).
pub struct ScheduledActivities;

#[activity_definitions]
impl ScheduledActivities {
    /// A page of every tenant's environments.
    #[activity(name = "scheduled.list-environments")]
    pub fn list_environments(
        req: EnvironmentPageRequest,
    ) -> Result<EnvironmentPage, ActivityError> {
        unimplemented!()
    }

    /// Marks stale every environment not observed within `StalenessMinutes`; returns how many.
    #[activity(name = "scheduled.mark-stale")]
    pub fn mark_stale(window: String) -> Result<u64, ActivityError> {
        unimplemented!()
    }

    /// See [`ReplanRequest`].
    #[activity(name = "scheduled.replan")]
    pub fn replan(req: ReplanRequest) -> Result<ReplanOutcome, ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the scheduled activities.
pub mod scheduled_markers {
    pub use super::scheduled_activities::{ListEnvironments, MarkStale, Replan};
}

pub use runtime_cloud_models::rollouts::{RolloutInput, RolloutStatus, Standing};

/// Prepare one instance of a rollout's wave: its derived specification and its promotion run
/// `run_id` (chosen by the workflow, so a retry prepares the same run). The rollout's input
/// is read from `fleet_rollouts` by the activity, not carried in every step's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareInstance {
    pub rollout_id: String,
    pub environment_id: String,
    pub run_id: String,
}

/// Prepare the run of an instance back to the specification it ran before the rollout's run
/// `rolled_out`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareRollback {
    pub rollout_id: String,
    pub environment_id: String,
    pub rolled_out: String,
    pub run_id: String,
}

/// A rolled-back rollout quarantines the versions it moved to, for its tenant
/// (`models::quarantine`), before it runs any instance back: from then on nothing automatic
/// applies them. The versions are read from `fleet_rollouts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineRelease {
    pub rollout_id: String,
    /// Why the rollout was halted, for the quarantine's reason.
    pub halted_because: String,
}

/// Where a wave's instances stand: `(environmentId, runId)` pairs, read against the rollout's
/// target versions. The rollout's input is not carried (it is in `fleet_rollouts`): every
/// step of a rollout over thousands of instances would copy it into the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressRequest {
    pub rollout_id: String,
    pub tenant_id: String,
    pub instances: Vec<(String, String)>,
    pub versions: std::collections::BTreeMap<String, String>,
}

/// Read a rollout's SLO: `query` is its query for the instances moved so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SloCheck {
    pub slo: runtime_cloud_models::rollouts::SloQuery,
    pub query: String,
}

/// What a rollout's SLO query answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "reading")]
pub enum SloReading {
    /// No sample above the threshold.
    Met,
    Breached {
        reason: String,
    },
    /// The query could not be answered (Prometheus away, a query it refuses).
    Unavailable {
        reason: String,
    },
}

/// Open the incident of a halt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaltIncident {
    pub tenant_id: String,
    pub rollout_id: String,
    pub title: String,
    /// The instance involved, when there is one.
    pub environment_id: Option<String>,
    /// `slo-breach` for a halt on an SLO breach, `rollout-halted` for the other guards.
    pub source: runtime_cloud_models::fleet::IncidentSource,
}

/// Project a rollout's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProjection {
    pub rollout_id: String,
    pub status: RolloutStatus,
}

/// The fleet activities.
pub struct FleetActivities;

#[activity_definitions]
impl FleetActivities {
    /// See [`PrepareInstance`]: records the instance's run and starts its workflow.
    #[activity(name = "fleet.start-instance-run")]
    pub fn start_instance_run(req: PrepareInstance) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// See [`PrepareRollback`]: records the run back and starts its workflow.
    #[activity(name = "fleet.start-rollback-run")]
    pub fn start_rollback_run(req: PrepareRollback) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// See [`QuarantineRelease`].
    #[activity(name = "fleet.quarantine-release")]
    pub fn quarantine_release(req: QuarantineRelease) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// See [`ProgressRequest`].
    #[activity(name = "fleet.progress")]
    pub fn progress(req: ProgressRequest) -> Result<Vec<Standing>, ActivityError> {
        unimplemented!()
    }

    /// See [`SloCheck`]. Never fails on the query's account: an unanswered query is a
    /// reading, which the rollout counts.
    #[activity(name = "fleet.check-slo")]
    pub fn check_slo(req: SloCheck) -> Result<SloReading, ActivityError> {
        unimplemented!()
    }

    /// See [`HaltIncident`]; returns the incident's id.
    #[activity(name = "fleet.open-incident")]
    pub fn open_incident(req: HaltIncident) -> Result<String, ActivityError> {
        unimplemented!()
    }

    /// See [`RolloutProjection`].
    #[activity(name = "fleet.project")]
    pub fn project(p: RolloutProjection) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the fleet activities.
pub mod fleet_markers {
    pub use super::fleet_activities::{
        CheckSlo, OpenIncident, Progress, Project, QuarantineRelease, StartInstanceRun,
        StartRollbackRun,
    };
}

/// An environment's life: read it, warn of its expiry, prepare its decommission run.
pub struct LifetimeActivities;

#[activity_definitions]
impl LifetimeActivities {
    /// The environment's life as its row says now; none when it is not registered.
    #[activity(name = "lifetime.read")]
    pub fn read(environment: EnvironmentKey) -> Result<Option<LifeRow>, ActivityError> {
        unimplemented!()
    }

    /// Records `EnvironmentExpiring` for the expiry, once (`store::environments::warn_expiring`).
    #[activity(name = "lifetime.warn")]
    pub fn warn(request: WarnRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// Records the decommission run `run_id` of the environment, in one transaction
    /// (`transactions::prepare_decommission_run`); none when the environment was retired
    /// meanwhile (it is then left so).
    #[activity(name = "lifetime.prepare-decommission")]
    pub fn prepare_decommission(
        request: DecommissionRequest,
    ) -> Result<Option<RunInput>, ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the lifetime activities.
pub mod lifetime_markers {
    pub use super::lifetime_activities::{PrepareDecommission, Read, Warn};
}

pub use runtime_cloud_models::lifetime::LifeRow;

/// Warn of the environment's expiry `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WarnRequest {
    pub environment: EnvironmentKey,
    pub expires_at: chrono::DateTime<chrono::Utc>,
}

/// Record the decommission run `run_id` of an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecommissionRequest {
    pub environment: EnvironmentKey,
    pub run_id: String,
}

/// An off-boarding order's workflow input (`store::offboarding`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderInput {
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
}

/// Where an order's archive was stored: its key, the checksum and size of what was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredArchive {
    pub key: String,
    /// `sha256:` of the archive as written.
    pub sha256: String,
    pub bytes: u64,
}

/// Read the archive back and verify it against its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyArchive {
    pub order_id: String,
    pub archive: StoredArchive,
}

/// Record the order's decommission run `run_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffboardingDecommission {
    pub order_id: String,
    pub run_id: String,
}

/// End the order: completed, or failed for `failure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndOrder {
    pub order_id: String,
    pub failure: Option<String>,
}

/// An off-boarding order's steps: export the instance's record, verify the archive, record the
/// decommission, end the order.
pub struct OffboardingActivities;

#[activity_definitions]
impl OffboardingActivities {
    /// Exports the order's instance's record (specifications, runs with their receipts and
    /// logs, findings, proposals, approvals, inventory) as one archive with its manifest, and
    /// stores it (a retry writes it again).
    #[activity(name = "offboarding.export")]
    pub fn export(order_id: String) -> Result<StoredArchive, ActivityError> {
        unimplemented!()
    }

    /// Reads the archive back from the store and verifies it: the archive's checksum, then
    /// every file against the manifest. Verified, the order is recorded `exported` with it;
    /// `false` when it does not verify (nothing recorded).
    #[activity(name = "offboarding.verify")]
    pub fn verify(request: VerifyArchive) -> Result<bool, ActivityError> {
        unimplemented!()
    }

    /// Records the decommission run and the order `decommissioning`, in one transaction
    /// (`transactions::prepare_offboarding_decommission`); none when there is nothing to
    /// destroy.
    #[activity(name = "offboarding.prepare-decommission")]
    pub fn prepare_decommission(
        request: OffboardingDecommission,
    ) -> Result<Option<RunInput>, ActivityError> {
        unimplemented!()
    }

    /// Ends the order (`store::offboarding::complete` or `fail`).
    #[activity(name = "offboarding.end")]
    pub fn end(request: EndOrder) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the off-boarding activities.
pub mod offboarding_markers {
    pub use super::offboarding_activities::{End, Export, PrepareDecommission, Verify};
}

/// Adopt a proposal's unmanaged workloads into its Pulumi program (`store::adoptions`):
/// generate the code, publish it on the proposal's branch, record how it ended.
pub struct AdoptionActivities;

#[activity_definitions]
impl AdoptionActivities {
    /// Generates the code that manages the proposal's unmanaged workloads (`pulumi import`)
    /// and publishes it on its branch; records the adoption `published`, or `failed` with the
    /// reason when the program, the import or the repository refuses it. An error is one a
    /// retry may get past (a repository or backend out of reach).
    #[activity(name = "adoption.publish")]
    pub fn publish(request: AdoptionInput) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// Records the adoption `failed` with the reason (the publish kept failing).
    #[activity(name = "adoption.fail")]
    pub fn fail(request: FailAdoption) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// One request of a proposal's adoption: the workflow's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionInput {
    pub proposal_id: String,
    /// Which request (`store::adoptions`): only its workflow ends it.
    pub attempt: u32,
}

/// Record a proposal's adoption failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailAdoption {
    pub adoption: AdoptionInput,
    pub reason: String,
}

/// Marker types of the adoption activities.
pub mod adoption_markers {
    pub use super::adoption_activities::{Fail, Publish};
}
