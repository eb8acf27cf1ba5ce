//! The SloGuard port: what a rollout's SLO query answers. The embedded default has no query
//! service — breaches are reported through the API (`POST /fleet/rollouts/{id}/breach`) and
//! reach the rollout as a signal; the real adapter asks Prometheus (`GET /api/v1/query`), and
//! a sample above the rollout's threshold is a breach (`models::rollouts::slo_breach`).

use crate::Error;
use runtime_cloud_models::rollouts::SloSample;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Answers an instant PromQL query with its samples.
#[async_trait::async_trait]
pub trait SloGuard: Send + Sync {
    async fn samples(&self, query: &str) -> Result<Vec<SloSample>, Error>;
}

/// Prometheus' HTTP API (or anything that speaks it: Thanos, Mimir, VictoriaMetrics).
pub struct PrometheusSloGuard {
    /// The server's base URL (`http://prometheus.monitoring:9090`).
    pub url: String,
    /// A bearer token, when the server wants one (a secret: never logged).
    pub token: Option<String>,
    pub http: reqwest::Client,
}

impl PrometheusSloGuard {
    pub fn new(url: &str, token: Option<String>) -> Self {
        Self {
            url: url.trim_end_matches('/').to_owned(),
            token,
            http: reqwest::Client::new(),
        }
    }
}

#[async_trait::async_trait]
impl SloGuard for PrometheusSloGuard {
    async fn samples(&self, query: &str) -> Result<Vec<SloSample>, Error> {
        let url = format!("{}/api/v1/query", self.url);
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::Unavailable(format!("Prometheus at {}: {e}", self.url))
        };
        let mut request = self
            .http
            .get(&url)
            .query(&[("query", query)])
            .timeout(std::time::Duration::from_secs(10));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| unavailable(&e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| unavailable(&e))?;
        // Prometheus answers its own errors (400, 422, 503) in the envelope; anything else
        // (a proxy's 502) is reported by its status.
        match parse(&body) {
            Ok(samples) if status.is_success() => Ok(samples),
            Ok(_) => Err(unavailable(&status)),
            Err(e) if status.is_success() || body.trim_start().starts_with('{') => {
                Err(unavailable(&e))
            }
            Err(_) => Err(unavailable(&status)),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<(f64, String)>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// The samples of a `/api/v1/query` answer: a vector's samples, a matrix's last sample of each
/// series, a scalar as one sample without labels. Prometheus sends values as strings (`NaN`,
/// `+Inf` among them).
pub fn parse(body: &str) -> Result<Vec<SloSample>, String> {
    let envelope: Envelope =
        serde_json::from_str(body).map_err(|e| format!("not a Prometheus API answer: {e}"))?;
    if envelope.status != "success" {
        return Err(format!(
            "{}: {}",
            envelope.error_type.as_deref().unwrap_or("error"),
            envelope.error.as_deref().unwrap_or("no message")
        ));
    }
    let data = envelope
        .data
        .ok_or_else(|| "a success without data".to_owned())?;
    let number = |v: &str| {
        let v = v.trim_start_matches('+');
        v.parse::<f64>()
            .map_err(|e| format!("sample value `{v}`: {e}"))
    };
    match data.result_type.as_str() {
        "vector" | "matrix" => {
            let series: Vec<Series> = serde_json::from_value(data.result)
                .map_err(|e| format!("a {} result: {e}", data.result_type))?;
            let mut samples = Vec::new();
            for s in series {
                let Some((_, value)) = s.value.or_else(|| s.values.last().cloned()) else {
                    continue;
                };
                samples.push(SloSample {
                    labels: s.metric,
                    value: number(&value)?,
                });
            }
            Ok(samples)
        }
        "scalar" => {
            let (_, value): (f64, String) =
                serde_json::from_value(data.result).map_err(|e| format!("a scalar result: {e}"))?;
            Ok(vec![SloSample {
                labels: BTreeMap::new(),
                value: number(&value)?,
            }])
        }
        other => Err(format!(
            "a query answering `{other}` cannot be compared with a threshold"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/../tests/fixtures/prometheus/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn values(samples: &[SloSample]) -> Vec<(String, f64)> {
        samples
            .iter()
            .map(|s| {
                (
                    s.labels.get("instance").cloned().unwrap_or_default(),
                    s.value,
                )
            })
            .collect()
    }

    #[test]
    fn a_vector_a_matrix_and_a_scalar_are_read_as_samples() {
        assert_eq!(
            values(&parse(&fixture("vector.json")).unwrap()),
            [
                ("localhost:9090".into(), 1.0),
                ("localhost:9100".into(), 0.0)
            ]
        );
        assert_eq!(
            values(&parse(&fixture("matrix.json")).unwrap()),
            [
                ("localhost:9090".into(), 1.0),
                ("localhost:9091".into(), 1.0)
            ],
            "each series' last sample"
        );
        assert_eq!(
            values(&parse(&fixture("scalar.json")).unwrap()),
            [(String::new(), 1.0)]
        );
        let special = parse(&fixture("special-values.json")).unwrap();
        assert!(special[0].value.is_nan());
        assert_eq!(
            (special[1].value, special[2].value),
            (f64::INFINITY, f64::NEG_INFINITY)
        );
    }

    #[test]
    fn an_error_answer_says_what_prometheus_said() {
        let err = parse(&fixture("error.json")).unwrap_err();
        assert!(
            err.starts_with("bad_data: invalid parameter \"query\"")
                && err.contains("unclosed left parenthesis"),
            "{err}"
        );
        assert!(parse("<html>502</html>").is_err());
        assert!(
            parse(r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#)
                .is_err()
        );
    }
}
