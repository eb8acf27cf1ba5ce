//! `deployment_specifications`: every declared version of an environment's desired state.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

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

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
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
                    .col(timestamp_with_time_zone(
                        DeploymentSpecifications::DeclaredAt,
                    ))
                    .col(timestamp_with_time_zone(
                        DeploymentSpecifications::CreatedAt,
                    ))
                    .col(timestamp_with_time_zone(
                        DeploymentSpecifications::UpdatedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        // Two declarations racing for the same version: one wins, the other retries.
        manager
            .create_index(
                Index::create()
                    .name("ux_specifications_tenant_environment_version")
                    .table(DeploymentSpecifications::Table)
                    .col(DeploymentSpecifications::TenantId)
                    .col(DeploymentSpecifications::EnvironmentId)
                    .col(DeploymentSpecifications::Version)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(
                Table::drop()
                    .table(DeploymentSpecifications::Table)
                    .to_owned(),
            )
            .await
    }
}
