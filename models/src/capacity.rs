//! Execution capacity (spec 003, ExecutionCapacityService): worker pools, tenant quotas and
//! capacity leases. The rules, pure: what a quota may say, what one applies when none is
//! recorded, when a day's execution minutes reset.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

crate::wire::wire_enum!(
    /// Who a pool serves.
    PoolKind, "pool kind" {
        /// Runs of every tenant bound to it.
        Shared => "shared",
        /// One tenant's runs only (a customer-isolated or production boundary).
        Dedicated => "dedicated",
    }
);

crate::wire::wire_enum!(
    /// Whether a pool takes work.
    PoolState, "pool state" {
        /// Its workers serve runs.
        Active => "active",
        /// It finishes what it holds and takes nothing new.
        Draining => "draining",
        /// It takes nothing.
        Disabled => "disabled",
    }
);

crate::wire::wire_enum!(
    /// Where a capacity lease stands.
    LeaseState, "lease state" {
        /// Asked for; the quota holds it back.
        Waiting => "waiting",
        /// Held by its run.
        Granted => "granted",
        /// Given back when the run ended.
        Released => "released",
        /// Taken back: its holder vanished.
        Expired => "expired",
    }
);

/// What a quota bounds, per tenant and project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaLimits {
    /// Runs holding a lease at once.
    pub concurrent_runs: u32,
    /// Sandboxes (runner processes) at once.
    pub concurrent_sandboxes: u32,
    /// CPUs one attempt's runner process may use.
    pub cpu_per_attempt: f64,
    /// Memory one attempt's runner process may use, in GB.
    pub memory_gb_per_attempt: f64,
    /// Apply minutes per UTC day, counted from the receipts.
    pub execution_minutes_per_day: u32,
}

impl Default for QuotaLimits {
    /// What a tenant and project without a recorded quota get (`source: default`).
    fn default() -> Self {
        Self {
            concurrent_runs: 10,
            concurrent_sandboxes: 10,
            cpu_per_attempt: 2.0,
            memory_gb_per_attempt: 4.0,
            execution_minutes_per_day: 1440,
        }
    }
}

impl QuotaLimits {
    /// Why these limits cannot be a quota, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.concurrent_runs == 0 {
            return Err("concurrentRuns must be at least 1".into());
        }
        if self.concurrent_sandboxes == 0 {
            return Err("concurrentSandboxes must be at least 1".into());
        }
        for (name, v) in [
            ("cpuPerAttempt", self.cpu_per_attempt),
            ("memoryGbPerAttempt", self.memory_gb_per_attempt),
        ] {
            if !v.is_finite() || v <= 0.0 {
                return Err(format!("{name} must be a positive number"));
            }
        }
        Ok(())
    }
}

/// When the execution minutes counted on `now`'s UTC day reset: the next UTC midnight.
pub fn minutes_reset_at(now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive().and_hms_opt(0, 0, 0).unwrap_or_default();
    DateTime::<Utc>::from_naive_utc_and_offset(today, Utc) + Duration::days(1)
}

/// The whole minutes an apply that ran from `started` to `ended` counts, rounded up (an apply
/// of one second uses a minute, as metered execution is billed).
pub fn apply_minutes(started: DateTime<Utc>, ended: DateTime<Utc>) -> u32 {
    let seconds = (ended - started).num_seconds().max(0);
    u32::try_from((seconds + 59) / 60).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_bounds_something() {
        assert_eq!(QuotaLimits::default().check(), Ok(()));
        let zero = QuotaLimits {
            concurrent_runs: 0,
            ..Default::default()
        };
        assert!(zero.check().is_err());
        let nan = QuotaLimits {
            cpu_per_attempt: f64::NAN,
            ..Default::default()
        };
        assert!(nan.check().is_err());
    }

    #[test]
    fn minutes_reset_at_the_next_utc_midnight_and_round_up() {
        let now: DateTime<Utc> = "2026-12-01T19:59:00Z".parse().unwrap();
        assert_eq!(
            minutes_reset_at(now),
            "2026-12-02T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(apply_minutes(now, now + Duration::seconds(1)), 1);
        assert_eq!(apply_minutes(now, now + Duration::seconds(120)), 2);
        assert_eq!(apply_minutes(now, now), 0);
    }
}
