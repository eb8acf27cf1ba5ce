//! Runtime Cloud: a control plane that provisions and reconciles infrastructure for many
//! tenants through durable Temporal workflows.
//!
//! This crate is the `runtime-cloud` binary's library: it parses configuration and wires the
//! workspace crates into processes. `main.rs` only parses arguments and calls in here.
//!
//! # Layout
//!
//! - [`config`]: the table of every setting, applied over the TOML file and the environment.
//! - [`artifacts`]: the artifact store (`object_store`: the data dir, or an S3-compatible bucket).
//! - [`app`]: the processes (`dev`, `worker`, `api`, `migrate`), each with injected shutdown.
//! - [`worker`]: the workers: every workflow and activity on one task queue, or a pool's.
//! - [`cli`]: the operator CLI (`runs`, `envs`, `proposals`, `specs`, `rollouts`, `fleet`,
//!   `login`), a client of the API.
//! - [`sandbox_cli`]: out-of-band edits of the sandbox target.
//! - [`inbound_cli`]: signs an inbound event's approval as its source would.

pub mod app;
pub mod artifacts;
pub mod cli;
pub mod config;
pub mod inbound_cli;
pub mod sandbox_cli;
pub mod telemetry;
pub mod worker;
