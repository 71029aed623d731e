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
mod tests {
    use interlink_core::Identity;

    use super::*;

    fn entry(id: usize, to: &IdentityKey) -> SentEntry {
        SentEntry {
            msg_id: format!("{id:032x}"),
            to_key: to.to_hex(),
            to_session: "s".into(),
            state: State::Queued,
            task_id: None,
            status: None,
            in_reply_to: None,
            text: String::new(),
            truncated: false,
            sent_at: id as u64,
            delivered_at: None,
            read_at: None,
            not_kept: None,
            held_by: None,
            group: None,
            thread: None,
        }
    }

    fn addr(id: &IdentityKey, session: &str) -> SessionAddr {
        SessionAddr {
            key: *id,
            session: interlink_core::SessionId::new(session).unwrap(),
        }
    }

    #[test]
    fn a_later_state_without_a_delivered_receipt_sets_the_delivery_time() {
        let bob = Identity::from_seed(&[2; 32]).public();
        let mut log = SentLog::default();
        for i in 0..3 {
            log.record(entry(i, &bob));
        }
        let id = |i: usize| format!("{i:032x}");
        // Queued → read: delivered then, too.
        assert!(log.mark_read(&id(0), &bob, 7));
        let e = log.get(&id(0)).unwrap();
        assert_eq!(
            (e.state, e.delivered_at, e.read_at),
            (State::Read, Some(7), Some(7))
        );
        // Queued → host_queued: likewise; the late delivered receipt changes nothing.
        assert!(log.mark_host_queued(&id(1), &bob, 8));
        assert!(!log.mark_delivered(&id(1), &addr(&bob, "s"), 9));
        assert!(log.mark_read(&id(1), &bob, 10));
        let e = log.get(&id(1)).unwrap();
        assert_eq!(
            (e.state, e.delivered_at, e.read_at),
            (State::Read, Some(8), Some(10))
        );
        // Delivered first: the later states keep its time.
        assert!(log.mark_delivered(&id(2), &addr(&bob, "s"), 3));
        assert!(log.mark_host_queued(&id(2), &bob, 4));
        assert!(log.mark_read(&id(2), &bob, 5));
        assert_eq!(log.get(&id(2)).unwrap().delivered_at, Some(3));
    }

    /// A group message is one entry per copy; its thread finds them all, and each copy
    /// moves on by its own receipts.
    #[test]
    fn a_group_thread_lists_its_copies() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::at(tmp.path());
        let bob = Identity::from_seed(&[2; 32]).public();
        let carol = Identity::from_seed(&[3; 32]).public();
        let thread = "ab".repeat(16);
        let mut log = SentLog::default();
        for (i, to) in [(1, &bob), (2, &carol)] {
            let mut e = entry(i, to);
            e.group = Some("team".into());
            e.thread = Some(thread.clone());
            log.record(e);
        }
        log.record(entry(3, &bob));
        assert!(log.mark_delivered(&format!("{:032x}", 1), &addr(&bob, "s"), 5));
        let states: Vec<(String, State)> = log
            .in_thread(&thread)
            .map(|e| (e.to_key.clone(), e.state))
            .collect();
        assert_eq!(
            states,
            [
                (bob.to_hex(), State::Delivered),
                (carol.to_hex(), State::Queued)
            ]
        );
        log.save(&dir).unwrap();
        let again = SentLog::load(&dir);
        assert_eq!(again.in_thread(&thread).count(), 2);
        assert_eq!(again.get(&format!("{:032x}", 3)).unwrap().thread, None);
    }

    #[test]
    fn states_move_forward_and_the_log_is_bounded_and_saved() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::at(tmp.path());
        let bob = Identity::from_seed(&[2; 32]).public();
        let eve = Identity::from_seed(&[3; 32]).public();
        let mut log = SentLog::load(&dir);
        for i in 0..=MAX_SENT {
            log.record(entry(i, &bob));
        }
        assert!(log.get(&format!("{:032x}", 0)).is_none());
        let id = format!("{:032x}", 5);
        // A read receipt signed by someone else does not count.
        assert!(!log.mark_read(&id, &eve, 1));
        // Nor a delivered receipt from another identity, or another session of bob's.
        assert!(!log.mark_delivered(&id, &addr(&eve, "s"), 1));
        assert!(!log.mark_delivered(&id, &addr(&bob, "other"), 1));
        assert!(log.mark_delivered(&id, &addr(&bob, "s"), 1));
        assert!(!log.mark_host_queued(&id, &eve, 2));
        assert!(log.mark_host_queued(&id, &bob, 2));
        assert!(log.mark_read(&id, &bob, 2));
        assert!(!log.mark_host_queued(&id, &bob, 3));
        // Read never goes back to delivered.
        assert!(!log.mark_delivered(&id, &addr(&bob, "s"), 3));
        assert_eq!(log.get(&id).unwrap().delivered_at, Some(1));
        log.save(&dir).unwrap();
        assert!(!log.is_dirty());
        let again = SentLog::load(&dir);
        assert_eq!(again.get(&id).unwrap().state, State::Read);
        assert_eq!(again.iter().count(), MAX_SENT);

        let mut e = entry(9, &bob);
        e.set_text(&"é".repeat(MAX_SENT_TEXT));
        assert!(e.truncated && e.text.len() <= MAX_SENT_TEXT);
    }

    #[test]
    fn an_id_recorded_again_replaces_its_entry_and_an_evicted_id_is_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::at(tmp.path());
        let bob = Identity::from_seed(&[2; 32]).public();
        let mut log = SentLog::default();
        for i in 0..MAX_SENT {
            log.record(entry(i, &bob));
        }
        // Recorded again (a queued copy receipted, say): one entry, now the newest.
        let mut again = entry(3, &bob);
        again.state = State::Delivered;
        log.record(again);
        assert_eq!(log.iter().count(), MAX_SENT);
        assert_eq!(log.iter().filter(|e| e.sent_at == 3).count(), 1);
        assert_eq!(log.iter().last().unwrap().state, State::Delivered);
        // The oldest is pushed out by the next one, and with it every way to find it.
        let oldest = format!("{:032x}", 0);
        log.record(entry(MAX_SENT, &bob));
        assert!(log.get(&oldest).is_none());
        assert!(!log.mark_delivered(&oldest, &addr(&bob, "s"), 1));
        // Sent again under the same id after it was pushed out: found again.
        log.record(entry(0, &bob));
        assert!(log.mark_delivered(&oldest, &addr(&bob, "s"), 1));
        // The index holds what the log holds, no more: it is bounded with it.
        assert_eq!(log.ids.len(), MAX_SENT);
        assert!(log.entries.iter().all(|e| log.ids.contains(&e.msg_id)));
        // A file that holds an id twice (written by hand, say) loads as one entry each,
        // the later one kept.
        let mut twice: VecDeque<SentEntry> = [entry(7, &bob), entry(8, &bob)].into();
        let mut later = entry(7, &bob);
        later.state = State::Read;
        twice.push_back(later);
        let file = File {
            version: VERSION,
            sent: twice,
        };
        SentLog::write(&dir, &serde_json::to_vec(&file).unwrap()).unwrap();
        let loaded = SentLog::load(&dir);
        assert_eq!(loaded.iter().count(), 2);
        assert_eq!(
            loaded.get(&format!("{:032x}", 7)).unwrap().state,
            State::Read
        );
        assert!(!loaded.is_dirty());
    }
}
