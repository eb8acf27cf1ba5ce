//! Replay: recorded workflow histories must replay against the current workflow code, so a
//! change to a workflow's commands fails the suite instead of stranding runs in flight.
//!
//! One fixture per workflow shape, all recorded from live runs on today's code by one
//! recorder: `./scripts/test --run-ignored only record_replay_fixtures`. No patches before the
//! first release (docs/architecture.md, "Changing workflows"): until then a change to a
//! workflow records the fixtures again. From the first release on, a change that alters a
//! workflow's commands gets a patch (or a worker build id), and its fixtures are recorded
//! *before* the change and kept.

use crate::common::{Stack, text};
use runtime_cloud_workflows::{
    EnvironmentLifetime, FleetRollout, GitOpsReconciler, ObservationSweep, ObserveEnvironment,
    OffboardingOrder, ProvisioningRun, ReconciliationProposal,
};
use std::path::PathBuf;
use temporalio_client::{UntypedWorkflow, WorkflowHistory};
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every workflow shape a new execution can take, one recorded history each.
const FIXTURES: &[&str] = &[
    // A production run that waited for its approval, was approved and applied.
    "provisioning_run_approved.json",
    // A run that queued behind it on the environment's lock (held in the database) and was
    // signalled its grant by the first run's release.
    "provisioning_run_queued.json",
    // An operator's observation that found drift and raised a proposal.
    "observe_environment.json",
    // That proposal, auto-accepted, and its reconciliation run.
    "reconciliation_proposal.json",
    "provisioning_run_reconciliation.json",
    // A sweep over three environments, one drifted.
    "observation_sweep.json",
    // A GitOps pass over them.
    "gitops_reconciler.json",
    // A fleet rollout over two instances: a canary wave, then the other.
    "fleet_rollout.json",
    // An ephemeral environment's lifetime: warned, decommissioned at its expiry, retired; and
    // its decommission run, a child of it.
    "environment_lifetime.json",
    "provisioning_run_decommission.json",
    // A rollout halted by a breach and rolled back: its release quarantined, its instance run
    // back.
    "fleet_rollout_rolled_back.json",
    // An instance off-boarded: exported, verified, decommissioned.
    "offboarding_order.json",
];

/// Saves workflow `workflow_id`'s history as the fixture `name`.
async fn save_fixture(client: &temporalio_client::Client, workflow_id: String, name: &str) {
    let json = client
        .get_workflow_handle::<UntypedWorkflow>(workflow_id)
        .fetch_history(Default::default())
        .to_json()
        .await
        .expect("history");
    std::fs::write(fixtures().join(name), json).expect("write fixture");
}

/// Every recorded history replays without a non-determinism error.
#[tokio::test]
async fn recorded_histories_replay_on_current_code() {
    let mut options = WorkflowReplayerOptions::new().build();
    options
        .register_workflow::<ProvisioningRun>()
        .expect("register run");
    options
        .register_workflow::<ObserveEnvironment>()
        .expect("register observe");
    options
        .register_workflow::<ReconciliationProposal>()
        .expect("register proposal");
    options
        .register_workflow::<ObservationSweep>()
        .expect("register sweep");
    options
        .register_workflow::<GitOpsReconciler>()
        .expect("register reconciler");
    options
        .register_workflow::<FleetRollout>()
        .expect("register rollout");
    options
        .register_workflow::<EnvironmentLifetime>()
        .expect("register lifetime");
    options
        .register_workflow::<OffboardingOrder>()
        .expect("register off-boarding");
    let replayer = WorkflowReplayer::new(options).expect("replayer");
    for name in FIXTURES {
        let bytes =
            std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
        let history = WorkflowHistory::from_json(&bytes).expect("history JSON");
        replayer
            .replay_workflow(history)
            .await
            .unwrap_or_else(|e| panic!("{name} no longer replays: {e}"));
    }
}

/// Records every fixture of [`FIXTURES`] from live workflows.
#[tokio::test]
#[ignore = "a tool, not a test: ./scripts/test --run-ignored only record_replay_fixtures"]
async fn record_replay_fixtures() {
    let stack = Stack::start().await;
    let client = stack.temporal_client().await;
    let api = stack.operator("acme");

    // Two production runs on one environment: the second queues behind the first.
    let (first, _) = api.awaiting_approval("prod", 2).await;
    api.declare("prod", &[("api", "1.1.0", 2)]).await;
    let second = api.plan_run("prod", "promotion").await;
    api.decide(&first, "approve").await.expect(202);
    api.wait_state(&first, "Applied").await;
    api.wait_state(&second, "AwaitingApproval").await;
    api.decide(&second, "approve").await.expect(202);
    api.wait_state(&second, "Applied").await;
    api.wait_observed_after(&stack, &second).await;
    let run = |id: &str| format!("provisioning-run/{id}");
    save_fixture(&client, run(&first), "provisioning_run_approved.json").await;
    save_fixture(&client, run(&second), "provisioning_run_queued.json").await;

    // Drift found by an operator's observation, auto-accepted and reconciled.
    api.applied(&stack, "dev", &[("api", "1.0.0", 2)]).await;
    stack.sandbox_cli(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    let started = api
        .post("/factory/environments/dev/observe", serde_json::json!({}))
        .await
        .expect(202);
    let observe_id = text(&started["workflowId"]);
    let outcome = client
        .get_workflow_handle::<ObserveEnvironment>(observe_id.clone())
        .get_result(Default::default())
        .await
        .expect("observe");
    let proposal = outcome.new_proposal.expect("a proposal").proposal_id;
    let applied = api.wait_proposal("dev", &proposal, "Applied").await;
    let reconciliation = text(&applied["provisioningRunId"]);
    api.wait_observed_after(&stack, &reconciliation).await;
    save_fixture(&client, observe_id, "observe_environment.json").await;
    let proposal = format!("proposal/{proposal}");
    save_fixture(&client, proposal, "reconciliation_proposal.json").await;
    let reconciliation = run(&reconciliation);
    save_fixture(
        &client,
        reconciliation,
        "provisioning_run_reconciliation.json",
    )
    .await;

    // A sweep over the three, one scaled out of band.
    api.applied(&stack, "stage", &[("api", "1.0.0", 2)]).await;
    stack.sandbox_cli(
        "acme",
        "stage",
        &["scale", "--workload", "api", "--replicas", "4"],
    );
    stack.trigger_schedule("observation-sweep");
    let sweep = crate::common::eventually(60, "the sweep to complete", || {
        stack.first_workflow("ObservationSweep", "ExecutionStatus='Completed'")
    })
    .await;
    save_fixture(&client, sweep, "observation_sweep.json").await;

    // A GitOps pass once the sweep's reconciliation has applied.
    crate::common::eventually(60, "the drifted environment to be reconciled", || async {
        let open = api.drift("stage", Some("open")).await;
        open.is_empty().then_some(())
    })
    .await;
    stack.trigger_schedule("gitops-reconciler");
    let pass = crate::common::eventually(60, "the GitOps pass to complete", || {
        stack.first_workflow("GitOpsReconciler", "ExecutionStatus='Completed'")
    })
    .await;
    save_fixture(&client, pass, "gitops_reconciler.json").await;

    // A fleet rollout of the product's two non-production instances.
    let started = api
        .post(
            "/fleet/rollouts",
            serde_json::json!({ "environmentIds": ["dev", "stage"], "versions": { "api": "2.0.0" },
                                "bakeSeconds": 1, "convergeDeadlineSeconds": 60 }),
        )
        .await
        .expect(202);
    let rollout = text(&started["rolloutId"]);
    crate::common::eventually(60, "the rollout to complete", || async {
        let r = api
            .get(&format!("/fleet/rollouts/{rollout}"))
            .await
            .expect(200);
        (r["state"] == "Completed").then_some(())
    })
    .await;
    save_fixture(
        &client,
        format!("fleet-rollout/{rollout}"),
        "fleet_rollout.json",
    )
    .await;

    // An ephemeral environment, provisioned, warned, decommissioned at its expiry, retired.
    api.post(
        "/factory/environments",
        serde_json::json!({ "environmentId": "preview", "projectId": "shop",
                            "class": "non-production", "ttl": "20s" }),
    )
    .await
    .expect(201);
    api.declare("preview", &[("api", "1.0.0", 1)]).await;
    let baseline = api.plan_run("preview", "baseline").await;
    api.wait_state(&baseline, "Applied").await;
    crate::common::eventually(120, "the ephemeral environment to be retired", || async {
        let e = api.get("/factory/environments/preview").await.expect(200);
        (e["state"] == "retired").then_some(())
    })
    .await;
    let runs = api
        .list_runs("?environmentId=preview&kind=decommission")
        .await;
    let decommission = text(&runs["items"][0]["provisioningRunId"]);
    let lifetime = format!("environment-lifetime/{}/preview", stack.tenant("acme"));
    crate::common::eventually(60, "the lifetime to complete", || async {
        let done = stack
            .first_workflow("EnvironmentLifetime", "ExecutionStatus='Completed'")
            .await;
        done.is_some().then_some(())
    })
    .await;
    save_fixture(&client, lifetime, "environment_lifetime.json").await;
    save_fixture(
        &client,
        run(&decommission),
        "provisioning_run_decommission.json",
    )
    .await;

    // A rollout of `dev` halted by a breach during its bake, then rolled back.
    let started = api
        .post(
            "/fleet/rollouts",
            serde_json::json!({ "environmentIds": ["dev"], "versions": { "api": "3.0.0" },
                                "bakeSeconds": 600, "convergeDeadlineSeconds": 60 }),
        )
        .await
        .expect(202);
    let rollout = text(&started["rolloutId"]);
    let breach = format!("/fleet/rollouts/{rollout}/breach");
    crate::common::eventually(60, "the breach to halt the rollout", || async {
        let r = api
            .get(&format!("/fleet/rollouts/{rollout}"))
            .await
            .expect(200);
        if r["state"] == "Halted" {
            return Some(());
        }
        if r["status"]["wavesCompleted"] == 0 && r["status"]["instances"][0]["converged"] == true {
            api.post(&breach, serde_json::json!({ "reason": "error ratio 0.3" }))
                .await;
        }
        None
    })
    .await;
    api.post(
        &format!("/fleet/rollouts/{rollout}/rollback"),
        serde_json::json!({}),
    )
    .await
    .expect(202);
    crate::common::eventually(120, "the rollout to be rolled back", || async {
        let r = api
            .get(&format!("/fleet/rollouts/{rollout}"))
            .await
            .expect(200);
        (r["state"] == "RolledBack").then_some(())
    })
    .await;
    save_fixture(
        &client,
        format!("fleet-rollout/{rollout}"),
        "fleet_rollout_rolled_back.json",
    )
    .await;

    // `stage` off-boarded.
    let order = api
        .post(
            "/fleet/offboarding-orders",
            serde_json::json!({ "environmentId": "stage", "reason": "recorded for replay" }),
        )
        .await
        .expect(202);
    let order = text(&order["orderId"]);
    crate::common::eventually(120, "the order to complete", || async {
        let o = api
            .get(&format!("/fleet/offboarding-orders/{order}"))
            .await
            .expect(200);
        (o["state"] == "completed").then_some(())
    })
    .await;
    save_fixture(
        &client,
        format!("offboarding-order/{order}"),
        "offboarding_order.json",
    )
    .await;
}
