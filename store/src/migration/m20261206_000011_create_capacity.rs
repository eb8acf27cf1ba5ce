//! Execution capacity (spec 003):
//! - `worker_pools`: the task queues runs are served on;
//! - `quotas`: what one tenant's project may run;
//! - `capacity_leases`: a run's hold on its project's capacity (`store::capacity`);
//! - `semaphores` and `semaphore_slots`: an environment's lock and a project's capacity, held in
//!   the database (`store::semaphores`), with who holds and who waits.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum WorkerPools {
    Table,
    Id,
    PoolId,
    TenantId,
    Kind,
    SecurityBoundary,
    Region,
    NodeProfile,
    MinSize,
    MaxSize,
    State,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Quotas {
    Table,
    QuotaId,
    TenantId,
    ProjectId,
    ConcurrentRuns,
    ConcurrentSandboxes,
    CpuPerAttempt,
    MemoryGbPerAttempt,
    ExecutionMinutesPerDay,
    Source,
    SetBy,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum CapacityLeases {
    Table,
    LeaseId,
    TenantId,
    ProjectId,
    RunId,
    AttemptId,
    HolderKind,
    HolderId,
    PoolId,
    Cpu,
    MemoryGb,
    State,
    RequestedAt,
    GrantedAt,
    ExpiresAt,
    ReleasedAt,
}

#[derive(DeriveIden)]
enum Semaphores {
    Table,
    Id,
    TenantId,
    Slots,
}

#[derive(DeriveIden)]
enum SemaphoreSlots {
    Table,
    SemaphoreId,
    HolderId,
    Holding,
    Told,
    Arrived,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WorkerPools::Table)
                    .col(string(WorkerPools::Id).primary_key())
                    .col(string(WorkerPools::PoolId))
                    .col(string(WorkerPools::TenantId))
                    .col(string(WorkerPools::Kind))
                    .col(string(WorkerPools::SecurityBoundary))
                    .col(string(WorkerPools::Region))
                    .col(string(WorkerPools::NodeProfile))
                    .col(integer(WorkerPools::MinSize))
                    .col(integer(WorkerPools::MaxSize))
                    .col(string(WorkerPools::State))
                    .col(timestamp_with_time_zone(WorkerPools::CreatedAt))
                    .col(timestamp_with_time_zone(WorkerPools::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        // A pool is a task queue: its id is unique across tenants.
        manager
            .create_index(
                Index::create()
                    .name("ux_worker_pools_pool_id")
                    .table(WorkerPools::Table)
                    .col(WorkerPools::PoolId)
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Quotas::Table)
                    .col(string(Quotas::QuotaId).primary_key())
                    .col(string(Quotas::TenantId))
                    .col(string(Quotas::ProjectId))
                    .col(integer(Quotas::ConcurrentRuns))
                    .col(integer(Quotas::ConcurrentSandboxes))
                    .col(double(Quotas::CpuPerAttempt))
                    .col(double(Quotas::MemoryGbPerAttempt))
                    .col(integer(Quotas::ExecutionMinutesPerDay))
                    .col(string(Quotas::Source))
                    .col(string(Quotas::SetBy))
                    .col(timestamp_with_time_zone(Quotas::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_quotas_tenant_project")
                    .table(Quotas::Table)
                    .col(Quotas::TenantId)
                    .col(Quotas::ProjectId)
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(CapacityLeases::Table)
                    .col(string(CapacityLeases::LeaseId).primary_key())
                    .col(string(CapacityLeases::TenantId))
                    .col(string(CapacityLeases::ProjectId))
                    .col(string(CapacityLeases::RunId))
                    .col(string(CapacityLeases::AttemptId))
                    .col(string(CapacityLeases::HolderKind))
                    .col(string(CapacityLeases::HolderId))
                    .col(string(CapacityLeases::PoolId))
                    .col(double(CapacityLeases::Cpu))
                    .col(double(CapacityLeases::MemoryGb))
                    .col(string(CapacityLeases::State))
                    .col(timestamp_with_time_zone(CapacityLeases::RequestedAt))
                    .col(timestamp_with_time_zone_null(CapacityLeases::GrantedAt))
                    .col(timestamp_with_time_zone_null(CapacityLeases::ExpiresAt))
                    .col(timestamp_with_time_zone_null(CapacityLeases::ReleasedAt))
                    .to_owned(),
            )
            .await?;
        // Leases are listed newest first per tenant.
        manager
            .create_index(
                Index::create()
                    .name("ix_capacity_leases_tenant_newest")
                    .table(CapacityLeases::Table)
                    .col(CapacityLeases::TenantId)
                    .col(CapacityLeases::LeaseId)
                    .to_owned(),
            )
            .await?;
        // Admission counts a project's held leases (`store::run_starts::admissible`).
        manager
            .create_index(
                Index::create()
                    .name("ix_capacity_leases_project_state")
                    .table(CapacityLeases::Table)
                    .col(CapacityLeases::TenantId)
                    .col(CapacityLeases::ProjectId)
                    .col(CapacityLeases::State)
                    .to_owned(),
            )
            .await?;
        // Admission looks up the leases granted to other tenants (a backlog's share of its
        // quota) and the metrics count the held ones per tenant, both among every lease ever
        // written, of which all but a quota's worth per project are released.
        manager
            .create_index(
                Index::create()
                    .name("ix_capacity_leases_state_tenant")
                    .table(CapacityLeases::Table)
                    .col(CapacityLeases::State)
                    .col(CapacityLeases::TenantId)
                    .to_owned(),
            )
            .await?;
        // A run's ending releases its leases, a grant moves the promoted holders' and an expiry
        // takes a vanished holder's, each by `holder_id` (`store::capacity`). Without this index
        // the lookup walked every tenant's held leases (by the state index): on SQLite, among
        // 200,000 leases of which 2,000 held, 2.5 ms a release against 6 µs with it.
        manager
            .create_index(
                Index::create()
                    .name("ix_capacity_leases_holder")
                    .table(CapacityLeases::Table)
                    .col(CapacityLeases::HolderId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Semaphores::Table)
                    .col(string(Semaphores::Id).primary_key())
                    .col(string(Semaphores::TenantId))
                    .col(integer(Semaphores::Slots))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SemaphoreSlots::Table)
                    .col(string(SemaphoreSlots::SemaphoreId))
                    .col(string(SemaphoreSlots::HolderId))
                    .col(boolean(SemaphoreSlots::Holding))
                    .col(boolean(SemaphoreSlots::Told))
                    .col(big_integer(SemaphoreSlots::Arrived))
                    .primary_key(
                        Index::create()
                            .col(SemaphoreSlots::SemaphoreId)
                            .col(SemaphoreSlots::HolderId),
                    )
                    .to_owned(),
            )
            .await?;
        // Every take and release reads its semaphore's rows in arrival order.
        manager
            .create_index(
                Index::create()
                    .name("semaphore_slots_in_arrival_order")
                    .table(SemaphoreSlots::Table)
                    .col(SemaphoreSlots::SemaphoreId)
                    .col(SemaphoreSlots::Arrived)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            SemaphoreSlots::Table.into_iden(),
            Semaphores::Table.into_iden(),
            CapacityLeases::Table.into_iden(),
            Quotas::Table.into_iden(),
            WorkerPools::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
