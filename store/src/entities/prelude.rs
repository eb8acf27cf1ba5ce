//! The entities under short names.

pub use super::deployment_specifications::Entity as DeploymentSpecifications;
pub use super::drift_findings::Entity as DriftFindings;
pub use super::environments::Entity as Environments;
pub use super::observed_workloads::Entity as ObservedWorkloads;
pub use super::outbox_events::Entity as OutboxEvents;
pub use super::provisioning_runs::Entity as ProvisioningRuns;
pub use super::reconciliation_proposals::Entity as ReconciliationProposals;
pub use super::runtime_inventories::Entity as RuntimeInventories;
