//! The inventory aggregate: the observed state of each environment.
//! - `runtime_inventories`: one row per environment, with what its last comparison compared
//!   against (`compared_with`: the specification, the active drift rules and the runner
//!   state's drift), so an observation whose objects did not change (same
//!   `resourceVersion`s) and whose comparison inputs did not change skips the comparison.
//! - `observed_workloads`: one row per workload of the latest observation of an environment.
//! - `cluster_watches`: one row per watched Kubernetes cluster: since when its watches have
//!   followed every change (`synced_since`, none while one fails) and its holder's last beat.
//!   The watches' own state, of no tenant.
//! - `watched_changes`: per environment observed on a watched cluster, when its namespace last
//!   changed. With `cluster_watches`, what lets the sweep skip reading an environment that did
//!   not change since it was last observed.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RuntimeInventories {
    Table,
    Id,
    TenantId,
    EnvironmentId,
    ProjectId,
    Workloads,
    CurrentReleaseId,
    SpecificationVersion,
    ObservedAt,
    Stale,
    LastError,
    CreatedAt,
    UpdatedAt,
    ComparedWith,
    Posture,
    ResourceTypes,
    Cost,
    HourlyCost,
}

#[derive(DeriveIden)]
enum ObservedWorkloads {
    Table,
    Id,
    TenantId,
    EnvironmentId,
    Name,
    Kind,
    Version,
    ReplicasReady,
    ReplicasDesired,
    Endpoints,
    ConfigRefs,
    SecretRefs,
    Health,
    ObservedAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ClusterWatches {
    Table,
    ClusterId,
    SyncedSince,
    BeatAt,
}

#[derive(DeriveIden)]
enum WatchedChanges {
    Table,
    Id,
    TenantId,
    EnvironmentId,
    ClusterId,
    ChangedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(RuntimeInventories::Table)
                    .col(string(RuntimeInventories::Id).primary_key())
                    .col(string(RuntimeInventories::TenantId))
                    .col(string(RuntimeInventories::EnvironmentId))
                    .col(string(RuntimeInventories::ProjectId))
                    .col(json(RuntimeInventories::Workloads))
                    .col(string_null(RuntimeInventories::CurrentReleaseId))
                    .col(integer_null(RuntimeInventories::SpecificationVersion))
                    .col(timestamp_with_time_zone_null(
                        RuntimeInventories::ObservedAt,
                    ))
                    .col(boolean(RuntimeInventories::Stale))
                    .col(text_null(RuntimeInventories::LastError))
                    .col(timestamp_with_time_zone(RuntimeInventories::CreatedAt))
                    .col(timestamp_with_time_zone(RuntimeInventories::UpdatedAt))
                    .col(string_null(RuntimeInventories::ComparedWith))
                    // Empty for inventories written without posture (a bulk fixture).
                    .col(json(RuntimeInventories::Posture).default(Expr::cust("'[]'")))
                    .col(json(RuntimeInventories::ResourceTypes).default(Expr::cust("'{}'")))
                    .col(json_null(RuntimeInventories::Cost))
                    .col(double_null(RuntimeInventories::HourlyCost))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_inventories_tenant_environment")
                    .table(RuntimeInventories::Table)
                    .col(RuntimeInventories::TenantId)
                    .col(RuntimeInventories::EnvironmentId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // The metrics scrape's stale gauge (`store::metrics`): the environments observed longer
        // ago than the staleness window are one index range. The same statement on SQLite and
        // PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX ix_inventories_stale_observed \
                 ON runtime_inventories (stale, observed_at)",
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ObservedWorkloads::Table)
                    .col(string(ObservedWorkloads::Id).primary_key())
                    .col(string(ObservedWorkloads::TenantId))
                    .col(string(ObservedWorkloads::EnvironmentId))
                    .col(string(ObservedWorkloads::Name))
                    .col(string(ObservedWorkloads::Kind))
                    .col(string(ObservedWorkloads::Version))
                    .col(integer(ObservedWorkloads::ReplicasReady))
                    .col(integer(ObservedWorkloads::ReplicasDesired))
                    .col(json(ObservedWorkloads::Endpoints))
                    .col(json(ObservedWorkloads::ConfigRefs))
                    .col(json(ObservedWorkloads::SecretRefs))
                    .col(string(ObservedWorkloads::Health))
                    .col(timestamp_with_time_zone(ObservedWorkloads::ObservedAt))
                    .col(timestamp_with_time_zone(ObservedWorkloads::CreatedAt))
                    .col(timestamp_with_time_zone(ObservedWorkloads::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_observed_workloads_tenant_environment_name")
                    .table(ObservedWorkloads::Table)
                    .col(ObservedWorkloads::TenantId)
                    .col(ObservedWorkloads::EnvironmentId)
                    .col(ObservedWorkloads::Name)
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ClusterWatches::Table)
                    .col(string(ClusterWatches::ClusterId).primary_key())
                    .col(timestamp_with_time_zone_null(ClusterWatches::SyncedSince))
                    .col(timestamp_with_time_zone(ClusterWatches::BeatAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WatchedChanges::Table)
                    .col(string(WatchedChanges::Id).primary_key())
                    .col(string(WatchedChanges::TenantId))
                    .col(string(WatchedChanges::EnvironmentId))
                    .col(string(WatchedChanges::ClusterId))
                    .col(timestamp_with_time_zone(WatchedChanges::ChangedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(WatchedChanges::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(ClusterWatches::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(ObservedWorkloads::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(RuntimeInventories::Table).to_owned())
            .await
    }
}
