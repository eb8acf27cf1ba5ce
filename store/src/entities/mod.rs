//! sea-orm entities of the read tables. Every row carries `tenant_id`; every query filters by it.

pub mod approvals;
pub mod capacity_leases;
pub mod change_windows;
pub mod cluster_watches;
pub mod deployment_specifications;
pub mod drift_findings;
pub mod drift_rules;
pub mod environment_lifetime_limits;
pub mod environments;
pub mod fleet_rollouts;
pub mod inbox_events;
pub mod incidents;
pub mod observed_workloads;
pub mod outbox_events;
pub mod prelude;
pub mod provisioning_runs;
pub mod quarantines;
pub mod quotas;
pub mod reconciliation_proposals;
pub mod run_starts;
pub mod runtime_inventories;
pub mod semaphore_slots;
pub mod semaphores;
pub mod untold_supersessions;
pub mod watched_changes;
pub mod worker_pools;
