//! Program adoptions' workflows (`workflows::program_adoption`): started when an adoption is
//! asked for (again, after one failed), and by every worker as it starts for every adoption
//! still generating.

use runtime_cloud_workflows::ProgramAdoption;
use runtime_cloud_workflows::contracts::AdoptionInput;
use runtime_cloud_workflows::ids::program_adoption_id;
use sea_orm::DatabaseConnection;
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};

/// Starts the workflow of request `attempt` of proposal `proposal_id`'s adoption (of
/// `tenant_id`), unless it runs: each request has a workflow of its own, so one asked again
/// while the last one's workflow is still closing starts anew.
pub async fn start(
    client: &Client,
    task_queue: &str,
    tenant_id: &str,
    proposal_id: &str,
    attempt: u32,
) -> Result<(), WorkflowStartError> {
    let workflow_id = program_adoption_id(proposal_id, attempt);
    let opts = WorkflowStartOptions::new(task_queue.to_owned(), workflow_id)
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .priority(runtime_cloud_workflows::fairness::of_tenant(tenant_id))
        .build();
    match client
        .start_workflow(
            ProgramAdoption::run,
            AdoptionInput {
                proposal_id: proposal_id.to_owned(),
                attempt,
            },
            opts,
        )
        .await
    {
        Ok(_) | Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Starts the workflow of every adoption still generating; one whose start fails is logged
/// (the next worker start, or the adoption asked for again, starts it).
pub async fn start_all(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
) -> Result<usize, runtime_cloud_store::Error> {
    let generating = runtime_cloud_store::adoptions::generating(db).await?;
    for a in &generating {
        let started = start(client, task_queue, &a.tenant_id, &a.proposal_id, a.attempt);
        if let Err(e) = started.await {
            tracing::warn!(proposal_id = %a.proposal_id, error = %e, "cannot start the adoption");
        }
    }
    Ok(generating.len())
}
