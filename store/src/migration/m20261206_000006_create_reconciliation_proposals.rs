//! The reconciliation proposals aggregate:
//! - `reconciliation_proposals`: reviewable changes grouping an environment's open findings,
//!   with what the policies answered before one would have been accepted on its own (`policy`,
//!   `models::policy::PolicyDecision`, JSON) and whether its workflow is known to have started
//!   (`workflow_started`, `store::proposals::mark_started`; true unless a sweep's page marks it
//!   pending until it started it: a page that fails in between, and keeps failing until the
//!   sweep moves on, leaves proposals whose workflow never started, and the next observation of
//!   the environment answers such a proposal again, so it is started then).
//! - `untold_supersessions`: proposals an observation superseded whose workflow has not been
//!   told yet (`store::proposals::mark_told`).
//! - `program_adoptions`: a proposal's unmanaged workloads adopted into its Pulumi program on a
//!   branch of its own (`store::adoptions`, `models::program_adoption`): one per proposal.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

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
    Policy,
    WorkflowStarted,
}

#[derive(DeriveIden)]
enum ProgramAdoptions {
    Table,
    ProposalId,
    TenantId,
    EnvironmentId,
    Attempt,
    State,
    Resources,
    Branch,
    CommitSha,
    Diff,
    Reason,
    RequestedBy,
    RequestedAt,
    CompletedAt,
}

#[derive(DeriveIden)]
enum UntoldSupersessions {
    Table,
    ProposalId,
    TenantId,
    EnvironmentId,
    SupersededAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
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
                    .col(timestamp_with_time_zone_null(
                        ReconciliationProposals::DecidedAt,
                    ))
                    .col(timestamp_with_time_zone(ReconciliationProposals::CreatedAt))
                    .col(timestamp_with_time_zone(ReconciliationProposals::UpdatedAt))
                    .col(json_null(ReconciliationProposals::Policy))
                    .col(boolean(ReconciliationProposals::WorkflowStarted).default(true))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_proposals_tenant_environment")
                    .table(ReconciliationProposals::Table)
                    .col(ReconciliationProposals::TenantId)
                    .col(ReconciliationProposals::EnvironmentId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(UntoldSupersessions::Table)
                    .col(string(UntoldSupersessions::ProposalId).primary_key())
                    .col(string(UntoldSupersessions::TenantId))
                    .col(string(UntoldSupersessions::EnvironmentId))
                    .col(timestamp_with_time_zone(UntoldSupersessions::SupersededAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ProgramAdoptions::Table)
                    .col(string(ProgramAdoptions::ProposalId).primary_key())
                    .col(string(ProgramAdoptions::TenantId))
                    .col(string(ProgramAdoptions::EnvironmentId))
                    .col(integer(ProgramAdoptions::Attempt))
                    .col(string(ProgramAdoptions::State))
                    .col(json(ProgramAdoptions::Resources))
                    .col(string_null(ProgramAdoptions::Branch))
                    .col(string_null(ProgramAdoptions::CommitSha))
                    .col(text_null(ProgramAdoptions::Diff))
                    .col(text_null(ProgramAdoptions::Reason))
                    .col(string(ProgramAdoptions::RequestedBy))
                    .col(timestamp_with_time_zone(ProgramAdoptions::RequestedAt))
                    .col(timestamp_with_time_zone_null(ProgramAdoptions::CompletedAt))
                    .to_owned(),
            )
            .await?;
        // Every record reads its environments' (a sweep's batch, hundreds at once).
        manager
            .create_index(
                Index::create()
                    .name("untold_supersessions_by_environment")
                    .table(UntoldSupersessions::Table)
                    .col(UntoldSupersessions::TenantId)
                    .col(UntoldSupersessions::EnvironmentId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ProgramAdoptions::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(UntoldSupersessions::Table).to_owned())
            .await?;
        manager
            .drop_table(
                Table::drop()
                    .table(ReconciliationProposals::Table)
                    .to_owned(),
            )
            .await
    }
}
