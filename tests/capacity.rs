//! Execution capacity end to end: worker pools, quotas and leases under `/factory/capacity`
//! (their scopes and roles, tenants apart, pages and problem JSON), and what they do to runs:
//! a run takes a lease on its project's quota before it plans, waits visibly while the quota
//! (or a pool without workers) holds it, gives it back when it ends; a vanished holder's lease
//! expires; a project whose day's apply minutes are spent gets 429 and no run applies.

use crate::common::{Api, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};

fn pool(id: &str) -> serde_json::Value {
    json!({ "poolId": id, "kind": "dedicated", "securityBoundary": "customer-isolated",
            "region": "eu-west-1", "nodeProfile": "c6i.large", "minSize": 1, "maxSize": 4 })
}

#[tokio::test]
async fn pools_and_quotas_are_recorded_per_tenant_with_their_scopes_and_roles() {
    let stack = Stack::start().await;
    let admin = stack.platform_admin("acme");
    let created = admin
        .post("/factory/capacity/pools", pool("eu-prod"))
        .await
        .expect(201);
    assert_eq!(
        (&created["poolId"], &created["state"], &created["kind"]),
        (&json!("eu-prod"), &json!("active"), &json!("dedicated"))
    );
    admin
        .post("/factory/capacity/pools", pool("eu-dev"))
        .await
        .expect(201);
    admin
        .post("/factory/capacity/pools", pool("eu-prod"))
        .await
        .expect_problem(409);
    let mut bad = pool("x");
    bad["maxSize"] = json!(0);
    admin
        .post("/factory/capacity/pools", bad)
        .await
        .expect_problem(422);
    // A pool id names a task queue: another tenant cannot take it, nor see this one.
    let other = stack.platform_admin("globex");
    other
        .post("/factory/capacity/pools", pool("eu-prod"))
        .await
        .expect_problem(409);
    other
        .get("/factory/capacity/pools/eu-prod")
        .await
        .expect_problem(404);
    assert_eq!(
        other.get("/factory/capacity/pools").await.expect(200)["items"],
        json!([])
    );
    // Pages, newest first.
    let first = admin
        .get("/factory/capacity/pools?limit=1")
        .await
        .expect(200);
    assert_eq!(first["items"][0]["poolId"], "eu-dev");
    let cursor = text(&first["nextCursor"]);
    let second = admin
        .get(&format!("/factory/capacity/pools?limit=1&cursor={cursor}"))
        .await
        .expect(200);
    assert_eq!(second["items"][0]["poolId"], "eu-prod");
    assert!(second["nextCursor"].is_null());

    // Quotas: the default until a PlatformAdmin sets one; an Operator with the scope cannot.
    let default = admin.get("/factory/capacity/quotas/shop").await.expect(200);
    assert_eq!(
        (&default["source"], &default["concurrentRuns"]),
        (&json!("default"), &json!(10))
    );
    let limits = json!({ "concurrentRuns": 2, "concurrentSandboxes": 2, "cpuPerAttempt": 1.5,
                         "memoryGbPerAttempt": 2, "executionMinutesPerDay": 60 });
    let operator = stack.client(
        "acme",
        &["factory.capacity.read", "factory.capacity.manage"],
    );
    let refused = operator
        .put("/factory/capacity/quotas/shop", limits.clone())
        .await
        .expect_problem(403);
    assert!(
        text(&refused["detail"]).contains("PlatformAdmin"),
        "{refused}"
    );
    let set = admin
        .put("/factory/capacity/quotas/shop", limits.clone())
        .await
        .expect(200);
    assert_eq!(
        (&set["concurrentRuns"], &set["source"], &set["setBy"]),
        (&json!(2), &json!("manual"), &json!("admin"))
    );
    let mut zero = limits.clone();
    zero["concurrentRuns"] = json!(0);
    admin
        .put("/factory/capacity/quotas/shop", zero)
        .await
        .expect_problem(422);
    assert_eq!(
        admin.get("/factory/capacity/quotas/shop").await.expect(200)["concurrentRuns"],
        2,
        "a refused change writes nothing"
    );
    let listed = admin.get("/factory/capacity/quotas").await.expect(200);
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        other.get("/factory/capacity/quotas/shop").await.expect(200)["source"],
        "default",
        "tenants are apart"
    );

    // Leases are listed (none yet) and their filters checked.
    assert_eq!(
        admin.get("/factory/capacity/leases").await.expect(200)["items"],
        json!([])
    );
    admin
        .get("/factory/capacity/leases?state=borrowed")
        .await
        .expect_problem(400);
    // Without the read scope, nothing.
    stack
        .client("acme", &["factory.provisioning.read"])
        .get("/factory/capacity/pools")
        .await
        .expect_problem(403);
}

/// A 429's `Retry-After`, in seconds.
fn retry_after(res: &crate::common::Res) -> u64 {
    res.headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .expect("a Retry-After header of seconds")
}

/// Sets the project `shop`'s quota of `tenant` to `concurrent_runs` and `minutes` a day.
async fn set_quota(stack: &Stack, tenant: &str, concurrent_runs: u32, minutes: u32) {
    stack
        .platform_admin(tenant)
        .put(
            "/factory/capacity/quotas/shop",
            json!({ "concurrentRuns": concurrent_runs, "concurrentSandboxes": 2,
                    "cpuPerAttempt": 1, "memoryGbPerAttempt": 2,
                    "executionMinutesPerDay": minutes }),
        )
        .await
        .expect(200);
}

/// The run's leases, as the capacity routes list them.
async fn leases_of(stack: &Stack, tenant: &str, run: &str) -> Vec<Value> {
    let page = stack
        .platform_admin(tenant)
        .get(&format!("/factory/capacity/leases?provisioningRunId={run}"))
        .await
        .expect(200);
    page["items"].as_array().cloned().unwrap_or_default()
}

/// Waits until the run's lease is in `state`; returns it.
async fn wait_lease(stack: &Stack, tenant: &str, run: &str, state: &str) -> Value {
    eventually(60, &format!("run {run}'s lease to be {state}"), || async {
        let leases = leases_of(stack, tenant, run).await;
        leases.into_iter().find(|l| l["state"] == state)
    })
    .await
}

/// Waits until the run says what holds it back; returns its view.
async fn wait_held(api: &Api, run: &str, held_by: &str) -> Value {
    eventually(
        60,
        &format!("run {run} to wait for capacity ({held_by})"),
        || async {
            let view = api.run(run).await;
            (view["waitingForCapacity"]["heldBy"] == held_by).then_some(view)
        },
    )
    .await
}

#[tokio::test]
async fn a_quota_of_two_holds_the_third_run_until_one_ends() {
    let stack = Stack::start().await;
    set_quota(&stack, "acme", 2, 1440).await;
    let api = stack.operator("acme");
    // Production runs hold their lease while they await approval.
    let (first, _) = api.awaiting_approval("prod-a", 1).await;
    let (second, _) = api.awaiting_approval("prod-b", 1).await;
    api.environment("prod-c", "production").await;
    api.declare("prod-c", &[("api", "1.0.0", 1)]).await;
    let third = api.plan_run("prod-c", "baseline").await;

    let held = wait_held(&api, &third, "quota").await;
    assert_eq!(held["state"], Value::Null, "held before it plans: {held}");
    assert!(held["planReceipt"].is_null(), "{held}");
    let wait = &held["waitingForCapacity"];
    assert_eq!(
        (
            &wait["projectId"],
            &wait["concurrentRuns"],
            &wait["quotaSource"]
        ),
        (&json!("shop"), &json!(2), &json!("manual")),
        "{held}"
    );
    for run in [&first, &second] {
        let lease = wait_lease(&stack, "acme", run, "granted").await;
        assert_eq!(
            (&lease["projectId"], &lease["poolId"], &lease["holderKind"]),
            (
                &json!("shop"),
                &json!("default"),
                &json!("provisioning-run")
            )
        );
        assert_eq!(lease["holderId"], format!("provisioning-run/{run}"));
        assert_eq!(
            (&lease["cpu"], &lease["memoryGb"]),
            (&json!(1.0), &json!(2.0))
        );
        assert!(lease["grantedAt"].is_string(), "{lease}");
    }
    wait_lease(&stack, "acme", &third, "waiting").await;
    // A fourth finds both slots held and the third waiting: the API defers it, with a waiting
    // lease and no workflow, which costs the workflow service nothing until a slot frees.
    api.environment("prod-d", "production").await;
    api.declare("prod-d", &[("api", "1.0.0", 1)]).await;
    let fourth = api.plan_run("prod-d", "baseline").await;
    let deferred = api.run(&fourth).await;
    assert_eq!(
        deferred["waitingForCapacity"]["heldBy"], "quota",
        "{deferred}"
    );
    assert_eq!(
        deferred["waitingForCapacity"]["concurrentRuns"], 2,
        "{deferred}"
    );
    let has_workflow = |run: &str| {
        stack
            .temporal_cli(&[
                "workflow",
                "describe",
                "--workflow-id",
                &format!("provisioning-run/{run}"),
            ])
            .status
            .success()
    };
    assert!(!has_workflow(&fourth), "no workflow while deferred");
    assert!(has_workflow(&third));
    let lease = wait_lease(&stack, "acme", &fourth, "waiting").await;
    assert_eq!(lease["holderId"], format!("provisioning-run/{fourth}"));
    // The gauges say the same, exactly.
    let t = api.tenant.clone();
    let metrics = stack.scrape().await;
    for (series, value) in [
        (
            format!(
                "connectsoft_factory_capacity_leases{{tenant=\"{t}\",pool=\"default\",state=\"granted\"}}"
            ),
            2,
        ),
        (
            format!(
                "connectsoft_factory_capacity_leases{{tenant=\"{t}\",pool=\"default\",state=\"waiting\"}}"
            ),
            2,
        ),
        (
            format!(
                "connectsoft_factory_capacity_quota_used{{tenant=\"{t}\",project=\"shop\",quota=\"concurrentRuns\"}}"
            ),
            2,
        ),
        (
            format!(
                "connectsoft_factory_capacity_quota_limit{{tenant=\"{t}\",project=\"shop\",quota=\"concurrentRuns\"}}"
            ),
            2,
        ),
    ] {
        let line = format!("{series} {value}\n");
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    let waiting = stack
        .platform_admin("acme")
        .get("/factory/capacity/leases?state=waiting")
        .await
        .expect(200);
    assert_eq!(
        waiting["items"].as_array().map(Vec::len),
        Some(2),
        "{waiting}"
    );
    assert_eq!(
        stack
            .platform_admin("globex")
            .get("/factory/capacity/leases")
            .await
            .expect(200)["items"],
        json!([]),
        "another tenant sees none"
    );

    // One ends: the third takes its lease and plans, the fourth is admitted and waits in turn.
    api.decide(&first, "reject").await.expect(202);
    api.wait_state(&first, "Rejected").await;
    let released = wait_lease(&stack, "acme", &first, "released").await;
    assert!(released["releasedAt"].is_string(), "{released}");
    let planned = api.wait_state(&third, "AwaitingApproval").await;
    assert!(planned["waitingForCapacity"].is_null(), "{planned}");
    wait_lease(&stack, "acme", &third, "granted").await;
    assert_eq!(
        api.run(&second).await["state"],
        "AwaitingApproval",
        "the second kept its lease"
    );
    eventually(60, "the fourth run to be admitted", || async {
        (stack.count("run_starts").await == 0).then_some(())
    })
    .await;
    assert!(has_workflow(&fourth), "admitted: it waits in the semaphore");
    // Admitted from its project's backlog, it runs one priority step below the runs that
    // started at once, its tenant still its fairness key.
    let priority = |id: &str| {
        let described = stack
            .describe(&format!("provisioning-run/{id}"))
            .expect("the run's workflow");
        described["workflowExecutionInfo"]["priority"].clone()
    };
    let tenant = api.run(&fourth).await["tenantId"].clone();
    assert_eq!(
        priority(&fourth),
        json!({ "priorityKey": 4, "fairnessKey": tenant })
    );
    assert_eq!(priority(&first), json!({ "fairnessKey": tenant }));
    assert_eq!(
        api.run(&fourth).await["waitingForCapacity"]["heldBy"],
        "quota"
    );
    let lease = wait_lease(&stack, "acme", &fourth, "waiting").await;
    assert!(
        !lease["attemptId"].as_str().unwrap_or_default().is_empty(),
        "its workflow asked for the lease recorded with it: {lease}"
    );
    assert_eq!(
        leases_of(&stack, "acme", &fourth).await.len(),
        1,
        "one lease"
    );
}

/// A quota raised while 31 runs wait lets them all go: the first waits in the semaphore, the
/// API deferred the other 30 (their project's one slot is held and one run waits for it);
/// the quota's PUT admits them at once and they ask the semaphore with the new limit. (Before
/// admission all 31 waited in the semaphore, which then granted them in one workflow task: a
/// join of 32 signals, which past 30 must be the SDK's.)
#[tokio::test]
async fn a_raised_quota_grants_every_waiting_run_at_once() {
    let stack = Stack::start().await;
    set_quota(&stack, "acme", 1, 1440).await;
    let api = stack.operator("acme");
    let (holder, _) = api.awaiting_approval("prod", 1).await;
    let envs: Vec<String> = (0..32).map(|i| format!("dev-{i:02}")).collect();
    let mut waiting = Vec::new();
    for env in &envs[..31] {
        api.environment(env, "non-production").await;
        api.declare(env, &[("api", "1.0.0", 1)]).await;
        waiting.push(api.plan_run(env, "baseline").await);
    }
    for run in &waiting {
        wait_lease(&stack, "acme", run, "waiting").await;
    }
    assert_eq!(
        stack.count_where("run_starts", "deferred").await,
        30,
        "all deferred but the one that waits in the semaphore"
    );
    // The holder's release is not needed.
    set_quota(&stack, "acme", 40, 1440).await;
    let last = &envs[31];
    api.environment(last, "non-production").await;
    api.declare(last, &[("api", "1.0.0", 1)]).await;
    waiting.push(api.plan_run(last, "baseline").await);
    for run in &waiting {
        api.wait_state(run, "Applied").await;
    }
    assert_eq!(api.run(&holder).await["state"], "AwaitingApproval");
}

/// Holds the sandbox document of `tenant`'s environment `env` locked, as a second process
/// editing it would: an apply to it waits (heartbeating) until the lock is dropped, so its
/// run stays at work with its lease granted for as long as a test needs.
fn hold_apply(stack: &Stack, tenant: &str, env: &str) -> std::fs::File {
    let dir = stack.data_path().join("sandbox").join(stack.tenant(tenant));
    std::fs::create_dir_all(&dir).expect("sandbox dir");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{env}.json.lock")))
        .expect("lock file");
    file.lock().expect("lock");
    file
}

/// While another tenant has a run at work, a project's backlog is admitted only into its
/// share of the quota (half of it beside one other tenant, and the one waiter); when that
/// run ends, the backlog takes its whole quota back.
#[tokio::test]
async fn a_backlog_yields_half_its_quota_while_another_tenant_works() {
    let stack = Stack::start().await;
    set_quota(&stack, "acme", 4, 1440).await;
    let acme = stack.operator("acme");
    let globex = stack.operator("globex");
    globex.environment("dev-g", "non-production").await;
    globex.declare("dev-g", &[("api", "1.0.0", 1)]).await;
    let globex_apply = hold_apply(&stack, "globex", "dev-g");
    let working = globex.plan_run("dev-g", "baseline").await;
    wait_lease(&stack, "globex", &working, "granted").await;
    globex.wait_state(&working, "Applying").await;

    // Four production runs hold acme's four slots awaiting approval (idle: they do not make
    // acme a tenant at work for globex, nor the reverse); of four more runs, whose applies
    // are held too, the first waits in the semaphore and three are deferred.
    let mut holders = Vec::new();
    for env in ["prod-a", "prod-b", "prod-c", "prod-d"] {
        holders.push(acme.awaiting_approval(env, 1).await.0);
    }
    let mut applies = Vec::new();
    let mut backlog = Vec::new();
    for env in ["dev-a", "dev-b", "dev-c", "dev-d"] {
        acme.environment(env, "non-production").await;
        acme.declare(env, &[("api", "1.0.0", 1)]).await;
        applies.push(hold_apply(&stack, "acme", env));
        backlog.push(acme.plan_run(env, "baseline").await);
    }
    wait_lease(&stack, "acme", &backlog[0], "waiting").await;
    assert_eq!(stack.count_where("run_starts", "deferred").await, 3);

    // All four holders end. Alone, acme would start all three deferred runs into the freed
    // slots; beside globex's run its backlog's share is 2 of 4 and the waiter: the former
    // waiter and two admitted runs fill it, and the last stays deferred.
    for run in &holders {
        acme.post(
            &format!("/factory/provisioning/runs/{run}/cancel"),
            json!({ "reason": "make room" }),
        )
        .await
        .expect(202);
    }
    for run in &holders {
        acme.wait_state(run, "Cancelled").await;
    }
    for run in &backlog[..3] {
        acme.wait_state(run, "Applying").await;
    }
    assert_eq!(
        stack.count_where("run_starts", "deferred").await,
        1,
        "admitted beyond its share while another tenant works"
    );
    let last = acme.run(&backlog[3]).await;
    assert_eq!(last["waitingForCapacity"]["heldBy"], "quota", "{last}");

    // globex's run ends: acme's backlog takes its whole quota back.
    drop(globex_apply);
    globex.wait_state(&working, "Applied").await;
    acme.wait_state(&backlog[3], "Applying").await;
    assert_eq!(stack.count_where("run_starts", "deferred").await, 0);
    drop(applies);
    for run in &backlog {
        acme.wait_state(run, "Applied").await;
    }
}

/// A deferred run has no workflow, yet cancelling it works like cancelling any run waiting
/// for capacity: the signal starts it, it gives up its place and releases its lease.
#[tokio::test]
async fn a_deferred_run_is_cancelled_like_any_waiting_run() {
    let stack = Stack::start().await;
    set_quota(&stack, "acme", 1, 1440).await;
    let api = stack.operator("acme");
    let (holder, _) = api.awaiting_approval("prod-a", 1).await;
    let mut runs = Vec::new();
    for env in ["dev-a", "dev-b"] {
        api.environment(env, "non-production").await;
        api.declare(env, &[("api", "1.0.0", 1)]).await;
        runs.push(api.plan_run(env, "baseline").await);
    }
    let deferred = &runs[1];
    assert_eq!(
        stack
            .count_where(
                "run_starts",
                &format!("provisioning_run_id = '{deferred}' AND deferred")
            )
            .await,
        1
    );
    api.post(
        &format!("/factory/provisioning/runs/{deferred}/cancel"),
        json!({ "reason": "not today" }),
    )
    .await
    .expect(202);
    let cancelled = api.wait_state(deferred, "Cancelled").await;
    assert!(
        text(&cancelled["reason"]).contains("not today"),
        "{cancelled}"
    );
    wait_lease(&stack, "acme", deferred, "released").await;
    assert_eq!(stack.count("run_starts").await, 0);
    assert_eq!(api.run(&holder).await["state"], "AwaitingApproval");
    assert_eq!(api.run(&runs[0]).await["state"], Value::Null, "still waits");
}

#[tokio::test]
async fn a_terminated_holders_lease_expires_and_the_waiting_run_proceeds() {
    let stack = Stack::with(StackOptions::holder_checks_every_second()).await;
    set_quota(&stack, "acme", 1, 1440).await;
    let api = stack.operator("acme");
    let (first, _) = api.awaiting_approval("prod-a", 1).await;
    api.environment("prod-b", "production").await;
    api.declare("prod-b", &[("api", "1.0.0", 1)]).await;
    let second = api.plan_run("prod-b", "baseline").await;
    wait_held(&api, &second, "quota").await;

    stack.temporal_ok(&[
        "workflow",
        "terminate",
        "--workflow-id",
        &format!("provisioning-run/{first}"),
        "--reason",
        "operator cleanup",
    ]);
    let expired = wait_lease(&stack, "acme", &first, "expired").await;
    assert!(expired["expiresAt"].is_string(), "{expired}");
    assert!(expired["releasedAt"].is_null(), "{expired}");
    api.wait_state(&second, "AwaitingApproval").await;
    wait_lease(&stack, "acme", &second, "granted").await;
}

#[tokio::test]
async fn a_run_in_a_pool_without_a_worker_waits_until_one_serves_it() {
    let stack = Stack::start().await;
    let admin = stack.platform_admin("acme");
    admin
        .post("/factory/capacity/pools", pool("eu-isolated"))
        .await
        .expect(201);
    let api = stack.operator("acme");
    // Only a pool of the tenant's own, and one that takes work.
    api.post(
        "/factory/environments",
        json!({ "environmentId": "iso", "projectId": "shop", "class": "non-production",
                "poolId": "nowhere" }),
    )
    .await
    .expect_problem(422);
    let env = api
        .post(
            "/factory/environments",
            json!({ "environmentId": "iso", "projectId": "shop", "class": "non-production",
                    "poolId": "eu-isolated" }),
        )
        .await
        .expect(201);
    assert_eq!(env["poolId"], "eu-isolated");
    api.declare("iso", &[("api", "1.0.0", 2)]).await;
    let run = api.plan_run("iso", "baseline").await;

    // The shared worker runs the workflow but not the pool's plans and applies.
    let held = wait_held(&api, &run, "pool").await;
    assert_eq!(held["waitingForCapacity"]["poolId"], "eu-isolated");
    assert_eq!(held["state"], Value::Null, "{held}");
    let described = admin
        .get("/factory/capacity/pools/eu-isolated")
        .await
        .expect(200);
    assert_eq!(described["currentSize"], 0, "{described}");

    assert!(
        text(&held["waitingForCapacity"]["reason"]).contains("no worker polls pool `eu-isolated`"),
        "{held}"
    );

    // A draining pool takes no new run, served or not.
    let draining = admin
        .put(
            "/factory/capacity/pools/eu-isolated/state",
            json!({ "state": "draining" }),
        )
        .await
        .expect(200);
    assert_eq!(draining["state"], "draining");
    let mut pool_worker = stack.spawn_pool_worker("eu-isolated");
    eventually(60, "the run to say the pool is draining", || async {
        let view = api.run(&run).await;
        text(&view["waitingForCapacity"]["reason"])
            .contains("is draining")
            .then_some(())
    })
    .await;
    admin
        .put(
            "/factory/capacity/pools/eu-isolated/state",
            json!({ "state": "sideways" }),
        )
        .await
        .expect_problem(422);
    admin
        .put(
            "/factory/capacity/pools/eu-isolated/state",
            json!({ "state": "active" }),
        )
        .await
        .expect(200);
    let applied = api.wait_state(&run, "Applied").await;
    assert!(applied["waitingForCapacity"].is_null(), "{applied}");
    let lease = wait_lease(&stack, "acme", &run, "released").await;
    assert_eq!(lease["poolId"], "eu-isolated");
    let served = admin
        .get("/factory/capacity/pools/eu-isolated")
        .await
        .expect(200);
    assert_eq!(served["currentSize"], 1, "{served}");
    assert!(served["utilisation"].is_number(), "{served}");
    pool_worker.kill();

    // An environment moves back to the shared task queue, and only to a pool of its tenant.
    let shared = admin
        .put("/factory/environments/iso/pool", json!({ "poolId": null }))
        .await
        .expect(200);
    assert!(shared["poolId"].is_null(), "{shared}");
    admin
        .put(
            "/factory/environments/iso/pool",
            json!({ "poolId": "nowhere" }),
        )
        .await
        .expect_problem(422);
    admin
        .put(
            "/factory/environments/absent/pool",
            json!({ "poolId": null }),
        )
        .await
        .expect_problem(404);
    let again = api.plan_run("iso", "baseline").await;
    api.wait_state(&again, "Applied").await;
}

#[tokio::test]
async fn a_project_whose_apply_minutes_are_spent_gets_429_and_no_run_applies() {
    let stack = Stack::start().await;
    set_quota(&stack, "acme", 10, 1).await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 2)]).await;

    // The apply counted a minute (rounded up): the day's one minute is spent.
    let refused = api
        .post(
            "/factory/provisioning/runs",
            json!({ "environmentId": "dev", "kind": "baseline" }),
        )
        .await;
    let retry_after = retry_after(&refused);
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
    let problem = refused.expect_problem(429);
    let detail = text(&problem["detail"]);
    assert!(
        detail.contains("executionMinutesPerDay")
            && detail.contains("1 of 1")
            && detail.contains("resets at"),
        "{detail}"
    );

    // Enforced where the change happens: a reconciliation the product starts on its own (an
    // auto-accepted proposal) ends Rejected before it plans.
    stack.sandbox_cli(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    api.observe(&stack, "dev").await;
    let rejected = eventually(60, "the reconciliation run to be refused", || async {
        let page = api
            .get("/factory/provisioning/runs?kind=reconciliation")
            .await
            .expect(200);
        page["items"]
            .as_array()
            .and_then(|runs| runs.iter().find(|r| r["state"] == "Rejected").cloned())
    })
    .await;
    assert!(rejected["planReceipt"].is_null(), "{rejected}");
    assert!(
        text(&rejected["reason"]).contains("executionMinutesPerDay"),
        "{rejected}"
    );
    assert_eq!(
        stack.sandbox("acme", "dev")["workloads"][0]["replicas"],
        5,
        "nothing applied"
    );
    // Another project of the tenant is not held by this one's minutes.
    api.post(
        "/factory/environments",
        json!({ "environmentId": "other", "projectId": "blog", "class": "non-production" }),
    )
    .await
    .expect(201);
    api.declare("other", &[("api", "1.0.0", 1)]).await;
    let other = api.plan_run("other", "baseline").await;
    api.wait_state(&other, "Applied").await;
}

/// Each tenant's run submissions are paced (`RUNTIME_CLOUD_RUN_SUBMISSIONS_PER_SECOND`, a
/// burst, a longest wait): past its burst a submission waits its turn; one that would wait
/// longer than the limit is refused with 429 and `Retry-After` and writes nothing; another
/// tenant's submission does not queue behind them.
#[tokio::test]
async fn a_tenants_flood_of_submissions_waits_its_turn_and_other_tenants_do_not() {
    let env = [
        ("RUNTIME_CLOUD_RUN_SUBMISSIONS_PER_SECOND", "0.5"),
        ("RUNTIME_CLOUD_RUN_SUBMISSION_BURST", "2"),
        ("RUNTIME_CLOUD_RUN_SUBMISSION_MAX_WAIT_SECONDS", "3"),
    ];
    let stack = Stack::with(StackOptions {
        env: env.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec(),
        ..Default::default()
    })
    .await;
    let (a, b) = (stack.operator("acme"), stack.operator("globex"));
    let envs: Vec<String> = (0..5).map(|i| format!("a-{i}")).collect();
    for e in envs.iter().map(String::as_str).chain(["only"]) {
        let api = if e == "only" { &b } else { &a };
        api.environment(e, "non-production").await;
        api.declare(e, &[("api", "1.0.0", 1)]).await;
    }

    // Five at once, one every 2 s after a burst of two, waiting at most 3 s: two at once, the
    // third after 2 s, the fourth and fifth would wait 4 and 6 s and are refused.
    let flood: Vec<_> = envs
        .iter()
        .map(|e| {
            let (a, e) = (a.clone(), e.clone());
            tokio::spawn(async move {
                a.post(
                    "/factory/provisioning/runs",
                    json!({ "environmentId": e, "kind": "baseline" }),
                )
                .await
            })
        })
        .collect();
    // The other tenant's submission is taken while acme's third still waits its turn.
    let run = b.plan_run("only", "baseline").await;
    let waiting = flood.iter().filter(|h| !h.is_finished()).count();
    assert!(waiting >= 1, "acme's third submission should still wait");

    let mut answers = Vec::new();
    for h in flood {
        answers.push(h.await.expect("request task"));
    }
    let accepted = answers.iter().filter(|r| r.status == 202).count();
    let refused: Vec<_> = answers.into_iter().filter(|r| r.status == 429).collect();
    assert_eq!(
        (accepted, refused.len()),
        (3, 2),
        "three taken, two refused"
    );
    for r in refused {
        let retry_after = retry_after(&r);
        assert!((1..=4).contains(&retry_after), "{retry_after}");
        let problem = r.expect_problem(429);
        let detail = text(&problem["detail"]);
        assert!(
            detail.contains("acme") && detail.contains("0.5 a second"),
            "{detail}"
        );
    }
    // A refused submission wrote nothing.
    let runs = a.get("/factory/provisioning/runs").await.expect(200);
    assert_eq!(runs["items"].as_array().map(Vec::len), Some(3), "{runs}");
    b.wait_state(&run, "Applied").await;
}
