//! Domain types of Runtime Cloud: pure data and pure rules, no I/O.
//!
//! Everything a workflow carries in its payloads, everything an activity projects into a read
//! table and every business rule that needs no I/O lives here, so it can be unit-tested on its
//! own and shared by the workflow, store, activity and API crates. No database crate: the read
//! tables live in `runtime-cloud-store`.
//!
//! # Layout
//!
//! - [`specification`]: what should run: desired workloads and the snapshot a run carries.
//! - [`provisioning`]: a run's states and legal moves, approvals, receipts.
//! - [`adoption`]: what would manage an unmanaged workload, generated from what was observed.
//! - [`approvals`]: recorded approvals and the rule that verifies a run's claim on one.
//! - [`artifacts`]: the keys of run artifacts (plan and apply logs, Pulumi plan files).
//! - [`targets`]: where an environment runs: its runner (sandbox, Pulumi) and observer.
//! - [`wire`]: enums whose wire form is fixed (`wire_enum!`).
//! - [`plan`]: the plan diff (declared workloads against a target) and its inputs hash.
//! - [`policy`]: what a policy is asked about a plan and what it answers.
//! - [`observation`]: observed workloads and what changed between observations.
//! - [`drift`]: the DriftComparer, drift kinds and proposal grouping.
//! - [`drift_rules`]: expected differences, recorded as suppressed findings.
//! - [`events`]: integration event topics and payloads.
//! - [`fleet`]: the fleet as observed (instance health, the summary), incidents.
//! - [`inbound`]: the events other services send (payloads, subjects, JSON Schemas).
//! - [`inventory`]: what recording an observation takes and gives; a proposal's payloads.
//! - [`lifetime`]: an environment's state and expiry: ephemeral environments, retirement.
//! - [`offboarding`]: an instance's off-boarding order: its states, its archive's manifest.
//! - [`environments`]: an environment's key and a page of them (the scheduled walks).
//! - [`rollouts`]: fleet rollouts: waves, convergence as observed, guards.
//! - [`quarantine`]: workload versions refused fleet-wide for a tenant, and the gate they make.
//! - [`rules`]: auto-accept of proposals and auto-apply of the GitOps reconciler.
//! - [`validation`]: what a valid specification declaration is.
//! - [`windows`]: change windows and the gate they make.
//! - [`options`]: the configuration options the spec names (`ApplyTimeoutMinutes` …).
//! - [`pacing`]: how fast one tenant's run submissions are taken (a token bucket).

pub mod adoption;
pub mod approvals;
pub mod artifacts;
pub mod capacity;
pub mod cost;
pub mod drift;
pub mod drift_rules;
pub mod environments;
pub mod events;
pub mod fleet;
pub mod inbound;
pub mod inventory;
pub mod lifetime;
pub mod observation;
pub mod offboarding;
pub mod options;
pub mod pacing;
pub mod plan;
pub mod policy;
pub mod posture;
pub mod program_adoption;
pub mod provisioning;
pub mod quarantine;
pub mod rollouts;
pub mod rules;
pub mod specification;
pub mod targets;
pub mod validation;
pub mod windows;
pub mod wire;

pub use plan::{PlanChanges, WorkloadChange};
pub use provisioning::*;
pub use specification::*;
pub use wire::UnknownVariant;
