//! The one error type of the store.

use runtime_cloud_models::UnknownVariant;
use runtime_cloud_models::validation::Invalid;

/// What a read or a write of the read tables can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused or lost the statement; a retry may succeed.
    #[error("read database: {0}")]
    Db(#[from] sea_orm::DbErr),
    /// A value could not be written as JSON.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A stored value this version of the code cannot read: an enum column holding an unknown
    /// value, or a JSON column of another shape. Never replaced by a default.
    #[error("{table}.{column} of `{row}` cannot be read: {source}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The column.
        column: &'static str,
        /// The row's key.
        row: String,
        /// What is wrong with the value (an unknown enum value names it).
        #[source]
        source: Unreadable,
    },
    /// A declaration the validation rule refuses; the message never repeats a secret value.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A row the operation needs does not exist.
    #[error("no {what} `{id}`")]
    Missing {
        /// What kind of row (`environment`, `proposal` …).
        what: &'static str,
        /// Its key.
        id: String,
    },
    /// A projection that would move a run where the state diagram has no arrow
    /// (`models::TRANSITIONS`): a bug in the workflow, refused rather than recorded.
    #[error("run `{run}` cannot move from {from:?} to {to}")]
    IllegalTransition {
        /// The run.
        run: String,
        /// Its recorded state (`None`: not planned yet).
        from: Option<runtime_cloud_models::ProvisioningState>,
        /// The state projected.
        to: runtime_cloud_models::ProvisioningState,
    },
    /// An inbound event's approval refused where it is recorded: spent before by another
    /// event (a replay). Nothing was written.
    #[error(transparent)]
    Refused(#[from] runtime_cloud_models::inbound::proof::Refused),
    /// An insert met a row with the same unique key (an environment id in its tenant, an
    /// `Idempotency-Key`): the caller decides what that means.
    #[error("{table} already holds a row with this key")]
    Duplicate {
        /// The table.
        table: &'static str,
    },
}

/// Why a stored value cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// Not one of the enum's wire values.
    #[error(transparent)]
    Enum(#[from] UnknownVariant),
    /// Not JSON of the expected shape.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A kept count below zero (a counted row changed without its trigger), or a histogram
    /// bucket this version does not know.
    #[error("not a count: {0}")]
    Count(String),
}

impl Error {
    /// Maps a unique-key violation of an insert into `table` to [`Error::Duplicate`].
    pub(crate) fn on_insert(table: &'static str) -> impl FnOnce(sea_orm::DbErr) -> Error {
        move |e| {
            if is_unique_violation(&e) {
                Error::Duplicate { table }
            } else {
                Error::Db(e)
            }
        }
    }
}

/// Whether `e` is a unique-key violation.
pub(crate) fn is_unique_violation(e: &sea_orm::DbErr) -> bool {
    matches!(
        e.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    )
}
