//! gRPC reads with a tonic client: `Inventory.GetObservedState`, `Provisioning.GetCurrentSpecification`.

use crate::common::{Stack, StackOptions};
use runtime_cloud_api::grpc::proto::inventory_client::InventoryClient;
use runtime_cloud_api::grpc::proto::provisioning_client::ProvisioningClient;
use runtime_cloud_api::grpc::proto::{GetCurrentSpecificationRequest, GetObservedStateRequest};
use tonic::Code;

fn with_token<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    req
}

#[tokio::test]
async fn grpc_reads_observed_state_and_current_specification() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    let run = api.applied(&stack, "dev", &[("api", "1.0.0", 2)]).await;
    // A newer declaration that is not applied: the current specification stays version 1.
    api.declare("dev", &[("api", "2.0.0", 2)]).await;

    let token = stack.token(
        "acme",
        &["factory.runtime.read", "factory.provisioning.read"],
    );
    let mut inventory = InventoryClient::connect(stack.base_url.clone())
        .await
        .expect("connect");
    let state = inventory
        .get_observed_state(with_token(
            GetObservedStateRequest {
                environment_id: "dev".into(),
            },
            &token,
        ))
        .await
        .expect("observed state")
        .into_inner();
    assert!(!state.stale);
    assert!(!state.observed_at.is_empty());
    assert_eq!(state.specification_version, 1);
    assert_eq!(state.workloads.len(), 1);
    assert_eq!(state.workloads[0].version, "1.0.0");
    assert_eq!(state.workloads[0].replicas_ready, 2);
    assert_eq!(
        state.workloads[0].secret_refs["db"],
        "secretbroker://shop/api/db"
    );

    let mut provisioning = ProvisioningClient::connect(stack.base_url.clone())
        .await
        .expect("connect");
    let spec = provisioning
        .get_current_specification(with_token(
            GetCurrentSpecificationRequest {
                environment_id: "dev".into(),
            },
            &token,
        ))
        .await
        .expect("current specification")
        .into_inner();
    assert_eq!(
        spec.version, 1,
        "the version last applied, not the latest declared"
    );
    assert_eq!(spec.provisioning_run_id, run);
    assert_eq!(spec.workloads[0].version, "1.0.0");

    // Errors: no token, a missing scope, another tenant's environment, a bad argument.
    let no_token = inventory
        .get_observed_state(GetObservedStateRequest {
            environment_id: "dev".into(),
        })
        .await;
    assert_eq!(
        no_token.map(|_| ()).unwrap_err().code(),
        Code::Unauthenticated
    );
    let narrow = stack.token("acme", &["factory.runtime.read"]);
    let denied = provisioning
        .get_current_specification(with_token(
            GetCurrentSpecificationRequest {
                environment_id: "dev".into(),
            },
            &narrow,
        ))
        .await;
    assert_eq!(
        denied.map(|_| ()).unwrap_err().code(),
        Code::PermissionDenied
    );
    let other = stack.token(
        "globex",
        &["factory.runtime.read", "factory.provisioning.read"],
    );
    let hidden = inventory
        .get_observed_state(with_token(
            GetObservedStateRequest {
                environment_id: "dev".into(),
            },
            &other,
        ))
        .await;
    assert_eq!(hidden.map(|_| ()).unwrap_err().code(), Code::NotFound);
    let empty = inventory
        .get_observed_state(with_token(
            GetObservedStateRequest {
                environment_id: String::new(),
            },
            &token,
        ))
        .await;
    assert_eq!(empty.map(|_| ()).unwrap_err().code(), Code::InvalidArgument);
    api.environment("fresh", "non-production").await;
    let none = provisioning
        .get_current_specification(with_token(
            GetCurrentSpecificationRequest {
                environment_id: "fresh".into(),
            },
            &token,
        ))
        .await;
    assert_eq!(none.map(|_| ()).unwrap_err().code(), Code::NotFound);
}
