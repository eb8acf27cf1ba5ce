//! The RunControlService adapter of the Approvals port, over HTTP.
//!
//! The contract (docs/operations.md, "RunControlService"): a run's claim on an approval is
//!
//! ```text
//! POST {RUNTIME_CLOUD_RUN_CONTROL_URL}/approvals/{approvalId}/claims
//! Authorization: Bearer {RUNTIME_CLOUD_RUN_CONTROL_TOKEN}      (when set)
//! {"approvalId":"…","tenantId":"…","environmentId":"…","environmentClass":"production",
//!  "runId":"…","inputsHash":"sha256:…","at":"2026-12-01T10:00:00Z"}
//! ```
//!
//! answered `200` with the approval as recorded there, now spent on `runId` (the same JSON as
//! `GET /factory/approvals/{approvalId}`), `404` when RunControlService has no such approval,
//! and `409` when another run spent it. The answer is verified here by the same rule as a
//! recorded approval ([`verify_approval`]): RunControlService says what it holds; whether it
//! opens this run's gate is decided by the product, so a grant by a principal without the role
//! or for another environment is refused whatever the service answered.

use crate::Error;
use crate::ports::Approvals;
use runtime_cloud_models::RefusalReason;
use runtime_cloud_models::approvals::{
    ApprovalClaim, ClaimOutcome, RecordedApproval, verify_approval,
};
use std::time::Duration;

/// Claims approvals from RunControlService.
#[derive(Clone)]
pub struct RunControlApprovals {
    base_url: String,
    /// Sent as a bearer token; never logged.
    token: Option<String>,
    http: reqwest::Client,
}

impl std::fmt::Debug for RunControlApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunControlApprovals")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl RunControlApprovals {
    /// An adapter for the service at `base_url` (`https://run-control.internal/v1`).
    pub fn new(base_url: &str, token: Option<String>) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Unavailable(format!("RunControlService client: {e}")))?;
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }
}

#[async_trait::async_trait]
impl Approvals for RunControlApprovals {
    async fn claim(&self, claim: &ApprovalClaim) -> Result<ClaimOutcome, Error> {
        let id: String = runtime_cloud_models::wire::percent_encode(&claim.approval_id);
        let url = format!("{}/approvals/{id}/claims", self.base_url);
        let mut request = self.http.post(&url).json(claim);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let unavailable = |e: reqwest::Error| Error::Unavailable(format!("RunControlService: {e}"));
        let response = request.send().await.map_err(unavailable)?;
        let refused = |why| Ok(ClaimOutcome::Refused { why });
        match response.status().as_u16() {
            200 => {
                let approval: RecordedApproval = response.json().await.map_err(unavailable)?;
                if approval.approval_id != claim.approval_id {
                    return refused(RefusalReason::UnknownApproval);
                }
                if let Err(why) = verify_approval(Some(&approval), claim) {
                    return refused(why);
                }
                // It verified; it must also say this run spent it.
                if approval.spent_by_run_id.as_deref() != Some(claim.run_id.as_str()) {
                    return refused(RefusalReason::AlreadySpent);
                }
                Ok(ClaimOutcome::Spent {
                    approval: Box::new(approval),
                })
            }
            404 => refused(RefusalReason::UnknownApproval),
            409 => refused(RefusalReason::AlreadySpent),
            // Anything else (a 5xx, a 401 for a rotated token) is retried: the run waits,
            // visibly in the worker's log, until the service answers.
            status => Err(Error::Unavailable(format!(
                "RunControlService answered {status} to the claim on approval {id}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let a = RunControlApprovals::new("http://rc", Some("s3cret".into())).unwrap();
        assert!(!format!("{a:?}").contains("s3cret"));
    }
}
