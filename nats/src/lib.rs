//! How the product reaches NATS: the URL, the credential the server asks for (user and
//! password, a token, an NKey seed, or a `.creds` file) and TLS (a CA bundle, a client
//! certificate). One [`NatsOptions`] serves the outbox relay (workers) and the inbound consumer
//! (API).

use std::path::PathBuf;

/// Where NATS is and how to authenticate to it.
#[derive(Clone, Default)]
pub struct NatsOptions {
    /// `nats://…` or `tls://…` (the latter requires TLS).
    pub url: String,
    /// User and password.
    pub user: Option<(String, String)>,
    /// An authentication token.
    pub token: Option<String>,
    /// An NKey user seed (`SU…`).
    pub nkey_seed: Option<String>,
    /// A `.creds` file (user JWT and seed).
    pub creds_file: Option<PathBuf>,
    /// A PEM CA bundle the server's certificate must chain to; requires TLS.
    pub tls_ca: Option<PathBuf>,
    /// A client certificate and key, for a server that verifies clients.
    pub tls_client: Option<(PathBuf, PathBuf)>,
}

// Credentials stay out of logs.
impl std::fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsOptions")
            .field("url", &self.url)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("nkey_seed", &self.nkey_seed.as_ref().map(|_| "***"))
            .field("creds_file", &self.creds_file)
            .field("tls_ca", &self.tls_ca)
            .field("tls_client", &self.tls_client.as_ref().map(|(c, _)| c))
            .finish()
    }
}

/// Why NATS could not be reached.
#[derive(Debug, Clone, thiserror::Error)]
#[error("NATS at {url}: {message}")]
pub struct ConnectError {
    pub url: String,
    pub message: String,
    /// The server refused the credential or the TLS handshake failed: trying again will not
    /// help until the configuration changes (readiness says so).
    pub misconfigured: bool,
}

impl NatsOptions {
    /// Connects as configured.
    pub async fn connect(&self) -> Result<async_nats::Client, ConnectError> {
        let failed = |message: String, misconfigured: bool| ConnectError {
            url: self.url.clone(),
            message,
            misconfigured,
        };
        let mut options = async_nats::ConnectOptions::new();
        if let Some(path) = &self.creds_file {
            options = options.credentials_file(path).await.map_err(|e| {
                failed(
                    format!("reading the credentials {}: {e}", path.display()),
                    true,
                )
            })?;
        }
        if let Some((user, password)) = &self.user {
            options = options.user_and_password(user.clone(), password.clone());
        }
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if let Some(seed) = &self.nkey_seed {
            options = options.nkey(seed.clone());
        }
        if let Some(ca) = &self.tls_ca {
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let Some((cert, key)) = &self.tls_client {
            options = options
                .add_client_certificate(cert.clone(), key.clone())
                .require_tls(true);
        }
        options.connect(self.url.as_str()).await.map_err(|e| {
            use async_nats::ConnectErrorKind as K;
            let misconfigured = matches!(
                e.kind(),
                K::Authentication | K::AuthorizationViolation | K::Tls
            ) || refused_by_tls(&e);
            // The kind's words and the cause's, which names the certificate or the refusal.
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                let text = cause.to_string();
                if !message.contains(&text) {
                    message = format!("{message}: {text}");
                }
                source = cause.source();
            }
            failed(message, misconfigured)
        })
    }
}

/// Whether a TLS handshake failed anywhere in `e`'s causes: a server that refuses the client's
/// certificate (or has none to ask for) answers with an alert after the handshake, which the
/// client reads as an I/O error carrying the TLS one.
fn refused_by_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = cause {
        if error.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = error.source();
    }
    false
}
