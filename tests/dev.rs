//! `runtime-cloud dev`: everything in one process, and nothing lost across a restart.

use crate::common::dev::{Dev, free_port};
use crate::common::eventually;
use std::process::Command;

/// `dev` prints the API URL and a token, runs a whole provisioning run, and after a restart
/// on the same data dir every specification, run and receipt is still there, and the
/// workflow history is still in the file-backed Temporal store.
#[tokio::test]
async fn dev_runs_everything_and_a_restart_keeps_it() {
    let data = tempfile::tempdir().expect("temp dir");
    let (temporal_port, ui_port) = (free_port(), free_port());

    let dev = Dev::start(data.path(), temporal_port, ui_port);
    let api = dev.client();
    api.environment("dev-1", "non-production").await;
    api.declare("dev-1", &[("api", "1.0.0", 2)]).await;
    let id = api.plan_run("dev-1", "baseline").await;
    let before = api.wait_state(&id, "Applied").await;
    dev.stop();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", temporal_port)).is_err(),
        "the Temporal server dev started is stopped with it"
    );

    let dev = Dev::start(data.path(), temporal_port, ui_port);
    let api = dev.client();
    let after = api.run(&id).await;
    assert_eq!(after["state"], "Applied");
    assert_eq!(
        after["applyReceipt"], before["applyReceipt"],
        "the receipt is unchanged"
    );
    let specs = api
        .get("/factory/provisioning/specifications")
        .await
        .expect(200);
    assert_eq!(specs["items"].as_array().map(Vec::len), Some(1));
    let out = Command::new(std::env::var("TEMPORAL_CLI").unwrap_or_else(|_| "temporal".into()))
        .args([
            "workflow",
            "describe",
            "--workflow-id",
            &format!("provisioning-run/{id}"),
        ])
        .args(["--address", &format!("127.0.0.1:{temporal_port}")])
        .output()
        .expect("temporal CLI");
    assert!(
        out.status.success(),
        "the run's workflow survived the restart: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And the restarted product still works.
    let second = api.plan_run("dev-1", "reconciliation").await;
    eventually(30, "the second run to apply", || {
        let api = api.clone();
        let second = second.clone();
        async move { (api.run(&second).await["state"] == "Applied").then_some(()) }
    })
    .await;
    dev.stop();
}

/// A second `dev`, in another folder, on the Temporal server a first one started, is refused
/// with a message naming the first one's data dir (both would take each other's activities);
/// the first one goes on working. The read DB's migrations are one line in the log.
#[tokio::test]
async fn a_second_dev_on_a_temporal_server_another_one_uses_is_refused() {
    let (first_dir, second_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (temporal_port, ui_port) = (free_port(), free_port());
    let first = Dev::start(first_dir.path(), temporal_port, ui_port);
    let api = first.client();
    api.environment("dev-1", "non-production").await;
    api.declare("dev-1", &[("api", "1.0.0", 1)]).await;
    // A run applied: the first one's worker polls the task queue.
    let id = api.plan_run("dev-1", "baseline").await;
    api.wait_state(&id, "Applied").await;

    let refused = match Dev::try_start(second_dir.path(), temporal_port, free_port()) {
        Ok(second) => {
            second.stop();
            panic!("a second dev on the same Temporal server started");
        }
        Err(printed) => printed,
    };
    assert!(
        refused.contains("already runs the workflows of another `runtime-cloud dev`")
            && refused.contains(&first_dir.path().display().to_string()),
        "{refused}"
    );
    // The first one still works.
    let again = api.plan_run("dev-1", "reconciliation").await;
    api.wait_state(&again, "Applied").await;
    first.stop();

    let log = std::fs::read_to_string(first_dir.path().join("dev.stderr")).unwrap();
    // sea-orm-migration's own lines ("Applying migration 'm…'", "Migration 'm…' has been
    // applied") are left out.
    assert!(!log.contains("igration '"), "{log}");
    let at_version = log.lines().filter(|l| l.contains("read DB at version"));
    assert_eq!(at_version.count(), 1, "{log}");
}

/// A read DB made by a version whose migrations this one does not have (one from before the
/// migrations were squashed) is refused by `migrate`, naming the file to delete, and left as
/// it was.
#[test]
fn a_read_db_of_unknown_migrations_is_refused_saying_what_to_do() {
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("runtime-cloud.db");
    let migrate = || {
        Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
            .arg("migrate")
            .env("RUNTIME_CLOUD_DATA_DIR", data.path())
            .env_remove("DATABASE_URL")
            .output()
            .expect("runtime-cloud migrate")
    };
    assert!(migrate().status.success(), "a fresh read DB migrates");
    let old = "m20261129_000001_create_read_tables";
    let sql = format!("INSERT INTO seaql_migrations VALUES ('{old}', 1764374400)");
    let inserted = Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()"])
        .arg(&db)
        .arg(&sql)
        .status()
        .expect("python3");
    assert!(inserted.success());

    let refused = migrate();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("made by another version of Runtime Cloud")
            && stderr.contains(old)
            && stderr.contains(&format!("delete {}", db.display())),
        "{stderr}"
    );
}
