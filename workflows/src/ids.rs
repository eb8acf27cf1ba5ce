//! Every workflow id, and the deterministic time-ordered ids minted inside workflows.
//!
//! A workflow id is its idempotency key: starting an id that exists never creates a second
//! execution, so each id says what makes a workflow unique.

use temporalio_sdk::WorkflowContext;

/// `provisioning-run/{runId}`: one workflow per run.
pub fn run_workflow_id(run_id: &str) -> String {
    format!("provisioning-run/{run_id}")
}

/// `environment/{tenant}/{env}`: the environment's lock (one applying run at a time), a
/// semaphore of one slot held in the database (not a workflow id).
pub fn environment_lock_id(tenant_id: &str, environment_id: &str) -> String {
    format!("environment/{tenant_id}/{environment_id}")
}

/// `capacity/{tenant}/{project}`: the project's capacity semaphore (its quota's concurrent
/// runs), held in the database (not a workflow id).
pub fn capacity_semaphore_id(tenant_id: &str, project_id: &str) -> String {
    format!("capacity/{tenant_id}/{project_id}")
}

/// `{taskQueue}/pool/{poolId}`: the task queue of a worker pool, beside the workers' own
/// (pool ids are unique across tenants; the prefix keeps deployments sharing a Temporal
/// namespace apart).
pub fn pool_task_queue(task_queue: &str, pool_id: &str) -> String {
    format!("{task_queue}/pool/{pool_id}")
}

/// `observe/{tenant}/{env}/{window}`: an observation started as its own workflow; the API
/// starts an operator's as `manual-{id}`, one per request.
pub fn observe_workflow_id(tenant_id: &str, environment_id: &str, window: &str) -> String {
    format!("observe/{tenant_id}/{environment_id}/{window}")
}

/// `observe/{tenant}/{env}/watched`: the observation a watched change to the environment's
/// objects starts or signals; one at a time per environment.
pub fn watched_observation_id(tenant_id: &str, environment_id: &str) -> String {
    observe_workflow_id(tenant_id, environment_id, "watched")
}

/// `cluster-watch/{clusterId}`: the watch of one Kubernetes cluster.
pub fn cluster_watch_id(cluster_id: &str) -> String {
    format!("cluster-watch/{cluster_id}")
}

/// `program-adoption/{proposalId}/{attempt}`: a proposal's unmanaged workloads adopted into its
/// program, for the `attempt`th time it was asked for.
pub fn program_adoption_id(proposal_id: &str, attempt: u32) -> String {
    format!("program-adoption/{proposal_id}/{attempt}")
}

/// `offboarding-order/{orderId}`: an instance's off-boarding.
pub fn offboarding_order_id(order_id: &str) -> String {
    format!("offboarding-order/{order_id}")
}

/// `environment-lifetime/{tenant}/{env}`: an environment's expiry and decommission.
pub fn environment_lifetime_id(tenant_id: &str, environment_id: &str) -> String {
    format!("environment-lifetime/{tenant_id}/{environment_id}")
}

/// `fleet-rollout/{rolloutId}`: one workflow per fleet rollout.
pub fn rollout_workflow_id(rollout_id: &str) -> String {
    format!("fleet-rollout/{rollout_id}")
}

/// `proposal/{proposalId}`: one workflow per reconciliation proposal.
pub fn proposal_workflow_id(proposal_id: &str) -> String {
    format!("proposal/{proposal_id}")
}

/// A UUIDv7 from the workflow's clock and its seeded random source: time-ordered like the ids
/// the API mints, and the same on every replay.
pub fn time_ordered_id<W>(ctx: &WorkflowContext<W>) -> String {
    let millis = ctx
        .workflow_time()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    let a: u64 = ctx.random();
    let b: u64 = ctx.random();
    let mut bytes = [0u8; 10];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes()[..2]);
    uuid::Builder::from_unix_timestamp_millis(millis, &bytes)
        .into_uuid()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_what_makes_a_workflow_unique() {
        assert_eq!(run_workflow_id("r1"), "provisioning-run/r1");
        assert_eq!(environment_lock_id("acme", "prod"), "environment/acme/prod");
        assert_eq!(
            observe_workflow_id("acme", "prod", "202611290935"),
            "observe/acme/prod/202611290935"
        );
        assert_eq!(proposal_workflow_id("p1"), "proposal/p1");
        assert_eq!(capacity_semaphore_id("acme", "shop"), "capacity/acme/shop");
    }
}

/// A time-ordered id (UUIDv7 at `millis`) whose other bits come from `seed` and `key`: the same
/// on every retry of the activity that derives it. The sweep's pages name the proposals their
/// environments raise this way, so a retried page raises the same ones without the workflow
/// carrying an id per environment in its history.
pub fn derived_time_ordered_id(millis: u64, seed: &str, key: &str) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x3d2e_8f51_0b6a_4c1e_9a77_c4d0_5e28_b913);
    let hashed = uuid::Uuid::new_v5(&NAMESPACE, format!("{seed}\0{key}").as_bytes());
    let mut bytes = [0u8; 10];
    bytes.copy_from_slice(&hashed.as_bytes()[..10]);
    uuid::Builder::from_unix_timestamp_millis(millis, &bytes)
        .into_uuid()
        .to_string()
}

#[cfg(test)]
mod derived_tests {
    use super::derived_time_ordered_id;

    #[test]
    fn derived_ids_repeat_for_the_same_inputs_and_order_by_time() {
        let a = derived_time_ordered_id(1_000, "sweep-1", "acme/dev");
        assert_eq!(a, derived_time_ordered_id(1_000, "sweep-1", "acme/dev"));
        assert_ne!(a, derived_time_ordered_id(1_000, "sweep-1", "acme/prod"));
        assert_ne!(a, derived_time_ordered_id(1_000, "sweep-2", "acme/dev"));
        assert!(derived_time_ordered_id(2_000, "sweep-1", "acme/dev") > a);
        assert_eq!(
            uuid::Uuid::parse_str(&a).map(|u| u.get_version_num()),
            Ok(7)
        );
    }
}
