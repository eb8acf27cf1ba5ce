//! Fleet rollouts end to end on the sandbox: wave by wave to the release, each instance
//! converged as observed after its apply, production last and only with its approvals; a
//! failed apply halts the wave within its budget and opens an incident, and skipping it lets
//! the rollout finish; an SLO breach (reported, or read from Prometheus) halts, and an abort
//! ends it; a worker killed mid-wave loses no step.

use crate::common::prometheus_stand_in::PrometheusStandIn;
use crate::common::{Api, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};

/// `n` applied non-production instances of product `shop` running api 1.0.0.
async fn fleet(stack: &Stack, n: usize) -> Api {
    let api = stack.operator("acme");
    for i in 0..n {
        api.applied(stack, &format!("shop-{i:02}"), &[("api", "1.0.0", 1)])
            .await;
    }
    api
}

pub(crate) async fn wait_rollout(api: &Api, id: &str, state: &str) -> Value {
    eventually(120, &format!("the rollout to be {state}"), || {
        let api = api.clone();
        let id = id.to_owned();
        let state = state.to_owned();
        async move {
            let r = api.get(&format!("/fleet/rollouts/{id}")).await.expect(200);
            (r["state"] == state.as_str()).then_some(r)
        }
    })
    .await
}

async fn start(api: &Api, body: Value) -> String {
    let started = api.post("/fleet/rollouts", body).await.expect(202);
    text(&started["rolloutId"])
}

#[tokio::test]
async fn a_rollout_moves_every_instance_wave_by_wave_as_observed() {
    let stack = Stack::start().await;
    let api = fleet(&stack, 6).await;
    let id = start(
        &api,
        json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                "strategy": { "canary": 1, "steps": [{ "percent": 50 }] },
                "bakeSeconds": 0, "convergeDeadlineSeconds": 60 }),
    )
    .await;
    let refused = api
        .post(
            "/fleet/rollouts",
            json!({ "productId": "shop", "versions": { "api": "3.0.0" },
                    "slo": { "query": "up", "threshold": 1 } }),
        )
        .await
        .expect_problem(422);
    assert!(
        text(&refused["detail"]).contains("RUNTIME_CLOUD_PROMETHEUS_URL"),
        "{refused}"
    );
    let done = wait_rollout(&api, &id, "Completed").await;
    let waves: Vec<usize> = done["input"]["waves"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["environmentIds"].as_array().map_or(0, Vec::len))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        waves,
        [1, 3, 2],
        "a canary, then half, then the rest: {done}"
    );
    assert_eq!(done["status"]["wavesCompleted"], 3);
    for i in 0..6 {
        let env = format!("shop-{i:02}");
        let inventory = api
            .get(&format!("/factory/environments/{env}/inventory"))
            .await
            .expect(200);
        assert_eq!(
            inventory["workloads"][0]["version"], "2.0.0",
            "{env}: {inventory}"
        );
    }
    let instances = done["status"]["instances"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        instances
            .iter()
            .all(|i| i["converged"] == true && i["provisioningRunId"].is_string()),
        "{instances:?}"
    );
    let run = api.run(&text(&instances[0]["provisioningRunId"])).await;
    assert_eq!(
        (&run["kind"], &run["promotionId"]),
        (&json!("promotion"), &json!(id))
    );
    let kinds: Vec<String> = ["RolloutStarted", "WaveCompleted", "RolloutCompleted"]
        .iter()
        .map(|t| t.to_string())
        .collect();
    let mut counts = Vec::new();
    for kind in &kinds {
        counts.push(stack.events(kind).await.len());
    }
    assert_eq!(counts, [1, 3, 1]);
    let summary = api.get("/fleet/meta/summary").await.expect(200);
    assert_eq!(summary["activeRollouts"], 0);
    let metrics = stack.scrape().await;
    let tenant = stack.tenant("acme");
    for (name, n) in [("rollouts", 1), ("rollout_instances", 6)] {
        let line = format!(
            r#"connectsoft_factory_fleet_{name}{{tenant="{tenant}",state="Completed"}} {n}"#
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

#[tokio::test]
async fn a_failed_apply_halts_its_wave_opens_an_incident_and_a_skip_lets_it_finish() {
    let stack = Stack::start().await;
    let api = fleet(&stack, 3).await;
    stack.sandbox_cli(
        "acme",
        "shop-01",
        &["fail-next-apply", "--reason", "node pool exhausted"],
    );
    let id = start(
        &api,
        json!({ "environmentIds": ["shop-00", "shop-01", "shop-02"], "versions": { "api": "2.0.0" },
                "strategy": { "canary": 1, "steps": [{ "count": 2 }] },
                "bakeSeconds": 0, "convergeDeadlineSeconds": 60, "failureBudget": 0 }),
    )
    .await;
    let halted = wait_rollout(&api, &id, "Halted").await;
    let halt = &halted["status"]["halt"];
    assert_eq!(
        halt["wave"], 1,
        "the canary passed, the second wave halted: {halted}"
    );
    assert_eq!(halt["guard"]["guard"], "failureBudget");
    assert_eq!(halt["instances"], json!(["shop-01"]));
    let incidents = api.get("/fleet/incidents?state=open").await.expect(200);
    let incident = &incidents["items"][0];
    assert_eq!(incident["rolloutId"], id.as_str());
    assert_eq!(incident["source"], "rollout-halted");
    assert_eq!(incident["incidentId"], halt["incidentId"]);
    let summary = api.get("/fleet/meta/summary").await.expect(200);
    assert_eq!(
        (&summary["activeRollouts"], &summary["openIncidents"]),
        (&json!(1), &json!(1))
    );
    api.post(&format!("/fleet/rollouts/{id}/resume"), json!({}))
        .await
        .expect(202);
    // Resumed, the failed run still counts: halted again at once, with another incident.
    let first = halt["incidentId"].clone();
    let again = eventually(60, "the second halt", || {
        let api = api.clone();
        let (id, first) = (id.clone(), first.clone());
        async move {
            let r = api.get(&format!("/fleet/rollouts/{id}")).await.expect(200);
            let halt = &r["status"]["halt"];
            (r["state"] == "Halted" && halt["incidentId"] != first).then_some(r)
        }
    })
    .await;
    assert_eq!(again["status"]["halt"]["instances"], json!(["shop-01"]));
    api.post(
        &format!("/fleet/rollouts/{id}/skip"),
        json!({ "environmentId": "shop-01" }),
    )
    .await
    .expect(202);
    let done = wait_rollout(&api, &id, "Completed").await;
    let skipped: Vec<&Value> = done["status"]["instances"]
        .as_array()
        .map(|a| a.iter().filter(|i| i["skipped"] == true).collect())
        .unwrap_or_default();
    assert_eq!(skipped.len(), 1);
    assert_eq!(stack.events("RolloutHalted").await.len(), 2);
}

#[tokio::test]
async fn an_slo_breach_during_the_bake_halts_and_an_abort_ends_the_rollout() {
    let stack = Stack::start().await;
    let api = fleet(&stack, 2).await;
    let id = start(
        &api,
        json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                "bakeSeconds": 600, "convergeDeadlineSeconds": 60 }),
    )
    .await;
    // The canary converges and bakes; the breach comes during the bake.
    eventually(60, "the canary to converge", || {
        let api = api.clone();
        let id = id.clone();
        async move {
            let r = api.get(&format!("/fleet/rollouts/{id}")).await.expect(200);
            (r["status"]["instances"][0]["converged"] == true).then_some(())
        }
    })
    .await;
    api.post(
        &format!("/fleet/rollouts/{id}/breach"),
        json!({ "reason": "checkout p99 over 2 s" }),
    )
    .await
    .expect(202);
    let halted = wait_rollout(&api, &id, "Halted").await;
    assert_eq!(
        halted["status"]["halt"]["guard"]["guard"], "sloBreach",
        "{halted}"
    );
    assert_eq!(halted["status"]["halt"]["wave"], 0);
    let incidents = api.get("/fleet/incidents?state=open").await.expect(200);
    assert_eq!(
        (
            &incidents["items"][0]["source"],
            &incidents["items"][0]["incidentId"]
        ),
        (
            &json!("slo-breach"),
            &halted["status"]["halt"]["incidentId"]
        ),
        "{incidents}"
    );
    api.post(&format!("/fleet/rollouts/{id}/abort"), json!({}))
        .await
        .expect(202);
    let aborted = wait_rollout(&api, &id, "Aborted").await;
    assert_eq!(aborted["status"]["wavesCompleted"], 0);
    let second = api
        .get("/factory/environments/shop-01/inventory")
        .await
        .expect(200);
    assert_eq!(
        second["workloads"][0]["version"], "1.0.0",
        "the second wave never started"
    );
    api.post(&format!("/fleet/rollouts/{id}/resume"), json!({}))
        .await
        .expect_problem(409);
}

/// A rollback runs every instance the rollout started back to the specification it ran
/// before: here the canary, rolled out and observed at 2.0.0, is run back to 1.0.0 after a
/// breach halts the second wave.
#[tokio::test]
async fn a_rollback_runs_the_started_instances_back_to_their_previous_specification() {
    let stack = Stack::start().await;
    let api = fleet(&stack, 2).await;
    stack.sandbox_cli(
        "acme",
        "shop-01",
        &["fail-next-apply", "--reason", "quota exceeded"],
    );
    let id = start(
        &api,
        json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                "bakeSeconds": 0, "convergeDeadlineSeconds": 60 }),
    )
    .await;
    let halted = wait_rollout(&api, &id, "Halted").await;
    assert_eq!(halted["status"]["halt"]["wave"], 1, "{halted}");
    api.post(&format!("/fleet/rollouts/{id}/rollback"), json!({}))
        .await
        .expect(202);
    let done = wait_rollout(&api, &id, "RolledBack").await;
    let canary = &done["status"]["instances"][0];
    let back = api
        .wait_state(&text(&canary["rollbackRunId"]), "Applied")
        .await;
    assert_eq!(back["kind"], "promotion");
    api.wait_observed_after(&stack, &text(&canary["rollbackRunId"]))
        .await;
    let inventory = api
        .get("/factory/environments/shop-00/inventory")
        .await
        .expect(200);
    assert_eq!(inventory["workloads"][0]["version"], "1.0.0", "{inventory}");
    let specs = api
        .get("/factory/provisioning/specifications?environmentId=shop-00")
        .await
        .expect(200);
    assert_eq!(
        specs["items"][0]["workloads"][0]["version"], "1.0.0",
        "declared again: {specs}"
    );
    assert_eq!(stack.events("RolloutRolledBack").await.len(), 1);
}

/// An instance whose observer keeps reporting the old version does not complete its wave,
/// however its run reports `Applied` (the stale-Healthy trap of argo-cd #29410): the wave halts
/// at its deadline, naming the instance.
#[tokio::test]
async fn an_instance_observed_at_the_old_version_halts_its_wave_at_the_deadline() {
    let stack = Stack::start().await;
    let api = fleet(&stack, 1).await;
    stack.sandbox_cli("acme", "shop-00", &["freeze-observation", "--on"]);
    let id = start(
        &api,
        json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                "bakeSeconds": 0, "convergeDeadlineSeconds": 3 }),
    )
    .await;
    let halted = wait_rollout(&api, &id, "Halted").await;
    let halt = &halted["status"]["halt"];
    assert_eq!(halt["guard"]["guard"], "notConverged", "{halted}");
    assert_eq!(halt["instances"], json!(["shop-00"]));
    let run = api
        .run(&text(
            &halted["status"]["instances"][0]["provisioningRunId"],
        ))
        .await;
    assert_eq!(
        run["state"], "Applied",
        "the run applied; the observation says otherwise"
    );
    assert_eq!(
        stack.sandbox("acme", "shop-00")["workloads"][0]["version"],
        "2.0.0"
    );
    // The observer catches up (the next observation, the sweep's in production); resumed, the
    // wave completes.
    stack.sandbox_cli("acme", "shop-00", &["freeze-observation", "--off"]);
    api.observe(&stack, "shop-00").await;
    api.post(&format!("/fleet/rollouts/{id}/resume"), json!({}))
        .await
        .expect(202);
    wait_rollout(&api, &id, "Completed").await;
}

async fn rollout(api: &Api, id: &str) -> Value {
    api.get(&format!("/fleet/rollouts/{id}")).await.expect(200)
}

/// A rollout guarded by a Prometheus SLO query: the query names the instances moved so far;
/// a sample above the threshold during a bake halts the wave; a Prometheus that stops
/// answering halts it after three failed reads in a row; answering again and resumed, the
/// rollout completes.
#[tokio::test]
async fn an_slo_query_read_from_prometheus_halts_a_wave_and_a_silent_one_too() {
    let prometheus = PrometheusStandIn::start().await;
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_PROMETHEUS_URL",
        prometheus.url.clone(),
    ))
    .await;
    let api = fleet(&stack, 3).await;
    for i in 0..3 {
        prometheus.set(&format!("shop-{i:02}"), 0.01);
    }
    let id = start(
        &api,
        json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                "strategy": { "canary": 1, "steps": [{ "count": 2 }] },
                "bakeSeconds": 8, "convergeDeadlineSeconds": 120,
                "slo": { "query": "max(error_ratio{environment=~\"$environments\"})", "threshold": 0.05 } }),
    )
    .await;
    eventually(120, "the second wave to start", || {
        let api = api.clone();
        let id = id.clone();
        async move { (rollout(&api, &id).await["status"]["currentWave"] == 1).then_some(()) }
    })
    .await;
    prometheus.set("shop-02", 0.2);
    let halted = wait_rollout(&api, &id, "Halted").await;
    let halt = &halted["status"]["halt"];
    assert_eq!(
        (&halt["wave"], &halt["guard"]["guard"]),
        (&json!(1), &json!("sloBreach")),
        "{halted}"
    );
    let reason = text(&halt["reason"]);
    assert!(
        reason.contains("0.2 above 0.05") && reason.contains(r#"environment="shop-02""#),
        "{reason}"
    );
    let asked = prometheus.asked();
    assert!(
        asked
            .iter()
            .any(|q| q == r#"max(error_ratio{environment=~"shop-00"})"#),
        "the canary's query names the canary: {asked:?}"
    );
    assert!(
        asked
            .iter()
            .any(|q| q == r#"max(error_ratio{environment=~"shop-00|shop-01|shop-02"})"#),
        "the second wave's names every instance moved so far: {asked:?}"
    );

    // Prometheus goes silent: resumed, the wave halts again once three reads failed.
    prometheus.set("shop-02", 0.0);
    prometheus.fail(true);
    let first = halt["incidentId"].clone();
    api.post(&format!("/fleet/rollouts/{id}/resume"), json!({}))
        .await
        .expect(202);
    let silent = eventually(120, "the halt on a silent Prometheus", || {
        let api = api.clone();
        let (id, first) = (id.clone(), first.clone());
        async move {
            let r = rollout(&api, &id).await;
            let halt = &r["status"]["halt"];
            (r["state"] == "Halted" && halt["incidentId"] != first).then_some(r)
        }
    })
    .await;
    let halt = &silent["status"]["halt"];
    assert_eq!(halt["guard"]["guard"], "sloUnavailable", "{silent}");
    assert!(
        text(&halt["reason"]).contains("query timed out"),
        "{silent}"
    );

    prometheus.fail(false);
    api.post(&format!("/fleet/rollouts/{id}/resume"), json!({}))
        .await
        .expect(202);
    let done = wait_rollout(&api, &id, "Completed").await;
    assert_eq!(done["status"]["wavesCompleted"], 2);
}

/// The spec's check: 20 non-production and 5 production instances, selected by label: a
/// canary, the non-production waves, then production — whose runs wait for their approvals
/// and start only once every non-production instance converged — and every instance ends at
/// the release as observed. Instances without the label are left alone.
#[tokio::test]
async fn twenty_and_five_instances_go_canary_waves_then_production_after_approval() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let register = |env: String, class: &'static str, region: &'static str| {
        let api = api.clone();
        async move {
            api.post(
                "/factory/environments",
                json!({ "environmentId": env, "projectId": "shop", "class": class,
                        "labels": { "region": region }, "customerTenantId": format!("cust-{env}") }),
            )
            .await
            .expect(201);
            api.declare(&env, &[("api", "1.0.0", 1)]).await;
            let run = api.plan_run(&env, "baseline").await;
            if class == "production" {
                api.wait_state(&run, "AwaitingApproval").await;
                api.decide(&run, "approve").await.expect(202);
            }
            api.wait_state(&run, "Applied").await;
            run
        }
    };
    let mut baselines = Vec::new();
    for i in 0..20 {
        baselines.push(register(format!("dev-{i:02}"), "non-production", "eu"));
    }
    for i in 0..5 {
        baselines.push(register(format!("prod-{i:02}"), "production", "eu"));
    }
    baselines.push(register("us-dev".into(), "non-production", "us"));
    let runs = futures::future::join_all(baselines).await;
    for run in &runs {
        api.wait_observed_after(&stack, run).await;
    }
    let eu = api
        .get("/fleet/instances?labelSelector=region%3Deu")
        .await
        .expect(200);
    assert_eq!(eu["items"].as_array().map(Vec::len), Some(25));
    assert_eq!(eu["items"][0]["customerTenantId"], "cust-dev-00");
    assert_eq!(eu["items"][0]["labels"], json!({ "region": "eu" }));

    let id = start(
        &api,
        json!({ "labels": { "region": "eu" }, "versions": { "api": "2.0.0" },
                "releaseId": "shop-2.0.0", "bakeSeconds": 0, "convergeDeadlineSeconds": 600 }),
    )
    .await;
    let started = rollout(&api, &id).await;
    let sizes: Vec<(usize, bool)> = started["input"]["waves"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            (
                w["environmentIds"].as_array().map_or(0, Vec::len),
                w["production"] == true,
            )
        })
        .collect();
    assert_eq!(
        sizes,
        [
            (1, false),
            (5, false),
            (10, false),
            (4, false),
            (1, true),
            (2, true),
            (2, true)
        ]
    );
    // Approve each production run as it asks; when the first asks, every non-production
    // instance has converged.
    let approved = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let done = eventually(300, "the rollout to complete", || {
        let api = api.clone();
        let id = id.clone();
        let approved = approved.clone();
        async move {
            let r = rollout(&api, &id).await;
            if r["state"] == "Completed" {
                return Some(r);
            }
            assert_eq!(r["state"], "Running", "{r}");
            let instances = r["status"]["instances"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for i in &instances {
                let env = text(&i["environmentId"]);
                let Some(run_id) = i["provisioningRunId"].as_str() else {
                    continue;
                };
                if !env.starts_with("prod-") || approved.lock().unwrap().contains(run_id) {
                    continue;
                }
                let run = api.run(run_id).await;
                if run["state"] != "AwaitingApproval" {
                    continue;
                }
                let waiting: Vec<&Value> = instances
                    .iter()
                    .filter(|i| {
                        text(&i["environmentId"]).starts_with("dev-") && i["converged"] != true
                    })
                    .collect();
                assert!(waiting.is_empty(), "production asked before {waiting:?}");
                api.decide(run_id, "approve").await.expect(202);
                approved.lock().unwrap().insert(run_id.to_owned());
            }
            None
        }
    })
    .await;
    assert_eq!(
        approved.lock().unwrap().len(),
        5,
        "one approval per production instance"
    );
    assert_eq!(done["status"]["wavesCompleted"], 7);
    let instances = api.get("/fleet/instances").await.expect(200);
    for i in instances["items"].as_array().into_iter().flatten() {
        let env = text(&i["environmentId"]);
        let inventory = api
            .get(&format!("/factory/environments/{env}/inventory"))
            .await
            .expect(200);
        let expected = if env == "us-dev" { "1.0.0" } else { "2.0.0" };
        assert_eq!(inventory["workloads"][0]["version"], expected, "{env}");
        if env != "us-dev" {
            assert_eq!(i["releaseId"], "shop-2.0.0", "{i}");
        }
    }
    assert_eq!(stack.events("WaveCompleted").await.len(), 7);
}

/// The worker is killed while a wave is under way and started again: the rollout goes on
/// where it was, every instance has exactly one run of the rollout, and all converge.
#[tokio::test]
async fn a_worker_killed_mid_wave_loses_no_step() {
    let mut stack = Stack::start().await;
    let api = fleet(&stack, 4).await;
    // One instance's observer lags, so the second wave is still under way when the worker
    // dies, whatever the machine's speed.
    stack.sandbox_cli("acme", "shop-03", &["freeze-observation", "--on"]);
    let id = start(
        &api,
        json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                "strategy": { "canary": 1, "steps": [{ "count": 3 }] },
                "bakeSeconds": 0, "convergeDeadlineSeconds": 300 }),
    )
    .await;
    // Mid-wave: the second wave's runs all started, in flight or converging.
    eventually(120, "the second wave's runs to start", || {
        let api = api.clone();
        let id = id.clone();
        async move {
            let r = rollout(&api, &id).await;
            let started = r["status"]["instances"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["wave"] == 1 && i["provisioningRunId"].is_string())
                .count();
            (started == 3 && r["status"]["wavesCompleted"] == 1).then_some(())
        }
    })
    .await;
    stack.kill_worker();
    // Nobody looks at the rollout's instances meanwhile: the fleet host's inbox age for
    // rollouts grows.
    let age = |text: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| {
                l.strip_prefix("connectsoft_factory_fleet_host_inbox_lag{module=\"rollouts\"} ")
            })
            .and_then(|v| v.parse().ok())
    };
    eventually(60, "the rollouts module's inbox age to pass 3 s", || {
        let scrape = stack.scrape();
        async move { (age(&scrape.await)? > 3.0).then_some(()) }
    })
    .await;
    stack.start_worker();
    stack.sandbox_cli("acme", "shop-03", &["freeze-observation", "--off"]);
    api.observe(&stack, "shop-03").await;
    let done = wait_rollout(&api, &id, "Completed").await;
    let after = stack.scrape().await;
    assert_eq!(age(&after), Some(0.0), "no rollout under way: {after}");
    for i in 0..4 {
        let env = format!("shop-{i:02}");
        let runs = api
            .list_runs(&format!("?environmentId={env}&kind=promotion"))
            .await;
        let ours: Vec<&Value> = runs["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["promotionId"] == id.as_str())
            .collect();
        assert_eq!(ours.len(), 1, "{env}: {runs}");
        assert_eq!(ours[0]["state"], "Applied");
    }
    assert!(
        done["status"]["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|i| i["converged"] == true),
        "{done}"
    );
    assert_eq!(stack.events("WaveCompleted").await.len(), 2);
}
