//! Prepare an off-boarding order's decommission: the environment's decommission run recorded
//! (or the environment retired, when nothing was ever declared for it) and the order
//! `decommissioning` with that run, in one transaction, and only once the order's archive is
//! exported and verified (`store::offboarding::mark_decommissioning_in` refuses otherwise).

use crate::prepare_decommission_run::prepare_decommission_run_in;
use runtime_cloud_models::RunInput;
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_store::{DatabaseConnection, Error, begin_write, offboarding};

/// Records the decommission run `run_id` of the order's environment and the order
/// `decommissioning`; idempotent by run id. None when the environment had nothing to destroy
/// (it is retired now) or was retired already.
pub async fn prepare_offboarding_decommission(
    db: &DatabaseConnection,
    order_id: &str,
    run_id: &str,
    options: &ProvisioningOptions,
) -> Result<Option<RunInput>, Error> {
    let txn = begin_write(db).await?;
    let order = offboarding::get(&txn, order_id).await?;
    let run = prepare_decommission_run_in(
        &txn,
        &order.tenant_id,
        &order.environment_id,
        run_id,
        options,
    )
    .await?;
    let recorded = run.as_ref().map(|r| r.run_id.as_str());
    offboarding::mark_decommissioning_in(&txn, order_id, recorded).await?;
    txn.commit().await?;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_models::offboarding::{Manifest, OrderState};
    use runtime_cloud_store::{fixtures, runs};

    /// The decommission is recorded only once the archive is verified, and once however often
    /// it is asked for.
    async fn the_decommission_follows_the_export_once_on(db: DatabaseConnection) {
        let (env, _) = fixtures::declared(&db, "shop-00", EnvironmentClass::NonProduction).await;
        let offboarding::Placed::New(order) =
            offboarding::place(&db, &env, "contract ended", "alice")
                .await
                .unwrap()
        else {
            panic!("a new order")
        };
        let options = ProvisioningOptions::default();
        let early = prepare_offboarding_decommission(&db, &order.order_id, "r1", &options).await;
        assert!(early.is_err(), "nothing is destroyed before the export");
        assert!(
            runs::find(&db, "acme", "r1").await.unwrap().is_none(),
            "nothing half-written"
        );

        let archive = offboarding::Archive {
            key: "offboarding/acme/shop-00/o.tar".into(),
            sha256: "sha256:00".into(),
            bytes: 10,
            manifest: Manifest {
                order_id: order.order_id.clone(),
                tenant_id: "acme".into(),
                environment_id: "shop-00".into(),
                ordered_at: order.created_at,
                files: Vec::new(),
            },
        };
        offboarding::mark_exported(&db, &order.order_id, &archive)
            .await
            .unwrap();
        for _ in 0..2 {
            let run = prepare_offboarding_decommission(&db, &order.order_id, "r1", &options)
                .await
                .unwrap()
                .expect("a decommission run");
            assert_eq!(
                run.kind,
                runtime_cloud_models::ProvisioningKind::Decommission
            );
        }
        let order = offboarding::get(&db, &order.order_id).await.unwrap();
        assert_eq!(order.state, OrderState::Decommissioning);
        assert_eq!(order.provisioning_run_id.as_deref(), Some("r1"));
        assert!(runs::find(&db, "acme", "r1").await.unwrap().is_some());
    }

    fixtures::on_both_databases!(
        the_decommission_follows_the_export_once_sqlite,
        the_decommission_follows_the_export_once_postgres,
        the_decommission_follows_the_export_once_on
    );
}
