//! `/factory/reconciliation/proposals`: reviewable reconciliations and their decisions.

use super::pagination::{Page, Paged};
use crate::auth::{PRODUCTION_DECIDERS, RuntimeOperate, RuntimeRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use runtime_cloud_models::adoption::{GeneratedManifest, for_findings};
use runtime_cloud_models::drift::ProposalState;
use runtime_cloud_store::environments;
use runtime_cloud_store::proposals::{self, Proposal};
use runtime_cloud_workflows::ReconciliationProposal;
use runtime_cloud_workflows::ids::proposal_workflow_id;
use runtime_cloud_workflows::reconciliation_proposal::{Decision, Verdict};
use serde::{Deserialize, Serialize};
use temporalio_client::errors::{WorkflowInteractionError, WorkflowStartError};
use temporalio_client::{
    WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowSignalOptions, WorkflowStartOptions,
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(decide))
}

/// A proposal as the API shows it: the stored proposal and its workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProposalView {
    /// `proposal/{proposalId}`, for the Temporal UI and CLI.
    pub workflow_id: String,
    #[serde(flatten)]
    pub proposal: Proposal,
    /// For each unmanaged workload it covers that is still observed: what would manage it,
    /// generated from what the observer read (a Kubernetes namespace: the workload's `apps/v1`
    /// manifest; the sandbox: its `workloads[]` entry), to review and commit. `[]` when none.
    pub generated: Vec<GeneratedManifest>,
    /// Its unmanaged workloads' adoption into the environment's Pulumi program, once asked for
    /// (`POST …/adoption`): the branch, commit and diff when published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adoption: Option<runtime_cloud_store::adoptions::Adoption>,
}

impl From<Proposal> for ProposalView {
    fn from(proposal: Proposal) -> Self {
        Self {
            workflow_id: proposal_workflow_id(&proposal.proposal_id),
            proposal,
            generated: Vec::new(),
            adoption: None,
        }
    }
}

/// `views` with what would manage the unmanaged workloads each covers: one query for the
/// page's unmanaged findings and one for their adoptions, then each environment's target and
/// inventory once.
async fn with_generated(
    state: &AppState,
    tenant: &str,
    mut views: Vec<ProposalView>,
) -> Result<Vec<ProposalView>, Error> {
    let ids: Vec<String> = views
        .iter()
        .map(|v| v.proposal.proposal_id.clone())
        .collect();
    let unmanaged = runtime_cloud_store::findings::unmanaged_of(&state.db, tenant, &ids).await?;
    let mut adoptions =
        runtime_cloud_store::adoptions::of_proposals(&state.db, tenant, &ids).await?;
    let mut observed = std::collections::HashMap::new();
    for view in &mut views {
        if let Some(at) = adoptions
            .iter()
            .position(|a| a.proposal_id == view.proposal.proposal_id)
        {
            view.adoption = Some(adoptions.swap_remove(at));
        }
        let covered: Vec<String> = unmanaged
            .iter()
            .filter(|f| f.proposal_id.as_deref() == Some(view.proposal.proposal_id.as_str()))
            .map(|f| f.resource.clone())
            .collect();
        if covered.is_empty() {
            continue;
        }
        let env_id = view.proposal.environment_id.clone();
        if !observed.contains_key(&env_id) {
            let env = environments::find(&state.db, tenant, &env_id).await?;
            let inventory =
                runtime_cloud_store::inventory::find(&state.db, tenant, &env_id).await?;
            let read = env.map(|e| {
                let workloads = inventory.map(|i| i.workloads).unwrap_or_default();
                (e.target.observer, workloads)
            });
            observed.insert(env_id.clone(), read);
        }
        if let Some(Some((target, workloads))) = observed.get(&env_id) {
            view.generated = for_findings(&covered, workloads, target);
        }
    }
    Ok(views)
}

/// `?environmentId=&state=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only this environment's proposals.
    environment_id: Option<String>,
    /// A proposal state such as `Proposed` or `Applied`.
    state: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
}

/// Reconciliation proposals, newest first, a page at a time.
#[utoipa::path(operation_id = "listProposals", get, path = "/factory/reconciliation/proposals", tag = "proposals",
    security(("bearer" = ["factory.runtime.read"])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page of proposals", body = Paged<ProposalView>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<RuntimeRead>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Paged<ProposalView>>, Error> {
    let proposal_state = crate::query::optional::<ProposalState>(q.state.as_deref())?;
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let proposals = proposals::list(
        &state.db,
        auth.tenant(),
        q.environment_id.as_deref(),
        proposal_state,
        &rows,
    )
    .await?;
    let views = proposals.into_iter().map(ProposalView::from).collect();
    let views = with_generated(&state, auth.tenant(), views).await?;
    Ok(axum::Json(Paged::from_rows(
        views,
        limit,
        |p: &ProposalView| &p.proposal.proposal_id,
    )))
}

/// `POST …/decide`: `{"decision":"accept"|"reject","reason":"…"}`; the decider is the token's
/// subject.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DecideBody {
    decision: Verdict,
    /// Why; recorded on the proposal.
    #[serde(default)]
    reason: String,
}

/// The decision was signalled to the proposal's workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DecisionSignalled {
    proposal_id: String,
    decision: Verdict,
}

/// Accepts or rejects a proposed reconciliation (signal `decide`). Accepting a production
/// proposal needs the `Operator` or `PlatformAdmin` role too; acceptance starts the
/// reconciliation run.
#[utoipa::path(operation_id = "decideProposal", post, path = "/factory/reconciliation/proposals/{proposalId}/decide", tag = "proposals",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("proposalId" = String, Path, description = "The proposal id")),
    request_body = DecideBody,
    responses(
        (status = 202, description = "Signalled", body = DecisionSignalled),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), proposal_id = %proposal_id))]
async fn decide(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path(proposal_id): Path<String>,
    Json(body): Json<DecideBody>,
) -> Result<(StatusCode, axum::Json<DecisionSignalled>), Error> {
    let row = proposals::find(&state.db, auth.tenant(), &proposal_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("proposal `{proposal_id}` not found")))?;
    if row.state != ProposalState::Proposed {
        return Err(Error::Conflict(format!(
            "proposal `{proposal_id}` is {}, not Proposed",
            row.state
        )));
    }
    let production = environments::find(&state.db, auth.tenant(), &row.environment_id)
        .await?
        .is_some_and(|e| e.production());
    if production && body.decision == Verdict::Accept {
        // Accepting a production proposal is a production change: Operators only.
        auth.require_role(PRODUCTION_DECIDERS)?;
    }
    let decision = Decision {
        decision: body.decision,
        by: auth.subject().to_owned(),
        reason: body.reason,
        roles: auth.roles().to_vec(),
    };
    let handle = state
        .temporal
        .get_workflow_handle::<ReconciliationProposal>(proposal_workflow_id(&proposal_id));
    let signalled = runtime_cloud_temporal::in_current_span(handle.signal(
        ReconciliationProposal::decide,
        decision.clone(),
        WorkflowSignalOptions::default(),
    ))
    .await;
    match signalled {
        Ok(()) => {}
        Err(WorkflowInteractionError::NotFound(_)) => {
            // The observation that raised the proposal records it, then starts its workflow: a
            // decision in between starts the workflow itself, with the decision (the
            // observation's start then finds it running). One that ran and ended is not started
            // again.
            let opts = WorkflowStartOptions::new(
                state.task_queue.clone(),
                proposal_workflow_id(&proposal_id),
            )
            .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
            .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
            .build();
            runtime_cloud_temporal::in_current_span(state.temporal.signal_with_start_workflow(
                ReconciliationProposal::run,
                row.input(production, false),
                ReconciliationProposal::decide,
                decision,
                opts,
            ))
            .await
            .map_err(|e| match e {
                WorkflowStartError::AlreadyStarted { .. } => {
                    Error::Conflict(format!("proposal `{proposal_id}` has already ended"))
                }
                e => {
                    tracing::error!(error = %e, "cannot start proposal {proposal_id}");
                    Error::Unavailable("the workflow service is unavailable; retry later".into())
                }
            })?;
        }
        Err(e) => return Err(Error::from_signal(format!("proposal `{proposal_id}`"))(e)),
    }
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(DecisionSignalled {
            proposal_id,
            decision: body.decision,
        }),
    ))
}
