//! Change windows: when the product may change an environment. An `allow` window opens at each
//! occurrence of its schedule for its duration; a `deny` window closes it for that long. With no
//! window, changes may happen at any time; with allow windows, only inside one of them; a deny
//! window wins over an allow window. Observation and planning go on at any time: only applies
//! wait (and with them auto-accepted reconciliations and the GitOps reconciler's auto-applies,
//! which apply through runs), until an Operator breaks glass with a reason.
//!
//! Schedules are cron patterns in the window's IANA time zone: five fields
//! (`minute hour day-of-month month day-of-week`), or six with seconds first. Durations are
//! `<n>h`, `<n>m` or `<n>s`, combinable (`1h30m`), as Argo CD's sync windows write them.

use chrono::{DateTime, Duration, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use serde::{Deserialize, Serialize};

crate::wire::wire_enum!(
    /// What a window does while it is open.
    WindowKind, "window kind" {
        /// Changes may happen only inside an allow window (when there is any).
        Allow => "allow",
        /// No change happens inside a deny window.
        Deny => "deny",
    }
);

/// A recorded window of an environment (or, without one, a tenant default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeWindow {
    pub window_id: String,
    pub tenant_id: String,
    /// None: every environment of the tenant.
    pub environment_id: Option<String>,
    #[serde(flatten)]
    pub spec: WindowSpec,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// What a window is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowSpec {
    pub kind: WindowKind,
    /// A cron pattern (`0 22 * * 5`: Fridays at 22:00), in `timeZone`.
    pub schedule: String,
    /// How long each occurrence lasts: `2h`, `30m`, `1h30m`, `10s`.
    pub duration: String,
    /// An IANA time zone (`Europe/Berlin`); `UTC` when absent.
    #[serde(default = "utc")]
    pub time_zone: String,
    /// Why the window exists (a release freeze, business hours).
    #[serde(default)]
    pub reason: String,
}

fn utc() -> String {
    "UTC".to_owned()
}

/// Whether changes may happen now, and if not which window holds them and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "gate")]
pub enum Gate {
    Open,
    Closed {
        /// The window that holds changes: the deny window in force, or the allow window that
        /// opens next.
        window_id: String,
        /// When changes may happen again; none when no window ever opens.
        opens_at: Option<DateTime<Utc>>,
    },
}

/// A window, parsed.
struct Parsed<'a> {
    window: &'a ChangeWindow,
    cron: Cron,
    tz: chrono_tz::Tz,
    duration: Duration,
}

impl WindowSpec {
    /// What is wrong with the window, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Err(e) = parse_cron(&self.schedule) {
            out.push(format!(
                "schedule `{}` is not a cron pattern: {e}",
                self.schedule
            ));
        }
        match parse_duration(&self.duration) {
            Some(d) if d > Duration::zero() => {}
            _ => out.push(format!(
                "duration `{}` is not a duration such as `2h`, `30m` or `1h30m`",
                self.duration
            )),
        }
        if self.time_zone.parse::<chrono_tz::Tz>().is_err() {
            out.push(format!(
                "timeZone `{}` is not an IANA time zone",
                self.time_zone
            ));
        }
        out
    }
}

fn parse_cron(schedule: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .build()
        .parse(schedule)
}

/// `1h30m` → 90 minutes; none when it does not read.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::zero();
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: i64 = number.parse().ok()?;
        number.clear();
        total += match c {
            'h' => Duration::hours(n),
            'm' => Duration::minutes(n),
            's' => Duration::seconds(n),
            _ => return None,
        };
    }
    number
        .is_empty()
        .then_some(total)
        .filter(|_| !text.trim().is_empty())
}

impl<'a> Parsed<'a> {
    fn of(window: &'a ChangeWindow) -> Option<Self> {
        Some(Self {
            window,
            cron: parse_cron(&window.spec.schedule).ok()?,
            tz: window.spec.time_zone.parse().ok()?,
            duration: parse_duration(&window.spec.duration)?,
        })
    }

    /// The end of the occurrence `at` is inside, if it is inside one.
    fn open_until(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = at.with_timezone(&self.tz);
        let start = self.cron.find_previous_occurrence(&local, true).ok()?;
        let end = start.with_timezone(&Utc) + self.duration;
        (at < end).then_some(end)
    }

    /// The next occurrence's start after `at`.
    fn next_start(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = at.with_timezone(&self.tz);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        Some(next.with_timezone(&Utc))
    }
}

/// How far ahead an opening is looked for before the gate says it never opens.
const LOOKAHEAD_STEPS: usize = 64;

/// The gate at `now` of an environment with `windows` (its own and its tenant's defaults). A
/// window that does not parse (it was validated when created) is ignored.
pub fn gate(windows: &[ChangeWindow], now: DateTime<Utc>) -> Gate {
    let parsed: Vec<Parsed<'_>> = windows.iter().filter_map(Parsed::of).collect();
    let (allows, denies): (Vec<&Parsed<'_>>, Vec<&Parsed<'_>>) = parsed
        .iter()
        .partition(|p| p.window.spec.kind == WindowKind::Allow);
    let closed_by = |at: DateTime<Utc>| -> Option<(&str, Option<DateTime<Utc>>)> {
        // A deny window in force holds until the last of them in force ends.
        let denying: Vec<(&str, DateTime<Utc>)> = denies
            .iter()
            .filter_map(|d| Some((d.window.window_id.as_str(), d.open_until(at)?)))
            .collect();
        if let Some((id, _)) = denying.first() {
            let until = denying.iter().map(|(_, end)| *end).max();
            return Some((id, until));
        }
        if allows.is_empty() || allows.iter().any(|a| a.open_until(at).is_some()) {
            return None;
        }
        let next = allows
            .iter()
            .filter_map(|a| Some((a.window.window_id.as_str(), a.next_start(at)?)))
            .min_by_key(|(_, start)| *start);
        Some(match next {
            Some((id, start)) => (id, Some(start)),
            None => (allows[0].window.window_id.as_str(), None),
        })
    };
    let Some((window_id, mut opens)) = closed_by(now) else {
        return Gate::Open;
    };
    // Where one window ends another may hold: walk to the first moment nothing does.
    for _ in 0..LOOKAHEAD_STEPS {
        let Some(at) = opens else { break };
        match closed_by(at) {
            None => break,
            Some((_, later)) => opens = later.filter(|l| *l > at),
        }
    }
    if let Some(at) = opens
        && closed_by(at).is_some()
    {
        opens = None;
    }
    Gate::Closed {
        window_id: window_id.to_owned(),
        opens_at: opens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn window(
        id: &str,
        kind: WindowKind,
        schedule: &str,
        duration: &str,
        tz: &str,
    ) -> ChangeWindow {
        ChangeWindow {
            window_id: id.into(),
            tenant_id: "acme".into(),
            environment_id: None,
            spec: WindowSpec {
                kind,
                schedule: schedule.into(),
                duration: duration.into(),
                time_zone: tz.into(),
                reason: String::new(),
            },
            created_by: "alice".into(),
            created_at: Utc::now(),
        }
    }

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn no_window_is_always_open() {
        assert_eq!(gate(&[], at(2026, 12, 4, 22, 30)), Gate::Open);
    }

    #[test]
    fn a_friday_night_freeze_holds_until_it_ends() {
        // Fridays 22:00 for 8 hours, Berlin time (UTC+1 in December).
        let freeze = [window(
            "w1",
            WindowKind::Deny,
            "0 22 * * 5",
            "8h",
            "Europe/Berlin",
        )];
        assert_eq!(
            gate(&freeze, at(2026, 12, 4, 20, 59)),
            Gate::Open,
            "21:59 in Berlin"
        );
        assert_eq!(
            gate(&freeze, at(2026, 12, 4, 21, 0)),
            Gate::Closed {
                window_id: "w1".into(),
                opens_at: Some(at(2026, 12, 5, 5, 0))
            }
        );
        assert_eq!(
            gate(&freeze, at(2026, 12, 5, 5, 0)),
            Gate::Open,
            "over at 06:00 Berlin"
        );
    }

    #[test]
    fn with_allow_windows_changes_wait_for_the_next_one_and_a_deny_wins() {
        // Weekdays 09:00–17:00 UTC.
        let hours = window("biz", WindowKind::Allow, "0 9 * * 1-5", "8h", "UTC");
        let windows = [hours.clone()];
        assert_eq!(
            gate(&windows, at(2026, 12, 1, 10, 0)),
            Gate::Open,
            "a Tuesday"
        );
        assert_eq!(
            gate(&windows, at(2026, 12, 4, 18, 0)),
            Gate::Closed {
                window_id: "biz".into(),
                opens_at: Some(at(2026, 12, 7, 9, 0))
            },
            "Friday evening waits for Monday"
        );
        // A deny on Monday morning pushes the opening to its end.
        let windows = [
            hours,
            window("freeze", WindowKind::Deny, "0 9 7 12 *", "2h", "UTC"),
        ];
        assert_eq!(
            gate(&windows, at(2026, 12, 4, 18, 0)),
            Gate::Closed {
                window_id: "biz".into(),
                opens_at: Some(at(2026, 12, 7, 11, 0))
            }
        );
        assert_eq!(
            gate(&windows, at(2026, 12, 7, 10, 0)),
            Gate::Closed {
                window_id: "freeze".into(),
                opens_at: Some(at(2026, 12, 7, 11, 0))
            }
        );
    }

    #[test]
    fn overlapping_denies_hold_until_the_last_ends_and_seconds_are_allowed() {
        let windows = [
            window("a", WindowKind::Deny, "0 0 * * *", "2h", "UTC"),
            window("b", WindowKind::Deny, "0 1 * * *", "3h", "UTC"),
        ];
        assert_eq!(
            gate(&windows, at(2026, 12, 1, 0, 30)),
            Gate::Closed {
                window_id: "a".into(),
                opens_at: Some(at(2026, 12, 1, 4, 0))
            }
        );
        let short = [window(
            "s",
            WindowKind::Deny,
            "30 15 10 1 12 *",
            "4s",
            "UTC",
        )];
        let start = Utc.with_ymd_and_hms(2026, 12, 1, 10, 15, 31).unwrap();
        assert_eq!(
            gate(&short, start),
            Gate::Closed {
                window_id: "s".into(),
                opens_at: Some(Utc.with_ymd_and_hms(2026, 12, 1, 10, 15, 34).unwrap())
            }
        );
    }

    #[test]
    fn an_always_denying_window_never_opens() {
        let windows = [window("x", WindowKind::Deny, "* * * * *", "2m", "UTC")];
        assert_eq!(
            gate(&windows, at(2026, 12, 1, 10, 0)),
            Gate::Closed {
                window_id: "x".into(),
                opens_at: None
            }
        );
    }

    #[test]
    fn bad_windows_are_problems() {
        let w = window(
            "w",
            WindowKind::Deny,
            "every friday",
            "8 hours",
            "Mars/Olympus",
        );
        assert_eq!(w.spec.problems().len(), 3, "{:?}", w.spec.problems());
        assert!(
            window("w", WindowKind::Deny, "0 22 * * 5", "1h30m", "UTC")
                .spec
                .problems()
                .is_empty()
        );
        assert_eq!(parse_duration("1h30m"), Some(Duration::minutes(90)));
        assert_eq!(parse_duration("90"), None, "a unit is required");
        assert_eq!(parse_duration(""), None);
    }
}
