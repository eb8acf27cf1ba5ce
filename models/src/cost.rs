//! Cost from what is observed: each observed workload's requested CPU and memory times its
//! replicas, and each resource of a runner's recorded state by type, priced by the tenant's
//! price table (by the environment's `region` label when the table prices that region). Pure:
//! the observation records what it read ([`Usage`]), these functions price it. No price table,
//! no cost: never a made-up number; what a table cannot price is counted as `unpriced`, not
//! taken as free.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GB of memory, as prices count it: 2^30 bytes (Kubernetes' `Gi`).
pub const GB: f64 = 1_073_741_824.0;

/// A tenant's prices, per hour, in its `currency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriceTable {
    /// An ISO 4217 code (`EUR`), shown with every cost.
    pub currency: String,
    /// The price of one requested CPU core for an hour.
    pub cpu_hour: f64,
    /// The price of one requested GB (2^30 bytes) of memory for an hour.
    pub memory_gb_hour: f64,
    /// The hourly price of one resource of a runner's state by its type
    /// (`aws:s3/bucket:Bucket`).
    #[serde(default)]
    pub resource_types: BTreeMap<String, f64>,
    /// Prices of a region (an environment's `region` label), over the ones above.
    #[serde(default)]
    pub regions: BTreeMap<String, RegionPrices>,
}

/// A region's prices; what it leaves out is the table's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegionPrices {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gb_hour: Option<f64>,
    #[serde(default)]
    pub resource_types: BTreeMap<String, f64>,
}

impl PriceTable {
    /// What is wrong with the table, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let currency = &self.currency;
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            out.push(format!(
                "currency `{currency}` must be an ISO 4217 code (`EUR`)"
            ));
        }
        let mut price = |what: String, p: f64| {
            if !p.is_finite() || p < 0.0 {
                out.push(format!("{what} must be a price of zero or more, not {p}"));
            }
        };
        price("cpuHour".into(), self.cpu_hour);
        price("memoryGbHour".into(), self.memory_gb_hour);
        for (ty, p) in &self.resource_types {
            price(format!("resourceTypes.{ty}"), *p);
        }
        for (region, r) in &self.regions {
            r.cpu_hour
                .into_iter()
                .for_each(|p| price(format!("regions.{region}.cpuHour"), p));
            r.memory_gb_hour
                .into_iter()
                .for_each(|p| price(format!("regions.{region}.memoryGbHour"), p));
            for (ty, p) in &r.resource_types {
                price(format!("regions.{region}.resourceTypes.{ty}"), *p);
            }
        }
        out
    }

    fn cpu_hour(&self, region: Option<&RegionPrices>) -> f64 {
        region.and_then(|r| r.cpu_hour).unwrap_or(self.cpu_hour)
    }

    fn memory_gb_hour(&self, region: Option<&RegionPrices>) -> f64 {
        region
            .and_then(|r| r.memory_gb_hour)
            .unwrap_or(self.memory_gb_hour)
    }

    fn resource_type(&self, region: Option<&RegionPrices>, ty: &str) -> Option<f64> {
        region
            .and_then(|r| r.resource_types.get(ty))
            .or_else(|| self.resource_types.get(ty))
            .copied()
    }
}

/// What one replica of a workload requests: the sum over its containers (init containers
/// aside: they do not run alongside).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Requests {
    /// Thousandths of a CPU core.
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

/// What an environment runs, as cost counts it: its workloads' replicas and requests, and its
/// runner state's resources by type. Recorded with each observation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Each workload's name, desired replicas and requests per replica (none: it requests
    /// nothing the observer can read, so it cannot be priced).
    pub workloads: Vec<WorkloadUsage>,
    /// The runner state's resources by type, and how many of each.
    pub resource_types: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUsage {
    pub name: String,
    pub replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Requests>,
}

/// An environment's hourly cost, and what it is made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub currency: String,
    /// Everything priced, per hour, rounded to a millionth.
    pub hourly: f64,
    /// CPU cores requested, over every replica.
    pub cpu_cores: f64,
    /// Memory requested, in GB, over every replica.
    pub memory_gb: f64,
    /// The part of `hourly` that is the runner state's resources.
    pub resources_hourly: f64,
    /// What could not be priced: workloads without requests (`workload/api`) and resource
    /// types the table has no price for (`type/aws:s3/bucket:Bucket`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
}

/// A money amount rounded to a millionth of its unit: sums of rounded amounts stay exact
/// enough to compare, and no float noise reaches a reader.
pub fn round(amount: f64) -> f64 {
    (amount * 1e6).round() / 1e6
}

/// `usage` priced by `prices`, with the prices of `region` where the table has them.
pub fn price(usage: &Usage, prices: &PriceTable, region: Option<&str>) -> Cost {
    let region = region.and_then(|r| prices.regions.get(r));
    let (mut cpu_cores, mut memory_gb, mut unpriced) = (0.0, 0.0, Vec::new());
    for w in &usage.workloads {
        match w.requests {
            Some(r) => {
                cpu_cores += f64::from(w.replicas) * r.cpu_millis as f64 / 1000.0;
                memory_gb += f64::from(w.replicas) * r.memory_bytes as f64 / GB;
            }
            None if w.replicas > 0 => unpriced.push(format!("workload/{}", w.name)),
            None => {}
        }
    }
    let mut resources_hourly = 0.0;
    for (ty, count) in &usage.resource_types {
        match prices.resource_type(region, ty) {
            Some(p) => resources_hourly += p * f64::from(*count),
            None => unpriced.push(format!("type/{ty}")),
        }
    }
    let compute = cpu_cores * prices.cpu_hour(region) + memory_gb * prices.memory_gb_hour(region);
    Cost {
        currency: prices.currency.clone(),
        hourly: round(compute + resources_hourly),
        cpu_cores: round(cpu_cores),
        memory_gb: round(memory_gb),
        resources_hourly: round(resources_hourly),
        unpriced,
    }
}

/// What a plan would do to an environment's hourly cost: before (what its last observation
/// runs) and after (what the plan leaves running), at the tenant's prices. Given to the
/// policies with the plan (`input.plan.cost`), so a tenant can require an approval for a rise
/// or deny one over a budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    pub currency: String,
    pub before_hourly: f64,
    pub after_hourly: f64,
    /// `after_hourly - before_hourly`.
    pub delta_hourly: f64,
    /// The delta as a percentage of `before_hourly`; none when nothing was priced before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_percent: Option<f64>,
    /// What the estimate could not price, after the plan (see [`Cost::unpriced`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
}

// Every amount is rounded ([`round`]), so never NaN: equality is total.
impl Eq for Estimate {}

/// A declared workload, as an estimate counts it: its name and desired replicas.
pub struct Declared<'a> {
    pub name: &'a str,
    pub replicas: u32,
    /// What one replica requests as the plan declares it (a Kubernetes object of a Pulumi
    /// program); none: what the running workload of the same name requests.
    pub requests: Option<Requests>,
}

/// Whether cost prices a runner-state resource of type `kind` by its type: not the runner's
/// own (`pulumi:providers:aws`, which hold no cloud object), and not a Kubernetes object of a
/// namespace the Kubernetes observer reads (`kubernetes_observed`: its workloads are priced by
/// what they request).
pub fn priced_type(kind: &str, kubernetes_observed: bool) -> bool {
    !(kind.starts_with("pulumi:") || (kubernetes_observed && kind.starts_with("kubernetes:")))
}

/// What a plan leaves running, from what runs now (`before`): the `declared` workloads at their
/// declared replicas, each requesting per replica what the plan declares, else what the
/// workload of the same name requests now (neither: unpriced); the runner state's resource
/// types with the plan's added ones (`pkg:module:Type` kinds, those [`priced_type`]) counted in
/// and its deleted ones out.
pub fn planned(
    before: &Usage,
    declared: &[Declared<'_>],
    plan: &crate::plan::PlanChanges,
    kubernetes_observed: bool,
) -> Usage {
    let requests: BTreeMap<&str, Option<Requests>> = before
        .workloads
        .iter()
        .map(|w| (w.name.as_str(), w.requests))
        .collect();
    let workloads = declared
        .iter()
        .map(|d| WorkloadUsage {
            name: d.name.to_owned(),
            replicas: d.replicas,
            requests: d.requests.or(requests.get(d.name).copied().flatten()),
        })
        .collect();
    let mut resource_types = before.resource_types.clone();
    // A Pulumi type names its package and module (`aws:s3/bucket:Bucket`); a workload kind
    // (`deployment`) does not, and is counted with the workloads.
    let typed = |kind: &str| kind.contains(':') && priced_type(kind, kubernetes_observed);
    for add in plan.adds.iter().filter(|a| typed(&a.kind)) {
        *resource_types.entry(add.kind.clone()).or_default() += 1;
    }
    for delete in plan.deletes.iter().filter(|d| typed(&d.kind)) {
        if let Some(n) = resource_types.get_mut(&delete.kind) {
            *n = n.saturating_sub(1);
        }
    }
    resource_types.retain(|_, n| *n > 0);
    Usage {
        workloads,
        resource_types,
    }
}

/// The estimate of going from `before` to `after` at `prices`.
pub fn estimate(
    before: &Usage,
    after: &Usage,
    prices: &PriceTable,
    region: Option<&str>,
) -> Estimate {
    let (was, will) = (price(before, prices, region), price(after, prices, region));
    let delta = round(will.hourly - was.hourly);
    Estimate {
        currency: prices.currency.clone(),
        before_hourly: was.hourly,
        after_hourly: will.hourly,
        delta_hourly: delta,
        delta_percent: (was.hourly > 0.0).then(|| round(delta / was.hourly * 100.0)),
        unpriced: will.unpriced,
    }
}

/// A Kubernetes quantity (`250m`, `1.5`, `2`, `256Mi`, `1G`, `1e3`) as a number of its unit:
/// `None` when it is not one.
pub fn quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1_048_576.0),
        ("Gi", 1_073_741_824.0),
        ("Ti", 1_099_511_627_776.0),
        ("Pi", 1_125_899_906_842_624.0),
        ("Ei", 1_152_921_504_606_846_976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(s, f)| text.strip_suffix(s).map(|n| (n, *f)))
        .or_else(|| text.strip_suffix('P').map(|n| (n, 1e15)))
        .or_else(|| {
            // `E` is an exponent (`1e3`) unless nothing follows it.
            text.strip_suffix('E').map(|n| (n, 1e18))
        })
        .unwrap_or((text, 1.0));
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some(value * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PriceTable {
        PriceTable {
            currency: "EUR".into(),
            cpu_hour: 0.04,
            memory_gb_hour: 0.005,
            resource_types: BTreeMap::from([("aws:s3/bucket:Bucket".into(), 0.01)]),
            regions: BTreeMap::from([(
                "eu-north-1".into(),
                RegionPrices {
                    cpu_hour: Some(0.03),
                    ..RegionPrices::default()
                },
            )]),
        }
    }

    fn usage() -> Usage {
        Usage {
            workloads: vec![
                WorkloadUsage {
                    name: "api".into(),
                    replicas: 3,
                    requests: Some(Requests {
                        cpu_millis: 500,
                        memory_bytes: 512 * 1_048_576,
                    }),
                },
                WorkloadUsage {
                    name: "batch".into(),
                    replicas: 1,
                    requests: None,
                },
                WorkloadUsage {
                    name: "idle".into(),
                    replicas: 0,
                    requests: None,
                },
            ],
            resource_types: BTreeMap::from([
                ("aws:s3/bucket:Bucket".into(), 2),
                ("aws:sqs/queue:Queue".into(), 1),
            ]),
        }
    }

    #[test]
    fn requests_times_replicas_and_resources_by_type_are_priced() {
        let cost = price(&usage(), &table(), None);
        // 1.5 cores × 0.04 + 1.5 GB × 0.005 + 2 buckets × 0.01.
        assert_eq!(cost.cpu_cores, 1.5);
        assert_eq!(cost.memory_gb, 1.5);
        assert_eq!(cost.resources_hourly, 0.02);
        assert_eq!(cost.hourly, 0.0875);
        assert_eq!(cost.currency, "EUR");
        assert_eq!(
            cost.unpriced,
            ["workload/batch", "type/aws:sqs/queue:Queue"],
            "nothing taken as free; a workload with no replica costs nothing"
        );
        // A region's own CPU price; the rest is the table's.
        let north = price(&usage(), &table(), Some("eu-north-1"));
        assert_eq!(north.hourly, 0.0725);
        assert_eq!(
            price(&usage(), &table(), Some("mars")).hourly,
            cost.hourly,
            "a region the table does not price takes its defaults"
        );
    }

    #[test]
    fn a_table_with_negative_prices_or_no_currency_code_is_refused() {
        assert!(table().problems().is_empty());
        let mut bad = table();
        bad.currency = "euro".into();
        bad.cpu_hour = -1.0;
        bad.regions
            .get_mut("eu-north-1")
            .expect("region")
            .memory_gb_hour = Some(f64::NAN);
        let problems = bad.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[2].contains("regions.eu-north-1.memoryGbHour"));
    }

    #[test]
    fn a_plan_doubling_replicas_doubles_their_cost_and_counts_added_resources_in() {
        let before = usage();
        let plan = crate::plan::PlanChanges {
            adds: vec![
                crate::plan::WorkloadChange {
                    name: "media".into(),
                    kind: "aws:s3/bucket:Bucket".into(),
                    fields: vec![],
                },
                crate::plan::WorkloadChange {
                    name: "cron".into(),
                    kind: "deployment".into(),
                    fields: vec![],
                },
            ],
            changes: vec![],
            deletes: vec![crate::plan::WorkloadChange {
                name: "jobs".into(),
                kind: "aws:sqs/queue:Queue".into(),
                fields: vec![],
            }],
        };
        let declared = [
            Declared {
                name: "api",
                replicas: 6,
                requests: None,
            },
            Declared {
                name: "cron",
                replicas: 1,
                requests: None,
            },
        ];
        let after = planned(&before, &declared, &plan, false);
        assert_eq!(after.workloads[0].replicas, 6);
        assert_eq!(after.workloads[0].requests, before.workloads[0].requests);
        assert_eq!(after.workloads[1].requests, None, "not running yet");
        assert_eq!(
            after.resource_types,
            BTreeMap::from([("aws:s3/bucket:Bucket".into(), 3)])
        );
        let e = estimate(&before, &after, &table(), None);
        // api doubles (0.0675 → 0.135) and a third bucket; batch goes (undeclared).
        assert_eq!((e.before_hourly, e.after_hourly), (0.0875, 0.165));
        assert_eq!(e.delta_hourly, 0.0775);
        assert_eq!(e.delta_percent, Some(88.571429));
        assert_eq!(e.unpriced, ["workload/cron"]);
    }

    #[test]
    fn what_a_plan_declares_a_replica_requests_prices_it_and_observed_kubernetes_objects_are_not_types()
     {
        let before = usage();
        let plan = crate::plan::PlanChanges {
            adds: vec![crate::plan::WorkloadChange {
                name: "cron".into(),
                kind: "kubernetes:apps/v1:Deployment".into(),
                fields: vec![],
            }],
            changes: vec![],
            deletes: vec![],
        };
        let quarter = Requests {
            cpu_millis: 250,
            memory_bytes: GB as u64 / 4,
        };
        let declared = [
            Declared {
                name: "api",
                replicas: 3,
                requests: Some(quarter),
            },
            Declared {
                name: "cron",
                replicas: 2,
                requests: Some(quarter),
            },
        ];
        let after = planned(&before, &declared, &plan, true);
        assert_eq!(
            after.workloads[0].requests,
            Some(quarter),
            "the plan's, not the running one's"
        );
        assert_eq!(
            after.workloads[1].requests,
            Some(quarter),
            "priced before it runs"
        );
        assert_eq!(
            after.resource_types, before.resource_types,
            "a workload, not a type"
        );
        let outside = planned(&before, &declared, &plan, false);
        assert_eq!(outside.resource_types["kubernetes:apps/v1:Deployment"], 1);
        assert!(!priced_type("pulumi:providers:aws", false));
        assert!(priced_type("aws:s3/bucket:Bucket", true));
    }

    #[test]
    fn kubernetes_quantities_read_as_numbers() {
        assert_eq!(quantity("250m"), Some(0.25));
        assert_eq!(quantity("2"), Some(2.0));
        assert_eq!(quantity("1.5"), Some(1.5));
        assert_eq!(quantity("256Mi"), Some(268_435_456.0));
        assert_eq!(quantity("1Gi"), Some(GB));
        assert_eq!(quantity("1G"), Some(1e9));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("1k"), Some(1000.0));
        assert_eq!(quantity("lots"), None);
        assert_eq!(quantity("-1"), None);
    }
}
