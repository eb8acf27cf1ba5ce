//! `semaphores`: an environment's lock or a project's capacity, with how many may hold it
//! (`store::semaphores`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "semaphores")]
pub struct Model {
    /// `environment/{tenant}/{env}` or `capacity/{tenant}/{project}`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    /// The limit as the latest taker read it.
    pub slots: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
