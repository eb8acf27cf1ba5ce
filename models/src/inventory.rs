//! What recording an observation takes and gives, and the proposal a ReconciliationProposal
//! workflow is started with: the payloads the inventory activities and the store share.

use crate::drift::{Direction, ProposalState};
use crate::observation::Observation;
use serde::{Deserialize, Serialize};

/// Record an observation: inventory, findings, and (with `proposal_id`) a new proposal when
/// the open findings changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordRequest {
    pub tenant_id: String,
    pub environment_id: String,
    pub observation: Observation,
    /// The id a new proposal gets, chosen by the workflow so a retried record raises the same one.
    pub proposal_id: String,
}

/// What recording an observation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordOutcome {
    /// The observation changed the inventory (`ObservedStateChanged` was written).
    pub changed: bool,
    pub stale: bool,
    pub new_findings: u32,
    pub resolved_findings: u32,
    /// A proposal raised by this observation: its workflow must be started.
    pub new_proposal: Option<ProposalInput>,
    /// Proposals superseded whose workflows must be told: the open ones this observation
    /// replaced, and those an earlier record of the environment replaced and whose workflows
    /// were not marked told yet (`store::proposals::mark_told`). Telling one twice is harmless.
    pub superseded: Vec<String>,
}

/// Everything a ReconciliationProposal workflow needs, fixed at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalInput {
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub production: bool,
    pub direction: Direction,
    pub destructive: bool,
    /// Non-destructive, outside production, enabled and allowed by policy.
    pub auto_accept: bool,
}

/// Project a proposal's state (and `ReconciliationDecided` on a decision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalProjection {
    pub proposal_id: String,
    pub state: ProposalState,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub provisioning_run_id: Option<String>,
}
