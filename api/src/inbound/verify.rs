//! Inbound approvals are verified, not asserted: the signature an event carries is checked
//! with its issuer's keys (`sources`), for this product's audience, within the clock skew
//! allowed, by a source allowed to sign this event type for this tenant; then its claims are
//! held equal to the event (`models::inbound::proof`). What the event says without a signature
//! proves nothing where an approval must be proven.

use super::sources::{Keys, Source, Sources};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::inbound::Inbound;
use runtime_cloud_models::inbound::proof::{
    self, DecisionClaims, PromotionClaims, Proof, Refusal, Refused,
};
use serde_json::{Map, Value};

/// The algorithms a source may sign with; `none`, HMAC and the rest are refused before any key
/// is looked at.
pub const ALGORITHMS: &[Algorithm] = &[Algorithm::ES256, Algorithm::RS256, Algorithm::EdDSA];

/// Checks the approvals inbound events carry.
pub struct Verifier {
    pub sources: Sources,
    /// `runtime-cloud dev` only (`RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED`): an approval without a
    /// signature is taken as the event asserts it.
    pub accept_unsigned: bool,
    /// RunControlService is configured: an `ApprovalDecided` may name its approval instead of
    /// carrying a signature, and the run claims it there.
    pub run_control: bool,
}

impl Verifier {
    /// Whether `event` (of `event_type`, whose `data` is `data`), about an environment of
    /// `class`, may have its effect, and with which proven approval.
    pub async fn check(
        &self,
        event_type: &str,
        data: &Value,
        event: &Inbound,
        class: Option<EnvironmentClass>,
    ) -> Result<Option<Proof>, Refused> {
        let signature = match event {
            Inbound::EnvironmentCreated(_) => return Ok(None),
            Inbound::PromotionApproved(e) => e.signature.as_deref(),
            Inbound::ApprovalDecided(e) => e.signature.as_deref(),
        };
        let Some(token) = signature else {
            return self.unsigned(event, class);
        };
        let claims = self.verify(event_type, token, event.tenant_id()).await?;
        let read = |e: serde_json::Error| {
            Refused::new(Refusal::Malformed, format!("the signed claims: {e}"))
        };
        match event {
            Inbound::PromotionApproved(e) => {
                let claims: PromotionClaims =
                    serde_json::from_value(Value::Object(claims)).map_err(read)?;
                let digest = proof::specification_digest(&data["specification"]);
                proof::check_promotion(e, &digest, &claims).map(Some)
            }
            Inbound::ApprovalDecided(e) => {
                let claims: DecisionClaims =
                    serde_json::from_value(Value::Object(claims)).map_err(read)?;
                proof::check_decision(e, &claims).map(Some)
            }
            Inbound::EnvironmentCreated(_) => Ok(None),
        }
    }

    /// An event without a signature: enough where it approves nothing.
    fn unsigned(
        &self,
        event: &Inbound,
        class: Option<EnvironmentClass>,
    ) -> Result<Option<Proof>, Refused> {
        if let Inbound::ApprovalDecided(e) = event
            && e.approval_id.is_some()
        {
            return match (self.run_control, e.decision) {
                (true, runtime_cloud_models::ApprovalDecision::Approve) => Ok(None),
                (false, _) => Err(Refused::new(
                    Refusal::Unsigned,
                    "`approvalId` is claimed at RunControlService, and none is configured \
                     (RUNTIME_CLOUD_RUN_CONTROL_URL)",
                )),
                (true, _) => Err(Refused::new(
                    Refusal::Unsigned,
                    "a rejection must be signed: RunControlService holds no approval to claim",
                )),
            };
        }
        if !proof::needs_proof(event, class) {
            return Ok(None);
        }
        if self.accept_unsigned {
            tracing::warn!(
                tenant = event.tenant_id(),
                "an unsigned approval is taken as asserted (RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED, dev only)"
            );
            return Ok(None);
        }
        Err(Refused::new(
            Refusal::Unsigned,
            "an approval must carry its issuer's signature (`signature`)",
        ))
    }

    /// The verified claims of `token`, issued by a source allowed to sign `event_type` for
    /// `tenant`.
    async fn verify(
        &self,
        event_type: &str,
        token: &str,
        tenant: &str,
    ) -> Result<Map<String, Value>, Refused> {
        let malformed = |why: String| Refused::new(Refusal::Malformed, why);
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| malformed(format!("not a compact JWS: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(malformed(format!(
                "algorithm {:?} (ES256, RS256 or EdDSA)",
                header.alg
            )));
        }
        let issuer = unverified_issuer(token)?;
        let source = self.sources.by_issuer(&issuer).ok_or_else(|| {
            Refused::new(
                Refusal::UnknownIssuer,
                format!("no source is configured for issuer `{issuer}`"),
            )
        })?;
        if !source.events.iter().any(|e| e == event_type) {
            return Err(Refused::new(
                Refusal::WrongEvent,
                format!("source `{}` may not sign {event_type}", source.name),
            ));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&source.issuer]);
        validation.set_audience(&[&source.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.sources.clock_skew_seconds;
        validation.validate_nbf = true;
        let claims = decode(
            source,
            token,
            header.kid.as_deref(),
            header.alg,
            &validation,
        )
        .await?;
        // The source acts for its tenants only: checked on what it signed, which the event
        // must then equal.
        let signed_tenant = claims.get("tenantId").and_then(Value::as_str);
        if !signed_tenant.is_some_and(|t| source.tenants.iter().any(|s| s == t)) {
            return Err(Refused::new(
                Refusal::WrongTenant,
                format!(
                    "source `{}` may not act for tenant `{}`",
                    source.name,
                    signed_tenant.unwrap_or(tenant)
                ),
            ));
        }
        Ok(claims)
    }
}

/// The `iss` of a token, read before its signature is checked: it only chooses which source's
/// keys check it.
fn unverified_issuer(token: &str) -> Result<String, Refused> {
    use base64::Engine as _;
    let malformed = |why: &str| Refused::new(Refusal::Malformed, why.to_owned());
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| malformed("not a compact JWS"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| malformed("the payload is not base64url"))?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|_| malformed("the payload is not a JSON object"))?;
    claims
        .get("iss")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| malformed("no `iss` claim"))
}

/// The claims of `token`, verified with one of `source`'s keys.
async fn decode(
    source: &Source,
    token: &str,
    kid: Option<&str>,
    alg: Algorithm,
    validation: &Validation,
) -> Result<Map<String, Value>, Refused> {
    let with = |key: &DecodingKey| {
        jsonwebtoken::decode::<Map<String, Value>>(token, key, validation)
            .map(|data| data.claims)
            .map_err(|e| refusal(&e))
    };
    match &source.keys {
        Keys::Jwks(jwks) => {
            let key = jwks.key(kid, alg).await.map_err(|e| {
                Refused::new(
                    Refusal::UnknownKey,
                    format!("source `{}`: {e}", source.name),
                )
            })?;
            with(&key)
        }
        Keys::Pem(keys) => {
            let candidates: Vec<_> = keys
                .iter()
                .filter(|k| k.alg == alg && kid.is_none_or(|kid| k.kid == kid))
                .collect();
            if candidates.is_empty() {
                return Err(Refused::new(
                    Refusal::UnknownKey,
                    format!(
                        "source `{}` holds no {alg:?} key{}",
                        source.name,
                        kid.map(|k| format!(" `{k}`")).unwrap_or_default()
                    ),
                ));
            }
            // A wrong key fails on the signature before the claims are looked at: the first
            // other answer is the one of the key that signed.
            let mut last = None;
            for candidate in candidates {
                match with(&candidate.key) {
                    Err(e) if e.reason == Refusal::BadSignature => last = Some(e),
                    answer => return answer,
                }
            }
            Err(last.unwrap_or_else(|| Refused::new(Refusal::BadSignature, "")))
        }
    }
}

/// A failed decode, as a refusal.
fn refusal(e: &jsonwebtoken::errors::Error) -> Refused {
    use jsonwebtoken::errors::ErrorKind as K;
    let reason = match e.kind() {
        K::InvalidSignature | K::InvalidAlgorithm => Refusal::BadSignature,
        K::ExpiredSignature => Refusal::Expired,
        K::ImmatureSignature => Refusal::NotYetValid,
        K::InvalidAudience => Refusal::WrongAudience,
        K::InvalidIssuer => Refusal::UnknownIssuer,
        _ => Refusal::Malformed,
    };
    Refused::new(reason, e.to_string())
}
