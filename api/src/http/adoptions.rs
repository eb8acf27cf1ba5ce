//! `/factory/reconciliation/proposals/{proposalId}/adoption`: a proposal's unmanaged workloads
//! adopted into its environment's Pulumi program. The product generates the code that manages
//! them (`pulumi import`) and commits it on the branch `runtime-cloud/adopt/{proposalId}` of
//! the program's repository, never its default branch (workflow `program-adoption/{proposalId}/{attempt}`,
//! `models::program_adoption`); the proposal records the branch, the commit and the diff.

use crate::auth::{PRODUCTION_DECIDERS, RuntimeOperate, RuntimeRead, Scoped};
use crate::openapi::Problems;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use runtime_cloud_models::drift::ProposalState;
use runtime_cloud_models::targets::{ObserverTarget, RunnerTarget};
use runtime_cloud_store::adoptions::{self, Adoption, Requested};
use runtime_cloud_store::{environments, findings, proposals};
use runtime_cloud_workflows::ids::program_adoption_id;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(read, adopt))
}

/// An adoption, with its workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdoptionView {
    /// `program-adoption/{proposalId}/{attempt}`: the last request's.
    pub workflow_id: String,
    #[serde(flatten)]
    pub adoption: Adoption,
}

impl From<Adoption> for AdoptionView {
    fn from(adoption: Adoption) -> Self {
        Self {
            workflow_id: program_adoption_id(&adoption.proposal_id, adoption.attempt),
            adoption,
        }
    }
}

/// Adopts the proposal's unmanaged workloads into its environment's Pulumi program: the code
/// `pulumi import` generates for them is committed on a new branch of the program's
/// repository, for review (`state` `generating`, then `published` with `branch`, `commit` and
/// `diff`, or `failed` with `reason`). For a Pulumi stack observed in a Kubernetes namespace;
/// needs the `Operator` (or `PlatformAdmin`) role. An adoption generating or published answers
/// 200 as it is; a failed one is tried again.
#[utoipa::path(operation_id = "adoptProposal", post, path = "/factory/reconciliation/proposals/{proposalId}/adoption", tag = "proposals",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("proposalId" = String, Path, description = "The proposal id")),
    responses(
        (status = 202, description = "Generating", body = AdoptionView),
        (status = 200, description = "Already generating or published", body = AdoptionView),
        Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), proposal_id = %proposal_id))]
async fn adopt(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path(proposal_id): Path<String>,
) -> Result<(StatusCode, axum::Json<AdoptionView>), Error> {
    // It pushes to the program's repository with the stack's credential.
    auth.require_role(PRODUCTION_DECIDERS)?;
    let tenant = auth.tenant();
    let proposal = proposals::find(&state.db, tenant, &proposal_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("proposal `{proposal_id}` not found")))?;
    if proposal.state != ProposalState::Proposed {
        return Err(Error::Conflict(format!(
            "proposal `{proposal_id}` is {}, not Proposed",
            proposal.state
        )));
    }
    let env = environments::find(&state.db, tenant, &proposal.environment_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("proposal `{proposal_id}` not found")))?;
    if !matches!(
        (&env.target.runner, &env.target.observer),
        (RunnerTarget::Pulumi(_), ObserverTarget::Kubernetes(_))
    ) {
        return Err(Error::Unprocessable(format!(
            "environment `{}` is not a Pulumi stack observed in a Kubernetes namespace: adopt its workloads into the specification (accept the proposal) and use the generated manifests",
            env.environment_id
        )));
    }
    let unmanaged = findings::unmanaged_of(&state.db, tenant, std::slice::from_ref(&proposal_id))
        .await?
        .into_iter()
        .any(|f| f.resolved_at.is_none());
    if !unmanaged {
        return Err(Error::Unprocessable(format!(
            "proposal `{proposal_id}` covers no unmanaged workload to adopt"
        )));
    }
    let requested = adoptions::request(
        &state.db,
        tenant,
        &proposal.environment_id,
        &proposal_id,
        auth.subject(),
    )
    .await?;
    let (status, adoption) = match requested {
        Requested::Started(a) => (StatusCode::ACCEPTED, a),
        Requested::Already(a) => (StatusCode::OK, a),
    };
    if adoption.state == runtime_cloud_models::program_adoption::AdoptionState::Generating {
        // Recorded first: a start that fails here is made again by the same request or by the
        // next worker start (`temporal::adoptions::start_all`).
        runtime_cloud_temporal::adoptions::start(
            &state.temporal,
            &state.task_queue,
            tenant,
            &proposal_id,
            adoption.attempt,
        )
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot start the adoption of {proposal_id}");
            Error::Unavailable("the workflow service is unavailable; retry later".into())
        })?;
    }
    Ok((status, axum::Json(adoption.into())))
}

/// The proposal's adoption into its Pulumi program, if one was asked for.
#[utoipa::path(operation_id = "getAdoption", get, path = "/factory/reconciliation/proposals/{proposalId}/adoption", tag = "proposals",
    security(("bearer" = ["factory.runtime.read"])),
    params(("proposalId" = String, Path, description = "The proposal id")),
    responses(
        (status = 200, description = "The adoption", body = AdoptionView),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<RuntimeRead>,
    Path(proposal_id): Path<String>,
) -> Result<axum::Json<AdoptionView>, Error> {
    adoptions::find(&state.db, auth.tenant(), &proposal_id)
        .await?
        .map(|a| axum::Json(a.into()))
        .ok_or_else(|| Error::NotFound(format!("proposal `{proposal_id}` has no adoption")))
}
