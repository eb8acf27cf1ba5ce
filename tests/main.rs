//! End-to-end tests: a real Temporal dev server, the real `runtime-cloud` worker and API
//! processes, real SQLite and PostgreSQL, driven over HTTP as an operator would.
//! Run them with `./scripts/test`.

mod common;

mod adoption;
mod approvals;
mod bad_input;
mod capacity;
mod cli;
mod compose;
mod console;
mod costs;
mod dev;
mod drift;
mod events;
mod faults;
mod fleet;
mod fuzz;
mod grpc;
mod health;
mod inbound;
mod kubernetes;
mod kubernetes_deploy;
mod kubernetes_watch;
mod lifetimes;
mod metrics;
mod nats_security;
mod offboarding;
mod oidc;
mod openapi;
mod pagination;
mod payload_encryption;
mod policy;
mod postgres_tls;
mod posture;
mod provisioning;
mod pulumi;
mod quarantines;
mod replay;
mod rollouts;
mod schedules;
mod security;
mod soak;
mod targets;
mod temporal_tls;
mod traces;
mod windows;
