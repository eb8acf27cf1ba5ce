//! Counts kept as the rows change, so `GET /metrics` reads a few small rows instead of scanning
//! the read tables on every scrape (169 ms a scrape with 2,000 environments, growing
//! with every run and finding ever written).
//!
//! `metric_counts` holds, per metric and labels (`key1`..`key4`, `''` when unused), how many
//! rows count (`n`) and the sum of a value over them (`total`). Triggers add a counted row's
//! share when it is inserted, take it away when it is deleted, and move it when an update
//! changes it, in the writer's own transaction: the counts are exactly the rows whatever code
//! writes them (the store's write paths know nothing of this), and a write rolled back rolls
//! its counts back. The migration runs right after the counted tables are created, so there
//! are no rows yet to count (migrated down and up again over rows, it would count none of them).
//!
//! | metric                  | key1      | key2     | key3                | key4    | total         |
//! |-------------------------|-----------|----------|---------------------|---------|---------------|
//! | `runs_ended`            | tenant    | kind     | state (`''`: none)  |         |               |
//! | `apply_durations`       | tenant    | kind     | bucket (bound, ms)  |         | duration, ms  |
//! | `apply_minutes`         | UTC day   | tenant   | project             |         | apply minutes |
//! | `proposals`             | tenant    | state    | destructive         |         |               |
//! | `open_findings`         | tenant    | kind     | suppressed          |         |               |
//! | `environments`          | tenant    |          |                     |         |               |
//! | `observed_environments` | tenant    |          |                     |         |               |
//! | `held_leases`           | tenant    | pool     | project             | state   |               |
//! | `rollouts`              | tenant    | state    |                     |         | instances     |
//!
//! Which rows count: runs with `completed_at`; runs `Applied` or `Failed` with a receipt (the
//! bucket is the least bound of [`APPLY_DURATION_BOUNDS_MS`] at or above the duration, `+Inf`
//! above them all); runs with `completed_at` and `apply_minutes`, under the UTC day they
//! completed (the day leads so the day's minutes are one index range); every proposal; open
//! findings; every environment; environments whose inventory is not flagged stale and was
//! observed (kept from both tables); leases `waiting` or `granted`; every rollout.
//!
//! The two databases keep them differently:
//! - SQLite: row triggers update `metric_counts` in place. SQLite has one writer at a time,
//!   so a counter row is never contended. An update fires its trigger only when it changes
//!   the row's share (its `WHEN`), so an observation that only moves `observed_at` pays an
//!   index lookup, not a write.
//! - PostgreSQL: statement triggers (with transition tables: once per statement, however many
//!   rows it writes) append the statement's net change to `metric_deltas`, which is only ever
//!   inserted into by writers. Writers updating shared counter rows in place would wait for
//!   each other until commit (every sweep activity counts the same tenant's findings) and
//!   deadlock when two touch two counters in opposite orders. The scrape reads counts plus
//!   deltas in one statement and folds the deltas into the counts (`store::metrics`).
//!   PostgreSQL allows one event per trigger with transition tables: three triggers per table
//!   share one function.
//!
//! Writing rows by other means than INSERT, UPDATE and DELETE (TRUNCATE, a restored dump
//! without its triggers) leaves the counts wrong; `store::metrics::recount` is what they must
//! equal.
//!
//! The scrape's time-dependent reads have their indexes with their tables: inventories by
//! (stale, observed_at), so the environments observed longer ago than the staleness window are
//! one index range (the stale gauge is the environments, minus the observed ones, plus those);
//! and rollouts by state, so the rollouts under way (the fleet host's inbox age) are read
//! without the others.

use sea_orm::{ConnectionTrait, DbBackend};
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MetricCounts {
    Table,
    Metric,
    Key1,
    Key2,
    Key3,
    Key4,
    N,
    Total,
}

#[derive(DeriveIden)]
enum MetricDeltas {
    Table,
    Seq,
    Metric,
    Key1,
    Key2,
    Key3,
    Key4,
    N,
    Total,
}

/// The apply-duration histogram's bucket bounds, in milliseconds, as this migration counts
/// them (`store::metrics` reads the buckets by these; other bounds take a new migration).
pub const APPLY_DURATION_BOUNDS_MS: [u64; 14] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// One counted set of rows. Expressions are SQL over the row, spelled `{r}` (`NEW`/`OLD` in a
/// SQLite trigger, an alias elsewhere).
struct Counted {
    metric: &'static str,
    table: &'static str,
    /// Which rows count.
    when: String,
    /// The labels (`''` when unused).
    keys: [String; 4],
    /// What a counted row adds to `total`.
    total: String,
    /// The columns whose change can change a row's share (SQLite's `UPDATE OF`).
    columns: &'static [&'static str],
}

/// The counted sets, with the expressions the two databases spell differently.
fn counted(backend: DbBackend) -> Vec<Counted> {
    let pg = backend == DbBackend::Postgres;
    let duration_ms = if pg {
        "COALESCE(({r}.apply_receipt ->> 'durationMs')::bigint, 0)"
    } else {
        "COALESCE(json_extract({r}.apply_receipt, '$.durationMs'), 0)"
    };
    // The duration read once (SQLite parses the receipt at each read).
    let bucket = {
        let arms: String = APPLY_DURATION_BOUNDS_MS
            .iter()
            .map(|b| format!("WHEN d.ms <= {b} THEN '{b}' "))
            .collect();
        format!("(SELECT CASE {arms}ELSE '+Inf' END FROM (SELECT {duration_ms} AS ms) AS d)")
    };
    // Timestamps are written in UTC: RFC 3339 text on SQLite, whose first ten characters are
    // the day.
    let completed_day = if pg {
        "to_char({r}.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
    } else {
        "substr({r}.completed_at, 1, 10)"
    };
    let instances = if pg {
        "COALESCE(json_array_length({r}.status -> 'instances'), 0)"
    } else {
        "COALESCE(json_array_length({r}.status, '$.instances'), 0)"
    };
    let flag = |col: &str| format!("CASE WHEN {{r}}.{col} THEN 'true' ELSE 'false' END");
    let none = || String::from("''");
    let col = |c: &str| format!("{{r}}.{c}");
    let observed = "NOT {r}.stale AND {r}.observed_at IS NOT NULL";
    vec![
        Counted {
            metric: "runs_ended",
            table: "provisioning_runs",
            when: "{r}.completed_at IS NOT NULL".into(),
            keys: [
                col("tenant_id"),
                col("kind"),
                "COALESCE({r}.state, '')".into(),
                none(),
            ],
            total: "0".into(),
            columns: &["tenant_id", "kind", "state", "completed_at"],
        },
        Counted {
            metric: "apply_durations",
            table: "provisioning_runs",
            when: "{r}.state IN ('Applied', 'Failed') AND {r}.apply_receipt IS NOT NULL".into(),
            keys: [col("tenant_id"), col("kind"), bucket, none()],
            total: duration_ms.into(),
            columns: &["tenant_id", "kind", "state", "apply_receipt"],
        },
        Counted {
            metric: "apply_minutes",
            table: "provisioning_runs",
            when: "{r}.completed_at IS NOT NULL AND {r}.apply_minutes IS NOT NULL".into(),
            keys: [
                completed_day.into(),
                col("tenant_id"),
                col("project_id"),
                none(),
            ],
            total: col("apply_minutes"),
            columns: &["tenant_id", "project_id", "completed_at", "apply_minutes"],
        },
        Counted {
            metric: "proposals",
            table: "reconciliation_proposals",
            when: "1 = 1".into(),
            keys: [col("tenant_id"), col("state"), flag("destructive"), none()],
            total: "0".into(),
            columns: &["tenant_id", "state", "destructive"],
        },
        Counted {
            metric: "open_findings",
            table: "drift_findings",
            when: "{r}.resolved_at IS NULL".into(),
            keys: [
                col("tenant_id"),
                col("kind"),
                "CASE WHEN {r}.suppressed_by IS NULL THEN 'false' ELSE 'true' END".into(),
                none(),
            ],
            total: "0".into(),
            columns: &["tenant_id", "kind", "suppressed_by", "resolved_at"],
        },
        Counted {
            metric: "environments",
            table: "environments",
            // A retired environment is out of the fleet's counts (and never stale).
            when: "{r}.state = 'active'".into(),
            keys: [col("tenant_id"), none(), none(), none()],
            total: "0".into(),
            columns: &["tenant_id", "state"],
        },
        // An environment counts as observed when both rows are there: from the inventory's
        // side (its environment exists) and from the environment's (its inventory qualifies).
        // On PostgreSQL an environment and its first inventory inserted at once by two
        // transactions would each miss the other; the product never does that (an observation
        // is recorded only for an environment it read, committed).
        Counted {
            metric: "observed_environments",
            table: "runtime_inventories",
            when: format!(
                "{observed} AND EXISTS (SELECT 1 FROM environments e \
                 WHERE e.tenant_id = {{r}}.tenant_id AND e.environment_id = {{r}}.environment_id \
                 AND e.state = 'active')"
            ),
            keys: [col("tenant_id"), none(), none(), none()],
            total: "0".into(),
            columns: &["tenant_id", "environment_id", "stale", "observed_at"],
        },
        Counted {
            metric: "observed_environments",
            table: "environments",
            when: format!(
                "{{r}}.state = 'active' AND EXISTS (SELECT 1 FROM runtime_inventories i \
                 WHERE i.tenant_id = {{r}}.tenant_id AND i.environment_id = {{r}}.environment_id \
                 AND {})",
                observed.replace("{r}", "i")
            ),
            keys: [col("tenant_id"), none(), none(), none()],
            total: "0".into(),
            columns: &["tenant_id", "environment_id", "state"],
        },
        Counted {
            metric: "held_leases",
            table: "capacity_leases",
            when: "{r}.state IN ('waiting', 'granted')".into(),
            keys: [
                col("tenant_id"),
                col("pool_id"),
                col("project_id"),
                col("state"),
            ],
            total: "0".into(),
            columns: &["tenant_id", "pool_id", "project_id", "state"],
        },
        Counted {
            metric: "rollouts",
            table: "fleet_rollouts",
            when: "1 = 1".into(),
            keys: [col("tenant_id"), col("state"), none(), none()],
            total: instances.into(),
            columns: &["tenant_id", "state", "status"],
        },
    ]
}

impl Counted {
    fn on(&self, row: &str, sql: &str) -> String {
        sql.replace("{r}", row)
    }

    /// `metric, key1..key4, n, total` of the row `row` weighed by `sign` (a SELECT list).
    fn share(&self, row: &str, sign: i32) -> String {
        let keys: Vec<String> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{} AS key{}", self.on(row, k), i + 1))
            .collect();
        format!(
            "'{}' AS metric, {}, {sign} AS n, {sign} * ({}) AS total",
            self.metric,
            keys.join(", "),
            self.on(row, &self.total)
        )
    }

    /// SQLite: the statement adding the row's share to `metric_counts`, if it counts.
    fn sqlite_upsert(&self, row: &str, sign: i32) -> String {
        format!(
            "INSERT INTO metric_counts (metric, key1, key2, key3, key4, n, total) \
             SELECT {} WHERE {} \
             ON CONFLICT (metric, key1, key2, key3, key4) \
             DO UPDATE SET n = n + excluded.n, total = total + excluded.total;",
            self.share(row, sign),
            self.on(row, &self.when)
        )
    }

    fn sqlite_trigger(&self, op: &str) -> String {
        format!("metric_counts_{}_{}_{op}", self.metric, self.table)
    }

    /// SQLite: the insert, delete and update triggers.
    fn sqlite_triggers(&self) -> Vec<String> {
        let counts =
            |row: &str| format!("(CASE WHEN {} THEN 1 ELSE 0 END)", self.on(row, &self.when));
        let moved: Vec<String> = self
            .keys
            .iter()
            .chain(std::iter::once(&self.total))
            .map(|k| format!("{} IS NOT {}", self.on("OLD", k), self.on("NEW", k)))
            .collect();
        // The row's share changes when whether it counts changes, or it counts and a label
        // or its total moved.
        let changed = format!(
            "{old} <> {new} OR ({old} = 1 AND ({moved}))",
            old = counts("OLD"),
            new = counts("NEW"),
            moved = moved.join(" OR ")
        );
        vec![
            format!(
                "CREATE TRIGGER {} AFTER INSERT ON {} BEGIN {} END",
                self.sqlite_trigger("insert"),
                self.table,
                self.sqlite_upsert("NEW", 1)
            ),
            format!(
                "CREATE TRIGGER {} AFTER DELETE ON {} BEGIN {} END",
                self.sqlite_trigger("delete"),
                self.table,
                self.sqlite_upsert("OLD", -1)
            ),
            format!(
                "CREATE TRIGGER {} AFTER UPDATE OF {} ON {} WHEN {changed} BEGIN {} {} END",
                self.sqlite_trigger("update"),
                self.columns.join(", "),
                self.table,
                self.sqlite_upsert("OLD", -1),
                self.sqlite_upsert("NEW", 1)
            ),
        ]
    }

    /// PostgreSQL: the shares of the rows of transition table `rows`, weighed by `sign`.
    fn pg_shares(&self, rows: &str, sign: i32) -> String {
        format!(
            "SELECT {} FROM {rows} r WHERE {}",
            self.share("r", sign),
            self.on("r", &self.when)
        )
    }
}

/// The tables with counted rows, in order.
fn tables(counted: &[Counted]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for c in counted {
        if !out.contains(&c.table) {
            out.push(c.table);
        }
    }
    out
}

/// PostgreSQL: the function of `table`'s three statement triggers, appending the statement's
/// net change per counter to `metric_deltas` (nothing when it nets to zero).
fn pg_function(table: &str, counted: &[&Counted]) -> String {
    let insert = |parts: Vec<String>| {
        format!(
            "INSERT INTO metric_deltas (metric, key1, key2, key3, key4, n, total) \
             SELECT metric, key1, key2, key3, key4, SUM(n), SUM(total) FROM ({}) AS d \
             GROUP BY metric, key1, key2, key3, key4 HAVING SUM(n) <> 0 OR SUM(total) <> 0;",
            parts.join(" UNION ALL ")
        )
    };
    let shares = |rows: &str, sign: i32| -> Vec<String> {
        counted.iter().map(|c| c.pg_shares(rows, sign)).collect()
    };
    let both = shares("new_rows", 1)
        .into_iter()
        .chain(shares("old_rows", -1))
        .collect();
    format!(
        "CREATE FUNCTION metric_counts_{table}() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN \
           IF TG_OP = 'INSERT' THEN {} \
           ELSIF TG_OP = 'DELETE' THEN {} \
           ELSE {} \
           END IF; \
           RETURN NULL; \
         END $$",
        insert(shares("new_rows", 1)),
        insert(shares("old_rows", -1)),
        insert(both)
    )
}

fn pg_triggers(table: &str) -> Vec<String> {
    [
        ("insert", "INSERT", "NEW TABLE AS new_rows"),
        (
            "update",
            "UPDATE",
            "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        ),
        ("delete", "DELETE", "OLD TABLE AS old_rows"),
    ]
    .into_iter()
    .map(|(name, event, referencing)| {
        format!(
            "CREATE TRIGGER metric_counts_{name} AFTER {event} ON {table} \
             REFERENCING {referencing} FOR EACH STATEMENT \
             EXECUTE FUNCTION metric_counts_{table}()"
        )
    })
    .collect()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(MetricCounts::Table)
                    .col(string(MetricCounts::Metric))
                    .col(string(MetricCounts::Key1))
                    .col(string(MetricCounts::Key2))
                    .col(string(MetricCounts::Key3))
                    .col(string(MetricCounts::Key4))
                    .col(big_integer(MetricCounts::N))
                    .col(big_integer(MetricCounts::Total))
                    .primary_key(
                        Index::create()
                            .col(MetricCounts::Metric)
                            .col(MetricCounts::Key1)
                            .col(MetricCounts::Key2)
                            .col(MetricCounts::Key3)
                            .col(MetricCounts::Key4),
                    )
                    .to_owned(),
            )
            .await?;
        // Written only on PostgreSQL (empty on SQLite, so one read serves both).
        manager
            .create_table(
                Table::create()
                    .table(MetricDeltas::Table)
                    .col(
                        big_integer(MetricDeltas::Seq)
                            .primary_key()
                            .auto_increment(),
                    )
                    .col(string(MetricDeltas::Metric))
                    .col(string(MetricDeltas::Key1))
                    .col(string(MetricDeltas::Key2))
                    .col(string(MetricDeltas::Key3))
                    .col(string(MetricDeltas::Key4))
                    .col(big_integer(MetricDeltas::N))
                    .col(big_integer(MetricDeltas::Total))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        let backend = db.get_database_backend();
        let counted = counted(backend);
        match backend {
            DbBackend::Postgres => {
                for table in tables(&counted) {
                    let of: Vec<&Counted> = counted.iter().filter(|c| c.table == table).collect();
                    db.execute_unprepared(&pg_function(table, &of)).await?;
                    for trigger in pg_triggers(table) {
                        db.execute_unprepared(&trigger).await?;
                    }
                }
            }
            _ => {
                for c in &counted {
                    for trigger in c.sqlite_triggers() {
                        db.execute_unprepared(&trigger).await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = db.get_database_backend();
        let counted = counted(backend);
        match backend {
            DbBackend::Postgres => {
                for table in tables(&counted).into_iter().rev() {
                    for name in ["delete", "update", "insert"] {
                        db.execute_unprepared(&format!(
                            "DROP TRIGGER metric_counts_{name} ON {table}"
                        ))
                        .await?;
                    }
                    db.execute_unprepared(&format!("DROP FUNCTION metric_counts_{table}()"))
                        .await?;
                }
            }
            _ => {
                for c in counted.iter().rev() {
                    for op in ["update", "delete", "insert"] {
                        db.execute_unprepared(&format!("DROP TRIGGER {}", c.sqlite_trigger(op)))
                            .await?;
                    }
                }
            }
        }
        manager
            .drop_table(Table::drop().table(MetricDeltas::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(MetricCounts::Table).to_owned())
            .await
    }
}
