//! Who may send approvals: each event source's issuer, audience, keys, tenants and event
//! types, read from the TOML file `RUNTIME_CLOUD_INBOUND_SOURCES` names
//! (docs/operations.md, "Signed approvals"):
//!
//! ```toml
//! clock_skew_seconds = 60           # tolerated on `exp` and `nbf`; 60 when absent
//!
//! [[source]]
//! name = "promotions"
//! issuer = "https://promotions.example.com"
//! audience = "runtime-cloud"        # the default
//! jwks_url = "https://promotions.example.com/.well-known/jwks.json"
//! tenants = ["acme", "globex"]
//! events = ["promotion.promotions.v1.promotion-approved"]
//!
//! [[source]]
//! name = "run-control"
//! issuer = "https://run-control.example.com"
//! pem_files = ["/etc/runtime-cloud/inbound/run-control-2026.pem"]   # key id: the file's stem
//! tenants = ["acme"]
//! events = ["runcontrol.approvals.v1.approval-decided"]
//! ```
//!
//! A PEM file holds one public key (P-256 for ES256, RSA for RS256, Ed25519 for EdDSA); a
//! relative path is beside the sources file. Its file name without the extension is its key
//! id, so a token naming a `kid` is checked with that key only. A JWKS is fetched at start and
//! again when a token names a key it does not hold (`auth::jwks`).

use crate::auth::jwks::Jwks;
use anyhow::{Context, bail};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The audience a token must be issued for, unless its source says otherwise.
pub const DEFAULT_AUDIENCE: &str = "runtime-cloud";

/// The clock skew tolerated unless the file says otherwise, in seconds.
pub const DEFAULT_CLOCK_SKEW_SECONDS: u64 = 60;

/// The file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "default_skew")]
    clock_skew_seconds: u64,
    #[serde(default, rename = "source")]
    sources: Vec<SourceConfig>,
}

fn default_skew() -> u64 {
    DEFAULT_CLOCK_SKEW_SECONDS
}

fn default_audience() -> String {
    DEFAULT_AUDIENCE.to_owned()
}

/// One `[[source]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceConfig {
    name: String,
    issuer: String,
    #[serde(default = "default_audience")]
    audience: String,
    #[serde(default)]
    jwks_url: Option<String>,
    #[serde(default)]
    pem_files: Vec<PathBuf>,
    tenants: Vec<String>,
    events: Vec<String>,
}

/// A public key from a PEM file.
pub struct PemKey {
    /// The file's stem.
    pub kid: String,
    pub alg: Algorithm,
    pub key: DecodingKey,
}

/// Where a source's keys come from.
pub enum Keys {
    /// Fetched from its JWKS URL.
    Jwks(Jwks),
    /// Read from PEM files at start.
    Pem(Vec<PemKey>),
}

/// An event source allowed to sign approvals.
pub struct Source {
    /// Its name, for logs.
    pub name: String,
    /// The `iss` of its tokens.
    pub issuer: String,
    /// The `aud` its tokens must name.
    pub audience: String,
    /// The tenants it may act for.
    pub tenants: Vec<String>,
    /// The event types it may sign.
    pub events: Vec<String>,
    pub keys: Keys,
}

/// Every configured source.
pub struct Sources {
    pub sources: Vec<Source>,
    /// Tolerated on `exp` and `nbf`, in seconds.
    pub clock_skew_seconds: u64,
}

impl Sources {
    /// No source: every approval that must be proven is refused.
    pub fn none() -> Self {
        Self {
            sources: Vec::new(),
            clock_skew_seconds: DEFAULT_CLOCK_SKEW_SECONDS,
        }
    }

    /// The sources of the file at `path`, their keys read (PEM) or fetched (JWKS) now: a
    /// source whose keys cannot be had stops the start, naming it.
    pub async fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the inbound sources {}", path.display()))?;
        let file: File = toml::from_str(&text)
            .with_context(|| format!("reading the inbound sources {}", path.display()))?;
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()?;
        let mut sources = Vec::new();
        for source in file.sources {
            let context = || format!("inbound source `{}`", source.name);
            if source.tenants.is_empty() || source.events.is_empty() {
                bail!(
                    "{}: `tenants` and `events` must name at least one",
                    context()
                );
            }
            if let Some(unknown) = source.events.iter().find(|e| {
                !runtime_cloud_models::inbound::TYPES
                    .iter()
                    .any(|(t, _)| t == e)
            }) {
                bail!("{}: unknown event type `{unknown}`", context());
            }
            let keys = match (&source.jwks_url, source.pem_files.is_empty()) {
                (Some(url), true) => {
                    Keys::Jwks(Jwks::fetch(http.clone(), url).await.with_context(context)?)
                }
                (None, false) => Keys::Pem(
                    source
                        .pem_files
                        .iter()
                        // A relative key file is beside the sources file, wherever the
                        // process runs.
                        .map(|f| pem_key(&path.parent().unwrap_or(Path::new("")).join(f)))
                        .collect::<anyhow::Result<_>>()
                        .with_context(context)?,
                ),
                _ => bail!(
                    "{}: give exactly one of `jwks_url` and `pem_files`",
                    context()
                ),
            };
            sources.push(Source {
                name: source.name,
                issuer: source.issuer,
                audience: source.audience,
                tenants: source.tenants,
                events: source.events,
                keys,
            });
        }
        Ok(Self {
            sources,
            clock_skew_seconds: file.clock_skew_seconds,
        })
    }

    /// The source whose tokens `issuer` issues.
    pub fn by_issuer(&self, issuer: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.issuer == issuer)
    }
}

/// The public key in the PEM file at `path`, of whichever of the three kinds it is.
fn pem_key(path: &Path) -> anyhow::Result<PemKey> {
    let pem = std::fs::read(path).with_context(|| format!("reading the key {}", path.display()))?;
    let kid = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (alg, key) = if let Ok(key) = DecodingKey::from_ec_pem(&pem) {
        (Algorithm::ES256, key)
    } else if let Ok(key) = DecodingKey::from_ed_pem(&pem) {
        (Algorithm::EdDSA, key)
    } else if let Ok(key) = DecodingKey::from_rsa_pem(&pem) {
        (Algorithm::RS256, key)
    } else {
        bail!(
            "{} holds no P-256, Ed25519 or RSA public key in PEM",
            path.display()
        );
    };
    Ok(PemKey { kid, alg, key })
}
