//! What a plan would introduce of the security posture rules (`models::posture::introduced`):
//! the resources it would create or change, judged as they are and as they would be by the
//! rules observations apply (the Kubernetes rules for `kubernetes:` objects, the posture rules
//! written in Rego for every resource), so a policy can deny the plan with the rule as the
//! evidence (`input.plan.posture`).

use crate::Error;
use crate::kubernetes::mapping;
use crate::ports::Policy;
use runtime_cloud_models::posture::{
    self, PlannedResource, PostureInput, StateResource, Violation,
};

/// The rules `planned` would break that its resources do not break already.
pub async fn introduced(
    policy: &dyn Policy,
    (tenant_id, environment_id): (&str, &str),
    planned: &[PlannedResource],
) -> Result<Vec<Violation>, Error> {
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let judge = |resources: Vec<StateResource>| async move {
        if resources.is_empty() {
            return Ok::<_, Error>(Vec::new());
        }
        // No NetworkPolicy count: a plan's objects are not the namespace's.
        let mut found = mapping::posture("", &mapping::planned_objects(&resources), None);
        let input = PostureInput {
            tenant_id: tenant_id.to_owned(),
            environment_id: environment_id.to_owned(),
            resources,
        };
        found.extend(policy.posture(&input).await?);
        Ok(found)
    };
    let before = judge(planned.iter().filter_map(|p| p.before.clone()).collect()).await?;
    let after = judge(planned.iter().map(|p| p.after.clone()).collect()).await?;
    Ok(posture::introduced(&before, after))
}
