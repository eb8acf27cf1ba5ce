//! CPU time of a process, read from `/proc/{pid}/stat` (Linux): what a run costs each process
//! on a machine where every process is CPU-bound, so that a rate's ratio can be read by
//! where the time went (docs/benchmarks.md, "Where a run's time goes, process by process").

/// Clock ticks a second in `/proc/{pid}/stat`: `USER_HZ`, 100 on every Linux architecture the
/// product builds for (it is part of the kernel's ABI, not its configuration).
const TICKS_PER_SEC: f64 = 100.0;

/// CPU time `pid` has used so far (user and system, every thread), in milliseconds; zero when
/// it cannot be read (the process has gone).
pub fn used_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces: the fields after it start after its `)`.
    let Some((_, after)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    // After the name: state is field 3, utime field 14, stime field 15.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) * 1000.0 / TICKS_PER_SEC
}

/// The Temporal server `scripts/bench` started (`RC_BENCH_TEMPORAL_PID`), if it said.
pub fn server_pid() -> Option<u32> {
    std::env::var("RC_BENCH_TEMPORAL_PID").ok()?.parse().ok()
}

/// CPU time of `N` processes over a stretch of a benchmark.
pub struct Meter<const N: usize> {
    pids: [Option<u32>; N],
    at_start: [f64; N],
}

impl<const N: usize> Meter<N> {
    /// Starts measuring `pids` (None: a process the benchmark does not have, measured as 0).
    pub fn start(pids: [Option<u32>; N]) -> Self {
        let at_start = pids.map(|p| p.map_or(0.0, used_ms));
        Self { pids, at_start }
    }

    /// Each process's CPU milliseconds since [`Meter::start`], divided by `runs`.
    pub fn per_run(&self, runs: usize) -> [f64; N] {
        let n = runs.max(1) as f64;
        std::array::from_fn(|i| {
            self.pids[i].map_or(0.0, |p| (used_ms(p) - self.at_start[i]).max(0.0) / n)
        })
    }
}

#[cfg(test)]
mod tests {
    /// This process's CPU time grows as it works.
    #[test]
    fn reads_this_process_as_it_works() {
        let me = std::process::id();
        let before = super::used_ms(me);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        // A tick is 10 ms: spin until one is counted, for 10 s at most.
        while super::used_ms(me) <= before && start.elapsed() < std::time::Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        assert!(super::used_ms(me) > before, "{x}");
        assert_eq!(super::used_ms(u32::MAX), 0.0);
    }
}
