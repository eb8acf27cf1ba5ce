//! A private Git repository over smart HTTP on loopback: the real `git http-backend` (CGI)
//! behind a server that demands `Authorization: Basic` of one user and token, the way a Git
//! host serves a private repository.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// Serves the repository at `dir` as `{url}` to requests that authenticate as
/// `user:token`; everything else gets 401.
pub async fn serve(dir: PathBuf, user: &str, token: &str) -> super::loopback::Served {
    use base64::Engine;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"))
    );
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (dir, expected) = (dir.clone(), expected.clone());
            async move {
                let authorized = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v == expected);
                if !authorized {
                    return Response::builder()
                        .status(StatusCode::UNAUTHORIZED)
                        .header("www-authenticate", "Basic realm=\"git\"")
                        .body(Body::empty())
                        .expect("response");
                }
                http_backend(dir, method, uri, headers, body).await
            }
        },
    );
    super::loopback::serve(app, "/.git").await
}

/// One CGI request to `git http-backend`.
async fn http_backend(
    dir: PathBuf,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &dir)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_USER", "ci-bot")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("git http-backend");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&body).await.expect("request body");
    }
    let out = child.wait_with_output().await.expect("git http-backend");
    // CGI: headers, a blank line, the body.
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, 2))
        })
        .unwrap_or((out.stdout.len(), 0));
    let (head, rest) = out.stdout.split_at(split.0);
    let mut response = Response::builder();
    for line in String::from_utf8_lossy(head).lines() {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("status") {
                let code = value.split(' ').next().and_then(|c| c.parse().ok());
                response = response.status(code.unwrap_or(500));
            } else {
                response = response.header(name.trim(), value);
            }
        }
    }
    response
        .body(Body::from(rest[split.1..].to_vec()))
        .expect("response")
}
