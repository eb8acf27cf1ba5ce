//! `cluster_watches`: a watched Kubernetes cluster's watches (the watches' own state, of no
//! tenant).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "cluster_watches")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub cluster_id: String,
    /// Since when every watch of the cluster has followed every change; none while one fails.
    pub synced_since: Option<DateTimeUtc>,
    /// The watch's holder's last beat.
    pub beat_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
