//! sea-orm entities of the read tables. Every row carries `tenant_id`; every query filters by it.

pub mod deployment_specifications;
pub mod environments;
pub mod outbox_events;
pub mod prelude;
pub mod provisioning_runs;
