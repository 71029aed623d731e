//! What this session sent and where each message stands, as the sender can see it:
//! `queued` (held in the recipient's mailbox) → `delivered` (the recipient's node
//! receipted it: durably in its inbox) → `host_queued` (handed to its agent host: a
//! channel notification, a Codex turn) → `read` (its agent acknowledged it and a read
//! receipt came back). States only move forward.
//!
//! The log is bounded ([`MAX_SENT`] messages, the oldest dropped; [`MAX_SENT_TEXT`]
//! bytes of each text kept for `conversation_history`) and kept in `sent.json` in the
//! session's directory, written atomically by [`SentLog::save`]. Sending must stay
//! cheap, so the server saves it in the background a moment after a change
//! ([`crate::serve`]) rather than on every send.

use std::{
    collections::{HashSet, VecDeque},
    io,
};

use interlink_core::{IdentityKey, wire::SessionAddr};
use serde::{Deserialize, Serialize};

use crate::{files::write_atomically, paths::SessionDir};
/// Most messages the log keeps.
pub const MAX_SENT: usize = 1024;
/// Most bytes of a message's text the log keeps.
pub const MAX_SENT_TEXT: usize = 2048;
const VERSION: u32 = 1;

/// Where a sent message stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Waiting in this session's outbox and the recipient's mailbox (DHT or relay).
    Queued,
    /// It will not be delivered: the recipient refused it for good when it was
    /// retried, or did not collect it within the mailbox retention. (A receipt that
    /// comes after all still moves it on.)
    NotKept,
    /// The recipient's node receipted it.
    Delivered,
    /// The recipient session handed it to its agent host.
    HostQueued,
    /// The recipient's agent acknowledged it.
    Read,
}

impl State {
    /// The state's name as the tools show it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::NotKept => "not_kept",
            State::Delivered => "delivered",
            State::HostQueued => "host_queued",
            State::Read => "read",
        }
    }
}

/// One sent message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentEntry {
    /// Its id (32 hex digits).
    pub msg_id: String,
    /// The recipient identity (64 hex digits).
    pub to_key: String,
    /// The recipient session.
    pub to_session: String,
    /// Where it stands.
    pub state: State,
    pub task_id: Option<String>,
    /// Its task status (`canceled`, …).
    pub status: Option<String>,
    /// The message it answered.
    pub in_reply_to: Option<String>,
    /// Its text, cut to [`MAX_SENT_TEXT`] bytes.
    pub text: String,
    /// Whether the text was cut.
    #[serde(default)]
    pub truncated: bool,
    /// When it was sent (ms since the Unix epoch).
    pub sent_at: u64,
    /// When the recipient's node receipted it.
    pub delivered_at: Option<u64>,
    /// When the read receipt arrived.
    pub read_at: Option<u64>,
    /// Why it was not kept (state `not_kept`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_kept: Option<String>,
    /// Where a queued message was held when `queued` was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<HeldBy>,
    /// The group this copy was sent to (one entry per recipient session of a group
    /// message), or the group of the thread a direct reply continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The thread of its group (32 hex digits), shared by every copy and the replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// Where a queued message was held when `queued` was answered: committed to this
/// session's outbox, and how many relays and connected peers its mailbox copy was sent
/// to (sent, not confirmed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBy {
    /// In this session's durable outbox.
    pub outbox: bool,
    /// Relays the mailbox copy was handed to.
    pub relays_asked: usize,
    /// Connected peers the mailbox copy was put to.
    pub peers_asked: usize,
}

impl SentEntry {
    /// Keeps at most [`MAX_SENT_TEXT`] bytes of `text` (on a character boundary).
    pub fn set_text(&mut self, text: &str) {
        let mut end = text.len().min(MAX_SENT_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.text = text[..end].to_owned();
        self.truncated = end < text.len();
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    sent: VecDeque<SentEntry>,
}

/// The log, oldest first.
#[derive(Debug, Default)]
pub struct SentLog {
    entries: VecDeque<SentEntry>,
    /// The ids in `entries`: every send records one, and a scan of the whole log to
    /// find it absent was most of what recording cost.
    ids: HashSet<String>,
    dirty: bool,
}

impl SentLog {
    /// Loads the log of the session in `dir` (missing or unreadable: empty).
    pub fn load(dir: &SessionDir) -> Self {
        let entries = std::fs::read(dir.sent_log())
            .ok()
            .and_then(|b| serde_json::from_slice::<File>(&b).ok())
            .map(|f| f.sent)
            .unwrap_or_default();
        // Recorded one by one, so the file is held to the log's rules (one entry per id,
        // at most MAX_SENT) whatever wrote it.
        let mut log = Self::default();
        for entry in entries {
            log.record(entry);
        }
        log.dirty = false;
        log
    }

    /// Writes the log if it changed since the last save.
    pub fn save(&mut self, dir: &SessionDir) -> io::Result<()> {
        match self.take_snapshot() {
            Some(bytes) => Self::write(dir, &bytes).inspect_err(|_| self.dirty = true),
            None => Ok(()),
        }
    }

    /// The encoded log if it changed since the last snapshot (then it counts as saved:
    /// call [`SentLog::mark_dirty`] if writing it fails). Lets a caller write the file
    /// without holding the log's lock.
    pub fn take_snapshot(&mut self) -> Option<Vec<u8>> {
        if !self.dirty {
            return None;
        }
        let file = File {
            version: VERSION,
            sent: self.entries.clone(),
        };
        let bytes = serde_json::to_vec(&file).ok()?;
        self.dirty = false;
        Some(bytes)
    }

    /// Writes an encoded log ([`SentLog::take_snapshot`]) for the session in `dir`.
    pub fn write(dir: &SessionDir, bytes: &[u8]) -> io::Result<()> {
        write_atomically(&dir.sent_log(), bytes)
    }

    /// Marks the log as changed (a write failed).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Whether a change waits to be saved.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Adds a sent message, dropping the oldest beyond [`MAX_SENT`].
    pub fn record(&mut self, entry: SentEntry) {
        if !self.ids.insert(entry.msg_id.clone()) {
            self.entries.retain(|e| e.msg_id != entry.msg_id);
        }
        self.entries.push_back(entry);
        while self.entries.len() > MAX_SENT {
            if let Some(oldest) = self.entries.pop_front() {
                self.ids.remove(&oldest.msg_id);
            }
        }
        self.dirty = true;
    }

    /// The entry of `msg_id` that `matches`, searched newest first: receipts come
    /// for what was sent last.
    fn newest_mut(
        &mut self,
        msg_id: &str,
        matches: impl Fn(&SentEntry) -> bool,
    ) -> Option<&mut SentEntry> {
        if !self.ids.contains(msg_id) {
            return None;
        }
        self.entries
            .iter_mut()
            .rev()
            .find(|e| e.msg_id == msg_id && matches(e))
    }

    /// The recipient session `by` receipted `msg_id` (after it was queued): marks it
    /// delivered if it went to `by` and is still queued. A receipt proves only that its
    /// signer holds the id, so one from any other session does not count.
    pub fn mark_delivered(&mut self, msg_id: &str, by: &SessionAddr, now: u64) -> bool {
        let key = by.key.to_hex();
        match self.newest_mut(msg_id, |e| {
            e.to_key == key && e.to_session == by.session.as_str()
        }) {
            Some(e) if e.state <= State::NotKept => {
                e.state = State::Delivered;
                e.delivered_at = Some(now);
                self.dirty = true;
                true
            }
            _ => false,
        }
    }

    /// The node gave up on queued `msg_id` to `to` (refused for good, or expired):
    /// marks it `not_kept` with `reason` if it is still only queued.
    pub fn mark_not_kept(&mut self, msg_id: &str, to: &SessionAddr, reason: &str) -> bool {
        let key = to.key.to_hex();
        match self.newest_mut(msg_id, |e| {
            e.to_key == key && e.to_session == to.session.as_str()
        }) {
            Some(e) if e.state == State::Queued => {
                e.state = State::NotKept;
                e.not_kept = Some(reason.to_owned());
                self.dirty = true;
                true
            }
            _ => false,
        }
    }

    /// A hand-over receipt for `msg_id` signed by `by`: marks it `host_queued` if it
    /// went to `by` and is not further along. Handed over implies delivered: a message
    /// whose delivered receipt never came (or comes later) gets its delivery time now.
    pub fn mark_host_queued(&mut self, msg_id: &str, by: &IdentityKey, now: u64) -> bool {
        let by = by.to_hex();
        match self.newest_mut(msg_id, |e| e.to_key == by) {
            Some(e) if e.state < State::HostQueued => {
                e.delivered_at.get_or_insert(now);
                e.state = State::HostQueued;
                self.dirty = true;
                true
            }
            _ => false,
        }
    }

    /// A read receipt for `msg_id` signed by `by`: marks it read if it went to `by`.
    /// Read implies delivered: the delivery time is set too if it was never marked.
    pub fn mark_read(&mut self, msg_id: &str, by: &IdentityKey, now: u64) -> bool {
        let by = by.to_hex();
        match self.newest_mut(msg_id, |e| e.to_key == by) {
            Some(e) if e.state != State::Read => {
                e.delivered_at.get_or_insert(now);
                e.state = State::Read;
                e.read_at = Some(now);
                self.dirty = true;
                true
            }
            _ => false,
        }
    }

    /// The entry for `msg_id`.
    pub fn get(&self, msg_id: &str) -> Option<&SentEntry> {
        if !self.ids.contains(msg_id) {
            return None;
        }
        self.entries.iter().rev().find(|e| e.msg_id == msg_id)
    }

    /// The copies this session sent in group thread `thread`, oldest first: every
    /// recipient session of every group message (and direct reply) in it.
    pub fn in_thread<'a>(&'a self, thread: &'a str) -> impl Iterator<Item = &'a SentEntry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.thread.as_deref() == Some(thread))
    }

    /// All entries, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &SentEntry> + '_ {
        self.entries.iter()
    }
}

#[cfg(test)]
#[path = "sent_log_tests.rs"]
mod tests;
