//! An open-loop load generator at a fixed request rate.
//!
//! Request `i` is due at `start + i / rate` and is sent then whatever happened to the earlier
//! ones, and its latency is measured from when it was due, not from when it was actually sent:
//! a server that stalls is charged for every request that would have been waiting (the
//! "coordinated omission" correction of wrk2 and `oha --latency-correction`).
//!
//! Why not `wrk` or `oha`: Debian's `wrk` has no fixed rate, and `oha` (crates.io only) is a
//! long extra build; this is ~80 lines on the reqwest client the project already builds.

use crate::stats::{Summary, rate, summarize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

/// Requests in flight at most; past this the generator waits (and the wait counts as latency).
const MAX_IN_FLIGHT: usize = 1024;

/// What one fixed-rate run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub latency: Summary,
    /// Successful responses per second, over the time from the first due request to the last
    /// response.
    pub achieved: f64,
    pub sent: usize,
    pub errors: usize,
}

/// Sends `GET url` at `per_sec` for `duration`.
pub async fn run(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    per_sec: f64,
    duration: Duration,
) -> Outcome {
    let total = (per_sec * duration.as_secs_f64()).round() as usize;
    // (succeeded, when due, when the response was complete)
    let (tx, mut rx) = mpsc::unbounded_channel::<(bool, Instant, Instant)>();
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let start = Instant::now() + Duration::from_millis(5);
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / per_sec);
        tokio::time::sleep_until(due).await;
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let request = client.get(url).bearer_auth(token);
        let tx = tx.clone();
        tokio::spawn(async move {
            let ok = match request.send().await {
                Ok(res) => res.status().is_success() && res.bytes().await.is_ok(),
                Err(_) => false,
            };
            let _ = tx.send((ok, due, Instant::now()));
            drop(slot);
        });
    }
    drop(tx);
    let mut latencies = Vec::with_capacity(total);
    let (mut sent, mut errors, mut last) = (0, 0, start);
    while let Some((ok, due, done)) = rx.recv().await {
        sent += 1;
        last = last.max(done);
        if ok {
            latencies.push(done - due);
        } else {
            errors += 1;
        }
    }
    Outcome {
        latency: summarize(&latencies),
        achieved: rate(latencies.len(), last - start),
        sent,
        errors,
    }
}
