//! The off-boarding activities the OffboardingOrder workflow calls: export an instance's record
//! as one archive (a tar of JSON files and the runs' logs, with `manifest.json`: every file's
//! checksum, size and the records it holds), read it back and verify it, record the
//! decommission, end the order. Each is idempotent by the order and the run id.
//!
//! The same record makes the same archive (entries in a fixed order, no times or owners in
//! their headers); a record that changed between two attempts (a run still moving, a new
//! observation) makes another, stored under its own checksum (`models::offboarding::
//! archive_key`): only the one verified is recorded, and a late attempt never replaces it.

use crate::Error;
use crate::error::{activity_error, store_failed};
use crate::ports::{Artifacts, keep, kept};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::artifacts::{PHASES, run_log};
use runtime_cloud_models::offboarding::{self, MANIFEST, Manifest, archive_key};
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_store::offboarding::{Archive, Order};
use runtime_cloud_store::page::Page;
use runtime_cloud_store::runs::RunFilter;
use runtime_cloud_store::{
    approvals, environments, findings, inventory, offboarding as orders, proposals, runs,
    specifications,
};
use runtime_cloud_workflows::contracts::{
    EndOrder, OffboardingDecommission, StoredArchive, VerifyArchive, offboarding_markers as markers,
};
use sea_orm::DatabaseConnection;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// Rows read per query while the record is exported.
const ROWS: u64 = 500;

/// Dependencies of the off-boarding activities.
pub struct OffboardingActivitiesImpl {
    pub db: DatabaseConnection,
    /// Where the archive is kept, and the runs' logs are read from.
    pub artifacts: Artifacts,
    /// The timeouts decommission runs are created with.
    pub provisioning: ProvisioningOptions,
}

/// Every row of a newest-first list, a page at a time: `page` reads the rows after a cursor,
/// `id` is a row's cursor.
async fn every<T, F, Fut>(mut page: F, id: fn(&T) -> String) -> Result<Vec<T>, Error>
where
    F: FnMut(Page) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, runtime_cloud_store::Error>>,
{
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let rows = page(Page {
            after: after.clone(),
            rows: ROWS,
        })
        .await?;
        let full = rows.len() as u64 == ROWS;
        after = rows.last().map(id);
        all.extend(rows);
        if !full {
            return Ok(all);
        }
    }
}

/// The archive's files, in order: a file's path, its bytes, the records it holds.
type Files = Vec<(String, Vec<u8>, Vec<String>)>;

fn json_file<T: Serialize>(path: &str, value: &T, records: Vec<String>) -> Result<Files, Error> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Artifacts(e.to_string()))?;
    Ok(vec![(path.to_owned(), bytes, records)])
}

impl OffboardingActivitiesImpl {
    /// The order's instance's record as the archive's files (the manifest aside).
    async fn record(&self, order: &Order) -> Result<Files, Error> {
        let (db, tenant, env) = (
            &self.db,
            order.tenant_id.as_str(),
            order.environment_id.as_str(),
        );
        let environment = environments::find(db, tenant, env)
            .await?
            .ok_or_else(|| Error::Artifacts(format!("environment {env} is not registered")))?;
        let mut files = json_file("environment.json", &environment, vec![env.to_owned()])?;

        let specs = every(
            |p| async move { specifications::list(db, tenant, Some(env), &p).await },
            |s| s.specification_id.clone(),
        )
        .await?;
        let spec_ids = specs.iter().map(|s| s.specification_id.clone()).collect();
        let specs: Vec<Value> = specs
            .iter()
            .map(|s| {
                let d = &s.declaration;
                json!({ "specificationId": s.specification_id, "version": s.version,
                        "declaredAt": s.declared_at, "kind": d.kind,
                        "programRef": d.program_ref, "programVersion": d.program_version,
                        "releaseId": d.release_id, "strategy": d.strategy,
                        "configRefs": d.config_refs, "secretRefs": d.secret_refs,
                        "workloads": d.workloads })
            })
            .collect();
        files.extend(json_file("specifications.json", &specs, spec_ids)?);

        let filter = RunFilter {
            environment_id: Some(env.to_owned()),
            kind: None,
            state: None,
        };
        let filter = &filter;
        let all_runs = every(
            |p| async move { runs::list(db, tenant, filter, &p).await },
            |r| r.provisioning_run_id.clone(),
        )
        .await?;
        let run_ids: Vec<String> = all_runs
            .iter()
            .map(|r| r.provisioning_run_id.clone())
            .collect();
        files.extend(json_file("runs.json", &all_runs, run_ids.clone())?);
        for run_id in &run_ids {
            for phase in PHASES {
                if let Some(log) = kept(&self.artifacts, &run_log(tenant, run_id, phase)).await? {
                    files.push((format!("runs/{run_id}/{phase}.log"), log, Vec::new()));
                }
            }
        }

        let found = every(
            |p| async move { findings::list(db, tenant, env, None, None, &p).await },
            |f| f.finding_id.clone(),
        )
        .await?;
        let ids = found.iter().map(|f| f.finding_id.clone()).collect();
        files.extend(json_file("findings.json", &found, ids)?);

        let proposed = every(
            |p| async move { proposals::list(db, tenant, Some(env), None, &p).await },
            |p| p.proposal_id.clone(),
        )
        .await?;
        let ids = proposed.iter().map(|p| p.proposal_id.clone()).collect();
        files.extend(json_file("proposals.json", &proposed, ids)?);

        let approved = every(
            |p| async move { approvals::list(db, tenant, Some(env), &p).await },
            |a| a.approval_id.clone(),
        )
        .await?;
        let ids = approved.iter().map(|a| a.approval_id.clone()).collect();
        files.extend(json_file("approvals.json", &approved, ids)?);

        let observed = inventory::find(db, tenant, env).await?;
        let (inventory, ids) = match &observed {
            Some(i) => (
                json!({ "workloads": i.workloads, "currentReleaseId": i.current_release_id,
                        "specificationVersion": i.specification_version,
                        "observedAt": i.observed_at, "stale": i.stale, "lastError": i.last_error }),
                vec![i.id.clone()],
            ),
            None => (Value::Null, Vec::new()),
        };
        files.extend(json_file("inventory.json", &inventory, ids)?);
        Ok(files)
    }

    async fn export_order(&self, order_id: &str) -> Result<StoredArchive, Error> {
        let order = orders::get(&self.db, order_id).await?;
        let files = self.record(&order).await?;
        let manifest = Manifest {
            order_id: order.order_id.clone(),
            tenant_id: order.tenant_id.clone(),
            environment_id: order.environment_id.clone(),
            ordered_at: order.created_at,
            files: files
                .iter()
                .map(|(path, bytes, records)| offboarding::file(path, bytes, records.clone()))
                .collect(),
        };
        let manifest =
            serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Artifacts(e.to_string()))?;
        let archive = pack(
            std::iter::once((MANIFEST, manifest.as_slice()))
                .chain(files.iter().map(|(p, b, _)| (p.as_str(), b.as_slice()))),
        )?;
        let sha256 = offboarding::checksum(&archive);
        let key = archive_key(
            &order.tenant_id,
            &order.environment_id,
            &order.order_id,
            &sha256,
        );
        let stored = StoredArchive {
            key: key.clone(),
            sha256,
            bytes: archive.len() as u64,
        };
        keep(&self.artifacts, &key, archive).await?;
        tracing::info!(order_id, key = %key, bytes = stored.bytes, files = files.len(), "the instance's record is exported");
        Ok(stored)
    }

    async fn verify_archive(&self, req: &VerifyArchive) -> Result<bool, Error> {
        let Some(bytes) = kept(&self.artifacts, &req.archive.key).await? else {
            tracing::warn!(key = %req.archive.key, "the archive is not in the store");
            return Ok(false);
        };
        if offboarding::checksum(&bytes) != req.archive.sha256 {
            tracing::warn!(key = %req.archive.key, "the archive read back is not the one written");
            return Ok(false);
        }
        let verified = unpack(&bytes).and_then(|files| offboarding::verify(&files, &req.order_id));
        let manifest = match verified {
            Ok(manifest) => manifest,
            Err(why) => {
                tracing::warn!(key = %req.archive.key, %why, "the archive does not verify");
                return Ok(false);
            }
        };
        let archive = Archive {
            key: req.archive.key.clone(),
            sha256: req.archive.sha256.clone(),
            bytes: i64::try_from(req.archive.bytes).unwrap_or(i64::MAX),
            manifest,
        };
        orders::mark_exported(&self.db, &req.order_id, &archive).await?;
        Ok(true)
    }
}

/// A tar of `files` in the order given: regular files, mode 0644, no time, owner or group, so
/// the same files make the same bytes.
fn pack<'a>(files: impl Iterator<Item = (&'a str, &'a [u8])>) -> Result<Vec<u8>, Error> {
    let failed = |e: std::io::Error| Error::Artifacts(format!("writing the archive: {e}"));
    let mut tar = tar::Builder::new(Vec::new());
    for (path, bytes) in files {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_data(&mut header, path, bytes).map_err(failed)?;
    }
    tar.into_inner().map_err(failed)
}

/// The files of a tar, by path; `Err` when it does not read or holds anything but files.
pub fn unpack(archive: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    use std::io::Read;
    let mut files = BTreeMap::new();
    let mut tar = tar::Archive::new(archive);
    for entry in tar.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err("the archive holds something but files".into());
        }
        let path = entry
            .path()
            .map_err(|e| e.to_string())?
            .display()
            .to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
        if files.insert(path.clone(), bytes).is_some() {
            return Err(format!("{path} is in the archive twice"));
        }
    }
    Ok(files)
}

#[activities]
impl OffboardingActivitiesImpl {
    #[activity(definition = markers::Export)]
    pub async fn export(
        self: Arc<Self>,
        _ctx: ActivityContext,
        order_id: String,
    ) -> Result<StoredArchive, ActivityError> {
        self.export_order(&order_id).await.map_err(activity_error)
    }

    #[activity(definition = markers::Verify)]
    pub async fn verify(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: VerifyArchive,
    ) -> Result<bool, ActivityError> {
        self.verify_archive(&req).await.map_err(activity_error)
    }

    #[activity(definition = markers::PrepareDecommission)]
    pub async fn prepare_decommission(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: OffboardingDecommission,
    ) -> Result<Option<RunInput>, ActivityError> {
        runtime_cloud_transactions::prepare_offboarding_decommission(
            &self.db,
            &req.order_id,
            &req.run_id,
            &self.provisioning,
        )
        .await
        .map_err(store_failed)
    }

    #[activity(definition = markers::End)]
    pub async fn end(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: EndOrder,
    ) -> Result<(), ActivityError> {
        match &req.failure {
            None => orders::complete(&self.db, &req.order_id).await,
            Some(why) => {
                tracing::warn!(order_id = %req.order_id, %why, "the off-boarding order failed");
                orders::fail(&self.db, &req.order_id, why).await
            }
        }
        .map_err(store_failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_files_make_the_same_archive_and_unpack_to_themselves() {
        let files = [
            ("manifest.json", &b"{}"[..]),
            ("runs/r1/plan.log", &b"plan\n"[..]),
        ];
        let a = pack(files.into_iter()).unwrap();
        let b = pack(files.into_iter()).unwrap();
        assert_eq!(a, b, "deterministic");
        let unpacked = unpack(&a).unwrap();
        assert_eq!(unpacked["runs/r1/plan.log"], b"plan\n".to_vec());
        assert_eq!(unpacked.len(), 2);
    }
}
