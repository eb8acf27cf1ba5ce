//! The read tables of Runtime Cloud: sea-orm entities, migrations, and one module per
//! aggregate with its queries and its writes.
//!
//! Every write is one transaction together with the outbox event it announces, so an event is
//! never published for a change that did not happen, nor lost for one that did. Every read
//! turns a row into typed data: a column that holds an enum is read into that enum, a JSON
//! column into its type, and a stored value that does not read is [`Error::Corrupt`], never a
//! default. This crate depends on `runtime-cloud-models` only (plus the database crates); the
//! activities and the API both read and write through it.
//!
//! A write that spans several aggregates is not here: it is one of `runtime-cloud-transactions`'
//! functions, one transaction each. The per-table steps those take in their transaction are
//! public for them: the reads of many environments at once (`*_of`, `lock_many`,
//! `find_rows`), the writes in the caller's transaction (`*_in`, `insert`, `sync`, [`put`]).
//!
//! # Layout
//!
//! - [`environments`]: a tenant's environments: register, find, list, page through all.
//! - [`specifications`]: declared versions (validated, numbered, announced) and their reads.
//! - [`approvals`]: recorded approvals of production applies, and spending one on a run.
//! - [`runs`]: provisioning runs: create a run (row + `RunInput`), project its status, read.
//! - [`semaphores`]: environments' locks and projects' capacity: who holds, who waits.
//! - [`run_starts`]: runs written whose workflow may not have started yet, for the starter.
//! - [`fleet`]: the fleet as observed: a tenant's instances with their observed state.
//! - [`incidents`]: incidents: opened, listed, resolved.
//! - [`offboarding`]: instances' off-boarding orders: placed, exported, decommissioning, ended.
//! - [`rollouts`]: fleet rollouts: created with their waves, projected by their workflow.
//! - [`inbox`]: inbound events, each handled once by its id (the rows it writes, the run it plans).
//! - [`inventory`]: observed state, and marking stale what was not observed in time.
//! - [`cluster_watches`]: the watched clusters' state, and which environments they vouch for.
//! - [`metrics`]: what `GET /metrics` reports: the counts the database keeps as rows change,
//!   and the same counted from every row.
//! - [`findings`]: drift findings: raised, suppressed and resolved by observations, read.
//! - [`drift_rules`]: expected differences per environment and tenant defaults.
//! - [`windows`]: change windows per environment and tenant defaults.
//! - [`proposals`]: reconciliation proposals: raise, supersede, project, prepare their run.
//! - [`adoptions`]: proposals' unmanaged workloads adopted into their Pulumi program, on a branch.
//! - [`quarantines`]: workload versions refused fleet-wide for a tenant: placed, lifted, read.
//! - [`outbox`]: integration events, appended in the writer's transaction.
//! - [`deferred`]: new rows and events a transaction's writers insert together before it commits.
//! - [`page`]: one page of a newest-first list.
//! - [`statistics`]: the planner's statistics, refreshed by the writers that grow tables fast.
//! - [`scope`]: the conditions that select one environment's rows, or many environments'.
//! - [`connect`]: the read DB's pools: one connection on SQLite, ten on PostgreSQL.
//! - [`error`]: this crate's error type.
//! - [`decode`]: reading a stored value into its type, or `Error::Corrupt` naming where it is.
//! - `fixtures` (for tests, here and in the crates above): throwaway SQLite and PostgreSQL
//!   databases, rows to start from.
//! - [`entities`]: the sea-orm entities, one per table.
//! - [`migration`]: the migrations, one per aggregate (squashed before the first release; from
//!   then on never edited once landed).

pub mod adoptions;
pub mod approvals;
pub mod capacity;
pub mod cluster_watches;
pub mod connect;
pub mod deferred;
pub mod drift_rules;
pub mod entities;
pub mod environments;
pub mod error;
pub mod findings;
pub mod fleet;
pub mod inbox;
pub mod incidents;
pub mod inventory;
pub mod metrics;
pub mod migration;
pub mod offboarding;
pub mod outbox;
pub mod page;
pub mod prices;
pub mod proposals;
pub mod quarantines;
pub mod rollouts;
pub mod run_starts;
pub mod runs;
pub mod semaphores;
pub mod specifications;
pub mod statistics;
pub mod windows;
mod write;

pub mod decode;
#[doc(hidden)]
pub mod fixtures;
pub mod scope;

pub use error::Error;
pub use migration::Migrator;
pub use page::Page;
/// The connection every function here takes; re-exported so callers need no sea-orm import.
pub use sea_orm::DatabaseConnection;
pub use write::{begin_write, put};
