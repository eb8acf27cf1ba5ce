//! Read-table migrations. A landed migration is never edited: add a new one.

use sea_orm_migration::prelude::*;

mod m20261129_000001_create_read_tables;
mod m20261129_000002_create_inventory_tables;
mod m20261129_000003_one_open_finding_per_resource;
mod m20261129_000004_runs_newest_first;
mod m20261201_000005_run_refused_approvals;
mod m20261201_000006_create_approvals;
mod m20261201_000007_typed_targets;
mod m20261201_000008_drift_rules_and_owners;
mod m20261201_000009_environment_modes;
mod m20261201_000010_change_windows;
mod m20261201_000011_run_policy;
mod m20261201_000012_create_inbox;
mod m20261201_000013_proposal_policy;
mod m20261201_000014_create_incidents;
mod m20261201_000015_create_fleet_rollouts;
mod m20261201_000016_environment_labels;
mod m20261201_000017_rollout_checked_at;
mod m20261201_000018_create_capacity;
mod m20261201_000019_capacity_on_runs;
pub(crate) mod m20261202_000020_metric_counts;
mod m20261202_000021_lists_by_environment;
mod m20261202_000022_create_run_starts;
mod m20261203_000023_proposal_workflow_started;
mod m20261203_000024_deferred_run_starts;
mod m20261204_000025_leases_by_state;
mod m20261204_000026_untold_supersessions;
mod m20261204_000027_semaphores;
mod m20261204_000028_leases_by_holder;
mod m20261204_000029_minutes_covered;
mod m20261206_000030_inbox_spend_keys;

/// Runs every migration in order.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261129_000001_create_read_tables::Migration),
            Box::new(m20261129_000002_create_inventory_tables::Migration),
            Box::new(m20261129_000003_one_open_finding_per_resource::Migration),
            Box::new(m20261129_000004_runs_newest_first::Migration),
            Box::new(m20261201_000005_run_refused_approvals::Migration),
            Box::new(m20261201_000006_create_approvals::Migration),
            Box::new(m20261201_000007_typed_targets::Migration),
            Box::new(m20261201_000008_drift_rules_and_owners::Migration),
            Box::new(m20261201_000009_environment_modes::Migration),
            Box::new(m20261201_000010_change_windows::Migration),
            Box::new(m20261201_000011_run_policy::Migration),
            Box::new(m20261201_000012_create_inbox::Migration),
            Box::new(m20261201_000013_proposal_policy::Migration),
            Box::new(m20261201_000014_create_incidents::Migration),
            Box::new(m20261201_000015_create_fleet_rollouts::Migration),
            Box::new(m20261201_000016_environment_labels::Migration),
            Box::new(m20261201_000017_rollout_checked_at::Migration),
            Box::new(m20261201_000018_create_capacity::Migration),
            Box::new(m20261201_000019_capacity_on_runs::Migration),
            Box::new(m20261202_000020_metric_counts::Migration),
            Box::new(m20261202_000021_lists_by_environment::Migration),
            Box::new(m20261202_000022_create_run_starts::Migration),
            Box::new(m20261203_000023_proposal_workflow_started::Migration),
            Box::new(m20261203_000024_deferred_run_starts::Migration),
            Box::new(m20261204_000025_leases_by_state::Migration),
            Box::new(m20261204_000026_untold_supersessions::Migration),
            Box::new(m20261204_000027_semaphores::Migration),
            Box::new(m20261204_000028_leases_by_holder::Migration),
            Box::new(m20261204_000029_minutes_covered::Migration),
            Box::new(m20261206_000030_inbox_spend_keys::Migration),
        ]
    }
}
