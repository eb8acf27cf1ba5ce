//! An environment's life: registered `active`, retired once a `decommission` run destroyed what
//! it ran. An ephemeral environment (registered with a `ttl` or an `expiresAt`) is
//! decommissioned at its expiry, warned before it, and can be extended up to its tenant's
//! limit; a production environment is never ephemeral.

use crate::EnvironmentClass;
use chrono::{DateTime, Duration, Utc};

crate::wire::wire_enum!(
    /// Where an environment is in its life.
    EnvironmentState, "environment state" {
        /// Observed, reconciled and provisioned.
        Active => "active",
        /// Decommissioned: what it ran was destroyed; it left the sweep, the reconciler and
        /// the fleet, and refuses new runs. Its record stays.
        Retired => "retired",
        /// Retired by an off-boarding order, after its record was exported
        /// (`models::offboarding`): as retired, and counted as off-boarded by the fleet.
        Offboarded => "offboarded",
    }
);

impl EnvironmentState {
    /// Whether it is retired (off-boarded included): it refuses new runs, observations and
    /// changes.
    pub fn retired(self) -> bool {
        self != EnvironmentState::Active
    }
}

/// How long an environment may be given to live, from now, unless its tenant's limit says
/// otherwise (`PUT /factory/capacity/environment-lifetime`).
pub const DEFAULT_MAX_TTL: Duration = Duration::days(30);

/// The shortest time to live: less leaves no time to provision before the decommission.
pub const MIN_TTL: Duration = Duration::seconds(10);

/// How long before its expiry an environment is warned (`EnvironmentExpiring`), at most: an
/// environment given less than twice this is warned halfway through its life.
pub const WARN_BEFORE: Duration = Duration::hours(1);

/// A duration as an operator writes it: `20s`, `90m`, `72h`, `7d`, or sums such as `1h30m`.
pub fn parse_ttl(text: &str) -> Option<Duration> {
    let (mut total, mut number) = (Duration::zero(), String::new());
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: i64 = number.parse().ok()?;
        number.clear();
        total += match c {
            'd' => Duration::try_days(n)?,
            'h' => Duration::try_hours(n)?,
            'm' => Duration::try_minutes(n)?,
            's' => Duration::try_seconds(n)?,
            _ => return None,
        };
    }
    (number.is_empty() && !text.trim().is_empty()).then_some(total)
}

/// What an operator asked for: a time to live from now, or an expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime<'a> {
    Ttl(&'a str),
    ExpiresAt(DateTime<Utc>),
}

impl<'a> Lifetime<'a> {
    /// The one of `ttl` and `expires_at` given; an error when both are.
    pub fn of(
        ttl: Option<&'a str>,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<Option<Self>, String> {
        match (ttl, expires_at) {
            (Some(_), Some(_)) => Err("give either ttl or expiresAt, not both".into()),
            (Some(t), None) => Ok(Some(Self::Ttl(t))),
            (None, Some(at)) => Ok(Some(Self::ExpiresAt(at))),
            (None, None) => Ok(None),
        }
    }

    /// The expiry this asks for at `now`, within `max_ttl` of it, or why not.
    pub fn expiry(self, now: DateTime<Utc>, max_ttl: Duration) -> Result<DateTime<Utc>, String> {
        let at = match self {
            Self::Ttl(text) => {
                let ttl = parse_ttl(text).ok_or_else(|| {
                    format!("ttl `{text}` is not a duration such as `20s`, `72h` or `7d`")
                })?;
                now.checked_add_signed(ttl)
                    .ok_or_else(|| format!("ttl `{text}` is too long"))?
            }
            Self::ExpiresAt(at) => at,
        };
        if at - now < MIN_TTL {
            return Err(format!(
                "the expiry must be at least {}s away",
                MIN_TTL.num_seconds()
            ));
        }
        if at - now > max_ttl {
            return Err(format!(
                "the expiry must be within {} of now (the tenant's limit)",
                text_of(max_ttl)
            ));
        }
        Ok(at)
    }
}

/// Why an environment of `class` cannot be given a lifetime, if it cannot.
pub fn ephemeral_refused(class: EnvironmentClass) -> Option<String> {
    (class == EnvironmentClass::Production).then(|| {
        "a production environment cannot be ephemeral: it is decommissioned only by an \
         operator's decommission run"
            .into()
    })
}

/// When an environment living from `since` until `expires_at` is warned: [`WARN_BEFORE`] its
/// expiry, or halfway through a shorter life.
pub fn warn_at(since: DateTime<Utc>, expires_at: DateTime<Utc>) -> DateTime<Utc> {
    let half = (expires_at - since) / 2;
    expires_at - half.min(WARN_BEFORE).max(Duration::zero())
}

/// `72h`, `30s`, `7d`: a duration as [`parse_ttl`] reads it, in its largest whole unit.
pub fn text_of(d: Duration) -> String {
    let s = d.num_seconds();
    match s {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// After a decommission at expiry failed, how long before it is tried again on its own (an
/// operator's decommission tries at once).
pub const RETRY_DECOMMISSION: Duration = Duration::hours(1);

/// An environment's life as its lifetime workflow reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifeRow {
    pub state: EnvironmentState,
    pub expires_at: Option<DateTime<Utc>>,
    /// The expiry it was warned of.
    pub warned_for: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// What an environment's lifetime does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing more: it is retired, or not ephemeral and no decommission is asked for.
    Done,
    /// Wait until then (or until told of a change).
    WaitUntil(DateTime<Utc>),
    /// Warn that it expires at this time.
    Warn(DateTime<Utc>),
    /// Decommission it now.
    Decommission,
}

/// What the lifetime of `life` does at `now`: `asked`, an operator asked for the
/// decommission; `retry_at`, when a decommission that failed at expiry is tried again.
pub fn next(
    life: &LifeRow,
    asked: bool,
    retry_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Next {
    if life.state.retired() {
        return Next::Done;
    }
    if asked {
        return Next::Decommission;
    }
    let Some(expires_at) = life.expires_at else {
        return Next::Done;
    };
    if now >= expires_at {
        return match retry_at {
            Some(at) if now < at => Next::WaitUntil(at),
            _ => Next::Decommission,
        };
    }
    if life.warned_for == Some(expires_at) {
        return Next::WaitUntil(expires_at);
    }
    let warn = warn_at(life.created_at, expires_at);
    if now >= warn {
        Next::Warn(expires_at)
    } else {
        Next::WaitUntil(warn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).expect("time")
    }

    #[test]
    fn a_ttl_reads_as_operators_write_it() {
        assert_eq!(parse_ttl("20s"), Some(Duration::seconds(20)));
        assert_eq!(parse_ttl("72h"), Some(Duration::hours(72)));
        assert_eq!(parse_ttl("7d"), Some(Duration::days(7)));
        assert_eq!(parse_ttl("1h30m"), Some(Duration::minutes(90)));
        for bad in ["", "20", "h", "20x", "-5s", "99999999999999999d"] {
            assert_eq!(parse_ttl(bad), None, "{bad}");
        }
        for d in [
            Duration::seconds(20),
            Duration::hours(72),
            Duration::days(30),
        ] {
            assert_eq!(parse_ttl(&text_of(d)), Some(d));
        }
    }

    #[test]
    fn an_expiry_is_one_of_ttl_or_expires_at_within_the_limit() {
        let max = Duration::hours(72);
        assert!(Lifetime::of(Some("1h"), Some(t(60))).is_err());
        assert_eq!(Lifetime::of(None, None), Ok(None));
        let ttl = Lifetime::of(Some("20s"), None).unwrap().unwrap();
        assert_eq!(ttl.expiry(t(0), max), Ok(t(20)));
        let at = Lifetime::of(None, Some(t(3600))).unwrap().unwrap();
        assert_eq!(at.expiry(t(0), max), Ok(t(3600)));
        let past = Lifetime::ExpiresAt(t(-1)).expiry(t(0), max).unwrap_err();
        assert!(past.contains("at least 10s"), "{past}");
        let far = Lifetime::Ttl("73h").expiry(t(0), max).unwrap_err();
        assert!(far.contains("within 3d"), "{far}");
        let bad = Lifetime::Ttl("soon").expiry(t(0), max).unwrap_err();
        assert!(bad.contains("`soon`"), "{bad}");
    }

    #[test]
    fn production_is_never_ephemeral() {
        assert!(ephemeral_refused(EnvironmentClass::Production).is_some());
        assert!(ephemeral_refused(EnvironmentClass::NonProduction).is_none());
    }

    #[test]
    fn a_lifetime_warns_then_decommissions_once_and_ends_when_retired() {
        let life = |expires: Option<i64>, warned: Option<i64>| LifeRow {
            state: EnvironmentState::Active,
            expires_at: expires.map(t),
            warned_for: warned.map(t),
            created_at: t(0),
        };
        assert_eq!(
            next(&life(Some(20), None), false, None, t(1)),
            Next::WaitUntil(t(10))
        );
        assert_eq!(
            next(&life(Some(20), None), false, None, t(10)),
            Next::Warn(t(20))
        );
        assert_eq!(
            next(&life(Some(20), Some(20)), false, None, t(11)),
            Next::WaitUntil(t(20))
        );
        assert_eq!(
            next(&life(Some(20), Some(20)), false, None, t(20)),
            Next::Decommission
        );
        // Extended after the warning: warned again before the new expiry.
        assert_eq!(
            next(&life(Some(60), Some(20)), false, None, t(25)),
            Next::WaitUntil(t(30))
        );
        // A failed decommission waits for its retry, or for an operator.
        assert_eq!(
            next(&life(Some(20), Some(20)), false, Some(t(3600)), t(30)),
            Next::WaitUntil(t(3600))
        );
        assert_eq!(
            next(&life(Some(20), Some(20)), true, Some(t(3600)), t(30)),
            Next::Decommission
        );
        // Not ephemeral: only an operator's decommission.
        assert_eq!(next(&life(None, None), false, None, t(30)), Next::Done);
        assert_eq!(
            next(&life(None, None), true, None, t(30)),
            Next::Decommission
        );
        let retired = LifeRow {
            state: EnvironmentState::Retired,
            ..life(Some(20), None)
        };
        assert_eq!(next(&retired, true, None, t(30)), Next::Done);
    }

    #[test]
    fn a_short_life_is_warned_halfway_and_a_long_one_an_hour_before() {
        assert_eq!(warn_at(t(0), t(20)), t(10));
        assert_eq!(warn_at(t(0), t(72 * 3600)), t(71 * 3600));
        assert_eq!(warn_at(t(10), t(5)), t(5), "already past: at once");
    }
}
