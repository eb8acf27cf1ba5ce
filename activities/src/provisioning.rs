//! The provisioning activities behind [`ProvisioningActivities`]'s contracts.

use crate::error::{Error, activity_error, store_failed};
use crate::ports::Artifacts;
use crate::ports::{Approvals, Plan, Runner, Target};
use crate::semaphores::{Semaphores, letting};
use crate::step_log::StepLog;
use runtime_cloud_models::approvals::{ApprovalClaim, ClaimOutcome};
use runtime_cloud_models::artifacts;
use runtime_cloud_models::{ApplyReceipt, PlanReceipt, RunInput};
use runtime_cloud_store::runs;
use runtime_cloud_workflows::contracts::{
    ApplyRequest, DecideOnPlan, Finish, Gate, LockAnswer, LockRequest, PlanDecisions, PlanRequest,
    PolicyDecision, PolicyInput, RecordOutcome, RunProjection, WindowQuery,
    provisioning_markers as markers,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::Instrument as _;

/// Dependencies of the provisioning activities.
pub struct ProvisioningActivitiesImpl {
    /// The read DB the projections write to.
    pub db: DatabaseConnection,
    /// The runner that plans and applies.
    pub runner: Arc<dyn Runner>,
    /// Verifies and spends the approvals of production applies.
    pub approvals: Arc<dyn Approvals>,
    /// Decides on every plan before it applies.
    pub policy: Arc<dyn crate::ports::Policy>,
    /// Judge each plan's resources by the posture rules (`RUNTIME_CLOUD_POSTURE_FINDINGS`).
    pub posture: bool,
    /// Keeps every plan's and apply's log.
    pub artifacts: Artifacts,
    /// The environments' locks and the projects' capacity.
    pub semaphores: Semaphores,
    /// Observes an environment after its run let it go; none in a pool's worker, which runs
    /// only plans and applies.
    pub inventory: Option<Arc<crate::inventory::InventoryActivitiesImpl>>,
}

fn target(
    tenant_id: &str,
    environment_id: &str,
    limits: Option<runtime_cloud_models::capacity::ProcessLimits>,
) -> Target {
    Target {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        limits,
    }
}

impl ProvisioningActivitiesImpl {
    /// Keeps a step's log as the run's artifact of `phase`, with the error the step ended in.
    /// A log that cannot be kept fails the step (retried): a run's logs are part of its record.
    async fn keep_log(
        &self,
        tenant_id: &str,
        run_id: &str,
        phase: &str,
        log: StepLog,
        failed: Option<&Error>,
    ) -> Result<(), ActivityError> {
        if let Some(e) = failed {
            log.line(format!("failed: {e}"));
        }
        let key = artifacts::run_log(tenant_id, run_id, phase);
        crate::ports::keep(&self.artifacts, &key, log.finish().into_bytes())
            .await
            .map_err(activity_error)
    }
}

/// How long an apply may run before it is stopped: until shortly before the attempt's
/// deadline (`ApplyTimeoutMinutes`), leaving a quarter of the time, at most a minute, to stop
/// it, release the target (`pulumi cancel`) and keep the log. (A tenth, at most 10 s, was too
/// little on a loaded machine: the deadline passed while the stack was being released.)
fn stop_before(deadline: Option<std::time::SystemTime>) -> Duration {
    // No deadline: the worker was started without one; a day bounds it anyway. A deadline
    // already past leaves nothing.
    let left = match deadline {
        Some(d) => d
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
        None => Duration::from_secs(24 * 3600),
    };
    left.saturating_sub((left / 4).min(Duration::from_secs(60)))
}

/// How long the observation after a run may take: until shortly before the finish's deadline,
/// which must not pass (the finish is retried then, and its record is already written),
/// leaving it a tenth of the time, at least a second; a deadline two minutes away when the
/// attempt has none.
fn observe_within(deadline: Option<std::time::SystemTime>) -> Duration {
    let left = match deadline {
        Some(d) => d
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
        None => Duration::from_secs(120),
    };
    left.saturating_sub((left / 10).max(Duration::from_secs(1)))
}

/// How often a plan or an apply heartbeats.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

/// A plan's or an apply's heartbeat clock: the first beat one period in, not at once. A step
/// that ends within it (a sandbox's, most plans) sends none: a heartbeat is a call to Temporal
/// and a write on its server, and one at the start of every plan and apply was two of each a
/// run for nothing (the worker was not lost yet). The heartbeat timeout (10 s) is five periods.
fn heartbeats() -> tokio::time::Interval {
    tokio::time::interval_at(
        tokio::time::Instant::now() + HEARTBEAT_EVERY,
        HEARTBEAT_EVERY,
    )
}

/// What an apply's heartbeat carries: whose apply it is and, once the runner reports it, how
/// many of the plan's resources are done (`temporal workflow describe` shows it under the
/// pending activity's heartbeat details).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ApplyHeartbeat {
    run_id: String,
    #[serde(flatten)]
    progress: Option<crate::step_log::Progress>,
}

#[activities]
impl ProvisioningActivitiesImpl {
    /// Takes a slot of a semaphore, or queues for one ([`Semaphores::acquire`]).
    #[activity(definition = markers::AcquireLock)]
    pub async fn acquire_lock(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: LockRequest,
    ) -> Result<LockAnswer, ActivityError> {
        let span = tracing::info_span!("acquire_lock", workflow_id = %req.requester_workflow_id);
        self.semaphores.acquire(&req).instrument(span).await
    }

    /// After an apply (or a failed one), reads the environment's target while the run still
    /// holds it, within the attempt's time ([`observe_within`]); then, in one write transaction
    /// ([`runtime_cloud_transactions::end_run`]), lets the run's capacity go, records its ending and what the target
    /// showed, and lets its environment go ([`Finish`]).
    #[activity(definition = markers::Finish)]
    pub async fn finish(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: Finish,
    ) -> Result<Option<RecordOutcome>, ActivityError> {
        let run = &req.projection.run;
        let span = tracing::info_span!("finish", run_id = %run.run_id, state = ?req.projection.status.state);
        async move {
            // The run ended now, before the observation after it is read: its `completedAt`
            // is older than that observation (a rollout counts it as the apply's).
            let ended_at = chrono::Utc::now();
            let inventory = self.inventory.as_deref();
            let observed = match (req.observe, inventory) {
                (Some(observe), Some(inventory)) => {
                    let within = observe_within(ctx.info().deadline);
                    let read = tokio::time::timeout(within, inventory.read_for_record(observe));
                    match read.await {
                        Ok(read) => Some(read),
                        Err(_) => {
                            tracing::warn!(
                                "the observation after the run took over {within:?}; given up"
                            );
                            None
                        }
                    }
                }
                _ => None,
            };
            // One transaction; the waiters it promoted are told once it committed (a retry
            // after a failed signal releases nothing more and tells them again).
            let ended = runtime_cloud_transactions::end_run(
                &self.db,
                run,
                (&req.projection.passed, &req.projection.status),
                ended_at,
                req.capacity.as_ref().map(letting),
                observed
                    .as_ref()
                    .map(|(record, acceptance)| (record, *acceptance)),
                letting(&req.environment),
            )
            .await
            .map_err(store_failed)?;
            if let Some(c) = &req.capacity {
                self.semaphores.released(c, ended.capacity_promoted).await?;
            }
            self.semaphores
                .released(&req.environment, ended.environment_promoted)
                .await?;
            let (Some(outcome), Some((record, _)), Some(inventory)) =
                (ended.observed, &observed, inventory)
            else {
                return Ok(None);
            };
            Ok(Some(inventory.settle_or_hold(record, outcome).await))
        }
        .instrument(span)
        .await
    }

    /// Plans the specification on the environment's target.
    #[activity(definition = markers::Plan)]
    pub async fn plan(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: PlanRequest,
    ) -> Result<PlanReceipt, ActivityError> {
        let span =
            tracing::info_span!("plan", run_id = %req.run_id, environment_id = %req.environment_id);
        async move {
            let log = StepLog::default();
            let target = target(&req.tenant_id, &req.environment_id, req.limits);
            // Heartbeat while the runner plans, so a lost worker is noticed within the
            // heartbeat timeout, not the plan's whole timeout (the plan is read-only: planned
            // again, it changes nothing).
            let plan = {
                let plan = async {
                    if req.destroy {
                        let destroy = self.runner.plan_destroy(&target, &req.specification, &log);
                        destroy.await.map(Plan::from)
                    } else {
                        self.runner.plan(&target, &req.specification, &log).await
                    }
                };
                tokio::pin!(plan);
                let mut beat = heartbeats();
                loop {
                    tokio::select! {
                        plan = &mut plan => break plan,
                        _ = beat.tick() => {
                            let _ = ctx.record_heartbeat(req.run_id.clone()).await;
                        }
                    }
                }
            };
            self.keep_log(
                &req.tenant_id,
                &req.run_id,
                "plan",
                log,
                plan.as_ref().err(),
            )
            .await?;
            let Plan {
                receipt: mut plan,
                resources,
            } = plan.map_err(activity_error)?;
            // What it would cost and which posture rules it would newly break, with the plan
            // wherever it is shown and given to the policies.
            let declared = (!req.destroy).then_some(&req.specification);
            let environment = (req.tenant_id.as_str(), req.environment_id.as_str());
            plan.cost = crate::cost::estimate(&self.db, environment, declared, &plan, &resources)
                .await
                .map_err(activity_error)?;
            if self.posture {
                plan.posture =
                    crate::plan_posture::introduced(self.policy.as_ref(), environment, &resources)
                        .await
                        .map_err(activity_error)?;
            }
            Ok(plan)
        }
        .instrument(span)
        .await
    }

    /// Applies the recorded plan, heartbeating while the runner works.
    #[activity(definition = markers::Apply)]
    pub async fn apply(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: ApplyRequest,
    ) -> Result<ApplyReceipt, ActivityError> {
        let span = tracing::info_span!("apply", run_id = %req.run_id, environment_id = %req.environment_id);
        async move {
            tracing::info!(program_version = %req.plan.program_version, "applying the plan");
            let target = target(&req.tenant_id, &req.environment_id, req.limits);
            let log = StepLog::default();
            let started = std::time::Instant::now();
            let budget = stop_before(ctx.info().deadline);
            let receipt = {
                let (run_id, spec, plan) = (&req.run_id, &req.specification, &req.plan);
                let apply = if req.destroy {
                    self.runner.destroy(run_id, &target, spec, plan, &log)
                } else {
                    self.runner.apply(run_id, &target, spec, plan, &log)
                };
                tokio::pin!(apply);
                let out_of_time = tokio::time::sleep(budget);
                tokio::pin!(out_of_time);
                // Heartbeat while the runner works, so a lost worker is noticed within the
                // heartbeat timeout instead of the whole ApplyTimeoutMinutes.
                let mut beat = heartbeats();
                loop {
                    tokio::select! {
                        receipt = &mut apply => break Some(receipt),
                        _ = beat.tick() => {
                            let beat = ApplyHeartbeat {
                                run_id: req.run_id.clone(),
                                progress: log.current_progress(),
                            };
                            let _ = ctx.record_heartbeat(beat).await;
                        }
                        _ = &mut out_of_time => break None,
                    }
                }
            };
            // Out of time: the runner's work was dropped (its process killed); the target is
            // left usable and the run fails with the reason, never retried.
            let receipt = match receipt {
                Some(receipt) => receipt,
                None => {
                    let reason = format!(
                        "the apply did not finish within ApplyTimeoutMinutes ({} s); it was \
                         stopped and the target released",
                        started.elapsed().as_secs()
                    );
                    log.line(&reason);
                    if let Err(e) = self.runner.abandon(&target, &log).await {
                        log.line(format!("releasing the target failed: {e}"));
                    }
                    Ok(ApplyReceipt {
                        outputs: serde_json::Value::Null,
                        duration_ms: started.elapsed().as_millis() as u64,
                        result: runtime_cloud_models::ApplyResult::Failed,
                        runner_version: String::new(),
                        reason: Some(reason),
                    })
                }
            };
            self.keep_log(
                &req.tenant_id,
                &req.run_id,
                "apply",
                log,
                receipt.as_ref().err(),
            )
            .await?;
            receipt.map_err(activity_error)
        }
        .instrument(span)
        .await
    }

    /// Verifies the run's claim on an approval and spends it (the Approvals port).
    #[activity(definition = markers::ClaimApproval)]
    pub async fn claim_approval(
        self: Arc<Self>,
        _ctx: ActivityContext,
        claim: ApprovalClaim,
    ) -> Result<ClaimOutcome, ActivityError> {
        let span = tracing::info_span!("claim_approval", run_id = %claim.run_id, approval_id = %claim.approval_id);
        async move {
            let outcome = self.approvals.claim(&claim).await.map_err(activity_error)?;
            if let ClaimOutcome::Refused { why } = &outcome {
                tracing::warn!(%why, "the approval does not verify");
            }
            Ok(outcome)
        }
        .instrument(span)
        .await
    }

    /// Projects the run's status and its event into the read tables.
    #[activity(definition = markers::Project)]
    pub async fn project(
        self: Arc<Self>,
        _ctx: ActivityContext,
        p: RunProjection,
    ) -> Result<(), ActivityError> {
        let span =
            tracing::info_span!("project_run", run_id = %p.run.run_id, state = ?p.status.state);
        async move {
            runs::project(&self.db, &p.run, &p.passed, &p.status)
                .await
                .map_err(store_failed)?;
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// The policies' decision on a plan, with the environment's last observed workloads.
    #[activity(definition = markers::EvaluatePolicy)]
    pub async fn evaluate_policy(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PolicyInput,
    ) -> Result<PolicyDecision, ActivityError> {
        self.policy_decision(input).await
    }

    /// The gate the environment's change windows make at the asked time.
    #[activity(definition = markers::ChangeWindow)]
    pub async fn change_window(
        self: Arc<Self>,
        _ctx: ActivityContext,
        q: WindowQuery,
    ) -> Result<Gate, ActivityError> {
        self.window_gate(&q).await
    }

    /// Why the tenant's quarantines hold the run's specification now, if they do.
    #[activity(definition = markers::QuarantineGate)]
    pub async fn quarantine_gate(
        self: Arc<Self>,
        _ctx: ActivityContext,
        run: RunInput,
    ) -> Result<Option<String>, ActivityError> {
        let in_force = runtime_cloud_store::quarantines::in_force(&self.db, &run.tenant_id)
            .await
            .map_err(store_failed)?;
        Ok(runtime_cloud_models::quarantine::gate(
            run.kind,
            &run.specification,
            &in_force,
            run.quarantine_override.as_ref(),
        ))
    }

    /// The policies' decision and the change windows' gate, both read at once.
    #[activity(definition = markers::DecideOnPlan)]
    pub async fn decide_on_plan(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: DecideOnPlan,
    ) -> Result<PlanDecisions, ActivityError> {
        let (policy, window) = futures::try_join!(
            self.policy_decision(req.policy),
            self.window_gate(&req.window)
        )?;
        Ok(PlanDecisions { policy, window })
    }
}

impl ProvisioningActivitiesImpl {
    /// The policies' decision on `input`, which is given the environment's last observed
    /// workloads.
    async fn policy_decision(
        &self,
        mut input: PolicyInput,
    ) -> Result<PolicyDecision, ActivityError> {
        let span = tracing::info_span!("evaluate_policy", run_id = %input.run.run_id);
        async move {
            let observed = runtime_cloud_store::inventory::find(
                &self.db,
                &input.tenant_id,
                &input.environment.environment_id,
            )
            .await
            .map_err(store_failed)?;
            input.observed = observed.map(|i| i.workloads).unwrap_or_default();
            let mut decision = self.policy.evaluate(&input).await.map_err(activity_error)?;
            // Quarantined versions are refused with the policies' denials: one decision, on
            // every path a run takes (API, event, schedule, proposal, rollout).
            let quarantined =
                runtime_cloud_store::quarantines::in_force(&self.db, &input.tenant_id)
                    .await
                    .map_err(store_failed)?;
            if let Some(why) = runtime_cloud_models::quarantine::gate(
                input.run.kind,
                &input.specification,
                &quarantined,
                input.run.quarantine_override.as_ref(),
            ) {
                decision.deny.push(why);
            }
            if !decision.deny.is_empty() {
                tracing::warn!(deny = ?decision.deny, "the policies deny the plan");
            }
            Ok(decision)
        }
        .instrument(span)
        .await
    }

    /// The gate the environment's change windows make at `q.at`.
    async fn window_gate(&self, q: &WindowQuery) -> Result<Gate, ActivityError> {
        let windows =
            runtime_cloud_store::windows::applying(&self.db, &q.tenant_id, &q.environment_id)
                .await
                .map_err(store_failed)?;
        Ok(runtime_cloud_models::windows::gate(&windows, q.at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    /// The runner stops an apply early enough to release the target before Temporal's
    /// deadline: a quarter of the time left, at most a minute.
    #[test]
    fn an_apply_is_stopped_a_quarter_before_its_deadline_at_most_a_minute() {
        let at = |secs| Some(SystemTime::now() + Duration::from_secs(secs));
        let stop = stop_before(at(12));
        assert!(
            stop <= Duration::from_secs(9) && stop > Duration::from_secs(8),
            "{stop:?}"
        );
        let stop = stop_before(at(45 * 60));
        assert!(stop <= Duration::from_secs(44 * 60), "{stop:?}");
        assert!(stop > Duration::from_secs(44 * 60 - 2), "{stop:?}");
        assert_eq!(stop_before(Some(SystemTime::UNIX_EPOCH)), Duration::ZERO);
    }

    /// The observation after a run ends before its finish's deadline: a tenth of the time
    /// left, at least a second, is kept for the rest; nothing when the deadline has passed.
    #[test]
    fn the_observation_after_a_run_ends_before_its_deadline() {
        let at = |secs| Some(SystemTime::now() + Duration::from_secs(secs));
        let within = observe_within(at(150));
        assert!(
            within <= Duration::from_secs(135) && within > Duration::from_secs(133),
            "{within:?}"
        );
        let within = observe_within(at(5));
        assert!(within <= Duration::from_secs(4), "{within:?}");
        assert_eq!(observe_within(Some(SystemTime::UNIX_EPOCH)), Duration::ZERO);
        assert_eq!(observe_within(None), Duration::from_secs(108));
    }
}
