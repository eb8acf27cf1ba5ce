//! Faults with real processes: a worker killed mid-apply, the Temporal server killed and
//! restarted on its file store, the read DB unreachable while a run projects, two APIs with
//! two workers racing on one PostgreSQL, and a worker killed mid-sweep. Each test is bounded by
//! `eventually` deadlines.

use crate::common::proxy::Proxy;
use crate::common::temporal::OwnTemporal;
use crate::common::{Api, Db, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Makes every apply on the environment take `ms`, so a test can act while one is in flight.
fn slow_applies(stack: &Stack, tenant: &str, env: &str, ms: u64) {
    stack.sandbox_cli(tenant, env, &["apply-delay", "--ms", &ms.to_string()]);
}

/// The workflow's pending activity of this type, from `temporal workflow describe`.
fn pending_activity(stack: &Stack, workflow_id: &str, activity: &str) -> Option<Value> {
    stack.describe(workflow_id)?["pendingActivities"]
        .as_array()?
        .iter()
        .find(|a| a["activityType"]["name"] == activity)
        .cloned()
}

fn apply_log(stack: &Stack, tenant: &str, env: &str) -> Vec<Value> {
    stack.sandbox(tenant, env)["applyLog"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// 1. SIGKILL while the apply activity runs: the retried apply does the work once, and the
///    receipt is the one the target recorded.
#[tokio::test]
async fn worker_killed_mid_apply_applies_exactly_once() {
    let mut stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 2)]).await;
    slow_applies(&stack, "acme", "dev", 3_000);
    let id = api.plan_run("dev", "baseline").await;
    let workflow_id = format!("provisioning-run/{id}");
    eventually(30, "the apply activity to be running", || async {
        pending_activity(&stack, &workflow_id, "provisioning.apply")
            .filter(|a| a["state"] == "PENDING_ACTIVITY_STATE_STARTED")
    })
    .await;

    stack.kill_worker();
    assert!(
        apply_log(&stack, "acme", "dev").is_empty(),
        "the killed apply wrote nothing"
    );
    stack.start_worker();

    let run = api.wait_state(&id, "Applied").await;
    let log = apply_log(&stack, "acme", "dev");
    assert_eq!(log.len(), 1, "applied exactly once: {log:?}");
    assert_eq!(log[0]["runId"], id.as_str());
    let target = stack.sandbox("acme", "dev");
    assert_eq!(
        target["appliedRuns"][&id]["outputs"],
        run["applyReceipt"]["outputs"]
    );
    assert_eq!(run["applyReceipt"]["result"], "succeeded");
    assert_eq!(target["workloads"][0]["replicas"], 2);
    assert_eq!(stack.events("ProvisioningApplied").await.len(), 1);
}

/// 2. The Temporal server is killed and restarted on its store while a production run waits
///    for approval: the approval still reaches the run and it applies.
#[tokio::test]
async fn temporal_restarted_while_a_run_waits_for_approval() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut temporal = OwnTemporal::start(dir.path());
    temporal.wait_up().await;
    let stack = Stack::with(StackOptions {
        temporal: Some(temporal.address()),
        ..Default::default()
    })
    .await;
    let api = stack.operator("acme");
    let (id, _) = api.awaiting_approval("prod", 3).await;

    temporal.kill().await;
    temporal.spawn();
    temporal.wait_up().await;

    // The API's client reconnects; the run's workflow is still waiting on the restored store.
    eventually(
        60,
        "the approval to be accepted after the restart",
        || async { (api.decide(&id, "approve").await.status.as_u16() == 202).then_some(()) },
    )
    .await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["applyReceipt"]["result"], "succeeded");
    assert_eq!(stack.sandbox("acme", "prod")["workloads"][0]["replicas"], 3);
    assert_eq!(apply_log(&stack, "acme", "prod").len(), 1);
    drop(stack);
}

/// 3. PostgreSQL refuses connections while a run claims its approval and projects its
///    transitions: both retry, and when the DB is back the row is right and every event
///    exists exactly once.
// Multi-threaded: the proxy must keep forwarding while the harness blocks on a process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_db_unreachable_while_a_run_projects_then_recovers() {
    let postgres = Proxy::start("127.0.0.1:5432").await;
    let stack = Stack::with(StackOptions {
        db: Some(Db::Postgres),
        postgres_via: Some(postgres.addr.clone()),
        ..Default::default()
    })
    .await;
    let api = stack.operator("acme");
    let (id, run) = api.awaiting_approval("prod", 2).await;
    let approval = api
        .record_approval("prod", run["planReceipt"]["inputsHash"].as_str())
        .await;

    postgres.cut();
    // The API needs the DB to find the run, so the operator approves with the Temporal CLI,
    // naming the approval recorded before the outage.
    let approval_id = approval["approvalId"].as_str();
    stack.approve_with_cli(&run, "alice", "during outage", approval_id);
    // The claim on the approval comes first, then the projections (local activities): their
    // attempts show in the worker's log, each failure in the run's span.
    let failures = || {
        stack
            .logs()
            .lines()
            .filter(|l| {
                (l.contains("claim_approval") || l.contains("project_run"))
                    && l.contains(id.as_str())
                    && l.contains("activity failed; it will be retried")
            })
            .count()
    };
    eventually(60, "the DB steps to fail and retry", || async {
        (failures() >= 2).then_some(())
    })
    .await;
    assert_eq!(
        stack
            .count_where(
                "provisioning_runs",
                &format!("provisioning_run_id = '{id}' AND state = 'AwaitingApproval'")
            )
            .await,
        1,
        "the row waits for the DB"
    );

    postgres.restore();
    let run = api.wait_state(&id, "Applied").await;
    // The recorded grantor (the operator's token), not the signal's claim.
    assert_eq!(run["approval"]["decision"]["approver"], "tester");
    for event in ["ProvisioningPlanned", "ProvisioningApplied"] {
        let events = stack.events(event).await;
        let for_run = events
            .iter()
            .filter(|e| e.to_string().contains(&id))
            .count();
        assert_eq!(for_run, 1, "{event} exactly once: {events:?}");
    }
}

/// 4. Two APIs and two workers on one Temporal server and one PostgreSQL, runs requested
///    concurrently through both APIs (some twice with the same Idempotency-Key): no duplicate
///    run, and no environment is ever applied by two runs at once.
#[tokio::test]
async fn two_apis_and_two_workers_never_apply_an_environment_twice_at_once() {
    let stack = Stack::on(Db::Postgres).await;
    let _second_worker = stack.spawn_worker();
    let (_second_api_proc, second_url) = stack.spawn_api();
    let first = stack.operator("acme");
    let token = stack.token(
        "acme",
        &["factory.provisioning.read", "factory.provisioning.apply"],
    );
    let second = Api::with_token(&second_url, &token);

    const ENVS: usize = 6;
    const RUNS_PER_ENV: usize = 3;
    for e in 0..ENVS {
        let env = format!("env-{e}");
        first.environment(&env, "non-production").await;
        first.declare(&env, &[("api", "1.0.0", 1)]).await;
        slow_applies(&stack, "acme", &env, 200);
    }

    // Every request twice, once through each API, with the same key.
    let mut requests = Vec::new();
    for e in 0..ENVS {
        for r in 0..RUNS_PER_ENV {
            for api in [&first, &second] {
                let env = format!("env-{e}");
                let key = format!("run-{e}-{r}");
                requests.push(async move {
                    // 409 while the other API is still starting the key's run: sent again.
                    let res = eventually(30, "an answer that is not 409", || async {
                        let res = api
                            .send(
                                reqwest::Method::POST,
                                "/factory/provisioning/runs",
                                Some(json!({ "environmentId": env, "kind": "baseline" })),
                                &[("Idempotency-Key", &key)],
                            )
                            .await;
                        (res.status.as_u16() != 409).then_some(res)
                    })
                    .await;
                    assert!(
                        matches!(res.status.as_u16(), 200 | 202),
                        "{}: {}",
                        res.status,
                        res.body
                    );
                    (
                        key,
                        res.body["provisioningRunId"].as_str().map(str::to_owned),
                    )
                });
            }
        }
    }
    let answers = futures::future::join_all(requests).await;
    let mut by_key = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for (key, id) in answers {
        by_key.entry(key).or_default().insert(id.expect("a run id"));
    }
    assert!(
        by_key.values().all(|ids| ids.len() == 1),
        "one run per key: {by_key:?}"
    );
    assert_eq!(
        stack.count("provisioning_runs").await,
        (ENVS * RUNS_PER_ENV) as i64
    );

    for id in by_key.values().flatten() {
        first.wait_state(id, "Applied").await;
    }
    for e in 0..ENVS {
        let log = apply_log(&stack, "acme", &format!("env-{e}"));
        assert_eq!(log.len(), RUNS_PER_ENV, "env-{e}: {log:?}");
        let at = |entry: &Value, field: &str| {
            chrono::DateTime::parse_from_rfc3339(entry[field].as_str().expect("timestamp"))
                .expect("RFC 3339")
        };
        for pair in log.windows(2) {
            assert!(
                at(&pair[0], "finishedAt") <= at(&pair[1], "startedAt"),
                "env-{e} applied twice at once: {pair:?}"
            );
        }
    }
    assert_eq!(
        stack.events("ProvisioningApplied").await.len(),
        ENVS * RUNS_PER_ENV
    );
}

/// 6. A worker killed while a sweep's page observes, after its first batch was recorded (and
///    its proposals' workflows started) and while its second batch is read: after the page's
///    heartbeat times out it runs again on the restarted worker, every environment is
///    observed, and each one still has one finding, one event and one proposal, whose
///    workflow runs.
#[tokio::test]
async fn worker_killed_mid_sweep_page_observes_every_environment_once() {
    // One more environment than a batch records per transaction (50), so the page has two.
    const ENVS: usize = 60;
    let mut stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    // Registered in this order, so the page observes them in it. Declared and never applied:
    // each one's workload is missing. The second batch is read slowly, so the test can stop
    // the worker while it is.
    let envs: Vec<String> = (0..ENVS).map(|i| format!("e{i:02}")).collect();
    for (i, env) in envs.iter().enumerate() {
        api.environment(env, "non-production").await;
        api.declare(env, &[("api", "1.0.0", 1)]).await;
        if i >= 50 {
            stack.sandbox_cli("acme", env, &["observe-delay", "--ms", "5000"]);
        }
    }

    let triggered = chrono::Utc::now();
    stack.trigger_schedule("observation-sweep");
    let sweep = eventually(30, "the sweep to start", || {
        stack.first_workflow("ObservationSweep", "")
    })
    .await;
    // How many environments the sweep has recorded so far.
    let observed = || {
        let api = api.clone();
        async move {
            let page = api.get("/fleet/instances?limit=200").await.expect(200);
            let items = page["items"].as_array().cloned().unwrap_or_default();
            items
                .iter()
                .filter(|i| {
                    let at = i["observedAt"].as_str().unwrap_or_default();
                    chrono::DateTime::parse_from_rfc3339(at).is_ok_and(|at| at > triggered)
                })
                .count()
        }
    };
    eventually(60, "the first batch to be recorded", || async {
        (observed().await >= 50).then_some(())
    })
    .await;
    assert!(
        pending_activity(&stack, &sweep, "inventory.observe-page").is_some(),
        "the page is still running"
    );
    assert_eq!(observed().await, 50, "the second batch is still being read");
    stack.kill_worker();
    stack.start_worker();

    eventually(180, "the sweep to complete on the restarted worker", || {
        stack.first_workflow("ObservationSweep", "ExecutionStatus='Completed'")
    })
    .await;
    assert_eq!(observed().await, ENVS, "every environment observed");
    let raised = stack.events("RuntimeDriftDetected").await;
    for env in &envs {
        assert_eq!(api.drift(env, Some("open")).await.len(), 1, "{env}");
        let proposals = api.proposals(env).await;
        assert_eq!(proposals.len(), 1, "one proposal for {env}: {proposals:?}");
        let events = raised
            .iter()
            .filter(|e| e["payload"]["environmentId"] == env.as_str())
            .count();
        assert_eq!(events, 1, "one drift event for {env}");
        // Whether the first attempt started it or the retry did, it runs, once.
        let id = format!("proposal/{}", text(&proposals[0]["proposalId"]));
        let described = stack.described_workflow(&id).await;
        assert_eq!(
            described["workflowExecutionInfo"]["status"], "WORKFLOW_EXECUTION_STATUS_RUNNING",
            "{described}"
        );
    }
}

/// Writes a run and its start the way a request does before it starts the workflow, and stops
/// there: what an API process SIGKILLed between the two leaves behind (or one still waiting
/// for Temporal). `key` is its Idempotency-Key, `request_hash` the hash the API keeps of the
/// request's body.
async fn run_left_unstarted(
    stack: &Stack,
    env: &str,
    key: &str,
    request_hash: Option<String>,
) -> String {
    use runtime_cloud_store::{environments, runs::NewRun, specifications};
    let db = stack.db().await;
    let tenant = stack.tenant("acme");
    let environment = environments::find(&db, &tenant, env)
        .await
        .expect("environment")
        .expect("registered");
    let specification = specifications::version(&db, &tenant, env, None)
        .await
        .expect("specification")
        .expect("declared");
    let run_id = uuid::Uuid::now_v7().to_string();
    let new = NewRun {
        run_id: &run_id,
        environment: &environment,
        specification: &specification,
        kind: runtime_cloud_models::ProvisioningKind::Baseline,
        promotion_id: None,
        approval_id: None,
        idempotency_key: Some(key.to_owned()),
        request_hash,
        quarantine_override: None,
    };
    runtime_cloud_transactions::admit_run::accept_run(&db, &new, &Default::default(), None)
        .await
        .expect("run written");
    run_id
}

/// Moves the start of `run_id` a minute into the past: its request is long over.
async fn written_a_minute_ago(stack: &Stack, run_id: &str) {
    use runtime_cloud_store::entities::run_starts;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
    let db = stack.db().await;
    let then = chrono::Utc::now() - chrono::Duration::seconds(60);
    let moved = run_starts::Entity::update_many()
        .col_expr(run_starts::Column::AcceptedAt, Expr::value(then))
        .filter(run_starts::Column::ProvisioningRunId.eq(run_id))
        .exec(&db)
        .await
        .expect("start moved");
    assert_eq!(moved.rows_affected, 1);
}

/// 6. An API process dies after writing a run and before starting its workflow: the row is
///    there, the workflow is not. Another API process's starter starts it once the request's
///    grace has passed, and the run applies.
#[tokio::test]
async fn a_run_whose_api_died_before_starting_it_is_started_by_the_starter() {
    let stack = Stack::with(StackOptions::with_env(
        "RuntimeCloud__Provisioning__UnstartedRunGraceSeconds",
        "1",
    ))
    .await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 2)]).await;
    let id = run_left_unstarted(&stack, "dev", "left-behind", None).await;
    written_a_minute_ago(&stack, &id).await;

    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["kind"], "baseline");
    assert_eq!(stack.count("run_starts").await, 0, "nothing left to start");
    assert_eq!(apply_log(&stack, "acme", "dev").len(), 1);
    assert!(
        stack
            .logs()
            .contains("started a run whose request ended before its workflow started"),
        "the starter says what it did"
    );
}

/// 7. The client of a request whose API died before starting the run sends it again with the
///    same Idempotency-Key: the answer is the run (200), and the run is started now, not after
///    the grace. While the first request may still be starting it (or taking it back), the
///    same key is answered 409 and starts nothing.
#[tokio::test]
async fn a_request_sent_again_starts_the_run_its_first_attempt_left_unstarted() {
    // The starter waits an hour: only the repeated request can start the run.
    let stack = Stack::with(StackOptions::with_env(
        "RuntimeCloud__Provisioning__UnstartedRunGraceSeconds",
        "3600",
    ))
    .await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 2)]).await;
    let body = json!({ "environmentId": "dev", "kind": "baseline" });
    let send = |key: &'static str| {
        let api = api.clone();
        let body = body.clone();
        async move {
            api.send(
                reqwest::Method::POST,
                "/factory/provisioning/runs",
                Some(body),
                &[("Idempotency-Key", key)],
            )
            .await
        }
    };
    let first = send("first").await.expect(202);
    api.wait_state(first["provisioningRunId"].as_str().expect("id"), "Applied")
        .await;
    // The same body under another key: the hash the API would keep for it.
    let hash = request_hash(&stack, "first").await;
    let id = run_left_unstarted(&stack, "dev", "second", Some(hash)).await;
    let in_flight = send("second").await;
    in_flight.expect_problem(409);
    assert_eq!(
        stack.count("run_starts").await,
        1,
        "still the first request's to start"
    );

    written_a_minute_ago(&stack, &id).await;
    let again = send("second").await.expect(200);
    assert_eq!(again["provisioningRunId"], id.as_str(), "the same run");
    api.wait_state(&id, "Applied").await;
    assert_eq!(stack.count("run_starts").await, 0);
    assert_eq!(
        apply_log(&stack, "acme", "dev").len(),
        2,
        "each run applied once"
    );

    // A body that differs is still refused, started run or not.
    let other = api
        .send(
            reqwest::Method::POST,
            "/factory/provisioning/runs",
            Some(json!({ "environmentId": "dev", "kind": "reconciliation" })),
            &[("Idempotency-Key", "second")],
        )
        .await;
    other.expect_problem(422);
}

/// The request hash the API kept for the run requested with `key`.
async fn request_hash(stack: &Stack, key: &str) -> String {
    use runtime_cloud_store::runs;
    let db = stack.db().await;
    runs::by_idempotency_key(&db, &stack.tenant("acme"), key)
        .await
        .expect("read")
        .expect("the run")
        .request_hash
        .expect("a hash")
}

/// 8. Temporal is unreachable when a run is requested: the answer is 503 problem JSON, and
///    nothing is left behind (no run, nothing to start); the same request once Temporal is
///    back starts the run.
// Multi-threaded: the proxy must keep forwarding while the harness blocks on a process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_temporal_could_not_start_is_taken_back() {
    let (temporal, stack) = behind_a_temporal_proxy().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 2)]).await;
    let request = || {
        api.send(
            reqwest::Method::POST,
            "/factory/provisioning/runs",
            Some(json!({ "environmentId": "dev", "kind": "baseline" })),
            &[("Idempotency-Key", "during-outage")],
        )
    };

    temporal.cut();
    let refused = request().await.expect_problem(503);
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|d| d.contains("nothing was started")),
        "{refused}"
    );
    assert_eq!(stack.count("provisioning_runs").await, 0, "no run");
    assert_eq!(stack.count("run_starts").await, 0, "nothing to start");

    temporal.restore();
    let run = eventually(
        60,
        "the run to be accepted once Temporal is back",
        || async {
            let res = request().await;
            (res.status.as_u16() == 202).then(|| res.expect(202))
        },
    )
    .await;
    api.wait_state(run["provisioningRunId"].as_str().expect("id"), "Applied")
        .await;
    assert_eq!(stack.count("run_starts").await, 0);
}

/// 9. A worker process that starts while Temporal is unreachable keeps trying to connect
///    instead of exiting: once Temporal is back, runs apply, without anyone restarting the
///    process.
// Multi-threaded: the proxy must keep forwarding while the harness blocks on a process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_during_a_temporal_outage_serves_once_it_is_back() {
    let (temporal, mut stack) = behind_a_temporal_proxy().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;

    stack.kill_worker();
    temporal.cut();
    stack.start_worker();
    eventually(60, "the worker to find Temporal unreachable", || async {
        stack
            .logs()
            .contains("Temporal unreachable; the worker tries again")
            .then_some(())
    })
    .await;
    temporal.restore();

    let id = api.plan_run("dev", "baseline").await;
    api.wait_state(&id, "Applied").await;
}

/// A stack whose processes reach the suite's Temporal through a proxy the test can cut (the
/// test's runtime must be multi-threaded so the proxy forwards while the harness waits).
async fn behind_a_temporal_proxy() -> (Proxy, Stack) {
    let temporal = Proxy::start(&crate::common::temporal_address()).await;
    let stack = Stack::with(StackOptions {
        temporal: Some(temporal.addr.clone()),
        ..Default::default()
    })
    .await;
    (temporal, stack)
}
