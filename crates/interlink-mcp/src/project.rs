//! The project a working directory is in, read from `git` (the rule is
//! `interlink_core::claims::project`'s; this module only asks git).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use interlink_core::claims::project::{Basis, ProjectId, RepoFacts};

/// A repository and its project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    /// The id, the same in every clone.
    pub id: ProjectId,
    /// Which rule gave it.
    pub basis: Basis,
    /// The repository's top-level directory here.
    pub root: PathBuf,
}

/// The project of `dir`: `None` outside a repository or without `git` on the PATH.
/// Runs `git` three times (about 5 ms in all).
pub fn detect(dir: &Path) -> Option<Project> {
    let top = git(
        dir,
        &["rev-parse", "--show-toplevel", "--is-shallow-repository"],
    )?;
    let mut lines = top.lines();
    let toplevel = lines.next()?.to_owned();
    let shallow = lines.next() == Some("true");
    // Fails before the first commit: then the origin, or the directory, decides.
    let first_root = git(
        dir,
        &["rev-list", "--first-parent", "--max-parents=0", "HEAD"],
    )
    .and_then(|out| out.lines().next_back().map(str::to_owned));
    let origin = git(dir, &["config", "--get", "remote.origin.url"])
        .map(|out| out.trim().to_owned())
        .filter(|url| !url.is_empty());
    let facts = RepoFacts {
        toplevel: toplevel.clone(),
        first_root,
        shallow,
        origin,
    };
    let (id, basis) = ProjectId::of(&facts);
    Some(Project {
        id,
        basis,
        root: PathBuf::from(toplevel),
    })
}

/// What `git -C dir args` printed, when it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

#[cfg(test)]
#[path = "project_tests.rs"]
mod tests;
