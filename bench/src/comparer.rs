//! Benchmark 3's inputs and baseline, shared by the criterion bench (`benches/comparer.rs`)
//! and the quick timer of `rc-bench compare-quick`.
//!
//! Inputs are what an observation compares: the declared workloads of a specification against
//! what the sandbox observer reports (`runtime_cloud_activities::sandbox::observed`), with a few
//! differences: one in 50 runs another version, one in 50 has a replica not ready, one declared
//! workload is missing and one unmanaged workload runs.
//!
//! Baseline: the same name index and the same field comparisons, counting differences without
//! building findings: what any comparer pays. The ratio is the cost of the findings themselves.

use crate::api::workloads;
use crate::comparer_report::SIZES;
use crate::table::Table;
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

/// `rc-bench compare-quick`: the same measurement without criterion (a plain median timer), for
/// machines where the criterion build is too long. Criterion's numbers are the reference.
pub fn quick() {
    let mut t = Table::new(
        "Drift comparison (plain timer, median of 15 x 200 ms; not criterion)",
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
        t.row(crate::comparer_report::row(n, p, b));
    }
    t.print();
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_baseline_counts_what_the_comparer_finds() {
        let (declared, observed) = super::inputs(100);
        let found = runtime_cloud_models::drift::compare(&declared, &observed);
        // 2 versions, 2 replicas, 1 missing, 1 unmanaged.
        assert_eq!(found.len(), 6);
        assert_eq!(super::differences(&declared, &observed), 6);
    }
}
