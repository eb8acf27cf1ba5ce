//! Inbound events: what the promotion, environment and run-control services tell Runtime
//! Cloud. The spec names the handlers (001, "Event handlers") but no payloads; these are
//! Runtime Cloud's, published as JSON Schemas under `schemas/inbound/` (one per type, checked
//! against these types by a test). Each arrives as a CloudEvents 1.0 JSON envelope on NATS
//! JetStream, its subject and `type` in the style of the outbound topics.

pub mod proof;

use crate::specification::{Refs, Workload};
use crate::{EnvironmentClass, SpecificationKind};
use serde::{Deserialize, Serialize};

/// Subject and CloudEvents `type` of `PromotionApproved` (EnvironmentPromotionService).
pub const PROMOTION_APPROVED: &str = "promotion.promotions.v1.promotion-approved";
/// Subject and CloudEvents `type` of `EnvironmentCreated` (EnvironmentService).
pub const ENVIRONMENT_CREATED: &str = "environment.environments.v1.environment-created";
/// Subject and CloudEvents `type` of `ApprovalDecided` (RunControlService).
pub const APPROVAL_DECIDED: &str = "runcontrol.approvals.v1.approval-decided";

/// Every inbound type, with its JSON Schema.
pub const TYPES: &[(&str, &str)] = &[
    (
        PROMOTION_APPROVED,
        include_str!("../../schemas/inbound/promotion-approved.schema.json"),
    ),
    (
        ENVIRONMENT_CREATED,
        include_str!("../../schemas/inbound/environment-created.schema.json"),
    ),
    (
        APPROVAL_DECIDED,
        include_str!("../../schemas/inbound/approval-decided.schema.json"),
    ),
];

/// The desired state an event carries: a specification declaration without its environment
/// (the event names it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DesiredState {
    #[serde(default = "environment_kind")]
    pub kind: SpecificationKind,
    pub program_ref: String,
    pub program_version: String,
    #[serde(default)]
    pub release_id: Option<String>,
    #[serde(default)]
    pub strategy: Option<String>,
    #[serde(default)]
    pub config_refs: Refs,
    #[serde(default)]
    pub secret_refs: Refs,
    #[serde(default)]
    pub workloads: Vec<Workload>,
}

fn environment_kind() -> SpecificationKind {
    SpecificationKind::Environment
}

/// `PromotionApproved`: a promotion to this environment was approved; Runtime Cloud declares
/// its desired state and plans a `promotion` run carrying the promotion's id, whose
/// production apply spends the promotion's approval (verified like any other). In production
/// the approval must be proven by `signature` ([`proof::PromotionClaims`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromotionApproved {
    pub promotion_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub specification: DesiredState,
    pub approval: PromotionApproval,
    /// The promotion service's compact JWS over what it approves ([`proof::PromotionClaims`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Who approved a promotion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromotionApproval {
    pub granted_by: String,
    #[serde(default)]
    pub granted_by_roles: Vec<String>,
    #[serde(default)]
    pub reason: String,
    /// Until when it can be spent; `ApprovalValidityHours` after it arrived when absent.
    #[serde(default)]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// `EnvironmentCreated`: register the environment and, when it comes with its desired state,
/// declare it and plan its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentCreated {
    pub tenant_id: String,
    pub environment_id: String,
    pub project_id: String,
    pub class: EnvironmentClass,
    #[serde(default)]
    pub target: Option<crate::targets::Target>,
    #[serde(default)]
    pub mode: Option<crate::environments::EnvironmentMode>,
    #[serde(default)]
    pub specification: Option<DesiredState>,
    /// What fleet rollouts select the environment by.
    #[serde(default)]
    pub labels: crate::environments::Labels,
    /// The customer tenant inside the product, where given.
    #[serde(default)]
    pub customer_tenant_id: Option<String>,
    /// An ephemeral environment's time to live (`"72h"`), as `POST /factory/environments` takes
    /// it: decommissioned and retired at its expiry.
    #[serde(default)]
    pub ttl: Option<String>,
    /// An ephemeral environment's expiry (RFC 3339), instead of `ttl`.
    #[serde(default)]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// `ApprovalDecided`: RunControlService decided on a run that waits for its approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalDecided {
    pub tenant_id: String,
    pub provisioning_run_id: String,
    pub decision: crate::ApprovalDecision,
    pub decided_by: String,
    #[serde(default)]
    pub decided_by_roles: Vec<String>,
    #[serde(default)]
    pub reason: String,
    /// The plan decided on: a decision for another plan is refused by the run.
    pub inputs_hash: String,
    /// RunControlService's compact JWS over the decision ([`proof::DecisionClaims`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Instead of a signature, where `RUNTIME_CLOUD_RUN_CONTROL_URL` is set: the approval's id
    /// at RunControlService, which the run claims there (and verifies) before it applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

/// An inbound event, by type.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    PromotionApproved(PromotionApproved),
    EnvironmentCreated(EnvironmentCreated),
    ApprovalDecided(ApprovalDecided),
}

impl Inbound {
    /// Reads `data` of an event of `event_type` (already valid against its schema).
    pub fn read(event_type: &str, data: serde_json::Value) -> Result<Self, String> {
        let err = |e: serde_json::Error| format!("{event_type}: {e}");
        Ok(match event_type {
            PROMOTION_APPROVED => {
                Self::PromotionApproved(serde_json::from_value(data).map_err(err)?)
            }
            ENVIRONMENT_CREATED => {
                Self::EnvironmentCreated(serde_json::from_value(data).map_err(err)?)
            }
            APPROVAL_DECIDED => Self::ApprovalDecided(serde_json::from_value(data).map_err(err)?),
            other => return Err(format!("unknown event type `{other}`")),
        })
    }

    /// The tenant it is for.
    pub fn tenant_id(&self) -> &str {
        match self {
            Self::PromotionApproved(e) => &e.tenant_id,
            Self::EnvironmentCreated(e) => &e.tenant_id,
            Self::ApprovalDecided(e) => &e.tenant_id,
        }
    }
}
