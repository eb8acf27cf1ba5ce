//! Drift rules: differences an operator expects (an autoscaler's replica count, a sidecar's
//! injected env var) and wants recorded without being proposed for reconciliation.
//!
//! A rule names a drift kind and a workload name pattern, and optionally the drifted field and
//! the manager that wrote it; it has an owner, a reason and an optional expiry. A finding a rule
//! matches is recorded as *suppressed* with the rule's id: listed with `?state=suppressed`,
//! counted in the metrics, never grouped into a proposal; it reopens at the first observation
//! after the rule expires or is removed. An environment's rules apply with its tenant's
//! default rules (those without an environment).

use crate::drift::{DriftKind, Finding};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A recorded rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftRule {
    pub rule_id: String,
    pub tenant_id: String,
    /// The environment it applies to; none for a tenant default (every environment).
    pub environment_id: Option<String>,
    #[serde(flatten)]
    pub matcher: RuleMatch,
    /// Who answers for it (a team, a person).
    pub owner: String,
    /// Why the difference is expected.
    pub reason: String,
    /// After this, the rule no longer suppresses anything; none: until removed.
    pub expires_at: Option<DateTime<Utc>>,
    /// The principal that created it.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleMatch {
    /// The drift kind.
    pub kind: DriftKind,
    /// The workload's name (`api`), or a pattern where `*` stands for any run of characters
    /// (`worker-*`, `*`). For a resource of a runner's state, its URN's name.
    pub workload: String,
    /// The drifted field (`spec.replicas`), or a prefix of it (`spec.template`); matches only
    /// findings whose target records who wrote which field (Kubernetes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The field manager that made the difference (`horizontal-pod-autoscaler`), or a
    /// pattern; matches only findings whose target records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// The posture rule (`privileged-container`), or a pattern; only with kind `posture`.
    /// Such a rule is a risk accepted for a time: it must expire (`expiresAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl DriftRule {
    /// Whether the rule still suppresses at `now`.
    pub fn active(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }

    /// Whether the rule is one of the environment's: its own, or its tenant's default.
    pub fn applies_to(&self, tenant_id: &str, environment_id: &str) -> bool {
        self.tenant_id == tenant_id
            && self
                .environment_id
                .as_deref()
                .is_none_or(|env| env == environment_id)
    }
}

impl RuleMatch {
    /// Whether the rule covers the finding (its expiry aside).
    pub fn matches(&self, f: &Finding) -> bool {
        if self.kind != f.kind || !glob(&self.workload, workload_name(&f.resource)) {
            return false;
        }
        let by = f.changed_by.as_ref();
        let field_ok = self.field.as_deref().is_none_or(|want| {
            by.is_some_and(|b| {
                b.field == want
                    || b.field
                        .strip_prefix(want)
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
            })
        });
        let manager_ok = self
            .manager
            .as_deref()
            .is_none_or(|want| by.is_some_and(|b| glob(want, &b.manager)));
        let rule_ok = self
            .rule
            .as_deref()
            .is_none_or(|want| f.rule.as_deref().is_some_and(|r| glob(want, r)));
        field_ok && manager_ok && rule_ok
    }

    /// What is wrong with the rule, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.workload.trim().is_empty() {
            out.push("workload must name a workload or a pattern such as `*`".to_owned());
        }
        if self.field.as_deref().is_some_and(|f| f.trim().is_empty()) {
            out.push("field, when given, must not be empty".to_owned());
        }
        if self.manager.as_deref().is_some_and(|m| m.trim().is_empty()) {
            out.push("manager, when given, must not be empty".to_owned());
        }
        if self.rule.as_deref().is_some_and(|r| r.trim().is_empty()) {
            out.push("rule, when given, must not be empty".to_owned());
        }
        if self.rule.is_some() && self.kind != DriftKind::Posture {
            out.push("rule names a posture rule: only with kind `posture`".to_owned());
        }
        out
    }

    /// What is wrong with a rule of this match expiring at `expires_at`: a posture finding is
    /// a risk, accepted only for a time, so its rule must expire.
    pub fn expiry_problem(&self, expires_at: Option<DateTime<Utc>>) -> Option<String> {
        (self.kind == DriftKind::Posture && expires_at.is_none()).then(|| {
            "a rule of kind `posture` accepts a risk for a time: expiresAt is required".to_owned()
        })
    }
}

/// The first active rule of `rules` that covers `f`, by rule id (oldest first).
pub fn suppressing<'a>(
    rules: &'a [DriftRule],
    f: &Finding,
    now: DateTime<Utc>,
) -> Option<&'a DriftRule> {
    rules
        .iter()
        .filter(|r| r.active(now) && r.matcher.matches(f))
        .min_by(|a, b| a.rule_id.cmp(&b.rule_id))
}

/// The workload's name in a finding's resource: `deployment/api` → `api`; a URN's last part
/// (`urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs` → `docs`).
pub fn workload_name(resource: &str) -> &str {
    if resource.starts_with("urn:") {
        return resource.rsplit("::").next().unwrap_or(resource);
    }
    resource.split_once('/').map_or(resource, |(_, name)| name)
}

/// Whether `text` matches `pattern`, where `*` is any run of characters (none included).
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole text
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::ChangedBy;

    fn finding(kind: DriftKind, resource: &str, by: Option<(&str, &str)>) -> Finding {
        Finding {
            kind,
            resource: resource.into(),
            declared: None,
            observed: None,
            rule: None,
            changed_by: by.map(|(manager, field)| ChangedBy {
                manager: manager.into(),
                operation: "Update".into(),
                time: None,
                field: field.into(),
                subresource: Some("scale".into()),
            }),
        }
    }

    fn rule(id: &str, matcher: RuleMatch, expires_at: Option<DateTime<Utc>>) -> DriftRule {
        DriftRule {
            rule_id: id.into(),
            tenant_id: "acme".into(),
            environment_id: Some("dev".into()),
            matcher,
            owner: "platform".into(),
            reason: "the HPA owns replicas".into(),
            expires_at,
            created_by: "alice".into(),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn a_rule_applies_to_its_environment_or_as_a_default_to_its_tenants() {
        let own = rule("r1", hpa(), None);
        assert!(own.applies_to("acme", "dev"));
        assert!(!own.applies_to("acme", "prod"));
        assert!(!own.applies_to("globex", "dev"));
        let default = DriftRule {
            environment_id: None,
            ..own
        };
        assert!(default.applies_to("acme", "prod"));
        assert!(!default.applies_to("globex", "prod"));
    }

    fn hpa() -> RuleMatch {
        RuleMatch {
            kind: DriftKind::Replica,
            workload: "*".into(),
            field: Some("spec.replicas".into()),
            manager: Some("horizontal-pod-autoscaler".into()),
            rule: None,
        }
    }

    #[test]
    fn a_rule_matches_kind_workload_field_and_manager() {
        let scaled = finding(
            DriftKind::Replica,
            "deployment/api",
            Some(("horizontal-pod-autoscaler", "spec.replicas")),
        );
        assert!(hpa().matches(&scaled));
        let by_hand = finding(
            DriftKind::Replica,
            "deployment/api",
            Some(("kubectl", "spec.replicas")),
        );
        assert!(!hpa().matches(&by_hand), "another manager");
        let unknown = finding(DriftKind::Replica, "deployment/api", None);
        assert!(
            !hpa().matches(&unknown),
            "a manager rule needs a known manager"
        );
        let version = finding(
            DriftKind::Version,
            "deployment/api",
            Some(("horizontal-pod-autoscaler", "spec.replicas")),
        );
        assert!(!hpa().matches(&version), "another kind");
        let named = RuleMatch {
            workload: "worker-*".into(),
            field: None,
            manager: None,
            ..hpa()
        };
        assert!(named.matches(&finding(DriftKind::Replica, "deployment/worker-eu", None)));
        assert!(!named.matches(&finding(DriftKind::Replica, "deployment/api", None)));
        let template = RuleMatch {
            kind: DriftKind::Configuration,
            workload: "api".into(),
            field: Some("spec.template.spec.containers".into()),
            manager: None,
            rule: None,
        };
        let env = finding(
            DriftKind::Configuration,
            "deployment/api",
            Some(("istio", "spec.template.spec.containers[api].env")),
        );
        assert!(
            template.matches(&env),
            "a field prefix covers what is under it"
        );
        let sibling = finding(
            DriftKind::Configuration,
            "deployment/api",
            Some(("istio", "spec.template.spec.containersX")),
        );
        assert!(!template.matches(&sibling), "a prefix ends at a path step");
    }

    #[test]
    fn an_expired_rule_suppresses_nothing() {
        let now = Utc::now();
        let scaled = finding(
            DriftKind::Replica,
            "deployment/api",
            Some(("horizontal-pod-autoscaler", "spec.replicas")),
        );
        let rules = [
            rule("r2", hpa(), Some(now + chrono::Duration::minutes(5))),
            rule("r1", hpa(), None),
        ];
        assert_eq!(
            suppressing(&rules, &scaled, now).map(|r| r.rule_id.as_str()),
            Some("r1"),
            "the oldest matching rule"
        );
        let expiring = [rule("r3", hpa(), Some(now + chrono::Duration::seconds(1)))];
        assert!(suppressing(&expiring, &scaled, now).is_some());
        assert!(
            suppressing(&expiring, &scaled, now + chrono::Duration::seconds(1)).is_none(),
            "expired at its expiry"
        );
    }

    #[test]
    fn workload_names_and_patterns() {
        assert_eq!(workload_name("deployment/api"), "api");
        assert_eq!(
            workload_name("urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs"),
            "docs"
        );
        assert!(glob("*", ""));
        assert!(glob("api", "api") && !glob("api", "api-2"));
        assert!(glob("a*c*e", "abcde") && !glob("a*c*e", "abcd"));
        assert!(glob("*-eu", "worker-eu") && !glob("*-eu", "worker-us"));
        assert!(!glob("ab*ba", "aba"), "the parts do not overlap");
    }

    #[test]
    fn a_rule_without_a_workload_is_a_problem() {
        let bad = RuleMatch {
            workload: " ".into(),
            field: Some("".into()),
            ..hpa()
        };
        assert_eq!(bad.problems().len(), 2);
        assert!(hpa().problems().is_empty());
        let drift_with_rule = RuleMatch {
            rule: Some("host-path".into()),
            ..hpa()
        };
        assert_eq!(drift_with_rule.problems().len(), 1);
        assert_eq!(hpa().expiry_problem(None), None);
    }

    #[test]
    fn a_posture_rule_matches_its_rule_and_must_expire() {
        let privileged = Finding {
            rule: Some("privileged-container".into()),
            ..finding(DriftKind::Posture, "deployment/agent", None)
        };
        let accepted = RuleMatch {
            kind: DriftKind::Posture,
            workload: "agent".into(),
            field: None,
            manager: None,
            rule: Some("privileged-*".into()),
        };
        assert!(accepted.matches(&privileged));
        assert!(accepted.problems().is_empty());
        let other_rule = Finding {
            rule: Some("host-path".into()),
            ..privileged.clone()
        };
        assert!(!accepted.matches(&other_rule), "another posture rule");
        let any_rule = RuleMatch {
            rule: None,
            ..accepted.clone()
        };
        assert!(any_rule.matches(&other_rule), "no rule: every posture rule");
        assert!(accepted.expiry_problem(None).is_some());
        assert_eq!(accepted.expiry_problem(Some(Utc::now())), None);
    }
}
