//! The OpenAPI 3.1 document's frame (title, security scheme, tags, the problem schema), and
//! the routes that serve the document: `/openapi.json` and a browsable page at `/docs`.
//!
//! The document itself is generated from the handlers' `#[utoipa::path]` annotations by
//! `http::router`, which builds the router and the document from the same
//! `OpenApiRouter` (so a route cannot be served without being documented; the e2e test
//! `openapi_document_is_valid_and_covers_every_route` checks both directions against the
//! running server) and hands the document here as a [`Document`]. This module knows nothing
//! of the routes.

use crate::auth::{
    CAPACITY_MANAGE, CAPACITY_READ, FLEET_EXPORT, FLEET_OPERATE, HEALTH_READ, META_READ,
    PROVISIONING_APPLY, PROVISIONING_READ, RUNTIME_OPERATE, RUNTIME_READ,
};
use axum::Extension;
use axum::body::Bytes;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use std::collections::BTreeMap;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, RefOr, Response, ResponseBuilder};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

/// The name of the bearer security scheme; operations list the scope they need under it.
pub const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Runtime Cloud",
        description = "Provision and reconcile infrastructure through durable Temporal workflows. \
            Every command starts or signals a workflow; every read answers from the read tables. \
            Errors are RFC 7807 problem JSON (`application/problem+json`). Bearer tokens are \
            HS256 JWTs carrying a tenant, scopes and roles; each operation names the scope it \
            needs under the `bearer` scheme.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    modifiers(&BearerScheme),
    components(schemas(Problem)),
    tags(
        (name = "environments", description = "A tenant's environments and their class"),
        (name = "specifications", description = "Versioned desired state"),
        (name = "runs", description = "Provisioning runs: plan, approval, apply, receipts"),
        (name = "approvals", description = "Approvals of production applies: recorded, verified, spent once"),
        (name = "inventory", description = "Observed state, drift findings, observations"),
        (name = "proposals", description = "Reconciliation proposals and their decisions"),
        (name = "fleet", description = "FleetOperationsHost: the fleet as observed, incidents, rollouts in waves"),
        (name = "capacity", description = "ExecutionCapacityService: worker pools, quotas, capacity leases"),
        (name = "operations", description = "Probes, metrics and this document"),
    )
)]
pub struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let mut scheme = Http::new(HttpAuthScheme::Bearer);
        scheme.bearer_format = Some("JWT".into());
        scheme.description = Some(format!(
            "HS256 JWT with `tenant`, `scopes` and `roles`. Scopes: `{PROVISIONING_READ}`, \
             `{PROVISIONING_APPLY}`, `{RUNTIME_READ}`, `{RUNTIME_OPERATE}`, `{META_READ}`, \
             `{HEALTH_READ}`, `{FLEET_OPERATE}`, `{FLEET_EXPORT}`, `{CAPACITY_READ}`, \
             `{CAPACITY_MANAGE}`. \
             Approving a production run or accepting a production proposal also needs the \
             `Operator` or `PlatformAdmin` role; setting a quota, `PlatformAdmin`. Mint one \
             with `runtime-cloud token`."
        ));
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(BEARER, SecurityScheme::Http(scheme));
    }
}

/// An RFC 7807 problem: the body of every error response.
#[derive(ToSchema)]
#[allow(dead_code)] // Only its schema is used; `Error` renders the body.
pub struct Problem {
    /// `https://runtime-cloud.dev/problems/{status}`.
    r#type: String,
    /// The status's reason phrase.
    title: String,
    /// The HTTP status.
    status: u16,
    /// What went wrong, for a human; never a secret value.
    detail: String,
}

/// An error response with status `S`, documented as problem JSON. Handlers list the ones they
/// can answer: `responses((status = 200, …), Problems<401>, Problems<404>)`.
pub struct Problems<const S: u16>;

impl<const S: u16> IntoResponses for Problems<S> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let description = match S {
            400 => "The request cannot be read: malformed JSON, a bad cursor, filter or header",
            401 => "No bearer token, or one that does not verify",
            403 => "The token lacks the scope (or role) this operation needs",
            404 => "Not found in the caller's tenant",
            409 => "The resource is not in a state that allows this",
            413 => "The body exceeds 1 MiB",
            415 => "The body is not `application/json`",
            422 => "Well-formed but invalid: unknown fields, bad values, a reused idempotency key",
            429 => {
                "A quota is spent (the project's execution minutes), or too many of the tenant's run \
                 submissions wait their turn; `Retry-After` says when to come back"
            }
            500 => "An internal error; logged, never detailed",
            503 => "Temporal is unreachable; nothing was changed, retry later",
            _ => "Error",
        };
        let response = ResponseBuilder::new()
            .description(description)
            .content(
                "application/problem+json",
                ContentBuilder::new()
                    .schema(Some(utoipa::openapi::Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build();
        BTreeMap::from([(S.to_string(), RefOr::T(response))])
    }
}

/// The document `/openapi.json` serves, rendered once when the router is built (an axum
/// extension of every request).
#[derive(Debug, Clone)]
pub struct Document(Bytes);

impl Document {
    /// Renders `document` as pretty JSON.
    pub fn new(document: &utoipa::openapi::OpenApi) -> Self {
        // Serialising a document of plain strings and maps cannot fail; an empty body would be
        // refused by any client reading it, never mistaken for a document.
        Self(Bytes::from(document.to_pretty_json().unwrap_or_default()))
    }
}

/// This document.
#[utoipa::path(operation_id = "openapiDocument", 
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json"))
)]
pub async fn openapi_json(Extension(document): Extension<Document>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document.0)
}

/// A browsable page of this document (Scalar, whose script loads from a CDN; without it the
/// page links the raw document).
#[utoipa::path(operation_id = "docsPage", 
    get,
    path = "/docs",
    tag = "operations",
    responses((status = 200, description = "An HTML page", content_type = "text/html"))
)]
pub async fn docs() -> Html<&'static str> {
    Html(DOCS_PAGE)
}

/// Scalar's page, pointed at `/openapi.json`.
const DOCS_PAGE: &str = r#"<!doctype html>
<html>
<head>
  <title>Runtime Cloud API</title>
  <meta charset="utf-8"/>
  <meta name="viewport" content="width=device-width, initial-scale=1"/>
</head>
<body>
  <noscript>The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</noscript>
  <script id="api-reference" data-url="/openapi.json"></script>
  <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>
</body>
</html>"#;
