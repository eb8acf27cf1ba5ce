//! What recording an observation reads before it writes: the environment, its inventory row,
//! its latest specification, the drift rules and the run that applied last, whether the
//! observation is compared ([`Comparison`]), the open findings its record needs and its
//! proposals (and the superseded ones whose workflows were not told yet), its tenant's prices.
//! A sweep's batch reads each table once for all its environments
//! ([`runtime_cloud_store::scope::of_environments`]), in the batch's transaction, instead of ten
//! queries per environment; one environment is a batch of one.

use super::comparison::Comparison;
use chrono::{DateTime, Utc};
use runtime_cloud_models::cost::PriceTable;
use runtime_cloud_models::drift_rules::DriftRule;
use runtime_cloud_models::inventory::RecordRequest;
use runtime_cloud_store::entities::runtime_inventories as rows;
use runtime_cloud_store::environments::{self, Environment};
use runtime_cloud_store::findings::{self, Finding};
use runtime_cloud_store::proposals::{self, Proposal};
use runtime_cloud_store::runs::{self, Applied};
use runtime_cloud_store::scope::EnvKey;
use runtime_cloud_store::specifications::{self, Specification};
use runtime_cloud_store::{Error, drift_rules, inventory, prices};
use sea_orm::ConnectionTrait;
use std::collections::HashMap;

/// What one environment's record reads.
#[derive(Debug, Default)]
pub(super) struct Known {
    /// None: the environment was removed since the observation started.
    pub env: Option<Environment>,
    pub inventory: Option<rows::Model>,
    pub spec: Option<Specification>,
    /// The environment's own rules and its tenant's defaults, oldest first.
    pub rules: Vec<DriftRule>,
    pub applied: Option<Applied>,
    /// The observation's comparison with the inventory (none: the target was unreachable).
    pub comparison: Option<Comparison>,
    /// Its open findings, suppressed ones too; of a kind never proposed (posture) only when
    /// the observation is compared (`comparison` not unchanged): they stand otherwise, and no
    /// proposal covers them.
    pub open: Vec<Finding>,
    /// The proposal the request names, if a record raised it already.
    pub recorded: Option<Proposal>,
    /// Its proposals in play, newest first.
    pub active: Vec<Proposal>,
    /// Its superseded proposals whose workflows were not told yet.
    pub untold: Vec<String>,
    /// Its tenant's prices, if it set any.
    pub prices: Option<PriceTable>,
}

impl Known {
    /// One environment's: a batch of one.
    pub(super) async fn of_one(
        db: &impl ConnectionTrait,
        req: &RecordRequest,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        Ok(Self::of_batch(db, &[req], now)
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// The environments of `reqs`' (distinct environments), one query per table, in `reqs`'
    /// order, and their observations' comparisons at `now`.
    pub(super) async fn of_batch(
        db: &impl ConnectionTrait,
        reqs: &[&RecordRequest],
        now: DateTime<Utc>,
    ) -> Result<Vec<Self>, Error> {
        let keys: Vec<EnvKey> = reqs
            .iter()
            .map(|r| (r.tenant_id.clone(), r.environment_id.clone()))
            .collect();
        let mut known: HashMap<EnvKey, Known> =
            keys.iter().map(|k| (k.clone(), Known::default())).collect();
        fn at<'a>(
            known: &'a mut HashMap<EnvKey, Known>,
            t: &str,
            e: &str,
        ) -> Option<&'a mut Known> {
            known.get_mut(&(t.to_owned(), e.to_owned()))
        }
        // First, and locking: what follows reads what an earlier record of the same
        // environments committed.
        for e in environments::lock_many(db, &keys).await? {
            if let Some(k) = at(&mut known, &e.tenant_id, &e.environment_id) {
                k.env = Some(e);
            }
        }
        for row in inventory::find_rows_to_record(db, &keys).await? {
            if let Some(k) = at(&mut known, &row.tenant_id, &row.environment_id) {
                k.inventory = Some(row);
            }
        }
        for spec in specifications::latest_of(db, &keys).await? {
            let d = &spec.declaration;
            if let Some(k) = at(&mut known, &d.tenant_id, &d.environment_id) {
                k.spec = Some(spec);
            }
        }
        let rules = drift_rules::applying_of(db, &keys).await?;
        for ((tenant, env), applied) in runs::last_applied_of(db, &keys).await? {
            if let Some(k) = at(&mut known, &tenant, &env) {
                k.applied.get_or_insert(applied);
            }
        }
        let mut compared = Vec::new();
        for (req, key) in reqs.iter().zip(&keys) {
            let Some(k) = known.get_mut(key) else {
                continue;
            };
            k.rules = rules
                .iter()
                .filter(|r| r.applies_to(&key.0, &key.1))
                .cloned()
                .collect();
            let spec = k.spec.as_ref();
            k.comparison = Comparison::of(req, k.inventory.as_ref(), spec, &k.rules, now)?;
            if k.comparison.as_ref().is_some_and(|c| !c.unchanged) {
                compared.push(key.clone());
            }
        }
        for f in findings::open_of(db, &keys, &compared).await? {
            if let Some(k) = at(&mut known, &f.tenant_id, &f.environment_id) {
                k.open.push(f);
            }
        }
        for p in proposals::active_of(db, &keys).await? {
            if let Some(k) = at(&mut known, &p.tenant_id, &p.environment_id) {
                k.active.push(p);
            }
        }
        for (tenant, env, proposal_id) in proposals::untold_of(db, &keys).await? {
            if let Some(k) = at(&mut known, &tenant, &env) {
                k.untold.push(proposal_id);
            }
        }
        let mut tenants: Vec<String> = keys.iter().map(|(t, _)| t.clone()).collect();
        tenants.sort();
        tenants.dedup();
        let prices = prices::of_tenants(db, &tenants).await?;
        let mut recorded: HashMap<String, Proposal> =
            proposals::find_many(db, reqs.iter().map(|r| r.proposal_id.clone()))
                .await?
                .into_iter()
                .map(|p| (p.proposal_id.clone(), p))
                .collect();
        Ok(reqs
            .iter()
            .zip(keys)
            .map(|(req, key)| {
                let mut k = known.remove(&key).unwrap_or_default();
                k.recorded = recorded.remove(&req.proposal_id);
                k.prices = prices.get(&key.0).cloned();
                k
            })
            .collect())
    }
}
