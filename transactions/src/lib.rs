//! Business transactions: each one function over one transaction that spans several
//! aggregates' tables, called by the activities and the API alike. `store` holds the entities,
//! the migrations and each table's queries, which import only downward; a step that writes
//! several aggregates at once has its home here, named after what it does.
//!
//! # Layout
//!
//! - [`end_run`]: a run's ending, its semaphores let go and the observation after its apply.
//! - [`prepare_proposal_run`]: an accepted proposal's run, with what it applies and its approval.

pub mod end_run;
pub mod prepare_proposal_run;

pub use end_run::{Ended, end_run};
pub use prepare_proposal_run::prepare_proposal_run;
