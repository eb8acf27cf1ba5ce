//! The Pulumi adapter of the Runner port: drives the `pulumi` CLI as a process, the way
//! Pulumi's Automation API does, against the stack an environment's target names.
//!
//! Plan: the program is exported at its commit ([`crate::programs`]) and previewed with
//! `pulumi preview --json --diff --save-plan <file>`; the preview's steps become the plan
//! receipt. Apply (`pulumi up --plan`) is not built yet: an apply on a Pulumi environment
//! fails with that reason and changes nothing.

use crate::Error;
use crate::ports::{Runner, Target};
use crate::programs::{ProgramRef, Programs};
use runtime_cloud_models::plan::{PlanChanges, WorkloadChange};
use runtime_cloud_models::targets::{PulumiStack, RunnerTarget};
use runtime_cloud_models::{ApplyReceipt, PlanReceipt, SpecificationSnapshot};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

/// The oldest Pulumi major version the adapter drives (update plans need 3.x).
const SUPPORTED_MAJOR: u64 = 3;

/// Plans Pulumi stacks.
#[derive(Debug, Clone)]
pub struct Pulumi {
    db: sea_orm::DatabaseConnection,
    /// The CLI (`pulumi` on the worker's PATH by default).
    binary: PathBuf,
    programs: Programs,
    /// Plan files, one per plan.
    plans: PathBuf,
}

impl Pulumi {
    /// The adapter of a worker whose data lives in `data_dir`, running `binary`.
    pub fn new(db: sea_orm::DatabaseConnection, data_dir: &Path, binary: PathBuf) -> Self {
        Self {
            db,
            binary,
            programs: Programs::new(data_dir),
            plans: data_dir.join("pulumi").join("plans"),
        }
    }

    /// The stack the environment's target names.
    async fn stack(&self, target: &Target) -> Result<PulumiStack, Error> {
        let env = runtime_cloud_store::environments::find(
            &self.db,
            &target.tenant_id,
            &target.environment_id,
        )
        .await?;
        match env.map(|e| e.target.runner) {
            Some(RunnerTarget::Pulumi(stack)) => Ok(stack),
            _ => Err(Error::PlanInvalid(format!(
                "environment `{}` has no Pulumi stack as its runner",
                target.environment_id
            ))),
        }
    }

    /// `pulumi version`: the CLI must be there and of a supported major version.
    async fn version(&self) -> Result<String, Error> {
        let out = Command::new(&self.binary)
            .arg("version")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| {
                Error::PlanInvalid(format!(
                    "the Pulumi CLI `{}` cannot be run on this worker ({e}); install Pulumi {SUPPORTED_MAJOR}.x on the worker's PATH",
                    self.binary.display()
                ))
            })?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let major = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse::<u64>().ok());
        match major {
            Some(m) if out.status.success() && m >= SUPPORTED_MAJOR => Ok(version),
            _ => Err(Error::PlanInvalid(format!(
                "the Pulumi CLI `{}` reports version `{version}`; the runner needs {SUPPORTED_MAJOR}.x or later",
                self.binary.display()
            ))),
        }
    }

    /// Runs `pulumi args…` for `stack` in `dir`; its stdout, or the failure with its stderr.
    async fn run(&self, stack: &PulumiStack, dir: &Path, args: &[&str]) -> Result<String, Error> {
        let out = Command::new(&self.binary)
            .args(args)
            .args(["--stack", &stack.stack, "--non-interactive"])
            .current_dir(dir)
            .env("PULUMI_BACKEND_URL", &stack.backend_url)
            .env("PULUMI_SKIP_UPDATE_CHECK", "true")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| Error::Unreachable(format!("running pulumi: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(Error::Unreachable(format!(
                "pulumi {} failed: {}",
                args.first().copied().unwrap_or_default(),
                stderr.trim()
            )))
        }
    }
}

#[async_trait::async_trait]
impl Runner for Pulumi {
    async fn plan(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
    ) -> Result<PlanReceipt, Error> {
        let stack = self.stack(target).await?;
        self.version().await?;
        if stack.passphrase_ref.is_some() {
            return Err(Error::PlanInvalid(
                "passphraseRef is not resolved yet (the SecretBroker port comes next); use a \
                 stack without a passphrase secrets provider"
                    .into(),
            ));
        }
        let program = ProgramRef::parse(&spec.program_ref)?;
        let name = format!("{}-plan-{}", target.environment_id, uuid::Uuid::now_v7());
        let checkout = self
            .programs
            .checkout(&program, &spec.program_version, &name)
            .await?;
        tokio::fs::create_dir_all(&self.plans)
            .await
            .map_err(|e| Error::Unreachable(format!("creating {}: {e}", self.plans.display())))?;
        let plan_file = self.plans.join(format!("{name}.json"));
        let plan_arg = plan_file.display().to_string();
        let preview = self
            .run(
                &stack,
                &checkout.program_dir,
                &["preview", "--json", "--diff", "--save-plan", &plan_arg],
            )
            .await;
        checkout.remove().await;
        let digest: PreviewDigest = serde_json::from_str(&preview?)
            .map_err(|e| Error::Unreachable(format!("reading pulumi preview --json: {e}")))?;
        Ok(digest.receipt(spec))
    }

    async fn apply(
        &self,
        _run_id: &str,
        _target: &Target,
        _spec: &SpecificationSnapshot,
        _plan: &PlanReceipt,
    ) -> Result<ApplyReceipt, Error> {
        Err(Error::ApplyFailed(
            "applying Pulumi stacks is not built yet; nothing was changed".into(),
        ))
    }
}

/// `pulumi preview --json`: the fields the receipt needs (`pkg/backend/display/json.go`,
/// `previewDigest`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewDigest {
    #[serde(default)]
    pub steps: Vec<PreviewStep>,
    #[serde(default)]
    pub change_summary: BTreeMap<String, u64>,
}

/// One step of a preview.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewStep {
    pub op: String,
    pub urn: String,
    #[serde(default)]
    pub diff_reasons: Vec<String>,
    #[serde(default)]
    pub detailed_diff: Option<BTreeMap<String, serde_json::Value>>,
}

impl PreviewStep {
    /// `urn:pulumi:stack::project::type::name` → (type, name).
    fn type_and_name(&self) -> (String, String) {
        let mut parts = self.urn.rsplitn(2, "::");
        let name = parts.next().unwrap_or_default().to_owned();
        let ty = parts
            .next()
            .and_then(|rest| rest.rsplit("::").next())
            .unwrap_or_default()
            .to_owned();
        (ty, name)
    }

    /// The property paths that differ: the detailed diff's keys, else the diff reasons.
    fn fields(&self) -> Vec<String> {
        match &self.detailed_diff {
            Some(d) if !d.is_empty() => d.keys().cloned().collect(),
            _ => self.diff_reasons.clone(),
        }
    }
}

impl PreviewDigest {
    /// The plan receipt: creates are adds, updates and replaces are changes, deletes are
    /// deletes (a replace shows as a change of its fields; it also deletes, so it counts as
    /// destructive through `deletes` when Pulumi deletes the old resource first). The inputs
    /// hash covers the program commit and the preview's steps.
    pub fn receipt(&self, spec: &SpecificationSnapshot) -> PlanReceipt {
        let mut changes = PlanChanges::default();
        for step in &self.steps {
            let (kind, name) = step.type_and_name();
            let change = |fields| WorkloadChange {
                name: name.clone(),
                kind: kind.clone(),
                fields,
            };
            match step.op.as_str() {
                "create" => changes.adds.push(change(Vec::new())),
                "update" | "replace" | "create-replacement" => {
                    changes.changes.push(change(step.fields()))
                }
                "delete" | "delete-replaced" => changes.deletes.push(change(Vec::new())),
                _ => {}
            }
        }
        let mut hash = Sha256::new();
        hash.update(spec.program_ref.as_bytes());
        hash.update(spec.program_version.as_bytes());
        for step in &self.steps {
            hash.update(step.op.as_bytes());
            hash.update(step.urn.as_bytes());
            for f in step.fields() {
                hash.update(f.as_bytes());
            }
        }
        PlanReceipt {
            changes,
            inputs_hash: format!("sha256:{}", hex::encode(hash.finalize())),
            program_version: spec.program_version.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SpecificationSnapshot {
        serde_json::from_value(serde_json::json!({
            "specificationId": "s1", "version": 1, "kind": "environment",
            "programRef": "file:///srv/infra//shop", "programVersion": "a1b2c3d4",
            "configRefs": {}, "secretRefs": {}, "workloads": []
        }))
        .unwrap()
    }

    /// The shape of `pulumi preview --json` (`previewDigest` in `pkg/backend/display/json.go`):
    /// steps with `op`, `urn`, `diffReasons` and a `detailedDiff` that is null for sames.
    const PREVIEW: &str = r#"{
        "config": {},
        "steps": [
            {"op": "same", "urn": "urn:pulumi:dev::shop::pulumi:pulumi:Stack::shop-dev",
             "detailedDiff": null},
            {"op": "create", "urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs",
             "detailedDiff": null},
            {"op": "update", "urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs",
             "diffReasons": ["tags"],
             "detailedDiff": {"tags": {"kind": "update", "inputDiff": true},
                              "tags.env": {"kind": "add", "inputDiff": true}}},
            {"op": "replace", "urn": "urn:pulumi:dev::shop::kubernetes:apps/v1:Deployment::api",
             "diffReasons": ["spec"], "replaceReasons": ["spec"], "detailedDiff": {}},
            {"op": "delete", "urn": "urn:pulumi:dev::shop::aws:sqs/queue:Queue::old"}
        ],
        "duration": 1520000000,
        "changeSummary": {"create": 1, "update": 1, "replace": 1, "delete": 1, "same": 1}
    }"#;

    #[test]
    fn a_preview_becomes_a_plan_receipt_of_adds_changes_and_deletes() {
        let digest: PreviewDigest = serde_json::from_str(PREVIEW).unwrap();
        assert_eq!(digest.change_summary["create"], 1);
        let receipt = digest.receipt(&spec());
        let names = |c: &[WorkloadChange]| c.iter().map(|w| w.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&receipt.changes.adds), ["logs"]);
        assert_eq!(receipt.changes.adds[0].kind, "aws:s3/bucket:Bucket");
        assert_eq!(names(&receipt.changes.changes), ["docs", "api"]);
        assert_eq!(receipt.changes.changes[0].fields, ["tags", "tags.env"]);
        assert_eq!(
            receipt.changes.changes[1].fields,
            ["spec"],
            "diff reasons without a detailed diff"
        );
        assert_eq!(names(&receipt.changes.deletes), ["old"]);
        assert!(receipt.changes.is_destructive());
        assert_eq!(receipt.program_version, "a1b2c3d4");
        // The same preview of the same commit hashes the same; another commit does not.
        assert_eq!(digest.receipt(&spec()).inputs_hash, receipt.inputs_hash);
        let mut other = spec();
        other.program_version = "ffff".into();
        assert_ne!(digest.receipt(&other).inputs_hash, receipt.inputs_hash);
    }
}
