//! The retry rule the workflows share for writes that must not be lost.
//!
//! Projections, records and the lock request are idempotent writes to the read DB (or a
//! signal-with-start): a read DB outage holds the workflow at that step, retrying at most every
//! 10 s, until the write goes through. Only the timeout differs between steps.

use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_sdk::{ActivityOptions, LocalActivityOptions};

/// Unlimited attempts, backing off to one every 10 s.
fn until_it_succeeds() -> RetryPolicy {
    RetryPolicy::builder()
        .maximum_interval(Duration::from_secs(10))
        .build()
}

/// A regular activity retried until it succeeds, each attempt within `timeout`.
pub(crate) fn must_succeed(timeout: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .retry_policy(until_it_succeeds())
        .build()
}

/// A local activity retried until it succeeds, each attempt within `timeout`.
pub(crate) fn must_succeed_locally(timeout: Duration) -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(timeout)
        .retry_policy(until_it_succeeds())
        .build()
}

/// A local activity retried like [`must_succeed_locally`] but given up after `budget`: for a
/// write that a later step makes anyway (the sweep observes every environment every five
/// minutes), so a long outage must not hold the workflow.
pub(crate) fn retried_locally_for(timeout: Duration, budget: Duration) -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(timeout)
        .schedule_to_close_timeout(budget)
        .retry_policy(until_it_succeeds())
        .build()
}
