//! Fleet rollouts: moving many instances to a release in waves that halt on their own. The
//! rules, pure: how instances are planned into waves, when an instance has converged (as
//! *observed* after its apply, never as reported by the run alone), and when a wave is complete
//! or a guard halts it.
//!
//! Waves: every non-production instance before any production one; in each class a canary of
//! `canary` instances first, then the `steps` (a percentage of the class's instances or a
//! count) until none is left. A production wave needs an approval, verified like any
//! production apply.

use crate::ProvisioningState;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One step after the canary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum WaveStep {
    /// This share of the class's instances (1–100).
    Percent(u8),
    /// This many instances.
    Count(usize),
}

/// How instances are cut into waves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveStrategy {
    /// The first wave of each class (at least one instance).
    #[serde(default = "one")]
    pub canary: usize,
    /// The waves after it; the last one repeats until every instance is in a wave.
    #[serde(default = "default_steps")]
    pub steps: Vec<WaveStep>,
}

fn one() -> usize {
    1
}

fn default_steps() -> Vec<WaveStep> {
    vec![
        WaveStep::Percent(25),
        WaveStep::Percent(50),
        WaveStep::Percent(100),
    ]
}

impl Default for WaveStrategy {
    fn default() -> Self {
        Self {
            canary: one(),
            steps: default_steps(),
        }
    }
}

/// An instance a rollout moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub environment_id: String,
    pub production: bool,
}

/// One wave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Wave {
    /// 0-based.
    pub index: usize,
    pub environment_ids: Vec<String>,
    /// A production wave: it needs an approval before its runs apply.
    pub production: bool,
}

/// Cuts `members` into waves: non-production first, each class canary then steps; within a
/// class in environment-id order (the plan is the same however the selection was listed).
pub fn plan_waves(members: &[Member], strategy: &WaveStrategy) -> Vec<Wave> {
    let mut waves = Vec::new();
    for production in [false, true] {
        let mut ids: Vec<&str> = members
            .iter()
            .filter(|m| m.production == production)
            .map(|m| m.environment_id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let total = ids.len();
        let mut rest = ids.as_slice();
        let mut sizes = std::iter::once(strategy.canary.max(1)).chain(
            strategy
                .steps
                .iter()
                .chain(std::iter::repeat(
                    strategy.steps.last().unwrap_or(&WaveStep::Percent(100)),
                ))
                .map(|s| match *s {
                    WaveStep::Count(n) => n.max(1),
                    // At least one instance per wave, rounded up.
                    WaveStep::Percent(p) => {
                        (total * usize::from(p.clamp(1, 100))).div_ceil(100).max(1)
                    }
                }),
        );
        while !rest.is_empty() {
            let size = sizes.next().unwrap_or(rest.len()).min(rest.len());
            let (wave, after) = rest.split_at(size);
            waves.push(Wave {
                index: waves.len(),
                environment_ids: wave.iter().map(|s| s.to_string()).collect(),
                production,
            });
            rest = after;
        }
    }
    waves
}

/// What an instance's run and its observation after the apply show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceProgress {
    pub environment_id: String,
    /// The state of the instance's run in this wave.
    pub run_state: Option<ProvisioningState>,
    /// When the run applied.
    pub applied_at: Option<DateTime<Utc>>,
    /// The last observation: when, and each workload's version, readiness and health.
    pub observed_at: Option<DateTime<Utc>>,
    pub observed: BTreeMap<String, ObservedVersion>,
}

/// Where an instance stands for its rollout: its run's state and whether it has converged
/// ([`converged`]). What the workflow keeps, small: a wave of hundreds of instances is read
/// every few seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing {
    pub environment_id: String,
    pub run_state: Option<ProvisioningState>,
    pub converged: bool,
}

impl InstanceProgress {
    /// Where it stands on `target`.
    pub fn standing(&self, target: &BTreeMap<String, String>) -> Standing {
        Standing {
            environment_id: self.environment_id.clone(),
            run_state: self.run_state,
            converged: converged(target, self),
        }
    }
}

/// A workload as observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedVersion {
    pub version: String,
    pub ready: bool,
    pub healthy: bool,
}

/// Whether an instance has converged on `target` (workload → version): its run applied, and an
/// observation *taken after the apply* shows every target workload at its version with every
/// replica ready and healthy. A run that says `Applied` is not enough: an old "Healthy" (the
/// observation from before the apply) must not complete a wave (argo-cd #29410).
pub fn converged(target: &BTreeMap<String, String>, p: &InstanceProgress) -> bool {
    let (Some(ProvisioningState::Applied), Some(applied), Some(observed)) =
        (p.run_state, p.applied_at, p.observed_at)
    else {
        return false;
    };
    observed > applied
        && target.iter().all(|(workload, version)| {
            p.observed
                .get(workload)
                .is_some_and(|o| &o.version == version && o.ready && o.healthy)
        })
}

/// What stops a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", tag = "guard")]
pub enum Guard {
    /// More runs of the wave failed than its budget allows.
    FailureBudget { failed: Vec<String>, budget: usize },
    /// Instances that did not converge within the deadline.
    NotConverged { environment_ids: Vec<String> },
    /// An SLO breach was reported during the wave or its bake.
    SloBreach { reason: String },
    /// The rollout's SLO query failed [`SLO_ERRORS_TOLERATED`] times in a row: a guard that
    /// cannot be read does not let a wave pass.
    SloUnavailable { reason: String },
}

impl Guard {
    /// The instances involved.
    pub fn instances(&self) -> Vec<String> {
        match self {
            Self::FailureBudget { failed, .. } => failed.clone(),
            Self::NotConverged { environment_ids } => environment_ids.clone(),
            Self::SloBreach { .. } | Self::SloUnavailable { .. } => Vec::new(),
        }
    }

    /// One line for an incident or an event.
    pub fn describe(&self) -> String {
        match self {
            Self::FailureBudget { failed, budget } => format!(
                "{} runs failed ({}), more than the budget of {budget}",
                failed.len(),
                failed.join(", ")
            ),
            Self::NotConverged { environment_ids } => format!(
                "not converged before the deadline: {}",
                environment_ids.join(", ")
            ),
            Self::SloBreach { reason } => format!("SLO breach: {reason}"),
            Self::SloUnavailable { reason } => format!("SLO query unavailable: {reason}"),
        }
    }
}

/// Where a wave stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaveVerdict {
    /// Every instance converged: the bake may start (or, after it, the next wave).
    Converged,
    /// Still converging; look again.
    Waiting,
    /// A guard tripped.
    Halt(Guard),
}

/// The verdict on a wave whose runs started at `started`, at `now`, from where its instances
/// not converged before stand (`progress`): a breach halts at once; failed runs beyond
/// `failure_budget` halt; every instance converged is done; past `deadline` after `started`,
/// the instances not converged halt it.
pub fn wave_verdict(
    progress: &[Standing],
    failure_budget: usize,
    breach: Option<&str>,
    (started, deadline, now): (DateTime<Utc>, Duration, DateTime<Utc>),
) -> WaveVerdict {
    if let Some(reason) = breach {
        return WaveVerdict::Halt(Guard::SloBreach {
            reason: reason.to_owned(),
        });
    }
    let failed: Vec<String> = progress
        .iter()
        .filter(|p| {
            matches!(
                p.run_state,
                Some(
                    ProvisioningState::Failed
                        | ProvisioningState::Rejected
                        | ProvisioningState::Cancelled
                )
            )
        })
        .map(|p| p.environment_id.clone())
        .collect();
    if failed.len() > failure_budget {
        return WaveVerdict::Halt(Guard::FailureBudget {
            failed,
            budget: failure_budget,
        });
    }
    let pending: Vec<String> = progress
        .iter()
        .filter(|p| !failed.contains(&p.environment_id) && !p.converged)
        .map(|p| p.environment_id.clone())
        .collect();
    if pending.is_empty() {
        return WaveVerdict::Converged;
    }
    if now - started >= deadline {
        return WaveVerdict::Halt(Guard::NotConverged {
            environment_ids: pending,
        });
    }
    WaveVerdict::Waiting
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(non_production: usize, production: usize) -> Vec<Member> {
        let mut out: Vec<Member> = (0..non_production)
            .map(|i| Member {
                environment_id: format!("dev-{i:02}"),
                production: false,
            })
            .collect();
        out.extend((0..production).map(|i| Member {
            environment_id: format!("prod-{i:02}"),
            production: true,
        }));
        out.reverse(); // the plan does not depend on the order given
        out
    }

    fn sizes(waves: &[Wave]) -> Vec<(usize, bool)> {
        waves
            .iter()
            .map(|w| (w.environment_ids.len(), w.production))
            .collect()
    }

    #[test]
    fn a_canary_then_percentages_and_production_last() {
        let waves = plan_waves(&members(20, 5), &WaveStrategy::default());
        // 20 non-production: 1, 25 % = 5, 50 % = 10, then the 4 left; 5 production: 1, 2, 2.
        assert_eq!(
            sizes(&waves),
            [
                (1, false),
                (5, false),
                (10, false),
                (4, false),
                (1, true),
                (2, true),
                (2, true)
            ]
        );
        assert_eq!(
            waves[0].environment_ids,
            ["dev-00"],
            "the canary, in id order"
        );
        assert_eq!(waves[4].environment_ids, ["prod-00"]);
        let indices: Vec<usize> = waves.iter().map(|w| w.index).collect();
        assert_eq!(indices, (0..7).collect::<Vec<_>>());
        let all: usize = waves.iter().map(|w| w.environment_ids.len()).sum();
        assert_eq!(all, 25, "every instance once");
    }

    #[test]
    fn counts_repeat_the_last_step_and_an_empty_class_has_no_wave() {
        let strategy = WaveStrategy {
            canary: 2,
            steps: vec![WaveStep::Count(3)],
        };
        let waves = plan_waves(&members(10, 0), &strategy);
        assert_eq!(
            sizes(&waves),
            [(2, false), (3, false), (3, false), (2, false)]
        );
        assert!(plan_waves(&[], &strategy).is_empty());
    }

    fn progress(state: ProvisioningState, observed_after: bool, version: &str) -> InstanceProgress {
        let applied = Utc::now();
        InstanceProgress {
            environment_id: "dev-00".into(),
            run_state: Some(state),
            applied_at: Some(applied),
            observed_at: Some(if observed_after {
                applied + Duration::seconds(1)
            } else {
                applied - Duration::seconds(1)
            }),
            observed: [(
                "api".to_owned(),
                ObservedVersion {
                    version: version.into(),
                    ready: true,
                    healthy: true,
                },
            )]
            .into(),
        }
    }

    fn target() -> BTreeMap<String, String> {
        [("api".to_owned(), "2.0.0".to_owned())].into()
    }

    fn stand(progress: &[&InstanceProgress]) -> Vec<Standing> {
        progress.iter().map(|p| p.standing(&target())).collect()
    }

    #[test]
    fn only_an_observation_after_the_apply_showing_the_target_converges() {
        assert!(converged(
            &target(),
            &progress(ProvisioningState::Applied, true, "2.0.0")
        ));
        assert!(
            !converged(
                &target(),
                &progress(ProvisioningState::Applied, false, "2.0.0")
            ),
            "an observation from before the apply says nothing (argo-cd #29410)"
        );
        assert!(
            !converged(
                &target(),
                &progress(ProvisioningState::Applied, true, "1.0.0")
            ),
            "the old version still runs"
        );
        assert!(!converged(
            &target(),
            &progress(ProvisioningState::Applying, true, "2.0.0")
        ));
        let mut not_ready = progress(ProvisioningState::Applied, true, "2.0.0");
        not_ready.observed.get_mut("api").unwrap().ready = false;
        assert!(!converged(&target(), &not_ready));
    }

    #[test]
    fn an_slo_query_names_the_wave_and_breaches_above_its_threshold() {
        let slo = SloQuery {
            query: r#"max(error_ratio{environment=~"$environments"})"#.into(),
            threshold: 0.05,
        };
        assert_eq!(
            slo.for_wave(&["shop-00".into(), "eu.shop-01".into()]),
            r#"max(error_ratio{environment=~"shop-00|eu\\.shop-01"})"#
        );
        let sample = |env: &str, value: f64| SloSample {
            labels: [("environment".to_owned(), env.to_owned())].into(),
            value,
        };
        assert_eq!(slo_breach(&slo, &[]), None, "no series yet");
        assert_eq!(
            slo_breach(
                &slo,
                &[sample("shop-00", 0.01), sample("shop-01", f64::NAN)]
            ),
            None
        );
        let breach = slo_breach(
            &slo,
            &[
                sample("shop-00", 0.07),
                sample("shop-01", 0.2),
                sample("shop-02", 0.01),
            ],
        )
        .expect("a breach");
        assert!(
            breach.contains("0.2 above 0.05") && breach.contains(r#"environment="shop-01""#),
            "{breach}"
        );
        assert!(
            SloQuery {
                query: " ".into(),
                threshold: 1.0
            }
            .check()
            .is_err()
        );
        assert!(
            SloQuery {
                query: "up".into(),
                threshold: f64::NAN
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn a_wave_halts_on_a_breach_a_spent_budget_or_its_deadline() {
        let now = Utc::now();
        let ok = progress(ProvisioningState::Applied, true, "2.0.0");
        let lagging = InstanceProgress {
            environment_id: "dev-01".into(),
            ..progress(ProvisioningState::Applied, true, "1.0.0")
        };
        let failed = InstanceProgress {
            environment_id: "dev-02".into(),
            ..progress(ProvisioningState::Failed, false, "1.0.0")
        };
        let clock = (now - Duration::minutes(1), Duration::minutes(10), now);
        assert_eq!(
            wave_verdict(&stand(&[&ok]), 0, None, clock),
            WaveVerdict::Converged
        );
        assert_eq!(
            wave_verdict(&stand(&[&ok, &lagging]), 0, None, clock),
            WaveVerdict::Waiting
        );
        let late = (now - Duration::minutes(11), Duration::minutes(10), now);
        assert_eq!(
            wave_verdict(&stand(&[&ok, &lagging]), 0, None, late),
            WaveVerdict::Halt(Guard::NotConverged {
                environment_ids: vec!["dev-01".into()]
            })
        );
        assert_eq!(
            wave_verdict(&stand(&[&ok, &failed]), 0, None, clock),
            WaveVerdict::Halt(Guard::FailureBudget {
                failed: vec!["dev-02".into()],
                budget: 0
            })
        );
        assert_eq!(
            wave_verdict(&stand(&[&ok, &failed]), 1, None, clock),
            WaveVerdict::Converged,
            "within its budget the failed instance does not hold the wave"
        );
        assert!(matches!(
            wave_verdict(&stand(&[&ok]), 0, Some("error rate 7 %"), clock),
            WaveVerdict::Halt(Guard::SloBreach { .. })
        ));
    }
}

crate::wire::wire_enum!(
    /// Where a rollout stands.
    RolloutState, "rollout state" {
        /// Moving wave by wave.
        Running => "Running",
        /// A guard tripped: waiting for an operator to resume, skip an instance or abort.
        Halted => "Halted",
        /// Every wave complete.
        Completed => "Completed",
        /// Ended by an operator.
        Aborted => "Aborted",
        /// An operator asked for a rollback: runs back to each instance's previous
        /// specification are under way.
        RollingBack => "RollingBack",
        /// Every started instance was run back to its previous specification.
        RolledBack => "RolledBack",
    }
);

/// Failed SLO queries in a row a wave tolerates (a Prometheus restart, a slow rule) before it
/// halts on [`Guard::SloUnavailable`].
pub const SLO_ERRORS_TOLERATED: u32 = 3;

/// The SLO a rollout is guarded by (the Prometheus SloGuard): the query is evaluated every
/// few seconds while a wave converges and bakes, and any sample above the threshold is a
/// breach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SloQuery {
    /// PromQL. `$environments` stands for the wave's instances as a regular expression
    /// (`shop-00|shop-01`), to be used inside a double-quoted matcher:
    /// `{environment=~"$environments"}`.
    pub query: String,
    /// A sample above this value is a breach.
    pub threshold: f64,
}

impl SloQuery {
    /// The query for a wave of `environment_ids`. Environment ids are `[A-Za-z0-9._-]`: only
    /// `.` means something in a regular expression, escaped as PromQL's string escaping wants.
    pub fn for_wave(&self, environment_ids: &[String]) -> String {
        let alternation = environment_ids
            .iter()
            .map(|id| id.replace('.', r"\\."))
            .collect::<Vec<_>>()
            .join("|");
        self.query.replace("$environments", &alternation)
    }

    /// Why it cannot guard a rollout, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.query.trim().is_empty() {
            return Err("slo.query must be a PromQL expression".into());
        }
        if !self.threshold.is_finite() {
            return Err("slo.threshold must be a finite number".into());
        }
        Ok(())
    }
}

/// One sample of an SLO query's answer: its labels and value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SloSample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The breach in `samples`, if any: the worst sample above the threshold, with its labels.
/// No sample (the series do not exist yet) and NaN are no breach, as Prometheus alerting
/// rules have them.
pub fn slo_breach(slo: &SloQuery, samples: &[SloSample]) -> Option<String> {
    let worst = samples
        .iter()
        .filter(|s| s.value > slo.threshold)
        .max_by(|a, b| a.value.total_cmp(&b.value))?;
    let labels = worst
        .labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect::<Vec<_>>()
        .join(",");
    Some(format!(
        "{} = {} above {} {{{labels}}}",
        slo.query, worst.value, slo.threshold
    ))
}

/// What a rollout moves, fixed when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutInput {
    pub rollout_id: String,
    pub tenant_id: String,
    pub waves: Vec<Wave>,
    /// The target: workload → version. Each instance's new specification is its current one
    /// with these versions (and the release id).
    pub versions: BTreeMap<String, String>,
    pub release_id: Option<String>,
    /// Failed runs a wave tolerates.
    pub failure_budget: usize,
    /// How long an instance may take to converge once its wave started.
    pub converge_deadline_secs: u64,
    /// How long a converged wave bakes before the next one starts.
    pub bake_secs: u64,
    /// The SLO queried while each wave converges and bakes; none: only breaches reported
    /// through the API guard the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloQuery>,
}

/// An instance of a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutInstance {
    pub environment_id: String,
    pub wave: usize,
    /// Its promotion run, once its wave started.
    pub provisioning_run_id: Option<String>,
    /// Skipped by an operator.
    #[serde(default)]
    pub skipped: bool,
    /// Converged as observed.
    #[serde(default)]
    pub converged: bool,
    /// The run back to its previous specification, when the rollout was rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_run_id: Option<String>,
}

/// Why a rollout halted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Halt {
    pub wave: usize,
    pub guard: Guard,
    pub reason: String,
    pub instances: Vec<String>,
    /// The incident it opened.
    pub incident_id: Option<String>,
    pub at: DateTime<Utc>,
}

/// A rollout's live status, as projected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    pub state: RolloutState,
    /// The wave under way (or the last one).
    pub current_wave: usize,
    pub waves_completed: usize,
    pub instances: Vec<RolloutInstance>,
    pub halt: Option<Halt>,
}

impl RolloutStatus {
    /// The instances whose runs have started (and that were not skipped): what an SLO query
    /// watches.
    pub fn moved(&self) -> Vec<String> {
        self.instances
            .iter()
            .filter(|i| i.provisioning_run_id.is_some() && !i.skipped)
            .map(|i| i.environment_id.clone())
            .collect()
    }

    /// Running at its first wave, every instance in its wave.
    pub fn start(waves: &[Wave]) -> Self {
        Self {
            state: RolloutState::Running,
            current_wave: 0,
            waves_completed: 0,
            instances: waves
                .iter()
                .flat_map(|w| {
                    w.environment_ids.iter().map(|id| RolloutInstance {
                        environment_id: id.clone(),
                        wave: w.index,
                        provisioning_run_id: None,
                        skipped: false,
                        converged: false,
                        rollback_run_id: None,
                    })
                })
                .collect(),
            halt: None,
        }
    }
}
