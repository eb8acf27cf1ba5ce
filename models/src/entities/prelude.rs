//! The entities under short names.

pub use super::deployment_specifications::Entity as DeploymentSpecifications;
pub use super::environments::Entity as Environments;
pub use super::outbox_events::Entity as OutboxEvents;
pub use super::provisioning_runs::Entity as ProvisioningRuns;
