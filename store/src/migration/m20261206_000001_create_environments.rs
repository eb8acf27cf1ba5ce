//! The environments aggregate:
//! - `environments`: a tenant's deployment targets and their class. `target` holds a typed
//!   target as JSON (`models::targets::Target`); `mode` is how far the product goes on its own
//!   when the environment drifts (`observe`, `propose`, `auto`; null: the class's default,
//!   `auto` outside production, `propose` in production); `labels` a JSON object of strings
//!   (what fleet rollouts select by); `customer_tenant_id` the customer tenant inside the
//!   product, where given; `pool_id` the worker pool that serves it (none for the default task
//!   queue); `state` where it is in its life (`active`, `retired`: decommissioned) and
//!   `expires_at` when an ephemeral one is decommissioned (null: it is not ephemeral), with
//!   `warned_for` the expiry its `EnvironmentExpiring` was sent for.
//! - `environment_lifetime_limits`: a tenant's longest time to live, from now, for its
//!   ephemeral environments (none: the default).
//! - `change_windows`: when the product may change an environment (an environment's, and
//!   without an environment its tenant's defaults).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Environments {
    Table,
    Id,
    TenantId,
    EnvironmentId,
    ProjectId,
    Class,
    Target,
    CreatedAt,
    UpdatedAt,
    Mode,
    Labels,
    CustomerTenantId,
    PoolId,
    State,
    ExpiresAt,
    WarnedFor,
    RetiredAt,
}

#[derive(DeriveIden)]
enum EnvironmentLifetimeLimits {
    Table,
    TenantId,
    MaxTtlSeconds,
    SetBy,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ChangeWindows {
    Table,
    WindowId,
    TenantId,
    EnvironmentId,
    Kind,
    Schedule,
    Duration,
    TimeZone,
    Reason,
    CreatedBy,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Environments::Table)
                    .col(string(Environments::Id).primary_key())
                    .col(string(Environments::TenantId))
                    .col(string(Environments::EnvironmentId))
                    .col(string(Environments::ProjectId))
                    .col(string(Environments::Class))
                    .col(string(Environments::Target))
                    .col(timestamp_with_time_zone(Environments::CreatedAt))
                    .col(timestamp_with_time_zone(Environments::UpdatedAt))
                    .col(string_null(Environments::Mode))
                    .col(text_null(Environments::Labels))
                    .col(string_null(Environments::CustomerTenantId))
                    .col(string_null(Environments::PoolId))
                    .col(string(Environments::State).default("active"))
                    .col(timestamp_with_time_zone_null(Environments::ExpiresAt))
                    .col(timestamp_with_time_zone_null(Environments::WarnedFor))
                    .col(timestamp_with_time_zone_null(Environments::RetiredAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(EnvironmentLifetimeLimits::Table)
                    .col(string(EnvironmentLifetimeLimits::TenantId).primary_key())
                    .col(big_integer(EnvironmentLifetimeLimits::MaxTtlSeconds))
                    .col(string(EnvironmentLifetimeLimits::SetBy))
                    .col(timestamp_with_time_zone(
                        EnvironmentLifetimeLimits::UpdatedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_environments_tenant_environment")
                    .table(Environments::Table)
                    .col(Environments::TenantId)
                    .col(Environments::EnvironmentId)
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ChangeWindows::Table)
                    .col(string(ChangeWindows::WindowId).primary_key())
                    .col(string(ChangeWindows::TenantId))
                    .col(string_null(ChangeWindows::EnvironmentId))
                    .col(string(ChangeWindows::Kind))
                    .col(string(ChangeWindows::Schedule))
                    .col(string(ChangeWindows::Duration))
                    .col(string(ChangeWindows::TimeZone))
                    .col(text(ChangeWindows::Reason))
                    .col(string(ChangeWindows::CreatedBy))
                    .col(timestamp_with_time_zone(ChangeWindows::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_change_windows_tenant_environment")
                    .table(ChangeWindows::Table)
                    .col(ChangeWindows::TenantId)
                    .col(ChangeWindows::EnvironmentId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ChangeWindows::Table).to_owned())
            .await?;
        manager
            .drop_table(
                Table::drop()
                    .table(EnvironmentLifetimeLimits::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(Environments::Table).to_owned())
            .await
    }
}
