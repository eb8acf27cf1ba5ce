//! Percentiles and rates.

use std::time::Duration;

/// Latency percentiles of one measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub max: Duration,
}

/// The nearest-rank percentile `p` (0–100) of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Summarises samples (in any order).
pub fn summarize(samples: &[Duration]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    Summary {
        count: sorted.len(),
        p50: percentile(&sorted, 50.0),
        p95: percentile(&sorted, 95.0),
        p99: percentile(&sorted, 99.0),
        max: sorted.last().copied().unwrap_or_default(),
    }
}

/// Events per second.
pub fn rate(events: usize, over: Duration) -> f64 {
    if over.is_zero() {
        return 0.0;
    }
    events as f64 / over.as_secs_f64()
}

/// `product / baseline`, or NaN when the baseline is zero.
pub fn ratio(product: f64, baseline: f64) -> f64 {
    if baseline == 0.0 {
        f64::NAN
    } else {
        product / baseline
    }
}

/// A duration as milliseconds with one decimal, for tables.
pub fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms_(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).rev().map(ms_).collect();
        let s = summarize(&samples);
        assert_eq!(
            (s.p50, s.p95, s.p99, s.max),
            (ms_(50), ms_(95), ms_(99), ms_(100))
        );
        assert_eq!(summarize(&[ms_(7)]).p99, ms_(7));
        assert_eq!(summarize(&[]).p50, Duration::ZERO);
    }

    #[test]
    fn rates_and_ratios() {
        assert_eq!(rate(10, Duration::from_secs(2)), 5.0);
        assert_eq!(rate(10, Duration::ZERO), 0.0);
        assert_eq!(ratio(8.0, 10.0), 0.8);
        assert!(ratio(1.0, 0.0).is_nan());
    }
}
