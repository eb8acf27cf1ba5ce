//! Options named by the spec pages, with their defaults.

use serde::{Deserialize, Serialize};

/// `RuntimeCloud:Provisioning` options.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct ProvisioningOptions {
    /// Runner timeout per apply, in minutes.
    #[serde(default = "default_apply_timeout_minutes")]
    pub apply_timeout_minutes: f64,
    /// Reconciliation applies adds and changes automatically outside production.
    #[serde(default = "default_true")]
    pub auto_apply_non_destructive: bool,
    /// How long a production run waits for its approval before it is `Rejected`.
    /// Fractional hours are allowed so tests can use a short window.
    #[serde(default = "default_approval_timeout_hours")]
    pub approval_timeout_hours: f64,
    /// While another run waits for an environment, how often its lock checks that the run
    /// holding it still exists (one terminated by hand never releases it). Fractional minutes
    /// are allowed so tests can use a short window.
    #[serde(default = "default_lock_holder_check_minutes")]
    pub lock_holder_check_minutes: f64,
    /// How long a recorded approval can open the production gate. Fractional hours are
    /// allowed so tests can use a short window.
    #[serde(default = "default_approval_validity_hours")]
    pub approval_validity_hours: f64,
    /// How long after its request the API's starter starts a run whose workflow did not start
    /// (the API stopped between writing the run and starting it). At least 11 s: a request
    /// waits up to 10 s for Temporal to start its run, and a start taken from a request still
    /// waiting could start a run the request is about to take back.
    #[serde(default = "default_unstarted_run_grace_seconds")]
    pub unstarted_run_grace_seconds: f64,
}

/// How long a request waits for Temporal to start its run's workflow before it takes the run
/// back.
pub const RUN_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long after a run was written its request may still be starting it (the start's timeout
/// and a second to take the run back): until then nobody else starts it.
pub const RUN_START_IN_FLIGHT: std::time::Duration = std::time::Duration::from_secs(11);

fn default_apply_timeout_minutes() -> f64 {
    45.0
}
fn default_approval_timeout_hours() -> f64 {
    24.0
}
fn default_approval_validity_hours() -> f64 {
    24.0
}
fn default_lock_holder_check_minutes() -> f64 {
    10.0
}
fn default_unstarted_run_grace_seconds() -> f64 {
    30.0
}
fn default_true() -> bool {
    true
}

impl Default for ProvisioningOptions {
    fn default() -> Self {
        Self {
            apply_timeout_minutes: default_apply_timeout_minutes(),
            auto_apply_non_destructive: true,
            approval_timeout_hours: default_approval_timeout_hours(),
            lock_holder_check_minutes: default_lock_holder_check_minutes(),
            approval_validity_hours: default_approval_validity_hours(),
            unstarted_run_grace_seconds: default_unstarted_run_grace_seconds(),
        }
    }
}

impl ProvisioningOptions {
    /// The apply timeout in whole seconds (at least one).
    pub fn apply_timeout_secs(&self) -> u64 {
        ((self.apply_timeout_minutes * 60.0).ceil() as u64).max(1)
    }

    /// The lock's holder check interval in whole seconds (at least one).
    pub fn lock_holder_check_secs(&self) -> u64 {
        ((self.lock_holder_check_minutes * 60.0).ceil() as u64).max(1)
    }

    /// How long a recorded approval stays valid (at least a second).
    pub fn approval_validity(&self) -> chrono::Duration {
        chrono::Duration::seconds(((self.approval_validity_hours * 3600.0).ceil() as i64).max(1))
    }

    /// How long after its request an unstarted run is started by the starter (at least
    /// [`RUN_START_IN_FLIGHT`]).
    pub fn unstarted_run_grace(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.unstarted_run_grace_seconds)
            .unwrap_or_default()
            .max(RUN_START_IN_FLIGHT)
    }

    /// The approval timeout in whole seconds (at least one).
    pub fn approval_timeout_secs(&self) -> u64 {
        ((self.approval_timeout_hours * 3600.0).ceil() as u64).max(1)
    }
}

/// `RuntimeCloud:Inventory` options.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct InventoryOptions {
    /// An environment without an observation this recent is stale. Fractional minutes are
    /// allowed so tests can use a short window.
    #[serde(default = "default_staleness_minutes")]
    pub staleness_minutes: f64,
    /// Auto-accept non-destructive proposals outside production.
    #[serde(default = "default_true")]
    pub auto_accept_non_destructive_outside_production: bool,
}

fn default_staleness_minutes() -> f64 {
    15.0
}

impl Default for InventoryOptions {
    fn default() -> Self {
        Self {
            staleness_minutes: default_staleness_minutes(),
            auto_accept_non_destructive_outside_production: true,
        }
    }
}

impl InventoryOptions {
    /// The staleness window in whole seconds (at least one).
    pub fn staleness_secs(&self) -> u64 {
        ((self.staleness_minutes * 60.0).ceil() as u64).max(1)
    }
}

impl InventoryOptions {
    /// Whether an inventory is stale: flagged by a failed observation, never observed, or
    /// observed longer ago than `StalenessMinutes`. Never trust an old observation, even before
    /// the sweep marks it.
    pub fn is_stale(
        &self,
        flagged: bool,
        observed_at: Option<chrono::DateTime<chrono::Utc>>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> bool {
        let window = chrono::Duration::seconds(self.staleness_secs() as i64);
        flagged || observed_at.is_none_or(|t| now - t > window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_never_takes_a_start_its_request_may_still_be_making() {
        let grace = |seconds| {
            ProvisioningOptions {
                unstarted_run_grace_seconds: seconds,
                ..Default::default()
            }
            .unstarted_run_grace()
        };
        assert_eq!(grace(30.0), std::time::Duration::from_secs(30));
        assert_eq!(grace(1.0), RUN_START_IN_FLIGHT);
        assert_eq!(grace(-5.0), RUN_START_IN_FLIGHT);
        assert_eq!(grace(f64::NAN), RUN_START_IN_FLIGHT);
        assert!(RUN_START_IN_FLIGHT > RUN_START_TIMEOUT);
    }
}
