//! Activity options, named by what they mean. Every workflow takes its options from here, so
//! two steps that mean the same retry the same way.
//!
//! Writes to the read DB (projections, records, the lock's start and release) are idempotent:
//! a read DB outage holds the workflow at that step, retrying at most every 10 s, until the
//! write goes through. Reads of a target and re-plans get a few tries and then count as failed.
//! The runner's plan and apply have their own rules.

use crate::contracts::{APPLY_FAILED, PLAN_INVALID};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_sdk::{ActivityOptions, LocalActivityOptions};

/// The longest pause between two attempts.
const MAX_INTERVAL: Duration = Duration::from_secs(10);

/// Unlimited attempts, backing off to one every 10 s.
fn until_it_succeeds() -> RetryPolicy {
    RetryPolicy::builder()
        .maximum_interval(MAX_INTERVAL)
        .build()
}

/// How many attempts [`until_it_succeeds`]'s pauses (1 s, doubling up to 10 s) leave room for
/// within `budget`, the attempts' own time not counted.
fn attempts_within(budget: Duration) -> u32 {
    let (mut waited, mut pause, mut attempts) = (Duration::ZERO, Duration::from_secs(1), 1);
    while waited + pause <= budget {
        waited += pause;
        pause = (pause * 2).min(MAX_INTERVAL);
        attempts += 1;
    }
    attempts
}

/// A write that must not be lost, as a regular activity: retried until it succeeds, each
/// attempt within `timeout`.
pub(crate) fn must_succeed(timeout: Duration) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(timeout)
        .retry_policy(until_it_succeeds())
        .build()
}

/// A quick write that must not be lost, as a local activity: run inside the workflow task
/// that needs it (no activity task to dispatch, no workflow task to wake the workflow after,
/// which is most of what a run costs the Temporal server; docs/benchmarks.md), and retried in
/// the worker until it succeeds.
pub(crate) fn must_succeed_locally(timeout: Duration) -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(timeout)
        .retry_policy(until_it_succeeds())
        .build()
}

/// A local activity retried like [`must_succeed_locally`] but given up after about `budget`:
/// for a write a later step makes anyway (the sweep observes every environment every five
/// minutes), so a long outage must not hold the workflow, or for a call that something
/// durable waits for after it. The attempts are counted too: the SDK's local activities did
/// not end at their schedule-to-close timeout across retries (found when a policy engine that
/// did not answer was retried in the workflow task for minutes).
pub(crate) fn given_up_after(timeout: Duration, budget: Duration) -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(timeout)
        .schedule_to_close_timeout(budget)
        .retry_policy(
            RetryPolicy::builder()
                .maximum_interval(MAX_INTERVAL)
                .maximum_attempts(attempts_within(budget))
                .build(),
        )
        .build()
}

/// Five attempts, at most 10 s apart: for work a later pass does again anyway.
fn five_tries() -> RetryPolicy {
    RetryPolicy::builder()
        .maximum_attempts(5)
        .maximum_interval(Duration::from_secs(10))
        .build()
}

/// One environment's step of a pass over every environment (the GitOps reconciler's
/// re-plan): five tries, then the pass moves on; the next pass tries again.
pub(crate) fn a_few_tries() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(120))
        .retry_policy(five_tries())
        .build()
}

/// A sweep's page reads and records up to a thousand environments; it heartbeats after each
/// batch it records, so a lost worker is noticed in 30 s and the page retried (recording is
/// idempotent). A page that keeps failing leaves its environments to go stale; the next sweep
/// tries them again.
pub(crate) fn observe_page() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(600))
        .heartbeat_timeout(Duration::from_secs(30))
        .retry_policy(five_tries())
        .build()
}

/// Planning only reads: exponential retry, but a plan that cannot succeed fails at once. It
/// heartbeats, so a lost worker is noticed in 10 s (not after the 300 s an attempt may take).
pub(crate) fn plan() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(300))
        .heartbeat_timeout(Duration::from_secs(10))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .backoff_coefficient(2.0)
                .maximum_interval(Duration::from_secs(60))
                .maximum_attempts(8)
                .non_retryable_error_types([PLAN_INVALID])
                .build(),
        )
        .build()
}

/// The apply heartbeats; a runner failure is never retried. A lost worker (heartbeat
/// timeout) is retried: the runner answers a repeated apply of the same run with the receipt
/// it recorded, so the change is applied once. An attempt past its deadline
/// (`ApplyTimeoutMinutes`) is not retried either: the runner stops itself shortly before it,
/// and one that could not (a stuck worker, a slow `pulumi cancel`) must not start the update
/// again.
pub(crate) fn apply(timeout_secs: u64) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(timeout_secs))
        .heartbeat_timeout(Duration::from_secs(10))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .maximum_attempts(3)
                .non_retryable_error_types([APPLY_FAILED, START_TO_CLOSE_TIMEOUT])
                .build(),
        )
        .build()
}

/// How the Temporal server names a start-to-close timeout among a retry policy's
/// non-retryable error types (`TemporalTimeout:` and the timeout type).
const START_TO_CLOSE_TIMEOUT: &str = "TemporalTimeout:StartToClose";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_holds_the_attempts_its_pauses_leave_room_for() {
        assert_eq!(attempts_within(Duration::ZERO), 1);
        // 1 + 2 + 4 + 8 s of pauses: five attempts; the next pause (10 s) would pass 20 s.
        assert_eq!(attempts_within(Duration::from_secs(20)), 5);
        assert_eq!(attempts_within(Duration::from_secs(25)), 6);
        // 15 s, then every 10 s: 5 + 28 attempts in five minutes.
        assert_eq!(attempts_within(Duration::from_secs(300)), 33);
    }
}
