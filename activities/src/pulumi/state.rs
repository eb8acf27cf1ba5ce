//! What an observation reads of a Pulumi stack's recorded state (`pulumi stack export`): its
//! resources, for the posture rules written in Rego (`models::posture::PostureInput`), and the
//! Kubernetes workloads among them, which are the stack's own and so never unmanaged.

use super::Pulumi;
use crate::Error;
use crate::ports::Target;
use runtime_cloud_models::posture::StateResource;
use runtime_cloud_models::program_adoption::managed_workloads;

/// The resources of a `pulumi stack export` that a provider manages (`custom`): not the stack
/// itself, nor component resources, which hold no cloud object.
pub fn state_resources(export: &serde_json::Value) -> Vec<StateResource> {
    export["deployment"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["custom"] == true)
        .filter_map(|r| serde_json::from_value(r.clone()).ok())
        .collect()
}

impl Pulumi {
    /// The resources of the environment's stack; none before anything was applied to it. Read
    /// at every observation: the observation after an apply is read before the run's end is
    /// recorded, so no record of the runs can say the state is unchanged.
    pub async fn resources(&self, target: &Target) -> Result<Vec<StateResource>, Error> {
        let Some(export) = self
            .read_applied_state(target, &["stack", "export"])
            .await?
        else {
            return Ok(Vec::new());
        };
        let export: serde_json::Value = serde_json::from_str(&export)
            .map_err(|e| Error::Unreachable(format!("reading pulumi stack export: {e}")))?;
        Ok(state_resources(&export))
    }

    /// The Kubernetes workloads the environment's stack manages.
    pub async fn managed(&self, target: &Target) -> Result<Vec<(String, String)>, Error> {
        Ok(managed_workloads(&self.resources(target).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stacks_resources_and_kubernetes_workloads_are_read_from_its_export() {
        let export = serde_json::json!({ "version": 3, "deployment": { "resources": [
            { "urn": "urn:pulumi:k8s::shop::pulumi:pulumi:Stack::shop-k8s", "type": "pulumi:pulumi:Stack" },
            { "urn": "urn:pulumi:k8s::shop::kubernetes:apps/v1:Deployment::api", "custom": true,
              "id": "shop/api", "type": "kubernetes:apps/v1:Deployment" },
            { "urn": "urn:pulumi:k8s::shop::kubernetes:apps/v1:StatefulSet::db", "custom": true,
              "id": "db", "type": "kubernetes:apps/v1:StatefulSet" },
            { "urn": "urn:pulumi:k8s::shop::kubernetes:apps/v1:DaemonSet::logs", "custom": true,
              "id": "logs", "type": "kubernetes:apps/v1:DaemonSet",
              "outputs": { "metadata": { "name": "logs", "namespace": "ops" } } },
            { "urn": "urn:pulumi:k8s::shop::kubernetes:core/v1:Service::api", "custom": true,
              "id": "shop/api", "type": "kubernetes:core/v1:Service" },
            { "urn": "urn:pulumi:k8s::shop::aws:s3/bucket:Bucket::docs", "custom": true,
              "id": "docs-1234", "type": "aws:s3/bucket:Bucket",
              "inputs": { "acl": "public-read" }, "outputs": { "acl": "public-read" } },
        ] } });
        let resources = state_resources(&export);
        assert_eq!(resources.len(), 5, "the stack itself is no resource");
        assert_eq!(resources[4].kind, "aws:s3/bucket:Bucket");
        assert_eq!(resources[4].inputs["acl"], "public-read");
        assert_eq!(
            managed_workloads(&resources),
            [
                ("deployment".to_owned(), "shop/api".to_owned()),
                ("statefulset".to_owned(), "default/db".to_owned()),
                ("daemonset".to_owned(), "ops/logs".to_owned())
            ]
        );
    }
}
