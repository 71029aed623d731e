//! One process per session: an exclusive lock on the session's directory.
//!
//! A session's node is the only writer of its inbox and the only owner of its PeerId
//! (derived from the identity and the session id). Two processes started under one
//! session id and home would both append to the inbox and both answer for one PeerId,
//! so the second one must not start. The lock is an exclusive `flock` on
//! `session.lock` in the session's directory: the kernel releases it when the process
//! exits, however it exits, so a crashed session never leaves a stale lock behind.
//! The holder writes who it is into the file, so a second process can name it.

use std::{
    fs::{File, OpenOptions, TryLockError},
    io::{Read as _, Seek as _, SeekFrom, Write as _},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// File name of the lock inside a session's directory.
pub const LOCK_FILE: &str = "session.lock";
/// Longest holder description read back from a lock file.
const MAX_HOLDER_BYTES: u64 = 4096;

/// Who holds a session's lock, as its holder wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The holding process.
    pub pid: u32,
    /// What it runs (`mcp`, `run`).
    pub command: String,
    /// When it took the lock, ms since the Unix epoch.
    pub since_ms: u64,
}

/// Taking a session's lock failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionLockError {
    /// Another process runs this session.
    #[error(
        "session {session} is already running in process {pid} (`interlink-p2p {command}`, \
         lock {path}); one process per session id and home — stop that one, or start this \
         one under another session id"
    )]
    Held {
        /// The session's directory name (its id).
        session: String,
        /// The holder's pid (0 if it could not be read).
        pid: u32,
        /// What the holder runs ("?" if it could not be read).
        command: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The lock file could not be opened, locked or written.
    #[error("session lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the operating system reported.
        source: std::io::Error,
    },
}

/// A held session lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
    path: PathBuf,
}

impl SessionLock {
    /// Takes the lock of the session whose directory is `dir` (created, mode 0700),
    /// for a process running `command`. Fails at once, naming the holder, if another
    /// process (or another lock in this process) holds it.
    pub fn acquire(dir: &Path, command: &str, now_ms: u64) -> Result<Self, SessionLockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| SessionLockError::Io {
            path: path.clone(),
            source,
        };
        crate::keyfile::create_private_dir(dir).map_err(io)?;
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_holder(&mut file);
                return Err(SessionLockError::Held {
                    session: dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    pid: holder.as_ref().map_or(0, |h| h.pid),
                    command: holder.map_or_else(|| "?".into(), |h| h.command),
                    path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let holder = Holder {
            pid: std::process::id(),
            command: command.to_owned(),
            since_ms: now_ms,
        };
        let mut line = serde_json::to_vec(&holder).map_err(|e| io(std::io::Error::other(e)))?;
        line.push(b'\n');
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&line).map_err(io)?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(MAX_HOLDER_BYTES).read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

#[cfg(test)]
#[path = "session_lock_tests.rs"]
mod tests;
