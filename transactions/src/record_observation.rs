//! Recording an observation: the inventory and its workloads, the findings the comparison with
//! the declared specification raises or resolves, and the proposal they group into
//! ([`crate::raise_findings`]), in one transaction.

mod comparison;
mod known;

use crate::raise_findings::{Standing, raise_findings};
use chrono::{DateTime, Utc};
use known::Known;
use runtime_cloud_models::cost::{self, Cost, PriceTable, Usage};
use runtime_cloud_models::drift::{compare, posture_findings, resource_findings};
use runtime_cloud_models::events::ObservedStateChanged;
use runtime_cloud_models::inventory::{RecordOutcome, RecordRequest};
use runtime_cloud_models::observation::{Observation, ObservedWorkload, changes};
use runtime_cloud_store::decode::to_json;
use runtime_cloud_store::deferred::Deferred;
use runtime_cloud_store::entities::{
    observed_workloads as workload_rows, runtime_inventories as rows,
};
use runtime_cloud_store::environments::Environment;
use runtime_cloud_store::proposals::{self, Acceptance};
use runtime_cloud_store::{Error, outbox};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    EntityTrait, QueryFilter,
};
use std::collections::BTreeMap;
use uuid::Uuid;

const TABLE: &str = "runtime_inventories";

/// Records one observation (see [`RecordRequest`]), in one transaction: the inventory and its
/// workloads, `ObservedStateChanged` when something changed, the findings the comparison with
/// the declared specification raises or resolves, and a proposal when the open findings
/// changed. A failed observation marks the environment stale and raises nothing. A retried
/// record (same `proposal_id`) answers what the first one did.
///
/// An observation of the same objects as the last one (every workload's `sourceVersion`
/// unchanged, or the same workloads) compared against the same inputs (specification, active
/// drift rules, the runner state's drift) skips the comparison: the workloads and findings
/// stay as recorded, `observedAt` moves, and only the proposals are synced.
///
/// `observedAt` is when the target was read. An observation read before the one last recorded
/// (they run concurrently and may be recorded out of order) changes nothing.
pub async fn record_observation(
    db: &DatabaseConnection,
    req: &RecordRequest,
    acceptance: Acceptance,
) -> Result<RecordOutcome, Error> {
    let txn = runtime_cloud_store::begin_write(db).await?;
    let outcome = record_observation_in(&txn, req, acceptance).await?;
    txn.commit().await?;
    Ok(outcome)
}

/// [`record_observation`] in the caller's write transaction (a run's ending records its
/// observation after the apply with the release of its environment: [`crate::end_run`]).
pub async fn record_observation_in(
    txn: &DatabaseTransaction,
    req: &RecordRequest,
    acceptance: Acceptance,
) -> Result<RecordOutcome, Error> {
    let now = Utc::now();
    let known = Known::of_one(txn, req, now).await?;
    let mut deferred = Deferred::default();
    let outcome = record_in(txn, req, acceptance, known, now, &mut deferred).await?;
    deferred.insert(txn).await?;
    Ok(outcome)
}

/// Records the observations of many environments (each as [`record_observation`] would) in one
/// transaction: a sweep writes a batch with one commit instead of one per environment, reads
/// what the records need with one query per table for the whole batch, and a batch that fails
/// writes nothing (its retry records it again, answering the same proposals).
///
/// The proposals raised are left pending ([`proposals::mark_pending`]): the caller starts their
/// workflows after the commit and marks them started.
///
/// The environments must be distinct (a sweep's page lists each once): one environment
/// observed twice in a batch is recorded one observation after the other, each reading what
/// the one before wrote.
pub async fn record_observations(
    db: &DatabaseConnection,
    reqs: &[(RecordRequest, Acceptance)],
) -> Result<Vec<RecordOutcome>, Error> {
    let txn = runtime_cloud_store::begin_write(db).await?;
    let distinct: std::collections::HashSet<(&str, &str)> = reqs
        .iter()
        .map(|(r, _)| (r.tenant_id.as_str(), r.environment_id.as_str()))
        .collect();
    let mut outcomes = Vec::with_capacity(reqs.len());
    let mut deferred = Deferred::default();
    if distinct.len() == reqs.len() {
        let now = Utc::now();
        let only: Vec<&RecordRequest> = reqs.iter().map(|(r, _)| r).collect();
        let known = Known::of_batch(&txn, &only, now).await?;
        for ((req, acceptance), known) in reqs.iter().zip(known) {
            outcomes.push(record_in(&txn, req, *acceptance, known, now, &mut deferred).await?);
        }
    } else {
        // Each record reads what the one before wrote: nothing waits for the end.
        for (req, acceptance) in reqs {
            let now = Utc::now();
            let known = Known::of_one(&txn, req, now).await?;
            outcomes.push(record_in(&txn, req, *acceptance, known, now, &mut deferred).await?);
            deferred.insert(&txn).await?;
        }
    }
    deferred.insert(&txn).await?;
    // The page starts their workflows after the commit, not durably: pending until it has.
    let raised: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.new_proposal.as_ref().map(|p| p.proposal_id.clone()))
        .collect();
    proposals::mark_pending(&txn, &raised).await?;
    txn.commit().await?;
    Ok(outcomes)
}

/// How many [`record_observations`] batches to record at once on `db`. PostgreSQL: two (a batch is
/// mostly round trips, and one at a time left both of a small machine's cores half idle; more
/// starve the connection pool the batches' reads share). SQLite: one (it has one writer; a
/// second batch would only wait for the first one's lock).
pub fn batches_at_once(db: &DatabaseConnection) -> usize {
    match db.get_database_backend() {
        sea_orm::DbBackend::Sqlite => 1,
        _ => 2,
    }
}

/// Writes an inventory `row`: a new one is deferred, an existing one is updated now.
async fn put(
    txn: &DatabaseTransaction,
    deferred: &mut Deferred,
    row: rows::ActiveModel,
    new: bool,
) -> Result<(), Error> {
    if new {
        deferred.inventory(row);
        Ok(())
    } else {
        runtime_cloud_store::put(txn, row, false).await
    }
}

/// One observation's writes at `now`, in the caller's transaction, from what it read
/// (`known`); its new rows and events are `deferred`, for the caller to insert before it
/// commits.
async fn record_in(
    txn: &DatabaseTransaction,
    req: &RecordRequest,
    acceptance: Acceptance,
    mut known: Known,
    now: DateTime<Utc>,
    deferred: &mut Deferred,
) -> Result<RecordOutcome, Error> {
    // Proposals superseded earlier whose workflows were not told yet (the record that
    // superseded them committed, and whoever was to tell them did not): every record of the
    // environment names them again until they are (`proposals::mark_told`).
    let untold = std::mem::take(&mut known.untold);
    let mut outcome = record_known(txn, req, acceptance, known, now, deferred).await?;
    outcome.superseded.extend(untold);
    Ok(outcome)
}

/// [`record_in`] but for the proposals superseded earlier.
async fn record_known(
    txn: &DatabaseTransaction,
    req: &RecordRequest,
    acceptance: Acceptance,
    known: Known,
    now: DateTime<Utc>,
    deferred: &mut Deferred,
) -> Result<RecordOutcome, Error> {
    let Known {
        env,
        inventory: existing,
        spec,
        rules,
        applied,
        comparison,
        open,
        recorded,
        active,
        untold: _,
        prices,
    } = known;
    let Some(env) = env else {
        // The environment was removed since the observation started: nothing to record.
        return Ok(RecordOutcome::default());
    };
    // Observations of one environment run concurrently (the sweep's, an operator's, a run's
    // after its apply) and may be recorded out of order: one read before the last recorded
    // one is older news, and recording it would undo what the newer one found.
    let read_at = match &req.observation {
        Observation::Observed { observed_at, .. } => observed_at.unwrap_or(now),
        Observation::Unreachable { .. } => now,
    };
    if existing
        .as_ref()
        .and_then(|i| i.observed_at)
        .is_some_and(|recorded| recorded > read_at)
    {
        let new_proposal = proposals::raised(recorded.as_ref(), &env, acceptance);
        return Ok(RecordOutcome {
            new_proposal,
            ..Default::default()
        });
    }
    let was_stale = existing.as_ref().is_none_or(|i| i.stale);
    let mut row: rows::ActiveModel = match existing.clone() {
        Some(row) => row.into(),
        None => rows::ActiveModel {
            id: Set(Uuid::now_v7().to_string()),
            tenant_id: Set(req.tenant_id.clone()),
            environment_id: Set(req.environment_id.clone()),
            project_id: Set(env.project_id.clone()),
            workloads: Set(serde_json::json!([])),
            current_release_id: Set(None),
            specification_version: Set(None),
            observed_at: Set(None),
            posture: Set(serde_json::json!([])),
            resource_types: Set(serde_json::json!({})),
            created_at: Set(now),
            ..Default::default()
        },
    };
    let event =
        |changes: serde_json::Value, stale: bool, release: Option<String>| ObservedStateChanged {
            environment_id: req.environment_id.clone(),
            tenant_id: req.tenant_id.clone(),
            project_id: env.project_id.clone(),
            current_release_id: release,
            changes,
            stale,
        };
    let event_id = outbox::event_id(&req.proposal_id, "ObservedStateChanged");

    let workloads = match &req.observation {
        Observation::Unreachable { reason } => {
            row.stale = Set(true);
            row.last_error = Set(Some(reason.clone()));
            row.updated_at = Set(now);
            put(txn, deferred, row, existing.is_none()).await?;
            let changed = existing.is_none() || !was_stale;
            if changed {
                let release = existing.and_then(|i| i.current_release_id);
                let event = event(serde_json::json!([]), true, release);
                deferred.event(&req.tenant_id, event.into(), event_id);
            }
            return Ok(RecordOutcome {
                changed,
                stale: true,
                ..Default::default()
            });
        }
        Observation::Observed {
            workloads,
            resources,
            posture,
            resource_types,
            ..
        } => (workloads, resources, posture, resource_types),
    };
    let (workloads, resources, posture, resource_types) = workloads;

    // Read with the open findings it needed (`Known::of_batch`), never made up here: without
    // it those findings are not known to be open.
    let comparison::Comparison {
        key,
        previous,
        unchanged,
    } = comparison.ok_or_else(|| Error::Missing {
        what: "comparison of the observation of",
        id: req.environment_id.clone(),
    })?;
    row.observed_at = Set(Some(read_at));
    // Written only when they changed: a namespace's posture is kilobytes of JSON a sweep
    // would otherwise write back unchanged for every environment (and is not read: the
    // comparison's key covers it, the same key the same posture).
    if existing.as_ref().and_then(|i| i.compared_with.as_deref()) != Some(key.as_str()) {
        row.posture = Set(to_json(posture)?);
    }
    row.resource_types
        .set_if_not_equals(to_json(resource_types)?);
    let cost = prices.map(|p| priced(&env, workloads, resource_types, &p));
    row.hourly_cost
        .set_if_not_equals(cost.as_ref().map(|c| c.hourly));
    row.cost
        .set_if_not_equals(cost.as_ref().map(to_json).transpose()?);
    row.specification_version
        .set_if_not_equals(applied.map(|a| a.specification_version));
    row.updated_at = Set(now);
    let (changed, found) = if unchanged {
        // The same objects against the same inputs: the same findings, already recorded.
        runtime_cloud_store::put(txn, row, false).await?;
        (false, None)
    } else {
        let diff = changes(&previous, workloads);
        let changed =
            existing.is_none() || was_stale || diff.as_array().is_some_and(|a| !a.is_empty());
        let release = spec.as_ref().and_then(|s| s.declaration.release_id.clone());
        row.workloads = Set(to_json(workloads)?);
        row.stale = Set(false);
        row.last_error = Set(None);
        row.current_release_id = Set(release.clone());
        row.compared_with = Set(Some(key));
        let first = existing.is_none();
        put(txn, deferred, row, first).await?;
        if !first {
            // Its workload rows are only ever written with its inventory.
            workload_rows::Entity::delete_many()
                .filter(workload_rows::Column::TenantId.eq(&req.tenant_id))
                .filter(workload_rows::Column::EnvironmentId.eq(&req.environment_id))
                .exec(txn)
                .await?;
        }
        for w in workloads {
            let row = workload_row(&req.tenant_id, &req.environment_id, w, now)?;
            deferred.workload(row);
        }
        if changed {
            let event = event(diff, false, release).into();
            deferred.event(&req.tenant_id, event, event_id);
        }
        // Compare with the declared specification, and take the runner's state's own drift;
        // without a specification there is nothing to drift from. Posture needs none.
        let mut found = match &spec {
            Some(spec) => {
                let mut found = compare(&spec.declaration.workloads, workloads);
                found.extend(resource_findings(resources));
                found
            }
            None => Vec::new(),
        };
        found.extend(posture_findings(posture));
        (changed, Some(found))
    };
    let standing = Standing {
        env: &env,
        open,
        rules: &rules,
        recorded: recorded.as_ref(),
        active,
    };
    let found = found.as_deref();
    let proposal_id = &req.proposal_id;
    let raised =
        raise_findings(txn, deferred, standing, found, proposal_id, acceptance, now).await?;
    Ok(RecordOutcome {
        changed,
        stale: false,
        new_findings: raised.raised,
        resolved_findings: raised.resolved,
        new_proposal: raised.new_proposal,
        superseded: raised.superseded,
    })
}

/// What the environment `env` costs an hour at `prices`, running `workloads` and a runner
/// state of `resource_types`.
pub fn priced(
    env: &Environment,
    workloads: &[ObservedWorkload],
    resource_types: &BTreeMap<String, u32>,
    prices: &PriceTable,
) -> Cost {
    let usage = Usage {
        workloads: workloads.iter().map(ObservedWorkload::usage).collect(),
        resource_types: resource_types.clone(),
    };
    cost::price(&usage, prices, env.labels.get("region").map(String::as_str))
}

/// The row of one observed workload.
fn workload_row(
    tenant_id: &str,
    environment_id: &str,
    w: &ObservedWorkload,
    now: DateTime<Utc>,
) -> Result<workload_rows::ActiveModel, Error> {
    Ok(workload_rows::ActiveModel {
        id: Set(Uuid::now_v7().to_string()),
        tenant_id: Set(tenant_id.to_owned()),
        environment_id: Set(environment_id.to_owned()),
        name: Set(w.name.clone()),
        kind: Set(w.kind.clone()),
        version: Set(w.version.clone()),
        replicas_ready: Set(w.replicas_ready as i32),
        replicas_desired: Set(w.replicas_desired as i32),
        endpoints: Set(to_json(&w.endpoints)?),
        config_refs: Set(to_json(&w.config_refs)?),
        secret_refs: Set(to_json(&w.secret_refs)?),
        health: Set(w.health.clone()),
        observed_at: Set(now),
        created_at: Set(now),
        updated_at: Set(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_models::drift::{Direction, DriftKind, ProposalState};
    use runtime_cloud_models::validation::Declaration;
    use runtime_cloud_store::findings::{self, Status};
    use runtime_cloud_store::fixtures::{self, declaration, everything, observed, workload};
    use runtime_cloud_store::{drift_rules, inventory, proposals, specifications};

    fn observation(
        env: &str,
        proposal_id: &str,
        workloads: Vec<ObservedWorkload>,
    ) -> RecordRequest {
        RecordRequest {
            tenant_id: "acme".into(),
            environment_id: env.into(),
            observation: Observation::Observed {
                workloads,
                resources: Vec::new(),
                posture: Vec::new(),
                resource_types: Default::default(),
                observed_at: Some(Utc::now()),
            },
            proposal_id: proposal_id.into(),
        }
    }

    const ALLOWED: Acceptance = Acceptance {
        option: true,
        policy_allows: true,
        fresh: true,
    };

    async fn an_observation_raises_and_resolves_findings_on(db: DatabaseConnection) {
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let api = workload("api", "1.0.0", 2);
        specifications::declare(&db, &declaration("dev", vec![api.clone()]))
            .await
            .unwrap();

        // The first observation: another version runs.
        let mut drifted = observed(&api);
        drifted.version = "1.1.0".into();
        let req = observation("dev", "p1", vec![drifted.clone()]);
        let outcome = record_observation(&db, &req, ALLOWED).await.unwrap();
        assert!(outcome.changed && !outcome.stale);
        assert_eq!((outcome.new_findings, outcome.resolved_findings), (1, 0));
        let proposal = outcome.new_proposal.clone().unwrap();
        assert_eq!(proposal.proposal_id, "p1");
        assert_eq!(proposal.direction, Direction::ApplyDeclared);
        assert!(
            proposal.auto_accept,
            "non-destructive, outside production, allowed"
        );
        let open = findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything())
            .await
            .unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(
            (open[0].kind, open[0].proposal_id.as_deref()),
            (DriftKind::Version, Some("p1"))
        );
        let inventory = inventory::find(&db, "acme", "dev").await.unwrap().unwrap();
        assert_eq!(inventory.workloads, [drifted.clone()]);
        // In the order they happened: what was observed, the drift found, its proposal.
        let record = [
            "ObservedStateChanged",
            "RuntimeDriftDetected",
            "ReconciliationProposed",
        ];
        let mut appended = Vec::new();
        for event_type in record {
            let events = fixtures::events(&db, event_type).await;
            assert_eq!(events.len(), 1, "{event_type}");
            appended.push((events[0].seq, event_type));
        }
        appended.sort();
        let appended: Vec<&str> = appended.into_iter().map(|(_, t)| t).collect();
        assert_eq!(appended, record);

        // A retried record answers the same and writes nothing twice.
        assert_eq!(
            record_observation(&db, &req, ALLOWED)
                .await
                .unwrap()
                .new_proposal,
            Some(proposal)
        );
        assert_eq!(fixtures::events(&db, "ObservedStateChanged").await.len(), 1);

        // The same drift again: no new finding, no new proposal.
        let same = record_observation(&db, &observation("dev", "p2", vec![drifted]), ALLOWED)
            .await
            .unwrap();
        assert!(!same.changed);
        assert_eq!((same.new_findings, same.new_proposal), (0, None));

        // Converged: the finding is resolved, the open proposal superseded.
        let fixed = record_observation(
            &db,
            &observation("dev", "p3", vec![observed(&api)]),
            ALLOWED,
        )
        .await
        .unwrap();
        assert_eq!((fixed.new_findings, fixed.resolved_findings), (0, 1));
        assert_eq!(fixed.superseded, ["p1"]);
        assert_eq!(fixed.new_proposal, None);
        assert!(
            findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything())
                .await
                .unwrap()
                .is_empty()
        );
        let p1 = proposals::find(&db, "acme", "p1").await.unwrap().unwrap();
        assert_eq!(p1.state, ProposalState::Superseded);
        // Its workflow is told after the commit; until it is marked told, every record of the
        // environment names it again (the record retried after a worker was killed first).
        let retried = record_observation(
            &db,
            &observation("dev", "p3", vec![observed(&api)]),
            ALLOWED,
        )
        .await
        .unwrap();
        assert_eq!(retried.superseded, ["p1"], "named again until told");
        proposals::mark_told(&db, &retried.superseded)
            .await
            .unwrap();
        let told = record_observation(
            &db,
            &observation("dev", "p3b", vec![observed(&api)]),
            ALLOWED,
        )
        .await
        .unwrap();
        assert!(told.superseded.is_empty(), "told: {:?}", told.superseded);

        // Something unmanaged appears: destructive to remove, so an operator decides.
        let mut stray = observed(&workload("debug-shell", "0.1", 1));
        stray.kind = "pod".into();
        let stray = record_observation(
            &db,
            &observation("dev", "p4", vec![observed(&api), stray]),
            ALLOWED,
        )
        .await
        .unwrap();
        let p4 = stray.new_proposal.unwrap();
        assert_eq!(
            p4.direction,
            Direction::AdoptObserved,
            "only unmanaged: adopt it"
        );
        assert!(!p4.destructive && p4.auto_accept);
        let refused = record_observation(
            &db,
            &observation("dev", "p4", vec![observed(&api)]),
            Acceptance {
                policy_allows: false,
                ..ALLOWED
            },
        )
        .await
        .unwrap();
        assert!(
            !refused.new_proposal.unwrap().auto_accept,
            "the policy decides on a retry too"
        );
        let late = record_observation(
            &db,
            &observation("dev", "p4", vec![observed(&api)]),
            Acceptance {
                fresh: false,
                ..ALLOWED
            },
        )
        .await
        .unwrap();
        assert!(
            !late.new_proposal.unwrap().auto_accept,
            "never on an observation older than StalenessMinutes"
        );
    }

    /// A run's observation read before the sweep's but recorded after it (they run
    /// concurrently) changes nothing: the newer one's findings and proposal stand.
    #[tokio::test]
    async fn an_observation_older_than_the_recorded_one_changes_nothing() {
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let api = workload("api", "1.0.0", 2);
        specifications::declare(&db, &declaration("dev", vec![api.clone()]))
            .await
            .unwrap();
        let read_at = |req: &mut RecordRequest, at: DateTime<Utc>| {
            if let Observation::Observed { observed_at, .. } = &mut req.observation {
                *observed_at = Some(at);
            }
        };
        let before = Utc::now() - chrono::Duration::seconds(5);
        let mut drifted = observed(&api);
        drifted.version = "1.1.0".into();
        let newer = observation("dev", "p1", vec![drifted]);
        let raised = record_observation(&db, &newer, ALLOWED).await.unwrap();
        assert_eq!(raised.new_findings, 1);

        let mut older = observation("dev", "p2", vec![observed(&api)]);
        read_at(&mut older, before);
        assert_eq!(
            record_observation(&db, &older, ALLOWED).await.unwrap(),
            RecordOutcome::default()
        );
        let open = findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything())
            .await
            .unwrap();
        assert_eq!(open.len(), 1, "the newer observation's finding stays open");
        let p1 = proposals::find(&db, "acme", "p1").await.unwrap().unwrap();
        assert_eq!(p1.state, ProposalState::Proposed);
        let inventory = inventory::find(&db, "acme", "dev").await.unwrap().unwrap();
        assert_eq!(inventory.workloads[0].version, "1.1.0");

        // The newer record retried after the older one still answers its proposal.
        assert_eq!(
            record_observation(&db, &newer, ALLOWED)
                .await
                .unwrap()
                .new_proposal,
            raised.new_proposal
        );
    }

    /// What a batch of environments leaves behind: per environment, its inventory's versions
    /// and its findings (kind, resource, open, suppressed), sorted.
    async fn state(db: &DatabaseConnection, envs: &[(&str, &str)]) -> Vec<String> {
        let mut out = Vec::new();
        for (tenant, env) in envs {
            let workloads = inventory::find(db, tenant, env).await.unwrap().map(|i| {
                i.workloads
                    .iter()
                    .map(|w| w.version.clone())
                    .collect::<Vec<_>>()
            });
            out.push(format!("{tenant}/{env} inventory {workloads:?}"));
            let page = everything();
            let mut shown: Vec<String> = findings::list(db, tenant, env, None, None, &page)
                .await
                .unwrap()
                .iter()
                .map(|f| {
                    let (open, suppressed) = (f.resolved_at.is_none(), f.suppressed_by.is_some());
                    format!(
                        "{tenant}/{env} {} {} {open} {suppressed}",
                        f.kind, f.resource
                    )
                })
                .collect();
            shown.sort();
            out.extend(shown);
        }
        out
    }

    /// What an outcome says, without the ids the database made up.
    fn shown(outcomes: &[RecordOutcome]) -> Vec<String> {
        outcomes
            .iter()
            .map(|o| {
                let proposal = o.new_proposal.as_ref().map(|p| {
                    (
                        &p.proposal_id,
                        &p.environment_id,
                        p.direction,
                        p.auto_accept,
                    )
                });
                format!(
                    "{} {} +{} -{} {proposal:?} {:?}",
                    o.changed, o.stale, o.new_findings, o.resolved_findings, o.superseded
                )
            })
            .collect()
    }

    /// Environments of two tenants with the same ids, one with two specification versions, a
    /// tenant default rule and an environment's own, and one removed: recorded as one batch
    /// ([`record_observations`], one query per table) they leave what recording them one by one
    /// ([`record_observation`]) leaves, through a first observation, its retry and a convergence.
    async fn a_batch_records_what_one_by_one_records_on(
        one: DatabaseConnection,
        batch: DatabaseConnection,
    ) {
        use runtime_cloud_models::drift_rules::RuleMatch;
        use runtime_cloud_store::environments::{self, NewEnvironment};
        let api = workload("api", "1.0.0", 2);
        let worker = workload("worker", "1.0.0", 1);
        let api2 = workload("api", "2.0.0", 2);
        for db in [&one, &batch] {
            for (tenant, env) in [("acme", "dev"), ("acme", "qa"), ("globex", "dev")] {
                let new = NewEnvironment {
                    tenant_id: tenant.into(),
                    environment_id: env.into(),
                    project_id: "shop".into(),
                    class: EnvironmentClass::NonProduction,
                    target: Default::default(),
                    mode: None,
                    labels: Default::default(),
                    customer_tenant_id: None,
                    pool_id: None,
                    expires_at: None,
                };
                environments::register(db, new).await.unwrap();
                let declared = Declaration {
                    tenant_id: tenant.into(),
                    ..declaration(env, vec![api.clone(), worker.clone()])
                };
                specifications::declare(db, &declared).await.unwrap();
            }
            // acme/dev declares api 2.0.0 since: its latest version is the one compared.
            let v2 = declaration("dev", vec![api2.clone(), worker.clone()]);
            specifications::declare(db, &v2).await.unwrap();
            let rule = |environment_id: Option<&str>, workload: &str| drift_rules::NewRule {
                tenant_id: "acme".into(),
                environment_id: environment_id.map(Into::into),
                matcher: RuleMatch {
                    kind: DriftKind::Missing,
                    workload: workload.into(),
                    field: None,
                    manager: None,
                    rule: None,
                },
                owner: "platform".into(),
                reason: "started by hand".into(),
                expires_at: None,
                created_by: "alice".into(),
            };
            drift_rules::create(db, rule(None, "worker")).await.unwrap();
            drift_rules::create(db, rule(Some("qa"), "api"))
                .await
                .unwrap();
        }
        let envs = [
            ("acme", "dev"),
            ("acme", "qa"),
            ("globex", "dev"),
            ("acme", "gone"),
        ];
        let round = |n: u32, workloads: Vec<ObservedWorkload>| {
            envs.iter()
                .map(|(tenant, env)| RecordRequest {
                    tenant_id: (*tenant).into(),
                    ..observation(env, &format!("p{n}-{tenant}-{env}"), workloads.clone())
                })
                .collect::<Vec<_>>()
        };
        // Nothing runs; the retry of the same round; then what acme/dev declares runs.
        let rounds = [
            round(1, Vec::new()),
            round(1, Vec::new()),
            round(2, vec![observed(&api2), observed(&worker)]),
        ];
        for reqs in rounds {
            let mut alone = Vec::new();
            for req in &reqs {
                alone.push(record_observation(&one, req, ALLOWED).await.unwrap());
            }
            let with: Vec<_> = reqs.iter().map(|r| (r.clone(), ALLOWED)).collect();
            let together = record_observations(&batch, &with).await.unwrap();
            assert_eq!(shown(&together), shown(&alone));
            assert_eq!(state(&batch, &envs).await, state(&one, &envs).await);
        }
        // acme/dev compared with its version 2 (api 2.0.0), then converged; acme's default rule
        // suppressed the missing worker in acme's environments only, qa's own rule its api.
        assert_eq!(
            state(&batch, &envs).await,
            [
                r#"acme/dev inventory Some(["2.0.0", "1.0.0"])"#,
                "acme/dev missing deployment/api false false",
                "acme/dev missing deployment/worker false true",
                r#"acme/qa inventory Some(["2.0.0", "1.0.0"])"#,
                "acme/qa missing deployment/api false true",
                "acme/qa missing deployment/worker false true",
                "acme/qa version deployment/api true false",
                r#"globex/dev inventory Some(["2.0.0", "1.0.0"])"#,
                "globex/dev missing deployment/api false false",
                "globex/dev missing deployment/worker false false",
                "globex/dev version deployment/api true false",
                "acme/gone inventory None",
            ]
        );
        assert_eq!(
            fixtures::events(&batch, "RuntimeDriftDetected").await.len(),
            fixtures::events(&one, "RuntimeDriftDetected").await.len()
        );
    }

    #[tokio::test]
    async fn a_batch_records_what_one_by_one_records_sqlite() {
        a_batch_records_what_one_by_one_records_on(
            fixtures::sqlite().await,
            fixtures::sqlite().await,
        )
        .await;
    }

    #[tokio::test]
    async fn a_batch_records_what_one_by_one_records_postgres() {
        let (one, batch) = (fixtures::postgres().await, fixtures::postgres().await);
        a_batch_records_what_one_by_one_records_on(one, batch).await;
    }

    /// Two batches of a sweep's page recorded at once, as PostgreSQL does
    /// ([`batches_at_once`]), then their retries at once: every environment's inventory,
    /// workload, finding, proposal and events are written once, as one batch after the other
    /// would write them, and the retries answer the same proposals and write nothing more.
    #[tokio::test]
    async fn two_batches_at_once_record_each_environment_once_postgres() {
        let db = fixtures::postgres().await;
        assert_eq!(batches_at_once(&db), 2);
        assert_eq!(batches_at_once(&fixtures::sqlite().await), 1);
        let api = workload("api", "1.0.0", 2);
        let mut drifted = observed(&api);
        drifted.version = "1.1.0".into();
        let envs: Vec<String> = (0..40).map(|i| format!("env-{i:02}")).collect();
        for env in &envs {
            fixtures::environment(&db, env, EnvironmentClass::NonProduction).await;
            specifications::declare(&db, &declaration(env, vec![api.clone()]))
                .await
                .unwrap();
        }
        let batch = |envs: &[String]| {
            envs.iter()
                .map(|env| {
                    let req = observation(env, &format!("p-{env}"), vec![drifted.clone()]);
                    (req, ALLOWED)
                })
                .collect::<Vec<_>>()
        };
        let (first, second) = envs.split_at(envs.len() / 2);
        let (first, second) = (batch(first), batch(second));
        for _try in ["first", "retry"] {
            let (a, b) = tokio::join!(
                record_observations(&db, &first),
                record_observations(&db, &second)
            );
            let outcomes: Vec<RecordOutcome> = [a.unwrap(), b.unwrap()].concat();
            let proposals: Vec<String> = outcomes
                .iter()
                .map(|o| {
                    o.new_proposal
                        .as_ref()
                        .expect("a proposal")
                        .proposal_id
                        .clone()
                })
                .collect();
            let expected: Vec<String> = envs.iter().map(|e| format!("p-{e}")).collect();
            assert_eq!(proposals, expected, "the retry answers the same proposals");
        }
        for env in &envs {
            let inventory = inventory::find(&db, "acme", env).await.unwrap().unwrap();
            assert_eq!(inventory.workloads, [drifted.clone()], "{env}");
            let open = findings::list(&db, "acme", env, Some(Status::Open), None, &everything())
                .await
                .unwrap();
            assert_eq!(open.len(), 1, "{env}: one open finding");
        }
        for event in ["RuntimeDriftDetected", "ObservedStateChanged"] {
            assert_eq!(
                fixtures::events(&db, event).await.len(),
                envs.len(),
                "{event}"
            );
        }
    }

    /// Registers `dev` declaring `api` 1.0.0; returns it and an observation of it drifted to
    /// 1.1.0.
    async fn dev_declaring_api(
        db: &DatabaseConnection,
    ) -> (runtime_cloud_models::Workload, ObservedWorkload) {
        fixtures::environment(db, "dev", EnvironmentClass::NonProduction).await;
        let api = workload("api", "1.0.0", 2);
        specifications::declare(db, &declaration("dev", vec![api.clone()]))
            .await
            .unwrap();
        let mut drifted = observed(&api);
        drifted.version = "1.1.0".into();
        (api, drifted)
    }

    /// A proposal recorded by a sweep's page ([`record_observations`]) that failed before
    /// starting its workflow is answered again by the environment's next observation (another
    /// proposal id, the same drift), until its start is marked; then nothing is answered.
    #[tokio::test]
    async fn a_proposal_whose_start_was_not_marked_is_answered_again() {
        let db = fixtures::sqlite().await;
        let (_, drifted) = dev_declaring_api(&db).await;
        let first = [(observation("dev", "p1", vec![drifted.clone()]), ALLOWED)];
        let raised = record_observations(&db, &first).await.unwrap();
        assert_eq!(raised[0].new_proposal.as_ref().unwrap().proposal_id, "p1");

        let next = || observation("dev", "p2", vec![drifted.clone()]);
        let again = record_observation(&db, &next(), ALLOWED).await.unwrap();
        let answered = again.new_proposal.expect("p1 answered again");
        assert_eq!(
            (answered.proposal_id.as_str(), again.new_findings),
            ("p1", 0)
        );
        assert!(proposals::find(&db, "acme", "p2").await.unwrap().is_none());

        proposals::mark_started(&db, &["p1".to_owned()])
            .await
            .unwrap();
        let settled = record_observation(&db, &next(), ALLOWED).await.unwrap();
        assert_eq!(settled.new_proposal, None);
        let p1 = proposals::find(&db, "acme", "p1").await.unwrap().unwrap();
        assert_eq!(p1.state, ProposalState::Proposed);
    }

    /// Two observations of one environment recorded at once on PostgreSQL (a sweep's and a
    /// run's after-apply one), the older showing drift and the newer none: whichever commits
    /// first, the environment ends as the newer one shows, with no finding left open.
    #[tokio::test]
    async fn two_records_of_one_environment_at_once_end_as_the_newer_shows_postgres() {
        let db = fixtures::postgres().await;
        let (api, drifted) = dev_declaring_api(&db).await;
        let start = Utc::now() - chrono::Duration::minutes(1);
        let at = |req: &mut RecordRequest, secs: i64| {
            if let Observation::Observed { observed_at, .. } = &mut req.observation {
                *observed_at = Some(start + chrono::Duration::seconds(secs));
            }
        };
        let mut first = observation("dev", "first", vec![observed(&api)]);
        at(&mut first, -1);
        record_observation(&db, &first, ALLOWED).await.unwrap();
        for round in 0..10 {
            let mut older = observation("dev", &format!("older-{round}"), vec![drifted.clone()]);
            at(&mut older, 2 * round);
            let mut newer = observation("dev", &format!("newer-{round}"), vec![observed(&api)]);
            at(&mut newer, 2 * round + 1);
            let (a, b) = tokio::join!(
                record_observation(&db, &older, ALLOWED),
                record_observation(&db, &newer, ALLOWED)
            );
            a.unwrap();
            b.unwrap();
            let inventory = inventory::find(&db, "acme", "dev").await.unwrap().unwrap();
            assert_eq!(inventory.workloads[0].version, "1.0.0", "round {round}");
            let open = findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything())
                .await
                .unwrap();
            assert!(open.is_empty(), "round {round}: {open:?}");
        }
    }

    // The one-open-finding-per-resource index is a partial index, written in SQL.
    fixtures::on_both_databases!(
        an_observation_raises_and_resolves_findings_and_a_proposal_sqlite,
        an_observation_raises_and_resolves_findings_and_a_proposal_postgres,
        an_observation_raises_and_resolves_findings_on
    );

    /// A rule suppresses the HPA's replica drift: recorded, not proposed, not announced; the
    /// finding reopens (announced, proposed) at the first observation after the rule goes.
    #[tokio::test]
    async fn a_drift_rule_suppresses_until_it_expires() {
        use runtime_cloud_models::drift_rules::RuleMatch;
        use runtime_cloud_models::observation::ChangedBy;
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let api = workload("api", "1.0.0", 2);
        specifications::declare(&db, &declaration("dev", vec![api.clone()]))
            .await
            .unwrap();
        let expires_at = Utc::now() + chrono::Duration::seconds(30);
        let rule = drift_rules::create(
            &db,
            drift_rules::NewRule {
                tenant_id: "acme".into(),
                environment_id: None,
                matcher: RuleMatch {
                    kind: DriftKind::Replica,
                    workload: "*".into(),
                    field: Some("spec.replicas".into()),
                    manager: Some("horizontal-pod-autoscaler".into()),
                    rule: None,
                },
                owner: "platform".into(),
                reason: "the HPA scales api".into(),
                expires_at: Some(expires_at),
                created_by: "alice".into(),
            },
        )
        .await
        .unwrap();
        let mut scaled = observed(&api);
        scaled.replicas_desired = 4;
        scaled.replicas_ready = 4;
        scaled.source_version = Some("41".into());
        scaled.changed_by.replicas = Some(ChangedBy {
            manager: "horizontal-pod-autoscaler".into(),
            operation: "Update".into(),
            time: None,
            field: "spec.replicas".into(),
            subresource: Some("scale".into()),
        });
        let first = record_observation(
            &db,
            &observation("dev", "p1", vec![scaled.clone()]),
            ALLOWED,
        )
        .await
        .unwrap();
        assert_eq!((first.new_findings, first.new_proposal), (1, None));
        let suppressed = findings::list(
            &db,
            "acme",
            "dev",
            Some(Status::Suppressed),
            None,
            &everything(),
        )
        .await
        .unwrap();
        assert_eq!(suppressed.len(), 1);
        assert_eq!(
            suppressed[0].suppressed_by.as_deref(),
            Some(rule.rule_id.as_str())
        );
        assert_eq!(
            suppressed[0]
                .changed_by
                .as_ref()
                .map(|c| c.manager.as_str()),
            Some("horizontal-pod-autoscaler")
        );
        let open =
            findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything()).await;
        assert!(open.unwrap().is_empty());
        assert!(
            fixtures::events(&db, "RuntimeDriftDetected")
                .await
                .is_empty()
        );

        // Unchanged objects, unchanged rules: the comparison is skipped.
        let again = record_observation(
            &db,
            &observation("dev", "p2", vec![scaled.clone()]),
            ALLOWED,
        )
        .await
        .unwrap();
        assert_eq!(again, RecordOutcome::default());

        // Removing the rule reopens it at the next observation (as its expiry does: the
        // rules in force are those active at the observation's time).
        drift_rules::delete(&db, "acme", None, &rule.rule_id)
            .await
            .unwrap();
        let reopened = record_observation(&db, &observation("dev", "p3", vec![scaled]), ALLOWED)
            .await
            .unwrap();
        assert_eq!(reopened.new_findings, 0, "the same finding, reopened");
        assert!(reopened.new_proposal.is_some(), "and proposed now");
        let open = findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything())
            .await
            .unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].finding_id, suppressed[0].finding_id);
        assert_eq!(fixtures::events(&db, "RuntimeDriftDetected").await.len(), 1);
    }

    /// A posture finding stands while the namespace is observed the same (those records read
    /// no posture finding: they do not compare), and is resolved by the first observation
    /// that no longer shows its violation.
    #[tokio::test]
    async fn a_posture_finding_stands_until_an_observation_no_longer_shows_it() {
        use runtime_cloud_models::posture::Violation;
        let db = fixtures::sqlite().await;
        let (api, _) = dev_declaring_api(&db).await;
        let with_posture = |proposal_id: &str, posture: Vec<Violation>| {
            let mut req = observation("dev", proposal_id, vec![observed(&api)]);
            if let Observation::Observed { posture: p, .. } = &mut req.observation {
                *p = posture;
            }
            req
        };
        let privileged = Violation {
            rule: "privileged-container".into(),
            resource: "deployment/api".into(),
            detail: "api".into(),
        };
        let open = || async {
            findings::list(&db, "acme", "dev", Some(Status::Open), None, &everything())
                .await
                .unwrap()
                .into_iter()
                .map(|f| (f.kind, f.rule))
                .collect::<Vec<_>>()
        };
        let first = record_observation(&db, &with_posture("p1", vec![privileged.clone()]), ALLOWED)
            .await
            .unwrap();
        assert_eq!((first.new_findings, first.new_proposal), (1, None));
        let posture = vec![(DriftKind::Posture, Some("privileged-container".to_owned()))];
        assert_eq!(open().await, posture);
        for (i, proposal_id) in ["p2", "p3"].into_iter().enumerate() {
            let again = with_posture(proposal_id, vec![privileged.clone()]);
            let outcome = record_observation(&db, &again, ALLOWED).await.unwrap();
            assert_eq!(outcome, RecordOutcome::default(), "record {i}");
            assert_eq!(open().await, posture, "record {i}");
        }
        let fixed = record_observation(&db, &with_posture("p4", Vec::new()), ALLOWED)
            .await
            .unwrap();
        assert_eq!((fixed.resolved_findings, fixed.new_proposal), (1, None));
        assert_eq!(open().await, []);
        assert_eq!(fixtures::events(&db, "RuntimeDriftDetected").await.len(), 1);
    }

    #[tokio::test]
    async fn an_unreachable_target_marks_stale_and_raises_nothing() {
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::Production).await;
        specifications::declare(&db, &declaration("dev", vec![workload("api", "1.0.0", 2)]))
            .await
            .unwrap();
        let req = RecordRequest {
            tenant_id: "acme".into(),
            environment_id: "dev".into(),
            observation: Observation::Unreachable {
                reason: "target unreachable".into(),
            },
            proposal_id: "p1".into(),
        };
        let outcome = record_observation(&db, &req, ALLOWED).await.unwrap();
        assert!(outcome.changed && outcome.stale);
        assert_eq!((outcome.new_findings, outcome.new_proposal), (0, None));
        let inventory = inventory::find(&db, "acme", "dev").await.unwrap().unwrap();
        assert!(inventory.stale && inventory.observed_at.is_none());
        assert_eq!(inventory.last_error.as_deref(), Some("target unreachable"));
        // Unreachable again: already stale, nothing to announce.
        let again = RecordRequest {
            proposal_id: "p2".into(),
            ..req
        };
        assert!(
            !record_observation(&db, &again, ALLOWED)
                .await
                .unwrap()
                .changed
        );
    }

    #[tokio::test]
    async fn stored_workloads_that_do_not_read_are_an_error_not_an_empty_list() {
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        record_observation(&db, &observation("dev", "p1", vec![]), ALLOWED)
            .await
            .unwrap();
        fixtures::execute(
            &db,
            "UPDATE runtime_inventories SET workloads = '{\"api\": 1}'",
        )
        .await;
        let err = inventory::find(&db, "acme", "dev").await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    table: TABLE,
                    column: "workloads",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            record_observation(&db, &observation("dev", "p2", vec![]), ALLOWED)
                .await
                .is_err()
        );
    }
}
