//! The Kubernetes deployment (`deploy/kubernetes/`): the kustomize base, its overlays for a
//! self-hosted Temporal over mTLS and for Temporal Cloud, and the RoleBinding of an observed
//! namespace.
//!
//! No cluster runs where the tests run, so they check what can be checked without one, with the
//! real tools (`scripts/install-tools` installs them): each kustomization renders with `kubectl
//! kustomize`, every rendered object is valid under the Kubernetes schemas of
//! [`KUBERNETES_VERSION`] (`kubernetes-validate --strict`: an unknown field fails), and the
//! runtime-cloud containers are checked against the binary itself — their commands parse, they
//! are given only variables it reads, every file a variable names is mounted, and the
//! environment loads. Then the hardening: non-root, read-only root filesystem, no privilege
//! escalation, resources, Secrets only as files, least RBAC, probes, PodDisruptionBudgets and
//! NetworkPolicies.

use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_runtime-cloud");
/// The Kubernetes release whose schemas the objects must match (kubernetes-validate ships them).
const KUBERNETES_VERSION: &str = "1.32.0";
/// The image every runtime-cloud container runs.
const IMAGE: &str = "ghcr.io/runtime-cloud/runtime-cloud:0.1.0";
/// The kustomizations that deploy Runtime Cloud.
const DEPLOYMENTS: &[&str] = &[
    "deploy/kubernetes/base",
    "deploy/kubernetes/overlays/self-hosted-mtls",
    "deploy/kubernetes/overlays/temporal-cloud",
];
/// The production overlays (the last of [`DEPLOYMENTS`]).
const OVERLAYS: &[&str] = &[
    "deploy/kubernetes/overlays/self-hosted-mtls",
    "deploy/kubernetes/overlays/temporal-cloud",
];
/// The RoleBinding applied in each observed namespace.
const OBSERVED_NAMESPACE: &str = "deploy/kubernetes/observed-namespace";
/// The ClusterRole and its binding applied in each watched cluster.
const WATCHED_CLUSTER: &str = "deploy/kubernetes/watched-cluster";
/// Variables whose value is a path to a file the process reads, besides the `…_FILE` ones.
const PATH_VARIABLES: &[&str] = &["RUNTIME_CLOUD_INBOUND_SOURCES"];

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn output_text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// --- rendering and validating ------------------------------------------------------------------

/// A kustomization rendered by `kubectl kustomize`: the YAML as printed, and each object.
struct Rendering {
    dir: &'static str,
    text: String,
    objects: Vec<Value>,
}

/// `kubectl kustomize dir`, parsed.
fn render(dir: &'static str) -> Rendering {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo(dir))
        .stdin(Stdio::null())
        .output()
        .expect("run `kubectl kustomize` (scripts/install-tools installs kubectl)");
    assert!(
        out.status.success(),
        "`kubectl kustomize {dir}` failed (it needs the kustomize v5 of kubectl 1.27 or newer; \
         `kubectl version --client` says which):\n{}",
        output_text(&out)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    Rendering {
        dir,
        objects: parse_yaml(&text).unwrap_or_else(|e| panic!("{dir} renders bad YAML: {e}")),
        text,
    }
}

/// Every document of a multi-document YAML text, as JSON values.
fn parse_yaml(text: &str) -> Result<Vec<Value>, yaml_serde::Error> {
    yaml_serde::Deserializer::from_str(text)
        .map(Value::deserialize)
        .filter(|v| !matches!(v, Ok(Value::Null)))
        .collect()
}

/// The objects as a YAML stream again (JSON documents are YAML).
fn to_yaml_stream(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| serde_json::to_string_pretty(o).expect("JSON"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// `kind/name`, as kubernetes-validate names an object (kind in lower case).
fn id(object: &Value) -> String {
    format!(
        "{}/{}",
        object["kind"].as_str().unwrap_or_default().to_lowercase(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Validates the YAML stream `text`, holding `objects`, with kubernetes-validate (strict)
/// against [`KUBERNETES_VERSION`]: `Ok` only when it exits 0 *and* reports every object as
/// passed (an object of a kind or apiVersion it has no schema for is only warned about, so it
/// must not count as valid).
fn validate(text: &str, objects: &[Value], scratch: &Path, name: &str) -> Result<(), String> {
    let file = scratch.join(format!("{name}.yaml"));
    std::fs::write(&file, text).expect("write the manifests");
    let out = Command::new("python3")
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "--kubernetes-version",
        ])
        .arg(KUBERNETES_VERSION)
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run `python3 -m kubernetes_validate` (scripts/install-tools installs it)");
    let text = output_text(&out);
    if !out.status.success() {
        return Err(text);
    }
    let passed: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_once(" passed for resource "))
        .filter_map(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        .collect();
    let unchecked: Vec<String> = objects
        .iter()
        .map(id)
        .filter(|i| !passed.contains(i))
        .collect();
    if unchecked.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "kubernetes-validate checked no schema for {unchecked:?}:\n{text}"
        ))
    }
}

// --- reading the objects -----------------------------------------------------------------------

impl Rendering {
    fn of_kind(&self, kind: &str) -> impl Iterator<Item = &Value> + '_ {
        let kind = kind.to_owned();
        self.objects
            .iter()
            .filter(move |o| o["kind"] == kind.as_str())
    }

    #[track_caller]
    fn get(&self, kind: &str, name: &str) -> &Value {
        self.of_kind(kind)
            .find(|o| o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{}: no {kind} {name}", self.dir))
    }

    /// Every pod template: of the Deployments, StatefulSets, DaemonSets and Jobs.
    fn pods(&self) -> Vec<Pod<'_>> {
        self.objects
            .iter()
            .filter(|o| {
                ["Deployment", "StatefulSet", "DaemonSet", "Job"]
                    .contains(&o["kind"].as_str().unwrap_or_default())
            })
            .map(|o| Pod {
                owner: format!(
                    "{} {}",
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                ),
                object: o,
                template: &o["spec"]["template"],
            })
            .collect()
    }

    /// The pod template of the workload with component label `component`.
    #[track_caller]
    fn pod(&self, component: &str) -> Pod<'_> {
        let mut found: Vec<Pod<'_>> = self
            .pods()
            .into_iter()
            .filter(|p| p.labels()["app.kubernetes.io/component"] == component)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{}: expected one workload of component {component}",
            self.dir
        );
        found.remove(0)
    }

    /// The data of the rendered ConfigMap `name`.
    #[track_caller]
    fn config_map(&self, name: &str) -> BTreeMap<String, String> {
        let cm = self.get("ConfigMap", name);
        cm["data"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().expect("ConfigMap data is text").to_owned(),
                )
            })
            .collect()
    }

    /// Every runtime-cloud container (by its image), with its pod.
    fn runtime_cloud_containers(&self) -> Vec<(Pod<'_>, &Value)> {
        let mut all = Vec::new();
        for pod in self.pods() {
            for c in pod.containers() {
                if c["image"]
                    .as_str()
                    .is_some_and(|i| i.starts_with("ghcr.io/runtime-cloud/runtime-cloud"))
                {
                    all.push((pod.clone(), c));
                }
            }
        }
        assert!(!all.is_empty(), "{}: no runtime-cloud container", self.dir);
        all
    }

    /// The environment a container is given: its ConfigMaps' data (`envFrom`, in order), then
    /// its `env` entries. Refuses what cannot be read off the manifests: a Secret in either, a
    /// ConfigMap that is not rendered, a variable from elsewhere (`valueFrom`).
    #[track_caller]
    fn env(&self, pod: &Pod<'_>, container: &Value) -> BTreeMap<String, String> {
        let who = pod.container_id(container);
        let mut env = BTreeMap::new();
        for from in container["envFrom"].as_array().into_iter().flatten() {
            assert!(
                from.get("secretRef").is_none(),
                "{}: {who} takes a Secret into its environment (envFrom.secretRef): mount it \
                 as files and point a …_FILE variable at them",
                self.dir
            );
            let name = from["configMapRef"]["name"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: {who}: envFrom without a configMapRef", self.dir));
            let prefix = from["prefix"].as_str().unwrap_or_default();
            for (k, v) in self.config_map(name) {
                env.insert(format!("{prefix}{k}"), v);
            }
        }
        for e in container["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().expect("env name").to_owned();
            assert!(
                e["valueFrom"]["secretKeyRef"].is_null(),
                "{}: {who}: {name} comes from a Secret (secretKeyRef): mount the Secret as \
                 files and point a …_FILE variable at them",
                self.dir
            );
            assert!(
                e.get("valueFrom").is_none(),
                "{}: {who}: {name} is not written in the manifests (valueFrom)",
                self.dir
            );
            env.insert(name, e["value"].as_str().unwrap_or_default().to_owned());
        }
        env
    }
}

/// A pod template and the workload it belongs to.
#[derive(Clone)]
struct Pod<'a> {
    owner: String,
    object: &'a Value,
    template: &'a Value,
}

impl<'a> Pod<'a> {
    fn spec(&self) -> &'a Value {
        &self.template["spec"]
    }

    fn labels(&self) -> &'a Value {
        &self.template["metadata"]["labels"]
    }

    /// Containers and init containers.
    fn containers(&self) -> Vec<&'a Value> {
        let spec = self.spec();
        spec["containers"]
            .as_array()
            .into_iter()
            .chain(spec["initContainers"].as_array())
            .flatten()
            .collect()
    }

    fn container_id(&self, container: &Value) -> String {
        format!(
            "{}, container {}",
            self.owner,
            container["name"].as_str().unwrap_or_default()
        )
    }

    /// The volume `name` of the pod.
    fn volume(&self, name: &str) -> Option<&'a Value> {
        self.spec()["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == name)
    }

    /// The mount of `container` that holds `path` (the longest mount path that is `path` or
    /// one of its directories), with its volume.
    fn mount_of(&self, container: &'a Value, path: &str) -> Option<(&'a Value, &'a Value)> {
        container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| {
                let dir = m["mountPath"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_end_matches('/');
                path == dir || path.starts_with(&format!("{dir}/"))
            })
            .max_by_key(|m| m["mountPath"].as_str().unwrap_or_default().len())
            .map(|m| {
                let volume = self
                    .volume(m["name"].as_str().unwrap_or_default())
                    .unwrap_or_else(|| panic!("{}: no volume for mount {m}", self.owner));
                (m, volume)
            })
    }

    /// The container's security setting `key`, else the pod's.
    fn security(&self, container: &'a Value, key: &str) -> &'a Value {
        match &container["securityContext"][key] {
            Value::Null => &self.spec()["securityContext"][key],
            v => v,
        }
    }
}

/// Whether `selector` (`matchLabels`, or a Service's plain map) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let wanted = selector.get("matchLabels").unwrap_or(selector);
    wanted
        .as_object()
        .is_some_and(|w| !w.is_empty() && w.iter().all(|(k, v)| labels[k] == *v))
}

/// The container's arguments after the binary: `args` (the `command` being the image's
/// entrypoint, `runtime-cloud`).
#[track_caller]
fn subcommand(who: &str, container: &Value) -> Vec<String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|a| a.as_str().expect("strings").to_owned())
            .collect()
    };
    let command = strings(&container["command"]);
    assert!(
        command.is_empty() || command == ["runtime-cloud"],
        "{who}: command {command:?}: run the binary itself, `runtime-cloud` (the image's \
         ENTRYPOINT), with the role in `args`"
    );
    strings(&container["args"])
}

/// The values a variable names as files: `…_FILE`, `…_FILES` (comma-separated) and
/// [`PATH_VARIABLES`].
fn file_paths(name: &str, value: &str) -> Vec<String> {
    if name.ends_with("_FILES") {
        value
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect()
    } else if name.ends_with("_FILE") || PATH_VARIABLES.contains(&name) {
        vec![value.to_owned()]
    } else {
        Vec::new()
    }
}

/// The uid of the Dockerfile's runtime user (`USER 10001:10001`).
fn dockerfile_uid() -> i64 {
    let dockerfile = std::fs::read_to_string(repo("Dockerfile")).expect("Dockerfile");
    dockerfile
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("USER "))
        .and_then(|u| u.split(':').next())
        .and_then(|u| u.trim().parse().ok())
        .expect("a numeric USER in the Dockerfile")
}

// --- the tests ---------------------------------------------------------------------------------

/// The base, both overlays, the observed namespace's RoleBinding and the watched cluster's
/// ClusterRole render with `kubectl kustomize`, and every object they render is valid under the
/// Kubernetes schemas (strict: no unknown field), with no object left unchecked.
#[test]
fn every_kustomization_renders_and_every_object_validates() {
    let scratch = tempfile::tempdir().expect("temp dir");
    for dir in DEPLOYMENTS
        .iter()
        .chain([&OBSERVED_NAMESPACE, &WATCHED_CLUSTER])
    {
        let r = render(dir);
        assert!(!r.objects.is_empty(), "{dir} renders nothing");
        assert_eq!(
            r.objects.len(),
            r.text.matches("\n---\n").count() + 1,
            "{dir}: every document parsed"
        );
        // What kubectl printed (what `kubectl apply -k` sends) is what is validated.
        let name = dir.replace('/', "-");
        if let Err(e) = validate(&r.text, &r.objects, scratch.path(), &name) {
            panic!("{dir} does not validate against Kubernetes {KUBERNETES_VERSION}:\n{e}");
        }
    }
    // The parts of the deployment.
    let base = render(DEPLOYMENTS[0]);
    for (kind, name) in [
        ("Deployment", "runtime-cloud-api"),
        ("Service", "runtime-cloud-api"),
        ("Deployment", "runtime-cloud-worker"),
        ("Deployment", "runtime-cloud-pool-eu-restricted"),
        ("Job", "runtime-cloud-migrate"),
        ("PodDisruptionBudget", "runtime-cloud-api"),
        ("PodDisruptionBudget", "runtime-cloud-worker"),
        ("NetworkPolicy", "runtime-cloud-default-deny"),
        ("ClusterRole", "runtime-cloud-observer"),
    ] {
        base.get(kind, name);
    }
}

/// The validator really refuses broken manifests: an unknown field, a wrong type, and an
/// apiVersion Kubernetes no longer serves (for which it has no schema, so it only warns:
/// [`validate`] must still refuse it). The same objects unbroken pass.
#[test]
fn the_validator_refuses_a_broken_manifest() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let base = render(DEPLOYMENTS[0]);
    let api = base.get("Deployment", "runtime-cloud-api").clone();
    let pdb = base.get("PodDisruptionBudget", "runtime-cloud-api").clone();
    let unbroken = [api.clone(), pdb.clone()];
    validate(
        &to_yaml_stream(&unbroken),
        &unbroken,
        scratch.path(),
        "unbroken",
    )
    .unwrap_or_else(|e| panic!("the objects as rendered should pass:\n{e}"));

    let mut typo = api.clone();
    let security = typo["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        .as_object_mut()
        .expect("securityContext");
    let v = security.remove("runAsNonRoot").expect("runAsNonRoot");
    security.insert("runAsNonroot".into(), v);
    let mut wrong_type = api;
    wrong_type["spec"]["replicas"] = json!("two");
    let mut removed_api = pdb;
    removed_api["apiVersion"] = json!("policy/v1beta1");

    for (name, object, expected) in [
        ("unknown-field", typo, "runAsNonroot"),
        ("wrong-type", wrong_type, "'two' is not of type 'integer'"),
        (
            "removed-api-version",
            removed_api,
            "poddisruptionbudget/runtime-cloud-api",
        ),
    ] {
        let objects = [object];
        match validate(&to_yaml_stream(&objects), &objects, scratch.path(), name) {
            Ok(()) => panic!("kubernetes-validate accepted a broken manifest ({name})"),
            Err(e) => assert!(
                e.contains(expected),
                "the refusal of {name} should name {expected:?}:\n{e}"
            ),
        }
    }
}

/// Every variable given to a runtime-cloud container (its ConfigMaps through `envFrom`, and its
/// `env`) is one the binary reads (`runtime_cloud::config::variables()`); a secret setting is
/// only ever given as its `…_FILE`; every file a variable names is in one of the container's
/// read-only mounts, of a Secret (the inbound sources' file may be a ConfigMap's); and with
/// those files in place the environment loads.
#[test]
fn containers_are_given_only_what_the_binary_reads_and_the_files_they_name() {
    let known = runtime_cloud::config::variables();
    let scratch = tempfile::tempdir().expect("temp dir");
    for dir in DEPLOYMENTS {
        let r = render(dir);
        for (pod, container) in r.runtime_cloud_containers() {
            let who = format!("{dir}: {}", pod.container_id(container));
            let env = r.env(&pod, container);
            let unknown: Vec<&String> = env.keys().filter(|k| !known.contains(*k)).collect();
            assert!(
                unknown.is_empty(),
                "{who} is given {unknown:?}, which runtime-cloud does not read"
            );
            for name in env.keys() {
                assert!(
                    !known.contains(&format!("{name}_FILE")),
                    "{who}: {name} is a secret: give {name}_FILE, a file of a mounted Secret"
                );
            }
            assert!(
                !env.contains_key("RUNTIME_CLOUD_JWT_SECRET_FILE"),
                "{who}: production signs in with OIDC, not the HS256 key"
            );

            // Every file named is mounted, read-only, from a Secret (the inbound sources may be
            // a ConfigMap).
            for (name, value) in &env {
                for path in file_paths(name, value) {
                    assert!(
                        path.starts_with('/'),
                        "{who}: {name}={path}: an absolute path"
                    );
                    let (mount, volume) = pod.mount_of(container, &path).unwrap_or_else(|| {
                        panic!("{who}: {name} names {path}, which no volume mount provides")
                    });
                    let from_secret = volume.get("secret").is_some();
                    assert!(
                        from_secret
                            || (PATH_VARIABLES.contains(&name.as_str())
                                && volume.get("configMap").is_some()),
                        "{who}: {name} names {path}, in volume {}, which is not a Secret",
                        volume["name"]
                    );
                    assert_eq!(
                        mount["readOnly"], true,
                        "{who}: mount {} (of {name}) should be read-only",
                        mount["mountPath"]
                    );
                    assert!(
                        mount.get("subPath").is_none(),
                        "{who}: mount {} uses subPath: a rotated Secret would never reach it",
                        mount["mountPath"]
                    );
                }
            }

            // The environment loads, with every named file where it says, under a scratch
            // root: `token` reads the whole configuration and touches no network.
            let root = scratch
                .path()
                .join(pod.owner.replace(' ', "-"))
                .join(dir.replace('/', "-"));
            let mut local = BTreeMap::new();
            for (name, value) in &env {
                let paths = file_paths(name, value);
                if paths.is_empty() && name != "RUNTIME_CLOUD_DATA_DIR" {
                    local.insert(name.clone(), value.clone());
                    continue;
                }
                let moved: Vec<String> = if name == "RUNTIME_CLOUD_DATA_DIR" {
                    vec![value.clone()]
                } else {
                    paths
                }
                .iter()
                .map(|p| {
                    let here = root.join(p.trim_start_matches('/'));
                    if name != "RUNTIME_CLOUD_DATA_DIR" {
                        std::fs::create_dir_all(here.parent().expect("a parent")).expect("dir");
                        std::fs::write(&here, stand_in_file(&here)).expect("write");
                    }
                    here.display().to_string()
                })
                .collect();
                local.insert(name.clone(), moved.join(","));
            }
            let out = Command::new(BIN)
                .args([
                    "token",
                    "--tenant",
                    "k8s-check",
                    "--scope",
                    "factory.provisioning.read",
                ])
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .envs(&local)
                .stdin(Stdio::null())
                .output()
                .expect("run runtime-cloud");
            assert!(
                out.status.success(),
                "{who}: the binary does not load this environment {local:?}:\n{}",
                output_text(&out)
            );
        }
    }
}

/// What a mounted file holds in the load check: what each setting expects of it.
fn stand_in_file(path: &Path) -> String {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match name {
        "url" => "postgres://runtime_cloud:pw@postgres:5432/runtime_cloud?sslmode=verify-full\n"
            .to_owned(),
        "sources.toml" => "clock_skew_seconds = 60\n".to_owned(),
        // A payload key: 32 bytes in base64.
        n if n.ends_with(".key") && path.to_string_lossy().contains("payload-keys") => {
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n".to_owned()
        }
        _ => "stand-in\n".to_owned(),
    }
}

/// The containers run the roles, `api`, `worker`, `worker --pool eu-restricted` and `migrate`
/// (the migration as a Job, the others as Deployments; the workers replaced all at once), of
/// the one image, and each command parses: the real binary takes it with `--help`.
#[test]
fn containers_run_the_roles_and_their_commands_parse() {
    for dir in DEPLOYMENTS {
        let r = render(dir);
        let mut roles = BTreeSet::new();
        for (pod, container) in r.runtime_cloud_containers() {
            let who = format!("{dir}: {}", pod.container_id(container));
            assert_eq!(container["image"], IMAGE, "{who}: the image");
            let args = subcommand(&who, container);
            let expected_kind = if args == ["migrate"] {
                "Job"
            } else {
                "Deployment"
            };
            assert_eq!(
                pod.object["kind"],
                expected_kind,
                "{who}: `{}` runs as a {expected_kind}",
                args.join(" ")
            );
            if args[0] == "worker" {
                assert_eq!(
                    pod.object["spec"]["strategy"]["type"], "Recreate",
                    "{who}: old and new workers never poll side by side (docs/deploy.md, \
                     \"Upgrading\"): strategy Recreate"
                );
            }
            let mut help = args.clone();
            help.push("--help".into());
            let out = Command::new(BIN)
                .args(&help)
                .env_clear()
                .stdin(Stdio::null())
                .output()
                .expect("run runtime-cloud");
            assert!(
                out.status.success()
                    && String::from_utf8_lossy(&out.stdout)
                        .contains(&format!("runtime-cloud {}", args[0])),
                "{who}: `runtime-cloud {}` is refused:\n{}",
                help.join(" "),
                output_text(&out)
            );
            roles.insert(args);
        }
        let expected: BTreeSet<Vec<String>> = [
            vec!["api"],
            vec!["worker"],
            vec!["worker", "--pool", "eu-restricted"],
            vec!["migrate"],
        ]
        .into_iter()
        .map(|a| a.into_iter().map(String::from).collect())
        .collect();
        assert_eq!(roles, expected, "{dir}: the roles");
        // The Job is retried in place and does not run forever.
        let job = r.get("Job", "runtime-cloud-migrate");
        assert!(
            ["OnFailure", "Never"].contains(
                &job["spec"]["template"]["spec"]["restartPolicy"]
                    .as_str()
                    .unwrap_or_default()
            ),
            "{dir}: the migrate Job's restartPolicy"
        );
    }
}

/// Every container of every pod runs as the image's non-root user, on a read-only root
/// filesystem with the data dir and /tmp on emptyDirs, without privilege escalation or any
/// capability, under the runtime's seccomp profile, with requests and limits; no pod shares
/// the host's namespaces or mounts its paths. No Secret is in the manifests, none reaches an
/// environment (`secretKeyRef`, `envFrom.secretRef`): each is mounted as files.
#[test]
fn containers_are_locked_down_and_secrets_are_only_files() {
    let uid = dockerfile_uid();
    for dir in DEPLOYMENTS.iter().chain([&OBSERVED_NAMESPACE]) {
        let r = render(dir);
        assert_eq!(
            r.of_kind("Secret").count(),
            0,
            "{dir}: Secrets are created from files by the operator, never kept in the manifests"
        );
        assert!(
            !r.text.contains("secretKeyRef") && !r.text.contains("secretRef"),
            "{dir}: a Secret is referenced into an environment: mount it as files"
        );
        for pod in r.pods() {
            let spec = pod.spec();
            for key in ["hostNetwork", "hostPID", "hostIPC"] {
                assert_ne!(spec[key], true, "{dir}: {}: {key}", pod.owner);
            }
            for v in spec["volumes"].as_array().into_iter().flatten() {
                assert!(
                    v.get("hostPath").is_none(),
                    "{dir}: {}: a hostPath volume",
                    pod.owner
                );
            }
            for container in pod.containers() {
                let who = format!("{dir}: {}", pod.container_id(container));
                assert_eq!(
                    pod.security(container, "runAsNonRoot"),
                    true,
                    "{who}: runAsNonRoot"
                );
                assert_eq!(
                    pod.security(container, "runAsUser"),
                    uid,
                    "{who}: runAsUser, the Dockerfile's user"
                );
                assert_eq!(
                    container["securityContext"]["readOnlyRootFilesystem"], true,
                    "{who}: readOnlyRootFilesystem"
                );
                assert_eq!(
                    container["securityContext"]["allowPrivilegeEscalation"], false,
                    "{who}: allowPrivilegeEscalation"
                );
                assert_ne!(
                    container["securityContext"]["privileged"], true,
                    "{who}: privileged"
                );
                assert_eq!(
                    container["securityContext"]["capabilities"]["drop"],
                    json!(["ALL"]),
                    "{who}: capabilities.drop"
                );
                assert!(
                    container["securityContext"]["capabilities"]["add"].is_null(),
                    "{who}: no capability added"
                );
                assert_eq!(
                    pod.security(container, "seccompProfile")["type"],
                    "RuntimeDefault",
                    "{who}: seccompProfile"
                );
                for bound in ["requests", "limits"] {
                    for resource in ["cpu", "memory"] {
                        assert!(
                            container["resources"][bound][resource].is_string()
                                || container["resources"][bound][resource].is_number(),
                            "{who}: resources.{bound}.{resource}"
                        );
                    }
                }
                // The writable places are emptyDirs.
                let data_dir = if container["image"] == IMAGE {
                    let env = r.env(&pod, container);
                    Some(
                        env.get("RUNTIME_CLOUD_DATA_DIR")
                            .unwrap_or_else(|| panic!("{who}: set RUNTIME_CLOUD_DATA_DIR"))
                            .clone(),
                    )
                } else {
                    None
                };
                for path in data_dir.iter().map(String::as_str).chain(["/tmp"]) {
                    let (mount, volume) = pod
                        .mount_of(container, path)
                        .unwrap_or_else(|| panic!("{who}: mount an emptyDir at {path}"));
                    assert!(
                        mount["mountPath"] == path && volume.get("emptyDir").is_some(),
                        "{who}: {path} should be an emptyDir of its own (the root is read-only)"
                    );
                }
                // Secrets are read-only files.
                for m in container["volumeMounts"].as_array().into_iter().flatten() {
                    let volume = pod.volume(m["name"].as_str().unwrap_or_default());
                    if volume.is_some_and(|v| v.get("secret").is_some()) {
                        assert_eq!(
                            m["readOnly"], true,
                            "{who}: mount {} read-only",
                            m["mountPath"]
                        );
                    }
                }
            }
        }
    }
}

/// Only the workers get a Kubernetes token, and what it may do is what the observer does: get,
/// list and watch the workload kinds, Services and Ingresses — no Secrets, no ConfigMaps, no
/// writes — granted per observed namespace by a RoleBinding, never cluster-wide. The API has
/// no Kubernetes API access at all.
#[test]
fn only_the_worker_reads_the_kubernetes_api_and_only_what_the_observer_needs() {
    for dir in DEPLOYMENTS {
        let r = render(dir);
        for pod in r.pods() {
            let spec = pod.spec();
            let account_name = spec["serviceAccountName"]
                .as_str()
                .unwrap_or_else(|| panic!("{dir}: {}: a ServiceAccount of its own", pod.owner));
            assert_ne!(
                account_name, "default",
                "{dir}: {}: not the default account",
                pod.owner
            );
            let account = r.get("ServiceAccount", account_name);
            let component = pod.labels()["app.kubernetes.io/component"]
                .as_str()
                .unwrap_or_default();
            let mounted = spec["automountServiceAccountToken"]
                .as_bool()
                .or(account["automountServiceAccountToken"].as_bool())
                .unwrap_or(true);
            assert_eq!(
                mounted,
                component == "worker",
                "{dir}: {}: only the workers (the observer) get a Kubernetes token",
                pod.owner
            );
            if component != "worker" {
                assert_eq!(
                    account["automountServiceAccountToken"], false,
                    "{dir}: ServiceAccount {account_name}: automountServiceAccountToken: false"
                );
            }
        }
        assert_eq!(
            r.of_kind("ClusterRoleBinding").count(),
            0,
            "{dir}: no ClusterRoleBinding"
        );
        assert_eq!(
            r.of_kind("RoleBinding").count(),
            0,
            "{dir}: RoleBindings are per observed namespace"
        );
        let role = r.get("ClusterRole", "runtime-cloud-observer");
        let mut granted = BTreeSet::new();
        for rule in role["rules"].as_array().expect("rules") {
            let verbs: BTreeSet<&str> = rule["verbs"]
                .as_array()
                .expect("verbs")
                .iter()
                .map(|v| v.as_str().expect("verb"))
                .collect();
            assert!(
                verbs.is_subset(&BTreeSet::from(["get", "list", "watch"])),
                "{dir}: the observer only reads: {verbs:?}"
            );
            assert!(rule.get("resourceNames").is_none() && rule.get("nonResourceURLs").is_none());
            for group in rule["apiGroups"].as_array().expect("apiGroups") {
                for resource in rule["resources"].as_array().expect("resources") {
                    granted.insert(format!(
                        "{}/{}",
                        group.as_str().expect("group"),
                        resource.as_str().expect("resource")
                    ));
                }
            }
        }
        let needed: BTreeSet<String> = [
            "apps/deployments",
            "apps/statefulsets",
            "apps/daemonsets",
            "/services",
            "networking.k8s.io/ingresses",
            "networking.k8s.io/networkpolicies",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            granted, needed,
            "{dir}: what the observer lists, and nothing else"
        );
    }

    // The observed namespace's RoleBinding binds that role to the workers' account.
    let base = render(DEPLOYMENTS[0]);
    let worker_account = base.get("ServiceAccount", "runtime-cloud-worker");
    let observed = render(OBSERVED_NAMESPACE);
    let bindings: Vec<&Value> = observed.of_kind("RoleBinding").collect();
    assert_eq!(bindings.len(), 1, "{OBSERVED_NAMESPACE}: one RoleBinding");
    let binding = bindings[0];
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], "runtime-cloud-observer");
    assert_ne!(
        binding["metadata"]["namespace"], worker_account["metadata"]["namespace"],
        "the RoleBinding belongs in the observed namespace"
    );
    assert_eq!(
        binding["subjects"],
        json!([{
            "kind": "ServiceAccount",
            "name": "runtime-cloud-worker",
            "namespace": worker_account["metadata"]["namespace"],
        }]),
        "the RoleBinding names the workers' account in the base's namespace"
    );
}

/// The API listens where its container port, probes and Service point: liveness `/healthz` and
/// readiness `/readyz` on 8080; the Service serves 8080 and the metrics port 9090; the
/// overlays' internal metrics listener is that port. PodDisruptionBudgets keep an API and a
/// worker up. The NetworkPolicies deny by default, let anyone reach 8080 and only the
/// monitoring namespace 9090, and let each role reach what it talks to.
#[test]
fn the_api_is_probed_served_and_every_pod_fenced() {
    for dir in DEPLOYMENTS {
        let r = render(dir);
        let api = r.pod("api");
        let container = &api.spec()["containers"][0];
        let env = r.env(&api, container);
        let port_named = |name: &str| {
            container["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == name)
                .map(|p| p["containerPort"].as_i64().expect("containerPort"))
                .unwrap_or_else(|| panic!("{dir}: the API container has no port {name}"))
        };
        assert_eq!(
            env.get("RUNTIME_CLOUD_LISTEN").map(String::as_str),
            Some("0.0.0.0:8080")
        );
        assert_eq!(
            port_named("http"),
            8080,
            "{dir}: the http port is the listen port"
        );
        assert_eq!(port_named("metrics"), 9090, "{dir}: the metrics port");
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = &container[probe]["httpGet"];
            assert_eq!(get["path"], path, "{dir}: the API's {probe}");
            assert!(
                get["port"] == "http" || get["port"] == 8080,
                "{dir}: the API's {probe} on 8080, not {}",
                get["port"]
            );
        }
        if OVERLAYS.contains(dir) {
            assert_eq!(
                env.get("RUNTIME_CLOUD_METRICS_LISTEN").map(String::as_str),
                Some("0.0.0.0:9090"),
                "{dir}: the internal metrics listener, on the metrics port"
            );
        }

        // The Service.
        let service = r.get("Service", "runtime-cloud-api");
        assert!(
            selects(&service["spec"]["selector"], api.labels()),
            "{dir}: the Service selects the API"
        );
        let ports: BTreeMap<String, (i64, Value)> = service["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().expect("port name").to_owned(),
                    (p["port"].as_i64().expect("port"), p["targetPort"].clone()),
                )
            })
            .collect();
        assert_eq!(
            ports.get("http"),
            Some(&(8080, json!("http"))),
            "{dir}: Service port http"
        );
        assert_eq!(
            ports.get("metrics"),
            Some(&(9090, json!("metrics"))),
            "{dir}: Service port metrics"
        );

        // Every Service, PodDisruptionBudget and NetworkPolicy selects some pod, and every
        // pod template has the labels it is selected by.
        let pods = r.pods();
        for kind in ["Service", "PodDisruptionBudget", "NetworkPolicy"] {
            for o in r.of_kind(kind) {
                let selector = match kind {
                    "Service" => &o["spec"]["selector"],
                    "NetworkPolicy" => &o["spec"]["podSelector"],
                    _ => &o["spec"]["selector"],
                };
                if kind == "NetworkPolicy" && *selector == json!({}) {
                    continue;
                }
                assert!(
                    pods.iter().any(|p| selects(selector, p.labels())),
                    "{dir}: {kind} {} selects no pod",
                    o["metadata"]["name"]
                );
            }
        }
        for pod in &pods {
            if let Some(selector) = pod.object["spec"].get("selector") {
                assert!(
                    selects(selector, pod.labels()),
                    "{dir}: {} selects its own pods",
                    pod.owner
                );
            }
        }

        // PodDisruptionBudgets: an eviction always leaves an API and a worker.
        for component in ["api", "worker"] {
            let pod = r.pod(component);
            let replicas = pod.object["spec"]["replicas"].as_i64().unwrap_or(1);
            let pdbs: Vec<&Value> = r
                .of_kind("PodDisruptionBudget")
                .filter(|p| selects(&p["spec"]["selector"], pod.labels()))
                .collect();
            assert_eq!(
                pdbs.len(),
                1,
                "{dir}: one PodDisruptionBudget for the {component}"
            );
            assert!(replicas >= 2, "{dir}: at least two {component} replicas");
            let spec = &pdbs[0]["spec"];
            let allowed = match (
                spec["minAvailable"].as_i64(),
                spec["maxUnavailable"].as_i64(),
            ) {
                (Some(min), None) => replicas - min,
                (None, Some(max)) => max,
                other => panic!(
                    "{dir}: the {component}'s PDB: give minAvailable or maxUnavailable as a number: {other:?}"
                ),
            };
            assert!(
                (1..replicas).contains(&allowed),
                "{dir}: the {component}'s PDB should let one go and keep one: {spec}"
            );
        }

        // NetworkPolicies: denied by default.
        let deny = r.get("NetworkPolicy", "runtime-cloud-default-deny");
        assert_eq!(
            deny["spec"]["podSelector"],
            json!({}),
            "{dir}: default deny selects every pod"
        );
        assert_eq!(deny["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert!(deny["spec"]["ingress"].is_null() && deny["spec"]["egress"].is_null());
        let policies_of = |pod: &Pod<'_>| -> Vec<&Value> {
            r.of_kind("NetworkPolicy")
                .filter(|p| {
                    p["spec"]["podSelector"] != json!({})
                        && selects(&p["spec"]["podSelector"], pod.labels())
                })
                .collect()
        };
        // Ingress to the API: 8080 from anywhere, 9090 from the monitoring namespace only.
        let mut ingress: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
        for p in policies_of(&api) {
            for rule in p["spec"]["ingress"].as_array().into_iter().flatten() {
                for port in rule["ports"]
                    .as_array()
                    .expect("ingress rules name their ports")
                {
                    ingress
                        .entry(port["port"].as_i64().expect("numeric port"))
                        .or_default()
                        .push(rule["from"].clone());
                }
            }
        }
        assert_eq!(
            ingress.keys().copied().collect::<Vec<_>>(),
            [8080, 9090],
            "{dir}: API ingress ports"
        );
        assert_eq!(ingress[&8080], [Value::Null], "{dir}: 8080 from anywhere");
        assert_eq!(
            ingress[&9090],
            [
                json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}])
            ],
            "{dir}: 9090 from the monitoring namespace only"
        );
        // Egress: what each role talks to.
        for (component, needed) in [
            ("api", &[53, 5432, 7233, 4222][..]),
            ("worker", &[53, 5432, 7233, 4222, 443][..]),
            ("pool-worker", &[53, 5432, 7233, 443][..]),
            ("migrate", &[53, 5432][..]),
        ] {
            let pod = r.pod(component);
            let policies = policies_of(&pod);
            assert!(
                !policies.is_empty(),
                "{dir}: no NetworkPolicy for the {component}"
            );
            let mut open = BTreeSet::new();
            for p in &policies {
                for rule in p["spec"]["egress"].as_array().into_iter().flatten() {
                    for port in rule["ports"]
                        .as_array()
                        .expect("egress rules name their ports")
                    {
                        open.insert(port["port"].as_i64().expect("numeric port"));
                    }
                }
                if component != "api" {
                    assert!(
                        p["spec"]["ingress"].is_null(),
                        "{dir}: the {component} serves nothing"
                    );
                }
            }
            for port in needed {
                assert!(
                    open.contains(port),
                    "{dir}: the {component} may not reach port {port}: {open:?}"
                );
            }
            assert!(
                component != "migrate" || open.len() == needed.len(),
                "{dir}: the migration reaches PostgreSQL (and DNS) only: {open:?}"
            );
        }
    }
}

/// The overlays reach Temporal over TLS — mutual TLS to the self-hosted frontend, an API key
/// to Temporal Cloud — and encrypt payloads, in every process that talks to Temporal (the API,
/// the workers, the pool worker); the base alone does neither.
#[test]
fn the_overlays_reach_temporal_over_tls_and_encrypt_payloads() {
    let talkers = ["api", "worker", "pool-worker"];
    let env_of = |r: &Rendering, component: &str| {
        let pod = r.pod(component);
        r.env(&pod, &pod.spec()["containers"][0])
    };
    let base = render(DEPLOYMENTS[0]);
    for component in talkers {
        let env = env_of(&base, component);
        assert_eq!(env.get("TEMPORAL_TLS").map(String::as_str), Some("false"));
        assert!(!env.contains_key("RUNTIME_CLOUD_PAYLOAD_KEY_FILES"));
    }

    let mtls = render(OVERLAYS[0]);
    let cloud = render(OVERLAYS[1]);
    for component in talkers {
        let env = env_of(&mtls, component);
        let who = format!("self-hosted-mtls, {component}");
        assert_eq!(
            env["TEMPORAL_ADDRESS"], "temporal-frontend.temporal.svc:7233",
            "{who}"
        );
        assert_eq!(env["TEMPORAL_TLS"], "true", "{who}");
        for file in [
            "TEMPORAL_TLS_CA_FILE",
            "TEMPORAL_TLS_CERT_FILE",
            "TEMPORAL_TLS_KEY_FILE",
        ] {
            assert!(env.contains_key(file), "{who}: {file} (mutual TLS)");
        }
        assert!(
            !env.contains_key("TEMPORAL_API_KEY_FILE"),
            "{who}: no API key"
        );

        let env = env_of(&cloud, component);
        let who = format!("temporal-cloud, {component}");
        let address = &env["TEMPORAL_ADDRESS"];
        let host = address
            .strip_suffix(":7233")
            .unwrap_or_else(|| panic!("{who}: port 7233"));
        let namespace = host
            .strip_suffix(".tmprl.cloud")
            .unwrap_or_else(|| panic!("{who}: <namespace>.<account>.tmprl.cloud, not {address}"));
        assert_eq!(
            &env["TEMPORAL_NAMESPACE"], namespace,
            "{who}: the endpoint's namespace"
        );
        assert_eq!(env["TEMPORAL_TLS"], "true", "{who}");
        assert!(
            env.contains_key("TEMPORAL_API_KEY_FILE"),
            "{who}: the API key"
        );
        for file in ["TEMPORAL_TLS_CERT_FILE", "TEMPORAL_TLS_KEY_FILE"] {
            assert!(
                !env.contains_key(file),
                "{who}: an API key, not a client certificate"
            );
        }

        for (name, env) in [
            ("self-hosted-mtls", env_of(&mtls, component)),
            ("temporal-cloud", env),
        ] {
            let keys = env
                .get("RUNTIME_CLOUD_PAYLOAD_KEY_FILES")
                .unwrap_or_else(|| panic!("{name}, {component}: payload encryption"));
            assert!(
                keys.split(',').all(|k| k.trim().ends_with(".key")),
                "{name}, {component}: key files named <key id>.key: {keys}"
            );
        }
    }
    // The migration talks to PostgreSQL only: no Temporal settings.
    for r in [&mtls, &cloud] {
        let env = env_of(r, "migrate");
        assert!(
            !env.keys()
                .any(|k| k.starts_with("TEMPORAL_") || k.contains("PAYLOAD")),
            "{}: the migration needs no Temporal settings: {env:?}",
            r.dir
        );
    }
}
