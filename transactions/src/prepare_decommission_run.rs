//! Prepare an environment's decommission run: its row (the environment's latest
//! specification, kind `decommission`) recorded in one transaction, or, when nothing was ever
//! declared for the environment (so nothing was provisioned by the product), the environment
//! retired at once.

use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_models::{ProvisioningKind, RunInput};
use runtime_cloud_store::runs::{self, NewRun};
use runtime_cloud_store::{DatabaseConnection, Error, begin_write, environments, specifications};
use sea_orm::ConnectionTrait;

/// Records the decommission run `run_id` of the tenant's environment and returns its input;
/// idempotent by run id (a retry finds the row and answers the same input). None when the
/// environment is retired already, or was retired now because nothing was ever declared for
/// it. In production the run waits for an Operator's approval like any other: nothing here
/// approves it.
pub async fn prepare_decommission_run(
    db: &DatabaseConnection,
    tenant_id: &str,
    environment_id: &str,
    run_id: &str,
    options: &ProvisioningOptions,
) -> Result<Option<RunInput>, Error> {
    let txn = begin_write(db).await?;
    let prepared =
        prepare_decommission_run_in(&txn, tenant_id, environment_id, run_id, options).await?;
    txn.commit().await?;
    Ok(prepared)
}

/// [`prepare_decommission_run`] in the caller's transaction `txn` (an off-boarding order's,
/// which records its order decommissioning with it).
pub(crate) async fn prepare_decommission_run_in(
    txn: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
    run_id: &str,
    options: &ProvisioningOptions,
) -> Result<Option<RunInput>, Error> {
    let env = environments::find(txn, tenant_id, environment_id)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "environment",
            id: environment_id.to_owned(),
        })?;
    let prepared = runs::specification_id(txn, run_id).await?;
    if env.retired() && prepared.is_none() {
        return Ok(None);
    }
    let spec = match &prepared {
        Some(spec_id) => specifications::find(txn, spec_id).await?,
        None => specifications::latest(txn, tenant_id, environment_id).await?,
    };
    let Some(spec) = spec else {
        environments::retire_in(txn, tenant_id, environment_id, None).await?;
        return Ok(None);
    };
    let new = NewRun {
        run_id,
        environment: &env,
        specification: &spec,
        kind: ProvisioningKind::Decommission,
        promotion_id: None,
        approval_id: None,
        idempotency_key: None,
        request_hash: None,
        quarantine_override: None,
    };
    if prepared.is_none() {
        runs::insert(txn, &new, None).await?;
    }
    Ok(Some(new.input(options)))
}
