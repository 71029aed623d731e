//! The knocks a session's trust gate holds for the operator, as a small file in the
//! session's inbox directory (`knocks_held.json`), so the agent side can show them and
//! keep them across a restart of the process.
//!
//! A knock carries no text: who is asking (verified), from which session, and the
//! name it suggests (unverified). The file mirrors the gate's bounded knock queue
//! ([`interlink_core::limits::KNOCK_QUEUE_CAPACITY`], at most one knock per identity)
//! and is replaced atomically (at most every quarter second: the node coalesces the
//! writes of a burst of knocks), so a stranger knocking over and over rewrites a
//! bounded file rather than growing the inbox.

use std::path::Path;

use interlink_core::trust::Knock;
use serde::{Deserialize, Serialize};

/// File name of the held knocks in the session's inbox directory.
pub const KNOCKS_FILE: &str = "knocks_held.json";

/// One held knock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldKnock {
    /// The identity asking to pair, 64 hex digits.
    pub sender: String,
    pub sender_fingerprint: String,
    /// The session that knocked (where an acceptance goes).
    pub sender_session: String,
    /// The name it suggests for itself (unverified).
    pub name: Option<String>,
    /// The knock's id, 32 hex digits.
    pub msg_id: String,
    /// When it was signed (ms since the Unix epoch).
    pub ts: u64,
    /// The invite secret the knock carried, opened (32 hex digits): the agent side
    /// admits the knock at once if this user issued that invite and it is unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite: Option<String>,
}

impl From<&Knock> for HeldKnock {
    fn from(k: &Knock) -> Self {
        Self {
            sender: k.sender.to_hex(),
            sender_fingerprint: k.fingerprint().to_string(),
            sender_session: k.sender_session.to_string(),
            name: k.name.clone(),
            msg_id: k.msg_id.to_string(),
            ts: k.ts,
            invite: None,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    knocks: Vec<HeldKnock>,
}

/// The knocks held for the session whose inbox is in `dir` (missing or unreadable:
/// none), oldest first.
pub fn load(dir: &Path) -> Vec<HeldKnock> {
    std::fs::read(dir.join(KNOCKS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<File>(&b).ok())
        .map(|f| f.knocks)
        .unwrap_or_default()
}

/// Replaces the file with `knocks` (a temporary file renamed over it, not synced).
///
/// Not synced: the file mirrors the gate's queue and is rewritten as knocks arrive; a
/// held knock lost to a machine crash (before the agent side copied it) only means its
/// stranger has to knock again, while syncing cost every knock an fsync on the node's
/// thread — which a flood of strangers turned into everyone's latency.
pub fn save(dir: &Path, knocks: &[HeldKnock]) -> std::io::Result<()> {
    let file = File {
        version: 1,
        knocks: knocks.to_vec(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    crate::atomic::write_file_unsynced(&dir.join(KNOCKS_FILE), &bytes)
}

#[cfg(test)]
#[path = "knocks_tests.rs"]
mod tests;
