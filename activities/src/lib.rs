//! Activities of Runtime Cloud, the ports they call and the adapters behind them.
//!
//! Activities are the only place workflows reach the outside world. Each is idempotent,
//! keyed by its run id, so a retry after a lost worker changes nothing twice.
//!
//! # Layout
//!
//! - [`ports`]: the Runner port (plan / apply a specification on a target).
//! - [`sandbox`]: the embedded Runner: a simulated target, one JSON document per environment.
//! - [`store`]: read-table writes (specifications, runs) with their outbox events, one
//!   transaction each.
//! - [`provisioning`]: the provisioning activities the ProvisioningRun workflow calls.
//! - [`error`]: this crate's error type.

pub mod error;
pub mod ports;
pub mod provisioning;
pub mod sandbox;
pub mod store;

pub use error::Error;
pub use provisioning::ProvisioningActivitiesImpl;
