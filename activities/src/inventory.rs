//! The inventory activities behind [`InventoryActivities`]'s contracts.

use crate::Error;
use crate::error::{activity_error, store_failed};
use crate::ports::{Observer, Policy, Target};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::drift::{Direction, ProposalState};
use runtime_cloud_models::environments::EnvironmentKey;
use runtime_cloud_models::observation::Observation;
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_models::quarantine;
use runtime_cloud_store::{proposals, specifications};
use runtime_cloud_workflows::contracts::inventory_markers as markers;
use runtime_cloud_workflows::contracts::{
    ObservePageRequest, ObserveRequest, PageOutcome, PrepareRunRequest, ProposalProjection,
    RecordOutcome, RecordRequest,
};
use runtime_cloud_workflows::ids::derived_time_ordered_id;
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use std::time::Duration;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::Instrument as _;

/// Dependencies of the inventory activities.
pub struct InventoryActivitiesImpl {
    pub db: DatabaseConnection,
    pub observer: Arc<dyn Observer>,
    pub policy: Arc<dyn Policy>,
    pub inventory: InventoryOptions,
    pub provisioning: ProvisioningOptions,
    /// Starts the workflows of the proposals a sweep's page raises.
    pub client: temporalio_client::Client,
    /// The task queue those workflows run on.
    pub task_queue: String,
}

/// Tries before a target that fails (other than by being unreachable) counts as unreachable.
const READ_ATTEMPTS: u32 = 3;
/// A sweep's page records this many environments per transaction (one commit each).
const RECORD_BATCH: usize = 50;
/// Targets a sweep's page reads at once.
const READS_IN_FLIGHT: usize = 16;
/// Proposal workflows a sweep's page starts (or tells they are superseded) at once.
const STARTS_IN_FLIGHT: usize = 32;

/// How long a page keeps telling a superseded proposal's workflow while Temporal does not
/// answer: a dev server restarts in seconds, and the page heartbeats only between batches
/// (its heartbeat timeout is 30 s).
const SIGNAL_RETRY_FOR: Duration = Duration::from_secs(15);

impl InventoryActivitiesImpl {
    /// One read of the target; an unreachable one is an observation.
    async fn read_target(&self, target: &Target) -> Result<Observation, Error> {
        match self.observer.read(target).await {
            Ok(read) => Ok(Observation::Observed {
                workloads: read.workloads,
                resources: read.resources,
                posture: read.posture,
                resource_types: read.resource_types,
                observed_at: Some(chrono::Utc::now()),
            }),
            Err(e @ Error::Unreachable(_)) => Ok(Observation::Unreachable {
                reason: e.to_string(),
            }),
            Err(e) => Err(e),
        }
    }

    /// [`Self::read_target`] with a few quick retries, then unreachable.
    async fn read_target_with_retries(&self, target: &Target) -> Observation {
        let mut attempt = 1;
        loop {
            match self.read_target(target).await {
                Ok(observation) => return observation,
                Err(e) if attempt >= READ_ATTEMPTS => {
                    return Observation::Unreachable {
                        reason: e.to_string(),
                    };
                }
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)))
                        .await;
                    attempt += 1;
                }
            }
        }
    }

    /// What decides whether the proposal an observation raises is accepted on its own.
    fn acceptance(&self, req: &RecordRequest) -> proposals::Acceptance {
        let observed_at = match &req.observation {
            Observation::Observed { observed_at, .. } => *observed_at,
            Observation::Unreachable { .. } => None,
        };
        proposals::Acceptance {
            option: self
                .inventory
                .auto_accept_non_destructive_outside_production,
            policy_allows: self
                .policy
                .allows_auto_accept(&req.tenant_id, &req.environment_id),
            fresh: !self
                .inventory
                .is_stale(false, observed_at, chrono::Utc::now()),
        }
    }

    /// Reads the environment's target (a few quick tries, then unreachable) and records what
    /// it shows: an operator's observation.
    async fn observe_and_record(&self, req: ObserveRequest) -> Result<RecordOutcome, Error> {
        let (record, acceptance) = self.read_for_record(req).await;
        let outcome =
            runtime_cloud_transactions::record_observation(&self.db, &record, acceptance).await?;
        self.settle_auto_accept(&record, outcome).await
    }

    /// Reads the environment's target (a few quick tries, then unreachable): the record of what
    /// it shows, with what decides whether the proposal it may raise is accepted on its own. A
    /// run's finish records it with the run's ending (`transactions::end_run`), then settles the
    /// proposal ([`Self::settle_auto_accept`]).
    pub(crate) async fn read_for_record(
        &self,
        req: ObserveRequest,
    ) -> (RecordRequest, proposals::Acceptance) {
        let target = Target {
            tenant_id: req.tenant_id.clone(),
            environment_id: req.environment_id.clone(),
            limits: None,
        };
        let observation = self.read_target_with_retries(&target).await;
        let record = RecordRequest {
            tenant_id: req.tenant_id,
            environment_id: req.environment_id,
            observation,
            proposal_id: req.proposal_id,
        };
        let acceptance = self.acceptance(&record);
        (record, acceptance)
    }

    /// A proposal the rules would accept on its own is, if the policies allow it too.
    async fn settle_auto_accept(
        &self,
        req: &RecordRequest,
        mut outcome: RecordOutcome,
    ) -> Result<RecordOutcome, Error> {
        if let Some(proposal) = outcome.new_proposal.as_mut().filter(|p| p.auto_accept) {
            proposal.auto_accept = self
                .policy_allows_auto_accept(req, &proposal.proposal_id)
                .await?;
        }
        Ok(outcome)
    }

    /// [`Self::settle_auto_accept`] for an outcome already recorded: a proposal whose policy
    /// cannot be asked now waits for an operator instead of being accepted on its own (its
    /// record is committed, so it is handed over either way).
    pub(crate) async fn settle_or_hold(
        &self,
        req: &RecordRequest,
        mut outcome: RecordOutcome,
    ) -> RecordOutcome {
        if let Some(proposal) = outcome.new_proposal.as_mut().filter(|p| p.auto_accept) {
            let asked = self.policy_allows_auto_accept(req, &proposal.proposal_id);
            proposal.auto_accept = asked.await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the policies could not be asked; the proposal waits for review");
                false
            });
        }
        outcome
    }

    /// Reads a batch of environments' targets, a few at once.
    ///
    /// An environment a watched cluster's watches vouch did not change since its last
    /// observation (`cluster_watches::vouched`) is not read: its last observation is recorded
    /// again, as of now (the same objects, so the comparison is skipped).
    async fn read_batch(&self, environments: &[EnvironmentKey]) -> Vec<Observation> {
        use futures::StreamExt as _;
        let now = chrono::Utc::now();
        let vouched = runtime_cloud_store::cluster_watches::vouched(&self.db, environments, now)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read what the watches vouch for; reading every target");
                Default::default()
            });
        let reads: Vec<(Target, Option<_>)> = environments
            .iter()
            .map(|env| {
                let target = Target {
                    tenant_id: env.tenant_id.clone(),
                    environment_id: env.environment_id.clone(),
                    limits: None,
                };
                (target, vouched.get(env).cloned())
            })
            .collect();
        futures::stream::iter(reads)
            .map(|(target, vouched)| async move {
                match vouched {
                    Some(last) => Observation::Observed {
                        workloads: last.workloads,
                        resources: Vec::new(),
                        posture: last.posture,
                        resource_types: last.resource_types,
                        observed_at: Some(now),
                    },
                    None => self.read_target_with_retries(&target).await,
                }
            })
            .buffered(READS_IN_FLIGHT)
            .collect()
            .await
    }

    /// Records a batch's observations in one transaction and starts the workflows of the
    /// proposals they raised; new proposals are named from `req`'s seed.
    ///
    /// The starts stay in the batch's own future, after its commit (32 at once). Handed over
    /// in a later stage of the page's stream instead, they would hold up the
    /// stream, whose next batches' futures could then sit unpolled inside open transactions: on
    /// PostgreSQL a drift storm's sweep timed out waiting for pool connections and stalled for
    /// minutes (900 of 10,000 environments after 75 s; 68.3 s for all of them this way, on
    /// the same machine).
    async fn record_batch(
        &self,
        environments: &[EnvironmentKey],
        observations: Vec<Observation>,
        req: &ObservePageRequest,
    ) -> Result<Vec<RecordOutcome>, Error> {
        let records: Vec<(RecordRequest, proposals::Acceptance)> = environments
            .iter()
            .zip(observations)
            .map(|(env, observation)| {
                let key = format!("{}/{}", env.tenant_id, env.environment_id);
                let record = RecordRequest {
                    tenant_id: env.tenant_id.clone(),
                    environment_id: env.environment_id.clone(),
                    observation,
                    proposal_id: derived_time_ordered_id(
                        req.proposed_at_millis,
                        &req.proposal_seed,
                        &key,
                    ),
                };
                let acceptance = self.acceptance(&record);
                (record, acceptance)
            })
            .collect();
        let recorded = runtime_cloud_transactions::record_observations(&self.db, &records).await?;
        // A drift storm grows the findings from nothing to hundreds of thousands within a
        // sweep: the database's plans must keep up (store::statistics). Plans only get slower
        // without it, so a failure is no reason to record the batch again.
        if let Err(e) = runtime_cloud_store::statistics::refresh(&self.db).await {
            tracing::warn!(error = %e, "planner statistics not refreshed");
        }
        let mut outcomes = Vec::with_capacity(recorded.len());
        for ((record, _), outcome) in records.iter().zip(recorded) {
            outcomes.push(self.settle_auto_accept(record, outcome).await?);
        }
        let (mut superseded, mut new) = (Vec::new(), Vec::new());
        for r in &outcomes {
            superseded.extend(r.superseded.iter().cloned());
            new.extend(r.new_proposal.iter().cloned());
        }
        self.hand_over(superseded, new).await?;
        Ok(outcomes)
    }

    /// Starts the workflows of `new` proposals and tells `superseded` ones, a few at once (a
    /// retry finds a workflow started, running or closed, and starts nothing).
    async fn hand_over(
        &self,
        superseded: Vec<String>,
        new: Vec<runtime_cloud_workflows::contracts::ProposalInput>,
    ) -> Result<(), Error> {
        use futures::StreamExt as _;
        use runtime_cloud_workflows::ReconciliationProposal;
        use runtime_cloud_workflows::ids::proposal_workflow_id;
        use temporalio_client::errors::{WorkflowInteractionError, WorkflowStartError};
        use temporalio_client::{
            WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowSignalOptions,
            WorkflowStartOptions,
        };
        let told = futures::stream::iter(superseded)
            .map(|proposal_id| async move {
                let handle = self.client.get_workflow_handle::<ReconciliationProposal>(
                    proposal_workflow_id(&proposal_id),
                );
                // The proposal's workflow may have ended already (or not started yet: it reads
                // the table first); the row says Superseded anyway. Any other failure (the
                // server restarting) is tried again for a while, then left to the next record
                // of its environment, which names it again until it is marked told.
                let mut pause = Duration::from_millis(250);
                let deadline = tokio::time::Instant::now() + SIGNAL_RETRY_FOR;
                loop {
                    match handle
                        .signal(
                            ReconciliationProposal::supersede,
                            (),
                            WorkflowSignalOptions::default(),
                        )
                        .await
                    {
                        Ok(()) | Err(WorkflowInteractionError::NotFound(_)) => {
                            return Some(proposal_id);
                        }
                        Err(e) if tokio::time::Instant::now() >= deadline => {
                            tracing::warn!(error = %e, %proposal_id, "superseded proposal not told");
                            return None;
                        }
                        Err(_) => {
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_secs(2));
                        }
                    }
                }
            })
            .buffer_unordered(STARTS_IN_FLIGHT)
            .filter_map(std::future::ready)
            .collect::<Vec<String>>();
        proposals::mark_told(&self.db, &told.await).await?;
        let ids: Vec<String> = new.iter().map(|p| p.proposal_id.clone()).collect();
        let started: Vec<Result<(), Error>> = futures::stream::iter(new)
            .map(|proposal| async move {
                let opts = WorkflowStartOptions::new(
                    self.task_queue.clone(),
                    proposal_workflow_id(&proposal.proposal_id),
                )
                .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
                .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
                .priority(runtime_cloud_workflows::fairness::of_tenant(
                    &proposal.tenant_id,
                ))
                .build();
                match self
                    .client
                    .start_workflow(ReconciliationProposal::run, proposal, opts)
                    .await
                {
                    Ok(_) | Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(()),
                    Err(e) => Err(Error::Temporal(e.to_string())),
                }
            })
            .buffer_unordered(STARTS_IN_FLIGHT)
            .collect()
            .await;
        started.into_iter().collect::<Result<(), Error>>()?;
        // Until marked, the next observation of each environment answers its proposal again.
        proposals::mark_started(&self.db, &ids).await?;
        Ok(())
    }

    /// Asks the policies whether a proposal the rules would accept on its own may be; the
    /// decision is recorded on the proposal. (A retried record asks again, and the same
    /// policies answer the same.)
    async fn policy_allows_auto_accept(
        &self,
        req: &RecordRequest,
        proposal_id: &str,
    ) -> Result<bool, Error> {
        use runtime_cloud_models::policy::{PolicyEnvironment, ProposalPolicyInput};
        let (tenant, env_id) = (req.tenant_id.as_str(), req.environment_id.as_str());
        let (Some(proposal), Some(env)) = (
            proposals::find(&self.db, tenant, proposal_id).await?,
            runtime_cloud_store::environments::find(&self.db, tenant, env_id).await?,
        ) else {
            return Ok(false);
        };
        let observed = runtime_cloud_store::inventory::find(&self.db, tenant, env_id)
            .await?
            .map(|i| i.workloads)
            .unwrap_or_default();
        let input = ProposalPolicyInput {
            tenant_id: tenant.to_owned(),
            environment: PolicyEnvironment {
                environment_id: env.environment_id,
                project_id: env.project_id,
                class: env.class,
            },
            proposal: serde_json::to_value(&proposal).unwrap_or_default(),
            observed,
        };
        let mut decision = self.policy.evaluate_auto_accept(&input).await?;
        // What the proposal's run would apply: the declared workloads, or those it adopts.
        let applies: Vec<(String, String)> = match proposal.direction {
            Direction::ApplyDeclared => specifications::latest(&self.db, tenant, env_id)
                .await?
                .map(|s| s.snapshot().workloads)
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.version))
                .collect(),
            Direction::AdoptObserved => input
                .observed
                .iter()
                .map(|w| (w.name.clone(), w.version.clone()))
                .collect(),
        };
        let in_force = runtime_cloud_store::quarantines::in_force(&self.db, tenant).await?;
        let held = quarantine::among(
            applies.iter().map(|(w, v)| (w.as_str(), v.as_str())),
            &in_force,
        );
        if !held.is_empty() {
            decision.allow = false;
            decision.deny.push(format!(
                "not accepted on its own: {}",
                quarantine::refusal(&held)
            ));
        }
        if !decision.allow {
            tracing::info!(%proposal_id, reasons = ?decision.deny, "the policies keep the proposal for an operator");
        }
        proposals::set_policy(&self.db, proposal_id, &decision).await?;
        Ok(decision.allow)
    }
}

#[activities]
impl InventoryActivitiesImpl {
    /// Reads the target (a few quick tries; an unreachable one is an answer, not a failure)
    /// and records what it shows: the observation, findings and proposal.
    #[activity(definition = markers::Observe)]
    pub async fn observe(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: ObserveRequest,
    ) -> Result<RecordOutcome, ActivityError> {
        let span = tracing::info_span!("observe", tenant_id = %req.tenant_id, environment_id = %req.environment_id, proposal_id = %req.proposal_id);
        async move { self.observe_and_record(req).await.map_err(activity_error) }
            .instrument(span)
            .await
    }

    /// Observes and records one page of the sweep: lists it, reads its targets a few at a
    /// time, records them [`RECORD_BATCH`] per transaction (as many batches at once as
    /// `transactions::batches_at_once` says the database takes), starts the workflows of
    /// the proposals each batch raised (and marks them started), and heartbeats after each
    /// batch. While batches are recorded the next one's targets are read: the database and
    /// the targets are busy at once.
    ///
    /// A target that keeps failing is recorded as unreachable (stale) after a few quick tries,
    /// as `ObserveEnvironment` does; a recording failure fails the page, whose retry repeats it
    /// harmlessly: the proposal ids derive from the request, a recorded observation answers
    /// the same proposal again, and a started workflow is not started twice.
    #[activity(definition = markers::ObservePage)]
    pub async fn observe_page(
        self: Arc<Self>,
        ctx: ActivityContext,
        req: ObservePageRequest,
    ) -> Result<PageOutcome, ActivityError> {
        let span = tracing::info_span!("observe_page", after = ?req.after, limit = req.limit);
        async move {
            let page =
                runtime_cloud_store::environments::page(&self.db, req.after.as_deref(), req.limit)
                    .await
                    .map_err(store_failed)?;
            let mut outcome = PageOutcome {
                next: page.next.clone(),
                ..Default::default()
            };
            use futures::StreamExt as _;
            // One batch's targets are read at a time, ahead of the records: reads take pool
            // connections too, and more of them at once starved the recording transactions'
            // own (measured: pool timeouts with four batches read at once).
            let in_flight = runtime_cloud_transactions::batches_at_once(&self.db);
            // Owned batches and handles: the stream's futures must be `Send` for any lifetime.
            let batches: Vec<Vec<EnvironmentKey>> = page
                .environments
                .chunks(RECORD_BATCH)
                .map(<[EnvironmentKey]>::to_vec)
                .collect();
            let req = Arc::new(req);
            let reader = self.clone();
            let recorder = self.clone();
            let mut recorded = futures::stream::iter(batches)
                .map(move |batch| {
                    let this = reader.clone();
                    async move {
                        let read = this.read_batch(&batch).await;
                        (batch, read)
                    }
                })
                .buffered(1)
                .map(move |(batch, read)| {
                    let (this, req) = (recorder.clone(), req.clone());
                    async move { this.record_batch(&batch, read, &req).await }
                })
                .buffered(in_flight);
            while let Some(recorded) = recorded.next().await {
                for r in recorded.map_err(activity_error)? {
                    outcome.observed += 1;
                    outcome.unreachable += u32::from(r.stale);
                    outcome.proposals += u32::from(r.new_proposal.is_some());
                }
                // Progress for the UI; an error only means the server did not take it yet.
                let _ = ctx.record_heartbeat(outcome.observed).await;
            }
            Ok(outcome)
        }
        .instrument(span)
        .await
    }

    /// Projects a proposal's state.
    #[activity(definition = markers::ProjectProposal)]
    pub async fn project_proposal(
        self: Arc<Self>,
        _ctx: ActivityContext,
        p: ProposalProjection,
    ) -> Result<(), ActivityError> {
        let span =
            tracing::info_span!("project_proposal", proposal_id = %p.proposal_id, state = %p.state);
        async move { proposals::project(&self.db, &p).await.map_err(store_failed) }
            .instrument(span)
            .await
    }

    /// The state the read table shows for a proposal.
    #[activity(definition = markers::ReadProposalState)]
    pub async fn read_proposal_state(
        self: Arc<Self>,
        _ctx: ActivityContext,
        proposal_id: String,
    ) -> Result<Option<ProposalState>, ActivityError> {
        proposals::state_of(&self.db, &proposal_id)
            .await
            .map_err(store_failed)
    }

    /// Marks superseded proposals' workflows told.
    #[activity(definition = markers::MarkTold)]
    pub async fn mark_told(
        self: Arc<Self>,
        _ctx: ActivityContext,
        proposal_ids: Vec<String>,
    ) -> Result<(), ActivityError> {
        proposals::mark_told(&self.db, &proposal_ids)
            .await
            .map_err(store_failed)
    }

    /// Prepares the reconciliation run of an accepted proposal.
    #[activity(definition = markers::PrepareRun)]
    pub async fn prepare_run(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: PrepareRunRequest,
    ) -> Result<RunInput, ActivityError> {
        let span = tracing::info_span!("prepare_run", proposal_id = %req.proposal.proposal_id, run_id = %req.run_id);
        async move {
            let grantor = req.grantor.as_ref();
            runtime_cloud_transactions::prepare_proposal_run(
                &self.db,
                &req.proposal,
                &req.run_id,
                grantor,
                &self.provisioning,
            )
            .await
            .map_err(store_failed)
        }
        .instrument(span)
        .await
    }
}
