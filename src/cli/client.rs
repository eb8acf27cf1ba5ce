//! The operator CLI's HTTP client: where the API is, the bearer token, and what each answer
//! means for the exit code.

use super::login::Saved;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::fmt;

/// Where the API is and who is asking. Flags beat variables, variables beat `login`'s file.
#[derive(Debug, Clone, clap::Args)]
pub struct Remote {
    /// The API (`https://runtime-cloud.example.com`); else `RUNTIME_CLOUD_SERVER`, else the
    /// server `runtime-cloud login` saved, else http://127.0.0.1:8080.
    #[arg(long, global = true, env = "RUNTIME_CLOUD_SERVER")]
    pub server: Option<String>,
    /// How to print answers: `table` (for people), `json` or `yaml` (for scripts: the API's
    /// own fields).
    #[arg(short = 'o', long = "output", global = true, default_value = "table")]
    pub output: super::output::Format,
}

/// Why a command failed, and its exit code (`docs/cli.md`).
#[derive(Debug)]
pub enum Failure {
    /// The API refused: 403, 409, 422, 429, or the operator said no. Exit 1.
    Refused(String),
    /// Bad usage: a flag, a file, or a request the API called bad (400, 413, 415). Exit 2.
    Usage(String),
    /// 404. Exit 3.
    NotFound(String),
    /// No token, or the API did not accept it (401). Exit 4.
    Unauthenticated(String),
    /// The API could not be reached or failed (5xx). Exit 5.
    Unavailable(String),
}

impl Failure {
    /// The process's exit code.
    pub fn code(&self) -> i32 {
        match self {
            Failure::Refused(_) => 1,
            Failure::Usage(_) => 2,
            Failure::NotFound(_) => 3,
            Failure::Unauthenticated(_) => 4,
            Failure::Unavailable(_) => 5,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Refused(m)
            | Failure::Usage(m)
            | Failure::NotFound(m)
            | Failure::Unauthenticated(m)
            | Failure::Unavailable(m) => f.write_str(m),
        }
    }
}

/// A command's result.
pub type Outcome<T = ()> = Result<T, Failure>;

/// The API, as one operator.
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// The default server: what `runtime-cloud dev` listens on.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

impl Client {
    /// The client `remote` and the saved login describe; the token from
    /// `RUNTIME_CLOUD_TOKEN`, else the saved login.
    pub fn new(remote: &Remote) -> Outcome<Self> {
        let saved = Saved::load().map_err(Failure::Usage)?;
        let base = remote
            .server
            .clone()
            .or_else(|| saved.as_ref().map(|s| s.server.clone()))
            .unwrap_or_else(|| DEFAULT_SERVER.to_owned());
        let token = std::env::var("RUNTIME_CLOUD_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
            .or_else(|| saved.map(|s| s.token))
            .ok_or_else(|| {
                Failure::Unauthenticated(
                    "no token: set RUNTIME_CLOUD_TOKEN or run `runtime-cloud login`".into(),
                )
            })?;
        Ok(Self::with_token(&base, &token))
    }

    /// A client of the API at `base` with `token` (`login` checks a token before saving it).
    pub fn with_token(base: &str, token: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token: token.trim().to_owned(),
            http: reqwest::Client::new(),
        }
    }

    /// `GET path` as JSON.
    pub async fn get(&self, path: &str) -> Outcome<Value> {
        self.send(Method::GET, path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Outcome<Value> {
        self.send(Method::POST, path, Some(body)).await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: Value) -> Outcome<Value> {
        self.send(Method::PUT, path, Some(body)).await
    }

    /// `GET path` as the bytes it answers (a page of a log: printed as the runner wrote it).
    pub async fn bytes(&self, path: &str) -> Outcome<Vec<u8>> {
        let response = self.request(Method::GET, path, None).await?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| self.unreachable(e))?;
        if status.is_success() {
            Ok(body.to_vec())
        } else {
            Err(failure(
                status,
                &serde_json::from_slice(&body).unwrap_or(Value::Null),
            ))
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Outcome<Value> {
        let response = self.request(method, path, body).await?;
        let status = response.status();
        let text = response.text().await.map_err(|e| self.unreachable(e))?;
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            Ok(json)
        } else {
            Err(failure(status, &json))
        }
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Outcome<reqwest::Response> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.map_err(|e| self.unreachable(e))
    }

    fn unreachable(&self, e: reqwest::Error) -> Failure {
        Failure::Unavailable(format!("{}: {e}", self.base))
    }
}

/// What a refused request's status and problem JSON mean.
fn failure(status: StatusCode, problem: &Value) -> Failure {
    let detail = problem["detail"]
        .as_str()
        .or(problem["title"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| problem.to_string());
    let message = format!("{} {detail}", status.as_u16());
    match status.as_u16() {
        401 => Failure::Unauthenticated(message),
        404 => Failure::NotFound(message),
        400 | 413 | 415 => Failure::Usage(message),
        403 | 409 | 422 | 429 => Failure::Refused(message),
        _ => Failure::Unavailable(message),
    }
}

/// `s` escaped for a URL path segment or query value.
pub use runtime_cloud_models::wire::percent_encode as escape;

/// `path?k=v&…` with the parameters that are set.
pub fn with_query(path: &str, params: &[(&str, Option<String>)]) -> String {
    let query: Vec<String> = params
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", escape(v))))
        .collect();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_refusal_has_the_exit_code_scripts_can_use() {
        let problem = json!({"title": "Conflict", "detail": "run is Applied"});
        let code = |s: u16| failure(StatusCode::from_u16(s).unwrap(), &problem).code();
        assert_eq!([403, 409, 422, 429].map(code), [1; 4]);
        assert_eq!([400, 413, 415].map(code), [2; 3]);
        assert_eq!(code(404), 3);
        assert_eq!(code(401), 4);
        assert_eq!([500, 503].map(code), [5; 2]);
        assert_eq!(
            failure(StatusCode::CONFLICT, &problem).to_string(),
            "409 run is Applied"
        );
    }

    #[test]
    fn query_values_are_escaped_and_unset_ones_left_out() {
        assert_eq!(
            with_query("/r", &[("a", Some("x y&z".into())), ("b", None)]),
            "/r?a=x%20y%26z"
        );
        assert_eq!(with_query("/r", &[("b", None)]), "/r");
    }
}
