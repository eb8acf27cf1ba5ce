//! Off-boarding orders' workflows (`workflows::offboarding_order`): started when an order is
//! placed (and again when it is placed again: a start finds a running one and leaves it), and
//! by every worker as it starts for every order that has not ended.

use runtime_cloud_workflows::OffboardingOrder;
use runtime_cloud_workflows::contracts::OrderInput;
use runtime_cloud_workflows::ids::offboarding_order_id;
use sea_orm::DatabaseConnection;
use temporalio_client::errors::WorkflowStartError;
use temporalio_client::{Client, WorkflowIdConflictPolicy, WorkflowStartOptions};

/// Starts the workflow of `order` on `task_queue`, unless it runs.
pub async fn start(
    client: &Client,
    task_queue: &str,
    order: OrderInput,
) -> Result<(), WorkflowStartError> {
    let opts =
        WorkflowStartOptions::new(task_queue.to_owned(), offboarding_order_id(&order.order_id))
            .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
            .priority(runtime_cloud_workflows::fairness::of_tenant(
                &order.tenant_id,
            ))
            .build();
    match client
        .start_workflow(OffboardingOrder::run, order, opts)
        .await
    {
        Ok(_) | Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Starts the workflow of every order that has not ended; one whose start fails is logged
/// (the next worker start, or the order placed again, starts it).
pub async fn start_all(
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
) -> Result<usize, runtime_cloud_store::Error> {
    let orders = runtime_cloud_store::offboarding::unended(db).await?;
    for order in &orders {
        let input = OrderInput {
            order_id: order.order_id.clone(),
            tenant_id: order.tenant_id.clone(),
            environment_id: order.environment_id.clone(),
        };
        if let Err(e) = start(client, task_queue, input).await {
            tracing::warn!(order_id = %order.order_id, error = %e, "cannot start the off-boarding order");
        }
    }
    Ok(orders.len())
}
