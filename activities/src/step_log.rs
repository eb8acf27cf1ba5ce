//! A runner step's log: every command it ran and what it printed, kept as the run's plan or
//! apply artifact. Secret values the step resolved are registered with [`StepLog::redact`]
//! and replaced wherever they appear (a program that prints a secret included) before the log
//! is kept.

use crate::references::Resolved;

/// What is shown instead of a secret value.
pub const REDACTED: &str = "[secret]";

/// The log of one plan or apply. Shared by reference with everything the step runs (it
/// locks inside), so a runner hands it down without threading `&mut` through every call.
#[derive(Default)]
pub struct StepLog {
    inner: std::sync::Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    text: String,
    secrets: Vec<String>,
    progress: Option<Progress>,
}

/// How far a step is: resources done of the resources it changes. The apply activity's
/// heartbeat carries it, so `temporal workflow describe` shows a long apply moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub resources_done: u64,
    pub resources_total: u64,
}

impl StepLog {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a line.
    pub fn line(&self, line: impl AsRef<str>) {
        let mut kept = self.kept();
        kept.text.push_str(line.as_ref());
        kept.text.push('\n');
    }

    /// Appends a command's output under a heading.
    pub fn output(&self, heading: &str, stdout: &str, stderr: &str) {
        self.line(format!("$ {heading}"));
        for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
            if !text.trim().is_empty() {
                self.line(format!("--- {name}"));
                self.line(text.trim_end());
            }
        }
    }

    /// Records how far the step is.
    pub fn progress(&self, done: u64, total: u64) {
        self.kept().progress = Some(Progress {
            resources_done: done,
            resources_total: total,
        });
    }

    /// How far the step is, once its runner has said.
    pub fn current_progress(&self) -> Option<Progress> {
        self.kept().progress
    }

    /// Registers a value never to be kept. Short values are not registered: replacing every
    /// `1` or `on` would say which values a secret can have and wreck the log.
    pub fn redact(&self, value: &Resolved) {
        let v = value.expose();
        let mut kept = self.kept();
        if v.len() >= 4 && !kept.secrets.iter().any(|s| s == v) {
            kept.secrets.push(v.to_owned());
        }
    }

    /// The log with every registered secret replaced, longest first (a secret that contains
    /// another is replaced whole).
    pub fn finish(self) -> String {
        let mut kept = self.inner.into_inner().unwrap_or_else(|e| e.into_inner());
        kept.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let mut text = kept.text;
        for s in &kept.secrets {
            text = text.replace(s.as_str(), REDACTED);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::references::{LocalReferences, SecretBroker};

    #[tokio::test]
    async fn a_secret_printed_anywhere_is_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(
            &file,
            "a = \"hunter2-long\"\nb = \"hunter2-long-and-longer\"\nc = \"on\"\n",
        )
        .unwrap();
        let resolve = |k: &str| {
            let r = format!("file://{}#{k}", file.display());
            async move { SecretBroker::resolve(&LocalReferences, &r).await.unwrap() }
        };
        let log = StepLog::default();
        log.redact(&resolve("a").await);
        log.redact(&resolve("b").await);
        log.redact(&resolve("c").await);
        log.output(
            "pulumi up",
            "password=hunter2-long-and-longer\nshort=hunter2-long\n",
            "mode on",
        );
        let text = log.finish();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            text.contains("password=[secret]") && text.contains("short=[secret]"),
            "{text}"
        );
        assert!(text.contains("mode on"), "short values stay: {text}");
    }
}
