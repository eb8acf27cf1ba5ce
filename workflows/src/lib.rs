//! Temporal workflows of Runtime Cloud: deterministic orchestration only.
//!
//! Nothing here touches a database, a clock, a random source or the network. Workflows call
//! activities through the contracts in [`contracts`]; the implementations live in the
//! `runtime-cloud-activities` crate and are registered on the worker by `runtime-cloud-temporal`.
//!
//! # Layout
//!
//! - [`contracts`]: activity declarations and their request types.
//! - [`provisioning_run`]: plan → approval when production → apply → receipts.
//! - [`environment_lock`]: one applying run per environment, the others queue.
//! - [`observe_environment`]: observe → inventory → findings → proposal.
//! - [`reconciliation_proposal`]: decide (or auto-accept) → reconciliation run → applied.
//! - [`observation_sweep`]: every five minutes, observe every environment and mark stale ones.
//! - [`gitops_reconciler`]: every four hours, re-plan every environment's specification.
//! - `retries`: the retry rule for writes that must not be lost.
//! - [`ids`]: deterministic time-ordered ids minted in workflows.
//! - [`search_attributes`]: the typed search-attribute keys the workflows keep current.

pub mod contracts;
pub mod environment_lock;
pub mod gitops_reconciler;
pub mod ids;
pub mod observation_sweep;
pub mod observe_environment;
pub mod provisioning_run;
pub mod reconciliation_proposal;
mod retries;
pub mod search_attributes;

pub use environment_lock::EnvironmentLock;
pub use gitops_reconciler::GitOpsReconciler;
pub use observation_sweep::ObservationSweep;
pub use observe_environment::ObserveEnvironment;
pub use provisioning_run::ProvisioningRun;
pub use reconciliation_proposal::ReconciliationProposal;
