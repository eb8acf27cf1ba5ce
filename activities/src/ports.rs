//! Ports: the traits activities call, with an embedded default adapter each.

use crate::Error;
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
