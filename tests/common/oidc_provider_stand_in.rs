//! A **stand-in** for an OpenID Connect provider, for tests only: it serves a real Keycloak
//! realm's discovery document (`tests/fixtures/oidc/keycloak-openid-configuration.json`, its
//! URLs pointed at this server) and a JWKS of the keys it is told to publish, and signs tokens
//! with real RSA-2048 and P-256 keys (`tests/fixtures/oidc/keys.json`). It counts the JWKS
//! fetches, so a test can see the API fetch the keys again.
//!
//! For the console's sign-in it also speaks the authorization-code flow with PKCE (RFC 7636)
//! at the document's `authorization_endpoint` and `token_endpoint`: the authorization
//! endpoint signs in whoever the test named ([`OidcProviderStandIn::sign_in_as`]) without a
//! login page (checking the client, the S256 challenge, `state` and `nonce`) and redirects
//! back with a code; the token endpoint redeems a code once, only with the verifier whose
//! challenge it was issued for and the same client and redirect URI, and answers an access
//! token signed with the first published key and an ID token carrying the nonce. What it was
//! asked is at `GET {issuer}/stand-in/seen`, for a browser test to check. Not a provider: one
//! user, no sessions, no consent.

use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::Digest as _;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::loopback::{Served, serve};

/// The realm URL of the captured document, replaced by the stand-in's.
const CAPTURED_ISSUER: &str = "https://identity.mafiasi.de/auth/realms/mafiasi";

/// Where the realm is under the stand-in's address: its issuer is `http://127.0.0.1:{port}` and
/// this.
pub const REALM: &str = "/auth/realms/test";

/// The audience the tests configure.
pub const AUDIENCE: &str = "runtime-cloud-api";

struct Published {
    kids: Mutex<Vec<String>>,
    fetches: AtomicUsize,
    /// Filled once the port, and so the issuer, is known.
    discovery: OnceLock<Value>,
    keys: Value,
    /// The console's client id and the access token claims of whoever signs in.
    user: Mutex<Option<(String, Value)>>,
    /// Codes issued and not yet redeemed.
    codes: Mutex<HashMap<String, Grant>>,
    /// What the sign-in endpoints were asked: `authorizations`, `exchanges` (the verifier
    /// left out) and `refusals`.
    seen: Mutex<Value>,
}

/// What a code was issued for.
struct Grant {
    challenge: String,
    client_id: String,
    redirect_uri: String,
    nonce: String,
}

impl Published {
    fn saw(&self, what: &str, value: Value) {
        let mut seen = self.seen.lock().expect("seen");
        if let Some(list) = seen[what].as_array_mut() {
            list.push(value);
        }
    }

    /// An OAuth2 error answer, recorded.
    fn refuse(&self, error: &str, why: &str) -> Response {
        self.saw("refusals", json!(format!("{error}: {why}")));
        let body = json!({ "error": error, "error_description": why });
        (StatusCode::BAD_REQUEST, cors(), Json(body)).into_response()
    }
}

/// The console calls the token endpoint from the API's origin.
fn cors() -> [(header::HeaderName, &'static str); 1] {
    [(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")]
}

async fn seen(State(p): State<Arc<Published>>) -> Json<Value> {
    Json(p.seen.lock().expect("seen").clone())
}

/// The stand-in, serving until dropped.
pub struct OidcProviderStandIn {
    /// Its issuer (and base URL).
    pub issuer: String,
    published: Arc<Published>,
    _served: Served,
}

async fn discovery(State(p): State<Arc<Published>>) -> Json<Value> {
    Json(p.discovery.get().cloned().unwrap_or_default())
}

async fn certs(State(p): State<Arc<Published>>) -> Json<Value> {
    p.fetches.fetch_add(1, Ordering::SeqCst);
    let kids = p.kids.lock().expect("kids").clone();
    let jwks: Vec<Value> = kids.iter().map(|k| p.keys[k]["jwk"].clone()).collect();
    Json(json!({ "keys": jwks }))
}

/// `GET authorization_endpoint?response_type=code&client_id&redirect_uri&state&nonce
/// &code_challenge&code_challenge_method=S256…`: signs the named user in and redirects back
/// with a code.
async fn authorize(
    State(p): State<Arc<Published>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    p.saw("authorizations", json!(q));
    let param = |k: &str| q.get(k).cloned().unwrap_or_default();
    let Some((client_id, _)) = p.user.lock().expect("user").clone() else {
        return p.refuse("access_denied", "no one signs in here");
    };
    if param("response_type") != "code" {
        return p.refuse("unsupported_response_type", &param("response_type"));
    }
    if param("client_id") != client_id {
        return p.refuse("unauthorized_client", &param("client_id"));
    }
    if param("code_challenge_method") != "S256" || param("code_challenge").is_empty() {
        return p.refuse("invalid_request", "PKCE with S256 is required");
    }
    if param("state").is_empty() || param("nonce").is_empty() {
        return p.refuse("invalid_request", "state and nonce are required");
    }
    let code = uuid::Uuid::new_v4().simple().to_string();
    let redirect_uri = param("redirect_uri");
    p.codes.lock().expect("codes").insert(
        code.clone(),
        Grant {
            challenge: param("code_challenge"),
            client_id,
            redirect_uri: redirect_uri.clone(),
            nonce: param("nonce"),
        },
    );
    let sep = if redirect_uri.contains('?') { '&' } else { '?' };
    let state = runtime_cloud_models::wire::percent_encode(&param("state"));
    let location = format!("{redirect_uri}{sep}code={code}&state={state}");
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

/// `POST token_endpoint` (form): redeems a code once, with its PKCE verifier.
async fn token(
    State(p): State<Arc<Published>>,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let mut asked = json!(f);
    if asked.get("code_verifier").is_some() {
        asked["code_verifier"] = json!("(sent)");
    }
    p.saw("exchanges", asked);
    let param = |k: &str| f.get(k).cloned().unwrap_or_default();
    if param("grant_type") != "authorization_code" {
        return p.refuse("unsupported_grant_type", &param("grant_type"));
    }
    let Some(grant) = p.codes.lock().expect("codes").remove(&param("code")) else {
        return p.refuse("invalid_grant", "unknown or used code");
    };
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(param("code_verifier").as_bytes()));
    if challenge != grant.challenge {
        return p.refuse(
            "invalid_grant",
            "code_verifier does not match the challenge",
        );
    }
    if param("client_id") != grant.client_id || param("redirect_uri") != grant.redirect_uri {
        return p.refuse("invalid_grant", "another client or redirect URI");
    }
    let claims = p
        .user
        .lock()
        .expect("user")
        .clone()
        .map(|(_, c)| c)
        .unwrap_or_default();
    let kid = p
        .kids
        .lock()
        .expect("kids")
        .first()
        .cloned()
        .unwrap_or_default();
    let id_token = json!({ "iss": claims["iss"], "sub": claims["sub"], "aud": grant.client_id,
                           "iat": claims["iat"], "exp": claims["exp"], "nonce": grant.nonce });
    let body = json!({
        "access_token": sign(&p.keys, &kid, &claims),
        "id_token": sign(&p.keys, &kid, &id_token),
        "token_type": "Bearer",
        "expires_in": 3600,
    });
    (StatusCode::OK, cors(), Json(body)).into_response()
}

/// A token signed with key `kid` of `keys` over `claims`, the header naming `kid`.
fn sign(keys: &Value, kid: &str, claims: &Value) -> String {
    let key = &keys[kid];
    let pem = key["privatePem"].as_str().expect("pem").as_bytes();
    let (alg, encoding) = match key["alg"].as_str() {
        Some("ES256") => (Algorithm::ES256, EncodingKey::from_ec_pem(pem)),
        _ => (Algorithm::RS256, EncodingKey::from_rsa_pem(pem)),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &encoding.expect("key")).expect("sign")
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/oidc/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

impl OidcProviderStandIn {
    /// A provider publishing the keys `kids` (of `keys.json`).
    pub async fn start(kids: &[&str]) -> Self {
        let published = Arc::new(Published {
            kids: Mutex::new(kids.iter().map(|k| k.to_string()).collect()),
            fetches: AtomicUsize::new(0),
            discovery: OnceLock::new(),
            keys: serde_json::from_str(&fixture("keys.json")).expect("keys JSON"),
            user: Mutex::new(None),
            codes: Mutex::new(HashMap::new()),
            seen: Mutex::new(json!({ "authorizations": [], "exchanges": [], "refusals": [] })),
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/protocol/openid-connect/certs", get(certs))
            .route("/protocol/openid-connect/auth", get(authorize))
            .route("/protocol/openid-connect/token", post(token))
            .route("/stand-in/seen", get(seen))
            .with_state(published.clone());
        let app = Router::new().nest(REALM, app);
        let served = serve(app, REALM).await;
        let issuer = served.url.clone();
        let captured = fixture("keycloak-openid-configuration.json");
        let document = serde_json::from_str(&captured.replace(CAPTURED_ISSUER, &issuer))
            .expect("discovery JSON");
        published.discovery.set(document).expect("set once");
        Self {
            issuer,
            published,
            _served: served,
        }
    }

    /// From now on the JWKS holds exactly `kids` (a rotation).
    pub fn publish(&self, kids: &[&str]) {
        *self.published.kids.lock().expect("kids") = kids.iter().map(|k| k.to_string()).collect();
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.published.fetches.load(Ordering::SeqCst)
    }

    /// A token signed with key `kid` (published or not) over `claims`, the header naming
    /// `kid`.
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        sign(&self.published.keys, kid, claims)
    }

    /// From now on the authorization endpoint signs a user in for the console client
    /// `client_id`, with `claims` (the access token's).
    pub fn sign_in_as(&self, client_id: &str, claims: Value) {
        *self.published.user.lock().expect("user") = Some((client_id.to_owned(), claims));
    }

    /// The claims of a valid token for `tenant` with `scopes` (the `scp` list) and `groups`,
    /// expiring in an hour.
    pub fn claims(&self, tenant: &str, scopes: &[&str], groups: &[&str]) -> Value {
        let now = now();
        json!({
            "iss": self.issuer, "aud": AUDIENCE, "sub": "ana@example.com",
            "iat": now, "exp": now + 3600, "org": { "tenant": tenant },
            "scp": scopes, "groups": groups,
        })
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}
