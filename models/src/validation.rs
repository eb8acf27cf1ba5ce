//! What a valid declaration looks like: ids usable in paths and file names, references that
//! are never values, and workloads with unique names. Every way a specification is declared
//! (the API, a proposal that adopts what was observed) checks it here.

use crate::specification::{Refs, SpecificationKind, Workload};
use std::collections::BTreeSet;

/// Why a declaration was refused. The message never repeats a value that might be a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Checks an id used in paths and file names: 1–63 of `[A-Za-z0-9._-]`, not starting with a dot.
pub fn check_id(what: &str, id: &str) -> Result<(), Invalid> {
    let ok = !id.is_empty()
        && id.len() <= 63
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "{what} must be 1-63 characters of [A-Za-z0-9._-]"
        )))
    }
}

/// A secret reference names where the value lives (`secretbroker://payments/db-password`),
/// never the value itself. Anything that does not look like a reference is refused.
pub fn is_reference(v: &str) -> bool {
    match v.split_once("://") {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '-' | '.')
                })
                && !rest.is_empty()
                && !rest.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn check_refs(what: &str, refs: &Refs) -> Result<(), Invalid> {
    for (name, reference) in refs {
        if !is_reference(reference) {
            return Err(Invalid(format!(
                "{what}.{name} must be a reference such as `secretbroker://path/key`; values are never accepted"
            )));
        }
    }
    Ok(())
}

/// A specification version to declare: everything but what the store assigns (id, version,
/// declaration time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub kind: SpecificationKind,
    /// Repository + path of the IaC program.
    pub program_ref: String,
    /// Commit of the program.
    pub program_version: String,
    pub release_id: Option<String>,
    pub strategy: Option<String>,
    /// Config Platform keys by reference.
    pub config_refs: Refs,
    /// Secret references; never values.
    pub secret_refs: Refs,
    pub workloads: Vec<Workload>,
}

impl Declaration {
    /// The declaration rule: a valid environment id, a program and its version, references
    /// only (never values), workloads with unique valid names, a kind and a version each.
    pub fn validate(&self) -> Result<(), Invalid> {
        check_id("environmentId", &self.environment_id)?;
        if self.program_ref.trim().is_empty() || self.program_version.trim().is_empty() {
            return Err(Invalid("programRef and programVersion are required".into()));
        }
        check_refs("configRefs", &self.config_refs)?;
        check_refs("secretRefs", &self.secret_refs)?;
        let mut names = BTreeSet::new();
        for w in &self.workloads {
            check_id("workloads[].name", &w.name)?;
            if !names.insert(w.name.as_str()) {
                return Err(Invalid(format!("workload `{}` is declared twice", w.name)));
            }
            if w.kind.trim().is_empty() || w.version.trim().is_empty() {
                return Err(Invalid(format!(
                    "workload `{}` needs a kind and a version",
                    w.name
                )));
            }
            check_refs(&format!("workloads.{}.configRefs", w.name), &w.config_refs)?;
            check_refs(&format!("workloads.{}.secretRefs", w.name), &w.secret_refs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_uris_and_values_are_not() {
        assert!(is_reference("secretbroker://payments/db-password"));
        assert!(is_reference("kv://vault-1/app#key"));
        assert!(!is_reference("hunter2"));
        assert!(!is_reference("postgres password with spaces://x"));
        assert!(!is_reference("secretbroker://"));
    }

    #[test]
    fn ids_are_path_safe() {
        assert!(check_id("id", "prod-eu_1.a").is_ok());
        for bad in ["", ".hidden", "a/b", "sp ace", &"x".repeat(64)] {
            assert!(check_id("id", bad).is_err(), "{bad:?}");
        }
    }

    fn workload(name: &str) -> Workload {
        Workload {
            name: name.into(),
            kind: "deployment".into(),
            version: "1.0.0".into(),
            replicas: 1,
            config_refs: Refs::new(),
            secret_refs: Refs::new(),
        }
    }

    fn declaration() -> Declaration {
        Declaration {
            tenant_id: "acme".into(),
            project_id: "shop".into(),
            environment_id: "dev".into(),
            kind: SpecificationKind::Environment,
            program_ref: "git://infra/shop".into(),
            program_version: "abc123".into(),
            release_id: None,
            strategy: None,
            config_refs: Refs::new(),
            secret_refs: Refs::new(),
            workloads: vec![workload("api")],
        }
    }

    #[test]
    fn a_declaration_takes_references_and_unique_workloads_only() {
        assert!(declaration().validate().is_ok());
        let mut d = declaration();
        d.secret_refs.insert("db".into(), "hunter2".into());
        let err = d.validate().unwrap_err().to_string();
        assert!(
            err.contains("secretRefs.db") && !err.contains("hunter2"),
            "{err}"
        );
        let mut d = declaration();
        d.workloads.push(workload("api"));
        assert!(d.validate().is_err(), "a workload declared twice");
        let mut d = declaration();
        d.program_version = " ".into();
        assert!(d.validate().is_err(), "no program version");
        let mut d = declaration();
        d.workloads[0]
            .secret_refs
            .insert("k".into(), "plain value".into());
        assert!(d.validate().is_err(), "a workload's secret value");
    }
}
