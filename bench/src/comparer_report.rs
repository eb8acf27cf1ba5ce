//! Benchmark 3's table: criterion's estimates (`{dir}/drift_compare/{product,baseline}/{n}/new/
//! estimates.json`) as workloads compared per second, with the product/baseline ratio.

use crate::table::{Table, ratio_cell, verdict};
use std::path::Path;

/// Environment sizes the comparer is measured at.
pub const SIZES: [usize; 3] = [10, 100, 1000];
/// The criterion group.
pub const GROUP: &str = "drift_compare";

/// The mean time of one iteration in nanoseconds, from criterion's estimates.
pub fn mean_ns(dir: &Path, function: &str, size: usize) -> Option<f64> {
    let path = dir
        .join(GROUP)
        .join(function)
        .join(size.to_string())
        .join("new/estimates.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

/// Workloads per second at `size` from a mean iteration time.
pub fn per_sec(size: usize, ns: f64) -> f64 {
    size as f64 / (ns * 1e-9)
}

/// Prints the table (sizes without results are skipped).
pub fn print(dir: &Path) {
    let mut t = Table::new(
        "Drift comparison (criterion mean per environment)",
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
        let (Some(p), Some(b)) = (mean_ns(dir, "product", n), mean_ns(dir, "baseline", n)) else {
            continue;
        };
        t.row(row(n, p, b));
    }
    t.print();
}

/// One table row: the mean time per call of the product and the baseline for `n` workloads,
/// their rates and the verdict against 1M workloads/s.
pub fn row(n: usize, product_ns: f64, baseline_ns: f64) -> Vec<String> {
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
}
