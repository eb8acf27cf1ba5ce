//! Configuration: a TOML file, then environment variables, then defaults.
//!
//! ```toml
//! data_dir = ".data"
//! database_url = "sqlite://.data/runtime-cloud.db?mode=rwc"
//! temporal_address = "127.0.0.1:7233"
//! temporal_namespace = "default"
//! task_queue = "runtime-cloud"
//! listen = "127.0.0.1:8080"
//! otlp_endpoint = "http://127.0.0.1:4318"   # optional: export spans over OTLP/HTTP
//!
//! [RuntimeCloud.Provisioning]
//! ApplyTimeoutMinutes = 45
//! AutoApplyNonDestructive = true
//! ApprovalTimeoutHours = 24
//!
//! [RuntimeCloud.Inventory]
//! StalenessMinutes = 15
//! AutoAcceptNonDestructiveOutsideProduction = true
//! ```
//!
//! Environment variables win over the file: `RUNTIME_CLOUD_DATA_DIR`, `DATABASE_URL`,
//! `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `RUNTIME_CLOUD_TASK_QUEUE`, `RUNTIME_CLOUD_LISTEN`,
//! `RUNTIME_CLOUD_JWT_SECRET`, `RUNTIME_CLOUD_SCHEDULES_PAUSED`, `NATS_URL`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (`OTEL_SERVICE_NAME` names the service, default
//! `runtime-cloud-{command}`), and for the options `RuntimeCloud__Provisioning__<Key>` and
//! `RuntimeCloud__Inventory__<Key>`.

use anyhow::{Context, bail};
use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the SQLite read DB, the sandbox targets, the JWT key and the dev server's store live.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// `sqlite://…` or `postgres://…`; SQLite under the data dir when absent.
    #[serde(default)]
    pub database_url: Option<String>,
    /// The Temporal frontend.
    #[serde(default = "default_temporal_address")]
    pub temporal_address: String,
    /// The Temporal namespace.
    #[serde(default = "default_namespace")]
    pub temporal_namespace: String,
    /// The task queue of every workflow and activity.
    #[serde(default = "default_task_queue")]
    pub task_queue: String,
    /// The API's listen address.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The HS256 key of bearer tokens; `{data_dir}/jwt-secret` (created once) when absent.
    #[serde(default)]
    pub jwt_secret: Option<String>,
    /// NATS with JetStream for the outbox relay (`nats://127.0.0.1:4222`); no relay when absent.
    #[serde(default)]
    pub nats_url: Option<String>,
    /// Create the schedules paused (they can still be triggered by hand).
    #[serde(default)]
    pub schedules_paused: bool,
    /// An OTLP/HTTP collector (`http://127.0.0.1:4318`): spans are exported there and trace
    /// context crosses Temporal. No export when absent.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// The spec's options, under their spec names.
    #[serde(default, rename = "RuntimeCloud")]
    pub runtime_cloud: RuntimeCloudSection,
}

/// `[RuntimeCloud]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeCloudSection {
    /// `[RuntimeCloud.Provisioning]`.
    #[serde(default, rename = "Provisioning")]
    pub provisioning: ProvisioningOptions,
    /// `[RuntimeCloud.Inventory]`.
    #[serde(default, rename = "Inventory")]
    pub inventory: InventoryOptions,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from(".data")
}
fn default_temporal_address() -> String {
    "127.0.0.1:7233".into()
}
fn default_namespace() -> String {
    "default".into()
}
fn default_task_queue() -> String {
    runtime_cloud_temporal::DEFAULT_TASK_QUEUE.into()
}
fn default_listen() -> String {
    "127.0.0.1:8080".into()
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
        let mut config: Config = toml::from_str(&text).context("parsing the configuration file")?;
        config.apply_env(|k| std::env::var(k).ok())?;
        Ok(config)
    }

    fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        if let Some(v) = var("RUNTIME_CLOUD_DATA_DIR") {
            self.data_dir = v.into();
        }
        if let Some(v) = var("DATABASE_URL") {
            self.database_url = Some(v);
        }
        if let Some(v) = var("TEMPORAL_ADDRESS") {
            self.temporal_address = v;
        }
        if let Some(v) = var("TEMPORAL_NAMESPACE") {
            self.temporal_namespace = v;
        }
        if let Some(v) = var("RUNTIME_CLOUD_TASK_QUEUE") {
            self.task_queue = v;
        }
        if let Some(v) = var("RUNTIME_CLOUD_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = var("RUNTIME_CLOUD_JWT_SECRET") {
            self.jwt_secret = Some(v);
        }
        if let Some(v) = var("NATS_URL") {
            self.nats_url = Some(v);
        }
        if let Some(v) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            self.otlp_endpoint = Some(v);
        }
        if let Some(v) = var("RUNTIME_CLOUD_SCHEDULES_PAUSED") {
            self.schedules_paused = v
                .parse()
                .context("RUNTIME_CLOUD_SCHEDULES_PAUSED must be true or false")?;
        }
        let p = &mut self.runtime_cloud.provisioning;
        let prefix = "RuntimeCloud__Provisioning__";
        if let Some(v) = var(&format!("{prefix}ApplyTimeoutMinutes")) {
            p.apply_timeout_minutes = v.parse().context("ApplyTimeoutMinutes must be a number")?;
        }
        if let Some(v) = var(&format!("{prefix}AutoApplyNonDestructive")) {
            p.auto_apply_non_destructive = v
                .parse()
                .context("AutoApplyNonDestructive must be true or false")?;
        }
        if let Some(v) = var(&format!("{prefix}ApprovalTimeoutHours")) {
            p.approval_timeout_hours =
                v.parse().context("ApprovalTimeoutHours must be a number")?;
        }
        if let Some(v) = var(&format!("{prefix}LockHolderCheckMinutes")) {
            p.lock_holder_check_minutes = v
                .parse()
                .context("LockHolderCheckMinutes must be a number")?;
        }
        if p.apply_timeout_minutes <= 0.0
            || p.approval_timeout_hours <= 0.0
            || p.lock_holder_check_minutes <= 0.0
        {
            bail!(
                "ApplyTimeoutMinutes, ApprovalTimeoutHours and LockHolderCheckMinutes must be positive"
            );
        }
        let i = &mut self.runtime_cloud.inventory;
        let prefix = "RuntimeCloud__Inventory__";
        if let Some(v) = var(&format!("{prefix}StalenessMinutes")) {
            i.staleness_minutes = v.parse().context("StalenessMinutes must be a number")?;
        }
        if let Some(v) = var(&format!(
            "{prefix}AutoAcceptNonDestructiveOutsideProduction"
        )) {
            i.auto_accept_non_destructive_outside_production = v
                .parse()
                .context("AutoAcceptNonDestructiveOutsideProduction must be true or false")?;
        }
        if i.staleness_minutes <= 0.0 {
            bail!("StalenessMinutes must be positive");
        }
        Ok(())
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

    #[test]
    fn defaults_are_the_spec_defaults() {
        let c: Config = toml::from_str("").unwrap();
        assert_eq!(c.runtime_cloud.provisioning.apply_timeout_minutes, 45.0);
        assert!(c.runtime_cloud.provisioning.auto_apply_non_destructive);
        assert_eq!(c.runtime_cloud.provisioning.approval_timeout_hours, 24.0);
    }

    #[test]
    fn file_and_environment_use_the_spec_names() {
        let mut c: Config =
            toml::from_str("[RuntimeCloud.Provisioning]\nApplyTimeoutMinutes = 5\n").unwrap();
        assert_eq!(c.runtime_cloud.provisioning.apply_timeout_minutes, 5.0);
        c.apply_env(|k| {
            (k == "RuntimeCloud__Provisioning__AutoApplyNonDestructive").then(|| "false".into())
        })
        .unwrap();
        assert!(!c.runtime_cloud.provisioning.auto_apply_non_destructive);
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(
            toml::from_str::<Config>("[RuntimeCloud.Provisioning]\nApplyTimeout = 5\n").is_err()
        );
    }
}
