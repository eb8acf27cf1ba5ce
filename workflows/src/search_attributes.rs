//! Custom search attributes: filter runs in the Temporal UI and `temporal workflow list --query`.

use runtime_cloud_models::RunInput;
use temporalio_common::search_attributes::{SearchAttributeKey, SearchAttributeUpdate};

/// The tenant that owns the workflow.
pub const TENANT_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("TenantId");
/// The environment the workflow acts on.
pub const ENVIRONMENT_ID: SearchAttributeKey<String> = SearchAttributeKey::keyword("EnvironmentId");
/// A provisioning run's state where it waits (`AwaitingApproval`, `Applying` …) or ended.
pub const PROVISIONING_STATE: SearchAttributeKey<String> =
    SearchAttributeKey::keyword("ProvisioningState");
/// A provisioning run's kind (`baseline`, `promotion` …).
pub const RUN_KIND: SearchAttributeKey<String> = SearchAttributeKey::keyword("RunKind");

/// A reconciliation proposal's current state (`Proposed`, `Accepted` …).
pub const PROPOSAL_STATE: SearchAttributeKey<String> = SearchAttributeKey::keyword("ProposalState");

/// A fleet rollout's current state (`Running`, `Halted` …).
pub const ROLLOUT_STATE: SearchAttributeKey<String> = SearchAttributeKey::keyword("RolloutState");

/// Every custom attribute with its type, for registration on a namespace.
pub const ALL: &[(&str, &str)] = &[
    ("TenantId", "Keyword"),
    ("EnvironmentId", "Keyword"),
    ("ProvisioningState", "Keyword"),
    ("RunKind", "Keyword"),
    ("ProposalState", "Keyword"),
    ("RolloutState", "Keyword"),
];

/// A provisioning run's tenant, environment and kind. Whoever starts a run sets them at start,
/// so the run need not upsert them (each upsert is a history event and a visibility write).
pub fn run_attributes(input: &RunInput) -> [SearchAttributeUpdate; 3] {
    [
        TENANT_ID.value_set(input.tenant_id.clone()),
        ENVIRONMENT_ID.value_set(input.environment_id.clone()),
        RUN_KIND.value_set(input.kind.as_str().to_owned()),
    ]
}
