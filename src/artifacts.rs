//! The artifact store the workers write run logs and Pulumi plan files to and the API reads
//! them from: an `object_store` under the data dir (the default, shared by the workers and APIs
//! of one host), or an S3-compatible bucket for production, where they run on many hosts.

use anyhow::{Context, bail};
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::prefix::PrefixStore;
use std::path::Path;
use std::sync::Arc;

/// Where `artifacts_url` says: `s3://bucket[/prefix]` is an S3-compatible bucket, anything
/// else (unset included) `{data_dir}/artifacts`. The bucket's endpoint, region and credentials
/// come from the process's standard `AWS_*` environment (or the instance's workload identity),
/// never from a table: `AWS_ENDPOINT_URL` points it at any S3-compatible server,
/// `AWS_ALLOW_HTTP=true` allows one without TLS.
///
/// Either way a key leaves the store's root nowhere (`models::artifacts::checked`, checked by
/// the writers) and a put is whole or absent (a file is written beside and renamed, an object
/// is one PUT).
pub fn open(artifacts_url: Option<&str>, data_dir: &Path) -> anyhow::Result<Arc<dyn ObjectStore>> {
    match artifacts_url.map(str::trim).filter(|u| !u.is_empty()) {
        Some(url) => {
            let parsed = url::Url::parse(url)
                .ok()
                .filter(|u| u.scheme() == "s3" && u.host_str().is_some_and(|h| !h.is_empty()));
            let Some(parsed) = parsed else {
                bail!("the artifact store {url} is not of the form s3://bucket[/prefix]");
            };
            let bucket = AmazonS3Builder::from_env()
                .with_url(url)
                .build()
                .with_context(|| format!("the artifact store {url}"))?;
            let prefix = parsed.path().trim_matches('/');
            Ok(if prefix.is_empty() {
                Arc::new(bucket)
            } else {
                Arc::new(PrefixStore::new(bucket, prefix))
            })
        }
        None => {
            let root = data_dir.join("artifacts");
            // `LocalFileSystem` takes a directory that exists.
            std::fs::create_dir_all(&root)
                .with_context(|| format!("creating the artifact store {}", root.display()))?;
            let files = LocalFileSystem::new_with_prefix(&root)
                .with_context(|| format!("the artifact store {}", root.display()))?;
            Ok(Arc::new(files))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::path::Path as Key;
    use runtime_cloud_models::artifacts::run_log;

    #[tokio::test]
    async fn a_log_is_written_replaced_and_read_back_under_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(None, dir.path()).unwrap();
        let key = Key::parse(run_log("acme", "r1", "plan")).unwrap();
        assert!(matches!(
            store.head(&key).await,
            Err(object_store::Error::NotFound { .. })
        ));
        store.put(&key, b"first".to_vec().into()).await.unwrap();
        store.put(&key, b"second".to_vec().into()).await.unwrap();
        let read = store.get(&key).await.unwrap().bytes().await.unwrap();
        assert_eq!(&read[..], b"second");
        let file = dir.path().join("artifacts/runs/acme/r1/plan.log");
        assert_eq!(std::fs::read(file).unwrap(), b"second");
        assert_eq!(&store.get_range(&key, 1..4).await.unwrap()[..], b"eco");
    }

    #[tokio::test]
    async fn an_s3_store_needs_a_bucket() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["s3://", "https://example.com/bucket", "bucket/prefix"] {
            let err = open(Some(bad), dir.path()).err().unwrap().to_string();
            assert!(err.contains("s3://bucket"), "{bad}: {err}");
        }
        // A bucket with a prefix opens without a request (no server is needed to see it).
        assert!(open(Some("s3://logs/prod/"), dir.path()).is_ok());
    }
}
