//! Each tenant's run submissions, paced ([`runtime_cloud_models::pacing`]): a submission past
//! the tenant's burst waits its turn here, before it costs the database anything, and one that
//! would wait longer than the pace allows is refused with 429 and `Retry-After`.
//!
//! The buckets are this process's: with several API replicas each paces what it is sent, so
//! a tenant's rate is at most the replicas times the pace. That is enough for what pacing is
//! for (one tenant's flood does not take the machine from the others); quotas, which must
//! hold across replicas, are the database's and the capacity semaphores'.

use crate::Error;
use runtime_cloud_models::pacing::{Pace, Turn};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Above this many tenants the buckets of tenants idle long enough to be full again are
/// dropped (an idle tenant's bucket is the same as none).
const PRUNE_ABOVE: usize = 10_000;

/// The tenants' buckets.
#[derive(Debug)]
pub struct Pacer {
    pace: Pace,
    origin: Instant,
    /// Each tenant's theoretical arrival time, since `origin`.
    tats: Mutex<HashMap<String, Duration>>,
}

impl Pacer {
    pub fn new(pace: Pace) -> Self {
        Self {
            pace,
            origin: Instant::now(),
            tats: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for the tenant's turn, or refuses (429) when its queue is longer than the pace
    /// lets a submission wait.
    pub async fn wait_turn(&self, tenant: &str) -> Result<(), Error> {
        match self.turn(tenant) {
            Turn::After(wait) if wait.is_zero() => Ok(()),
            Turn::After(wait) => {
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Turn::Refused { retry_after } => Err(Error::TooManyRequests {
                detail: format!(
                    "tenant `{tenant}` submits runs faster than {} a second (bursts of {}); \
                     its earlier submissions are still waiting their turn",
                    self.pace.per_second, self.pace.burst
                ),
                retry_after_secs: retry_after.as_secs_f64().ceil().max(1.0) as u64,
            }),
        }
    }

    fn turn(&self, tenant: &str) -> Turn {
        let now = self.origin.elapsed();
        // A poisoned lock only means another request panicked mid-update of a plain map.
        let mut tats = self.tats.lock().unwrap_or_else(|p| p.into_inner());
        let (turn, tat) = self.pace.turn(tats.get(tenant).copied(), now);
        tats.insert(tenant.to_owned(), tat);
        if tats.len() > PRUNE_ABOVE {
            tats.retain(|_, tat| *tat > now);
        }
        turn
    }
}
