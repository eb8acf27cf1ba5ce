//! The settings' machinery: what a row of [`SETTINGS`] says ([`Setting`]), loading the rows
//! over the file and the environment ([`layer`]) and `docs/configuration.md` ([`markdown`]).
//! The rows themselves are declared with `Config`'s fields, once each (`table.rs`).
//!
//! Loading walks the table (a variable wins over the file, the file over the default, each
//! value checked against its [`Kind`]), `docs/configuration.md` is printed from it
//! ([`markdown`]), and `tests/compose.rs` checks the compose file and the image against it.
//! The code reads no variable that is not a row here: the flags, the telemetry setup and the
//! dev server name theirs through the rows' constants ([`LOG_FORMAT`], [`RUST_LOG`], …).

use super::SETTINGS;
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
        "<!-- Generated from the table in src/config/table.rs; do not edit by hand. Regenerate:",
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
