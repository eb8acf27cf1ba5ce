//! A query-string extractor whose rejections are problem JSON (400).

use crate::Error;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// `Query<T>` that rejects with [`Error::BadRequest`].
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|e| Error::BadRequest(crate::json::redact(&e.body_text())))
    }
}

/// An optional query parameter read as `T` (a wire enum such as a state or a kind); one that
/// is not a `T` is a 400 saying what it takes.
pub fn optional<T>(value: Option<&str>) -> Result<Option<T>, Error>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value
        .map(T::from_str)
        .transpose()
        .map_err(|e| Error::BadRequest(e.to_string()))
}
