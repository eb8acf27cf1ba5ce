# The default policy bundle of Runtime Cloud (embedded in the worker; a directory of .rego files
# set with RUNTIME_CLOUD_POLICY_DIR is evaluated with it). Package `runtime_cloud`:
#   deny  - a set of messages: the plan does not apply, the run ends Rejected with them;
#   allow - true: a production baseline or reconciliation applies without a human approval
#           (recorded as the approval, with this decision as its evidence);
#   no_auto_accept - a set of reasons: a proposal is not accepted without an operator.
# Nothing here allows: a production apply needs a person unless a policy you add says so.
package runtime_cloud

default allow := false

# Reverting the autoscaler's replica count fights it: an operator decides (or a drift rule
# suppresses that drift). Asked before a proposal would be accepted on its own.
no_auto_accept contains msg if {
	some c in input.proposal.planSummary.changedBy
	c.kind == "replica"
	c.manager == "kube-controller-manager"
	c.subresource == "scale"
	msg := sprintf("%s was scaled by the autoscaler: not reverted without an operator", [c.resource])
}

# A plan that would delete more workloads at once than any review would expect.
max_deletes := 10

deny contains msg if {
	count(input.plan.deletes) > max_deletes
	msg := sprintf("the plan deletes %d workloads at once (at most %d)", [count(input.plan.deletes), max_deletes])
}

# A workload a production specification declares with no replica at all is an outage.
deny contains msg if {
	input.environment.class == "production"
	some w in input.specification.workloads
	w.replicas == 0
	msg := sprintf("workload %s would run no replica in production", [w.name])
}
