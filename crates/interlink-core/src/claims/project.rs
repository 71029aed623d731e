//! Which project a working directory is in, the same on every machine and clone.
//!
//! The rule, from what `git` reports of the repository (the store reads it; this module
//! only decides):
//!
//! 1. the root commit reached by following first parents from `HEAD` — every clone and
//!    worktree of one history has it, wherever it lives and whatever its remote's URL
//!    looks like, and merging another history in later does not change it (the merged
//!    history comes in as a second parent);
//! 2. in a shallow clone, which does not have that commit, or before the first commit:
//!    the `origin` remote's URL, normalised (`git@host:o/r.git`, `ssh://git@host/o/r`
//!    and `https://host/o/r` are one project);
//! 3. otherwise the repository's top-level directory: a project of this machine alone.
//!
//! A submodule is a repository of its own and so a project of its own. Outside any
//! repository a session has no project and neither makes nor sees claims.
//!
//! The id is the first 16 bytes of SHA-256 over a domain string, the rule's name and
//! its value, so two rules never give one id and the id says nothing readable.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// What `git` says of a repository, for [`ProjectId::of`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepoFacts {
    /// The repository's top level (`git rev-parse --show-toplevel`).
    pub toplevel: String,
    /// The root commit along first parents from `HEAD`, if the history has one here.
    pub first_root: Option<String>,
    /// Whether the clone is shallow (its root commit is not the history's).
    pub shallow: bool,
    /// The `origin` remote's URL, if set.
    pub origin: Option<String>,
}

/// A project's id: 16 bytes, shown as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProjectId(pub [u8; 16]);

/// Which rule gave a project its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The first-parent root commit: holds across machines and clones.
    RootCommit,
    /// The normalised `origin` URL: holds across clones of one remote.
    Origin,
    /// The top-level directory: this machine only.
    Local,
}

const DOMAIN: &[u8] = b"interlink-p2p/v1/project\0";

impl ProjectId {
    /// The project of a repository, and the rule that decided it.
    pub fn of(facts: &RepoFacts) -> (Self, Basis) {
        if let Some(root) = facts.first_root.as_deref().filter(|_| !facts.shallow) {
            return (
                Self::hash("root", &root.to_ascii_lowercase()),
                Basis::RootCommit,
            );
        }
        if let Some(url) = facts.origin.as_deref().and_then(normalise_remote) {
            return (Self::hash("origin", &url), Basis::Origin);
        }
        (Self::hash("local", &facts.toplevel), Basis::Local)
    }

    fn hash(rule: &str, value: &str) -> Self {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(rule.as_bytes())
            .chain_update(b":")
            .chain_update(value.as_bytes())
            .finalize();
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        Self(id)
    }

    /// The 32 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.0)
    }
}

impl fmt::Debug for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProjectId({})", self.to_hex())
    }
}

impl fmt::Display for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A remote's URL as `host/path`, the forms git accepts for one repository made one:
/// scheme, user and port dropped, the host lowercased, `.git` and trailing `/` dropped,
/// scp-like `host:path` read as `host/path`. `None` for a local path or `file://`.
pub fn normalise_remote(url: &str) -> Option<String> {
    let url = url.trim();
    let (host, path) = if let Some((scheme, rest)) = url.split_once("://") {
        if scheme.eq_ignore_ascii_case("file") {
            return None;
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = match host.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            _ => host,
        };
        (host, path)
    } else {
        // scp-like: [user@]host:path, where a `/` before the `:` makes it a local path.
        let (authority, path) = url.split_once(':')?;
        if authority.contains('/') || authority.is_empty() {
            return None;
        }
        (
            authority.rsplit_once('@').map_or(authority, |(_, h)| h),
            path,
        )
    };
    let path = path.trim_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    if host.is_empty() || path.is_empty() {
        return None;
    }
    Some(format!("{}/{}", host.to_ascii_lowercase(), path))
}

/// `file` relative to `toplevel`, `/`-separated: `None` when it is not inside. Both are
/// absolute paths as the platform writes them; `\` is read as `/` (Windows).
pub fn relative_to(toplevel: &str, file: &str) -> Option<String> {
    let norm = |p: &str| p.replace('\\', "/").trim_end_matches('/').to_owned();
    let (top, file) = (norm(toplevel), norm(file));
    let rest = file.strip_prefix(&top)?;
    let rest = rest.strip_prefix('/').or(rest.is_empty().then_some(""))?;
    let mut out: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            p => out.push(p),
        }
    }
    Some(out.join("/"))
}
