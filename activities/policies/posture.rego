# The default posture rules of Runtime Cloud for the resources of a runner's recorded state (a
# Pulumi stack's `pulumi stack export`), embedded in the worker; `.rego` files of
# RUNTIME_CLOUD_POLICY_DIR may add to package `runtime_cloud.posture` the same way.
#   input.tenantId, input.environmentId
#   input.resources[_]: {urn, type, id, inputs, outputs}
#   violations - a set of {rule, resource, detail}: each a `posture` finding of `resource` (the
#                URN) with the rule's id; resolved when an observation no longer yields it.
package runtime_cloud.posture

public_acls := {"public-read", "public-read-write"}

# An S3 bucket anyone on the internet can read (or write).
violations contains v if {
	some r in input.resources
	r.type == "aws:s3/bucket:Bucket"
	acl := object.get(r.inputs, "acl", "private")
	acl in public_acls
	v := {"rule": "public-bucket", "resource": r.urn, "detail": sprintf("acl `%s`: anyone can read it", [acl])}
}

# Ingress from anywhere on the internet.
open_cidrs := {"0.0.0.0/0", "::/0"}

violations contains v if {
	some r in input.resources
	r.type == "aws:ec2/securityGroup:SecurityGroup"
	some rule in object.get(r.inputs, "ingress", [])
	some cidr in array.concat(object.get(rule, "cidrBlocks", []), object.get(rule, "ipv6CidrBlocks", []))
	cidr in open_cidrs
	v := {"rule": "open-security-group", "resource": r.urn, "detail": sprintf("ingress from %s to ports %v-%v", [cidr, object.get(rule, "fromPort", 0), object.get(rule, "toPort", 65535)])}
}

violations contains v if {
	some r in input.resources
	r.type == "aws:ec2/securityGroupRule:SecurityGroupRule"
	r.inputs.type == "ingress"
	some cidr in array.concat(object.get(r.inputs, "cidrBlocks", []), object.get(r.inputs, "ipv6CidrBlocks", []))
	cidr in open_cidrs
	v := {"rule": "open-security-group", "resource": r.urn, "detail": sprintf("ingress from %s to ports %v-%v", [cidr, object.get(r.inputs, "fromPort", 0), object.get(r.inputs, "toPort", 65535)])}
}
