//! Test fixtures: throwaway databases (in-memory SQLite, a fresh PostgreSQL database) and the
//! rows tests start from, for this crate's tests and those of the crates above it. Compiled
//! always, not behind a feature: a feature only the tests turn on would build this crate, and
//! every crate above it, twice (docs/development.md, "The two commands").
// A fixture that cannot set up its rows fails the test that asked for them.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use crate::entities::outbox_events;
use crate::environments::{self, Environment, NewEnvironment};
use crate::{DatabaseConnection, Migrator};
use runtime_cloud_models::drift::Direction;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::validation::Declaration;
use runtime_cloud_models::{EnvironmentClass, Refs, SpecificationKind, Workload};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use sea_orm_migration::MigratorTrait;

/// A migrated in-memory SQLite database (one connection: sea-orm pools `sqlite::memory:` to
/// one, so every statement sees the same database).
pub async fn sqlite() -> DatabaseConnection {
    let db = sqlite_unmigrated().await;
    Migrator::up(&db, None).await.unwrap();
    db
}

/// Environment `env` of class `class`, with a specification of one workload (`api`).
pub async fn declared(
    db: &DatabaseConnection,
    env: &str,
    class: EnvironmentClass,
) -> (Environment, crate::specifications::Specification) {
    let environment = environment(db, env, class).await;
    let api = vec![workload("api", "1.0.0", 2)];
    let spec = crate::specifications::declare(db, &declaration(env, api))
        .await
        .unwrap();
    (environment, spec)
}

/// A baseline run of `specification` on `environment`, requested with nothing else.
pub fn new_run<'a>(
    run_id: &'a str,
    environment: &'a Environment,
    specification: &'a crate::specifications::Specification,
) -> crate::runs::NewRun<'a> {
    crate::runs::NewRun {
        run_id,
        environment,
        specification,
        kind: runtime_cloud_models::ProvisioningKind::Baseline,
        promotion_id: None,
        approval_id: None,
        idempotency_key: None,
        request_hash: None,
        quarantine_override: None,
    }
}

/// An in-memory SQLite database with no tables yet, on the product's pool.
pub async fn sqlite_unmigrated() -> DatabaseConnection {
    crate::connect::open("sqlite::memory:").await.unwrap()
}

/// SQLite's `EXPLAIN QUERY PLAN` of `query` on `db`, one step a line.
pub async fn sqlite_plan(db: &DatabaseConnection, query: &impl sea_orm::QueryTrait) -> String {
    use sea_orm::{DbBackend, Statement};
    let sql = format!("EXPLAIN QUERY PLAN {}", query.build(DbBackend::Sqlite));
    db.query_all(Statement::from_string(DbBackend::Sqlite, sql))
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get_by::<String, _>("detail").unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A migrated PostgreSQL database of its own, `rc_test_…` on the server of
/// `RC_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`); `scripts/test`
/// drops every `rc_test_%` database when the suite ends.
pub async fn postgres() -> DatabaseConnection {
    let db = postgres_unmigrated().await;
    Migrator::up(&db, None).await.unwrap();
    db
}

/// A PostgreSQL database of its own (as [`postgres`]) with no tables yet, on the product's pool.
pub async fn postgres_unmigrated() -> DatabaseConnection {
    let admin = std::env::var("RC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let name = format!("rc_test_{}", uuid::Uuid::new_v4().simple());
    let server = crate::connect::open(&admin)
        .await
        .expect("PostgreSQL at RC_TEST_POSTGRES_URL");
    server
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    crate::connect::open(&format!("{base}/{name}"))
        .await
        .unwrap()
}

/// Registers environment `env` of tenant `acme`, project `shop`.
pub async fn environment(
    db: &DatabaseConnection,
    env: &str,
    class: EnvironmentClass,
) -> Environment {
    environments::register(
        db,
        NewEnvironment {
            tenant_id: "acme".into(),
            environment_id: env.into(),
            project_id: "shop".into(),
            class,
            target: Default::default(),
            mode: None,
            labels: Default::default(),
            customer_tenant_id: None,
            pool_id: None,
            expires_at: None,
        },
    )
    .await
    .unwrap()
}

/// A declared workload.
pub fn workload(name: &str, version: &str, replicas: u32) -> Workload {
    Workload {
        name: name.into(),
        kind: "deployment".into(),
        version: version.into(),
        replicas,
        config_refs: Refs::new(),
        secret_refs: [("db".to_owned(), "secretbroker://shop/db".to_owned())].into(),
    }
}

/// What a target running `w` exactly as declared reports.
pub fn observed(w: &Workload) -> ObservedWorkload {
    ObservedWorkload::as_declared(w, Vec::new())
}

/// A valid declaration of `workloads` for `env` of tenant `acme`.
pub fn declaration(env: &str, workloads: Vec<Workload>) -> Declaration {
    Declaration {
        tenant_id: "acme".into(),
        project_id: "shop".into(),
        environment_id: env.into(),
        kind: SpecificationKind::Environment,
        program_ref: "git://infra//shop".into(),
        program_version: "a1b2c3d4".into(),
        release_id: None,
        strategy: None,
        config_refs: Refs::new(),
        secret_refs: Refs::new(),
        workloads,
    }
}

/// The outbox events of a type, in publication order.
pub async fn events(db: &DatabaseConnection, event_type: &str) -> Vec<outbox_events::Model> {
    outbox_events::Entity::find()
        .filter(outbox_events::Column::EventType.eq(event_type))
        .order_by_asc(outbox_events::Column::Seq)
        .all(db)
        .await
        .unwrap()
}

/// Runs `sql` as is (to store what this version of the code never writes).
pub async fn execute(db: &DatabaseConnection, sql: &str) {
    db.execute_unprepared(sql).await.unwrap();
}

/// Two tests of `$body` (an `async fn(DatabaseConnection)`): `$sqlite` on in-memory SQLite and
/// `$postgres` on a throwaway PostgreSQL database, for the queries the two spell differently.
#[macro_export]
macro_rules! on_both_databases {
    ($sqlite:ident, $postgres:ident, $body:ident) => {
        #[tokio::test]
        async fn $sqlite() {
            $body($crate::fixtures::sqlite().await).await;
        }

        #[tokio::test]
        async fn $postgres() {
            $body($crate::fixtures::postgres().await).await;
        }
    };
}

pub use crate::on_both_databases;

/// Proposal `p1` on a non-production environment `dev`, adopting what is observed and covering
/// no findings (recording an observation raises proposals with their findings:
/// `transactions::record_observation`).
pub async fn proposal(db: &DatabaseConnection) -> crate::proposals::Proposal {
    environment(db, "dev", EnvironmentClass::NonProduction).await;
    let plan = runtime_cloud_models::drift::ProposalPlan {
        direction: Direction::AdoptObserved,
        destructive: false,
        plan_summary: serde_json::json!({ "adds": 1, "changes": 0, "deletes": 0 }),
    };
    let none = std::collections::BTreeSet::new();
    let now = chrono::Utc::now();
    crate::proposals::insert(db, "p1", "acme", "dev", &none, &plan, now)
        .await
        .unwrap()
}

/// A page large enough for any test's list.
pub fn everything() -> crate::Page {
    crate::Page {
        after: None,
        rows: 1_000,
    }
}
