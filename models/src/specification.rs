//! What should run: a specification's desired workloads and the snapshot a run carries.

use crate::wire::wire_enum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

wire_enum!(
    /// What a specification describes.
    SpecificationKind, "specification kind" {
        /// A whole environment.
        Environment => "environment",
        /// One workload.
        Workload => "workload",
    }
);

/// A reference to a configuration key or a secret: never a value.
pub type Refs = BTreeMap<String, String>;

/// One desired workload of a specification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    /// Unique within the specification.
    pub name: String,
    /// `deployment`, `statefulset`, `daemonset`, `job` …
    pub kind: String,
    /// The version (image tag, chart version) to run.
    pub version: String,
    /// Desired replicas; never negative.
    pub replicas: u32,
    /// Config Platform keys by reference.
    #[serde(default)]
    pub config_refs: Refs,
    /// Secret Broker references; never values.
    #[serde(default)]
    pub secret_refs: Refs,
}

/// The desired state a run plans and applies: a snapshot of one specification version.
///
/// This is what a workflow carries, so it holds references only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecificationSnapshot {
    /// The specification row.
    pub specification_id: String,
    /// Its version within the environment.
    pub version: i32,
    /// Repository + path of the IaC program.
    pub program_ref: String,
    /// Commit of the program.
    pub program_version: String,
    /// Config Platform keys by reference.
    pub config_refs: Refs,
    /// Secret references; never values.
    pub secret_refs: Refs,
    /// The desired workloads.
    pub workloads: Vec<Workload>,
}
