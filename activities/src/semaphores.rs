//! The semaphores' activity side (`workflows::semaphore` is the caller's): taking and releasing
//! slots of the durable semaphores held in the database (`store::semaphores`), and signalling
//! `granted` to the waiters a take or a release promotes. Used by the provisioning activities
//! (the environment's lock, the releases at a run's end) and the capacity activities (a run's
//! lease asks for its project's capacity in the same local activity).

use crate::error::{Error, activity_error, store_failed};
use runtime_cloud_store::semaphores;
use runtime_cloud_workflows::contracts::{LockAnswer, LockRequest};
use runtime_cloud_workflows::messages::Granted;
use sea_orm::DatabaseConnection;
use temporalio_client::errors::WorkflowInteractionError;
use temporalio_client::{Client, WorkflowExecutionStatus, WorkflowSignalOptions};
use temporalio_common::UntypedWorkflow;
use temporalio_sdk::activities::ActivityError;

/// Takes and releases semaphore slots for the workflows that ask.
#[derive(Clone)]
pub struct Semaphores {
    /// Where the semaphores (and the capacity leases their slots stand for) are held.
    pub db: DatabaseConnection,
    /// Signals the grants; asks whether holders still run; starts the deferred runs a freed
    /// capacity slot admits.
    pub client: Client,
    /// The workers' task queue (deferred runs start on it).
    pub task_queue: String,
    /// How often a run waiting for a semaphore asks again (and checks that the holders and the
    /// waiters before it still exist).
    pub lock_holder_check_secs: u64,
}

impl Semaphores {
    /// Takes a slot if one is free and nobody waits before the requester, else queues it;
    /// asking again keeps its place. Signals the waiters the take granted (a raised limit), and
    /// any holder an earlier take or release left untold. With `check_holders`, a waiter also
    /// checks that the holders and the waiters before it still exist, and drops those that do
    /// not.
    pub async fn acquire(&self, req: &LockRequest) -> Result<LockAnswer, ActivityError> {
        let taken = semaphores::take(&self.db, ask(req))
            .await
            .map_err(store_failed)?;
        self.taken(req, taken).await
    }

    /// After a take committed ([`semaphores::take`], or [`semaphores::take_in`] in the
    /// caller's transaction): what [`Self::acquire`] does with its answer.
    pub async fn taken(
        &self,
        req: &LockRequest,
        mut taken: semaphores::Taken,
    ) -> Result<LockAnswer, ActivityError> {
        let mut named = self.grant(req, std::mem::take(&mut taken.to_tell)).await?;
        if !taken.holds && req.check_holders {
            named |= self
                .drop_the_gone(req, std::mem::take(&mut taken.ahead))
                .await?;
        }
        if !taken.holds && named {
            // A holder dropped on the way made the requester one: asking again says so
            // (and marks it told).
            taken = semaphores::take(&self.db, ask(req))
                .await
                .map_err(store_failed)?;
            self.grant(req, taken.to_tell).await?;
        }
        Ok(LockAnswer {
            holds: taken.holds,
            recheck_secs: self.lock_holder_check_secs,
        })
    }

    /// Releases a slot (with its capacity lease), or leaves the queue, and signals the waiters
    /// it grants. A capacity slot freed also admits the deferred runs it lets start.
    pub async fn release(&self, req: &LockRequest) -> Result<(), ActivityError> {
        let to_tell = semaphores::release(
            &self.db,
            &req.semaphore_id,
            &req.requester_workflow_id,
            req.records_leases,
        )
        .await
        .map_err(store_failed)?;
        self.released(req, to_tell).await
    }

    /// After a release committed: signals the waiters it promoted (`to_tell`) and, for a
    /// capacity slot, admits the deferred runs it lets start.
    pub async fn released(
        &self,
        req: &LockRequest,
        to_tell: Vec<String>,
    ) -> Result<(), ActivityError> {
        self.grant(req, to_tell).await?;
        if req.records_leases {
            let (db, client, queue) = (&self.db, &self.client, &self.task_queue);
            runtime_cloud_temporal::admission::admit_after_release(
                db,
                client,
                queue,
                &req.semaphore_id,
            )
            .await;
        }
        Ok(())
    }

    /// Signals `granted` to each of `holders` but the requester (who learns it from its
    /// answer) and marks them told; true when the requester was among them (a holder dropped
    /// here made it one). A holder that no longer exists (terminated by hand) is dropped
    /// ([`Self::drop_gone`]), and the waiter its slot goes to is signalled in turn. Any other
    /// failure fails the activity, whose retry (or the semaphore's next take or release) names
    /// the holders still untold again: a release during a Temporal outage grants once it is
    /// back, not after the waiter's next look.
    ///
    /// All of a round at once: a release freeing ten slots does not make the tenth wait for
    /// nine round trips.
    async fn grant(&self, req: &LockRequest, holders: Vec<String>) -> Result<bool, ActivityError> {
        let mut named = false;
        let mut to_tell = holders;
        loop {
            named |= to_tell.contains(&req.requester_workflow_id);
            to_tell.retain(|h| *h != req.requester_workflow_id);
            if to_tell.is_empty() {
                return Ok(named);
            }
            let round = std::mem::take(&mut to_tell);
            let signals = round.iter().map(|holder| {
                let handle = self
                    .client
                    .get_workflow_handle::<UntypedWorkflow>(holder.clone());
                let semaphore_id = req.semaphore_id.clone();
                async move {
                    handle
                        .signal(Granted, semaphore_id, WorkflowSignalOptions::default())
                        .await
                }
            });
            let answers = futures::future::join_all(signals).await;
            let mut failed = None;
            for (holder, answer) in round.into_iter().zip(answers) {
                match answer {
                    Ok(()) => semaphores::told(&self.db, &req.semaphore_id, &holder)
                        .await
                        .map_err(store_failed)?,
                    Err(WorkflowInteractionError::NotFound(_)) => {
                        to_tell.extend(self.drop_gone(req, &holder).await?);
                    }
                    Err(e) => failed = Some(e),
                }
            }
            if let Some(e) = failed {
                return Err(temporal_unavailable(e));
            }
        }
    }

    /// Drops `holder`, whose workflow no longer runs, from the semaphore: its capacity lease
    /// is recorded expired first (with `records_leases`; idempotent, so a retry after a
    /// killed worker expires it still), then its slot or place goes. Answers the holders to
    /// signal.
    async fn drop_gone(
        &self,
        req: &LockRequest,
        holder: &str,
    ) -> Result<Vec<String>, ActivityError> {
        if req.records_leases {
            expire_vanished(
                &self.db,
                &self.client,
                &self.task_queue,
                &req.semaphore_id,
                holder,
            )
            .await
            .map_err(activity_error)?;
        }
        semaphores::release(&self.db, &req.semaphore_id, holder, req.records_leases)
            .await
            .map_err(store_failed)
    }

    /// Drops those of `ahead` (the holders and the waiters before the requester) whose
    /// workflow no longer runs; true when one was dropped. Asked with DescribeWorkflow, which
    /// writes nothing to the holders' histories (a run awaiting approval may wait for days).
    async fn drop_the_gone(
        &self,
        req: &LockRequest,
        ahead: Vec<String>,
    ) -> Result<bool, ActivityError> {
        let described = ahead.iter().map(|id| {
            let handle = self
                .client
                .get_workflow_handle::<UntypedWorkflow>(id.clone());
            async move { handle.describe(Default::default()).await }
        });
        let answers = futures::future::join_all(described).await;
        let mut dropped = false;
        for (id, answer) in ahead.iter().zip(answers) {
            let gone = match answer {
                Ok(d) => d.status() != WorkflowExecutionStatus::Running,
                Err(WorkflowInteractionError::NotFound(_)) => true,
                Err(e) => return Err(temporal_unavailable(e)),
            };
            if gone {
                let to_tell = self.drop_gone(req, id).await?;
                self.grant(req, to_tell).await?;
                dropped = true;
            }
        }
        Ok(dropped)
    }
}

/// Records the leases of `holder`, which its semaphore found gone (terminated by hand), as
/// expired, and admits the deferred runs the freed slot lets start.
async fn expire_vanished(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
    semaphore_id: &str,
    holder: &str,
) -> Result<(), Error> {
    let expired =
        runtime_cloud_store::capacity::expire_leases(db, holder, chrono::Utc::now()).await?;
    tracing::info!(
        semaphore = %semaphore_id,
        holder,
        expired,
        "holder gone: its capacity lease expired"
    );
    if expired > 0 {
        runtime_cloud_temporal::admission::admit_after_release(db, client, task_queue, holder)
            .await;
    }
    Ok(())
}

/// `req` as the store takes it.
pub(crate) fn ask(req: &LockRequest) -> semaphores::Ask<'_> {
    semaphores::Ask {
        semaphore_id: &req.semaphore_id,
        tenant_id: &req.tenant_id,
        holder_id: &req.requester_workflow_id,
        slots: req.slots,
        leases: req.records_leases,
    }
}

/// A Temporal call that failed: retried by the activity's policy.
fn temporal_unavailable(e: impl std::fmt::Display) -> ActivityError {
    activity_error(Error::Temporal(e.to_string()))
}

/// The slot `req` lets go, as the store takes it.
pub(crate) fn letting(req: &LockRequest) -> semaphores::Letting<'_> {
    semaphores::Letting {
        semaphore_id: &req.semaphore_id,
        holder_id: &req.requester_workflow_id,
        leases: req.records_leases,
    }
}
