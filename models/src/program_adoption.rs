//! Adopting an unmanaged workload into a Pulumi program: the product has `pulumi import`
//! generate the code that manages it, adds it to the program with the resource option
//! `import: <id>` (the stack's next `up` takes the live object over instead of creating it),
//! and publishes the change on a branch of its own for review. These are the pure parts: which
//! Pulumi resource and import ID an observed workload is, the branch, and how the generated
//! code joins the program's `Pulumi.yaml`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

crate::wire::wire_enum!(
    /// Where a proposal's program adoption is.
    AdoptionState, "adoption state" {
        /// `pulumi import` is generating the code, or the branch is being pushed.
        Generating => "generating",
        /// The branch holds the commit; the proposal records it.
        Published => "published",
        /// Nothing was published; `reason` says why.
        Failed => "failed",
    }
);

/// One workload to import: the resource it becomes in the program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportedResource {
    /// The finding's resource, `deployment/batch`.
    pub resource: String,
    /// The resource's name in the program.
    pub name: String,
    /// Its Pulumi type, `kubernetes:apps/v1:Deployment`.
    #[serde(rename = "type")]
    pub pulumi_type: String,
    /// The ID `pulumi import` reads it by: a namespaced Kubernetes object's `namespace/name`.
    pub import_id: String,
}

/// The branch a proposal's adoption is published on.
pub fn branch(proposal_id: &str) -> String {
    format!("runtime-cloud/adopt/{proposal_id}")
}

/// The Pulumi type of an observed Kubernetes workload kind (the observer's lowercase kind).
pub fn pulumi_type(kind: &str) -> Option<&'static str> {
    match kind {
        "deployment" => Some("kubernetes:apps/v1:Deployment"),
        "statefulset" => Some("kubernetes:apps/v1:StatefulSet"),
        "daemonset" => Some("kubernetes:apps/v1:DaemonSet"),
        _ => None,
    }
}

/// The observer's kind of a Pulumi Kubernetes workload type (the inverse of [`pulumi_type`]).
pub fn observed_kind(pulumi_type: &str) -> Option<&'static str> {
    ["deployment", "statefulset", "daemonset"]
        .into_iter()
        .find(|k| self::pulumi_type(k) == Some(pulumi_type))
}

/// The Kubernetes workloads of a stack's resources: (the observer's kind, `namespace/name`).
pub fn managed_workloads(resources: &[crate::posture::StateResource]) -> Vec<(String, String)> {
    resources
        .iter()
        .filter_map(|r| {
            let kind = observed_kind(&r.kind)?;
            let id = r.id.as_deref()?;
            // A namespaced object's ID is `namespace/name`; one whose program set no
            // namespace has its name alone (the provider's `fqName`), and lives where its
            // outputs say (the provider's namespace, else `default`).
            let id = if id.contains('/') {
                id.to_owned()
            } else {
                let ns = r.outputs["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default");
                format!("{ns}/{id}")
            };
            Some((kind.to_owned(), id))
        })
        .collect()
}

/// What each unmanaged finding's workload becomes, in namespace `namespace` of a program whose
/// resources are named `taken`: named after the workload (`-adopted` added while the name is
/// taken). A finding of a kind Pulumi's Kubernetes provider does not import is refused.
pub fn imports(
    findings: &[String],
    namespace: &str,
    taken: &[String],
) -> Result<Vec<ImportedResource>, String> {
    let mut names: Vec<String> = taken.to_vec();
    let mut out = Vec::new();
    for resource in findings {
        let (kind, name) = resource
            .split_once('/')
            .ok_or_else(|| format!("`{resource}` is not a workload"))?;
        let ty = pulumi_type(kind)
            .ok_or_else(|| format!("`{resource}`: a {kind} is not imported into a program"))?;
        let mut program_name = name.to_owned();
        while names.contains(&program_name) {
            program_name.push_str("-adopted");
        }
        names.push(program_name.clone());
        out.push(ImportedResource {
            resource: resource.clone(),
            name: program_name,
            pulumi_type: ty.to_owned(),
            import_id: format!("{namespace}/{name}"),
        });
    }
    Ok(out)
}

/// The names of the resources and variables a `Pulumi.yaml` declares, and whether it is a YAML program
/// (the only runtime whose program the product can add generated code to: in another language
/// the code would need a person to wire it into the program).
pub fn yaml_resources(program: &str) -> Result<Vec<String>, String> {
    let doc = parse(program, "the program's Pulumi.yaml")?;
    let runtime = match &doc["runtime"] {
        Value::String(r) => r.clone(),
        other => other["name"].as_str().unwrap_or_default().to_owned(),
    };
    if runtime != "yaml" {
        return Err(format!(
            "the program's runtime is `{runtime}`: adoption generates Pulumi YAML, which only a `runtime: yaml` program takes as it is"
        ));
    }
    // Resources and variables share one namespace in a Pulumi YAML program.
    Ok(["resources", "variables"]
        .iter()
        .filter_map(|section| doc[section].as_object())
        .flat_map(|names| names.keys().cloned())
        .collect())
}

/// `program` (a `Pulumi.yaml`) with the resources `generated` declares (what
/// `pulumi import --out` wrote) added, each marked `options: import: <its ID>` and never
/// `protect`ed. The program's own text is kept (its comments, its order): the new resources
/// are written at the end of its top-level `resources:` block; a program in another layout
/// (flow style, JSON) is written out whole as YAML instead. Either way the result is read back
/// and must declare exactly the program's resources and the new ones.
pub fn merge(
    program: &str,
    generated: &str,
    imports: &[ImportedResource],
) -> Result<String, String> {
    let doc = parse(program, "the program's Pulumi.yaml")?;
    let code = parse(generated, "the code pulumi import generated")?;
    let mut added = Map::new();
    for import in imports {
        let mut resource = code["resources"][&import.name].clone();
        let Some(fields) = resource.as_object_mut() else {
            return Err(format!(
                "pulumi import generated no resource `{}`",
                import.name
            ));
        };
        let options = fields
            .entry("options")
            .or_insert_with(|| Value::Object(Map::new()));
        if !options.is_object() {
            *options = Value::Object(Map::new());
        }
        if let Some(options) = options.as_object_mut() {
            options.remove("protect");
            options.insert("import".into(), Value::String(import.import_id.clone()));
        }
        added.insert(import.name.clone(), resource);
    }
    let mut expected = doc.clone();
    let resources = expected
        .as_object_mut()
        .ok_or("the program's Pulumi.yaml is not a mapping")?
        .entry("resources")
        .or_insert_with(|| Value::Object(Map::new()));
    if resources.is_null() {
        *resources = Value::Object(Map::new());
    }
    let Some(resources) = resources.as_object_mut() else {
        return Err("the program's `resources` is not a mapping".into());
    };
    for (name, resource) in &added {
        if resources.contains_key(name) {
            return Err(format!("the program already declares `{name}`"));
        }
        resources.insert(name.clone(), resource.clone());
    }
    if let Some(text) = appended(program, &added)
        && parse(&text, "the merged program").ok().as_ref() == Some(&expected)
    {
        return Ok(text);
    }
    serde_saphyr::to_string(&expected).map_err(|e| format!("writing the program: {e}"))
}

/// `resources` as YAML nested by `indent` spaces a level, each resource's `type`, `properties`
/// and `options` first, as Pulumi writes them (a JSON map would sort them).
fn render(resources: &Map<String, Value>, indent: usize) -> Option<String> {
    #[derive(Serialize)]
    struct Declared<'a> {
        #[serde(rename = "type")]
        ty: &'a Value,
        #[serde(skip_serializing_if = "Value::is_null")]
        properties: &'a Value,
        #[serde(skip_serializing_if = "Value::is_null")]
        options: &'a Value,
        #[serde(flatten)]
        rest: Map<String, Value>,
    }
    let mut text = String::new();
    for (name, r) in resources {
        let mut rest = r.as_object().cloned().unwrap_or_default();
        for known in ["type", "properties", "options"] {
            rest.remove(known);
        }
        let declared = Declared {
            ty: &r["type"],
            properties: &r["properties"],
            options: &r["options"],
            rest,
        };
        let one = std::collections::BTreeMap::from([(name, declared)]);
        let mut options = serde_saphyr::SerializerOptions::default();
        options.indent_step = indent;
        text.push_str(&serde_saphyr::to_string_with_options(&one, options).ok()?);
    }
    Some(text)
}

fn parse(text: &str, what: &str) -> Result<Value, String> {
    serde_saphyr::from_str::<Value>(text).map_err(|e| format!("{what} is not YAML: {e}"))
}

/// `program` with `added` written at the end of its block-style top-level `resources:`
/// mapping (or a new one at the end); none when the program has no such block.
fn appended(program: &str, added: &Map<String, Value>) -> Option<String> {
    let lines: Vec<&str> = program.lines().collect();
    let top_level =
        |l: &str| !l.is_empty() && !l.starts_with([' ', '\t', '#']) && !l.starts_with("---");
    let header = lines.iter().position(|l| {
        l.strip_prefix("resources:")
            .is_some_and(|rest| rest.trim().is_empty() || rest.trim_start().starts_with('#'))
    });
    let shifted = |block: String, indent: usize| -> Vec<String> {
        block
            .lines()
            .map(|l| format!("{:indent$}{l}", ""))
            .collect()
    };
    let mut out: Vec<String> = Vec::new();
    match header {
        None => {
            if lines.iter().any(|l| l.starts_with("resources")) {
                return None;
            }
            out.extend(lines.iter().map(|l| (*l).to_owned()));
            out.push("resources:".into());
            out.extend(shifted(render(added, 2)?, 2));
        }
        Some(at) => {
            let end = lines[at + 1..]
                .iter()
                .position(|l| top_level(l))
                .map_or(lines.len(), |i| at + 1 + i);
            // Written as the block's first entry is indented, nested by as much again: the
            // program's own indentation.
            let indent = lines[at + 1..end]
                .iter()
                .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map_or(2, |l| l.len() - l.trim_start().len())
                .max(1);
            // Blank lines and comments that end the block stay after what is added.
            let mut last = end;
            while last > at + 1 && {
                let l = lines[last - 1].trim_start();
                l.is_empty() || l.starts_with('#')
            } {
                last -= 1;
            }
            out.extend(lines[..last].iter().map(|l| (*l).to_owned()));
            out.extend(shifted(render(added, indent)?, indent));
            out.extend(lines[last..].iter().map(|l| (*l).to_owned()));
        }
    }
    // A program written with CRLF line ends keeps them: the diff is what was added.
    let newline = if program.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let mut text = out.join(newline);
    text.push_str(newline);
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn batch() -> ImportedResource {
        ImportedResource {
            resource: "deployment/batch".into(),
            name: "batch".into(),
            pulumi_type: "kubernetes:apps/v1:Deployment".into(),
            import_id: "shop/batch".into(),
        }
    }

    const GENERATED: &str = "resources:\n  batch:\n    type: kubernetes:apps/v1:Deployment\n    properties:\n      metadata:\n        name: batch\n        namespace: shop\n      spec:\n        replicas: 2\n    options:\n      protect: true\n";

    #[test]
    fn workloads_become_pulumi_resources_named_freely_with_their_import_ids() {
        let found = imports(
            &["deployment/batch".into(), "statefulset/db".into()],
            "shop",
            &["batch".into()],
        )
        .unwrap();
        assert_eq!(
            found[0].name, "batch-adopted",
            "the program's name is taken"
        );
        assert_eq!(found[0].import_id, "shop/batch");
        assert_eq!(found[1].pulumi_type, "kubernetes:apps/v1:StatefulSet");
        assert_eq!(
            observed_kind("kubernetes:apps/v1:StatefulSet"),
            Some("statefulset")
        );
        assert!(imports(&["service/web".into()], "shop", &[]).is_err());
        assert_eq!(branch("p1"), "runtime-cloud/adopt/p1");
    }

    #[test]
    fn only_a_yaml_program_is_adopted_into() {
        assert_eq!(
            yaml_resources("name: shop\nruntime: yaml\nresources:\n  api:\n    type: x\n"),
            Ok(vec!["api".to_owned()])
        );
        assert!(
            yaml_resources("name: shop\nruntime: yaml\n")
                .unwrap()
                .is_empty()
        );
        let refused = yaml_resources("name: shop\nruntime:\n  name: nodejs\n").unwrap_err();
        assert!(refused.contains("`nodejs`"), "{refused}");
    }

    #[test]
    fn generated_code_joins_the_programs_resources_with_its_import_id_and_the_text_kept() {
        let program = "# the shop\nname: shop\nruntime: yaml\nresources:\n    # the API\n    api:\n        type: kubernetes:apps/v1:Deployment\n\n# outputs\noutputs: {}\n";
        let merged = merge(program, GENERATED, &[batch()]).unwrap();
        assert!(
            merged.starts_with("# the shop\nname: shop\nruntime: yaml\nresources:\n    # the API\n    api:\n        type: kubernetes:apps/v1:Deployment\n    batch:\n        type: kubernetes:apps/v1:Deployment\n        properties:\n            metadata:\n"),
            "nested as the program nests, type first: {merged}"
        );
        assert!(merged.ends_with("\n\n# outputs\noutputs: {}\n"), "{merged}");
        let read: Value = serde_saphyr::from_str(&merged).unwrap();
        assert_eq!(
            read["resources"]["batch"]["options"],
            json!({ "import": "shop/batch" }),
            "imported, never protected"
        );
        assert_eq!(
            read["resources"]["batch"]["properties"]["spec"]["replicas"],
            2
        );
    }

    #[test]
    fn lists_crlf_and_an_empty_resources_block_keep_the_programs_text() {
        let generated = "resources:\n  batch:\n    type: kubernetes:apps/v1:Deployment\n    properties:\n      spec:\n        template:\n          spec:\n            containers:\n            - name: batch\n              image: batch:2\n              ports:\n              - containerPort: 80\n";
        let program =
            "name: shop # the shop\nruntime: yaml\nresources:\n    api:\n        type: x\n";
        let merged = merge(program, generated, &[batch()]).unwrap();
        assert!(
            merged.starts_with(program),
            "appended, not rewritten: {merged}"
        );
        let read: Value = serde_saphyr::from_str(&merged).unwrap();
        assert_eq!(
            read["resources"]["batch"]["properties"]["spec"]["template"]["spec"]["containers"][0]["ports"]
                [0]["containerPort"],
            80
        );
        let crlf = program.replace('\n', "\r\n");
        let merged = merge(&crlf, generated, &[batch()]).unwrap();
        assert!(
            merged.starts_with(&crlf) && !merged.replace("\r\n", "").contains('\n'),
            "{merged:?}"
        );
        let empty = "name: shop\nruntime: yaml\nresources:\n# none yet\noutputs: {}\n";
        let merged = merge(empty, generated, &[batch()]).unwrap();
        assert!(merged.contains("# none yet"), "{merged}");
        let read: Value = serde_saphyr::from_str(&merged).unwrap();
        assert_eq!(
            read["resources"]["batch"]["options"]["import"],
            "shop/batch"
        );
    }

    #[test]
    fn a_program_without_resources_or_in_json_is_written_whole() {
        let merged = merge("name: shop\nruntime: yaml\n", GENERATED, &[batch()]).unwrap();
        assert!(
            merged.starts_with("name: shop\nruntime: yaml\nresources:\n  batch:\n"),
            "{merged}"
        );
        let json_program =
            r#"{"name": "shop", "runtime": "yaml", "resources": {"api": {"type": "x"}}}"#;
        let merged = merge(json_program, GENERATED, &[batch()]).unwrap();
        let read: Value = serde_saphyr::from_str(&merged).unwrap();
        assert_eq!(read["resources"]["api"], json!({ "type": "x" }));
        assert_eq!(
            read["resources"]["batch"]["options"]["import"],
            "shop/batch"
        );
        assert_eq!(read["name"], "shop");
    }

    #[test]
    fn a_name_taken_or_not_generated_is_refused() {
        let program = "name: shop\nruntime: yaml\nresources:\n  batch:\n    type: x\n";
        assert!(
            merge(program, GENERATED, &[batch()])
                .unwrap_err()
                .contains("already")
        );
        let missing = ImportedResource {
            name: "other".into(),
            ..batch()
        };
        assert!(
            merge("name: shop\nruntime: yaml\n", GENERATED, &[missing])
                .unwrap_err()
                .contains("no resource `other`")
        );
    }
}
