//! What one statement costs the product on SQLite, apart from what SQLite does: the read of an
//! environment's row, which a run makes five times, outside a transaction and inside one,
//! through the store's pool (`store::connect`: sea-orm onto sqlx's pool and its connection
//! thread), next to the same `SELECT` prepared once on a rusqlite connection to the same file,
//! in the calling thread. Each way decodes the same row into the same entity model. CPU is this
//! process's, every thread (sqlx's connection thread is one).

use crate::stats::ratio;
use crate::table::{Table, ratio_cell};
use chrono::{DateTime, Utc};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::environments::Labels;
use runtime_cloud_models::targets::Target;
use runtime_cloud_store::entities::environments as rows;
use runtime_cloud_store::environments::NewEnvironment;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, TransactionTrait};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Statements timed each way.
    #[arg(long, default_value_t = 20_000)]
    pub statements: usize,
    /// Statements per transaction, for the reads inside one.
    #[arg(long, default_value_t = 10)]
    pub per_transaction: usize,
}

/// Environments in the table (the reads go round them).
const ENVIRONMENTS: usize = 100;
const TENANT: &str = "bench";

/// Wall and CPU time of one way of reading, per statement.
struct Cost {
    way: &'static str,
    wall_us: f64,
    cpu_us: f64,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "sql: {} reads of an environment's row each way, {} per transaction inside one, SQLite",
        args.statements, args.per_transaction
    );
    let dir = crate::stack::work_dir()?;
    let path = dir.path().join("read.db");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let db = runtime_cloud_store::connect::open(&url).await?;
    {
        use sea_orm_migration::MigratorTrait;
        runtime_cloud_store::Migrator::up(&db, None).await?;
    }
    for i in 0..ENVIRONMENTS {
        let new = NewEnvironment {
            tenant_id: TENANT.into(),
            environment_id: name(i),
            project_id: "bench".into(),
            class: EnvironmentClass::NonProduction,
            target: Target::default(),
            mode: None,
            labels: Labels::default(),
            customer_tenant_id: None,
            pool_id: None,
        };
        runtime_cloud_store::environments::register(&db, new).await?;
    }
    let n = args.statements.max(args.per_transaction.max(1));
    let per = args.per_transaction.max(1);
    // Each way once untimed first: statement caches, the page cache.
    pooled(&db, ENVIRONMENTS).await?;
    let direct_conn = direct_connection(&path)?;
    direct(&direct_conn, ENVIRONMENTS)?;

    let mut costs = Vec::new();
    let (wall, cpu) = timed(pooled(&db, n)).await?;
    costs.push(cost("the store's pool, each read on its own", wall, cpu, n));
    let (wall, cpu) = timed(in_transactions(&db, n, per)).await?;
    costs.push(cost("the store's pool, inside transactions", wall, cpu, n));
    let (wall, cpu) = timed(async { direct(&direct_conn, n) }).await?;
    costs.push(cost("rusqlite in the calling thread", wall, cpu, n));

    let base = costs
        .last()
        .map(|c| (c.wall_us, c.cpu_us))
        .unwrap_or((1.0, 1.0));
    let title = format!("One read of an environment's row ({n} each way)");
    let header = [
        "way",
        "µs a read (wall)",
        "µs a read (CPU)",
        "CPU / rusqlite",
    ];
    let mut table = Table::new(&title, &header);
    for c in &costs {
        table.row(vec![
            c.way.to_owned(),
            format!("{:.1}", c.wall_us),
            format!("{:.1}", c.cpu_us),
            ratio_cell(ratio(c.cpu_us, base.1)),
        ]);
    }
    table.print();
    Ok(())
}

fn name(i: usize) -> String {
    format!("env-{:03}", i % ENVIRONMENTS)
}

fn cost(way: &'static str, wall: Duration, cpu_ms: f64, n: usize) -> Cost {
    Cost {
        way,
        wall_us: wall.as_secs_f64() * 1e6 / n as f64,
        cpu_us: cpu_ms * 1e3 / n as f64,
    }
}

/// Wall time and this process's CPU milliseconds over `work`.
async fn timed(
    work: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<(Duration, f64)> {
    let me = std::process::id();
    let (cpu, start) = (crate::cpu::used_ms(me), Instant::now());
    work.await?;
    Ok((start.elapsed(), crate::cpu::used_ms(me) - cpu))
}

/// `n` reads, each on its own (the pool lends the connection and takes it back each time).
async fn pooled(db: &DatabaseConnection, n: usize) -> anyhow::Result<()> {
    for i in 0..n {
        read(db, &name(i)).await?;
    }
    Ok(())
}

/// `n` reads, `per` in each transaction, each ended by a rollback: it only read, and the same
/// call ends it on either connection (the store's `commit` is for its own connection).
async fn in_transactions(db: &DatabaseConnection, n: usize, per: usize) -> anyhow::Result<()> {
    for chunk in (0..n).collect::<Vec<_>>().chunks(per) {
        let txn = db.begin().await?;
        for i in chunk {
            read(&txn, &name(*i)).await?;
        }
        txn.rollback().await?;
    }
    Ok(())
}

/// The product's read (`environments::find` without its decoding of the target).
async fn read(db: &impl sea_orm::ConnectionTrait, env: &str) -> anyhow::Result<rows::Model> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(TENANT))
        .filter(rows::Column::EnvironmentId.eq(env))
        .one(db)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no environment {env}"))
}

/// A rusqlite connection to the same file, with the store's settings.
fn direct_connection(path: &std::path::Path) -> anyhow::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "wal")?;
    conn.pragma_update(None, "synchronous", "normal")?;
    Ok(conn)
}

/// `n` reads on `conn`, the statement prepared once, each row decoded into the entity's model.
fn direct(conn: &rusqlite::Connection, n: usize) -> anyhow::Result<()> {
    let mut select = conn.prepare_cached(
        "SELECT id, tenant_id, environment_id, project_id, class, target, mode, labels, \
         customer_tenant_id, pool_id, created_at, updated_at FROM environments \
         WHERE tenant_id = ?1 AND environment_id = ?2 LIMIT 1",
    )?;
    let at = |text: String| -> rusqlite::Result<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.to_utc())
            .map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(10, rusqlite::types::Type::Text, e.into())
            })
    };
    for i in 0..n {
        let model = select.query_row((TENANT, name(i)), |row| {
            Ok(rows::Model {
                id: row.get(0)?,
                tenant_id: row.get(1)?,
                environment_id: row.get(2)?,
                project_id: row.get(3)?,
                class: row.get(4)?,
                target: row.get(5)?,
                mode: row.get(6)?,
                labels: row.get(7)?,
                customer_tenant_id: row.get(8)?,
                pool_id: row.get(9)?,
                created_at: at(row.get(10)?)?,
                updated_at: at(row.get(11)?)?,
            })
        })?;
        std::hint::black_box(model);
    }
    Ok(())
}
