//! Tenants share Temporal's task queues fairly: every run carries its tenant as the fairness
//! key of its tasks (inherited by its activities), so a tenant with a thousand runs backlogged
//! gets its share of dispatch, not all of it (Temporal's task queue fairness; the server needs
//! `matching.enableFairness`, which `runtime-cloud dev` and the test scripts set). The
//! project's capacity semaphore bounds how many of those runs work at once.

use temporalio_common::Priority;

/// The priority of a run of `tenant_id`: the server's default priority, the tenant's fair
/// share.
pub fn of_tenant(tenant_id: &str) -> Priority {
    Priority::builder().fairness_key(tenant_id).build()
}
