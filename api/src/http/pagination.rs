//! Cursor pagination: the cursor is the opaque, base64url-encoded id of the last row returned.

use crate::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

/// Default and maximum page sizes.
const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 200;

/// `?cursor=…&limit=…`.
#[derive(Debug, Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// 1–200; 50 when absent.
    pub limit: Option<u64>,
}

impl Page {
    /// The rows to ask the store for: after the cursor, newest first by id (ids are UUIDv7,
    /// so time-ordered), one row more than the page size (it only says there is a next page);
    /// also returns the page size.
    pub fn rows(&self) -> Result<(runtime_cloud_store::Page, u64), Error> {
        let limit = self.limit()?;
        let rows = runtime_cloud_store::Page {
            after: self.after()?,
            rows: limit + 1,
        };
        Ok((rows, limit))
    }

    /// The page size, within bounds.
    pub fn limit(&self) -> Result<u64, Error> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n @ 1..=MAX_LIMIT) => Ok(n),
            Some(_) => Err(Error::BadRequest(format!(
                "limit must be between 1 and {MAX_LIMIT}"
            ))),
        }
    }

    /// The id after which this page starts.
    pub fn after(&self) -> Result<Option<String>, Error> {
        self.cursor.as_deref().map(decode).transpose()
    }
}

/// `?environmentId=…&cursor=…&limit=…`: a page of a list that may be narrowed to one
/// environment (specification versions, approvals).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct EnvironmentPage {
    /// Only this environment's.
    pub environment_id: Option<String>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u64>,
}

impl EnvironmentPage {
    /// The page it asks for.
    pub fn page(&self) -> Page {
        Page {
            cursor: self.cursor.clone(),
            limit: self.limit,
        }
    }
}

/// Encodes the last id of a page as the next cursor.
pub fn encode(last_id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{last_id}"))
}

fn decode(cursor: &str) -> Result<String, Error> {
    let invalid = || Error::BadRequest("invalid cursor".into());
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    text.strip_prefix("v1:")
        .map(str::to_owned)
        .ok_or_else(invalid)
}

/// A page of items and the cursor of the next page.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Paged<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl<T> Paged<T> {
    /// Builds a page from `limit + 1` fetched rows: the extra row only says there is more.
    pub fn from_rows(mut rows: Vec<T>, limit: u64, id: impl Fn(&T) -> &str) -> Self {
        let more = rows.len() as u64 > limit;
        rows.truncate(limit as usize);
        let next_cursor = if more {
            rows.last().map(|r| encode(id(r)))
        } else {
            None
        };
        Paged {
            items: rows,
            next_cursor,
        }
    }
}
