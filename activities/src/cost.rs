//! A plan's cost estimate (`models::cost::estimate`): what the environment costs an hour as
//! last observed, and what the plan would leave running, at its tenant's prices.

use crate::Error;
use crate::kubernetes::mapping;
use runtime_cloud_models::cost::{self, Declared, Estimate, Usage};
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::posture::PlannedResource;
use runtime_cloud_models::targets::ObserverTarget;
use runtime_cloud_models::{PlanReceipt, SpecificationSnapshot};
use sea_orm::DatabaseConnection;

/// The estimate of applying `plan` of `spec` (none declared: a decommission) to the
/// environment, each workload's replica requesting what the plan's `resources` declare (the
/// Kubernetes objects of a Pulumi program) or else what it requests now; none when its tenant
/// has no price table.
pub async fn estimate(
    db: &DatabaseConnection,
    (tenant_id, environment_id): (&str, &str),
    spec: Option<&SpecificationSnapshot>,
    plan: &PlanReceipt,
    resources: &[PlannedResource],
) -> Result<Option<Estimate>, Error> {
    use runtime_cloud_store::{environments, inventory, prices};
    let Some(prices) = prices::get(db, tenant_id).await? else {
        return Ok(None);
    };
    let environment = environments::find(db, tenant_id, environment_id).await?;
    let region = environment
        .as_ref()
        .and_then(|e| e.labels.get("region").cloned());
    let kubernetes_observed =
        environment.is_some_and(|e| matches!(e.target.observer, ObserverTarget::Kubernetes(_)));
    let requested = mapping::workload_requests(&mapping::planned_objects(
        resources.iter().map(|r| &r.after),
    ));
    let before = match inventory::find(db, tenant_id, environment_id).await? {
        Some(i) => Usage {
            workloads: i.workloads.iter().map(ObservedWorkload::usage).collect(),
            resource_types: i.resource_types,
        },
        None => Usage::default(),
    };
    let declared: Vec<Declared<'_>> = spec
        .map(|s| s.workloads.iter())
        .into_iter()
        .flatten()
        .map(|w| Declared {
            name: &w.name,
            replicas: w.replicas,
            requests: requested.get(&w.name).copied(),
        })
        .collect();
    let after = cost::planned(&before, &declared, &plan.changes, kubernetes_observed);
    Ok(Some(cost::estimate(
        &before,
        &after,
        &prices,
        region.as_deref(),
    )))
}
