//! A real `nats-server -js` of a test's own, on its own port (Debian's `nats-server`), so a
//! test can stop and restart it.

use futures::StreamExt;
use serde_json::Value;
use std::process::{Child, Command, Stdio};

/// A `nats-server -js` of this test's own.
pub struct Nats {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// A configuration file (`-c`), written by [`Nats::with_config`].
    config: Option<std::path::PathBuf>,
}

impl Nats {
    pub fn start() -> Nats {
        let port = super::ports::free_port();
        let mut nats = Nats {
            child: None,
            port,
            dir: tempfile::tempdir().expect("dir"),
            config: None,
        };
        nats.restart();
        nats
    }

    /// A server run with the configuration `config` gives for its port and JetStream store
    /// directory (TLS, accounts, permissions: whatever the test is about).
    pub fn with_config(config: impl FnOnce(u16, &std::path::Path) -> String) -> Nats {
        let port = super::ports::free_port();
        let dir = tempfile::tempdir().expect("dir");
        let store = dir.path().join("jetstream");
        let file = dir.path().join("nats.conf");
        std::fs::write(&file, config(port, &store)).expect("nats.conf");
        let mut nats = Nats {
            child: None,
            port,
            dir,
            config: Some(file),
        };
        nats.restart();
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:{port}`, for a [`super::proxy::Proxy`] in front of it.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn restart(&mut self) {
        let bin = std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let mut command = Command::new(bin);
        match &self.config {
            Some(file) => command.arg("-c").arg(file),
            None => command
                .args([
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-js",
                    "-sd",
                ])
                .arg(self.dir.path()),
        };
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server (Debian package nats-server)");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nats-server did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Every message in the stream: (subject, Nats-Msg-Id, body).
    pub async fn messages(&self) -> Vec<(String, String, Value)> {
        let client = async_nats::connect(self.url()).await.expect("connect NATS");
        let js = async_nats::jetstream::new(client);
        let Ok(mut stream) = js.get_stream("RUNTIME_CLOUD").await else {
            return Vec::new();
        };
        let count = stream.info().await.map(|i| i.state.messages).unwrap_or(0);
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig::default())
            .await
            .expect("ordered consumer");
        let mut out = Vec::new();
        if count == 0 {
            return out;
        }
        let mut messages = consumer.messages().await.expect("messages");
        while let Some(Ok(m)) = messages.next().await {
            let id = m
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|v| v.to_string())
                .unwrap_or_default();
            out.push((
                m.subject.to_string(),
                id,
                serde_json::from_slice(&m.payload).unwrap_or(Value::Null),
            ));
            if out.len() as u64 >= count {
                break;
            }
        }
        out
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}
