//! Replay: recorded run histories must replay against the current workflow code, so a
//! non-deterministic change to a workflow fails the suite instead of stuck production runs.
//!
//! The fixtures were recorded from real runs with
//! `./scripts/test --run-ignored only record_replay_fixtures` (a production run that waited,
//! was approved and applied; a second run that queued on the environment lock) and
//! `./scripts/test --run-ignored only record_drift_replay_fixtures` (an observation that found
//! drift, its auto-accepted proposal and the reconciliation run) and
//! `RC_SWEEP_FIXTURE=observation_sweep_batches.json ./scripts/test --run-ignored only
//! record_sweep_replay_fixture` (a sweep over two environments, one drifted).
//! `observation_sweep_children.json` was recorded the same way on the code before the
//! `observe-in-batches` patch (commit fa8912b), when the sweep started a child per environment.
//! The `local_steps_*` fixtures are the same recordings made after the `local-quick-steps` and
//! `local-observation` patches (`RC_FIXTURE_PREFIX=local_steps_`); the unprefixed ones predate
//! them and prove that runs in flight during an upgrade still replay.
//! `provisioning_run_early_approval.json` (`./scripts/test --run-ignored only
//! record_early_approval_replay_fixture`) is a run whose approval arrived before its plan and
//! was held (`hold-early-approvals` patch). `holder_check_environment_lock.json` is the lock of
//! `record_replay_fixtures` recorded after the `check-lock-holder` patch
//! (`RC_FIXTURE_PREFIX=holder_check_`; its two run histories were not kept).
//! The `lean_*` fixtures are `record_replay_fixtures` and `record_drift_replay_fixtures`
//! recorded after the `lean-run` patch (`RC_FIXTURE_PREFIX=lean_`; the observation's history
//! is the same as `local_steps_observe_environment.json` and was not kept): a run that took a
//! free lock by starting it, a run that queued and was granted it, the lock of both, a
//! proposal whose run was started with its search attributes.
//! `regrant_environment_lock.json` (`./scripts/test --run-ignored only
//! record_regrant_replay_fixture`) is a lock whose holder asked for it again and was granted
//! it again (`regrant-to-holder` patch). `continued_idle_environment_lock.json` is not a
//! recording: it was written by hand in the shape of the recorded locks, for a lock that
//! continued as new while nobody waited and was then asked for and granted (what a lock with
//! 200 grants behind it does); it replays on the code before `lean-run` (`73f512b`) and guards
//! the lock's first wait.

use crate::common::Stack;
use runtime_cloud_workflows::{
    EnvironmentLock, ObservationSweep, ObserveEnvironment, ProvisioningRun, ReconciliationProposal,
};
use std::path::PathBuf;
use temporalio_client::{UntypedWorkflow, WorkflowHistory};
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A recorder's file name, prefixed with `$RC_FIXTURE_PREFIX` so a new recording can sit
/// beside the old ones instead of replacing them.
fn fixture_name(name: &str) -> String {
    format!(
        "{}{name}",
        std::env::var("RC_FIXTURE_PREFIX").unwrap_or_default()
    )
}

/// Saves workflow `workflow_id`'s history as the fixture `name` (see [`fixture_name`]).
async fn save_fixture(client: &temporalio_client::Client, workflow_id: String, name: &str) {
    let json = client
        .get_workflow_handle::<UntypedWorkflow>(workflow_id)
        .fetch_history(Default::default())
        .to_json()
        .await
        .expect("history");
    std::fs::write(fixtures().join(fixture_name(name)), json).expect("write fixture");
}

const FIXTURES: &[&str] = &[
    "provisioning_run_approved.json",
    "provisioning_run_queued.json",
    "environment_lock.json",
    "observe_environment.json",
    "reconciliation_proposal.json",
    "provisioning_run_reconciliation.json",
    "observation_sweep_children.json",
    "observation_sweep_batches.json",
    "local_steps_provisioning_run_approved.json",
    "local_steps_provisioning_run_queued.json",
    "local_steps_environment_lock.json",
    "local_steps_observe_environment.json",
    "local_steps_reconciliation_proposal.json",
    "local_steps_provisioning_run_reconciliation.json",
    "provisioning_run_early_approval.json",
    "holder_check_environment_lock.json",
    "lean_provisioning_run_approved.json",
    "lean_provisioning_run_queued.json",
    "lean_environment_lock.json",
    "lean_reconciliation_proposal.json",
    "lean_provisioning_run_reconciliation.json",
    "regrant_environment_lock.json",
    "continued_idle_environment_lock.json",
];

/// Every recorded history replays without a non-determinism error.
#[tokio::test]
async fn recorded_histories_replay_on_current_code() {
    let mut options = WorkflowReplayerOptions::new().build();
    options
        .register_workflow::<ProvisioningRun>()
        .expect("register run");
    options
        .register_workflow::<EnvironmentLock>()
        .expect("register lock");
    options
        .register_workflow::<ObserveEnvironment>()
        .expect("register observe");
    options
        .register_workflow::<ReconciliationProposal>()
        .expect("register proposal");
    options
        .register_workflow::<ObservationSweep>()
        .expect("register sweep");
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

/// Records the drift fixtures from a live reconciliation. (The provisioning fixtures predate
/// the observe-after-apply patch and are kept as they are, to prove old histories still replay.)
#[tokio::test]
#[ignore = "a tool, not a test: ./scripts/test --run-ignored only record_drift_replay_fixtures"]
async fn record_drift_replay_fixtures() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 2)]).await;
    let baseline = api.plan_run("dev", "baseline").await;
    api.wait_state(&baseline, "Applied").await;
    api.wait_observed_after(&stack, &baseline).await;
    let client = stack.temporal_client().await;
    stack.sandbox_cli(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    let started = api
        .post("/factory/environments/dev/observe", serde_json::json!({}))
        .await
        .expect(202);
    let observe_id = started["workflowId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let outcome = client
        .get_workflow_handle::<ObserveEnvironment>(observe_id.clone())
        .get_result(Default::default())
        .await
        .expect("observe");
    let proposal = outcome.new_proposal.expect("a proposal").proposal_id;
    let applied = api.wait_proposal("dev", &proposal, "Applied").await;
    let run = applied["provisioningRunId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    save_fixture(&client, observe_id, "observe_environment.json").await;
    let proposal = format!("proposal/{proposal}");
    save_fixture(&client, proposal, "reconciliation_proposal.json").await;
    let run = format!("provisioning-run/{run}");
    save_fixture(&client, run, "provisioning_run_reconciliation.json").await;
}

/// Records the provisioning fixtures from live runs.
#[tokio::test]
#[ignore = "a tool, not a test: ./scripts/test --run-ignored only record_replay_fixtures"]
async fn record_replay_fixtures() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 2)]).await;
    let first = api.plan_run("prod", "baseline").await;
    api.wait_state(&first, "AwaitingApproval").await;
    api.declare("prod", &[("api", "1.1.0", 2)]).await;
    let second = api.plan_run("prod", "promotion").await;
    api.decide(&first, "approve").await.expect(202);
    api.wait_state(&first, "Applied").await;
    api.wait_state(&second, "AwaitingApproval").await;
    api.decide(&second, "approve").await.expect(202);
    api.wait_state(&second, "Applied").await;

    let client = stack.temporal_client().await;
    let first = format!("provisioning-run/{first}");
    save_fixture(&client, first, "provisioning_run_approved.json").await;
    let second = format!("provisioning-run/{second}");
    save_fixture(&client, second, "provisioning_run_queued.json").await;
    let lock = format!("environment/{}/prod", api.tenant);
    save_fixture(&client, lock, "environment_lock.json").await;
}

/// Records a run approved before its worker saw the plan (see `run_approved_before_its_plan`).
#[tokio::test]
#[ignore = "a tool, not a test: ./scripts/test --run-ignored only record_early_approval_replay_fixture"]
async fn record_early_approval_replay_fixture() {
    let mut stack = Stack::start().await;
    let (api, id, _) = stack.run_approved_before_its_plan().await;
    api.wait_state(&id, "Applied").await;
    let client = stack.temporal_client().await;
    let run = format!("provisioning-run/{id}");
    save_fixture(&client, run, "provisioning_run_early_approval.json").await;
}

/// Records the lock of a run whose start of it was answered but the answer lost (see
/// `run_whose_lock_start_answer_was_lost`): the holder asks again and is granted again.
#[tokio::test]
#[ignore = "a tool, not a test: ./scripts/test --run-ignored only record_regrant_replay_fixture"]
async fn record_regrant_replay_fixture() {
    let mut stack = Stack::start().await;
    let (api, id, lock) = stack.run_whose_lock_start_answer_was_lost().await;
    api.wait_state(&id, "Applied").await;
    api.wait_observed_after(&stack, &id).await;
    let client = stack.temporal_client().await;
    save_fixture(&client, lock, "regrant_environment_lock.json").await;
}

/// Records a sweep's history into `tests/fixtures/$RC_SWEEP_FIXTURE`: two applied
/// environments, one scaled out of band, one sweep triggered by hand.
#[tokio::test]
#[ignore = "a tool, not a test: RC_SWEEP_FIXTURE=… ./scripts/test --run-ignored only record_sweep_replay_fixture"]
async fn record_sweep_replay_fixture() {
    let name = std::env::var("RC_SWEEP_FIXTURE").expect("RC_SWEEP_FIXTURE: the file to write");
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    for env in ["a", "b"] {
        api.applied(&stack, env, &[("api", "1.0.0", 2)]).await;
    }
    stack.sandbox_cli(
        "acme",
        "a",
        &["scale", "--workload", "api", "--replicas", "4"],
    );
    stack.trigger_schedule("observation-sweep");
    let id = crate::common::eventually(60, "the sweep to complete", || {
        stack.first_workflow("ObservationSweep", "ExecutionStatus='Completed'")
    })
    .await;
    let client = stack.temporal_client().await;
    save_fixture(&client, id, &name).await;
}
