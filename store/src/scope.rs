//! Rows that belong to one environment or, without one, to every environment of their tenant
//! (drift rules, change windows): the conditions that select them.

use sea_orm::{ColumnTrait, Condition};

/// One environment's rows (`Some`), or the tenant's defaults (`None`), by the `environment_id`
/// column `column`.
pub(crate) fn scope<C: ColumnTrait>(column: C, environment_id: Option<&str>) -> Condition {
    Condition::all().add(match environment_id {
        Some(env) => column.eq(env),
        None => column.is_null(),
    })
}

/// The rows that apply to an environment: its own and its tenant's defaults.
pub(crate) fn applying<C: ColumnTrait>(column: C, environment_id: &str) -> Condition {
    Condition::any()
        .add(scope(column, Some(environment_id)))
        .add(scope(column, None))
}

/// An environment's key: its tenant and its id.
pub type EnvKey = (String, String);

/// The rows of the environments `keys`, and perhaps a few more: `tenant IN (…) AND
/// environment IN (…)`, what a sweep's batch reads of each table in one query. Both databases
/// walk their (tenant, environment, …) indexes for it (a row-value `(tenant, environment) IN
/// (…)` is spelled 50 ways in PostgreSQL's plan); a tenant's row that has the id of another
/// tenant's environment in the batch comes too, and the caller keeps only the keys it asked
/// for.
pub fn of_environments<C: ColumnTrait>(tenant: C, environment: C, keys: &[EnvKey]) -> Condition {
    let tenants: std::collections::BTreeSet<&str> = keys.iter().map(|(t, _)| t.as_str()).collect();
    let envs: std::collections::BTreeSet<&str> = keys.iter().map(|(_, e)| e.as_str()).collect();
    Condition::all()
        .add(tenant.is_in(tenants))
        .add(environment.is_in(envs))
}
