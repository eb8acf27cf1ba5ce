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
//! - [`search_attributes`]: the typed search-attribute keys the workflows keep current.

pub mod contracts;
pub mod environment_lock;
pub mod provisioning_run;
pub mod search_attributes;

pub use environment_lock::EnvironmentLock;
pub use provisioning_run::ProvisioningRun;
