//! The environments' lifetimes (`workflows::environment_lifetime`): started when an ephemeral
//! environment is registered, and by every worker as it starts for every active ephemeral
//! environment (a start finds a running lifetime and leaves it); told when its expiry moves;
//! asked for a decommission (started by the ask when it does not run).

use runtime_cloud_models::environments::EnvironmentKey;
use runtime_cloud_workflows::EnvironmentLifetime;
use runtime_cloud_workflows::environment_lifetime::DecommissionAsked;
use runtime_cloud_workflows::ids::environment_lifetime_id;
use sea_orm::DatabaseConnection;
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};

fn options(task_queue: &str, key: &EnvironmentKey) -> WorkflowStartOptions {
    let id = environment_lifetime_id(&key.tenant_id, &key.environment_id);
    WorkflowStartOptions::new(task_queue.to_owned(), id)
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .priority(runtime_cloud_workflows::fairness::of_tenant(&key.tenant_id))
        .build()
}

/// Starts the lifetime of `key` on `task_queue`, unless one runs.
pub async fn start(
    client: &Client,
    task_queue: &str,
    key: EnvironmentKey,
) -> Result<(), WorkflowStartError> {
    let opts = options(task_queue, &key);
    client
        .start_workflow(EnvironmentLifetime::run, key, opts)
        .await
        .map(|_| ())
}

/// Tells the lifetime of `key` that its row changed (its expiry moved), starting it when it
/// does not run.
pub async fn changed(
    client: &Client,
    task_queue: &str,
    key: EnvironmentKey,
) -> Result<(), WorkflowStartError> {
    let opts = options(task_queue, &key);
    client
        .signal_with_start_workflow(
            EnvironmentLifetime::run,
            key,
            EnvironmentLifetime::changed,
            (),
            opts,
        )
        .await
        .map(|_| ())
}

/// Asks the lifetime of `key` to decommission the environment now, starting it when it does
/// not run.
pub async fn decommission(
    client: &Client,
    task_queue: &str,
    key: EnvironmentKey,
    asked: DecommissionAsked,
) -> Result<(), WorkflowStartError> {
    let opts = options(task_queue, &key);
    client
        .signal_with_start_workflow(
            EnvironmentLifetime::run,
            key,
            EnvironmentLifetime::decommission_now,
            asked,
            opts,
        )
        .await
        .map(|_| ())
}

/// Starts the lifetime of every active ephemeral environment, unless one runs; one whose
/// start fails is logged (the next worker start starts it).
pub async fn start_all(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
) -> Result<usize, runtime_cloud_store::Error> {
    let ephemeral = runtime_cloud_store::environments::ephemeral(db).await?;
    for key in &ephemeral {
        if let Err(e) = start(client, task_queue, key.clone()).await {
            tracing::warn!(tenant_id = %key.tenant_id, environment_id = %key.environment_id,
                error = %e, "cannot start the environment's lifetime");
        }
    }
    Ok(ephemeral.len())
}
