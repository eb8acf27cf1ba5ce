//! The drift aggregate:
//! - `drift_findings`: differences between declared and observed state, with who changed the
//!   field (`changed_by`, JSON: the `managedFields` entry that owns it) and the rule that
//!   suppresses an open finding (`suppressed_by`); and posture findings, with the posture
//!   `rule` they break.
//! - `drift_rules`: differences an operator expects, an environment's and (without an
//!   environment) its tenant's defaults.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum DriftFindings {
    Table,
    FindingId,
    TenantId,
    EnvironmentId,
    Kind,
    Resource,
    Rule,
    Declared,
    Observed,
    DetectedAt,
    ProposalId,
    ResolvedAt,
    CreatedAt,
    UpdatedAt,
    ChangedBy,
    SuppressedBy,
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
    Rule,
    Owner,
    Reason,
    ExpiresAt,
    CreatedBy,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(DriftFindings::Table)
                    .col(string(DriftFindings::FindingId).primary_key())
                    .col(string(DriftFindings::TenantId))
                    .col(string(DriftFindings::EnvironmentId))
                    .col(string(DriftFindings::Kind))
                    .col(string(DriftFindings::Resource))
                    .col(string_null(DriftFindings::Rule))
                    .col(json_null(DriftFindings::Declared))
                    .col(json_null(DriftFindings::Observed))
                    .col(timestamp_with_time_zone(DriftFindings::DetectedAt))
                    .col(string_null(DriftFindings::ProposalId))
                    .col(timestamp_with_time_zone_null(DriftFindings::ResolvedAt))
                    .col(timestamp_with_time_zone(DriftFindings::CreatedAt))
                    .col(timestamp_with_time_zone(DriftFindings::UpdatedAt))
                    .col(json_null(DriftFindings::ChangedBy))
                    .col(string_null(DriftFindings::SuppressedBy))
                    .to_owned(),
            )
            .await?;
        // One environment's findings, newest first (ids are UUIDv7), as one index walk that
        // serves the filter and the order together.
        manager
            .create_index(
                Index::create()
                    .name("ix_findings_tenant_environment_newest")
                    .table(DriftFindings::Table)
                    .col(DriftFindings::TenantId)
                    .col(DriftFindings::EnvironmentId)
                    .col(DriftFindings::FindingId)
                    .to_owned(),
            )
            .await?;
        // At most one open finding per (environment, kind, resource, posture rule). Two observations of one
        // environment at once (a sweep and an after-apply observation) are serialized by the
        // inventory row each one updates before it syncs findings (on PostgreSQL the second
        // waits for the first and then reads what it committed); this index makes the invariant
        // hold whatever the statement order: a second insert fails, the activity retries, and
        // the retry sees the finding the first one raised. A drift finding has no rule, and
        // NULLs are distinct in a unique index: hence the COALESCE. The same statement on SQLite
        // and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX ux_findings_open_resource \
                 ON drift_findings (tenant_id, environment_id, kind, resource, COALESCE(rule, '')) \
                 WHERE resolved_at IS NULL",
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
                    .col(string_null(DriftRules::Rule))
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
            .drop_table(Table::drop().table(DriftFindings::Table).to_owned())
            .await
    }
}
