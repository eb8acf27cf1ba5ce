//! Business transactions: each one function over one transaction that spans several
//! aggregates' tables, called by the activities and the API alike. `store` holds the entities,
//! the migrations and each table's queries, which import only downward; a step that writes
//! several aggregates at once has its home here, named after what it does.
//!
//! # Layout
//!
//! - [`admit_run`]: a run accepted (its row, its start, the lease it waits with), and the
//!   deferred starts a freed slot admits, one admitter at a time.
//! - [`end_run`]: a run's ending, its semaphores let go and the observation after its apply.
//! - [`record_observation`]: an observation's inventory, the findings it raises or resolves
//!   and the proposal they group into; a sweep's batch of them in one transaction.
//! - [`raise_findings`]: findings raised, resolved and grouped into a proposal (in an
//!   observation's transaction), and the GitOps reconciler's proposal for a re-plan.
//! - [`prepare_proposal_run`]: an accepted proposal's run, with what it applies and its approval.
//! - [`prepare_decommission_run`]: an environment's decommission run (or its retirement, when
//!   nothing was ever declared for it).
//! - [`prepare_offboarding_decommission`]: an off-boarding order's decommission run, recorded
//!   with the order `decommissioning`, only once its archive is verified.
//! - [`set_prices`]: a tenant's prices, and every one of its inventories priced again.
//! - [`take_lease`]: a run's lease on its project's quota and its capacity slot; with the
//!   environment's lock when the run takes its turn.

pub mod admit_run;
pub mod end_run;
pub mod prepare_decommission_run;
pub mod prepare_offboarding_decommission;
pub mod prepare_proposal_run;
pub mod raise_findings;
pub mod record_observation;
pub mod set_prices;
pub mod take_lease;

#[cfg(test)]
mod fixtures;

pub use end_run::{Ended, end_run};
pub use prepare_decommission_run::prepare_decommission_run;
pub use prepare_offboarding_decommission::prepare_offboarding_decommission;
pub use prepare_proposal_run::prepare_proposal_run;
pub use raise_findings::raise_for_replan;
pub use record_observation::{
    batches_at_once, record_observation, record_observation_in, record_observations,
};
pub use set_prices::set_prices;
