//! Telling an environment that what runs there changed: its watched observation
//! (`observe/{tenant}/{environmentId}/watched`) is signalled `changed`, and started by the
//! signal when it does not run; one running observes once more. A watched cluster's change
//! tells it, and so does `runtime-cloud sandbox` after an out-of-band change.

use runtime_cloud_workflows::ObserveEnvironment;
use runtime_cloud_workflows::ids::watched_observation_id;
use runtime_cloud_workflows::observe_environment::ObserveInput;
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};

/// Tells environment `environment_id` of `tenant_id` to observe itself, on `task_queue`.
pub async fn changed(
    client: &Client,
    task_queue: &str,
    tenant_id: &str,
    environment_id: &str,
) -> Result<(), WorkflowStartError> {
    let id = watched_observation_id(tenant_id, environment_id);
    // The tenant is the fairness key of the observation's tasks: one tenant's thousands of
    // changed environments share the workers with another's few, instead of queueing them.
    let opts = WorkflowStartOptions::new(task_queue.to_owned(), id)
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .priority(runtime_cloud_workflows::fairness::of_tenant(tenant_id))
        .build();
    let input = ObserveInput {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
    };
    client
        .signal_with_start_workflow(
            ObserveEnvironment::run,
            input,
            ObserveEnvironment::changed,
            (),
            opts,
        )
        .await
        .map(|_| ())
}
