//! A STAND-IN for a secured Temporal frontend, for tests only: TLS in front of the suite's
//! plain-text dev server, as a self-hosted cluster with mutual TLS or Temporal Cloud with API
//! keys presents itself. Its certificates come from a [`Pki`] of its own: the CA, the proxy's
//! certificate for `localhost`, a client certificate the CA signed, and a second CA that signed
//! nothing, as PEM files for the product's settings.
//!
//! - [`Check::ClientCertificate`]: the TLS handshake requires a client certificate signed by
//!   the CA; bytes then pass through unchanged to the dev server.
//! - [`Check::ApiKey`]: TLS without client certificates; each HTTP/2 request (gRPC) must carry
//!   `authorization: Bearer <key>`, as Temporal Cloud checks it, else it is answered with gRPC
//!   status 16 (UNAUTHENTICATED); accepted requests are forwarded to the dev server.

use super::pki::Pki;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, combinators::BoxBody};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types};

/// What the proxy requires of a client.
#[derive(Clone)]
pub enum Check {
    ClientCertificate,
    ApiKey(String),
}

/// The PEM files a client of the proxy is configured with.
pub struct Files {
    /// The CA that signed the proxy's certificate and the client's.
    pub ca: PathBuf,
    /// A client certificate and key the proxy accepts.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed neither.
    pub other_ca: PathBuf,
}

/// A running proxy; it stops when dropped.
pub struct TlsProxy {
    /// `127.0.0.1:{port}`.
    pub addr: String,
    pub files: Files,
    _pki: Pki,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn certificates(pem: &str) -> Vec<pki_types::CertificateDer<'static>> {
    use pki_types::pem::PemObject;
    pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

impl TlsProxy {
    /// A proxy to `upstream` (the dev server's `host:port`) that requires `check`.
    pub fn start(upstream: &str, check: Check) -> TlsProxy {
        use pki_types::pem::PemObject;
        let pki = Pki::new();
        let (server_cert, server_key) = pki.server();
        let (client_cert, client_key) = pki.client("runtime-cloud-worker");
        let read = |p: &PathBuf| std::fs::read_to_string(p).expect("PEM file");
        let (ca_pem, server_pem, server_key) =
            (read(&pki.ca), read(&server_cert), read(&server_key));
        let files = Files {
            ca: pki.ca.clone(),
            client_cert,
            client_key,
            other_ca: pki.other_ca.clone(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("protocol versions");
        let builder = match check {
            Check::ClientCertificate => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in certificates(&ca_pem) {
                    roots.add(cert).expect("CA root");
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            }
            Check::ApiKey(_) => builder.with_no_client_auth(),
        };
        let key = pki_types::PrivateKeyDer::from_pem_slice(server_key.as_bytes()).expect("key");
        let mut config = builder
            .with_single_cert(certificates(&server_pem), key)
            .expect("server certificate");
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        // Its own thread and runtime: a test's runtime has one thread, which the stack's
        // blocking waits (a process's start, its log) hold while the processes need the proxy.
        let (ready, addr) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().expect("runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let _ = ready.send(listener.local_addr().expect("addr").to_string());
                let accepting = async {
                    while let Ok((tcp, _)) = listener.accept().await {
                        let (acceptor, upstream, check) =
                            (acceptor.clone(), upstream.clone(), check.clone());
                        tokio::spawn(proxy(tcp, acceptor, upstream, check));
                    }
                };
                tokio::select! {
                    () = accepting => {}
                    _ = stopped => {}
                }
            });
        });
        let addr = addr.recv().expect("the proxy listens");
        TlsProxy {
            addr,
            files,
            _pki: pki,
            stop: Some(stop),
        }
    }
}

/// One client connection: the TLS handshake (a refused one, without a certificate or with
/// another CA, ends here), then what `check` requires.
async fn proxy(tcp: TcpStream, acceptor: TlsAcceptor, upstream: String, check: Check) {
    let Ok(mut tls) = acceptor.accept(tcp).await else {
        return;
    };
    match check {
        Check::ClientCertificate => {
            if let Ok(mut up) = TcpStream::connect(&upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            }
        }
        Check::ApiKey(key) => serve_with_key(tls, upstream, key).await,
    }
}

type Body = BoxBody<Bytes, hyper::Error>;

/// Serves one TLS connection's HTTP/2 requests: those with the key go to `upstream`.
async fn serve_with_key(
    tls: tokio_rustls::server::TlsStream<TcpStream>,
    upstream: String,
    key: String,
) {
    let client: hyper_util::client::legacy::Client<_, hyper::body::Incoming> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http();
    let expected = format!("Bearer {key}");
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            let client = client.clone();
            let allowed = request
                .headers()
                .get("authorization")
                .is_some_and(|v| v.as_bytes() == expected.as_bytes());
            let upstream = upstream.clone();
            async move {
                if !allowed {
                    let refused = hyper::Response::builder()
                        .header("content-type", "application/grpc")
                        .header("grpc-status", "16")
                        .header("grpc-message", "missing or wrong API key")
                        .body(
                            Empty::<Bytes>::new()
                                .map_err(|never| match never {})
                                .boxed(),
                        )
                        .expect("response");
                    return Ok::<_, hyper_util::client::legacy::Error>(refused);
                }
                let path = request
                    .uri()
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_default();
                *request.uri_mut() = format!("http://{upstream}{path}").parse().expect("uri");
                let answer = client.request(request).await?;
                Ok(answer.map(|body| body.boxed()) as hyper::Response<Body>)
            }
        });
    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), service)
        .await;
}
