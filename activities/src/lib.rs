//! Activities of Runtime Cloud, the ports they call and the adapters behind them.
//!
//! Activities are the only place workflows reach the outside world. Each is idempotent,
//! keyed by its run id, so a retry after a lost worker changes nothing twice. Every read and
//! write of the read tables goes through `runtime-cloud-store`.
//!
//! # Layout
//!
//! - [`ports`]: the Runner, Observer, Policy and Approvals ports (and the embedded adapters).
//! - [`capacity`]: capacity leases on the project's quota, and whether a pool is served.
//! - [`fleet`]: the fleet rollout's activities (prepare an instance's run, progress, incidents).
//! - [`kubernetes`]: the Kubernetes adapter of the Observer port.
//! - [`lifetime`]: an environment's lifetime activities (read it, warn of its expiry, record
//!   its decommission run).
//! - [`offboarding`]: an off-boarding order's activities (export the instance's record as a
//!   verified archive, record its decommission, end the order).
//! - [`policy`]: the Policy port's adapters: embedded Rego (`regorus`), or OPA's REST API.
//! - [`program_branches`]: a program change published for review on a new branch (never the
//!   default one) with the target's credential.
//! - [`programs`]: IaC programs at their commit (bare mirrors, per-run exports, the `git` CLI).
//! - [`pulumi`]: the Pulumi adapter of the Runner port (the `pulumi` CLI as a process).
//! - [`references`]: configuration and secret references resolved at apply time (`env://`,
//!   `file://`).
//! - [`run_control`]: the Approvals port's RunControlService adapter (HTTP).
//! - [`sandbox`]: the embedded Runner: a simulated target, one JSON document per environment.
//! - [`inventory`]: the inventory activities (observe, record, proposals).
//! - [`provisioning`]: the provisioning activities the ProvisioningRun workflow calls.
//! - [`scheduled`]: the observation sweep's and GitOps reconciler's activities.
//! - [`semaphores`]: taking and releasing the environments' locks and the projects' capacity
//!   (rows in the database), and signalling the waiters a release grants.
//! - [`slo`]: the SloGuard port and its Prometheus adapter (fleet rollouts' SLO queries).
//! - [`step_log`]: a runner step's log, secrets redacted, kept as the run's artifact.
//! - [`outbox_relay`]: publishes the outbox to NATS JetStream (CloudEvents, dedupe ids).
//! - [`error`]: this crate's error type.

pub mod adoption;
pub mod capacity;
pub mod cost;
pub mod error;
pub mod fleet;
pub mod inventory;
pub mod kubernetes;
pub mod lifetime;
pub mod offboarding;
pub mod outbox_relay;
pub mod plan_posture;
pub mod policy;
pub mod ports;
pub mod program_branches;
pub mod programs;
pub mod provisioning;
pub mod pulumi;
pub mod references;
pub mod run_control;
pub mod sandbox;
pub mod scheduled;
pub mod semaphores;
pub mod slo;
pub mod step_log;

pub use error::Error;
pub use inventory::InventoryActivitiesImpl;
pub use provisioning::ProvisioningActivitiesImpl;
pub use scheduled::ScheduledActivitiesImpl;
