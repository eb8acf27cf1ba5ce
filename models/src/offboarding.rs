//! Off-boarding an instance (a fleet instance leaving operation): its order's states, its
//! archive's key and manifest, and the rule that verifies an archive read back against its
//! manifest.
//!
//! ```text
//! exporting ─ archive stored, read back and verified ─▶ exported ─ decommission run recorded
//!   ─▶ decommissioning ─ run Applied ─▶ completed (the environment `offboarded`)
//!   any step that cannot go on (an archive that never verifies, a decommission not applied)
//!   ─▶ failed, with the reason; nothing is destroyed before `exported`
//! ```

use crate::wire::wire_enum;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

wire_enum!(
    /// Where an off-boarding order is.
    OrderState, "off-boarding order state" {
        /// The instance's record is being exported.
        Exporting => "exporting",
        /// The archive is stored and verified: nothing is destroyed before this.
        Exported => "exported",
        /// The decommission run is under way.
        Decommissioning => "decommissioning",
        /// Decommissioned: the environment is `offboarded`.
        Completed => "completed",
        /// It could not go on; `failure` says why.
        Failed => "failed",
    }
);

impl OrderState {
    /// Whether the order has ended.
    pub fn ended(self) -> bool {
        matches!(self, OrderState::Completed | OrderState::Failed)
    }
}

/// The archive's manifest (`manifest.json` in the archive): every file but itself, with its
/// checksum, size and the ids of the records it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// When the order was placed (the archive holds the record as of its export).
    pub ordered_at: DateTime<Utc>,
    pub files: Vec<ManifestFile>,
}

/// One file of the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestFile {
    pub path: String,
    /// `sha256:` and the hex of the file's bytes.
    pub sha256: String,
    pub bytes: u64,
    /// The ids of the records it holds (a log file: none).
    pub records: Vec<String>,
}

/// The manifest's own name in the archive.
pub const MANIFEST: &str = "manifest.json";

/// `sha256:<hex>` of `bytes`.
pub fn checksum(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The manifest entry of `bytes` at `path` holding `records`.
pub fn file(path: &str, bytes: &[u8], records: Vec<String>) -> ManifestFile {
    ManifestFile {
        path: path.to_owned(),
        sha256: checksum(bytes),
        bytes: bytes.len() as u64,
        records,
    }
}

/// The key of an order's archive of checksum `sha256` (`sha256:<hex>`) in the artifact store:
/// each export attempt writes under its own checksum, so an attempt that finishes late never
/// replaces the archive another attempt verified.
pub fn archive_key(tenant_id: &str, environment_id: &str, order_id: &str, sha256: &str) -> String {
    let hex = sha256.strip_prefix("sha256:").unwrap_or(sha256);
    format!("offboarding/{tenant_id}/{environment_id}/{order_id}/{hex}.tar")
}

/// Checks an archive's files (`path → bytes`, as read back from the store) against its
/// manifest: the manifest names this order, every file it lists is there with its checksum
/// and size, and nothing else is. `Err` says what does not match.
pub fn verify(files: &BTreeMap<String, Vec<u8>>, order_id: &str) -> Result<Manifest, String> {
    let manifest = files
        .get(MANIFEST)
        .ok_or_else(|| format!("the archive has no {MANIFEST}"))?;
    let manifest: Manifest =
        serde_json::from_slice(manifest).map_err(|e| format!("{MANIFEST} does not read: {e}"))?;
    if manifest.order_id != order_id {
        return Err(format!(
            "{MANIFEST} names order {}, not {order_id}",
            manifest.order_id
        ));
    }
    for f in &manifest.files {
        let Some(bytes) = files.get(&f.path) else {
            return Err(format!("{} is listed but not in the archive", f.path));
        };
        if bytes.len() as u64 != f.bytes || checksum(bytes) != f.sha256 {
            return Err(format!("{} does not match its checksum", f.path));
        }
    }
    if let Some(extra) = files
        .keys()
        .find(|p| *p != MANIFEST && !manifest.files.iter().any(|f| &f.path == *p))
    {
        return Err(format!("{extra} is in the archive but not listed"));
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive() -> BTreeMap<String, Vec<u8>> {
        let runs = br#"[{"provisioningRunId":"r1"}]"#.to_vec();
        let manifest = Manifest {
            order_id: "o1".into(),
            tenant_id: "acme".into(),
            environment_id: "shop-00".into(),
            ordered_at: DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            files: vec![file("runs.json", &runs, vec!["r1".into()])],
        };
        BTreeMap::from([
            ("runs.json".to_owned(), runs),
            (MANIFEST.to_owned(), serde_json::to_vec(&manifest).unwrap()),
        ])
    }

    #[test]
    fn an_archive_verifies_against_its_manifest() {
        let verified = verify(&archive(), "o1").unwrap();
        assert_eq!(verified.files[0].records, vec!["r1".to_owned()]);
        assert!(verified.files[0].sha256.starts_with("sha256:"));
    }

    #[test]
    fn a_changed_missing_or_extra_file_or_another_order_does_not_verify() {
        let mut changed = archive();
        changed.insert("runs.json".into(), b"[]".to_vec());
        assert!(verify(&changed, "o1").unwrap_err().contains("runs.json"));
        let mut missing = archive();
        missing.remove("runs.json");
        assert!(
            verify(&missing, "o1")
                .unwrap_err()
                .contains("not in the archive")
        );
        let mut extra = archive();
        extra.insert("secrets.txt".into(), b"x".to_vec());
        assert!(verify(&extra, "o1").unwrap_err().contains("secrets.txt"));
        assert!(
            verify(&archive(), "o2")
                .unwrap_err()
                .contains("names order o1")
        );
        let mut no_manifest = archive();
        no_manifest.remove(MANIFEST);
        assert!(verify(&no_manifest, "o1").is_err());
    }

    #[test]
    fn only_completed_and_failed_orders_have_ended() {
        let ended: Vec<_> = OrderState::ALL.iter().filter(|s| s.ended()).collect();
        assert_eq!(ended, vec![&OrderState::Completed, &OrderState::Failed]);
    }
}
