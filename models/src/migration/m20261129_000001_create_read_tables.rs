//! The provisioning read tables: environments, specifications, runs and the outbox.

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
}

#[derive(DeriveIden)]
enum DeploymentSpecifications {
    Table,
    SpecificationId,
    TenantId,
    ProjectId,
    EnvironmentId,
    Kind,
    ProgramRef,
    ProgramVersion,
    ReleaseId,
    Strategy,
    ConfigRefs,
    SecretRefs,
    Workloads,
    Version,
    DeclaredAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    ProvisioningRunId,
    TenantId,
    ProjectId,
    EnvironmentId,
    SpecificationId,
    SpecificationVersion,
    Kind,
    PromotionId,
    ApprovalId,
    PlanReceipt,
    Approval,
    ApplyReceipt,
    State,
    Reason,
    LogsRef,
    IdempotencyKey,
    RequestHash,
    StartedAt,
    CompletedAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum OutboxEvents {
    Table,
    Seq,
    EventId,
    TenantId,
    EventType,
    Topic,
    AggregateId,
    Payload,
    OccurredAt,
    PublishedAt,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
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
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_environments_tenant_environment")
                .table(Environments::Table)
                .col(Environments::TenantId)
                .col(Environments::EnvironmentId)
                .unique()
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(DeploymentSpecifications::Table)
                .col(string(DeploymentSpecifications::SpecificationId).primary_key())
                .col(string(DeploymentSpecifications::TenantId))
                .col(string(DeploymentSpecifications::ProjectId))
                .col(string(DeploymentSpecifications::EnvironmentId))
                .col(string(DeploymentSpecifications::Kind))
                .col(string(DeploymentSpecifications::ProgramRef))
                .col(string(DeploymentSpecifications::ProgramVersion))
                .col(string_null(DeploymentSpecifications::ReleaseId))
                .col(string_null(DeploymentSpecifications::Strategy))
                .col(json(DeploymentSpecifications::ConfigRefs))
                .col(json(DeploymentSpecifications::SecretRefs))
                .col(json(DeploymentSpecifications::Workloads))
                .col(integer(DeploymentSpecifications::Version))
                .col(timestamp_with_time_zone(DeploymentSpecifications::DeclaredAt))
                .col(timestamp_with_time_zone(DeploymentSpecifications::CreatedAt))
                .col(timestamp_with_time_zone(DeploymentSpecifications::UpdatedAt))
                .to_owned(),
        )
        .await?;
        // Two declarations racing for the same version: one wins, the other retries.
        m.create_index(
            Index::create()
                .name("ux_specifications_tenant_environment_version")
                .table(DeploymentSpecifications::Table)
                .col(DeploymentSpecifications::TenantId)
                .col(DeploymentSpecifications::EnvironmentId)
                .col(DeploymentSpecifications::Version)
                .unique()
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(ProvisioningRuns::Table)
                .col(string(ProvisioningRuns::ProvisioningRunId).primary_key())
                .col(string(ProvisioningRuns::TenantId))
                .col(string(ProvisioningRuns::ProjectId))
                .col(string(ProvisioningRuns::EnvironmentId))
                .col(string(ProvisioningRuns::SpecificationId))
                .col(integer(ProvisioningRuns::SpecificationVersion))
                .col(string(ProvisioningRuns::Kind))
                .col(string_null(ProvisioningRuns::PromotionId))
                .col(string_null(ProvisioningRuns::ApprovalId))
                .col(json_null(ProvisioningRuns::PlanReceipt))
                .col(json_null(ProvisioningRuns::Approval))
                .col(json_null(ProvisioningRuns::ApplyReceipt))
                .col(string_null(ProvisioningRuns::State))
                .col(text_null(ProvisioningRuns::Reason))
                .col(string_null(ProvisioningRuns::LogsRef))
                .col(string_null(ProvisioningRuns::IdempotencyKey))
                .col(string_null(ProvisioningRuns::RequestHash))
                .col(timestamp_with_time_zone(ProvisioningRuns::StartedAt))
                .col(timestamp_with_time_zone_null(ProvisioningRuns::CompletedAt))
                .col(timestamp_with_time_zone(ProvisioningRuns::CreatedAt))
                .col(timestamp_with_time_zone(ProvisioningRuns::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_runs_tenant_idempotency_key")
                .table(ProvisioningRuns::Table)
                .col(ProvisioningRuns::TenantId)
                .col(ProvisioningRuns::IdempotencyKey)
                .unique()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_runs_tenant_environment")
                .table(ProvisioningRuns::Table)
                .col(ProvisioningRuns::TenantId)
                .col(ProvisioningRuns::EnvironmentId)
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(OutboxEvents::Table)
                .col(big_integer(OutboxEvents::Seq).primary_key().auto_increment())
                .col(string_uniq(OutboxEvents::EventId))
                .col(string(OutboxEvents::TenantId))
                .col(string(OutboxEvents::EventType))
                .col(string(OutboxEvents::Topic))
                .col(string(OutboxEvents::AggregateId))
                .col(json(OutboxEvents::Payload))
                .col(timestamp_with_time_zone(OutboxEvents::OccurredAt))
                .col(timestamp_with_time_zone_null(OutboxEvents::PublishedAt))
                .col(timestamp_with_time_zone(OutboxEvents::CreatedAt))
                .col(timestamp_with_time_zone(OutboxEvents::UpdatedAt))
                .to_owned(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(OutboxEvents::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(ProvisioningRuns::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(DeploymentSpecifications::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(Environments::Table).to_owned()).await?;
        Ok(())
    }
}
