//! Benchmark 3: the drift comparer (`runtime_cloud_models::drift::compare`), workloads compared
//! per second, for environments of 10, 100 and 1,000 workloads.
//!
//! Inputs and baseline: `runtime_cloud_bench::comparer`.
//!
//! `cargo bench -p runtime-cloud-bench --bench comparer` (or `scripts/bench compare`).

use criterion::{BenchmarkId, Criterion, Throughput};
use runtime_cloud_bench::comparer::{differences, inputs};
use runtime_cloud_bench::comparer_report::{self, GROUP, SIZES};
use runtime_cloud_models::drift::compare;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

fn output_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("criterion")
}

fn main() {
    let dir = output_dir();
    let mut c = Criterion::default()
        .output_directory(&dir)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    {
        let mut group = c.benchmark_group(GROUP);
        for n in SIZES {
            let (declared, observed) = inputs(n);
            assert_eq!(
                compare(&declared, &observed).len(),
                differences(&declared, &observed)
            );
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::new("product", n), &n, |b, _| {
                b.iter(|| compare(black_box(&declared), black_box(&observed)))
            });
            group.bench_with_input(BenchmarkId::new("baseline", n), &n, |b, _| {
                b.iter(|| differences(black_box(&declared), black_box(&observed)))
            });
        }
        group.finish();
    }
    c.final_summary();
    comparer_report::print(&dir);
}
