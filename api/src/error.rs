//! The API's one error type. Every variant documents its status; every response is RFC 7807
//! problem JSON. Database and internal errors are logged and shown only as "internal error".

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An API error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400: the request cannot be read (malformed JSON, a bad cursor or filter).
    #[error("{0}")]
    BadRequest(String),
    /// 401: no bearer token, or one that does not verify.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// 403: the token lacks a scope or role this route needs.
    #[error("the token lacks `{0}`")]
    Forbidden(String),
    /// 404: not found for the caller's tenant (another tenant's row is "not found" too).
    #[error("{0}")]
    NotFound(String),
    /// 409: the resource is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is larger than 1 MiB.
    #[error("the request body exceeds 1 MiB")]
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: well-formed but invalid (unknown fields, bad values, idempotency key reuse).
    #[error("{0}")]
    Unprocessable(String),
    /// 429: a quota is spent (the project's execution minutes), or the tenant has more run
    /// submissions waiting their turn than its pace holds; `Retry-After` says when to come back.
    #[error("{detail}")]
    TooManyRequests {
        detail: String,
        /// Seconds until the quota resets.
        retry_after_secs: u64,
    },
    /// 503: Temporal is unreachable; nothing was changed.
    #[error("{0}")]
    Unavailable(String),
    /// 500: logged, never shown.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl Error {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Wraps any internal failure.
    pub fn internal(e: impl Into<anyhow::Error>) -> Self {
        Error::Internal(e.into())
    }

    /// What a failed signal to `what` (``run `…` ``, ``proposal `…` ``) answers: 409 when its
    /// workflow has ended (there is nothing left to tell it), 503 when Temporal did not take
    /// the signal.
    pub fn from_signal(
        what: String,
    ) -> impl FnOnce(temporalio_client::errors::WorkflowInteractionError) -> Error {
        move |e| match e {
            temporalio_client::errors::WorkflowInteractionError::NotFound(_) => {
                Error::Conflict(format!("{what} has already ended"))
            }
            e => {
                tracing::error!(error = %e, "cannot signal {what}");
                Error::Unavailable("the workflow service is unavailable; retry later".into())
            }
        }
    }
}

/// 429: the project's day's execution minutes are spent, until they reset.
impl From<runtime_cloud_models::capacity::MinutesSpent> for Error {
    fn from(spent: runtime_cloud_models::capacity::MinutesSpent) -> Self {
        let left = (spent.resets_at - chrono::Utc::now()).num_seconds().max(1);
        Error::TooManyRequests {
            detail: spent.to_string(),
            retry_after_secs: u64::try_from(left).unwrap_or(1),
        }
    }
}

/// A store failure is a 500 (logged, never shown), but for a declaration the validation rule
/// refuses: 422 with the rule's message (which never repeats a secret value).
impl From<runtime_cloud_store::Error> for Error {
    fn from(e: runtime_cloud_store::Error) -> Self {
        match e {
            runtime_cloud_store::Error::Invalid(invalid) => invalid.into(),
            e => Error::Internal(e.into()),
        }
    }
}

/// 422: an id or a declaration the validation rules refuse.
impl From<runtime_cloud_models::validation::Invalid> for Error {
    fn from(e: runtime_cloud_models::validation::Invalid) -> Self {
        Error::Unprocessable(e.to_string())
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if let Error::Internal(e) = &self {
            tracing::error!(error = ?e, "internal error");
        }
        let body = json!({
            "type": format!("https://runtime-cloud.dev/problems/{}", status.as_u16()),
            "title": status.canonical_reason().unwrap_or("Error"),
            "status": status.as_u16(),
            "detail": self.to_string(),
        });
        let mut res = (status, body.to_string()).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Error::TooManyRequests {
            retry_after_secs, ..
        } = &self
            && let Ok(value) = HeaderValue::from_str(&retry_after_secs.to_string())
        {
            res.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        res
    }
}

/// Turns axum's own 404/405/413 responses into problem JSON.
pub async fn problem_fallback(uri: axum::http::Uri) -> Error {
    Error::NotFound(format!("no route for {}", uri.path()))
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        if let Error::Internal(inner) = &e {
            tracing::error!(error = ?inner, "internal error");
        }
        let msg = e.to_string();
        match e {
            Error::BadRequest(_)
            | Error::Unprocessable(_)
            | Error::UnsupportedMediaType(_)
            | Error::PayloadTooLarge => tonic::Status::invalid_argument(msg),
            Error::Unauthorized => tonic::Status::unauthenticated(msg),
            Error::Forbidden(_) => tonic::Status::permission_denied(msg),
            Error::NotFound(_) => tonic::Status::not_found(msg),
            Error::Conflict(_) => tonic::Status::failed_precondition(msg),
            Error::TooManyRequests { .. } => tonic::Status::resource_exhausted(msg),
            Error::Unavailable(_) => tonic::Status::unavailable(msg),
            Error::Internal(_) => tonic::Status::internal(msg),
        }
    }
}
