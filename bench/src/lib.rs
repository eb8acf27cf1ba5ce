//! Benchmarks of Runtime Cloud. Every benchmark measures the product and a baseline in the same
//! run, on the same machine and the same Temporal server, and prints the ratio: a noisy machine
//! slows both, so the ratio still shows a regression.
//!
//! `scripts/bench` builds everything in release mode, starts a Temporal dev server and runs the
//! `rc-bench` binary; `docs/benchmarks.md` explains each number.
//!
//! # Layout
//!
//! Shared helpers:
//! - [`stack`]: the product as separate `migrate`/`worker`/`api` processes on a fresh read DB,
//!   and the environment the benchmarks read (`RC_BENCH_*`).
//! - [`bulk`]: rows by the million written straight into a stack's read DB.
//! - [`api`]: an HTTP client of the API acting as one tenant's operator.
//! - [`stand_ins`]: the tests' stand-ins of outside services (a Kubernetes API server).
//! - [`stats`]: percentiles and rates; [`table`]: the printed tables; [`rss`]: peak memory.
//!
//! The benchmarks:
//! - [`throughput`]: provisioning runs per second and request-to-`Applied` latency.
//! - [`fleet`]: one observation sweep over a fleet, and its Temporal actions per environment.
//! - [`read`]: the read API under fixed request rates ([`loadgen`] is the load generator).
//! - [`idle`]: peak RSS of `runtime-cloud dev` at rest.
//! - [`runner`]: the Pulumi runner's overhead over the CLI commands it runs.
//! - [`rollout`]: a fleet rollout over many instances next to bare provisioning runs.
//! - [`fairness`]: one tenant's runs while another floods the stack, next to the same runs idle.
//! - [`minutes`]: the day's apply minutes a run's start sums, by the index that holds them.
//! - [`watch`]: an out-of-band change on a watched Kubernetes cluster, observed, next to the
//!   sweep alone.
//! - [`comparer`]: benchmark 3, the drift comparer next to a baseline.
//!
//! And their baselines: [`baseline`] (minimal Temporal workflows with no-op activities) and
//! [`actions`] (Temporal actions counted from event histories).

pub mod actions;
pub mod api;
pub mod baseline;
pub mod bulk;
pub mod comparer;
pub mod cpu;
pub mod fairness;
pub mod fleet;
pub mod idle;
pub mod loadgen;
pub mod minutes;
pub mod read;
pub mod rollout;
pub mod rss;
pub mod runner;
pub mod stack;
pub mod stand_ins;
pub mod stats;
pub mod table;
pub mod throughput;
pub mod watch;
