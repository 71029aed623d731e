//! What the agent has consumed of a session's inbox: `read.json` next to the inbox.
//!
//! The inbox (`inbox.jsonl`, written by the node) is append-only for its readers; this
//! file records how far the agent has read it. It holds a logical `offset` (see
//! `interlink_net::inbox`) — every line before it is consumed — and the ids of messages
//! after the offset that were acknowledged out of order. Acknowledging moves the offset
//! past the longest consumed prefix, so the id set stays small when messages are
//! acknowledged roughly in order, and it is capped ([`MAX_CONSUMED_IDS`]) when they are
//! not.
//!
//! The offset is also what lets the node compact: lines before it may move out of
//! the hot file into the archive. Lines that moved out unconsumed (older than the
//! mailbox retention) count as consumed: the offset is never below the hot file's base.
//!
//! A message is its (sender, id): the messages acknowledged out of order are kept as
//! `"<sender key>:<msg id>"`, so another sender's message reusing an id stays unread.
//! The agent acknowledges by id: when two senders' unread messages share one, that
//! consumes both (and each sender gets its read receipt). A bare `"<msg id>"` (files of
//! version 1) stands for that id from any sender.
//!
//! Only the MCP server writes the file (atomically: temporary file, fsync, rename —
//! without the fsyncs for messages pushed to the agent host, see [`Durability`]);
//! `interlink-p2p wait` reads it to know what is unread. A missing file means nothing
//! was consumed yet.
//!
//! Only `message` entries are shown to the agent; other kinds (pairing and goodbye
//! notices the node records) count as consumed when the offset moves past them.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

use interlink_core::{IdentityKey, MsgId, wire::EnvelopeKind};
use interlink_net::inbox::{
    CONSUMED_CURSOR_FILE, INBOX_FILE, InboxEntry, InboxError, bounds, read_positioned_from,
    saved_index_has,
};
use serde::{Deserialize, Serialize};

use crate::files::{write_atomically, write_replacing};

/// File name of the read state inside a session's directory.
pub const READ_STATE_FILE: &str = CONSUMED_CURSOR_FILE;
/// Most message ids acknowledged ahead of an older unread message that the state
/// remembers; an acknowledgement beyond it is refused until older messages are
/// acknowledged.
pub const MAX_CONSUMED_IDS: usize = 4096;
/// Version of the file format (2: consumed entries name their sender).
const VERSION: u32 = 2;

/// How hard a change of the read state is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Synced before returning: the agent acknowledged these messages, and they must
    /// never be shown again, also after a crash.
    Synced,
    /// Replaced atomically but not synced: messages handed to the agent host (channel
    /// notifications). A crash of the machine may hand them over again (at least
    /// once), which is cheaper than two fsyncs per message on the hot path.
    Lazy,
}

/// Reading or changing the read state failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadStateError {
    /// The read-state file could not be read or written.
    #[error("read state {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The read-state file is not valid.
    #[error("read state {} is not valid: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The inbox could not be read.
    #[error(transparent)]
    Inbox(#[from] InboxError),
}

/// Acknowledging messages failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    /// Too many messages acknowledged ahead of an older unread one.
    #[error(
        "too many messages acknowledged out of order (at most {MAX_CONSUMED_IDS}); \
         acknowledge the oldest unread messages first"
    )]
    TooManyOutOfOrder,
    /// The state could not be read or written.
    #[error(transparent)]
    State(#[from] ReadStateError),
}

/// What [`ReadState::acknowledge`] did with the ids it was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acked {
    /// Unread messages now consumed.
    pub consumed: Vec<MsgId>,
    /// Ids already consumed before (acknowledging twice is harmless).
    pub already: Vec<MsgId>,
    /// Ids that name no message in the inbox.
    pub unknown: Vec<MsgId>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    offset: u64,
    consumed: BTreeSet<String>,
}

/// The read state of one session's inbox.
#[derive(Debug)]
pub struct ReadState {
    inbox: PathBuf,
    path: PathBuf,
    offset: u64,
    consumed: BTreeSet<Key>,
}

/// A message of the inbox: its sender (`None`: any, a version 1 entry) and id.
type Key = (Option<IdentityKey>, MsgId);

fn key_of(e: &InboxEntry) -> Option<Key> {
    Some((e.sender.parse().ok(), e.msg_id.parse().ok()?))
}

fn parse_key(text: &str) -> Option<Key> {
    match text.split_once(':') {
        Some((sender, id)) => Some((Some(sender.parse().ok()?), id.parse().ok()?)),
        None => Some((None, text.parse().ok()?)),
    }
}

fn key_text((sender, id): &Key) -> String {
    match sender {
        Some(s) => format!("{}:{id}", s.to_hex()),
        None => id.to_string(),
    }
}

/// Whether `key` is consumed in `set` (by its sender's entry or an any-sender one).
fn is_consumed(set: &BTreeSet<Key>, key: &Key) -> bool {
    set.contains(key) || set.contains(&(None, key.1))
}

impl ReadState {
    /// Loads the state of the inbox in `session_dir` (a missing file: nothing read).
    pub fn load(session_dir: &Path) -> Result<Self, ReadStateError> {
        let path = session_dir.join(READ_STATE_FILE);
        let file = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<File>(&bytes).map_err(|source| {
                ReadStateError::Invalid {
                    path: path.clone(),
                    source,
                }
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => File::default(),
            Err(source) => return Err(ReadStateError::Io { path, source }),
        };
        let consumed = file.consumed.iter().filter_map(|k| parse_key(k)).collect();
        let mut state = Self {
            inbox: session_dir.join(INBOX_FILE),
            path,
            offset: file.offset,
            consumed,
        };
        // An inbox ending before the offset was replaced: read it from its start (the
        // ids consumed still hide what was read). An offset before the hot file's base
        // is one whose lines expired into the archive unconsumed: they count as read.
        let (base, end) = bounds(&state.inbox)?;
        if state.offset > end || state.offset < base {
            state.offset = base;
        }
        Ok(state)
    }

    /// The unread messages, oldest first, reading from `hint` when it lies past the
    /// recorded offset (the end of a prefix already known to hold nothing unread), and
    /// the end of the longest prefix now known to hold nothing unread — the next
    /// call's hint. Receipts and consumed messages never turn unread, so a session that
    /// never acknowledges does not re-read its whole inbox on every call.
    pub fn unread_from(&self, hint: u64) -> Result<(Vec<InboxEntry>, u64), ReadStateError> {
        let (_, end) = bounds(&self.inbox)?;
        let start = if hint > self.offset && hint <= end {
            hint
        } else {
            self.offset
        };
        let (entries, _) = read_positioned_from(&self.inbox, start)?;
        let mut clean = start;
        let mut unread = Vec::new();
        for (e, end) in entries {
            if self.is_unread(&e) {
                unread.push(e);
            } else if unread.is_empty() {
                clean = end;
            }
        }
        Ok((unread, clean))
    }

    /// The unread messages, oldest first.
    pub fn unread(&self) -> Result<Vec<InboxEntry>, ReadStateError> {
        let (entries, _) = read_positioned_from(&self.inbox, self.offset)?;
        Ok(entries
            .into_iter()
            .map(|(e, _)| e)
            .filter(|e| self.is_unread(e))
            .collect())
    }

    fn is_unread(&self, e: &InboxEntry) -> bool {
        e.kind == EnvelopeKind::Message
            && key_of(e).is_some_and(|k| !is_consumed(&self.consumed, &k))
    }

    /// Marks `ids` consumed, durably, and moves the offset past the longest consumed
    /// prefix of the inbox. Ids consumed before are reported, not refused.
    pub fn acknowledge(&mut self, ids: &[MsgId]) -> Result<Acked, AckError> {
        self.acknowledge_with(ids, Durability::Synced)
    }

    /// [`ReadState::acknowledge`], written as `durability` says.
    pub fn acknowledge_with(
        &mut self,
        ids: &[MsgId],
        durability: Durability,
    ) -> Result<Acked, AckError> {
        let (entries, _) =
            read_positioned_from(&self.inbox, self.offset).map_err(ReadStateError::from)?;
        let unread: Vec<Key> = entries
            .iter()
            .filter(|(e, _)| self.is_unread(e))
            .filter_map(|(e, _)| key_of(e))
            .collect();
        let mut acked = Acked::default();
        let mut consumed = self.consumed.clone();
        for id in ids {
            // Every unread message with this id, whoever sent it.
            let mut newly = false;
            for key in unread.iter().filter(|(_, i)| i == id) {
                newly |= consumed.insert(*key);
            }
            if newly {
                acked.consumed.push(*id);
            } else if acked.consumed.contains(id) || acked.already.contains(id) {
                // Listed twice in one call.
            } else if consumed.iter().any(|(_, i)| i == id) || self.before_offset(id)? {
                acked.already.push(*id);
            } else {
                acked.unknown.push(*id);
            }
        }
        // Move the offset past every leading entry that is consumed or not a message.
        let mut offset = self.offset;
        let mut passed = 0;
        for (e, end) in &entries {
            let done = e.kind != EnvelopeKind::Message
                || key_of(e).is_none_or(|k| is_consumed(&consumed, &k));
            if !done {
                break;
            }
            offset = *end;
            passed += 1;
        }
        // Only messages after the offset need naming: the rest (passed now, or expired
        // into the archive) can never turn unread. So the set stays small, and a
        // message arriving later under a consumed id is not mistaken for the old one.
        let after: BTreeSet<Key> = entries[passed..]
            .iter()
            .filter_map(|(e, _)| key_of(e))
            .collect();
        consumed.retain(|k| match k {
            (Some(_), _) => after.contains(k),
            (None, id) => after.iter().any(|(_, i)| i == id),
        });
        if consumed.len() > MAX_CONSUMED_IDS {
            return Err(AckError::TooManyOutOfOrder);
        }
        if offset != self.offset || consumed != self.consumed {
            self.save(offset, &consumed, durability)?;
            self.offset = offset;
            self.consumed = consumed;
        }
        Ok(acked)
    }

    /// Whether `id` is in the part of the inbox before the offset (consumed): in the
    /// hot file between its base and the offset, or in the node's saved index (every
    /// line moved to the archive within the index's time-to-live). Neither reads the
    /// history; an id older than that reads as unknown.
    fn before_offset(&self, id: &MsgId) -> Result<bool, ReadStateError> {
        let (base, _) = bounds(&self.inbox)?;
        if self.offset > base {
            let (entries, _) = read_positioned_from(&self.inbox, base)?;
            let text = id.to_string();
            if entries
                .iter()
                .take_while(|(_, end)| *end <= self.offset)
                .any(|(e, _)| e.msg_id == text)
            {
                return Ok(true);
            }
        }
        if base == 0 {
            return Ok(false);
        }
        let dir = self.inbox.parent().unwrap_or(Path::new("."));
        saved_index_has(dir, id).map_err(|source| ReadStateError::Io {
            path: dir.join(interlink_net::inbox::INDEX_FILE),
            source,
        })
    }

    fn save(
        &self,
        offset: u64,
        consumed: &BTreeSet<Key>,
        durability: Durability,
    ) -> Result<(), ReadStateError> {
        let file = File {
            version: VERSION,
            offset,
            consumed: consumed.iter().map(key_text).collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|source| ReadStateError::Invalid {
            path: self.path.clone(),
            source,
        })?;
        let write = match durability {
            Durability::Synced => write_atomically,
            Durability::Lazy => write_replacing,
        };
        write(&self.path, &bytes).map_err(|source| ReadStateError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use interlink_net::inbox::Inbox;

    use super::*;

    /// An inbox line from a fixed sender, with text `text <id>` (shared by the tests
    /// of the modules that read the inbox).
    pub(crate) fn entry(id: MsgId, kind: EnvelopeKind) -> InboxEntry {
        InboxEntry {
            msg_id: id.to_string(),
            sender: "aa".repeat(32),
            sender_fingerprint: "0000-0000-0000".into(),
            sender_session: "s".into(),
            reply_to: format!("{}#s", "aa".repeat(32)),
            kind,
            task_id: None,
            status: None,
            in_reply_to: None,
            sent_at: 1,
            received_at: 2,
            text: Some(format!("text {id}")),
            name: None,
        }
    }

    fn id(n: u8) -> MsgId {
        MsgId::from_bytes([n; 16])
    }

    fn ids(entries: &[InboxEntry]) -> Vec<String> {
        entries.iter().map(|e| e.msg_id.clone()).collect()
    }

    #[test]
    fn unread_from_skips_a_prefix_with_nothing_unread() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        inbox
            .append(id(1), &entry(id(1), EnvelopeKind::HostQueued))
            .unwrap();
        inbox
            .append(id(2), &entry(id(2), EnvelopeKind::Read))
            .unwrap();
        inbox
            .append(id(3), &entry(id(3), EnvelopeKind::Message))
            .unwrap();
        let state = ReadState::load(dir.path()).unwrap();
        let (unread, clean) = state.unread_from(0).unwrap();
        assert_eq!(ids(&unread), vec![id(3).to_string()]);
        assert!(clean > 0, "the two receipts are a clean prefix");
        // From the hint: the same answer without the prefix.
        let (again, clean_again) = state.unread_from(clean).unwrap();
        assert_eq!(ids(&again), vec![id(3).to_string()]);
        assert_eq!(clean_again, clean);
        // A hint past the end of the file (inbox replaced) is ignored.
        let (all, _) = state.unread_from(u64::MAX).unwrap();
        assert_eq!(ids(&all), vec![id(3).to_string()]);
    }

    #[test]
    fn acknowledged_messages_stay_consumed_across_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        for n in 1..=3 {
            inbox
                .append(id(n), &entry(id(n), EnvelopeKind::Message))
                .unwrap();
        }
        inbox
            .append(id(9), &entry(id(9), EnvelopeKind::Goodbye))
            .unwrap();
        let mut state = ReadState::load(dir.path()).unwrap();
        assert_eq!(ids(&state.unread().unwrap()).len(), 3);

        // Out of order: the newest first; the offset cannot move yet.
        let acked = state.acknowledge(&[id(3), id(7)]).unwrap();
        assert_eq!((acked.consumed, acked.unknown), (vec![id(3)], vec![id(7)]));
        assert_eq!(state.offset, 0);
        let state2 = ReadState::load(dir.path()).unwrap();
        assert_eq!(
            ids(&state2.unread().unwrap()),
            [id(1).to_string(), id(2).to_string()]
        );

        // The oldest two: the offset moves past all four lines (the goodbye too), and
        // no ids need remembering.
        let acked = state.acknowledge(&[id(1), id(2), id(3)]).unwrap();
        assert_eq!(acked.consumed, vec![id(1), id(2)]);
        assert_eq!(acked.already, vec![id(3)]);
        let state = ReadState::load(dir.path()).unwrap();
        assert!(state.unread().unwrap().is_empty());
        assert!(state.consumed.is_empty());
        assert!(state.offset > 0);
        let mut state = state;
        let again = state.acknowledge(&[id(1)]).unwrap();
        assert_eq!(again.already, vec![id(1)]);

        // A new message after the offset is unread.
        inbox
            .append(id(4), &entry(id(4), EnvelopeKind::Message))
            .unwrap();
        assert_eq!(ids(&state.unread().unwrap()), [id(4).to_string()]);
    }

    fn from(sender: &str, n: u8) -> InboxEntry {
        let mut e = entry(id(n), EnvelopeKind::Message);
        e.sender = sender.repeat(32);
        e.reply_to = format!("{}#s", sender.repeat(32));
        e
    }

    #[test]
    fn one_id_from_two_senders_is_acknowledged_together_and_receipted_to_each() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        inbox.append(id(1), &from("aa", 1)).unwrap();
        inbox.append(id(1), &from("bb", 1)).unwrap();
        inbox.append(id(2), &from("aa", 2)).unwrap();
        let mut state = ReadState::load(dir.path()).unwrap();
        let unread = state.unread().unwrap();
        assert_eq!(unread.len(), 3, "both senders' messages are there");
        let acked = state.acknowledge(&[id(1)]).unwrap();
        assert_eq!(acked.consumed, vec![id(1)]);
        let receipts = crate::receipts::read_receipts_for(&unread, &acked.consumed);
        let to: Vec<String> = receipts.iter().map(|r| r.to.key.to_hex()).collect();
        assert_eq!(to, ["aa".repeat(32), "bb".repeat(32)]);
        let state = ReadState::load(dir.path()).unwrap();
        assert_eq!(ids(&state.unread().unwrap()), [id(2).to_string()]);
    }

    #[test]
    fn another_senders_message_under_an_acknowledged_id_stays_unread() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        inbox.append(id(1), &from("aa", 1)).unwrap();
        inbox.append(id(2), &from("bb", 2)).unwrap();
        let mut state = ReadState::load(dir.path()).unwrap();
        // Out of order: the offset stays before id 1, id 2 is remembered with its sender.
        state.acknowledge(&[id(2)]).unwrap();
        inbox.append(id(2), &from("aa", 2)).unwrap();
        let state = ReadState::load(dir.path()).unwrap();
        let unread = state.unread().unwrap();
        let got: Vec<(String, String)> = unread
            .iter()
            .map(|e| (e.sender[..2].to_owned(), e.msg_id.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("aa".into(), id(1).to_string()),
                ("aa".into(), id(2).to_string())
            ]
        );
        // A version 1 file's bare id still means "any sender".
        std::fs::write(
            dir.path().join(READ_STATE_FILE),
            format!(r#"{{"version":1,"offset":0,"consumed":["{}"]}}"#, id(2)),
        )
        .unwrap();
        let state = ReadState::load(dir.path()).unwrap();
        assert_eq!(ids(&state.unread().unwrap()), [id(1).to_string()]);
    }

    /// Fills the inbox with `n` messages of about 1 KiB (enough to compact).
    fn fill(inbox: &mut Inbox, first: u8, n: u8) {
        for i in first..first + n {
            let mut e = entry(id(i), EnvelopeKind::Message);
            e.text = Some(format!("{i} {}", "x".repeat(1100)));
            e.received_at = interlink_net::now_ms();
            let batch: Vec<(MsgId, InboxEntry)> = (0..2u8)
                .map(|k| {
                    let mut e = e.clone();
                    // Two senders per id: 2 * n lines.
                    e.sender = if k == 0 { "aa" } else { "bb" }.repeat(32);
                    (id(i), e)
                })
                .collect();
            inbox
                .append_many(batch.iter().map(|(i, e)| (*i, e)))
                .unwrap();
        }
    }

    #[test]
    fn acknowledged_messages_stay_known_after_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path())
            .unwrap()
            .with_compact_min_bytes(200 * 1024);
        fill(&mut inbox, 0, 150);
        let mut state = ReadState::load(dir.path()).unwrap();
        let all: Vec<MsgId> = (0..150).map(id).collect();
        for chunk in all.chunks(100) {
            state.acknowledge(chunk).unwrap();
        }
        assert!(state.unread().unwrap().is_empty());
        assert!(inbox.compact(interlink_net::now_ms()).unwrap());
        assert!(inbox.base() > 0);
        fill(&mut inbox, 150, 2);
        let mut state = ReadState::load(dir.path()).unwrap();
        assert_eq!(state.unread().unwrap().len(), 4);
        // An archived id is known (the saved index), not unknown.
        let acked = state.acknowledge(&[id(3), id(150), id(200)]).unwrap();
        assert_eq!(acked.already, vec![id(3)]);
        assert_eq!(acked.consumed, vec![id(150)]);
        assert_eq!(acked.unknown, vec![id(200)]);
        assert_eq!(ids(&state.unread().unwrap()), vec![id(151).to_string(); 2]);
    }

    #[test]
    fn messages_expired_into_the_archive_unconsumed_count_as_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path())
            .unwrap()
            .with_compact_min_bytes(200 * 1024);
        fill(&mut inbox, 0, 150);
        let mut state = ReadState::load(dir.path()).unwrap();
        // One acknowledged out of order: its id must not stay in the state forever.
        state.acknowledge(&[id(5)]).unwrap();
        let later = interlink_net::now_ms() + interlink_net::inbox::HOT_RETENTION_MS + 1000;
        assert!(inbox.compact(later).unwrap());
        fill(&mut inbox, 150, 1);
        let mut state = ReadState::load(dir.path()).unwrap();
        assert_eq!(state.offset, inbox.base());
        assert_eq!(ids(&state.unread().unwrap()), vec![id(150).to_string(); 2]);
        state.acknowledge(&[id(150)]).unwrap();
        assert!(state.consumed.is_empty());
    }

    #[test]
    fn a_missing_inbox_has_nothing_unread() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ReadState::load(dir.path()).unwrap();
        assert!(state.unread().unwrap().is_empty());
        assert_eq!(state.acknowledge(&[id(1)]).unwrap().unknown, vec![id(1)]);
    }

    #[test]
    fn a_lazy_acknowledgement_is_as_visible_as_a_synced_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        for n in 1..=2 {
            inbox
                .append(id(n), &entry(id(n), EnvelopeKind::Message))
                .unwrap();
        }
        let mut state = ReadState::load(dir.path()).unwrap();
        let acked = state.acknowledge_with(&[id(1)], Durability::Lazy).unwrap();
        assert_eq!(acked.consumed, vec![id(1)]);
        // Another reader (the Stop hook, a restart) sees it at once.
        let again = ReadState::load(dir.path()).unwrap();
        assert_eq!(ids(&again.unread().unwrap()), [id(2).to_string()]);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
