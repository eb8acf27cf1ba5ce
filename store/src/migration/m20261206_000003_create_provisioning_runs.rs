//! The provisioning runs aggregate:
//! - `provisioning_runs`: the projection of every ProvisioningRun workflow. Besides its
//!   receipts, a run records the approvals it did not count (`refused_approvals`: who sent
//!   each, when, and why it was refused, a JSON list; null before the run's first projection,
//!   which the API shows as an empty list), the change window it waits for
//!   (`waiting_for_window`) and the break-glass it applied with (`break_glass`), what the
//!   policies answered about its plan (`policy`, `models::policy::PolicyDecision`), the
//!   quarantined versions a person's run was let through (`quarantine_override`), what holds
//!   it back (`waiting_for_capacity`) and the whole minutes its apply counts against the
//!   project's `executionMinutesPerDay` (`apply_minutes`), all JSON but the minutes.
//! - `run_starts`: runs the API wrote whose workflow may not have started yet
//!   (`store::run_starts`). A run the API accepted while its project's `concurrentRuns` were
//!   all in flight is written with its start `deferred` (`transactions::admit_run::accept_run`): no
//!   workflow is started for it until a slot frees (`store::run_starts::admissible`), so a
//!   tenant's flood costs the workflow service nothing past its quota.
//! - `approvals`: the approvals of production applies the product records itself (an
//!   Operator's `POST /factory/approvals`, a decision on a waiting run, a promotion's
//!   approval), with the run that spent each.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

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
    RefusedApprovals,
    WaitingForWindow,
    BreakGlass,
    Policy,
    QuarantineOverride,
    WaitingForCapacity,
    ApplyMinutes,
}

#[derive(DeriveIden)]
enum RunStarts {
    Table,
    ProvisioningRunId,
    TenantId,
    Input,
    AcceptedAt,
    ProjectId,
    Deferred,
}

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
                    .col(json_null(ProvisioningRuns::RefusedApprovals))
                    .col(json_null(ProvisioningRuns::WaitingForWindow))
                    .col(json_null(ProvisioningRuns::BreakGlass))
                    .col(json_null(ProvisioningRuns::Policy))
                    .col(json_null(ProvisioningRuns::QuarantineOverride))
                    .col(json_null(ProvisioningRuns::WaitingForCapacity))
                    .col(integer_null(ProvisioningRuns::ApplyMinutes))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_runs_tenant_idempotency_key")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::IdempotencyKey)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // The runs list: a tenant's runs newest first (`ORDER BY provisioning_run_id DESC`, ids
        // are UUIDv7), optionally by state or by environment. A page is an index walk that stops
        // after `limit + 1` rows, however many runs the tenant has. The environment's index
        // ends in the id so that it serves the filter and the order together: with only a
        // (tenant, environment) index, a planner without statistics (SQLite's, before `ANALYZE`)
        // walks the tenant's newest-first index instead and reads every run of the tenant to
        // find one environment's.
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_newest")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::ProvisioningRunId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_state_newest")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::State)
                    .col(ProvisioningRuns::ProvisioningRunId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_environment_newest")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::EnvironmentId)
                    .col(ProvisioningRuns::ProvisioningRunId)
                    .to_owned(),
            )
            .await?;
        // Every run's start sums its project's `apply_minutes` over the runs completed since
        // midnight (the API before it answers 429, the run's lease request before it plans):
        // the index finds those runs and holds their minutes, so no row of the table is read
        // (docs/benchmarks.md: on SQLite, with 30,000 runs of one project completed that day,
        // 1.4 ms a start against 36 ms without the minutes in the index).
        manager
            .create_index(
                Index::create()
                    .name("ix_provisioning_runs_project_minutes")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::ProjectId)
                    .col(ProvisioningRuns::CompletedAt)
                    .col(ProvisioningRuns::ApplyMinutes)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(RunStarts::Table)
                    .col(string(RunStarts::ProvisioningRunId).primary_key())
                    .col(string(RunStarts::TenantId))
                    .col(json(RunStarts::Input))
                    .col(timestamp_with_time_zone(RunStarts::AcceptedAt))
                    .col(string_null(RunStarts::ProjectId))
                    .col(boolean(RunStarts::Deferred).default(false))
                    .to_owned(),
            )
            .await?;
        // The starter reads the oldest first.
        manager
            .create_index(
                Index::create()
                    .name("run_starts_by_accepted_at")
                    .table(RunStarts::Table)
                    .col(RunStarts::AcceptedAt)
                    .to_owned(),
            )
            .await?;
        // A project's deferred starts are admitted oldest first.
        manager
            .create_index(
                Index::create()
                    .name("run_starts_deferred_by_project")
                    .table(RunStarts::Table)
                    .col(RunStarts::Deferred)
                    .col(RunStarts::TenantId)
                    .col(RunStarts::ProjectId)
                    .col(RunStarts::AcceptedAt)
                    .to_owned(),
            )
            .await?;

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
        // Approvals are listed newest first per tenant and environment.
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
            .await?;
        manager
            .drop_table(Table::drop().table(RunStarts::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(ProvisioningRuns::Table).to_owned())
            .await
    }
}
