//! Deterministic, time-ordered ids minted inside workflows (replay gives the same id).

use temporalio_sdk::WorkflowContext;

/// A UUIDv7 from the workflow's clock and its seeded random source: time-ordered like the ids
/// the API mints, and the same on every replay.
pub fn time_ordered_id<W>(ctx: &WorkflowContext<W>) -> String {
    let millis = ctx
        .workflow_time()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    let a: u64 = ctx.random();
    let b: u64 = ctx.random();
    let mut bytes = [0u8; 10];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes()[..2]);
    uuid::Builder::from_unix_timestamp_millis(millis, &bytes)
        .into_uuid()
        .to_string()
}
