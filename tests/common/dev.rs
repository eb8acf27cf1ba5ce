//! `runtime-cloud dev` as a process, as a user starts it: the API URL and the dev token read
//! from what it prints.

use super::Api;
pub use super::ports::free_port;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running `runtime-cloud dev`; killed if the test ends without [`Dev::stop`].
pub struct Dev {
    child: Child,
    /// The API's URL, as printed.
    pub api: String,
    /// The dev token, as printed.
    pub token: String,
}

impl Drop for Dev {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SIGTERM first, so dev stops the Temporal server it started.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dev {
    /// Starts dev on `data_dir` with its Temporal server on `temporal_port` and its UI on
    /// `ui_port`, the API on a free port; returns once it printed the URL and the token.
    pub fn start(data_dir: &std::path::Path, temporal_port: u16, ui_port: u16) -> Dev {
        Dev::try_start(data_dir, temporal_port, ui_port).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Dev::start`], or what dev printed on stderr when it exited without starting.
    pub fn try_start(
        data_dir: &std::path::Path,
        temporal_port: u16,
        ui_port: u16,
    ) -> Result<Dev, String> {
        std::fs::create_dir_all(data_dir).expect("data dir");
        let stderr_path = data_dir.join("dev.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("dev's stderr file");
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
            .stderr(stderr)
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
        if api.is_empty() || token.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            let printed = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            return Err(format!(
                "dev did not print its API URL and token; its stderr:\n{printed}"
            ));
        }
        // Keep draining stdout, so dev never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Dev { child, api, token })
    }

    /// Starts dev on `data_dir` with free ports. A port found free can be taken before the
    /// Temporal server binds it (by another test's listener or any outgoing connection, in a
    /// suite that runs tests in parallel), and the server picks more free ports of its own
    /// (HTTP API, metrics): dev then exits saying an address is in use, and gets other ports.
    /// Anything else fails the test.
    pub fn start_anywhere(data_dir: &std::path::Path) -> Dev {
        let mut tries = 0;
        loop {
            match Dev::try_start(data_dir, free_port(), free_port()) {
                Ok(dev) => return dev,
                Err(e) if e.contains("address already in use") && tries < 2 => tries += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// SIGTERM, as Ctrl-C would: dev stops its worker, API and the Temporal server it started,
    /// and exits cleanly.
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait dev");
        assert!(status.success(), "dev exited with {status}");
    }

    /// The operator the dev token is.
    pub fn client(&self) -> Api {
        Api::with_token(&self.api, &self.token)
    }
}
