//! Admission: the runs the API deferred while their project's `concurrentRuns` were all in
//! flight (`transactions::admit_run`) are started here once a slot frees. The capacity activities
//! admit when a run's lease is released or a vanished holder's expires; the API's starter
//! admits on each round (a release whose admission failed, a start deferred just after a
//! release looked) and when a quota changes.

use crate::Error;
use runtime_cloud_models::RunInput;
use runtime_cloud_store::run_starts;
use runtime_cloud_transactions::admit_run::admit_deferred;
use runtime_cloud_workflows::ProvisioningRun;
use runtime_cloud_workflows::ids::run_workflow_id;
use runtime_cloud_workflows::search_attributes::run_attributes;
use sea_orm::DatabaseConnection;
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{
    Client, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

/// Starts run `input`'s workflow on `task_queue`, with its search attributes and its tenant
/// as fairness key (a deferred run, which carries the lease recorded with it, at backlog
/// priority: `workflows::fairness::of_run`). The run id is the idempotency key: a start for a
/// workflow that exists (running or closed) creates nothing and counts as started.
pub async fn start_run(
    client: &Client,
    task_queue: &str,
    input: RunInput,
) -> Result<(), WorkflowStartError> {
    let opts = WorkflowStartOptions::new(task_queue.to_owned(), run_workflow_id(&input.run_id))
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(SearchAttributes::new(run_attributes(&input)))
        .priority(runtime_cloud_workflows::fairness::of_run(
            &input.tenant_id,
            input.lease_id.is_some(),
        ))
        .build();
    match client
        .start_workflow(ProvisioningRun::run, input, opts)
        .await
    {
        Ok(_) | Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Starts the deferred runs of the tenant's project that fit its free slots, oldest first
/// ([`admit_deferred`] chooses them, one admitter at a time); returns how many started. A
/// start that fails here is left to the API's starter, which makes it later.
pub async fn admit(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
    tenant_id: &str,
    project_id: &str,
) -> Result<usize, Error> {
    let admitted = admit_deferred(db, Some((tenant_id, project_id))).await?;
    start_admitted(db, client, task_queue, admitted).await
}

/// [`admit`] for every project with deferred starts.
pub async fn admit_all(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
) -> Result<usize, Error> {
    let admitted = admit_deferred(db, None).await?;
    start_admitted(db, client, task_queue, admitted).await
}

/// After a release freed a slot (`freed_by` names it in the log): [`admit_all`], because the
/// slot may let a deferred run of its project start and, when its tenant has no other run at
/// work, gives other tenants' backlogs back the share they yielded to it
/// (`models::capacity::backlog_share`). A failure is only logged: the release itself is
/// committed, and the next release or the API's next start admits them.
pub async fn admit_after_release(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
    freed_by: &str,
) {
    if let Err(e) = admit_all(db, client, task_queue).await {
        tracing::warn!(error = %e, freed_by, "deferred runs not admitted yet");
    }
}

async fn start_admitted(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
    admitted: Vec<RunInput>,
) -> Result<usize, Error> {
    let n = admitted.len();
    for input in admitted {
        let (run_id, tenant_id, project_id) = (
            input.run_id.clone(),
            input.tenant_id.clone(),
            input.project_id.clone(),
        );
        start_run(client, task_queue, input)
            .await
            .map_err(|source| Error::Start {
                run_id: run_id.clone(),
                source,
            })?;
        run_starts::started(db, &run_id).await?;
        tracing::info!(%run_id, %tenant_id, %project_id, "admitted a deferred run");
    }
    Ok(n)
}
