//! `interlink-p2p wait`: the Claude Code Stop hook that wakes an idle agent.
//!
//! Claude Code runs the hook when the agent stops, with a JSON object on stdin that
//! names the session (`session_id`). The waiter blocks until that session's inbox has
//! an unread message (unread = not acknowledged, [`crate::read_state`]) that no
//! earlier wake-up announced, then the caller prints it labelled with its verified
//! sender and exits 2, which wakes the agent. At most one waiter runs per session: it
//! holds an exclusive lock on `sessions/<id>/wait.lock`, and a second one gives up at
//! once.
//!
//! Each message wakes the agent once. The hook runs again every time the agent stops,
//! so waking for every unread message would wake an agent that stops without
//! acknowledging again at once, forever — a model call each time (seen with the real
//! Claude Code: 71 calls in 6 s). The ids already announced are kept in
//! `sessions/<id>/woken.json` ([`MAX_WOKEN`] at most, only those still unread);
//! messages left unread after their wake-up are counted in the next one and shown in
//! the footer of every tool response.

use std::{
    collections::HashSet,
    fs::TryLockError,
    io,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use interlink_core::{SessionId, session::SessionIdError};
use interlink_store::{inbox::InboxEntry, keyfile::create_private_dir};
use serde::{Deserialize, Serialize};

use crate::{
    files::{private_file, write_atomically},
    host_inbox::HandoverFile,
    paths::{Home, SessionDirError},
    peers, policy,
    read_state::{ReadState, ReadStateError},
    render,
};

/// Most announced ids remembered (the oldest are forgotten first: such a message can
/// wake the agent a second time, never zero times).
pub(crate) const MAX_WOKEN: usize = 1024;
/// How often the waiter looks at the inbox.
pub(crate) const POLL: Duration = Duration::from_millis(100);
/// Most messages one wake-up prints (the rest are announced by count).
pub(crate) const MAX_PRINTED: usize = 10;

/// The waiter could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The hook input is not a JSON object with a `session_id` string.
    #[error("the hook input has no session_id: {0}")]
    HookInput(String),
    /// The session id is not valid.
    #[error(transparent)]
    SessionId(#[from] SessionIdError),
    /// The session id names no state directory.
    #[error(transparent)]
    SessionDir(#[from] SessionDirError),
    /// The lock file could not be created or locked.
    #[error("lock {}: {source}", .path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The inbox or read state could not be read.
    #[error(transparent)]
    ReadState(#[from] ReadStateError),
    /// The announced ids could not be saved.
    #[error("saving {}: {source}", .path.display())]
    Woken {
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
}

/// How a wait ended.
#[derive(Debug)]
pub enum Outcome {
    /// Unread messages no wake-up announced yet, oldest first.
    Messages {
        /// The messages to announce.
        new: Vec<InboxEntry>,
        /// How many other messages are unread (announced before, not acknowledged).
        still_unread: usize,
    },
    /// Nothing arrived before the timeout.
    TimedOut,
    /// Another waiter holds the session's lock.
    AlreadyWaiting,
}

/// The session id from a hook's stdin JSON (`{"session_id": "…", …}`).
pub fn session_from_hook_input(input: &str) -> Result<SessionId, WaitError> {
    let value: serde_json::Value =
        serde_json::from_str(input).map_err(|e| WaitError::HookInput(e.to_string()))?;
    let id = value
        .get("session_id")
        .and_then(|v| v.as_str())
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| WaitError::HookInput("no \"session_id\" string".into()))?;
    Ok(SessionId::new(id.trim())?)
}

/// Blocks until `session` has unread messages or `timeout` passes (never, without one).
pub fn wait(
    home: &Home,
    session: &SessionId,
    timeout: Option<Duration>,
) -> Result<Outcome, WaitError> {
    let dir = home.session(session)?;
    let lock_path = dir.wait_lock();
    let lock_err = |source| WaitError::Lock {
        path: lock_path.clone(),
        source,
    };
    create_private_dir(dir.path()).map_err(lock_err)?;
    let lock = private_file(&lock_path, false).map_err(lock_err)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(Outcome::AlreadyWaiting),
        Err(TryLockError::Error(e)) => return Err(lock_err(e)),
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let woken_path = dir.woken();
    let woken = load_woken(&woken_path);
    loop {
        let unread = ReadState::load(&dir)?.unread()?;
        // Under a Claude Code with an inbox socket, the MCP server writes messages
        // there: the hook announces only what the host did not deliver, and never a
        // message it took ([`crate::host_inbox::HandoverFile`]).
        let handover = HandoverFile::load(&dir);
        let handing_over = handover.as_ref().is_some_and(HandoverFile::handing_over);
        let unread: Vec<InboxEntry> = unread
            .into_iter()
            .filter(|e| {
                handover
                    .as_ref()
                    .is_none_or(|h| h.hook_announces(&woken_key(e), handing_over))
            })
            .collect();
        let (announced, new): (Vec<InboxEntry>, Vec<InboxEntry>) = unread
            .into_iter()
            .partition(|e| woken.contains(&woken_key(e)) || woken.contains(&e.msg_id));
        if !new.is_empty() {
            // Remember what is still unread, so the file only holds live ids.
            let ids: Vec<String> = announced.iter().chain(&new).map(woken_key).collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let keep = ids.len().saturating_sub(MAX_WOKEN);
            save_woken(&woken_path, &ids[keep..]).map_err(|source| WaitError::Woken {
                path: woken_path.clone(),
                source,
            })?;
            return Ok(Outcome::Messages {
                new,
                still_unread: announced.len(),
            });
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Outcome::TimedOut);
        }
        std::thread::sleep(POLL);
    }
    // `lock` is released when dropped (also if the process dies).
}

/// How `woken.json` names a message: `"<sender key>:<msg id>"`, as two senders may use
/// one id (a bare id, from older files, matches it from any sender).
fn woken_key(e: &InboxEntry) -> String {
    format!("{}:{}", e.sender, e.msg_id)
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Woken {
    version: u32,
    ids: Vec<String>,
}

/// The ids already announced (missing or unreadable: none — at worst a second wake-up).
fn load_woken(path: &Path) -> HashSet<String> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Woken>(&b).ok())
        .map(|w| w.ids.into_iter().take(MAX_WOKEN).collect())
        .unwrap_or_default()
}

fn save_woken(path: &Path, ids: &[&str]) -> io::Result<()> {
    let file = Woken {
        version: 1,
        ids: ids.iter().map(|s| (*s).to_owned()).collect(),
    };
    let bytes = serde_json::to_vec(&file).map_err(io::Error::other)?;
    write_atomically(path, &bytes)
}

/// The wake-up text: each new message labelled with its verified sender (petname from
/// `peers.json`, `self`, or "unpaired"), the count of older unread ones, then what to
/// do next.
pub fn render_messages(home: &Home, messages: &[InboxEntry], still_unread: usize) -> String {
    let policy = policy::load(home).unwrap_or_default();
    let own = peers::own_key(home);
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let mut out = format!(
        "interlink: {} new message{} for this session",
        messages.len(),
        plural(messages.len())
    );
    if still_unread > 0 {
        out.push_str(&format!(
            " ({still_unread} earlier message{} still unread)",
            plural(still_unread)
        ));
    }
    out.push_str(".\n\n");
    let names = match &own {
        Some(o) => render::Names::new(&policy, o),
        None => render::Names::peers_only(&policy),
    };
    for e in messages.iter().take(MAX_PRINTED) {
        out.push_str(&render::message_text(e, &names));
        out.push_str("\n\n");
    }
    if messages.len() > MAX_PRINTED {
        out.push_str(&format!("…and {} more.\n\n", messages.len() - MAX_PRINTED));
    }
    let any_from_user = messages.iter().any(|e| render::from_user(e, &names));
    out.push_str(&format!(
        "Each message's text is between its own random <<<msg-… and msg-…>>> fences, every \
         line after \"| \"; only the header above a fence is from interlink. The text {}. \
         Read the messages with receive_messages and acknowledge_messages once handled.",
        render::whose_words(any_from_user)
    ));
    out
}

#[cfg(test)]
#[path = "stop_hook_tests.rs"]
mod tests;
