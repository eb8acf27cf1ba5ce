//! Bearer JWT authentication: the tenant and scopes come from the token, never the request.
//!
//! In production the tokens come from an OpenID Connect provider ([`oidc`]: RS256 / ES256,
//! keys from its JWKS). Without one (`runtime-cloud dev` and the tests) they are HS256-signed
//! with a local key (`runtime-cloud token` mints them); with one, HS256 tokens are refused.
//! Claims follow OAuth2 client credentials: `sub`, `tenant_id`, `scope` (space separated),
//! optional `roles`, `exp`.

pub mod jwks;
pub mod oidc;

use crate::{AppState, Error};
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::ops::Deref;

/// Read specifications and runs.
pub const PROVISIONING_READ: &str = "factory.provisioning.read";
/// Plan, apply, approve and cancel runs; declare specifications; register environments.
pub const PROVISIONING_APPLY: &str = "factory.provisioning.apply";

/// Read inventory, drift and proposals.
pub const RUNTIME_READ: &str = "factory.runtime.read";
/// Observe now; decide proposals.
pub const RUNTIME_OPERATE: &str = "factory.runtime.operate";
/// Fleet reads: products, instances, the summary, incidents.
pub const META_READ: &str = "factory.meta.read";
/// The fleet's health.
pub const HEALTH_READ: &str = "factory.health.read";
/// Fleet operations: incidents, rollouts, off-boarding orders.
pub const FLEET_OPERATE: &str = "factory.fleet.operate";
/// Download an off-boarded instance's archive (its whole record).
pub const FLEET_EXPORT: &str = "factory.fleet.export";
/// Read worker pools, quotas and capacity leases.
pub const CAPACITY_READ: &str = "factory.capacity.read";
/// Create worker pools; set quotas (with the `PlatformAdmin` role).
pub const CAPACITY_MANAGE: &str = "factory.capacity.manage";
/// Every role a token may carry (`Observer` reads; the others also decide).
pub const ROLES: &[&str] = &["Operator", "PlatformAdmin", "Observer"];
/// The role that sets quotas.
pub const QUOTA_SETTERS: &[&str] = &["PlatformAdmin"];

/// Every scope: the dev token and the console's dev sign-in carry them all.
pub const ALL_SCOPES: &[&str] = &[
    PROVISIONING_READ,
    PROVISIONING_APPLY,
    RUNTIME_READ,
    RUNTIME_OPERATE,
    META_READ,
    HEALTH_READ,
    FLEET_OPERATE,
    FLEET_EXPORT,
    CAPACITY_READ,
    CAPACITY_MANAGE,
];

/// How operators sign in to the console, as the console is told (`GET /console/sign-in`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignIn {
    /// `runtime-cloud dev`: a one-click sign-in mints a dev token (never in `serve`).
    pub dev: bool,
    /// The OpenID Connect provider: the console signs in with the authorization-code flow
    /// and PKCE against it.
    pub oidc: Option<OidcSignIn>,
}

/// The console's OpenID Connect client: a public client (no secret), PKCE.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OidcSignIn {
    /// The provider's issuer.
    pub issuer: String,
    /// The console's client id at the provider.
    pub client_id: String,
    /// The scopes the console asks for (space separated).
    pub scope: String,
    /// From the provider's discovery document.
    pub authorization_endpoint: String,
    /// From the provider's discovery document.
    pub token_endpoint: String,
}

/// Roles that may grant a production approval, accept a production proposal or change a target.
pub const PRODUCTION_DECIDERS: &[&str] = runtime_cloud_models::approvals::APPROVER_ROLES;

/// Issuer of the tokens this process mints and accepts.
const ISSUER: &str = "runtime-cloud";

/// The claims of an access token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The client or operator.
    pub sub: String,
    /// The tenant every request of this token acts in.
    pub tenant_id: String,
    /// Space-separated scopes.
    pub scope: String,
    /// Roles (`Operator`, `PlatformAdmin`, `Observer`).
    #[serde(default)]
    pub roles: Vec<String>,
    /// Issuer.
    pub iss: String,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
}

/// Why a token was refused: logged (never the token), answered with a bare 401.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// Not three base64 parts with a JSON header.
    #[error("not a JWT")]
    Malformed,
    /// An algorithm this mode does not accept (`none`, HS256 when OIDC is configured …).
    #[error("algorithm {0} is not accepted")]
    Algorithm(String),
    /// No key of the provider has this id, even after fetching its keys again.
    #[error("no key `{0}` in the provider's keys")]
    UnknownKey(String),
    /// The signature does not verify.
    #[error("the signature does not verify")]
    Signature,
    /// Past `exp` (beyond the clock skew tolerated).
    #[error("expired")]
    Expired,
    /// Before `nbf` (beyond the clock skew tolerated).
    #[error("not valid yet")]
    NotYetValid,
    /// Another issuer.
    #[error("issued by another issuer")]
    Issuer,
    /// Not issued for this API.
    #[error("issued for another audience")]
    Audience,
    /// A claim the API needs is absent.
    #[error("claim `{0}` is missing")]
    MissingClaim(String),
    /// Anything else the JWT library refused.
    #[error("invalid: {0}")]
    Invalid(String),
}

impl Refusal {
    /// The refusal of a token the JWT library did not accept.
    fn from_jwt(e: &jsonwebtoken::errors::Error) -> Self {
        use jsonwebtoken::errors::ErrorKind as K;
        match e.kind() {
            K::InvalidSignature => Refusal::Signature,
            K::ExpiredSignature => Refusal::Expired,
            K::ImmatureSignature => Refusal::NotYetValid,
            K::InvalidIssuer => Refusal::Issuer,
            K::InvalidAudience => Refusal::Audience,
            K::MissingRequiredClaim(c) => Refusal::MissingClaim(c.clone()),
            K::InvalidToken | K::Base64(_) | K::Json(_) | K::Utf8(_) => Refusal::Malformed,
            K::InvalidAlgorithm => Refusal::Algorithm("other than the header's".into()),
            other => Refusal::Invalid(format!("{other:?}")),
        }
    }
}

/// The local HS256 key (dev and tests).
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl JwtKeys {
    /// Keys from a shared secret.
    pub fn from_secret(secret: &[u8]) -> Self {
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
        }
    }

    /// Mints a token for `tenant_id` with `scopes`, valid for `ttl_secs`.
    pub fn mint(
        &self,
        subject: &str,
        tenant_id: &str,
        scopes: &[String],
        roles: &[String],
        ttl_secs: u64,
    ) -> Result<String, Error> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(Error::internal)?
            .as_secs();
        let claims = Claims {
            sub: subject.to_owned(),
            tenant_id: tenant_id.to_owned(),
            scope: scopes.join(" "),
            roles: roles.to_vec(),
            iss: ISSUER.to_owned(),
            exp: now + ttl_secs,
        };
        encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).map_err(Error::internal)
    }

    /// Verifies a token and returns its claims.
    pub fn verify(&self, token: &str) -> Result<Claims, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
        if header.alg != Algorithm::HS256 {
            return Err(Refusal::Algorithm(format!("{:?}", header.alg)));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        decode::<Claims>(token, &self.decoding, &validation)
            .map(|d| d.claims)
            .map_err(|e| Refusal::from_jwt(&e))
    }
}

/// Verifies bearer tokens: the provider's when OIDC is configured, else the local key's.
pub enum Authenticator {
    /// HS256 tokens of the local key (`runtime-cloud dev`, tests, `runtime-cloud token`).
    Local(JwtKeys),
    /// Tokens of an OpenID Connect provider; HS256 tokens are refused.
    Oidc(Box<oidc::Oidc>),
}

impl Authenticator {
    /// Verifies `token`. A refusal is logged with its reason (never the token) and answered
    /// with 401.
    pub async fn verify(&self, token: &str) -> Result<Claims, Error> {
        let verified = match self {
            Authenticator::Local(keys) => keys.verify(token),
            Authenticator::Oidc(provider) => provider.verify(token).await,
        };
        verified.map_err(|refusal| {
            tracing::warn!(reason = %refusal, "bearer token refused");
            Error::Unauthorized
        })
    }

    /// Mints a local token (the console's dev sign-in); not with an OIDC provider, whose
    /// tokens only it issues.
    pub fn mint(
        &self,
        subject: &str,
        tenant_id: &str,
        scopes: &[String],
        roles: &[String],
        ttl_secs: u64,
    ) -> Result<String, Error> {
        match self {
            Authenticator::Local(keys) => keys.mint(subject, tenant_id, scopes, roles, ttl_secs),
            Authenticator::Oidc(_) => Err(Error::NotFound(
                "local tokens: the OIDC provider issues them".into(),
            )),
        }
    }
}

/// The authenticated caller. Handlers take `Auth` (not `Option<Auth>`): a missing token must
/// be a 401, never an anonymous read.
#[derive(Debug, Clone)]
pub struct Auth {
    /// The verified claims.
    pub claims: Claims,
}

impl Auth {
    /// The caller's tenant: every query filters by it.
    pub fn tenant(&self) -> &str {
        &self.claims.tenant_id
    }

    /// Who the caller is.
    pub fn subject(&self) -> &str {
        &self.claims.sub
    }

    /// The caller's roles.
    pub fn roles(&self) -> &[String] {
        &self.claims.roles
    }

    /// Fails with 403 unless the token carries one of `roles`.
    pub fn require_role(&self, roles: &[&str]) -> Result<(), Error> {
        if self
            .claims
            .roles
            .iter()
            .any(|r| roles.contains(&r.as_str()))
        {
            Ok(())
        } else {
            Err(Error::Forbidden(format!("role {}", roles.join(" or "))))
        }
    }

    /// Fails with 403 unless the token carries `scope`.
    pub fn require(&self, scope: &str) -> Result<(), Error> {
        if self.claims.scope.split_whitespace().any(|s| s == scope) {
            Ok(())
        } else {
            Err(Error::Forbidden(format!("scope {scope}")))
        }
    }
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or(Error::Unauthorized)?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .ok_or(Error::Unauthorized)?;
        let claims = state.auth.verify(token.trim()).await?;
        Ok(Auth { claims })
    }
}

/// A scope a route needs, as a type: the [`Scoped`] extractor checks it before the request
/// body is read, so a caller without the scope learns nothing from body validation.
pub trait Scope {
    /// The scope's name in tokens.
    const NAME: &'static str;
}

macro_rules! scopes {
    ($($(#[$doc:meta])* $ty:ident => $name:ident),+ $(,)?) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl Scope for $ty {
                const NAME: &'static str = $name;
            }
        )+
    };
}

scopes!(
    /// `factory.provisioning.read`.
    ProvisioningRead => PROVISIONING_READ,
    /// `factory.provisioning.apply`.
    ProvisioningApply => PROVISIONING_APPLY,
    /// `factory.runtime.read`.
    RuntimeRead => RUNTIME_READ,
    /// `factory.runtime.operate`.
    RuntimeOperate => RUNTIME_OPERATE,
    /// `factory.meta.read`.
    MetaRead => META_READ,
    /// `factory.health.read`.
    HealthRead => HEALTH_READ,
    /// `factory.fleet.operate`.
    FleetOperate => FLEET_OPERATE,
    /// `factory.fleet.export`.
    FleetExport => FLEET_EXPORT,
    /// `factory.capacity.read`.
    CapacityRead => CAPACITY_READ,
    /// `factory.capacity.manage`.
    CapacityManage => CAPACITY_MANAGE,
);

/// An authenticated caller whose token carries scope `S` (401 without a valid token, 403
/// without the scope).
#[derive(Debug, Clone)]
pub struct Scoped<S>(Auth, PhantomData<S>);

impl<S> Deref for Scoped<S> {
    type Target = Auth;
    fn deref(&self) -> &Auth {
        &self.0
    }
}

impl<S: Scope + Send + Sync> FromRequestParts<AppState> for Scoped<S> {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let auth = Auth::from_request_parts(parts, state).await?;
        auth.require(S::NAME)?;
        Ok(Scoped(auth, PhantomData))
    }
}
