//! Who changed it, drift rules, and skipping unchanged observations:
//! - `drift_findings.changed_by` (JSON, the `managedFields` entry that owns the drifted field)
//!   and `drift_findings.suppressed_by` (the id of the rule that suppresses an open finding);
//! - `drift_rules`, an environment's rules and (without an environment) its tenant's defaults;
//! - `runtime_inventories.compared_with`: what the last comparison compared against (the
//!   specification, the active rules and the runner state's drift), so an observation whose
//!   objects did not change (same `resourceVersion`s) and whose comparison inputs did not
//!   change skips the comparison.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DriftFindings {
    Table,
    ChangedBy,
    SuppressedBy,
}

#[derive(DeriveIden)]
enum RuntimeInventories {
    Table,
    ComparedWith,
}

#[derive(DeriveIden)]
enum DriftRules {
    Table,
    RuleId,
    TenantId,
    EnvironmentId,
    Kind,
    Workload,
    Field,
    Manager,
    Owner,
    Reason,
    ExpiresAt,
    CreatedBy,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per ALTER TABLE.
        for column in [
            json_null(DriftFindings::ChangedBy),
            string_null(DriftFindings::SuppressedBy),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(DriftFindings::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(RuntimeInventories::Table)
                    .add_column(string_null(RuntimeInventories::ComparedWith))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DriftRules::Table)
                    .col(string(DriftRules::RuleId).primary_key())
                    .col(string(DriftRules::TenantId))
                    .col(string_null(DriftRules::EnvironmentId))
                    .col(string(DriftRules::Kind))
                    .col(string(DriftRules::Workload))
                    .col(string_null(DriftRules::Field))
                    .col(string_null(DriftRules::Manager))
                    .col(string(DriftRules::Owner))
                    .col(text(DriftRules::Reason))
                    .col(timestamp_with_time_zone_null(DriftRules::ExpiresAt))
                    .col(string(DriftRules::CreatedBy))
                    .col(timestamp_with_time_zone(DriftRules::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_drift_rules_tenant_environment")
                    .table(DriftRules::Table)
                    .col(DriftRules::TenantId)
                    .col(DriftRules::EnvironmentId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(DriftRules::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(RuntimeInventories::Table)
                    .drop_column(RuntimeInventories::ComparedWith)
                    .to_owned(),
            )
            .await?;
        for column in [DriftFindings::SuppressedBy, DriftFindings::ChangedBy] {
            manager
                .alter_table(
                    Table::alter()
                        .table(DriftFindings::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
