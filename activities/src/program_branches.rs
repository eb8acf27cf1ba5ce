//! A change to an IaC program published for review on a branch of its own, with the `git`
//! CLI: the files written over a commit, committed, and pushed to a new branch of the
//! program's repository with the target's credential. Never the repository's default branch
//! and never a branch that exists (the service never edits a program a specification points
//! at); a push the repository refuses fails with its reason, and leaves nothing behind (the
//! scratch clone is removed, the remote has no new ref).

use crate::Error;
use crate::programs::{GitCredential, ProgramRef, Programs, authenticate, fetch, git_command, io};
use std::path::{Component, Path};

/// The author of the product's commits.
const AUTHOR: (&str, &str) = ("Runtime Cloud", "runtime-cloud@localhost");

/// A change to publish: `files` (paths in the repository, and their bytes) written over
/// commit `base`, committed with `message` on the new branch `branch`.
#[derive(Debug, Clone)]
pub struct BranchChange {
    pub base: String,
    pub branch: String,
    pub files: Vec<(String, Vec<u8>)>,
    pub message: String,
    /// A line of `message` that names what the change is for (`Runtime-Cloud-Proposal: …`):
    /// a branch holding one commit over `base` whose message has it was published by an
    /// earlier attempt for the same purpose, and is answered as published, even when the
    /// change generated now differs (the live object moved since).
    pub marker: String,
}

/// A published change: its branch, its commit, and its diff from the base (`git diff`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub branch: String,
    pub commit: String,
    pub diff: String,
}

/// Why a change is not published, before anything is pushed: never retried.
fn refused(why: String) -> Error {
    Error::PlanInvalid(why)
}

/// The remote's refs, from `git ls-remote --symref origin HEAD refs/heads/B`: the default
/// branch's name, and the commit `branch` is at, if it exists.
fn remote_refs(ls_remote: &str, branch: &str) -> (Option<String>, Option<String>) {
    let wanted = format!("refs/heads/{branch}");
    let mut default = None;
    let mut at = None;
    for line in ls_remote.lines() {
        if let Some(rest) = line.strip_prefix("ref: refs/heads/") {
            default = rest.split('\t').next().map(str::to_owned);
        } else if let Some((commit, name)) = line.split_once('\t')
            && name == wanted
        {
            at = Some(commit.to_owned());
        }
    }
    (default, at)
}

/// A path inside the repository's files: relative, without `..`, and never in `.git` (a
/// repository's config or hooks would run commands or send the credential elsewhere).
fn inside(path: &str) -> bool {
    let p = Path::new(path);
    !path.is_empty()
        && p.components().all(|c| match c {
            Component::Normal(part) => !part.eq_ignore_ascii_case(".git"),
            _ => false,
        })
}

/// Whether a push failed because the repository refused it (a hook, a protected branch, a
/// ref that appeared), rather than because it could not be reached.
fn rejected(stderr: &str) -> bool {
    [
        "[remote rejected]",
        "[rejected]",
        "declined",
        "denied",
        "stale info",
    ]
    .iter()
    .any(|s| stderr.contains(s))
}

impl Programs {
    /// Publishes `change` of `program` on its branch; see the module's documentation.
    pub async fn publish(
        &self,
        tenant_id: &str,
        program: &ProgramRef,
        change: &BranchChange,
        credential: Option<&GitCredential>,
    ) -> Result<Published, Error> {
        let checked = git_command()
            .args(["check-ref-format", "--branch", &change.branch])
            .output()
            .await
            .map_err(|e| io("running git for", Path::new(&change.branch), e))?;
        if !checked.status.success() {
            return Err(refused(format!("`{}` is not a branch name", change.branch)));
        }
        if let Some((bad, _)) = change.files.iter().find(|(p, _)| !inside(p)) {
            return Err(refused(format!(
                "{bad} is not a path inside the repository"
            )));
        }
        let mirror = self
            .mirrored(tenant_id, program, &change.base, credential)
            .await?;
        let wanted = format!("refs/heads/{}", change.branch);
        let listed = fetch(
            &mirror,
            &["ls-remote", "--symref", "origin", "HEAD", &wanted],
            credential,
        )
        .await?;
        let (default, at) = remote_refs(&String::from_utf8_lossy(&listed), &change.branch);
        if default.as_deref() == Some(change.branch.as_str()) {
            return Err(refused(format!(
                "{} is the repository's default branch: a change is published on a branch of its own",
                change.branch
            )));
        }
        let dir = self.scratch(&format!("publish-{}", uuid::Uuid::now_v7()));
        let at = match at {
            Some(at) => Some(Existing {
                earlier: self.earlier(&mirror, change, &at, credential).await?,
                at,
            }),
            None => None,
        };
        let published = commit_and_push(&mirror, &dir, program, change, at, credential).await;
        let _ = tokio::fs::remove_dir_all(&dir).await;
        published
    }
}

/// A branch of the change's name on the remote: the commit it is at, and the change published
/// there by an earlier attempt, when it is one.
struct Existing {
    at: String,
    earlier: Option<Published>,
}

impl Programs {
    /// The change an earlier attempt published at `at` on the change's branch: one commit over
    /// the change's base whose message carries its marker (fetched into the mirror to be read).
    async fn earlier(
        &self,
        mirror: &Path,
        change: &BranchChange,
        at: &str,
        credential: Option<&GitCredential>,
    ) -> Result<Option<Published>, Error> {
        let wanted = format!(
            "+refs/heads/{0}:refs/runtime-cloud/published/{0}",
            change.branch
        );
        fetch(mirror, &["fetch", "--quiet", "origin", &wanted], credential).await?;
        let shown = crate::programs::git(mirror, &["log", "-1", "--format=%P%n%B", at]).await?;
        let shown = String::from_utf8_lossy(&shown);
        let mut lines = shown.lines();
        let parents = lines.next().unwrap_or_default();
        if parents.trim() != change.base || !lines.any(|l| l.trim() == change.marker) {
            return Ok(None);
        }
        let diff = crate::programs::git(mirror, &["diff", &change.base, at]).await?;
        Ok(Some(Published {
            branch: change.branch.clone(),
            commit: at.to_owned(),
            diff: String::from_utf8_lossy(&diff).into_owned(),
        }))
    }
}

/// Refuses `file` when it, or a directory on its way from `root`, is a symbolic link: a
/// write must stay in the clone.
async fn no_link(root: &Path, file: &Path) -> Result<(), Error> {
    let mut at = root.to_path_buf();
    for part in file.strip_prefix(root).unwrap_or(file).components() {
        at.push(part);
        if let Ok(meta) = tokio::fs::symlink_metadata(&at).await
            && meta.file_type().is_symlink()
        {
            return Err(refused(format!(
                "{} is a symbolic link in the repository: not written through",
                at.strip_prefix(root).unwrap_or(&at).display()
            )));
        }
    }
    Ok(())
}

/// Commits `change` in a clone of `mirror` at `dir` and pushes it; `at`: the commit the branch
/// is at on the remote, if it exists.
async fn commit_and_push(
    mirror: &Path,
    dir: &Path,
    program: &ProgramRef,
    change: &BranchChange,
    at: Option<Existing>,
    credential: Option<&GitCredential>,
) -> Result<Published, Error> {
    if let Some(earlier) = at.as_ref().and_then(|e| e.earlier.clone()) {
        return Ok(earlier);
    }
    let parent = dir.parent().unwrap_or(dir);
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|e| io("creating", parent, e))?;
    let mirror = mirror.display().to_string();
    let dir_text = dir.display().to_string();
    let clone = [
        "clone",
        "--quiet",
        "--shared",
        "--no-checkout",
        &mirror,
        &dir_text,
    ];
    run(parent, &clone, None).await?;
    run(
        dir,
        &["checkout", "--quiet", "-b", &change.branch, &change.base],
        None,
    )
    .await?;
    for (path, bytes) in &change.files {
        let file = dir.join(path);
        no_link(dir, &file).await?;
        if let Some(folder) = file.parent() {
            tokio::fs::create_dir_all(folder)
                .await
                .map_err(|e| io("creating", folder, e))?;
        }
        tokio::fs::write(&file, bytes)
            .await
            .map_err(|e| io("writing", &file, e))?;
    }
    run(dir, &["add", "--all"], None).await?;
    // Dated as its base: the same change makes the same commit, so a publish retried after its
    // push landed finds its own commit on the branch.
    let base_date = run(dir, &["show", "-s", "--format=%cI", &change.base], None).await?;
    let base_date = String::from_utf8_lossy(&base_date).trim().to_owned();
    let (name, email) = AUTHOR;
    let (name, email) = (format!("user.name={name}"), format!("user.email={email}"));
    let commit = [
        "-c",
        &name,
        "-c",
        &email,
        "commit",
        "--quiet",
        "-m",
        &change.message,
    ];
    run(dir, &commit, Some(&base_date)).await?;
    let commit = String::from_utf8_lossy(&run(dir, &["rev-parse", "HEAD"], None).await?)
        .trim()
        .to_owned();
    let diff = run(dir, &["diff", &change.base, "HEAD"], None).await?;
    let published = Published {
        branch: change.branch.clone(),
        commit,
        diff: String::from_utf8_lossy(&diff).into_owned(),
    };
    match at {
        // Published before: a retry after its push landed.
        Some(e) if e.at == published.commit => return Ok(published),
        Some(_) => {
            return Err(refused(format!(
                "branch {} exists in {}: a change is published on a new branch",
                change.branch, program.repository
            )));
        }
        None => {}
    }
    // To the repository itself (the mirror is the product's cache), the new ref only, and only
    // while it does not exist (`--force-with-lease=<ref>:` expects none).
    let mut push = git_command();
    let _key = authenticate(&mut push, credential)?;
    let wanted = format!("refs/heads/{}", change.branch);
    let out = push
        .current_dir(dir)
        .args(["push", "--quiet"])
        .arg(format!("--force-with-lease={wanted}:"))
        .args(["--", &program.repository])
        .arg(format!("HEAD:{wanted}"))
        .output()
        .await
        .map_err(|e| io("running git in", dir, e))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        let why = format!(
            "{} refused the push of branch {}: {said}",
            program.repository, change.branch
        );
        return Err(if rejected(&said) {
            refused(why)
        } else {
            Error::Unreachable(why)
        });
    }
    Ok(published)
}

/// `git args…` in `dir`, without the network; with `date`, the author and committer dates.
async fn run(dir: &Path, args: &[&str], date: Option<&str>) -> Result<Vec<u8>, Error> {
    let mut cmd = git_command();
    if let Some(date) = date {
        cmd.env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date);
    }
    let out = cmd
        .current_dir(dir)
        .args(args)
        .output()
        .await
        .map_err(|e| io("running git in", dir, e))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(Error::Unreachable(format!(
            "git {} in {}: {}",
            args.first().copied().unwrap_or_default(),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::programs::with_git::sh;

    /// A bare repository `origin.git` whose `main` holds `shop/Pulumi.yaml`; returns its URL
    /// and the commit.
    fn origin(dir: &Path) -> (String, String) {
        let work = dir.join("work");
        std::fs::create_dir_all(work.join("shop")).unwrap();
        sh(&work, &["init", "--quiet", "-b", "main"]);
        std::fs::write(work.join("shop/Pulumi.yaml"), "name: shop\nruntime: yaml\n").unwrap();
        sh(&work, &["add", "."]);
        sh(&work, &["commit", "--quiet", "-m", "one"]);
        let commit = sh(&work, &["rev-parse", "HEAD"]);
        sh(dir, &["clone", "--quiet", "--bare", "work", "origin.git"]);
        (
            format!("file://{}", dir.join("origin.git").display()),
            commit,
        )
    }

    fn change(base: &str, branch: &str) -> BranchChange {
        BranchChange {
            base: base.to_owned(),
            branch: branch.to_owned(),
            files: vec![(
                "shop/Pulumi.yaml".into(),
                b"name: shop\nruntime: yaml\nresources:\n  media: {}\n".to_vec(),
            )],
            message: "adopt media\n\nRuntime-Cloud-Proposal: p1".into(),
            marker: "Runtime-Cloud-Proposal: p1".into(),
        }
    }

    #[test]
    fn the_default_branch_and_an_existing_branch_are_read_from_ls_remote() {
        let listed = "ref: refs/heads/main\tHEAD\n0a1b\tHEAD\n0a1b\trefs/heads/adopt/x\n";
        assert_eq!(
            remote_refs(listed, "adopt/x"),
            (Some("main".into()), Some("0a1b".into()))
        );
        assert_eq!(remote_refs(listed, "adopt/y"), (Some("main".into()), None));
        assert!(inside("shop/Pulumi.yaml"));
        for outside in [
            "../x",
            "/etc/x",
            "",
            ".git/config",
            "shop/.GIT/hooks/pre-commit",
        ] {
            assert!(!inside(outside), "{outside}");
        }
    }

    #[tokio::test]
    async fn a_change_is_pushed_on_a_new_branch_and_the_default_branch_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let (url, base) = origin(dir.path());
        let programs = Programs::new(&dir.path().join("data"));
        let program = ProgramRef::parse(&format!("{url}//shop")).unwrap();
        let published = programs
            .publish("acme", &program, &change(&base, "adopt/media"), None)
            .await
            .unwrap();
        let bare = dir.path().join("origin.git");
        assert_eq!(
            sh(&bare, &["rev-parse", "refs/heads/adopt/media"]),
            published.commit
        );
        assert_eq!(
            sh(&bare, &["rev-parse", "refs/heads/main"]),
            base,
            "main untouched"
        );
        assert_eq!(
            sh(&bare, &["rev-parse", &format!("{}^", published.commit)]),
            base
        );
        assert!(published.diff.contains("+resources:"), "{}", published.diff);
        assert!(
            !dir.path()
                .join("data/programs/scratch")
                .read_dir()
                .unwrap()
                .any(|_| true),
            "the scratch clone is removed"
        );
        // The same change again (a retry after its push landed) finds its own commit.
        let again = programs
            .publish("acme", &program, &change(&base, "adopt/media"), None)
            .await
            .unwrap();
        assert_eq!(again.commit, published.commit);
        // Another change for the same purpose (the object moved since the push) is answered
        // with what was published; one for another purpose, or any on the default branch, is
        // refused.
        let mut moved = change(&base, "adopt/media");
        moved.files[0].1 = b"name: shop\nruntime: yaml\nresources:\n  media: {type: x}\n".to_vec();
        let answered = programs
            .publish("acme", &program, &moved, None)
            .await
            .unwrap();
        assert_eq!(answered, published, "the earlier attempt's commit and diff");
        let mut other = change(&base, "adopt/media");
        other.message = "something else\n\nRuntime-Cloud-Proposal: p2".into();
        other.marker = "Runtime-Cloud-Proposal: p2".into();
        let err = programs
            .publish("acme", &program, &other, None)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::PlanInvalid(_)), "{err:?}");
        for branch in ["main"] {
            let err = programs
                .publish("acme", &program, &change(&base, branch), None)
                .await
                .unwrap_err();
            assert!(matches!(err, Error::PlanInvalid(_)), "{branch}: {err:?}");
        }
    }

    #[tokio::test]
    async fn a_push_the_repository_refuses_fails_with_its_reason_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (url, base) = origin(dir.path());
        let hook = dir.path().join("origin.git/hooks/pre-receive");
        std::fs::write(
            &hook,
            "#!/bin/sh\necho 'branch protection: pushes need a review' >&2\nexit 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let programs = Programs::new(&dir.path().join("data"));
        let program = ProgramRef::parse(&format!("{url}//shop")).unwrap();
        let err = programs
            .publish("acme", &program, &change(&base, "adopt/media"), None)
            .await
            .unwrap_err();
        let Error::PlanInvalid(why) = err else {
            panic!("{err:?}")
        };
        assert!(
            why.contains("branch protection: pushes need a review"),
            "{why}"
        );
        let bare = dir.path().join("origin.git");
        assert_eq!(
            sh(&bare, &["for-each-ref", "--format=%(refname)"]),
            "refs/heads/main"
        );
        assert!(
            !dir.path()
                .join("data/programs/scratch")
                .read_dir()
                .unwrap()
                .any(|_| true),
            "the scratch clone is removed"
        );
    }
}
