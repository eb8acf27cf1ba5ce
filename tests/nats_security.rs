//! NATS as a secured estate runs it: a `nats-server` of the test's own with TLS that verifies
//! clients (`verify: true`), an account whose users carry the least permissions
//! docs/deploy.md gives (the product's own user, and an event source that may publish only its
//! subject), and a second server that takes a token. The outbox relay and the inbound consumer
//! connect with each credential kind; a refused credential or TLS handshake makes the API
//! unready and says why.

use crate::common::nats::Nats;
use crate::common::pki::Pki;
use crate::common::{Stack, StackOptions, eventually, text};
use serde_json::{Value, json};
use std::path::Path;

/// The product user's permissions, exactly as docs/deploy.md ("NATS") gives them.
const PRODUCT_PERMISSIONS: &str = r#"{
    publish: [
      "provisioning.>",
      "runtime-cloud.dead-letter.>",
      "$JS.API.STREAM.INFO.RUNTIME_CLOUD", "$JS.API.STREAM.CREATE.RUNTIME_CLOUD",
      "$JS.API.STREAM.INFO.RUNTIME_CLOUD_INBOUND", "$JS.API.STREAM.CREATE.RUNTIME_CLOUD_INBOUND",
      "$JS.API.STREAM.MSG.GET.RUNTIME_CLOUD_INBOUND",
      "$JS.API.STREAM.INFO.RUNTIME_CLOUD_DEAD_LETTER", "$JS.API.STREAM.CREATE.RUNTIME_CLOUD_DEAD_LETTER",
      "$JS.API.CONSUMER.INFO.RUNTIME_CLOUD_INBOUND.runtime-cloud-inbox",
      "$JS.API.CONSUMER.CREATE.RUNTIME_CLOUD_INBOUND.runtime-cloud-inbox",
      "$JS.API.CONSUMER.MSG.NEXT.RUNTIME_CLOUD_INBOUND.runtime-cloud-inbox",
      "$JS.ACK.RUNTIME_CLOUD_INBOUND.runtime-cloud-inbox.>"
    ]
    subscribe: ["_INBOX.>"]
  }"#;

/// The environment service may publish its one subject (and hear JetStream's acks).
const SOURCE_PERMISSIONS: &str = r#"{
    publish: ["environment.environments.v1.environment-created"]
    subscribe: ["_INBOX.>"]
  }"#;

fn quoted(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// The TLS block of a server with `pki`'s certificate, verifying clients when `verify`.
fn tls_block(pki: &Pki, verify: bool) -> String {
    let (cert, key) = pki.server();
    format!(
        "tls {{ cert_file: {}, key_file: {}, ca_file: {}, verify: {verify}, timeout: 5 }}",
        quoted(&cert),
        quoted(&key),
        quoted(&pki.ca)
    )
}

/// `GET /readyz` until `done` holds of its body.
async fn readiness(stack: &Stack, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(60, what, || {
        let url = format!("{}/readyz", stack.base_url);
        let done = &done;
        async move {
            let body: Value = reqwest::get(url).await.ok()?.json().await.ok()?;
            done(&body).then_some(body)
        }
    })
    .await
}

/// The inbound consumer has fetched from NATS (`/fleet/health` lists it only then).
async fn consumer_connected(stack: &Stack) {
    let api = stack.operator("acme");
    eventually(60, "the inbound consumer to fetch from NATS", || {
        let api = api.clone();
        async move {
            let health = api.get("/fleet/health").await.body;
            health["dependencies"]
                .as_array()?
                .iter()
                .any(|d| d["name"] == "nats" && d["status"] == "ok")
                .then_some(())
        }
    })
    .await;
}

/// TLS with a verified client certificate on an account with least permissions: with a user
/// and password (the password from a file) events flow both ways; with an NKey seed the
/// consumer connects; a wrong password, and a client without a certificate, leave the API
/// unready with the server's reason.
#[tokio::test]
async fn the_product_talks_to_a_verifying_nats_with_each_credential_and_least_permissions() {
    let pki = Pki::new();
    let nkey = nkeys::KeyPair::new_user();
    let nats = Nats::with_config(|port, store| {
        format!(
            r#"listen: 127.0.0.1:{port}
jetstream {{ store_dir: {} }}
{}
PRODUCT = {PRODUCT_PERMISSIONS}
SOURCE = {SOURCE_PERMISSIONS}
accounts {{
  RUNTIME {{
    jetstream: enabled
    users: [
      {{ user: runtime-cloud, password: rc-pass, permissions: $PRODUCT }}
      {{ nkey: {}, permissions: $PRODUCT }}
      {{ user: environments, password: env-pass, permissions: $SOURCE }}
      {{ user: admin, password: admin-pass }}
    ]
  }}
}}
"#,
            quoted(store),
            tls_block(&pki, true),
            nkey.public_key()
        )
    });
    let url = format!(
        "tls://127.0.0.1:{}",
        nats.addr().rsplit(':').next().unwrap_or_default()
    );
    let (client_cert, client_key) = pki.client("runtime-cloud");
    let dir = tempfile::tempdir().expect("dir");
    let password = dir.path().join("nats-password");
    std::fs::write(&password, "rc-pass\n").expect("password file");
    let seed = dir.path().join("nats-seed");
    std::fs::write(&seed, nkey.seed().expect("seed")).expect("seed file");
    let tls = vec![
        ("NATS_URL".to_owned(), url.clone()),
        ("NATS_TLS_CA_FILE".to_owned(), pki.ca.display().to_string()),
        (
            "NATS_TLS_CERT_FILE".to_owned(),
            client_cert.display().to_string(),
        ),
        (
            "NATS_TLS_KEY_FILE".to_owned(),
            client_key.display().to_string(),
        ),
    ];
    let with = |more: &[(&str, String)]| {
        let mut env = tls.clone();
        env.extend(more.iter().map(|(k, v)| (k.to_string(), v.clone())));
        StackOptions {
            env,
            ..Default::default()
        }
    };

    // User and password: an event source's EnvironmentCreated plans and applies a run, and the
    // relay publishes the run's events.
    let stack = Stack::with(with(&[
        ("NATS_USER", "runtime-cloud".into()),
        ("NATS_PASSWORD_FILE", password.display().to_string()),
    ]))
    .await;
    consumer_connected(&stack).await;
    let (source_cert, source_key) = pki.client("environments");
    let source = async_nats::ConnectOptions::new()
        .user_and_password("environments".into(), "env-pass".into())
        .add_root_certificates(pki.ca.clone())
        .add_client_certificate(source_cert, source_key)
        .require_tls(true)
        .connect(url.as_str())
        .await
        .expect("the environment service connects");
    let created = json!({ "specversion": "1.0", "id": "env-created-1", "source": "environments",
        "type": "environment.environments.v1.environment-created",
        "data": { "tenantId": stack.tenant("acme"), "environmentId": "dev-eu", "projectId": "shop",
                  "class": "non-production",
                  "specification": { "programRef": "git://infra//shop", "programVersion": "a1b2c3d4e5",
                                     "workloads": [{ "name": "api", "kind": "deployment",
                                                     "version": "1.0.0", "replicas": 1 }] } } });
    let js = async_nats::jetstream::new(source.clone());
    js.publish(
        "environment.environments.v1.environment-created",
        created.to_string().into(),
    )
    .await
    .expect("publish")
    .await
    .expect("stored");
    let api = stack.operator("acme");
    let run = eventually(60, "the run the event planned", || {
        let api = api.clone();
        async move {
            let runs = api.list_runs("?environmentId=dev-eu").await;
            runs["items"].get(0).map(|r| text(&r["provisioningRunId"]))
        }
    })
    .await;
    api.wait_state(&run, "Applied").await;
    let (admin_cert, admin_key) = pki.client("admin");
    let admin = async_nats::ConnectOptions::new()
        .user_and_password("admin".into(), "admin-pass".into())
        .add_root_certificates(pki.ca.clone())
        .add_client_certificate(admin_cert, admin_key)
        .connect(url.as_str())
        .await
        .expect("admin connects");
    let relayed = eventually(60, "the relay to publish the run's events", || {
        let js = async_nats::jetstream::new(admin.clone());
        async move {
            let mut stream = js.get_stream("RUNTIME_CLOUD").await.ok()?;
            let info = stream.info().await.ok()?;
            (info.state.messages >= 2).then_some(info.state.messages)
        }
    })
    .await;
    assert!(relayed >= 2, "{relayed}");
    let ready = readiness(&stack, "ready", |b| b["status"] == "ok").await;
    assert_eq!(ready["checks"]["nats"], true, "{ready}");
    drop(stack);

    // An NKey seed, from a file.
    let stack = Stack::with(with(&[("NATS_NKEY_SEED_FILE", seed.display().to_string())])).await;
    consumer_connected(&stack).await;
    drop(stack);

    // A wrong password: unready, and why.
    let stack = Stack::with(with(&[
        ("NATS_USER", "runtime-cloud".into()),
        ("NATS_PASSWORD", "guess".into()),
    ]))
    .await;
    let refused = readiness(&stack, "unready on a wrong password", |b| {
        b["status"] == "unavailable"
    })
    .await;
    assert_eq!(refused["checks"]["nats"], false, "{refused}");
    assert!(
        text(&refused["natsRefusal"]).contains("authorization violation"),
        "{refused}"
    );
    drop(stack);

    // No client certificate for a server that verifies clients.
    let mut options = with(&[
        ("NATS_USER", "runtime-cloud".into()),
        ("NATS_PASSWORD", "rc-pass".into()),
    ]);
    options
        .env
        .retain(|(k, _)| k != "NATS_TLS_CERT_FILE" && k != "NATS_TLS_KEY_FILE");
    let stack = Stack::with(options).await;
    let refused = readiness(&stack, "unready without a client certificate", |b| {
        b["status"] == "unavailable"
    })
    .await;
    assert!(
        !text(&refused["natsRefusal"]).is_empty(),
        "the reason is given: {refused}"
    );
}

/// A server that takes a token (over TLS, its CA trusted by file): the consumer connects with
/// it, and not without it.
#[tokio::test]
async fn the_product_authenticates_to_nats_with_a_token() {
    let pki = Pki::new();
    let nats = Nats::with_config(|port, store| {
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {} }}\n{}\nauthorization {{ token: \"t0k3n-9\" }}\n",
            quoted(store),
            tls_block(&pki, false)
        )
    });
    let env = |token: &str| StackOptions {
        env: vec![
            ("NATS_URL".into(), format!("tls://{}", nats.addr())),
            ("NATS_TLS_CA_FILE".into(), pki.ca.display().to_string()),
            ("NATS_TOKEN".into(), token.into()),
        ],
        ..Default::default()
    };
    let stack = Stack::with(env("t0k3n-9")).await;
    consumer_connected(&stack).await;
    drop(stack);
    let stack = Stack::with(env("wrong")).await;
    let refused = readiness(&stack, "unready on a wrong token", |b| {
        b["status"] == "unavailable"
    })
    .await;
    assert!(
        text(&refused["natsRefusal"]).contains("authorization violation"),
        "{refused}"
    );
}

/// A NATS JWT (`ed25519-nkey`) with `claims`, issued and signed by `issuer`.
fn nats_jwt(issuer: &nkeys::KeyPair, subject: &str, nats: Value) -> String {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let header = b64(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let claims = json!({ "jti": uuid::Uuid::new_v4().simple().to_string().to_uppercase(),
                         "iat": chrono::Utc::now().timestamp(), "iss": issuer.public_key(),
                         "name": subject, "sub": subject, "nats": nats });
    let payload = b64(claims.to_string().as_bytes());
    let signature = issuer
        .sign(format!("{header}.{payload}").as_bytes())
        .expect("sign");
    format!("{header}.{payload}.{}", b64(&signature))
}

/// Decentralized auth: an operator, an account with JetStream and a user whose `.creds` file
/// (its JWT and seed) is all the product is given; the consumer connects with it.
#[tokio::test]
async fn the_product_authenticates_to_nats_with_a_creds_file() {
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let system = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let unlimited = json!({ "subs": -1, "data": -1, "payload": -1, "imports": -1,
                            "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
                            "mem_storage": -1, "disk_storage": -1, "streams": -1,
                            "consumer": -1 });
    let operator_jwt = nats_jwt(
        &operator,
        &operator.public_key(),
        json!({ "type": "operator", "version": 2, "system_account": system.public_key() }),
    );
    let account_jwt = nats_jwt(
        &operator,
        &account.public_key(),
        json!({ "type": "account", "version": 2, "limits": unlimited }),
    );
    let system_jwt = nats_jwt(
        &operator,
        &system.public_key(),
        json!({ "type": "account", "version": 2 }),
    );
    let user_jwt = nats_jwt(
        &account,
        &user.public_key(),
        json!({ "type": "user", "version": 2, "subs": -1, "data": -1, "payload": -1 }),
    );
    let nats = Nats::with_config(|port, store| {
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {} }}\noperator: {operator_jwt}\n\
             system_account: {}\nresolver: MEMORY\nresolver_preload: {{\n  {}: {account_jwt}\n  {}: {system_jwt}\n}}\n",
            quoted(store),
            system.public_key(),
            account.public_key(),
            system.public_key(),
        )
    });
    let dir = tempfile::tempdir().expect("dir");
    let creds = dir.path().join("runtime-cloud.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().expect("seed")
        ),
    )
    .expect("creds file");
    let stack = Stack::with(StackOptions {
        env: vec![
            ("NATS_URL".into(), nats.url()),
            ("NATS_CREDS_FILE".into(), creds.display().to_string()),
        ],
        ..Default::default()
    })
    .await;
    consumer_connected(&stack).await;
}
