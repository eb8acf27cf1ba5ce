//! A JSON Web Key Set fetched from a URL and cached: the keys of an OpenID Connect provider,
//! and of an inbound event source that publishes its keys (`inbound::sources`).
//!
//! The set is fetched again when a token names a key id the cache does not hold (the issuer
//! rotated), and at least every [`KEYS_MAX_AGE`] (a key the issuer withdrew stops verifying).

use super::Refusal;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, RwLock};

/// Keys older than this are fetched again before the next verification.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// Two fetches of the JWKS are at least this far apart: a stream of tokens naming unknown
/// keys costs the issuer one request a second, not one per token.
const MIN_REFETCH: Duration = Duration::from_secs(1);

/// Old keys are not refreshed more often than this while the issuer fails.
const STALE_RETRY: Duration = Duration::from_secs(30);

/// A document could not be fetched or read.
#[derive(Debug, thiserror::Error)]
#[error("{url}: {message}")]
pub struct FetchError {
    /// What was fetched.
    pub url: String,
    /// Why it failed.
    pub message: String,
}

/// The keys and when they were fetched.
struct Keys {
    set: JwkSet,
    fetched_at: Instant,
}

/// A cached JWKS.
pub struct Jwks {
    url: String,
    http: reqwest::Client,
    keys: RwLock<Keys>,
    /// Held while the JWKS is fetched (one fetch at a time): when the last attempt started.
    refetch: Mutex<Option<Instant>>,
}

impl Jwks {
    /// The set at `url`, fetched now: an issuer whose keys cannot be read is found at start.
    pub async fn fetch(http: reqwest::Client, url: &str) -> Result<Self, FetchError> {
        let set: JwkSet = fetch_json(&http, url).await?;
        tracing::info!(%url, keys = set.keys.len(), "JWKS fetched");
        Ok(Self {
            url: url.to_owned(),
            http,
            keys: RwLock::new(Keys {
                set,
                fetched_at: Instant::now(),
            }),
            refetch: Mutex::new(None),
        })
    }

    /// The key that verifies a token with `kid` and `alg`, fetching the JWKS again when the
    /// cache does not hold it (the issuer rotated) or is old (it withdrew one).
    pub async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let asked_at = Instant::now();
        if self.keys.read().await.fetched_at.elapsed() > KEYS_MAX_AGE {
            self.refresh_old_keys().await;
        }
        if let Some(key) = self.find(kid, alg).await? {
            return Ok(key);
        }
        self.refetch(asked_at).await;
        self.find(kid, alg)
            .await?
            .ok_or_else(|| Refusal::UnknownKey(kid.unwrap_or_default().to_owned()))
    }

    /// The cached key for `kid` (or, for a token without `kid`, the only key of `alg`).
    async fn find(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Option<DecodingKey>, Refusal> {
        let keys = self.keys.read().await;
        let jwk = match kid {
            Some(kid) => keys.set.find(kid),
            None => {
                let mut of_alg = keys
                    .set
                    .keys
                    .iter()
                    .filter(|k| key_algorithm(k) == Some(alg));
                match (of_alg.next(), of_alg.next()) {
                    (Some(only), None) => Some(only),
                    _ => None,
                }
            }
        };
        let Some(jwk) = jwk else { return Ok(None) };
        if key_algorithm(jwk).is_some_and(|a| a != alg) {
            return Err(Refusal::Algorithm(format!(
                "{alg:?} with a key of another algorithm"
            )));
        }
        DecodingKey::from_jwk(jwk)
            .map(Some)
            .map_err(|_| Refusal::UnknownKey(kid.unwrap_or_default().to_owned()))
    }

    /// Fetches the JWKS again for a request that asked at `asked_at`. One attempt at a time,
    /// at most one per [`MIN_REFETCH`]; a request that waited while another attempt started
    /// uses that one (so tokens naming unknown keys cost the issuer a request a second,
    /// however many arrive). A failed fetch keeps the keys held (logged).
    async fn refetch(&self, asked_at: Instant) {
        let mut last = self.refetch.lock().await;
        if last.is_some_and(|at| at > asked_at) {
            return;
        }
        if let Some(since) = last.map(|at| at.elapsed())
            && since < MIN_REFETCH
        {
            tokio::time::sleep(MIN_REFETCH - since).await;
        }
        *last = Some(Instant::now());
        self.fetch_keys().await;
    }

    /// Refreshes old keys unless another request is fetching, or an attempt was made in the
    /// last [`STALE_RETRY`]: with the issuer down, requests go on with the keys held instead
    /// of queueing behind fetches that time out.
    async fn refresh_old_keys(&self) {
        let Ok(mut last) = self.refetch.try_lock() else {
            return;
        };
        if last.is_some_and(|at| at.elapsed() < STALE_RETRY) {
            return;
        }
        *last = Some(Instant::now());
        self.fetch_keys().await;
    }

    async fn fetch_keys(&self) {
        match fetch_json::<JwkSet>(&self.http, &self.url).await {
            Ok(set) => {
                tracing::info!(url = %self.url, keys = set.keys.len(), "JWKS fetched");
                *self.keys.write().await = Keys {
                    set,
                    fetched_at: Instant::now(),
                };
            }
            Err(e) => tracing::warn!(
                error = %e,
                "fetching a JWKS failed; the keys held stay"
            ),
        }
    }
}

/// The algorithm a JWK is for: its `alg`, or what its key type implies.
fn key_algorithm(jwk: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
    use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, KeyAlgorithm};
    match jwk.common.key_algorithm {
        Some(KeyAlgorithm::RS256) => Some(Algorithm::RS256),
        Some(KeyAlgorithm::ES256) => Some(Algorithm::ES256),
        Some(KeyAlgorithm::EdDSA) => Some(Algorithm::EdDSA),
        Some(_) => None,
        None => match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Some(Algorithm::RS256),
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                Some(Algorithm::ES256)
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Some(Algorithm::EdDSA)
            }
            _ => None,
        },
    }
}

/// GETs `url` and reads its JSON.
pub async fn fetch_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, FetchError> {
    let failed = |message: String| FetchError {
        url: url.to_owned(),
        message,
    };
    let response = http.get(url).send().await.map_err(|e| {
        // reqwest's message leaves out why (refused, timed out, TLS …): its sources say it.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        failed(message)
    })?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    response.json().await.map_err(|e| failed(e.to_string()))
}
