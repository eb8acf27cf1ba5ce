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
pub(crate) type EnvKey = (String, String);

/// The rows of the environments `keys` (one `(tenant, environment) IN (…)`), by their tenant
/// and environment columns: what a sweep's batch reads of each table in one query.
pub(crate) fn of_environments<C: ColumnTrait>(
    tenant: C,
    environment: C,
    keys: &[EnvKey],
) -> sea_orm::sea_query::SimpleExpr {
    use sea_orm::sea_query::Expr;
    Expr::tuple([tenant.into_expr().into(), environment.into_expr().into()])
        .in_tuples(keys.iter().cloned())
}
