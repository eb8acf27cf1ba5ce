//! Signs an inbound event's approval as its sender must (`runtime-cloud inbound sign`): for an
//! operator checking a source's set-up, and for the tests. The claims are derived from the
//! event's `data` exactly as `verify` holds them against it.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use runtime_cloud_models::inbound::{APPROVAL_DECIDED, PROMOTION_APPROVED, proof};
use serde_json::{Value, json};

/// A private key to sign with.
pub struct SigningKey {
    pub alg: Algorithm,
    key: EncodingKey,
    /// The `kid` header, when given.
    pub kid: Option<String>,
}

impl SigningKey {
    /// The key in PEM (PKCS#8): P-256 signs ES256, Ed25519 EdDSA, RSA RS256.
    pub fn from_pem(pem: &[u8], kid: Option<String>) -> Result<Self, String> {
        let (alg, key) = if let Ok(key) = EncodingKey::from_ec_pem(pem) {
            (Algorithm::ES256, key)
        } else if let Ok(key) = EncodingKey::from_ed_pem(pem) {
            (Algorithm::EdDSA, key)
        } else if let Ok(key) = EncodingKey::from_rsa_pem(pem) {
            (Algorithm::RS256, key)
        } else {
            return Err("no P-256, Ed25519 or RSA private key in PKCS#8 PEM".into());
        };
        Ok(Self { alg, key, kid })
    }

    /// `claims` as a compact JWS.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let mut header = Header::new(self.alg);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, claims, &self.key).map_err(|e| e.to_string())
    }
}

/// What the sender of an event of `event_type` with `data` signs, issued by `issuer` for
/// `audience`, valid until `expires` (Unix seconds; a promotion's `approval.expiresAt` when
/// the event gives one).
pub fn claims(
    event_type: &str,
    data: &Value,
    issuer: &str,
    audience: &str,
    expires: i64,
) -> Result<Value, String> {
    let now = chrono::Utc::now().timestamp();
    let mut claims = match event_type {
        PROMOTION_APPROVED => {
            let approval = &data["approval"];
            json!({
                "tenantId": data["tenantId"], "environmentId": data["environmentId"],
                "promotionId": data["promotionId"], "grantedBy": approval["grantedBy"],
                "grantedByRoles": approval.get("grantedByRoles").cloned().unwrap_or(json!([])),
                "specificationDigest": proof::specification_digest(&data["specification"]),
                "exp": approval["expiresAt"].as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map_or(expires, |t| t.timestamp()),
            })
        }
        APPROVAL_DECIDED => json!({
            "tenantId": data["tenantId"], "provisioningRunId": data["provisioningRunId"],
            "decision": data["decision"], "decidedBy": data["decidedBy"],
            "decidedByRoles": data.get("decidedByRoles").cloned().unwrap_or(json!([])),
            "inputsHash": data["inputsHash"], "exp": expires,
        }),
        other => return Err(format!("{other} carries no approval to sign")),
    };
    claims["iss"] = json!(issuer);
    claims["aud"] = json!(audience);
    claims["iat"] = json!(now);
    Ok(claims)
}

/// `data` with its `signature`, in a CloudEvents 1.0 envelope of `event_type` from `source`.
pub fn signed_event(
    event_type: &str,
    mut data: Value,
    key: &SigningKey,
    issuer: &str,
    audience: &str,
    expires: i64,
    source: &str,
) -> Result<Value, String> {
    let token = key.sign(&claims(event_type, &data, issuer, audience, expires)?)?;
    data["signature"] = json!(token);
    Ok(json!({
        "specversion": "1.0", "id": uuid::Uuid::new_v4().to_string(), "source": source,
        "type": event_type, "time": chrono::Utc::now().to_rfc3339(),
        "datacontenttype": "application/json", "data": data,
    }))
}
