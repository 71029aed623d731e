//! The peers policy file, `peers.json` in the home directory: who may reach this user.
//!
//! Every session of a user shares the file. Readers ([`load`]) treat a missing file as
//! an empty policy (deny by default) and a malformed one as an error — a session never
//! silently runs with a policy other than the one written. Editors ([`edit`]) take an
//! exclusive `flock` on a sibling lock file, re-read the file under the lock, and
//! replace it atomically (temporary file in the same directory, fsync, rename, fsync of
//! the directory), so two concurrent `peer add`s never lose one another's update and a
//! reader never sees half a file. Running sessions notice a replacement with a
//! [`Watcher`] (cheap `stat` polling) and push the new policy into their node.

use std::{
    fs, io,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use interlink_core::trust::PeerPolicy;

use crate::{
    files::{edit_json, from_json_file_error, load_json},
    paths::Home,
};

/// The peers file under `home`.
pub fn path(home: &Home) -> PathBuf {
    home.peers()
}

/// Reading or writing the peers file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A file-system error on the file, its lock or its directory.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What was being done ("reading", "locking", …).
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The file exists but is not a valid peers file.
    #[error("{} is not a valid peers file: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and how the JSON breaks.
        source: serde_json::Error,
    },
}

from_json_file_error!(PolicyError);

/// Reads the policy from `home`: a missing file is an empty policy; a file that cannot
/// be read or parsed is an error naming it.
///
/// A session reads it on every send and every message it pushes to its agent, and it
/// changes only when someone pairs or edits it: the last file read is kept, and taken
/// again while the file's [`Stamp`] is the one it had before that read. (A change
/// during the read leaves a newer stamp, so the next call reads again.) Editors replace
/// the file, so its inode number tells a new version even within one timestamp tick;
/// without one (Windows) every call reads.
pub fn load(home: &Home) -> Result<PeerPolicy, PolicyError> {
    let path = path(home);
    let before = stamp(&path).filter(|s| s.inode != 0);
    if let (Some(now), Some(read)) = (&before, last_read().as_ref())
        && read.path == path
        && read.stamp == *now
    {
        return Ok(read.policy.clone());
    }
    let policy: PeerPolicy = load_json(&path)?;
    *last_read() = before.map(|stamp| LastRead {
        path,
        stamp,
        policy: policy.clone(),
    });
    Ok(policy)
}

/// The peers file [`load`] read last, and its stamp before that read.
struct LastRead {
    path: PathBuf,
    stamp: Stamp,
    policy: PeerPolicy,
}

static LAST_READ: Mutex<Option<LastRead>> = Mutex::new(None);

fn last_read() -> std::sync::MutexGuard<'static, Option<LastRead>> {
    LAST_READ.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Changes the policy in `home` under the editors' lock: reads the current file, lets
/// `change` modify it, and writes the result atomically (mode 0600) if `change`
/// succeeded. Returns what `change` returned; its error type takes the file errors too.
pub fn edit<T, E: From<PolicyError>>(
    home: &Home,
    change: impl FnOnce(&mut PeerPolicy) -> Result<T, E>,
) -> Result<T, E> {
    edit_json(home.path(), &home.peers_lock(), &path(home), change).map_err(PolicyError::from)?
}

/// What identifies one version of the file: an edit replaces the file (new inode) and
/// a hand edit changes its modification time or size.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    modified: Option<std::time::SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        inode,
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

/// Notices when the peers file changed since it was last read.
#[derive(Debug)]
pub struct Watcher {
    home: Home,
    path: PathBuf,
    seen: Option<Stamp>,
}

impl Watcher {
    /// Watches the peers file of `home`, taking its current state as read.
    pub fn new(home: &Home) -> Self {
        let path = path(home);
        let seen = stamp(&path);
        Self {
            home: home.clone(),
            path,
            seen,
        }
    }

    /// `None` if the file is unchanged; otherwise its new content, read with the same
    /// rules as [`load`] (a removed file is an empty policy).
    pub fn poll(&mut self) -> Option<Result<PeerPolicy, PolicyError>> {
        let now = stamp(&self.path);
        if now == self.seen {
            return None;
        }
        self.seen = now;
        Some(load(&self.home))
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
