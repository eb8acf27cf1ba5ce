//! An HTTP client of the API acting as one tenant's operator, the way a user drives the product.

use anyhow::{Context, bail};
use runtime_cloud_models::Workload;
use serde_json::{Value, json};
use std::time::SystemTime;

#[derive(Clone)]
pub struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            base: base.to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder, expect: u16) -> anyhow::Result<Value> {
        let res = req.bearer_auth(&self.token).send().await?;
        let status = res.status().as_u16();
        let body = res.bytes().await?;
        if status != expect {
            bail!(
                "expected {expect}, got {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body)?
        })
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.base)), 200)
            .await
    }

    pub async fn put(&self, path: &str, body: Value, expect: u16) -> anyhow::Result<Value> {
        let req = self.http.put(format!("{}{path}", self.base)).json(&body);
        self.send(req, expect).await
    }

    pub async fn post(&self, path: &str, body: Value, expect: u16) -> anyhow::Result<Value> {
        let req = self.http.post(format!("{}{path}", self.base)).json(&body);
        self.send(req, expect).await
    }

    /// Registers a non-production environment.
    pub async fn environment(&self, id: &str) -> anyhow::Result<()> {
        let body = json!({ "environmentId": id, "projectId": "bench", "class": "non-production" });
        self.post("/factory/environments", body, 201).await?;
        Ok(())
    }

    /// Registers a non-production environment whose proposals wait for an operator
    /// (`propose`: nothing is accepted on its own).
    pub async fn proposing_environment(&self, id: &str) -> anyhow::Result<()> {
        let body = json!({ "environmentId": id, "projectId": "bench", "class": "non-production",
                           "mode": "propose" });
        self.post("/factory/environments", body, 201).await?;
        Ok(())
    }

    /// Declares the environment's next specification version.
    pub async fn declare(&self, env: &str, workloads: &[Workload]) -> anyhow::Result<()> {
        let body = json!({
            "environmentId": env, "kind": "environment", "programRef": "git://infra//bench",
            "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": {},
            "workloads": workloads,
        });
        self.post("/factory/provisioning/specifications", body, 201)
            .await?;
        Ok(())
    }

    /// Requests a baseline run; returns its id and when the request was sent.
    pub async fn plan_run(&self, env: &str) -> anyhow::Result<(String, SystemTime)> {
        let sent = SystemTime::now();
        let run = self
            .post(
                "/factory/provisioning/runs",
                json!({ "environmentId": env, "kind": "baseline" }),
                202,
            )
            .await?;
        let id = run["provisioningRunId"]
            .as_str()
            .context("run id")?
            .to_owned();
        Ok((id, sent))
    }

    /// Every run of the tenant in `state`, following the cursor.
    pub async fn runs_in_state(&self, state: &str) -> anyhow::Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/factory/provisioning/runs?state={state}&limit=200");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page = self.get(&path).await?;
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
            match page["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return Ok(items),
            }
        }
    }
}

/// `n` realistic workloads: a version, a few replicas, config and secret references.
pub fn workloads(n: usize) -> Vec<Workload> {
    (0..n)
        .map(|i| Workload {
            name: format!("svc-{i:04}"),
            kind: if i % 5 == 0 {
                "statefulset"
            } else {
                "deployment"
            }
            .into(),
            version: format!("1.{}.{}", i % 7, i % 13),
            replicas: 1 + (i % 4) as u32,
            config_refs: [
                (
                    "settings".to_owned(),
                    format!("config://bench/svc-{i}/settings"),
                ),
                (
                    "features".to_owned(),
                    format!("config://bench/svc-{i}/features"),
                ),
            ]
            .into(),
            secret_refs: [("db".to_owned(), format!("secretbroker://bench/svc-{i}/db"))].into(),
        })
        .collect()
}

/// Runs `f` over `items` with at most `concurrency` in flight; fails on the first error.
pub async fn for_each_concurrent<T, F, Fut>(
    items: Vec<T>,
    concurrency: usize,
    f: F,
) -> anyhow::Result<()>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    use futures::StreamExt;
    let mut results = futures::stream::iter(items.into_iter().map(f)).buffer_unordered(concurrency);
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(())
}
