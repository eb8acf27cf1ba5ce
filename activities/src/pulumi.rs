//! The Pulumi adapter of the Runner port: drives the `pulumi` CLI as a process, the way
//! Pulumi's Automation API does, against the stack an environment's target names.
//!
//! - **Plan**: the program is exported at its commit ([`crate::programs`]), the stack selected
//!   (`pulumi stack select --create`), and previewed with
//!   `pulumi preview --refresh --json --diff --save-plan <file>`. `--refresh` reads the cloud
//!   first: without it Pulumi diffs the program against its own state only, and a change made
//!   out of band (`kubectl scale`, a bucket's ACL edited in the console) would never be
//!   planned back, so drift would never be reconciled. The preview's steps become the plan
//!   receipt; the plan file is kept under `{data_dir}/pulumi/plans/`, named by the receipt's
//!   inputs hash, for the apply.
//! - **Apply**: `pulumi up --yes --skip-preview --refresh --plan <file> --json --message <tag>`:
//!   Pulumi refuses any operation the approved plan did not show (a cloud that moved again
//!   since the plan fails the apply rather than applying something unreviewed).
//!   Kubernetes resources are applied server-side with ownership taken back from whoever
//!   changed them (`PULUMI_K8S_ENABLE_PATCH_FORCE`), creates included
//!   (`PULUMI_K8S_UPSERT_EXISTING_OBJECTS`); a program that sets the annotation
//!   `pulumi.com/patchFieldManager: runtime-cloud` makes them recognisable as the product's. The engine events name a failing
//!   resource; the outputs come from `pulumi stack output --json` (secret outputs stay
//!   `[secret]`). The update is tagged with the run id, and a retried apply first reads
//!   `pulumi stack history --json`: an update of this run that finished is answered with its
//!   receipt instead of applying again.

mod adoption;
mod state;

pub use adoption::GeneratedAdoption;
pub use state::state_resources;

use crate::Error;
use crate::ports::Artifacts;
use crate::ports::{Plan, Runner, Target};
use crate::programs::{GitCredential, ProgramRef, Programs};
use crate::references::{ConfigPlatform, SecretBroker, resolve_all};
use crate::step_log::StepLog;
use runtime_cloud_models::artifacts;
use runtime_cloud_models::capacity::ProcessLimits;
use runtime_cloud_models::observation::{DriftedResource, ResourceChange};
use runtime_cloud_models::plan::{PlanChanges, WorkloadChange};
use runtime_cloud_models::posture::{PlannedResource, StateResource};
use runtime_cloud_models::targets::{PulumiStack, RunnerTarget};
use runtime_cloud_models::{ApplyReceipt, PlanReceipt, SpecificationSnapshot};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use tokio::process::Command;

/// The oldest Pulumi major version the adapter drives (update plans need 3.x).
const SUPPORTED_MAJOR: u64 = 3;
/// util-linux's `setpriv`, which Debian always has.
const SETPRIV: &str = "/usr/bin/setpriv";
/// util-linux `prlimit`, which runs a command under resource limits.
const PRLIMIT: &str = "/usr/bin/prlimit";
/// util-linux `taskset`, which runs a command on a set of CPUs.
const TASKSET: &str = "/usr/bin/taskset";

/// Plans Pulumi stacks.
#[derive(Clone)]
pub struct Pulumi {
    db: sea_orm::DatabaseConnection,
    /// Resolves `secretRefs` at plan and apply time.
    secrets: Arc<dyn SecretBroker>,
    /// Resolves `configRefs` at plan and apply time.
    config: Arc<dyn ConfigPlatform>,
    /// The CLI (`pulumi` on the worker's PATH by default).
    binary: PathBuf,
    programs: Programs,
    /// Where the CLI writes a plan file before it is kept, and runs `pulumi cancel`.
    scratch: PathBuf,
    /// Keeps plan files (the apply of another worker reads them) beside the run logs.
    artifacts: Artifacts,
}

impl Pulumi {
    /// The adapter of a worker whose data lives in `data_dir`, running `binary`.
    pub fn new(
        db: sea_orm::DatabaseConnection,
        data_dir: &Path,
        binary: PathBuf,
        secrets: Arc<dyn SecretBroker>,
        config: Arc<dyn ConfigPlatform>,
        artifacts: Artifacts,
    ) -> Self {
        Self {
            db,
            secrets,
            config,
            binary,
            programs: Programs::new(data_dir),
            scratch: data_dir.join("pulumi").join("scratch"),
            artifacts,
        }
    }

    /// The stack the environment's target names, with its passphrase resolved (the
    /// SecretBroker) when the target names one.
    async fn stack<'a>(&self, target: &Target, log: &'a StepLog) -> Result<CliStack<'a>, Error> {
        let stack = match crate::ports::target_of(&self.db, target).await?.runner {
            RunnerTarget::Pulumi(stack) => stack,
            RunnerTarget::Sandbox => {
                return Err(Error::PlanInvalid(format!(
                    "environment `{}` has no Pulumi stack as its runner",
                    target.environment_id
                )));
            }
        };
        let passphrase = self
            .resolve_secret("passphraseRef", &stack.passphrase_ref, log)
            .await?;
        let repository_credential = self
            .resolve_secret(
                "repositoryCredentialRef",
                &stack.repository_credential_ref,
                log,
            )
            .await?
            .map(|c| GitCredential::from_secret(c.expose()));
        Ok(CliStack {
            stack,
            passphrase,
            repository_credential,
            limits: target.limits,
            log,
        })
    }

    /// The target's secret named by `field`, when it names one, registered with the log so
    /// its value is never kept; a reference that does not resolve fails the plan naming it.
    async fn resolve_secret(
        &self,
        field: &str,
        reference: &Option<String>,
        log: &StepLog,
    ) -> Result<Option<crate::references::Resolved>, Error> {
        let Some(r) = reference else {
            return Ok(None);
        };
        let value = self.secrets.resolve(r).await.map_err(|e| match e {
            Error::PlanInvalid(why) => Error::PlanInvalid(format!("{field}: {why}")),
            other => other,
        })?;
        log.redact(&value);
        Ok(Some(value))
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

    /// The CLI as a child that dies with this worker (util-linux `setpriv --pdeathsig`, where
    /// there is one): a worker killed mid-apply must not leave an update running that the
    /// retried apply on another worker would race. The stack lock it leaves is what
    /// [`Runner::apply`] cancels first.
    ///
    /// With `limits`, the CLI and everything it starts (language host, providers) run on at
    /// most `cpus` CPUs (util-linux `taskset`) and each may allocate at most `memory_bytes` of
    /// data segment (`prlimit --data`, RLIMIT_DATA: heap and writable private mappings, not the
    /// address space a Go or V8 runtime reserves). Both are inherited across fork and exec. A
    /// group limit would need a delegated cgroup, which an unprivileged worker does not have.
    fn command(&self, limits: Option<ProcessLimits>) -> Command {
        // Each wrapper runs the next as its command: `setpriv … -- prlimit … -- taskset … pulumi`
        // (`taskset` takes its CPU list as its first operand, so no `--` after it).
        let mut wrappers: Vec<String> = Vec::new();
        if Path::new(SETPRIV).exists() {
            wrappers.extend([SETPRIV, "--pdeathsig", "KILL", "--"].map(String::from));
        }
        let limiters = Path::new(PRLIMIT).exists() && Path::new(TASKSET).exists();
        if limits.is_some() && !limiters {
            tracing::warn!(
                "util-linux prlimit/taskset missing: the quota's CPU and memory limits are not enforced"
            );
        }
        if let Some(limits) = limits.filter(|_| limiters) {
            let last_cpu = limits.cpus.saturating_sub(1);
            wrappers.extend([
                PRLIMIT.to_owned(),
                format!("--data={}", limits.memory_bytes),
                "--".to_owned(),
                TASKSET.to_owned(),
                "--cpu-list".to_owned(),
                format!("0-{last_cpu}"),
            ]);
        }
        let mut parts = wrappers.into_iter();
        match parts.next() {
            None => Command::new(&self.binary),
            Some(first) => {
                let mut cmd = Command::new(first);
                cmd.args(parts).arg(&self.binary);
                cmd
            }
        }
    }

    /// `pulumi args… --stack <stack> --non-interactive` in `dir`, against the target's backend,
    /// with the passphrase (when there is one) in the child's environment only.
    fn cli(&self, stack: &CliStack<'_>, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = self.command(stack.limits);
        cmd.args(args)
            .args(["--stack", &stack.stack.stack, "--non-interactive"])
            .current_dir(dir)
            .env("PULUMI_BACKEND_URL", &stack.stack.backend_url)
            .env("PULUMI_SKIP_UPDATE_CHECK", "true")
            .env("PULUMI_EXPERIMENTAL", "true")
            // A reconciliation must win over the out-of-band change it reverts: the Kubernetes
            // provider forces server-side apply conflicts, and applies creates the same way.
            .env("PULUMI_K8S_ENABLE_PATCH_FORCE", "true")
            .env("PULUMI_K8S_UPSERT_EXISTING_OBJECTS", "true")
            .kill_on_drop(true);
        if let Some(p) = &stack.passphrase {
            cmd.env("PULUMI_CONFIG_PASSPHRASE", p.expose());
        }
        cmd
    }

    /// Runs `pulumi args…` for `stack` in `dir`: its exit status and stdout. Only a CLI that
    /// cannot be started is an error here; what a failed command means is the caller's.
    async fn exec(&self, stack: &CliStack<'_>, dir: &Path, args: &[&str]) -> Result<Output, Error> {
        let out = self
            .cli(stack, dir, args)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| Error::Unreachable(format!("running pulumi: {e}")))?;
        Ok(Output::logged(stack.log, args, out))
    }

    /// Sets the spec's configuration and secrets on the stack for the commands that follow in
    /// `dir`: each value goes to `pulumi config set [--secret] <key>` on stdin, never in an
    /// argument (which `ps` shows) or a log line, into the stack's config file of this step's
    /// working tree, which is removed with it. Returns the fingerprint the inputs hash covers:
    /// a digest of every key and a digest of its value, never a value.
    async fn configure(
        &self,
        stack: &CliStack<'_>,
        dir: &Path,
        spec: &SpecificationSnapshot,
    ) -> Result<String, Error> {
        let config = resolve_all(&spec.config_refs, |r| self.config.resolve_owned(r)).await?;
        let secrets = resolve_all(&spec.secret_refs, |r| self.secrets.resolve_owned(r)).await?;
        let mut fingerprint = Sha256::new();
        for (secret, values) in [(false, &config), (true, &secrets)] {
            for (key, value) in values {
                if secret {
                    stack.log.redact(value);
                }
                let mut args = vec!["config", "set"];
                if secret {
                    args.push("--secret");
                }
                args.push(key);
                let out = self
                    .exec_with_input(stack, dir, &args, value.expose())
                    .await?;
                if !out.ok {
                    return Err(Error::Unreachable(format!(
                        "pulumi config set {key} failed: {}",
                        out.stderr
                    )));
                }
                fingerprint.update(key.as_bytes());
                fingerprint.update(Sha256::digest(value.expose().as_bytes()));
            }
        }
        Ok(hex::encode(fingerprint.finalize()))
    }

    /// [`Self::exec`] with `input` on the CLI's stdin.
    async fn exec_with_input(
        &self,
        stack: &CliStack<'_>,
        dir: &Path,
        args: &[&str],
        input: &str,
    ) -> Result<Output, Error> {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .cli(stack, dir, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Unreachable(format!("running pulumi: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .await
                .map_err(|e| Error::Unreachable(format!("writing to pulumi: {e}")))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| Error::Unreachable(format!("running pulumi: {e}")))?;
        Ok(Output::logged(stack.log, args, out))
    }

    /// [`Self::exec`] of a command that prints engine events (`pulumi up --json`), read as
    /// they come: each finished resource moves the step's progress toward `total`, which the
    /// activity's heartbeat reports while the update runs.
    async fn exec_events(
        &self,
        stack: &CliStack<'_>,
        dir: &Path,
        args: &[&str],
        total: u64,
    ) -> Result<Output, Error> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
        let unstartable = |e: std::io::Error| Error::Unreachable(format!("running pulumi: {e}"));
        let mut child = self
            .cli(stack, dir, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(unstartable)?;
        let mut stderr = child.stderr.take();
        // Read stderr alongside: a CLI blocked on a full stderr pipe would never finish stdout.
        let stderr = tokio::spawn(async move {
            let mut text = Vec::new();
            if let Some(err) = stderr.as_mut() {
                let _ = err.read_to_end(&mut text).await;
            }
            text
        });
        let mut stdout = Vec::new();
        let mut done = 0;
        stack.log.progress(done, total);
        if let Some(out) = child.stdout.take() {
            let mut lines = BufReader::new(out).lines();
            while let Some(line) = lines.next_line().await.map_err(unstartable)? {
                if finishes_a_resource(&line) {
                    done += 1;
                    stack.log.progress(done, total.max(done));
                }
                stdout.extend_from_slice(line.as_bytes());
                stdout.push(b'\n');
            }
        }
        let status = child.wait().await.map_err(unstartable)?;
        let stderr = stderr.await.unwrap_or_default();
        Ok(Output::logged(
            stack.log,
            args,
            std::process::Output {
                status,
                stdout,
                stderr,
            },
        ))
    }

    /// [`Self::exec`] that must succeed; a failure is retried (the backend may come back).
    async fn run(&self, stack: &CliStack<'_>, dir: &Path, args: &[&str]) -> Result<String, Error> {
        let out = self.exec(stack, dir, args).await?;
        if out.ok {
            Ok(out.stdout)
        } else {
            Err(Error::Unreachable(format!(
                "pulumi {} failed: {}",
                args.first().copied().unwrap_or_default(),
                out.stderr
            )))
        }
    }

    /// The plan file of a receipt.
    fn plan_key(target: &Target, inputs_hash: &str) -> String {
        artifacts::pulumi_plan(
            &target.tenant_id,
            &target.environment_id,
            inputs_hash.trim_start_matches("sha256:"),
        )
    }

    /// The scratch directory, created.
    async fn scratch(&self) -> Result<&Path, Error> {
        tokio::fs::create_dir_all(&self.scratch)
            .await
            .map_err(|e| Error::Unreachable(format!("creating {}: {e}", self.scratch.display())))?;
        Ok(&self.scratch)
    }

    /// The stack's updates, newest first, and the one tagged with `tag` if any.
    async fn tagged_update(
        &self,
        stack: &CliStack<'_>,
        dir: &Path,
        tag: &str,
    ) -> Result<Option<UpdateInfo>, Error> {
        Ok(self
            .history(stack, dir)
            .await?
            .into_iter()
            .find(|u| matches!(u.kind.as_str(), "update" | "destroy") && u.message == tag))
    }

    /// `pulumi stack history --json`: the stack's updates, newest first.
    async fn history(&self, stack: &CliStack<'_>, dir: &Path) -> Result<Vec<UpdateInfo>, Error> {
        let history = self
            .run(stack, dir, &["stack", "history", "--json"])
            .await?;
        serde_json::from_str(&history)
            .map_err(|e| Error::Unreachable(format!("reading pulumi stack history --json: {e}")))
    }

    /// The stack's outputs; secret ones as Pulumi shows them without `--show-secrets`.
    async fn outputs(&self, stack: &CliStack<'_>, dir: &Path) -> Result<serde_json::Value, Error> {
        let out = self.run(stack, dir, &["stack", "output", "--json"]).await?;
        serde_json::from_str(&out)
            .map_err(|e| Error::Unreachable(format!("reading pulumi stack output --json: {e}")))
    }

    /// A checkout of the spec's program at its commit, for `step`.
    async fn program(
        &self,
        stack: &CliStack<'_>,
        target: &Target,
        spec: &SpecificationSnapshot,
        step: &str,
    ) -> Result<crate::programs::Checkout, Error> {
        let program = ProgramRef::parse(&spec.program_ref)?;
        let name = format!("{}-{step}-{}", target.environment_id, uuid::Uuid::now_v7());
        self.programs
            .checkout(
                &target.tenant_id,
                &program,
                &spec.program_version,
                &name,
                stack.repository_credential.as_ref(),
            )
            .await
    }
}

/// A stack as the CLI runs against it: the target's stack, its resolved passphrase, and the
/// log of the step.
struct CliStack<'a> {
    stack: PulumiStack,
    passphrase: Option<crate::references::Resolved>,
    /// The program repository's credential, for the fetch.
    repository_credential: Option<GitCredential>,
    /// What the OS holds every process of this step to (the project's quota).
    limits: Option<ProcessLimits>,
    /// Every command and its output, for the step's log artifact.
    log: &'a StepLog,
}

/// What a `pulumi` command did.
struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Output {
    /// The output of `pulumi args…`, written to the step's log as it is read.
    fn logged(log: &StepLog, args: &[&str], out: std::process::Output) -> Self {
        let output = Self {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        };
        let heading = format!("pulumi {} ({})", args.join(" "), out.status);
        log.output(&heading, &output.stdout, &output.stderr);
        output
    }
}

/// The tag of a run's update (`--message`), found again in `pulumi stack history`.
fn update_tag(run_id: &str) -> String {
    format!("runtime-cloud run {run_id}")
}

#[async_trait::async_trait]
impl Runner for Pulumi {
    async fn plan(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<Plan, Error> {
        let stack = self.stack(target, log).await?;
        self.version().await?;
        let checkout = self.program(&stack, target, spec, "plan").await?;
        let dir = checkout.program_dir.clone();
        let draft = self
            .scratch()
            .await?
            .join(format!("{}.plan.json", uuid::Uuid::now_v7()));
        let draft_arg = draft.display().to_string();
        let preview = async {
            self.run(&stack, &dir, &["stack", "select", "--create"])
                .await?;
            let fingerprint = self.configure(&stack, &dir, spec).await?;
            let last_update = self
                .history(&stack, &dir)
                .await?
                .first()
                .map(UpdateInfo::identity)
                .unwrap_or_default();
            let out = self
                .run(
                    &stack,
                    &dir,
                    &[
                        "preview",
                        "--refresh",
                        "--json",
                        "--diff",
                        "--save-plan",
                        &draft_arg,
                    ],
                )
                .await?;
            Ok::<_, Error>((out, fingerprint, last_update))
        }
        .await;
        checkout.remove().await;
        let saved = tokio::fs::read(&draft).await;
        let _ = tokio::fs::remove_file(&draft).await;
        let (preview, fingerprint, last_update) = preview?;
        let digest: PreviewDigest = serde_json::from_str(&preview)
            .map_err(|e| Error::Unreachable(format!("reading pulumi preview --json: {e}")))?;
        let receipt = digest.receipt(spec, &fingerprint, &last_update);
        // Kept in the artifact store under the receipt's hash: the apply, on whichever worker,
        // uses the plan that was approved. Pulumi writes secrets into a plan file encrypted by
        // the stack's secrets provider, never in the clear.
        let saved = saved.map_err(|e| {
            Error::Unreachable(format!("reading the plan {}: {e}", draft.display()))
        })?;
        let key = Self::plan_key(target, &receipt.inputs_hash);
        crate::ports::keep(&self.artifacts, &key, saved)
            .await
            .map_err(|e| Error::Unreachable(format!("keeping the plan: {e}")))?;
        Ok(Plan {
            receipt,
            resources: digest.planned(),
        })
    }

    async fn apply(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        let started = std::time::Instant::now();
        let stack = self.stack(target, log).await?;
        let runner_version = self.runner_version().await?;
        let checkout = self.program(&stack, target, spec, "apply").await?;
        let dir = checkout.program_dir.clone();
        let tag = update_tag(run_id);
        let receipt = async {
            // A retry after a lost worker: this run's update already ran (one in progress
            // was cancelled, and the plan is applied again, which refuses whatever the plan
            // no longer allows).
            match self.earlier(&stack, &dir, &tag).await? {
                Some(Earlier::Succeeded) => {
                    let outputs = self.outputs(&stack, &dir).await?;
                    return Ok(receipt(outputs, started, &runner_version, None));
                }
                Some(Earlier::Failed(why)) => {
                    return Ok(receipt(serde_json::Value::Null, started, &runner_version, Some(why)));
                }
                None => {}
            }
            self.configure(&stack, &dir, spec).await?;
            let key = Self::plan_key(target, &plan.inputs_hash);
            let Some(saved) = crate::ports::kept(&self.artifacts, &key)
                .await
                .map_err(|e| Error::Unreachable(format!("reading the plan: {e}")))?
            else {
                return Err(Error::ApplyFailed(format!(
                    "the approved plan {} is not in the artifact store ({key}); nothing was applied",
                    plan.inputs_hash
                )));
            };
            // Beside the program, so it is removed with the working tree.
            let plan_file = checkout.program_dir.join(".runtime-cloud-plan.json");
            tokio::fs::write(&plan_file, saved).await.map_err(|e| {
                Error::Unreachable(format!("writing the plan {}: {e}", plan_file.display()))
            })?;
            let plan_arg = plan_file.display().to_string();
            let up = self
                .exec_events(
                    &stack,
                    &dir,
                    &[
                        "up",
                        "--yes",
                        "--skip-preview",
                        "--refresh",
                        "--plan",
                        &plan_arg,
                        "--json",
                        "--message",
                        &tag,
                    ],
                    plan.changes.count() as u64,
                )
                .await?;
            let events = EngineEvents::read(&up.stdout);
            if up.ok && events.failure().is_none() {
                let outputs = self.outputs(&stack, &dir).await?;
                Ok(receipt(outputs, started, &runner_version, None))
            } else {
                let why = events
                    .failure()
                    .unwrap_or_else(|| format!("pulumi up failed: {}", up.stderr));
                Ok(receipt(
                    serde_json::Value::Null,
                    started,
                    &runner_version,
                    Some(why),
                ))
            }
        }
        .await;
        checkout.remove().await;
        receipt
    }

    async fn abandon(&self, target: &Target, log: &StepLog) -> Result<(), Error> {
        let stack = self.stack(target, log).await?;
        let scratch = self.scratch().await?;
        self.run(&stack, scratch, &["cancel", "--yes"]).await?;
        Ok(())
    }

    /// `pulumi destroy --preview-only`: every resource of the stack deleted.
    async fn plan_destroy(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<PlanReceipt, Error> {
        let stack = self.stack(target, log).await?;
        self.version().await?;
        let checkout = self.program(&stack, target, spec, "plan").await?;
        let receipt = self
            .destroy_preview(&stack, &checkout.program_dir, spec)
            .await;
        checkout.remove().await;
        receipt
    }

    /// `pulumi destroy`. It takes no saved plan, so the destruction is previewed again first
    /// and refused when that preview's inputs hash is not the plan's (the stack, its program,
    /// its config or its cloud moved since); a retry after a lost worker finds its destroy in
    /// the stack's history by its tag, as an apply does.
    async fn destroy(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        let started = std::time::Instant::now();
        let stack = self.stack(target, log).await?;
        let runner_version = self.runner_version().await?;
        let checkout = self.program(&stack, target, spec, "apply").await?;
        let dir = checkout.program_dir.clone();
        let tag = update_tag(run_id);
        let receipt = async {
            // A retry after a lost worker, as the apply's: what is left is destroyed.
            match self.earlier(&stack, &dir, &tag).await? {
                Some(Earlier::Succeeded) => {
                    return Ok(receipt(
                        serde_json::json!({}),
                        started,
                        &runner_version,
                        None,
                    ));
                }
                Some(Earlier::Failed(why)) => {
                    return Ok(receipt(
                        serde_json::Value::Null,
                        started,
                        &runner_version,
                        Some(why),
                    ));
                }
                None => {}
            }
            let now = self.destroy_preview(&stack, &dir, spec).await?;
            if now.inputs_hash != plan.inputs_hash {
                let why = "the stack changed since the decommission was planned; plan again";
                return Ok(receipt(
                    serde_json::Value::Null,
                    started,
                    &runner_version,
                    Some(why.into()),
                ));
            }
            let args = [
                "destroy",
                "--yes",
                "--skip-preview",
                "--refresh",
                "--json",
                "--message",
                &tag,
            ];
            let destroyed = self
                .exec_events(&stack, &dir, &args, plan.changes.count() as u64)
                .await?;
            let events = EngineEvents::read(&destroyed.stdout);
            let failure = match (destroyed.ok, events.failure()) {
                (true, None) => None,
                (_, Some(why)) => Some(why),
                (false, None) => Some(format!("pulumi destroy failed: {}", destroyed.stderr)),
            };
            let outputs = if failure.is_none() {
                serde_json::json!({})
            } else {
                serde_json::Value::Null
            };
            Ok(receipt(outputs, started, &runner_version, failure))
        }
        .await;
        checkout.remove().await;
        receipt
    }
}

/// How this run's update (or destroy) ended before, found in the stack's history by its tag.
enum Earlier {
    Succeeded,
    /// Why, for the receipt.
    Failed(String),
}

impl Pulumi {
    /// `pulumi/<version>`, for the apply receipt; a CLI that does not answer fails the apply.
    async fn runner_version(&self) -> Result<String, Error> {
        let version = self
            .version()
            .await
            .map_err(|e| Error::ApplyFailed(e.to_string()))?;
        Ok(format!("pulumi/{}", version.trim_start_matches('v')))
    }

    /// A retry after a lost worker: how this run's update or destroy (tagged `tag`) ended, if
    /// it ran. One still `in-progress` lost its process with the worker: the stack is
    /// unlocked (`pulumi cancel`) and none is answered, so the caller runs it again.
    async fn earlier(
        &self,
        stack: &CliStack<'_>,
        dir: &Path,
        tag: &str,
    ) -> Result<Option<Earlier>, Error> {
        let Some(done) = self.tagged_update(stack, dir, tag).await? else {
            return Ok(None);
        };
        Ok(match done.result.as_str() {
            "succeeded" => Some(Earlier::Succeeded),
            "failed" => Some(Earlier::Failed(format!(
                "the {} of this run failed before (see the stack's history)",
                done.kind
            ))),
            _ => {
                self.run(stack, dir, &["cancel", "--yes"]).await?;
                None
            }
        })
    }

    /// `pulumi destroy --preview-only --refresh --json` in `dir`, as a receipt hashed like a
    /// plan's (program, config, last update, steps).
    async fn destroy_preview(
        &self,
        stack: &CliStack<'_>,
        dir: &Path,
        spec: &SpecificationSnapshot,
    ) -> Result<PlanReceipt, Error> {
        self.run(stack, dir, &["stack", "select", "--create"])
            .await?;
        let fingerprint = self.configure(stack, dir, spec).await?;
        let last_update = self
            .history(stack, dir)
            .await?
            .first()
            .map(UpdateInfo::identity)
            .unwrap_or_default();
        let preview = self
            .run(
                stack,
                dir,
                &["destroy", "--preview-only", "--refresh", "--json"],
            )
            .await?;
        let digest: PreviewDigest = serde_json::from_str(&preview).map_err(|e| {
            Error::Unreachable(format!("reading pulumi destroy --preview-only --json: {e}"))
        })?;
        Ok(digest.receipt(spec, &fingerprint, &last_update))
    }
}

/// The observer's half: how the stack's resources drifted in their cloud, read with
/// `pulumi refresh --preview-only --json`, which changes neither the stack's state nor the
/// cloud. Refresh needs a project but never runs the program, so it runs in a scratch project
/// named after the stack's (no fetch of the program every five minutes). A stack nothing was
/// applied to yet has nothing to drift.
#[async_trait::async_trait]
impl crate::ports::Refresher for Pulumi {
    async fn drifted(&self, target: &Target) -> Result<Vec<DriftedResource>, Error> {
        let args = ["refresh", "--preview-only", "--json"];
        let Some(refreshed) = self.read_applied_state(target, &args).await? else {
            return Ok(Vec::new());
        };
        let digest: PreviewDigest = serde_json::from_str(&refreshed).map_err(|e| {
            Error::Unreachable(format!("reading pulumi refresh --preview-only --json: {e}"))
        })?;
        Ok(digest.drifted())
    }

    async fn resources(&self, target: &Target) -> Result<Vec<StateResource>, Error> {
        Pulumi::resources(self, target).await
    }
}

/// An apply receipt: succeeded without a reason, failed with one.
fn receipt(
    outputs: serde_json::Value,
    started: std::time::Instant,
    runner_version: &str,
    failure: Option<String>,
) -> ApplyReceipt {
    ApplyReceipt {
        outputs,
        duration_ms: started.elapsed().as_millis() as u64,
        result: if failure.is_some() {
            runtime_cloud_models::ApplyResult::Failed
        } else {
            runtime_cloud_models::ApplyResult::Succeeded
        },
        runner_version: runner_version.to_owned(),
        reason: failure,
    }
}

/// One entry of `pulumi stack history --json` (`updateInfoJSON`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateInfo {
    pub kind: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub result: String,
    /// The update's number in the stack.
    #[serde(default)]
    pub version: u64,
    #[serde(default)]
    pub start_time: String,
}

impl UpdateInfo {
    /// What identifies the stack's state an update left: the plan's inputs hash covers the
    /// newest one, so a plan made before another update of the stack is another plan.
    fn identity(&self) -> String {
        format!(
            "{} {} {} {}",
            self.version, self.kind, self.start_time, self.result
        )
    }
}

/// The engine events of `pulumi up --json`: one JSON object per line
/// (`sdk/go/common/apitype/events.go`, `EngineEvent`). Lines that do not read are skipped.
#[derive(Debug, Default)]
pub struct EngineEvents {
    /// `resOpFailedEvent`s: the URNs of resources whose operation failed.
    pub failed: Vec<String>,
    /// Error `diagnosticEvent`s: (URN if any, message).
    pub errors: Vec<(Option<String>, String)>,
    /// The `summaryEvent`'s `result`, when the CLI reports one (v3.237+).
    pub result: Option<String>,
}

impl EngineEvents {
    pub fn read(stdout: &str) -> Self {
        let mut events = Self::default();
        for line in stdout.lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(failed) = event.get("resOpFailedEvent") {
                let urn = failed["metadata"]["urn"].as_str().unwrap_or_default();
                events.failed.push(urn.to_owned());
            }
            if let Some(d) = event.get("diagnosticEvent")
                && d["severity"] == "error"
            {
                let urn = d["urn"]
                    .as_str()
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned);
                let message = strip_colour(d["message"].as_str().unwrap_or_default());
                events.errors.push((urn, message.trim().to_owned()));
            }
            if let Some(summary) = event.get("summaryEvent") {
                events.result = summary["result"].as_str().map(str::to_owned);
            }
        }
        events
    }

    /// Why the update failed, naming the failing resource, or None when nothing failed.
    pub fn failure(&self) -> Option<String> {
        let failed_urn = self.failed.first();
        let diagnostic = self
            .errors
            .iter()
            .find(|(urn, _)| urn.is_some() && urn.as_ref() == failed_urn)
            .or_else(|| self.errors.iter().find(|(urn, _)| urn.is_some()))
            .or_else(|| self.errors.first());
        match (failed_urn, diagnostic) {
            (None, None) if self.result.as_deref() != Some("failed") => None,
            (Some(urn), Some((_, message))) => Some(format!("{urn}: {message}")),
            (Some(urn), None) => Some(format!("{urn}: the operation failed")),
            (None, Some((Some(urn), message))) => Some(format!("{urn}: {message}")),
            (None, Some((None, message))) => Some(message.clone()),
            (None, None) => Some("the update failed".into()),
        }
    }
}

/// Whether an engine event line reports a resource whose step finished (its outputs, or
/// its failure). Unchanged resources (`same`) and reads are not steps of the plan.
fn finishes_a_resource(line: &str) -> bool {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
        return false;
    };
    if event.get("resOpFailedEvent").is_some() {
        return true;
    }
    event
        .get("resOutputsEvent")
        .and_then(|e| e["metadata"]["op"].as_str())
        .is_some_and(|op| !matches!(op, "same" | "read" | "refresh"))
}

/// A diagnostic without Pulumi's colour directives (`<{%fg 1%}>`, `<{%reset%}>`).
fn strip_colour(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find("<{%") {
        out.push_str(&rest[..start]);
        match rest[start..].find("%}>") {
            Some(end) => rest = &rest[start + end + 3..],
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
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
    /// The resource as the stack holds it (`apitype.ResourceV3`; secrets shown `[secret]`).
    #[serde(default, deserialize_with = "state_if_readable")]
    pub old_state: Option<StateResource>,
    /// The resource as the update would leave it.
    #[serde(default, deserialize_with = "state_if_readable")]
    pub new_state: Option<StateResource>,
}

/// A step's resource state, or none when it does not read as one: the plan's changes do
/// not depend on it, only its posture does.
fn state_if_readable<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<StateResource>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
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
    /// The resources the update would create or change, each before and after, for the
    /// posture rules. An import is left out: the object exists already (its findings are the
    /// observation's), the update only takes it over.
    pub fn planned(self) -> Vec<PlannedResource> {
        self.steps
            .into_iter()
            .filter(|step| {
                matches!(
                    step.op.as_str(),
                    "create" | "update" | "replace" | "create-replacement"
                )
            })
            .filter_map(|step| {
                let after = step.new_state?;
                let stack_or_provider = after.kind == "pulumi:pulumi:Stack"
                    || after.kind.starts_with("pulumi:providers:");
                (!stack_or_provider).then_some(PlannedResource {
                    before: step.old_state,
                    after,
                })
            })
            .collect()
    }

    /// The steps of a refresh preview as drifted resources: a resource refresh would delete
    /// from the state is gone from its cloud; one it would update (or a `refresh` step with a
    /// diff) changed there. The stack itself and providers are not resources of the cloud.
    pub fn drifted(&self) -> Vec<DriftedResource> {
        self.steps
            .iter()
            .filter_map(|step| {
                let (kind, _) = step.type_and_name();
                if kind == "pulumi:pulumi:Stack" || kind.starts_with("pulumi:providers:") {
                    return None;
                }
                let change = match step.op.as_str() {
                    "delete" => ResourceChange::Deleted,
                    "update" => ResourceChange::Changed,
                    "refresh" if !step.fields().is_empty() => ResourceChange::Changed,
                    _ => return None,
                };
                let fields = match change {
                    ResourceChange::Changed => step.fields(),
                    ResourceChange::Deleted => Vec::new(),
                };
                Some(DriftedResource {
                    urn: step.urn.clone(),
                    kind,
                    change,
                    fields,
                })
            })
            .collect()
    }

    /// The plan receipt: creates are adds, updates, replaces and imports are changes (an
    /// import's field is `import`), deletes are deletes (a replace shows as a change of its fields; it also deletes, so it counts as
    /// destructive through `deletes` when Pulumi deletes the old resource first). The inputs
    /// hash covers the program commit, the resolved configuration's fingerprint, the stack's
    /// last update and the preview's steps.
    pub fn receipt(
        &self,
        spec: &SpecificationSnapshot,
        config_fingerprint: &str,
        last_update: &str,
    ) -> PlanReceipt {
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
                // The stack takes over an object that exists (resource option `import`): the
                // cloud is not written, the stack's state is.
                "import" | "import-replacement" => {
                    changes.changes.push(change(vec!["import".to_owned()]))
                }
                _ => {}
            }
        }
        let mut hash = Sha256::new();
        hash.update(spec.program_ref.as_bytes());
        hash.update(spec.program_version.as_bytes());
        hash.update(config_fingerprint.as_bytes());
        hash.update(b"\0");
        hash.update(last_update.as_bytes());
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
            cost: None,
            posture: Vec::new(),
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
             "detailedDiff": null,
             "newState": {"urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs",
                          "custom": true, "type": "aws:s3/bucket:Bucket",
                          "inputs": {"acl": "private"}}},
            {"op": "update", "urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs",
             "diffReasons": ["tags"],
             "detailedDiff": {"tags": {"kind": "update", "inputDiff": true},
                              "tags.env": {"kind": "add", "inputDiff": true}},
             "oldState": {"urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs",
                          "custom": true, "id": "docs-1a2b", "type": "aws:s3/bucket:Bucket",
                          "inputs": {"acl": "private"}, "outputs": {"acl": "private"}},
             "newState": {"urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs",
                          "custom": true, "id": "docs-1a2b", "type": "aws:s3/bucket:Bucket",
                          "inputs": {"acl": "private", "tags": {"env": "dev"}}}},
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
        let receipt = digest.receipt(&spec(), "fp", "3 update t succeeded");
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
        let hash = |spec: &SpecificationSnapshot, fp: &str, last: &str| {
            digest.receipt(spec, fp, last).inputs_hash
        };
        assert_eq!(
            hash(&spec(), "fp", "3 update t succeeded"),
            receipt.inputs_hash
        );
        assert_ne!(
            hash(&spec(), "other config", "3 update t succeeded"),
            receipt.inputs_hash
        );
        assert_ne!(
            hash(&spec(), "fp", "4 update t2 succeeded"),
            receipt.inputs_hash,
            "another update of the stack since"
        );
        let mut other = spec();
        other.program_version = "ffff".into();
        assert_ne!(
            hash(&other, "fp", "3 update t succeeded"),
            receipt.inputs_hash
        );
    }

    #[test]
    fn a_previews_created_and_changed_resources_are_planned_with_their_states() {
        let digest: PreviewDigest = serde_json::from_str(PREVIEW).unwrap();
        let planned = digest.planned();
        // The stack (a same), the delete and the replace without states are not planned.
        let urns: Vec<(&str, Option<&str>)> = planned
            .iter()
            .map(|p| {
                (
                    p.after.urn.as_str(),
                    p.before.as_ref().map(|b| b.urn.as_str()),
                )
            })
            .collect();
        assert_eq!(
            urns,
            [
                ("urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs", None),
                (
                    "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs",
                    Some("urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs")
                ),
            ]
        );
        assert_eq!(planned[1].after.kind, "aws:s3/bucket:Bucket");
        assert_eq!(planned[1].after.inputs["tags"]["env"], "dev");
        assert_eq!(
            planned[1].before.as_ref().unwrap().id.as_deref(),
            Some("docs-1a2b")
        );
    }
}

#[cfg(test)]
mod refresh {
    use super::*;

    /// A refresh preview (`previewDigest`): the stack and provider untouched, a bucket whose
    /// ACL was changed out of band, one deleted out of band, one unchanged.
    const REFRESH: &str = r#"{
        "steps": [
            {"op": "same", "urn": "urn:pulumi:dev::shop::pulumi:pulumi:Stack::shop-dev"},
            {"op": "update", "urn": "urn:pulumi:dev::shop::pulumi:providers:aws::default",
             "diffReasons": ["version"]},
            {"op": "update", "urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs",
             "diffReasons": ["acl"],
             "detailedDiff": {"acl": {"kind": "update", "inputDiff": false}}},
            {"op": "delete", "urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs"},
            {"op": "refresh", "urn": "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::media"},
            {"op": "refresh", "urn": "urn:pulumi:dev::shop::aws:sqs/queue:Queue::jobs",
             "diffReasons": ["visibilityTimeoutSeconds"]}
        ],
        "changeSummary": {"same": 2, "update": 2, "delete": 1}
    }"#;

    #[test]
    fn a_refresh_preview_names_the_changed_and_deleted_resources_of_the_cloud() {
        let digest: PreviewDigest = serde_json::from_str(REFRESH).unwrap();
        let drifted = digest.drifted();
        let seen: Vec<(&str, ResourceChange, Vec<String>)> = drifted
            .iter()
            .map(|d| {
                (
                    d.urn.rsplit("::").next().unwrap(),
                    d.change,
                    d.fields.clone(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("docs", ResourceChange::Changed, vec!["acl".to_owned()]),
                ("logs", ResourceChange::Deleted, vec![]),
                (
                    "jobs",
                    ResourceChange::Changed,
                    vec!["visibilityTimeoutSeconds".to_owned()]
                ),
            ]
        );
        assert_eq!(drifted[0].kind, "aws:s3/bucket:Bucket");
    }
}

#[cfg(test)]
mod engine_events {
    use super::*;

    /// Lines shaped like `pulumi up --json`'s (`EngineEvent`): a failed create with its
    /// diagnostic, the summary, and the closing `cancelEvent`.
    const FAILED_UP: &str = r#"{"sequence":0,"timestamp":1764590000,"preludeEvent":{"config":{}}}
{"sequence":3,"timestamp":1764590001,"resourcePreEvent":{"metadata":{"op":"create","urn":"urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs","type":"aws:s3/bucket:Bucket","old":null,"new":null,"detailedDiff":null,"provider":""}}}
{"sequence":5,"timestamp":1764590002,"diagnosticEvent":{"urn":"urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs","prefix":"error: ","message":"<{%fg 1%}>error: <{%reset%}>creating bucket: AccessDenied<{%reset%}>\n","color":"raw","severity":"error"}}
{"sequence":6,"timestamp":1764590002,"resOpFailedEvent":{"metadata":{"op":"create","urn":"urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs","type":"aws:s3/bucket:Bucket","old":null,"new":null,"detailedDiff":null,"provider":""},"status":0,"steps":0}}
{"sequence":8,"timestamp":1764590003,"summaryEvent":{"maybeCorrupt":false,"durationSeconds":2,"resourceChanges":{},"PolicyPacks":{},"isPreview":false,"result":"failed"}}
{"sequence":9,"timestamp":1764590003,"cancelEvent":{}}
"#;

    #[test]
    fn a_failed_update_names_the_failing_resource_and_its_diagnostic() {
        let events = EngineEvents::read(FAILED_UP);
        assert_eq!(
            events.failure().as_deref(),
            Some(
                "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::logs: error: creating bucket: AccessDenied"
            )
        );
    }

    /// Real engine-event streams from Pulumi's own test data (`tests/fixtures/pulumi/`, sources
    /// in its SOURCES.md).
    const REAL_DESTROY: &str =
        include_str!("../../tests/fixtures/pulumi/destroy-with-components.json");
    const REAL_INTERRUPTED_UP: &str =
        include_str!("../../tests/fixtures/pulumi/up-interrupted.json");

    fn finished(stream: &str) -> usize {
        stream.lines().filter(|l| finishes_a_resource(l)).count()
    }

    #[test]
    fn real_engine_events_count_the_finished_resources_and_show_no_failure() {
        // Two deletes finish; the stack itself is `same` and is not a step of the plan.
        assert_eq!(finished(REAL_DESTROY), 2);
        assert_eq!(EngineEvents::read(REAL_DESTROY).failure(), None);
        // Interrupted after the bucket: one of four started resources finished, and nothing
        // in the events names a failure (the exit status does; the apply reports stderr).
        assert_eq!(finished(REAL_INTERRUPTED_UP), 1);
        let events = EngineEvents::read(REAL_INTERRUPTED_UP);
        assert!(
            events.failed.is_empty() && events.errors.is_empty(),
            "{events:?}"
        );
        assert_eq!(events.failure(), None);
        // A failed step counts as finished too: the progress reaches its end.
        assert_eq!(finished(FAILED_UP), 1);
    }

    #[test]
    fn a_clean_update_has_no_failure_even_from_an_older_cli_without_a_result() {
        let ok = "{\"sequence\":1,\"timestamp\":1,\"summaryEvent\":{\"maybeCorrupt\":false,\"durationSeconds\":1,\"resourceChanges\":{\"create\":1},\"PolicyPacks\":{}}}\n{\"sequence\":2,\"timestamp\":1,\"cancelEvent\":{}}\nnot json\n";
        assert_eq!(EngineEvents::read(ok).failure(), None);
        let violated = "{\"sequence\":1,\"timestamp\":1,\"diagnosticEvent\":{\"message\":\"resource urn:pulumi:dev::shop::x:y:Z::a violates plan: properties changed: ~~size[{1}!={2}]\",\"color\":\"never\",\"severity\":\"error\"}}\n";
        let why = EngineEvents::read(violated).failure().unwrap();
        assert!(why.contains("violates plan"), "{why}");
    }
}
