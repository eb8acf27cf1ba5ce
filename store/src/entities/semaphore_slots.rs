//! `semaphore_slots`: who holds a semaphore and who waits for it (`store::semaphores`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "semaphore_slots")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub semaphore_id: String,
    /// The workflow id that holds or waits.
    #[sea_orm(primary_key, auto_increment = false)]
    pub holder_id: String,
    /// Holds a slot (else waits).
    pub holding: bool,
    /// A holder that knows it holds: it was answered so, or its `granted` signal went through.
    pub told: bool,
    /// Arrival order within the semaphore.
    pub arrived: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
