//! A **stand-in** for an OpenID Connect provider, for tests only: it serves a real Keycloak
//! realm's discovery document (`tests/fixtures/oidc/keycloak-openid-configuration.json`, its
//! URLs pointed at this server) and a JWKS of the keys it is told to publish, and signs tokens
//! with real RSA-2048 and P-256 keys (`tests/fixtures/oidc/keys.json`). It counts the JWKS
//! fetches, so a test can see the API fetch the keys again.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::loopback::{Served, serve};

/// The realm URL of the captured document, replaced by the stand-in's.
const CAPTURED_ISSUER: &str = "https://identity.mafiasi.de/auth/realms/mafiasi";

/// The audience the tests configure.
pub const AUDIENCE: &str = "runtime-cloud-api";

struct Published {
    kids: Mutex<Vec<String>>,
    fetches: AtomicUsize,
    /// Filled once the port, and so the issuer, is known.
    discovery: OnceLock<Value>,
    keys: Value,
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
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/protocol/openid-connect/certs", get(certs))
            .with_state(published.clone());
        let app = Router::new().nest("/auth/realms/test", app);
        let served = serve(app, "/auth/realms/test").await;
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
        let key = &self.published.keys[kid];
        let pem = key["privatePem"].as_str().expect("pem").as_bytes();
        let (alg, encoding) = match key["alg"].as_str() {
            Some("ES256") => (Algorithm::ES256, EncodingKey::from_ec_pem(pem)),
            _ => (Algorithm::RS256, EncodingKey::from_rsa_pem(pem)),
        };
        let mut header = Header::new(alg);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &encoding.expect("key")).expect("sign")
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
