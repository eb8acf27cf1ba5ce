//! The sandbox runner: a simulated target kept as one JSON document per environment under
//! `{data_dir}/sandbox/{tenant}/{environment}.json`.
//!
//! Plan diffs the declared workloads against the document; apply converges it and records the
//! receipt under the run id, so a repeated apply of the same run changes nothing. The
//! `runtime-cloud sandbox` CLI edits the document out of band the way a person with cluster
//! access would (and arms failures for tests).

use crate::Error;
use crate::ports::{Observer, Plan, Runner, Target};
use crate::step_log::StepLog;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::plan::{diff, inputs_hash};
use runtime_cloud_models::{
    ApplyReceipt, ApplyResult, PlanReceipt, SpecificationSnapshot, Workload,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The runner's name and version, written into every apply receipt.
pub const RUNNER_VERSION: &str = concat!("sandbox/", env!("CARGO_PKG_VERSION"));

/// One environment's simulated target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDocument {
    /// What runs now.
    #[serde(default)]
    pub workloads: Vec<Workload>,
    /// Receipts of every apply, by run id: applying a run twice returns its receipt.
    #[serde(default)]
    pub applied_runs: BTreeMap<String, ApplyReceipt>,
    /// When set, the next apply fails with this reason (and clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_next_apply: Option<String>,
    /// How long an apply takes, to simulate a slow runner.
    #[serde(default)]
    pub apply_delay_ms: u64,
    /// How long an observation takes, to simulate a slow cluster API.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observe_delay_ms: u64,
    /// When true, plan and apply fail as if the target could not be reached.
    #[serde(default)]
    pub unreachable: bool,
    /// When set, observations report these workloads instead of what runs: a lagging observer
    /// (a stale cache, a health check that has not caught up), whatever applies do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_observation: Option<Vec<Workload>>,
    /// Every apply that did the work, in order, with when it ran: a real target's audit log,
    /// and how the fault tests see that an environment was never applied twice at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apply_log: Vec<ApplyLogEntry>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One apply that did the work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyLogEntry {
    pub run_id: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub finished_at: chrono::DateTime<chrono::Utc>,
}

/// The sandbox adapter of the [`Runner`] port.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
    /// One mutex per document, so two activities in this process never interleave a
    /// read-modify-write of the same environment. Across processes (the workers of one
    /// deployment, the `sandbox` CLI) the document's lock file does the same
    /// ([`Sandbox::lock_file`]).
    locks: Arc<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Sandbox {
    /// A sandbox whose documents live under `data_dir/sandbox`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("sandbox"),
            locks: Default::default(),
        }
    }

    /// The document's path for a target.
    pub fn path(&self, target: &Target) -> PathBuf {
        self.root
            .join(sanitize(&target.tenant_id))
            .join(format!("{}.json", sanitize(&target.environment_id)))
    }

    fn lock_for(&self, path: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(path.to_owned()).or_default().clone()
    }

    /// Takes the document's lock file (`{environment}.json.lock`, an OS file lock held until the
    /// file is dropped), waiting for another process that holds it: two workers applying, or the CLI editing while a worker applies, would
    /// otherwise each write back what they read and undo the other's change (an apply's
    /// receipt and log entry lost under an out-of-band edit).
    async fn lock_file(&self, path: &Path) -> Result<std::fs::File, Error> {
        let path = path.with_extension("json.lock");
        let io = {
            let path = path.clone();
            move |source| Error::SandboxIo {
                path: path.display().to_string(),
                source,
            }
        };
        let locked = tokio::task::spawn_blocking(move || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| io(std::io::Error::other(e)))?;
        locked.map_err(io)
    }

    /// Reads a target's document; a target never applied to is empty.
    pub async fn load(&self, target: &Target) -> Result<SandboxDocument, Error> {
        let path = self.path(target);
        match tokio::fs::read(&path).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| Error::SandboxCorrupt {
                path: path.display().to_string(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SandboxDocument::default()),
            Err(source) => Err(Error::SandboxIo {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes a target's document atomically (write a temporary file, then rename).
    pub async fn store(&self, target: &Target, doc: &SandboxDocument) -> Result<(), Error> {
        let path = self.path(target);
        let io = |source| Error::SandboxIo {
            path: path.display().to_string(),
            source,
        };
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let bytes = serde_json::to_vec_pretty(doc).map_err(|e| Error::Invalid(e.to_string()))?;
        write_atomically(path.clone(), tmp, bytes).await.map_err(io)
    }

    /// Changes a target's document under its lock.
    pub async fn modify<R>(
        &self,
        target: &Target,
        f: impl FnOnce(&mut SandboxDocument) -> R,
    ) -> Result<R, Error> {
        let path = self.path(target);
        let lock = self.lock_for(&path);
        let _guard = lock.lock().await;
        let _file = self.lock_file(&path).await?;
        let mut doc = self.load(target).await?;
        let r = f(&mut doc);
        self.store(target, &doc).await?;
        Ok(r)
    }
}

/// Keeps tenant and environment ids from escaping the sandbox directory.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned()
}

/// The sandbox knows a program version when it looks like a Git commit (7–40 hex digits);
/// anything else is "not found", the way a real runner fails to check it out.
fn program_version_exists(v: &str) -> bool {
    (7..=40).contains(&v.len()) && v.chars().all(|c| c.is_ascii_hexdigit())
}

fn outputs(target: &Target, workloads: &[Workload]) -> serde_json::Value {
    let endpoints: BTreeMap<&str, String> = workloads
        .iter()
        .map(|w| {
            (
                w.name.as_str(),
                format!(
                    "https://{}.{}.sandbox.internal",
                    w.name, target.environment_id
                ),
            )
        })
        .collect();
    let versions: BTreeMap<&str, &str> = workloads
        .iter()
        .map(|w| (w.name.as_str(), w.version.as_str()))
        .collect();
    serde_json::json!({ "endpoints": endpoints, "versions": versions })
}

/// How the sandbox reports a workload it runs: all replicas ready, one endpoint, healthy.
pub fn observed(target: &Target, w: &Workload) -> ObservedWorkload {
    let endpoint = format!(
        "https://{}.{}.sandbox.internal",
        w.name, target.environment_id
    );
    ObservedWorkload::as_declared(w, vec![endpoint])
}

#[async_trait::async_trait]
impl Observer for Sandbox {
    async fn observe(&self, target: &Target) -> Result<Vec<ObservedWorkload>, Error> {
        let mut doc = self.load(target).await?;
        let slow = doc.observe_delay_ms > 0;
        if slow {
            tokio::time::sleep(Duration::from_millis(doc.observe_delay_ms)).await;
        }
        let current = match doc.frozen_observation.take() {
            Some(frozen) if !doc.unreachable => frozen,
            // A slow read reads what runs when it ends.
            _ if slow => self.current(target).await?,
            _ => running(target, doc)?,
        };
        Ok(current.iter().map(|w| observed(target, w)).collect())
    }
}

impl Sandbox {
    /// The workloads the target runs now.
    pub async fn current(&self, target: &Target) -> Result<Vec<Workload>, Error> {
        running(target, self.load(target).await?)
    }
}

/// The workloads a target's document says run; an unreachable target's cannot be read.
fn running(target: &Target, doc: SandboxDocument) -> Result<Vec<Workload>, Error> {
    if doc.unreachable {
        return Err(Error::Unreachable(format!(
            "sandbox {}",
            target.environment_id
        )));
    }
    Ok(doc.workloads)
}

#[async_trait::async_trait]
impl Runner for Sandbox {
    async fn plan(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<Plan, Error> {
        if !program_version_exists(&spec.program_version) {
            return Err(Error::PlanInvalid(format!(
                "program version `{}` of `{}` not found",
                spec.program_version, spec.program_ref
            )));
        }
        let current = self.current(target).await?;
        let receipt = PlanReceipt {
            changes: diff(&spec.workloads, &current),
            inputs_hash: inputs_hash(spec, &current),
            program_version: spec.program_version.clone(),
            cost: None,
            posture: Vec::new(),
        };
        let c = &receipt.changes;
        log.line(format!(
            "sandbox plan of {}/{} at {}: {} to add, {} to change, {} to delete ({})",
            target.tenant_id,
            target.environment_id,
            spec.program_version,
            c.adds.len(),
            c.changes.len(),
            c.deletes.len(),
            receipt.inputs_hash
        ));
        Ok(receipt.into())
    }

    async fn apply(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        log.line(format!(
            "sandbox apply of run {run_id} (plan {}) to {}/{}",
            plan.inputs_hash, target.tenant_id, target.environment_id
        ));
        let started = Instant::now();
        // When the apply was asked for, before it waits for the document's locks: two applies
        // asked for at once show as overlapping in the log even though the locks serialise
        // their writes.
        let started_at = chrono::Utc::now();
        let path = self.path(target);
        let lock = self.lock_for(&path);
        let _guard = lock.lock().await;
        let _file = self.lock_file(&path).await?;
        let mut doc = self.load(target).await?;
        if let Some(receipt) = doc.applied_runs.get(run_id) {
            return match receipt.result {
                ApplyResult::Succeeded => Ok(receipt.clone()),
                ApplyResult::Failed => Err(Error::ApplyFailed(
                    receipt.reason.clone().unwrap_or_default(),
                )),
            };
        }
        if doc.unreachable {
            return Err(Error::Unreachable(format!(
                "sandbox {}",
                target.environment_id
            )));
        }
        let failure = if let Some(reason) = doc.fail_next_apply.take() {
            Some(reason)
        } else if inputs_hash(spec, &doc.workloads) != plan.inputs_hash {
            Some("target changed since the plan was recorded; plan again".to_owned())
        } else {
            None
        };
        // The simulated work. Nothing is written until it is done, so a worker killed here
        // leaves the target as it was and the retried apply converges it once.
        tokio::time::sleep(Duration::from_millis(doc.apply_delay_ms)).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let receipt = match failure {
            Some(reason) => ApplyReceipt {
                outputs: serde_json::Value::Null,
                duration_ms,
                result: ApplyResult::Failed,
                runner_version: RUNNER_VERSION.to_owned(),
                reason: Some(reason),
            },
            None => {
                doc.workloads = spec.workloads.clone();
                ApplyReceipt {
                    outputs: outputs(target, &doc.workloads),
                    duration_ms,
                    result: ApplyResult::Succeeded,
                    runner_version: RUNNER_VERSION.to_owned(),
                    reason: None,
                }
            }
        };
        doc.applied_runs.insert(run_id.to_owned(), receipt.clone());
        doc.apply_log.push(ApplyLogEntry {
            run_id: run_id.to_owned(),
            started_at,
            finished_at: chrono::Utc::now(),
        });
        self.store(target, &doc).await?;
        match receipt.result {
            ApplyResult::Succeeded => Ok(receipt),
            ApplyResult::Failed => Err(Error::ApplyFailed(receipt.reason.unwrap_or_default())),
        }
    }

    /// The plan of a specification that declares nothing: every workload deleted.
    async fn plan_destroy(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<PlanReceipt, Error> {
        Ok(self.plan(target, &nothing(spec), log).await?.receipt)
    }

    /// Removes every workload, as the plan of [`Runner::plan_destroy`] said; the document
    /// stays, with the run's receipt (a retried destroy answers with it).
    async fn destroy(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        self.apply(run_id, target, &nothing(spec), plan, log).await
    }
}

/// `spec` declaring no workloads: what a decommission converges the sandbox to.
fn nothing(spec: &SpecificationSnapshot) -> SpecificationSnapshot {
    SpecificationSnapshot {
        workloads: Vec::new(),
        ..spec.clone()
    }
}

/// Writes `bytes` to `path` whole or not at all: into `beside` (in the same directory), then
/// renamed over `path`, creating the directory first. One trip to Tokio's blocking threads for
/// the three (`tokio::fs` makes each its own: a hand-off to a thread and back, three times).
async fn write_atomically(path: PathBuf, beside: PathBuf, bytes: Vec<u8>) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&beside, bytes)?;
        std::fs::rename(&beside, &path)
    })
    .await
    .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(version: &str) -> SpecificationSnapshot {
        SpecificationSnapshot {
            specification_id: "spec".into(),
            version: 1,
            program_ref: "git://infra".into(),
            program_version: "abcdef1".into(),
            config_refs: Default::default(),
            secret_refs: Default::default(),
            workloads: vec![Workload {
                name: "api".into(),
                kind: "deployment".into(),
                version: version.into(),
                replicas: 2,
                config_refs: Default::default(),
                secret_refs: Default::default(),
            }],
        }
    }

    fn target() -> Target {
        Target {
            tenant_id: "acme".into(),
            environment_id: "dev".into(),
            limits: None,
        }
    }

    #[tokio::test]
    async fn apply_converges_once_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(dir.path());
        let plan = sandbox
            .plan(&target(), &spec("1.0"), &StepLog::default())
            .await
            .unwrap()
            .receipt;
        assert_eq!(plan.changes.adds.len(), 1);
        let first = sandbox
            .apply("run-1", &target(), &spec("1.0"), &plan, &StepLog::default())
            .await
            .unwrap();
        // The same run again returns the recorded receipt and changes nothing.
        let again = sandbox
            .apply("run-1", &target(), &spec("1.0"), &plan, &StepLog::default())
            .await
            .unwrap();
        assert_eq!(first, again);
        let doc = sandbox.load(&target()).await.unwrap();
        assert_eq!(doc.applied_runs.len(), 1);
        assert_eq!(doc.workloads, spec("1.0").workloads);
        assert!(
            sandbox
                .plan(&target(), &spec("1.0"), &StepLog::default())
                .await
                .unwrap()
                .receipt
                .changes
                .is_empty()
        );
    }

    /// Two processes on one document (two workers, or a worker and the CLI; here two
    /// adapters, each with its own in-process locks): an edit made while an apply runs waits
    /// for it, and neither undoes the other.
    #[tokio::test]
    async fn an_edit_from_another_process_never_undoes_an_apply() {
        let dir = tempfile::tempdir().unwrap();
        let worker = Sandbox::new(dir.path());
        let cli = Sandbox::new(dir.path());
        cli.modify(&target(), |d| d.apply_delay_ms = 300)
            .await
            .unwrap();
        let plan = worker
            .plan(&target(), &spec("1.0"), &StepLog::default())
            .await
            .unwrap()
            .receipt;
        let (target, spec, log) = (target(), spec("1.0"), StepLog::default());
        let apply = worker.apply("run-1", &target, &spec, &plan, &log);
        let edit = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cli.modify(&target, |d| d.observe_delay_ms = 7).await
        };
        let (applied, edited) = tokio::join!(apply, edit);
        applied.unwrap();
        edited.unwrap();
        let doc = worker.load(&target).await.unwrap();
        assert_eq!(doc.apply_log.len(), 1, "the apply is recorded");
        assert!(doc.applied_runs.contains_key("run-1"));
        assert_eq!(doc.observe_delay_ms, 7, "the edit is kept");
    }

    #[tokio::test]
    async fn apply_refuses_a_plan_whose_target_moved() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(dir.path());
        let stale = sandbox
            .plan(&target(), &spec("1.0"), &StepLog::default())
            .await
            .unwrap()
            .receipt;
        let fresh = sandbox
            .plan(&target(), &spec("1.0"), &StepLog::default())
            .await
            .unwrap()
            .receipt;
        sandbox
            .apply(
                "run-1",
                &target(),
                &spec("1.0"),
                &fresh,
                &StepLog::default(),
            )
            .await
            .unwrap();
        let err = sandbox
            .apply(
                "run-2",
                &target(),
                &spec("1.0"),
                &stale,
                &StepLog::default(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::ApplyFailed(ref m) if m.contains("changed since the plan")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn armed_failure_fails_one_apply_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(dir.path());
        sandbox
            .modify(&target(), |d| {
                d.fail_next_apply = Some("deployment/api: quota".into())
            })
            .await
            .unwrap();
        let plan = sandbox
            .plan(&target(), &spec("1.0"), &StepLog::default())
            .await
            .unwrap()
            .receipt;
        let err = sandbox
            .apply("run-1", &target(), &spec("1.0"), &plan, &StepLog::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::ApplyFailed(ref m) if m == "deployment/api: quota"));
        let doc = sandbox.load(&target()).await.unwrap();
        assert!(doc.workloads.is_empty() && doc.fail_next_apply.is_none());
        // The next run applies.
        let plan = sandbox
            .plan(&target(), &spec("1.0"), &StepLog::default())
            .await
            .unwrap()
            .receipt;
        sandbox
            .apply("run-2", &target(), &spec("1.0"), &plan, &StepLog::default())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn unknown_program_version_is_an_invalid_plan() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec("1.0");
        s.program_version = "main".into();
        let err = Sandbox::new(dir.path())
            .plan(&target(), &s, &StepLog::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::PlanInvalid(ref m) if m.contains("`main`")));
    }

    #[test]
    fn ids_cannot_escape_the_sandbox_directory() {
        assert_eq!(sanitize("../../etc"), "_.._etc");
        assert!(!sanitize("..").starts_with('.'));
    }
}
