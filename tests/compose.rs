//! The production-like stack (`docker-compose.yml`) and its image (`Dockerfile`).
//!
//! No Docker engine runs where the tests run, so they check what can be checked without one:
//! the compose file against the Compose Specification's JSON schema (with `check-jsonschema`,
//! installed by `scripts/install-tools`), the runtime-cloud services against the binary itself
//! (their commands parse, their environment is what the configuration reads and it loads, the
//! API's healthcheck answers on a real API), the wiring between the services, and the
//! Dockerfile's stages.
//!
//! `tests/fixtures/compose-spec.json` is the Compose Specification schema, vendored unchanged
//! from the GitHub repository `compose-spec/compose-spec`, path `schema/compose-spec.json`,
//! commit `00655e2222608fa6eaecdf12ac5195889ca2244a`.

use crate::common::Stack;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_runtime-cloud");
/// The JWT secret the tests interpolate: the compose file takes it from the environment.
const TEST_JWT_SECRET: &str = "compose-test-secret";
/// The subcommands a runtime-cloud service of the stack may run.
const SERVICE_ROLES: &[&str] = &["migrate", "api", "worker"];

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn output_text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// --- the schema ------------------------------------------------------------------------------

/// `check-jsonschema` on `file` against the vendored Compose schema.
fn check_jsonschema(file: &Path) -> Output {
    Command::new("python3")
        .args(["-m", "check_jsonschema", "--schemafile"])
        .arg(repo("tests/fixtures/compose-spec.json"))
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .expect("run `python3 -m check_jsonschema` (scripts/install-tools installs it)")
}

/// docker-compose.yml is valid under the Compose Specification schema.
#[test]
fn compose_file_matches_the_compose_spec_schema() {
    let out = check_jsonschema(&repo("docker-compose.yml"));
    assert!(
        out.status.success(),
        "docker-compose.yml does not match the Compose Specification schema \
         (tests/fixtures/compose-spec.json):\n{}",
        output_text(&out)
    );
}

/// The schema check really fails on a broken file: a misspelt key, an unknown depends_on
/// condition, a wrong type. (Guards against a schema that accepts everything.)
#[test]
fn schema_check_rejects_a_broken_compose_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = load_compose().doc;
    let write = |name: &str, doc: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(doc).expect("JSON")).expect("write");
        path
    };
    // The file as parsed, written back as JSON (which is YAML), still passes.
    let out = check_jsonschema(&write("as-parsed.json", &good));
    assert!(
        out.status.success(),
        "the parsed compose file should pass: {}",
        output_text(&out)
    );

    let mut typo = good.clone();
    let api = typo["services"]["api"]
        .as_object_mut()
        .expect("api service");
    let env = api.remove("environment").expect("api environment");
    api.insert("enviroment".into(), env);
    let mut condition = good.clone();
    condition["services"]["api"]["depends_on"]["temporal"]["condition"] = json!("service_ready");
    let mut ports = good;
    ports["services"]["api"]["ports"] = json!("8080:8080");

    for (name, doc, expected) in [
        ("typo.json", typo, "enviroment"),
        ("condition.json", condition, "service_ready"),
        ("ports.json", ports, "8080:8080"),
    ] {
        let out = check_jsonschema(&write(name, &doc));
        let text = output_text(&out);
        assert!(
            !out.status.success(),
            "check-jsonschema accepted a broken file ({name}):\n{text}"
        );
        assert!(
            text.contains(expected),
            "the error for {name} should name {expected:?}:\n{text}"
        );
    }
}

// --- the compose file, parsed ----------------------------------------------------------------

/// YAML to JSON with ruamel.yaml (check-jsonschema's own YAML loader): anchors, aliases and
/// `<<` merge keys resolved, as Compose resolves them.
const YAML_TO_JSON: &str = "import json, sys\n\
from ruamel.yaml import YAML\n\
with open(sys.argv[1]) as f:\n    json.dump(YAML(typ='safe', pure=True).load(f), sys.stdout)\n";

struct Compose {
    doc: Value,
}

fn load_compose() -> Compose {
    let out = Command::new("python3")
        .args(["-c", YAML_TO_JSON])
        .arg(repo("docker-compose.yml"))
        .stdin(Stdio::null())
        .output()
        .expect("run python3 (ruamel.yaml comes with check-jsonschema)");
    assert!(
        out.status.success(),
        "docker-compose.yml does not parse as YAML:\n{}",
        output_text(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("the YAML as JSON");
    assert!(
        doc["services"].is_object(),
        "docker-compose.yml has no services"
    );
    Compose { doc }
}

impl Compose {
    fn services(&self) -> &Map<String, Value> {
        self.doc["services"].as_object().expect("services")
    }

    #[track_caller]
    fn service(&self, name: &str) -> &Value {
        self.services()
            .get(name)
            .unwrap_or_else(|| panic!("docker-compose.yml has no service {name:?}"))
    }

    /// The one service that runs the image (one starting with one of `images`) as it is: a
    /// service that overrides the entrypoint runs a tool of the image, not its server.
    #[track_caller]
    fn service_with_image(&self, images: &[&str]) -> (&str, &Value) {
        let found: Vec<_> = self
            .services()
            .iter()
            .filter(|(_, s)| {
                s["entrypoint"].is_null()
                    && s["image"]
                        .as_str()
                        .is_some_and(|i| images.iter().any(|p| i.starts_with(p)))
            })
            .collect();
        assert_eq!(
            found.len(),
            1,
            "expected exactly one service with an image {images:?}, found {:?}",
            found.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
        (found[0].0.as_str(), found[0].1)
    }

    /// The services built from this repository's Dockerfile.
    fn runtime_cloud_services(&self) -> Vec<(&str, &Value)> {
        self.services()
            .iter()
            .filter(|(_, s)| !s["build"].is_null())
            .map(|(n, s)| (n.as_str(), s))
            .collect()
    }

    /// Services running `role` (`api`, `worker`, `migrate`).
    fn with_role(&self, role: &str) -> Vec<(&str, &Value)> {
        self.runtime_cloud_services()
            .into_iter()
            .filter(|(name, s)| subcommand(name, s).1 == role)
            .collect()
    }

    /// Whether `from` waits for `to`, directly or through other services.
    fn depends_on(&self, from: &str, to: &str) -> bool {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(s) = stack.pop() {
            for dep in depends_on(self.service(&s)).into_keys() {
                if dep == to {
                    return true;
                }
                if seen.insert(dep.clone()) {
                    stack.push(dep);
                }
            }
        }
        false
    }
}

/// A service's `depends_on` as name → condition (the short list form means `service_started`).
fn depends_on(service: &Value) -> BTreeMap<String, String> {
    match &service["depends_on"] {
        Value::Array(names) => names
            .iter()
            .map(|n| {
                (
                    n.as_str().unwrap_or_default().to_owned(),
                    "service_started".to_owned(),
                )
            })
            .collect(),
        Value::Object(map) => map
            .iter()
            .map(|(n, d)| {
                let c = d["condition"].as_str().unwrap_or("service_started");
                (n.clone(), c.to_owned())
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// A service's environment as written (before interpolation); map or `KEY=VALUE` list form.
fn raw_env(service: &Value) -> BTreeMap<String, String> {
    let scalar = |v: &Value| match v {
        Value::Null => String::new(),
        other => scalar(other),
    };
    match &service["environment"] {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                let s = i.as_str().unwrap_or_default();
                let (k, v) = s.split_once('=').unwrap_or((s, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The shell environment the tests run `docker compose` with: only the JWT secret is set.
fn test_shell() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([("RUNTIME_CLOUD_JWT_SECRET", TEST_JWT_SECRET)])
}

/// A service's environment after Compose's interpolation with [`test_shell`].
#[track_caller]
fn env(name: &str, service: &Value) -> BTreeMap<String, String> {
    raw_env(service)
        .into_iter()
        .map(|(k, v)| {
            let v = interpolate(&v, &test_shell())
                .unwrap_or_else(|e| panic!("service {name}, {k}: {e}"));
            (k, v)
        })
        .collect()
}

/// Compose's variable interpolation: `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
/// `${VAR:?error}`, `${VAR?error}` and `$$` for a literal `$`.
fn interpolate(text: &str, shell: &BTreeMap<&str, &str>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let end = r
                .find('}')
                .ok_or_else(|| format!("unclosed ${{ in {text:?}"))?;
            let expr = &r[..end];
            rest = &r[end + 1..];
            let name_end = expr
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(expr.len());
            let (name, op) = expr.split_at(name_end);
            let value = shell.get(name).copied();
            let empty = value.is_none_or(str::is_empty);
            let resolved = match op {
                "" => value.unwrap_or_default().to_owned(),
                _ if op.starts_with(":-") => {
                    if empty {
                        op[2..].to_owned()
                    } else {
                        value.unwrap_or_default().to_owned()
                    }
                }
                _ if op.starts_with('-') => value.unwrap_or(&op[1..]).to_owned(),
                _ if op.starts_with(":?") => {
                    if empty {
                        return Err(format!("required variable {name} is missing: {}", &op[2..]));
                    }
                    value.unwrap_or_default().to_owned()
                }
                _ if op.starts_with('?') => value
                    .ok_or_else(|| format!("required variable {name} is missing: {}", &op[1..]))?
                    .to_owned(),
                _ => return Err(format!("unsupported interpolation ${{{expr}}}")),
            };
            out.push_str(&resolved);
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.push_str(shell.get(&rest[..end]).copied().unwrap_or_default());
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A service's command as a list; the string form is refused (no shell parses it).
#[track_caller]
fn command(name: &str, service: &Value) -> Vec<String> {
    let list = service["command"].as_array().unwrap_or_else(|| {
        panic!(
            "service {name}: give `command` as a list, e.g. [\"--log-format\", \"json\", \"api\"]"
        )
    });
    list.iter()
        .map(|a| a.as_str().expect("command items are strings").to_owned())
        .collect()
}

/// A runtime-cloud service's global flags and subcommand.
#[track_caller]
fn subcommand(name: &str, service: &Value) -> (Vec<String>, String) {
    let args = command(name, service);
    let mut globals = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--log-format" || a == "--config" {
            let v = it
                .next()
                .unwrap_or_else(|| panic!("service {name}: {a} needs a value"));
            globals.extend([a, v]);
        } else if a.starts_with("--") {
            globals.push(a);
        } else {
            return (globals, a);
        }
    }
    panic!("service {name}: the command names no subcommand")
}

/// A YAML scalar as text (`8080` and `"8080"` alike).
fn scalar(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `[host_ip:][published:]target[/protocol]` (or the long form) → (published, target).
fn port_mapping(spec: &Value) -> (Option<String>, String) {
    if let Some(obj) = spec.as_object() {
        return (obj.get("published").map(scalar), scalar(&obj["target"]));
    }
    let s = scalar(spec);
    let s = s.split('/').next().unwrap_or_default();
    let parts: Vec<&str> = s.rsplitn(3, ':').collect();
    (parts.get(1).map(|p| p.to_string()), parts[0].to_owned())
}

// --- what the binary reads -------------------------------------------------------------------

/// Every environment variable the binary reads: the configuration table, which loading, the
/// flags and the telemetry setup read through (its unit tests check that each file setting's
/// variable lands in its key).
fn variables_the_binary_reads() -> BTreeSet<String> {
    runtime_cloud::config::SETTINGS
        .iter()
        .map(|s| s.env.to_owned())
        .collect()
}

/// `(name, type)` of every custom search attribute, from `search_attributes::ALL`.
fn search_attributes() -> BTreeSet<(String, String)> {
    let text: String = read("workflows/src/search_attributes.rs")
        .split_whitespace()
        .collect();
    let all = text
        .split_once("pubconstALL:&[(&str,&str)]=&[")
        .map(|(_, rest)| rest[..rest.find("];").unwrap_or(rest.len())].to_owned())
        .expect("`pub const ALL` in workflows/src/search_attributes.rs");
    let set: BTreeSet<(String, String)> = all
        .split("),")
        .filter_map(|pair| {
            let parts: Vec<&str> = pair.split('"').collect();
            (parts.len() >= 4).then(|| (parts[1].to_owned(), parts[3].to_owned()))
        })
        .collect();
    assert!(!set.is_empty(), "no search attributes parsed from {all}");
    set
}

/// Runs the binary with exactly `env` (plus PATH).
fn run_bin(args: &[String], env: &BTreeMap<String, String>) -> Output {
    Command::new(BIN)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env)
        .stdin(Stdio::null())
        .output()
        .expect("run runtime-cloud")
}

// --- the runtime-cloud services --------------------------------------------------------------

/// Every service built from the Dockerfile runs a real subcommand with flags the binary
/// accepts, sets only variables the binary reads, and its environment loads.
#[test]
fn runtime_cloud_services_run_the_binary_with_what_it_reads() {
    let compose = load_compose();
    let services = compose.runtime_cloud_services();
    assert!(
        !services.is_empty(),
        "no service is built from the Dockerfile (`build:`)"
    );
    let allowed = variables_the_binary_reads();

    // One image, built once from this repository's Dockerfile.
    let (first, s0) = services[0];
    let image = s0["image"]
        .as_str()
        .unwrap_or_else(|| panic!("service {first}: name the built image (`image:`)"));
    for (name, s) in &services {
        assert_eq!(
            s["image"], s0["image"],
            "service {name}: another image than {first}"
        );
        assert_eq!(
            s["build"], s0["build"],
            "service {name}: another build than {first}"
        );
        let (context, dockerfile) = match &s["build"] {
            Value::String(c) => (c.clone(), "Dockerfile".to_owned()),
            b => (
                b["context"].as_str().unwrap_or(".").to_owned(),
                b["dockerfile"].as_str().unwrap_or("Dockerfile").to_owned(),
            ),
        };
        assert!(
            repo(&context).join(&dockerfile).is_file(),
            "service {name}: no {dockerfile} in the build context {context:?}"
        );
    }
    for (name, s) in compose.services() {
        if s["build"].is_null() {
            assert_ne!(
                s["image"].as_str(),
                Some(image),
                "service {name} uses {image} without building it: Compose would try to pull it"
            );
        }
    }

    let scratch = tempfile::tempdir().expect("temp dir");
    for (name, s) in &services {
        let (globals, sub) = subcommand(name, s);
        assert!(
            SERVICE_ROLES.contains(&sub.as_str()),
            "service {name} runs `{sub}`; a stack service runs one of {SERVICE_ROLES:?}"
        );
        assert_eq!(
            globals,
            ["--log-format", "json"],
            "service {name}: containers log JSON (`--log-format json` before the subcommand)"
        );

        // The command parses: the same arguments, then --help (clap checks everything before it).
        let mut args = command(name, s);
        args.push("--help".into());
        let out = run_bin(&args, &BTreeMap::new());
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains(&format!("runtime-cloud {sub}")),
            "service {name}: `runtime-cloud {}` is refused:\n{}",
            args.join(" "),
            output_text(&out)
        );

        // Only variables the binary reads.
        let env = env(name, s);
        let unknown: Vec<_> = env.keys().filter(|k| !allowed.contains(*k)).collect();
        assert!(
            unknown.is_empty(),
            "service {name} sets {unknown:?}, which runtime-cloud does not read (it reads {allowed:?})"
        );

        // The environment loads: `token` reads the whole configuration, touches no network,
        // and fails on any value the configuration refuses. The data dir is a scratch one.
        let mut env = env;
        env.insert(
            "RUNTIME_CLOUD_DATA_DIR".into(),
            scratch.path().join(name).display().to_string(),
        );
        let mut args = globals.clone();
        args.extend(
            [
                "token",
                "--tenant",
                "compose-check",
                "--scope",
                "factory.provisioning.read",
            ]
            .map(String::from),
        );
        let out = run_bin(&args, &env);
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .split('.')
                    .count()
                    == 3,
            "service {name}: the binary does not load this environment {env:?}:\n{}",
            output_text(&out)
        );
    }
}

/// The roles: one migration that runs to completion first, one API, exactly two workers, and
/// one shared configuration (read DB, Temporal, task queue, data volume).
#[test]
fn the_stack_has_one_migration_one_api_and_two_workers() {
    let compose = load_compose();
    let migrate = compose.with_role("migrate");
    let api = compose.with_role("api");
    let workers = compose.with_role("worker");
    assert_eq!(migrate.len(), 1, "expected one `migrate` service");
    assert_eq!(api.len(), 1, "expected one `api` service");
    assert_eq!(
        workers.len(),
        2,
        "expected exactly two worker services, found {:?}",
        workers.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    let (migrate_name, migrate_service) = migrate[0];
    assert_eq!(
        migrate_service["restart"], "no",
        "service {migrate_name} is a one-shot: `restart: \"no\"`"
    );
    for (name, _) in api.iter().chain(&workers) {
        assert_eq!(
            depends_on(compose.service(name))
                .get(migrate_name)
                .map(String::as_str),
            Some("service_completed_successfully"),
            "service {name} must wait for {migrate_name} to complete successfully"
        );
    }

    // Everything that shares the read DB and the task queue shares them exactly.
    let services = compose.runtime_cloud_services();
    let shared = [
        "DATABASE_URL",
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
        "RUNTIME_CLOUD_TASK_QUEUE",
        "RUNTIME_CLOUD_DATA_DIR",
    ];
    let (first, s0) = services[0];
    let env0 = env(first, s0);
    for (name, s) in &services {
        let e = env(name, s);
        for key in shared {
            assert_eq!(
                e.get(key),
                env0.get(key),
                "services {name} and {first} differ on {key}"
            );
        }
    }
    // The workers apply to and observe the sandbox targets under the data dir: one volume.
    let data_dir = env0
        .get("RUNTIME_CLOUD_DATA_DIR")
        .expect("RUNTIME_CLOUD_DATA_DIR is set")
        .clone();
    let mut volumes = BTreeSet::new();
    for (name, s) in &services {
        let mount = s["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .find_map(|v| {
                let mut parts = v.split(':');
                let (source, target) = (parts.next()?, parts.next()?);
                (target == data_dir).then(|| source.to_owned())
            })
            .unwrap_or_else(|| panic!("service {name}: mount a named volume at {data_dir}"));
        assert!(
            compose.doc["volumes"].get(&mount).is_some(),
            "service {name}: volume {mount} is not declared under `volumes:`"
        );
        volumes.insert(mount);
    }
    assert_eq!(
        volumes.len(),
        1,
        "the runtime-cloud services must share one data volume: {volumes:?}"
    );
}

/// DATABASE_URL names the PostgreSQL service, its database and credentials; TEMPORAL_ADDRESS
/// the Temporal service and its namespace; NATS_URL the NATS service with JetStream; the
/// search attributes the workflows set are registered before the workers start; every
/// `depends_on` condition can be met.
#[test]
fn services_are_wired_to_each_other() {
    let compose = load_compose();
    let shell = test_shell();
    let var = |s: &Value, key: &str, default: &str| {
        raw_env(s)
            .get(key)
            .map(|v| interpolate(v, &shell).expect("interpolates"))
            .unwrap_or_else(|| default.to_owned())
    };

    // PostgreSQL: the read tables.
    let (pg, pg_service) = compose.service_with_image(&["postgres:"]);
    let pg_user = var(pg_service, "POSTGRES_USER", "postgres");
    let pg_password = var(pg_service, "POSTGRES_PASSWORD", "");
    let pg_db = var(pg_service, "POSTGRES_DB", &pg_user);
    let expected_url = format!("postgres://{pg_user}:{pg_password}@{pg}:5432/{pg_db}");
    // Temporal.
    let (temporal, temporal_service) = compose.service_with_image(&["temporalio/auto-setup:"]);
    let namespace = var(temporal_service, "DEFAULT_NAMESPACE", "default");
    let temporal_address = format!("{temporal}:7233");
    assert!(
        ["postgres12", "postgres12_pgx"].contains(&var(temporal_service, "DB", "").as_str()),
        "service {temporal}: DB=postgres12 (Temporal on PostgreSQL)"
    );
    for (key, expected) in [
        ("POSTGRES_SEEDS", pg),
        ("POSTGRES_USER", pg_user.as_str()),
        ("POSTGRES_PWD", pg_password.as_str()),
    ] {
        assert_eq!(
            var(temporal_service, key, ""),
            expected,
            "service {temporal}: {key}"
        );
    }
    assert_eq!(
        depends_on(temporal_service).get(pg).map(String::as_str),
        Some("service_healthy"),
        "service {temporal} must wait for {pg} to be healthy"
    );
    // NATS with JetStream.
    let (nats, nats_service) = compose.service_with_image(&["nats:"]);
    let nats_args = command(nats, nats_service);
    assert!(
        nats_args.iter().any(|a| a == "-js" || a == "--jetstream"),
        "service {nats}: JetStream must be on (`--jetstream`): {nats_args:?}"
    );
    let nats_port = nats_args
        .iter()
        .position(|a| a == "-p" || a == "--port")
        .and_then(|i| nats_args.get(i + 1).cloned())
        .unwrap_or_else(|| "4222".into());

    for (name, s) in compose.runtime_cloud_services() {
        let env = env(name, s);
        assert_eq!(
            env.get("DATABASE_URL"),
            Some(&expected_url),
            "service {name}: DATABASE_URL must name the {pg} service's database and credentials"
        );
        assert_eq!(
            env.get("TEMPORAL_ADDRESS"),
            Some(&temporal_address),
            "service {name}: TEMPORAL_ADDRESS"
        );
        assert_eq!(
            env.get("TEMPORAL_NAMESPACE")
                .map_or("default", String::as_str),
            namespace,
            "service {name}: TEMPORAL_NAMESPACE must be the namespace {temporal} creates"
        );
        if let Some(url) = env.get("NATS_URL") {
            assert_eq!(
                url,
                &format!("nats://{nats}:{nats_port}"),
                "service {name}: NATS_URL"
            );
        }
        let (_, sub) = subcommand(name, s);
        if sub != "migrate" {
            assert!(
                compose.depends_on(name, temporal),
                "service {name} must wait for {temporal}"
            );
        }
    }
    // The workers run the outbox relay.
    for (name, s) in compose.with_role("worker") {
        assert!(
            env(name, s).contains_key("NATS_URL"),
            "worker {name}: set NATS_URL, the outbox relay runs in the workers"
        );
        assert!(
            compose.depends_on(name, nats),
            "worker {name} must wait for {nats}"
        );
    }

    // The workflows' search attributes are registered on the namespace before the workers run.
    let (setup, setup_service) = compose
        .services()
        .iter()
        .find(|(_, s)| {
            s["command"].as_array().is_some_and(|c| c.iter().any(|a| a == "search-attribute"))
        })
        .map(|(n, s)| (n.as_str(), s))
        .expect("a service that registers the search attributes (`temporal operator search-attribute create`)");
    let args = command(setup, setup_service);
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    assert_eq!(
        value_of("--address"),
        Some(temporal_address.as_str()),
        "service {setup}: --address"
    );
    assert_eq!(
        value_of("--namespace"),
        Some(namespace.as_str()),
        "service {setup}: --namespace"
    );
    let registered: BTreeSet<(String, String)> = args
        .windows(4)
        .filter(|w| w[0] == "--name" && w[2] == "--type")
        .map(|w| (w[1].clone(), w[3].clone()))
        .collect();
    assert_eq!(
        registered,
        search_attributes(),
        "service {setup} must register exactly search_attributes::ALL"
    );
    for (name, _) in compose.with_role("worker") {
        assert_eq!(
            depends_on(compose.service(name))
                .get(setup)
                .map(String::as_str),
            Some("service_completed_successfully"),
            "worker {name} must wait for {setup} to complete successfully"
        );
    }

    // Every depends_on can be met: the target exists, has a healthcheck when waited on for
    // health, and is a one-shot when waited on for completion.
    for (name, s) in compose.services() {
        for (dep, condition) in depends_on(s) {
            let target = compose.service(&dep);
            match condition.as_str() {
                "service_healthy" => assert!(
                    target["healthcheck"]["test"].is_array()
                        && target["healthcheck"]["disable"] != true,
                    "service {name} waits for {dep} to be healthy, but {dep} has no healthcheck"
                ),
                "service_completed_successfully" => assert!(
                    target["restart"].is_null() || target["restart"] == "no",
                    "service {name} waits for {dep} to complete, but {dep} restarts"
                ),
                _ => {}
            }
        }
    }
}

/// The JWT secret comes from the environment and is required, never written in the file.
#[test]
fn the_jwt_secret_is_required_from_the_environment() {
    let compose = load_compose();
    let (api, api_service) = compose.with_role("api")[0];
    let raw = raw_env(api_service)
        .get("RUNTIME_CLOUD_JWT_SECRET")
        .cloned()
        .unwrap_or_else(|| panic!("service {api}: set RUNTIME_CLOUD_JWT_SECRET"));
    assert!(
        raw.starts_with("${RUNTIME_CLOUD_JWT_SECRET:?"),
        "service {api}: RUNTIME_CLOUD_JWT_SECRET must be `${{RUNTIME_CLOUD_JWT_SECRET:?…}}`, not {raw:?}"
    );
    assert!(
        interpolate(&raw, &BTreeMap::new()).is_err(),
        "an unset RUNTIME_CLOUD_JWT_SECRET must stop Compose"
    );
    for (name, s) in compose.services() {
        if let Some(v) = raw_env(s).get("RUNTIME_CLOUD_JWT_SECRET") {
            assert!(
                v.starts_with("${"),
                "service {name}: the JWT secret is written in the file"
            );
        }
    }
}

/// The API listens on all interfaces on the published port, and its healthcheck — run as
/// written, against a real API on the test Temporal server — answers only when the API does.
#[tokio::test]
async fn the_api_healthcheck_answers_on_a_real_api() {
    let compose = load_compose();
    let (api, api_service) = compose.with_role("api")[0];
    let listen = env(api, api_service)
        .get("RUNTIME_CLOUD_LISTEN")
        .cloned()
        .unwrap_or_else(|| panic!("service {api}: set RUNTIME_CLOUD_LISTEN"));
    let addr: std::net::SocketAddr = listen
        .parse()
        .unwrap_or_else(|e| panic!("service {api}: RUNTIME_CLOUD_LISTEN={listen:?}: {e}"));
    assert!(
        addr.ip().is_unspecified(),
        "service {api}: listen on 0.0.0.0, not {listen}: a published port cannot reach loopback"
    );
    let port = addr.port().to_string();
    let published: Vec<_> = api_service["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(port_mapping)
        .collect();
    assert!(
        published.iter().any(|(p, t)| *t == port && p.is_some()),
        "service {api}: publish the listen port {port} (ports: {published:?})"
    );

    let test = api_service["healthcheck"]["test"]
        .as_array()
        .unwrap_or_else(|| panic!("service {api}: give the healthcheck test as a list"));
    let mut argv: Vec<String> = test
        .iter()
        .map(|a| a.as_str().expect("strings").to_owned())
        .collect();
    match argv.first().map(String::as_str) {
        Some("CMD") => {
            argv.remove(0);
        }
        Some("CMD-SHELL") => argv = vec!["sh".into(), "-c".into(), argv[1..].join(" ")],
        other => panic!("service {api}: healthcheck test starts with {other:?}"),
    }
    let script = argv.join(" ");
    assert!(
        ["/healthz", "/readyz"].iter().any(|p| script.contains(p)),
        "service {api}: the healthcheck should probe /healthz or /readyz: {script}"
    );
    let target = format!("127.0.0.1/{port}");
    assert!(
        script.contains(&target),
        "service {api}: the healthcheck should probe {target} (the listen port): {script}"
    );
    let run = |port: u16| {
        let argv: Vec<String> = argv
            .iter()
            .map(|a| a.replace(&target, &format!("127.0.0.1/{port}")))
            .collect();
        Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .output()
            .expect("run the healthcheck")
    };

    let stack = Stack::start().await;
    let stack_port: u16 = stack
        .base_url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the stack's port");
    for probe in ["/healthz", "/readyz"] {
        stack.anonymous().get(probe).await.expect(200);
    }
    let out = run(stack_port);
    assert!(
        out.status.success(),
        "the API healthcheck fails on a ready API:\n{}",
        output_text(&out)
    );
    drop(stack);
    let out = run(stack_port);
    assert!(
        !out.status.success(),
        "the API healthcheck passes with no API listening:\n{}",
        output_text(&out)
    );
}

// --- the Dockerfile --------------------------------------------------------------------------

/// One Dockerfile instruction: the keyword (upper case) and the rest of the line, with line
/// continuations joined and comments dropped.
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
}

fn dockerfile() -> Vec<Vec<Instruction>> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        match line.trim_end().strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                let text = std::mem::take(&mut current);
                let text = text.trim();
                let (keyword, args) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
                instructions.push(Instruction {
                    keyword: keyword.to_uppercase(),
                    args: args.split_whitespace().collect::<Vec<_>>().join(" "),
                });
            }
        }
    }
    // Split into stages at every FROM.
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for i in instructions {
        if i.keyword == "FROM" {
            stages.push(Vec::new());
        }
        stages
            .last_mut()
            .expect("the Dockerfile starts with FROM")
            .push(i);
    }
    stages
}

/// The `ENV` pairs of a stage (`K=V …` or `K V`).
fn stage_env(stage: &[Instruction]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for i in stage.iter().filter(|i| i.keyword == "ENV") {
        if i.args.contains('=') {
            for pair in i.args.split_whitespace() {
                if let Some((k, v)) = pair.split_once('=') {
                    env.insert(k.to_owned(), v.trim_matches('"').to_owned());
                }
            }
        } else if let Some((k, v)) = i.args.split_once(' ') {
            env.insert(k.to_owned(), v.trim_matches('"').to_owned());
        }
    }
    env
}

/// `(major, minor)` of a version like `1.92` or `1.92.1`.
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next().flatten().unwrap_or(u32::MAX)))
}

/// Multi-stage; the builder builds the locked release binary with protoc on a Rust new enough
/// for the workspace; the runtime stage is the same Debian release, runs as a numeric non-root
/// user, copies only the binary, and its defaults agree with the compose file.
#[test]
fn dockerfile_builds_in_stages_and_runs_only_the_binary_as_non_root() {
    let stages = dockerfile();
    assert!(
        stages.len() >= 2,
        "the Dockerfile needs a build stage and a runtime stage"
    );
    let runtime = stages.last().expect("runtime stage");
    let builders = &stages[..stages.len() - 1];
    let from = |stage: &[Instruction]| {
        let args: Vec<String> = stage[0].args.split_whitespace().map(String::from).collect();
        let image = args
            .iter()
            .find(|a| !a.starts_with("--"))
            .cloned()
            .unwrap_or_default();
        let name = args
            .iter()
            .position(|a| a.eq_ignore_ascii_case("as"))
            .and_then(|i| args.get(i + 1).cloned());
        (image, name)
    };

    // The build stage.
    let build = builders
        .iter()
        .find(|s| {
            s.iter()
                .any(|i| i.keyword == "RUN" && i.args.contains("cargo build"))
        })
        .expect("a stage that runs `cargo build`");
    let (builder_image, builder_name) = from(build);
    let cargo = build
        .iter()
        .find(|i| i.keyword == "RUN" && i.args.contains("cargo build"))
        .expect("cargo build");
    for flag in ["--release", "--locked", "--bin runtime-cloud"] {
        assert!(
            cargo.args.contains(flag),
            "the build should run `cargo build {flag}`: {}",
            cargo.args
        );
    }
    assert!(
        build
            .iter()
            .any(|i| i.keyword == "RUN" && i.args.contains("protobuf-compiler")),
        "the build stage should install protobuf-compiler (protoc, for api/build.rs)"
    );
    let rust_version = read("Cargo.toml")
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = \""))
        .map(|v| v.trim_end_matches('"').to_owned())
        .expect("rust-version in Cargo.toml");
    let tag = builder_image.strip_prefix("rust:").unwrap_or_else(|| {
        panic!("the builder should be an official rust image, not {builder_image}")
    });
    let tag_version = tag.split('-').next().unwrap_or_default();
    if tag_version != "1" {
        assert!(
            major_minor(tag_version) >= major_minor(&rust_version),
            "the builder's Rust {tag_version} is older than the workspace's rust-version {rust_version}"
        );
    }

    // The same Debian release in both stages, so the binary finds the glibc it was built for.
    let (runtime_image, _) = from(runtime);
    let debian = |image: &str| {
        [
            ("bookworm", 12),
            ("debian12", 12),
            ("trixie", 13),
            ("debian13", 13),
            ("bullseye", 11),
            ("debian11", 11),
        ]
        .into_iter()
        .find(|(name, _)| image.contains(name))
        .map(|(_, v)| v)
    };
    assert_eq!(
        debian(&builder_image),
        debian(&runtime_image),
        "build on {builder_image} but run on {runtime_image}: use the same Debian release"
    );
    assert!(
        debian(&runtime_image).is_some(),
        "the runtime image {runtime_image} should be Debian based"
    );

    // Non-root, numerically (so runAsNonRoot can check it).
    let user = runtime
        .iter()
        .rev()
        .find(|i| i.keyword == "USER")
        .map(|i| i.args.clone())
        .expect("the runtime stage should set USER");
    let uid = user.split(':').next().unwrap_or_default();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "the runtime stage should run as a numeric non-root user, not {user:?}"
    );

    // Only the binary comes from the build.
    assert!(
        !runtime.iter().any(|i| i.keyword == "ADD"),
        "the runtime stage should not ADD anything"
    );
    let copies: Vec<_> = runtime.iter().filter(|i| i.keyword == "COPY").collect();
    assert_eq!(
        copies.len(),
        1,
        "the runtime stage should copy only the binary: {copies:?}"
    );
    let parts: Vec<&str> = copies[0].args.split_whitespace().collect();
    let (flags, paths): (Vec<&str>, Vec<&str>) = parts.iter().partition(|p| p.starts_with("--"));
    let stage_ref = flags
        .iter()
        .find_map(|f| f.strip_prefix("--from="))
        .expect("COPY --from=<the build stage>");
    assert!(
        Some(stage_ref) == builder_name.as_deref() || stage_ref.parse::<usize>().is_ok(),
        "the runtime stage should copy from the build stage ({builder_name:?}), not {stage_ref}"
    );
    assert_eq!(
        paths.len(),
        2,
        "COPY one source to one destination: {}",
        copies[0].args
    );
    let (source, dest) = (paths[0], paths[1]);
    assert!(
        source.ends_with("/runtime-cloud") && !source.contains('*'),
        "the runtime stage should copy only the runtime-cloud binary, not {source}"
    );
    assert!(
        cargo.args.contains(source),
        "{source} is not where the build stage puts the binary: {}",
        cargo.args
    );

    // Entrypoint and command.
    let last = |keyword: &str| {
        runtime
            .iter()
            .rev()
            .find(|i| i.keyword == keyword)
            .map(|i| serde_json::from_str::<Vec<String>>(&i.args))
            .unwrap_or_else(|| panic!("the runtime stage should set {keyword}"))
            .unwrap_or_else(|e| panic!("{keyword} should be in JSON (exec) form: {e}"))
    };
    let entrypoint = last("ENTRYPOINT");
    assert!(
        (entrypoint == ["runtime-cloud"] && dest == "/usr/local/bin/runtime-cloud")
            || entrypoint == [dest.to_owned()],
        "ENTRYPOINT {entrypoint:?} should run the copied binary {dest}"
    );
    let mut cmd = last("CMD");
    cmd.push("--help".into());
    let out = run_bin(&cmd, &BTreeMap::new());
    assert!(
        out.status.success(),
        "the default CMD does not parse:\n{}",
        output_text(&out)
    );

    // The defaults agree with the binary and with the compose file.
    let env = stage_env(runtime);
    let allowed = variables_the_binary_reads();
    for key in env.keys() {
        assert!(
            allowed.contains(key),
            "the image sets {key}, which runtime-cloud does not read"
        );
    }
    let listen = env
        .get("RUNTIME_CLOUD_LISTEN")
        .expect("ENV RUNTIME_CLOUD_LISTEN");
    let port = listen.rsplit(':').next().unwrap_or_default();
    assert!(
        runtime.iter().any(|i| i.keyword == "EXPOSE"
            && i.args
                .split_whitespace()
                .any(|p| p.trim_end_matches("/tcp") == port)),
        "EXPOSE the listen port {port}"
    );
    let compose = load_compose();
    let (api, api_service) = compose.with_role("api")[0];
    assert_eq!(
        self::env(api, api_service).get("RUNTIME_CLOUD_LISTEN"),
        Some(listen),
        "the image and service {api} should listen on the same address"
    );
    let data_dir = env
        .get("RUNTIME_CLOUD_DATA_DIR")
        .expect("ENV RUNTIME_CLOUD_DATA_DIR");
    assert_eq!(
        self::env(api, api_service).get("RUNTIME_CLOUD_DATA_DIR"),
        Some(data_dir),
        "the image and service {api} should use the same data dir"
    );
    assert!(
        runtime.iter().any(|i| i.keyword == "RUN"
            && i.args.contains(data_dir.as_str())
            && i.args.contains(uid)),
        "the runtime stage should create {data_dir} owned by {uid}, so a volume there is writable"
    );
}

/// The build context keeps what `cargo build --locked` needs and leaves out build output,
/// local data and history.
#[test]
fn dockerignore_keeps_the_sources_and_drops_the_rest() {
    let patterns: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('/')
                .trim_start_matches("**/")
                .trim_end_matches('/')
                .to_owned()
        })
        .collect();
    for excluded in ["target", ".git", ".data"] {
        assert!(
            patterns.iter().any(|p| p == excluded),
            ".dockerignore should exclude {excluded}"
        );
    }
    let manifest = read("Cargo.toml");
    let members: Vec<String> = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .expect("workspace members")
        .split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect();
    let mut needed = vec!["Cargo.toml", "Cargo.lock", "src", "proto", "tests"];
    needed.extend(members.iter().map(String::as_str));
    for path in needed {
        assert!(
            !patterns.iter().any(|p| p == path || p == "*" || p == "**"),
            ".dockerignore excludes {path}, which the build needs"
        );
    }
}
