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

/// A lower priority than the server's default (3 of 1–5): a run its project's backlog
/// deferred at the API.
const BACKLOG_PRIORITY: u32 = 4;

/// The priority of a run of `tenant_id`. A run the API deferred (its project had more runs
/// submitted than its quota runs at once) is backlog: its tasks go after those of runs that
/// started at once whenever the queues are backlogged, so a tenant working through a
/// thousand runs yields to another tenant's few instead of sharing the machine evenly with
/// them. Its activities inherit the priority.
pub fn of_run(tenant_id: &str, deferred: bool) -> Priority {
    if deferred {
        Priority::builder()
            .fairness_key(tenant_id)
            .priority_key(BACKLOG_PRIORITY)
            .build()
    } else {
        of_tenant(tenant_id)
    }
}
