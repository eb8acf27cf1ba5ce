//! Ports: the traits activities call, with an embedded default adapter each.

use crate::Error;
use runtime_cloud_models::approvals::{ApprovalClaim, ClaimOutcome};
use runtime_cloud_models::{ApplyReceipt, PlanReceipt, SpecificationSnapshot, Workload};

/// Where an environment runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tenant_id: String,
    pub environment_id: String,
}

/// Plans and applies a specification on a target (sandbox; later Pulumi).
#[async_trait::async_trait]
pub trait Runner: Send + Sync + 'static {
    /// The workloads the target runs now.
    async fn current(&self, target: &Target) -> Result<Vec<Workload>, Error>;

    /// Diffs the specification against the target. Reads only.
    async fn plan(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
    ) -> Result<PlanReceipt, Error>;

    /// Converges the target to the specification. Applying the same run twice returns the
    /// first receipt and changes nothing; a target that moved since the plan (another inputs
    /// hash) is refused.
    async fn apply(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
    ) -> Result<ApplyReceipt, Error>;
}

/// Reads what an environment actually runs (sandbox; later Kubernetes).
#[async_trait::async_trait]
pub trait Observer: Send + Sync + 'static {
    /// The observed workloads; `Error::Unreachable` when the target cannot be read.
    async fn observe(
        &self,
        target: &Target,
    ) -> Result<Vec<runtime_cloud_models::observation::ObservedWorkload>, Error>;
}

/// Decides whether a proposal may go ahead without an operator (rules from configuration;
/// later PolicyEngineService).
pub trait Policy: Send + Sync + 'static {
    /// Whether a non-destructive proposal outside production may be auto-accepted.
    fn allows_auto_accept(&self, tenant_id: &str, environment_id: &str) -> bool;
}

/// The embedded policy: one switch from configuration
/// (`AutoAcceptNonDestructiveOutsideProduction`).
#[derive(Debug, Clone)]
pub struct ConfiguredPolicy {
    pub auto_accept: bool,
}

impl Policy for ConfiguredPolicy {
    fn allows_auto_accept(&self, _tenant_id: &str, _environment_id: &str) -> bool {
        self.auto_accept
    }
}

/// Verifies a run's claim on an approval and spends the approval on the run
/// ([`runtime_cloud_models::approvals::verify_approval`]). Embedded default:
/// [`RecordedApprovals`]; later RunControlService.
#[async_trait::async_trait]
pub trait Approvals: Send + Sync + 'static {
    /// The approval, spent on the claim's run, or why it does not verify. `Err` only when the
    /// source of approvals cannot answer (retried).
    async fn claim(&self, claim: &ApprovalClaim) -> Result<ClaimOutcome, Error>;
}

/// The embedded Approvals adapter: approvals the product records itself (`approvals` table).
/// An id it has not recorded is asked of `elsewhere` (RunControlService) when one is
/// configured: an Operator's decisions on runs are recorded here either way.
#[derive(Clone)]
pub struct RecordedApprovals {
    pub db: sea_orm::DatabaseConnection,
    pub elsewhere: Option<std::sync::Arc<dyn Approvals>>,
}

#[async_trait::async_trait]
impl Approvals for RecordedApprovals {
    async fn claim(&self, claim: &ApprovalClaim) -> Result<ClaimOutcome, Error> {
        let here = runtime_cloud_store::approvals::claim(&self.db, claim).await?;
        match (&here, &self.elsewhere) {
            (
                ClaimOutcome::Refused {
                    why: runtime_cloud_models::RefusalReason::UnknownApproval,
                },
                Some(elsewhere),
            ) => elsewhere.claim(claim).await,
            _ => Ok(here),
        }
    }
}
