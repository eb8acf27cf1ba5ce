//! Configuration and secret references, resolved at apply time by the runner and nowhere
//! else: the `SecretBroker` and `ConfigPlatform` ports and their local adapters.
//!
//! | reference | resolves to |
//! |---|---|
//! | `env://NAME` | the worker's environment variable `NAME` |
//! | `file:///path#key` | `key` (dotted for nested tables) of the TOML or JSON file at `/path` |
//! | `file:///path` | the whole file at `/path` (a kubeconfig, a key) |
//! | any other scheme (`secretbroker://…`, `config://…`) | the service configured for the port ([`HttpReferences`]) |
//!
//! A resolved value is a [`Resolved`]: its `Debug` shows no value, so it cannot reach a log
//! line by accident. A reference that does not resolve is [`Error::PlanInvalid`] naming the
//! reference, never a value.

use crate::Error;
use std::collections::BTreeMap;
use std::path::Path;

/// A value a reference resolved to. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved(String);

impl Resolved {
    /// A fresh random value no one knows: a scratch stack's passphrase.
    pub fn random() -> Self {
        Self(format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ))
    }

    /// The value, for the one place that hands it on (the runner's child process's stdin).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolved(***)")
    }
}

/// Resolves secret references (`secretRefs`).
#[async_trait::async_trait]
pub trait SecretBroker: Send + Sync + 'static {
    async fn resolve(&self, reference: &str) -> Result<Resolved, Error>;

    /// [`Self::resolve`] of an owned reference (for [`resolve_all`]).
    async fn resolve_owned(&self, reference: String) -> Result<Resolved, Error> {
        self.resolve(&reference).await
    }
}

/// Resolves configuration references (`configRefs`).
#[async_trait::async_trait]
pub trait ConfigPlatform: Send + Sync + 'static {
    async fn resolve(&self, reference: &str) -> Result<Resolved, Error>;

    /// [`Self::resolve`] of an owned reference (for [`resolve_all`]).
    async fn resolve_owned(&self, reference: String) -> Result<Resolved, Error> {
        self.resolve(&reference).await
    }
}

/// The local adapter of both ports: `env://` and `file://` references.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalReferences;

#[async_trait::async_trait]
impl SecretBroker for LocalReferences {
    async fn resolve(&self, reference: &str) -> Result<Resolved, Error> {
        resolve_local(reference).await
    }
}

#[async_trait::async_trait]
impl ConfigPlatform for LocalReferences {
    async fn resolve(&self, reference: &str) -> Result<Resolved, Error> {
        resolve_local(reference).await
    }
}

/// A port's adapter: `env://` and `file://` locally, every other scheme from the service at
/// `remote` (the Secret Broker, the Config Platform) when one is configured.
#[derive(Debug, Clone, Default)]
pub struct References {
    pub remote: Option<HttpReferences>,
}

impl References {
    async fn resolve_any(&self, reference: &str) -> Result<Resolved, Error> {
        let local = reference.starts_with("env://") || reference.starts_with("file://");
        match &self.remote {
            Some(remote) if !local => remote.resolve(reference).await,
            _ => resolve_local(reference).await,
        }
    }
}

#[async_trait::async_trait]
impl SecretBroker for References {
    async fn resolve(&self, reference: &str) -> Result<Resolved, Error> {
        self.resolve_any(reference).await
    }
}

#[async_trait::async_trait]
impl ConfigPlatform for References {
    async fn resolve(&self, reference: &str) -> Result<Resolved, Error> {
        self.resolve_any(reference).await
    }
}

/// A Secret Broker or Config Platform over HTTP. The contract (docs/targets.md):
///
/// ```text
/// POST {base}/resolve            Authorization: Bearer {token} (when set)
/// {"reference": "secretbroker://shop/db"}
/// ```
///
/// answered `200 {"value": "…"}`, `404` for a reference the service does not know (the plan
/// fails naming it), anything else retried.
#[derive(Clone)]
pub struct HttpReferences {
    base_url: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl std::fmt::Debug for HttpReferences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpReferences")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl HttpReferences {
    pub fn new(base_url: &str, token: Option<String>) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Unavailable(format!("reference service client: {e}")))?;
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }

    async fn resolve(&self, reference: &str) -> Result<Resolved, Error> {
        #[derive(serde::Deserialize)]
        struct Answer {
            value: String,
        }
        let url = format!("{}/resolve", self.base_url);
        let mut request = self
            .http
            .post(&url)
            .json(&serde_json::json!({ "reference": reference }));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let unavailable = |e: reqwest::Error| Error::Unavailable(format!("{}: {e}", self.base_url));
        let response = request.send().await.map_err(unavailable)?;
        match response.status().as_u16() {
            200 => Ok(Resolved(
                response.json::<Answer>().await.map_err(unavailable)?.value,
            )),
            404 => Err(unresolved(
                reference,
                format!("{} does not know it", self.base_url),
            )),
            status => Err(Error::Unavailable(format!(
                "{} answered {status} for `{reference}`",
                self.base_url
            ))),
        }
    }
}

fn unresolved(reference: &str, why: impl std::fmt::Display) -> Error {
    Error::PlanInvalid(format!("reference `{reference}` does not resolve: {why}"))
}

async fn resolve_local(reference: &str) -> Result<Resolved, Error> {
    if let Some(name) = reference.strip_prefix("env://") {
        return std::env::var(name)
            .map(Resolved)
            .map_err(|_| unresolved(reference, "the worker has no such environment variable"));
    }
    if let Some(rest) = reference.strip_prefix("file://") {
        let (path, key) = match rest.split_once('#') {
            Some((path, key)) => (path, Some(key)),
            None => (rest, None),
        };
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| unresolved(reference, format!("cannot read {path}: {}", e.kind())))?;
        // Without `#key`, the whole file (a kubeconfig, a key).
        let Some(key) = key else {
            return Ok(Resolved(text));
        };
        return lookup(Path::new(path), &text, key).ok_or_else(|| {
            unresolved(
                reference,
                format!("{path} has no key `{key}` with a text value"),
            )
        });
    }
    Err(unresolved(
        reference,
        "no service is configured for this scheme on this worker (env:// and file:// resolve locally)",
    ))
}

/// `key` (dotted) of a TOML or JSON document; a string, number or boolean as text.
fn lookup(path: &Path, text: &str, key: &str) -> Option<Resolved> {
    let json = path.extension().is_some_and(|e| e == "json");
    let doc: serde_json::Value = if json {
        serde_json::from_str(text).ok()?
    } else {
        serde_json::to_value(toml::from_str::<toml::Table>(text).ok()?).ok()?
    };
    let mut node = &doc;
    for part in key.split('.') {
        node = node.get(part)?;
    }
    match node {
        serde_json::Value::String(s) => Some(Resolved(s.clone())),
        serde_json::Value::Number(n) => Some(Resolved(n.to_string())),
        serde_json::Value::Bool(b) => Some(Resolved(b.to_string())),
        _ => None,
    }
}

/// Every reference of `refs` resolved, by key; the first that does not resolve is the error.
pub async fn resolve_all<F, Fut>(
    refs: &BTreeMap<String, String>,
    resolve: F,
) -> Result<BTreeMap<String, Resolved>, Error>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<Resolved, Error>>,
{
    let mut out = BTreeMap::new();
    for (key, reference) in refs {
        let value = resolve(reference.clone()).await.map_err(|e| match e {
            Error::PlanInvalid(why) => Error::PlanInvalid(format!("`{key}`: {why}")),
            other => other,
        })?;
        out.insert(key.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_references_read_toml_and_json_keys() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("secrets.toml");
        std::fs::write(&toml, "[db]\npassword = \"s3cr3t-value\"\nport = 5432\n").unwrap();
        let json = dir.path().join("config.json");
        std::fs::write(&json, r#"{"region": "eu-west-1", "nested": {"on": true}}"#).unwrap();
        let r = |p: &Path, k: &str| format!("file://{}#{k}", p.display());
        let local = LocalReferences;
        let db = SecretBroker::resolve(&local, &r(&toml, "db.password"))
            .await
            .unwrap();
        assert_eq!(db.expose(), "s3cr3t-value");
        assert_eq!(format!("{db:?}"), "Resolved(***)", "Debug never shows it");
        let port = SecretBroker::resolve(&local, &r(&toml, "db.port"))
            .await
            .unwrap();
        assert_eq!(port.expose(), "5432");
        let region = ConfigPlatform::resolve(&local, &r(&json, "region"))
            .await
            .unwrap();
        assert_eq!(region.expose(), "eu-west-1");
        let on = ConfigPlatform::resolve(&local, &r(&json, "nested.on"))
            .await
            .unwrap();
        assert_eq!(on.expose(), "true");
    }

    #[tokio::test]
    async fn a_reference_that_does_not_resolve_names_the_reference_not_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("secrets.toml");
        std::fs::write(&toml, "[db]\npassword = \"s3cr3t-value\"\n").unwrap();
        let local = LocalReferences;
        for reference in [
            format!("file://{}#db.user", toml.display()),
            format!("file://{}#db", toml.display()),
            "file:///nonexistent/secrets.toml#db".into(),
            "file:///nonexistent/kubeconfig".into(),
            "env://RUNTIME_CLOUD_TEST_SURELY_UNSET".into(),
            "secretbroker://shop/db".into(),
        ] {
            let err = SecretBroker::resolve(&local, &reference).await.unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::PlanInvalid(_)), "{reference}: {text}");
            assert!(text.contains(&reference), "{text}");
            assert!(!text.contains("s3cr3t-value"), "{text}");
        }
        // Without `#key` the reference is the whole file.
        let whole = format!("file://{}", toml.display());
        let value = SecretBroker::resolve(&local, &whole).await.unwrap();
        assert_eq!(value.expose(), "[db]\npassword = \"s3cr3t-value\"\n");
    }

    #[tokio::test]
    async fn resolving_a_map_names_the_key_that_failed() {
        let refs = BTreeMap::from([(
            "db".to_owned(),
            "env://RUNTIME_CLOUD_TEST_SURELY_UNSET".to_owned(),
        )]);
        let local = LocalReferences;
        let err = resolve_all(
            &refs,
            |r| async move { SecretBroker::resolve(&local, &r).await },
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("`db`"), "{err}");
    }
}
