//! Ports: the traits activities call, with an embedded default adapter each.

use crate::Error;
use crate::step_log::StepLog;
use runtime_cloud_models::approvals::{ApprovalClaim, ClaimOutcome};
use runtime_cloud_models::observation::DriftedResource;
use runtime_cloud_models::posture::{PlannedResource, PostureInput, StateResource, Violation};
use runtime_cloud_models::{ApplyReceipt, PlanReceipt, SpecificationSnapshot};

/// Where an environment runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tenant_id: String,
    pub environment_id: String,
    /// For a run's plan and apply: what the OS holds the runner's processes to (the project's
    /// quota); none for reads.
    pub limits: Option<runtime_cloud_models::capacity::ProcessLimits>,
}

/// A runner's plan: its receipt, and the resources it would leave, before and after, which
/// the plan activity judges by the posture rules and then drops (their properties are the
/// program's: no receipt, table or workflow payload keeps them).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub receipt: PlanReceipt,
    pub resources: Vec<PlannedResource>,
}

impl From<PlanReceipt> for Plan {
    /// A plan whose runner tells no planned resources (the sandbox's workloads have none).
    fn from(receipt: PlanReceipt) -> Plan {
        Plan {
            receipt,
            resources: Vec::new(),
        }
    }
}

/// Plans and applies a specification on a target (sandbox, Pulumi).
#[async_trait::async_trait]
pub trait Runner: Send + Sync + 'static {
    /// Diffs the specification against the target. Reads only. What it ran and printed goes
    /// to `log` (the run's plan artifact).
    async fn plan(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<Plan, Error>;

    /// Converges the target to the specification. Applying the same run twice returns the
    /// first receipt and changes nothing; a target that moved since the plan (another inputs
    /// hash) is refused.
    async fn apply(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error>;

    /// An apply was stopped at its deadline (`ApplyTimeoutMinutes`): leave the target usable
    /// by the next run (Pulumi: `pulumi cancel`, so the stack is not left locked).
    async fn abandon(&self, _target: &Target, _log: &StepLog) -> Result<(), Error> {
        Ok(())
    }

    /// A decommission's plan: what destroying everything the target runs would delete. Reads
    /// only, as [`Runner::plan`].
    async fn plan_destroy(
        &self,
        target: &Target,
        _spec: &SpecificationSnapshot,
        _log: &StepLog,
    ) -> Result<PlanReceipt, Error> {
        Err(cannot_destroy(target))
    }

    /// Destroys everything the target runs, as planned: once per run, and refused when the
    /// target moved since the plan, as [`Runner::apply`].
    async fn destroy(
        &self,
        _run_id: &str,
        target: &Target,
        _spec: &SpecificationSnapshot,
        _plan: &PlanReceipt,
        _log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        Err(cannot_destroy(target))
    }
}

fn cannot_destroy(target: &Target) -> Error {
    Error::PlanInvalid(format!(
        "the runner of environment `{}` cannot decommission it yet",
        target.environment_id
    ))
}

/// One observation's reading of a target: what runs, what drifted in its cloud, and the
/// security posture rules its objects break.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub workloads: Vec<runtime_cloud_models::observation::ObservedWorkload>,
    pub resources: Vec<DriftedResource>,
    pub posture: Vec<Violation>,
    /// The runner state's resources by type, and how many of each.
    pub resource_types: std::collections::BTreeMap<String, u32>,
}

/// Reads what an environment actually runs (sandbox; later Kubernetes).
#[async_trait::async_trait]
pub trait Observer: Send + Sync + 'static {
    /// The observed workloads; `Error::Unreachable` when the target cannot be read.
    async fn observe(
        &self,
        target: &Target,
    ) -> Result<Vec<runtime_cloud_models::observation::ObservedWorkload>, Error>;

    /// The resources of the target's recorded state that drifted in their cloud; none for a
    /// target that records no such state.
    async fn drifted(&self, _target: &Target) -> Result<Vec<DriftedResource>, Error> {
        Ok(Vec::new())
    }

    /// What one observation reads: what runs, what drifted in its cloud, and (for an
    /// observer that reads such facts) the posture rules broken.
    async fn read(&self, target: &Target) -> Result<Observed, Error> {
        Ok(Observed {
            workloads: self.observe(target).await?,
            resources: self.drifted(target).await?,
            ..Observed::default()
        })
    }
}

/// Reads how a runner's recorded state drifted in its cloud (Pulumi:
/// `pulumi refresh --preview-only`), without changing the state.
#[async_trait::async_trait]
pub trait Refresher: Send + Sync + 'static {
    async fn drifted(&self, target: &Target) -> Result<Vec<DriftedResource>, Error>;

    /// The resources the runner's recorded state holds (Pulumi: `pulumi stack export`); none
    /// before anything was applied.
    async fn resources(&self, _target: &Target) -> Result<Vec<StateResource>, Error> {
        Ok(Vec::new())
    }
}

/// Policy as code: what may apply, and what may go ahead without an operator. Embedded
/// default: [`crate::policy::RegoPolicy`]; or a PolicyEngineService
/// ([`crate::policy::OpaPolicy`]).
#[async_trait::async_trait]
pub trait Policy: Send + Sync + 'static {
    /// Whether a non-destructive proposal outside production may be auto-accepted.
    fn allows_auto_accept(&self, tenant_id: &str, environment_id: &str) -> bool;

    /// The decision on a plan before anything applies: what it denies, and whether it allows
    /// a production baseline or reconciliation without a human approval.
    async fn evaluate(
        &self,
        input: &runtime_cloud_models::policy::PolicyInput,
    ) -> Result<runtime_cloud_models::policy::PolicyDecision, Error>;

    /// Whether a proposal the rules would accept on its own may be (`allow`), and if not why
    /// (`deny`: the `no_auto_accept` reasons).
    async fn evaluate_auto_accept(
        &self,
        input: &runtime_cloud_models::policy::ProposalPolicyInput,
    ) -> Result<runtime_cloud_models::policy::PolicyDecision, Error>;

    /// The posture rules written as policy (package `runtime_cloud.posture`, rule
    /// `violations`) that the resources of a runner's recorded state break.
    async fn posture(&self, input: &PostureInput) -> Result<Vec<Violation>, Error>;
}

/// Verifies a run's claim on an approval and spends the approval on the run
/// ([`runtime_cloud_models::approvals::verify_approval`]). Embedded default:
/// [`RecordedApprovals`]; later RunControlService.
#[async_trait::async_trait]
pub trait Approvals: Send + Sync + 'static {
    /// The approval, spent on the claim's run, or why it does not verify. `Err` only when the
    /// source of approvals cannot answer (retried).
    async fn claim(&self, claim: &ApprovalClaim) -> Result<ClaimOutcome, Error>;
}

/// The embedded Approvals adapter: approvals the product records itself (`approvals` table).
/// An id it has not recorded is asked of `elsewhere` (RunControlService) when one is
/// configured: an Operator's decisions on runs are recorded here either way.
#[derive(Clone)]
pub struct RecordedApprovals {
    pub db: sea_orm::DatabaseConnection,
    pub elsewhere: Option<std::sync::Arc<dyn Approvals>>,
}

#[async_trait::async_trait]
impl Approvals for RecordedApprovals {
    async fn claim(&self, claim: &ApprovalClaim) -> Result<ClaimOutcome, Error> {
        let here = runtime_cloud_store::approvals::claim(&self.db, claim).await?;
        match (&here, &self.elsewhere) {
            (
                ClaimOutcome::Refused {
                    why: runtime_cloud_models::RefusalReason::UnknownApproval,
                },
                Some(elsewhere),
            ) => elsewhere.claim(claim).await,
            _ => Ok(here),
        }
    }
}

/// The Runner port, per environment: each call goes to the runner its environment's target
/// names (`models::targets::RunnerTarget`), read from the environment when the call is made.
pub struct TargetRunners {
    pub db: sea_orm::DatabaseConnection,
    pub sandbox: std::sync::Arc<dyn Runner>,
    pub pulumi: std::sync::Arc<dyn Runner>,
}

/// The environment's target, read when a call is made; an unregistered environment is
/// [`Error::PlanInvalid`].
pub(crate) async fn target_of(
    db: &sea_orm::DatabaseConnection,
    target: &Target,
) -> Result<runtime_cloud_models::targets::Target, Error> {
    let env =
        runtime_cloud_store::environments::find(db, &target.tenant_id, &target.environment_id)
            .await?
            .ok_or_else(|| {
                Error::PlanInvalid(format!(
                    "environment `{}` is not registered",
                    target.environment_id
                ))
            })?;
    Ok(env.target)
}

impl TargetRunners {
    async fn runner(&self, target: &Target) -> Result<&dyn Runner, Error> {
        use runtime_cloud_models::targets::RunnerTarget;
        Ok(match target_of(&self.db, target).await?.runner {
            RunnerTarget::Sandbox => &*self.sandbox,
            RunnerTarget::Pulumi(_) => &*self.pulumi,
        })
    }
}

#[async_trait::async_trait]
impl Runner for TargetRunners {
    async fn plan(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<Plan, Error> {
        self.runner(target).await?.plan(target, spec, log).await
    }

    async fn apply(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        self.runner(target)
            .await?
            .apply(run_id, target, spec, plan, log)
            .await
    }

    async fn abandon(&self, target: &Target, log: &StepLog) -> Result<(), Error> {
        self.runner(target).await?.abandon(target, log).await
    }

    async fn plan_destroy(
        &self,
        target: &Target,
        spec: &SpecificationSnapshot,
        log: &StepLog,
    ) -> Result<PlanReceipt, Error> {
        self.runner(target)
            .await?
            .plan_destroy(target, spec, log)
            .await
    }

    async fn destroy(
        &self,
        run_id: &str,
        target: &Target,
        spec: &SpecificationSnapshot,
        plan: &PlanReceipt,
        log: &StepLog,
    ) -> Result<ApplyReceipt, Error> {
        self.runner(target)
            .await?
            .destroy(run_id, target, spec, plan, log)
            .await
    }
}

/// The Observer port, per environment: workloads (and their posture) from the observer its
/// target names, and the drift of its runner's recorded state when the runner records one (a
/// Pulumi stack), with the posture rules written as policy that its resources break.
pub struct TargetObservers {
    pub db: sea_orm::DatabaseConnection,
    pub sandbox: std::sync::Arc<dyn Observer>,
    pub kubernetes: std::sync::Arc<dyn Observer>,
    pub pulumi: std::sync::Arc<dyn Refresher>,
    /// Judges the recorded state's resources (`Policy::posture`).
    pub policy: std::sync::Arc<dyn Policy>,
    /// Whether posture findings are read (`RUNTIME_CLOUD_POSTURE_FINDINGS`).
    pub posture: bool,
}

#[async_trait::async_trait]
impl Observer for TargetObservers {
    async fn observe(
        &self,
        target: &Target,
    ) -> Result<Vec<runtime_cloud_models::observation::ObservedWorkload>, Error> {
        Ok(self.read(target).await?.workloads)
    }

    async fn drifted(&self, target: &Target) -> Result<Vec<DriftedResource>, Error> {
        let of = target_of(&self.db, target).await?;
        self.drifted_in(&of, target).await
    }

    /// The environment's target read once for all (a sweep reads thousands).
    async fn read(&self, target: &Target) -> Result<Observed, Error> {
        let of = target_of(&self.db, target).await?;
        let mut read = self.observer(&of).read(target).await?;
        let state = self.recorded_state(&of, target).await?;
        mark_managed(&of, &state, &mut read.workloads);
        read.resource_types = priced_types(&of, &state);
        read.resources = self.drifted_in(&of, target).await?;
        read.posture
            .extend(self.state_posture(target, state).await?);
        Ok(read)
    }
}

impl TargetObservers {
    /// The observer the environment's target names.
    fn observer(&self, of: &runtime_cloud_models::targets::Target) -> &dyn Observer {
        use runtime_cloud_models::targets::ObserverTarget;
        match of.observer {
            ObserverTarget::Sandbox => &*self.sandbox,
            ObserverTarget::Kubernetes(_) => &*self.kubernetes,
        }
    }

    /// The resources of the runner's recorded state: to mark the Kubernetes workloads the
    /// stack manages, for the posture rules, and for cost by type. None for a runner that
    /// records no state.
    async fn recorded_state(
        &self,
        of: &runtime_cloud_models::targets::Target,
        target: &Target,
    ) -> Result<Vec<StateResource>, Error> {
        use runtime_cloud_models::targets::RunnerTarget;
        match of.runner {
            RunnerTarget::Pulumi(_) => self.pulumi.resources(target).await,
            RunnerTarget::Sandbox => Ok(Vec::new()),
        }
    }

    /// The posture rules written as policy that the recorded state's `resources` break;
    /// evaluating them failing leaves the environment stale with the reason (nothing raised
    /// or resolved), as an unreadable target does.
    async fn state_posture(
        &self,
        target: &Target,
        resources: Vec<StateResource>,
    ) -> Result<Vec<Violation>, Error> {
        if !self.posture || resources.is_empty() {
            return Ok(Vec::new());
        }
        let input = PostureInput {
            tenant_id: target.tenant_id.clone(),
            environment_id: target.environment_id.clone(),
            resources,
        };
        self.policy
            .posture(&input)
            .await
            .map_err(|e| Error::Unreachable(format!("the posture policies: {e}")))
    }

    /// The drift of the runner's recorded state, for the environment's target `of`.
    async fn drifted_in(
        &self,
        of: &runtime_cloud_models::targets::Target,
        target: &Target,
    ) -> Result<Vec<DriftedResource>, Error> {
        use runtime_cloud_models::targets::{ObserverTarget, RunnerTarget};
        let mut drifted = match of.runner {
            RunnerTarget::Sandbox => return Ok(Vec::new()),
            RunnerTarget::Pulumi(_) => self.pulumi.drifted(target).await?,
        };
        // The Kubernetes observer reads the cluster's objects itself, field by field and with
        // who changed them: the stack's view of the same objects would only repeat it.
        if matches!(of.observer, ObserverTarget::Kubernetes(_)) {
            drifted.retain(|r| !r.kind.starts_with("kubernetes:"));
        }
        Ok(drifted)
    }
}

/// The resource types of the recorded `state` that cost prices by type, and how many of each:
/// not the runner's own (`pulumi:providers:aws`, which hold no cloud object), and not the
/// Kubernetes objects of a namespace the Kubernetes observer reads (their workloads are priced
/// by what they request).
fn priced_types(
    of: &runtime_cloud_models::targets::Target,
    state: &[StateResource],
) -> std::collections::BTreeMap<String, u32> {
    use runtime_cloud_models::targets::ObserverTarget;
    let kubernetes = matches!(of.observer, ObserverTarget::Kubernetes(_));
    let mut types = std::collections::BTreeMap::new();
    for r in state {
        if runtime_cloud_models::cost::priced_type(&r.kind, kubernetes) {
            *types.entry(r.kind.clone()).or_default() += 1;
        }
    }
    types
}

/// Marks the `workloads` of a Kubernetes namespace that the environment's Pulumi stack
/// manages (its recorded `state` holds them): they are the program's, declared in the
/// specification or not.
fn mark_managed(
    of: &runtime_cloud_models::targets::Target,
    state: &[StateResource],
    workloads: &mut [runtime_cloud_models::observation::ObservedWorkload],
) {
    use runtime_cloud_models::targets::{ObserverTarget, RunnerTarget};
    let (RunnerTarget::Pulumi(_), ObserverTarget::Kubernetes(k)) = (&of.runner, &of.observer)
    else {
        return;
    };
    let managed = runtime_cloud_models::program_adoption::managed_workloads(state);
    for w in workloads {
        let id = (w.kind.clone(), format!("{}/{}", k.namespace, w.name));
        if managed.contains(&id) {
            w.managed_by = Some("pulumi".into());
        }
    }
}

/// Where run artifacts are kept (plan and apply logs, Pulumi plan files): an `object_store`,
/// under the data dir or in an S3-compatible bucket, that the API reads what the workers write
/// from (the binary's `artifacts::open`). Keys: `models::artifacts`.
pub type Artifacts = std::sync::Arc<dyn object_store::ObjectStore>;

/// Writes `bytes` under `key`, replacing what was there (a retried step writes its log again):
/// whole or not at all.
pub async fn keep(artifacts: &Artifacts, key: &str, bytes: Vec<u8>) -> Result<(), Error> {
    let location = location(key)?;
    artifacts
        .put(&location, bytes.into())
        .await
        .map(|_| ())
        .map_err(|e| Error::Artifacts(format!("writing {location}: {e}")))
}

/// The bytes under `key`, if any.
pub async fn kept(artifacts: &Artifacts, key: &str) -> Result<Option<Vec<u8>>, Error> {
    let location = location(key)?;
    let read = |e| Error::Artifacts(format!("reading {location}: {e}"));
    match artifacts.get(&location).await {
        Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())).map_err(read),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(read(e)),
    }
}

/// `key` as the store's path; one that would leave the store's root names nothing
/// (`models::artifacts::checked`).
fn location(key: &str) -> Result<object_store::path::Path, Error> {
    let refused = |why: String| Error::Artifacts(format!("the artifact key {key}: {why}"));
    if !runtime_cloud_models::artifacts::checked(key) {
        return Err(refused("not a key inside the store".into()));
    }
    object_store::path::Path::parse(key).map_err(|e| refused(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_prices_the_stacks_cloud_resources_by_type_not_its_providers_or_observed_objects() {
        let resource = |kind: &str| StateResource {
            urn: format!("urn:pulumi:dev::shop::{kind}::x"),
            kind: kind.into(),
            id: None,
            inputs: serde_json::Value::Null,
            outputs: serde_json::Value::Null,
        };
        let state = [
            resource("pulumi:providers:aws"),
            resource("aws:s3/bucket:Bucket"),
            resource("aws:s3/bucket:Bucket"),
            resource("kubernetes:apps/v1:Deployment"),
        ];
        let target = |observer: serde_json::Value| -> runtime_cloud_models::targets::Target {
            serde_json::from_value(serde_json::json!({
                "runner": { "kind": "pulumi", "stack": "acme/shop/dev",
                            "backendUrl": "file:///var/lib/pulumi" },
                "observer": observer
            }))
            .expect("a target")
        };
        let sandbox = priced_types(&target(serde_json::json!({ "kind": "sandbox" })), &state);
        assert_eq!(
            sandbox,
            [
                ("aws:s3/bucket:Bucket".to_owned(), 2),
                ("kubernetes:apps/v1:Deployment".to_owned(), 1)
            ]
            .into()
        );
        let observed = target(
            serde_json::json!({ "kind": "kubernetes", "namespace": "shop",
                                                  "inCluster": true }),
        );
        assert_eq!(
            priced_types(&observed, &state),
            [("aws:s3/bucket:Bucket".to_owned(), 2)].into(),
            "its workloads are priced by what they request"
        );
    }
}
