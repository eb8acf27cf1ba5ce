//! A JSON body extractor whose rejections are problem JSON, without echoing submitted values
//! (a misplaced secret must not come back in an error or reach a log).

use crate::Error;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

/// `Json<T>` that rejects with [`Error`].
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rejection) => Err(rejection_error(rejection)),
        }
    }
}

fn rejection_error(r: JsonRejection) -> Error {
    match r {
        JsonRejection::JsonDataError(e) => Error::Unprocessable(redact(&source_text(&e))),
        JsonRejection::JsonSyntaxError(e) => {
            Error::BadRequest(format!("malformed JSON: {}", redact(&source_text(&e))))
        }
        JsonRejection::MissingJsonContentType(_) => {
            Error::UnsupportedMediaType("expected `Content-Type: application/json`".into())
        }
        JsonRejection::BytesRejection(e) => {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge
            } else {
                Error::BadRequest("the request body could not be read".into())
            }
        }
        other => Error::BadRequest(other.body_text()),
    }
}

/// The innermost message of a rejection (serde's, with its line and column).
fn source_text(e: &dyn std::error::Error) -> String {
    let mut last = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        last = s.to_string();
        cur = s.source();
    }
    last
}

/// Replaces every quoted string in a serde message by `"…"`: serde quotes submitted values
/// (`invalid type: string "hunter2"`), while field names use backticks and stay readable.
pub fn redact(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut in_quote = false;
    for c in msg.chars() {
        if c == '"' {
            if in_quote {
                out.push_str("…\"");
            } else {
                out.push('"');
            }
            in_quote = !in_quote;
        } else if !in_quote {
            out.push(c);
        }
    }
    out
}

/// Parses an optional JSON body: empty means `T::default()`.
pub fn parse_optional<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            Error::Unprocessable(redact(&e.to_string()))
        } else {
            Error::BadRequest(format!("malformed JSON: {}", redact(&e.to_string())))
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_hides_values_but_keeps_field_names() {
        let msg = r#"replicas: invalid type: string "hunter2", expected u32 at line 1 column 9 unknown field `secretValue`"#;
        let r = super::redact(msg);
        assert!(!r.contains("hunter2"));
        assert!(r.contains("`secretValue`"));
    }
}
