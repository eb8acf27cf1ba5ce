//! Environments as the scheduled workflows walk them (a key, and a page of keys), and how far
//! the product goes on its own in each (its mode).

use crate::EnvironmentClass;
use serde::{Deserialize, Serialize};

crate::wire::wire_enum!(
    /// How far the product goes on its own when an environment drifts.
    EnvironmentMode, "environment mode" {
        /// Findings and their events only: no proposal (detect-only).
        Observe => "observe",
        /// Findings grouped into proposals; an operator decides each.
        Propose => "propose",
        /// Proposals, and the non-destructive ones outside production accepted without an
        /// operator where the option and the policy allow.
        Auto => "auto",
    }
);

impl EnvironmentMode {
    /// The mode of an environment registered without one: `auto` outside production, `propose`
    /// in production (where nothing is accepted without an operator anyway).
    pub fn default_for(class: EnvironmentClass) -> Self {
        match class {
            EnvironmentClass::Production => Self::Propose,
            _ => Self::Auto,
        }
    }

    /// Whether findings become proposals.
    pub fn proposes(self) -> bool {
        self != Self::Observe
    }
}

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
