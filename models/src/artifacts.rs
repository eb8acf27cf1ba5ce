//! The keys of run artifacts in the artifact store (an `object_store` under the data dir or
//! an S3-compatible bucket): a tenant's artifacts are under its own prefix.

/// The phases of a run that write a log.
pub const PHASES: &[&str] = &["plan", "apply"];

/// The key of a run's log of `phase`.
pub fn run_log(tenant_id: &str, run_id: &str, phase: &str) -> String {
    format!("runs/{tenant_id}/{run_id}/{phase}.log")
}

/// The key of a Pulumi plan file (`pulumi preview --save-plan`) by its plan's inputs hash.
pub fn pulumi_plan(tenant_id: &str, environment_id: &str, inputs_hash: &str) -> String {
    format!("plans/{tenant_id}/{environment_id}/{inputs_hash}.json")
}

/// Whether `key` names something inside the store: non-empty parts, none `.` or `..`, no
/// leading `/` and no `\` (`object_store`'s paths refuse the first two but take a leading `/`
/// away and keep a `\`, which a filesystem elsewhere would read as a separator).
pub fn checked(key: &str) -> bool {
    !key.split('/')
        .any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_never_leaves_the_root() {
        assert!(checked(&run_log("acme", "r1", "plan")));
        assert!(checked(&pulumi_plan("acme", "dev", "0123abcd")));
        for key in [
            "../escape",
            "runs//x",
            "runs/./x",
            "/etc/passwd",
            "runs\\..\\x",
            "",
        ] {
            assert!(!checked(key), "{key}");
        }
    }
}
