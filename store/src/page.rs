//! One page of a list: newest first by a time-ordered id, or in the order of a key (an
//! environment's id). The caller (the API) owns the cursor format; the store only narrows the
//! query.

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select};

/// A page of a list: the rows after `after` in the list's order, at most `rows` of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// Start after this id or key (exclusive); from the first when absent.
    pub after: Option<String>,
    /// At most this many rows.
    pub rows: u64,
}

impl Page {
    /// Narrows `select` to this page, newest first: ordered by `id` descending (ids are
    /// UUIDv7, so time-ordered).
    pub(crate) fn apply<E: EntityTrait>(&self, select: Select<E>, id: E::Column) -> Select<E> {
        let select = match &self.after {
            Some(after) => select.filter(id.lt(after.clone())),
            None => select,
        };
        select.order_by_desc(id).limit(self.rows)
    }

    /// Narrows `select` to this page in the order of `key`, ascending (an environment's id, a
    /// rule's id: lists read in their natural order).
    pub(crate) fn ascending<E: EntityTrait>(&self, select: Select<E>, key: E::Column) -> Select<E> {
        let select = match &self.after {
            Some(after) => select.filter(key.gt(after.clone())),
            None => select,
        };
        select.order_by_asc(key).limit(self.rows)
    }
}
