//! `approvals`: the approvals of production applies the product records itself (an Operator's
//! `POST /factory/approvals`, a decision on a waiting run, a promotion's approval), with the
//! run that spent each. Approvals are newest first per tenant and environment.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Approvals {
    Table,
    ApprovalId,
    TenantId,
    EnvironmentId,
    Class,
    Decision,
    GrantedBy,
    GrantedByRoles,
    Reason,
    InputsHash,
    PromotionId,
    Source,
    DecidedAt,
    ExpiresAt,
    SpentByRunId,
    SpentAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Approvals::Table)
                    .col(string(Approvals::ApprovalId).primary_key())
                    .col(string(Approvals::TenantId))
                    .col(string(Approvals::EnvironmentId))
                    .col(string(Approvals::Class))
                    .col(string(Approvals::Decision))
                    .col(string(Approvals::GrantedBy))
                    .col(json(Approvals::GrantedByRoles))
                    .col(text(Approvals::Reason))
                    .col(string_null(Approvals::InputsHash))
                    .col(string_null(Approvals::PromotionId))
                    .col(string(Approvals::Source))
                    .col(timestamp_with_time_zone(Approvals::DecidedAt))
                    .col(timestamp_with_time_zone(Approvals::ExpiresAt))
                    .col(string_null(Approvals::SpentByRunId))
                    .col(timestamp_with_time_zone_null(Approvals::SpentAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_approvals_tenant_environment_newest")
                    .table(Approvals::Table)
                    .col(Approvals::TenantId)
                    .col(Approvals::EnvironmentId)
                    .col(Approvals::ApprovalId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Approvals::Table).to_owned())
            .await
    }
}
