//! A real S3-compatible server on loopback for the S3 artifact store: `moto` in server mode
//! (PyPI `moto[server]`, installed by `scripts/install-tools`). It is killed with the test.

use std::process::{Child, Command, Stdio};

/// A running `moto_server` with one bucket.
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    pub bucket: String,
}

impl S3Server {
    /// Starts moto on a free loopback port and creates `bucket` in it.
    pub async fn start(bucket: &str) -> Self {
        let port = super::ports::free_port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server (scripts/install-tools installs it)");
        let server = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_owned(),
        };
        let http = reqwest::Client::new();
        let url = format!("{}/{bucket}", server.endpoint);
        // moto does not check signatures: a bare PUT creates the bucket once it listens.
        super::eventually(60, "moto_server to create the bucket", || {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let put = http.put(&url).send().await.ok()?;
                put.status().is_success().then_some(())
            }
        })
        .await;
        server
    }

    /// The environment that points the product's S3 adapter at this server.
    pub fn env(&self, prefix: &str) -> Vec<(String, String)> {
        [
            (
                "RUNTIME_CLOUD_ARTIFACTS_URL",
                format!("s3://{}/{prefix}", self.bucket),
            ),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The keys in the bucket, from its listing (moto lists a bucket to anyone; reading an
    /// object takes a signed request, which is the product's to make).
    pub async fn keys(&self) -> Vec<String> {
        let url = format!("{}/{}", self.endpoint, self.bucket);
        let listing = match reqwest::get(&url).await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        listing
            .split("<Key>")
            .skip(1)
            .filter_map(|rest| rest.split("</Key>").next())
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
