//! Pacing a tenant's run submissions: a token bucket, as the generic cell rate algorithm
//! (GCRA), that makes a request *wait* its turn rather than refusing it, up to a limit.
//!
//! Why: a tenant that submits far more runs than its quota lets run gains nothing by having
//! them accepted faster than its runs apply (they wait deferred either way), but accepting
//! them costs the API and the database the same two cores every other tenant's runs need
//! (B's runs were 2.7 × slower while A's 1,000 submissions were accepted at ~200/s). Pacing
//! each tenant to a sustained rate with a burst keeps one tenant's flood from taking the
//! machine, and a client that sends one request at a time never notices it.
//!
//! Times are offsets from an origin the caller chooses (a process's start), so the rule is
//! pure and the caller's clock is the only clock.
//!
//! Not `governor`: its GCRA admits a request now or says when one could be, but it neither
//! reserves the turn of a request that waits (every waiter told the same instant would retry
//! at once, and the first to come back would win) nor refuses, leaving the bucket as it was,
//! one whose wait would pass `max_wait`. Those two are what this rule is for.

use std::time::Duration;

/// How fast one tenant's submissions are taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Sustained submissions per second (> 0).
    pub per_second: f64,
    /// How many may arrive at once without waiting (≥ 1).
    pub burst: u32,
    /// The longest a submission is held waiting for its turn; one that would wait longer
    /// is refused (429), and told when to come back.
    pub max_wait: Duration,
}

/// What a submission arriving at `now` is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Proceed after waiting this long (zero: at once). Its place is taken.
    After(Duration),
    /// Too many are queued: come back after this long. Nothing is taken.
    Refused { retry_after: Duration },
}

impl Pace {
    /// The time between two submissions at the sustained rate.
    fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.per_second.max(f64::MIN_POSITIVE))
    }

    /// The turn of a submission arriving at `now`, given the tenant's theoretical arrival
    /// time `tat` (when the bucket is next empty at the sustained rate; `None` for a tenant
    /// not seen yet), and the new `tat` to keep.
    pub fn turn(&self, tat: Option<Duration>, now: Duration) -> (Turn, Duration) {
        let interval = self.interval();
        let tat = tat.map_or(now, |t| t.max(now));
        // The burst lets `burst` submissions share the bucket: the first `burst - 1`
        // intervals of backlog are free.
        let tolerance = interval.saturating_mul(self.burst.max(1) - 1);
        let allowed_at = tat.saturating_sub(tolerance);
        let wait = allowed_at.saturating_sub(now);
        if wait > self.max_wait {
            return (
                Turn::Refused {
                    retry_after: wait - self.max_wait,
                },
                tat,
            );
        }
        (Turn::After(wait), tat + interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(per_second: f64, burst: u32, max_wait_ms: u64) -> Pace {
        Pace {
            per_second,
            burst,
            max_wait: Duration::from_millis(max_wait_ms),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Sends `n` submissions at `now`, returning each one's turn.
    fn at_once(p: &Pace, tat: &mut Option<Duration>, now: Duration, n: usize) -> Vec<Turn> {
        (0..n)
            .map(|_| {
                let (turn, next) = p.turn(*tat, now);
                *tat = Some(next);
                turn
            })
            .collect()
    }

    #[test]
    fn a_burst_passes_at_once_and_the_rest_wait_one_interval_each() {
        let p = pace(10.0, 3, 10_000);
        let mut tat = None;
        let turns = at_once(&p, &mut tat, ms(0), 5);
        assert_eq!(
            turns,
            vec![
                Turn::After(ms(0)),
                Turn::After(ms(0)),
                Turn::After(ms(0)),
                Turn::After(ms(100)),
                Turn::After(ms(200)),
            ]
        );
    }

    #[test]
    fn one_at_a_time_at_the_rate_never_waits() {
        let p = pace(10.0, 1, 0);
        let mut tat = None;
        for i in 0..50 {
            let turns = at_once(&p, &mut tat, ms(100 * i), 1);
            assert_eq!(turns, vec![Turn::After(ms(0))], "submission {i}");
        }
    }

    #[test]
    fn an_idle_tenant_gets_its_whole_burst_back() {
        let p = pace(10.0, 4, 10_000);
        let mut tat = None;
        at_once(&p, &mut tat, ms(0), 20);
        // 20 taken by t=0 at 10/s: the bucket is empty again at 2 s (less the burst).
        let later = at_once(&p, &mut tat, ms(5_000), 5);
        assert_eq!(later[..4], [Turn::After(ms(0)); 4]);
        assert_eq!(later[4], Turn::After(ms(100)));
    }

    #[test]
    fn past_the_longest_wait_it_refuses_and_takes_nothing() {
        let p = pace(10.0, 1, 250);
        let mut tat = None;
        let turns = at_once(&p, &mut tat, ms(0), 5);
        assert_eq!(
            turns[..3],
            [
                Turn::After(ms(0)),
                Turn::After(ms(100)),
                Turn::After(ms(200))
            ]
        );
        // The fourth would wait 300 ms: refused, 50 ms past the limit.
        assert_eq!(
            turns[3],
            Turn::Refused {
                retry_after: ms(50)
            }
        );
        assert_eq!(turns[4], turns[3], "a refusal leaves the queue as it was");
        // Coming back when told, it gets in.
        let back = at_once(&p, &mut tat, ms(50), 1);
        assert_eq!(back, vec![Turn::After(ms(250))]);
    }

    #[test]
    fn the_sustained_rate_holds_over_a_long_flood() {
        let p = pace(20.0, 40, 60_000);
        let mut tat = None;
        let turns = at_once(&p, &mut tat, ms(0), 1_000);
        let last = match turns[999] {
            Turn::After(d) => d,
            refused => panic!("refused: {refused:?}"),
        };
        // 40 at once, then 960 more at 20/s: the last at 48 s.
        assert_eq!(last, ms(48_000));
    }
}
