//! Run artifacts: the full output of every plan and apply, kept as files and named by run.
//!
//! The `ArtifactStore` port has a filesystem adapter under the data dir (the default, shared
//! by the workers and APIs of one host). Keys are `runs/{tenant}/{run}/{phase}.log`: a tenant's
//! artifacts are under its own prefix, and a key never leaves the store's root.

use crate::Error;
use std::path::{Path, PathBuf};

/// Where artifacts are kept.
#[async_trait::async_trait]
pub trait ArtifactStore: Send + Sync + 'static {
    /// Writes `bytes` under `key`, replacing what was there (a retried step writes its log again).
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), Error>;
    /// The bytes under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error>;
}

/// The phases of a run that write a log.
pub const PHASES: &[&str] = &["plan", "apply"];

/// The key of a run's log of `phase`.
pub fn run_log(tenant_id: &str, run_id: &str, phase: &str) -> String {
    format!("runs/{tenant_id}/{run_id}/{phase}.log")
}

/// The filesystem adapter: `{data_dir}/artifacts/{key}`.
#[derive(Debug, Clone)]
pub struct FileArtifacts {
    root: PathBuf,
}

impl FileArtifacts {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("artifacts"),
        }
    }

    /// The file of `key`; a key with an empty, `.` or `..` part names nothing.
    fn path(&self, key: &str) -> Result<PathBuf, Error> {
        let bad = key
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\\'));
        if bad {
            return Err(Error::Missing {
                what: "artifact",
                id: key.to_owned(),
            });
        }
        Ok(self.root.join(key))
    }
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Artifacts(format!("{}: {e}", path.display()))
}

#[async_trait::async_trait]
impl ArtifactStore for FileArtifacts {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), Error> {
        let path = self.path(key)?;
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| io(dir, e))?;
        }
        // Written beside and renamed: a reader never sees half a log.
        let partial = path.with_extension("partial");
        tokio::fs::write(&partial, bytes)
            .await
            .map_err(|e| io(&partial, e))?;
        tokio::fs::rename(&partial, &path)
            .await
            .map_err(|e| io(&path, e))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let path = self.path(key)?;
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_log_is_written_replaced_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileArtifacts::new(dir.path());
        let key = run_log("acme", "r1", "plan");
        assert_eq!(store.get(&key).await.unwrap(), None);
        store.put(&key, b"first".to_vec()).await.unwrap();
        store.put(&key, b"second".to_vec()).await.unwrap();
        assert_eq!(
            store.get(&key).await.unwrap().as_deref(),
            Some(&b"second"[..])
        );
    }

    #[tokio::test]
    async fn a_key_never_leaves_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileArtifacts::new(dir.path());
        for key in ["../escape", "runs//x", "runs/./x", "/etc/passwd"] {
            assert!(store.put(key, b"x".to_vec()).await.is_err(), "{key}");
            assert!(store.get(key).await.is_err(), "{key}");
        }
    }
}
