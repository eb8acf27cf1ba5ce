//! What a task queue's pollers say: the workers serving a pool (and how much waits for them),
//! and whether another `runtime-cloud dev` polls the queue (`dev_server::refuse_shared`).

use crate::Error;
use chrono::Utc;
use std::time::Duration;
use temporalio_client::{Client, NamespacedClient};
use temporalio_common::protos::temporal::api::enums::v1::{TaskQueueKind, TaskQueueType};
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::{
    DescribeTaskQueueRequest, DescribeTaskQueueResponse,
};

/// A poller not seen for this long is gone: a live worker polls again at least every minute
/// (a long poll lasts about 60 s).
const POLLER_SEEN_WITHIN: Duration = Duration::from_secs(90);

/// The pollers of `task_queue` for tasks of `kind` (and, with `stats`, its backlog).
pub async fn describe(
    client: &Client,
    task_queue: &str,
    kind: TaskQueueType,
    stats: bool,
) -> Result<DescribeTaskQueueResponse, Error> {
    let request = DescribeTaskQueueRequest {
        namespace: client.namespace(),
        task_queue: Some(TaskQueue {
            name: task_queue.to_owned(),
            kind: TaskQueueKind::Normal as i32,
            ..Default::default()
        }),
        task_queue_type: kind as i32,
        report_stats: stats,
        ..Default::default()
    };
    let answer = client
        .connection()
        .workflow_service()
        .describe_task_queue(tonic::Request::new(request))
        .await
        .map_err(|status| Error::DescribeTaskQueue {
            task_queue: task_queue.to_owned(),
            status,
        })?;
    Ok(answer.into_inner())
}

/// What Temporal says about a pool's task queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLoad {
    /// Workers that polled it within the last 90 s.
    pub workers: u32,
    /// Activity tasks waiting for a worker.
    pub backlog: u64,
}

/// How many workers poll `task_queue` for activities now, and how many activity tasks wait
/// for one: what Temporal knows of a pool.
pub async fn pool_load(client: &Client, task_queue: &str) -> Result<PoolLoad, Error> {
    let answer = describe(client, task_queue, TaskQueueType::Activity, true).await?;
    let seen_since = Utc::now().timestamp() - POLLER_SEEN_WITHIN.as_secs() as i64;
    let mut identities: Vec<&str> = answer
        .pollers
        .iter()
        .filter(|p| {
            p.last_access_time
                .as_ref()
                .is_some_and(|t| t.seconds >= seen_since)
        })
        .map(|p| p.identity.as_str())
        .collect();
    identities.sort_unstable();
    identities.dedup();
    let backlog = answer.stats.map_or(0, |s| {
        u64::try_from(s.approximate_backlog_count).unwrap_or(0)
    });
    Ok(PoolLoad {
        workers: u32::try_from(identities.len()).unwrap_or(u32::MAX),
        backlog,
    })
}
