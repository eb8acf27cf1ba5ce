//! Run artifacts: the full output of every plan and apply, kept as files and named by run.
//!
//! The `ArtifactStore` port has a filesystem adapter under the data dir (the default, shared
//! by the workers and APIs of one host) and an S3-compatible adapter for production, where
//! workers and APIs run on many hosts. Keys are `runs/{tenant}/{run}/{phase}.log`: a tenant's
//! artifacts are under its own prefix, and a key never leaves the store's root.

use crate::Error;
use object_store::ObjectStore;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where artifacts are kept.
#[async_trait::async_trait]
pub trait ArtifactStore: Send + Sync + 'static {
    /// Writes `bytes` under `key`, replacing what was there (a retried step writes its log again).
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), Error>;
    /// The bytes under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error>;
    /// The length of what is under `key`, if anything is.
    async fn len(&self, key: &str) -> Result<Option<u64>, Error>;
    /// The bytes of `range` under `key`: fewer past its end, none when nothing is there (a
    /// log is read a page at a time, never whole).
    async fn read_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>, Error>;
}

/// The phases of a run that write a log.
pub const PHASES: &[&str] = &["plan", "apply"];

/// The key of a run's log of `phase`.
pub fn run_log(tenant_id: &str, run_id: &str, phase: &str) -> String {
    format!("runs/{tenant_id}/{run_id}/{phase}.log")
}

/// The key of a Pulumi plan file (`pulumi preview --save-plan`) by its plan's inputs hash.
pub fn pulumi_plan(tenant_id: &str, environment_id: &str, inputs_hash: &str) -> String {
    format!("plans/{tenant_id}/{environment_id}/{inputs_hash}.json")
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
        checked(key)?;
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
        // Written beside and renamed: a reader never sees half a log.
        let partial = path.with_extension("partial");
        write_atomically(path.clone(), partial, bytes)
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

    async fn len(&self, key: &str) -> Result<Option<u64>, Error> {
        let path = self.path(key)?;
        match tokio::fs::metadata(&path).await {
            Ok(meta) => Ok(Some(meta.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path, e)),
        }
    }

    async fn read_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>, Error> {
        use std::io::{Read, Seek, SeekFrom};
        let path = self.path(key)?;
        let at = path.clone();
        let read = tokio::task::spawn_blocking(move || {
            let mut file = match std::fs::File::open(&at) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e),
            };
            file.seek(SeekFrom::Start(range.start))?;
            let mut bytes = Vec::new();
            file.take(range.end.saturating_sub(range.start))
                .read_to_end(&mut bytes)?;
            Ok(bytes)
        })
        .await
        .map_err(std::io::Error::other);
        read.and_then(|r| r).map_err(|e| io(&path, e))
    }
}

/// Writes `bytes` to `path` whole or not at all: into `beside` (in the same directory), then
/// renamed over `path`, creating the directory first. One trip to Tokio's blocking threads for
/// the three (`tokio::fs` makes each its own: a hand-off to a thread and back, three times for
/// every log a run keeps).
pub async fn write_atomically(
    path: PathBuf,
    beside: PathBuf,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&beside, bytes)?;
        std::fs::rename(&beside, &path)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Where `artifacts_url` says: `s3://bucket[/prefix]` is an S3-compatible bucket, anything
/// else (unset included) the data dir.
pub fn from_url(
    artifacts_url: Option<&str>,
    data_dir: &Path,
) -> Result<Arc<dyn ArtifactStore>, Error> {
    match artifacts_url {
        Some(url) if !url.trim().is_empty() => Ok(Arc::new(S3Artifacts::new(url)?)),
        _ => Ok(Arc::new(FileArtifacts::new(data_dir))),
    }
}

/// The S3-compatible adapter (`object_store`): `s3://bucket/prefix`. The endpoint, region and
/// credentials come from the process's standard `AWS_*` environment (or the instance's
/// workload identity), never from a table: `AWS_ENDPOINT_URL` points it at any S3-compatible
/// server, `AWS_ALLOW_HTTP=true` allows one without TLS.
#[derive(Debug, Clone)]
pub struct S3Artifacts {
    store: Arc<object_store::aws::AmazonS3>,
    prefix: String,
}

impl S3Artifacts {
    pub fn new(url: &str) -> Result<Self, Error> {
        let parsed = url::Url::parse(url)
            .ok()
            .filter(|u| u.scheme() == "s3" && u.host_str().is_some_and(|h| !h.is_empty()))
            .ok_or_else(|| {
                Error::Artifacts(format!(
                    "the artifact store {url} is not of the form s3://bucket[/prefix]"
                ))
            })?;
        let store = object_store::aws::AmazonS3Builder::from_env()
            .with_url(url)
            .build()
            .map_err(|e| Error::Artifacts(format!("the artifact store {url}: {e}")))?;
        Ok(Self {
            store: Arc::new(store),
            prefix: parsed.path().trim_matches('/').to_owned(),
        })
    }

    /// The object of `key` under the prefix; a key with an empty, `.` or `..` part names
    /// nothing, as in the filesystem adapter.
    fn location(&self, key: &str) -> Result<object_store::path::Path, Error> {
        checked(key)?;
        let full = if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.prefix)
        };
        object_store::path::Path::parse(&full).map_err(|_| missing(key))
    }
}

#[async_trait::async_trait]
impl ArtifactStore for S3Artifacts {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), Error> {
        let location = self.location(key)?;
        // One PUT: an object is whole or absent, so a reader never sees half a log.
        self.store
            .put(&location, bytes.into())
            .await
            .map(|_| ())
            .map_err(|e| Error::Artifacts(format!("writing {location}: {e}")))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let location = self.location(key)?;
        match self.store.get(&location).await {
            Ok(got) => got
                .bytes()
                .await
                .map(|b| Some(b.to_vec()))
                .map_err(|e| Error::Artifacts(format!("reading {location}: {e}"))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::Artifacts(format!("reading {location}: {e}"))),
        }
    }

    async fn len(&self, key: &str) -> Result<Option<u64>, Error> {
        let location = self.location(key)?;
        match self.store.head(&location).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::Artifacts(format!("reading {location}: {e}"))),
        }
    }

    async fn read_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>, Error> {
        let location = self.location(key)?;
        // S3 answers a range past the object's end with 416: ask only for what is there.
        let Some(len) = self.len(key).await? else {
            return Ok(Vec::new());
        };
        let range = range.start.min(len)..range.end.min(len);
        if range.is_empty() {
            return Ok(Vec::new());
        }
        match self.store.get_range(&location, range).await {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(Error::Artifacts(format!("reading {location}: {e}"))),
        }
    }
}

fn missing(key: &str) -> Error {
    Error::Missing {
        what: "artifact",
        id: key.to_owned(),
    }
}

/// A key of non-empty parts, none `.` or `..`.
fn checked(key: &str) -> Result<(), Error> {
    let bad = key
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == ".." || p.contains('\\'));
    if bad { Err(missing(key)) } else { Ok(()) }
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
    async fn a_log_is_read_a_range_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileArtifacts::new(dir.path());
        let key = run_log("acme", "r1", "apply");
        assert_eq!(store.len(&key).await.unwrap(), None);
        assert!(store.read_range(&key, 0..10).await.unwrap().is_empty());
        store.put(&key, b"0123456789".to_vec()).await.unwrap();
        assert_eq!(store.len(&key).await.unwrap(), Some(10));
        assert_eq!(store.read_range(&key, 2..5).await.unwrap(), b"234");
        assert_eq!(store.read_range(&key, 8..100).await.unwrap(), b"89");
        assert!(store.read_range(&key, 12..20).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn an_s3_store_needs_a_bucket_and_keeps_keys_under_its_prefix() {
        for bad in ["s3://", "https://example.com/bucket", "bucket/prefix"] {
            let err = S3Artifacts::new(bad).unwrap_err().to_string();
            assert!(err.contains("s3://bucket"), "{bad}: {err}");
        }
        // Bucket `logs`, prefix `prod`.
        let store = S3Artifacts::new("s3://logs/prod/").unwrap();
        assert_eq!(
            store.location("runs/acme/r1/plan.log").unwrap().as_ref(),
            "prod/runs/acme/r1/plan.log"
        );
        // Refused before any request is made: no server is needed to see it.
        for key in ["../escape", "runs//x", "runs/./x", "/etc/passwd"] {
            assert!(store.get(key).await.is_err(), "{key}");
        }
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
