//! Where a user's interlink-p2p files live: the [`Home`] and, under it, one
//! [`SessionDir`] per session.
//!
//! Every file name of the home and of a session's directory is spelled here, once; the
//! modules that read and write those files ask these types for the path. The home holds
//! the identity key, the peers policy, the pairing state and the sealing-key pins, and
//! `sessions/<session id>/` for each session (its inbox, the agent's read state, the
//! sent log, the workers' positions, the lock of `interlink-p2p wait` …).
//! The home is `--home`, else `INTERLINK_HOME`, else `$XDG_CONFIG_HOME/interlink-p2p`,
//! else `$HOME/.config/interlink-p2p`.

use std::path::{Path, PathBuf};

use interlink_core::SessionId;

/// File name of the identity key inside the home directory.
pub const IDENTITY_FILE: &str = "identity.key";
/// File name of the peers policy inside the home directory ([`crate::policy`]).
pub const PEERS_FILE: &str = "peers.json";
/// File name of the lock the peers policy's editors hold while they read, change and
/// replace it.
pub const PEERS_LOCK_FILE: &str = "peers.json.lock";
/// File name of the pairing state inside the home directory ([`crate::pairing`]).
pub const PAIRING_FILE: &str = "pairing.json";
/// File name of the lock the pairing state's editors hold.
pub const PAIRING_LOCK_FILE: &str = "pairing.json.lock";
/// File name of the invites issued inside the home directory ([`crate::invites`]).
pub const INVITES_FILE: &str = "invites.json";
/// File name of the lock the invites' editors hold.
pub const INVITES_LOCK_FILE: &str = "invites.json.lock";
/// File name of the named groups inside the home directory ([`crate::groups`]).
pub const GROUPS_FILE: &str = "groups.json";
/// File name of the lock the groups' editors hold.
pub const GROUPS_LOCK_FILE: &str = "groups.json.lock";
/// Directory under the home directory holding one directory per session.
pub const SESSIONS_DIR: &str = "sessions";

/// File name of the session's inbox (written by the node, [`crate::inbox`]).
pub const INBOX_FILE: &str = crate::inbox::INBOX_FILE;
/// File name of the agent's read state of the inbox ([`crate::read_state`]): the
/// inbox's consumed cursor, so it is the net crate's name.
pub const READ_STATE_FILE: &str = crate::inbox::CONSUMED_CURSOR_FILE;
/// File name of the sent-messages log ([`crate::sent_log`]).
pub const SENT_FILE: &str = "sent.json";
/// File name of what the MCP client declared at `initialize` (`interlink_mcp::consent`).
pub const CLIENT_FILE: &str = "client.json";
/// File name of the saved Codex delivery failures (`interlink_mcp::codex`).
pub const CODEX_FAILURES_FILE: &str = "codex_failed.json";
/// File name of the Codex hand-over position (`interlink_mcp::workers::codex`).
pub const CODEX_POSITION_FILE: &str = "codex.json";
/// File name of the inbox follower's position (`interlink_mcp::workers::follow`).
pub const FOLLOW_FILE: &str = "follow.json";
/// File name of the lock of `interlink-p2p wait` (`interlink_mcp::stop_hook`).
pub const WAIT_LOCK_FILE: &str = "wait.lock";
/// File name of the ids the Stop hook already woke the agent for (`interlink_mcp::stop_hook`).
pub const WOKEN_FILE: &str = "woken.json";
/// File name of what was handed to the agent host's own inbox
/// (`interlink_mcp::host_inbox::HandoverFile`).
pub const HOST_INBOX_FILE: &str = "host_inbox.json";
/// File name of a running session's view of its network
/// (`interlink_mcp::network_view`).
pub const NETWORK_FILE: &str = "network.json";

/// Resolves the home directory from an explicit value and an environment lookup.
fn resolve_home(
    explicit: Option<PathBuf>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    resolve_home_on(cfg!(windows), explicit, env)
}

/// [`resolve_home`] as on Windows (`windows`) or elsewhere: Windows keeps a program's
/// per-user settings under `%APPDATA%` (roaming), not in a dot directory.
fn resolve_home_on(
    windows: bool,
    explicit: Option<PathBuf>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    explicit
        .or_else(|| nonempty(env(crate::env::HOME)).map(PathBuf::from))
        .or_else(|| nonempty(env("XDG_CONFIG_HOME")).map(|d| Path::new(&d).join("interlink-p2p")))
        .or_else(|| {
            // A host that passes on only a few variables (Codex) may drop APPDATA and
            // keep USERPROFILE: the same directory either way.
            let appdata = || {
                nonempty(env("APPDATA")).map(PathBuf::from).or_else(|| {
                    nonempty(env("USERPROFILE"))
                        .map(|p| Path::new(&p).join("AppData").join("Roaming"))
                })
            };
            windows
                .then(appdata)
                .flatten()
                .map(|d| d.join("interlink-p2p"))
        })
        .or_else(|| {
            nonempty(env("HOME")).map(|h| Path::new(&h).join(".config").join("interlink-p2p"))
        })
}

/// A user's home directory: identity, peers policy, pairing state, sessions.
///
/// Only a path: nothing is created or read until a file is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home(PathBuf);

impl Home {
    /// The home directory at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The home resolved as [`resolve_home`] does.
    pub fn resolve(
        explicit: Option<PathBuf>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Option<Self> {
        resolve_home(explicit, env).map(Self)
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The identity key file.
    pub fn identity(&self) -> PathBuf {
        self.0.join(IDENTITY_FILE)
    }

    /// The peers policy file.
    pub fn peers(&self) -> PathBuf {
        self.0.join(PEERS_FILE)
    }

    /// The lock file of the peers policy's editors.
    pub fn peers_lock(&self) -> PathBuf {
        self.0.join(PEERS_LOCK_FILE)
    }

    /// The named groups file.
    pub fn groups(&self) -> PathBuf {
        self.0.join(GROUPS_FILE)
    }

    /// The lock file of the groups' editors.
    pub fn groups_lock(&self) -> PathBuf {
        self.0.join(GROUPS_LOCK_FILE)
    }

    /// The pairing state file.
    pub fn pairing(&self) -> PathBuf {
        self.0.join(PAIRING_FILE)
    }

    /// The lock file of the pairing state's editors.
    pub fn pairing_lock(&self) -> PathBuf {
        self.0.join(PAIRING_LOCK_FILE)
    }

    /// The invites issued and not used yet ([`crate::invites`]).
    pub fn invites(&self) -> PathBuf {
        self.0.join(INVITES_FILE)
    }

    /// The lock file of the invites' editors.
    pub fn invites_lock(&self) -> PathBuf {
        self.0.join(INVITES_LOCK_FILE)
    }

    /// The sealing keys pinned per peer (written by the node, [`crate::pins`]).
    pub fn pins(&self) -> PathBuf {
        self.0.join(crate::pins::PINS_FILE)
    }

    /// Where the sessions of the paired identities and of this user's own were reached
    /// ([`crate::address_book`]).
    pub fn addresses(&self) -> PathBuf {
        self.0.join(crate::address_book::ADDRESS_BOOK_FILE)
    }

    /// The directory holding one directory per session.
    pub fn sessions(&self) -> PathBuf {
        self.0.join(SESSIONS_DIR)
    }

    /// The state directory of `session`: `<home>/sessions/<session id>` (named by
    /// [`session_dir_name`]). Session ids are plain file names, except that `.` and
    /// `..` are valid ids but name no directory of their own, so they are refused.
    pub fn session(&self, session: &SessionId) -> Result<SessionDir, SessionDirError> {
        let id = session.as_str();
        if id == "." || id == ".." {
            return Err(SessionDirError(id.to_owned()));
        }
        Ok(SessionDir(
            self.sessions().join(session_dir_name(session).as_ref()),
        ))
    }
}

/// The name of a session's directory: its id, but on Windows with each `:` (which a
/// Windows file name cannot hold: `a:b` is drive `a:`) written as `+`, a character no
/// session id has, so names stay unique.
pub fn session_dir_name(session: &SessionId) -> std::borrow::Cow<'_, str> {
    dir_name_on(cfg!(windows), session.as_str())
}

/// The session whose directory is named `name` ([`session_dir_name`] undone).
pub fn session_of_dir_name(name: &str) -> Option<SessionId> {
    SessionId::new(id_of_dir_name_on(cfg!(windows), name)).ok()
}

fn dir_name_on(windows: bool, id: &str) -> std::borrow::Cow<'_, str> {
    if windows && id.contains(':') {
        id.replace(':', "+").into()
    } else {
        id.into()
    }
}

fn id_of_dir_name_on(windows: bool, name: &str) -> String {
    if windows {
        name.replace('+', ":")
    } else {
        name.to_owned()
    }
}

impl AsRef<Path> for Home {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

/// A session id that names no state directory.
#[derive(Debug, thiserror::Error)]
#[error("session id {0:?} cannot name a state directory; choose another id")]
pub struct SessionDirError(pub String);

/// One session's state directory ([`Home::session`]): its inbox and what the session's
/// tools and workers keep beside it.
///
/// Only a path: nothing is created or read until a file is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionDir(PathBuf);

impl SessionDir {
    /// A session directory at `path`, for a directory that is not under a [`Home`]
    /// (tests, tools pointed at a directory).
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The directory itself (what the node is given as its inbox directory).
    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn inbox(&self) -> PathBuf {
        self.0.join(INBOX_FILE)
    }

    /// The agent's read state of the inbox.
    pub fn read_state(&self) -> PathBuf {
        self.0.join(READ_STATE_FILE)
    }

    /// The sent-messages log.
    pub fn sent_log(&self) -> PathBuf {
        self.0.join(SENT_FILE)
    }

    /// What the MCP client declared at `initialize`.
    pub fn client(&self) -> PathBuf {
        self.0.join(CLIENT_FILE)
    }

    /// The saved Codex delivery failures.
    pub fn codex_failures(&self) -> PathBuf {
        self.0.join(CODEX_FAILURES_FILE)
    }

    /// The Codex hand-over position.
    pub fn codex_position(&self) -> PathBuf {
        self.0.join(CODEX_POSITION_FILE)
    }

    /// The inbox follower's position.
    pub fn follow_position(&self) -> PathBuf {
        self.0.join(FOLLOW_FILE)
    }

    /// The lock of `interlink-p2p wait` (one waiter per session).
    pub fn wait_lock(&self) -> PathBuf {
        self.0.join(WAIT_LOCK_FILE)
    }

    /// The ids the Stop hook already woke the agent for.
    pub fn woken(&self) -> PathBuf {
        self.0.join(WOKEN_FILE)
    }

    /// What was handed to the agent host's own inbox ([`HOST_INBOX_FILE`]).
    pub fn host_inbox(&self) -> PathBuf {
        self.0.join(HOST_INBOX_FILE)
    }

    /// The running session's view of its network ([`NETWORK_FILE`]).
    pub fn network(&self) -> PathBuf {
        self.0.join(NETWORK_FILE)
    }

    /// Claims the session for this process, which runs `command` (one process per
    /// session id and home): the [`crate::SessionLock`], whose file
    /// it names, held until the returned lock is dropped.
    /// `now` (ms since the epoch) is recorded in the lock file as the start.
    pub fn claim(
        &self,
        command: &str,
        now: u64,
    ) -> Result<crate::SessionLock, crate::SessionLockError> {
        crate::SessionLock::acquire(&self.0, command, now)
    }
}

impl SessionDir {
    /// Removes this directory when the session left nothing in it: only its lock, an
    /// empty inbox, an empty outbox, the client's description and the network view — what a host's health
    /// check (`initialize`, then exit) leaves. Any other file, a message in the inbox or
    /// the outbox, or a file that cannot be checked keeps it. Call it after the node has
    /// stopped (the outbox must be closed). Returns whether it was removed.
    pub fn remove_if_unused(&self) -> std::io::Result<bool> {
        let removable = [
            crate::session_lock::LOCK_FILE,
            INBOX_FILE,
            crate::outbox::OUTBOX_FILE,
            CLIENT_FILE,
            // A view of the network, written a moment after start: no state of its own.
            NETWORK_FILE,
        ];
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.0)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| removable.contains(n)) else {
                return Ok(false);
            };
            if name == INBOX_FILE && entry.metadata()?.len() > 0 {
                return Ok(false);
            }
            if name == crate::outbox::OUTBOX_FILE {
                match crate::outbox::Outbox::open(&self.0) {
                    Ok(outbox) if outbox.is_empty() => {}
                    _ => return Ok(false),
                }
            }
            files.push(entry.path());
        }
        for f in files {
            std::fs::remove_file(f)?;
        }
        std::fs::remove_dir(&self.0)?;
        Ok(true)
    }
}

impl AsRef<Path> for SessionDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
