//! Temporal workflows of Runtime Cloud: deterministic orchestration only.
//!
//! Nothing here touches a database, a clock, a random source or the network. Workflows call
//! activities through the contracts in [`contracts`]; the implementations live in the
//! `runtime-cloud-activities` crate and are registered on the worker by `runtime-cloud-temporal`.
//!
//! No Temporal patches before the first release: until then a workflow's code is changed in
//! place and its replay fixtures recorded again (docs/architecture.md, "Changing workflows").
//!
//! # Layout
//!
//! - [`provisioning_run`]: plan → approval when production → apply → receipts, stage by stage.
//! - [`semaphore`]: the caller's side of a durable counting semaphore held in the database:
//!   an environment's lock (one applying run at a time) and a project's capacity (its quota's
//!   concurrent runs).
//! - [`observe_environment`]: observe → inventory → findings → proposal.
//! - [`reconciliation_proposal`]: decide (or auto-accept) → reconciliation run → applied.
//! - [`observation_sweep`]: every five minutes, observe every environment and mark stale ones.
//! - [`cluster_watch`]: one worker at a time watches a Kubernetes cluster; a change to an
//!   environment's objects observes it within seconds.
//! - [`environment_lifetime`]: an ephemeral environment warned, then decommissioned at its
//!   expiry; any environment decommissioned when an operator asks.
//! - [`fleet_rollout`]: a release across many instances, wave by wave, halting on its own.
//! - [`offboarding_order`]: an instance leaving operation: its record exported and verified,
//!   then decommissioned.
//! - [`program_adoption`]: a proposal's unmanaged workloads adopted into its Pulumi program on a
//!   branch of its own.
//! - [`gitops_reconciler`]: every four hours, re-plan every environment's specification.
//! - [`fairness`]: every run's tasks carry its tenant as Temporal's fairness key.
//! - [`contracts`]: activity declarations and their request types.
//! - [`messages`]: signals and child starts one workflow sends another, declared by name.
//! - `handover`: tell replaced proposals, start new ones (four workflows share it).
//! - `options`: activity options, named by what they mean.
//! - [`ids`]: every workflow id, and deterministic time-ordered ids minted in workflows.
//! - [`search_attributes`]: the typed search-attribute keys the workflows keep current.

pub mod cluster_watch;
pub mod contracts;
pub mod environment_lifetime;
pub mod fairness;
pub mod fleet_rollout;
pub mod gitops_reconciler;
mod handover;
pub mod ids;
pub mod messages;
pub mod observation_sweep;
pub mod observe_environment;
pub mod offboarding_order;
mod options;
pub mod program_adoption;
pub mod provisioning_run;
pub mod reconciliation_proposal;
pub mod search_attributes;
pub mod semaphore;

pub use cluster_watch::ClusterWatch;
pub use environment_lifetime::EnvironmentLifetime;
pub use fleet_rollout::FleetRollout;
pub use gitops_reconciler::GitOpsReconciler;
pub use observation_sweep::ObservationSweep;
pub use observe_environment::ObserveEnvironment;
pub use offboarding_order::OffboardingOrder;
pub use program_adoption::ProgramAdoption;
pub use provisioning_run::ProvisioningRun;
pub use reconciliation_proposal::ReconciliationProposal;
