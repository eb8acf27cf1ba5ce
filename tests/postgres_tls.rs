//! The read DB over TLS with `sslmode=verify-full`: a PostgreSQL of the test's own that rejects
//! every connection without TLS (`common::postgres_tls`). With the CA that signed its
//! certificate, migrations, the worker and the API run a production run end to end on it;
//! trusting another CA, or without TLS, `runtime-cloud migrate` fails and says why.

use crate::common::pki::Pki;
use crate::common::postgres_tls::TlsPostgres;
use crate::common::{Stack, StackOptions, production_run};
use std::process::{Command, Stdio};

/// `runtime-cloud migrate` against `url`: it must fail; its stderr.
fn migrate_refused(url: &str) -> String {
    let dir = tempfile::tempdir().expect("dir");
    let out = Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
        .arg("migrate")
        .env("RUNTIME_CLOUD_DATA_DIR", dir.path())
        .env("DATABASE_URL", url)
        .stdin(Stdio::null())
        .output()
        .expect("runtime-cloud migrate");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "migrated with {url}: {stderr}");
    stderr
}

#[tokio::test]
async fn the_read_db_is_reached_with_verify_full_and_only_so() {
    let pki = Pki::new();
    let postgres = TlsPostgres::start(&pki);
    let url = postgres.url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        pki.ca.display()
    ));
    let stack = Stack::with(StackOptions {
        database_url: Some(url),
        ..Default::default()
    })
    .await;
    production_run(&stack).await;
    assert_eq!(stack.count("provisioning_runs").await, 1);

    let untrusted = migrate_refused(&postgres.url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        pki.other_ca.display()
    )));
    assert!(
        untrusted.contains("connecting to the read DB") && untrusted.contains("certificate"),
        "{untrusted}"
    );
    let plain = migrate_refused(&postgres.url("sslmode=disable"));
    assert!(plain.contains("no encryption"), "{plain}");
}
