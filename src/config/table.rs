//! Every setting the binary reads, each declared once: [`Config`]'s field (name and type) and
//! its row of [`SETTINGS`] (variable, kind, default, doc) come from one entry of
//! `settings!`. The spec's options (`[RuntimeCloud.…]`) land in their sections' fields, the
//! flags and the variables read where they are used (the telemetry setup, the dev server) in
//! no field: their rows follow the fields'.

use super::RuntimeCloudSection;
use super::settings::{
    CONFIG_FILE, Kind, LOG_FORMAT, OTEL_SERVICE_NAME, RUST_LOG, Setting, Source, TEMPORAL_CLI,
};
use serde::Deserialize;
use std::path::PathBuf;

/// Declares [`Config`] and [`SETTINGS`]: for each entry a field `name: Type` of `Config`,
/// read from the file key `name`, and a row with its variable, kind, default and doc; then the
/// rows of `more` (settings that are not fields of `Config`). A field takes its type's default
/// when its key is absent, which loading leaves only a setting without a default: that one is
/// an `Option` (`every_variable_of_the_table_sets_its_key` checks each).
macro_rules! settings {
    (
        $(
            $field:ident : $ty:ty {
                env: $env:expr,
                kind: $kind:ident,
                default: $default:expr,
                doc: $doc:expr $(,)?
            }
        )*
        ;
        more: [ $($more:expr),* $(,)? ]
    ) => {
        /// The whole configuration. Its defaults are the table's: a `Config` is only built by
        /// [`Config::load`], which fills every key [`SETTINGS`] gives a default.
        #[derive(Debug, Clone, Deserialize)]
        // Serialized only by the tests, to compare what loading gave with the table.
        #[cfg_attr(test, derive(serde::Serialize))]
        #[serde(deny_unknown_fields)]
        pub struct Config {
            $(
                #[doc = $doc]
                #[serde(default)]
                pub $field: $ty,
            )*
            /// The spec's options, under their spec names.
            #[serde(default, rename = "RuntimeCloud")]
            pub runtime_cloud: RuntimeCloudSection,
        }

        /// Every setting the binary reads.
        pub const SETTINGS: &[Setting] = &[
            $(
                Setting {
                    source: Source::File(stringify!($field)),
                    env: $env,
                    kind: Kind::$kind,
                    default: $default,
                    doc: $doc,
                },
            )*
            $($more,)*
        ];
    };
}

settings! {
    data_dir: PathBuf {
        env: "RUNTIME_CLOUD_DATA_DIR",
        kind: Text,
        default: Some(".data"),
        doc: "Where the SQLite read DB, the sandbox targets, the JWT key and the dev server's \
            store live.",
    }
    database_url: Option<String> {
        env: "DATABASE_URL",
        kind: Secret,
        default: None,
        doc: "The read DB: `sqlite://PATH` or `postgres://…` (production). Unset: SQLite at \
            `{data_dir}/runtime-cloud.db`. A SQLite URL takes sqlx's options (`?mode=rwc` \
            creates the file); `sqlite::memory:` is a database that lives as long as the \
            process. SQLite keeps a write-ahead log synced at its \
            checkpoints (`synchronous=normal`, as the dev server's Temporal store): a killed \
            process loses nothing it committed, a power cut can lose the last transactions.",
    }
    temporal_address: String {
        env: "TEMPORAL_ADDRESS",
        kind: Text,
        default: Some("127.0.0.1:7233"),
        doc: "The Temporal frontend, `host:port` or `http://…`. `runtime-cloud dev` uses the dev \
            server it starts or reuses instead (`--temporal-port`).",
    }
    temporal_namespace: String {
        env: "TEMPORAL_NAMESPACE",
        kind: Text,
        default: Some("default"),
        doc: "The Temporal namespace.",
    }
    temporal_grpc_gzip: bool {
        env: "RUNTIME_CLOUD_TEMPORAL_GRPC_GZIP",
        kind: Bool,
        default: Some("false"),
        doc: "Gzip the gRPC messages to and from Temporal. Worth it where bandwidth is dear; \
            on a LAN it only costs CPU in every process and in the Temporal server \
            (docs/benchmarks.md).",
    }
    payload_key_files: Option<String> {
        env: "RUNTIME_CLOUD_PAYLOAD_KEY_FILES",
        kind: Text,
        default: None,
        doc: "Workflow payloads are encrypted before they leave the process (AES-256-GCM) with \
            these keys: comma-separated files, each holding a 32-byte key in base64, named by \
            its file stem (the key id in each payload's metadata). The first encrypts; every \
            one decrypts (rotation). Unset: payloads go to Temporal as plain JSON \
            (docs/deploy.md, \"Payload encryption\").",
    }
    temporal_tls: bool {
        env: "TEMPORAL_TLS",
        kind: Bool,
        default: Some("false"),
        doc: "Dial Temporal over TLS, verified against the system's CA roots unless \
            `TEMPORAL_TLS_CA_FILE` says otherwise. Implied by any setting below.",
    }
    temporal_tls_ca_file: Option<PathBuf> {
        env: "TEMPORAL_TLS_CA_FILE",
        kind: Text,
        default: None,
        doc: "A PEM CA bundle the frontend's certificate must chain to (a self-hosted \
            cluster's CA). Unset: the system's roots.",
    }
    temporal_tls_server_name: Option<String> {
        env: "TEMPORAL_TLS_SERVER_NAME",
        kind: Text,
        default: None,
        doc: "The name the frontend's certificate must carry, when it is not the address's host.",
    }
    temporal_tls_cert_file: Option<PathBuf> {
        env: "TEMPORAL_TLS_CERT_FILE",
        kind: Text,
        default: None,
        doc: "The client certificate (PEM) for a frontend that requires mutual TLS; with \
            `TEMPORAL_TLS_KEY_FILE`. Read at start: roll a new one by restarting the \
            processes (docs/deploy.md, \"Rotating credentials\").",
    }
    temporal_tls_key_file: Option<PathBuf> {
        env: "TEMPORAL_TLS_KEY_FILE",
        kind: Text,
        default: None,
        doc: "The client certificate's private key (PEM, a file only: never a variable's value).",
    }
    temporal_api_key: Option<String> {
        env: "TEMPORAL_API_KEY",
        kind: Secret,
        default: None,
        doc: "An API key (Temporal Cloud), sent as `Authorization: Bearer …` over TLS (with the \
            system's roots unless `TEMPORAL_TLS_CA_FILE` is set).",
    }
    task_queue: String {
        env: "RUNTIME_CLOUD_TASK_QUEUE",
        kind: Text,
        default: Some(runtime_cloud_temporal::DEFAULT_TASK_QUEUE),
        doc: "The task queue of every workflow and activity; the schedule ids start with it, so \
            one deployment is one task queue.",
    }
    listen: String {
        env: "RUNTIME_CLOUD_LISTEN",
        kind: Text,
        default: Some("127.0.0.1:8080"),
        doc: "The API's listen address (HTTP and gRPC). Port 0 takes a free port.",
    }
    metrics_listen: Option<String> {
        env: "RUNTIME_CLOUD_METRICS_LISTEN",
        kind: Text,
        default: None,
        doc: "An internal address (`0.0.0.0:9090`) where the API serves `GET /metrics` without \
            a token, for a scraper inside the cluster; the API's own listener then answers \
            `/metrics` with 404. Unset: `/metrics` on the API's listener, for a bearer token \
            with the `factory.meta.read` scope only (the metrics name every tenant).",
    }
    jwt_secret: Option<String> {
        env: "RUNTIME_CLOUD_JWT_SECRET",
        kind: Secret,
        default: None,
        doc: "The HS256 key of bearer tokens. Unset: read from `{data_dir}/jwt-secret`, which \
            is created once with a random key.",
    }
    oidc_issuer: Option<String> {
        env: "RUNTIME_CLOUD_OIDC_ISSUER",
        kind: Text,
        default: None,
        doc: "An OpenID Connect provider (`https://id.example.com/realms/ops`): bearer tokens must \
            be its RS256 or ES256 tokens, verified with the keys of its JWKS (found through \
            `{issuer}/.well-known/openid-configuration` when the API starts; fetched again \
            when a token names an unknown key, and every 15 minutes). HS256 tokens of \
            `jwt_secret` are then refused. Unset: only HS256 tokens (dev and tests).",
    }
    oidc_audience: Option<String> {
        env: "RUNTIME_CLOUD_OIDC_AUDIENCE",
        kind: Text,
        default: None,
        doc: "The audience (`aud`) the provider's tokens must be issued for. Required with \
            `oidc_issuer`.",
    }
    oidc_tenant_claim: String {
        env: "RUNTIME_CLOUD_OIDC_TENANT_CLAIM",
        kind: Text,
        default: Some("tenant_id"),
        doc: "The claim that names the caller's tenant; a dotted path reads nested objects \
            (`org.tenant`).",
    }
    oidc_scope_claim: String {
        env: "RUNTIME_CLOUD_OIDC_SCOPE_CLAIM",
        kind: Text,
        default: Some("scope"),
        doc: "The claim that carries the scopes: a space-separated string (`scope`) or a list \
            (`scp`).",
    }
    oidc_roles_claim: String {
        env: "RUNTIME_CLOUD_OIDC_ROLES_CLAIM",
        kind: Text,
        default: Some("roles"),
        doc: "The claim that carries roles or groups (a list or a space-separated string; a \
            dotted path reads nested objects: `realm_access.roles`).",
    }
    oidc_role_map: Option<String> {
        env: "RUNTIME_CLOUD_OIDC_ROLE_MAP",
        kind: Text,
        default: None,
        doc: "Groups to roles, `group=Role,group=Role` (`platform-admins=PlatformAdmin`). Set: \
            only mapped values of the roles claim give roles. Unset: the claim's values are \
            the roles.",
    }
    oidc_clock_skew_seconds: f64 {
        env: "RUNTIME_CLOUD_OIDC_CLOCK_SKEW_SECONDS",
        kind: Positive,
        default: Some("60"),
        doc: "Clock skew tolerated on the provider's `exp`, `nbf` and `iat`, in seconds.",
    }
    oidc_console_client_id: Option<String> {
        env: "RUNTIME_CLOUD_OIDC_CONSOLE_CLIENT_ID",
        kind: Text,
        default: None,
        doc: "The console's client id at the provider (a public client: authorization code \
            with PKCE, redirect URI `{api}/console/callback`). Unset: the console offers \
            only pasting a token.",
    }
    oidc_console_scope: String {
        env: "RUNTIME_CLOUD_OIDC_CONSOLE_SCOPE",
        kind: Text,
        default: Some("openid"),
        doc: "The scopes the console asks the provider for (space separated).",
    }
    nats_url: Option<String> {
        env: "NATS_URL",
        kind: Text,
        default: None,
        doc: "NATS with JetStream (`nats://127.0.0.1:4222`): the workers run the outbox relay to \
            it. Unset: no relay; events stay readable in `outbox_events`.",
    }
    nats_user: Option<String> {
        env: "NATS_USER",
        kind: Text,
        default: None,
        doc: "The NATS user, with `NATS_PASSWORD`.",
    }
    nats_password: Option<String> {
        env: "NATS_PASSWORD",
        kind: Secret,
        default: None,
        doc: "The NATS user's password.",
    }
    nats_token: Option<String> {
        env: "NATS_TOKEN",
        kind: Secret,
        default: None,
        doc: "A NATS authentication token.",
    }
    nats_nkey_seed: Option<String> {
        env: "NATS_NKEY_SEED",
        kind: Secret,
        default: None,
        doc: "A NATS NKey user seed (`SU…`): the connection signs the server's nonce with it.",
    }
    nats_creds_file: Option<PathBuf> {
        env: "NATS_CREDS_FILE",
        kind: Text,
        default: None,
        doc: "A NATS `.creds` file (a user JWT and its NKey seed, decentralized auth with \
            accounts).",
    }
    nats_tls_ca_file: Option<PathBuf> {
        env: "NATS_TLS_CA_FILE",
        kind: Text,
        default: None,
        doc: "A PEM CA bundle the NATS server's certificate must chain to; setting it (or a \
            `tls://` URL) requires TLS.",
    }
    nats_tls_cert_file: Option<PathBuf> {
        env: "NATS_TLS_CERT_FILE",
        kind: Text,
        default: None,
        doc: "A client certificate (PEM) for a NATS server that verifies clients \
            (`--tlsverify`); with `NATS_TLS_KEY_FILE`.",
    }
    nats_tls_key_file: Option<PathBuf> {
        env: "NATS_TLS_KEY_FILE",
        kind: Text,
        default: None,
        doc: "The client certificate's private key (PEM, a file only).",
    }
    inbound_sources: Option<PathBuf> {
        env: "RUNTIME_CLOUD_INBOUND_SOURCES",
        kind: Text,
        default: None,
        doc: "A TOML file of the event sources allowed to sign inbound approvals: each \
            source's issuer, audience, keys (a JWKS URL or PEM files), tenants and event \
            types (docs/operations.md, \"Signed approvals\"). Unset: no source; a production \
            `PromotionApproved` and every `ApprovalDecided` are dead-lettered as unsigned.",
    }
    inbound_accept_unsigned: bool {
        env: "RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED",
        kind: Bool,
        default: Some("false"),
        doc: "`true` takes an inbound approval without a signature as the event asserts it. \
            For `runtime-cloud dev` only: `api` and `worker` refuse to start with it.",
    }
    pulumi_binary: String {
        env: "RUNTIME_CLOUD_PULUMI_BINARY",
        kind: Text,
        default: Some("pulumi"),
        doc: "The Pulumi CLI that environments with a Pulumi runner are planned with (a name \
            looked up on the worker's PATH, or a path).",
    }
    secret_broker_url: Option<String> {
        env: "RUNTIME_CLOUD_SECRET_BROKER_URL",
        kind: Text,
        default: None,
        doc: "The Secret Broker (`https://…`): the runner resolves `secretRefs` of schemes other than \
            `env://` and `file://` (`secretbroker://…`) there at plan and apply time (contract in \
            docs/targets.md). Unset: such references fail the plan, naming them.",
    }
    secret_broker_token: Option<String> {
        env: "RUNTIME_CLOUD_SECRET_BROKER_TOKEN",
        kind: Secret,
        default: None,
        doc: "The bearer token sent to the Secret Broker. A secret: never logged.",
    }
    config_platform_url: Option<String> {
        env: "RUNTIME_CLOUD_CONFIG_PLATFORM_URL",
        kind: Text,
        default: None,
        doc: "The Config Platform (`https://…`): the runner resolves `configRefs` of schemes other than \
            `env://` and `file://` (`config://…`) there at plan and apply time (contract in \
            docs/targets.md). Unset: such references fail the plan, naming them.",
    }
    config_platform_token: Option<String> {
        env: "RUNTIME_CLOUD_CONFIG_PLATFORM_TOKEN",
        kind: Secret,
        default: None,
        doc: "The bearer token sent to the Config Platform. A secret: never logged.",
    }
    artifacts_url: Option<String> {
        env: "RUNTIME_CLOUD_ARTIFACTS_URL",
        kind: Text,
        default: None,
        doc: "Where plan and apply logs are kept: `s3://bucket[/prefix]` for an S3-compatible \
            bucket (endpoint, region and credentials from the standard `AWS_*` environment: \
            `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` or \
            the instance's role; `AWS_ALLOW_HTTP=true` for a server without TLS). Unset: \
            `{data_dir}/artifacts`, which only serves workers and APIs sharing that directory.",
    }
    run_control_url: Option<String> {
        env: "RUNTIME_CLOUD_RUN_CONTROL_URL",
        kind: Text,
        default: None,
        doc: "RunControlService (`https://run-control.internal/v1`): approvals the product has \
            not recorded itself are claimed there (contract in docs/operations.md, \
            \"RunControlService\"). Unset: only recorded approvals open the production gate.",
    }
    run_control_token: Option<String> {
        env: "RUNTIME_CLOUD_RUN_CONTROL_TOKEN",
        kind: Secret,
        default: None,
        doc: "The bearer token sent to RunControlService. A secret: never logged; prefer the \
            variable to the file.",
    }
    policy_dir: Option<PathBuf> {
        env: "RUNTIME_CLOUD_POLICY_DIR",
        kind: Text,
        default: None,
        doc: "A directory of `.rego` files (package `runtime_cloud`, rules `deny` and `allow`) \
            evaluated on every plan with the default bundle built into the worker; read again \
            when a file changes. A bundle that does not parse is refused with the file and \
            line (at start the worker does not start; later it keeps the last good bundle).",
    }
    policy_url: Option<String> {
        env: "RUNTIME_CLOUD_POLICY_URL",
        kind: Text,
        default: None,
        doc: "A PolicyEngineService with OPA's REST data API (`https://policy.internal`): every \
            plan is `POST /v1/data/runtime_cloud` with `{\"input\": …}` instead of the \
            embedded engine. Unset: the embedded Rego engine.",
    }
    prometheus_url: Option<String> {
        env: "RUNTIME_CLOUD_PROMETHEUS_URL",
        kind: Text,
        default: None,
        doc: "Prometheus' HTTP API (`http://prometheus.monitoring:9090`, or Thanos, Mimir …): \
            the SloGuard of fleet rollouts with an `slo` query, read with \
            `GET /api/v1/query` every few seconds while a wave converges and bakes (a sample \
            above the threshold halts it). Unset: rollouts with an `slo` query are refused \
            (422); breaches are reported with `POST /fleet/rollouts/{id}/breach`.",
    }
    prometheus_token: Option<String> {
        env: "RUNTIME_CLOUD_PROMETHEUS_TOKEN",
        kind: Secret,
        default: None,
        doc: "The bearer token sent to Prometheus. A secret: never logged; prefer the variable \
            to the file.",
    }
    kubernetes_calls_per_cluster: f64 {
        env: "RUNTIME_CLOUD_KUBERNETES_CALLS_PER_CLUSTER",
        kind: Positive,
        default: Some("8"),
        doc: "At most this many list calls of one worker in flight to one Kubernetes API \
            server (by its URL), over all the namespaces it observes there.",
    }
    posture_findings: bool {
        env: "RUNTIME_CLOUD_POSTURE_FINDINGS",
        kind: Bool,
        default: Some("true"),
        doc: "Observations of Kubernetes namespaces read their security posture and raise \
            `posture` findings of the rules it breaks (docs/targets.md, \"Posture findings\"): \
            one more list call per namespace (NetworkPolicies, which the observer's role must \
            be allowed to list); Pulumi stacks' resources are judged by the posture rules \
            written in Rego; and each plan's resources are judged too, what it would newly \
            break given to the policies (`input.plan.posture`). `false`: none of that; the \
            posture findings open resolve at the next observation.",
    }
    kubernetes_watch: bool {
        env: "RUNTIME_CLOUD_KUBERNETES_WATCH",
        kind: Bool,
        default: Some("true"),
        doc: "Watch the Kubernetes clusters environments are observed on (one watch per \
            cluster and kind, held by one worker at a time): a change to an environment's \
            objects observes it within seconds; the five-minute sweep stays the backstop. \
            `false` leaves them to the sweep and `POST …/observe` (docs/targets.md).",
    }
    sandbox_observe_changes: bool {
        env: "RUNTIME_CLOUD_SANDBOX_OBSERVE_CHANGES",
        kind: Bool,
        default: Some("true"),
        doc: "`runtime-cloud sandbox` observes the environment as soon as it changes what runs \
            there (scale, set-version, delete, add-unmanaged, set-config, set-secret), as a \
            watched Kubernetes cluster's change does. `false` leaves the change to the sweep \
            and `POST …/observe`.",
    }
    run_submissions_per_second: f64 {
        env: "RUNTIME_CLOUD_RUN_SUBMISSIONS_PER_SECOND",
        kind: Positive,
        default: Some("20"),
        doc: "Each tenant's run submissions (`POST /factory/provisioning/runs`) are taken at \
            this sustained rate per API process; faster ones wait their turn, so one \
            tenant's flood does not take the machine from the others' runs.",
    }
    run_submission_burst: f64 {
        env: "RUNTIME_CLOUD_RUN_SUBMISSION_BURST",
        kind: Positive,
        default: Some("40"),
        doc: "How many of a tenant's run submissions are taken at once before the rate \
            applies.",
    }
    run_submission_max_wait_seconds: f64 {
        env: "RUNTIME_CLOUD_RUN_SUBMISSION_MAX_WAIT_SECONDS",
        kind: Positive,
        default: Some("10"),
        doc: "The longest a run submission waits its turn; one that would wait longer is \
            refused with 429 and `Retry-After`.",
    }
    schedules_paused: bool {
        env: "RUNTIME_CLOUD_SCHEDULES_PAUSED",
        kind: Bool,
        default: Some("false"),
        doc: "Create the schedules paused (they can still be triggered by hand; the tests do). \
            A schedule that exists keeps its pause state.",
    }
    otlp_endpoint: Option<String> {
        env: "OTEL_EXPORTER_OTLP_ENDPOINT",
        kind: Text,
        default: None,
        doc: "An OTLP/HTTP collector (`http://127.0.0.1:4318`): spans are exported to \
            `{endpoint}/v1/traces` and trace context crosses Temporal. Unset: no export.",
    }
    ;
    more: [
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
    ]
}
