//! Benchmark 3: the drift comparer (`runtime_cloud_models::drift::compare`), workloads compared
//! per second for environments of 10, 100 and 1,000 workloads, next to a baseline, each the
//! median of 15 timed rounds of 200 ms (`rc-bench compare`).
//!
//! Inputs are what an observation compares: the declared workloads of a specification against
//! what the sandbox observer reports (`runtime_cloud_activities::sandbox::observed`), with a few
//! differences: one in 50 runs another version, one in 50 has a replica not ready, one declared
//! workload is missing and one unmanaged workload runs.
//!
//! Baseline: the same name index and the same field comparisons, counting differences without
//! building findings: what any comparer pays. The ratio is the cost of the findings themselves.

use crate::api::workloads;
use crate::table::{Table, ratio_cell, verdict};
use runtime_cloud_activities::ports::Target;
use runtime_cloud_activities::sandbox::observed;
use runtime_cloud_models::Workload;
use runtime_cloud_models::drift::compare;
use runtime_cloud_models::observation::ObservedWorkload;
use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Declared and observed workloads of one environment of `n` workloads, a few differing.
pub fn inputs(n: usize) -> (Vec<Workload>, Vec<ObservedWorkload>) {
    let declared = workloads(n);
    let target = Target {
        tenant_id: "bench".into(),
        environment_id: "env".into(),
        limits: None,
    };
    let mut seen: Vec<ObservedWorkload> = declared.iter().map(|w| observed(&target, w)).collect();
    for (i, o) in seen.iter_mut().enumerate() {
        if i % 50 == 0 {
            o.version = "9.9.9".into();
        }
        if i % 50 == 1 {
            o.replicas_ready = o.replicas_ready.saturating_sub(1);
        }
    }
    seen.pop();
    let mut stray = seen[0].clone();
    stray.name = "debug-shell".into();
    stray.kind = "pod".into();
    seen.push(stray);
    (declared, seen)
}

/// The baseline: index by name and compare the same fields, counting differences.
pub fn differences(declared: &[Workload], observed: &[ObservedWorkload]) -> usize {
    let by_name: BTreeMap<&str, &ObservedWorkload> =
        observed.iter().map(|w| (w.name.as_str(), w)).collect();
    let mut n = 0;
    for want in declared {
        match by_name.get(want.name.as_str()) {
            None => n += 1,
            Some(have) => {
                n += usize::from(want.version != have.version)
                    + usize::from(
                        want.replicas != have.replicas_desired
                            || want.replicas != have.replicas_ready,
                    )
                    + usize::from(want.config_refs != have.config_refs)
                    + usize::from(want.secret_refs != have.secret_refs);
            }
        }
    }
    let names: BTreeSet<&str> = declared.iter().map(|w| w.name.as_str()).collect();
    n + observed
        .iter()
        .filter(|w| !names.contains(w.name.as_str()))
        .count()
}

/// The median of 15 samples of ~200 ms each: nanoseconds per call of `f`.
fn time_ns(mut f: impl FnMut()) -> f64 {
    let mut per_call = Vec::new();
    // Calibrate a batch to ~10 ms.
    let mut batch = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        if t.elapsed() > Duration::from_millis(10) {
            break;
        }
        batch *= 2;
    }
    for _ in 0..15 {
        let t = Instant::now();
        let mut calls = 0u64;
        while t.elapsed() < Duration::from_millis(200) {
            for _ in 0..batch {
                f();
            }
            calls += batch;
        }
        per_call.push(t.elapsed().as_nanos() as f64 / calls as f64);
    }
    per_call.sort_by(f64::total_cmp);
    per_call[per_call.len() / 2]
}

/// Environment sizes the comparer is measured at.
pub const SIZES: [usize; 3] = [10, 100, 1000];

/// `rc-bench compare`: the table of both at every size.
pub fn run() {
    let mut t = Table::new(
        "Drift comparison (median of 15 x 200 ms)",
        &[
            "workloads / env",
            "product µs",
            "product workloads/s",
            "baseline µs",
            "baseline workloads/s",
            "product / baseline",
            "target >= 1M/s",
        ],
    );
    for n in SIZES {
        let (declared, observed) = inputs(n);
        assert_eq!(
            compare(&declared, &observed).len(),
            differences(&declared, &observed)
        );
        let p = time_ns(|| {
            black_box(compare(black_box(&declared), black_box(&observed)));
        });
        let b = time_ns(|| {
            black_box(differences(black_box(&declared), black_box(&observed)));
        });
        t.row(row(n, p, b));
    }
    t.print();
}

/// Workloads per second at `size` from a mean iteration time.
fn per_sec(size: usize, ns: f64) -> f64 {
    size as f64 / (ns * 1e-9)
}

/// One table row: the time per call of the product and the baseline for `n` workloads, their
/// rates and the verdict against 1M workloads/s.
fn row(n: usize, product_ns: f64, baseline_ns: f64) -> Vec<String> {
    let (pr, br) = (per_sec(n, product_ns), per_sec(n, baseline_ns));
    vec![
        n.to_string(),
        format!("{:.2}", product_ns / 1000.0),
        format!("{:.2}M", pr / 1e6),
        format!("{:.2}", baseline_ns / 1000.0),
        format!("{:.2}M", br / 1e6),
        ratio_cell(pr / br),
        verdict(pr >= 1e6),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn rate_from_nanoseconds() {
        assert_eq!(super::per_sec(1000, 1_000_000.0), 1_000_000.0);
    }

    #[test]
    fn the_baseline_counts_what_the_comparer_finds() {
        let (declared, observed) = super::inputs(100);
        let found = runtime_cloud_models::drift::compare(&declared, &observed);
        // 2 versions, 2 replicas, 1 missing, 1 unmanaged.
        assert_eq!(found.len(), 6);
        assert_eq!(super::differences(&declared, &observed), 6);
    }
}
