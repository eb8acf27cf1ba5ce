//! IaC programs at their commit, with the `git` CLI.
//!
//! A specification's `programRef` is `<git URL>//<path in the repository>` (https, ssh or
//! `file://`) and its `programVersion` a commit. The runner keeps one bare mirror per repository
//! under `{data_dir}/programs/mirrors/`, fetches only when the commit is missing, and exports the
//! commit into a working tree of the run's own (`{data_dir}/programs/runs/{run_id}-{phase}`),
//! removed when the step is done. Exporting (`git archive`) only reads the mirror, so runs of
//! the same repository never share an index or a checkout.

use crate::Error;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::process::Command;

/// Where a program lives: a repository and a directory in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRef {
    /// `https://…`, `ssh://…` or `file://…`.
    pub repository: String,
    /// The program's directory in the repository (`""` for its root).
    pub path: String,
}

impl ProgramRef {
    /// Reads `<git URL>//<path>`; a reference that cannot name a program is
    /// [`Error::PlanInvalid`] (never retried).
    pub fn parse(program_ref: &str) -> Result<Self, Error> {
        let invalid = |why: &str| {
            Error::PlanInvalid(format!(
                "programRef `{program_ref}` {why}; expected `<https://…|ssh://…|file://…>//<path in the repository>`"
            ))
        };
        let (scheme, rest) = program_ref
            .split_once("://")
            .ok_or_else(|| invalid("has no scheme"))?;
        let (location, path) = match rest.split_once("//") {
            Some((location, path)) => (location, path.trim_matches('/')),
            None => (rest, ""),
        };
        // Plain http only to this host (a Git server beside the worker): a credential must
        // never cross a network in the clear.
        let loopback = ["127.0.0.1", "localhost", "[::1]"].iter().any(|h| {
            location == *h
                || location.starts_with(&format!("{h}:"))
                || location.starts_with(&format!("{h}/"))
        });
        let allowed = ["https", "ssh", "file"].contains(&scheme) || (scheme == "http" && loopback);
        if !allowed {
            return Err(invalid("names a scheme the runner does not fetch from"));
        }
        if location.is_empty() || location.chars().any(char::is_whitespace) {
            return Err(invalid("has no repository"));
        }
        if path.split('/').any(|p| p == "..") {
            return Err(invalid("leaves the repository"));
        }
        Ok(Self {
            repository: format!("{scheme}://{location}"),
            path: path.to_owned(),
        })
    }
}

/// A run's copy of a program at its commit; removed on [`Checkout::remove`] (or on drop).
#[derive(Debug)]
pub struct Checkout {
    /// The exported repository.
    root: PathBuf,
    /// The program's directory inside it.
    pub program_dir: PathBuf,
}

impl Checkout {
    /// Removes the working tree.
    pub async fn remove(mut self) {
        let root = std::mem::take(&mut self.root);
        let _ = tokio::fs::remove_dir_all(&root).await;
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if !self.root.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// The mirrors and working trees of one worker.
#[derive(Debug, Clone)]
pub struct Programs {
    root: PathBuf,
    /// One lock per mirror: two activities of this process never fetch into it at once.
    locks: Arc<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Programs {
    /// Mirrors and working trees under `data_dir/programs`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("programs"),
            locks: Default::default(),
        }
    }

    /// The bare mirror of `repository` for `tenant_id`. One per tenant: a commit fetched with
    /// one tenant's credential is never served to another tenant from the cache.
    fn mirror(&self, tenant_id: &str, repository: &str) -> PathBuf {
        let digest = hex::encode(Sha256::digest(format!("{tenant_id}\n{repository}")));
        self.root
            .join("mirrors")
            .join(format!("{}.git", &digest[..24]))
    }

    /// Exports `program`'s repository at `commit` for step `name` (`{run}-plan`), fetching
    /// only when the mirror lacks the commit. A commit the repository does not have is
    /// [`Error::PlanInvalid`] naming the reference.
    pub async fn checkout(
        &self,
        tenant_id: &str,
        program: &ProgramRef,
        commit: &str,
        name: &str,
        credential: Option<&GitCredential>,
    ) -> Result<Checkout, Error> {
        let mirror = self
            .mirrored(tenant_id, program, commit, credential)
            .await?;
        let root = self.root.join("runs").join(name);
        let _ = tokio::fs::remove_dir_all(&root).await;
        tokio::fs::create_dir_all(&root)
            .await
            .map_err(|e| io("creating", &root, e))?;
        let checkout = Checkout {
            program_dir: root.join(&program.path),
            root,
        };
        export(&mirror, commit, &checkout.root).await?;
        if !checkout.program_dir.is_dir() {
            return Err(Error::PlanInvalid(format!(
                "program path `{}` does not exist at {commit} in {}",
                program.path, program.repository
            )));
        }
        Ok(checkout)
    }

    /// The tenant's mirror of `program`'s repository, holding `commit` (fetched only when
    /// missing). A commit the repository does not have is [`Error::PlanInvalid`].
    pub(crate) async fn mirrored(
        &self,
        tenant_id: &str,
        program: &ProgramRef,
        commit: &str,
        credential: Option<&GitCredential>,
    ) -> Result<PathBuf, Error> {
        if commit.is_empty() || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::PlanInvalid(format!(
                "programVersion `{commit}` is not a commit id"
            )));
        }
        let mirror = self.mirror(tenant_id, &program.repository);
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(mirror.clone()).or_default().clone()
        };
        {
            let _held = lock.lock().await;
            if !mirror.exists() {
                self.create_mirror(&mirror, &program.repository, credential)
                    .await?;
            }
            if !has_commit(&mirror, commit).await? {
                // Fetch every ref, then the commit itself (servers that allow it give commits
                // no ref points at).
                let fetch_all = ["fetch", "--quiet", "--prune", "origin"];
                fetch(&mirror, &fetch_all, credential).await?;
                if !has_commit(&mirror, commit).await? {
                    let _ =
                        fetch(&mirror, &["fetch", "--quiet", "origin", commit], credential).await;
                }
                if !has_commit(&mirror, commit).await? {
                    return Err(Error::PlanInvalid(format!(
                        "program version {commit} not found in {}",
                        program.repository
                    )));
                }
            }
        }
        Ok(mirror)
    }

    /// A directory of its own for a scratch step, under the programs' root.
    pub(crate) fn scratch(&self, name: &str) -> PathBuf {
        self.root.join("scratch").join(name)
    }

    async fn create_mirror(
        &self,
        mirror: &Path,
        repository: &str,
        credential: Option<&GitCredential>,
    ) -> Result<(), Error> {
        let parent = mirror.parent().unwrap_or(&self.root);
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| io("creating", parent, e))?;
        // Built beside its final name and renamed, so a half-made mirror is never used.
        let partial = mirror.with_extension("partial");
        let _ = tokio::fs::remove_dir_all(&partial).await;
        let mut clone = git_command();
        let _key = authenticate(&mut clone, credential)?;
        let out = clone
            .args(["clone", "--quiet", "--mirror", "--", repository])
            .arg(&partial)
            .output()
            .await
            .map_err(|e| io("running git in", parent, e))?;
        if !out.status.success() {
            let _ = tokio::fs::remove_dir_all(&partial).await;
            return Err(unreachable(repository, &out.stderr));
        }
        tokio::fs::rename(&partial, mirror)
            .await
            .map_err(|e| io("renaming", mirror, e))
    }
}

/// `git` with what a runner needs: no prompts, no `ext::` transports, no system config
/// surprises in how it fetches.
pub(crate) fn git_command() -> Command {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .args([
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "protocol.allow=user",
        ])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// The credential of a private repository, resolved from the target's
/// `repositoryCredentialRef` for one fetch. It reaches `git` through the child's environment
/// only (never an argument, which `ps` shows, nor the mirror's config on disk).
pub enum GitCredential {
    /// https: `Authorization: Basic` of `user:token`.
    Basic { user: String, token: String },
    /// ssh: a private key, written to a file only this user can read while git runs.
    SshKey(String),
}

impl GitCredential {
    /// `user:token` or a bare token (sent as `x-access-token:token`, which GitHub, Gitea and
    /// Bitbucket accept) for https; a PEM/OpenSSH private key for ssh.
    pub fn from_secret(value: &str) -> Self {
        let value = value.trim();
        if value.starts_with("-----BEGIN") {
            return Self::SshKey(format!("{value}\n"));
        }
        match value.split_once(':') {
            Some((user, token)) => Self::Basic {
                user: user.to_owned(),
                token: token.to_owned(),
            },
            None => Self::Basic {
                user: "x-access-token".to_owned(),
                token: value.to_owned(),
            },
        }
    }
}

/// Gives `cmd` the credential, if any. The returned file (an ssh key) must live until the
/// command has run; it is deleted when dropped.
pub(crate) fn authenticate(
    cmd: &mut Command,
    credential: Option<&GitCredential>,
) -> Result<Option<tempfile::NamedTempFile>, Error> {
    use base64::Engine as _;
    match credential {
        None => Ok(None),
        Some(GitCredential::Basic { user, token }) => {
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"));
            // `git -c` through the environment (GIT_CONFIG_COUNT, git 2.31+).
            cmd.env("GIT_CONFIG_COUNT", "1")
                .env("GIT_CONFIG_KEY_0", "http.extraHeader")
                .env(
                    "GIT_CONFIG_VALUE_0",
                    format!("Authorization: Basic {basic}"),
                );
            Ok(None)
        }
        Some(GitCredential::SshKey(key)) => {
            use std::io::Write as _;
            // NamedTempFile is created 0600.
            let mut file = tempfile::NamedTempFile::new()
                .map_err(|e| Error::Unreachable(format!("writing the ssh key: {e}")))?;
            file.write_all(key.as_bytes())
                .map_err(|e| Error::Unreachable(format!("writing the ssh key: {e}")))?;
            cmd.env(
                "GIT_SSH_COMMAND",
                format!(
                    "ssh -i '{}' -o IdentitiesOnly=yes -o BatchMode=yes \
                     -o StrictHostKeyChecking=accept-new",
                    file.path().display()
                ),
            );
            Ok(Some(file))
        }
    }
}

/// `git --git-dir=mirror args…` that talks to the remote, with the credential.
pub(crate) async fn fetch(
    mirror: &Path,
    args: &[&str],
    credential: Option<&GitCredential>,
) -> Result<Vec<u8>, Error> {
    let mut cmd = git_command();
    let _key = authenticate(&mut cmd, credential)?;
    run_git(cmd, mirror, args).await
}

/// Runs `git --git-dir=mirror args…`.
pub(crate) async fn git(mirror: &Path, args: &[&str]) -> Result<Vec<u8>, Error> {
    run_git(git_command(), mirror, args).await
}

async fn run_git(mut cmd: Command, mirror: &Path, args: &[&str]) -> Result<Vec<u8>, Error> {
    let out = cmd
        .arg("--git-dir")
        .arg(mirror)
        .args(args)
        .output()
        .await
        .map_err(|e| io("running git in", mirror, e))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(unreachable(&mirror.display().to_string(), &out.stderr))
    }
}

async fn has_commit(mirror: &Path, commit: &str) -> Result<bool, Error> {
    let status = git_command()
        .arg("--git-dir")
        .arg(mirror)
        .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|e| io("running git in", mirror, e))?;
    Ok(status.success())
}

/// `git archive commit | tar -x -C dir`: the commit's files, without touching the mirror.
async fn export(mirror: &Path, commit: &str, dir: &Path) -> Result<(), Error> {
    let archive = git(mirror, &["archive", "--format=tar", commit]).await?;
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || tar::Archive::new(archive.as_slice()).unpack(&dir))
        .await
        .map_err(|e| Error::Unreachable(format!("exporting the program: {e}")))?
        .map_err(|e| Error::Unreachable(format!("exporting the program: {e}")))
}

pub(crate) fn io(doing: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Unreachable(format!("{doing} {}: {e}", path.display()))
}

/// A fetch that failed: the repository may come back (retried).
fn unreachable(repository: &str, stderr: &[u8]) -> Error {
    let said = String::from_utf8_lossy(stderr);
    Error::Unreachable(format!("git at {repository}: {}", said.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_ref_is_a_repository_and_a_path() {
        let p = ProgramRef::parse("https://git.example.com/infra.git//stacks/shop").unwrap();
        assert_eq!(p.repository, "https://git.example.com/infra.git");
        assert_eq!(p.path, "stacks/shop");
        let p = ProgramRef::parse("file:///srv/git/infra").unwrap();
        assert_eq!(
            (p.repository.as_str(), p.path.as_str()),
            ("file:///srv/git/infra", "")
        );
        let p = ProgramRef::parse("http://127.0.0.1:9418/infra.git//shop").unwrap();
        assert_eq!(p.repository, "http://127.0.0.1:9418/infra.git");
        let p = ProgramRef::parse("ssh://git@host/infra.git//shop/").unwrap();
        assert_eq!(p.path, "shop");
    }

    #[test]
    fn a_credential_is_a_user_and_token_a_bare_token_or_an_ssh_key() {
        let basic = |v: &str| match GitCredential::from_secret(v) {
            GitCredential::Basic { user, token } => (user, token),
            GitCredential::SshKey(_) => panic!("{v} read as a key"),
        };
        assert_eq!(basic("ci-bot:t0k:en"), ("ci-bot".into(), "t0k:en".into()));
        assert_eq!(
            basic(" ghp_abc\n"),
            ("x-access-token".into(), "ghp_abc".into())
        );
        let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----";
        assert!(matches!(
            GitCredential::from_secret(key),
            GitCredential::SshKey(k) if k.ends_with("-----\n")
        ));
    }

    #[test]
    fn a_program_ref_that_names_no_program_is_refused() {
        for bad in [
            "infra//shop",
            "ext::sh -c touch% /tmp/pwned//x",
            "git://host/infra//shop",
            "http://git.example.com/infra.git//shop",
            "http://127.0.0.1.example.com/infra.git//shop",
            "https:////shop",
            "file:///srv/infra//../../etc",
        ] {
            let err = ProgramRef::parse(bad).unwrap_err();
            assert!(matches!(err, Error::PlanInvalid(_)), "{bad}: {err:?}");
        }
    }
}

/// Against real repositories made by the test with the `git` CLI.
#[cfg(test)]
pub(crate) mod with_git {
    use super::*;
    use std::process::Command as Std;

    /// `git args…` in `dir` as a test's user; its output, trimmed.
    pub(crate) fn sh(dir: &Path, args: &[&str]) -> String {
        let out = Std::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A repository with `shop/Pulumi.yaml` in two commits; returns (dir, first, second).
    fn repository(dir: &Path) -> (String, String) {
        sh(dir, &["init", "--quiet", "-b", "main"]);
        std::fs::create_dir_all(dir.join("shop")).unwrap();
        std::fs::write(dir.join("shop/Pulumi.yaml"), "name: shop\nruntime: yaml\n").unwrap();
        sh(dir, &["add", "."]);
        sh(dir, &["commit", "--quiet", "-m", "one"]);
        let first = sh(dir, &["rev-parse", "HEAD"]);
        std::fs::write(
            dir.join("shop/Pulumi.yaml"),
            "name: shop\nruntime: yaml\n# two\n",
        )
        .unwrap();
        sh(dir, &["commit", "--quiet", "-am", "two"]);
        let second = sh(dir, &["rev-parse", "HEAD"]);
        (first, second)
    }

    #[tokio::test]
    async fn a_commit_is_exported_from_one_mirror_fetched_only_when_missing() {
        let repo = tempfile::tempdir().unwrap();
        let (first, _) = repository(repo.path());
        let data = tempfile::tempdir().unwrap();
        let programs = Programs::new(data.path());
        let program =
            ProgramRef::parse(&format!("file://{}//shop", repo.path().display())).unwrap();

        let one = programs
            .checkout("acme", &program, &first, "r1-plan", None)
            .await
            .unwrap();
        let text = std::fs::read_to_string(one.program_dir.join("Pulumi.yaml")).unwrap();
        assert_eq!(
            text, "name: shop\nruntime: yaml\n",
            "the first commit's file"
        );
        let root = one.root.clone();
        one.remove().await;
        assert!(!root.exists(), "the working tree is removed");

        // A commit made after the mirror: fetched. A short id works too.
        std::fs::write(repo.path().join("shop/Pulumi.yaml"), "three\n").unwrap();
        sh(repo.path(), &["commit", "--quiet", "-am", "three"]);
        let third = sh(repo.path(), &["rev-parse", "HEAD"]);
        let three = programs
            .checkout("acme", &program, &third[..12], "r2-plan", None)
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(three.program_dir.join("Pulumi.yaml")).unwrap(),
            "three\n"
        );
        let mirrors = std::fs::read_dir(data.path().join("programs/mirrors"))
            .unwrap()
            .count();
        assert_eq!(mirrors, 1, "one mirror per repository");

        // With the repository gone, a commit the mirror has needs no fetch.
        drop(three);
        std::fs::remove_dir_all(repo.path()).unwrap();
        let again = programs
            .checkout("acme", &program, &first, "r3-plan", None)
            .await
            .unwrap();
        assert!(again.program_dir.join("Pulumi.yaml").exists());
    }

    #[tokio::test]
    async fn a_commit_or_a_path_the_repository_lacks_fails_the_plan_with_the_reference() {
        let repo = tempfile::tempdir().unwrap();
        repository(repo.path());
        let data = tempfile::tempdir().unwrap();
        let programs = Programs::new(data.path());
        let url = format!("file://{}", repo.path().display());
        let program = ProgramRef::parse(&format!("{url}//shop")).unwrap();
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let err = programs
            .checkout("acme", &program, missing, "r1-plan", None)
            .await
            .unwrap_err();
        match err {
            Error::PlanInvalid(why) => {
                assert!(why.contains(missing) && why.contains(&url), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let head = sh(repo.path(), &["rev-parse", "HEAD"]);
        let elsewhere = ProgramRef::parse(&format!("{url}//no-such-dir")).unwrap();
        let err = programs
            .checkout("acme", &elsewhere, &head, "r2-plan", None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::PlanInvalid(ref w) if w.contains("no-such-dir")),
            "{err:?}"
        );
        let err = programs
            .checkout("acme", &program, "main; rm -rf /", "r3-plan", None)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::PlanInvalid(_)), "{err:?}");
    }

    #[tokio::test]
    async fn an_unreachable_repository_is_retried_not_a_missing_version() {
        let data = tempfile::tempdir().unwrap();
        let programs = Programs::new(data.path());
        let program = ProgramRef::parse("file:///nonexistent/repo//shop").unwrap();
        let err = programs
            .checkout(
                "acme",
                &program,
                "0123456789abcdef0123456789abcdef01234567",
                "r1-plan",
                None,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unreachable(_)), "{err:?}");
        assert!(
            !data
                .path()
                .join("programs/mirrors")
                .read_dir()
                .unwrap()
                .any(|_| true),
            "no half-made mirror is left"
        );
    }
}
