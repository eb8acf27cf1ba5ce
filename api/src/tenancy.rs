//! The tenant boundary, shared by HTTP and gRPC: a caller reaches only their own tenant's
//! environments.

use crate::Error;
use runtime_cloud_store::DatabaseConnection;
use runtime_cloud_store::environments::{self, Environment};

/// The caller's environment, or 404 (also for another tenant's: never confirm it exists).
pub async fn require_environment(
    db: &DatabaseConnection,
    tenant: &str,
    environment_id: &str,
) -> Result<Environment, Error> {
    environments::find(db, tenant, environment_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("environment `{environment_id}` not found")))
}

/// The caller's environment when it is not retired: 404 as [`require_environment`], 409 for a
/// retired one (its record stays readable; nothing changes it any more).
pub async fn require_active_environment(
    db: &DatabaseConnection,
    tenant: &str,
    environment_id: &str,
) -> Result<Environment, Error> {
    let env = require_environment(db, tenant, environment_id).await?;
    if env.retired() {
        return Err(Error::Conflict(format!(
            "environment `{environment_id}` is retired: nothing changes it any more"
        )));
    }
    Ok(env)
}
