//! Where an environment runs: the runner that plans and applies it, and the observer that
//! reads what it runs. Stored with the environment, chosen per environment by the worker.
//!
//! ```json
//! {"runner": {"kind": "sandbox"}, "observer": {"kind": "sandbox"}}
//! {"runner": {"kind": "pulumi", "stack": "acme/shop/prod", "backendUrl": "s3://state-bucket",
//!             "passphraseRef": "secretbroker://shop/pulumi-passphrase"}}
//! ```
//!
//! A target holds references only: a passphrase is named (`passphraseRef`), never given.

use crate::validation::is_reference;
use serde::{Deserialize, Serialize};

/// An environment's target. Either half defaults to the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Plans and applies.
    #[serde(default)]
    pub runner: RunnerTarget,
    /// Reads what runs.
    #[serde(default)]
    pub observer: ObserverTarget,
}

/// The runner of an environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RunnerTarget {
    /// The embedded simulated target (`runtime-cloud sandbox` edits it).
    #[default]
    Sandbox,
    /// A Pulumi stack, driven through the `pulumi` CLI.
    Pulumi(PulumiStack),
}

/// A Pulumi stack and where its state lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PulumiStack {
    /// `organization/project/stack`.
    pub stack: String,
    /// The state backend: `file://…`, `s3://…` or `https://…` (Pulumi Cloud).
    pub backend_url: String,
    /// A reference to the passphrase of the stack's secrets provider, resolved at apply time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passphrase_ref: Option<String>,
    /// A reference to the credential of a private program repository, resolved when the
    /// runner fetches: `user:token` or a bare token for https, a private key for ssh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_credential_ref: Option<String>,
}

/// The observer of an environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ObserverTarget {
    /// The embedded simulated target.
    #[default]
    Sandbox,
}

impl Target {
    /// What is wrong with this target, if anything, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        match &self.runner {
            RunnerTarget::Sandbox => Ok(()),
            RunnerTarget::Pulumi(p) => p.validate(),
        }
    }

    /// The runner's kind, for logs and metrics.
    pub fn runner_kind(&self) -> &'static str {
        match self.runner {
            RunnerTarget::Sandbox => "sandbox",
            RunnerTarget::Pulumi(_) => "pulumi",
        }
    }
}

impl PulumiStack {
    fn validate(&self) -> Result<(), String> {
        let segment = |s: &str| {
            !s.is_empty()
                && s.len() <= 100
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        let parts: Vec<&str> = self.stack.split('/').collect();
        if parts.len() != 3 || !parts.iter().all(|p| segment(p)) {
            return Err(format!(
                "target.runner.stack `{}` must be `organization/project/stack`, each part \
                 1–100 characters of [A-Za-z0-9._-]",
                self.stack
            ));
        }
        let backend = &self.backend_url;
        let scheme_ok = ["file://", "s3://", "https://"]
            .iter()
            .any(|s| backend.starts_with(s) && backend.len() > s.len());
        if !scheme_ok {
            return Err(format!(
                "target.runner.backendUrl `{backend}` must be a file://, s3:// or https:// URL"
            ));
        }
        for (field, value, what) in [
            ("passphraseRef", &self.passphrase_ref, "the passphrase"),
            (
                "repositoryCredentialRef",
                &self.repository_credential_ref,
                "the credential",
            ),
        ] {
            if let Some(r) = value
                && !is_reference(r)
            {
                return Err(format!(
                    "target.runner.{field} must be a reference (scheme://…), never {what}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pulumi(v: serde_json::Value) -> Target {
        serde_json::from_value(json!({ "runner": v })).unwrap()
    }

    #[test]
    fn the_default_is_the_sandbox_on_both_halves() {
        let t: Target = serde_json::from_value(json!({})).unwrap();
        assert_eq!(t, Target::default());
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({ "runner": { "kind": "sandbox" }, "observer": { "kind": "sandbox" } })
        );
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn a_pulumi_stack_is_checked_field_by_field() {
        let good = json!({ "kind": "pulumi", "stack": "acme/shop/prod",
                           "backendUrl": "s3://state", "passphraseRef": "secretbroker://shop/pp" });
        assert_eq!(pulumi(good.clone()).validate(), Ok(()));
        assert_eq!(pulumi(good.clone()).runner_kind(), "pulumi");
        let with = |k: &str, v: &str| {
            let mut t = good.clone();
            t[k] = json!(v);
            pulumi(t).validate().unwrap_err()
        };
        assert!(with("stack", "shop/prod").contains("organization/project/stack"));
        assert!(with("stack", "acme/shop/pr od").contains("[A-Za-z0-9._-]"));
        assert!(with("backendUrl", "gs://bucket").contains("backendUrl"));
        assert!(with("backendUrl", "file://").contains("backendUrl"));
        let refusal = with("passphraseRef", "hunter2");
        assert!(refusal.contains("passphraseRef") && !refusal.contains("hunter2"));
        let refusal = with("repositoryCredentialRef", "ghp_token");
        assert!(refusal.contains("repositoryCredentialRef") && !refusal.contains("ghp_token"));
    }

    #[test]
    fn unknown_kinds_and_fields_do_not_read() {
        let bad = [
            json!({ "runner": { "kind": "terraform" } }),
            json!({ "runner": { "kind": "pulumi", "stack": "a/b/c", "backendUrl": "s3://x", "token": "t" } }),
            json!({ "runners": {} }),
        ];
        for v in bad {
            assert!(serde_json::from_value::<Target>(v.clone()).is_err(), "{v}");
        }
    }
}
