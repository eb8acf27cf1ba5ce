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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// An environment's labels: what a fleet rollout selects instances by (`region=eu`,
/// `tier=gold`). Keys and values as Kubernetes labels have them: a key is an optional DNS
/// prefix and `/`, then a name of 1–63 characters of `[A-Za-z0-9._-]` beginning and ending
/// with a letter or digit; a value is empty or such a name; at most [`MAX_LABELS`].
pub type Labels = std::collections::BTreeMap<String, String>;

/// The most labels one environment carries.
pub const MAX_LABELS: usize = 32;

/// Why `labels` are not valid, if they are not.
pub fn check_labels(labels: &Labels) -> Result<(), String> {
    fn name(s: &str) -> bool {
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        (1..=63).contains(&s.len())
            && edge(s.chars().next())
            && edge(s.chars().last())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    }
    fn prefix(s: &str) -> bool {
        (1..=253).contains(&s.len())
            && s.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    }
    if labels.len() > MAX_LABELS {
        return Err(format!("at most {MAX_LABELS} labels"));
    }
    for (key, value) in labels {
        let key_ok = match key.split_once('/') {
            Some((p, n)) => prefix(p) && name(n),
            None => name(key),
        };
        if !key_ok {
            return Err(format!(
                "label key `{key}` must be a name of 1-63 characters of [A-Za-z0-9._-] beginning \
                 and ending with a letter or digit, with an optional DNS prefix and `/`"
            ));
        }
        if !value.is_empty() && !name(value) {
            return Err(format!(
                "label `{key}`'s value `{value}` must be empty or 1-63 characters of \
                 [A-Za-z0-9._-] beginning and ending with a letter or digit"
            ));
        }
    }
    Ok(())
}

/// Whether `labels` carry every key of `selector` with its value (an equality selector, as
/// `kubectl -l a=b,c=d` has it).
pub fn selects(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// An equality selector as `kubectl -l` takes it: `region=eu,tier=gold`.
pub fn parse_selector(text: &str) -> Result<Labels, String> {
    let mut selector = Labels::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("`{pair}` is not `key=value`"));
        };
        selector.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    check_labels(&selector)?;
    Ok(selector)
}

#[cfg(test)]
mod label_tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn labels_are_checked_as_kubernetes_checks_them() {
        for ok in [
            labels(&[("region", "eu-west-1")]),
            labels(&[("app.kubernetes.io/tier", "gold"), ("canary", "")]),
        ] {
            assert_eq!(check_labels(&ok), Ok(()), "{ok:?}");
        }
        for bad in [
            labels(&[("", "x")]),
            labels(&[("-region", "eu")]),
            labels(&[("region", "eu west")]),
            labels(&[("Example.COM/tier", "gold")]),
            labels(&[("region", &"x".repeat(64))]),
        ] {
            assert!(check_labels(&bad).is_err(), "{bad:?}");
        }
        let many: Labels = (0..=MAX_LABELS)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        assert!(check_labels(&many).is_err());
    }

    #[test]
    fn a_selector_selects_labels_that_carry_every_pair() {
        let env = labels(&[("region", "eu"), ("tier", "gold")]);
        assert!(selects(&labels(&[]), &env));
        assert!(selects(&labels(&[("region", "eu")]), &env));
        assert!(!selects(&labels(&[("region", "us")]), &env));
        assert!(!selects(&labels(&[("region", "eu"), ("zone", "a")]), &env));
        assert_eq!(
            parse_selector("region=eu, tier=gold"),
            Ok(labels(&[("region", "eu"), ("tier", "gold")]))
        );
        assert!(parse_selector("region").is_err());
        assert!(parse_selector("region=eu west").is_err());
    }
}
