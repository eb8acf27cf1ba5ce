//! Rows read into tuples, each column by its position on every connection.
//!
//! sea-orm reads a tuple's columns by position. Rows of the SQLite connection that runs
//! statements in place (`connect::in_thread`, through sea-orm's proxy connection) keep their
//! values in the order of the columns' names, so positions there follow the names. Here every
//! selected column is named by its position (`c00`, `c01` …), which sorts the same way.

use sea_orm::sea_query::{Alias, SeaRc};
use sea_orm::{EntityTrait, QueryTrait, Select, SelectGetableTuple, Selector, TryGetableMany};

/// `into_tuple` that reads the columns in the order they are selected, on every connection.
pub(crate) trait IntoTuples {
    fn tuples<T: TryGetableMany>(self) -> Selector<SelectGetableTuple<T>>;
}

impl<E: EntityTrait> IntoTuples for Select<E> {
    #[allow(clippy::disallowed_methods)]
    fn tuples<T: TryGetableMany>(mut self) -> Selector<SelectGetableTuple<T>> {
        let mut position = 0;
        QueryTrait::query(&mut self).exprs_mut_for_each(|select| {
            select.alias = Some(SeaRc::new(Alias::new(format!("c{position:02}"))));
            position += 1;
        });
        self.into_tuple()
    }
}
