//! The chaos soak's invariant checker: what must hold after any mix of killed processes and cut
//! connections, once the faults are healed and the product has had time to finish what it was
//! doing. [`Facts::gather`] reads everything once — the read tables, the sandbox targets' apply
//! logs, every workflow Temporal knows (with each run's and proposal's result or queried
//! state), each semaphore's holders and waiters, every message in the JetStream stream — and each invariant
//! is a pure function of those facts, so its verdict names exactly what broke it.

use super::Stack;
use super::nats::Nats;
use futures::StreamExt;
use runtime_cloud_activities::sandbox::{ApplyLogEntry, SandboxDocument};
use runtime_cloud_models::drift::{ProposalState, compare};
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::{RunStatus, Workload};
use runtime_cloud_store::entities::{
    capacity_leases as leases, deployment_specifications as specs, drift_findings as findings,
    outbox_events as outbox, provisioning_runs as runs, reconciliation_proposals as proposals,
    run_starts, runtime_inventories as inventories, semaphores,
};
use runtime_cloud_store::semaphores::Holders;
use runtime_cloud_workflows::{ProvisioningRun, ReconciliationProposal};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use temporalio_client::{WorkflowExecutionStatus, WorkflowQueryOptions};

/// One invariant's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub name: &'static str,
    pub held: bool,
    /// What was checked when it held; what broke it when it did not.
    pub detail: String,
}

impl Verdict {
    /// Held when nothing broke it (`checked` says what was checked), else broken by the cases
    /// listed.
    pub fn of(name: &'static str, checked: String, broken: Vec<String>) -> Verdict {
        if broken.is_empty() {
            return Verdict {
                name,
                held: true,
                detail: checked,
            };
        }
        // The first few cases name the bug; thousands would bury it.
        let shown: Vec<&String> = broken.iter().take(12).collect();
        let more = broken.len().saturating_sub(shown.len());
        let mut detail = format!("{} case(s):", broken.len());
        for b in shown {
            detail.push_str("\n      - ");
            detail.push_str(b);
        }
        if more > 0 {
            detail.push_str(&format!("\n      … and {more} more"));
        }
        Verdict {
            name,
            held: false,
            detail,
        }
    }
}

/// What Temporal says about one workflow execution.
#[derive(Debug, Clone)]
pub struct Workflow {
    pub id: String,
    pub kind: String,
    pub status: WorkflowExecutionStatus,
    /// A run's result (completed) or `state` query (running).
    pub run: Option<RunStatus>,
    /// A proposal's result (completed) or `state` query (running).
    pub proposal: Option<ProposalState>,
    /// Why the result or query could not be read.
    pub unreadable: Option<String>,
}

/// Everything the invariants look at, read once.
#[derive(Debug, Default)]
pub struct Facts {
    pub runs: Vec<runs::Model>,
    pub proposals: Vec<proposals::Model>,
    /// Open, unsuppressed findings.
    pub open_findings: Vec<findings::Model>,
    pub inventories: Vec<inventories::Model>,
    /// Each environment's latest declared workloads.
    pub declared: BTreeMap<String, Vec<Workload>>,
    /// Every outbox row: event id, published.
    pub outbox: Vec<(String, bool)>,
    /// Runs written whose workflow may not have started yet (`run_starts`), by run id.
    pub unstarted: Vec<String>,
    /// The `Nats-Msg-Id` of every message a consumer of the stream receives.
    pub delivered: Vec<String>,
    /// Every outbox event id, read again after the stream: an event written and published
    /// between the first read and the stream's (a scheduled observation's) has its row here.
    pub outbox_after_stream: BTreeSet<String>,
    /// Every capacity lease of the tenant: run id, lease id, state.
    pub leases: Vec<(String, String, String)>,
    /// Each environment's sandbox apply log.
    pub applies: BTreeMap<String, Vec<ApplyLogEntry>>,
    /// Every workflow execution (continued-as-new ones too).
    pub workflows: Vec<Workflow>,
    /// The tenant's semaphores (environment locks, capacity): who holds, who waits.
    pub semaphores: BTreeMap<String, Holders>,
}

impl Facts {
    /// Reads the facts of `tenant` (the stack's name for it) on `stack`, with the stream of
    /// `nats` when the product relays to it.
    pub async fn gather(stack: &Stack, tenant: &str, nats: Option<&Nats>) -> Facts {
        let mut facts = Facts::default();
        facts.read_tables(stack, tenant).await;
        facts.read_targets(stack, tenant);
        facts.workflows = workflows(stack, true).await;
        if let Some(nats) = nats {
            facts.delivered = nats.messages().await.into_iter().map(|m| m.1).collect();
            facts.outbox_after_stream = outbox::Entity::find()
                .all(&stack.db().await)
                .await
                .expect("outbox")
                .into_iter()
                .map(|e| e.event_id)
                .collect();
        }
        facts
    }

    /// The facts [`Facts::settled`] needs, cheaper to read while waiting for it: the tables
    /// and what the running workflows say (no results of ended ones, no targets, no stream).
    pub async fn progress(stack: &Stack, tenant: &str) -> Facts {
        let mut facts = Facts::default();
        facts.read_tables(stack, tenant).await;
        facts.workflows = workflows(stack, false).await;
        facts
    }

    async fn read_tables(&mut self, stack: &Stack, tenant: &str) {
        let db = stack.db().await;
        self.runs = runs::Entity::find()
            .filter(runs::Column::TenantId.eq(tenant))
            .all(&db)
            .await
            .expect("runs");
        self.proposals = proposals::Entity::find()
            .filter(proposals::Column::TenantId.eq(tenant))
            .all(&db)
            .await
            .expect("proposals");
        self.open_findings = findings::Entity::find()
            .filter(findings::Column::TenantId.eq(tenant))
            .filter(findings::Column::ResolvedAt.is_null())
            .filter(findings::Column::SuppressedBy.is_null())
            .all(&db)
            .await
            .expect("findings");
        self.inventories = inventories::Entity::find()
            .filter(inventories::Column::TenantId.eq(tenant))
            .all(&db)
            .await
            .expect("inventories");
        // Oldest first, so the last one written per environment is its latest.
        for spec in specs::Entity::find()
            .filter(specs::Column::TenantId.eq(tenant))
            .order_by_asc(specs::Column::Version)
            .all(&db)
            .await
            .expect("specifications")
        {
            let workloads: Vec<Workload> =
                serde_json::from_value(spec.workloads).expect("declared workloads");
            self.declared.insert(spec.environment_id, workloads);
        }
        self.outbox = outbox::Entity::find()
            .all(&db)
            .await
            .expect("outbox")
            .into_iter()
            .map(|e| (e.event_id, e.published_at.is_some()))
            .collect();
        self.leases = leases::Entity::find()
            .filter(leases::Column::TenantId.eq(tenant))
            .all(&db)
            .await
            .expect("capacity leases")
            .into_iter()
            .map(|l| (l.run_id, l.lease_id, l.state))
            .collect();
        self.unstarted = run_starts::Entity::find()
            .filter(run_starts::Column::TenantId.eq(tenant))
            .all(&db)
            .await
            .expect("run starts")
            .into_iter()
            .map(|s| s.provisioning_run_id)
            .collect();
        let ids: Vec<String> = semaphores::Entity::find()
            .filter(semaphores::Column::TenantId.eq(tenant))
            .all(&db)
            .await
            .expect("semaphores")
            .into_iter()
            .map(|s| s.id)
            .collect();
        for id in ids {
            let holders = runtime_cloud_store::semaphores::holders(&db, &id)
                .await
                .expect("a semaphore's holders")
                .unwrap_or_default();
            self.semaphores.insert(id, holders);
        }
    }

    fn read_targets(&mut self, stack: &Stack, tenant: &str) {
        let dir = stack.data_path().join("sandbox").join(tenant);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let env = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            let doc: SandboxDocument =
                serde_json::from_slice(&std::fs::read(&path).expect("sandbox document"))
                    .expect("a sandbox document that reads");
            self.applies.insert(env, doc.apply_log);
        }
    }

    /// The workflow ids that are running and may legitimately go on waiting: a run awaiting
    /// an operator's approval, a proposal awaiting an operator's decision, and whatever waits
    /// only on those — a run queued on a semaphore (an environment lock, a capacity
    /// semaphore) whose holders are all such runs, an accepted proposal whose run is such a
    /// run.
    pub fn legitimately_waiting(&self) -> BTreeSet<String> {
        let running: Vec<&Workflow> = self
            .workflows
            .iter()
            .filter(|w| w.status == WorkflowExecutionStatus::Running)
            .collect();
        let mut waiting: BTreeSet<String> = running
            .iter()
            .filter(|w| {
                w.run.as_ref().is_some_and(|r| {
                    r.state == Some(runtime_cloud_models::ProvisioningState::AwaitingApproval)
                }) || w.proposal == Some(ProposalState::Proposed)
            })
            .map(|w| w.id.clone())
            .collect();
        let proposal_runs: BTreeMap<String, String> = self
            .proposals
            .iter()
            .filter_map(|p| {
                let run = p.provisioning_run_id.as_ref()?;
                Some((
                    format!("proposal/{}", p.proposal_id),
                    format!("provisioning-run/{run}"),
                ))
            })
            .collect();
        loop {
            let before = waiting.len();
            for w in &running {
                if waiting.contains(&w.id) {
                    continue;
                }
                let waits = match w.kind.as_str() {
                    "ProvisioningRun" => self.semaphores.values().any(|s| {
                        s.queue.contains(&w.id)
                            && !s.holders.is_empty()
                            && s.holders.iter().all(|(h, _)| waiting.contains(h))
                    }),
                    "ReconciliationProposal" => proposal_runs
                        .get(&w.id)
                        .is_some_and(|run| waiting.contains(run)),
                    _ => false,
                };
                if waits {
                    waiting.insert(w.id.clone());
                }
            }
            if waiting.len() == before {
                return waiting;
            }
        }
    }

    /// Every running workflow waits legitimately, every outbox row is published and every run
    /// written has its workflow started: the product has finished what it was doing.
    pub fn settled(&self) -> bool {
        let waiting = self.legitimately_waiting();
        self.workflows
            .iter()
            .filter(|w| w.status == WorkflowExecutionStatus::Running)
            .all(|w| waiting.contains(&w.id))
            && self.outbox.iter().all(|(_, published)| *published)
            && self.unstarted.is_empty()
    }

    /// What keeps the product from having settled: running workflows that do not
    /// legitimately wait (by type, with a few ids) and unpublished outbox rows.
    pub fn at_work(&self) -> String {
        let waiting = self.legitimately_waiting();
        let mut by_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for w in &self.workflows {
            if w.status == WorkflowExecutionStatus::Running && !waiting.contains(&w.id) {
                by_kind.entry(&w.kind).or_default().push(&w.id);
            }
        }
        let unpublished = self.outbox.iter().filter(|(_, p)| !p).count();
        let mut parts: Vec<String> = by_kind
            .iter()
            .map(|(kind, ids)| {
                let few: Vec<&str> = ids.iter().take(3).copied().collect();
                format!("{} {kind} (e.g. {})", ids.len(), few.join(", "))
            })
            .collect();
        parts.push(format!("{unpublished} outbox rows unpublished"));
        parts.push(format!("{} runs not started yet", self.unstarted.len()));
        parts.join("; ")
    }

    /// Every invariant's verdict.
    pub fn verdicts(&self) -> Vec<Verdict> {
        vec![
            self.no_environment_applied_by_two_runs_at_once(),
            self.no_run_applied_twice(),
            self.every_run_ended_or_legitimately_waiting(),
            self.every_event_delivered_once(),
            self.read_tables_match_temporal(),
            self.open_findings_are_what_the_last_observation_shows(),
            self.no_lease_outlives_its_run(),
            self.no_semaphore_slot_outlives_its_run(),
        ]
    }

    /// The sandbox logs when each apply was asked for (before it waits for the target's
    /// locks) and when it finished: two applies of one environment whose intervals overlap
    /// ran at once, which the environment lock exists to prevent.
    pub fn no_environment_applied_by_two_runs_at_once(&self) -> Verdict {
        let mut broken = Vec::new();
        let mut entries = 0;
        for (env, log) in &self.applies {
            entries += log.len();
            let mut sorted: Vec<&ApplyLogEntry> = log.iter().collect();
            sorted.sort_by_key(|e| e.started_at);
            let mut busy: Option<&ApplyLogEntry> = None;
            for e in sorted {
                if let Some(b) = busy
                    && e.started_at < b.finished_at
                {
                    broken.push(format!(
                        "{env}: run {} applied {}–{} while run {} applied {}–{}",
                        e.run_id,
                        e.started_at.format("%H:%M:%S%.3f"),
                        e.finished_at.format("%H:%M:%S%.3f"),
                        b.run_id,
                        b.started_at.format("%H:%M:%S%.3f"),
                        b.finished_at.format("%H:%M:%S%.3f"),
                    ));
                }
                if busy.is_none_or(|b| e.finished_at > b.finished_at) {
                    busy = Some(e);
                }
            }
        }
        Verdict::of(
            "no environment applied by two runs at once",
            format!(
                "{entries} applies on {} environments, none overlapping",
                self.applies.len()
            ),
            broken,
        )
    }

    /// Each run id appears at most once in all the targets' apply logs, only in its own
    /// environment's, and every run the tables show `Applied` appears exactly once.
    pub fn no_run_applied_twice(&self) -> Verdict {
        let mut broken = Vec::new();
        let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (env, log) in &self.applies {
            for e in log {
                seen.entry(&e.run_id).or_default().push(env);
            }
        }
        let rows: BTreeMap<&str, &runs::Model> = self
            .runs
            .iter()
            .map(|r| (r.provisioning_run_id.as_str(), r))
            .collect();
        for (run, envs) in &seen {
            if envs.len() > 1 {
                broken.push(format!("run {run} applied {} times: {envs:?}", envs.len()));
            }
            match rows.get(run) {
                None => broken.push(format!("run {run} applied but not in the tables")),
                Some(r) if envs.iter().any(|e| *e != r.environment_id) => broken.push(format!(
                    "run {run} of {} applied to {envs:?}",
                    r.environment_id
                )),
                Some(_) => {}
            }
        }
        let mut applied = 0;
        for r in &self.runs {
            if r.state.as_deref() == Some("Applied") {
                applied += 1;
                let n = seen.get(r.provisioning_run_id.as_str()).map_or(0, Vec::len);
                if n != 1 {
                    broken.push(format!(
                        "run {} is Applied but its target logged {n} applies",
                        r.provisioning_run_id
                    ));
                }
            }
        }
        Verdict::of(
            "no run applied twice",
            format!(
                "{} runs applied to a target, each once; {applied} Applied runs, each in its target's log",
                seen.len()
            ),
            broken,
        )
    }

    /// Every run's row is in a terminal state or its workflow legitimately waits; no workflow
    /// of any type failed, timed out or was terminated; every running workflow legitimately
    /// waits.
    pub fn every_run_ended_or_legitimately_waiting(&self) -> Verdict {
        const TERMINAL: [&str; 4] = ["Applied", "Failed", "Rejected", "Cancelled"];
        let waiting = self.legitimately_waiting();
        let mut broken = Vec::new();
        let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
        for r in &self.runs {
            let state = r.state.clone().unwrap_or_else(|| "(none)".into());
            *by_state.entry(state.clone()).or_default() += 1;
            let id = format!("provisioning-run/{}", r.provisioning_run_id);
            if !TERMINAL.contains(&state.as_str()) && !waiting.contains(&id) {
                broken.push(format!(
                    "run {} of {} is {state} and not legitimately waiting",
                    r.provisioning_run_id, r.environment_id
                ));
            }
        }
        for w in &self.workflows {
            match w.status {
                WorkflowExecutionStatus::Completed | WorkflowExecutionStatus::ContinuedAsNew => {}
                WorkflowExecutionStatus::Running if waiting.contains(&w.id) => {}
                other => broken.push(format!("{} {} is {other:?}", w.kind, w.id)),
            }
        }
        Verdict::of(
            "every run in a terminal state or legitimately waiting",
            format!(
                "runs by state {by_state:?}; {} workflows, {} legitimately waiting",
                self.workflows.len(),
                waiting.len()
            ),
            broken,
        )
    }

    /// A run that ended holds no capacity lease and waits for none: each of its leases is
    /// `released` or `expired`. One left `waiting` or `granted` counts against its project's
    /// quota for good, and admission starts no deferred run into a slot it thinks is taken.
    pub fn no_lease_outlives_its_run(&self) -> Verdict {
        const TERMINAL: [&str; 4] = ["Applied", "Failed", "Rejected", "Cancelled"];
        let ended: BTreeSet<&str> = self
            .runs
            .iter()
            .filter(|r| r.state.as_deref().is_some_and(|s| TERMINAL.contains(&s)))
            .map(|r| r.provisioning_run_id.as_str())
            .collect();
        let mut broken = Vec::new();
        for (run_id, lease_id, state) in &self.leases {
            if ended.contains(run_id.as_str()) && !matches!(state.as_str(), "released" | "expired")
            {
                broken.push(format!("lease {lease_id} of ended run {run_id} is {state}"));
            }
        }
        Verdict::of(
            "no lease outlives its run",
            format!(
                "{} leases of {} ended runs",
                self.leases
                    .iter()
                    .filter(|l| ended.contains(l.0.as_str()))
                    .count(),
                ended.len()
            ),
            broken,
        )
    }

    /// No run that ended (in the tables, or its workflow closed: one terminated by hand)
    /// still holds or waits for a semaphore (an environment lock, a project's capacity): its
    /// slot would be held for good, or handed to nobody. No semaphore has more holders than
    /// slots, and every holder knows it holds (its grant was signalled or it asked again).
    pub fn no_semaphore_slot_outlives_its_run(&self) -> Verdict {
        const TERMINAL: [&str; 4] = ["Applied", "Failed", "Rejected", "Cancelled"];
        let mut ended: BTreeSet<String> = self
            .runs
            .iter()
            .filter(|r| r.state.as_deref().is_some_and(|s| TERMINAL.contains(&s)))
            .map(|r| format!("provisioning-run/{}", r.provisioning_run_id))
            .collect();
        let running: BTreeSet<&str> = self
            .workflows
            .iter()
            .filter(|w| w.status == WorkflowExecutionStatus::Running)
            .map(|w| w.id.as_str())
            .collect();
        ended.extend(
            self.workflows
                .iter()
                .filter(|w| w.kind == "ProvisioningRun" && !running.contains(w.id.as_str()))
                .map(|w| w.id.clone()),
        );
        let mut broken = Vec::new();
        let mut slots = 0;
        for (id, sem) in &self.semaphores {
            if sem.holders.len() > sem.slots.max(1) as usize {
                broken.push(format!(
                    "{id}: {} holders of {} slots",
                    sem.holders.len(),
                    sem.slots
                ));
            }
            for (holder, told) in &sem.holders {
                if !told {
                    broken.push(format!("{holder} holds {id} but was never told"));
                }
            }
            let held = sem.holders.iter().map(|(h, _)| (h, "holds"));
            for (holder, how) in held.chain(sem.queue.iter().map(|w| (w, "waits for"))) {
                slots += 1;
                if ended.contains(holder) {
                    broken.push(format!("ended run {holder} still {how} {id}"));
                }
            }
        }
        Verdict::of(
            "no semaphore slot outlives its run",
            format!(
                "{slots} slots held or waited for on {} semaphores, none by an ended run, none over its slots, every holder told",
                self.semaphores.len()
            ),
            broken,
        )
    }

    /// Every outbox row was published, and a consumer of the stream receives each event id
    /// exactly once and nothing else.
    pub fn every_event_delivered_once(&self) -> Verdict {
        let mut broken = Vec::new();
        let unpublished = self.outbox.iter().filter(|(_, p)| !p).count();
        if unpublished > 0 {
            broken.push(format!("{unpublished} outbox rows never published"));
        }
        let mut delivered: BTreeMap<&str, usize> = BTreeMap::new();
        for id in &self.delivered {
            *delivered.entry(id).or_default() += 1;
        }
        let written: BTreeSet<&str> = self.outbox.iter().map(|(id, _)| id.as_str()).collect();
        for id in &written {
            match delivered.get(id) {
                Some(1) => {}
                Some(n) => broken.push(format!("event {id} delivered {n} times")),
                None => broken.push(format!("event {id} never delivered")),
            }
        }
        for id in delivered.keys() {
            if !written.contains(id) && !self.outbox_after_stream.contains(*id) {
                broken.push(format!("message {id} is no outbox event"));
            }
        }
        Verdict::of(
            "every outbox event delivered exactly once to a JetStream consumer",
            format!(
                "{} events written, {} messages delivered",
                written.len(),
                self.delivered.len()
            ),
            broken,
        )
    }

    /// Each run's and proposal's row says what its workflow says (its result when it ended,
    /// its `state` query while it runs), and every run and proposal workflow has its row.
    pub fn read_tables_match_temporal(&self) -> Verdict {
        let mut broken = Vec::new();
        let latest: BTreeMap<&str, &Workflow> = self
            .workflows
            .iter()
            .filter(|w| w.status != WorkflowExecutionStatus::ContinuedAsNew)
            .map(|w| (w.id.as_str(), w))
            .collect();
        for w in latest.values() {
            if let Some(why) = &w.unreadable {
                broken.push(format!("{} {}: {why}", w.kind, w.id));
            }
        }
        let mut compared = 0;
        let run_rows: BTreeSet<String> = self
            .runs
            .iter()
            .map(|r| format!("provisioning-run/{}", r.provisioning_run_id))
            .collect();
        for r in &self.runs {
            let id = format!("provisioning-run/{}", r.provisioning_run_id);
            let Some(status) = latest.get(id.as_str()).and_then(|w| w.run.as_ref()) else {
                if !latest.contains_key(id.as_str()) {
                    broken.push(format!(
                        "run {} has a row and no workflow",
                        r.provisioning_run_id
                    ));
                }
                continue;
            };
            compared += 1;
            let said = status.state.map(|s| s.as_str().to_owned());
            if said != r.state {
                broken.push(format!(
                    "run {}: table {:?}, Temporal {said:?}",
                    r.provisioning_run_id, r.state
                ));
            }
            // A receipt's field as the table keeps it and as the workflow's result says it.
            let mut compare =
                |what: &str, field: &str, table: &Option<Value>, temporal: Option<Value>| {
                    let (table, temporal) = (
                        table.as_ref().map(|v| v[field].clone()),
                        temporal.map(|v| v[field].clone()),
                    );
                    if table != temporal {
                        broken.push(format!(
                            "run {}: {what} in the table {table:?}, in Temporal {temporal:?}",
                            r.provisioning_run_id
                        ));
                    }
                };
            let json = |v: Option<Value>| v.filter(|v| !v.is_null());
            compare(
                "apply receipt",
                "result",
                &r.apply_receipt,
                json(serde_json::to_value(&status.apply_receipt).ok()),
            );
            compare(
                "plan",
                "inputsHash",
                &r.plan_receipt,
                json(serde_json::to_value(&status.plan_receipt).ok()),
            );
        }
        let proposal_rows: BTreeSet<String> = self
            .proposals
            .iter()
            .map(|p| format!("proposal/{}", p.proposal_id))
            .collect();
        for p in &self.proposals {
            let id = format!("proposal/{}", p.proposal_id);
            let Some(state) = latest.get(id.as_str()).and_then(|w| w.proposal) else {
                // A proposal a failed sweep page recorded but did not start is started by the
                // environment's next observation, unless that one replaced it: superseded
                // before anyone could decide, it needs no workflow.
                if !latest.contains_key(id.as_str()) && p.state != "Superseded" {
                    broken.push(format!(
                        "proposal {} ({}) has a row and no workflow",
                        p.proposal_id, p.state
                    ));
                }
                continue;
            };
            compared += 1;
            if state.as_str() != p.state {
                broken.push(format!(
                    "proposal {}: table {}, Temporal {}",
                    p.proposal_id,
                    p.state,
                    state.as_str()
                ));
            }
        }
        for w in latest.values() {
            let orphan = match w.kind.as_str() {
                "ProvisioningRun" => !run_rows.contains(&w.id),
                "ReconciliationProposal" => !proposal_rows.contains(&w.id),
                _ => false,
            };
            if orphan {
                broken.push(format!("{} {} has no row", w.kind, w.id));
            }
        }
        Verdict::of(
            "read tables consistent with what Temporal says each workflow did",
            format!(
                "{compared} runs and proposals compared ({} run rows, {} proposal rows)",
                self.runs.len(),
                self.proposals.len()
            ),
            broken,
        )
    }

    /// Each environment's open findings are exactly the differences between its latest
    /// declared workloads and its last recorded observation: none left open that the
    /// observation no longer shows (and none it shows missing).
    pub fn open_findings_are_what_the_last_observation_shows(&self) -> Verdict {
        let mut broken = Vec::new();
        let mut open: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
        for f in &self.open_findings {
            open.entry(&f.environment_id)
                .or_default()
                .insert((f.kind.clone(), f.resource.clone()));
        }
        let mut observed_envs = 0;
        for inv in &self.inventories {
            let env = inv.environment_id.as_str();
            if inv.stale || inv.observed_at.is_none() {
                continue;
            }
            observed_envs += 1;
            let workloads: Vec<ObservedWorkload> =
                serde_json::from_value(inv.workloads.clone()).expect("observed workloads");
            let declared = self.declared.get(env).cloned().unwrap_or_default();
            let shown: BTreeSet<(String, String)> = compare(&declared, &workloads)
                .into_iter()
                .map(|f| (f.kind.as_str().to_owned(), f.resource))
                .collect();
            let open_here = open.remove(env).unwrap_or_default();
            for f in open_here.difference(&shown) {
                broken.push(format!(
                    "{env}: finding {f:?} open, the last observation does not show it"
                ));
            }
            for f in shown.difference(&open_here) {
                broken.push(format!(
                    "{env}: the last observation shows {f:?}, no finding is open"
                ));
            }
        }
        for (env, left) in open {
            broken.push(format!(
                "{env}: {} findings open and no fresh observation",
                left.len()
            ));
        }
        Verdict::of(
            "no open finding left that the last observation does not show",
            format!(
                "{} open findings on {observed_envs} observed environments, each shown by its last observation",
                self.open_findings.len()
            ),
            broken,
        )
    }
}

/// Every workflow execution on the stack's Temporal server, with what each running run and
/// proposal says, and (with `results`) what each completed run and proposal
/// returned.
async fn workflows(stack: &Stack, results: bool) -> Vec<Workflow> {
    let client = stack.temporal_client().await;
    let mut listed = client.list_workflows("", Default::default());
    let mut out = Vec::new();
    while let Some(item) = listed.next().await {
        let w = item.expect("list workflows");
        out.push(Workflow {
            id: w.id().to_owned(),
            kind: w.workflow_type().to_owned(),
            status: w.status(),
            run: None,
            proposal: None,
            unreadable: None,
        });
    }
    for w in &mut out {
        let running = w.status == WorkflowExecutionStatus::Running;
        let completed = results && w.status == WorkflowExecutionStatus::Completed;
        let q = WorkflowQueryOptions::default;
        let read: Result<(), String> = match w.kind.as_str() {
            "ProvisioningRun" if running || completed => {
                let h = client.get_workflow_handle::<ProvisioningRun>(w.id.clone());
                let status = if running {
                    h.query(ProvisioningRun::state, (), q())
                        .await
                        .map_err(|e| e.to_string())
                } else {
                    h.get_result(Default::default())
                        .await
                        .map_err(|e| e.to_string())
                };
                status.map(|s| w.run = Some(s))
            }
            "ReconciliationProposal" if running || completed => {
                let h = client.get_workflow_handle::<ReconciliationProposal>(w.id.clone());
                let state = if running {
                    h.query(ReconciliationProposal::state, (), q())
                        .await
                        .map_err(|e| e.to_string())
                } else {
                    h.get_result(Default::default())
                        .await
                        .map_err(|e| e.to_string())
                };
                state.map(|s| w.proposal = Some(s))
            }
            _ => Ok(()),
        };
        if let Err(why) = read {
            w.unreadable = Some(why);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn entry(run: &str, from: i64, to: i64) -> ApplyLogEntry {
        ApplyLogEntry {
            run_id: run.into(),
            started_at: Utc.timestamp_opt(from, 0).unwrap(),
            finished_at: Utc.timestamp_opt(to, 0).unwrap(),
        }
    }

    #[test]
    fn overlapping_applies_of_one_environment_break_the_lock_invariant() {
        let mut facts = Facts::default();
        facts
            .applies
            .insert("e1".into(), vec![entry("a", 0, 10), entry("b", 10, 20)]);
        assert!(facts.no_environment_applied_by_two_runs_at_once().held);
        // c starts inside a's interval, though after b (logged later) ended.
        facts.applies.get_mut("e1").unwrap().push(entry("c", 5, 30));
        let verdict = facts.no_environment_applied_by_two_runs_at_once();
        assert!(!verdict.held);
        assert!(verdict.detail.contains("run b") && verdict.detail.contains("run c"));
    }

    #[test]
    fn a_run_logged_twice_breaks_the_once_invariant() {
        let mut facts = Facts::default();
        facts
            .applies
            .insert("e1".into(), vec![entry("a", 0, 1), entry("a", 2, 3)]);
        let verdict = facts.no_run_applied_twice();
        assert!(!verdict.held);
        assert!(
            verdict.detail.contains("run a applied 2 times"),
            "{}",
            verdict.detail
        );
    }

    #[test]
    fn an_event_delivered_twice_or_never_breaks_the_delivery_invariant() {
        let mut facts = Facts {
            outbox: vec![("e1".into(), true), ("e2".into(), true)],
            delivered: vec!["e1".into(), "e2".into()],
            ..Default::default()
        };
        assert!(facts.every_event_delivered_once().held);
        facts.delivered = vec!["e1".into(), "e1".into()];
        let verdict = facts.every_event_delivered_once();
        assert!(!verdict.held);
        assert!(verdict.detail.contains("e1 delivered 2 times"));
        assert!(verdict.detail.contains("e2 never delivered"));
    }

    #[test]
    fn a_message_is_an_outbox_event_when_its_row_was_written_by_the_time_the_stream_was_read() {
        let mut facts = Facts {
            outbox: vec![("e1".into(), true)],
            delivered: vec!["e1".into(), "e2".into()],
            ..Default::default()
        };
        let verdict = facts.every_event_delivered_once();
        assert!(verdict.detail.contains("message e2 is no outbox event"));
        facts.outbox_after_stream = ["e1".to_owned(), "e2".to_owned()].into();
        assert!(facts.every_event_delivered_once().held);
    }
}
