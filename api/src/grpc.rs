//! gRPC (tonic): `Inventory.GetObservedState` and `Provisioning.GetCurrentSpecification`,
//! served on the API's port beside HTTP. Same bearer tokens, scopes and tenant rules; errors
//! map to gRPC codes through [`Error`]'s `From` impl.

use crate::auth::{Auth, PROVISIONING_READ, RUNTIME_READ};
use crate::tenancy::require_environment;
use crate::{AppState, Error};
use runtime_cloud_store::environments::Environment;
use runtime_cloud_store::{inventory, runs, specifications};
use tonic::{Request, Response, Status};

/// The generated messages, servers and clients.
#[allow(missing_docs, clippy::all)] // Generated code.
pub mod proto {
    tonic::include_proto!("runtimecloud.v1");
}

use proto::inventory_server::{Inventory, InventoryServer};
use proto::provisioning_server::{Provisioning, ProvisioningServer};

/// Both services, ready to merge into the HTTP router.
pub fn routes(state: AppState) -> axum::Router {
    tonic::service::Routes::new(InventoryServer::new(Service(state.clone())))
        .add_service(ProvisioningServer::new(Service(state)))
        .into_axum_router()
}

/// The implementation of both services.
#[derive(Clone)]
pub struct Service(AppState);

impl Service {
    async fn auth<T>(&self, req: &Request<T>, scope: &str) -> Result<Auth, Status> {
        let token = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .ok_or(Error::Unauthorized)?;
        let auth = Auth {
            claims: self.0.auth.verify(token.trim()).await?,
        };
        auth.require(scope)?;
        Ok(auth)
    }

    async fn environment(&self, auth: &Auth, id: &str) -> Result<Environment, Status> {
        if id.is_empty() {
            return Err(Error::BadRequest("environment_id is required".into()).into());
        }
        Ok(require_environment(&self.0.db, auth.tenant(), id).await?)
    }
}

#[tonic::async_trait]
impl Inventory for Service {
    async fn get_observed_state(
        &self,
        req: Request<proto::GetObservedStateRequest>,
    ) -> Result<Response<proto::ObservedState>, Status> {
        let auth = self.auth(&req, RUNTIME_READ).await?;
        let env = self
            .environment(&auth, &req.get_ref().environment_id)
            .await?;
        let row = inventory::find(&self.0.db, auth.tenant(), &env.environment_id)
            .await
            .map_err(Error::from)?;
        let Some(row) = row else {
            return Ok(Response::new(proto::ObservedState {
                environment_id: env.environment_id,
                stale: true,
                ..Default::default()
            }));
        };
        Ok(Response::new(proto::ObservedState {
            environment_id: row.environment_id,
            workloads: row
                .workloads
                .into_iter()
                .map(|w| proto::ObservedWorkload {
                    name: w.name,
                    kind: w.kind,
                    version: w.version,
                    replicas_ready: w.replicas_ready,
                    replicas_desired: w.replicas_desired,
                    endpoints: w.endpoints,
                    config_refs: w.config_refs.into_iter().collect(),
                    secret_refs: w.secret_refs.into_iter().collect(),
                    health: w.health,
                })
                .collect(),
            observed_at: row.observed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
            stale: self
                .0
                .inventory
                .is_stale(row.stale, row.observed_at, chrono::Utc::now()),
            current_release_id: row.current_release_id.unwrap_or_default(),
            specification_version: row.specification_version.unwrap_or_default(),
        }))
    }
}

#[tonic::async_trait]
impl Provisioning for Service {
    async fn get_current_specification(
        &self,
        req: Request<proto::GetCurrentSpecificationRequest>,
    ) -> Result<Response<proto::CurrentSpecification>, Status> {
        let auth = self.auth(&req, PROVISIONING_READ).await?;
        let env = self
            .environment(&auth, &req.get_ref().environment_id)
            .await?;
        let db = &self.0.db;
        let run = runs::last_applied(db, auth.tenant(), &env.environment_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "no specification has been applied to `{}` yet",
                    env.environment_id
                ))
            })?;
        let spec = specifications::find(db, &run.specification_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| {
                Error::internal(anyhow::anyhow!(
                    "run {} names a missing specification",
                    run.provisioning_run_id
                ))
            })?;
        let d = spec.declaration;
        Ok(Response::new(proto::CurrentSpecification {
            specification_id: spec.specification_id,
            environment_id: d.environment_id,
            version: spec.version,
            program_ref: d.program_ref,
            program_version: d.program_version,
            config_refs: d.config_refs.into_iter().collect(),
            secret_refs: d.secret_refs.into_iter().collect(),
            workloads: d
                .workloads
                .into_iter()
                .map(|w| proto::Workload {
                    name: w.name,
                    kind: w.kind,
                    version: w.version,
                    replicas: w.replicas,
                    config_refs: w.config_refs.into_iter().collect(),
                    secret_refs: w.secret_refs.into_iter().collect(),
                })
                .collect(),
            provisioning_run_id: run.provisioning_run_id,
        }))
    }
}
