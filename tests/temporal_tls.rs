//! The product on a secured Temporal: the API and the worker dial a TLS frontend (the stand-in
//! in `common::tls_proxy`, in front of the suite's dev server) that requires a client
//! certificate, or an API key as Temporal Cloud does, and a production run goes end to end.
//! Without the certificate, with a CA that did not sign the frontend's, or with a wrong key,
//! the API refuses to start and says why.

use crate::common::tls_proxy::{Check, TlsProxy};
use crate::common::{Stack, StackOptions, production_run, temporal_address};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `runtime-cloud api` with `env`: it must exit on its own (within a minute) with an error;
/// its stderr.
fn api_refuses(env: &[(&str, String)]) -> String {
    let dir = tempfile::tempdir().expect("dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
        .arg("api")
        .env("RUNTIME_CLOUD_DATA_DIR", dir.path())
        .env("RUNTIME_CLOUD_LISTEN", "127.0.0.1:0")
        .env("RUNTIME_CLOUD_JWT_SECRET", "tls-test")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runtime-cloud api");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the API kept running with {env:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert!(!status.success(), "the API started: {stderr}");
    stderr
}

/// Mutual TLS: with the CA bundle, the server name and the client certificate a production
/// run goes end to end through the frontend; without the certificate, or trusting another CA,
/// the API does not start and names the cause.
#[tokio::test]
async fn a_production_run_goes_through_a_frontend_that_requires_a_client_certificate() {
    let proxy = TlsProxy::start(&temporal_address(), Check::ClientCertificate);
    let file = |p: &std::path::Path| p.display().to_string();
    let tls = [
        ("TEMPORAL_ADDRESS", proxy.addr.clone()),
        ("TEMPORAL_TLS_CA_FILE", file(&proxy.files.ca)),
        ("TEMPORAL_TLS_SERVER_NAME", "localhost".to_owned()),
        ("TEMPORAL_TLS_CERT_FILE", file(&proxy.files.client_cert)),
        ("TEMPORAL_TLS_KEY_FILE", file(&proxy.files.client_key)),
    ];
    let stack = Stack::with(StackOptions {
        env: tls
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Default::default()
    })
    .await;
    production_run(&stack).await;

    let without_certificate = api_refuses(&tls[..3]);
    assert!(
        without_certificate.contains("cannot connect to Temporal"),
        "{without_certificate}"
    );
    let mut other_ca = tls.to_vec();
    other_ca[1].1 = file(&proxy.files.other_ca);
    let untrusted = api_refuses(&other_ca);
    assert!(
        untrusted.contains("cannot connect to Temporal") && untrusted.contains("UnknownIssuer"),
        "{untrusted}"
    );
}

/// An API key (Temporal Cloud): read from its file, sent as `Authorization: Bearer …` over TLS;
/// a production run goes end to end. A wrong key is refused at start.
#[tokio::test]
async fn an_api_key_is_sent_as_temporal_cloud_expects() {
    let proxy = TlsProxy::start(&temporal_address(), Check::ApiKey("k-7f3a".into()));
    let dir = tempfile::tempdir().expect("dir");
    let key_file = dir.path().join("temporal-api-key");
    std::fs::write(&key_file, "k-7f3a\n").expect("key file");
    let env = [
        ("TEMPORAL_ADDRESS", proxy.addr.clone()),
        ("TEMPORAL_TLS_CA_FILE", proxy.files.ca.display().to_string()),
        ("TEMPORAL_TLS_SERVER_NAME", "localhost".to_owned()),
        ("TEMPORAL_API_KEY_FILE", key_file.display().to_string()),
    ];
    let stack = Stack::with(StackOptions {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Default::default()
    })
    .await;
    production_run(&stack).await;

    let mut wrong = env[..3].to_vec();
    wrong.push(("TEMPORAL_API_KEY", "k-wrong".to_owned()));
    let refused = api_refuses(&wrong);
    assert!(
        refused.contains("cannot connect to Temporal") && refused.contains("API key"),
        "{refused}"
    );
}
