//! The watched Kubernetes clusters' state (`cluster_watches`, `watched_changes`): kept by the
//! holder of each cluster's watch (`activities::kubernetes::watch`), read by the sweep to skip
//! reading the environments the watches vouch did not change (`Watched::vouches`).

use crate::Error;
use crate::entities::{cluster_watches as watch_rows, environments as env_rows};
use crate::entities::{runtime_inventories as inv_rows, watched_changes as change_rows};
use crate::environments::Environment;
use crate::inventory::Inventory;
use crate::scope::{EnvKey, of_environments};
use chrono::{DateTime, Utc};
use runtime_cloud_models::environments::EnvironmentKey;
use runtime_cloud_models::observation::Watched;
use runtime_cloud_models::targets::{ObserverTarget, RunnerTarget};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use std::collections::HashMap;

/// The holder of `cluster_id`'s watch is alive at `at`; its watches have followed every change
/// since `synced_since` (none while one fails).
pub async fn beat(
    db: &impl ConnectionTrait,
    cluster_id: &str,
    synced_since: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    use watch_rows::Column as C;
    let row = watch_rows::ActiveModel {
        cluster_id: Set(cluster_id.to_owned()),
        synced_since: Set(synced_since),
        beat_at: Set(at),
    };
    watch_rows::Entity::insert(row)
        .on_conflict(
            OnConflict::column(C::ClusterId)
                .update_columns([C::SyncedSince, C::BeatAt])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// The namespace of `environments` (on cluster `cluster_id`) changed at `at`.
pub async fn changed(
    db: &impl ConnectionTrait,
    cluster_id: &str,
    environments: &[EnvironmentKey],
    at: DateTime<Utc>,
) -> Result<(), Error> {
    use change_rows::Column as C;
    if environments.is_empty() {
        return Ok(());
    }
    let rows = environments.iter().map(|key| change_rows::ActiveModel {
        id: Set(format!("{}/{}", key.tenant_id, key.environment_id)),
        tenant_id: Set(key.tenant_id.clone()),
        environment_id: Set(key.environment_id.clone()),
        cluster_id: Set(cluster_id.to_owned()),
        changed_at: Set(at),
    });
    change_rows::Entity::insert_many(rows)
        .on_conflict(
            OnConflict::column(C::Id)
                .update_columns([C::ClusterId, C::ChangedAt])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Of `environments`, those a healthy watch vouches did not change since their last
/// observation ([`Watched::vouches`]), with the inventory that observation recorded: their
/// observer a watched Kubernetes namespace, their runner one whose recorded state is not
/// read too (a Pulumi stack's refresh still needs the sweep). Four reads, whatever their number.
pub async fn vouched(
    db: &impl ConnectionTrait,
    environments: &[EnvironmentKey],
    now: DateTime<Utc>,
) -> Result<HashMap<EnvironmentKey, Inventory>, Error> {
    let keys: Vec<EnvKey> = environments
        .iter()
        .map(|k| (k.tenant_id.clone(), k.environment_id.clone()))
        .collect();
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let wanted: std::collections::HashSet<&EnvKey> = keys.iter().collect();
    let mut clusters: HashMap<EnvKey, String> = HashMap::new();
    let env_found = env_rows::Entity::find()
        .filter(of_environments(
            env_rows::Column::TenantId,
            env_rows::Column::EnvironmentId,
            &keys,
        ))
        .all(db)
        .await?;
    for row in env_found {
        let env = Environment::read(row)?;
        let key = (env.tenant_id.clone(), env.environment_id.clone());
        let ObserverTarget::Kubernetes(ns) = &env.target.observer else {
            continue;
        };
        if wanted.contains(&key) && matches!(env.target.runner, RunnerTarget::Sandbox) {
            clusters.insert(key, ns.cluster().id());
        }
    }
    if clusters.is_empty() {
        return Ok(HashMap::new());
    }
    let watches: HashMap<String, watch_rows::Model> = watch_rows::Entity::find()
        .filter(watch_rows::Column::ClusterId.is_in(clusters.values().cloned()))
        .all(db)
        .await?
        .into_iter()
        .map(|w| (w.cluster_id.clone(), w))
        .collect();
    let changes: HashMap<EnvKey, change_rows::Model> = change_rows::Entity::find()
        .filter(of_environments(
            change_rows::Column::TenantId,
            change_rows::Column::EnvironmentId,
            &keys,
        ))
        .all(db)
        .await?
        .into_iter()
        .map(|c| ((c.tenant_id.clone(), c.environment_id.clone()), c))
        .collect();
    let inventories = inv_rows::Entity::find()
        .filter(of_environments(
            inv_rows::Column::TenantId,
            inv_rows::Column::EnvironmentId,
            &keys,
        ))
        .all(db)
        .await?;
    let mut vouched = HashMap::new();
    for row in inventories {
        let inventory = Inventory::read(row)?;
        let key = (
            inventory.tenant_id.clone(),
            inventory.environment_id.clone(),
        );
        let Some(watch) = clusters.get(&key).and_then(|c| watches.get(c)) else {
            continue;
        };
        // A change recorded for another cluster (the environment moved since) says nothing.
        let changed_at = changes.get(&key).map(|c| {
            if c.cluster_id == watch.cluster_id {
                c.changed_at
            } else {
                now
            }
        });
        let watched = Watched {
            synced_since: watch.synced_since,
            beat_at: watch.beat_at,
            changed_at,
        };
        if watched.vouches(inventory.observed_at, inventory.stale, now) {
            let key = EnvironmentKey {
                tenant_id: inventory.tenant_id.clone(),
                environment_id: inventory.environment_id.clone(),
            };
            vouched.insert(key, inventory);
        }
    }
    Ok(vouched)
}
