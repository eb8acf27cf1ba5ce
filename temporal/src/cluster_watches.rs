//! The clusters' watches (`workflows::cluster_watch`): started wherever an environment may
//! name a cluster no watch looks after yet. A start finds a running watch and leaves it, so
//! every worker starts every cluster's as it starts, and the API starts an environment's when it
//! is registered or moved.

use runtime_cloud_models::targets::KubernetesCluster;
use runtime_cloud_workflows::ClusterWatch;
use runtime_cloud_workflows::ids::cluster_watch_id;
use sea_orm::DatabaseConnection;
use std::collections::BTreeSet;
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};

/// Starts the watch of `cluster` on `task_queue`, unless one runs.
pub async fn start(
    client: &Client,
    task_queue: &str,
    cluster: KubernetesCluster,
) -> Result<(), WorkflowStartError> {
    let opts = WorkflowStartOptions::new(task_queue.to_owned(), cluster_watch_id(&cluster.id()))
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .build();
    client
        .start_workflow(ClusterWatch::run, cluster, opts)
        .await
        .map(|_| ())
}

/// Starts the watch of every cluster an environment is observed on, unless one runs; a
/// cluster whose start fails is logged (the next worker start, or the environment's next
/// change, starts it).
pub async fn start_all(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
) -> Result<usize, runtime_cloud_store::Error> {
    let clusters: BTreeSet<KubernetesCluster> =
        runtime_cloud_store::environments::kubernetes_observed(db)
            .await?
            .into_iter()
            .map(|(_, ns)| ns.cluster())
            .collect();
    for cluster in &clusters {
        if let Err(e) = start(client, task_queue, cluster.clone()).await {
            tracing::warn!(cluster = %cluster.id(), error = %e, "cannot start the cluster's watch");
        }
    }
    Ok(clusters.len())
}
