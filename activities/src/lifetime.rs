//! The lifetime activities the EnvironmentLifetime workflow calls: read the environment's life,
//! warn of its expiry once, record its decommission run. Each is idempotent by what the
//! workflow chose (the expiry, the run id).

use crate::error::store_failed;
use runtime_cloud_models::RunInput;
use runtime_cloud_models::lifetime::LifeRow;
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_store::environments;
use runtime_cloud_workflows::contracts::{
    DecommissionRequest, EnvironmentKey, WarnRequest, lifetime_markers as markers,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// Dependencies of the lifetime activities.
pub struct LifetimeActivitiesImpl {
    pub db: DatabaseConnection,
    /// The timeouts decommission runs are created with.
    pub provisioning: ProvisioningOptions,
}

#[activities]
impl LifetimeActivitiesImpl {
    #[activity(definition = markers::Read)]
    pub async fn read(
        self: Arc<Self>,
        _ctx: ActivityContext,
        key: EnvironmentKey,
    ) -> Result<Option<LifeRow>, ActivityError> {
        environments::life(&self.db, &key.tenant_id, &key.environment_id)
            .await
            .map_err(store_failed)
    }

    #[activity(definition = markers::Warn)]
    pub async fn warn(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: WarnRequest,
    ) -> Result<(), ActivityError> {
        let key = &req.environment;
        let warned = environments::warn_expiring(
            &self.db,
            &key.tenant_id,
            &key.environment_id,
            req.expires_at,
        )
        .await
        .map_err(store_failed)?;
        if warned {
            tracing::info!(tenant_id = %key.tenant_id, environment_id = %key.environment_id,
                expires_at = %req.expires_at, "the environment was warned of its expiry");
        }
        Ok(())
    }

    #[activity(definition = markers::PrepareDecommission)]
    pub async fn prepare_decommission(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: DecommissionRequest,
    ) -> Result<Option<RunInput>, ActivityError> {
        let key = &req.environment;
        runtime_cloud_transactions::prepare_decommission_run(
            &self.db,
            &key.tenant_id,
            &key.environment_id,
            &req.run_id,
            &self.provisioning,
        )
        .await
        .map_err(store_failed)
    }
}
