//! The inventory read tables: observed state, drift findings and reconciliation proposals.

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
enum DriftFindings {
    Table,
    FindingId,
    TenantId,
    EnvironmentId,
    Kind,
    Resource,
    Declared,
    Observed,
    DetectedAt,
    ProposalId,
    ResolvedAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ReconciliationProposals {
    Table,
    ProposalId,
    TenantId,
    EnvironmentId,
    FindingIds,
    Direction,
    PlanSummary,
    Destructive,
    State,
    DecidedBy,
    DecisionReason,
    ProvisioningRunId,
    RaisedAt,
    DecidedAt,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(RuntimeInventories::Table)
                .col(string(RuntimeInventories::Id).primary_key())
                .col(string(RuntimeInventories::TenantId))
                .col(string(RuntimeInventories::EnvironmentId))
                .col(string(RuntimeInventories::ProjectId))
                .col(json(RuntimeInventories::Workloads))
                .col(string_null(RuntimeInventories::CurrentReleaseId))
                .col(integer_null(RuntimeInventories::SpecificationVersion))
                .col(timestamp_with_time_zone_null(RuntimeInventories::ObservedAt))
                .col(boolean(RuntimeInventories::Stale))
                .col(text_null(RuntimeInventories::LastError))
                .col(timestamp_with_time_zone(RuntimeInventories::CreatedAt))
                .col(timestamp_with_time_zone(RuntimeInventories::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_inventories_tenant_environment")
                .table(RuntimeInventories::Table)
                .col(RuntimeInventories::TenantId)
                .col(RuntimeInventories::EnvironmentId)
                .unique()
                .to_owned(),
        )
        .await?;

        m.create_table(
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
        m.create_index(
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

        m.create_table(
            Table::create()
                .table(DriftFindings::Table)
                .col(string(DriftFindings::FindingId).primary_key())
                .col(string(DriftFindings::TenantId))
                .col(string(DriftFindings::EnvironmentId))
                .col(string(DriftFindings::Kind))
                .col(string(DriftFindings::Resource))
                .col(json_null(DriftFindings::Declared))
                .col(json_null(DriftFindings::Observed))
                .col(timestamp_with_time_zone(DriftFindings::DetectedAt))
                .col(string_null(DriftFindings::ProposalId))
                .col(timestamp_with_time_zone_null(DriftFindings::ResolvedAt))
                .col(timestamp_with_time_zone(DriftFindings::CreatedAt))
                .col(timestamp_with_time_zone(DriftFindings::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_findings_tenant_environment")
                .table(DriftFindings::Table)
                .col(DriftFindings::TenantId)
                .col(DriftFindings::EnvironmentId)
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(ReconciliationProposals::Table)
                .col(string(ReconciliationProposals::ProposalId).primary_key())
                .col(string(ReconciliationProposals::TenantId))
                .col(string(ReconciliationProposals::EnvironmentId))
                .col(json(ReconciliationProposals::FindingIds))
                .col(string(ReconciliationProposals::Direction))
                .col(json(ReconciliationProposals::PlanSummary))
                .col(boolean(ReconciliationProposals::Destructive))
                .col(string(ReconciliationProposals::State))
                .col(string_null(ReconciliationProposals::DecidedBy))
                .col(text_null(ReconciliationProposals::DecisionReason))
                .col(string_null(ReconciliationProposals::ProvisioningRunId))
                .col(timestamp_with_time_zone(ReconciliationProposals::RaisedAt))
                .col(timestamp_with_time_zone_null(ReconciliationProposals::DecidedAt))
                .col(timestamp_with_time_zone(ReconciliationProposals::CreatedAt))
                .col(timestamp_with_time_zone(ReconciliationProposals::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_proposals_tenant_environment")
                .table(ReconciliationProposals::Table)
                .col(ReconciliationProposals::TenantId)
                .col(ReconciliationProposals::EnvironmentId)
                .to_owned(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(ReconciliationProposals::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(DriftFindings::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(ObservedWorkloads::Table).to_owned()).await?;
        m.drop_table(Table::drop().table(RuntimeInventories::Table).to_owned()).await?;
        Ok(())
    }
}
