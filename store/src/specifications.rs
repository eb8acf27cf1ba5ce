//! `deployment_specifications`: every declared version of an environment's desired state.
//! Rows are only ever inserted: a version never changes.

use crate::decode::{At, to_json};
use crate::entities::deployment_specifications as rows;
use crate::{Error, Page, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::SpecificationSnapshot;
use runtime_cloud_models::events::SpecificationDeclared;
use runtime_cloud_models::validation::Declaration;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};
use uuid::Uuid;

/// One declared specification version: a [`Declaration`] the store accepted, numbered and
/// dated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specification {
    pub specification_id: String,
    /// Counts up per environment from 1.
    pub version: i32,
    pub declared_at: DateTime<Utc>,
    /// What was declared.
    pub declaration: Declaration,
}

impl Specification {
    /// The snapshot a run carries.
    pub fn snapshot(&self) -> SpecificationSnapshot {
        let d = &self.declaration;
        SpecificationSnapshot {
            specification_id: self.specification_id.clone(),
            version: self.version,
            program_ref: d.program_ref.clone(),
            program_version: d.program_version.clone(),
            config_refs: d.config_refs.clone(),
            secret_refs: d.secret_refs.clone(),
            workloads: d.workloads.clone(),
        }
    }

    fn read(m: rows::Model) -> Result<Self, Error> {
        let at = At {
            table: "deployment_specifications",
            row: &m.specification_id,
        };
        let declaration = Declaration {
            kind: at.wire("kind", &m.kind)?,
            config_refs: at.json("config_refs", &m.config_refs)?,
            secret_refs: at.json("secret_refs", &m.secret_refs)?,
            workloads: at.json("workloads", &m.workloads)?,
            tenant_id: m.tenant_id,
            project_id: m.project_id,
            environment_id: m.environment_id,
            program_ref: m.program_ref,
            program_version: m.program_version,
            release_id: m.release_id,
            strategy: m.strategy,
        };
        Ok(Self {
            specification_id: m.specification_id,
            version: m.version,
            declared_at: m.declared_at,
            declaration,
        })
    }
}

/// Declares the next version of an environment's specification with its
/// `SpecificationDeclared` event, in one transaction, after checking it against the
/// declaration rule ([`Declaration::validate`]; [`Error::Invalid`] when refused). Two
/// declarations racing for a version meet the unique index; the loser takes the next version.
pub async fn declare(db: &DatabaseConnection, d: &Declaration) -> Result<Specification, Error> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let txn = crate::begin_write(db).await?;
        match declare_in(&txn, d).await {
            Ok(spec) => {
                txn.commit().await?;
                return Ok(spec);
            }
            Err(Error::Db(e)) if attempts < 8 && retryable_conflict(&e) => {
                txn.rollback().await?;
                // SQLite refuses a read-then-write transaction that meets another writer at
                // once instead of waiting; a short pause lets the other commit.
                tokio::time::sleep(std::time::Duration::from_millis(20 * attempts)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A conflict that a retry of the whole transaction resolves: another declaration took the
/// version, or (SQLite) another writer held the database.
fn retryable_conflict(e: &sea_orm::DbErr) -> bool {
    crate::error::is_unique_violation(e) || e.to_string().contains("database is locked")
}

/// Validates `d` and inserts it as the next version with its event, on `db` (the caller's
/// transaction). Every declaration goes through here: the API's and a proposal's that adopts
/// what was observed.
pub async fn declare_in(
    db: &impl ConnectionTrait,
    d: &Declaration,
) -> Result<Specification, Error> {
    d.validate()?;
    let version = latest_version(db, &d.tenant_id, &d.environment_id)
        .await?
        .map_or(1, |v| v + 1);
    let now = Utc::now();
    let row = rows::ActiveModel {
        specification_id: Set(Uuid::now_v7().to_string()),
        tenant_id: Set(d.tenant_id.clone()),
        project_id: Set(d.project_id.clone()),
        environment_id: Set(d.environment_id.clone()),
        kind: Set(d.kind.as_str().to_owned()),
        program_ref: Set(d.program_ref.clone()),
        program_version: Set(d.program_version.clone()),
        release_id: Set(d.release_id.clone()),
        strategy: Set(d.strategy.clone()),
        config_refs: Set(to_json(&d.config_refs)?),
        secret_refs: Set(to_json(&d.secret_refs)?),
        workloads: Set(to_json(&d.workloads)?),
        version: Set(version),
        declared_at: Set(now),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    let spec = Specification::read(row)?;
    let event = SpecificationDeclared {
        specification_id: spec.specification_id.clone(),
        tenant_id: d.tenant_id.clone(),
        environment_id: d.environment_id.clone(),
        kind: d.kind.as_str().to_owned(),
        version: spec.version,
        program_version: d.program_version.clone(),
    };
    let id = outbox::event_id(&spec.specification_id, "SpecificationDeclared");
    outbox::append(db, &d.tenant_id, event.into(), id).await?;
    Ok(spec)
}

/// The latest version number of an environment's specification.
async fn latest_version(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<i32>, Error> {
    Ok(rows::Entity::find()
        .select_only()
        .column(rows::Column::Version)
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .order_by_desc(rows::Column::Version)
        .into_tuple::<i32>()
        .one(db)
        .await?)
}

/// The latest declared specification of an environment.
pub async fn latest(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<Specification>, Error> {
    version(db, tenant_id, environment_id, None).await
}

/// The latest declared specification of each of the environments `keys` that has one, in one
/// query (each environment's newest version, by its unique (tenant, environment, version)
/// index).
pub async fn latest_of(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<Specification>, Error> {
    use crate::scope::of_environments;
    use sea_orm::sea_query::Expr;
    let newest = Expr::cust(
        "version = (SELECT MAX(s.version) FROM deployment_specifications s \
         WHERE s.tenant_id = deployment_specifications.tenant_id \
         AND s.environment_id = deployment_specifications.environment_id)",
    );
    rows::Entity::find()
        .filter(of_environments(
            rows::Column::TenantId,
            rows::Column::EnvironmentId,
            keys,
        ))
        .filter(newest)
        .all(db)
        .await?
        .into_iter()
        .map(Specification::read)
        .collect()
}

/// Version `version` of an environment's specification, or the latest when `None`.
pub async fn version(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
    version: Option<i32>,
) -> Result<Option<Specification>, Error> {
    let mut select = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id));
    if let Some(v) = version {
        select = select.filter(rows::Column::Version.eq(v));
    }
    select
        .order_by_desc(rows::Column::Version)
        .one(db)
        .await?
        .map(Specification::read)
        .transpose()
}

/// A specification by id.
pub async fn find(
    db: &impl ConnectionTrait,
    specification_id: &str,
) -> Result<Option<Specification>, Error> {
    rows::Entity::find_by_id(specification_id.to_owned())
        .one(db)
        .await?
        .map(Specification::read)
        .transpose()
}

/// A page of the tenant's versions (of one environment, when given), newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    page: &Page,
) -> Result<Vec<Specification>, Error> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    if let Some(env) = environment_id {
        select = select.filter(rows::Column::EnvironmentId.eq(env));
    }
    page.apply(select, rows::Column::SpecificationId)
        .all(db)
        .await?
        .into_iter()
        .map(Specification::read)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{self, declaration, workload};

    async fn versions_count_up_on(db: DatabaseConnection) {
        let d = declaration("dev", vec![workload("api", "1.0.0", 2)]);
        let first = declare(&db, &d).await.unwrap();
        let second = declare(&db, &d).await.unwrap();
        assert_eq!((first.version, second.version), (1, 2));
        assert_eq!(second.declaration, d, "read back as declared");
        let newest = latest(&db, "acme", "dev").await.unwrap().unwrap();
        assert_eq!(newest, second);
        assert_eq!(
            version(&db, "acme", "dev", Some(1)).await.unwrap(),
            Some(first)
        );
        assert_eq!(latest(&db, "other-tenant", "dev").await.unwrap(), None);
        assert_eq!(
            fixtures::events(&db, "SpecificationDeclared").await.len(),
            2
        );

        // Racing declarations meet the unique index; each loser takes the next version.
        let racing = futures::future::join_all((0..6).map(|_| declare(&db, &d))).await;
        let mut won: Vec<i32> = racing.into_iter().map(|r| r.unwrap().version).collect();
        won.sort_unstable();
        assert_eq!(won, [3, 4, 5, 6, 7, 8]);
        assert_eq!(
            fixtures::events(&db, "SpecificationDeclared").await.len(),
            8
        );
    }

    crate::fixtures::on_both_databases!(
        versions_count_up_and_racing_declarations_get_consecutive_ones_sqlite,
        versions_count_up_and_racing_declarations_get_consecutive_ones_postgres,
        versions_count_up_on
    );

    #[tokio::test]
    async fn a_declaration_the_rule_refuses_writes_nothing() {
        let db = fixtures::sqlite().await;
        let mut d = declaration("dev", vec![workload("api", "1.0.0", 1)]);
        d.secret_refs.insert("db".into(), "hunter2".into());
        let err = declare(&db, &d).await.unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert_eq!(latest(&db, "acme", "dev").await.unwrap(), None);
        assert!(
            fixtures::events(&db, "SpecificationDeclared")
                .await
                .is_empty()
        );
    }

    #[tokio::test]
    async fn an_unknown_kind_in_a_row_is_an_error_not_a_default() {
        let db = fixtures::sqlite().await;
        let spec = declare(&db, &declaration("dev", vec![])).await.unwrap();
        fixtures::execute(&db, "UPDATE deployment_specifications SET kind = 'cluster'").await;
        let err = find(&db, &spec.specification_id).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    table: "deployment_specifications",
                    column: "kind",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("cluster"), "{err}");
    }
}
