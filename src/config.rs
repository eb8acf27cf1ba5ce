//! Configuration: environment variables, then a TOML file, then defaults.
//!
//! Every setting is a row of one table, [`SETTINGS`] (key, environment variable, kind,
//! default, doc): [`Config::load`] applies it and `docs/configuration.md` is printed from it
//! (`runtime-cloud config-docs`). The file uses the same keys as [`Config`]'s fields, and the
//! spec's options under their spec names:
//!
//! ```toml
//! data_dir = ".data"
//! database_url = "postgres://postgres@127.0.0.1:5432/runtime_cloud"
//! otlp_endpoint = "http://127.0.0.1:4318"
//!
//! [RuntimeCloud.Provisioning]
//! ApplyTimeoutMinutes = 45
//!
//! [RuntimeCloud.Inventory]
//! StalenessMinutes = 15
//! ```

mod settings;
mod table;

pub use settings::{
    CONFIG_FILE, FILE_SUFFIX, Kind, LOG_FORMAT, OTEL_SERVICE_NAME, REGENERATE, RUST_LOG, Setting,
    Source, TEMPORAL_CLI, markdown,
};
pub use table::{Config, SETTINGS};

/// Every environment variable the binary reads: each setting's, and a secret's `…_FILE`.
pub fn variables() -> std::collections::BTreeSet<String> {
    SETTINGS
        .iter()
        .flat_map(|s| std::iter::once(s.env.to_owned()).chain(s.file_variable()))
        .collect()
}

use anyhow::Context;
use runtime_cloud_api::auth::oidc::{OidcSettings, parse_role_map};
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use serde::Deserialize;
use std::path::Path;

/// `[RuntimeCloud]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields)]
pub struct RuntimeCloudSection {
    /// `[RuntimeCloud.Provisioning]`.
    #[serde(default, rename = "Provisioning")]
    pub provisioning: ProvisioningOptions,
    /// `[RuntimeCloud.Inventory]`.
    #[serde(default, rename = "Inventory")]
    pub inventory: InventoryOptions,
}

impl Config {
    /// Reads `path` (if given) and applies the environment.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let text = match path {
            Some(p) => {
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?
            }
            None => String::new(),
        };
        Self::from_sources(&text, |k| std::env::var(k).ok())?.with_absolute_paths()
    }

    /// The same configuration with its relative paths made absolute against the current
    /// directory, once, at start: the data dir and the policy dir reach processes that run
    /// elsewhere (the Pulumi CLI runs in the program's checkout, `git` in a mirror), where a
    /// relative path such as the default `.data` would name another place.
    fn with_absolute_paths(mut self) -> anyhow::Result<Self> {
        let absolute = |path: &Path| {
            std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
        };
        self.data_dir = absolute(&self.data_dir)?;
        if let Some(dir) = &self.policy_dir {
            self.policy_dir = Some(absolute(dir)?);
        }
        for file in [
            &mut self.inbound_sources,
            &mut self.temporal_tls_ca_file,
            &mut self.temporal_tls_cert_file,
            &mut self.temporal_tls_key_file,
            &mut self.nats_creds_file,
            &mut self.nats_tls_ca_file,
            &mut self.nats_tls_cert_file,
            &mut self.nats_tls_key_file,
        ]
        .into_iter()
        .flatten()
        {
            *file = absolute(file)?;
        }
        Ok(self)
    }

    /// The configuration from a file's text and an environment lookup.
    fn from_sources(file: &str, var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let file: toml::Table = toml::from_str(file).context("parsing the configuration file")?;
        settings::layer(file, var)?
            .try_into()
            .context("reading the configuration file")
    }

    /// The read DB URL: the configured one, else SQLite under the data dir.
    pub fn database_url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| {
            format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.join("runtime-cloud.db").display()
            )
        })
    }

    /// The OpenID Connect provider's settings, when one is configured.
    pub fn oidc(&self) -> anyhow::Result<Option<OidcSettings>> {
        let Some(issuer) = &self.oidc_issuer else {
            return Ok(None);
        };
        let audience = self.oidc_audience.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "oidc_issuer is set without oidc_audience (RUNTIME_CLOUD_OIDC_AUDIENCE)"
            )
        })?;
        let role_map = match &self.oidc_role_map {
            Some(map) => parse_role_map(map).map_err(|e| anyhow::anyhow!("oidc_role_map: {e}"))?,
            None => Vec::new(),
        };
        Ok(Some(OidcSettings {
            issuer: issuer.clone(),
            audience,
            tenant_claim: self.oidc_tenant_claim.clone(),
            scope_claim: self.oidc_scope_claim.clone(),
            roles_claim: self.oidc_roles_claim.clone(),
            role_map,
            leeway_secs: self.oidc_clock_skew_seconds.ceil() as u64,
        }))
    }

    /// How to dial Temporal: TLS when any TLS setting or an API key says so, its files read
    /// now (a missing one is an error naming its setting).
    pub fn temporal_connect(&self) -> anyhow::Result<runtime_cloud_temporal::Connect> {
        let read = |path: &Path, setting: &str| {
            std::fs::read(path).with_context(|| format!("{setting}: reading {}", path.display()))
        };
        let client = match (&self.temporal_tls_cert_file, &self.temporal_tls_key_file) {
            (Some(cert), Some(key)) => Some((
                read(cert, "TEMPORAL_TLS_CERT_FILE")?,
                read(key, "TEMPORAL_TLS_KEY_FILE")?,
            )),
            (None, None) => None,
            _ => anyhow::bail!(
                "TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE go together: set both or neither"
            ),
        };
        let ca = match &self.temporal_tls_ca_file {
            Some(path) => Some(read(path, "TEMPORAL_TLS_CA_FILE")?),
            None => None,
        };
        let wanted = self.temporal_tls
            || ca.is_some()
            || client.is_some()
            || self.temporal_tls_server_name.is_some();
        Ok(runtime_cloud_temporal::Connect {
            trace_context: self.otlp_endpoint.is_some(),
            gzip: self.temporal_grpc_gzip,
            tls: wanted.then(|| runtime_cloud_temporal::Tls {
                ca,
                server_name: self.temporal_tls_server_name.clone(),
                client,
            }),
            api_key: self.temporal_api_key.clone(),
            payload_keys: self.payload_keys()?,
            // The data dir tells two `runtime-cloud dev` on one server apart
            // (`dev_server::refuse_shared`).
            identity: Some(runtime_cloud_temporal::dev_server::identity(&self.data_dir)),
        })
    }

    /// The keys workflow payloads are encrypted with, read now from `payload_key_files`
    /// (comma-separated, each made absolute against the current directory); `None` when unset.
    pub fn payload_keys(&self) -> anyhow::Result<Option<runtime_cloud_temporal::PayloadKeys>> {
        let Some(files) = &self.payload_key_files else {
            return Ok(None);
        };
        let paths = files
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| std::path::absolute(f).with_context(|| format!("resolving {f}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let keys = runtime_cloud_temporal::PayloadKeys::from_files(&paths)
            .context("RUNTIME_CLOUD_PAYLOAD_KEY_FILES (payload_key_files)")?;
        Ok(Some(keys))
    }

    /// How to reach NATS, when it is configured.
    pub fn nats(&self) -> Option<runtime_cloud_nats::NatsOptions> {
        let url = self.nats_url.clone()?;
        Some(runtime_cloud_nats::NatsOptions {
            url,
            user: self
                .nats_user
                .clone()
                .map(|user| (user, self.nats_password.clone().unwrap_or_default())),
            token: self.nats_token.clone(),
            nkey_seed: self.nats_nkey_seed.clone(),
            creds_file: self.nats_creds_file.clone(),
            tls_ca: self.nats_tls_ca_file.clone(),
            tls_client: self
                .nats_tls_cert_file
                .clone()
                .zip(self.nats_tls_key_file.clone()),
        })
    }

    /// The token key: configured, else read from (or created once in) the data dir.
    pub fn jwt_secret(&self) -> anyhow::Result<Vec<u8>> {
        if let Some(s) = &self.jwt_secret {
            return Ok(s.as_bytes().to_vec());
        }
        let path = self.data_dir.join("jwt-secret");
        match std::fs::read(&path) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.data_dir)?;
                // Two v4 UUIDs: 244 random bits from the OS generator.
                let secret = format!(
                    "{}{}",
                    uuid::Uuid::new_v4().simple(),
                    uuid::Uuid::new_v4().simple()
                );
                std::fs::write(&path, &secret)
                    .with_context(|| format!("writing {}", path.display()))?;
                Ok(secret.into_bytes())
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    /// Loads `file` with exactly the variables `env`.
    fn load(file: &str, env: &[(&str, &str)]) -> anyhow::Result<Config> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_sources(file, |k| env.get(k).cloned())
    }

    /// A loaded configuration's value at a dotted file key, as TOML.
    fn value_at(config: &Config, key: &str) -> Option<toml::Value> {
        let mut value = toml::Value::try_from(config).expect("serializes");
        for segment in key.split('.') {
            value = value.get(segment)?.clone();
        }
        Some(value)
    }

    /// A secret is read from the file its `…_FILE` variable names (a mounted Kubernetes
    /// Secret, with the line break it ends with dropped); naming it twice is refused.
    #[test]
    fn a_secret_is_read_from_its_file() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("jwt");
        std::fs::write(&file, "s3cret-from-a-file\n").expect("secret file");
        let path = file.display().to_string();
        let c = load("", &[("RUNTIME_CLOUD_JWT_SECRET_FILE", &path)]).expect("loads");
        assert_eq!(c.jwt_secret.as_deref(), Some("s3cret-from-a-file"));
        let both = load(
            "",
            &[
                ("RUNTIME_CLOUD_JWT_SECRET_FILE", &path),
                ("RUNTIME_CLOUD_JWT_SECRET", "other"),
            ],
        )
        .unwrap_err();
        assert!(format!("{both:#}").contains("both set"), "{both:#}");
        let missing = load("", &[("DATABASE_URL_FILE", "/nonexistent/db-url")]).unwrap_err();
        assert!(
            format!("{missing:#}").contains("DATABASE_URL_FILE"),
            "{missing:#}"
        );
        // Only secrets have a file variable: every other one is read as it is.
        assert!(variables().contains("RUNTIME_CLOUD_RUN_CONTROL_TOKEN_FILE"));
        assert!(!variables().contains("TEMPORAL_ADDRESS_FILE"));
    }

    /// The default data dir (`.data`) and a relative policy dir come out of loading absolute,
    /// under the current directory: a child process in another directory finds the same place.
    #[test]
    fn relative_paths_are_resolved_once_against_the_current_directory() {
        let c = load("policy_dir = \"policies\"", &[])
            .and_then(Config::with_absolute_paths)
            .expect("loads");
        let here = std::env::current_dir().expect("a current directory");
        assert_eq!(c.data_dir, here.join(".data"));
        assert_eq!(c.policy_dir, Some(here.join("policies")));
        assert!(
            c.database_url()
                .contains(&here.join(".data").display().to_string())
        );
    }

    /// With no file and no variables, the options are the spec's defaults and the rest the
    /// table's.
    #[test]
    fn defaults_are_the_spec_defaults() {
        let c = load("", &[]).expect("loads");
        assert_eq!(c.runtime_cloud.provisioning, ProvisioningOptions::default());
        assert_eq!(c.runtime_cloud.inventory, InventoryOptions::default());
        let p = &c.runtime_cloud.provisioning;
        assert_eq!(p.apply_timeout_minutes, 45.0);
        assert!(p.auto_apply_non_destructive);
        assert_eq!(p.approval_timeout_hours, 24.0);
        assert_eq!(p.lock_holder_check_minutes, 10.0);
        assert_eq!(p.approval_validity_hours, 24.0);
        assert_eq!(c.runtime_cloud.inventory.staleness_minutes, 15.0);
        assert!(
            c.runtime_cloud
                .inventory
                .auto_accept_non_destructive_outside_production
        );
        assert_eq!(c.data_dir, PathBuf::from(".data"));
        assert_eq!(c.temporal_address, "127.0.0.1:7233");
        assert_eq!(c.temporal_namespace, "default");
        assert_eq!(c.task_queue, runtime_cloud_temporal::DEFAULT_TASK_QUEUE);
        assert_eq!(c.listen, "127.0.0.1:8080");
        assert!(!c.schedules_paused);
        assert_eq!(
            (c.database_url, c.jwt_secret, c.nats_url, c.otlp_endpoint),
            (None, None, None, None)
        );
    }

    /// Every file setting of the table: its default (or absence) is what loading gives, and
    /// its variable sets exactly its key.
    #[test]
    fn every_variable_of_the_table_sets_its_key() {
        let defaults = load("", &[]).expect("loads");
        for s in SETTINGS {
            let Some(key) = s.file_key() else { continue };
            let expected_default = s.default.map(|d| s.kind.read(d).expect("valid default"));
            assert_eq!(
                value_at(&defaults, key),
                expected_default,
                "default of {key}"
            );

            let (text, expected) = match s.kind {
                Kind::Text | Kind::Secret => {
                    ("set-by-the-test", toml::Value::from("set-by-the-test"))
                }
                Kind::Positive => ("7.5", toml::Value::Float(7.5)),
                Kind::Bool if s.default == Some("true") => ("false", toml::Value::Boolean(false)),
                Kind::Bool => ("true", toml::Value::Boolean(true)),
            };
            let c = load("", &[(s.env, text)]).unwrap_or_else(|e| panic!("{}: {e:#}", s.env));
            assert_eq!(value_at(&c, key), Some(expected), "{}={text}", s.env);
        }
    }

    /// The file wins over the defaults, a variable over the file; the spec names in both.
    #[test]
    fn the_file_wins_over_defaults_and_the_environment_over_the_file() {
        let file = "listen = \"0.0.0.0:9000\"\nnats_url = \"nats://file:4222\"\n\
                    [RuntimeCloud.Provisioning]\nApplyTimeoutMinutes = 5\n\
                    AutoApplyNonDestructive = true\n";
        let c = load(file, &[]).expect("loads");
        assert_eq!(c.listen, "0.0.0.0:9000");
        assert_eq!(c.nats_url.as_deref(), Some("nats://file:4222"));
        assert_eq!(c.runtime_cloud.provisioning.apply_timeout_minutes, 5.0);
        assert_eq!(c.temporal_namespace, "default");

        let c = load(
            file,
            &[
                ("RUNTIME_CLOUD_LISTEN", "127.0.0.1:0"),
                (
                    "RuntimeCloud__Provisioning__AutoApplyNonDestructive",
                    "false",
                ),
                ("RuntimeCloud__Provisioning__ApprovalTimeoutHours", "0.01"),
            ],
        )
        .expect("loads");
        assert_eq!(c.listen, "127.0.0.1:0");
        assert_eq!(c.nats_url.as_deref(), Some("nats://file:4222"));
        let p = &c.runtime_cloud.provisioning;
        assert!(!p.auto_apply_non_destructive);
        assert_eq!(p.apply_timeout_minutes, 5.0);
        assert_eq!(p.approval_timeout_hours, 0.01);
    }

    /// A value of the wrong kind is refused, and the message names the variable (or the file
    /// key) and what it must be.
    #[test]
    fn a_bad_value_is_refused_naming_the_variable() {
        for (env, value, expected) in [
            (
                "RUNTIME_CLOUD_SCHEDULES_PAUSED",
                "yes",
                "RUNTIME_CLOUD_SCHEDULES_PAUSED must be true or false, not \"yes\"",
            ),
            (
                "RuntimeCloud__Provisioning__ApplyTimeoutMinutes",
                "soon",
                "RuntimeCloud__Provisioning__ApplyTimeoutMinutes must be a number, not \"soon\"",
            ),
            (
                "RuntimeCloud__Provisioning__LockHolderCheckMinutes",
                "0",
                "RuntimeCloud__Provisioning__LockHolderCheckMinutes must be positive, not \"0\"",
            ),
            (
                "RuntimeCloud__Inventory__StalenessMinutes",
                "-1",
                "RuntimeCloud__Inventory__StalenessMinutes must be positive, not \"-1\"",
            ),
            (
                "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction",
                "1",
                "AutoAcceptNonDestructiveOutsideProduction must be true or false",
            ),
        ] {
            let e = load("", &[(env, value)]).expect_err(env);
            assert!(format!("{e:#}").contains(expected), "{env}={value}: {e:#}");
        }
        for (file, expected) in [
            (
                "[RuntimeCloud.Inventory]\nStalenessMinutes = 0\n",
                "RuntimeCloud.Inventory.StalenessMinutes must be positive, not 0",
            ),
            (
                "[RuntimeCloud.Provisioning]\nApprovalTimeoutHours = \"a day\"\n",
                "RuntimeCloud.Provisioning.ApprovalTimeoutHours must be a number",
            ),
            (
                "schedules_paused = \"no\"\n",
                "schedules_paused must be true or false",
            ),
            ("listen = 8080\n", "listen must be text"),
            ("RuntimeCloud = 3\n", "RuntimeCloud must be a table"),
        ] {
            let e = load(file, &[]).expect_err(file);
            assert!(format!("{e:#}").contains(expected), "{file:?}: {e:#}");
        }
    }

    /// A key the configuration does not know is refused, in a section or at the top, and the
    /// message names it.
    #[test]
    fn unknown_keys_are_refused() {
        for (file, key) in [
            (
                "[RuntimeCloud.Provisioning]\nApplyTimeout = 5\n",
                "ApplyTimeout",
            ),
            ("[RuntimeCloud.Scheduling]\nPaused = true\n", "Scheduling"),
            ("listen_address = \"0.0.0.0:8080\"\n", "listen_address"),
        ] {
            let e = load(file, &[]).expect_err(file);
            assert!(format!("{e:#}").contains(key), "{file:?}: {e:#}");
        }
    }
}
