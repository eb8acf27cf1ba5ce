//! Business rules that decide without an operator: when a reconciliation proposal is accepted
//! on its own, and when the GitOps reconciler applies a difference on its own. Each is written
//! once here and called wherever the decision is taken.

/// Whether a reconciliation proposal is accepted without an operator: it is non-destructive,
/// outside production, `AutoAcceptNonDestructiveOutsideProduction` is on, and the policy
/// allows it.
pub fn auto_accept(destructive: bool, production: bool, option: bool, policy_allows: bool) -> bool {
    !destructive && !production && option && policy_allows
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
        assert!(auto_accept(false, false, true, true));
        assert!(!auto_accept(true, false, true, true), "destructive");
        assert!(!auto_accept(false, true, true, true), "production");
        assert!(!auto_accept(false, false, false, true), "option off");
        assert!(!auto_accept(false, false, true, false), "policy denies");
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
