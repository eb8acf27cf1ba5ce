//! Every setting the binary reads, in one table: [`SETTINGS`].
//!
//! Loading walks the table (a variable wins over the file, the file over the default, each
//! value checked against its [`Kind`]), `docs/configuration.md` is printed from it
//! ([`markdown`]), and `tests/compose.rs` checks the compose file and the image against it.
//! The code reads no variable that is not a row here: the flags, the telemetry setup and the
//! dev server name theirs through the rows' constants ([`LOG_FORMAT`], [`RUST_LOG`], …).

use anyhow::{anyhow, bail};
use std::fmt::Write as _;
use toml::{Table, Value};

/// One setting: where it is read, its environment variable, its default and what it means.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Where the binary reads it besides the environment.
    pub source: Source,
    /// The environment variable; for a file key it wins over the file.
    pub env: &'static str,
    /// What a value must look like.
    pub kind: Kind,
    /// The value when nothing sets it, written as the variable would be; `None` when the
    /// setting is then absent (the doc says what absence means).
    pub default: Option<&'static str>,
    /// What it does, in Markdown, for `docs/configuration.md`.
    pub doc: &'static str,
}

/// Where a setting is read besides its environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A key of the configuration file, dotted through its tables:
    /// `RuntimeCloud.Provisioning.ApplyTimeoutMinutes` is `ApplyTimeoutMinutes` under
    /// `[RuntimeCloud.Provisioning]`. It lands in the [`Config`](super::Config) field of the
    /// same name.
    File(&'static str),
    /// A command-line flag that every subcommand takes; clap reads the variable when the flag
    /// is absent.
    Flag(&'static str),
    /// Only the variable, read where it is used (the telemetry setup, the dev server).
    Env,
}

/// What a value must look like. Variables are text; a file key may also be a TOML number or
/// boolean of the right kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Any text.
    Text,
    /// `true` or `false`, exactly.
    Bool,
    /// A number above zero; fractions allowed (tests use short windows).
    Positive,
    /// Text that is a secret (a key, a token, a URL with a password): also read from the file
    /// the variable `{VAR}_FILE` names, so a Kubernetes Secret is mounted as a file rather than
    /// set in the environment.
    Secret,
}

/// The suffix of the variable that names a secret's file.
pub const FILE_SUFFIX: &str = "_FILE";

impl Kind {
    /// How the docs describe a value of this kind.
    fn describe(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Secret => "text, secret",
            Kind::Bool => "`true` or `false`",
            Kind::Positive => "number > 0",
        }
    }

    /// A variable's text (or a default) as a TOML value; the error completes "… must be".
    pub(super) fn read(self, text: &str) -> Result<Value, &'static str> {
        let value = match self {
            Kind::Text | Kind::Secret => Value::String(text.to_owned()),
            Kind::Bool => Value::Boolean(text.parse().map_err(|_| "true or false")?),
            Kind::Positive => Value::Float(text.parse().map_err(|_| "a number")?),
        };
        self.check(&value)?;
        Ok(value)
    }

    /// Whether a value (from the file, or read from text) is of this kind; the error completes
    /// "… must be".
    fn check(self, value: &Value) -> Result<(), &'static str> {
        let number = match (self, value) {
            (Kind::Text | Kind::Secret, Value::String(_)) | (Kind::Bool, Value::Boolean(_)) => {
                return Ok(());
            }
            (Kind::Text | Kind::Secret, _) => return Err("text (a TOML string)"),
            (Kind::Bool, _) => return Err("true or false"),
            (Kind::Positive, Value::Integer(i)) => *i as f64,
            (Kind::Positive, Value::Float(f)) => *f,
            (Kind::Positive, _) => return Err("a number"),
        };
        if number <= 0.0 {
            return Err("positive");
        }
        Ok(())
    }
}

impl Setting {
    /// The variable that names this secret's file (`{VAR}_FILE`), for a secret.
    pub fn file_variable(&self) -> Option<String> {
        (self.kind == Kind::Secret).then(|| format!("{}{FILE_SUFFIX}", self.env))
    }

    /// The value the environment gives: the variable, or for a secret the content of the file
    /// `{VAR}_FILE` names (one trailing line break dropped, as `kubectl create secret
    /// --from-file` and editors leave one). Both set is an error: which one wins would be a
    /// guess.
    pub(super) fn read_environment(
        &self,
        var: &impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<String>> {
        let direct = var(self.env);
        let Some(file_var) = self.file_variable() else {
            return Ok(direct);
        };
        let Some(path) = var(&file_var) else {
            return Ok(direct);
        };
        if direct.is_some() {
            bail!("{} and {file_var} are both set: set one", self.env);
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow!("{file_var}: reading {path}: {e}"))?;
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        Ok(Some(text.to_owned()))
    }

    /// The file key, for a setting the file can hold.
    pub fn file_key(&self) -> Option<&'static str> {
        match self.source {
            Source::File(key) => Some(key),
            _ => None,
        }
    }
}

/// `--config`: the TOML file.
pub const CONFIG_FILE: Setting = Setting {
    source: Source::Flag("--config"),
    env: "RUNTIME_CLOUD_CONFIG",
    kind: Kind::Text,
    default: None,
    doc: "The TOML configuration file. Unset: no file; the variables and the defaults alone.",
};

/// `--log-format`.
pub const LOG_FORMAT: Setting = Setting {
    source: Source::Flag("--log-format"),
    env: "RUNTIME_CLOUD_LOG_FORMAT",
    kind: Kind::Text,
    default: Some("text"),
    doc: "`json` for JSON log lines on stderr; anything else prints text lines.",
};

/// The log filter, read by the telemetry setup.
pub const RUST_LOG: Setting = Setting {
    source: Source::Env,
    env: "RUST_LOG",
    kind: Kind::Text,
    default: Some("info,temporalio_sdk_core=warn,sqlx=warn,sea_orm_migration=warn"),
    doc: "Which log lines are written, as `tracing-subscriber` `EnvFilter` directives \
          (`debug`, `runtime_cloud_activities=debug`, …). A value that does not parse falls \
          back to the default.",
};

/// The service name of exported spans, read by the OpenTelemetry SDK.
pub const OTEL_SERVICE_NAME: Setting = Setting {
    source: Source::Env,
    env: "OTEL_SERVICE_NAME",
    kind: Kind::Text,
    default: None,
    doc: "The service name of exported spans (read by the OpenTelemetry SDK). Unset: \
          `runtime-cloud-dev`, `runtime-cloud-worker` or `runtime-cloud-api` after the \
          command, `runtime-cloud` for the others.",
};

/// The Temporal CLI of `runtime-cloud dev`.
pub const TEMPORAL_CLI: Setting = Setting {
    source: Source::Env,
    env: runtime_cloud_temporal::dev_server::CLI_ENV,
    kind: Kind::Text,
    default: Some(runtime_cloud_temporal::dev_server::CLI_DEFAULT),
    doc: "The Temporal CLI that `runtime-cloud dev` starts the dev server with (and registers \
          the search attributes with on a server it reuses): a path, or a name on the `PATH`.",
};

/// Every setting the binary reads.
pub const SETTINGS: &[Setting] = &[
    Setting {
        source: Source::File("data_dir"),
        env: "RUNTIME_CLOUD_DATA_DIR",
        kind: Kind::Text,
        default: Some(".data"),
        doc: "Where the SQLite read DB, the sandbox targets, the JWT key and the dev server's \
              store live.",
    },
    Setting {
        source: Source::File("database_url"),
        env: "DATABASE_URL",
        kind: Kind::Secret,
        default: None,
        doc: "The read DB: `sqlite://PATH` or `postgres://…` (production). Unset: SQLite at \
              `{data_dir}/runtime-cloud.db`. A SQLite URL takes sqlx's options (`?mode=rwc` \
              creates the file); `sqlite::memory:` is a database that lives as long as the \
              process. SQLite keeps a write-ahead log synced at its \
              checkpoints (`synchronous=normal`, as the dev server's Temporal store): a killed \
              process loses nothing it committed, a power cut can lose the last transactions.",
    },
    Setting {
        source: Source::File("temporal_address"),
        env: "TEMPORAL_ADDRESS",
        kind: Kind::Text,
        default: Some("127.0.0.1:7233"),
        doc: "The Temporal frontend, `host:port` or `http://…`. `runtime-cloud dev` uses the dev \
              server it starts or reuses instead (`--temporal-port`).",
    },
    Setting {
        source: Source::File("temporal_namespace"),
        env: "TEMPORAL_NAMESPACE",
        kind: Kind::Text,
        default: Some("default"),
        doc: "The Temporal namespace.",
    },
    Setting {
        source: Source::File("temporal_grpc_gzip"),
        env: "RUNTIME_CLOUD_TEMPORAL_GRPC_GZIP",
        kind: Kind::Bool,
        default: Some("false"),
        doc: "Gzip the gRPC messages to and from Temporal. Worth it where bandwidth is dear; \
              on a LAN it only costs CPU in every process and in the Temporal server \
              (docs/benchmarks.md).",
    },
    Setting {
        source: Source::File("payload_key_files"),
        env: "RUNTIME_CLOUD_PAYLOAD_KEY_FILES",
        kind: Kind::Text,
        default: None,
        doc: "Workflow payloads are encrypted before they leave the process (AES-256-GCM) with \
              these keys: comma-separated files, each holding a 32-byte key in base64, named by \
              its file stem (the key id in each payload's metadata). The first encrypts; every \
              one decrypts (rotation). Unset: payloads go to Temporal as plain JSON \
              (docs/deploy.md, \"Payload encryption\").",
    },
    Setting {
        source: Source::File("temporal_tls"),
        env: "TEMPORAL_TLS",
        kind: Kind::Bool,
        default: Some("false"),
        doc: "Dial Temporal over TLS, verified against the system's CA roots unless \
              `TEMPORAL_TLS_CA_FILE` says otherwise. Implied by any setting below.",
    },
    Setting {
        source: Source::File("temporal_tls_ca_file"),
        env: "TEMPORAL_TLS_CA_FILE",
        kind: Kind::Text,
        default: None,
        doc: "A PEM CA bundle the frontend's certificate must chain to (a self-hosted \
              cluster's CA). Unset: the system's roots.",
    },
    Setting {
        source: Source::File("temporal_tls_server_name"),
        env: "TEMPORAL_TLS_SERVER_NAME",
        kind: Kind::Text,
        default: None,
        doc: "The name the frontend's certificate must carry, when it is not the address's host.",
    },
    Setting {
        source: Source::File("temporal_tls_cert_file"),
        env: "TEMPORAL_TLS_CERT_FILE",
        kind: Kind::Text,
        default: None,
        doc: "The client certificate (PEM) for a frontend that requires mutual TLS; with \
              `TEMPORAL_TLS_KEY_FILE`. Read at start: roll a new one by restarting the \
              processes (docs/deploy.md, \"Rotating credentials\").",
    },
    Setting {
        source: Source::File("temporal_tls_key_file"),
        env: "TEMPORAL_TLS_KEY_FILE",
        kind: Kind::Text,
        default: None,
        doc: "The client certificate's private key (PEM, a file only: never a variable's value).",
    },
    Setting {
        source: Source::File("temporal_api_key"),
        env: "TEMPORAL_API_KEY",
        kind: Kind::Secret,
        default: None,
        doc: "An API key (Temporal Cloud), sent as `Authorization: Bearer …` over TLS (with the \
              system's roots unless `TEMPORAL_TLS_CA_FILE` is set).",
    },
    Setting {
        source: Source::File("task_queue"),
        env: "RUNTIME_CLOUD_TASK_QUEUE",
        kind: Kind::Text,
        default: Some(runtime_cloud_temporal::DEFAULT_TASK_QUEUE),
        doc: "The task queue of every workflow and activity; the schedule ids start with it, so \
              one deployment is one task queue.",
    },
    Setting {
        source: Source::File("listen"),
        env: "RUNTIME_CLOUD_LISTEN",
        kind: Kind::Text,
        default: Some("127.0.0.1:8080"),
        doc: "The API's listen address (HTTP and gRPC). Port 0 takes a free port.",
    },
    Setting {
        source: Source::File("metrics_listen"),
        env: "RUNTIME_CLOUD_METRICS_LISTEN",
        kind: Kind::Text,
        default: None,
        doc: "An internal address (`0.0.0.0:9090`) where the API serves `GET /metrics` without \
              a token, for a scraper inside the cluster; the API's own listener then answers \
              `/metrics` with 404. Unset: `/metrics` on the API's listener, for a bearer token \
              with the `factory.meta.read` scope only (the metrics name every tenant).",
    },
    Setting {
        source: Source::File("jwt_secret"),
        env: "RUNTIME_CLOUD_JWT_SECRET",
        kind: Kind::Secret,
        default: None,
        doc: "The HS256 key of bearer tokens. Unset: read from `{data_dir}/jwt-secret`, which \
              is created once with a random key.",
    },
    Setting {
        source: Source::File("oidc_issuer"),
        env: "RUNTIME_CLOUD_OIDC_ISSUER",
        kind: Kind::Text,
        default: None,
        doc: "An OpenID Connect provider (`https://id.example.com/realms/ops`): bearer tokens must \
              be its RS256 or ES256 tokens, verified with the keys of its JWKS (found through \
              `{issuer}/.well-known/openid-configuration` when the API starts; fetched again \
              when a token names an unknown key, and every 15 minutes). HS256 tokens of \
              `jwt_secret` are then refused. Unset: only HS256 tokens (dev and tests).",
    },
    Setting {
        source: Source::File("oidc_audience"),
        env: "RUNTIME_CLOUD_OIDC_AUDIENCE",
        kind: Kind::Text,
        default: None,
        doc: "The audience (`aud`) the provider's tokens must be issued for. Required with \
              `oidc_issuer`.",
    },
    Setting {
        source: Source::File("oidc_tenant_claim"),
        env: "RUNTIME_CLOUD_OIDC_TENANT_CLAIM",
        kind: Kind::Text,
        default: Some("tenant_id"),
        doc: "The claim that names the caller's tenant; a dotted path reads nested objects \
              (`org.tenant`).",
    },
    Setting {
        source: Source::File("oidc_scope_claim"),
        env: "RUNTIME_CLOUD_OIDC_SCOPE_CLAIM",
        kind: Kind::Text,
        default: Some("scope"),
        doc: "The claim that carries the scopes: a space-separated string (`scope`) or a list \
              (`scp`).",
    },
    Setting {
        source: Source::File("oidc_roles_claim"),
        env: "RUNTIME_CLOUD_OIDC_ROLES_CLAIM",
        kind: Kind::Text,
        default: Some("roles"),
        doc: "The claim that carries roles or groups (a list or a space-separated string; a \
              dotted path reads nested objects: `realm_access.roles`).",
    },
    Setting {
        source: Source::File("oidc_role_map"),
        env: "RUNTIME_CLOUD_OIDC_ROLE_MAP",
        kind: Kind::Text,
        default: None,
        doc: "Groups to roles, `group=Role,group=Role` (`platform-admins=PlatformAdmin`). Set: \
              only mapped values of the roles claim give roles. Unset: the claim's values are \
              the roles.",
    },
    Setting {
        source: Source::File("oidc_clock_skew_seconds"),
        env: "RUNTIME_CLOUD_OIDC_CLOCK_SKEW_SECONDS",
        kind: Kind::Positive,
        default: Some("60"),
        doc: "Clock skew tolerated on the provider's `exp`, `nbf` and `iat`, in seconds.",
    },
    Setting {
        source: Source::File("oidc_console_client_id"),
        env: "RUNTIME_CLOUD_OIDC_CONSOLE_CLIENT_ID",
        kind: Kind::Text,
        default: None,
        doc: "The console's client id at the provider (a public client: authorization code \
              with PKCE, redirect URI `{api}/console/callback`). Unset: the console offers \
              only pasting a token.",
    },
    Setting {
        source: Source::File("oidc_console_scope"),
        env: "RUNTIME_CLOUD_OIDC_CONSOLE_SCOPE",
        kind: Kind::Text,
        default: Some("openid"),
        doc: "The scopes the console asks the provider for (space separated).",
    },
    Setting {
        source: Source::File("nats_url"),
        env: "NATS_URL",
        kind: Kind::Text,
        default: None,
        doc: "NATS with JetStream (`nats://127.0.0.1:4222`): the workers run the outbox relay to \
              it. Unset: no relay; events stay readable in `outbox_events`.",
    },
    Setting {
        source: Source::File("nats_user"),
        env: "NATS_USER",
        kind: Kind::Text,
        default: None,
        doc: "The NATS user, with `NATS_PASSWORD`.",
    },
    Setting {
        source: Source::File("nats_password"),
        env: "NATS_PASSWORD",
        kind: Kind::Secret,
        default: None,
        doc: "The NATS user's password.",
    },
    Setting {
        source: Source::File("nats_token"),
        env: "NATS_TOKEN",
        kind: Kind::Secret,
        default: None,
        doc: "A NATS authentication token.",
    },
    Setting {
        source: Source::File("nats_nkey_seed"),
        env: "NATS_NKEY_SEED",
        kind: Kind::Secret,
        default: None,
        doc: "A NATS NKey user seed (`SU…`): the connection signs the server's nonce with it.",
    },
    Setting {
        source: Source::File("nats_creds_file"),
        env: "NATS_CREDS_FILE",
        kind: Kind::Text,
        default: None,
        doc: "A NATS `.creds` file (a user JWT and its NKey seed, decentralized auth with \
              accounts).",
    },
    Setting {
        source: Source::File("nats_tls_ca_file"),
        env: "NATS_TLS_CA_FILE",
        kind: Kind::Text,
        default: None,
        doc: "A PEM CA bundle the NATS server's certificate must chain to; setting it (or a \
              `tls://` URL) requires TLS.",
    },
    Setting {
        source: Source::File("nats_tls_cert_file"),
        env: "NATS_TLS_CERT_FILE",
        kind: Kind::Text,
        default: None,
        doc: "A client certificate (PEM) for a NATS server that verifies clients \
              (`--tlsverify`); with `NATS_TLS_KEY_FILE`.",
    },
    Setting {
        source: Source::File("nats_tls_key_file"),
        env: "NATS_TLS_KEY_FILE",
        kind: Kind::Text,
        default: None,
        doc: "The client certificate's private key (PEM, a file only).",
    },
    Setting {
        source: Source::File("inbound_sources"),
        env: "RUNTIME_CLOUD_INBOUND_SOURCES",
        kind: Kind::Text,
        default: None,
        doc: "A TOML file of the event sources allowed to sign inbound approvals: each \
              source's issuer, audience, keys (a JWKS URL or PEM files), tenants and event \
              types (docs/operations.md, \"Signed approvals\"). Unset: no source; a production \
              `PromotionApproved` and every `ApprovalDecided` are dead-lettered as unsigned.",
    },
    Setting {
        source: Source::File("inbound_accept_unsigned"),
        env: "RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED",
        kind: Kind::Bool,
        default: Some("false"),
        doc: "`true` takes an inbound approval without a signature as the event asserts it. \
              For `runtime-cloud dev` only: `api` and `worker` refuse to start with it.",
    },
    Setting {
        source: Source::File("pulumi_binary"),
        env: "RUNTIME_CLOUD_PULUMI_BINARY",
        kind: Kind::Text,
        default: Some("pulumi"),
        doc: "The Pulumi CLI that environments with a Pulumi runner are planned with (a name \
              looked up on the worker's PATH, or a path).",
    },
    Setting {
        source: Source::File("secret_broker_url"),
        env: "RUNTIME_CLOUD_SECRET_BROKER_URL",
        kind: Kind::Text,
        default: None,
        doc: "The Secret Broker (`https://…`): the runner resolves `secretRefs` of schemes other than \
              `env://` and `file://` (`secretbroker://…`) there at plan and apply time (contract in \
              docs/targets.md). Unset: such references fail the plan, naming them.",
    },
    Setting {
        source: Source::File("secret_broker_token"),
        env: "RUNTIME_CLOUD_SECRET_BROKER_TOKEN",
        kind: Kind::Secret,
        default: None,
        doc: "The bearer token sent to the Secret Broker. A secret: never logged.",
    },
    Setting {
        source: Source::File("config_platform_url"),
        env: "RUNTIME_CLOUD_CONFIG_PLATFORM_URL",
        kind: Kind::Text,
        default: None,
        doc: "The Config Platform (`https://…`): the runner resolves `configRefs` of schemes other than \
              `env://` and `file://` (`config://…`) there at plan and apply time (contract in \
              docs/targets.md). Unset: such references fail the plan, naming them.",
    },
    Setting {
        source: Source::File("config_platform_token"),
        env: "RUNTIME_CLOUD_CONFIG_PLATFORM_TOKEN",
        kind: Kind::Secret,
        default: None,
        doc: "The bearer token sent to the Config Platform. A secret: never logged.",
    },
    Setting {
        source: Source::File("artifacts_url"),
        env: "RUNTIME_CLOUD_ARTIFACTS_URL",
        kind: Kind::Text,
        default: None,
        doc: "Where plan and apply logs are kept: `s3://bucket[/prefix]` for an S3-compatible \
              bucket (endpoint, region and credentials from the standard `AWS_*` environment: \
              `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` or \
              the instance's role; `AWS_ALLOW_HTTP=true` for a server without TLS). Unset: \
              `{data_dir}/artifacts`, which only serves workers and APIs sharing that directory.",
    },
    Setting {
        source: Source::File("run_control_url"),
        env: "RUNTIME_CLOUD_RUN_CONTROL_URL",
        kind: Kind::Text,
        default: None,
        doc: "RunControlService (`https://run-control.internal/v1`): approvals the product has \
              not recorded itself are claimed there (contract in docs/operations.md, \
              \"RunControlService\"). Unset: only recorded approvals open the production gate.",
    },
    Setting {
        source: Source::File("run_control_token"),
        env: "RUNTIME_CLOUD_RUN_CONTROL_TOKEN",
        kind: Kind::Secret,
        default: None,
        doc: "The bearer token sent to RunControlService. A secret: never logged; prefer the \
              variable to the file.",
    },
    Setting {
        source: Source::File("policy_dir"),
        env: "RUNTIME_CLOUD_POLICY_DIR",
        kind: Kind::Text,
        default: None,
        doc: "A directory of `.rego` files (package `runtime_cloud`, rules `deny` and `allow`) \
              evaluated on every plan with the default bundle built into the worker; read again \
              when a file changes. A bundle that does not parse is refused with the file and \
              line (at start the worker does not start; later it keeps the last good bundle).",
    },
    Setting {
        source: Source::File("policy_url"),
        env: "RUNTIME_CLOUD_POLICY_URL",
        kind: Kind::Text,
        default: None,
        doc: "A PolicyEngineService with OPA's REST data API (`https://policy.internal`): every \
              plan is `POST /v1/data/runtime_cloud` with `{\"input\": …}` instead of the \
              embedded engine. Unset: the embedded Rego engine.",
    },
    Setting {
        source: Source::File("prometheus_url"),
        env: "RUNTIME_CLOUD_PROMETHEUS_URL",
        kind: Kind::Text,
        default: None,
        doc: "Prometheus' HTTP API (`http://prometheus.monitoring:9090`, or Thanos, Mimir …): \
              the SloGuard of fleet rollouts with an `slo` query, read with \
              `GET /api/v1/query` every few seconds while a wave converges and bakes (a sample \
              above the threshold halts it). Unset: rollouts with an `slo` query are refused \
              (422); breaches are reported with `POST /fleet/rollouts/{id}/breach`.",
    },
    Setting {
        source: Source::File("prometheus_token"),
        env: "RUNTIME_CLOUD_PROMETHEUS_TOKEN",
        kind: Kind::Secret,
        default: None,
        doc: "The bearer token sent to Prometheus. A secret: never logged; prefer the variable \
              to the file.",
    },
    Setting {
        source: Source::File("kubernetes_calls_per_cluster"),
        env: "RUNTIME_CLOUD_KUBERNETES_CALLS_PER_CLUSTER",
        kind: Kind::Positive,
        default: Some("8"),
        doc: "At most this many list calls of one worker in flight to one Kubernetes API \
              server (by its URL), over all the namespaces it observes there.",
    },
    Setting {
        source: Source::File("run_submissions_per_second"),
        env: "RUNTIME_CLOUD_RUN_SUBMISSIONS_PER_SECOND",
        kind: Kind::Positive,
        default: Some("20"),
        doc: "Each tenant's run submissions (`POST /factory/provisioning/runs`) are taken at \
              this sustained rate per API process; faster ones wait their turn, so one \
              tenant's flood does not take the machine from the others' runs.",
    },
    Setting {
        source: Source::File("run_submission_burst"),
        env: "RUNTIME_CLOUD_RUN_SUBMISSION_BURST",
        kind: Kind::Positive,
        default: Some("40"),
        doc: "How many of a tenant's run submissions are taken at once before the rate \
              applies.",
    },
    Setting {
        source: Source::File("run_submission_max_wait_seconds"),
        env: "RUNTIME_CLOUD_RUN_SUBMISSION_MAX_WAIT_SECONDS",
        kind: Kind::Positive,
        default: Some("10"),
        doc: "The longest a run submission waits its turn; one that would wait longer is \
              refused with 429 and `Retry-After`.",
    },
    Setting {
        source: Source::File("schedules_paused"),
        env: "RUNTIME_CLOUD_SCHEDULES_PAUSED",
        kind: Kind::Bool,
        default: Some("false"),
        doc: "Create the schedules paused (they can still be triggered by hand; the tests do). \
              A schedule that exists keeps its pause state.",
    },
    Setting {
        source: Source::File("otlp_endpoint"),
        env: "OTEL_EXPORTER_OTLP_ENDPOINT",
        kind: Kind::Text,
        default: None,
        doc: "An OTLP/HTTP collector (`http://127.0.0.1:4318`): spans are exported to \
              `{endpoint}/v1/traces` and trace context crosses Temporal. Unset: no export.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Provisioning.ApplyTimeoutMinutes"),
        env: "RuntimeCloud__Provisioning__ApplyTimeoutMinutes",
        kind: Kind::Positive,
        default: Some("45"),
        doc: "Runner timeout per apply, in minutes.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Provisioning.AutoApplyNonDestructive"),
        env: "RuntimeCloud__Provisioning__AutoApplyNonDestructive",
        kind: Kind::Bool,
        default: Some("true"),
        doc: "Reconciliation applies adds and changes automatically outside production.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Provisioning.ApprovalTimeoutHours"),
        env: "RuntimeCloud__Provisioning__ApprovalTimeoutHours",
        kind: Kind::Positive,
        default: Some("24"),
        doc: "How long a production run waits for its approval before it is `Rejected`, in \
              hours.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Provisioning.ApprovalValidityHours"),
        env: "RuntimeCloud__Provisioning__ApprovalValidityHours",
        kind: Kind::Positive,
        default: Some("24"),
        doc: "How long an approval recorded by the product (`POST /factory/approvals` without \
              `expiresAt`, an Operator's decision on a run or a proposal) can open the \
              production gate, in hours. Not a spec option.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Provisioning.LockHolderCheckMinutes"),
        env: "RuntimeCloud__Provisioning__LockHolderCheckMinutes",
        kind: Kind::Positive,
        default: Some("10"),
        doc: "While a run waits for a semaphore (an environment's lock, a project's \
              capacity), how often it asks again and checks that the runs holding it and \
              waiting before it still exist (one terminated by hand never releases it), in \
              minutes. Not a spec option.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Provisioning.UnstartedRunGraceSeconds"),
        env: "RuntimeCloud__Provisioning__UnstartedRunGraceSeconds",
        kind: Kind::Positive,
        default: Some("30"),
        doc: "A run the API wrote but whose workflow did not start (the process stopped in \
              between, or Temporal refused and the database would not take the run back) is \
              started by the API's starter this many seconds after its request; the starter \
              looks every third of it. At least 11 s (shorter counts as 11): a request waits up to \
              10 s for Temporal and may then take its run back. \
              Not a spec option.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Inventory.StalenessMinutes"),
        env: "RuntimeCloud__Inventory__StalenessMinutes",
        kind: Kind::Positive,
        default: Some("15"),
        doc: "An environment without an observation this recent is stale, in minutes.",
    },
    Setting {
        source: Source::File("RuntimeCloud.Inventory.AutoAcceptNonDestructiveOutsideProduction"),
        env: "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction",
        kind: Kind::Bool,
        default: Some("true"),
        doc: "Reconciliation proposals that destroy nothing are accepted automatically outside \
              production.",
    },
    CONFIG_FILE,
    LOG_FORMAT,
    RUST_LOG,
    OTEL_SERVICE_NAME,
    TEMPORAL_CLI,
];

/// Completes the parsed configuration file from the table: each file setting's variable, when
/// set, replaces the file's value, and its default fills what neither sets. Every value is
/// checked against its kind; the error names the variable or the key that holds the bad value.
/// Keys the table does not know are left for `Config`'s deserializer to refuse.
pub(super) fn layer(
    mut file: Table,
    var: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Table> {
    for setting in SETTINGS {
        let Some(key) = setting.file_key() else {
            continue;
        };
        let (table, leaf) = parent_table(&mut file, key)?;
        if let Some(text) = setting.read_environment(&var)? {
            let value = setting
                .kind
                .read(&text)
                .map_err(|expected| anyhow!("{} must be {expected}, not {text:?}", setting.env))?;
            table.insert(leaf.to_owned(), value);
        } else if let Some(value) = table.get(leaf) {
            setting.kind.check(value).map_err(|expected| {
                anyhow!(
                    "{key} must be {expected}, not {value} (in the configuration file; \
                     {} overrides it)",
                    setting.env
                )
            })?;
        } else if let Some(default) = setting.default {
            let value = setting
                .kind
                .read(default)
                .map_err(|expected| anyhow!("the default of {key} must be {expected}"))?;
            table.insert(leaf.to_owned(), value);
        }
    }
    Ok(file)
}

/// The table that holds `key`'s last segment (created when missing), and that segment.
fn parent_table<'t, 'k>(
    root: &'t mut Table,
    key: &'k str,
) -> anyhow::Result<(&'t mut Table, &'k str)> {
    let (path, leaf) = key.rsplit_once('.').unwrap_or(("", key));
    let mut table = root;
    let mut walked = String::new();
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(segment);
        table = match table
            .entry(segment)
            .or_insert_with(|| Value::Table(Table::new()))
        {
            Value::Table(t) => t,
            other => bail!(
                "{walked} must be a table (`[{walked}]`), not {other} (in the configuration file)"
            ),
        };
    }
    Ok((table, leaf))
}

/// The command that rewrites `docs/configuration.md` from the table.
pub const REGENERATE: &str =
    "cargo run --quiet --bin runtime-cloud -- config-docs > docs/configuration.md";

/// `docs/configuration.md`: the table as Markdown.
pub fn markdown() -> String {
    let mut md = String::new();
    let line = |md: &mut String, text: &str| {
        md.push_str(text);
        md.push('\n');
    };
    line(&mut md, "# Configuration");
    line(&mut md, "");
    line(
        &mut md,
        "<!-- Generated from the table in src/config/settings.rs; do not edit by hand. Regenerate:",
    );
    let _ = writeln!(md, "     {REGENERATE} -->");
    line(&mut md, "");
    line(
        &mut md,
        "`runtime-cloud` reads a TOML file (`--config FILE` or `RUNTIME_CLOUD_CONFIG`), then the \
         environment: a variable wins over the file, and what neither sets takes its default. \
         A value the configuration refuses (a key it does not know, `yes` for a boolean, `0` \
         for a timeout) stops the process with a message naming the key or the variable. A \
         secret (a key, a token, a URL with a password) is also read from the file its \
         `…_FILE` variable names (one trailing line break dropped), so a Kubernetes Secret is \
         mounted as a file instead of being set in the environment; setting both is refused.",
    );
    line(&mut md, "");

    line(&mut md, "## File keys and their variables");
    line(&mut md, "");
    line(
        &mut md,
        "The spec's options keep the spec's names: `RuntimeCloud:Provisioning:ApplyTimeoutMinutes` \
         is `ApplyTimeoutMinutes` under `[RuntimeCloud.Provisioning]` in the file and \
         `RuntimeCloud__Provisioning__ApplyTimeoutMinutes` in the environment.",
    );
    line(&mut md, "");
    line(&mut md, "| key | variable | value | default | meaning |");
    line(&mut md, "|---|---|---|---|---|");
    for s in SETTINGS {
        let Some(key) = s.file_key() else { continue };
        let key = match key.rsplit_once('.') {
            Some((table, leaf)) => format!("`[{table}]` `{leaf}`"),
            None => format!("`{key}`"),
        };
        let _ = writeln!(
            md,
            "| {key} | {} | {} | {} | {} |",
            variable_cell(s),
            s.kind.describe(),
            default_cell(s),
            s.doc
        );
    }
    line(&mut md, "");
    line(
        &mut md,
        "A file with every default written out (the keys without a default are left out):",
    );
    line(&mut md, "");
    line(&mut md, "```toml");
    md.push_str(&example_file());
    line(&mut md, "```");
    line(&mut md, "");

    line(&mut md, "## Flags");
    line(&mut md, "");
    line(
        &mut md,
        "Every subcommand takes these before or after its name; the variable stands in for an \
         absent flag.",
    );
    line(&mut md, "");
    line(&mut md, "| flag | variable | default | meaning |");
    line(&mut md, "|---|---|---|---|");
    for s in SETTINGS {
        if let Source::Flag(flag) = s.source {
            let _ = writeln!(
                md,
                "| `{flag}` | `{}` | {} | {} |",
                s.env,
                default_cell(s),
                s.doc
            );
        }
    }
    line(&mut md, "");

    line(&mut md, "## Read from the environment only");
    line(&mut md, "");
    line(&mut md, "| variable | default | meaning |");
    line(&mut md, "|---|---|---|");
    for s in SETTINGS.iter().filter(|s| s.source == Source::Env) {
        let _ = writeln!(md, "| `{}` | {} | {} |", s.env, default_cell(s), s.doc);
    }
    line(&mut md, "");
    line(
        &mut md,
        "The libraries read a few variables of their own, which Runtime Cloud neither sets nor \
         needs: with `otlp_endpoint` set, the OpenTelemetry SDK's standard `OTEL_*` variables \
         (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`, …), and the \
         Temporal SDK's tuning variables (`TEMPORAL_MAX_INCOMING_GRPC_BYTES`, …).",
    );
    md
}

/// A setting's default as a table cell.
/// The variable, and for a secret the variable that names its file.
fn variable_cell(s: &Setting) -> String {
    match s.file_variable() {
        Some(file) => format!("`{}` or `{file}`", s.env),
        None => format!("`{}`", s.env),
    }
}

fn default_cell(s: &Setting) -> String {
    match s.default {
        Some(d) => format!("`{d}`"),
        None => "—".to_owned(),
    }
}

/// The defaults of the file keys as a TOML file: top-level keys first, then one `[table]` per
/// section in the order the table first names it.
fn example_file() -> String {
    let mut sections: Vec<(&str, Vec<(&str, &Setting)>)> = Vec::new();
    for s in SETTINGS {
        let (Some(key), Some(_)) = (s.file_key(), s.default) else {
            continue;
        };
        let (section, leaf) = key.rsplit_once('.').unwrap_or(("", key));
        match sections.iter_mut().find(|(name, _)| *name == section) {
            Some((_, keys)) => keys.push((leaf, s)),
            None => sections.push((section, vec![(leaf, s)])),
        }
    }
    // The top-level keys must come before the first header.
    sections.sort_by_key(|(name, _)| !name.is_empty());
    let mut out = String::new();
    for (i, (section, keys)) in sections.iter().enumerate() {
        if !section.is_empty() {
            if i > 0 {
                out.push('\n');
            }
            let _ = writeln!(out, "[{section}]");
        }
        for (leaf, s) in keys {
            let default = s.default.unwrap_or_default();
            let value = match s.kind {
                // Written as in the table: `45`, not the `45.0` of a TOML float.
                Kind::Positive | Kind::Bool => default.to_owned(),
                Kind::Text | Kind::Secret => Value::String(default.to_owned()).to_string(),
            };
            let _ = writeln!(out, "{leaf} = {value}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// No variable or key is listed twice, and every default is a valid value of its kind.
    #[test]
    fn the_table_is_consistent() {
        let mut envs = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for s in SETTINGS {
            assert!(envs.insert(s.env), "{} is listed twice", s.env);
            if let Some(key) = s.file_key() {
                assert!(keys.insert(key), "{key} is listed twice");
            }
            if let Some(d) = s.default {
                assert!(
                    s.kind.read(d).is_ok(),
                    "the default of {} is not {:?}",
                    s.env,
                    s.kind
                );
            }
            assert!(
                !s.doc.contains('|') && !s.doc.contains('\n'),
                "the doc of {} breaks the Markdown table",
                s.env
            );
        }
    }

    /// The spec's options are read from `RuntimeCloud__{Section}__{Key}`, the key's path with
    /// `__` for the dots, as the spec's hosts read them.
    #[test]
    fn option_variables_follow_the_spec_naming() {
        for s in SETTINGS {
            if let Some(key) = s.file_key().filter(|k| k.starts_with("RuntimeCloud.")) {
                assert_eq!(s.env, key.replace('.', "__"));
            }
        }
    }

    /// `docs/configuration.md` is what the table prints.
    #[test]
    fn docs_configuration_md_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == markdown(),
            "docs/configuration.md is not what src/config/settings.rs prints; regenerate it \
             with `{REGENERATE}`"
        );
    }
}
