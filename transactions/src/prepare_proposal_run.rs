//! Prepare an accepted proposal's run: the specification it applies (for `adopt-observed`,
//! declared from what was observed), its approval in production, and its row, in one
//! transaction.

use chrono::Utc;
use runtime_cloud_models::approvals::{ApprovalSource, Grantor};
use runtime_cloud_models::drift::Direction;
use runtime_cloud_models::inventory::ProposalInput;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::validation::Declaration;
use runtime_cloud_models::{ApprovalDecision, ProvisioningKind, RunInput, Workload};
use runtime_cloud_store::runs::{self, NewRun};
use runtime_cloud_store::{
    DatabaseConnection, Error, approvals, begin_write, environments, inventory, specifications,
};

/// Prepares an accepted proposal's reconciliation run `run_id`, in one transaction, and
/// returns its input; idempotent by run id (a retry finds the row and answers the same
/// input). For `adopt-observed`, first declares a specification whose workloads are what was
/// observed, checked by the same rule as every declaration. In production the Operator who
/// accepted it (`grantor`) is the run's approval: recorded with the run, already spent on
/// it, its id the run's `approvalId`. Without a grantor a production run waits for an
/// Operator's decision on the run.
pub async fn prepare_proposal_run(
    db: &DatabaseConnection,
    proposal: &ProposalInput,
    run_id: &str,
    grantor: Option<&Grantor>,
    options: &ProvisioningOptions,
) -> Result<RunInput, Error> {
    let (tenant_id, environment_id) = (&proposal.tenant_id, &proposal.environment_id);
    let txn = begin_write(db).await?;
    let env = environments::find(&txn, tenant_id, environment_id)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "environment",
            id: environment_id.clone(),
        })?;
    let prepared = runs::specification_id(&txn, run_id).await?;
    let spec = match &prepared {
        Some(spec_id) => specifications::find(&txn, spec_id).await?,
        None => {
            let latest = specifications::latest(&txn, tenant_id, environment_id).await?;
            match (proposal.direction, latest) {
                (Direction::AdoptObserved, Some(latest)) => {
                    let observed = inventory::find(&txn, tenant_id, environment_id)
                        .await?
                        .map(|i| i.workloads)
                        .unwrap_or_default();
                    // The latest declaration, but for its workloads: what runs.
                    let adopted = Declaration {
                        tenant_id: tenant_id.clone(),
                        project_id: env.project_id.clone(),
                        environment_id: environment_id.clone(),
                        workloads: observed.iter().map(adopt).collect(),
                        ..latest.declaration
                    };
                    Some(specifications::declare_in(&txn, &adopted).await?)
                }
                (_, latest) => latest,
            }
        }
    };
    let spec = spec.ok_or_else(|| Error::Missing {
        what: "specification of environment",
        id: environment_id.clone(),
    })?;
    let approval_id = match (&prepared, grantor) {
        (Some(_), _) => runs::find(&txn, tenant_id, run_id)
            .await?
            .and_then(|r| r.approval_id),
        (None, Some(grantor)) if env.production() => {
            let approval = approvals::record(
                &txn,
                approvals::NewApproval {
                    tenant_id: tenant_id.clone(),
                    environment_id: environment_id.clone(),
                    class: env.class,
                    decision: ApprovalDecision::Approve,
                    granted_by: grantor.principal.clone(),
                    granted_by_roles: grantor.roles.clone(),
                    reason: grantor.reason.clone(),
                    inputs_hash: None,
                    promotion_id: None,
                    source: ApprovalSource::ProposalDecision,
                    expires_at: Utc::now() + options.approval_validity(),
                    spent_by_run_id: Some(run_id.to_owned()),
                },
            )
            .await?;
            Some(approval.approval_id)
        }
        (None, _) => None,
    };
    let new = NewRun {
        run_id,
        environment: &env,
        specification: &spec,
        kind: ProvisioningKind::Reconciliation,
        promotion_id: None,
        approval_id,
        idempotency_key: None,
        request_hash: None,
        quarantine_override: None,
    };
    if prepared.is_none() {
        runs::insert(&txn, &new, None).await?;
    }
    txn.commit().await?;
    Ok(new.input(options))
}

/// The declared form of an observed workload.
fn adopt(w: &ObservedWorkload) -> Workload {
    Workload {
        name: w.name.clone(),
        kind: w.kind.clone(),
        version: w.version.clone(),
        replicas: w.replicas_desired,
        config_refs: w.config_refs.clone(),
        secret_refs: w.secret_refs.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_store::fixtures;

    #[tokio::test]
    async fn an_adopting_run_declares_what_was_observed_once() {
        let db = fixtures::sqlite().await;
        let proposal = crate::fixtures::adoptable(&db, "cache").await;
        let options = ProvisioningOptions::default();
        let grantor = Grantor {
            principal: "ops-lead".into(),
            roles: vec!["Operator".into()],
            reason: "adopt it".into(),
        };
        let run = prepare_proposal_run(&db, &proposal, "r1", Some(&grantor), &options)
            .await
            .unwrap();
        assert_eq!(run.kind, ProvisioningKind::Reconciliation);
        assert_eq!(
            run.approval_id, None,
            "outside production the run needs no approval"
        );
        assert_eq!(run.specification.version, 2);
        let names: Vec<_> = run
            .specification
            .workloads
            .iter()
            .map(|w| w.name.as_str())
            .collect();
        assert_eq!(names, ["api", "cache"]);
        // A retry prepares the same run and declares nothing more.
        assert_eq!(
            prepare_proposal_run(&db, &proposal, "r1", Some(&grantor), &options)
                .await
                .unwrap(),
            run
        );
        assert_eq!(
            fixtures::events(&db, "SpecificationDeclared").await.len(),
            2
        );
    }

    #[tokio::test]
    async fn an_adopted_declaration_is_validated_like_every_other() {
        let db = fixtures::sqlite().await;
        // A name the declaration rule refuses (not usable in a path).
        let proposal = crate::fixtures::adoptable(&db, "../escape").await;
        let err = prepare_proposal_run(&db, &proposal, "r1", None, &ProvisioningOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        assert_eq!(
            specifications::latest(&db, "acme", "dev")
                .await
                .unwrap()
                .unwrap()
                .version,
            1,
            "nothing declared"
        );
        assert!(!runs::exists(&db, "r1").await.unwrap(), "no run");
    }
}
