//! `/console`: the web console, a single page served from assets built into the binary (the
//! top-level `console/` directory, embedded with `include_str!`, so editing an asset rebuilds
//! the binary and nothing is fetched from elsewhere at run time). See `docs/console.md`.
//!
//! The console is a client of the same JSON API, with the operator's bearer token: these
//! routes only serve its files and tell it how to sign in. They are the web UI, not the API,
//! so they are a plain axum `Router`, outside the OpenAPI document.
//!
//! - `GET /console`, `/console/`, `/console/callback` (where an OpenID provider sends the
//!   browser back): the page.
//! - `GET /console/{asset}`: one of [`ASSETS`], nothing else.
//! - `GET /console/sign-in`: [`SignIn`], how operators sign in here.
//! - `POST /console/dev-sign-in`: under `runtime-cloud dev` only, mints a dev token.

use crate::auth::{ALL_SCOPES, ROLES, SignIn};
use crate::json::Json;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, body::Body};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The console's routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(page))
        .route("/console/", get(page))
        .route("/console/callback", get(page))
        .route("/console/sign-in", get(sign_in))
        .route("/console/dev-sign-in", post(dev_sign_in))
        .route("/console/{asset}", get(asset))
}

/// One embedded file of the console.
struct Asset {
    /// Its name under `/console/`.
    name: &'static str,
    /// Its `Content-Type`.
    content_type: &'static str,
    /// Its text (every asset is text, the icon too: SVG).
    body: &'static str,
}

/// Declares an embedded asset of `console/` by file name.
macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../../../console/", $name)),
        }
    };
}

/// Every module of the console is JavaScript.
const JS: &str = "text/javascript; charset=utf-8";

/// Every file the console serves; any other name is a 404.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("ui.js", JS),
    asset!("oidc.js", JS),
    asset!("sign-in.js", JS),
    asset!("environments.js", JS),
    asset!("environment.js", JS),
    asset!("runs.js", JS),
    asset!("run.js", JS),
    asset!("rollouts.js", JS),
    asset!("quarantines.js", JS),
    asset!("rollout.js", JS),
];

/// The page: `index.html`, the first asset.
const INDEX: &Asset = &ASSETS[0];

/// The page itself (every route of the single page app is this one file).
async fn page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    serve(INDEX, &state.sign_in, &headers)
}

/// One of the console's files.
async fn asset(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset, &state.sign_in, &headers),
        None => Error::NotFound(format!("no route for /console/{name}")).into_response(),
    }
}

/// The asset with its type, its ETag and the console's security headers; 304 when the
/// browser's copy is current.
fn serve(asset: &Asset, sign_in: &SignIn, request: &HeaderMap) -> Response {
    // The assets carry no version in their names, so the browser revalidates each time
    // (`no-cache`); the ETag makes that a 304 until the binary changes.
    let etag = format!(
        "\"{}\"",
        &hex::encode(Sha256::digest(asset.body.as_bytes()))[..16]
    );
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut res = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut res = Response::new(Body::from(asset.body));
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        res
    };
    let h = res.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, etag);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The OpenID callback's URL carries the authorization code: never send it on as a referrer.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy(sign_in)) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    res
}

/// Only the console's own files run, style and load, and it talks only to this API, plus
/// the OpenID provider's token endpoint when one is configured (the browser exchanges the
/// code there; the authorization endpoint is a navigation, which CSP does not govern).
fn content_security_policy(sign_in: &SignIn) -> String {
    let mut connect = "'self'".to_owned();
    if let Some(origin) = sign_in
        .oidc
        .as_ref()
        .and_then(|o| origin_of(&o.token_endpoint))
    {
        connect.push(' ');
        connect.push_str(origin);
    }
    format!(
        "default-src 'self'; connect-src {connect}; object-src 'none'; base-uri 'none'; \
         frame-ancestors 'none'; form-action 'self'"
    )
}

/// `scheme://host[:port]` of an `http(s)` URL, when it is one a policy can name; `None` for
/// anything else (a policy must not be extended by a configured string).
fn origin_of(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let host_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = &url[..url.len() - rest.len() + host_len];
    let host = &rest[..host_len];
    let plain = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    plain.then_some(origin)
}

/// How operators sign in here: a one-click dev sign-in (`runtime-cloud dev` only), an OpenID
/// provider, or neither (a pasted token).
async fn sign_in(State(state): State<AppState>) -> Response {
    let mut res = axum::Json(state.sign_in.as_ref().clone()).into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// `POST /console/dev-sign-in`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DevSignIn {
    /// The tenant the token acts in.
    tenant_id: String,
    /// `Operator`, `PlatformAdmin`, `Observer`; `Operator` when absent.
    #[serde(default = "operator")]
    roles: Vec<String>,
    /// Only the `*.read` scopes.
    #[serde(default)]
    read_only: bool,
}

fn operator() -> Vec<String> {
    vec!["Operator".to_owned()]
}

/// How long a dev sign-in lasts: a working day.
const DEV_TOKEN_SECS: u64 = 8 * 3600;

/// A minted dev token.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DevToken {
    access_token: String,
    token_type: &'static str,
    expires_in: u64,
}

/// Mints a token for the console under `runtime-cloud dev`; elsewhere the route does not
/// exist (404, as any unknown path).
async fn dev_sign_in(
    State(state): State<AppState>,
    Json(body): Json<DevSignIn>,
) -> Result<Response, Error> {
    if !state.sign_in.dev {
        return Err(Error::NotFound("no route for /console/dev-sign-in".into()));
    }
    runtime_cloud_models::validation::check_id("tenantId", &body.tenant_id)?;
    if let Some(unknown) = body.roles.iter().find(|r| !ROLES.contains(&r.as_str())) {
        return Err(Error::Unprocessable(format!(
            "role `{unknown}` is not one of {}",
            ROLES.join(", ")
        )));
    }
    let scopes: Vec<String> = ALL_SCOPES
        .iter()
        .filter(|s| !body.read_only || s.ends_with(".read"))
        .map(|s| (*s).to_owned())
        .collect();
    let subject = if body.read_only {
        "dev-reader"
    } else {
        "dev-operator"
    };
    let token = state.auth.mint(
        subject,
        &body.tenant_id,
        &scopes,
        &body.roles,
        DEV_TOKEN_SECS,
    )?;
    tracing::info!(tenant_id = %body.tenant_id, read_only = body.read_only, "console dev sign-in");
    let mut res = axum::Json(DevToken {
        access_token: token,
        token_type: "Bearer",
        expires_in: DEV_TOKEN_SECS,
    })
    .into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::OidcSignIn;

    fn oidc(token_endpoint: &str) -> SignIn {
        SignIn {
            dev: false,
            oidc: Some(OidcSignIn {
                issuer: "https://id.example".into(),
                client_id: "console".into(),
                scope: "openid".into(),
                authorization_endpoint: "https://id.example/authorize".into(),
                token_endpoint: token_endpoint.into(),
            }),
        }
    }

    #[test]
    fn console_policy_allows_only_this_origin_without_oidc() {
        let csp = content_security_policy(&SignIn::default());
        assert!(
            csp.starts_with("default-src 'self'; connect-src 'self';"),
            "{csp}"
        );
    }

    #[test]
    fn console_policy_names_the_token_endpoint_origin() {
        let csp = content_security_policy(&oidc("https://id.example:8443/oauth/token?x=1"));
        assert!(
            csp.contains("connect-src 'self' https://id.example:8443;"),
            "{csp}"
        );
        let csp = content_security_policy(&oidc("http://127.0.0.1:9000/token"));
        assert!(
            csp.contains("connect-src 'self' http://127.0.0.1:9000;"),
            "{csp}"
        );
    }

    #[test]
    fn console_policy_is_not_extended_by_a_strange_endpoint() {
        for endpoint in [
            "https://id.example; script-src *",
            "https://id.example token",
            "javascript:alert(1)",
            "https:///token",
        ] {
            let csp = content_security_policy(&oidc(endpoint));
            assert!(csp.contains("connect-src 'self';"), "{endpoint}: {csp}");
        }
    }

    #[test]
    fn console_page_is_the_first_asset() {
        assert_eq!(INDEX.name, "index.html");
    }

    /// A module added to `console/` but not to [`ASSETS`] would be a 404 in the browser.
    #[test]
    fn console_serves_every_file_of_its_directory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../console");
        for entry in std::fs::read_dir(&dir).expect("console/") {
            let name = entry.expect("entry").file_name();
            let name = name.to_string_lossy();
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "console/{name} is not in ASSETS"
            );
        }
    }

    #[test]
    fn console_assets_are_each_listed_once_and_reference_nothing_outside() {
        for (i, a) in ASSETS.iter().enumerate() {
            assert!(
                ASSETS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            // An SVG names its XML namespace by URL; nothing is fetched from it.
            let body = a.body.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
            for scheme in ["http://", "https://", "//cdn", "@import"] {
                assert!(
                    !body.contains(scheme),
                    "{} names `{scheme}`: every asset is served from here",
                    a.name
                );
            }
        }
    }
}
