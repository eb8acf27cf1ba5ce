//! `drift_findings`: differences between declared and observed state. A finding is raised and
//! resolved only by observations (`transactions::record_observation`): resolved when an observation
//! no longer shows it. An open finding a drift rule matches is *suppressed* (`suppressed_by`):
//! kept and listed, never proposed, and open again once no active rule matches it.

use crate::decode::At;
use crate::deferred::Deferred;
use crate::entities::drift_findings as rows;
use crate::{Error, Page, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::drift::{self, DriftKind};
use runtime_cloud_models::drift_rules::{DriftRule, suppressing};
use runtime_cloud_models::events::RuntimeDriftDetected;
use runtime_cloud_models::observation::ChangedBy;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use std::collections::BTreeSet;
use uuid::Uuid;

const TABLE: &str = "drift_findings";

/// One recorded finding, as the API shows it too.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub finding_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub kind: DriftKind,
    /// `{workloadKind}/{name}`.
    pub resource: String,
    /// The posture rule a `posture` finding breaks (`privileged-container`); none for drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub declared: Option<serde_json::Value>,
    pub observed: Option<serde_json::Value>,
    pub detected_at: DateTime<Utc>,
    /// The proposal that covers it, once one does.
    pub proposal_id: Option<String>,
    /// Set by the first observation that no longer shows it.
    pub resolved_at: Option<DateTime<Utc>>,
    /// Who made the difference, when the target records it (Kubernetes `managedFields`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<ChangedBy>,
    /// The drift rule that suppresses it, while one does.
    pub suppressed_by: Option<String>,
}

impl Finding {
    /// The row of a finding raised now.
    fn into_new_row(self) -> Result<rows::ActiveModel, Error> {
        use sea_orm::ActiveValue::Set;
        Ok(rows::ActiveModel {
            changed_by: Set(self
                .changed_by
                .as_ref()
                .map(crate::decode::to_json)
                .transpose()?),
            finding_id: Set(self.finding_id),
            tenant_id: Set(self.tenant_id),
            environment_id: Set(self.environment_id),
            kind: Set(self.kind.as_str().to_owned()),
            resource: Set(self.resource),
            rule: Set(self.rule),
            declared: Set(self.declared),
            observed: Set(self.observed),
            detected_at: Set(self.detected_at),
            proposal_id: Set(self.proposal_id),
            resolved_at: Set(self.resolved_at),
            suppressed_by: Set(self.suppressed_by),
            created_at: Set(self.detected_at),
            updated_at: Set(self.detected_at),
        })
    }

    fn read(m: rows::Model) -> Result<Self, Error> {
        let at = At {
            table: TABLE,
            row: &m.finding_id,
        };
        Ok(Self {
            kind: at.wire("kind", &m.kind)?,
            changed_by: m
                .changed_by
                .as_ref()
                .map(|v| at.json("changed_by", v))
                .transpose()?,
            suppressed_by: m.suppressed_by,
            finding_id: m.finding_id,
            tenant_id: m.tenant_id,
            environment_id: m.environment_id,
            resource: m.resource,
            rule: m.rule,
            declared: m.declared,
            observed: m.observed,
            detected_at: m.detected_at,
            proposal_id: m.proposal_id,
            resolved_at: m.resolved_at,
        })
    }

    /// Whether a proposal covers it: open, not suppressed, of a kind that is proposed.
    fn proposable(&self) -> bool {
        self.suppressed_by.is_none() && self.kind.proposes()
    }

    /// The comparer's form of this finding.
    pub(crate) fn as_drift(&self) -> drift::Finding {
        drift::Finding {
            kind: self.kind,
            resource: self.resource.clone(),
            declared: self.declared.clone(),
            observed: self.observed.clone(),
            rule: self.rule.clone(),
            changed_by: self.changed_by.clone(),
        }
    }
}

/// Open, suppressed or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still shown by the latest observation, and no drift rule suppresses it.
    Open,
    /// Still shown, and a drift rule suppresses it.
    Suppressed,
    /// No longer shown.
    Resolved,
}

/// The open findings (suppressed ones too) of the environments `keys`, in one query, without
/// what was declared and observed (`declared` and `observed` none): an observation's record
/// compares findings by identity and never reads them, and a namespace's posture findings made
/// them most of what a sweep read. Of a kind never proposed (posture), only those of the
/// environments `compared` (of `keys`): a record that does not compare leaves the others
/// standing, and no proposal covers them.
pub async fn open_of(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
    compared: &[crate::scope::EnvKey],
) -> Result<Vec<Finding>, Error> {
    use crate::scope::of_environments;
    use sea_orm::sea_query::Expr;
    use sea_orm::{Iterable, QuerySelect};
    let unread = |c: &rows::Column| matches!(c, rows::Column::Declared | rows::Column::Observed);
    rows::Entity::find()
        .select_only()
        .columns(rows::Column::iter().filter(|c| !unread(c)))
        .column_as(
            Expr::value(sea_orm::Value::Json(None)),
            rows::Column::Declared,
        )
        .column_as(
            Expr::value(sea_orm::Value::Json(None)),
            rows::Column::Observed,
        )
        .filter(of_environments(
            rows::Column::TenantId,
            rows::Column::EnvironmentId,
            keys,
        ))
        .filter(rows::Column::ResolvedAt.is_null())
        .filter(
            sea_orm::Condition::any()
                .add(rows::Column::Kind.ne(DriftKind::Posture.as_str()))
                .add_option((!compared.is_empty()).then(|| {
                    of_environments(
                        rows::Column::TenantId,
                        rows::Column::EnvironmentId,
                        compared,
                    )
                })),
        )
        .all(db)
        .await?
        .into_iter()
        .map(Finding::read)
        .collect()
}

/// What [`sync`] did.
pub struct Synced {
    pub raised: u32,
    pub resolved: u32,
    /// The open findings after, none suppressed and none of a kind never proposed (what a
    /// proposal covers).
    pub open: Vec<Finding>,
}

impl Synced {
    /// Nothing raised or resolved; of `open` (the environment's open findings), those a
    /// proposal covers.
    pub fn unchanged(open: Vec<Finding>) -> Self {
        Self {
            raised: 0,
            resolved: 0,
            open: open.into_iter().filter(Finding::proposable).collect(),
        }
    }
}

/// Raises `found` findings not open yet (each with `RuntimeDriftDetected`) and resolves the
/// `open` ones (the environment's, as [`open_of`] read them in this transaction) `found` no
/// longer holds, on `db` (the caller's transaction). A finding an active
/// rule of `rules` matches at `now` is recorded suppressed, without an event; one whose rule
/// expired or went away is open again, with `RuntimeDriftDetected`. The new findings and the
/// events are `deferred`: the caller inserts them before it commits, or writes anything that
/// refers to them.
#[allow(clippy::too_many_arguments)] // what the observation's record read, passed on
pub async fn sync(
    db: &impl ConnectionTrait,
    deferred: &mut Deferred,
    tenant_id: &str,
    environment_id: &str,
    open: Vec<Finding>,
    found: &[drift::Finding],
    rules: &[DriftRule],
    now: DateTime<Utc>,
) -> Result<Synced, Error> {
    // A finding is identified by (kind, resource, rule).
    let key = |kind: DriftKind, resource: &str, rule: Option<&str>| {
        (kind.as_str(), resource.to_owned(), rule.map(str::to_owned))
    };
    let found_by_key: std::collections::BTreeMap<_, &drift::Finding> = found
        .iter()
        .map(|f| (key(f.kind, &f.resource, f.rule.as_deref()), f))
        .collect();
    let open_keys: BTreeSet<_> = open
        .iter()
        .map(|f| key(f.kind, &f.resource, f.rule.as_deref()))
        .collect();
    let mut still_open = Vec::new();
    let mut resolved = 0;
    for mut f in open {
        let Some(now_found) = found_by_key.get(&key(f.kind, &f.resource, f.rule.as_deref())) else {
            set(db, &f.finding_id, rows::Column::ResolvedAt, Some(now), now).await?;
            resolved += 1;
            continue;
        };
        let rule = suppressing(rules, now_found, now).map(|r| r.rule_id.clone());
        if rule != f.suppressed_by {
            set(
                db,
                &f.finding_id,
                rows::Column::SuppressedBy,
                rule.clone(),
                now,
            )
            .await?;
            if rule.is_none() {
                // Reopened: announced as the drift it is. (A later suppression and reopening
                // is another event, hence the time in its id.)
                let key = format!("{}/reopened/{}", f.finding_id, now.timestamp_micros());
                let id = outbox::event_id(&key, "RuntimeDriftDetected");
                deferred.event(&f.tenant_id, detected(&f).into(), id);
            }
            f.suppressed_by = rule;
        }
        if f.proposable() {
            still_open.push(f);
        }
    }
    // New findings and their events, deferred: a sweep's batch inserts them all at once.
    let mut raised = 0;
    for f in found
        .iter()
        .filter(|f| !open_keys.contains(&key(f.kind, &f.resource, f.rule.as_deref())))
    {
        let finding = Finding {
            finding_id: Uuid::now_v7().to_string(),
            tenant_id: tenant_id.to_owned(),
            environment_id: environment_id.to_owned(),
            kind: f.kind,
            resource: f.resource.clone(),
            rule: f.rule.clone(),
            declared: f.declared.clone(),
            observed: f.observed.clone(),
            detected_at: now,
            proposal_id: None,
            resolved_at: None,
            changed_by: f.changed_by.clone(),
            suppressed_by: suppressing(rules, f, now).map(|r| r.rule_id.clone()),
        };
        raised += 1;
        if finding.suppressed_by.is_none() {
            let id = outbox::event_id(&finding.finding_id, "RuntimeDriftDetected");
            deferred.event(tenant_id, detected(&finding).into(), id);
        }
        if finding.proposable() {
            deferred.finding(finding.clone().into_new_row()?);
            still_open.push(finding);
        } else {
            deferred.finding(finding.into_new_row()?);
        }
    }
    Ok(Synced {
        raised,
        resolved,
        open: still_open,
    })
}

/// Sets one nullable column of a finding (and its `updated_at`).
async fn set<V>(
    db: &impl ConnectionTrait,
    finding_id: &str,
    column: rows::Column,
    value: Option<V>,
    now: DateTime<Utc>,
) -> Result<(), Error>
where
    V: Into<sea_orm::Value> + sea_orm::sea_query::Nullable,
{
    use sea_orm::sea_query::Expr;
    rows::Entity::update_many()
        .col_expr(column, Expr::value(value))
        .col_expr(rows::Column::UpdatedAt, Expr::value(now))
        .filter(rows::Column::FindingId.eq(finding_id))
        .exec(db)
        .await?;
    Ok(())
}

/// `RuntimeDriftDetected` of a finding.
fn detected(f: &Finding) -> RuntimeDriftDetected {
    RuntimeDriftDetected {
        finding_id: f.finding_id.clone(),
        tenant_id: f.tenant_id.clone(),
        environment_id: f.environment_id.clone(),
        kind: f.kind.as_str().to_owned(),
        resource: f.resource.clone(),
        rule: f.rule.clone(),
        changed_by: f.changed_by.clone(),
    }
}

/// The ids of an environment's open findings a proposal covers: suppressed ones and posture
/// findings aside.
pub async fn open_ids(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<BTreeSet<String>, Error> {
    let ids: Vec<String> = rows::Entity::find()
        .select_only()
        .column(rows::Column::FindingId)
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .filter(rows::Column::ResolvedAt.is_null())
        .filter(rows::Column::SuppressedBy.is_null())
        .filter(rows::Column::Kind.ne(DriftKind::Posture.as_str()))
        .into_tuple()
        .all(db)
        .await?;
    Ok(ids.into_iter().collect())
}

/// Links findings to the proposal that covers them.
pub async fn link(
    db: &impl ConnectionTrait,
    finding_ids: &BTreeSet<String>,
    proposal_id: &str,
) -> Result<(), Error> {
    rows::Entity::update_many()
        .col_expr(
            rows::Column::ProposalId,
            sea_orm::sea_query::Expr::value(proposal_id.to_owned()),
        )
        .filter(rows::Column::FindingId.is_in(finding_ids.iter().cloned()))
        .exec(db)
        .await?;
    Ok(())
}

/// The unmanaged findings the proposals `proposal_ids` of the tenant cover, in one query.
pub async fn unmanaged_of(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    proposal_ids: &[String],
) -> Result<Vec<Finding>, Error> {
    if proposal_ids.is_empty() {
        return Ok(Vec::new());
    }
    use sea_orm::QueryOrder;
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::ProposalId.is_in(proposal_ids.iter().cloned()))
        .filter(rows::Column::Kind.eq(DriftKind::Unmanaged.as_str()))
        .order_by_asc(rows::Column::FindingId)
        .all(db)
        .await?
        .into_iter()
        .map(Finding::read)
        .collect()
}

/// A page of an environment's findings (open, suppressed or resolved only, of one kind only,
/// when given), newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
    status: Option<Status>,
    kind: Option<DriftKind>,
    page: &Page,
) -> Result<Vec<Finding>, Error> {
    list_query(tenant_id, environment_id, status, kind, page)
        .all(db)
        .await?
        .into_iter()
        .map(Finding::read)
        .collect()
}

/// The rows [`list`] reads (public so a benchmark can `EXPLAIN` the real query).
pub fn list_query(
    tenant_id: &str,
    environment_id: &str,
    status: Option<Status>,
    kind: Option<DriftKind>,
    page: &Page,
) -> sea_orm::Select<rows::Entity> {
    let mut select = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id));
    select = match status {
        None => select,
        Some(Status::Open) => select
            .filter(rows::Column::ResolvedAt.is_null())
            .filter(rows::Column::SuppressedBy.is_null()),
        Some(Status::Suppressed) => select
            .filter(rows::Column::ResolvedAt.is_null())
            .filter(rows::Column::SuppressedBy.is_not_null()),
        Some(Status::Resolved) => select.filter(rows::Column::ResolvedAt.is_not_null()),
    };
    if let Some(kind) = kind {
        select = select.filter(rows::Column::Kind.eq(kind.as_str()));
    }
    page.apply(select, rows::Column::FindingId)
}

/// (tenant, kind, suppressed) of every open finding (the metrics' open and suppressed drift
/// gauges).
pub async fn open_kinds(
    db: &impl ConnectionTrait,
) -> Result<Vec<(String, DriftKind, bool)>, Error> {
    let rows: Vec<(String, String, String, Option<String>)> = rows::Entity::find()
        .select_only()
        .columns([
            rows::Column::FindingId,
            rows::Column::TenantId,
            rows::Column::Kind,
            rows::Column::SuppressedBy,
        ])
        .filter(rows::Column::ResolvedAt.is_null())
        .into_tuple()
        .all(db)
        .await?;
    rows.into_iter()
        .map(|(id, tenant, kind, suppressed_by)| {
            let at = At {
                table: TABLE,
                row: &id,
            };
            Ok((tenant, at.wire("kind", &kind)?, suppressed_by.is_some()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::scope::EnvKey;

    /// `found` raised in environment `env` of `acme`, where none was open.
    async fn raise(
        db: &sea_orm::DatabaseConnection,
        env: &str,
        found: &[drift::Finding],
    ) -> Synced {
        let mut deferred = Deferred::default();
        let synced = sync(
            db,
            &mut deferred,
            "acme",
            env,
            Vec::new(),
            found,
            &[],
            Utc::now(),
        )
        .await
        .unwrap();
        deferred.insert(db).await.unwrap();
        synced
    }

    /// A record that compares reads every open finding of its environment; one that does not
    /// reads those a proposal may cover, not the posture findings (they stand as recorded).
    #[tokio::test]
    async fn posture_findings_are_read_only_for_an_environment_compared() {
        let db = fixtures::sqlite().await;
        let found = |kind, rule: Option<&str>| drift::Finding {
            kind,
            resource: "deployment/api".into(),
            declared: None,
            observed: None,
            rule: rule.map(str::to_owned),
            changed_by: None,
        };
        let found = [
            found(DriftKind::Version, None),
            found(DriftKind::Posture, Some("privileged-container")),
        ];
        for env in ["dev", "qa"] {
            raise(&db, env, &found).await;
        }
        let keys = [
            ("acme".to_owned(), "dev".to_owned()),
            ("acme".to_owned(), "qa".to_owned()),
        ];
        let read = |compared: Vec<EnvKey>| {
            let (db, keys) = (&db, &keys);
            async move {
                let mut read: Vec<String> = open_of(db, keys, &compared)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|f| format!("{} {}", f.environment_id, f.kind))
                    .collect();
                read.sort();
                read
            }
        };
        assert_eq!(read(Vec::new()).await, ["dev version", "qa version"]);
        assert_eq!(
            read(vec![keys[1].clone()]).await,
            ["dev version", "qa posture", "qa version"]
        );
    }

    #[tokio::test]
    async fn an_unknown_kind_in_a_row_is_an_error_not_a_default() {
        let db = fixtures::sqlite().await;
        let found = [drift::Finding {
            kind: DriftKind::Replica,
            resource: "deployment/api".into(),
            declared: Some(2.into()),
            observed: Some(3.into()),
            rule: None,
            changed_by: None,
        }];
        let synced = raise(&db, "dev", &found).await;
        assert_eq!((synced.raised, synced.open.len()), (1, 1));
        fixtures::execute(&db, "UPDATE drift_findings SET kind = 'vibes'").await;
        let err = list(&db, "acme", "dev", None, None, &fixtures::everything())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    table: TABLE,
                    column: "kind",
                    ..
                }
            ),
            "{err:?}"
        );
        // Nor is a bad row silently treated as another kind when an observation compares.
        let dev = [("acme".to_owned(), "dev".to_owned())];
        assert!(open_of(&db, &dev, &dev).await.is_err());
        assert!(open_kinds(&db).await.is_err());
    }

    /// SQLite's plan for one environment's findings walks the index that ends in the finding
    /// id: no scan of the tenant's other findings, no sort.
    #[tokio::test]
    async fn one_environments_findings_are_one_index_walk_on_sqlite() {
        let db = fixtures::sqlite().await;
        let page = crate::Page {
            after: Some("0190f000-0000-7000-8000-000000000001".into()),
            rows: 51,
        };
        let query = list_query("acme", "dev", None, None, &page);
        let plan = fixtures::sqlite_plan(&db, &query).await;
        assert!(
            plan.contains("ix_findings_tenant_environment_newest"),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "sorts: {plan}");
    }
}
