//! Bearer tokens from an OAuth2 / OpenID Connect provider: RS256 or ES256, signed by a key of
//! the provider's JWKS, issued by the configured issuer for the configured audience.
//!
//! The provider is found through its discovery document
//! (`{issuer}/.well-known/openid-configuration`) when the API starts; its keys are a cached
//! [`Jwks`], fetched again when a token names a key the cache does not hold. Which
//! claims carry the tenant, the scopes and the roles is configuration ([`OidcSettings`]): the
//! mapping is [`claims_from`], a pure function.

use super::jwks::{FetchError, Jwks, fetch_json};
use super::{Claims, Refusal};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::time::Duration;

/// The algorithms a provider's token may be signed with. `none`, HS256 and the rest are
/// refused before any key is looked at.
pub const ALGORITHMS: &[Algorithm] = &[Algorithm::RS256, Algorithm::ES256];

/// How long a request to the provider may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// What the operator configures.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    /// The provider's issuer (`iss` of its tokens, and where discovery starts).
    pub issuer: String,
    /// The audience the tokens must be issued for (`aud`).
    pub audience: String,
    /// The claim that names the tenant (a dotted path into nested objects).
    pub tenant_claim: String,
    /// The claim that carries the scopes: a space-separated string (`scope`) or a list
    /// (`scp`).
    pub scope_claim: String,
    /// The claim that carries roles or groups: a list or a space-separated string.
    pub roles_claim: String,
    /// Groups to roles (`platform-admins` → `PlatformAdmin`). Empty: the claim's values are
    /// the roles. Otherwise only mapped values give roles.
    pub role_map: Vec<(String, String)>,
    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    pub leeway_secs: u64,
}

/// The part of the provider's discovery document the API and the console use.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    /// Must equal the configured issuer.
    pub issuer: String,
    /// Where the signing keys are.
    pub jwks_uri: String,
    /// The console's sign-in starts here.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// The console exchanges its code here.
    #[serde(default)]
    pub token_endpoint: Option<String>,
}

impl From<FetchError> for ProviderError {
    fn from(e: FetchError) -> Self {
        ProviderError::Fetch {
            url: e.url,
            message: e.message,
        }
    }
}

/// Verifies a provider's tokens.
pub struct Oidc {
    settings: OidcSettings,
    discovery: Discovery,
    keys: Jwks,
}

/// Why the provider could not be used at start.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The discovery document or the JWKS could not be fetched or read.
    #[error("{url}: {message}")]
    Fetch {
        /// What was fetched.
        url: String,
        /// Why it failed.
        message: String,
    },
    /// The discovery document names another issuer.
    #[error("the discovery document names issuer {found}, not {configured}")]
    IssuerMismatch {
        /// In the document.
        found: String,
        /// Configured.
        configured: String,
    },
}

impl Oidc {
    /// Reads the provider's discovery document and its keys. Fails when either cannot be
    /// read, or the document names another issuer: a misconfigured provider is found at start,
    /// not at the first sign-in.
    pub async fn discover(settings: OidcSettings) -> Result<Self, ProviderError> {
        let http = reqwest::Client::builder()
            .timeout(PROVIDER_TIMEOUT)
            .build()
            .map_err(|e| ProviderError::Fetch {
                url: settings.issuer.clone(),
                message: e.to_string(),
            })?;
        let url = format!(
            "{}/.well-known/openid-configuration",
            settings.issuer.trim_end_matches('/')
        );
        let discovery: Discovery = fetch_json(&http, &url).await?;
        if discovery.issuer.trim_end_matches('/') != settings.issuer.trim_end_matches('/') {
            return Err(ProviderError::IssuerMismatch {
                found: discovery.issuer,
                configured: settings.issuer,
            });
        }
        let keys = Jwks::fetch(http, &discovery.jwks_uri).await?;
        tracing::info!(issuer = %settings.issuer, "OIDC provider discovered");
        Ok(Self {
            settings,
            discovery,
            keys,
        })
    }

    /// The provider's discovery document.
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// Verifies `token` and maps its claims.
    pub async fn verify(&self, token: &str) -> Result<Claims, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Algorithm(format!("{:?}", header.alg)));
        }
        let key = self.keys.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = self.settings.leeway_secs;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| Refusal::from_jwt(&e))?;
        claims_from(&data.claims, &self.settings)
    }
}

/// The claim at a dotted `path` (`realm_access.roles`).
fn claim<'a>(payload: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = payload.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

/// A claim's values: a list of strings, or one space-separated string.
fn values(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The API's claims from a verified token's payload, by the configured claim names.
pub fn claims_from(
    payload: &Map<String, Value>,
    settings: &OidcSettings,
) -> Result<Claims, Refusal> {
    let text = |name: &str| {
        claim(payload, name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| Refusal::MissingClaim(name.to_owned()))
    };
    let groups = values(claim(payload, &settings.roles_claim));
    let roles = if settings.role_map.is_empty() {
        groups
    } else {
        let mut roles: Vec<String> = settings
            .role_map
            .iter()
            .filter(|(group, _)| groups.contains(group))
            .map(|(_, role)| role.clone())
            .collect();
        roles.dedup();
        roles
    };
    Ok(Claims {
        sub: text("sub")?,
        tenant_id: text(&settings.tenant_claim)?,
        scope: values(claim(payload, &settings.scope_claim)).join(" "),
        roles,
        iss: text("iss")?,
        exp: claim(payload, "exp")
            .and_then(Value::as_u64)
            .ok_or_else(|| Refusal::MissingClaim("exp".into()))?,
    })
}

/// `group=Role,group=Role` as configured.
pub fn parse_role_map(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((group, role)) if !group.trim().is_empty() && !role.trim().is_empty() => {
                Ok((group.trim().to_owned(), role.trim().to_owned()))
            }
            _ => Err(format!("`{pair}` is not `group=Role`")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings() -> OidcSettings {
        OidcSettings {
            issuer: "https://id.example".into(),
            audience: "runtime-cloud".into(),
            tenant_claim: "tenant_id".into(),
            scope_claim: "scope".into(),
            roles_claim: "roles".into(),
            role_map: Vec::new(),
            leeway_secs: 60,
        }
    }

    fn payload(v: Value) -> Map<String, Value> {
        let mut base = json!({"sub": "ana", "iss": "https://id.example", "exp": 4_000_000_000u64});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        base.as_object().unwrap().clone()
    }

    #[test]
    fn scopes_come_from_a_string_or_a_list_and_roles_from_the_configured_claim() {
        let p = payload(json!({"tenant_id": "acme", "scope": "a b", "roles": ["Operator"]}));
        let c = claims_from(&p, &settings()).unwrap();
        assert_eq!((c.tenant_id.as_str(), c.scope.as_str()), ("acme", "a b"));
        assert_eq!(c.roles, vec!["Operator"]);

        let s = OidcSettings {
            tenant_claim: "org.tenant".into(),
            scope_claim: "scp".into(),
            roles_claim: "realm_access.roles".into(),
            ..settings()
        };
        let p = payload(json!({
            "org": {"tenant": "beta"},
            "scp": ["factory.runtime.read", "factory.meta.read"],
            "realm_access": {"roles": ["PlatformAdmin"]}
        }));
        let c = claims_from(&p, &s).unwrap();
        assert_eq!(c.tenant_id, "beta");
        assert_eq!(c.scope, "factory.runtime.read factory.meta.read");
        assert_eq!(c.roles, vec!["PlatformAdmin"]);
    }

    #[test]
    fn groups_give_only_the_roles_they_are_mapped_to() {
        let s = OidcSettings {
            roles_claim: "groups".into(),
            role_map: parse_role_map("ops=Operator, admins=PlatformAdmin").unwrap(),
            ..settings()
        };
        let p = payload(json!({"tenant_id": "acme", "groups": ["ops", "Operator", "staff"]}));
        assert_eq!(claims_from(&p, &s).unwrap().roles, vec!["Operator"]);
        assert!(parse_role_map("ops").is_err());
        assert!(parse_role_map("=Operator").is_err());
    }

    #[test]
    fn a_token_without_its_tenant_or_subject_is_refused_naming_the_claim() {
        let p = payload(json!({"scope": "a"}));
        assert!(matches!(
            claims_from(&p, &settings()),
            Err(Refusal::MissingClaim(c)) if c == "tenant_id"
        ));
        let mut p = payload(json!({"tenant_id": "acme"}));
        p.remove("sub");
        assert!(matches!(
            claims_from(&p, &settings()),
            Err(Refusal::MissingClaim(c)) if c == "sub"
        ));
    }
}
