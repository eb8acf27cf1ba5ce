//! `cluster-watch/{clusterId}`: one worker at a time watches a Kubernetes cluster for every
//! environment observed there, and a change to an environment's objects observes it within
//! seconds (the sweep stays the backstop).
//!
//! The watch is one long activity that heartbeats: when its worker dies the heartbeat stops,
//! and Temporal hands the activity to another worker after [`HEARTBEAT_TIMEOUT`]. It returns
//! after a while to start again in a fresh history, or when nothing is observed on the cluster
//! any more. Started by the API when an environment names the cluster, and by every worker as
//! it starts (a start finds a running watch and leaves it).

use crate::contracts::{KubernetesCluster, WatchActivities, WatchEnd};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityOptions, ContinueAsNewOptions, WorkflowContext, WorkflowContextView, WorkflowResult,
};

/// How long a worker may be silent before another one takes the cluster's watch over.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one activity watches before it returns to start again (its history stays short);
/// the activity returns itself after `runtime_cloud_activities::kubernetes::watch::WATCH_FOR`,
/// well within this.
const WATCH_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);

/// The ClusterWatch workflow.
#[workflow]
pub struct ClusterWatch {
    cluster: KubernetesCluster,
}

#[workflow_methods]
impl ClusterWatch {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, cluster: KubernetesCluster) -> Self {
        Self { cluster }
    }

    /// Watch → (nothing left: end | its while is over: again, in a fresh history).
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let cluster = ctx.state(|s| s.cluster.clone());
        // A cluster that cannot be reached is tried again every 10 s at most; a watch never
        // gives up on its own.
        let opts = ActivityOptions::with_start_to_close_timeout(WATCH_TIMEOUT)
            .heartbeat_timeout(HEARTBEAT_TIMEOUT)
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_interval(Duration::from_secs(10))
                    .build(),
            )
            .build();
        let end = ctx
            .execute_activity(WatchActivities::watch_cluster, cluster.clone(), opts)
            .await?;
        match end {
            WatchEnd::NothingToWatch => Ok(()),
            WatchEnd::Again => {
                ctx.continue_as_new(cluster, ContinueAsNewOptions::default())?;
                Ok(())
            }
        }
    }
}
