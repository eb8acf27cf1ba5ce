//! End a run: its ending recorded, its semaphores let go and the observation after its apply
//! recorded (or, for an applied decommission, its environment retired), in one transaction.

use chrono::{DateTime, Utc};
use runtime_cloud_models::inventory::{RecordOutcome, RecordRequest};
use runtime_cloud_models::{ProvisioningKind, ProvisioningState, RunInput, RunStatus};
use runtime_cloud_store::proposals::Acceptance;
use runtime_cloud_store::{DatabaseConnection, Error, begin_write, environments, runs, semaphores};
use sea_orm::DatabaseTransaction;

/// What a run's ending let go and recorded ([`end_run`]).
#[derive(Debug, Default, PartialEq)]
pub struct Ended {
    /// The holders the release of its capacity promoted: to signal `granted` once committed.
    pub capacity_promoted: Vec<String>,
    /// The holders the release of its environment promoted: likewise.
    pub environment_promoted: Vec<String>,
    /// What recording the observation after its apply did: none when it brought none, or
    /// when its record was given up.
    pub observed: Option<RecordOutcome>,
}

/// Records a run's ending and lets its semaphores go, in one transaction: its capacity slot
/// (with its lease), then the ending's projection and event, then the observation after its
/// apply (`observed`, read while the run still held the environment), then its environment's
/// slot. A reader never sees an ended run holding capacity, nor an environment free while the
/// run that held it has no recorded ending, nor before what its apply left is recorded: the
/// next run on the environment decides on an inventory that shows this run's apply, and no
/// later run's apply is under way while this one's observation is read.
///
/// The observation's record is given up, never the ending: it is written in a savepoint that
/// a failed record rolls back alone ([`record_or_give_up`]).
///
/// `ended_at` is when the run ended (its `completedAt`): when its finish began, before the
/// observation after it was read, which is therefore newer (a rollout counts an instance
/// converged only on an observation taken after its run applied: `models::rollouts::converged`).
pub async fn end_run(
    db: &DatabaseConnection,
    run: &RunInput,
    (passed, status): (&[RunStatus], &RunStatus),
    ended_at: DateTime<Utc>,
    capacity: Option<semaphores::Letting<'_>>,
    observed: Option<(&RecordRequest, Acceptance)>,
    environment: semaphores::Letting<'_>,
) -> Result<Ended, Error> {
    let txn = begin_write(db).await?;
    let capacity_promoted = match capacity {
        Some(capacity) => semaphores::release_in(&txn, capacity).await?,
        None => Vec::new(),
    };
    runs::project_through_in(&txn, run, passed, status, ended_at).await?;
    if retires(run, status) {
        environments::retire_in(&txn, &run.tenant_id, &run.environment_id, Some(&run.run_id))
            .await?;
    }
    let observed = match observed {
        Some((req, acceptance)) => record_or_give_up(&txn, req, acceptance).await?,
        None => None,
    };
    let environment_promoted = semaphores::release_in(&txn, environment).await?;
    txn.commit().await?;
    Ok(Ended {
        capacity_promoted,
        environment_promoted,
        observed,
    })
}

/// Whether the run's ending retires its environment: a decommission that applied destroyed
/// what the environment ran.
pub fn retires(run: &RunInput, status: &RunStatus) -> bool {
    run.kind == ProvisioningKind::Decommission && status.state == Some(ProvisioningState::Applied)
}

/// The observation after a run's apply, recorded in a savepoint of its ending's transaction: a
/// record that fails (a stored row that does not read, say) is rolled back alone and given up;
/// the next sweep observes the environment within five minutes anyway. A failure to roll the
/// savepoint back is the transaction's: the ending is retried.
async fn record_or_give_up(
    txn: &DatabaseTransaction,
    req: &RecordRequest,
    acceptance: Acceptance,
) -> Result<Option<RecordOutcome>, Error> {
    let savepoint = sea_orm::TransactionTrait::begin(txn).await?;
    match crate::record_observation_in(&savepoint, req, acceptance).await {
        Ok(outcome) => {
            savepoint.commit().await?;
            Ok(Some(outcome))
        }
        Err(e) => {
            tracing::warn!(error = %e, environment_id = %req.environment_id, "the observation after the run is given up");
            savepoint.rollback().await?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::options::ProvisioningOptions;
    use runtime_cloud_models::{EnvironmentClass, PlanChanges, PlanReceipt, ProvisioningState};
    use runtime_cloud_store::fixtures;
    use runtime_cloud_store::on_both_databases;
    use runtime_cloud_store::runs::{create, find, project};

    fn plan() -> PlanReceipt {
        PlanReceipt {
            changes: PlanChanges::default(),
            inputs_hash: "sha256:h1".into(),
            program_version: "a1b2c3d4".into(),
            cost: None,
            posture: Vec::new(),
        }
    }

    /// A run's ending is recorded as its capacity and its environment go, in one transaction:
    /// the waiters each release promoted are answered, and a retry (a signal that failed)
    /// releases nothing more and names them again.
    async fn a_run_ends_letting_its_capacity_and_environment_go_on(db: DatabaseConnection) {
        use runtime_cloud_store::semaphores::{self, Ask, Letting};
        let (env, spec) = fixtures::declared(&db, "dev", EnvironmentClass::NonProduction).await;
        let new = fixtures::new_run("0190f000-0000-7000-8000-000000000009", &env, &spec);
        let input = create(&db, &new, &ProvisioningOptions::default())
            .await
            .unwrap();
        let (environment, capacity) = ("environment/acme/dev", "capacity/acme/shop");
        let ask = |semaphore_id, holder_id| Ask {
            semaphore_id,
            tenant_id: "acme",
            holder_id,
            slots: 1,
            leases: false,
        };
        for (sem, holder, holds) in [
            (environment, "run", true),
            (environment, "next-on-env", false),
            (capacity, "run", true),
            (capacity, "next-on-capacity", false),
        ] {
            assert_eq!(
                semaphores::take(&db, ask(sem, holder)).await.unwrap().holds,
                holds
            );
        }
        for state in [ProvisioningState::Planned, ProvisioningState::Applying] {
            let status = RunStatus {
                state: Some(state),
                plan_receipt: Some(plan()),
                ..Default::default()
            };
            project(&db, &input, &[], &status).await.unwrap();
        }
        let ended = RunStatus {
            state: Some(ProvisioningState::Failed),
            plan_receipt: Some(plan()),
            reason: Some("the apply failed".into()),
            ..Default::default()
        };
        let letting = |semaphore_id| Letting {
            semaphore_id,
            holder_id: "run",
            leases: false,
        };
        for _ in 0..2 {
            let promoted = end_run(
                &db,
                &input,
                (&[], &ended),
                Utc::now(),
                Some(letting(capacity)),
                None,
                letting(environment),
            )
            .await
            .unwrap();
            assert_eq!(
                promoted,
                Ended {
                    capacity_promoted: vec!["next-on-capacity".to_owned()],
                    environment_promoted: vec!["next-on-env".to_owned()],
                    observed: None,
                }
            );
        }
        let row = find(&db, "acme", new.run_id).await.unwrap().unwrap();
        assert_eq!(row.state, Some(ProvisioningState::Failed));
        assert_eq!(row.reason.as_deref(), Some("the apply failed"));
        assert_eq!(fixtures::events(&db, "ProvisioningFailed").await.len(), 1);
        for (sem, next) in [(environment, "next-on-env"), (capacity, "next-on-capacity")] {
            let state = semaphores::holders(&db, sem).await.unwrap().unwrap();
            assert_eq!(state.holders, [(next.to_owned(), false)], "{sem}");
            assert!(state.queue.is_empty(), "{sem}");
        }
    }

    on_both_databases!(
        a_run_ends_letting_its_capacity_and_environment_go_sqlite,
        a_run_ends_letting_its_capacity_and_environment_go_postgres,
        a_run_ends_letting_its_capacity_and_environment_go_on
    );

    /// The observation after a run's apply is recorded with its ending, before its environment
    /// is let go; a record that fails (a stored inventory that does not read) is given up and
    /// the ending is recorded all the same, its environment let go.
    async fn a_run_ends_recording_its_observation_or_giving_it_up_on(db: DatabaseConnection) {
        use runtime_cloud_models::observation::Observation;
        use runtime_cloud_store::semaphores::{self, Ask, Letting};
        let (env, spec) = fixtures::declared(&db, "dev", EnvironmentClass::NonProduction).await;
        let environment = "environment/acme/dev";
        let acceptance = Acceptance {
            option: false,
            policy_allows: true,
            fresh: true,
        };
        let mut ends = Vec::new();
        for (run_id, proposal_id) in [
            ("0190f000-0000-7000-8000-00000000000a", "p1"),
            ("0190f000-0000-7000-8000-00000000000b", "p2"),
        ] {
            let input = create(
                &db,
                &fixtures::new_run(run_id, &env, &spec),
                &Default::default(),
            )
            .await
            .unwrap();
            let ask = Ask {
                semaphore_id: environment,
                tenant_id: "acme",
                holder_id: run_id,
                slots: 1,
                leases: false,
            };
            assert!(semaphores::take(&db, ask).await.unwrap().holds);
            let applied = RunStatus {
                state: Some(ProvisioningState::Applied),
                plan_receipt: Some(plan()),
                ..Default::default()
            };
            // The run ends, then its target is read: nothing runs where `api` is declared, so
            // the observation raises its finding.
            let ended_at = Utc::now();
            let observed_at = ended_at + chrono::Duration::milliseconds(5);
            let observed = RecordRequest {
                tenant_id: "acme".into(),
                environment_id: "dev".into(),
                observation: Observation::Observed {
                    workloads: Vec::new(),
                    resources: Vec::new(),
                    posture: Vec::new(),
                    resource_types: Default::default(),
                    observed_at: Some(observed_at),
                },
                proposal_id: proposal_id.into(),
            };
            let applying = RunStatus {
                state: Some(ProvisioningState::Applying),
                ..applied.clone()
            };
            let planned = RunStatus {
                state: Some(ProvisioningState::Planned),
                ..applied.clone()
            };
            project(&db, &input, &[planned], &applying).await.unwrap();
            let letting = Letting {
                semaphore_id: environment,
                holder_id: run_id,
                leases: false,
            };
            let ended = end_run(
                &db,
                &input,
                (&[], &applied),
                ended_at,
                None,
                Some((&observed, acceptance)),
                letting,
            )
            .await
            .unwrap();
            let row = find(&db, "acme", run_id).await.unwrap().unwrap();
            assert_eq!(row.state, Some(ProvisioningState::Applied), "{run_id}");
            // Ended before it was observed: a rollout takes the observation as the apply's.
            let completed = row.completed_at.unwrap();
            assert!(completed < observed_at, "{completed} {observed_at}");
            let holders = semaphores::holders(&db, environment).await.unwrap();
            assert!(
                holders.as_ref().is_none_or(|h| h.holders.is_empty()),
                "{run_id}: {holders:?}"
            );
            ends.push(ended.observed);
            // The second run's record finds an inventory that does not read.
            fixtures::execute(
                &db,
                "UPDATE runtime_inventories SET workloads = '{\"api\": 1}'",
            )
            .await;
        }
        let first = ends[0]
            .clone()
            .expect("the first run's observation is recorded");
        assert_eq!((first.new_findings, first.stale), (1, false), "{first:?}");
        assert_eq!(
            first.new_proposal.map(|p| p.proposal_id).as_deref(),
            Some("p1")
        );
        assert_eq!(ends[1], None, "the second run's observation is given up");
        assert_eq!(fixtures::events(&db, "ProvisioningApplied").await.len(), 2);
        let dev = [("acme".to_owned(), "dev".to_owned())];
        let open = runtime_cloud_store::findings::open_of(&db, &dev, &dev)
            .await
            .unwrap();
        assert_eq!(open.len(), 1, "the given-up record wrote nothing: {open:?}");
    }

    on_both_databases!(
        a_run_ends_recording_its_observation_or_giving_it_up_sqlite,
        a_run_ends_recording_its_observation_or_giving_it_up_postgres,
        a_run_ends_recording_its_observation_or_giving_it_up_on
    );
}
