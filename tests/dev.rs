//! `runtime-cloud dev`: everything in one process, and nothing lost across a restart.

use crate::common::{Api, eventually};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Dev {
    child: Child,
    api: String,
    token: String,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dev {
    fn start(data_dir: &std::path::Path, temporal_port: u16, ui_port: u16) -> Dev {
        let mut child = Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
            .args([
                "dev",
                "--temporal-port",
                &temporal_port.to_string(),
                "--ui-port",
                &ui_port.to_string(),
            ])
            .env("RUNTIME_CLOUD_DATA_DIR", data_dir)
            .env("RUNTIME_CLOUD_LISTEN", "127.0.0.1:0")
            .env_remove("DATABASE_URL")
            .env_remove("RUNTIME_CLOUD_JWT_SECRET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn dev");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (mut api, mut token) = (String::new(), String::new());
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(url) = line.trim().strip_prefix("API:") {
                api = url.trim().to_owned();
            }
            if let Some(t) = line.trim().strip_prefix("export TOKEN=") {
                token = t.to_owned();
                break;
            }
        }
        assert!(
            !api.is_empty() && !token.is_empty(),
            "dev did not print its API URL and token"
        );
        std::thread::spawn(move || for _ in lines {});
        Dev { child, api, token }
    }

    /// SIGTERM, as Ctrl-C would: dev stops its worker, API and the Temporal server it started.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait dev");
        assert!(status.success(), "dev exited with {status}");
    }

    fn client(&self) -> Api {
        Api::with_token(&self.api, &self.token)
    }
}

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
