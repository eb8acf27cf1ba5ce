//! The ProvisioningRun workflow, edge by edge of its diagram (`models::TRANSITIONS`), against
//! stand-ins for its activities registered under the contracts' names: what a stand-in
//! answers is the test's script, what the run sent it is recorded. The SDK (1.1.1) has no
//! in-process test server, so the workflow runs on a worker of the suite's Temporal dev server
//! (`RC_TEST_TEMPORAL_ADDRESS`, started by `scripts/test`), each test on a task queue of its
//! own.
// A stand-in that cannot answer fails the test that scripted it.
#![allow(clippy::unwrap_used)]
// `#[activities]` names each activity in a constant, which the worker does not need: it
// registers them by their contracts' definitions.
#![allow(dead_code)]

use chrono::Utc;
use runtime_cloud_models::approvals::{ApprovalSource, ClaimOutcome, RecordedApproval};
use runtime_cloud_models::capacity::QuotaLimits;
use runtime_cloud_models::policy::PolicyDecision;
use runtime_cloud_models::{
    ApplyReceipt, ApplyResult, Approval, ApprovalDecision, BreakGlass, EnvironmentClass,
    PlanReceipt, ProvisioningState, RefusalReason, RunInput, RunStatus,
};
use runtime_cloud_workflows::ProvisioningRun;
use runtime_cloud_workflows::contracts::{
    ApplyRequest, DecideOnPlan, Finish, Gate, LeaseAnswer, LeaseMove, LeaseRequest, LockAnswer,
    LockRequest, PlanDecisions, PlanRequest, PolicyInput, PoolQuery, QuotaInForce, RecordOutcome,
    RunProjection, TurnAnswer, TurnRequest, WindowQuery, capacity_markers, provisioning_markers,
};
use runtime_cloud_workflows::provisioning_run::CancelRequest;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use temporalio_client::errors::WorkflowUpdateError;
use temporalio_client::{
    Client, WorkflowExecuteUpdateOptions, WorkflowGetResultOptions, WorkflowHandle,
    WorkflowSignalOptions, WorkflowStartOptions,
};

/// The run's handle, for signals.
type Run = WorkflowHandle<Client, ProvisioningRun>;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{ApplicationFailure, Runtime, Worker, WorkerOptions};

/// What the stand-ins answer.
#[derive(Clone)]
struct Script {
    /// The environment's lock is free at once.
    lock_free: bool,
    /// The lease's answer with the turn (a slot of the project's capacity held).
    lease: LeaseAnswer,
    /// The plan, or the terminal failure of the plan activity.
    plan: Result<PlanReceipt, String>,
    /// The policies' denials.
    deny: Vec<String>,
    /// The policies allow (evidence that opens the production gate for a baseline).
    allow: bool,
    /// The change windows' gate, first look and every look after.
    gates: Vec<Gate>,
    /// What claiming an approval answers.
    claim: ClaimOutcome,
    /// How the apply ends.
    apply: ApplyResult,
    /// The apply answers once this is notified (at once without).
    apply_held: Option<Arc<tokio::sync::Notify>>,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            lock_free: true,
            lease: held_lease(),
            plan: Ok(plan()),
            deny: Vec::new(),
            allow: false,
            gates: vec![Gate::Open],
            claim: spent(),
            apply: ApplyResult::Succeeded,
            apply_held: None,
        }
    }
}

/// What the run sent the stand-ins.
#[derive(Default)]
struct Seen {
    /// Every state the read tables were told, in order (passed-through states included).
    projected: Vec<Option<ProvisioningState>>,
    /// The projection the run ended with.
    finished: Option<RunProjection>,
    /// Approvals claimed.
    claims: u32,
    /// Applies asked for.
    applies: u32,
    /// Leases moved (released without their semaphore).
    lease_moves: Vec<LeaseMove>,
    /// Looks at the change windows after the first.
    window_looks: usize,
}

#[derive(Clone)]
struct StandIns {
    script: Script,
    seen: Arc<Mutex<Seen>>,
}

/// A failure the run's retry policy does not retry (the real activities' runner failures).
fn terminal(message: &str) -> ActivityError {
    ActivityError::application(ApplicationFailure::non_retryable(message.to_owned()))
}

#[activities]
impl StandIns {
    #[activity(definition = capacity_markers::TakeTurn)]
    async fn take_turn(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: TurnRequest,
    ) -> Result<TurnAnswer, ActivityError> {
        let lock = LockAnswer {
            holds: self.script.lock_free,
            recheck_secs: 1,
        };
        let lease = self.script.lock_free.then(|| self.script.lease.clone());
        Ok(TurnAnswer { lock, lease })
    }

    #[activity(definition = capacity_markers::RequestLease)]
    async fn request_lease(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: LeaseRequest,
    ) -> Result<LeaseAnswer, ActivityError> {
        Ok(self.script.lease.clone())
    }

    #[activity(definition = capacity_markers::MoveLease)]
    async fn move_lease(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: LeaseMove,
    ) -> Result<(), ActivityError> {
        self.seen.lock().unwrap().lease_moves.push(req);
        Ok(())
    }

    #[activity(definition = capacity_markers::PoolHold)]
    async fn pool_hold(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: PoolQuery,
    ) -> Result<Option<String>, ActivityError> {
        Ok(None)
    }

    #[activity(definition = provisioning_markers::AcquireLock)]
    async fn acquire_lock(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: LockRequest,
    ) -> Result<LockAnswer, ActivityError> {
        // The environment stays taken: a run queued for it waits until it gives up.
        Ok(LockAnswer {
            holds: self.script.lock_free,
            recheck_secs: 1,
        })
    }

    #[activity(definition = provisioning_markers::Plan)]
    async fn plan(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: PlanRequest,
    ) -> Result<PlanReceipt, ActivityError> {
        self.script.plan.clone().map_err(|e| terminal(&e))
    }

    #[activity(definition = provisioning_markers::DecideOnPlan)]
    async fn decide_on_plan(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: DecideOnPlan,
    ) -> Result<PlanDecisions, ActivityError> {
        Ok(PlanDecisions {
            policy: decision(&self.script),
            window: self.script.gates[0].clone(),
        })
    }

    #[activity(definition = provisioning_markers::EvaluatePolicy)]
    async fn evaluate_policy(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: PolicyInput,
    ) -> Result<PolicyDecision, ActivityError> {
        Ok(decision(&self.script))
    }

    #[activity(definition = provisioning_markers::ChangeWindow)]
    async fn change_window(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: WindowQuery,
    ) -> Result<Gate, ActivityError> {
        let mut seen = self.seen.lock().unwrap();
        seen.window_looks += 1;
        let gates = &self.script.gates;
        Ok(gates[seen.window_looks.min(gates.len() - 1)].clone())
    }

    /// No quarantine holds these runs: the rule is `models::quarantine::gate`'s, tested there
    /// and end to end.
    #[activity(definition = provisioning_markers::QuarantineGate)]
    async fn quarantine_gate(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _run: RunInput,
    ) -> Result<Option<String>, ActivityError> {
        Ok(None)
    }

    #[activity(definition = provisioning_markers::ClaimApproval)]
    async fn claim_approval(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _claim: runtime_cloud_models::approvals::ApprovalClaim,
    ) -> Result<ClaimOutcome, ActivityError> {
        self.seen.lock().unwrap().claims += 1;
        Ok(self.script.claim.clone())
    }

    #[activity(definition = provisioning_markers::Project)]
    async fn project(
        self: Arc<Self>,
        _ctx: ActivityContext,
        p: RunProjection,
    ) -> Result<(), ActivityError> {
        self.seen.lock().unwrap().told(&p);
        Ok(())
    }

    #[activity(definition = provisioning_markers::Apply)]
    async fn apply(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _req: ApplyRequest,
    ) -> Result<ApplyReceipt, ActivityError> {
        self.seen.lock().unwrap().applies += 1;
        if let Some(held) = &self.script.apply_held {
            held.notified().await;
        }
        Ok(ApplyReceipt {
            outputs: serde_json::json!({}),
            duration_ms: 5,
            result: self.script.apply,
            runner_version: "stand-in".into(),
            reason: (self.script.apply == ApplyResult::Failed).then(|| "boom".into()),
        })
    }

    #[activity(definition = provisioning_markers::Finish)]
    async fn finish(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: Finish,
    ) -> Result<Option<RecordOutcome>, ActivityError> {
        let mut seen = self.seen.lock().unwrap();
        seen.told(&req.projection);
        seen.finished = Some(req.projection);
        Ok(None)
    }
}

impl Seen {
    fn told(&mut self, p: &RunProjection) {
        for status in p.passed.iter().chain([&p.status]) {
            if self.projected.last() != Some(&status.state) {
                self.projected.push(status.state);
            }
        }
    }
}

fn plan() -> PlanReceipt {
    serde_json::from_value(serde_json::json!({
        "adds": [{ "name": "api", "kind": "Deployment" }],
        "changes": [],
        "deletes": [],
        "inputsHash": "sha256:plan",
        "programVersion": "v1",
    }))
    .unwrap()
}

fn decision(script: &Script) -> PolicyDecision {
    PolicyDecision {
        allow: script.allow,
        deny: script.deny.clone(),
        policy_id: "stand-in".into(),
        version: "1".into(),
        input_hash: "sha256:input".into(),
        decided_at: Utc::now(),
    }
}

fn held_lease() -> LeaseAnswer {
    LeaseAnswer::Ask {
        quota: QuotaInForce {
            limits: QuotaLimits::default(),
            source: "default".into(),
        },
        pool_id: None,
        taken: Some(LockAnswer {
            holds: true,
            recheck_secs: 1,
        }),
    }
}

fn spent() -> ClaimOutcome {
    ClaimOutcome::Spent {
        approval: Box::new(RecordedApproval {
            approval_id: "a1".into(),
            tenant_id: "acme".into(),
            environment_id: "prod".into(),
            class: EnvironmentClass::Production,
            decision: ApprovalDecision::Approve,
            granted_by: "alice".into(),
            granted_by_roles: vec!["Approver".into()],
            reason: "ship it".into(),
            inputs_hash: Some("sha256:plan".into()),
            promotion_id: None,
            source: ApprovalSource::Operator,
            decided_at: Utc::now(),
            expires_at: Utc::now() + chrono::Duration::hours(1),
            spent_by_run_id: None,
            spent_at: None,
        }),
    }
}

fn input(class: EnvironmentClass) -> RunInput {
    serde_json::from_value(serde_json::json!({
        "runId": uuid::Uuid::now_v7().to_string(),
        "tenantId": "acme",
        "projectId": "shop",
        "environmentId": "prod",
        "environmentClass": class,
        "kind": "baseline",
        "promotionId": null,
        "approvalId": null,
        "specification": {
            "specificationId": "s1", "version": 1, "programRef": "git://x", "programVersion": "v1",
            "configRefs": {}, "secretRefs": {}, "workloads": [],
        },
        "approvalTimeoutSecs": 600,
        "applyTimeoutSecs": 60,
    }))
    .unwrap()
}

fn approval(decision: ApprovalDecision) -> Approval {
    Approval {
        decision,
        approver: "alice".into(),
        reason: "looked at it".into(),
        inputs_hash: "sha256:plan".into(),
        approval_id: Some("a1".into()),
    }
}

/// Runs the workflow with `input` against stand-ins answering `script`; `meanwhile` is given
/// the run's handle and what the stand-ins saw so far, to signal it.
async fn run<F, Fut>(script: Script, input: RunInput, meanwhile: F) -> (RunStatus, Seen)
where
    F: FnOnce(Run, Arc<Mutex<Seen>>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let address = std::env::var("RC_TEST_TEMPORAL_ADDRESS").unwrap_or_else(|_| {
        panic!("RC_TEST_TEMPORAL_ADDRESS is not set: run the tests with ./scripts/test, which starts a Temporal dev server")
    });
    let client = runtime_cloud_temporal::connect(&address, "default")
        .await
        .unwrap();
    let task_queue = format!("provisioning-run-test-{}", uuid::Uuid::now_v7());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stand_ins = StandIns {
        script,
        seen: seen.clone(),
    };
    let runtime = Runtime::from_current_tokio(Default::default()).unwrap();
    let options = WorkerOptions::new(task_queue.clone())
        .register_workflow::<ProvisioningRun>()
        .unwrap()
        .register_activities(stand_ins)
        .build();
    let mut worker = Worker::new(&runtime, client.clone(), options).unwrap();
    let stop = worker.shutdown_handle();
    let workflow_id = format!("provisioning-run/{}", input.run_id);
    let test = async {
        let opts = WorkflowStartOptions::new(task_queue.clone(), workflow_id.clone()).build();
        let handle = client
            .start_workflow(ProvisioningRun::run, input, opts)
            .await
            .unwrap();
        meanwhile(client.get_workflow_handle(workflow_id), seen.clone()).await;
        let status = tokio::time::timeout(
            Duration::from_secs(60),
            handle.get_result(WorkflowGetResultOptions::default()),
        )
        .await
        .expect("the run ends within a minute")
        .unwrap();
        stop();
        status
    };
    let (status, worker) = tokio::join!(test, worker.run());
    worker.unwrap();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (status, seen)
}

/// Waits until the stand-ins saw what `seen` checks (the run got there).
async fn until(stand_ins: &Mutex<Seen>, what: &str, seen: impl Fn(&Seen) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen(&stand_ins.lock().unwrap()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends the run signal `$signal` with `$payload`.
macro_rules! signal {
    ($run:expr, $signal:expr, $payload:expr) => {
        $run.signal($signal, $payload, WorkflowSignalOptions::default())
            .await
            .unwrap()
    };
}

/// Sends the run update `$update` with `$payload`: `Ok`, or the validator's refusal.
macro_rules! update {
    ($run:expr, $update:expr, $payload:expr) => {
        match $run
            .execute_update($update, $payload, WorkflowExecuteUpdateOptions::default())
            .await
        {
            Ok(()) => Ok(()),
            Err(WorkflowUpdateError::Failed(refusal)) => Err(refusal.message),
            Err(e) => panic!("the update was neither taken nor refused: {e}"),
        }
    };
}

/// The run's id (its workflow's id is `provisioning-run/{id}`).
fn run_id(run: &Run) -> String {
    let workflow_id = &run.info().workflow_id;
    workflow_id
        .trim_start_matches("provisioning-run/")
        .to_owned()
}

/// Until the run has projected `state`.
async fn until_projected(seen: &Mutex<Seen>, state: ProvisioningState) {
    until(seen, &format!("projected {state:?}"), |s| {
        s.projected.contains(&Some(state))
    })
    .await;
}

/// Once the run awaits approval, an operator's `decision` on its plan.
async fn decide_when_awaited(run: &Run, seen: &Mutex<Seen>, decision: ApprovalDecision) {
    until(seen, "awaited approval", |s| {
        s.projected
            .contains(&Some(ProvisioningState::AwaitingApproval))
    })
    .await;
    signal!(run, ProvisioningRun::approval, approval(decision));
}

/// An operator's cancel.
fn cancel(by: &str, reason: &str) -> CancelRequest {
    CancelRequest {
        by: by.into(),
        reason: reason.into(),
    }
}

use ProvisioningState::*;

fn ended(status: &RunStatus, state: ProvisioningState, reason: Option<&str>) {
    assert_eq!(status.state, Some(state), "{status:?}");
    match reason {
        Some(reason) => assert!(
            status
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains(reason),
            "{status:?}"
        ),
        None => assert_eq!(status.reason, None, "{status:?}"),
    }
}

#[tokio::test]
async fn a_non_production_run_plans_and_applies() {
    let (status, seen) = run(
        Script::default(),
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(&status, Applied, None);
    assert_eq!(
        seen.projected,
        [Some(Planned), Some(Applying), Some(Applied)]
    );
    assert!(status.apply_receipt.is_some());
    assert_eq!(seen.claims, 0, "no approval outside production");
}

#[tokio::test]
async fn a_plan_that_fails_ends_the_run_failed_unapplied() {
    let script = Script {
        plan: Err("the program does not build".into()),
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(&status, Failed, Some("the program does not build"));
    assert_eq!(seen.applies, 0);
    assert_eq!(seen.projected, [Some(Failed)]);
}

#[tokio::test]
async fn a_policy_deny_rejects_the_planned_run() {
    let script = Script {
        deny: vec!["no deletes on Fridays".into()],
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(
        &status,
        Rejected,
        Some("denied by policy: no deletes on Fridays"),
    );
    assert_eq!(seen.projected, [Some(Planned), Some(Rejected)]);
    assert_eq!(seen.applies, 0);
}

#[tokio::test]
async fn an_apply_that_fails_ends_the_run_failed() {
    let script = Script {
        apply: ApplyResult::Failed,
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(&status, Failed, Some("boom"));
    assert_eq!(
        seen.projected,
        [Some(Planned), Some(Applying), Some(Failed)]
    );
}

#[tokio::test]
async fn a_production_run_awaits_an_approval_that_verifies_then_applies() {
    let (status, seen) = run(
        Script::default(),
        input(EnvironmentClass::Production),
        |h, s| async move {
            decide_when_awaited(&h, &s, ApprovalDecision::Approve).await;
        },
    )
    .await;
    ended(&status, Applied, None);
    assert_eq!(
        seen.projected,
        [
            Some(Planned),
            Some(AwaitingApproval),
            Some(Applying),
            Some(Applied)
        ]
    );
    assert_eq!(seen.claims, 1, "the approval is spent on the run");
    let granted = status.approval.expect("the approval is recorded");
    let decision = granted.decision.expect("granted by a decision");
    assert_eq!(decision.approver, "alice");
}

#[tokio::test]
async fn an_approval_that_does_not_verify_is_refused_and_the_run_waits_on() {
    let script = Script {
        claim: ClaimOutcome::Refused {
            why: RefusalReason::NotRecorded,
        },
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::Production),
        |h, s| async move {
            decide_when_awaited(&h, &s, ApprovalDecision::Approve).await;
            until(&s, "claimed the approval", |seen| seen.claims == 1).await;
            signal!(h, ProvisioningRun::cancel, cancel("bob", "not today"));
        },
    )
    .await;
    ended(&status, Cancelled, Some("cancelled by bob: not today"));
    assert_eq!(status.refused_approvals.len(), 1, "{status:?}");
    assert_eq!(seen.applies, 0);
}

#[tokio::test]
async fn a_rejection_ends_the_production_run_rejected() {
    let (status, seen) = run(
        Script::default(),
        input(EnvironmentClass::Production),
        |h, s| async move {
            decide_when_awaited(&h, &s, ApprovalDecision::Reject).await;
        },
    )
    .await;
    ended(&status, Rejected, Some("rejected by alice"));
    assert_eq!(
        seen.projected,
        [Some(Planned), Some(AwaitingApproval), Some(Rejected)]
    );
    assert_eq!((seen.claims, seen.applies), (0, 0));
}

#[tokio::test]
async fn an_approval_that_never_comes_expires() {
    let mut input = input(EnvironmentClass::Production);
    input.approval_timeout_secs = 1;
    let (status, _) = run(Script::default(), input, |_, _| async {}).await;
    ended(&status, Rejected, Some("approval expired"));
}

#[tokio::test]
async fn an_approval_sent_before_the_run_awaits_it_is_held_and_counted() {
    let (status, seen) = run(
        Script::default(),
        input(EnvironmentClass::Production),
        |h, _| async move {
            // Sent at once: the run has not planned yet.
            signal!(
                h,
                ProvisioningRun::approval,
                approval(ApprovalDecision::Approve)
            );
        },
    )
    .await;
    ended(&status, Applied, None);
    assert_eq!(seen.claims, 1);
    assert!(status.refused_approvals.is_empty(), "{status:?}");
}

#[tokio::test]
async fn a_closed_window_holds_the_apply_until_an_operator_breaks_glass() {
    let closed = Gate::Closed {
        window_id: "w1".into(),
        opens_at: Some(Utc::now() + chrono::Duration::hours(8)),
    };
    let script = Script {
        gates: vec![closed],
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |h, s| async move {
            until(&s, "waited for its window", |seen| {
                !seen.projected.is_empty()
            })
            .await;
            let glass = BreakGlass {
                by: "carol".into(),
                reason: "outage".into(),
                window_id: None,
                at: None,
            };
            signal!(h, ProvisioningRun::break_glass, glass);
        },
    )
    .await;
    ended(&status, Applied, None);
    let glass = status.break_glass.expect("the break-glass is recorded");
    assert_eq!(glass.window_id.as_deref(), Some("w1"));
    assert_eq!(seen.applies, 1);
}

#[tokio::test]
async fn a_window_that_opens_lets_the_run_apply() {
    let closed = Gate::Closed {
        window_id: "w1".into(),
        opens_at: Some(Utc::now() + chrono::Duration::seconds(1)),
    };
    let script = Script {
        gates: vec![closed, Gate::Open],
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(&status, Applied, None);
    assert!(status.waiting_for_window.is_none(), "{status:?}");
    assert_eq!(seen.window_looks, 1, "looked again once the window opened");
}

/// A gate read as closed until a time already past (read before the run looked, on another
/// clock) is looked at again at once, not after the five-minute recheck.
#[tokio::test]
async fn a_window_said_to_open_in_the_past_is_looked_at_again_at_once() {
    let closed = Gate::Closed {
        window_id: "w1".into(),
        opens_at: Some(Utc::now() - chrono::Duration::minutes(1)),
    };
    let script = Script {
        gates: vec![closed, Gate::Open],
        ..Script::default()
    };
    let started = std::time::Instant::now();
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(&status, Applied, None);
    assert_eq!(seen.window_looks, 1);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_run_cancelled_while_waiting_for_its_environment_ends_unplanned() {
    let script = Script {
        lock_free: false,
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |h, _| async move {
            signal!(h, ProvisioningRun::cancel, cancel("bob", "queued too long"));
        },
    )
    .await;
    ended(
        &status,
        Cancelled,
        Some("cancelled by bob: queued too long"),
    );
    assert_eq!(status.plan_receipt, None, "never planned");
    assert_eq!(seen.projected, [Some(Cancelled)]);
}

#[tokio::test]
async fn a_project_out_of_minutes_rejects_the_run_unplanned() {
    let script = Script {
        lease: LeaseAnswer::Refused {
            reason: "project shop spent its 600 execution minutes today".into(),
        },
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |_, _| async {},
    )
    .await;
    ended(&status, Rejected, Some("execution minutes"));
    assert_eq!(status.plan_receipt, None);
    assert_eq!(seen.projected, [Some(Rejected)]);
}

#[tokio::test]
async fn a_policy_allow_opens_the_production_gate_for_a_baseline_that_deletes_nothing() {
    let script = Script {
        allow: true,
        ..Script::default()
    };
    let (status, seen) = run(script, input(EnvironmentClass::Production), |_, _| async {}).await;
    ended(&status, Applied, None);
    assert_eq!(seen.claims, 0, "no approval was asked for");
    let approval = status.approval.expect("the gate records what opened it");
    assert!(approval.policy.is_some(), "{approval:?}");
    assert_eq!(
        seen.projected,
        [Some(Planned), Some(Applying), Some(Applied)]
    );
}

#[tokio::test]
async fn the_decide_update_is_refused_to_its_caller_until_it_counts() {
    let mut other_plan = approval(ApprovalDecision::Approve);
    other_plan.inputs_hash = "sha256:another".into();
    let (status, seen) = run(
        Script::default(),
        input(EnvironmentClass::Production),
        |h, s| async move {
            // Sent at once: refused, not held.
            let early = update!(
                h,
                ProvisioningRun::decide,
                approval(ApprovalDecision::Approve)
            );
            let early = early.expect_err("refused before the run awaits approval");
            assert!(
                early.starts_with(&format!("run `{}` is ", run_id(&h))),
                "{early}"
            );
            assert!(early.ends_with(", not AwaitingApproval"), "{early}");
            until_projected(&s, AwaitingApproval).await;
            assert_eq!(
                update!(h, ProvisioningRun::decide, other_plan),
                Err(
                    "the approval names plan sha256:another but the run's plan is sha256:plan; \
                     review the current plan"
                        .into()
                )
            );
            let decided = approval(ApprovalDecision::Approve);
            assert_eq!(update!(h, ProvisioningRun::decide, decided.clone()), Ok(()));
            // The same decision told again (the API's signal after an update no worker
            // answered in time) counts once.
            signal!(h, ProvisioningRun::approval, decided);
        },
    )
    .await;
    ended(&status, Applied, None);
    assert_eq!((seen.claims, seen.applies), (1, 1));
    assert!(
        status.refused_approvals.is_empty(),
        "what the validator refused leaves nothing on the run: {status:?}"
    );
}

#[tokio::test]
async fn cancel_and_break_glass_updates_are_refused_once_the_apply_started() {
    let held = Arc::new(tokio::sync::Notify::new());
    let script = Script {
        apply_held: Some(held.clone()),
        ..Script::default()
    };
    let (status, seen) = run(
        script,
        input(EnvironmentClass::NonProduction),
        |h, s| async move {
            until(&s, "applied", |seen| seen.applies == 1).await;
            assert_eq!(
                update!(
                    h,
                    ProvisioningRun::request_cancel,
                    cancel("bob", "too late")
                ),
                Err(format!(
                    "run `{}` is Applying and can no longer be cancelled",
                    run_id(&h)
                ))
            );
            let glass = BreakGlass {
                by: "carol".into(),
                reason: "outage".into(),
                window_id: None,
                at: None,
            };
            assert_eq!(
                update!(h, ProvisioningRun::request_break_glass, glass),
                Err(format!(
                    "run `{}` is Applying and no longer waits for a window",
                    run_id(&h)
                ))
            );
            held.notify_one();
        },
    )
    .await;
    ended(&status, Applied, None);
    assert_eq!(seen.applies, 1);
    assert_eq!(status.break_glass, None);
}

#[tokio::test]
async fn a_cancel_update_ends_a_run_awaiting_approval() {
    let (status, seen) = run(
        Script::default(),
        input(EnvironmentClass::Production),
        |h, s| async move {
            until_projected(&s, AwaitingApproval).await;
            let request = cancel("bob", "not today");
            assert_eq!(update!(h, ProvisioningRun::request_cancel, request), Ok(()));
        },
    )
    .await;
    ended(&status, Cancelled, Some("cancelled by bob: not today"));
    assert_eq!((seen.claims, seen.applies), (0, 0));
}
