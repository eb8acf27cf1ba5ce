//! A Temporal dev server of a test's own, on a file store, so the test can SIGKILL it and start
//! it again on the same port and store (the workflows survive, as on a real cluster's
//! persistence) without disturbing the suite's shared server.

use super::ports::free_port;
use super::{Proc, eventually};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A `temporal server start-dev` of this test's own.
pub struct OwnTemporal {
    pub port: u16,
    db_file: PathBuf,
    proc: Option<Proc>,
}

impl OwnTemporal {
    /// Starts a server whose store is `dir/temporal.db` (returns before it answers: see
    /// [`OwnTemporal::wait_up`]).
    pub fn start(dir: &Path) -> OwnTemporal {
        let mut t = OwnTemporal {
            port: free_port(),
            db_file: dir.join("temporal.db"),
            proc: None,
        };
        t.spawn();
        t
    }

    /// Its frontend, `127.0.0.1:{port}`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts the server process (again) on the same port and store.
    pub fn spawn(&mut self) {
        let mut cmd = Command::new(std::env::var("TEMPORAL_CLI").unwrap_or("temporal".into()));
        cmd.args(["server", "start-dev", "--ip", "127.0.0.1", "--headless"])
            .args(["--log-level", "error", "--port", &self.port.to_string()])
            .args(["--ui-port", &free_port().to_string()])
            .args(["--dynamic-config-value", "matching.enableFairness=true"])
            .arg("--db-filename")
            .arg(&self.db_file);
        for attr in [
            "TenantId",
            "EnvironmentId",
            "ProvisioningState",
            "RunKind",
            "ProposalState",
            "RolloutState",
        ] {
            cmd.args(["--search-attribute", &format!("{attr}=Keyword")]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start temporal");
        self.proc = Some(Proc {
            child,
            name: "temporal",
        });
    }

    /// Waits until the server answers a visibility call (its namespace is ready).
    pub async fn wait_up(&self) {
        let address = self.address();
        eventually(90, "the test's Temporal server to answer", || async {
            runtime_cloud_temporal::connect(&address, "default")
                .await
                .ok()?
                .count_workflows("", Default::default())
                .await
                .ok()
        })
        .await;
    }

    /// SIGKILL, and waits until the port refuses connections: the process killed is the
    /// server itself, not a launcher that would leave it running.
    pub async fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
        let port = self.port;
        eventually(
            30,
            "the killed Temporal server's port to close",
            || async move {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .is_err()
                    .then_some(())
            },
        )
        .await;
    }
}
