//! `drift_rules`: an environment's rules and its tenant's defaults
//! ([`runtime_cloud_models::drift_rules`]). Findings they match are suppressed by the next
//! observation that records them ([`crate::findings::sync`]); removing or outliving a rule
//! reopens them at the next observation.

use crate::decode::At;
use crate::entities::drift_rules as rows;
use crate::scope::scope;
use crate::{Error, Page};
use chrono::{DateTime, Utc};
use runtime_cloud_models::drift_rules::{DriftRule, RuleMatch};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, EntityTrait,
    QueryFilter, QueryOrder,
};
use uuid::Uuid;

const TABLE: &str = "drift_rules";

fn read(m: rows::Model) -> Result<DriftRule, Error> {
    let at = At {
        table: TABLE,
        row: &m.rule_id,
    };
    Ok(DriftRule {
        matcher: RuleMatch {
            kind: at.wire("kind", &m.kind)?,
            workload: m.workload,
            field: m.field,
            manager: m.manager,
            rule: m.rule,
        },
        rule_id: m.rule_id,
        tenant_id: m.tenant_id,
        environment_id: m.environment_id,
        owner: m.owner,
        reason: m.reason,
        expires_at: m.expires_at,
        created_by: m.created_by,
        created_at: m.created_at,
    })
}

/// A rule to record.
#[derive(Debug, Clone)]
pub struct NewRule {
    pub tenant_id: String,
    pub environment_id: Option<String>,
    pub matcher: RuleMatch,
    pub owner: String,
    pub reason: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_by: String,
}

/// Records a rule.
pub async fn create(db: &impl ConnectionTrait, new: NewRule) -> Result<DriftRule, Error> {
    let row = rows::ActiveModel {
        rule_id: Set(Uuid::now_v7().to_string()),
        tenant_id: Set(new.tenant_id),
        environment_id: Set(new.environment_id),
        kind: Set(new.matcher.kind.as_str().to_owned()),
        workload: Set(new.matcher.workload),
        field: Set(new.matcher.field),
        manager: Set(new.matcher.manager),
        rule: Set(new.matcher.rule),
        owner: Set(new.owner),
        reason: Set(new.reason),
        expires_at: Set(new.expires_at),
        created_by: Set(new.created_by),
        created_at: Set(Utc::now()),
    }
    .insert(db)
    .await?;
    read(row)
}

/// The tenant's rules that meet `condition`, oldest first.
async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    condition: Condition,
    page: Option<&Page>,
) -> Result<Vec<DriftRule>, Error> {
    let select = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(condition);
    let select = match page {
        Some(page) => page.ascending(select, rows::Column::RuleId),
        None => select.order_by_asc(rows::Column::RuleId),
    };
    select.all(db).await?.into_iter().map(read).collect()
}

/// The rules of one environment only (`Some`), or the tenant's defaults only (`None`), oldest
/// first, expired ones included (they show what was suppressed until when).
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    page: &Page,
) -> Result<Vec<DriftRule>, Error> {
    find(
        db,
        tenant_id,
        scope(rows::Column::EnvironmentId, environment_id),
        Some(page),
    )
    .await
}

/// The rules that apply to any of the environments `keys` (theirs and their tenants'
/// defaults), oldest first, in one query; [`DriftRule::applies_to`] sorts them out.
pub async fn applying_of(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<DriftRule>, Error> {
    use crate::scope::of_environments;
    let tenants: std::collections::BTreeSet<&str> = keys.iter().map(|(t, _)| t.as_str()).collect();
    let defaults = Condition::all()
        .add(rows::Column::TenantId.is_in(tenants))
        .add(rows::Column::EnvironmentId.is_null());
    let theirs = of_environments(rows::Column::TenantId, rows::Column::EnvironmentId, keys);
    rows::Entity::find()
        .filter(Condition::any().add(defaults).add(theirs))
        .order_by_asc(rows::Column::RuleId)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// Removes a rule of the tenant in the given scope (an environment's, or a tenant default);
/// false when there is none by that id there.
pub async fn delete(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    rule_id: &str,
) -> Result<bool, Error> {
    let done = rows::Entity::delete_many()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(scope(rows::Column::EnvironmentId, environment_id))
        .filter(rows::Column::RuleId.eq(rule_id))
        .exec(db)
        .await?;
    Ok(done.rows_affected > 0)
}
