//! Fleet operations: the fleet as observation sees it (products, their instances, each one's
//! release and health as observed), and incidents.

use serde::{Deserialize, Serialize};

crate::wire::wire_enum!(
    /// Where an incident came from.
    IncidentSource, "incident source" {
        /// Opened by an operator.
        Operator => "operator",
        /// An SLO breach was reported.
        SloBreach => "slo-breach",
        /// A fleet rollout halted on a guard.
        RolloutHalted => "rollout-halted",
    }
);

crate::wire::wire_enum!(
    /// Whether an incident still needs attention.
    IncidentState, "incident state" {
        Open => "open",
        Resolved => "resolved",
    }
);

/// An instance's health, as its last observation shows it: the worst of its workloads
/// (`unavailable` > `degraded` > `progressing` > `healthy`), `unknown` before any observation,
/// `empty` when it runs nothing.
pub fn instance_health<'a>(workload_health: impl IntoIterator<Item = &'a str>) -> &'static str {
    const ORDER: [&str; 4] = ["healthy", "progressing", "degraded", "unavailable"];
    let mut worst: Option<usize> = None;
    for h in workload_health {
        let rank = ORDER
            .iter()
            .position(|o| *o == h)
            .unwrap_or(ORDER.len() - 1);
        worst = Some(worst.map_or(rank, |w| w.max(rank)));
    }
    match worst {
        None => "empty",
        Some(rank) => ORDER[rank],
    }
}

/// `GET /fleet/meta/summary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetSummary {
    /// Products with at least one instance.
    pub operated_products: u64,
    /// Instances by environment class (`production`, `non-production`).
    pub instances_by_class: std::collections::BTreeMap<String, u64>,
    /// Instances without a fresh observation.
    pub stale_instances: u64,
    /// Open drift findings (suppressed ones aside).
    pub open_drift: u64,
    pub open_incidents: u64,
    pub active_rollouts: u64,
    /// Instances that left operation through an off-boarding order.
    #[serde(default)]
    pub offboarded_instances: u64,
    /// How long ago the tenant's environments were last observed successfully (`null` before
    /// the first observation).
    #[serde(default)]
    pub observation_age: Option<crate::observation::ObservationAge>,
    /// What the tenant's observed environments cost an hour at its prices (`null` without a
    /// price table: `GET /fleet/costs` says why).
    #[serde(default)]
    pub hourly_cost: Option<HourlyCost>,
}

/// An hourly cost in a currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HourlyCost {
    pub currency: String,
    pub hourly: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_as_healthy_as_its_worst_workload() {
        assert_eq!(instance_health(["healthy", "healthy"]), "healthy");
        assert_eq!(instance_health(["healthy", "progressing"]), "progressing");
        assert_eq!(
            instance_health(["degraded", "unavailable", "healthy"]),
            "unavailable"
        );
        assert_eq!(
            instance_health(["healthy", "strange"]),
            "unavailable",
            "unknown is the worst"
        );
        assert_eq!(instance_health([]), "empty");
    }
}
