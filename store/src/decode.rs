//! Reading stored values into their types. A value that does not read is
//! [`Error::Corrupt`](crate::Error::Corrupt), naming the table, column and row.

use crate::Error;
use crate::error::Unreadable;
use runtime_cloud_models::UnknownVariant;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::str::FromStr;

/// Where a value is stored, for the error that says it does not read.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub table: &'static str,
    pub row: &'a str,
}

impl At<'_> {
    fn corrupt(&self, column: &'static str, source: impl Into<Unreadable>) -> Error {
        Error::Corrupt {
            table: self.table,
            column,
            row: self.row.to_owned(),
            source: source.into(),
        }
    }

    /// An enum column (`wire_enum!`'s `FromStr`).
    pub fn wire<T: FromStr<Err = UnknownVariant>>(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<T, Error> {
        T::from_str(value).map_err(|e| self.corrupt(column, e))
    }

    /// A nullable enum column.
    pub fn wire_opt<T: FromStr<Err = UnknownVariant>>(
        &self,
        column: &'static str,
        value: Option<&str>,
    ) -> Result<Option<T>, Error> {
        value.map(|v| self.wire(column, v)).transpose()
    }

    /// A JSON column.
    pub fn json<T: DeserializeOwned>(
        &self,
        column: &'static str,
        value: &serde_json::Value,
    ) -> Result<T, Error> {
        T::deserialize(value).map_err(|e| self.corrupt(column, e))
    }

    /// A text column that holds JSON.
    pub fn json_text<T: DeserializeOwned>(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<T, Error> {
        serde_json::from_str(value).map_err(|e| self.corrupt(column, e))
    }

    /// A JSON column read as text, passed through unparsed but checked to be JSON.
    pub fn raw(
        &self,
        column: &'static str,
        value: Option<String>,
    ) -> Result<Option<Box<serde_json::value::RawValue>>, Error> {
        value
            .map(|v| {
                serde_json::value::RawValue::from_string(v).map_err(|e| self.corrupt(column, e))
            })
            .transpose()
    }
}

/// A value as a JSON column.
pub fn to_json<T: Serialize + ?Sized>(v: &T) -> Result<serde_json::Value, Error> {
    Ok(serde_json::to_value(v)?)
}
