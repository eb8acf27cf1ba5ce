//! A PostgreSQL of the test's own that takes only TLS connections (`ssl = on`, `hostssl` in
//! `pg_hba.conf`, every other connection rejected), its certificate signed by a [`Pki`]: the
//! product must reach it with `sslmode=verify-full`. Debian's PostgreSQL binaries; the server
//! runs as the `postgres` user (it refuses to run as root).

use super::pki::Pki;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running server; stopped when dropped.
pub struct TlsPostgres {
    pub port: u16,
    data: PathBuf,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

/// The newest PostgreSQL server binaries Debian installed.
fn bin(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("Debian's PostgreSQL under /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    versions.sort();
    versions
        .last()
        .expect("a PostgreSQL version")
        .join("bin")
        .join(name)
}

/// `command` as the `postgres` user.
fn as_postgres(command: &Path) -> Command {
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", "postgres", "--"]).arg(command);
    cmd
}

/// Makes `path` the `postgres` user's.
fn give(path: &Path) {
    let status = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success(), "chown {}", path.display());
}

impl TlsPostgres {
    pub fn start(pki: &Pki) -> TlsPostgres {
        let dir = tempfile::tempdir().expect("dir");
        let data = dir.path().join("data");
        let (cert, key) = pki.server();
        let server_cert = dir.path().join("server.crt");
        let server_key = dir.path().join("server.key");
        std::fs::copy(cert, &server_cert).expect("certificate");
        std::fs::copy(key, &server_key).expect("key");
        give(dir.path());
        let status = Command::new("chmod")
            .arg("0600")
            .arg(&server_key)
            .status()
            .expect("chmod");
        assert!(status.success());
        let init = as_postgres(&bin("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("initdb");
        assert!(init.success(), "initdb");
        // TLS or nothing.
        std::fs::write(
            data.join("pg_hba.conf"),
            "hostssl all all 127.0.0.1/32 trust\nhostnossl all all 0.0.0.0/0 reject\n",
        )
        .expect("pg_hba.conf");
        give(&data);
        let port = super::ports::free_port();
        let child = as_postgres(&bin("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string()])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "ssl=on",
            ])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.path().display()))
            .arg("-c")
            .arg(format!("ssl_cert_file={}", server_cert.display()))
            .arg("-c")
            .arg(format!("ssl_key_file={}", server_key.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("postgres");
        let server = TlsPostgres {
            port,
            data,
            child: Some(child),
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let ready = Command::new(bin("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "postgres did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }

    /// The URL of its `postgres` database with `query` (`sslmode=…`).
    pub fn url(&self, query: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?{query}",
            self.port
        )
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let _ = as_postgres(&bin("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["stop", "-m", "immediate"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
