//! The Policy port's adapters: policy as code on every plan.
//!
//! - [`RegoPolicy`] (the embedded default): an embedded Rego interpreter (`regorus`) over a
//!   bundle of `.rego` files — the default bundle built into the worker
//!   (`activities/policies/`) and, when `RUNTIME_CLOUD_POLICY_DIR` names one, every `.rego`
//!   file of that directory. The directory is read again when a file in it changes; a bundle
//!   that does not parse is refused with the file and line, and the worker keeps evaluating
//!   with the last good one.
//! - [`OpaPolicy`]: an external PolicyEngineService speaking OPA's REST data API:
//!   `POST {url}/v1/data/runtime_cloud` with `{"input": …}`, answered with
//!   `{"result": {"deny": [...], "allow": bool}}`.
//!
//! Both answer the same [`PolicyDecision`] for the same [`PolicyInput`]
//! (package `runtime_cloud`, rules `deny` and `allow`; see `models::policy`).

use crate::Error;
use crate::ports::Policy;
use chrono::Utc;
use runtime_cloud_models::policy::{PolicyDecision, PolicyInput, ProposalPolicyInput, input_hash};
use runtime_cloud_models::posture::{PostureInput, Violation};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// The bundle built into the worker.
const DEFAULT_BUNDLE: &[(&str, &str)] = &[
    (
        "embedded/runtime_cloud.rego",
        include_str!("../policies/runtime_cloud.rego"),
    ),
    (
        "embedded/posture.rego",
        include_str!("../policies/posture.rego"),
    ),
];

/// The posture rules' result: a set of `{rule, resource, detail}`.
const POSTURE_RULE: &str = "data.runtime_cloud.posture.violations";

/// The violations of a `violations` result (a set, read as an array; undefined is none), each
/// checked: a tenant's rule that yields something else is an error naming it, not a finding.
fn violations(result: serde_json::Value) -> Result<Vec<Violation>, Error> {
    let items = match result {
        serde_json::Value::Null => return Ok(Vec::new()),
        serde_json::Value::Array(items) => items,
        other => {
            return Err(Error::PlanInvalid(format!(
                "{POSTURE_RULE} must be a set of {{rule, resource, detail}}, not {other}"
            )));
        }
    };
    let mut out: Vec<Violation> = items
        .into_iter()
        .map(|v| {
            serde_json::from_value(v.clone()).map_err(|e| {
                Error::PlanInvalid(format!(
                    "{POSTURE_RULE}: {v} is not a {{rule, resource, detail}}: {e}"
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    out.sort_by(|a, b| (&a.resource, &a.rule, &a.detail).cmp(&(&b.resource, &b.rule, &b.detail)));
    Ok(out)
}

/// A parsed bundle: the engine with every policy added, and what identifies it.
#[derive(Clone)]
struct Bundle {
    engine: regorus::Engine,
    /// `sha256:` of every file's name and text.
    version: String,
    /// When the directory's newest file was changed, as last read.
    read_at: Option<SystemTime>,
}

/// The embedded Rego engine.
pub struct RegoPolicy {
    /// `AutoAcceptNonDestructiveOutsideProduction`.
    pub auto_accept: bool,
    dir: Option<PathBuf>,
    bundle: Mutex<Bundle>,
}

impl RegoPolicy {
    /// The default bundle and, when given, the `.rego` files of `dir`. A bundle that does not
    /// parse is an error here: the worker does not start on a broken policy.
    pub fn new(auto_accept: bool, dir: Option<PathBuf>) -> Result<Self, Error> {
        let bundle = load(dir.as_deref())?;
        Ok(Self {
            auto_accept,
            dir,
            bundle: Mutex::new(bundle),
        })
    }

    /// The bundle to evaluate with: read again when the directory changed, else (or when the
    /// new one does not parse) the last good one.
    fn current(&self) -> Bundle {
        let mut bundle = self.bundle.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = &self.dir {
            let changed = newest_change(dir);
            if changed != bundle.read_at {
                match load(Some(dir)) {
                    Ok(fresh) => {
                        tracing::info!(version = %fresh.version, "policy bundle loaded");
                        *bundle = fresh;
                    }
                    Err(e) => {
                        // Keep the last good bundle, and do not try this one again until a
                        // file changes.
                        tracing::error!(error = %e, version = %bundle.version, "policy bundle refused; keeping the last good one");
                        bundle.read_at = changed;
                    }
                }
            }
        }
        bundle.clone()
    }

    fn policy_id(&self) -> String {
        match &self.dir {
            Some(dir) => format!("rego:{}", dir.display()),
            None => "rego:embedded".to_owned(),
        }
    }
}

/// The `.rego` files of `dir`, by name.
fn rego_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::PlanInvalid(format!(
            "reading the policy directory {}: {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rego"))
        .collect();
    files.sort();
    Ok(files)
}

fn newest_change(dir: &Path) -> Option<SystemTime> {
    let files = rego_files(dir).ok()?;
    let dir_changed = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
    files
        .iter()
        .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .chain(dir_changed)
        .max()
}

/// Parses the default bundle and the files of `dir`; an error names the file and line.
fn load(dir: Option<&Path>) -> Result<Bundle, Error> {
    let mut sources: Vec<(String, String)> = DEFAULT_BUNDLE
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    if let Some(dir) = dir {
        for file in rego_files(dir)? {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Error::PlanInvalid(format!("reading {}: {e}", file.display())))?;
            sources.push((file.display().to_string(), text));
        }
    }
    let mut engine = regorus::Engine::new();
    let mut version = Sha256::new();
    for (name, text) in &sources {
        // The parser's message names the file, the line and the column.
        engine
            .add_policy(name.clone(), text.clone())
            .map_err(|e| Error::PlanInvalid(format!("policy {name} does not parse: {e}")))?;
        version.update(name.as_bytes());
        version.update([0]);
        version.update(text.as_bytes());
    }
    // Analyse the modules now, once: a clone of a prepared engine stays prepared, while an
    // unprepared one analysed and scheduled every module again on every evaluation.
    engine
        .eval_query("true".to_owned(), false)
        .map_err(|e| Error::PlanInvalid(format!("the policies do not prepare: {e}")))?;
    Ok(Bundle {
        engine,
        version: format!("sha256:{}", hex::encode(version.finalize())),
        read_at: dir.and_then(newest_change),
    })
}

/// Evaluates `input` with `bundle`: `deny` and `allow` of package `runtime_cloud`.
fn evaluate(bundle: Bundle, input: &PolicyInput) -> Result<(bool, Vec<String>), Error> {
    let mut engine = with_input(bundle, input)?;
    let deny = messages(&rule(&mut engine, "data.runtime_cloud.deny")?);
    let allow = rule(&mut engine, "data.runtime_cloud.allow")? == serde_json::Value::Bool(true);
    Ok((allow, deny))
}

/// The bundle's engine with `input` set.
fn with_input<T: serde::Serialize>(bundle: Bundle, input: &T) -> Result<regorus::Engine, Error> {
    let mut engine = bundle.engine;
    let json = serde_json::to_string(input).map_err(|e| Error::PlanInvalid(e.to_string()))?;
    let value = regorus::Value::from_json_str(&json)
        .map_err(|e| Error::PlanInvalid(format!("the policy input: {e}")))?;
    engine.set_input(value);
    Ok(engine)
}

/// The value of the rule at `path` (null when undefined).
fn rule(engine: &mut regorus::Engine, path: &str) -> Result<serde_json::Value, Error> {
    let value = engine
        .eval_rule(path.to_owned())
        .map_err(|e| Error::PlanInvalid(format!("evaluating {path}: {e}")))?;
    if value == regorus::Value::Undefined {
        return Ok(serde_json::Value::Null);
    }
    let text = value
        .to_json_str()
        .map_err(|e| Error::PlanInvalid(format!("reading {path}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| Error::PlanInvalid(format!("reading {path}: {e}")))
}

/// The messages of a `deny` result (a set, read as an array; undefined is none).
fn messages(deny: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = deny
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[async_trait::async_trait]
impl Policy for RegoPolicy {
    fn allows_auto_accept(&self, _tenant_id: &str, _environment_id: &str) -> bool {
        self.auto_accept
    }

    async fn evaluate(&self, input: &PolicyInput) -> Result<PolicyDecision, Error> {
        let bundle = self.current();
        let version = bundle.version.clone();
        let (allow, deny) = evaluate(bundle, input)?;
        Ok(PolicyDecision {
            allow,
            deny,
            policy_id: self.policy_id(),
            version,
            input_hash: input.hash(),
            decided_at: Utc::now(),
        })
    }

    async fn evaluate_auto_accept(
        &self,
        input: &ProposalPolicyInput,
    ) -> Result<PolicyDecision, Error> {
        let bundle = self.current();
        let version = bundle.version.clone();
        let mut engine = with_input(bundle, input)?;
        let reasons = messages(&rule(&mut engine, "data.runtime_cloud.no_auto_accept")?);
        Ok(PolicyDecision {
            allow: reasons.is_empty(),
            deny: reasons,
            policy_id: self.policy_id(),
            version,
            input_hash: input_hash(input),
            decided_at: Utc::now(),
        })
    }

    async fn posture(&self, input: &PostureInput) -> Result<Vec<Violation>, Error> {
        let mut engine = with_input(self.current(), input)?;
        violations(rule(&mut engine, POSTURE_RULE)?)
    }
}

/// An external PolicyEngineService with OPA's REST data API.
pub struct OpaPolicy {
    /// `AutoAcceptNonDestructiveOutsideProduction`.
    pub auto_accept: bool,
    /// The service's base URL (`https://policy.internal`).
    pub url: String,
    pub http: reqwest::Client,
}

impl OpaPolicy {
    pub fn new(auto_accept: bool, url: &str) -> Self {
        Self {
            auto_accept,
            url: url.to_owned(),
            http: reqwest::Client::new(),
        }
    }
}

#[derive(serde::Deserialize)]
struct OpaAnswer {
    #[serde(default)]
    result: Option<OpaResult>,
}

#[derive(serde::Deserialize)]
struct OpaResult {
    #[serde(default)]
    deny: serde_json::Value,
    #[serde(default)]
    allow: Option<bool>,
    /// Reasons not to auto-accept a proposal.
    #[serde(default)]
    no_auto_accept: serde_json::Value,
    /// A bundle revision, when the service reports one.
    #[serde(default)]
    revision: Option<String>,
    /// The package `runtime_cloud.posture`'s document (its `violations`).
    #[serde(default)]
    posture: serde_json::Value,
}

#[async_trait::async_trait]
impl Policy for OpaPolicy {
    fn allows_auto_accept(&self, _tenant_id: &str, _environment_id: &str) -> bool {
        self.auto_accept
    }

    async fn evaluate(&self, input: &PolicyInput) -> Result<PolicyDecision, Error> {
        let result = self.ask(input).await?;
        Ok(PolicyDecision {
            allow: result.allow == Some(true),
            deny: messages(&result.deny),
            policy_id: format!("opa:{}", self.url),
            version: result.revision.unwrap_or_else(|| "unversioned".to_owned()),
            input_hash: input.hash(),
            decided_at: Utc::now(),
        })
    }

    async fn evaluate_auto_accept(
        &self,
        input: &ProposalPolicyInput,
    ) -> Result<PolicyDecision, Error> {
        let result = self.ask(input).await?;
        let reasons = messages(&result.no_auto_accept);
        Ok(PolicyDecision {
            allow: reasons.is_empty(),
            deny: reasons,
            policy_id: format!("opa:{}", self.url),
            version: result.revision.unwrap_or_else(|| "unversioned".to_owned()),
            input_hash: input_hash(input),
            decided_at: Utc::now(),
        })
    }

    async fn posture(&self, input: &PostureInput) -> Result<Vec<Violation>, Error> {
        let result = self.ask(input).await?;
        violations(result.posture["violations"].clone())
    }
}

impl OpaPolicy {
    /// The package's document for `input`.
    async fn ask<T: serde::Serialize + Sync>(&self, input: &T) -> Result<OpaResult, Error> {
        let url = format!("{}/v1/data/runtime_cloud", self.url.trim_end_matches('/'));
        let unreachable = |e: &dyn std::fmt::Display| {
            Error::Unreachable(format!("the PolicyEngineService at {url}: {e}"))
        };
        let response = self
            .http
            .post(&url)
            .json(&serde_json::json!({ "input": input }))
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| unreachable(&e))?;
        if !response.status().is_success() {
            return Err(unreachable(&response.status()));
        }
        let answer: OpaAnswer = response.json().await.map_err(|e| unreachable(&e))?;
        // No result: the service has no `runtime_cloud` package, so nothing is allowed and
        // nothing denied.
        Ok(answer.result.unwrap_or(OpaResult {
            deny: serde_json::Value::Null,
            allow: None,
            no_auto_accept: serde_json::Value::Null,
            revision: None,
            posture: serde_json::Value::Null,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_models::posture::StateResource;

    fn input(class: EnvironmentClass, replicas: u32, deletes: usize) -> PolicyInput {
        serde_json::from_value(serde_json::json!({
            "tenantId": "acme",
            "environment": { "environmentId": "prod", "projectId": "shop", "class": class },
            "run": { "runId": "r1", "kind": "baseline" },
            "specification": {
                "specificationId": "s1", "version": 1, "kind": "environment",
                "programRef": "git://infra//shop", "programVersion": "a1b2c3d4",
                "configRefs": {}, "secretRefs": {},
                "workloads": [{ "name": "api", "kind": "deployment", "version": "1.0",
                                "replicas": replicas, "configRefs": {}, "secretRefs": {} }]
            },
            "plan": {
                "adds": [], "changes": [],
                "deletes": (0..deletes).map(|i| serde_json::json!({ "name": format!("w{i}"), "kind": "deployment" })).collect::<Vec<_>>(),
                "inputsHash": "sha256:22", "programVersion": "a1b2c3d4"
            },
            "observed": []
        }))
        .expect("an input")
    }

    #[tokio::test]
    async fn the_default_bundle_denies_an_outage_and_a_mass_delete_and_allows_nothing() {
        let policy = RegoPolicy::new(true, None).unwrap();
        let fine = policy
            .evaluate(&input(EnvironmentClass::Production, 2, 0))
            .await
            .unwrap();
        assert!(fine.deny.is_empty() && !fine.allow, "{fine:?}");
        assert!(fine.version.starts_with("sha256:") && fine.input_hash.starts_with("sha256:"));
        let zero = policy
            .evaluate(&input(EnvironmentClass::Production, 0, 0))
            .await
            .unwrap();
        assert_eq!(
            zero.deny,
            ["workload api would run no replica in production"]
        );
        let outside = policy
            .evaluate(&input(EnvironmentClass::NonProduction, 0, 0))
            .await
            .unwrap();
        assert!(outside.deny.is_empty(), "only production: {outside:?}");
        let mass = policy
            .evaluate(&input(EnvironmentClass::NonProduction, 1, 11))
            .await
            .unwrap();
        assert_eq!(
            mass.deny,
            ["the plan deletes 11 workloads at once (at most 10)"]
        );
    }

    fn resource(name: &str, kind: &str, inputs: serde_json::Value) -> StateResource {
        StateResource {
            urn: format!("urn:pulumi:dev::shop::{kind}::{name}"),
            kind: kind.into(),
            id: Some(format!("{name}-1234")),
            outputs: inputs.clone(),
            inputs,
        }
    }

    #[tokio::test]
    async fn the_default_posture_rules_find_public_buckets_and_open_security_groups_and_a_tenant_adds_its_own()
     {
        let bucket = "aws:s3/bucket:Bucket";
        let input = PostureInput {
            tenant_id: "acme".into(),
            environment_id: "dev".into(),
            resources: vec![
                resource("docs", bucket, serde_json::json!({ "acl": "public-read" })),
                resource("logs", bucket, serde_json::json!({ "acl": "private" })),
                resource("media", bucket, serde_json::json!({ "tags": {} })),
                resource(
                    "web",
                    "aws:ec2/securityGroup:SecurityGroup",
                    serde_json::json!({ "ingress": [
                        { "fromPort": 443, "toPort": 443, "protocol": "tcp", "cidrBlocks": ["10.0.0.0/8"] },
                        { "fromPort": 22, "toPort": 22, "protocol": "tcp", "cidrBlocks": ["0.0.0.0/0"] }
                    ] }),
                ),
            ],
        };
        let found = RegoPolicy::new(true, None)
            .unwrap()
            .posture(&input)
            .await
            .unwrap();
        let pairs: Vec<(&str, &str)> = found
            .iter()
            .map(|v| (v.rule.as_str(), v.detail.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                (
                    "open-security-group",
                    "ingress from 0.0.0.0/0 to ports 22-22"
                ),
                ("public-bucket", "acl `public-read`: anyone can read it"),
            ],
            "by resource"
        );
        assert_eq!(found[1].resource, input.resources[0].urn);

        // A tenant's own rule, in the policy directory: every bucket must be tagged.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tags.rego"),
            "package runtime_cloud.posture\n\
             violations contains v if {\n\
               some r in input.resources\n\
               r.type == \"aws:s3/bucket:Bucket\"\n\
               not r.inputs.tags.team\n\
               v := {\"rule\": \"untagged-bucket\", \"resource\": r.urn, \"detail\": \"no team tag\"}\n\
             }\n",
        )
        .unwrap();
        let with_own = RegoPolicy::new(true, Some(dir.path().to_owned()))
            .unwrap()
            .posture(&input)
            .await
            .unwrap();
        let untagged: Vec<&str> = with_own
            .iter()
            .filter(|v| v.rule == "untagged-bucket")
            .map(|v| v.resource.rsplit("::").next().unwrap_or_default())
            .collect();
        assert_eq!(untagged, ["docs", "logs", "media"]);
        // A rule yielding something else is an error naming the rule, never a finding.
        std::fs::write(
            dir.path().join("tags.rego"),
            "package runtime_cloud.posture\nviolations contains \"oops\" if { true }\n",
        )
        .unwrap();
        let broken = RegoPolicy::new(true, Some(dir.path().to_owned()))
            .unwrap()
            .posture(&input)
            .await
            .unwrap_err();
        assert!(broken.to_string().contains("violations"), "{broken}");
    }

    #[tokio::test]
    async fn the_default_bundle_keeps_the_autoscalers_drift_for_an_operator() {
        let policy = RegoPolicy::new(true, None).unwrap();
        let asked = |manager: &str| ProposalPolicyInput {
            tenant_id: "acme".into(),
            environment: runtime_cloud_models::policy::PolicyEnvironment {
                environment_id: "dev".into(),
                project_id: "shop".into(),
                class: EnvironmentClass::NonProduction,
            },
            proposal: serde_json::json!({ "planSummary": { "changedBy": [
                { "kind": "replica", "resource": "deployment/api", "manager": manager,
                  "operation": "Update", "subresource": "scale", "field": "spec.replicas" }] } }),
            observed: vec![],
        };
        let hpa = policy
            .evaluate_auto_accept(&asked("kube-controller-manager"))
            .await
            .unwrap();
        assert!(!hpa.allow, "{hpa:?}");
        assert_eq!(
            hpa.deny,
            ["deployment/api was scaled by the autoscaler: not reverted without an operator"]
        );
        let person = policy
            .evaluate_auto_accept(&asked("kubectl"))
            .await
            .unwrap();
        assert!(person.allow && person.deny.is_empty(), "{person:?}");
    }

    #[tokio::test]
    async fn a_directory_policy_allows_and_a_broken_one_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("allow.rego"),
            "package runtime_cloud\n\nallow if input.run.kind == \"baseline\"\n",
        )
        .unwrap();
        let policy = RegoPolicy::new(false, Some(dir.path().to_owned())).unwrap();
        let allowed = policy
            .evaluate(&input(EnvironmentClass::Production, 2, 0))
            .await
            .unwrap();
        assert!(allowed.allow, "{allowed:?}");
        let good = allowed.version.clone();

        // A broken file: refused at start with the file and line, kept out at a reload.
        let broken = dir.path().join("broken.rego");
        std::fs::write(
            &broken,
            "package runtime_cloud\n\ndeny contains msg if {\n  msg := \n}\n",
        )
        .unwrap();
        let refused = RegoPolicy::new(false, Some(dir.path().to_owned()))
            .err()
            .expect("refused");
        let why = refused.to_string();
        assert!(why.contains("broken.rego:4:"), "the file and line: {why}");
        let kept = policy
            .evaluate(&input(EnvironmentClass::Production, 2, 0))
            .await
            .unwrap();
        assert_eq!(kept.version, good, "the last good bundle");
        assert!(kept.allow);
    }
}
