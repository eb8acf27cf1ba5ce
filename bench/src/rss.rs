//! Memory of a process, read from `/proc/{pid}/status` (Linux).

/// Resident set size now and at its peak (`VmRSS`, `VmHWM`), in MiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rss {
    pub now_mib: f64,
    pub peak_mib: f64,
}

/// The memory of `pid`, or zeros when it cannot be read.
pub fn of(pid: u32) -> Rss {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Rss {
        now_mib: kib("VmRSS:") / 1024.0,
        peak_mib: kib("VmHWM:") / 1024.0,
    }
}

/// Direct children of `pid` (to find the Temporal server `runtime-cloud dev` starts).
pub fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let me = super::of(std::process::id());
        assert!(me.now_mib > 0.0 && me.peak_mib >= me.now_mib);
    }
}
