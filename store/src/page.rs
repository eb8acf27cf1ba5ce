//! One page of a newest-first list. The caller (the API) owns the cursor format; the store
//! only narrows the query.

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select};

/// A page of a list ordered newest first by id (ids are UUIDv7, so time-ordered): rows whose
/// id is below `before`, at most `rows` of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// Start after this id (exclusive); from the newest when absent.
    pub before: Option<String>,
    /// At most this many rows.
    pub rows: u64,
}

impl Page {
    /// Narrows `select` to this page, ordered by `id` descending.
    pub(crate) fn apply<E: EntityTrait>(&self, select: Select<E>, id: E::Column) -> Select<E> {
        let select = match &self.before {
            Some(before) => select.filter(id.lt(before.clone())),
            None => select,
        };
        select.order_by_desc(id).limit(self.rows)
    }
}
