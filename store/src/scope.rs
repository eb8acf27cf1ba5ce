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
