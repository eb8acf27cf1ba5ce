//! Business rules that decide without an operator: when a reconciliation proposal is accepted
//! on its own, and when the GitOps reconciler applies a difference on its own. Each is written
//! once here and called wherever the decision is taken.

use crate::environments::EnvironmentMode;

/// What decides an auto-accept besides the proposal itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptanceContext {
    /// The environment's mode.
    pub mode: EnvironmentMode,
    /// A production environment.
    pub production: bool,
    /// `AutoAcceptNonDestructiveOutsideProduction`.
    pub option: bool,
    /// The policy allows it.
    pub policy_allows: bool,
    /// The observation that raised it is older than `StalenessMinutes`.
    pub stale: bool,
}

/// Whether a reconciliation proposal is accepted without an operator: it is non-destructive,
/// outside production, the environment's mode is `auto`, `AutoAcceptNonDestructiveOutsideProduction`
/// is on, the policy allows it, and the observation it comes from is fresh.
pub fn auto_accept(destructive: bool, cx: AcceptanceContext) -> bool {
    !destructive
        && !cx.production
        && cx.mode == EnvironmentMode::Auto
        && cx.option
        && cx.policy_allows
        && !cx.stale
}

/// Whether the GitOps reconciler applies a re-planned difference itself (through a
/// provisioning run) instead of proposing it: the plan deletes nothing, the environment is
/// not production, and `AutoApplyNonDestructive` is on. A plan with deletes in production is
/// never applied automatically.
pub fn auto_apply(destructive: bool, production: bool, option: bool) -> bool {
    !destructive && !production && option
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_harmless_proposal_outside_production_is_accepted_alone() {
        let ok = AcceptanceContext {
            mode: EnvironmentMode::Auto,
            production: false,
            option: true,
            policy_allows: true,
            stale: false,
        };
        assert!(auto_accept(false, ok));
        assert!(!auto_accept(true, ok), "destructive");
        let not = |cx: AcceptanceContext| !auto_accept(false, cx);
        assert!(
            not(AcceptanceContext {
                production: true,
                ..ok
            }),
            "production"
        );
        assert!(
            not(AcceptanceContext {
                option: false,
                ..ok
            }),
            "option off"
        );
        assert!(
            not(AcceptanceContext {
                policy_allows: false,
                ..ok
            }),
            "policy denies"
        );
        assert!(
            not(AcceptanceContext { stale: true, ..ok }),
            "a stale observation"
        );
        for mode in [EnvironmentMode::Propose, EnvironmentMode::Observe] {
            assert!(not(AcceptanceContext { mode, ..ok }), "{mode}");
        }
    }

    #[test]
    fn modes_default_by_class_and_only_observe_never_proposes() {
        use crate::EnvironmentClass;
        assert_eq!(
            EnvironmentMode::default_for(EnvironmentClass::Production),
            EnvironmentMode::Propose
        );
        assert_eq!(
            EnvironmentMode::default_for(EnvironmentClass::NonProduction),
            EnvironmentMode::Auto
        );
        assert!(!EnvironmentMode::Observe.proposes());
        assert!(EnvironmentMode::Propose.proposes() && EnvironmentMode::Auto.proposes());
    }

    #[test]
    fn the_reconciler_applies_only_harmless_differences_outside_production() {
        assert!(auto_apply(false, false, true));
        assert!(!auto_apply(true, false, true), "destructive");
        assert!(!auto_apply(false, true, true), "production");
        assert!(!auto_apply(true, true, true), "deletes in production");
        assert!(!auto_apply(false, false, false), "option off");
    }
}
