//! What an inbound approval must prove, and the pure checks of a verified signature's claims
//! against the event that carries it.
//!
//! An approval that arrives in an event (`PromotionApproved`, `ApprovalDecided`) is a signed
//! assertion by its issuer: a compact JWS in the event's `signature` field whose claims restate
//! what is approved ([`PromotionClaims`], [`DecisionClaims`]). The API verifies the signature
//! with the keys configured for the issuer; these functions then hold the claims equal to the
//! event, field by field, so that an event cannot say more than its issuer signed.

use super::{ApprovalDecided, Inbound, PromotionApproved};
use crate::EnvironmentClass;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

crate::wire::wire_enum!(
    /// Why an inbound approval is refused: the reason on the dead letter and the `reason`
    /// label of `connectsoft_factory_runtime_inbound_refused_total`.
    Refusal, "inbound refusal" {
        /// The event carries no signature where an approval must be proven.
        Unsigned => "unsigned",
        /// The signature is not a compact JWS of an allowed algorithm, or its claims do not read.
        Malformed => "malformed",
        /// No source is configured for the token's issuer.
        UnknownIssuer => "unknown-issuer",
        /// The issuer's keys hold none for the token's key id (or algorithm).
        UnknownKey => "unknown-key",
        /// The signature does not verify with the issuer's key.
        BadSignature => "bad-signature",
        /// The token is not issued for this product's audience.
        WrongAudience => "wrong-audience",
        /// The token (the approval) expired, beyond the clock skew allowed.
        Expired => "expired",
        /// The token is not valid yet (`nbf`), beyond the clock skew allowed.
        NotYetValid => "not-yet-valid",
        /// The source may not act for the tenant the approval is for.
        WrongTenant => "wrong-tenant",
        /// The source may not sign events of this type.
        WrongEvent => "wrong-event",
        /// The event says something its signature does not (another environment, grantor,
        /// role, plan or specification).
        Mismatch => "mismatch",
        /// The approval was spent before, by another event.
        Replayed => "replayed",
    }
);

/// A refusal with what exactly failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval refused ({reason}): {detail}")]
pub struct Refused {
    pub reason: Refusal,
    pub detail: String,
}

impl Refused {
    pub fn new(reason: Refusal, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

/// The claims a promotion service signs for `PromotionApproved`, besides `iss`, `aud`, `exp`
/// (the approval's expiry) and optionally `iat` / `nbf`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionClaims {
    pub iss: String,
    /// Until when the approval may be spent, in Unix seconds.
    pub exp: i64,
    pub tenant_id: String,
    pub environment_id: String,
    pub promotion_id: String,
    pub granted_by: String,
    #[serde(default)]
    pub granted_by_roles: Vec<String>,
    /// [`specification_digest`] of the event's `specification`.
    pub specification_digest: String,
}

/// The claims RunControlService signs for `ApprovalDecided`, besides `iss`, `aud` and `exp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionClaims {
    pub iss: String,
    pub exp: i64,
    pub tenant_id: String,
    pub provisioning_run_id: String,
    pub decision: crate::ApprovalDecision,
    pub decided_by: String,
    #[serde(default)]
    pub decided_by_roles: Vec<String>,
    pub inputs_hash: String,
}

/// A verified approval: who the issuer says granted it, and what it may be spent on once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    /// The issuer whose key verified it.
    pub issuer: String,
    /// The grantor and their roles, as signed.
    pub granted_by: String,
    pub granted_by_roles: Vec<String>,
    /// The signed expiry.
    pub expires_at: DateTime<Utc>,
    /// What the approval is spent on: a second event carrying an approval with the same key is
    /// a replay ([`spend_key`]).
    pub spend_key: String,
}

/// The digest a sender signs of a `specification`: `sha256:` and the hex SHA-256 of its
/// RFC 8785 (JSON Canonicalization Scheme) text, computed over the JSON as sent.
pub fn specification_digest(specification: &serde_json::Value) -> String {
    // A JSON value always has a canonical form: the error is for types that are not JSON.
    let canonical = serde_json_canonicalizer::to_vec(specification).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(canonical)))
}

/// Whether `event` needs a proven approval to have its effect, for an environment of `class`
/// (`None` when the event names no environment that exists). A production promotion carries
/// the approval that opens its gate; a run-control decision decides a production run.
/// Registering an environment, and promotions outside production, approve nothing: the
/// broker's authentication of the source is enough for them.
pub fn needs_proof(event: &Inbound, class: Option<EnvironmentClass>) -> bool {
    match event {
        Inbound::EnvironmentCreated(_) => false,
        Inbound::PromotionApproved(_) => class == Some(EnvironmentClass::Production),
        Inbound::ApprovalDecided(_) => true,
    }
}

/// What a verified approval is spent on: one promotion's approval, or one decision on one
/// plan of one run.
pub fn spend_key(event: &Inbound) -> Option<String> {
    match event {
        Inbound::EnvironmentCreated(_) => None,
        Inbound::PromotionApproved(e) => Some(format!("promotion:{}", e.promotion_id)),
        Inbound::ApprovalDecided(e) => Some(format!(
            "decision:{}:{}",
            e.provisioning_run_id, e.inputs_hash
        )),
    }
}

/// The first field in which the event and what was signed differ, as "field: event `x`,
/// signed `y`".
fn differ(pairs: &[(&str, String, String)]) -> Result<(), Refused> {
    match pairs.iter().find(|(_, said, signed)| said != signed) {
        None => Ok(()),
        Some((field, said, signed)) => Err(Refused::new(
            Refusal::Mismatch,
            format!("{field}: the event says `{said}`, the signature `{signed}`"),
        )),
    }
}

/// Roles compared as sets, written sorted.
fn roles(roles: &[String]) -> String {
    let mut sorted = roles.to_vec();
    sorted.sort();
    sorted.dedup();
    sorted.join(",")
}

fn expiry(exp: i64) -> Result<DateTime<Utc>, Refused> {
    DateTime::from_timestamp(exp, 0)
        .ok_or_else(|| Refused::new(Refusal::Malformed, format!("exp {exp} is out of range")))
}

/// Holds a verified `PromotionApproved` signature's claims equal to the event (`digest`: the
/// [`specification_digest`] of the event's `specification`), and gives the proof.
pub fn check_promotion(
    event: &PromotionApproved,
    digest: &str,
    claims: &PromotionClaims,
) -> Result<Proof, Refused> {
    let expires_at = expiry(claims.exp)?;
    differ(&[
        (
            "tenantId",
            event.tenant_id.clone(),
            claims.tenant_id.clone(),
        ),
        (
            "environmentId",
            event.environment_id.clone(),
            claims.environment_id.clone(),
        ),
        (
            "promotionId",
            event.promotion_id.clone(),
            claims.promotion_id.clone(),
        ),
        (
            "approval.grantedBy",
            event.approval.granted_by.clone(),
            claims.granted_by.clone(),
        ),
        (
            "approval.grantedByRoles",
            roles(&event.approval.granted_by_roles),
            roles(&claims.granted_by_roles),
        ),
        (
            "specification (its digest)",
            digest.to_owned(),
            claims.specification_digest.clone(),
        ),
    ])?;
    // An expiry in the event, where given, is the signed one (to the second).
    if let Some(said) = event.approval.expires_at
        && said.timestamp() != claims.exp
    {
        return Err(Refused::new(
            Refusal::Mismatch,
            format!("approval.expiresAt: the event says `{said}`, the signature `{expires_at}`"),
        ));
    }
    Ok(Proof {
        issuer: claims.iss.clone(),
        granted_by: claims.granted_by.clone(),
        granted_by_roles: claims.granted_by_roles.clone(),
        expires_at,
        spend_key: format!("promotion:{}", event.promotion_id),
    })
}

/// Holds a verified `ApprovalDecided` signature's claims equal to the event, and gives the
/// proof.
pub fn check_decision(event: &ApprovalDecided, claims: &DecisionClaims) -> Result<Proof, Refused> {
    let expires_at = expiry(claims.exp)?;
    differ(&[
        (
            "tenantId",
            event.tenant_id.clone(),
            claims.tenant_id.clone(),
        ),
        (
            "provisioningRunId",
            event.provisioning_run_id.clone(),
            claims.provisioning_run_id.clone(),
        ),
        (
            "decision",
            event.decision.as_str().to_owned(),
            claims.decision.as_str().to_owned(),
        ),
        (
            "decidedBy",
            event.decided_by.clone(),
            claims.decided_by.clone(),
        ),
        (
            "decidedByRoles",
            roles(&event.decided_by_roles),
            roles(&claims.decided_by_roles),
        ),
        (
            "inputsHash",
            event.inputs_hash.clone(),
            claims.inputs_hash.clone(),
        ),
    ])?;
    Ok(Proof {
        issuer: claims.iss.clone(),
        granted_by: claims.decided_by.clone(),
        granted_by_roles: claims.decided_by_roles.clone(),
        expires_at,
        spend_key: format!(
            "decision:{}:{}",
            event.provisioning_run_id, event.inputs_hash
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbound::{DesiredState, PromotionApproval};
    use crate::{ApprovalDecision, SpecificationKind};

    fn promotion() -> PromotionApproved {
        PromotionApproved {
            promotion_id: "p-1".into(),
            tenant_id: "acme".into(),
            environment_id: "prod".into(),
            specification: DesiredState {
                kind: SpecificationKind::Environment,
                program_ref: "git://infra//shop".into(),
                program_version: "a1b2".into(),
                release_id: None,
                strategy: None,
                config_refs: Default::default(),
                secret_refs: Default::default(),
                workloads: vec![],
            },
            approval: PromotionApproval {
                granted_by: "alice".into(),
                granted_by_roles: vec!["Operator".into(), "Releaser".into()],
                reason: String::new(),
                expires_at: None,
            },
            signature: Some("token".into()),
        }
    }

    fn signed() -> PromotionClaims {
        PromotionClaims {
            iss: "https://promotions.example".into(),
            exp: 1_900_000_000,
            tenant_id: "acme".into(),
            environment_id: "prod".into(),
            promotion_id: "p-1".into(),
            granted_by: "alice".into(),
            granted_by_roles: vec!["Releaser".into(), "Operator".into()],
            specification_digest: "sha256:ab".into(),
        }
    }

    #[test]
    fn a_promotion_as_signed_gives_the_signed_grantor_and_expiry() {
        let proof = check_promotion(&promotion(), "sha256:ab", &signed()).expect("verifies");
        assert_eq!(proof.granted_by, "alice");
        assert_eq!(proof.expires_at.timestamp(), 1_900_000_000);
        assert_eq!(proof.spend_key, "promotion:p-1");
        assert_eq!(
            spend_key(&Inbound::PromotionApproved(promotion())),
            Some(proof.spend_key)
        );
    }

    /// Each field the event could change after signing is caught, and named.
    #[test]
    fn an_event_that_says_more_than_was_signed_is_a_mismatch() {
        type Change = Box<dyn Fn(&mut PromotionApproved)>;
        let cases: Vec<(&str, Change)> = vec![
            ("tenantId", Box::new(|e| e.tenant_id = "globex".into())),
            (
                "environmentId",
                Box::new(|e| e.environment_id = "prod-2".into()),
            ),
            ("promotionId", Box::new(|e| e.promotion_id = "p-2".into())),
            (
                "grantedBy",
                Box::new(|e| e.approval.granted_by = "mallory".into()),
            ),
            (
                "grantedByRoles",
                Box::new(|e| e.approval.granted_by_roles.push("PlatformAdmin".into())),
            ),
            (
                "expiresAt",
                Box::new(|e| e.approval.expires_at = DateTime::from_timestamp(1_999_999_999, 0)),
            ),
        ];
        for (field, change) in cases {
            let mut event = promotion();
            change(&mut event);
            let refused = check_promotion(&event, "sha256:ab", &signed()).unwrap_err();
            assert_eq!(refused.reason, Refusal::Mismatch, "{field}");
            assert!(
                refused.detail.contains(field),
                "{field}: {}",
                refused.detail
            );
        }
        let other_spec = check_promotion(&promotion(), "sha256:cd", &signed()).unwrap_err();
        assert!(other_spec.detail.contains("specification"), "{other_spec}");
    }

    #[test]
    fn a_decision_as_signed_verifies_and_another_plan_does_not() {
        let event = ApprovalDecided {
            tenant_id: "acme".into(),
            provisioning_run_id: "r-1".into(),
            decision: ApprovalDecision::Approve,
            decided_by: "bob".into(),
            decided_by_roles: vec!["Operator".into()],
            reason: "CHG-1".into(),
            inputs_hash: "sha256:11".into(),
            signature: Some("token".into()),
            approval_id: None,
        };
        let mut claims = DecisionClaims {
            iss: "https://run-control.example".into(),
            exp: 1_900_000_000,
            tenant_id: "acme".into(),
            provisioning_run_id: "r-1".into(),
            decision: ApprovalDecision::Approve,
            decided_by: "bob".into(),
            decided_by_roles: vec!["Operator".into()],
            inputs_hash: "sha256:11".into(),
        };
        let proof = check_decision(&event, &claims).expect("verifies");
        assert_eq!(proof.spend_key, "decision:r-1:sha256:11");
        claims.decision = ApprovalDecision::Reject;
        assert_eq!(
            check_decision(&event, &claims).unwrap_err().reason,
            Refusal::Mismatch
        );
        claims.decision = ApprovalDecision::Approve;
        claims.inputs_hash = "sha256:22".into();
        assert_eq!(
            check_decision(&event, &claims).unwrap_err().reason,
            Refusal::Mismatch
        );
    }

    #[test]
    fn only_production_promotions_and_decisions_need_a_proof() {
        let promotion = Inbound::PromotionApproved(promotion());
        assert!(needs_proof(&promotion, Some(EnvironmentClass::Production)));
        assert!(!needs_proof(
            &promotion,
            Some(EnvironmentClass::NonProduction)
        ));
        assert!(!needs_proof(&promotion, None));
    }

    /// The digest is of the canonical text (keys sorted, no white space): the same however
    /// the sender ordered and spaced its JSON.
    #[test]
    fn the_specification_digest_is_of_the_canonical_text() {
        let a: serde_json::Value = serde_json::from_str(
            r#"{"programVersion": "a1", "programRef": "git://x", "workloads": []}"#,
        )
        .expect("json");
        let b: serde_json::Value = serde_json::from_str(
            r#"{"workloads":[],"programRef":"git://x","programVersion":"a1"}"#,
        )
        .expect("json");
        let canonical = r#"{"programRef":"git://x","programVersion":"a1","workloads":[]}"#;
        let expected = format!("sha256:{}", hex::encode(Sha256::digest(canonical)));
        assert_eq!(specification_digest(&a), expected);
        assert_eq!(specification_digest(&b), expected);
    }
}
