//! Rows the tests of this crate start from, beside `runtime_cloud_store::fixtures`.
#![allow(clippy::unwrap_used)]

use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::drift::Direction;
use runtime_cloud_models::inventory::{ProposalInput, RecordRequest};
use runtime_cloud_models::observation::Observation;
use runtime_cloud_store::DatabaseConnection;
use runtime_cloud_store::fixtures::{declaration, environment, observed, workload};
use runtime_cloud_store::proposals::Acceptance;

/// An environment `dev` declaring `api`, observed running `api` and an unmanaged `extra`:
/// proposal `p1` adopts what is observed.
pub(crate) async fn adoptable(db: &DatabaseConnection, extra: &str) -> ProposalInput {
    environment(db, "dev", EnvironmentClass::NonProduction).await;
    let api = workload("api", "1.0.0", 2);
    runtime_cloud_store::specifications::declare(db, &declaration("dev", vec![api.clone()]))
        .await
        .unwrap();
    let req = RecordRequest {
        tenant_id: "acme".into(),
        environment_id: "dev".into(),
        observation: Observation::Observed {
            workloads: vec![observed(&api), observed(&workload(extra, "0.1", 1))],
            resources: Vec::new(),
            posture: Vec::new(),
            resource_types: Default::default(),
            observed_at: None,
        },
        proposal_id: "p1".into(),
    };
    let outcome = crate::record_observation(db, &req, Acceptance::default())
        .await
        .unwrap();
    let proposal = outcome.new_proposal.unwrap();
    assert_eq!(proposal.direction, Direction::AdoptObserved);
    assert!(!proposal.auto_accept, "the option is off");
    proposal
}
