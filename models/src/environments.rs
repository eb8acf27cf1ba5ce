//! Environments as the scheduled workflows walk them: a key, and a page of keys.

use serde::{Deserialize, Serialize};

/// An environment key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentKey {
    pub tenant_id: String,
    pub environment_id: String,
}

/// A page of environments and where the next one starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentPage {
    pub environments: Vec<EnvironmentKey>,
    pub next: Option<String>,
}
