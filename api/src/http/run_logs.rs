//! `GET …/runs/{id}/logs`: a run's plan and apply logs as text, a page of bytes at a time.
//!
//! A Pulumi program can print megabytes, so the route never answers a whole log: `offset` and
//! `limit` (bytes) choose the page, and `Link: <…>; rel="next"` names the next one while more
//! is kept. A page ends at a character's end, so pages joined are the log as written, and a
//! client that asks again from where it stopped gets only what the log gained since (the CLI's
//! `runs logs --follow`).

use super::runs::find_run;
use crate::auth::{ProvisioningRead, Scoped};
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use object_store::ObjectStore;
use object_store::path::Path as Key;
use runtime_cloud_models::artifacts;
use serde::Deserialize;
use std::ops::Range;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(logs))
}

/// The most a page holds, and what it holds when `limit` is absent: 1 MiB.
pub const MAX_PAGE_BYTES: u64 = 1024 * 1024;

/// `?phase=plan|apply&offset=…&limit=…`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LogsQuery {
    /// `plan` or `apply`; both, plan first, each under a `=== phase` line, when absent.
    phase: Option<String>,
    /// The byte the page starts at: 0 when absent, else where the previous page ended.
    offset: Option<u64>,
    /// The page's size in bytes, 1–1048576; 1048576 when absent.
    limit: Option<u64>,
}

/// The run's plan and apply logs as the runner wrote them (every command it ran and what it
/// printed, secret values redacted), as text, a page at a time.
#[utoipa::path(operation_id = "getRunLogs", get, path = "/factory/provisioning/runs/{provisioningRunId}/logs", tag = "runs",
    security(("bearer" = ["factory.provisioning.read"])),
    params(("provisioningRunId" = String, Path, description = "The provisioning run id"), LogsQuery),
    responses(
        (status = 200, description = "A page of the log: empty past its end", content_type = "text/plain", body = String,
            headers(("Link" = String, description = "`<…>; rel=\"next\"`: the next page, while the log holds more"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn logs(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Path(id): Path<String>,
    Query(q): Query<LogsQuery>,
) -> Result<Response, Error> {
    let limit = match q.limit {
        None => MAX_PAGE_BYTES,
        Some(n @ 1..=MAX_PAGE_BYTES) => n,
        Some(n) => {
            return Err(Error::BadRequest(format!(
                "limit {n} is not within 1–{MAX_PAGE_BYTES} bytes"
            )));
        }
    };
    // The largest offset the API's schema allows (an OpenAPI integer is 64-bit, signed).
    let offset = match q.offset {
        None => 0,
        Some(n) if i64::try_from(n).is_ok() => n,
        Some(n) => {
            return Err(Error::BadRequest(format!(
                "offset {n} is larger than {}",
                i64::MAX
            )));
        }
    };
    let run = find_run(&state, auth.tenant(), &id).await?;
    let phases: Vec<&str> = match q.phase.as_deref() {
        None => artifacts::PHASES.to_vec(),
        Some(p) if artifacts::PHASES.contains(&p) => vec![p],
        Some(other) => {
            return Err(Error::BadRequest(format!(
                "phase `{other}` is not one of plan, apply"
            )));
        }
    };
    // The log's parts as the text joins them: each phase kept, under its heading when both
    // are asked for.
    let mut parts = Vec::new();
    for phase in &phases {
        let key = artifacts::run_log(&run.tenant_id, &run.provisioning_run_id, phase);
        // Made of the run's own ids, which the validation rules keep to names.
        if !artifacts::checked(&key) {
            return Err(Error::Internal(anyhow::anyhow!("artifact key {key}")));
        }
        let key = Key::parse(&key).map_err(|e| Error::Internal(e.into()))?;
        if let Some(len) = size(state.artifacts.as_ref(), &key).await? {
            if phases.len() > 1 {
                parts.push(Part::Heading(format!("=== {phase}\n")));
            }
            parts.push(Part::Kept { key, len });
        }
    }
    if parts.is_empty() {
        return Err(Error::NotFound(format!(
            "run `{id}` has no {} log yet",
            q.phase.as_deref().unwrap_or("plan or apply")
        )));
    }
    let lens: Vec<u64> = parts.iter().map(Part::len).collect();
    let total: u64 = lens.iter().sum();
    // Up to three bytes more than the page: enough to end it at a character's end.
    let asked = offset..offset.saturating_add(limit + 3).min(total);
    let mut bytes = Vec::new();
    for (i, range) in covered(&lens, asked.clone()) {
        match &parts[i] {
            Part::Heading(text) => {
                bytes.extend_from_slice(&text.as_bytes()[range.start as usize..range.end as usize]);
            }
            Part::Kept { key, .. } => {
                // A log replaced by a retried step may have shrunk since its length was read:
                // the page ends where it does, so the bytes after it keep their offsets.
                let asked = range.end - range.start;
                let read = read_range(state.artifacts.as_ref(), key, range).await?;
                let short = (read.len() as u64) < asked;
                bytes.extend(read);
                if short {
                    break;
                }
            }
        }
    }
    bytes.truncate(page_end(&bytes, limit as usize));
    let next = offset + bytes.len() as u64;
    // (No next page after an empty one: a log replaced by a shorter one would name it again.)
    let more = next < total && !bytes.is_empty();
    let mut response =
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response();
    if more {
        let run_id = &run.provisioning_run_id;
        let mut link =
            format!("/factory/provisioning/runs/{run_id}/logs?offset={next}&limit={limit}");
        if let Some(phase) = &q.phase {
            link.push_str(&format!("&phase={phase}"));
        }
        if let Ok(value) = format!("<{link}>; rel=\"next\"").parse() {
            response.headers_mut().insert(header::LINK, value);
        }
    }
    Ok(response)
}

/// A part of the log text.
enum Part {
    /// A phase's `=== phase` line.
    Heading(String),
    /// A phase's log as kept, of `len` bytes.
    Kept { key: Key, len: u64 },
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Heading(text) => text.len() as u64,
            Part::Kept { len, .. } => *len,
        }
    }
}

/// Which bytes of which parts (of these lengths, joined in order) `range` of the joined text
/// covers: each part's index and the range within it, parts it does not reach left out.
fn covered(lens: &[u64], range: Range<u64>) -> Vec<(usize, Range<u64>)> {
    let mut start_of_part = 0;
    let mut out = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let part = start_of_part..start_of_part + len;
        let (from, to) = (range.start.max(part.start), range.end.min(part.end));
        if from < to {
            out.push((i, from - part.start..to - part.start));
        }
        start_of_part = part.end;
    }
    out
}

/// Where a page of at most `limit` bytes of `bytes` (read from a character's start) ends: all
/// of them when they fit, else at the last character's end within `limit`, or past a first
/// character longer than `limit`.
fn page_end(bytes: &[u8], limit: usize) -> usize {
    if bytes.len() <= limit {
        return bytes.len();
    }
    let starts_char = |i: usize| i >= bytes.len() || bytes[i] & 0b1100_0000 != 0b1000_0000;
    match (1..=limit).rev().find(|&i| starts_char(i)) {
        Some(end) => end,
        None => (limit + 1..=bytes.len())
            .find(|&i| starts_char(i))
            .unwrap_or(bytes.len()),
    }
}

/// The length of what is kept under `key`, if anything is.
async fn size(store: &dyn ObjectStore, key: &Key) -> Result<Option<u64>, Error> {
    match store.head(key).await {
        Ok(meta) => Ok(Some(meta.size)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(Error::Internal(e.into())),
    }
}

/// The bytes of `range` under `key`: fewer past its end, none when nothing is there. A range
/// is asked for only as far as the object goes now (S3 answers one past its end with 416, and
/// a log a retried step replaced may have shrunk since its length was read).
async fn read_range(
    store: &dyn ObjectStore,
    key: &Key,
    range: Range<u64>,
) -> Result<Vec<u8>, Error> {
    let Some(len) = size(store, key).await? else {
        return Ok(Vec::new());
    };
    let range = range.start.min(len)..range.end.min(len);
    if range.is_empty() {
        return Ok(Vec::new());
    }
    match store.get_range(key, range).await {
        Ok(bytes) => Ok(bytes.to_vec()),
        Err(object_store::Error::NotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(Error::Internal(e.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_covers_the_parts_it_reaches() {
        // "=== plan\n" (9), plan log (5), "=== apply\n" (10), apply log (4).
        let lens = [9, 5, 10, 4];
        assert_eq!(covered(&lens, 0..3), vec![(0, 0..3)]);
        assert_eq!(
            covered(&lens, 7..26),
            vec![(0, 7..9), (1, 0..5), (2, 0..10), (3, 0..2)]
        );
        assert_eq!(covered(&lens, 14..24), vec![(2, 0..10)]);
        assert_eq!(covered(&lens, 28..40), vec![]);
        assert_eq!(covered(&[0, 3], 0..3), vec![(1, 0..3)]);
    }

    #[test]
    fn a_page_ends_at_a_characters_end() {
        let text = "ab€cd".as_bytes(); // € is three bytes: 2..5.
        // A limit inside the € ends the page before it.
        assert_eq!(page_end(text, 3), 2);
        assert_eq!(page_end(text, 4), 2);
        assert_eq!(page_end(text, 5), 5);
        assert_eq!(page_end(text, 2), 2);
        // A limit shorter than the first character still moves on by one character.
        assert_eq!(page_end(&text[2..], 1), 3);
        // Bytes that fit are the page.
        assert_eq!(page_end(&text[3..], 5), 4);
        assert_eq!(page_end(text, 100), 7);
    }
}
