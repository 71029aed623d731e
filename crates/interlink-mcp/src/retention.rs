//! Ended sessions leave: a session directory nobody runs, with nothing unread in its
//! inbox and nothing waiting in its outbox, is removed once it has been idle for
//! [`RETENTION_MS`] — the mailbox retention, after which nothing addressed to it is
//! kept on the overlay either. Swept when a session starts, at most [`MAX_SWEPT`]
//! directories looked at per sweep.
//!
//! A session with unread mail stays whatever its age (its conversation may be resumed,
//! and `interlink-p2p inbox` still shows it); so does one that another process holds
//! (its lock is taken for the check, so it cannot start while it is removed).

use std::{path::Path, time::SystemTime};

use interlink_core::SessionId;
use tracing::{debug, info};

use crate::{
    paths::{Home, SessionDir, session_of_dir_name},
    read_state::ReadState,
};

/// How long an ended session's directory is kept after its last change.
pub(crate) const RETENTION_MS: u64 = interlink_core::limits::MAILBOX_RETENTION_MS;
/// Most session directories one sweep looks at.
pub(crate) const MAX_SWEPT: usize = 256;

/// Removes the ended, idle, fully read session directories of `home` other than
/// `keep`'s; returns the ids removed. `now` is the file system's time (the
/// directories' idle age); `clock` stamps the locks taken.
pub(crate) fn sweep(
    home: &Home,
    keep: &SessionId,
    now: SystemTime,
    clock: interlink_net::Clock,
) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(home.sessions()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten().take(MAX_SWEPT) {
        let name = entry.file_name();
        let Some(id) = name.to_str() else { continue };
        if session_of_dir_name(id).as_ref() == Some(keep) || !entry.path().is_dir() {
            continue;
        }
        if idle_since(&entry.path())
            .and_then(|t| now.duration_since(t).ok())
            .is_none_or(|idle| idle.as_millis() < u128::from(RETENTION_MS))
        {
            continue;
        }
        let dir = SessionDir::at(entry.path());
        // Held while checking and removing: a process starting this session waits or
        // fails rather than running in a directory being deleted.
        let Ok(lock) = dir.claim("retention", clock.now_ms()) else {
            continue;
        };
        let unread = ReadState::load(&dir)
            .and_then(|r| r.unread())
            .map_or(1, |u| u.len());
        let outbox_empty = interlink_store::outbox::Outbox::open(dir.path())
            .map(|o| o.is_empty())
            .unwrap_or(false);
        if unread > 0 || !outbox_empty {
            debug!(session = id, unread, outbox_empty, "ended session kept");
            continue;
        }
        drop(lock);
        match std::fs::remove_dir_all(dir.path()) {
            Ok(()) => {
                info!(
                    session = id,
                    "removed an ended session, idle past retention"
                );
                removed.push(id.to_owned());
            }
            Err(e) => debug!(session = id, "removing an ended session: {e}"),
        }
    }
    removed
}

/// The newest modification time of the directory and the files in it.
fn idle_since(dir: &Path) -> Option<SystemTime> {
    let mut newest = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
            newest = newest.max(t);
        }
    }
    Some(newest)
}

#[cfg(test)]
#[path = "retention_tests.rs"]
mod tests;
