//! The read tables of Runtime Cloud: sea-orm entities, migrations, and one module per aggregate.

pub mod entities;
pub mod migration;
