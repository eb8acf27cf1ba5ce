//! `fleet-rollout/{rolloutId}`: many instances moved to a release, wave by wave, halting on
//! its own (`models::rollouts` holds the rules).
//!
//! ```text
//! Running ─ wave: start every instance's promotion run ─ until converged (as observed after
//!           the apply) ─ bake ─ next wave … ─▶ Completed
//!    │  a guard trips (failure budget, deadline, SLO breach) ─▶ Halted (incident opened)
//!    │                               resume ─▶ the wave again │ skip <instance> │ abort ─▶ Aborted
//!    │                               roll back ─▶ RollingBack: the release's versions
//!    │                                            quarantined, every started instance run back
//!    │                                            to its previous specification ─▶ RolledBack
//! ```
//!
//! Each instance's run is a `ProvisioningRun` workflow of its own, recorded and started by one
//! activity (a run in flight is never cut off by the rollout's end, and the run's input stays
//! out of the rollout's history: a rollout over thousands of instances keeps a short one); the
//! rollout reads where the runs and the observations stand with an activity, every few seconds. SLO breaches arrive as the `breach` signal (the API's breach
//! call), or — for a rollout with an SLO query — from the query, read as often while a wave
//! converges and bakes.

use crate::contracts::{
    FleetActivities, HaltIncident, PrepareInstance, PrepareRollback, ProgressRequest,
    QuarantineRelease, RolloutInput, RolloutProjection, RolloutStatus, SloCheck, SloReading,
};
use crate::search_attributes::{ROLLOUT_STATE, TENANT_ID};
use runtime_cloud_models::fleet::IncidentSource;
use runtime_cloud_models::rollouts::{
    Guard, Halt, RolloutState, SLO_ERRORS_TOLERATED, WaveVerdict, wave_verdict,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};

/// Each attempt of the rollout's writes and reads.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a wave looks at its instances.
const POLL: Duration = Duration::from_secs(2);

/// An operator's command to a halted rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "command")]
pub enum Command {
    /// Try the halted wave again (its deadline starts anew).
    Resume,
    /// Leave this instance out of the rollout, and go on with the wave.
    Skip { environment_id: String },
    /// End the rollout where it is.
    Abort,
    /// Run every instance the rollout started back to the specification it ran before.
    RollBack,
}

/// The FleetRollout workflow.
#[workflow]
pub struct FleetRollout {
    input: RolloutInput,
    status: RolloutStatus,
    /// An SLO breach reported (the embedded SloGuard: the API's breach call).
    breach: Option<String>,
    /// The SLO query's failures in a row.
    slo_errors: u32,
    commands: Vec<Command>,
}

#[workflow_methods]
impl FleetRollout {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: RolloutInput) -> Self {
        let status = RolloutStatus::start(&input.waves);
        Self {
            input,
            status,
            breach: None,
            slo_errors: 0,
            commands: Vec::new(),
        }
    }

    /// Every wave in order, then `Completed` (or `Aborted`).
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<RolloutState> {
        let input = ctx.state(|s| s.input.clone());
        ctx.upsert_search_attributes([
            TENANT_ID.value_set(input.tenant_id.clone()),
            ROLLOUT_STATE.value_set(RolloutState::Running.as_str().to_owned()),
        ]);
        for wave in 0..input.waves.len() {
            ctx.state_mut(|s| s.status.current_wave = wave);
            Self::start_wave(ctx, &input, wave).await?;
            if let Some(end) = Self::follow_wave(ctx, &input, wave).await? {
                return Self::settle(ctx, end).await;
            }
            ctx.state_mut(|s| s.status.waves_completed = wave + 1);
            Self::project(ctx).await?;
        }
        Self::settle(ctx, RolloutState::Completed).await
    }

    /// Starts the promotion run of every instance of the wave not started (or skipped) yet.
    async fn start_wave(
        ctx: &mut WorkflowContext<Self>,
        input: &RolloutInput,
        wave: usize,
    ) -> WorkflowResult<()> {
        let members: Vec<String> = ctx.state(|s| {
            s.status
                .instances
                .iter()
                .filter(|i| i.wave == wave && !i.skipped && i.provisioning_run_id.is_none())
                .map(|i| i.environment_id.clone())
                .collect()
        });
        for environment_id in members {
            let run_id = crate::ids::time_ordered_id(ctx);
            let prepare = PrepareInstance {
                rollout_id: input.rollout_id.clone(),
                environment_id: environment_id.clone(),
                run_id: run_id.clone(),
            };
            ctx.execute_activity(
                FleetActivities::start_instance_run,
                prepare,
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
            ctx.state_mut(|s| {
                if let Some(i) = s
                    .status
                    .instances
                    .iter_mut()
                    .find(|i| i.environment_id == environment_id)
                {
                    i.provisioning_run_id = Some(run_id);
                }
            });
        }
        Self::project(ctx).await
    }

    /// Follows the wave until it converged and baked (`None`), halting on a guard and waiting
    /// for an operator's command; the rollout's end when aborted or rolled back.
    async fn follow_wave(
        ctx: &mut WorkflowContext<Self>,
        input: &RolloutInput,
        wave: usize,
    ) -> WorkflowResult<Option<RolloutState>> {
        let deadline = chrono::Duration::seconds(input.converge_deadline_secs as i64);
        let mut started = now(ctx);
        loop {
            // Only the instances not converged yet are read again: an instance once observed
            // converged after its apply stays so for its wave (the SLO guard watches it still).
            let instances: Vec<(String, String)> = ctx.state(|s| {
                s.status
                    .instances
                    .iter()
                    .filter(|i| i.wave == wave && !i.skipped && !i.converged)
                    .filter_map(|i| {
                        Some((i.environment_id.clone(), i.provisioning_run_id.clone()?))
                    })
                    .collect()
            });
            let progress = ctx
                .execute_activity(
                    FleetActivities::progress,
                    ProgressRequest {
                        rollout_id: input.rollout_id.clone(),
                        tenant_id: input.tenant_id.clone(),
                        instances,
                        versions: input.versions.clone(),
                    },
                    crate::options::must_succeed(STEP_TIMEOUT),
                )
                .await?;
            let newly = ctx.state_mut(|s| {
                let mut newly = 0;
                for p in progress.iter().filter(|p| p.converged) {
                    if let Some(i) = s
                        .status
                        .instances
                        .iter_mut()
                        .find(|i| i.environment_id == p.environment_id)
                    {
                        i.converged = true;
                        newly += 1;
                    }
                }
                newly
            });
            if newly > 0 {
                Self::project(ctx).await?;
            }
            let breach = ctx.state(|s| s.breach.clone());
            let verdict = wave_verdict(
                &progress,
                input.failure_budget,
                breach.as_deref(),
                (started, deadline, now(ctx)),
            );
            let guard = match verdict {
                WaveVerdict::Waiting => match Self::watch(ctx, input, POLL).await? {
                    None => continue,
                    Some(unavailable) => unavailable,
                },
                WaveVerdict::Converged => {
                    // The bake: a breach reported while it lasts halts the wave.
                    let unavailable =
                        Self::watch(ctx, input, Duration::from_secs(input.bake_secs)).await?;
                    match (ctx.state(|s| s.breach.clone()), unavailable) {
                        (Some(reason), _) => Guard::SloBreach { reason },
                        (None, Some(unavailable)) => unavailable,
                        (None, None) => return Ok(None),
                    }
                }
                WaveVerdict::Halt(guard) => guard,
            };
            if let Some(end) = Self::halt(ctx, input, wave, guard).await? {
                return Ok(Some(end));
            }
            started = now(ctx);
        }
    }

    /// Halts on `guard`: the incident, the projection, then the operator's command. `None` to
    /// go on with the wave (resumed, or an instance skipped); the rollout's end when aborted or
    /// rolled back.
    async fn halt(
        ctx: &mut WorkflowContext<Self>,
        input: &RolloutInput,
        wave: usize,
        guard: Guard,
    ) -> WorkflowResult<Option<RolloutState>> {
        let reason = guard.describe();
        let instances = guard.instances();
        let incident = HaltIncident {
            tenant_id: input.tenant_id.clone(),
            rollout_id: input.rollout_id.clone(),
            title: format!(
                "rollout {} halted in wave {}: {reason}",
                input.rollout_id,
                wave + 1
            ),
            environment_id: instances.first().cloned(),
            source: match &guard {
                Guard::SloBreach { .. } => IncidentSource::SloBreach,
                _ => IncidentSource::RolloutHalted,
            },
        };
        let incident_id = ctx
            .execute_activity(
                FleetActivities::open_incident,
                incident,
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
        let at = now(ctx);
        ctx.state_mut(|s| {
            s.status.state = RolloutState::Halted;
            s.status.halt = Some(Halt {
                wave,
                guard,
                reason,
                instances,
                incident_id: Some(incident_id),
                at,
            });
            // The breach is answered by the halt; a new one halts again.
            s.breach = None;
            s.slo_errors = 0;
        });
        ctx.upsert_search_attributes([
            ROLLOUT_STATE.value_set(RolloutState::Halted.as_str().to_owned())
        ]);
        Self::project(ctx).await?;
        ctx.wait_condition(|s| !s.commands.is_empty()).await?;
        let command = ctx.state_mut(|s| s.commands.remove(0));
        match command {
            Command::Abort => return Ok(Some(RolloutState::Aborted)),
            Command::RollBack => {
                let halted_because = ctx.state(|s| {
                    s.status
                        .halt
                        .as_ref()
                        .map(|h| h.reason.clone())
                        .unwrap_or_default()
                });
                Self::roll_back(ctx, input, halted_because).await?;
                return Ok(Some(RolloutState::RolledBack));
            }
            Command::Resume | Command::Skip { .. } => {}
        }
        ctx.state_mut(|s| {
            if let Command::Skip { environment_id } = &command
                && let Some(i) = s
                    .status
                    .instances
                    .iter_mut()
                    .find(|i| &i.environment_id == environment_id)
            {
                i.skipped = true;
            }
            s.status.state = RolloutState::Running;
            s.status.halt = None;
        });
        ctx.upsert_search_attributes([
            ROLLOUT_STATE.value_set(RolloutState::Running.as_str().to_owned())
        ]);
        Self::project(ctx).await?;
        Ok(None)
    }

    /// Quarantines the release's versions, then runs every instance the rollout started (and
    /// did not skip) back to the specification it ran before, and waits until those runs have
    /// ended.
    async fn roll_back(
        ctx: &mut WorkflowContext<Self>,
        input: &RolloutInput,
        halted_because: String,
    ) -> WorkflowResult<()> {
        let release = QuarantineRelease {
            rollout_id: input.rollout_id.clone(),
            halted_because,
        };
        ctx.execute_activity(
            FleetActivities::quarantine_release,
            release,
            crate::options::must_succeed(STEP_TIMEOUT),
        )
        .await?;
        ctx.state_mut(|s| {
            s.status.state = RolloutState::RollingBack;
            s.status.halt = None;
        });
        ctx.upsert_search_attributes([
            ROLLOUT_STATE.value_set(RolloutState::RollingBack.as_str().to_owned())
        ]);
        Self::project(ctx).await?;
        let started: Vec<(String, String)> = ctx.state(|s| {
            s.status
                .instances
                .iter()
                .filter(|i| !i.skipped && i.rollback_run_id.is_none())
                .filter_map(|i| Some((i.environment_id.clone(), i.provisioning_run_id.clone()?)))
                .collect()
        });
        let mut back = Vec::new();
        for (environment_id, rolled_out) in started {
            let run_id = crate::ids::time_ordered_id(ctx);
            let prepare = PrepareRollback {
                rollout_id: input.rollout_id.clone(),
                environment_id: environment_id.clone(),
                rolled_out,
                run_id: run_id.clone(),
            };
            ctx.execute_activity(
                FleetActivities::start_rollback_run,
                prepare,
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
            ctx.state_mut(|s| {
                if let Some(i) = s
                    .status
                    .instances
                    .iter_mut()
                    .find(|i| i.environment_id == environment_id)
                {
                    i.rollback_run_id = Some(run_id.clone());
                }
            });
            back.push((environment_id, run_id));
        }
        Self::project(ctx).await?;
        loop {
            let progress = ctx
                .execute_activity(
                    FleetActivities::progress,
                    ProgressRequest {
                        rollout_id: input.rollout_id.clone(),
                        tenant_id: input.tenant_id.clone(),
                        instances: back.clone(),
                        versions: input.versions.clone(),
                    },
                    crate::options::must_succeed(STEP_TIMEOUT),
                )
                .await?;
            if progress
                .iter()
                .all(|p| p.run_state.is_some_and(|s| s.is_terminal()))
            {
                return Ok(());
            }
            ctx.timer(POLL).await;
        }
    }

    /// Waits `for_`, cut short by a breach. With an SLO query, reads it first and every
    /// [`POLL`] meanwhile: a breach it shows is a breach reported, and the guard
    /// [`Guard::SloUnavailable`] once it failed [`SLO_ERRORS_TOLERATED`] times in a row.
    async fn watch(
        ctx: &mut WorkflowContext<Self>,
        input: &RolloutInput,
        for_: Duration,
    ) -> WorkflowResult<Option<Guard>> {
        let Some(slo) = &input.slo else {
            Self::pause(ctx, for_).await?;
            return Ok(None);
        };
        let end = now(ctx) + chrono::Duration::from_std(for_).unwrap_or_default();
        loop {
            let check = SloCheck {
                slo: slo.clone(),
                query: slo.for_wave(&ctx.state(|s| s.status.moved())),
            };
            let reading = ctx
                .execute_activity(
                    FleetActivities::check_slo,
                    check,
                    crate::options::must_succeed(STEP_TIMEOUT),
                )
                .await?;
            let errors = ctx.state_mut(|s| {
                match reading {
                    SloReading::Met => s.slo_errors = 0,
                    SloReading::Breached { reason } => {
                        s.slo_errors = 0;
                        s.breach.get_or_insert(reason);
                    }
                    SloReading::Unavailable { ref reason } => {
                        s.slo_errors += 1;
                        if s.slo_errors >= SLO_ERRORS_TOLERATED {
                            return Some(reason.clone());
                        }
                    }
                }
                None
            });
            if let Some(reason) = errors {
                return Ok(Some(Guard::SloUnavailable { reason }));
            }
            let left = (end - now(ctx)).to_std().unwrap_or_default();
            if ctx.state(|s| s.breach.is_some()) || left.is_zero() {
                return Ok(None);
            }
            Self::pause(ctx, left.min(POLL)).await?;
        }
    }

    /// Waits `for_`, cut short by a breach.
    async fn pause(ctx: &mut WorkflowContext<Self>, for_: Duration) -> WorkflowResult<()> {
        if for_.is_zero() {
            return Ok(());
        }
        temporalio_sdk::workflows::select! {
            r = ctx.wait_condition(|s| s.breach.is_some()) => { r?; }
            _ = ctx.timer(for_) => {}
        };
        Ok(())
    }

    async fn settle(
        ctx: &mut WorkflowContext<Self>,
        state: RolloutState,
    ) -> WorkflowResult<RolloutState> {
        ctx.state_mut(|s| {
            s.status.state = state;
            if state == RolloutState::Completed {
                s.status.halt = None;
            }
        });
        ctx.upsert_search_attributes([ROLLOUT_STATE.value_set(state.as_str().to_owned())]);
        Self::project(ctx).await?;
        Ok(state)
    }

    async fn project(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let projection = ctx.state(|s| RolloutProjection {
            rollout_id: s.input.rollout_id.clone(),
            status: s.status.clone(),
        });
        ctx.execute_activity(
            FleetActivities::project,
            projection,
            crate::options::must_succeed(STEP_TIMEOUT),
        )
        .await?;
        Ok(())
    }

    /// Signal `breach`: an SLO breach (the embedded SloGuard adapter), with what breached.
    #[signal]
    pub fn breach(&mut self, _ctx: &mut SyncWorkflowContext<Self>, reason: String) {
        if self.breach.is_none() {
            self.breach = Some(reason);
        }
    }

    /// Signal `command`: resume, skip an instance or abort a halted rollout. Commands are kept
    /// in arrival order and taken one per halt: one sent as the rollout halts again (the API
    /// saw the previous halt) answers the new halt.
    #[signal]
    pub fn command(&mut self, _ctx: &mut SyncWorkflowContext<Self>, command: Command) {
        const KEPT: usize = 8;
        if self.commands.len() < KEPT
            && !matches!(
                self.status.state,
                RolloutState::Completed | RolloutState::Aborted | RolloutState::RolledBack
            )
        {
            self.commands.push(command);
        }
    }

    /// Query `status`.
    #[query]
    pub fn status(&self, _ctx: &WorkflowContextView) -> RolloutStatus {
        self.status.clone()
    }
}

/// Workflow time (deterministic).
fn now(ctx: &WorkflowContext<FleetRollout>) -> chrono::DateTime<chrono::Utc> {
    ctx.workflow_time()
        .map(chrono::DateTime::<chrono::Utc>::from)
        .unwrap_or_default()
}
